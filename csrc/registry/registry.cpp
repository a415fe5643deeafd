// The native-op registry and op accounting: which aten ops have a native
// kernel (native_ops()), how often each ran natively or on the CPU
// (get_executed_ops(), get_fallback_ops()).
#include <deque>
#include <map>
#include <set>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "registry/accounting.h"
#include "registry/registry.h"

namespace torch_neuronx {
namespace {

struct NativeEntry {
  std::string name;
  std::atomic<int64_t> count{0};
};

struct Accounting {
  std::mutex mu;
  std::deque<NativeEntry> native;                        // stable addresses
  std::unordered_map<const void *, NativeEntry *> by_fn;  // first registration names the counter
  std::map<std::string, int64_t> fallback;               // op -> calls
  std::unordered_set<std::string> warned;
  std::set<std::string> names;                           // every registered native name
};

Accounting &acct() {
  static Accounting *a = new Accounting();  // leaked: used from static destructors' threads too
  return *a;
}

}  // namespace

std::atomic<int64_t> &register_native_op(const char *name, const void *fn) {
  Accounting &a = acct();
  std::lock_guard<std::mutex> lock(a.mu);
  a.names.insert(std::string("aten::") + name);
  auto it = a.by_fn.find(fn);
  if (it != a.by_fn.end()) return it->second->count;  // one kernel, several overloads: one counter
  a.native.emplace_back();
  NativeEntry &e = a.native.back();
  e.name = std::string("aten::") + name;
  a.by_fn[fn] = &e;
  return e.count;
}

std::atomic<int64_t> &counter_for_fn(const void *fn) {
  Accounting &a = acct();
  std::lock_guard<std::mutex> lock(a.mu);
  auto it = a.by_fn.find(fn);
  TORCH_INTERNAL_ASSERT(it != a.by_fn.end(), "native op called before registration");
  return it->second->count;
}

const char *native_op_name(const void *fn) {
  Accounting &a = acct();
  std::lock_guard<std::mutex> lock(a.mu);
  auto it = a.by_fn.find(fn);
  return it == a.by_fn.end() ? "an unregistered op" : it->second->name.c_str();
}

void record_fallback(const char *aten_name) {
  Accounting &a = acct();
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(a.mu);
    a.fallback[aten_name] += 1;
    first = a.warned.insert(aten_name).second;
  }
  if (first) {
    TORCH_WARN("neuron: ", aten_name,
               " has no native neuron kernel and runs on the CPU (inputs copied to the host and back); "
               "this is slow. torch_neuronx.get_fallback_ops() lists every such op.");
  }
}

std::vector<std::string> native_op_names() {
  Accounting &a = acct();
  std::lock_guard<std::mutex> lock(a.mu);
  return std::vector<std::string>(a.names.begin(), a.names.end());
}

std::map<std::string, int64_t> executed_ops() {
  Accounting &a = acct();
  std::lock_guard<std::mutex> lock(a.mu);
  std::map<std::string, int64_t> out;
  for (auto &e : a.native) {
    int64_t c = e.count.load(std::memory_order_relaxed);
    if (c) out[e.name] += c;
  }
  for (auto &kv : a.fallback) out[kv.first] += kv.second;
  return out;
}

std::map<std::string, int64_t> fallback_ops() {
  Accounting &a = acct();
  std::lock_guard<std::mutex> lock(a.mu);
  return a.fallback;
}

void clear_op_tracking() {
  Accounting &a = acct();
  std::lock_guard<std::mutex> lock(a.mu);
  for (auto &e : a.native) e.count.store(0, std::memory_order_relaxed);
  a.fallback.clear();
}

}  // namespace torch_neuronx
