/* Pooling kernels (NRT_KIND_POOLING): max and average pooling over the
 * (d, h, w) planes of each (n, c), with fixed windows (kernel, stride,
 * padding, dilation; ceil_mode only changes the output size the caller
 * computes) or adaptive ones, and their backward passes. 1-d and 2-d
 * pooling are the 3-d case with leading extents of 1.
 *
 * Window rules are ATen's CPU kernels', element for element:
 *  - max: taps start at o*S - P and step by the dilation, clipped to the
 *    input; the result is the first maximum, except that a NaN wins (the
 *    last NaN of the window); the index is d*IH*IW + h*IW + w within the
 *    plane, and an all -inf window reports its first in-bounds tap;
 *  - avg: the window [o*S - P, min(o*S - P + K, I + P)) sets the padded
 *    divisor, its intersection with the input the summed elements and the
 *    divisor without padding; divisor_override replaces both;
 *  - adaptive: [floor(o*I/O), ceil((o+1)*I/O)).
 *
 * Planes are independent, so they are the unit of parallel work; backward
 * passes scatter only within their own plane. The fast path converts a
 * plane to float32 once and works in float (PyTorch accumulates pooling in
 * float as well); the reference path reads every element through the
 * out-of-line converters and sums in double. */
#pragma GCC optimize("O3,no-trapping-math,no-math-errno")
#include <stdlib.h>
#include "kernels/common/common.h"
#include "nrt/ops/pooling.h"

typedef struct pool_geom {
  int64_t N, C, O[3], I[3], K[3], S[3], P[3], D[3];
  int64_t OL, IL; /* elements per output / input plane */
  bool adaptive, count_include_pad;
  bool adaptive3d; /* p3: AdaptiveAveragePooling3d.cpp's arithmetic (cpu3d_round) */
  int64_t divisor_override; /* 0: none */
} pool_geom;

static nrt_status geom_init(const nrt_launch *l, pool_geom *g) {
  const char *op = nrt_op_name(l->op);
  if (l->ndim != 11)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                           "%s: sizes are {N, C, O[3], I[3], K[3]}, got ndim %d", op, l->ndim);
  int want_out = l->op == NRT_OP(MAX_POOL) ? 2 : 1;
  if (l->noutputs != want_out)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expected %d output(s), got %d", op, want_out, l->noutputs);
  bool fwd = l->op == NRT_OP(MAX_POOL) || l->op == NRT_OP(AVG_POOL);
  if (l->compute_dtype == NRT_BOOL || (!fwd && !nrt_dtype_is_floating(l->compute_dtype)))
    return nrt_kernel_fail(NRT_ERROR_UNSUPPORTED, "%s: not implemented for %s", op, nrt_dtype_name(l->compute_dtype));
  if (l->op == NRT_OP(MAX_POOL) && l->operands[1].dtype != NRT_INT64)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: indices must be int64", op);
  if (l->op == NRT_OP(MAX_POOL_BACKWARD) && l->operands[2].dtype != NRT_INT64)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: indices must be int64", op);
  g->N = l->sizes[0];
  g->C = l->sizes[1];
  g->adaptive = l->params[0] != 0;
  g->count_include_pad = l->params[1] != 0;
  g->divisor_override = l->params[2];
  g->adaptive3d = g->adaptive && l->params[3] != 0;
  for (int i = 0; i < 3; i++) {
    g->O[i] = l->sizes[2 + i];
    g->I[i] = l->sizes[5 + i];
    g->K[i] = l->sizes[8 + i];
    g->S[i] = l->aux[i];
    g->P[i] = l->aux[3 + i];
    g->D[i] = l->aux[6 + i];
    if (!g->adaptive && (g->K[i] < 1 || g->S[i] < 1 || g->D[i] < 1 || g->P[i] < 0))
      return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                             "%s: dim %d: kernel %lld, stride %lld, padding %lld, dilation %lld", op, i,
                             (long long)g->K[i], (long long)g->S[i], (long long)g->P[i], (long long)g->D[i]);
  }
  g->OL = g->O[0] * g->O[1] * g->O[2];
  g->IL = g->I[0] * g->I[1] * g->I[2];
  return NRT_SUCCESS;
}

/* One dim of a window: taps lo, lo + step, ... < hi; `padded` is the avg
 * pool's padded extent. */
typedef struct win {
  int64_t lo, hi, step, padded;
} win;

static win window(const pool_geom *g, bool is_max, int i, int64_t o) {
  win w;
  int64_t in = g->I[i];
  if (g->adaptive) {
    int64_t out = g->O[i];
    w.lo = (o / out) * in + ((o % out) * in) / out;
    w.hi = 1 + ((o + 1) * in - 1) / out;
    w.step = 1;
    w.padded = w.hi - w.lo;
  } else if (is_max) {
    int64_t s = o * g->S[i] - g->P[i];
    w.hi = nrt_min_i64(s + (g->K[i] - 1) * g->D[i] + 1, in);
    while (s < 0) s += g->D[i];
    w.lo = s;
    w.step = g->D[i];
    w.padded = 0;
  } else {
    int64_t s = o * g->S[i] - g->P[i];
    int64_t e = nrt_min_i64(s + g->K[i], in + g->P[i]);
    w.padded = e - s;
    w.lo = nrt_max_i64(s, 0);
    w.hi = nrt_min_i64(e, in);
    w.step = 1;
  }
  return w;
}

/* Avg pool divisor of a window (3 dims). */
static double avg_divisor(const pool_geom *g, const win w[3]) {
  if (g->divisor_override) return (double)g->divisor_override;
  int64_t n = 1;
  for (int i = 0; i < 3; i++) n *= (g->count_include_pad && !g->adaptive) ? w[i].padded : w[i].hi - w[i].lo;
  return (double)n;
}

static bool win_empty(const win w[3]) {
  return w[0].lo >= w[0].hi || w[1].lo >= w[1].hi || w[2].lo >= w[2].hi;
}

#define PLANE(o, n, c) ((char *)(o)->data + (n) * (o)->strides[0] + (c) * (o)->strides[1])

/* ---- plane conversion (fast path) ----------------------------------------- */

/* Loads (store = false) or stores the (n, c) plane of o as a dense
 * [e0][e1][e2] buffer of float32 values, or with ints of the int64 values
 * of an int64 operand (the argmax indices). */
static void plane_io(const nrt_operand *o, int64_t n, int64_t c, const int64_t e[3], void *buf, bool ints,
                     bool store) {
  char *base = PLANE(o, n, c);
  const int64_t *st = o->strides + 2;
  for (int64_t d = 0; d < e[0]; d++)
    for (int64_t h = 0; h < e[1]; h++) {
      char *row = base + d * st[0] + h * st[1];
      int64_t at = (d * e[1] + h) * e[2];
      if (ints && store) nrt_store_i64(row, st[2], NRT_INT64, (int64_t *)buf + at, e[2]);
      else if (ints) nrt_load_i64((int64_t *)buf + at, row, st[2], NRT_INT64, e[2]);
      else if (store) nrt_store_f32(row, st[2], o->dtype, (float *)buf + at, e[2]);
      else nrt_load_f32((float *)buf + at, row, st[2], o->dtype, e[2]);
    }
}

/* Output columns ow whose tap at input offset ow*S + off lies in [0, in):
 * [lo, hi). */
static void tap_cols(int64_t off, int64_t s, int64_t in, int64_t out, int64_t *lo, int64_t *hi) {
  int64_t a = off >= 0 ? 0 : nrt_cdiv(-off, s);
  int64_t b = in - 1 - off < 0 ? 0 : (in - 1 - off) / s + 1;
  if (b > out) b = out;
  *lo = a < b ? a : b;
  *hi = b;
}

/* One max-pool tap over a row of outputs: branch-free (the compare is a
 * coin flip on real data), so it vectorises; built for AVX-512 too. */
#define MAX_TAP_ROW(NAME, ATTR)                                                                    \
  ATTR static void NAME(float *restrict out, int64_t *restrict idx, const float *restrict r,       \
                        int64_t lo, int64_t hi, int64_t s, int64_t off, int64_t base) {            \
    for (int64_t ow = lo; ow < hi; ow++) {                                                         \
      int64_t x = ow * s + off;                                                                    \
      float v = r[x], m = out[ow];                                                                 \
      bool take = v > m || v != v;                                                                 \
      out[ow] = take ? v : m;                                                                      \
      idx[ow] = take ? base + x : idx[ow];                                                         \
    }                                                                                              \
  }
MAX_TAP_ROW(max_tap_row_base, )
MAX_TAP_ROW(max_tap_row_avx512, NRT_TARGET_AVX512)

/* One output row (od, oh) of fixed-window max / avg pooling, tap by tap:
 * for each tap (kd, kh, kw) in ATen's order, a tight loop over the row's
 * outputs, so every output still sees its taps in the same order (same
 * first-max / NaN rule, same summation order). */
static void fixed_row(const pool_geom *g, bool is_max, const float *in, int64_t od, int64_t oh, const win *ww,
                      float *out, int64_t *idx, float *div) {
  const int64_t OW = g->O[2], HW = g->I[1] * g->I[2], IW = g->I[2], S2 = g->S[2];
  win wd = window(g, is_max, 0, od), wh = window(g, is_max, 1, oh);
  if (is_max) {
    const bool avx512 = nrt_kernels_isa() >= NRT_ISA_AVX512;
    for (int64_t ow = 0; ow < OW; ow++) {
      out[ow] = -INFINITY;
      idx[ow] = wd.lo * HW + wh.lo * IW + ww[ow].lo;
    }
    for (int64_t d = wd.lo; d < wd.hi; d += wd.step)
      for (int64_t h = wh.lo; h < wh.hi; h += wh.step) {
        const float *r = in + d * HW + h * IW;
        for (int64_t kw = 0; kw < g->K[2]; kw++) {
          int64_t off = kw * g->D[2] - g->P[2], lo, hi;
          tap_cols(off, S2, IW, OW, &lo, &hi);
          if (avx512) max_tap_row_avx512(out, idx, r, lo, hi, S2, off, d * HW + h * IW);
          else max_tap_row_base(out, idx, r, lo, hi, S2, off, d * HW + h * IW);
        }
      }
    return;
  }
  for (int64_t ow = 0; ow < OW; ow++) {
    win w3[3] = {wd, wh, ww[ow]};
    out[ow] = 0.0f;
    div[ow] = win_empty(w3) ? 0.0f : (float)avg_divisor(g, w3);
  }
  for (int64_t d = wd.lo; d < wd.hi; d++)
    for (int64_t h = wh.lo; h < wh.hi; h++) {
      const float *r = in + d * HW + h * IW;
      for (int64_t kw = 0; kw < g->K[2]; kw++) {
        int64_t off = kw - g->P[2], lo, hi;
        tap_cols(off, S2, IW, OW, &lo, &hi);
        for (int64_t ow = lo; ow < hi; ow++) out[ow] += r[ow * S2 + off];
      }
    }
  for (int64_t ow = 0; ow < OW; ow++) out[ow] = div[ow] == 0.0f ? 0.0f : out[ow] / div[ow];
}

/* Backward of one output row of fixed-window avg pooling, in the CPU's
 * order: output by output, each adding its share to its window's elements,
 * so an element shared by overlapping windows (stride below the kernel)
 * sums them in output order, as the CPU's += does (taps first to last put
 * the later output first: an ulp off in 8 of 24 crafted 2-d cases). */
static void fixed_row_avg_backward(const pool_geom *g, float *gin, int64_t od, int64_t oh, const win *ww,
                                   const float *gout, float *scaled) {
  const int64_t OW = g->O[2], HW = g->I[1] * g->I[2], IW = g->I[2], S2 = g->S[2];
  win wd = window(g, false, 0, od), wh = window(g, false, 1, oh);
  for (int64_t ow = 0; ow < OW; ow++) {
    win w3[3] = {wd, wh, ww[ow]};
    scaled[ow] = win_empty(w3) ? 0.0f : gout[ow] / (float)avg_divisor(g, w3);
  }
  for (int64_t d = wd.lo; d < wd.hi; d++)
    for (int64_t h = wh.lo; h < wh.hi; h++) {
      float *r = gin + d * HW + h * IW;
      /* element x = ow * S + kw - P: the last tap comes from the earliest
       * output, so taps last to first add each element's shares in output
       * order, and the ow loop stays a contiguous (vectorised) axpy */
      for (int64_t kw = g->K[2] - 1; kw >= 0; kw--) {
        int64_t off = kw - g->P[2], lo, hi;
        tap_cols(off, S2, IW, OW, &lo, &hi);
        for (int64_t ow = lo; ow < hi; ow++) r[ow * S2 + off] += scaled[ow];
      }
    }
}

/* The CPU's 3-d adaptive average pooling computes in the tensor's dtype,
 * not in float: each add of the window sum (forward) or of the gradient
 * (backward) rounds to it, and the divisor is three divisions, by the
 * window's depth, height and width, each rounded (sum / kT / kH / kW). In
 * float16 a window of two 60000s is inf there; in float32 three divisions
 * round differently from one by their product. */
static inline float cpu3d_round(float v, nrt_dtype dt) {
  if (dt == NRT_BFLOAT16) return nrt_k_bf16_to_f32(nrt_k_f32_to_bf16(v));
  if (dt == NRT_FLOAT16) return nrt_k_f16_to_f32(nrt_k_f32_to_f16(v));
  return v;
}

static inline float cpu3d_divide(float s, const win w[3], nrt_dtype dt) {
  for (int i = 0; i < 3; i++) s = cpu3d_round(s / (float)(w[i].hi - w[i].lo), dt);
  return s;
}

typedef struct pool_job {
  const nrt_launch *l;
  const pool_geom *g;
  _Atomic int failed;
} pool_job;

/* Windows of output row (od, oh) are computed once per row; the w windows
 * once per launch. */
static void fast_planes(void *ctx, int64_t begin, int64_t end) {
  pool_job *job = ctx;
  const nrt_launch *l = job->l;
  const pool_geom *g = job->g;
  bool is_max = l->op == NRT_OP(MAX_POOL) || l->op == NRT_OP(MAX_POOL_BACKWARD);
  bool backward = l->op == NRT_OP(MAX_POOL_BACKWARD) || l->op == NRT_OP(AVG_POOL_BACKWARD);
  float *in = malloc(sizeof(float) * (size_t)(g->IL + 1)), *out = malloc(sizeof(float) * (size_t)(g->OL + 1));
  int64_t *idx = is_max ? malloc(sizeof(int64_t) * (size_t)(g->OL + 1)) : NULL;
  win *ww = malloc(sizeof(win) * (size_t)(g->O[2] + 1));
  float *rowbuf = malloc(sizeof(float) * (size_t)(g->O[2] + 1));
  if (!in || !out || (is_max && !idx) || !ww || !rowbuf) {
    job->failed = 1;
    goto done;
  }
  for (int64_t ow = 0; ow < g->O[2]; ow++) ww[ow] = window(g, is_max, 2, ow);
  const int64_t HW = g->I[1] * g->I[2];
  for (int64_t plane = begin; plane < end; plane++) {
    int64_t n = plane / g->C, c = plane % g->C;
    if (!backward && !g->adaptive) {
      plane_io(&l->operands[l->noutputs], n, c, g->I, in, false, false);
      for (int64_t od = 0; od < g->O[0]; od++)
        for (int64_t oh = 0; oh < g->O[1]; oh++) {
          int64_t ob = (od * g->O[1] + oh) * g->O[2];
          fixed_row(g, is_max, in, od, oh, ww, out + ob, is_max ? idx + ob : NULL, rowbuf);
        }
      plane_io(&l->operands[0], n, c, g->O, out, false, true);
      if (is_max) plane_io(&l->operands[1], n, c, g->O, idx, true, true);
    } else if (!backward) {
      plane_io(&l->operands[l->noutputs], n, c, g->I, in, false, false);
      for (int64_t od = 0; od < g->O[0]; od++)
        for (int64_t oh = 0; oh < g->O[1]; oh++) {
          win w[3] = {window(g, is_max, 0, od), window(g, is_max, 1, oh), {0, 0, 0, 0}};
          int64_t ob = (od * g->O[1] + oh) * g->O[2];
          for (int64_t ow = 0; ow < g->O[2]; ow++) {
            w[2] = ww[ow];
            if (is_max) {
              int64_t best = w[0].lo * HW + w[1].lo * g->I[2] + w[2].lo;
              float m = -INFINITY;
              for (int64_t d = w[0].lo; d < w[0].hi; d += w[0].step)
                for (int64_t h = w[1].lo; h < w[1].hi; h += w[1].step) {
                  const float *r = in + d * HW + h * g->I[2];
                  for (int64_t x = w[2].lo; x < w[2].hi; x += w[2].step) {
                    float v = r[x];
                    if (v > m || isnan(v)) {
                      m = v;
                      best = d * HW + h * g->I[2] + x;
                    }
                  }
                }
              out[ob + ow] = m;
              idx[ob + ow] = best;
            } else if (win_empty(w)) {
              out[ob + ow] = 0.0f;
            } else if (g->adaptive3d) {
              nrt_dtype dt = l->operands[0].dtype;
              float s = 0.0f;
              for (int64_t d = w[0].lo; d < w[0].hi; d++)
                for (int64_t h = w[1].lo; h < w[1].hi; h++) {
                  const float *r = in + d * HW + h * g->I[2];
                  for (int64_t x = w[2].lo; x < w[2].hi; x++) s = cpu3d_round(s + r[x], dt);
                }
              out[ob + ow] = cpu3d_divide(s, w, dt);
            } else {
              float s = 0.0f;
              for (int64_t d = w[0].lo; d < w[0].hi; d++)
                for (int64_t h = w[1].lo; h < w[1].hi; h++) {
                  const float *r = in + d * HW + h * g->I[2];
                  for (int64_t x = w[2].lo; x < w[2].hi; x++) s += r[x];
                }
              out[ob + ow] = s / (float)avg_divisor(g, w);
            }
          }
        }
      plane_io(&l->operands[0], n, c, g->O, out, false, true);
      if (is_max) plane_io(&l->operands[1], n, c, g->O, idx, true, true);
    } else {
      for (int64_t i = 0; i < g->IL; i++) in[i] = 0.0f;
      plane_io(&l->operands[1], n, c, g->O, out, false, false);
      if (is_max) {
        plane_io(&l->operands[2], n, c, g->O, idx, true, false);
        for (int64_t i = 0; i < g->OL; i++)
          if (idx[i] >= 0 && idx[i] < g->IL) in[idx[i]] += out[i];
      } else if (!g->adaptive) {
        for (int64_t od = 0; od < g->O[0]; od++)
          for (int64_t oh = 0; oh < g->O[1]; oh++) {
            int64_t ob = (od * g->O[1] + oh) * g->O[2];
            fixed_row_avg_backward(g, in, od, oh, ww, out + ob, rowbuf);
          }
      } else {
        for (int64_t od = 0; od < g->O[0]; od++)
          for (int64_t oh = 0; oh < g->O[1]; oh++) {
            win w[3] = {window(g, false, 0, od), window(g, false, 1, oh), {0, 0, 0, 0}};
            int64_t ob = (od * g->O[1] + oh) * g->O[2];
            for (int64_t ow = 0; ow < g->O[2]; ow++) {
              w[2] = ww[ow];
              if (win_empty(w)) continue;
              nrt_dtype dt = l->operands[0].dtype;
              float v = g->adaptive3d ? cpu3d_divide(out[ob + ow], w, dt) : out[ob + ow] / (float)avg_divisor(g, w);
              for (int64_t d = w[0].lo; d < w[0].hi; d++)
                for (int64_t h = w[1].lo; h < w[1].hi; h++) {
                  float *r = in + d * HW + h * g->I[2];
                  if (g->adaptive3d)
                    for (int64_t x = w[2].lo; x < w[2].hi; x++) r[x] = cpu3d_round(r[x] + v, dt);
                  else
                    for (int64_t x = w[2].lo; x < w[2].hi; x++) r[x] += v;
                }
            }
          }
      }
      plane_io(&l->operands[0], n, c, g->I, in, false, true);
    }
  }
done:
  free(in);
  free(out);
  free(idx);
  free(ww);
  free(rowbuf);
}

/* ---- reference ---------------------------------------------------------------- */

static char *at3(const nrt_operand *o, int64_t n, int64_t c, int64_t d, int64_t h, int64_t w) {
  return PLANE(o, n, c) + d * o->strides[2] + h * o->strides[3] + w * o->strides[4];
}

static nrt_status reference(const nrt_launch *l, const pool_geom *g) {
  bool is_max = l->op == NRT_OP(MAX_POOL) || l->op == NRT_OP(MAX_POOL_BACKWARD);
  bool backward = l->op == NRT_OP(MAX_POOL_BACKWARD) || l->op == NRT_OP(AVG_POOL_BACKWARD);
  const int64_t HW = g->I[1] * g->I[2];
  double *acc = backward ? malloc(sizeof(double) * (size_t)(g->IL + 1)) : NULL;
  if (backward && !acc) return NRT_ERROR_OUT_OF_MEMORY;
  for (int64_t n = 0; n < g->N; n++)
    for (int64_t c = 0; c < g->C; c++) {
      if (backward)
        for (int64_t i = 0; i < g->IL; i++) acc[i] = 0.0;
      for (int64_t od = 0; od < g->O[0]; od++)
        for (int64_t oh = 0; oh < g->O[1]; oh++)
          for (int64_t ow = 0; ow < g->O[2]; ow++) {
            win w[3] = {window(g, is_max, 0, od), window(g, is_max, 1, oh), window(g, is_max, 2, ow)};
            if (backward) {
              const nrt_operand *gy = &l->operands[1];
              double v = (float)nrt_ref_load_f64(at3(gy, n, c, od, oh, ow), gy->dtype);
              if (is_max) {
                int64_t i = nrt_ref_load_i64(at3(&l->operands[2], n, c, od, oh, ow), NRT_INT64);
                if (i >= 0 && i < g->IL) acc[i] += v;
              } else if (!win_empty(w)) {
                v /= avg_divisor(g, w);
                for (int64_t d = w[0].lo; d < w[0].hi; d++)
                  for (int64_t h = w[1].lo; h < w[1].hi; h++)
                    for (int64_t x = w[2].lo; x < w[2].hi; x++) acc[d * HW + h * g->I[2] + x] += v;
              }
              continue;
            }
            const nrt_operand *x_op = &l->operands[l->noutputs];
            double r;
            if (is_max) {
              int64_t best = w[0].lo * HW + w[1].lo * g->I[2] + w[2].lo;
              double m = -INFINITY;
              for (int64_t d = w[0].lo; d < w[0].hi; d += w[0].step)
                for (int64_t h = w[1].lo; h < w[1].hi; h += w[1].step)
                  for (int64_t x = w[2].lo; x < w[2].hi; x += w[2].step) {
                    double v = (float)nrt_ref_load_f64(at3(x_op, n, c, d, h, x), x_op->dtype);
                    if (v > m || isnan(v)) {
                      m = v;
                      best = d * HW + h * g->I[2] + x;
                    }
                  }
              r = m;
              nrt_ref_store_i64(at3(&l->operands[1], n, c, od, oh, ow), NRT_INT64, best);
            } else if (win_empty(w)) {
              r = 0.0;
            } else {
              double s = 0.0;
              for (int64_t d = w[0].lo; d < w[0].hi; d++)
                for (int64_t h = w[1].lo; h < w[1].hi; h++)
                  for (int64_t x = w[2].lo; x < w[2].hi; x++)
                    s += (float)nrt_ref_load_f64(at3(x_op, n, c, d, h, x), x_op->dtype);
              r = s / avg_divisor(g, w);
            }
            nrt_ref_store_f64(at3(&l->operands[0], n, c, od, oh, ow), l->operands[0].dtype, r);
          }
      if (backward)
        for (int64_t d = 0; d < g->I[0]; d++)
          for (int64_t h = 0; h < g->I[1]; h++)
            for (int64_t x = 0; x < g->I[2]; x++)
              nrt_ref_store_f64(at3(&l->operands[0], n, c, d, h, x), l->operands[0].dtype,
                                acc[d * HW + h * g->I[2] + x]);
    }
  free(acc);
  return NRT_SUCCESS;
}

/* ---- integers (forward only, as in PyTorch) ---------------------------------------
 * max: exact int64 compares, an all-INT64_MIN window keeps its first tap;
 * avg: wrapping int64 sum, divided with truncation toward zero (C++). */
static void int_planes(void *ctx, int64_t begin, int64_t end) {
  pool_job *job = ctx;
  const nrt_launch *l = job->l;
  const pool_geom *g = job->g;
  bool is_max = l->op == NRT_OP(MAX_POOL);
  const nrt_operand *x = &l->operands[l->noutputs];
  const int64_t HW = g->I[1] * g->I[2];
  for (int64_t plane = begin; plane < end; plane++) {
    int64_t n = plane / g->C, c = plane % g->C;
    for (int64_t od = 0; od < g->O[0]; od++)
      for (int64_t oh = 0; oh < g->O[1]; oh++)
        for (int64_t ow = 0; ow < g->O[2]; ow++) {
          win w[3] = {window(g, is_max, 0, od), window(g, is_max, 1, oh), window(g, is_max, 2, ow)};
          int64_t r = is_max ? INT64_MIN : 0, best = w[0].lo * HW + w[1].lo * g->I[2] + w[2].lo;
          for (int64_t d = w[0].lo; d < w[0].hi; d += w[0].step)
            for (int64_t h = w[1].lo; h < w[1].hi; h += w[1].step)
              for (int64_t xw = w[2].lo; xw < w[2].hi; xw += w[2].step) {
                const char *p = PLANE(x, n, c) + d * x->strides[2] + h * x->strides[3] + xw * x->strides[4];
                int64_t v = nrt_ref_load_i64(p, x->dtype);
                if (!is_max) {
                  r = nrt_wadd(r, v);
                } else if (v > r) {
                  r = v;
                  best = d * HW + h * g->I[2] + xw;
                }
              }
          if (!is_max) {
            int64_t div = win_empty(w) ? 0 : (int64_t)avg_divisor(g, w);
            r = div == 0 ? 0 : (div == -1 ? nrt_wsub(0, r) : r / div);
          }
          char *yo = PLANE(&l->operands[0], n, c) + od * l->operands[0].strides[2] +
                     oh * l->operands[0].strides[3] + ow * l->operands[0].strides[4];
          nrt_ref_store_i64(yo, l->operands[0].dtype, r);
          if (is_max) {
            const nrt_operand *io = &l->operands[1];
            nrt_ref_store_i64(PLANE(io, n, c) + od * io->strides[2] + oh * io->strides[3] + ow * io->strides[4],
                              NRT_INT64, best);
          }
        }
  }
}

nrt_status nrt_pooling_execute(const nrt_launch *l) {
  pool_geom g;
  nrt_status st = geom_init(l, &g);
  if (st != NRT_SUCCESS) return st;
  bool backward = l->op == NRT_OP(MAX_POOL_BACKWARD) || l->op == NRT_OP(AVG_POOL_BACKWARD);
  if (g.N * g.C == 0 || (backward ? g.IL : g.OL) == 0) return NRT_SUCCESS;
  pool_job job = {.l = l, .g = &g, .failed = 0};
  if (!nrt_dtype_is_floating(l->compute_dtype)) {
    nrt_parallel_for(g.N * g.C, 1, int_planes, &job);
    return NRT_SUCCESS;
  }
  if (nrt_kernels_reference()) return reference(l, &g);
  int64_t per_plane = g.IL + g.OL;
  nrt_parallel_for(g.N * g.C, per_plane >= 16384 ? 1 : 16384 / per_plane, fast_planes, &job);
  if (job.failed)
    return nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for plane buffers", nrt_op_name(l->op));
  return NRT_SUCCESS;
}
