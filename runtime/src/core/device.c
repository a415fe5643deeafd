/* Logical devices as the configuration defines them (core/config.c): how
 * many, which physical core each is, and the calling thread's current
 * device. Everything here is read-only after the first configuration read
 * except that thread-local. */
#include "core/core.h"

static _Thread_local int tls_current_device = 0;

int nrt_device_count(void) { return nrt_config_get()->device_count; }

int nrt_device_valid(int device) { return device >= 0 && device < nrt_device_count(); }

int nrt_device_physical_core(int device) {
  return nrt_device_valid(device) ? nrt_config_get()->physical_cores[device] : -1;
}

nrt_status nrt_invalid_device(const char *fn, int device) {
  int n = nrt_device_count();
  nrt_set_error_message("%s: invalid device %d (the runtime has %d device%s)", fn, device, n,
                        n == 1 ? "" : "s");
  return NRT_ERROR_INVALID_DEVICE;
}

nrt_status nrt_get_device_count(int *out_count) {
  if (!out_count) return NRT_ERROR_INVALID_ARGUMENT;
  *out_count = nrt_device_count();
  return NRT_SUCCESS;
}

nrt_status nrt_set_device(int device) {
  if (!nrt_device_valid(device)) return nrt_invalid_device("nrt_set_device", device);
  tls_current_device = device;
  return NRT_SUCCESS;
}

nrt_status nrt_get_device(int *out_device) {
  if (!out_device) return NRT_ERROR_INVALID_ARGUMENT;
  *out_device = tls_current_device;
  return NRT_SUCCESS;
}
