// Native pooling (max / avg / adaptive, 2-d and 3-d, with their backward
// passes; the 1-d ops decompose onto the 2-d ones in ATen). Shapes,
// defaults and errors follow ATen's functions of the same name; the
// runtime's POOLING kernels compute everything else.
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/core/DeviceGuard.h>

#include "launch/launch.h"
#include "nrt/ops/pooling.h"
#include "registry/variants.h"

namespace torch_neuronx {
namespace {

using at::Tensor;
using c10::IntArrayRef;

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
  TORCH_CHECK_NOT_IMPLEMENTED(ok, "\"", op, "\" not implemented for '", st, "'");
  if (st == at::kDouble) warn_float64_once();
}

// Checks the input (nsp + 1 or nsp + 2 dims, non-empty non-batch dims) and
// returns it with a batch dim. Its dtype is checked by the caller once the
// sizes are (the CPU checks the window and output sizes before its kernel
// dispatches on the dtype).
Tensor batched_input(const Tensor &self, int64_t nsp, const char *op) {
  TORCH_CHECK(self.dim() == nsp + 1 || self.dim() == nsp + 2, op, ": Expected ", nsp + 1, "D or ", nsp + 2,
              "D (batch mode) tensor for input, but got: ", self.sizes());
  for (int64_t j = self.dim() == nsp + 2 ? 1 : 0; j < self.dim(); ++j)
    TORCH_CHECK(self.size(j) > 0, op, ": Expected input's non-batch dimensions to have positive length, but input has "
                "a shape of ", self.sizes(), " and non-batch dimension ", self.size(j), " has length zero!");
  return self.dim() == nsp + 1 ? self.unsqueeze(0) : self;
}

// Adaptive pooling's own input check (ATen's adaptive pooling metas): the
// average needs non-empty spatial dims only, the max every dim after the
// first (so an unbatched input may have no channels, a batched one no batch).
Tensor adaptive_input(const Tensor &self, int64_t nsp, bool max, const char *op) {
  TORCH_CHECK(self.dim() == nsp + 1 || self.dim() == nsp + 2, op, ": Expected ", nsp + 1, "D or ", nsp + 2,
              "D (batch mode) tensor for input, but got: ", self.sizes());
  for (int64_t j = max ? 1 : self.dim() - nsp; j < self.dim(); ++j)
    TORCH_CHECK(self.size(j) > 0, op, "(): Expected input to have non-zero size for non-batch dimensions, but input "
                "has sizes ", self.sizes(), " with dimension ", j, " being empty");
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
                 int64_t count_include_pad = 0, int64_t divisor = 0, bool adaptive3d = false) {
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
  d.params[3] = adaptive3d ? 1 : 0;
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

// An output of `shape`: the out= tensor resized, or a new one laid out like
// the input.
Tensor output_for(const Tensor &out, IntArrayRef shape, const Tensor &like, at::ScalarType dtype) {
  if (!out.defined()) return at::empty(shape, act_options(like).dtype(dtype));
  resize_out(out, shape, like, dtype);
  return out;
}

// -- max pool (fixed windows) --
template <int nsp>
std::tuple<Tensor, Tensor> max_pool_into(Tensor out, Tensor idx, const Tensor &self, IntArrayRef kernel,
                                         IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation,
                                         bool ceil_mode) {
  const char *op = nsp == 2 ? "max_pool2d" : "max_pool3d";
  c10::DeviceGuard guard(self.device());
  Tensor xb = batched_input(self, nsp, op);
  bool unbatched = xb.dim() != self.dim();
  Win w = make_win(nsp, kernel, stride, padding, dilation, op);
  int64_t o[3] = {1, 1, 1};
  for (int64_t j = 3 - nsp; j < 3; ++j) {
    o[j] = pool_out(xb.size(2 + j - (3 - nsp)), w.k[j], w.s[j], w.p[j], w.d[j], ceil_mode);
    TORCH_CHECK(o[j] > 0, "Given input size: (", self.sizes(), "). Calculated output size: (", o[j],
                "). Output size is too small");
  }
  check_dtype(self, Dtypes::kMax, op);
  auto shape = out_shape(xb, nsp, o, unbatched);
  Tensor y = output_for(out, shape, self, self.scalar_type());
  Tensor ix = output_for(idx, shape, self, at::kLong);
  Tensor yb = batch_view(y, unbatched), ib = batch_view(ix, unbatched);
  launch_pool(NRT_OP(MAX_POOL), w, false, xb, yb, {&yb, &ib}, {&xb});
  return {y, ix};
}


// -- backward of max pools (fixed and adaptive): scatter through indices --
Tensor max_pool_backward_into(int64_t nsp, const Tensor &grad_output, const Tensor &self, const Tensor &indices,
                              Tensor gi) {
  gi = output_for(gi, self.sizes(), self, self.scalar_type());
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


// The window arguments are unused: the indices say where each gradient goes.
template <int nsp>
Tensor max_pool_backward_variant(Tensor gi, const Tensor &grad_output, const Tensor &self, IntArrayRef, IntArrayRef,
                                 IntArrayRef, IntArrayRef, bool, const Tensor &indices) {
  return max_pool_backward_into(nsp, grad_output, self, indices, gi);
}
template <int nsp>
Tensor adaptive_max_backward_into(Tensor gi, const Tensor &grad_output, const Tensor &self, const Tensor &indices) {
  return max_pool_backward_into(nsp, grad_output, self, indices, gi);
}

// -- avg pool (fixed windows) --
Win avg_win(int64_t nsp, IntArrayRef kernel, IntArrayRef stride, IntArrayRef padding,
            std::optional<int64_t> divisor_override, const char *op) {
  TORCH_CHECK(!divisor_override || *divisor_override != 0, op, ": divisor must be not zero");
  return make_win(nsp, kernel, stride, padding, {}, op);
}

template <int nsp>
Tensor avg_pool_into(Tensor out, const Tensor &self, IntArrayRef kernel, IntArrayRef stride, IntArrayRef padding,
                     bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor) {
  const char *op = nsp == 2 ? "avg_pool2d" : "avg_pool3d";
  c10::DeviceGuard guard(self.device());
  Tensor xb = batched_input(self, nsp, op);
  bool unbatched = xb.dim() != self.dim();
  Win w = avg_win(nsp, kernel, stride, padding, divisor, op);
  int64_t o[3] = {1, 1, 1};
  for (int64_t j = 3 - nsp; j < 3; ++j) {
    o[j] = pool_out(xb.size(2 + j - (3 - nsp)), w.k[j], w.s[j], w.p[j], 1, ceil_mode);
    TORCH_CHECK(o[j] > 0, "Given input size: (", self.sizes(), "). Calculated output size: (", o[j],
                "). Output size is too small");
  }
  // ATen's pool3d_shape_check for avg_pool3d: the input must cover the
  // window without its padding.
  if (nsp == 3)
    TORCH_CHECK(xb.size(2) >= w.k[0] && xb.size(3) >= w.k[1] && xb.size(4) >= w.k[2], "input image (T: ", xb.size(2),
                " H: ", xb.size(3), " W: ", xb.size(4), ") smaller than kernel size (kT: ", w.k[0], " kH: ", w.k[1],
                " kW: ", w.k[2], ")");
  check_dtype(self, Dtypes::kAvg, op);
  Tensor result = output_for(out, out_shape(xb, nsp, o, unbatched), self, self.scalar_type());
  Tensor yb = batch_view(result, unbatched);
  launch_pool(NRT_OP(AVG_POOL), w, false, xb, yb, {&yb}, {&xb}, count_include_pad ? 1 : 0, divisor.value_or(0));
  return result;
}


template <int nsp>
Tensor avg_pool_backward_into(Tensor gi, const Tensor &grad_output, const Tensor &self, IntArrayRef kernel,
                              IntArrayRef stride, IntArrayRef padding, bool /*ceil_mode*/, bool count_include_pad,
                              std::optional<int64_t> divisor) {
  const char *op = nsp == 2 ? "avg_pool2d_backward" : "avg_pool3d_backward";
  gi = output_for(gi, self.sizes(), self, self.scalar_type());
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

template <int nsp>
Tensor adaptive_avg_into(Tensor out, const Tensor &self, IntArrayRef output_size) {
  const char *op = nsp == 2 ? "adaptive_avg_pool2d" : "adaptive_avg_pool3d";
  c10::DeviceGuard guard(self.device());
  Tensor xb = adaptive_input(self, nsp, false, op);
  bool unbatched = xb.dim() != self.dim();
  int64_t o[3];
  adaptive_shape(nsp, output_size, o, op);
  // The CPU's kernel returns an empty result before it dispatches on the
  // dtype (an empty int64 input is fine there); the max's dispatches first.
  auto shape = out_shape(xb, nsp, o, unbatched);
  if (c10::multiply_integers(shape) > 0) check_dtype(self, Dtypes::kFloat, op);
  Tensor result = output_for(out, shape, self, self.scalar_type());
  Tensor yb = batch_view(result, unbatched);
  // 3-d: AdaptiveAveragePooling3d.cpp's arithmetic (p3; 2-d has a kernel of its own)
  launch_pool(NRT_OP(AVG_POOL), Win(), true, xb, yb, {&yb}, {&xb}, 0, 0, nsp == 3);
  return result;
}


template <int nsp>
Tensor adaptive_avg_backward(const Tensor &grad_output, const Tensor &self) {
  const char *op = nsp == 2 ? "adaptive_avg_pool2d_backward" : "adaptive_avg_pool3d_backward";
  // ATen's adaptive_pool_empty_output_check, before the kernel's dtypes
  for (int64_t j = 1; j < grad_output.dim(); ++j)
    TORCH_CHECK(grad_output.size(j) > 0, op, "(): Expected grad_output to have non-zero size for non-batch "
                "dimensions, but grad_output has sizes ", grad_output.sizes(), " with dimension ", j, " being empty");
  check_dtype(self, Dtypes::kFloat, op);
  c10::DeviceGuard guard(self.device());
  bool unbatched = self.dim() == nsp + 1;
  Tensor gi = at::empty(self.sizes(), act_options(self));
  Tensor gy = grad_output.scalar_type() == self.scalar_type() ? grad_output : grad_output.to(self.scalar_type());
  Tensor gib = batch_view(gi, unbatched), gyb = batch_view(gy, unbatched);
  launch_pool(NRT_OP(AVG_POOL_BACKWARD), Win(), true, gib, gyb, {&gib}, {&gyb}, 0, 0, nsp == 3);
  return gi;
}

template <int nsp>
std::tuple<Tensor, Tensor> adaptive_max_into(Tensor out, Tensor idx, const Tensor &self, IntArrayRef output_size) {
  const char *op = nsp == 2 ? "adaptive_max_pool2d" : "adaptive_max_pool3d";
  c10::DeviceGuard guard(self.device());
  Tensor xb = adaptive_input(self, nsp, true, op);
  bool unbatched = xb.dim() != self.dim();
  int64_t o[3];
  adaptive_shape(nsp, output_size, o, op);
  check_dtype(self, Dtypes::kFloat, op);
  auto shape = out_shape(xb, nsp, o, unbatched);
  Tensor y = output_for(out, shape, self, self.scalar_type());
  Tensor ix = output_for(idx, shape, self, at::kLong);
  Tensor yb = batch_view(y, unbatched), ib = batch_view(ix, unbatched);
  launch_pool(NRT_OP(MAX_POOL), Win(), true, xb, yb, {&yb, &ib}, {&xb});
  return {y, ix};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  NEURON_VARIANTS(m, max_pool_into<2>, "max_pool2d_with_indices", nullptr, "max_pool2d_with_indices.out");
  NEURON_VARIANTS(m, max_pool_backward_variant<2>, "max_pool2d_with_indices_backward", nullptr,
                  "max_pool2d_with_indices_backward.grad_input");
  NEURON_VARIANTS(m, max_pool_into<3>, "max_pool3d_with_indices", nullptr, "max_pool3d_with_indices.out");
  NEURON_VARIANTS(m, max_pool_backward_variant<3>, "max_pool3d_with_indices_backward", nullptr,
                  "max_pool3d_with_indices_backward.grad_input");
  NEURON_VARIANTS(m, avg_pool_into<2>, "avg_pool2d", nullptr, "avg_pool2d.out");
  NEURON_VARIANTS(m, avg_pool_backward_into<2>, "avg_pool2d_backward", nullptr, "avg_pool2d_backward.grad_input");
  NEURON_VARIANTS(m, avg_pool_into<3>, "avg_pool3d", nullptr, "avg_pool3d.out");
  NEURON_VARIANTS(m, avg_pool_backward_into<3>, "avg_pool3d_backward", nullptr, "avg_pool3d_backward.grad_input");
  NEURON_VARIANTS(m, adaptive_avg_into<2>, "_adaptive_avg_pool2d", nullptr, "adaptive_avg_pool2d.out");
  NEURON_IMPL(m, "_adaptive_avg_pool2d_backward", adaptive_avg_backward<2>);
  NEURON_VARIANTS(m, adaptive_avg_into<3>, "_adaptive_avg_pool3d", nullptr, "adaptive_avg_pool3d.out");
  NEURON_IMPL(m, "_adaptive_avg_pool3d_backward", adaptive_avg_backward<3>);
  NEURON_VARIANTS(m, adaptive_max_into<2>, "adaptive_max_pool2d", nullptr, "adaptive_max_pool2d.out");
  NEURON_VARIANTS(m, adaptive_max_backward_into<2>, "adaptive_max_pool2d_backward", nullptr,
                  "adaptive_max_pool2d_backward.grad_input");
  NEURON_VARIANTS(m, adaptive_max_into<3>, "adaptive_max_pool3d", nullptr, "adaptive_max_pool3d.out");
  NEURON_VARIANTS(m, adaptive_max_backward_into<3>, "adaptive_max_pool3d_backward", nullptr,
                  "adaptive_max_pool3d_backward.grad_input");
}

}  // namespace torch_neuronx
