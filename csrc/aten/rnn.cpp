// Fused LSTM / GRU cells (family RNN, nrt/ops/rnn.h).
//
// How PyTorch reaches them: for a PrivateUse1 input, ATen's RNN code
// (aten/src/ATen/native/RNN.cpp) computes the gate matmuls itself (one
// GEMM over the whole sequence for x W_ih^T, one per step for h W_hh^T)
// and hands the elementwise rest of each step to _thnn_fused_lstm_cell /
// _thnn_fused_gru_cell, the ops CUDA implements; there is no CPU kernel
// for them. Autograd then calls _thnn_fused_lstm_cell_backward_impl
// (through the composite _thnn_fused_lstm_cell_backward) and
// _thnn_fused_gru_cell_backward with the forward's workspace. So nn.LSTM,
// nn.GRU (any layer count, direction, proj_size, packed or padded input)
// and the Cell modules all come down to these four ops plus GEMMs.
//
// The workspaces are CUDA's, so the backward ops also accept what any
// other implementation of the forward saved: LSTM [B, 4H] = the activated
// gates i, f, g, o; GRU [B, 5H] = r, z, n, hx, hn + b_hn. Outputs are
// allocated as the meta functions in torch/_meta_registrations.py (and
// CUDA) allocate them: contiguous, with the dtype of the tensor they are
// modelled on. Bias gradients are sums of the gate gradients over the
// batch (a native SUM), as in CUDA.
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>

#include <optional>
#include <tuple>

#include "launch/launch.h"
#include "launch/operand.h"
#include "nrt/ops/rnn.h"
#include "registry/registry.h"

namespace torch_neuronx {

using at::Tensor;

namespace {

// The fused kernels compute real floating types only; anything else is an
// unsupported feature (NotImplementedError), not a type error.
void check_dtype(const char *fn, const Tensor &t, const char *what) {
  auto st = t.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED((st == at::kHalf || st == at::kBFloat16 || st == at::kFloat || st == at::kDouble), fn, ": ", what, " has dtype ", st,
                              "; the neuron fused RNN cells support float16, bfloat16, float32 and float64");
  if (st == at::kDouble) warn_float64_once();
}

void check_device(const char *fn, const Tensor &t, const Tensor &ref, const char *what) {
  TORCH_CHECK(t.device() == ref.device(), fn, ": expected all inputs to be on the same device, but ", what, " is on ",
              t.device(), " and input_gates on ", ref.device());
}

const Tensor *defined_or_null(const std::optional<Tensor> &t) { return t && t->defined() ? &*t : nullptr; }

// The forward checks of CUDA's checkSizes (and the meta function): 2-d
// gates of equal shape whose width is `factor` gates, 1-d biases of that
// width (both or neither), a previous state with batch * hidden elements.
// Returns the hidden size.
int64_t check_cell(const char *fn, const Tensor &ig, const Tensor &hg, const Tensor *ib, const Tensor *hb,
                   int64_t factor, const Tensor &prev) {
  TORCH_CHECK(ig.dim() == 2, fn, ": expected input_gates to be 2-d, got ", ig.dim(), "-d");
  TORCH_CHECK(ig.sizes() == hg.sizes(), fn, ": input_gates ", ig.sizes(), " and hidden_gates ", hg.sizes(),
              " must have the same shape");
  int64_t gates = ig.size(1);
  TORCH_CHECK(gates % factor == 0, fn, ": the gate width ", gates, " is not a multiple of ", factor);
  TORCH_CHECK((ib == nullptr) == (hb == nullptr), fn, ": input_bias and hidden_bias must be given together");
  if (ib) {
    TORCH_CHECK(ib->dim() == 1 && ib->numel() == gates, fn, ": expected input_bias of shape [", gates, "], got ",
                ib->sizes());
    TORCH_CHECK(hb->sizes() == ib->sizes(), fn, ": input_bias ", ib->sizes(), " and hidden_bias ", hb->sizes(),
                " must have the same shape");
  }
  int64_t H = gates / factor;
  TORCH_CHECK(prev.dim() == 2 && prev.numel() == ig.size(0) * H, fn, ": expected a 2-d previous state of ",
              ig.size(0), " * ", H, " elements, got ", prev.sizes());
  check_device(fn, hg, ig, "hidden_gates");
  check_device(fn, prev, ig, "the previous state");
  if (ib) {
    check_device(fn, *ib, ig, "input_bias");
    check_device(fn, *hb, ig, "hidden_bias");
  }
  check_dtype(fn, ig, "input_gates");
  check_dtype(fn, hg, "hidden_gates");
  check_dtype(fn, prev, "the previous state");
  if (ib) {
    check_dtype(fn, *ib, "input_bias");
    check_dtype(fn, *hb, "hidden_bias");
  }
  return H;
}

// A [B, cols] operand: byte strides {row, column}. `t` is viewed as
// [B, cols] first (the CUDA kernels index every operand linearly, so a
// previous state or workspace of another 2-d shape with the right number
// of elements is accepted there too).
void put(nrt_operand &o, const Tensor &t, int64_t B, int64_t cols) {
  if (t.dim() == 2 && t.size(0) == B && t.size(1) == cols) set_operand(o, t, {0, 1});
  else set_operand(o, t.reshape({B, cols}), {0, 1});
}

// A bias vector: row stride 0.
void put_bias(nrt_operand &o, const Tensor &t) { set_operand(o, t, {-1, 0}); }

// ---- LSTM -------------------------------------------------------------------

std::tuple<Tensor, Tensor, Tensor> lstm_cell(const Tensor &input_gates, const Tensor &hidden_gates, const Tensor &cx,
                                             const std::optional<Tensor> &input_bias,
                                             const std::optional<Tensor> &hidden_bias) {
  const char *fn = "_thnn_fused_lstm_cell";
  const Tensor *ib = defined_or_null(input_bias), *hb = defined_or_null(hidden_bias);
  int64_t H = check_cell(fn, input_gates, hidden_gates, ib, hb, 4, cx);
  int64_t B = input_gates.size(0);
  c10::DeviceGuard guard(input_gates.device());
  Tensor workspace = at::empty_like(input_gates, at::MemoryFormat::Contiguous);
  Tensor hy = at::empty_like(cx, at::MemoryFormat::Contiguous);
  Tensor cy = at::empty_like(cx, at::MemoryFormat::Contiguous);
  if (B * H > 0) {
    nrt_launch d = new_launch(NRT_OP(LSTM_CELL), {B, H});
    d.compute_dtype = NRT_FLOAT32;
    d.noutputs = 3;
    d.ninputs = ib ? 5 : 3;
    put(d.operands[0], hy, B, H);
    put(d.operands[1], cy, B, H);
    put(d.operands[2], workspace, B, 4 * H);
    put(d.operands[3], input_gates, B, 4 * H);
    put(d.operands[4], hidden_gates, B, 4 * H);
    put(d.operands[5], cx, B, H);
    if (ib) {
      put_bias(d.operands[6], *ib);
      put_bias(d.operands[7], *hb);
    }
    launch(input_gates.device().index(), d);
  }
  return {hy, cy, workspace};
}

std::tuple<Tensor, Tensor, Tensor> lstm_cell_backward_impl(const std::optional<Tensor> &grad_hy_opt,
                                                           const std::optional<Tensor> &grad_cy_opt, const Tensor &cx,
                                                           const Tensor &cy, const Tensor &workspace, bool has_bias) {
  const char *fn = "_thnn_fused_lstm_cell_backward_impl";
  const Tensor *ghy = defined_or_null(grad_hy_opt), *gcy = defined_or_null(grad_cy_opt);
  if (!ghy && !gcy) return {Tensor(), Tensor(), Tensor()};
  const Tensor &grad = ghy ? *ghy : *gcy;
  TORCH_CHECK(grad.dim() == 2, fn, ": expected 2-d gradients, got ", grad.sizes());
  auto size = grad.sizes();
  TORCH_CHECK(!ghy || !gcy || gcy->sizes() == size, fn, ": grad_hy ", size, " and grad_cy ", gcy->sizes(),
              " must have the same shape");
  TORCH_CHECK(cx.sizes() == size && cy.sizes() == size, fn, ": expected cx and cy of shape ", size, ", got ",
              cx.sizes(), " and ", cy.sizes());
  int64_t B = size[0], H = size[1];
  TORCH_CHECK(workspace.dim() == 2 && workspace.numel() == B * H * 4, fn, ": expected a 2-d workspace of ", B,
              " * ", 4 * H, " elements, got ", workspace.sizes());
  for (const Tensor *t : {ghy, gcy, &cx, &cy})
    if (t) check_device(fn, *t, workspace, "a gradient or state");
  if (ghy) check_dtype(fn, *ghy, "grad_hy");
  if (gcy) check_dtype(fn, *gcy, "grad_cy");
  check_dtype(fn, cx, "cx");
  check_dtype(fn, cy, "cy");
  check_dtype(fn, workspace, "workspace");
  c10::DeviceGuard guard(workspace.device());
  Tensor grad_gates = at::empty_like(workspace, at::MemoryFormat::Contiguous);
  Tensor grad_cx = at::empty_like(cx, at::MemoryFormat::Contiguous);
  if (B * H > 0) {
    nrt_launch d = new_launch(NRT_OP(LSTM_CELL_BACKWARD), {B, H});
    d.compute_dtype = NRT_FLOAT32;
    d.noutputs = 2;
    put(d.operands[0], grad_gates, B, 4 * H);
    put(d.operands[1], grad_cx, B, H);
    int k = 2;
    if (ghy) put(d.operands[k++], *ghy, B, H);
    if (gcy) put(d.operands[k++], *gcy, B, H);
    put(d.operands[k++], cx, B, H);
    put(d.operands[k++], cy, B, H);
    put(d.operands[k++], workspace, B, 4 * H);
    d.ninputs = k - 2;
    d.params[0] = (ghy ? 1 : 0) | (gcy ? 2 : 0);
    launch(workspace.device().index(), d);
  }
  Tensor grad_bias = has_bias ? grad_gates.sum(0) : Tensor();
  return {grad_gates, grad_cx, grad_bias};
}

// ---- GRU --------------------------------------------------------------------

constexpr int64_t kGruWorkspace = 5;  // r, z, n, hx, hn + b_hn

std::tuple<Tensor, Tensor> gru_cell(const Tensor &input_gates, const Tensor &hidden_gates, const Tensor &hx,
                                    const std::optional<Tensor> &input_bias, const std::optional<Tensor> &hidden_bias) {
  const char *fn = "_thnn_fused_gru_cell";
  const Tensor *ib = defined_or_null(input_bias), *hb = defined_or_null(hidden_bias);
  int64_t H = check_cell(fn, input_gates, hidden_gates, ib, hb, 3, hx);
  int64_t B = input_gates.size(0);
  c10::DeviceGuard guard(input_gates.device());
  // CUDA shapes the workspace after hx ([hx rows, 5 * hx columns]); with
  // the usual [B, H] state that is [B, 5H].
  Tensor workspace = at::empty({hx.size(0), hx.size(1) * kGruWorkspace}, hx.options());
  Tensor hy = at::empty_like(hx, at::MemoryFormat::Contiguous);
  if (B * H > 0) {
    nrt_launch d = new_launch(NRT_OP(GRU_CELL), {B, H});
    d.compute_dtype = NRT_FLOAT32;
    d.noutputs = 2;
    d.ninputs = ib ? 5 : 3;
    put(d.operands[0], hy, B, H);
    put(d.operands[1], workspace, B, kGruWorkspace * H);
    put(d.operands[2], input_gates, B, 3 * H);
    put(d.operands[3], hidden_gates, B, 3 * H);
    put(d.operands[4], hx, B, H);
    if (ib) {
      put_bias(d.operands[5], *ib);
      put_bias(d.operands[6], *hb);
    }
    launch(input_gates.device().index(), d);
  }
  return {hy, workspace};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> gru_cell_backward(const Tensor &grad_hy, const Tensor &workspace,
                                                                     bool has_bias) {
  const char *fn = "_thnn_fused_gru_cell_backward";
  TORCH_CHECK(grad_hy.dim() == 2, fn, ": expected a 2-d grad_hy, got ", grad_hy.sizes());
  int64_t B = grad_hy.size(0), H = grad_hy.size(1);
  TORCH_CHECK(workspace.sizes() == at::IntArrayRef({B, H * kGruWorkspace}), fn, ": expected a workspace of shape [",
              B, ", ", H * kGruWorkspace, "], got ", workspace.sizes());
  check_device(fn, grad_hy, workspace, "grad_hy");
  check_dtype(fn, grad_hy, "grad_hy");
  check_dtype(fn, workspace, "workspace");
  c10::DeviceGuard guard(workspace.device());
  Tensor grad_input_gates = at::empty({B, 3 * H}, workspace.options());
  Tensor grad_hidden_gates = at::empty({B, 3 * H}, workspace.options());
  Tensor grad_hx = at::empty_like(grad_hy, at::MemoryFormat::Contiguous);
  if (B * H > 0) {
    nrt_launch d = new_launch(NRT_OP(GRU_CELL_BACKWARD), {B, H});
    d.compute_dtype = NRT_FLOAT32;
    d.noutputs = 3;
    d.ninputs = 2;
    put(d.operands[0], grad_input_gates, B, 3 * H);
    put(d.operands[1], grad_hidden_gates, B, 3 * H);
    put(d.operands[2], grad_hx, B, H);
    put(d.operands[3], grad_hy, B, H);
    put(d.operands[4], workspace, B, kGruWorkspace * H);
    launch(workspace.device().index(), d);
  }
  Tensor grad_input_bias, grad_hidden_bias;
  if (has_bias) {
    grad_input_bias = grad_input_gates.sum(0);
    grad_hidden_bias = grad_hidden_gates.sum(0);
  }
  return {grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias, grad_hidden_bias};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  NEURON_IMPL(m, "_thnn_fused_lstm_cell", lstm_cell);
  NEURON_IMPL(m, "_thnn_fused_lstm_cell_backward_impl", lstm_cell_backward_impl);
  NEURON_IMPL(m, "_thnn_fused_gru_cell", gru_cell);
  NEURON_IMPL(m, "_thnn_fused_gru_cell_backward", gru_cell_backward);
}

}  // namespace torch_neuronx
