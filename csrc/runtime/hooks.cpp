// PrivateUse1HooksInterface: how ATen asks about the neuron device
// (availability, current device, pinned memory, generators, storage
// resize). Registered at library load, before anything asks, so
// torch._C._get_accelerator() and backward() find it.
#include <ATen/core/Generator.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>

#include "runtime/device.h"
#include "runtime/generator.h"

namespace torch_neuronx {
namespace {

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
  at::Allocator *getPinnedMemoryAllocator() const override { return pinned_host_allocator(); }
  at::Device getDeviceFromPtr(void *data) const override {
    int d = -1;
    TORCH_CHECK(nrt_pointer_get_device(data, &d) == NRT_SUCCESS, "pointer is not neuron device memory");
    return at::Device(kNeuron, static_cast<c10::DeviceIndex>(d));
  }
  const at::Generator &getDefaultGenerator(c10::DeviceIndex d) const override { return default_generator(d); }
  at::Generator getNewGenerator(c10::DeviceIndex d) const override { return new_generator(d); }
  void resizePrivateUse1Bytes(const c10::Storage &storage, size_t newsize) const override {
    resize_storage_bytes(storage, newsize);
  }
};

struct RegisterHooks {
  RegisterHooks() { at::RegisterPrivateUse1HooksInterface(new NeuronHooks()); }
} g_register_hooks;

}  // namespace
}  // namespace torch_neuronx
