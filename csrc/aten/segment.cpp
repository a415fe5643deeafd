// Keyed and segmented ops (family SEGMENT): masked_scatter, index_reduce,
// index_copy, take/put, nll_loss, embedding_bag, cdist/pdist,
// segment_reduce, ctc_loss, plus short compositions (trace, renorm,
// channel_shuffle, logspace, cauchy/geometric/log_normal). The shape rules and error
// messages are PyTorch's; the work is either a SEGMENT kernel
// (kernels/segment.c) or a chain of ops that already run natively.
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/TensorUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/core/Reduction.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/index.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/linalg_vector_norm.h>
#include <ATen/ops/linspace.h>
#include <ATen/ops/nll_loss_backward.h>
#include <ATen/ops/nll_loss_forward.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/scatter_reduce.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/DeviceGuard.h>

#include <limits>
#include <sstream>

#include "launch/launch.h"
#include "launch/scalar.h"
#include "nrt/ops/segment.h"
#include "nrt/stream.h"
#include "registry/variants.h"

namespace torch_neuronx {
namespace {

using at::Tensor;
using c10::Scalar;

Tensor &write_out(Tensor &out, const Tensor &value) {
  if (out.is_same(value)) return out;
  at::native::resize_output(out, value.sizes());
  out.copy_(value);
  return out;
}

// Index list selecting `index` along `dim` (advanced indexing form).
c10::List<std::optional<Tensor>> along(int64_t dim, const Tensor &index) {
  c10::List<std::optional<Tensor>> l;
  for (int64_t d = 0; d < dim; ++d) l.push_back(std::nullopt);
  l.push_back(index.reshape({-1}));
  return l;
}

// ---- spatial nll_loss ---------------------------------------------------------
// reduction='none' moves C last: [N, C, H, W] becomes the row form
// [N*H*W, C] that the native NLL_LOSS kernel already handles. A sum or
// mean is one NLL_LOSS_REDUCE launch in the CPU's cascade order.
void nll2d_check(const Tensor &self, const Tensor &target, const std::optional<Tensor> &weight) {
  TORCH_CHECK(target.dim() == 3, "only batches of spatial targets supported (3D tensors) but got targets of dimension: ",
              target.dim());
  TORCH_CHECK(self.dim() == 4, "only batches of spatial inputs supported (4D tensors), but got input of dimension: ",
              self.dim());
  TORCH_CHECK(target.scalar_type() == at::kLong || target.scalar_type() == at::kByte,
              "expected target dtype to be Long or Byte, but got ", target.scalar_type());
  TORCH_CHECK(!weight || !weight->defined() || weight->numel() == self.size(1),
              "weight tensor should be defined either for all or no classes");
  TORCH_CHECK(self.size(0) == target.size(0) && self.size(2) == target.size(1) && self.size(3) == target.size(2),
              "size mismatch (got input: ", self.sizes(), " , target: ", target.sizes());
}

// The CPU kernel's own checks after nll2d_check, in its order: the dtype
// dispatch, the weight read as the input's dtype, then the targets read as
// int64 (not reached for an empty sum or mean, which returns first).
void nll2d_kernel_checks(const Tensor &self, const Tensor &target, const std::optional<Tensor> &weight,
                         int64_t reduction) {
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()),
                              "\"nll_loss2d_forward_out_frame\" not implemented for '", self.scalar_type(), "'");
  TORCH_CHECK(!weight || !weight->defined() || weight->scalar_type() == self.scalar_type(),
              "expected scalar type ", self.scalar_type(), " but found ", weight->scalar_type());
  TORCH_CHECK(target.scalar_type() == at::kLong || (reduction != at::Reduction::None && target.numel() == 0),
              "expected scalar type Long but found ", target.scalar_type());
}

Tensor rows_of(const Tensor &self) { return self.movedim(1, -1).reshape({-1, self.size(1)}); }

// A reduced (sum or mean) nll_loss in the CPU's cascade order
// (NLL_LOSS_REDUCE) over an input [n, c, m] and a target [n, m]: the loss
// and the total weight.
std::tuple<Tensor, Tensor> nll_loss_reduce(const Tensor &input, const Tensor &target, const Tensor *weight,
                                           int64_t reduction, int64_t ignore_index) {
  Tensor out = at::empty({}, input.options()), total = at::empty({}, input.options());
  nrt_launch d = new_launch(NRT_OP(NLL_LOSS_REDUCE), {input.size(0), input.size(1), input.size(2)});
  d.noutputs = 2;
  d.ninputs = weight ? 3 : 2;
  set_operand(d.operands[0], out, {});
  set_operand(d.operands[1], total, {});
  set_operand(d.operands[2], input, {0, 1, 2});
  set_operand(d.operands[3], target, {0, 1});
  if (weight) set_operand(d.operands[4], weight->reshape({-1}), {0});
  d.compute_dtype = to_nrt_dtype(input.scalar_type());
  d.params[0] = reduction;
  d.params[1] = ignore_index;
  launch(input.device().index(), d);
  return {out, total};
}

std::tuple<Tensor, Tensor> nll_loss2d_forward_fn(const Tensor &self, const Tensor &target,
                                                 const std::optional<Tensor> &weight, int64_t reduction,
                                                 int64_t ignore_index) {
  nll2d_check(self, target, weight);
  nll2d_kernel_checks(self, target, weight, reduction);
  c10::DeviceGuard guard(self.device());
  if (reduction == at::Reduction::None) {
    auto [out, total] = at::nll_loss_forward(rows_of(self), target.reshape({-1}), weight, reduction, ignore_index);
    return {out.reshape(target.sizes()), total};
  }
  int64_t n = self.size(0), c = self.size(1), m = self.size(2) * self.size(3);
  const Tensor *w = weight && weight->defined() ? &*weight : nullptr;
  return nll_loss_reduce(self.reshape({n, c, m}), target.reshape({n, m}), w, reduction, ignore_index);
}

Tensor nll_loss2d_backward_fn(const Tensor &grad_output, const Tensor &self, const Tensor &target,
                              const std::optional<Tensor> &weight, int64_t reduction, int64_t ignore_index,
                              const Tensor &total_weight) {
  nll2d_check(self, target, weight);
  c10::DeviceGuard guard(self.device());
  Tensor g = reduction == at::Reduction::None ? grad_output.reshape({-1}) : grad_output;
  Tensor gi = at::nll_loss_backward(g, rows_of(self), target.reshape({-1}), weight, reduction, ignore_index,
                                    total_weight);
  int64_t n = self.size(0), c = self.size(1), h = self.size(2), w = self.size(3);
  return gi.reshape({n, h, w, c}).movedim(-1, 1).contiguous();
}

// ---- nll_loss (1-d/2-d input; the back half of cross_entropy) -------------------
// ATen's nll_loss_out_frame (LossNLL.cpp): a 2-d input without a reduction
// is per row (NLL_LOSS); every other case (a sum, a mean, or a 1-d input,
// which the CPU sums even without a reduction) is the CPU's cascade over
// the rows, NLL_LOSS_REDUCE with M = 1, so huge terms overflow and cancel
// where the CPU's do.
void nll_check(const Tensor &self, const Tensor &target, const std::optional<Tensor> &weight) {
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "input tensor should be 1D or 2D");
  TORCH_CHECK(target.dim() <= 1, "0D or 1D target tensor expected, multi-target not supported");
  bool no_batch = self.dim() == 1 && target.dim() == 0;
  TORCH_CHECK(no_batch || self.size(0) == target.size(0), "size mismatch (got input: ", self.sizes(),
              ", target: ", target.sizes(), ")");
  TORCH_CHECK(target.scalar_type() == at::kLong || target.scalar_type() == at::kByte,
              "expected scalar type Long but found ", target.scalar_type());
  int64_t c = self.size(-1);
  TORCH_CHECK(!weight || !weight->defined() || weight->numel() == c,
              "weight tensor should be defined either for all ", c, " classes or no classes but got weight tensor of shape: ",
              weight->sizes());
}

// The CPU kernel reads each float operand as the input's dtype.
void nll_same_dtype(const Tensor &self, const Tensor *t) {
  TORCH_CHECK(!t || t->scalar_type() == self.scalar_type(), "expected scalar type ", self.scalar_type(),
              " but found ", t->scalar_type());
}

std::tuple<Tensor, Tensor> nll_loss_forward_fn(const Tensor &self, const Tensor &target,
                                               const std::optional<Tensor> &weight, int64_t reduction,
                                               int64_t ignore_index) {
  nll_check(self, target, weight);
  // then the CPU kernel's dispatch: floating inputs only
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()), "\"nll_loss_out_frame\" not implemented for '",
                              self.scalar_type(), "'");
  const Tensor *w = weight && weight->defined() ? &*weight : nullptr;
  nll_same_dtype(self, w);
  c10::DeviceGuard guard(self.device());
  if (self.scalar_type() == at::kDouble) warn_float64_once();
  int64_t c = self.size(-1);
  Tensor total = at::zeros({}, self.options());
  if (reduction == at::Reduction::None && self.dim() == 2) {
    int64_t n = self.size(0);
    Tensor loss = at::empty({n}, self.options());
    if (n == 0) return {loss, total};
    nrt_launch d = new_launch(NRT_OP(NLL_LOSS), {n, c});
    d.noutputs = 1;
    d.ninputs = w ? 3 : 2;
    set_operand(d.operands[0], loss, {0});
    set_operand(d.operands[1], self, {0, 1});
    set_operand(d.operands[2], target, {0});
    if (w) set_operand(d.operands[3], w->reshape({-1}), {0});
    d.compute_dtype = to_nrt_dtype(self.scalar_type());
    d.params[1] = ignore_index;
    launch(self.device().index(), d);
    return {loss, total};
  }
  Tensor out = at::empty({}, self.options());
  if (target.numel() == 0) {  // the CPU's early return: a NaN mean, a 0 sum
    out.fill_(reduction == at::Reduction::Mean ? std::numeric_limits<double>::quiet_NaN() : 0.0);
    return {out, total};
  }
  // a 1-d input reads only the first target, as the CPU's batch of one does
  int64_t n = self.dim() == 1 ? 1 : self.size(0);
  Tensor t1 = target.reshape({-1}).narrow(0, 0, n);
  return nll_loss_reduce(self.reshape({n, c, 1}), t1.reshape({n, 1}), w, reduction, ignore_index);
}

Tensor nll_loss_backward_fn(const Tensor &grad_output, const Tensor &self, const Tensor &target,
                            const std::optional<Tensor> &weight, int64_t reduction, int64_t ignore_index,
                            const Tensor &total_weight) {
  // the CPU's meta checks, in its order
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "input tensor should be 1D or 2D");
  TORCH_CHECK(target.dim() <= 1, "0D or 1D target tensor expected, multi-target not supported");
  bool no_batch = self.dim() == 1 && target.dim() == 0;
  TORCH_CHECK(no_batch || self.size(0) == target.size(0), "size mismatch (got input: ", self.sizes(),
              ", target: ", target.sizes(), ")");
  TORCH_CHECK(total_weight.numel() == 1, "expected total_weight to be a  single element tensor, got: ",
              total_weight.sizes(), " (", total_weight.numel(), " elements)");
  const Tensor *w = weight && weight->defined() ? &*weight : nullptr;
  TORCH_CHECK(!w || w->numel() == self.size(-1), "weight tensor should be defined either for all or no classes");
  bool rows = reduction == at::Reduction::None && self.dim() == 2;
  if (rows)
    at::check_dim_size(grad_output, 1, 0, self.size(0));
  else
    TORCH_CHECK(grad_output.dim() <= 1 && grad_output.numel() == 1,
                "Expected a single element grad_output tensor, but got: ", grad_output.sizes());
  // then the kernel's: the dtype dispatch, each operand read as scalar_t
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()),
                              "\"nll_loss_backward_out_frame\" not implemented for '", self.scalar_type(), "'");
  TORCH_CHECK(target.scalar_type() == at::kLong || target.scalar_type() == at::kByte,
              "expected scalar type Long but found ", target.scalar_type());
  nll_same_dtype(self, w);
  if (!rows) nll_same_dtype(self, &total_weight);
  nll_same_dtype(self, &grad_output);
  c10::DeviceGuard guard(self.device());
  int64_t n = self.dim() == 1 ? 1 : self.size(0), c = self.size(-1);
  Tensor grad_input = at::empty(self.sizes(), self.options());
  if (n == 0 || c == 0) {
    if (grad_input.numel() > 0) grad_input.zero_();
    return grad_input;
  }
  nrt_launch d = new_launch(NRT_OP(NLL_LOSS_BACKWARD), {n, c});
  d.noutputs = 1;
  d.ninputs = w ? 4 : 3;
  set_operand(d.operands[0], grad_input.reshape({n, c}), {0, 1});
  set_operand(d.operands[1], target.reshape({-1}).narrow(0, 0, n), {0});
  if (rows)
    set_operand(d.operands[2], grad_output, {0});
  else
    set_operand(d.operands[2], grad_output.reshape({1}), {-1});
  set_operand(d.operands[3], total_weight, {});
  if (w) set_operand(d.operands[4], w->reshape({-1}), {0});
  d.compute_dtype = to_nrt_dtype(self.scalar_type());
  d.params[0] = reduction;
  d.params[1] = ignore_index;
  launch(self.device().index(), d);
  return grad_input;
}

// ---- masked_scatter_ -------------------------------------------------------------
// The k-th true position of the mask (row-major) takes source's k-th
// element: exactly a boolean-mask index_put_ with the first k elements.
Tensor &masked_scatter_ip(Tensor &self, const Tensor &mask, const Tensor &source) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_scatter_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(),
              "masked_scatter_: expected self and source to have same dtypes but got", self.scalar_type(), " and ",
              source.scalar_type());
  c10::DeviceGuard guard(self.device());
  Tensor m = mask.device() == self.device() ? mask : mask.to(self.device());
  TORCH_CHECK(at::is_expandable_to(m.sizes(), self.sizes()), "masked_scatter_: mask of shape ", m.sizes(),
              " cannot be broadcast to self of shape ", self.sizes());
  if (self.numel() == 0) return self;
  m = m.expand(self.sizes());
  int64_t count = m.sum().item<int64_t>();  // sizes the values: one sync, as masked_select
  TORCH_CHECK(source.numel() >= count, "masked_scatter: expected source to have at least ", count,
              " elements (the number of ones in mask), but got ", source.numel());
  if (count == 0) return self;
  Tensor values = source.reshape({-1}).narrow(0, 0, count);
  Tensor dst = self.dim() == 0 ? self.reshape({1}) : self;
  c10::List<std::optional<Tensor>> l;
  l.push_back(self.dim() == 0 ? m.reshape({1}) : m);
  dst.index_put_(l, values, /*accumulate=*/false);
  return self;
}

// ---- index_reduce / index_copy ------------------------------------------------------
// The CPU's kernels read every index against the dim, negative ones
// included (IndexError), where the scatter and index_put_ these are built
// from would wrap a negative index or report a RuntimeError: the indices
// are checked first by an index_select from a stand-in of the dim's size
// whose elements alias one byte. Its kernel reports the first bad index
// at the next synchronisation, and the launches queued after it are not run.
void check_index_values(const Tensor &index, int64_t size) {
  if (index.numel() == 0) return;
  Tensor stand_in = at::zeros({1}, index.options().dtype(at::kByte)).expand({size});
  (void)at::index_select(stand_in, 0, index.reshape({-1}));
}

// The CPU's index_fill_ and index_copy kernels walk their result restrided
// to index.numel() along dim with stride 0, a view that must fit the
// result's storage: an empty dim with a non-empty index fails there
// (RuntimeError "setStorage: ..."), before any index is read. Returns
// whether the walk visits any element (and so reads the indices).
bool restrided_walk(const Tensor &result, int64_t dim, int64_t n) {
  Tensor r = result.dim() == 0 ? result.reshape({1}) : result;
  std::vector<int64_t> sizes = r.sizes().vec(), strides = r.strides().vec();
  sizes[dim] = n;
  strides[dim] = 0;
  return r.as_strided(sizes, strides).numel() > 0;
}

// Whether an iterator over this slice sees one element (TensorIterator's
// is_scalar): non-empty, every dim of size > 1 with stride 0.
bool one_element_slice(const Tensor &slice) {
  if (slice.numel() == 0) return false;
  for (int64_t d = 0; d < slice.dim(); ++d)
    if (slice.size(d) != 1 && slice.stride(d) != 0) return false;
  return true;
}

// index_reduce along dim is scatter_reduce with the index broadcast over
// source's other dims (native SCATTER kernel, deterministic order).
// Composed of other native ops: returns a fresh result, which the out= and
// in-place overloads copy where asked (registry/variants.h).
Tensor index_reduce_into(Tensor out, const Tensor &self, int64_t dim, const Tensor &index, const Tensor &source,
                         c10::string_view reduce, bool include_self) {
  // ATen's index_reduce meta function (index_func_meta_impl), in its order
  TORCH_CHECK(reduce == "prod" || reduce == "mean" || reduce == "amax" || reduce == "amin",
              "index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got ", reduce, ".");
  dim = at::maybe_wrap_dim(dim, self.dim());
  int64_t n = index.numel();
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_reduce_(): Index is supposed to be a vector, but got dim: ", index.dim(),
                    " with type: ", index.scalar_type(), " and size: ", index.sizes());
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
              "index_reduce_(): Expected dtype int32/int64 for index but got: ", index.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(), "index_reduce_(): self (", self.scalar_type(),
              ") and source (", source.scalar_type(), ") must have the same scalar type");
  TORCH_CHECK(dim == 0 || dim < source.dim(), "index_reduce_(): Indexing dim ", dim,
              " is out of bounds of the source tensor with dim ", source.dim());
  TORCH_CHECK(n == (source.dim() == 0 ? 1 : source.size(dim)), "index_reduce_(): Number of indices (", n,
              ") should be equal to source.size(dim): (", source.size(dim), "), for dim: ", dim);
  if (out.defined()) {
    at::assert_no_internal_overlap(out);
    at::assert_no_overlap(out, index);
    at::assert_no_overlap(out, source);
  }
  // then the CPU kernel's dtype dispatch (real types but bool) on the
  // paths that have one: the identity fill include_self=False starts with,
  // and the loop over a 0-d or 1-d result. A >1-d result is reduced slice by
  // slice with other ops instead, checked below.
  bool bool_or_complex = self.scalar_type() == at::kBool || self.is_complex();
  TORCH_CHECK_NOT_IMPLEMENTED(!bool_or_complex || (include_self && self.dim() > 1), "\"",
                              include_self ? "index_func_" : "index_reduce_func_exclude_input_init",
                              "\" not implemented for '", c10::toString(self.scalar_type()), "'");
  c10::DeviceGuard guard(self.device());
  Tensor s = self.dim() == 0 ? self.reshape({1}) : self;
  Tensor src = source.dim() == 0 ? source.reshape({1}) : source;
  TORCH_CHECK(s.dim() == src.dim(), "index_reduce_(): source and self must have the same number of dimensions");
  for (int64_t d = 0; d < s.dim(); ++d) {
    TORCH_CHECK(d == dim || s.size(d) == src.size(d), "index_reduce_(): self and source must have the same size at ",
                "dimension ", d, ", got ", s.size(d), " and ", src.size(d));
  }
  if (!include_self) {
    // That fill is index_fill_ on the result (self in place, else a fresh
    // contiguous tensor, which only an empty one cannot hold).
    if (out.is_same(self)) (void)restrided_walk(out, dim, n);
    else if (s.numel() == 0) (void)restrided_walk(at::empty(s.sizes(), s.options()), dim, n);
  }
  // The CPU's loop over a >1-d result starts from its first slice along dim.
  if (s.dim() > 1 && n > 0) {
    (void)s.select(dim, 0);
    // whose ops refuse what their CPU kernels lack: complex maximum/minimum
    // and, for the mean's final division, bool
    TORCH_CHECK_NOT_IMPLEMENTED(!(self.is_complex() && (reduce == "amax" || reduce == "amin")), "\"",
                                reduce == "amax" ? "maximum_cpu" : "minimum_cpu", "\" not implemented for '",
                                c10::toString(self.scalar_type()), "'");
    TORCH_CHECK_NOT_IMPLEMENTED(!(self.scalar_type() == at::kBool && reduce == "mean"),
                                "\"div_floor_cpu\" not implemented for 'Bool'");
  }
  // no index: self as it is (the CPU's >1-d path returns before its mean's division)
  if (n == 0) return self.clone();
  if (!include_self) check_index_values(index, s.size(dim));  // index_fill_ reads them all first
  if (reduce == "prod" && at::isReducedFloatingType(self.scalar_type()) && s.dim() > 1 && n >= 2 &&
      one_element_slice(src.select(dim, 0))) {
    // The CPU multiplies slice by slice with one iterator. When the source
    // slice is one element broadcast, its 16-bit mul kernel takes it as a
    // scalar and removes that operand from the shared iterator, so the
    // second slice fails an internal assert (a RuntimeError), after the
    // first two indices are checked (IndexError for either; that check
    // reports at the stream's next synchronisation, awaited here so it is
    // not left for a later op).
    check_index_values(index.narrow(0, 0, 2), s.size(dim));
    check(nrt_stream_synchronize(current_nrt_stream(self.device().index())), "neuron index_reduce");
    TORCH_CHECK(false, "iter.ninputs() == traits::arity INTERNAL ASSERT FAILED (as the CPU's index_reduce 'prod' of ",
                self.scalar_type(), " when each source slice is one element broadcast, and more than one index)");
  }
  if (include_self) check_index_values(index, s.size(dim));
  std::vector<int64_t> shape(s.dim(), 1);
  shape[dim] = n;
  Tensor idx = index.to(at::kLong).reshape(shape).expand(src.sizes());
  // The CPU's 'mean' adds each source slice with add's alpha of 1, which
  // multiplies a complex source by 1 + 0i: an infinite or NaN part turns
  // the other part NaN ((inf + 1i) * (1 + 0i) is inf + nan i), as in
  // index_add.
  if (self.is_complex() && reduce == "mean") src = src.mul(c10::Scalar(c10::complex<double>(1.0, 0.0)));
  // float16/bfloat16 prod and mean accumulate in float32 there and round
  // once, where the CPU's index_reduce rounds after every step: closer to
  // the exact result, as index_add (index_put_'s accumulation) is.
  Tensor result = at::scatter_reduce(s, dim, idx, src, reduce, include_self);
  return self.dim() == 0 ? result.reshape({}) : result;
}

std::string spaced(c10::IntArrayRef sizes) {
  std::ostringstream os;
  for (size_t i = 0; i < sizes.size(); ++i) os << (i ? " " : "") << sizes[i];
  return os.str();
}

// ATen's index_copy meta function, in its order.
void index_copy_check(const Tensor &self, int64_t dim, const Tensor &index, const Tensor &source) {
  TORCH_CHECK_INDEX(index.dim() < 2, "index_copy_(): Index should have dimension 1 or 0 (got ", index.dim(), ")");
  int64_t n = index.numel();
  if (source.dim() == 0) {
    TORCH_CHECK_INDEX(n == 1, "index_copy_(): When source is scalar, index should have one element (got ", n, ")");
  } else {
    TORCH_CHECK_INDEX(source.dim() == self.dim() || self.dim() == 0,
                      "index_copy_(): When source and destination are not scalars, their dimensionality must match. "
                      "Source dimensionality (", source.dim(), "), destination dimensionality (", self.dim(), ")");
  }
  TORCH_CHECK(index.scalar_type() == at::kLong, "index_copy_(): Expected a long tensor for index, but got ",
              index.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(), "index_copy_(): self and source expected to have the same ",
              "dtype, but got (self) ", self.scalar_type(), " and (source) ", source.scalar_type());
  TORCH_CHECK(self.device() == source.device() && self.device() == index.device(),
              "index_copy_(): self, index and source expected to be in the same device, but got (self) ",
              self.device(), ", (index) ", index.device(), ", and (source) ", source.device());
  std::vector<int64_t> self_slice = self.sizes().vec(), source_slice = source.sizes().vec();
  if (!self_slice.empty()) self_slice.erase(self_slice.begin() + dim);
  if (!source_slice.empty()) source_slice.erase(source_slice.begin() + dim);
  TORCH_CHECK(self_slice == source_slice, "index_copy_(): Source/destination tensor must have same slice shapes. ",
              "Destination slice shape: ", spaced(self_slice), " at dimension ", dim, " and source slice shape: ",
              spaced(source_slice), " at dimension 0.");
  TORCH_CHECK_INDEX(source.dim() == 0 || n == source.size(dim), "index_copy_(): Number of indices (", n,
                    ") should be equal to source.size(dim) (", source.size(dim), ")");
}

Tensor index_copy_into(Tensor out, const Tensor &self, int64_t dim, const Tensor &index, const Tensor &source) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  if (out.is_same(self)) {  // the meta function checks a given result first
    at::assert_no_internal_overlap(out);
    at::assert_no_overlap(out, index);
    at::assert_no_overlap(out, source);
  }
  index_copy_check(self, dim, index, source);
  c10::DeviceGuard guard(self.device());
  if (!out.defined()) out = at::empty({0}, self.options());
  if (!out.is_same(self)) write_out(out, self);
  // The kernel reads an index for each element it walks, and only then.
  if (!restrided_walk(out, dim, index.numel())) return out;
  Tensor dst = out.dim() == 0 ? out.reshape({1}) : out;
  check_index_values(index, dst.size(dim));
  Tensor src = source.dim() == 0 ? source.reshape({1}) : source;
  dst.index_put_(along(dim, index), src, /*accumulate=*/false);
  return out;
}

// ---- take / put_ ----------------------------------------------------------------------
// Both treat self as its row-major flattening; negative indices count from
// the end (the INDEX kernels wrap them and reject the out of range).
Tensor take_into(Tensor, const Tensor &self, const Tensor &index) {
  TORCH_CHECK(index.scalar_type() == at::kLong, "take(): Expected a long tensor for index, but found ",
              index.scalar_type());
  c10::DeviceGuard guard(self.device());
  if (index.numel() == 0) return at::empty(index.sizes(), self.options());
  TORCH_CHECK_INDEX(self.numel() > 0, "take(): tried to take from an empty tensor");
  c10::List<std::optional<Tensor>> l;
  l.push_back(index);
  return at::index(self.reshape({-1}), l);
}

Tensor &put_ip(Tensor &self, const Tensor &index, const Tensor &source, bool accumulate) {
  TORCH_CHECK(index.scalar_type() == at::kLong, "put_(): Expected a long tensor for index, but found ",
              index.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(), "put_(): self and source expected to have the same dtype, ",
              "but got self.dtype = ", self.scalar_type(), " and source.dtype = ", source.scalar_type());
  TORCH_CHECK(source.numel() == index.numel(), "put_(): Expected source and index to have the same number of ",
              "elements, but got source.numel() = ", source.numel(), ", index.numel() = ", index.numel());
  c10::DeviceGuard guard(self.device());
  if (index.numel() == 0) return self;
  TORCH_CHECK_INDEX(self.numel() > 0, "put_(): Tried to put elements into an empty tensor");
  // A non-contiguous self is updated through a contiguous copy.
  Tensor flat = self.is_contiguous() ? self.view({-1}) : self.reshape({-1}).clone();
  c10::List<std::optional<Tensor>> l;
  l.push_back(index.reshape({-1}));
  flat.index_put_(l, source.reshape({-1}), accumulate);
  if (!self.is_contiguous()) self.copy_(flat.view(self.sizes()));
  return self;
}

// ---- compositions of native ops ----------------------------------------------------------
Tensor trace_fn(const Tensor &self) {
  TORCH_CHECK(self.dim() == 2, "trace: expected a matrix, but got tensor with dim ", self.dim());
  // sum promotes integers to int64, as trace does
  return self.diagonal().sum();
}

// renorm: each slice along dim whose p-norm exceeds maxnorm is scaled to
// maxnorm (ATen's 1e-7 guard included); norms in float32 at least.
Tensor renorm_into(Tensor, const Tensor &self, const Scalar &p, int64_t dim, const Scalar &maxnorm) {
  TORCH_CHECK(!maxnorm.isComplex(), "renorm: maxnorm must be real-valued");
  TORCH_CHECK(maxnorm.toDouble() >= 0.0, "renorm: expected maxnorm to be >= 0 but got ", maxnorm.toDouble());
  TORCH_CHECK(p.toDouble() > 0.0, "renorm: non-positive-norm not supported");
  TORCH_CHECK(self.dim() > 1, "renorm: input needs at least 2 dimensions, got ", self.dim(), " dimensions");
  dim = at::maybe_wrap_dim(dim, self.dim());
  std::vector<int64_t> rdims;
  for (int64_t d = 0; d < self.dim(); ++d)
    if (d != dim) rdims.push_back(d);
  auto acc = at::isReducedFloatingType(self.scalar_type()) ? at::kFloat : self.scalar_type();
  Tensor norm = at::linalg_vector_norm(self, p, rdims, /*keepdim=*/true, acc);
  double mx = maxnorm.toDouble();
  Tensor factor = at::where(norm.gt(mx), norm.add(1e-7).reciprocal().mul(mx), at::ones_like(norm));
  return self.mul(factor).to(self.scalar_type());
}

Tensor channel_shuffle_fn(const Tensor &self, int64_t groups) {
  TORCH_CHECK(self.dim() > 2, "channel_shuffle expects input to have at least 3 dimensions, but got input with sizes ",
              self.sizes());
  TORCH_CHECK(groups > 0, "Number of groups to divide channels in must be positive.", " Value of groups:", groups);
  int64_t c = self.size(1);
  TORCH_CHECK(c % groups == 0, "Number of channels must be divisible by groups. Got ", c, " channels and ", groups,
              " groups.");
  std::vector<int64_t> shape = {self.size(0), groups, c / groups};
  for (int64_t d = 2; d < self.dim(); ++d) shape.push_back(self.size(d));
  return self.reshape(shape).transpose(1, 2).contiguous().view(self.sizes());
}

// logspace: base ** linspace(start, end), in float32 on the device. For
// integer outputs the power is rounded when it is an integer up to
// float32's error and truncated otherwise, as a double pow then cast does.
Tensor &logspace_out(const Scalar &start, const Scalar &end, int64_t steps, double base, Tensor &out) {
  TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
  c10::DeviceGuard guard(out.device());
  if (out.numel() != steps) out.resize_({steps});
  if (steps == 0) return out;
  Tensor e = at::empty({steps}, out.options().dtype(at::kFloat));
  // Integer outputs take start and end in the output type first, as
  // PyTorch's kernel does (1.2 -> 1).
  bool integral = at::isIntegralType(out.scalar_type(), /*includeBool=*/true);
  at::linspace_out(e, integral ? Scalar(start.toLong()) : start, integral ? Scalar(end.toLong()) : end, steps);
  Tensor v = at::pow(base, e);
  if (at::isIntegralType(out.scalar_type(), /*includeBool=*/true)) {
    Tensor r = v.round();
    Tensor near = v.sub(r).abs().le(r.abs().mul(1e-6).add(1e-6));
    v = at::where(near, r, v.trunc());
  }
  out.copy_(v);
  return out;
}

// Random distributions as transforms of the native uniform_/normal_,
// drawn in float32 and cast on store.
Tensor float_scratch(const Tensor &self) { return at::empty(self.sizes(), self.options().dtype(at::kFloat)); }

Tensor &cauchy_ip(Tensor &self, double median, double sigma, std::optional<at::Generator> gen) {
  TORCH_CHECK(sigma > 0.0, "cauchy_ expects sigma > 0.0, but found sigma=", sigma);
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "cauchy_ is implemented for floating types only");
  if (self.numel() == 0) return self;
  c10::DeviceGuard guard(self.device());
  Tensor u = float_scratch(self).uniform_(0, 1, gen);
  self.copy_(u.sub_(0.5).mul_(M_PI).tan_().mul_(sigma).add_(median));
  return self;
}

Tensor &geometric_ip(Tensor &self, double p, std::optional<at::Generator> gen) {
  TORCH_CHECK(0 < p && p < 1, "geometric_ expects p to be in (0, 1), but got p=", p);
  if (self.numel() == 0) return self;
  c10::DeviceGuard guard(self.device());
  // 1 - u lies in (0, 1], so the log is finite
  Tensor u = float_scratch(self).uniform_(0, 1, gen);
  self.copy_(u.neg_().add_(1).log_().div_(std::log1p(-p)).ceil_().clamp_min_(1));
  return self;
}

Tensor &log_normal_ip(Tensor &self, double mean, double std, std::optional<at::Generator> gen) {
  TORCH_CHECK(std > 0.0, "log_normal_ expects std > 0.0, but found std=", std);
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "log_normal_ is implemented for floating types only");
  if (self.numel() == 0) return self;
  c10::DeviceGuard guard(self.device());
  self.copy_(float_scratch(self).normal_(mean, std, gen).exp_());
  return self;
}

// A plain zero tensor: PyTorch's "efficient" one is a storage-less CPU
// trick that no device kernel can read.
Tensor efficientzerotensor_fn(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                              std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                              std::optional<bool> pin_memory) {
  auto opts = at::TensorOptions().dtype(dtype).layout(layout).device(device).pinned_memory(pin_memory);
  return at::zeros(size, opts);
}

// ---- embedding_bag --------------------------------------------------------------------
// The forward is one EMBEDDING_BAG launch (bags in parallel, deterministic
// sums). The backward scatters per-index rows back with the native
// accumulating index_put_, which sums duplicates in a fixed order.
void check_index_type(const Tensor &t, const char *what) {
  TORCH_CHECK(t.scalar_type() == at::kLong || t.scalar_type() == at::kInt, "embedding_bag: expected ", what,
              " to be of type Long or Int, but got ", t.scalar_type());
}

std::tuple<Tensor, Tensor, Tensor, Tensor> embedding_bag_fn(const Tensor &weight, const Tensor &indices,
                                                            const Tensor &offsets, bool /*scale_grad_by_freq*/,
                                                            int64_t mode, bool /*sparse*/,
                                                            const std::optional<Tensor> &per_sample_weights,
                                                            bool include_last_offset, int64_t padding_idx) {
  TORCH_CHECK(indices.dim() == 1, "input has to be a 1D or 2D Tensor, but got Tensor of dimension ", indices.dim());
  TORCH_CHECK(offsets.dim() == 1, "offsets has to be a 1D Tensor, but got Tensor of dimension ", offsets.dim());
  TORCH_CHECK(weight.dim() == 2, "weight has to be a 2D Tensor, but got Tensor of dimension ", weight.dim());
  check_index_type(indices, "indices");
  check_index_type(offsets, "offsets");
  TORCH_CHECK(at::isFloatingType(weight.scalar_type()), "embedding_bag: expected weight to be a floating point ",
              "tensor, but got ", weight.scalar_type());
  TORCH_CHECK(mode >= 0 && mode <= 2, "embedding_bag: mode must be 0 (sum), 1 (mean) or 2 (max), got ", mode);
  bool has_psw = per_sample_weights && per_sample_weights->defined();
  if (has_psw) {
    TORCH_CHECK(mode == NRT_BAG_SUM, "embedding_bag: per_sample_weights was not None. per_sample_weights is only ",
                "supported for mode='sum' (got mode='", mode == NRT_BAG_MEAN ? "mean" : "max",
                "'). Please open a feature request on GitHub.");
    TORCH_CHECK(per_sample_weights->scalar_type() == weight.scalar_type(), "embedding_bag: expected ",
                "per_sample_weights to have the dtype of weight (", weight.scalar_type(), "), but got ",
                per_sample_weights->scalar_type());
    TORCH_CHECK(per_sample_weights->dim() == 1 && per_sample_weights->numel() == indices.numel(),
                "embedding_bag: expected per_sample_weights.sizes() == indices.sizes(), got ",
                per_sample_weights->sizes(), " and ", indices.sizes());
  }
  if (include_last_offset) {
    TORCH_CHECK(offsets.size(0) >= 1, "include_last_offset: number of offset should be at least 1");
  }
  c10::DeviceGuard guard(weight.device());
  int64_t bags = include_last_offset ? offsets.size(0) - 1 : offsets.size(0);
  int64_t dim = weight.size(1), n = indices.numel();
  auto lopt = weight.options().dtype(at::kLong);
  Tensor out = at::empty({bags, dim}, weight.options());
  Tensor offset2bag = at::zeros({n}, lopt);  // indices after offsets[-1] belong to no bag
  // Shapes as the meta function gives an accelerator's (CUDA's): bag_size has
  // one entry per offset (the include_last_offset one stays 0), max_indices
  // is empty unless mode is max (the CPU returns [bags] for both).
  Tensor bag_size = at::zeros(offsets.sizes(), lopt);
  Tensor max_indices = at::empty(mode == NRT_BAG_MAX ? std::vector<int64_t>{bags, dim} : std::vector<int64_t>{0}, lopt);
  if (bags == 0) return {out, offset2bag, bag_size, max_indices};
  Tensor idx = indices.device() == weight.device() ? indices : indices.to(weight.device());
  Tensor off = offsets.device() == weight.device() ? offsets : offsets.to(weight.device());
  nrt_launch d = new_launch(NRT_OP(EMBEDDING_BAG), {bags, dim, n});
  int k = 0;
  set_operand(d.operands[k++], out, {0, 1});
  set_operand(d.operands[k++], offset2bag, {0});
  set_operand(d.operands[k++], bag_size.narrow(0, 0, bags), {0});
  if (mode == NRT_BAG_MAX) set_operand(d.operands[k++], max_indices, {0, 1});
  d.noutputs = k;
  set_operand(d.operands[k++], weight, {0, 1});
  set_operand(d.operands[k++], idx, {0});
  set_operand(d.operands[k++], off, {0});
  if (has_psw) set_operand(d.operands[k++], *per_sample_weights, {0});
  d.ninputs = k - d.noutputs;
  d.compute_dtype = to_nrt_dtype(weight.scalar_type());
  d.params[0] = mode;
  d.params[1] = padding_idx < 0 ? -1 : padding_idx;
  d.params[2] = include_last_offset ? 1 : 0;
  d.aux[0] = weight.size(0);
  launch(weight.device().index(), d);
  return {out, offset2bag, bag_size, max_indices};
}

// Rows that belong to a bag: with include_last_offset, indices at or past
// offsets[-1] are in none.
Tensor in_bag_mask(const Tensor &indices, const Tensor &offsets, bool include_last_offset) {
  if (!include_last_offset || offsets.numel() == 0) return Tensor();
  Tensor pos = at::arange(indices.numel(), offsets.options().dtype(at::kLong));
  return pos.lt(offsets.select(0, -1).to(at::kLong));
}

Tensor embedding_bag_dense_backward_impl(const Tensor &grad, const Tensor &indices, const Tensor &offset2bag,
                                         const Tensor &bag_size, const Tensor &maximum_indices, int64_t num_weights,
                                         bool scale_grad_by_freq, int64_t mode,
                                         const std::optional<Tensor> &per_sample_weights, int64_t padding_idx,
                                         const Tensor &in_bag) {
  c10::DeviceGuard guard(grad.device());
  int64_t dim = grad.size(1);
  Tensor gw = at::zeros({num_weights, dim}, grad.options());
  if (grad.numel() == 0 || indices.numel() == 0) return gw;
  if (mode == NRT_BAG_MAX) {
    Tensor rows = maximum_indices.to(at::kLong);
    Tensor valid = rows.ge(0);
    Tensor cols = at::arange(dim, rows.options()).expand(rows.sizes());
    c10::List<std::optional<Tensor>> l;
    l.push_back(rows.clamp_min(0));
    l.push_back(cols);
    gw.index_put_(l, at::where(valid, grad, at::zeros({}, grad.options())), /*accumulate=*/true);
    return gw;
  }
  Tensor idx = indices.to(at::kLong);
  Tensor o2b = offset2bag.to(at::kLong);
  Tensor g = grad.index_select(0, o2b);
  if (mode == NRT_BAG_MEAN) g = g.div(bag_size.index_select(0, o2b).clamp_min(1).unsqueeze(1).to(g.scalar_type()));
  if (per_sample_weights && per_sample_weights->defined()) g = g.mul(per_sample_weights->unsqueeze(1));
  c10::List<std::optional<Tensor>> l;
  l.push_back(idx);
  if (scale_grad_by_freq) {
    Tensor counts = at::zeros({num_weights}, grad.options());
    counts.index_put_(l, at::ones({idx.numel()}, grad.options()), /*accumulate=*/true);
    g = g.div(at::index(counts, l).unsqueeze(1));
  }
  Tensor keep = padding_idx >= 0 ? idx.ne(padding_idx) : Tensor();
  if (in_bag.defined()) keep = keep.defined() ? keep.logical_and(in_bag) : in_bag;
  if (keep.defined()) g = at::where(keep.unsqueeze(1), g, at::zeros({}, g.options()));
  gw.index_put_(l, g, /*accumulate=*/true);
  return gw;
}

Tensor embedding_bag_backward_fn(const Tensor &grad, const Tensor &indices, const Tensor &offsets,
                                 const Tensor &offset2bag, const Tensor &bag_size, const Tensor &maximum_indices,
                                 int64_t num_weights, bool scale_grad_by_freq, int64_t mode, bool sparse,
                                 const std::optional<Tensor> &per_sample_weights, int64_t padding_idx) {
  TORCH_CHECK(!sparse, "embedding_bag: sparse gradients are not supported on neuron; use sparse=False");
  // include_last_offset is not passed to the backward: offsets holds one
  // more entry than there are bags exactly when it was set.
  bool last = offsets.numel() == grad.size(0) + 1;
  return embedding_bag_dense_backward_impl(grad, indices, offset2bag, bag_size, maximum_indices, num_weights,
                                           scale_grad_by_freq, mode, per_sample_weights, padding_idx,
                                           in_bag_mask(indices, offsets, last));
}

Tensor embedding_bag_dense_backward_fn(const Tensor &grad, const Tensor &indices, const Tensor &offset2bag,
                                       const Tensor &bag_size, const Tensor &maximum_indices, int64_t num_weights,
                                       bool scale_grad_by_freq, int64_t mode,
                                       const std::optional<Tensor> &per_sample_weights, int64_t padding_idx) {
  return embedding_bag_dense_backward_impl(grad, indices, offset2bag, bag_size, maximum_indices, num_weights,
                                           scale_grad_by_freq, mode, per_sample_weights, padding_idx, Tensor());
}

Tensor embedding_bag_psw_backward_fn(const Tensor &grad, const Tensor &weight, const Tensor &indices,
                                     const Tensor &offsets, const Tensor &offset2bag, int64_t mode,
                                     int64_t padding_idx) {
  TORCH_CHECK(mode == NRT_BAG_SUM, "embedding_bag_backward: per_sample_weights only supported for mode='sum'");
  c10::DeviceGuard guard(grad.device());
  if (indices.numel() == 0) return at::empty({0}, grad.options());
  Tensor idx = indices.to(at::kLong);
  Tensor o2b = offset2bag.to(at::kLong);
  // products and their sum in float32 at least, rounded once
  auto acc = at::isReducedFloatingType(grad.scalar_type()) ? at::kFloat : grad.scalar_type();
  Tensor r = grad.index_select(0, o2b).to(acc).mul(weight.index_select(0, idx).to(acc)).sum(1);
  bool last = offsets.numel() == grad.size(0) + 1;
  Tensor keep = padding_idx >= 0 ? idx.ne(padding_idx) : Tensor();
  Tensor in_bag = in_bag_mask(indices, offsets, last);
  if (in_bag.defined()) keep = keep.defined() ? keep.logical_and(in_bag) : in_bag;
  if (keep.defined()) r = at::where(keep, r, at::zeros({}, r.options()));
  return r.to(grad.scalar_type());
}

// ---- cdist / pdist ----------------------------------------------------------------------
void put3(nrt_launch &d, int k, const Tensor &t) { set_operand(d.operands[k], t, {0, 1, 2}); }

// The broadcast batch of cdist's x1 [..., P, M] and x2 [..., R, M]: B
// batch entries, and the expanded shapes of x1 (s1), x2 (s2), the result (so).
struct CdistShapes {
  int64_t P, R, M, B;
  std::vector<int64_t> s1, s2, so;
  CdistShapes(const Tensor &x1, const Tensor &x2) {
    auto batch = at::infer_size(x1.sizes().slice(0, x1.dim() - 2), x2.sizes().slice(0, x2.dim() - 2));
    P = x1.size(-2), R = x2.size(-2), M = x1.size(-1), B = c10::multiply_integers(batch);
    s1 = s2 = so = batch;
    s1.insert(s1.end(), {P, M});
    s2.insert(s2.end(), {R, M});
    so.insert(so.end(), {P, R});
  }
};

Tensor cdist_forward_fn(const Tensor &x1, const Tensor &x2, double p, std::optional<int64_t> /*compute_mode*/) {
  TORCH_CHECK(at::isFloatingType(x1.scalar_type()), "cdist only supports floating-point dtypes, X1 got: ",
              x1.scalar_type());
  TORCH_CHECK(at::isFloatingType(x2.scalar_type()), "cdist only supports floating-point dtypes, X2 got: ",
              x2.scalar_type());
  TORCH_CHECK(x1.scalar_type() == x2.scalar_type(), "X1 and X2 must have the same dtype, but got ",
              x1.scalar_type(), " and ", x2.scalar_type());
  TORCH_CHECK(x1.dim() >= 2, "cdist only supports at least 2D tensors, X1 got: ", x1.dim(), "D");
  TORCH_CHECK(x2.dim() >= 2, "cdist only supports at least 2D tensors, X2 got: ", x2.dim(), "D");
  TORCH_CHECK(x1.size(-1) == x2.size(-1), "X1 and X2 must have the same number of columns. X1: ", x1.size(-1),
              " X2: ", x2.size(-1));
  TORCH_CHECK(p >= 0, "cdist only supports non-negative p values");
  c10::DeviceGuard guard(x1.device());
  CdistShapes sh(x1, x2);
  int64_t P = sh.P, R = sh.R, M = sh.M, B = sh.B;
  const std::vector<int64_t> &s1 = sh.s1, &s2 = sh.s2, &so = sh.so;
  Tensor out = at::empty(so, x1.options());
  if (out.numel() == 0) return out;
  Tensor a = x1.expand(s1).reshape({B, P, M}), b = x2.expand(s2).reshape({B, R, M});
  Tensor o = out.view({B, P, R});
  nrt_launch d = new_launch(NRT_OP(CDIST), {B, P, R, M});
  d.noutputs = 1;
  d.ninputs = 2;
  put3(d, 0, o);
  put3(d, 1, a);
  put3(d, 2, b);
  d.compute_dtype = to_nrt_dtype(x1.scalar_type());
  d.scalars[0].f = p;
  launch(x1.device().index(), d);
  return out;
}

Tensor cdist_backward_fn(const Tensor &grad, const Tensor &x1, const Tensor &x2, double p, const Tensor &cdist) {
  c10::DeviceGuard guard(x1.device());
  CdistShapes sh(x1, x2);
  int64_t P = sh.P, R = sh.R, M = sh.M, B = sh.B;
  const std::vector<int64_t> &s1 = sh.s1, &s2 = sh.s2, &so = sh.so;
  TORCH_CHECK(grad.sizes() == c10::IntArrayRef(so) && cdist.sizes() == c10::IntArrayRef(so),
              "_cdist_backward: expected grad and cdist of shape ", c10::IntArrayRef(so), ", got ", grad.sizes(),
              " and ", cdist.sizes());
  // The gradient of the broadcast x1 (as ATen's kernel and the meta
  // function return it); autograd sums it to x1's shape. Nothing to
  // compute: zeros of x1's own shape, as there.
  if (P == 0 || R == 0 || M == 0 || B == 0) return at::zeros_like(x1);
  Tensor gx = at::empty(s1, x1.options());
  Tensor a = x1.expand(s1).reshape({B, P, M}), b = x2.expand(s2).reshape({B, R, M});
  nrt_launch d = new_launch(NRT_OP(CDIST_BACKWARD), {B, P, R, M});
  d.noutputs = 1;
  d.ninputs = 4;
  put3(d, 0, gx.view({B, P, M}));
  put3(d, 1, grad.reshape({B, P, R}));
  put3(d, 2, a);
  put3(d, 3, b);
  put3(d, 4, cdist.reshape({B, P, R}));
  d.compute_dtype = to_nrt_dtype(x1.scalar_type());
  d.scalars[0].f = p;
  launch(x1.device().index(), d);
  return gx;
}

Tensor pdist_forward_fn(const Tensor &self, double p) {
  TORCH_CHECK(self.is_contiguous(), "_pdist_forward requires contiguous input");
  TORCH_CHECK(self.dim() == 2, "pdist only supports 2D tensors, got: ", self.dim(), "D");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "pdist only supports floating-point dtypes");
  TORCH_CHECK(p >= 0, "pdist only supports non-negative p values");
  c10::DeviceGuard guard(self.device());
  int64_t n = self.size(0), m = self.size(1);
  Tensor out = at::empty({n > 1 ? n * (n - 1) / 2 : 0}, self.options());
  if (out.numel() == 0) return out;
  nrt_launch d = new_launch(NRT_OP(PDIST), {n, m});
  d.noutputs = 1;
  d.ninputs = 1;
  set_operand(d.operands[0], out, {0});
  set_operand(d.operands[1], self, {0, 1});
  d.compute_dtype = to_nrt_dtype(self.scalar_type());
  d.scalars[0].f = p;
  launch(self.device().index(), d);
  return out;
}

Tensor pdist_backward_fn(const Tensor &grad, const Tensor &self, double p, const Tensor &pdist) {
  TORCH_CHECK(self.is_contiguous(), "_pdist_backward requires self to be contiguous");
  TORCH_CHECK(pdist.is_contiguous(), "_pdist_backward requires pdist to be contiguous");
  c10::DeviceGuard guard(self.device());
  int64_t n = self.size(0), m = self.size(1);
  Tensor gx = at::empty({n, m}, self.options());
  if (gx.numel() == 0) return gx;
  if (n < 2) return gx.zero_();
  nrt_launch d = new_launch(NRT_OP(PDIST_BACKWARD), {n, m});
  d.noutputs = 1;
  d.ninputs = 3;
  set_operand(d.operands[0], gx, {0, 1});
  set_operand(d.operands[1], grad.reshape({-1}), {0});
  set_operand(d.operands[2], self, {0, 1});
  set_operand(d.operands[3], pdist, {0});
  d.compute_dtype = to_nrt_dtype(self.scalar_type());
  d.scalars[0].f = p;
  launch(self.device().index(), d);
  return gx;
}

// ---- multi_margin_loss / multilabel_margin_loss -------------------------------------------
// Hinge losses as a few native launches over [N, C] (and [N, C, C] for the
// multilabel pairs); targets are checked with one device read, as the
// CPU checks them before computing.
struct MarginRows {
  Tensor x;       // [N, C] in float32 at least
  Tensor t;       // [N] or [N, C] int64
  int64_t n, c;
};

MarginRows margin_rows(const Tensor &self, const Tensor &target, bool multilabel) {
  TORCH_CHECK(self.dim() <= 2,
              "Expected non-empty vector or matrix with optional 0-dim batch size, but got: ", self.sizes());
  MarginRows r;
  Tensor x = self.dim() <= 1 ? self.reshape({1, -1}) : self;
  r.n = x.size(0);
  r.c = x.size(1);
  auto acc = at::isReducedFloatingType(self.scalar_type()) ? at::kFloat : self.scalar_type();
  r.x = x.to(acc);
  if (multilabel) {
    TORCH_CHECK(target.numel() == x.numel(), "inconsistent target size: ", target.sizes(), " for input of size: ",
                self.sizes());
    r.t = target.reshape({r.n, r.c}).to(at::kLong);
  } else {
    TORCH_CHECK(target.dim() <= 1 && target.numel() == r.n, "inconsistent target size, expected ", r.n, " but got ",
                target.sizes());
    r.t = target.reshape({r.n}).to(at::kLong);
  }
  return r;
}

Tensor reduce_loss(const Tensor &per_sample, int64_t reduction, const Tensor &self) {
  Tensor out;
  // An integer or bool input reaches here only empty (the CPU's kernel
  // refuses it otherwise, and returns its output uninitialised for an empty
  // one, in the input's dtype): the mean of nothing has no integer value,
  // so it is the sum, 0.
  bool exact = at::isFloatingType(per_sample.scalar_type()) || at::isComplexType(per_sample.scalar_type());
  if (reduction == at::Reduction::Mean) out = exact ? per_sample.mean() : per_sample.sum();
  else if (reduction == at::Reduction::Sum) out = per_sample.sum();
  else out = self.dim() <= 1 ? per_sample.reshape({}) : per_sample;
  return out.to(self.scalar_type());
}

// d(loss)/d(per-sample loss), shaped [N, 1].
Tensor per_sample_scale(const Tensor &grad_output, int64_t reduction, int64_t n, at::ScalarType acc) {
  Tensor g = grad_output.to(acc);
  if (reduction == at::Reduction::None) return g.reshape({n, 1});
  if (reduction == at::Reduction::Mean) g = g.div(static_cast<double>(n));
  return g.reshape({1, 1}).expand({n, 1});
}

// The CPU's kernel dispatch, after its shape checks and its empty-input
// return, before it reads the targets: a non-floating input raises
// NotImplementedError there (float16/bfloat16 are computed here, as on CUDA).
void multi_margin_dtype_check(const Tensor &self) {
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()),
                              "\"multi_margin_loss_cpu_kernel\" not implemented for '",
                              c10::toString(self.scalar_type()), "'");
}

// The CPU's kernels then read the targets as int64 (data_ptr<int64_t>).
void margin_target_check(const Tensor &target) {
  TORCH_CHECK(target.scalar_type() == at::kLong, "expected scalar type Long but found ", target.scalar_type());
}

void multi_margin_check(const Scalar &p, const std::optional<Tensor> &weight, int64_t c) {
  TORCH_CHECK(p.toLong() == 1 || p.toLong() == 2, "only p == 1 and p == 2 supported");
  TORCH_CHECK(!weight || !weight->defined() || (weight->dim() <= 1 && weight->numel() == c),
              "inconsistent weight size, expected ", c, " but got ", weight ? weight->sizes() : c10::IntArrayRef());
}

// One MULTI_MARGIN_LOSS(_BACKWARD) launch over x [N, C] in ATen's order
// (kernels/segment.c), so huge inputs overflow and cancel as on the CPU.
nrt_launch margin_launch(nrt_op op, const MarginRows &r, const Tensor &x, const Scalar &p, const Scalar &margin,
                         const std::optional<Tensor> &weight, int64_t reduction, int first_input) {
  nrt_launch d = new_launch(op, {r.n, r.c});
  d.noutputs = 1;
  bool weighted = weight && weight->defined();
  d.ninputs = first_input + 2 + (weighted ? 1 : 0);
  set_operand(d.operands[1 + first_input], x, {0, 1});
  set_operand(d.operands[2 + first_input], r.t, {0});
  if (weighted) set_operand(d.operands[3 + first_input], weight->reshape({-1}), {0});
  d.compute_dtype = to_nrt_dtype(x.scalar_type());
  d.params[0] = reduction;
  d.params[1] = p.toLong();
  d.scalars[0].f = margin.toDouble();
  return d;
}

// The CPU's output: per row only for reduction='none' with a 1-d target
// (a 0-d target gives a 0-d loss even for a [1, C] input).
bool margin_per_row(int64_t reduction, const Tensor &target) {
  return reduction == at::Reduction::None && target.dim() > 0;
}

Tensor multi_margin_loss_fn(const Tensor &self, const Tensor &target, const Scalar &p, const Scalar &margin,
                            const std::optional<Tensor> &weight, int64_t reduction) {
  c10::DeviceGuard guard(self.device());
  MarginRows r = margin_rows(self, target, false);
  multi_margin_check(p, weight, r.c);
  bool per_row = margin_per_row(reduction, target);
  if (r.n == 0 || r.c == 0) {
    Tensor z = reduce_loss(at::zeros({r.n}, r.x.options()), reduction, self);
    return per_row ? z.reshape({r.n}) : z.reshape({});
  }
  multi_margin_dtype_check(self);
  margin_target_check(target);
  // checked here too, for a synchronous error (the kernel's would surface at the next sync)
  int64_t bad = r.t.lt(0).logical_or(r.t.ge(r.c)).sum().item<int64_t>();
  TORCH_CHECK(bad == 0, "target out of range");
  Tensor x = self.dim() <= 1 ? self.reshape({1, -1}) : self;
  Tensor out = at::empty(per_row ? std::vector<int64_t>{r.n} : std::vector<int64_t>{}, self.options());
  nrt_launch d = margin_launch(NRT_OP(MULTI_MARGIN_LOSS), r, x, p, margin, weight,
                               per_row ? at::Reduction::None
                                       : (reduction == at::Reduction::None ? at::Reduction::Sum : reduction),
                               0);
  set_operand(d.operands[0], out, {per_row ? 0 : -1});
  launch(self.device().index(), d);
  return out;
}

Tensor multi_margin_loss_backward_fn(const Tensor &grad_output, const Tensor &self, const Tensor &target,
                                     const Scalar &p, const Scalar &margin, const std::optional<Tensor> &weight,
                                     int64_t reduction) {
  c10::DeviceGuard guard(self.device());
  MarginRows r = margin_rows(self, target, false);
  multi_margin_check(p, weight, r.c);
  if (r.n == 0 || r.c == 0) return at::zeros(self.sizes(), self.options());
  multi_margin_dtype_check(self);
  margin_target_check(target);
  // checked here too, for a synchronous error (the kernel's would surface at the next sync)
  int64_t bad = r.t.lt(0).logical_or(r.t.ge(r.c)).sum().item<int64_t>();
  TORCH_CHECK(bad == 0, "target out of range");
  Tensor x = self.dim() <= 1 ? self.reshape({1, -1}) : self;
  Tensor gx = at::empty({r.n, r.c}, self.options());
  // one grad_output value for every row unless the loss was per row
  bool per_row = reduction == at::Reduction::None && grad_output.dim() > 0;
  TORCH_CHECK(per_row ? grad_output.numel() == r.n : grad_output.numel() == 1,
              "multi_margin_loss_backward: grad_output of shape ", grad_output.sizes(), " for ", r.n, " rows");
  nrt_launch d = margin_launch(NRT_OP(MULTI_MARGIN_LOSS_BACKWARD), r, x, p, margin, weight, reduction, 1);
  set_operand(d.operands[0], gx, {0, 1});
  set_operand(d.operands[1], grad_output.reshape({-1}), {per_row ? 0 : -1});
  launch(self.device().index(), d);
  return gx.reshape(self.sizes());
}

// Pairs (j in targets, i not a target): [N, J, C] hinge 1 - x[t_j] + x[i].
struct MultilabelTerms {
  Tensor h, mask, tc, valid, is_target;
};

MultilabelTerms multilabel_terms(const MarginRows &r) {
  MultilabelTerms m;
  // targets run until the first -1
  m.valid = r.t.ne(-1).to(at::kLong).cumprod(1).to(at::kBool);
  int64_t bad = m.valid.logical_and(r.t.lt(0).logical_or(r.t.ge(r.c))).sum().item<int64_t>();
  TORCH_CHECK(bad == 0, "argument #2 'target' is out of range");
  m.tc = at::where(m.valid, r.t, at::zeros({}, r.t.options()));
  m.is_target = at::zeros({r.n, r.c}, r.x.options()).scatter_add(1, m.tc, m.valid.to(r.x.scalar_type())).gt(0);
  Tensor xt = r.x.gather(1, m.tc);
  m.h = r.x.unsqueeze(1).sub(xt.unsqueeze(2)).add(1.0);
  m.mask = m.valid.unsqueeze(2).logical_and(m.is_target.logical_not().unsqueeze(1));
  return m;
}

std::tuple<Tensor, Tensor> multilabel_margin_loss_forward_fn(const Tensor &self, const Tensor &target,
                                                             int64_t reduction) {
  c10::DeviceGuard guard(self.device());
  MarginRows r = margin_rows(self, target, true);
  if (r.n == 0 || r.c == 0)
    return {reduce_loss(at::zeros({r.n}, r.x.options()), reduction, self), at::zeros(self.sizes(), self.options())};
  MultilabelTerms m = multilabel_terms(r);
  Tensor h = at::where(m.mask.logical_and(m.h.gt(0)), m.h, at::zeros({}, m.h.options()));  // NaN skipped, as above
  Tensor loss = h.sum({1, 2}).div(static_cast<double>(r.c));
  return {reduce_loss(loss, reduction, self), m.is_target.to(self.scalar_type()).reshape(self.sizes())};
}

Tensor multilabel_margin_loss_backward_fn(const Tensor &grad_output, const Tensor &self, const Tensor &target,
                                          int64_t reduction, const Tensor & /*is_target*/) {
  c10::DeviceGuard guard(self.device());
  MarginRows r = margin_rows(self, target, true);
  if (r.n == 0 || r.c == 0) return at::zeros(self.sizes(), self.options());
  MultilabelTerms m = multilabel_terms(r);
  Tensor scale = per_sample_scale(grad_output, reduction, r.n, r.x.scalar_type()).div(static_cast<double>(r.c));
  Tensor g = m.mask.logical_and(m.h.gt(0)).to(r.x.scalar_type()).mul(scale.unsqueeze(2));  // [N, J, C]
  Tensor gx = g.sum(1).scatter_add(1, m.tc, g.sum(2).neg());
  return gx.reshape(self.sizes()).to(self.scalar_type());
}

// ---- segment_reduce ------------------------------------------------------------------------
// One SEGMENT_REDUCE launch over the [O, L, I] view of the data (O: the
// dims before axis, I: the dims after it). The kernel reads the lengths or
// offsets itself and rejects bounds that would leave the data, so only
// the !unsafe checks ATen makes up front need a read back here.
int segment_reduction(c10::string_view reduce) {
  if (reduce == "sum") return NRT_SEG_SUM;
  if (reduce == "mean") return NRT_SEG_MEAN;
  if (reduce == "max" || reduce == "amax") return NRT_SEG_MAX;
  if (reduce == "min" || reduce == "amin") return NRT_SEG_MIN;
  if (reduce == "prod") return NRT_SEG_PROD;
  TORCH_CHECK(false, "reduce argument must be either sum, prod, mean, amax or amin, got ", reduce);
}

struct SegmentView {
  Tensor bounds;  // [O, S] lengths or [O, S + 1] offsets
  bool lengths;
  int64_t O, S, I, L;
  std::vector<int64_t> out_shape;
};

SegmentView segment_view(const Tensor &data, const std::optional<Tensor> &lengths,
                         const std::optional<Tensor> &offsets, int64_t axis) {
  axis = at::maybe_wrap_dim(axis, data.dim());
  bool has_len = lengths.has_value() && lengths->defined();
  bool has_off = offsets.has_value() && offsets->defined();
  TORCH_CHECK(has_len || has_off, "segment_reduce(): Either lengths or offsets must be defined.");
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(data.scalar_type()), "\"segment_reduce\" not implemented for '",
                              data.scalar_type(), "'");
  const Tensor &b = has_off ? *offsets : *lengths;  // offsets win when both are given, as in ATen
  const char *what = has_off ? "offsets" : "lengths";
  TORCH_CHECK_NOT_IMPLEMENTED(b.scalar_type() == at::kLong || b.scalar_type() == at::kInt, "segment_reduce(): ",
                              what, " must be int32 or int64, got ", b.scalar_type());
  TORCH_CHECK(b.device() == data.device(), "segment_reduce(): expected ", what, " on ", data.device(),
              " like data, got ", b.device());
  TORCH_CHECK(data.dim() >= b.dim(), "segment_reduce(): ", what, " has more dimensions (", b.dim(),
              ") than data (", data.dim(), ")");
  TORCH_CHECK(axis == b.dim() - 1, "segment_reduce(): Expected axis to be the last dimension of ", what,
              " but got ", axis, ".");
  for (int64_t d = 0; d < axis; ++d) {
    TORCH_CHECK(b.size(d) == data.size(d), "segment_reduce(): ", what, " of shape ", b.sizes(),
                " does not match data of shape ", data.sizes(), " in the dimensions before axis");
  }
  TORCH_CHECK(!has_off || b.size(-1) >= 1, "segment_reduce(): offsets needs at least one entry along axis");
  SegmentView v;
  v.lengths = !has_off;
  v.O = c10::multiply_integers(data.sizes().slice(0, axis));
  v.L = data.size(axis);
  v.I = c10::multiply_integers(data.sizes().slice(axis + 1));
  v.S = has_off ? b.size(-1) - 1 : b.size(-1);
  v.bounds = b.reshape({v.O, b.size(-1)});
  v.out_shape = data.sizes().vec();
  v.out_shape[axis] = v.S;
  return v;
}

// One SEGMENT_REDUCE(_BACKWARD) launch over {O, S, I, L}: `views` are the
// [O, S or L, I] operands (the one output first), then the bounds follow.
void launch_segment_reduce(nrt_op op, const SegmentView &v, int red, const std::optional<Scalar> &initial,
                           const Tensor &data, std::initializer_list<Tensor> views) {
  nrt_launch d = new_launch(op, {v.O, v.S, v.I, v.L});
  d.noutputs = 1;
  d.ninputs = static_cast<int>(views.size());  // views - output + bounds
  int k = 0;
  for (const Tensor &t : views) put3(d, k++, t);
  set_operand(d.operands[k], v.bounds, {0, 1});
  d.compute_dtype = to_nrt_dtype(data.scalar_type());
  d.params[0] = red;
  d.params[1] = v.lengths ? 1 : 0;
  d.params[2] = initial.has_value() ? 1 : 0;
  if (initial.has_value()) d.scalars[0].f = initial->toDouble();
  launch(data.device().index(), d);
}

Tensor segment_reduce_into(Tensor, const Tensor &data, c10::string_view reduce, const std::optional<Tensor> &lengths,
                         const std::optional<Tensor> &indices, const std::optional<Tensor> &offsets, int64_t axis,
                         bool unsafe, const std::optional<Scalar> &initial) {
  TORCH_CHECK(!indices.has_value() || !indices->defined(),
              "segment_reduce(): indices based reduction is not supported yet.");
  c10::DeviceGuard guard(data.device());
  SegmentView v = segment_view(data, lengths, offsets, axis);
  int red = segment_reduction(reduce);
  if (v.lengths && !unsafe) {
    // ATen's up-front checks, one read back each; offsets get none there
    TORCH_CHECK(v.bounds.min().item<int64_t>() >= 0, "lengths contains negative value!");
    TORCH_CHECK(v.bounds.sum(-1).eq(v.L).all().item<bool>(),
                "segment_reduce(): Expected all rows of lengths along axis to sum to data.size(lengths.dim()-1) "
                "when !unsafe.");
  }
  Tensor out = at::empty(v.out_shape, data.options());
  if (out.numel() == 0) return out;
  launch_segment_reduce(NRT_OP(SEGMENT_REDUCE), v, red, initial, data,
                        {out.view({v.O, v.S, v.I}), data.reshape({v.O, v.L, v.I})});
  return out;
}

Tensor segment_reduce_backward_into(Tensor, const Tensor &grad, const Tensor &output, const Tensor &data,
                                  c10::string_view reduce, const std::optional<Tensor> &lengths,
                                  const std::optional<Tensor> &offsets, int64_t axis,
                                  const std::optional<Scalar> &initial) {
  c10::DeviceGuard guard(data.device());
  SegmentView v = segment_view(data, lengths, offsets, axis);
  int red = segment_reduction(reduce);
  c10::IntArrayRef want(v.out_shape);
  TORCH_CHECK(grad.sizes() == want && output.sizes() == want, "_segment_reduce_backward: expected grad and output of ",
              "shape ", want, ", got ", grad.sizes(), " and ", output.sizes());
  TORCH_CHECK(at::isFloatingType(grad.scalar_type()) && at::isFloatingType(output.scalar_type()),
              "_segment_reduce_backward: expected floating grad and output, got ", grad.scalar_type(), " and ",
              output.scalar_type());
  Tensor gd = at::empty(data.sizes(), grad.options());
  if (gd.numel() == 0) return gd;
  launch_segment_reduce(NRT_OP(SEGMENT_REDUCE_BACKWARD), v, red, initial, data,
                        {gd.view({v.O, v.L, v.I}), grad.reshape({v.O, v.S, v.I}), output.reshape({v.O, v.S, v.I}),
                         data.reshape({v.O, v.L, v.I})});
  return gd;
}

// ---- ctc_loss -----------------------------------------------------------------------------------
// _ctc_loss is one CTC_LOSS launch (sequences in parallel), its backward one
// CTC_LOSS_BACKWARD. The lengths are host lists (the Tensor overloads read
// them back once, as ATen's own do); they are checked here with ATen's
// messages and reach the kernel as a small [B, 4] table that also says
// where each sequence's targets start. The kernel checks the labels.
struct CtcSetup {
  Tensor targets;  // on the device
  Tensor table;    // int64 [B, NRT_CTC_TABLE_COLS] on the device
  int64_t T, B, C, smax;
};

CtcSetup ctc_setup(const Tensor &log_probs, const Tensor &targets, c10::IntArrayRef il, c10::IntArrayRef tl,
                   int64_t blank) {
  const char *c = " (while checking arguments for ctc_loss_allocate_outputs)";
  TORCH_CHECK(targets.scalar_type() == at::kLong || targets.scalar_type() == at::kInt,
              "Expected tensor for argument #2 'targets' to have scalar type Long or Int; but got ",
              targets.scalar_type(), " instead", c);
  TORCH_CHECK(log_probs.dim() == 3, "Expected 3-dimensional tensor, but got ", log_probs.dim(),
              "-dimensional tensor for argument #1 'log_probs'", c);
  TORCH_CHECK(targets.dim() == 1 || targets.dim() == 2, "Expected 1 to 2 dimensions, but got ", targets.dim(),
              "-dimensional tensor for argument #2 'targets'", c);
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(log_probs.scalar_type()), "\"ctc_loss\" not implemented for '",
                              log_probs.scalar_type(), "'");
  CtcSetup s;
  s.T = log_probs.size(0);
  s.B = log_probs.size(1);
  s.C = log_probs.size(2);
  TORCH_CHECK(0 <= blank && blank < s.C, "blank must be in label range");
  TORCH_CHECK(static_cast<int64_t>(il.size()) == s.B, "input_lengths must be of size batch_size");
  TORCH_CHECK(static_cast<int64_t>(tl.size()) == s.B, "target_lengths must be of size batch_size");
  // a host staging buffer for the table, copied to the device below
  Tensor table = at::empty({s.B, NRT_CTC_TABLE_COLS}, at::TensorOptions().dtype(at::kLong));
  int64_t *row = table.data_ptr<int64_t>();
  int64_t pos = 0;
  s.smax = 0;
  for (int64_t b = 0; b < s.B; ++b, row += NRT_CTC_TABLE_COLS) {
    TORCH_CHECK(tl[b] >= 0, "Expected target_lengths to have value at least 0, but got value ", tl[b], c);
    TORCH_CHECK(il[b] >= 0, "Expected input_lengths to have value at least 0, but got value ", il[b], c);
    TORCH_CHECK(il[b] <= s.T, "Expected input_lengths to have value at most ", s.T, ", but got value ", il[b], c);
    row[NRT_CTC_INPUT_LEN] = il[b];
    row[NRT_CTC_TARGET_LEN] = tl[b];
    row[NRT_CTC_TARGET_ROW] = targets.dim() == 1 ? 0 : b;
    row[NRT_CTC_TARGET_COL] = targets.dim() == 1 ? pos : 0;
    pos += tl[b];
    s.smax = std::max(s.smax, tl[b]);
  }
  if (targets.dim() == 1) {
    TORCH_CHECK(targets.size(0) == pos, "Expected tensor to have size ", pos, " at dimension 0, but got size ",
                targets.size(0), " for argument #2 'targets'", c);
  } else {
    TORCH_CHECK(targets.size(0) == s.B, "Expected tensor to have size ", s.B, " at dimension 0, but got size ",
                targets.size(0), " for argument #2 'targets'", c);
    TORCH_CHECK(targets.size(1) >= s.smax, "Expected tensor to have size at least ", s.smax,
                " at dimension 1, but got size ", targets.size(1), " for argument #2 'targets'", c);
  }
  s.table = table.to(log_probs.device());
  s.targets = targets.device() == log_probs.device() ? targets : targets.to(log_probs.device());
  return s;
}

// Targets as a {row, col} operand: a concatenated 1-d list is one row.
void put_targets(nrt_launch &d, int k, const Tensor &targets) {
  if (targets.dim() == 1) {
    set_operand(d.operands[k], targets, {-1, 0});
    d.aux[0] = 1;
    d.aux[1] = targets.size(0);
  } else {
    set_operand(d.operands[k], targets, {0, 1});
    d.aux[0] = targets.size(0);
    d.aux[1] = targets.size(1);
  }
}

std::vector<int64_t> host_lengths(const Tensor &t, const char *what) {
  TORCH_CHECK(at::isIntegralType(t.scalar_type(), /*includeBool=*/false), what, " must be integral");
  Tensor h = t.to(at::kLong).reshape({-1}).to(at::kCPU);  // a few ints read back, as ATen's overload does
  const int64_t *p = h.data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + h.numel());
}

std::tuple<Tensor, Tensor> ctc_loss_fn(const Tensor &log_probs, const Tensor &targets, c10::IntArrayRef il,
                                       c10::IntArrayRef tl, int64_t blank, bool /*zero_infinity*/) {
  // zero_infinity is applied by the composite ctc_loss and by the backward
  c10::DeviceGuard guard(log_probs.device());
  CtcSetup s = ctc_setup(log_probs, targets, il, tl, blank);
  Tensor nll = at::empty({s.B}, log_probs.options());
  Tensor alpha = at::empty({s.B, s.T, 2 * s.smax + 1}, log_probs.options());
  if (s.B == 0) return {nll, alpha};
  nrt_launch d = new_launch(NRT_OP(CTC_LOSS), {s.T, s.B, s.C, s.smax});
  d.noutputs = 2;
  d.ninputs = 3;
  set_operand(d.operands[0], nll, {0});
  put3(d, 1, alpha);
  put3(d, 2, log_probs);
  put_targets(d, 3, s.targets);
  set_operand(d.operands[4], s.table, {0, 1});
  d.compute_dtype = to_nrt_dtype(log_probs.scalar_type());
  d.params[0] = blank;
  launch(log_probs.device().index(), d);
  return {nll, alpha};
}

std::tuple<Tensor, Tensor> ctc_loss_tensor_fn(const Tensor &log_probs, const Tensor &targets,
                                              const Tensor &input_lengths, const Tensor &target_lengths,
                                              int64_t blank, bool zero_infinity) {
  auto il = host_lengths(input_lengths, "input_lengths");
  auto tl = host_lengths(target_lengths, "target_lengths");
  return ctc_loss_fn(log_probs, targets, il, tl, blank, zero_infinity);
}

Tensor ctc_loss_backward_fn(const Tensor &grad, const Tensor &log_probs, const Tensor &targets, c10::IntArrayRef il,
                            c10::IntArrayRef tl, const Tensor &nll, const Tensor &log_alpha, int64_t blank,
                            bool zero_infinity) {
  c10::DeviceGuard guard(log_probs.device());
  CtcSetup s = ctc_setup(log_probs, targets, il, tl, blank);
  TORCH_CHECK(grad.numel() == s.B && nll.numel() == s.B, "_ctc_loss_backward: expected grad and neg_log_likelihood ",
              "with ", s.B, " elements, got ", grad.sizes(), " and ", nll.sizes());
  TORCH_CHECK(log_alpha.dim() == 3 && log_alpha.size(0) == s.B && log_alpha.size(1) == s.T &&
                  log_alpha.size(2) >= 2 * s.smax + 1,
              "_ctc_loss_backward: expected log_alpha of shape [", s.B, ", ", s.T, ", ", 2 * s.smax + 1, "], got ",
              log_alpha.sizes());
  TORCH_CHECK(at::isFloatingType(grad.scalar_type()) && at::isFloatingType(nll.scalar_type()) &&
                  at::isFloatingType(log_alpha.scalar_type()),
              "_ctc_loss_backward: expected floating grad, neg_log_likelihood and log_alpha");
  Tensor out = at::empty(log_probs.sizes(), log_probs.options());
  if (out.numel() == 0) return out;
  nrt_launch d = new_launch(NRT_OP(CTC_LOSS_BACKWARD), {s.T, s.B, s.C, s.smax});
  d.noutputs = 1;
  d.ninputs = 6;
  put3(d, 0, out);
  set_operand(d.operands[1], grad.reshape({s.B}), {0});
  put3(d, 2, log_probs);
  put_targets(d, 3, s.targets);
  set_operand(d.operands[4], s.table, {0, 1});
  set_operand(d.operands[5], nll.reshape({s.B}), {0});
  put3(d, 6, log_alpha);
  d.compute_dtype = to_nrt_dtype(log_probs.scalar_type());
  d.params[0] = blank;
  d.params[1] = zero_infinity ? 1 : 0;
  launch(log_probs.device().index(), d);
  return out;
}

Tensor ctc_loss_backward_tensor_fn(const Tensor &grad, const Tensor &log_probs, const Tensor &targets,
                                   const Tensor &input_lengths, const Tensor &target_lengths, const Tensor &nll,
                                   const Tensor &log_alpha, int64_t blank, bool zero_infinity) {
  auto il = host_lengths(input_lengths, "input_lengths");
  auto tl = host_lengths(target_lengths, "target_lengths");
  return ctc_loss_backward_fn(grad, log_probs, targets, il, tl, nll, log_alpha, blank, zero_infinity);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  NEURON_IMPL(m, "nll_loss_forward", nll_loss_forward_fn);
  NEURON_IMPL(m, "nll_loss_backward", nll_loss_backward_fn);
  NEURON_OUT_OF(m, nll_loss_forward_fn, "nll_loss_forward.output");
  NEURON_OUT_OF(m, nll_loss_backward_fn, "nll_loss_backward.grad_input");
  NEURON_IMPL(m, "nll_loss2d_forward", nll_loss2d_forward_fn);
  NEURON_IMPL(m, "nll_loss2d_backward", nll_loss2d_backward_fn);
  NEURON_OUT_OF(m, nll_loss2d_forward_fn, "nll_loss2d_forward.output");
  NEURON_OUT_OF(m, nll_loss2d_backward_fn, "nll_loss2d_backward.grad_input");
  NEURON_IMPL(m, "masked_scatter_", masked_scatter_ip);
  NEURON_VARIANTS(m, index_reduce_into, "index_reduce", "index_reduce_", "index_reduce.out");
  NEURON_VARIANTS(m, index_copy_into, "index_copy", "index_copy_", "index_copy.out");
  NEURON_VARIANTS(m, take_into, "take", nullptr, "take.out");
  NEURON_IMPL(m, "put_", put_ip);
  NEURON_IMPL(m, "trace", trace_fn);
  NEURON_VARIANTS(m, renorm_into, "renorm", "renorm_", "renorm.out");
  NEURON_IMPL(m, "channel_shuffle", channel_shuffle_fn);
  NEURON_IMPL(m, "native_channel_shuffle", channel_shuffle_fn);
  NEURON_IMPL(m, "logspace.out", logspace_out);
  NEURON_IMPL(m, "cauchy_", cauchy_ip);
  NEURON_IMPL(m, "geometric_", geometric_ip);
  NEURON_IMPL(m, "log_normal_", log_normal_ip);
  NEURON_IMPL(m, "_efficientzerotensor", efficientzerotensor_fn);
  NEURON_IMPL(m, "_embedding_bag", embedding_bag_fn);
  NEURON_IMPL(m, "_embedding_bag_forward_only", embedding_bag_fn);
  NEURON_IMPL(m, "_embedding_bag_backward", embedding_bag_backward_fn);
  NEURON_IMPL(m, "_embedding_bag_dense_backward", embedding_bag_dense_backward_fn);
  NEURON_IMPL(m, "_embedding_bag_per_sample_weights_backward", embedding_bag_psw_backward_fn);
  NEURON_IMPL(m, "_cdist_forward", cdist_forward_fn);
  NEURON_IMPL(m, "_cdist_backward", cdist_backward_fn);
  NEURON_IMPL(m, "_pdist_forward", pdist_forward_fn);
  NEURON_IMPL(m, "_pdist_backward", pdist_backward_fn);
  NEURON_IMPL(m, "multi_margin_loss", multi_margin_loss_fn);
  NEURON_IMPL(m, "multi_margin_loss_backward", multi_margin_loss_backward_fn);
  NEURON_IMPL(m, "multilabel_margin_loss_forward", multilabel_margin_loss_forward_fn);
  NEURON_IMPL(m, "multilabel_margin_loss_backward", multilabel_margin_loss_backward_fn);
  NEURON_OUT_OF(m, multi_margin_loss_fn, "multi_margin_loss.out");
  NEURON_OUT_OF(m, multi_margin_loss_backward_fn, "multi_margin_loss_backward.grad_input");
  NEURON_OUT_OF(m, multilabel_margin_loss_forward_fn, "multilabel_margin_loss_forward.output");
  NEURON_OUT_OF(m, multilabel_margin_loss_backward_fn, "multilabel_margin_loss_backward.grad_input");
  NEURON_VARIANTS(m, segment_reduce_into, "segment_reduce", nullptr, "segment_reduce.out");
  NEURON_VARIANTS(m, segment_reduce_backward_into, "_segment_reduce_backward", nullptr,
                  "_segment_reduce_backward.out");
  NEURON_IMPL(m, "_ctc_loss", ctc_loss_fn);
  NEURON_IMPL(m, "_ctc_loss.Tensor", ctc_loss_tensor_fn);
  NEURON_IMPL(m, "_ctc_loss_backward", ctc_loss_backward_fn);
  NEURON_IMPL(m, "_ctc_loss_backward.Tensor", ctc_loss_backward_tensor_fn);
}

}  // namespace torch_neuronx
