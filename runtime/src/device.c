/* Logical devices: the environment is read once, at the first nrt_init()
 * (every public entry point taking a device calls it), into a table that is
 * read-only afterwards. The only other per-device state owned here is the
 * calling thread's current device. */
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

#define NRT_CORE_COUNT_PER_DEVICE 2
#define NRT_MAX_PHYSICAL_CORE 4095

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static nrt_env_config config; /* written once inside init_once */
static _Thread_local int tls_current_device = 0;

/* ---- environment parsing ------------------------------------------------ */

static const char *skip_space(const char *p) {
  while (*p && isspace((unsigned char)*p)) p++;
  return p;
}

/* Parses a non-negative decimal integer of at most `max`; no sign. */
static const char *parse_uint(const char *p, long max, long *out) {
  if (!isdigit((unsigned char)*p)) return NULL;
  long v = 0;
  while (isdigit((unsigned char)*p)) {
    v = v * 10 + (*p - '0');
    if (v > max) return NULL;
    p++;
  }
  *out = v;
  return p;
}

nrt_status nrt_parse_visible_cores(const char *text, int max_cores, int *out_cores,
                                   int *out_count) {
  if (!text || !out_cores || !out_count || max_cores <= 0) return NRT_ERROR_INVALID_ARGUMENT;
  int count = 0;
  const char *p = skip_space(text);
  if (*p == '\0') return NRT_ERROR_INVALID_ARGUMENT;
  for (;;) {
    long lo, hi;
    p = parse_uint(skip_space(p), NRT_MAX_PHYSICAL_CORE, &lo);
    if (!p) return NRT_ERROR_INVALID_ARGUMENT;
    p = skip_space(p);
    hi = lo;
    if (*p == '-') {
      p = parse_uint(skip_space(p + 1), NRT_MAX_PHYSICAL_CORE, &hi);
      if (!p || hi < lo) return NRT_ERROR_INVALID_ARGUMENT;
      p = skip_space(p);
    }
    for (long c = lo; c <= hi; c++) {
      if (count >= max_cores) return NRT_ERROR_INVALID_ARGUMENT;
      for (int i = 0; i < count; i++)
        if (out_cores[i] == c) return NRT_ERROR_INVALID_ARGUMENT; /* duplicate */
      out_cores[count++] = (int)c;
    }
    if (*p == '\0') break;
    if (*p != ',') return NRT_ERROR_INVALID_ARGUMENT;
    p++;
  }
  *out_count = count;
  return NRT_SUCCESS;
}

nrt_status nrt_parse_memory_size(const char *text, uint64_t *out_bytes) {
  if (!text || !out_bytes) return NRT_ERROR_INVALID_ARGUMENT;
  const char *p = skip_space(text);
  if (!isdigit((unsigned char)*p)) return NRT_ERROR_INVALID_ARGUMENT;
  uint64_t whole = 0;
  while (isdigit((unsigned char)*p)) {
    unsigned d = (unsigned)(*p++ - '0');
    if (whole > (UINT64_MAX - d) / 10) return NRT_ERROR_INVALID_ARGUMENT;
    whole = whole * 10 + d;
  }
  double frac = 0.0;
  if (*p == '.') {
    p++;
    if (!isdigit((unsigned char)*p)) return NRT_ERROR_INVALID_ARGUMENT;
    double scale = 0.1;
    while (isdigit((unsigned char)*p)) {
      frac += (*p++ - '0') * scale;
      scale *= 0.1;
    }
  }
  p = skip_space(p);
  /* Device memory is always quoted in binary units (a "24 GB" HBM stack is
   * 24 GiB), so K/KB/KiB all mean 1024. */
  static const struct { const char *suffix; unsigned shift; } units[] = {
      {"", 0},    {"b", 0},    {"k", 10},   {"kb", 10}, {"kib", 10},
      {"m", 20},  {"mb", 20},  {"mib", 20}, {"g", 30},  {"gb", 30},
      {"gib", 30}, {"t", 40},  {"tb", 40},  {"tib", 40},
  };
  size_t len = strlen(p);
  while (len > 0 && isspace((unsigned char)p[len - 1])) len--;
  int found = -1;
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
    if (strlen(units[i].suffix) == len && strncasecmp(p, units[i].suffix, len) == 0) {
      found = (int)i;
      break;
    }
  }
  if (found < 0) return NRT_ERROR_INVALID_ARGUMENT;
  unsigned shift = units[found].shift;
  if (shift > 0 && whole > (UINT64_MAX >> shift)) return NRT_ERROR_INVALID_ARGUMENT;
  uint64_t bytes = whole << shift;
  uint64_t extra = (uint64_t)(frac * (double)(1ull << shift));
  if (bytes > UINT64_MAX - extra) return NRT_ERROR_INVALID_ARGUMENT;
  bytes += extra;
  if (bytes == 0) return NRT_ERROR_INVALID_ARGUMENT;
  *out_bytes = bytes;
  return NRT_SUCCESS;
}

static int parse_flag(const char *v) {
  if (!v) return 0;
  v = skip_space(v);
  return strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0 || strcasecmp(v, "yes") == 0 ||
         strcasecmp(v, "on") == 0;
}

static void set_default_cores(nrt_env_config *c, int count) {
  c->device_count = count;
  for (int i = 0; i < count; i++) c->physical_cores[i] = i;
}

void nrt_config_from_env(nrt_env_lookup lookup, void *ctx, nrt_env_config *out_config) {
  nrt_env_config c;
  memset(&c, 0, sizeof c);
  set_default_cores(&c, NRT_DEFAULT_DEVICE_COUNT);
  c.capacity = NRT_DEFAULT_MEMORY_CAPACITY;

  const char *visible = lookup(ctx, "NEURON_RT_VISIBLE_CORES");
  const char *num = lookup(ctx, "NEURON_RT_NUM_CORES");
  if (visible) {
    int cores[NRT_MAX_DEVICES], n = 0;
    if (nrt_parse_visible_cores(visible, NRT_MAX_DEVICES, cores, &n) == NRT_SUCCESS) {
      c.device_count = n;
      memcpy(c.physical_cores, cores, sizeof(int) * (size_t)n);
    } else {
      fprintf(stderr,
              "nrt: warning: ignoring NEURON_RT_VISIBLE_CORES=\"%s\" (expected e.g. \"0-1\", "
              "\"2\" or \"0,2,3\", at most %d distinct cores); using %d cores\n",
              visible, NRT_MAX_DEVICES, NRT_DEFAULT_DEVICE_COUNT);
    }
  } else if (num) {
    long n = 0;
    const char *end = parse_uint(skip_space(num), NRT_MAX_DEVICES, &n);
    if (end && *skip_space(end) == '\0' && n >= 1) {
      set_default_cores(&c, (int)n);
    } else {
      fprintf(stderr,
              "nrt: warning: ignoring NEURON_RT_NUM_CORES=\"%s\" (expected 1..%d); using %d "
              "cores\n",
              num, NRT_MAX_DEVICES, NRT_DEFAULT_DEVICE_COUNT);
    }
  }

  const char *mem = lookup(ctx, "TORCH_NEURONX_DEVICE_MEMORY");
  if (mem) {
    uint64_t bytes = 0;
    if (nrt_parse_memory_size(mem, &bytes) == NRT_SUCCESS) {
      c.capacity = bytes;
    } else {
      fprintf(stderr,
              "nrt: warning: ignoring TORCH_NEURONX_DEVICE_MEMORY=\"%s\" (expected bytes or a "
              "size such as 512MiB or 16GB); using 24GiB per core\n",
              mem);
    }
  }

  c.launch_blocking = parse_flag(lookup(ctx, "NEURON_LAUNCH_BLOCKING"));
  *out_config = c;
}

/* ---- initialisation -------------------------------------------------------- */

static const char *process_env(void *ctx, const char *name) {
  (void)ctx;
  return getenv(name);
}

static void init_runtime(void) {
  nrt_config_from_env(process_env, NULL, &config);
  nrt_streams_init(config.device_count);
  for (int d = 0; d < config.device_count; d++) nrt_memory_init_device(d, config.capacity);
}

nrt_status nrt_init(void) {
  pthread_once(&init_once, init_runtime);
  return NRT_SUCCESS;
}

int nrt_device_count(void) {
  nrt_init();
  return config.device_count;
}

int nrt_device_valid(int device) {
  nrt_init();
  return device >= 0 && device < config.device_count;
}

uint64_t nrt_device_capacity(int device) {
  if (!nrt_device_valid(device)) return 0;
  return nrt_memory_capacity(device);
}

static nrt_status invalid_device(const char *fn, int device) {
  nrt_set_error_message("%s: invalid device %d (the runtime has %d device%s)", fn, device,
                        config.device_count, config.device_count == 1 ? "" : "s");
  return NRT_ERROR_INVALID_DEVICE;
}

/* ---- public API ---------------------------------------------------------- */

nrt_status nrt_get_device_count(int *out_count) {
  nrt_init();
  if (!out_count) return NRT_ERROR_INVALID_ARGUMENT;
  *out_count = config.device_count;
  return NRT_SUCCESS;
}

nrt_status nrt_get_device_properties(int device, nrt_device_properties *out_props) {
  if (!nrt_device_valid(device)) return invalid_device("nrt_get_device_properties", device);
  if (!out_props) return NRT_ERROR_INVALID_ARGUMENT;
  memset(out_props, 0, sizeof *out_props);
  snprintf(out_props->name, sizeof out_props->name, "%s", "NeuronCore-v3 (logical, software)");
  out_props->index = device;
  out_props->physical_core = config.physical_cores[device];
  out_props->core_count = NRT_CORE_COUNT_PER_DEVICE;
  out_props->total_memory = nrt_memory_capacity(device);
  out_props->worker_threads = nrt_pool_threads();
  return NRT_SUCCESS;
}

nrt_status nrt_set_device(int device) {
  if (!nrt_device_valid(device)) return invalid_device("nrt_set_device", device);
  tls_current_device = device;
  return NRT_SUCCESS;
}

nrt_status nrt_get_device(int *out_device) {
  nrt_init();
  if (!out_device) return NRT_ERROR_INVALID_ARGUMENT;
  *out_device = tls_current_device;
  return NRT_SUCCESS;
}

nrt_status nrt_device_synchronize(int device) {
  if (!nrt_device_valid(device)) return invalid_device("nrt_device_synchronize", device);
  /* Report one error per call (the lowest stream index); the others stay
   * sticky on their streams and surface at the next synchronising call
   * rather than being lost. */
  nrt_status first = NRT_SUCCESS;
  for (int i = 0; i < NRT_STREAMS_PER_DEVICE; i++) {
    nrt_stream *s = nrt_stream_at(device, i);
    if (first == NRT_SUCCESS)
      first = nrt_stream_synchronize(s); /* sets this thread's message on error */
    else
      nrt_stream_wait_quiet(s, nrt_stream_enqueued(s));
  }
  return first;
}

nrt_status nrt_set_memory_capacity(int device, uint64_t bytes) {
  if (!nrt_device_valid(device)) return invalid_device("nrt_set_memory_capacity", device);
  return nrt_memory_set_capacity(device, bytes);
}

int nrt_launch_blocking(void) {
  nrt_init();
  return config.launch_blocking;
}
