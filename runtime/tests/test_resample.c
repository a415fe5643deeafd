/* RESAMPLE family tests: interpolation (known values, fast path against the
 * reference path, backward as the exact adjoint of forward; uint8 in the
 * fixed-point modes bit for bit), max unpooling
 * and im2col / col2im (known values, adjointness, errors), in float32,
 * bfloat16 and permuted (channels-last) layouts. */
#include <stdint.h>
#include <string.h>
#include "testing.h"
#include "kernels/common/common.h"
#include "nrt/ops/resample.h"

/* A 5-d activation [N, C, D, H, W], contiguous or channels-last; element i
 * of the logical row-major order lives at act_off(t, i). */
typedef nrt_test_tensor5 act;

static int64_t act_off(const act *t, int64_t i) {
  int64_t off = 0;
  for (int k = 4; k >= 0; k--) {
    off += (i % t->shape[k]) * t->strides[k];
    i /= t->shape[k];
  }
  return off;
}
static void act_fill(act *t) {
  for (int64_t i = 0; i < t->numel; i++) nrt_test_put(t->data, t->dt, act_off(t, i), nrt_test_urand());
}
static double act_get(const act *t, int64_t i) { return nrt_test_get(t->data, t->dt, act_off(t, i)); }

static nrt_launch interp_launch(nrt_op op, const act *out, const act *in, int mode, bool align, const double sc[3]) {
  nrt_launch l;
  memset(&l, 0, sizeof l);
  l.op = op;
  l.ndim = 8;
  const act *o_side = op == NRT_OP(INTERP) ? out : in, *i_side = op == NRT_OP(INTERP) ? in : out;
  l.sizes[0] = o_side->shape[0];
  l.sizes[1] = o_side->shape[1];
  for (int j = 0; j < 3; j++) {
    l.sizes[2 + j] = o_side->shape[2 + j];
    l.sizes[5 + j] = i_side->shape[2 + j];
    l.scalars[j].f = sc ? sc[j] : 0.0;
  }
  l.noutputs = 1;
  l.ninputs = 1;
  nrt_test_tensor5_operand(&l.operands[0], out);
  nrt_test_tensor5_operand(&l.operands[1], in);
  l.compute_dtype = in->dt;
  l.params[0] = mode;
  l.params[1] = align;
  return l;
}

/* ---- interpolation: known values -------------------------------------------- */

static void interp_1d(int mode, bool align, double scale, const double *x, int64_t in, double *y, int64_t out) {
  int64_t is[5] = {1, 1, 1, 1, in}, os[5] = {1, 1, 1, 1, out};
  act a, b;
  nrt_test_tensor5_make(&a, is, false, NRT_FLOAT32);
  nrt_test_tensor5_make(&b, os, false, NRT_FLOAT32);
  for (int64_t i = 0; i < in; i++) nrt_test_put(a.data, a.dt, i, x[i]);
  double sc[3] = {0, 0, scale};
  nrt_launch l = interp_launch(NRT_OP(INTERP), &b, &a, mode, align, sc);
  CHECK_OK(nrt_launch_run(&l));
  for (int64_t i = 0; i < out; i++) y[i] = nrt_test_get(b.data, b.dt, i);
  free(a.data);
  free(b.data);
}

static void test_interp_known(void) {
  double x[4] = {1, 2, 4, 8}, y[8];
  /* linear, half-pixel: 2 -> 4 gives a, .75a + .25b, .25a + .75b, b */
  interp_1d(NRT_INTERP_LINEAR, false, 0, x, 2, y, 4);
  CHECK_NEAR(y[0], 1, 1e-6);
  CHECK_NEAR(y[1], 1.25, 1e-6);
  CHECK_NEAR(y[2], 1.75, 1e-6);
  CHECK_NEAR(y[3], 2, 1e-6);
  /* align_corners 4 -> 7: the input points sit at even outputs */
  interp_1d(NRT_INTERP_LINEAR, true, 0, x, 4, y, 7);
  double want_ac[7] = {1, 1.5, 2, 3, 4, 6, 8};
  for (int i = 0; i < 7; i++) CHECK_NEAR(y[i], want_ac[i], 1e-6);
  /* nearest 4 -> 3: floor(o * 4/3) */
  interp_1d(NRT_INTERP_NEAREST, false, 0, x, 4, y, 3);
  CHECK(y[0] == 1 && y[1] == 2 && y[2] == 4);
  /* nearest-exact 4 -> 3: floor((o + .5) * 4/3) = 0, 2, 3 */
  interp_1d(NRT_INTERP_NEAREST_EXACT, false, 0, x, 4, y, 3);
  CHECK(y[0] == 1 && y[1] == 4 && y[2] == 8);
  /* an explicit scale overrides in/out: nearest 4 -> 3 with scale 1 copies */
  interp_1d(NRT_INTERP_NEAREST, false, 1.0, x, 4, y, 3);
  CHECK(y[0] == 1 && y[1] == 2 && y[2] == 4);
  /* cubic at equal sizes is the identity; cubic reproduces linear data */
  interp_1d(NRT_INTERP_CUBIC, false, 0, x, 4, y, 4);
  for (int i = 0; i < 4; i++) CHECK_NEAR(y[i], x[i], 1e-6);
  double lin[4] = {0, 1, 2, 3};
  interp_1d(NRT_INTERP_CUBIC, true, 0, lin, 4, y, 7);
  for (int i = 2; i < 5; i++) CHECK_NEAR(y[i], i * 0.5, 1e-5); /* edges replicate, so interior only */
  /* antialiased modes keep a constant signal constant (normalised weights) */
  double ones[8] = {3, 3, 3, 3, 3, 3, 3, 3};
  for (int mode = NRT_INTERP_AA_LINEAR; mode <= NRT_INTERP_AA_CUBIC; mode++) {
    interp_1d(mode, false, 0, ones, 8, y, 3);
    for (int i = 0; i < 3; i++) CHECK_NEAR(y[i], 3, 1e-6);
    interp_1d(mode, false, 0, ones, 3, y, 8);
    for (int i = 0; i < 8; i++) CHECK_NEAR(y[i], 3, 1e-6);
  }
  /* aa-linear 4 -> 2: scale 2, support 2, output 0 centred at 1 reads
   * inputs [0, 3) with triangle weights .75, .75, .25 (tap centres at
   * distance .5, .5, 1.5 over a half-width of 2), renormalised */
  interp_1d(NRT_INTERP_AA_LINEAR, false, 0, x, 4, y, 2);
  CHECK_NEAR(y[0], (1 * 0.75 + 2 * 0.75 + 4 * 0.25) / 1.75, 1e-6);
}

/* ---- interpolation: fast vs reference, and the adjoint identity --------------- */

typedef struct icase {
  int64_t n, c, i[3], o[3];
  int mode;
  bool align, cl;
  nrt_dtype dt;
  double sc[3];
} icase;

static void run_interp(const icase *c) {
  int64_t is[5] = {c->n, c->c, c->i[0], c->i[1], c->i[2]}, os[5] = {c->n, c->c, c->o[0], c->o[1], c->o[2]};
  act x, y, yr, g, gx, gxr;
  nrt_test_tensor5_make(&x, is, c->cl, c->dt);
  nrt_test_tensor5_make(&y, os, c->cl, c->dt);
  nrt_test_tensor5_make(&yr, os, c->cl, c->dt);
  nrt_test_tensor5_make(&g, os, !c->cl, c->dt);
  nrt_test_tensor5_make(&gx, is, c->cl, c->dt);
  nrt_test_tensor5_make(&gxr, is, c->cl, c->dt);
  act_fill(&x);
  act_fill(&g);
  memset(gx.data, 0xff, (size_t)gx.numel * nrt_dtype_size(c->dt)); /* must be fully written */
  nrt_launch f = interp_launch(NRT_OP(INTERP), &y, &x, c->mode, c->align, c->sc);
  nrt_launch fr = interp_launch(NRT_OP(INTERP), &yr, &x, c->mode, c->align, c->sc);
  nrt_launch b = interp_launch(NRT_OP(INTERP_BACKWARD), &gx, &g, c->mode, c->align, c->sc);
  nrt_launch br = interp_launch(NRT_OP(INTERP_BACKWARD), &gxr, &g, c->mode, c->align, c->sc);
  CHECK_OK(nrt_launch_run(&f));
  CHECK_OK(nrt_launch_run(&b));
  nrt_kernels_set_reference(true);
  CHECK_OK(nrt_launch_run(&fr));
  CHECK_OK(nrt_launch_run(&br));
  nrt_kernels_set_reference(false);
  double tol = c->dt == NRT_BFLOAT16 ? 1.0 / 64 : 1e-5;
  int bad = 0;
  for (int64_t i = 0; i < y.numel && bad < 3; i++) {
    double a = act_get(&y, i), r = act_get(&yr, i);
    if (!(fabs(a - r) <= tol * (1 + fabs(r)))) {
      fprintf(stderr, "mode %d fwd [%lld]: fast %g ref %g\n", c->mode, (long long)i, a, r);
      bad++;
    }
  }
  for (int64_t i = 0; i < gx.numel && bad < 3; i++) {
    double a = act_get(&gx, i), r = act_get(&gxr, i);
    if (!(fabs(a - r) <= 4 * tol * (1 + fabs(r)))) {
      fprintf(stderr, "mode %d bwd [%lld]: fast %g ref %g\n", c->mode, (long long)i, a, r);
      bad++;
    }
  }
  CHECK(bad == 0);
  /* <interp(x), g> == <x, interp_backward(g)> (reference outputs, double sums) */
  if (c->dt != NRT_BFLOAT16) {
    double lhs = 0, rhs = 0, mag = 0;
    for (int64_t i = 0; i < y.numel; i++) lhs += act_get(&yr, i) * act_get(&g, i), mag += fabs(act_get(&g, i));
    for (int64_t i = 0; i < x.numel; i++) rhs += act_get(&x, i) * act_get(&gxr, i);
    if (!(fabs(lhs - rhs) <= 1e-5 * (1 + mag))) {
      fprintf(stderr, "mode %d adjoint: %g vs %g\n", c->mode, lhs, rhs);
      CHECK(0);
    }
  }
  free(x.data);
  free(y.data);
  free(yr.data);
  free(g.data);
  free(gx.data);
  free(gxr.data);
}

static void test_interp_modes(void) {
  int64_t shapes[][6] = {
      {1, 1, 7, 1, 1, 13}, {1, 1, 13, 1, 1, 7}, {1, 5, 6, 1, 9, 4}, {1, 4, 4, 1, 8, 8},
      {3, 4, 5, 6, 2, 9},  {1, 1, 1, 1, 1, 5},  {1, 6, 1, 1, 3, 1}, {1, 16, 3, 1, 5, 2},
  };
  for (int mode = 0; mode <= NRT_INTERP_AA_CUBIC; mode++)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
      for (int align = 0; align < 2; align++) {
        if ((mode == NRT_INTERP_NEAREST || mode == NRT_INTERP_NEAREST_EXACT) && align) continue;
        icase c = {.n = 2, .c = 3, .mode = mode, .align = align, .cl = (s & 1) != 0, .dt = NRT_FLOAT32};
        for (int j = 0; j < 3; j++) c.i[j] = shapes[s][j], c.o[j] = shapes[s][3 + j];
        run_interp(&c);
      }
  /* explicit scales (recompute_scale_factor=False style), bf16 and float64 */
  icase c = {.n = 1, .c = 2, .i = {3, 4, 5}, .o = {7, 9, 11}, .mode = NRT_INTERP_LINEAR, .dt = NRT_FLOAT32,
             .sc = {2.5, 2.3, 2.2}};
  run_interp(&c);
  c.mode = NRT_INTERP_NEAREST;
  run_interp(&c);
  c.mode = NRT_INTERP_NEAREST_EXACT;
  run_interp(&c);
  c.mode = NRT_INTERP_CUBIC;
  c.i[0] = c.o[0] = 1;
  c.dt = NRT_BFLOAT16;
  run_interp(&c);
  c.dt = NRT_FLOAT64;
  run_interp(&c);
}

static void test_interp_integer_nearest(void) {
  int64_t is[5] = {1, 2, 1, 3, 3}, os[5] = {1, 2, 1, 5, 4};
  act x, y;
  nrt_test_tensor5_make(&x, is, false, NRT_UINT8);
  nrt_test_tensor5_make(&y, os, true, NRT_UINT8);
  for (int64_t i = 0; i < x.numel; i++) nrt_test_put(x.data, x.dt, i, (double)(200 + i));
  nrt_launch l = interp_launch(NRT_OP(INTERP), &y, &x, NRT_INTERP_NEAREST, false, NULL);
  CHECK_OK(nrt_launch_run(&l));
  for (int64_t c = 0; c < 2; c++)
    for (int64_t h = 0; h < 5; h++)
      for (int64_t w = 0; w < 4; w++) {
        int64_t ih = (int64_t)floorf((float)h * (3.0f / 5.0f)), iw = (int64_t)floorf((float)w * 0.75f);
        CHECK(act_get(&y, (c * 5 + h) * 4 + w) == 200 + c * 9 + ih * 3 + iw);
      }
  /* linear on other integers is not a kernel */
  l.params[0] = NRT_INTERP_LINEAR;
  l.operands[0].dtype = l.operands[1].dtype = NRT_INT8;
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_UNSUPPORTED);
  free(x.data);
  free(y.data);
}

/* ---- uint8 bilinear / bicubic: the CPU's fixed-point separable passes ---------- */

static void interp_u8_row(int mode, const uint8_t *x, int64_t in, uint8_t *y, int64_t out) {
  int64_t is[5] = {1, 1, 1, 1, in}, os[5] = {1, 1, 1, 1, out};
  act a, b;
  nrt_test_tensor5_make(&a, is, false, NRT_UINT8);
  nrt_test_tensor5_make(&b, os, false, NRT_UINT8);
  memcpy(a.data, x, (size_t)in);
  nrt_launch l = interp_launch(NRT_OP(INTERP), &b, &a, mode, false, NULL);
  CHECK_OK(nrt_launch_run(&l));
  memcpy(y, b.data, (size_t)out);
  free(a.data);
  free(b.data);
}

static void test_interp_uint8_known(void) {
  /* 2 -> 4, half-pixel: weights (1, 0), (.75, .25), (.25, .75), (1) in
   * 14 fraction bits; 255 * .25 = 63.75 and 255 * .75 = 191.25 round to 64
   * and 191 through (8192 + sum) >> 14 */
  uint8_t x[2] = {0, 255}, y[4];
  interp_u8_row(NRT_INTERP_LINEAR, x, 2, y, 4);
  CHECK(y[0] == 0 && y[1] == 64 && y[2] == 191 && y[3] == 255);
  /* [0, 1]: .25 rounds to 0 and .75 to 1 */
  x[1] = 1;
  interp_u8_row(NRT_INTERP_LINEAR, x, 2, y, 4);
  CHECK(y[0] == 0 && y[1] == 0 && y[2] == 1 && y[3] == 1);
  /* cubic overshoot clamps: a step 0 -> 255 rings below 0 and above 255 */
  uint8_t step[4] = {0, 0, 255, 255}, z[8];
  interp_u8_row(NRT_INTERP_CUBIC, step, 4, z, 8);
  CHECK(z[0] == 0 && z[1] == 0 && z[7] == 255 && z[6] == 255);
  CHECK(z[3] > 0 && z[3] < 128 && z[4] > 128 && z[4] < 255);
  /* antialiased: a constant stays constant (the weights sum to 2^prec) */
  uint8_t flat[9] = {77, 77, 77, 77, 77, 77, 77, 77, 77};
  for (int mode = NRT_INTERP_AA_LINEAR; mode <= NRT_INTERP_AA_CUBIC; mode++) {
    interp_u8_row(mode, flat, 9, z, 4);
    for (int i = 0; i < 4; i++) CHECK(z[i] == 77);
  }
}

/* Fast (two passes through a plane buffer) against reference (each element
 * on its own): both are integer-exact, so they must agree bit for bit. */
static void run_interp_u8(const int64_t is[5], const int64_t os[5], int mode, bool align, bool cl, const double sc[3]) {
  act x, y, yr;
  nrt_test_tensor5_make(&x, is, cl, NRT_UINT8);
  nrt_test_tensor5_make(&y, os, !cl, NRT_UINT8);
  nrt_test_tensor5_make(&yr, os, cl, NRT_UINT8);
  for (int64_t i = 0; i < x.numel; i++) ((uint8_t *)x.data)[i] = (uint8_t)nrt_test_rand_range(0, 255);
  nrt_launch f = interp_launch(NRT_OP(INTERP), &y, &x, mode, align, sc);
  nrt_launch fr = interp_launch(NRT_OP(INTERP), &yr, &x, mode, align, sc);
  CHECK_OK(nrt_launch_run(&f));
  nrt_kernels_set_reference(true);
  CHECK_OK(nrt_launch_run(&fr));
  nrt_kernels_set_reference(false);
  int bad = 0;
  for (int64_t i = 0; i < y.numel && bad < 3; i++)
    if (act_get(&y, i) != act_get(&yr, i)) {
      fprintf(stderr, "uint8 mode %d [%lld]: fast %g ref %g\n", mode, (long long)i, act_get(&y, i), act_get(&yr, i));
      bad++;
    }
  CHECK(bad == 0);
  free(x.data);
  free(y.data);
  free(yr.data);
}

static void test_interp_uint8(void) {
  int64_t shapes[][4] = {{5, 7, 9, 4}, {9, 4, 5, 7}, {1, 6, 3, 1}, {8, 1, 8, 5},
                         {4, 4, 4, 9}, {31, 17, 3, 2}, {2, 2, 2, 2}, {3, 5, 11, 5}};
  for (int mode = NRT_INTERP_LINEAR; mode <= NRT_INTERP_AA_CUBIC; mode++)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
      for (int align = 0; align < 2; align++) {
        int64_t is[5] = {2, 3, 2, shapes[s][0], shapes[s][1]}, os[5] = {2, 3, 2, shapes[s][2], shapes[s][3]};
        run_interp_u8(is, os, mode, align, (s & 1) != 0, NULL);
      }
  int64_t is[5] = {1, 2, 1, 6, 5}, os[5] = {1, 2, 1, 9, 7};
  double sc[3] = {0, 1.6, 1.5}; /* explicit scales */
  run_interp_u8(is, os, NRT_INTERP_CUBIC, false, false, sc);
  run_interp_u8(is, os, NRT_INTERP_AA_LINEAR, false, true, sc);
  /* the depth is a batch dim here: resampling it is not a uint8 kernel */
  act x, y;
  int64_t ds[5] = {1, 1, 2, 3, 3}, dd[5] = {1, 1, 3, 3, 3};
  nrt_test_tensor5_make(&x, ds, false, NRT_UINT8);
  nrt_test_tensor5_make(&y, dd, false, NRT_UINT8);
  nrt_launch l = interp_launch(NRT_OP(INTERP), &y, &x, NRT_INTERP_LINEAR, false, NULL);
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_UNSUPPORTED);
  free(x.data);
  free(y.data);
}

/* ---- max unpooling ------------------------------------------------------------ */

static void test_max_unpool(void) {
  int64_t is[5] = {2, 3, 1, 2, 2}, os[5] = {2, 3, 1, 4, 5};
  act x, ix, y;
  nrt_test_tensor5_make(&x, is, false, NRT_FLOAT32);
  nrt_test_tensor5_make(&ix, is, true, NRT_INT64);
  nrt_test_tensor5_make(&y, os, true, NRT_FLOAT32);
  act_fill(&x);
  int64_t idx[4] = {0, 7, 7, 19}; /* 7 twice: the later element wins */
  for (int64_t i = 0; i < ix.numel; i++) nrt_test_put(ix.data, NRT_INT64, act_off(&ix, i), (double)idx[i % 4]);
  memset(y.data, 0xff, (size_t)y.numel * 4);
  nrt_launch l;
  memset(&l, 0, sizeof l);
  l.op = NRT_OP(MAX_UNPOOL);
  l.ndim = 8;
  int64_t sizes[8] = {2, 3, 1, 4, 5, 1, 2, 2};
  memcpy(l.sizes, sizes, sizeof sizes);
  l.noutputs = 1;
  l.ninputs = 2;
  nrt_test_tensor5_operand(&l.operands[0], &y);
  nrt_test_tensor5_operand(&l.operands[1], &x);
  nrt_test_tensor5_operand(&l.operands[2], &ix);
  l.compute_dtype = NRT_FLOAT32;
  CHECK_OK(nrt_launch_run(&l));
  for (int64_t p = 0; p < 6; p++)
    for (int64_t k = 0; k < 20; k++) {
      double want = k == 0 ? act_get(&x, p * 4) : k == 7 ? act_get(&x, p * 4 + 2) : k == 19 ? act_get(&x, p * 4 + 3) : 0;
      CHECK(act_get(&y, p * 20 + k) == want);
    }
  nrt_test_put(ix.data, NRT_INT64, act_off(&ix, 9), 20.0); /* out of range */
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(nrt_last_error_message(), "Found an invalid max index: 20") != NULL);
  free(x.data);
  free(ix.data);
  free(y.data);
}

/* ---- im2col / col2im ---------------------------------------------------------- */

typedef struct fcase {
  int64_t n, c, ih, iw, kh, kw, dh, dw, ph, pw, sh, sw;
} fcase;

static nrt_launch fold_launch(nrt_op op, const fcase *f, int64_t oh, int64_t ow, void *col, void *im, nrt_dtype dt) {
  nrt_launch l;
  memset(&l, 0, sizeof l);
  l.op = op;
  l.ndim = 8;
  int64_t sizes[8] = {f->n, f->c, oh, ow, f->ih, f->iw, f->kh, f->kw};
  memcpy(l.sizes, sizes, sizeof sizes);
  int64_t aux[6] = {f->dh, f->dw, f->ph, f->pw, f->sh, f->sw};
  memcpy(l.aux, aux, sizeof aux);
  int64_t es = (int64_t)nrt_dtype_size(dt), L = oh * ow, K = f->c * f->kh * f->kw;
  nrt_operand oc = {.data = col, .dtype = dt}, oi = {.data = im, .dtype = dt};
  int64_t cs[6] = {K * L * es, f->kh * f->kw * L * es, f->kw * L * es, L * es, ow * es, es};
  int64_t is[4] = {f->c * f->ih * f->iw * es, f->ih * f->iw * es, f->iw * es, es};
  memcpy(oc.strides, cs, sizeof cs);
  memcpy(oi.strides, is, sizeof is);
  l.operands[0] = op == NRT_OP(IM2COL) ? oc : oi;
  l.operands[1] = op == NRT_OP(IM2COL) ? oi : oc;
  l.noutputs = l.ninputs = 1;
  l.compute_dtype = dt;
  return l;
}

static void run_fold(const fcase *f, nrt_dtype dt) {
  int64_t oh = (f->ih + 2 * f->ph - (f->dh * (f->kh - 1) + 1)) / f->sh + 1;
  int64_t ow = (f->iw + 2 * f->pw - (f->dw * (f->kw - 1) + 1)) / f->sw + 1;
  int64_t nim = f->n * f->c * f->ih * f->iw, ncol = f->n * f->c * f->kh * f->kw * oh * ow;
  size_t es = nrt_dtype_size(dt);
  void *im = calloc((size_t)nim + 1, es), *col = calloc((size_t)ncol + 1, es), *g = calloc((size_t)ncol + 1, es);
  void *gim = calloc((size_t)nim + 1, es), *gimr = calloc((size_t)nim + 1, es);
  for (int64_t i = 0; i < nim; i++) nrt_test_put(im, dt, i, dt == NRT_INT64 ? (double)(i % 7) : nrt_test_urand());
  for (int64_t i = 0; i < ncol; i++) nrt_test_put(g, dt, i, dt == NRT_INT64 ? (double)(i % 5) : nrt_test_urand());
  nrt_launch a = fold_launch(NRT_OP(IM2COL), f, oh, ow, col, im, dt);
  nrt_launch b = fold_launch(NRT_OP(COL2IM), f, oh, ow, g, gim, dt);
  nrt_launch br = fold_launch(NRT_OP(COL2IM), f, oh, ow, g, gimr, dt);
  CHECK_OK(nrt_launch_run(&a));
  CHECK_OK(nrt_launch_run(&b));
  nrt_kernels_set_reference(true);
  CHECK_OK(nrt_launch_run(&br));
  nrt_kernels_set_reference(false);
  /* im2col against the definition */
  int bad = 0;
  for (int64_t n = 0; n < f->n; n++)
    for (int64_t c = 0; c < f->c; c++)
      for (int64_t kh = 0; kh < f->kh; kh++)
        for (int64_t kw = 0; kw < f->kw; kw++)
          for (int64_t y = 0; y < oh; y++)
            for (int64_t x = 0; x < ow; x++) {
              int64_t ih = y * f->sh - f->ph + kh * f->dh, iw = x * f->sw - f->pw + kw * f->dw;
              double want = (ih >= 0 && ih < f->ih && iw >= 0 && iw < f->iw)
                                ? nrt_test_get(im, dt, ((n * f->c + c) * f->ih + ih) * f->iw + iw)
                                : 0.0;
              int64_t at = ((((n * f->c + c) * f->kh + kh) * f->kw + kw) * oh + y) * ow + x;
              if (nrt_test_get(col, dt, at) != want && bad++ < 3) fprintf(stderr, "im2col [%lld]\n", (long long)at);
            }
  CHECK(bad == 0);
  /* col2im: fast == reference, and <im2col(x), g> == <x, col2im(g)> */
  double lhs = 0, rhs = 0, mag = 0;
  for (int64_t i = 0; i < nim; i++) {
    CHECK_NEAR(nrt_test_get(gim, dt, i), nrt_test_get(gimr, dt, i), 1e-5);
    rhs += nrt_test_get(im, dt, i) * nrt_test_get(gimr, dt, i);
  }
  for (int64_t i = 0; i < ncol; i++) {
    double gi = nrt_test_get(g, dt, i);
    lhs += nrt_test_get(col, dt, i) * gi, mag += fabs(gi);
  }
  CHECK_NEAR(lhs, rhs, 1e-5 * (1 + mag));
  free(im);
  free(col);
  free(g);
  free(gim);
  free(gimr);
}

static void test_fold(void) {
  fcase cases[] = {
      {2, 3, 5, 6, 2, 3, 1, 1, 0, 0, 1, 1}, {1, 2, 7, 7, 3, 3, 2, 1, 1, 2, 2, 1},
      {2, 1, 4, 9, 1, 1, 1, 1, 0, 0, 1, 1}, {1, 4, 6, 5, 3, 2, 1, 2, 2, 1, 3, 2},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    run_fold(&cases[i], NRT_FLOAT32);
    run_fold(&cases[i], NRT_INT64);
  }
  run_fold(&cases[1], NRT_FLOAT64);
}

/* ---- interpolation: non-finite values (torch 2.13 CPU results, pasted) ----------
 * ATen multiplies every tap of an interpolated dim, zero weights included
 * (so a corner next to -inf is NaN), but the dims a 1-d or 2-d op does not
 * have carry no taps (p2 = the op's spatial dims): a zero-weight tap there
 * turned every inf into NaN. Antialiased windows read only their own size. */
static void interp_nonfinite_case(int mode, bool align, int nsp, const int64_t is[5], const double *x,
                                  const int64_t os[5], const double *want, bool ref) {
  act a, b;
  nrt_test_tensor5_make(&a, is, false, NRT_FLOAT32);
  nrt_test_tensor5_make(&b, os, false, NRT_FLOAT32);
  for (int64_t i = 0; i < a.numel; i++) nrt_test_put(a.data, a.dt, i, x[i]);
  nrt_launch l = interp_launch(NRT_OP(INTERP), &b, &a, mode, align, NULL);
  l.params[2] = nsp;
  CHECK_OK(nrt_test_run(&l, ref));
  for (int64_t i = 0; i < b.numel; i++) {
    double got = nrt_test_get(b.data, b.dt, i);
    bool ok = isnan(want[i]) ? isnan(got) : isinf(want[i]) ? got == want[i] : fabs(got - want[i]) <= 1e-6;
    if (!ok) fprintf(stderr, "interp mode %d nsp %d [%lld]: got %g want %g\n", mode, nsp, (long long)i, got, want[i]);
    CHECK(ok);
  }
  free(a.data);
  free(b.data);
}

static void test_interp_nonfinite(void) {
  for (int ref = 0; ref < 2; ref++) {
    /* linear 4 -> 7, align_corners: F.interpolate([1, -inf, 2, 3], 7, 'linear', True) */
    const double x1[4] = {1, -INFINITY, 2, 3};
    const double w1[7] = {NAN, -INFINITY, -INFINITY, -INFINITY, 2, 2.5, 3};
    interp_nonfinite_case(NRT_INTERP_LINEAR, true, 1, (const int64_t[]){1, 1, 1, 1, 4}, x1,
                          (const int64_t[]){1, 1, 1, 1, 7}, w1, ref);
    /* a real dim of size 1 -> 1 keeps its zero-weight tap: bilinear (1, 4) -> (1, 7) is NaN there */
    const double w1b[7] = {NAN, NAN, NAN, NAN, 2, 2.5, 3};
    interp_nonfinite_case(NRT_INTERP_LINEAR, true, 2, (const int64_t[]){1, 1, 1, 1, 4}, x1,
                          (const int64_t[]){1, 1, 1, 1, 7}, w1b, ref);
    /* bilinear [[1, -inf], [2, 3]] -> 3x3, align_corners */
    const double x2[4] = {1, -INFINITY, 2, 3};
    const double w2[9] = {NAN, -INFINITY, NAN, NAN, -INFINITY, NAN, 2, 2.5, 3};
    interp_nonfinite_case(NRT_INTERP_LINEAR, true, 2, (const int64_t[]){1, 1, 1, 2, 2}, x2,
                          (const int64_t[]){1, 1, 1, 3, 3}, w2, ref);
    /* antialiased bilinear 8 -> 3 with inf at either end: only the window touching it is inf */
    double x3[8] = {0, 1, 2, 3, 4, 5, 6, INFINITY};
    const double w3[3] = {1.1052632331848145, 3.5, INFINITY};
    interp_nonfinite_case(NRT_INTERP_AA_LINEAR, false, 2, (const int64_t[]){1, 1, 1, 1, 8}, x3,
                          (const int64_t[]){1, 1, 1, 1, 3}, w3, ref);
    x3[7] = 1;
    x3[0] = INFINITY;
    const double w4[3] = {INFINITY, 3.5, 4.157894134521484};
    interp_nonfinite_case(NRT_INTERP_AA_LINEAR, false, 2, (const int64_t[]){1, 1, 1, 1, 8}, x3,
                          (const int64_t[]){1, 1, 1, 1, 3}, w4, ref);
  }
}

/* p3 picks the CPU's float32 bilinear kernel: 0 its nested Interpolate
 * (fma(t0, w0, t1 w1) per dim), k > 0 its channels-last kernel with k
 * vector lanes (channels below C - C % k sum the four corner terms from
 * the last pair down, the rest from the first pair up). A 2x2 -> 1x1
 * (all weights 0.5, corner weights 0.25) of 1e-30, -2.5e38, 2.5e38, 1e30
 * gives 0, 2.5e-31 and 2.5e29 in the three orders; the CPU (3 channels, a
 * 1x1 output: its scalar tail) gives 2.5000000376186655e29. */
static void test_interp_linear_cpu_order(void) {
  const float v[4] = {1.0000000031710769e-30f, -2.500000072189495e+38f, 2.500000072189495e+38f,
                      1.0000000150474662e+30f};
  const float want_nested = 0.0f, want_vec = 2.500000007927692e-31f, want_tail = 2.5000000376186655e+29f;
  for (int lanes = 0; lanes <= 2; lanes += 2) {
    int64_t is[5] = {1, 3, 1, 2, 2}, os[5] = {1, 3, 1, 1, 1};
    act a, b;
    nrt_test_tensor5_make(&a, is, false, NRT_FLOAT32);
    nrt_test_tensor5_make(&b, os, false, NRT_FLOAT32);
    for (int64_t i = 0; i < 12; i++) nrt_test_put(a.data, a.dt, act_off(&a, i), v[i % 4]);
    nrt_launch l = interp_launch(NRT_OP(INTERP), &b, &a, NRT_INTERP_LINEAR, false, NULL);
    l.params[2] = 2;
    l.params[3] = lanes;
    CHECK_OK(nrt_launch_run(&l));
    for (int64_t c = 0; c < 3; c++) {
      float got = (float)act_get(&b, c);
      float want = lanes == 0 ? want_nested : c < 2 ? want_vec : want_tail;
      CHECK(got == want);
    }
    free(a.data);
    free(b.data);
  }
}

/* The backward's 8-plane vector path against the plain loop, bit for bit:
 * both scatter in the CPU's order (per element, output points in order),
 * so gradients spread over 2^-20..2^20 round identically; 11 and 19
 * planes leave a remainder for the plain loop. */
static void test_interp_backward_lanes(void) {
  int64_t shapes[][6] = {{1, 3, 5, 1, 7, 9}, {2, 4, 3, 3, 2, 8}, {1, 5, 5, 1, 3, 2}};
  int64_t nc[][2] = {{1, 11}, {19, 1}};
  nrt_dtype dts[] = {NRT_FLOAT32, NRT_BFLOAT16};
  for (int mode = 0; mode <= NRT_INTERP_AA_CUBIC; mode++)
    for (size_t s = 0; s < 3; s++)
      for (int k = 0; k < 4; k++) {
        bool two_d = mode == NRT_INTERP_CUBIC || mode >= NRT_INTERP_AA_LINEAR;
        int64_t is[5] = {nc[k & 1][0], nc[k & 1][1], two_d ? 1 : shapes[s][0], shapes[s][1], shapes[s][2]};
        int64_t os[5] = {is[0], is[1], two_d ? 1 : shapes[s][3], shapes[s][4], shapes[s][5]};
        nrt_dtype dt = dts[k >> 1];
        act g, gx, gxr;
        nrt_test_tensor5_make(&g, os, (k & 1) != 0, dt);
        nrt_test_tensor5_make(&gx, is, (k & 1) != 0, dt);
        nrt_test_tensor5_make(&gxr, is, (k & 1) != 0, dt);
        for (int64_t i = 0; i < g.numel; i++)
          nrt_test_put(g.data, dt, act_off(&g, i), nrt_test_urand() * ldexp(1.0, (int)(i * 7 % 41) - 20));
        nrt_launch b = interp_launch(NRT_OP(INTERP_BACKWARD), &gx, &g, mode, s == 1, NULL);
        nrt_launch br = interp_launch(NRT_OP(INTERP_BACKWARD), &gxr, &g, mode, s == 1, NULL);
        b.params[2] = br.params[2] = two_d ? 2 : 3;
        CHECK_OK(nrt_launch_run(&b));
        nrt_kernels_set_reference(true);
        CHECK_OK(nrt_launch_run(&br));
        nrt_kernels_set_reference(false);
        size_t bytes = (size_t)gx.numel * nrt_dtype_size(dt);
        if (memcmp(gx.data, gxr.data, bytes) != 0) fprintf(stderr, "mode %d shape %zu k %d differs\n", mode, s, k);
        CHECK(memcmp(gx.data, gxr.data, bytes) == 0);
        free(g.data);
        free(gx.data);
        free(gxr.data);
      }
}

int main(void) {
  nrt_test_seed(0x2545F4914F6CDD1Dull);
  RUN_TEST(test_interp_known);
  RUN_TEST(test_interp_modes);
  RUN_TEST(test_interp_integer_nearest);
  RUN_TEST(test_interp_uint8_known);
  RUN_TEST(test_interp_uint8);
  RUN_TEST(test_max_unpool);
  RUN_TEST(test_fold);
  RUN_TEST(test_interp_nonfinite);
  RUN_TEST(test_interp_linear_cpu_order);
  RUN_TEST(test_interp_backward_lanes);
  return TEST_RESULT();
}
