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
  case NRT_OP_EXP: return nrt_cx_from_c(cexp(nrt_cx_to_c(z)));
  case NRT_OP_EXP2: return nrt_cx_from_c(cexp(nrt_cx_to_c(cx_scale(z, LN2))));
  case NRT_OP_EXPM1: return cx_expm1(z);
  case NRT_OP_LOG: return nrt_cx_from_c(clog(nrt_cx_to_c(z)));
  case NRT_OP_LOG2: return cx_scale(nrt_cx_from_c(clog(nrt_cx_to_c(z))), 1.0 / LN2);
  case NRT_OP_LOG10: return cx_scale(nrt_cx_from_c(clog(nrt_cx_to_c(z))), 1.0 / LN10);
  case NRT_OP_LOG1P: return cx_log1p(z);
  case NRT_OP_SQRT: return nrt_cx_from_c(csqrt(nrt_cx_to_c(z)));
  case NRT_OP_RSQRT: return nrt_cx_div(one, nrt_cx_from_c(csqrt(nrt_cx_to_c(z))));
  case NRT_OP_RECIPROCAL: return nrt_cx_div(one, z);
  case NRT_OP_SIN: return nrt_cx_from_c(csin(nrt_cx_to_c(z)));
  case NRT_OP_COS: return nrt_cx_from_c(ccos(nrt_cx_to_c(z)));
  case NRT_OP_TAN: return nrt_cx_from_c(ctan(nrt_cx_to_c(z)));
  case NRT_OP_SINH: return nrt_cx_from_c(csinh(nrt_cx_to_c(z)));
  case NRT_OP_COSH: return nrt_cx_from_c(ccosh(nrt_cx_to_c(z)));
  case NRT_OP_TANH: return nrt_cx_from_c(ctanh(nrt_cx_to_c(z)));
  case NRT_OP_ASIN: return nrt_cx_from_c(casin(nrt_cx_to_c(z)));
  case NRT_OP_ACOS: return nrt_cx_from_c(cacos(nrt_cx_to_c(z)));
  case NRT_OP_ATAN: return nrt_cx_from_c(catan(nrt_cx_to_c(z)));
  case NRT_OP_ASINH: return nrt_cx_from_c(casinh(nrt_cx_to_c(z)));
  case NRT_OP_ACOSH: return nrt_cx_from_c(cacosh(nrt_cx_to_c(z)));
  case NRT_OP_ATANH: return nrt_cx_from_c(catanh(nrt_cx_to_c(z)));
  case NRT_OP_SIGMOID: return nrt_cx_div(one, nrt_cx_add(one, nrt_cx_from_c(cexp(nrt_cx_to_c(nrt_cx_make(-z.re, -z.im))))));
  case NRT_OP_ISNAN: return nrt_cx_make(isnan(z.re) || isnan(z.im), 0.0);
  case NRT_OP_LOGICAL_NOT: return nrt_cx_make(z.re == 0.0 && z.im == 0.0, 0.0);
  default: return nrt_cx_make(NAN, NAN); /* not reached: nrt_cx_math checks p0 */
  }
}

/* std::pow(complex, complex) of libstdc++ (what PyTorch's CPU uses): 0 for
 * a zero base, else exp(w log z). */
static nrt_cx cx_pow(nrt_cx z, nrt_cx w) {
  if (z.re == 0.0 && z.im == 0.0) return nrt_cx_make(0.0, 0.0);
  return nrt_cx_from_c(cexp(nrt_cx_to_c(nrt_cx_mul(w, nrt_cx_from_c(clog(nrt_cx_to_c(z)))))));
}

/* PyTorch's special exponents use products and square roots, not exp/log. */
static nrt_cx cx_pow_scalar(nrt_cx z, double e) {
  const nrt_cx one = nrt_cx_make(1.0, 0.0);
  if (e == 2.0) return nrt_cx_mul(z, z);
  if (e == 3.0) return nrt_cx_mul(nrt_cx_mul(z, z), z);
  if (e == 0.5) return nrt_cx_from_c(csqrt(nrt_cx_to_c(z)));
  if (e == -0.5) return nrt_cx_div(one, nrt_cx_from_c(csqrt(nrt_cx_to_c(z))));
  if (e == -1.0) return nrt_cx_div(one, z);
  if (e == -2.0) return nrt_cx_div(one, nrt_cx_mul(z, z));
  return cx_pow(z, nrt_cx_make(e, 0.0));
}

static bool nonzero(nrt_cx z) { return z.re != 0.0 || z.im != 0.0; }


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
