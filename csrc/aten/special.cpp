// Native special functions (family SPECIAL: gamma family, Bessel, error
// functions, orthogonal polynomials, and extra elementwise math). Each op
// builds the TensorIterator its ATen structured meta builds (so
// broadcasting, promotion, out= and in-place rules are PyTorch's) and
// launches one pointwise kernel from kernels/special.c.
#include <cmath>

#include <ATen/TensorIterator.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/where.h>

#include "launch/launch.h"
#include "nrt/ops/special.h"
#include "registry/variants.h"

namespace torch_neuronx {
namespace {

using at::Tensor;
using at::TensorIterator;

nrt_scalar fscalar(double d) {
  nrt_scalar v;
  v.f = d;
  return v;
}

// ---- unary float ops: integer inputs promote to the default float type ----
Tensor unary_float(Tensor out, const Tensor &a, nrt_op op, std::initializer_list<int64_t> p = {}) {
  auto iter = TensorIterator::unary_float_op(out, a);
  launch_iter(iter, op, {}, p);
  return iter.output();
}

// name, ATen functional name, in-place name (nullptr: none), out name, op.
#define NEURON_SPECIAL_UNARY_TABLE(X)                                                                     \
  X(digamma, "digamma", "digamma_", "digamma.out", DIGAMMA)                                               \
  X(lgamma, "lgamma", "lgamma_", "lgamma.out", LGAMMA)                                                    \
  X(i0, "i0", "i0_", "i0.out", I0)                                                                        \
  X(i0e, "special_i0e", nullptr, "special_i0e.out", I0E)                                                  \
  X(i1, "special_i1", nullptr, "special_i1.out", I1)                                                      \
  X(i1e, "special_i1e", nullptr, "special_i1e.out", I1E)                                                  \
  X(mod_i0, "special_modified_bessel_i0", nullptr, "special_modified_bessel_i0.out", I0)                  \
  X(mod_i1, "special_modified_bessel_i1", nullptr, "special_modified_bessel_i1.out", I1)                  \
  X(mod_k0, "special_modified_bessel_k0", nullptr, "special_modified_bessel_k0.out", K0)                  \
  X(mod_k1, "special_modified_bessel_k1", nullptr, "special_modified_bessel_k1.out", K1)                  \
  X(scaled_k0, "special_scaled_modified_bessel_k0", nullptr, "special_scaled_modified_bessel_k0.out", K0E) \
  X(scaled_k1, "special_scaled_modified_bessel_k1", nullptr, "special_scaled_modified_bessel_k1.out", K1E) \
  X(bessel_j0, "special_bessel_j0", nullptr, "special_bessel_j0.out", BESSEL_J0)                          \
  X(bessel_j1, "special_bessel_j1", nullptr, "special_bessel_j1.out", BESSEL_J1)                          \
  X(bessel_y0, "special_bessel_y0", nullptr, "special_bessel_y0.out", BESSEL_Y0)                          \
  X(bessel_y1, "special_bessel_y1", nullptr, "special_bessel_y1.out", BESSEL_Y1)                          \
  X(spherical_j0, "special_spherical_bessel_j0", nullptr, "special_spherical_bessel_j0.out", SPHERICAL_BESSEL_J0) \
  X(airy_ai, "special_airy_ai", nullptr, "special_airy_ai.out", AIRY_AI)                                  \
  X(erfcx, "special_erfcx", nullptr, "special_erfcx.out", ERFCX)                                          \
  X(log_ndtr, "special_log_ndtr", nullptr, "special_log_ndtr.out", LOG_NDTR)                              \
  X(ndtri, "special_ndtri", nullptr, "special_ndtri.out", NDTRI)                                          \
  X(entr, "special_entr", nullptr, "special_entr.out", ENTR)

#define DEFINE_UNARY(name, fname, iname, oname, OP) \
  Tensor name##_into(Tensor out, const Tensor &a) { return unary_float(out, a, NRT_OP(OP)); }
NEURON_SPECIAL_UNARY_TABLE(DEFINE_UNARY)
#undef DEFINE_UNARY

// sinc: real dtypes run the SINC kernel. A complex input is composed of
// native complex ops in the CPU kernel's own steps: product = pi * z as a
// full complex product with (pi, 0) (so an infinite part meets 0 * inf as
// on the CPU), sin(product) / product, and exactly 1 where z == 0.
Tensor sinc_into(Tensor out, const Tensor &a) {
  if (!a.is_complex()) return unary_float(out, a, NRT_OP(SINC));
  TORCH_CHECK_NOT_IMPLEMENTED(a.scalar_type() != at::kComplexHalf, "\"sinc_cpu\" not implemented for '",
                              a.scalar_type(), "'");
  TORCH_CHECK(!out.defined() || at::canCast(a.scalar_type(), out.scalar_type()), "result type ", a.scalar_type(),
              " can't be cast to the desired output type ", out.scalar_type());
  Tensor product = a.mul(c10::Scalar(M_PI));
  return at::where(a.eq(0), at::ones({}, a.options()), product.sin().div(product));
}

// polygamma(n, x): the order is an integer parameter of the kernel.
void check_polygamma_order(int64_t n) {
  TORCH_CHECK(n >= 0, "polygamma(n, x) does not support negative n.");
}
Tensor polygamma_into(Tensor out, int64_t n, const Tensor &a) {
  check_polygamma_order(n);
  return unary_float(out, a, NRT_OP(POLYGAMMA), {n});
}
// polygamma_ takes (self, n) where the other overloads take (n, self), so
// Variants cannot derive it.
Tensor &polygamma_ip(Tensor &a, int64_t n) {
  polygamma_into(a, n, a);
  return a;
}

// round(decimals=d). decimals == 0 is plain round (ATen takes round_stub
// then, which keeps integers); otherwise the kernel scales by 10^|d| in
// float32 as ATen's does. Integers are refused as on the CPU.
Tensor round_decimals_into(Tensor out, const Tensor &a, int64_t decimals) {
  auto iter = TensorIterator::unary_op(out, a);
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(iter.common_dtype()), "\"round_cpu\" not implemented for '",
                              iter.common_dtype(), "'");
  if (decimals == 0) {
    launch_iter(iter, NRT_OP_ROUND);
  } else {
    double ten = std::pow(10.0, static_cast<double>(decimals < 0 ? -decimals : decimals));
    launch_iter(iter, NRT_OP(ROUND_DECIMALS), {fscalar(ten)}, {decimals < 0});
  }
  return iter.output();
}

// frexp: two outputs. The two-output iterator ATen builds checks and
// resizes both; each output is then written by its own launch.
std::tuple<Tensor, Tensor> frexp_into(Tensor mantissa, Tensor exponent, const Tensor &a) {
  if (!mantissa.defined()) {
    mantissa = at::empty_like(a);
    exponent = at::empty_like(a, a.options().dtype(at::kInt));
  }
  TORCH_CHECK(at::isFloatingType(a.scalar_type()), "torch.frexp() only supports floating-point dtypes");
  TORCH_CHECK(mantissa.dtype() == a.dtype(), "torch.frexp() expects mantissa to have dtype ", a.dtype(),
              " but got ", mantissa.dtype());
  TORCH_CHECK(exponent.dtype() == at::kInt, "torch.frexp() expects exponent to have int dtype but got ",
              exponent.dtype());
  auto both = at::TensorIteratorConfig()
                  .add_output(mantissa)
                  .add_output(exponent)
                  .add_const_input(a)
                  .check_all_same_dtype(false)
                  .set_check_mem_overlap(true)
                  .build();
  for (auto [t, op] : {std::pair<Tensor *, nrt_op>{&mantissa, NRT_OP(FREXP_MANTISSA)},
                       std::pair<Tensor *, nrt_op>{&exponent, NRT_OP(FREXP_EXPONENT)}}) {
    auto iter = at::TensorIteratorConfig()
                    .add_output(*t)
                    .add_const_input(a)
                    .check_all_same_dtype(false)
                    .promote_inputs_to_common_dtype(true)
                    .build();
    launch_iter(iter, op);
  }
  return {mantissa, exponent};
}

// ---- binary ops -----------------------------------------------------------------
enum class BKind { Float, Plain };

Tensor binary(Tensor out, const Tensor &a, const Tensor &b, nrt_op op, BKind k) {
  auto iter = k == BKind::Float ? TensorIterator::binary_float_op(out, a, b) : TensorIterator::binary_op(out, a, b);
  launch_iter(iter, op);
  return iter.output();
}

// Float ops whose integer inputs promote: name, functional, in-place, out, op.
#define NEURON_SPECIAL_BINARY_TABLE(X)                                                                        \
  X(igamma, "igamma", "igamma_", "igamma.out", IGAMMA)                                                        \
  X(igammac, "igammac", "igammac_", "igammac.out", IGAMMAC)                                                   \
  X(xlog1py, "special_xlog1py", nullptr, "special_xlog1py.out", XLOG1PY)                                      \
  X(zeta, "special_zeta", nullptr, "special_zeta.out", ZETA)                                                  \
  X(cheb_t, "special_chebyshev_polynomial_t", nullptr, "special_chebyshev_polynomial_t.out", CHEBYSHEV_T)     \
  X(cheb_u, "special_chebyshev_polynomial_u", nullptr, "special_chebyshev_polynomial_u.out", CHEBYSHEV_U)     \
  X(cheb_v, "special_chebyshev_polynomial_v", nullptr, "special_chebyshev_polynomial_v.out", CHEBYSHEV_V)     \
  X(cheb_w, "special_chebyshev_polynomial_w", nullptr, "special_chebyshev_polynomial_w.out", CHEBYSHEV_W)     \
  X(scheb_t, "special_shifted_chebyshev_polynomial_t", nullptr, "special_shifted_chebyshev_polynomial_t.out", \
    SHIFTED_CHEBYSHEV_T)                                                                                      \
  X(scheb_u, "special_shifted_chebyshev_polynomial_u", nullptr, "special_shifted_chebyshev_polynomial_u.out", \
    SHIFTED_CHEBYSHEV_U)                                                                                      \
  X(scheb_v, "special_shifted_chebyshev_polynomial_v", nullptr, "special_shifted_chebyshev_polynomial_v.out", \
    SHIFTED_CHEBYSHEV_V)                                                                                      \
  X(scheb_w, "special_shifted_chebyshev_polynomial_w", nullptr, "special_shifted_chebyshev_polynomial_w.out", \
    SHIFTED_CHEBYSHEV_W)                                                                                      \
  X(hermite_h, "special_hermite_polynomial_h", nullptr, "special_hermite_polynomial_h.out", HERMITE_H)        \
  X(hermite_he, "special_hermite_polynomial_he", nullptr, "special_hermite_polynomial_he.out", HERMITE_HE)    \
  X(laguerre_l, "special_laguerre_polynomial_l", nullptr, "special_laguerre_polynomial_l.out", LAGUERRE_L)    \
  X(legendre_p, "special_legendre_polynomial_p", nullptr, "special_legendre_polynomial_p.out", LEGENDRE_P)

// The into function of a binary op computed by INTO(out, a, b, extra...).
#define DEFINE_BINARY_INTO(name, INTO, ...)                        \
  Tensor name##_into(Tensor out, const Tensor &a, const Tensor &b) { \
    return INTO(out, a, b, __VA_ARGS__);                            \
  }

#define DEFINE_BINARY(name, fname, iname, oname, OP) DEFINE_BINARY_INTO(name, binary, NRT_OP(OP), BKind::Float)
NEURON_SPECIAL_BINARY_TABLE(DEFINE_BINARY)
#undef DEFINE_BINARY

// logaddexp2 and nextafter: binary_op typing, floating dtypes only (the
// CPU kernels are not built for integers).
Tensor float_only_binary(Tensor out, const Tensor &a, const Tensor &b, nrt_op op, const char *cpu_name) {
  auto iter = TensorIterator::binary_op(out, a, b);
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(iter.common_dtype()), "\"", cpu_name, "\" not implemented for '",
                              iter.common_dtype(), "'");
  launch_iter(iter, op);
  return iter.output();
}
DEFINE_BINARY_INTO(logaddexp2, float_only_binary, NRT_OP(LOGADDEXP2), "logaddexp2_cpu")
DEFINE_BINARY_INTO(nextafter, float_only_binary, NRT_OP(NEXTAFTER), "nextafter_cpu")

// heaviside: inputs (and out=) must share one dtype; any real dtype.
void check_heaviside(const Tensor &a, const Tensor &v, const Tensor *out) {
  TORCH_CHECK(!a.is_complex() && !v.is_complex() && (out == nullptr || !out->is_complex()),
              "heaviside is not yet implemented for complex tensors.");
  TORCH_CHECK(a.dtype() == v.dtype() && (out == nullptr || out->dtype() == a.dtype()),
              "heaviside is not yet implemented for tensors with different dtypes.");
}
Tensor heaviside_into(Tensor out, const Tensor &a, const Tensor &v) {
  check_heaviside(a, v, out.defined() ? &out : nullptr);
  return binary(out, a, v, NRT_OP(HEAVISIDE), BKind::Plain);
}

// gcd / lcm: integer dtypes only (the integer kernel; a float input is
// rejected with the CPU's wording).
Tensor gcd_lcm_into(Tensor out, const Tensor &a, const Tensor &b, nrt_op op, const char *name) {
  auto iter = at::TensorIterator::borrowing_binary_op(out, a, b);
  TORCH_CHECK(at::isIntegralType(iter.common_dtype(), /*includeBool=*/false), "\"", name,
              "_cpu\" not implemented for '", c10::toString(iter.common_dtype()), "'");
  launch_iter(iter, op);
  return iter.output();
}
DEFINE_BINARY_INTO(gcd, gcd_lcm_into, NRT_OP(GCD), "gcd")
DEFINE_BINARY_INTO(lcm, gcd_lcm_into, NRT_OP(LCM), "lcm")
#undef DEFINE_BINARY_INTO

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
#define REG_TABLE(name, fname, iname, oname, OP) NEURON_VARIANTS(m, name##_into, fname, iname, oname);
  NEURON_SPECIAL_UNARY_TABLE(REG_TABLE)
  NEURON_SPECIAL_BINARY_TABLE(REG_TABLE)
#undef REG_TABLE
  NEURON_VARIANTS(m, sinc_into, "sinc", "sinc_", "sinc.out");
  NEURON_VARIANTS(m, logaddexp2_into, "logaddexp2", nullptr, "logaddexp2.out");
  NEURON_VARIANTS(m, nextafter_into, "nextafter", "nextafter_", "nextafter.out");
  NEURON_VARIANTS(m, heaviside_into, "heaviside", "heaviside_", "heaviside.out");
  NEURON_VARIANTS(m, polygamma_into, "polygamma", nullptr, "polygamma.out");
  NEURON_IMPL(m, "polygamma_", polygamma_ip);
  NEURON_VARIANTS(m, round_decimals_into, "round.decimals", "round_.decimals", "round.decimals_out");
  NEURON_VARIANTS(m, gcd_into, "gcd", "gcd_", "gcd.out");
  NEURON_VARIANTS(m, lcm_into, "lcm", "lcm_", "lcm.out");
  NEURON_VARIANTS(m, frexp_into, "frexp.Tensor", nullptr, "frexp.Tensor_out");
}

}  // namespace torch_neuronx
