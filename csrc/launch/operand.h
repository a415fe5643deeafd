// Describing tensors to the runtime by hand, for launches that are not a
// TensorIterator's (GEMM, pooling, norms, ...): one descriptor builder and
// one operand builder for every glue file.
#pragma once

#include <initializer_list>

#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>

#include "runtime/device.h"

namespace at {
class Tensor;
}

namespace torch_neuronx {

// The runtime's dtype for `type`; complex types map to the COMPLEX
// family's dtypes (only it computes on them). Raises for the rest.
nrt_dtype to_nrt_dtype(c10::ScalarType type);

// A zeroed descriptor for `op` over `sizes` (ndim = sizes.size()), for the
// caller to fill in operands, counts and parameters.
nrt_launch new_launch(nrt_op op, std::initializer_list<int64_t> sizes = {});

// Describes tensor `t` as a launch operand: pointer, dtype, and the byte
// stride of each listed tensor dim in order (-1 gives stride 0: broadcast).
void set_operand(nrt_operand &o, const at::Tensor &t, c10::IntArrayRef dims);

// Describes a batched activation [N, C, spatial...] with 1-3 spatial dims
// (or a weight [O, I, kernel...]) as the five operand dims {n, c, d, h, w}
// of the conv, pool and resample kernels; missing leading spatial dims get
// stride 0 (their launch extent is 1).
void set_operand_5d(nrt_operand &o, const at::Tensor &t);

// Whether `t` is a dense, strided tensor on ref's device laid out like
// `ref` (same sizes; same strides wherever the size is not 1), so that
// operands of one launch can address both with the same element offsets
// (the FOREACH family's rows).
bool same_layout(const at::Tensor &t, const at::Tensor &ref);

// A CPU tensor with dims whose every stride is 0 (one value broadcast, as
// torch.broadcast_tensors makes of a 0-d CPU tensor) beside a tensor `other`
// on the device: that value copied to other's device and expanded there to
// the same shape, so ATen's iterators (which take a 0-d CPU tensor as a
// scalar but refuse any other CPU operand) compute what the CPU computes.
// (An empty one becomes an empty device tensor.) Any other `t` (device,
// 0-d, or strided) is returned as is.
at::Tensor broadcast_host_scalar(const at::Tensor &t, const at::Tensor &other);

}  // namespace torch_neuronx
