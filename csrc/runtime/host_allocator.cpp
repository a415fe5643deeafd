// The pinned host allocator: page-locked host memory from the runtime, so
// host<->device copies from it can run asynchronously. Registered for
// PrivateUse1 (tensor.pin_memory(), DataLoader pin_memory=True).
#include <cstring>

#include <ATen/core/CachingHostAllocator.h>

#include "runtime/device.h"

namespace torch_neuronx {
namespace {

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
  // (aten/tensor.cpp holds the storage until the stream passes the copy),
  // so there is nothing to track per stream here.
  bool record_event(void *, void *, c10::Stream) override { return true; }
  void empty_cache() override {}
  at::HostStats get_stats() override { return at::HostStats(); }
  void reset_accumulated_stats() override {}
  void reset_peak_stats() override {}
};

NeuronHostAllocator g_host_allocator;

}  // namespace

c10::Allocator *pinned_host_allocator() { return &g_host_allocator; }

REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, &g_host_allocator)

}  // namespace torch_neuronx
