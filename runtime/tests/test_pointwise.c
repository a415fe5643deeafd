/* Pointwise kernel tests.
 *
 * 1. A sweep: every pointwise op, on random inputs, through the fast path
 *    (collapsing, blocks, threads, in-place buffers, AVX-512 builds) and
 *    through the one-element-at-a-time reference path, over odd sizes and
 *    layouts (transposed, broadcast, negative and gapped strides,
 *    TensorIterator's fastest-first dim order) and several dtypes.
 * 2. Known values: integer division and shift semantics, NaN rules,
 *    rounding, conversions, activations against numbers PyTorch 2.13
 *    printed for the same inputs. */
#include <stdint.h>
#include <string.h>
#include "testing.h"
#include "kernels/common/common.h"

/* ---- helpers ---------------------------------------------------------------- */

/* Runs a launch on both paths; returns the fast path's status. */
static nrt_status run_both(nrt_launch *l, nrt_status *ref_status) {
  nrt_kernels_set_reference(true);
  *ref_status = nrt_launch_run(l);
  nrt_kernels_set_reference(false);
  return nrt_launch_run(l);
}

/* ---- the sweep ------------------------------------------------------------------ */

typedef struct op_spec {
  nrt_op op;
  double lo, hi;      /* input range */
  bool fl, in;        /* float / integer domain supported */
  double rtol;        /* fast vs reference in float32: 0 = identical */
  double s[3];
  int64_t p[2];
} op_spec;

#define VM 2e-6 /* ops whose fast path uses vmath.h instead of libm */

static const op_spec specs[] = {
    {NRT_OP_COPY, -100, 100, true, true, 0, {0}, {0}},
    {NRT_OP_FILL, 0, 0, true, true, 0, {2.5}, {0}},
    {NRT_OP_NEG, -10, 10, true, true, 0, {0}, {0}},
    {NRT_OP_ABS, -10, 10, true, true, 0, {0}, {0}},
    {NRT_OP_SIGN, -3, 3, true, true, 0, {0}, {0}},
    {NRT_OP_RECIPROCAL, 0.1, 10, true, false, 0, {0}, {0}},
    {NRT_OP_SQRT, 0, 100, true, false, 0, {0}, {0}},
    {NRT_OP_RSQRT, 0.01, 100, true, false, 0, {0}, {0}},
    {NRT_OP_EXP, -80, 80, true, false, VM, {0}, {0}},
    {NRT_OP_EXP2, -20, 20, true, false, 0, {0}, {0}},
    {NRT_OP_EXPM1, -5, 5, true, false, 0, {0}, {0}},
    {NRT_OP_LOG, 1e-30, 1e30, true, false, VM, {0}, {0}},
    {NRT_OP_LOG2, 0.01, 100, true, false, 0, {0}, {0}},
    {NRT_OP_LOG10, 0.01, 100, true, false, 0, {0}, {0}},
    {NRT_OP_LOG1P, -0.9, 100, true, false, 0, {0}, {0}},
    {NRT_OP_SIN, -10, 10, true, false, 0, {0}, {0}},
    {NRT_OP_COS, -10, 10, true, false, 0, {0}, {0}},
    {NRT_OP_TAN, -1.5, 1.5, true, false, 0, {0}, {0}},
    {NRT_OP_ASIN, -1, 1, true, false, 0, {0}, {0}},
    {NRT_OP_ACOS, -1, 1, true, false, 0, {0}, {0}},
    {NRT_OP_ATAN, -10, 10, true, false, 0, {0}, {0}},
    {NRT_OP_SINH, -5, 5, true, false, 0, {0}, {0}},
    {NRT_OP_COSH, -5, 5, true, false, 0, {0}, {0}},
    {NRT_OP_TANH, -10, 10, true, false, VM, {0}, {0}},
    {NRT_OP_ASINH, -10, 10, true, false, 0, {0}, {0}},
    {NRT_OP_ACOSH, 1, 10, true, false, 0, {0}, {0}},
    {NRT_OP_ATANH, -0.99, 0.99, true, false, 0, {0}, {0}},
    {NRT_OP_ERF, -3, 3, true, false, 0, {0}, {0}},
    {NRT_OP_ERFC, -3, 3, true, false, 0, {0}, {0}},
    {NRT_OP_ERFINV, -0.999, 0.999, true, false, 0, {0}, {0}},
    {NRT_OP_CEIL, -10, 10, true, true, 0, {0}, {0}},
    {NRT_OP_FLOOR, -10, 10, true, true, 0, {0}, {0}},
    {NRT_OP_ROUND, -10, 10, true, true, 0, {0}, {0}},
    {NRT_OP_TRUNC, -10, 10, true, true, 0, {0}, {0}},
    {NRT_OP_FRAC, -10, 10, true, false, 0, {0}, {0}},
    {NRT_OP_SIGMOID, -20, 20, true, false, VM, {0}, {0}},
    {NRT_OP_LOGIT, 0.01, 0.99, true, false, 0, {0.05}, {1}},
    {NRT_OP_RELU, -5, 5, true, true, 0, {0}, {0}},
    {NRT_OP_GELU, -6, 6, true, false, VM, {0}, {0}},
    {NRT_OP_GELU, -6, 6, true, false, VM, {0}, {1}},
    {NRT_OP_SILU, -20, 20, true, false, VM, {0}, {0}},
    {NRT_OP_MISH, -10, 10, true, false, 0, {0}, {0}},
    {NRT_OP_SOFTPLUS, -10, 10, true, false, 0, {2.0, 5.0}, {0}},
    {NRT_OP_ELU, -5, 5, true, false, 0, {1.5, 1.0, 1.0}, {0}},
    {NRT_OP_LEAKY_RELU, -5, 5, true, false, 0, {0.01}, {0}},
    {NRT_OP_HARDSIGMOID, -5, 5, true, false, 0, {0}, {0}},
    {NRT_OP_HARDSWISH, -5, 5, true, false, 0, {0}, {0}},
    {NRT_OP_HARDTANH, -3, 3, true, true, 0, {-1, 1}, {0}},
    {NRT_OP_LOGICAL_NOT, -2, 2, true, true, 0, {0}, {0}},
    {NRT_OP_BITWISE_NOT, -100, 100, false, true, 0, {0}, {0}},
    {NRT_OP_ISNAN, -1, 1, true, true, 0, {0}, {0}},
    {NRT_OP_ISINF, -1, 1, true, true, 0, {0}, {0}},
    {NRT_OP_ISFINITE, -1, 1, true, true, 0, {0}, {0}},
    {NRT_OP_NAN_TO_NUM, -1, 1, true, true, 0, {0, 100, -100}, {0}},
    {NRT_OP_CLAMP_SCALAR, -5, 5, true, true, 0, {-1, 2}, {1, 1}},
    {NRT_OP_POW_SCALAR, 0.1, 3, true, true, 0, {2.5}, {0}},
    {NRT_OP_POW_SCALAR, -3, 3, true, true, 0, {2}, {0}},
    {NRT_OP_RPOW_SCALAR, -3, 3, true, true, 0, {2}, {0}},
    {NRT_OP_ADD, -100, 100, true, true, 0, {2}, {0}},
    {NRT_OP_SUB, -100, 100, true, true, 0, {1}, {0}},
    {NRT_OP_MUL, -100, 100, true, true, 0, {0}, {0}},
    {NRT_OP_DIV, 0.5, 10, true, false, 0, {0}, {0}},
    {NRT_OP_DIV_TRUNC, 1, 50, true, true, 0, {0}, {0}},
    {NRT_OP_DIV_FLOOR, 1, 50, true, true, 0, {0}, {0}},
    {NRT_OP_REMAINDER, 1, 50, true, true, 0, {0}, {0}},
    {NRT_OP_FMOD, 1, 50, true, true, 0, {0}, {0}},
    {NRT_OP_POW, 0.5, 3, true, true, 0, {0}, {0}},
    {NRT_OP_ATAN2, -5, 5, true, false, 0, {0}, {0}},
    {NRT_OP_HYPOT, -5, 5, true, false, 0, {0}, {0}},
    {NRT_OP_COPYSIGN, -5, 5, true, false, 0, {0}, {0}},
    {NRT_OP_XLOGY, 0.1, 5, true, false, 0, {0}, {0}},
    {NRT_OP_MAXIMUM, -5, 5, true, true, 0, {0}, {0}},
    {NRT_OP_MINIMUM, -5, 5, true, true, 0, {0}, {0}},
    {NRT_OP_FMAX, -5, 5, true, true, 0, {0}, {0}},
    {NRT_OP_FMIN, -5, 5, true, true, 0, {0}, {0}},
    {NRT_OP_EQ, -2, 2, true, true, 0, {0}, {0}},
    {NRT_OP_NE, -2, 2, true, true, 0, {0}, {0}},
    {NRT_OP_LT, -2, 2, true, true, 0, {0}, {0}},
    {NRT_OP_LE, -2, 2, true, true, 0, {0}, {0}},
    {NRT_OP_GT, -2, 2, true, true, 0, {0}, {0}},
    {NRT_OP_GE, -2, 2, true, true, 0, {0}, {0}},
    {NRT_OP_LOGICAL_AND, -1, 1, true, true, 0, {0}, {0}},
    {NRT_OP_LOGICAL_OR, -1, 1, true, true, 0, {0}, {0}},
    {NRT_OP_LOGICAL_XOR, -1, 1, true, true, 0, {0}, {0}},
    {NRT_OP_BITWISE_AND, -100, 100, false, true, 0, {0}, {0}},
    {NRT_OP_BITWISE_OR, -100, 100, false, true, 0, {0}, {0}},
    {NRT_OP_BITWISE_XOR, -100, 100, false, true, 0, {0}, {0}},
    {NRT_OP_SHIFT_LEFT, 0, 70, false, true, 0, {0}, {0}},
    {NRT_OP_SHIFT_RIGHT, 0, 70, false, true, 0, {0}, {0}},
    {NRT_OP_THRESHOLD_BACKWARD, -2, 2, true, true, 0, {0.5}, {0}},
    {NRT_OP_SIGMOID_BACKWARD, -2, 2, true, false, 0, {0}, {0}},
    {NRT_OP_TANH_BACKWARD, -2, 2, true, false, 0, {0}, {0}},
    {NRT_OP_GELU_BACKWARD, -5, 5, true, false, VM, {0}, {0}},
    {NRT_OP_GELU_BACKWARD, -5, 5, true, false, VM, {0}, {1}},
    {NRT_OP_SILU_BACKWARD, -10, 10, true, false, VM, {0}, {0}},
    {NRT_OP_MISH_BACKWARD, -5, 5, true, false, 0, {0}, {0}},
    {NRT_OP_SOFTPLUS_BACKWARD, -5, 5, true, false, 0, {1.0, 20.0}, {0}},
    {NRT_OP_ELU_BACKWARD, -3, 3, true, false, 0, {1.0, 1.0507, 1.0}, {0}},
    {NRT_OP_ELU_BACKWARD, -0.9, 3, true, false, 0, {1.0, 1.0, 1.0}, {1}},
    {NRT_OP_LEAKY_RELU_BACKWARD, -3, 3, true, false, 0, {0.2}, {0}},
    {NRT_OP_HARDSIGMOID_BACKWARD, -5, 5, true, false, 0, {0}, {0}},
    {NRT_OP_HARDSWISH_BACKWARD, -5, 5, true, false, 0, {0}, {0}},
    {NRT_OP_HARDTANH_BACKWARD, -2, 2, true, true, 0, {-1, 1}, {0}},
    {NRT_OP_WHERE, -2, 2, true, true, 0, {0}, {0}},
    {NRT_OP_ADDCMUL, -5, 5, true, true, 0, {0.5}, {0}},
    {NRT_OP_ADDCDIV, 0.5, 5, true, false, 0, {0.5}, {0}},
    {NRT_OP_LERP, 0, 1, true, false, 0, {0}, {0}},
    {NRT_OP_CLAMP, -3, 3, true, true, 0, {0}, {0}},
};

/* Layouts over a logical row-major shape, applied to the inputs (the
 * output is contiguous, or gapped in the last layout). */
enum { L_CONTIG, L_TRANSPOSED, L_BROADCAST, L_NEGATIVE, L_GAPPED, L_TI_ORDER, L_COUNT };

typedef struct view {
  void *alloc;
  nrt_operand op;
} view;

/* A view over `sizes` in layout `layout`, filled with random values. For
 * L_TI_ORDER the caller passes sizes already reversed; strides are then
 * fastest-first, like TensorIterator's. */
static view make_view(nrt_dtype dt, int ndim, const int64_t *sizes, int layout, double lo,
                      double hi, bool is_int) {
  view v;
  memset(&v, 0, sizeof v);
  int64_t es = (int64_t)nrt_dtype_size(dt), numel = 1;
  for (int d = 0; d < ndim; d++) numel *= sizes[d];
  int64_t gap = layout == L_GAPPED ? 2 : 1;
  int64_t storage = numel * gap + 1;
  v.alloc = calloc((size_t)storage, (size_t)es);
  for (int64_t i = 0; i < storage; i++) {
    double x = nrt_test_uniform(lo, hi);
    nrt_test_put(v.alloc, dt, i, is_int ? floor(x) : x);
  }
  v.op.dtype = dt;
  v.op.data = v.alloc;
  int64_t st = es * gap;
  if (layout == L_TRANSPOSED) { /* first dim fastest */
    for (int d = 0; d < ndim; d++) {
      v.op.strides[d] = st;
      st *= sizes[d];
    }
  } else if (layout == L_TI_ORDER) {
    for (int d = 0; d < ndim; d++) {
      v.op.strides[d] = st;
      st *= sizes[d];
    }
  } else {
    for (int d = ndim - 1; d >= 0; d--) {
      v.op.strides[d] = st;
      st *= sizes[d];
    }
  }
  if (layout == L_BROADCAST && ndim > 0) v.op.strides[0] = 0;
  if (layout == L_NEGATIVE && ndim > 0) {
    int d = ndim - 1;
    v.op.data = (char *)v.alloc + (sizes[d] - 1) * v.op.strides[d];
    v.op.strides[d] = -v.op.strides[d];
  }
  return v;
}

/* A 16-bit compute dtype rounds the result before a wider output too, so
 * two paths a few float32 ulps apart can land one 16-bit step apart. */
static bool close_enough(double got, double want, double rtol, nrt_dtype out, nrt_dtype compute) {
  if (got != got && want != want) return true;
  if (got == want) return true;
  if (rtol == 0) return false;
  if (out == NRT_BFLOAT16 || compute == NRT_BFLOAT16) rtol += 1.0 / 128;
  if (out == NRT_FLOAT16 || compute == NRT_FLOAT16) rtol += 1.0 / 1024;
  return fabs(got - want) <= rtol * fabs(want) + 10 * rtol;
}

static int sweep_one(const op_spec *s, nrt_dtype compute, nrt_dtype in_dt, nrt_dtype out_dt,
                     int ndim, const int64_t *sizes, int layout) {
  int nin = nrt_op_ninputs(s->op);
  int64_t rs[NRT_MAX_DIMS];
  for (int d = 0; d < ndim; d++) rs[d] = layout == L_TI_ORDER ? sizes[ndim - 1 - d] : sizes[d];
  nrt_launch l = nrt_test_launch_op(s->op, compute, ndim, rs);
  bool is_int = !nrt_dtype_is_floating(compute);
  for (int k = 0; k < 3; k++) {
    if (nrt_dtype_is_floating(compute)) l.scalars[k].f = s->s[k];
    else l.scalars[k].i = (int64_t)s->s[k];
  }
  l.params[0] = s->p[0];
  l.params[1] = s->p[1];
  view in[3];
  for (int k = 0; k < nin; k++) {
    /* WHERE's condition is bool; the backward ops' grad is any value */
    nrt_dtype dt = (s->op == NRT_OP_WHERE && k == 0) ? NRT_BOOL : in_dt;
    in[k] = make_view(dt, ndim, rs, layout == L_BROADCAST && k > 0 ? L_CONTIG : layout, s->lo,
                      s->hi, is_int);
    l.operands[1 + k] = in[k].op;
  }
  if (s->op == NRT_OP_COPY) l.operands[0].dtype = out_dt;
  int out_layout = layout == L_GAPPED ? L_GAPPED : (layout == L_TI_ORDER ? L_TI_ORDER : L_CONTIG);
  view o1 = make_view(out_dt, ndim, rs, out_layout, 0, 0, false);
  view o2 = make_view(out_dt, ndim, rs, out_layout, 0, 0, false);
  int64_t numel = 1;
  for (int d = 0; d < ndim; d++) numel *= rs[d];
  int64_t span = numel * (layout == L_GAPPED ? 2 : 1);
  l.operands[0] = o1.op;
  nrt_kernels_set_reference(true);
  nrt_status st_ref = nrt_launch_run(&l);
  nrt_kernels_set_reference(false);
  l.operands[0] = o2.op;
  int bad = 0;
  /* the AVX-512 builds (where the host has them) and the baseline ones */
  for (int isa = NRT_ISA_AVX512; isa >= NRT_ISA_BASELINE && !bad; isa -= 2) {
    nrt_kernels_limit_isa((nrt_isa)isa);
    nrt_status st_fast = nrt_launch_run(&l);
    nrt_kernels_limit_isa(NRT_ISA_BEST);
    if (st_ref != NRT_SUCCESS || st_fast != NRT_SUCCESS) {
      fprintf(stderr, "%s: status ref %s fast %s (%s)\n", nrt_op_name(s->op), nrt_status_name(st_ref),
              nrt_status_name(st_fast), nrt_last_error_message());
      bad = 1;
    }
    for (int64_t i = 0; i < span && !bad; i++) {
      double want = nrt_test_get(o1.alloc, out_dt, i), got = nrt_test_get(o2.alloc, out_dt, i);
      if (!close_enough(got, want, s->rtol, out_dt, compute)) {
        fprintf(stderr, "%s (compute %s, in %s, out %s, ndim %d, layout %d, isa %d) [%lld]: fast %.9g ref %.9g\n",
                nrt_op_name(s->op), nrt_dtype_name(compute), nrt_dtype_name(in_dt),
                nrt_dtype_name(out_dt), ndim, layout, isa, (long long)i, got, want);
        bad = 1;
      }
    }
  }
  for (int k = 0; k < nin; k++) free(in[k].alloc);
  free(o1.alloc);
  free(o2.alloc);
  return bad;
}

static bool is_predicate(nrt_op op) {
  return op == NRT_OP_EQ || op == NRT_OP_NE || op == NRT_OP_LT || op == NRT_OP_LE ||
         op == NRT_OP_GT || op == NRT_OP_GE || op == NRT_OP_ISNAN || op == NRT_OP_ISINF ||
         op == NRT_OP_ISFINITE || op == NRT_OP_LOGICAL_AND || op == NRT_OP_LOGICAL_OR ||
         op == NRT_OP_LOGICAL_XOR || op == NRT_OP_LOGICAL_NOT;
}

static void test_sweep_fast_vs_reference(void) {
  static const int64_t shapes[][3] = {{1, 1, 1}, {7, 1, 1}, {255, 1, 1}, {257, 1, 1},
                                      {1000, 1, 1}, {3, 5, 7}, {33, 65, 1}, {2, 1, 129}};
  static const int ndims[] = {1, 1, 1, 1, 1, 3, 2, 3};
  int failures = 0;
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
    const op_spec *s = &specs[i];
    for (size_t sh = 0; sh < sizeof ndims / sizeof ndims[0]; sh++) {
      int layout = (int)((i + sh) % L_COUNT);
      if (s->fl) {
        nrt_dtype out = is_predicate(s->op) ? NRT_BOOL : NRT_FLOAT32;
        failures += sweep_one(s, NRT_FLOAT32, NRT_FLOAT32, out, ndims[sh], shapes[sh], layout);
        if (sh == 4) { /* low precision and float64 storage, mixed */
          failures += sweep_one(s, NRT_BFLOAT16, NRT_BFLOAT16, is_predicate(s->op) ? NRT_BOOL : NRT_BFLOAT16,
                                ndims[sh], shapes[sh], L_CONTIG);
          failures += sweep_one(s, NRT_FLOAT16, NRT_FLOAT16, NRT_FLOAT32, ndims[sh], shapes[sh], L_GAPPED);
          failures += sweep_one(s, NRT_FLOAT64, NRT_FLOAT64, NRT_FLOAT64, ndims[sh], shapes[sh], L_TRANSPOSED);
        }
      }
      if (s->in) {
        nrt_dtype out = is_predicate(s->op) ? NRT_BOOL : NRT_INT64;
        failures += sweep_one(s, NRT_INT64, NRT_INT64, out, ndims[sh], shapes[sh], layout);
        if (sh == 5) {
          failures += sweep_one(s, NRT_INT32, NRT_INT32, is_predicate(s->op) ? NRT_BOOL : NRT_INT32,
                                ndims[sh], shapes[sh], L_NEGATIVE);
          failures += sweep_one(s, NRT_INT16, NRT_INT8, NRT_INT16, ndims[sh], shapes[sh], L_BROADCAST);
        }
      }
    }
    if (failures > 20) break;
  }
  CHECK(failures == 0);
}

/* Large enough to be split across the pool, with a broadcast operand, in
 * place (out aliases an input), so chunk boundaries and direct buffers
 * are exercised. */
static void test_large_inplace_broadcast(void) {
  enum { R = 300, C = 1001 };
  float *a = malloc(sizeof(float) * R * C), *row = malloc(sizeof(float) * C);
  float *want = malloc(sizeof(float) * R * C);
  for (int i = 0; i < R * C; i++) a[i] = (float)nrt_test_uniform(-1, 1);
  for (int j = 0; j < C; j++) row[j] = (float)nrt_test_uniform(-1, 1);
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C; j++) want[i * C + j] = a[i * C + j] + 0.5f * row[j];
  int64_t sizes[2] = {R, C};
  nrt_launch l = nrt_test_launch_op(NRT_OP_ADD, NRT_FLOAT32, 2, sizes);
  l.scalars[0].f = 0.5;
  l.operands[0] = (nrt_operand){.data = a, .dtype = NRT_FLOAT32, .strides = {C * 4, 4}};
  l.operands[1] = l.operands[0];
  l.operands[2] = (nrt_operand){.data = row, .dtype = NRT_FLOAT32, .strides = {0, 4}};
  CHECK_OK(nrt_launch_run(&l));
  int bad = 0;
  for (int i = 0; i < R * C; i++) bad += a[i] != want[i];
  CHECK(bad == 0);
  free(a);
  free(row);
  free(want);
}

/* Inputs whose fastest dim is the output's second (x + y.t(), a
 * transposed copy) run in tiles through a buffer: sizes that leave partial
 * tiles and partial 16-column gathers, an outer dim, several transposed
 * inputs, every element size, conversions on the way in and out, and an
 * integer division by zero inside a tile. Fast against reference. */
static void test_transposed_tiles(void) {
  struct { nrt_op op; nrt_dtype in, out, compute; int64_t sizes[3]; int ndim; unsigned transposed; } cases[] = {
      {NRT_OP_ADD, NRT_FLOAT32, NRT_FLOAT32, NRT_FLOAT32, {300, 517}, 2, 2},
      {NRT_OP_ADD, NRT_BFLOAT16, NRT_BFLOAT16, NRT_BFLOAT16, {270, 300}, 2, 2},
      {NRT_OP_MUL, NRT_FLOAT16, NRT_FLOAT32, NRT_FLOAT32, {17, 600}, 2, 3},
      {NRT_OP_GELU, NRT_FLOAT32, NRT_FLOAT32, NRT_FLOAT32, {513, 40}, 2, 1},
      {NRT_OP_GELU, NRT_BFLOAT16, NRT_BFLOAT16, NRT_BFLOAT16, {3, 200, 70}, 3, 1},
      {NRT_OP_COPY, NRT_FLOAT64, NRT_FLOAT64, NRT_FLOAT64, {257, 259}, 2, 1},
      {NRT_OP_COPY, NRT_BFLOAT16, NRT_FLOAT32, NRT_FLOAT32, {100, 300}, 2, 1},
      {NRT_OP_COPY, NRT_INT8, NRT_INT8, NRT_INT8, {300, 301}, 2, 1},
      {NRT_OP_WHERE, NRT_FLOAT32, NRT_FLOAT32, NRT_FLOAT32, {2, 300, 290}, 3, 6},
      {NRT_OP_ADD, NRT_INT64, NRT_INT64, NRT_INT64, {290, 300}, 2, 1},
      {NRT_OP_DIV_TRUNC, NRT_INT32, NRT_INT32, NRT_INT32, {300, 290}, 2, 2},
  };
  int failures = 0;
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    int nd = cases[ci].ndim, nin = cases[ci].op == NRT_OP_COPY ? 1 : nrt_op_ninputs(cases[ci].op);
    const int64_t *sz = cases[ci].sizes;
    int64_t numel = 1;
    for (int d = 0; d < nd; d++) numel *= sz[d];
    nrt_launch l = nrt_test_launch(cases[ci].op, cases[ci].compute, nd, sz, 1, nin);
    l.scalars[0].f = 0.75;
    l.scalars[0].i = 3;
    void *in[3], *out[2];
    bool is_int = !nrt_dtype_is_floating(cases[ci].in);
    for (int k = 0; k < nin; k++) {
      nrt_dtype dt = cases[ci].op == NRT_OP_WHERE && k == 0 ? NRT_BOOL : cases[ci].in;
      int64_t es = (int64_t)nrt_dtype_size(dt);
      in[k] = malloc((size_t)(numel * es));
      for (int64_t i = 0; i < numel; i++) {
        double v = is_int ? (double)nrt_test_rand_range(-100, 100) : nrt_test_uniform(-3, 3);
        if (cases[ci].op == NRT_OP_DIV_TRUNC && k == 1 && v == 0) v = 7;
        nrt_test_put(in[k], dt, i, v);
      }
      /* transposed: the last two dims swapped in memory */
      bool tr = cases[ci].transposed >> k & 1;
      int64_t st[3];
      st[nd - 1] = tr ? sz[nd - 2] * es : es;
      st[nd - 2] = tr ? es : sz[nd - 1] * es;
      if (nd == 3) st[0] = sz[1] * sz[2] * es;
      nrt_test_operand(&l, 1 + k, in[k], dt, st);
    }
    int64_t oes = (int64_t)nrt_dtype_size(cases[ci].out);
    int64_t ost[3] = {0, 0, oes};
    ost[nd - 1] = oes;
    ost[nd - 2] = sz[nd - 1] * oes;
    if (nd == 3) ost[0] = sz[1] * sz[2] * oes;
    for (int r = 0; r < 2; r++) {
      out[r] = calloc((size_t)numel, (size_t)oes);
      nrt_test_operand(&l, 0, out[r], cases[ci].out, ost);
      for (int isa = r ? NRT_ISA_BASELINE : NRT_ISA_BEST; isa <= NRT_ISA_BEST; isa += 2) {
        nrt_kernels_limit_isa((nrt_isa)isa);
        CHECK_OK(nrt_test_run(&l, r == 0));
      }
      nrt_kernels_limit_isa(NRT_ISA_BEST);
    }
    for (int64_t i = 0; i < numel; i++) {
      double want = nrt_test_get(out[0], cases[ci].out, i), got = nrt_test_get(out[1], cases[ci].out, i);
      if (!close_enough(got, want, cases[ci].op == NRT_OP_GELU ? 1e-5 : 0, cases[ci].out,
                        cases[ci].compute)) {
        fprintf(stderr, "%s tiles case %zu [%lld]: fast %.9g ref %.9g\n", nrt_op_name(cases[ci].op), ci,
                (long long)i, got, want);
        failures++;
        break;
      }
    }
    /* a zero divisor inside a tile fails the launch as the row path does */
    if (cases[ci].op == NRT_OP_DIV_TRUNC) {
      nrt_test_put(in[1], cases[ci].in, numel / 2 + 3, 0);
      CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT);
      CHECK(strstr(nrt_last_error_message(), "ZeroDivisionError") != NULL);
    }
    for (int k = 0; k < nin; k++) free(in[k]);
    free(out[0]);
    free(out[1]);
  }
  CHECK(failures == 0);
}

/* ---- known values --------------------------------------------------------------- */

static void run_int_binary(nrt_op op, const int64_t *a, const int64_t *b, int64_t *out, int n,
                           nrt_status want_status) {
  int64_t sizes[1] = {n};
  nrt_launch l = nrt_test_launch_op(op, NRT_INT64, 1, sizes);
  nrt_test_operand_1d(&l, 0, out, NRT_INT64, 1);
  nrt_test_operand_1d(&l, 1, (void *)a, NRT_INT64, 1);
  nrt_test_operand_1d(&l, 2, (void *)b, NRT_INT64, 1);
  nrt_status ref;
  CHECK_STATUS(run_both(&l, &ref), want_status);
  CHECK_STATUS(ref, want_status);
}

static void test_integer_division(void) {
  int64_t a[4] = {7, -7, 7, -7}, b[4] = {2, 2, -2, -2}, out[4];
  run_int_binary(NRT_OP_DIV_FLOOR, a, b, out, 4, NRT_SUCCESS);
  CHECK(out[0] == 3 && out[1] == -4 && out[2] == -4 && out[3] == 3);
  run_int_binary(NRT_OP_DIV_TRUNC, a, b, out, 4, NRT_SUCCESS);
  CHECK(out[0] == 3 && out[1] == -3 && out[2] == -3 && out[3] == 3);
  run_int_binary(NRT_OP_REMAINDER, a, b, out, 4, NRT_SUCCESS);
  CHECK(out[0] == 1 && out[1] == 1 && out[2] == -1 && out[3] == -1);
  run_int_binary(NRT_OP_FMOD, a, b, out, 4, NRT_SUCCESS);
  CHECK(out[0] == 1 && out[1] == -1 && out[2] == 1 && out[3] == -1);
  int64_t mn[1] = {INT64_MIN}, m1[1] = {-1}, o1[1];
  run_int_binary(NRT_OP_DIV_FLOOR, mn, m1, o1, 1, NRT_SUCCESS);
  CHECK(o1[0] == INT64_MIN);
  run_int_binary(NRT_OP_REMAINDER, mn, m1, o1, 1, NRT_SUCCESS);
  CHECK(o1[0] == 0);
  int64_t z[4] = {1, 1, 0, 1};
  nrt_op div_ops[] = {NRT_OP_DIV_FLOOR, NRT_OP_DIV_TRUNC, NRT_OP_REMAINDER, NRT_OP_FMOD};
  for (int i = 0; i < 4; i++) {
    run_int_binary(div_ops[i], a, z, out, 4, NRT_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(nrt_last_error_message(), "ZeroDivisionError") != NULL);
  }
}

static void test_integer_wrap_and_exactness(void) {
  /* int64 values beyond 2^53 must never pass through a float */
  int64_t a[3] = {(1ll << 62) + 1, INT64_MAX, -3}, b[3] = {1, 1, (1ll << 60) + 7}, out[3];
  int64_t sizes[1] = {3};
  nrt_launch l = nrt_test_launch_op(NRT_OP_ADD, NRT_INT64, 1, sizes);
  l.scalars[0].i = 1;
  nrt_test_operand_1d(&l, 0, out, NRT_INT64, 1);
  nrt_test_operand_1d(&l, 1, a, NRT_INT64, 1);
  nrt_test_operand_1d(&l, 2, b, NRT_INT64, 1);
  nrt_status ref;
  CHECK_OK(run_both(&l, &ref));
  CHECK(out[0] == (1ll << 62) + 2 && out[1] == INT64_MIN && out[2] == (1ll << 60) + 4);
  /* FILL with a large integer */
  l = nrt_test_launch_op(NRT_OP_FILL, NRT_INT64, 1, sizes);
  l.scalars[0].i = (1ll << 62) + 3;
  nrt_test_operand_1d(&l, 0, out, NRT_INT64, 1);
  CHECK_OK(run_both(&l, &ref));
  CHECK(out[0] == (1ll << 62) + 3 && out[2] == (1ll << 62) + 3);
  /* int32 results wrap like int32 arithmetic */
  int32_t x[2] = {INT32_MAX, 2}, y[2] = {1, 1 << 30}, o32[2];
  int64_t s2[1] = {2};
  l = nrt_test_launch_op(NRT_OP_MUL, NRT_INT32, 1, s2);
  nrt_test_operand_1d(&l, 0, o32, NRT_INT32, 1);
  nrt_test_operand_1d(&l, 1, x, NRT_INT32, 1);
  nrt_test_operand_1d(&l, 2, y, NRT_INT32, 1);
  CHECK_OK(run_both(&l, &ref));
  CHECK(o32[0] == INT32_MAX && o32[1] == INT32_MIN);
  /* ... also into an out of another dtype (the CPU computes in int32 and casts):
   * int32 INT32_MAX * 2 into float32 is -2.0, uint8 0 - 1 into int64 is 255,
   * bool True + True into float32 is 1.0; each path, and the reference */
  float of[2];
  int32_t x2[2] = {INT32_MAX, 3}, y2[2] = {2, 4};
  l = nrt_test_launch_op(NRT_OP_MUL, NRT_INT32, 1, s2);
  nrt_test_operand_1d(&l, 0, of, NRT_FLOAT32, 1);
  nrt_test_operand_1d(&l, 1, x2, NRT_INT32, 1);
  nrt_test_operand_1d(&l, 2, y2, NRT_INT32, 1);
  for (int r = 0; r < 2; r++) {
    nrt_kernels_set_reference(r);
    CHECK_OK(nrt_launch_run(&l));
    CHECK(of[0] == -2.0f && of[1] == 12.0f);
  }
  uint8_t u[2] = {0, 200}, one[2] = {1, 100};
  int64_t o64[2];
  l = nrt_test_launch_op(NRT_OP_SUB, NRT_UINT8, 1, s2);
  l.scalars[0].i = 1;
  nrt_test_operand_1d(&l, 0, o64, NRT_INT64, 1);
  nrt_test_operand_1d(&l, 1, u, NRT_UINT8, 1);
  nrt_test_operand_1d(&l, 2, one, NRT_UINT8, 1);
  for (int r = 0; r < 2; r++) {
    nrt_kernels_set_reference(r);
    CHECK_OK(nrt_launch_run(&l));
    CHECK(o64[0] == 255 && o64[1] == 100);
  }
  uint8_t t[2] = {1, 0};
  l = nrt_test_launch_op(NRT_OP_ADD, NRT_BOOL, 1, s2);
  l.scalars[0].i = 1;
  nrt_test_operand_1d(&l, 0, of, NRT_FLOAT32, 1);
  nrt_test_operand_1d(&l, 1, t, NRT_BOOL, 1);
  nrt_test_operand_1d(&l, 2, t, NRT_BOOL, 1);
  for (int r = 0; r < 2; r++) {
    nrt_kernels_set_reference(r);
    CHECK_OK(nrt_launch_run(&l));
    CHECK(of[0] == 1.0f && of[1] == 0.0f);
  }
  nrt_kernels_set_reference(false);
}

/* Inputs convert into the compute dtype before the op, as TensorIterator
 * casts every input to the common dtype: a broadcast 0-d int32 -4 beside
 * uint8 data computes as uint8 252 (PyTorch: uint8 [0, 5, 200, 255] <=
 * int32 0-d -4 is [T, T, T, F]); an int32 divisor 1000000007 beside int8
 * data is int8 7 (int8 [-5, 7, 100] // it is [-1, 1, 14]); a float32
 * 2049 beside float16 data is float16 2048; an inline (CPU scalar) value
 * keeps the dtype the glue stored it in. Both paths. */
static void test_inputs_convert_to_compute_dtype(void) {
  int64_t s4[1] = {4}, s3[1] = {3}, s2[1] = {2};
  uint8_t u[4] = {0, 5, 200, 255}, le[4];
  int32_t m4 = -4;
  nrt_launch l = nrt_test_launch_op(NRT_OP_LE, NRT_UINT8, 1, s4);
  nrt_test_operand_1d(&l, 0, le, NRT_BOOL, 1);
  nrt_test_operand_1d(&l, 1, u, NRT_UINT8, 1);
  nrt_test_operand_1d(&l, 2, &m4, NRT_INT32, 0);
  for (int r = 0; r < 2; r++) {
    nrt_kernels_set_reference(r);
    CHECK_OK(nrt_launch_run(&l));
    CHECK(le[0] == 1 && le[1] == 1 && le[2] == 1 && le[3] == 0);
  }
  int8_t a[3] = {-5, 7, 100}, q[3];
  int32_t big = 1000000007;
  l = nrt_test_launch_op(NRT_OP_DIV_FLOOR, NRT_INT8, 1, s3);
  nrt_test_operand_1d(&l, 0, q, NRT_INT8, 1);
  nrt_test_operand_1d(&l, 1, a, NRT_INT8, 1);
  nrt_test_operand_1d(&l, 2, &big, NRT_INT32, 0);
  for (int r = 0; r < 2; r++) {
    nrt_kernels_set_reference(r);
    CHECK_OK(nrt_launch_run(&l));
    CHECK(q[0] == -1 && q[1] == 1 && q[2] == 14);
  }
  /* int64 input at unit stride (the in-place fast path) into int32 compute */
  int64_t w[2] = {(1ll << 32) + 5, -1};
  int32_t i32[2] = {1, 1}, o32[2];
  l = nrt_test_launch_op(NRT_OP_MUL, NRT_INT32, 1, s2);
  nrt_test_operand_1d(&l, 0, o32, NRT_INT32, 1);
  nrt_test_operand_1d(&l, 1, i32, NRT_INT32, 1);
  nrt_test_operand_1d(&l, 2, w, NRT_INT64, 1);
  for (int r = 0; r < 2; r++) {
    nrt_kernels_set_reference(r);
    CHECK_OK(nrt_launch_run(&l));
    CHECK(o32[0] == 5 && o32[1] == -1);
  }
  uint16_t h[2] = {nrt_f32_to_f16(3.0f), nrt_f32_to_f16(2048.0f)}, oh[2];
  float f2049 = 2049.0f;
  l = nrt_test_launch_op(NRT_OP_SUB, NRT_FLOAT16, 1, s2);
  l.scalars[0].f = 1.0;
  nrt_test_operand_1d(&l, 0, oh, NRT_FLOAT16, 1);
  nrt_test_operand_1d(&l, 1, h, NRT_FLOAT16, 1);
  nrt_test_operand_1d(&l, 2, &f2049, NRT_FLOAT32, 0);
  for (int r = 0; r < 2; r++) {
    nrt_kernels_set_reference(r);
    CHECK_OK(nrt_launch_run(&l));
    CHECK(nrt_f16_to_f32(oh[0]) == -2045.0f && nrt_f16_to_f32(oh[1]) == 0.0f);
  }
  /* the same value carried inline is the op's float32 math value */
  l.operands[2].inline_slot = 1;
  l.operands[2].data = NULL;
  memcpy(l.inline_values[0].bytes, &f2049, sizeof f2049);
  for (int r = 0; r < 2; r++) {
    nrt_kernels_set_reference(r);
    CHECK_OK(nrt_launch_run(&l));
    CHECK(nrt_f16_to_f32(oh[0]) == -2046.0f && nrt_f16_to_f32(oh[1]) == -1.0f);
  }
  nrt_kernels_set_reference(false);
}

static void test_shifts(void) {
  /* PyTorch 2.13 on int32: (1, 100, -100) shifted by (-1, 31, 32, 40) */
  int32_t a[4] = {1, 1, 100, -100}, s[4] = {31, 32, -1, 40}, out[4];
  int64_t sizes[1] = {4};
  nrt_launch l = nrt_test_launch_op(NRT_OP_SHIFT_LEFT, NRT_INT32, 1, sizes);
  nrt_test_operand_1d(&l, 0, out, NRT_INT32, 1);
  nrt_test_operand_1d(&l, 1, a, NRT_INT32, 1);
  nrt_test_operand_1d(&l, 2, s, NRT_INT32, 1);
  nrt_status ref;
  CHECK_OK(run_both(&l, &ref));
  CHECK(out[0] == INT32_MIN && out[1] == 0 && out[2] == 0 && out[3] == 0);
  l.op = NRT_OP_SHIFT_RIGHT;
  CHECK_OK(run_both(&l, &ref));
  CHECK(out[0] == 0 && out[1] == 0 && out[2] == 0 && out[3] == -1);
  uint8_t u[2] = {200, 1}, us[2] = {1, 7}, uo[2];
  int64_t s2[1] = {2};
  l = nrt_test_launch_op(NRT_OP_SHIFT_LEFT, NRT_UINT8, 1, s2);
  nrt_test_operand_1d(&l, 0, uo, NRT_UINT8, 1);
  nrt_test_operand_1d(&l, 1, u, NRT_UINT8, 1);
  nrt_test_operand_1d(&l, 2, us, NRT_UINT8, 1);
  CHECK_OK(run_both(&l, &ref));
  CHECK(uo[0] == 144 && uo[1] == 128);
}

static void test_bool_ops(void) {
  uint8_t a[4] = {0, 1, 0, 1}, b[4] = {0, 0, 1, 1}, out[4];
  int64_t sizes[1] = {4};
  nrt_launch l = nrt_test_launch_op(NRT_OP_BITWISE_NOT, NRT_BOOL, 1, sizes);
  nrt_test_operand_1d(&l, 0, out, NRT_BOOL, 1);
  nrt_test_operand_1d(&l, 1, a, NRT_BOOL, 1);
  nrt_status ref;
  CHECK_OK(run_both(&l, &ref));
  CHECK(out[0] == 1 && out[1] == 0 && out[2] == 1 && out[3] == 0);
  struct { nrt_op op; uint8_t want[4]; } cases[] = {
      {NRT_OP_BITWISE_AND, {0, 0, 0, 1}}, {NRT_OP_BITWISE_OR, {0, 1, 1, 1}},
      {NRT_OP_BITWISE_XOR, {0, 1, 1, 0}}, {NRT_OP_ADD, {0, 1, 1, 1}}, {NRT_OP_MUL, {0, 0, 0, 1}}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    l = nrt_test_launch_op(cases[i].op, NRT_BOOL, 1, sizes);
    l.scalars[0].i = 1;
    nrt_test_operand_1d(&l, 0, out, NRT_BOOL, 1);
    nrt_test_operand_1d(&l, 1, a, NRT_BOOL, 1);
    nrt_test_operand_1d(&l, 2, b, NRT_BOOL, 1);
    CHECK_OK(run_both(&l, &ref));
    CHECK(memcmp(out, cases[i].want, 4) == 0);
  }
}

/* Float ops with one or two inputs on a short list; checks exact results. */
static void check_float(nrt_op op, int n, const float *a, const float *b, const float *want,
                        double s0, int64_t p0) {
  float out[16];
  int64_t sizes[1] = {n};
  nrt_launch l = nrt_test_launch_op(op, NRT_FLOAT32, 1, sizes);
  l.scalars[0].f = s0;
  l.params[0] = p0;
  nrt_test_operand_1d(&l, 0, out, NRT_FLOAT32, 1);
  if (a) nrt_test_operand_1d(&l, 1, (void *)a, NRT_FLOAT32, 1);
  if (b) nrt_test_operand_1d(&l, 2, (void *)b, NRT_FLOAT32, 1);
  for (int ref = 1; ref >= 0; ref--) {
    nrt_kernels_set_reference(ref);
    CHECK_OK(nrt_launch_run(&l));
    for (int i = 0; i < n; i++) {
      bool ok = (out[i] != out[i] && want[i] != want[i]) ||
                (out[i] == want[i] && signbit(out[i]) == signbit(want[i]));
      if (!ok) {
        fprintf(stderr, "%s%s [%d]: got %.9g want %.9g\n", nrt_op_name(op), ref ? " (ref)" : "", i,
                out[i], want[i]);
        nrt_test_failures++;
      }
    }
  }
  nrt_kernels_set_reference(false);
}

static void test_float_semantics(void) {
  const float N = NAN, I = INFINITY;
  /* values from PyTorch 2.13 on the same inputs */
  float xa[8] = {7, -7, 7, -7, 0, -0.0f, 5.5f, N}, xb[8] = {2, 2, -2, -2, 0, 0, 0, 1};
  check_float(NRT_OP_DIV_FLOOR, 8, xa, xb, (float[]){3, -4, -4, 3, N, N, I, N}, 0, 0);
  check_float(NRT_OP_DIV_TRUNC, 8, xa, xb, (float[]){3, -3, -3, 3, N, N, I, N}, 0, 0);
  check_float(NRT_OP_REMAINDER, 8, xa, xb, (float[]){1, 1, -1, -1, N, N, N, N}, 0, 0);
  check_float(NRT_OP_FMOD, 8, xa, xb, (float[]){1, -1, 1, -1, N, N, N, N}, 0, 0);
  check_float(NRT_OP_REMAINDER, 6, (float[]){-0.0f, 0, 4, -4, 1, -1}, (float[]){3, -3, 2, -2, I, I},
              (float[]){-0.0f, 0, 0, -0.0f, 1, I}, 0, 0);
  check_float(NRT_OP_DIV_FLOOR, 3, (float[]){1, -1, I}, (float[]){I, I, 2}, (float[]){0, -1, N}, 0, 0);
  check_float(NRT_OP_ROUND, 5, (float[]){0.5f, 1.5f, 2.5f, -0.5f, -1.5f}, NULL,
              (float[]){0, 2, 2, -0.0f, -2}, 0, 0);
  check_float(NRT_OP_SIGN, 4, (float[]){N, -0.0f, 0, -2}, NULL, (float[]){0, 0, 0, -1}, 0, 0);
  check_float(NRT_OP_FRAC, 4, (float[]){-1.5f, 1.5f, I, -I}, NULL, (float[]){-0.5f, 0.5f, N, N}, 0, 0);
  check_float(NRT_OP_MAXIMUM, 2, (float[]){N, 1}, (float[]){1, N}, (float[]){N, N}, 0, 0);
  check_float(NRT_OP_MINIMUM, 2, (float[]){N, 1}, (float[]){1, N}, (float[]){N, N}, 0, 0);
  check_float(NRT_OP_FMAX, 3, (float[]){N, 1, N}, (float[]){1, N, N}, (float[]){1, 1, N}, 0, 0);
  check_float(NRT_OP_FMIN, 3, (float[]){N, 1, N}, (float[]){1, N, N}, (float[]){1, 1, N}, 0, 0);
  check_float(NRT_OP_XLOGY, 5, (float[]){0, 0, 1, N, 0}, (float[]){N, 0, 0, 1, I},
              (float[]){N, 0, -I, N, 0}, 0, 0);
  check_float(NRT_OP_COPYSIGN, 3, (float[]){1, 1, N}, (float[]){-0.0f, N, -1}, (float[]){-1, 1, N}, 0, 0);
  check_float(NRT_OP_RELU, 3, (float[]){N, -1, 2}, NULL, (float[]){N, 0, 2}, 0, 0);
  check_float(NRT_OP_THRESHOLD_BACKWARD, 4, (float[]){1, 1, 1, 1}, (float[]){-1, 0, 1, N},
              (float[]){0, 0, 1, 1}, 0.0, 0);
  check_float(NRT_OP_HARDSWISH_BACKWARD, 5, (float[]){1, 1, 1, 1, 1}, (float[]){-3, -2, 3, 3.5f, 0},
              (float[]){0, -2.0f / 3.0f + 0.5f, 1, 1, 0.5f}, 0, 0);
  check_float(NRT_OP_HARDSIGMOID_BACKWARD, 4, (float[]){1, 1, 1, 1}, (float[]){-3, -2, 3, 0},
              (float[]){0, 1.0f / 6, 0, 1.0f / 6}, 0, 0);
  check_float(NRT_OP_EXP, 6, (float[]){0, -I, I, N, 89, -104}, NULL, (float[]){1, 0, I, N, I, 0}, 0, 0);
  check_float(NRT_OP_LOG, 5, (float[]){1, 0, -1, I, N}, NULL, (float[]){0, -I, N, I, N}, 0, 0);
  check_float(NRT_OP_TANH, 4, (float[]){0, -0.0f, I, -I}, NULL, (float[]){0, -0.0f, 1, -1}, 0, 0);
  check_float(NRT_OP_ERFINV, 4, (float[]){0, 1, -1, 2}, NULL, (float[]){0, I, -I, N}, 0, 0);
  /* pow by a scalar: the special exponents PyTorch rewrites */
  check_float(NRT_OP_POW_SCALAR, 3, (float[]){3, -2, 0.5f}, NULL, (float[]){9, 4, 0.25f}, 2.0, 0);
  check_float(NRT_OP_POW_SCALAR, 2, (float[]){4, 0}, NULL, (float[]){0.5f, I}, -0.5, 0);
  /* clamp: NaN input stays NaN, lo > hi gives hi */
  float cl[3];
  int64_t s3[1] = {3};
  nrt_launch l = nrt_test_launch_op(NRT_OP_CLAMP_SCALAR, NRT_FLOAT32, 1, s3);
  l.params[0] = l.params[1] = 1;
  l.scalars[0].f = 2;
  l.scalars[1].f = 1;
  nrt_test_operand_1d(&l, 0, cl, NRT_FLOAT32, 1);
  nrt_test_operand_1d(&l, 1, (float[]){N, 0.5f, 3}, NRT_FLOAT32, 1);
  nrt_status ref;
  CHECK_OK(run_both(&l, &ref));
  CHECK(cl[0] != cl[0] && cl[1] == 1 && cl[2] == 1);
  l.scalars[0].f = NAN; /* a NaN bound makes everything NaN */
  CHECK_OK(run_both(&l, &ref));
  CHECK(cl[1] != cl[1] && cl[2] != cl[2]);
}

/* Activations and their backward: numbers printed by PyTorch 2.13 for
 * x = (-3.5, -1, -0.25, 0, 0.5, 1, 3.5), grad g below. */
static void check_act(nrt_op op, bool backward, const float *want, double s0, double s1, double s2,
                      int64_t p0) {
  static const float x[7] = {-3.5f, -1.0f, -0.25f, 0.0f, 0.5f, 1.0f, 3.5f};
  static const float g[7] = {0.3f, -1.2f, 2.0f, 1.0f, -0.7f, 0.9f, 1.1f};
  float out[7];
  int64_t sizes[1] = {7};
  nrt_launch l = nrt_test_launch_op(op, NRT_FLOAT32, 1, sizes);
  l.scalars[0].f = s0;
  l.scalars[1].f = s1;
  l.scalars[2].f = s2;
  l.params[0] = p0;
  nrt_test_operand_1d(&l, 0, out, NRT_FLOAT32, 1);
  nrt_test_operand_1d(&l, 1, (void *)(backward ? g : x), NRT_FLOAT32, 1);
  if (backward) nrt_test_operand_1d(&l, 2, (void *)x, NRT_FLOAT32, 1);
  for (int ref = 1; ref >= 0; ref--) {
    nrt_kernels_set_reference(ref);
    CHECK_OK(nrt_launch_run(&l));
    for (int i = 0; i < 7; i++) {
      /* a few ulps; absolute near 0 where formulas cancel */
      if (!(fabs(out[i] - want[i]) <= 4e-6 * fabs(want[i]) + 2e-7)) {
        fprintf(stderr, "%s%s p0=%lld x=%g: got %.9g want %.9g\n", nrt_op_name(op), ref ? " (ref)" : "",
                (long long)p0, x[i], out[i], want[i]);
        nrt_test_failures++;
      }
    }
  }
  nrt_kernels_set_reference(false);
}

static void test_activations_match_pytorch(void) {
  check_act(NRT_OP_GELU, false, (float[]){-0.000814333558f, -0.158655256f, -0.100323416f, 0, 0.345731229f, 0.841344714f, 3.49918556f}, 0, 0, 0, 0);
  check_act(NRT_OP_GELU, false, (float[]){-0.000616148114f, -0.158807993f, -0.100324646f, 0, 0.345714003f, 0.841192007f, 3.49938369f}, 0, 0, 0, 1);
  check_act(NRT_OP_SILU, false, (float[]){-0.102592811f, -0.268941432f, -0.109455876f, 0, 0.311229676f, 0.731058598f, 3.39740729f}, 0, 0, 0, 0);
  check_act(NRT_OP_MISH, false, (float[]){-0.10409575f, -0.30340144f, -0.129926965f, 0, 0.375245243f, 0.865098357f, 3.4939909f}, 0, 0, 0, 0);
  check_act(NRT_OP_SOFTPLUS, false, (float[]){0.000455733243f, 0.0634640008f, 0.237038493f, 0.346573591f, 0.656630814f, 1.06346405f, 3.5f}, 2.0, 5.0, 0, 0);
  check_act(NRT_OP_ELU, false, (float[]){-1.45470393f, -0.948180795f, -0.331798822f, 0, 0.5f, 1, 3.5f}, 1.5, 1.0, 1.0, 0);
  check_act(NRT_OP_HARDSWISH, false, (float[]){-0.0f, -0.333333343f, -0.114583336f, 0, 0.291666657f, 0.666666687f, 3.5f}, 0, 0, 0, 0);
  check_act(NRT_OP_HARDSIGMOID, false, (float[]){0, 0.333333343f, 0.458333343f, 0.5f, 0.583333313f, 0.666666687f, 1}, 0, 0, 0, 0);
  check_act(NRT_OP_SIGMOID, false, (float[]){0.0293122306f, 0.268941432f, 0.437823504f, 0.5f, 0.622459352f, 0.731058598f, 0.970687747f}, 0, 0, 0, 0);
  check_act(NRT_OP_EXPM1, false, (float[]){-0.969802618f, -0.63212055f, -0.221199214f, 0, 0.648721278f, 1.71828187f, 32.1154518f}, 0, 0, 0, 0);
  check_act(NRT_OP_TANH, false, (float[]){-0.998177886f, -0.761594176f, -0.244918659f, 0, 0.462117165f, 0.761594176f, 0.998177886f}, 0, 0, 0, 0);
  check_act(NRT_OP_GELU_BACKWARD, true, (float[]){-0.000846514129f, 0.0999785215f, 0.609253407f, 0.5f, -0.607246518f, 0.974983811f, 1.10310388f}, 0, 0, 0, 0);
  check_act(NRT_OP_GELU_BACKWARD, true, (float[]){-0.000726734695f, 0.0995569155f, 0.609291792f, 0.5f, -0.607158899f, 0.974667609f, 1.10266471f}, 0, 0, 0, 1);
  check_act(NRT_OP_SILU_BACKWARD, true, (float[]){-0.0210820064f, -0.0867953897f, 0.752579987f, 0.5f, -0.517972827f, 0.834903479f, 1.17730081f}, 0, 0, 0, 0);
  check_act(NRT_OP_MISH_BACKWARD, true, (float[]){-0.0218281262f, -0.0710600764f, 0.879631221f, 0.600000024f, -0.620497108f, 0.944132626f, 1.11093318f}, 0, 0, 0, 0);
  check_act(NRT_OP_SOFTPLUS_BACKWARD, true, (float[]){0.000273315381f, -0.143043503f, 0.755081356f, 0.5f, -0.511740983f, 0.792717338f, 1.10000002f}, 2.0, 5.0, 0, 0);
  check_act(NRT_OP_ELU_BACKWARD, true, (float[]){0.0135888234f, -0.662183046f, 2.33640242f, 1.5f, -0.699999988f, 0.899999976f, 1.10000002f}, 1.5, 1.0, 1.0, 0);
}

/* Gradients at a NaN input as ATen's vectorised CPU kernels give them
 * (PyTorch 2.13, a NaN inside the vector body): HARDTANH_BACKWARD (relu6,
 * hardtanh) 0, HARDSWISH_BACKWARD and ELU_BACKWARD (elu, celu, selu; both
 * forms) NaN; at the kinks the gradient passes on the open side only. */
static void test_activation_gradients_at_nan(void) {
  float g[5] = {1, 1, 1, 1, 1}, x[5] = {NAN, 0.0f, 6.0f, -3.0f, 3.0f}, out[5];
  int64_t s5[1] = {5};
  struct { nrt_op op; double s0, s1, s2; int64_t p0; float want[5]; } cases[] = {
      {NRT_OP_HARDTANH_BACKWARD, 0.0, 6.0, 0, 0, {0, 0, 0, 0, 1}},
      {NRT_OP_HARDSWISH_BACKWARD, 0, 0, 0, 0, {NAN, 0.5f, 1, 0, 1}},
      {NRT_OP_ELU_BACKWARD, 1.0, 1.0, 1.0, 0, {NAN, 1, 1, 0.0497870669f, 1}},
      {NRT_OP_ELU_BACKWARD, 1.0, 1.0, 1.0, 1, {NAN, 1, 1, -2, 1}},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    nrt_launch l = nrt_test_launch_op(cases[c].op, NRT_FLOAT32, 1, s5);
    l.scalars[0].f = cases[c].s0;
    l.scalars[1].f = cases[c].s1;
    l.scalars[2].f = cases[c].s2;
    l.params[0] = cases[c].p0;
    nrt_test_operand_1d(&l, 0, out, NRT_FLOAT32, 1);
    nrt_test_operand_1d(&l, 1, g, NRT_FLOAT32, 1);
    nrt_test_operand_1d(&l, 2, x, NRT_FLOAT32, 1);
    for (int r = 0; r < 2; r++) {
      nrt_kernels_set_reference(r);
      CHECK_OK(nrt_launch_run(&l));
      for (int i = 0; i < 5; i++) {
        float w = cases[c].want[i];
        bool ok = w != w ? out[i] != out[i] : nrt_test_near(out[i], w, 1e-6);
        if (!ok) fprintf(stderr, "%s case %zu [%d]: got %g want %g\n", nrt_op_name(cases[c].op), c, i, out[i], w);
        CHECK(ok);
      }
    }
  }
  nrt_kernels_set_reference(false);
}

static void test_erfinv_matches_pytorch(void) {
  float x[6] = {-0.999f, -0.5f, 0.0f, 0.1f, 0.9f, 0.999999f}, out[6];
  float want[6] = {-2.32675624f, -0.476936281f, 0, 0.0888559893f, 1.16308713f, 3.45707464f};
  int64_t sizes[1] = {6};
  nrt_launch l = nrt_test_launch_op(NRT_OP_ERFINV, NRT_FLOAT32, 1, sizes);
  nrt_test_operand_1d(&l, 0, out, NRT_FLOAT32, 1);
  nrt_test_operand_1d(&l, 1, x, NRT_FLOAT32, 1);
  CHECK_OK(nrt_launch_run(&l));
  for (int i = 0; i < 6; i++) CHECK_NEAR(out[i], want[i], 2e-6);
}

/* ---- conversions (COPY) ----------------------------------------------------------- */

static void test_copy_exact(void) {
  int64_t sizes[1] = {4};
  nrt_status ref;
  /* float64 -> float64 keeps every bit */
  double d[4] = {0.1, 1.0 + 0x1p-52, -1e300, 5e-324}, dout[4];
  nrt_launch l = nrt_test_launch_op(NRT_OP_COPY, NRT_FLOAT64, 1, sizes);
  nrt_test_operand_1d(&l, 0, dout, NRT_FLOAT64, 1);
  nrt_test_operand_1d(&l, 1, d, NRT_FLOAT64, 1);
  CHECK_OK(run_both(&l, &ref));
  CHECK(memcmp(d, dout, sizeof d) == 0);
  /* int64 -> int64 and int64 -> float64 without a float32 round trip */
  int64_t i64[4] = {(1ll << 62) + 1, -((1ll << 53) + 1), INT64_MIN, 12345}, iout[4];
  nrt_test_operand_1d(&l, 0, iout, NRT_INT64, 1);
  nrt_test_operand_1d(&l, 1, i64, NRT_INT64, 1);
  l.compute_dtype = NRT_INT64;
  CHECK_OK(run_both(&l, &ref));
  CHECK(memcmp(i64, iout, sizeof i64) == 0);
  nrt_test_operand_1d(&l, 0, dout, NRT_FLOAT64, 1);
  CHECK_OK(run_both(&l, &ref));
  CHECK(dout[0] == 0x1p62 && dout[1] == -0x1p53 && dout[2] == -0x1p63 && dout[3] == 12345.0);
  /* float64 -> int64 exact above 2^24 */
  double big[4] = {9007199254740991.0, -3.9, 1e30, NAN};
  nrt_test_operand_1d(&l, 0, iout, NRT_INT64, 1);
  nrt_test_operand_1d(&l, 1, big, NRT_FLOAT64, 1);
  l.compute_dtype = NRT_FLOAT64;
  CHECK_OK(run_both(&l, &ref));
  CHECK(iout[0] == 9007199254740991ll && iout[1] == -3 && iout[2] == INT64_MIN && iout[3] == INT64_MIN);
}

static void test_copy_conversions(void) {
  /* float -> small ints as PyTorch on x86 (via a 32-bit truncation) */
  float f[5] = {-1.7f, 300.7f, -129.0f, NAN, 3e9f};
  int32_t i32[5];
  uint8_t u8[5];
  int8_t i8[5];
  uint8_t bl[5];
  int64_t sizes[1] = {5};
  nrt_status ref;
  nrt_launch l = nrt_test_launch_op(NRT_OP_COPY, NRT_FLOAT32, 1, sizes);
  nrt_test_operand_1d(&l, 1, f, NRT_FLOAT32, 1);
  nrt_test_operand_1d(&l, 0, i32, NRT_INT32, 1);
  CHECK_OK(run_both(&l, &ref));
  CHECK(i32[0] == -1 && i32[1] == 300 && i32[2] == -129 && i32[3] == INT32_MIN && i32[4] == INT32_MIN);
  nrt_test_operand_1d(&l, 0, u8, NRT_UINT8, 1);
  CHECK_OK(run_both(&l, &ref));
  CHECK(u8[0] == 255 && u8[1] == 44 && u8[2] == 127);
  nrt_test_operand_1d(&l, 0, i8, NRT_INT8, 1);
  CHECK_OK(run_both(&l, &ref));
  CHECK(i8[0] == -1 && i8[1] == 44 && i8[2] == 127 && i8[3] == 0);
  nrt_test_operand_1d(&l, 0, bl, NRT_BOOL, 1);
  float fb[5] = {NAN, 0.0f, -0.0f, 0.1f, -2.0f};
  nrt_test_operand_1d(&l, 1, fb, NRT_FLOAT32, 1);
  CHECK_OK(run_both(&l, &ref));
  CHECK(bl[0] == 1 && bl[1] == 0 && bl[2] == 0 && bl[3] == 1 && bl[4] == 1);
  /* round to nearest even into bfloat16 / float16, and the inline
   * converters agree with dtype.c's on a spread of bit patterns */
  int bad = 0;
  for (uint32_t u = 0; u < 0xffffffffu - 65521u * 7; u += 65521u * 7) {
    float v;
    memcpy(&v, &u, 4);
    uint16_t b1 = nrt_k_f32_to_bf16(v), b2 = nrt_f32_to_bf16(v);
    uint16_t h1 = nrt_k_f32_to_f16(v), h2 = nrt_f32_to_f16(v);
    bool bnan = v != v;
    if (bnan ? !(nrt_bf16_to_f32(b1) != nrt_bf16_to_f32(b1)) : b1 != b2) bad++;
    if (bnan ? !(nrt_f16_to_f32(h1) != nrt_f16_to_f32(h1)) : h1 != h2) bad++;
    if (!bnan && nrt_k_f16_to_f32(h2) != nrt_f16_to_f32(h2)) bad++;
    if (!bnan && nrt_k_bf16_to_f32(b2) != nrt_bf16_to_f32(b2)) bad++;
  }
  CHECK(bad == 0);
}

/* bfloat16/float16 rounding divisions round each step in the 16-bit type,
 * as PyTorch's vectorised CPU kernels do (values printed by PyTorch 2.13
 * on 4- and 10000-element tensors); a broadcast one-element divisor (a
 * stride-0 operand, or a one-element launch: ATen's iter.is_scalar) is
 * divided in float32 and rounded once, as its *_cpu_reduced_float path. */
static void test_half_rounding_division(void) {
  struct { nrt_op op; nrt_dtype dt; float a, b, stepwise, scalar; } cases[] = {
      {NRT_OP_DIV_TRUNC, NRT_BFLOAT16, -115.0f, 1.984375f, -58.0f, -57.0f},
      {NRT_OP_DIV_FLOOR, NRT_BFLOAT16, 111.0f, 0.1396484375f, 796.0f, 792.0f},
      {NRT_OP_DIV_FLOOR, NRT_FLOAT16, -102.5f, 0.0293426513671875f, -3496.0f, -3494.0f},
      {NRT_OP_DIV_TRUNC, NRT_FLOAT32, -115.0f, 1.984375f, -57.0f, -57.0f},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    for (int scalar = 0; scalar < 2; scalar++) {
      uint16_t a16[2], b16[2], o16[2];
      float a32[2] = {cases[i].a, cases[i].a}, b32[2] = {cases[i].b, cases[i].b}, o32[2];
      bool half = cases[i].dt != NRT_FLOAT32;
      for (int j = 0; j < 2; j++) {
        a16[j] = cases[i].dt == NRT_BFLOAT16 ? nrt_f32_to_bf16(a32[j]) : nrt_f32_to_f16(a32[j]);
        b16[j] = cases[i].dt == NRT_BFLOAT16 ? nrt_f32_to_bf16(b32[j]) : nrt_f32_to_f16(b32[j]);
      }
      int64_t sizes[1] = {2};
      nrt_launch l = nrt_test_launch_op(cases[i].op, cases[i].dt, 1, sizes);
      nrt_test_operand_1d(&l, 0, half ? (void *)o16 : (void *)o32, cases[i].dt, 1);
      nrt_test_operand_1d(&l, 1, half ? (void *)a16 : (void *)a32, cases[i].dt, 1);
      nrt_test_operand_1d(&l, 2, half ? (void *)b16 : (void *)b32, cases[i].dt, scalar ? 0 : 1);
      nrt_status ref;
      CHECK_OK(run_both(&l, &ref));
      for (int j = 0; j < 2; j++) {
        double got = !half ? o32[j]
                           : (cases[i].dt == NRT_BFLOAT16 ? nrt_bf16_to_f32(o16[j]) : nrt_f16_to_f32(o16[j]));
        CHECK(got == (scalar ? cases[i].scalar : cases[i].stepwise));
      }
    }
}

static void test_comparisons_store_bool(void) {
  float a[4] = {1, NAN, 2, 3}, b[4] = {1, NAN, 3, 2};
  uint8_t out[4];
  int64_t sizes[1] = {4};
  nrt_launch l = nrt_test_launch_op(NRT_OP_EQ, NRT_FLOAT32, 1, sizes);
  nrt_test_operand_1d(&l, 0, out, NRT_BOOL, 1);
  nrt_test_operand_1d(&l, 1, a, NRT_FLOAT32, 1);
  nrt_test_operand_1d(&l, 2, b, NRT_FLOAT32, 1);
  nrt_status ref;
  CHECK_OK(run_both(&l, &ref));
  CHECK(out[0] == 1 && out[1] == 0 && out[2] == 0 && out[3] == 0);
  l.op = NRT_OP_NE;
  CHECK_OK(run_both(&l, &ref));
  CHECK(out[0] == 0 && out[1] == 1 && out[2] == 1 && out[3] == 1);
  l.op = NRT_OP_ISNAN;
  l.ninputs = 1;
  CHECK_OK(run_both(&l, &ref));
  CHECK(out[0] == 0 && out[1] == 1);
}

static void test_unsupported_and_empty(void) {
  int64_t sizes[1] = {3};
  float f[3] = {1, 2, 3}, o[3];
  nrt_launch l = nrt_test_launch_op(NRT_OP_BITWISE_AND, NRT_FLOAT32, 1, sizes);
  nrt_test_operand_1d(&l, 0, o, NRT_FLOAT32, 1);
  nrt_test_operand_1d(&l, 1, f, NRT_FLOAT32, 1);
  nrt_test_operand_1d(&l, 2, f, NRT_FLOAT32, 1);
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_UNSUPPORTED);
  l = nrt_test_launch_op(NRT_OP_SQRT, NRT_INT64, 1, sizes);
  nrt_test_operand_1d(&l, 0, o, NRT_INT64, 1);
  nrt_test_operand_1d(&l, 1, f, NRT_INT64, 1);
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_UNSUPPORTED);
  int64_t zero[2] = {4, 0};
  l = nrt_test_launch_op(NRT_OP_NEG, NRT_FLOAT32, 2, zero);
  CHECK_OK(nrt_launch_run(&l));
  /* ndim 0: one element */
  l = nrt_test_launch_op(NRT_OP_NEG, NRT_FLOAT32, 0, NULL);
  nrt_test_operand_1d(&l, 0, o, NRT_FLOAT32, 1);
  nrt_test_operand_1d(&l, 1, f, NRT_FLOAT32, 1);
  CHECK_OK(nrt_launch_run(&l));
  CHECK(o[0] == -1);
}

/* uint16/32/64: loads and stores, uint64 values at and above 2^63 converted
 * to floats directly (one rounding, as static_cast), wrapping products. */
static nrt_launch unary_launch(nrt_op op, nrt_dtype compute, void *out, nrt_dtype od, const void *in, nrt_dtype id,
                               int64_t n) {
  nrt_launch l;
  memset(&l, 0, sizeof l);
  l.op = op;
  l.ndim = 1;
  l.sizes[0] = n;
  l.noutputs = 1;
  l.ninputs = 1;
  l.compute_dtype = compute;
  l.operands[0] = (nrt_operand){.data = out, .dtype = od, .strides = {(int64_t)nrt_dtype_size(od)}};
  l.operands[1] = (nrt_operand){.data = (void *)in, .dtype = id, .strides = {(int64_t)nrt_dtype_size(id)}};
  return l;
}

static void test_unsigned_dtypes(void) {
  uint64_t big[3] = {(1ull << 63) + 12345, UINT64_MAX, 7};
  double d[3];
  float f[3];
  nrt_launch l = unary_launch(NRT_OP(COPY), NRT_UINT64, d, NRT_FLOAT64, big, NRT_UINT64, 3);
  CHECK_OK(nrt_launch_run(&l));
  CHECK(d[0] == (double)big[0] && d[1] == (double)big[1] && d[2] == 7.0);
  l = unary_launch(NRT_OP(COPY), NRT_UINT64, f, NRT_FLOAT32, big, NRT_UINT64, 3);
  CHECK_OK(nrt_launch_run(&l));
  CHECK(f[0] == (float)big[0] && f[1] == (float)big[1] && f[2] == 7.0f);
  uint16_t u16[3] = {65535, 1, 300};
  uint32_t u32[3];
  l = unary_launch(NRT_OP(COPY), NRT_UINT16, u32, NRT_UINT32, u16, NRT_UINT16, 3);
  CHECK_OK(nrt_launch_run(&l));
  CHECK(u32[0] == 65535 && u32[1] == 1 && u32[2] == 300);
  uint64_t sq[3];
  nrt_launch m = unary_launch(NRT_OP(MUL), NRT_UINT64, sq, NRT_UINT64, big, NRT_UINT64, 3);
  m.ninputs = 2;
  m.operands[2] = m.operands[1];
  CHECK_OK(nrt_launch_run(&m));
  CHECK(sq[0] == big[0] * big[0] && sq[1] == 1 && sq[2] == 49);
  float neg[2] = {-1.0f, 3.9f};
  uint16_t back[2];
  l = unary_launch(NRT_OP(COPY), NRT_FLOAT32, back, NRT_UINT16, neg, NRT_FLOAT32, 2);
  CHECK_OK(nrt_launch_run(&l));
  CHECK(back[0] == 65535 && back[1] == 3); /* negative values wrap, as static_cast on x86 */
}

/* LERP is one fused multiply-add, as the CPU's (numbers from PyTorch 2.13):
 * a far end does not overflow the unrounded product. And a float16/bfloat16
 * result rounds to its compute dtype before it is stored into a wider
 * output, as TensorIterator's cast of the computed value does. */
static void test_lerp_fused_and_16bit_results_into_wider_outputs(void) {
  const float M = 3.40282347e+38f;
  float a[6] = {0.3067312240600586f, -2.0f, 1.5f, 0.1f, 1.0f, -3.0f};
  float b[6] = {-M, M, -M, 3.0e38f, 2.0f, INFINITY};
  float c[6] = {-0.5f, 0.25f, 1.5f, 0.1234567f, 0.5f, 0.75f};
  float want[6] = {1.70141173e+38f, 8.50705867e+37f, -INFINITY, 3.7037011e+37f, 1.5f, NAN};
  float out[6];
  int64_t s6[1] = {6}, s2[1] = {2};
  nrt_launch l = nrt_test_launch_op(NRT_OP_LERP, NRT_FLOAT32, 1, s6);
  nrt_test_operand_1d(&l, 0, out, NRT_FLOAT32, 1);
  nrt_test_operand_1d(&l, 1, a, NRT_FLOAT32, 1);
  nrt_test_operand_1d(&l, 2, b, NRT_FLOAT32, 1);
  nrt_test_operand_1d(&l, 3, c, NRT_FLOAT32, 1);
  for (int r = 0; r < 2; r++) {
    nrt_kernels_set_reference(r);
    CHECK_OK(nrt_launch_run(&l));
    for (int i = 0; i < 6; i++) {
      bool ok = want[i] != want[i] ? out[i] != out[i] : out[i] == want[i];
      if (!ok) fprintf(stderr, "LERP%s [%d]: got %.9g want %.9g\n", r ? " (ref)" : "", i, out[i], want[i]);
      CHECK(ok);
    }
  }
  /* bfloat16 1 + 0.005859375 is 1.0078125 (1.005859375 unrounded) */
  uint16_t x[2] = {nrt_f32_to_bf16(1.0f), nrt_f32_to_bf16(3.0f)};
  uint16_t y[2] = {nrt_f32_to_bf16(0.005859375f), nrt_f32_to_bf16(0.01171875f)};
  float sum[2];
  l = nrt_test_launch_op(NRT_OP_ADD, NRT_BFLOAT16, 1, s2);
  l.scalars[0].f = 1.0;
  nrt_test_operand_1d(&l, 0, sum, NRT_FLOAT32, 1);
  nrt_test_operand_1d(&l, 1, x, NRT_BFLOAT16, 1);
  nrt_test_operand_1d(&l, 2, y, NRT_BFLOAT16, 1);
  for (int r = 0; r < 2; r++) {
    nrt_kernels_set_reference(r);
    CHECK_OK(nrt_launch_run(&l));
    CHECK(sum[0] == 1.0078125f && sum[1] == 3.015625f);
  }
  nrt_kernels_set_reference(false);
}

int main(void) {
  nrt_test_seed(0x2545F4914F6CDD1Dull);
  RUN_TEST(test_sweep_fast_vs_reference);
  RUN_TEST(test_unsigned_dtypes);
  RUN_TEST(test_large_inplace_broadcast);
  RUN_TEST(test_transposed_tiles);
  RUN_TEST(test_integer_division);
  RUN_TEST(test_integer_wrap_and_exactness);
  RUN_TEST(test_inputs_convert_to_compute_dtype);
  RUN_TEST(test_shifts);
  RUN_TEST(test_bool_ops);
  RUN_TEST(test_float_semantics);
  RUN_TEST(test_activations_match_pytorch);
  RUN_TEST(test_activation_gradients_at_nan);
  RUN_TEST(test_erfinv_matches_pytorch);
  RUN_TEST(test_copy_exact);
  RUN_TEST(test_copy_conversions);
  RUN_TEST(test_half_rounding_division);
  RUN_TEST(test_comparisons_store_bool);
  RUN_TEST(test_unsupported_and_empty);
  RUN_TEST(test_lerp_fused_and_16bit_results_into_wider_outputs);
  return TEST_RESULT();
}
