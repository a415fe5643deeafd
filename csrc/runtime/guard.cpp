// DeviceGuardImpl for the neuron device: current device, streams and events
// as c10 sees them (torch.Stream / torch.Event / torch.neuron.Stream work
// through this), and the per-thread current device and stream it keeps,
// which the rest of the glue reads through runtime/device.h.
#include <array>
#include <string>

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include "runtime/device.h"

namespace torch_neuronx {

int device_count() {
  int n = 0;
  if (nrt_get_device_count(&n) != NRT_SUCCESS) return 0;
  return n;
}

void check_device_index(c10::DeviceIndex index) {
  int n = device_count();
  TORCH_CHECK(index >= 0 && index < n, "neuron device index ", static_cast<int>(index),
                    " is out of range: ", n, " neuron device(s) are visible (NEURON_RT_VISIBLE_CORES)");
}

namespace {
thread_local c10::DeviceIndex tls_device = 0;
thread_local std::array<int, NRT_MAX_DEVICES> tls_stream_index{};  // all default (0)
}  // namespace

c10::DeviceIndex current_device() { return tls_device; }

void set_current_device(c10::DeviceIndex index) {
  check_device_index(index);
  tls_device = index;
  nrt_set_device(index);
}

c10::Stream current_stream(c10::DeviceIndex device) {
  if (device < 0) device = tls_device;
  check_device_index(device);
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNeuron, device), tls_stream_index[device]);
}

void set_current_stream(const c10::Stream &stream) {
  TORCH_CHECK(stream.device_type() == kNeuron, "expected a neuron stream, got ", stream);
  check_device_index(stream.device_index());
  TORCH_CHECK(stream.id() >= 0 && stream.id() < NRT_STREAMS_PER_DEVICE, "invalid neuron stream id ",
              stream.id());
  tls_stream_index[stream.device_index()] = static_cast<int>(stream.id());
}

nrt_stream *to_nrt_stream(const c10::Stream &stream) {
  nrt_stream *s = nullptr;
  check(nrt_stream_get(stream.device_index(), static_cast<int>(stream.id()), &s), "neuron stream");
  return s;
}

nrt_stream *current_nrt_stream(c10::DeviceIndex device) {
  if (device < 0) device = tls_device;
  nrt_stream *s = nullptr;
  check(nrt_stream_get(device, tls_stream_index[device], &s), "neuron stream");
  return s;
}

namespace {

struct NeuronGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kNeuron; }

  c10::Device exchangeDevice(c10::Device d) const override {
    TORCH_INTERNAL_ASSERT(d.type() == kNeuron);
    c10::Device old(kNeuron, current_device());
    if (d.index() != old.index()) set_current_device(d.index());
    return old;
  }
  c10::Device getDevice() const override { return c10::Device(kNeuron, current_device()); }
  void setDevice(c10::Device d) const override {
    TORCH_INTERNAL_ASSERT(d.type() == kNeuron);
    set_current_device(d.index());
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0 && d.index() < device_count()) tls_device = d.index();
  }
  c10::Stream getStream(c10::Device d) const override { return current_stream(d.index()); }
  c10::Stream getDefaultStream(c10::Device d) const override {
    if (!d.has_index()) d = c10::Device(kNeuron, current_device());
    check_device_index(d.index());
    return c10::Stream(c10::Stream::UNSAFE, d, 0);
  }
  c10::Stream getNewStream(c10::Device d, int /*priority*/) const override {
    if (!d.has_index()) d = c10::Device(kNeuron, current_device());
    check_device_index(d.index());
    nrt_stream *s = nullptr;
    check(nrt_stream_acquire(d.index(), &s), "neuron stream");
    return c10::Stream(c10::Stream::UNSAFE, d, nrt_stream_index(s));
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool /*isHighPriority*/) const override {
    return getNewStream(d, 0);
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    c10::Stream old = current_stream(s.device_index());
    set_current_stream(s);
    return old;
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    return static_cast<c10::DeviceIndex>(device_count());
  }

  // Events. EventFlag::BACKEND_DEFAULT asks for timing, as in CUDA's guard.
  void createEvent(nrt_event **event, c10::EventFlag flag) const {
    unsigned flags = flag == c10::EventFlag::BACKEND_DEFAULT ? NRT_EVENT_TIMING : NRT_EVENT_DEFAULT;
    check(nrt_event_create(flags, event), "neuron event create");
  }
  void destroyEvent(void *event, const c10::DeviceIndex) const noexcept override {
    if (event) nrt_event_destroy(static_cast<nrt_event *>(event));
  }
  void record(void **event, const c10::Stream &stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(),
                "event device index ", device_index, " does not match the recording stream's device ",
                stream.device_index());
    auto **ev = reinterpret_cast<nrt_event **>(event);
    if (!*ev) createEvent(ev, flag);
    check(nrt_event_record(*ev, to_nrt_stream(stream)), "neuron event record");
  }
  void block(void *event, const c10::Stream &stream) const override {
    if (!event) return;
    check(nrt_stream_wait_event(to_nrt_stream(stream), static_cast<nrt_event *>(event)),
          "neuron stream wait event");
  }
  bool queryEvent(void *event) const override {
    if (!event) return true;
    nrt_status s = nrt_event_query(static_cast<nrt_event *>(event));
    if (s == NRT_ERROR_NOT_READY) return false;
    check(s, "neuron event query");
    return true;
  }
  void synchronizeEvent(void *event) const override {
    if (!event) return;
    check(nrt_event_synchronize(static_cast<nrt_event *>(event)), "neuron event synchronize");
  }
  double elapsedTime(void *start, void *end, const c10::DeviceIndex) const override {
    TORCH_CHECK(start && end, "Both events must be recorded before calculating elapsed time.");
    float ms = 0;
    check(nrt_event_elapsed_time(static_cast<nrt_event *>(start), static_cast<nrt_event *>(end), &ms),
          "neuron event elapsed_time (were both events created with enable_timing=True and recorded?)");
    return ms;
  }
  bool queryStream(const c10::Stream &stream) const override {
    nrt_status s = nrt_stream_query(to_nrt_stream(stream));
    if (s == NRT_ERROR_NOT_READY) return false;
    check(s, "neuron stream query");
    return true;
  }
  void synchronizeStream(const c10::Stream &stream) const override {
    check(nrt_stream_synchronize(to_nrt_stream(stream)), "neuron stream synchronize");
  }
  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    c10::DeviceIndex d = device_index < 0 ? current_device() : device_index;
    check(nrt_device_synchronize(d), "neuron synchronize");
  }
  void recordDataPtrOnStream(const c10::DataPtr &data_ptr, const c10::Stream &stream) const override {
    if (data_ptr.get()) check(nrt_record_stream(data_ptr.get(), to_nrt_stream(stream)), "record_stream");
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, NeuronGuardImpl);

}  // namespace
}  // namespace torch_neuronx
