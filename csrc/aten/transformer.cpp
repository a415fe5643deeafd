// The transformer fast paths PyTorch takes in inference (eval + no_grad):
// nn.TransformerEncoderLayer's _transformer_encoder_layer_fwd and
// nn.MultiheadAttention's _native_multi_head_attention, composed of native
// ops with the semantics of ATen's CPU kernels (masks turned to bool, where
// True hides a key; a query that sees no key gets zeros). With a key-padding
// mask nn.TransformerEncoder packs the batch into a nested tensor: the
// nested entry points here unpack it to a padded batch and a padding mask,
// run the dense layer, and pack the result again with PyTorch's own nested
// helpers (which are themselves compositions of dispatcher ops).
#include <cmath>

#include <ATen/NestedTensorImpl.h>
#include <ATen/ops/_nested_from_padded_native.h>
#include <ATen/ops/_nested_tensor_from_mask_left_aligned_native.h>
#include <ATen/ops/_nested_tensor_from_mask_native.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/layer_norm.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/to_padded_tensor_native.h>
#include <ATen/ops/where.h>
#include <c10/core/DeviceGuard.h>

#include "registry/registry.h"

namespace torch_neuronx {
namespace {

using at::Tensor;

// The additive or boolean attention mask as ATen's masked softmax sees it:
// bool, broadcastable to [B, H, L, S]. mask_type 0: [L, S]; 1: key padding
// [B, S]; 2: merged [B, H, L, S] (nn.MultiheadAttention.merge_masks).
Tensor broadcast_mask(const Tensor &mask, int64_t mask_type, int64_t batch) {
  Tensor m = mask.scalar_type() == at::kBool ? mask : mask.ne(0);
  if (mask_type == 1) {
    TORCH_CHECK(m.dim() == 2 && m.size(0) == batch, "key padding mask must be [batch, source length], got ",
                m.sizes());
    return m.view({m.size(0), 1, 1, m.size(1)});
  }
  return m;  // [L, S] or [B, H, L, S]: broadcasts as it is
}

// Scaled dot-product attention over heads with ATen's masked-softmax rules.
Tensor attend(const Tensor &q, const Tensor &k, const Tensor &v, const std::optional<Tensor> &mask,
              std::optional<int64_t> mask_type, Tensor *weights) {
  // q, k, v: [B, H, L|S, D]; q already scaled by 1/sqrt(D) as ATen does.
  Tensor scores = q.matmul(k.transpose(-2, -1));
  Tensor probs;
  if (mask && mask->defined()) {
    Tensor m = broadcast_mask(*mask, mask_type.value_or(2), q.size(0));
    probs = scores.masked_fill(m, -INFINITY).softmax(-1);
    // A query whose every key is hidden: zeros, not NaN (ATen's _masked_softmax).
    probs = at::where(m.expand_as(scores).all(-1, /*keepdim=*/true), at::zeros({}, probs.options()), probs);
  } else {
    probs = scores.softmax(-1);
  }
  if (weights) *weights = probs;
  return probs.matmul(v);
}

std::tuple<Tensor, Tensor> native_mha(const Tensor &query, const Tensor &key, const Tensor &value, int64_t embed_dim,
                                      int64_t num_head, const Tensor &qkv_weight, const Tensor &qkv_bias,
                                      const Tensor &proj_weight, const Tensor &proj_bias,
                                      const std::optional<Tensor> &mask, bool need_weights, bool average_weights,
                                      std::optional<int64_t> mask_type) {
  TORCH_CHECK(!query.is_nested(), "neuron: _native_multi_head_attention of nested tensors is not implemented");
  TORCH_CHECK(query.dim() == 3 && key.dim() == 3 && value.dim() == 3, "expected 3-D query, key and value");
  TORCH_CHECK(embed_dim % num_head == 0, "embed_dim must be divisible by num_heads");
  c10::DeviceGuard guard(query.device());
  int64_t B = query.size(0), L = query.size(1), S = key.size(1), D = embed_dim / num_head;
  Tensor q, k, v;
  if (query.is_same(key) && key.is_same(value)) {  // self-attention: one projection GEMM
    auto qkv = at::linear(query, qkv_weight, qkv_bias).chunk(3, -1);
    q = qkv[0], k = qkv[1], v = qkv[2];
  } else {
    auto w = qkv_weight.chunk(3, 0);
    auto b = qkv_bias.chunk(3, 0);
    q = at::linear(query, w[0], b[0]);
    k = at::linear(key, w[1], b[1]);
    v = at::linear(value, w[2], b[2]);
  }
  auto heads = [&](const Tensor &t, int64_t n) { return t.reshape({B, n, num_head, D}).transpose(1, 2); };
  q = heads(q, L).div(std::sqrt(static_cast<double>(D)));
  Tensor weights;
  Tensor o = attend(q, heads(k, S), heads(v, S), mask, mask_type, need_weights ? &weights : nullptr);
  o = at::linear(o.transpose(1, 2).reshape({B, L, embed_dim}), proj_weight, proj_bias);
  if (!need_weights) return {o, Tensor()};
  if (average_weights) weights = weights.sum(1).div(num_head);
  return {o, weights};
}

Tensor encoder_layer(const Tensor &src, int64_t embed_dim, int64_t num_heads, const Tensor &qkv_weight,
                     const Tensor &qkv_bias, const Tensor &proj_weight, const Tensor &proj_bias, bool use_gelu,
                     bool norm_first, double eps, const Tensor &norm_weight_1, const Tensor &norm_bias_1,
                     const Tensor &norm_weight_2, const Tensor &norm_bias_2, const Tensor &ffn_weight_1,
                     const Tensor &ffn_bias_1, const Tensor &ffn_weight_2, const Tensor &ffn_bias_2,
                     const std::optional<Tensor> &mask, std::optional<int64_t> mask_type) {
  c10::DeviceGuard guard(src.device());
  if (src.numel() == 0) return src.clone();
  auto norm = [&](const Tensor &x, const Tensor &w, const Tensor &b) { return at::layer_norm(x, {embed_dim}, w, b, eps); };
  auto attention = [&](const Tensor &x) {
    return std::get<0>(native_mha(x, x, x, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, mask,
                                  false, true, mask_type));
  };
  auto ffn = [&](const Tensor &x) {
    Tensor h = at::linear(x, ffn_weight_1, ffn_bias_1);
    return at::linear(use_gelu ? at::gelu(h) : at::relu(h), ffn_weight_2, ffn_bias_2);
  };
  Tensor x = norm_first ? norm(src, norm_weight_1, norm_bias_1) : src;
  x = attention(x).add(src);
  if (!norm_first) x = norm(x, norm_weight_1, norm_bias_1);
  Tensor residual = x;
  if (norm_first) x = norm(x, norm_weight_2, norm_bias_2);
  x = ffn(x).add(residual);
  if (!norm_first) x = norm(x, norm_weight_2, norm_bias_2);
  return x;
}

// A nested [B, L_i, E] batch: padded with zeros to [B, L, E] and a padding
// mask (True past each sequence's length), the dense layer, packed again.
Tensor encoder_layer_nested(const Tensor &src, int64_t embed_dim, int64_t num_heads, const Tensor &qkv_weight,
                            const Tensor &qkv_bias, const Tensor &proj_weight, const Tensor &proj_bias, bool use_gelu,
                            bool norm_first, double eps, const Tensor &norm_weight_1, const Tensor &norm_bias_1,
                            const Tensor &norm_weight_2, const Tensor &norm_bias_2, const Tensor &ffn_weight_1,
                            const Tensor &ffn_bias_1, const Tensor &ffn_weight_2, const Tensor &ffn_bias_2,
                            const std::optional<Tensor> &mask, std::optional<int64_t> mask_type) {
  TORCH_CHECK(!(mask && mask->defined()), "neuron: _transformer_encoder_layer_fwd of a nested tensor takes no mask");
  c10::DeviceGuard guard(src.device());
  const Tensor &sizes = at::native::get_nested_tensor_impl(src)->get_nested_sizes();  // host [B, 2]
  TORCH_CHECK(sizes.dim() == 2 && sizes.size(1) == 2, "neuron: expected a nested batch of [L_i, E] sequences");
  Tensor padded = at::native::NestedTensor_to_padded_tensor_generic(src, 0.0, std::nullopt);
  if (padded.numel() == 0) return src.clone();
  Tensor lengths = sizes.select(1, 0).contiguous();
  Tensor positions = at::arange(padded.size(1), lengths.options());
  Tensor pad = positions.unsqueeze(0).ge(lengths.unsqueeze(1)).to(src.device());
  Tensor out = encoder_layer(padded, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, use_gelu,
                             norm_first, eps, norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2, ffn_weight_1,
                             ffn_bias_1, ffn_weight_2, ffn_bias_2, pad, 1);
  return at::native::nested_from_padded_generic(out, sizes, false);
}

// Nested tensors beyond what the encoder fast path needs are not
// implemented: a clear error naming the op.
void nested_unsupported(const c10::OperatorHandle &op, torch::jit::Stack *) {
  const auto &name = op.schema().operator_name();
  TORCH_CHECK_NOT_IMPLEMENTED(false, "neuron: nested tensors support only nn.TransformerEncoder's inference path on ",
                              "the neuron device (op ", name.name,
                              name.overload_name.empty() ? "" : "." + name.overload_name,
                              "); use padded tensors with a mask instead.");
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  NEURON_IMPL(m, "_transformer_encoder_layer_fwd", encoder_layer);
  NEURON_IMPL(m, "_native_multi_head_attention", native_mha);
  NEURON_IMPL(m, "_nested_tensor_from_mask", at::native::NestedTensor_nested_tensor_from_mask);
  NEURON_IMPL(m, "_nested_tensor_from_mask_left_aligned", at::native::NestedTensor_nested_tensor_from_mask_left_aligned);
  NEURON_IMPL(m, "_nested_from_padded", at::native::nested_from_padded_generic);
}

TORCH_LIBRARY_IMPL(aten, NestedTensorPrivateUse1, m) {
  NEURON_IMPL(m, "_transformer_encoder_layer_fwd", encoder_layer_nested);
  NEURON_IMPL(m, "to_padded_tensor", at::native::NestedTensor_to_padded_tensor_generic);
}

TORCH_LIBRARY_IMPL(_, NestedTensorPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&nested_unsupported>());
}

}  // namespace torch_neuronx
