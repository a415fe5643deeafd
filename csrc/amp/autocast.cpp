// AutocastPrivateUse1: torch.autocast("neuron", dtype=bfloat16 or float16)
// follows CUDA's op lists (ATen's shared AT_FORALL_* tables): matmuls and
// convolutions run in the low precision, numerically sensitive ops
// (exp, log, softmax, norms, losses, sums) in float32, and mixed-input ops
// promote to the widest type.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace {

using namespace at;
using namespace at::autocast;

#define NEURON_LOW(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define NEURON_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define NEURON_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define NEURON_DIFFERENT_REDISPATCH(...) KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE(__VA_ARGS__)
#define NEURON_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  AT_FORALL_LOWER_PRECISION_FP(NEURON_LOW)
  AT_FORALL_FP32(NEURON_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(NEURON_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(NEURON_DIFFERENT_REDISPATCH)
  AT_FORALL_PROMOTE(NEURON_PROMOTE)
}

}  // namespace
