/* FOREACH family tests. Every op in every mode and dtype, on a list of
 * tensors whose sizes include empty and one-element tensors and rows that
 * cross the engine's work items, compared three ways:
 *   - the fast path at every ISA level against the one-element-at-a-time
 *     reference path (bit for bit; exp through vmath.h within 2e-6);
 *   - the fast path against the base list's single-tensor kernel run on
 *     each tensor the way the glue launches it (scalars materialised in
 *     float32 with stride 0): bit for bit, NORM within rounding;
 *   - in-place (out = in0) against out-of-place.
 * Then NORM's values and orders, stream launches (the table copied into
 * the task), poisoned inputs, the capture refusal, empty launches and
 * descriptor errors; and the optimizer steps ADAM and SGD, every option on
 * every dtype, against a plain transcription of ATen's fused CPU step. */
#include <stdint.h>
#include <string.h>
#include "testing.h"
#include "kernels/common/common.h"
#include "memory/memory.h"
#include "nrt/capture.h"
#include "nrt/ops/foreach.h"

/* Rows of the test list: empty, one element, block and work-item edges
 * (NRT_BLOCK 256, FE_CHUNK 16384), and a row spanning three items. */
static const int64_t row_sizes[] = {0, 1, 7, 256, 257, 1000, 16384, 16385, 40000, 3, 0, 513};
#define NROWS ((int)(sizeof row_sizes / sizeof row_sizes[0]))

/* Buffers of one list: slot 0 the outputs, 1..3 the inputs in0..in2. */
typedef struct tlist {
  nrt_dtype dt[4];
  void *buf[4][NROWS];
  double scalar[NROWS];
} tlist;

static void *alloc_row(nrt_dtype dt, int64_t n) { return calloc((size_t)n + 1, nrt_dtype_size(dt)); }

static void list_make(tlist *t, nrt_dtype out_dt, nrt_dtype in_dt, const double range[3][2]) {
  t->dt[0] = out_dt;
  for (int s = 1; s < 4; s++) t->dt[s] = in_dt;
  for (int r = 0; r < NROWS; r++) {
    for (int s = 0; s < 4; s++) {
      t->buf[s][r] = alloc_row(t->dt[s], row_sizes[r]);
      if (s == 0) continue;
      for (int64_t i = 0; i < row_sizes[r]; i++)
        nrt_test_put(t->buf[s][r], t->dt[s], i, nrt_test_uniform(range[s - 1][0], range[s - 1][1]));
    }
    t->scalar[r] = nrt_test_uniform(range[1][0], range[1][1]);
  }
}

static void list_free(tlist *t) {
  for (int s = 0; s < 4; s++)
    for (int r = 0; r < NROWS; r++) free(t->buf[s][r]);
}

/* Fresh output buffers (for a second result beside the first). */
static void outs_make(void *outs[NROWS], nrt_dtype dt) {
  for (int r = 0; r < NROWS; r++) outs[r] = alloc_row(dt, row_sizes[r]);
}
static void outs_free(void *outs[NROWS]) {
  for (int r = 0; r < NROWS; r++) free(outs[r]);
}

/* The table over `outs` and the list's inputs (nin of them). */
static void table_fill(int64_t *table, const tlist *t, void *const outs[NROWS], int nin) {
  for (int r = 0; r < NROWS; r++) {
    int64_t *row = table + r * NRT_FOREACH_ROW;
    memset(row, 0, NRT_FOREACH_ROW * sizeof *row);
    row[NRT_FOREACH_NUMEL] = row_sizes[r];
    row[NRT_FOREACH_OUT] = (int64_t)(intptr_t)outs[r];
    for (int k = 0; k < nin; k++) row[NRT_FOREACH_IN0 + k] = (int64_t)(intptr_t)t->buf[1 + k][r];
    memcpy(&row[NRT_FOREACH_SCALAR], &t->scalar[r], sizeof(double));
  }
}

static nrt_launch fe_launch(nrt_op op, nrt_dtype dt, int64_t mode, const int64_t *table, int64_t rows) {
  nrt_launch l = nrt_test_launch(op, dt, 1, &rows, 1, 0);
  l.operands[0].data = (void *)table;
  l.operands[0].dtype = NRT_INT64;
  l.params[0] = mode;
  l.params[1] = dt;
  l.scalars[0].f = 1.0;
  return l;
}

/* ---- the sweep -------------------------------------------------------------------- */

typedef struct fe_spec {
  nrt_op op;
  nrt_op base;      /* the single-tensor op (POW_SCALAR for POW's scalar modes) */
  int nin;          /* inputs in the table in LIST mode */
  int scalar;       /* -1 none, 0 the value (ADDC), 1 y, 2 z (LERP) */
  double range[3][2];
  double alpha;     /* s0 */
  double rtol;      /* fast vs reference */
} fe_spec;

#define VM 2e-6
static const fe_spec specs[] = {
    {NRT_OP(FOREACH_ADD), NRT_OP_ADD, 2, 1, {{-10, 10}, {-10, 10}, {0, 0}}, 0.75, 0},
    {NRT_OP(FOREACH_SUB), NRT_OP_SUB, 2, 1, {{-10, 10}, {-10, 10}, {0, 0}}, -1.5, 0},
    {NRT_OP(FOREACH_MUL), NRT_OP_MUL, 2, 1, {{-10, 10}, {-10, 10}, {0, 0}}, 1, 0},
    {NRT_OP(FOREACH_DIV), NRT_OP_DIV, 2, 1, {{-10, 10}, {0.5, 10}, {0, 0}}, 1, 0},
    {NRT_OP(FOREACH_MAXIMUM), NRT_OP_MAXIMUM, 2, 1, {{-10, 10}, {-10, 10}, {0, 0}}, 1, 0},
    {NRT_OP(FOREACH_MINIMUM), NRT_OP_MINIMUM, 2, 1, {{-10, 10}, {-10, 10}, {0, 0}}, 1, 0},
    {NRT_OP(FOREACH_POW), NRT_OP_POW, 2, 1, {{0.1, 4}, {-3, 3}, {0, 0}}, 1, 0},
    {NRT_OP(FOREACH_RPOW), NRT_OP_POW, 2, 1, {{-3, 3}, {0.1, 4}, {0, 0}}, 1, 0},
    {NRT_OP(FOREACH_ADDCMUL), NRT_OP_ADDCMUL, 3, 0, {{-10, 10}, {-3, 3}, {-3, 3}}, 1, 0},
    {NRT_OP(FOREACH_ADDCDIV), NRT_OP_ADDCDIV, 3, 0, {{-10, 10}, {-3, 3}, {0.5, 3}}, 1, 0},
    {NRT_OP(FOREACH_LERP), NRT_OP_LERP, 3, 2, {{-10, 10}, {-10, 10}, {-0.5, 1.5}}, 1, 0},
    {NRT_OP(FOREACH_SQRT), NRT_OP_SQRT, 1, -1, {{0, 100}, {0, 0}, {0, 0}}, 1, 0},
    {NRT_OP(FOREACH_NEG), NRT_OP_NEG, 1, -1, {{-10, 10}, {0, 0}, {0, 0}}, 1, 0},
    {NRT_OP(FOREACH_RECIPROCAL), NRT_OP_RECIPROCAL, 1, -1, {{0.1, 10}, {0, 0}, {0, 0}}, 1, 0},
    {NRT_OP(FOREACH_ABS), NRT_OP_ABS, 1, -1, {{-10, 10}, {0, 0}, {0, 0}}, 1, 0},
    {NRT_OP(FOREACH_SIGN), NRT_OP_SIGN, 1, -1, {{-3, 3}, {0, 0}, {0, 0}}, 1, 0},
    {NRT_OP(FOREACH_EXP), NRT_OP_EXP, 1, -1, {{-80, 80}, {0, 0}, {0, 0}}, 1, VM},
    {NRT_OP(FOREACH_ZERO), NRT_OP_FILL, 0, -1, {{0, 0}, {0, 0}, {0, 0}}, 1, 0},
    {NRT_OP(FOREACH_COPY), NRT_OP_COPY, 1, -1, {{-100, 100}, {0, 0}, {0, 0}}, 1, 0},
};

static bool close_enough(double got, double want, double rtol, nrt_dtype out) {
  if (got != got && want != want) return true;
  if (got == want) return true;
  if (rtol == 0) return false;
  if (out == NRT_BFLOAT16) rtol += 1.0 / 128;
  if (out == NRT_FLOAT16) rtol += 1.0 / 1024;
  return fabs(got - want) <= rtol * fabs(want) + 10 * rtol;
}

/* The list in outs[] against want[] (dtype dt); returns mismatches. */
static int compare(void *const got[NROWS], void *const want[NROWS], nrt_dtype dt, double rtol, const char *what,
                   const fe_spec *s, int64_t mode) {
  int bad = 0;
  for (int r = 0; r < NROWS && !bad; r++)
    for (int64_t i = 0; i < row_sizes[r] && !bad; i++) {
      double g = nrt_test_get(got[r], dt, i), w = nrt_test_get(want[r], dt, i);
      if (!close_enough(g, w, rtol, dt)) {
        fprintf(stderr, "%s %s (%s, mode %lld) row %d [%lld]: %.9g, want %.9g\n", nrt_op_name(s->op), what,
                nrt_dtype_name(dt), (long long)mode, r, (long long)i, g, w);
        bad = 1;
      }
    }
  return bad;
}

/* The value the glue puts in the scalar operand for row r, and the 0-d
 * tensor of TENSOR mode (a float64 one: the kernel converts it; 0.3 is no
 * bfloat16/float16 value, so converting it to the list's dtype or not
 * shows). */
static const double tensor_value = 0.3;
static double mode_scalar(int64_t mode, const tlist *t, int r, double s1) {
  if (mode == NRT_FOREACH_MODE_ROW) return t->scalar[r];
  if (mode == NRT_FOREACH_MODE_TENSOR) return tensor_value;
  return s1;
}

/* Operand k of a per-tensor launch as the glue gives a scalar: inline
 * float32 *sf, or (a device 0-d tensor) the float64 *sv in memory. */
static void scalar_operand(nrt_launch *l, int k, bool tensor, const float *sf, const double *sv) {
  if (tensor) {
    nrt_test_operand_1d(l, k, sv, NRT_FLOAT64, 0);
    return;
  }
  l->operands[k].inline_slot = 1;
  l->operands[k].data = NULL;
  memcpy(l->inline_values[0].bytes, sf, sizeof *sf);
}

/* Row r the way the glue's per-tensor path launches it: the base op over
 * the row; a Python scalar operand (SCALAR and ROW modes) carried inline
 * as a float32 value, the 0-d tensor of TENSOR mode as a float64 element
 * with stride 0 (the engine converts it as TensorIterator would). */
static void base_row(const fe_spec *s, const tlist *t, int r, void *out, nrt_dtype dt, int64_t mode, double s1) {
  int64_t n = row_sizes[r];
  if (n == 0) return;
  double sv = mode_scalar(mode, t, r, s1);
  float sf = (float)sv;
  bool list = mode == NRT_FOREACH_MODE_LIST, tensor = mode == NRT_FOREACH_MODE_TENSOR;
  nrt_op op = s->base;
  if (s->op == NRT_OP(FOREACH_POW) && !list) op = NRT_OP_POW_SCALAR;
  nrt_launch l = nrt_test_launch(op, dt, 1, &n, 1, nrt_op_ninputs(op));
  nrt_test_operand_1d(&l, 0, out, dt, 1);
  if (op == NRT_OP_FILL) {
    l.scalars[0].f = 0.0;
  } else if (op == NRT_OP_COPY) {
    nrt_test_operand_1d(&l, 1, t->buf[1][r], t->dt[1], 1);
    l.compute_dtype = t->dt[1];
  } else if (op == NRT_OP_POW_SCALAR) {
    nrt_test_operand_1d(&l, 1, t->buf[1][r], dt, 1);
    l.scalars[0].f = sv;
  } else if (s->op == NRT_OP(FOREACH_RPOW)) {
    nrt_test_operand_1d(&l, 1, list ? t->buf[2][r] : &sf, list ? dt : NRT_FLOAT32, list ? 1 : 0);
    nrt_test_operand_1d(&l, 2, t->buf[1][r], dt, 1);
    if (!list) scalar_operand(&l, 1, tensor, &sf, &sv);
  } else {
    for (int k = 0; k < l.ninputs; k++) {
      bool scalar = !list && s->scalar >= 1 && s->scalar == k;
      nrt_test_operand_1d(&l, 1 + k, scalar ? (void *)&sf : t->buf[1 + k][r], scalar ? NRT_FLOAT32 : dt,
                          scalar ? 0 : 1);
      if (scalar) scalar_operand(&l, 1 + k, tensor, &sf, &sv);
    }
    l.scalars[0].f = s->scalar == 0 ? (double)(float)sv : s->alpha;
  }
  CHECK_OK(nrt_launch_run(&l));
}

static int sweep_one(const fe_spec *s, nrt_dtype dt, int64_t mode) {
  bool copy = s->op == NRT_OP(FOREACH_COPY);
  int bad = 0;
  /* COPY converts: a float32 list into dt (and bfloat16 into dt, below). */
  for (int variant = 0; variant < (copy ? 2 : 1) && !bad; variant++) {
    nrt_dtype in_dt = copy ? (variant ? NRT_BFLOAT16 : NRT_FLOAT32) : dt;
    tlist t;
    list_make(&t, dt, in_dt, s->range);
    int nin = s->nin - (mode != NRT_FOREACH_MODE_LIST && s->scalar >= 1 ? 1 : 0);
    /* The table names in0..in2 in order: a replaced y of a binary op leaves in1 unused. */
    int64_t table[NROWS * NRT_FOREACH_ROW];
    void *ref[NROWS], *fast[NROWS], *base[NROWS], *inplace[NROWS];
    outs_make(ref, dt);
    outs_make(fast, dt);
    outs_make(base, dt);
    outs_make(inplace, dt);
    double s1 = 0.6875, tensor = tensor_value;
    nrt_launch l = fe_launch(s->op, dt, mode, table, NROWS);
    l.scalars[0].f = s->alpha;
    l.scalars[1].f = s1;
    l.params[1] = in_dt;
    if (mode == NRT_FOREACH_MODE_TENSOR) {
      l.ninputs = 1;
      l.operands[1].data = &tensor;
      l.operands[1].dtype = NRT_FLOAT64;
    }
    table_fill(table, &t, ref, nin < s->nin && s->scalar == 2 ? 2 : s->nin);
    if (nin < s->nin && s->scalar == 1)
      for (int r = 0; r < NROWS; r++) table[r * NRT_FOREACH_ROW + NRT_FOREACH_IN1] = 0;
    CHECK_OK(nrt_test_run(&l, true));
    for (int r = 0; r < NROWS; r++) base_row(s, &t, r, base[r], dt, mode, s1);
    for (int isa = NRT_ISA_AVX512; isa >= NRT_ISA_BASELINE && !bad; isa--) {
      nrt_kernels_limit_isa((nrt_isa)isa);
      for (int r = 0; r < NROWS; r++) table[r * NRT_FOREACH_ROW + NRT_FOREACH_OUT] = (int64_t)(intptr_t)fast[r];
      CHECK_OK(nrt_launch_run(&l));
      bad |= compare(fast, ref, dt, s->rtol, "fast vs reference", s, mode);
      bad |= compare(fast, base, dt, 0, "fast vs the single-tensor kernel", s, mode);
      /* In place: the output is in0 (COPY and ZERO have no such form to test). */
      if (s->nin >= 1 && !copy && !bad) {
        for (int r = 0; r < NROWS; r++) {
          int64_t *row = table + r * NRT_FOREACH_ROW;
          memcpy(inplace[r], t.buf[1][r], (size_t)row_sizes[r] * nrt_dtype_size(dt));
          row[NRT_FOREACH_OUT] = (int64_t)(intptr_t)inplace[r];
          row[NRT_FOREACH_IN0] = (int64_t)(intptr_t)inplace[r];
        }
        CHECK_OK(nrt_launch_run(&l));
        bad |= compare(inplace, fast, dt, 0, "in place vs out of place", s, mode);
        for (int r = 0; r < NROWS; r++) table[r * NRT_FOREACH_ROW + NRT_FOREACH_IN0] = (int64_t)(intptr_t)t.buf[1][r];
      }
      nrt_kernels_limit_isa(NRT_ISA_BEST);
    }
    outs_free(ref);
    outs_free(fast);
    outs_free(base);
    outs_free(inplace);
    list_free(&t);
  }
  return bad;
}

static void test_sweep(void) {
  static const nrt_dtype dts[] = {NRT_FLOAT32, NRT_BFLOAT16, NRT_FLOAT16};
  int bad = 0;
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
    const fe_spec *s = &specs[i];
    for (int64_t mode = NRT_FOREACH_MODE_LIST; mode <= NRT_FOREACH_MODE_TENSOR; mode++) {
      if (s->scalar < 0 && mode != NRT_FOREACH_MODE_LIST) continue;
      if (s->scalar == 0 && mode == NRT_FOREACH_MODE_LIST) continue;
      for (size_t d = 0; d < 3; d++) bad += sweep_one(s, dts[d], mode);
    }
  }
  CHECK(bad == 0);
}

/* ---- special values --------------------------------------------------------------- */

/* NaN rules and ATen's exact forms on a handful of values, float32. */
static void test_special_values(void) {
  float x[6] = {NAN, -0.0f, 2.0f, -3.0f, INFINITY, 0.5f}, y[6] = {1.0f, 0.0f, NAN, -4.0f, 2.0f, 0.5f};
  float out[6];
  int64_t n = 6;
  int64_t row[NRT_FOREACH_ROW] = {n, (int64_t)(intptr_t)out, (int64_t)(intptr_t)x, (int64_t)(intptr_t)y, 0, 0};
  nrt_launch l = fe_launch(NRT_OP(FOREACH_MAXIMUM), NRT_FLOAT32, NRT_FOREACH_MODE_LIST, row, 1);
  for (int ref = 0; ref < 2; ref++) {
    CHECK_OK(nrt_test_run(&l, ref));
    CHECK(isnan(out[0]) && out[1] == 0.0f && isnan(out[2]) && out[3] == -3.0f && out[4] == INFINITY);
  }
  /* A NaN scalar bound (clamp_min with NaN) makes every element NaN. */
  l.params[0] = NRT_FOREACH_MODE_SCALAR;
  l.scalars[1].f = NAN;
  row[NRT_FOREACH_IN1] = 0;
  CHECK_OK(nrt_launch_run(&l));
  for (int i = 0; i < 6; i++) CHECK(isnan(out[i]));
  /* sign: NaN -> 0, -0 -> 0. */
  l = fe_launch(NRT_OP(FOREACH_SIGN), NRT_FLOAT32, NRT_FOREACH_MODE_LIST, row, 1);
  CHECK_OK(nrt_launch_run(&l));
  CHECK(out[0] == 0.0f && out[1] == 0.0f && !signbit(out[1]) && out[2] == 1.0f && out[3] == -1.0f);
  /* x ** 0.5 is the correctly rounded sqrt, x ** 2 is x * x. */
  float big[1] = {16777217.0f}, r[1];
  int64_t row1[NRT_FOREACH_ROW] = {1, (int64_t)(intptr_t)r, (int64_t)(intptr_t)big, 0, 0, 0};
  l = fe_launch(NRT_OP(FOREACH_POW), NRT_FLOAT32, NRT_FOREACH_MODE_SCALAR, row1, 1);
  l.scalars[1].f = 2.0;
  CHECK_OK(nrt_launch_run(&l));
  CHECK(r[0] == big[0] * big[0]);
  /* lerp with weight 1 gives the end exactly. */
  float a[1] = {0.1f}, b[1] = {123.456f};
  int64_t row2[NRT_FOREACH_ROW] = {1, (int64_t)(intptr_t)r, (int64_t)(intptr_t)a, (int64_t)(intptr_t)b, 0, 0};
  l = fe_launch(NRT_OP(FOREACH_LERP), NRT_FLOAT32, NRT_FOREACH_MODE_SCALAR, row2, 1);
  l.scalars[1].f = 1.0;
  CHECK_OK(nrt_launch_run(&l));
  CHECK(r[0] == b[0]);
}

/* ---- norms --------------------------------------------------------------------------- */

static double norm_double(const void *x, nrt_dtype dt, int64_t n, double p) {
  double s = p == -INFINITY ? INFINITY : 0.0;
  for (int64_t i = 0; i < n; i++) {
    double a = fabs(nrt_test_get(x, dt, i));
    if (p == INFINITY) s = a > s ? a : s;
    else if (p == -INFINITY) s = a < s ? a : s;
    else if (p == 0) s += a != 0;
    else s += pow(a, p);
  }
  if (n == 0) return 0.0;
  if (p == 0 || p == INFINITY || p == -INFINITY) return s;
  return pow(s, 1.0 / p);
}

static void test_norm(void) {
  static const double orders[] = {2.0, 1.0, 0.0, INFINITY, -INFINITY, 3.0, 0.5};
  static const nrt_dtype dts[] = {NRT_FLOAT32, NRT_BFLOAT16, NRT_FLOAT16};
  const double range[3][2] = {{-3, 3}, {0, 0}, {0, 0}};
  for (int d = 0; d < 3; d++)
    for (size_t o = 0; o < sizeof orders / sizeof orders[0]; o++) {
      double p = orders[o];
      for (int out_i = 0; out_i < 2; out_i++) {
        nrt_dtype dt = dts[d], odt = out_i ? NRT_FLOAT32 : dt;
        tlist t;
        list_make(&t, odt, dt, range);
        int64_t table[NROWS * NRT_FOREACH_ROW];
        table_fill(table, &t, t.buf[0], 1);
        nrt_launch l = fe_launch(NRT_OP(FOREACH_NORM), dt, NRT_FOREACH_MODE_LIST, table, NROWS);
        l.scalars[0].f = p;
        l.params[1] = odt;
        double tol = odt == NRT_BFLOAT16 ? 1.0 / 128 : odt == NRT_FLOAT16 ? 1.0 / 1024 : 2e-6;
        for (int pass = 0; pass < 3; pass++) {
          nrt_kernels_set_reference(pass == 2);
          nrt_kernels_limit_isa(pass == 1 ? NRT_ISA_BASELINE : NRT_ISA_BEST);
          CHECK_OK(nrt_launch_run(&l));
          nrt_kernels_limit_isa(NRT_ISA_BEST);
          nrt_kernels_set_reference(false);
          for (int r = 0; r < NROWS; r++) {
            /* the exact norm as the output dtype holds it (float16 overflows for p = 0.5) */
            char stored[8];
            nrt_test_put(stored, odt, 0, norm_double(t.buf[1][r], dt, row_sizes[r], p));
            double want = nrt_test_get(stored, odt, 0);
            double got = nrt_test_get(t.buf[0][r], odt, 0);
            if (!nrt_test_near(got, want, tol)) {
              fprintf(stderr, "NORM p %g %s->%s pass %d row %d: %.9g want %.9g\n", p, nrt_dtype_name(dt),
                      nrt_dtype_name(odt), pass, r, got, want);
              nrt_test_failures++;
            }
          }
        }
        list_free(&t);
      }
    }
  /* NaN propagates through every order; the same launch gives the same bits. */
  float x[40000];
  for (int i = 0; i < 40000; i++) x[i] = (float)nrt_test_uniform(-1, 1);
  float out[2];
  int64_t rows[2 * NRT_FOREACH_ROW] = {40000, (int64_t)(intptr_t)&out[0], (int64_t)(intptr_t)x, 0, 0, 0,
                                       40000, (int64_t)(intptr_t)&out[1], (int64_t)(intptr_t)x, 0, 0, 0};
  nrt_launch l = fe_launch(NRT_OP(FOREACH_NORM), NRT_FLOAT32, NRT_FOREACH_MODE_LIST, rows, 2);
  l.scalars[0].f = 2.0;
  CHECK_OK(nrt_launch_run(&l));
  CHECK(out[0] == out[1]);
  float first = out[0];
  for (int k = 0; k < 5; k++) {
    CHECK_OK(nrt_launch_run(&l));
    CHECK(out[0] == first);
  }
  x[30000] = NAN;
  static const double nan_orders[] = {2.0, 1.0, INFINITY, -INFINITY, 3.0};
  for (size_t o = 0; o < 5; o++) {
    l.scalars[0].f = nan_orders[o];
    CHECK_OK(nrt_launch_run(&l));
    CHECK(isnan(out[0]));
  }
  /* norm of [3, 4] in every order PyTorch names */
  float v[2] = {3.0f, -4.0f};
  int64_t row[NRT_FOREACH_ROW] = {2, (int64_t)(intptr_t)out, (int64_t)(intptr_t)v, 0, 0, 0};
  l = fe_launch(NRT_OP(FOREACH_NORM), NRT_FLOAT32, NRT_FOREACH_MODE_LIST, row, 1);
  const double want[][2] = {{2, 5}, {1, 7}, {0, 2}, {INFINITY, 4}, {-INFINITY, 3}};
  for (int i = 0; i < 5; i++) {
    l.scalars[0].f = want[i][0];
    CHECK_OK(nrt_launch_run(&l));
    CHECK(out[0] == (float)want[i][1]);
  }
}

/* ---- streams ---------------------------------------------------------------------------- */

/* nrt_foreach_launch copies the table into the task: the caller's table is
 * overwritten right after the call, and the launch still sees the old one. */
static void test_stream_launch(void) {
  nrt_stream *s = nrt_test_stream(0, 1);
  nrt_test_gate gate;
  nrt_test_gate_close(s, &gate, "gate");
  enum { N = 3, M = 5000 };
  float *x[N], *y[N];
  for (int r = 0; r < N; r++) {
    x[r] = malloc(M * sizeof(float));
    y[r] = malloc(M * sizeof(float));
    for (int i = 0; i < M; i++) x[r][i] = (float)(r * M + i), y[r][i] = 1.0f;
  }
  int64_t *table = calloc(N * NRT_FOREACH_ROW, sizeof *table);
  for (int r = 0; r < N; r++) {
    int64_t *row = table + r * NRT_FOREACH_ROW;
    row[NRT_FOREACH_NUMEL] = M;
    row[NRT_FOREACH_OUT] = row[NRT_FOREACH_IN0] = (int64_t)(intptr_t)x[r];
    row[NRT_FOREACH_IN1] = (int64_t)(intptr_t)y[r];
  }
  nrt_launch l = fe_launch(NRT_OP(FOREACH_ADD), NRT_FLOAT32, NRT_FOREACH_MODE_LIST, table, N);
  l.scalars[0].f = 2.0;
  CHECK(nrt_foreach_available(s));
  CHECK_OK(nrt_foreach_launch(s, &l));
  memset(table, 0xff, N * NRT_FOREACH_ROW * sizeof *table); /* the task holds its own copy */
  free(table);
  nrt_test_gate_open(&gate);
  CHECK_OK(nrt_stream_synchronize(s));
  int bad = 0;
  for (int r = 0; r < N; r++)
    for (int i = 0; i < M; i++) bad += x[r][i] != (float)(r * M + i) + 2.0f;
  CHECK(bad == 0);
  for (int r = 0; r < N; r++) free(x[r]), free(y[r]);
  /* A launch with no rows is accepted and does nothing. */
  l.sizes[0] = 0;
  l.operands[0].data = NULL;
  CHECK_OK(nrt_foreach_launch(s, &l));
  CHECK_OK(nrt_stream_synchronize(s));
}

/* An input a failed kernel wrote fails the launch and poisons its outputs. */
static void test_poisoned_input(void) {
  nrt_stream *s = nrt_test_stream(0, 0);
  int64_t *a, *zero, *bad_out;
  float *x, *out;
  CHECK_OK(nrt_malloc(4 * sizeof(int64_t), s, (void **)&a));
  CHECK_OK(nrt_malloc(4 * sizeof(int64_t), s, (void **)&zero));
  CHECK_OK(nrt_malloc(4 * sizeof(int64_t), s, (void **)&bad_out));
  CHECK_OK(nrt_malloc(4 * sizeof(float), s, (void **)&x));
  CHECK_OK(nrt_malloc(4 * sizeof(float), s, (void **)&out));
  CHECK_OK(nrt_stream_synchronize(s));
  for (int i = 0; i < 4; i++) a[i] = 6, zero[i] = 0, x[i] = 1.0f;
  nrt_launch d = nrt_test_launch(NRT_OP(DIV_TRUNC), NRT_INT64, 1, (const int64_t[]){4}, 1, 2);
  nrt_test_operand_1d(&d, 0, bad_out, NRT_INT64, 1);
  nrt_test_operand_1d(&d, 1, a, NRT_INT64, 1);
  nrt_test_operand_1d(&d, 2, zero, NRT_INT64, 1);
  CHECK_OK(nrt_launch_kernel(s, &d)); /* integer division by zero fails on the stream */
  CHECK(nrt_stream_synchronize(s) != NRT_SUCCESS);
  CHECK(nrt_memory_is_poisoned(bad_out));
  /* row 1 multiplies x by the poisoned block */
  int64_t px = (int64_t)(intptr_t)x;
  int64_t table[2 * NRT_FOREACH_ROW] = {4, (int64_t)(intptr_t)out, px, px, 0, 0,
                                        4, px, px, (int64_t)(intptr_t)bad_out, 0, 0};
  nrt_launch l = fe_launch(NRT_OP(FOREACH_MUL), NRT_FLOAT32, NRT_FOREACH_MODE_LIST, table, 2);
  CHECK_OK(nrt_foreach_launch(s, &l));
  CHECK_STATUS(nrt_stream_synchronize(s), NRT_ERROR_KERNEL_FAILED);
  CHECK(strstr(nrt_last_error_message(), "row 1") != NULL);
  CHECK(nrt_memory_is_poisoned(out) && nrt_memory_is_poisoned(x));
  CHECK_OK(nrt_free(a));
  CHECK_OK(nrt_free(zero));
  CHECK_OK(nrt_free(bad_out));
  CHECK_OK(nrt_free(x));
  CHECK_OK(nrt_free(out));
  CHECK_OK(nrt_stream_synchronize(s));
}

/* While a capture records the device, foreach launches are refused. */
static void test_capture_refused(void) {
  nrt_stream *s = nrt_test_stream(0, 2);
  nrt_capture *cap = NULL;
  CHECK_OK(nrt_capture_begin(s, &cap));
  CHECK(!nrt_foreach_available(s));
  CHECK(!nrt_foreach_available(nrt_test_stream(0, 3))); /* any stream of the device */
  float x[1] = {1.0f};
  int64_t row[NRT_FOREACH_ROW] = {1, (int64_t)(intptr_t)x, (int64_t)(intptr_t)x, 0, 0, 0};
  nrt_launch l = fe_launch(NRT_OP(FOREACH_NEG), NRT_FLOAT32, NRT_FOREACH_MODE_LIST, row, 1);
  CHECK_STATUS(nrt_foreach_launch(s, &l), NRT_ERROR_UNSUPPORTED);
  CHECK(strstr(nrt_last_error_message(), "graph capture") != NULL);
  nrt_capture_abort(cap);
  CHECK(nrt_foreach_available(s));
  CHECK(x[0] == 1.0f);
}

/* ---- errors ------------------------------------------------------------------------------ */

static void test_errors(void) {
  float x[4] = {0};
  int64_t row[NRT_FOREACH_ROW] = {4, (int64_t)(intptr_t)x, (int64_t)(intptr_t)x, (int64_t)(intptr_t)x, 0, 0};
  nrt_launch l = fe_launch(NRT_OP(FOREACH_ADD), NRT_FLOAT32, NRT_FOREACH_MODE_LIST, row, 1);
  CHECK_OK(nrt_launch_run(&l));
  CHECK(strcmp(nrt_op_name(NRT_OP(FOREACH_ADD)), "FOREACH_ADD") == 0);
  CHECK(nrt_op_kind(NRT_OP(FOREACH_NORM)) == NRT_KIND_FOREACH);
  CHECK(strcmp(nrt_op_name((nrt_op)(NRT_OP_FOREACH_END_)), "invalid") == 0);

  nrt_launch b = l;
  b.params[0] = 7;
  CHECK_STATUS(nrt_launch_run(&b), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_PREFIX("FOREACH_ADD: mode p0 = 7");
  b = l;
  b.op = NRT_OP(FOREACH_ADDCMUL); /* the value is a scalar: LIST is not its mode */
  CHECK_STATUS(nrt_launch_run(&b), NRT_ERROR_INVALID_ARGUMENT);
  b = l;
  b.op = NRT_OP(FOREACH_SQRT);
  b.params[0] = NRT_FOREACH_MODE_SCALAR;
  CHECK_STATUS(nrt_launch_run(&b), NRT_ERROR_INVALID_ARGUMENT);
  b = l;
  b.params[0] = NRT_FOREACH_MODE_TENSOR; /* without its operand */
  CHECK_STATUS(nrt_launch_run(&b), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_PREFIX("FOREACH_ADD: TENSOR mode needs operand 1");
  b = l;
  b.compute_dtype = NRT_INT32;
  CHECK_STATUS(nrt_launch_run(&b), NRT_ERROR_UNSUPPORTED);
  b = l;
  b.operands[0].dtype = NRT_INT32;
  CHECK_STATUS(nrt_launch_run(&b), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_PREFIX("FOREACH_ADD: operand 0 must be the INT64 list table");
  b = l;
  b.ndim = 2;
  b.sizes[1] = 1;
  CHECK_STATUS(nrt_launch_run(&b), NRT_ERROR_INVALID_ARGUMENT);
  /* rows: a NULL input, a negative count; an empty row needs no pointers */
  row[NRT_FOREACH_IN1] = 0;
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_MSG("FOREACH_ADD: row 0 has a NULL input pointer");
  row[NRT_FOREACH_NUMEL] = -1;
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_MSG("FOREACH_ADD: row 0 has -1 elements");
  memset(row, 0, sizeof row);
  CHECK_OK(nrt_launch_run(&l));
  /* COPY converts only between the 16/32-bit floats; ZERO takes any real dtype. */
  int64_t crow[NRT_FOREACH_ROW] = {4, (int64_t)(intptr_t)x, (int64_t)(intptr_t)x, 0, 0, 0};
  b = fe_launch(NRT_OP(FOREACH_COPY), NRT_INT32, NRT_FOREACH_MODE_LIST, crow, 1);
  b.params[1] = NRT_FLOAT32;
  CHECK_STATUS(nrt_launch_run(&b), NRT_ERROR_UNSUPPORTED);
  b.params[1] = NRT_INT32;
  CHECK_OK(nrt_launch_run(&b));
  b = fe_launch(NRT_OP(FOREACH_ZERO), NRT_INT32, NRT_FOREACH_MODE_LIST, crow, 1);
  x[0] = 5;
  CHECK_OK(nrt_launch_run(&b));
  CHECK(x[0] == 0);
  /* the enqueue checks the same, synchronously */
  nrt_stream *s = nrt_test_stream(0, 0);
  b = fe_launch(NRT_OP(FOREACH_ADD), NRT_FLOAT32, 9, crow, 1);
  CHECK_STATUS(nrt_foreach_launch(s, &b), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_foreach_launch(NULL, &l), NRT_ERROR_INVALID_ARGUMENT);
  b = fe_launch(NRT_OP_ADD, NRT_FLOAT32, 0, crow, 1);
  CHECK_STATUS(nrt_foreach_launch(s, &b), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_OK(nrt_stream_synchronize(s));
}

/* ---- optimizer steps ------------------------------------------------------------------ */

/* One step's options; the input tensors' values beside them. */
typedef struct opt_case {
  nrt_op op;
  unsigned flags; /* NRT_FOREACH_OPTIM_*, inputs included */
  double lr, beta1, beta2, wd, eps, momentum, dampening;
  float lr_value, grad_scale, found_inf;
} opt_case;

/* A parameter list: buffers per (slot, row), slots param, grad, state0..2
 * (all allocated, used or not), and each row's step count. */
typedef struct opt_list {
  nrt_dtype dt;
  void *buf[5][NROWS];
  float step[NROWS];
} opt_list;

static bool opt_adam(const opt_case *c) { return c->op == NRT_OP(FOREACH_ADAM); }
static bool opt_has(const opt_case *c, unsigned f) { return (c->flags & f) != 0; }

static void opt_make(opt_list *t, nrt_dtype dt, double grad_scale) {
  static const double range[5][2] = {{-1, 1}, {-1, 1}, {-0.1, 0.1}, {0, 0.01}, {0, 0.01}};
  t->dt = dt;
  for (int r = 0; r < NROWS; r++) {
    for (int s = 0; s < 5; s++) {
      t->buf[s][r] = alloc_row(dt, row_sizes[r]);
      for (int64_t i = 0; i < row_sizes[r]; i++)
        nrt_test_put(t->buf[s][r], dt, i, nrt_test_uniform(range[s][0], range[s][1]) * (s == 1 ? grad_scale : 1));
    }
    t->step[r] = r == 3 ? 1000.0f : (float)(1 + r % 5);
  }
  /* non-finite gradients and a negative zero: both paths must agree on them */
  nrt_test_put(t->buf[1][5], dt, 3, NAN);
  nrt_test_put(t->buf[1][5], dt, 4, INFINITY);
  nrt_test_put(t->buf[1][8], dt, 39999, -0.0);
}

static void opt_clone(opt_list *dst, const opt_list *src) {
  *dst = *src;
  for (int s = 0; s < 5; s++)
    for (int r = 0; r < NROWS; r++) {
      size_t bytes = ((size_t)row_sizes[r] + 1) * nrt_dtype_size(src->dt);
      dst->buf[s][r] = malloc(bytes);
      memcpy(dst->buf[s][r], src->buf[s][r], bytes);
    }
}

static void opt_free(opt_list *t) {
  for (int s = 0; s < 5; s++)
    for (int r = 0; r < NROWS; r++) free(t->buf[s][r]);
}

/* Whether slot s (0 param .. 4 state2) takes part in the step. */
static bool opt_slot_used(const opt_case *c, int s) {
  if (s <= 1) return true;
  if (opt_adam(c)) return s == 2 || s == 3 || opt_has(c, NRT_FOREACH_OPTIM_AMSGRAD);
  return s == 2 && c->momentum != 0;
}

static void opt_table(int64_t *table, const opt_list *t, const opt_case *c) {
  for (int r = 0; r < NROWS; r++) {
    int64_t *row = table + r * NRT_FOREACH_OPTIM_ROW;
    memset(row, 0, NRT_FOREACH_OPTIM_ROW * sizeof *row);
    row[NRT_FOREACH_OPTIM_NUMEL] = row_sizes[r];
    for (int s = 0; s < 5; s++)
      if (opt_slot_used(c, s)) row[NRT_FOREACH_OPTIM_PARAM + s] = (int64_t)(intptr_t)t->buf[s][r];
    if (opt_adam(c)) row[NRT_FOREACH_OPTIM_STEP] = (int64_t)(intptr_t)&t->step[r];
  }
}

/* The launch over `table`; inputs[] holds the input tensors' values. */
static nrt_launch opt_launch(const opt_case *c, nrt_dtype dt, const int64_t *table, int64_t rows, float inputs[3]) {
  nrt_launch l = nrt_test_launch(c->op, dt, 1, &rows, 1, 0);
  l.operands[0].data = (void *)table;
  l.operands[0].dtype = NRT_INT64;
  l.params[0] = c->flags;
  l.params[1] = NRT_FLOAT32;
  bool lr_tensor = opt_has(c, NRT_FOREACH_OPTIM_LR_TENSOR);
  l.scalars[0].f = lr_tensor ? 99.0 : c->lr; /* ignored with a tensor */
  if (opt_adam(c)) {
    l.scalars[1].f = c->beta1;
    l.scalars[2].f = c->beta2;
    l.scalars[3].f = c->wd;
    memcpy(&l.aux[0], &c->eps, sizeof c->eps);
  } else {
    l.scalars[1].f = c->wd;
    l.scalars[2].f = c->momentum;
    l.scalars[3].f = c->dampening;
  }
  const unsigned in_flags[3] = {NRT_FOREACH_OPTIM_LR_TENSOR, NRT_FOREACH_OPTIM_GRAD_SCALE, NRT_FOREACH_OPTIM_FOUND_INF};
  const float values[3] = {c->lr_value, c->grad_scale, c->found_inf};
  for (int i = 0; i < 3; i++) {
    if (!opt_has(c, in_flags[i])) continue;
    inputs[i] = values[i];
    int k = 1 + l.ninputs++;
    l.operands[k].data = &inputs[i];
    l.operands[k].dtype = NRT_FLOAT32;
  }
  return l;
}

static float ref_maxf(float a, float b) { return isnan(a) ? a : isnan(b) ? b : a > b ? a : b; }

/* The plain reference: ATen's fused CPU step written out element by element
 * (FusedAdamKernel.cpp / FusedSGDKernel.cpp, their scalar loops; the max of
 * amsgrad propagates NaN like their vector loops). */
static void opt_reference(const opt_case *c, opt_list *t) {
  if (opt_has(c, NRT_FOREACH_OPTIM_FOUND_INF) && c->found_inf == 1.0f) return;
  nrt_dtype dt = t->dt;
  double lr = opt_has(c, NRT_FOREACH_OPTIM_LR_TENSOR) ? (double)c->lr_value : c->lr;
  bool scaled = opt_has(c, NRT_FOREACH_OPTIM_GRAD_SCALE), maximize = opt_has(c, NRT_FOREACH_OPTIM_MAXIMIZE);
  for (int r = 0; r < NROWS; r++) {
    void **b = (void *[5]){t->buf[0][r], t->buf[1][r], t->buf[2][r], t->buf[3][r], t->buf[4][r]};
    double step = t->step[r];
    double bc1 = 1 - pow(c->beta1, step), bc2 = 1 - pow(c->beta2, step);
    for (int64_t i = 0; i < row_sizes[r]; i++) {
      float p = (float)nrt_test_get(b[0], dt, i), g = (float)nrt_test_get(b[1], dt, i);
      if (scaled) {
        g = g / c->grad_scale;
        nrt_test_put(b[1], dt, i, g);
      }
      if (maximize) g = -g;
      if (opt_adam(c)) {
        if (c->wd != 0) {
          if (opt_has(c, NRT_FOREACH_OPTIM_ADAMW)) p = p * (float)(1 - lr * c->wd);
          else g += p * (float)c->wd;
        }
        float w = (float)(1 - c->beta1);
        float m = (float)nrt_test_get(b[2], dt, i);
        if (fabsf(w) < 0.5f) m = m + w * (g - m);
        else m = g - (g - m) * (1.0f - w);
        float v = (float)nrt_test_get(b[3], dt, i);
        v = v * (float)c->beta2;
        v = v + (float)(1 - c->beta2) * g * g;
        float denom;
        if (opt_has(c, NRT_FOREACH_OPTIM_AMSGRAD)) {
          float vm = ref_maxf((float)nrt_test_get(b[4], dt, i), v);
          nrt_test_put(b[4], dt, i, vm);
          denom = sqrtf(vm) / (float)sqrt(bc2) + (float)c->eps;
        } else {
          denom = sqrtf(v) / (float)sqrt(bc2) + (float)c->eps;
        }
        p = p - (float)(lr / bc1) * m / denom;
        nrt_test_put(b[2], dt, i, m);
        nrt_test_put(b[3], dt, i, v);
      } else {
        if (c->wd != 0) g += p * (float)c->wd;
        if (c->momentum != 0) {
          float buf = opt_has(c, NRT_FOREACH_OPTIM_FIRST_STEP)
                          ? g
                          : (float)nrt_test_get(b[2], dt, i) * (float)c->momentum + g * (float)(1 - c->dampening);
          nrt_test_put(b[2], dt, i, buf);
          if (opt_has(c, NRT_FOREACH_OPTIM_NESTEROV)) g += buf * (float)c->momentum;
          else g = buf;
        }
        p = p - g * (float)lr;
      }
      nrt_test_put(b[0], dt, i, p);
    }
  }
}

/* Every element of every slot the same (NaN meets NaN). */
static int opt_compare(const opt_list *got, const opt_list *want, const char *what, const opt_case *c) {
  for (int s = 0; s < 5; s++)
    for (int r = 0; r < NROWS; r++)
      for (int64_t i = 0; i < row_sizes[r]; i++) {
        double g = nrt_test_get(got->buf[s][r], got->dt, i), w = nrt_test_get(want->buf[s][r], want->dt, i);
        if (!nrt_test_same(g, w)) {
          fprintf(stderr, "%s %s %s flags 0x%x wd %g beta1 %g mom %g: slot %d row %d [%lld] = %.9g, want %.9g\n",
                  nrt_op_name(c->op), nrt_dtype_name(got->dt), what, c->flags, c->wd, c->beta1, c->momentum, s, r,
                  (long long)i, g, w);
          nrt_test_failures++;
          return 1;
        }
      }
  return 0;
}

/* One case on one dtype: the plain reference, the kernel's reference path
 * and its fast path at every ISA level, all bit for bit. */
static int opt_run_case(const opt_case *c, nrt_dtype dt) {
  opt_list base, want, got;
  opt_make(&base, dt, opt_has(c, NRT_FOREACH_OPTIM_GRAD_SCALE) ? c->grad_scale : 1.0);
  opt_clone(&want, &base);
  opt_reference(c, &want);
  int64_t table[NROWS * NRT_FOREACH_OPTIM_ROW];
  float inputs[3];
  int bad = 0;
  for (int pass = 0; pass < 3 && !bad; pass++) {
    opt_clone(&got, &base);
    opt_table(table, &got, c);
    nrt_launch l = opt_launch(c, dt, table, NROWS, inputs);
    nrt_kernels_limit_isa(pass == 2 ? NRT_ISA_BASELINE : NRT_ISA_BEST);
    CHECK_OK(nrt_test_run(&l, pass == 0));
    nrt_kernels_limit_isa(NRT_ISA_BEST);
    bad = opt_compare(&got, &want, pass == 0 ? "reference path" : pass == 1 ? "fast path" : "baseline ISA", c);
    opt_free(&got);
  }
  opt_free(&want);
  opt_free(&base);
  return bad;
}

/* Every option of both steps, on float32, bfloat16 and float16. The input
 * tensors rotate through the cases: none; grad_scale; a tensor lr with
 * grad_scale and a clear found_inf; found_inf set (nothing may change). */
static void opt_with_inputs(opt_case *c, int variant) {
  c->lr_value = 3e-3f;
  c->grad_scale = 1024.0f;
  c->found_inf = 0.0f;
  switch (variant % 4) {
  case 1: c->flags |= NRT_FOREACH_OPTIM_GRAD_SCALE; break;
  case 2:
    c->flags |= NRT_FOREACH_OPTIM_LR_TENSOR | NRT_FOREACH_OPTIM_GRAD_SCALE | NRT_FOREACH_OPTIM_FOUND_INF;
    break;
  case 3:
    c->flags |= NRT_FOREACH_OPTIM_GRAD_SCALE | NRT_FOREACH_OPTIM_FOUND_INF;
    c->found_inf = 1.0f;
    break;
  default: break;
  }
}

static void test_optim(void) {
  const nrt_dtype dts[3] = {NRT_FLOAT32, NRT_BFLOAT16, NRT_FLOAT16};
  int cases = 0, bad = 0;
  for (int d = 0; d < 3; d++) {
    for (unsigned bits = 0; bits < 32; bits++) { /* adamw, amsgrad, maximize, weight decay, beta1 */
      opt_case c = {NRT_OP(FOREACH_ADAM), 0, 1e-2, 0.9, 0.999, 0.0, 1e-8, 0, 0, 0, 0, 0};
      if (bits & 1) c.flags |= NRT_FOREACH_OPTIM_ADAMW;
      if (bits & 2) c.flags |= NRT_FOREACH_OPTIM_AMSGRAD;
      if (bits & 4) c.flags |= NRT_FOREACH_OPTIM_MAXIMIZE;
      if (bits & 8) c.wd = 0.1;
      if (bits & 16) c.beta1 = 0.3, c.beta2 = 0.5; /* w = 0.7: the other lerp form */
      opt_with_inputs(&c, (int)bits + d);
      bad += opt_run_case(&c, dts[d]);
      cases++;
    }
    for (unsigned bits = 0; bits < 64; bits++) { /* momentum, dampening, nesterov, first step, decay, maximize */
      opt_case c = {NRT_OP(FOREACH_SGD), 0, 0.1, 0, 0, 0.0, 0, 0.0, 0.0, 0, 0, 0};
      if (bits & 1) c.momentum = 0.9;
      if (bits & 2) c.dampening = 0.25;
      if (bits & 4) c.flags |= NRT_FOREACH_OPTIM_NESTEROV;
      if (bits & 8) c.flags |= NRT_FOREACH_OPTIM_FIRST_STEP;
      if (bits & 16) c.wd = 0.01;
      if (bits & 32) c.flags |= NRT_FOREACH_OPTIM_MAXIMIZE;
      opt_with_inputs(&c, (int)(bits >> 1) + d);
      bad += opt_run_case(&c, dts[d]);
      cases++;
    }
  }
  CHECK(cases == 3 * 96 && bad == 0);
}

/* The stream path: the 7-wide table travels in the task; a found_inf the
 * launch reads when it runs (set after the enqueue) skips the step; a
 * poisoned input fails the launch and poisons what it would write. */
static void test_optim_stream(void) {
  nrt_stream *s = nrt_test_stream(0, 1);
  opt_case c = {NRT_OP(FOREACH_ADAM), NRT_FOREACH_OPTIM_ADAMW | NRT_FOREACH_OPTIM_LR_TENSOR |
                NRT_FOREACH_OPTIM_FOUND_INF, 0, 0.9, 0.999, 0.01, 1e-8, 0, 0, 2e-3f, 0, 0};
  opt_list base, want, got;
  opt_make(&base, NRT_FLOAT32, 1.0);
  opt_clone(&want, &base);
  opt_reference(&c, &want);
  for (int skip = 0; skip < 2; skip++) {
    opt_clone(&got, &base);
    int64_t *table = calloc(NROWS * NRT_FOREACH_OPTIM_ROW, sizeof *table);
    opt_table(table, &got, &c);
    float *inputs;
    CHECK_OK(nrt_malloc(3 * sizeof(float), s, (void **)&inputs));
    CHECK_OK(nrt_stream_synchronize(s));
    nrt_launch l = opt_launch(&c, NRT_FLOAT32, table, NROWS, inputs);
    l.operands[1].data = &inputs[0]; /* device copies of the lr and found_inf tensors */
    l.operands[2].data = &inputs[2];
    nrt_test_gate gate;
    nrt_test_gate_close(s, &gate, "gate");
    CHECK_OK(nrt_foreach_launch(s, &l));
    memset(table, 0xff, NROWS * NRT_FOREACH_OPTIM_ROW * sizeof *table);
    free(table);
    inputs[0] = c.lr_value;
    inputs[2] = skip ? 1.0f : 0.0f;
    nrt_test_gate_open(&gate);
    CHECK_OK(nrt_stream_synchronize(s));
    CHECK(opt_compare(&got, skip ? &base : &want, skip ? "stream, skipped" : "stream", &c) == 0);
    CHECK_OK(nrt_free(inputs));
    opt_free(&got);
  }
  opt_free(&want);
  opt_free(&base);

  /* a poisoned found_inf */
  int64_t *a, *zero, *bad_out;
  float *p, *g, *m, *v, step = 1.0f;
  CHECK_OK(nrt_malloc(4 * sizeof(int64_t), s, (void **)&a));
  CHECK_OK(nrt_malloc(4 * sizeof(int64_t), s, (void **)&zero));
  CHECK_OK(nrt_malloc(4 * sizeof(int64_t), s, (void **)&bad_out));
  float **ts[4] = {&p, &g, &m, &v};
  for (int k = 0; k < 4; k++) CHECK_OK(nrt_malloc(4 * sizeof(float), s, (void **)ts[k]));
  CHECK_OK(nrt_stream_synchronize(s));
  for (int i = 0; i < 4; i++) a[i] = 6, zero[i] = 0, p[i] = g[i] = m[i] = v[i] = 1.0f;
  nrt_launch d = nrt_test_launch(NRT_OP(DIV_TRUNC), NRT_INT64, 1, (const int64_t[]){4}, 1, 2);
  nrt_test_operand_1d(&d, 0, bad_out, NRT_INT64, 1);
  nrt_test_operand_1d(&d, 1, a, NRT_INT64, 1);
  nrt_test_operand_1d(&d, 2, zero, NRT_INT64, 1);
  CHECK_OK(nrt_launch_kernel(s, &d));
  CHECK(nrt_stream_synchronize(s) != NRT_SUCCESS);
  int64_t row[NRT_FOREACH_OPTIM_ROW] = {4, (int64_t)(intptr_t)p, (int64_t)(intptr_t)g, (int64_t)(intptr_t)m,
                                        (int64_t)(intptr_t)v, 0, (int64_t)(intptr_t)&step};
  opt_case pc = {NRT_OP(FOREACH_ADAM), NRT_FOREACH_OPTIM_FOUND_INF, 1e-3, 0.9, 0.999, 0, 1e-8, 0, 0, 0, 0, 0};
  float in[3];
  nrt_launch l = opt_launch(&pc, NRT_FLOAT32, row, 1, in);
  l.operands[1].data = bad_out;
  CHECK_OK(nrt_foreach_launch(s, &l));
  CHECK_STATUS(nrt_stream_synchronize(s), NRT_ERROR_KERNEL_FAILED);
  CHECK(nrt_memory_is_poisoned(p) && nrt_memory_is_poisoned(m) && nrt_memory_is_poisoned(v));
  CHECK(!nrt_memory_is_poisoned(g)); /* read only: no grad_scale */
  CHECK_OK(nrt_free(a));
  CHECK_OK(nrt_free(zero));
  CHECK_OK(nrt_free(bad_out));
  for (int k = 0; k < 4; k++) CHECK_OK(nrt_free(*ts[k]));
  CHECK_OK(nrt_stream_synchronize(s));
}

static void test_optim_errors(void) {
  float x[4] = {0}, step = 1.0f, in[3];
  int64_t px = (int64_t)(intptr_t)x;
  int64_t row[NRT_FOREACH_OPTIM_ROW] = {4, px, px, px, px, 0, (int64_t)(intptr_t)&step};
  opt_case c = {NRT_OP(FOREACH_ADAM), 0, 1e-3, 0.9, 0.999, 0, 1e-8, 0, 0, 0, 0, 0};
  nrt_launch l = opt_launch(&c, NRT_FLOAT32, row, 1, in), b;
  CHECK_OK(nrt_launch_run(&l));
  CHECK(strcmp(nrt_op_name(NRT_OP(FOREACH_ADAM)), "FOREACH_ADAM") == 0);
  CHECK(nrt_foreach_row_width(NRT_OP(FOREACH_SGD)) == NRT_FOREACH_OPTIM_ROW);
  CHECK(nrt_foreach_row_width(NRT_OP(FOREACH_ADD)) == NRT_FOREACH_ROW);
  b = l;
  b.op = NRT_OP(FOREACH_SGD);
  b.params[0] = NRT_FOREACH_OPTIM_AMSGRAD; /* not an SGD flag */
  CHECK_STATUS(nrt_launch_run(&b), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_PREFIX("FOREACH_SGD: flags p0 = 2 has bits");
  b = l;
  b.params[0] = NRT_FOREACH_OPTIM_GRAD_SCALE; /* without its tensor */
  CHECK_STATUS(nrt_launch_run(&b), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_MSG("FOREACH_ADAM: the flags name 1 input tensors, the launch has 0");
  b.ninputs = 1;
  b.operands[1].data = in;
  b.operands[1].dtype = NRT_FLOAT64;
  CHECK_STATUS(nrt_launch_run(&b), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_MSG("FOREACH_ADAM: grad_scale must be a one-element FLOAT32 tensor");
  b = l;
  b.compute_dtype = NRT_FLOAT64;
  CHECK_STATUS(nrt_launch_run(&b), NRT_ERROR_UNSUPPORTED);
  b = l;
  b.params[0] = NRT_FOREACH_OPTIM_AMSGRAD; /* state2 is NULL */
  CHECK_STATUS(nrt_launch_run(&b), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_MSG("FOREACH_ADAM: row 0 has a NULL state2 pointer");
  row[NRT_FOREACH_OPTIM_STEP] = 0;
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_MSG("FOREACH_ADAM: row 0 has a NULL step pointer");
  /* SGD without momentum needs no buffer, nor a step; an empty row no pointers */
  b = l;
  b.op = NRT_OP(FOREACH_SGD);
  b.scalars[2].f = 0.0; /* the momentum */
  row[NRT_FOREACH_OPTIM_STATE0] = row[NRT_FOREACH_OPTIM_STATE1] = 0;
  CHECK_OK(nrt_launch_run(&b));
  b.scalars[2].f = 0.9;
  CHECK_STATUS(nrt_launch_run(&b), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_MSG("FOREACH_SGD: row 0 has a NULL state0 pointer");
  memset(row, 0, sizeof row);
  CHECK_OK(nrt_launch_run(&l));
  row[0] = -2;
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_MSG("FOREACH_ADAM: row 0 has -2 elements");
}

int main(void) {
  printf("test_kernels_foreach\n");
  RUN_TEST(test_sweep);
  RUN_TEST(test_special_values);
  RUN_TEST(test_norm);
  RUN_TEST(test_stream_launch);
  RUN_TEST(test_poisoned_input);
  RUN_TEST(test_capture_refused);
  RUN_TEST(test_errors);
  RUN_TEST(test_optim);
  RUN_TEST(test_optim_stream);
  RUN_TEST(test_optim_errors);
  return TEST_RESULT();
}
