// Native pooling (max / avg / adaptive, 2-d and 3-d, with their backward
// passes; the 1-d ops decompose onto the 2-d ones in ATen) and channel
// normalisation (batch norm in training and eval, group norm, backward).
// Shapes, defaults and errors follow ATen's functions of the same name; the
// runtime's POOL kernels (kernels/pooling.c) and CHANNEL_NORM kernels
// (kernels/channel_norm.c) compute everything else.
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/core/DeviceGuard.h>

#include "iter_launch.h"
#include "registry.h"
#include "nrt/ops/norm.h"
#include "nrt/ops/pooling.h"

namespace torch_neuronx {
namespace {

using at::Tensor;
using c10::IntArrayRef;

void put_vec(nrt_operand &o, const Tensor &t) {
  o.data = const_cast<void *>(t.const_data_ptr());
  o.dtype = to_nrt_dtype(t.scalar_type());
  o.strides[0] = t.dim() == 0 ? 0 : t.stride(0) * static_cast<int64_t>(t.element_size());
}

void check_float(const Tensor &t, const char *op) {
  TORCH_CHECK(at::isFloatingType(t.scalar_type()), "\"", op, "\" not implemented for '", t.scalar_type(), "'");
  if (t.scalar_type() == at::kDouble) warn_float64_once();
}

// ---- pooling ------------------------------------------------------------------

// Window parameters in 3 dims (d, h, w); an nsp-d op fills the last nsp.
struct Win {
  int64_t k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, p[3] = {0, 0, 0}, d[3] = {1, 1, 1};
};

int64_t pick(IntArrayRef a, int64_t j, int64_t nsp, const char *op, const char *what) {
  TORCH_CHECK(a.size() == 1 || static_cast<int64_t>(a.size()) == nsp, op, ": ", what,
              " must either be a single int, or a tuple of ", nsp, " ints");
  return a.size() == 1 ? a[0] : a[static_cast<size_t>(j)];
}

Win make_win(int64_t nsp, IntArrayRef kernel, IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation,
             const char *op) {
  Win w;
  for (int64_t j = 0; j < nsp; ++j) {
    int64_t t = 3 - nsp + j;
    w.k[t] = pick(kernel, j, nsp, op, "kernel_size");
    w.s[t] = stride.empty() ? w.k[t] : pick(stride, j, nsp, op, "stride");
    w.p[t] = pick(padding, j, nsp, op, "padding");
    w.d[t] = dilation.empty() ? 1 : pick(dilation, j, nsp, op, "dilation");
    TORCH_CHECK(w.k[t] > 0, op, ": kernel size should be greater than zero, but got kernel_size=", kernel);
    TORCH_CHECK(w.s[t] > 0, op, ": stride should be greater than zero, but got stride=", stride);
    TORCH_CHECK(w.d[t] > 0, op, ": dilation should be greater than zero, but got dilation=", dilation);
    TORCH_CHECK(w.p[t] >= 0 && w.p[t] <= ((w.k[t] - 1) * w.d[t] + 1) / 2,
                "pad should be at most half of effective kernel size, but got pad=", w.p[t],
                ", kernel_size=", w.k[t], " and dilation=", w.d[t]);
  }
  return w;
}

// ATen's pooling_output_shape: the last window must start inside the input
// or its left padding.
int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  int64_t num = in + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  int64_t o = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (ceil_mode && (o - 1) * s >= in + p) --o;
  return o;
}

// Dtypes the CPU kernels accept (and so do we): max pooling any real type
// but bool; avg pooling floats and int64; adaptive pooling floats.
enum class Dtypes { kMax, kAvg, kFloat };

void check_dtype(const Tensor &t, Dtypes allowed, const char *op) {
  at::ScalarType st = t.scalar_type();
  bool ok = at::isFloatingType(st) || (allowed == Dtypes::kMax && at::isIntegralType(st, false)) ||
            (allowed == Dtypes::kAvg && st == at::kLong);
  TORCH_CHECK(ok, "\"", op, "\" not implemented for '", st, "'");
  if (st == at::kDouble) warn_float64_once();
}

// Checks the input (nsp + 1 or nsp + 2 dims, non-empty non-batch dims) and
// returns it with a batch dim.
Tensor batched_input(const Tensor &self, int64_t nsp, const char *op, Dtypes allowed) {
  TORCH_CHECK(self.dim() == nsp + 1 || self.dim() == nsp + 2, op, ": Expected ", nsp + 1, "D or ", nsp + 2,
              "D (batch mode) tensor for input, but got: ", self.sizes());
  for (int64_t j = self.dim() == nsp + 2 ? 1 : 0; j < self.dim(); ++j)
    TORCH_CHECK(self.size(j) > 0, op, ": Expected input's non-batch dimensions to have positive length, but input has "
                "a shape of ", self.sizes(), " and non-batch dimension ", self.size(j), " has length zero!");
  check_dtype(self, allowed, op);
  return self.dim() == nsp + 1 ? self.unsqueeze(0) : self;
}

at::TensorOptions act_options(const Tensor &like) {
  return like.options().memory_format(like.suggest_memory_format());
}

// Output shape of a batched input with spatial extents `o` (nsp of 3 used).
std::vector<int64_t> out_shape(const Tensor &xb, int64_t nsp, const int64_t o[3], bool unbatched) {
  std::vector<int64_t> shape;
  if (!unbatched) shape.push_back(xb.size(0));
  shape.push_back(xb.size(1));
  for (int64_t j = 3 - nsp; j < 3; ++j) shape.push_back(o[j]);
  return shape;
}

// out0 (and out1) are batched views of the outputs; `inb` is the batched
// tensor holding the input-shaped side (x, or grad_x for backward).
void launch_pool(nrt_op op, const Win &w, bool adaptive, const Tensor &in_side, const Tensor &out_side,
                 std::initializer_list<const Tensor *> outs, std::initializer_list<const Tensor *> ins,
                 int64_t count_include_pad = 0, int64_t divisor = 0) {
  int64_t nsp = in_side.dim() - 2;
  nrt_launch d = new_launch(op);
  d.ndim = 11;
  d.sizes[0] = in_side.size(0);
  d.sizes[1] = in_side.size(1);
  for (int64_t j = 0; j < 3; ++j) {
    bool used = j >= 3 - nsp;
    d.sizes[2 + j] = used ? out_side.size(2 + j - (3 - nsp)) : 1;
    d.sizes[5 + j] = used ? in_side.size(2 + j - (3 - nsp)) : 1;
    d.sizes[8 + j] = w.k[j];
    d.aux[j] = w.s[j];
    d.aux[3 + j] = w.p[j];
    d.aux[6 + j] = w.d[j];
  }
  int k = 0;
  for (const Tensor *t : outs) set_operand_5d(d.operands[k++], *t);
  d.noutputs = k;
  for (const Tensor *t : ins) set_operand_5d(d.operands[k++], *t);
  d.ninputs = k - d.noutputs;
  d.compute_dtype = to_nrt_dtype(in_side.scalar_type());
  d.params[0] = adaptive ? 1 : 0;
  d.params[1] = count_include_pad;
  d.params[2] = divisor;
  int64_t numel = 1;
  for (int j = 0; j < 11; ++j) numel *= d.sizes[j];
  if (numel == 0) return;
  launch(in_side.device().index(), d);
}

// Resizes an out= tensor to `shape` (keeping its memory when it fits).
void resize_out(const Tensor &out, IntArrayRef shape, const Tensor &like, at::ScalarType dtype) {
  TORCH_CHECK(out.scalar_type() == dtype, "Expected out tensor to have dtype ", dtype, ", but got ",
              out.scalar_type(), " instead");
  TORCH_CHECK(out.device() == like.device(), "Expected out tensor on ", like.device(), ", but got ", out.device());
  if (out.sizes() != shape) out.resize_(shape, like.suggest_memory_format());
}

Tensor batch_view(const Tensor &t, bool unbatched) { return unbatched ? t.unsqueeze(0) : t; }

// -- max pool (fixed windows) --
void max_pool_into(int64_t nsp, const Tensor &self, IntArrayRef kernel, IntArrayRef stride, IntArrayRef padding,
                   IntArrayRef dilation, bool ceil_mode, const Tensor *out, const Tensor *idx, Tensor *rout,
                   Tensor *ridx) {
  const char *op = nsp == 2 ? "max_pool2d" : "max_pool3d";
  c10::DeviceGuard guard(self.device());
  Tensor xb = batched_input(self, nsp, op, Dtypes::kMax);
  bool unbatched = xb.dim() != self.dim();
  Win w = make_win(nsp, kernel, stride, padding, dilation, op);
  int64_t o[3] = {1, 1, 1};
  for (int64_t j = 3 - nsp; j < 3; ++j) {
    o[j] = pool_out(xb.size(2 + j - (3 - nsp)), w.k[j], w.s[j], w.p[j], w.d[j], ceil_mode);
    TORCH_CHECK(o[j] > 0, "Given input size: (", self.sizes(), "). Calculated output size: (", o[j],
                "). Output size is too small");
  }
  auto shape = out_shape(xb, nsp, o, unbatched);
  Tensor y, ix;
  if (out) {
    resize_out(*out, shape, self, self.scalar_type());
    resize_out(*idx, shape, self, at::kLong);
    y = *out;
    ix = *idx;
  } else {
    y = at::empty(shape, act_options(self));
    ix = at::empty(shape, act_options(self).dtype(at::kLong));
  }
  Tensor yb = batch_view(y, unbatched), ib = batch_view(ix, unbatched);
  launch_pool(NRT_OP(MAX_POOL), w, false, xb, yb, {&yb, &ib}, {&xb});
  *rout = y;
  *ridx = ix;
}

std::tuple<Tensor, Tensor> max_pool2d_fn(const Tensor &self, IntArrayRef kernel, IntArrayRef stride,
                                         IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  Tensor y, i;
  max_pool_into(2, self, kernel, stride, padding, dilation, ceil_mode, nullptr, nullptr, &y, &i);
  return {y, i};
}
std::tuple<Tensor &, Tensor &> max_pool2d_out(const Tensor &self, IntArrayRef kernel, IntArrayRef stride,
                                              IntArrayRef padding, IntArrayRef dilation, bool ceil_mode, Tensor &out,
                                              Tensor &indices) {
  Tensor y, i;
  max_pool_into(2, self, kernel, stride, padding, dilation, ceil_mode, &out, &indices, &y, &i);
  return {out, indices};
}
std::tuple<Tensor, Tensor> max_pool3d_fn(const Tensor &self, IntArrayRef kernel, IntArrayRef stride,
                                         IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  Tensor y, i;
  max_pool_into(3, self, kernel, stride, padding, dilation, ceil_mode, nullptr, nullptr, &y, &i);
  return {y, i};
}
std::tuple<Tensor &, Tensor &> max_pool3d_out(const Tensor &self, IntArrayRef kernel, IntArrayRef stride,
                                              IntArrayRef padding, IntArrayRef dilation, bool ceil_mode, Tensor &out,
                                              Tensor &indices) {
  Tensor y, i;
  max_pool_into(3, self, kernel, stride, padding, dilation, ceil_mode, &out, &indices, &y, &i);
  return {out, indices};
}

// -- backward of max pools (fixed and adaptive): scatter through indices --
Tensor &max_pool_backward_into(int64_t nsp, const Tensor &grad_output, const Tensor &self, const Tensor &indices,
                               Tensor &gi) {
  check_dtype(self, Dtypes::kFloat, nsp == 2 ? "max_pool2d_backward" : "max_pool3d_backward");
  c10::DeviceGuard guard(self.device());
  bool unbatched = self.dim() == nsp + 1;
  TORCH_CHECK(grad_output.sizes() == indices.sizes(), "max_pool backward: grad_output ", grad_output.sizes(),
              " and indices ", indices.sizes(), " differ in shape");
  Tensor gy = grad_output.scalar_type() == self.scalar_type() ? grad_output : grad_output.to(self.scalar_type());
  Tensor gib = batch_view(gi, unbatched), gyb = batch_view(gy, unbatched), ib = batch_view(indices, unbatched);
  Win w;
  launch_pool(NRT_OP(MAX_POOL_BACKWARD), w, false, gib, gyb, {&gib}, {&gyb, &ib});
  return gi;
}

Tensor max_pool2d_backward_fn(const Tensor &grad_output, const Tensor &self, IntArrayRef, IntArrayRef, IntArrayRef,
                              IntArrayRef, bool, const Tensor &indices) {
  Tensor gi = at::empty(self.sizes(), act_options(self));
  return max_pool_backward_into(2, grad_output, self, indices, gi);
}
Tensor &max_pool2d_backward_out(const Tensor &grad_output, const Tensor &self, IntArrayRef, IntArrayRef,
                                IntArrayRef, IntArrayRef, bool, const Tensor &indices, Tensor &gi) {
  resize_out(gi, self.sizes(), self, self.scalar_type());
  return max_pool_backward_into(2, grad_output, self, indices, gi);
}
Tensor max_pool3d_backward_fn(const Tensor &grad_output, const Tensor &self, IntArrayRef, IntArrayRef, IntArrayRef,
                              IntArrayRef, bool, const Tensor &indices) {
  Tensor gi = at::empty(self.sizes(), act_options(self));
  return max_pool_backward_into(3, grad_output, self, indices, gi);
}
Tensor &max_pool3d_backward_out(const Tensor &grad_output, const Tensor &self, IntArrayRef, IntArrayRef,
                                IntArrayRef, IntArrayRef, bool, const Tensor &indices, Tensor &gi) {
  resize_out(gi, self.sizes(), self, self.scalar_type());
  return max_pool_backward_into(3, grad_output, self, indices, gi);
}
Tensor adaptive_max_pool2d_backward_fn(const Tensor &grad_output, const Tensor &self, const Tensor &indices) {
  Tensor gi = at::empty(self.sizes(), act_options(self));
  return max_pool_backward_into(2, grad_output, self, indices, gi);
}
Tensor &adaptive_max_pool2d_backward_out(const Tensor &grad_output, const Tensor &self, const Tensor &indices,
                                         Tensor &gi) {
  resize_out(gi, self.sizes(), self, self.scalar_type());
  return max_pool_backward_into(2, grad_output, self, indices, gi);
}
Tensor adaptive_max_pool3d_backward_fn(const Tensor &grad_output, const Tensor &self, const Tensor &indices) {
  Tensor gi = at::empty(self.sizes(), act_options(self));
  return max_pool_backward_into(3, grad_output, self, indices, gi);
}
Tensor &adaptive_max_pool3d_backward_out(const Tensor &grad_output, const Tensor &self, const Tensor &indices,
                                         Tensor &gi) {
  resize_out(gi, self.sizes(), self, self.scalar_type());
  return max_pool_backward_into(3, grad_output, self, indices, gi);
}

// -- avg pool (fixed windows) --
Win avg_win(int64_t nsp, IntArrayRef kernel, IntArrayRef stride, IntArrayRef padding,
            std::optional<int64_t> divisor_override, const char *op) {
  TORCH_CHECK(!divisor_override || *divisor_override != 0, op, ": divisor must be not zero");
  return make_win(nsp, kernel, stride, padding, {}, op);
}

Tensor &avg_pool_into(int64_t nsp, const Tensor &self, IntArrayRef kernel, IntArrayRef stride, IntArrayRef padding,
                      bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor, Tensor *out,
                      Tensor &result) {
  const char *op = nsp == 2 ? "avg_pool2d" : "avg_pool3d";
  c10::DeviceGuard guard(self.device());
  Tensor xb = batched_input(self, nsp, op, Dtypes::kAvg);
  bool unbatched = xb.dim() != self.dim();
  Win w = avg_win(nsp, kernel, stride, padding, divisor, op);
  int64_t o[3] = {1, 1, 1};
  for (int64_t j = 3 - nsp; j < 3; ++j) {
    o[j] = pool_out(xb.size(2 + j - (3 - nsp)), w.k[j], w.s[j], w.p[j], 1, ceil_mode);
    TORCH_CHECK(o[j] > 0, "Given input size: (", self.sizes(), "). Calculated output size: (", o[j],
                "). Output size is too small");
  }
  auto shape = out_shape(xb, nsp, o, unbatched);
  if (out) {
    resize_out(*out, shape, self, self.scalar_type());
    result = *out;
  } else {
    result = at::empty(shape, act_options(self));
  }
  Tensor yb = batch_view(result, unbatched);
  launch_pool(NRT_OP(AVG_POOL), w, false, xb, yb, {&yb}, {&xb}, count_include_pad ? 1 : 0, divisor.value_or(0));
  return result;
}

Tensor avg_pool2d_fn(const Tensor &self, IntArrayRef kernel, IntArrayRef stride, IntArrayRef padding, bool ceil_mode,
                     bool count_include_pad, std::optional<int64_t> divisor) {
  Tensor r;
  return avg_pool_into(2, self, kernel, stride, padding, ceil_mode, count_include_pad, divisor, nullptr, r);
}
Tensor &avg_pool2d_out(const Tensor &self, IntArrayRef kernel, IntArrayRef stride, IntArrayRef padding,
                       bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor, Tensor &out) {
  Tensor r;
  avg_pool_into(2, self, kernel, stride, padding, ceil_mode, count_include_pad, divisor, &out, r);
  return out;
}
Tensor avg_pool3d_fn(const Tensor &self, IntArrayRef kernel, IntArrayRef stride, IntArrayRef padding, bool ceil_mode,
                     bool count_include_pad, std::optional<int64_t> divisor) {
  Tensor r;
  return avg_pool_into(3, self, kernel, stride, padding, ceil_mode, count_include_pad, divisor, nullptr, r);
}
Tensor &avg_pool3d_out(const Tensor &self, IntArrayRef kernel, IntArrayRef stride, IntArrayRef padding,
                       bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor, Tensor &out) {
  Tensor r;
  avg_pool_into(3, self, kernel, stride, padding, ceil_mode, count_include_pad, divisor, &out, r);
  return out;
}

Tensor &avg_pool_backward_into(int64_t nsp, const Tensor &grad_output, const Tensor &self, IntArrayRef kernel,
                               IntArrayRef stride, IntArrayRef padding, bool count_include_pad,
                               std::optional<int64_t> divisor, Tensor &gi) {
  const char *op = nsp == 2 ? "avg_pool2d_backward" : "avg_pool3d_backward";
  check_dtype(self, Dtypes::kFloat, op);
  c10::DeviceGuard guard(self.device());
  bool unbatched = self.dim() == nsp + 1;
  Win w = avg_win(nsp, kernel, stride, padding, divisor, op);
  Tensor gy = grad_output.scalar_type() == self.scalar_type() ? grad_output : grad_output.to(self.scalar_type());
  Tensor gib = batch_view(gi, unbatched), gyb = batch_view(gy, unbatched);
  launch_pool(NRT_OP(AVG_POOL_BACKWARD), w, false, gib, gyb, {&gib}, {&gyb}, count_include_pad ? 1 : 0,
              divisor.value_or(0));
  return gi;
}

Tensor avg_pool2d_backward_fn(const Tensor &grad_output, const Tensor &self, IntArrayRef kernel, IntArrayRef stride,
                              IntArrayRef padding, bool, bool count_include_pad, std::optional<int64_t> divisor) {
  Tensor gi = at::empty(self.sizes(), act_options(self));
  return avg_pool_backward_into(2, grad_output, self, kernel, stride, padding, count_include_pad, divisor, gi);
}
Tensor &avg_pool2d_backward_out(const Tensor &grad_output, const Tensor &self, IntArrayRef kernel, IntArrayRef stride,
                                IntArrayRef padding, bool, bool count_include_pad, std::optional<int64_t> divisor,
                                Tensor &gi) {
  resize_out(gi, self.sizes(), self, self.scalar_type());
  return avg_pool_backward_into(2, grad_output, self, kernel, stride, padding, count_include_pad, divisor, gi);
}
Tensor avg_pool3d_backward_fn(const Tensor &grad_output, const Tensor &self, IntArrayRef kernel, IntArrayRef stride,
                              IntArrayRef padding, bool, bool count_include_pad, std::optional<int64_t> divisor) {
  Tensor gi = at::empty(self.sizes(), act_options(self));
  return avg_pool_backward_into(3, grad_output, self, kernel, stride, padding, count_include_pad, divisor, gi);
}
Tensor &avg_pool3d_backward_out(const Tensor &grad_output, const Tensor &self, IntArrayRef kernel, IntArrayRef stride,
                                IntArrayRef padding, bool, bool count_include_pad, std::optional<int64_t> divisor,
                                Tensor &gi) {
  resize_out(gi, self.sizes(), self, self.scalar_type());
  return avg_pool_backward_into(3, grad_output, self, kernel, stride, padding, count_include_pad, divisor, gi);
}

// -- adaptive pools --
void adaptive_shape(int64_t nsp, IntArrayRef output_size, int64_t o[3], const char *op) {
  TORCH_CHECK(static_cast<int64_t>(output_size.size()) == nsp, op, ": output_size must be ", nsp, "D");
  o[0] = o[1] = o[2] = 1;
  for (int64_t j = 0; j < nsp; ++j) {
    TORCH_CHECK(output_size[static_cast<size_t>(j)] >= 0, op, ": elements of output_size must be greater than or equal to 0 but received ",
                output_size);
    o[3 - nsp + j] = output_size[static_cast<size_t>(j)];
  }
}

Tensor &adaptive_avg_into(int64_t nsp, const Tensor &self, IntArrayRef output_size, Tensor *out, Tensor &result) {
  const char *op = nsp == 2 ? "adaptive_avg_pool2d" : "adaptive_avg_pool3d";
  c10::DeviceGuard guard(self.device());
  Tensor xb = batched_input(self, nsp, op, Dtypes::kFloat);
  bool unbatched = xb.dim() != self.dim();
  int64_t o[3];
  adaptive_shape(nsp, output_size, o, op);
  auto shape = out_shape(xb, nsp, o, unbatched);
  if (out) {
    resize_out(*out, shape, self, self.scalar_type());
    result = *out;
  } else {
    result = at::empty(shape, act_options(self));
  }
  Tensor yb = batch_view(result, unbatched);
  launch_pool(NRT_OP(AVG_POOL), Win(), true, xb, yb, {&yb}, {&xb});
  return result;
}

Tensor adaptive_avg2d_fn(const Tensor &self, IntArrayRef output_size) {
  Tensor r;
  return adaptive_avg_into(2, self, output_size, nullptr, r);
}
Tensor &adaptive_avg2d_out(const Tensor &self, IntArrayRef output_size, Tensor &out) {
  Tensor r;
  adaptive_avg_into(2, self, output_size, &out, r);
  return out;
}
Tensor adaptive_avg3d_fn(const Tensor &self, IntArrayRef output_size) {
  Tensor r;
  return adaptive_avg_into(3, self, output_size, nullptr, r);
}
Tensor &adaptive_avg3d_out(const Tensor &self, IntArrayRef output_size, Tensor &out) {
  Tensor r;
  adaptive_avg_into(3, self, output_size, &out, r);
  return out;
}

Tensor adaptive_avg_backward(int64_t nsp, const Tensor &grad_output, const Tensor &self) {
  check_dtype(self, Dtypes::kFloat, nsp == 2 ? "adaptive_avg_pool2d_backward" : "adaptive_avg_pool3d_backward");
  c10::DeviceGuard guard(self.device());
  bool unbatched = self.dim() == nsp + 1;
  Tensor gi = at::empty(self.sizes(), act_options(self));
  Tensor gy = grad_output.scalar_type() == self.scalar_type() ? grad_output : grad_output.to(self.scalar_type());
  Tensor gib = batch_view(gi, unbatched), gyb = batch_view(gy, unbatched);
  launch_pool(NRT_OP(AVG_POOL_BACKWARD), Win(), true, gib, gyb, {&gib}, {&gyb});
  return gi;
}
Tensor adaptive_avg2d_backward_fn(const Tensor &grad_output, const Tensor &self) {
  return adaptive_avg_backward(2, grad_output, self);
}
Tensor adaptive_avg3d_backward_fn(const Tensor &grad_output, const Tensor &self) {
  return adaptive_avg_backward(3, grad_output, self);
}

void adaptive_max_into(int64_t nsp, const Tensor &self, IntArrayRef output_size, const Tensor *out, const Tensor *idx,
                       Tensor *rout, Tensor *ridx) {
  const char *op = nsp == 2 ? "adaptive_max_pool2d" : "adaptive_max_pool3d";
  c10::DeviceGuard guard(self.device());
  Tensor xb = batched_input(self, nsp, op, Dtypes::kFloat);
  bool unbatched = xb.dim() != self.dim();
  int64_t o[3];
  adaptive_shape(nsp, output_size, o, op);
  auto shape = out_shape(xb, nsp, o, unbatched);
  Tensor y, ix;
  if (out) {
    resize_out(*out, shape, self, self.scalar_type());
    resize_out(*idx, shape, self, at::kLong);
    y = *out;
    ix = *idx;
  } else {
    y = at::empty(shape, act_options(self));
    ix = at::empty(shape, act_options(self).dtype(at::kLong));
  }
  Tensor yb = batch_view(y, unbatched), ib = batch_view(ix, unbatched);
  launch_pool(NRT_OP(MAX_POOL), Win(), true, xb, yb, {&yb, &ib}, {&xb});
  *rout = y;
  *ridx = ix;
}
std::tuple<Tensor, Tensor> adaptive_max2d_fn(const Tensor &self, IntArrayRef output_size) {
  Tensor y, i;
  adaptive_max_into(2, self, output_size, nullptr, nullptr, &y, &i);
  return {y, i};
}
std::tuple<Tensor &, Tensor &> adaptive_max2d_out(const Tensor &self, IntArrayRef output_size, Tensor &out,
                                                  Tensor &indices) {
  Tensor y, i;
  adaptive_max_into(2, self, output_size, &out, &indices, &y, &i);
  return {out, indices};
}
std::tuple<Tensor, Tensor> adaptive_max3d_fn(const Tensor &self, IntArrayRef output_size) {
  Tensor y, i;
  adaptive_max_into(3, self, output_size, nullptr, nullptr, &y, &i);
  return {y, i};
}
std::tuple<Tensor &, Tensor &> adaptive_max3d_out(const Tensor &self, IntArrayRef output_size, Tensor &out,
                                                  Tensor &indices) {
  Tensor y, i;
  adaptive_max_into(3, self, output_size, &out, &indices, &y, &i);
  return {out, indices};
}

// ---- channel normalisation ---------------------------------------------------------

// Byte strides {n, c, s} of an [N, C, *] tensor whose spatial dims collapse
// into one run; false if they do not.
bool ncs_strides(const Tensor &t, int64_t st[3]) {
  int64_t es = static_cast<int64_t>(t.element_size());
  st[0] = t.stride(0) * es;
  st[1] = t.dim() > 1 ? t.stride(1) * es : 0;
  st[2] = es;
  int64_t inner_stride = -1, inner_size = 1;
  for (int64_t j = t.dim() - 1; j >= 2; --j) {
    if (t.size(j) == 1) continue;
    if (inner_stride < 0) {
      inner_stride = t.stride(j);
      st[2] = inner_stride * es;
    } else if (t.stride(j) != inner_stride * inner_size) {
      return false;
    }
    inner_size *= t.size(j);
  }
  return true;
}

// The [N, C, S] operand of an activation (made contiguous when its spatial
// dims do not collapse).
Tensor ncs(const Tensor &t) {
  int64_t st[3];
  return ncs_strides(t, st) ? t : t.contiguous();
}

void put_ncs(nrt_operand &o, const Tensor &t) {
  int64_t st[3];
  bool ok = ncs_strides(t, st);
  TORCH_INTERNAL_ASSERT(ok, "neuron channel norm: spatial dims do not collapse");
  o.data = const_cast<void *>(t.const_data_ptr());
  o.dtype = to_nrt_dtype(t.scalar_type());
  for (int j = 0; j < 3; ++j) o.strides[j] = st[j];
}

int64_t spatial(const Tensor &t) {
  int64_t s = 1;
  for (int64_t j = 2; j < t.dim(); ++j) s *= t.size(j);
  return s;
}

bool defined(const std::optional<Tensor> &t) { return t && t->defined(); }

// Statistics dtype: float32 when a reduced-precision input meets float32
// parameters (ATen's mixed type), else the input's.
at::ScalarType stat_type(const Tensor &input, std::initializer_list<const std::optional<Tensor> *> params) {
  if (at::isReducedFloatingType(input.scalar_type()))
    for (auto *p : params)
      if (defined(*p) && (*p)->scalar_type() == at::kFloat) return at::kFloat;
  return input.scalar_type();
}

std::tuple<Tensor, Tensor, Tensor> bn_forward(const Tensor &input, const std::optional<Tensor> &weight,
                                              const std::optional<Tensor> &bias,
                                              const std::optional<Tensor> &running_mean,
                                              const std::optional<Tensor> &running_var, bool training,
                                              double momentum, double eps) {
  check_float(input, "batch_norm");
  TORCH_CHECK(input.dim() >= 2, "batch_norm: expected at least 2-D input, got ", input.dim(), "-D");
  TORCH_CHECK(input.numel() > 0, "input tensor must have at least one element, but got input_sizes = ",
              input.sizes());
  c10::DeviceGuard guard(input.device());
  int64_t n = input.size(0), c = input.size(1), s = spatial(input);
  at::ScalarType st = stat_type(input, {&weight, &bias, &running_mean, &running_var});
  Tensor x = ncs(input);
  Tensor y = at::empty_like(input, act_options(input));
  bool has_w = defined(weight), has_b = defined(bias);
  for (const auto *p : {&weight, &bias, &running_mean, &running_var})
    TORCH_CHECK(!defined(*p) || (*p)->numel() == c, "batch_norm: expected ", c, " channel parameters, got ",
                (*p)->sizes());
  nrt_launch d;
  std::memset(&d, 0, sizeof d);
  d.ndim = 3;
  d.sizes[0] = n;
  d.sizes[1] = c;
  d.sizes[2] = s;
  d.compute_dtype = to_nrt_dtype(input.scalar_type());
  d.scalars[0].f = eps;
  d.scalars[1].f = momentum;
  d.params[1] = (has_w ? 1 : 0) | (has_b ? 2 : 0);
  Tensor mean, invstd;
  int k = 0;
  put_ncs(d.operands[k++], y);
  if (training) {
    TORCH_CHECK(defined(running_mean) == defined(running_var),
                "batch_norm: running_mean and running_var must both be given or both be None");
    mean = at::empty({c}, input.options().dtype(st));
    invstd = at::empty({c}, input.options().dtype(st));
    d.op = NRT_OP(BATCH_NORM);
    put_vec(d.operands[k++], mean);
    put_vec(d.operands[k++], invstd);
    if (defined(running_mean)) {
      put_vec(d.operands[k++], *running_mean);
      put_vec(d.operands[k++], *running_var);
    }
    d.noutputs = k;
    put_ncs(d.operands[k++], x);
  } else {
    TORCH_CHECK(defined(running_mean) && defined(running_var),
                "batch_norm: running_mean and running_var must be defined in evaluation mode");
    mean = at::empty({0}, input.options().dtype(st));
    invstd = at::empty({0}, input.options().dtype(st));
    d.op = NRT_OP(BATCH_NORM_EVAL);
    d.noutputs = k;
    put_ncs(d.operands[k++], x);
    put_vec(d.operands[k++], *running_mean);
    put_vec(d.operands[k++], *running_var);
  }
  if (has_w) put_vec(d.operands[k++], *weight);
  if (has_b) put_vec(d.operands[k++], *bias);
  d.ninputs = k - d.noutputs;
  launch(input.device().index(), d);
  return {y, mean, invstd};
}

std::tuple<Tensor, Tensor, Tensor> native_bn_fn(const Tensor &input, const std::optional<Tensor> &weight,
                                                const std::optional<Tensor> &bias,
                                                const std::optional<Tensor> &running_mean,
                                                const std::optional<Tensor> &running_var, bool training,
                                                double momentum, double eps) {
  return bn_forward(input, weight, bias, running_mean, running_var, training, momentum, eps);
}
std::tuple<Tensor, Tensor, Tensor> bn_legit_fn(const Tensor &input, const std::optional<Tensor> &weight,
                                               const std::optional<Tensor> &bias, Tensor &running_mean,
                                               Tensor &running_var, bool training, double momentum, double eps) {
  return bn_forward(input, weight, bias, running_mean, running_var, training, momentum, eps);
}
std::tuple<Tensor, Tensor, Tensor> bn_legit_no_stats_fn(const Tensor &input, const std::optional<Tensor> &weight,
                                                        const std::optional<Tensor> &bias, bool training,
                                                        double momentum, double eps) {
  return bn_forward(input, weight, bias, std::nullopt, std::nullopt, training, momentum, eps);
}
std::tuple<Tensor, Tensor, Tensor> bn_legit_no_training_fn(const Tensor &input, const std::optional<Tensor> &weight,
                                                           const std::optional<Tensor> &bias,
                                                           const Tensor &running_mean, const Tensor &running_var,
                                                           double momentum, double eps) {
  return bn_forward(input, weight, bias, running_mean, running_var, false, momentum, eps);
}
std::tuple<Tensor, Tensor, Tensor, Tensor> bn_with_update_fn(const Tensor &input, const std::optional<Tensor> &weight,
                                                             const std::optional<Tensor> &bias, Tensor &running_mean,
                                                             Tensor &running_var, double momentum, double eps) {
  auto [y, m, v] = bn_forward(input, weight, bias, running_mean, running_var, true, momentum, eps);
  return {y, m, v, at::empty({0}, input.options().dtype(at::kByte))};
}

std::tuple<Tensor, Tensor, Tensor> bn_backward(const Tensor &grad_out, const Tensor &input,
                                               const std::optional<Tensor> &weight,
                                               const std::optional<Tensor> &running_mean,
                                               const std::optional<Tensor> &running_var,
                                               const std::optional<Tensor> &save_mean,
                                               const std::optional<Tensor> &save_invstd, bool train, double eps,
                                               std::array<bool, 3> mask) {
  check_float(input, "batch_norm_backward");
  c10::DeviceGuard guard(input.device());
  int64_t n = input.size(0), c = input.size(1), s = spatial(input);
  const std::optional<Tensor> &mean = train ? save_mean : running_mean;
  const std::optional<Tensor> &stat = train ? save_invstd : running_var;
  TORCH_CHECK(defined(mean) && defined(stat), "batch_norm_backward: ",
              train ? "save_mean and save_invstd" : "running_mean and running_var", " must be defined");
  Tensor gi, gw, gb;
  if (!(mask[0] || mask[1] || mask[2])) return {gi, gw, gb};
  at::ScalarType pt = defined(weight) ? weight->scalar_type() : stat_type(input, {&running_mean});
  if (mask[0]) gi = at::empty_like(input, act_options(input));
  if (mask[1]) gw = at::empty({c}, input.options().dtype(pt));
  if (mask[2]) gb = at::empty({c}, input.options().dtype(pt));
  if (input.numel() == 0) {
    if (mask[1]) gw.zero_();
    if (mask[2]) gb.zero_();
    return {gi, gw, gb};
  }
  Tensor x = ncs(input);
  Tensor gy = grad_out.scalar_type() == input.scalar_type() ? grad_out : grad_out.to(input.scalar_type());
  gy = ncs(gy);
  nrt_launch d = new_launch(NRT_OP(BATCH_NORM_BACKWARD));
  d.ndim = 3;
  d.sizes[0] = n;
  d.sizes[1] = c;
  d.sizes[2] = s;
  d.compute_dtype = to_nrt_dtype(input.scalar_type());
  d.scalars[0].f = eps;
  d.params[0] = (mask[0] ? 1 : 0) | (mask[1] ? 2 : 0) | (mask[2] ? 4 : 0);
  d.params[1] = defined(weight) ? 1 : 0;
  d.params[2] = train ? 1 : 0;
  int k = 0;
  if (mask[0]) put_ncs(d.operands[k++], gi);
  if (mask[1]) put_vec(d.operands[k++], gw);
  if (mask[2]) put_vec(d.operands[k++], gb);
  d.noutputs = k;
  put_ncs(d.operands[k++], gy);
  put_ncs(d.operands[k++], x);
  put_vec(d.operands[k++], *mean);
  put_vec(d.operands[k++], *stat);
  if (defined(weight)) put_vec(d.operands[k++], *weight);
  d.ninputs = k - d.noutputs;
  launch(input.device().index(), d);
  return {gi, gw, gb};
}

std::tuple<Tensor, Tensor, Tensor> native_bn_backward_fn(const Tensor &grad_out, const Tensor &input,
                                                         const std::optional<Tensor> &weight,
                                                         const std::optional<Tensor> &running_mean,
                                                         const std::optional<Tensor> &running_var,
                                                         const std::optional<Tensor> &save_mean,
                                                         const std::optional<Tensor> &save_invstd, bool train,
                                                         double eps, std::array<bool, 3> mask) {
  return bn_backward(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, train, eps, mask);
}
std::tuple<Tensor, Tensor, Tensor> bn_backward_fn(const Tensor &grad_out, const Tensor &input, const Tensor &weight,
                                                  const std::optional<Tensor> &running_mean,
                                                  const std::optional<Tensor> &running_var,
                                                  const std::optional<Tensor> &save_mean,
                                                  const std::optional<Tensor> &save_var, bool update, double eps,
                                                  std::array<bool, 3> mask, const Tensor &) {
  return bn_backward(grad_out, input, weight, running_mean, running_var, save_mean, save_var, update, eps, mask);
}

std::tuple<Tensor, Tensor, Tensor> group_norm_fn(const Tensor &input, const std::optional<Tensor> &weight,
                                                 const std::optional<Tensor> &bias, int64_t n, int64_t c,
                                                 int64_t hxw, int64_t group, double eps) {
  check_float(input, "group_norm");
  c10::DeviceGuard guard(input.device());
  TORCH_CHECK(group > 0 && c % group == 0, "Expected number of channels in input to be divisible by num_groups, but "
              "got input of shape ", input.sizes(), " and num_groups=", group);
  TORCH_CHECK(input.numel() == n * c * hxw, "group_norm: input ", input.sizes(), " is not N=", n, " C=", c,
              " HxW=", hxw);
  at::ScalarType st = stat_type(input, {&weight, &bias});
  Tensor y = at::empty_like(input, act_options(input));
  Tensor mean = at::empty({n, group}, input.options().dtype(st));
  Tensor rstd = at::empty({n, group}, input.options().dtype(st));
  if (input.numel() == 0) return {y, mean, rstd};
  // [N, C, HxW] views
  Tensor x3 = ncs(input.dim() >= 2 ? input : input.view({n, c}));
  bool has_w = defined(weight), has_b = defined(bias);
  nrt_launch d = new_launch(NRT_OP(GROUP_NORM));
  d.ndim = 4;
  d.sizes[0] = n;
  d.sizes[1] = group;
  d.sizes[2] = c / group;
  d.sizes[3] = hxw;
  d.compute_dtype = to_nrt_dtype(input.scalar_type());
  d.scalars[0].f = eps;
  d.params[1] = (has_w ? 1 : 0) | (has_b ? 2 : 0);
  put_ncs(d.operands[0], y);
  nrt_operand &m = d.operands[1], &r = d.operands[2];
  for (auto [o, t] : {std::pair<nrt_operand *, Tensor *>{&m, &mean}, {&r, &rstd}}) {
    o->data = t->data_ptr();
    o->dtype = to_nrt_dtype(t->scalar_type());
    o->strides[0] = t->stride(0) * static_cast<int64_t>(t->element_size());
    o->strides[1] = t->stride(1) * static_cast<int64_t>(t->element_size());
  }
  d.noutputs = 3;
  int k = 3;
  put_ncs(d.operands[k++], x3);
  if (has_w) put_vec(d.operands[k++], *weight);
  if (has_b) put_vec(d.operands[k++], *bias);
  d.ninputs = k - 3;
  launch(input.device().index(), d);
  return {y, mean, rstd};
}

std::tuple<Tensor, Tensor, Tensor> group_norm_backward_fn(const Tensor &grad_out, const Tensor &input,
                                                          const Tensor &mean, const Tensor &rstd,
                                                          const std::optional<Tensor> &weight, int64_t n, int64_t c,
                                                          int64_t hxw, int64_t group, std::array<bool, 3> mask) {
  check_float(input, "group_norm_backward");
  c10::DeviceGuard guard(input.device());
  Tensor gi, gw, gb;
  at::ScalarType pt = defined(weight) ? weight->scalar_type() : input.scalar_type();
  if (mask[0]) gi = at::empty_like(input, act_options(input));
  if (mask[1]) gw = at::empty({c}, input.options().dtype(pt));
  if (mask[2]) gb = at::empty({c}, input.options().dtype(pt));
  if (!(mask[0] || mask[1] || mask[2])) return {gi, gw, gb};
  if (input.numel() == 0) {
    if (mask[1]) gw.zero_();
    if (mask[2]) gb.zero_();
    return {gi, gw, gb};
  }
  Tensor x = ncs(input);
  Tensor gy = grad_out.scalar_type() == input.scalar_type() ? grad_out : grad_out.to(input.scalar_type());
  gy = ncs(gy);
  Tensor mean2 = mean.view({n, group}), rstd2 = rstd.view({n, group});
  nrt_launch d = new_launch(NRT_OP(GROUP_NORM_BACKWARD));
  d.ndim = 4;
  d.sizes[0] = n;
  d.sizes[1] = group;
  d.sizes[2] = c / group;
  d.sizes[3] = hxw;
  d.compute_dtype = to_nrt_dtype(input.scalar_type());
  d.params[0] = (mask[0] ? 1 : 0) | (mask[1] ? 2 : 0) | (mask[2] ? 4 : 0);
  d.params[1] = defined(weight) ? 1 : 0;
  int k = 0;
  if (mask[0]) put_ncs(d.operands[k++], gi);
  if (mask[1]) put_vec(d.operands[k++], gw);
  if (mask[2]) put_vec(d.operands[k++], gb);
  d.noutputs = k;
  put_ncs(d.operands[k++], gy);
  put_ncs(d.operands[k++], x);
  for (const Tensor *t : {&mean2, &rstd2}) {
    nrt_operand &o = d.operands[k++];
    o.data = const_cast<void *>(t->const_data_ptr());
    o.dtype = to_nrt_dtype(t->scalar_type());
    o.strides[0] = t->stride(0) * static_cast<int64_t>(t->element_size());
    o.strides[1] = t->stride(1) * static_cast<int64_t>(t->element_size());
  }
  if (defined(weight)) put_vec(d.operands[k++], *weight);
  d.ninputs = k - d.noutputs;
  launch(input.device().index(), d);
  return {gi, gw, gb};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  NEURON_IMPL(m, "max_pool2d_with_indices", max_pool2d_fn);
  NEURON_IMPL(m, "max_pool2d_with_indices.out", max_pool2d_out);
  NEURON_IMPL(m, "max_pool2d_with_indices_backward", max_pool2d_backward_fn);
  NEURON_IMPL(m, "max_pool2d_with_indices_backward.grad_input", max_pool2d_backward_out);
  NEURON_IMPL(m, "max_pool3d_with_indices", max_pool3d_fn);
  NEURON_IMPL(m, "max_pool3d_with_indices.out", max_pool3d_out);
  NEURON_IMPL(m, "max_pool3d_with_indices_backward", max_pool3d_backward_fn);
  NEURON_IMPL(m, "max_pool3d_with_indices_backward.grad_input", max_pool3d_backward_out);
  NEURON_IMPL(m, "avg_pool2d", avg_pool2d_fn);
  NEURON_IMPL(m, "avg_pool2d.out", avg_pool2d_out);
  NEURON_IMPL(m, "avg_pool2d_backward", avg_pool2d_backward_fn);
  NEURON_IMPL(m, "avg_pool2d_backward.grad_input", avg_pool2d_backward_out);
  NEURON_IMPL(m, "avg_pool3d", avg_pool3d_fn);
  NEURON_IMPL(m, "avg_pool3d.out", avg_pool3d_out);
  NEURON_IMPL(m, "avg_pool3d_backward", avg_pool3d_backward_fn);
  NEURON_IMPL(m, "avg_pool3d_backward.grad_input", avg_pool3d_backward_out);
  NEURON_IMPL(m, "_adaptive_avg_pool2d", adaptive_avg2d_fn);
  NEURON_IMPL(m, "adaptive_avg_pool2d.out", adaptive_avg2d_out);
  NEURON_IMPL(m, "_adaptive_avg_pool2d_backward", adaptive_avg2d_backward_fn);
  NEURON_IMPL(m, "_adaptive_avg_pool3d", adaptive_avg3d_fn);
  NEURON_IMPL(m, "adaptive_avg_pool3d.out", adaptive_avg3d_out);
  NEURON_IMPL(m, "_adaptive_avg_pool3d_backward", adaptive_avg3d_backward_fn);
  NEURON_IMPL(m, "adaptive_max_pool2d", adaptive_max2d_fn);
  NEURON_IMPL(m, "adaptive_max_pool2d.out", adaptive_max2d_out);
  NEURON_IMPL(m, "adaptive_max_pool2d_backward", adaptive_max_pool2d_backward_fn);
  NEURON_IMPL(m, "adaptive_max_pool2d_backward.grad_input", adaptive_max_pool2d_backward_out);
  NEURON_IMPL(m, "adaptive_max_pool3d", adaptive_max3d_fn);
  NEURON_IMPL(m, "adaptive_max_pool3d.out", adaptive_max3d_out);
  NEURON_IMPL(m, "adaptive_max_pool3d_backward", adaptive_max_pool3d_backward_fn);
  NEURON_IMPL(m, "adaptive_max_pool3d_backward.grad_input", adaptive_max_pool3d_backward_out);

  NEURON_IMPL(m, "native_batch_norm", native_bn_fn);
  NEURON_IMPL(m, "_native_batch_norm_legit", bn_legit_fn);
  NEURON_IMPL(m, "_native_batch_norm_legit.no_stats", bn_legit_no_stats_fn);
  NEURON_IMPL(m, "_native_batch_norm_legit_no_training", bn_legit_no_training_fn);
  NEURON_IMPL(m, "_batch_norm_with_update", bn_with_update_fn);
  NEURON_IMPL(m, "native_batch_norm_backward", native_bn_backward_fn);
  NEURON_IMPL(m, "batch_norm_backward", bn_backward_fn);
  NEURON_IMPL(m, "native_group_norm", group_norm_fn);
  NEURON_IMPL(m, "native_group_norm_backward", group_norm_backward_fn);
}

}  // namespace torch_neuronx
