#include "launch/launch.h"
#include "launch/iter.h"

#include <cstring>
#include <vector>

#include <ATen/TensorIterator.h>
#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <c10/util/SmallVector.h>

namespace torch_neuronx {

void warn_float64_once() {
  TORCH_WARN_ONCE(
      "neuron: float64 tensors are computed at float32 precision (NeuronCores have no float64 units); "
      "results keep dtype float64. Use float32 to silence this warning.");
}

namespace {

std::vector<LaunchExtension> &extensions() {
  static std::vector<LaunchExtension> list;  // filled during static initialisation only
  return list;
}

template <typename T>
void put(nrt_inline_value &slot, T v) {
  static_assert(sizeof(T) <= sizeof slot.bytes, "inline value too large");
  std::memcpy(slot.bytes, &v, sizeof v);
}

}  // namespace

// A CPU scalar operand of a float16/bfloat16 op as the CPU's kernel reads it.
// TensorIterator hands every operand over in the common dtype, so the value
// is rounded to it first (bf16 + 0.3 adds 0.30078125, bf16 <= 2.1247
// compares with 2.125, pow/fmod/atan2/hypot/xlogy take the rounded value);
// only mul and the divisions read the original value in float32
// (ATen's original_scalar_value: bf16 * 0.3 multiplies by 0.3f), and
// lerp its Scalar weight (Scalar::to<opmath_t>, wrapped: `wrapped`); a
// 0-d Tensor weight is an iterator input, cast to the common dtype (a
// float32 0.3 weight of a bfloat16 lerp is 0.30078125).
double reduced_float_scalar(nrt_op op, at::ScalarType common, double v, bool wrapped) {
  if (op == NRT_OP_MUL || op == NRT_OP_DIV || op == NRT_OP_DIV_TRUNC || op == NRT_OP_DIV_FLOOR ||
      (op == NRT_OP_LERP && wrapped))
    return v;
  if (common == at::kBFloat16) return static_cast<float>(c10::BFloat16(static_cast<float>(v)));
  if (common == at::kHalf) return static_cast<float>(c10::Half(static_cast<float>(v)));
  return v;
}

bool store_inline(nrt_inline_value &slot, c10::ScalarType st, nrt_scalar v) {
  // The FILL kernel's conversions: floating values from .f, integers
  // wrapped from .i, bool as "nonzero".
  switch (st) {
    case at::kFloat: put(slot, static_cast<float>(v.f)); return true;
    case at::kDouble: put(slot, v.f); return true;
    case at::kBool: put(slot, static_cast<bool>(v.i != 0)); return true;
    case at::kByte: put(slot, static_cast<uint8_t>(v.i)); return true;
    case at::kChar: put(slot, static_cast<int8_t>(v.i)); return true;
    case at::kShort: put(slot, static_cast<int16_t>(v.i)); return true;
    case at::kInt: put(slot, static_cast<int32_t>(v.i)); return true;
    case at::kLong: put(slot, v.i); return true;
    case at::kUInt16: put(slot, static_cast<uint16_t>(v.i)); return true;
    case at::kUInt32: put(slot, static_cast<uint32_t>(v.i)); return true;
    case at::kUInt64: put(slot, static_cast<uint64_t>(v.i)); return true;
    default: return false;
  }
}

void register_launch_extension(const LaunchExtension &extension) { extensions().push_back(extension); }

void enqueue(c10::DeviceIndex device, const nrt_launch &desc) {
  check(nrt_launch_kernel(current_nrt_stream(device), &desc), nrt_op_name(desc.op));
}

void launch(c10::DeviceIndex device, const nrt_launch &desc) {
  for (const LaunchExtension &e : extensions())
    if (e.launch && e.launch(device, desc)) return;
  // The general kernels would read complex data as garbage (their loaders
  // know only real dtypes).
  for (int i = 0; i < desc.noutputs + desc.ninputs && i < NRT_MAX_OPERANDS; ++i)
    TORCH_CHECK_NOT_IMPLEMENTED(!nrt_dtype_is_complex(desc.operands[i].dtype), "neuron: ", nrt_op_name(desc.op),
                                " does not support complex tensors (operand ", i, " is ",
                                nrt_dtype_name(desc.operands[i].dtype), ")");
  enqueue(device, desc);
}

void launch_complex_as(c10::DeviceIndex device, const nrt_launch &desc, ComplexAs how) {
  int n = desc.noutputs + desc.ninputs;
  nrt_dtype complex = NRT_DTYPE_COUNT;
  for (int i = 0; i < n; ++i) {
    nrt_dtype t = desc.operands[i].dtype;
    if (!nrt_dtype_is_complex(t)) continue;
    TORCH_CHECK(complex == NRT_DTYPE_COUNT || complex == t, "neuron: ", nrt_op_name(desc.op),
                ": complex operands of different dtypes");
    complex = t;
  }
  if (complex == NRT_DTYPE_COUNT) return launch(device, desc);
  nrt_dtype part;
  int launches = 2;
  if (how == ComplexAs::Bits) {
    part = complex == NRT_COMPLEX32 ? NRT_INT32 : NRT_INT64;
    if (complex != NRT_COMPLEX128) launches = 1;  // one integer holds the whole element
  } else {
    part = complex == NRT_COMPLEX32 ? NRT_FLOAT16 : complex == NRT_COMPLEX64 ? NRT_FLOAT32 : NRT_FLOAT64;
  }
  size_t half = nrt_dtype_size(complex) / 2;
  for (int k = 0; k < launches; ++k) {
    nrt_launch d = desc;
    d.compute_dtype = part;
    for (int i = 0; i < n; ++i) {
      nrt_operand &o = d.operands[i];
      if (o.dtype != complex) continue;
      o.dtype = part;
      if (o.inline_slot != 0 && k > 0) {
        // an inline complex value: its part k moves to the slot's start
        nrt_inline_value &v = d.inline_values[o.inline_slot - 1];
        std::memmove(v.bytes, desc.inline_values[o.inline_slot - 1].bytes + k * half, half);
      } else if (o.data) {
        o.data = static_cast<char *>(o.data) + k * half;
      }
    }
    launch(device, d);
  }
}

void launch_iter(at::TensorIteratorBase &iter, nrt_op op, std::initializer_list<nrt_scalar> scalars,
                 std::initializer_list<int64_t> params) {
  // The extensions see empty iterations too: an op the complex family has
  // no kernel for raises for an empty complex tensor as the CPU's dispatch
  // does (they launch nothing for it).
  for (const LaunchExtension &e : extensions())
    if (e.launch_iter && e.launch_iter(iter, op, scalars, params)) return;
  if (iter.numel() == 0) return;
  TORCH_CHECK(iter.ndim() <= NRT_MAX_DIMS, "neuron kernels support at most ", NRT_MAX_DIMS,
              " dimensions after coalescing, got ", iter.ndim());
  TORCH_CHECK(iter.ntensors() <= NRT_MAX_OPERANDS, "too many operands for a neuron kernel");
  c10::Device device = iter.device();
  TORCH_CHECK(device.type() == kNeuron, "internal: neuron kernel launched for ", device);
  c10::DeviceGuard guard(device);

  nrt_launch d = iter_desc(iter, op);
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

  c10::SmallVector<at::Tensor, 1> temps;  // device copies of CPU scalars, freed in stream order
  int ninline = 0;
  bool any_f64 = false;
  for (int i = 0; i < iter.ntensors(); ++i) {
    nrt_operand &o = d.operands[i];
    if (iter.device(i).is_cpu()) {
      // A wrapped number or CPU 0-dim tensor: its value lives on the host.
      TORCH_INTERNAL_ASSERT(i >= iter.noutputs(), "CPU output in a neuron kernel");
      // Carried as float32 for bfloat16/float16 ops, with the value the
      // CPU's kernel computes with (reduced_float_scalar).
      at::ScalarType st = common;
      if (common == at::kBFloat16 || common == at::kHalf) st = at::kFloat;
      nrt_scalar v;
      if (at::isFloatingType(common)) {
        v.f = reduced_float_scalar(op, common, iter.scalar_value<double>(i),
                                   iter.tensor_base(i).unsafeGetTensorImpl()->is_wrapped_number());
      } else if (at::isFloatingType(iter.dtype(i))) {
        v.i = static_cast<int64_t>(iter.scalar_value<double>(i));
      } else {
        v.i = iter.scalar_value<int64_t>(i);
      }
      o.dtype = to_nrt_dtype(st);
      // Carried in the descriptor (no allocation, no launch) when a slot is
      // free; otherwise put on the device by a FILL and broadcast.
      if (ninline < NRT_MAX_INLINE && store_inline(d.inline_values[ninline], st, v)) {
        o.inline_slot = ++ninline;
        o.data = nullptr;
        continue;
      }
      at::Tensor t = at::empty({}, at::TensorOptions().dtype(st).device(device));
      nrt_launch f = new_launch(NRT_OP_FILL);
      f.noutputs = 1;
      f.compute_dtype = d.compute_dtype;
      f.operands[0].data = t.data_ptr();
      f.operands[0].dtype = o.dtype;
      f.scalars[0] = v;
      launch(device.index(), f);
      o.data = t.data_ptr();
      temps.push_back(std::move(t));
      continue;
    }
    set_iter_operand(o, iter, i);
    any_f64 |= o.dtype == NRT_FLOAT64;
  }
  if (any_f64 && op != NRT_OP_COPY) warn_float64_once();  // copies are exact
  launch(device.index(), d);
}

}  // namespace torch_neuronx
