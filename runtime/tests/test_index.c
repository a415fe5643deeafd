/* Index kernel tests (INDEX kind): advanced indexing, gather/scatter,
 * nonzero, arange/linspace, tril/triu, sort. Known cases with
 * the results PyTorch 2.13 gives on the CPU (pasted), error messages in
 * PyTorch's wording, bit-exact moves of int64/float64, and the fast paths
 * against the reference paths on larger random inputs. Every case runs in
 * both modes. */
#include <stdint.h>
#include <string.h>
#include "testing.h"
#include "kernels/common/common.h"
#include "nrt/ops/index.h"

#define S(...) ((const int64_t[]){__VA_ARGS__})

static bool floats_eq(const float *a, const float *b, int n) {
  for (int i = 0; i < n; i++)
    if (!nrt_test_same(a[i], b[i])) return false;
  return true;
}

/* ---- INDEX_GATHER ---------------------------------------------------------------- */

static void test_index_gather_known(void) {
  float x[12];
  for (int i = 0; i < 12; i++) x[i] = (float)i;
  for (int r = 0; r < 2; r++) {
    /* x[[2, -1, 0]]: the indexed dim 0 of x[3][4] has stride 0 in src */
    int64_t idx[3] = {2, -1, 0};
    int32_t idx32[3] = {2, -1, 0};
    float out[12];
    const float want_a[12] = {8, 9, 10, 11, 8, 9, 10, 11, 0, 1, 2, 3};
    for (int w = 0; w < 2; w++) {
      nrt_launch l = nrt_test_launch(NRT_OP(INDEX_GATHER), NRT_FLOAT32, 2, S(3, 4), 1, 2);
      nrt_test_operand(&l, 0, out, NRT_FLOAT32, S(16, 4));
      nrt_test_operand(&l, 1, x, NRT_FLOAT32, S(0, 4));
      if (w == 0) nrt_test_operand(&l, 2, idx, NRT_INT64, S(8, 0));
      else nrt_test_operand(&l, 2, idx32, NRT_INT32, S(4, 0));
      l.params[0] = 1;
      l.aux[0] = 3;
      l.aux[1] = 16;
      memset(out, 0, sizeof out);
      CHECK_OK(nrt_test_run(&l, r));
      CHECK(floats_eq(out, want_a, 12));
    }
    /* x[:, [3, -4]] -> [[3, 0], [7, 4], [11, 8]] */
    int64_t idx_b[2] = {3, -4};
    float out_b[6];
    const float want_b[6] = {3, 0, 7, 4, 11, 8};
    nrt_launch l = nrt_test_launch(NRT_OP(INDEX_GATHER), NRT_FLOAT32, 2, S(3, 2), 1, 2);
    nrt_test_operand(&l, 0, out_b, NRT_FLOAT32, S(8, 4));
    nrt_test_operand(&l, 1, x, NRT_FLOAT32, S(16, 0));
    nrt_test_operand(&l, 2, idx_b, NRT_INT64, S(0, 8));
    l.params[0] = 1;
    l.aux[0] = 4;
    l.aux[1] = 4;
    CHECK_OK(nrt_test_run(&l, r));
    CHECK(floats_eq(out_b, want_b, 6));
    /* x[[0, 2], [1, -1]] -> [1, 11]: two index operands */
    int64_t i0[2] = {0, 2}, i1[2] = {1, -1};
    float out_c[2];
    l = nrt_test_launch(NRT_OP(INDEX_GATHER), NRT_FLOAT32, 1, S(2), 1, 3);
    nrt_test_operand(&l, 0, out_c, NRT_FLOAT32, S(4));
    nrt_test_operand(&l, 1, x, NRT_FLOAT32, S(0));
    nrt_test_operand(&l, 2, i0, NRT_INT64, S(8));
    nrt_test_operand(&l, 3, i1, NRT_INT64, S(8));
    l.params[0] = 2;
    l.aux[0] = 3;
    l.aux[1] = 16;
    l.aux[2] = 4;
    l.aux[3] = 4;
    CHECK_OK(nrt_test_run(&l, r));
    CHECK(out_c[0] == 1 && out_c[1] == 11);
  }
}

static void test_index_gather_errors(void) {
  float x[12] = {0}, out[8];
  for (int r = 0; r < 2; r++) {
    /* x[:, [5]]: PyTorch numbers the dim by index operand */
    int64_t idx[1] = {5};
    nrt_launch l = nrt_test_launch(NRT_OP(INDEX_GATHER), NRT_FLOAT32, 2, S(3, 1), 1, 2);
    nrt_test_operand(&l, 0, out, NRT_FLOAT32, S(4, 4));
    nrt_test_operand(&l, 1, x, NRT_FLOAT32, S(16, 0));
    nrt_test_operand(&l, 2, idx, NRT_INT64, S(0, 8));
    l.params[0] = 1;
    l.aux[0] = 4;
    l.aux[1] = 4;
    CHECK_STATUS(nrt_test_run(&l, r), NRT_ERROR_OUT_OF_RANGE);
    CHECK_MSG("index 5 is out of bounds for dimension 0 with size 4");
    /* x[[1], [-5]] */
    int64_t i0[1] = {1}, i1[1] = {-5};
    l = nrt_test_launch(NRT_OP(INDEX_GATHER), NRT_FLOAT32, 1, S(1), 1, 3);
    nrt_test_operand(&l, 0, out, NRT_FLOAT32, S(4));
    nrt_test_operand(&l, 1, x, NRT_FLOAT32, S(0));
    nrt_test_operand(&l, 2, i0, NRT_INT64, S(8));
    nrt_test_operand(&l, 3, i1, NRT_INT64, S(8));
    l.params[0] = 2;
    l.aux[0] = 3;
    l.aux[1] = 16;
    l.aux[2] = 4;
    l.aux[3] = 4;
    CHECK_STATUS(nrt_test_run(&l, r), NRT_ERROR_OUT_OF_RANGE);
    CHECK_MSG("index -5 is out of bounds for dimension 1 with size 4");
    /* -size is the last valid negative index */
    i1[0] = -4;
    CHECK_OK(nrt_test_run(&l, r));
    /* a float index operand is refused */
    float fidx[1] = {0};
    nrt_test_operand(&l, 3, fidx, NRT_FLOAT32, S(4));
    CHECK_STATUS(nrt_test_run(&l, r), NRT_ERROR_INVALID_ARGUMENT);
  }
  /* Large enough to run in parallel: the first bad index in order is
   * reported, whichever chunk finds one first. */
  enum { N = 200000, V = 1000 };
  int64_t *idx = malloc(N * sizeof *idx);
  float *src = calloc(V, sizeof *src), *o = malloc(N * sizeof *o);
  for (int i = 0; i < N; i++) idx[i] = nrt_test_rand_range(-V, V);
  idx[150000] = -1001;
  idx[120000] = 1000;
  for (int r = 0; r < 2; r++) {
    nrt_launch l = nrt_test_launch(NRT_OP(INDEX_GATHER), NRT_FLOAT32, 1, S(N), 1, 2);
    nrt_test_operand(&l, 0, o, NRT_FLOAT32, S(4));
    nrt_test_operand(&l, 1, src, NRT_FLOAT32, S(0));
    nrt_test_operand(&l, 2, idx, NRT_INT64, S(8));
    l.params[0] = 1;
    l.aux[0] = V;
    l.aux[1] = 4;
    CHECK_STATUS(nrt_test_run(&l, r), NRT_ERROR_OUT_OF_RANGE);
    CHECK_MSG("index 1000 is out of bounds for dimension 0 with size 1000");
  }
  free(idx);
  free(src);
  free(o);
}

/* index_select's two ways of failing, as on the CPU (p2): 1 = IndexError
 * "index out of range in self", 2 = the RuntimeError of its dim-1 path
 * ("INDICES element is out of DATA bounds"); neither wraps a negative
 * index, on the fast path or the reference one. Advanced indexing (p2 = 0)
 * wraps it and reports IndexError; gather stays a RuntimeError. */
static void test_index_select_error_kinds(void) {
  float x[4] = {1, 2, 3, 4}, out[2];
  for (int r = 0; r < 2; r++) {
    int64_t idx[2] = {1, -1};
    nrt_launch l = nrt_test_launch(NRT_OP(INDEX_GATHER), NRT_FLOAT32, 1, S(2), 1, 2);
    nrt_test_operand(&l, 0, out, NRT_FLOAT32, S(4));
    nrt_test_operand(&l, 1, x, NRT_FLOAT32, S(0));
    nrt_test_operand(&l, 2, idx, NRT_INT64, S(8));
    l.params[0] = 1;
    l.aux[0] = 4;
    l.aux[1] = 4;
    CHECK_OK(nrt_test_run(&l, r));
    CHECK(out[0] == 2 && out[1] == 4);
    l.params[2] = 1;
    CHECK_STATUS(nrt_test_run(&l, r), NRT_ERROR_OUT_OF_RANGE);
    CHECK_MSG("index out of range in self (index -1, size 4)");
    l.params[2] = 2;
    CHECK_STATUS(nrt_test_run(&l, r), NRT_ERROR_INVALID_ARGUMENT);
    CHECK_MSG("INDICES element is out of DATA bounds, id=-1 axis_dim=4");
    idx[1] = 4;
    l.params[2] = 0;
    CHECK_STATUS(nrt_test_run(&l, r), NRT_ERROR_OUT_OF_RANGE);
    CHECK_MSG("index 4 is out of bounds for dimension 0 with size 4");
    /* the status has a name and a sentence of its own */
    CHECK(strcmp(nrt_status_name(NRT_ERROR_OUT_OF_RANGE), "NRT_ERROR_OUT_OF_RANGE") == 0);
    CHECK(strcmp(nrt_status_string(NRT_ERROR_OUT_OF_RANGE), "index out of range") == 0);
  }
}

static void test_index_exact(void) {
  int64_t si[4] = {INT64_MAX, INT64_MIN + 1, 0x123456789abcdefll, -3};
  uint64_t fb[4] = {0x3fb999999999999aull /* 0.1 */, 0x7ff8000000000123ull /* NaN payload */,
                    0x8000000000000000ull /* -0.0 */, 0x0000000000000001ull /* denormal */};
  double sf[4];
  memcpy(sf, fb, sizeof sf);
  int64_t idx[6] = {3, 0, -3, 2, 1, -1};
  for (int r = 0; r < 2; r++) {
    int64_t oi[6];
    double of[6];
    for (int t = 0; t < 2; t++) {
      nrt_launch l = nrt_test_launch(NRT_OP(INDEX_GATHER), NRT_FLOAT32, 1, S(6), 1, 2);
      nrt_test_operand(&l, 0, t ? (void *)of : (void *)oi, t ? NRT_FLOAT64 : NRT_INT64, S(8));
      nrt_test_operand(&l, 1, t ? (void *)sf : (void *)si, t ? NRT_FLOAT64 : NRT_INT64, S(0));
      nrt_test_operand(&l, 2, idx, NRT_INT64, S(8));
      l.compute_dtype = t ? NRT_FLOAT64 : NRT_INT64;
      l.params[0] = 1;
      l.aux[0] = 4;
      l.aux[1] = 8;
      CHECK_OK(nrt_test_run(&l, r));
    }
    for (int i = 0; i < 6; i++) {
      int64_t k = idx[i] < 0 ? idx[i] + 4 : idx[i];
      CHECK(oi[i] == si[k]);
      CHECK(memcmp(&of[i], &fb[k], 8) == 0);
    }
  }
}

/* The glue's launches come in TensorIterator's layout, fastest dim first:
 * x[[2, -1, 0]] of x[3][4] described that way gives the same rows (the
 * kernel turns it around to copy whole rows), and so does an
 * accumulating put of those rows (embedding backward's shape). */
static void test_index_fastest_dim_first(void) {
  float x[12];
  for (int i = 0; i < 12; i++) x[i] = (float)i;
  int64_t idx[3] = {2, -1, 0};
  const float want[12] = {8, 9, 10, 11, 8, 9, 10, 11, 0, 1, 2, 3};
  for (int r = 0; r < 2; r++) {
    float out[12] = {0};
    nrt_launch l = nrt_test_launch(NRT_OP(INDEX_GATHER), NRT_FLOAT32, 2, S(4, 3), 1, 2);
    nrt_test_operand(&l, 0, out, NRT_FLOAT32, S(4, 16));
    nrt_test_operand(&l, 1, x, NRT_FLOAT32, S(4, 0));
    nrt_test_operand(&l, 2, idx, NRT_INT64, S(0, 8));
    l.params[0] = 1;
    l.aux[0] = 3;
    l.aux[1] = 16;
    CHECK_OK(nrt_test_run(&l, r));
    CHECK(floats_eq(out, want, 12));
    /* y[[2, -1, 0]] += x rows 0..2: row 2 gets rows 0 and 1, row 0 gets row 2 */
    float y[12] = {0};
    l = nrt_test_launch(NRT_OP(INDEX_PUT), NRT_FLOAT32, 2, S(4, 3), 1, 2);
    nrt_test_operand(&l, 0, y, NRT_FLOAT32, S(4, 0));
    nrt_test_operand(&l, 1, x, NRT_FLOAT32, S(4, 16));
    nrt_test_operand(&l, 2, idx, NRT_INT64, S(0, 8));
    l.params[0] = 1;
    l.params[1] = 1;
    l.aux[0] = 3;
    l.aux[1] = 16;
    CHECK_OK(nrt_test_run(&l, r));
    const float want_put[12] = {8, 9, 10, 11, 0, 0, 0, 0, 4, 6, 8, 10};
    CHECK(floats_eq(y, want_put, 12));
  }
}

static void test_index_put_known(void) {
  for (int r = 0; r < 2; r++) {
    /* y[[1, 3, 1]] = [10, 20, 30]: the last write wins; accumulate sums */
    int64_t idx[3] = {1, 3, 1};
    float vals[3] = {10, 20, 30};
    for (int acc = 0; acc < 2; acc++) {
      float y[5] = {0};
      nrt_launch l = nrt_test_launch(NRT_OP(INDEX_PUT), NRT_FLOAT32, 1, S(3), 1, 2);
      nrt_test_operand(&l, 0, y, NRT_FLOAT32, S(0));
      nrt_test_operand(&l, 1, vals, NRT_FLOAT32, S(4));
      nrt_test_operand(&l, 2, idx, NRT_INT64, S(8));
      l.params[0] = 1;
      l.params[1] = acc;
      l.aux[0] = 5;
      l.aux[1] = 4;
      CHECK_OK(nrt_test_run(&l, r));
      const float want[2][5] = {{0, 30, 0, 20, 0}, {0, 40, 0, 20, 0}};
      CHECK(floats_eq(y, want[acc], 5));
    }
    /* broadcast value, negative index */
    {
      float y[5] = {0}, v = 7;
      int64_t ix[2] = {-1, 0};
      nrt_launch l = nrt_test_launch(NRT_OP(INDEX_PUT), NRT_FLOAT32, 1, S(2), 1, 2);
      nrt_test_operand(&l, 0, y, NRT_FLOAT32, S(0));
      nrt_test_operand(&l, 1, &v, NRT_FLOAT32, S(0));
      nrt_test_operand(&l, 2, ix, NRT_INT64, S(8));
      l.params[0] = 1;
      l.aux[0] = 5;
      l.aux[1] = 4;
      CHECK_OK(nrt_test_run(&l, r));
      CHECK(y[0] == 7 && y[4] == 7 && y[1] == 0 && y[2] == 0 && y[3] == 0);
      ix[0] = 5;
      CHECK_STATUS(nrt_test_run(&l, r), NRT_ERROR_OUT_OF_RANGE);
      CHECK_MSG("index 5 is out of bounds for dimension 0 with size 5");
      ix[0] = -6;
      l.params[1] = 1;
      CHECK_STATUS(nrt_test_run(&l, r), NRT_ERROR_OUT_OF_RANGE);
      CHECK_MSG("index -6 is out of bounds for dimension 0 with size 5");
    }
    /* x[:, [0, 2]] = v (3x2) on a 3x4 float64 */
    {
      double x[12] = {0}, v[6] = {1, 2, 3, 4, 5, 6};
      int64_t ix[2] = {0, 2};
      nrt_launch l = nrt_test_launch(NRT_OP(INDEX_PUT), NRT_FLOAT32, 2, S(3, 2), 1, 2);
      nrt_test_operand(&l, 0, x, NRT_FLOAT64, S(32, 0));
      nrt_test_operand(&l, 1, v, NRT_FLOAT64, S(16, 8));
      nrt_test_operand(&l, 2, ix, NRT_INT64, S(0, 8));
      l.compute_dtype = NRT_FLOAT64;
      l.params[0] = 1;
      l.aux[0] = 4;
      l.aux[1] = 8;
      CHECK_OK(nrt_test_run(&l, r));
      const double want[12] = {1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0};
      CHECK(memcmp(x, want, sizeof want) == 0);
    }
    /* accumulate: bool is logical or; int64 exact; float16 rounds per add */
    {
      uint8_t b[3] = {1, 0, 0}, bv[3] = {1, 1, 1};
      int64_t ix[3] = {0, 1, 1};
      nrt_launch l = nrt_test_launch(NRT_OP(INDEX_PUT), NRT_FLOAT32, 1, S(3), 1, 2);
      nrt_test_operand(&l, 0, b, NRT_BOOL, S(0));
      nrt_test_operand(&l, 1, bv, NRT_BOOL, S(1));
      nrt_test_operand(&l, 2, ix, NRT_INT64, S(8));
      l.compute_dtype = NRT_BOOL;
      l.params[0] = 1;
      l.params[1] = 1;
      l.aux[0] = 3;
      l.aux[1] = 1;
      CHECK_OK(nrt_test_run(&l, r));
      CHECK(b[0] == 1 && b[1] == 1 && b[2] == 0);

      int64_t s[2] = {1ll << 62, 0}, v[3] = {1, (1ll << 61) + 3, -5};
      int64_t jx[3] = {0, 0, 1};
      l = nrt_test_launch(NRT_OP(INDEX_PUT), NRT_FLOAT32, 1, S(3), 1, 2);
      nrt_test_operand(&l, 0, s, NRT_INT64, S(0));
      nrt_test_operand(&l, 1, v, NRT_INT64, S(8));
      nrt_test_operand(&l, 2, jx, NRT_INT64, S(8));
      l.compute_dtype = NRT_INT64;
      l.params[0] = 1;
      l.params[1] = 1;
      l.aux[0] = 2;
      l.aux[1] = 8;
      CHECK_OK(nrt_test_run(&l, r));
      CHECK(s[0] == (1ll << 62) + (1ll << 61) + 4 && s[1] == -5);

      /* torch: h = [1, 2] half; h.index_put_(([0,0,0],), [1e-3, 1e-3, 2048], True)
       * -> bits [26625, 16384] (2050, 2) */
      uint16_t h[2] = {nrt_f32_to_f16(1), nrt_f32_to_f16(2)};
      uint16_t hv[3] = {nrt_f32_to_f16(1e-3f), nrt_f32_to_f16(1e-3f), nrt_f32_to_f16(2048)};
      int64_t kx[3] = {0, 0, 0};
      l = nrt_test_launch(NRT_OP(INDEX_PUT), NRT_FLOAT32, 1, S(3), 1, 2);
      nrt_test_operand(&l, 0, h, NRT_FLOAT16, S(0));
      nrt_test_operand(&l, 1, hv, NRT_FLOAT16, S(2));
      nrt_test_operand(&l, 2, kx, NRT_INT64, S(8));
      l.compute_dtype = NRT_FLOAT16;
      l.params[0] = 1;
      l.params[1] = 1;
      l.aux[0] = 2;
      l.aux[1] = 2;
      CHECK_OK(nrt_test_run(&l, r));
      CHECK(h[0] == 26625 && h[1] == 16384);
    }
  }
}

/* Embedding-style gather and its accumulate-put backward on random data,
 * in several dtypes and a transposed output: fast path == reference. */
static void test_index_fast_vs_reference(void) {
  enum { V = 50, D = 33, N = 1500 };
  const nrt_dtype dts[] = {NRT_FLOAT32, NRT_BFLOAT16, NRT_INT8, NRT_FLOAT64, NRT_INT64};
  int64_t *idx = malloc(N * sizeof *idx);
  int32_t *idx32 = malloc(N * sizeof *idx32);
  for (int i = 0; i < N; i++) idx32[i] = (int32_t)(idx[i] = nrt_test_rand_range(-V, V));
  int failures = 0;
  for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++) {
    nrt_dtype dt = dts[t];
    int64_t es = (int64_t)nrt_dtype_size(dt);
    char *src = malloc((size_t)(V * D * es)), *out[2], *put[2];
    for (int64_t i = 0; i < V * D * es; i++) src[i] = (char)nrt_test_rand_u64();
    if (dt == NRT_FLOAT32 || dt == NRT_FLOAT64 || dt == NRT_BFLOAT16) /* finite values for the sums */
      for (int64_t i = 0; i < V * D; i++) {
        double v = (double)nrt_test_rand_range(-1000, 1000) / 64;
        nrt_ref_store_f64(src + i * es, dt, v);
      }
    for (int r = 0; r < 2; r++) {
      out[r] = calloc(N * D, (size_t)es);
      put[r] = malloc((size_t)(V * D * es));
      memcpy(put[r], src, (size_t)(V * D * es));
    }
    for (int transposed = 0; transposed < 2; transposed++) {
      for (int r = 0; r < 2; r++) {
        nrt_launch l = nrt_test_launch(NRT_OP(INDEX_GATHER), NRT_FLOAT32, 2, S(N, D), 1, 2);
        nrt_test_operand(&l, 0, out[r], dt, transposed ? S(es, N * es) : S(D * es, es));
        nrt_test_operand(&l, 1, src, dt, S(0, es));
        if (transposed) nrt_test_operand(&l, 2, idx32, NRT_INT32, S(4, 0));
        else nrt_test_operand(&l, 2, idx, NRT_INT64, S(8, 0));
        l.compute_dtype = dt;
        l.params[0] = 1;
        l.aux[0] = V;
        l.aux[1] = D * es;
        CHECK_OK(nrt_test_run(&l, r));
        /* accumulate out (as grad) back into put[r] at the same rows */
        l.op = NRT_OP(INDEX_PUT);
        l.params[1] = 1;
        nrt_test_operand(&l, 0, put[r], dt, S(0, es));
        nrt_test_operand(&l, 1, out[r], dt, transposed ? S(es, N * es) : S(D * es, es));
        CHECK_OK(nrt_test_run(&l, r));
      }
      failures += memcmp(out[0], out[1], (size_t)(N * D * es)) != 0;
      failures += memcmp(put[0], put[1], (size_t)(V * D * es)) != 0;
      /* the gather against the definition */
      for (int i = 0; i < N; i++)
        for (int c = 0; c < D; c++) {
          int64_t k = idx[i] < 0 ? idx[i] + V : idx[i];
          int64_t at = transposed ? c * N + i : i * D + c;
          failures += memcmp(out[0] + at * es, src + (k * D + c) * es, (size_t)es) != 0;
        }
    }
    for (int r = 0; r < 2; r++) {
      free(out[r]);
      free(put[r]);
    }
    free(src);
  }
  CHECK(failures == 0);
  /* two index operands into a [A, B, C] tensor, one of them strided:
   * out[n, c] = src[i0[n], i1[n], c] */
  enum { A = 7, B = 9, C = 5, M = 4000 };
  float *src = malloc(A * B * C * sizeof *src), *o[2];
  for (int i = 0; i < A * B * C; i++) src[i] = (float)i;
  int64_t *i0 = malloc(2 * M * sizeof *i0), *i1 = malloc(M * sizeof *i1);
  for (int i = 0; i < M; i++) {
    i0[2 * i] = nrt_test_rand_range(-A, A);
    i1[i] = nrt_test_rand_range(-B, B);
  }
  for (int r = 0; r < 2; r++) {
    o[r] = malloc(M * C * sizeof *o[r]);
    nrt_launch l = nrt_test_launch(NRT_OP(INDEX_GATHER), NRT_FLOAT32, 2, S(M, C), 1, 3);
    nrt_test_operand(&l, 0, o[r], NRT_FLOAT32, S(C * 4, 4));
    nrt_test_operand(&l, 1, src, NRT_FLOAT32, S(0, 4));
    nrt_test_operand(&l, 2, i0, NRT_INT64, S(16, 0));
    nrt_test_operand(&l, 3, i1, NRT_INT64, S(8, 0));
    l.params[0] = 2;
    l.aux[0] = A;
    l.aux[1] = B * C * 4;
    l.aux[2] = B;
    l.aux[3] = C * 4;
    CHECK_OK(nrt_test_run(&l, r));
  }
  CHECK(memcmp(o[0], o[1], M * C * sizeof(float)) == 0);
  int bad = 0;
  for (int i = 0; i < M; i++)
    for (int c = 0; c < C; c++) {
      int64_t a = i0[2 * i] < 0 ? i0[2 * i] + A : i0[2 * i], b = i1[i] < 0 ? i1[i] + B : i1[i];
      bad += o[1][i * C + c] != src[(a * B + b) * C + c];
    }
  CHECK(bad == 0);
  free(o[0]);
  free(o[1]);
  free(src);
  free(i0);
  free(i1);
  free(idx);
  free(idx32);
}

/* ---- GATHER / SCATTER ------------------------------------------------------------------ */

static void test_gather_known(void) {
  for (int r = 0; r < 2; r++) {
    /* torch.gather([[1, 2], [3, 4]], 1, [[0, 0], [1, 0]]) -> [[1, 1], [4, 3]] */
    int64_t t[4] = {1, 2, 3, 4}, idx[4] = {0, 0, 1, 0}, out[4];
    int32_t idx32[4] = {0, 0, 1, 0};
    for (int w = 0; w < 2; w++) {
      nrt_launch l = nrt_test_launch(NRT_OP(GATHER), NRT_FLOAT32, 2, S(2, 2), 1, 2);
      nrt_test_operand(&l, 0, out, NRT_INT64, S(16, 8));
      nrt_test_operand(&l, 1, t, NRT_INT64, S(16, 0));
      if (w == 0) nrt_test_operand(&l, 2, idx, NRT_INT64, S(16, 8));
      else nrt_test_operand(&l, 2, idx32, NRT_INT32, S(8, 4));
      l.compute_dtype = NRT_INT64;
      l.aux[0] = 2;
      l.aux[1] = 8;
      l.aux[2] = 1; /* dim, for the message */
      CHECK_OK(nrt_test_run(&l, r));
      CHECK(out[0] == 1 && out[1] == 1 && out[2] == 4 && out[3] == 3);
    }
    /* PyTorch's gather does not wrap negative indices */
    nrt_launch l = nrt_test_launch(NRT_OP(GATHER), NRT_FLOAT32, 2, S(2, 2), 1, 2);
    nrt_test_operand(&l, 0, out, NRT_INT64, S(16, 8));
    nrt_test_operand(&l, 1, t, NRT_INT64, S(16, 0));
    nrt_test_operand(&l, 2, idx, NRT_INT64, S(16, 8));
    l.aux[0] = 2;
    l.aux[1] = 8;
    l.aux[2] = 1;
    idx[2] = -1;
    CHECK_STATUS(nrt_test_run(&l, r), NRT_ERROR_INVALID_ARGUMENT);
    CHECK_MSG("index -1 is out of bounds for dimension 1 with size 2");
    idx[2] = 2;
    CHECK_STATUS(nrt_test_run(&l, r), NRT_ERROR_INVALID_ARGUMENT);
    CHECK_MSG("index 2 is out of bounds for dimension 1 with size 2");
    idx[2] = 1;
  }
}

static void test_gather_fast_vs_reference(void) {
  /* along dim 0 of a [R, C] float64 with a [R2, C] index, and along dim 1
   * of a [R, C] bfloat16 into a transposed output: exact moves */
  enum { R = 300, C = 211, R2 = 500 };
  double *src = malloc(R * C * sizeof *src), *out[2];
  uint16_t *hsrc = malloc(R * C * sizeof *hsrc), *hout[2];
  int64_t *idx0 = malloc(R2 * C * sizeof *idx0), *idx1 = malloc(R * C * sizeof *idx1);
  for (int i = 0; i < R * C; i++) {
    uint64_t b = nrt_test_rand_u64();
    memcpy(&src[i], &b, 8);
    hsrc[i] = (uint16_t)nrt_test_rand_u64();
    idx1[i] = nrt_test_rand_range(0, C);
  }
  for (int i = 0; i < R2 * C; i++) idx0[i] = nrt_test_rand_range(0, R);
  for (int r = 0; r < 2; r++) {
    out[r] = malloc(R2 * C * sizeof *out[r]);
    hout[r] = malloc(R * C * sizeof *hout[r]);
    nrt_launch l = nrt_test_launch(NRT_OP(GATHER), NRT_FLOAT32, 2, S(R2, C), 1, 2);
    nrt_test_operand(&l, 0, out[r], NRT_FLOAT64, S(C * 8, 8));
    nrt_test_operand(&l, 1, src, NRT_FLOAT64, S(0, 8));
    nrt_test_operand(&l, 2, idx0, NRT_INT64, S(C * 8, 8));
    l.aux[0] = R;
    l.aux[1] = C * 8;
    CHECK_OK(nrt_test_run(&l, r));
    l = nrt_test_launch(NRT_OP(GATHER), NRT_FLOAT32, 2, S(R, C), 1, 2);
    nrt_test_operand(&l, 0, hout[r], NRT_BFLOAT16, S(2, R * 2));
    nrt_test_operand(&l, 1, hsrc, NRT_BFLOAT16, S(C * 2, 0));
    nrt_test_operand(&l, 2, idx1, NRT_INT64, S(C * 8, 8));
    l.aux[0] = C;
    l.aux[1] = 2;
    l.aux[2] = 1;
    CHECK_OK(nrt_test_run(&l, r));
  }
  CHECK(memcmp(out[0], out[1], R2 * C * 8) == 0);
  CHECK(memcmp(hout[0], hout[1], R * C * 2) == 0);
  int bad = 0;
  for (int i = 0; i < R2; i++)
    for (int c = 0; c < C; c++) bad += memcmp(&out[1][i * C + c], &src[idx0[i * C + c] * C + c], 8) != 0;
  for (int i = 0; i < R; i++)
    for (int c = 0; c < C; c++) bad += hout[1][c * R + i] != hsrc[i * C + idx1[i * C + c]];
  CHECK(bad == 0);
  /* the first bad index in order is reported by the parallel path */
  idx0[R2 * C - 7] = R;
  idx0[R2 * C / 2] = -2;
  for (int r = 0; r < 2; r++) {
    nrt_launch l = nrt_test_launch(NRT_OP(GATHER), NRT_FLOAT32, 2, S(R2, C), 1, 2);
    nrt_test_operand(&l, 0, out[r], NRT_FLOAT64, S(C * 8, 8));
    nrt_test_operand(&l, 1, src, NRT_FLOAT64, S(0, 8));
    nrt_test_operand(&l, 2, idx0, NRT_INT64, S(C * 8, 8));
    l.aux[0] = R;
    l.aux[1] = C * 8;
    CHECK_STATUS(nrt_test_run(&l, r), NRT_ERROR_INVALID_ARGUMENT);
    CHECK_MSG("index -2 is out of bounds for dimension 0 with size 300");
  }
  for (int r = 0; r < 2; r++) {
    free(out[r]);
    free(hout[r]);
  }
  free(src);
  free(hsrc);
  free(idx0);
  free(idx1);
}

/* 1-D scatter: self[n], index[m], src[m] (or scalar). */
static nrt_status scatter1(void *self, nrt_dtype dt, int64_t n, const int64_t *idx, void *src, int64_t m,
                           int red, int reference) {
  int64_t es = (int64_t)nrt_dtype_size(dt);
  nrt_launch l = nrt_test_launch(NRT_OP(SCATTER), NRT_FLOAT32, 1, S(m), 1, 2);
  nrt_test_operand(&l, 0, self, dt, S(0));
  nrt_test_operand(&l, 1, (void *)idx, NRT_INT64, S(8));
  nrt_test_operand(&l, 2, src, dt, S(es));
  l.compute_dtype = dt;
  l.params[0] = red;
  l.aux[0] = n;
  l.aux[1] = es;
  return nrt_test_run(&l, reference);
}

static void test_scatter_known(void) {
  const float nan = NAN;
  for (int r = 0; r < 2; r++) {
    /* zeros(3, 5).scatter_(0, [[0, 1, 2, 0]], arange(1, 11).reshape(2, 5)) */
    float self[15] = {0}, src[10];
    for (int i = 0; i < 10; i++) src[i] = (float)(i + 1);
    int64_t idx[4] = {0, 1, 2, 0};
    nrt_launch l = nrt_test_launch(NRT_OP(SCATTER), NRT_FLOAT32, 2, S(1, 4), 1, 2);
    nrt_test_operand(&l, 0, self, NRT_FLOAT32, S(0, 4));
    nrt_test_operand(&l, 1, idx, NRT_INT64, S(32, 8));
    nrt_test_operand(&l, 2, src, NRT_FLOAT32, S(20, 4));
    l.aux[0] = 3;
    l.aux[1] = 20;
    CHECK_OK(nrt_test_run(&l, r));
    const float want[15] = {1, 0, 0, 4, 0, 0, 2, 0, 0, 0, 0, 0, 3, 0, 0};
    CHECK(floats_eq(self, want, 15));

    /* scatter_add with duplicates: [9, 2, 4] */
    float a[3] = {0}, as[5] = {1, 2, 3, 4, 5};
    int64_t ai[5] = {0, 1, 0, 2, 0};
    CHECK_OK(scatter1(a, NRT_FLOAT32, 3, ai, as, 5, 1, r));
    CHECK(a[0] == 9 && a[1] == 2 && a[2] == 4);
    /* mean-sum is the sum (the caller divides) */
    float ms[3] = {1, 1, 1};
    CHECK_OK(scatter1(ms, NRT_FLOAT32, 3, ai, as, 5, 3, r));
    CHECK(ms[0] == 10 && ms[1] == 3 && ms[2] == 5);
    /* prod: [2, 3] with [0, 0, 1] <- [3, 4, 5] -> [24, 15], float and int64 */
    float pf[2] = {2, 3}, pfs[3] = {3, 4, 5};
    int64_t pi[2] = {2, 3}, pis[3] = {3, 4, 5}, pidx[3] = {0, 0, 1};
    CHECK_OK(scatter1(pf, NRT_FLOAT32, 2, pidx, pfs, 3, 2, r));
    CHECK(pf[0] == 24 && pf[1] == 15);
    CHECK_OK(scatter1(pi, NRT_INT64, 2, pidx, pis, 3, 2, r));
    CHECK(pi[0] == 24 && pi[1] == 15);
    /* complex prod, the textbook product in index order: [1+1i, 2] with
     * [0, 0, 1] <- [i, 2, inf] -> [(1+1i) i 2, 2 inf] = [-2+2i, inf+nan i]
     * (0 * inf in the imaginary part, as c10::complex); complex64 and
     * complex128; other complex reductions are refused */
    float c64[4] = {1, 1, 2, 0}, c64s[6] = {0, 1, 2, 0, INFINITY, 0};
    CHECK_OK(scatter1(c64, NRT_COMPLEX64, 2, pidx, c64s, 3, 2, r));
    CHECK(c64[0] == -2 && c64[1] == 2 && isinf(c64[2]) && isnan(c64[3]));
    double c128[4] = {1, 1, 2, 0}, c128s[6] = {0, 1, 2, 0, 3, 0};
    CHECK_OK(scatter1(c128, NRT_COMPLEX128, 2, pidx, c128s, 3, 2, r));
    CHECK(c128[0] == -2 && c128[1] == 2 && c128[2] == 6 && c128[3] == 0);
    CHECK_STATUS(scatter1(c128, NRT_COMPLEX128, 2, pidx, c128s, 3, 1, r), NRT_ERROR_UNSUPPORTED);
    /* amax / amin propagate NaN (PyTorch values):
     * [1, 5].amax([0, 0, 1] <- [3, nan, 2]) = [nan, 5]
     * [1, 5].amin([0, 0, 1] <- [3, nan, 2]) = [nan, 2]
     * [1, 5].amin([0, 1, 1] <- [2, -1, 7]) = [1, -1]
     * [nan, 5].amax([0, 1] <- [3, 2]) = [nan, 5] */
    float m1[2] = {1, 5}, m1s[3] = {3, nan, 2};
    CHECK_OK(scatter1(m1, NRT_FLOAT32, 2, pidx, m1s, 3, 4, r));
    CHECK(isnan(m1[0]) && m1[1] == 5);
    float m2[2] = {1, 5};
    CHECK_OK(scatter1(m2, NRT_FLOAT32, 2, pidx, m1s, 3, 5, r));
    CHECK(isnan(m2[0]) && m2[1] == 2);
    float m3[2] = {1, 5}, m3s[3] = {2, -1, 7};
    int64_t m3i[3] = {0, 1, 1};
    CHECK_OK(scatter1(m3, NRT_FLOAT32, 2, m3i, m3s, 3, 5, r));
    CHECK(m3[0] == 1 && m3[1] == -1);
    float m4[2] = {nan, 5}, m4s[2] = {3, 2};
    int64_t m4i[2] = {0, 1};
    CHECK_OK(scatter1(m4, NRT_FLOAT32, 2, m4i, m4s, 2, 4, r));
    CHECK(isnan(m4[0]) && m4[1] == 5);
    /* int64 assign and amax are exact */
    int64_t big[2] = {0, INT64_MIN}, bigs[2] = {INT64_MAX - 1, INT64_MIN + 1};
    CHECK_OK(scatter1(big, NRT_INT64, 2, m4i, bigs, 2, 4, r));
    CHECK(big[0] == INT64_MAX - 1 && big[1] == INT64_MIN + 1);
    double dbl[2] = {0, 0}, dbls[2] = {0.1, 1e300};
    CHECK_OK(scatter1(dbl, NRT_FLOAT64, 2, m4i, dbls, 2, 0, r));
    CHECK(dbl[0] == 0.1 && dbl[1] == 1e300);
    /* scalar source (p1): s0 in the compute domain */
    int64_t sc[4] = {0, 0, 0, 0}, dummy = 0, sci[2] = {3, 1};
    nrt_launch ls = nrt_test_launch(NRT_OP(SCATTER), NRT_FLOAT32, 1, S(2), 1, 2);
    nrt_test_operand(&ls, 0, sc, NRT_INT64, S(0));
    nrt_test_operand(&ls, 1, sci, NRT_INT64, S(8));
    nrt_test_operand(&ls, 2, &dummy, NRT_INT64, S(0));
    ls.compute_dtype = NRT_INT64;
    ls.params[1] = 1;
    ls.scalars[0].i = 7;
    ls.aux[0] = 4;
    ls.aux[1] = 8;
    CHECK_OK(nrt_test_run(&ls, r));
    CHECK(sc[0] == 0 && sc[1] == 7 && sc[2] == 0 && sc[3] == 7);
    /* errors: no wrap of negatives; the dim comes from aux[2] */
    int64_t bi[2] = {0, -1};
    CHECK_STATUS(scatter1(a, NRT_FLOAT32, 3, bi, as, 2, 0, r), NRT_ERROR_INVALID_ARGUMENT);
    CHECK_MSG("index -1 is out of bounds for dimension 0 with size 3");
    bi[1] = 3;
    CHECK_STATUS(scatter1(a, NRT_FLOAT32, 3, bi, as, 2, 1, r), NRT_ERROR_INVALID_ARGUMENT);
    CHECK_MSG("index 3 is out of bounds for dimension 0 with size 3");
    CHECK_STATUS(scatter1(a, NRT_FLOAT32, 3, bi, as, 2, 9, r), NRT_ERROR_INVALID_ARGUMENT);
  }
}

static void test_scatter_fast_vs_reference(void) {
  /* scatter_add along dim 1 of a [R, C] self from a [R, M] index: many
   * collisions; serial order makes both paths bit-identical */
  enum { R = 64, C = 50, M = 300 };
  const nrt_dtype dts[] = {NRT_FLOAT32, NRT_BFLOAT16, NRT_INT32};
  int64_t *idx = malloc(R * M * sizeof *idx);
  for (int i = 0; i < R * M; i++) idx[i] = nrt_test_rand_range(0, C);
  int bad = 0;
  for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++) {
    for (int red = 0; red <= 5; red++) {
      nrt_dtype dt = dts[t];
      int64_t es = (int64_t)nrt_dtype_size(dt);
      char *src = malloc((size_t)(R * M * es)), *self[2];
      for (int i = 0; i < R * M; i++) nrt_ref_store_f64(src + i * es, dt, (double)nrt_test_rand_range(-64, 64) / 16);
      for (int r = 0; r < 2; r++) {
        self[r] = malloc((size_t)(R * C * es));
        for (int i = 0; i < R * C; i++) nrt_ref_store_f64(self[r] + i * es, dt, (double)(i % 7) / 4);
        nrt_launch l = nrt_test_launch(NRT_OP(SCATTER), NRT_FLOAT32, 2, S(R, M), 1, 2);
        nrt_test_operand(&l, 0, self[r], dt, S(C * es, 0));
        nrt_test_operand(&l, 1, idx, NRT_INT64, S(M * 8, 8));
        nrt_test_operand(&l, 2, src, dt, S(M * es, es));
        l.compute_dtype = dt;
        l.params[0] = red;
        l.aux[0] = C;
        l.aux[1] = es;
        l.aux[2] = 1;
        CHECK_OK(nrt_test_run(&l, r));
      }
      bad += memcmp(self[0], self[1], (size_t)(R * C * es)) != 0;
      free(self[0]);
      free(self[1]);
      free(src);
    }
  }
  CHECK(bad == 0);
  free(idx);
}

/* ---- NONZERO ------------------------------------------------------------------------- */

static void test_nonzero(void) {
  const float nan = NAN;
  float x[6] = {0, 1.5f, -0.0f, nan, 0, 2};
  for (int r = 0; r < 2; r++) {
    int64_t out[6] = {-9, -9, -9, -9, -9, -9};
    nrt_launch l = nrt_test_launch(NRT_OP(NONZERO), NRT_FLOAT32, 2, S(2, 3), 1, 1);
    nrt_test_operand(&l, 0, out, NRT_INT64, S(16, 8));
    nrt_test_operand(&l, 1, x, NRT_FLOAT32, S(12, 4));
    l.params[0] = 3;
    CHECK_OK(nrt_test_run(&l, r));
    const int64_t want[6] = {0, 1, 1, 0, 1, 2};
    CHECK(memcmp(out, want, sizeof want) == 0);
    /* the transposed view [[0, nan], [1.5, 0], [-0, 2]] */
    l.sizes[0] = 3;
    l.sizes[1] = 2;
    nrt_test_operand(&l, 1, x, NRT_FLOAT32, S(4, 12));
    CHECK_OK(nrt_test_run(&l, r));
    const int64_t want_t[6] = {0, 1, 1, 0, 2, 1};
    CHECK(memcmp(out, want_t, sizeof want_t) == 0);
    /* the count differs from p0: an error, and nothing past p0 rows written */
    int64_t *small = malloc(2 * 2 * sizeof *small);
    nrt_test_operand(&l, 0, small, NRT_INT64, S(16, 8));
    l.params[0] = 2;
    CHECK_STATUS(nrt_test_run(&l, r), NRT_ERROR_INVALID_ARGUMENT);
    CHECK_PREFIX("nonzero: input changed");
    free(small);
    /* 0-d input: no coordinates, only the count */
    nrt_launch l0 = nrt_test_launch(NRT_OP(NONZERO), NRT_FLOAT32, 0, S(0), 1, 1);
    nrt_test_operand(&l0, 0, out, NRT_INT64, S(0));
    nrt_test_operand(&l0, 1, &x[1], NRT_FLOAT32, S(0));
    l0.params[0] = 1;
    CHECK_OK(nrt_test_run(&l0, r));
    l0.params[0] = 0;
    CHECK_STATUS(nrt_test_run(&l0, r), NRT_ERROR_INVALID_ARGUMENT);
  }
  /* large 3-D uint8 input with a strided last dim: parallel blocks */
  enum { A = 37, B = 41, C = 53 };
  uint8_t *in = malloc(A * B * C * 2);
  int64_t count = 0;
  for (int i = 0; i < A * B * C * 2; i++)
    in[i] = (uint8_t)(nrt_test_rand_u64() % 5 == 0 ? (nrt_test_rand_u64() % 255) + 1 : 0);
  for (int i = 0; i < A * B * C; i++) count += in[2 * i] != 0;
  int64_t *out[2];
  for (int r = 0; r < 2; r++) {
    out[r] = malloc((size_t)count * 3 * sizeof *out[r]);
    nrt_launch l = nrt_test_launch(NRT_OP(NONZERO), NRT_FLOAT32, 3, S(A, B, C), 1, 1);
    nrt_test_operand(&l, 0, out[r], NRT_INT64, S(24, 8, 0)); /* row, coordinate strides */
    nrt_test_operand(&l, 1, in, NRT_UINT8, S(B * C * 2, C * 2, 2));
    l.params[0] = count;
    CHECK_OK(nrt_test_run(&l, r));
  }
  CHECK(memcmp(out[0], out[1], (size_t)count * 24) == 0);
  int bad = 0;
  for (int64_t k = 0; k < count; k++) {
    int64_t *c = out[1] + 3 * k;
    bad += in[2 * ((c[0] * B + c[1]) * C + c[2])] == 0;
    if (k > 0) bad += (c[0] * B + c[1]) * C + c[2] <= (c[-3] * B + c[-2]) * C + c[-1];
  }
  CHECK(bad == 0);
  free(out[0]);
  free(out[1]);
  free(in);
}

/* ---- ARANGE / LINSPACE --------------------------------------------------------------- */

static void test_arange(void) {
  for (int r = 0; r < 2; r++) {
    float f[100];
    nrt_launch l = nrt_test_launch(NRT_OP(ARANGE), NRT_FLOAT32, 1, S(100), 1, 0);
    nrt_test_operand(&l, 0, f, NRT_FLOAT32, S(4));
    l.scalars[0].f = -1.5;
    l.scalars[1].f = 0.25;
    CHECK_OK(nrt_test_run(&l, r));
    int bad = 0;
    for (int i = 0; i < 100; i++) bad += f[i] != -1.5f + 0.25f * (float)i;
    CHECK(bad == 0);
    /* int64: exact far beyond float range */
    int64_t q[7];
    l = nrt_test_launch(NRT_OP(ARANGE), NRT_FLOAT32, 1, S(7), 1, 0);
    nrt_test_operand(&l, 0, q, NRT_INT64, S(8));
    l.compute_dtype = NRT_INT64;
    l.scalars[0].i = (1ll << 60) + 1;
    l.scalars[1].i = -3;
    CHECK_OK(nrt_test_run(&l, r));
    for (int i = 0; i < 7; i++) CHECK(q[i] == (1ll << 60) + 1 - 3 * i);
    /* float64: start + i * step in double */
    double d[5];
    l = nrt_test_launch(NRT_OP(ARANGE), NRT_FLOAT32, 1, S(5), 1, 0);
    nrt_test_operand(&l, 0, d, NRT_FLOAT64, S(8));
    l.scalars[0].f = 0.1;
    l.scalars[1].f = 0.2;
    CHECK_OK(nrt_test_run(&l, r));
    for (int i = 0; i < 5; i++) CHECK(d[i] == 0.1 + (double)i * 0.2);
  }
  /* strided bfloat16 and int16 outputs, fast == reference */
  enum { N = 100000 };
  uint16_t *o[2];
  for (int t = 0; t < 2; t++) {
    for (int r = 0; r < 2; r++) {
      o[r] = calloc(2 * N, 2);
      nrt_launch l = nrt_test_launch(NRT_OP(ARANGE), NRT_FLOAT32, 1, S(N), 1, 0);
      nrt_test_operand(&l, 0, o[r], t ? NRT_INT16 : NRT_BFLOAT16, S(4));
      l.compute_dtype = t ? NRT_INT16 : NRT_BFLOAT16;
      if (t) {
        l.scalars[0].i = -5;
        l.scalars[1].i = 7;
      } else {
        l.scalars[0].f = -3.3;
        l.scalars[1].f = 0.01;
      }
      CHECK_OK(nrt_test_run(&l, r));
    }
    CHECK(memcmp(o[0], o[1], 4 * N) == 0);
    CHECK(o[0][1] == 0 && o[0][2 * N - 1] == 0); /* the gaps stay untouched */
    if (t) CHECK((int16_t)o[0][2 * 1000] == (int16_t)(-5 + 7 * 1000));
    free(o[0]);
    free(o[1]);
  }
}

/* torch.linspace(a, b, n, dtype=...) bits at a few indices, including ones
 * where a plain double formula rounds differently. */
typedef struct lin_case {
  nrt_dtype dt;
  double a, b;
  int64_t n;
  int64_t at[12][2];
} lin_case;

static void test_linspace(void) {
  const lin_case cases[] = {
      {NRT_FLOAT32, -3.7, 11.3, 777,
       {{0, -1066611507ll}, {1, -1066692582ll}, {3, -1066854733ll}, {5, -1067016884ll},
        {14, -1067746563ll}, {16, -1067908714ll}, {18, -1068070865ll}, {27, -1068800544ll},
        {29, -1068962695ll}, {387, 1081210494ll}, {388, 1081291573ll}, {776, 1093979341ll}}},
      {NRT_FLOAT64, -3.7, 11.3, 777,
       {{0, -4607857958744122982ll}, {22, -4608815554025715935ll}, {41, -4609642568132546213ll},
        {42, -4609686095190800439ll}, {53, -4610164892831596915ll}, {60, -4610469582239376491ll},
        {61, -4610513109297630717ll}, {67, -4610774271647156067ll}, {68, -4610817798705410293ll},
        {387, 4615695731033767125ll}, {388, 4615739258092021351ll}, {776, 4622550952528419226ll}}},
      {NRT_FLOAT16, -100.0, 1000.0, 1234,
       {{0, -10688ll}, {20, -10974ll}, {24, -11030ll}, {27, -11074ll}, {39, -11244ll},
        {52, -11596ll}, {63, -11910ll}, {72, -12168ll}, {74, -12224ll}, {616, 24326ll},
        {617, 24330ll}, {1233, 25552ll}}},
      {NRT_BFLOAT16, 0.001, 7.1, 1001,
       {{0, 14979ll}, {1, 15364ll}, {2, 15480ll}, {3, 15542ll}, {4, 15600ll}, {6, 15666ll},
        {7, 15695ll}, {8, 15724ll}, {9, 15748ll}, {499, 16483ll}, {500, 16483ll}, {1000, 16611ll}}},
      {NRT_FLOAT32, 5.0, -3.0, 3001,
       {{0, 1084227584ll}, {132, 1083489387ll}, {169, 1083282468ll}, {322, 1082426830ll},
        {359, 1082219911ll}, {388, 1081985030ll}, {404, 1081806073ll}, {425, 1081571192ll},
        {441, 1081392235ll}, {1499, 1065375586ll}, {1500, 1065353215ll}, {3000, -1069547520ll}}},
  };
  for (int r = 0; r < 2; r++) {
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
      const lin_case *lc = &cases[c];
      int64_t es = (int64_t)nrt_dtype_size(lc->dt);
      char *out = malloc((size_t)(lc->n * es));
      nrt_launch l = nrt_test_launch(NRT_OP(LINSPACE), NRT_FLOAT32, 1, S(lc->n), 1, 0);
      nrt_test_operand(&l, 0, out, lc->dt, S(es));
      l.compute_dtype = lc->dt;
      l.scalars[0].f = lc->a;
      l.scalars[1].f = (lc->b - lc->a) / (double)(lc->n - 1);
      l.scalars[2].f = lc->b;
      CHECK_OK(nrt_test_run(&l, r));
      int bad = 0;
      for (int k = 0; k < 12; k++) {
        int64_t i = lc->at[k][0], got = 0;
        if (es == 2) got = *(int16_t *)(out + i * es);
        else if (es == 4) got = *(int32_t *)(out + i * es);
        else got = *(int64_t *)(out + i * es);
        if (got != lc->at[k][1]) {
          fprintf(stderr, "linspace %s [%lld]: bits %lld, torch %lld\n", nrt_dtype_name(lc->dt),
                  (long long)i, (long long)got, (long long)lc->at[k][1]);
          bad++;
        }
      }
      CHECK(bad == 0);
      free(out);
    }
    /* integer output: torch.linspace(0, 10, 4, dtype=int64) = [0, 3, 6, 10] */
    int64_t q[4];
    nrt_launch l = nrt_test_launch(NRT_OP(LINSPACE), NRT_FLOAT32, 1, S(4), 1, 0);
    nrt_test_operand(&l, 0, q, NRT_INT64, S(8));
    l.compute_dtype = NRT_INT64;
    l.scalars[0].i = 0;
    l.scalars[2].i = 10;
    CHECK_OK(nrt_test_run(&l, r));
    CHECK(q[0] == 0 && q[1] == 3 && q[2] == 6 && q[3] == 10);
    /* one step: the start */
    float one;
    l = nrt_test_launch(NRT_OP(LINSPACE), NRT_FLOAT32, 1, S(1), 1, 0);
    nrt_test_operand(&l, 0, &one, NRT_FLOAT32, S(4));
    l.scalars[0].f = 2.5;
    l.scalars[2].f = 7;
    CHECK_OK(nrt_test_run(&l, r));
    CHECK(one == 2.5f);
  }
}

/* ---- TRIANGLE ------------------------------------------------------------------------------ */

static void test_triangle(void) {
  int64_t x[12];
  for (int i = 0; i < 12; i++) x[i] = i + 1 + (i == 5 ? (1ll << 62) : 0);
  struct {
    int upper;
    int64_t diag;
    int64_t want[12];
  } cases[] = {
      {0, 0, {1, 0, 0, 0, 5, 6 + (1ll << 62), 0, 0, 9, 10, 11, 0}},
      {1, 1, {0, 2, 3, 4, 0, 0, 7, 8, 0, 0, 0, 12}},
      {0, -1, {0, 0, 0, 0, 5, 0, 0, 0, 9, 10, 0, 0}},
      {1, -1, {1, 2, 3, 4, 5, 6 + (1ll << 62), 7, 8, 0, 10, 11, 12}},
      {0, INT64_MAX, {1, 2, 3, 4, 5, 6 + (1ll << 62), 7, 8, 9, 10, 11, 12}},
      {0, INT64_MIN, {0}},
      {1, INT64_MIN, {1, 2, 3, 4, 5, 6 + (1ll << 62), 7, 8, 9, 10, 11, 12}},
      {1, INT64_MAX, {0}},
      {1, 4, {0}},
  };
  for (int r = 0; r < 2; r++)
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
      int64_t out[12];
      memset(out, 0x55, sizeof out);
      nrt_launch l = nrt_test_launch(NRT_OP(TRIANGLE), NRT_FLOAT32, 2, S(3, 4), 1, 1);
      nrt_test_operand(&l, 0, out, NRT_INT64, S(32, 8));
      nrt_test_operand(&l, 1, x, NRT_INT64, S(32, 8));
      l.compute_dtype = NRT_INT64;
      l.params[0] = cases[c].upper;
      l.params[1] = cases[c].diag;
      CHECK_OK(nrt_test_run(&l, r));
      if (memcmp(out, cases[c].want, sizeof out) != 0) {
        fprintf(stderr, "triangle case %zu (reference %d) wrong\n", c, r);
        nrt_test_failures++;
      }
    }
  /* batched, transposed input, in place and out of place: fast == reference
   * == the definition */
  enum { B = 3, R = 37, C = 45 };
  for (int upper = 0; upper < 2; upper++)
    for (int64_t diag = -40; diag <= 50; diag += 9) {
      float *in = malloc(B * R * C * sizeof *in), *o[2], *ip[2];
      for (int i = 0; i < B * R * C; i++) in[i] = (float)i + 0.5f;
      for (int r = 0; r < 2; r++) {
        o[r] = malloc(B * R * C * sizeof *o[r]);
        ip[r] = malloc(B * R * C * sizeof *ip[r]);
        memcpy(ip[r], in, B * R * C * sizeof *in);
        /* in viewed as [B][R][C] with R and C swapped in memory */
        nrt_launch l = nrt_test_launch(NRT_OP(TRIANGLE), NRT_FLOAT32, 3, S(B, R, C), 1, 1);
        nrt_test_operand(&l, 0, o[r], NRT_FLOAT32, S(R * C * 4, C * 4, 4));
        nrt_test_operand(&l, 1, in, NRT_FLOAT32, S(R * C * 4, 4, R * 4));
        l.params[0] = upper;
        l.params[1] = diag;
        CHECK_OK(nrt_test_run(&l, r));
        nrt_test_operand(&l, 0, ip[r], NRT_FLOAT32, S(R * C * 4, C * 4, 4));
        nrt_test_operand(&l, 1, ip[r], NRT_FLOAT32, S(R * C * 4, C * 4, 4));
        CHECK_OK(nrt_test_run(&l, r));
      }
      CHECK(memcmp(o[0], o[1], B * R * C * 4) == 0);
      CHECK(memcmp(ip[0], ip[1], B * R * C * 4) == 0);
      int bad = 0;
      for (int b = 0; b < B; b++)
        for (int i = 0; i < R; i++)
          for (int j = 0; j < C; j++) {
            bool keep = upper ? j - i >= diag : j - i <= diag;
            int at = (b * R + i) * C + j;
            bad += o[1][at] != (keep ? in[b * R * C + j * R + i] : 0.0f);
            bad += ip[1][at] != (keep ? in[at] : 0.0f);
          }
      CHECK(bad == 0);
      free(in);
      for (int r = 0; r < 2; r++) {
        free(o[r]);
        free(ip[r]);
      }
    }
  /* ndim < 2 is refused */
  float one = 1;
  nrt_launch l = nrt_test_launch(NRT_OP(TRIANGLE), NRT_FLOAT32, 1, S(1), 1, 1);
  nrt_test_operand(&l, 0, &one, NRT_FLOAT32, S(4));
  nrt_test_operand(&l, 1, &one, NRT_FLOAT32, S(4));
  CHECK_STATUS(nrt_test_run(&l, 0), NRT_ERROR_INVALID_ARGUMENT);
}

/* ---- SORT ------------------------------------------------------------------------------------ */

static nrt_launch sort_launch(void *vals, void *idx, void *in, nrt_dtype dt, int64_t rows, int64_t n,
                              bool desc) {
  int64_t es = (int64_t)nrt_dtype_size(dt);
  nrt_launch l = nrt_test_launch(NRT_OP(SORT), NRT_FLOAT32, 2, S(rows, n), 2, 1);
  nrt_test_operand(&l, 0, vals, dt, S(n * es, es));
  nrt_test_operand(&l, 1, idx, NRT_INT64, S(n * 8, 8));
  nrt_test_operand(&l, 2, in, dt, S(n * es, es));
  l.compute_dtype = dt;
  l.params[0] = desc;
  return l;
}

static void test_sort_known(void) {
  const float nan = NAN;
  /* torch.sort([1, nan, 2, -0., nan, 0., 1, -inf], stable=True) */
  const float x[8] = {1, nan, 2, -0.0f, nan, 0.0f, 1, -INFINITY};
  const int64_t want_asc[8] = {7, 3, 5, 0, 6, 2, 1, 4};
  const int64_t want_desc[8] = {1, 4, 2, 0, 6, 3, 5, 7};
  for (int r = 0; r < 2; r++)
    for (int desc = 0; desc < 2; desc++) {
      float v[8];
      int64_t ix[8];
      nrt_launch l = sort_launch(v, ix, (void *)x, NRT_FLOAT32, 1, 8, desc);
      CHECK_OK(nrt_test_run(&l, r));
      const int64_t *want = desc ? want_desc : want_asc;
      CHECK(memcmp(ix, want, sizeof ix) == 0);
      for (int i = 0; i < 8; i++) CHECK(memcmp(&v[i], &x[want[i]], 4) == 0); /* -0.0 stays -0.0 */
      /* in place: values written over the input */
      float y[8];
      memcpy(y, x, sizeof y);
      l = sort_launch(y, ix, y, NRT_FLOAT32, 1, 8, desc);
      CHECK_OK(nrt_test_run(&l, r));
      CHECK(memcmp(ix, want, sizeof ix) == 0);
      for (int i = 0; i < 8; i++) CHECK(memcmp(&y[i], &x[want[i]], 4) == 0);
    }
  /* int16 rows, sorted along dim 0 of a 3x4 (a strided row) */
  int16_t m[12] = {5, -1, 3, 3, -7, -1, 3, 0, 5, 2, -32768, 32767};
  for (int r = 0; r < 2; r++) {
    int16_t v[12];
    int64_t ix[12];
    nrt_launch l = nrt_test_launch(NRT_OP(SORT), NRT_FLOAT32, 2, S(4, 3), 2, 1);
    nrt_test_operand(&l, 0, v, NRT_INT16, S(6, 2));
    nrt_test_operand(&l, 1, ix, NRT_INT64, S(24, 8));
    nrt_test_operand(&l, 2, m, NRT_INT16, S(2, 8));
    l.compute_dtype = NRT_INT16;
    CHECK_OK(nrt_test_run(&l, r));
    /* columns: [5, -7, 5], [-1, -1, 2], [3, 3, -32768], [3, 0, 32767] */
    const int16_t wv[12] = {-7, 5, 5, -1, -1, 2, -32768, 3, 3, 0, 3, 32767};
    const int64_t wi[12] = {1, 0, 2, 0, 1, 2, 2, 0, 1, 1, 0, 2};
    CHECK(memcmp(v, wv, sizeof v) == 0);
    CHECK(memcmp(ix, wi, sizeof ix) == 0);
  }
  /* a 0-d input is a row of one */
  for (int r = 0; r < 2; r++) {
    double d = 4.25, dv = 0;
    int64_t di = 9;
    nrt_launch l = nrt_test_launch(NRT_OP(SORT), NRT_FLOAT32, 0, S(0), 2, 1);
    nrt_test_operand(&l, 0, &dv, NRT_FLOAT64, S(0));
    nrt_test_operand(&l, 1, &di, NRT_INT64, S(0));
    nrt_test_operand(&l, 2, &d, NRT_FLOAT64, S(0));
    CHECK_OK(nrt_test_run(&l, r));
    CHECK(dv == 4.25 && di == 0);
  }
}

/* Random rows full of ties, NaNs and signed zeros: fast == reference, and
 * the result is sorted and stable by the definition. */
static void test_sort_random(void) {
  const nrt_dtype dts[] = {NRT_FLOAT32, NRT_FLOAT16, NRT_INT64, NRT_UINT8, NRT_FLOAT64};
  const int64_t shapes[][2] = {{37, 1000}, {1, 5000}, {300, 7}, {5, 1}, {2, 33}};
  int bad = 0;
  for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
      for (int desc = 0; desc < 2; desc++) {
        nrt_dtype dt = dts[t];
        int64_t rows = shapes[s][0], n = shapes[s][1], es = (int64_t)nrt_dtype_size(dt);
        char *in = malloc((size_t)(rows * n * es)), *v[2];
        int64_t *ix[2];
        for (int64_t i = 0; i < rows * n; i++) {
          double val = (double)nrt_test_rand_range(-20, 20) / 4;
          if (nrt_dtype_is_floating(dt)) {
            uint64_t k = nrt_test_rand_u64() % 16;
            if (k == 0) val = NAN;
            else if (k == 1) val = -0.0;
            else if (k == 2) val = 0.0;
            else if (k == 3) val = (k & 1) ? INFINITY : -INFINITY;
          } else {
            val = (double)nrt_test_rand_range(dt == NRT_UINT8 ? 0 : -30, 30);
          }
          nrt_ref_store_f64(in + i * es, dt, val);
        }
        for (int r = 0; r < 2; r++) {
          v[r] = malloc((size_t)(rows * n * es));
          ix[r] = malloc((size_t)(rows * n) * sizeof *ix[r]);
          nrt_launch l = sort_launch(v[r], ix[r], in, dt, rows, n, desc);
          CHECK_OK(nrt_test_run(&l, r));
        }
        bad += memcmp(v[0], v[1], (size_t)(rows * n * es)) != 0;
        bad += memcmp(ix[0], ix[1], (size_t)(rows * n) * 8) != 0;
        for (int64_t row = 0; row < rows; row++)
          for (int64_t j = 0; j < n; j++) {
            int64_t k = ix[0][row * n + j];
            bad += memcmp(v[0] + (row * n + j) * es, in + (row * n + k) * es, (size_t)es) != 0;
            if (j == 0) continue;
            int64_t kp = ix[0][row * n + j - 1];
            double a = nrt_ref_load_f64(in + (row * n + kp) * es, dt);
            double b = nrt_ref_load_f64(in + (row * n + k) * es, dt);
            /* rank: NaN above everything, -0 == 0 */
            int cmp = isnan(a) ? (isnan(b) ? 0 : 1) : isnan(b) ? -1 : (a < b ? -1 : a > b);
            if (desc) cmp = -cmp;
            bad += cmp > 0 || (cmp == 0 && kp > k);
          }
        if (bad) {
          fprintf(stderr, "sort %s %lldx%lld desc %d wrong\n", nrt_dtype_name(dt), (long long)rows,
                  (long long)n, desc);
          nrt_test_failures++;
          bad = 0;
        }
        for (int r = 0; r < 2; r++) {
          free(v[r]);
          free(ix[r]);
        }
        free(in);
      }
}

/* ---- validation of operand counts (launch.c) ------------------------------------------------ */

static void test_validation(void) {
  float x[4] = {0}, out[4];
  int64_t idx[4] = {0};
  nrt_launch l = nrt_test_launch(NRT_OP(INDEX_GATHER), NRT_FLOAT32, 1, S(4), 1, 2);
  nrt_test_operand(&l, 0, out, NRT_FLOAT32, S(4));
  nrt_test_operand(&l, 1, x, NRT_FLOAT32, S(0));
  nrt_test_operand(&l, 2, idx, NRT_INT64, S(8));
  nrt_test_operand(&l, 3, idx, NRT_INT64, S(8));
  l.aux[0] = 4;
  l.aux[1] = 4;
  l.aux[2] = 4;
  l.aux[3] = 4;
  l.params[0] = 0;
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT); /* K >= 1 */
  l.params[0] = 7;
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT); /* 2 + K <= 8 */
  l.params[0] = 2;
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT); /* ninputs != 1 + K */
  l.ninputs = 3;
  CHECK_OK(nrt_launch_run(&l));
  l.op = NRT_OP(INDEX_PUT);
  l.ninputs = 2;
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT);
  l.params[0] = 1;
  CHECK_OK(nrt_launch_run(&l));
  /* SORT needs two outputs */
  nrt_launch s = sort_launch(out, idx, x, NRT_FLOAT32, 1, 4, false);
  CHECK_OK(nrt_launch_run(&s));
  s.noutputs = 1;
  s.ninputs = 2;
  CHECK_STATUS(nrt_launch_run(&s), NRT_ERROR_INVALID_ARGUMENT);
}

/* COPY_ORDERED: x[1:] = x[:-1] within one buffer reads what it wrote, in the
 * CPU's order: 64-byte blocks loaded before they are stored, then one element
 * at a time; sizes[0] is the fastest dim; a stride-0 source is read once per
 * row for the blocks. */
static void test_copy_ordered(void) {
  for (int r = 0; r < 2; r++) {
    float buf[20];
    for (int i = 0; i < 20; i++) buf[i] = (float)i;
    nrt_launch l = nrt_test_launch(NRT_OP(COPY_ORDERED), NRT_FLOAT32, 1, S(19), 1, 1);
    nrt_test_operand(&l, 0, buf + 1, NRT_FLOAT32, S(4));
    nrt_test_operand(&l, 1, buf, NRT_FLOAT32, S(4));
    l.params[0] = 64;
    CHECK_OK(nrt_test_run(&l, r));
    for (int i = 0; i < 20; i++) {
      float want = i == 0 ? 0.0f : i <= 16 ? (float)(i - 1) : 15.0f;
      CHECK(buf[i] == want);
    }
    /* no blocks: every element reads its neighbour's new value */
    for (int i = 0; i < 20; i++) buf[i] = (float)i;
    l.params[0] = 0;
    CHECK_OK(nrt_test_run(&l, r));
    for (int i = 0; i < 20; i++) CHECK(buf[i] == 0.0f);
    /* two rows of 3 (byte stride 16 between rows), sizes[0] fastest; then a
     * broadcast source: the first element of each row copied along it */
    int64_t m[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    nrt_launch l2 = nrt_test_launch(NRT_OP(COPY_ORDERED), NRT_INT64, 2, S(3, 2), 1, 1);
    nrt_test_operand(&l2, 0, m + 1, NRT_INT64, S(8, 32));
    nrt_test_operand(&l2, 1, m, NRT_INT64, S(8, 32));
    l2.params[0] = 64;
    CHECK_OK(nrt_test_run(&l2, r));
    int64_t want2[8] = {0, 0, 0, 0, 4, 4, 4, 4};
    CHECK(memcmp(m, want2, sizeof m) == 0);
    nrt_launch bad = l2;
    bad.operands[1].dtype = NRT_INT32;
    CHECK(nrt_test_run(&bad, r) == NRT_ERROR_INVALID_ARGUMENT);
  }
}

int main(void) {
  nrt_test_seed(0x2545F4914F6CDD1Dull);
  printf("test_kernels_index\n");
  RUN_TEST(test_index_gather_known);
  RUN_TEST(test_index_gather_errors);
  RUN_TEST(test_index_select_error_kinds);
  RUN_TEST(test_index_exact);
  RUN_TEST(test_index_fastest_dim_first);
  RUN_TEST(test_index_put_known);
  RUN_TEST(test_index_fast_vs_reference);
  RUN_TEST(test_gather_known);
  RUN_TEST(test_gather_fast_vs_reference);
  RUN_TEST(test_scatter_known);
  RUN_TEST(test_scatter_fast_vs_reference);
  RUN_TEST(test_nonzero);
  RUN_TEST(test_arange);
  RUN_TEST(test_linspace);
  RUN_TEST(test_triangle);
  RUN_TEST(test_sort_known);
  RUN_TEST(test_sort_random);
  RUN_TEST(test_validation);
  RUN_TEST(test_copy_ordered);
  return TEST_RESULT();
}
