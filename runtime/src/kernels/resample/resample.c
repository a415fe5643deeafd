/* Family RESAMPLE (nrt/ops/resample.h): dispatch, and separable
 * interpolation (INTERP, INTERP_BACKWARD).
 *
 * Every interpolation mode is the same computation: along each spatial dim
 * an output index o reads T input taps idx[o][t] with weights w[o][t], and
 * an output point is the product-weighted sum over the taps of all three
 * dims. Only the tap tables differ between nearest, linear, cubic and the
 * antialiased modes, and they depend on sizes and scales alone, so they are
 * built once per launch. The table rules reproduce ATen's arithmetic
 * (float32 scales and source coordinates, the same casts and clamps), since
 * a nearest index or a floor that flips by one changes the answer by far
 * more than rounding does.
 *
 * Forward: 2-d bicubic and antialiased modes, and float32 1-d linear
 * (ATen's two-tap Interpolate compiles to fma(t0, w0, t1 * w1), probed:
 * 300 of 300 rows) follow the CPU's order
 * (fwd_sep2d_rows: width sums per input row, then the height sum, each a
 * chain of fused multiply-adds), so inf/NaN/overflow land where the CPU's
 * do; the other modes' fast path reduces the d and h taps of an output row
 * into one float32 input-width row (whole-row axpys that vectorise), then
 * applies the w taps; the reference path sums each output point in double from
 * per-element loads. Nearest modes copy elements' bytes (exact in every
 * dtype, as the CPU's copies are).
 * Backward: the CPU's scatter order (bwd_plane_ref), 8 planes per task in
 * vector lanes, each accumulated in a float32 plane buffer and stored once,
 * so results are deterministic and do not depend on the thread count.
 * float64 computes in float32 (the documented precision) from tables
 * built in double, as the CPU's (taps_build). */
#pragma GCC optimize("O3,no-math-errno")
#include <stdlib.h>
#include "kernels/resample/resample.h"

/* ---- dispatch ------------------------------------------------------------- */

nrt_status nrt_resample_execute(const nrt_launch *l) {
  /* Switch on (int)l->op: family ids are not enumerators of nrt_op. */
  switch ((int)l->op) {
  case NRT_OP(INTERP):
  case NRT_OP(INTERP_BACKWARD): return nrt_resample_interp(l);
  case NRT_OP(MAX_UNPOOL): return nrt_resample_unpool(l);
  case NRT_OP(IM2COL):
  case NRT_OP(COL2IM): return nrt_resample_fold(l);
  case NRT_OP(GRID_SAMPLE):
  case NRT_OP(GRID_SAMPLE_BACKWARD): return nrt_resample_grid(l);
  case NRT_OP(FRACTIONAL_MAX_POOL): return nrt_resample_fracpool(l);
  default: break;
  }
  return nrt_kernel_fail(NRT_ERROR_UNSUPPORTED, "resample: op %s has no kernel", nrt_op_name(l->op));
}

nrt_status nrt_resample_geom_init(const nrt_launch *l, nrt_resample_geom *g) {
  if (l->ndim != 8)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: sizes are {N, C, O[3], I[3]}, got ndim %d",
                           nrt_op_name(l->op), l->ndim);
  for (int i = 0; i < 8; i++)
    if (l->sizes[i] < 0)
      return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: negative extent %lld", nrt_op_name(l->op),
                             (long long)l->sizes[i]);
  g->N = l->sizes[0];
  g->C = l->sizes[1];
  for (int i = 0; i < 3; i++) {
    g->O[i] = l->sizes[2 + i];
    g->I[i] = l->sizes[5 + i];
  }
  g->OL = g->O[0] * g->O[1] * g->O[2];
  g->IL = g->I[0] * g->I[1] * g->I[2];
  return NRT_SUCCESS;
}

/* ---- tap tables ------------------------------------------------------------ */

typedef struct taps {
  int64_t T;    /* taps per output index, at most */
  int64_t *idx; /* [O * T], in [0, in) */
  float *w;     /* [O * T] */
  int64_t *cnt; /* [O]: the taps output o reads (T, or the antialiased window's size) */
} taps;

/* ATen's compute_scales_value<float>: 1/scale when a positive scale was
 * given, else in/out, rounded to float. */
static float scale_value(double scale, int64_t in, int64_t out) {
  return scale > 0 ? (float)(1.0 / scale) : (float)in / (float)out;
}

/* area_pixel_compute_scale<float>. */
static float area_scale(int64_t in, int64_t out, bool align, double scale) {
  if (align) return out > 1 ? (float)(in - 1) / (float)(out - 1) : 0.0f;
  return scale_value(scale, in, out);
}

/* area_pixel_compute_source_index<float>: clamped at 0 unless cubic. */
static float source_index(float scale, int64_t o, bool align, bool cubic) {
  if (align) return scale * (float)o;
  float s = scale * ((float)o + 0.5f) - 0.5f;
  return (!cubic && s < 0.0f) ? 0.0f : s;
}

static float cubic_near(float x, float a) { return ((a + 2) * x - (a + 3)) * x * x + 1; } /* |x| <= 1 */
static float cubic_far(float x, float a) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; } /* 1..2 */

/* PIL's filters (the cubic is Keys' a = -0.5), with the CPU's multiply-adds
 * fused as its compiled polynomials are: one-hot probes, 652 of 652 size
 * pairs give the CPU's float32 weights (unfused: 523 differ in the last
 * bit). */
static float aa_filter(int mode, float x) {
  if (x < 0) x = -x;
  if (mode == NRT_INTERP_AA_LINEAR) return x < 1.0f ? (float)(1.0 - x) : 0.0f;
  const float a = -0.5f;
  if (x < 1.0f) return fmaf(fmaf(a + 2, x, -(a + 3)) * x, x, 1.0f);
  if (x < 2.0f) return fmaf(fmaf(fmaf(a, x, -5 * a), x, 8 * a), x, -4 * a);
  return 0.0f;
}

/* The same rules in double: ATen computes a float64 input's tables in its
 * opmath type, double (scales, source indices, lambdas, the antialiased
 * filter and its normalisation), then floors with floorf as for float.
 * The weights are rounded to float afterwards for the float32 sums
 * (float64's documented precision), but from the double values: an
 * antialiased tap that double puts at 1e-17 and float at exactly 0 (the
 * filter's edge) keeps an inf input inf there, as on the CPU, instead of
 * 0 * inf = NaN. */
static double area_scale_f64(int64_t in, int64_t out, bool align, double scale) {
  if (align) return out > 1 ? (double)(in - 1) / (double)(out - 1) : 0.0;
  return scale > 0 ? 1.0 / scale : (double)in / (double)out;
}

static double cubic_near_f64(double x, double a) { return ((a + 2) * x - (a + 3)) * x * x + 1; }
static double cubic_far_f64(double x, double a) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; }

static double aa_filter_f64(int mode, double x) {
  if (x < 0) x = -x;
  if (mode == NRT_INTERP_AA_LINEAR) return x < 1.0 ? 1.0 - x : 0.0;
  const double a = -0.5;
  if (x < 1.0) return fma(fma(a + 2, x, -(a + 3)) * x, x, 1.0);
  if (x < 2.0) return fma(fma(fma(a, x, -5 * a), x, 8 * a), x, -4 * a);
  return 0.0;
}

static void taps_free(taps *t) {
  free(t->idx);
  free(t->w);
  free(t->cnt);
  t->idx = NULL;
  t->w = NULL;
  t->cnt = NULL;
}

/* The taps of one dim. A dim the op does not interpolate (the leading
 * extents of size 1 that make a 1-d or 2-d op 3-d) reads its one element
 * with weight 1 and nothing else: the CPU has no taps there, and a second
 * tap of weight 0 would turn an inf into NaN (inf * 0). An interpolated
 * dim keeps every tap ATen computes, zero weights included (ATen
 * multiplies them: bilinear at a corner with align_corners gives NaN next
 * to an inf), except past an antialiased window's size, which ATen never
 * reads, and along a dim whose size it keeps, which ATen's separable
 * antialiased kernel skips. */
static nrt_status taps_build(int mode, bool align, double scale, int64_t in, int64_t out, bool interpolated,
                             bool fused_index, bool f64, bool generic_nearest, taps *t) {
  float sc = 0.0f, support = 0.0f;
  double sc64 = 0.0, support64 = 0.0;
  bool aa = mode == NRT_INTERP_AA_LINEAR || mode == NRT_INTERP_AA_CUBIC;
  if (!interpolated || (aa && in == out)) mode = NRT_INTERP_NEAREST; /* in == out: the identity tap */
  switch (mode) {
  case NRT_INTERP_NEAREST:
  case NRT_INTERP_NEAREST_EXACT: t->T = 1; break;
  case NRT_INTERP_LINEAR: t->T = 2; break;
  case NRT_INTERP_CUBIC: t->T = 4; break;
  case NRT_INTERP_AA_LINEAR:
  case NRT_INTERP_AA_CUBIC: {
    sc = area_scale(in, out, align, scale);
    float half = mode == NRT_INTERP_AA_LINEAR ? 1.0f : 2.0f; /* filter support at scale 1 */
    support = sc >= 1.0f ? half * sc : half;
    float c = ceilf(support);
    if (f64) {
      sc64 = area_scale_f64(in, out, align, scale);
      support64 = sc64 >= 1.0 ? (double)half * sc64 : (double)half;
      c = (float)ceil(support64);
    }
    if (!(c < 1e9f))
      return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "INTERP: antialias support %g is too large", (double)support);
    t->T = (int64_t)c * 2 + 1;
    break;
  }
  default:
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "INTERP: unknown mode %d", mode);
  }
  size_t n = (size_t)(out * t->T + 1);
  t->idx = malloc(n * sizeof(int64_t));
  t->w = malloc(n * sizeof(float));
  t->cnt = malloc((size_t)(out + 1) * sizeof(int64_t));
  if (!t->idx || !t->w || !t->cnt) {
    taps_free(t);
    return nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY, "INTERP: out of memory for %lld taps", (long long)n);
  }
  int64_t T = t->T;
  double *wd = NULL; /* an antialiased float64 window's double weights */
  if (f64 && (mode == NRT_INTERP_AA_LINEAR || mode == NRT_INTERP_AA_CUBIC) &&
      !(wd = malloc((size_t)T * sizeof(double)))) {
    taps_free(t);
    return nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY, "INTERP: out of memory for %lld taps", (long long)T);
  }
  for (int64_t o = 0; o < out; o++) {
    int64_t *ix = t->idx + o * T;
    float *w = t->w + o * T;
    t->cnt[o] = T;
    switch (mode) {
    case NRT_INTERP_NEAREST: {
      /* nearest_idx (the CPU's backward and channels-last forward kernels)
       * special-cases the equal and doubled sizes; its generic forward
       * kernel (generic_nearest) does not, and computes a float64 index in
       * double: with scale_factor=1.1, 2 -> 2 reads element 0 twice there */
      if (!generic_nearest && out == in) ix[0] = o;
      else if (!generic_nearest && out == 2 * in) ix[0] = o >> 1;
      else if (generic_nearest && f64)
        ix[0] = nrt_min_i64((int64_t)floorf((float)(area_scale_f64(in, out, false, scale) * (double)o)), in - 1);
      else ix[0] = nrt_min_i64((int64_t)floorf((float)o * scale_value(scale, in, out)), in - 1);
      w[0] = 1.0f;
      break;
    }
    case NRT_INTERP_NEAREST_EXACT: {
      /* (o + 0.5) * scale is a double product, floored as a float */
      float s = scale_value(scale, in, out);
      ix[0] = nrt_min_i64((int64_t)floorf((float)(((double)o + 0.5) * (double)s)), in - 1);
      w[0] = 1.0f;
      break;
    }
    case NRT_INTERP_LINEAR: {
      if (out == in) {
        ix[0] = ix[1] = o;
        w[0] = 1.0f;
        w[1] = 0.0f;
        break;
      }
      if (f64) {
        double s = area_scale_f64(in, out, align, scale);
        double real = align ? s * (double)o : fma(s, (double)o + 0.5, -0.5); /* fused as float32's (probed) */
        real = real < 0.0 ? 0.0 : real;
        int64_t i0 = nrt_min_i64((int64_t)floorf((float)real), in - 1);
        double l1 = fmin(fmax(real - (double)i0, 0.0), 1.0);
        ix[0] = i0;
        ix[1] = i0 + (i0 < in - 1 ? 1 : 0);
        w[0] = (float)(1.0 - l1);
        w[1] = (float)l1;
        break;
      }
      float real = source_index(area_scale(in, out, align, scale), o, align, false);
      if (!align && fused_index) { /* ATen's float32 linear tables get scale * (o + 0.5) - 0.5 fused (probed;
                                      * its float16 ones are not: a fuzz of seed 31337 went 0 -> 25 float16 cases) */
        real = fmaf(area_scale(in, out, align, scale), (float)o + 0.5f, -0.5f);
        real = real < 0.0f ? 0.0f : real;
      }
      int64_t i0 = nrt_min_i64((int64_t)floorf(real), in - 1);
      float l1 = fminf(fmaxf(real - (float)i0, 0.0f), 1.0f);
      ix[0] = i0;
      ix[1] = i0 + (i0 < in - 1 ? 1 : 0);
      w[0] = 1.0f - l1;
      w[1] = l1;
      break;
    }
    case NRT_INTERP_CUBIC: {
      if (f64) {
        double s = area_scale_f64(in, out, align, scale);
        double real = align ? s * (double)o : s * ((double)o + 0.5) - 0.5;
        int64_t i0 = nrt_min_i64((int64_t)floorf((float)real), in - 1);
        double tt = fmin(fmax(real - (double)i0, 0.0), 1.0);
        const double a = -0.75;
        w[0] = (float)cubic_far_f64(tt + 1.0, a);
        w[1] = (float)cubic_near_f64(tt, a);
        w[2] = (float)cubic_near_f64(1.0 - tt, a);
        w[3] = (float)cubic_far_f64((1.0 - tt) + 1.0, a);
        for (int j = 0; j < 4; j++) ix[j] = nrt_min_i64(nrt_max_i64(i0 - 1 + j, 0), in - 1);
        break;
      }
      float real = source_index(area_scale(in, out, align, scale), o, align, true);
      int64_t i0 = nrt_min_i64((int64_t)floorf(real), in - 1);
      float tt = fminf(fmaxf(real - (float)i0, 0.0f), 1.0f);
      const float a = -0.75f;
      w[0] = cubic_far(tt + 1.0f, a);
      w[1] = cubic_near(tt, a);
      w[2] = cubic_near(1.0f - tt, a);
      w[3] = cubic_far((1.0f - tt) + 1.0f, a); /* ATen's x2 + 1 with x2 = 1 - t, not 2 - t */
      for (int j = 0; j < 4; j++) ix[j] = nrt_min_i64(nrt_max_i64(i0 - 1 + j, 0), in - 1);
      break;
    }
    default: { /* antialiased: PIL's normalised filter over [xmin, xmin + xsize) */
      if (f64) {
        double center = sc64 * ((double)o + 0.5), invscale = sc64 >= 1.0 ? 1.0 / sc64 : 1.0;
        int64_t xmin = nrt_max_i64((int64_t)(center - support64 + 0.5), 0);
        int64_t xsize = nrt_min_i64((int64_t)(center + support64 + 0.5), in) - xmin;
        xsize = xsize < 0 ? 0 : xsize > T ? T : xsize;
        double total = 0.0;
        for (int64_t k = 0; k < xsize; k++) {
          wd[k] = aa_filter_f64(mode, ((double)(k + xmin) - center + 0.5) * invscale);
          total += wd[k];
        }
        for (int64_t k = 0; k < T; k++) {
          w[k] = k < xsize ? (float)(total != 0.0 ? wd[k] / total : wd[k]) : 0.0f;
          ix[k] = nrt_min_i64(xmin + k, in - 1);
        }
        t->cnt[o] = xsize;
        break;
      }
      float center = (float)((double)sc * ((double)o + 0.5));
      float invscale = sc >= 1.0f ? (float)(1.0 / (double)sc) : 1.0f;
      int64_t xmin = nrt_max_i64((int64_t)((double)(center - support) + 0.5), 0);
      int64_t xsize = nrt_min_i64((int64_t)((double)(center + support) + 0.5), in) - xmin;
      if (xsize > T) xsize = T;
      float total = 0.0f;
      for (int64_t j = 0; j < T; j++) {
        float v = 0.0f;
        if (j < xsize) v = aa_filter(mode, (float)(((double)((float)(j + xmin) - center) + 0.5) * (double)invscale));
        w[j] = v;
        total += v;
        ix[j] = nrt_min_i64(xmin + j, in - 1);
      }
      if (total != 0.0f)
        for (int64_t j = 0; j < xsize; j++) w[j] /= total;
      t->cnt[o] = xsize > 0 ? xsize : 0;
      break;
    }
    }
  }
  free(wd);
  return NRT_SUCCESS;
}

/* ---- execution ------------------------------------------------------------- */

typedef struct interp_job {
  const nrt_launch *l;
  nrt_resample_geom g;
  taps t[3];
  bool nearest, reference, sep2d; /* sep2d: fwd_sep2d_rows */
  bool two_tap; /* sep2d of a linear mode: ATen's two-tap width sum (fwd_sep2d_body) */
  bool cpu_linear; /* float32 2-d/3-d linear in the order of the CPU kernel p3 names (fwd_linear_rows) */
  int64_t lanes;   /* p3: 0 = ATen's nested Interpolate; 8/16 = its channels-last kernel's vector width */
  bool bwd_cubic;  /* backward: UpSampleBicubic2d.cpp's tap order and product */
  bool bwd_fused;  /* backward: the CPU's loop fuses its multiply-add */
  bool bwd_copy;   /* backward: grad_output is grad_input (bicubic of the same size) */
  size_t esize; /* element bytes (nearest copies) */
  _Atomic int failed;
} interp_job;

#define PLANE(o, n, c) ((char *)(o)->data + (n) * (o)->strides[0] + (c) * (o)->strides[1])

/* Forward, nearest: element copies (one tap per dim, weight 1). */
static void fwd_nearest_rows(interp_job *j, int64_t begin, int64_t end) {
  const nrt_resample_geom *g = &j->g;
  const nrt_operand *y = &j->l->operands[0], *x = &j->l->operands[1];
  for (int64_t r = begin; r < end; r++) {
    int64_t oh = r % g->O[1], od = (r / g->O[1]) % g->O[0], p = r / (g->O[1] * g->O[0]);
    int64_t n = p / g->C, c = p % g->C;
    const char *xr = PLANE(x, n, c) + j->t[0].idx[od] * x->strides[2] + j->t[1].idx[oh] * x->strides[3];
    char *yr = PLANE(y, n, c) + od * y->strides[2] + oh * y->strides[3];
    for (int64_t ow = 0; ow < g->O[2]; ow++)
      memcpy(yr + ow * y->strides[4], xr + j->t[2].idx[ow] * x->strides[4], j->esize);
  }
}

/* Forward, fast: reduce the d/h taps into a float row, then the w taps. */
static void fwd_rows(interp_job *j, int64_t begin, int64_t end) {
  const nrt_resample_geom *g = &j->g;
  const nrt_operand *y = &j->l->operands[0], *x = &j->l->operands[1];
  const int64_t IW = g->I[2], OW = g->O[2];
  const taps *td = &j->t[0], *th = &j->t[1], *tw = &j->t[2];
  float *acc = malloc(sizeof(float) * (size_t)(2 * IW + OW + 1));
  if (!acc) {
    j->failed = 1;
    return;
  }
  float *row = acc + IW, *out = row + IW;
  for (int64_t r = begin; r < end; r++) {
    int64_t oh = r % g->O[1], od = (r / g->O[1]) % g->O[0], p = r / (g->O[1] * g->O[0]);
    int64_t n = p / g->C, c = p % g->C;
    const char *xp = PLANE(x, n, c);
    for (int64_t i = 0; i < IW; i++) acc[i] = 0.0f;
    for (int64_t a = 0; a < td->cnt[od]; a++)
      for (int64_t b = 0; b < th->cnt[oh]; b++) {
        float wt = td->w[od * td->T + a] * th->w[oh * th->T + b];
        const char *src = xp + td->idx[od * td->T + a] * x->strides[2] + th->idx[oh * th->T + b] * x->strides[3];
        nrt_load_f32(row, src, x->strides[4], x->dtype, IW);
        for (int64_t i = 0; i < IW; i++) acc[i] += wt * row[i];
      }
    const int64_t T = tw->T;
    for (int64_t ow = 0; ow < OW; ow++) {
      float s = 0.0f;
      for (int64_t k = 0; k < tw->cnt[ow]; k++) s += tw->w[ow * T + k] * acc[tw->idx[ow * T + k]];
      out[ow] = s;
    }
    nrt_store_f32(PLANE(y, n, c) + od * y->strides[2] + oh * y->strides[3], y->strides[4], y->dtype, out, OW);
  }
  free(acc);
}

/* Forward, reference: each output point summed in double. */
static void fwd_rows_ref(interp_job *j, int64_t begin, int64_t end) {
  const nrt_resample_geom *g = &j->g;
  const nrt_operand *y = &j->l->operands[0], *x = &j->l->operands[1];
  const taps *td = &j->t[0], *th = &j->t[1], *tw = &j->t[2];
  for (int64_t r = begin; r < end; r++) {
    int64_t oh = r % g->O[1], od = (r / g->O[1]) % g->O[0], p = r / (g->O[1] * g->O[0]);
    int64_t n = p / g->C, c = p % g->C;
    for (int64_t ow = 0; ow < g->O[2]; ow++) {
      double s = 0.0;
      for (int64_t a = 0; a < td->cnt[od]; a++)
        for (int64_t b = 0; b < th->cnt[oh]; b++)
          for (int64_t k = 0; k < tw->cnt[ow]; k++) {
            const char *src = PLANE(x, n, c) + td->idx[od * td->T + a] * x->strides[2] +
                              th->idx[oh * th->T + b] * x->strides[3] + tw->idx[ow * tw->T + k] * x->strides[4];
            s += (double)td->w[od * td->T + a] * th->w[oh * th->T + b] * tw->w[ow * tw->T + k] *
                 nrt_ref_load_f64(src, x->dtype);
          }
      nrt_ref_store_f64(PLANE(y, n, c) + od * y->strides[2] + oh * y->strides[3] + ow * y->strides[4], y->dtype, s);
    }
  }
}

/* The CPU's multiply-add in its float interpolation loops (output += t * w). */
#define INTERP_MAC(acc, a, b) CPU_MAC_IMPL(acc, a, b)
#define CPU_MAC_IMPL(acc, a, b) fmaf(a, b, acc)

/* Forward, 2-d bicubic and antialiased modes in the CPU's order, so that
 * overflow, inf - inf and 0 * inf happen where they happen there: each
 * output is sum_b (sum_k x[h_b][w_k] * ww_k) * wh_b, the width sums first
 * (ATen's Interpolate<2> evaluates the inner dim per outer tap; its
 * antialiased kernel resizes the width into a temporary, then the height),
 * each sum starting from its first product and adding the taps in order.
 * Output rows are done in chunks of one plane, whose input rows are
 * width-resized once into a float buffer (the antialiased CPU kernel's
 * temporary; plain bicubic keeps its float opmath the same way). */
static bool sep2d_applies(const interp_job *j, int mode, nrt_dtype dt) {
  /* float32 1-d linear too, and float32 bilinear where the CPU takes its
   * nested kernel (p3 = 0): both dims as fma(t0, w0, t1 * w1). 16-bit
   * linear keeps fwd_rows: the CPU rounds those weights to the dtype, not
   * followed. */
  if (mode == NRT_INTERP_LINEAR)
    return dt == NRT_FLOAT32 && j->t[0].T == 1 && j->t[0].w[0] == 1.0f &&
           ((j->t[1].T == 1 && j->t[1].w[0] == 1.0f) || j->lanes == 0);
  return (mode == NRT_INTERP_CUBIC || mode == NRT_INTERP_AA_LINEAR || mode == NRT_INTERP_AA_CUBIC) &&
         j->t[0].T == 1 && j->t[0].w[0] == 1.0f;
}

static inline float sep_round(float v, nrt_dtype dt) {
  return dt == NRT_BFLOAT16 ? nrt_k_bf16_to_f32(nrt_k_f32_to_bf16(v)) : v;
}

/* ATen's 16-bit linear tables (compute_source_index_and_lambda with
 * scalar_t lambdas): the source index fused as for float32, lambda1
 * stored in the dtype, lambda0 = 1 - lambda1 in the dtype. One-hot
 * probes: 912 of 912 size pairs for bfloat16 and float16 (unfused,
 * bfloat16 misses 14). */
static void half_linear_taps(taps *t, int64_t out, nrt_dtype dt) {
  if (t->T != 2) return;
  for (int64_t o = 0; o < out; o++) {
    float *w = t->w + 2 * o;
    float l1 = dt == NRT_BFLOAT16 ? sep_round(w[1], dt) : nrt_k_f16_to_f32(nrt_k_f32_to_f16(w[1]));
    float l0 = 1.0f - l1;
    w[0] = dt == NRT_BFLOAT16 ? sep_round(l0, dt) : nrt_k_f16_to_f32(nrt_k_f32_to_f16(l0));
    w[1] = l1;
  }
}

/* always_inline: compiled into each ISA's wrapper below, where fmaf is one
 * instruction on AVX2 hosts (on the x86-64-v2 baseline it is libm's
 * software fma, about 3x slower). */
static inline __attribute__((always_inline)) void fwd_sep2d_body(interp_job *j, int64_t begin, int64_t end) {
  const nrt_resample_geom *g = &j->g;
  const nrt_operand *y = &j->l->operands[0], *x = &j->l->operands[1];
  const int64_t IW = g->I[2], OW = g->O[2], OH = g->O[1];
  const taps *th = &j->t[1], *tw = &j->t[2];
  const int64_t TH = th->T, TW = tw->T;
  const int64_t CH = 16; /* output rows per chunk */
  float *row = malloc(sizeof(float) * (size_t)(IW + OW + 1));
  float *tmp = NULL;
  size_t tmp_cap = 0;
  if (!row) {
    j->failed = 1;
    return;
  }
  float *out = row + IW;
  for (int64_t r = begin; r < end;) {
    int64_t oh0 = r % OH, p = r / OH; /* O[0] == 1 here: rows are (plane, oh) */
    int64_t oh1 = nrt_min_i64(nrt_min_i64(oh0 + CH, OH), oh0 + (end - r));
    int64_t n = p / g->C, c = p % g->C;
    int64_t lo = g->I[1], hi = -1; /* input rows the chunk reads */
    for (int64_t oh = oh0; oh < oh1; oh++)
      for (int64_t b = 0; b < (th->cnt[oh] > 0 ? th->cnt[oh] : 1); b++) {
        int64_t h = th->idx[oh * TH + b];
        lo = h < lo ? h : lo;
        hi = h > hi ? h : hi;
      }
    size_t need = (size_t)((hi - lo + 1) * OW);
    if (need > tmp_cap) {
      free(tmp);
      tmp = malloc(sizeof(float) * need);
      tmp_cap = need;
      if (!tmp) {
        j->failed = 1;
        break;
      }
    }
    const char *xp = PLANE(x, n, c);
    for (int64_t h = lo; h <= hi; h++) { /* width pass */
      nrt_load_f32(row, xp + h * x->strides[3], x->strides[4], x->dtype, IW);
      float *t = tmp + (h - lo) * OW;
      for (int64_t ow = 0; ow < OW; ow++) {
        const int64_t *ix = tw->idx + ow * TW;
        const float *w = tw->w + ow * TW;
        float s;
        if (j->two_tap) {
          s = INTERP_MAC(row[ix[1]] * w[1], row[ix[0]], w[0]);
        } else {
          s = row[ix[0]] * w[0];
          for (int64_t k = 1; k < tw->cnt[ow]; k++) s = INTERP_MAC(s, row[ix[k]], w[k]);
        }
        t[ow] = s;
      }
    }
    for (int64_t oh = oh0; oh < oh1; oh++) { /* height pass */
      const int64_t *ix = th->idx + oh * TH;
      const float *w = th->w + oh * TH;
      const float *t0 = tmp + (ix[0] - lo) * OW;
      if (j->two_tap && th->cnt[oh] == 2) { /* bilinear: the height taps as the width's, fma(t0, w0, t1 * w1) */
        const float *t1 = tmp + (ix[1] - lo) * OW;
        for (int64_t ow = 0; ow < OW; ow++) out[ow] = INTERP_MAC(t1[ow] * w[1], t0[ow], w[0]);
        nrt_store_f32(PLANE(y, n, c) + oh * y->strides[3], y->strides[4], y->dtype, out, OW);
        continue;
      }
      for (int64_t ow = 0; ow < OW; ow++) out[ow] = t0[ow] * w[0];
      for (int64_t b = 1; b < th->cnt[oh]; b++) {
        const float *tb = tmp + (ix[b] - lo) * OW;
        for (int64_t ow = 0; ow < OW; ow++) out[ow] = INTERP_MAC(out[ow], tb[ow], w[b]);
      }
      nrt_store_f32(PLANE(y, n, c) + oh * y->strides[3], y->strides[4], y->dtype, out, OW);
    }
    r += oh1 - oh0;
  }
  free(tmp);
  free(row);
}

static void fwd_sep2d_rows(interp_job *j, int64_t begin, int64_t end) { fwd_sep2d_body(j, begin, end); }
static NRT_TARGET_AVX2 void fwd_sep2d_rows_avx2(interp_job *j, int64_t begin, int64_t end) {
  fwd_sep2d_body(j, begin, end);
}

/* Forward, linear in the CPU's order where sep2d does not apply (2-d/3-d,
 * and 16-bit 1-d): through ATen's nested Interpolate (p3 = 0: per dim,
 * outermost d, fma(t0, w0, t1 * w1) of the inner dims' values), or
 * ATen's cpu_upsample_linear_channels_last (p3 = its float vector width),
 * which the CPU takes for channels-last inputs of more than 3 channels and
 * (bilinear) small outputs: corner weights multiplied out (d, then h, then
 * w lambda), the 4 or 8 corner terms (w fastest) summed as its vector
 * lanes compile, fma(T0, W0, fma(T1, W1, ... fma(Tn-1, Wn-1, Tn-2 Wn-2))),
 * for channels below C - C % lanes, and as its scalar tail compiles,
 * fma(Tn-1, Wn-1, ... fma(T2, W2, fma(T0, W0, T1 W1))), for the rest.
 * Probed against the installed CPU build (fmaf in C, crafted values with
 * 2^+-20 spreads and +-3.4e38): 2-d and 3-d, both kernels, every channel
 * bitwise. bfloat16/float16 take the same sums in float from widened
 * inputs, rounded once at the store, with the tables of half_linear_taps
 * in the nested kernel and float lambdas in the channels-last one (exact
 * in probes: 480 shapes, both kernels, 2-d and 3-d). One output point at
 * a time: the plain loop is the reference. */
/* An input element as the CPU's opmath float (16-bit widened exactly). */
static inline __attribute__((always_inline)) float in_f32(const char *p, nrt_dtype dt) {
  if (dt == NRT_FLOAT32) return *(const float *)p;
  return dt == NRT_BFLOAT16 ? nrt_k_bf16_to_f32(*(const uint16_t *)p) : nrt_k_f16_to_f32(*(const uint16_t *)p);
}

/* ATen's two-tap step, t0 w0 + t1 w1 as it compiles: fma(t0, w0, t1 * w1) */
static inline __attribute__((always_inline)) float two_tap(float t0, float t1, const float *w) {
  return INTERP_MAC(t1 * w[1], t0, w[0]);
}

/* The nested value of dims dim..2 at output point o, from xp (the plane
 * advanced along the outer dims). */
static inline __attribute__((always_inline)) float nested_w(const interp_job *j, const char *xp, const int64_t *o) {
  const nrt_operand *x = &j->l->operands[1];
  const int64_t *ix = j->t[2].idx + o[2] * 2;
  return two_tap(in_f32(xp + ix[0] * x->strides[4], x->dtype), in_f32(xp + ix[1] * x->strides[4], x->dtype),
                 j->t[2].w + o[2] * 2);
}
static inline __attribute__((always_inline)) float nested_hw(const interp_job *j, const char *xp, const int64_t *o) {
  const nrt_operand *x = &j->l->operands[1];
  const int64_t *ix = j->t[1].idx + o[1] * 2;
  return two_tap(nested_w(j, xp + ix[0] * x->strides[3], o), nested_w(j, xp + ix[1] * x->strides[3], o),
                 j->t[1].w + o[1] * 2);
}
static inline __attribute__((always_inline)) float nested_dhw(const interp_job *j, const char *xp, const int64_t *o) {
  const nrt_operand *x = &j->l->operands[1];
  const int64_t *ix = j->t[0].idx + o[0] * 2;
  return two_tap(nested_hw(j, xp + ix[0] * x->strides[2], o), nested_hw(j, xp + ix[1] * x->strides[2], o),
                 j->t[0].w + o[0] * 2);
}

/* The 2^(3 - first) corners of output point o of a linear job (dims first..
 * interpolated, a 2-d job's depth taken at o[0]): each corner's address
 * from base (a plane, or an image for channels-last rows) and its weight,
 * the product of the dims' weights from the outermost in. */
static inline __attribute__((always_inline)) void linear_corners(const interp_job *j, const char *base,
                                                                 const int64_t *o, int64_t first, int64_t nterms,
                                                                 const char **src, float *w) {
  const nrt_operand *x = &j->l->operands[1];
  for (int64_t k = 0; k < nterms; k++) {
    const char *p = base;
    float wk = 0.0f;
    for (int64_t d = first; d < 3; d++) {
      int64_t bit = (k >> (2 - d)) & 1, at = o[d] * j->t[d].T + bit;
      p += j->t[d].idx[at] * x->strides[2 + d];
      wk = d == first ? j->t[d].w[at] : wk * j->t[d].w[at];
    }
    if (first == 1) p += j->t[0].idx[o[0]] * x->strides[2];
    src[k] = p;
    w[k] = wk;
  }
}

static inline __attribute__((always_inline)) void fwd_linear_body(interp_job *j, int64_t begin, int64_t end) {
  const nrt_resample_geom *g = &j->g;
  const nrt_operand *y = &j->l->operands[0], *x = &j->l->operands[1];
  int64_t first = j->t[0].T == 2 ? 0 : j->t[1].T == 2 ? 1 : 2; /* the outermost interpolated dim */
  int64_t ndims = 3 - first, nterms = (int64_t)1 << ndims;
  for (int64_t r = begin; r < end; r++) {
    int64_t oh = r % g->O[1], od = (r / g->O[1]) % g->O[0], p = r / (g->O[1] * g->O[0]);
    int64_t n = p / g->C, c = p % g->C;
    const char *xp = PLANE(x, n, c);
    char *yr = PLANE(y, n, c) + od * y->strides[2] + oh * y->strides[3];
    bool vec = j->lanes > 0 && c < g->C - g->C % j->lanes;
    for (int64_t ow = 0; ow < g->O[2]; ow++) {
      int64_t o[3] = {od, oh, ow};
      float v;
      if (j->lanes == 0) {
        const char *xd = xp + j->t[0].idx[od] * x->strides[2];
        v = first == 0   ? nested_dhw(j, xp, o)
            : first == 1 ? nested_hw(j, xd, o)
                         : nested_w(j, xd + j->t[1].idx[oh] * x->strides[3], o); /* 16-bit 1-d linear */
      } else {
        float T[8], W[8];
        const char *src[8];
        linear_corners(j, xp, o, first, nterms, src, W);
        for (int64_t k = 0; k < nterms; k++) T[k] = in_f32(src[k], x->dtype);
        /* The first pair's fused product differs by dtype (the 16-bit
         * widening compiles differently): 16-bit lanes fuse T[n-2] W[n-2]
         * and float16's tail T[1] W[1] (probed: lanes 320/320 for both,
         * tails 80/80) */
        bool f16 = x->dtype == NRT_FLOAT16, half = f16 || x->dtype == NRT_BFLOAT16;
        if (vec) {
          int64_t a = half ? nterms - 1 : nterms - 2, b = half ? nterms - 2 : nterms - 1;
          v = INTERP_MAC(T[a] * W[a], T[b], W[b]);
          for (int64_t k = nterms - 3; k >= 0; k--) v = INTERP_MAC(v, T[k], W[k]);
        } else {
          int64_t a = f16 ? 0 : 1, b = f16 ? 1 : 0;
          v = INTERP_MAC(T[a] * W[a], T[b], W[b]);
          for (int64_t k = 2; k < nterms; k++) v = INTERP_MAC(v, T[k], W[k]);
        }
      }
      if (y->dtype == NRT_FLOAT32) *(float *)(yr + ow * y->strides[4]) = v;
      else nrt_ref_store_f64(yr + ow * y->strides[4], y->dtype, v); /* rounded once, as the CPU's store */
    }
  }
}

static void fwd_linear_rows(interp_job *j, int64_t begin, int64_t end) { fwd_linear_body(j, begin, end); }
static NRT_TARGET_AVX2 void fwd_linear_rows_avx2(interp_job *j, int64_t begin, int64_t end) {
  fwd_linear_body(j, begin, end);
}

/* fwd_linear_body's channels-last kernel (p3 > 0) for float32 operands
 * that are channels-last in memory (the channel stride one element): the
 * corner offsets and weights of an output point once, then its channels
 * 8 at a time, each lane the same fused chain fwd_linear_body computes
 * for a vector channel (fma(T[n-1], W[n-1], T[n-2] W[n-2]), then the
 * other corners downwards), and the last C % 8 channels in its tail order.
 * Rows are (n, od, oh). fwd_linear_body is the plain version. */
static bool linear_cl_applies(const interp_job *j) {
  const nrt_operand *y = &j->l->operands[0], *x = &j->l->operands[1];
  return j->cpu_linear && j->lanes == 8 && x->dtype == NRT_FLOAT32 && !j->reference &&
         x->strides[1] == (int64_t)sizeof(float) && y->strides[1] == (int64_t)sizeof(float) &&
         nrt_kernels_isa() >= NRT_ISA_AVX2;
}

static NRT_TARGET_AVX2 void fwd_linear_cl_avx2(void *ctx, int64_t begin, int64_t end) {
  interp_job *j = ctx;
  const nrt_resample_geom *g = &j->g;
  const nrt_operand *y = &j->l->operands[0], *x = &j->l->operands[1];
  int64_t first = j->t[0].T == 2 ? 0 : 1; /* 2-d or 3-d here (cpu_linear) */
  int64_t nterms = (int64_t)1 << (3 - first), C = g->C, CV = C - C % 8;
  for (int64_t r = begin; r < end; r++) {
    int64_t oh = r % g->O[1], od = (r / g->O[1]) % g->O[0], n = r / (g->O[1] * g->O[0]);
    const char *xn = (const char *)x->data + n * x->strides[0];
    char *yr = (char *)y->data + n * y->strides[0] + od * y->strides[2] + oh * y->strides[3];
    for (int64_t ow = 0; ow < g->O[2]; ow++) {
      int64_t o[3] = {od, oh, ow};
      const char *src[8];
      float W[8];
      linear_corners(j, xn, o, first, nterms, src, W);
      const float *T[8];
      for (int64_t k = 0; k < nterms; k++) T[k] = (const float *)src[k];
      float *out = (float *)(yr + ow * y->strides[4]);
      __m256 wa = _mm256_set1_ps(W[nterms - 2]), wb = _mm256_set1_ps(W[nterms - 1]);
      int64_t c = 0;
      for (; c < CV; c += 8) {
        __m256 v = _mm256_fmadd_ps(_mm256_loadu_ps(T[nterms - 1] + c), wb,
                                   _mm256_mul_ps(_mm256_loadu_ps(T[nterms - 2] + c), wa));
        for (int64_t k = nterms - 3; k >= 0; k--) v = _mm256_fmadd_ps(_mm256_loadu_ps(T[k] + c), _mm256_set1_ps(W[k]), v);
        _mm256_storeu_ps(out + c, v);
      }
      for (; c < C; c++) {
        float v = fmaf(T[0][c], W[0], T[1][c] * W[1]);
        for (int64_t k = 2; k < nterms; k++) v = fmaf(T[k][c], W[k], v);
        out[c] = v;
      }
    }
  }
}

static void fwd_range(void *ctx, int64_t begin, int64_t end) {
  interp_job *j = ctx;
  if (j->nearest) fwd_nearest_rows(j, begin, end);
  else if (j->cpu_linear && nrt_kernels_isa() >= NRT_ISA_AVX2) fwd_linear_rows_avx2(j, begin, end);
  else if (j->cpu_linear) fwd_linear_rows(j, begin, end);
  else if (j->sep2d && !j->reference && nrt_kernels_isa() >= NRT_ISA_AVX2) fwd_sep2d_rows_avx2(j, begin, end);
  else if (j->sep2d && !j->reference) fwd_sep2d_rows(j, begin, end);
  else if (j->reference) fwd_rows_ref(j, begin, end);
  else fwd_rows(j, begin, end);
}

/* Backward in the CPU's order. Every CPU kernel of these ops accumulates
 * grad_input in place, output point by output point (d, then h, then w),
 * each point adding its taps' products into the elements they read: the
 * linear and nearest ones of UpSampleMoreKernel.cpp (contiguous and
 * channels-last alike: the channels-last one only puts the channels in
 * its vector lanes), the antialiased one of UpSampleKernel.cpp, and
 * UpSampleBicubic2d.cpp's. 16-bit dtypes accumulate in a float plane
 * rounded once at the end, as the CPU's opmath buffer. Float sums round,
 * overflow and turn inf - inf into NaN by their order, so the order is
 * the CPU's, element for element:
 *  - taps d-major, w fastest, each adding ((wd * wh) * ww) * g (linear,
 *    nearest with weights 1, and the antialiased (wx * wy) * g);
 *  - bicubic: the width tap outer, the height tap inner, adding
 *    (g * wy) * wx at the clamped index (several taps of an edge output
 *    land on one element, in that order);
 * as a fused multiply-add where the CPU's compiled loop fuses it
 * (j->bwd_fused). Planes are independent: the fast path runs 8 of them in
 * the lanes of one vector (a [IL][8] float buffer), which keeps each
 * plane's order; the plain loop, one plane at a time, is the reference
 * and takes the planes left over. */
static inline __attribute__((always_inline)) float bwd_mac(float acc, float w, float g, bool fused) {
  return fused ? fmaf(w, g, acc) : acc + w * g;
}

/* One plane's scatter of the output points [0, OL) into acc (float [IL]). */
static void bwd_plane_ref(const interp_job *j, const float *gp, float *acc) {
  const nrt_resample_geom *g = &j->g;
  const int64_t IW = g->I[2], IH = g->I[1];
  const taps *td = &j->t[0], *th = &j->t[1], *tw = &j->t[2];
  const bool fused = j->bwd_fused;
  for (int64_t od = 0; od < g->O[0]; od++)
    for (int64_t oh = 0; oh < g->O[1]; oh++)
      for (int64_t ow = 0; ow < g->O[2]; ow++) {
        float v = gp[(od * g->O[1] + oh) * g->O[2] + ow];
        const int64_t *id = td->idx + od * td->T, *ih = th->idx + oh * th->T, *iw = tw->idx + ow * tw->T;
        const float *wd = td->w + od * td->T, *wh = th->w + oh * th->T, *ww = tw->w + ow * tw->T;
        if (j->bwd_cubic) { /* the op is 2-d (d has one tap of weight 1, v * 1 == v); a d of 4 taps as a third loop */
          for (int64_t a = 0; a < td->cnt[od]; a++)
            for (int64_t k = 0; k < tw->cnt[ow]; k++)
              for (int64_t b = 0; b < th->cnt[oh]; b++) {
                float *dst = acc + (id[a] * IH + ih[b]) * IW + iw[k];
                *dst = bwd_mac(*dst, (v * wd[a]) * wh[b], ww[k], fused);
              }
          continue;
        }
        for (int64_t a = 0; a < td->cnt[od]; a++)
          for (int64_t b = 0; b < th->cnt[oh]; b++) {
            float wdh = wd[a] * wh[b];
            for (int64_t k = 0; k < tw->cnt[ow]; k++) {
              float *dst = acc + (id[a] * IH + ih[b]) * IW + iw[k];
              *dst = bwd_mac(*dst, wdh * ww[k], v, fused);
            }
          }
      }
}

/* Planes [p0, p1) one at a time through bwd_plane_ref. */
static void bwd_planes_ref(interp_job *j, int64_t p0, int64_t p1) {
  const nrt_resample_geom *g = &j->g;
  const nrt_operand *gx = &j->l->operands[0], *gy = &j->l->operands[1];
  float *buf = malloc(sizeof(float) * (size_t)(g->IL + g->OL + 1));
  if (!buf) {
    j->failed = 1;
    return;
  }
  float *gp = buf + g->IL;
  for (int64_t p = p0; p < p1; p++) {
    int64_t n = p / g->C, c = p % g->C;
    for (int64_t od = 0; od < g->O[0]; od++)
      for (int64_t oh = 0; oh < g->O[1]; oh++)
        nrt_load_f32(gp + (od * g->O[1] + oh) * g->O[2], PLANE(gy, n, c) + od * gy->strides[2] + oh * gy->strides[3],
                     gy->strides[4], gy->dtype, g->O[2]);
    if (j->bwd_copy) memcpy(buf, gp, sizeof(float) * (size_t)g->IL);
    else {
      for (int64_t i = 0; i < g->IL; i++) buf[i] = 0.0f;
      bwd_plane_ref(j, gp, buf);
    }
    for (int64_t d = 0; d < g->I[0]; d++)
      for (int64_t h = 0; h < g->I[1]; h++)
        nrt_store_f32(PLANE(gx, n, c) + d * gx->strides[2] + h * gx->strides[3], gx->strides[4], gx->dtype,
                      buf + (d * g->I[1] + h) * g->I[2], g->I[2]);
  }
  free(buf);
}

/* 8 planes [p0, p0 + 8) in the lanes of AVX2 vectors: the same scatter
 * as bwd_plane_ref, lane by lane. */
static NRT_TARGET_AVX2 void bwd_planes8_avx2(interp_job *j, int64_t p0, float *acc, float *rows, float *gt) {
  const nrt_resample_geom *g = &j->g;
  const nrt_operand *gx = &j->l->operands[0], *gy = &j->l->operands[1];
  const int64_t IW = g->I[2], IH = g->I[1], OW = g->O[2];
  const taps *td = &j->t[0], *th = &j->t[1], *tw = &j->t[2];
  const bool fused = j->bwd_fused;
  /* float32 channels-last operands with the 8 planes the same n: the
   * lanes are 8 adjacent floats in memory, loaded and stored as they are */
  const bool cl = gy->dtype == NRT_FLOAT32 && gy->strides[1] == (int64_t)sizeof(float) &&
                  gx->strides[1] == (int64_t)sizeof(float) && p0 / g->C == (p0 + 7) / g->C;
  for (int64_t i = 0; i < g->IL * 8; i += 8) _mm256_storeu_ps(acc + i, _mm256_setzero_ps());
  for (int64_t od = 0; od < g->O[0]; od++)
    for (int64_t oh = 0; oh < g->O[1]; oh++) {
      if (cl) {
        const char *src = PLANE(gy, p0 / g->C, p0 % g->C) + od * gy->strides[2] + oh * gy->strides[3];
        for (int64_t ow = 0; ow < OW; ow++)
          _mm256_storeu_ps(gt + ow * 8, _mm256_loadu_ps((const float *)(src + ow * gy->strides[4])));
      } else {
        for (int64_t q = 0; q < 8; q++) {
          int64_t n = (p0 + q) / g->C, c = (p0 + q) % g->C;
          nrt_load_f32(rows + q * OW, PLANE(gy, n, c) + od * gy->strides[2] + oh * gy->strides[3], gy->strides[4],
                       gy->dtype, OW);
        }
        for (int64_t ow = 0; ow < OW; ow++)
          for (int64_t q = 0; q < 8; q++) gt[ow * 8 + q] = rows[q * OW + ow];
      }
      const int64_t *id = td->idx + od * td->T, *ih = th->idx + oh * th->T;
      const float *wd = td->w + od * td->T, *wh = th->w + oh * th->T;
      for (int64_t ow = 0; ow < OW; ow++) {
        __m256 v = _mm256_loadu_ps(gt + ow * 8);
        const int64_t *iw = tw->idx + ow * tw->T;
        const float *ww = tw->w + ow * tw->T;
        if (j->bwd_cubic) {
          for (int64_t a = 0; a < td->cnt[od]; a++) {
            __m256 va = _mm256_mul_ps(v, _mm256_set1_ps(wd[a]));
            for (int64_t k = 0; k < tw->cnt[ow]; k++) {
              __m256 wk = _mm256_set1_ps(ww[k]);
              for (int64_t b = 0; b < th->cnt[oh]; b++) {
                float *dst = acc + ((id[a] * IH + ih[b]) * IW + iw[k]) * 8;
                __m256 vb = _mm256_mul_ps(va, _mm256_set1_ps(wh[b])), s = _mm256_loadu_ps(dst);
                s = fused ? _mm256_fmadd_ps(vb, wk, s) : _mm256_add_ps(s, _mm256_mul_ps(vb, wk));
                _mm256_storeu_ps(dst, s);
              }
            }
          }
          continue;
        }
        for (int64_t a = 0; a < td->cnt[od]; a++)
          for (int64_t b = 0; b < th->cnt[oh]; b++) {
            float wdh = wd[a] * wh[b];
            float *row = acc + (id[a] * IH + ih[b]) * IW * 8;
            for (int64_t k = 0; k < tw->cnt[ow]; k++) {
              float *dst = row + iw[k] * 8;
              __m256 w = _mm256_set1_ps(wdh * ww[k]), s = _mm256_loadu_ps(dst);
              s = fused ? _mm256_fmadd_ps(w, v, s) : _mm256_add_ps(s, _mm256_mul_ps(w, v));
              _mm256_storeu_ps(dst, s);
            }
          }
      }
    }
  for (int64_t d = 0; d < g->I[0]; d++)
    for (int64_t h = 0; h < IH; h++) {
      const float *src = acc + (d * IH + h) * IW * 8;
      if (cl) {
        char *dst = PLANE(gx, p0 / g->C, p0 % g->C) + d * gx->strides[2] + h * gx->strides[3];
        for (int64_t w = 0; w < IW; w++) _mm256_storeu_ps((float *)(dst + w * gx->strides[4]), _mm256_loadu_ps(src + w * 8));
        continue;
      }
      for (int64_t q = 0; q < 8; q++) {
        float *r = rows + q * IW;
        for (int64_t w = 0; w < IW; w++) r[w] = src[w * 8 + q];
        int64_t n = (p0 + q) / g->C, c = (p0 + q) % g->C;
        nrt_store_f32(PLANE(gx, n, c) + d * gx->strides[2] + h * gx->strides[3], gx->strides[4], gx->dtype, r, IW);
      }
    }
}

static void bwd_range(void *ctx, int64_t begin, int64_t end) {
  interp_job *j = ctx;
  const nrt_resample_geom *g = &j->g;
  int64_t planes = g->N * g->C, p0 = begin * 8, p1 = nrt_min_i64(end * 8, planes);
  if (!j->reference && !j->bwd_copy && nrt_kernels_isa() >= NRT_ISA_AVX2 && p1 - p0 >= 8) {
    int64_t wide = g->I[2] > g->O[2] ? g->I[2] : g->O[2];
    float *acc = malloc(sizeof(float) * (size_t)(8 * (g->IL + 2 * wide) + 8));
    if (!acc) {
      j->failed = 1;
      return;
    }
    float *rows = acc + 8 * g->IL, *gt = rows + 8 * wide;
    for (; p1 - p0 >= 8; p0 += 8) bwd_planes8_avx2(j, p0, acc, rows, gt);
    free(acc);
  }
  if (p0 < p1) bwd_planes_ref(j, p0, p1);
}

nrt_status nrt_resample_interp(const nrt_launch *l) {
  const char *op = nrt_op_name(l->op);
  interp_job j = {.l = l};
  nrt_status st = nrt_resample_geom_init(l, &j.g);
  if (st != NRT_SUCCESS) return st;
  bool fwd = (int)l->op == NRT_OP(INTERP);
  int mode = (int)l->params[0];
  j.nearest = fwd && (mode == NRT_INTERP_NEAREST || mode == NRT_INTERP_NEAREST_EXACT);
  if (l->noutputs != 1)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expected 1 output, got %d", op, l->noutputs);
  if (l->operands[0].dtype != l->operands[1].dtype)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: output dtype %s differs from input dtype %s", op,
                           nrt_dtype_name(l->operands[0].dtype), nrt_dtype_name(l->operands[1].dtype));
  /* uint8 images have their own fixed-point arithmetic (the CPU's) */
  if (fwd && !j.nearest && l->operands[0].dtype == NRT_UINT8) return nrt_resample_interp_u8(l, &j.g);
  if (!j.nearest && !nrt_dtype_is_floating(l->operands[0].dtype))
    return nrt_kernel_fail(NRT_ERROR_UNSUPPORTED, "%s: mode %d not implemented for %s", op, mode,
                           nrt_dtype_name(l->operands[0].dtype));
  const nrt_resample_geom *g = &j.g;
  int64_t planes = g->N * g->C;
  /* the source side may be empty only when there is nothing to produce */
  if (fwd && g->OL * planes > 0 && g->IL == 0)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: empty input plane for a non-empty output", op);
  if (!fwd && g->IL * planes > 0 && g->OL == 0) {
    /* nothing flows back: grad_x is all zeros (the plane loop handles it) */
  }
  if ((fwd ? g->OL : g->IL) * planes == 0) return NRT_SUCCESS;
  j.esize = nrt_dtype_size(l->operands[0].dtype);
  j.reference = nrt_kernels_reference();
  /* p2: the op's spatial dims (the last p2 of the three); 0: all three */
  int64_t nsp = l->params[2] >= 1 && l->params[2] <= 3 ? l->params[2] : 3;
  for (int i = 0; i < 3; i++) {
    bool interpolated = i >= 3 - nsp || g->I[i] != 1 || g->O[i] != 1;
    st = taps_build(mode, l->params[1] != 0, l->scalars[i].f, g->I[i], g->O[i], interpolated,
                    (l->operands[fwd ? 1 : 0].dtype == NRT_FLOAT32 || !fwd), l->operands[0].dtype == NRT_FLOAT64, fwd && l->params[3] == 1 && j.nearest, &j.t[i]);
    if (st != NRT_SUCCESS) {
      for (int k = 0; k < i; k++) taps_free(&j.t[k]);
      return st;
    }
  }
  j.lanes = mode == NRT_INTERP_LINEAR && l->params[3] > 0 ? l->params[3] : 0;
  j.sep2d = fwd && sep2d_applies(&j, mode, l->operands[1].dtype);
  j.two_tap = j.sep2d && mode == NRT_INTERP_LINEAR;
  nrt_dtype xdt = l->operands[1].dtype;
  bool half = xdt == NRT_BFLOAT16 || xdt == NRT_FLOAT16;
  j.cpu_linear = fwd && !j.sep2d && mode == NRT_INTERP_LINEAR && j.t[2].T == 2 &&
                 ((j.t[1].T == 2 && xdt == NRT_FLOAT32) || (half && (j.t[1].T == 2 || j.lanes == 0)));
  /* 16-bit: the index is fused as for float32 in both CPU kernels; the
   * nested one stores its lambdas in the dtype (half_linear_taps), the
   * channels-last one keeps them in float, its vectors twice as wide */
  if (j.cpu_linear && half && j.lanes > 0) j.lanes *= 2;
  if (j.cpu_linear && half)
    for (int i = 0; i < 3; i++) {
      bool interpolated = i >= 3 - nsp || g->I[i] != 1 || g->O[i] != 1;
      taps_free(&j.t[i]);
      st = taps_build(mode, l->params[1] != 0, l->scalars[i].f, g->I[i], g->O[i], interpolated, true, false, false, &j.t[i]);
      if (st != NRT_SUCCESS) {
        for (int k = 0; k < 3; k++) taps_free(&j.t[k]);
        return st;
      }
      if (j.lanes == 0) half_linear_taps(&j.t[i], g->O[i], xdt);
    }
  if (j.sep2d && l->operands[0].dtype == NRT_BFLOAT16 && mode == NRT_INTERP_CUBIC)
    for (int i = 1; i < 3; i++) /* the CPU stores bfloat16 bicubic weights as bfloat16 */
      for (int64_t k = 0; k < j.t[i].T * g->O[i]; k++) j.t[i].w[k] = sep_round(j.t[i].w[k], NRT_BFLOAT16);
  if (fwd && linear_cl_applies(&j)) {
    int64_t rows = g->N * g->O[0] * g->O[1];
    nrt_parallel_for(rows, 1 + 16384 / (g->O[2] * g->C * 8 + 1), fwd_linear_cl_avx2, &j);
  } else if (fwd) {
    int64_t rows = planes * g->O[0] * g->O[1];
    int64_t per_row = g->O[2] * j.t[0].T * j.t[1].T * j.t[2].T + g->I[2];
    nrt_parallel_for(rows, 1 + 16384 / (per_row + 1), fwd_range, &j);
  } else {
    j.bwd_cubic = mode == NRT_INTERP_CUBIC;
    j.bwd_fused = mode != NRT_INTERP_CUBIC; /* UpSampleBicubic2d.cpp is built without FMA (probed) */
    /* UpSampleBicubic2d.cpp copies a same-size grad_output (no taps, so
     * no inf * 0 = NaN from the zero-weight ones); the other backward
     * kernels scatter through their taps even then */
    j.bwd_copy = mode == NRT_INTERP_CUBIC && g->I[0] == g->O[0] && g->I[1] == g->O[1] && g->I[2] == g->O[2];
    nrt_parallel_for((planes + 7) / 8, 1, bwd_range, &j);
  }
  for (int i = 0; i < 3; i++) taps_free(&j.t[i]);
  if (j.failed) return nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of memory for work buffers", op);
  return NRT_SUCCESS;
}
