/* The conv family's private header: the geometry, the im2col / activation
 * / weight addressing and the plan state that the convolution's files
 * share (conv.c holds them and the entry point), and the entry of each
 * pass and path:
 *   forward.c          forward as a GEMM over im2col panels
 *   backward_input.c   input gradient as a GEMM, then col2im
 *   backward_weight.c  weight gradient as a GEMM
 *   implicit.c         float32 forward and stride-1 input gradient as an
 *                      implicit GEMM over activation pointers
 *   implicit_weight.c  float32 weight gradient the same way
 *   direct.c           all three passes for few output channels per group
 *   reference.c        all three passes as plain loop nests
 * See conv.c for the method. */
#ifndef NRT_KERNELS_CONV_H
#define NRT_KERNELS_CONV_H

#include <stdlib.h>
#include "kernels/common/gemm_ukernel.h"
#include "nrt/ops/conv.h"

/* sizes {N, G, Cog, Cig, O[3], I[3], K[3]} and aux {S[3], P[3], D[3]};
 * L / LI pixels per output / input plane, KK taps per channel, Kdim taps
 * per group (the im2col rows). */
typedef struct nrt_conv_geom {
  int64_t N, G, Cog, Cig;
  int64_t O[3], I[3], K[3], S[3], P[3], D[3];
  int64_t L, LI, KK, Kdim;
} nrt_conv_geom;

/* ---- passes and paths ------------------------------------------------------ */

nrt_status nrt_conv_forward(const nrt_conv_geom *g, const nrt_launch *l);         /* forward.c */
nrt_status nrt_conv_backward_input(const nrt_conv_geom *g, const nrt_launch *l);  /* backward_input.c */
nrt_status nrt_conv_backward_weight(const nrt_conv_geom *g, const nrt_launch *l); /* backward_weight.c */
nrt_status nrt_conv_direct(const nrt_conv_geom *g, const nrt_launch *l);          /* direct.c */
/* implicit.c: whether the implicit GEMM takes this launch (float32 operands,
 * AVX-512 or baseline ISA; forward, or a stride-1 input gradient with
 * finite weights), and the launch through it. */
bool nrt_conv_implicit_applies(const nrt_conv_geom *g, const nrt_launch *l);
nrt_status nrt_conv_implicit(const nrt_conv_geom *g, const nrt_launch *l);
/* implicit_weight.c: the same for the weight gradient (float32 operands,
 * AVX-512 or baseline ISA, more than 4 input channels per group). */
bool nrt_conv_implicit_weight_applies(const nrt_conv_geom *g, const nrt_launch *l);
nrt_status nrt_conv_implicit_weight(const nrt_conv_geom *g, const nrt_launch *l);
nrt_status nrt_conv_reference(const nrt_conv_geom *g, const nrt_launch *l, bool ints); /* reference.c */

/* ---- addressing ------------------------------------------------------------ */

/* Channel c of image n of an activation operand. */
#define NRT_CONV_ACT(o, n, c) ((char *)(o)->data + (n) * (o)->strides[0] + (c) * (o)->strides[1])

/* A kernel tap: its input channel (within the group), the offset k*D - P
 * it adds to o*S along each dim, and the output columns ow of a row whose
 * input column lies inside [0, I[2]). */
typedef struct nrt_conv_tap {
  int64_t ci, off[3], lo, hi;
} nrt_conv_tap;

void nrt_conv_tap_init(const nrt_conv_geom *g, int64_t kk, nrt_conv_tap *t);

/* Output pixels [p0, p0 + len) of one image walked an output row at a
 * time for one tap (im2col and col2im): a run is the next n pixels of the
 * range, [done, done + n), starting at output column ow of the row that
 * reads input depth id and row ih; columns [a, b) of it read inside the
 * input row, and `inside` says whether the run reads anything at all.
 *   for (nrt_conv_run r = nrt_conv_run_first(g, t, p0, len); r.done < len;
 *        nrt_conv_run_next(g, t, len, &r)) ...
 * Small feature maps make short rows, so a step is a few compares, no
 * divisions. */
typedef struct nrt_conv_run {
  int64_t done, n, ow, a, b;
  int64_t oh, id, ih;
  bool inside;
} nrt_conv_run;

static inline void nrt_conv_run_set(const nrt_conv_geom *g, const nrt_conv_tap *t, int64_t len, nrt_conv_run *r) {
  r->n = nrt_min_i64(g->O[2] - r->ow, len - r->done);
  r->a = nrt_max_i64(r->ow, t->lo);
  r->b = nrt_min_i64(r->ow + r->n, t->hi);
  r->inside = r->id >= 0 && r->id < g->I[0] && r->ih >= 0 && r->ih < g->I[1] && r->b > r->a;
}

static inline nrt_conv_run nrt_conv_run_first(const nrt_conv_geom *g, const nrt_conv_tap *t, int64_t p0,
                                              int64_t len) {
  const int64_t O1 = g->O[1], O2 = g->O[2];
  int64_t od = p0 / (O1 * O2), rem = p0 - od * O1 * O2;
  nrt_conv_run r = {.done = 0};
  r.oh = rem / O2;
  r.ow = rem - r.oh * O2;
  r.id = od * g->S[0] + t->off[0];
  r.ih = r.oh * g->S[1] + t->off[1];
  if (len > 0) nrt_conv_run_set(g, t, len, &r);
  return r;
}

static inline void nrt_conv_run_next(const nrt_conv_geom *g, const nrt_conv_tap *t, int64_t len, nrt_conv_run *r) {
  r->done += r->n;
  r->ow = 0;
  r->ih += g->S[1];
  if (++r->oh == g->O[1]) {
    r->oh = 0;
    r->ih = t->off[1];
    r->id += g->S[0];
  }
  if (r->done < len) nrt_conv_run_set(g, t, len, r);
}

/* dst[j] = col[tap][q0 + j] for the im2col columns q = n * L + pixel of
 * group grp (across images): float32 values (converted), or with raw16
 * the 16-bit elements' bits (bfloat16 pair panels). */
void nrt_conv_im2col(const nrt_conv_geom *g, const nrt_conv_tap *t, const nrt_operand *x, int64_t grp, int64_t q0,
                     int64_t len, void *dst, bool raw16);

/* Whether a plane of extents e[3] with byte strides st[0..2] is one
 * arithmetic run (pixel p at p * st[2]). */
static inline bool nrt_conv_plane_linear(const int64_t *e, const int64_t *st) {
  return (e[1] == 1 || st[1] == e[2] * st[2]) && (e[0] == 1 || st[0] == e[1] * e[2] * st[2]);
}

/* Loads (store = false) or stores activation values a[n, c, pixel] for
 * columns q in [q0, q0 + len), q = n * npix + pixel, pixel planes of
 * extents e[3]. */
void nrt_conv_act_cols(const nrt_operand *a, const int64_t *e, int64_t c, int64_t q0, int64_t len, float *buf,
                       bool store);

/* Whether a weight row's taps (ci, kd, kh, kw) are one run with step
 * ws[4] (dims of size 1 may have any stride). */
bool nrt_conv_w_taps_linear(const nrt_conv_geom *g, const int64_t *ws);
/* Loads or stores weight row o over taps [kk0, kk0 + len). */
void nrt_conv_w_row(const nrt_conv_geom *g, const nrt_operand *w, int64_t o, int64_t kk0, int64_t len, float *buf,
                    bool store);
/* Weight row o as a float32 array when the taps are one unit-stride run
 * (standard layouts); NULL otherwise. */
const float *nrt_conv_w_row_f32(const nrt_conv_geom *g, const nrt_operand *w, int64_t o);

/* Whether any of v[0..n) is NaN or infinite (exponent all ones), branch-free. */
static inline bool nrt_conv_any_nonfinite(const float *v, int64_t n) {
  uint32_t acc = 0;
  for (int64_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, v + i, sizeof u);
    acc |= (u & 0x7f800000u) + 0x00800000u;
  }
  return acc & 0x80000000u;
}

/* Element i of a 1-d operand (the bias) as float. */
static inline float nrt_conv_load1(const nrt_operand *o, int64_t i) {
  float v;
  nrt_load_f32(&v, (const char *)o->data + i * o->strides[0], 0, o->dtype, 1);
  return v;
}

/* ---- GEMM plan state ------------------------------------------------------- */

typedef struct nrt_conv_plan {
  const nrt_conv_geom *g;
  const nrt_launch *l;
  const nrt_gemm_ukernel *uk;
  int64_t MR, NR, KC, NT;
  float *wp;        /* packed weights (forward: W panels; input grad: W^T panels) */
  int64_t wp_unit;  /* floats per packing unit (group, or group x channel block) */
  int64_t mp;       /* forward: row panels per group */
  int64_t ntiles;   /* forward: column tiles per group */
  int64_t tpi;      /* forward: tiles per image (0: tiles run across images); input
                     * grad: images per task */
  int64_t mpb, nmb; /* forward: row panels per block of output channels, blocks */
  float *bshared;   /* forward with channel blocks: the tiles' B panels, generated once */
  int64_t cb, nblk; /* input grad: channels per block, blocks per group; weight grad: rows per block */
  int64_t nsplit;   /* weight grad: column (batch) slices */
  int64_t cog_pad, kdim_pad;
  float *part;      /* weight grad: partial results [nsplit][G][kdim_pad][cog_pad] */
  _Atomic int failed;
} nrt_conv_plan;

/* A zeroed plan for g and l with the micro-kernel (the bfloat16 pair
 * kernel when both inputs are bfloat16 and the CPU has AVX512_BF16, as
 * PyTorch's oneDNN bf16 convolutions; else float32 panels) and its block. */
void nrt_conv_plan_init(nrt_conv_plan *p, const nrt_conv_geom *g, const nrt_launch *l);
/* The launch's status once its tasks ran: out of memory when one failed
 * to get its `what`. */
nrt_status nrt_conv_plan_status(const nrt_conv_plan *p, const char *what);

/* Panel depth in 32-bit units: k values, or pairs of k for the bfloat16
 * micro-kernel (an odd last k pairs with zero). */
static inline int64_t nrt_conv_units(const nrt_conv_plan *p, int64_t k) {
  return p->uk->bf16_pairs ? (k + 1) / 2 : k;
}

/* 64-byte aligned floats (at least 16; panels are read with aligned loads). */
static inline float *nrt_conv_falloc(int64_t nfloats) {
  size_t bytes = (size_t)nrt_round_up(nfloats > 0 ? nfloats : 1, 16) * sizeof(float);
  return aligned_alloc(64, bytes);
}

/* A task's work buffers: aligned float arrays allocated and freed
 * together. nrt_conv_bufs_alloc gets b[i] of sizes[i] floats for i < n; on
 * failure it frees what it got, marks the plan failed and returns false. */
#define NRT_CONV_BUFS 5
typedef struct nrt_conv_bufs {
  float *b[NRT_CONV_BUFS];
} nrt_conv_bufs;
bool nrt_conv_bufs_alloc(nrt_conv_plan *p, nrt_conv_bufs *w, int n, const int64_t *sizes);
void nrt_conv_bufs_free(nrt_conv_bufs *w);

/* Pair unit of two bfloat16 values held exactly in float32. */
static inline uint32_t nrt_conv_bf16_pair(float lo, float hi) {
  return (uint32_t)nrt_k_f32_to_bf16(lo) | (uint32_t)nrt_k_f32_to_bf16(hi) << 16;
}

/* A row of w pair units: d[j] = (r0[j], r1[j]) for j < n (r1 NULL: zero
 * high halves), zero units for n <= j < w. */
static inline void nrt_conv_pair_row(uint32_t *d, const float *r0, const float *r1, int64_t n, int64_t w) {
  for (int64_t j = 0; j < n; j++) d[j] = nrt_conv_bf16_pair(r0[j], r1 ? r1[j] : 0.0f);
  for (int64_t j = n; j < w; j++) d[j] = 0;
}

/* Copies one generated row (kc-slice row k of nt columns) into the NR-wide
 * B panels of a kc-deep slice, zero-padding the last panel. */
void nrt_conv_row_to_bpanels(const nrt_conv_plan *p, const float *row, int64_t nt, int64_t k, int64_t kc,
                             float *bp);
/* B panels from pairs of rows (depth k = the row index): unit (kp, j) =
 * (r0[j], r1[j]) (r1 NULL: zero), NR-wide panels of ku units. */
void nrt_conv_rows_to_bpanels_pairs(const nrt_conv_plan *p, const float *r0, const float *r1, int64_t nt,
                                    int64_t kp, int64_t ku, float *bp);

#endif
