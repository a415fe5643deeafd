#include "launch/operand.h"

#include <cstring>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

namespace torch_neuronx {

nrt_dtype to_nrt_dtype(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Bool: return NRT_BOOL;
    case c10::ScalarType::Byte: return NRT_UINT8;
    case c10::ScalarType::Char: return NRT_INT8;
    case c10::ScalarType::Short: return NRT_INT16;
    case c10::ScalarType::Int: return NRT_INT32;
    case c10::ScalarType::Long: return NRT_INT64;
    case c10::ScalarType::UInt16: return NRT_UINT16;
    case c10::ScalarType::UInt32: return NRT_UINT32;
    case c10::ScalarType::UInt64: return NRT_UINT64;
    case c10::ScalarType::Half: return NRT_FLOAT16;
    case c10::ScalarType::BFloat16: return NRT_BFLOAT16;
    case c10::ScalarType::Float: return NRT_FLOAT32;
    case c10::ScalarType::Double: return NRT_FLOAT64;
    // Only the COMPLEX op family computes on these; launch() rejects them
    // for every other kernel.
    case c10::ScalarType::ComplexHalf: return NRT_COMPLEX32;
    case c10::ScalarType::ComplexFloat: return NRT_COMPLEX64;
    case c10::ScalarType::ComplexDouble: return NRT_COMPLEX128;
    default:
      // NotImplementedError, never TypeError: Python turns a TypeError raised
      // inside an operator (`t + 1`) into "unsupported operand type(s)".
      TORCH_CHECK_NOT_IMPLEMENTED(false, "neuron: dtype ", type, " is not supported on the neuron device (it has bool, ",
                                  "uint8/16/32/64, int8/16/32/64, float16, bfloat16, float32, float64 and complex)");
  }
}

nrt_launch new_launch(nrt_op op, std::initializer_list<int64_t> sizes) {
  TORCH_INTERNAL_ASSERT(sizes.size() <= NRT_MAX_DIMS, "new_launch: too many dims");
  nrt_launch d;
  std::memset(&d, 0, sizeof d);
  d.op = op;
  d.ndim = static_cast<int>(sizes.size());
  int i = 0;
  for (int64_t s : sizes) d.sizes[i++] = s;
  return d;
}

void set_operand(nrt_operand &o, const at::Tensor &t, c10::IntArrayRef dims) {
  o.data = const_cast<void *>(t.const_data_ptr());
  o.dtype = to_nrt_dtype(t.scalar_type());
  int j = 0;
  for (int64_t dim : dims) o.strides[j++] = dim < 0 ? 0 : t.stride(dim) * static_cast<int64_t>(t.element_size());
}

void set_operand_5d(nrt_operand &o, const at::Tensor &t) {
  o.data = const_cast<void *>(t.const_data_ptr());
  o.dtype = to_nrt_dtype(t.scalar_type());
  int64_t lead = 5 - t.dim();
  int64_t es = static_cast<int64_t>(t.element_size());
  o.strides[0] = t.stride(0) * es;
  o.strides[1] = t.stride(1) * es;
  for (int64_t j = 2; j < 5; ++j) o.strides[j] = j < 2 + lead ? 0 : t.stride(j - lead) * es;
}

bool same_layout(const at::Tensor &t, const at::Tensor &ref) {
  if (!t.defined() || t.device() != ref.device() || t.layout() != at::kStrided || t.is_neg() || t.is_conj() ||
      !t.is_non_overlapping_and_dense() || t.sizes() != ref.sizes())
    return false;
  auto size = ref.sizes();
  auto a = t.strides(), b = ref.strides();
  for (size_t d = 0; d < size.size(); ++d)
    if (size[d] != 1 && a[d] != b[d]) return false;
  return true;
}

at::Tensor broadcast_host_scalar(const at::Tensor &t, const at::Tensor &other) {
  if (!t.defined() || !other.defined() || !t.is_cpu() || other.is_cpu() || t.dim() == 0) return t;
  for (int64_t st : t.strides())
    if (st != 0) return t;
  if (t.numel() == 0) return at::empty(t.sizes(), t.options().device(other.device()));  // nothing to read
  // as_strided to 0-d keeps the element's storage offset
  return t.as_strided({}, {}, t.storage_offset()).to(other.device()).expand(t.sizes());
}

}  // namespace torch_neuronx
