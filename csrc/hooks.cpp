// PrivateUse1 hooks (registered at library load, before anything asks),
// the per-device Philox generator and the pinned host allocator.
#include <cstring>
#include <mutex>
#include <vector>

#include <ATen/core/CachingHostAllocator.h>
#include <ATen/core/Generator.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/ops/empty.h>
#include <c10/core/GeneratorImpl.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>

#include "neuron.h"

namespace torch_neuronx {
namespace {

// ---- Philox generator -----------------------------------------------------
// State is (seed, offset): kernels key Philox4x32-10 with the seed and take
// counters from the offset, which each launch advances past what it used.
// get_state() packs the two as 16 bytes, like CUDA's generator.
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

namespace {

// ---- pinned host memory ----------------------------------------------------
void delete_pinned(void *ptr) { nrt_host_free(ptr); }

class NeuronHostAllocator final : public at::HostAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    void *ptr = nullptr;
    if (nbytes > 0) check(nrt_host_alloc(nbytes, &ptr), "pinned host allocation");
    return {ptr, ptr, &delete_pinned, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &delete_pinned; }
  void copy_data(void *dest, const void *src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
  // Async copies keep their pinned source/destination alive themselves
  // (ops_copy.cpp holds the storage until the stream passes the copy), so
  // there is nothing to track per stream here.
  bool record_event(void *, void *, c10::Stream) override { return true; }
  void empty_cache() override {}
  at::HostStats get_stats() override { return at::HostStats(); }
  void reset_accumulated_stats() override {}
  void reset_peak_stats() override {}
};

NeuronHostAllocator g_host_allocator;

// ---- hooks ------------------------------------------------------------------
struct NeuronHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  void init() const override { check(nrt_init(), "neuron init"); }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  c10::DeviceIndex deviceCount() const override { return static_cast<c10::DeviceIndex>(device_count()); }
  void setCurrentDevice(c10::DeviceIndex d) const override { set_current_device(d); }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    c10::DeviceIndex old = current_device();
    if (d != old) set_current_device(d);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override {
    if (d < 0 || d >= device_count()) return current_device();
    return exchangeDevice(d);
  }
  bool isPinnedPtr(const void *data) const override { return nrt_host_is_pinned(data); }
  at::Allocator *getPinnedMemoryAllocator() const override { return &g_host_allocator; }
  at::Device getDeviceFromPtr(void *data) const override {
    int d = -1;
    TORCH_CHECK(nrt_pointer_get_device(data, &d) == NRT_SUCCESS, "pointer is not neuron device memory");
    return at::Device(kNeuron, static_cast<c10::DeviceIndex>(d));
  }
  const at::Generator &getDefaultGenerator(c10::DeviceIndex d) const override { return default_generator(d); }
  at::Generator getNewGenerator(c10::DeviceIndex d) const override {
    if (d < 0) d = current_device();
    return at::make_generator<NeuronGeneratorImpl>(d);
  }
  void resizePrivateUse1Bytes(const c10::Storage &storage, size_t newsize) const override;
};

void NeuronHooks::resizePrivateUse1Bytes(const c10::Storage &storage, size_t newsize) const {
  resize_storage_bytes(storage, newsize);
}

}  // namespace

void resize_storage_bytes(const c10::Storage &storage, size_t newsize) {
  // New block, old bytes copied in stream order (never by the host thread).
  c10::StorageImpl *impl = storage.unsafeGetStorageImpl();
  TORCH_CHECK(impl->resizable(), "Trying to resize storage that is not resizable");
  c10::DataPtr fresh = device_allocator()->allocate(newsize);
  size_t keep = std::min(newsize, impl->nbytes());
  if (keep > 0) {
    check(nrt_memcpy_async(fresh.get(), impl->data(), keep, NRT_MEMCPY_DEVICE_TO_DEVICE,
                           current_nrt_stream(-1)),
          "neuron storage resize");
  }
  impl->set_data_ptr_noswap(std::move(fresh));
  impl->set_nbytes(newsize);
}

namespace {

// Registered at load time so torch._C._get_accelerator() and backward() find them.
struct RegisterHooks {
  RegisterHooks() { at::RegisterPrivateUse1HooksInterface(new NeuronHooks()); }
} g_register_hooks;

}  // namespace

c10::Allocator *pinned_host_allocator() { return &g_host_allocator; }

void philox_next(const at::Generator *gen, c10::DeviceIndex device, uint64_t increment,
                 uint64_t *out_seed, uint64_t *out_offset) {
  const at::Generator &g = (gen && gen->defined()) ? *gen : default_generator(device);
  TORCH_CHECK(g.device().type() == kNeuron, "expected a neuron generator, got one for ", g.device());
  at::Generator gen_copy = g;  // shares the impl; mutex() is non-const
  std::lock_guard<std::mutex> lock(gen_copy.mutex());
  gen_copy.get<NeuronGeneratorImpl>()->next(increment, out_seed, out_offset);
}

REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, &g_host_allocator)

}  // namespace torch_neuronx
