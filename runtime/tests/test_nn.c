/* Family NN kernels (kernels/nn_pointwise.c) against formulas written out
 * here in double: values around every branch point, NaN, a strided
 * operand, bfloat16 storage, and the reference flag (the block functions
 * are their own reference, so both settings must agree exactly). */
#include <string.h>

#include "api/api.h"
#include "exec/exec.h"
#include "memory/memory.h"
#include "nrt/ops/nn.h"
#include "testing.h"

#define N 12
static const float X[N] = {-3.0f, -1.0f, -0.5f, -0.25f, 0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 2.0f, -0.0f, NAN};
static const float Y[N] = {0.5f, -1.5f, 0.25f, 0.0f, 1.0f, 0.75f, 0.5f, 0.0f, -2.0f, 1.0f, 0.5f, 0.5f};
static const float Z[N] = {1.0f, 0.5f, -2.0f, 0.25f, 0.0f, 1.0f, 0.5f, 0.1f, 1.0f, 0.0f, 1.0f, 1.0f};

static nrt_launch make(nrt_op op, int nin, float *out, double s0, double s1) {
  nrt_launch l = nrt_test_launch(op, NRT_FLOAT32, 1, (const int64_t[]){N}, 1, nin);
  const float *ins[3] = {X, Y, Z};
  l.operands[0] = (nrt_operand){.data = out, .dtype = NRT_FLOAT32, .strides = {4}};
  for (int k = 0; k < nin; k++)
    l.operands[1 + k] = (nrt_operand){.data = (void *)ins[k], .dtype = NRT_FLOAT32, .strides = {4}};
  l.scalars[0].f = s0;
  l.scalars[1].f = s1;
  return l;
}

typedef double (*ref_fn)(double x, double y, double z, double s0, double s1);
static double r_threshold(double x, double y, double z, double s0, double s1) { return x <= s0 ? s1 : x; }
static double r_hardshrink(double x, double y, double z, double s0, double s1) {
  return (x >= -s0 && x <= s0) ? 0.0 : x;
}
static double r_softshrink(double x, double y, double z, double s0, double s1) {
  return x > s0 ? x - s0 : (x < -s0 ? x + s0 : x * 0.0);
}
/* 0 at a NaN input, as ATen's vectorised CPU kernel */
static double r_shrink_bw(double x, double y, double z, double s0, double s1) {
  return (y < -s0 || y > s0) ? x : 0.0;
}
static double r_huber(double x, double y, double z, double s0, double s1) {
  double d = fabs(x - y);
  return d < s0 ? 0.5 * d * d : s0 * (d - 0.5 * s0);
}
static double r_smooth_l1(double x, double y, double z, double s0, double s1) {
  double d = fabs(x - y);
  return d < s0 ? 0.5 * d * d / s0 : d - 0.5 * s0;
}
static double r_prelu(double x, double y, double z, double s0, double s1) { return x > 0 ? x : y * x; }
static double r_huber_bw(double g, double x, double t, double s0, double s1) {
  double d = x - t;
  return d <= -s0 ? -s1 * g * s0 : (d >= s0 ? s1 * g * s0 : s1 * d * g);
}
/* torch.maximum propagates NaN (fmax would drop it). */
static double nanmax(double a, double b) { return a != a ? a : (a > b ? a : b); }
static double r_bce(double x, double t, double z, double s0, double s1) {
  return (t - 1) * nanmax(log1p(-x), -100.0) - t * nanmax(log(x), -100.0);
}
static double r_bce_bw(double g, double x, double t, double s0, double s1) {
  double den = (1 - x) * x;
  return g * (x - t) / (den < 1e-12 ? 1e-12 : den);
}

static void check_op(nrt_op op, int nin, ref_fn ref, double s0, double s1, double lo, double hi) {
  float out[N], out_ref[N];
  for (int pass = 0; pass < 2; pass++) {
    nrt_kernels_set_reference(pass == 1);
    nrt_launch l = make(op, nin, pass ? out_ref : out, s0, s1);
    CHECK_OK(nrt_launch_run(&l));
  }
  nrt_kernels_set_reference(false);
  for (int i = 0; i < N; i++) {
    /* Skip inputs outside an op's domain (BCE probabilities). */
    if (!(X[i] >= lo && X[i] <= hi) && X[i] == X[i]) continue;
    double want = ref(X[i], Y[i], Z[i], s0, s1);
    if (!nrt_test_near(out[i], want, 1e-6)) {
      fprintf(stderr, "%s[%d]: got %g want %g\n", nrt_op_name(op), i, out[i], want);
      CHECK(0);
    }
    CHECK(memcmp(&out[i], &out_ref[i], 4) == 0 || (out[i] != out[i] && out_ref[i] != out_ref[i]));
  }
}

static void test_formulas(void) {
  check_op(NRT_OP(THRESHOLD), 1, r_threshold, 0.25, -7.0, -1e9, 1e9);
  check_op(NRT_OP(HARDSHRINK), 1, r_hardshrink, 0.5, 0, -1e9, 1e9);
  check_op(NRT_OP(SOFTSHRINK), 1, r_softshrink, 0.5, 0, -1e9, 1e9);
  check_op(NRT_OP(SHRINK_BACKWARD), 2, r_shrink_bw, 0.5, 0, -1e9, 1e9);
  check_op(NRT_OP(HUBER), 2, r_huber, 0.6, 0, -1e9, 1e9);
  check_op(NRT_OP(SMOOTH_L1), 2, r_smooth_l1, 0.6, 0, -1e9, 1e9);
  check_op(NRT_OP(PRELU), 2, r_prelu, 0, 0, -1e9, 1e9);
  check_op(NRT_OP(HUBER_BACKWARD), 3, r_huber_bw, 0.6, 0.5, -1e9, 1e9);
  check_op(NRT_OP(BCE), 2, r_bce, 0, 0, 0.0, 1.0);
  check_op(NRT_OP(BCE_BACKWARD), 3, r_bce_bw, 0, 0, -1e9, 1e9);
}

static void test_signbit_int_and_float(void) {
  float out[N];
  nrt_launch l = make(NRT_OP(SIGNBIT), 1, out, 0, 0);
  CHECK_OK(nrt_launch_run(&l));
  for (int i = 0; i < N; i++) CHECK(out[i] == (signbit(X[i]) ? 1.0f : 0.0f)); /* -0.0 counts */
  int64_t xi[4] = {-3, 0, 5, INT64_MIN};
  uint8_t ob[4];
  l = nrt_test_launch(NRT_OP(SIGNBIT), NRT_INT64, 1, (const int64_t[]){4}, 1, 1);
  l.operands[0] = (nrt_operand){.data = ob, .dtype = NRT_BOOL, .strides = {1}};
  l.operands[1] = (nrt_operand){.data = xi, .dtype = NRT_INT64, .strides = {8}};
  CHECK_OK(nrt_launch_run(&l));
  CHECK(ob[0] == 1 && ob[1] == 0 && ob[2] == 0 && ob[3] == 1);
}

/* bfloat16 storage with a strided (every other element) input: values
 * round once, on store. */
static void test_bf16_strided(void) {
  uint16_t in[2 * N], out[N];
  for (int i = 0; i < N; i++) {
    float f = X[i] * 1.7f;
    uint32_t u;
    memcpy(&u, &f, 4);
    in[2 * i] = (uint16_t)(u >> 16); /* truncation is fine for an input */
    in[2 * i + 1] = 0xffff;          /* a NaN the kernel must not read */
  }
  nrt_launch l = nrt_test_launch(NRT_OP(SOFTSHRINK), NRT_BFLOAT16, 1, (const int64_t[]){N}, 1, 1);
  l.scalars[0].f = 0.5;
  l.operands[0] = (nrt_operand){.data = out, .dtype = NRT_BFLOAT16, .strides = {2}};
  l.operands[1] = (nrt_operand){.data = in, .dtype = NRT_BFLOAT16, .strides = {4}};
  CHECK_OK(nrt_launch_run(&l));
  for (int i = 0; i < N; i++) {
    uint32_t u = (uint32_t)in[2 * i] << 16, v = (uint32_t)out[i] << 16;
    float x, got;
    memcpy(&x, &u, 4);
    memcpy(&got, &v, 4);
    double want = r_softshrink(x, 0, 0, 0.5, 0);
    CHECK(want != want ? got != got : fabs(got - want) <= 4e-3 * (1 + fabs(want)));
  }
}

static void test_family_table(void) {
  CHECK(strcmp(nrt_op_name(NRT_OP(BCE_BACKWARD)), "BCE_BACKWARD") == 0);
  CHECK(nrt_op_kind(NRT_OP(HUBER)) == NRT_KIND_POINTWISE);
  CHECK(nrt_op_ninputs(NRT_OP(PRELU_BACKWARD_INPUT)) == 3);
  CHECK((int)NRT_OP(SIGNBIT) == NRT_OP_FAMILY_NN << NRT_OP_FAMILY_BITS);
  /* Validation reads the family's input range. */
  float out[N];
  nrt_launch l = make(NRT_OP(HUBER), 1, out, 1, 0);
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT);
}

/* SCALED_ADDCMUL (addr) applies alpha to b before c, as ATen: with alpha 0
 * or 0.25, 3 * -3.4e38 never overflows (the CPU gives beta * self, and
 * -2.55e38), while a NaN still propagates; p0 ignores a. */
static void test_scaled_addcmul_alpha_first(void) {
  float a[3] = {-2, -2, NAN}, b[3] = {3, 3, NAN}, c[3] = {-3.4e38f, NAN, 1}, out[3];
  nrt_launch l = nrt_test_launch(NRT_OP(SCALED_ADDCMUL), NRT_FLOAT32, 1, (const int64_t[]){3}, 1, 3);
  float *ptr[4] = {out, a, b, c};
  for (int k = 0; k < 4; k++) l.operands[k] = (nrt_operand){.data = ptr[k], .dtype = NRT_FLOAT32, .strides = {4}};
  for (int ref = 0; ref < 2; ref++) {
    l.scalars[0].f = 0.5;
    l.scalars[1].f = 0.0;
    l.params[0] = 0;
    CHECK_OK(nrt_test_run(&l, ref));
    CHECK(out[0] == -1.0f && isnan(out[1]) && isnan(out[2]));
    l.scalars[1].f = 0.25;
    CHECK_OK(nrt_test_run(&l, ref));
    /* float32 fuses the product into beta * self, as the CPU's vector body */
    CHECK(out[0] == fmaf(0.25f * 3.0f, -3.4e38f, 0.5f * -2.0f) && isfinite(out[0]));
    l.scalars[0].f = 0.0;
    l.params[0] = 1; /* beta = 0: a (NaN in element 2) is ignored */
    CHECK_OK(nrt_test_run(&l, ref));
    CHECK(out[0] == 0.75f * -3.4e38f && isnan(out[1]) && isnan(out[2]));
  }
}

int main(void) {
  RUN_TEST(test_formulas);
  RUN_TEST(test_signbit_int_and_float);
  RUN_TEST(test_bf16_strided);
  RUN_TEST(test_family_table);
  RUN_TEST(test_scaled_addcmul_alpha_first);
  return TEST_RESULT();
}
