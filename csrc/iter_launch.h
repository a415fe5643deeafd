// Turning a built TensorIterator into a runtime launch. PyTorch decided the
// shape, broadcasting, type promotion and output allocation; this only
// describes the operands to the runtime and enqueues the kernel.
#pragma once

#include <initializer_list>

#include "neuron.h"

namespace at {
struct TensorIteratorBase;
class Tensor;
}

namespace torch_neuronx {

// Enqueues `op` over the iterator on the current stream of its device.
// CPU scalar operands (wrapped numbers) are materialised on the device in
// the common dtype first. Empty iterations launch nothing.
void launch_iter(at::TensorIteratorBase &iter, nrt_op op, std::initializer_list<nrt_scalar> scalars = {},
                 std::initializer_list<int64_t> params = {});

// Enqueues a filled descriptor on the current stream of `device`.
void launch(c10::DeviceIndex device, const nrt_launch &desc);

// Describes tensor `t` as a launch operand: pointer, dtype, and the byte
// stride of each listed tensor dim in order (-1 gives stride 0: broadcast).
void set_operand(nrt_operand &o, const at::Tensor &t, std::initializer_list<int64_t> dims);

// Describes a batched activation [N, C, spatial...] with 1-3 spatial dims
// (or a weight [O, I, kernel...]) as the five operand dims {n, c, d, h, w}
// of the conv, pool and resample kernels; missing leading spatial dims get
// stride 0 (their launch extent is 1).
void set_operand_5d(nrt_operand &o, const at::Tensor &t);

// A zeroed descriptor for `op` over `sizes` (ndim = sizes.size()), for the
// caller to fill in operands, counts and parameters.
nrt_launch new_launch(nrt_op op, std::initializer_list<int64_t> sizes = {});

// One-time warning when float64 data is computed at float32 precision.
void warn_float64_once();

}  // namespace torch_neuronx
