// Index-remapping ops: nearest upsampling and reflection/replication
// padding. Each output position along a dim reads one input position, so
// the op is an index_select per dim with a small index vector (the map
// depends only on sizes, so it is built on the host and uploaded), and the
// backward is the matching index_add. Computation is the device's gather
// and accumulate kernels.
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/zeros.h>
#include <c10/core/DeviceGuard.h>

#include "iter_launch.h"
#include "registry.h"

namespace torch_neuronx {
namespace {

using at::Tensor;

Tensor upload_index(const std::vector<int64_t> &idx, const Tensor &like) {
  Tensor host = at::from_blob(const_cast<int64_t *>(idx.data()), {static_cast<int64_t>(idx.size())},
                              at::TensorOptions().dtype(at::kLong))
                    .clone();
  return host.to(like.device());
}

// PyTorch's nearest rule: src = min(floor(dst * scale), in - 1), with scale
// = 1/scale_factor when one was given, else in/out.
// (in float, as ATen's nearest_idx computes it, so the maps agree exactly).
std::vector<int64_t> nearest_map(int64_t in, int64_t out, std::optional<double> scale) {
  float s = (scale && *scale > 0) ? static_cast<float>(1.0 / *scale)
                                  : static_cast<float>(in) / static_cast<float>(out);
  std::vector<int64_t> m(out);
  for (int64_t i = 0; i < out; ++i) {
    if (out == in) m[i] = i;
    else if (out == 2 * in) m[i] = i >> 1;
    else m[i] = std::min(static_cast<int64_t>(std::floor(static_cast<float>(i) * s)), in - 1);
  }
  return m;
}

std::vector<int64_t> pad_map(int64_t in, int64_t before, int64_t after, bool reflect) {
  std::vector<int64_t> m;
  for (int64_t o = -before; o < in + after; ++o) {
    int64_t i = o;
    if (reflect) {
      if (i < 0) i = -i;
      if (i >= in) i = 2 * (in - 1) - i;
    } else {
      i = std::min(std::max<int64_t>(i, 0), in - 1);
    }
    m.push_back(i);
  }
  return m;
}

// Applies one index map per trailing dim (forward).
Tensor remap(const Tensor &self, const std::vector<std::vector<int64_t>> &maps) {
  c10::DeviceGuard guard(self.device());
  Tensor cur = self;
  int64_t first = self.dim() - static_cast<int64_t>(maps.size());
  for (size_t k = 0; k < maps.size(); ++k) cur = cur.index_select(first + k, upload_index(maps[k], self));
  return cur;
}

// Backward: gradients summed back through the maps (last dim first).
Tensor remap_backward(const Tensor &grad, c10::IntArrayRef input_size,
                      const std::vector<std::vector<int64_t>> &maps) {
  c10::DeviceGuard guard(grad.device());
  Tensor cur = grad;
  int64_t first = static_cast<int64_t>(input_size.size()) - static_cast<int64_t>(maps.size());
  for (int64_t k = static_cast<int64_t>(maps.size()) - 1; k >= 0; --k) {
    std::vector<int64_t> shape = cur.sizes().vec();
    shape[first + k] = input_size[first + k];
    cur = at::zeros(shape, grad.options()).index_add_(first + k, upload_index(maps[k], grad), cur);
  }
  return cur;
}

Tensor upsample_nearest2d_fn(const Tensor &self, c10::IntArrayRef out, std::optional<double> sh,
                             std::optional<double> sw) {
  TORCH_CHECK(self.dim() == 4 && out.size() == 2, "upsample_nearest2d: expected 4-D input and 2 output sizes");
  return remap(self, {nearest_map(self.size(2), out[0], sh), nearest_map(self.size(3), out[1], sw)});
}
Tensor upsample_nearest2d_backward_fn(const Tensor &grad, c10::IntArrayRef out, c10::IntArrayRef in,
                                      std::optional<double> sh, std::optional<double> sw) {
  return remap_backward(grad, in, {nearest_map(in[2], out[0], sh), nearest_map(in[3], out[1], sw)});
}
Tensor upsample_nearest1d_fn(const Tensor &self, c10::IntArrayRef out, std::optional<double> s) {
  TORCH_CHECK(self.dim() == 3 && out.size() == 1, "upsample_nearest1d: expected 3-D input and 1 output size");
  return remap(self, {nearest_map(self.size(2), out[0], s)});
}
Tensor upsample_nearest1d_backward_fn(const Tensor &grad, c10::IntArrayRef out, c10::IntArrayRef in,
                                      std::optional<double> s) {
  return remap_backward(grad, in, {nearest_map(in[2], out[0], s)});
}

std::vector<std::vector<int64_t>> pad_maps(const Tensor &self, c10::IntArrayRef padding, bool reflect) {
  int64_t nd = static_cast<int64_t>(padding.size()) / 2;
  TORCH_CHECK(self.dim() >= nd + 1, "padding needs a ", nd + 1, "-D or ", nd + 2, "-D input, got ", self.dim(), "-D");
  std::vector<std::vector<int64_t>> maps;
  for (int64_t k = 0; k < nd; ++k) {  // padding lists the last dim first
    int64_t d = self.dim() - nd + k;
    int64_t before = padding[2 * (nd - 1 - k)], after = padding[2 * (nd - 1 - k) + 1];
    int64_t in = self.size(d);
    if (reflect) {
      TORCH_CHECK(before < in && after < in, "Argument #4: Padding size should be less than the corresponding input "
                  "dimension, but got: padding (", before, ", ", after, ") at dimension ", d, " of input ", self.sizes());
    } else {
      TORCH_CHECK(in > 0, "replication padding needs a non-empty input dimension");
    }
    maps.push_back(pad_map(in, before, after, reflect));
  }
  return maps;
}

#define DEFINE_PAD(name, REFLECT)                                                                   \
  Tensor name##_fn(const Tensor &self, c10::IntArrayRef padding) {                                 \
    return remap(self, pad_maps(self, padding, REFLECT));                                          \
  }                                                                                                \
  Tensor name##_backward_fn(const Tensor &grad, const Tensor &self, c10::IntArrayRef padding) {    \
    return remap_backward(grad, self.sizes(), pad_maps(self, padding, REFLECT));                   \
  }
DEFINE_PAD(reflection_pad, true)
DEFINE_PAD(replication_pad, false)
#undef DEFINE_PAD

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  NEURON_IMPL(m, "upsample_nearest2d", upsample_nearest2d_fn);
  NEURON_IMPL(m, "upsample_nearest2d_backward", upsample_nearest2d_backward_fn);
  NEURON_IMPL(m, "upsample_nearest1d", upsample_nearest1d_fn);
  NEURON_IMPL(m, "upsample_nearest1d_backward", upsample_nearest1d_backward_fn);
  for (const char *n : {"reflection_pad1d", "reflection_pad2d", "reflection_pad3d"}) {
    NEURON_IMPL(m, n, reflection_pad_fn);
  }
  for (const char *n : {"reflection_pad1d_backward", "reflection_pad2d_backward", "reflection_pad3d_backward"}) {
    NEURON_IMPL(m, n, reflection_pad_backward_fn);
  }
  for (const char *n : {"replication_pad1d", "replication_pad2d", "replication_pad3d"}) {
    NEURON_IMPL(m, n, replication_pad_fn);
  }
  for (const char *n : {"replication_pad1d_backward", "replication_pad2d_backward", "replication_pad3d_backward"}) {
    NEURON_IMPL(m, n, replication_pad_backward_fn);
  }
}

}  // namespace torch_neuronx
