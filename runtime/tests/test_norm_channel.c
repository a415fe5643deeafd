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

int main(void) {
  nrt_test_seed(0x853C49E6748FEA9Bull);
  RUN_TEST(test_batch_norm_known);
  RUN_TEST(test_batch_norm);
  RUN_TEST(test_group_norm);
  return TEST_RESULT();
}
