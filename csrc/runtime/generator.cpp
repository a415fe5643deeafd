// The per-device Philox generator. State is (seed, offset): kernels key
// Philox4x32-10 with the seed and take counters from the offset, which each
// launch advances past what it used. get_state() packs the two as 16 bytes,
// like CUDA's generator.
#include <cstring>
#include <mutex>
#include <vector>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/GeneratorImpl.h>
#include <c10/core/TensorImpl.h>

#include "runtime/device.h"
#include "runtime/generator.h"

namespace torch_neuronx {
namespace {

class NeuronGeneratorImpl final : public c10::GeneratorImpl {
 public:
  explicit NeuronGeneratorImpl(c10::DeviceIndex device)
      : c10::GeneratorImpl(c10::Device(kNeuron, device), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)) {}

  void set_current_seed(uint64_t seed) override { seed_ = seed; offset_ = 0; }
  void set_offset(uint64_t offset) override { offset_ = offset; }
  uint64_t get_offset() const override { return offset_; }
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override {
    uint64_t s = c10::detail::getNonDeterministicRandom();
    set_current_seed(s);
    return s;
  }
  void set_state(const c10::TensorImpl &state) override {
    TORCH_CHECK(state.dtype() == caffe2::TypeMeta::Make<uint8_t>() && state.numel() == 16 &&
                    state.device().is_cpu(),
                "RNG state for neuron must be a CPU uint8 tensor of 16 bytes (seed, offset), got ",
                state.numel(), " elements");
    const auto *p = static_cast<const uint8_t *>(state.data());
    std::memcpy(&seed_, p, 8);
    std::memcpy(&offset_, p + 8, 8);
  }
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    auto t = at::empty({16}, at::TensorOptions().dtype(at::kByte));
    auto *p = static_cast<uint8_t *>(t.data_ptr());
    std::memcpy(p, &seed_, 8);
    std::memcpy(p + 8, &offset_, 8);
    return t.getIntrusivePtr();
  }
  static c10::DeviceType device_type() { return kNeuron; }

  void next(uint64_t increment, uint64_t *out_seed, uint64_t *out_offset) {
    *out_seed = seed_;
    *out_offset = offset_;
    offset_ += (increment + 3) / 4 * 4;
  }

 private:
  NeuronGeneratorImpl *clone_impl() const override {
    auto *g = new NeuronGeneratorImpl(device().index());
    g->seed_ = seed_;
    g->offset_ = offset_;
    return g;
  }
  uint64_t seed_ = c10::default_rng_seed_val;
  uint64_t offset_ = 0;
};

std::once_flag g_gen_once;
std::vector<at::Generator> g_default_generators;

}  // namespace

const at::Generator &default_generator(c10::DeviceIndex device) {
  std::call_once(g_gen_once, [] {
    int n = device_count();
    for (int d = 0; d < n; ++d)
      g_default_generators.push_back(at::make_generator<NeuronGeneratorImpl>(static_cast<c10::DeviceIndex>(d)));
  });
  if (device < 0) device = current_device();
  check_device_index(device);
  return g_default_generators[device];
}

at::Generator new_generator(c10::DeviceIndex device) {
  if (device < 0) device = current_device();
  return at::make_generator<NeuronGeneratorImpl>(device);
}

void philox_next(const at::Generator *gen, c10::DeviceIndex device, uint64_t increment,
                 uint64_t *out_seed, uint64_t *out_offset) {
  const at::Generator &g = (gen && gen->defined()) ? *gen : default_generator(device);
  TORCH_CHECK(g.device().type() == kNeuron, "expected a neuron generator, got one for ", g.device());
  at::Generator gen_copy = g;  // shares the impl; mutex() is non-const
  std::lock_guard<std::mutex> lock(gen_copy.mutex());
  gen_copy.get<NeuronGeneratorImpl>()->next(increment, out_seed, out_offset);
}

bool any_flag_set(const at::Tensor &flags) { return flags.numel() > 0 && flags.any().item<bool>(); }

}  // namespace torch_neuronx
