// Resampling ops on the device: interpolation (nearest, nearest-exact,
// linear/bilinear/trilinear, bicubic, antialiased bilinear/bicubic; 1-3
// spatial dims, with backward), max unpooling, im2col / col2im
// (nn.functional.unfold / fold), Tensor.unfold's backward, and
// reflection/replication padding.
//
// Interpolation, unpooling and im2col/col2im are RESAMPLE kernels
// (kernels/resample*.c): this file checks arguments with ATen's messages,
// allocates outputs and describes the tensors. Padding is an index_select
// per dim with a small host-built index vector (the map depends only on
// sizes) and its backward the matching index_add; unfold's backward is a
// sum of strided native adds, one per window offset.
#include <ATen/ops/adaptive_max_pool2d_backward.h>
#include <ATen/ops/adaptive_max_pool3d_backward.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/zeros.h>
#include <ATen/Parallel.h>
#include <ATen/native/im2col_shape_check.h>
#include <c10/core/DeviceGuard.h>

#include "launch/launch.h"
#include "nrt/ops/resample.h"
#include "registry/variants.h"

namespace torch_neuronx {
namespace {

using at::Tensor;
using c10::IntArrayRef;

Tensor upload_index(const std::vector<int64_t> &idx, const Tensor &like) {
  Tensor host = at::from_blob(const_cast<int64_t *>(idx.data()), {static_cast<int64_t>(idx.size())},
                              at::TensorOptions().dtype(at::kLong))
                    .clone();
  return host.to(like.device());
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

// ATen's checks of reflection_pad{1,2,3}d / replication_pad{1,2,3}d, in its
// order (padding::check_valid_input, the reflection bounds from the last dim
// out, then the output size: every dim too small in 1-d, all of them in 2-d
// and 3-d), with its messages.
void check_pad(const Tensor &self, c10::IntArrayRef padding, bool reflect) {
  int64_t nd = static_cast<int64_t>(padding.size()) / 2;
  int64_t ndim = self.dim();
  bool batch = ndim == nd + 2, valid = batch || ndim == nd + 1;
  for (int64_t d = batch ? 1 : 0; valid && d < ndim; ++d) valid = self.size(d) != 0;
  TORCH_CHECK(valid, "Expected ", nd + 1, "D or ", nd + 2,
              "D (batch mode) tensor with possibly 0 batch size and other non-zero dimensions for input, but got: ",
              self.sizes());
  std::vector<int64_t> in, out;  // the last dim first, as padding lists them
  for (int64_t k = 0; k < nd; ++k) {
    int64_t d = ndim - 1 - k;
    int64_t before = padding[2 * k], after = padding[2 * k + 1];
    in.push_back(self.size(d));
    out.push_back(self.size(d) + before + after);
    if (reflect) {
      TORCH_CHECK(before < in[k] && after < in[k], "Argument #", 4 + 2 * k, ": Padding size should be less than the "
                  "corresponding input dimension, but got: padding (", before, ", ", after, ") at dimension ",
                  d, " of input ", self.sizes());
    }
  }
  bool fits = false;
  for (int64_t o : out) fits = fits || o >= 1;
  if (nd == 1) {
    TORCH_CHECK(fits, "input (W: ", in[0], ") is too small. Calculated output W: ", out[0]);
  } else if (nd == 2) {
    TORCH_CHECK(fits, "input (H: ", in[1], ", W: ", in[0], reflect ? ")" : " )",
                " is too small. Calculated output H: ", out[1], " W: ", out[0]);
  } else {
    TORCH_CHECK(fits, "input (D: ", in[2], " H: ", in[1], ", W: ", in[0], ") is too small. Calculated output D: ",
                out[2], " H: ", out[1], " W: ", out[0]);
  }
  // The CPU allocates that output: one dim may still be negative in 2-d and 3-d.
  std::vector<int64_t> shape = self.sizes().vec();
  for (int64_t k = 0; k < nd; ++k) shape[ndim - 1 - k] = out[k];
  for (int64_t o : out) {
    TORCH_CHECK(o >= 0, "Trying to create tensor with negative dimension ", o, ": ", c10::IntArrayRef(shape));
  }
  // then its kernel's dispatch: every dtype but bool
  TORCH_CHECK_NOT_IMPLEMENTED(self.scalar_type() != at::kBool, "\"", reflect ? "reflection" : "replication", "_pad",
                              nd, "d\" not implemented for '", self.scalar_type(), "'");
}

std::vector<std::vector<int64_t>> pad_maps(const Tensor &self, c10::IntArrayRef padding, bool reflect) {
  int64_t nd = static_cast<int64_t>(padding.size()) / 2;
  std::vector<std::vector<int64_t>> maps;
  for (int64_t k = 0; k < nd; ++k) {  // padding lists the last dim first
    int64_t d = self.dim() - nd + k;
    int64_t before = padding[2 * (nd - 1 - k)], after = padding[2 * (nd - 1 - k) + 1];
    maps.push_back(pad_map(self.size(d), before, after, reflect));
  }
  return maps;
}

#define DEFINE_PAD(name, REFLECT)                                                                   \
  Tensor name##_fn(const Tensor &self, c10::IntArrayRef padding) {                                 \
    check_pad(self, padding, REFLECT);                                                             \
    return remap(self, pad_maps(self, padding, REFLECT));                                          \
  }                                                                                                \
  Tensor name##_backward_fn(const Tensor &grad, const Tensor &self, c10::IntArrayRef padding) {    \
    return remap_backward(grad, self.sizes(), pad_maps(self, padding, REFLECT));                   \
  }
DEFINE_PAD(reflection_pad, true)
DEFINE_PAD(replication_pad, false)
#undef DEFINE_PAD

// ---- shared helpers ------------------------------------------------------------

// Sizes {N, C, O[3], I[3]} from a batched output-side and input-side tensor.
void set_sizes8(nrt_launch &d, const Tensor &o_side, const Tensor &i_side) {
  int64_t nsp = o_side.dim() - 2;
  d.ndim = 8;
  d.sizes[0] = o_side.size(0);
  d.sizes[1] = o_side.size(1);
  for (int64_t j = 0; j < 3; ++j) {
    bool used = j >= 3 - nsp;
    d.sizes[2 + j] = used ? o_side.size(2 + j - (3 - nsp)) : 1;
    d.sizes[5 + j] = used ? i_side.size(2 + j - (3 - nsp)) : 1;
  }
}

// out= tensors: dtype must match; resized (keeping memory when it fits).
void resize_out(const Tensor &out, IntArrayRef shape, const Tensor &like, at::ScalarType dtype,
                at::MemoryFormat fmt = at::MemoryFormat::Contiguous) {
  TORCH_CHECK(out.scalar_type() == dtype, "Expected out tensor to have dtype ", dtype, ", but got ",
              out.scalar_type(), " instead");
  TORCH_CHECK(out.device() == like.device(), "Expected out tensor on ", like.device(), ", but got ", out.device());
  if (out.sizes() != shape) out.resize_(shape, fmt);
}

// The result of an op with an optional out= tensor: `out` resized, or (out
// undefined) a new tensor like `like` in `dtype` and memory format `fmt`.
Tensor new_result(const Tensor &out, IntArrayRef shape, const Tensor &like, at::ScalarType dtype,
                  at::MemoryFormat fmt = at::MemoryFormat::Contiguous) {
  if (!out.defined()) return at::empty(shape, like.options().dtype(dtype).memory_format(fmt));
  resize_out(out, shape, like, dtype, fmt);
  return out;
}

// A RESAMPLE launch over {N, C, O[3], I[3]} computing in `compute`'s dtype;
// the caller describes the operands.
nrt_launch resample_launch(nrt_op op, const Tensor &o_side, const Tensor &i_side, int noutputs, int ninputs,
                           const Tensor &compute) {
  nrt_launch d = new_launch(op);
  set_sizes8(d, o_side, i_side);
  d.noutputs = noutputs;
  d.ninputs = ninputs;
  d.compute_dtype = to_nrt_dtype(compute.scalar_type());
  return d;
}

void warn_if_double(const Tensor &t) {
  if (t.scalar_type() == at::kDouble || t.scalar_type() == at::kComplexDouble) warn_float64_once();
}

// ---- interpolation -------------------------------------------------------------

const char *interp_name(int mode, int64_t nsp, bool backward) {
  static const char *names[6][3][2] = {
      {{"upsample_nearest1d", "upsample_nearest1d_backward"},
       {"upsample_nearest2d", "upsample_nearest2d_backward"},
       {"upsample_nearest3d", "upsample_nearest3d_backward"}},
      {{"_upsample_nearest_exact1d", "_upsample_nearest_exact1d_backward"},
       {"_upsample_nearest_exact2d", "_upsample_nearest_exact2d_backward"},
       {"_upsample_nearest_exact3d", "_upsample_nearest_exact3d_backward"}},
      {{"upsample_linear1d", "upsample_linear1d_backward"},
       {"upsample_bilinear2d", "upsample_bilinear2d_backward"},
       {"upsample_trilinear3d", "upsample_trilinear3d_backward"}},
      {{"", ""}, {"upsample_bicubic2d", "upsample_bicubic2d_backward"}, {"", ""}},
      {{"", ""}, {"_upsample_bilinear2d_aa", "_upsample_bilinear2d_aa_backward"}, {"", ""}},
      {{"", ""}, {"_upsample_bicubic2d_aa", "_upsample_bicubic2d_aa_backward"}, {"", ""}},
  };
  return names[mode][nsp - 1][backward ? 1 : 0];
}

// ATen's upsample_Nd_common_check: sizes counts, positive extents.
void check_interp_sizes(const char *op, int64_t nsp, IntArrayRef input_size, IntArrayRef output_size) {
  TORCH_CHECK(static_cast<int64_t>(output_size.size()) == nsp, "It is expected output_size equals to ", nsp,
              ", but got size ", output_size.size());
  TORCH_CHECK(static_cast<int64_t>(input_size.size()) == nsp + 2, "It is expected input_size equals to ", nsp + 2,
              ", but got size ", input_size.size());
  bool ok = true;
  for (int64_t j = 0; j < nsp; ++j) ok = ok && input_size[2 + j] > 0 && output_size[j] > 0;
  TORCH_CHECK(ok, op, ": Input and output sizes should be greater than 0, but got input ",
              input_size.slice(2), " output ", output_size);
}

struct Scales {
  std::optional<double> s[3];
};

void set_interp_params(nrt_launch &d, int mode, bool align, int64_t nsp, const Scales &sc) {
  d.params[0] = mode;
  d.params[1] = align ? 1 : 0;
  d.params[2] = nsp;  // the leading 3 - nsp dims are not interpolated
  for (int64_t j = 0; j < 3; ++j) {
    int64_t k = j - (3 - nsp);  // index into the op's scales (last nsp dims)
    d.scalars[j].f = (k >= 0 && sc.s[k]) ? *sc.s[k] : 0.0;
  }
}

// Which of the CPU's float kernels a bilinear/trilinear forward takes
// (UpSampleKernel.cpp), as INTERP's p3: 0 for its nested Interpolate, else
// the float vector width of cpu_upsample_linear_channels_last, which it
// takes for a channels-last input of more than 3 channels and, bilinear
// only, for outputs with OH + OW <= 128 or (on one thread) 3 channels.
// The lanes and the scalar tail sum in different orders, so the width is
// the CPU build's: 8 floats, as UpSampleKernel.cpp registers no AVX-512
// kernel (its stubs run the AVX2 build, or the default one, whose
// Vectorized<float> is 8 wide too, on AVX-512 hosts; probed per channel
// for C = 4..28: channels below C - C % 8 take the lanes' order).
int64_t cpu_linear_lanes(const Tensor &self, const Tensor &result, int64_t nsp) {
  int64_t c = self.size(1);
  bool cl = nsp == 2 ? (self.is_contiguous(at::MemoryFormat::ChannelsLast) && c > 3) ||
                           result.size(-2) + result.size(-1) <= 128 || (at::get_num_threads() == 1 && c == 3)
                     : self.is_contiguous(at::MemoryFormat::ChannelsLast3d) && c > 3;
  if (!cl) return 0;
  return 8;
}

// INTERP's p3 for the nearest modes: 1 when the CPU's forward takes its
// generic kernel (UpSampleKernel.cpp: 1-d always; 2-d unless a channels-last
// input of more than 3 channels or OH + OW <= 128; 3-d unless channels-last
// of more than 3 channels), whose indices do not special-case the equal and
// doubled sizes (nearest_idx, of its channels-last kernel, does).
int64_t cpu_nearest_generic(const Tensor &self, const Tensor &result, int64_t nsp) {
  int64_t c = self.size(1);
  if (nsp == 1) return 1;
  bool cl = nsp == 2 ? (self.is_contiguous(at::MemoryFormat::ChannelsLast) && c > 3) ||
                           result.size(-2) + result.size(-1) <= 128
                     : self.is_contiguous(at::MemoryFormat::ChannelsLast3d) && c > 3;
  return cl ? 0 : 1;
}

bool interp_dtype_ok(int mode, int64_t nsp, at::ScalarType st) {
  if (at::isFloatingType(st)) return true;
  if (st != at::kByte) return false;
  // the CPU's nearest kernels take uint8, and its fixed-point image kernels
  // 2-d bilinear and bicubic (plain or antialiased); not linear1d/trilinear
  return mode == NRT_INTERP_NEAREST || mode == NRT_INTERP_NEAREST_EXACT || nsp == 2;
}

bool is_antialiased(int mode) { return mode == NRT_INTERP_AA_LINEAR || mode == NRT_INTERP_AA_CUBIC; }

// The CPU's uint8 bilinear/bicubic kernel for up to 4 channels (the AVX2
// one, which x86 builds of PyTorch run on any AVX2 host) unpacks a channels-first input to 4 channels
// but writes straight into an output that is also channels-last contiguous;
// with 3 channels the vertical pass then fails its own internal assert. A
// contiguous 3-channel input resized to 1x1 with a new height is that case.
void check_uint8_avx_assert(const char *op, const Tensor &self, const Tensor &result) {
  bool unpacked = self.is_contiguous() && !self.is_contiguous(at::MemoryFormat::ChannelsLast);
  bool packed_out = result.is_contiguous(at::MemoryFormat::ChannelsLast);
  bool vertical = result.size(2) != self.size(2);
  TORCH_CHECK(!(self.size(1) == 3 && unpacked && packed_out && vertical),
              "num_channels == unpacked_output.size(0) INTERNAL ASSERT FAILED (as the CPU's uint8 ", op,
              " kernel fails it for a 3-channel channels-first input resized to ", result.sizes(), ")");
}

Tensor interp_forward(int mode, int64_t nsp, const Tensor &self, IntArrayRef output_size, bool align,
                      const Scales &sc, const Tensor &out) {
  const char *op = interp_name(mode, nsp, false);
  check_interp_sizes(op, nsp, self.sizes(), output_size);
  TORCH_CHECK(self.numel() != 0 || [&] {
    for (int64_t j = 1; j < self.dim(); ++j)
      if (self.size(j) == 0) return false;
    return true;
  }(), "Non-empty ", nsp + 2, "D data tensor expected but got a tensor with sizes ", self.sizes());
  std::vector<int64_t> shape{self.size(0), self.size(1)};
  for (int64_t v : output_size) shape.push_back(v);
  // The CPU's antialiased kernels copy an input whose size does not change
  // before looking at its dtype, so every dtype passes there.
  bool same_size = IntArrayRef(shape) == self.sizes();
  TORCH_CHECK_NOT_IMPLEMENTED(interp_dtype_ok(mode, nsp, self.scalar_type()) || (is_antialiased(mode) && same_size),
                              "\"", op, "\" not implemented for '", self.scalar_type(), "'");
  warn_if_double(self);
  c10::DeviceGuard guard(self.device());
  Tensor result = new_result(out, shape, self, self.scalar_type(), self.suggest_memory_format());
  if (result.numel() == 0) return result;
  if (self.scalar_type() == at::kByte && !same_size && mode != NRT_INTERP_NEAREST && mode != NRT_INTERP_NEAREST_EXACT &&
      self.size(1) <= 4)
    check_uint8_avx_assert(op, self, result);
  if (is_antialiased(mode) && same_size) return result.copy_(self);
  nrt_launch d = resample_launch(NRT_OP(INTERP), result, self, 1, 1, self);
  set_operand_5d(d.operands[0], result);
  set_operand_5d(d.operands[1], self);
  set_interp_params(d, mode, align, nsp, sc);
  if (mode == NRT_INTERP_LINEAR && nsp >= 2) d.params[3] = cpu_linear_lanes(self, result, nsp);
  if (mode == NRT_INTERP_NEAREST) d.params[3] = cpu_nearest_generic(self, result, nsp);
  launch(self.device().index(), d);
  return result;
}

Tensor interp_backward(int mode, int64_t nsp, const Tensor &grad_output, IntArrayRef output_size,
                       IntArrayRef input_size, bool align, const Scales &sc, const Tensor &out) {
  const char *op = interp_name(mode, nsp, true);
  check_interp_sizes(op, nsp, input_size, output_size);
  TORCH_CHECK(grad_output.dim() == nsp + 2, op, ": Expected grad_output to be a tensor of dimension ", nsp + 2,
              " but got: dimension ", grad_output.dim());
  for (int64_t j = 0; j < nsp + 2; ++j) {
    int64_t want = j < 2 ? input_size[j] : output_size[j - 2];
    TORCH_CHECK(grad_output.size(j) == want, op, ": Expected grad_output to have size ", want, " at dimension ", j,
                ", but got size ", grad_output.size(j));
  }
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(grad_output.scalar_type()), "\"", op, "\" not implemented for '",
              grad_output.scalar_type(), "'");
  warn_if_double(grad_output);
  c10::DeviceGuard guard(grad_output.device());
  Tensor result =
      new_result(out, input_size, grad_output, grad_output.scalar_type(), grad_output.suggest_memory_format());
  if (result.numel() == 0) return result;
  nrt_launch d = resample_launch(NRT_OP(INTERP_BACKWARD), grad_output, result, 1, 1, grad_output);
  set_operand_5d(d.operands[0], result);
  set_operand_5d(d.operands[1], grad_output);
  set_interp_params(d, mode, align, nsp, sc);
  launch(grad_output.device().index(), d);
  return result;
}

using OptD = std::optional<double>;

// The into functions of one op and its backward. The argument lists differ
// only in align_corners (absent for nearest modes) and the number of scales.
#define INTERP_OPS_ALIGN(NAME, MODE, NSP, SCALE_PARAMS, SCALE_ARGS)                                         \
  Tensor NAME##_into(Tensor out, const Tensor &self, IntArrayRef osize, bool align, SCALE_PARAMS) {         \
    return interp_forward(MODE, NSP, self, osize, align, Scales{SCALE_ARGS}, out);                         \
  }                                                                                                        \
  Tensor NAME##_backward_into(Tensor out, const Tensor &g, IntArrayRef osize, IntArrayRef isize, bool align, \
                              SCALE_PARAMS) {                                                              \
    return interp_backward(MODE, NSP, g, osize, isize, align, Scales{SCALE_ARGS}, out);                    \
  }

#define INTERP_OPS_NEAREST(NAME, MODE, NSP, SCALE_PARAMS, SCALE_ARGS)                                       \
  Tensor NAME##_into(Tensor out, const Tensor &self, IntArrayRef osize, SCALE_PARAMS) {                     \
    return interp_forward(MODE, NSP, self, osize, false, Scales{SCALE_ARGS}, out);                         \
  }                                                                                                        \
  Tensor NAME##_backward_into(Tensor out, const Tensor &g, IntArrayRef osize, IntArrayRef isize,            \
                              SCALE_PARAMS) {                                                              \
    return interp_backward(MODE, NSP, g, osize, isize, false, Scales{SCALE_ARGS}, out);                    \
  }

#define P1 OptD sw
#define A1 {sw}
#define P2 OptD sh, OptD sw
#define A2 {sh, sw}
#define P3 OptD sd, OptD sh, OptD sw
#define A3 {sd, sh, sw}
#define COMMA ,
INTERP_OPS_NEAREST(upsample_nearest1d, NRT_INTERP_NEAREST, 1, P1, A1)
INTERP_OPS_NEAREST(upsample_nearest2d, NRT_INTERP_NEAREST, 2, OptD sh COMMA OptD sw, A2)
INTERP_OPS_NEAREST(upsample_nearest3d, NRT_INTERP_NEAREST, 3, OptD sd COMMA OptD sh COMMA OptD sw, A3)
INTERP_OPS_NEAREST(upsample_nearest_exact1d, NRT_INTERP_NEAREST_EXACT, 1, P1, A1)
INTERP_OPS_NEAREST(upsample_nearest_exact2d, NRT_INTERP_NEAREST_EXACT, 2, OptD sh COMMA OptD sw, A2)
INTERP_OPS_NEAREST(upsample_nearest_exact3d, NRT_INTERP_NEAREST_EXACT, 3, OptD sd COMMA OptD sh COMMA OptD sw, A3)
INTERP_OPS_ALIGN(upsample_linear1d, NRT_INTERP_LINEAR, 1, P1, A1)
INTERP_OPS_ALIGN(upsample_bilinear2d, NRT_INTERP_LINEAR, 2, OptD sh COMMA OptD sw, A2)
INTERP_OPS_ALIGN(upsample_trilinear3d, NRT_INTERP_LINEAR, 3, OptD sd COMMA OptD sh COMMA OptD sw, A3)
INTERP_OPS_ALIGN(upsample_bicubic2d, NRT_INTERP_CUBIC, 2, OptD sh COMMA OptD sw, A2)
INTERP_OPS_ALIGN(upsample_bilinear2d_aa, NRT_INTERP_AA_LINEAR, 2, OptD sh COMMA OptD sw, A2)
INTERP_OPS_ALIGN(upsample_bicubic2d_aa, NRT_INTERP_AA_CUBIC, 2, OptD sh COMMA OptD sw, A2)
#undef P1
#undef A1
#undef P2
#undef A2
#undef P3
#undef A3
#undef COMMA

// ---- max unpooling -------------------------------------------------------------

Tensor max_unpool_into(int64_t nsp, const Tensor &self, const Tensor &indices, IntArrayRef output_size,
                       const Tensor &out) {
  const char *op = nsp == 2 ? "max_unpooling2d" : "max_unpooling3d";
  TORCH_CHECK(indices.scalar_type() == at::kLong, "elements in indices should be type int64 but got: ",
              indices.scalar_type());
  TORCH_CHECK(static_cast<int64_t>(output_size.size()) == nsp, "There should be exactly ",
              nsp == 2 ? "two elements (height, width)" : "three elements (depth, height, width)",
              " in output_size, but got ", output_size.size(), " elements.");
  TORCH_CHECK(self.dim() == nsp + 1 || self.dim() == nsp + 2, "Input to ", op, " should be a ", nsp + 1, "d or ",
              nsp + 2, "d Tensor, but got a tensor with ", self.dim(), " dimensions.");
  TORCH_CHECK(self.sizes() == indices.sizes(), "Expected shape of indices to be same as that of the input tensor (",
              self.sizes(), ") but got indices tensor with shape: ", indices.sizes());
  for (int64_t j = self.dim() == nsp + 2 ? 1 : 0; j < self.dim(); ++j)
    TORCH_CHECK(self.size(j) > 0, op, "_forward_out_cpu(): Expected input to have non-zero size for non-batch "
                "dimensions, but got ", self.sizes(), " with dimension ", j, " being empty.");
  TORCH_CHECK(self.device() == indices.device(), op, ": indices must be on ", self.device(), ", got ",
              indices.device());
  warn_if_double(self);
  c10::DeviceGuard guard(self.device());
  bool unbatched = self.dim() == nsp + 1;
  std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end() - nsp);
  for (int64_t v : output_size) shape.push_back(v);
  // contiguous whatever the input's layout, as CUDA and the meta function (the
  // decomposition) give it; the CPU keeps a channels_last input's format
  Tensor result = new_result(out, shape, self, self.scalar_type(), at::MemoryFormat::Contiguous);
  if (result.numel() == 0) return result;
  Tensor yb = unbatched ? result.unsqueeze(0) : result;
  Tensor xb = unbatched ? self.unsqueeze(0) : self;
  Tensor ib = unbatched ? indices.unsqueeze(0) : indices;
  nrt_launch d = resample_launch(NRT_OP(MAX_UNPOOL), yb, xb, 1, 2, self);
  set_operand_5d(d.operands[0], yb);
  set_operand_5d(d.operands[1], xb);
  set_operand_5d(d.operands[2], ib);
  launch(self.device().index(), d);
  return result;
}

void check_unpool3d_args(IntArrayRef stride, IntArrayRef padding) {
  TORCH_CHECK(stride.size() == 3, "There should be exactly three elements (depth, height, width) in stride, but got: ",
              stride.size(), " elements.");
  TORCH_CHECK(padding.size() == 3, "There should be exactly three elements (depth, height, width) in padding, but "
              "got: ", padding.size(), " elements.");
  TORCH_CHECK(stride[0] > 0 && stride[1] > 0 && stride[2] > 0, "strides should be greater than zero, but got stride: ",
              stride);
}

Tensor max_unpool2d_into(Tensor out, const Tensor &self, const Tensor &indices, IntArrayRef output_size) {
  return max_unpool_into(2, self, indices, output_size, out);
}
Tensor max_unpool3d_into(Tensor out, const Tensor &self, const Tensor &indices, IntArrayRef output_size,
                         IntArrayRef stride, IntArrayRef padding) {
  check_unpool3d_args(stride, padding);
  return max_unpool_into(3, self, indices, output_size, out);
}


// ---- im2col / col2im -------------------------------------------------------------

struct Fold {
  int64_t kh, kw, dh, dw, ph, pw, sh, sw;
};

Fold make_fold(IntArrayRef kernel, IntArrayRef dilation, IntArrayRef padding, IntArrayRef stride) {
  TORCH_CHECK(kernel.size() == 2, "It is expected kernel_size equals to 2, but got size ", kernel.size());
  TORCH_CHECK(dilation.size() == 2, "It is expected dilation equals to 2, but got size ", dilation.size());
  TORCH_CHECK(padding.size() == 2, "It is expected padding equals to 2, but got size ", padding.size());
  TORCH_CHECK(stride.size() == 2, "It is expected stride equals to 2, but got size ", stride.size());
  Fold f{kernel[0], kernel[1], dilation[0], dilation[1], padding[0], padding[1], stride[0], stride[1]};
  TORCH_CHECK(f.kw > 0 && f.kh > 0, "kernel size should be greater than zero, but got kernel_height: ", f.kh,
              " kernel_width: ", f.kw);
  TORCH_CHECK(f.dw > 0 && f.dh > 0, "dilation should be greater than zero, but got dilation_height: ", f.dh,
              " dilation_width: ", f.dw);
  TORCH_CHECK(f.pw >= 0 && f.ph >= 0, "padding should be non-negative, but got pad_height: ", f.ph, " pad_width: ",
              f.pw);
  TORCH_CHECK(f.sw > 0 && f.sh > 0, "stride should be greater than zero, but got stride_height: ", f.sh,
              " stride_width: ", f.sw);
  return f;
}

// Sliding-block counts along h and w for an image of ih x iw.
// ATen's count rounds down (a window that does not fit gives 0, not the 1
// that C's division toward zero would).
std::pair<int64_t, int64_t> fold_blocks(const Fold &f, int64_t ih, int64_t iw) {
  return {at::native::sliding_window_count(ih, f.ph, f.dh, f.kh, f.sh),
          at::native::sliding_window_count(iw, f.pw, f.dw, f.kw, f.sw)};
}

void fold_launch(nrt_op op, const Fold &f, const Tensor &colb, const Tensor &imb, int64_t oh, int64_t ow,
                 const Tensor &out_side, const Tensor &in_side) {
  nrt_launch d = new_launch(op);
  d.ndim = 8;
  int64_t C = imb.size(1);
  int64_t sizes[8] = {imb.size(0), C, oh, ow, imb.size(2), imb.size(3), f.kh, f.kw};
  for (int j = 0; j < 8; ++j) d.sizes[j] = sizes[j];
  int64_t aux[6] = {f.dh, f.dw, f.ph, f.pw, f.sh, f.sw};
  for (int j = 0; j < 6; ++j) d.aux[j] = aux[j];
  // col [N, C*KH*KW, OH*OW] as {n, c, kh, kw, oh, ow}; image {n, c, h, w}
  auto put_col = [&](nrt_operand &o) {
    int64_t es = static_cast<int64_t>(colb.element_size());
    o.data = const_cast<void *>(colb.const_data_ptr());
    o.dtype = to_nrt_dtype(colb.scalar_type());
    int64_t s1 = colb.stride(1) * es, s2 = colb.stride(2) * es;
    int64_t st[6] = {colb.stride(0) * es, f.kh * f.kw * s1, f.kw * s1, s1, ow * s2, s2};
    for (int j = 0; j < 6; ++j) o.strides[j] = st[j];
  };
  auto put_im = [&](nrt_operand &o) {
    int64_t es = static_cast<int64_t>(imb.element_size());
    o.data = const_cast<void *>(imb.const_data_ptr());
    o.dtype = to_nrt_dtype(imb.scalar_type());
    for (int j = 0; j < 4; ++j) o.strides[j] = imb.stride(j) * es;
  };
  if (op == NRT_OP(IM2COL)) {
    put_col(d.operands[0]);
    put_im(d.operands[1]);
  } else {
    put_im(d.operands[0]);
    put_col(d.operands[1]);
  }
  d.noutputs = 1;
  d.ninputs = 1;
  d.compute_dtype = d.operands[0].dtype;
  (void)out_side;
  (void)in_side;
  // Complex data: im2col moves element bits (its zero padding is 0 + 0i);
  // col2im sums, which is a sum of each part on its own.
  launch_complex_as(imb.device().index(), d, op == NRT_OP(IM2COL) ? ComplexAs::Bits : ComplexAs::Parts);
}

Tensor im2col_into(Tensor out, const Tensor &self, IntArrayRef kernel, IntArrayRef dilation, IntArrayRef padding,
                   IntArrayRef stride) {
  Fold f = make_fold(kernel, dilation, padding, stride);
  TORCH_CHECK((self.dim() == 3 && self.size(0) != 0 && self.size(1) != 0 && self.size(2) != 0) ||
                  (self.dim() == 4 && self.size(1) != 0 && self.size(2) != 0 && self.size(3) != 0),
              "Expected 3D or 4D (batch mode) tensor with possibly 0 batch size and other non-zero dimensions for "
              "input, but got: ", self.sizes());
  c10::DeviceGuard guard(self.device());
  bool unbatched = self.dim() == 3;
  Tensor xb = unbatched ? self.unsqueeze(0) : self;
  auto [oh, ow] = fold_blocks(f, xb.size(2), xb.size(3));
  TORCH_CHECK(oh >= 1 && ow >= 1, "Given input with spatial size (", xb.size(2), ", ", xb.size(3),
              "), kernel_size=(", f.kh, ", ", f.kw, "), dilation=(", f.dh, ", ", f.dw, "), padding=(", f.ph, ", ",
              f.pw, "), calculated shape of the array of sliding blocks as (", oh, ", ", ow,
              "), but its components must be at least one.");
  // After the shape checks, as the CPU: its kernel covers floating, complex
  // (not complex32) and bool dtypes.
  TORCH_CHECK_NOT_IMPLEMENTED(!at::isIntegralType(self.scalar_type(), /*includeBool=*/false) &&
                                  self.scalar_type() != at::kComplexHalf,
                              "\"im2col_out_cpu\" not implemented for '", self.scalar_type(), "'");
  std::vector<int64_t> shape{xb.size(1) * f.kh * f.kw, oh * ow};
  if (!unbatched) shape.insert(shape.begin(), xb.size(0));
  Tensor result = new_result(out, shape, self, self.scalar_type());
  if (result.numel() == 0) return result;
  Tensor colb = unbatched ? result.unsqueeze(0) : result;
  fold_launch(NRT_OP(IM2COL), f, colb, xb, oh, ow, colb, xb);
  return result;
}

Tensor col2im_into(Tensor out, const Tensor &self, IntArrayRef output_size, IntArrayRef kernel,
                   IntArrayRef dilation, IntArrayRef padding, IntArrayRef stride) {
  TORCH_CHECK(output_size.size() == 2, "It is expected output_size equals to 2, but got size ", output_size.size());
  Fold f = make_fold(kernel, dilation, padding, stride);
  TORCH_CHECK((self.dim() == 2 && self.size(0) != 0 && self.size(1) != 0) ||
                  (self.dim() == 3 && self.size(1) != 0 && self.size(2) != 0),
              "Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and non-zero dimensions "
              "for input, but got: ", self.sizes());
  // the CPU's kernel: floating and complex dtypes (not complex32), no bool
  TORCH_CHECK_NOT_IMPLEMENTED(self.scalar_type() != at::kBool && self.scalar_type() != at::kComplexHalf,
                              "\"col2im_out_cpu\" not implemented for '", self.scalar_type(), "'");
  int64_t bd = self.dim() == 3 ? 1 : 0;
  int64_t n_in = self.size(bd), L = self.size(bd + 1);
  TORCH_CHECK(n_in % (f.kw * f.kh) == 0, "Expected size of input's dimension 1 to be divisible by the product of "
              "kernel_size, but got input.size(1)=", n_in, " and kernel_size=(", f.kh, ", ", f.kw, ")");
  auto [oh, ow] = fold_blocks(f, output_size[0], output_size[1]);
  TORCH_CHECK(oh >= 1 && ow >= 1 && L == oh * ow, "Given output_size=(", output_size[0], ", ", output_size[1],
              "), kernel_size=(", f.kh, ", ", f.kw, "), dilation=(", f.dh, ", ", f.dw, "), padding=(", f.ph, ", ",
              f.pw, "), stride=(", f.sh, ", ", f.sw, "), expected size of input's dimension 2 to match the "
              "calculated number of sliding blocks ", oh, " * ", ow, " = ", oh * ow, ", but got input.size(2)=", L,
              ".");
  warn_if_double(self);
  c10::DeviceGuard guard(self.device());
  int64_t C = n_in / (f.kh * f.kw);
  std::vector<int64_t> shape{C, output_size[0], output_size[1]};
  if (bd) shape.insert(shape.begin(), self.size(0));
  Tensor result = new_result(out, shape, self, self.scalar_type());
  if (result.numel() == 0) return result;
  Tensor colb = bd ? self : self.unsqueeze(0);
  Tensor imb = bd ? result : result.unsqueeze(0);
  fold_launch(NRT_OP(COL2IM), f, colb, imb, oh, ow, imb, colb);
  return result;
}


// ---- Tensor.unfold backward --------------------------------------------------------

// grad_in has input's shape with `dim` replaced by the window count and a
// trailing window axis of length `size`; window w, offset k read input
// position w*step + k. Every offset k is one strided add of grad_in's k-th
// slice into grad_input (native adds, summed in k order).
Tensor unfold_backward_into(Tensor result, const Tensor &grad_in, IntArrayRef input_sizes, int64_t dim, int64_t size,
                            int64_t step) {
  c10::DeviceGuard guard(grad_in.device());
  if (!result.defined()) {
    result = at::empty(input_sizes, grad_in.options().memory_format(at::MemoryFormat::Contiguous));
  } else {
    resize_out(result, input_sizes, grad_in, grad_in.scalar_type());
  }
  TORCH_CHECK(step > 0, "step is ", step, " but must be > 0");
  result.zero_();
  if (input_sizes.empty()) {
    if (grad_in.numel() > 0) result.add_(grad_in.reshape({}));
    return result;
  }
  dim = c10::maybe_wrap_dim(dim, static_cast<int64_t>(input_sizes.size()));
  TORCH_CHECK(grad_in.dim() == static_cast<int64_t>(input_sizes.size()) + 1 && grad_in.size(-1) == size,
              "unfold_backward: grad_in of shape ", grad_in.sizes(), " does not match input_sizes ", input_sizes,
              " with size ", size);
  int64_t nw = grad_in.size(dim);
  if (nw == 0) return result;
  for (int64_t k = 0; k < size; ++k) {
    Tensor dst = result.slice(dim, k, k + (nw - 1) * step + 1, step);
    dst.add_(grad_in.select(-1, k));
  }
  return result;
}


// ---- grid sampler -------------------------------------------------------------------

// ATen's check_grid_sampler_common / _2d / _3d.
void check_grid_sampler(const Tensor &input, const Tensor &grid, int64_t nsp, int64_t interp, int64_t pad) {
  TORCH_CHECK(input.device() == grid.device(), "grid_sampler(): expected input and grid to be on same device, but "
              "input is on ", input.device(), " and grid is on ", grid.device());
  TORCH_CHECK(input.scalar_type() == grid.scalar_type(), "grid_sampler(): expected input and grid to have same dtype, "
              "but input has ", input.scalar_type(), " and grid has ", grid.scalar_type());
  TORCH_CHECK(input.dim() == nsp + 2 && grid.dim() == nsp + 2, "grid_sampler(): expected ", nsp + 2,
              "D input and grid with same number of dimensions, but got input with sizes ", input.sizes(),
              " and grid with sizes ", grid.sizes());
  TORCH_CHECK(input.size(0) == grid.size(0), "grid_sampler(): expected grid and input to have same batch size, but "
              "got input with sizes ", input.sizes(), " and grid with sizes ", grid.sizes());
  TORCH_CHECK(grid.size(-1) == nsp, "grid_sampler(): expected grid to have size ", nsp, " in last dimension, but got "
              "grid with sizes ", grid.sizes());
  for (int64_t i = 2; i < input.dim(); ++i)
    TORCH_CHECK(input.size(i) > 0, "grid_sampler(): expected input to have non-empty spatial dimensions, but input "
                "has sizes ", input.sizes(), " with dimension ", i, " being empty");
  TORCH_CHECK(interp >= 0 && interp <= 2 && pad >= 0 && pad <= 2, "grid_sampler(): unknown interpolation mode ",
              interp, " or padding mode ", pad);
  TORCH_CHECK(!(nsp == 3 && interp == NRT_GRID_BICUBIC), "grid_sampler(): bicubic interpolation only supports 4D "
              "input");
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(input.scalar_type()), "\"grid_sampler_", nsp, "d_cpu\" not implemented for '",
              input.scalar_type(), "'");
  warn_if_double(input);
}

// Grid operand strides {n, d, h, w, k}; 2-d grids have no d.
void put_grid(nrt_operand &o, const Tensor &t) {
  o.data = const_cast<void *>(t.const_data_ptr());
  o.dtype = to_nrt_dtype(t.scalar_type());
  int64_t es = static_cast<int64_t>(t.element_size());
  bool two = t.dim() == 4;
  o.strides[0] = t.stride(0) * es;
  o.strides[1] = two ? 0 : t.stride(1) * es;
  for (int64_t j = 2; j < 5; ++j) o.strides[j] = t.stride(j - (two ? 1 : 0)) * es;
}

void set_grid_params(nrt_launch &d, int64_t interp, int64_t pad, bool align, int64_t nsp) {
  d.params[0] = interp;
  d.params[1] = pad;
  d.params[2] = align ? 1 : 0;
  d.params[3] = nsp;
}

template <int nsp>
Tensor grid_sampler_into(Tensor out, const Tensor &input, const Tensor &grid, int64_t interp, int64_t pad,
                         bool align) {
  check_grid_sampler(input, grid, nsp, interp, pad);
  c10::DeviceGuard guard(input.device());
  std::vector<int64_t> shape{input.size(0), input.size(1)};
  for (int64_t j = 1; j <= nsp; ++j) shape.push_back(grid.size(j));
  Tensor result = new_result(out, shape, input, input.scalar_type());
  if (result.numel() == 0) return result;
  nrt_launch d = resample_launch(NRT_OP(GRID_SAMPLE), result, input, 1, 2, input);
  set_operand_5d(d.operands[0], result);
  set_operand_5d(d.operands[1], input);
  put_grid(d.operands[2], grid);
  set_grid_params(d, interp, pad, align, nsp);
  launch(input.device().index(), d);
  return result;
}

void grid_sampler_backward_into(int64_t nsp, const Tensor &grad_output, const Tensor &input, const Tensor &grid,
                                int64_t interp, int64_t pad, bool align, bool want_gx, Tensor &gx, Tensor &gg) {
  check_grid_sampler(input, grid, nsp, interp, pad);
  TORCH_CHECK(grad_output.dim() == nsp + 2 && grad_output.size(0) == input.size(0) &&
                  grad_output.size(1) == input.size(1),
              "grid_sampler backward: grad_output of sizes ", grad_output.sizes(), " does not match input ",
              input.sizes(), " and grid ", grid.sizes());
  for (int64_t j = 1; j <= nsp; ++j)
    TORCH_CHECK(grad_output.size(1 + j) == grid.size(j), "grid_sampler backward: grad_output of sizes ",
                grad_output.sizes(), " does not match grid ", grid.sizes());
  c10::DeviceGuard guard(input.device());
  Tensor gy = grad_output.scalar_type() == input.scalar_type() ? grad_output : grad_output.to(input.scalar_type());
  int k = 0, nout = want_gx ? 2 : 1;
  nrt_launch d = resample_launch(NRT_OP(GRID_SAMPLE_BACKWARD), gy, input, nout, 3, input);
  if (want_gx) set_operand_5d(d.operands[k++], gx);
  put_grid(d.operands[k++], gg);
  set_operand_5d(d.operands[k++], gy);
  set_operand_5d(d.operands[k++], input);
  put_grid(d.operands[k++], grid);
  set_grid_params(d, interp, pad, align, nsp);
  if (input.size(0) == 0 || (grid.numel() == 0 && !want_gx)) return;
  launch(input.device().index(), d);
}

// The backward's out= overload zeroes grad_input when the mask skips it,
// where the functional one leaves it undefined: two hand-written overloads.

template <int NSP>
std::tuple<Tensor, Tensor> grid_sampler_backward_fn(const Tensor &grad_output, const Tensor &input, const Tensor &grid,
                                                    int64_t interp, int64_t pad, bool align, std::array<bool, 2> mask) {
  Tensor gx, gg = at::empty(grid.sizes(), grid.options().memory_format(at::MemoryFormat::Contiguous));
  if (mask[0]) gx = at::empty(input.sizes(), input.options().memory_format(at::MemoryFormat::Contiguous));
  grid_sampler_backward_into(NSP, grad_output, input, grid, interp, pad, align, mask[0], gx, gg);
  return {gx, gg};
}
template <int NSP>
std::tuple<Tensor &, Tensor &> grid_sampler_backward_out(const Tensor &grad_output, const Tensor &input,
                                                         const Tensor &grid, int64_t interp, int64_t pad, bool align,
                                                         std::array<bool, 2> mask, Tensor &out0, Tensor &out1) {
  resize_out(out0, input.sizes(), input, input.scalar_type());
  resize_out(out1, grid.sizes(), grid, grid.scalar_type());
  if (!mask[0]) out0.zero_();
  grid_sampler_backward_into(NSP, grad_output, input, grid, interp, pad, align, mask[0], out0, out1);
  return {out0, out1};
}
// ---- fractional max pooling -------------------------------------------------------------

void check_fractional(int64_t nsp, const Tensor &self, IntArrayRef kernel, IntArrayRef output_size,
                      const Tensor &samples) {
  const char *op = nsp == 2 ? "fractional_max_pool2d" : "fractional_max_pool3d";
  const char *n_ints = nsp == 2 ? "two" : "three";
  TORCH_CHECK(static_cast<int64_t>(kernel.size()) == nsp, op, ": kernel_size must either be a single int, or a tuple "
              "of ", n_ints, " ints");
  TORCH_CHECK(static_cast<int64_t>(output_size.size()) == nsp, op, ": output_size must either be a single int, or a "
              "tuple of ", n_ints, " ints");
  TORCH_CHECK(self.dim() == nsp + 1 || self.dim() == nsp + 2, op, "(): Expected ", nsp + 1, "D or ", nsp + 2,
              "D tensor, but got: ", self.sizes());
  for (int64_t j = self.dim() == nsp + 2 ? 1 : 0; j < self.dim(); ++j)
    TORCH_CHECK(self.size(j) > 0, op, "(): Expected input to have non-zero size for non-batch dimensions, but got ",
                self.sizes(), " with dimension ", j, " being empty.");
  static const char *dim_names[3] = {"time", "height", "width"};
  for (int64_t j = 0; j < nsp; ++j) {
    int64_t in = self.size(self.dim() - nsp + j);
    const char *nm = dim_names[3 - nsp + j];
    TORCH_CHECK(kernel[j] > 0 && output_size[j] > 0, op, "(): kernel_size and output_size must be greater than zero, "
                "but got ", kernel, " and ", output_size);
    TORCH_CHECK(output_size[j] + kernel[j] - 1 <= in, op, "_out(): pool ", nm, " ", kernel[j],
                " too large relative to input ", nm, " ", in);
  }
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()), "\"", op, "_out_frame\" not implemented for '",
              self.scalar_type(), "'");
  TORCH_CHECK(self.scalar_type() == samples.scalar_type(), "Expect _random_samples to have the same dtype as input");
  TORCH_CHECK(samples.dim() == 3, "Expect _random_samples to have 3 dimensions, got ", samples.dim());
  int64_t batch = self.dim() == nsp + 2 ? self.size(0) : 1, chans = self.size(self.dim() - nsp - 1);
  TORCH_CHECK(samples.size(0) >= batch, "Expect _random_samples.size(0) no less then input batch size.");
  TORCH_CHECK(samples.size(1) == chans, "Expect _random_samples.size(1) equals to input channel size.");
  TORCH_CHECK(samples.size(2) == nsp, "Expect _random_samples.size(2) equals to ", nsp, "; got ", samples.size(2),
              ".");
  TORCH_CHECK(samples.device() == self.device(), op, ": random_samples must be on ", self.device());
  warn_if_double(self);
}

template <int nsp>
std::tuple<Tensor, Tensor> fractional_max_pool_into(Tensor out, Tensor idx, const Tensor &self, IntArrayRef kernel,
                                                    IntArrayRef output_size, const Tensor &samples) {
  check_fractional(nsp, self, kernel, output_size, samples);
  c10::DeviceGuard guard(self.device());
  std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end() - nsp);
  for (int64_t v : output_size) shape.push_back(v);
  Tensor y = new_result(out, shape, self, self.scalar_type());
  Tensor ix = new_result(idx, shape, self, at::kLong);
  if (y.numel() == 0) return {y, ix};
  bool unbatched = self.dim() == nsp + 1;
  Tensor xb = unbatched ? self.unsqueeze(0) : self, yb = unbatched ? y.unsqueeze(0) : y;
  Tensor ib = unbatched ? ix.unsqueeze(0) : ix;
  nrt_launch d = resample_launch(NRT_OP(FRACTIONAL_MAX_POOL), yb, xb, 2, 2, self);
  set_operand_5d(d.operands[0], yb);
  set_operand_5d(d.operands[1], ib);
  set_operand_5d(d.operands[2], xb);
  set_operand(d.operands[3], samples, {0, 1, 2});
  d.params[0] = nsp;
  for (int64_t j = 0; j < 3; ++j) d.aux[j] = j < 3 - nsp ? 1 : kernel[j - (3 - nsp)];
  launch(self.device().index(), d);
  return {y, ix};
}

// The backward scatters grad_output through the indices, which is what
// adaptive max pooling's backward does with any indices: that ATen op
// (native in pooling.cpp) keeps the POOLING family's kernel out of this file.
template <int nsp>
Tensor fractional_max_pool_backward_into(Tensor gi, const Tensor &grad_output, const Tensor &self,
                                         IntArrayRef /*kernel_size*/, IntArrayRef /*output_size*/,
                                         const Tensor &indices) {
  if (!gi.defined()) {
    gi = at::empty(self.sizes(), self.options().memory_format(at::MemoryFormat::Contiguous));
  } else {
    resize_out(gi, self.sizes(), self, self.scalar_type());
  }
  const char *op = nsp == 2 ? "fractional_max_pool2d_backward" : "fractional_max_pool3d_backward";
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()), "\"", op, "\" not implemented for '", self.scalar_type(), "'");
  TORCH_CHECK(self.dim() == nsp + 1 || self.dim() == nsp + 2, op, ": expected ", nsp + 1, "D or ", nsp + 2,
              "D input, got ", self.sizes());
  TORCH_CHECK(grad_output.sizes() == indices.sizes() && grad_output.dim() == self.dim(), op, ": grad_output ",
              grad_output.sizes(), " and indices ", indices.sizes(), " must have the same shape");
  TORCH_CHECK(indices.scalar_type() == at::kLong, op, ": indices must be int64");
  c10::DeviceGuard guard(self.device());
  if (gi.numel() == 0) return gi;
  if constexpr (nsp == 2) {
    return at::adaptive_max_pool2d_backward_out(gi, grad_output, self, indices);
  } else {
    return at::adaptive_max_pool3d_backward_out(gi, grad_output, self, indices);
  }
}


}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
#define REG_INTERP(OP, NAME)                                 \
  NEURON_VARIANTS(m, NAME##_into, OP, nullptr, OP ".out"); \
  NEURON_VARIANTS(m, NAME##_backward_into, OP "_backward", nullptr, OP "_backward.grad_input");
  REG_INTERP("upsample_nearest1d", upsample_nearest1d)
  REG_INTERP("upsample_nearest2d", upsample_nearest2d)
  REG_INTERP("upsample_nearest3d", upsample_nearest3d)
  REG_INTERP("_upsample_nearest_exact1d", upsample_nearest_exact1d)
  REG_INTERP("_upsample_nearest_exact2d", upsample_nearest_exact2d)
  REG_INTERP("_upsample_nearest_exact3d", upsample_nearest_exact3d)
  REG_INTERP("upsample_linear1d", upsample_linear1d)
  REG_INTERP("upsample_bilinear2d", upsample_bilinear2d)
  REG_INTERP("upsample_trilinear3d", upsample_trilinear3d)
  REG_INTERP("upsample_bicubic2d", upsample_bicubic2d)
  REG_INTERP("_upsample_bilinear2d_aa", upsample_bilinear2d_aa)
  REG_INTERP("_upsample_bicubic2d_aa", upsample_bicubic2d_aa)
#undef REG_INTERP
  NEURON_VARIANTS(m, max_unpool2d_into, "max_unpool2d", nullptr, "max_unpool2d.out");
  NEURON_VARIANTS(m, max_unpool3d_into, "max_unpool3d", nullptr, "max_unpool3d.out");
  NEURON_VARIANTS(m, im2col_into, "im2col", nullptr, "im2col.out");
  NEURON_VARIANTS(m, col2im_into, "col2im", nullptr, "col2im.out");
  NEURON_VARIANTS(m, unfold_backward_into, "unfold_backward", nullptr, "unfold_backward.out");
  NEURON_VARIANTS(m, fractional_max_pool_into<2>, "fractional_max_pool2d", nullptr, "fractional_max_pool2d.output");
  NEURON_VARIANTS(m, fractional_max_pool_backward_into<2>, "fractional_max_pool2d_backward", nullptr,
                  "fractional_max_pool2d_backward.grad_input");
  NEURON_VARIANTS(m, fractional_max_pool_into<3>, "fractional_max_pool3d", nullptr, "fractional_max_pool3d.output");
  NEURON_VARIANTS(m, fractional_max_pool_backward_into<3>, "fractional_max_pool3d_backward", nullptr,
                  "fractional_max_pool3d_backward.grad_input");
  NEURON_VARIANTS(m, grid_sampler_into<2>, "grid_sampler_2d", nullptr, "grid_sampler_2d.out");
  NEURON_IMPL(m, "grid_sampler_2d_backward", grid_sampler_backward_fn<2>);
  NEURON_IMPL(m, "grid_sampler_2d_backward.out", grid_sampler_backward_out<2>);
  NEURON_VARIANTS(m, grid_sampler_into<3>, "grid_sampler_3d", nullptr, "grid_sampler_3d.out");
  NEURON_IMPL(m, "grid_sampler_3d_backward", grid_sampler_backward_fn<3>);
  NEURON_IMPL(m, "grid_sampler_3d_backward.out", grid_sampler_backward_out<3>);
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
  for (const char *n : {"reflection_pad1d.out", "reflection_pad2d.out", "reflection_pad3d.out"}) {
    NEURON_OUT_OF(m, reflection_pad_fn, n);
  }
  for (const char *n : {"reflection_pad1d_backward.grad_input", "reflection_pad2d_backward.grad_input",
                        "reflection_pad3d_backward.grad_input"}) {
    NEURON_OUT_OF(m, reflection_pad_backward_fn, n);
  }
  for (const char *n : {"replication_pad1d.out", "replication_pad2d.out", "replication_pad3d.out"}) {
    NEURON_OUT_OF(m, replication_pad_fn, n);
  }
  for (const char *n : {"replication_pad1d_backward.grad_input", "replication_pad2d_backward.grad_input",
                        "replication_pad3d_backward.grad_input"}) {
    NEURON_OUT_OF(m, replication_pad_backward_fn, n);
  }
}

}  // namespace torch_neuronx
