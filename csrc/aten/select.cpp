// Native selection ops (family SELECT, nrt/ops/select.h): cummax/cummin and
// logcumsumexp scans, order statistics (kthvalue, median, nanmedian,
// mode), unique and its variants, searchsorted/bucketize, histograms,
// repeat_interleave and nonzero_static; aminmax and count_nonzero are
// compositions of native reductions.
//
// Ops whose output size depends on the data (unique, repeat_interleave)
// read one count back from the device, as CUDA does. Shapes, checks and
// error messages follow ATen's helpers (SortingUtils, BucketizationUtils,
// ReduceOpsUtils) where they are exported.
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/BucketizationUtils.h>
#include <ATen/native/ReduceOpsUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/native/SortingUtils.h>
#include <c10/core/DeviceGuard.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "launch/launch.h"
#include "nrt/ops/select.h"
#include "registry/variants.h"

namespace torch_neuronx {
namespace {

using at::Tensor;
using c10::Scalar;

// ---- descriptors -----------------------------------------------------------

nrt_launch new_desc(nrt_op op, int noutputs, int ninputs) {
  nrt_launch d = new_launch(op);
  d.noutputs = noutputs;
  d.ninputs = ninputs;
  return d;
}

// Operand k of d describes `t` with the byte strides of the listed dims (-1:
// stride 0).
void set_op(nrt_launch &d, int k, const Tensor &t, const std::vector<int64_t> &dims) {
  TORCH_CHECK(t.device().type() == kNeuron, "Expected all tensors to be on the same device, but found ", t.device());
  set_operand(d.operands[k], t, dims);
}

// The dims of an ndim tensor with `dim` moved last: the row layout.
std::vector<int64_t> dim_last(int64_t ndim, int64_t dim) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < ndim; ++i)
    if (i != dim) v.push_back(i);
  v.push_back(dim);
  return v;
}

// The CPU kernels of these ops dispatch over floating types only.
void check_floating(const Tensor &t, const char *name) {
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(t.scalar_type()), "\"", name, "\" not implemented for '",
                              c10::toString(t.scalar_type()), "'");
}

void set_sizes(nrt_launch &d, const Tensor &t, const std::vector<int64_t> &dims) {
  TORCH_CHECK(dims.size() <= NRT_MAX_DIMS, "neuron select kernels support at most ", NRT_MAX_DIMS, " dims");
  d.ndim = static_cast<int>(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) d.sizes[i] = t.size(dims[i]);
}

// ---- cummax / cummin / logcumsumexp -------------------------------------------

void cum_ext(const Tensor &self, Tensor &values, Tensor &indices, int64_t dim, nrt_op op) {
  c10::DeviceGuard guard(self.device());
  if (self.numel() == 0) return;
  if (self.dim() == 0) {
    values.fill_(self);
    indices.fill_(0);
    return;
  }
  dim = at::maybe_wrap_dim(dim, self.dim());
  auto dims = dim_last(self.dim(), dim);
  nrt_launch d = new_desc(op, 2, 1);
  set_sizes(d, self, dims);
  set_op(d, 0, values, dims);
  set_op(d, 1, indices, dims);
  set_op(d, 2, self, dims);
  d.compute_dtype = d.operands[2].dtype;
  launch(self.device().index(), d);
}

void cummax_helper(const Tensor &self, Tensor &values, Tensor &indices, int64_t dim) {
  cum_ext(self, values, indices, dim, NRT_OP(CUMMAX));
}
void cummin_helper(const Tensor &self, Tensor &values, Tensor &indices, int64_t dim) {
  cum_ext(self, values, indices, dim, NRT_OP(CUMMIN));
}

Tensor logcumsumexp_into(Tensor result, const Tensor &self, int64_t dim) {
  c10::DeviceGuard guard(self.device());
  if (!result.defined()) result = at::empty({0}, self.options());
  (void)at::maybe_wrap_dim(dim, self.dim());  // IndexError first, as ATen's logcumsumexp checks the dim
  // the CPU's kernel: floating and complex dtypes, but no complex32
  if (!self.is_complex() || self.scalar_type() == at::kComplexHalf) check_floating(self, "logcumsumexp");
  at::native::resize_output(result, self.sizes());
  if (self.numel() == 0) return result;
  // the CPU's scan kernels copy a 0-d input (complex nan - 0i stays as is;
  // log(exp(z)) of one element would turn it into nan + nan i)
  if (self.dim() == 0) return result.copy_(self);
  Tensor x = self;
  Tensor out = result;
  dim = at::maybe_wrap_dim(dim, x.dim());
  Tensor src = x;
  if (src.scalar_type() != out.scalar_type()) src = src.to(out.scalar_type());
  auto dims = dim_last(x.dim(), dim);
  nrt_launch d = new_desc(NRT_OP(LOGCUMSUMEXP), 1, 1);
  set_sizes(d, x, dims);
  Tensor resolved;  // alive until the launch is enqueued
  if (x.is_complex()) {
    // The kernel reads complex elements as (re, im) pairs through real
    // views (p0 = 1); a conjugate view is materialised first, since its
    // real view would not carry the sign.
    resolved = src.resolve_conj();
    set_op(d, 0, at::view_as_real(out), dims);
    set_op(d, 1, at::view_as_real(resolved), dims);
    d.params[0] = 1;
  } else {
    set_op(d, 0, out, dims);
    set_op(d, 1, src, dims);
  }
  d.compute_dtype = d.operands[1].dtype;
  launch(self.device().index(), d);
  return result;
}

// ---- order statistics ---------------------------------------------------------
enum { OS_KTH = 0, OS_MEDIAN = 1, OS_NANMEDIAN = 2, OS_MODE = 3 };

// Launches ORDER_STAT along `dim` of x (dim >= 1 tensors) into values /
// indices shaped like x with size 1 at dim.
void order_stat(const Tensor &x, int64_t dim, Tensor &values, Tensor &indices, int64_t stat, int64_t k) {
  auto dims = dim_last(x.dim(), dim);
  nrt_launch d = new_desc(NRT_OP(ORDER_STAT), 2, 1);
  set_sizes(d, x, dims);
  set_op(d, 0, values, dims);
  set_op(d, 1, indices, dims);
  set_op(d, 2, x, dims);
  d.operands[0].strides[d.ndim - 1] = 0;
  d.operands[1].strides[d.ndim - 1] = 0;
  d.compute_dtype = d.operands[2].dtype;
  d.params[0] = stat;
  d.params[1] = k;
  launch(x.device().index(), d);
}

// The dim-wise form shared by kthvalue, median, nanmedian and mode.
std::tuple<Tensor &, Tensor &> order_stat_dim(const Tensor &self, int64_t dim, bool keepdim, Tensor &values,
                                               Tensor &indices, int64_t stat, int64_t k) {
  c10::DeviceGuard guard(self.device());
  dim = at::maybe_wrap_dim(dim, self.dim(), /*wrap_scalar=*/true);
  at::native::_reduction_with_indices_allocate_or_resize_output(values, indices, self, dim, keepdim);
  // The CPU's median kernel (nanmedian's too) dispatches on the dtype
  // whatever the shape, a 0-d or empty input included: no bool or complex form.
  if (stat == OS_MEDIAN || stat == OS_NANMEDIAN)
    TORCH_CHECK_NOT_IMPLEMENTED(self.scalar_type() != at::kBool && !self.is_complex(),
                                "\"median_out\" not implemented for '", self.scalar_type(), "'");
  // kthvalue's kernel dispatches for any input of at least one dim, an
  // empty one included (a 0-d one is copied): no bool or complex form.
  if (stat == OS_KTH && self.dim() > 0)
    TORCH_CHECK_NOT_IMPLEMENTED(self.scalar_type() != at::kBool && !self.is_complex(),
                                "\"kthvalue_cpu\" not implemented for '", self.scalar_type(), "'");
  if (self.dim() == 0) {
    values.copy_(self);
    indices.fill_(0);
  } else if (values.numel() > 0) {
    // Write through the outputs' own strides (they may be user out= views).
    order_stat(self, dim, values, indices, stat, k);
  }
  if (!keepdim && self.dim() > 0) {
    values.squeeze_(dim);
    indices.squeeze_(dim);
  }
  return std::forward_as_tuple(values, indices);
}

std::tuple<Tensor &, Tensor &> kthvalue_out(const Tensor &self, int64_t k, int64_t dim, bool keepdim,
                                            Tensor &values, Tensor &indices) {
  int64_t wd = at::maybe_wrap_dim(dim, self.dim(), /*wrap_scalar=*/true);
  int64_t slice = self.dim() == 0 ? 1 : self.size(wd);
  at::native::zero_numel_check_dims(self, wd, "kthvalue()");  // IndexError first, as the CPU
  TORCH_CHECK(k >= 1 && k <= slice, "kthvalue(): selected number k out of range for dimension ", wd);
  return order_stat_dim(self, dim, keepdim, values, indices, OS_KTH, k - 1);
}

std::tuple<Tensor &, Tensor &> median_dim_out(const Tensor &self, int64_t dim, bool keepdim, Tensor &values,
                                              Tensor &indices) {
  at::native::zero_numel_check_dims(self, at::maybe_wrap_dim(dim, self.dim(), true), "median()");
  return order_stat_dim(self, dim, keepdim, values, indices, OS_MEDIAN, 0);
}
std::tuple<Tensor &, Tensor &> nanmedian_dim_out(const Tensor &self, int64_t dim, bool keepdim, Tensor &values,
                                                 Tensor &indices) {
  at::native::zero_numel_check_dims(self, at::maybe_wrap_dim(dim, self.dim(), true), "nanmedian()");
  return order_stat_dim(self, dim, keepdim, values, indices, OS_NANMEDIAN, 0);
}

std::tuple<Tensor, Tensor> mode_into(Tensor values, Tensor indices, const Tensor &self, int64_t dim, bool keepdim) {
  if (!values.defined()) {
    values = at::empty({0}, self.options());
    indices = at::empty({0}, self.options().dtype(at::kLong));
  }
  at::native::zero_numel_check_dims(self, at::maybe_wrap_dim(dim, self.dim(), true), "mode()");
  order_stat_dim(self, dim, keepdim, values, indices, OS_MODE, 0);
  return {values, indices};
}

// median() / nanmedian() of all elements: the value only.
Tensor median_all(const Tensor &self, int64_t stat) {
  c10::DeviceGuard guard(self.device());
  if (self.numel() == 0)
    return at::full({}, std::numeric_limits<double>::quiet_NaN(), self.options().dtype(at::kFloat))
        .to(self.scalar_type());
  TORCH_CHECK_NOT_IMPLEMENTED(self.scalar_type() != at::kBool && !self.is_complex(),
                              "\"median_cpu\" not implemented for '", self.scalar_type(), "'");
  Tensor x = self.reshape({self.numel()});
  Tensor values = at::empty({1}, self.options());
  Tensor indices = at::empty({1}, self.options().dtype(at::kLong));
  order_stat(x, 0, values, indices, stat, 0);
  return values.reshape({});
}
Tensor median_fn(const Tensor &self) { return median_all(self, OS_MEDIAN); }
Tensor nanmedian_fn(const Tensor &self) { return median_all(self, OS_NANMEDIAN); }

// ---- unique ---------------------------------------------------------------------
// Groups the n slices of x2 [n, m] (sorted or consecutive): the order,
// each sorted position's group, group starts; one count read back.
struct Groups {
  Tensor perm, group, starts;
  int64_t count = 0;
};

Groups group_slices(const Tensor &x2, bool sort) {
  int64_t n = x2.size(0);
  auto lopt = x2.options().dtype(at::kLong);
  Groups g;
  g.perm = at::empty({n}, lopt);
  g.group = at::empty({n}, lopt);
  g.starts = at::empty({n + 1}, lopt);
  Tensor count = at::empty({1}, lopt);
  nrt_launch d = new_desc(NRT_OP(UNIQUE_SLICES), 4, 1);
  d.ndim = 2;
  d.sizes[0] = n;
  d.sizes[1] = x2.size(1);
  set_op(d, 0, g.perm, {0});
  set_op(d, 1, g.group, {0});
  set_op(d, 2, g.starts, {0});
  set_op(d, 3, count, {0});
  set_op(d, 4, x2, {0, 1});
  d.compute_dtype = d.operands[4].dtype;
  d.params[0] = sort ? 1 : 0;
  launch(x2.device().index(), d);
  g.count = count.item<int64_t>();  // the one synchronising read
  return g;
}

// Inverse (slice -> group) and counts from the grouping.
Tensor inverse_of(const Groups &g) {
  Tensor inv = at::empty({g.perm.size(0)}, g.perm.options());
  return inv.scatter_(0, g.perm, g.group);
}
Tensor counts_of(const Groups &g) {
  return g.starts.narrow(0, 1, g.count) - g.starts.narrow(0, 0, g.count);
}
Tensor heads_of(const Groups &g) { return g.perm.index_select(0, g.starts.narrow(0, 0, g.count)); }

std::tuple<Tensor, Tensor, Tensor> unique_flat(const Tensor &self, bool sort, bool return_inverse,
                                               bool return_counts) {
  c10::DeviceGuard guard(self.device());
  auto lopt = self.options().dtype(at::kLong);
  int64_t n = self.numel();
  if (n == 0) {
    Tensor inv = return_inverse ? at::empty(self.sizes(), lopt) : at::empty({0}, lopt);
    return {at::empty({0}, self.options()), inv, at::empty({0}, lopt)};
  }
  Tensor flat = self.reshape({n});
  Groups g = group_slices(flat.reshape({n, 1}), sort);
  Tensor output = flat.index_select(0, heads_of(g));
  Tensor inv = return_inverse ? inverse_of(g).view(self.sizes()) : at::empty({0}, lopt);
  Tensor counts = return_counts ? counts_of(g) : at::empty({0}, lopt);
  return {output, inv, counts};
}

// The CPU's unique kernels dispatch on the dtype before anything else, an
// empty input included: no complex form ("unique" flat, "unique_dim" along
// a dim).
void check_unique_dtype(const Tensor &self, const char *cpu_kernel) {
  TORCH_CHECK_NOT_IMPLEMENTED(!self.is_complex(), "\"", cpu_kernel, "\" not implemented for '", self.scalar_type(),
                              "'");
}

std::tuple<Tensor, Tensor, Tensor> unique2_fn(const Tensor &self, bool /*sorted*/, bool return_inverse,
                                              bool return_counts) {
  check_unique_dtype(self, "unique");
  // Like the CPU, always sorted.
  return unique_flat(self, true, return_inverse, return_counts);
}
std::tuple<Tensor, Tensor> unique_fn(const Tensor &self, bool /*sorted*/, bool return_inverse) {
  check_unique_dtype(self, "unique");
  auto [o, i, c] = unique_flat(self, true, return_inverse, false);
  return {o, i};
}

std::tuple<Tensor, Tensor, Tensor> unique_dim_impl(const Tensor &self, int64_t dim, bool sort, bool return_inverse,
                                                   bool return_counts) {
  c10::DeviceGuard guard(self.device());
  dim = at::maybe_wrap_dim(dim, self.dim());
  auto lopt = self.options().dtype(at::kLong);
  auto sizes = self.sizes().vec();
  int64_t zero_dims = std::count(sizes.begin(), sizes.end(), 0);
  if (self.size(dim) == 0) {
    TORCH_CHECK(zero_dims == 1, "Number of zero sized dimensions is more than one, so unique cannot be applied ");
    return {at::empty(sizes, self.options()), at::empty({0}, lopt), at::empty({0}, lopt)};
  }
  TORCH_CHECK(zero_dims == 0, "There are 0 sized dimensions, and they aren't selected, so unique cannot be applied");
  int64_t n = self.size(dim);
  Tensor x2 = self.movedim(dim, 0).reshape({n, -1});
  Groups g = group_slices(x2, sort);
  Tensor output = self.index_select(dim, heads_of(g));
  // As the CPU: inverse and counts are always computed for the dim form.
  Tensor inv = inverse_of(g);
  Tensor counts = counts_of(g);
  (void)return_inverse;
  (void)return_counts;
  return {output, inv, counts};
}

std::tuple<Tensor, Tensor, Tensor> unique_dim_fn(const Tensor &self, int64_t dim, bool /*sorted*/,
                                                 bool return_inverse, bool return_counts) {
  check_unique_dtype(self, "unique_dim");
  return unique_dim_impl(self, dim, true, return_inverse, return_counts);
}
std::tuple<Tensor, Tensor, Tensor> unique_dim_consecutive_fn(const Tensor &self, int64_t dim, bool return_inverse,
                                                             bool return_counts) {
  check_unique_dtype(self, "unique_dim");
  return unique_dim_impl(self, dim, false, return_inverse, return_counts);
}
std::tuple<Tensor, Tensor, Tensor> unique_consecutive_fn(const Tensor &self, bool return_inverse, bool return_counts,
                                                         std::optional<int64_t> dim) {
  if (!dim.has_value() || (*dim == 0 && self.dim() == 1)) {
    check_unique_dtype(self, "unique");
    return unique_flat(self, false, return_inverse, return_counts);
  }
  check_unique_dtype(self, "unique_dim");
  return unique_dim_impl(self, *dim, false, return_inverse, return_counts);
}

// ---- searchsorted / bucketize ---------------------------------------------------------

Tensor &searchsorted_into(Tensor &result, const Tensor &boundaries, const Tensor &input, bool out_int32, bool right,
                          std::optional<std::string_view> side, const std::optional<Tensor> &sorter_opt) {
  c10::DeviceGuard guard(input.device());
  Tensor sorter = sorter_opt.has_value() ? *sorter_opt : Tensor();
  at::native::searchsorted_pre_check(boundaries, input, result, out_int32, right, side, sorter);
  at::native::resize_output(result, input.sizes());
  if (input.numel() == 0) return result;
  bool is_right = side ? *side == "right" : right;
  Tensor ti, tb, ts;
  at::native::searchsorted_maybe_trim_input_tensors(ti, tb, ts, input, boundaries, sorter);
  const Tensor &in = ti.defined() ? ti : input;
  const Tensor &bd = tb.defined() ? tb : boundaries;
  const Tensor &so = ts.defined() ? ts : sorter;
  // The CPU's kernel dispatches on the (promoted) input dtype once there is
  // something to search, even with no boundaries: no bool or complex form.
  TORCH_CHECK_NOT_IMPLEMENTED(in.scalar_type() != at::kBool && !in.is_complex(),
                              "\"searchsorted_out_cpu\" not implemented for '", in.scalar_type(), "'");
  int64_t nb = bd.size(-1);
  if (nb == 0) {
    result.zero_();
    return result;
  }
  int64_t cols = in.dim() == 0 ? 1 : in.size(-1), rows = in.numel() / cols;
  Tensor out = result.is_contiguous() ? result : at::empty(result.sizes(), result.options());
  Tensor in2 = in.reshape({rows, cols}), out2 = out.view({rows, cols});
  Tensor bd2 = bd.dim() == 1 ? bd.reshape({1, nb}) : bd.reshape({rows, nb});
  nrt_launch d = new_desc(NRT_OP(SEARCHSORTED), 1, so.defined() ? 3 : 2);
  d.ndim = 2;
  d.sizes[0] = rows;
  d.sizes[1] = cols;
  set_op(d, 0, out2, {0, 1});
  set_op(d, 1, in2, {0, 1});
  set_op(d, 2, bd2, {bd.dim() == 1 ? -1 : 0, 1});
  if (so.defined()) {
    Tensor so2 = so.dim() == 1 ? so.reshape({1, nb}) : so.reshape({rows, nb});
    set_op(d, 3, so2, {so.dim() == 1 ? -1 : 0, 1});
  }
  d.compute_dtype = d.operands[1].dtype;
  d.params[0] = is_right ? 1 : 0;
  d.params[1] = nb;
  launch(input.device().index(), d);
  if (!out.is_same(result)) result.copy_(out);
  return result;
}

at::ScalarType index_type(bool out_int32) { return out_int32 ? at::kInt : at::kLong; }

// A new result is int64 (int32 with out_int32); out= keeps its tensor.
Tensor searchsorted_tensor_into(Tensor out, const Tensor &boundaries, const Tensor &self, bool out_int32, bool right,
                                std::optional<std::string_view> side, const std::optional<Tensor> &sorter) {
  if (!out.defined()) out = at::empty({0}, self.options().dtype(index_type(out_int32)));
  return searchsorted_into(out, boundaries, self, out_int32, right, side, sorter);
}
Tensor searchsorted_scalar_into(Tensor out, const Tensor &boundaries, const Scalar &self, bool out_int32, bool right,
                                std::optional<std::string_view> side, const std::optional<Tensor> &sorter) {
  return searchsorted_tensor_into(out, boundaries, at::native::searchsorted_scalar_tensor(self, boundaries.device()),
                                  out_int32, right, side, sorter);
}
Tensor bucketize_into(Tensor out, const Tensor &self, const Tensor &boundaries, bool out_int32, bool right) {
  if (!out.defined()) out = at::empty({0}, self.options().dtype(index_type(out_int32)));
  TORCH_CHECK(boundaries.dim() == 1, "boundaries tensor must be 1 dimension, but got dim(", boundaries.dim(), ")");
  return searchsorted_into(out, boundaries, self, out_int32, right, std::nullopt, std::nullopt);
}
Tensor bucketize_scalar(const Scalar &self, const Tensor &boundaries, bool out_int32, bool right) {
  return bucketize_into(Tensor(), at::native::searchsorted_scalar_tensor(self, boundaries.device()), boundaries,
                        out_int32, right);
}

// ---- repeat_interleave / nonzero_static --------------------------------------------------

Tensor repeat_interleave_fn(const Tensor &repeats, std::optional<int64_t> output_size) {
  c10::DeviceGuard guard(repeats.device());
  TORCH_CHECK(repeats.dim() == 1, "repeat_interleave only accept 1D vector as repeat");
  TORCH_CHECK(repeats.scalar_type() == at::kLong || repeats.scalar_type() == at::kInt,
              "repeats has to be Long or Int tensor");
  if (repeats.size(0) == 0) return at::empty_like(repeats, at::MemoryFormat::Contiguous);
  // One read back: the total and the smallest repeat (CPU checks both).
  Tensor stats = at::stack({repeats.sum(at::kLong), repeats.min().to(at::kLong)}).cpu();
  int64_t sum = stats[0].item<int64_t>(), lo = stats[1].item<int64_t>();
  TORCH_CHECK(lo >= 0, "repeats can not be negative");
  int64_t total = output_size ? *output_size : sum;
  TORCH_CHECK(total == sum, "allocated size does not match required size");
  Tensor result = at::empty({total}, repeats.options().dtype(at::kLong));
  if (total > 0) {
    nrt_launch d = new_desc(NRT_OP(REPEAT_INTERLEAVE), 1, 1);
    d.ndim = 1;
    d.sizes[0] = repeats.size(0);
    set_op(d, 0, result, {0});
    set_op(d, 1, repeats, {0});
    d.compute_dtype = NRT_INT64;
    d.params[0] = total;
    launch(repeats.device().index(), d);
  }
  return repeats.scalar_type() == at::kLong ? result : result.to(repeats.scalar_type());
}

Tensor nonzero_static_fn(const Tensor &self, int64_t size, int64_t fill_value) {
  c10::DeviceGuard guard(self.device());
  TORCH_CHECK(size >= 0, "nonzero_static: 'size' must be an non-negative integer");
  TORCH_CHECK(self.dim() <= NRT_MAX_DIMS, "nonzero_static supports at most ", NRT_MAX_DIMS, " dims on neuron");
  // column-major, as the meta function lays out every accelerator's result (CUDA's convention)
  Tensor out = at::empty_strided({size, self.dim()}, {1, size}, self.options().dtype(at::kLong));
  if (size == 0 || self.dim() == 0) {
    // A 0-d input has no coordinates to write (columns = 0).
    return out;
  }
  if (self.numel() == 0) return out.fill_(fill_value);
  nrt_launch d = new_desc(NRT_OP(NONZERO_STATIC), 1, 1);
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < self.dim(); ++i) dims.push_back(i);
  set_sizes(d, self, dims);
  set_op(d, 0, out, {0, 1});
  set_op(d, 1, self, dims);
  d.compute_dtype = d.operands[1].dtype;
  d.params[0] = size;
  d.scalars[0].i = fill_value;
  launch(self.device().index(), d);
  return out;
}

// ---- histograms -----------------------------------------------------------------------------
enum { HG_BINARY = 0, HG_LINEAR = 1, HG_LINEAR_LOCAL = 2 };

// Counts points [N, D] into hist (D dims, sized by the edges) with the
// given bin selection; hist is fully written.
void histogram_launch(Tensor &hist, const Tensor &pts, const std::vector<Tensor> &edges,
                      const std::optional<Tensor> &weight, int64_t algo) {
  int64_t N = pts.size(0), D = pts.size(1);
  TORCH_CHECK(D <= NRT_MAX_DIMS, "histogramdd supports at most ", NRT_MAX_DIMS, " dimensions on neuron");
  if (hist.numel() == 0) return;
  if (N == 0 || D == 0) {
    hist.zero_();
    return;
  }
  Tensor cat = at::cat(edges);
  nrt_launch d = new_desc(NRT_OP(HISTOGRAM), 1, weight.has_value() ? 3 : 2);
  d.ndim = 2;
  d.sizes[0] = N;
  d.sizes[1] = D;
  std::vector<int64_t> hdims;
  for (int64_t i = 0; i < D; ++i) hdims.push_back(i);
  set_op(d, 0, hist, hdims);
  set_op(d, 1, pts, {0, 1});
  set_op(d, 2, cat, {0});
  if (weight.has_value()) set_op(d, 3, *weight, {0});
  for (int64_t i = 0; i < D; ++i) d.aux[i] = edges[i].numel();
  d.compute_dtype = d.operands[1].dtype;
  d.params[0] = algo;
  launch(pts.device().index(), d);
}

void histogram_density(Tensor &hist, const std::vector<Tensor> &edges) {
  hist.div_(hist.sum());
  int64_t D = static_cast<int64_t>(edges.size());
  for (int64_t dim = 0; dim < D; ++dim) {
    std::vector<int64_t> shape(D, 1);
    Tensor len = edges[dim].diff();
    shape[dim] = len.numel();
    hist.div_(len.reshape(shape));
  }
}

// ATen's histogramdd_check_inputs, with its messages.
void histogramdd_check_inputs(const Tensor &input, const std::vector<Tensor> &bins,
                              const std::optional<Tensor> &weight) {
  TORCH_CHECK(input.dim() >= 2, "torch.histogramdd: input tensor should have at least 2 dimensions, but got ",
              input.dim());
  const int64_t N = input.size(-1);
  TORCH_CHECK(static_cast<int64_t>(bins.size()) == N, "torch.histogramdd: expected ", N,
              " sequences of bin edges for a ", N, "-dimensional histogram but got ", bins.size());
  for (int64_t dim = 0; dim < N; ++dim) {
    const Tensor &b = bins[dim];
    TORCH_CHECK(input.dtype() == b.dtype(), "torch.histogramdd: input tensor and bins tensors should",
                " have the same dtype, but got input with dtype ", input.dtype(), " and bins for dimension ", dim,
                " with dtype ", b.dtype());
    TORCH_CHECK(b.dim() == 1, "torch.histogramdd: bins tensor should have one dimension,", " but got ", b.dim(),
                " dimensions in the bins tensor for dimension ", dim);
    TORCH_CHECK(b.numel() > 0, "torch.histogramdd: bins tensor should have at least 1 element,", " but got ",
                b.numel(), " elements in the bins tensor for dimension ", dim);
  }
  if (weight.has_value()) {
    TORCH_CHECK(input.dtype() == weight->dtype(), "torch.histogramdd: if weight tensor is provided,",
                " input tensor and weight tensor should have the same dtype, but got input(", input.dtype(), ")",
                ", and weight(", weight->dtype(), ")");
    auto in_sizes = input.sizes().vec();
    in_sizes.pop_back();
    auto w_sizes = weight->sizes().vec();
    if (w_sizes.empty()) w_sizes = {1};
    TORCH_CHECK(in_sizes == w_sizes, "torch.histogramdd: if weight tensor is provided it should have",
                " the same shape as the input tensor excluding its innermost dimension, but got input with shape ",
                input.sizes(), " and weight with shape ", weight->sizes());
  }
}

void check_bin_cts(const Tensor &input, c10::IntArrayRef bin_ct) {
  for (size_t dim = 0; dim < bin_ct.size(); ++dim)
    TORCH_CHECK(bin_ct[dim] > 0, "torch.histogram(): bins must be > 0, but got ", bin_ct[dim], " for dimension ",
                dim);
  (void)input;
}

// ATen's select_outer_bin_edges: the range, or each dim's min and max
// (read back once), an empty range widened by 0.5 each side.
std::pair<std::vector<double>, std::vector<double>> outer_bin_edges(const Tensor &x2,
                                                                    std::optional<c10::ArrayRef<double>> range) {
  const int64_t N = x2.size(-1);
  std::vector<double> lo(N, 0.), hi(N, 1.);
  if (range.has_value()) {
    TORCH_CHECK(static_cast<int64_t>(range->size()) == 2 * N, "torch.histogramdd: for a ", N,
                "-dimensional histogram", " range should have ", 2 * N, " elements, but got ", range->size());
    for (int64_t dim = 0; dim < N; ++dim) {
      lo[dim] = (*range)[2 * dim];
      hi[dim] = (*range)[2 * dim + 1];
    }
  } else if (x2.numel() > 0) {
    auto [mn, mx] = at::aminmax(x2, 0);
    Tensor host = at::stack({mn, mx}).cpu();
    for (int64_t dim = 0; dim < N; ++dim) {
      lo[dim] = host[0][dim].item<double>();
      hi[dim] = host[1][dim].item<double>();
    }
  }
  for (int64_t dim = 0; dim < N; ++dim) {
    TORCH_CHECK(std::isfinite(lo[dim]) && std::isfinite(hi[dim]), "torch.histogramdd: dimension ", dim,
                "'s range [", lo[dim], ", ", hi[dim], "] is not finite");
    TORCH_CHECK(lo[dim] <= hi[dim], "torch.histogramdd: min should not exceed max, but got", " min ", lo[dim],
                " max ", hi[dim], " for dimension ", dim);
    if (lo[dim] == hi[dim]) {
      lo[dim] -= 0.5;
      hi[dim] += 0.5;
    }
  }
  return {lo, hi};
}

Tensor flat_points(const Tensor &self) {
  const int64_t N = self.size(-1);
  return self.reshape({N == 0 ? 0 : self.numel() / N, N});
}

std::vector<Tensor> histogramdd_bin_edges_fn(const Tensor &self, c10::IntArrayRef bin_ct,
                                             std::optional<c10::ArrayRef<double>> range,
                                             const std::optional<Tensor> &weight, bool density) {
  c10::DeviceGuard guard(self.device());
  TORCH_CHECK(self.dim() >= 2, "torch.histogramdd: input tensor should have at least 2 dimensions");
  check_floating(self, "histogramdd");
  Tensor x2 = flat_points(self);
  auto outer = outer_bin_edges(x2, range);
  const int64_t N = self.size(-1);
  TORCH_CHECK(N == static_cast<int64_t>(bin_ct.size()),
              "histogramdd: The size of bins must be equal to the innermost dimension of the input.");
  std::vector<Tensor> edges;
  for (int64_t dim = 0; dim < N; ++dim)
    edges.push_back(at::linspace(outer.first[dim], outer.second[dim], bin_ct[dim] + 1, self.options()));
  (void)weight;
  (void)density;
  return edges;
}

Tensor histogramdd_run(const Tensor &self, const std::vector<Tensor> &edges, const std::optional<Tensor> &weight,
                       bool density, int64_t algo) {
  check_floating(self, "histogramdd");
  histogramdd_check_inputs(self, edges, weight);
  std::vector<int64_t> shape;
  for (auto &e : edges) shape.push_back(e.numel() - 1);
  Tensor hist = at::empty(shape, self.options());
  Tensor x2 = flat_points(self);
  std::optional<Tensor> w;
  if (weight.has_value()) w = weight->reshape({x2.size(0)});
  std::vector<Tensor> contig;
  for (auto &e : edges) contig.push_back(e.contiguous());
  histogram_launch(hist, x2, contig, w, algo);
  if (density) histogram_density(hist, edges);
  return hist;
}

Tensor histogramdd_from_bin_cts_fn(const Tensor &self, c10::IntArrayRef bin_ct,
                                   std::optional<c10::ArrayRef<double>> range, const std::optional<Tensor> &weight,
                                   bool density) {
  c10::DeviceGuard guard(self.device());
  auto edges = histogramdd_bin_edges_fn(self, bin_ct, range, weight, density);
  check_bin_cts(self, bin_ct);
  return histogramdd_run(self, edges, weight, density, HG_LINEAR_LOCAL);
}

Tensor histogramdd_from_bin_tensors_fn(const Tensor &self, at::TensorList bins, const std::optional<Tensor> &weight,
                                       bool density) {
  c10::DeviceGuard guard(self.device());
  return histogramdd_run(self, bins.vec(), weight, density, HG_BINARY);
}

std::tuple<Tensor, Tensor> histogram_bin_ct(const Tensor &self, int64_t bin_ct,
                                            std::optional<c10::ArrayRef<double>> range,
                                            const std::optional<Tensor> &weight, bool density) {
  c10::DeviceGuard guard(self.device());
  Tensor x2 = self.reshape({self.numel(), 1});
  std::optional<Tensor> w;
  if (weight.has_value()) w = weight->reshape({weight->numel()});
  check_floating(self, "histogramdd");
  check_bin_cts(self, {bin_ct});
  auto outer = outer_bin_edges(x2, range);
  Tensor edges = at::linspace(outer.first[0], outer.second[0], bin_ct + 1, self.options());
  Tensor hist = histogramdd_run(x2, {edges}, w, density, HG_LINEAR_LOCAL);
  return {hist, edges};
}

std::tuple<Tensor, Tensor> histogram_bins_tensor(const Tensor &self, const Tensor &bins,
                                                 const std::optional<Tensor> &weight, bool density) {
  c10::DeviceGuard guard(self.device());
  Tensor x2 = self.reshape({self.numel(), 1});
  std::optional<Tensor> w;
  if (weight.has_value()) w = weight->reshape({weight->numel()});
  Tensor edges = bins.clone(at::MemoryFormat::Contiguous);
  Tensor hist = histogramdd_run(x2, {edges}, w, density, HG_BINARY);
  return {hist, edges};
}

// out= forms: the functional result resized and copied into the outputs
// (ATen checks the outputs' dtypes the same way).
// histogram's out= overloads check the outputs' dtypes with their own
// messages before copying: hand-written, not Variants.
std::tuple<Tensor &, Tensor &> copy_hist_out(std::tuple<Tensor, Tensor> r, Tensor &hist, Tensor &bin_edges) {
  auto &[h, e] = r;
  TORCH_CHECK(hist.dtype() == h.dtype(), "torch.histogram: input tensor and hist tensor should",
              " have the same dtype, but got input ", h.dtype(), " and hist ", hist.dtype());
  TORCH_CHECK(bin_edges.dtype() == e.dtype(), "torch.histogram: input tensor and bin_edges tensor should",
              " have the same dtype, but got input ", e.dtype(), " and bin_edges ", bin_edges.dtype(),
              " for dimension 0");
  at::native::resize_output(hist, h.sizes());
  at::native::resize_output(bin_edges, e.sizes());
  hist.copy_(h);
  bin_edges.copy_(e);
  return std::forward_as_tuple(hist, bin_edges);
}
std::tuple<Tensor &, Tensor &> histogram_bin_ct_out(const Tensor &self, int64_t bin_ct,
                                                    std::optional<c10::ArrayRef<double>> range,
                                                    const std::optional<Tensor> &weight, bool density, Tensor &hist,
                                                    Tensor &bin_edges) {
  return copy_hist_out(histogram_bin_ct(self, bin_ct, range, weight, density), hist, bin_edges);
}
std::tuple<Tensor &, Tensor &> histogram_bins_tensor_out(const Tensor &self, const Tensor &bins,
                                                         const std::optional<Tensor> &weight, bool density,
                                                         Tensor &hist, Tensor &bin_edges) {
  return copy_hist_out(histogram_bins_tensor(self, bins, weight, density), hist, bin_edges);
}

// histc's outer edges: min/max, else the data's extremes (read back), an
// empty range widened by 1 (float types: at least one ulp of the type).
std::pair<double, double> histc_edges(const Tensor &self, const Scalar &min, const Scalar &max) {
  double lo = min.to<double>(), hi = max.to<double>();
  if (lo == hi && self.numel() > 0) {
    auto [mn, mx] = at::aminmax(self);
    Tensor host = at::stack({mn, mx}).cpu();
    lo = host[0].item<double>();
    hi = host[1].item<double>();
  }
  if (lo == hi) {
    if (self.scalar_type() == at::kFloat) {
      lo = std::min(static_cast<double>(std::nextafter(static_cast<float>(lo), std::numeric_limits<float>::lowest())),
                    lo - 1.);
      hi = std::max(static_cast<double>(std::nextafter(static_cast<float>(hi), std::numeric_limits<float>::max())),
                    hi + 1.);
    } else if (self.scalar_type() == at::kDouble) {
      lo = std::min(std::nextafter(lo, std::numeric_limits<double>::lowest()), lo - 1.);
      hi = std::max(std::nextafter(hi, std::numeric_limits<double>::max()), hi + 1.);
    } else {
      lo -= 1;
      hi += 1;
    }
  }
  TORCH_CHECK(!(std::isinf(lo) || std::isinf(hi) || std::isnan(lo) || std::isnan(hi)), "torch.histc: range of [", lo,
              ", ", hi, "] is not finite");
  TORCH_CHECK(lo < hi, "torch.histc: max must be larger than min");
  return {lo, hi};
}

Tensor histc_into(Tensor out, const Tensor &self, int64_t bins, const Scalar &min, const Scalar &max) {
  c10::DeviceGuard guard(self.device());
  if (!out.defined()) out = at::empty({0}, self.options());
  TORCH_CHECK(self.dtype() == out.dtype(), "torch.histogram: input tensor and hist tensor should",
              " have the same dtype, but got input ", self.dtype(), " and hist ", out.dtype());
  TORCH_CHECK(bins > 0, "torch.histogram(): bins must be > 0, but got ", bins, " for dimension 0");
  check_floating(self, "histc");
  at::native::resize_output(out, {bins});
  auto [lo, hi] = histc_edges(self, min, max);
  Tensor edges = at::linspace(lo, hi, bins + 1, self.options());
  Tensor x2 = self.reshape({self.numel(), 1});
  histogram_launch(out, x2, {edges}, std::nullopt, HG_LINEAR);
  if (x2.size(0) == 0) out.zero_();
  return out;
}

Tensor &nonzero_static_out(const Tensor &self, int64_t size, int64_t fill_value, Tensor &out) {
  TORCH_CHECK(out.scalar_type() == at::kLong, "nonzero_static: Expected out tensor to have scalar type Long but got scalar type",
              out.scalar_type());
  Tensor r = nonzero_static_fn(self, size, fill_value);
  at::native::resize_output(out, r.sizes());
  return out.copy_(r);
}

// ---- compositions ------------------------------------------------------------------------

std::tuple<Tensor, Tensor> aminmax_into(Tensor min, Tensor max, const Tensor &self, std::optional<int64_t> dim,
                                        bool keepdim) {
  if (!min.defined()) {
    min = at::empty({0}, self.options());
    max = at::empty({0}, self.options());
  }
  // After the meta's shape checks, the CPU's kernels refuse complex inputs:
  // the dim-wise one with its own RuntimeError for a 0-d input, the
  // dispatch (NotImplementedError) otherwise.
  auto check_not_complex = [&] {
    TORCH_CHECK(!(self.is_complex() && dim.has_value() && self.dim() == 0), "aminmax not implemented for ",
                self.scalar_type());
    TORCH_CHECK_NOT_IMPLEMENTED(!self.is_complex(), "\"aminmax_cpu\" not implemented for '", self.scalar_type(), "'");
  };
  if (dim.has_value()) {
    at::native::zero_numel_check_dims(self, at::maybe_wrap_dim(*dim, self.dim(), true), "aminmax");
    check_not_complex();
    at::amin_out(min, self, {*dim}, keepdim);
    at::amax_out(max, self, {*dim}, keepdim);
  } else {
    TORCH_CHECK(self.numel() > 0,
                "aminmax(): cannot compute aminmax over an empty dimension as the operation has no identity.");
    check_not_complex();
    at::amin_out(min, self, {}, keepdim);
    at::amax_out(max, self, {}, keepdim);
  }
  return {min, max};
}

Tensor count_nonzero_fn(const Tensor &self, c10::IntArrayRef dims) {
  return self.ne(0).sum(dims, /*keepdim=*/false, at::kLong);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  NEURON_IMPL(m, "_cummax_helper", cummax_helper);
  NEURON_IMPL(m, "_cummin_helper", cummin_helper);
  NEURON_VARIANTS(m, logcumsumexp_into, "_logcumsumexp", nullptr, "_logcumsumexp.out");
  NEURON_IMPL(m, "kthvalue.values", kthvalue_out);
  NEURON_IMPL(m, "median", median_fn);
  NEURON_IMPL(m, "median.dim_values", median_dim_out);
  NEURON_IMPL(m, "nanmedian", nanmedian_fn);
  NEURON_IMPL(m, "nanmedian.dim_values", nanmedian_dim_out);
  NEURON_VARIANTS(m, mode_into, "mode", nullptr, "mode.values");
  NEURON_IMPL(m, "_unique", unique_fn);
  NEURON_IMPL(m, "_unique2", unique2_fn);
  NEURON_IMPL(m, "unique_dim", unique_dim_fn);
  NEURON_IMPL(m, "unique_consecutive", unique_consecutive_fn);
  NEURON_IMPL(m, "unique_dim_consecutive", unique_dim_consecutive_fn);
  NEURON_VARIANTS(m, searchsorted_tensor_into, "searchsorted.Tensor", nullptr, "searchsorted.Tensor_out");
  NEURON_VARIANTS(m, searchsorted_scalar_into, "searchsorted.Scalar", nullptr, "searchsorted.Scalar_out");
  NEURON_VARIANTS(m, bucketize_into, "bucketize.Tensor", nullptr, "bucketize.Tensor_out");
  NEURON_IMPL(m, "bucketize.Scalar", bucketize_scalar);
  NEURON_IMPL(m, "repeat_interleave.Tensor", repeat_interleave_fn);
  NEURON_IMPL(m, "nonzero_static", nonzero_static_fn);
  NEURON_IMPL(m, "nonzero_static.out", nonzero_static_out);
  NEURON_VARIANTS(m, aminmax_into, "aminmax", nullptr, "aminmax.out");
  NEURON_IMPL(m, "count_nonzero.dim_IntList", count_nonzero_fn);
  NEURON_VARIANTS(m, histc_into, "histc", nullptr, "histc.out");
  NEURON_IMPL(m, "histogram.bin_ct", histogram_bin_ct);
  NEURON_IMPL(m, "histogram.bins_tensor", histogram_bins_tensor);
  NEURON_IMPL(m, "histogram.bin_ct_out", histogram_bin_ct_out);
  NEURON_IMPL(m, "histogram.bins_tensor_out", histogram_bins_tensor_out);
  NEURON_IMPL(m, "_histogramdd_bin_edges", histogramdd_bin_edges_fn);
  NEURON_IMPL(m, "_histogramdd_from_bin_cts", histogramdd_from_bin_cts_fn);
  NEURON_IMPL(m, "_histogramdd_from_bin_tensors", histogramdd_from_bin_tensors_fn);
}

}  // namespace torch_neuronx
