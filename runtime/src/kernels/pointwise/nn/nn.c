/* Family NN (nrt/ops/nn.h): activations and elementwise losses beyond the
 * base list, as pointwise block functions. Formulas follow ATen's kernels
 * (aten/src/ATen/native/cpu/Activation.cpp, PointwiseOpsKernel.cpp,
 * BinaryOpsKernel.cpp, Loss.cpp) in the same association, so results agree
 * with PyTorch to rounding. Loss reductions (mean/sum, weights) are done by
 * the glue with the native reduction and multiply kernels. These are plain
 * loops the compiler vectorises; there is no separate fast path, so the
 * block functions are their own reference. */
#pragma GCC optimize("O3,no-trapping-math,no-math-errno")
#include "kernels/pointwise/pointwise.h"
#include "nrt/ops/nn.h"

#define NN_PI 3.14159265358979323846f

PW_F32(signbit, 1, signbit(x) ? 1.0f : 0.0f)
PW_I64(signbit, 1, x < 0)
PW_F32(angle, 1, x != x ? x : (x < 0.0f ? NN_PI : 0.0f))
PW_F32(threshold, 1, x <= s0 ? s1 : x)
PW_I64(threshold, 1, x <= s0 ? s1 : x)
PW_F32(hardshrink, 1, (x >= -s0 && x <= s0) ? 0.0f : x)
/* x * 0 keeps a NaN input NaN (ATen's form). */
PW_F32(softshrink, 1, x > s0 ? x - s0 : (x < -s0 ? x + s0 : x * 0.0f))
/* 0 at a NaN input, as ATen's vectorised CPU kernel (its scalar tail
 * passes the gradient). */
PW_F32(shrink_backward, 2, (y < -s0 || y > s0) ? x : 0.0f)

/* As ATen's vectorised kernel computes it, which every element but the
 * last numel % (2 * vector width) of a contiguous row takes; its scalar
 * tail differs in two places: with eps a NaN input is outside [lo, hi]
 * for the vector body (0) and not for the tail (NaN), and at x = 0 or 1
 * the tail multiplies dy by inf where the body divides by x (1 - x)
 * (x = -0.0: -inf for dy = 1, the tail +inf). */
static inline float logit_grad(float dy, float x) { return dy / (x * (1.0f - x)); }
static void logit_backward_f32(float *out, const float *a, const float *b, const float *c,
                               int64_t n, const nrt_launch *l) {
  if (l->params[0]) {
    float lo = (float)l->scalars[0].f, hi = (float)l->scalars[1].f;
    for (int64_t i = 0; i < n; i++) out[i] = (b[i] >= lo && b[i] <= hi) ? logit_grad(a[i], b[i]) : 0.0f;
  } else {
    for (int64_t i = 0; i < n; i++) out[i] = (b[i] < 0.0f || b[i] > 1.0f) ? NAN : logit_grad(a[i], b[i]);
  }
}

static inline float huber_one(float x, float y, float delta) {
  float z = fabsf(x - y);
  return z < delta ? 0.5f * z * z : delta * (z - 0.5f * delta);
}
PW_F32(huber, 2, huber_one(x, y, s0))
static inline float smooth_l1_one(float x, float y, float beta) {
  float z = fabsf(x - y);
  return z < beta ? 0.5f * z * z / beta : z - 0.5f * beta;
}
PW_F32(smooth_l1, 2, smooth_l1_one(x, y, s0))
/* ATen clamps each log term at -100 so that input 0 or 1 gives a finite
 * loss (and a finite gradient through the epsilon below). */
static inline float bce_one(float x, float t) {
  float l1 = log1pf(-x), l0 = logf(x);
  l1 = l1 < -100.0f ? -100.0f : l1;
  l0 = l0 < -100.0f ? -100.0f : l0;
  return (t - 1.0f) * l1 - t * l0;
}
PW_F32(bce, 2, bce_one(x, y))
PW_F32(prelu, 2, x > 0.0f ? x : y * x)
PW_F32(prelu_backward_weight, 2, y > 0.0f ? 0.0f : y * x)

static inline float huber_backward_one(float g, float x, float t, float delta, float norm) {
  float d = x - t;
  return d <= -delta ? -norm * g * delta : (d >= delta ? norm * g * delta : norm * d * g);
}
PW_F32(huber_backward, 3, huber_backward_one(x, y, z, s0, s1))
/* beta == 0 is L1's gradient, sign(d) (0 for a NaN d, as torch.sign); a
 * NaN d otherwise takes the quadratic branch and stays NaN. */
static inline float smooth_l1_backward_one(float g, float x, float t, float beta, float norm) {
  float d = x - t;
  if (beta == 0.0f) return norm * g * (float)((d > 0.0f) - (d < 0.0f));
  return d <= -beta ? -norm * g : (d >= beta ? norm * g : norm * d * g / beta);
}
PW_F32(smooth_l1_backward, 3, smooth_l1_backward_one(x, y, z, s0, s1))
static inline float bce_backward_one(float g, float x, float t) {
  float den = (1.0f - x) * x;
  return g * (x - t) / (den < 1e-12f ? 1e-12f : den); /* NaN stays NaN */
}
PW_F32(bce_backward, 3, bce_backward_one(x, y, z))
PW_F32(prelu_backward_input, 3, y > 0.0f ? x : z * x)
/* alpha multiplies vec1 before vec2, as ATen's addr: an alpha of 0 or 0.25
 * keeps a huge product from overflowing (0 * 3e38, not 0 * inf), while a
 * NaN in either vector still propagates. For float32 the product is fused
 * into beta * self, fma(alpha * vec1, vec2, beta * self): the compiler
 * contracts the CPU's vectorised expression so (probed on 2.13: self inf,
 * vec1 -1.5, vec2 3.4e38 is inf in the vector body, where the unfused
 * product overflows to -inf and gives NaN). Its scalar tail (the last
 * row length % vector width elements) and its bfloat16/float16 loops stay
 * unfused; there the fused result is the one float64 gives. */
PW_F32_MV(scaled_addcmul, 3,
          p0 ? (s1 * y) * z : (l->compute_dtype == NRT_FLOAT32 ? fmaf(s1 * y, z, s0 * x) : s0 * x + (s1 * y) * z))
PW_I64(scaled_addcmul, 3, p0 ? nrt_wmul(s1, nrt_wmul(y, z)) : nrt_wadd(nrt_wmul(s0, x), nrt_wmul(s1, nrt_wmul(y, z))))

const nrt_pw_kernel *nrt_pw_nn_kernel(nrt_op op) {
  /* Switch on (int)op: family ids are not enumerators of nrt_op. */
  switch ((int)op) {
    PW_CASE(SIGNBIT, .f32 = signbit_f32, .i64 = signbit_i64)
    PW_CASE(ANGLE, .f32 = angle_f32)
    PW_CASE(THRESHOLD, .f32 = threshold_f32, .i64 = threshold_i64)
    PW_CASE(HARDSHRINK, .f32 = hardshrink_f32)
    PW_CASE(SOFTSHRINK, .f32 = softshrink_f32)
    PW_CASE(SHRINK_BACKWARD, .f32 = shrink_backward_f32)
    PW_CASE(LOGIT_BACKWARD, .f32 = logit_backward_f32)
    PW_CASE(HUBER, .f32 = huber_f32)
    PW_CASE(SMOOTH_L1, .f32 = smooth_l1_f32)
    PW_CASE(BCE, .f32 = bce_f32)
    PW_CASE(PRELU, .f32 = prelu_f32)
    PW_CASE(PRELU_BACKWARD_WEIGHT, .f32 = prelu_backward_weight_f32)
    PW_CASE(HUBER_BACKWARD, .f32 = huber_backward_f32)
    PW_CASE(SMOOTH_L1_BACKWARD, .f32 = smooth_l1_backward_f32)
    PW_CASE(BCE_BACKWARD, .f32 = bce_backward_f32)
    PW_CASE(PRELU_BACKWARD_INPUT, .f32 = prelu_backward_input_f32)
    PW_CASE(SCALED_ADDCMUL, PW_MV(scaled_addcmul), .i64 = scaled_addcmul_i64)
  default: return NULL;
  }
}
