/* Complex elementary functions and the ternary ops (nrt/ops/complex.h):
 * CX_MATH (p0 names the base op), CX_POW_SCALAR, CX_POW, CX_LOGICAL,
 * CX_LOGADDEXP, CX_ADDCMUL, CX_ADDCDIV, CX_LERP.
 *
 * The transcendental functions are C99's <complex.h> ones in double (their
 * branch cuts are the C/C++ standard's, which PyTorch's std::complex
 * functions share); expm1 and log1p are written out so that small
 * arguments keep their precision. One element at a time through
 * nrt_cx_for_each: this is also the reference path. */
#include <complex.h>
#include <math.h>

#include "kernels/complex/complex.h"

static inline double complex to_c(nrt_cx z) { return CMPLX(z.re, z.im); }
static inline nrt_cx from_c(double complex z) { return nrt_cx_make(creal(z), cimag(z)); }

static const double LN2 = 0.69314718055994530942, LN10 = 2.30258509299404568402;

/* e^z - 1 = (e^x - 1) cos y - 2 sin^2(y/2) + i e^x sin y */
static nrt_cx cx_expm1(nrt_cx z) {
  double s = sin(z.im / 2.0);
  return nrt_cx_make(expm1(z.re) * cos(z.im) - 2.0 * s * s, exp(z.re) * sin(z.im));
}

/* log(1 + z) = log|1 + z| + i arg(1 + z), |1 + z|^2 = 1 + (2x + x^2 + y^2) */
static nrt_cx cx_log1p(nrt_cx z) {
  double x = z.re, y = z.im;
  double t = 2.0 * x + x * x + y * y;
  double re = fabs(t) < 0.5 ? 0.5 * log1p(t) : log(hypot(1.0 + x, y));
  return nrt_cx_make(re, atan2(y, 1.0 + x));
}

static nrt_cx cx_scale(nrt_cx z, double s) { return nrt_cx_make(z.re * s, z.im * s); }

static nrt_cx cx_unary(int op, nrt_cx z) {
  const nrt_cx one = nrt_cx_make(1.0, 0.0);
  switch (op) {
  case NRT_OP_EXP: return from_c(cexp(to_c(z)));
  case NRT_OP_EXP2: return from_c(cexp(to_c(cx_scale(z, LN2))));
  case NRT_OP_EXPM1: return cx_expm1(z);
  case NRT_OP_LOG: return from_c(clog(to_c(z)));
  case NRT_OP_LOG2: return cx_scale(from_c(clog(to_c(z))), 1.0 / LN2);
  case NRT_OP_LOG10: return cx_scale(from_c(clog(to_c(z))), 1.0 / LN10);
  case NRT_OP_LOG1P: return cx_log1p(z);
  case NRT_OP_SQRT: return from_c(csqrt(to_c(z)));
  case NRT_OP_RSQRT: return nrt_cx_div(one, from_c(csqrt(to_c(z))));
  case NRT_OP_RECIPROCAL: return nrt_cx_div(one, z);
  case NRT_OP_SIN: return from_c(csin(to_c(z)));
  case NRT_OP_COS: return from_c(ccos(to_c(z)));
  case NRT_OP_TAN: return from_c(ctan(to_c(z)));
  case NRT_OP_SINH: return from_c(csinh(to_c(z)));
  case NRT_OP_COSH: return from_c(ccosh(to_c(z)));
  case NRT_OP_TANH: return from_c(ctanh(to_c(z)));
  case NRT_OP_ASIN: return from_c(casin(to_c(z)));
  case NRT_OP_ACOS: return from_c(cacos(to_c(z)));
  case NRT_OP_ATAN: return from_c(catan(to_c(z)));
  case NRT_OP_ASINH: return from_c(casinh(to_c(z)));
  case NRT_OP_ACOSH: return from_c(cacosh(to_c(z)));
  case NRT_OP_ATANH: return from_c(catanh(to_c(z)));
  case NRT_OP_SIGMOID: return nrt_cx_div(one, nrt_cx_add(one, from_c(cexp(to_c(nrt_cx_make(-z.re, -z.im))))));
  case NRT_OP_ISNAN: return nrt_cx_make(isnan(z.re) || isnan(z.im), 0.0);
  case NRT_OP_LOGICAL_NOT: return nrt_cx_make(z.re == 0.0 && z.im == 0.0, 0.0);
  default: return nrt_cx_make(NAN, NAN); /* not reached: nrt_cx_math checks p0 */
  }
}

/* std::pow(complex, complex) of libstdc++ (what PyTorch's CPU uses): 0 for
 * a zero base, else exp(w log z). */
static nrt_cx cx_pow(nrt_cx z, nrt_cx w) {
  if (z.re == 0.0 && z.im == 0.0) return nrt_cx_make(0.0, 0.0);
  return from_c(cexp(to_c(nrt_cx_mul(w, from_c(clog(to_c(z)))))));
}

/* PyTorch's special exponents use products and square roots, not exp/log. */
static nrt_cx cx_pow_scalar(nrt_cx z, double e) {
  const nrt_cx one = nrt_cx_make(1.0, 0.0);
  if (e == 2.0) return nrt_cx_mul(z, z);
  if (e == 3.0) return nrt_cx_mul(nrt_cx_mul(z, z), z);
  if (e == 0.5) return from_c(csqrt(to_c(z)));
  if (e == -0.5) return nrt_cx_div(one, from_c(csqrt(to_c(z))));
  if (e == -1.0) return nrt_cx_div(one, z);
  if (e == -2.0) return nrt_cx_div(one, nrt_cx_mul(z, z));
  return cx_pow(z, nrt_cx_make(e, 0.0));
}

static bool nonzero(nrt_cx z) { return z.re != 0.0 || z.im != 0.0; }

static bool cx_isnan(nrt_cx z) { return isnan(z.re) || isnan(z.im); }

/* log(1 + z) the way PyTorch's CPU build of c10 computes it (not cx_log1p,
 * which serves torch.log1p): exact for tiny z through the u - 1 == z test,
 * else log(u) rescaled by z / (u - 1) for the rounding of u = 1 + z. The
 * logaddexp formula below takes it, so its special values are the CPU's. */
static nrt_cx cx_log1p_rescaled(nrt_cx z) {
  nrt_cx u = nrt_cx_make(z.re + 1.0, z.im);
  if (u.re == 1.0 && u.im == 0.0) return z;
  nrt_cx log_u = from_c(clog(to_c(u)));
  nrt_cx um1 = nrt_cx_make(u.re - 1.0, u.im);
  if (um1.re == z.re && um1.im == z.im) return log_u;
  return nrt_cx_mul(log_u, nrt_cx_div(z, um1));
}

nrt_cx nrt_cx_log_add_exp(nrt_cx x, nrt_cx y) {
  nrt_cx mn, mx;
  /* a NaN operand is both ends, y's first (the running value of a scan) */
  if (cx_isnan(y)) mn = mx = y;
  else if (cx_isnan(x)) mn = mx = x;
  else if (x.re < y.re) mn = x, mx = y;
  else mn = y, mx = x;
  if (cx_isnan(mn)) return nrt_cx_make(NAN, NAN);
  if (!isfinite(mn.re) && mn.re == mx.re) {
    /* both -inf: the sum is 0 with no defined angle; the CPU keeps min.
       Both +inf: min - max would be NaN, so the sum is formed directly. */
    if (mn.re < 0) return mn;
    return from_c(clog(cexp(to_c(mn)) + cexp(to_c(mx))));
  }
  /* parts subtract and add separately (c10's operators), so an infinite
     imaginary part meets no 0 * inf */
  nrt_cx d = from_c(cexp(to_c(nrt_cx_sub(mn, mx))));
  return nrt_cx_add(cx_log1p_rescaled(d), mx);
}

static void cx_math_element(const nrt_launch *l, char *const *p) {
  const nrt_operand *o = l->operands;
  nrt_cx a = nrt_cx_load(p[1], o[1].dtype), r;
  switch ((int)l->op) {
  case NRT_OP(CX_MATH): r = cx_unary((int)l->params[0], a); break;
  case NRT_OP(CX_POW_SCALAR): r = cx_pow_scalar(a, l->scalars[0].f); break;
  case NRT_OP(CX_POW): r = cx_pow(a, nrt_cx_load(p[2], o[2].dtype)); break;
  case NRT_OP(CX_LOGICAL): {
    bool x = nonzero(a), y = nonzero(nrt_cx_load(p[2], o[2].dtype));
    bool v = l->params[0] == 0 ? (x && y) : l->params[0] == 1 ? (x || y) : (x != y);
    r = nrt_cx_make(v, 0.0);
    break;
  }
  case NRT_OP(CX_ADDCMUL):
  case NRT_OP(CX_ADDCDIV): {
    nrt_cx t1 = nrt_cx_load(p[2], o[2].dtype), t2 = nrt_cx_load(p[3], o[3].dtype);
    nrt_cx t = (int)l->op == NRT_OP(CX_ADDCMUL) ? nrt_cx_mul(t1, t2) : nrt_cx_div(t1, t2);
    /* value = s0 + i s1; a real value scales both parts alone, so an
       infinite part meets no 0 * inf from the zero imaginary part */
    nrt_cx v = nrt_cx_make(l->scalars[0].f, l->scalars[1].f);
    r = nrt_cx_add(a, v.im == 0.0 ? cx_scale(t, v.re) : nrt_cx_mul(t, v));
    break;
  }
  case NRT_OP(CX_LOGADDEXP): r = nrt_cx_log_add_exp(a, nrt_cx_load(p[2], o[2].dtype)); break;
  case NRT_OP(CX_LERP): {
    nrt_cx end = nrt_cx_load(p[2], o[2].dtype), w = nrt_cx_load(p[3], o[3].dtype);
    nrt_cx diff = nrt_cx_sub(end, a);
    if (hypot(w.re, w.im) < 0.5) r = nrt_cx_add(a, nrt_cx_mul(w, diff));
    else r = nrt_cx_sub(end, nrt_cx_mul(diff, nrt_cx_sub(nrt_cx_make(1.0, 0.0), w)));
    break;
  }
  default: return; /* not reached: nrt_complex_execute picks the op */
  }
  nrt_cx_store(p[0], o[0].dtype, r);
}

nrt_status nrt_cx_math(const nrt_launch *l) {
  if (l->noutputs != 1)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                           "%s: expected 1 output, got %d", nrt_op_name(l->op), l->noutputs);
  if ((int)l->op == NRT_OP(CX_MATH)) {
    switch (l->params[0]) {
    case NRT_OP_EXP: case NRT_OP_EXP2: case NRT_OP_EXPM1: case NRT_OP_LOG: case NRT_OP_LOG2:
    case NRT_OP_LOG10: case NRT_OP_LOG1P: case NRT_OP_SQRT: case NRT_OP_RSQRT: case NRT_OP_RECIPROCAL:
    case NRT_OP_SIN: case NRT_OP_COS: case NRT_OP_TAN: case NRT_OP_SINH: case NRT_OP_COSH:
    case NRT_OP_TANH: case NRT_OP_ASIN: case NRT_OP_ACOS: case NRT_OP_ATAN: case NRT_OP_ASINH:
    case NRT_OP_ACOSH: case NRT_OP_ATANH: case NRT_OP_SIGMOID: case NRT_OP_ISNAN: case NRT_OP_LOGICAL_NOT:
      break;
    default:
      return nrt_kernel_fail(NRT_ERROR_UNSUPPORTED,
                             "%s: p0 = %lld is not a supported complex function", nrt_op_name(l->op),
                             (long long)l->params[0]);
    }
  }
  if ((int)l->op == NRT_OP(CX_LOGICAL) && (l->params[0] < 0 || l->params[0] > 2))
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                           "%s: p0 = %lld outside 0..2", nrt_op_name(l->op), (long long)l->params[0]);
  return nrt_cx_for_each(l, cx_math_element);
}
