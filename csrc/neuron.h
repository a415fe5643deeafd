// Shared declarations of the C++ glue. Light includes only: every file of
// the glue includes this, and ATen headers are what makes builds slow.
#pragma once

#include <atomic>
#include <cstdint>

#include <c10/core/Allocator.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <c10/core/Stream.h>
#include <c10/util/Exception.h>

#include "nrt/nrt.h"

namespace at {
struct Generator;
}
namespace c10 {
struct Storage;
}

namespace torch_neuronx {

constexpr c10::DeviceType kNeuron = c10::DeviceType::PrivateUse1;

// Raises the Python-visible error for a failed runtime call: OOM becomes
// torch.OutOfMemoryError, a bad device an IndexError-like ValueError, the
// rest RuntimeError, each with the runtime's detail message.
[[noreturn]] void throw_status(nrt_status status, const char *what);
inline void check(nrt_status status, const char *what) {
  if (status != NRT_SUCCESS) throw_status(status, what);
}

int device_count();               // nrt_get_device_count, 0 on failure
void check_device_index(c10::DeviceIndex index);
c10::DeviceIndex current_device();
void set_current_device(c10::DeviceIndex index);

// Streams: c10::StreamId is the runtime's stream index on the device
// (0 = default stream). The current stream is per thread and per device.
c10::Stream current_stream(c10::DeviceIndex device);
void set_current_stream(const c10::Stream &stream);
nrt_stream *to_nrt_stream(const c10::Stream &stream);
nrt_stream *current_nrt_stream(c10::DeviceIndex device);

nrt_dtype to_nrt_dtype(c10::ScalarType type);   // throws TypeError-style for unsupported
bool nrt_supports(c10::ScalarType type);

// The pinned host allocator (hooks.cpp) and the device allocator (allocator.cpp).
c10::Allocator *pinned_host_allocator();
c10::Allocator *device_allocator();

// Grows a device storage to `nbytes`, copying its bytes in stream order.
void resize_storage_bytes(const c10::Storage &storage, size_t nbytes);

// Op accounting for get_executed_ops()/get_fallback_ops(). Native counters are
// registered once per op name and bumped lock-free on every call.
std::atomic<int64_t> &native_op_counter(const char *aten_name);
void record_fallback(const char *aten_name);

// The device's default Philox generator (torch.neuron.manual_seed etc.).
const at::Generator &default_generator(c10::DeviceIndex device);

// Philox state of `gen` (nullptr: the device's default generator): returns
// (seed, offset) and advances the offset by `increment` (rounded up to 4).
void philox_next(const at::Generator *gen, c10::DeviceIndex device, uint64_t increment,
                 uint64_t *out_seed, uint64_t *out_offset);

}  // namespace torch_neuronx
