/* SEGMENT family tests: EMBEDDING_BAG, CDIST(_BACKWARD), PDIST(_BACKWARD),
 * SEGMENT_REDUCE(_BACKWARD), CTC_LOSS(_BACKWARD) (the CTC loss against a
 * brute force over every path), MULTI_MARGIN_LOSS(_BACKWARD) (bit for bit
 * against ATen's order written with float variables) and NLL_LOSS_REDUCE
 * (sums whose value shows the cascade order).
 * Each kernel is compared with a plain double-precision computation written
 * here, in both the fast and the reference mode, on non-contiguous strides,
 * bfloat16/float16 operands and edge cases (empty bags, zero distances,
 * p = 0, 1, 2, inf and fractional p), plus the error paths. */
#include <stdint.h>
#include <string.h>
#include "testing.h"
#include "kernels/common/common.h"
#include "nrt/ops/segment.h"

#define S(...) ((const int64_t[]){__VA_ARGS__})

/* ---- EMBEDDING_BAG ---------------------------------------------------------------- */

/* weight [V, D] float32 with row stride wrs (elements) and column stride 2
 * (non-contiguous); indices, offsets int64 (offsets int32 when off32). */
static void bag_case(int mode, int64_t V, int64_t D, int64_t N, const int64_t *idx, const int64_t *off,
                     int64_t noff, int include_last, int64_t padding, const float *psw, int off32, int reference) {
  int64_t B = include_last ? noff - 1 : noff;
  float *w = calloc((size_t)(V * D * 2 + 1), sizeof(float));
  for (int64_t i = 0; i < V * D * 2; i++) w[i] = (float)nrt_test_urand();
  /* a tie in row 1 and 2 of column 0 to exercise first-max-wins */
  if (V > 2) w[1 * D * 2] = w[2 * D * 2] = 5.0f;
  float *out = calloc((size_t)(B * D + 1), sizeof(float));
  int64_t *o2b = calloc((size_t)(N + 1), sizeof(int64_t)), *bsz = calloc((size_t)(B + 1), sizeof(int64_t));
  int64_t *maxi = calloc((size_t)(B * D + 1), sizeof(int64_t));
  int32_t off_i32[16];
  for (int64_t b = 0; off32 && b < noff && b < 16; b++) off_i32[b] = (int32_t)off[b];
  nrt_launch l =
      nrt_test_launch(NRT_OP(EMBEDDING_BAG), NRT_FLOAT32, 3, S(B, D, N), mode == NRT_BAG_MAX ? 4 : 3, psw ? 4 : 3);
  int k = 0;
  nrt_test_operand_n(&l, k++, out, NRT_FLOAT32, S(D * 4, 4), 2);
  nrt_test_operand_n(&l, k++, o2b, NRT_INT64, S(8), 1);
  nrt_test_operand_n(&l, k++, bsz, NRT_INT64, S(8), 1);
  if (mode == NRT_BAG_MAX) nrt_test_operand_n(&l, k++, maxi, NRT_INT64, S(D * 8, 8), 2);
  nrt_test_operand_n(&l, k++, w, NRT_FLOAT32, S(D * 2 * 4, 8), 2);
  nrt_test_operand_n(&l, k++, (void *)idx, NRT_INT64, S(8), 1);
  if (off32)
    nrt_test_operand_n(&l, k++, off_i32, NRT_INT32, S(4), 1);
  else
    nrt_test_operand_n(&l, k++, (void *)off, NRT_INT64, S(8), 1);
  if (psw) nrt_test_operand_n(&l, k++, (void *)psw, NRT_FLOAT32, S(4), 1);
  l.params[0] = mode;
  l.params[1] = padding;
  l.params[2] = include_last;
  l.aux[0] = V;
  CHECK_OK(nrt_test_run(&l, reference));
  for (int64_t b = 0; b < B; b++) {
    int64_t s = off[b], e = b + 1 < noff ? off[b + 1] : N, cnt = 0;
    for (int64_t i = s; i < e; i++) {
      CHECK(o2b[i] == b);
      if (idx[i] != padding) cnt++;
    }
    CHECK(bsz[b] == cnt);
    for (int64_t d = 0; d < D; d++) {
      double acc = 0.0;
      int64_t best = -1, seen = 0;
      for (int64_t i = s; i < e; i++) {
        if (idx[i] == padding) continue;
        double v = w[idx[i] * D * 2 + d * 2];
        if (mode == NRT_BAG_MAX) {
          if (seen == 0 || v > acc) {
            acc = v;
            best = idx[i];
          }
        } else {
          acc += (psw ? psw[i] : 1.0) * v;
        }
        seen++;
      }
      if (mode == NRT_BAG_MEAN && seen) acc /= (double)seen;
      CHECK_NEAR(out[b * D + d], acc, 1e-5);
      if (mode == NRT_BAG_MAX) CHECK(maxi[b * D + d] == best);
    }
  }
  free(w);
  free(out);
  free(o2b);
  free(bsz);
  free(maxi);
}

static void test_embedding_bag_modes(void) {
  const int64_t idx[] = {1, 2, 4, 5, 4, 3, 2, 9};
  const int64_t off[] = {0, 4, 4, 6};
  const float psw[] = {0.5f, -1.0f, 2.0f, 0.25f, 1.0f, 3.0f, -0.5f, 1.5f};
  for (int ref = 0; ref < 2; ref++) {
    for (int mode = 0; mode < 3; mode++) {
      bag_case(mode, 10, 3, 8, idx, off, 4, 0, -1, NULL, 0, ref);
      bag_case(mode, 10, 3, 8, idx, off, 4, 1, -1, NULL, 1, ref);  /* include_last: 3 bags over [0, 6) */
      bag_case(mode, 10, 3, 8, idx, off, 4, 0, 4, NULL, 0, ref);   /* padding_idx 4 */
    }
    bag_case(NRT_BAG_SUM, 10, 3, 8, idx, off, 4, 0, -1, psw, 0, ref);
    bag_case(NRT_BAG_SUM, 10, 3, 8, idx, off, 4, 0, 2, psw, 1, ref);
    bag_case(NRT_BAG_MEAN, 10, 0, 8, idx, off, 4, 0, -1, NULL, 0, ref); /* D = 0 */
    bag_case(NRT_BAG_MAX, 10, 3, 0, idx, S(0, 0), 2, 0, -1, NULL, 0, ref); /* no indices, empty bags */
  }
}

/* Many bags, compared fast vs reference: identical arithmetic, so equal. */
static void test_embedding_bag_large(void) {
  enum { V = 300, D = 37, N = 5000, B = 700 };
  int64_t *idx = malloc(N * sizeof(int64_t)), *off = malloc(B * sizeof(int64_t));
  for (int i = 0; i < N; i++) idx[i] = (int64_t)(nrt_test_rand_u64() % V);
  off[0] = 0;
  for (int b = 1; b < B; b++) off[b] = off[b - 1] + (int64_t)(nrt_test_rand_u64() % 14);
  if (off[B - 1] > N) off[B - 1] = N;
  for (int b = 1; b < B; b++)
    if (off[b] > N) off[b] = N;
  for (int mode = 0; mode < 3; mode++) bag_case(mode, V, D, N, idx, off, B, 0, 7, NULL, 0, 0);
  /* bfloat16 weights and output: fast and reference paths agree exactly */
  uint16_t *w = malloc(V * D * sizeof(uint16_t)), *o1 = malloc(B * D * 2), *o2 = malloc(B * D * 2);
  for (int i = 0; i < V * D; i++) w[i] = nrt_f32_to_bf16((float)nrt_test_urand());
  int64_t *o2b = malloc(N * 8), *bsz = malloc(B * 8);
  for (int ref = 0; ref < 2; ref++) {
    nrt_launch l = nrt_test_launch(NRT_OP(EMBEDDING_BAG), NRT_FLOAT32, 3, S(B, D, N), 3, 3);
    nrt_test_operand_n(&l, 0, ref ? o2 : o1, NRT_BFLOAT16, S(D * 2, 2), 2);
    nrt_test_operand_n(&l, 1, o2b, NRT_INT64, S(8), 1);
    nrt_test_operand_n(&l, 2, bsz, NRT_INT64, S(8), 1);
    nrt_test_operand_n(&l, 3, w, NRT_BFLOAT16, S(D * 2, 2), 2);
    nrt_test_operand_n(&l, 4, idx, NRT_INT64, S(8), 1);
    nrt_test_operand_n(&l, 5, off, NRT_INT64, S(8), 1);
    l.params[0] = NRT_BAG_MEAN;
    l.params[1] = -1;
    l.aux[0] = V;
    l.compute_dtype = NRT_BFLOAT16;
    CHECK_OK(nrt_test_run(&l, ref));
  }
  CHECK(memcmp(o1, o2, B * D * 2) == 0);
  free(idx), free(off), free(w), free(o1), free(o2), free(o2b), free(bsz);
}

static void test_embedding_bag_errors(void) {
  float w[6] = {0}, out[6];
  int64_t o2b[3], bsz[2];
  int64_t idx[3] = {0, 1, 2};
  int64_t bad_first[2] = {1, 2}, bad_order[2] = {0, -1}, bad_end[2] = {0, 5};
  int64_t *offs[3] = {bad_first, bad_order, bad_end};
  const char *want[3] = {"offsets[0] has to be 0", "embedding_bag: offsets must be non-decreasing",
                         "offsets[-1] can not be greater than input's length 3"};
  for (int c = 0; c < 3; c++) {
    nrt_launch l = nrt_test_launch(NRT_OP(EMBEDDING_BAG), NRT_FLOAT32, 3, S(2, 2, 3), 3, 3);
    nrt_test_operand_n(&l, 0, out, NRT_FLOAT32, S(8, 4), 2);
    nrt_test_operand_n(&l, 1, o2b, NRT_INT64, S(8), 1);
    nrt_test_operand_n(&l, 2, bsz, NRT_INT64, S(8), 1);
    nrt_test_operand_n(&l, 3, w, NRT_FLOAT32, S(8, 4), 2);
    nrt_test_operand_n(&l, 4, idx, NRT_INT64, S(8), 1);
    nrt_test_operand_n(&l, 5, offs[c], NRT_INT64, S(8), 1);
    l.params[1] = -1;
    l.aux[0] = 3;
    CHECK_STATUS(nrt_test_run(&l, 0), NRT_ERROR_INVALID_ARGUMENT);
    CHECK_PREFIX(want[c]);
  }
  int64_t ok_off[2] = {0, 1}, bad_idx[3] = {0, 3, 1};
  nrt_launch l = nrt_test_launch(NRT_OP(EMBEDDING_BAG), NRT_FLOAT32, 3, S(2, 2, 3), 3, 3);
  nrt_test_operand_n(&l, 0, out, NRT_FLOAT32, S(8, 4), 2);
  nrt_test_operand_n(&l, 1, o2b, NRT_INT64, S(8), 1);
  nrt_test_operand_n(&l, 2, bsz, NRT_INT64, S(8), 1);
  nrt_test_operand_n(&l, 3, w, NRT_FLOAT32, S(8, 4), 2);
  nrt_test_operand_n(&l, 4, bad_idx, NRT_INT64, S(8), 1);
  nrt_test_operand_n(&l, 5, ok_off, NRT_INT64, S(8), 1);
  l.params[1] = -1;
  l.aux[0] = 3;
  CHECK_STATUS(nrt_test_run(&l, 1), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_PREFIX("index 3 is out of bounds for dimension 0 with size 3");
  l.params[0] = NRT_BAG_MAX; /* MAX needs 4 outputs */
  l.operands[4].data = idx;
  CHECK_STATUS(nrt_test_run(&l, 0), NRT_ERROR_INVALID_ARGUMENT);
}

/* ---- distances ------------------------------------------------------------------- */

static double ref_dist(const double *a, const double *b, int64_t m, double p) {
  double acc = 0;
  for (int64_t i = 0; i < m; i++) {
    double d = fabs(a[i] - b[i]);
    if (p == 0) acc += d != 0;
    else if (isinf(p)) acc = d > acc ? d : acc;
    else acc += pow(d, p);
  }
  if (p == 0 || isinf(p)) return acc;
  return pow(acc, 1 / p);
}

/* Gradient by central differences of ref_dist, weighted by g. */
static double ref_grad(const double *a, const double *b, int64_t m, double p, int64_t k) {
  double t[64], u[64], h = 1e-6;
  memcpy(t, a, (size_t)m * sizeof(double));
  memcpy(u, a, (size_t)m * sizeof(double));
  t[k] += h;
  u[k] -= h;
  return (ref_dist(t, b, m, p) - ref_dist(u, b, m, p)) / (2 * h);
}

static const double ps[] = {0.0, 1.0, 2.0, 3.0, 1.5, 0.5, INFINITY};

/* x1 [B, P, M] and x2 [B, R, M] stored transposed in the last two dims
 * (non-contiguous), float32. */
static void test_cdist(void) {
  enum { B = 2, P = 5, R = 4, M = 6 };
  float x1[B * M * P], x2[B * M * R];
  for (int i = 0; i < B * M * P; i++) x1[i] = (float)nrt_test_urand();
  for (int i = 0; i < B * M * R; i++) x2[i] = (float)nrt_test_urand();
  /* make one pair identical: zero distance, zero gradient */
  for (int m = 0; m < M; m++) x2[(0 * M + m) * R + 1] = x1[(0 * M + m) * P + 2];
  const int64_t s1[3] = {M * P * 4, 4, P * 4}, s2[3] = {M * R * 4, 4, R * 4};
  for (size_t pi = 0; pi < sizeof ps / sizeof ps[0]; pi++) {
    double p = ps[pi];
    for (int ref = 0; ref < 2; ref++) {
      float dist[B * P * R], g[B * P * R], gx[B * P * M];
      nrt_launch l = nrt_test_launch(NRT_OP(CDIST), NRT_FLOAT32, 4, S(B, P, R, M), 1, 2);
      nrt_test_operand_n(&l, 0, dist, NRT_FLOAT32, S(P * R * 4, R * 4, 4), 3);
      nrt_test_operand_n(&l, 1, x1, NRT_FLOAT32, s1, 3);
      nrt_test_operand_n(&l, 2, x2, NRT_FLOAT32, s2, 3);
      l.scalars[0].f = p;
      CHECK_OK(nrt_test_run(&l, ref));
      for (int i = 0; i < B * P * R; i++) g[i] = (float)nrt_test_urand();
      nrt_launch lb = nrt_test_launch(NRT_OP(CDIST_BACKWARD), NRT_FLOAT32, 4, S(B, P, R, M), 1, 4);
      nrt_test_operand_n(&lb, 0, gx, NRT_FLOAT32, S(P * M * 4, M * 4, 4), 3);
      nrt_test_operand_n(&lb, 1, g, NRT_FLOAT32, S(P * R * 4, R * 4, 4), 3);
      nrt_test_operand_n(&lb, 2, x1, NRT_FLOAT32, s1, 3);
      nrt_test_operand_n(&lb, 3, x2, NRT_FLOAT32, s2, 3);
      nrt_test_operand_n(&lb, 4, dist, NRT_FLOAT32, S(P * R * 4, R * 4, 4), 3);
      lb.scalars[0].f = p;
      CHECK_OK(nrt_test_run(&lb, ref));
      for (int b = 0; b < B; b++)
        for (int i = 0; i < P; i++) {
          double a[M], acc[M] = {0};
          for (int m = 0; m < M; m++) a[m] = x1[(b * M + m) * P + i];
          for (int j = 0; j < R; j++) {
            double c[M];
            for (int m = 0; m < M; m++) c[m] = x2[(b * M + m) * R + j];
            double want = ref_dist(a, c, M, p);
            CHECK_NEAR(dist[(b * P + i) * R + j], want, 1e-5);
            if (p == 0 || want == 0) continue;
            for (int m = 0; m < M; m++) acc[m] += g[(b * P + i) * R + j] * ref_grad(a, c, M, p, m);
          }
          for (int m = 0; m < M; m++) CHECK_NEAR(gx[(b * P + i) * M + m], acc[m], 2e-3);
        }
    }
  }
}

/* bfloat16 / float16 inputs: compare with the double computation on the
 * rounded inputs, within the output dtype's rounding. */
static void test_cdist_half(void) {
  enum { P = 3, R = 7, M = 5 };
  uint16_t x1[P * M], x2[R * M], out[P * R];
  nrt_dtype dts[2] = {NRT_BFLOAT16, NRT_FLOAT16};
  for (int t = 0; t < 2; t++) {
    double a[P * M], c[R * M];
    for (int i = 0; i < P * M; i++) {
      float v = (float)nrt_test_urand();
      x1[i] = t == 0 ? nrt_f32_to_bf16(v) : nrt_f32_to_f16(v);
      a[i] = t == 0 ? nrt_bf16_to_f32(x1[i]) : nrt_f16_to_f32(x1[i]);
    }
    for (int i = 0; i < R * M; i++) {
      float v = (float)nrt_test_urand();
      x2[i] = t == 0 ? nrt_f32_to_bf16(v) : nrt_f32_to_f16(v);
      c[i] = t == 0 ? nrt_bf16_to_f32(x2[i]) : nrt_f16_to_f32(x2[i]);
    }
    for (int ref = 0; ref < 2; ref++) {
      nrt_launch l = nrt_test_launch(NRT_OP(CDIST), NRT_FLOAT32, 4, S(1, P, R, M), 1, 2);
      nrt_test_operand_n(&l, 0, out, dts[t], S(0, R * 2, 2), 3);
      nrt_test_operand_n(&l, 1, x1, dts[t], S(0, M * 2, 2), 3);
      nrt_test_operand_n(&l, 2, x2, dts[t], S(0, M * 2, 2), 3);
      l.compute_dtype = dts[t];
      l.scalars[0].f = 2.0;
      CHECK_OK(nrt_test_run(&l, ref));
      for (int i = 0; i < P; i++)
        for (int j = 0; j < R; j++) {
          double got = t == 0 ? nrt_bf16_to_f32(out[i * R + j]) : nrt_f16_to_f32(out[i * R + j]);
          CHECK_NEAR(got, ref_dist(a + i * M, c + j * M, M, 2.0), t == 0 ? 8e-3 : 1e-3);
        }
    }
  }
}

static void test_pdist(void) {
  enum { N = 6, M = 4, K = N * (N - 1) / 2 };
  float x[N * M];
  for (int i = 0; i < N * M; i++) x[i] = (float)nrt_test_urand();
  for (int m = 0; m < M; m++) x[4 * M + m] = x[1 * M + m]; /* rows 1 and 4 equal */
  for (size_t pi = 0; pi < sizeof ps / sizeof ps[0]; pi++) {
    double p = ps[pi];
    for (int ref = 0; ref < 2; ref++) {
      float d[K], g[K], gx[N * M];
      nrt_launch l = nrt_test_launch(NRT_OP(PDIST), NRT_FLOAT32, 2, S(N, M), 1, 1);
      nrt_test_operand_n(&l, 0, d, NRT_FLOAT32, S(4), 1);
      nrt_test_operand_n(&l, 1, x, NRT_FLOAT32, S(M * 4, 4), 2);
      l.scalars[0].f = p;
      CHECK_OK(nrt_test_run(&l, ref));
      for (int k = 0; k < K; k++) g[k] = (float)nrt_test_urand();
      nrt_launch lb = nrt_test_launch(NRT_OP(PDIST_BACKWARD), NRT_FLOAT32, 2, S(N, M), 1, 3);
      nrt_test_operand_n(&lb, 0, gx, NRT_FLOAT32, S(M * 4, 4), 2);
      nrt_test_operand_n(&lb, 1, g, NRT_FLOAT32, S(4), 1);
      nrt_test_operand_n(&lb, 2, x, NRT_FLOAT32, S(M * 4, 4), 2);
      nrt_test_operand_n(&lb, 3, d, NRT_FLOAT32, S(4), 1);
      lb.scalars[0].f = p;
      CHECK_OK(nrt_test_run(&lb, ref));
      double want_g[N * M] = {0};
      int k = 0;
      for (int i = 0; i < N; i++)
        for (int j = i + 1; j < N; j++, k++) {
          double a[M], b[M];
          for (int m = 0; m < M; m++) a[m] = x[i * M + m], b[m] = x[j * M + m];
          double want = ref_dist(a, b, M, p);
          CHECK_NEAR(d[k], want, 1e-5);
          if (p == 0 || want == 0) continue;
          for (int m = 0; m < M; m++) {
            want_g[i * M + m] += g[k] * ref_grad(a, b, M, p, m);
            want_g[j * M + m] += g[k] * ref_grad(b, a, M, p, m);
          }
        }
      for (int i = 0; i < N * M; i++) CHECK_NEAR(gx[i], want_g[i], 2e-3);
    }
  }
  /* a single row: no pairs, zero gradient */
  float one[3] = {1, 2, 3}, g1[3] = {7, 7, 7};
  nrt_launch lb = nrt_test_launch(NRT_OP(PDIST_BACKWARD), NRT_FLOAT32, 2, S(1, 3), 1, 3);
  nrt_test_operand_n(&lb, 0, g1, NRT_FLOAT32, S(12, 4), 2);
  nrt_test_operand_n(&lb, 1, one, NRT_FLOAT32, S(4), 1);
  nrt_test_operand_n(&lb, 2, one, NRT_FLOAT32, S(12, 4), 2);
  nrt_test_operand_n(&lb, 3, one, NRT_FLOAT32, S(4), 1);
  lb.scalars[0].f = 2.0;
  CHECK_OK(nrt_test_run(&lb, 0));
  CHECK(g1[0] == 0 && g1[1] == 0 && g1[2] == 0);
}

/* Larger shapes: the parallel fast path must equal the reference path. */
static void test_dist_large(void) {
  enum { P = 300, R = 200, M = 17 };
  float *x1 = malloc(P * M * 4), *x2 = malloc(R * M * 4), *d1 = malloc(P * R * 4), *d2 = malloc(P * R * 4);
  for (int i = 0; i < P * M; i++) x1[i] = (float)nrt_test_urand();
  for (int i = 0; i < R * M; i++) x2[i] = (float)nrt_test_urand();
  for (int ref = 0; ref < 2; ref++) {
    nrt_launch l = nrt_test_launch(NRT_OP(CDIST), NRT_FLOAT32, 4, S(1, P, R, M), 1, 2);
    nrt_test_operand_n(&l, 0, ref ? d2 : d1, NRT_FLOAT32, S(0, R * 4, 4), 3);
    nrt_test_operand_n(&l, 1, x1, NRT_FLOAT32, S(0, M * 4, 4), 3);
    nrt_test_operand_n(&l, 2, x2, NRT_FLOAT32, S(0, M * 4, 4), 3);
    l.scalars[0].f = 1.5;
    CHECK_OK(nrt_test_run(&l, ref));
  }
  CHECK(memcmp(d1, d2, P * R * 4) == 0);
  free(x1), free(x2), free(d1), free(d2);
}

static void test_dist_errors(void) {
  float x[4] = {0}, o[4];
  int64_t xi[4] = {0};
  nrt_launch l = nrt_test_launch(NRT_OP(PDIST), NRT_FLOAT32, 2, S(2, 2), 1, 1);
  nrt_test_operand_n(&l, 0, o, NRT_FLOAT32, S(4), 1);
  nrt_test_operand_n(&l, 1, x, NRT_FLOAT32, S(8, 4), 2);
  l.scalars[0].f = -1.0;
  CHECK_STATUS(nrt_test_run(&l, 0), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_PREFIX("PDIST: p value for the p-norm must be >= 0");
  l.scalars[0].f = 2.0;
  nrt_test_operand_n(&l, 1, xi, NRT_INT64, S(16, 8), 2);
  CHECK_STATUS(nrt_test_run(&l, 0), NRT_ERROR_UNSUPPORTED);
  nrt_launch c = nrt_test_launch(NRT_OP(CDIST), NRT_FLOAT32, 3, S(1, 2, 2), 1, 2);
  nrt_test_operand_n(&c, 0, o, NRT_FLOAT32, S(0, 8, 4), 3);
  nrt_test_operand_n(&c, 1, x, NRT_FLOAT32, S(0, 8, 4), 3);
  nrt_test_operand_n(&c, 2, x, NRT_FLOAT32, S(0, 8, 4), 3);
  CHECK_STATUS(nrt_test_run(&c, 0), NRT_ERROR_INVALID_ARGUMENT);
  /* empty: M = 0 gives zero distances */
  nrt_launch e = nrt_test_launch(NRT_OP(CDIST), NRT_FLOAT32, 4, S(1, 2, 2, 0), 1, 2);
  nrt_test_operand_n(&e, 0, o, NRT_FLOAT32, S(0, 8, 4), 3);
  nrt_test_operand_n(&e, 1, x, NRT_FLOAT32, S(0, 0, 4), 3);
  nrt_test_operand_n(&e, 2, x, NRT_FLOAT32, S(0, 0, 4), 3);
  e.scalars[0].f = 2.0;
  o[0] = o[1] = o[2] = o[3] = 9;
  CHECK_OK(nrt_test_run(&e, 0));
  CHECK(o[0] == 0 && o[1] == 0 && o[2] == 0 && o[3] == 0);
}

/* ---- SEGMENT_REDUCE(_BACKWARD) ------------------------------------------------------ */

/* A segmented reduction in double, ATen's rules, for data [O, L, I]
 * (contiguous in the test's own arrays) and starts [O][S + 1]. */
static double seg_ref_forward(int red, const double *x, int64_t L, int64_t I, int64_t o, int64_t a, int64_t b,
                              int64_t k, int has_init, double init) {
  double acc = has_init ? init
               : red == NRT_SEG_MAX ? -INFINITY
               : red == NRT_SEG_MIN ? INFINITY
               : red == NRT_SEG_PROD ? 1.0 : 0.0;
  for (int64_t j = a; j < b; j++) {
    double v = x[(o * L + j) * I + k];
    switch (red) {
    case NRT_SEG_SUM: case NRT_SEG_MEAN: acc += v; break;
    case NRT_SEG_PROD: acc *= v; break;
    case NRT_SEG_MAX: if (isnan(v) || v > acc) acc = v; break;
    case NRT_SEG_MIN: if (isnan(v) || v < acc) acc = v; break;
    }
  }
  if (red == NRT_SEG_MEAN) {
    if (b == a && !has_init) acc = NAN;
    else if (b > a && !isnan(acc)) acc /= (double)(b - a);
  }
  return acc;
}

/* O x S segments over [O, L, I] float32 data with inner stride 2; bounds as
 * lengths (int32) or offsets (int64). Checks forward and backward against
 * the double reference, in fast or reference mode. */
static void seg_case(int red, int64_t O, int64_t S, int64_t I, int64_t L, const int64_t *starts, int use_lengths,
                     int has_init, double init, const float *special, int reference) {
  int64_t nd = O * L * I, no = O * S * I;
  float *x = calloc((size_t)(2 * nd + 1), sizeof(float));
  double *xd = calloc((size_t)(nd + 1), sizeof(double));
  for (int64_t i = 0; i < nd; i++) {
    float sp = special ? special[i % 7] : 99.0f, v = sp == 99.0f ? (float)(nrt_test_urand() * 1.5) : sp;
    x[2 * i] = v;
    xd[i] = v;
  }
  float *out = calloc((size_t)(no + 1), sizeof(float)), *g = calloc((size_t)(no + 1), sizeof(float));
  float *gd = calloc((size_t)(nd + 1), sizeof(float));
  for (int64_t i = 0; i < no; i++) g[i] = (float)nrt_test_urand();
  int32_t *len32 = calloc((size_t)(O * S + 1), sizeof(int32_t));
  int64_t *off = calloc((size_t)(O * (S + 1) + 1), sizeof(int64_t));
  for (int64_t o = 0; o < O; o++) {
    for (int64_t s = 0; s < S; s++) len32[o * S + s] = (int32_t)(starts[o * (S + 1) + s + 1] - starts[o * (S + 1) + s]);
    for (int64_t s = 0; s <= S; s++) off[o * (S + 1) + s] = starts[o * (S + 1) + s];
  }
  nrt_launch l = nrt_test_launch(NRT_OP(SEGMENT_REDUCE), NRT_FLOAT32, 4, S(O, S, I, L), 1, 2);
  nrt_test_operand_n(&l, 0, out, NRT_FLOAT32, S(S * I * 4, I * 4, 4), 3);
  nrt_test_operand_n(&l, 1, x, NRT_FLOAT32, S(L * I * 8, I * 8, 8), 3);
  if (use_lengths)
    nrt_test_operand_n(&l, 2, len32, NRT_INT32, S(S * 4, 4), 2);
  else
    nrt_test_operand_n(&l, 2, off, NRT_INT64, S((S + 1) * 8, 8), 2);
  l.params[0] = red;
  l.params[1] = use_lengths;
  l.params[2] = has_init;
  l.scalars[0].f = init;
  CHECK_OK(nrt_test_run(&l, reference));
  for (int64_t o = 0; o < O; o++)
    for (int64_t s = 0; s < S; s++)
      for (int64_t k = 0; k < I; k++) {
        double want = seg_ref_forward(red, xd, L, I, o, starts[o * (S + 1) + s], starts[o * (S + 1) + s + 1], k,
                                      has_init, init);
        double got = out[(o * S + s) * I + k];
        if (!nrt_test_near(got, want, 1e-5)) {
          fprintf(stderr, "seg %d fwd (o %lld s %lld k %lld): %g want %g\n", red, (long long)o, (long long)s,
                  (long long)k, got, want);
          nrt_test_failures++;
        }
      }
  /* backward: the reference follows ATen's rules element by element */
  nrt_launch bl = nrt_test_launch(NRT_OP(SEGMENT_REDUCE_BACKWARD), NRT_FLOAT32, 4, S(O, S, I, L), 1, 4);
  for (int64_t i = 0; i < nd; i++) gd[i] = 123.0f; /* must all be overwritten */
  nrt_test_operand_n(&bl, 0, gd, NRT_FLOAT32, S(L * I * 4, I * 4, 4), 3);
  nrt_test_operand_n(&bl, 1, g, NRT_FLOAT32, S(S * I * 4, I * 4, 4), 3);
  nrt_test_operand_n(&bl, 2, out, NRT_FLOAT32, S(S * I * 4, I * 4, 4), 3);
  bl.operands[3] = l.operands[1];
  bl.operands[4] = l.operands[2];
  for (int p = 0; p < 3; p++) bl.params[p] = l.params[p];
  bl.scalars[0] = l.scalars[0];
  CHECK_OK(nrt_test_run(&bl, reference));
  for (int64_t o = 0; o < O; o++) {
    const int64_t *st = starts + o * (S + 1);
    for (int64_t j = 0; j < L; j++)
      for (int64_t k = 0; k < I; k++) {
        double want = 0.0;
        for (int64_t s = 0; s < S; s++) {
          if (j < st[s] || j >= st[s + 1]) continue;
          double gv = g[(o * S + s) * I + k], y = out[(o * S + s) * I + k], v = xd[(o * L + j) * I + k];
          int64_t len = st[s + 1] - st[s];
          if (red == NRT_SEG_SUM) want = gv;
          else if (red == NRT_SEG_MEAN) want = gv / (double)len;
          else if (red == NRT_SEG_MAX || red == NRT_SEG_MIN) {
            int ties = 0;
            for (int64_t m = st[s]; m < st[s + 1]; m++) {
              double w = xd[(o * L + m) * I + k];
              if (isnan(w) || w == y) ties++;
            }
            want = (isnan(v) || v == y) ? (ties >= 2 && gv > 0 ? gv / ties : gv) : 0.0;
          } else {
            double excl = has_init ? init : 1.0;
            for (int64_t m = st[s]; m < st[s + 1]; m++)
              if (m != j) excl *= xd[(o * L + m) * I + k];
            want = gv * excl;
          }
        }
        double got = gd[(o * L + j) * I + k];
        if (!nrt_test_near(got, want, 1e-4)) {
          fprintf(stderr, "seg %d bwd (o %lld j %lld k %lld): %g want %g\n", red, (long long)o, (long long)j,
                  (long long)k, got, want);
          nrt_test_failures++;
        }
      }
  }
  free(x);
  free(xd);
  free(out);
  free(g);
  free(gd);
  free(len32);
  free(off);
}

static void test_segment_reduce(void) {
  /* O = 2 rows, S = 4 segments over L = 8 (empty segments; row 1 leaves a
   * row before and after its segments, as offsets and unsafe lengths may) */
  const int64_t st[] = {0, 0, 3, 3, 8, /* row 1 */ 1, 2, 2, 5, 6};
  const int64_t st_len[] = {0, 0, 3, 3, 8, /* lengths start at 0 */ 0, 1, 1, 4, 5};
  const float ties[7] = {2.0f, 2.0f, 99.0f, 0.0f, 99.0f, NAN, 2.0f}; /* 99: random */
  for (int ref = 0; ref < 2; ref++) {
    for (int red = 0; red <= NRT_SEG_PROD; red++) {
      seg_case(red, 2, 4, 3, 8, st, 0, 0, 0.0, NULL, ref);
      seg_case(red, 2, 4, 3, 8, st_len, 1, 0, 0.0, NULL, ref);
      seg_case(red, 2, 4, 3, 8, st, 0, 1, 2.0, NULL, ref);
      seg_case(red, 2, 4, 3, 8, st_len, 1, 1, -1.5, NULL, ref);
      seg_case(red, 2, 4, 3, 8, st, 0, 0, 0.0, ties, ref); /* ties, zeros and NaN */
      seg_case(red, 2, 4, 3, 8, st, 0, 1, 0.5, ties, ref);
      seg_case(red, 1, 0, 3, 4, S(0), 0, 0, 0.0, NULL, ref);  /* no segments: zero gradient */
      seg_case(red, 1, 2, 2, 0, S(0, 0, 0), 1, 0, 0.0, NULL, ref); /* no data */
    }
  }
}

/* bfloat16 data and float16 output: loads widen, stores round. Fast and
 * reference paths run the same float arithmetic, so they agree exactly. */
static void test_segment_reduce_half(void) {
  enum { O = 3, S = 5, I = 37, L = 40 };
  uint16_t x[O * L * I], out[2][O * S * I], gd[2][O * L * I], g[O * S * I];
  int64_t len[O * S];
  for (int i = 0; i < O * L * I; i++) x[i] = nrt_f32_to_bf16((float)nrt_test_urand());
  for (int i = 0; i < O * S * I; i++) g[i] = nrt_f32_to_f16((float)nrt_test_urand());
  for (int o = 0; o < O; o++) {
    int left = L;
    for (int s = 0; s < S; s++) {
      len[o * S + s] = s == S - 1 ? left : (int64_t)(nrt_test_rand_u64() % (uint64_t)(left / 2 + 1));
      left -= (int)len[o * S + s];
    }
  }
  for (int red = 0; red <= NRT_SEG_PROD; red++) {
    for (int ref = 0; ref < 2; ref++) {
      nrt_launch l = nrt_test_launch(NRT_OP(SEGMENT_REDUCE), NRT_FLOAT32, 4, S(O, S, I, L), 1, 2);
      nrt_test_operand_n(&l, 0, out[ref], NRT_FLOAT16, S(S * I * 2, I * 2, 2), 3);
      nrt_test_operand_n(&l, 1, x, NRT_BFLOAT16, S(L * I * 2, I * 2, 2), 3);
      nrt_test_operand_n(&l, 2, len, NRT_INT64, S(S * 8, 8), 2);
      l.params[0] = red;
      l.params[1] = 1;
      CHECK_OK(nrt_test_run(&l, ref));
      nrt_launch bl = nrt_test_launch(NRT_OP(SEGMENT_REDUCE_BACKWARD), NRT_FLOAT32, 4, S(O, S, I, L), 1, 4);
      nrt_test_operand_n(&bl, 0, gd[ref], NRT_BFLOAT16, S(L * I * 2, I * 2, 2), 3);
      nrt_test_operand_n(&bl, 1, g, NRT_FLOAT16, S(S * I * 2, I * 2, 2), 3);
      nrt_test_operand_n(&bl, 2, out[0], NRT_FLOAT16, S(S * I * 2, I * 2, 2), 3);
      bl.operands[3] = l.operands[1];
      bl.operands[4] = l.operands[2];
      bl.params[0] = red;
      bl.params[1] = 1;
      CHECK_OK(nrt_test_run(&bl, ref));
    }
    CHECK(memcmp(out[0], out[1], sizeof out[0]) == 0);
    CHECK(memcmp(gd[0], gd[1], sizeof gd[0]) == 0);
    /* spot-check the sum against a double reduction */
    if (red == NRT_SEG_SUM) {
      for (int o = 0; o < O; o++) {
        int64_t a = 0;
        for (int s = 0; s < S; s++) {
          for (int k = 0; k < I; k++) {
            double acc = 0.0;
            for (int64_t j = a; j < a + len[o * S + s]; j++) acc += nrt_bf16_to_f32(x[(o * L + j) * I + k]);
            CHECK_NEAR(nrt_f16_to_f32(out[0][(o * S + s) * I + k]), acc, 2e-3);
          }
          a += len[o * S + s];
        }
      }
    }
  }
}

static void test_segment_reduce_errors(void) {
  float x[8] = {0}, out[4];
  nrt_launch l = nrt_test_launch(NRT_OP(SEGMENT_REDUCE), NRT_FLOAT32, 4, S(1, 2, 1, 4), 1, 2);
  nrt_test_operand_n(&l, 0, out, NRT_FLOAT32, S(8, 4, 4), 3);
  nrt_test_operand_n(&l, 1, x, NRT_FLOAT32, S(16, 4, 4), 3);
  int64_t bad_len[2] = {3, -1};
  nrt_test_operand_n(&l, 2, bad_len, NRT_INT64, S(16, 8), 2);
  l.params[1] = 1;
  CHECK_STATUS(nrt_test_run(&l, 0), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_PREFIX("segment_reduce(): lengths contains negative value");
  int64_t long_len[2] = {3, 2};
  l.operands[2].data = long_len;
  CHECK_STATUS(nrt_test_run(&l, 0), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_PREFIX("segment_reduce(): the lengths of row 0 sum past");
  int64_t dec[3] = {0, 3, 2};
  l.operands[2].data = dec;
  l.params[1] = 0;
  CHECK_STATUS(nrt_test_run(&l, 0), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_PREFIX("segment_reduce(): offsets must be non-decreasing");
  int64_t past[3] = {0, 3, 5};
  l.operands[2].data = past;
  CHECK_STATUS(nrt_test_run(&l, 1), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_PREFIX("segment_reduce(): offset 5 is out of range");
  int64_t ok[3] = {1, 1, 4};
  l.operands[2].data = ok;
  l.params[0] = 9;
  CHECK_STATUS(nrt_test_run(&l, 0), NRT_ERROR_INVALID_ARGUMENT);
  l.params[0] = NRT_SEG_SUM;
  l.operands[1].dtype = NRT_INT32;
  CHECK_STATUS(nrt_test_run(&l, 0), NRT_ERROR_UNSUPPORTED);
  l.operands[1].dtype = NRT_FLOAT32;
  l.operands[2].dtype = NRT_FLOAT32;
  CHECK_STATUS(nrt_test_run(&l, 0), NRT_ERROR_UNSUPPORTED);
  l.operands[2].dtype = NRT_INT64;
  CHECK_OK(nrt_test_run(&l, 0));
  CHECK(out[0] == 0.0f && out[1] == 0.0f);
}

/* ---- CTC_LOSS(_BACKWARD) ------------------------------------------------------------- */

/* Brute force over every path of T frames and C classes: the probability
 * of the paths that collapse (merge repeats, drop blanks) to the target,
 * and for each (t, c) the part of it whose path has c at t. */
static double ctc_brute(const double *lp, int64_t T, int64_t C, int64_t blank, const int64_t *tgt, int64_t L,
                        double *by_tc) {
  int64_t total = 1;
  for (int64_t t = 0; t < T; t++) total *= C;
  for (int64_t i = 0; i < T * C; i++) by_tc[i] = 0.0;
  double p = 0.0;
  int64_t path[16], out[16];
  for (int64_t code = 0; code < total; code++) {
    int64_t rest = code, n = 0;
    for (int64_t t = 0; t < T; t++) {
      path[t] = rest % C;
      rest /= C;
    }
    for (int64_t t = 0; t < T; t++)
      if (path[t] != blank && (t == 0 || path[t] != path[t - 1])) out[n++] = path[t];
    if (n != L) continue;
    int match = 1;
    for (int64_t k = 0; k < L; k++) match &= out[k] == tgt[k];
    if (!match) continue;
    double lpp = 0.0;
    for (int64_t t = 0; t < T; t++) lpp += lp[t * C + path[t]];
    double pp = exp(lpp);
    p += pp;
    for (int64_t t = 0; t < T; t++) by_tc[t * C + path[t]] += pp;
  }
  return p;
}

/* One batch of B = 3 sequences in [T, B, C] float32 log-probs. Targets
 * padded [B, Smax] int64, or concatenated int32 (concat = 1). */
static void ctc_case(int64_t T, int64_t C, int64_t blank, const int64_t *in_len, const int64_t *tg_len,
                     const int64_t *tgt_padded, int64_t Smax, int concat, int zero_inf, int reference) {
  enum { B = 3 };
  int64_t W = 2 * Smax + 1;
  float *lp = malloc((size_t)(T * B * C + 1) * sizeof(float));
  for (int64_t t = 0; t < T; t++)
    for (int64_t b = 0; b < B; b++) {
      double z = 0.0, v[16];
      for (int64_t c = 0; c < C; c++) z += exp(v[c] = nrt_test_urand());
      for (int64_t c = 0; c < C; c++) lp[(t * B + b) * C + c] = (float)(v[c] - log(z));
    }
  int64_t table[B * 4];
  int32_t cat[64];
  int64_t pos = 0;
  for (int64_t b = 0; b < B; b++) {
    table[b * 4 + NRT_CTC_INPUT_LEN] = in_len[b];
    table[b * 4 + NRT_CTC_TARGET_LEN] = tg_len[b];
    table[b * 4 + NRT_CTC_TARGET_ROW] = concat ? 0 : b;
    table[b * 4 + NRT_CTC_TARGET_COL] = concat ? pos : 0;
    for (int64_t k = 0; k < tg_len[b]; k++) cat[pos + k] = (int32_t)tgt_padded[b * Smax + k];
    pos += tg_len[b];
  }
  float *nll = malloc(B * sizeof(float)), *alpha = malloc((size_t)(B * T * W + 1) * sizeof(float));
  float *glp = malloc((size_t)(T * B * C + 1) * sizeof(float)), grad[B] = {0.5f, -1.0f, 2.0f};
  nrt_launch l = nrt_test_launch(NRT_OP(CTC_LOSS), NRT_FLOAT32, 4, S(T, B, C, Smax), 2, 3);
  nrt_test_operand_n(&l, 0, nll, NRT_FLOAT32, S(4), 1);
  nrt_test_operand_n(&l, 1, alpha, NRT_FLOAT32, S(T * W * 4, W * 4, 4), 3);
  nrt_test_operand_n(&l, 2, lp, NRT_FLOAT32, S(B * C * 4, C * 4, 4), 3);
  if (concat) {
    nrt_test_operand_n(&l, 3, cat, NRT_INT32, S(0, 4), 2);
    l.aux[0] = 1;
    l.aux[1] = pos;
  } else {
    nrt_test_operand_n(&l, 3, (void *)tgt_padded, NRT_INT64, S(Smax * 8, 8), 2);
    l.aux[0] = B;
    l.aux[1] = Smax;
  }
  nrt_test_operand_n(&l, 4, table, NRT_INT64, S(32, 8), 2);
  l.params[0] = blank;
  CHECK_OK(nrt_test_run(&l, reference));
  nrt_launch bl = nrt_test_launch(NRT_OP(CTC_LOSS_BACKWARD), NRT_FLOAT32, 4, S(T, B, C, Smax), 1, 6);
  nrt_test_operand_n(&bl, 0, glp, NRT_FLOAT32, S(B * C * 4, C * 4, 4), 3);
  nrt_test_operand_n(&bl, 1, grad, NRT_FLOAT32, S(4), 1);
  bl.operands[2] = l.operands[2];
  bl.operands[3] = l.operands[3];
  bl.operands[4] = l.operands[4];
  nrt_test_operand_n(&bl, 5, nll, NRT_FLOAT32, S(4), 1);
  bl.operands[6] = l.operands[1];
  bl.params[0] = blank;
  bl.params[1] = zero_inf;
  bl.aux[0] = l.aux[0];
  bl.aux[1] = l.aux[1];
  CHECK_OK(nrt_test_run(&bl, reference));
  double lpb[16 * 16], by_tc[16 * 16];
  for (int64_t b = 0; b < B; b++) {
    int64_t Tb = in_len[b];
    for (int64_t t = 0; t < Tb; t++)
      for (int64_t c = 0; c < C; c++) lpb[t * C + c] = lp[(t * B + b) * C + c];
    double p = ctc_brute(lpb, Tb, C, blank, tgt_padded + b * Smax, tg_len[b], by_tc);
    double want = -log(p);
    if (isinf(want)) CHECK(nll[b] == INFINITY);
    else CHECK_NEAR(nll[b], want, 1e-5);
    for (int64_t t = 0; t < T; t++)
      for (int64_t c = 0; c < C; c++) {
        double got = glp[(t * B + b) * C + c], gw;
        if (t >= Tb || (zero_inf && isinf(want))) gw = 0.0;
        else if (isinf(want)) gw = NAN; /* 0 / 0, as ATen */
        else gw = (exp(lpb[t * C + c]) - by_tc[t * C + c] / p) * grad[b];
        if (!nrt_test_near(got, gw, 1e-4)) {
          fprintf(stderr, "ctc grad b %lld t %lld c %lld: %g want %g\n", (long long)b, (long long)t, (long long)c,
                  got, gw);
          nrt_test_failures++;
        }
      }
    /* frames past the input length hold -inf in log_alpha */
    for (int64_t t = Tb; t < T; t++)
      for (int64_t s = 0; s < W; s++) CHECK(alpha[(b * T + t) * W + s] == -INFINITY);
  }
  free(lp);
  free(nll);
  free(alpha);
  free(glp);
}

static void test_ctc(void) {
  /* sequence 0: plain; 1: a repeated label (needs a blank between);
   * 2: shorter input, empty-ish targets */
  const int64_t tg[3 * 3] = {1, 2, 1, 2, 2, 0, 1, 1, 1};
  for (int ref = 0; ref < 2; ref++) {
    for (int concat = 0; concat < 2; concat++) {
      ctc_case(6, 3, 0, S(6, 5, 4), S(3, 2, 1), tg, 3, concat, 0, ref);
      ctc_case(6, 3, 0, S(6, 0, 6), S(2, 0, 0), tg, 3, concat, 0, ref); /* no frames / empty target */
      ctc_case(5, 4, 3, S(5, 3, 2), S(3, 2, 2), tg, 3, concat, 0, ref); /* blank = 3; 1,1 in 2 frames is impossible */
      ctc_case(5, 4, 3, S(5, 3, 2), S(3, 2, 2), tg, 3, concat, 1, ref); /* the same with zero_infinity */
      ctc_case(4, 3, 0, S(4, 4, 4), S(3, 2, 3), tg, 3, concat, 0, ref); /* 1,1,1 needs 5 frames: inf */
    }
  }
}

static void test_ctc_errors(void) {
  float lp[2 * 1 * 3] = {0}, nll[1], alpha[2 * 3];
  int64_t tgt[1] = {3}, table[4] = {2, 1, 0, 0};
  nrt_launch l = nrt_test_launch(NRT_OP(CTC_LOSS), NRT_FLOAT32, 4, S(2, 1, 3, 1), 2, 3);
  nrt_test_operand_n(&l, 0, nll, NRT_FLOAT32, S(4), 1);
  nrt_test_operand_n(&l, 1, alpha, NRT_FLOAT32, S(24, 12, 4), 3);
  nrt_test_operand_n(&l, 2, lp, NRT_FLOAT32, S(12, 12, 4), 3);
  nrt_test_operand_n(&l, 3, tgt, NRT_INT64, S(8, 8), 2);
  nrt_test_operand_n(&l, 4, table, NRT_INT64, S(32, 8), 2);
  l.aux[0] = 1;
  l.aux[1] = 1;
  CHECK_STATUS(nrt_test_run(&l, 0), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_PREFIX("ctc_loss: target 3 of sequence 0 is out of range [0, 3)");
  tgt[0] = 1;
  table[0] = 3;
  CHECK_STATUS(nrt_test_run(&l, 0), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_PREFIX("ctc_loss: input length 3");
  table[0] = 2;
  table[3] = 1; /* column 1 of a one-column targets tensor */
  CHECK_STATUS(nrt_test_run(&l, 0), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_PREFIX("ctc_loss: the targets of sequence 0 lie outside");
  table[3] = 0;
  l.params[0] = 3;
  CHECK_STATUS(nrt_test_run(&l, 0), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_PREFIX("blank must be in label range");
  l.params[0] = 0;
  CHECK_OK(nrt_test_run(&l, 0));
  CHECK_NEAR(nll[0], -log(3.0), 1e-5); /* log-probs 0: the paths 1b, b1 and 11 weigh 1 each */
}

/* Distances with NaN (torch 2.13 CPU results, pasted): x1 = [[nan, 1, 5],
 * [0, 0, 0]], x2 = [[0, 0, 0], [1, 1, 1]]. p = 0 counts min(ceil|d|, 1), so
 * a NaN difference is NaN; cdist's p = inf folds with std::max from 0 and
 * never takes a NaN (5, 4), pdist's vectorised maximum does (NaN); the
 * backward adds ATen's term for every pair, so the NaN column is NaN. */
static void test_dist_nan(void) {
  const float x1[6] = {NAN, 1, 5, 0, 0, 0}, x2[6] = {0, 0, 0, 1, 1, 1}, ones[4] = {1, 1, 1, 1};
  const double ps_nan[] = {0.0, 1.0, 2.0, INFINITY};
  /* dist [2, 2] and grad_x1 [2, 3] per p; NAN where the CPU has NaN */
  const double want_d[4][4] = {{NAN, NAN, 0, 3}, {NAN, NAN, 0, 3}, {NAN, NAN, 0, 1.7320507764816284}, {5, 4, 0, 1}};
  const double want_g[4][6] = {{0, 0, 0, 0, 0, 0},
                               {NAN, 1, 2, -1, -1, -1},
                               {NAN, NAN, NAN, -0.5773502588272095, -0.5773502588272095, -0.5773502588272095},
                               {NAN, 0, 2, -1, -1, -1}};
  for (size_t pi = 0; pi < 4; pi++)
    for (int ref = 0; ref < 2; ref++) {
      float d[4], gx[6];
      nrt_launch l = nrt_test_launch(NRT_OP(CDIST), NRT_FLOAT32, 4, S(1, 2, 2, 3), 1, 2);
      nrt_test_operand_n(&l, 0, d, NRT_FLOAT32, S(0, 8, 4), 3);
      nrt_test_operand_n(&l, 1, x1, NRT_FLOAT32, S(0, 12, 4), 3);
      nrt_test_operand_n(&l, 2, x2, NRT_FLOAT32, S(0, 12, 4), 3);
      l.scalars[0].f = ps_nan[pi];
      CHECK_OK(nrt_test_run(&l, ref));
      for (int i = 0; i < 4; i++)
        CHECK(isnan(want_d[pi][i]) ? isnan(d[i]) : fabs(d[i] - want_d[pi][i]) <= 1e-6);
      nrt_launch lb = nrt_test_launch(NRT_OP(CDIST_BACKWARD), NRT_FLOAT32, 4, S(1, 2, 2, 3), 1, 4);
      nrt_test_operand_n(&lb, 0, gx, NRT_FLOAT32, S(0, 12, 4), 3);
      nrt_test_operand_n(&lb, 1, ones, NRT_FLOAT32, S(0, 8, 4), 3);
      nrt_test_operand_n(&lb, 2, x1, NRT_FLOAT32, S(0, 12, 4), 3);
      nrt_test_operand_n(&lb, 3, x2, NRT_FLOAT32, S(0, 12, 4), 3);
      nrt_test_operand_n(&lb, 4, d, NRT_FLOAT32, S(0, 8, 4), 3);
      lb.scalars[0].f = ps_nan[pi];
      CHECK_OK(nrt_test_run(&lb, ref));
      for (int i = 0; i < 6; i++)
        CHECK(isnan(want_g[pi][i]) ? isnan(gx[i]) : fabs(gx[i] - want_g[pi][i]) <= 1e-6);
    }
  /* pdist p = inf of the four rows: [nan, nan, nan, 0, 1, 1] */
  const float x[12] = {NAN, 1, 5, 0, 0, 0, 0, 0, 0, 1, 1, 1};
  const double want_p[6] = {NAN, NAN, NAN, 0, 1, 1};
  for (int ref = 0; ref < 2; ref++) {
    float d[6];
    nrt_launch l = nrt_test_launch(NRT_OP(PDIST), NRT_FLOAT32, 2, S(4, 3), 1, 1);
    nrt_test_operand_n(&l, 0, d, NRT_FLOAT32, S(4), 1);
    nrt_test_operand_n(&l, 1, x, NRT_FLOAT32, S(12, 4), 2);
    l.scalars[0].f = INFINITY;
    CHECK_OK(nrt_test_run(&l, ref));
    for (int i = 0; i < 6; i++) CHECK(isnan(want_p[i]) ? isnan(d[i]) : d[i] == want_p[i]);
  }
}

/* float32 CDIST in float32 steps, as the CPU: 1e20 squared overflows to
 * inf, 1e-30 squared underflows to 0; with m = 5 the fifth square is fused
 * into a multiply-add with the sum of the first four (fmaf). */
static void test_cdist_float_steps(void) {
  float x1[3 * 5] = {1e20f, 0, 0, 0, 0, 1e-30f, 0, 0, 0, 0, 1.1f, 2.3f, 0.7f, 1.9f, 1.3f}, x2[5] = {0}, d[3];
  nrt_launch l = nrt_test_launch(NRT_OP(CDIST), NRT_FLOAT32, 4, S(1, 3, 1, 5), 1, 2);
  nrt_test_operand_n(&l, 0, d, NRT_FLOAT32, S(0, 4, 4), 3);
  nrt_test_operand_n(&l, 1, x1, NRT_FLOAT32, S(0, 20, 4), 3);
  nrt_test_operand_n(&l, 2, x2, NRT_FLOAT32, S(0, 20, 4), 3);
  l.scalars[0].f = 2.0;
  for (int ref = 0; ref < 2; ref++) {
    CHECK_OK(nrt_test_run(&l, ref));
    float acc = 0;
    for (int m = 0; m < 4; m++) acc += x1[10 + m] * x1[10 + m];
    acc = fmaf(x1[14], x1[14], acc);
    CHECK(isinf(d[0]) && d[1] == 0.0f && d[2] == sqrtf(acc));
  }
}

/* ---- MULTI_MARGIN_LOSS(_BACKWARD) ----------------------------------------------------- */

/* ATen's order written with float variables (the kernel rounds doubles). */
static float mm_ref_row(const float *x, int64_t C, int64_t y, int p, float margin, const float *w) {
  float xy = x[y], sum = 0;
  for (int64_t d = 0; d < C; d++) {
    if (d == y) continue;
    float z = margin - xy + x[d];
    if (z > 0) {
      float h = p == 1 ? z : z * z;
      if (w) h *= w[y];
      sum += h;
    }
  }
  return sum / (float)C;
}

static void test_multi_margin(void) {
  enum { N = 6, C = 5 };
  const float edge[] = {3.4e38f, -3.4e38f, 1e18f, -1e18f, 1.0f, -0.5f, 0.0f, NAN, INFINITY};
  float xt[C * N], x[N * C], w[C], g[N];
  int64_t t[N] = {0, 4, 2, 2, 1, 3};
  for (int i = 0; i < N * C; i++) {
    double u = nrt_test_urand();
    x[i] = u < 0.4 ? edge[i % 9] : (float)(4 * u - 2);
  }
  for (int n = 0; n < N; n++)
    for (int c = 0; c < C; c++) xt[c * N + n] = x[n * C + c]; /* x stored transposed */
  for (int c = 0; c < C; c++) w[c] = (float)(0.5 + nrt_test_urand());
  for (int n = 0; n < N; n++) g[n] = (float)(nrt_test_urand() - 0.5);
  for (int ref = 0; ref < 2; ref++)
    for (int p = 1; p <= 2; p++)
      for (int red = NRT_LOSS_NONE; red <= NRT_LOSS_SUM; red++)
        for (int weighted = 0; weighted < 2; weighted++) {
          float out[N], gx[N * C];
          nrt_launch l = nrt_test_launch(NRT_OP(MULTI_MARGIN_LOSS), NRT_FLOAT32, 2, S(N, C), 1, 2 + weighted);
          nrt_test_operand_n(&l, 0, out, NRT_FLOAT32, S(red == NRT_LOSS_NONE ? 4 : 0), 1);
          nrt_test_operand_n(&l, 1, xt, NRT_FLOAT32, S(4, N * 4), 2);
          nrt_test_operand_n(&l, 2, t, NRT_INT64, S(8), 1);
          if (weighted) nrt_test_operand_n(&l, 3, w, NRT_FLOAT32, S(4), 1);
          l.params[0] = red;
          l.params[1] = p;
          l.scalars[0].f = 0.7;
          CHECK_OK(nrt_test_run(&l, ref));
          double acc = 0;
          for (int n = 0; n < N; n++) {
            float want = mm_ref_row(x + n * C, C, t[n], p, 0.7f, weighted ? w : NULL);
            if (red == NRT_LOSS_NONE) CHECK(memcmp(&out[n], &want, 4) == 0);
            acc += want;
          }
          if (red == NRT_LOSS_MEAN) acc /= N;
          if (red != NRT_LOSS_NONE) CHECK(out[0] == (float)acc || (isnan(out[0]) && isnan(acc)));
          nrt_launch lb =
              nrt_test_launch(NRT_OP(MULTI_MARGIN_LOSS_BACKWARD), NRT_FLOAT32, 2, S(N, C), 1, 3 + weighted);
          nrt_test_operand_n(&lb, 0, gx, NRT_FLOAT32, S(C * 4, 4), 2);
          nrt_test_operand_n(&lb, 1, g, NRT_FLOAT32, S(red == NRT_LOSS_NONE ? 4 : 0), 1);
          nrt_test_operand_n(&lb, 2, xt, NRT_FLOAT32, S(4, N * 4), 2);
          nrt_test_operand_n(&lb, 3, t, NRT_INT64, S(8), 1);
          if (weighted) nrt_test_operand_n(&lb, 4, w, NRT_FLOAT32, S(4), 1);
          lb.params[0] = red;
          lb.params[1] = p;
          lb.scalars[0].f = 0.7;
          CHECK_OK(nrt_test_run(&lb, ref));
          float gs = red == NRT_LOSS_MEAN ? (float)(1.0 / (N * C)) : (float)(1.0 / C);
          for (int n = 0; n < N; n++) {
            float go = g[red == NRT_LOSS_NONE ? n : 0], gy = 0, xy = x[n * C + t[n]];
            for (int c = 0; c < C; c++) {
              if (c == t[n]) continue;
              float z = 0.7f - xy + x[n * C + c], h = 0;
              if (z > 0) {
                h = p == 1 ? gs : 2 * gs * z;
                if (weighted) h *= w[t[n]];
                gy -= h;
              }
              float want = h * go;
              CHECK(memcmp(&gx[n * C + c], &want, 4) == 0 || (isnan(want) && isnan(gx[n * C + c])));
            }
            float want = gy * go;
            CHECK(memcmp(&gx[n * C + t[n]], &want, 4) == 0 || (isnan(want) && isnan(gx[n * C + t[n]])));
          }
        }
  /* float64, a row of -1e18: (1 - -1e18) + -1e18 is 0, so no term; the
   * association (x[d] - x[y]) + 1 would give 1 per term */
  double xd[3] = {-1e18, -1e18, -1e18}, od[1] = {9};
  int64_t t0[1] = {0};
  nrt_launch l = nrt_test_launch(NRT_OP(MULTI_MARGIN_LOSS), NRT_FLOAT64, 2, S(1, 3), 1, 2);
  nrt_test_operand_n(&l, 0, od, NRT_FLOAT64, S(8), 1);
  nrt_test_operand_n(&l, 1, xd, NRT_FLOAT64, S(24, 8), 2);
  nrt_test_operand_n(&l, 2, t0, NRT_INT64, S(8), 1);
  l.params[1] = 1;
  l.scalars[0].f = 1.0;
  CHECK_OK(nrt_test_run(&l, 0));
  CHECK(od[0] == 0.0);
  /* errors: a target outside [0, C), p = 3 */
  t0[0] = 3;
  CHECK_STATUS(nrt_test_run(&l, 0), NRT_ERROR_OUT_OF_RANGE);
  CHECK_PREFIX("target out of range");
  t0[0] = 0;
  l.params[1] = 3;
  CHECK_STATUS(nrt_test_run(&l, 0), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_PREFIX("only p == 1 and p == 2 supported");
}

/* ---- NLL_LOSS_REDUCE --------------------------------------------------------------- */

static void test_nll_loss_reduce(void) {
  /* x [1, 1, 17]: -1e8 then sixteen -1. The cascade moves index 0 up a
   * level alone, adds indices 1..16 (1..15 then 16, flushed at 16) in level
   * 0 and then into level 1: 1e8 + 16 = 100000016; a serial float sum stays
   * at 1e8 (each +1 is below half an ulp). */
  float x[17], out = 0, total = 0;
  int64_t t[17] = {0};
  for (int i = 0; i < 17; i++) x[i] = i == 0 ? -1e8f : -1.0f;
  nrt_launch l = nrt_test_launch(NRT_OP(NLL_LOSS_REDUCE), NRT_FLOAT32, 3, S(1, 1, 17), 2, 2);
  nrt_test_operand_n(&l, 0, &out, NRT_FLOAT32, S(0), 0);
  nrt_test_operand_n(&l, 1, &total, NRT_FLOAT32, S(0), 0);
  nrt_test_operand_n(&l, 2, x, NRT_FLOAT32, S(0, 0, 4), 3);
  nrt_test_operand_n(&l, 3, t, NRT_INT64, S(0, 8), 2);
  l.params[0] = NRT_LOSS_SUM;
  l.params[1] = -100;
  CHECK_OK(nrt_test_run(&l, 0));
  CHECK(out == 100000016.0f && total == 17.0f);
  /* ignored entries count nowhere: the mean divides by the 15 others */
  t[3] = t[9] = -100;
  l.params[0] = NRT_LOSS_MEAN;
  CHECK_OK(nrt_test_run(&l, 0));
  CHECK(total == 15.0f && out == (float)(100000016.0f - 2.0f) / 15.0f);
  /* a weight: total is the weights' cascade sum */
  float w[1] = {0.5f};
  nrt_launch lw = nrt_test_launch(NRT_OP(NLL_LOSS_REDUCE), NRT_FLOAT32, 3, S(1, 1, 17), 2, 3);
  memcpy(lw.operands, l.operands, sizeof l.operands);
  nrt_test_operand_n(&lw, 4, w, NRT_FLOAT32, S(4), 1);
  lw.params[0] = NRT_LOSS_SUM;
  lw.params[1] = -100;
  CHECK_OK(nrt_test_run(&lw, 0));
  CHECK(total == 7.5f && out == 50000008.0f); /* 5e7 + 14 * 0.5, rounded to float */
  /* errors: the first target outside [0, C) that is not ignored */
  t[5] = 4;
  t[7] = -3;
  CHECK_STATUS(nrt_test_run(&l, 0), NRT_ERROR_OUT_OF_RANGE);
  CHECK_PREFIX("Target 4 is out of bounds.");
}

/* ---- NLL_LOSS / NLL_LOSS_BACKWARD (the rows form, moved from INDEX) ------------------ */

static void test_nll_loss_rows(void) {
  /* x [3, 4]; targets [1, 2 (= ignore_index), 3]; weight [0.5, 1, 2, 3] */
  float x[12] = {-0.5f, -1.5f, -2.5f, -3.5f, -1, -1, -1, -1, -0.25f, -0.75f, -1.25f, -1.75f};
  float weight[4] = {0.5f, 1, 2, 3};
  int64_t target[3] = {1, 2, 3};
  for (int r = 0; r < 2; r++) {
    for (int weighted = 0; weighted < 2; weighted++) {
      float loss[3] = {9, 9, 9};
      nrt_launch l = nrt_test_launch(NRT_OP(NLL_LOSS), NRT_FLOAT32, 2, S(3, 4), 1, weighted ? 3 : 2);
      nrt_test_operand_n(&l, 0, loss, NRT_FLOAT32, S(4), 1);
      nrt_test_operand_n(&l, 1, x, NRT_FLOAT32, S(16, 4), 2);
      nrt_test_operand_n(&l, 2, target, NRT_INT64, S(8), 1);
      if (weighted) nrt_test_operand_n(&l, 3, weight, NRT_FLOAT32, S(4), 1);
      l.params[1] = 2;
      CHECK_OK(nrt_test_run(&l, r));
      CHECK(loss[0] == 1.5f && loss[1] == 0 && loss[2] == (weighted ? 5.25f : 1.75f));
      CHECK(!signbit(loss[1]));
      /* PyTorch's messages: no wrap for targets, ignore_index exempt */
      target[2] = 4;
      CHECK_STATUS(nrt_test_run(&l, r), NRT_ERROR_OUT_OF_RANGE);
      CHECK_MSG("Target 4 is out of bounds.");
      target[2] = -1;
      CHECK_STATUS(nrt_test_run(&l, r), NRT_ERROR_OUT_OF_RANGE);
      CHECK_MSG("Target -1 is out of bounds.");
      target[2] = 3;
    }
    /* backward, mean: w[t] * -(g / total), zeros elsewhere and on ignored rows;
     * 1 / 3 rounds before the weight multiplies it (ATen's association) */
    float g = 1.0f, total = 3.0f, gi[12];
    memset(gi, 0x7f, sizeof gi);
    nrt_launch l = nrt_test_launch(NRT_OP(NLL_LOSS_BACKWARD), NRT_FLOAT32, 2, S(3, 4), 1, 4);
    nrt_test_operand_n(&l, 0, gi, NRT_FLOAT32, S(16, 4), 2);
    nrt_test_operand_n(&l, 1, target, NRT_INT64, S(8), 1);
    nrt_test_operand_n(&l, 2, &g, NRT_FLOAT32, S(0), 1);
    nrt_test_operand_n(&l, 3, &total, NRT_FLOAT32, S(0), 0);
    nrt_test_operand_n(&l, 4, weight, NRT_FLOAT32, S(4), 1);
    l.params[0] = NRT_LOSS_MEAN;
    l.params[1] = 2;
    CHECK_OK(nrt_test_run(&l, r));
    float third = 1.0f / 3.0f;
    const float want[12] = {0, -third, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3.0f * -third};
    CHECK(memcmp(gi, want, sizeof want) == 0);
    target[0] = 5;
    CHECK_STATUS(nrt_test_run(&l, r), NRT_ERROR_OUT_OF_RANGE);
    CHECK_MSG("Target 5 is out of bounds.");
    target[0] = 1;
  }
  /* a large bfloat16 backward without reduction, transposed grad: fast == reference */
  enum { N = 300, C = 1001 };
  uint16_t *gb[2];
  int64_t *t = malloc(N * sizeof *t);
  float *gs = malloc(N * sizeof *gs), tw = 1.0f;
  for (int i = 0; i < N; i++) {
    t[i] = nrt_test_rand_range(-1, C); /* -1 = ignore_index */
    gs[i] = (float)nrt_test_rand_range(1, 100) / 8;
  }
  for (int r = 0; r < 2; r++) {
    gb[r] = malloc(N * C * 2);
    memset(gb[r], 0x33, N * C * 2);
    nrt_launch l = nrt_test_launch(NRT_OP(NLL_LOSS_BACKWARD), NRT_BFLOAT16, 2, S(N, C), 1, 3);
    nrt_test_operand_n(&l, 0, gb[r], NRT_BFLOAT16, S(2, N * 2), 2);
    nrt_test_operand_n(&l, 1, t, NRT_INT64, S(8), 1);
    nrt_test_operand_n(&l, 2, gs, NRT_FLOAT32, S(4), 1);
    nrt_test_operand_n(&l, 3, &tw, NRT_FLOAT32, S(0), 0);
    l.params[0] = NRT_LOSS_NONE;
    l.params[1] = -1;
    CHECK_OK(nrt_test_run(&l, r));
  }
  CHECK(memcmp(gb[0], gb[1], N * C * 2) == 0);
  int bad = 0;
  for (int n = 0; n < N; n++)
    for (int c = 0; c < C; c++) {
      float v = nrt_bf16_to_f32(gb[0][c * N + n]);
      bad += v != (c == t[n] ? -gs[n] : 0.0f);
    }
  CHECK(bad == 0);
  free(gb[0]);
  free(gb[1]);
  free(t);
  free(gs);
  /* operand counts: NLL_LOSS takes 2 or 3 inputs */
  int64_t tg[1] = {0};
  float loss[1], xs[4] = {0}, wt[4] = {1, 1, 1, 1};
  nrt_launch n = nrt_test_launch(NRT_OP(NLL_LOSS), NRT_FLOAT32, 2, S(1, 4), 1, 2);
  nrt_test_operand_n(&n, 0, loss, NRT_FLOAT32, S(4), 1);
  nrt_test_operand_n(&n, 1, xs, NRT_FLOAT32, S(16, 4), 2);
  nrt_test_operand_n(&n, 2, tg, NRT_INT64, S(8), 1);
  nrt_test_operand_n(&n, 3, wt, NRT_FLOAT32, S(4), 1);
  nrt_test_operand_n(&n, 4, wt, NRT_FLOAT32, S(4), 1);
  CHECK_OK(nrt_launch_run(&n));
  n.ninputs = 3;
  CHECK_OK(nrt_launch_run(&n));
  n.ninputs = 4;
  CHECK_STATUS(nrt_launch_run(&n), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_PREFIX("nrt_launch_run: NLL_LOSS: expected 2 to 3 inputs, got 4");
}

int main(void) {
  printf("test_segment\n");
  RUN_TEST(test_embedding_bag_modes);
  RUN_TEST(test_embedding_bag_large);
  RUN_TEST(test_embedding_bag_errors);
  RUN_TEST(test_cdist);
  RUN_TEST(test_cdist_half);
  RUN_TEST(test_cdist_float_steps);
  RUN_TEST(test_pdist);
  RUN_TEST(test_dist_large);
  RUN_TEST(test_dist_errors);
  RUN_TEST(test_dist_nan);
  RUN_TEST(test_segment_reduce);
  RUN_TEST(test_segment_reduce_half);
  RUN_TEST(test_segment_reduce_errors);
  RUN_TEST(test_ctc);
  RUN_TEST(test_ctc_errors);
  RUN_TEST(test_multi_margin);
  RUN_TEST(test_nll_loss_reduce);
  RUN_TEST(test_nll_loss_rows);
  return TEST_RESULT();
}
