// Turning a built TensorIterator into a runtime launch. PyTorch decided the
// shape, broadcasting, type promotion and output allocation; this only
// describes the operands to the runtime and enqueues the kernel.
#pragma once

#include <initializer_list>

#include "launch/operand.h"
#include "runtime/device.h"

namespace at {
struct TensorIteratorBase;
}

namespace torch_neuronx {

// Enqueues `op` over the iterator on the current stream of its device.
// CPU scalar operands (wrapped numbers) are materialised on the device in
// the common dtype first. Empty iterations launch nothing.
void launch_iter(at::TensorIteratorBase &iter, nrt_op op, std::initializer_list<nrt_scalar> scalars = {},
                 std::initializer_list<int64_t> params = {});

// Enqueues a filled descriptor on the current stream of `device`. The
// general kernels read real dtypes only: a complex operand raises unless an
// extension (below) takes the launch.
void launch(c10::DeviceIndex device, const nrt_launch &desc);

// Complex operands of an op that treats real and imaginary parts alike,
// launched over real views of them (same byte strides, other operands such
// as indices untouched):
//  Bits   moves the elements' bits unchanged (gathers, scatters, masks,
//         triangles): complex64 as int64, complex32 as int32, complex128 as
//         its two int64 halves.
//  Parts  runs the op on the real parts, then on the imaginary parts
//         (additive ops: accumulating scatters, cumulative sums), in the
//         parts' floating dtype.
// A descriptor without complex operands is launched as it is.
enum class ComplexAs { Bits, Parts };
void launch_complex_as(c10::DeviceIndex device, const nrt_launch &desc, ComplexAs how);

// Enqueues `desc` as it is, with no checks: for extensions that took a
// launch over.
void enqueue(c10::DeviceIndex device, const nrt_launch &desc);

// Writes `v` (.f for a floating `st`, .i otherwise) into an inline value
// slot as one element of `st`, converted as the FILL kernel would; false
// for a dtype that has no inline form (the caller fills device memory).
bool store_inline(nrt_inline_value &slot, c10::ScalarType st, nrt_scalar v);

// The value a CPU scalar operand of a floating op with common dtype
// `common` is computed with on the CPU (float16/bfloat16: rounded to it,
// except where the CPU's kernel reads the original value; iter_launch.cpp).
double reduced_float_scalar(nrt_op op, at::ScalarType common, double v, bool wrapped);

// One-time warning when float64 data is computed at float32 precision.
void warn_float64_once();

// An op family whose kernels read operands the general ones cannot (the
// COMPLEX family: complex dtypes, conjugate/negative bits) registers itself
// here at static-initialisation time, so launches reach it without this
// layer knowing any family. Each hook returns false for what it does not
// take; taken work is launched by the hook itself.
struct LaunchExtension {
  bool (*launch_iter)(at::TensorIteratorBase &iter, nrt_op op, std::initializer_list<nrt_scalar> scalars,
                      std::initializer_list<int64_t> params);
  bool (*launch)(c10::DeviceIndex device, const nrt_launch &desc);
};
void register_launch_extension(const LaunchExtension &extension);

}  // namespace torch_neuronx
