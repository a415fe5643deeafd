// Native convolution: PyTorch's backend hooks convolution_overrideable and
// convolution_backward_overrideable (at::convolution on a PrivateUse1
// tensor selects ConvBackend::Overrideable and calls them; autograd's
// convolution_backward does the same). ATen has already checked the shapes
// and turned 1-d convolutions into 2-d ones. This file only describes the
// geometry to the runtime's CONV kernels (kernels/convolution.c):
//   forward                    CONV
//   grad_input                 CONV_BACKWARD_INPUT
//   grad_weight                CONV_BACKWARD_WEIGHT
// and a transposed convolution is the same three with input and output
// swapped: its forward is CONV_BACKWARD_INPUT of the convolution it
// transposes, its grad_input is CONV, its grad_weight CONV_BACKWARD_WEIGHT
// with the roles of grad_output and input exchanged. grad_bias is a native
// sum of grad_output.
#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>

#include "launch/launch.h"
#include "registry/variants.h"
#include "nrt/ops/conv.h"

namespace torch_neuronx {
namespace {

using at::Tensor;
using c10::IntArrayRef;

// The geometry of the (non-transposed) convolution a launch computes:
// `in` and `out` are its input and output activations.
struct ConvGeom {
  int64_t n, groups, cog, cig;
  int64_t o[3], i[3], k[3], s[3], p[3], d[3];
};

int64_t arg(IntArrayRef a, size_t j) { return a.size() == 1 ? a[0] : a[j]; }

// `nsp` spatial dims (1..3) are right-aligned into d, h, w.
ConvGeom make_geom(const Tensor &in, const Tensor &out, const Tensor &weight, IntArrayRef stride,
                   IntArrayRef padding, IntArrayRef dilation, int64_t groups) {
  int64_t nsp = weight.dim() - 2;
  TORCH_CHECK(nsp >= 1 && nsp <= 3, "neuron convolution: expected a 3-d to 5-d weight, got ", weight.dim(), "-d");
  ConvGeom g{};
  g.n = in.size(0);
  g.groups = groups;
  g.cog = weight.size(0) / groups;
  g.cig = weight.size(1);
  int64_t lead = 3 - nsp;
  for (int64_t j = 0; j < 3; ++j) {
    bool used = j >= lead;
    size_t a = static_cast<size_t>(j - lead);
    g.o[j] = used ? out.size(2 + a) : 1;
    g.i[j] = used ? in.size(2 + a) : 1;
    g.k[j] = used ? weight.size(2 + a) : 1;
    g.s[j] = used ? arg(stride, a) : 1;
    g.p[j] = used ? arg(padding, a) : 0;
    g.d[j] = used ? arg(dilation, a) : 1;
  }
  return g;
}

// operands: out, then the two inputs, then an optional bias.
void launch_conv(nrt_op op, const ConvGeom &g, const Tensor &out, const Tensor &in0, const Tensor &in1,
                 const Tensor *bias) {
  if (out.numel() == 0) return;
  nrt_launch d = new_launch(op);
  d.ndim = 13;
  int64_t sizes[13] = {g.n,    g.groups, g.cog,  g.cig,  g.o[0], g.o[1], g.o[2],
                       g.i[0], g.i[1],   g.i[2], g.k[0], g.k[1], g.k[2]};
  std::memcpy(d.sizes, sizes, sizeof sizes);
  for (int j = 0; j < 3; ++j) {
    d.aux[j] = g.s[j];
    d.aux[3 + j] = g.p[j];
    d.aux[6 + j] = g.d[j];
  }
  d.noutputs = 1;
  d.ninputs = bias ? 3 : 2;
  set_operand_5d(d.operands[0], out);
  set_operand_5d(d.operands[1], in0);
  set_operand_5d(d.operands[2], in1);
  if (bias) set_operand(d.operands[3], *bias, {0});
  d.compute_dtype = to_nrt_dtype(in0.scalar_type());
  if (in0.scalar_type() == at::kDouble) warn_float64_once();
  launch(out.device().index(), d);
}

void check_types(const Tensor &input, const Tensor &weight, const std::optional<Tensor> &bias, bool transposed,
                 IntArrayRef dilation) {
  // Floats, and integers through the kernel's loop nest (the CPU convolves
  // integers too); not bool, complex or the quantized types. The CPU's
  // kernel dispatches on the input's dtype before anything compares it with
  // the weight's (NotImplementedError for a bool input beside a half weight).
  // Its transposed and dilated kernels (slow_conv_transpose2d/3d,
  // slow_conv_dilated) take int64 as their only integer type; its plain
  // ones every integer type.
  bool dilated = false;
  for (int64_t d : dilation) dilated = dilated || d != 1;
  const char *cpu_kernel = transposed ? (input.dim() == 5 ? "slow_conv_transpose3d_out_cpu"
                                                          : "slow_conv_transpose2d_out_cpu")
                           : dilated          ? "slow_conv_dilated<>"
                           : input.dim() == 5 ? "slow_conv3d_cpu"
                                              : "slow_conv2d_cpu";
  at::ScalarType st = input.scalar_type();
  bool integer_ok = at::isIntegralType(st, false) && (st == at::kLong || (!transposed && !dilated));
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(st) || integer_ok,
                              "\"", cpu_kernel, "\" not implemented for '", st, "'");
  TORCH_CHECK(input.scalar_type() == weight.scalar_type(), "Input type (", input.scalar_type(),
              ") and weight type (", weight.scalar_type(), ") should be the same");
  TORCH_CHECK(!bias || !bias->defined() || bias->scalar_type() == input.scalar_type(), "Input type (",
              input.scalar_type(), ") and bias type (", bias->scalar_type(), ") should be the same");
  TORCH_CHECK(input.dim() == weight.dim() && input.dim() >= 3 && input.dim() <= 5,
              "neuron convolution: expected a batched 3-d to 5-d input matching the weight, got input ",
              input.sizes(), " and weight ", weight.sizes());
}

// Activations come out channels-last when the input or the weight is, as
// from PyTorch's CPU (oneDNN) convolutions; contiguous otherwise.
Tensor empty_act(IntArrayRef shape, const Tensor &input, const Tensor &weight) {
  auto fmt = input.suggest_memory_format();
  auto wfmt = weight.suggest_memory_format();
  if (fmt == at::MemoryFormat::Contiguous && wfmt != at::MemoryFormat::Contiguous) fmt = wfmt;
  return at::empty(shape, input.options().memory_format(fmt));
}

// The CPU's slow_conv_transpose{2,3}d shape check, made before its kernel
// dispatches on the dtype: every output size at least 1 (a 1-d
// convolution reports itself as 2-d with a height of 1). The CPU's oneDNN
// path, which it always takes for bfloat16 and usually for float32, returns
// an empty result for an output size of 0 instead; neuron does that for
// those two dtypes (allowances.py lists the float32 inputs whose CPU path is
// the native one).
void check_transposed_output(const Tensor &input, IntArrayRef out_sizes) {
  at::ScalarType st = input.scalar_type();
  int64_t least = st == at::kFloat || st == at::kBFloat16 ? 0 : 1;
  bool fits = true;
  for (int64_t o : out_sizes) fits = fits && o >= least;
  if (fits) return;
  std::vector<int64_t> in(input.sizes().begin() + 2, input.sizes().end()), out(out_sizes.begin(), out_sizes.end());
  if (in.size() == 1) {
    in.insert(in.begin(), 1);
    out.insert(out.begin(), 1);
  }
  auto join = [](const std::vector<int64_t> &v) {
    std::string s;
    for (size_t j = 0; j < v.size(); ++j) s += (j ? " x " : "") + std::to_string(v[j]);
    return s;
  };
  TORCH_CHECK(false, "Given input size per channel: (", join(in), "). Calculated output size per channel: (",
              join(out), "). Output size is too small");
}

Tensor conv_fn(const Tensor &input, const Tensor &weight, const std::optional<Tensor> &bias, IntArrayRef stride,
               IntArrayRef padding, IntArrayRef dilation, bool transposed, IntArrayRef output_padding,
               int64_t groups) {
  int64_t nsp = input.dim() - 2;
  std::vector<int64_t> shape{input.size(0), 0};
  for (int64_t j = 0; j < nsp; ++j) {
    size_t a = static_cast<size_t>(j);
    int64_t in = input.size(2 + j), k = weight.size(2 + j);
    int64_t s = arg(stride, a), p = arg(padding, a), dl = arg(dilation, a);
    shape.push_back(transposed ? (in - 1) * s - 2 * p + dl * (k - 1) + arg(output_padding, a) + 1
                               : (in + 2 * p - dl * (k - 1) - 1) / s + 1);
  }
  if (transposed) check_transposed_output(input, IntArrayRef(shape).slice(2));
  check_types(input, weight, bias, transposed, dilation);
  c10::DeviceGuard guard(input.device());
  shape[1] = transposed ? weight.size(1) * groups : weight.size(0);
  Tensor out = empty_act(shape, input, weight);
  const Tensor *b = bias && bias->defined() ? &*bias : nullptr;
  if (!transposed) {
    launch_conv(NRT_OP(CONV), make_geom(input, out, weight, stride, padding, dilation, groups), out, input, weight, b);
  } else {
    // y = conv^T(x): the input gradient of the convolution from y-space to x-space.
    launch_conv(NRT_OP(CONV_BACKWARD_INPUT), make_geom(out, input, weight, stride, padding, dilation, groups), out,
                input, weight, b);
  }
  return out;
}

std::tuple<Tensor, Tensor, Tensor> conv_backward_fn(const Tensor &grad_output, const Tensor &input,
                                                    const Tensor &weight, IntArrayRef stride, IntArrayRef padding,
                                                    IntArrayRef dilation, bool transposed,
                                                    IntArrayRef output_padding, int64_t groups,
                                                    std::array<bool, 3> mask) {
  check_types(input, weight, std::nullopt, transposed, dilation);
  c10::DeviceGuard guard(input.device());
  Tensor gi, gw, gb;
  Tensor gy = grad_output;
  if (gy.scalar_type() != input.scalar_type()) gy = gy.to(input.scalar_type());
  // In the convolution's own geometry (transposed: from y-space to x-space).
  const Tensor &conv_in = transposed ? gy : input;
  const Tensor &conv_out = transposed ? input : gy;
  ConvGeom g = make_geom(conv_in, conv_out, weight, stride, padding, dilation, groups);
  if (mask[0]) {
    gi = empty_act(input.sizes(), input, weight);
    if (!transposed) launch_conv(NRT_OP(CONV_BACKWARD_INPUT), g, gi, gy, weight, nullptr);
    else launch_conv(NRT_OP(CONV), g, gi, gy, weight, nullptr);
  }
  if (mask[1]) {
    gw = at::empty(weight.sizes(), weight.options().memory_format(weight.suggest_memory_format()));
    // dW = corr(d(conv output), conv input)
    launch_conv(NRT_OP(CONV_BACKWARD_WEIGHT), g, gw, conv_out, conv_in, nullptr);
  }
  if (mask[2]) {
    std::vector<int64_t> dims{0};
    for (int64_t j = 2; j < grad_output.dim(); ++j) dims.push_back(j);
    gb = gy.sum(dims);
  }
  return {gi, gw, gb};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  NEURON_IMPL(m, "convolution_overrideable", conv_fn);
  NEURON_IMPL(m, "convolution_backward_overrideable", conv_backward_fn);
}

}  // namespace torch_neuronx
