/* Devices: environment parsing (through the pure parser and through the
 * real environment of this process), properties, the current device, bad
 * indices everywhere, and device-wide synchronisation. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "exec/exec.h"
#include "memory/memory.h"
#include "testing.h"

/* This process starts with NEURON_RT_VISIBLE_CORES=1-2 and
 * TORCH_NEURONX_DEVICE_MEMORY=1.5GiB (set in main before nrt_init). */
#define EXPECTED_COUNT 2
#define EXPECTED_CAPACITY ((uint64_t)3 << 29)

static void test_parse_visible_cores(void) {
  int cores[NRT_MAX_DEVICES], n = -1;
  CHECK_OK(nrt_parse_visible_cores("0-1", NRT_MAX_DEVICES, cores, &n));
  CHECK(n == 2 && cores[0] == 0 && cores[1] == 1);
  CHECK_OK(nrt_parse_visible_cores("2", NRT_MAX_DEVICES, cores, &n));
  CHECK(n == 1 && cores[0] == 2);
  CHECK_OK(nrt_parse_visible_cores("0,2,3", NRT_MAX_DEVICES, cores, &n));
  CHECK(n == 3 && cores[0] == 0 && cores[1] == 2 && cores[2] == 3);
  CHECK_OK(nrt_parse_visible_cores(" 4-5 , 8 ", NRT_MAX_DEVICES, cores, &n));
  CHECK(n == 3 && cores[0] == 4 && cores[1] == 5 && cores[2] == 8);
  CHECK_OK(nrt_parse_visible_cores("7-7", NRT_MAX_DEVICES, cores, &n));
  CHECK(n == 1 && cores[0] == 7);
  const char *bad[] = {"", "  ", "a", "1-", "-1", "3-1", "1,,2", "1,", ",1", "1 2",
                       "0-1,1", "1.5", "99999", "0-70", "+1", "0x1"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    n = -1;
    nrt_status st = nrt_parse_visible_cores(bad[i], NRT_MAX_DEVICES, cores, &n);
    if (st != NRT_ERROR_INVALID_ARGUMENT) fprintf(stderr, "accepted \"%s\"\n", bad[i]);
    CHECK(st == NRT_ERROR_INVALID_ARGUMENT);
  }
  /* The count limit is the table size. */
  CHECK_STATUS(nrt_parse_visible_cores("0-3", 3, cores, &n), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_OK(nrt_parse_visible_cores("0-63", NRT_MAX_DEVICES, cores, &n));
  CHECK(n == 64 && cores[63] == 63);
}

static void test_parse_memory_size(void) {
  struct {
    const char *text;
    uint64_t want;
  } good[] = {
      {"1024", 1024},
      {"512M", 512ull << 20},
      {"512m", 512ull << 20},
      {"512MB", 512ull << 20},
      {"512MiB", 512ull << 20},
      {"512mib", 512ull << 20},
      {"16G", 16ull << 30},
      {"16gb", 16ull << 30},
      {"16GiB", 16ull << 30},
      {"24 GiB", 24ull << 30},
      {"  8k ", 8192},
      {"8KB", 8192},
      {"8KiB", 8192},
      {"1.5GiB", 3ull << 29},
      {"0.5K", 512},
      {"100B", 100},
      {"1T", 1ull << 40},
  };
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    uint64_t v = 0;
    nrt_status st = nrt_parse_memory_size(good[i].text, &v);
    if (st != NRT_SUCCESS || v != good[i].want)
      fprintf(stderr, "\"%s\" -> %s %llu\n", good[i].text, nrt_status_name(st),
              (unsigned long long)v);
    CHECK(st == NRT_SUCCESS && v == good[i].want);
  }
  const char *bad[] = {"", "G", "-1G", "1X", "1GG", "1 G B", "0", "0G", "1.G", ".5G",
                       "99999999999999999999", "20000000000G", "1e9"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    uint64_t v = 0;
    nrt_status st = nrt_parse_memory_size(bad[i], &v);
    if (st != NRT_ERROR_INVALID_ARGUMENT) fprintf(stderr, "accepted \"%s\"\n", bad[i]);
    CHECK(st == NRT_ERROR_INVALID_ARGUMENT);
  }
}

/* A fake environment: NULL-terminated name/value pairs. */
static const char *fake_lookup(void *ctx, const char *name) {
  const char **kv = ctx;
  for (; kv[0]; kv += 2)
    if (strcmp(kv[0], name) == 0) return kv[1];
  return NULL;
}

static void test_config_from_env(void) {
  nrt_config c;
  const char *empty[] = {NULL};
  nrt_config_from_env(fake_lookup, empty, &c);
  CHECK(c.device_count == NRT_DEFAULT_DEVICE_COUNT);
  CHECK(c.physical_cores[0] == 0 && c.physical_cores[3] == 3);
  CHECK(c.capacity == NRT_DEFAULT_MEMORY_CAPACITY);
  CHECK(c.launch_blocking == 0);

  const char *visible[] = {"NEURON_RT_VISIBLE_CORES", "0,2,3", "NEURON_RT_NUM_CORES", "8",
                           "TORCH_NEURONX_DEVICE_MEMORY", "64MiB", "NEURON_LAUNCH_BLOCKING",
                           "1", NULL};
  nrt_config_from_env(fake_lookup, visible, &c);
  CHECK(c.device_count == 3); /* VISIBLE_CORES wins over NUM_CORES */
  CHECK(c.physical_cores[0] == 0 && c.physical_cores[1] == 2 && c.physical_cores[2] == 3);
  CHECK(c.capacity == 64ull << 20);
  CHECK(c.launch_blocking == 1);

  /* A core the device lacks fails the configuration, naming the core. */
  const char *missing[] = {"NEURON_RT_VISIBLE_CORES", "1,7", NULL};
  nrt_config_from_env(fake_lookup, missing, &c);
  CHECK(c.status == NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(c.error, "names core 7") && strstr(c.error, "has 4 NeuronCores"));
  const char *more[] = {"NEURON_RT_VISIBLE_CORES", "7", "NEURON_RT_NUM_CORES", "8", NULL};
  nrt_config_from_env(fake_lookup, more, &c);
  CHECK(c.status == NRT_SUCCESS && c.device_count == 1 && c.physical_cores[0] == 7);

  const char *num[] = {"NEURON_RT_NUM_CORES", "6", "NEURON_LAUNCH_BLOCKING", "0", NULL};
  nrt_config_from_env(fake_lookup, num, &c);
  CHECK(c.device_count == 6 && c.physical_cores[5] == 5);
  CHECK(c.launch_blocking == 0);

  fprintf(stderr, "(the next four warnings are expected)\n");
  const char *invalid[] = {"NEURON_RT_VISIBLE_CORES", "3-1", "TORCH_NEURONX_DEVICE_MEMORY",
                           "lots", NULL};
  nrt_config_from_env(fake_lookup, invalid, &c);
  CHECK(c.device_count == NRT_DEFAULT_DEVICE_COUNT && c.physical_cores[1] == 1);
  CHECK(c.capacity == NRT_DEFAULT_MEMORY_CAPACITY);
  const char *bad_num[] = {"NEURON_RT_NUM_CORES", "0", NULL};
  nrt_config_from_env(fake_lookup, bad_num, &c);
  CHECK(c.device_count == NRT_DEFAULT_DEVICE_COUNT);
  const char *big_num[] = {"NEURON_RT_NUM_CORES", "65", NULL};
  nrt_config_from_env(fake_lookup, big_num, &c);
  CHECK(c.device_count == NRT_DEFAULT_DEVICE_COUNT);
}

/* Every BOOL row takes the same spellings; anything else fails the whole
 * configuration, naming the variable, and leaves the default in effect. */
static void test_bool_grammar(void) {
  const char *yes[] = {"1", "true", "TRUE", "yes", "On", " on "};
  const char *no[] = {"0", "false", "No", "off", ""};
  nrt_config c;
  for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
    const char *env[] = {"NEURON_LAUNCH_BLOCKING", yes[i], "TORCH_NEURONX_DISABLE_FALLBACK", yes[i], NULL};
    nrt_config_from_env(fake_lookup, env, &c);
    CHECK(c.status == NRT_SUCCESS && c.launch_blocking && c.disable_fallback);
  }
  for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
    const char *env[] = {"NEURON_LAUNCH_BLOCKING", no[i], "TORCH_NEURONX_DISABLE_FALLBACK", no[i], NULL};
    nrt_config_from_env(fake_lookup, env, &c);
    CHECK(c.status == NRT_SUCCESS && !c.launch_blocking && !c.disable_fallback);
  }
  const char *bad[] = {"TORCH_NEURONX_DISABLE_FALLBACK", "false-ish", NULL};
  nrt_config_from_env(fake_lookup, bad, &c);
  CHECK(c.status == NRT_ERROR_INVALID_ARGUMENT && !c.disable_fallback);
  CHECK(strstr(c.error, "TORCH_NEURONX_DISABLE_FALLBACK=\"false-ish\"") != NULL);
  CHECK(strstr(c.error, "true/false") != NULL);
}

/* The table describes every row; the getters check the row's type. */
static void test_env_table(void) {
  for (int i = 0; i < NRT_ENV_COUNT; i++) {
    nrt_env_info info;
    CHECK_OK(nrt_env_describe((nrt_env)i, &info));
    CHECK(info.name && info.type && info.default_value && info.reader && info.help);
    CHECK(strncmp(info.name, "NEURON_", 7) == 0 || strncmp(info.name, "TORCH_NEURONX_", 14) == 0);
  }
  nrt_env_info info;
  CHECK(nrt_env_describe(NRT_ENV_COUNT, &info) == NRT_ERROR_INVALID_ARGUMENT);
  CHECK_OK(nrt_env_describe(NRT_ENV_VISIBLE_CORES, &info));
  CHECK(strcmp(info.value, "1-2") == 0); /* as main() set it */
  bool b = true;
  CHECK_OK(nrt_env_get_bool(NRT_ENV_LAUNCH_BLOCKING, &b));
  CHECK(!b);
  CHECK(nrt_env_get_bool(NRT_ENV_NUM_CORES, &b) == NRT_ERROR_INVALID_ARGUMENT);
  int64_t v = 0;
  CHECK_OK(nrt_env_get_int(NRT_ENV_NUM_CORES, &v));
  CHECK(v == 2);
  CHECK(nrt_env_get_int(NRT_ENV_LAUNCH_BLOCKING, &v) == NRT_ERROR_INVALID_ARGUMENT);
}

static void test_process_environment(void) {
  CHECK_OK(nrt_init());
  CHECK_OK(nrt_init()); /* idempotent */
  int n = 0;
  CHECK_OK(nrt_get_device_count(&n));
  CHECK(n == EXPECTED_COUNT);
  CHECK(nrt_launch_blocking() == 0);
  nrt_device_properties p;
  CHECK_OK(nrt_get_device_properties(0, &p));
  CHECK(strcmp(p.name, "NeuronCore-v3 (logical, software)") == 0);
  CHECK(p.index == 0 && p.physical_core == 1);
  CHECK(p.core_count == 2);
  CHECK(p.total_memory == EXPECTED_CAPACITY);
  CHECK(p.worker_threads == nrt_pool_threads() && p.worker_threads >= 1);
  CHECK_OK(nrt_get_device_properties(1, &p));
  CHECK(p.index == 1 && p.physical_core == 2);
  CHECK(nrt_memory_capacity(1) == EXPECTED_CAPACITY);
  CHECK(nrt_device_valid(1) && !nrt_device_valid(2) && !nrt_device_valid(-1));
}

static void *concurrent_init(void *arg) {
  (void)arg;
  nrt_init();
  int n = 0;
  nrt_get_device_count(&n);
  return (void *)(intptr_t)n;
}

static void test_init_thread_safe(void) {
  pthread_t t[8];
  for (int i = 0; i < 8; i++) pthread_create(&t[i], NULL, concurrent_init, NULL);
  for (int i = 0; i < 8; i++) {
    void *r;
    pthread_join(t[i], &r);
    CHECK((intptr_t)r == EXPECTED_COUNT);
  }
}

static void test_bad_device_index(void) {
  int bad[] = {-1, EXPECTED_COUNT, NRT_MAX_DEVICES, 1000};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int d = bad[i];
    nrt_device_properties p;
    nrt_stream *s;
    nrt_memory_stats st;
    size_t f, t;
    CHECK_STATUS(nrt_get_device_properties(d, &p), NRT_ERROR_INVALID_DEVICE);
    CHECK_STATUS(nrt_set_device(d), NRT_ERROR_INVALID_DEVICE);
    CHECK_STATUS(nrt_device_synchronize(d), NRT_ERROR_INVALID_DEVICE);
    CHECK_STATUS(nrt_set_memory_capacity(d, 1 << 30), NRT_ERROR_INVALID_DEVICE);
    CHECK_STATUS(nrt_stream_get(d, 0, &s), NRT_ERROR_INVALID_DEVICE);
    CHECK_STATUS(nrt_stream_get_default(d, &s), NRT_ERROR_INVALID_DEVICE);
    CHECK_STATUS(nrt_stream_acquire(d, &s), NRT_ERROR_INVALID_DEVICE);
    CHECK_STATUS(nrt_empty_cache(d), NRT_ERROR_INVALID_DEVICE);
    CHECK_STATUS(nrt_memory_get_stats(d, &st), NRT_ERROR_INVALID_DEVICE);
    CHECK_STATUS(nrt_memory_reset_peak_stats(d), NRT_ERROR_INVALID_DEVICE);
    CHECK_STATUS(nrt_memory_reset_accumulated_stats(d), NRT_ERROR_INVALID_DEVICE);
    CHECK_STATUS(nrt_mem_get_info(d, &f, &t), NRT_ERROR_INVALID_DEVICE);
  }
  CHECK_STATUS(nrt_set_device(5), NRT_ERROR_INVALID_DEVICE);
  CHECK(strstr(nrt_last_error_message(), "invalid device 5") != NULL);
  CHECK_STATUS(nrt_get_device_count(NULL), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_get_device_properties(0, NULL), NRT_ERROR_INVALID_ARGUMENT);
}

static void *device_in_thread(void *arg) {
  int *out = arg;
  nrt_get_device(&out[0]); /* a new thread starts on device 0 */
  nrt_set_device(0);
  nrt_get_device(&out[1]);
  return NULL;
}

static void test_current_device(void) {
  int d = -1;
  CHECK_OK(nrt_get_device(&d));
  CHECK(d == 0);
  CHECK_OK(nrt_set_device(1));
  CHECK_OK(nrt_get_device(&d));
  CHECK(d == 1);
  int seen[2] = {-1, -1};
  pthread_t t;
  pthread_create(&t, NULL, device_in_thread, seen);
  pthread_join(t, NULL);
  CHECK(seen[0] == 0 && seen[1] == 0);
  CHECK_OK(nrt_get_device(&d));
  CHECK(d == 1); /* unaffected by the other thread */
  CHECK_OK(nrt_set_device(0));
}

static nrt_status failing_task(void *arg) {
  nrt_set_error_message("%s", (const char *)arg);
  return NRT_ERROR_KERNEL_FAILED;
}

static nrt_status ok_task(void *arg) {
  (*(int *)arg)++;
  return NRT_SUCCESS;
}

static void test_device_synchronize(void) {
  CHECK_OK(nrt_device_synchronize(0));
  nrt_stream *s3, *s5;
  CHECK_OK(nrt_stream_get(1, 3, &s3));
  CHECK_OK(nrt_stream_get(1, 5, &s5));
  int counter = 0;
  for (int i = 0; i < 100; i++) CHECK_OK(nrt_stream_enqueue(s5, "inc", ok_task, &counter, NULL));
  CHECK_OK(nrt_stream_enqueue(s3, "bad_kernel", failing_task, "first", NULL));
  CHECK_OK(nrt_stream_enqueue(s5, "worse_kernel", failing_task, "second", NULL));
  /* One error per call, lowest stream first; the other stays sticky. */
  CHECK_STATUS(nrt_device_synchronize(1), NRT_ERROR_KERNEL_FAILED);
  CHECK(counter == 100);
  CHECK(strstr(nrt_last_error_message(), "kernel bad_kernel failed on neuron:1 stream 3") != NULL);
  CHECK(strstr(nrt_last_error_message(), "first") != NULL);
  CHECK_STATUS(nrt_device_synchronize(1), NRT_ERROR_KERNEL_FAILED);
  CHECK(strstr(nrt_last_error_message(), "kernel worse_kernel failed on neuron:1 stream 5") !=
        NULL);
  CHECK_OK(nrt_device_synchronize(1));
  /* Device 0 is unaffected. */
  CHECK_OK(nrt_device_synchronize(0));
}

static void test_set_memory_capacity(void) {
  nrt_stream *s;
  CHECK_OK(nrt_stream_get(0, 0, &s));
  void *p = NULL;
  CHECK_OK(nrt_malloc(1000, s, &p)); /* reserves a 2 MiB segment */
  CHECK_STATUS(nrt_set_memory_capacity(0, 1 << 20), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(nrt_last_error_message(), "2.00 MiB reserved") != NULL);
  CHECK_OK(nrt_set_memory_capacity(0, 2 << 20));
  nrt_device_properties props;
  CHECK_OK(nrt_get_device_properties(0, &props));
  CHECK(props.total_memory == 2 << 20);
  CHECK_OK(nrt_free(p));
  CHECK_OK(nrt_empty_cache(0));
  CHECK_OK(nrt_set_memory_capacity(0, 0)); /* nothing reserved: any limit is valid */
  CHECK_STATUS(nrt_malloc(1000, s, &p), NRT_ERROR_OUT_OF_MEMORY);
  CHECK_OK(nrt_set_memory_capacity(0, EXPECTED_CAPACITY));
  CHECK(nrt_memory_capacity(0) == EXPECTED_CAPACITY);
}

int main(void) {
  setenv("NEURON_RT_VISIBLE_CORES", "1-2", 1);
  setenv("TORCH_NEURONX_DEVICE_MEMORY", "1.5GiB", 1);
  unsetenv("NEURON_RT_NUM_CORES");
  unsetenv("NEURON_LAUNCH_BLOCKING");
  RUN_TEST(test_parse_visible_cores);
  RUN_TEST(test_parse_memory_size);
  RUN_TEST(test_config_from_env);
  RUN_TEST(test_bool_grammar);
  RUN_TEST(test_env_table);
  RUN_TEST(test_process_environment);
  RUN_TEST(test_init_thread_safe);
  RUN_TEST(test_bad_device_index);
  RUN_TEST(test_current_device);
  RUN_TEST(test_device_synchronize);
  RUN_TEST(test_set_memory_capacity);
  return TEST_RESULT();
}
