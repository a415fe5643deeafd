// The native-op table mechanics. Every native kernel is registered with
// NEURON_IMPL(m, "aten schema name", function) (or NEURON_VARIANTS, see
// registry/variants.h): that records the op as native
// (torch_neuronx.native_ops() and docs read this list) and wraps the
// function so each call is counted for get_executed_ops().
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>

#include <torch/library.h>

#include "runtime/device.h"

namespace torch_neuronx {

// Registers `name` as native and returns the counter shared by every
// registration of the same function.
std::atomic<int64_t> &register_native_op(const char *name, const void *fn);
std::atomic<int64_t> &counter_for_fn(const void *fn);
// "aten::name" of the first registration of `fn`.
const char *native_op_name(const void *fn);

// Counts a call of a native op that ran on the CPU (cpu_fallback.cpp).
void record_fallback(const char *aten_name);

template <auto fn>
struct Counted;

template <typename R, typename... A, R (*fn)(A...)>
struct Counted<fn> {
  static R call(A... args) {
    static std::atomic<int64_t> &count = counter_for_fn(reinterpret_cast<const void *>(fn));
    count.fetch_add(1, std::memory_order_relaxed);
    try {
      return fn(std::forward<A>(args)...);
    } catch (c10::NotImplementedError &e) {
      // A dtype or layout a kernel does not implement: name the op, which
      // the kernel's own message may not know.
      e.add_context(std::string("in the neuron kernel of ") + native_op_name(reinterpret_cast<const void *>(fn)));
      throw;
    }
  }
};

// Registers `fn` as the native kernel of `name`, counted.
template <auto fn>
void register_impl(torch::Library &m, const char *name) {
  register_native_op(name, reinterpret_cast<const void *>(fn));
  m.impl(name, TORCH_FN(Counted<fn>::call));
}

#define NEURON_IMPL(m, name, fn) ::torch_neuronx::register_impl<&(fn)>((m), (name))

}  // namespace torch_neuronx
