/* Activation functions and their backward helpers. Formulas are ATen's
 * (aten/src/ATen/native/cpu/Activation.cpp and BinaryOpsKernel.cpp), in
 * the same association, so results agree with PyTorch to rounding. The
 * backward ops take a = grad and b = the forward input (or output, where
 * launch.h says so). */
#pragma GCC optimize("O3,no-trapping-math,no-math-errno")
#include "kernels/pointwise/pointwise.h"

#define GELU_SQRT1_2 0.70710678118654752440f
/* sqrt(2/pi), the tanh approximation's scale; and 1/sqrt(2 pi). */
#define GELU_TANH_BETA 0.79788456080286535588f
#define GELU_PDF_BETA 0.39894228040143267794f
#define GELU_KAPPA 0.044715f

PW_F32_MV(sigmoid, 1, nrt_vsigmoidf(x))
PW_F32(sigmoid_ref, 1, 1.0f / (1.0f + expf(-x)))

/* p0: clamp to [eps, 1 - eps] first (s0 = eps). */
static void logit_f32(float *out, const float *a, const float *b, const float *c, int64_t n,
                      const nrt_launch *l) {
  if (l->params[0]) {
    float lo = (float)l->scalars[0].f, hi = 1.0f - lo;
    for (int64_t i = 0; i < n; i++) {
      float z = a[i] < lo ? lo : (a[i] > hi ? hi : a[i]);
      out[i] = logf(z / (1.0f - z));
    }
  } else {
    for (int64_t i = 0; i < n; i++) out[i] = logf(a[i] / (1.0f - a[i]));
  }
}

PW_F32_MV(relu, 1, x < 0.0f ? 0.0f : x)
PW_I64(relu, 1, x < 0 ? 0 : x)

/* p0: 0 exact (erf), 1 tanh approximation. */
static inline float gelu_tanh_v(float x) {
  float inner = GELU_TANH_BETA * (x + GELU_KAPPA * (x * x * x));
  return 0.5f * x * (1.0f + nrt_vtanhf(inner));
}
static inline float gelu_tanh_v_fma(float x) {
  float inner = GELU_TANH_BETA * (x + GELU_KAPPA * (x * x * x));
  return 0.5f * x * (1.0f + nrt_vtanhf_fma(inner));
}
static inline float gelu_tanh_ref(float x) {
  float inner = GELU_TANH_BETA * (x + GELU_KAPPA * (x * x * x));
  return 0.5f * x * (1.0f + tanhf(inner));
}
static inline float gelu_erf(float x) { return x * 0.5f * (1.0f + erff(x * GELU_SQRT1_2)); }

/* The fast exact form is x * Phi(x) with the vectorisable normal CDF; the
 * reference keeps ATen's x * 0.5 * (1 + erf(x / sqrt 2)) through libm. */
static inline float gelu_erf_v(float x) { return x * nrt_vnormcdf(x); }
/* AVX-512 builds: the _fma family of vmath.h (the erf form about 1.6x faster) */
static inline float gelu_erf_v_fma(float x) { return x * nrt_vnormcdf_fma(x); }

#define GELU_FN(fname, ATTR, TANH_FN, ERF_FN)                                            \
  ATTR static void fname(float *out, const float *a, const float *b, const float *c,     \
                         int64_t n, const nrt_launch *l) {                               \
    if (l->params[0])                                                                     \
      for (int64_t i = 0; i < n; i++) out[i] = TANH_FN(a[i]);                            \
    else                                                                                  \
      for (int64_t i = 0; i < n; i++) out[i] = ERF_FN(a[i]);                             \
  }
GELU_FN(gelu_f32, , gelu_tanh_v, gelu_erf_v)
GELU_FN(gelu_f32_avx512, NRT_TARGET_AVX512, gelu_tanh_v_fma, gelu_erf_v_fma)
GELU_FN(gelu_ref_f32, , gelu_tanh_ref, gelu_erf)

PW_F32_MV(silu, 1, x / (1.0f + nrt_vexpf(-x)))
PW_F32(silu_ref, 1, x / (1.0f + expf(-x)))
PW_F32(mish, 1, x * tanhf(log1pf(expf(x))))
/* s0 beta, s1 threshold: linear above the threshold (in x * beta). */
PW_F32(softplus, 1, x * s0 > s1 ? x : log1pf(expf(x * s0)) / s0)
/* s0 alpha, s1 scale, s2 input_scale. */
PW_F32(elu, 1, x <= 0.0f ? expm1f(x * s2) * (s0 * s1) : x * s1)
PW_F32_MV(leaky_relu, 1, x > 0.0f ? x : x * s0)
static inline float relu6_of_x_plus_3(float x) {
  float t = x + 3.0f;
  t = t < 0.0f ? 0.0f : t;
  return t > 6.0f ? 6.0f : t;
}
/* ATen's order: hardswish is x * relu6(x + 3) / 6, the product divided
 * (x * (relu6(x + 3) / 6) differs in about 1 element in 4). */
PW_F32_MV(hardsigmoid, 1, relu6_of_x_plus_3(x) / 6.0f)
PW_F32_MV(hardswish, 1, x * relu6_of_x_plus_3(x) / 6.0f)
PW_F32_MV(hardtanh, 1, x < s0 ? s0 : (x > s1 ? s1 : x))
PW_I64(hardtanh, 1, x < s0 ? s0 : (x > s1 ? s1 : x))

/* ---- backward: x = grad, y = self (or output) ------------------------- */
PW_F32_MV(threshold_backward, 2, y <= s0 ? 0.0f : x)
PW_I64(threshold_backward, 2, y <= s0 ? 0 : x)
PW_F32_MV(sigmoid_backward, 2, x * (1.0f - y) * y)
/* 1 - y * y is one fused multiply-add on the CPU (x * (1 - y * y) rounded
 * twice differs in 2 elements in 3). */
PW_F32_MV(tanh_backward, 2, x * fmaf(-y, y, 1.0f))

static inline float gelu_tanh_backward_v(float dy, float x, float t) {
  float inner_derivative = GELU_TANH_BETA * (1.0f + 3.0f * GELU_KAPPA * x * x);
  float left_derivative = 0.5f * (1.0f + t);
  float right_derivative = 0.5f * x * (1.0f - t * t);
  return dy * (left_derivative + right_derivative * inner_derivative);
}
static inline float gelu_tanh_inner(float x) {
  return GELU_TANH_BETA * (x + GELU_KAPPA * (x * x * x));
}
static inline float gelu_erf_backward(float dy, float x) {
  float cdf = 0.5f * (1.0f + erff(x * GELU_SQRT1_2));
  float pdf = GELU_PDF_BETA * expf(-0.5f * x * x);
  return dy * (cdf + x * pdf);
}
static inline float gelu_erf_backward_v(float dy, float x) {
  float pdf = GELU_PDF_BETA * nrt_vexpf(-0.5f * x * x);
  return dy * (nrt_vnormcdf(x) + x * pdf);
}
static inline float gelu_erf_backward_v_fma(float dy, float x) {
  float pdf = GELU_PDF_BETA * nrt_vexpf_fma(-0.5f * x * x);
  return dy * (nrt_vnormcdf_fma(x) + x * pdf);
}
#define GELU_BWD_FN(fname, ATTR, TANH_FN, ERF_FN)                                       \
  ATTR static void fname(float *out, const float *a, const float *b, const float *c,    \
                         int64_t n, const nrt_launch *l) {                              \
    if (l->params[0])                                                                    \
      for (int64_t i = 0; i < n; i++)                                                    \
        out[i] = gelu_tanh_backward_v(a[i], b[i], TANH_FN(gelu_tanh_inner(b[i])));      \
    else                                                                                 \
      for (int64_t i = 0; i < n; i++) out[i] = ERF_FN(a[i], b[i]);                       \
  }
GELU_BWD_FN(gelu_backward_f32, , nrt_vtanhf, gelu_erf_backward_v)
GELU_BWD_FN(gelu_backward_f32_avx512, NRT_TARGET_AVX512, nrt_vtanhf_fma, gelu_erf_backward_v_fma)
GELU_BWD_FN(gelu_backward_ref_f32, , tanhf, gelu_erf_backward)

static inline float silu_backward_v(float dy, float x, float s) { return dy * s * (1.0f + x * (1.0f - s)); }
PW_F32_MV(silu_backward, 2, silu_backward_v(x, y, nrt_vsigmoidf(y)))
PW_F32(silu_backward_ref, 2, silu_backward_v(x, y, 1.0f / (1.0f + expf(-y))))
static inline float mish_backward_one(float dy, float x) {
  float sig = 1.0f / (1.0f + expf(-x));
  float tsp = tanhf(log1pf(expf(x)));
  return dy * (tsp + x * sig * (1.0f - tsp * tsp));
}
PW_F32(mish_backward, 2, mish_backward_one(x, y))
static inline float softplus_backward_one(float dy, float x, float beta, float threshold) {
  float z = expf(x * beta);
  return x * beta > threshold ? dy : dy * z / (z + 1.0f);
}
PW_F32(softplus_backward, 2, softplus_backward_one(x, y, s0, s1))
/* s0 alpha, s1 scale, s2 input_scale; p0: y is the forward result. */
static void elu_backward_f32(float *out, const float *a, const float *b, const float *c,
                             int64_t n, const nrt_launch *l) {
  float negcoef = (float)(l->scalars[0].f * l->scalars[1].f);
  float poscoef = (float)l->scalars[1].f, negiptcoef = (float)l->scalars[2].f;
  /* A NaN input takes the negative branch and gives NaN, as in ATen's
   * vectorised CPU kernel (its scalar tail passes the gradient instead; the
   * vector form is what almost every element gets). */
  if (l->params[0])
    for (int64_t i = 0; i < n; i++)
      out[i] = b[i] > 0.0f ? a[i] * poscoef : a[i] * negiptcoef * (b[i] + negcoef);
  else
    for (int64_t i = 0; i < n; i++)
      out[i] = b[i] > 0.0f ? a[i] * poscoef : a[i] * negiptcoef * negcoef * expf(b[i] * negiptcoef);
}
PW_F32_MV(leaky_relu_backward, 2, y > 0.0f ? x : x * s0)
/* ATen multiplies by a float 1/6 here (x / 6 differs in 1 element in 3). */
PW_F32_MV(hardsigmoid_backward, 2, (y > -3.0f && y < 3.0f) ? x * (1.0f / 6.0f) : 0.0f)
/* At a NaN input these follow ATen's vectorised CPU kernels (which
 * nearly every element goes through; the scalar tail differs): the
 * gradient of hardswish is NaN, that of hardtanh (relu6) 0. */
PW_F32_MV(hardswish_backward, 2,
          y >= 3.0f ? x : (y <= -3.0f ? 0.0f : x * (y / 3.0f + 0.5f)))
PW_F32_MV(hardtanh_backward, 2, (y > s0 && y < s1) ? x : 0.0f)
PW_I64(hardtanh_backward, 2, (y <= s0 || y >= s1) ? 0 : x)

const nrt_pw_kernel *nrt_pw_activation_kernel(nrt_op op) {
  switch (op) {
    PW_CASE(SIGMOID, PW_MV(sigmoid), .f32_ref = sigmoid_ref_f32)
    PW_CASE(LOGIT, .f32 = logit_f32)
    PW_CASE(RELU, PW_MV(relu), .i64 = relu_i64)
    PW_CASE(GELU, PW_MV(gelu), .f32_ref = gelu_ref_f32)
    PW_CASE(SILU, PW_MV(silu), .f32_ref = silu_ref_f32)
    PW_CASE(MISH, .f32 = mish_f32)
    PW_CASE(SOFTPLUS, .f32 = softplus_f32)
    PW_CASE(ELU, .f32 = elu_f32)
    PW_CASE(LEAKY_RELU, PW_MV(leaky_relu))
    PW_CASE(HARDSIGMOID, PW_MV(hardsigmoid))
    PW_CASE(HARDSWISH, PW_MV(hardswish))
    PW_CASE(HARDTANH, PW_MV(hardtanh), .i64 = hardtanh_i64)
    PW_CASE(THRESHOLD_BACKWARD, PW_MV(threshold_backward), .i64 = threshold_backward_i64)
    PW_CASE(SIGMOID_BACKWARD, PW_MV(sigmoid_backward))
    PW_CASE(TANH_BACKWARD, PW_MV(tanh_backward))
    PW_CASE(GELU_BACKWARD, PW_MV(gelu_backward), .f32_ref = gelu_backward_ref_f32)
    PW_CASE(SILU_BACKWARD, PW_MV(silu_backward), .f32_ref = silu_backward_ref_f32)
    PW_CASE(MISH_BACKWARD, .f32 = mish_backward_f32)
    PW_CASE(SOFTPLUS_BACKWARD, .f32 = softplus_backward_f32)
    PW_CASE(ELU_BACKWARD, .f32 = elu_backward_f32)
    PW_CASE(LEAKY_RELU_BACKWARD, PW_MV(leaky_relu_backward))
    PW_CASE(HARDSIGMOID_BACKWARD, PW_MV(hardsigmoid_backward))
    PW_CASE(HARDSWISH_BACKWARD, PW_MV(hardswish_backward))
    PW_CASE(HARDTANH_BACKWARD, PW_MV(hardtanh_backward), .i64 = hardtanh_backward_i64)
  default: return NULL;
  }
}
