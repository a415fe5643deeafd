/* Binary and ternary pointwise ops: arithmetic, division families,
 * comparisons, logical and bitwise ops, where/addcmul/addcdiv/lerp/clamp.
 *
 * Integer semantics follow PyTorch on the CPU: arithmetic wraps, integer
 * division or remainder by zero is an error ("ZeroDivisionError"),
 * DIV_FLOOR and REMAINDER use Python's sign rules, shifts by a negative
 * amount or by the full width give 0 (left) or the sign fill (right).
 * Integer values arrive sign- or zero-extended to int64 and are truncated
 * back on store, so doing the work at 64 bits gives the narrow types'
 * results too (shifts included). */
#pragma GCC optimize("O3,no-trapping-math,no-math-errno")
#include "kernels/pointwise/pointwise.h"

/* ---- arithmetic -------------------------------------------------------- */
/* x + alpha * y is one fused multiply-add on the CPU (ATen's vectorised
 * add is fmadd(y, alpha, x); sub is add with -alpha): the product is not
 * rounded, so alpha 0.37 differs in about 1 element in 5 from the two-step
 * form, and 3e38 * 2 - 3e38 is 3e38, not inf. alpha = 1 is a plain sum
 * either way (kept as one, to vectorise without FMA units). */
PW_F32_MV(add, 2, s0 == 1.0f ? x + y : fmaf(s0, y, x))
PW_I64(add, 2, nrt_wadd(x, nrt_wmul(s0, y)))
PW_F32_MV(sub, 2, s0 == 1.0f ? x - y : fmaf(-s0, y, x))
PW_I64(sub, 2, nrt_wsub(x, nrt_wmul(s0, y)))
PW_F32_MV(mul, 2, x * y)
PW_I64(mul, 2, nrt_wmul(x, y))
PW_F32_MV(div, 2, x / y)

/* Rounds to the compute dtype when it is a 16-bit float. PyTorch runs
 * the rounding divisions of bfloat16/float16 in that type, one rounded
 * step at a time (trunc(a / b) truncates the already rounded quotient);
 * DIV_TRUNC and DIV_FLOOR repeat those steps to give the same results.
 * A broadcast one-element divisor takes ATen's *_cpu_reduced_float path
 * instead: the whole division in float32, rounded once on the store
 * (-115 / 1.984375 truncates to -57 there, to -58 stepwise). */
static inline float round_to(float v, nrt_dtype dt) {
  if (dt == NRT_BFLOAT16) return nrt_k_bf16_to_f32(nrt_k_f32_to_bf16(v));
  if (dt == NRT_FLOAT16) return nrt_k_f16_to_f32(nrt_k_f32_to_f16(v));
  return v;
}

static nrt_dtype stepwise_dtype(const nrt_launch *l) {
  return nrt_pw_broadcast_scalar(l, l->noutputs + 1) ? NRT_FLOAT32 : l->compute_dtype;
}

static void div_trunc_f32(float *out, const float *a, const float *b, const float *c, int64_t n,
                          const nrt_launch *l) {
  nrt_dtype dt = stepwise_dtype(l);
  if (dt == NRT_BFLOAT16 || dt == NRT_FLOAT16)
    for (int64_t i = 0; i < n; i++) out[i] = truncf(round_to(a[i] / b[i], dt));
  else
    for (int64_t i = 0; i < n; i++) out[i] = truncf(a[i] / b[i]);
}

/* Python floor division in float, as PyTorch computes it (div_floor in
 * ATen): through fmod so that results are exact when the quotient is. */
static inline float div_floor_one(float a, float b, nrt_dtype dt) {
  if (b == 0.0f) return a / b;
  float mod = fmodf(a, b); /* exact */
  float div = round_to(round_to(a - mod, dt) / b, dt);
  if (mod != 0.0f && (b < 0.0f) != (mod < 0.0f)) div = round_to(div - 1.0f, dt);
  float fl;
  if (div != 0.0f) {
    fl = floorf(div);
    if (round_to(div - fl, dt) > 0.5f) fl = round_to(fl + 1.0f, dt);
  } else {
    fl = copysignf(0.0f, a / b);
  }
  return fl;
}
static void div_floor_f32(float *out, const float *a, const float *b, const float *c, int64_t n,
                          const nrt_launch *l) {
  nrt_dtype dt = stepwise_dtype(l);
  for (int64_t i = 0; i < n; i++) out[i] = div_floor_one(a[i], b[i], dt);
}

static inline float remainder_one(float a, float b) {
  float mod = fmodf(a, b);
  if (mod != 0.0f && (b < 0.0f) != (mod < 0.0f)) mod += b;
  return mod;
}
PW_F32(remainder, 2, remainder_one(x, y))
PW_F32(fmod, 2, fmodf(x, y))

/* Integer division family. INT64_MIN / -1 overflows in C; it wraps to
 * INT64_MIN (remainder 0), which is what the narrower types get too. */
#define INT_DIV_FN(name, ...)                                                      \
  static int name##_i64(int64_t *out, const int64_t *a, const int64_t *b,         \
                        const int64_t *c, int64_t n, const nrt_launch *l) {        \
    for (int64_t i = 0; i < n; i++) {                                              \
      int64_t x = a[i], y = b[i];                                                  \
      if (y == 0) return 1;                                                        \
      __VA_ARGS__                                                                  \
    }                                                                              \
    return 0;                                                                      \
  }
INT_DIV_FN(div_trunc, out[i] = y == -1 ? nrt_wsub(0, x) : x / y;)
INT_DIV_FN(div_floor, {
  if (y == -1) {
    out[i] = nrt_wsub(0, x);
  } else {
    int64_t q = x / y, r = x % y;
    out[i] = (r != 0 && ((r < 0) != (y < 0))) ? q - 1 : q;
  }
})
INT_DIV_FN(remainder, {
  int64_t r = y == -1 ? 0 : x % y;
  out[i] = (r != 0 && ((r < 0) != (y < 0))) ? r + y : r;
})
INT_DIV_FN(fmod, out[i] = y == -1 ? 0 : x % y;)

PW_F32(pow, 2, powf(x, y))
PW_I64(pow, 2, nrt_ipow(x, y))
PW_F32(atan2, 2, atan2f(x, y))
PW_F32(hypot, 2, hypotf(x, y))
PW_F32_MV(copysign, 2, copysignf(x, y))
/* xlogy: NaN y wins even over x == 0 (ATen's order of tests). In float16
 * and bfloat16 the CPU's kernel takes log(y) in the 16-bit type (c10's
 * log of a reduced float returns one) before multiplying: two roundings. */
PW_F32(xlogy, 2, y != y ? y : (x == 0.0f ? 0.0f : x * nrt_pw_round16(logf(y), l->compute_dtype)))

PW_F32_MV(maximum, 2, pw_maxf(x, y))
PW_I64(maximum, 2, x > y ? x : y)
PW_F32_MV(minimum, 2, pw_minf(x, y))
PW_I64(minimum, 2, x < y ? x : y)
PW_F32_MV(fmax, 2, fmaxf(x, y))
PW_F32_MV(fmin, 2, fminf(x, y))

/* ---- comparisons and logic (0/1 results; the store converts) ------------ */
PW_F32_MV(eq, 2, (float)(x == y))
PW_I64(eq, 2, x == y)
PW_F32_MV(ne, 2, (float)(x != y))
PW_I64(ne, 2, x != y)
PW_F32_MV(lt, 2, (float)(x < y))
PW_I64(lt, 2, x < y)
PW_F32_MV(le, 2, (float)(x <= y))
PW_I64(le, 2, x <= y)
PW_F32_MV(gt, 2, (float)(x > y))
PW_I64(gt, 2, x > y)
PW_F32_MV(ge, 2, (float)(x >= y))
PW_I64(ge, 2, x >= y)
PW_F32_MV(logical_and, 2, (float)((x != 0.0f) & (y != 0.0f)))
PW_I64(logical_and, 2, (x != 0) & (y != 0))
PW_F32_MV(logical_or, 2, (float)((x != 0.0f) | (y != 0.0f)))
PW_I64(logical_or, 2, (x != 0) | (y != 0))
PW_F32_MV(logical_xor, 2, (float)((x != 0.0f) ^ (y != 0.0f)))
PW_I64(logical_xor, 2, (x != 0) ^ (y != 0))

PW_I64(bitwise_and, 2, x & y)
PW_I64(bitwise_or, 2, x | y)
PW_I64(bitwise_xor, 2, x ^ y)
PW_I64(shift_left, 2, (y < 0 || y >= 64) ? 0 : (int64_t)((uint64_t)x << y))
PW_I64(shift_right, 2, (y < 0 || y >= 64) ? (x < 0 ? -1 : 0) : x >> y)

/* ---- ternary --------------------------------------------------------------- */
PW_F32_MV(where, 3, x != 0.0f ? y : z)
PW_I64(where, 3, x != 0 ? y : z)
/* Same association as ATen: self + (value * t1) * t2, self + (value * t1) / t2;
 * addcmul's last multiply and the add are one fused multiply-add on the CPU
 * (vector body and scalar tail alike; a division cannot fuse). */
PW_F32_MV(addcmul, 3, fmaf(s0 * y, z, x))
PW_I64(addcmul, 3, nrt_wadd(x, nrt_wmul(nrt_wmul(s0, y), z)))
PW_F32_MV(addcdiv, 3, x + s0 * y / z)
/* ATen's lerp switches formula at |w| = 0.5 so that w = 1 gives end
 * exactly. Both forms are one fused multiply-add on the CPU (its vector
 * lerp_vec is fmadd(w < 0.5 ? w : w - 1, end - self, w < 0.5 ? self :
 * end), and its scalar lerp is contracted to the same): the product is
 * not rounded, so self 0.3, end -FLT_MAX, w -0.5 gives 1.7e38 where the
 * rounded product overflows to inf. */
PW_F32_MV(lerp, 3, fabsf(z) < 0.5f ? fmaf(z, y - x, x) : fmaf(z - 1.0f, y - x, y))
PW_F32_MV(clamp, 3, pw_minf(pw_maxf(x, y), z))
PW_I64(clamp, 3, (x < y ? y : x) > z ? z : (x < y ? y : x))

const nrt_pw_kernel *nrt_pw_binary_kernel(nrt_op op) {
  switch (op) {
    PW_CASE(ADD, PW_MV(add), .i64 = add_i64)
    PW_CASE(SUB, PW_MV(sub), .i64 = sub_i64)
    PW_CASE(MUL, PW_MV(mul), .i64 = mul_i64)
    PW_CASE(DIV, PW_MV(div))
    PW_CASE(DIV_TRUNC, .f32 = div_trunc_f32, .i64 = div_trunc_i64)
    PW_CASE(DIV_FLOOR, .f32 = div_floor_f32, .i64 = div_floor_i64)
    PW_CASE(REMAINDER, .f32 = remainder_f32, .i64 = remainder_i64)
    PW_CASE(FMOD, .f32 = fmod_f32, .i64 = fmod_i64)
    PW_CASE(POW, .f32 = pow_f32, .i64 = pow_i64)
    PW_CASE(ATAN2, .f32 = atan2_f32)
    PW_CASE(HYPOT, .f32 = hypot_f32)
    PW_CASE(COPYSIGN, PW_MV(copysign))
    PW_CASE(XLOGY, .f32 = xlogy_f32)
    PW_CASE(MAXIMUM, PW_MV(maximum), .i64 = maximum_i64)
    PW_CASE(MINIMUM, PW_MV(minimum), .i64 = minimum_i64)
    PW_CASE(FMAX, PW_MV(fmax), .i64 = maximum_i64)
    PW_CASE(FMIN, PW_MV(fmin), .i64 = minimum_i64)
    PW_CASE(EQ, PW_MV(eq), .i64 = eq_i64)
    PW_CASE(NE, PW_MV(ne), .i64 = ne_i64)
    PW_CASE(LT, PW_MV(lt), .i64 = lt_i64)
    PW_CASE(LE, PW_MV(le), .i64 = le_i64)
    PW_CASE(GT, PW_MV(gt), .i64 = gt_i64)
    PW_CASE(GE, PW_MV(ge), .i64 = ge_i64)
    PW_CASE(LOGICAL_AND, PW_MV(logical_and), .i64 = logical_and_i64)
    PW_CASE(LOGICAL_OR, PW_MV(logical_or), .i64 = logical_or_i64)
    PW_CASE(LOGICAL_XOR, PW_MV(logical_xor), .i64 = logical_xor_i64)
    PW_CASE(BITWISE_AND, .i64 = bitwise_and_i64)
    PW_CASE(BITWISE_OR, .i64 = bitwise_or_i64)
    PW_CASE(BITWISE_XOR, .i64 = bitwise_xor_i64)
    PW_CASE(SHIFT_LEFT, .i64 = shift_left_i64)
    PW_CASE(SHIFT_RIGHT, .i64 = shift_right_i64)
    PW_CASE(WHERE, PW_MV(where), .i64 = where_i64)
    PW_CASE(ADDCMUL, PW_MV(addcmul), .i64 = addcmul_i64)
    PW_CASE(ADDCDIV, PW_MV(addcdiv))
    PW_CASE(LERP, PW_MV(lerp))
    PW_CASE(CLAMP, PW_MV(clamp), .i64 = clamp_i64)
  default: return NULL;
  }
}
