/* Norm kernels (NRT_KIND_NORM): layer norm forward and its input
 * gradient. Rows lie along the last dim of `sizes`; the leading dims index
 * independent rows, which are the parallel work items. Per-row operands
 * (mean, rstd) have stride 0 along the row; per-column operands (weight,
 * bias) normally have stride 0 over the leading dims.
 *
 * Everything computes in float32 whatever the stored dtype (float64 too,
 * by the device rule), with the row sums in double. The fast path gets
 * mean and biased variance from one pass of shifted sums (see
 * shifted_sums); the reference uses two passes (sum, squared deviations).
 *
 * Forward:  y = (x - mean) * rstd * w + b,  rstd = 1 / sqrt(var + eps).
 * Backward: with xhat = (x - mean) * rstd and g = grad_y * w,
 *           grad_x = rstd * (g - mean(g) - xhat * mean(g * xhat)); rows
 *           with an inf or NaN take ATen's formula (ln_backward_row_aten).
 * Non-finite rows: a NaN variance (an inf in the row) makes the whole row
 * NaN, as on the CPU. */
#pragma GCC optimize("O3,no-trapping-math,no-math-errno")
#include "kernels/norm/norm.h"
#include "nrt/ops/norm.h"

#define NORM_GRAIN 32768 /* elements per parallel chunk, at least */

/* Operand positions. */
enum { LN_Y = 0, LN_MEAN = 1, LN_RSTD = 2, LN_X = 3 };
enum { LNB_GX = 0, LNB_GY = 1, LNB_X = 2, LNB_MEAN = 3, LNB_RSTD = 4, LNB_W = 5 };

typedef struct norm_plan {
  int nops;
  int wk, bk;        /* operand of weight / bias, -1 if absent */
  bool w_shared, b_shared; /* the same row for every row: loaded once */
  float eps;
} norm_plan;

#define NORM_INLINE static inline __attribute__((always_inline))

/* Sums of d and d * d for d = x - x[0], in one pass. Shifting by an
 * element of the row bounds the cancellation in E[d^2] - E[d]^2: since
 * (x[0] - mean)^2 <= n * var, the relative error of the variance stays
 * below n * 2^-53 however large the mean. */
NORM_INLINE void shifted_sums(const float *x, int64_t n, double *out_s, double *out_q) {
  double s[8] = {0, 0, 0, 0, 0, 0, 0, 0}, q[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  double k = x[0];
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; j++) {
      double d = (double)x[i + j] - k;
      s[j] += d;
      q[j] += d * d;
    }
  for (; i < n; i++) {
    double d = (double)x[i] - k;
    s[0] += d;
    q[0] += d * d;
  }
  *out_s = nrt_sum8(s);
  *out_q = nrt_sum8(q);
}

/* A row whose values spread past float32's range (|x - mean| can reach
 * sqrt(n var) > FLT_MAX / 2) would overflow in x - m although y is of
 * order 1: it is centred in double instead. */
#define LN_WIDE_ROW 0x1p254 /* (FLT_MAX / 2)^2 */
static void ln_forward_row_wide(float *y, const float *x, const float *w, const float *b, int64_t n, double mean,
                                float r) {
  for (int64_t i = 0; i < n; i++) {
    float t = (float)(((double)x[i] - mean) * r);
    y[i] = (w ? t * w[i] : t) + (b ? b[i] : 0.0f);
  }
}

/* y row; w, b may be NULL. Returns mean and rstd. */
NORM_INLINE void ln_forward_row(float *y, const float *x, const float *w, const float *b, int64_t n,
                                float eps, float *out_mean, float *out_rstd) {
  double sd, qd;
  shifted_sums(x, n, &sd, &qd);
  double md = sd / (double)n, var = qd / (double)n - md * md;
  /* Rounding may leave var a little below 0; NaN (an inf or NaN in the
   * row) must stay NaN, as in ATen's max(var, 0): the whole row is NaN. */
  float m = (float)((double)x[0] + md), r = (float)(1.0 / sqrt((var < 0 ? 0 : var) + (double)eps));
  *out_mean = m;
  *out_rstd = r;
  if ((double)n * var > LN_WIDE_ROW) {
    ln_forward_row_wide(y, x, w, b, n, (double)x[0] + md, r);
    return;
  }
  if (w && b)
    for (int64_t i = 0; i < n; i++) y[i] = (x[i] - m) * r * w[i] + b[i];
  else if (w)
    for (int64_t i = 0; i < n; i++) y[i] = (x[i] - m) * r * w[i];
  else if (b)
    for (int64_t i = 0; i < n; i++) y[i] = (x[i] - m) * r + b[i];
  else
    for (int64_t i = 0; i < n; i++) y[i] = (x[i] - m) * r;
}

/* A row whose sums are not finite (an inf or NaN in grad_y, x or the
 * weight) takes ATen's own formula, dx = a dy w + b x + c with ds = sum dy w
 * x, db = sum dy w, a = rstd, b = (db mean - ds) a^3 / n, c = -b mean - db a
 * / n, so infinities cancel into NaN where the CPU's do; finite rows keep
 * the centred form above, which does not cancel when |mean| >> std. */
static void ln_backward_row_aten(float *gx, const float *gy, const float *x, const float *w, float m, float r,
                                 int64_t n) {
  double ds = 0.0, db = 0.0;
  for (int64_t i = 0; i < n; i++) {
    double g = w ? (double)gy[i] * w[i] : (double)gy[i];
    ds += g * x[i];
    db += g;
  }
  double a = r, scale = 1.0 / (double)n, b = (db * m - ds) * a * a * a * scale, c = -b * m - db * a * scale;
  for (int64_t i = 0; i < n; i++) {
    double ady = a * gy[i];
    gx[i] = (float)((w ? ady * w[i] : ady) + b * x[i] + c);
  }
}

/* gx row from gy, x, the row's mean and rstd, and w (NULL: none). */
NORM_INLINE void ln_backward_row(float *gx, const float *gy, const float *x, const float *w,
                                 float m, float r, int64_t n) {
  double sg[8] = {0, 0, 0, 0, 0, 0, 0, 0}, sgx[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; j++) {
      float g = w ? gy[i + j] * w[i + j] : gy[i + j];
      float xh = (x[i + j] - m) * r;
      sg[j] += (double)g;
      sgx[j] += (double)g * (double)xh;
    }
  for (; i < n; i++) {
    float g = w ? gy[i] * w[i] : gy[i];
    float xh = (x[i] - m) * r;
    sg[0] += (double)g;
    sgx[0] += (double)g * (double)xh;
  }
  double s1 = nrt_sum8(sg), s2 = nrt_sum8(sgx);
  if (!isfinite(s1) || !isfinite(s2)) {
    ln_backward_row_aten(gx, gy, x, w, m, r, n);
    return;
  }
  float mg = (float)(s1 / (double)n), mgx = (float)(s2 / (double)n);
  if (w)
    for (i = 0; i < n; i++) gx[i] = r * (gy[i] * w[i] - mg - (x[i] - m) * r * mgx);
  else
    for (i = 0; i < n; i++) gx[i] = r * (gy[i] - mg - (x[i] - m) * r * mgx);
}

/* Baseline and AVX-512 builds of the row functions. */
static void forward_row_base(float *y, const float *x, const float *w, const float *b, int64_t n,
                             float eps, float *m, float *r) {
  ln_forward_row(y, x, w, b, n, eps, m, r);
}
NRT_TARGET_AVX512 static void forward_row_avx512(float *y, const float *x, const float *w,
                                                 const float *b, int64_t n, float eps, float *m,
                                                 float *r) {
  ln_forward_row(y, x, w, b, n, eps, m, r);
}
static void backward_row_base(float *gx, const float *gy, const float *x, const float *w, float m,
                              float r, int64_t n) {
  ln_backward_row(gx, gy, x, w, m, r, n);
}
NRT_TARGET_AVX512 static void backward_row_avx512(float *gx, const float *gy, const float *x,
                                                  const float *w, float m, float r, int64_t n) {
  ln_backward_row(gx, gy, x, w, m, r, n);
}

/* ---- traversal ------------------------------------------------------------ */

static bool leading_strides_zero(const nrt_launch *l, int k) {
  for (int d = 0; d + 1 < l->ndim; d++)
    if (l->operands[k].strides[d] != 0 && l->sizes[d] != 1) return false;
  return true;
}

/* A row as float32: in place when it already is unit-stride float32,
 * otherwise converted into buf. */
static const float *row_in(const nrt_launch *l, int k, const char *ptr, int64_t st, int64_t n,
                           float *buf) {
  if (l->operands[k].dtype == NRT_FLOAT32 && st == 4) return (const float *)ptr;
  nrt_load_f32(buf, ptr, st, l->operands[k].dtype, n);
  return buf;
}

static float scalar_in(const nrt_launch *l, int k, const char *ptr) {
  float v;
  nrt_load_f32(&v, ptr, 0, l->operands[k].dtype, 1);
  return v;
}

static void scalar_out(const nrt_launch *l, int k, char *ptr, float v) {
  nrt_store_f32(ptr, 0, l->operands[k].dtype, &v, 1);
}

/* A task's rows; scratch holds an output, two input, a weight and a bias
 * row. */
static void norm_range(const nrt_rows_job *j, int64_t begin, int64_t end, void *scratch) {
  const norm_plan *p = j->ctx;
  const nrt_launch *l = j->l;
  const int64_t n = j->g.len, *rs = j->g.st;
  bool avx512 = nrt_kernels_isa() >= NRT_ISA_AVX512;
  float *buf = scratch;
  float *out_buf = buf, *in0 = buf + n, *in1 = buf + 2 * n, *wbuf = buf + 3 * n, *bbuf = buf + 4 * n;
  const float *w = NULL, *b = NULL;
  for (int64_t r = begin; r < end; r++) {
    char *ptr[NRT_MAX_OPERANDS];
    nrt_rows_start(l, p->nops, r, ptr);
    /* weight / bias: once per chunk when every row shares them */
    if (p->wk >= 0 && (!w || !p->w_shared)) w = row_in(l, p->wk, ptr[p->wk], rs[p->wk], n, wbuf);
    if (p->bk >= 0 && (!b || !p->b_shared)) b = row_in(l, p->bk, ptr[p->bk], rs[p->bk], n, bbuf);
    int ok = l->op == NRT_OP(LAYER_NORM) ? LN_Y : LNB_GX;
    bool direct = l->operands[ok].dtype == NRT_FLOAT32 && rs[ok] == 4;
    float *out = direct ? (float *)ptr[ok] : out_buf;
    if (l->op == NRT_OP(LAYER_NORM)) {
      const float *x = row_in(l, LN_X, ptr[LN_X], rs[LN_X], n, in0);
      float m, rstd;
      if (avx512) forward_row_avx512(out, x, w, b, n, p->eps, &m, &rstd);
      else forward_row_base(out, x, w, b, n, p->eps, &m, &rstd);
      scalar_out(l, LN_MEAN, ptr[LN_MEAN], m);
      scalar_out(l, LN_RSTD, ptr[LN_RSTD], rstd);
    } else {
      const float *gy = row_in(l, LNB_GY, ptr[LNB_GY], rs[LNB_GY], n, in0);
      const float *x = row_in(l, LNB_X, ptr[LNB_X], rs[LNB_X], n, in1);
      float m = scalar_in(l, LNB_MEAN, ptr[LNB_MEAN]), rstd = scalar_in(l, LNB_RSTD, ptr[LNB_RSTD]);
      if (avx512) backward_row_avx512(out, gy, x, w, m, rstd, n);
      else backward_row_base(out, gy, x, w, m, rstd, n);
    }
    if (!direct) nrt_store_f32(ptr[ok], rs[ok], l->operands[ok].dtype, out, n);
  }
}

/* ---- reference: element at a time, dtype.c conversions, double sums ---- */

static void norm_reference(const nrt_rows_job *j, int64_t r, char *const *ptr, void *unused) {
  const norm_plan *p = j->ctx;
  const nrt_launch *l = j->l;
  const nrt_rows *rows = &j->g;
  int64_t n = rows->len;
#define LD(k, i) nrt_rows_ref_ld(l, rows, ptr, k, i)
#define ST(k, i, v) nrt_rows_ref_st(l, rows, ptr, k, i, (float)(v))
  if (l->op == NRT_OP(LAYER_NORM)) {
    double s = 0, q = 0;
    for (int64_t i = 0; i < n; i++) s += LD(LN_X, i);
    double mean = s / (double)n;
    for (int64_t i = 0; i < n; i++) q += (LD(LN_X, i) - mean) * (LD(LN_X, i) - mean);
    float m = (float)mean, rstd = (float)(1.0 / sqrt(q / (double)n + (double)p->eps));
    for (int64_t i = 0; i < n; i++) {
      double y = ((double)LD(LN_X, i) - mean) * rstd; /* centred in double: no overflow in x - mean */
      if (p->wk >= 0) y *= LD(p->wk, i);
      if (p->bk >= 0) y += LD(p->bk, i);
      ST(LN_Y, i, y);
    }
    ST(LN_MEAN, 0, m);
    ST(LN_RSTD, 0, rstd);
  } else {
    float m = LD(LNB_MEAN, 0), rstd = LD(LNB_RSTD, 0);
    double sg = 0, sgx = 0;
    for (int64_t i = 0; i < n; i++) {
      double g = (double)LD(LNB_GY, i) * (p->wk >= 0 ? LD(p->wk, i) : 1.0f);
      double xh = ((double)LD(LNB_X, i) - m) * rstd;
      sg += g;
      sgx += g * xh;
    }
    if (!isfinite(sg) || !isfinite(sgx)) { /* ATen's formula, as the fast path */
      double ds = 0.0, db = 0.0;
      for (int64_t i = 0; i < n; i++) {
        double g = (double)LD(LNB_GY, i) * (p->wk >= 0 ? LD(p->wk, i) : 1.0f);
        ds += g * LD(LNB_X, i);
        db += g;
      }
      double a = rstd, scale = 1.0 / (double)n, b = (db * m - ds) * a * a * a * scale, c = -b * m - db * a * scale;
      for (int64_t i = 0; i < n; i++) {
        double ady = a * LD(LNB_GY, i);
        ST(LNB_GX, i, (p->wk >= 0 ? ady * LD(p->wk, i) : ady) + b * LD(LNB_X, i) + c);
      }
      return;
    }
    for (int64_t i = 0; i < n; i++) {
      double g = (double)LD(LNB_GY, i) * (p->wk >= 0 ? LD(p->wk, i) : 1.0f);
      double xh = ((double)LD(LNB_X, i) - m) * rstd;
      ST(LNB_GX, i, rstd * (g - sg / (double)n - xh * (sgx / (double)n)));
    }
  }
#undef LD
#undef ST
}

nrt_status nrt_layer_norm_run(const nrt_launch *l) {
  norm_plan p = {.nops = l->noutputs + l->ninputs, .wk = -1, .bk = -1};
  const char *name = nrt_op_name(l->op);
  if (l->op == NRT_OP(LAYER_NORM)) {
    if (l->noutputs != 3)
      return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expected 3 outputs (y, mean, rstd), got %d", name,
                             l->noutputs);
    int64_t flags = l->params[1];
    int want = 1 + (int)(flags & 1) + (int)((flags >> 1) & 1);
    if ((flags & ~(int64_t)3) || l->ninputs != want)
      return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                             "%s: p1 = %lld (bit0 weight, bit1 bias) needs %d inputs, got %d", name,
                             (long long)flags, want, l->ninputs);
    int k = LN_X + 1;
    if (flags & 1) p.wk = k++;
    if (flags & 2) p.bk = k++;
    p.eps = (float)l->scalars[0].f;
  } else if (l->op == NRT_OP(LAYER_NORM_BACKWARD)) {
    if (l->noutputs != 1)
      return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expected 1 output, got %d", name, l->noutputs);
    if (l->ninputs == 5) p.wk = LNB_W;
  } else {
    return nrt_kernel_fail(NRT_ERROR_UNSUPPORTED, "kernel %s: not a norm op", name);
  }
  nrt_rows_job j = {.l = l, .ctx = &p, .nops = p.nops, .range = norm_range};
  nrt_rows_init(&j.g, l);
  if (j.g.count == 0 || j.g.len == 0) return NRT_SUCCESS;
  p.w_shared = p.wk >= 0 && leading_strides_zero(l, p.wk);
  p.b_shared = p.bk >= 0 && leading_strides_zero(l, p.bk);
  bool ref = nrt_kernels_reference();
  if (ref) { /* one row at a time on this thread */
    j.range = NULL;
    j.row = norm_reference;
  } else {
    j.scratch = 5 * (size_t)j.g.len * sizeof(float);
  }
  if (!nrt_rows_run(&j, NORM_GRAIN, !ref))
    return nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for a row of %lld", name,
                           (long long)j.g.len);
  return NRT_SUCCESS;
}
