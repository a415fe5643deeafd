// The device as the rest of the glue sees it: the neuron device type,
// runtime status checks, the current device and stream, and the allocators.
// Light includes only: every file of the glue includes this, and ATen
// headers are what makes builds slow.
#pragma once

#include <cstddef>

#include <c10/core/Allocator.h>
#include <c10/core/Device.h>
#include <c10/core/Stream.h>
#include <c10/util/Exception.h>

#include "nrt/nrt.h"

namespace c10 {
struct Storage;
}

namespace torch_neuronx {

constexpr c10::DeviceType kNeuron = c10::DeviceType::PrivateUse1;

// Raises the Python-visible error for a failed runtime call (errors.cpp):
// OOM becomes torch.OutOfMemoryError, the rest RuntimeError, each with the
// runtime's detail message.
[[noreturn]] void throw_status(nrt_status status, const char *what);
inline void check(nrt_status status, const char *what) {
  if (status != NRT_SUCCESS) throw_status(status, what);
}

// guard.cpp
int device_count();  // nrt_get_device_count, 0 on failure
void check_device_index(c10::DeviceIndex index);
c10::DeviceIndex current_device();
void set_current_device(c10::DeviceIndex index);

// Streams: c10::StreamId is the runtime's stream index on the device
// (0 = default stream). The current stream is per thread and per device.
c10::Stream current_stream(c10::DeviceIndex device);
void set_current_stream(const c10::Stream &stream);
nrt_stream *to_nrt_stream(const c10::Stream &stream);
nrt_stream *current_nrt_stream(c10::DeviceIndex device);

c10::Allocator *device_allocator();       // allocator.cpp
c10::Allocator *pinned_host_allocator();  // host_allocator.cpp

// Grows a device storage to `nbytes`, copying its bytes in stream order
// (storage.cpp).
void resize_storage_bytes(const c10::Storage &storage, size_t nbytes);

}  // namespace torch_neuronx
