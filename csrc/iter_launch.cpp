#include "iter_launch.h"

#include <ATen/TensorIterator.h>
#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/SmallVector.h>

namespace torch_neuronx {

nrt_dtype to_nrt_dtype(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Bool: return NRT_BOOL;
    case c10::ScalarType::Byte: return NRT_UINT8;
    case c10::ScalarType::Char: return NRT_INT8;
    case c10::ScalarType::Short: return NRT_INT16;
    case c10::ScalarType::Int: return NRT_INT32;
    case c10::ScalarType::Long: return NRT_INT64;
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
      TORCH_CHECK_TYPE(false, "neuron kernels do not support dtype ", type);
  }
}

// Whether the general (non-COMPLEX-family) kernels support `type`.
bool nrt_supports(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Bool: case c10::ScalarType::Byte: case c10::ScalarType::Char:
    case c10::ScalarType::Short: case c10::ScalarType::Int: case c10::ScalarType::Long:
    case c10::ScalarType::Half: case c10::ScalarType::BFloat16: case c10::ScalarType::Float:
    case c10::ScalarType::Double:
      return true;
    default:
      return false;
  }
}

void warn_float64_once() {
  TORCH_WARN_ONCE(
      "neuron: float64 tensors are computed at float32 precision (NeuronCores have no float64 units); "
      "results keep dtype float64. Use float32 to silence this warning.");
}

void set_operand(nrt_operand &o, const at::Tensor &t, std::initializer_list<int64_t> dims) {
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

// ops_complex.cpp: runs an iteration that has a complex operand (or copies
// between tensors whose conjugate/negative bits differ) on the COMPLEX
// family's kernels, or raises a TypeError naming the op.
void launch_iter_complex(at::TensorIteratorBase &iter, nrt_op op, std::initializer_list<nrt_scalar> scalars,
                         std::initializer_list<int64_t> params);
nrt_op complex_copy_op();  // ops_complex.cpp: CX_COPY (its header stays out of this file)

void launch(c10::DeviceIndex device, const nrt_launch &desc) {
  // The general kernels read complex data as garbage (their loaders know
  // only real dtypes), so complex operands stop here unless the op is one
  // of the COMPLEX family's.
  if (nrt_op_kind(desc.op) != NRT_KIND_COMPLEX) {
    bool complex = false;
    for (int i = 0; i < desc.noutputs + desc.ninputs && i < NRT_MAX_OPERANDS; ++i)
      complex |= nrt_dtype_is_complex(desc.operands[i].dtype);
    if (complex && desc.op == NRT_OP_COPY) {
      // Hand-built copies (flip, ...): the COMPLEX family's copy has the
      // same operand layout.
      nrt_launch c = desc;
      c.op = complex_copy_op();
      c.params[0] = c.params[1] = 0;
      check(nrt_launch_kernel(current_nrt_stream(device), &c), nrt_op_name(c.op));
      return;
    }
    for (int i = 0; i < desc.noutputs + desc.ninputs && i < NRT_MAX_OPERANDS; ++i)
      TORCH_CHECK_TYPE(!nrt_dtype_is_complex(desc.operands[i].dtype), "neuron: ", nrt_op_name(desc.op),
                       " does not support complex tensors (operand ", i, " is ",
                       nrt_dtype_name(desc.operands[i].dtype), ")");
  }
  check(nrt_launch_kernel(current_nrt_stream(device), &desc), nrt_op_name(desc.op));
}

void launch_iter(at::TensorIteratorBase &iter, nrt_op op, std::initializer_list<nrt_scalar> scalars,
                 std::initializer_list<int64_t> params) {
  if (iter.numel() == 0) return;
  TORCH_CHECK(iter.ndim() <= NRT_MAX_DIMS, "neuron kernels support at most ", NRT_MAX_DIMS,
              " dimensions after coalescing, got ", iter.ndim());
  TORCH_CHECK(iter.ntensors() <= NRT_MAX_OPERANDS, "too many operands for a neuron kernel");
  c10::Device device = iter.device();
  TORCH_CHECK(device.type() == kNeuron, "internal: neuron kernel launched for ", device);
  bool complex = nrt_op_kind(op) == NRT_KIND_COMPLEX;
  for (int i = 0; i < iter.ntensors() && !complex; ++i) complex = at::isComplexType(iter.dtype(i));
  if (complex || (op == NRT_OP_COPY && (iter.tensor_base(0).is_conj() != iter.tensor_base(1).is_conj() ||
                                        iter.tensor_base(0).is_neg() != iter.tensor_base(1).is_neg()))) {
    launch_iter_complex(iter, op, scalars, params);
    return;
  }
  c10::DeviceGuard guard(device);

  nrt_launch d;
  std::memset(&d, 0, sizeof d);
  d.op = op;
  d.ndim = static_cast<int>(iter.ndim());
  for (int i = 0; i < d.ndim; ++i) d.sizes[i] = iter.shape()[i];
  d.noutputs = iter.noutputs();
  d.ninputs = iter.ninputs();
  // The compute domain: the promoted input type where TensorIterator
  // computed one; otherwise (fills, copies, RNG, where) the operand's own.
  at::ScalarType common;
  if (iter.ninputs() == 0 || op == NRT_OP_WHERE || op == NRT_OP_BERNOULLI_TENSOR) {
    common = iter.dtype(0);
  } else if (op == NRT_OP_COPY) {
    common = iter.dtype(iter.noutputs());
  } else {
    common = iter.common_dtype();
  }
  d.compute_dtype = to_nrt_dtype(common);
  int k = 0;
  for (const auto &s : scalars) d.scalars[k++] = s;
  k = 0;
  for (int64_t p : params) d.params[k++] = p;

  c10::SmallVector<at::Tensor, 2> temps;  // device copies of CPU scalars, freed in stream order
  bool any_f64 = false;
  for (int i = 0; i < iter.ntensors(); ++i) {
    nrt_operand &o = d.operands[i];
    if (iter.device(i).is_cpu()) {
      // A wrapped number or CPU 0-dim tensor: its value lives on the host,
      // so put it on the device (a FILL) and broadcast it with stride 0.
      TORCH_INTERNAL_ASSERT(i >= iter.noutputs(), "CPU output in a neuron kernel");
      // PyTorch computes with the scalar's value in the compute type (float32
      // for bfloat16/float16 ops), not rounded to the tensor's low precision.
      at::ScalarType st = common;
      if (common == at::kBFloat16 || common == at::kHalf) st = at::kFloat;
      at::Tensor t = at::empty({}, at::TensorOptions().dtype(st).device(device));
      nrt_launch f;
      std::memset(&f, 0, sizeof f);
      f.op = NRT_OP_FILL;
      f.noutputs = 1;
      f.compute_dtype = d.compute_dtype;
      f.operands[0].data = t.data_ptr();
      f.operands[0].dtype = to_nrt_dtype(st);
      if (at::isFloatingType(common)) {
        f.scalars[0].f = iter.scalar_value<double>(i);
      } else if (at::isFloatingType(iter.dtype(i))) {
        f.scalars[0].i = static_cast<int64_t>(iter.scalar_value<double>(i));
      } else {
        f.scalars[0].i = iter.scalar_value<int64_t>(i);
      }
      launch(device.index(), f);
      o.data = t.data_ptr();
      o.dtype = to_nrt_dtype(st);
      temps.push_back(std::move(t));
      continue;
    }
    o.data = iter.data_ptr(i);
    o.dtype = to_nrt_dtype(iter.dtype(i));
    any_f64 |= o.dtype == NRT_FLOAT64;
    auto strides = iter.strides(i);
    for (int j = 0; j < d.ndim; ++j) o.strides[j] = strides[j];
  }
  if (any_f64 && op != NRT_OP_COPY) warn_float64_once();  // copies are exact
  launch(device.index(), d);
}

}  // namespace torch_neuronx
