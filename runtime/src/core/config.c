/* The environment-variable table (nrt/config.h) and its parser. The
 * process environment is read once, at first use, into one nrt_config that
 * is read-only afterwards; tests parse a fake environment through
 * nrt_config_from_env(). */
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/core.h"

#define NRT_MAX_PHYSICAL_CORE 4095
#define NRT_MAX_KERNEL_THREADS 256
/* The message for a BOOL row that does not parse: name, value. */
#define NOT_A_BOOLEAN "%s=\"%s\" is not a boolean: use 1/0, true/false, yes/no or on/off"

static const struct {
  const char *name, *type, *def, *reader, *help;
} rows[NRT_ENV_COUNT] = {
#define TYPE_NAME_BOOL "bool"
#define TYPE_NAME_INT "int"
#define TYPE_NAME_SIZE "size"
#define TYPE_NAME_CORES "cores"
#define TYPE_NAME_STRING "string"
#define NRT_ENV_X(id, name, type, def, reader, help) [NRT_ENV_##id] = {name, TYPE_NAME_##type, def, reader, help},
    NRT_ENV_LIST(NRT_ENV_X)
#undef NRT_ENV_X
};

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

/* BOOL rows: the accepted spellings, and nothing else. */
static bool parse_bool(const char *text, bool *out) {
  static const char *const yes[] = {"1", "true", "yes", "on"};
  static const char *const no[] = {"0", "false", "no", "off"};
  const char *p = skip_space(text);
  size_t len = strlen(p);
  while (len > 0 && isspace((unsigned char)p[len - 1])) len--;
  for (int i = 0; i < 4; i++) {
    if (strlen(yes[i]) == len && strncasecmp(p, yes[i], len) == 0) return *out = true, true;
    if (strlen(no[i]) == len && strncasecmp(p, no[i], len) == 0) return *out = false, true;
  }
  return false;
}

/* INT rows: a decimal in [lo, hi], surrounding spaces allowed. */
static bool parse_int(const char *text, long lo, long hi, long *out) {
  long v = 0;
  const char *end = parse_uint(skip_space(text), hi, &v);
  if (!end || *skip_space(end) != '\0' || v < lo) return false;
  *out = v;
  return true;
}

static void set_default_cores(nrt_config *c, int count) {
  c->device_count = count;
  for (int i = 0; i < count; i++) c->physical_cores[i] = i;
}

/* The first invalid BOOL row makes the whole configuration fail (nrt_init
 * reports it); its default stays in effect meanwhile. */
static void bool_row(nrt_config *c, nrt_env var, bool *field) {
  const char *v = c->raw[var];
  if (!v) return;
  if (parse_bool(v, field)) return;
  c->invalid[var] = true;
  if (c->status == NRT_SUCCESS) {
    c->status = NRT_ERROR_INVALID_ARGUMENT;
    snprintf(c->error, sizeof c->error,
             NOT_A_BOOLEAN, rows[var].name, v);
  }
}

void nrt_config_from_env(nrt_env_lookup lookup, void *ctx, nrt_config *out_config) {
  nrt_config *c = out_config;
  memset(c, 0, sizeof *c);
  for (int i = 0; i < NRT_ENV_COUNT; i++) {
    const char *v = lookup(ctx, rows[i].name);
    c->raw[i] = (v && *skip_space(v)) ? v : NULL; /* empty means unset */
  }
  set_default_cores(c, NRT_DEFAULT_DEVICE_COUNT);
  c->capacity = NRT_DEFAULT_MEMORY_CAPACITY;

  const char *visible = c->raw[NRT_ENV_VISIBLE_CORES], *num = c->raw[NRT_ENV_NUM_CORES];
  /* The software device has NEURON_RT_NUM_CORES logical cores (default 4);
   * NEURON_RT_VISIBLE_CORES picks among them, as on a real instance, where
   * naming a core the instance lacks fails the runtime's start-up. */
  int instance_cores = NRT_DEFAULT_DEVICE_COUNT;
  long n = 0;
  if (num && parse_int(num, 1, NRT_MAX_DEVICES, &n)) {
    instance_cores = (int)n;
  } else if (num) {
    fprintf(stderr,
            "nrt: warning: ignoring NEURON_RT_NUM_CORES=\"%s\" (expected 1..%d); using %d "
            "cores\n",
            num, NRT_MAX_DEVICES, NRT_DEFAULT_DEVICE_COUNT);
  }
  set_default_cores(c, instance_cores);
  if (visible) {
    int cores[NRT_MAX_DEVICES], count = 0;
    if (nrt_parse_visible_cores(visible, NRT_MAX_DEVICES, cores, &count) != NRT_SUCCESS) {
      fprintf(stderr,
              "nrt: warning: ignoring NEURON_RT_VISIBLE_CORES=\"%s\" (expected e.g. \"0-1\", "
              "\"2\" or \"0,2,3\", at most %d distinct cores); using %d cores\n",
              visible, NRT_MAX_DEVICES, instance_cores);
    } else {
      int missing = -1;
      for (int i = 0; i < count; i++)
        if (cores[i] >= instance_cores && missing < 0) missing = cores[i];
      if (missing < 0) {
        c->device_count = count;
        memcpy(c->physical_cores, cores, sizeof(int) * (size_t)count);
      } else {
        if (c->status == NRT_SUCCESS) {
          c->status = NRT_ERROR_INVALID_ARGUMENT;
          snprintf(c->error, sizeof c->error,
                   "NEURON_RT_VISIBLE_CORES=\"%s\" names core %d, but this device has %d NeuronCores "
                   "(0-%d); list cores below %d, or set NEURON_RT_NUM_CORES to simulate more",
                   visible, missing, instance_cores, instance_cores - 1, instance_cores);
        }
      }
    }
  }

  const char *mem = c->raw[NRT_ENV_DEVICE_MEMORY];
  if (mem && nrt_parse_memory_size(mem, &c->capacity) != NRT_SUCCESS) {
    c->capacity = NRT_DEFAULT_MEMORY_CAPACITY;
    fprintf(stderr,
            "nrt: warning: ignoring TORCH_NEURONX_DEVICE_MEMORY=\"%s\" (expected bytes or a "
            "size such as 512MiB or 16GB); using 24GiB per core\n",
            mem);
  }

  const char *threads = c->raw[NRT_ENV_KERNEL_THREADS];
  long t = 0;
  if (threads && parse_int(threads, 1, NRT_MAX_KERNEL_THREADS, &t)) {
    c->kernel_threads = (int)t;
  } else if (threads) {
    fprintf(stderr,
            "nrt: warning: ignoring TORCH_NEURONX_KERNEL_THREADS=\"%s\" (expected 1..%d); "
            "using one per online CPU\n",
            threads, NRT_MAX_KERNEL_THREADS);
  }

  bool_row(c, NRT_ENV_LAUNCH_BLOCKING, &c->launch_blocking);
  bool_row(c, NRT_ENV_DISABLE_FALLBACK, &c->disable_fallback);
}

/* ---- the process's configuration ----------------------------------------- */

static pthread_once_t config_once = PTHREAD_ONCE_INIT;
static nrt_config config; /* written once inside config_once */

static const char *process_env(void *ctx, const char *name) {
  (void)ctx;
  return getenv(name);
}

static void read_process_env(void) { nrt_config_from_env(process_env, NULL, &config); }

const nrt_config *nrt_config_get(void) {
  pthread_once(&config_once, read_process_env);
  return &config;
}

nrt_status nrt_config_check(void) {
  const nrt_config *c = nrt_config_get();
  if (c->status != NRT_SUCCESS) nrt_set_error_message("%s", c->error);
  return c->status;
}

nrt_status nrt_env_describe(nrt_env var, nrt_env_info *out_info) {
  if ((unsigned)var >= NRT_ENV_COUNT || !out_info) return NRT_ERROR_INVALID_ARGUMENT;
  out_info->name = rows[var].name;
  out_info->type = rows[var].type;
  out_info->default_value = rows[var].def;
  out_info->reader = rows[var].reader;
  out_info->help = rows[var].help;
  out_info->value = nrt_config_get()->raw[var];
  return NRT_SUCCESS;
}

static nrt_status wrong_type(const char *fn, nrt_env var, const char *want) {
  nrt_set_error_message("%s: %s is a %s variable, not %s", fn, rows[var].name, rows[var].type,
                        want);
  return NRT_ERROR_INVALID_ARGUMENT;
}

nrt_status nrt_env_get_bool(nrt_env var, bool *out_value) {
  if ((unsigned)var >= NRT_ENV_COUNT || !out_value) return NRT_ERROR_INVALID_ARGUMENT;
  const nrt_config *c = nrt_config_get();
  switch (var) {
  case NRT_ENV_LAUNCH_BLOCKING: *out_value = c->launch_blocking; break;
  case NRT_ENV_DISABLE_FALLBACK: *out_value = c->disable_fallback; break;
  default: return wrong_type("nrt_env_get_bool", var, "bool");
  }
  if (c->invalid[var]) {
    nrt_set_error_message(NOT_A_BOOLEAN,
                          rows[var].name, c->raw[var]);
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  return NRT_SUCCESS;
}

nrt_status nrt_env_get_int(nrt_env var, int64_t *out_value) {
  if ((unsigned)var >= NRT_ENV_COUNT || !out_value) return NRT_ERROR_INVALID_ARGUMENT;
  const nrt_config *c = nrt_config_get();
  switch (var) {
  case NRT_ENV_NUM_CORES: *out_value = c->device_count; return NRT_SUCCESS;
  case NRT_ENV_KERNEL_THREADS: *out_value = c->kernel_threads; return NRT_SUCCESS;
  case NRT_ENV_DEVICE_MEMORY: *out_value = (int64_t)c->capacity; return NRT_SUCCESS;
  default: return wrong_type("nrt_env_get_int", var, "int or size");
  }
}

int nrt_launch_blocking(void) { return nrt_config_get()->launch_blocking; }
