/* Shared-memory collectives (nrt/collectives.h): every operation on 2, 3 and
 * 4 forked ranks against a reference each rank computes locally (every
 * rank's input is a function of its rank, so each can rebuild all of them),
 * every dtype the op takes, sizes around the algorithm and round limits,
 * the vector paths against the scalar reference, and the faults: a rank that
 * never joins, one that skips an operation, one killed mid-collective, one
 * that leaves. The hierarchical communicator across machines runs on
 * layouts of ranks into simulated machines (its bridge another
 * communicator), against the documented hierarchical fold. After every run
 * /dev/shm must hold nothing of ours.
 *
 * `test_collectives --bench` (or NRT_TEST_COLL_BENCH=1) also prints the
 * all_reduce bandwidth of 64 MiB float32 on 2 and 4 ranks beside a memcpy. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/common/isa.h"
#include "nrt/collectives.h"
#include "testing.h"

/* Small rounds, so that modest sizes already take the multi-round paths
 * (and the tests stay fast under ASan): 64 KiB slots, all_reduce one-step up
 * to 4 KiB, 4 KiB mailboxes. */
static const nrt_comm_options test_options = {64 << 10, 4 << 10, 4 << 10};
#define TIMEOUT_MS 5000

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- the exchange: one file per key in a directory -------------------------------- */
typedef struct file_exchange {
  char dir[128];
} file_exchange;

static void key_path(const file_exchange *fx, const char *key, char *out, size_t size) {
  char clean[200];
  size_t k = 0;
  for (; key[k] && k < sizeof clean - 1; k++) clean[k] = key[k] == '/' ? '_' : key[k];
  clean[k] = '\0';
  snprintf(out, size, "%s/%s", fx->dir, clean);
}

static nrt_status fx_set(void *ctx, const char *key, const void *value, size_t size) {
  char path[400], tmp[420];
  key_path(ctx, key, path, sizeof path);
  snprintf(tmp, sizeof tmp, "%s.%d", path, (int)getpid());
  FILE *f = fopen(tmp, "wb");
  if (!f) return NRT_ERROR_INTERNAL;
  size_t w = fwrite(value, 1, size, f);
  fclose(f);
  /* rename is atomic: a reader sees the whole value or nothing. */
  if (w != size || rename(tmp, path) != 0) return NRT_ERROR_INTERNAL;
  return NRT_SUCCESS;
}

static nrt_status fx_get(void *ctx, const char *key, int64_t timeout_ms, void *value, size_t capacity,
                         size_t *out_size) {
  char path[400];
  key_path(ctx, key, path, sizeof path);
  for (int64_t waited = 0;; waited++) {
    FILE *f = fopen(path, "rb");
    if (f) {
      *out_size = fread(value, 1, capacity, f);
      fclose(f);
      return NRT_SUCCESS;
    }
    if (waited >= timeout_ms) return NRT_ERROR_TIMEOUT;
    nrt_test_sleep_ms(1);
  }
}

/* ---- forked ranks ----------------------------------------------------------------------- */
typedef struct rank_ctx {
  int rank, world;
  char name[64];
  nrt_comm_exchange ex;
  void *arg;
} rank_ctx;
typedef void (*rank_body)(rank_ctx *rc);

/* Barrier tests: when the last rank entered, on the system-wide monotonic
 * clock, in a page every forked rank shares (mapped before any fork).
 * Comparing against each rank's own start instead fails on a busy host,
 * where ranks leave the previous barrier tens of milliseconds apart. */
static _Atomic uint64_t *last_entry_ns;

__attribute__((constructor)) static void map_last_entry(void) {
  void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  last_entry_ns = p == MAP_FAILED ? NULL : p;
  if (!last_entry_ns) abort();
  *last_entry_ns = UINT64_MAX;
}

/* body_all_reduce_eager: how many eager calls the punctual ranks have
 * returned from in the late iterations, in a page the ranks share. */
static _Atomic int *eager_returned;

__attribute__((constructor)) static void map_eager_returned(void) {
  void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) abort();
  eager_returned = p;
}

static int run_counter;

static nrt_comm *join(rank_ctx *rc, int64_t timeout_ms) {
  nrt_comm *c = NULL;
  CHECK_OK(nrt_comm_create(rc->rank, rc->world, rc->name, &rc->ex, timeout_ms, &test_options, &c));
  return c;
}

/* Entries of /dev/shm whose name holds `tag`. */
static int shm_leftovers(const char *tag) {
  DIR *d = opendir("/dev/shm");
  if (!d) return 0;
  int n = 0;
  for (struct dirent *e; (e = readdir(d));)
    if (strstr(e->d_name, tag)) {
      fprintf(stderr, "leftover /dev/shm/%s\n", e->d_name);
      n++;
    }
  closedir(d);
  return n;
}

static void remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  char path[400];
  for (struct dirent *e; (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    unlink(path);
  }
  closedir(d);
  rmdir(dir);
}

/* Runs body on `world` forked ranks. `killed` is the rank expected to die by
 * SIGKILL (-1: none). Every other rank must exit cleanly with its checks
 * passing, within a hard limit of 60 s. */
static void run_ranks_ex(int world, rank_body body, void *arg, int killed) {
  char tag[48], dir[128];
  snprintf(tag, sizeof tag, "ct%d_%d", (int)getpid(), run_counter++);
  snprintf(dir, sizeof dir, "/tmp/nrt-%s", tag);
  CHECK(mkdir(dir, 0700) == 0);
  pid_t pids[8];
  fflush(NULL);
  for (int r = 0; r < world; r++) {
    pids[r] = fork();
    if (pids[r] == 0) {
      nrt_test_failures = 0; /* the parent's count is not this rank's */
      static file_exchange fx;
      snprintf(fx.dir, sizeof fx.dir, "%s", dir);
      rank_ctx rc = {.rank = r, .world = world, .arg = arg};
      snprintf(rc.name, sizeof rc.name, "%s", tag);
      rc.ex = (nrt_comm_exchange){&fx, fx_set, fx_get};
      nrt_test_seed(0x1234567ull + (uint64_t)r);
      body(&rc);
      fflush(NULL);
      exit(nrt_test_failures ? 1 : 0);
    }
  }
  uint64_t start = (uint64_t)time(NULL);
  int left = world;
  while (left > 0) {
    int status;
    pid_t p = waitpid(-1, &status, WNOHANG);
    if (p == 0) {
      if ((uint64_t)time(NULL) - start > 60) {
        fprintf(stderr, "ranks hung: killing them\n");
        for (int r = 0; r < world; r++) kill(pids[r], SIGKILL);
        nrt_test_failures++;
      }
      nrt_test_sleep_ms(1);
      continue;
    }
    if (p < 0) break;
    left--;
    int r = 0;
    while (r < world && pids[r] != p) r++;
    if (r == killed) {
      CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "rank %d of %d failed (status 0x%x)\n", r, world, status);
      nrt_test_failures++;
    }
  }
  CHECK(shm_leftovers(tag) == 0);
  remove_dir(dir);
}
static void run_ranks(int world, rank_body body, void *arg) { run_ranks_ex(world, body, arg, -1); }

/* ---- inputs and the local reference ----------------------------------------------------- */
static const nrt_dtype all_dtypes[] = {NRT_FLOAT32, NRT_BFLOAT16, NRT_FLOAT16, NRT_FLOAT64,
                                       NRT_INT64,   NRT_INT32,    NRT_INT16,   NRT_INT8,
                                       NRT_UINT8,   NRT_BOOL,     NRT_COMPLEX32, NRT_COMPLEX64,
                                       NRT_COMPLEX128};
#define NDTYPES (int)(sizeof all_dtypes / sizeof all_dtypes[0])

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

/* Element i of rank `rank`'s input for case `seed`: a pure function, so any
 * rank can rebuild any other's input. Floats in [-2, 2) with a NaN now and
 * then for MIN/MAX; integers over their whole range (sums wrap). */
static void fill(void *buf, nrt_dtype dt, int64_t count, int rank, uint64_t seed, bool nans) {
  int64_t n = count;
  nrt_dtype et = dt;
  if (dt == NRT_COMPLEX32) { et = NRT_FLOAT16; n *= 2; }
  if (dt == NRT_COMPLEX64) { et = NRT_FLOAT32; n *= 2; }
  if (dt == NRT_COMPLEX128) { et = NRT_FLOAT64; n *= 2; }
  for (int64_t i = 0; i < n; i++) {
    uint64_t u = mix(seed * 1000003ull + (uint64_t)rank * 0x9E3779B97F4A7C15ull + (uint64_t)i);
    double v = ((double)(u >> 11) * 0x1p-53) * 4.0 - 2.0;
    if (nans && (u & 63) == 7) v = NAN;
    switch (et) {
      case NRT_FLOAT32: ((float *)buf)[i] = (float)v; break;
      case NRT_FLOAT64: ((double *)buf)[i] = v; break;
      case NRT_BFLOAT16: ((uint16_t *)buf)[i] = nrt_f32_to_bf16((float)v); break;
      case NRT_FLOAT16: ((uint16_t *)buf)[i] = nrt_f32_to_f16((float)v); break;
      case NRT_BOOL: ((uint8_t *)buf)[i] = (uint8_t)((u >> 7) & 1); break;
      case NRT_UINT8: case NRT_INT8: ((uint8_t *)buf)[i] = (uint8_t)(u >> 9); break;
      case NRT_INT16: ((uint16_t *)buf)[i] = (uint16_t)(u >> 9); break;
      case NRT_INT32: ((uint32_t *)buf)[i] = (uint32_t)(u >> 9); break;
      default: ((uint64_t *)buf)[i] = u; break;
    }
  }
}

static float load_f(nrt_dtype dt, const void *p, int64_t i) {
  if (dt == NRT_BFLOAT16) return nrt_bf16_to_f32(((const uint16_t *)p)[i]);
  if (dt == NRT_FLOAT16) return nrt_f16_to_f32(((const uint16_t *)p)[i]);
  return ((const float *)p)[i];
}
static void store_f(nrt_dtype dt, void *p, int64_t i, float v) {
  if (dt == NRT_BFLOAT16) ((uint16_t *)p)[i] = nrt_f32_to_bf16(v);
  else if (dt == NRT_FLOAT16) ((uint16_t *)p)[i] = nrt_f32_to_f16(v);
  else ((float *)p)[i] = v;
}
static float min_f(float a, float b) { return (a < b || a != a) ? a : b; }
static float max_f(float a, float b) { return (a > b || a != a) ? a : b; }
static double min_d(double a, double b) { return (a < b || a != a) ? a : b; }
static double max_d(double a, double b) { return (a > b || a != a) ? a : b; }

/* out = the documented fold of ins[0..n) (count elements each). */
static void reference(nrt_dtype dt, nrt_reduce_op op, double factor, const void *const *ins, int n,
                      int64_t count, void *out) {
  nrt_dtype et = dt;
  if (dt == NRT_COMPLEX32) { et = NRT_FLOAT16; count *= 2; }
  if (dt == NRT_COMPLEX64) { et = NRT_FLOAT32; count *= 2; }
  if (dt == NRT_COMPLEX128) { et = NRT_FLOAT64; count *= 2; }
  if (et == NRT_FLOAT32 || et == NRT_BFLOAT16 || et == NRT_FLOAT16) {
    float f = (float)factor;
    if (et == NRT_BFLOAT16) f = nrt_bf16_to_f32(nrt_f32_to_bf16(f));
    if (et == NRT_FLOAT16) f = nrt_f16_to_f32(nrt_f32_to_f16(f));
    for (int64_t i = 0; i < count; i++) {
      float a = load_f(et, ins[0], i);
      if (op == NRT_REDUCE_PREMUL_SUM) a = f * a;
      for (int p = 1; p < n; p++) {
        float x = load_f(et, ins[p], i);
        switch (op) {
          case NRT_REDUCE_PREMUL_SUM: a = a + f * x; break;
          case NRT_REDUCE_PRODUCT: a = a * x; break;
          case NRT_REDUCE_MIN: a = min_f(a, x); break;
          case NRT_REDUCE_MAX: a = max_f(a, x); break;
          default: a = a + x; break;
        }
      }
      if (op == NRT_REDUCE_AVG) a = a / (float)n;
      store_f(et, out, i, a);
    }
    return;
  }
  if (et == NRT_FLOAT64) {
    for (int64_t i = 0; i < count; i++) {
      double a = ((const double *)ins[0])[i];
      if (op == NRT_REDUCE_PREMUL_SUM) a = factor * a;
      for (int p = 1; p < n; p++) {
        double x = ((const double *)ins[p])[i];
        switch (op) {
          case NRT_REDUCE_PREMUL_SUM: a = a + factor * x; break;
          case NRT_REDUCE_PRODUCT: a = a * x; break;
          case NRT_REDUCE_MIN: a = min_d(a, x); break;
          case NRT_REDUCE_MAX: a = max_d(a, x); break;
          default: a = a + x; break;
        }
      }
      if (op == NRT_REDUCE_AVG) a = a / (double)n;
      ((double *)out)[i] = a;
    }
    return;
  }
  /* Integers and bool, element by element in the stored width. */
#define INT_REF(T, U)                                                               \
  for (int64_t i = 0; i < count; i++) {                                             \
    T a = ((const T *)ins[0])[i];                                                   \
    for (int p = 1; p < n; p++) {                                                   \
      T x = ((const T *)ins[p])[i];                                                 \
      switch (op) {                                                                 \
        case NRT_REDUCE_PRODUCT: a = (T)((U)a * (U)x); break;                       \
        case NRT_REDUCE_MIN: a = x < a ? x : a; break;                              \
        case NRT_REDUCE_MAX: a = x > a ? x : a; break;                              \
        case NRT_REDUCE_BAND: a = a & x; break;                                     \
        case NRT_REDUCE_BOR: a = a | x; break;                                      \
        case NRT_REDUCE_BXOR: a = a ^ x; break;                                     \
        default: a = (T)((U)a + (U)x); break;                                       \
      }                                                                             \
    }                                                                               \
    if (op == NRT_REDUCE_AVG) a = (T)(a / n);                                       \
    ((T *)out)[i] = a;                                                              \
  }
  switch (et) {
    case NRT_BOOL:
      for (int64_t i = 0; i < count; i++) {
        uint8_t a = ((const uint8_t *)ins[0])[i];
        for (int p = 1; p < n; p++) {
          uint8_t x = ((const uint8_t *)ins[p])[i];
          if (op == NRT_REDUCE_BXOR) a ^= x;
          else if (op == NRT_REDUCE_PRODUCT || op == NRT_REDUCE_MIN || op == NRT_REDUCE_BAND) a &= x;
          else a |= x;
        }
        ((uint8_t *)out)[i] = a;
      }
      break;
    case NRT_UINT8: INT_REF(uint8_t, unsigned) break;
    case NRT_INT8: INT_REF(int8_t, unsigned) break;
    case NRT_INT16: INT_REF(int16_t, unsigned) break;
    case NRT_INT32: INT_REF(int32_t, unsigned) break;
    default: INT_REF(int64_t, uint64_t) break;
  }
#undef INT_REF
}

/* Every rank's input of a case, rebuilt locally. */
static void **all_inputs(nrt_dtype dt, int64_t count, int world, uint64_t seed, bool nans) {
  void **ins = calloc((size_t)world, sizeof *ins);
  for (int p = 0; p < world; p++) {
    ins[p] = malloc((size_t)count * nrt_dtype_size(dt) + 1);
    fill(ins[p], dt, count, p, seed, nans);
  }
  return ins;
}
static void free_inputs(void **ins, int world) {
  for (int p = 0; p < world; p++) free(ins[p]);
  free(ins);
}

static bool same_bytes(const void *got, const void *want, size_t bytes, const char *what, nrt_dtype dt,
                       int64_t count, int rank) {
  if (bytes == 0 || memcmp(got, want, bytes) == 0) return true;
  size_t i = 0;
  while (((const uint8_t *)got)[i] == ((const uint8_t *)want)[i]) i++;
  fprintf(stderr, "rank %d: %s %s x %lld differs at byte %zu (element %zu)\n", rank, what,
          nrt_dtype_name(dt), (long long)count, i, i / nrt_dtype_size(dt));
  nrt_test_failures++;
  return false;
}

static const nrt_reduce_op all_ops[] = {NRT_REDUCE_SUM, NRT_REDUCE_AVG,  NRT_REDUCE_PRODUCT,
                                        NRT_REDUCE_MIN, NRT_REDUCE_MAX,  NRT_REDUCE_BAND,
                                        NRT_REDUCE_BOR, NRT_REDUCE_BXOR, NRT_REDUCE_PREMUL_SUM};
#define NOPS (int)(sizeof all_ops / sizeof all_ops[0])

/* Element counts: empty, one, odd, below and above the one-step limit,
 * several rounds (64 KiB slots). */
static const int64_t sizes[] = {0, 1, 7, 333, 1500, 40007};
#define NSIZES (int)(sizeof sizes / sizeof sizes[0])

/* The kernel paths a reduction may take: best ISA, AVX2, baseline, reference. */
static void set_path(int path) {
  nrt_kernels_set_reference(path == 3);
  nrt_kernels_limit_isa(path == 0 ? NRT_ISA_BEST : path == 1 ? NRT_ISA_AVX2 : NRT_ISA_BASELINE);
}

/* ---- all_reduce and reduce ----------------------------------------------------------- */
static void body_all_reduce(rank_ctx *rc) {
  nrt_comm *c = join(rc, TIMEOUT_MS);
  if (!c) return;
  uint64_t seed = 1;
  for (int d = 0; d < NDTYPES; d++) {
    nrt_dtype dt = all_dtypes[d];
    size_t es = nrt_dtype_size(dt);
    for (int o = 0; o < NOPS; o++) {
      nrt_reduce_op op = all_ops[o];
      if (!nrt_reduce_supported(op, dt)) {
        char x[16] = {0};
        CHECK_STATUS(nrt_comm_all_reduce(c, x, x, 1, dt, op, 1.0), NRT_ERROR_UNSUPPORTED);
        continue;
      }
      bool nans = op == NRT_REDUCE_MIN || op == NRT_REDUCE_MAX;
      for (int s = 0; s < NSIZES; s++) {
        int64_t count = sizes[s];
        /* Every kernel path on the mid size; the best path elsewhere. */
        int paths = count == 1500 ? 4 : 1;
        for (int path = 0; path < paths; path++, seed++) {
          set_path(path);
          void **ins = all_inputs(dt, count, rc->world, seed, nans);
          char *want = malloc(count * es + 1), *got = malloc(count * es + 1);
          reference(dt, op, 0.375, (const void *const *)ins, rc->world, count, want);
          bool in_place = (seed & 1) != 0;
          if (in_place) memcpy(got, ins[rc->rank], count * es);
          CHECK_OK(nrt_comm_all_reduce(c, in_place ? got : ins[rc->rank], got, count, dt, op, 0.375));
          same_bytes(got, want, count * es, nrt_reduce_op_name(op), dt, count, rc->rank);
          free(want);
          free(got);
          free_inputs(ins, rc->world);
        }
      }
    }
  }
  set_path(0);
  CHECK_OK(nrt_comm_destroy(c));
}

/* The eager all_reduce: mixed with the ordinary call across ranks and
 * iterations, left started by a late peer and finished by nrt_comm_finish
 * or by the next operation, and declined above the one-step size. */
static void body_all_reduce_eager(rank_ctx *rc) {
  if (rc->rank == 0) atomic_store(eager_returned, 0); /* before any rank can join */
  nrt_comm *c = join(rc, TIMEOUT_MS);
  if (!c) return;
  const nrt_dtype dts[] = {NRT_FLOAT32, NRT_BFLOAT16, NRT_INT64};
  const int64_t counts[] = {1, 2, 500}; /* at most 4000 bytes: all one-step */
  uint64_t seed = 900;
  int lates = 0;
  for (int it = 0; it < 60; it++, seed++) {
    nrt_dtype dt = dts[it % 3];
    int64_t count = counts[(it / 3) % 3];
    size_t es = nrt_dtype_size(dt);
    void **ins = all_inputs(dt, count, rc->world, seed, false);
    char *want = malloc(count * es), *got = malloc(count * es);
    reference(dt, NRT_REDUCE_SUM, 1.0, (const void *const *)ins, rc->world, count, want);
    /* Every fifth iteration the last rank arrives only after the others
     * (spinning 1 us) returned, left started; they finish with
     * nrt_comm_finish, or on odd iterations through the next operation (a
     * barrier). */
    bool late = it % 5 == 4;
    if (late) lates++;
    if (late && rc->rank == rc->world - 1) {
      uint64_t give_up = now_ns() + 10000000000ull;
      while (atomic_load(eager_returned) < lates * (rc->world - 1) && now_ns() < give_up) nrt_test_sleep_ms(1);
    }
    if ((it + rc->rank) % 2 == 0 || late) {
      nrt_comm_eager state;
      CHECK_OK(nrt_comm_all_reduce_eager(c, ins[rc->rank], got, count, dt, NRT_REDUCE_SUM, 1.0,
                                         late ? 1000 : 5000000, &state));
      if (late && rc->rank != rc->world - 1) {
        CHECK(state == NRT_COMM_EAGER_STARTED);
        atomic_fetch_add(eager_returned, 1);
      }
      if (!late) CHECK(state == NRT_COMM_EAGER_DONE || state == NRT_COMM_EAGER_STARTED);
      /* Every rank makes the follow-up call: a barrier is collective, and
       * nrt_comm_finish with nothing pending is a no-op. */
      if (late || state == NRT_COMM_EAGER_STARTED)
        CHECK_OK(late && it % 2 ? nrt_comm_barrier(c) : nrt_comm_finish(c));
      CHECK(state != NRT_COMM_EAGER_DECLINED);
    } else {
      CHECK_OK(nrt_comm_all_reduce(c, ins[rc->rank], got, count, dt, NRT_REDUCE_SUM, 1.0));
    }
    same_bytes(got, want, count * es, "eager sum", dt, count, rc->rank);
    free(want);
    free(got);
    free_inputs(ins, rc->world);
  }
  /* Above small_bytes (4 KiB here): declined, nothing exchanged. */
  {
    int64_t count = 2048;
    void **ins = all_inputs(NRT_FLOAT32, count, rc->world, 77, false);
    float *want = malloc(count * 4), *got = malloc(count * 4);
    reference(NRT_FLOAT32, NRT_REDUCE_MAX, 1.0, (const void *const *)ins, rc->world, count, want);
    nrt_comm_eager state = NRT_COMM_EAGER_DONE;
    CHECK_OK(nrt_comm_all_reduce_eager(c, ins[rc->rank], got, count, NRT_FLOAT32, NRT_REDUCE_MAX, 1.0, 1000,
                                       &state));
    CHECK(state == NRT_COMM_EAGER_DECLINED);
    CHECK_OK(nrt_comm_all_reduce(c, ins[rc->rank], got, count, NRT_FLOAT32, NRT_REDUCE_MAX, 1.0));
    same_bytes(got, want, count * 4, "declined max", NRT_FLOAT32, count, rc->rank);
    free(want);
    free(got);
    free_inputs(ins, rc->world);
  }
  /* Argument errors come back as from the ordinary call, the state declined. */
  nrt_comm_eager state = NRT_COMM_EAGER_DONE;
  float x[2] = {0};
  CHECK_STATUS(nrt_comm_all_reduce_eager(c, x, x, 2, NRT_FLOAT32, NRT_REDUCE_BAND, 1.0, 1000, &state),
               NRT_ERROR_UNSUPPORTED);
  CHECK(state == NRT_COMM_EAGER_DECLINED);
  CHECK_OK(nrt_comm_finish(c)); /* nothing pending: a no-op */
  CHECK_OK(nrt_comm_destroy(c));
}

static void body_reduce(rank_ctx *rc) {
  nrt_comm *c = join(rc, TIMEOUT_MS);
  if (!c) return;
  static const nrt_dtype dts[] = {NRT_FLOAT32, NRT_BFLOAT16, NRT_INT32, NRT_COMPLEX64};
  uint64_t seed = 100;
  for (int d = 0; d < 4; d++) {
    nrt_dtype dt = dts[d];
    size_t es = nrt_dtype_size(dt);
    for (int s = 0; s < NSIZES; s++, seed++) {
      int64_t count = sizes[s];
      int root = (int)(seed % (uint64_t)rc->world);
      nrt_reduce_op op = dt == NRT_COMPLEX64 ? NRT_REDUCE_AVG : NRT_REDUCE_SUM;
      void **ins = all_inputs(dt, count, rc->world, seed, false);
      char *want = malloc(count * es + 1), *got = malloc(count * es + 1);
      reference(dt, op, 1.0, (const void *const *)ins, rc->world, count, want);
      memset(got, 0x5a, count * es);
      CHECK_OK(nrt_comm_reduce(c, ins[rc->rank], got, count, dt, op, 1.0, root));
      if (rc->rank == root) same_bytes(got, want, count * es, "reduce", dt, count, rc->rank);
      free(want);
      free(got);
      free_inputs(ins, rc->world);
    }
  }
  CHECK_OK(nrt_comm_destroy(c));
}

/* ---- data movement ----------------------------------------------------------------------- */
static const nrt_dtype move_dtypes[] = {NRT_FLOAT32, NRT_BFLOAT16, NRT_INT8, NRT_COMPLEX128};

static void body_broadcast(rank_ctx *rc) {
  nrt_comm *c = join(rc, TIMEOUT_MS);
  if (!c) return;
  uint64_t seed = 200;
  for (int d = 0; d < 4; d++) {
    nrt_dtype dt = move_dtypes[d];
    size_t es = nrt_dtype_size(dt);
    for (int s = 0; s < NSIZES; s++, seed++) {
      int64_t count = sizes[s];
      int root = (int)(seed % (uint64_t)rc->world);
      char *want = malloc(count * es + 1), *buf = malloc(count * es + 1);
      fill(want, dt, count, root, seed, false);
      if (rc->rank == root) memcpy(buf, want, count * es);
      else memset(buf, 0, count * es);
      CHECK_OK(nrt_comm_broadcast(c, buf, count, dt, root));
      same_bytes(buf, want, count * es, "broadcast", dt, count, rc->rank);
      free(want);
      free(buf);
    }
  }
  CHECK_OK(nrt_comm_destroy(c));
}

static void body_all_gather(rank_ctx *rc) {
  nrt_comm *c = join(rc, TIMEOUT_MS);
  if (!c) return;
  const int n = rc->world, r = rc->rank;
  uint64_t seed = 300;
  for (int d = 0; d < 4; d++) {
    nrt_dtype dt = move_dtypes[d];
    size_t es = nrt_dtype_size(dt);
    for (int s = 0; s < NSIZES; s++, seed++) {
      int64_t count = sizes[s];
      void **ins = all_inputs(dt, count, n, seed, false);
      char *want = malloc(n * count * es + 1), *got = malloc(n * count * es + 1);
      for (int p = 0; p < n; p++) memcpy(want + p * count * es, ins[p], count * es);
      bool in_place = seed & 1;
      if (in_place) memcpy(got + r * count * es, ins[r], count * es);
      CHECK_OK(nrt_comm_all_gather(c, in_place ? got + r * count * es : ins[r], got, count, dt));
      same_bytes(got, want, n * count * es, "all_gather", dt, count, r);

      /* Uneven: rank p sends (count * (p + 1)) / n elements, rank 0 often none. */
      int64_t counts[8];
      void *bufs[8];
      for (int p = 0; p < n; p++) {
        counts[p] = count * (p + 1) / n - (p == 0 ? count / n : 0);
        bufs[p] = malloc(counts[p] * es + 1);
      }
      CHECK_OK(nrt_comm_all_gatherv(c, ins[r], counts[r], bufs, counts, dt));
      for (int p = 0; p < n; p++) {
        same_bytes(bufs[p], ins[p], counts[p] * es, "all_gatherv", dt, counts[p], r);
        free(bufs[p]);
      }
      free(want);
      free(got);
      free_inputs(ins, n);
    }
  }
  /* A send count that disagrees with recv_counts is refused before any exchange. */
  int64_t counts[8] = {0};
  void *bufs[8] = {0};
  char x[4];
  CHECK_STATUS(nrt_comm_all_gatherv(c, x, 1, bufs, counts, NRT_INT8), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_OK(nrt_comm_destroy(c));
}

static void body_reduce_scatter(rank_ctx *rc) {
  nrt_comm *c = join(rc, TIMEOUT_MS);
  if (!c) return;
  const int n = rc->world, r = rc->rank;
  static const nrt_dtype dts[] = {NRT_FLOAT32, NRT_BFLOAT16, NRT_FLOAT16, NRT_INT64, NRT_BOOL};
  static const nrt_reduce_op ops[] = {NRT_REDUCE_SUM, NRT_REDUCE_PREMUL_SUM, NRT_REDUCE_MAX,
                                      NRT_REDUCE_BXOR, NRT_REDUCE_MIN};
  uint64_t seed = 400;
  for (int d = 0; d < 5; d++) {
    nrt_dtype dt = dts[d];
    nrt_reduce_op op = ops[d];
    size_t es = nrt_dtype_size(dt);
    for (int s = 0; s < NSIZES; s++, seed++) {
      int64_t count = sizes[s];
      /* Equal blocks: the inputs are n * count long. */
      void **ins = all_inputs(dt, n * count, n, seed, false);
      char *want = malloc(n * count * es + 1), *got = malloc(count * es + 1);
      reference(dt, op, 0.5, (const void *const *)ins, n, n * count, want);
      bool in_place = seed & 1;
      char *recv = in_place ? (char *)ins[r] + r * count * es : got;
      CHECK_OK(nrt_comm_reduce_scatter(c, ins[r], recv, count, dt, op, 0.5));
      same_bytes(recv, want + r * count * es, count * es, "reduce_scatter", dt, count, r);
      free_inputs(ins, n);

      /* Uneven blocks: block p has count * p / n + p elements (block 0 of a
       * small count is empty), packed one after the other. */
      int64_t counts[8], offs[8], total = 0;
      for (int p = 0; p < n; p++) {
        counts[p] = count * p / n + (count ? p : 0);
        offs[p] = total;
        total += counts[p];
      }
      ins = all_inputs(dt, total, n, seed + 7777, false);
      char *wantv = malloc(total * es + 1), *gotv = malloc(counts[r] * es + 1);
      reference(dt, op, 0.5, (const void *const *)ins, n, total, wantv);
      const void *blocks[8];
      for (int p = 0; p < n; p++) blocks[p] = (char *)ins[r] + offs[p] * es;
      CHECK_OK(nrt_comm_reduce_scatterv(c, blocks, gotv, counts, dt, op, 0.5));
      same_bytes(gotv, wantv + offs[r] * es, counts[r] * es, "reduce_scatterv", dt, counts[r], r);
      free(wantv);
      free(gotv);
      free_inputs(ins, n);
      free(want);
      free(got);
    }
  }
  CHECK_OK(nrt_comm_destroy(c));
}

/* Elements rank p sends to rank q in case k: uneven, some zero, some
 * several rounds long (a pair's part of a 64 KiB slot is 16 KiB at 4 ranks). */
static int64_t a2a_count(int p, int q, int k) {
  static const int64_t choices[] = {0, 1, 5, 300, 2000, 9000};
  return choices[(p * 7 + q * 3 + k) % 6];
}

static void body_all_to_all(rank_ctx *rc) {
  nrt_comm *c = join(rc, TIMEOUT_MS);
  if (!c) return;
  const int n = rc->world, r = rc->rank;
  for (int k = 0; k < 6; k++) {
    nrt_dtype dt = move_dtypes[k % 4];
    size_t es = nrt_dtype_size(dt);
    int64_t scounts[8], rcounts[8];
    void *sbufs[8], *rbufs[8];
    for (int p = 0; p < n; p++) {
      scounts[p] = a2a_count(r, p, k);
      rcounts[p] = a2a_count(p, r, k);
      sbufs[p] = malloc(scounts[p] * es + 1);
      fill(sbufs[p], dt, scounts[p], r * 16 + p, (uint64_t)k, false);
      rbufs[p] = malloc(rcounts[p] * es + 1);
    }
    CHECK_OK(nrt_comm_all_to_all(c, (const void *const *)sbufs, scounts, rbufs, rcounts, dt));
    for (int p = 0; p < n; p++) {
      char *want = malloc(rcounts[p] * es + 1);
      fill(want, dt, rcounts[p], p * 16 + r, (uint64_t)k, false);
      same_bytes(rbufs[p], want, rcounts[p] * es, "all_to_all", dt, rcounts[p], r);
      free(want);
      free(sbufs[p]);
      free(rbufs[p]);
    }
  }
  CHECK_OK(nrt_comm_destroy(c));
}

/* A receiver whose recv_counts disagree with what its sender sends fails
 * with an argument error; the others learn it failed. */
static void body_all_to_all_mismatch(rank_ctx *rc) {
  nrt_comm *c = join(rc, TIMEOUT_MS);
  if (!c) return;
  int64_t sc[8], rcnt[8];
  void *bufs[8];
  static char space[8][64];
  for (int p = 0; p < rc->world; p++) {
    sc[p] = rcnt[p] = 4;
    bufs[p] = space[p];
  }
  if (rc->rank == 0) rcnt[1] = 3;
  uint64_t t0 = now_ns();
  nrt_status st = nrt_comm_all_to_all(c, (const void *const *)bufs, sc, bufs, rcnt, NRT_INT32);
  if (rc->rank == 0) {
    CHECK(st == NRT_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(nrt_last_error_message(), "rank 1 sends 4 elements") != NULL);
  } else {
    CHECK(st == NRT_ERROR_PEER_FAILED || st == NRT_SUCCESS);
    if (st == NRT_SUCCESS) st = nrt_comm_barrier(c);
    CHECK(st == NRT_ERROR_PEER_FAILED);
    CHECK(strstr(nrt_last_error_message(), "rank 0 failed") != NULL);
  }
  CHECK(now_ns() - t0 < 2000000000ull);
  CHECK_OK(nrt_comm_destroy(c));
}

static void body_gather_scatter(rank_ctx *rc) {
  nrt_comm *c = join(rc, TIMEOUT_MS);
  if (!c) return;
  const int n = rc->world, r = rc->rank;
  uint64_t seed = 500;
  for (int d = 0; d < 4; d++) {
    nrt_dtype dt = move_dtypes[d];
    size_t es = nrt_dtype_size(dt);
    for (int s = 0; s < NSIZES; s++, seed++) {
      int64_t count = sizes[s];
      int root = (int)(seed % (uint64_t)n);
      void **ins = all_inputs(dt, count, n, seed, false);
      char *all = malloc(n * count * es + 1);
      memset(all, 0, n * count * es);
      CHECK_OK(nrt_comm_gather(c, ins[r], r == root ? all : NULL, count, dt, root));
      if (r == root)
        for (int p = 0; p < n; p++) same_bytes(all + p * count * es, ins[p], count * es, "gather", dt, count, r);
      /* scatter sends back piece p of the root's buffer: rank p's input. */
      for (int p = 0; p < n; p++) memcpy(all + p * count * es, ins[p], count * es);
      char *got = malloc(count * es + 1);
      CHECK_OK(nrt_comm_scatter(c, r == root ? all : NULL, got, count, dt, root));
      same_bytes(got, ins[r], count * es, "scatter", dt, count, r);
      free(got);
      free(all);
      free_inputs(ins, n);
    }
  }
  CHECK_OK(nrt_comm_destroy(c));
}

/* No rank leaves the barrier before the last one entered it. */
static void body_barrier(rank_ctx *rc) {
  nrt_comm *c = join(rc, TIMEOUT_MS);
  if (!c) return;
  for (int i = 0; i < 50; i++) CHECK_OK(nrt_comm_barrier(c));
  CHECK_OK(nrt_comm_barrier(c));
  if (rc->rank == rc->world - 1) {
    nrt_test_sleep_ms(60);
    *last_entry_ns = now_ns();
  }
  CHECK_OK(nrt_comm_barrier(c));
  CHECK(now_ns() >= *last_entry_ns);
  CHECK_OK(nrt_comm_destroy(c));
}

/* ---- send / recv ------------------------------------------------------------------------- */
static void body_send_recv(rank_ctx *rc) {
  nrt_comm *c = join(rc, TIMEOUT_MS);
  if (!c) return;
  const int n = rc->world, r = rc->rank, next = (r + 1) % n, prev = (r + n - 1) % n;
  /* A ring: to the next rank, tags 1 (large: 3.x mailboxes), 2 (empty) and
   * 3 (small); received out of tag order. */
  const int64_t big = 3 * (4 << 10) / 4 + 123;
  int32_t *b1 = malloc(big * 4), *r1 = malloc(big * 4);
  fill(b1, NRT_INT32, big, r, 900, false);
  int32_t small[5], rsmall[5];
  fill(small, NRT_INT32, 5, r, 901, false);
  CHECK_OK(nrt_comm_send(c, b1, big, NRT_INT32, next, 1));
  CHECK_OK(nrt_comm_send(c, NULL, 0, NRT_INT32, next, 2));
  CHECK_OK(nrt_comm_send(c, small, 5, NRT_INT32, next, 3));
  CHECK_OK(nrt_comm_recv(c, rsmall, 5, NRT_INT32, prev, 3));
  CHECK_OK(nrt_comm_recv(c, NULL, 0, NRT_INT32, prev, 2));
  CHECK_OK(nrt_comm_recv(c, r1, big, NRT_INT32, prev, 1));
  int32_t want_small[5], *want1 = malloc(big * 4);
  fill(want_small, NRT_INT32, 5, prev, 901, false);
  fill(want1, NRT_INT32, big, prev, 900, false);
  same_bytes(rsmall, want_small, sizeof rsmall, "recv small", NRT_INT32, 5, r);
  same_bytes(r1, want1, big * 4, "recv big", NRT_INT32, big, r);

  /* Same tag twice: in order. Then both directions at once with messages
   * larger than the mailbox, sends first (a blocked send drains what the
   * peer sends meanwhile). */
  if (n == 2 || r < 2) {
    int other = 1 - r;
    const int64_t huge = 20000;
    double *h = malloc(huge * 8), *g = malloc(huge * 8), *w = malloc(huge * 8);
    for (int k = 0; k < 2; k++) {
      fill(h, NRT_FLOAT64, huge, r, 910 + (uint64_t)k, false);
      CHECK_OK(nrt_comm_send(c, h, huge, NRT_FLOAT64, other, 7));
    }
    for (int k = 0; k < 2; k++) {
      CHECK_OK(nrt_comm_recv(c, g, huge, NRT_FLOAT64, other, 7));
      fill(w, NRT_FLOAT64, huge, other, 910 + (uint64_t)k, false);
      same_bytes(g, w, huge * 8, "recv exchange", NRT_FLOAT64, huge, r);
    }
    /* A size mismatch is an error for the receiver and consumes the message. */
    if (r == 0) CHECK_OK(nrt_comm_send(c, h, 3, NRT_FLOAT64, other, 8));
    else CHECK_STATUS(nrt_comm_recv(c, g, 4, NRT_FLOAT64, other, 8), NRT_ERROR_INVALID_ARGUMENT);
    free(h);
    free(g);
    free(w);
  }
  CHECK_STATUS(nrt_comm_send(c, small, 1, NRT_INT32, r, 0), NRT_ERROR_INVALID_ARGUMENT);
  /* Collectives and point-to-point share the communicator. */
  CHECK_OK(nrt_comm_barrier(c));
  free(b1);
  free(r1);
  free(want1);
  CHECK_OK(nrt_comm_destroy(c));
}

/* ---- faults -------------------------------------------------------------------------------- */
/* The last rank never joins: the others time out, naming it, in about the
 * timeout. */
static void body_never_joins(rank_ctx *rc) {
  if (rc->rank == rc->world - 1) return;
  nrt_comm *c = NULL;
  uint64_t t0 = now_ns();
  CHECK_STATUS(nrt_comm_create(rc->rank, rc->world, rc->name, &rc->ex, 300, &test_options, &c),
               NRT_ERROR_TIMEOUT);
  uint64_t ms = (now_ns() - t0) / 1000000ull;
  CHECK(ms >= 250 && ms < 1500);
  char want[64];
  snprintf(want, sizeof want, "rank %d did not join", rc->world - 1);
  CHECK(strstr(nrt_last_error_message(), want) != NULL);
  CHECK(strstr(nrt_last_error_message(), "nrt_comm_create") != NULL);
  CHECK(c == NULL);
}

/* The last rank joins but skips an all_reduce: the others time out naming
 * it and the operation; the communicator then refuses further work. */
static void body_skips_op(rank_ctx *rc) {
  nrt_comm *c = join(rc, TIMEOUT_MS);
  if (!c) return;
  CHECK_OK(nrt_comm_set_timeout(c, 300));
  float x[4] = {1, 2, 3, 4};
  CHECK_OK(nrt_comm_all_reduce(c, x, x, 4, NRT_FLOAT32, NRT_REDUCE_SUM, 1.0));
  if (rc->rank == rc->world - 1) {
    nrt_test_sleep_ms(700);
  } else {
    uint64_t t0 = now_ns();
    CHECK_STATUS(nrt_comm_all_reduce(c, x, x, 4, NRT_FLOAT32, NRT_REDUCE_SUM, 1.0), NRT_ERROR_TIMEOUT);
    uint64_t ms = (now_ns() - t0) / 1000000ull;
    CHECK(ms >= 250 && ms < 1500);
    char want[64];
    snprintf(want, sizeof want, "waiting for rank %d", rc->world - 1);
    CHECK(strstr(nrt_last_error_message(), want) != NULL);
    CHECK(strstr(nrt_last_error_message(), "nrt_comm_all_reduce") != NULL);
    CHECK(strstr(nrt_last_error_message(), rc->name) != NULL);
    CHECK_STATUS(nrt_comm_barrier(c), NRT_ERROR_PEER_FAILED);
    CHECK(strstr(nrt_last_error_message(), "broken") != NULL);
  }
  CHECK_OK(nrt_comm_destroy(c));
}

static void *kill_me_soon(void *arg) {
  nrt_test_sleep_ms(*(int *)arg);
  kill(getpid(), SIGKILL);
  return NULL;
}

/* Rank 1 is killed while every rank loops over all_reduces and sends: the
 * others fail with an error naming it, long before the (5 s) timeout. */
static void body_killed(rank_ctx *rc) {
  nrt_comm *c = join(rc, TIMEOUT_MS);
  if (!c) return;
  const int64_t count = 100000;
  float *buf = calloc(count, sizeof(float));
  if (rc->rank == 1) {
    static int delay = 80;
    pthread_t t;
    pthread_create(&t, NULL, kill_me_soon, &delay);
  }
  uint64_t t0 = now_ns();
  nrt_status st = NRT_SUCCESS;
  for (int i = 0; i < 100000 && st == NRT_SUCCESS; i++)
    st = nrt_comm_all_reduce(c, buf, buf, count, NRT_FLOAT32, NRT_REDUCE_SUM, 1.0);
  CHECK(st == NRT_ERROR_PEER_FAILED);
  CHECK(now_ns() - t0 < 2000000000ull);
  CHECK(strstr(nrt_last_error_message(), "rank 1") != NULL);
  free(buf);
  CHECK_OK(nrt_comm_destroy(c));
}

/* A rank that destroys its communicator (or aborts it) makes waits on it
 * fail at once; one that is blocked in recv learns the peer left. */
static void body_leaves(rank_ctx *rc) {
  nrt_comm *c = join(rc, TIMEOUT_MS);
  if (!c) return;
  if (rc->rank == 0) {
    nrt_comm_abort(c);
    CHECK_STATUS(nrt_comm_barrier(c), NRT_ERROR_PEER_FAILED);
  } else if (rc->rank == 1) {
    nrt_test_sleep_ms(50);
    CHECK_OK(nrt_comm_destroy(c));
    return;
  } else {
    uint64_t t0 = now_ns();
    int x = 0;
    CHECK_STATUS(nrt_comm_recv(c, &x, 1, NRT_INT32, 1, 0), NRT_ERROR_PEER_FAILED);
    CHECK(strstr(nrt_last_error_message(), "rank 1 left") != NULL);
    CHECK(now_ns() - t0 < 1000000000ull);
  }
  CHECK_OK(nrt_comm_destroy(c));
}

/* ---- on a stream, as the glue runs them ------------------------------------------------ */
typedef struct stream_op {
  nrt_comm *comm;
  float *buf;
  int64_t count;
} stream_op;

static nrt_status run_all_reduce(void *arg) {
  stream_op *op = arg;
  return nrt_comm_all_reduce(op->comm, op->buf, op->buf, op->count, NRT_FLOAT32, NRT_REDUCE_SUM, 1.0);
}

/* The glue's pattern: a collective as a task on a communication stream.
 * Its result is there after the stream synchronises; a failure (here the
 * last rank skips the second one) is the stream's sticky error, with the
 * collective's message. */
static void body_on_stream(rank_ctx *rc) {
  nrt_comm *c = join(rc, TIMEOUT_MS);
  if (!c) return;
  nrt_stream *s = NULL;
  CHECK_OK(nrt_stream_acquire(0, &s));
  float buf[64];
  for (int i = 0; i < 64; i++) buf[i] = (float)(rc->rank + i);
  stream_op op = {c, buf, 64};
  CHECK_OK(nrt_stream_enqueue(s, "all_reduce", run_all_reduce, &op, NULL));
  CHECK_OK(nrt_stream_synchronize(s));
  int n = rc->world;
  for (int i = 0; i < 64; i++) CHECK(buf[i] == (float)(n * (n - 1) / 2 + n * i));
  CHECK_OK(nrt_comm_set_timeout(c, 200));
  if (rc->rank != n - 1) {
    CHECK_OK(nrt_stream_enqueue(s, "all_reduce", run_all_reduce, &op, NULL));
    CHECK_STATUS(nrt_stream_synchronize(s), NRT_ERROR_TIMEOUT);
    CHECK(strstr(nrt_last_error_message(), "nrt_comm_all_reduce") != NULL);
  } else {
    nrt_test_sleep_ms(400);
  }
  CHECK_OK(nrt_comm_destroy(c));
}

/* ---- one rank and bad arguments (in process) ------------------------------------------- */
static void test_single_rank(void) {
  nrt_comm *c = NULL;
  char name[64];
  snprintf(name, sizeof name, "ct%d_single", (int)getpid());
  CHECK_OK(nrt_comm_create(0, 1, name, NULL, 1000, NULL, &c));
  if (!c) return;
  CHECK(nrt_comm_rank(c) == 0 && nrt_comm_size(c) == 1 && strcmp(nrt_comm_name(c), name) == 0);
  float x[3] = {1, 2, 3}, y[3];
  CHECK_OK(nrt_comm_all_reduce(c, x, y, 3, NRT_FLOAT32, NRT_REDUCE_PREMUL_SUM, 2.0));
  CHECK(y[0] == 2 && y[1] == 4 && y[2] == 6);
  CHECK_OK(nrt_comm_all_reduce(c, x, y, 3, NRT_FLOAT32, NRT_REDUCE_AVG, 1.0));
  CHECK(y[2] == 3);
  CHECK_OK(nrt_comm_barrier(c));
  CHECK_STATUS(nrt_comm_all_reduce(c, x, y, -1, NRT_FLOAT32, NRT_REDUCE_SUM, 1.0), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_comm_all_reduce(c, NULL, y, 3, NRT_FLOAT32, NRT_REDUCE_SUM, 1.0), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_comm_all_reduce(c, x, y, 3, NRT_FLOAT32, NRT_REDUCE_BAND, 1.0), NRT_ERROR_UNSUPPORTED);
  CHECK(strstr(nrt_last_error_message(), "band does not take dtype float32") != NULL);
  CHECK_STATUS(nrt_comm_broadcast(c, x, 3, NRT_FLOAT32, 1), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_comm_send(c, x, 3, NRT_FLOAT32, 0, 0), NRT_ERROR_INVALID_ARGUMENT);
  /* Argument errors leave it usable. */
  CHECK_OK(nrt_comm_broadcast(c, x, 3, NRT_FLOAT32, 0));
  CHECK_OK(nrt_comm_destroy(c));
  CHECK_OK(nrt_comm_destroy(NULL));
  CHECK(shm_leftovers(name) == 0);

  CHECK_STATUS(nrt_comm_create(0, 2, name, NULL, 1000, NULL, &c), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_comm_create(2, 2, name, NULL, 1000, NULL, &c), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_comm_create(0, 1, name, NULL, 0, NULL, &c), NRT_ERROR_INVALID_ARGUMENT);
  nrt_comm_options tiny = {1024, 0, 0};
  CHECK_STATUS(nrt_comm_create(0, 1, name, NULL, 1000, &tiny, &c), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strcmp(nrt_reduce_op_name(NRT_REDUCE_PREMUL_SUM), "premul_sum") == 0);
  CHECK(strcmp(nrt_reduce_op_name(NRT_REDUCE_OP_COUNT), "invalid") == 0);
  CHECK(!nrt_reduce_supported(NRT_REDUCE_PRODUCT, NRT_COMPLEX64));
  CHECK(nrt_reduce_supported(NRT_REDUCE_BXOR, NRT_BOOL));
  CHECK(!nrt_reduce_supported(NRT_REDUCE_AVG, NRT_BOOL));
  CHECK(strcmp(nrt_status_name(NRT_ERROR_TIMEOUT), "NRT_ERROR_TIMEOUT") == 0);
}

/* ---- across machines (nrt_hcomm) -------------------------------------------------------
 * Machines simulated by layouts of forked ranks: each machine's ranks share a
 * communicator, and the leaders' bridge is another communicator among them,
 * which checks that it is only handed what nrt_comm_bridge promises. The
 * expected result is the documented hierarchical fold: each machine's ranks
 * in rank order, then the machines' partials in machine order. */
typedef struct machine_layout {
  int world;
  int machine_of[8];
} machine_layout;

static int layout_machines(const machine_layout *l) {
  int m = 0;
  for (int p = 0; p < l->world; p++)
    if (l->machine_of[p] + 1 > m) m = l->machine_of[p] + 1;
  return m;
}

static bool bridge_takes(nrt_dtype dt, nrt_reduce_op op) {
  bool dtype_ok = dt == NRT_FLOAT16 || dt == NRT_BFLOAT16 || dt == NRT_FLOAT32 || dt == NRT_FLOAT64 ||
                  dt == NRT_UINT8 || dt == NRT_INT8 || dt == NRT_INT32 || dt == NRT_INT64;
  bool bitwise = op == NRT_REDUCE_BAND || op == NRT_REDUCE_BOR || op == NRT_REDUCE_BXOR;
  bool op_ok = op == NRT_REDUCE_SUM || op == NRT_REDUCE_PRODUCT || op == NRT_REDUCE_MIN ||
               op == NRT_REDUCE_MAX || (bitwise && !nrt_dtype_is_floating(dt));
  return dtype_ok && op_ok;
}

/* The test bridge: a communicator among the leaders; `fail_next` makes the
 * next call fail as a broken network would. */
typedef struct test_bridge {
  nrt_comm *comm;
  bool fail_next;
  int calls;
} test_bridge;

static nrt_status tb_fail(test_bridge *b) {
  b->fail_next = false;
  nrt_set_error_message("test bridge: connection reset");
  return NRT_ERROR_PEER_FAILED;
}
static nrt_status tb_all_reduce(void *ctx, void *buf, int64_t count, nrt_dtype dt, nrt_reduce_op op,
                                int64_t timeout_ms) {
  test_bridge *b = ctx;
  b->calls++;
  if (b->fail_next) return tb_fail(b);
  CHECK(bridge_takes(dt, op));
  CHECK(timeout_ms > 0);
  return nrt_comm_all_reduce(b->comm, buf, buf, count, dt, op, 1.0);
}
static nrt_status tb_broadcast(void *ctx, void *buf, int64_t bytes, int root, int64_t timeout_ms) {
  test_bridge *b = ctx;
  b->calls++;
  if (b->fail_next) return tb_fail(b);
  return nrt_comm_broadcast(b->comm, buf, bytes, NRT_UINT8, root);
}
static nrt_status tb_all_gather(void *ctx, const void *send, void *recv, int64_t bytes, int64_t timeout_ms) {
  test_bridge *b = ctx;
  b->calls++;
  if (b->fail_next) return tb_fail(b);
  return nrt_comm_all_gather(b->comm, send, recv, bytes, NRT_UINT8);
}
static nrt_status tb_barrier(void *ctx, int64_t timeout_ms) {
  test_bridge *b = ctx;
  b->calls++;
  if (b->fail_next) return tb_fail(b);
  return nrt_comm_barrier(b->comm);
}

typedef struct hier_rank {
  nrt_comm *local;
  test_bridge bridge;
  nrt_hcomm *h;
  int machine, machines, local_rank, local_size;
} hier_rank;

static bool hier_join(rank_ctx *rc, const machine_layout *l, hier_rank *hr) {
  memset(hr, 0, sizeof *hr);
  hr->machine = l->machine_of[rc->rank];
  hr->machines = layout_machines(l);
  for (int p = 0; p < l->world; p++)
    if (l->machine_of[p] == hr->machine) {
      if (p < rc->rank) hr->local_rank++;
      hr->local_size++;
    }
  char name[96];
  snprintf(name, sizeof name, "%sm%d", rc->name, hr->machine);
  CHECK_OK(nrt_comm_create(hr->local_rank, hr->local_size, name, &rc->ex, TIMEOUT_MS, &test_options, &hr->local));
  if (!hr->local) return false;
  nrt_comm_bridge bridge = {&hr->bridge, tb_all_reduce, tb_broadcast, tb_all_gather, tb_barrier};
  if (hr->local_rank == 0 && hr->machines > 1) {
    snprintf(name, sizeof name, "%sb", rc->name);
    CHECK_OK(nrt_comm_create(hr->machine, hr->machines, name, &rc->ex, TIMEOUT_MS, &test_options,
                             &hr->bridge.comm));
    if (!hr->bridge.comm) return false;
  }
  CHECK_OK(nrt_hcomm_create(rc->rank, rc->world, l->machine_of, hr->local,
                            hr->local_rank == 0 ? &bridge : NULL, TIMEOUT_MS, &hr->h));
  if (hr->h) CHECK(nrt_hcomm_machines(hr->h) == hr->machines);
  return hr->h != NULL;
}

static void hier_leave(hier_rank *hr) {
  CHECK_OK(nrt_hcomm_destroy(hr->h));
  CHECK_OK(nrt_comm_destroy(hr->local));
  CHECK_OK(nrt_comm_destroy(hr->bridge.comm));
}

/* out = the hierarchical fold of every rank's input (count elements each). */
static void hier_reference(const machine_layout *l, nrt_dtype dt, nrt_reduce_op op, double factor,
                           void *const *ins, int64_t count, void *out) {
  const int machines = layout_machines(l);
  const size_t bytes = (size_t)count * nrt_dtype_size(dt) + 1;
  void *partials[8] = {0};
  const void *mine[8] = {0};
  nrt_reduce_op within = op == NRT_REDUCE_AVG ? NRT_REDUCE_SUM : op;
  nrt_reduce_op across = op == NRT_REDUCE_AVG || op == NRT_REDUCE_PREMUL_SUM ? NRT_REDUCE_SUM : op;
  for (int m = 0; m < machines; m++) {
    int k = 0;
    for (int p = 0; p < l->world; p++)
      if (l->machine_of[p] == m) mine[k++] = ins[p];
    partials[m] = malloc(bytes);
    reference(dt, within, factor, mine, k, count, partials[m]);
  }
  reference(dt, across, 1.0, (const void *const *)partials, machines, count, out);
  for (int m = 0; m < machines; m++) free(partials[m]);
  if (op != NRT_REDUCE_AVG) return;
  /* AVG: the sum divided by the world size, in the fold's domain. */
  int64_t n = count;
  nrt_dtype et = dt;
  if (dt == NRT_COMPLEX32) { et = NRT_FLOAT16; n *= 2; }
  if (dt == NRT_COMPLEX64) { et = NRT_FLOAT32; n *= 2; }
  if (dt == NRT_COMPLEX128) { et = NRT_FLOAT64; n *= 2; }
  for (int64_t i = 0; i < n; i++) {
    switch (et) {
      case NRT_FLOAT32: case NRT_FLOAT16: case NRT_BFLOAT16:
        store_f(et, out, i, load_f(et, out, i) / (float)l->world);
        break;
      case NRT_FLOAT64: ((double *)out)[i] /= (double)l->world; break;
      case NRT_INT64: ((int64_t *)out)[i] /= l->world; break;
      case NRT_INT32: ((int32_t *)out)[i] /= l->world; break;
      case NRT_INT16: ((int16_t *)out)[i] = (int16_t)(((int16_t *)out)[i] / l->world); break;
      case NRT_INT8: ((int8_t *)out)[i] = (int8_t)(((int8_t *)out)[i] / l->world); break;
      case NRT_UINT8: ((uint8_t *)out)[i] = (uint8_t)(((uint8_t *)out)[i] / l->world); break;
      default: break;
    }
  }
}

static const int64_t hier_sizes[] = {0, 1, 7, 1500, 40007};
#define NHSIZES (int)(sizeof hier_sizes / sizeof hier_sizes[0])

static void body_hier_reductions(rank_ctx *rc) {
  const machine_layout *l = rc->arg;
  hier_rank hr;
  if (!hier_join(rc, l, &hr)) return;
  const int n = rc->world, r = rc->rank;
  uint64_t seed = 2000;
  for (int d = 0; d < NDTYPES; d++) {
    nrt_dtype dt = all_dtypes[d];
    size_t es = nrt_dtype_size(dt);
    for (int o = 0; o < NOPS; o++) {
      nrt_reduce_op op = all_ops[o];
      if (!nrt_reduce_supported(op, dt)) {
        char x[16] = {0};
        CHECK_STATUS(nrt_hcomm_all_reduce(hr.h, x, x, 1, dt, op, 1.0), NRT_ERROR_UNSUPPORTED);
        continue;
      }
      for (int s = 0; s < NHSIZES; s++, seed++) {
        int64_t count = hier_sizes[s];
        void **ins = all_inputs(dt, count, n, seed, false);
        char *want = malloc(count * es + 1), *got = malloc(count * es + 1);
        hier_reference(l, dt, op, 0.375, ins, count, want);
        bool in_place = (seed & 1) != 0;
        if (in_place) memcpy(got, ins[r], count * es);
        CHECK_OK(nrt_hcomm_all_reduce(hr.h, in_place ? got : ins[r], got, count, dt, op, 0.375));
        same_bytes(got, want, count * es, "hcomm all_reduce", dt, count, r);
        /* reduce to a root that is not always a leader; other ranks' inputs stay */
        int root = (int)(seed % (uint64_t)n);
        memset(got, 0x5a, count * es);
        CHECK_OK(nrt_hcomm_reduce(hr.h, ins[r], got, count, dt, op, 0.375, root));
        if (r == root) same_bytes(got, want, count * es, "hcomm reduce", dt, count, r);
        free(want);
        free(got);
        free_inputs(ins, n);
      }
    }
  }
  /* Argument errors are found before any step and leave it usable. */
  float x[2] = {1, 2};
  CHECK_STATUS(nrt_hcomm_all_reduce(hr.h, x, x, -1, NRT_FLOAT32, NRT_REDUCE_SUM, 1.0), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_hcomm_broadcast(hr.h, x, 2, NRT_FLOAT32, n), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_hcomm_all_reduce(hr.h, x, x, 2, NRT_FLOAT32, NRT_REDUCE_BAND, 1.0), NRT_ERROR_UNSUPPORTED);
  CHECK(strstr(nrt_last_error_message(), "band does not take dtype float32") != NULL);
  CHECK_OK(nrt_hcomm_all_reduce(hr.h, x, x, 2, NRT_FLOAT32, NRT_REDUCE_MAX, 1.0));
  CHECK(x[0] == 1 && x[1] == 2);
  hier_leave(&hr);
}

static void body_hier_movement(rank_ctx *rc) {
  const machine_layout *l = rc->arg;
  hier_rank hr;
  if (!hier_join(rc, l, &hr)) return;
  const int n = rc->world, r = rc->rank;
  uint64_t seed = 3000;
  for (int d = 0; d < 4; d++) {
    nrt_dtype dt = move_dtypes[d];
    size_t es = nrt_dtype_size(dt);
    for (int s = 0; s < NHSIZES; s++) {
      int64_t count = hier_sizes[s];
      /* broadcast from every root */
      for (int root = 0; root < n; root++, seed++) {
        char *want = malloc(count * es + 1), *buf = malloc(count * es + 1);
        fill(want, dt, count, root, seed, false);
        if (r == root) memcpy(buf, want, count * es);
        else memset(buf, 0, count * es);
        CHECK_OK(nrt_hcomm_broadcast(hr.h, buf, count, dt, root));
        same_bytes(buf, want, count * es, "hcomm broadcast", dt, count, r);
        free(want);
        free(buf);
      }
      /* all_gather, in place on odd seeds */
      seed++;
      void **ins = all_inputs(dt, count, n, seed, false);
      char *want = malloc(n * count * es + 1), *got = malloc(n * count * es + 1);
      for (int p = 0; p < n; p++) memcpy(want + p * count * es, ins[p], count * es);
      bool in_place = seed & 1;
      memset(got, 0, n * count * es);
      if (in_place) memcpy(got + r * count * es, ins[r], count * es);
      CHECK_OK(nrt_hcomm_all_gather(hr.h, in_place ? got + r * count * es : ins[r], got, count, dt));
      same_bytes(got, want, n * count * es, "hcomm all_gather", dt, count, r);
      /* uneven, some ranks empty */
      int64_t counts[8];
      void *bufs[8];
      for (int p = 0; p < n; p++) {
        counts[p] = count * (p + 1) / n - (p == 0 ? count / n : 0);
        bufs[p] = malloc(counts[p] * es + 1);
      }
      CHECK_OK(nrt_hcomm_all_gatherv(hr.h, ins[r], counts[r], bufs, counts, dt));
      for (int p = 0; p < n; p++) {
        same_bytes(bufs[p], ins[p], counts[p] * es, "hcomm all_gatherv", dt, counts[p], r);
        free(bufs[p]);
      }
      free(want);
      free(got);
      free_inputs(ins, n);
    }
  }
  hier_leave(&hr);
}

static void body_hier_reduce_scatter(rank_ctx *rc) {
  const machine_layout *l = rc->arg;
  hier_rank hr;
  if (!hier_join(rc, l, &hr)) return;
  const int n = rc->world, r = rc->rank;
  static const nrt_dtype dts[] = {NRT_FLOAT32, NRT_BFLOAT16, NRT_INT16, NRT_BOOL, NRT_COMPLEX64};
  static const nrt_reduce_op ops[] = {NRT_REDUCE_SUM, NRT_REDUCE_PREMUL_SUM, NRT_REDUCE_AVG,
                                      NRT_REDUCE_MIN, NRT_REDUCE_AVG};
  uint64_t seed = 4000;
  for (int d = 0; d < 5; d++) {
    nrt_dtype dt = dts[d];
    nrt_reduce_op op = ops[d];
    size_t es = nrt_dtype_size(dt);
    for (int s = 0; s < NHSIZES; s++, seed++) {
      int64_t count = hier_sizes[s];
      void **ins = all_inputs(dt, n * count, n, seed, false);
      char *want = malloc(n * count * es + 1), *got = malloc(count * es + 1);
      hier_reference(l, dt, op, 0.5, ins, n * count, want);
      bool in_place = seed & 1;
      char *recv = in_place ? (char *)ins[r] + r * count * es : got;
      CHECK_OK(nrt_hcomm_reduce_scatter(hr.h, ins[r], recv, count, dt, op, 0.5));
      same_bytes(recv, want + r * count * es, count * es, "hcomm reduce_scatter", dt, count, r);
      free_inputs(ins, n);
      /* uneven blocks, packed (contiguous) on even seeds, apart on odd */
      int64_t counts[8], offs[8], total = 0;
      for (int p = 0; p < n; p++) {
        counts[p] = count * p / n + (count ? p : 0);
        offs[p] = total;
        total += counts[p];
      }
      ins = all_inputs(dt, total, n, seed + 7777, false);
      char *wantv = malloc(total * es + 1), *gotv = malloc(counts[r] * es + 1);
      hier_reference(l, dt, op, 0.5, ins, total, wantv);
      const void *blocks[8];
      void *apart[8];
      for (int p = 0; p < n; p++) {
        apart[p] = NULL;
        if (seed & 1) {
          apart[p] = malloc(counts[p] * es + 1);
          memcpy(apart[p], (char *)ins[r] + offs[p] * es, counts[p] * es);
          blocks[p] = apart[p];
        } else {
          blocks[p] = (char *)ins[r] + offs[p] * es;
        }
      }
      CHECK_OK(nrt_hcomm_reduce_scatterv(hr.h, blocks, gotv, counts, dt, op, 0.5));
      same_bytes(gotv, wantv + offs[r] * es, counts[r] * es, "hcomm reduce_scatterv", dt, counts[r], r);
      for (int p = 0; p < n; p++) free(apart[p]);
      free(wantv);
      free(gotv);
      free_inputs(ins, n);
      free(want);
      free(got);
    }
  }
  /* barrier: nobody leaves before the last rank entered */
  CHECK_OK(nrt_hcomm_barrier(hr.h));
  if (r == n - 1) {
    nrt_test_sleep_ms(60);
    *last_entry_ns = now_ns();
  }
  CHECK_OK(nrt_hcomm_barrier(hr.h));
  CHECK(now_ns() >= *last_entry_ns);
  hier_leave(&hr);
}

/* A bridge call that fails on machine 1's leader: it gets the bridge's
 * reason, its machine's ranks fail promptly (aborted, not timed out), and so
 * does machine 0 once that leader leaves the bridge; later operations fail
 * at once. */
static void body_hier_bridge_fails(rank_ctx *rc) {
  const machine_layout *l = rc->arg;
  hier_rank hr;
  if (!hier_join(rc, l, &hr)) return;
  float x[4] = {1, 2, 3, 4};
  CHECK_OK(nrt_hcomm_all_reduce(hr.h, x, x, 4, NRT_FLOAT32, NRT_REDUCE_SUM, 1.0));
  if (hr.machine == 1 && hr.local_rank == 0) hr.bridge.fail_next = true;
  uint64_t t0 = now_ns();
  nrt_status st = nrt_hcomm_all_reduce(hr.h, x, x, 4, NRT_FLOAT32, NRT_REDUCE_SUM, 1.0);
  CHECK(st == NRT_ERROR_PEER_FAILED);
  if (hr.machine == 1 && hr.local_rank == 0) {
    CHECK(strstr(nrt_last_error_message(), "between machines: test bridge: connection reset") != NULL);
    CHECK(strstr(nrt_last_error_message(), "nrt_hcomm_all_reduce") != NULL);
    CHECK_OK(nrt_comm_destroy(hr.bridge.comm)); /* the network goes: machine 0's leader learns */
    hr.bridge.comm = NULL;
  } else {
    CHECK(strstr(nrt_last_error_message(), "within the machine") != NULL ||
          strstr(nrt_last_error_message(), "between machines") != NULL);
  }
  CHECK(now_ns() - t0 < (uint64_t)TIMEOUT_MS * 1000000ull / 2);
  CHECK_STATUS(nrt_hcomm_barrier(hr.h), NRT_ERROR_PEER_FAILED);
  CHECK(strstr(nrt_last_error_message(), "broken by an earlier error") != NULL);
  hier_leave(&hr);
}

static void test_hier_create(void) {
  nrt_comm *c = NULL;
  char name[64];
  snprintf(name, sizeof name, "ct%d_hsingle", (int)getpid());
  CHECK_OK(nrt_comm_create(0, 1, name, NULL, 1000, NULL, &c));
  if (!c) return;
  nrt_hcomm *h = NULL;
  int one[1] = {0}, skipped[2] = {0, 2}, two[2] = {0, 1}, apart[2] = {1, 0};
  CHECK_OK(nrt_hcomm_create(0, 1, one, c, NULL, 1000, &h));
  float x[3] = {1, 2, 3};
  CHECK_OK(nrt_hcomm_all_reduce(h, x, x, 3, NRT_FLOAT32, NRT_REDUCE_PREMUL_SUM, 2.0));
  CHECK(x[0] == 2 && x[2] == 6 && nrt_hcomm_machines(h) == 1);
  CHECK_OK(nrt_hcomm_set_timeout(h, 500));
  CHECK_OK(nrt_hcomm_destroy(h));
  h = NULL;
  CHECK_STATUS(nrt_hcomm_create(0, 2, skipped, c, NULL, 1000, &h), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(nrt_last_error_message(), "numbered") != NULL);
  CHECK_STATUS(nrt_hcomm_create(0, 2, apart, c, NULL, 1000, &h), NRT_ERROR_INVALID_ARGUMENT);
  /* a leader of two machines needs a bridge */
  CHECK_STATUS(nrt_hcomm_create(0, 2, two, c, NULL, 1000, &h), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(nrt_last_error_message(), "bridge") != NULL);
  CHECK(h == NULL);
  CHECK_OK(nrt_hcomm_destroy(NULL));
  CHECK_OK(nrt_comm_destroy(c));
}

/* Two machines of one rank (what TORCH_NEURONX_DIST_TRANSPORT=gloo makes),
 * one machine short and interleaved, the torchrun layout, three machines. */
static const machine_layout hier_layouts[] = {
    {2, {0, 1}}, {3, {0, 1, 0}}, {4, {0, 0, 1, 1}}, {4, {0, 1, 1, 2}}};
#define NLAYOUTS (int)(sizeof hier_layouts / sizeof hier_layouts[0])

#define RUN_HIER(body)                                                       \
  do {                                                                       \
    int before_ = nrt_test_failures;                                         \
    for (int l_ = 0; l_ < NLAYOUTS; l_++)                                    \
      run_ranks(hier_layouts[l_].world, body, (void *)&hier_layouts[l_]);    \
    printf("  %-40s %s\n", #body " x4 layouts", nrt_test_failures == before_ ? "ok" : "FAILED"); \
    fflush(stdout);                                                          \
  } while (0)

/* ---- bandwidth (printed, never asserted) ----------------------------------------------- */
static double seconds(void) { return (double)now_ns() * 1e-9; }

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void body_bench(rank_ctx *rc) {
  nrt_comm *c = NULL;
  nrt_comm_options o = {0};
  if (getenv("NRT_TEST_COLL_SLOT")) o.slot_bytes = (size_t)atol(getenv("NRT_TEST_COLL_SLOT")) << 10;
  CHECK_OK(nrt_comm_create(rc->rank, rc->world, rc->name, &rc->ex, 30000, &o, &c));
  if (!c) return;
  const int64_t count = (64 << 20) / 4;
  /* Aligned as the device allocator aligns tensors; NRT_TEST_COLL_OFFSET
   * bytes off it (a view), to measure the copies' alignment handling. */
  size_t offset = getenv("NRT_TEST_COLL_OFFSET") ? (size_t)atol(getenv("NRT_TEST_COLL_OFFSET")) % 4096 / 4 * 4 : 0;
  char *raw = NULL;
  if (posix_memalign((void **)&raw, 4096, count * 4 + offset)) return;
  float *buf = (float *)(raw + offset);
  for (int64_t i = 0; i < count; i++) buf[i] = (float)(i & 1023);
  const int iters = 5;
  double best = 1e30;
  for (int i = 0; i < iters + 1; i++) {
    CHECK_OK(nrt_comm_barrier(c));
    double t0 = seconds();
    CHECK_OK(nrt_comm_all_reduce(c, buf, buf, count, NRT_FLOAT32, NRT_REDUCE_AVG, 1.0));
    double t = seconds() - t0;
    if (i > 0 && t < best) best = t; /* the first run faults the pages in */
  }
  /* Latency of an 8-byte all_reduce: the median of many. */
  enum { LAT_ITERS = 2000 };
  static double lat[LAT_ITERS];
  CHECK_OK(nrt_comm_barrier(c));
  for (int i = 0; i < LAT_ITERS; i++) {
    double t0 = seconds();
    CHECK_OK(nrt_comm_all_reduce(c, buf, buf, 2, NRT_FLOAT32, NRT_REDUCE_SUM, 1.0));
    lat[i] = seconds() - t0;
  }
  qsort(lat, LAT_ITERS, sizeof(double), cmp_double);
  /* The same through the eager call, as the glue issues it (10 us spins). */
  static double lat_eager[LAT_ITERS];
  CHECK_OK(nrt_comm_barrier(c));
  for (int i = 0; i < LAT_ITERS; i++) {
    double t0 = seconds();
    nrt_comm_eager state;
    CHECK_OK(nrt_comm_all_reduce_eager(c, buf, buf, 2, NRT_FLOAT32, NRT_REDUCE_SUM, 1.0, 10000, &state));
    if (state != NRT_COMM_EAGER_DONE) CHECK_OK(state == NRT_COMM_EAGER_STARTED ? nrt_comm_finish(c)
                                                   : nrt_comm_all_reduce(c, buf, buf, 2, NRT_FLOAT32,
                                                                         NRT_REDUCE_SUM, 1.0));
    lat_eager[i] = seconds() - t0;
  }
  qsort(lat_eager, LAT_ITERS, sizeof(double), cmp_double);
  if (rc->rank == 0) {
    double algbw = (double)count * 4 / best / 1e9, n = rc->world;
    printf("  8 B eager: median %.1f us\n", lat_eager[LAT_ITERS / 2] * 1e6);
    printf("  all_reduce 64 MiB float32, %d ranks: %.1f ms, algbw %.2f GB/s, busbw %.2f GB/s; "
           "8 B: median %.1f us\n",
           rc->world, best * 1e3, algbw, algbw * 2 * (n - 1) / n, lat[LAT_ITERS / 2] * 1e6);
  }
  free(raw);
  CHECK_OK(nrt_comm_destroy(c));
}

static void bench_memcpy(void) {
  const size_t bytes = 64 << 20;
  char *a = malloc(bytes), *b = malloc(bytes);
  memset(a, 1, bytes);
  memset(b, 2, bytes);
  double best = 1e30;
  for (int i = 0; i < 6; i++) {
    double t0 = seconds();
    memcpy(b, a, bytes);
    double t = seconds() - t0;
    if (t < best) best = t;
  }
  printf("  memcpy 64 MiB (one core): %.1f ms, %.2f GB/s\n", best * 1e3, bytes / best / 1e9);
  free(a);
  free(b);
}

/* ---- main -------------------------------------------------------------------------------- */
#define RUN_RANKS(body, arg)                                                 \
  do {                                                                       \
    int before_ = nrt_test_failures;                                         \
    for (int n_ = 2; n_ <= 4; n_++) run_ranks(n_, body, arg);                \
    printf("  %-40s %s\n", #body " x2,3,4", nrt_test_failures == before_ ? "ok" : "FAILED"); \
    fflush(stdout);                                                          \
  } while (0)

#define RUN_FAULT(world, body, killed)                                       \
  do {                                                                       \
    int before_ = nrt_test_failures;                                         \
    run_ranks_ex(world, body, NULL, killed);                                 \
    printf("  %-40s %s\n", #body, nrt_test_failures == before_ ? "ok" : "FAILED"); \
    fflush(stdout);                                                          \
  } while (0)

int main(int argc, char **argv) {
  bool bench = (argc > 1 && strcmp(argv[1], "--bench") == 0) ||
               (getenv("NRT_TEST_COLL_BENCH") && strcmp(getenv("NRT_TEST_COLL_BENCH"), "1") == 0);
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc > 2 && strcmp(argv[2], "--only") == 0) { /* --bench --only [WORLD]: the measurements alone */
    int world = argc > 3 ? atoi(argv[3]) : 0;
    if (!world) bench_memcpy();
    for (int w = 2; w <= 4; w += 2)
      if (!world || w == world) run_ranks(w, body_bench, NULL);
    return TEST_RESULT();
  }
  RUN_TEST(test_single_rank);
  RUN_RANKS(body_all_reduce, NULL);
  RUN_RANKS(body_all_reduce_eager, NULL);
  RUN_RANKS(body_reduce, NULL);
  RUN_RANKS(body_broadcast, NULL);
  RUN_RANKS(body_all_gather, NULL);
  RUN_RANKS(body_reduce_scatter, NULL);
  RUN_RANKS(body_all_to_all, NULL);
  RUN_RANKS(body_gather_scatter, NULL);
  RUN_RANKS(body_barrier, NULL);
  RUN_RANKS(body_send_recv, NULL);
  RUN_FAULT(3, body_all_to_all_mismatch, -1);
  RUN_FAULT(3, body_never_joins, -1);
  RUN_FAULT(3, body_skips_op, -1);
  RUN_FAULT(3, body_killed, 1);
  RUN_FAULT(3, body_leaves, -1);
  RUN_FAULT(2, body_on_stream, -1);
  RUN_TEST(test_hier_create);
  RUN_HIER(body_hier_reductions);
  RUN_HIER(body_hier_movement);
  RUN_HIER(body_hier_reduce_scatter);
  {
    static const machine_layout two_by_two = {4, {0, 0, 1, 1}};
    int before = nrt_test_failures;
    run_ranks(4, body_hier_bridge_fails, (void *)&two_by_two);
    printf("  %-40s %s\n", "body_hier_bridge_fails", nrt_test_failures == before ? "ok" : "FAILED");
  }
  if (bench) {
    bench_memcpy();
    run_ranks(2, body_bench, NULL);
    run_ranks(4, body_bench, NULL);
  }
  return TEST_RESULT();
}
