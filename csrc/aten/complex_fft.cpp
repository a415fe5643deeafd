// FFTs: ATen's three backend primitives (_fft_c2c, _fft_r2c, _fft_c2r),
// which every torch.fft function, stft/istft and the FFT backward formulas
// reduce to. A multi-dimensional transform is one 1-d launch per dim (the
// runtime's FFT_* ops transform one dim of an N-d tensor, batched over
// the rest); the normalisation is applied by the last launch.
#include <algorithm>
#include <cmath>

#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/DeviceGuard.h>

#include "launch/launch.h"
#include "nrt/ops/complex.h"
#include "registry/variants.h"

namespace torch_neuronx {
namespace {

using at::Tensor;

// ATen's fft_norm_mode: 0 none, 1 by 1/sqrt(n), 2 by 1/n, n = the number
// of points of the whole (multi-dimensional) signal.
double norm_scale(int64_t normalization, int64_t n) {
  switch (normalization) {
    case 0: return 1.0;
    case 1: return 1.0 / std::sqrt(static_cast<double>(n));
    case 2: return 1.0 / static_cast<double>(n);
    default: TORCH_CHECK(false, "Unsupported normalization type: ", normalization);
  }
}

std::vector<int64_t> wrap_dims(const Tensor &self, c10::IntArrayRef dim) {
  TORCH_CHECK(!dim.empty(), "FFT: at least one dimension must be transformed");
  TORCH_CHECK(self.dim() <= NRT_MAX_DIMS, "neuron FFTs support at most ", NRT_MAX_DIMS, " dimensions, got ",
              self.dim());
  std::vector<int64_t> out;
  for (int64_t d : dim) {
    int64_t w = at::maybe_wrap_dim(d, self.dim());
    for (int64_t seen : out) TORCH_CHECK(seen != w, "FFT dims must be unique");
    out.push_back(w);
  }
  return out;
}

void check_real(const Tensor &t) {
  TORCH_CHECK(t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble,
                   "Unsupported dtype ", t.scalar_type());
}
void check_complex(const Tensor &t) {
  TORCH_CHECK(t.scalar_type() == at::kComplexFloat || t.scalar_type() == at::kComplexDouble,
                   "Unsupported dtype ", t.scalar_type());
}

// ---- output layouts, as the meta functions give them ------------------------------
// torch/_meta_registrations.py lays out an FFT result as PyTorch's FFT
// backends write it (_exec_fft): the batch dims first, ordered by the
// input's strides, then the transformed dims innermost, in transform order.
// A compiled graph takes later views of the result from that layout, so the
// kernels write it (they take any output strides).

// dims[0, end) sorted by the input's strides, largest first, stable (_sort_dims)
std::vector<int64_t> sort_dims(c10::IntArrayRef strides, std::vector<int64_t> dims, bool exclude_last) {
  auto end = dims.end() - (exclude_last ? 1 : 0);
  std::stable_sort(dims.begin(), end, [&](int64_t a, int64_t b) { return strides[a] > strides[b]; });
  return dims;
}

// _exec_fft's output strides for an input with `in_strides`, the result's
// sizes and the transformed dims in order.
std::vector<int64_t> exec_fft_strides(c10::IntArrayRef in_strides, c10::IntArrayRef out_sizes,
                                      const std::vector<int64_t> &dims) {
  int64_t ndim = static_cast<int64_t>(out_sizes.size());
  std::vector<bool> transformed(ndim, false);
  for (int64_t d : dims) transformed[d] = true;
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < ndim; ++i)
    if (!transformed[i]) perm.push_back(i);
  std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) { return in_strides[a] > in_strides[b]; });
  int64_t batch_dims = static_cast<int64_t>(perm.size());
  perm.insert(perm.end(), dims.begin(), dims.end());
  // the batched result [batch, signal...] is contiguous: its signal strides and batch stride
  int64_t signal = static_cast<int64_t>(dims.size());
  std::vector<int64_t> sig_stride(signal, 1);
  for (int64_t j = signal - 2; j >= 0; --j) sig_stride[j] = sig_stride[j + 1] * std::max<int64_t>(out_sizes[dims[j + 1]], 1);
  int64_t stride0 = signal ? sig_stride[0] * std::max<int64_t>(out_sizes[dims[0]], 1) : 1;
  std::vector<int64_t> out(ndim, 0);
  int64_t batch_numel = 1;
  for (int64_t i = batch_dims - 1; i >= 0; --i) {
    out[perm[i]] = batch_numel * stride0;
    batch_numel *= out_sizes[perm[i]];
  }
  for (int64_t i = batch_dims; i < ndim; ++i) out[perm[i]] = sig_stride[i - batch_dims];
  return out;
}

Tensor empty_fft(c10::IntArrayRef sizes, const std::vector<int64_t> &strides, const at::TensorOptions &opts) {
  return at::empty_strided(sizes, strides, opts);
}

// One 1-d transform of `in` along `dim` into `out` (which may be `in`:
// each line is read whole before it is written).
void launch_fft(nrt_op op, const Tensor &out, const Tensor &in, int64_t dim, bool forward, double scale) {
  nrt_launch d = new_launch(op);
  d.ndim = static_cast<int>(out.dim());
  d.noutputs = 1;
  d.ninputs = 1;
  d.compute_dtype = to_nrt_dtype(out.scalar_type());
  const Tensor *ts[2] = {&out, &in};
  for (int k = 0; k < 2; ++k) {
    nrt_operand &o = d.operands[k];
    o.data = const_cast<void *>(ts[k]->const_data_ptr());
    o.dtype = to_nrt_dtype(ts[k]->scalar_type());
    for (int j = 0; j < d.ndim; ++j) o.strides[j] = ts[k]->stride(j) * static_cast<int64_t>(ts[k]->element_size());
  }
  for (int j = 0; j < d.ndim; ++j) d.sizes[j] = out.size(j);
  d.params[0] = dim;
  d.params[1] = forward ? 1 : 0;
  d.aux[0] = in.size(dim);
  d.scalars[0].f = scale;
  launch(out.device().index(), d);
}

Tensor fft_c2c_into(Tensor, const Tensor &self, c10::IntArrayRef dim, int64_t normalization, bool forward) {
  check_complex(self);
  auto dims = wrap_dims(self, dim);
  c10::DeviceGuard guard(self.device());
  Tensor out = empty_fft(self.sizes(), exec_fft_strides(self.strides(), self.sizes(), sort_dims(self.strides(), dims, false)),
                         self.options());
  if (out.numel() == 0) return out;
  int64_t n = 1;
  for (int64_t d : dims) n *= self.size(d);
  double scale = norm_scale(normalization, n);
  for (size_t i = 0; i < dims.size(); ++i)
    launch_fft(NRT_OP(FFT_C2C), out, i == 0 ? self : out, dims[i], forward, i + 1 == dims.size() ? scale : 1.0);
  return out;
}

Tensor fft_r2c_into(Tensor, const Tensor &self, c10::IntArrayRef dim, int64_t normalization, bool onesided) {
  check_real(self);
  auto dims = wrap_dims(self, dim);
  c10::DeviceGuard guard(self.device());
  int64_t last = dims.back();
  std::vector<int64_t> sizes(self.sizes().begin(), self.sizes().end());
  if (onesided) sizes[last] = sizes[last] / 2 + 1;
  Tensor out = empty_fft(sizes, exec_fft_strides(self.strides(), sizes, sort_dims(self.strides(), dims, true)),
                         self.options().dtype(c10::toComplexType(self.scalar_type())));
  if (out.numel() == 0) return out;
  int64_t n = 1;
  for (int64_t d : dims) n *= self.size(d);
  double scale = norm_scale(normalization, n);
  // The real-to-complex pass first (it sets the output's length), then the
  // remaining dims in place.
  launch_fft(NRT_OP(FFT_R2C), out, self, last, true, dims.size() == 1 ? scale : 1.0);
  for (size_t i = 0; i + 1 < dims.size(); ++i)
    launch_fft(NRT_OP(FFT_C2C), out, out, dims[i], true, i + 2 == dims.size() ? scale : 1.0);
  return out;
}

Tensor fft_c2r_into(Tensor, const Tensor &self, c10::IntArrayRef dim, int64_t normalization, int64_t last_dim_size) {
  check_complex(self);
  auto dims = wrap_dims(self, dim);
  TORCH_CHECK(last_dim_size >= 1, "Invalid number of data points (", last_dim_size, ") specified");
  c10::DeviceGuard guard(self.device());
  int64_t last = dims.back();
  std::vector<int64_t> sizes(self.sizes().begin(), self.sizes().end());
  sizes[last] = last_dim_size;
  // the layout of the c2c result over the other dims (the meta's intermediate), then one c2r pass
  std::vector<int64_t> in_strides(self.strides().begin(), self.strides().end());
  if (dims.size() > 1)
    in_strides = exec_fft_strides(self.strides(), self.sizes(),
                                  sort_dims(self.strides(), std::vector<int64_t>(dims.begin(), dims.end() - 1), false));
  Tensor out = empty_fft(sizes, exec_fft_strides(in_strides, sizes, {last}),
                         self.options().dtype(c10::toRealValueType(self.scalar_type())));
  if (out.numel() == 0) return out;
  int64_t n = 1;
  for (int64_t d : dims) n *= sizes[d];
  double scale = norm_scale(normalization, n);
  // Inverse complex passes over the other dims (into a temporary: the
  // input is not ours to overwrite), then complex-to-real on the last.
  Tensor src = self;
  for (size_t i = 0; i + 1 < dims.size(); ++i) {
    Tensor dst = i == 0 ? at::empty(self.sizes(), self.options()) : src;
    launch_fft(NRT_OP(FFT_C2C), dst, src, dims[i], false, 1.0);
    src = dst;
  }
  launch_fft(NRT_OP(FFT_C2R), out, src, last, false, scale);
  return out;
}


}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // Each transform returns a fresh tensor; out= copies it in.
  NEURON_VARIANTS(m, fft_c2c_into, "_fft_c2c", nullptr, "_fft_c2c.out");
  NEURON_VARIANTS(m, fft_r2c_into, "_fft_r2c", nullptr, "_fft_r2c.out");
  NEURON_VARIANTS(m, fft_c2r_into, "_fft_c2r", nullptr, "_fft_c2r.out");
}

}  // namespace torch_neuronx
