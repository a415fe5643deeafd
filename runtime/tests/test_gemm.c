/* GEMM kernel tests: the packed fast path (on every micro-kernel this host
 * can run) against the reference triple loop, over shapes that exercise
 * edges, transposed and broadcast operands, batches, bias, alpha/beta and
 * the low-precision dtypes; plus exact known results. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "testing.h"
#include "kernels/common/common.h"
#include "kernels/common/gemm_ukernel.h"
#include "nrt/ops/gemm.h"

typedef struct gcase {
  int64_t batch, m, n, k;
  bool ta, tb;          /* A / B stored transposed */
  nrt_dtype adt, bdt, cdt;
  int bias;             /* 0 none, 1 full, 2 row vector (broadcast over m and batch) */
  double alpha, beta;
  bool b_broadcast;     /* B shared across the batch (batch stride 0) */
  bool a_flip;          /* A rows walked backwards (negative m stride) */
} gcase;

static double eps_of(nrt_dtype dt) {
  switch (dt) {
  case NRT_BFLOAT16: return 1.0 / 128;
  case NRT_FLOAT16: return 1.0 / 1024;
  default: return 1.0 / (1 << 20);
  }
}

/* Builds the launch for case c over freshly filled buffers, runs it on
 * the fast path (every ISA up to the host's) and the reference, and
 * compares element-wise against a tolerance scaled by sum |a||b|. */
static void run_case(const gcase *c) {
  int64_t B = c->batch, M = c->m, N = c->n, K = c->k;
  size_t as = nrt_dtype_size(c->adt), bs = nrt_dtype_size(c->bdt), cs = nrt_dtype_size(c->cdt);
  int64_t bb = c->b_broadcast ? 1 : B;
  void *a = calloc((size_t)(B * M * K) + 1, as), *b = calloc((size_t)(bb * K * N) + 1, bs);
  void *bias = calloc((size_t)(B * M * N) + 1, cs);
  void *out = calloc((size_t)(B * M * N) + 1, cs), *ref = calloc((size_t)(B * M * N) + 1, cs);
  for (int64_t i = 0; i < B * M * K; i++) nrt_test_put(a, c->adt, i, nrt_test_urand());
  for (int64_t i = 0; i < bb * K * N; i++) nrt_test_put(b, c->bdt, i, nrt_test_urand());
  for (int64_t i = 0; i < B * M * N; i++) nrt_test_put(bias, c->cdt, i, nrt_test_urand());

  nrt_launch l;
  memset(&l, 0, sizeof l);
  l.op = NRT_OP(GEMM);
  l.ndim = 4;
  l.sizes[0] = B; l.sizes[1] = M; l.sizes[2] = N; l.sizes[3] = K;
  l.noutputs = 1;
  l.ninputs = c->bias ? 3 : 2;
  l.compute_dtype = NRT_FLOAT32;
  l.scalars[0].f = c->alpha;
  l.scalars[1].f = c->beta;
  nrt_operand *C = &l.operands[0], *A = &l.operands[1], *Bo = &l.operands[2], *Bi = &l.operands[3];
  C->dtype = c->cdt;
  C->strides[0] = M * N * (int64_t)cs; C->strides[1] = N * (int64_t)cs; C->strides[2] = (int64_t)cs;
  A->data = a;
  A->dtype = c->adt;
  A->strides[0] = M * K * (int64_t)as;
  if (c->ta) { A->strides[1] = (int64_t)as; A->strides[2] = M * (int64_t)as; }
  else { A->strides[1] = K * (int64_t)as; A->strides[2] = (int64_t)as; }
  if (c->a_flip) { /* start at the last row and walk back */
    A->data = (char *)a + (M - 1) * A->strides[1];
    A->strides[1] = -A->strides[1];
  }
  Bo->data = b;
  Bo->dtype = c->bdt;
  Bo->strides[0] = c->b_broadcast ? 0 : K * N * (int64_t)bs;
  if (c->tb) { Bo->strides[1] = (int64_t)bs; Bo->strides[2] = K * (int64_t)bs; }
  else { Bo->strides[1] = N * (int64_t)bs; Bo->strides[2] = (int64_t)bs; }
  Bi->data = bias;
  Bi->dtype = c->cdt;
  if (c->bias == 2) { Bi->strides[0] = 0; Bi->strides[1] = 0; Bi->strides[2] = (int64_t)cs; }
  else { Bi->strides[0] = C->strides[0]; Bi->strides[1] = C->strides[1]; Bi->strides[2] = C->strides[2]; }

  C->data = ref;
  nrt_kernels_set_reference(true);
  CHECK_OK(nrt_launch_run(&l));
  nrt_kernels_set_reference(false);

  double tol = 8 * (eps_of(c->adt) + eps_of(c->bdt) + eps_of(c->cdt)) + 1e-6 * (double)K;
  for (int isa = NRT_ISA_BEST; isa >= NRT_ISA_BASELINE; isa--) {
    if ((int)nrt_kernels_isa() < isa && isa != NRT_ISA_BASELINE) continue;
    nrt_kernels_limit_isa((nrt_isa)isa);
    memset(out, 0xff, (size_t)(B * M * N) * cs); /* NaN garbage: must be overwritten */
    C->data = out;
    CHECK_OK(nrt_launch_run(&l));
    int bad = 0;
    for (int64_t i = 0; i < B * M * N && bad < 3; i++) {
      double want = nrt_test_get(ref, c->cdt, i), got = nrt_test_get(out, c->cdt, i);
      /* scale: |alpha| * sum |a||b| <= |alpha| K for inputs in [-1, 1] */
      double scale = fabs(c->alpha) * (double)K + fabs(c->beta) + 1.0;
      if (!(fabs(got - want) <= tol * scale)) {
        fprintf(stderr, "gemm %lldx%lldx%lldx%lld ta%d tb%d isa%d [%lld]: got %g want %g\n",
                (long long)B, (long long)M, (long long)N, (long long)K, c->ta, c->tb, isa,
                (long long)i, got, want);
        bad++;
      }
    }
    CHECK(bad == 0);
  }
  nrt_kernels_limit_isa(NRT_ISA_BEST);
  free(a); free(b); free(bias); free(out); free(ref);
}

static void test_gemm_shapes(void) {
  int64_t shapes[][4] = {{1, 1, 1, 1}, {1, 17, 33, 65}, {1, 128, 256, 64}, {1, 7, 255, 257},
                         {1, 255, 7, 3},  {3, 29, 31, 37}, {1, 1, 1000, 40}, {1, 300, 1, 9},
                         {2, 64, 64, 600}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int t = 0; t < 4; t++) {
      gcase c = {.batch = shapes[s][0], .m = shapes[s][1], .n = shapes[s][2], .k = shapes[s][3],
                 .ta = t & 1, .tb = (t >> 1) & 1, .adt = NRT_FLOAT32, .bdt = NRT_FLOAT32,
                 .cdt = NRT_FLOAT32, .alpha = 1.0};
      run_case(&c);
    }
}

static void test_gemm_bias_alpha_beta(void) {
  gcase c = {.batch = 2, .m = 33, .n = 47, .k = 29, .adt = NRT_FLOAT32, .bdt = NRT_FLOAT32,
             .cdt = NRT_FLOAT32, .bias = 1, .alpha = 0.5, .beta = -2.0};
  run_case(&c);
  c.bias = 2; /* row-vector bias broadcast over rows and batch (addmm) */
  c.alpha = 1.0;
  c.beta = 1.0;
  run_case(&c);
  c.b_broadcast = true; /* one weight matrix for the whole batch */
  c.tb = true;
  run_case(&c);
  c.a_flip = true;
  run_case(&c);
  c.m = 1; /* a single row (matrix-vector) */
  c.batch = 1;
  run_case(&c);
}

static void test_gemm_dtypes(void) {
  nrt_dtype dts[] = {NRT_BFLOAT16, NRT_FLOAT16, NRT_FLOAT64};
  for (size_t i = 0; i < 3; i++) {
    gcase c = {.batch = 2, .m = 45, .n = 70, .k = 33, .adt = dts[i], .bdt = dts[i], .cdt = dts[i],
               .bias = 1, .alpha = 1.0, .beta = 0.5, .tb = true};
    run_case(&c);
    c.cdt = NRT_FLOAT32; /* low-precision inputs, float32 output */
    c.bias = 0;
    run_case(&c);
    c.ta = true; /* column-major A, row-major B: the generic packers */
    c.tb = false;
    run_case(&c);
  }
}

/* Small integers multiply and add exactly in float32: results must be
 * exact, on every path. */
static void test_gemm_exact(void) {
  enum { M = 19, N = 35, K = 21 };
  float a[M * K], b[K * N], c[M * N], bias[N];
  for (int i = 0; i < M * K; i++) a[i] = (float)((i * 7) % 5 - 2);
  for (int i = 0; i < K * N; i++) b[i] = (float)((i * 3) % 7 - 3);
  for (int j = 0; j < N; j++) bias[j] = (float)(j % 4);
  nrt_launch l;
  memset(&l, 0, sizeof l);
  l.op = NRT_OP(GEMM);
  l.ndim = 4;
  l.sizes[0] = 1; l.sizes[1] = M; l.sizes[2] = N; l.sizes[3] = K;
  l.noutputs = 1;
  l.ninputs = 3;
  l.compute_dtype = NRT_FLOAT32;
  l.scalars[0].f = 2.0;
  l.scalars[1].f = 3.0;
  l.operands[0] = (nrt_operand){.data = c, .dtype = NRT_FLOAT32, .strides = {0, N * 4, 4}};
  l.operands[1] = (nrt_operand){.data = a, .dtype = NRT_FLOAT32, .strides = {0, K * 4, 4}};
  l.operands[2] = (nrt_operand){.data = b, .dtype = NRT_FLOAT32, .strides = {0, N * 4, 4}};
  l.operands[3] = (nrt_operand){.data = bias, .dtype = NRT_FLOAT32, .strides = {0, 0, 4}};
  for (int ref = 0; ref < 2; ref++) {
    nrt_kernels_set_reference(ref);
    CHECK_OK(nrt_launch_run(&l));
    int bad = 0;
    for (int i = 0; i < M; i++)
      for (int j = 0; j < N; j++) {
        double want = 3.0 * bias[j];
        for (int k = 0; k < K; k++) want += 2.0 * a[i * K + k] * b[k * N + j];
        bad += c[i * N + j] != (float)want;
      }
    CHECK(bad == 0);
  }
  nrt_kernels_set_reference(false);
}

/* beta == 0 ignores the bias even when it holds NaN; K == 0 gives
 * beta * bias. */
static void test_gemm_beta_zero_and_empty_k(void) {
  float a[4] = {1, 2, 3, 4}, b[4] = {1, 0, 0, 1}, c[4], bias[4];
  for (int i = 0; i < 4; i++) bias[i] = NAN;
  nrt_launch l;
  memset(&l, 0, sizeof l);
  l.op = NRT_OP(GEMM);
  l.ndim = 4;
  l.sizes[0] = 1; l.sizes[1] = 2; l.sizes[2] = 2; l.sizes[3] = 2;
  l.noutputs = 1;
  l.ninputs = 3;
  l.compute_dtype = NRT_FLOAT32;
  l.scalars[0].f = 1.0;
  l.scalars[1].f = 0.0;
  l.operands[0] = (nrt_operand){.data = c, .dtype = NRT_FLOAT32, .strides = {0, 8, 4}};
  l.operands[1] = (nrt_operand){.data = a, .dtype = NRT_FLOAT32, .strides = {0, 8, 4}};
  l.operands[2] = (nrt_operand){.data = b, .dtype = NRT_FLOAT32, .strides = {0, 8, 4}};
  l.operands[3] = (nrt_operand){.data = bias, .dtype = NRT_FLOAT32, .strides = {0, 8, 4}};
  for (int ref = 0; ref < 2; ref++) {
    nrt_kernels_set_reference(ref);
    for (int i = 0; i < 4; i++) c[i] = NAN;
    CHECK_OK(nrt_launch_run(&l));
    CHECK(c[0] == 1 && c[1] == 2 && c[2] == 3 && c[3] == 4);
  }
  /* K == 0: alpha * (empty sum) + beta * bias */
  for (int i = 0; i < 4; i++) bias[i] = (float)i;
  l.sizes[3] = 0;
  l.scalars[1].f = 2.0;
  for (int ref = 0; ref < 2; ref++) {
    nrt_kernels_set_reference(ref);
    for (int i = 0; i < 4; i++) c[i] = NAN;
    CHECK_OK(nrt_launch_run(&l));
    CHECK(c[0] == 0 && c[1] == 2 && c[2] == 4 && c[3] == 6);
  }
  nrt_kernels_set_reference(false);
}

static void test_gemm_int(void) {
  enum { M = 5, N = 6, K = 7 };
  int64_t a[M * K], b[K * N], c[M * N];
  int32_t bias[N];
  for (int i = 0; i < M * K; i++) a[i] = (int64_t)(i * 1000003) - 17000000; /* large values */
  for (int i = 0; i < K * N; i++) b[i] = i % 9 - 4;
  for (int j = 0; j < N; j++) bias[j] = j - 3;
  nrt_launch l;
  memset(&l, 0, sizeof l);
  l.op = NRT_OP(GEMM);
  l.ndim = 4;
  l.sizes[0] = 1; l.sizes[1] = M; l.sizes[2] = N; l.sizes[3] = K;
  l.noutputs = 1;
  l.ninputs = 3;
  l.compute_dtype = NRT_INT64;
  l.scalars[0].i = 3;
  l.scalars[1].i = -2;
  l.operands[0] = (nrt_operand){.data = c, .dtype = NRT_INT64, .strides = {0, N * 8, 8}};
  l.operands[1] = (nrt_operand){.data = a, .dtype = NRT_INT64, .strides = {0, K * 8, 8}};
  l.operands[2] = (nrt_operand){.data = b, .dtype = NRT_INT64, .strides = {0, N * 8, 8}};
  l.operands[3] = (nrt_operand){.data = bias, .dtype = NRT_INT32, .strides = {0, 0, 4}};
  CHECK_OK(nrt_launch_run(&l));
  int bad = 0;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      int64_t want = -2 * (int64_t)bias[j];
      for (int k = 0; k < K; k++) want += 3 * a[i * K + k] * b[k * N + j];
      bad += c[i * N + j] != want;
    }
  CHECK(bad == 0);
}

/* Big enough to be split across threads and K blocks. */
static void test_gemm_large(void) {
  gcase c = {.batch = 1, .m = 300, .n = 520, .k = 530, .adt = NRT_FLOAT32, .bdt = NRT_FLOAT32,
             .cdt = NRT_FLOAT32, .alpha = 1.0, .tb = true};
  run_case(&c);
  c.cdt = NRT_BFLOAT16; /* converted C through the scratch tile */
  c.bias = 1;
  c.beta = 1.0;
  run_case(&c);
  /* bfloat16 operands: several K slices, the last one odd */
  c.m = 45;
  c.n = 70;
  c.k = 1043;
  c.adt = c.bdt = NRT_BFLOAT16;
  run_case(&c);
  c.tb = false;
  run_case(&c);
}

/* The strided AVX-512 kernel against its plain loop for every block shape
 * (rows 1..14, cols 1..32), both A layouts (row-major, k-major), a B row
 * stride wider than the block, alpha and accumulate; the block is written
 * inside a larger C whose other elements must stay untouched. */
static void test_gemm_strided_kernel(void) {
  if (nrt_kernels_isa() < NRT_ISA_AVX512) return;
  enum { KC = 37, LDA = 45, LDB = 40, LDC = 35 };
  static float a[16 * LDA + KC * 16], b[KC * LDB + 32], c[16 * LDC], want[16 * LDC];
  for (size_t i = 0; i < sizeof a / sizeof a[0]; i++) a[i] = (float)nrt_test_urand();
  for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) b[i] = (float)nrt_test_urand();
  int bad = 0;
  for (int layout = 0; layout < 2; layout++)
    for (int rows = 1; rows <= 14; rows++)
      for (int cols = 1; cols <= 32; cols++)
        for (int acc = 0; acc < 2; acc++) {
          int64_t rsa = layout ? 1 : LDA, csa = layout ? 16 : 1;
          for (int i = 0; i < 16 * LDC; i++) c[i] = want[i] = (float)(i % 7);
          nrt_gemm_ukernel_strided_ref(rows, cols, KC, a, rsa, csa, b, LDB, want, LDC, 0.75f, acc);
          nrt_gemm_ukernel_avx512_strided(rows, cols, KC, a, rsa, csa, b, LDB, c, LDC, 0.75f, acc);
          for (int i = 0; i < 16 * LDC; i++)
            if (!(fabsf(c[i] - want[i]) <= 1e-4f * KC)) {
              if (bad++ < 3)
                fprintf(stderr, "strided kernel layout %d %dx%d acc %d [%d]: got %g want %g\n", layout, rows,
                        cols, acc, i, c[i], want[i]);
            }
        }
  CHECK(bad == 0);
}

/* Shapes that take the in-place operand paths of the AVX-512 float32 and
 * bfloat16 kernels (short tasks: A read in place when the column tile is
 * at most 256 wide, row-major float32 B when the row part is at most
 * 256), next to ones whose 4 KiB-multiple row strides or odd K keep the
 * packed path, with edges, bias, alpha, a converted C and a flipped A. */
static void test_gemm_direct_operands(void) {
  int64_t shapes[][4] = {{6, 128, 128, 64}, {4, 128, 64, 128}, {2, 129, 200, 1024}, {1, 250, 96, 33},
                         {3, 15, 33, 1}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int t = 0; t < 4; t++) {
      gcase c = {.batch = shapes[s][0], .m = shapes[s][1], .n = shapes[s][2], .k = shapes[s][3],
                 .ta = t & 1, .tb = (t >> 1) & 1, .adt = NRT_FLOAT32, .bdt = NRT_FLOAT32,
                 .cdt = NRT_FLOAT32, .alpha = 1.0};
      run_case(&c);
    }
  /* bfloat16 pairs read in place from row-major A (even K), odd K packed */
  int64_t bshapes[][4] = {{6, 128, 128, 64}, {4, 128, 64, 128}, {2, 29, 70, 46}, {2, 29, 70, 45}};
  for (size_t s = 0; s < sizeof bshapes / sizeof bshapes[0]; s++)
    for (int t = 0; t < 4; t++) {
      gcase c = {.batch = bshapes[s][0], .m = bshapes[s][1], .n = bshapes[s][2], .k = bshapes[s][3],
                 .ta = t & 1, .tb = (t >> 1) & 1, .adt = NRT_BFLOAT16, .bdt = NRT_BFLOAT16,
                 .cdt = (t & 1) ? NRT_FLOAT32 : NRT_BFLOAT16, .bias = t == 2, .alpha = 1.0, .beta = 0.5};
      run_case(&c);
      c.a_flip = true;
      run_case(&c);
    }
  gcase c = {.batch = 3, .m = 128, .n = 64, .k = 128, .adt = NRT_FLOAT32, .bdt = NRT_FLOAT32,
             .cdt = NRT_FLOAT32, .bias = 1, .alpha = 0.125, .beta = 1.0};
  run_case(&c);
  c.a_flip = true;
  run_case(&c);
  c.cdt = NRT_BFLOAT16; /* C through the scratch tile */
  run_case(&c);
  c.b_broadcast = true;
  c.bias = 2;
  run_case(&c);
}

/* A bfloat16 C from float32 inputs rounds exactly as the reference: ties
 * to even on integers that float32 holds exactly (257 -> 256, 514 -> 512),
 * NaN as 0x7fc0; 35 columns so the 16-lane converter has a tail. */
static void test_gemm_bf16_store_rounding(void) {
  enum { M = 3, N = 35, K = 2 };
  float a[M * K], b[K * N];
  uint16_t c[M * N], want[M * N];
  for (int i = 0; i < M * K; i++) a[i] = (float)(255 + i);
  a[5] = NAN;
  for (int i = 0; i < K * N; i++) b[i] = (float)((i / N == 0) ? 1 + i % 3 : 0);
  nrt_launch l;
  memset(&l, 0, sizeof l);
  l.op = NRT_OP(GEMM);
  l.ndim = 4;
  l.sizes[0] = 1; l.sizes[1] = M; l.sizes[2] = N; l.sizes[3] = K;
  l.noutputs = 1;
  l.ninputs = 2;
  l.compute_dtype = NRT_FLOAT32;
  l.scalars[0].f = 1.0;
  l.operands[1] = (nrt_operand){.data = a, .dtype = NRT_FLOAT32, .strides = {0, K * 4, 4}};
  l.operands[2] = (nrt_operand){.data = b, .dtype = NRT_FLOAT32, .strides = {0, N * 4, 4}};
  l.operands[0] = (nrt_operand){.data = want, .dtype = NRT_BFLOAT16, .strides = {0, N * 2, 2}};
  nrt_kernels_set_reference(true);
  CHECK_OK(nrt_launch_run(&l));
  nrt_kernels_set_reference(false);
  l.operands[0].data = c;
  for (int isa = NRT_ISA_BEST; isa >= NRT_ISA_BASELINE; isa--) {
    if ((int)nrt_kernels_isa() < isa && isa != NRT_ISA_BASELINE) continue;
    nrt_kernels_limit_isa((nrt_isa)isa);
    memset(c, 0, sizeof c);
    CHECK_OK(nrt_launch_run(&l));
    CHECK(memcmp(c, want, sizeof c) == 0);
  }
  nrt_kernels_limit_isa(NRT_ISA_BEST);
  /* row 1 is 257 * (1, 2, 3, ...): 257 and 514 are ties, to even */
  CHECK(want[0] == 0x437f && want[N] == 0x4380 && want[N + 1] == 0x4400 && want[2 * N] == 0x7fc0);
}

/* CGEMM: finite values exactly (alpha * A @ B + beta * bias in every alpha
 * placement, the plain sum for ALPHA_NONE), then where an infinity turns
 * into NaN: (1 + i) * (inf + 0i) = inf + inf i kept by the plain sum and by
 * alpha on A, made NaN + NaN i by alpha (even 1) times the sum or times B. */
static nrt_status cgemm_try(int mode, const float *a, const float *b, const float *bias, float ar, float br, float *c,
                            int64_t m, int64_t n, int64_t k, int lanes) {
  nrt_launch l;
  memset(&l, 0, sizeof l);
  l.op = NRT_OP(CGEMM);
  l.ndim = 4;
  l.sizes[0] = 1; l.sizes[1] = m; l.sizes[2] = n; l.sizes[3] = k;
  l.noutputs = 1;
  l.ninputs = bias ? 3 : 2;
  l.compute_dtype = NRT_COMPLEX64;
  l.scalars[0].f = ar;
  l.scalars[2].f = br;
  l.params[0] = mode;
  l.operands[0] = (nrt_operand){.data = c, .dtype = NRT_COMPLEX64, .strides = {0, n * 8, 8}};
  l.operands[1] = (nrt_operand){.data = (void *)a, .dtype = NRT_COMPLEX64, .strides = {0, k * 8, 8}};
  l.operands[2] = (nrt_operand){.data = (void *)b, .dtype = NRT_COMPLEX64, .strides = {0, n * 8, 8}};
  if (bias) l.operands[3] = (nrt_operand){.data = (void *)bias, .dtype = NRT_COMPLEX64, .strides = {0, n * 8, 8}};
  l.aux[0] = lanes;
  return nrt_launch_run(&l);
}
static void cgemm_run(int mode, const float *a, const float *b, const float *bias, float ar, float br, float *c,
                      int64_t m, int64_t n, int64_t k) {
  CHECK_OK(cgemm_try(mode, a, b, bias, ar, br, c, m, n, k, 0));
}

static void test_cgemm_alpha_placement(void) {
  const float a[4] = {1, 2, 3, -1}, b[4] = {2, -1, 1, 1}, bias[2] = {1, 1};
  for (int mode = NRT_CGEMM_ALPHA_NONE; mode <= NRT_CGEMM_ALPHA_B; mode++) {
    float c[2] = {0, 0};
    cgemm_run(mode, a, b, bias, 2.0f, 0.5f, c, 1, 1, 2);
    /* (1+2i)(2-i) + (3-i)(1+i) = 8 + 5i; 2 (8 + 5i) + 0.5 (1 + i) */
    CHECK(mode == NRT_CGEMM_ALPHA_NONE ? c[0] == 8 && c[1] == 5 : c[0] == 16.5f && c[1] == 10.5f);
  }
  const float inf = INFINITY, x[2] = {1, 1}, y[2] = {inf, 0};
  for (int mode = NRT_CGEMM_ALPHA_NONE; mode <= NRT_CGEMM_ALPHA_B; mode++) {
    float c[2] = {0, 0};
    cgemm_run(mode, x, y, NULL, 1.0f, 0.0f, c, 1, 1, 1);
    bool kept = mode == NRT_CGEMM_ALPHA_NONE || mode == NRT_CGEMM_ALPHA_A;
    CHECK(kept ? c[0] == inf && c[1] == inf : isnan(c[0]) && isnan(c[1]));
  }
}

/* CGEMM aux[0]: one column's sum in 8 lanes (k % 8), then halves, as MKL's
 * AVX-512 cgemv 't'. Row [B, 0, 0, 0, 1, 0, 0, 0, -B, ...] with B = 1e18:
 * lane 0 cancels to 0 and lane 4 keeps the 1 (in k order B + 1 absorbs it:
 * 0); with the 1 and -B swapped, lane 0 absorbs the 1 and halves cancel
 * the lanes (in k order: 1). Other lane counts are refused. */
static void test_cgemm_gemv_lanes(void) {
  const float B = 1e18f, x[24] = {1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0};
  float a[24] = {0}, c[2];
  a[0] = B, a[8] = 1, a[16] = -B;
  for (int lanes = 0; lanes <= 8; lanes += 8) {
    CHECK_OK(cgemm_try(NRT_CGEMM_ALPHA_AFTER, a, x, NULL, 1.0f, 0.0f, c, 1, 1, 12, lanes));
    CHECK(c[0] == (lanes ? 1.0f : 0.0f) && c[1] == 0.0f);
  }
  a[8] = -B, a[16] = 1;
  for (int lanes = 0; lanes <= 8; lanes += 8) {
    CHECK_OK(cgemm_try(NRT_CGEMM_ALPHA_AFTER, a, x, NULL, 1.0f, 0.0f, c, 1, 1, 12, lanes));
    CHECK(c[0] == (lanes ? 0.0f : 1.0f) && c[1] == 0.0f);
  }
  CHECK(cgemm_try(NRT_CGEMM_ALPHA_AFTER, a, x, NULL, 1.0f, 0.0f, c, 1, 1, 12, 3) == NRT_ERROR_INVALID_ARGUMENT);
  CHECK(cgemm_try(NRT_CGEMM_ALPHA_A, a, x, NULL, 1.0f, 0.0f, c, 1, 1, 12, 8) == NRT_ERROR_INVALID_ARGUMENT);
}

/* GEMM's plain-loop orders (p0): each product rounded before it is added,
 * so 0.3127 * 3e38 - 0.3127 * 3e38 cancels to exactly 0 (a fused
 * multiply-add keeps the first product's rounding error, about 1e30), in
 * k order from C for ALPHA_A / ALPHA_B; p1 computes a C whose elements all
 * alias one float in order, each output reading the last one's store. */
static void gemm_loop_run(int order, int serial, const float *a, const float *b, float *bias, float alpha,
                          float beta, float *c, int64_t cstride, int64_t m, int64_t n, int64_t k) {
  nrt_launch l;
  memset(&l, 0, sizeof l);
  l.op = NRT_OP(GEMM);
  l.ndim = 4;
  l.sizes[0] = 1; l.sizes[1] = m; l.sizes[2] = n; l.sizes[3] = k;
  l.noutputs = 1;
  l.ninputs = bias ? 3 : 2;
  l.compute_dtype = NRT_FLOAT32;
  l.scalars[0].f = alpha;
  l.scalars[1].f = beta;
  l.params[0] = order;
  l.params[1] = serial;
  l.operands[0] = (nrt_operand){.data = c, .dtype = NRT_FLOAT32, .strides = {0, n * cstride, cstride}};
  l.operands[1] = (nrt_operand){.data = (void *)a, .dtype = NRT_FLOAT32, .strides = {0, k * 4, 4}};
  l.operands[2] = (nrt_operand){.data = (void *)b, .dtype = NRT_FLOAT32, .strides = {0, n * 4, 4}};
  if (bias) l.operands[3] = (nrt_operand){.data = bias, .dtype = NRT_FLOAT32, .strides = {0, n * cstride, cstride}};
  CHECK_OK(nrt_launch_run(&l));
}

static void test_gemm_loop_orders(void) {
  const float a[3] = {0.3127f, 0.3127f, 1.0f}, b[3] = {3e38f, -3e38f, 0.25f};
  for (int order = NRT_GEMM_LOOP_AFTER; order <= NRT_GEMM_LOOP_ALPHA_B; order++) {
    float c = -1;
    gemm_loop_run(order, 0, a, b, NULL, 1.0f, 0.0f, &c, 4, 1, 1, 3);
    CHECK(c == 0.25f);
  }
  /* C first: 3e38 + 0.3127 * 3e38 overflows before -0.3127 * 3e38 comes */
  float y = 3e38f, c = 0;
  gemm_loop_run(NRT_GEMM_LOOP_ALPHA_B, 0, a, b, &y, 1.0f, 1.0f, &c, 4, 1, 1, 3);
  CHECK(isinf(c));
  gemm_loop_run(NRT_GEMM_LOOP_AFTER, 0, a, b, &y, 1.0f, 1.0f, &c, 4, 1, 1, 3);
  CHECK(c == 3e38f);
  /* alpha 0 still multiplies: 0 * inf is NaN, as in the CPU's loops */
  const float inf_b[1] = {INFINITY}, one[1] = {1};
  gemm_loop_run(NRT_GEMM_LOOP_AFTER, 0, one, inf_b, NULL, 0.0f, 0.0f, &c, 4, 1, 1, 1);
  CHECK(isnan(c));
  /* one aliased element, 2 x 3 outputs, each 2 * previous + 1 * 1 */
  float shared = 1;
  const float ones[2] = {1, 1}, row[3] = {1, 1, 1};
  gemm_loop_run(NRT_GEMM_LOOP_AFTER, 1, ones, row, &shared, 1.0f, 2.0f, &shared, 0, 2, 3, 1);
  CHECK(shared == 127); /* 1 -> 3 -> 7 -> 15 -> 31 -> 63 -> 127 */
}

/* SGEMV_N8 (MKL's AVX-512 sgemv 'n'): output j of a 1 x k by k x n
 * product with products 2^25, -2^25 and 1 at k = p, q, r (zeros elsewhere)
 * is 1 exactly when p and q meet before r joins. */
static float n8_triple(int64_t k, int64_t n, int64_t j, int64_t p, int64_t q, int64_t r) {
  float a[32] = {0}, b[32 * 20], c[20];
  for (int64_t i = 0; i < k * n; i++) b[i] = 1.0f;
  a[p] = 0x1p25f;
  a[q] = -0x1p25f;
  a[r] = 1.0f;
  gemm_loop_run(NRT_GEMM_LOOP_SGEMV_N8, 0, a, b, NULL, 1.0f, 0.0f, c, 4, 1, n, k);
  return c[j];
}

static void test_gemm_sgemv_n8(void) {
  /* in a vector of 16 (j < 16): ((p0 + p2) + (p1 + p3)) + ((p4 + p6) + (p5 + p7)) */
  CHECK(n8_triple(9, 20, 0, 0, 2, 1) == 1.0f);
  CHECK(n8_triple(9, 20, 0, 0, 1, 2) == 0.0f);
  CHECK(n8_triple(9, 20, 15, 4, 6, 0) == 1.0f);
  CHECK(n8_triple(9, 20, 0, 0, 4, 8) == 1.0f); /* the tail joins the finished block */
  /* the second block: C + p14 + p12 first, then (p13 + p15), then p8..p11 */
  CHECK(n8_triple(17, 20, 0, 0, 14, 12) == 1.0f);
  CHECK(n8_triple(17, 20, 0, 0, 12, 14) == 0.0f); /* p14 joins before p12 */
  CHECK(n8_triple(17, 20, 0, 0, 13, 14) == 0.0f);
  CHECK(n8_triple(17, 20, 0, 14, 12, 13) == 1.0f);
  CHECK(n8_triple(17, 20, 0, 8, 10, 12) == 1.0f);
  /* past the last whole vector (j >= 16): every product in k order */
  CHECK(n8_triple(9, 20, 16, 0, 1, 2) == 1.0f);
  CHECK(n8_triple(9, 20, 19, 0, 2, 1) == 0.0f);
  /* fused: 3e38 * 2 - 3e38 stays finite in a pair (p7 rounded, p5 fused in) */
  float a[8] = {0, 0, 0, 0, 0, 3e38f, 0, -3e38f}, b[8 * 16], c[16], y[16];
  for (int i = 0; i < 8 * 16; i++) b[i] = i / 16 == 5 ? 2.0f : 1.0f;
  gemm_loop_run(NRT_GEMM_LOOP_SGEMV_N8, 0, a, b, NULL, 1.0f, 0.0f, c, 4, 1, 16, 8);
  CHECK(c[0] == 3e38f);
  /* C = beta * bias first, then the block */
  for (int i = 0; i < 16; i++) y[i] = 1.0f;
  gemm_loop_run(NRT_GEMM_LOOP_SGEMV_N8, 0, a, b, y, 1.0f, 0.5f, c, 4, 1, 16, 8);
  CHECK(c[3] == 3e38f + 0.5f);
}

/* ATen's 16-bit loop orders (SUM4, VDOT, fused ALPHA_A): rows of ones
 * with +L and -L (L = 2^40 absorbs a 1) keep exactly the ones that meet
 * neither before they cancel, so each order's grouping shows in the sum. */
static float one_hot_sum(int order, int64_t k, int64_t p, int64_t q) {
  float a[64], b[64], c = -1;
  for (int64_t i = 0; i < k; i++) a[i] = b[i] = 1.0f;
  a[p] = 0x1p40f;
  a[q] = -0x1p40f;
  gemm_loop_run(order, 0, a, b, NULL, 1.0f, 0.0f, &c, 4, 1, 1, k);
  return c;
}

static void test_gemm_reduced_loop_orders(void) {
  /* SUM4: k 0 and 4 share the first partial, k 8 is added to it last */
  CHECK(one_hot_sum(NRT_GEMM_LOOP_SUM4, 9, 0, 4) == 7.0f);
  CHECK(one_hot_sum(NRT_GEMM_LOOP_SUM4, 9, 0, 1) == 4.0f);
  /* VDOT: k and k + 8 share a lane in blocks of 16; lanes 0 and 1 meet last */
  CHECK(one_hot_sum(NRT_GEMM_LOOP_VDOT, 20, 0, 8) == 18.0f);
  CHECK(one_hot_sum(NRT_GEMM_LOOP_VDOT, 20, 0, 1) == 4.0f);
  CHECK(one_hot_sum(NRT_GEMM_LOOP_SUM4, 20, 0, 1) == 10.0f);
  /* 64-blocks: k 0 and 8 sit in registers 0 and 1, which meet after 32 / 40
   * and 16 + 48 / 24 + 56 joined them; SUM4 meets them after k 4 only */
  CHECK(one_hot_sum(NRT_GEMM_LOOP_VDOT, 64, 0, 8) == 56.0f);
  CHECK(one_hot_sum(NRT_GEMM_LOOP_SUM4, 64, 0, 8) == 61.0f);
  /* the blocks fuse: -3e38 + 3e38 * 2 is finite (an unfused product is inf) */
  const float big = 3e38f;
  float a[8] = {-big, 0, 0, 0, big, 0, 0, 0}, b[8] = {1, 1, 1, 1, 2, 1, 1, 1}, c = 0;
  gemm_loop_run(NRT_GEMM_LOOP_SUM4, 0, a, b, NULL, 1.0f, 0.0f, &c, 4, 1, 1, 8);
  CHECK(c == big);
  /* ...the scalar tails do not: k 4 is SUM4's remainder when K = 5 */
  gemm_loop_run(NRT_GEMM_LOOP_SUM4, 0, a, b, NULL, 1.0f, 0.0f, &c, 4, 1, 1, 5);
  CHECK(isinf(c));
  float t[3] = {0, -big, big}, u[3] = {1, 1, 2};
  gemm_loop_run(NRT_GEMM_LOOP_VDOT, 0, t, u, NULL, 1.0f, 0.0f, &c, 4, 1, 1, 3);
  CHECK(isinf(c));
  /* C = fma(beta, bias, alpha * sum): 0.1 * 3 - round(0.1 * 3) is the rounding error */
  float y = 3.0f, one = 1.0f, three = 3.0f;
  gemm_loop_run(NRT_GEMM_LOOP_SUM4, 0, &one, &three, &y, -0.1f, 0.1f, &c, 4, 1, 1, 1);
  double exact = (double)0.1f * 3.0;
  CHECK(c == (float)(exact - (double)(float)exact));
}

/* GEMM SGEMV_T (MKL's sgemv 't'): y = A x with the order following the
 * addresses. A scalar model of the rule (kernels/gemm/sgemv.c) against the
 * kernel on +-2^40 pairs among ones over offsets, row strides and shapes,
 * bit for bit, so the SSE block path and the row routing are both checked;
 * and one known result: K = 5, aligned rows, a block's head is 1 product,
 * so +L at k 1 and -L at k 2 sit in lanes 0 and 1, which meet last. */
static float sgemv_model_row(const float *a, const float *x, int64_t K, int64_t h, int lanes, int step) {
  float s = a[0] * x[0];
  if (h + step > K) {
    for (int64_t k = 1; k < K; k++) s += a[k] * x[k];
    return s;
  }
  for (int64_t k = 1; k < h; k++) s += a[k] * x[k];
  float l[8] = {s, 0, 0, 0, 0, 0, 0, 0};
  int64_t k = h;
  for (; k + step <= K; k += step)
    for (int q = 0; q < step; q++) l[q % lanes] += a[k + q] * x[k + q];
  float r = lanes == 8 ? ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]))
                       : (l[0] + l[2]) + (l[1] + l[3]);
  for (; k < K; k++) r += a[k] * x[k];
  return r;
}

static void sgemv_t_run_order(const float *a, int64_t lda, const float *x, float *y, int64_t m, int64_t k,
                              int intel) {
  nrt_launch l;
  memset(&l, 0, sizeof l);
  l.op = NRT_OP(GEMM);
  l.ndim = 4;
  l.sizes[0] = 1; l.sizes[1] = m; l.sizes[2] = 1; l.sizes[3] = k;
  l.noutputs = 1;
  l.ninputs = 2;
  l.compute_dtype = NRT_FLOAT32;
  l.scalars[0].f = 1.0;
  l.params[0] = NRT_GEMM_LOOP_SGEMV_T;
  l.params[3] = intel; /* MKL's AVX-512 order */
  l.operands[0] = (nrt_operand){.data = y, .dtype = NRT_FLOAT32, .strides = {0, 4, 4}};
  l.operands[1] = (nrt_operand){.data = (void *)a, .dtype = NRT_FLOAT32, .strides = {0, lda * 4, 4}};
  l.operands[2] = (nrt_operand){.data = (void *)x, .dtype = NRT_FLOAT32, .strides = {0, 4, 4}};
  CHECK_OK(nrt_launch_run(&l));
}
static void sgemv_t_run(const float *a, int64_t lda, const float *x, float *y, int64_t m, int64_t k) {
  sgemv_t_run_order(a, lda, x, y, m, k, 0);
}

/* SGEMV_T p3 (MKL's AVX-512 sgemv 't'): row i of an m-row product whose
 * products are 2^25, -2^25 and 1 at k = p, q, r is 1 exactly when p and q
 * meet before r joins. */
static float t16_triple(int64_t m, int64_t i, int64_t k, int64_t p, int64_t q, int64_t r) {
  static float a[8 * 64], x[64], y[8];
  for (int64_t j = 0; j < m * k; j++) a[j] = 0.0f;
  for (int64_t j = 0; j < k; j++) x[j] = 1.0f;
  a[i * k + p] = 0x1p25f;
  a[i * k + q] = -0x1p25f;
  a[i * k + r] = 1.0f;
  sgemv_t_run_order(a, k, x, y, m, k, 1);
  return y[i];
}

static void test_gemm_sgemv_t16(void) {
  /* a block row (m = 4): p0 starts lane 0, products k - 1 mod 16 share a lane */
  CHECK(t16_triple(4, 0, 17, 0, 1, 9) == 1.0f);
  CHECK(t16_triple(4, 0, 17, 1, 9, 0) == 0.0f);
  CHECK(t16_triple(4, 2, 33, 1, 17, 9) == 1.0f);
  /* its rest after whole blocks of 16 goes to 8 lanes from the halved sum */
  CHECK(t16_triple(4, 0, 26, 1, 17, 25) == 1.0f);
  CHECK(t16_triple(4, 0, 26, 17, 25, 1) == 0.0f);
  /* a row after the blocks: p0 joins the halved lanes last */
  CHECK(t16_triple(2, 0, 17, 1, 9, 0) == 1.0f);
  CHECK(t16_triple(2, 1, 9, 1, 5, 0) == 1.0f);
  CHECK(t16_triple(5, 4, 5, 1, 3, 2) == 1.0f);
  CHECK(t16_triple(5, 4, 5, 1, 2, 3) == 0.0f);
  /* 1st row after the blocks: k and k + 16 of a block of 32 meet first */
  CHECK(t16_triple(2, 0, 41, 1, 17, 33) == 1.0f);
  /* 2nd: one register, k, k + 16 and k + 32 in a lane in order */
  CHECK(t16_triple(2, 1, 41, 1, 17, 33) == 1.0f);
  CHECK(t16_triple(2, 1, 41, 17, 33, 1) == 0.0f);
}

static void test_gemm_sgemv_t(void) {
  static float abuf[16 + 11 * 48] __attribute__((aligned(64))), xbuf[16 + 48] __attribute__((aligned(64)));
  float y[11];
  int bad = 0;
  for (int64_t m = 1; m <= 11; m++)
    for (int64_t k = 2; k <= 40; k += 3)
      for (int off = 0; off < 4; off++)
        for (int64_t lda = k; lda <= k + 3; lda += 3) {
          float *a = abuf + off, *x = xbuf + (off * 3 + (int)k) % 4;
          for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < k; j++) a[i * lda + j] = 1.0f;
          for (int64_t j = 0; j < k; j++) x[j] = 1.0f;
          for (int64_t i = 0; i < m; i++) { /* a +-L pair per row, at places varying with the row */
            a[i * lda + (i * 7 + off) % k] = 0x1p40f;
            a[i * lda + (i * 3 + off + 1 + (i * 7 + off) % k) % k] += -0x1p40f;
          }
          sgemv_t_run(a, lda, x, y, m, k);
          int64_t nb = m / 4 * 4;
          for (int64_t i = 0; i < m; i++) {
            const float *ai = a + i * lda;
            float want;
            if (i < nb) {
              const float *last = a + (i / 4 * 4 + 3) * lda;
              want = sgemv_model_row(ai, x, k, 4 - (int64_t)(((uintptr_t)last >> 2) & 3), 4, 4);
            } else {
              want = sgemv_model_row(ai, x, k, 4 - (int64_t)(((uintptr_t)x >> 2) & 3), i - nb == 1 ? 4 : 8, 8);
            }
            if (memcmp(&want, &y[i], 4) != 0) bad++;
          }
        }
  CHECK(bad == 0);
  /* K = 5, four contiguous rows from a 64-byte boundary (fuzz
   * 57721566-446342): the last row starts at element 15, so the head is 1
   * product; k 1 (+L) and k 2 (-L) sit in lanes 0 and 1, which meet last,
   * after k 3 and k 4 were absorbed: 0, where the plain sum gives 2 */
  float *a = abuf, *x = xbuf;
  for (int i = 0; i < 4 * 5; i++) a[i] = 1.0f;
  for (int j = 0; j < 5; j++) x[j] = 1.0f;
  a[1] = 0x1p40f;
  a[2] = -0x1p40f;
  sgemv_t_run(a, 5, x, y, 4, 5);
  CHECK(y[0] == 0.0f);
  CHECK(y[1] == 5.0f);
}

/* SDOT: x . y with x of stride sx (0: one value) and y ones except 2^25,
 * -2^25 and 1 at p, q, r: 1 exactly when p and q meet before r joins. */
static float sdot_triple(int64_t n, int64_t sx, int64_t p, int64_t q, int64_t r) {
  static float x[2 * 160], y[160], c;
  for (int64_t j = 0; j < 2 * n; j++) x[j] = 1.0f;
  for (int64_t j = 0; j < n; j++) y[j] = 0.0f;
  y[p] = 0x1p25f;
  y[q] = -0x1p25f;
  y[r] = 1.0f;
  nrt_launch l;
  memset(&l, 0, sizeof l);
  l.op = NRT_OP(GEMM);
  l.ndim = 4;
  l.sizes[0] = 1; l.sizes[1] = 1; l.sizes[2] = 1; l.sizes[3] = n;
  l.noutputs = 1;
  l.ninputs = 2;
  l.compute_dtype = NRT_FLOAT32;
  l.scalars[0].f = 1.0;
  l.params[0] = NRT_GEMM_LOOP_SDOT;
  l.params[2] = sx != 1; /* the strided kernel */
  l.operands[0] = (nrt_operand){.data = &c, .dtype = NRT_FLOAT32, .strides = {0, 4, 4}};
  l.operands[1] = (nrt_operand){.data = x, .dtype = NRT_FLOAT32, .strides = {0, 0, sx * 4}};
  l.operands[2] = (nrt_operand){.data = y, .dtype = NRT_FLOAT32, .strides = {0, 4, 0}};
  CHECK_OK(nrt_launch_run(&l));
  return c;
}

/* The trees measured on the CPU's torch.dot (kernels/gemm/sdot.c). */
static void test_gemm_sdot(void) {
  /* unit strides: 16 lanes; k and k + 16 share lane k below 64 */
  CHECK(sdot_triple(17, 1, 0, 16, 8) == 1.0f);
  CHECK(sdot_triple(17, 1, 0, 8, 16) == 0.0f);
  /* from 64: four accumulators, k and k + 64 share a lane, k + 16 joins next */
  CHECK(sdot_triple(65, 1, 0, 64, 16) == 1.0f);
  CHECK(sdot_triple(65, 1, 0, 16, 64) == 0.0f);
  /* halving by 8 and 4, then neighbours: 0 meets 1 before 2 */
  CHECK(sdot_triple(4, 1, 0, 1, 2) == 1.0f);
  CHECK(sdot_triple(4, 1, 0, 2, 1) == 0.0f);
  /* strided (0 or 2): 4 lanes, (l0 + l2) + (l1 + l3), the rest in pairs, then one */
  CHECK(sdot_triple(8, 0, 0, 4, 2) == 1.0f);
  CHECK(sdot_triple(8, 2, 0, 2, 1) == 1.0f);
  CHECK(sdot_triple(6, 2, 0, 1, 4) == 0.0f); /* (((0, 2), 4), ((1, 3), 5)): 4 joins 0 first */
  CHECK(sdot_triple(6, 0, 0, 2, 4) == 1.0f);
  CHECK(sdot_triple(7, 0, 0, 1, 6) == 1.0f);
}

int main(void) {
  RUN_TEST(test_gemm_shapes);
  RUN_TEST(test_gemm_bias_alpha_beta);
  RUN_TEST(test_gemm_dtypes);
  RUN_TEST(test_gemm_exact);
  RUN_TEST(test_gemm_beta_zero_and_empty_k);
  RUN_TEST(test_gemm_int);
  RUN_TEST(test_gemm_large);
  RUN_TEST(test_gemm_strided_kernel);
  RUN_TEST(test_gemm_direct_operands);
  RUN_TEST(test_gemm_bf16_store_rounding);
  RUN_TEST(test_cgemm_alpha_placement);
  RUN_TEST(test_cgemm_gemv_lanes);
  RUN_TEST(test_gemm_loop_orders);
  RUN_TEST(test_gemm_reduced_loop_orders);
  RUN_TEST(test_gemm_sgemv_t);
  RUN_TEST(test_gemm_sgemv_n8);
  RUN_TEST(test_gemm_sgemv_t16);
  RUN_TEST(test_gemm_sdot);
  return TEST_RESULT();
}
