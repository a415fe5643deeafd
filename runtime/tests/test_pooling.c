/* Pooling kernel tests: the fast plane path against the reference loops
 * for max / avg / adaptive pooling and their backward passes (1-d, 2-d,
 * 3-d, padding, dilation, count_include_pad, divisor_override, permuted
 * layouts, low-precision dtypes), plus known values and NaN handling. */
#include <stdint.h>
#include <string.h>
#include "testing.h"
#include "kernels/common/common.h"
#include "nrt/ops/pooling.h"

typedef nrt_test_tensor5 tensor;

static void tensor_make(tensor *t, const int64_t shape[5], bool channels_last, nrt_dtype dt) {
  nrt_test_tensor5_make(t, shape, channels_last, dt);
  /* coarse values make ties (first-max rule) likely */
  for (int64_t i = 0; i < t->numel; i++)
    nrt_test_put(t->data, dt, i, dt == NRT_INT64 ? 0 : (double)(int)(nrt_test_urand() * 8) / 4);
}

typedef struct pcase {
  int64_t n, c, i[3], k[3], s[3], p[3], d[3], o[3];
  bool adaptive, cip, cl;
  int64_t divisor;
  nrt_dtype dt;
} pcase;

static int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  int64_t span = in + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  int64_t o = span / s + 1;
  if (ceil_mode && (o - 1) * s >= in + p) o--;
  return o;
}

static void compare(nrt_launch *l, tensor *out, const char *what) {
  size_t bytes = (size_t)out->numel * nrt_dtype_size(out->dt);
  void *ref = malloc(bytes + 8);
  nrt_kernels_set_reference(true);
  CHECK_OK(nrt_launch_run(l));
  nrt_kernels_set_reference(false);
  memcpy(ref, out->data, bytes);
  memset(out->data, 0xff, bytes);
  CHECK_OK(nrt_launch_run(l));
  int bad = 0;
  double tol = out->dt == NRT_BFLOAT16 ? 1.0 / 64 : 1e-5;
  for (int64_t i = 0; i < out->numel && bad < 3; i++) {
    double want = nrt_test_get(ref, out->dt, i), got = nrt_test_get(out->data, out->dt, i);
    if (!(fabs(got - want) <= tol * (1 + fabs(want))) && !(isnan(got) && isnan(want))) {
      fprintf(stderr, "%s [%lld]: got %g want %g\n", what, (long long)i, got, want);
      bad++;
    }
  }
  CHECK(bad == 0);
  free(ref);
}

static void run_case(const pcase *c) {
  int64_t xs[5] = {c->n, c->c, c->i[0], c->i[1], c->i[2]};
  int64_t ys[5] = {c->n, c->c, c->o[0], c->o[1], c->o[2]};
  tensor x, y, idx, gx;
  tensor_make(&x, xs, c->cl, c->dt);
  tensor_make(&y, ys, c->cl, c->dt);
  tensor_make(&idx, ys, c->cl, NRT_INT64);
  tensor_make(&gx, xs, c->cl, c->dt);
  nrt_launch l;
  memset(&l, 0, sizeof l);
  l.ndim = 11;
  int64_t sizes[11] = {c->n, c->c, c->o[0], c->o[1], c->o[2], c->i[0], c->i[1], c->i[2], c->k[0], c->k[1], c->k[2]};
  memcpy(l.sizes, sizes, sizeof sizes);
  for (int i = 0; i < 3; i++) {
    l.aux[i] = c->s[i];
    l.aux[3 + i] = c->p[i];
    l.aux[6 + i] = c->d[i];
  }
  l.params[0] = c->adaptive;
  l.compute_dtype = c->dt;
  char what[128];
  snprintf(what, sizeof what, "pool %lldx%lld i%lldx%lldx%lld o%lldx%lldx%lld k%lld s%lld p%lld d%lld ad%d %s%s",
           (long long)c->n, (long long)c->c, (long long)c->i[0], (long long)c->i[1], (long long)c->i[2],
           (long long)c->o[0], (long long)c->o[1], (long long)c->o[2], (long long)c->k[2], (long long)c->s[2],
           (long long)c->p[2], (long long)c->d[2], c->adaptive, nrt_dtype_name(c->dt), c->cl ? " cl" : "");
  char tag[200];

  l.op = NRT_OP(MAX_POOL);
  l.noutputs = 2;
  l.ninputs = 1;
  nrt_test_tensor5_operand(&l.operands[0], &y);
  nrt_test_tensor5_operand(&l.operands[1], &idx);
  nrt_test_tensor5_operand(&l.operands[2], &x);
  snprintf(tag, sizeof tag, "%s max", what);
  compare(&l, &y, tag);
  compare(&l, &idx, tag);

  l.op = NRT_OP(MAX_POOL_BACKWARD);
  l.noutputs = 1;
  l.ninputs = 2;
  nrt_test_tensor5_operand(&l.operands[0], &gx);
  nrt_test_tensor5_operand(&l.operands[1], &y);
  nrt_test_tensor5_operand(&l.operands[2], &idx);
  snprintf(tag, sizeof tag, "%s max-bwd", what);
  compare(&l, &gx, tag);

  if (c->d[0] == 1 && c->d[1] == 1 && c->d[2] == 1) {
    for (int mode = 0; mode < 3; mode++) {
      l.params[1] = mode == 1;                 /* count_include_pad */
      l.params[2] = mode == 2 ? c->divisor : 0; /* divisor_override */
      l.op = NRT_OP(AVG_POOL);
      l.ninputs = 1;
      nrt_test_tensor5_operand(&l.operands[0], &y);
      nrt_test_tensor5_operand(&l.operands[1], &x);
      snprintf(tag, sizeof tag, "%s avg%d", what, mode);
      compare(&l, &y, tag);
      l.op = NRT_OP(AVG_POOL_BACKWARD);
      nrt_test_tensor5_operand(&l.operands[0], &gx);
      nrt_test_tensor5_operand(&l.operands[1], &y);
      snprintf(tag, sizeof tag, "%s avg%d-bwd", what, mode);
      compare(&l, &gx, tag);
    }
  }
  free(x.data);
  free(y.data);
  free(idx.data);
  free(gx.data);
}

static pcase fixed(int64_t n, int64_t c, const int64_t i[3], const int64_t k[3], const int64_t s[3],
                   const int64_t p[3], const int64_t d[3], bool ceil_mode) {
  pcase r = {.n = n, .c = c, .dt = NRT_FLOAT32, .divisor = 3};
  for (int j = 0; j < 3; j++) {
    r.i[j] = i[j];
    r.k[j] = k[j];
    r.s[j] = s[j];
    r.p[j] = p[j];
    r.d[j] = d[j];
    r.o[j] = out_size(i[j], k[j], s[j], p[j], d[j], ceil_mode);
  }
  return r;
}

static void test_pool_fixed(void) {
  const int64_t one[3] = {1, 1, 1}, zero[3] = {0, 0, 0};
  struct {
    int64_t i[3], k[3], s[3], p[3], d[3];
    bool ceil_mode;
  } cases[] = {
      {{1, 8, 8}, {1, 2, 2}, {1, 2, 2}, {0, 0, 0}, {1, 1, 1}, false},
      {{1, 9, 11}, {1, 3, 3}, {1, 2, 2}, {0, 1, 1}, {1, 1, 1}, false},  /* ResNet stem pool */
      {{1, 9, 11}, {1, 3, 3}, {1, 2, 2}, {0, 1, 1}, {1, 1, 1}, true},   /* ceil_mode */
      {{1, 10, 7}, {1, 3, 2}, {1, 1, 2}, {0, 1, 1}, {1, 2, 3}, false},  /* dilation */
      {{1, 1, 13}, {1, 1, 4}, {1, 1, 3}, {0, 0, 2}, {1, 1, 1}, true},   /* 1-d */
      {{5, 6, 7}, {2, 3, 2}, {2, 2, 1}, {1, 1, 0}, {1, 1, 1}, false},   /* 3-d */
      {{1, 5, 5}, {1, 5, 5}, {1, 5, 5}, {0, 2, 2}, {1, 1, 1}, true},    /* big padding */
  };
  (void)one;
  (void)zero;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    for (int cl = 0; cl < 2; cl++) {
      pcase c = fixed(2, 3, cases[i].i, cases[i].k, cases[i].s, cases[i].p, cases[i].d, cases[i].ceil_mode);
      c.cl = cl;
      run_case(&c);
    }
  pcase c = fixed(2, 5, cases[1].i, cases[1].k, cases[1].s, cases[1].p, cases[1].d, false);
  c.dt = NRT_BFLOAT16;
  run_case(&c);
  c.dt = NRT_FLOAT64;
  run_case(&c);
}

static void test_pool_adaptive(void) {
  int64_t shapes[][6] = {{1, 7, 9, 1, 3, 4}, {1, 10, 10, 1, 1, 1}, {1, 6, 6, 1, 6, 6}, {1, 5, 13, 1, 7, 5},
                         {4, 5, 6, 2, 3, 4}, {1, 1, 17, 1, 1, 5}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    for (int cl = 0; cl < 2; cl++) {
      pcase c = {.n = 2, .c = 3, .adaptive = true, .cl = cl, .dt = NRT_FLOAT32, .divisor = 0};
      for (int j = 0; j < 3; j++) {
        c.i[j] = shapes[i][j];
        c.o[j] = shapes[i][3 + j];
        c.k[j] = c.s[j] = c.d[j] = 1;
      }
      run_case(&c);
    }
}

static nrt_launch pool2d(nrt_op op, int64_t ih, int64_t iw, int64_t oh, int64_t ow, int64_t k, int64_t s) {
  nrt_launch l;
  memset(&l, 0, sizeof l);
  l.op = op;
  l.ndim = 11;
  int64_t sizes[11] = {1, 1, 1, oh, ow, 1, ih, iw, 1, k, k};
  memcpy(l.sizes, sizes, sizeof sizes);
  for (int i = 0; i < 3; i++) l.aux[i] = i ? s : 1, l.aux[6 + i] = 1;
  l.compute_dtype = NRT_FLOAT32;
  return l;
}

static void set2d(nrt_operand *o, void *data, nrt_dtype dt, int64_t h, int64_t w) {
  int64_t es = (int64_t)nrt_dtype_size(dt);
  o->data = data;
  o->dtype = dt;
  o->strides[0] = o->strides[1] = h * w * es;
  o->strides[3] = w * es;
  o->strides[4] = es;
}

static void test_pool_known(void) {
  float x[16], y[4], gx[16];
  int64_t idx[4];
  for (int ref = 0; ref < 2; ref++) {
    nrt_kernels_set_reference(ref);
    for (int i = 0; i < 16; i++) x[i] = (float)i;
    x[0] = NAN; /* the NaN wins its window */
    x[10] = 99; /* the max of its window */
    nrt_launch l = pool2d(NRT_OP(MAX_POOL), 4, 4, 2, 2, 2, 2);
    l.noutputs = 2;
    l.ninputs = 1;
    set2d(&l.operands[0], y, NRT_FLOAT32, 2, 2);
    set2d(&l.operands[1], idx, NRT_INT64, 2, 2);
    set2d(&l.operands[2], x, NRT_FLOAT32, 4, 4);
    CHECK_OK(nrt_launch_run(&l));
    CHECK(isnan(y[0]) && idx[0] == 0);
    CHECK(y[1] == 7 && idx[1] == 7);
    CHECK(y[2] == 13 && idx[2] == 13);
    CHECK(y[3] == 99 && idx[3] == 10);
    nrt_launch b = pool2d(NRT_OP(MAX_POOL_BACKWARD), 4, 4, 2, 2, 2, 2);
    b.noutputs = 1;
    b.ninputs = 2;
    float gy[4] = {1, 2, 3, 4};
    set2d(&b.operands[0], gx, NRT_FLOAT32, 4, 4);
    set2d(&b.operands[1], gy, NRT_FLOAT32, 2, 2);
    set2d(&b.operands[2], idx, NRT_INT64, 2, 2);
    CHECK_OK(nrt_launch_run(&b));
    float want[16] = {1, 0, 0, 0, 0, 0, 0, 2, 0, 0, 4, 0, 0, 3, 0, 0};
    for (int i = 0; i < 16; i++) CHECK(gx[i] == want[i]);
    /* avg 3x3 stride 2 padding 1 on 0..15, count_include_pad off: corner window {0,1,4,5} */
    for (int i = 0; i < 16; i++) x[i] = (float)i;
    nrt_launch a = pool2d(NRT_OP(AVG_POOL), 4, 4, 2, 2, 3, 2);
    a.aux[4] = a.aux[5] = 1;
    a.noutputs = 1;
    a.ninputs = 1;
    set2d(&a.operands[0], y, NRT_FLOAT32, 2, 2);
    set2d(&a.operands[1], x, NRT_FLOAT32, 4, 4);
    CHECK_OK(nrt_launch_run(&a));
    CHECK(y[0] == 2.5f && y[3] == 10.0f); /* last window: rows and cols 1..3, sum 90 */
    a.params[1] = 1; /* count_include_pad: divisor 9 */
    CHECK_OK(nrt_launch_run(&a));
    CHECK(fabs(y[0] - 10.0 / 9) < 1e-6);
    /* adaptive 1-d: [1 2 3 4 5] -> 3 windows [0,2) [1,4) [3,5) */
    float x5[5] = {1, 2, 3, 4, 5}, y3[3];
    nrt_launch ad = pool2d(NRT_OP(AVG_POOL), 1, 5, 1, 3, 1, 1);
    ad.params[0] = 1;
    ad.noutputs = 1;
    ad.ninputs = 1;
    set2d(&ad.operands[0], y3, NRT_FLOAT32, 1, 3);
    set2d(&ad.operands[1], x5, NRT_FLOAT32, 1, 5);
    CHECK_OK(nrt_launch_run(&ad));
    CHECK(y3[0] == 1.5f && y3[1] == 3.0f && y3[2] == 4.5f);
  }
  nrt_kernels_set_reference(false);
}

/* Integers (forward only): exact max with first-index ties; avg divides
 * with truncation toward zero. Values checked against PyTorch's CPU. */
static void test_pool_integer(void) {
  int64_t x[16] = {-7, 3, 5, 8, 1, 2, 3, 4, 9, 9, 9, 9, 1, 1, 1, 2}, y[16], idx[4];
  nrt_launch l = pool2d(NRT_OP(MAX_POOL), 4, 4, 2, 2, 2, 2);
  l.compute_dtype = NRT_INT64;
  l.noutputs = 2;
  l.ninputs = 1;
  set2d(&l.operands[0], y, NRT_INT64, 2, 2);
  set2d(&l.operands[1], idx, NRT_INT64, 2, 2);
  set2d(&l.operands[2], x, NRT_INT64, 4, 4);
  CHECK_OK(nrt_launch_run(&l));
  CHECK(y[0] == 3 && y[1] == 8 && y[2] == 9 && y[3] == 9);
  CHECK(idx[0] == 1 && idx[1] == 3 && idx[2] == 8 && idx[3] == 10);
  nrt_launch a = pool2d(NRT_OP(AVG_POOL), 4, 4, 4, 4, 3, 1);
  a.aux[4] = a.aux[5] = 1;
  a.params[1] = 1;
  a.compute_dtype = NRT_INT64;
  a.noutputs = 1;
  a.ninputs = 1;
  set2d(&a.operands[0], y, NRT_INT64, 4, 4);
  set2d(&a.operands[1], x, NRT_INT64, 4, 4);
  CHECK_OK(nrt_launch_run(&a));
  int64_t want[16] = {0, 0, 2, 2, 1, 3, 5, 4, 2, 4, 4, 3, 2, 3, 3, 2};
  for (int i = 0; i < 16; i++) CHECK(y[i] == want[i]);
  nrt_launch b = pool2d(NRT_OP(AVG_POOL_BACKWARD), 4, 4, 4, 4, 3, 1);
  b.compute_dtype = NRT_INT64;
  b.noutputs = 1;
  b.ninputs = 1;
  set2d(&b.operands[0], y, NRT_INT64, 4, 4);
  set2d(&b.operands[1], x, NRT_INT64, 4, 4);
  CHECK_STATUS(nrt_launch_run(&b), NRT_ERROR_UNSUPPORTED); /* no integer gradients */
}

int main(void) {
  RUN_TEST(test_pool_known);
  RUN_TEST(test_pool_fixed);
  RUN_TEST(test_pool_adaptive);
  RUN_TEST(test_pool_integer);
  return TEST_RESULT();
}
