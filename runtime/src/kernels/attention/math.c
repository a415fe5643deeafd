/* The CPU's math backend, replayed (SDPA_* with p3 = 1).
 *
 * Where PyTorch's CPU takes its math decomposition rather than its flash
 * kernel (a last dim not of unit stride, a value head dim unlike the
 * query's, a 3-d mask or one that requires grad), its answer at the edges
 * (sums of +-3.4e38 terms, 1e18-scale cancellations, inf and NaN) is
 * decided by the order of that decomposition's float32 operations:
 *
 *   q' = q * sqrt(scale), k' = k * sqrt(scale)      (16-bit inputs first
 *                                                      converted to float32)
 *   s  = bmm(q', k'^T) + mask                         (causal: a 0/-inf mask)
 *   P  = _safe_softmax(s)                             (0 for an all -inf row)
 *   out = bmm(P, v)
 *
 * and autograd's backward of it: dP = bmm(dO, v^T), dV = bmm(P^T, dO),
 * dS = (dP - sum_j dP_j P_j) * P, dq' = bmm(dS, k'), dk'^T = bmm(q'^T, dS),
 * then dq = dq' * sqrt(scale), dk = dk' * sqrt(scale).
 *
 * The glue sends a problem here only when every one of those bmm's has
 * M * N * K < 400: the CPU's bmm then runs ATen's plain loop (an
 * accumulator from 0, products rounded to float and added in k order),
 * not MKL (probed: 399 and below match that loop bit for bit, 400 not).
 * Softmax and its backward follow ATen's last-dim kernels
 * (_vec_softmax_lastdim, _vec_host_softmax_backward_lastdim): a NaN-
 * propagating maximum, Sleef's expf_u10, the sum in the vector reduction's
 * order (nrt_attn_vec_sum below), then x * (1 / sum); the backward's
 * sum_j dP_j P_j in the same order with the tail's multiply-add fused.
 * Probed against torch 2.13's CPU: bit-exact on rows of 1..70 keys with
 * edge values, NaN and all -inf rows, 1 and 2 threads.
 *
 * float64 runs at float32 precision, as every float64 op here: its inputs
 * are rounded to float32 first, which is what the CPU computes in float32.
 * Grouped heads are not sent here (the CPU's two ways of broadcasting a
 * key/value head sum dK before or after the scale). Plain loops only: the
 * problems are small by construction (fewer than 400 products per head). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/attention/attention.h"
#include "kernels/common/isa.h"

/* ---- the CPU's float32 softmax pieces ------------------------------------ */

static float pow2i(int q) {
  union { uint32_t u; float f; } v = {.u = (uint32_t)(q + 0x7f) << 23};
  return v.f;
}

/* Sleef's xexpf (expf_u10), which Vectorized<float>::exp calls: q =
 * rint(d / ln 2), a two-part Cody-Waite reduction and a degree-6
 * polynomial, each step a fused multiply-add; scaled by 2^q in two halves
 * so that subnormal results keep their bits. */
float nrt_attn_sleef_expf(float d) {
  if (isnan(d)) return d;
  if (d < -104.0f) return 0.0f;
  if (d > 104.0f) return INFINITY;
  int q = (int)rintf(d * 1.442695040888963407359924681001892137426645954152985934135449406931f);
  float s = fmaf((float)q, -0.693145751953125f, d);
  s = fmaf((float)q, -1.428606765330187045e-06f, s);
  float u = 0.000198527617612853646278381f;
  u = fmaf(u, s, 0.00139304355252534151077271f);
  u = fmaf(u, s, 0.00833336077630519866943359f);
  u = fmaf(u, s, 0.0416664853692054748535156f);
  u = fmaf(u, s, 0.166666671633720397949219f);
  u = fmaf(u, s, 0.5f);
  u = 1.0f + fmaf(s * s, u, s);
  int m = q >> 1;
  return u * pow2i(m) * pow2i(q - m);
}

/* Vectorized<float>::exp_u20, the flash forward's exp(s - max) over whole
 * vectors of keys (vec512/vec256 are the same steps): the argument is
 * clamped with min/max instructions, which return their second operand for
 * a NaN, so NaN (inf - inf at a row of +inf scores) becomes exp(88.72) =
 * 2^128 = inf rather than NaN, and the row's sum, lse and weights follow
 * from that (the scalar tail's expf keeps NaN). Below ln(FLT_MIN) it is 0.
 * Each step is one instruction, so the bits are the CPU's. */
float nrt_attn_exp_u20(float x) {
  const float ln_min = -87.3365402221679688f, ln_max = 88.7228393554687500f; /* 0xc2aeac50, 0x42b17218 */
  bool below = x < ln_min;                       /* ordered: false for NaN */
  float src = x < ln_max ? x : ln_max;           /* _mm512_min_ps(x, ln_max) */
  src = src > ln_min ? src : ln_min;             /* _mm512_max_ps(src, ln_min) */
  float fx = fmaf(src, 1.44269502162933349609f, 0.5f); /* log2(e), 0x3fb8aa3b */
  fx = floorf(fx);                               /* cvt toward -inf, back to float */
  float r = fmaf(-fx, 0.693147182464599609f, src); /* ln 2, 0x3f317218 */
  float y = fmaf(r, 0.00828929059f, 0.0418978221f);
  y = fmaf(r, y, 0.166676521f);
  y = fmaf(r, y, 0.499991506f);
  y = fmaf(r, y, 0.999999701f);
  y = fmaf(r, y, 1.0f);
  float two_n = below ? 0.0f : pow2i((int)(fx - 1.0f)); /* 2^(fx - 1): fx - 1 <= 127 */
  return y * two_n * 2.0f;
}

/* Vector lanes of float32 in the CPU's kernels: 16 on AVX-512 hosts, 8 else. */
static int64_t cpu_lanes(void) { return nrt_kernels_isa() >= NRT_ISA_AVX512 ? 16 : 8; }

/* at::vec::reduce_all / map2_reduce_all with +: fewer values than lanes
 * are added in order; otherwise lane l sums x[l], x[l + W], ... (the tail
 * of a partial vector with a fused multiply-add when the terms are
 * products a[i] * b[i], as the compiler fuses Vec::set(acc, acc + a * b)),
 * and the lanes are halved pairwise (l + W/2, then l + W/4, ...), the
 * vec_reduce_all shuffle tree. b NULL: the terms are a[i] themselves. */
float nrt_attn_vec_sum(const float *a, const float *b, int64_t n) {
  int64_t W = cpu_lanes();
  if (n < W) {
    float acc = b ? a[0] * b[0] : a[0];
    for (int64_t i = 1; i < n; i++) acc += b ? a[i] * b[i] : a[i];
    return acc;
  }
  float lane[16];
  for (int64_t l = 0; l < W; l++) lane[l] = b ? a[l] * b[l] : a[l];
  int64_t d = W;
  for (; d + W <= n; d += W)
    for (int64_t l = 0; l < W; l++) lane[l] += b ? a[d + l] * b[d + l] : a[d + l];
  for (int64_t l = 0; d + l < n; l++) lane[l] = b ? fmaf(a[d + l], b[d + l], lane[l]) : lane[l] + a[d + l];
  for (int64_t h = W / 2; h > 0; h /= 2)
    for (int64_t l = 0; l < h; l++) lane[l] += lane[l + h];
  return lane[0];
}

/* _safe_softmax of one row in place; returns log(sum exp(s - max)) + max. */
static float softmax_row(float *s, int64_t n) {
  bool dead = true, nan = false;
  float mx = -INFINITY;
  for (int64_t j = 0; j < n; j++) {
    dead = dead && s[j] == -INFINITY;
    if (isnan(s[j])) nan = true;
    else if (s[j] > mx) mx = s[j];
  }
  if (dead) { /* _safe_softmax: a row with every score -inf weighs 0 */
    for (int64_t j = 0; j < n; j++) s[j] = 0.0f;
    return -INFINITY;
  }
  if (nan) mx = NAN; /* vec::maximum propagates NaN */
  for (int64_t j = 0; j < n; j++) s[j] = nrt_attn_sleef_expf(s[j] - mx);
  float sum = nrt_attn_vec_sum(s, NULL, n), r = 1.0f / sum;
  for (int64_t j = 0; j < n; j++) s[j] *= r;
  return mx + logf(sum);
}

/* ---- one head ------------------------------------------------------------ */

typedef struct math_buf {
  float *qs, *ks, *v, *p, *out; /* out: [L, Ev] forward; [L, E] dq' backward */
  float *g, *dp, *dkt, *dk, *dv;
} math_buf;

static void buf_free(math_buf *w) {
  float *all[] = {w->qs, w->ks, w->v, w->p, w->out, w->g, w->dp, w->dkt, w->dk, w->dv};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
}

static float *floats(int64_t n) { return malloc((size_t)(n + 1) * sizeof(float)); }

static bool buf_init(math_buf *w, const nrt_attn_problem *p, bool backward) {
  int64_t L = p->L, S = p->S, E = p->E, Ev = p->Ev;
  memset(w, 0, sizeof *w);
  w->qs = floats(L * E);
  w->ks = floats(S * E);
  w->v = floats(S * Ev);
  w->p = floats(L * S);
  w->out = floats(L * (E > Ev ? E : Ev));
  if (!backward) return w->qs && w->ks && w->v && w->p && w->out;
  w->g = floats(L * Ev);
  w->dp = floats(L * S);
  w->dkt = floats(E * S);
  w->dk = floats(S * E);
  w->dv = floats(S * Ev);
  return w->qs && w->ks && w->v && w->p && w->out && w->g && w->dp && w->dkt && w->dk && w->dv;
}

/* A [R, C] row-major float32 copy of rows of a 4-d operand (float64
 * rounded to float32), times f in float32 when mul. */
static void load_rows(float *dst, const nrt_attn_view *t, int64_t b, int64_t h, int64_t R, int64_t C, float f,
                      bool mul) {
  for (int64_t r = 0; r < R; r++) {
    const char *row = nrt_attn_at(t, b, h, r);
    for (int64_t c = 0; c < C; c++) {
      float x = (float)nrt_ref_load_f64(row + c * t->s[3], t->dtype);
      dst[r * C + c] = mul ? x * f : x;
    }
  }
}

static void store_rows(const nrt_attn_view *t, int64_t b, int64_t h, const float *src, int64_t R, int64_t C,
                       float f, bool mul) {
  for (int64_t r = 0; r < R; r++) {
    char *row = nrt_attn_at(t, b, h, r);
    for (int64_t c = 0; c < C; c++) {
      float x = src[r * C + c];
      nrt_ref_store_f64(row + c * t->s[3], t->dtype, mul ? x * f : x);
    }
  }
}

/* ATen's small-bmm loop: c[i][j] = sum_k a(i, k) * b(k, j) from 0, in k
 * order, each product rounded to float before it is added. */
static void bmm_small(float *c, const float *a, int64_t ai, int64_t ak, const float *b, int64_t bk, int64_t bj,
                      int64_t M, int64_t N, int64_t K) {
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      float acc = 0.0f;
      for (int64_t k = 0; k < K; k++) acc += a[i * ai + k * ak] * b[k * bk + j * bj];
      c[i * N + j] = acc;
    }
}

/* q', k' and the softmaxed scores (mask added) of head (b, h) into w; the
 * rows' logsumexp into the lse operand when lse. */
static void head_probs(const nrt_attn_problem *p, int64_t b, int64_t h, math_buf *w, bool lse) {
  int64_t L = p->L, S = p->S, E = p->E;
  float sf = (float)sqrt(p->scale_d);
  load_rows(w->qs, &p->q, b, h, L, E, sf, true);
  load_rows(w->ks, &p->k, b, h, S, E, sf, true);
  bmm_small(w->p, w->qs, E, 1, w->ks, 1, E, L, S, E);
  for (int64_t i = 0; i < L; i++) {
    float *s = w->p + i * S;
    if (p->has_mask) {
      const char *m = nrt_attn_at(&p->mask, b, h, i);
      for (int64_t j = 0; j < S; j++) {
        const char *mj = m + j * p->mask.s[3];
        /* the CPU adds where(mask, 0, -inf): +inf or NaN under False is NaN */
        s[j] += p->mask_bool ? (*mj ? 0.0f : -INFINITY) : (float)nrt_ref_load_f64(mj, p->mask.dtype);
      }
    } else if (p->causal) { /* tril(ones(L, S)) as a 0/-inf mask, added */
      for (int64_t j = 0; j < S; j++) s[j] += j <= i ? 0.0f : -INFINITY;
    }
    float l = softmax_row(s, S);
    if (lse) *(float *)nrt_attn_at(&p->lse, b, h, i) = l;
  }
}

static void head_forward(const nrt_attn_problem *p, int64_t b, int64_t h, math_buf *w) {
  int64_t L = p->L, S = p->S, Ev = p->Ev;
  head_probs(p, b, h, w, true);
  load_rows(w->v, &p->v, b, h, S, Ev, 1.0f, false);
  bmm_small(w->out, w->p, S, 1, w->v, Ev, 1, L, Ev, S); /* out = P v */
  store_rows(&p->out, b, h, w->out, L, Ev, 1.0f, false);
}

/* dS of head (b, h); then either dS stored (ds_only) or dQ, dK, dV. */
static void head_backward(const nrt_attn_problem *p, int64_t b, int64_t h, math_buf *w, bool ds_only) {
  int64_t L = p->L, S = p->S, E = p->E, Ev = p->Ev;
  float sf = (float)sqrt(p->scale_d);
  head_probs(p, b, h, w, false);
  load_rows(w->v, &p->v, b, h, S, Ev, 1.0f, false);
  load_rows(w->g, &p->dout, b, h, L, Ev, 1.0f, false);
  bmm_small(w->dp, w->g, Ev, 1, w->v, 1, Ev, L, S, Ev); /* dP = dO v^T */
  for (int64_t i = 0; i < L; i++) {                    /* _softmax_backward_data */
    float *dp = w->dp + i * S;
    const float *pr = w->p + i * S;
    float sum = nrt_attn_vec_sum(dp, pr, S);
    for (int64_t j = 0; j < S; j++) dp[j] = (dp[j] - sum) * pr[j];
  }
  if (ds_only) {
    store_rows(&p->ds, b, h, w->dp, L, S, 1.0f, false);
    return;
  }
  bmm_small(w->dv, w->p, 1, S, w->g, Ev, 1, S, Ev, L); /* dV = P^T dO */
  store_rows(&p->dv, b, h, w->dv, S, Ev, 1.0f, false);
  bmm_small(w->out, w->dp, S, 1, w->ks, E, 1, L, E, S); /* dq' = dS k' */
  store_rows(&p->dq, b, h, w->out, L, E, sf, true);
  bmm_small(w->dkt, w->qs, 1, E, w->dp, S, 1, E, S, L); /* dk'^T = q'^T dS */
  for (int64_t j = 0; j < S; j++)
    for (int64_t e = 0; e < E; e++) w->dk[j * E + e] = w->dkt[e * S + j];
  store_rows(&p->dk, b, h, w->dk, S, E, sf, true);
}

/* ---- tasks ---------------------------------------------------------------- */

typedef struct math_ctx {
  const nrt_attn_problem *p;
  int mode; /* 0 forward, 1 dQ/dK/dV, 2 dS */
  atomic_int failed;
} math_ctx;

static void math_range(void *ctx, int64_t lo, int64_t hi) {
  math_ctx *c = ctx;
  const nrt_attn_problem *p = c->p;
  math_buf w;
  if (!buf_init(&w, p, c->mode != 0)) {
    atomic_store(&c->failed, 1);
    buf_free(&w);
    return;
  }
  for (int64_t t = lo; t < hi; t++) {
    int64_t b = t / p->Hq, h = t % p->Hq;
    if (c->mode == 0) head_forward(p, b, h, &w);
    else head_backward(p, b, h, &w, c->mode == 2);
  }
  buf_free(&w);
}

nrt_status nrt_attn_math(const nrt_attn_problem *p, int mode) {
  if (p->group != 1 || p->dropout)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                           "attention: the math order (p3 = 1) takes neither grouped heads nor dropout");
  math_ctx c = {.p = p, .mode = mode};
  atomic_init(&c.failed, 0);
  nrt_parallel_for(p->B * p->Hq, 1, math_range, &c);
  if (atomic_load(&c.failed))
    return nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY, "attention: out of memory for the math order's buffers");
  return NRT_SUCCESS;
}
