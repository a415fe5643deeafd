/* Convolution kernel tests: the im2col/GEMM and direct fast paths (on
 * every micro-kernel this host can run) against the reference loop nest,
 * for forward, input gradient and weight gradient, over shapes with
 * stride, padding, dilation, groups, depthwise, 1d/2d/3d, bias, permuted
 * (channels-last) layouts and the low-precision dtypes; plus exact known
 * results and descriptor validation. */
#include <stdint.h>
#include <string.h>
#include "testing.h"
#include "kernels/common/common.h"
#include "nrt/ops/conv.h"

typedef nrt_test_tensor5 tensor;

/* A random 5-d tensor (n, c, d, h, w). */
static void tensor_make(tensor *t, const int64_t shape[5], bool channels_last, nrt_dtype dt) {
  nrt_test_tensor5_make(t, shape, channels_last, dt);
  for (int64_t i = 0; i < t->numel; i++) nrt_test_put(t->data, dt, i, nrt_test_urand());
}

/* The same with gaps everywhere: the innermost dim (in memory order)
 * steps by 2 elements and every outer stride adds one, so no dim is
 * contiguous and pixels are never consecutive; numel counts the whole
 * span, gaps included. */
static void tensor_make_gapped(tensor *t, const int64_t shape[5], bool channels_last, nrt_dtype dt) {
  static const int contiguous[5] = {0, 1, 2, 3, 4}, last[5] = {0, 2, 3, 4, 1};
  const int *perm = channels_last ? last : contiguous;
  int64_t s = 2;
  for (int i = 4; i >= 0; i--) {
    t->shape[perm[i]] = shape[perm[i]];
    t->strides[perm[i]] = s;
    s = s * shape[perm[i]] + 1;
  }
  t->numel = s;
  t->dt = dt;
  t->data = calloc((size_t)t->numel + 1, nrt_dtype_size(dt));
  for (int64_t i = 0; i < t->numel; i++) nrt_test_put(t->data, dt, i, nrt_test_urand());
}

static void refill(tensor *t) {
  for (int64_t i = 0; i < t->numel; i++) nrt_test_put(t->data, t->dt, i, nrt_test_urand());
}

typedef struct ccase {
  int64_t n, g, cog, cig;
  int64_t i[3], k[3], s[3], p[3], d[3];
  bool bias, channels_last;
  nrt_dtype dt;
  int64_t o_less; /* outputs fewer than the input allows along w (transposed conv output_padding) */
  bool mixed;     /* y (and grad_y) in the other layout than x and w */
  bool gapped;    /* every operand strided with gaps (tensor_make_gapped) */
} ccase;


static double eps_of(nrt_dtype dt) {
  switch (dt) {
  case NRT_BFLOAT16: return 1.0 / 128;
  case NRT_FLOAT16: return 1.0 / 1024;
  default: return 0;
  }
}

/* Runs `l` with the reference, then the fast path on each ISA, comparing
 * output `out` (numel elements, dtype dt) within a tolerance for a sum of
 * `nred` products of values in [-1, 1]. */
static void compare_paths(nrt_launch *l, tensor *out, int64_t nred, const char *what) {
  size_t bytes = (size_t)out->numel * nrt_dtype_size(out->dt), es = nrt_dtype_size(out->dt);
  void *ref = malloc(bytes + 8);
  nrt_kernels_set_reference(true);
  memset(out->data, 0xff, bytes); /* gaps of a gapped output keep these bits on both paths */
  CHECK_OK(nrt_launch_run(l));
  nrt_kernels_set_reference(false);
  memcpy(ref, out->data, bytes);
  double tol = 2e-6 * (double)nred + 1e-5;
  for (int isa = NRT_ISA_BEST; isa >= NRT_ISA_BASELINE; isa--) {
    if ((int)nrt_kernels_isa() < isa && isa != NRT_ISA_BASELINE) continue;
    nrt_kernels_limit_isa((nrt_isa)isa);
    memset(out->data, 0xff, bytes); /* NaN garbage: must be overwritten */
    CHECK_OK(nrt_launch_run(l));
    int bad = 0;
    for (int64_t i = 0; i < out->numel && bad < 3; i++) {
      double want = nrt_test_get(ref, out->dt, i), got = nrt_test_get(out->data, out->dt, i);
      bool same_bits = !memcmp((char *)ref + i * es, (char *)out->data + i * es, es);
      if (!same_bits && !(fabs(got - want) <= tol + 2 * eps_of(out->dt) * fabs(want))) {
        fprintf(stderr, "%s isa%d [%lld]: got %g want %g\n", what, isa, (long long)i, got, want);
        bad++;
      }
    }
    CHECK(bad == 0);
  }
  nrt_kernels_limit_isa(NRT_ISA_BEST);
  free(ref);
}

static int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  int64_t span = in + 2 * p - d * (k - 1) - 1;
  return span < 0 ? 0 : span / s + 1;
}

static void run_case(const ccase *c) {
  int64_t o[3];
  for (int i = 0; i < 3; i++) o[i] = out_size(c->i[i], c->k[i], c->s[i], c->p[i], c->d[i]);
  o[2] -= c->o_less;
  int64_t xs[5] = {c->n, c->g * c->cig, c->i[0], c->i[1], c->i[2]};
  int64_t ys[5] = {c->n, c->g * c->cog, o[0], o[1], o[2]};
  int64_t ws[5] = {c->g * c->cog, c->cig, c->k[0], c->k[1], c->k[2]};
  int64_t bs[5] = {c->g * c->cog > c->g * c->cig ? c->g * c->cog : c->g * c->cig, 1, 1, 1, 1};
  tensor x, y, w, b;
  void (*make)(tensor *, const int64_t *, bool, nrt_dtype) = c->gapped ? tensor_make_gapped : tensor_make;
  make(&x, xs, c->channels_last, c->dt);
  make(&y, ys, c->channels_last != c->mixed, c->dt);
  make(&w, ws, c->channels_last, c->dt);
  make(&b, bs, false, c->dt);
  nrt_launch l;
  memset(&l, 0, sizeof l);
  l.ndim = 13;
  int64_t sizes[13] = {c->n, c->g, c->cog, c->cig, o[0], o[1], o[2], c->i[0], c->i[1], c->i[2],
                       c->k[0], c->k[1], c->k[2]};
  memcpy(l.sizes, sizes, sizeof sizes);
  for (int i = 0; i < 3; i++) {
    l.aux[i] = c->s[i];
    l.aux[3 + i] = c->p[i];
    l.aux[6 + i] = c->d[i];
  }
  l.noutputs = 1;
  l.compute_dtype = c->dt;
  int64_t kk = c->k[0] * c->k[1] * c->k[2];
  char what[160];
  snprintf(what, sizeof what, "conv n%lld g%lld %lld->%lld i%lldx%lldx%lld k%lldx%lldx%lld s%lld p%lld d%lld %s%s%s%s",
           (long long)c->n, (long long)c->g, (long long)c->cig, (long long)c->cog, (long long)c->i[0],
           (long long)c->i[1], (long long)c->i[2], (long long)c->k[0], (long long)c->k[1], (long long)c->k[2],
           (long long)c->s[2], (long long)c->p[2], (long long)c->d[2], nrt_dtype_name(c->dt),
           c->channels_last ? " cl" : "", c->mixed ? " mixed" : "", c->gapped ? " gapped" : "");

  /* forward: y = conv(x, w) + b */
  l.op = NRT_OP(CONV);
  l.ninputs = c->bias ? 3 : 2;
  nrt_test_tensor5_operand(&l.operands[0], &y);
  nrt_test_tensor5_operand(&l.operands[1], &x);
  nrt_test_tensor5_operand(&l.operands[2], &w);
  nrt_test_tensor5_operand(&l.operands[3], &b);
  char tag[200];
  snprintf(tag, sizeof tag, "%s fwd", what);
  compare_paths(&l, &y, c->cig * kk + 1, tag);

  /* input gradient: x <- conv^T(y, w) (+ b as the transposed conv's bias) */
  l.op = NRT_OP(CONV_BACKWARD_INPUT);
  refill(&y);
  nrt_test_tensor5_operand(&l.operands[0], &x);
  nrt_test_tensor5_operand(&l.operands[1], &y);
  snprintf(tag, sizeof tag, "%s bwd-input", what);
  compare_paths(&l, &x, c->cog * kk + 1, tag);

  /* weight gradient: w <- corr(y, x) */
  l.op = NRT_OP(CONV_BACKWARD_WEIGHT);
  l.ninputs = 2;
  refill(&x);
  refill(&y);
  nrt_test_tensor5_operand(&l.operands[0], &w);
  nrt_test_tensor5_operand(&l.operands[1], &y);
  nrt_test_tensor5_operand(&l.operands[2], &x);
  snprintf(tag, sizeof tag, "%s bwd-weight", what);
  compare_paths(&l, &w, c->n * o[0] * o[1] * o[2], tag);
  free(x.data);
  free(y.data);
  free(w.data);
  free(b.data);
}

#define C2(N, G, COG, CIG, H, W, KH, KW, S, P, D, BIAS) \
  {.n = N, .g = G, .cog = COG, .cig = CIG, .i = {1, H, W}, .k = {1, KH, KW}, .s = {1, S, S}, \
   .p = {0, P, P}, .d = {1, D, D}, .bias = BIAS, .dt = NRT_FLOAT32}

static void test_conv2d_shapes(void) {
  ccase cases[] = {
      C2(2, 1, 16, 8, 9, 11, 3, 3, 1, 1, 1, true),   /* 3x3 same */
      C2(1, 1, 33, 5, 13, 10, 3, 3, 2, 1, 1, false), /* stride 2, odd channel counts */
      C2(3, 1, 17, 4, 12, 12, 3, 3, 1, 2, 2, true),  /* dilation 2 */
      C2(2, 2, 16, 3, 8, 8, 3, 3, 1, 0, 1, true),    /* groups */
      C2(2, 4, 3, 2, 7, 9, 3, 1, 1, 1, 1, false),    /* groups, 3 out per group, 3x1 */
      C2(1, 1, 64, 3, 23, 23, 7, 7, 2, 3, 1, true),  /* ResNet stem shape, smaller */
      C2(4, 1, 40, 20, 7, 7, 1, 1, 1, 0, 1, false),  /* 1x1 on a small map */
      C2(2, 1, 20, 6, 16, 16, 4, 4, 4, 0, 1, true),  /* ViT patchify */
      C2(2, 6, 1, 1, 10, 12, 3, 3, 1, 1, 1, true),   /* depthwise: direct path */
      C2(1, 4, 2, 1, 9, 9, 5, 5, 2, 2, 1, false),    /* depthwise x2 multiplier */
      C2(2, 3, 1, 1, 7, 37, 3, 3, 1, 2, 2, true),    /* depthwise, dilated: rows of 16-column chunks and a tail */
      C2(1, 1, 2, 5, 6, 20, 3, 3, 1, 1, 1, true),    /* direct path over 5 input channels */
      C2(1, 1, 8, 2, 2, 3, 3, 3, 1, 2, 1, true),     /* more padding than input */
      C2(2, 1, 37, 45, 6, 5, 2, 3, 3, 0, 2, true),   /* uneven everything */
      C2(1, 1, 40, 600, 4, 4, 1, 1, 1, 0, 1, false), /* Kdim beyond one KC slice */
      C2(2, 1, 300, 4, 5, 6, 3, 3, 1, 1, 1, true),   /* Cog beyond one KC slice */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    run_case(&cases[i]);
    cases[i].channels_last = true;
    run_case(&cases[i]);
  }
}

static void test_conv_1d_3d(void) {
  /* Whisper-encoder-like conv1d (k3 s1 p1, then k3 s2 p1) as W-only convs */
  ccase a = {.n = 2, .g = 1, .cog = 24, .cig = 10, .i = {1, 1, 30}, .k = {1, 1, 3}, .s = {1, 1, 1},
             .p = {0, 0, 1}, .d = {1, 1, 1}, .bias = true, .dt = NRT_FLOAT32};
  run_case(&a);
  a.s[2] = 2;
  run_case(&a);
  ccase b = {.n = 2, .g = 1, .cog = 15, .cig = 3, .i = {5, 6, 7}, .k = {3, 2, 3}, .s = {1, 2, 1},
             .p = {1, 0, 1}, .d = {1, 1, 2}, .bias = true, .dt = NRT_FLOAT32};
  run_case(&b);
  b.g = 3;
  b.cog = 2;
  run_case(&b);
}

/* The float32 implicit GEMM (implicit.c) and its edges: 14-pixel tiles
 * across rows and images, taps partly and wholly in the padding, 32-channel
 * panels with tails, the input gradient as a transposed convolution
 * (stride 1, padding up to D (K - 1); beyond that the col2im path), each
 * in NCHW, channels-last, mixed layouts and gapped strides (rows never
 * consecutive: the scalar gathers and stores). */
static void test_conv_implicit(void) {
  ccase cases[] = {
      C2(3, 1, 40, 9, 5, 6, 3, 3, 1, 1, 1, true),    /* tiles span rows and images */
      C2(2, 1, 70, 33, 14, 28, 3, 3, 1, 1, 1, true), /* whole-row tiles, 3 panels with a tail */
      C2(2, 2, 5, 6, 9, 10, 3, 3, 1, 2, 2, false),   /* groups, dilation: taps wholly in the padding */
      C2(1, 1, 16, 20, 9, 7, 1, 1, 1, 1, 1, true),   /* 1x1, padding 1 > D (K - 1): col2im for grad */
      C2(2, 1, 12, 7, 11, 13, 5, 3, 1, 0, 1, false), /* no padding, uneven kernel */
      C2(1, 1, 9, 4, 15, 15, 3, 3, 2, 1, 1, true),   /* stride 2: rows 2 apart */
      C2(1, 1, 35, 3, 20, 19, 17, 16, 1, 8, 1, false), /* 272 taps: weights packed a channel at a time */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    for (int v = 0; v < 5; v++) {
      ccase c = cases[i];
      c.channels_last = v & 1;
      c.mixed = v >= 2 && v < 4;
      c.gapped = v == 4;
      run_case(&c);
    }
  /* the input gradient's transposed convolution with fewer outputs than
   * the input allows (output_padding 1, below the dilation) */
  ccase s = C2(2, 1, 6, 4, 7, 22, 3, 3, 1, 1, 2, true);
  s.o_less = 1;
  run_case(&s);
  s.channels_last = true;
  run_case(&s);
  /* 3-d, channels-last */
  ccase d3 = {.n = 2, .g = 1, .cog = 34, .cig = 5, .i = {4, 5, 6}, .k = {3, 3, 3}, .s = {1, 1, 1},
              .p = {1, 1, 1}, .d = {1, 1, 1}, .bias = true, .dt = NRT_FLOAT32, .channels_last = true};
  run_case(&d3);
}

/* A transposed convolution with output_padding >= stride (allowed while
 * below the dilation) has more input positions than its outputs use. */
static void test_conv_short_output(void) {
  ccase c = C2(2, 1, 6, 4, 7, 22, 5, 5, 2, 2, 4, true);
  c.o_less = 1;
  run_case(&c);
}

/* Integers: the loop nest in wrapping int64 (PyTorch's CPU convolves
 * integer tensors). x = [1 2 3 4], w = [1 0 -1], padding 1, as int64 and
 * as int8 with wrap-around. */
static void test_conv_integer(void) {
  int64_t x[4] = {1, 2, 3, 4}, w[3] = {1, 0, -1}, y[4], b[1] = {10};
  nrt_launch l;
  memset(&l, 0, sizeof l);
  l.op = NRT_OP(CONV);
  l.ndim = 13;
  int64_t sizes[13] = {1, 1, 1, 1, 1, 1, 4, 1, 1, 4, 1, 1, 3};
  memcpy(l.sizes, sizes, sizeof sizes);
  for (int i = 0; i < 3; i++) l.aux[i] = 1, l.aux[6 + i] = 1;
  l.aux[5] = 1;
  l.noutputs = 1;
  l.ninputs = 3;
  l.compute_dtype = NRT_INT64;
  int64_t *ptr[4] = {y, x, w, b};
  for (int i = 0; i < 4; i++) {
    l.operands[i].data = ptr[i];
    l.operands[i].dtype = NRT_INT64;
    l.operands[i].strides[0] = l.operands[i].strides[1] = 32;
    l.operands[i].strides[4] = 8;
  }
  l.operands[3].strides[0] = 8;
  CHECK_OK(nrt_launch_run(&l));
  CHECK(y[0] == 8 && y[1] == 8 && y[2] == 8 && y[3] == 13);
  int8_t x8[4] = {100, 100, 100, 100}, w8[3] = {1, 1, 1}, y8[4];
  int8_t *p8[3] = {y8, x8, w8};
  for (int i = 0; i < 3; i++) {
    l.operands[i].data = p8[i];
    l.operands[i].dtype = NRT_INT8;
    l.operands[i].strides[0] = l.operands[i].strides[1] = 4;
    l.operands[i].strides[4] = 1;
  }
  l.ninputs = 2;
  l.compute_dtype = NRT_INT8;
  CHECK_OK(nrt_launch_run(&l));
  CHECK(y8[0] == (int8_t)200 && y8[1] == (int8_t)300); /* wraps like int8 arithmetic */
}

static void test_conv_dtypes(void) {
  /* bfloat16 through the pair-packed kernel: Kdim 549 = a 512 slice and an
   * odd one; channels-last too */
  ccase bf = C2(2, 1, 20, 61, 6, 5, 3, 3, 1, 1, 1, true);
  bf.dt = NRT_BFLOAT16;
  run_case(&bf);
  bf.channels_last = true;
  run_case(&bf);
  /* full dy^T panels packed raw (even and odd pixel counts), Cog > KC pairs */
  ccase bf2 = C2(2, 1, 40, 8, 10, 10, 3, 3, 1, 1, 1, false);
  bf2.dt = NRT_BFLOAT16;
  run_case(&bf2);
  bf2.i[1] = bf2.i[2] = 9;
  run_case(&bf2);
  ccase bf3 = C2(1, 1, 600, 3, 4, 5, 3, 3, 1, 1, 1, true);
  bf3.dt = NRT_BFLOAT16;
  run_case(&bf3);
  nrt_dtype dts[] = {NRT_BFLOAT16, NRT_FLOAT16, NRT_FLOAT64};
  for (size_t i = 0; i < 3; i++) {
    ccase c = C2(2, 1, 18, 7, 9, 8, 3, 3, 1, 1, 1, true);
    c.dt = dts[i];
    run_case(&c);
    c.g = 7;
    c.cig = 1;
    c.cog = 1;
    run_case(&c);
  }
}

/* A larger case: many tiles and slices, images spanning tiles. */
static void test_conv_large(void) {
  ccase c = C2(3, 1, 70, 40, 30, 29, 3, 3, 1, 1, 1, true);
  run_case(&c);
}

/* Hand-computed 1-d results: x = [1 2 3 4], w = [1 0 -1], padding 1. */
static void test_conv_known(void) {
  float x[4] = {1, 2, 3, 4}, w[3] = {1, 0, -1}, y[4], b[1] = {0.5f};
  nrt_launch l;
  memset(&l, 0, sizeof l);
  l.op = NRT_OP(CONV);
  l.ndim = 13;
  int64_t sizes[13] = {1, 1, 1, 1, 1, 1, 4, 1, 1, 4, 1, 1, 3};
  memcpy(l.sizes, sizes, sizeof sizes);
  for (int i = 0; i < 3; i++) l.aux[i] = 1, l.aux[6 + i] = 1;
  l.aux[5] = 1;
  l.noutputs = 1;
  l.ninputs = 3;
  l.compute_dtype = NRT_FLOAT32;
  nrt_operand *o = l.operands;
  float *ptr[4] = {y, x, w, b};
  for (int i = 0; i < 4; i++) {
    o[i].data = ptr[i];
    o[i].dtype = NRT_FLOAT32;
    o[i].strides[0] = 16;
    o[i].strides[1] = 16;
    o[i].strides[4] = 4;
  }
  o[3].strides[0] = 4;
  for (int ref = 0; ref < 2; ref++) {
    nrt_kernels_set_reference(ref);
    CHECK_OK(nrt_launch_run(&l));
    float want[4] = {-1.5f, -1.5f, -1.5f, 3.5f};
    for (int i = 0; i < 4; i++) CHECK(y[i] == want[i]);
    /* input grad of dy = [1 0 0 0]: [0 -1 0 0]; with bias 0.5 added */
    float dy[4] = {1, 0, 0, 0}, dx[4];
    nrt_launch b2 = l;
    b2.op = NRT_OP(CONV_BACKWARD_INPUT);
    b2.operands[0].data = dx;
    b2.operands[1].data = dy;
    CHECK_OK(nrt_launch_run(&b2));
    float want_dx[4] = {0.5f, -0.5f, 0.5f, 0.5f};
    for (int i = 0; i < 4; i++) CHECK(dx[i] == want_dx[i]);
    /* weight grad of dy = [1 1 1 1]: [6 10 9] */
    float ones[4] = {1, 1, 1, 1}, dw[3];
    nrt_launch b3 = l;
    b3.op = NRT_OP(CONV_BACKWARD_WEIGHT);
    b3.ninputs = 2;
    b3.operands[0].data = dw;
    b3.operands[0].strides[0] = 12;
    b3.operands[1].data = ones;
    b3.operands[2] = l.operands[1];
    CHECK_OK(nrt_launch_run(&b3));
    CHECK(dw[0] == 6 && dw[1] == 10 && dw[2] == 9);
  }
  nrt_kernels_set_reference(false);
}

static void test_conv_validation(void) {
  float buf[16];
  nrt_launch l;
  memset(&l, 0, sizeof l);
  l.op = NRT_OP(CONV);
  l.ndim = 13;
  int64_t sizes[13] = {1, 1, 1, 1, 1, 1, 5, 1, 1, 4, 1, 1, 3}; /* output 5 is wrong: 2 */
  memcpy(l.sizes, sizes, sizeof sizes);
  for (int i = 0; i < 3; i++) l.aux[i] = 1, l.aux[6 + i] = 1;
  l.noutputs = 1;
  l.ninputs = 2;
  l.compute_dtype = NRT_FLOAT32;
  for (int i = 0; i < 3; i++) l.operands[i].data = buf, l.operands[i].dtype = NRT_FLOAT32;
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT);
  l.sizes[6] = 2;
  l.aux[2] = 0; /* stride 0 */
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT);
  l.aux[2] = 1;
  l.ninputs = 4;
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT);
  l.ninputs = 2;
  l.compute_dtype = NRT_BOOL;
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_UNSUPPORTED);
}

/* ---- non-finite values and the zero padding -------------------------------------
 * PyTorch's CPU convolutions (im2col, and every float64 one) multiply each
 * tap of a window by the padding's zero where the tap falls outside the
 * input, and NaN * 0 = inf * 0 = NaN: a NaN or inf weight makes NaN of every
 * output whose window has that tap in the padding, and a non-finite output
 * gradient makes NaN of every weight-gradient tap that reads padding there.
 * col2im (input gradient) drops what lands in the padding. The expected
 * values below are those loop nests in double, padding included. */

static int64_t at5(const tensor *t, int64_t a, int64_t b, int64_t c, int64_t d, int64_t e) {
  return a * t->strides[0] + b * t->strides[1] + c * t->strides[2] + d * t->strides[3] + e * t->strides[4];
}

/* Input element of image n, channel ch at output o through tap k, or 0 in the padding. */
static double padded_x(const ccase *c, const tensor *x, int64_t n, int64_t ch, const int64_t *o, const int64_t *k) {
  int64_t in[3];
  for (int i = 0; i < 3; i++) {
    in[i] = o[i] * c->s[i] - c->p[i] + k[i] * c->d[i];
    if (in[i] < 0 || in[i] >= c->i[i]) return 0.0;
  }
  return nrt_test_get(x->data, x->dt, at5(x, n, ch, in[0], in[1], in[2]));
}

#define FOR3_(v, ext)                          \
  for (v[0] = 0; v[0] < (ext)[0]; v[0]++)   \
    for (v[1] = 0; v[1] < (ext)[1]; v[1]++) \
      for (v[2] = 0; v[2] < (ext)[2]; v[2]++)

/* want[buffer offset of out]: forward y = b + sum w * padded x. */
static void want_forward(const ccase *c, const int64_t *O, const tensor *x, const tensor *w, const tensor *b,
                         const tensor *y, double *want) {
  int64_t o[3], k[3];
  for (int64_t n = 0; n < c->n; n++)
    for (int64_t co = 0; co < c->g * c->cog; co++) {
      int64_t grp = co / c->cog;
      FOR3_(o, O) {
        double acc = c->bias ? nrt_test_get(b->data, b->dt, at5(b, co, 0, 0, 0, 0)) : 0.0;
        for (int64_t ci = 0; ci < c->cig; ci++)
          FOR3_(k, c->k) {
            acc += nrt_test_get(w->data, w->dt, at5(w, co, ci, k[0], k[1], k[2])) *
                   padded_x(c, x, n, grp * c->cig + ci, o, k);
          }
        want[at5(y, n, co, o[0], o[1], o[2])] = acc;
      }
    }
}

/* Weight gradient: gw = sum over images and outputs of gy * padded x. */
static void want_backward_weight(const ccase *c, const int64_t *O, const tensor *gy, const tensor *x,
                                 const tensor *gw, double *want) {
  int64_t o[3], k[3];
  for (int64_t co = 0; co < c->g * c->cog; co++) {
    int64_t grp = co / c->cog;
    for (int64_t ci = 0; ci < c->cig; ci++)
      FOR3_(k, c->k) {
        double acc = 0.0;
        for (int64_t n = 0; n < c->n; n++)
          FOR3_(o, O) {
            acc += nrt_test_get(gy->data, gy->dt, at5(gy, n, co, o[0], o[1], o[2])) *
                   padded_x(c, x, n, grp * c->cig + ci, o, k);
          }
        want[at5(gw, co, ci, k[0], k[1], k[2])] = acc;
      }
  }
}

/* Input gradient, col2im: products landing in the padding are dropped. */
static void want_backward_input(const ccase *c, const int64_t *O, const tensor *gy, const tensor *w,
                                const tensor *b, const tensor *gx, double *want) {
  int64_t o[3], k[3], in[3];
  for (int64_t n = 0; n < c->n; n++)
    for (int64_t cx = 0; cx < c->g * c->cig; cx++)
      FOR3_(in, c->i) want[at5(gx, n, cx, in[0], in[1], in[2])] =
          c->bias ? nrt_test_get(b->data, b->dt, at5(b, cx, 0, 0, 0, 0)) : 0.0;
  for (int64_t n = 0; n < c->n; n++)
    for (int64_t co = 0; co < c->g * c->cog; co++) {
      int64_t grp = co / c->cog;
      FOR3_(o, O) {
        double dy = nrt_test_get(gy->data, gy->dt, at5(gy, n, co, o[0], o[1], o[2]));
        for (int64_t ci = 0; ci < c->cig; ci++)
          FOR3_(k, c->k) {
            bool inside = true;
            for (int i = 0; i < 3; i++) {
              in[i] = o[i] * c->s[i] - c->p[i] + k[i] * c->d[i];
              inside = inside && in[i] >= 0 && in[i] < c->i[i];
            }
            if (inside)
              want[at5(gx, n, grp * c->cig + ci, in[0], in[1], in[2])] +=
                  nrt_test_get(w->data, w->dt, at5(w, co, ci, k[0], k[1], k[2])) * dy;
          }
      }
    }
}

/* Runs l in the reference mode and on every ISA; out must match want: NaN
 * where want is NaN, the same infinity, else within the tolerance of a sum
 * of nred products of values in [-1, 1]. */
static void check_nonfinite(nrt_launch *l, tensor *out, const double *want, int64_t nred, const char *what) {
  size_t bytes = (size_t)out->numel * nrt_dtype_size(out->dt);
  double tol = 2e-6 * (double)nred + 1e-5;
  for (int mode = NRT_ISA_BEST + 1; mode >= NRT_ISA_BASELINE; mode--) {
    bool ref = mode == NRT_ISA_BEST + 1;
    if (!ref && (int)nrt_kernels_isa() < mode && mode != NRT_ISA_BASELINE) continue;
    nrt_kernels_set_reference(ref);
    if (!ref) nrt_kernels_limit_isa((nrt_isa)mode);
    memset(out->data, 0, bytes);
    CHECK_OK(nrt_launch_run(l));
    int bad = 0;
    for (int64_t i = 0; i < out->numel && bad < 3; i++) {
      double wv = want[i], got = nrt_test_get(out->data, out->dt, i);
      bool ok = isnan(wv) ? isnan(got) : isinf(wv) ? got == wv
                                                   : fabs(got - wv) <= tol + 2 * eps_of(out->dt) * fabs(wv);
      if (!ok) {
        fprintf(stderr, "%s %s [%lld]: got %g want %g\n", what, ref ? "reference" : "fast", (long long)i, got, wv);
        bad++;
      }
    }
    CHECK(bad == 0);
  }
  nrt_kernels_set_reference(false);
  nrt_kernels_limit_isa(NRT_ISA_BEST);
}

static void run_nonfinite_case(const ccase *c) {
  int64_t O[3];
  for (int i = 0; i < 3; i++) O[i] = out_size(c->i[i], c->k[i], c->s[i], c->p[i], c->d[i]);
  int64_t xs[5] = {c->n, c->g * c->cig, c->i[0], c->i[1], c->i[2]};
  int64_t ys[5] = {c->n, c->g * c->cog, O[0], O[1], O[2]};
  int64_t ws[5] = {c->g * c->cog, c->cig, c->k[0], c->k[1], c->k[2]};
  int64_t bs[5] = {c->g * c->cog > c->g * c->cig ? c->g * c->cog : c->g * c->cig, 1, 1, 1, 1};
  tensor x, y, w, b;
  tensor_make(&x, xs, c->channels_last, c->dt);
  tensor_make(&y, ys, c->channels_last, c->dt);
  tensor_make(&w, ws, c->channels_last, c->dt);
  tensor_make(&b, bs, false, c->dt);
  int64_t maxn = x.numel > y.numel ? x.numel : y.numel;
  double *want = malloc(sizeof(double) * (size_t)(maxn > w.numel ? maxn : w.numel));
  nrt_launch l;
  memset(&l, 0, sizeof l);
  l.ndim = 13;
  int64_t sizes[13] = {c->n, c->g, c->cog, c->cig, O[0], O[1], O[2], c->i[0], c->i[1], c->i[2],
                       c->k[0], c->k[1], c->k[2]};
  memcpy(l.sizes, sizes, sizeof sizes);
  for (int i = 0; i < 3; i++) {
    l.aux[i] = c->s[i];
    l.aux[3 + i] = c->p[i];
    l.aux[6 + i] = c->d[i];
  }
  l.noutputs = 1;
  l.compute_dtype = c->dt;
  int64_t kk = c->k[0] * c->k[1] * c->k[2], last_w = at5(&w, ws[0] - 1, ws[1] - 1, ws[2] - 1, ws[3] - 1, ws[4] - 1);
  char what[160];
  snprintf(what, sizeof what, "nonfinite n%lld g%lld %lld->%lld i%lldx%lldx%lld k%lld p%lld %s%s", (long long)c->n,
           (long long)c->g, (long long)c->cig, (long long)c->cog, (long long)c->i[0], (long long)c->i[1],
           (long long)c->i[2], (long long)c->k[2], (long long)c->p[2], nrt_dtype_name(c->dt),
           c->channels_last ? " cl" : "");
  char tag[200];

  /* forward: a NaN first tap of channel 0, +inf last tap of the last channel */
  nrt_test_put(w.data, w.dt, 0, NAN);
  nrt_test_put(w.data, w.dt, last_w, INFINITY);
  l.op = NRT_OP(CONV);
  l.ninputs = c->bias ? 3 : 2;
  nrt_test_tensor5_operand(&l.operands[0], &y);
  nrt_test_tensor5_operand(&l.operands[1], &x);
  nrt_test_tensor5_operand(&l.operands[2], &w);
  nrt_test_tensor5_operand(&l.operands[3], &b);
  want_forward(c, O, &x, &w, &b, &y, want);
  snprintf(tag, sizeof tag, "%s fwd", what);
  check_nonfinite(&l, &y, want, c->cig * kk + 1, tag);

  /* input gradient (a transposed convolution's forward) of the same weights */
  l.op = NRT_OP(CONV_BACKWARD_INPUT);
  refill(&y);
  nrt_test_tensor5_operand(&l.operands[0], &x);
  nrt_test_tensor5_operand(&l.operands[1], &y);
  want_backward_input(c, O, &y, &w, &b, &x, want);
  snprintf(tag, sizeof tag, "%s bwd-input", what);
  check_nonfinite(&l, &x, want, c->cog * kk + 1, tag);

  /* weight gradient: +inf at the first output gradient, NaN at the last */
  l.op = NRT_OP(CONV_BACKWARD_WEIGHT);
  l.ninputs = 2;
  refill(&x);
  refill(&y);
  nrt_test_put(y.data, y.dt, 0, INFINITY);
  nrt_test_put(y.data, y.dt, at5(&y, ys[0] - 1, ys[1] - 1, ys[2] - 1, ys[3] - 1, ys[4] - 1), NAN);
  nrt_test_tensor5_operand(&l.operands[0], &w);
  nrt_test_tensor5_operand(&l.operands[1], &y);
  nrt_test_tensor5_operand(&l.operands[2], &x);
  want_backward_weight(c, O, &y, &x, &w, want);
  snprintf(tag, sizeof tag, "%s bwd-weight", what);
  check_nonfinite(&l, &w, want, c->n * O[0] * O[1] * O[2], tag);
  free(want);
  free(x.data);
  free(y.data);
  free(w.data);
  free(b.data);
}

static void test_conv_nonfinite_padding(void) {
  ccase cases[] = {
      C2(1, 1, 1, 1, 2, 2, 1, 1, 1, 1, 1, false),  /* the 1x1 with padding 1: all NaN */
      C2(2, 1, 8, 3, 5, 6, 3, 3, 1, 1, 1, true),   /* GEMM paths */
      C2(2, 2, 2, 3, 5, 5, 3, 3, 2, 2, 1, true),   /* direct path, groups, stride 2 */
      C2(2, 3, 1, 1, 6, 4, 3, 3, 1, 1, 1, false),  /* depthwise */
      C2(1, 1, 5, 2, 4, 4, 3, 3, 1, 1, 2, false),  /* dilation */
      C2(1, 1, 8, 2, 2, 3, 3, 3, 1, 2, 1, true),   /* more padding than input */
      C2(2, 1, 6, 4, 5, 5, 3, 3, 1, 0, 1, true),   /* no padding: nothing beyond the in-bounds products */
      C2(2, 1, 32, 3, 5, 6, 3, 3, 1, 1, 1, false), /* weight grad reading channels-last dy in place */
  };
  nrt_dtype dts[] = {NRT_FLOAT32, NRT_BFLOAT16, NRT_FLOAT16, NRT_FLOAT64};
  for (size_t d = 0; d < 4; d++)
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
      ccase c = cases[i];
      c.dt = dts[d];
      run_nonfinite_case(&c);
      c.channels_last = true;
      run_nonfinite_case(&c);
    }
  /* 1-d and 3-d */
  ccase a = {.n = 2, .g = 1, .cog = 4, .cig = 3, .i = {1, 1, 7}, .k = {1, 1, 3}, .s = {1, 1, 2},
             .p = {0, 0, 1}, .d = {1, 1, 1}, .bias = true, .dt = NRT_FLOAT32};
  run_nonfinite_case(&a);
  a.cog = 1;
  run_nonfinite_case(&a);
  ccase b = {.n = 1, .g = 1, .cog = 5, .cig = 2, .i = {3, 4, 3}, .k = {2, 3, 2}, .s = {1, 1, 1},
             .p = {1, 1, 0}, .d = {1, 1, 2}, .bias = false, .dt = NRT_FLOAT32};
  run_nonfinite_case(&b);
  b.cog = 2;
  run_nonfinite_case(&b);
}

int main(void) {
  nrt_test_seed(0x2545F4914F6CDD1Dull);
  RUN_TEST(test_conv_known);
  RUN_TEST(test_conv_validation);
  RUN_TEST(test_conv2d_shapes);
  RUN_TEST(test_conv_1d_3d);
  RUN_TEST(test_conv_implicit);
  RUN_TEST(test_conv_dtypes);
  RUN_TEST(test_conv_short_output);
  RUN_TEST(test_conv_integer);
  RUN_TEST(test_conv_large);
  RUN_TEST(test_conv_nonfinite_padding);
  return TEST_RESULT();
}
