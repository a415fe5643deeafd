/* Convolution kernels (NRT_KIND_CONV): grouped 1-3 d convolution, its
 * input gradient (which is also the transposed convolution) and its weight
 * gradient, as GEMMs over the im2col matrix.
 *
 * For one group, the im2col matrix `col` has a row per kernel tap
 * kk = (ci, kd, kh, kw) (Kdim = Cig * KD * KH * KW rows) and a column per
 * output pixel q of every image (q = n * L + pixel): col[kk][q] is the
 * input element tap kk of the window at q reads, or 0 in the padding.
 *   forward      y    = W (Cog x Kdim) @ col (Kdim x N*L)
 *   input grad   dcol = W^T (Kdim x Cog) @ dy (Cog x cols), then col2im:
 *                each dcol element is added to the input element it was
 *                read from
 *   weight grad  dW^T = col (Kdim x N*L) @ dy^T (N*L x Cog)
 * The matrix is never materialised: rows of it are generated, a KC-deep
 * slice at a time, straight into the GEMM's packed panels (forward: B
 * panels; weight grad: A panels), so a tile of it only lives in L1/L2. The
 * weights are packed once per launch. The micro-kernels are gemm.c's:
 * float32 panels for every dtype (converted while packing), or, when both
 * operands are bfloat16 and the CPU has AVX512_BF16, pair-packed bfloat16
 * panels for the vdpbf16ps kernel; both accumulate in float32, as
 * PyTorch's CPU convolutions do.
 *
 * Work split (tasks run on the kernel pool; none writes what another
 * writes):
 *   forward      (group, tile of output columns, block of output
 *                channels); columns run across images, so small feature
 *                maps still make wide tiles; with channel blocks, each
 *                tile's panels are generated once into a shared buffer;
 *   input grad   (images, group, block of input channels): col2im of
 *                different channels or images never touches the same
 *                element; small images are grouped into one tile;
 *   weight grad  (column slice, group, block of Kdim rows); column slices
 *                keep partial sums, added up in a final pass.
 * With one or two output channels per group (depthwise) a GEMM tile would
 * be mostly padding, so a direct path works tap by tap over whole planes.
 *
 * The reference path is a plain loop nest accumulating in double; it also
 * serves the degenerate shapes (an empty dimension) and integer dtypes
 * (wrapping int64 accumulation, as PyTorch's CPU integer convolution). */
#pragma GCC optimize("O3,no-trapping-math,no-math-errno")
#include <immintrin.h>
#include "kernels/conv/conv.h"

static nrt_status geom_init(const nrt_launch *l, nrt_conv_geom *g) {
  const char *op = nrt_op_name(l->op);
  if (l->ndim != 13)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: sizes are {N, G, Cog, Cig, O[3], I[3], K[3]}, got ndim %d",
                           op, l->ndim);
  if (l->noutputs != 1)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expected 1 output, got %d", op, l->noutputs);
  if (l->compute_dtype == NRT_BOOL) return nrt_kernel_fail(NRT_ERROR_UNSUPPORTED, "%s: not implemented for bool", op);
  const int64_t *s = l->sizes;
  g->N = s[0];
  g->G = s[1];
  g->Cog = s[2];
  g->Cig = s[3];
  for (int i = 0; i < 3; i++) {
    g->O[i] = s[4 + i];
    g->I[i] = s[7 + i];
    g->K[i] = s[10 + i];
    g->S[i] = l->aux[i];
    g->P[i] = l->aux[3 + i];
    g->D[i] = l->aux[6 + i];
    if (g->S[i] < 1 || g->D[i] < 1 || g->P[i] < 0 || g->K[i] < 1)
      return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                             "%s: dim %d: kernel %lld, stride %lld, padding %lld, dilation %lld", op, i,
                             (long long)g->K[i], (long long)g->S[i], (long long)g->P[i], (long long)g->D[i]);
    /* Fewer outputs than the input allows is fine: a transposed
     * convolution with output_padding >= stride has an input (its output)
     * longer than its outputs (its input) need. */
    int64_t span = g->I[i] + 2 * g->P[i] - g->D[i] * (g->K[i] - 1) - 1;
    int64_t most = span < 0 ? 0 : span / g->S[i] + 1;
    if (g->O[i] < 0 || g->O[i] > most)
      return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                             "%s: dim %d: output size %lld, but input %lld with kernel %lld, stride %lld, "
                             "padding %lld, dilation %lld gives at most %lld", op, i, (long long)g->O[i],
                             (long long)g->I[i], (long long)g->K[i], (long long)g->S[i], (long long)g->P[i],
                             (long long)g->D[i], (long long)most);
  }
  g->L = g->O[0] * g->O[1] * g->O[2];
  g->LI = g->I[0] * g->I[1] * g->I[2];
  g->KK = g->K[0] * g->K[1] * g->K[2];
  g->Kdim = g->Cig * g->KK;
  return NRT_SUCCESS;
}

/* ---- addressing ------------------------------------------------------------ */

void nrt_conv_tap_init(const nrt_conv_geom *g, int64_t kk, nrt_conv_tap *t) {
  int64_t r = kk % g->KK;
  int64_t k[3] = {r / (g->K[1] * g->K[2]), (r / g->K[2]) % g->K[1], r % g->K[2]};
  t->ci = kk / g->KK;
  for (int i = 0; i < 3; i++) t->off[i] = k[i] * g->D[i] - g->P[i];
  int64_t s = g->S[2], off = t->off[2], in = g->I[2];
  int64_t lo = off >= 0 ? 0 : nrt_cdiv(-off, s);
  int64_t hi = in - 1 - off < 0 ? 0 : (in - 1 - off) / s + 1;
  hi = nrt_min_i64(hi, g->O[2]);
  t->lo = nrt_min_i64(lo, hi);
  t->hi = hi;
}

/* dst[j] = col[tap][p0 + j] for pixels [p0, p0 + len) of one image; xc
 * points at the tap's input channel in that image. Each output row is
 * zeros, a strided run of the input row, zeros. Elements of es bytes:
 * float32 (converted from dt unless it is float32 already, then copied
 * inline), or raw 16-bit bits; inlined once for each so the copies have
 * constant sizes. */
static inline __attribute__((always_inline)) void im2col_img_es(const nrt_conv_geom *g, const nrt_conv_tap *t,
                                                                const char *xc, const int64_t *xs, nrt_dtype dt,
                                                                int64_t p0, int64_t len, char *dst, const int es) {
  const int64_t S2 = g->S[2], sx = S2 * xs[4];
  const bool copy = es == 2 || dt == NRT_FLOAT32;
  for (nrt_conv_run r = nrt_conv_run_first(g, t, p0, len); r.done < len; nrt_conv_run_next(g, t, len, &r)) {
    char *d = dst + r.done * es;
    if (!r.inside) {
      memset(d, 0, (size_t)(r.n * es));
      continue;
    }
    memset(d, 0, (size_t)((r.a - r.ow) * es));
    const char *src = xc + r.id * xs[2] + r.ih * xs[3] + (r.a * S2 + t->off[2]) * xs[4];
    char *dd = d + (r.a - r.ow) * es;
    int64_t m = r.b - r.a;
    if (copy && sx == es) {
      memcpy(dd, src, (size_t)(m * es));
    } else if (copy) {
      for (int64_t j = 0; j < m; j++) memcpy(dd + j * es, src + j * sx, es);
    } else {
      nrt_load_f32((float *)dd, src, sx, dt, m);
    }
    memset(d + (r.b - r.ow) * es, 0, (size_t)((r.ow + r.n - r.b) * es));
  }
}

void nrt_conv_im2col(const nrt_conv_geom *g, const nrt_conv_tap *t, const nrt_operand *x, int64_t grp, int64_t q0,
                     int64_t len, void *dst, bool raw16) {
  char *d = dst;
  while (len > 0) {
    int64_t n = q0 / g->L, p = q0 - n * g->L, m = nrt_min_i64(g->L - p, len);
    const char *xc = NRT_CONV_ACT(x, n, grp * g->Cig + t->ci);
    if (raw16) {
      im2col_img_es(g, t, xc, x->strides, x->dtype, p, m, d, 2);
      d += m * 2;
    } else {
      im2col_img_es(g, t, xc, x->strides, x->dtype, p, m, d, 4);
      d += m * 4;
    }
    q0 += m;
    len -= m;
  }
}

void nrt_conv_act_cols(const nrt_operand *a, const int64_t *e, int64_t c, int64_t q0, int64_t len, float *buf,
                       bool store) {
  int64_t npix = e[0] * e[1] * e[2];
  const int64_t *st = a->strides + 2;
  bool lin = nrt_conv_plane_linear(e, st);
  while (len > 0) {
    int64_t n = q0 / npix, p = q0 - n * npix, m = nrt_min_i64(npix - p, len);
    char *plane = NRT_CONV_ACT(a, n, c);
    /* runs of one row (or of the whole plane when it is linear) */
    for (int64_t pp = p; pp < p + m;) {
      int64_t k = p + m - pp;
      char *ptr = plane + pp * st[2];
      if (!lin) {
        int64_t d = pp / (e[1] * e[2]), r = pp % (e[1] * e[2]), h = r / e[2], w = r % e[2];
        k = nrt_min_i64(e[2] - w, k);
        ptr = plane + d * st[0] + h * st[1] + w * st[2];
      }
      if (store) nrt_store_f32(ptr, st[2], a->dtype, buf + (pp - p), k);
      else nrt_load_f32(buf + (pp - p), ptr, st[2], a->dtype, k);
      pp += k;
    }
    buf += m;
    q0 += m;
    len -= m;
  }
}

bool nrt_conv_w_taps_linear(const nrt_conv_geom *g, const int64_t *ws) {
  int64_t ext[4] = {g->Cig, g->K[0], g->K[1], g->K[2]}, want = ws[4];
  for (int i = 3; i >= 0; i--) {
    if (ext[i] == 1) continue;
    if (ws[1 + i] != want) return false;
    want *= ext[i];
  }
  return true;
}

void nrt_conv_w_row(const nrt_conv_geom *g, const nrt_operand *w, int64_t o, int64_t kk0, int64_t len, float *buf,
                    bool store) {
  const int64_t *ws = w->strides;
  /* Contiguous taps (any standard weight layout but channels-last): one
   * run; else runs of one kernel row. */
  bool lin = nrt_conv_w_taps_linear(g, ws);
  for (int64_t kk = kk0; kk < kk0 + len;) {
    int64_t m = kk0 + len - kk;
    char *ptr = (char *)w->data + o * ws[0] + kk * ws[4];
    if (!lin) {
      int64_t ci = kk / g->KK, r = kk % g->KK;
      int64_t kd = r / (g->K[1] * g->K[2]), kh = (r / g->K[2]) % g->K[1], kw = r % g->K[2];
      m = nrt_min_i64(g->K[2] - kw, m);
      ptr = (char *)w->data + o * ws[0] + ci * ws[1] + kd * ws[2] + kh * ws[3] + kw * ws[4];
    }
    if (store) nrt_store_f32(ptr, ws[4], w->dtype, buf + (kk - kk0), m);
    else nrt_load_f32(buf + (kk - kk0), ptr, ws[4], w->dtype, m);
    kk += m;
  }
}

const float *nrt_conv_w_row_f32(const nrt_conv_geom *g, const nrt_operand *w, int64_t o) {
  if (w->dtype != NRT_FLOAT32 || w->strides[4] != 4 || !nrt_conv_w_taps_linear(g, w->strides)) return NULL;
  return (const float *)((const char *)w->data + o * w->strides[0]);
}

/* ---- GEMM plan ------------------------------------------------------------- */

void nrt_conv_plan_init(nrt_conv_plan *p, const nrt_conv_geom *g, const nrt_launch *l) {
  memset(p, 0, sizeof *p);
  p->g = g;
  p->l = l;
  p->uk = nrt_gemm_ukernel_pick(l->operands[1].dtype, l->operands[2].dtype);
  p->MR = p->uk->mr;
  p->NR = p->uk->nr;
}

nrt_status nrt_conv_plan_status(const nrt_conv_plan *p, const char *what) {
  if (p->failed)
    return nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for %s", nrt_op_name(p->l->op), what);
  return NRT_SUCCESS;
}

bool nrt_conv_bufs_alloc(nrt_conv_plan *p, nrt_conv_bufs *w, int n, const int64_t *sizes) {
  bool ok = true;
  for (int i = 0; i < NRT_CONV_BUFS; i++) {
    w->b[i] = i < n ? nrt_conv_falloc(sizes[i]) : NULL;
    ok = ok && (i >= n || w->b[i]);
  }
  if (!ok) {
    nrt_conv_bufs_free(w);
    p->failed = 1;
  }
  return ok;
}

void nrt_conv_bufs_free(nrt_conv_bufs *w) {
  for (int i = 0; i < NRT_CONV_BUFS; i++) free(w->b[i]);
}

void nrt_conv_row_to_bpanels(const nrt_conv_plan *p, const float *row, int64_t nt, int64_t k, int64_t kc,
                             float *bp) {
  int64_t NR = p->NR;
  for (int64_t jp = 0; jp < nt; jp += NR) {
    float *d = bp + jp * kc + k * NR;
    int64_t cols = nrt_min_i64(NR, nt - jp);
    for (int64_t j = 0; j < cols; j++) d[j] = row[jp + j];
    for (int64_t j = cols; j < NR; j++) d[j] = 0.0f;
  }
}

void nrt_conv_rows_to_bpanels_pairs(const nrt_conv_plan *p, const float *r0, const float *r1, int64_t nt,
                                    int64_t kp, int64_t ku, float *bp) {
  int64_t NR = p->NR;
  for (int64_t jp = 0; jp < nt; jp += NR)
    nrt_conv_pair_row((uint32_t *)bp + jp * ku + kp * NR, r0 + jp, r1 ? r1 + jp : NULL, nrt_min_i64(NR, nt - jp), NR);
}

/* ---- values near the float limits ------------------------------------------
 * The fast paths sum float32 products in their own order, and so do the
 * CPU's kernels, in several (oneDNN picks a direct, brgemm, gemm or
 * reference implementation by shape, and the native path is im2col and
 * MKL): once a partial sum can pass FLT_MAX, whether it overflows, and
 * whether an overflowed -inf then meets an input's +inf (NaN), depends on
 * that order. Below the bound no order overflows, so the fast paths give
 * the CPU's non-finite values exactly; above it (inputs near 3.4e38, which
 * real data does not reach) the launch takes the loop nest, which sums in
 * double and rounds once, as the CPU does wherever its own order did not
 * overflow (fuzz seed 31415926: 16 of its 20 such cases). */

/* Largest finite magnitude bits of n elements at byte stride st: the
 * plain loop, through the float32 loader (any dtype). */
static uint32_t row_max_finite(const char *p, int64_t st, nrt_dtype dt, int64_t n) {
  float buf[256];
  uint32_t m = 0;
  for (int64_t j = 0; j < n; j += 256) {
    int64_t c = nrt_min_i64(256, n - j);
    nrt_load_f32(buf, p + j * st, st, dt, c);
    for (int64_t k = 0; k < c; k++) {
      uint32_t u;
      memcpy(&u, buf + k, sizeof u);
      u &= 0x7fffffffu;
      u = u < 0x7f800000u ? u : 0;
      m = u > m ? u : m;
    }
  }
  return m;
}

/* The same for a unit-stride float32 or bfloat16 row on AVX-512: the
 * magnitude bits of finite values (an exponent below all-ones) kept by a
 * masked unsigned max, 64 bytes a step, so the scan runs at memory speed
 * (1.3 -> ~0.2 ms for an 8x64x56x56 activation). */
NRT_TARGET_AVX512 static uint32_t row_max_finite_avx512(const char *p, nrt_dtype dt, int64_t n) {
  uint32_t m = 0;
  if (dt == NRT_FLOAT32) {
    const __m512i mag = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
    __m512i acc = _mm512_setzero_si512();
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
      __m512i v = _mm512_and_si512(_mm512_loadu_si512(p + j * 4), mag);
      acc = _mm512_mask_max_epu32(acc, _mm512_cmplt_epu32_mask(v, inf), acc, v);
    }
    m = (uint32_t)_mm512_reduce_max_epu32(acc);
    uint32_t t = row_max_finite(p + j * 4, 4, dt, n - j);
    return t > m ? t : m;
  }
  const __m512i mag = _mm512_set1_epi16(0x7fff), inf = _mm512_set1_epi16(0x7f80);
  __m512i acc = _mm512_setzero_si512();
  int64_t j = 0;
  for (; j + 32 <= n; j += 32) {
    __m512i v = _mm512_and_si512(_mm512_loadu_si512(p + j * 2), mag);
    acc = _mm512_mask_max_epu16(acc, _mm512_cmplt_epu16_mask(v, inf), acc, v);
  }
  uint16_t lanes[32];
  _mm512_storeu_si512(lanes, acc);
  for (int k = 0; k < 32; k++) m = (uint32_t)lanes[k] << 16 > m ? (uint32_t)lanes[k] << 16 : m;
  uint32_t t = row_max_finite(p + j * 2, 2, dt, n - j);
  return t > m ? t : m;
}

/* The bits of the largest finite |v| of a 5-d operand of extents ext (its
 * strides); NaN and inf left out. Order does not matter to a maximum, so
 * broadcast dims drop out and the rest are sorted by stride and merged
 * where dense: contiguous and channels-last operands become one row. */
static uint32_t max_finite_bits(const nrt_operand *o, const int64_t *ext) {
  int64_t e[5], st[5];
  int nd = 0;
  for (int i = 0; i < 5; i++) {
    if (ext[i] == 0) return 0;
    if (ext[i] == 1 || o->strides[i] == 0) continue;
    int j = nd++;
    for (; j > 0 && st[j - 1] < o->strides[i]; j--) e[j] = e[j - 1], st[j] = st[j - 1];
    e[j] = ext[i], st[j] = o->strides[i];
  }
  int m = 0; /* merged dims, outermost first */
  for (int i = 0; i < nd; i++) {
    if (m > 0 && st[m - 1] == st[i] * e[i]) {
      e[m - 1] *= e[i];
      st[m - 1] = st[i];
    } else {
      e[m] = e[i], st[m] = st[i];
      m++;
    }
  }
  int64_t E[5] = {1, 1, 1, 1, 1}, S[5] = {0, 0, 0, 0, 0};
  for (int i = 0; i < m; i++) E[5 - m + i] = e[i], S[5 - m + i] = st[i];
  size_t es = nrt_dtype_size(o->dtype);
  bool fast = nrt_kernels_isa() >= NRT_ISA_AVX512 && (o->dtype == NRT_FLOAT32 || o->dtype == NRT_BFLOAT16) &&
              S[4] == (int64_t)es;
  uint32_t best = 0;
  for (int64_t i0 = 0; i0 < E[0]; i0++)
    for (int64_t i1 = 0; i1 < E[1]; i1++)
      for (int64_t i2 = 0; i2 < E[2]; i2++)
        for (int64_t i3 = 0; i3 < E[3]; i3++) {
          const char *row = (const char *)o->data + i0 * S[0] + i1 * S[1] + i2 * S[2] + i3 * S[3];
          uint32_t r = fast ? row_max_finite_avx512(row, o->dtype, E[4]) : row_max_finite(row, S[4], o->dtype, E[4]);
          best = r > best ? r : best;
        }
  return best;
}

static double bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Whether some order of the launch's float32 sums could overflow: the
 * largest finite magnitudes of its two inputs times the most products one
 * output sums, plus the largest bias, reach half of FLT_MAX (the half
 * covers rounding). float16 inputs (at most 65504) never do. */
static bool sums_may_overflow(const nrt_conv_geom *g, const nrt_launch *l) {
  nrt_dtype dt = l->operands[1].dtype;
  if (dt != NRT_FLOAT32 && dt != NRT_BFLOAT16) return false;
  int64_t ey[5] = {g->N, g->G * g->Cog, g->O[0], g->O[1], g->O[2]};
  int64_t ex[5] = {g->N, g->G * g->Cig, g->I[0], g->I[1], g->I[2]};
  int64_t ew[5] = {g->G * g->Cog, g->Cig, g->K[0], g->K[1], g->K[2]};
  const int64_t *e1, *e2;
  double terms;
  switch ((int)l->op) {
  case NRT_OP(CONV): e1 = ex, e2 = ew, terms = (double)g->Kdim; break;
  case NRT_OP(CONV_BACKWARD_INPUT): e1 = ey, e2 = ew, terms = (double)g->Cog * (double)g->KK; break;
  default: e1 = ey, e2 = ex, terms = (double)g->N * (double)g->L; break;
  }
  /* The weights first: small, and a zero bound skips the activations. */
  double b2 = bits_f32(max_finite_bits(&l->operands[2], e2));
  double bias = 0.0;
  if (l->ninputs == 3) {
    int64_t eb[5] = {1, 1, 1, 1, l->op == NRT_OP(CONV) ? g->G * g->Cog : g->G * g->Cig};
    nrt_operand b = l->operands[3];
    b.strides[4] = b.strides[0];
    bias = bits_f32(max_finite_bits(&b, eb));
  }
  double half = 0x1p127;
  if (bias >= half) return true;
  if (b2 == 0.0) return false;
  return bits_f32(max_finite_bits(&l->operands[1], e1)) * b2 * terms + bias >= half;
}

/* ---- entry ------------------------------------------------------------------ */

/* Output channels per group up to which the direct path beats a GEMM whose
 * MR-row tiles would be mostly padding. */
#define DIRECT_MAX_COG 2

nrt_status nrt_conv_execute(const nrt_launch *l) {
  nrt_conv_geom g;
  nrt_status st = geom_init(l, &g);
  if (st != NRT_SUCCESS) return st;
  bool empty_out = l->op == NRT_OP(CONV) ? g.N * g.G * g.Cog * g.L == 0
                   : l->op == NRT_OP(CONV_BACKWARD_INPUT) ? g.N * g.G * g.Cig * g.LI == 0
                                                         : g.G * g.Cog * g.Kdim == 0;
  if (empty_out) return NRT_SUCCESS;
  /* An empty reduction (no input channels, no output pixels, no images)
   * and the reference mode take the loop nest. */
  bool ints = !nrt_dtype_is_floating(l->compute_dtype);
  /* An empty input (LI == 0: the backward of a transposed convolution
   * whose output is empty) has every tap in the padding; the loop nest
   * gives the CPU's zeros there (see reference.c). */
  bool degenerate = g.Kdim == 0 || g.L == 0 || g.N == 0 || g.Cog == 0 || g.LI == 0;
  if (degenerate || ints || nrt_kernels_reference() || sums_may_overflow(&g, l))
    return nrt_conv_reference(&g, l, ints);
  if (g.Cog <= DIRECT_MAX_COG) return nrt_conv_direct(&g, l);
  if (nrt_conv_implicit_applies(&g, l)) return nrt_conv_implicit(&g, l);
  if (nrt_conv_implicit_weight_applies(&g, l)) return nrt_conv_implicit_weight(&g, l);
  switch ((int)l->op) {
  case NRT_OP(CONV): return nrt_conv_forward(&g, l);
  case NRT_OP(CONV_BACKWARD_INPUT): return nrt_conv_backward_input(&g, l);
  default: return nrt_conv_backward_weight(&g, l);
  }
}
