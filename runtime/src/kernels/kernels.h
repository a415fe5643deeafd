/* The kernels layer's interface to the api layer: one entry point per
 * kernel engine (nrt_kind), each called on a stream worker with a
 * validated descriptor. Each family folder keeps its internals in its own
 * private header; what families share is in kernels/common/. */
#ifndef NRT_KERNELS_KERNELS_H
#define NRT_KERNELS_KERNELS_H

#include "nrt/launch.h"

nrt_status nrt_pointwise_execute(const nrt_launch *launch); /* pointwise/ */
nrt_status nrt_reduce_execute(const nrt_launch *launch);    /* reduce/reduce.c */
nrt_status nrt_row_execute(const nrt_launch *launch);       /* reduce/row.c */
nrt_status nrt_gemm_execute(const nrt_launch *launch);      /* gemm/ */
nrt_status nrt_index_execute(const nrt_launch *launch);     /* index/ */
nrt_status nrt_norm_execute(const nrt_launch *launch);      /* norm/ */
nrt_status nrt_conv_execute(const nrt_launch *launch);      /* conv/ */
nrt_status nrt_pooling_execute(const nrt_launch *launch);   /* pooling/ */
nrt_status nrt_linalg_execute(const nrt_launch *launch);    /* linalg/ */
nrt_status nrt_resample_execute(const nrt_launch *launch);  /* resample/ */
nrt_status nrt_select_execute(const nrt_launch *launch);    /* select/ */
nrt_status nrt_segment_execute(const nrt_launch *launch);   /* segment/ */
nrt_status nrt_complex_execute(const nrt_launch *launch);   /* complex/ */
nrt_status nrt_attention_execute(const nrt_launch *launch); /* attention/ */
nrt_status nrt_rnn_execute(const nrt_launch *launch);       /* rnn/ */
nrt_status nrt_foreach_execute(const nrt_launch *launch);   /* foreach/ */
/* foreach/: the checks of a FOREACH descriptor and its table, which the
 * generic validation cannot see (api/foreach.c runs them at enqueue). */
nrt_status nrt_foreach_validate(const nrt_launch *launch);

/* ---- pointwise/fused.c: fused pointwise chains ---------------------------------
 * Not an op kind: a chain is not one nrt_launch (it has more operands than
 * a descriptor holds), so the program executor (compiler/run.c) calls this
 * engine directly. A chain is a list of pointwise launches over one
 * iteration space (ndim, sizes, outermost first), run tile by tile: a tile
 * is up to NRT_BLOCK elements along the innermost dim, and every member runs
 * on it before the next tile, through the pointwise engine's own row loop.
 * A member operand is either external (a pointer from the caller's array
 * plus the member's byte strides over the chain's dims) or a tile slot: an
 * L1 buffer of NRT_BLOCK elements in the operand's dtype, written by one
 * member and read by later ones, so an intermediate of the chain never
 * reaches memory. A tile holds exactly what the unfused store would have
 * written (float32/int64 values stay as they are; narrower dtypes are
 * rounded as the store rounds), which keeps results bit-identical to the
 * launches run one by one. Random ops are not fused. */
#define NRT_FUSED_MAX_TILES 16
#define NRT_FUSED_MAX_MEMBERS 64
typedef struct nrt_fused_member {
  /* op, compute dtype, scalars, params, aux; ndim and sizes are the chain's;
   * operand dtypes and strides (over the chain's dims); data unused. */
  nrt_launch launch;
  int16_t tile[NRT_MAX_OPERANDS];     /* tile slot, or -1 for external */
  int16_t external[NRT_MAX_OPERANDS]; /* index into the pointer array when external */
} nrt_fused_member;
typedef struct nrt_fused_chain {
  int ndim;
  int64_t sizes[NRT_MAX_DIMS];
  int nmembers;
  const nrt_fused_member *members;
  int ntiles;
  int nexternal;
} nrt_fused_chain;
/* external: nexternal pointers (each operand's element 0). Fails like the
 * pointwise engine (unsupported op, integer division by zero). */
nrt_status nrt_fused_execute(const nrt_fused_chain *chain, char *const *external);

#endif
