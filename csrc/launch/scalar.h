// Scalar arguments of an op (alpha, beta, clamp bounds, fill values,
// exponents, weights) as the kernels receive them.
#pragma once

#include <c10/core/Scalar.h>
#include <c10/core/ScalarType.h>

#include "runtime/device.h"

namespace torch_neuronx {

// `s` converted to the C++ type of `as` exactly as ATen's CPU kernels
// convert their Scalar arguments before computing (Scalar::to<T>, c10's
// checked_convert), so the device computes with the value the CPU computes
// with and refuses what the CPU refuses, at the op:
//  - a value T cannot hold raises the CPU's RuntimeError "value cannot be
//    converted to type T without overflow" (1e30 into float16, 100000 into
//    int16, a complex value with an imaginary part into a real T); +-inf and
//    NaN pass into floating types;
//  - a negative integer wraps into an unsigned T (clamp(uint8, min=-1)
//    clamps at 255, as on the CPU); a fraction truncates into an integer T
//    (index_add(int, alpha=0.5) adds nothing); nonzero is True for bool.
// Which T an op converts to is the op's CPU kernel's choice: usually its
// compute dtype, for some ops on float16/bfloat16 their float32 math type
// (at::toOpMathType); each call site names it.
// The result holds the converted value exactly: int64 for integral T (an
// unsigned 64-bit one as uint64), double, bool or complex<double>.
c10::Scalar converted_scalar(const c10::Scalar &s, c10::ScalarType as);

// converted_scalar(s, as) in the field the kernels read: .f for a floating
// or complex `as` (the real part; the imaginary part goes to *imag when
// given, for the COMPLEX family's s0 + i s1), .i for integral and bool.
// Whether a beta/alpha is zero (complex, integral or floating), which the
// GEMM-like ops treat as "ignore that operand".
inline bool scalar_is_zero(const c10::Scalar &s) {
  if (s.isComplex()) return s.toComplexDouble() == c10::complex<double>(0, 0);
  return s.isIntegral(true) ? s.toLong() == 0 : s.toDouble() == 0.0;
}

nrt_scalar checked_scalar(const c10::Scalar &s, c10::ScalarType as, nrt_scalar *imag = nullptr);

}  // namespace torch_neuronx
