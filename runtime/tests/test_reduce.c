/* Reduction kernel tests: fast path (rows and columns traversals, split
 * reductions across threads) against the reference loop on random data in
 * several layouts, and known results: NaN propagation and first-index
 * rules of max/argmax, variance corrections, norms, logsumexp, empty
 * reductions. */
#include <stdint.h>
#include <string.h>
#include "testing.h"
#include "kernels/common/common.h"

static bool is_index_op(nrt_op op) {
  return op == NRT_OP_ARGMAX || op == NRT_OP_ARGMIN || op == NRT_OP_MAX_WITH_INDEX ||
         op == NRT_OP_MIN_WITH_INDEX;
}

/* A reduction over a row-major input of `ndim` dims; dims with mask bit
 * set are reduced. The outputs are dense over the kept dims with stride 0
 * along the reduced ones (TensorIterator's reduction layout). `transposed`
 * stores the input with the first dim fastest; `reverse` hands the dims
 * over fastest-first, as the glue does. */
typedef struct rcase {
  nrt_op op;
  nrt_dtype in_dt, out_dt, compute;
  int ndim;
  int64_t sizes[4];
  unsigned mask;
  bool transposed, reverse;
  double s0;
  int64_t p0, p1;
  double lo, hi;
  bool ints; /* integral input values */
  bool specials; /* about 1 in 2003 values NaN, +-inf, -0.0 or 0.0 */
} rcase;

static int run_rcase(const rcase *c, bool *out_ok_fast_equals_ref) {
  int nd = c->ndim;
  int64_t numel = 1, nout = 1;
  for (int d = 0; d < nd; d++) {
    numel *= c->sizes[d];
    if (!(c->mask >> d & 1)) nout *= c->sizes[d];
  }
  size_t ies = nrt_dtype_size(c->in_dt), oes = nrt_dtype_size(c->out_dt);
  void *in = calloc((size_t)numel + 1, ies);
  for (int64_t i = 0; i < numel; i++) {
    double v = nrt_test_uniform(c->lo, c->hi);
    if (c->specials && nrt_test_rand_range(0, 2003) == 0) {
      static const double sp[5] = {NAN, INFINITY, -INFINITY, -0.0, 0.0};
      v = sp[nrt_test_rand_range(0, 5)];
    }
    nrt_test_put(in, c->in_dt, i, c->ints ? floor(v) : v);
  }
  int64_t ist[4], ost[4], idst[4];
  int64_t s = (int64_t)ies;
  if (c->transposed)
    for (int d = 0; d < nd; d++) { ist[d] = s; s *= c->sizes[d]; }
  else
    for (int d = nd - 1; d >= 0; d--) { ist[d] = s; s *= c->sizes[d]; }
  int64_t so = (int64_t)oes, si = 8;
  for (int d = nd - 1; d >= 0; d--) {
    bool red = c->mask >> d & 1;
    ost[d] = red ? 0 : so;
    idst[d] = red ? 0 : si;
    if (!red) { so *= c->sizes[d]; si *= c->sizes[d]; }
  }
  nrt_launch l;
  memset(&l, 0, sizeof l);
  l.op = c->op;
  l.ndim = nd;
  l.compute_dtype = c->compute;
  l.scalars[0].f = c->s0;
  l.params[0] = c->p0;
  l.params[1] = c->p1;
  bool two = c->op == NRT_OP_MAX_WITH_INDEX || c->op == NRT_OP_MIN_WITH_INDEX;
  bool idx_only = c->op == NRT_OP_ARGMAX || c->op == NRT_OP_ARGMIN;
  l.noutputs = two ? 2 : 1;
  l.ninputs = 1;
  void *o[2][2];
  for (int r = 0; r < 2; r++) {
    o[r][0] = calloc((size_t)nout + 1, idx_only ? 8 : oes);
    o[r][1] = calloc((size_t)nout + 1, 8);
  }
  for (int d = 0; d < nd; d++) {
    int dd = c->reverse ? nd - 1 - d : d;
    l.sizes[d] = c->sizes[dd];
    l.operands[0].strides[d] = idx_only ? idst[dd] : ost[dd];
    l.operands[1].strides[d] = idst[dd];
    l.operands[l.noutputs].strides[d] = ist[dd];
  }
  l.operands[0].dtype = idx_only ? NRT_INT64 : c->out_dt;
  l.operands[1].dtype = NRT_INT64;
  l.operands[l.noutputs].dtype = c->in_dt;
  l.operands[l.noutputs].data = in;
  nrt_status st[2];
  for (int r = 0; r < 2; r++) {
    nrt_kernels_set_reference(r == 0);
    l.operands[0].data = o[r][0];
    if (two) l.operands[1].data = o[r][1];
    st[r] = nrt_launch_run(&l);
  }
  nrt_kernels_set_reference(false);
  int bad = 0;
  if (st[0] != NRT_SUCCESS || st[1] != NRT_SUCCESS) {
    fprintf(stderr, "%s: status %s / %s (%s)\n", nrt_op_name(c->op), nrt_status_name(st[0]),
            nrt_status_name(st[1]), nrt_last_error_message());
    bad = 1;
  }
  nrt_dtype vdt = idx_only ? NRT_INT64 : c->out_dt;
  double tol = c->out_dt == NRT_BFLOAT16 ? 1.0 / 128 : (c->out_dt == NRT_FLOAT16 ? 1.0 / 1024 : 2e-6);
  for (int64_t i = 0; i < nout && !bad; i++) {
    double want = nrt_test_get(o[0][0], vdt, i), got = nrt_test_get(o[1][0], vdt, i);
    /* logsumexp = max + log(sum) cancels near 0: error relative to the max */
    double atol = c->op == NRT_OP_LOGSUMEXP ? 2e-5 : 1e-9;
    bool ok = got == want || (want != want && got != got) || fabs(got - want) <= tol * fabs(want) + atol;
    /* the stepwise product has one order on both paths: bit for bit */
    bool exact = is_index_op(c->op) || !nrt_dtype_is_floating(c->compute) || (c->op == NRT_OP_PROD && c->p0 == 1);
    if (exact) ok = got == want || (want != want && got != got);
    if (two) ok = ok && nrt_test_get(o[0][1], NRT_INT64, i) == nrt_test_get(o[1][1], NRT_INT64, i);
    if (!ok) {
      fprintf(stderr, "%s in %s dims %lld,%lld,%lld mask %u tr %d rev %d [%lld]: fast %.9g ref %.9g\n",
              nrt_op_name(c->op), nrt_dtype_name(c->in_dt), (long long)c->sizes[0],
              (long long)c->sizes[1], (long long)c->sizes[2], c->mask, c->transposed, c->reverse,
              (long long)i, got, want);
      bad = 1;
    }
  }
  if (out_ok_fast_equals_ref) *out_ok_fast_equals_ref = !bad;
  free(in);
  for (int r = 0; r < 2; r++) { free(o[r][0]); free(o[r][1]); }
  return bad;
}

static void test_fast_vs_reference(void) {
  struct { nrt_op op; double s0; int64_t p0; double lo, hi; } ops[] = {
      {NRT_OP_SUM, 0, 0, -1, 1},       {NRT_OP_PROD, 0, 0, 0.9, 1.1},  {NRT_OP_MEAN, 0, 0, -1, 1},
      {NRT_OP_AMAX, 0, 0, -1, 1},      {NRT_OP_AMIN, 0, 0, -1, 1},     {NRT_OP_MAX_WITH_INDEX, 0, 0, -4, 4},
      {NRT_OP_MIN_WITH_INDEX, 0, 0, -4, 4}, {NRT_OP_ARGMAX, 0, 0, -4, 4}, {NRT_OP_ARGMIN, 0, 0, -4, 4},
      {NRT_OP_ALL, 0, 0, 0, 1.02},     {NRT_OP_ANY, 0, 0, -0.02, 0.01}, {NRT_OP_VAR, 1, 0, -1, 3},
      {NRT_OP_VAR, 0, 1, -1, 3},       {NRT_OP_NORM, 2, 0, -1, 1},     {NRT_OP_NORM, 1, 0, -1, 1},
      {NRT_OP_NORM, 0, 0, -1, 1},      {NRT_OP_NORM, INFINITY, 0, -1, 1}, {NRT_OP_NORM, -INFINITY, 0, -1, 1},
      {NRT_OP_NORM, 3, 0, -1, 1},      {NRT_OP_LOGSUMEXP, 0, 0, -20, 20}};
  /* (sizes, mask): full, last dim, first dim (columns), middle, two dims */
  struct { int nd; int64_t s[3]; unsigned mask; } shapes[] = {
      {1, {1000, 1, 1}, 1},   {2, {33, 257, 1}, 2}, {2, {257, 33, 1}, 1}, {3, {5, 70, 9}, 2},
      {3, {6, 7, 130}, 5},   {2, {1, 255, 1}, 2},  {2, {7, 1, 1}, 1},    {3, {3, 4, 5}, 7},
      {2, {3000, 40, 1}, 1}, {1, {70000, 1, 1}, 1}, {2, {70000, 3, 1}, 1}, {2, {5, 66000, 1}, 2},
      {2, {3000, 3, 1}, 2},  {3, {40, 5, 6}, 4},   {2, {2, 40000, 1}, 1}};
  int failures = 0;
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
      for (int layout = 0; layout < 3; layout++) {
        /* index ops on several reduced dims only in the given order */
        if (is_index_op(ops[i].op) && __builtin_popcount(shapes[s].mask) > 1 && layout == 2) continue;
        rcase c = {.op = ops[i].op, .in_dt = NRT_FLOAT32, .out_dt = NRT_FLOAT32,
                   .compute = NRT_FLOAT32, .ndim = shapes[s].nd, .mask = shapes[s].mask,
                   .transposed = layout == 1, .reverse = layout == 2, .s0 = ops[i].s0,
                   .p0 = ops[i].p0, .lo = ops[i].lo, .hi = ops[i].hi};
        memcpy(c.sizes, shapes[s].s, sizeof shapes[s].s);
        if (ops[i].op == NRT_OP_ALL || ops[i].op == NRT_OP_ANY) c.out_dt = NRT_BOOL;
        /* ties on purpose: small integer values repeat, so first-index rules matter */
        if (is_index_op(ops[i].op)) c.ints = true;
        if (ops[i].op == NRT_OP_PROD && shapes[s].s[0] > 1000) continue;
        failures += run_rcase(&c, NULL);
      }
  CHECK(failures == 0);
}

static void test_dtypes(void) {
  int failures = 0;
  nrt_op ops[] = {NRT_OP_SUM, NRT_OP_AMAX, NRT_OP_ARGMIN, NRT_OP_PROD, NRT_OP_ALL, NRT_OP_ANY,
                  NRT_OP_MAX_WITH_INDEX};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    /* integers: int64 accumulation */
    rcase c = {.op = ops[i], .in_dt = NRT_INT32, .out_dt = NRT_INT64, .compute = NRT_INT32, .ndim = 2,
               .sizes = {37, 300}, .mask = 2, .lo = -1000, .hi = 1000, .ints = true};
    if (ops[i] == NRT_OP_PROD) { c.lo = -2; c.hi = 3; }
    if (ops[i] == NRT_OP_ALL || ops[i] == NRT_OP_ANY) { c.out_dt = NRT_BOOL; c.lo = 0; c.hi = 1.01; }
    if (ops[i] == NRT_OP_MAX_WITH_INDEX || ops[i] == NRT_OP_AMAX) c.out_dt = NRT_INT32;
    failures += run_rcase(&c, NULL);
    c.mask = 1; /* columns */
    failures += run_rcase(&c, NULL);
  }
  /* low precision in and out */
  rcase c = {.op = NRT_OP_SUM, .in_dt = NRT_BFLOAT16, .out_dt = NRT_BFLOAT16, .compute = NRT_BFLOAT16,
             .ndim = 2, .sizes = {20, 500}, .mask = 2, .lo = -1, .hi = 1};
  failures += run_rcase(&c, NULL);
  c.in_dt = c.out_dt = c.compute = NRT_FLOAT16;
  c.op = NRT_OP_MEAN;
  c.mask = 1;
  failures += run_rcase(&c, NULL);
  c.in_dt = NRT_FLOAT16;
  c.out_dt = NRT_FLOAT32; /* sum(dtype=float32) of half */
  c.op = NRT_OP_NORM;
  c.s0 = 2;
  failures += run_rcase(&c, NULL);
  c.in_dt = c.out_dt = c.compute = NRT_FLOAT64;
  c.op = NRT_OP_VAR;
  c.s0 = 1;
  failures += run_rcase(&c, NULL);
  /* uint8 any/all give uint8 */
  c = (rcase){.op = NRT_OP_ANY, .in_dt = NRT_UINT8, .out_dt = NRT_UINT8, .compute = NRT_UINT8, .ndim = 1,
              .sizes = {100}, .mask = 1, .lo = 0, .hi = 1.02, .ints = true};
  failures += run_rcase(&c, NULL);
  CHECK(failures == 0);
}

/* Column reductions (the vertical form): tiles of 4096 columns and a
 * narrower last one, row counts that leave a tail after the four-row
 * steps, the reduced range split into chunks, float32 and bfloat16 read in
 * place and float16 converted, with NaN, infinities and signed zeros. */
static void test_columns(void) {
  struct { nrt_op op; double s0; } ops[] = {{NRT_OP_SUM, 0},  {NRT_OP_MEAN, 0}, {NRT_OP_AMAX, 0}, {NRT_OP_AMIN, 0},
                                            {NRT_OP_NORM, 1}, {NRT_OP_NORM, 2}, {NRT_OP_ALL, 0},  {NRT_OP_ANY, 0}};
  nrt_dtype dts[3] = {NRT_FLOAT32, NRT_BFLOAT16, NRT_FLOAT16};
  struct { int64_t rows, cols; } shapes[] = {{203, 4200}, {7, 5000}, {1027, 4500}, {4099, 3}};
  int failures = 0;
  /* the baseline build of the loops too (the AVX-512 one on hosts that have it) */
  for (int isa = 0; isa < 2; isa++) {
    nrt_kernels_limit_isa(isa ? NRT_ISA_BEST : NRT_ISA_BASELINE);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
      for (int t = 0; t < 3; t++)
        for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
          for (int sp = 0; sp < 2; sp++) {
            bool big = shapes[s].rows * shapes[s].cols > 1000000;
            if (big && (t == 2 || ops[i].op == NRT_OP_MEAN || ops[i].op == NRT_OP_NORM || ops[i].op == NRT_OP_ALL))
              continue; /* the long reference runs once per dtype and kind of op */
            rcase c = {.op = ops[i].op, .in_dt = dts[t], .out_dt = dts[t], .compute = dts[t], .ndim = 2,
                       .sizes = {shapes[s].rows, shapes[s].cols}, .mask = 1, .s0 = ops[i].s0, .lo = -1, .hi = 1,
                       .specials = sp};
            if (c.op == NRT_OP_ALL || c.op == NRT_OP_ANY) {
              c.out_dt = NRT_BOOL;
              c.lo = c.op == NRT_OP_ALL ? 0 : -0.02;
              c.hi = c.op == NRT_OP_ALL ? 1.002 : 0.01;
            }
            failures += run_rcase(&c, NULL);
          }
  }
  /* integers down columns: wrapping int64 sums and extremes */
  nrt_op iops[3] = {NRT_OP_SUM, NRT_OP_AMAX, NRT_OP_AMIN};
  for (int i = 0; i < 3; i++) {
    rcase c = {.op = iops[i], .in_dt = NRT_INT32, .out_dt = NRT_INT64, .compute = NRT_INT64, .ndim = 2,
               .sizes = {130, 4500}, .mask = 1, .lo = -1e9, .hi = 1e9, .ints = true};
    failures += run_rcase(&c, NULL);
  }
  CHECK(failures == 0);
}

/* PROD p0 = 1 (the CPU's stepwise product): fast path against the
 * reference bit for bit, over runs grouped by vectors (unit stride, at
 * least 4 vectors long) and not, several reduced dims, and values whose
 * products overflow and underflow, with specials. */
static void test_prod_stepwise_layouts(void) {
  nrt_dtype dts[3] = {NRT_FLOAT32, NRT_FLOAT16, NRT_BFLOAT16};
  struct { int nd; int64_t s[3]; unsigned mask; } shapes[] = {
      {1, {1000, 1, 1}, 1}, {1, {31, 1, 1}, 1},   {1, {32, 1, 1}, 1},    {1, {63, 1, 1}, 1},
      {1, {64, 1, 1}, 1},   {1, {5000, 1, 1}, 1}, {2, {33, 257, 1}, 2},  {2, {257, 33, 1}, 1},
      {3, {5, 70, 9}, 2},   {3, {6, 7, 130}, 5},  {3, {3, 40, 50}, 7},   {2, {7, 1, 1}, 1}};
  int failures = 0;
  for (int t = 0; t < 3; t++)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
      for (int layout = 0; layout < 3; layout++)
        for (int sp = 0; sp < 2; sp++) {
          rcase c = {.op = NRT_OP_PROD, .in_dt = dts[t], .out_dt = dts[t], .compute = dts[t],
                     .ndim = shapes[s].nd, .mask = shapes[s].mask, .transposed = layout == 1,
                     .reverse = layout == 2, .p0 = 1, .p1 = 32, .lo = 0.5, .hi = 1.7, .specials = sp};
          memcpy(c.sizes, shapes[s].s, sizeof shapes[s].s);
          failures += run_rcase(&c, NULL);
          c.p1 = 64;
          failures += run_rcase(&c, NULL);
        }
  CHECK(failures == 0);
}

/* A full stepwise product of n values of dtype dt, stride_e elements apart. */
static double prod_step(nrt_dtype dt, const double *v, int64_t n, int64_t stride_e, int64_t vbytes, bool ref,
                        nrt_status *st) {
  size_t es = nrt_dtype_size(dt);
  char *in = calloc((size_t)(n * stride_e + 1), es);
  for (int64_t i = 0; i < n; i++) nrt_test_put(in, dt, i * stride_e, v[i]);
  double out_buf = 0;
  nrt_launch l;
  memset(&l, 0, sizeof l);
  l.op = NRT_OP_PROD;
  l.ndim = 1;
  l.sizes[0] = n;
  l.compute_dtype = dt;
  l.params[0] = 1;
  l.params[1] = vbytes;
  l.noutputs = l.ninputs = 1;
  l.operands[0] = (nrt_operand){.data = &out_buf, .dtype = dt};
  l.operands[1] = (nrt_operand){.data = in, .dtype = dt, .strides = {stride_e * (int64_t)es}};
  *st = nrt_test_run(&l, ref);
  double r = nrt_test_get(&out_buf, dt, 0);
  free(in);
  return r;
}

static void test_prod_stepwise_values(void) {
  nrt_status st;
  double v[128];
  for (int r = 0; r < 2; r++) {
    /* float16 rounds every step: 32768 * 32768 is inf, and inf * 0 NaN
     * (the double accumulation gives 0) */
    double h[3] = {32767, 32767, 0};
    CHECK(isnan(prod_step(NRT_FLOAT16, h, 3, 1, 32, r, &st)));
    CHECK_OK(st);
    /* float32 overflows where float32 does */
    double f[3] = {3.4e38, 2, 0.5};
    CHECK(isinf(prod_step(NRT_FLOAT32, f, 3, 1, 32, r, &st)));
    /* 32-byte vectors of float32: from 32 elements on, lanes 0 and 8 are
     * multiplied before lane 1, so 1e30 * 1e-30 comes first and nothing
     * overflows; 31 elements run in order and 1e30 * 1e30 is inf */
    for (int i = 0; i < 128; i++) v[i] = 1;
    v[0] = v[1] = 1e30;
    v[8] = v[9] = 1e-30;
    double g = prod_step(NRT_FLOAT32, v, 32, 1, 32, r, &st);
    CHECK(isfinite(g) && fabs(g - 1) < 1e-5);
    CHECK(isinf(prod_step(NRT_FLOAT32, v, 31, 1, 32, r, &st)));
    CHECK(isinf(prod_step(NRT_FLOAT32, v, 32, 2, 32, r, &st))); /* strided: in order */
    CHECK(isinf(prod_step(NRT_FLOAT32, v, 32, 1, 64, r, &st))); /* 64-byte vectors need 64 */
    /* float16: 16 lanes of 32 bytes */
    for (int i = 0; i < 128; i++) v[i] = 1;
    v[0] = v[1] = 300;
    v[16] = v[17] = 1.0 / 300;
    g = prod_step(NRT_FLOAT16, v, 64, 1, 32, r, &st);
    CHECK(isfinite(g) && fabs(g - 1) < 1e-2);
    CHECK(isinf(prod_step(NRT_FLOAT16, v, 63, 1, 32, r, &st)));
    CHECK_OK(st);
  }
  /* refused: an input dtype other than the output's, a bad width */
  double one = 1;
  (void)prod_step(NRT_FLOAT64, &one, 1, 1, 32, false, &st);
  CHECK(st == NRT_ERROR_INVALID_ARGUMENT);
  (void)prod_step(NRT_FLOAT32, &one, 1, 1, 48, false, &st);
  CHECK(st == NRT_ERROR_INVALID_ARGUMENT);
}

/* Complex CUMPROD (ROW, p0 = 1) over rows of n complex values given as
 * (re, im) pairs of part dtype dt; the operands describe the real parts. */
static nrt_status cx_cumprod(nrt_dtype dt, const double *in, double *out, int64_t rows, int64_t n, bool ref,
                             int64_t p0) {
  size_t es = nrt_dtype_size(dt);
  char *a = calloc((size_t)(2 * rows * n + 1), es), *b = calloc((size_t)(2 * rows * n + 1), es);
  for (int64_t i = 0; i < 2 * rows * n; i++) nrt_test_put(a, dt, i, in[i]);
  nrt_launch l;
  memset(&l, 0, sizeof l);
  l.op = NRT_OP_CUMPROD;
  l.ndim = 2;
  l.sizes[0] = rows;
  l.sizes[1] = n;
  l.compute_dtype = dt;
  l.params[0] = p0;
  l.noutputs = l.ninputs = 1;
  int64_t st[2] = {2 * n * (int64_t)es, 2 * (int64_t)es};
  l.operands[0] = (nrt_operand){.data = b, .dtype = dt, .strides = {st[0], st[1]}};
  l.operands[1] = (nrt_operand){.data = a, .dtype = dt, .strides = {st[0], st[1]}};
  nrt_status s = nrt_test_run(&l, ref);
  for (int64_t i = 0; i < 2 * rows * n; i++) out[i] = nrt_test_get(b, dt, i);
  free(a);
  free(b);
  return s;
}

static void test_cumprod_complex(void) {
  double out[2 * 64];
  for (int r = 0; r < 2; r++) {
    /* (1 + 0i)(inf + 0i) = inf + NaN i: a one-element row is a product too */
    double one[2] = {INFINITY, 0};
    CHECK_OK(cx_cumprod(NRT_FLOAT32, one, out, 1, 1, r, 1));
    CHECK(out[0] == INFINITY && isnan(out[1]));
    /* the running value is double: 1e30 * 1e30 overflows only the stored complex64 prefix */
    double big[6] = {1e30, 0, 1e30, 0, 1e-30, 0};
    CHECK_OK(cx_cumprod(NRT_FLOAT32, big, out, 1, 3, r, 1));
    CHECK(nrt_test_near(out[0], 1e30, 1e-6) && isinf(out[2]) && nrt_test_near(out[4], 1e30, 1e-6));
    CHECK(out[1] == 0 && out[3] == 0 && out[5] == 0);
  }
  /* complex128: in order from 1 + 0i with the CPU's contracted product,
   * fast and reference paths bit for bit; two rows of 32 */
  double in[2 * 64], want[2 * 64], got[2][2 * 64];
  for (int i = 0; i < 2 * 64; i++) in[i] = nrt_test_uniform(-1.6, 1.6);
  for (int row = 0; row < 2; row++) {
    double re = 1, im = 0;
    for (int k = 0; k < 32; k++) {
      double c = in[row * 64 + 2 * k], d = in[row * 64 + 2 * k + 1], a = re, b = im;
      re = fma(a, c, -(b * d));
      im = fma(a, d, b * c);
      want[row * 64 + 2 * k] = re;
      want[row * 64 + 2 * k + 1] = im;
    }
  }
  for (int r = 0; r < 2; r++) CHECK_OK(cx_cumprod(NRT_FLOAT64, in, got[r], 2, 32, r, 1));
  int bad = 0;
  for (int i = 0; i < 2 * 64; i++) bad += got[0][i] != want[i] || got[1][i] != want[i];
  CHECK(bad == 0);
  /* p0 is a complex mode of CUMPROD only */
  CHECK(cx_cumprod(NRT_FLOAT32, in, out, 1, 4, false, 2) == NRT_ERROR_INVALID_ARGUMENT);
}

/* SOFTMAX / LOG_SOFTMAX p0 = 1: the CPU's 16-bit intermediates. One row of
 * n float16/bfloat16 values; returns the status, fills out. */
static nrt_status softmax16(nrt_op op, nrt_dtype dt, const double *v, int64_t n, int64_t p0, bool ref, double *out) {
  uint16_t in[64], o[64];
  for (int64_t i = 0; i < n; i++) nrt_test_put(in, dt, i, v[i]);
  nrt_launch l;
  memset(&l, 0, sizeof l);
  l.op = op;
  l.ndim = 1;
  l.sizes[0] = n;
  l.compute_dtype = dt;
  l.params[0] = p0;
  l.noutputs = l.ninputs = 1;
  l.operands[0] = (nrt_operand){.data = o, .dtype = dt, .strides = {2}};
  l.operands[1] = (nrt_operand){.data = in, .dtype = dt, .strides = {2}};
  nrt_status st = nrt_test_run(&l, ref);
  for (int64_t i = 0; i < n; i++) out[i] = nrt_test_get(o, dt, i);
  return st;
}

static void test_softmax_16bit_rounding(void) {
  /* log_softmax of float16 [2, -3, -2]: the sum 1.02506 is kept as float16
   * 1.0254 and its log as float16, so element 0 is -0.02507 as on the CPU
   * (rounding only the result gives -0.02475) */
  double v[3] = {2, -3, -2}, o[64], f[64];
  for (int r = 0; r < 2; r++) {
    CHECK_OK(softmax16(NRT_OP_LOG_SOFTMAX, NRT_FLOAT16, v, 3, 1, r, o));
    CHECK_OK(softmax16(NRT_OP_LOG_SOFTMAX, NRT_FLOAT16, v, 3, 0, r, f));
    CHECK(o[0] == -0.0250701904296875 && fabs(f[0] + 0.024745) < 1e-5);
  }
  /* fast and reference paths bit for bit; softmax rounds each exp first */
  double w[64];
  int bad = 0;
  for (int t = 0; t < 2; t++) {
    nrt_dtype dt = t ? NRT_BFLOAT16 : NRT_FLOAT16;
    for (int i = 0; i < 64; i++) w[i] = nrt_test_uniform(-6, 6);
    for (int k = 0; k < 2; k++) {
      nrt_op op = k ? NRT_OP_LOG_SOFTMAX : NRT_OP_SOFTMAX;
      CHECK_OK(softmax16(op, dt, w, 61, 1, false, o));
      CHECK_OK(softmax16(op, dt, w, 61, 1, true, f));
      for (int i = 0; i < 61; i++) bad += o[i] != f[i];
    }
  }
  CHECK(bad == 0);
  /* p0 = 1 needs a 16-bit output */
  float x[2] = {1, 2}, y[2];
  nrt_launch l;
  memset(&l, 0, sizeof l);
  l.op = NRT_OP_SOFTMAX;
  l.ndim = 1;
  l.sizes[0] = 2;
  l.compute_dtype = NRT_FLOAT32;
  l.params[0] = 1;
  l.noutputs = l.ninputs = 1;
  l.operands[0] = (nrt_operand){.data = y, .dtype = NRT_FLOAT32, .strides = {4}};
  l.operands[1] = (nrt_operand){.data = x, .dtype = NRT_FLOAT32, .strides = {4}};
  CHECK(nrt_test_run(&l, false) == NRT_ERROR_INVALID_ARGUMENT);
}

/* SOFTMAX p0 = 1 over `rows` rows of n float16 values (dim-major, as the
 * glue lays out a softmax over a non-last dim: element i of row r at
 * r + i * rows), with the CPU's split p1..p3. */
static nrt_status softmax16_split(const uint16_t *in, uint16_t *out, int64_t rows, int64_t n, int64_t lanes,
                                  int64_t inner, int64_t threads, bool ref) {
  nrt_launch l;
  memset(&l, 0, sizeof l);
  l.op = NRT_OP_SOFTMAX;
  l.ndim = 2;
  l.sizes[0] = rows;
  l.sizes[1] = n;
  l.compute_dtype = NRT_FLOAT16;
  l.params[0] = 1;
  l.params[1] = lanes;
  l.params[2] = inner;
  l.params[3] = threads;
  l.noutputs = l.ninputs = 1;
  l.operands[0] = (nrt_operand){.data = out, .dtype = NRT_FLOAT16, .strides = {2, 2 * rows}};
  l.operands[1] = (nrt_operand){.data = (void *)in, .dtype = NRT_FLOAT16, .strides = {2, 2 * rows}};
  return nrt_test_run(&l, ref);
}

/* Which of `count` columns PyTorch's non-last-dim 16-bit softmax computes
 * on its vector path, by walking its loop as written (the kernel uses a
 * closed form): parallel_for with grain 0 gives each of t threads
 * ceil(count / t) columns (one task when t == 1 or count == 1); a task
 * takes `lanes` columns while they fit in the inner run and the task,
 * else finishes the task (if fewer than lanes remain in it) or the inner
 * run on the scalar path. */
static void cpu_vector_columns(int64_t count, int64_t inner, int64_t lanes, int64_t threads, bool *vec) {
  int64_t chunk = threads > 1 && count > 1 ? (count + threads - 1) / threads : count;
  for (int64_t b = 0; b < count; b += chunk) {
    int64_t end = b + chunk < count ? b + chunk : count, idx = b;
    while (idx < end) {
      int64_t ii = idx % inner;
      if (ii + lanes <= inner && idx + lanes <= end) {
        for (int64_t k = 0; k < lanes; k++) vec[idx + k] = true;
        idx += lanes;
      } else {
        int64_t tail = idx + lanes > end ? end - idx : inner - ii;
        for (int64_t k = 0; k < tail; k++) vec[idx + k] = false;
        idx += tail;
      }
    }
  }
}

static void test_softmax_16bit_cpu_split(void) {
  /* Rows on the CPU's vector path round once; the others round each exp
   * first (as lanes = 0 does for every row). 50 values in [-3, 3] a row
   * make the two differ somewhere in every row (a wider range flushes most
   * exps to zero either way), so each row shows which path it took. */
  enum { N = 50, MAXROWS = 210 };
  static uint16_t in[N * MAXROWS], all[N * MAXROWS], got[N * MAXROWS], ref[N * MAXROWS];
  static const struct {
    int64_t count, inner, lanes, threads;
  } cases[] = {
      {37, 37, 32, 1},  /* 1 x 37 columns, one task: 0..31 vector, 32..36 scalar */
      {37, 37, 32, 2},  /* two tasks of 19 and 18: all scalar */
      {210, 70, 32, 1}, /* 3 x 70 */
      {210, 70, 32, 4}, /* tasks of 53 cut the inner runs */
      {210, 70, 16, 3}, /* AVX2's 16 lanes, tasks of 70 */
      {210, 210, 32, 2},
      {64, 1, 32, 1}, /* inner 1: never vectorised */
  };
  for (int64_t i = 0; i < N * MAXROWS; i++) nrt_test_put(in, NRT_FLOAT16, i, nrt_test_uniform(-3, 3));
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    int64_t count = cases[c].count;
    bool vec[MAXROWS];
    cpu_vector_columns(count, cases[c].inner, cases[c].lanes, cases[c].threads, vec);
    CHECK_OK(softmax16_split(in, all, count, N, 0, 0, 0, false));
    CHECK_OK(softmax16_split(in, got, count, N, cases[c].lanes, cases[c].inner, cases[c].threads, false));
    CHECK_OK(softmax16_split(in, ref, count, N, cases[c].lanes, cases[c].inner, cases[c].threads, true));
    int wrong = 0, mismatch = 0;
    for (int64_t r = 0; r < count; r++) {
      bool differs = false;
      for (int64_t i = 0; i < N; i++) {
        differs |= got[r + i * count] != all[r + i * count];
        mismatch += got[r + i * count] != ref[r + i * count];
      }
      wrong += differs != vec[r];
    }
    CHECK(wrong == 0);
    CHECK(mismatch == 0);
  }
  /* p1..p3 belong to SOFTMAX p0 = 1 and must describe the rows */
  CHECK(softmax16_split(in, got, 37, N, 32, 5, 1, false) == NRT_ERROR_INVALID_ARGUMENT);
  CHECK(softmax16_split(in, got, 37, N, 0, 37, 1, false) == NRT_ERROR_INVALID_ARGUMENT);
  CHECK(softmax16_split(in, got, 37, N, 32, 37, 0, false) == NRT_ERROR_INVALID_ARGUMENT);
  double v[3] = {2, -3, -2};
  nrt_launch l;
  memset(&l, 0, sizeof l);
  l.op = NRT_OP_LOG_SOFTMAX;
  l.ndim = 1;
  l.sizes[0] = 3;
  l.compute_dtype = NRT_FLOAT16;
  l.params[0] = 1;
  l.params[1] = 32;
  l.params[2] = l.params[3] = 1;
  l.noutputs = l.ninputs = 1;
  for (int i = 0; i < 3; i++) nrt_test_put(in, NRT_FLOAT16, i, v[i]);
  l.operands[0] = (nrt_operand){.data = got, .dtype = NRT_FLOAT16, .strides = {2}};
  l.operands[1] = (nrt_operand){.data = in, .dtype = NRT_FLOAT16, .strides = {2}};
  CHECK(nrt_test_run(&l, false) == NRT_ERROR_INVALID_ARGUMENT);
}

/* ---- known values ------------------------------------------------------------------ */

typedef struct res {
  double v;
  int64_t idx;
} res;

/* Reduces a float32 vector fully; returns value (and index for index ops). */
static res reduce_vec(nrt_op op, const float *x, int64_t n, double s0, int64_t p0, nrt_status *st,
                      bool reference) {
  nrt_launch l;
  memset(&l, 0, sizeof l);
  l.op = op;
  l.ndim = 1;
  l.sizes[0] = n;
  l.compute_dtype = NRT_FLOAT32;
  l.scalars[0].f = s0;
  l.params[0] = p0;
  bool two = op == NRT_OP_MAX_WITH_INDEX || op == NRT_OP_MIN_WITH_INDEX;
  bool idx_only = op == NRT_OP_ARGMAX || op == NRT_OP_ARGMIN;
  l.noutputs = two ? 2 : 1;
  l.ninputs = 1;
  double v = -12345;
  int64_t idx = -12345;
  l.operands[0] = (nrt_operand){.data = idx_only ? (void *)&idx : (void *)&v,
                                .dtype = idx_only ? NRT_INT64 : NRT_FLOAT64};
  l.operands[1] = (nrt_operand){.data = &idx, .dtype = NRT_INT64};
  l.operands[l.noutputs] = (nrt_operand){.data = (void *)x, .dtype = NRT_FLOAT32, .strides = {4}};
  nrt_kernels_set_reference(reference);
  *st = nrt_launch_run(&l);
  nrt_kernels_set_reference(false);
  return (res){v, idx};
}

#define BOTH(ref) for (int ref = 0; ref < 2; ref++)

static void test_extremes_nan_and_ties(void) {
  nrt_status st;
  float a[6] = {1, 5, 3, 5, -2, 5};
  BOTH(r) {
    res m = reduce_vec(NRT_OP_MAX_WITH_INDEX, a, 6, 0, 0, &st, r);
    CHECK_OK(st);
    CHECK(m.v == 5 && m.idx == 1); /* first occurrence */
    m = reduce_vec(NRT_OP_ARGMIN, a, 6, 0, 0, &st, r);
    CHECK(m.idx == 4);
  }
  float b[5] = {1, NAN, 7, NAN, -1};
  BOTH(r) {
    res m = reduce_vec(NRT_OP_ARGMAX, b, 5, 0, 0, &st, r);
    CHECK(m.idx == 1);
    m = reduce_vec(NRT_OP_MIN_WITH_INDEX, b, 5, 0, 0, &st, r);
    CHECK(m.v != m.v && m.idx == 1);
    m = reduce_vec(NRT_OP_AMAX, b, 5, 0, 0, &st, r);
    CHECK(m.v != m.v);
    m = reduce_vec(NRT_OP_AMIN, b, 5, 0, 0, &st, r);
    CHECK(m.v != m.v);
  }
  /* all -inf: index 0 */
  float c[3] = {-INFINITY, -INFINITY, -INFINITY};
  BOTH(r) {
    res m = reduce_vec(NRT_OP_ARGMAX, c, 3, 0, 0, &st, r);
    CHECK(m.idx == 0);
  }
  /* NaN late in a long vector, split across threads */
  enum { N = 200000 };
  float *big = malloc(sizeof(float) * N);
  for (int i = 0; i < N; i++) big[i] = (float)(i % 1000);
  big[150001] = 5000;
  big[170000] = 5000;
  BOTH(r) {
    res m = reduce_vec(NRT_OP_ARGMAX, big, N, 0, 0, &st, r);
    CHECK(m.idx == 150001);
  }
  big[180000] = NAN;
  BOTH(r) {
    res m = reduce_vec(NRT_OP_MAX_WITH_INDEX, big, N, 0, 0, &st, r);
    CHECK(m.v != m.v && m.idx == 180000);
  }
  free(big);
}

static void test_sums_and_moments(void) {
  nrt_status st;
  float x[5] = {1, 2, 3, 4, 10};
  BOTH(r) {
    CHECK(reduce_vec(NRT_OP_SUM, x, 5, 0, 0, &st, r).v == 20);
    CHECK(reduce_vec(NRT_OP_PROD, x, 5, 0, 0, &st, r).v == 240);
    CHECK(reduce_vec(NRT_OP_MEAN, x, 5, 0, 0, &st, r).v == 4);
    CHECK_NEAR(reduce_vec(NRT_OP_VAR, x, 5, 1, 0, &st, r).v, 12.5, 1e-12);
    CHECK_NEAR(reduce_vec(NRT_OP_VAR, x, 5, 0, 0, &st, r).v, 10.0, 1e-12);
    CHECK_NEAR(reduce_vec(NRT_OP_VAR, x, 5, 1, 1, &st, r).v, sqrt(12.5), 1e-12);
    CHECK_NEAR(reduce_vec(NRT_OP_NORM, x, 5, 2, 0, &st, r).v, sqrt(130.0), 1e-12);
    CHECK(reduce_vec(NRT_OP_NORM, x, 5, 1, 0, &st, r).v == 20);
    CHECK(reduce_vec(NRT_OP_NORM, x, 5, INFINITY, 0, &st, r).v == 10);
    CHECK(reduce_vec(NRT_OP_NORM, x, 5, -INFINITY, 0, &st, r).v == 1);
    CHECK_NEAR(reduce_vec(NRT_OP_NORM, x, 5, 3, 0, &st, r).v, cbrt(1 + 8 + 27 + 64 + 1000.0), 1e-12);
    CHECK_NEAR(reduce_vec(NRT_OP_LOGSUMEXP, x, 5, 0, 0, &st, r).v,
               log(exp(1) + exp(2) + exp(3) + exp(4) + exp(10)), 1e-6);
  }
  /* one element with correction 1: 0/0 */
  BOTH(r) CHECK(isnan(reduce_vec(NRT_OP_VAR, x, 1, 1, 0, &st, r).v));
  /* p = 0 counts nonzeros, NaN included */
  float z[4] = {0, 3, -0.0f, NAN};
  BOTH(r) CHECK(reduce_vec(NRT_OP_NORM, z, 4, 0, 0, &st, r).v == 2);
  /* logsumexp specials, as torch.logsumexp */
  float li[3] = {-INFINITY, -INFINITY, -INFINITY}, lp[3] = {1, INFINITY, 2}, ln[2] = {1, NAN};
  float large[2] = {1000, 1000};
  BOTH(r) {
    CHECK(reduce_vec(NRT_OP_LOGSUMEXP, li, 3, 0, 0, &st, r).v == -INFINITY);
    CHECK(reduce_vec(NRT_OP_LOGSUMEXP, lp, 3, 0, 0, &st, r).v == INFINITY);
    CHECK(isnan(reduce_vec(NRT_OP_LOGSUMEXP, ln, 2, 0, 0, &st, r).v));
    CHECK_NEAR(reduce_vec(NRT_OP_LOGSUMEXP, large, 2, 0, 0, &st, r).v, 1000 + log(2.0), 1e-9);
  }
  /* a long float sum accumulates in double: 2^24 + many ones is exact */
  enum { N = 100001 };
  float *v = malloc(sizeof(float) * N);
  v[0] = 16777216.0f;
  for (int i = 1; i < N; i++) v[i] = 1.0f;
  BOTH(r) CHECK(reduce_vec(NRT_OP_SUM, v, N, 0, 0, &st, r).v == 16777216.0 + (N - 1));
  free(v);
}

static void test_empty(void) {
  nrt_status st;
  float dummy = 0;
  BOTH(r) {
    CHECK(reduce_vec(NRT_OP_SUM, &dummy, 0, 0, 0, &st, r).v == 0);
    CHECK_OK(st);
    CHECK(reduce_vec(NRT_OP_PROD, &dummy, 0, 0, 0, &st, r).v == 1);
    CHECK(isnan(reduce_vec(NRT_OP_MEAN, &dummy, 0, 0, 0, &st, r).v));
    CHECK(reduce_vec(NRT_OP_NORM, &dummy, 0, 2, 0, &st, r).v == 0);
    CHECK(reduce_vec(NRT_OP_LOGSUMEXP, &dummy, 0, 0, 0, &st, r).v == -INFINITY);
    reduce_vec(NRT_OP_AMAX, &dummy, 0, 0, 0, &st, r);
    CHECK_STATUS(st, NRT_ERROR_INVALID_ARGUMENT);
    reduce_vec(NRT_OP_ARGMIN, &dummy, 0, 0, 0, &st, r);
    CHECK_STATUS(st, NRT_ERROR_INVALID_ARGUMENT);
  }
}

static void test_int_sum_exact(void) {
  int64_t x[3] = {(1ll << 62), 1, 2}, out = 0;
  nrt_launch l = nrt_test_launch(NRT_OP_SUM, NRT_INT64, 1, (const int64_t[]){3}, 1, 1);
  l.operands[0] = (nrt_operand){.data = &out, .dtype = NRT_INT64};
  l.operands[1] = (nrt_operand){.data = x, .dtype = NRT_INT64, .strides = {8}};
  BOTH(r) {
    nrt_kernels_set_reference(r);
    CHECK_OK(nrt_launch_run(&l));
    CHECK(out == (1ll << 62) + 3);
  }
  nrt_kernels_set_reference(false);
  /* ALL on floats with an integer compute dtype still tests != 0 */
  float f[2] = {0.5f, -0.25f};
  uint8_t b = 0;
  l.op = NRT_OP_ALL;
  l.sizes[0] = 2;
  l.compute_dtype = NRT_BOOL;
  l.operands[0] = (nrt_operand){.data = &b, .dtype = NRT_BOOL};
  l.operands[1] = (nrt_operand){.data = f, .dtype = NRT_FLOAT32, .strides = {4}};
  CHECK_OK(nrt_launch_run(&l));
  CHECK(b == 1);
}

/* ---- VAR p1 = 1: var_mean in the CPU's Welford order ---------------------------- */

/* var and mean of a float64 vector, its elements one Welford step each
 * (split like the CPU's parallel_for over `threads` when long enough). */
static nrt_status welford_vec(const double *x, int64_t n, double corr, int64_t threads, bool ref, double *var,
                              double *mean) {
  nrt_launch l;
  memset(&l, 0, sizeof l);
  l.op = NRT_OP_VAR;
  l.ndim = 1;
  l.sizes[0] = n;
  l.compute_dtype = NRT_FLOAT64;
  l.scalars[0].f = corr;
  l.params[1] = 1;
  l.params[2] = threads;
  l.noutputs = 2;
  l.ninputs = 1;
  l.operands[0] = (nrt_operand){.data = var, .dtype = NRT_FLOAT64};
  l.operands[1] = (nrt_operand){.data = mean, .dtype = NRT_FLOAT64};
  l.operands[2] = (nrt_operand){.data = (void *)x, .dtype = NRT_FLOAT64, .strides = {8}};
  return nrt_test_run(&l, ref);
}

typedef struct wf {
  double mean, m2, n;
} wf;
static wf wf_steps(const double *x, int64_t b, int64_t e) {
  wf s = {0, 0, 0};
  for (int64_t i = b; i < e; i++) {
    s.n += 1;
    double d = x[i] - s.mean;
    s.mean += d / s.n;
    s.m2 += d * (x[i] - s.mean);
  }
  return s;
}

static void test_var_mean_welford(void) {
  /* the running mean is what the steps leave of 1e18, 0.5, -1e18 (the
   * CPU's var_mean mean), not a sum's 0 / 3 */
  double x[3] = {1e18, 0.5, -1e18}, var = 0, mean = 0;
  wf w = wf_steps(x, 0, 3);
  BOTH(r) {
    CHECK_OK(welford_vec(x, 3, 1, 1, r, &var, &mean));
    CHECK(mean == w.mean && var == w.m2 / 2);
  }
  /* 70000 elements on 2 CPU threads: chunks of 35000 from fresh states,
   * combined as WelfordOps::combine; on 1 thread one sequence */
  enum { N = 70000 };
  double *v = malloc(sizeof(double) * N);
  uint64_t seed = 7;
  for (int i = 0; i < N; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    v[i] = (double)(int64_t)(seed >> 11) * 1e-3 * ((i % 97) == 0 ? 1e12 : 1.0);
  }
  wf a = wf_steps(v, 0, N / 2), b = wf_steps(v, N / 2, N), one = wf_steps(v, 0, N);
  double delta = b.mean - a.mean, cnt = a.n + b.n, nb = b.n / cnt;
  double two_mean = a.mean + delta * nb, two_m2 = a.m2 + b.m2 + delta * delta * a.n * nb;
  BOTH(r) {
    CHECK_OK(welford_vec(v, N, 0, 2, r, &var, &mean));
    CHECK(mean == two_mean && var == two_m2 / N);
    CHECK_OK(welford_vec(v, N, 0, 1, r, &var, &mean));
    CHECK(mean == one.mean && var == one.m2 / N);
  }
  CHECK(two_mean != one.mean); /* the split matters for these values */
  free(v);
}

/* ---- SUM p0 = 1, p3 > 1: a whole sum split as the CPU's two_pass_reduction ---- */

/* A SUM p0 = 1 of n unit-stride elements of dtype dt at x into *out, with
 * the CPU's vector width vbytes. */
static void cascade_run(const void *x, void *out, nrt_dtype dt, int64_t n, int64_t vbytes, int64_t threads, bool ref) {
  nrt_launch l;
  memset(&l, 0, sizeof l);
  l.op = NRT_OP_SUM;
  l.ndim = 1;
  l.sizes[0] = n;
  l.compute_dtype = dt;
  l.params[0] = 1;
  l.params[1] = vbytes;
  l.params[3] = threads;
  l.noutputs = 1;
  l.ninputs = 1;
  l.operands[0] = (nrt_operand){.data = out, .dtype = dt};
  l.operands[1] = (nrt_operand){.data = (void *)x, .dtype = dt, .strides = {(int64_t)nrt_dtype_size(dt)}};
  CHECK_OK(nrt_test_run(&l, ref));
}

static float cascade_sum_w(const float *x, int64_t n, int64_t vbytes, int64_t threads, bool ref) {
  float out = -1;
  cascade_run(x, &out, NRT_FLOAT32, n, vbytes, threads, ref);
  return out;
}
static float cascade_sum(const float *x, int64_t n, int64_t threads, bool ref) {
  return cascade_sum_w(x, n, 32, threads, ref);
}

static void test_cascade_two_pass(void) {
  enum { N = 100003 };
  float *v = malloc(sizeof(float) * N);
  uint64_t seed = 11;
  for (int i = 0; i < N; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    v[i] = (float)((double)(int64_t)(seed >> 11) * 1e-12);
  }
  /* on 3 threads: 3 chunks of 33335 (the last shorter), each its own sum,
   * then the 3 partials summed by the same loop */
  float p[3];
  for (int k = 0; k < 3; k++) {
    int64_t b = k * 33335, e = b + 33335 < N ? b + 33335 : N;
    p[k] = cascade_sum(v + b, e - b, 1, true);
  }
  float want = cascade_sum(p, 3, 1, true);
  BOTH(r) CHECK(cascade_sum(v, N, 3, r) == want);
  /* 2 threads and 1: fast and reference agree; the splits give other sums */
  CHECK(cascade_sum(v, N, 2, false) == cascade_sum(v, N, 2, true));
  CHECK(cascade_sum(v, N, 1, false) == cascade_sum(v, N, 1, true));
  CHECK(cascade_sum(v, N, 1, true) != want || cascade_sum(v, N, 2, true) != want);
  free(v);
}

/* ---- SUM p0 = 1 of complex64: each part summed with the element as the lane ---- */

/* A 32-byte vector holds 4 complex64: each part sums as a float32 sum of
 * 4 lanes (a 16-byte float vector) does, not as one of 8 lanes. */
static void test_cascade_complex(void) {
  enum { N = 40009 };
  float (*x)[2] = malloc(sizeof(float) * 2 * N), *re = malloc(sizeof(float) * N), *im = malloc(sizeof(float) * N);
  uint64_t seed = 5;
  for (int i = 0; i < N; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    int pick = (int)(seed >> 60) & 3;
    double v = (double)(int64_t)(seed >> 11) * 1e-15;
    x[i][0] = re[i] = pick == 0 ? 3e38f : pick == 1 ? -3e38f : (float)v;
    x[i][1] = im[i] = (float)(v * 0.37);
  }
  int64_t sizes[] = {3, 17, 64, 333, N};
  bool differs = false;
  for (int s = 0; s < 5; s++)
    for (int64_t threads = 1; threads <= 2; threads++)
      BOTH(r) {
        float out[2] = {-1, -1};
        cascade_run(x, out, NRT_COMPLEX64, sizes[s], 32, threads, r);
        float want_re = cascade_sum_w(re, sizes[s], 16, threads, true);
        float want_im = cascade_sum_w(im, sizes[s], 16, threads, true);
        CHECK((out[0] == want_re || (isnan(out[0]) && isnan(want_re))) && out[1] == want_im);
        float wide = cascade_sum_w(re, sizes[s], 32, threads, true);
        differs |= !(wide == want_re || (isnan(wide) && isnan(want_re)));
      }
  CHECK(differs); /* the lane count matters for these values */
  free(x);
  free(re);
  free(im);
}

/* ---- NORM p1 = 1: float terms and sums, as the CPU's norm kernels ---------------- */

static float vnorm(const float *x, int64_t n, double ord, bool ref) {
  nrt_launch l;
  memset(&l, 0, sizeof l);
  l.op = NRT_OP_NORM;
  l.ndim = 1;
  l.sizes[0] = n;
  l.compute_dtype = NRT_FLOAT32;
  l.scalars[0].f = ord;
  l.params[1] = 1;
  l.params[2] = 1;
  l.noutputs = 1;
  l.ninputs = 1;
  float out = -1;
  l.operands[0] = (nrt_operand){.data = &out, .dtype = NRT_FLOAT32};
  l.operands[1] = (nrt_operand){.data = (void *)x, .dtype = NRT_FLOAT32, .strides = {4}};
  CHECK_OK(nrt_test_run(&l, ref));
  return out;
}

static void test_vector_norm_float(void) {
  float big[2] = {1e20f, 0.0f}, tiny[2] = {1e-25f, -1e-25f}, x[17];
  for (int i = 0; i < 17; i++) x[i] = (float)(i - 8) * 0.25f;
  float lane[8] = {0}, want;
  for (int i = 0; i < 16; i++) lane[i % 8] += x[i] * x[i];
  want = lane[0];
  for (int k = 1; k < 8; k++) want += lane[k];
  want += x[16] * x[16];
  BOTH(r) {
    CHECK(isinf(vnorm(big, 2, 2, r)));       /* 1e40 overflows float */
    CHECK(vnorm(tiny, 2, 2, r) == 0.0f);     /* 1e-50 vanishes */
    CHECK(vnorm(big, 1, 2, r) == 1e20f);     /* one element: |x| */
    CHECK(vnorm(x, 17, 2, r) == sqrtf(want)); /* 8 lanes, then the tail */
    CHECK(vnorm(tiny, 2, 1, r) == 2e-25f);
  }
}

int main(void) {
  nrt_test_seed(0xD1B54A32D192ED03ull);
  RUN_TEST(test_fast_vs_reference);
  RUN_TEST(test_dtypes);
  RUN_TEST(test_columns);
  RUN_TEST(test_prod_stepwise_layouts);
  RUN_TEST(test_prod_stepwise_values);
  RUN_TEST(test_cumprod_complex);
  RUN_TEST(test_softmax_16bit_rounding);
  RUN_TEST(test_softmax_16bit_cpu_split);
  RUN_TEST(test_extremes_nan_and_ties);
  RUN_TEST(test_sums_and_moments);
  RUN_TEST(test_empty);
  RUN_TEST(test_int_sum_exact);
  RUN_TEST(test_var_mean_welford);
  RUN_TEST(test_cascade_two_pass);
  RUN_TEST(test_cascade_complex);
  RUN_TEST(test_vector_norm_float);
  return TEST_RESULT();
}
