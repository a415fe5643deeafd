// Native shape ops built from the device's own copy kernel: cat, flip,
// roll. No new compute: each is a set of COPY launches over strided views
// (flip passes negative strides, which the runtime accepts), so their
// semantics are only the bookkeeping of which bytes go where.
#include <ATen/ExpandUtils.h>
#include <ATen/TensorIterator.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/core/IListRef.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TensorShape.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/ops/result_type.h>
#include <c10/core/DeviceGuard.h>

#include "launch/launch.h"
#include "registry/variants.h"

namespace torch_neuronx {
namespace {

using at::Tensor;

// cat: PyTorch's rules: legacy 1-D empty tensors are skipped, the result
// dtype promotes across inputs, all other dims must match.
// cat's output layout, as its meta function picks it: the inputs' common
// suggested memory format (channels_last when every input is), else contiguous.
c10::MemoryFormat cat_memory_format(const at::MaterializedITensorListRef &inputs) {
  std::optional<c10::MemoryFormat> format;
  for (const Tensor &t : inputs) {
    c10::MemoryFormat f = t.suggest_memory_format();
    if (f == c10::MemoryFormat::Contiguous || (format && *format != f)) return c10::MemoryFormat::Contiguous;
    format = f;
  }
  return format.value_or(c10::MemoryFormat::Contiguous);
}

Tensor cat_into(Tensor out, const at::ITensorListRef &tensors, int64_t dim) {
  auto materialized = tensors.materialize();
  TORCH_CHECK(!materialized.empty(), "torch.cat(): expected a non-empty list of Tensors");
  // ATen's cat meta checks, in its order, with its helpers.
  at::native::check_cat_no_zero_dim(materialized);
  dim = at::legacy_cat_wrap_dim(dim, materialized);
  const Tensor *ref = nullptr;
  for (const Tensor &t : materialized) {
    if (!at::native::cat_should_skip_tensor(t)) {
      ref = &t;
      break;
    }
  }
  at::ScalarType dtype = at::native::result_type(tensors);
  if (out.defined()) {
    TORCH_CHECK_TYPE(c10::canCast(dtype, out.scalar_type()),
                "torch.cat(): input types can't be cast to the desired output type ", out.scalar_type());
  }
  c10::Device device = materialized[0].get().device();
  for (const Tensor &t : materialized) {
    TORCH_CHECK(t.device() == device, "Expected all tensors to be on the same device, but found at least two devices, ",
                device, " and ", t.device(), "!");
  }
  if (!ref) {  // every input is a legacy empty tensor
    if (!out.defined()) out = at::empty({0}, materialized[0].get().options().dtype(dtype));
    else out.resize_({0});
    return out;
  }
  std::vector<int64_t> shape = ref->sizes().vec();
  int64_t total = 0;
  for (size_t i = 0; i < materialized.size(); ++i) {
    const Tensor &t = materialized[i];
    if (at::native::cat_should_skip_tensor(t)) continue;
    at::native::check_cat_shape_except_dim(*ref, t, dim, static_cast<int64_t>(i));
    total += t.size(dim);
  }
  shape[dim] = total;
  c10::DeviceGuard guard(device);
  if (!out.defined()) {
    out = at::empty(shape, ref->options().dtype(dtype).memory_format(cat_memory_format(materialized)));
  } else {
    TORCH_CHECK(out.device() == device, "torch.cat(): expected out on ", device);
    at::native::resize_output(out, shape);
  }
  int64_t offset = 0;
  for (const Tensor &t : materialized) {
    if (t.dim() == 1 && t.numel() == 0) continue;
    int64_t n = t.size(dim);
    if (n > 0) out.narrow(dim, offset, n).copy_(t);
    offset += n;
  }
  return out;
}


// flip: one COPY whose source walks the flipped dims backwards.
Tensor flip_fn(const Tensor &self, c10::IntArrayRef dims) {
  c10::DeviceGuard guard(self.device());
  Tensor out = at::empty(self.sizes(), self.options());
  if (self.numel() == 0) return out;
  int64_t nd = self.dim();
  std::vector<bool> flipped(std::max<int64_t>(nd, 1), false);
  for (int64_t d : dims) {
    int64_t w = at::maybe_wrap_dim(d, nd);
    TORCH_CHECK(!flipped[w], "dims has duplicates, original flip dims size=", dims.size());
    flipped[w] = true;
  }
  TORCH_CHECK(nd <= NRT_MAX_DIMS, "flip supports at most ", NRT_MAX_DIMS, " dims on neuron");
  nrt_launch d = new_launch(NRT_OP_COPY);
  d.ndim = static_cast<int>(nd);
  d.noutputs = 1;
  d.ninputs = 1;
  d.compute_dtype = to_nrt_dtype(self.scalar_type());
  int64_t item = self.element_size();
  auto *src = static_cast<const char *>(self.const_data_ptr());
  for (int64_t i = 0; i < nd; ++i) {
    d.sizes[i] = self.size(i);
    d.operands[0].strides[i] = out.stride(i) * item;
    int64_t s = self.stride(i) * item;
    if (flipped[i]) {
      src += (self.size(i) - 1) * s;
      s = -s;
    }
    d.operands[1].strides[i] = s;
  }
  d.operands[0].data = out.data_ptr();
  d.operands[0].dtype = d.compute_dtype;
  d.operands[1].data = const_cast<char *>(src);
  d.operands[1].dtype = d.compute_dtype;
  launch(self.device().index(), d);
  return out;
}

// roll: two slice copies per rolled dim (a rotation).
Tensor roll_fn(const Tensor &self, c10::IntArrayRef shifts, c10::IntArrayRef dims) {
  TORCH_CHECK(!shifts.empty(), "`shifts` required");
  if (dims.empty() && shifts.size() == 1) {
    return roll_fn(self.flatten(), shifts, {0}).view(self.sizes());
  }
  TORCH_CHECK(shifts.size() == dims.size(), "shifts and dimensions must align. shifts: ", shifts.size(),
              ", dims:", dims.size());
  // The CPU rolls one dim at a time and returns a copy of an empty tensor
  // before it reads the dim: out-of-range dims are not checked then.
  if (self.numel() == 0) return self.clone(at::MemoryFormat::Preserve);
  c10::DeviceGuard guard(self.device());
  Tensor cur = self;
  for (size_t k = 0; k < dims.size(); ++k) {
    int64_t d = at::maybe_wrap_dim(dims[k], self.dim());
    int64_t n = cur.size(d);
    Tensor next = at::empty(cur.sizes(), cur.options());
    if (n == 0 || cur.numel() == 0) {
      cur = next;
      continue;
    }
    int64_t s = ((shifts[k] % n) + n) % n;
    if (s == 0) {
      next.copy_(cur);
    } else {
      next.narrow(d, s, n - s).copy_(cur.narrow(d, 0, n - s));
      next.narrow(d, 0, s).copy_(cur.narrow(d, n - s, s));
    }
    cur = next;
  }
  return cur;
}

// constant_pad_nd: a filled tensor of the padded shape and one copy of the
// overlapping region (negative pads crop), as ATen's own implementation.
Tensor constant_pad_nd_fn(const Tensor &self, c10::IntArrayRef pad, const c10::Scalar &value) {
  TORCH_CHECK(pad.size() % 2 == 0, "Length of pad must be even but instead it equals ", pad.size());
  int64_t l_pad = static_cast<int64_t>(pad.size()) / 2, l_inp = self.dim();
  TORCH_CHECK(l_pad <= l_inp, "Length of pad should be no more than twice the number of dimensions of the input. "
              "Pad length is ", pad.size(), " while the input has ", l_inp, " dimensions.");
  c10::DeviceGuard guard(self.device());
  std::vector<int64_t> shape = self.sizes().vec();
  Tensor src = self;
  std::vector<int64_t> lo(l_inp, 0);
  bool any_positive = false;
  // ATen's two passes: every output size checked first, then the crops of
  // negative pads as its narrows (a crop longer than what the other side's
  // pad leaves raises narrow's RuntimeError, as there).
  for (int64_t i = 0; i < l_pad; ++i) {
    int64_t d = l_inp - 1 - i, before = pad[2 * i], after = pad[2 * i + 1];
    int64_t n = shape[d] + before + after;
    TORCH_CHECK(n >= 0, "The input size ", shape[d], ", plus negative padding ", before, " and ", after,
                " resulted in a negative output size, which is invalid. Check dimension ", d, " of your input.");
  }
  for (int64_t d = l_inp - l_pad; d < l_inp; ++d) {
    int64_t i = l_inp - 1 - d, before = pad[2 * i], after = pad[2 * i + 1];
    if (before < 0) src = src.narrow(d, -before, src.size(d) + before);
    if (after < 0) src = src.narrow(d, 0, src.size(d) + after);
    lo[d] = before > 0 ? before : 0;
    shape[d] += before + after;
    any_positive |= before > 0 || after > 0;
  }
  // Only crops: ATen returns a copy of the cropped input without filling
  // anything, so the value is never converted (float16 pad value=1e30 works).
  if (!any_positive) return src.clone();
  Tensor out = at::empty(shape, self.options());
  out.fill_(value);
  if (src.numel() == 0) return out;
  Tensor dst = out;
  for (int64_t d = 0; d < l_inp; ++d) dst = dst.narrow(d, lo[d], src.size(d));
  dst.copy_(src);
  return out;
}

// isin: elementwise membership by broadcast comparison (ATen uses the same
// formulation for small test sets), all on the device.
// The result is a fresh tensor; the out= overload copies it in (Variants).
Tensor isin_into(Tensor, const Tensor &elements, const Tensor &test, bool /*assume_unique*/, bool invert) {
  c10::DeviceGuard guard(elements.device());
  Tensor hit = elements.unsqueeze(-1).eq(test.reshape({-1})).any(-1);
  return invert ? hit.logical_not() : hit;
}
Tensor isin_ts(const Tensor &e, const c10::Scalar &t, bool /*assume_unique*/, bool invert) {
  return isin_into(Tensor(), e, at::empty({1}, e.options()).fill_(t), false, invert);
}
// isin(Scalar, Tensor): the scalar as a 0-d tensor of its own type on the
// test set's device, as ATen's wraps it
Tensor isin_st(const c10::Scalar &e, const Tensor &test, bool /*assume_unique*/, bool invert) {
  Tensor elements = at::scalar_tensor(e, test.options().dtype(e.type()));
  return isin_into(Tensor(), elements, test, false, invert);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  NEURON_IMPL(m, "constant_pad_nd", constant_pad_nd_fn);
  NEURON_VARIANTS(m, isin_into, "isin.Tensor_Tensor", nullptr, "isin.Tensor_Tensor_out");
  NEURON_IMPL(m, "isin.Tensor_Scalar", isin_ts);
  NEURON_OUT_OF(m, isin_ts, "isin.Tensor_Scalar_out");
  NEURON_IMPL(m, "isin.Scalar_Tensor", isin_st);
  NEURON_OUT_OF(m, isin_st, "isin.Scalar_Tensor_out");
  NEURON_VARIANTS(m, cat_into, "cat", nullptr, "cat.out");
  NEURON_IMPL(m, "flip", flip_fn);
  NEURON_IMPL(m, "roll", roll_fn);
}

}  // namespace torch_neuronx
