// Fused scaled dot-product attention (family ATTENTION, nrt/ops/attention.h).
//
// How PyTorch reaches it: at::scaled_dot_product_attention asks the
// device's _fused_sdp_choice_stub which backend to use. For the cases the
// fused kernel covers (4-d query/key/value in float32, float64, bfloat16 or
// float16, equal batch, key/value heads dividing the query heads, masks
// broadcastable to (B, Hq, L, S), dropout p < 1) we answer
// SDPBackend::flash_attention where the CPU takes its flash kernel (ATen
// then calls _scaled_dot_product_flash_attention_for_cpu, registered here
// with the CPU op's layouts) and SDPBackend::overrideable for the rest the
// kernel serves; SDPBackend::math otherwise, so everything else still
// runs through the decomposition (matmul, softmax, dropout on our other
// kernels) and keeps PyTorch's own error messages. PyTorch converts a bool
// mask to an additive float mask before calling
// _scaled_dot_product_fused_attention_overrideable; autograd calls
// _scaled_dot_product_fused_attention_overrideable_backward with the
// saved logsumexp and the Philox seed/offset (CPU int64 scalars, as CUDA
// keeps them) so that the backward regenerates the forward's dropout mask.
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/SDPBackend.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <c10/core/DeviceGuard.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <tuple>

#include "launch/launch.h"
#include "nrt/ops/attention.h"
#include "registry/variants.h"
#include "runtime/generator.h"

namespace torch_neuronx {

using at::Tensor;

namespace {

// float64 too, at float32 precision like every float64 op here: the CPU takes
// its flash kernel for it, whose non-finite semantics the fused kernel has.
bool fused_dtype(c10::ScalarType t) {
  return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf || t == at::kDouble;
}

std::vector<int64_t> score_shape(const Tensor &q, const Tensor &k) {
  return {q.size(0), q.size(1), q.size(2), k.size(2)};
}

// Whether the fused kernel computes exactly what the math backend would.
// Sizes are read as SymInts: Dynamo's fake tensors reach this choice with
// symbolic sizes after a shape change (automatic dynamic shapes), and each
// comparison then becomes a guard, which the neuron backend specialises
// anyway (its graphs are static).
bool fused_covers(const Tensor &q, const Tensor &k, const Tensor &v, const std::optional<Tensor> &mask,
                  double dropout_p, bool is_causal, bool enable_gqa) {
  if (q.is_nested() || k.is_nested() || v.is_nested()) return false;
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4) return false;
  if (!fused_dtype(q.scalar_type()) || k.scalar_type() != q.scalar_type() || v.scalar_type() != q.scalar_type())
    return false;
  if (k.device() != q.device() || v.device() != q.device()) return false;
  if (q.sym_numel() == 0 || k.sym_numel() == 0 || v.sym_numel() == 0) return false;
  c10::SymInt hq = q.sym_size(1), hk = k.sym_size(1);
  if (k.sym_size(0) != q.sym_size(0) || v.sym_size(0) != q.sym_size(0) || v.sym_size(1) != hk ||
      v.sym_size(2) != k.sym_size(2) || k.sym_size(3) != q.sym_size(3))
    return false;
  // Without enable_gqa only equal heads or a single broadcast kv head are valid.
  if (hq % hk != 0 || (!enable_gqa && hk != hq && hk != 1)) return false;
  if (!(dropout_p >= 0.0 && dropout_p < 1.0)) return false;
  if (mask && mask->defined()) {
    if (is_causal) return false;
    if (mask->is_nested() || mask->device() != q.device() || mask->dim() > 4) return false;
    if (mask->scalar_type() != at::kBool && !at::isFloatingType(mask->scalar_type())) return false;
    std::vector<c10::SymInt> scores{q.sym_size(0), q.sym_size(1), q.sym_size(2), k.sym_size(2)};
    if (!at::is_expandable_to(mask->sym_sizes(), scores)) return false;
  }
  return true;
}

// Whether the CPU's backend selection (use_flash_attention_cpp) would take
// its flash kernel rather than the math decomposition, as far as layout,
// shapes and the mask decide: every last dim of unit stride (size-1 dims
// included), one head dim for q, k and v, nonzero sequence lengths and a
// mask that does not require grad and is 2-d or 4-d (check_attn_mask_shape:
// a 3-d mask goes to math; grouped heads are flash's too). NaN and
// infinities propagate differently in the two (math scales q and k by
// sqrt(scale) before their product, its safe softmax gives a fully -inf
// row 0, flash's maximum ignores a NaN score without a mask), so neuron
// takes math wherever the CPU does (its matmul, softmax and matmul on
// neuron's kernels) and its fused kernel follows flash elsewhere.
bool cpu_takes_flash(const Tensor &q, const Tensor &k, const Tensor &v, const Tensor *mask, bool mask_grad) {
  for (const Tensor *t : {&q, &k, &v})
    if (t->sym_stride(-1) != 1) return false;
  if (v.sym_size(-1) != q.sym_size(-1) || q.sym_size(-2) == 0 || k.sym_size(-2) == 0) return false;
  if (!mask) return true;
  return !mask_grad && (mask->dim() == 2 || mask->dim() == 4);
}

const Tensor *mask_of(const std::optional<Tensor> &mask) { return mask && mask->defined() ? &*mask : nullptr; }

// Whether the CPU takes its math decomposition and every bmm of it (and of
// its backward) is small, M * N * K < 400, so that ATen runs its plain
// loop rather than MKL: the kernel then replays that decomposition's order
// (launch p3 = 1, kernels/attention/math.c), which decides the answer where
// +-3.4e38 terms overflow or 1e18-scale ones cancel. Not for dropout, grouped
// heads (the CPU sums a shared head's dK before or after the scale,
// depending on enable_gqa, which the fused op does not see) or a float mask
// of another dtype than the query's (the CPU's add then promotes the scores).
// The forward and the backward decide alike: mask_grad is the mask's
// requires_grad in the forward, grad_input_mask[3] in the backward.
bool cpu_math_small(const Tensor &q, const Tensor &k, const Tensor &v, const Tensor *mask, bool mask_grad,
                    double dropout_p) {
  if (cpu_takes_flash(q, k, v, mask, mask_grad) || dropout_p > 0.0 || q.sym_size(1) != k.sym_size(1)) return false;
  if (mask && mask->scalar_type() != at::kBool && mask->scalar_type() != q.scalar_type()) return false;
  c10::SymInt ls = q.sym_size(2) * k.sym_size(2);
  return ls * q.sym_size(3) < 400 && ls * v.sym_size(3) < 400;
}

}  // namespace

int64_t fused_sdp_choice(const Tensor &q, const Tensor &k, const Tensor &v, const std::optional<Tensor> &mask,
                         double dropout_p, bool is_causal, std::optional<double> /*scale*/, bool enable_gqa) {
  auto &ctx = at::globalContext();
  // Code written for CUDA selects the fused path with
  // sdpa_kernel(FLASH_ATTENTION or EFFICIENT_ATTENTION); our one fused kernel
  // serves both, within each one's contract: flash takes no explicit mask.
  bool has_mask = mask && mask->defined();
  bool fused_enabled = ctx.userEnabledOverrideableSDP() || ctx.userEnabledMemEfficientSDP() ||
                       (ctx.userEnabledFlashSDP() && !has_mask);
  // With math disabled (sdpa_kernel naming only fused backends) the fused
  // kernel serves whatever it covers.
  const Tensor *m = mask_of(mask);
  bool mask_grad = m && m->requires_grad();
  bool flash = cpu_takes_flash(q, k, v, m, mask_grad);
  if (fused_enabled && fused_covers(q, k, v, mask, dropout_p, is_causal, enable_gqa) &&
      (flash || cpu_math_small(q, k, v, m, mask_grad, dropout_p) || !ctx.userEnabledMathSDP())) {
    // Where the CPU runs its flash kernel, neuron runs the same op,
    // _scaled_dot_product_flash_attention_for_cpu: its backward's meta
    // function gives dQ, dK and dV the CPU's [B, S, H, E] layout, so autograd
    // sums an expanded input's gradient in the CPU's order. Dropout stays on
    // the overrideable op, which carries the Philox state (the CPU's flash
    // kernel has no dropout).
    if (flash && ctx.userEnabledFlashSDP() && dropout_p == 0.0)
      return static_cast<int64_t>(at::SDPBackend::flash_attention);
    return static_cast<int64_t>(at::SDPBackend::overrideable);
  }
  if (ctx.userEnabledMathSDP()) return static_cast<int64_t>(at::SDPBackend::math);
  return static_cast<int64_t>(at::SDPBackend::error);
}

namespace {

void check_qkv(const char *fn, const Tensor &q, const Tensor &k, const Tensor &v, const Tensor *bias,
               bool is_causal, double dropout_p) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, fn,
              ": expected 4-d query, key and value (batch, heads, sequence, embedding), got query ", q.sizes(),
              ", key ", k.sizes(), ", value ", v.sizes());
  TORCH_CHECK(q.scalar_type() == k.scalar_type() && q.scalar_type() == v.scalar_type(), fn,
              ": expected query, key and value to have the same dtype, but got query.dtype: ", q.scalar_type(),
              " key.dtype: ", k.scalar_type(), " and value.dtype: ", v.scalar_type(), " instead.");
  TORCH_CHECK(at::isFloatingType(q.scalar_type()), fn, ": expected a floating dtype, got ", q.scalar_type());
  TORCH_CHECK(k.device() == q.device() && v.device() == q.device(), fn,
              ": expected query, key and value on the same device");
  TORCH_CHECK(k.size(0) == q.size(0) && v.size(0) == q.size(0), fn,
              ": query, key and value must have the same batch size");
  TORCH_CHECK(v.size(1) == k.size(1) && v.size(2) == k.size(2), fn,
              ": key and value must have the same number of heads and sequence length, got key ", k.sizes(),
              " and value ", v.sizes());
  TORCH_CHECK(k.size(3) == q.size(3), fn, ": query and key must have the same embedding dimension, got ",
              q.size(3), " and ", k.size(3));
  TORCH_CHECK(k.size(1) > 0 ? q.size(1) % k.size(1) == 0 : q.size(1) == 0, fn,
              ": the number of query heads (", q.size(1), ") must be divisible by the number of key/value heads (",
              k.size(1), ")");
  TORCH_CHECK(dropout_p >= 0.0 && dropout_p < 1.0, fn, ": dropout probability must be in [0, 1), got ", dropout_p);
  if (bias) {
    TORCH_CHECK(!is_causal, "_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True");
    TORCH_CHECK(bias->scalar_type() == at::kBool || at::isFloatingType(bias->scalar_type()), fn,
                ": expected attn_mask dtype to be bool or float, but got ", bias->scalar_type());
    TORCH_CHECK(bias->device() == q.device(), fn, ": attn_mask must be on the device of query");
    TORCH_CHECK(bias->dim() <= 4 && at::is_expandable_to(bias->sizes(), score_shape(q, k)), fn,
                ": attn_mask of shape ", bias->sizes(), " is not broadcastable to ", at::IntArrayRef(score_shape(q, k)));
  }
  if (q.scalar_type() == at::kDouble) warn_float64_once();
}

// The launch header shared by all four ops: sizes {B, Hq, Hk, L, S, E, Ev},
// s0 scale, s1 dropout p, p0 causal, p1 seed, p2 offset, p3 = 1: the CPU's
// math decomposition's order (see cpu_math_small).
nrt_launch attn_desc(nrt_op op, const Tensor &q, const Tensor &k, const Tensor &v, double scale, double dropout_p,
                     bool is_causal, uint64_t seed, uint64_t offset, bool math_order) {
  nrt_launch d = new_launch(op);
  d.ndim = 7;
  int64_t sizes[7] = {q.size(0), q.size(1), k.size(1), q.size(2), k.size(2), q.size(3), v.size(3)};
  std::memcpy(d.sizes, sizes, sizeof sizes);
  d.compute_dtype = NRT_FLOAT32;
  d.scalars[0].f = scale;
  d.scalars[1].f = dropout_p;
  d.params[0] = is_causal ? 1 : 0;
  d.params[1] = static_cast<int64_t>(seed);
  d.params[2] = static_cast<int64_t>(offset);
  d.params[3] = math_order ? 1 : 0;
  return d;
}

void put4(nrt_operand &o, const Tensor &t) { set_operand(o, t, {0, 1, 2, 3}); }

// lse [B, Hq, L]: strides {b, h, l}.
void put_rows(nrt_operand &o, const Tensor &t) { set_operand(o, t, {0, 1, 2}); }

// The output layout the op's meta function gives (alloc_with_matching_layout
// in torch/_meta_registrations.py): the query's own strides when the shapes
// agree, else a dense tensor whose dims are ordered as the query's strides
// order them. A compiled graph bakes in later views of the output computed
// from the meta value, so the kernel must write exactly this layout.
Tensor alloc_like_query(const Tensor &q, at::IntArrayRef shape) {
  if (q.sizes() == shape) return at::empty_like(q);
  std::array<int64_t, 4> order = {0, 1, 2, 3};
  // stable, largest stride first: equal strides keep their dim order, as Python's sorted(reverse=True)
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return q.stride(a) > q.stride(b); });
  std::vector<int64_t> strides(4);
  int64_t step = 1;
  for (int i = 3; i >= 0; i--) {
    strides[order[i]] = step;
    step *= shape[order[i]];
  }
  return at::empty_strided(shape, strides, q.options());
}

double default_scale(const Tensor &q, std::optional<double> scale) {
  return scale ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(3)));
}

using ForwardResult =
    std::tuple<Tensor, Tensor, Tensor, Tensor, c10::SymInt, c10::SymInt, Tensor, Tensor, Tensor>;

// Launches the forward into out and lse (float32, [B, Hq, L] in any strides).
void run_forward(const Tensor &q, const Tensor &k, const Tensor &v, const Tensor *bias, double dropout_p,
                 bool is_causal, std::optional<double> scale, uint64_t seed, uint64_t offset, const Tensor &out,
                 const Tensor &lse) {
  if (lse.numel() == 0) return;
  bool math_order = cpu_math_small(q, k, v, bias, bias && bias->requires_grad(), dropout_p);
  nrt_launch d = attn_desc(NRT_OP(SDPA_FORWARD), q, k, v, default_scale(q, scale), dropout_p, is_causal, seed, offset,
                           math_order);
  d.noutputs = 2;
  d.ninputs = bias ? 4 : 3;
  put4(d.operands[0], out);
  put_rows(d.operands[1], lse);
  put4(d.operands[2], q);
  put4(d.operands[3], k);
  put4(d.operands[4], v);
  if (bias) put4(d.operands[5], bias->expand(score_shape(q, k)));
  launch(q.device().index(), d);
}

ForwardResult sdpa_forward(const Tensor &q, const Tensor &k, const Tensor &v, const std::optional<Tensor> &attn_bias,
                           double dropout_p, bool is_causal, bool return_debug_mask, std::optional<double> scale) {
  const char *fn = "_scaled_dot_product_fused_attention_overrideable";
  const Tensor *bias = attn_bias && attn_bias->defined() ? &*attn_bias : nullptr;
  check_qkv(fn, q, k, v, bias, is_causal, dropout_p);
  TORCH_CHECK(!return_debug_mask, fn, ": return_debug_mask=True is not supported on neuron");
  c10::DeviceGuard guard(q.device());
  int64_t B = q.size(0), Hq = q.size(1), L = q.size(2), S = k.size(2), Ev = v.size(3);
  Tensor out = alloc_like_query(q, {B, Hq, L, Ev});
  Tensor lse = at::empty({B, Hq, L}, q.options().dtype(at::kFloat));
  uint64_t seed = 0, offset = 0;
  if (dropout_p > 0.0)
    philox_next(nullptr, q.device().index(), static_cast<uint64_t>(B * Hq * L * S), &seed, &offset);
  run_forward(q, k, v, bias, dropout_p, is_causal, scale, seed, offset, out, lse);
  auto cpu_long = at::TensorOptions().dtype(at::kLong);
  Tensor seed_t = at::scalar_tensor(static_cast<int64_t>(seed), cpu_long);
  Tensor offset_t = at::scalar_tensor(static_cast<int64_t>(offset), cpu_long);
  return ForwardResult(out, lse, Tensor(), Tensor(), c10::SymInt(L), c10::SymInt(S), seed_t, offset_t,
                       Tensor());  // no debug mask: None, as the meta function returns
}

// The shape and device checks both backward ops make on their saved tensors.
void check_saved(const char *fn, const Tensor &grad_out, const Tensor &q, const Tensor &k, const Tensor &v,
                 const Tensor &out, const Tensor &lse) {
  int64_t B = q.size(0), Hq = q.size(1), L = q.size(2), Ev = v.size(3);
  TORCH_CHECK(grad_out.sizes() == at::IntArrayRef({B, Hq, L, Ev}) && out.sizes() == grad_out.sizes(), fn,
              ": grad_out and out must have shape ", at::IntArrayRef({B, Hq, L, Ev}));
  TORCH_CHECK(lse.sizes() == at::IntArrayRef({B, Hq, L}), fn, ": expected a logsumexp of shape ",
              at::IntArrayRef({B, Hq, L}));
  TORCH_CHECK(grad_out.device() == q.device() && out.device() == q.device() && lse.device() == q.device(), fn,
              ": grad_out, out and logsumexp must be on the device of query");
}

// Launches the backward: dq, dk and dv in whatever layout the caller's meta
// function gives, and ds (float32 [B, Hq, L, S]) when defined. lse is float32.
void run_backward(const Tensor &grad_out, const Tensor &q, const Tensor &k, const Tensor &v, const Tensor *bias,
                  bool bias_grad, const Tensor &out, const Tensor &lse, double dropout_p, bool is_causal,
                  uint64_t seed, uint64_t offset, std::optional<double> scale, const Tensor &dq, const Tensor &dk,
                  const Tensor &dv, const Tensor &ds) {
  int64_t B = q.size(0), Hq = q.size(1), L = q.size(2), Ev = v.size(3);
  Tensor mask = bias ? bias->expand(score_shape(q, k)) : Tensor();
  double sc = default_scale(q, scale);
  c10::DeviceIndex dev = q.device().index();
  bool math_order = cpu_math_small(q, k, v, bias, bias_grad, dropout_p);
  if (B * Hq * L == 0) {
    dq.zero_();
    dk.zero_();
    dv.zero_();
    if (ds.defined()) ds.zero_();
    return;
  }
  // Per row: dO in float32, lse, D = dO . O (see SDPA_BACKWARD_PREP).
  Tensor rowstat = at::empty({B, Hq, L, Ev + 2}, q.options().dtype(at::kFloat));
  nrt_launch d = attn_desc(NRT_OP(SDPA_BACKWARD_PREP), q, k, v, sc, dropout_p, is_causal, seed, offset, math_order);
  d.noutputs = 1;
  d.ninputs = 3;
  put4(d.operands[0], rowstat);
  put4(d.operands[1], out);
  put4(d.operands[2], grad_out);
  put_rows(d.operands[3], lse);
  if (out.scalar_type() != at::kFloat && out.scalar_type() != at::kDouble) {
    // D = dO . out cancels in dP - D: a 16-bit out would spoil the
    // gradients, so the kernel recomputes out in float32 from q, k, v.
    // A float64 out holds the float32 result exactly and is read as it
    // is, as the float32 one: a recomputed out (double sums on the
    // reference path) leaves other residuals where 1e18 terms cancel.
    d.ninputs = bias ? 7 : 6;
    put4(d.operands[4], q);
    put4(d.operands[5], k);
    put4(d.operands[6], v);
    if (bias) put4(d.operands[7], mask);
  }
  launch(dev, d);
  // One pass gives dQ, dK and dV together (each tile's probabilities
  // feed all three), so they are computed even when not all are wanted.
  auto put_inputs = [&](nrt_launch &l, int in) {
    l.ninputs = bias ? 5 : 4;
    put4(l.operands[in], q);
    put4(l.operands[in + 1], k);
    put4(l.operands[in + 2], v);
    put4(l.operands[in + 3], rowstat);
    if (bias) put4(l.operands[in + 4], mask);
  };
  d = attn_desc(NRT_OP(SDPA_BACKWARD), q, k, v, sc, dropout_p, is_causal, seed, offset, math_order);
  d.noutputs = 3;
  put4(d.operands[0], dq);
  put4(d.operands[1], dk);
  put4(d.operands[2], dv);
  put_inputs(d, 3);
  launch(dev, d);
  if (ds.defined()) {
    d = attn_desc(NRT_OP(SDPA_BACKWARD_DS), q, k, v, sc, dropout_p, is_causal, seed, offset, math_order);
    d.noutputs = 1;
    put4(d.operands[0], ds);
    put_inputs(d, 1);
    launch(dev, d);
  }
}

std::tuple<Tensor, Tensor, Tensor, Tensor> sdpa_backward(
    const Tensor &grad_out, const Tensor &q, const Tensor &k, const Tensor &v, const Tensor &attn_bias,
    std::array<bool, 4> grad_input_mask, const Tensor &out, const Tensor &lse, const Tensor & /*cum_seq_q*/,
    const Tensor & /*cum_seq_k*/, int64_t /*max_q*/, int64_t /*max_k*/, double dropout_p, bool is_causal,
    const Tensor &philox_seed, const Tensor &philox_offset, std::optional<double> scale) {
  const char *fn = "_scaled_dot_product_fused_attention_overrideable_backward";
  const Tensor *bias = attn_bias.defined() ? &attn_bias : nullptr;
  check_qkv(fn, q, k, v, bias, is_causal, dropout_p);
  check_saved(fn, grad_out, q, k, v, out, lse);
  TORCH_CHECK(lse.scalar_type() == at::kFloat, fn, ": expected a float32 logsumexp, got ", lse.scalar_type());
  c10::DeviceGuard guard(q.device());
  uint64_t seed = 0, offset = 0;
  if (dropout_p > 0.0) {
    TORCH_CHECK(philox_seed.defined() && philox_offset.defined() && philox_seed.numel() == 1 &&
                    philox_offset.numel() == 1,
                fn, ": dropout needs the forward's philox_seed and philox_offset");
    seed = static_cast<uint64_t>(philox_seed.item<int64_t>());
    offset = static_cast<uint64_t>(philox_offset.item<int64_t>());
  }
  bool want_bias = grad_input_mask[3] && bias && bias->scalar_type() != at::kBool;
  // empty_like keeps each input's layout, as the meta function does
  Tensor dq = at::empty_like(q), dk = at::empty_like(k), dv = at::empty_like(v), dbias;
  Tensor ds = want_bias ? at::empty({q.size(0), q.size(1), q.size(2), k.size(2)}, q.options().dtype(at::kFloat))
                        : Tensor();
  run_backward(grad_out, q, k, v, bias, grad_input_mask[3] && bias, out, lse, dropout_p, is_causal, seed, offset,
               scale, dq, dk, dv, ds);
  // The meta function returns empty_like(attn_bias) whenever a bias is given,
  // wanted or not: the same layout here (unused when not wanted).
  if (bias) dbias = at::empty_like(*bias);
  if (want_bias) dbias.copy_(at::sum_to(ds, bias->sizes()));
  // dQ, dK and dV are computed together anyway, and the meta function returns all three
  return {dq, dk, dv, dbias};
}

// The CPU flash kernel's op, taken where the CPU takes it (fused_sdp_choice).
// Its mask is the query's dtype, or float32 for a 16-bit query (ATen's
// sdpa has made a bool mask additive before); no dropout, as on the CPU.
void check_flash_mask(const char *fn, const Tensor &q, const Tensor *mask, double dropout_p) {
  TORCH_CHECK(dropout_p == 0.0, fn, ": Currently do not support dropout > 0");
  if (mask)
    TORCH_CHECK(mask->scalar_type() == q.scalar_type() ||
                    (mask->scalar_type() == at::kFloat && at::isReducedFloatingType(q.scalar_type())),
                fn, ": Attention mask is the same data type as query");
}

// The logsumexp as the flash op's meta function lays it out: [B, L, H]
// transposed to [B, H, L], in the query's computation dtype (float64 for
// float64, whose float32 values it holds exactly).
Tensor flash_lse(const Tensor &q) {
  at::ScalarType t = q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  return at::empty({q.size(0), q.size(2), q.size(1)}, q.options().dtype(t)).transpose(1, 2);
}

std::tuple<Tensor, Tensor> flash_forward(const Tensor &q, const Tensor &k, const Tensor &v, double dropout_p,
                                         bool is_causal, const std::optional<Tensor> &attn_mask,
                                         std::optional<double> scale) {
  const char *fn = "_scaled_dot_product_flash_attention_for_cpu";
  const Tensor *mask = mask_of(attn_mask);
  check_qkv(fn, q, k, v, mask, is_causal, 0.0);
  check_flash_mask(fn, q, mask, dropout_p);
  TORCH_CHECK(v.size(3) == q.size(3), fn, ": expected query and value of one head dim, got ", q.size(3), " and ",
              v.size(3));
  c10::DeviceGuard guard(q.device());
  Tensor out = at::empty_like(q);  // the meta function's layout
  Tensor lse = flash_lse(q);
  Tensor lse32 = lse.scalar_type() == at::kFloat ? lse : at::empty_like(lse, lse.options().dtype(at::kFloat));
  run_forward(q, k, v, mask, 0.0, is_causal, scale, 0, 0, out, lse32);
  if (!lse32.is_same(lse)) lse.copy_(lse32);
  return {out, lse};
}

std::tuple<Tensor, Tensor, Tensor> flash_backward(const Tensor &grad_out, const Tensor &q, const Tensor &k,
                                                  const Tensor &v, const Tensor &out, const Tensor &lse,
                                                  double dropout_p, bool is_causal,
                                                  const std::optional<Tensor> &attn_mask,
                                                  std::optional<double> scale) {
  const char *fn = "_scaled_dot_product_flash_attention_for_cpu_backward";
  const Tensor *mask = mask_of(attn_mask);
  check_qkv(fn, q, k, v, mask, is_causal, 0.0);
  check_flash_mask(fn, q, mask, dropout_p);
  check_saved(fn, grad_out, q, k, v, out, lse);
  TORCH_CHECK(lse.scalar_type() == at::kFloat || lse.scalar_type() == at::kDouble, fn,
              ": expected a float32 or float64 logsumexp, got ", lse.scalar_type());
  c10::DeviceGuard guard(q.device());
  // The meta function's layout, the CPU kernel's: each gradient the
  // transpose(1, 2) of a contiguous [B, S, H, E] buffer.
  auto permuted = [](const Tensor &t) { return at::empty_permuted(t.sizes(), {0, 2, 1, 3}, t.options()); };
  Tensor dq = permuted(q), dk = permuted(k), dv = permuted(v);
  Tensor lse32 = lse.scalar_type() == at::kFloat ? lse : lse.to(at::kFloat);
  run_backward(grad_out, q, k, v, mask, false, out, lse32, 0.0, is_causal, 0, 0, scale, dq, dk, dv, Tensor());
  return {dq, dk, dv};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  NEURON_IMPL(m, "_fused_sdp_choice", fused_sdp_choice);
  NEURON_IMPL(m, "_scaled_dot_product_fused_attention_overrideable", sdpa_forward);
  NEURON_IMPL(m, "_scaled_dot_product_fused_attention_overrideable_backward", sdpa_backward);
  NEURON_IMPL(m, "_scaled_dot_product_flash_attention_for_cpu", flash_forward);
  NEURON_IMPL(m, "_scaled_dot_product_flash_attention_for_cpu_backward", flash_backward);
}

}  // namespace torch_neuronx

namespace at::native {
// scaled_dot_product_attention consults the stub, not the op, for the device.
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_neuronx::fused_sdp_choice)
}  // namespace at::native
