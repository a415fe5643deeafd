/* Complex elementary functions and the ternary ops (nrt/ops/complex.h):
 * CX_MATH (p0 names the base op), CX_POW_SCALAR, CX_POW, CX_LOGICAL,
 * CX_LOGADDEXP, CX_ADDCMUL, CX_ADDCDIV, CX_LERP.
 *
 * The transcendental functions are C99's <complex.h> ones in double (their
 * branch cuts are the C/C++ standard's, which PyTorch's std::complex
 * functions share); complex64 results take the float ones where the CPU's
 * special values or rounding depend on it (pow, sqrt, rsqrt, reciprocal,
 * exp2, log1p); expm1 and log1p are written out as c10 writes them. One element at a time through
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

static nrt_cx cx_scale(nrt_cx z, double s) { return nrt_cx_make(z.re * s, z.im * s); }

/* ---- complex64 in float --------------------------------------------------
 * The CPU computes complex64 with c10::complex<float>: its products and
 * quotients round in float (cxf, complex.h) and its pow is glibc's cpowf.
 * Where that shows beyond the tolerance, the kernel does the same:
 * (3.4e38 + 3.4e38i)^2 is NaN + inf i in float (inf - inf) but finite in
 * double, and cpowf's float rounding puts (-3)^5 at -243.00003 - 0.00016i
 * where cpow gives -243 + 1e-13i. Wider dtypes compute in double
 * (complex<double>). */
/* Whether a result of this dtype is computed in float (complex<float>). */
static bool single_precision(nrt_dtype dt) { return dt == NRT_COMPLEX64 || dt == NRT_COMPLEX32; }

/* std::pow(complex, complex) of PyTorch's CPU: libstdc++ hands it to C99's
 * cpowf / cpow (glibc: cexp(w * clog(z)) with Annex G's special values, so
 * 0 ** w is inf + NaN i for Re w < 0, NaN + NaN i for w = 0 or a NaN or
 * imaginary w, and 0 only for Re w > 0). */
static nrt_cx cx_pow(nrt_cx z, nrt_cx w, bool single) {
  if (single) {
    float complex r = cpowf(CMPLXF((float)z.re, (float)z.im), CMPLXF((float)w.re, (float)w.im));
    return nrt_cx_make(crealf(r), cimagf(r));
  }
  return nrt_cx_from_c(cpow(nrt_cx_to_c(z), nrt_cx_to_c(w)));
}

/* csqrtf for a complex64 result (the CPU's std::sqrt of complex<float>,
 * bit for bit), csqrt otherwise. */
static nrt_cx cx_sqrt(nrt_cx z, bool single) {
  if (single) {
    float complex r = csqrtf(CMPLXF((float)z.re, (float)z.im));
    return nrt_cx_make(crealf(r), cimagf(r));
  }
  return nrt_cx_from_c(csqrt(nrt_cx_to_c(z)));
}

/* c10's log1p (nrt_cx_log1p) in float, for complex64: the CPU's vector
 * kernel maps the same scalar function, so every element takes it. */
static nrt_cx cx_log1p_single(nrt_cx z0) {
  cxf z = cxf_of(z0), u = {z.re + 1.0f, z.im};
  if (u.re == 1.0f && u.im == 0.0f) return cxf_to(z);
  float complex lu = clogf(CMPLXF(u.re, u.im));
  cxf log_u = {crealf(lu), cimagf(lu)}, um1 = {u.re - 1.0f, u.im};
  if (um1.re == z.re && um1.im == z.im) return cxf_to(log_u);
  return cxf_to(cxf_mul_fma(log_u, cxf_div(z, um1)));
}

/* 2^z = exp(ln 2 * z): complex64 scales by ln 2 in float first (both CPU
 * paths), which moves the angle of a huge imaginary part (2^(1e18 i)). */
static nrt_cx cx_exp2(nrt_cx z, bool single) {
  if (single) {
    const float ln2 = 0.693147180559945309f;
    float complex r = cexpf(CMPLXF((float)z.re * ln2, (float)z.im * ln2));
    return nrt_cx_make(crealf(r), cimagf(r));
  }
  return nrt_cx_from_c(cexp(nrt_cx_to_c(cx_scale(z, LN2))));
}

static nrt_cx cx_unary(int op, nrt_cx z, bool single) {
  const nrt_cx one = nrt_cx_make(1.0, 0.0);
  switch (op) {
  case NRT_OP_EXP: return nrt_cx_from_c(cexp(nrt_cx_to_c(z)));
  case NRT_OP_EXP2: return cx_exp2(z, single);
  case NRT_OP_EXPM1: return cx_expm1(z);
  case NRT_OP_LOG: return nrt_cx_from_c(clog(nrt_cx_to_c(z)));
  case NRT_OP_LOG2: return cx_scale(nrt_cx_from_c(clog(nrt_cx_to_c(z))), 1.0 / LN2);
  case NRT_OP_LOG10: return cx_scale(nrt_cx_from_c(clog(nrt_cx_to_c(z))), 1.0 / LN10);
  case NRT_OP_LOG1P: return single ? cx_log1p_single(z) : nrt_cx_log1p(z);
  case NRT_OP_SQRT: return cx_sqrt(z, single);
  /* complex64: the CPU's c10 quotient in float (1 / csqrtf(z) for rsqrt) */
  case NRT_OP_RSQRT:
    return single ? cxf_to(cxf_div((cxf){1.0f, 0.0f}, cxf_of(cx_sqrt(z, true)))) : nrt_cx_div(one, cx_sqrt(z, false));
  case NRT_OP_RECIPROCAL: return single ? cxf_to(cxf_div((cxf){1.0f, 0.0f}, cxf_of(z))) : nrt_cx_div(one, z);
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

/* z ** e the way ATen's pow.Tensor_Scalar computes it (Pow.cpp,
 * PowKernel.cc): the exponents 0.5, -0.5 and -1 run its sqrt, rsqrt and
 * reciprocal kernels, 2, 3 and -2 products in the compute dtype, any other
 * exponent std::pow with e cast to the compute dtype. (0 and 1, a fill and a
 * copy, are the glue's.) `vec`: the CPU computes this element in its vector
 * body, whose products are separate roundings; its scalar function's are
 * fused (3.4e38 + 3.4e38i)^2 = -inf + inf i there, NaN + inf i in the body. */
static nrt_cx cx_pow_scalar(nrt_cx z, nrt_cx e, bool single, bool vec) {
  const cxf one = {1.0f, 0.0f};
  if (e.im == 0.0) {
    if (e.re == 0.5) return cx_sqrt(z, single);
    if (e.re == -0.5) return cx_unary(NRT_OP_RSQRT, z, single);
    if (e.re == -1.0) return cx_unary(NRT_OP_RECIPROCAL, z, single);
    if (e.re == 2.0 || e.re == 3.0 || e.re == -2.0) {
      if (single) {
        cxf f = cxf_of(z), sq = vec ? cxf_mul(f, f) : cxf_mul_fma(f, f);
        if (e.re == 2.0) return cxf_to(sq);
        /* the scalar function's second product is not fused (GCC's choice
           in ATen's build; bit for bit against the CPU) */
        if (e.re == 3.0) return cxf_to(cxf_mul(sq, f));
        return cxf_to(cxf_div(one, sq));
      }
      nrt_cx sq = nrt_cx_mul(z, z);
      if (e.re == 2.0) return sq;
      if (e.re == 3.0) return nrt_cx_mul(sq, z);
      return nrt_cx_div(nrt_cx_make(1.0, 0.0), sq);
    }
  }
  return cx_pow(z, e, single);
}

/* addcmul / addcdiv as ATen's kernel writes them, self + value * t1 * t2
 * (or / t2): value * t1 first, the value a complex even when real, so an
 * infinite part of t1 meets 0 * inf from value's zero imaginary part
 * (NaN + NaN i where value * (t1 * t2) is inf). complex64 rounds each
 * step in float, with the textbook products of its vector body and of a
 * contiguous row's scalar tail; `fused` (nrt_cx_for_each_strided_groups)
 * marks the pairs of a strided row GCC vectorised, whose products are
 * contracted into fmas (-3e38 * 1e30 + inf is inf there, NaN elsewhere).
 * Quotients are c10's operator/ unfused (nrt_cx_div's steps in float);
 * complex128 keeps double's textbook products (not measured fused). */
static cxf cxf_div_plain(cxf x, cxf y) {
  float a = x.re, b = x.im, c = y.re, d = y.im;
  float ac = fabsf(c), ad = fabsf(d);
  if (ac >= ad) {
    if (ac == 0.0f && ad == 0.0f) return (cxf){a / ac, b / ad};
    float rat = d / c, scl = 1.0f / (c + d * rat);
    return (cxf){(a + b * rat) * scl, (b - a * rat) * scl};
  }
  float rat = c / d, scl = 1.0f / (d + c * rat);
  return (cxf){(a * rat + b) * scl, (b * rat - a) * scl};
}

static nrt_cx cx_addc(nrt_cx a, nrt_cx v, nrt_cx t1, nrt_cx t2, bool mul, bool single, bool fused) {
  fused = fused && mul; /* addcdiv's loop (c10's branchy operator/) measured textbook throughout */
  if (single) {
    cxf p = fused ? cxf_mul_fma(cxf_of(v), cxf_of(t1)) : cxf_mul(cxf_of(v), cxf_of(t1));
    cxf q = !mul ? cxf_div_plain(p, cxf_of(t2)) : fused ? cxf_mul_fma(p, cxf_of(t2)) : cxf_mul(p, cxf_of(t2));
    cxf s = cxf_of(a);
    return nrt_cx_make(s.re + q.re, s.im + q.im);
  }
  nrt_cx p = nrt_cx_mul(v, t1);
  return nrt_cx_add(a, mul ? nrt_cx_mul(p, t2) : nrt_cx_div(p, t2));
}

static bool nonzero(nrt_cx z) { return z.re != 0.0 || z.im != 0.0; }


static void cx_math_element(const nrt_launch *l, char *const *p, bool vec) {
  const nrt_operand *o = l->operands;
  nrt_cx a = nrt_cx_load(p[1], o[1].dtype), r;
  switch ((int)l->op) {
  case NRT_OP(CX_MATH): r = cx_unary((int)l->params[0], a, single_precision(o[0].dtype)); break;
  case NRT_OP(CX_POW_SCALAR):
    r = cx_pow_scalar(a, nrt_cx_make(l->scalars[0].f, l->scalars[1].f), single_precision(o[0].dtype), vec);
    break;
  case NRT_OP(CX_POW): {
    nrt_cx b = nrt_cx_load(p[2], o[2].dtype);
    bool single = single_precision(o[0].dtype);
    /* p0 = 1: b is pow.Tensor_Scalar's exponent (a wrapped number), with
       its special forms; p0 = 2: a is pow.Scalar's base, and a base of 1
       is a fill of 1 on the CPU, whatever the exponent */
    if (l->params[0] == 1) r = cx_pow_scalar(a, b, single, vec);
    else if (l->params[0] == 2 && a.re == 1.0 && a.im == 0.0) r = nrt_cx_make(1.0, 0.0);
    else r = cx_pow(a, b, single);
    break;
  }
  case NRT_OP(CX_LOGICAL): {
    bool x = nonzero(a), y = nonzero(nrt_cx_load(p[2], o[2].dtype));
    bool v = l->params[0] == 0 ? (x && y) : l->params[0] == 1 ? (x || y) : (x != y);
    r = nrt_cx_make(v, 0.0);
    break;
  }
  case NRT_OP(CX_ADDCMUL):
  case NRT_OP(CX_ADDCDIV): {
    nrt_cx t1 = nrt_cx_load(p[2], o[2].dtype), t2 = nrt_cx_load(p[3], o[3].dtype);
    nrt_cx v = nrt_cx_make(l->scalars[0].f, l->scalars[1].f);
    r = cx_addc(a, v, t1, t2, (int)l->op == NRT_OP(CX_ADDCMUL), single_precision(o[0].dtype), vec);
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
  if (((int)l->op == NRT_OP(CX_LOGICAL) || (int)l->op == NRT_OP(CX_POW)) && (l->params[0] < 0 || l->params[0] > 2))
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                           "%s: p0 = %lld outside 0..2", nrt_op_name(l->op), (long long)l->params[0]);
  /* p1 of the pow ops: the CPU's vector block (nrt_cx_for_each_split) */
  int op = (int)l->op;
  /* ATen's addcmul scalar loop over strided rows runs in pairs of
     complex<float> (its AVX-512 build); a contiguous row's tail is not */
  if ((op == NRT_OP(CX_ADDCMUL) || op == NRT_OP(CX_ADDCDIV)) && single_precision(l->operands[0].dtype))
    return nrt_cx_for_each_strided_groups(l, cx_math_element, 2);
  bool pow = op == NRT_OP(CX_POW) || op == NRT_OP(CX_POW_SCALAR);
  return nrt_cx_for_each_split(l, cx_math_element, pow ? l->params[1] : 0);
}
