/* Minimal C test harness: CHECK/CHECK_OK record failures and continue;
 * RUN_TEST runs one test and TEST_RESULT() gives main's exit code. Below the
 * checks, the helpers every kernel test needs (random inputs, element
 * access in any dtype, launch descriptors, tolerant compares), kept here
 * once so that the tests agree on what "random", "close" and "a launch"
 * mean. */
#ifndef NRT_TESTING_H
#define NRT_TESTING_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <stdatomic.h>
#include <time.h>
#include "nrt/nrt.h"

static int nrt_test_failures = 0;

#define CHECK(cond)                                                         \
  do {                                                                      \
    if (!(cond)) {                                                          \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      nrt_test_failures++;                                                  \
    }                                                                       \
  } while (0)

#define CHECK_OK(expr)                                                      \
  do {                                                                      \
    nrt_status s_ = (expr);                                                 \
    if (s_ != NRT_SUCCESS) {                                                \
      fprintf(stderr, "%s:%d: %s returned %s (%s)\n", __FILE__, __LINE__,   \
              #expr, nrt_status_name(s_), nrt_last_error_message());        \
      nrt_test_failures++;                                                  \
    }                                                                       \
  } while (0)

#define CHECK_STATUS(expr, want)                                            \
  do {                                                                      \
    nrt_status s_ = (expr);                                                 \
    if (s_ != (want)) {                                                     \
      fprintf(stderr, "%s:%d: %s returned %s, want %s\n", __FILE__, __LINE__, \
              #expr, nrt_status_name(s_), nrt_status_name(want));           \
      nrt_test_failures++;                                                  \
    }                                                                       \
  } while (0)

#define CHECK_NEAR(a, b, tol)                                               \
  do {                                                                      \
    double a_ = (a), b_ = (b);                                              \
    if (!(fabs(a_ - b_) <= (tol) * (1.0 + fabs(b_)))) {                     \
      fprintf(stderr, "%s:%d: %s = %g, want %g (tol %g)\n", __FILE__, __LINE__, \
              #a, a_, b_, (double)(tol));                                   \
      nrt_test_failures++;                                                  \
    }                                                                       \
  } while (0)

typedef void (*nrt_test_fn)(void);
#define RUN_TEST(fn)                                                        \
  do {                                                                      \
    int before_ = nrt_test_failures;                                        \
    fn();                                                                   \
    printf("  %-40s %s\n", #fn, nrt_test_failures == before_ ? "ok" : "FAILED"); \
  } while (0)

#define TEST_RESULT()                                                       \
  (nrt_test_failures ? (fprintf(stderr, "%d check(s) failed\n", nrt_test_failures), 1) : 0)

/* CHECK_MSG / CHECK_PREFIX: the last runtime error message is `want`, or
 * starts with it (kernels append details after PyTorch's wording). */
static inline void nrt_test_check_message(const char *want, bool prefix_only, const char *file, int line) {
  const char *got = nrt_last_error_message();
  bool ok = prefix_only ? strncmp(got, want, strlen(want)) == 0 : strcmp(got, want) == 0;
  if (!ok) {
    fprintf(stderr, "%s:%d: message \"%s\", want %s\"%s\"\n", file, line, got, prefix_only ? "prefix " : "",
            want);
    nrt_test_failures++;
  }
}
#define CHECK_MSG(want) nrt_test_check_message(want, false, __FILE__, __LINE__)
#define CHECK_PREFIX(want) nrt_test_check_message(want, true, __FILE__, __LINE__)

/* ---- stream fixtures ---------------------------------------------------------------
 * What the stream, event and allocator tests build their orderings from. */

static inline void nrt_test_sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Stream `index` of `device`. */
static inline nrt_stream *nrt_test_stream(int device, int index) {
  nrt_stream *s = NULL;
  CHECK_OK(nrt_stream_get(device, index, &s));
  return s;
}

/* A task that holds its stream until the test opens the gate; `entered`
 * says it has started. */
typedef struct nrt_test_gate {
  atomic_int open;
  atomic_int entered;
} nrt_test_gate;

static inline nrt_status nrt_test_gate_task(void *arg) {
  nrt_test_gate *g = arg;
  atomic_store(&g->entered, 1);
  while (!atomic_load(&g->open)) nrt_test_sleep_ms(1);
  return NRT_SUCCESS;
}

/* Enqueues the closed gate g on s under `name`. */
static inline void nrt_test_gate_close(nrt_stream *s, nrt_test_gate *g, const char *name) {
  atomic_init(&g->open, 0);
  atomic_init(&g->entered, 0);
  CHECK_OK(nrt_stream_enqueue(s, name, nrt_test_gate_task, g, NULL));
}

static inline void nrt_test_gate_open(nrt_test_gate *g) { atomic_store(&g->open, 1); }

/* ---- random inputs -------------------------------------------------------------
 * xorshift64 (shifts 13, 7, 17): cheap, deterministic and the same on every
 * host, so a failing case reproduces. One stream per test program; a test
 * that wants other data than the default stream calls nrt_test_seed() first
 * thing in main. */
static uint64_t nrt_test_rng_state = 0x9E3779B97F4A7C15ull;

static inline void nrt_test_seed(uint64_t seed) { nrt_test_rng_state = seed; }

static inline uint64_t nrt_test_rand_u64(void) {
  nrt_test_rng_state ^= nrt_test_rng_state << 13;
  nrt_test_rng_state ^= nrt_test_rng_state >> 7;
  nrt_test_rng_state ^= nrt_test_rng_state << 17;
  return nrt_test_rng_state;
}

/* An integer in [lo, hi) (hi > lo; the modulo bias is irrelevant here). */
static inline int64_t nrt_test_rand_range(int64_t lo, int64_t hi) {
  return lo + (int64_t)(nrt_test_rand_u64() % (uint64_t)(hi - lo));
}

/* A double in [lo, hi) from the top 53 bits. */
static inline double nrt_test_uniform(double lo, double hi) {
  return lo + (hi - lo) * ((double)(nrt_test_rand_u64() >> 11) * 0x1p-53);
}

/* A double in [-1, 1): the usual test input. */
static inline double nrt_test_urand(void) { return nrt_test_uniform(-1.0, 1.0); }

/* ---- element access --------------------------------------------------------------
 * Element i of a dense buffer of dtype dt, as a double: the tests build and
 * read inputs in any real dtype through these (bfloat16/float16 round to
 * nearest even on store, like the kernels). Integers are stored through
 * int64 so out-of-range values wrap instead of being undefined; complex and
 * unknown dtypes are not handled (put ignores them, get returns 0). */
static inline void nrt_test_put(void *base, nrt_dtype dt, int64_t i, double v) {
  char *p = (char *)base + i * (int64_t)nrt_dtype_size(dt);
  switch (dt) {
  case NRT_BOOL: *(uint8_t *)p = v != 0; break;
  case NRT_UINT8: *(uint8_t *)p = (uint8_t)(int64_t)v; break;
  case NRT_INT8: *(int8_t *)p = (int8_t)(int64_t)v; break;
  case NRT_INT16: *(int16_t *)p = (int16_t)(int64_t)v; break;
  case NRT_INT32: *(int32_t *)p = (int32_t)(int64_t)v; break;
  case NRT_INT64: *(int64_t *)p = (int64_t)v; break;
  case NRT_FLOAT16: *(uint16_t *)p = nrt_f32_to_f16((float)v); break;
  case NRT_BFLOAT16: *(uint16_t *)p = nrt_f32_to_bf16((float)v); break;
  case NRT_FLOAT32: *(float *)p = (float)v; break;
  case NRT_FLOAT64: *(double *)p = v; break;
  default: break;
  }
}

static inline double nrt_test_get(const void *base, nrt_dtype dt, int64_t i) {
  const char *p = (const char *)base + i * (int64_t)nrt_dtype_size(dt);
  switch (dt) {
  case NRT_BOOL: case NRT_UINT8: return *(const uint8_t *)p;
  case NRT_INT8: return *(const int8_t *)p;
  case NRT_INT16: return *(const int16_t *)p;
  case NRT_INT32: return *(const int32_t *)p;
  case NRT_INT64: return (double)*(const int64_t *)p;
  case NRT_FLOAT16: return nrt_f16_to_f32(*(const uint16_t *)p);
  case NRT_BFLOAT16: return nrt_bf16_to_f32(*(const uint16_t *)p);
  case NRT_FLOAT32: return *(const float *)p;
  case NRT_FLOAT64: return *(const double *)p;
  default: return 0;
  }
}

/* ---- 5-d activations -------------------------------------------------------------
 * A [N, C, D, H, W] tensor (1-d and 2-d cases set the unused spatial dims
 * to 1), contiguous or channels-last (C innermost), as the conv, pool and
 * resample kernels see activations. Strides count elements; the buffer is
 * zeroed and one element longer than needed, so an empty tensor still has
 * a valid pointer. */
typedef struct nrt_test_tensor5 {
  int64_t shape[5], strides[5], numel;
  nrt_dtype dt;
  void *data;
} nrt_test_tensor5;

static inline void nrt_test_tensor5_make(nrt_test_tensor5 *t, const int64_t shape[5], bool channels_last,
                                         nrt_dtype dt) {
  static const int contiguous[5] = {0, 1, 2, 3, 4}, last[5] = {0, 2, 3, 4, 1};
  const int *perm = channels_last ? last : contiguous; /* perm[0] outermost */
  int64_t s = 1;
  t->numel = 1;
  for (int i = 0; i < 5; i++) t->shape[i] = shape[i], t->numel *= shape[i];
  for (int i = 4; i >= 0; i--) {
    t->strides[perm[i]] = s;
    s *= shape[perm[i]];
  }
  t->dt = dt;
  t->data = calloc((size_t)t->numel + 1, nrt_dtype_size(dt));
}

/* The tensor as a launch operand (byte strides over its 5 dims). */
static inline void nrt_test_tensor5_operand(nrt_operand *o, const nrt_test_tensor5 *t) {
  o->data = t->data;
  o->dtype = t->dt;
  for (int i = 0; i < 5; i++) o->strides[i] = t->strides[i] * (int64_t)nrt_dtype_size(t->dt);
}

/* ---- launch descriptors ------------------------------------------------------------ */

/* A zeroed descriptor with its op, sizes and operand counts; operands (data,
 * dtype, byte strides) are set with nrt_test_operand*. */
static inline nrt_launch nrt_test_launch(nrt_op op, nrt_dtype compute, int ndim, const int64_t *sizes, int nout,
                                         int nin) {
  nrt_launch l;
  memset(&l, 0, sizeof l);
  l.op = op;
  l.compute_dtype = compute;
  l.ndim = ndim;
  for (int d = 0; d < ndim; d++) l.sizes[d] = sizes[d];
  l.noutputs = nout;
  l.ninputs = nin;
  return l;
}

/* The common elementwise shape: one output and the op's declared number of
 * inputs. */
static inline nrt_launch nrt_test_launch_op(nrt_op op, nrt_dtype compute, int ndim, const int64_t *sizes) {
  return nrt_test_launch(op, compute, ndim, sizes, 1, nrt_op_ninputs(op));
}

/* Operand k with the first n byte strides given; the others stay as they
 * were (0 in a fresh descriptor), which is how the tests describe operands
 * of fewer dims than the launch (the kernels' documented layouts). */
static inline void nrt_test_operand_n(nrt_launch *l, int k, const void *data, nrt_dtype dt, const int64_t *strides,
                                      int n) {
  l->operands[k].data = (void *)data;
  l->operands[k].dtype = dt;
  for (int d = 0; d < n; d++) l->operands[k].strides[d] = strides[d];
}

/* Operand k with a byte stride for each of the launch's ndim dims. */
static inline void nrt_test_operand(nrt_launch *l, int k, const void *data, nrt_dtype dt, const int64_t *strides) {
  nrt_test_operand_n(l, k, data, dt, strides, l->ndim);
}

/* Operand k of a 1-d launch, its stride counted in elements of dt. */
static inline void nrt_test_operand_1d(nrt_launch *l, int k, const void *data, nrt_dtype dt, int64_t stride_elems) {
  int64_t stride = stride_elems * (int64_t)nrt_dtype_size(dt);
  nrt_test_operand_n(l, k, data, dt, &stride, 1);
}

/* Runs a launch synchronously on the fast (reference = false) or the plain
 * reference path, and leaves the fast path selected. */
static inline nrt_status nrt_test_run(const nrt_launch *l, bool reference) {
  nrt_kernels_set_reference(reference);
  nrt_status s = nrt_launch_run(l);
  nrt_kernels_set_reference(false);
  return s;
}

/* ---- compares -------------------------------------------------------------------- */

/* Equal, counting NaN as equal to NaN (the kernels' NaN rules are tested). */
static inline bool nrt_test_same(double got, double want) { return got == want || (isnan(got) && isnan(want)); }

/* got within tol of want, relative above 1 and absolute below; NaN must
 * meet NaN and an infinity the same infinity. */
static inline bool nrt_test_near(double got, double want, double tol) {
  if (isnan(want)) return isnan(got);
  if (isinf(want)) return got == want;
  return fabs(got - want) <= tol * (1.0 + fabs(want));
}

#endif
