/* Row ops: the last dim of `sizes` is a row processed as a whole (softmax
 * family, cumulative sums/products); the leading dims index independent
 * rows, which are the parallel work items. Operands: the output first,
 * then the inputs (grad, output for the backward ops).
 *
 * Each row is converted into float (int64 for integer cumulative ops,
 * double for a float64 result) buffers, or used in place when it is
 * unit-stride float32, computed, and converted out. Softmax is
 * max-shifted; sums accumulate in double.
 *
 * SOFTMAX / LOG_SOFTMAX with p0 = 1 follow the CPU's float16/bfloat16
 * kernels (see round_to below); for SOFTMAX, p1 > 0 also gives the CPU's
 * split of its non-last-dim kernel between a vectorised and a scalar path:
 * p1 its vector lanes, p2 the inner size (product of the sizes after the
 * softmax dim), p3 its thread count (see cpu_scalar_row).
 *
 * CUMPROD with p0 = 1 is a complex product: the operands describe real
 * views (each element a (re, im) pair of the operand's real dtype, im one
 * part size after re, as SELECT's complex LOGCUMSUMEXP reads them). */
#pragma GCC optimize("O3,no-trapping-math,no-math-errno")
#include <immintrin.h>
#include <stdlib.h>
#include "kernels/common/cx.h"
#include "kernels/common/common.h"

#define ROW_GRAIN 32768

typedef struct row_plan {
  nrt_op op;
  bool fdomain;
  int nops;
  nrt_dtype round_to; /* SOFTMAX / LOG_SOFTMAX p0 = 1: the 16-bit output dtype the CPU rounds within; else FLOAT32 */
  bool fsum;          /* SOFTMAX p0 = 1: the exps are summed in float, in order, as the CPU's kernel does */
  int64_t lanes, inner, threads; /* SOFTMAX p0 = 1, p1..p3: which rows the CPU rounds (0 lanes: all) */
  int64_t count;                 /* rows in the launch */
  bool f32acc;                   /* CUMSUM/CUMPROD into float16/bfloat16: a float running value (see cum_row_f32) */
} row_plan;

/* Row helpers are inlined into both builds of compute_row (baseline and
 * AVX-512): exp is most of softmax's work and four times faster with 16
 * lanes. The double sums (nrt_sum_f64, nrt_dot_f64) are always inlined. */
#define ROW_INLINE static inline __attribute__((always_inline))

/* Max ignoring NaN: a NaN in the row still poisons the results through
 * x - max, as in PyTorch. */
ROW_INLINE float row_max(const float *x, int64_t n) {
  /* maxps by hand (SSE is part of x86-64): the compiler will not turn a
   * running float max into one, as max is not associative under NaN and
   * signed-zero rules. maxps(v, m) keeps m when v is NaN. */
  __m128 m0 = _mm_set1_ps(-INFINITY), m1 = m0, m2 = m0, m3 = m0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    m0 = _mm_max_ps(_mm_loadu_ps(x + i), m0);
    m1 = _mm_max_ps(_mm_loadu_ps(x + i + 4), m1);
    m2 = _mm_max_ps(_mm_loadu_ps(x + i + 8), m2);
    m3 = _mm_max_ps(_mm_loadu_ps(x + i + 12), m3);
  }
  float lanes[4];
  _mm_storeu_ps(lanes, _mm_max_ps(_mm_max_ps(m0, m1), _mm_max_ps(m2, m3)));
  float r = lanes[0];
  for (int j = 1; j < 4; j++) r = lanes[j] > r ? lanes[j] : r;
  for (; i < n; i++) r = x[i] > r ? x[i] : r;
  return r;
}

/* PyTorch's CPU kernels for float16/bfloat16 softmax keep some
 * intermediates in the 16-bit type (p0 = 1, chosen by the glue, which
 * knows which of its kernels the CPU runs): softmax over a dim other than
 * the last stores each exp(x - max) in the output before dividing it by
 * the float sum of the unrounded exps; log_softmax over the last dim keeps
 * the row's sum, and then its log, in the 16-bit type. Everything else
 * stays in float, rounded once on store. */
ROW_INLINE float round_to(nrt_dtype dt, float v) {
  switch (dt) {
  case NRT_FLOAT16: return nrt_k_f16_to_f32(nrt_k_f32_to_f16(v));
  case NRT_BFLOAT16: return nrt_k_bf16_to_f32(nrt_k_f32_to_bf16(v));
  default: return v;
  }
}

/* ---- fast row functions ---------------------------------------------------- */

ROW_INLINE void softmax_row(float *out, const float *x, int64_t n, nrt_dtype rd, bool fsum) {
  float m = row_max(x, n);
  for (int64_t i = 0; i < n; i++) out[i] = nrt_vexpf(x[i] - m);
  float s = 0;
  if (fsum)
    for (int64_t i = 0; i < n; i++) s += out[i];
  else
    s = (float)nrt_sum_f64(out, n);
  if (rd != NRT_FLOAT32)
    for (int64_t i = 0; i < n; i++) out[i] = round_to(rd, out[i]);
  for (int64_t i = 0; i < n; i++) out[i] = out[i] / s;
}

ROW_INLINE void log_softmax_row(float *out, const float *x, int64_t n, float *tmp, nrt_dtype rd) {
  float m = row_max(x, n);
  for (int64_t i = 0; i < n; i++) tmp[i] = nrt_vexpf(x[i] - m);
  float lse = (float)log(nrt_sum_f64(tmp, n));
  if (rd != NRT_FLOAT32) lse = round_to(rd, logf(round_to(rd, (float)nrt_sum_f64(tmp, n))));
  for (int64_t i = 0; i < n; i++) out[i] = (x[i] - m) - lse;
}

ROW_INLINE void softmax_backward_row(float *gi, const float *g, const float *y, int64_t n) {
  float dot = (float)nrt_dot_f64(g, y, n);
  for (int64_t i = 0; i < n; i++) gi[i] = y[i] * (g[i] - dot);
}

ROW_INLINE void log_softmax_backward_row(float *gi, const float *g, const float *y, int64_t n) {
  float s = (float)nrt_sum_f64(g, n);
  for (int64_t i = 0; i < n; i++) gi[i] = g[i] - nrt_vexpf(y[i]) * s;
}

ROW_INLINE void cumsum_row(float *out, const float *x, int64_t n) {
  double acc = 0;
  for (int64_t i = 0; i < n; i++) {
    acc += x[i];
    out[i] = (float)acc;
  }
}

ROW_INLINE void cumprod_row(float *out, const float *x, int64_t n) {
  double acc = 1;
  for (int64_t i = 0; i < n; i++) {
    acc *= x[i];
    out[i] = (float)acc;
  }
}

/* The CPU's cumulative kernels run in at::acc_type<scalar_t, false> of
 * the result dtype: double for float32 (as cumsum_row above), float for
 * float16 and bfloat16, so a bfloat16 product of 3e38 and 10 is inf there,
 * and times 0 NaN (a double running value stays finite and gives 0). */
static void cum_row_f32(nrt_op op, float *out, const float *x, int64_t n) {
  float acc = op == NRT_OP_CUMPROD ? 1.0f : 0.0f;
  for (int64_t i = 0; i < n; i++) {
    acc = op == NRT_OP_CUMPROD ? acc * x[i] : acc + x[i];
    out[i] = acc;
  }
}

#define COMPUTE_ROW(fname, ATTR)                                                          \
  ATTR static void fname(nrt_op op, float *out, const float *a, const float *b, int64_t n, \
                         float *tmp, nrt_dtype rd, bool fsum) {                          \
    switch (op) {                                                                        \
    case NRT_OP_SOFTMAX: softmax_row(out, a, n, rd, fsum); break;                        \
    case NRT_OP_LOG_SOFTMAX: log_softmax_row(out, a, n, tmp, rd); break;                 \
    case NRT_OP_SOFTMAX_BACKWARD: softmax_backward_row(out, a, b, n); break;             \
    case NRT_OP_LOG_SOFTMAX_BACKWARD: log_softmax_backward_row(out, a, b, n); break;     \
    case NRT_OP_CUMSUM: cumsum_row(out, a, n); break;                                    \
    case NRT_OP_CUMPROD: cumprod_row(out, a, n); break;                                  \
    default: break;                                                                      \
    }                                                                                    \
  }
COMPUTE_ROW(compute_row, )
COMPUTE_ROW(compute_row_avx512, NRT_TARGET_AVX512)

/* ---- complex CUMPROD (p0 = 1) ------------------------------------------------
 * PyTorch's CPU multiplies one element at a time into a running
 * complex<double> that starts at 1 + 0i, with the textbook product (no
 * Annex G recovery), and rounds each prefix on store. That order is the
 * result: (1 + 0i)(inf + 0i) is inf + NaN i (inf * 0), so even a one-element
 * row is not a copy, and 1e30 * 1e30 stays finite in double until the
 * store. Its x86 build (AVX2, with FMA) contracts the product into
 * re = fma(a, c, -(b d)), im = fma(a, d, b c), running value (a, b) times
 * element (c, d): complex128 prefixes match it bit for bit only that way.
 * Both paths share the sequence (nrt_cx_scan_row). */
static nrt_cx cx_mul_step(nrt_cx acc, nrt_cx x) {
  return nrt_cx_make(fma(acc.re, x.re, -(acc.im * x.im)), fma(acc.re, x.im, acc.im * x.re));
}

static void cumprod_cx_row(const nrt_rows_job *j, int64_t r, char *const *ptr, void *scratch) {
  const nrt_launch *l = j->l;
  (void)r;
  nrt_cx_scan_row(ptr[0], j->g.st[0], l->operands[0].dtype, ptr[1], j->g.st[1], l->operands[1].dtype, j->g.len,
                  nrt_cx_make(1.0, 0.0), cx_mul_step, nrt_kernels_reference(), scratch);
}

/* ---- the CPU's split of non-last-dim 16-bit softmax ------------------------------
 * PyTorch's CPU kernel for float16/bfloat16 softmax over a dim other than
 * the last (_vec_softmax in SoftMaxKernel.cpp) walks the outer * inner
 * columns (our rows, counted row-major, so row r is inner position
 * r % inner) with parallel_for(0, count, grain 0): with t > 1 threads and
 * count > 1 each thread gets ceil(count / t) consecutive columns, else one
 * task has them all. A task takes `lanes` columns at a time (its 16-bit
 * vector width) while they fit both before the end of the current inner
 * run and before the end of the task; those columns are computed in
 * float and rounded once. Every other column (the rest of an inner run,
 * or of the task) takes its scalar path, which stores each exp in the
 * 16-bit output before dividing. So the result depends on the thread
 * count, and which columns are scalar follows from it in closed form:
 * inside the task [b, e) and the inner run starting at rs, the segment
 * starts at s = max(b, rs) and ends at min(e, rs + inner); the block of r
 * is vectorised iff it ends by the segment's end. */
static bool cpu_scalar_row(const row_plan *p, int64_t r) {
  if (p->lanes == 0) return true;
  int64_t chunk = p->threads > 1 && p->count > 1 ? (p->count + p->threads - 1) / p->threads : p->count;
  int64_t b = r / chunk * chunk, e = b + chunk < p->count ? b + chunk : p->count;
  int64_t rs = r - r % p->inner, re = rs + p->inner;
  int64_t s = b > rs ? b : rs, end = e < re ? e : re;
  int64_t block_end = s + ((r - s) / p->lanes + 1) * p->lanes;
  return block_end > end;
}

/* The 16-bit type row r rounds its intermediates to (FLOAT32: none). */
static nrt_dtype row_round(const row_plan *p, int64_t r) {
  if (p->round_to == NRT_FLOAT32 || p->op != NRT_OP_SOFTMAX) return p->round_to;
  return cpu_scalar_row(p, r) ? p->round_to : NRT_FLOAT32;
}

/* ---- traversal ---------------------------------------------------------------- */

/* A task's rows; scratch holds an output, two input and a scratch row. */
static void row_range(const nrt_rows_job *j, int64_t begin, int64_t end, void *mem) {
  const row_plan *p = j->ctx;
  const nrt_launch *l = j->l;
  const int64_t n = j->g.len, *rs = j->g.st;
  bool avx512 = nrt_kernels_isa() >= NRT_ISA_AVX512;
  for (int64_t r = begin; r < end; r++) {
    char *ptr[NRT_MAX_OPERANDS];
    nrt_rows_start(l, p->nops, r, ptr);
    nrt_dtype odt = l->operands[0].dtype;
    if (!p->fdomain) {
      int64_t *out = (int64_t *)mem, *x = out + n;
      nrt_load_i64(x, ptr[1], rs[1], l->operands[1].dtype, n);
      int64_t acc = p->op == NRT_OP_CUMPROD ? 1 : 0;
      for (int64_t i = 0; i < n; i++) {
        acc = p->op == NRT_OP_CUMPROD ? nrt_wmul(acc, x[i]) : nrt_wadd(acc, x[i]);
        out[i] = acc;
      }
      nrt_store_i64(ptr[0], rs[0], odt, out, n);
      continue;
    }
    float *buf = (float *)mem;
    const float *in[2] = {NULL, NULL};
    for (int k = 1; k < p->nops && k <= 2; k++) {
      if (l->operands[k].dtype == NRT_FLOAT32 && rs[k] == 4) {
        in[k - 1] = (const float *)ptr[k];
      } else {
        nrt_load_f32(buf + k * n, ptr[k], rs[k], l->operands[k].dtype, n);
        in[k - 1] = buf + k * n;
      }
    }
    bool direct = odt == NRT_FLOAT32 && rs[0] == 4;
    float *out = direct ? (float *)ptr[0] : buf;
    nrt_dtype rd = row_round(p, r);
    if (p->f32acc) cum_row_f32(p->op, out, in[0], n);
    else if (avx512) compute_row_avx512(p->op, out, in[0], in[1], n, buf + 3 * n, rd, p->fsum);
    else compute_row(p->op, out, in[0], in[1], n, buf + 3 * n, rd, p->fsum);
    if (!direct) nrt_store_f32(ptr[0], rs[0], odt, out, n);
  }
}

/* ---- float64 rows --------------------------------------------------------------
 * A float64 result is computed in double, as the CPU's kernels compute it:
 * cumprod(dtype=float64) of 3e38 * 3e38 is 9e76 there (inf in float), and
 * log_softmax of -3.4e38 beside 0 is -3.4e38 - 0, not -inf. The same
 * formulas as the float rows; softmax multiplies by 1 / sum as the CPU's
 * last-dim kernel does. Plain loops serve both modes (there is no
 * vectorised version to check them against). */
static void compute_row_f64(nrt_op op, double *out, const double *a, const double *b, int64_t n) {
  switch (op) {
  case NRT_OP_SOFTMAX:
  case NRT_OP_LOG_SOFTMAX: {
    double m = -INFINITY, s = 0;
    for (int64_t i = 0; i < n; i++) m = a[i] > m ? a[i] : m; /* NaN skipped; it poisons x - m below */
    for (int64_t i = 0; i < n; i++) s += exp(a[i] - m);
    if (op == NRT_OP_SOFTMAX) {
      double r = 1.0 / s;
      for (int64_t i = 0; i < n; i++) out[i] = exp(a[i] - m) * r;
    } else {
      double lse = log(s);
      for (int64_t i = 0; i < n; i++) out[i] = (a[i] - m) - lse;
    }
    break;
  }
  case NRT_OP_SOFTMAX_BACKWARD: {
    double dot = 0;
    for (int64_t i = 0; i < n; i++) dot += a[i] * b[i];
    for (int64_t i = 0; i < n; i++) out[i] = b[i] * (a[i] - dot);
    break;
  }
  case NRT_OP_LOG_SOFTMAX_BACKWARD: {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += a[i];
    for (int64_t i = 0; i < n; i++) out[i] = a[i] - exp(b[i]) * s;
    break;
  }
  case NRT_OP_CUMSUM:
  case NRT_OP_CUMPROD: {
    double acc = op == NRT_OP_CUMPROD ? 1.0 : 0.0;
    for (int64_t i = 0; i < n; i++) {
      acc = op == NRT_OP_CUMPROD ? acc * a[i] : acc + a[i];
      out[i] = acc;
    }
    break;
  }
  default: break;
  }
}

/* A task's float64 rows; scratch holds an output and two input rows. */
static void row_range_f64(const nrt_rows_job *j, int64_t begin, int64_t end, void *mem) {
  const row_plan *p = j->ctx;
  const nrt_launch *l = j->l;
  const int64_t n = j->g.len, *rs = j->g.st;
  double *buf = (double *)mem;
  for (int64_t r = begin; r < end; r++) {
    char *ptr[NRT_MAX_OPERANDS];
    nrt_rows_start(l, p->nops, r, ptr);
    for (int k = 1; k < p->nops && k <= 2; k++) nrt_load_f64(buf + k * n, ptr[k], rs[k], l->operands[k].dtype, n);
    compute_row_f64(p->op, buf, buf + n, buf + 2 * n, n);
    nrt_store_f64(ptr[0], rs[0], l->operands[0].dtype, buf, n);
  }
}

/* ---- reference: element at a time, libm, plain double sums ---------------- */

static void row_reference(const nrt_rows_job *j, int64_t r, char *const *ptr, void *unused) {
  const row_plan *p = j->ctx;
  const nrt_launch *l = j->l;
  const nrt_rows *g = &j->g;
  int64_t n = g->len;
#define AT(k, i) (ptr[k] + (i) * g->st[k])
#define LD(k, i) nrt_rows_ref_ld(l, g, ptr, k, i)
#define ST(i, v) nrt_rows_ref_st(l, g, ptr, 0, i, (float)(v))
  if (!p->fdomain) {
    int64_t acc = p->op == NRT_OP_CUMPROD ? 1 : 0;
    for (int64_t i = 0; i < n; i++) {
      int64_t v = nrt_ref_load_i64(AT(1, i), l->operands[1].dtype);
      acc = p->op == NRT_OP_CUMPROD ? nrt_wmul(acc, v) : nrt_wadd(acc, v);
      nrt_ref_store_i64(AT(0, i), l->operands[0].dtype, acc);
    }
    return;
  }
  switch (p->op) {
  case NRT_OP_SOFTMAX:
  case NRT_OP_LOG_SOFTMAX: {
    float m = -INFINITY;
    for (int64_t i = 0; i < n; i++) m = LD(1, i) > m ? LD(1, i) : m;
    double s = 0;
    float fs = 0;
    for (int64_t i = 0; i < n; i++) {
      s += expf(LD(1, i) - m);
      fs += expf(LD(1, i) - m);
    }
    if (p->fsum) s = fs;
    float lse = (float)log(s);
    if (p->round_to != NRT_FLOAT32) lse = round_to(p->round_to, logf(round_to(p->round_to, (float)s)));
    nrt_dtype rd = row_round(p, r);
    for (int64_t i = 0; i < n; i++) {
      if (p->op == NRT_OP_SOFTMAX) ST(i, round_to(rd, expf(LD(1, i) - m)) / (float)s);
      else ST(i, (LD(1, i) - m) - lse);
    }
    break;
  }
  case NRT_OP_SOFTMAX_BACKWARD: {
    double dot = 0;
    for (int64_t i = 0; i < n; i++) dot += (double)LD(1, i) * LD(2, i);
    for (int64_t i = 0; i < n; i++) ST(i, LD(2, i) * (LD(1, i) - (float)dot));
    break;
  }
  case NRT_OP_LOG_SOFTMAX_BACKWARD: {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += LD(1, i);
    for (int64_t i = 0; i < n; i++) ST(i, LD(1, i) - expf(LD(2, i)) * (float)s);
    break;
  }
  case NRT_OP_CUMSUM:
  case NRT_OP_CUMPROD: {
    double acc = p->op == NRT_OP_CUMPROD ? 1.0 : 0.0;
    float facc = (float)acc;
    for (int64_t i = 0; i < n; i++) {
      acc = p->op == NRT_OP_CUMPROD ? acc * LD(1, i) : acc + LD(1, i);
      facc = p->op == NRT_OP_CUMPROD ? facc * LD(1, i) : facc + LD(1, i);
      ST(i, p->f32acc ? (double)facc : acc);
    }
    break;
  }
  default: break;
  }
#undef AT
#undef LD
#undef ST
}

nrt_status nrt_row_execute(const nrt_launch *l) {
  row_plan p = {.op = l->op, .fdomain = nrt_dtype_is_floating(l->compute_dtype), .nops = l->noutputs + l->ninputs,
                .round_to = NRT_FLOAT32};
  if (l->noutputs != 1)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expected 1 output, got %d", nrt_op_name(l->op),
                           l->noutputs);
  if (!p.fdomain && l->op != NRT_OP_CUMSUM && l->op != NRT_OP_CUMPROD)
    return nrt_kernel_fail(NRT_ERROR_UNSUPPORTED, "%s: not supported for %s", nrt_op_name(l->op),
                           nrt_dtype_name(l->compute_dtype));
  bool softmax = l->op == NRT_OP_SOFTMAX || l->op == NRT_OP_LOG_SOFTMAX;
  p.f32acc = p.fdomain && (l->op == NRT_OP_CUMSUM || l->op == NRT_OP_CUMPROD) &&
             (l->operands[0].dtype == NRT_FLOAT16 || l->operands[0].dtype == NRT_BFLOAT16);
  if (l->params[0] != 0 && !(l->params[0] == 1 && (l->op == NRT_OP_CUMPROD || softmax)))
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: p0 = %lld is not a mode of this op", nrt_op_name(l->op),
                           (long long)l->params[0]);
  if (softmax && l->params[0] == 1) {
    p.round_to = l->operands[0].dtype;
    if (p.round_to != NRT_FLOAT16 && p.round_to != NRT_BFLOAT16)
      return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: p0 = 1 needs a float16 or bfloat16 output, got %s",
                             nrt_op_name(l->op), nrt_dtype_name(p.round_to));
    p.fsum = l->op == NRT_OP_SOFTMAX;
    p.lanes = l->params[1];
    p.inner = l->params[2];
    p.threads = l->params[3];
  }
  bool split = l->params[1] != 0 || l->params[2] != 0 || l->params[3] != 0;
  if (split && !(l->op == NRT_OP_SOFTMAX && l->params[0] == 1))
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: p1..p3 are only for SOFTMAX p0 = 1", nrt_op_name(l->op));
  nrt_rows_job j = {.l = l, .ctx = &p, .nops = p.nops, .range = row_range};
  nrt_rows_init(&j.g, l);
  p.count = j.g.count;
  if (split && (p.lanes < 1 || p.inner < 1 || p.threads < 1 || j.g.count % p.inner != 0))
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                           "SOFTMAX: lanes %lld, inner %lld, threads %lld do not describe %lld rows",
                           (long long)p.lanes, (long long)p.inner, (long long)p.threads, (long long)j.g.count);
  if (j.g.count == 0 || j.g.len == 0) return NRT_SUCCESS;
  bool ref = nrt_kernels_reference();
  if (l->params[0] == 1 && l->op == NRT_OP_CUMPROD) {
    if (!nrt_dtype_is_floating(l->operands[0].dtype) || !nrt_dtype_is_floating(l->operands[1].dtype))
      return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "CUMPROD: complex parts (p0 = 1) must be floating");
    j.range = NULL;
    j.row = cumprod_cx_row;
    j.scratch = 2 * (size_t)j.g.len * sizeof(double);
    if (!nrt_rows_run(&j, ROW_GRAIN, !ref))
      return nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY, "CUMPROD: out of host memory for a row of %lld",
                             (long long)j.g.len);
    return NRT_SUCCESS;
  }
  if (p.fdomain && l->operands[0].dtype == NRT_FLOAT64) {
    j.scratch = 3 * (size_t)j.g.len * sizeof(double);
    j.range = row_range_f64;
  } else if (ref) { /* one row at a time on this thread */
    j.range = NULL;
    j.row = row_reference;
  } else {
    j.scratch = 4 * (size_t)j.g.len * (p.fdomain ? sizeof(float) : sizeof(int64_t));
  }
  if (!nrt_rows_run(&j, ROW_GRAIN, !ref))
    return nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for a row of %lld", nrt_op_name(l->op),
                           (long long)j.g.len);
  return NRT_SUCCESS;
}
