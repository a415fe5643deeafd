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
  record_fallback(full.c_str());
  at::native::cpu_fallback(op, stack, /*error_on_views=*/true);
}

}  // namespace

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&neuron_cpu_fallback>());
}

}  // namespace torch_neuronx
