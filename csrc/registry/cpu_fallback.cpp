// The boxed CPU fallback: ops without a native kernel run on the CPU
// through PyTorch's cpu_fallback (inputs copied to the host, the CPU kernel
// run, results copied back). Each such op warns once, is counted, and with
// TORCH_NEURONX_DISABLE_FALLBACK=1 raises instead, naming the op.
#include <cstdlib>
#include <string>

#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include "registry/registry.h"

namespace torch_neuronx {
namespace {

// Read through the runtime's env-var table (parsed once, one boolean
// grammar); an invalid value is an error naming the variable.
bool fallback_disabled() {
  bool disabled = false;
  check(nrt_env_get_bool(NRT_ENV_DISABLE_FALLBACK, &disabled), "TORCH_NEURONX_DISABLE_FALLBACK");
  return disabled;
}

void neuron_cpu_fallback(const c10::OperatorHandle &op, torch::jit::Stack *stack) {
  const auto &name = op.schema().operator_name();
  std::string full = name.name + (name.overload_name.empty() ? "" : "." + name.overload_name);
  TORCH_CHECK_NOT_IMPLEMENTED(!fallback_disabled(), "neuron: ", full,
                              " has no native neuron kernel and TORCH_NEURONX_DISABLE_FALLBACK=1 forbids "
                              "running it on the CPU.");
  // An op PyTorch has no CPU kernel for (the CUDA-only fused ops, say)
  // cannot fall back: say so instead of warning that it runs on the CPU and
  // then failing inside the dispatcher.
  TORCH_CHECK_NOT_IMPLEMENTED(op.hasComputedKernelForDispatchKey(c10::DispatchKey::CPU), "neuron: ", full,
                              " has no native neuron kernel, and PyTorch has no CPU kernel for it to fall back "
                              "to, so it cannot run on the neuron device.");
  record_fallback(full.c_str());
  at::native::cpu_fallback(op, stack, /*error_on_views=*/true);
}

// Layouts the device does not implement: a clear error naming the op and
// what to do, instead of the dispatcher's "Could not run ... 'Sparseneuron'".
template <const char *kWhat>
void unsupported_layout(const c10::OperatorHandle &op, torch::jit::Stack *) {
  const auto &name = op.schema().operator_name();
  TORCH_CHECK_NOT_IMPLEMENTED(false, "neuron: ", kWhat, " are not supported on the neuron device (op ", name.name,
                              name.overload_name.empty() ? "" : "." + name.overload_name,
                              "); keep them on the CPU, or convert them with .to_dense() before moving to neuron.");
}
constexpr char kSparse[] = "sparse tensors";
constexpr char kQuantized[] = "quantized tensors";

}  // namespace

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&neuron_cpu_fallback>());
}
TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&unsupported_layout<kSparse>>());
}
TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&unsupported_layout<kSparse>>());
}
// The compressed layouts (CSR, CSC, BSR, BSC) would slip past the fallback:
// the move (_to_copy, whose target device makes the key SparseCsrPrivateUse1)
// and the factories have composite kernels that build the tensor on the
// device without dispatching any further, so the error would only come at
// its first use, in PyTorch's words. COO's move reaches the fallback by
// itself (it dispatches _sparse_coo_tensor_with_dims_and_tensors).
TORCH_LIBRARY_IMPL(aten, SparseCsrPrivateUse1, m) {
  for (const char *op : {"_to_copy", "sparse_compressed_tensor.comp_plain_value_size",
                         "sparse_compressed_tensor.comp_plain_value", "_sparse_compressed_tensor_unsafe"})
    m.impl(op, torch::CppFunction::makeFromBoxedFunction<&unsupported_layout<kSparse>>());
}
TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&unsupported_layout<kQuantized>>());
}

}  // namespace torch_neuronx
