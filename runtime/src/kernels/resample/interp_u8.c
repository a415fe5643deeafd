/* uint8 bilinear / bicubic interpolation, plain and antialiased (INTERP on
 * uint8, nrt/ops/resample.h), bit-equal to the CPU's uint8 kernels.
 *
 * The CPU does not compute uint8 images in float: it resamples one dim at
 * a time (w first, then h, each pass skipped when that size is unchanged),
 * rounding every pass to uint8, with fixed-point weights. Per dim, the
 * weights are computed in double (PIL's normalised filters when
 * antialiased; linear or a = -0.75 cubic taps, the out-of-range ones
 * folded onto the edge, otherwise), then scaled by 2^prec with the largest
 * prec whose largest weight, times two, still fits int16, and rounded half
 * away from zero to int16. An output element is
 *   clamp((2^(prec-1) + sum_k x[lo + k] * w[k]) >> prec, 0, 255)
 * in int32. Any float shortcut (one 2-d weighted sum, float weights,
 * rounding only at the end) differs from that by one in many elements, so
 * every rule below is the CPU's, down to floorf on a double source index.
 *
 * The depth dim must keep its size (the CPU has uint8 kernels for 2-d
 * ops only); it is iterated like the batch.
 *
 * Fast path: per (n, c, d) plane, the w pass into a uint8 buffer of
 * IH x OW, then the h pass into the output. Reference path: each output
 * element on its own, recomputing the w-pass values its h taps read. Both
 * are integer-exact, so they agree bit for bit. */
#include <stdatomic.h>
#include <stdlib.h>
#include "kernels/resample/resample.h"

/* The fixed-point taps of one dim: output o reads n[o] inputs from lo[o]. */
typedef struct u8_taps {
  int64_t K;       /* weights stored per output index */
  int64_t *lo, *n; /* [out] */
  int16_t *w;      /* [out * K] */
  int prec;        /* fraction bits of w */
} u8_taps;

static void u8_taps_free(u8_taps *t) {
  free(t->lo);
  free(t->n);
  free(t->w);
  t->lo = t->n = NULL;
  t->w = NULL;
}

/* area_pixel_compute_scale<double>: the uint8 weights use double scales
 * where the float kernels round them to float. */
static double u8_scale(int64_t in, int64_t out, bool align, double scale) {
  if (align) return out > 1 ? (double)(in - 1) / (double)(out - 1) : 0.0;
  return scale > 0 ? 1.0 / scale : (double)in / (double)out;
}

static double u8_filter(bool cubic, double a, double x) {
  if (x < 0) x = -x;
  if (!cubic) return x < 1.0 ? 1.0 - x : 0.0;
  if (x < 1.0) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2.0) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0.0;
}

/* Double weights of output o, written to w[0, K) (zeroed by the caller);
 * returns the window and raises *wmax to the largest weight seen. */
static void u8_window(int mode, bool align, double scale, int64_t in, int64_t K, double support, int64_t o,
                      double *w, int64_t *lo_out, int64_t *n_out, double *wmax) {
  bool cubic = mode == NRT_INTERP_CUBIC || mode == NRT_INTERP_AA_CUBIC;
  int64_t lo, n;
  if (mode == NRT_INTERP_AA_LINEAR || mode == NRT_INTERP_AA_CUBIC) {
    /* PIL's window around the output's centre; the cubic is Keys' a = -0.5 */
    double center = scale * ((double)o + 0.5);
    double invscale = scale >= 1.0 ? 1.0 / scale : 1.0;
    lo = nrt_max_i64((int64_t)(center - support + 0.5), 0);
    n = nrt_min_i64((int64_t)(center + support + 0.5), in) - lo;
    n = nrt_min_i64(nrt_max_i64(n, 0), K);
    double total = 0.0;
    for (int64_t j = 0; j < n; j++) {
      w[j] = u8_filter(cubic, -0.5, ((double)(j + lo) - center + 0.5) * invscale);
      total += w[j];
    }
    if (total != 0.0)
      for (int64_t j = 0; j < n; j++) {
        w[j] /= total;
        if (w[j] > *wmax) *wmax = w[j];
      }
  } else {
    /* The float kernels' taps (source index, then floor and lambda), with
     * taps left of 0 or right of in - 1 added onto the edge weight
     * instead of re-reading the edge element; the maximum is taken over
     * the running sums, as the CPU does. The floor is floorf of the
     * double index: ATen calls floorf there. */
    double real = align ? scale * (double)o : scale * ((double)o + 0.5) - 0.5;
    if (!align && !cubic && real < 0) real = 0;
    int64_t idx = nrt_min_i64((int64_t)floorf((float)real), in - 1);
    double lambda = real - (double)idx;
    lambda = lambda < 0 ? 0 : lambda > 1 ? 1 : lambda;
    int64_t half = K / 2, umin = idx - half + 1;
    lo = nrt_max_i64(umin, 0);
    n = nrt_min_i64(idx + half + 1, in) - lo;
    n = nrt_min_i64(nrt_max_i64(n, 0), K);
    int64_t at = 0;
    for (int64_t j = 0; j < K; j++) {
      double v = u8_filter(cubic, -0.75, (double)(j + 1 - half) - lambda);
      if (umin + j <= 0) at = 0;
      else if (umin + j >= in - 1) at = n - 1;
      if (at < 0) break; /* no window (cannot happen for in >= 1) */
      w[at] += v;
      if (w[at] > *wmax) *wmax = w[at];
      at++;
    }
  }
  *lo_out = lo;
  *n_out = n;
}

static nrt_status u8_taps_build(int mode, bool align, double scale_arg, int64_t in, int64_t out, u8_taps *t) {
  bool aa = mode == NRT_INTERP_AA_LINEAR || mode == NRT_INTERP_AA_CUBIC;
  int64_t interp = mode == NRT_INTERP_CUBIC || mode == NRT_INTERP_AA_CUBIC ? 4 : 2;
  double scale = u8_scale(in, out, align, scale_arg);
  double support = interp * 0.5;
  t->K = interp;
  if (aa) {
    if (scale >= 1.0) support *= scale;
    double c = ceil(support);
    if (!(c < 1e9))
      return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "INTERP: antialias support %g is too large", support);
    t->K = (int64_t)c * 2 + 1;
  }
  size_t nw = (size_t)(out * t->K + 1);
  double *wd = calloc(nw, sizeof(double));
  t->lo = malloc((size_t)(out + 1) * sizeof(int64_t));
  t->n = malloc((size_t)(out + 1) * sizeof(int64_t));
  t->w = calloc(nw, sizeof(int16_t));
  if (!wd || !t->lo || !t->n || !t->w) {
    free(wd);
    u8_taps_free(t);
    return nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY, "INTERP: out of memory for %lld uint8 taps", (long long)nw);
  }
  double wmax = 0.0;
  for (int64_t o = 0; o < out; o++)
    u8_window(mode, align, scale, in, t->K, support, o, wd + o * t->K, &t->lo[o], &t->n[o], &wmax);
  /* the most fraction bits that keep 2 * wmax below 2^15 */
  int prec = 0;
  for (; prec < 22; prec++)
    if ((int)(0.5 + wmax * (double)(1 << (prec + 1))) >= (1 << 15)) break;
  if (prec == 0) {
    free(wd);
    u8_taps_free(t);
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "INTERP: uint8 weight %g does not fit int16", wmax);
  }
  t->prec = prec;
  for (size_t i = 0; i < (size_t)(out * t->K); i++) {
    double v = wd[i] * (double)(1 << prec);
    t->w[i] = (int16_t)(v < 0 ? (int)(-0.5 + v) : (int)(0.5 + v));
  }
  free(wd);
  return NRT_SUCCESS;
}

/* One output element: src[k * step] for the k-th tap. */
static inline uint8_t u8_dot(const uint8_t *src, int64_t step, const int16_t *w, int64_t n, int prec) {
  int32_t acc = (int32_t)1 << (prec - 1); /* rounds the shift to nearest */
  for (int64_t k = 0; k < n; k++) acc += (int32_t)src[k * step] * w[k];
  if (acc < 0) return 0;
  acc >>= prec;
  return acc > 255 ? 255 : (uint8_t)acc;
}

typedef struct u8_job {
  const nrt_launch *l;
  nrt_resample_geom g;
  u8_taps th, tw;
  bool need_h, need_w, reference;
  _Atomic int failed;
} u8_job;

/* Byte offsets of plane p = (n, c, d) in operand o. */
static const uint8_t *u8_plane(const nrt_operand *o, const nrt_resample_geom *g, int64_t p) {
  int64_t d = p % g->O[0], nc = p / g->O[0];
  return (const uint8_t *)o->data + (nc / g->C) * o->strides[0] + (nc % g->C) * o->strides[1] + d * o->strides[2];
}

/* A strided 2-d uint8 view: element (r, c) at base[r * rs + c * cs]. */
typedef struct u8_view {
  const uint8_t *base;
  int64_t rs, cs;
} u8_view;

/* One dim's pass over `rows` lines: along columns (t = w taps) or rows. */
static void u8_pass_w(u8_view src, uint8_t *dst, int64_t drs, int64_t dcs, int64_t rows, int64_t cols,
                      const u8_taps *t) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++)
      dst[r * drs + c * dcs] =
          u8_dot(src.base + r * src.rs + t->lo[c] * src.cs, src.cs, t->w + c * t->K, t->n[c], t->prec);
}

static void u8_pass_h(u8_view src, uint8_t *dst, int64_t drs, int64_t dcs, int64_t rows, int64_t cols,
                      const u8_taps *t) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++)
      dst[r * drs + c * dcs] =
          u8_dot(src.base + t->lo[r] * src.rs + c * src.cs, src.rs, t->w + r * t->K, t->n[r], t->prec);
}

static void u8_planes(void *ctx, int64_t begin, int64_t end) {
  u8_job *j = ctx;
  const nrt_resample_geom *g = &j->g;
  const nrt_operand *y = &j->l->operands[0], *x = &j->l->operands[1];
  const int64_t IH = g->I[1], OH = g->O[1], OW = g->O[2];
  uint8_t *buf = NULL;
  if (j->need_h && j->need_w && !(buf = malloc((size_t)(IH * OW)))) {
    j->failed = 1;
    return;
  }
  for (int64_t p = begin; p < end; p++) {
    u8_view xs = {u8_plane(x, g, p), x->strides[3], x->strides[4]};
    uint8_t *yp = (uint8_t *)u8_plane(y, g, p);
    if (j->need_w && j->need_h) {
      u8_pass_w(xs, buf, OW, 1, IH, OW, &j->tw);
      u8_pass_h((u8_view){buf, OW, 1}, yp, y->strides[3], y->strides[4], OH, OW, &j->th);
    } else if (j->need_w) {
      u8_pass_w(xs, yp, y->strides[3], y->strides[4], OH, OW, &j->tw);
    } else if (j->need_h) {
      u8_pass_h(xs, yp, y->strides[3], y->strides[4], OH, OW, &j->th);
    } else {
      for (int64_t r = 0; r < OH; r++)
        for (int64_t c = 0; c < OW; c++) yp[r * y->strides[3] + c * y->strides[4]] = xs.base[r * xs.rs + c * xs.cs];
    }
  }
  free(buf);
}

/* Reference: every output element from the input directly. */
static uint8_t u8_wpass_at(const u8_job *j, u8_view xs, int64_t r, int64_t c) {
  if (!j->need_w) return xs.base[r * xs.rs + c * xs.cs];
  const u8_taps *t = &j->tw;
  return u8_dot(xs.base + r * xs.rs + t->lo[c] * xs.cs, xs.cs, t->w + c * t->K, t->n[c], t->prec);
}

static void u8_planes_ref(void *ctx, int64_t begin, int64_t end) {
  u8_job *j = ctx;
  const nrt_resample_geom *g = &j->g;
  const nrt_operand *y = &j->l->operands[0], *x = &j->l->operands[1];
  const u8_taps *t = &j->th;
  for (int64_t p = begin; p < end; p++) {
    u8_view xs = {u8_plane(x, g, p), x->strides[3], x->strides[4]};
    uint8_t *yp = (uint8_t *)u8_plane(y, g, p);
    for (int64_t oh = 0; oh < g->O[1]; oh++)
      for (int64_t ow = 0; ow < g->O[2]; ow++) {
        uint8_t v;
        if (!j->need_h) {
          v = u8_wpass_at(j, xs, oh, ow);
        } else {
          int32_t acc = (int32_t)1 << (t->prec - 1);
          for (int64_t k = 0; k < t->n[oh]; k++)
            acc += (int32_t)u8_wpass_at(j, xs, t->lo[oh] + k, ow) * t->w[oh * t->K + k];
          v = acc < 0 ? 0 : (acc >> t->prec) > 255 ? 255 : (uint8_t)(acc >> t->prec);
        }
        yp[oh * y->strides[3] + ow * y->strides[4]] = v;
      }
  }
}

nrt_status nrt_resample_interp_u8(const nrt_launch *l, const nrt_resample_geom *g) {
  const char *op = nrt_op_name(l->op);
  int mode = (int)l->params[0];
  if (mode != NRT_INTERP_LINEAR && mode != NRT_INTERP_CUBIC && mode != NRT_INTERP_AA_LINEAR &&
      mode != NRT_INTERP_AA_CUBIC)
    return nrt_kernel_fail(NRT_ERROR_UNSUPPORTED, "%s: uint8 mode %d has no fixed-point kernel", op, mode);
  if (g->I[0] != g->O[0])
    return nrt_kernel_fail(NRT_ERROR_UNSUPPORTED, "%s: uint8 interpolation resamples h and w only (depth %lld -> %lld)",
                           op, (long long)g->I[0], (long long)g->O[0]);
  int64_t planes = g->N * g->C * g->O[0];
  if (planes * g->O[1] * g->O[2] == 0) return NRT_SUCCESS;
  if (g->I[1] * g->I[2] == 0)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: empty input plane for a non-empty output", op);
  u8_job j = {.l = l, .g = *g};
  j.need_h = g->I[1] != g->O[1];
  j.need_w = g->I[2] != g->O[2];
  j.reference = nrt_kernels_reference();
  bool align = l->params[1] != 0;
  nrt_status st = NRT_SUCCESS;
  if (j.need_w) st = u8_taps_build(mode, align, l->scalars[2].f, g->I[2], g->O[2], &j.tw);
  if (st == NRT_SUCCESS && j.need_h) st = u8_taps_build(mode, align, l->scalars[1].f, g->I[1], g->O[1], &j.th);
  if (st == NRT_SUCCESS) {
    int64_t per_plane = g->I[1] * g->O[2] * j.tw.K + g->O[1] * g->O[2] * j.th.K + 1;
    nrt_parallel_for(planes, 1 + 65536 / per_plane, j.reference ? u8_planes_ref : u8_planes, &j);
    if (j.failed) st = nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of memory for a uint8 plane buffer", op);
  }
  u8_taps_free(&j.tw);
  u8_taps_free(&j.th);
  return st;
}
