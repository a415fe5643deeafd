// The device allocator adapter: c10::DeviceAllocator over the runtime's
// per-device caching allocator. allocate/free never take the GIL and never
// touch Python; they are called from any thread (autograd workers included).
#include <cstdio>

#include <c10/core/CachingDeviceAllocator.h>

#include "runtime/device.h"

namespace torch_neuronx {
namespace {

void delete_device_ptr(void *ptr) {
  // Errors cannot propagate out of a deleter; a failed free means a
  // runtime bug, reported on stderr rather than lost.
  nrt_status s = nrt_free(ptr);
  if (s != NRT_SUCCESS) {
    fprintf(stderr, "torch_neuronx: nrt_free failed: %s (%s)\n", nrt_status_string(s),
            nrt_last_error_message());
  }
}

void fill_stat(c10::CachingAllocator::StatArray &dst, const nrt_stat *src) {
  // c10's StatType order: AGGREGATE, SMALL_POOL, LARGE_POOL == NRT_POOL_*.
  for (int p = 0; p < NRT_POOL_COUNT; ++p) {
    dst[p].current = src[p].current;
    dst[p].peak = src[p].peak;
    dst[p].allocated = src[p].allocated;
    dst[p].freed = src[p].freed;
  }
}

class NeuronDeviceAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    c10::DeviceIndex device = current_device();
    nrt_stream *stream = current_nrt_stream(device);
    void *ptr = nullptr;
    if (nbytes > 0) check(nrt_malloc(nbytes, stream, &ptr), "neuron allocate");
    return {ptr, ptr, &delete_device_ptr, c10::Device(kNeuron, device)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &delete_device_ptr; }

  void copy_data(void *dest, const void *src, std::size_t count) const override {
    // Used by Storage clone paths: a device-to-device copy in stream order.
    check(nrt_memcpy(dest, src, count, NRT_MEMCPY_DEVICE_TO_DEVICE, current_nrt_stream(-1)),
          "neuron copy");
  }

  bool initialized() override { return true; }
  void emptyCache(c10::MempoolId_t) override {
    int n = device_count();
    for (int d = 0; d < n; ++d) check(nrt_empty_cache(d), "neuron empty_cache");
  }
  void recordStream(const c10::DataPtr &ptr, c10::Stream stream) override {
    if (ptr.get()) check(nrt_record_stream(ptr.get(), to_nrt_stream(stream)), "record_stream");
  }
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    check_device_index(device);
    nrt_memory_stats s;
    check(nrt_memory_get_stats(device, &s), "neuron memory_stats");
    c10::CachingDeviceAllocator::DeviceStats out;
    fill_stat(out.allocation, s.allocation);
    fill_stat(out.segment, s.segment);
    fill_stat(out.active, s.active);
    fill_stat(out.inactive_split, s.inactive_split);
    fill_stat(out.allocated_bytes, s.allocated_bytes);
    fill_stat(out.reserved_bytes, s.reserved_bytes);
    fill_stat(out.active_bytes, s.active_bytes);
    fill_stat(out.inactive_split_bytes, s.inactive_split_bytes);
    fill_stat(out.requested_bytes, s.requested_bytes);
    out.num_alloc_retries = s.num_alloc_retries;
    out.num_ooms = s.num_ooms;
    out.num_device_alloc = s.num_device_alloc;
    out.num_device_free = s.num_device_free;
    return out;
  }
  void resetAccumulatedStats(c10::DeviceIndex device) override {
    check_device_index(device);
    check(nrt_memory_reset_accumulated_stats(device), "neuron reset_accumulated_memory_stats");
  }
  void resetPeakStats(c10::DeviceIndex device) override {
    check_device_index(device);
    check(nrt_memory_reset_peak_stats(device), "neuron reset_peak_memory_stats");
  }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    check_device_index(device);
    size_t free_b = 0, total_b = 0;
    check(nrt_mem_get_info(device, &free_b, &total_b), "neuron mem_get_info");
    return {free_b, total_b};
  }
};

NeuronDeviceAllocator g_allocator;

}  // namespace

c10::Allocator *device_allocator() { return &g_allocator; }

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator);

}  // namespace torch_neuronx
