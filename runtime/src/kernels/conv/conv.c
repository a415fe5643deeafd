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
#include <stdatomic.h>
#include <stdlib.h>
#include "kernels/common/gemm_ukernel.h"
#include "nrt/ops/conv.h"

typedef struct conv_geom {
  int64_t N, G, Cog, Cig;
  int64_t O[3], I[3], K[3], S[3], P[3], D[3];
  int64_t L, LI, KK, Kdim;
} conv_geom;

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t round_up(int64_t a, int64_t b) { return cdiv(a, b) * b; }

static nrt_status geom_init(const nrt_launch *l, conv_geom *g) {
  const char *op = nrt_op_name(l->op);
  if (l->ndim != 13) {
    nrt_set_error_message("%s: sizes are {N, G, Cog, Cig, O[3], I[3], K[3]}, got ndim %d", op, l->ndim);
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  if (l->noutputs != 1) {
    nrt_set_error_message("%s: expected 1 output, got %d", op, l->noutputs);
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  if (l->compute_dtype == NRT_BOOL) {
    nrt_set_error_message("%s: not implemented for bool", op);
    return NRT_ERROR_UNSUPPORTED;
  }
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
    if (g->S[i] < 1 || g->D[i] < 1 || g->P[i] < 0 || g->K[i] < 1) {
      nrt_set_error_message("%s: dim %d: kernel %lld, stride %lld, padding %lld, dilation %lld", op, i,
                            (long long)g->K[i], (long long)g->S[i], (long long)g->P[i],
                            (long long)g->D[i]);
      return NRT_ERROR_INVALID_ARGUMENT;
    }
    /* Fewer outputs than the input allows is fine: a transposed
     * convolution with output_padding >= stride has an input (its output)
     * longer than its outputs (its input) need. */
    int64_t span = g->I[i] + 2 * g->P[i] - g->D[i] * (g->K[i] - 1) - 1;
    int64_t most = span < 0 ? 0 : span / g->S[i] + 1;
    if (g->O[i] < 0 || g->O[i] > most) {
      nrt_set_error_message("%s: dim %d: output size %lld, but input %lld with kernel %lld, stride %lld, "
                            "padding %lld, dilation %lld gives at most %lld", op, i, (long long)g->O[i],
                            (long long)g->I[i], (long long)g->K[i], (long long)g->S[i],
                            (long long)g->P[i], (long long)g->D[i], (long long)most);
      return NRT_ERROR_INVALID_ARGUMENT;
    }
  }
  g->L = g->O[0] * g->O[1] * g->O[2];
  g->LI = g->I[0] * g->I[1] * g->I[2];
  g->KK = g->K[0] * g->K[1] * g->K[2];
  g->Kdim = g->Cig * g->KK;
  return NRT_SUCCESS;
}

/* ---- addressing ------------------------------------------------------------ */

#define ACT(o, n, c) ((char *)(o)->data + (n) * (o)->strides[0] + (c) * (o)->strides[1])

/* A kernel tap: its input channel (within the group), the offset k*D - P
 * it adds to o*S along each dim, and the output columns ow of a row whose
 * input column lies inside [0, I[2]). */
typedef struct tap {
  int64_t ci, off[3], lo, hi;
} tap;

static void tap_init(const conv_geom *g, int64_t kk, tap *t) {
  int64_t r = kk % g->KK;
  int64_t k[3] = {r / (g->K[1] * g->K[2]), (r / g->K[2]) % g->K[1], r % g->K[2]};
  t->ci = kk / g->KK;
  for (int i = 0; i < 3; i++) t->off[i] = k[i] * g->D[i] - g->P[i];
  int64_t s = g->S[2], off = t->off[2], in = g->I[2];
  int64_t lo = off >= 0 ? 0 : (-off + s - 1) / s;
  int64_t hi = in - 1 - off < 0 ? 0 : (in - 1 - off) / s + 1;
  hi = min64(hi, g->O[2]);
  t->lo = min64(lo, hi);
  t->hi = hi;
}

static inline void zero_f(float *d, int64_t n) {
  for (int64_t i = 0; i < n; i++) d[i] = 0.0f;
}

/* dst[j] = col[tap][p0 + j] for pixels [p0, p0 + len) of one image; xc
 * points at the tap's input channel in that image. Pixels go by output
 * rows: each row is zeros, a strided run of the input row, zeros. Small
 * feature maps make short rows, so the per-row work is kept to a few
 * compares (no divisions, float32 copied inline). */
static void im2col_img(const conv_geom *g, const tap *t, const char *xc, const int64_t *xs,
                       nrt_dtype dt, int64_t p0, int64_t len, float *dst) {
  const int64_t O1 = g->O[1], O2 = g->O[2], S2 = g->S[2], sx = S2 * xs[4];
  int64_t od = p0 / (O1 * O2), r = p0 - od * O1 * O2, oh = r / O2, ow = r - oh * O2;
  int64_t id = od * g->S[0] + t->off[0], ih = oh * g->S[1] + t->off[1];
  const bool f32 = dt == NRT_FLOAT32;
  for (int64_t done = 0; done < len;) {
    int64_t n = min64(O2 - ow, len - done);
    float *d = dst + done;
    int64_t a = max64(ow, t->lo), b = min64(ow + n, t->hi);
    if (id < 0 || id >= g->I[0] || ih < 0 || ih >= g->I[1] || b <= a) {
      zero_f(d, n);
    } else {
      zero_f(d, a - ow);
      const char *src = xc + id * xs[2] + ih * xs[3] + (a * S2 + t->off[2]) * xs[4];
      float *dd = d + (a - ow);
      int64_t m = b - a;
      if (f32 && sx == 4) {
        memcpy(dd, src, (size_t)m * 4);
      } else if (f32) {
        for (int64_t j = 0; j < m; j++) memcpy(dd + j, src + j * sx, 4);
      } else {
        nrt_load_f32(dd, src, sx, dt, m);
      }
      zero_f(d + (b - ow), ow + n - b);
    }
    done += n;
    ow = 0;
    ih += g->S[1];
    if (++oh == O1) {
      oh = 0;
      ih = t->off[1];
      id += g->S[0];
    }
  }
}

/* im2col_img for 16-bit data copied as raw bits (bfloat16 pair panels). */
static void im2col_img_u16(const conv_geom *g, const tap *t, const char *xc, const int64_t *xs, int64_t p0,
                           int64_t len, uint16_t *dst) {
  const int64_t O1 = g->O[1], O2 = g->O[2], S2 = g->S[2], sx = S2 * xs[4];
  int64_t od = p0 / (O1 * O2), r = p0 - od * O1 * O2, oh = r / O2, ow = r - oh * O2;
  int64_t id = od * g->S[0] + t->off[0], ih = oh * g->S[1] + t->off[1];
  for (int64_t done = 0; done < len;) {
    int64_t n = min64(O2 - ow, len - done);
    uint16_t *d = dst + done;
    int64_t a = max64(ow, t->lo), b = min64(ow + n, t->hi);
    if (id < 0 || id >= g->I[0] || ih < 0 || ih >= g->I[1] || b <= a) {
      memset(d, 0, sizeof(uint16_t) * (size_t)n);
    } else {
      memset(d, 0, sizeof(uint16_t) * (size_t)(a - ow));
      const char *src = xc + id * xs[2] + ih * xs[3] + (a * S2 + t->off[2]) * xs[4];
      uint16_t *dd = d + (a - ow);
      if (sx == 2) memcpy(dd, src, sizeof(uint16_t) * (size_t)(b - a));
      else
        for (int64_t j = 0; j < b - a; j++) memcpy(dd + j, src + j * sx, 2);
      memset(d + (b - ow), 0, sizeof(uint16_t) * (size_t)(ow + n - b));
    }
    done += n;
    ow = 0;
    ih += g->S[1];
    if (++oh == O1) {
      oh = 0;
      ih = t->off[1];
      id += g->S[0];
    }
  }
}

static void im2col_cols_u16(const conv_geom *g, const tap *t, const nrt_operand *x, int64_t grp, int64_t q0,
                            int64_t len, uint16_t *dst) {
  while (len > 0) {
    int64_t n = q0 / g->L, p = q0 - n * g->L, m = min64(g->L - p, len);
    im2col_img_u16(g, t, ACT(x, n, grp * g->Cig + t->ci), x->strides, p, m, dst);
    dst += m;
    q0 += m;
    len -= m;
  }
}

/* dst[j] = col[tap][q0 + j] across images (columns q = n * L + pixel). */
static void im2col_cols(const conv_geom *g, const tap *t, const nrt_operand *x, int64_t grp, int64_t q0,
                        int64_t len, float *dst) {
  while (len > 0) {
    int64_t n = q0 / g->L, p = q0 - n * g->L, m = min64(g->L - p, len);
    im2col_img(g, t, ACT(x, n, grp * g->Cig + t->ci), x->strides, x->dtype, p, m, dst);
    dst += m;
    q0 += m;
    len -= m;
  }
}

/* col2im of one row segment: acc[input element of (tap, p0 + j)] += src[j]
 * for pixels of one image; `ac` is the tap's channel plane of float
 * accumulators with float strides as[0..2] (d, h, w). */
static void col2im_img(const conv_geom *g, const tap *t, float *ac, const int64_t *as, int64_t p0,
                       int64_t len, const float *src) {
  const int64_t O1 = g->O[1], O2 = g->O[2], S2 = g->S[2], step = S2 * as[2];
  int64_t od = p0 / (O1 * O2), r = p0 - od * O1 * O2, oh = r / O2, ow = r - oh * O2;
  int64_t id = od * g->S[0] + t->off[0], ih = oh * g->S[1] + t->off[1];
  for (int64_t done = 0; done < len;) {
    int64_t n = min64(O2 - ow, len - done);
    int64_t a = max64(ow, t->lo), b = min64(ow + n, t->hi);
    if (id >= 0 && id < g->I[0] && ih >= 0 && ih < g->I[1] && b > a) {
      const float *s = src + done + (a - ow);
      float *d = ac + id * as[0] + ih * as[1] + (a * S2 + t->off[2]) * as[2];
      if (step == 1) {
        for (int64_t j = 0; j < b - a; j++) d[j] += s[j];
      } else {
        for (int64_t j = 0; j < b - a; j++) d[j * step] += s[j];
      }
    }
    done += n;
    ow = 0;
    ih += g->S[1];
    if (++oh == O1) {
      oh = 0;
      ih = t->off[1];
      id += g->S[0];
    }
  }
}

/* Whether a plane of extents e[3] with byte strides st[0..2] is one
 * arithmetic run (pixel p at p * st[2]). */
static bool plane_linear(const int64_t *e, const int64_t *st) {
  return (e[1] == 1 || st[1] == e[2] * st[2]) && (e[0] == 1 || st[0] == e[1] * e[2] * st[2]);
}

/* Loads (store = false) or stores activation values a[n, c, pixel] for
 * columns q in [q0, q0 + len), q = n * npix + pixel, pixel planes of
 * extents e[3]. */
static void act_cols(const nrt_operand *a, const int64_t *e, int64_t c, int64_t q0, int64_t len, float *buf,
                     bool store) {
  int64_t npix = e[0] * e[1] * e[2];
  const int64_t *st = a->strides + 2;
  bool lin = plane_linear(e, st);
  while (len > 0) {
    int64_t n = q0 / npix, p = q0 - n * npix, m = min64(npix - p, len);
    char *plane = ACT(a, n, c);
    if (lin) {
      if (store) nrt_store_f32(plane + p * st[2], st[2], a->dtype, buf, m);
      else nrt_load_f32(buf, plane + p * st[2], st[2], a->dtype, m);
    } else {
      for (int64_t pp = p; pp < p + m;) {
        int64_t d = pp / (e[1] * e[2]), r = pp % (e[1] * e[2]), h = r / e[2], w = r % e[2];
        int64_t k = min64(e[2] - w, p + m - pp);
        char *ptr = plane + d * st[0] + h * st[1] + w * st[2];
        if (store) nrt_store_f32(ptr, st[2], a->dtype, buf + (pp - p), k);
        else nrt_load_f32(buf + (pp - p), ptr, st[2], a->dtype, k);
        pp += k;
      }
    }
    buf += m;
    q0 += m;
    len -= m;
  }
}

/* Whether a weight row's taps (ci, kd, kh, kw) are one run with step
 * ws[4] (dims of size 1 may have any stride). */
static bool w_taps_linear(const conv_geom *g, const int64_t *ws) {
  int64_t ext[4] = {g->Cig, g->K[0], g->K[1], g->K[2]}, want = ws[4];
  for (int i = 3; i >= 0; i--) {
    if (ext[i] == 1) continue;
    if (ws[1 + i] != want) return false;
    want *= ext[i];
  }
  return true;
}

/* Loads or stores weight row o over taps [kk0, kk0 + len). */
static void w_row(const conv_geom *g, const nrt_operand *w, int64_t o, int64_t kk0, int64_t len, float *buf,
                  bool store) {
  const int64_t *ws = w->strides;
  /* Contiguous taps (any standard weight layout but channels-last): one run. */
  if (w_taps_linear(g, ws)) {
    char *ptr = (char *)w->data + o * ws[0] + kk0 * ws[4];
    if (store) nrt_store_f32(ptr, ws[4], w->dtype, buf, len);
    else nrt_load_f32(buf, ptr, ws[4], w->dtype, len);
    return;
  }
  for (int64_t kk = kk0; kk < kk0 + len;) {
    int64_t ci = kk / g->KK, r = kk % g->KK;
    int64_t kd = r / (g->K[1] * g->K[2]), kh = (r / g->K[2]) % g->K[1], kw = r % g->K[2];
    int64_t m = min64(g->K[2] - kw, kk0 + len - kk);
    char *ptr = (char *)w->data + o * ws[0] + ci * ws[1] + kd * ws[2] + kh * ws[3] + kw * ws[4];
    if (store) nrt_store_f32(ptr, ws[4], w->dtype, buf + (kk - kk0), m);
    else nrt_load_f32(buf + (kk - kk0), ptr, ws[4], w->dtype, m);
    kk += m;
  }
}

/* Weight row o as a float32 array when the taps are one unit-stride run
 * (standard layouts); NULL otherwise. */
static const float *w_row_f32(const conv_geom *g, const nrt_operand *w, int64_t o) {
  if (w->dtype != NRT_FLOAT32 || w->strides[4] != 4 || !w_taps_linear(g, w->strides)) return NULL;
  return (const float *)((const char *)w->data + o * w->strides[0]);
}

static float load1(const nrt_operand *o, int64_t i) {
  float v;
  nrt_load_f32(&v, (const char *)o->data + i * o->strides[0], 0, o->dtype, 1);
  return v;
}

/* Sets the channel planes [c0, c0 + nc) of float accumulators (float
 * strides as[0..3]: c, d, h, w) to bias[cb + c] (or 0). */
static void acc_init(const conv_geom *g, float *ac, const int64_t *as, int64_t nc, const nrt_operand *bias,
                     int64_t cb) {
  for (int64_t c = 0; c < nc; c++) {
    float v = bias ? load1(bias, cb + c) : 0.0f;
    for (int64_t d = 0; d < g->I[0]; d++)
      for (int64_t h = 0; h < g->I[1]; h++) {
        float *row = ac + c * as[0] + d * as[1] + h * as[2];
        if (as[3] == 1) {
          for (int64_t w = 0; w < g->I[2]; w++) row[w] = v;
        } else {
          for (int64_t w = 0; w < g->I[2]; w++) row[w * as[3]] = v;
        }
      }
  }
}

/* Stores dense accumulator planes [nc][LI] into grad_x channels cb.. of image n. */
static void acc_store(const conv_geom *g, const nrt_operand *gx, int64_t n, int64_t cb, int64_t nc,
                      const float *ac) {
  for (int64_t c = 0; c < nc; c++) act_cols(gx, g->I, cb + c, n * g->LI, g->LI, (float *)ac + c * g->LI, true);
}

/* Accumulator planes for image n, channels [cb, cb + nc) of grad_x: grad_x
 * itself when it is float32 (float strides), else a dense scratch. */
static float *acc_planes(const conv_geom *g, const nrt_operand *gx, int64_t n, int64_t cb, float *scratch,
                         int64_t as[4]) {
  if (gx->dtype == NRT_FLOAT32) {
    for (int i = 0; i < 4; i++) as[i] = gx->strides[1 + i] / 4;
    return (float *)ACT(gx, n, cb);
  }
  as[0] = g->LI;
  as[1] = g->I[1] * g->I[2];
  as[2] = g->I[2];
  as[3] = 1;
  return scratch;
}

/* ---- reference ------------------------------------------------------------- */
/* Values of the reference loops: double in the float domain (inputs at
 * float32 precision, as the device computes), wrapping int64 in the
 * integer domain (PyTorch's CPU convolves integers too; narrowing the
 * int64 sum on store gives the same bits as accumulating in the type). */

typedef struct rval {
  double f;
  int64_t i;
} rval;

static const char *ref_at(const nrt_operand *o, const int64_t *idx, int nidx) {
  const char *p = o->data;
  for (int i = 0; i < nidx; i++) p += idx[i] * o->strides[i];
  return p;
}

static rval ref_ld(const nrt_operand *o, const int64_t *idx, int nidx, bool ints) {
  rval v = {0.0, 0};
  if (ints) v.i = nrt_ref_load_i64(ref_at(o, idx, nidx), o->dtype);
  else v.f = (float)nrt_ref_load_f64(ref_at(o, idx, nidx), o->dtype);
  return v;
}

static void ref_st(const nrt_operand *o, const int64_t *idx, int nidx, rval v, bool ints) {
  char *p = (char *)ref_at(o, idx, nidx);
  if (ints) nrt_ref_store_i64(p, o->dtype, v.i);
  else nrt_ref_store_f64(p, o->dtype, v.f);
}

static inline void ref_mac(rval *acc, rval a, rval b, bool ints) {
  if (ints) acc->i = nrt_wadd(acc->i, nrt_wmul(a.i, b.i));
  else acc->f += a.f * b.f;
}

/* Input position of output position o[3] through tap k[3]; false in padding. */
static bool ref_in(const conv_geom *g, const int64_t *o, const int64_t *k, int64_t *in) {
  for (int i = 0; i < 3; i++) {
    in[i] = o[i] * g->S[i] - g->P[i] + k[i] * g->D[i];
    if (in[i] < 0 || in[i] >= g->I[i]) return false;
  }
  return true;
}

#define FOR3(v, ext) \
  for (v[0] = 0; v[0] < (ext)[0]; v[0]++) for (v[1] = 0; v[1] < (ext)[1]; v[1]++) for (v[2] = 0; v[2] < (ext)[2]; v[2]++)

static void ref_forward(const conv_geom *g, const nrt_launch *l, bool ints) {
  const nrt_operand *y = &l->operands[0], *x = &l->operands[1], *w = &l->operands[2];
  const nrt_operand *bias = l->ninputs == 3 ? &l->operands[3] : NULL;
  int64_t o[3], k[3], in[3];
  for (int64_t n = 0; n < g->N; n++)
    for (int64_t c = 0; c < g->G * g->Cog; c++) {
      int64_t grp = c / g->Cog;
      FOR3(o, g->O) {
        rval acc = {0.0, 0};
        if (bias) acc = ref_ld(bias, &c, 1, ints);
        for (int64_t ci = 0; ci < g->Cig; ci++)
          FOR3(k, g->K) {
            if (!ref_in(g, o, k, in)) continue;
            int64_t xi[5] = {n, grp * g->Cig + ci, in[0], in[1], in[2]};
            int64_t wi[5] = {c, ci, k[0], k[1], k[2]};
            ref_mac(&acc, ref_ld(x, xi, 5, ints), ref_ld(w, wi, 5, ints), ints);
          }
        int64_t yi[5] = {n, c, o[0], o[1], o[2]};
        ref_st(y, yi, 5, acc, ints);
      }
    }
}

static nrt_status ref_backward_input(const conv_geom *g, const nrt_launch *l, bool ints) {
  const nrt_operand *gx = &l->operands[0], *gy = &l->operands[1], *w = &l->operands[2];
  const nrt_operand *bias = l->ninputs == 3 ? &l->operands[3] : NULL;
  rval *acc = malloc(sizeof(rval) * (size_t)(g->Cig * g->LI + 1));
  if (!acc) return NRT_ERROR_OUT_OF_MEMORY;
  int64_t o[3], k[3], in[3], i3[3];
  for (int64_t n = 0; n < g->N; n++)
    for (int64_t grp = 0; grp < g->G; grp++) {
      for (int64_t ci = 0; ci < g->Cig; ci++) {
        int64_t c = grp * g->Cig + ci;
        rval b = {0.0, 0};
        if (bias) b = ref_ld(bias, &c, 1, ints);
        for (int64_t i = 0; i < g->LI; i++) acc[ci * g->LI + i] = b;
      }
      for (int64_t co = 0; co < g->Cog; co++)
        FOR3(o, g->O) {
          int64_t yi[5] = {n, grp * g->Cog + co, o[0], o[1], o[2]};
          rval dy = ref_ld(gy, yi, 5, ints);
          for (int64_t ci = 0; ci < g->Cig; ci++)
            FOR3(k, g->K) {
              if (!ref_in(g, o, k, in)) continue;
              int64_t wi[5] = {grp * g->Cog + co, ci, k[0], k[1], k[2]};
              ref_mac(&acc[ci * g->LI + (in[0] * g->I[1] + in[1]) * g->I[2] + in[2]], dy, ref_ld(w, wi, 5, ints),
                      ints);
            }
        }
      for (int64_t ci = 0; ci < g->Cig; ci++)
        FOR3(i3, g->I) {
          int64_t xi[5] = {n, grp * g->Cig + ci, i3[0], i3[1], i3[2]};
          ref_st(gx, xi, 5, acc[ci * g->LI + (i3[0] * g->I[1] + i3[1]) * g->I[2] + i3[2]], ints);
        }
    }
  free(acc);
  return NRT_SUCCESS;
}

static void ref_backward_weight(const conv_geom *g, const nrt_launch *l, bool ints) {
  const nrt_operand *gw = &l->operands[0], *gy = &l->operands[1], *x = &l->operands[2];
  int64_t o[3], k[3], in[3];
  for (int64_t c = 0; c < g->G * g->Cog; c++) {
    int64_t grp = c / g->Cog;
    for (int64_t ci = 0; ci < g->Cig; ci++)
      FOR3(k, g->K) {
        rval acc = {0.0, 0};
        for (int64_t n = 0; n < g->N; n++)
          FOR3(o, g->O) {
            if (!ref_in(g, o, k, in)) continue;
            int64_t yi[5] = {n, c, o[0], o[1], o[2]};
            int64_t xi[5] = {n, grp * g->Cig + ci, in[0], in[1], in[2]};
            ref_mac(&acc, ref_ld(gy, yi, 5, ints), ref_ld(x, xi, 5, ints), ints);
          }
        int64_t wi[5] = {c, ci, k[0], k[1], k[2]};
        ref_st(gw, wi, 5, acc, ints);
      }
  }
}

/* ---- shared plan state ----------------------------------------------------- */

typedef struct conv_plan {
  const conv_geom *g;
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
} conv_plan;

/* Panel depth in 32-bit units: k values, or pairs of k for the bfloat16
 * micro-kernel (an odd last k pairs with zero). */
static inline int64_t units(const conv_plan *p, int64_t k) { return p->uk->bf16_pairs ? (k + 1) / 2 : k; }

static void *falloc(int64_t nfloats) {
  size_t bytes = (size_t)round_up(nfloats > 0 ? nfloats : 1, 16) * sizeof(float);
  return aligned_alloc(64, bytes);
}

/* Micro-kernel call on a full MR x NR block, or on a partial one through
 * an edge scratch block. */
static void ublock(const conv_plan *p, int64_t kc, const float *ap, const float *bp, float *c, int64_t ldc,
                   int64_t rows, int64_t cols, int accumulate, float *edge) {
  const nrt_gemm_ukernel *uk = p->uk;
  if (rows == p->MR && cols == p->NR) {
    uk->fn(kc, ap, bp, c, ldc, 1.0f, accumulate);
    return;
  }
  uk->fn(kc, ap, bp, edge, p->NR, 1.0f, 0);
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++)
      c[i * ldc + j] = accumulate ? c[i * ldc + j] + edge[i * p->NR + j] : edge[i * p->NR + j];
}

/* Copies one generated row (kc-slice row k of nt columns) into the NR-wide
 * B panels of a kc-deep slice, zero-padding the last panel. */
static void row_to_bpanels(const conv_plan *p, const float *row, int64_t nt, int64_t k, int64_t kc, float *bp) {
  int64_t NR = p->NR;
  for (int64_t jp = 0; jp < nt; jp += NR) {
    float *d = bp + jp * kc + k * NR;
    int64_t cols = min64(NR, nt - jp);
    for (int64_t j = 0; j < cols; j++) d[j] = row[jp + j];
    for (int64_t j = cols; j < NR; j++) d[j] = 0.0f;
  }
}

/* Pair unit of two bfloat16 values held exactly in float32. */
static inline uint32_t bf16_pair(float lo, float hi) {
  return (uint32_t)nrt_k_f32_to_bf16(lo) | (uint32_t)nrt_k_f32_to_bf16(hi) << 16;
}

/* B panels from pairs of rows (depth k = the row index): unit (kp, j) =
 * (row k0 + 2kp, row k0 + 2kp + 1) at column j, NR-wide panels of ku units. */
static void rows_to_bpanels_pairs(const conv_plan *p, const float *r0, const float *r1, int64_t nt, int64_t kp,
                                  int64_t ku, float *bp) {
  int64_t NR = p->NR;
  uint32_t *b32 = (uint32_t *)bp;
  for (int64_t jp = 0; jp < nt; jp += NR) {
    uint32_t *d = b32 + jp * ku + kp * NR;
    int64_t cols = min64(NR, nt - jp);
    for (int64_t j = 0; j < cols; j++) d[j] = bf16_pair(r0[jp + j], r1 ? r1[jp + j] : 0.0f);
    for (int64_t j = cols; j < NR; j++) d[j] = 0;
  }
}

/* ---- forward (GEMM) -------------------------------------------------------- */

/* Weight panels for the forward: per group, for each KC slice of taps, for
 * each MR-row panel: element (k, i) = W[group row i][tap k]. */
/* bfloat16 pair panels of the weights: unit (kp, i) = (W[i][k0 + 2kp],
 * W[i][k0 + 2kp + 1]), from bf16 rows contiguous in the taps. */
static void fwd_pack_w_bf16(conv_plan *p, int64_t u, uint16_t *rows) {
  const conv_geom *g = p->g;
  const nrt_operand *w = &p->l->operands[2];
  int64_t MR = p->MR, grp = u / p->mp, ip = u % p->mp;
  int64_t nrow = min64(MR, g->Cog - ip * MR);
  const uint16_t *rp[14];
  const int64_t *ws = w->strides;
  bool lin = w->dtype == NRT_BFLOAT16 && ws[4] == 2 && w_taps_linear(g, ws);
  for (int64_t i = 0; i < MR; i++) {
    uint16_t *r = rows + i * g->Kdim;
    if (i < nrow && lin) {
      rp[i] = (const uint16_t *)((const char *)w->data + (grp * g->Cog + ip * MR + i) * ws[0]);
      continue;
    }
    if (i < nrow) {
      float *tmp = (float *)(rows + MR * g->Kdim);
      w_row(g, w, grp * g->Cog + ip * MR + i, 0, g->Kdim, tmp, false);
      for (int64_t k = 0; k < g->Kdim; k++) r[k] = nrt_k_f32_to_bf16(tmp[k]);
    } else {
      memset(r, 0, sizeof(uint16_t) * (size_t)g->Kdim);
    }
    rp[i] = r;
  }
  float *base = p->wp + grp * p->wp_unit;
  for (int64_t k0 = 0; k0 < g->Kdim; k0 += p->KC) {
    int64_t kc = min64(p->KC, g->Kdim - k0), full = kc / 2;
    uint16_t *panel = (uint16_t *)(base + p->mp * MR * units(p, k0) + ip * MR * units(p, kc));
    const void *r[14];
    for (int64_t i = 0; i < MR; i++) r[i] = rp[i] + k0;
    nrt_gemm_pack_a14_avx512(r, full, panel);
    if (kc & 1)
      for (int64_t i = 0; i < MR; i++) {
        panel[2 * (full * MR + i)] = rp[i][k0 + kc - 1];
        panel[2 * (full * MR + i) + 1] = 0;
      }
  }
}

static void fwd_pack_w(void *ctx, int64_t begin, int64_t end) {
  conv_plan *p = ctx;
  const conv_geom *g = p->g;
  const nrt_operand *w = &p->l->operands[2];
  int64_t MR = p->MR;
  float *rows = falloc(MR * g->Kdim + g->Kdim);
  if (!rows) {
    p->failed = 1;
    return;
  }
  if (p->uk->bf16_pairs) {
    for (int64_t u = begin; u < end; u++) fwd_pack_w_bf16(p, u, (uint16_t *)rows);
    free(rows);
    return;
  }
  for (int64_t u = begin; u < end; u++) {
    int64_t grp = u / p->mp, ip = u % p->mp;
    int64_t nrow = min64(MR, g->Cog - ip * MR);
    const float *rp[32];
    for (int64_t i = 0; i < MR; i++) {
      const float *direct = i < nrow ? w_row_f32(g, w, grp * g->Cog + ip * MR + i) : NULL;
      if (!direct) {
        if (i < nrow) w_row(g, w, grp * g->Cog + ip * MR + i, 0, g->Kdim, rows + i * g->Kdim, false);
        else zero_f(rows + i * g->Kdim, g->Kdim);
        direct = rows + i * g->Kdim;
      }
      rp[i] = direct;
    }
    float *base = p->wp + grp * p->wp_unit;
    for (int64_t k0 = 0; k0 < g->Kdim; k0 += p->KC) {
      int64_t kc = min64(p->KC, g->Kdim - k0);
      float *panel = base + p->mp * MR * k0 + ip * MR * kc;
      if (p->uk == &nrt_gemm_ukernel_avx512) {
        const void *r[14];
        for (int64_t i = 0; i < MR; i++) r[i] = rp[i] + k0;
        nrt_gemm_pack_a14_avx512(r, kc, panel);
      } else {
        for (int64_t k = 0; k < kc; k++)
          for (int64_t i = 0; i < MR; i++) panel[k * MR + i] = rp[i][k0 + k];
      }
    }
  }
  free(rows);
}

/* Columns [q0, q0 + nt) of forward tile t. */
static void fwd_tile_cols(const conv_plan *p, int64_t t, int64_t *q0, int64_t *nt) {
  const conv_geom *g = p->g;
  if (p->tpi) {
    *q0 = t / p->tpi * g->L + t % p->tpi * p->NT;
    *nt = min64(p->NT, g->L - t % p->tpi * p->NT);
  } else {
    *q0 = t * p->NT;
    *nt = min64(p->NT, g->N * g->L - *q0);
  }
}

/* Packed B panels (im2col rows) of one KC slice of a tile: slice k0 of
 * tile (grp, t) occupies NT * kc floats from bp. */
static void fwd_gen_slice(const conv_plan *p, int64_t grp, int64_t q0, int64_t nt, int64_t k0, int64_t kc,
                          float *row, float *bp) {
  if (p->uk->bf16_pairs) {
    /* pairs of im2col rows, interleaved 16 bits at a time: unit (kp, j) =
     * (col[k0 + 2kp][j], col[k0 + 2kp + 1][j]); the rows are bfloat16
     * values already, so the round trip through float is exact */
    int64_t NR = p->NR, ku = units(p, kc);
    uint16_t *r0 = (uint16_t *)row, *r1 = r0 + p->NT;
    uint32_t *b32 = (uint32_t *)bp;
    for (int64_t kp = 0; kp < ku; kp++) {
      tap t;
      tap_init(p->g, k0 + 2 * kp, &t);
      im2col_cols_u16(p->g, &t, &p->l->operands[1], grp, q0, nt, r0);
      if (2 * kp + 1 < kc) {
        tap_init(p->g, k0 + 2 * kp + 1, &t);
        im2col_cols_u16(p->g, &t, &p->l->operands[1], grp, q0, nt, r1);
      } else {
        memset(r1, 0, sizeof(uint16_t) * (size_t)nt);
      }
      for (int64_t jp = 0; jp < nt; jp += NR) {
        uint32_t *d = b32 + jp * ku + kp * NR;
        int64_t cols = min64(NR, nt - jp);
        for (int64_t j = 0; j < cols; j++) d[j] = (uint32_t)r0[jp + j] | (uint32_t)r1[jp + j] << 16;
        for (int64_t j = cols; j < NR; j++) d[j] = 0;
      }
    }
    return;
  }
  for (int64_t k = 0; k < kc; k++) {
    tap t;
    tap_init(p->g, k0 + k, &t);
    im2col_cols(p->g, &t, &p->l->operands[1], grp, q0, nt, row);
    row_to_bpanels(p, row, nt, k, kc, bp);
  }
}

static void fwd_gen_shared(void *ctx, int64_t begin, int64_t end) {
  conv_plan *p = ctx;
  const conv_geom *g = p->g;
  int64_t nslices = cdiv(g->Kdim, p->KC);
  float *row = falloc(2 * p->NT);
  if (!row) {
    p->failed = 1;
    return;
  }
  for (int64_t u = begin; u < end; u++) {
    int64_t gt = u / nslices, k0 = u % nslices * p->KC, q0, nt;
    fwd_tile_cols(p, gt % p->ntiles, &q0, &nt);
    fwd_gen_slice(p, gt / p->ntiles, q0, nt, k0, min64(p->KC, g->Kdim - k0), row,
                  p->bshared + gt * units(p, g->Kdim) * p->NT + units(p, k0) * p->NT);
  }
  free(row);
}

static void fwd_tiles(void *ctx, int64_t begin, int64_t end) {
  conv_plan *p = ctx;
  const conv_geom *g = p->g;
  const nrt_launch *l = p->l;
  const nrt_operand *y = &l->operands[0];
  const nrt_operand *bias = l->ninputs == 3 ? &l->operands[3] : NULL;
  int64_t MR = p->MR, NR = p->NR, NT = p->NT, KC = p->KC;
  int64_t rows_pad = p->mp * MR;
  float *bp = falloc(KC * NT), *row = falloc(2 * NT), *ct = falloc(rows_pad * NT), *edge = falloc(MR * NR);
  if (!bp || !row || !ct || !edge) {
    p->failed = 1;
    goto out;
  }
  bool y_lin = y->dtype == NRT_FLOAT32 && plane_linear(g->O, y->strides + 2) && y->strides[4] == 4;
  for (int64_t task = begin; task < end; task++) {
    int64_t mb = task % p->nmb, gt = task / p->nmb;
    int64_t grp = gt / p->ntiles, t = gt % p->ntiles, q0, nt;
    int64_t ip0 = mb * p->mpb, ip1 = min64(p->mp, ip0 + p->mpb);
    int64_t m0 = ip0 * MR, m1 = min64(g->Cog, ip1 * MR);
    fwd_tile_cols(p, t, &q0, &nt);
    if (nt <= 0 || m0 >= m1) continue;
    int64_t n0 = q0 / g->L, pix0 = q0 - n0 * g->L;
    /* Direct C: y's own memory when the tile is one linear run of it. */
    bool direct = y_lin && pix0 + nt <= g->L;
    float *c;
    int64_t ldc;
    if (direct) {
      c = (float *)(ACT(y, n0, grp * g->Cog) + pix0 * 4);
      ldc = y->strides[1] / 4;
    } else {
      c = ct;
      ldc = NT;
    }
    int accumulate = 0;
    if (bias) {
      for (int64_t m = m0; m < m1; m++) {
        float v = load1(bias, grp * g->Cog + m);
        for (int64_t j = 0; j < nt; j++) c[m * ldc + j] = v;
      }
      accumulate = 1;
    }
    const float *wg = p->wp + grp * p->wp_unit;
    for (int64_t k0 = 0; k0 < g->Kdim; k0 += KC) {
      int64_t kc = min64(KC, g->Kdim - k0), ku = units(p, kc), k0u = units(p, k0);
      const float *b;
      if (p->bshared) {
        b = p->bshared + gt * units(p, g->Kdim) * NT + k0u * NT;
      } else {
        fwd_gen_slice(p, grp, q0, nt, k0, kc, row, bp);
        b = bp;
      }
      for (int64_t ip = ip0; ip < ip1; ip++) {
        int64_t rows = min64(MR, g->Cog - ip * MR);
        const float *ap = wg + p->mp * MR * k0u + ip * MR * ku;
        for (int64_t jp = 0; jp < nt; jp += NR) {
          int64_t cols = min64(NR, nt - jp);
          float *cb = c + ip * MR * ldc + jp;
          if (direct) {
            ublock(p, ku, ap, b + jp * ku, cb, ldc, rows, cols, accumulate, edge);
          } else {
            /* the scratch tile has room for full blocks */
            p->uk->fn(ku, ap, b + jp * ku, cb, ldc, 1.0f, accumulate);
          }
        }
      }
      accumulate = 1;
    }
    if (!direct)
      for (int64_t m = m0; m < m1; m++) {
        /* columns may span images: act_cols splits them */
        int64_t e[3] = {g->O[0], g->O[1], g->O[2]};
        act_cols(y, e, grp * g->Cog + m, q0, nt, ct + m * NT, true);
      }
  }
out:
  free(bp);
  free(row);
  free(ct);
  free(edge);
}

/* The bfloat16 dot-product kernel when both operands are bfloat16 and the
 * CPU has AVX512_BF16 (products exact in float32, float32 accumulation, as
 * PyTorch's oneDNN bf16 convolutions); else float32 panels. */
static const nrt_gemm_ukernel *pick_ukernel(const nrt_operand *a, const nrt_operand *b) {
  return nrt_gemm_ukernel_pick(a->dtype, b->dtype);
}

static nrt_status fwd_gemm(const conv_geom *g, const nrt_launch *l) {
  conv_plan p;
  memset(&p, 0, sizeof p);
  p.g = g;
  p.l = l;
  p.uk = pick_ukernel(&l->operands[1], &l->operands[2]);
  p.MR = p.uk->mr;
  p.NR = p.uk->nr;
  p.KC = min64(p.uk->kc, g->Kdim);
  p.mp = cdiv(g->Cog, p.MR);
  p.wp_unit = p.mp * p.MR * units(&p, g->Kdim);
  int threads = nrt_pool_threads();
  int64_t cols = g->N * g->L;
  /* Column tiles of at most 512, evened out; large images are tiled one
   * by one, so that tiles write straight into y, small ones together.
   * When that leaves fewer than 4 tasks per thread, the output channels
   * are split into blocks of at least 4 row panels (each block generates
   * its own im2col tile, which costs 1 / (2 * rows) of its flops), and
   * then, for small Cog, the columns into narrower tiles. */
  int64_t want = 4 * threads;
  const int64_t ntmax = 512;
  if (g->L >= ntmax || g->N * g->L >= ntmax * want) {
    p.tpi = cdiv(g->L, ntmax);
    p.NT = round_up(cdiv(g->L, p.tpi), p.NR);
    p.tpi = cdiv(g->L, p.NT);
    p.ntiles = g->N * p.tpi;
  } else {
    p.NT = round_up(cdiv(cols, cdiv(cols, ntmax)), p.NR);
    p.ntiles = cdiv(cols, p.NT);
  }
  p.nmb = max64(1, min64(cdiv(want, g->G * p.ntiles), p.mp / 4));
  p.mpb = cdiv(p.mp, p.nmb);
  p.nmb = cdiv(p.mp, p.mpb);
  if (g->G * p.ntiles * p.nmb < want && p.tpi == 0) {
    int64_t nt = min64(cdiv(want, g->G * p.nmb), cdiv(cols, 4 * p.NR));
    if (nt > p.ntiles) {
      p.NT = round_up(cdiv(cols, nt), p.NR);
      p.ntiles = cdiv(cols, p.NT);
    }
  } else if (g->G * p.ntiles * p.nmb < want) {
    int64_t tpi = min64(cdiv(want, g->G * p.nmb * g->N), cdiv(g->L, 4 * p.NR));
    if (tpi > p.tpi) {
      p.NT = round_up(cdiv(g->L, tpi), p.NR);
      p.tpi = cdiv(g->L, p.NT);
      p.ntiles = g->N * p.tpi;
    }
  }
  p.wp = falloc(g->G * p.wp_unit);
  if (!p.wp) return NRT_ERROR_OUT_OF_MEMORY;
  nrt_parallel_for(g->G * p.mp, 1, fwd_pack_w, &p);
  /* Channel blocks would each regenerate their tile's im2col panels:
   * generate them once instead when they fit in 64 MiB. */
  int64_t shared = g->G * p.ntiles * units(&p, g->Kdim) * p.NT;
  if (!p.failed && p.nmb > 1 && shared <= (64 << 20) / 4) {
    p.bshared = falloc(shared);
    if (p.bshared) nrt_parallel_for(g->G * p.ntiles * cdiv(g->Kdim, p.KC), 1, fwd_gen_shared, &p);
  }
  if (!p.failed) {
    double flops = 2.0 * (double)(p.mpb * p.MR) * (double)g->Kdim * (double)p.NT;
    nrt_parallel_for(g->G * p.ntiles * p.nmb, flops >= 2e5 ? 1 : (int64_t)(2e5 / flops) + 1, fwd_tiles, &p);
  }
  free(p.wp);
  free(p.bshared);
  if (p.failed) {
    nrt_set_error_message("CONV: out of host memory for packing buffers");
    return NRT_ERROR_OUT_OF_MEMORY;
  }
  return NRT_SUCCESS;
}

/* ---- input gradient (GEMM + col2im) ---------------------------------------- */

/* W^T panels per (group, channel block): rows are the block's taps, the
 * depth runs over Cog in KC slices: element (k, i) = W[group row k][tap i]. */
static void bwdi_pack_w(void *ctx, int64_t begin, int64_t end) {
  conv_plan *p = ctx;
  const conv_geom *g = p->g;
  const nrt_operand *w = &p->l->operands[2];
  int64_t MR = p->MR, nrows_max = p->cb * g->KK;
  float *rows = falloc(p->KC * (nrows_max + MR));
  if (!rows) {
    p->failed = 1;
    return;
  }
  if (p->KC > 512) {
    free(rows);
    p->failed = 1;
    return;
  }
  for (int64_t u = begin; u < end; u++) {
    int64_t grp = u / p->nblk, blk = u % p->nblk;
    int64_t ci0 = blk * p->cb, nrows = min64(p->cb, g->Cig - ci0) * g->KK;
    int64_t rows_pad = round_up(nrows, MR), ld = rows_pad;
    float *base = p->wp + u * p->wp_unit;
    for (int64_t k0 = 0; k0 < g->Cog; k0 += p->KC) {
      int64_t kc = min64(p->KC, g->Cog - k0);
      /* the slice's W rows (taps of this block), zero-padded to rows_pad */
      const float *src[512 + 1];
      for (int64_t k = 0; k < kc; k++) {
        int64_t o = grp * g->Cog + k0 + k;
        const float *direct = rows_pad == nrows ? w_row_f32(g, w, o) : NULL;
        if (direct) {
          src[k] = direct + ci0 * g->KK;
        } else {
          w_row(g, w, o, ci0 * g->KK, nrows, rows + k * ld, false);
          zero_f(rows + k * ld + nrows, rows_pad - nrows);
          src[k] = rows + k * ld;
        }
      }
      /* panel ip, row k (= output channel k0 + k): MR consecutive taps;
       * bfloat16 pairs: unit (kp, i) = channels k0 + 2kp, + 1 */
      int64_t ku = units(p, kc);
      for (int64_t ip = 0; ip < rows_pad; ip += MR) {
        float *panel = base + rows_pad * units(p, k0) + ip * ku;
        if (p->uk->bf16_pairs) {
          uint32_t *u32 = (uint32_t *)panel;
          for (int64_t kp = 0; kp < ku; kp++)
            for (int64_t i = 0; i < MR; i++)
              u32[kp * MR + i] = bf16_pair(src[2 * kp][ip + i], 2 * kp + 1 < kc ? src[2 * kp + 1][ip + i] : 0.0f);
        } else {
          for (int64_t k = 0; k < kc; k++) memcpy(panel + k * MR, src[k] + ip, sizeof(float) * (size_t)MR);
        }
      }
    }
  }
  free(rows);
}

/* Tasks (image group, group, channel block). An image group is one image
 * tiled by pixels, or several whole small images forming one tile. */
static void bwdi_tasks(void *ctx, int64_t begin, int64_t end) {
  conv_plan *p = ctx;
  const conv_geom *g = p->g;
  const nrt_launch *l = p->l;
  const nrt_operand *gx = &l->operands[0], *gy = &l->operands[1];
  const nrt_operand *bias = l->ninputs == 3 ? &l->operands[3] : NULL;
  int64_t MR = p->MR, NR = p->NR, NT = p->NT, KC = p->KC, ipt = p->tpi;
  int64_t rows_pad_max = round_up(p->cb * g->KK, MR);
  float *bp = falloc(KC * NT), *row = falloc(2 * NT), *dcol = falloc(rows_pad_max * NT);
  float *scratch = gx->dtype == NRT_FLOAT32 ? NULL : falloc(ipt * p->cb * g->LI);
  float **acs = malloc(sizeof(float *) * (size_t)ipt);
  if (!bp || !row || !dcol || !acs || (gx->dtype != NRT_FLOAT32 && !scratch)) {
    p->failed = 1;
    goto out;
  }
  for (int64_t task = begin; task < end; task++) {
    int64_t ig = task / (g->G * p->nblk), u = task % (g->G * p->nblk);
    int64_t grp = u / p->nblk, blk = u % p->nblk;
    int64_t n0 = ig * ipt, ni = min64(ipt, g->N - n0);
    int64_t ci0 = blk * p->cb, ncb = min64(p->cb, g->Cig - ci0), nrows = ncb * g->KK;
    int64_t rows_pad = round_up(nrows, MR);
    int64_t as[4] = {0, 0, 0, 0};
    for (int64_t i = 0; i < ni; i++) {
      acs[i] = acc_planes(g, gx, n0 + i, grp * g->Cig + ci0, scratch ? scratch + i * p->cb * g->LI : NULL, as);
      acc_init(g, acs[i], as, ncb, bias, grp * g->Cig + ci0);
    }
    const float *wb = p->wp + u * p->wp_unit;
    int64_t cols = ni * g->L;
    for (int64_t c0 = 0; c0 < cols; c0 += NT) {
      int64_t nt = min64(NT, cols - c0), q0 = n0 * g->L + c0;
      for (int64_t k0 = 0; k0 < g->Cog; k0 += KC) {
        int64_t kc = min64(KC, g->Cog - k0), ku = units(p, kc);
        if (p->uk->bf16_pairs) {
          for (int64_t kp = 0; kp < ku; kp++) {
            act_cols(gy, g->O, grp * g->Cog + k0 + 2 * kp, q0, nt, row, false);
            bool two = 2 * kp + 1 < kc;
            if (two) act_cols(gy, g->O, grp * g->Cog + k0 + 2 * kp + 1, q0, nt, row + NT, false);
            rows_to_bpanels_pairs(p, row, two ? row + NT : NULL, nt, kp, ku, bp);
          }
        } else {
          for (int64_t k = 0; k < kc; k++) {
            act_cols(gy, g->O, grp * g->Cog + k0 + k, q0, nt, row, false);
            row_to_bpanels(p, row, nt, k, kc, bp);
          }
        }
        for (int64_t ip = 0; ip < rows_pad; ip += MR) {
          const float *ap = wb + rows_pad * units(p, k0) + ip * ku;
          for (int64_t jp = 0; jp < nt; jp += NR)
            p->uk->fn(ku, ap, bp + jp * ku, dcol + ip * NT + jp, NT, 1.0f, k0 > 0);
        }
      }
      for (int64_t r = 0; r < nrows; r++) {
        tap t;
        tap_init(g, ci0 * g->KK + r, &t);
        for (int64_t q = q0; q < q0 + nt;) {
          int64_t n = q / g->L, pix = q - n * g->L, len = min64(g->L - pix, q0 + nt - q);
          col2im_img(g, &t, acs[n - n0] + (t.ci - ci0) * as[0], as + 1, pix, len, dcol + r * NT + (q - q0));
          q += len;
        }
      }
    }
    if (gx->dtype != NRT_FLOAT32)
      for (int64_t i = 0; i < ni; i++) acc_store(g, gx, n0 + i, grp * g->Cig + ci0, ncb, acs[i]);
  }
out:
  free(bp);
  free(row);
  free(dcol);
  free(scratch);
  free(acs);
}

static nrt_status bwdi_gemm(const conv_geom *g, const nrt_launch *l) {
  conv_plan p;
  memset(&p, 0, sizeof p);
  p.g = g;
  p.l = l;
  p.uk = pick_ukernel(&l->operands[1], &l->operands[2]);
  p.MR = p.uk->mr;
  p.NR = p.uk->nr;
  p.KC = min64(p.uk->kc, g->Cog);
  int threads = nrt_pool_threads();
  /* Channel blocks of at most ~256 taps (rows of dcol), and enough blocks
   * for 4 tasks per thread; then a dcol tile of about 512 KiB (half an L2)
   * sets the width. Small images are grouped into one tile (whole images,
   * so that no two tasks scatter into the same image), large ones are
   * tiled by pixels, evened out. */
  int64_t want = 4 * threads;
  int64_t nblk = min64(g->Cig, max64(cdiv(want, g->N * g->G), cdiv(g->Kdim, 256)));
  p.cb = cdiv(g->Cig, nblk);
  p.nblk = cdiv(g->Cig, p.cb);
  int64_t rows_pad = round_up(p.cb * g->KK, p.MR);
  int64_t ntmax = min64(1024, max64(p.NR, (131072 / rows_pad) / p.NR * p.NR));
  int64_t ipt = 1;
  if (g->L < ntmax) {
    ipt = max64(1, min64(g->N, ntmax / g->L));
    /* keep enough tasks */
    while (ipt > 1 && cdiv(g->N, ipt) * g->G * p.nblk < want) ipt--;
    p.NT = round_up(ipt * g->L, p.NR);
  } else {
    p.NT = round_up(cdiv(g->L, cdiv(g->L, ntmax)), p.NR);
  }
  p.tpi = ipt;
  p.wp_unit = rows_pad * units(&p, g->Cog);
  p.wp = falloc(g->G * p.nblk * p.wp_unit);
  if (!p.wp) return NRT_ERROR_OUT_OF_MEMORY;
  nrt_parallel_for(g->G * p.nblk, 1, bwdi_pack_w, &p);
  if (!p.failed) nrt_parallel_for(cdiv(g->N, ipt) * g->G * p.nblk, 1, bwdi_tasks, &p);
  free(p.wp);
  if (p.failed) {
    nrt_set_error_message("CONV_BACKWARD_INPUT: out of host memory for packing buffers");
    return NRT_ERROR_OUT_OF_MEMORY;
  }
  return NRT_SUCCESS;
}

/* ---- weight gradient (GEMM) ------------------------------------------------ */

/* A panel of MR im2col rows (taps kk0..) over kc columns from q0: element
 * (k, i) = col[kk0 + i][q0 + k]; rows past Kdim are zero. */
static void bwdw_pack_a(const conv_plan *p, int64_t grp, int64_t kk0, int64_t q0, int64_t kc, float *rows,
                        float *panel) {
  const conv_geom *g = p->g;
  const nrt_operand *x = &p->l->operands[2];
  int64_t MR = p->MR;
  int64_t nrow = min64(MR, g->Kdim - kk0);
  for (int64_t i = 0; i < nrow; i++) {
    tap t;
    tap_init(g, kk0 + i, &t);
    im2col_cols(g, &t, x, grp, q0, kc, rows + i * kc);
  }
  for (int64_t i = nrow; i < MR; i++) zero_f(rows + i * kc, kc);
  if (p->uk->bf16_pairs) {
    /* unit (kp, i) = (col[i][2kp], col[i][2kp + 1]) */
    uint32_t *u32 = (uint32_t *)panel;
    int64_t ku = units(p, kc);
    for (int64_t kp = 0; kp < ku; kp++)
      for (int64_t i = 0; i < MR; i++) {
        const float *r = rows + i * kc;
        u32[kp * MR + i] = bf16_pair(r[2 * kp], 2 * kp + 1 < kc ? r[2 * kp + 1] : 0.0f);
      }
  } else if (p->uk == &nrt_gemm_ukernel_avx512) {
    const void *rp[14];
    for (int64_t i = 0; i < MR; i++) rp[i] = rows + i * kc;
    nrt_gemm_pack_a14_avx512(rp, kc, panel);
  } else {
    for (int64_t k = 0; k < kc; k++)
      for (int64_t i = 0; i < MR; i++) panel[k * MR + i] = rows[i * kc + k];
  }
}

/* B panels of dy^T over kc columns from q0 (one image): element (k, j) =
 * dy[group channel jp + j][q0 + k]. */
static void bwdw_pack_b(const conv_plan *p, int64_t grp, int64_t q0, int64_t kc, float *rows, float *bp) {
  const conv_geom *g = p->g;
  const nrt_operand *gy = &p->l->operands[1];
  int64_t NR = p->NR;
  int64_t n = q0 / g->L, pix0 = q0 - n * g->L;
  bool fast = p->uk == &nrt_gemm_ukernel_avx512 && gy->dtype == NRT_FLOAT32 && gy->strides[4] == 4 &&
              plane_linear(g->O, gy->strides + 2);
  int64_t ku = units(p, kc);
  for (int64_t jp = 0; jp < p->cog_pad; jp += NR) {
    float *panel = bp + jp * ku;
    int64_t cols = min64(NR, g->Cog - jp);
    if (p->uk->bf16_pairs) {
      /* unit (kp, j) = (dy[j][2kp], dy[j][2kp + 1]) */
      bool raw = gy->dtype == NRT_BFLOAT16 && gy->strides[4] == 2 && plane_linear(g->O, gy->strides + 2);
      if (raw && cols == NR && !(kc & 1)) {
        const void *cp[32];
        for (int64_t j = 0; j < NR; j++) cp[j] = ACT(gy, n, grp * g->Cog + jp + j) + pix0 * 2;
        nrt_gemm_pack_b32_avx512(cp, ku, panel);
        continue;
      }
      for (int64_t j = 0; j < cols; j++) act_cols(gy, g->O, grp * g->Cog + jp + j, q0, kc, rows + j * kc, false);
      uint32_t *u32 = (uint32_t *)panel;
      for (int64_t kp = 0; kp < ku; kp++)
        for (int64_t j = 0; j < NR; j++)
          u32[kp * NR + j] = j < cols ? bf16_pair(rows[j * kc + 2 * kp], 2 * kp + 1 < kc ? rows[j * kc + 2 * kp + 1] : 0.0f)
                                      : 0;
      continue;
    }
    if (fast && cols == NR) {
      const void *cp[32];
      for (int64_t j = 0; j < NR; j++) cp[j] = ACT(gy, n, grp * g->Cog + jp + j) + pix0 * 4;
      nrt_gemm_pack_b32_avx512(cp, kc, panel);
      continue;
    }
    for (int64_t j = 0; j < cols; j++) act_cols(gy, g->O, grp * g->Cog + jp + j, q0, kc, rows + j * kc, false);
    for (int64_t k = 0; k < kc; k++)
      for (int64_t j = 0; j < NR; j++) panel[k * NR + j] = j < cols ? rows[j * kc + k] : 0.0f;
  }
}

/* Tasks (column slice, group, block of rb Kdim rows): C^T[rows][co] summed
 * over the slice's columns (whole batch when nsplit == 1, then stored
 * straight into grad_w; else into the partial buffer). */
static void bwdw_tasks(void *ctx, int64_t begin, int64_t end) {
  conv_plan *p = ctx;
  const conv_geom *g = p->g;
  const nrt_operand *gw = &p->l->operands[0];
  int64_t MR = p->MR, NR = p->NR, KC = p->KC, rb = p->cb;
  int64_t rbuf_n = max64(MR, NR) * KC;
  float *ap = falloc(MR * KC), *bp = falloc(p->cog_pad * KC), *rows = falloc(max64(rbuf_n, rb));
  float *local = p->nsplit == 1 ? falloc(rb * p->cog_pad) : NULL;
  if (!ap || !bp || !rows || (p->nsplit == 1 && !local)) {
    p->failed = 1;
    goto out;
  }
  int64_t cols = g->N * g->L;
  for (int64_t task = begin; task < end; task++) {
    int64_t split = task / (g->G * p->nblk), u = task % (g->G * p->nblk);
    int64_t grp = u / p->nblk, blk = u % p->nblk;
    int64_t r0 = blk * rb, nr_rows = min64(rb, g->Kdim - r0);
    float *c = local ? local : p->part + ((split * g->G + grp) * p->kdim_pad + r0) * p->cog_pad;
    for (int64_t i = 0; i < rb * p->cog_pad; i++) c[i] = 0.0f;
    int64_t qa = split * cols / p->nsplit, qb = (split + 1) * cols / p->nsplit;
    for (int64_t q0 = qa; q0 < qb;) {
      /* slices of at most KC columns within one image */
      int64_t n = q0 / g->L, kc = min64(min64(KC, qb - q0), (n + 1) * g->L - q0);
      bwdw_pack_b(p, grp, q0, kc, rows, bp);
      for (int64_t ip = 0; ip < nr_rows; ip += MR) {
        bwdw_pack_a(p, grp, r0 + ip, q0, kc, rows, ap);
        for (int64_t jp = 0; jp < p->cog_pad; jp += NR)
          p->uk->fn(units(p, kc), ap, bp + jp * units(p, kc), c + ip * p->cog_pad + jp, p->cog_pad, 1.0f, 1);
      }
      q0 += kc;
    }
    if (local)
      for (int64_t co = 0; co < g->Cog; co++) {
        for (int64_t r = 0; r < nr_rows; r++) rows[r] = local[r * p->cog_pad + co];
        w_row(g, gw, grp * g->Cog + co, r0, nr_rows, rows, true);
      }
  }
out:
  free(ap);
  free(bp);
  free(rows);
  free(local);
}

/* Sums the batch slices and stores grad_w rows: units are (group, block
 * of 16 output channels), read 16 contiguous floats per tap. */
#define FINISH_CO 16

static void bwdw_finish(void *ctx, int64_t begin, int64_t end) {
  conv_plan *p = ctx;
  const conv_geom *g = p->g;
  const nrt_operand *gw = &p->l->operands[0];
  int64_t nb = (g->Cog + FINISH_CO - 1) / FINISH_CO;
  float *rows = falloc(FINISH_CO * g->Kdim);
  if (!rows) {
    p->failed = 1;
    return;
  }
  for (int64_t u = begin; u < end; u++) {
    int64_t grp = u / nb, co0 = u % nb * FINISH_CO, nco = min64(FINISH_CO, g->Cog - co0);
    for (int64_t kk = 0; kk < g->Kdim; kk++) {
      float s[FINISH_CO] = {0};
      for (int64_t sp = 0; sp < p->nsplit; sp++) {
        const float *src = p->part + ((sp * g->G + grp) * p->kdim_pad + kk) * p->cog_pad + co0;
        for (int64_t j = 0; j < nco; j++) s[j] += src[j];
      }
      for (int64_t j = 0; j < nco; j++) rows[j * g->Kdim + kk] = s[j];
    }
    for (int64_t j = 0; j < nco; j++) w_row(g, gw, grp * g->Cog + co0 + j, 0, g->Kdim, rows + j * g->Kdim, true);
  }
  free(rows);
}

static nrt_status bwdw_gemm(const conv_geom *g, const nrt_launch *l) {
  conv_plan p;
  memset(&p, 0, sizeof p);
  p.g = g;
  p.l = l;
  p.uk = pick_ukernel(&l->operands[1], &l->operands[2]);
  p.MR = p.uk->mr;
  p.NR = p.uk->nr;
  p.KC = p.uk->kc;
  p.cog_pad = round_up(g->Cog, p.NR);
  int threads = nrt_pool_threads();
  int64_t rpanels = cdiv(g->Kdim, p.MR);
  /* Row blocks of at least 8 panels (112 rows: the dy^T panels are packed
   * per block, and amortised over its rows), split further while there are
   * fewer than 4 tasks per thread; then the batch columns are sliced, with
   * partial sums added at the end. */
  int64_t want = 4 * threads;
  int64_t pb = max64(min64(8, rpanels), cdiv(rpanels, cdiv(want, g->G)));
  p.nblk = cdiv(rpanels, pb);
  p.cb = pb * p.MR;
  p.kdim_pad = p.nblk * p.cb;
  p.nsplit = 1;
  if (g->G * p.nblk < want) p.nsplit = min64(cdiv(g->N * g->L, 4 * p.KC), cdiv(want, g->G * p.nblk));
  if (p.nsplit < 1) p.nsplit = 1;
  if (p.nsplit > 1) {
    p.part = falloc(p.nsplit * g->G * p.kdim_pad * p.cog_pad);
    if (!p.part) return NRT_ERROR_OUT_OF_MEMORY;
  }
  nrt_parallel_for(p.nsplit * g->G * p.nblk, 1, bwdw_tasks, &p);
  if (!p.failed && p.nsplit > 1) nrt_parallel_for(g->G * cdiv(g->Cog, FINISH_CO), 1, bwdw_finish, &p);
  free(p.part);
  if (p.failed) {
    nrt_set_error_message("CONV_BACKWARD_WEIGHT: out of host memory for packing buffers");
    return NRT_ERROR_OUT_OF_MEMORY;
  }
  return NRT_SUCCESS;
}

/* ---- direct paths (few output channels per group) --------------------------
 * Depthwise-style convolutions have almost nothing to reuse, so a GEMM tile
 * would be mostly padding. These work tap by tap over whole planes held as
 * dense float32: for each tap and output row, a unit-stride (or strided)
 * axpy between an input row and an output row. Tasks: (image, group) for
 * the forward and input gradient, group for the weight gradient (it sums
 * over images). */

/* Loads (store = false) or stores `nc` channel planes of image n, channels
 * from c0, as dense float [nc][extent] (extent e[3]). */
static void planes_io(const nrt_operand *o, const int64_t *e, int64_t n, int64_t c0, int64_t nc, float *buf,
                      bool store) {
  int64_t npix = e[0] * e[1] * e[2];
  for (int64_t c = 0; c < nc; c++) act_cols(o, e, c0 + c, n * npix, npix, buf + c * npix, store);
}

/* Calls body(tap, out row index ro, input row pointer offset ri) for every
 * output row whose tap row lies inside the input, with the tap's valid
 * output columns [t.lo, t.hi). */
#define FOR_TAP_ROWS(g, t, ro, ri, ...)                                                        \
  for (int64_t od_ = 0; od_ < (g)->O[0]; od_++) {                                              \
    int64_t id_ = od_ * (g)->S[0] + (t).off[0];                                                \
    if (id_ < 0 || id_ >= (g)->I[0]) continue;                                                 \
    for (int64_t oh_ = 0; oh_ < (g)->O[1]; oh_++) {                                            \
      int64_t ih_ = oh_ * (g)->S[1] + (t).off[1];                                              \
      if (ih_ < 0 || ih_ >= (g)->I[1]) continue;                                               \
      int64_t ro = (od_ * (g)->O[1] + oh_) * (g)->O[2];                                        \
      int64_t ri = (id_ * (g)->I[1] + ih_) * (g)->I[2] + (t).off[2];                           \
      __VA_ARGS__                                                                              \
    }                                                                                          \
  }

typedef struct direct_bufs {
  float *x, *y, *w;
} direct_bufs;

static bool direct_alloc(const conv_geom *g, direct_bufs *b) {
  b->x = falloc(g->Cig * g->LI);
  b->y = falloc(g->Cog * g->L);
  b->w = falloc(g->Cog * g->Kdim);
  return b->x && b->y && b->w;
}

static void direct_free(direct_bufs *b) {
  free(b->x);
  free(b->y);
  free(b->w);
}

static void direct_fwd(void *ctx, int64_t begin, int64_t end) {
  conv_plan *p = ctx;
  const conv_geom *g = p->g;
  const nrt_launch *l = p->l;
  const nrt_operand *y = &l->operands[0], *x = &l->operands[1], *w = &l->operands[2];
  const nrt_operand *bias = l->ninputs == 3 ? &l->operands[3] : NULL;
  direct_bufs b;
  if (!direct_alloc(g, &b)) {
    p->failed = 1;
    goto out;
  }
  const int64_t S2 = g->S[2];
  for (int64_t task = begin; task < end; task++) {
    int64_t n = task / g->G, grp = task % g->G;
    for (int64_t co = 0; co < g->Cog; co++) {
      w_row(g, w, grp * g->Cog + co, 0, g->Kdim, b.w + co * g->Kdim, false);
      float v = bias ? load1(bias, grp * g->Cog + co) : 0.0f;
      for (int64_t i = 0; i < g->L; i++) b.y[co * g->L + i] = v;
    }
    planes_io(x, g->I, n, grp * g->Cig, g->Cig, b.x, false);
    for (int64_t kk = 0; kk < g->Kdim; kk++) {
      tap t;
      tap_init(g, kk, &t);
      const float *xc = b.x + t.ci * g->LI;
      FOR_TAP_ROWS(g, t, ro, ri, {
        for (int64_t co = 0; co < g->Cog; co++) {
          float wv = b.w[co * g->Kdim + kk], *dst = b.y + co * g->L + ro;
          const float *src = xc + ri;
          if (S2 == 1) {
            for (int64_t ow = t.lo; ow < t.hi; ow++) dst[ow] += wv * src[ow];
          } else {
            for (int64_t ow = t.lo; ow < t.hi; ow++) dst[ow] += wv * src[ow * S2];
          }
        }
      })
    }
    planes_io(y, g->O, n, grp * g->Cog, g->Cog, b.y, true);
  }
out:
  direct_free(&b);
}

static void direct_bwdi(void *ctx, int64_t begin, int64_t end) {
  conv_plan *p = ctx;
  const conv_geom *g = p->g;
  const nrt_launch *l = p->l;
  const nrt_operand *gx = &l->operands[0], *gy = &l->operands[1], *w = &l->operands[2];
  const nrt_operand *bias = l->ninputs == 3 ? &l->operands[3] : NULL;
  direct_bufs b;
  if (!direct_alloc(g, &b)) {
    p->failed = 1;
    goto out;
  }
  const int64_t S2 = g->S[2];
  for (int64_t task = begin; task < end; task++) {
    int64_t n = task / g->G, grp = task % g->G;
    for (int64_t co = 0; co < g->Cog; co++) w_row(g, w, grp * g->Cog + co, 0, g->Kdim, b.w + co * g->Kdim, false);
    for (int64_t ci = 0; ci < g->Cig; ci++) {
      float v = bias ? load1(bias, grp * g->Cig + ci) : 0.0f;
      for (int64_t i = 0; i < g->LI; i++) b.x[ci * g->LI + i] = v;
    }
    planes_io(gy, g->O, n, grp * g->Cog, g->Cog, b.y, false);
    for (int64_t kk = 0; kk < g->Kdim; kk++) {
      tap t;
      tap_init(g, kk, &t);
      float *xc = b.x + t.ci * g->LI;
      FOR_TAP_ROWS(g, t, ro, ri, {
        for (int64_t co = 0; co < g->Cog; co++) {
          float wv = b.w[co * g->Kdim + kk], *dst = xc + ri;
          const float *src = b.y + co * g->L + ro;
          if (S2 == 1) {
            for (int64_t ow = t.lo; ow < t.hi; ow++) dst[ow] += wv * src[ow];
          } else {
            for (int64_t ow = t.lo; ow < t.hi; ow++) dst[ow * S2] += wv * src[ow];
          }
        }
      })
    }
    planes_io(gx, g->I, n, grp * g->Cig, g->Cig, b.x, true);
  }
out:
  direct_free(&b);
}

static void direct_bwdw(void *ctx, int64_t begin, int64_t end) {
  conv_plan *p = ctx;
  const conv_geom *g = p->g;
  const nrt_launch *l = p->l;
  const nrt_operand *gw = &l->operands[0], *gy = &l->operands[1], *x = &l->operands[2];
  direct_bufs b;
  double *acc = malloc(sizeof(double) * (size_t)(g->Cog * g->Kdim + 1));
  if (!direct_alloc(g, &b) || !acc) {
    p->failed = 1;
    goto out;
  }
  const int64_t S2 = g->S[2];
  for (int64_t grp = begin; grp < end; grp++) {
    for (int64_t i = 0; i < g->Cog * g->Kdim; i++) acc[i] = 0.0;
    for (int64_t n = 0; n < g->N; n++) {
      planes_io(x, g->I, n, grp * g->Cig, g->Cig, b.x, false);
      planes_io(gy, g->O, n, grp * g->Cog, g->Cog, b.y, false);
      for (int64_t kk = 0; kk < g->Kdim; kk++) {
        tap t;
        tap_init(g, kk, &t);
        const float *xc = b.x + t.ci * g->LI;
        for (int64_t co = 0; co < g->Cog; co++) {
          float sum = 0.0f;
          FOR_TAP_ROWS(g, t, ro, ri, {
            const float *dy = b.y + co * g->L + ro, *src = xc + ri;
            float s8[8] = {0};
            int64_t ow = t.lo;
            if (S2 == 1) {
              for (; ow + 8 <= t.hi; ow += 8)
                for (int v = 0; v < 8; v++) s8[v] += dy[ow + v] * src[ow + v];
            }
            for (; ow < t.hi; ow++) s8[0] += dy[ow] * src[ow * S2];
            sum += ((s8[0] + s8[1]) + (s8[2] + s8[3])) + ((s8[4] + s8[5]) + (s8[6] + s8[7]));
          })
          acc[co * g->Kdim + kk] += sum;
        }
      }
    }
    for (int64_t co = 0; co < g->Cog; co++) {
      for (int64_t kk = 0; kk < g->Kdim; kk++) b.w[kk] = (float)acc[co * g->Kdim + kk];
      w_row(g, gw, grp * g->Cog + co, 0, g->Kdim, b.w, true);
    }
  }
out:
  direct_free(&b);
  free(acc);
}

static nrt_status run_direct(const conv_geom *g, const nrt_launch *l) {
  conv_plan p;
  memset(&p, 0, sizeof p);
  p.g = g;
  p.l = l;
  int64_t work = (g->L + g->LI) * (g->Cog + g->Cig) * g->KK;
  int64_t grain = work >= 65536 ? 1 : 65536 / (work + 1) + 1;
  switch ((int)l->op) {
  case NRT_OP(CONV): nrt_parallel_for(g->N * g->G, grain, direct_fwd, &p); break;
  case NRT_OP(CONV_BACKWARD_INPUT): nrt_parallel_for(g->N * g->G, grain, direct_bwdi, &p); break;
  default: nrt_parallel_for(g->G, 1, direct_bwdw, &p); break;
  }
  if (p.failed) {
    nrt_set_error_message("%s: out of host memory for work buffers", nrt_op_name(l->op));
    return NRT_ERROR_OUT_OF_MEMORY;
  }
  return NRT_SUCCESS;
}

/* ---- entry ------------------------------------------------------------------ */

/* Output channels per group up to which the direct path beats a GEMM whose
 * MR-row tiles would be mostly padding. */
#define DIRECT_MAX_COG 2

nrt_status nrt_conv_execute(const nrt_launch *l) {
  conv_geom g;
  nrt_status st = geom_init(l, &g);
  if (st != NRT_SUCCESS) return st;
  bool empty_out = l->op == NRT_OP(CONV) ? g.N * g.G * g.Cog * g.L == 0
                   : l->op == NRT_OP(CONV_BACKWARD_INPUT) ? g.N * g.G * g.Cig * g.LI == 0
                                                         : g.G * g.Cog * g.Kdim == 0;
  if (empty_out) return NRT_SUCCESS;
  /* An empty reduction (no input channels, no output pixels, no images)
   * and the reference mode take the loop nest. */
  bool ints = !nrt_dtype_is_floating(l->compute_dtype);
  bool degenerate = g.Kdim == 0 || g.L == 0 || g.N == 0 || g.Cog == 0;
  if (degenerate || ints || nrt_kernels_reference()) {
    switch ((int)l->op) {
    case NRT_OP(CONV): ref_forward(&g, l, ints); return NRT_SUCCESS;
    case NRT_OP(CONV_BACKWARD_INPUT): return ref_backward_input(&g, l, ints);
    default: ref_backward_weight(&g, l, ints); return NRT_SUCCESS;
    }
  }
  if (g.Cog <= DIRECT_MAX_COG) return run_direct(&g, l);
  switch ((int)l->op) {
  case NRT_OP(CONV): return fwd_gemm(&g, l);
  case NRT_OP(CONV_BACKWARD_INPUT): return bwdi_gemm(&g, l);
  default: return bwdw_gemm(&g, l);
  }
}
