// Native indexing ops: advanced indexing (index, index_put_), index_select,
// masked_fill_/masked_select, nonzero, gather/scatter family, embedding's
// backward, sort/topk, the index-generating factories (arange, linspace,
// eye, tril/triu). PyTorch's own helpers decide the semantics
// (make_info/AdvancedIndex layout, shape checks); the runtime's INDEX
// kernels move the data. (nll_loss lives in segment.cpp.)
#include <ATen/TensorUtils.h>
#include <ATen/ops/aminmax.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/TensorIterator.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/core/Reduction.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TensorAdvancedIndexingUtils.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/gather.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/view_as_real.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/zeros.h>
#include <c10/core/DeviceGuard.h>

#include "launch/iter.h"
#include "launch/launch.h"
#include "launch/scalar.h"
#include "nrt/ops/index.h"
#include "nrt/stream.h"
#include "registry/variants.h"

namespace torch_neuronx {
namespace {

using at::Tensor;
using c10::Scalar;

nrt_scalar fscalar(double d) { nrt_scalar v; v.f = d; return v; }

// Fills an nrt_launch from a built iterator (no CPU scalars here).
void describe(nrt_launch &d, at::TensorIteratorBase &iter, nrt_op op) {
  TORCH_CHECK(iter.ndim() <= NRT_MAX_DIMS, "neuron index kernels support at most ", NRT_MAX_DIMS, " dims");
  TORCH_CHECK(iter.ntensors() <= NRT_MAX_OPERANDS, "too many index tensors for a neuron kernel (at most ",
              NRT_MAX_OPERANDS - 2, ")");
  d = iter_desc(iter, op);
  for (int i = 0; i < iter.ntensors(); ++i) {
    TORCH_CHECK(iter.device(i).type() == kNeuron, "Expected all tensors to be on the same device, but found ",
                iter.device(i));
    set_iter_operand(d.operands[i], iter, i);
  }
  d.compute_dtype = d.operands[0].dtype;
}

// ---- advanced indexing ------------------------------------------------------
// The AdvancedIndex layout (src restrided so the indexed dims have stride 0
// and the index shape in their place; indices reshaped to broadcast), built
// from make_info's indices as ATen's AdvancedIndex constructor does.
struct IndexPlan {
  Tensor src;
  std::vector<Tensor> indices;
  std::vector<int64_t> sizes, strides;  // per index: size and byte stride in src
};

// Indices that live on the host are checked before they move, so an
// out-of-range one raises IndexError at the op, as on the CPU (CUDA checks
// these too); device-resident indices are checked by the kernel, whose error
// surfaces at the next synchronisation as RuntimeError, as on CUDA.
void check_cpu_index_bounds(const Tensor &idx, int64_t size, size_t dim) {
  if (idx.numel() == 0) return;
  auto [lo, hi] = at::aminmax(idx);  // the user's host tensor, read on the host
  int64_t mn = lo.item<int64_t>(), mx = hi.item<int64_t>();
  int64_t bad = mn < -size ? mn : mx >= size ? mx : 0;
  TORCH_CHECK_INDEX(mn >= -size && mx < size, "index ", bad, " is out of bounds for dimension ", dim, " with size ",
                    size);
}

IndexPlan plan_index(const Tensor &self, const c10::List<std::optional<Tensor>> &orig) {
  TORCH_CHECK_INDEX(static_cast<int64_t>(orig.size()) <= self.dim(), "too many indices for tensor of dimension ",
                    self.dim(), " (got ", orig.size(), ")");
  // make_info expands masks (via nonzero) and broadcasts indices; its
  // AdvancedIndex constructor is not exported, so take its inputs apart.
  at::native::checkIndexTensorTypes(orig, /*allow_int=*/true);
  // Host-side integer indices are checked against their dims before they
  // move (a mask spans as many dims as it has).
  int64_t dim = 0;
  for (size_t k = 0; k < orig.size(); ++k) {
    const std::optional<Tensor> &idx = orig.get(k);
    if (!idx || !idx->defined()) {
      dim++;
      continue;
    }
    bool mask = idx->scalar_type() == at::kBool || idx->scalar_type() == at::kByte;
    if (!mask && idx->device().is_cpu() && dim < self.dim()) check_cpu_index_bounds(*idx, self.size(dim), dim);
    dim += mask ? idx->dim() : 1;
  }
  auto indices = at::native::expandTensors(self, orig, /*ensure_same_device=*/true);
  try {
    indices = at::expand_outplace(indices);
  } catch (std::exception &) {
    TORCH_CHECK_INDEX(false, "shape mismatch: indexing tensors could not be broadcast together");
  }
  Tensor src = self;
  while (indices.size() < static_cast<size_t>(src.dim())) indices.emplace_back();
  if (!at::native::hasContiguousSubspace(indices)) std::tie(src, indices) = at::native::transposeToFront(src, indices);

  IndexPlan p;
  int64_t before = 0, after = 0, indexed = 0;
  c10::IntArrayRef replacement;
  for (size_t d = 0; d < indices.size(); ++d) {
    if (!indices[d].defined()) {
      (indexed == 0 ? before : after)++;
    } else {
      indexed++;
      replacement = indices[d].sizes();
      p.sizes.push_back(src.size(d));
      p.strides.push_back(src.stride(d) * static_cast<int64_t>(src.element_size()));
    }
  }
  bool zero_dim = std::find(p.sizes.begin(), p.sizes.end(), 0) != p.sizes.end();
  bool zero_repl = std::find(replacement.begin(), replacement.end(), 0) != replacement.end();
  TORCH_CHECK_INDEX(!(zero_dim && !zero_repl), "index is out of bounds for dimension with size 0");
  std::vector<int64_t> shape = src.sizes().vec(), st = src.strides().vec();
  shape.erase(shape.begin() + before, shape.begin() + before + indexed);
  st.erase(st.begin() + before, st.begin() + before + indexed);
  shape.insert(shape.begin() + before, replacement.begin(), replacement.end());
  st.insert(st.begin() + before, replacement.size(), 0);
  p.src = src.as_strided(shape, st);
  for (auto &idx : indices) {
    if (!idx.defined()) continue;
    std::vector<int64_t> s(before, 1);
    s.insert(s.end(), idx.sizes().begin(), idx.sizes().end());
    s.insert(s.end(), after, 1);
    Tensor i = idx.scalar_type() == at::kLong || idx.scalar_type() == at::kInt ? idx : idx.to(at::kLong);
    if (i.device() != self.device()) i = i.to(self.device());
    p.indices.push_back(i.reshape(s));
  }
  return p;
}

void set_index_aux(nrt_launch &d, const IndexPlan &p) {
  d.params[0] = static_cast<int64_t>(p.indices.size());
  for (size_t k = 0; k < p.indices.size(); ++k) {
    d.aux[2 * k] = p.sizes[k];
    d.aux[2 * k + 1] = p.strides[k];
  }
}

// How the INDEX_GATHER kernel treats an index outside its dim (p2): advanced
// indexing wraps negatives and raises IndexError; index_select wraps
// nothing and raises IndexError, or the RuntimeError of the CPU's
// check_indexarray_range where the CPU's kernel takes that path.
enum class OutOfRange : int64_t { Advanced = 0, Select = 1, SelectBounds = 2 };

Tensor &index_into(Tensor &out, const Tensor &self, const c10::List<std::optional<Tensor>> &indices,
                   OutOfRange bad = OutOfRange::Advanced) {
  c10::DeviceGuard guard(self.device());
  IndexPlan p = plan_index(self, indices);
  auto cfg = at::TensorIteratorConfig();
  cfg.set_check_mem_overlap(false).check_all_same_dtype(false);
  if (out.defined()) {
    cfg.add_output(out);
  } else {
    cfg.declare_static_dtype_and_device(self.scalar_type(), self.device()).add_owned_output(Tensor());
  }
  cfg.add_owned_const_input(p.src);
  for (auto &i : p.indices) cfg.add_owned_const_input(i);
  auto iter = cfg.build();
  if (iter.numel() > 0) {
    nrt_launch d;
    describe(d, iter, NRT_OP(INDEX_GATHER));
    set_index_aux(d, p);
    d.params[2] = static_cast<int64_t>(bad);
    launch_complex_as(self.device().index(), d, ComplexAs::Bits);
  }
  if (!out.defined()) out = iter.output();
  return out;
}
Tensor index_tensor_into(Tensor out, const Tensor &self, const c10::List<std::optional<Tensor>> &indices) {
  return index_into(out, self, indices);
}


// alpha (accumulate only, floating self): self[i] += alpha * values with the
// product fused into the sum, as the CPU's index_add with alpha adds each
// slice (add_(source, alpha): vec::fmadd).
Tensor &index_put_impl(Tensor &self, const c10::List<std::optional<Tensor>> &indices, const Tensor &values,
                       bool accumulate, bool unsafe, const c10::Scalar *alpha = nullptr) {
  c10::DeviceGuard guard(self.device());
  // An expanded self is written through its aliases, as on the CPU (each
  // sum lands on the one shared element, in iteration order): the float32
  // detour below would copy the distinct sums back into aliased memory.
  bool aliased = at::has_internal_overlap(self) == at::MemOverlap::Yes;
  if (accumulate && !aliased && (self.scalar_type() == at::kBFloat16 || self.scalar_type() == at::kHalf)) {
    // Duplicate indices add up in float32 and round once: summing in the
    // 16-bit type rounds after every addition, and the error grows with
    // the number of duplicates (the CPU does that; float32 sums stay
    // within the type's rounding of the exact total).
    Tensor acc = self.to(at::kFloat);
    index_put_impl(acc, indices, values.to(at::kFloat), true, unsafe, alpha);
    self.copy_(acc);
    return self;
  }
  Tensor value = values.device() == self.device() ? values : values.to(self.device());
  if (value.scalar_type() != self.scalar_type()) value = value.to(self.scalar_type());
  IndexPlan p = plan_index(self, indices);
  TORCH_CHECK(at::is_expandable_to(value.sizes(), p.src.sizes()), "shape mismatch: value tensor of shape ",
              value.sizes(), " cannot be broadcast to indexing result of shape ", p.src.sizes());
  auto cfg = at::TensorIteratorConfig();
  cfg.set_check_mem_overlap(false).resize_outputs(false).check_all_same_dtype(false);
  cfg.add_output(p.src).add_const_input(value);
  for (auto &i : p.indices) cfg.add_const_input(i);
  auto iter = cfg.build();
  if (iter.numel() > 0) {
    nrt_launch d;
    describe(d, iter, NRT_OP(INDEX_PUT));
    set_index_aux(d, p);
    d.params[1] = accumulate ? 1 : 0;
    if (alpha) {
      TORCH_INTERNAL_ASSERT(accumulate && at::isFloatingType(self.scalar_type()));
      d.params[3] = 1;
      d.scalars[0].f = alpha->toDouble();
    }
    launch_complex_as(self.device().index(), d, accumulate ? ComplexAs::Parts : ComplexAs::Bits);
  }
  return self;
}

// Whether ATen's index_put_ takes its masked_fill_ shortcut (one bool/byte
// mask on self's device, a one-element value on the CPU, where the CPU's
// self lives: here one on the CPU or on self's device), which skips its
// check of the value's dtype.
bool masked_fill_shortcut(const Tensor &self, const c10::List<std::optional<Tensor>> &indices, const Tensor &value) {
  if (!(value.numel() == 1 && (value.device().is_cpu() || value.device() == self.device()))) return false;
  int masks = 0;
  for (size_t k = 0; k < indices.size(); ++k) {
    const std::optional<Tensor> &i = indices.get(k);
    if (!i || !i->defined()) continue;
    if ((i->scalar_type() != at::kByte && i->scalar_type() != at::kBool) || i->device() != self.device()) return false;
    masks++;
  }
  return masks == 1;
}

// ATen's canDispatchToMaskedFill check: each mask's shape against the dims
// it indexes (IndexError).
void check_mask_shapes(const Tensor &self, const c10::List<std::optional<Tensor>> &indices) {
  int64_t dim = 0;
  for (size_t k = 0; k < indices.size(); ++k) {
    const std::optional<Tensor> &idx = indices.get(k);
    if (idx && idx->defined() && (idx->scalar_type() == at::kBool || idx->scalar_type() == at::kByte)) {
      for (int64_t j = 0; j < idx->dim(); ++j) {
        int64_t src = dim + j;
        TORCH_CHECK_INDEX(src < self.dim() && idx->size(j) == self.size(src), "The shape of the mask ", idx->sizes(),
                          " at index ", j, " does not match the shape of the indexed tensor ", self.sizes(),
                          " at index ", src);
      }
      dim += idx->dim();
    } else {
      dim++;
    }
  }
}

// The rest of ATen's make_info, in its order: the index tensors (a mask as
// one [nonzeros] index per dim it covers) broadcast together, then an
// indexed dim of size 0 with a non-empty index is out of bounds. A mask's
// count is one read from the device; only the failing path calls this.
void check_index_shapes(const Tensor &self, const c10::List<std::optional<Tensor>> &indices) {
  std::vector<std::vector<int64_t>> shapes;
  std::vector<int64_t> indexed_sizes;
  int64_t dim = 0;
  for (size_t k = 0; k < indices.size(); ++k) {
    const std::optional<Tensor> &idx = indices.get(k);
    if (!idx || !idx->defined()) {
      dim++;
      continue;
    }
    if (idx->scalar_type() == at::kBool || idx->scalar_type() == at::kByte) {
      int64_t nnz = idx->numel() == 0 ? 0 : idx->count_nonzero().item<int64_t>();
      for (int64_t j = 0; j < idx->dim(); ++j) {
        shapes.push_back({nnz});
        indexed_sizes.push_back(self.size(dim++));
      }
    } else {
      shapes.push_back(idx->sizes().vec());
      indexed_sizes.push_back(self.size(dim++));
    }
  }
  std::vector<int64_t> shape;
  bool fits = true;
  for (const auto &sh : shapes) {
    size_t n = std::max(shape.size(), sh.size());
    std::vector<int64_t> out(n);
    for (size_t j = 0; j < n && fits; ++j) {
      int64_t a = j < n - shape.size() ? 1 : shape[j - (n - shape.size())];
      int64_t b = j < n - sh.size() ? 1 : sh[j - (n - sh.size())];
      fits = a == b || a == 1 || b == 1;
      out[j] = a == 1 ? b : a;
    }
    shape = out;
  }
  if (!fits) {
    std::ostringstream os;
    for (size_t j = 0; j < shapes.size(); ++j) os << (j ? ", " : "") << c10::IntArrayRef(shapes[j]);
    TORCH_CHECK_INDEX(false, "shape mismatch: indexing tensors could not be broadcast together with shapes ", os.str());
  }
  bool empty_dim = std::find(indexed_sizes.begin(), indexed_sizes.end(), 0) != indexed_sizes.end();
  bool empty_index = std::find(shape.begin(), shape.end(), 0) != shape.end();
  TORCH_CHECK_INDEX(!empty_dim || empty_index, "index is out of bounds for dimension with size 0");
}

// aten::_index_put_impl_ (index_put_, setitem): the value must have self's
// dtype, as ATen's make_index_put_iterator requires; internal callers of
// index_put_impl pass other dtypes on purpose.
Tensor &index_put_checked(Tensor &self, const c10::List<std::optional<Tensor>> &indices, const Tensor &values,
                          bool accumulate, bool unsafe) {
  TORCH_CHECK_INDEX(indices.size() <= static_cast<size_t>(self.dim()), "too many indices for tensor of dimension ",
                    self.dim(), " (got ", indices.size(), ")");
  // ATen's _index_put_impl_ only warns for an expanded self and writes it.
  if (at::has_internal_overlap(self) == at::MemOverlap::Yes) {
    TORCH_WARN("Use of index_put_ on expanded tensors is deprecated. Please clone() the tensor before performing "
               "this operation. This also applies to advanced indexing e.g. tensor[indices] = tensor");
  }
  bool shortcut = !accumulate && masked_fill_shortcut(self, indices, values);
  if (shortcut) {
    // ATen's masked_fill_ shortcut: the mask's shape, then masked_fill_'s
    // own refusal of a uint8 mask.
    check_mask_shapes(self, indices);
    for (size_t k = 0; k < indices.size(); ++k) {
      const std::optional<Tensor> &idx = indices.get(k);
      TORCH_CHECK(!idx || !idx->defined() || idx->scalar_type() == at::kBool,
                  "masked_fill_ only supports boolean masks, but got mask with dtype unsigned char");
    }
  }
  if (values.scalar_type() != self.scalar_type() && !shortcut) {
    // ATen's make_info validates the indices (IndexError) before its
    // iterator compares the dtypes: the same order here, on the failing
    // path only.
    at::native::checkIndexTensorTypes(indices, /*allow_int=*/true);
    check_mask_shapes(self, indices);
    check_index_shapes(self, indices);
    TORCH_CHECK(false, "Index put requires the source and destination dtypes match, got ", self.scalar_type(),
                " for the destination and ", values.scalar_type(), " for the source.");
  }
  // ATen's shortcut fills with values.item(), converted and range-checked
  // as a Scalar (bfloat16 -3.0 into uint8 raises); a value of self's dtype
  // always fits, one of another costs this read.
  if (values.scalar_type() != self.scalar_type()) (void)converted_scalar(values.item(), self.scalar_type());
  return index_put_impl(self, indices, values, accumulate, unsafe);
}

Tensor index_select_fn(const Tensor &self, int64_t dim, const Tensor &index) {
  dim = at::maybe_wrap_dim(dim, self.dim());

  TORCH_CHECK_INDEX(index.dim() <= 1, "index_select(): Index is supposed to be a vector");
  TORCH_CHECK(self.dim() > 0 || index.numel() == 1, "index_select(): Index to scalar can have only 1 value, got ",
              index.numel(), " value(s)");
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
              "index_select(): Expected dtype int32 or int64 for index");
  if (self.dim() == 0) {
    // A 0-dim input gives a 0-dim result (PyTorch treats it as size 1).
    c10::List<std::optional<Tensor>> l;
    l.push_back(index.reshape({-1}));
    Tensor out;
    return index_into(out, self.reshape({1}), l, OutOfRange::Select).reshape({});
  }
  c10::List<std::optional<Tensor>> l;
  for (int64_t d = 0; d < dim; ++d) l.push_back(std::nullopt);
  l.push_back(index.reshape({-1}));
  Tensor out;
  if (self.dim() == 1) return index_into(out, self, l, OutOfRange::Select);
  // The CPU's kernel for a >1-d self: an empty index returns at once; an
  // empty self has its indices checked all the same (RuntimeError, as its
  // path along dim 1 reports them too); elsewhere an index out of range is
  // an IndexError.
  if (index.numel() == 0) return index_into(out, self, l);
  if (self.numel() == 0) {
    TORCH_CHECK(self.size(dim) > 0, "index_select(): self indexing axis dim should be positive");
    // Nothing is read, so the kernel checks the indices against a stand-in
    // of the dim's size whose elements all alias one byte.
    Tensor stand_in = at::zeros({1}, self.options().dtype(at::kByte)).expand({self.size(dim)});
    c10::List<std::optional<Tensor>> flat;
    flat.push_back(index.reshape({-1}));
    Tensor checked;
    (void)index_into(checked, stand_in, flat, OutOfRange::SelectBounds);
    return index_into(out, self, l);
  }
  return index_into(out, self, l, dim == 1 ? OutOfRange::SelectBounds : OutOfRange::Select);
}

// masked_fill_: where(mask, value, self) written into self.
Tensor &masked_fill_scalar(Tensor &self, const Tensor &mask, const Scalar &value) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_fill_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  c10::DeviceGuard guard(self.device());
  Tensor m = mask.device() == self.device() ? mask : mask.to(self.device());
  // converted (and range-checked) as the CPU's masked_fill kernel does; a
  // one-element fill alone would not check a float16 value
  Tensor v = at::empty({}, self.options()).fill_(converted_scalar(value, self.scalar_type()));
  if (at::has_internal_overlap(self) == at::MemOverlap::Yes) {
    // ATen's masked_fill_ only warns for an expanded self, and its kernel
    // writes the value wherever the mask is set, so an element takes it when
    // any of its aliases is masked: fill the distinct elements (stride-0
    // dims collapsed) with the mask reduced over those dims, race-free.
    TORCH_WARN("Use of masked_fill_ on expanded tensors is deprecated. Please clone() the tensor before performing "
               "this operation. This also applies to advanced indexing e.g. tensor[mask] = scalar");
    at::assert_no_partial_overlap(self, mask);
    std::vector<int64_t> sizes = self.sizes().vec(), dims;
    for (int64_t d = 0; d < self.dim(); ++d) {
      if (self.stride(d) == 0 && sizes[d] > 1) {
        sizes[d] = 1;
        dims.push_back(d);
      }
    }
    Tensor any = m.expand(self.sizes()).amax(dims, /*keepdim=*/true);
    Tensor base = self.as_strided(sizes, self.strides(), self.storage_offset());
    masked_fill_scalar(base, any, value);
    return self;
  }
  auto iter = at::TensorIteratorConfig()
                  .check_all_same_dtype(false)
                  .resize_outputs(false)
                  .add_output(self)
                  .add_const_input(m)
                  .add_const_input(v)
                  .add_const_input(self)
                  .build();
  launch_iter(iter, NRT_OP_WHERE);
  return self;
}
Tensor &masked_fill_tensor(Tensor &self, const Tensor &mask, const Tensor &value) {
  TORCH_CHECK(value.dim() == 0, "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
              value.dim(), " dimension(s).");
  // The CPU (and CUDA) fill with value.item(), converted and range-checked
  // as a Scalar: a device value costs one synchronising read, as on CUDA,
  // so that a value the dtype cannot hold raises here, at the op.
  return masked_fill_scalar(self, mask, value.item());
}

Tensor nonzero_fn(const Tensor &self) {
  // A complex element is nonzero when either part is (-0.0 counts as zero).
  if (self.is_complex()) return nonzero_fn(at::view_as_real(self.resolve_conj()).ne(0).any(-1));
  c10::DeviceGuard guard(self.device());
  // The count decides the output shape: one synchronising read, as on CUDA.
  int64_t count = self.numel() == 0 ? 0 : self.ne(0).sum().item<int64_t>();
  Tensor out = at::empty({count, self.dim()}, self.options().dtype(at::kLong));
  if (count == 0 || self.dim() == 0) {
    if (self.dim() == 0 && count > 0) return at::empty({1, 0}, self.options().dtype(at::kLong));
    return out;
  }
  TORCH_CHECK(self.dim() <= NRT_MAX_DIMS, "nonzero supports at most ", NRT_MAX_DIMS, " dims on neuron");
  nrt_launch d = new_launch(NRT_OP(NONZERO));
  d.ndim = static_cast<int>(self.dim());
  d.noutputs = 1;
  d.ninputs = 1;
  d.operands[0].data = out.data_ptr();
  d.operands[0].dtype = NRT_INT64;
  d.operands[0].strides[0] = out.stride(0) * 8;
  d.operands[0].strides[1] = out.stride(1) * 8;
  d.operands[1].data = const_cast<void *>(self.const_data_ptr());
  d.operands[1].dtype = to_nrt_dtype(self.scalar_type());
  for (int64_t i = 0; i < self.dim(); ++i) {
    d.sizes[i] = self.size(i);
    d.operands[1].strides[i] = self.stride(i) * static_cast<int64_t>(self.element_size());
  }
  d.compute_dtype = d.operands[1].dtype;
  d.params[0] = count;
  launch(self.device().index(), d);
  return out;
}

Tensor masked_select_fn(const Tensor &self, const Tensor &mask) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_select: expected BoolTensor for mask");
  auto expanded = at::expand_outplace(self, mask);
  Tensor s = *std::get<0>(expanded), mk = *std::get<1>(expanded);
  if (s.dim() == 0) {  // index a 1-element view: 0-dim tensors take no mask index
    s = s.reshape({1});
    mk = mk.reshape({1});
  }
  c10::List<std::optional<Tensor>> l;
  l.push_back(mk);
  return index_tensor_into(Tensor(), s, l);
}

// ---- gather / scatter -----------------------------------------------------------
Tensor restride_dim(const Tensor &t, int64_t dim, c10::IntArrayRef shape) {
  std::vector<int64_t> st = t.dim() == 0 ? std::vector<int64_t>{1} : t.strides().vec();
  st[dim] = 0;
  return t.as_strided(shape, st);
}

void check_index_dtype(const Tensor &index, const char *name) {
  if (index.numel() == 0) return;  // PyTorch accepts an empty index of any dtype
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt, name,
              "(): Expected dtype int32/int64 for index");
}

Tensor gather_fn(const Tensor &self, int64_t dim, const Tensor &index, bool /*sparse_grad*/) {
  c10::DeviceGuard guard(self.device());
  check_index_dtype(index, "gather");
  dim = at::maybe_wrap_dim(dim, self.dim());
  if (index.numel() == 0) return at::empty(index.sizes(), self.options());  // PyTorch skips the shape checks
  TORCH_CHECK(std::max<int64_t>(index.dim(), 1) == std::max<int64_t>(self.dim(), 1),
              "Index tensor must have the same number of dimensions as input tensor");
  for (int64_t d = 0; d < index.dim(); ++d) {
    if (d == dim) continue;
    TORCH_CHECK(index.size(d) <= self.size(d), "Size does not match at dimension ", d,
                " expected index ", index.sizes(), " to be no larger than self ", self.sizes(),
                " apart from dimension ", dim);
  }
  Tensor out = at::empty(index.sizes(), self.options());
  if (index.numel() == 0) return out;
  Tensor src = self.dim() == 0 ? self.reshape({1}) : self;
  Tensor idx = index.dim() == 0 ? index.reshape({1}) : index;
  Tensor o = out.dim() == 0 ? out.reshape({1}) : out;
  auto iter = at::TensorIteratorConfig()
                  .set_check_mem_overlap(false)
                  .check_all_same_dtype(false)
                  .resize_outputs(false)
                  .add_output(o)
                  .add_owned_const_input(restride_dim(src, dim, idx.sizes()))
                  .add_const_input(idx)
                  .build();
  nrt_launch d;
  describe(d, iter, NRT_OP(GATHER));
  d.aux[0] = src.size(dim);
  d.aux[1] = src.stride(dim) * static_cast<int64_t>(src.element_size());
  d.aux[2] = dim;  // named in out-of-bounds errors
  launch_complex_as(self.device().index(), d, ComplexAs::Bits);
  return out;
}

// reduce codes of the SCATTER kernel
enum { kAssign = 0, kAdd = 1, kMul = 2, kMeanSum = 3, kAmax = 4, kAmin = 5 };

// ATen's scatter_meta_impl, in its order, for every scatter overload: the
// dtypes (an empty index may have any), the shapes (skipped for an empty
// index), then, when the result is given (in-place, out=), its overlap with
// itself and the inputs; scatter_launch relies on these.
void scatter_meta(const Tensor &self, int64_t dim, const Tensor &index, const Tensor *src, const Tensor &out) {
  check_index_dtype(index, "scatter");
  TORCH_CHECK(!src || src->scalar_type() == self.scalar_type(), "scatter(): Expected self.dtype to be equal to src.dtype");
  if (index.numel() != 0) {
    int64_t nd = std::max<int64_t>(self.dim(), 1);
    TORCH_CHECK(std::max<int64_t>(index.dim(), 1) == nd,
                "Index tensor must have the same number of dimensions as self tensor");
    auto size = [](const Tensor &t, int64_t d) { return t.dim() == 0 ? 1 : t.size(d); };
    bool wrong = false;
    for (int64_t d = 0; d < nd && !wrong; ++d) wrong = d != dim && size(index, d) > size(self, d);
    for (int64_t d = 0; src && d < nd && !wrong; ++d) wrong = size(index, d) > size(*src, d);
    if (src) {
      TORCH_CHECK(!wrong, "Expected index ", index.sizes(), " to be no larger than self ", self.sizes(),
                  " apart from dimension ", dim, " and to be no larger size than src ", src->sizes());
    } else {
      TORCH_CHECK(!wrong, "Expected index ", index.sizes(), " to be no larger than self ", self.sizes(),
                  " apart from dimension ", dim);
    }
  }
  if (out.defined()) {
    at::assert_no_internal_overlap(out);
    at::assert_no_overlap(out, index);
    if (src) at::assert_no_overlap(out, *src);
  }
}

// Runs after scatter_meta.
void scatter_launch(const Tensor &self, int64_t dim, const Tensor &index, const Tensor *src, const Scalar *value,
                    int reduce) {
  if (index.numel() == 0) return;
  Tensor s = self.dim() == 0 ? self.reshape({1}) : self;
  Tensor idx = index.dim() == 0 ? index.reshape({1}) : index;
  Tensor v;
  if (src) {
    Tensor sr = src->dim() == 0 ? src->reshape({1}) : *src;
    v = sr.as_strided(idx.sizes(), sr.strides());
  } else {
    v = at::empty({}, self.options()).fill_(converted_scalar(*value, self.scalar_type())).expand(idx.sizes());
  }
  // The CPU's scatter kernels reduce float16/bfloat16 in a float32 copy of
  // self and round once at the end (create_acc_buffer in ATen's
  // ScatterGatherKernel.cpp, and its expanded-index path's float buffer):
  // adding or multiplying in the 16-bit type would round, and overflow,
  // at every step (60000 + 60000 - 60000 is inf in float16, 60000 in
  // float32). The source, a scalar value too, keeps its 16-bit rounding.
  // Assign, amax and amin are exact either way.
  bool wide = at::isReducedFloatingType(self.scalar_type()) && (reduce == kAdd || reduce == kMul || reduce == kMeanSum);
  Tensor acc = wide ? s.to(at::kFloat) : s;
  auto iter = at::TensorIteratorConfig()
                  .set_check_mem_overlap(false)
                  .check_all_same_dtype(false)
                  .resize_outputs(false)
                  .add_owned_output(restride_dim(acc, dim, idx.sizes()))
                  .add_const_input(idx)
                  .add_const_input(v)
                  .build();
  nrt_launch d;
  describe(d, iter, NRT_OP(SCATTER));
  d.aux[0] = acc.size(dim);
  d.aux[1] = acc.stride(dim) * static_cast<int64_t>(acc.element_size());
  d.aux[2] = dim;  // named in out-of-bounds errors
  d.params[0] = reduce;
  // assign moves bits, add and mean's sum add parts, multiply has the
  // kernel's own complex product (its element dtype is the launch's); amax
  // and amin refuse complex (checked above, as the CPU)
  if (reduce <= 1 || reduce == kMeanSum)
    launch_complex_as(self.device().index(), d, reduce == 0 ? ComplexAs::Bits : ComplexAs::Parts);
  else if (reduce == kMul && self.is_complex() && self.scalar_type() != at::kComplexHalf)
    enqueue(self.device().index(), d);
  else
    launch(self.device().index(), d);
  if (wide) s.copy_(acc);
}

// The scatter family writes into a copy of self (functional, out=: resized
// to self's shape) or into self (in-place).
Tensor scatter_target(const Tensor &out, const Tensor &self) {
  if (out.is_same(self)) return out;
  if (!out.defined()) return self.clone();
  at::native::resize_output(out, self.sizes());
  out.copy_(self);
  return out;
}
Tensor scatter_src_into(Tensor out, const Tensor &self, int64_t dim, const Tensor &index, const Tensor &src) {
  scatter_meta(self, at::maybe_wrap_dim(dim, self.dim()), index, &src, out);
  Tensor t = scatter_target(out, self);
  scatter_launch(t, at::maybe_wrap_dim(dim, self.dim()), index, &src, nullptr, kAssign);
  return t;
}
Tensor scatter_value_into(Tensor out, const Tensor &self, int64_t dim, const Tensor &index, const Scalar &value) {
  scatter_meta(self, at::maybe_wrap_dim(dim, self.dim()), index, nullptr, out);
  Tensor t = scatter_target(out, self);
  scatter_launch(t, at::maybe_wrap_dim(dim, self.dim()), index, nullptr, &value, kAssign);
  return t;
}
// The older scatter(reduce="add"|"multiply") overloads.
int scatter_reduce_code(c10::string_view reduce) {
  if (reduce == "add") return kAdd;
  if (reduce == "multiply") return kMul;
  TORCH_CHECK(false, "reduce argument must be either add or multiply.");
}
Tensor scatter_reduce_src_into(Tensor out, const Tensor &self, int64_t dim, const Tensor &index, const Tensor &src,
                               c10::string_view reduce) {
  scatter_meta(self, at::maybe_wrap_dim(dim, self.dim()), index, &src, out);
  int code = scatter_reduce_code(reduce);
  Tensor t = scatter_target(out, self);
  scatter_launch(t, at::maybe_wrap_dim(dim, self.dim()), index, &src, nullptr, code);
  return t;
}
Tensor scatter_reduce_value_into(Tensor out, const Tensor &self, int64_t dim, const Tensor &index,
                                 const Scalar &value, c10::string_view reduce) {
  scatter_meta(self, at::maybe_wrap_dim(dim, self.dim()), index, nullptr, out);
  int code = scatter_reduce_code(reduce);
  Tensor t = scatter_target(out, self);
  scatter_launch(t, at::maybe_wrap_dim(dim, self.dim()), index, nullptr, &value, code);
  return t;
}

Tensor scatter_add_into(Tensor out, const Tensor &self, int64_t dim, const Tensor &index, const Tensor &src) {
  scatter_meta(self, at::maybe_wrap_dim(dim, self.dim()), index, &src, out);
  Tensor t = scatter_target(out, self);
  scatter_launch(t, at::maybe_wrap_dim(dim, self.dim()), index, &src, nullptr, kAdd);
  return t;
}

Tensor scatter_reduce_fn(const Tensor &self, int64_t dim, const Tensor &index, const Tensor &src,
                         c10::string_view reduce, bool include_self) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  scatter_meta(self, dim, index, &src, Tensor());
  int code;
  if (reduce == "sum") code = kAdd;
  else if (reduce == "prod") code = kMul;
  else if (reduce == "mean") code = kMeanSum;
  else if (reduce == "amax") code = kAmax;
  else if (reduce == "amin") code = kAmin;
  else TORCH_CHECK(false, "reduce argument must be either sum, prod, mean, amax or amin, got ", reduce);
  bool is_float = at::isFloatingType(self.scalar_type());
  Tensor out = self.clone();
  if (!include_self) {
    // Positions that receive values start from the reduction's identity.
    // The CPU fills them (scatter_ of a value, which checks the indices)
    // before its reduction dispatches on the dtype below, so an index out
    // of range is reported first. Complex amax/amin are refused below
    // whatever is filled.
    Scalar id;
    if (code == kAdd || code == kMeanSum) id = 0;
    else if (code == kMul) id = 1;
    else if (is_float || self.is_complex()) id = code == kAmax ? -INFINITY : INFINITY;
    else {
      int bits = 8 * static_cast<int>(self.element_size());
      bool is_unsigned = self.scalar_type() == at::kByte || self.scalar_type() == at::kBool;
      int64_t lo = is_unsigned ? 0 : (bits == 64 ? std::numeric_limits<int64_t>::lowest() : -(1LL << (bits - 1)));
      int64_t hi = self.scalar_type() == at::kBool ? 1
                   : is_unsigned ? 255
                   : (bits == 64 ? std::numeric_limits<int64_t>::max() : (1LL << (bits - 1)) - 1);
      id = code == kAmax ? lo : hi;
    }
    scatter_launch(out, dim, index, nullptr, &id, kAssign);
  }
  // The CPU kernel's dtype dispatch for the reduction (before it restrides
  // self): no bool mean (with no index, its final floor division refuses
  // bool), no complex amax/amin. The fill's kernel reports an index out of
  // range at the stream's next synchronisation: wait for it here, so that
  // error comes first, as on the CPU, and does not surface at a later op.
  bool refused = (self.scalar_type() == at::kBool && code == kMeanSum) ||
                 (self.is_complex() && (code == kAmax || code == kAmin) && index.numel() > 0);
  if (refused && !include_self && index.numel() > 0)
    check(nrt_stream_synchronize(current_nrt_stream(self.device().index())), "neuron scatter_reduce");
  if (self.scalar_type() == at::kBool && code == kMeanSum) {
    TORCH_CHECK_NOT_IMPLEMENTED(false, "\"", index.numel() > 0 ? "scatter_gather_tensor_cpu_reduce_mean" : "div_floor_cpu",
                                "\" not implemented for 'Bool'");
  }
  TORCH_CHECK_NOT_IMPLEMENTED(!(self.is_complex() && (code == kAmax || code == kAmin) && index.numel() > 0),
                              "\"scatter_gather_tensor_cpu_reduce_", reduce, "\" not implemented for '",
                              c10::toString(self.scalar_type()), "'");
  scatter_launch(out, dim, index, &src, nullptr, code);
  if (reduce == "mean") {
    Tensor counts = include_self ? at::ones(self.sizes(), self.options()) : at::zeros(self.sizes(), self.options());
    Tensor ones = at::ones(index.sizes(), self.options());
    scatter_launch(counts, dim, index, &ones, nullptr, kAdd);
    counts.masked_fill_(counts.eq(0), 1);
    // integers floor, as the CPU's scatter mean; complex divides as floats do
    if (is_float || self.is_complex()) out.div_(counts);
    else out.div_(counts, "floor");
  }
  return out;
}
// Its in-place and out= forms (out must have self's dtype, as the structured
// op's out= check).
Tensor scatter_reduce_two_into(Tensor out, const Tensor &self, int64_t dim, const Tensor &index, const Tensor &src,
                               c10::string_view reduce, bool include_self) {
  // the in-place and out= results are checked before the reduction's name
  scatter_meta(self, at::maybe_wrap_dim(dim, self.dim()), index, &src, out);
  check_out_dtype(out, self.scalar_type());
  return scatter_reduce_fn(self, dim, index, src, reduce, include_self);
}

Tensor embedding_dense_backward_fn(const Tensor &grad, const Tensor &indices, int64_t num_weights,
                                   int64_t padding_idx, bool scale_grad_by_freq) {
  c10::DeviceGuard guard(grad.device());
  int64_t dim = grad.size(-1);
  // Rows of width 0 hold no gradient (and cannot be reshaped to [-1, 0]).
  if (dim == 0) return at::zeros({num_weights, 0}, grad.options());
  Tensor g = grad.reshape({-1, dim});
  Tensor idx = indices.reshape({-1});
  if (idx.scalar_type() != at::kLong) idx = idx.to(at::kLong);
  if (padding_idx >= 0) g = g.mul(idx.ne(padding_idx).unsqueeze(1).to(g.scalar_type()));
  if (scale_grad_by_freq) {
    Tensor counts = at::zeros({num_weights}, g.options());
    c10::List<std::optional<Tensor>> l;
    l.push_back(idx);
    index_put_impl(counts, l, at::ones({idx.numel()}, g.options()), true, false);
    g = g.div(index_tensor_into(Tensor(), counts, l).unsqueeze(1));
  }
  Tensor out = at::zeros({num_weights, dim}, grad.options());
  c10::List<std::optional<Tensor>> l;
  l.push_back(idx);
  index_put_impl(out, l, g, /*accumulate=*/true, false);
  return out;
}

// ---- sort / topk --------------------------------------------------------------
std::tuple<Tensor, Tensor> sort_stable(const Tensor &self, std::optional<bool> /*stable*/, int64_t dim,
                                       bool descending) {
  c10::DeviceGuard guard(self.device());
  dim = at::maybe_wrap_dim(dim, self.dim());
  // as the CPU's (and CUDA's) sort kernel refuses complex after the meta's dim check
  TORCH_CHECK(!self.is_complex(), "Sort does not support complex dtypes");
  Tensor x = self.dim() == 0 ? self.reshape({1}) : self.transpose(dim, -1).contiguous();
  // The results take the layout sort's meta function gives (self's strides,
  // or dense strides inferred from them); the kernel writes them through a
  // view with the sorted dim last.
  std::vector<int64_t> strides = self.is_non_overlapping_and_dense()
                                     ? self.strides().vec()
                                     : at::infer_dense_strides(self.sizes(), self.strides());
  Tensor values_out = at::empty_strided(self.sizes(), strides, self.options());
  Tensor indices_out = at::empty_strided(self.sizes(), strides, self.options().dtype(at::kLong));
  Tensor values = self.dim() == 0 ? values_out.reshape({1}) : values_out.transpose(dim, -1);
  Tensor indices = self.dim() == 0 ? indices_out.reshape({1}) : indices_out.transpose(dim, -1);
  if (x.numel() > 0) {
    TORCH_CHECK(x.dim() <= NRT_MAX_DIMS, "sort supports at most ", NRT_MAX_DIMS, " dims on neuron");
    nrt_launch d = new_launch(NRT_OP(SORT));
    d.ndim = static_cast<int>(x.dim());
    d.noutputs = 2;
    d.ninputs = 1;
    const Tensor *ops[3] = {&values, &indices, &x};
    for (int i = 0; i < 3; ++i) {
      d.operands[i].data = const_cast<void *>(ops[i]->const_data_ptr());
      d.operands[i].dtype = to_nrt_dtype(ops[i]->scalar_type());
      for (int j = 0; j < d.ndim; ++j) d.operands[i].strides[j] = ops[i]->stride(j) * static_cast<int64_t>(ops[i]->element_size());
    }
    for (int j = 0; j < d.ndim; ++j) d.sizes[j] = x.size(j);
    d.compute_dtype = d.operands[2].dtype;
    d.params[0] = descending ? 1 : 0;
    launch(self.device().index(), d);
  }
  return {values_out, indices_out};
}

std::tuple<Tensor, Tensor> topk_fn(const Tensor &self, int64_t k, int64_t dim, bool largest, bool /*sorted*/) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  int64_t n = self.dim() == 0 ? 1 : self.size(dim);
  TORCH_CHECK(k >= 0 && k <= n, "selected index k out of range");
  TORCH_CHECK(!self.is_complex(), "topk does not support complex dtypes");
  TORCH_CHECK(self.scalar_type() != at::kBool, "topk does not support bool dtypes");
  auto [v, i] = sort_stable(self, true, dim, largest);
  if (self.dim() == 0) return {v, i};
  return {v.narrow(dim, 0, k).contiguous(), i.narrow(dim, 0, k).contiguous()};
}

// ---- index-generating factories ---------------------------------------------------
Tensor &arange_out(const Scalar &start, const Scalar &end, const Scalar &step, Tensor &out) {
  double s = start.toDouble(), e = end.toDouble(), st = step.toDouble();
  TORCH_CHECK(st != 0, "step must be nonzero");
  TORCH_CHECK(std::isfinite(s) && std::isfinite(e), "unsupported range: ", s, " -> ", e);
  TORCH_CHECK((st > 0 && e >= s) || (st < 0 && e <= s), "upper bound and larger bound inconsistent with step sign");
  int64_t n;
  if (at::isIntegralType(out.scalar_type(), true)) {
    // Integer outputs: PyTorch truncates start, end and step to int64 first.
    int64_t a = start.toLong(), b = end.toLong(), c = step.toLong();
    TORCH_CHECK(c != 0, "step must be nonzero");
    n = c > 0 ? (b - a + c - 1) / c : (a - b - c - 1) / (-c);
    if (n < 0) n = 0;
  } else {
    n = static_cast<int64_t>(std::ceil((e - s) / st));
  }
  TORCH_CHECK(n >= 0, "arange: invalid size ", n);
  c10::DeviceGuard guard(out.device());
  if (out.numel() != n) out.resize_({n});
  if (n == 0) return out;
  Tensor dst = out.is_contiguous() ? out : at::empty({n}, out.options());
  nrt_launch d = new_launch(NRT_OP(ARANGE), {n});
  d.noutputs = 1;
  d.operands[0].data = dst.data_ptr();
  d.operands[0].dtype = to_nrt_dtype(dst.scalar_type());
  d.operands[0].strides[0] = static_cast<int64_t>(dst.element_size());
  d.compute_dtype = d.operands[0].dtype;
  if (at::isFloatingType(dst.scalar_type())) {
    d.scalars[0].f = s;
    d.scalars[1].f = st;
  } else {
    d.scalars[0].i = start.toLong();
    d.scalars[1].i = step.toLong();
  }
  launch(out.device().index(), d);
  if (!dst.is_same(out)) out.copy_(dst);
  return out;
}

Tensor &linspace_out(const Scalar &start, const Scalar &end, int64_t steps, Tensor &out) {
  TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
  c10::DeviceGuard guard(out.device());
  if (out.numel() != steps) out.resize_({steps});
  if (steps == 0) return out;
  Tensor dst = at::empty({steps}, out.options().dtype(at::isFloatingType(out.scalar_type()) ? out.scalar_type()
                                                                                           : at::kDouble));
  // Integer outputs: PyTorch converts start and end to the output type
  // first (4.3 -> 4), then steps between them in double.
  bool integral = !at::isFloatingType(out.scalar_type());
  double s = integral ? static_cast<double>(start.toLong()) : start.toDouble();
  double e = integral ? static_cast<double>(end.toLong()) : end.toDouble();
  nrt_launch d = new_launch(NRT_OP(LINSPACE), {steps});
  d.noutputs = 1;
  d.operands[0].data = dst.data_ptr();
  d.operands[0].dtype = to_nrt_dtype(dst.scalar_type());
  d.operands[0].strides[0] = static_cast<int64_t>(dst.element_size());
  d.compute_dtype = d.operands[0].dtype;
  d.scalars[0].f = s;
  d.scalars[1].f = steps > 1 ? (e - s) / static_cast<double>(steps - 1) : 0.0;
  d.scalars[2].f = e;
  launch(out.device().index(), d);
  out.copy_(dst);
  return out;
}

Tensor &eye_m_out(int64_t n, int64_t m, Tensor &out) {
  TORCH_CHECK(n >= 0 && m >= 0, "n and m must be greater or equal to 0");
  out.resize_({n, m});
  out.zero_();
  int64_t k = std::min(n, m);
  if (k > 0) out.as_strided({k}, {out.stride(0) + out.stride(1)}).fill_(1);
  return out;
}
Tensor &eye_out(int64_t n, Tensor &out) { return eye_m_out(n, n, out); }

void triangle(const Tensor &out, const Tensor &self, int64_t upper, int64_t diagonal) {
  TORCH_CHECK(self.dim() >= 2, upper ? "triu" : "tril", ": input tensor must have at least 2 dimensions");
  if (self.numel() == 0) return;
  auto iter = at::TensorIteratorConfig()
                  .set_check_mem_overlap(false)
                  .check_all_same_dtype(false)
                  .resize_outputs(false)
                  .add_output(out)
                  .add_const_input(self)
                  .build();
  // The kernel needs the (row, col) of each element: describe the tensors
  // directly (no dimension coalescing) rather than through the iterator.
  (void)iter;
  TORCH_CHECK(self.dim() <= NRT_MAX_DIMS, "tril/triu support at most ", NRT_MAX_DIMS, " dims on neuron");
  nrt_launch d = new_launch(NRT_OP(TRIANGLE));
  d.ndim = static_cast<int>(self.dim());
  d.noutputs = 1;
  d.ninputs = 1;
  for (int j = 0; j < d.ndim; ++j) {
    d.sizes[j] = self.size(j);
    d.operands[0].strides[j] = out.stride(j) * static_cast<int64_t>(out.element_size());
    d.operands[1].strides[j] = self.stride(j) * static_cast<int64_t>(self.element_size());
  }
  d.operands[0].data = out.data_ptr();
  d.operands[0].dtype = to_nrt_dtype(out.scalar_type());
  d.operands[1].data = const_cast<void *>(self.const_data_ptr());
  d.operands[1].dtype = to_nrt_dtype(self.scalar_type());
  d.compute_dtype = d.operands[1].dtype;
  d.params[0] = upper;
  d.params[1] = diagonal;
  launch_complex_as(self.device().index(), d, ComplexAs::Bits);
}

// bincount: one read of the input's range sizes the result (as on CUDA);
// the counts (or weight sums) are an accumulating index_put_.
Tensor bincount_fn(const Tensor &self, const std::optional<Tensor> &weights, int64_t minlength) {
  TORCH_CHECK(minlength >= 0, "minlength should be >= 0");
  TORCH_CHECK(self.dim() == 1 && !at::isFloatingType(self.scalar_type()) && self.scalar_type() != at::kBool,
              "bincount only supports 1-d non-negative integral inputs.");
  bool has_w = weights.has_value() && weights->defined();
  if (has_w) {
    TORCH_CHECK(weights->dim() == 1 && weights->size(0) == self.size(0),
                "weights should be 1-d and have the same length as input");
  }
  at::ScalarType rt = !has_w ? at::kLong : (weights->scalar_type() == at::kFloat ? at::kFloat : at::kDouble);
  int64_t n = minlength;
  if (self.numel() > 0) {
    Tensor mm = at::stack({self.min(), self.max()}).cpu();
    TORCH_CHECK(mm[0].item<int64_t>() >= 0, "bincount only supports 1-d non-negative integral inputs.");
    n = std::max(n, mm[1].item<int64_t>() + 1);
  }
  Tensor out = at::zeros({n}, self.options().dtype(rt));
  if (self.numel() > 0) {
    c10::List<std::optional<Tensor>> idx;
    idx.push_back(self.to(at::kLong));
    Tensor v = has_w ? weights->to(rt) : at::ones({self.numel()}, out.options());
    index_put_impl(out, idx, v, /*accumulate=*/true, false);
  }
  return out;
}
Tensor tril_into(Tensor out, const Tensor &self, int64_t k) {
  c10::DeviceGuard guard(self.device());
  if (!out.defined()) out = at::empty(self.sizes(), self.options());
  triangle(out, self, 0, k);
  return out;
}
Tensor triu_into(Tensor out, const Tensor &self, int64_t k) {
  c10::DeviceGuard guard(self.device());
  if (!out.defined()) out = at::empty(self.sizes(), self.options());
  triangle(out, self, 1, k);
  return out;
}
// Functional forms for the out= overloads (registry/variants.h's
// NEURON_OUT_OF: computed fresh, then stored with ATen's out= dtype check).
Tensor tril_fn(const Tensor &self, int64_t k) { return tril_into(Tensor(), self, k); }
Tensor triu_fn(const Tensor &self, int64_t k) { return triu_into(Tensor(), self, k); }
Tensor scatter_src_fn(const Tensor &self, int64_t dim, const Tensor &index, const Tensor &src) {
  return scatter_src_into(Tensor(), self, dim, index, src);
}
Tensor scatter_value_fn(const Tensor &self, int64_t dim, const Tensor &index, const Scalar &value) {
  return scatter_value_into(Tensor(), self, dim, index, value);
}
Tensor scatter_add_fn(const Tensor &self, int64_t dim, const Tensor &index, const Tensor &src) {
  return scatter_add_into(Tensor(), self, dim, index, src);
}

// tril_indices / triu_indices: the coordinates of the triangle's elements in
// row-major order, i.e. nonzero() of the triangular mask.
Tensor tri_indices(int64_t row, int64_t col, int64_t offset, std::optional<at::ScalarType> dtype,
                   std::optional<c10::Device> device, bool upper) {
  TORCH_CHECK(row >= 0, "row must be non-negative, got", row);
  TORCH_CHECK(col >= 0, "col must be non-negative, got", col);
  at::ScalarType dt = dtype.value_or(at::kLong);
  TORCH_CHECK_NOT_IMPLEMENTED(dt == at::kLong || dt == at::kInt, "\"", upper ? "triu" : "tril", "_indices\" not implemented for '",
              c10::toString(dt), "'");
  c10::Device dev = device.value_or(c10::Device(kNeuron));
  c10::DeviceGuard guard(dev);
  Tensor mask = at::ones({row, col}, at::TensorOptions().dtype(at::kBool).device(dev));
  mask = upper ? mask.triu(offset) : mask.tril(offset);
  return mask.nonzero().t().to(dt).contiguous();
}
Tensor tril_indices_fn(int64_t row, int64_t col, int64_t offset, std::optional<at::ScalarType> dtype,
                       std::optional<at::Layout>, std::optional<c10::Device> device, std::optional<bool>) {
  return tri_indices(row, col, offset, dtype, device, false);
}
Tensor triu_indices_fn(int64_t row, int64_t col, int64_t offset, std::optional<at::ScalarType> dtype,
                       std::optional<at::Layout>, std::optional<c10::Device> device, std::optional<bool>) {
  return tri_indices(row, col, offset, dtype, device, true);
}

// index_add / index_fill_: advanced indexing along `dim` (accumulating for add).
c10::List<std::optional<Tensor>> dim_index(int64_t dim, const Tensor &index) {
  c10::List<std::optional<Tensor>> l;
  for (int64_t d = 0; d < dim; ++d) l.push_back(std::nullopt);
  l.push_back(index.reshape({-1}));
  return l;
}
// The CPU's index_add kernel checks every index (no negative one) as it
// adds; here the indices stay on the device, so a kernel checks them: a
// gather or index_select over a stand-in of the indexed size whose elements
// all alias one byte (nothing is read), failing as the CPU fails. A 0-d or
// 1-d self is checked against its element count, even when empty
// (IndexError "index out of range in self"). A >1-d self goes through
// scatter_add_ on the CPU along its first or last dim with an int64 index
// and alpha 1 (RuntimeError "index i is out of bounds for dimension d with
// size s", which gather reports alike), else through its own loop
// (IndexError as above).
bool index_add_is_scatter_add(const Tensor &self, int64_t dim, const Tensor &index, const Scalar &alpha) {
  return self.dim() > 1 && (dim == 0 || dim == self.dim() - 1) && alpha.equal(1.0) &&
         index.scalar_type() == at::kLong && self.scalar_type() != at::kComplexHalf;
}
void check_index_add_indices(const Tensor &self, int64_t dim, const Tensor &index, const Scalar &alpha) {
  Tensor idx = index.reshape({-1}).to(self.device());
  Tensor byte = at::zeros({1}, self.options().dtype(at::kByte));
  if (self.dim() <= 1) {
    // an empty self has no index in range: refused here, without a kernel
    TORCH_CHECK_INDEX(self.numel() > 0 || idx.numel() == 0, "index out of range in self");
    if (idx.numel() > 0) (void)at::index_select(byte.expand({self.numel()}), 0, idx);
    return;
  }
  if (!index_add_is_scatter_add(self, dim, index, alpha)) {
    (void)at::index_select(byte.expand({self.size(dim)}), 0, idx);
    return;
  }
  std::vector<int64_t> stand_in(self.dim(), 1), index_shape(self.dim(), 1);
  stand_in[dim] = self.size(dim);
  index_shape[dim] = idx.numel();
  (void)at::gather(byte.expand(stand_in), dim, idx.reshape(index_shape));
}

Tensor index_add_into(Tensor, const Tensor &self, int64_t dim, const Tensor &index, const Tensor &source,
                      const Scalar &alpha) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  // index_add's meta function (index_func_meta_impl), before anything else:
  // even an empty self is checked.
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_add_(): Index is supposed to be a vector, but got dim: ", index.dim(),
                    " with type: ", index.scalar_type(), " and size: ", index.sizes());
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
              "index_add_(): Expected dtype int32/int64 for index but got: ", index.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(), "index_add_(): self (", self.scalar_type(), ") and source (",
              source.scalar_type(), ") must have the same scalar type");
  TORCH_CHECK(dim == 0 || dim < source.dim(), "index_add_(): Indexing dim ", dim,
              " is out of bounds of the source tensor with dim ", source.dim());
  TORCH_CHECK(index.numel() == (source.dim() == 0 ? 1 : source.size(dim)), "index_add_(): Number of indices (",
              index.numel(), ") should be equal to source.size(dim): (", source.size(dim), "), for dim: ", dim);
  std::vector<int64_t> self_sizes = self.sizes().vec(), source_sizes = source.sizes().vec();
  if (source.dim() != 0 && self.dim() != 0) {
    self_sizes.erase(self_sizes.begin() + dim);
    source_sizes.erase(source_sizes.begin() + dim);
  }
  TORCH_CHECK(self_sizes == source_sizes, "source tensor shape must match self tensor shape, excluding the specified "
              "dimension. Got self.shape = ", self.sizes(), " source.shape = ", source.sizes());
  Tensor out = self.clone();
  if (self.dim() > 1 && (index.numel() == 0 || self.numel() == 0)) return out;  // the CPU's kernel checks nothing then
  check_index_add_indices(self, dim, index, alpha);
  if (self.numel() == 0) return out;
  // index_put_ requires self's dtype. The CPU converts alpha to self's dtype first (Scalar::to<T>): 1000
  // overflows int8, and a fractional alpha truncates (0.5 adds nothing to
  // an integer tensor).
  Scalar a = converted_scalar(alpha, self.scalar_type());
  // Outside its scatter_add_ path the CPU adds source * alpha even for an
  // alpha of 1, which a complex source notices: (inf + 1i) * (1 + 0i) is
  // inf + nan i (the textbook product's inf * 0).
  bool times_alpha = !a.equal(1) || (self.is_complex() && !index_add_is_scatter_add(self, dim, index, alpha));
  // A real floating self of 2 or more dims adds alpha * source with the
  // product fused into each sum, as the CPU's add_ of each slice with alpha
  // (3.4e38 + 2 * -1.3 stays finite where the rounded product 2 * -1.7e38
  // first would not); its loop for a 0-d or 1-d self rounds the product
  // first (probed: 200 random problems at +-3e38, 0 differ each way).
  if (times_alpha && self.dim() > 1 && at::isFloatingType(self.scalar_type())) {
    index_put_impl(out, dim_index(dim, index), source, true, false, &a);
    return out;
  }
  auto scaled = [&](const Tensor &s) { return times_alpha ? s.mul(a).to(self.scalar_type()) : s; };
  if (self.dim() == 0) {
    out.reshape({1}).index_put_(dim_index(0, index), scaled(source.reshape({-1})), /*accumulate=*/true);
    return out;
  }
  Tensor src = scaled(source);
  out.index_put_(dim_index(dim, index), src.dim() == 0 ? src.reshape({1}) : src, /*accumulate=*/true);
  return out;
}
Tensor &index_fill_scalar(Tensor &self, int64_t dim, const Tensor &index, const Scalar &value) {
  // ATen's index_fill_, in its order: the index dtype (an IndexError, int32
  // refused unlike index_add's), a complex value for a real self, the dim (a
  // 0-d self counts as 1-d), the index rank; all before an empty self returns.
  TORCH_CHECK_INDEX(index.scalar_type() == at::kLong, "index_fill_(): Expected dtype int64 for index.");
  TORCH_CHECK(self.is_complex() || !value.isComplex(), "index_fill_(): Converting complex Scalar to non-complex type");
  dim = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  TORCH_CHECK(index.dim() <= 1, "Index has to be a vector/scalar");
  // ATen restrides self for its iterator (dim `dim` sized index.numel(),
  // stride 0) before anything is filled, and as_strided refuses that view
  // where self's storage cannot hold it (an empty self given indices): the
  // CPU's setStorage RuntimeError, even with nothing to fill.
  Tensor self_nonzero_dim = self.dim() == 0 ? self.unsqueeze(-1) : self;
  std::vector<int64_t> sizes = self_nonzero_dim.sizes().vec(), strides = self_nonzero_dim.strides().vec();
  sizes[dim] = index.numel();
  strides[dim] = 0;
  Tensor restrided = self_nonzero_dim.as_strided(sizes, strides);
  // converted (and range-checked) as the CPU's index_fill kernel does; a
  // one-element fill alone would not check a float16 value
  Tensor v = at::empty({}, self.options()).fill_(converted_scalar(value, self.scalar_type()));
  // Nothing to iterate: no index checked. An empty self whose storage holds
  // the view (a slice of a larger tensor) iterates its indices all the same,
  // and its first is out of range of the size-0 dim (read back to name it).
  if (restrided.numel() == 0) return self;
  TORCH_CHECK_INDEX(self.numel() > 0, "index ", index.reshape({-1})[0].item<int64_t>(),
                    " is out of bounds for dimension ", dim, " with size 0");
  if (self.dim() == 0) {
    self.reshape({1}).index_put_(dim_index(0, index), v, false);
    return self;
  }
  self.index_put_(dim_index(dim, index), v, false);
  return self;
}
Tensor &index_fill_tensor(Tensor &self, int64_t dim, const Tensor &index, const Tensor &value) {
  TORCH_CHECK(value.dim() == 0, "index_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
              value.dim(), " dimension(s).");
  return index_fill_scalar(self, dim, index, value.item());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  NEURON_VARIANTS(m, index_add_into, "index_add", nullptr, "index_add.out");
  NEURON_IMPL(m, "index_fill_.int_Scalar", index_fill_scalar);
  NEURON_IMPL(m, "index_fill_.int_Tensor", index_fill_tensor);
  NEURON_IMPL(m, "bincount", bincount_fn);
  NEURON_IMPL(m, "tril_indices", tril_indices_fn);
  NEURON_IMPL(m, "triu_indices", triu_indices_fn);
  NEURON_VARIANTS(m, index_tensor_into, "index.Tensor", nullptr, "index.Tensor_out");
  NEURON_IMPL(m, "_index_put_impl_", index_put_checked);
  NEURON_IMPL(m, "index_select", index_select_fn);
  NEURON_OUT_OF(m, index_select_fn, "index_select.out");
  NEURON_OUT_OF(m, nonzero_fn, "nonzero.out");
  NEURON_OUT_OF(m, masked_select_fn, "masked_select.out");
  NEURON_OUT_OF(m, gather_fn, "gather.out");
  NEURON_OUT_OF(m, sort_stable, "sort.values_stable");
  NEURON_OUT_OF(m, topk_fn, "topk.values");
  NEURON_OUT_OF(m, tril_fn, "tril.out");
  NEURON_OUT_OF(m, triu_fn, "triu.out");
  NEURON_OUT_OF(m, scatter_src_fn, "scatter.src_out");
  NEURON_OUT_OF(m, scatter_value_fn, "scatter.value_out");
  NEURON_OUT_OF(m, scatter_add_fn, "scatter_add.out");
  NEURON_IMPL(m, "masked_fill_.Scalar", masked_fill_scalar);
  NEURON_IMPL(m, "masked_fill_.Tensor", masked_fill_tensor);
  NEURON_IMPL(m, "nonzero", nonzero_fn);
  NEURON_IMPL(m, "masked_select", masked_select_fn);
  NEURON_IMPL(m, "gather", gather_fn);
  NEURON_VARIANTS(m, scatter_src_into, "scatter.src", "scatter_.src", nullptr);
  NEURON_VARIANTS(m, scatter_value_into, "scatter.value", "scatter_.value", nullptr);
  NEURON_VARIANTS(m, scatter_reduce_src_into, "scatter.reduce", "scatter_.reduce", "scatter.reduce_out");
  NEURON_VARIANTS(m, scatter_reduce_value_into, "scatter.value_reduce", "scatter_.value_reduce",
                  "scatter.value_reduce_out");
  NEURON_VARIANTS(m, scatter_add_into, "scatter_add", "scatter_add_", nullptr);
  NEURON_VARIANTS(m, scatter_reduce_two_into, "scatter_reduce.two", "scatter_reduce_.two", "scatter_reduce.two_out");
  NEURON_IMPL(m, "embedding_dense_backward", embedding_dense_backward_fn);
  NEURON_IMPL(m, "sort.stable", sort_stable);
  NEURON_IMPL(m, "topk", topk_fn);
  NEURON_IMPL(m, "arange.start_out", arange_out);
  NEURON_IMPL(m, "linspace.out", linspace_out);
  NEURON_IMPL(m, "eye.m_out", eye_m_out);
  NEURON_IMPL(m, "eye.out", eye_out);
  NEURON_VARIANTS(m, tril_into, "tril", "tril_", nullptr);
  NEURON_VARIANTS(m, triu_into, "triu", "triu_", nullptr);
}

}  // namespace torch_neuronx
