/* nrt_init and the device properties: what needs every layer at once. The
 * lower layers set themselves up lazily from the configuration, so they
 * never call up here; nrt_init only forces that set-up and reports an
 * invalid configuration. */
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "exec/exec.h"
#include "memory/memory.h"

#define NRT_CORE_COUNT_PER_DEVICE 2

nrt_status nrt_init(void) {
  nrt_streams_ready();
  nrt_memory_ready();
  return nrt_config_check();
}

nrt_status nrt_get_device_properties(int device, nrt_device_properties *out_props) {
  if (!nrt_device_valid(device)) return nrt_invalid_device("nrt_get_device_properties", device);
  if (!out_props) return NRT_ERROR_INVALID_ARGUMENT;
  memset(out_props, 0, sizeof *out_props);
  snprintf(out_props->name, sizeof out_props->name, "%s", "NeuronCore-v3 (logical, software)");
  out_props->index = device;
  out_props->physical_core = nrt_device_physical_core(device);
  out_props->core_count = NRT_CORE_COUNT_PER_DEVICE;
  out_props->total_memory = nrt_memory_capacity(device);
  out_props->worker_threads = nrt_pool_threads();
  return NRT_SUCCESS;
}
