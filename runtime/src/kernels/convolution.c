/* Convolution kernels (NRT_KIND_CONV): grouped 1-3 d convolution, its
 * input gradient (which is also the transposed convolution) and its weight
 * gradient, as GEMMs over the im2col matrix.
 *
 * For one group, the im2col matrix `col` has a row per kernel tap
 * kk = (ci, kd, kh, kw) (Kdim = Cig * KD * KH * KW rows) and a column per
 * output pixel q of every image (q = n * L + pixel): col[kk][q] is the
 * input element tap kk of the window at q reads, or 0 in the padding.
 *   forward      y    = W (Cog x Kdim) @ col (Kdim x N*L)
 *   input grad   dcol = W^T (Kdim x Cog) @ dy (Cog x L), per image, then
 *                col2im: each dcol element is added to the input element
 *                it was read from
 *   weight grad  dW^T = col (Kdim x N*L) @ dy^T (N*L x Cog)
 * The matrix is never materialised: rows of it are generated, a KC-deep
 * slice at a time, straight into the GEMM's packed panels (forward: B
 * panels; weight grad: A panels), so a tile of it only lives in L1/L2. The
 * weights are packed once per launch. The micro-kernels are gemm.c's
 * float32 ones: every dtype is converted while packing and accumulates in
 * float32, as PyTorch's CPU convolutions do.
 *
 * Work split (tasks run on the kernel pool; none writes what another
 * writes):
 *   forward      (group, tile of output columns); columns run across
 *                images, so small feature maps still make wide tiles;
 *   input grad   (image, group, block of input channels): col2im of
 *                different channels never touches the same element;
 *   weight grad  (group, block of Kdim rows, slice of the batch); batch
 *                slices keep partial sums, added up in a final pass.
 * With very few output channels per group (depthwise) a GEMM tile would be
 * mostly padding, so a direct path does axpy / dot products over generated
 * im2col rows instead.
 *
 * The reference path is a plain loop nest accumulating in double; it also
 * serves the degenerate shapes (an empty dimension). */
#pragma GCC optimize("O3,no-trapping-math,no-math-errno")
#include <stdatomic.h>
#include <stdlib.h>
#include "kernels/gemm.h"

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
  if (!nrt_dtype_is_floating(l->compute_dtype)) {
    nrt_set_error_message("%s: floating dtypes only, got %s", op, nrt_dtype_name(l->compute_dtype));
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
    int64_t span = g->I[i] + 2 * g->P[i] - g->D[i] * (g->K[i] - 1) - 1;
    int64_t want = span < 0 ? 0 : span / g->S[i] + 1;
    if (g->O[i] != want) {
      nrt_set_error_message("%s: dim %d: output size %lld, but input %lld with kernel %lld, stride %lld, "
                            "padding %lld, dilation %lld gives %lld", op, i, (long long)g->O[i],
                            (long long)g->I[i], (long long)g->K[i], (long long)g->S[i],
                            (long long)g->P[i], (long long)g->D[i], (long long)want);
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

/* Loads or stores weight row o over taps [kk0, kk0 + len). */
static void w_row(const conv_geom *g, const nrt_operand *w, int64_t o, int64_t kk0, int64_t len, float *buf,
                  bool store) {
  const int64_t *ws = w->strides;
  /* Contiguous taps (any standard weight layout but channels-last): one run. */
  if (ws[3] == g->K[2] * ws[4] && ws[2] == g->K[1] * ws[3] && ws[1] == g->K[0] * ws[2]) {
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

static double ref_ld(const nrt_operand *o, const int64_t *idx, int nidx) {
  const char *p = o->data;
  for (int i = 0; i < nidx; i++) p += idx[i] * o->strides[i];
  return (float)nrt_ref_load_f64(p, o->dtype); /* float32 precision, as the device computes */
}

static void ref_st(const nrt_operand *o, const int64_t *idx, int nidx, double v) {
  char *p = o->data;
  for (int i = 0; i < nidx; i++) p += idx[i] * o->strides[i];
  nrt_ref_store_f64(p, o->dtype, v);
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

static void ref_forward(const conv_geom *g, const nrt_launch *l) {
  const nrt_operand *y = &l->operands[0], *x = &l->operands[1], *w = &l->operands[2];
  const nrt_operand *bias = l->ninputs == 3 ? &l->operands[3] : NULL;
  int64_t o[3], k[3], in[3];
  for (int64_t n = 0; n < g->N; n++)
    for (int64_t c = 0; c < g->G * g->Cog; c++) {
      int64_t grp = c / g->Cog;
      FOR3(o, g->O) {
        double acc = 0.0;
        if (bias) acc = ref_ld(bias, &c, 1);
        for (int64_t ci = 0; ci < g->Cig; ci++)
          FOR3(k, g->K) {
            if (!ref_in(g, o, k, in)) continue;
            int64_t xi[5] = {n, grp * g->Cig + ci, in[0], in[1], in[2]};
            int64_t wi[5] = {c, ci, k[0], k[1], k[2]};
            acc += ref_ld(x, xi, 5) * ref_ld(w, wi, 5);
          }
        int64_t yi[5] = {n, c, o[0], o[1], o[2]};
        ref_st(y, yi, 5, acc);
      }
    }
}

static nrt_status ref_backward_input(const conv_geom *g, const nrt_launch *l) {
  const nrt_operand *gx = &l->operands[0], *gy = &l->operands[1], *w = &l->operands[2];
  const nrt_operand *bias = l->ninputs == 3 ? &l->operands[3] : NULL;
  double *acc = malloc(sizeof(double) * (size_t)(g->Cig * g->LI + 1));
  if (!acc) return NRT_ERROR_OUT_OF_MEMORY;
  int64_t o[3], k[3], in[3], i3[3];
  for (int64_t n = 0; n < g->N; n++)
    for (int64_t grp = 0; grp < g->G; grp++) {
      for (int64_t ci = 0; ci < g->Cig; ci++) {
        int64_t c = grp * g->Cig + ci;
        double b = bias ? ref_ld(bias, &c, 1) : 0.0;
        for (int64_t i = 0; i < g->LI; i++) acc[ci * g->LI + i] = b;
      }
      for (int64_t co = 0; co < g->Cog; co++)
        FOR3(o, g->O) {
          int64_t yi[5] = {n, grp * g->Cog + co, o[0], o[1], o[2]};
          double dy = ref_ld(gy, yi, 5);
          for (int64_t ci = 0; ci < g->Cig; ci++)
            FOR3(k, g->K) {
              if (!ref_in(g, o, k, in)) continue;
              int64_t wi[5] = {grp * g->Cog + co, ci, k[0], k[1], k[2]};
              acc[ci * g->LI + (in[0] * g->I[1] + in[1]) * g->I[2] + in[2]] += dy * ref_ld(w, wi, 5);
            }
        }
      for (int64_t ci = 0; ci < g->Cig; ci++)
        FOR3(i3, g->I) {
          int64_t xi[5] = {n, grp * g->Cig + ci, i3[0], i3[1], i3[2]};
          ref_st(gx, xi, 5, acc[ci * g->LI + (i3[0] * g->I[1] + i3[1]) * g->I[2] + i3[2]]);
        }
    }
  free(acc);
  return NRT_SUCCESS;
}

static void ref_backward_weight(const conv_geom *g, const nrt_launch *l) {
  const nrt_operand *gw = &l->operands[0], *gy = &l->operands[1], *x = &l->operands[2];
  int64_t o[3], k[3], in[3];
  for (int64_t c = 0; c < g->G * g->Cog; c++) {
    int64_t grp = c / g->Cog;
    for (int64_t ci = 0; ci < g->Cig; ci++)
      FOR3(k, g->K) {
        double acc = 0.0;
        for (int64_t n = 0; n < g->N; n++)
          FOR3(o, g->O) {
            if (!ref_in(g, o, k, in)) continue;
            int64_t yi[5] = {n, c, o[0], o[1], o[2]};
            int64_t xi[5] = {n, grp * g->Cig + ci, in[0], in[1], in[2]};
            acc += ref_ld(gy, yi, 5) * ref_ld(x, xi, 5);
          }
        int64_t wi[5] = {c, ci, k[0], k[1], k[2]};
        ref_st(gw, wi, 5, acc);
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
  int64_t tpi;      /* forward: tiles per image (0: tiles run across images) */
  int64_t mpb, nmb; /* forward: row panels per block of output channels, blocks */
  float *bshared;   /* forward with channel blocks: the tiles' B panels, generated once */
  int64_t cb, nblk; /* input grad: channels per block, blocks per group; weight grad: rows per block */
  int64_t nsplit;   /* weight grad: batch slices */
  int64_t cog_pad, kdim_pad;
  float *part;      /* weight grad: partial results [nsplit][G][kdim_pad][cog_pad] */
  _Atomic int failed;
} conv_plan;

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

/* ---- forward (GEMM) -------------------------------------------------------- */

/* Weight panels for the forward: per group, for each KC slice of taps, for
 * each MR-row panel: element (k, i) = W[group row i][tap k]. */
static void fwd_pack_w(void *ctx, int64_t begin, int64_t end) {
  conv_plan *p = ctx;
  const conv_geom *g = p->g;
  const nrt_operand *w = &p->l->operands[2];
  int64_t MR = p->MR;
  float *rows = falloc(MR * g->Kdim);
  if (!rows) {
    p->failed = 1;
    return;
  }
  for (int64_t u = begin; u < end; u++) {
    int64_t grp = u / p->mp, ip = u % p->mp;
    int64_t nrow = min64(MR, g->Cog - ip * MR);
    for (int64_t i = 0; i < nrow; i++) w_row(g, w, grp * g->Cog + ip * MR + i, 0, g->Kdim, rows + i * g->Kdim, false);
    float *base = p->wp + grp * p->wp_unit;
    for (int64_t k0 = 0; k0 < g->Kdim; k0 += p->KC) {
      int64_t kc = min64(p->KC, g->Kdim - k0);
      float *panel = base + p->mp * MR * k0 + ip * MR * kc;
      for (int64_t k = 0; k < kc; k++)
        for (int64_t i = 0; i < MR; i++) panel[k * MR + i] = i < nrow ? rows[i * g->Kdim + k0 + k] : 0.0f;
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
  float *row = falloc(p->NT);
  if (!row) {
    p->failed = 1;
    return;
  }
  for (int64_t u = begin; u < end; u++) {
    int64_t gt = u / nslices, k0 = u % nslices * p->KC, q0, nt;
    fwd_tile_cols(p, gt % p->ntiles, &q0, &nt);
    fwd_gen_slice(p, gt / p->ntiles, q0, nt, k0, min64(p->KC, g->Kdim - k0), row,
                  p->bshared + gt * g->Kdim * p->NT + k0 * p->NT);
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
  float *bp = falloc(KC * NT), *row = falloc(NT), *ct = falloc(rows_pad * NT), *edge = falloc(MR * NR);
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
      int64_t kc = min64(KC, g->Kdim - k0);
      const float *b;
      if (p->bshared) {
        b = p->bshared + gt * g->Kdim * NT + k0 * NT;
      } else {
        fwd_gen_slice(p, grp, q0, nt, k0, kc, row, bp);
        b = bp;
      }
      for (int64_t ip = ip0; ip < ip1; ip++) {
        int64_t rows = min64(MR, g->Cog - ip * MR);
        const float *ap = wg + p->mp * MR * k0 + ip * MR * kc;
        for (int64_t jp = 0; jp < nt; jp += NR) {
          int64_t cols = min64(NR, nt - jp);
          float *cb = c + ip * MR * ldc + jp;
          if (direct) {
            ublock(p, kc, ap, b + jp * kc, cb, ldc, rows, cols, accumulate, edge);
          } else {
            /* the scratch tile has room for full blocks */
            p->uk->fn(kc, ap, b + jp * kc, cb, ldc, 1.0f, accumulate);
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

static nrt_status fwd_gemm(const conv_geom *g, const nrt_launch *l) {
  conv_plan p;
  memset(&p, 0, sizeof p);
  p.g = g;
  p.l = l;
  p.uk = nrt_gemm_ukernel_f32();
  p.MR = p.uk->mr;
  p.NR = p.uk->nr;
  p.KC = min64(p.uk->kc, g->Kdim);
  p.mp = cdiv(g->Cog, p.MR);
  p.wp_unit = p.mp * p.MR * g->Kdim;
  int threads = nrt_pool_threads();
  int64_t cols = g->N * g->L;
  /* Column tiles of at most 512, evened out; large images are tiled one
   * by one, so that tiles write straight into y, small ones together.
   * When that leaves fewer than 4 tasks per thread, the output channels
   * are split into blocks of at least 4 row panels (each block generates
   * its own im2col tile, which costs 1 / (2 * rows) of its flops), and
   * then, for small Cog, the columns into narrower tiles. */
  int64_t want = 4 * threads;
  if (g->L >= 512 || g->N * g->L >= 512 * want) {
    p.tpi = cdiv(g->L, 512);
    p.NT = round_up(cdiv(g->L, p.tpi), p.NR);
    p.tpi = cdiv(g->L, p.NT);
    p.ntiles = g->N * p.tpi;
  } else {
    p.NT = round_up(cdiv(cols, cdiv(cols, 512)), p.NR);
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
  int64_t shared = g->G * p.ntiles * g->Kdim * p.NT;
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
  float *row = falloc(nrows_max);
  if (!row) {
    p->failed = 1;
    return;
  }
  for (int64_t u = begin; u < end; u++) {
    int64_t grp = u / p->nblk, blk = u % p->nblk;
    int64_t ci0 = blk * p->cb, nrows = min64(p->cb, g->Cig - ci0) * g->KK;
    int64_t rows_pad = round_up(nrows, MR);
    float *base = p->wp + u * p->wp_unit;
    for (int64_t co = 0; co < g->Cog; co++) {
      w_row(g, w, grp * g->Cog + co, ci0 * g->KK, nrows, row, false);
      int64_t k0 = co / p->KC * p->KC, kc = min64(p->KC, g->Cog - k0), k = co - k0;
      for (int64_t ip = 0; ip < rows_pad; ip += MR) {
        float *panel = base + rows_pad * k0 + ip * kc;
        for (int64_t i = 0; i < MR; i++) panel[k * MR + i] = ip + i < nrows ? row[ip + i] : 0.0f;
      }
    }
  }
  free(row);
}

static void bwdi_tasks(void *ctx, int64_t begin, int64_t end) {
  conv_plan *p = ctx;
  const conv_geom *g = p->g;
  const nrt_launch *l = p->l;
  const nrt_operand *gx = &l->operands[0], *gy = &l->operands[1];
  const nrt_operand *bias = l->ninputs == 3 ? &l->operands[3] : NULL;
  int64_t MR = p->MR, NR = p->NR, NT = p->NT, KC = p->KC;
  int64_t rows_pad_max = round_up(p->cb * g->KK, MR);
  float *bp = falloc(KC * NT), *row = falloc(NT), *dcol = falloc(rows_pad_max * NT);
  float *scratch = gx->dtype == NRT_FLOAT32 ? NULL : falloc(p->cb * g->LI);
  if (!bp || !row || !dcol || (gx->dtype != NRT_FLOAT32 && !scratch)) {
    p->failed = 1;
    goto out;
  }
  for (int64_t task = begin; task < end; task++) {
    int64_t n = task / (g->G * p->nblk), u = task % (g->G * p->nblk);
    int64_t grp = u / p->nblk, blk = u % p->nblk;
    int64_t ci0 = blk * p->cb, ncb = min64(p->cb, g->Cig - ci0), nrows = ncb * g->KK;
    int64_t rows_pad = round_up(nrows, MR);
    int64_t as[4];
    float *ac = acc_planes(g, gx, n, grp * g->Cig + ci0, scratch, as);
    acc_init(g, ac, as, ncb, bias, grp * g->Cig + ci0);
    const float *wb = p->wp + u * p->wp_unit;
    for (int64_t p0 = 0; p0 < g->L; p0 += NT) {
      int64_t nt = min64(NT, g->L - p0);
      for (int64_t k0 = 0; k0 < g->Cog; k0 += KC) {
        int64_t kc = min64(KC, g->Cog - k0);
        for (int64_t k = 0; k < kc; k++) {
          act_cols(gy, g->O, grp * g->Cog + k0 + k, n * g->L + p0, nt, row, false);
          row_to_bpanels(p, row, nt, k, kc, bp);
        }
        for (int64_t ip = 0; ip < rows_pad; ip += MR) {
          const float *ap = wb + rows_pad * k0 + ip * kc;
          for (int64_t jp = 0; jp < nt; jp += NR)
            p->uk->fn(kc, ap, bp + jp * kc, dcol + ip * NT + jp, NT, 1.0f, k0 > 0);
        }
      }
      for (int64_t r = 0; r < nrows; r++) {
        tap t;
        tap_init(g, ci0 * g->KK + r, &t);
        col2im_img(g, &t, ac + (t.ci - ci0) * as[0], as + 1, p0, nt, dcol + r * NT);
      }
    }
    if (gx->dtype != NRT_FLOAT32) acc_store(g, gx, n, grp * g->Cig + ci0, ncb, ac);
  }
out:
  free(bp);
  free(row);
  free(dcol);
  free(scratch);
}

static nrt_status bwdi_gemm(const conv_geom *g, const nrt_launch *l) {
  conv_plan p;
  memset(&p, 0, sizeof p);
  p.g = g;
  p.l = l;
  p.uk = nrt_gemm_ukernel_f32();
  p.MR = p.uk->mr;
  p.NR = p.uk->nr;
  p.KC = min64(p.uk->kc, g->Cog);
  int threads = nrt_pool_threads();
  /* Channel blocks: enough tasks for the threads, and a dcol tile of about
   * 256 KiB (rows = the block's taps). */
  int64_t want = cdiv(4 * threads, g->N * g->G);
  int64_t nblk = min64(g->Cig, max64(want, cdiv(g->Kdim, 512)));
  p.cb = cdiv(g->Cig, nblk);
  p.nblk = cdiv(g->Cig, p.cb);
  int64_t rows_pad = round_up(p.cb * g->KK, p.MR);
  p.NT = min64(512, max64(p.NR, (65536 / rows_pad) / p.NR * p.NR));
  p.NT = min64(p.NT, round_up(g->L, p.NR));
  p.wp_unit = rows_pad * g->Cog;
  p.wp = falloc(g->G * p.nblk * p.wp_unit);
  if (!p.wp) return NRT_ERROR_OUT_OF_MEMORY;
  nrt_parallel_for(g->G * p.nblk, 1, bwdi_pack_w, &p);
  if (!p.failed) nrt_parallel_for(g->N * g->G * p.nblk, 1, bwdi_tasks, &p);
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
  if (p->uk == &nrt_gemm_ukernel_avx512) {
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
  for (int64_t jp = 0; jp < p->cog_pad; jp += NR) {
    float *panel = bp + jp * kc;
    int64_t cols = min64(NR, g->Cog - jp);
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

static void bwdw_tasks(void *ctx, int64_t begin, int64_t end) {
  conv_plan *p = ctx;
  const conv_geom *g = p->g;
  int64_t MR = p->MR, NR = p->NR, KC = p->KC, rb = p->cb;
  int64_t rbuf_n = max64(MR, NR) * KC;
  float *ap = falloc(MR * KC), *bp = falloc(p->cog_pad * KC), *rows = falloc(rbuf_n);
  if (!ap || !bp || !rows) {
    p->failed = 1;
    goto out;
  }
  for (int64_t task = begin; task < end; task++) {
    int64_t split = task / (g->G * p->nblk), u = task % (g->G * p->nblk);
    int64_t grp = u / p->nblk, blk = u % p->nblk;
    int64_t r0 = blk * rb, nr_rows = min64(rb, p->kdim_pad - r0);
    float *c = p->part + ((split * g->G + grp) * p->kdim_pad + r0) * p->cog_pad;
    for (int64_t i = 0; i < nr_rows * p->cog_pad; i++) c[i] = 0.0f;
    int64_t nb0 = split * g->N / p->nsplit, nb1 = (split + 1) * g->N / p->nsplit;
    for (int64_t n = nb0; n < nb1; n++)
      for (int64_t p0 = 0; p0 < g->L; p0 += KC) {
        int64_t kc = min64(KC, g->L - p0), q0 = n * g->L + p0;
        bwdw_pack_b(p, grp, q0, kc, rows, bp);
        for (int64_t ip = 0; ip < nr_rows; ip += MR) {
          if (r0 + ip >= g->Kdim) break;
          bwdw_pack_a(p, grp, r0 + ip, q0, kc, rows, ap);
          for (int64_t jp = 0; jp < p->cog_pad; jp += NR)
            p->uk->fn(kc, ap, bp + jp * kc, c + ip * p->cog_pad + jp, p->cog_pad, 1.0f, 1);
        }
      }
  }
out:
  free(ap);
  free(bp);
  free(rows);
}

/* Sums the batch slices and stores grad_w rows (group, co). */
static void bwdw_finish(void *ctx, int64_t begin, int64_t end) {
  conv_plan *p = ctx;
  const conv_geom *g = p->g;
  const nrt_operand *gw = &p->l->operands[0];
  float *row = falloc(g->Kdim);
  if (!row) {
    p->failed = 1;
    return;
  }
  for (int64_t u = begin; u < end; u++) {
    int64_t grp = u / g->Cog, co = u % g->Cog;
    for (int64_t kk = 0; kk < g->Kdim; kk++) {
      float s = 0.0f;
      for (int64_t sp = 0; sp < p->nsplit; sp++)
        s += p->part[((sp * g->G + grp) * p->kdim_pad + kk) * p->cog_pad + co];
      row[kk] = s;
    }
    w_row(g, gw, u, 0, g->Kdim, row, true);
  }
  free(row);
}

static nrt_status bwdw_gemm(const conv_geom *g, const nrt_launch *l) {
  conv_plan p;
  memset(&p, 0, sizeof p);
  p.g = g;
  p.l = l;
  p.uk = nrt_gemm_ukernel_f32();
  p.MR = p.uk->mr;
  p.NR = p.uk->nr;
  p.KC = p.uk->kc;
  p.cog_pad = round_up(g->Cog, p.NR);
  int threads = nrt_pool_threads();
  int64_t rpanels = cdiv(g->Kdim, p.MR);
  /* Row blocks: at least two panels each (B panels are packed per block),
   * enough blocks for the threads; the batch is sliced when groups x
   * blocks still leave threads idle. */
  int64_t want = cdiv(4 * threads, g->G);
  int64_t pb = max64(2, cdiv(rpanels, want));
  p.nblk = cdiv(rpanels, pb);
  p.cb = pb * p.MR;
  p.kdim_pad = p.nblk * p.cb;
  p.nsplit = 1;
  if (g->G * p.nblk < 2 * threads) p.nsplit = min64(g->N, cdiv(4 * threads, g->G * p.nblk));
  p.part = falloc(p.nsplit * g->G * p.kdim_pad * p.cog_pad);
  if (!p.part) return NRT_ERROR_OUT_OF_MEMORY;
  nrt_parallel_for(p.nsplit * g->G * p.nblk, 1, bwdw_tasks, &p);
  if (!p.failed) nrt_parallel_for(g->G * g->Cog, 16, bwdw_finish, &p);
  free(p.part);
  if (p.failed) {
    nrt_set_error_message("CONV_BACKWARD_WEIGHT: out of host memory for packing buffers");
    return NRT_ERROR_OUT_OF_MEMORY;
  }
  return NRT_SUCCESS;
}

/* ---- direct paths (few output channels per group) -------------------------- */

#define DIRECT_NT 1024

/* Forward: per (image, group, pixel tile), every im2col row is generated
 * once and added, scaled by each output channel's weight, into Cog rows. */
static void direct_fwd(void *ctx, int64_t begin, int64_t end) {
  conv_plan *p = ctx;
  const conv_geom *g = p->g;
  const nrt_launch *l = p->l;
  const nrt_operand *y = &l->operands[0], *x = &l->operands[1], *w = &l->operands[2];
  const nrt_operand *bias = l->ninputs == 3 ? &l->operands[3] : NULL;
  int64_t tiles = cdiv(g->L, DIRECT_NT);
  float *wt = malloc(sizeof(float) * (size_t)(g->Cog * g->Kdim)), *row = malloc(sizeof(float) * DIRECT_NT);
  float *acc = malloc(sizeof(float) * (size_t)(g->Cog * DIRECT_NT));
  if (!wt || !row || !acc) {
    p->failed = 1;
    goto out;
  }
  int64_t wgrp = -1;
  for (int64_t task = begin; task < end; task++) {
    int64_t n = task / (g->G * tiles), r = task % (g->G * tiles), grp = r / tiles;
    int64_t p0 = (r % tiles) * DIRECT_NT, nt = min64(DIRECT_NT, g->L - p0);
    if (grp != wgrp) {
      for (int64_t co = 0; co < g->Cog; co++) w_row(g, w, grp * g->Cog + co, 0, g->Kdim, wt + co * g->Kdim, false);
      wgrp = grp;
    }
    for (int64_t co = 0; co < g->Cog; co++) {
      float v = bias ? load1(bias, grp * g->Cog + co) : 0.0f;
      for (int64_t j = 0; j < nt; j++) acc[co * DIRECT_NT + j] = v;
    }
    for (int64_t kk = 0; kk < g->Kdim; kk++) {
      tap t;
      tap_init(g, kk, &t);
      im2col_img(g, &t, ACT(x, n, grp * g->Cig + t.ci), x->strides, x->dtype, p0, nt, row);
      for (int64_t co = 0; co < g->Cog; co++) {
        float wv = wt[co * g->Kdim + kk], *a = acc + co * DIRECT_NT;
        for (int64_t j = 0; j < nt; j++) a[j] += wv * row[j];
      }
    }
    for (int64_t co = 0; co < g->Cog; co++)
      act_cols(y, g->O, grp * g->Cog + co, n * g->L + p0, nt, acc + co * DIRECT_NT, true);
  }
out:
  free(wt);
  free(row);
  free(acc);
}

/* Input gradient: per (image, group), dcol rows = sum_co W[co][kk] dy[co],
 * scattered into the group's accumulator planes. */
static void direct_bwdi(void *ctx, int64_t begin, int64_t end) {
  conv_plan *p = ctx;
  const conv_geom *g = p->g;
  const nrt_launch *l = p->l;
  const nrt_operand *gx = &l->operands[0], *gy = &l->operands[1], *w = &l->operands[2];
  const nrt_operand *bias = l->ninputs == 3 ? &l->operands[3] : NULL;
  float *wt = malloc(sizeof(float) * (size_t)(g->Cog * g->Kdim)), *row = malloc(sizeof(float) * DIRECT_NT);
  float *dy = malloc(sizeof(float) * (size_t)(g->Cog * DIRECT_NT));
  float *scratch = gx->dtype == NRT_FLOAT32 ? NULL : malloc(sizeof(float) * (size_t)(g->Cig * g->LI));
  if (!wt || !row || !dy || (gx->dtype != NRT_FLOAT32 && !scratch)) {
    p->failed = 1;
    goto out;
  }
  for (int64_t task = begin; task < end; task++) {
    int64_t n = task / g->G, grp = task % g->G;
    for (int64_t co = 0; co < g->Cog; co++) w_row(g, w, grp * g->Cog + co, 0, g->Kdim, wt + co * g->Kdim, false);
    int64_t as[4];
    float *ac = acc_planes(g, gx, n, grp * g->Cig, scratch, as);
    acc_init(g, ac, as, g->Cig, bias, grp * g->Cig);
    for (int64_t p0 = 0; p0 < g->L; p0 += DIRECT_NT) {
      int64_t nt = min64(DIRECT_NT, g->L - p0);
      for (int64_t co = 0; co < g->Cog; co++)
        act_cols(gy, g->O, grp * g->Cog + co, n * g->L + p0, nt, dy + co * DIRECT_NT, false);
      for (int64_t kk = 0; kk < g->Kdim; kk++) {
        for (int64_t j = 0; j < nt; j++) row[j] = 0.0f;
        for (int64_t co = 0; co < g->Cog; co++) {
          float wv = wt[co * g->Kdim + kk];
          const float *d = dy + co * DIRECT_NT;
          for (int64_t j = 0; j < nt; j++) row[j] += wv * d[j];
        }
        tap t;
        tap_init(g, kk, &t);
        col2im_img(g, &t, ac + t.ci * as[0], as + 1, p0, nt, row);
      }
    }
    if (gx->dtype != NRT_FLOAT32) acc_store(g, gx, n, grp * g->Cig, g->Cig, ac);
  }
out:
  free(wt);
  free(row);
  free(dy);
  free(scratch);
}

/* Weight gradient: per group, dot products of dy rows with im2col rows. */
static void direct_bwdw(void *ctx, int64_t begin, int64_t end) {
  conv_plan *p = ctx;
  const conv_geom *g = p->g;
  const nrt_launch *l = p->l;
  const nrt_operand *gw = &l->operands[0], *gy = &l->operands[1], *x = &l->operands[2];
  float *row = malloc(sizeof(float) * DIRECT_NT), *dy = malloc(sizeof(float) * (size_t)(g->Cog * DIRECT_NT));
  double *acc = malloc(sizeof(double) * (size_t)(g->Cog * g->Kdim));
  float *out = malloc(sizeof(float) * (size_t)g->Kdim);
  if (!row || !dy || !acc || !out) {
    p->failed = 1;
    goto out;
  }
  for (int64_t grp = begin; grp < end; grp++) {
    for (int64_t i = 0; i < g->Cog * g->Kdim; i++) acc[i] = 0.0;
    for (int64_t n = 0; n < g->N; n++)
      for (int64_t p0 = 0; p0 < g->L; p0 += DIRECT_NT) {
        int64_t nt = min64(DIRECT_NT, g->L - p0);
        for (int64_t co = 0; co < g->Cog; co++)
          act_cols(gy, g->O, grp * g->Cog + co, n * g->L + p0, nt, dy + co * DIRECT_NT, false);
        for (int64_t kk = 0; kk < g->Kdim; kk++) {
          tap t;
          tap_init(g, kk, &t);
          im2col_img(g, &t, ACT(x, n, grp * g->Cig + t.ci), x->strides, x->dtype, p0, nt, row);
          for (int64_t co = 0; co < g->Cog; co++) {
            const float *d = dy + co * DIRECT_NT;
            float s[8] = {0};
            int64_t j = 0;
            for (; j + 8 <= nt; j += 8)
              for (int v = 0; v < 8; v++) s[v] += d[j + v] * row[j + v];
            for (; j < nt; j++) s[0] += d[j] * row[j];
            acc[co * g->Kdim + kk] += (double)(((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])));
          }
        }
      }
    for (int64_t co = 0; co < g->Cog; co++) {
      for (int64_t kk = 0; kk < g->Kdim; kk++) out[kk] = (float)acc[co * g->Kdim + kk];
      w_row(g, gw, grp * g->Cog + co, 0, g->Kdim, out, true);
    }
  }
out:
  free(row);
  free(dy);
  free(acc);
  free(out);
}

static nrt_status run_direct(const conv_geom *g, const nrt_launch *l) {
  conv_plan p;
  memset(&p, 0, sizeof p);
  p.g = g;
  p.l = l;
  switch (l->op) {
  case NRT_OP_CONV: nrt_parallel_for(g->N * g->G * cdiv(g->L, DIRECT_NT), 1, direct_fwd, &p); break;
  case NRT_OP_CONV_BACKWARD_INPUT: nrt_parallel_for(g->N * g->G, 1, direct_bwdi, &p); break;
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
  bool empty_out = l->op == NRT_OP_CONV ? g.N * g.G * g.Cog * g.L == 0
                   : l->op == NRT_OP_CONV_BACKWARD_INPUT ? g.N * g.G * g.Cig * g.LI == 0
                                                         : g.G * g.Cog * g.Kdim == 0;
  if (empty_out) return NRT_SUCCESS;
  /* An empty reduction (no input channels, no output pixels, no images)
   * and the reference mode take the loop nest. */
  bool degenerate = g.Kdim == 0 || g.L == 0 || g.N == 0 || g.Cog == 0;
  if (degenerate || nrt_kernels_reference()) {
    switch (l->op) {
    case NRT_OP_CONV: ref_forward(&g, l); return NRT_SUCCESS;
    case NRT_OP_CONV_BACKWARD_INPUT: return ref_backward_input(&g, l);
    default: ref_backward_weight(&g, l); return NRT_SUCCESS;
    }
  }
  if (g.Cog <= DIRECT_MAX_COG) return run_direct(&g, l);
  switch (l->op) {
  case NRT_OP_CONV: return fwd_gemm(&g, l);
  case NRT_OP_CONV_BACKWARD_INPUT: return bwdi_gemm(&g, l);
  default: return bwdw_gemm(&g, l);
  }
}
