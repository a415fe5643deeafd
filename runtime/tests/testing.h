/* Minimal C test harness: CHECK/CHECK_OK record failures and continue;
 * TEST_MAIN runs the listed tests and exits non-zero on any failure. */
#ifndef NRT_TESTING_H
#define NRT_TESTING_H

#include <stdio.h>
#include <stdlib.h>
#include <math.h>
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

#endif
