/* Shared by kernels/attention*.c only: the decoded attention problem and
 * the pieces both the reference and the blocked paths must agree on
 * (score masking, the dropout mask). Layouts: nrt/ops/attention.h. */
#ifndef NRT_ATTENTION_KERNELS_H
#define NRT_ATTENTION_KERNELS_H

#include "kernels/common/common.h"

/* One tensor operand: base pointer, dtype, byte strides {b, h, row, col}. */
typedef struct nrt_attn_view {
  char *data;
  nrt_dtype dtype;
  int64_t s[4];
} nrt_attn_view;

typedef struct nrt_attn_problem {
  int64_t B, Hq, Hk, L, S, E, Ev;
  int64_t group; /* Hq / Hk: query heads per key/value head */
  float scale;
  double scale_d;    /* s0 as given: the math order scales q and k by its sqrt */
  bool causal;
  bool math;         /* p3 = 1: the CPU's math backend's order (math.c) */
  bool has_mask, mask_bool;
  bool dropout;      /* dropout_p > 0 */
  double keep_prob;  /* 1 - dropout_p */
  float keep_scale;  /* 1 / (1 - dropout_p) */
  uint64_t seed, offset;
  nrt_attn_view q, k, v, mask;
  nrt_attn_view out, lse;          /* forward outputs; PREP inputs */
  nrt_attn_view dout, rowstat;     /* backward inputs (rowstat: at lse, s[3] = step to D) */
  nrt_attn_view dcopy;             /* PREP: where the float32 copy of dO goes */
  nrt_attn_view dq, dk, dv, ds;    /* backward outputs (ds.data NULL: none) */
} nrt_attn_problem;

static inline char *nrt_attn_at(const nrt_attn_view *t, int64_t b, int64_t h, int64_t r) {
  return t->data + b * t->s[0] + h * t->s[1] + r * t->s[2];
}

/* Dropout multipliers z[0..n) of row (b, h, i), keys j0..j0+n-1:
 * 1/(1-p) where kept, 0 where dropped. */
void nrt_attn_dropout(const nrt_attn_problem *p, int64_t b, int64_t h, int64_t i, int64_t j0,
                      int64_t n, float *z);

/* Adds the mask (and the causal limit) of row (b, h, i), keys j0..j0+n-1,
 * to scores s[0..n) (float32; -inf where not attended). */
void nrt_attn_mask_scores(const nrt_attn_problem *p, int64_t b, int64_t h, int64_t i, int64_t j0,
                          int64_t n, float *s);

/* PREP's row (b, h, i): dO in float32, lse and D into the rowstat. */
void nrt_attn_store_rowstat(const nrt_attn_problem *p, int64_t b, int64_t h, int64_t i, float lse, float d);

/* The blocked kernels (attention_blocked.c). */
nrt_status nrt_attn_forward_blocked(const nrt_attn_problem *p);
nrt_status nrt_attn_prep_blocked(const nrt_attn_problem *p); /* D from a recomputed float32 out */
nrt_status nrt_attn_backward_blocked(const nrt_attn_problem *p);    /* dQ, dK, dV in one pass */
nrt_status nrt_attn_backward_ds_blocked(const nrt_attn_problem *p); /* dS only */

/* Sleef's expf_u10, Vectorized<float>::exp on the CPU (math.c). */
float nrt_attn_sleef_expf(float d);

/* Vectorized<float>::exp_u20, the CPU flash forward's exp over whole
 * vectors of keys: NaN gives inf there (math.c). */
float nrt_attn_exp_u20(float x);

/* at::vec's reduce_all / map2_reduce_all with + (b NULL: the terms are
 * a[i], else a[i] * b[i]) in the CPU's lane order (math.c). */
float nrt_attn_vec_sum(const float *a, const float *b, int64_t n);

/* The kernel the CPU's float32 flash q k^T takes for score (i, j) of a block
 * of L queries and S keys with head dim E, and that kernel's sum (qk_order.c). */
typedef enum {
  NRT_ATTN_QK_OWN, /* not probed: neuron's order */
  NRT_ATTN_QK_SEQ,
  NRT_ATTN_QK_LANES,
  NRT_ATTN_QK_HEAD,
  NRT_ATTN_QK_TAIL,
  NRT_ATTN_QK_ATEN /* ATen's gemm loop (operands BLAS refuses) */
} nrt_attn_qk_kernel;
nrt_attn_qk_kernel nrt_attn_qk_kernel_of(int64_t L, int64_t S, int64_t E, int64_t i, int64_t j);
float nrt_attn_qk_dot(nrt_attn_qk_kernel kind, const float *q, const float *k, int64_t E);
/* The CPU's bfloat16 flash forward's q . k on an AVX512-BF16 Intel host;
 * vector: the block has one query or one key (qk_order.c). */
float nrt_attn_qk_dot_bf16(const float *q, const float *k, int64_t E, bool vector);

/* The CPU's math decomposition replayed (math.c), for problems whose
 * products are small: mode 0 the forward, 1 dQ/dK/dV, 2 dS. */
nrt_status nrt_attn_math(const nrt_attn_problem *p, int mode);

#endif
