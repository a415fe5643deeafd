#include "launch/scalar.h"

#include <type_traits>

#include <ATen/Dispatch.h>
#include <c10/util/complex.h>

namespace torch_neuronx {
namespace {

// A converted value as a Scalar that holds it exactly.
template <typename T>
c10::Scalar exact_scalar(T v) {
  if constexpr (c10::is_complex<T>::value) {
    return c10::Scalar(c10::complex<double>(static_cast<double>(v.real()), static_cast<double>(v.imag())));
  } else if constexpr (std::is_same_v<T, bool>) {
    return c10::Scalar(v);
  } else if constexpr (std::is_integral_v<T>) {
    return c10::Scalar(static_cast<int64_t>(v));
  } else {
    return c10::Scalar(static_cast<double>(v));
  }
}

}  // namespace

c10::Scalar converted_scalar(const c10::Scalar &s, c10::ScalarType as) {
  switch (as) {
    // The unsigned types beyond uint8 are outside the ATen dispatch macros.
    case c10::kUInt16: return c10::Scalar(static_cast<int64_t>(s.to<uint16_t>()));
    case c10::kUInt32: return c10::Scalar(static_cast<int64_t>(s.to<uint32_t>()));
    case c10::kUInt64: return c10::Scalar(s.to<uint64_t>());
    default: break;
  }
  c10::Scalar r;
  AT_DISPATCH_ALL_TYPES_AND_COMPLEX_AND4(c10::kBool, c10::kHalf, c10::kBFloat16, c10::kComplexHalf, as,
                                         "scalar argument", [&] { r = exact_scalar(s.to<scalar_t>()); });
  return r;
}

nrt_scalar checked_scalar(const c10::Scalar &s, c10::ScalarType as, nrt_scalar *imag) {
  c10::Scalar c = converted_scalar(s, as);
  nrt_scalar v;
  if (imag) imag->f = 0.0;
  if (c.isComplex()) {
    c10::complex<double> z = c.toComplexDouble();
    v.f = z.real();
    if (imag) imag->f = z.imag();
  } else if (c.isFloatingPoint()) {
    v.f = c.toDouble();
  } else if (as == c10::kUInt64) {
    v.i = static_cast<int64_t>(c.to<uint64_t>());  // the bits of values past INT64_MAX
  } else {
    v.i = c.toLong();
  }
  return v;
}

}  // namespace torch_neuronx
