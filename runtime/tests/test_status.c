/* Status codes, the per-thread error message, and dtype basics
 * (table, 16-bit float conversions). */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "api/api.h"
#include "exec/exec.h"
#include "memory/memory.h"
#include "testing.h"

static void test_status_names(void) {
  CHECK(strcmp(nrt_status_name(NRT_SUCCESS), "NRT_SUCCESS") == 0);
  CHECK(strcmp(nrt_status_name(NRT_ERROR_OUT_OF_MEMORY), "NRT_ERROR_OUT_OF_MEMORY") == 0);
  CHECK(strcmp(nrt_status_name(NRT_ERROR_INTERNAL), "NRT_ERROR_INTERNAL") == 0);
  CHECK(strcmp(nrt_status_string(NRT_ERROR_OUT_OF_MEMORY), "out of device memory") == 0);
  for (int s = 0; s < NRT_STATUS_COUNT; s++) {
    CHECK(nrt_status_name((nrt_status)s) != NULL);
    CHECK(strncmp(nrt_status_name((nrt_status)s), "NRT_", 4) == 0);
    CHECK(nrt_status_string((nrt_status)s)[0] != '\0');
    for (int t = 0; t < s; t++)
      CHECK(strcmp(nrt_status_name((nrt_status)s), nrt_status_name((nrt_status)t)) != 0);
  }
  /* Out of range never returns NULL. */
  CHECK(nrt_status_name(NRT_STATUS_COUNT) != NULL);
  CHECK(nrt_status_string((nrt_status)-1) != NULL);
  CHECK(nrt_status_name((nrt_status)1000)[0] != '\0');
}

static void test_error_message(void) {
  nrt_clear_error_message();
  CHECK(strcmp(nrt_last_error_message(), "") == 0);
  nrt_set_error_message("tried %d of %s", 3, "x");
  CHECK(strcmp(nrt_last_error_message(), "tried 3 of x") == 0);
  /* The current message may be an argument of the next one. */
  nrt_set_error_message("outer: %s", nrt_last_error_message());
  CHECK(strcmp(nrt_last_error_message(), "outer: tried 3 of x") == 0);
  /* Overlong messages are truncated, still terminated. */
  char big[4 * NRT_ERROR_MESSAGE_MAX];
  memset(big, 'a', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  nrt_set_error_message("%s", big);
  CHECK(strlen(nrt_last_error_message()) == NRT_ERROR_MESSAGE_MAX - 1);
  nrt_clear_error_message();
}

static void *other_thread(void *arg) {
  int *ok = arg;
  /* A fresh thread sees no message, and its own does not leak out. */
  *ok = strcmp(nrt_last_error_message(), "") == 0;
  nrt_set_error_message("from the other thread");
  *ok = *ok && strcmp(nrt_last_error_message(), "from the other thread") == 0;
  return NULL;
}

static void test_error_message_thread_local(void) {
  nrt_set_error_message("main thread");
  pthread_t t;
  int ok = 0;
  pthread_create(&t, NULL, other_thread, &ok);
  pthread_join(t, NULL);
  CHECK(ok);
  CHECK(strcmp(nrt_last_error_message(), "main thread") == 0);
}

static void test_dtype_table(void) {
  CHECK(nrt_dtype_size(NRT_BOOL) == 1);
  CHECK(nrt_dtype_size(NRT_INT16) == 2);
  CHECK(nrt_dtype_size(NRT_INT64) == 8);
  CHECK(nrt_dtype_size(NRT_BFLOAT16) == 2);
  CHECK(nrt_dtype_size(NRT_FLOAT64) == 8);
  CHECK(nrt_dtype_size(NRT_DTYPE_COUNT) == 0);
  CHECK(nrt_dtype_size((nrt_dtype)-1) == 0);
  CHECK(strcmp(nrt_dtype_name(NRT_FLOAT32), "float32") == 0);
  CHECK(strcmp(nrt_dtype_name(NRT_BFLOAT16), "bfloat16") == 0);
  CHECK(strcmp(nrt_dtype_name(NRT_UINT8), "uint8") == 0);
  CHECK(strcmp(nrt_dtype_name(NRT_DTYPE_COUNT), "invalid") == 0);
  CHECK(nrt_dtype_is_floating(NRT_FLOAT16));
  CHECK(nrt_dtype_is_floating(NRT_BFLOAT16));
  CHECK(nrt_dtype_is_floating(NRT_FLOAT32));
  CHECK(nrt_dtype_is_floating(NRT_FLOAT64));
  CHECK(!nrt_dtype_is_floating(NRT_BOOL));
  CHECK(!nrt_dtype_is_floating(NRT_INT64));
  CHECK(!nrt_dtype_is_floating(NRT_DTYPE_COUNT));
}

static uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static float float_of(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static uint32_t rng32(void) { return (uint32_t)(nrt_test_rand_u64() >> 16); }

/* Reference bf16 rounding through exact double arithmetic. */
static uint16_t bf16_reference(float f) {
  uint32_t u = bits_of(f);
  uint16_t lo = (uint16_t)(u >> 16);
  uint16_t hi = (uint16_t)(lo + 1);
  double x = f, dlo = nrt_bf16_to_f32(lo), dhi = nrt_bf16_to_f32(hi);
  double elo = fabs(x - dlo), ehi = fabs(dhi - x);
  if (elo < ehi) return lo;
  if (ehi < elo) return hi;
  return (lo & 1u) ? hi : lo;
}

static void test_bf16(void) {
  CHECK(nrt_f32_to_bf16(1.0f) == 0x3f80);
  CHECK(nrt_f32_to_bf16(-2.0f) == 0xc000);
  CHECK(nrt_bf16_to_f32(0x3f80) == 1.0f);
  CHECK(nrt_f32_to_bf16(float_of(0x3f808000u)) == 0x3f80); /* tie to even (down) */
  CHECK(nrt_f32_to_bf16(float_of(0x3f818000u)) == 0x3f82); /* tie to even (up) */
  CHECK(nrt_f32_to_bf16(float_of(0x3f808001u)) == 0x3f81);
  CHECK(nrt_f32_to_bf16(INFINITY) == 0x7f80);
  CHECK(nrt_f32_to_bf16(-INFINITY) == 0xff80);
  CHECK(nrt_f32_to_bf16(float_of(0x7f7fffffu)) == 0x7f80); /* FLT_MAX rounds to inf */
  /* NaNs stay NaN, even one whose payload is only in the low bits. */
  uint16_t n1 = nrt_f32_to_bf16(NAN);
  uint16_t n2 = nrt_f32_to_bf16(float_of(0x7f800001u));
  uint16_t n3 = nrt_f32_to_bf16(float_of(0xff800001u));
  CHECK((n1 & 0x7f80) == 0x7f80 && (n1 & 0x7f) != 0);
  CHECK((n2 & 0x7f80) == 0x7f80 && (n2 & 0x7f) != 0);
  CHECK((n3 & 0x8000) && (n3 & 0x7f) != 0);
  CHECK(isnan(nrt_bf16_to_f32(0x7fc0)));
  /* Every bf16 round-trips exactly. */
  int bad = 0;
  for (uint32_t v = 0; v < 65536; v++) {
    float f = nrt_bf16_to_f32((uint16_t)v);
    if (isnan(f)) continue;
    if (nrt_f32_to_bf16(f) != v) bad++;
  }
  CHECK(bad == 0);
  /* Random finite floats match the reference rounding. */
  bad = 0;
  for (int i = 0; i < 200000; i++) {
    float f = float_of(rng32());
    if (!isfinite(f) || fabsf(f) > 3.38e38f) continue;
    if (nrt_f32_to_bf16(f) != bf16_reference(f)) bad++;
  }
  CHECK(bad == 0);
}

static void test_f16(void) {
  CHECK(nrt_f32_to_f16(1.0f) == 0x3c00);
  CHECK(nrt_f32_to_f16(-2.0f) == 0xc000);
  CHECK(nrt_f32_to_f16(65504.0f) == 0x7bff);
  CHECK(nrt_f32_to_f16(65519.0f) == 0x7bff);
  CHECK(nrt_f32_to_f16(65520.0f) == 0x7c00); /* tie goes to even: infinity */
  CHECK(nrt_f32_to_f16(1e10f) == 0x7c00);
  CHECK(nrt_f32_to_f16(-INFINITY) == 0xfc00);
  CHECK(nrt_f32_to_f16(ldexpf(1.0f, -24)) == 0x0001);  /* smallest subnormal */
  CHECK(nrt_f32_to_f16(ldexpf(1.0f, -25)) == 0x0000);  /* tie to even: zero */
  CHECK(nrt_f32_to_f16(ldexpf(1.5f, -25)) == 0x0001);  /* above the tie */
  CHECK(nrt_f32_to_f16(ldexpf(3.0f, -25)) == 0x0002);  /* 1.5 units: tie to even 2 */
  CHECK(nrt_f32_to_f16(ldexpf(1.0f, -14)) == 0x0400);  /* smallest normal */
  CHECK(nrt_f32_to_f16(ldexpf(1023.5f, -24)) == 0x0400); /* rounds up into the normals */
  CHECK(nrt_f32_to_f16(-0.0f) == 0x8000);
  CHECK(nrt_f16_to_f32(0x0001) == ldexpf(1.0f, -24));
  CHECK(nrt_f16_to_f32(0x03ff) == ldexpf(1023.0f, -24));
  CHECK(nrt_f16_to_f32(0x7c00) == INFINITY);
  CHECK(isnan(nrt_f16_to_f32(0x7e00)));
  CHECK(isnan(nrt_f16_to_f32(0x7c01)));
  uint16_t n = nrt_f32_to_f16(float_of(0x7f800001u)); /* payload only in low bits */
  CHECK((n & 0x7c00) == 0x7c00 && (n & 0x3ff) != 0);
  /* Every f16 round-trips exactly (NaNs stay NaN). */
  int bad = 0;
  for (uint32_t v = 0; v < 65536; v++) {
    float f = nrt_f16_to_f32((uint16_t)v);
    if (isnan(f)) {
      if (!isnan(nrt_f16_to_f32(nrt_f32_to_f16(f)))) bad++;
      continue;
    }
    if (nrt_f32_to_f16(f) != v) bad++;
  }
  CHECK(bad == 0);
#if defined(__FLT16_MAX__)
  /* The compiler's _Float16 conversion is the oracle for random floats in
   * and around the f16 range. */
  bad = 0;
  for (int i = 0; i < 300000; i++) {
    uint32_t u = rng32();
    /* bias exponents towards the interesting range 2^-30 .. 2^17 */
    uint32_t e = 97u + (u >> 24) % 48u;
    float f = float_of((u & 0x807fffffu) | (e << 23));
    _Float16 h = (_Float16)f;
    uint16_t hb;
    memcpy(&hb, &h, 2);
    if (nrt_f32_to_f16(f) != hb) bad++;
  }
  CHECK(bad == 0);
#endif
}

int main(void) {
  RUN_TEST(test_status_names);
  RUN_TEST(test_error_message);
  RUN_TEST(test_error_message_thread_local);
  RUN_TEST(test_dtype_table);
  RUN_TEST(test_bf16);
  RUN_TEST(test_f16);
  return TEST_RESULT();
}
