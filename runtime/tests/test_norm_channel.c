/* Channel-norm kernel tests: batch norm (train with and without running
 * statistics, eval, backward in both modes, every output mask) and group
 * norm (forward, backward), fast path against the reference loops, over
 * contiguous and channels-last strides and low-precision dtypes; plus
 * hand-computed statistics. */
#include <stdint.h>
#include <string.h>
#include "testing.h"
#include "kernels/common/common.h"
#include "nrt/ops/norm.h"

/* A buffer with its element count, dtype and {n, c, s} strides (elements). */
typedef struct buf {
  void *data;
  int64_t numel, st[3];
  nrt_dtype dt;
} buf;

static buf act(int64_t n, int64_t c, int64_t s, bool channels_last, nrt_dtype dt, double offset) {
  buf b = {.numel = n * c * s, .dt = dt};
  b.data = calloc((size_t)b.numel + 1, nrt_dtype_size(dt));
  if (channels_last) {
    b.st[0] = c * s; b.st[1] = 1; b.st[2] = c;
  } else {
    b.st[0] = c * s; b.st[1] = s; b.st[2] = 1;
  }
  for (int64_t i = 0; i < b.numel; i++) nrt_test_put(b.data, dt, i, offset + 2 * nrt_test_urand());
  return b;
}

static buf vec(int64_t n, nrt_dtype dt, double lo, double hi) {
  buf b = {.numel = n, .dt = dt, .st = {1, 0, 0}};
  b.data = calloc((size_t)n + 1, nrt_dtype_size(dt));
  for (int64_t i = 0; i < n; i++) nrt_test_put(b.data, dt, i, lo + (hi - lo) * (nrt_test_urand() + 1) / 2);
  return b;
}

static void op(nrt_operand *o, const buf *b) {
  int64_t es = (int64_t)nrt_dtype_size(b->dt);
  o->data = b->data;
  o->dtype = b->dt;
  for (int i = 0; i < 3; i++) o->strides[i] = b->st[i] * es;
}

/* Runs l in reference and fast mode (restoring the `inout` buffers, which
 * the launch updates in place, before each run), then compares outputs. */
static void compare(nrt_launch *l, buf *outs, int nout, buf *inout, int ninout, const char *what) {
  void *saved[8], *ref[8];
  for (int i = 0; i < ninout; i++) {
    size_t bytes = (size_t)inout[i].numel * nrt_dtype_size(inout[i].dt);
    saved[i] = malloc(bytes + 8);
    memcpy(saved[i], inout[i].data, bytes);
  }
  nrt_kernels_set_reference(true);
  CHECK_OK(nrt_launch_run(l));
  nrt_kernels_set_reference(false);
  for (int i = 0; i < nout; i++) {
    size_t bytes = (size_t)outs[i].numel * nrt_dtype_size(outs[i].dt);
    ref[i] = malloc(bytes + 8);
    memcpy(ref[i], outs[i].data, bytes);
  }
  for (int i = 0; i < ninout; i++)
    memcpy(inout[i].data, saved[i], (size_t)inout[i].numel * nrt_dtype_size(inout[i].dt));
  CHECK_OK(nrt_launch_run(l));
  for (int i = 0; i < nout; i++) {
    double tol = outs[i].dt == NRT_BFLOAT16 ? 1.0 / 64 : 2e-5;
    int bad = 0;
    for (int64_t k = 0; k < outs[i].numel && bad < 3; k++) {
      double want = nrt_test_get(ref[i], outs[i].dt, k), got = nrt_test_get(outs[i].data, outs[i].dt, k);
      if (!(fabs(got - want) <= tol * (1 + fabs(want)))) {
        fprintf(stderr, "%s out%d [%lld]: got %.8g want %.8g\n", what, i, (long long)k, got, want);
        bad++;
      }
    }
    CHECK(bad == 0);
    free(ref[i]);
  }
  for (int i = 0; i < ninout; i++) free(saved[i]);
}

static void run_bn(int64_t N, int64_t C, int64_t S, bool cl, nrt_dtype dt) {
  char what[96];
  snprintf(what, sizeof what, "bn %lldx%lldx%lld %s%s", (long long)N, (long long)C, (long long)S,
           nrt_dtype_name(dt), cl ? " cl" : "");
  buf x = act(N, C, S, cl, dt, 0.5), y = act(N, C, S, cl, dt, 0), gy = act(N, C, S, cl, dt, 0);
  buf w = vec(C, NRT_FLOAT32, 0.5, 1.5), b = vec(C, NRT_FLOAT32, -1, 1);
  buf mean = vec(C, NRT_FLOAT32, 0, 0), invstd = vec(C, NRT_FLOAT32, 0, 0);
  buf rm = vec(C, NRT_FLOAT32, -0.2, 0.2), rvar = vec(C, NRT_FLOAT32, 0.5, 2);
  buf gw = vec(C, NRT_FLOAT32, 0, 0), gb = vec(C, NRT_FLOAT32, 0, 0);
  nrt_launch l;
  for (int affine = 0; affine < 2; affine++) {
    /* training, with and without running statistics */
    for (int running = 0; running < 2; running++) {
      memset(&l, 0, sizeof l);
      l.op = NRT_OP(BATCH_NORM);
      l.ndim = 3;
      l.sizes[0] = N; l.sizes[1] = C; l.sizes[2] = S;
      l.compute_dtype = dt;
      l.scalars[0].f = 1e-5;
      l.scalars[1].f = 0.1;
      l.noutputs = running ? 5 : 3;
      op(&l.operands[0], &y);
      op(&l.operands[1], &mean);
      op(&l.operands[2], &invstd);
      int k = 3;
      if (running) {
        op(&l.operands[k++], &rm);
        op(&l.operands[k++], &rvar);
      }
      op(&l.operands[k++], &x);
      if (affine) {
        op(&l.operands[k++], &w);
        op(&l.operands[k++], &b);
        l.params[1] = 3;
      }
      l.ninputs = k - l.noutputs;
      buf outs[5] = {y, mean, invstd, rm, rvar};
      buf inout[2] = {rm, rvar};
      compare(&l, outs, l.noutputs, inout, running ? 2 : 0, what);
    }
    /* eval */
    memset(&l, 0, sizeof l);
    l.op = NRT_OP(BATCH_NORM_EVAL);
    l.ndim = 3;
    l.sizes[0] = N; l.sizes[1] = C; l.sizes[2] = S;
    l.compute_dtype = dt;
    l.scalars[0].f = 1e-5;
    l.noutputs = 1;
    op(&l.operands[0], &y);
    op(&l.operands[1], &x);
    op(&l.operands[2], &rm);
    op(&l.operands[3], &rvar);
    l.ninputs = 3;
    if (affine) {
      op(&l.operands[4], &w);
      op(&l.operands[5], &b);
      l.ninputs = 5;
      l.params[1] = 3;
    }
    compare(&l, &y, 1, NULL, 0, what);
    /* eval with its saved statistics: y unchanged, save_mean = running_mean,
     * save_invstd = 1/sqrt(running_var + eps) on both paths */
    {
      int64_t k = l.ninputs;
      memmove(&l.operands[3], &l.operands[1], sizeof(nrt_operand) * (size_t)k);
      op(&l.operands[1], &mean);
      op(&l.operands[2], &invstd);
      l.noutputs = 3;
      buf outs[3] = {y, mean, invstd};
      compare(&l, outs, 3, NULL, 0, what);
      for (int64_t c = 0; c < C; c++) {
        double rmv = nrt_test_get(rm.data, NRT_FLOAT32, c), rvv = nrt_test_get(rvar.data, NRT_FLOAT32, c);
        CHECK(nrt_test_get(mean.data, NRT_FLOAT32, c) == (float)rmv);
        CHECK(fabs(nrt_test_get(invstd.data, NRT_FLOAT32, c) - 1.0 / sqrt(rvv + 1e-5)) <= 1e-6);
      }
    }
    /* backward, training (batch stats) and eval (running stats), every mask */
    for (int train = 0; train < 2; train++)
      for (int mask = 1; mask < 8; mask++) {
        memset(&l, 0, sizeof l);
        l.op = NRT_OP(BATCH_NORM_BACKWARD);
        l.ndim = 3;
        l.sizes[0] = N; l.sizes[1] = C; l.sizes[2] = S;
        l.compute_dtype = dt;
        l.scalars[0].f = 1e-5;
        l.params[0] = mask;
        l.params[2] = train;
        buf all[3] = {y, gw, gb}, outs[3];
        int k = 0;
        for (int i = 0; i < 3; i++)
          if (mask >> i & 1) {
            outs[k] = all[i];
            op(&l.operands[k++], &all[i]);
          }
        l.noutputs = k;
        op(&l.operands[k++], &gy);
        op(&l.operands[k++], &x);
        op(&l.operands[k++], train ? &mean : &rm);
        op(&l.operands[k++], train ? &invstd : &rvar);
        if (affine) op(&l.operands[k++], &w);
        l.ninputs = k - l.noutputs;
        compare(&l, outs, l.noutputs, NULL, 0, what);
      }
  }
  free(x.data); free(y.data); free(gy.data); free(w.data); free(b.data); free(mean.data);
  free(invstd.data); free(rm.data); free(rvar.data); free(gw.data); free(gb.data);
}

static void run_gn(int64_t N, int64_t G, int64_t Cg, int64_t S, bool cl, nrt_dtype dt) {
  char what[96];
  snprintf(what, sizeof what, "gn %lldx%lldx%lldx%lld %s%s", (long long)N, (long long)G, (long long)Cg,
           (long long)S, nrt_dtype_name(dt), cl ? " cl" : "");
  int64_t C = G * Cg;
  buf x = act(N, C, S, cl, dt, 0.3), y = act(N, C, S, cl, dt, 0), gy = act(N, C, S, cl, dt, 0);
  buf w = vec(C, dt, 0.5, 1.5), b = vec(C, dt, -1, 1);
  buf mean = vec(N * G, dt, 0, 0), rstd = vec(N * G, dt, 0, 0);
  mean.st[0] = rstd.st[0] = G;
  mean.st[1] = rstd.st[1] = 1;
  buf gw = vec(C, dt, 0, 0), gb = vec(C, dt, 0, 0);
  nrt_launch l;
  for (int affine = 0; affine < 2; affine++) {
    memset(&l, 0, sizeof l);
    l.op = NRT_OP(GROUP_NORM);
    l.ndim = 4;
    l.sizes[0] = N; l.sizes[1] = G; l.sizes[2] = Cg; l.sizes[3] = S;
    l.compute_dtype = dt;
    l.scalars[0].f = 1e-5;
    l.noutputs = 3;
    op(&l.operands[0], &y);
    op(&l.operands[1], &mean);
    op(&l.operands[2], &rstd);
    op(&l.operands[3], &x);
    l.ninputs = 1;
    if (affine) {
      op(&l.operands[4], &w);
      op(&l.operands[5], &b);
      l.ninputs = 3;
      l.params[1] = 3;
    }
    buf outs[3] = {y, mean, rstd};
    compare(&l, outs, 3, NULL, 0, what);
    for (int mask = 1; mask < 8; mask++) {
      memset(&l, 0, sizeof l);
      l.op = NRT_OP(GROUP_NORM_BACKWARD);
      l.ndim = 4;
      l.sizes[0] = N; l.sizes[1] = G; l.sizes[2] = Cg; l.sizes[3] = S;
      l.compute_dtype = dt;
      l.params[0] = mask;
      buf all[3] = {y, gw, gb}, bo[3];
      int k = 0;
      for (int i = 0; i < 3; i++)
        if (mask >> i & 1) {
          bo[k] = all[i];
          op(&l.operands[k++], &all[i]);
        }
      l.noutputs = k;
      op(&l.operands[k++], &gy);
      op(&l.operands[k++], &x);
      op(&l.operands[k++], &mean);
      op(&l.operands[k++], &rstd);
      if (affine) op(&l.operands[k++], &w);
      l.ninputs = k - l.noutputs;
      compare(&l, bo, l.noutputs, NULL, 0, what);
    }
  }
  free(x.data); free(y.data); free(gy.data); free(w.data); free(b.data); free(mean.data);
  free(rstd.data); free(gw.data); free(gb.data);
}

static void test_batch_norm(void) {
  run_bn(4, 6, 50, false, NRT_FLOAT32);
  run_bn(4, 6, 50, true, NRT_FLOAT32);
  run_bn(3, 5, 1500, false, NRT_FLOAT32); /* segments longer than a block */
  run_bn(8, 3, 1, false, NRT_FLOAT32);    /* BatchNorm1d on [N, C] */
  run_bn(2, 4, 33, false, NRT_BFLOAT16);
  run_bn(2, 4, 33, true, NRT_FLOAT64);
}

static void test_group_norm(void) {
  run_gn(2, 4, 3, 20, false, NRT_FLOAT32);
  run_gn(2, 4, 3, 20, true, NRT_FLOAT32);
  run_gn(3, 2, 5, 1100, false, NRT_FLOAT32);
  run_gn(2, 1, 6, 7, false, NRT_FLOAT32); /* one group: layer-norm-like */
  run_gn(2, 6, 1, 9, false, NRT_FLOAT32); /* instance-norm-like */
  run_gn(2, 3, 2, 17, false, NRT_BFLOAT16);
}

/* Channel 0 holds 1, 2, 3, 4 (two images of two values): mean 2.5, biased
 * variance 1.25, unbiased 5/3; running stats move 10% of the way. */
static void test_batch_norm_known(void) {
  float x[4] = {1, 2, 3, 4}, y[4], mean, invstd, rm = 0, rvar = 1;
  nrt_launch l;
  memset(&l, 0, sizeof l);
  l.op = NRT_OP(BATCH_NORM);
  l.ndim = 3;
  l.sizes[0] = 2; l.sizes[1] = 1; l.sizes[2] = 2;
  l.compute_dtype = NRT_FLOAT32;
  l.scalars[0].f = 0.0;
  l.scalars[1].f = 0.1;
  l.noutputs = 5;
  l.ninputs = 1;
  float *ptrs[6] = {y, &mean, &invstd, &rm, &rvar, x};
  for (int i = 0; i < 6; i++) {
    l.operands[i].data = ptrs[i];
    l.operands[i].dtype = NRT_FLOAT32;
    l.operands[i].strides[0] = 4;
  }
  l.operands[0].strides[0] = l.operands[5].strides[0] = 8;
  l.operands[0].strides[2] = l.operands[5].strides[2] = 4;
  for (int ref = 0; ref < 2; ref++) {
    rm = 0;
    rvar = 1;
    nrt_kernels_set_reference(ref);
    CHECK_OK(nrt_launch_run(&l));
    CHECK_NEAR(mean, 2.5, 1e-7);
    CHECK_NEAR(invstd, 1 / sqrt(1.25), 1e-6);
    CHECK_NEAR(rm, 0.25, 1e-7);
    CHECK_NEAR(rvar, 0.9 + 0.1 * 5.0 / 3.0, 1e-6);
    CHECK_NEAR(y[0], -1.5 / sqrt(1.25), 1e-6);
    CHECK_NEAR(y[3], 1.5 / sqrt(1.25), 1e-6);
  }
  nrt_kernels_set_reference(false);
  l.ninputs = 2; /* weight operand without its p1 bit */
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT);
}

/* Batch norm with an infinite or huge weight, NRT_BN_STRIDED: ATen's
 * strided kernel (and float64) compute ((x - mean) * invstd) * w + b,
 * which gives -inf * sign for w = -inf and stays finite for w = 2e38 with
 * |xhat| < 1; the x * (invstd w) + (b - mean invstd w) form would give NaN
 * and inf. Both layouts, fast path and reference, training and eval. */
static void check_bn_wide(const buf *y, const buf *x, const double *mean, const double *invstd, const float *w,
                          const float *b, int64_t N, int64_t C, int64_t S, const char *what) {
  for (int64_t n = 0; n < N; n++)
    for (int64_t c = 0; c < C; c++)
      for (int64_t s = 0; s < S; s++) {
        int64_t i = n * y->st[0] + c * y->st[1] + s * y->st[2];
        double xv = nrt_test_get(x->data, x->dt, i), got = nrt_test_get(y->data, y->dt, i);
        double want = ((xv - mean[c]) * invstd[c]) * w[c] + b[c];
        bool ok = isinf(want) ? got == want : fabs(got - want) <= 1e-5 * fabs(want) + 1e-5;
        if (!ok) fprintf(stderr, "%s [%lld %lld %lld]: got %g want %g\n", what, (long long)n, (long long)c,
                         (long long)s, got, want);
        CHECK(ok);
      }
}

static void test_batch_norm_wide_weight(void) {
  const int64_t N = 2, C = 3, S = 4;
  float w[3] = {-INFINITY, 2e38f, 1}, b[3] = {0.5f, -1, 0.25f}, rm[3] = {0.45f, 1.45f, 2.45f},
        rv[3] = {1, 0.25f, 1};
  for (int cl = 0; cl < 2; cl++) {
    buf x = act(N, C, S, cl, NRT_FLOAT32, 0), y = act(N, C, S, cl, NRT_FLOAT32, 0);
    for (int64_t n = 0; n < N; n++)
      for (int64_t c = 0; c < C; c++)
        for (int64_t s = 0; s < S; s++)
          nrt_test_put(x.data, x.dt, n * x.st[0] + c * x.st[1] + s * x.st[2], 0.1 * (1 + n * S + s) + c);
    buf wv = {.data = w, .numel = 3, .st = {1}, .dt = NRT_FLOAT32}, bv = {.data = b, .numel = 3, .st = {1}, .dt = NRT_FLOAT32};
    buf rmv = {.data = rm, .numel = 3, .st = {1}, .dt = NRT_FLOAT32}, rvv = {.data = rv, .numel = 3, .st = {1}, .dt = NRT_FLOAT32};
    float smean[3], sinv[3];
    buf mv = {.data = smean, .numel = 3, .st = {1}, .dt = NRT_FLOAT32}, iv = {.data = sinv, .numel = 3, .st = {1}, .dt = NRT_FLOAT32};
    double mean[3], invstd[3], emean[3], einv[3];
    for (int64_t c = 0; c < C; c++) {
      double m = 0, v = 0;
      for (int64_t k = 0; k < N * S; k++) m += (0.1 * (1 + k) + c) / (double)(N * S);
      for (int64_t k = 0; k < N * S; k++) v += pow(0.1 * (1 + k) + c - m, 2) / (double)(N * S);
      mean[c] = m;
      invstd[c] = 1 / sqrt(v + 1e-5);
      emean[c] = rm[c];
      einv[c] = 1 / sqrt(rv[c] + 1e-5);
    }
    for (int ref = 0; ref < 2; ref++) {
      nrt_kernels_set_reference(ref);
      nrt_launch l;
      memset(&l, 0, sizeof l);
      l.op = NRT_OP(BATCH_NORM);
      l.ndim = 3;
      l.sizes[0] = N; l.sizes[1] = C; l.sizes[2] = S;
      l.compute_dtype = NRT_FLOAT32;
      l.scalars[0].f = 1e-5;
      l.noutputs = 3;
      l.ninputs = 3;
      l.params[1] = 3 | NRT_BN_STRIDED;
      op(&l.operands[0], &y);
      op(&l.operands[1], &mv);
      op(&l.operands[2], &iv);
      op(&l.operands[3], &x);
      op(&l.operands[4], &wv);
      op(&l.operands[5], &bv);
      CHECK_OK(nrt_launch_run(&l));
      check_bn_wide(&y, &x, mean, invstd, w, b, N, C, S, cl ? "bn train cl" : "bn train");
      memset(&l, 0, sizeof l);
      l.op = NRT_OP(BATCH_NORM_EVAL);
      l.ndim = 3;
      l.sizes[0] = N; l.sizes[1] = C; l.sizes[2] = S;
      l.compute_dtype = NRT_FLOAT32;
      l.scalars[0].f = 1e-5;
      l.noutputs = 1;
      l.ninputs = 5;
      l.params[1] = 3 | NRT_BN_STRIDED;
      op(&l.operands[0], &y);
      op(&l.operands[1], &x);
      op(&l.operands[2], &rmv);
      op(&l.operands[3], &rvv);
      op(&l.operands[4], &wv);
      op(&l.operands[5], &bv);
      CHECK_OK(nrt_launch_run(&l));
      check_bn_wide(&y, &x, emean, einv, w, b, N, C, S, cl ? "bn eval cl" : "bn eval");
    }
    nrt_kernels_set_reference(false);
    free(x.data);
    free(y.data);
  }
}

/* Without NRT_BN_STRIDED the forward is ATen's contiguous kernel: y =
 * fma(x, a, fma(-mean, a, b)), a = invstd * w, as its vectorised code is
 * contracted: x = 2e38, w = 2, b = -3e38 gives 1e38 (x * a overflows
 * alone); w = inf gives NaN for x > 0 (inf - inf), the strided formula +-inf. Eval
 * with eps 0 and running_var 1 (invstd exactly 1), both layouts, each ISA. */
static void test_batch_norm_folded_fma(void) {
  const int64_t N = 2, C = 2, S = 2;
  float w[2] = {2, INFINITY}, b[2] = {-3e38f, 0.5f}, rm[2] = {0, 1}, rv[2] = {1, 1};
  float xs[2][4] = {{2e38f, 1, -1e38f, 0}, {3, -1, 1, 2}}; /* channel c: (n, s) in order */
  for (int isa = 0; isa < 4; isa++) /* the baseline build calls fmaf, the others use the instruction */
  for (int cl = 0; cl < 2; cl++)
    for (int strided = 0; strided < 2; strided++) {
      nrt_kernels_limit_isa(isa == 0 ? NRT_ISA_BASELINE : isa == 1 ? NRT_ISA_AVX2 : NRT_ISA_BEST);
      buf x = act(N, C, S, cl, NRT_FLOAT32, 0), y = act(N, C, S, cl, NRT_FLOAT32, 0);
      for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
          for (int64_t s = 0; s < S; s++)
            nrt_test_put(x.data, x.dt, n * x.st[0] + c * x.st[1] + s * x.st[2], xs[c][n * S + s]);
      buf wv = {.data = w, .numel = 2, .st = {1}, .dt = NRT_FLOAT32}, bv = {.data = b, .numel = 2, .st = {1}, .dt = NRT_FLOAT32};
      buf rmv = {.data = rm, .numel = 2, .st = {1}, .dt = NRT_FLOAT32}, rvv = {.data = rv, .numel = 2, .st = {1}, .dt = NRT_FLOAT32};
      nrt_launch l;
      memset(&l, 0, sizeof l);
      l.op = NRT_OP(BATCH_NORM_EVAL);
      l.ndim = 3;
      l.sizes[0] = N; l.sizes[1] = C; l.sizes[2] = S;
      l.compute_dtype = NRT_FLOAT32;
      l.scalars[0].f = 0;
      l.noutputs = 1;
      l.ninputs = 5;
      l.params[1] = 3 | (strided ? NRT_BN_STRIDED : 0);
      op(&l.operands[0], &y);
      op(&l.operands[1], &x);
      op(&l.operands[2], &rmv);
      op(&l.operands[3], &rvv);
      op(&l.operands[4], &wv);
      op(&l.operands[5], &bv);
      CHECK_OK(nrt_launch_run(&l));
      for (int64_t n = 0; n < N; n++)
        for (int64_t s = 0; s < S; s++) {
          float x0 = xs[0][n * S + s], x1 = xs[1][n * S + s];
          float y0 = (float)nrt_test_get(y.data, y.dt, n * y.st[0] + s * y.st[2]);
          float y1 = (float)nrt_test_get(y.data, y.dt, n * y.st[0] + y.st[1] + s * y.st[2]);
          float want0 = strided ? (x0 * 2.0f) + -3e38f : (float)fma(x0, 2.0, -3e38);
          CHECK(y0 == want0);
          if (strided) CHECK(x1 == 1 ? isnan(y1) : y1 == (x1 > 1 ? INFINITY : -INFINITY));
          else CHECK(x1 < 0 ? y1 == -INFINITY : isnan(y1)); /* fma(x, inf, -inf) */
        }
      free(x.data);
      free(y.data);
    }
  nrt_kernels_limit_isa(NRT_ISA_BEST);
}

/* An inf in a group makes the group's variance NaN and all of it NaN, as
 * ATen's max(var, 0) keeps it (group_norm of [1, inf, 2, 3]); the other
 * group stays finite. */
static void test_group_norm_nonfinite(void) {
  float x[8] = {1, INFINITY, 2, 3, 1, 2, 3, 4}, y[8], mean[2], rstd[2];
  buf xb = {.data = x, .numel = 8, .st = {8, 4, 1}, .dt = NRT_FLOAT32}, yb = xb;
  yb.data = y;
  buf mb = {.data = mean, .numel = 2, .st = {2, 1}, .dt = NRT_FLOAT32}, rb = mb;
  rb.data = rstd;
  for (int ref = 0; ref < 2; ref++) {
    nrt_kernels_set_reference(ref);
    nrt_launch l;
    memset(&l, 0, sizeof l);
    l.op = NRT_OP(GROUP_NORM);
    l.ndim = 4;
    l.sizes[0] = 1; l.sizes[1] = 2; l.sizes[2] = 1; l.sizes[3] = 4;
    l.compute_dtype = NRT_FLOAT32;
    l.scalars[0].f = 1e-5;
    l.noutputs = 3;
    l.ninputs = 1;
    op(&l.operands[0], &yb);
    op(&l.operands[1], &mb);
    op(&l.operands[2], &rb);
    op(&l.operands[3], &xb);
    CHECK_OK(nrt_launch_run(&l));
    for (int i = 0; i < 4; i++) CHECK(isnan(y[i]));
    CHECK_NEAR(y[4], -1.5 / sqrt(1.25 + 1e-5), 1e-6);
    CHECK_NEAR(y[7], 1.5 / sqrt(1.25 + 1e-5), 1e-6);
  }
  nrt_kernels_set_reference(false);
}

int main(void) {
  nrt_test_seed(0x853C49E6748FEA9Bull);
  RUN_TEST(test_batch_norm_known);
  RUN_TEST(test_batch_norm);
  RUN_TEST(test_group_norm);
  RUN_TEST(test_batch_norm_wide_weight);
  RUN_TEST(test_batch_norm_folded_fma);
  RUN_TEST(test_group_norm_nonfinite);
  return TEST_RESULT();
}
