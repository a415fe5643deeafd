/* RNN family tests (LSTM_CELL, LSTM_CELL_BACKWARD, GRU_CELL,
 * GRU_CELL_BACKWARD): both paths against a double-precision reference
 * written here, over dtypes, operand layouts (contiguous, strided with
 * padding, column-major) and with and without biases / incoming
 * gradients; the backward kernels against central differences of the
 * double forward (which checks the formulas, not just agreement with the
 * kernel's own algebra); the fast path at every ISA level against the
 * reference path on batches large enough to be split across threads;
 * saturation and NaN; empty launches; descriptor errors. */
#include <stdint.h>
#include <string.h>
#include "testing.h"
#include "kernels/common/common.h"
#include "nrt/ops/rnn.h"

#define S(...) ((const int64_t[]){__VA_ARGS__})

/* ---- test matrices ------------------------------------------------------------ */

/* A [rows, cols] matrix in dtype dt; strides in elements. Layouts:
 * 0 contiguous, 1 every other column with a padded row, 2 column-major. */
typedef struct tmat {
  int64_t rows, cols, rs, cs;
  nrt_dtype dt;
  void *data;
} tmat;

static tmat tm_make(int64_t rows, int64_t cols, nrt_dtype dt, int layout) {
  tmat m = {rows, cols, cols, 1, dt, NULL};
  if (layout == 1) {
    m.cs = 2;
    m.rs = 2 * cols + 3;
  } else if (layout == 2) {
    m.rs = 1;
    m.cs = rows;
  }
  int64_t n = rows > 0 && cols > 0 ? (rows - 1) * m.rs + (cols - 1) * m.cs + 1 : 0;
  m.data = calloc((size_t)n + 1, nrt_dtype_size(dt));
  return m;
}

static double tm_get(const tmat *m, int64_t r, int64_t c) { return nrt_test_get(m->data, m->dt, r * m->rs + c * m->cs); }
static void tm_put(tmat *m, int64_t r, int64_t c, double v) { nrt_test_put(m->data, m->dt, r * m->rs + c * m->cs, v); }

static void tm_fill(tmat *m, double lo, double hi) {
  for (int64_t r = 0; r < m->rows; r++)
    for (int64_t c = 0; c < m->cols; c++) tm_put(m, r, c, nrt_test_uniform(lo, hi));
}

/* Operand k; a bias (rows == 1) gets row stride 0, as the glue passes it. */
static void tm_operand(nrt_launch *l, int k, const tmat *m, bool bias) {
  int64_t es = (int64_t)nrt_dtype_size(m->dt);
  nrt_test_operand_n(l, k, m->data, m->dt, S(bias ? 0 : m->rs * es, m->cs * es), 2);
}

static void tm_free(tmat *m) { free(m->data); }

/* Relative-above-one tolerance of an output stored in dt. */
static double out_tol(nrt_dtype dt) {
  switch (dt) {
  case NRT_BFLOAT16: return 8e-3;
  case NRT_FLOAT16: return 2e-3;
  default: return 4e-6;
  }
}

static int expect_near(const char *what, double got, double want, double tol) {
  if (nrt_test_near(got, want, tol)) return 0;
  fprintf(stderr, "  %s: got %.9g, want %.9g (tol %g)\n", what, got, want, tol);
  return 1;
}

static double dsig(double x) { return 1.0 / (1.0 + exp(-x)); }

/* ---- the double-precision forward cells --------------------------------------- */

/* One LSTM unit from its four pre-activation sums a[]: hy, cy, and the
 * activated gates. */
static void lstm_unit(const double a[4], double cx, double *hy, double *cy, double ws[4]) {
  ws[0] = dsig(a[0]);
  ws[1] = dsig(a[1]);
  ws[2] = tanh(a[2]);
  ws[3] = dsig(a[3]);
  *cy = ws[1] * cx + ws[0] * ws[2];
  *hy = ws[3] * tanh(*cy);
}

/* One GRU unit from the input-side sums ai[] (gate + input bias) and the
 * hidden-side sums ah[] (gate + hidden bias). ws: r, z, n, hx, hn. */
static double gru_unit(const double ai[3], const double ah[3], double hx, double ws[5]) {
  double r = dsig(ai[0] + ah[0]), z = dsig(ai[1] + ah[1]), n = tanh(ai[2] + r * ah[2]);
  ws[0] = r;
  ws[1] = z;
  ws[2] = n;
  ws[3] = hx;
  ws[4] = ah[2];
  return n + z * (hx - n);
}

/* ---- launches ---------------------------------------------------------------------- */

static nrt_status run_lstm(tmat *hy, tmat *cy, tmat *ws, const tmat *ig, const tmat *hg, const tmat *cx,
                           const tmat *bi, const tmat *bh, bool reference) {
  nrt_launch l = nrt_test_launch(NRT_OP(LSTM_CELL), NRT_FLOAT32, 2, S(cx->rows, cx->cols), 3, bi ? 5 : 3);
  tm_operand(&l, 0, hy, false);
  tm_operand(&l, 1, cy, false);
  tm_operand(&l, 2, ws, false);
  tm_operand(&l, 3, ig, false);
  tm_operand(&l, 4, hg, false);
  tm_operand(&l, 5, cx, false);
  if (bi) {
    tm_operand(&l, 6, bi, true);
    tm_operand(&l, 7, bh, true);
  }
  return nrt_test_run(&l, reference);
}

static nrt_status run_lstm_bwd(tmat *gg, tmat *gcx, const tmat *ghy, const tmat *gcy, const tmat *cx,
                               const tmat *cy, const tmat *ws, bool reference) {
  int k = 2;
  nrt_launch l = nrt_test_launch(NRT_OP(LSTM_CELL_BACKWARD), NRT_FLOAT32, 2, S(cx->rows, cx->cols), 2, 0);
  tm_operand(&l, 0, gg, false);
  tm_operand(&l, 1, gcx, false);
  if (ghy) tm_operand(&l, k++, ghy, false);
  if (gcy) tm_operand(&l, k++, gcy, false);
  tm_operand(&l, k++, cx, false);
  tm_operand(&l, k++, cy, false);
  tm_operand(&l, k++, ws, false);
  l.ninputs = k - 2;
  l.params[0] = (ghy ? 1 : 0) | (gcy ? 2 : 0);
  return nrt_test_run(&l, reference);
}

static nrt_status run_gru(tmat *hy, tmat *ws, const tmat *ig, const tmat *hg, const tmat *hx, const tmat *bi,
                          const tmat *bh, bool reference) {
  nrt_launch l = nrt_test_launch(NRT_OP(GRU_CELL), NRT_FLOAT32, 2, S(hx->rows, hx->cols), 2, bi ? 5 : 3);
  tm_operand(&l, 0, hy, false);
  tm_operand(&l, 1, ws, false);
  tm_operand(&l, 2, ig, false);
  tm_operand(&l, 3, hg, false);
  tm_operand(&l, 4, hx, false);
  if (bi) {
    tm_operand(&l, 5, bi, true);
    tm_operand(&l, 6, bh, true);
  }
  return nrt_test_run(&l, reference);
}

static nrt_status run_gru_bwd(tmat *gi, tmat *gh, tmat *ghx, const tmat *go, const tmat *ws, bool reference) {
  nrt_launch l = nrt_test_launch(NRT_OP(GRU_CELL_BACKWARD), NRT_FLOAT32, 2, S(go->rows, go->cols), 3, 2);
  tm_operand(&l, 0, gi, false);
  tm_operand(&l, 1, gh, false);
  tm_operand(&l, 2, ghx, false);
  tm_operand(&l, 3, go, false);
  tm_operand(&l, 4, ws, false);
  return nrt_test_run(&l, reference);
}

/* ---- forward against double ----------------------------------------------------- */

static const nrt_dtype DTYPES[] = {NRT_FLOAT32, NRT_FLOAT64, NRT_BFLOAT16, NRT_FLOAT16};
#define NDTYPES ((int)(sizeof DTYPES / sizeof DTYPES[0]))

static int lstm_forward_case(nrt_dtype dt, int layout, bool bias, bool reference, int64_t B, int64_t H) {
  tmat ig = tm_make(B, 4 * H, dt, layout), hg = tm_make(B, 4 * H, dt, (layout + 1) % 3);
  tmat cx = tm_make(B, H, dt, layout), bi = tm_make(1, 4 * H, dt, layout), bh = tm_make(1, 4 * H, dt, 0);
  tmat hy = tm_make(B, H, dt, (layout + 2) % 3), cy = tm_make(B, H, dt, layout), ws = tm_make(B, 4 * H, dt, layout);
  tm_fill(&ig, -2, 2);
  tm_fill(&hg, -2, 2);
  tm_fill(&cx, -1.5, 1.5);
  tm_fill(&bi, -0.5, 0.5);
  tm_fill(&bh, -0.5, 0.5);
  int bad = 0;
  nrt_status st = run_lstm(&hy, &cy, &ws, &ig, &hg, &cx, bias ? &bi : NULL, bias ? &bh : NULL, reference);
  if (st != NRT_SUCCESS) {
    fprintf(stderr, "  LSTM_CELL: %s (%s)\n", nrt_status_name(st), nrt_last_error_message());
    bad++;
  }
  double tol = out_tol(dt);
  for (int64_t b = 0; b < B && !bad; b++)
    for (int64_t j = 0; j < H; j++) {
      double a[4], h, c, w[4];
      for (int k = 0; k < 4; k++)
        a[k] = tm_get(&ig, b, k * H + j) + tm_get(&hg, b, k * H + j) +
               (bias ? tm_get(&bi, 0, k * H + j) + tm_get(&bh, 0, k * H + j) : 0);
      lstm_unit(a, tm_get(&cx, b, j), &h, &c, w);
      bad += expect_near("lstm hy", tm_get(&hy, b, j), h, tol);
      bad += expect_near("lstm cy", tm_get(&cy, b, j), c, tol);
      for (int k = 0; k < 4; k++) bad += expect_near("lstm workspace", tm_get(&ws, b, k * H + j), w[k], tol);
    }
  if (bad)
    fprintf(stderr, "  LSTM_CELL %s layout %d bias %d reference %d: %d mismatches\n", nrt_dtype_name(dt), layout,
            bias, reference, bad);
  tm_free(&ig), tm_free(&hg), tm_free(&cx), tm_free(&bi), tm_free(&bh), tm_free(&hy), tm_free(&cy), tm_free(&ws);
  return bad;
}

static int gru_forward_case(nrt_dtype dt, int layout, bool bias, bool reference, int64_t B, int64_t H) {
  tmat ig = tm_make(B, 3 * H, dt, layout), hg = tm_make(B, 3 * H, dt, (layout + 1) % 3);
  tmat hx = tm_make(B, H, dt, (layout + 2) % 3), bi = tm_make(1, 3 * H, dt, layout), bh = tm_make(1, 3 * H, dt, 1);
  tmat hy = tm_make(B, H, dt, layout), ws = tm_make(B, 5 * H, dt, (layout + 1) % 3);
  tm_fill(&ig, -2, 2);
  tm_fill(&hg, -2, 2);
  tm_fill(&hx, -1, 1);
  tm_fill(&bi, -0.5, 0.5);
  tm_fill(&bh, -0.5, 0.5);
  int bad = 0;
  nrt_status st = run_gru(&hy, &ws, &ig, &hg, &hx, bias ? &bi : NULL, bias ? &bh : NULL, reference);
  if (st != NRT_SUCCESS) {
    fprintf(stderr, "  GRU_CELL: %s (%s)\n", nrt_status_name(st), nrt_last_error_message());
    bad++;
  }
  double tol = out_tol(dt);
  for (int64_t b = 0; b < B && !bad; b++)
    for (int64_t j = 0; j < H; j++) {
      double ai[3], ah[3], w[5];
      for (int k = 0; k < 3; k++) {
        ai[k] = tm_get(&ig, b, k * H + j) + (bias ? tm_get(&bi, 0, k * H + j) : 0);
        ah[k] = tm_get(&hg, b, k * H + j) + (bias ? tm_get(&bh, 0, k * H + j) : 0);
      }
      double h = gru_unit(ai, ah, tm_get(&hx, b, j), w);
      bad += expect_near("gru hy", tm_get(&hy, b, j), h, tol);
      for (int k = 0; k < 5; k++) bad += expect_near("gru workspace", tm_get(&ws, b, k * H + j), w[k], tol);
      /* hx is saved exactly */
      bad += tm_get(&ws, b, 3 * H + j) != tm_get(&hx, b, j);
    }
  if (bad)
    fprintf(stderr, "  GRU_CELL %s layout %d bias %d reference %d: %d mismatches\n", nrt_dtype_name(dt), layout,
            bias, reference, bad);
  tm_free(&ig), tm_free(&hg), tm_free(&hx), tm_free(&bi), tm_free(&bh), tm_free(&hy), tm_free(&ws);
  return bad;
}

static void test_forward_against_double(void) {
  int bad = 0;
  for (int t = 0; t < NDTYPES; t++)
    for (int layout = 0; layout < 3; layout++)
      for (int bias = 0; bias < 2; bias++)
        for (int ref = 0; ref < 2; ref++) {
          bad += lstm_forward_case(DTYPES[t], layout, bias, ref, 7, 19);
          bad += gru_forward_case(DTYPES[t], layout, bias, ref, 7, 19);
        }
  /* H = 1 and a single row: every loop's remainder path */
  bad += lstm_forward_case(NRT_FLOAT32, 0, true, false, 1, 1);
  bad += gru_forward_case(NRT_FLOAT32, 0, true, false, 1, 1);
  CHECK(bad == 0);
}

/* ---- backward against double (from the same saved values) ------------------------- */

static int lstm_backward_case(nrt_dtype dt, int layout, int which, bool reference, int64_t B, int64_t H) {
  tmat ghy = tm_make(B, H, dt, layout), gcy = tm_make(B, H, dt, (layout + 1) % 3);
  tmat cx = tm_make(B, H, dt, (layout + 2) % 3), cy = tm_make(B, H, dt, layout), ws = tm_make(B, 4 * H, dt, layout);
  tmat gg = tm_make(B, 4 * H, dt, (layout + 1) % 3), gcx = tm_make(B, H, dt, layout);
  tm_fill(&ghy, -1, 1);
  tm_fill(&gcy, -1, 1);
  tm_fill(&cx, -1.5, 1.5);
  tm_fill(&cy, -2, 2);
  for (int64_t b = 0; b < B; b++)
    for (int64_t j = 0; j < 4 * H; j++) tm_put(&ws, b, j, j / H == 2 ? nrt_test_uniform(-1, 1) : nrt_test_uniform(0, 1));
  int bad = 0;
  nrt_status st = run_lstm_bwd(&gg, &gcx, which & 1 ? &ghy : NULL, which & 2 ? &gcy : NULL, &cx, &cy, &ws, reference);
  if (st != NRT_SUCCESS) {
    fprintf(stderr, "  LSTM_CELL_BACKWARD: %s (%s)\n", nrt_status_name(st), nrt_last_error_message());
    bad++;
  }
  double tol = out_tol(dt);
  for (int64_t b = 0; b < B && !bad; b++)
    for (int64_t j = 0; j < H; j++) {
      double gh = which & 1 ? tm_get(&ghy, b, j) : 0, gc = which & 2 ? tm_get(&gcy, b, j) : 0;
      double i = tm_get(&ws, b, j), f = tm_get(&ws, b, H + j), g = tm_get(&ws, b, 2 * H + j),
             o = tm_get(&ws, b, 3 * H + j);
      double t = tanh(tm_get(&cy, b, j)), dc = gh * o * (1 - t * t) + gc;
      double want[4] = {dc * g * i * (1 - i), dc * tm_get(&cx, b, j) * f * (1 - f), dc * i * (1 - g * g),
                        gh * t * o * (1 - o)};
      for (int k = 0; k < 4; k++) bad += expect_near("lstm grad_gates", tm_get(&gg, b, k * H + j), want[k], tol);
      bad += expect_near("lstm grad_cx", tm_get(&gcx, b, j), dc * f, tol);
    }
  if (bad)
    fprintf(stderr, "  LSTM_CELL_BACKWARD %s layout %d p0 %d reference %d: %d mismatches\n", nrt_dtype_name(dt),
            layout, which, reference, bad);
  tm_free(&ghy), tm_free(&gcy), tm_free(&cx), tm_free(&cy), tm_free(&ws), tm_free(&gg), tm_free(&gcx);
  return bad;
}

static int gru_backward_case(nrt_dtype dt, int layout, bool reference, int64_t B, int64_t H) {
  tmat go = tm_make(B, H, dt, layout), ws = tm_make(B, 5 * H, dt, (layout + 1) % 3);
  tmat gi = tm_make(B, 3 * H, dt, (layout + 2) % 3), gh = tm_make(B, 3 * H, dt, layout), ghx = tm_make(B, H, dt, layout);
  tm_fill(&go, -1, 1);
  for (int64_t b = 0; b < B; b++)
    for (int64_t j = 0; j < 5 * H; j++) tm_put(&ws, b, j, j / H < 2 ? nrt_test_uniform(0, 1) : nrt_test_uniform(-1.5, 1.5));
  int bad = 0;
  nrt_status st = run_gru_bwd(&gi, &gh, &ghx, &go, &ws, reference);
  if (st != NRT_SUCCESS) {
    fprintf(stderr, "  GRU_CELL_BACKWARD: %s (%s)\n", nrt_status_name(st), nrt_last_error_message());
    bad++;
  }
  double tol = out_tol(dt);
  for (int64_t b = 0; b < B && !bad; b++)
    for (int64_t j = 0; j < H; j++) {
      double g = tm_get(&go, b, j), r = tm_get(&ws, b, j), z = tm_get(&ws, b, H + j), n = tm_get(&ws, b, 2 * H + j);
      double hx = tm_get(&ws, b, 3 * H + j), hn = tm_get(&ws, b, 4 * H + j);
      double dz = g * (hx - n) * (1 - z) * z, dn = g * (1 - z) * (1 - n * n), dr = dn * hn * (1 - r) * r;
      double wi[3] = {dr, dz, dn}, wh[3] = {dr, dz, dn * r};
      for (int k = 0; k < 3; k++) {
        bad += expect_near("gru grad_input_gates", tm_get(&gi, b, k * H + j), wi[k], tol);
        bad += expect_near("gru grad_hidden_gates", tm_get(&gh, b, k * H + j), wh[k], tol);
      }
      bad += expect_near("gru grad_hx", tm_get(&ghx, b, j), g * z, tol);
    }
  if (bad)
    fprintf(stderr, "  GRU_CELL_BACKWARD %s layout %d reference %d: %d mismatches\n", nrt_dtype_name(dt), layout,
            reference, bad);
  tm_free(&go), tm_free(&ws), tm_free(&gi), tm_free(&gh), tm_free(&ghx);
  return bad;
}

static void test_backward_against_double(void) {
  int bad = 0;
  for (int t = 0; t < NDTYPES; t++)
    for (int layout = 0; layout < 3; layout++)
      for (int ref = 0; ref < 2; ref++) {
        for (int which = 1; which <= 3; which++) bad += lstm_backward_case(DTYPES[t], layout, which, ref, 6, 21);
        bad += gru_backward_case(DTYPES[t], layout, ref, 6, 21);
      }
  bad += lstm_backward_case(NRT_FLOAT32, 0, 3, false, 1, 1);
  bad += gru_backward_case(NRT_FLOAT32, 0, false, 1, 1);
  CHECK(bad == 0);
}

/* ---- backward against central differences ----------------------------------------- */

enum { FD_B = 3, FD_H = 5 };

/* L = sum(ghy * hy + gcy * cy) of the double LSTM forward. */
static double lstm_loss(const double *ig, const double *hg, const double *cx, const double *bsum, const double *ghy,
                        const double *gcy) {
  double L = 0;
  for (int b = 0; b < FD_B; b++)
    for (int j = 0; j < FD_H; j++) {
      double a[4], h, c, w[4];
      for (int k = 0; k < 4; k++) a[k] = ig[b * 4 * FD_H + k * FD_H + j] + hg[b * 4 * FD_H + k * FD_H + j] + bsum[k * FD_H + j];
      lstm_unit(a, cx[b * FD_H + j], &h, &c, w);
      L += ghy[b * FD_H + j] * h + gcy[b * FD_H + j] * c;
    }
  return L;
}

/* L = sum(go * hy) of the double GRU forward. */
static double gru_loss(const double *ig, const double *hg, const double *hx, const double *bi, const double *bh,
                       const double *go) {
  double L = 0;
  for (int b = 0; b < FD_B; b++)
    for (int j = 0; j < FD_H; j++) {
      double ai[3], ah[3], w[5];
      for (int k = 0; k < 3; k++) {
        ai[k] = ig[b * 3 * FD_H + k * FD_H + j] + bi[k * FD_H + j];
        ah[k] = hg[b * 3 * FD_H + k * FD_H + j] + bh[k * FD_H + j];
      }
      L += go[b * FD_H + j] * gru_unit(ai, ah, hx[b * FD_H + j], w);
    }
  return L;
}

/* d(loss)/d(v[i]) by central differences; v is restored. */
#define CENTRAL(v, i, expr)                                   \
  ({                                                          \
    double save_ = (v)[i], e_ = 1e-6 * (1 + fabs(save_));     \
    (v)[i] = save_ + e_;                                      \
    double up_ = (expr);                                      \
    (v)[i] = save_ - e_;                                      \
    double dn_ = (expr);                                      \
    (v)[i] = save_;                                           \
    (up_ - dn_) / (2 * e_);                                   \
  })

static void test_backward_finite_differences(void) {
  const int B = FD_B, H = FD_H;
  int bad = 0;
  for (int ref = 0; ref < 2; ref++) {
    /* LSTM: float32 kernels; the double forward sees the same float values */
    tmat ig = tm_make(B, 4 * H, NRT_FLOAT32, 0), hg = tm_make(B, 4 * H, NRT_FLOAT32, 0), cx = tm_make(B, H, NRT_FLOAT32, 0);
    tmat bi = tm_make(1, 4 * H, NRT_FLOAT32, 0), bh = tm_make(1, 4 * H, NRT_FLOAT32, 0);
    tmat hy = tm_make(B, H, NRT_FLOAT32, 0), cy = tm_make(B, H, NRT_FLOAT32, 0), ws = tm_make(B, 4 * H, NRT_FLOAT32, 0);
    tmat ghy = tm_make(B, H, NRT_FLOAT32, 0), gcy = tm_make(B, H, NRT_FLOAT32, 0);
    tmat gg = tm_make(B, 4 * H, NRT_FLOAT32, 0), gcx = tm_make(B, H, NRT_FLOAT32, 0);
    tm_fill(&ig, -1.5, 1.5), tm_fill(&hg, -1.5, 1.5), tm_fill(&cx, -1, 1);
    tm_fill(&bi, -0.3, 0.3), tm_fill(&bh, -0.3, 0.3), tm_fill(&ghy, -1, 1), tm_fill(&gcy, -1, 1);
    CHECK_OK(run_lstm(&hy, &cy, &ws, &ig, &hg, &cx, &bi, &bh, ref));
    CHECK_OK(run_lstm_bwd(&gg, &gcx, &ghy, &gcy, &cx, &cy, &ws, ref));
    double dig[FD_B * 4 * FD_H], dhg[FD_B * 4 * FD_H], dcx[FD_B * FD_H], bsum[4 * FD_H], dghy[FD_B * FD_H],
        dgcy[FD_B * FD_H];
    for (int i = 0; i < B * 4 * H; i++) dig[i] = ((float *)ig.data)[i], dhg[i] = ((float *)hg.data)[i];
    for (int i = 0; i < 4 * H; i++) bsum[i] = (double)((float *)bi.data)[i] + ((float *)bh.data)[i];
    for (int i = 0; i < B * H; i++)
      dcx[i] = ((float *)cx.data)[i], dghy[i] = ((float *)ghy.data)[i], dgcy[i] = ((float *)gcy.data)[i];
    for (int i = 0; i < B * 4 * H; i++) {
      double d = CENTRAL(dig, i, lstm_loss(dig, dhg, dcx, bsum, dghy, dgcy));
      bad += expect_near("lstm d/d input_gates", ((float *)gg.data)[i], d, 2e-5);
      d = CENTRAL(dhg, i, lstm_loss(dig, dhg, dcx, bsum, dghy, dgcy));
      bad += expect_near("lstm d/d hidden_gates", ((float *)gg.data)[i], d, 2e-5);
    }
    for (int i = 0; i < B * H; i++) {
      double d = CENTRAL(dcx, i, lstm_loss(dig, dhg, dcx, bsum, dghy, dgcy));
      bad += expect_near("lstm d/d cx", ((float *)gcx.data)[i], d, 2e-5);
    }
    tm_free(&ig), tm_free(&hg), tm_free(&cx), tm_free(&bi), tm_free(&bh), tm_free(&hy), tm_free(&cy);
    tm_free(&ws), tm_free(&ghy), tm_free(&gcy), tm_free(&gg), tm_free(&gcx);

    /* GRU */
    tmat gig = tm_make(B, 3 * H, NRT_FLOAT32, 0), ghg = tm_make(B, 3 * H, NRT_FLOAT32, 0), hx = tm_make(B, H, NRT_FLOAT32, 0);
    tmat gbi = tm_make(1, 3 * H, NRT_FLOAT32, 0), gbh = tm_make(1, 3 * H, NRT_FLOAT32, 0);
    tmat ghy2 = tm_make(B, H, NRT_FLOAT32, 0), gws = tm_make(B, 5 * H, NRT_FLOAT32, 0), go = tm_make(B, H, NRT_FLOAT32, 0);
    tmat gi = tm_make(B, 3 * H, NRT_FLOAT32, 0), gh = tm_make(B, 3 * H, NRT_FLOAT32, 0), ghx = tm_make(B, H, NRT_FLOAT32, 0);
    tm_fill(&gig, -1.5, 1.5), tm_fill(&ghg, -1.5, 1.5), tm_fill(&hx, -1, 1);
    tm_fill(&gbi, -0.3, 0.3), tm_fill(&gbh, -0.3, 0.3), tm_fill(&go, -1, 1);
    CHECK_OK(run_gru(&ghy2, &gws, &gig, &ghg, &hx, &gbi, &gbh, ref));
    CHECK_OK(run_gru_bwd(&gi, &gh, &ghx, &go, &gws, ref));
    double xi[FD_B * 3 * FD_H], xh[FD_B * 3 * FD_H], xhx[FD_B * FD_H], xbi[3 * FD_H], xbh[3 * FD_H], xgo[FD_B * FD_H];
    for (int i = 0; i < B * 3 * H; i++) xi[i] = ((float *)gig.data)[i], xh[i] = ((float *)ghg.data)[i];
    for (int i = 0; i < 3 * H; i++) xbi[i] = ((float *)gbi.data)[i], xbh[i] = ((float *)gbh.data)[i];
    for (int i = 0; i < B * H; i++) xhx[i] = ((float *)hx.data)[i], xgo[i] = ((float *)go.data)[i];
    for (int i = 0; i < B * 3 * H; i++) {
      double d = CENTRAL(xi, i, gru_loss(xi, xh, xhx, xbi, xbh, xgo));
      bad += expect_near("gru d/d input_gates", ((float *)gi.data)[i], d, 2e-5);
      d = CENTRAL(xh, i, gru_loss(xi, xh, xhx, xbi, xbh, xgo));
      bad += expect_near("gru d/d hidden_gates", ((float *)gh.data)[i], d, 2e-5);
    }
    /* hx's direct path: the hidden gates (hx W_hh^T) are held fixed */
    for (int i = 0; i < B * H; i++) {
      double d = CENTRAL(xhx, i, gru_loss(xi, xh, xhx, xbi, xbh, xgo));
      bad += expect_near("gru d/d hx", ((float *)ghx.data)[i], d, 2e-5);
    }
    tm_free(&gig), tm_free(&ghg), tm_free(&hx), tm_free(&gbi), tm_free(&gbh), tm_free(&ghy2), tm_free(&gws);
    tm_free(&go), tm_free(&gi), tm_free(&gh), tm_free(&ghx);
  }
  CHECK(bad == 0);
}

/* ---- fast path (every ISA level) against the reference path ---------------------- */

/* Runs `op` with random operands on both paths and compares every output.
 * Outputs of the fast path may differ from the reference's by float32
 * rounding (vectorised exp/tanh vs libm), i.e. one unit of a 16-bit dtype
 * at most. */
static int compare_paths(nrt_op op, nrt_dtype dt, int64_t B, int64_t H, bool bias, int which) {
  int nout, nin, G = op == NRT_OP(LSTM_CELL) || op == NRT_OP(LSTM_CELL_BACKWARD) ? 4 : 3;
  int64_t in_cols[5], out_cols[3];
  switch ((int)op) {
  case NRT_OP(LSTM_CELL):
  case NRT_OP(GRU_CELL):
    nout = G == 4 ? 3 : 2;
    nin = bias ? 5 : 3;
    out_cols[0] = H, out_cols[1] = G == 4 ? H : 5 * H, out_cols[2] = 4 * H;
    in_cols[0] = in_cols[1] = G * H, in_cols[2] = H, in_cols[3] = in_cols[4] = G * H;
    break;
  case NRT_OP(LSTM_CELL_BACKWARD):
    nout = 2;
    nin = 3 + (which & 1) + (which >> 1);
    out_cols[0] = 4 * H, out_cols[1] = H;
    for (int k = 0; k < nin; k++) in_cols[k] = k == nin - 1 ? 4 * H : H;
    break;
  default:
    nout = 3;
    nin = 2;
    out_cols[0] = out_cols[1] = 3 * H, out_cols[2] = H;
    in_cols[0] = H, in_cols[1] = 5 * H;
    break;
  }
  tmat in[5], out[2][3];
  for (int k = 0; k < nin; k++) {
    bool is_bias = (op == NRT_OP(LSTM_CELL) || op == NRT_OP(GRU_CELL)) && k >= 3;
    in[k] = tm_make(is_bias ? 1 : B, in_cols[k], dt, k % 3);
    tm_fill(&in[k], -3, 3);
  }
  if (op == NRT_OP(LSTM_CELL_BACKWARD) || op == NRT_OP(GRU_CELL_BACKWARD)) /* plausible gates in the workspace */
    tm_fill(&in[nin - 1], 0, 1);
  for (int p = 0; p < 2; p++)
    for (int k = 0; k < nout; k++) out[p][k] = tm_make(B, out_cols[k], dt, (k + p) % 3);
  int bad = 0;
  int isa_max = nrt_kernels_isa();
  for (int isa = NRT_ISA_BASELINE; isa <= isa_max; isa++) {
    nrt_kernels_limit_isa((nrt_isa)isa);
    for (int p = 0; p < 2; p++) {
      nrt_launch l = nrt_test_launch(op, NRT_FLOAT32, 2, S(B, H), nout, nin);
      for (int k = 0; k < nout; k++) tm_operand(&l, k, &out[p][k], false);
      for (int k = 0; k < nin; k++) tm_operand(&l, nout + k, &in[k], in[k].rows == 1 && B != 1);
      l.params[0] = which;
      nrt_status st = nrt_test_run(&l, p == 1);
      if (st != NRT_SUCCESS) {
        fprintf(stderr, "  %s: %s (%s)\n", nrt_op_name(op), nrt_status_name(st), nrt_last_error_message());
        bad++;
      }
    }
    double tol = dt == NRT_FLOAT32 || dt == NRT_FLOAT64 ? 2e-6 : out_tol(dt);
    for (int k = 0; k < nout && !bad; k++)
      for (int64_t b = 0; b < B; b++)
        for (int64_t c = 0; c < out_cols[k]; c++)
          bad += expect_near(nrt_op_name(op), tm_get(&out[0][k], b, c), tm_get(&out[1][k], b, c), tol);
  }
  nrt_kernels_limit_isa(NRT_ISA_BEST);
  if (bad) fprintf(stderr, "  %s %s B %lld H %lld: %d mismatches\n", nrt_op_name(op), nrt_dtype_name(dt), (long long)B,
                   (long long)H, bad);
  for (int k = 0; k < nin; k++) tm_free(&in[k]);
  for (int p = 0; p < 2; p++)
    for (int k = 0; k < nout; k++) tm_free(&out[p][k]);
  return bad;
}

static void test_fast_vs_reference(void) {
  const int64_t shapes[][2] = {{1, 1}, {2, 3}, {257, 67}, {33, 600}, {1000, 8}};
  const nrt_dtype dts[] = {NRT_FLOAT32, NRT_BFLOAT16, NRT_FLOAT16, NRT_FLOAT64};
  int bad = 0;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++) {
      int64_t B = shapes[s][0], H = shapes[s][1];
      if (dts[t] != NRT_FLOAT32 && B * H > 20000) continue;
      for (int bias = 0; bias < 2; bias++) {
        bad += compare_paths(NRT_OP(LSTM_CELL), dts[t], B, H, bias, 0);
        bad += compare_paths(NRT_OP(GRU_CELL), dts[t], B, H, bias, 0);
      }
      for (int which = 1; which <= 3; which++) bad += compare_paths(NRT_OP(LSTM_CELL_BACKWARD), dts[t], B, H, false, which);
      bad += compare_paths(NRT_OP(GRU_CELL_BACKWARD), dts[t], B, H, false, 0);
    }
  CHECK(bad == 0);
}

/* ---- saturation and NaN ------------------------------------------------------------ */

static void test_saturation(void) {
  const double vals[] = {0, -0.0, 1e-30, 20, -20, 90, -90, 110, -110, 1e30, -1e30, INFINITY, -INFINITY, NAN};
  enum { N = sizeof vals / sizeof vals[0] };
  int bad = 0;
  for (int ref = 0; ref < 2; ref++) {
    /* every gate of unit j gets vals[j]; hidden gates zero, cx = 0.5 */
    tmat ig = tm_make(1, 4 * N, NRT_FLOAT32, 0), hg = tm_make(1, 4 * N, NRT_FLOAT32, 0), cx = tm_make(1, N, NRT_FLOAT32, 0);
    tmat hy = tm_make(1, N, NRT_FLOAT32, 0), cy = tm_make(1, N, NRT_FLOAT32, 0), ws = tm_make(1, 4 * N, NRT_FLOAT32, 0);
    for (int j = 0; j < N; j++) {
      for (int k = 0; k < 4; k++) tm_put(&ig, 0, k * N + j, vals[j]);
      tm_put(&cx, 0, j, 0.5);
    }
    CHECK_OK(run_lstm(&hy, &cy, &ws, &ig, &hg, &cx, NULL, NULL, ref));
    for (int j = 0; j < N; j++) {
      double a[4] = {vals[j], vals[j], vals[j], vals[j]}, h, c, w[4];
      lstm_unit(a, 0.5, &h, &c, w);
      bad += expect_near("saturated lstm hy", tm_get(&hy, 0, j), h, 4e-6);
      bad += expect_near("saturated lstm cy", tm_get(&cy, 0, j), c, 4e-6);
      for (int k = 0; k < 4; k++) bad += expect_near("saturated lstm ws", tm_get(&ws, 0, k * N + j), w[k], 4e-6);
    }
    tmat gig = tm_make(1, 3 * N, NRT_FLOAT32, 0), ghg = tm_make(1, 3 * N, NRT_FLOAT32, 0), hx = tm_make(1, N, NRT_FLOAT32, 0);
    tmat ghy = tm_make(1, N, NRT_FLOAT32, 0), gws = tm_make(1, 5 * N, NRT_FLOAT32, 0);
    for (int j = 0; j < N; j++) {
      for (int k = 0; k < 3; k++) tm_put(&gig, 0, k * N + j, vals[j]);
      tm_put(&hx, 0, j, -0.25);
    }
    CHECK_OK(run_gru(&ghy, &gws, &gig, &ghg, &hx, NULL, NULL, ref));
    for (int j = 0; j < N; j++) {
      double ai[3] = {vals[j], vals[j], vals[j]}, ah[3] = {0, 0, 0}, w[5];
      bad += expect_near("saturated gru hy", tm_get(&ghy, 0, j), gru_unit(ai, ah, -0.25, w), 4e-6);
    }
    tm_free(&ig), tm_free(&hg), tm_free(&cx), tm_free(&hy), tm_free(&cy), tm_free(&ws);
    tm_free(&gig), tm_free(&ghg), tm_free(&hx), tm_free(&ghy), tm_free(&gws);
  }
  CHECK(bad == 0);
}

/* ---- empty launches and descriptor errors ------------------------------------------ */

static void test_empty(void) {
  const nrt_op ops[] = {NRT_OP(LSTM_CELL), NRT_OP(LSTM_CELL_BACKWARD), NRT_OP(GRU_CELL), NRT_OP(GRU_CELL_BACKWARD)};
  const int nout[] = {3, 2, 2, 3}, nin[] = {5, 5, 3, 2};
  for (int o = 0; o < 4; o++)
    for (int z = 0; z < 2; z++) {
      nrt_launch l = nrt_test_launch(ops[o], NRT_FLOAT32, 2, z ? S(0, 4) : S(3, 0), nout[o], nin[o]);
      for (int k = 0; k < nout[o] + nin[o]; k++) l.operands[k].dtype = NRT_FLOAT32; /* data NULL */
      l.params[0] = 3;
      CHECK_OK(nrt_test_run(&l, false));
      CHECK_OK(nrt_test_run(&l, true));
    }
}

static void test_errors(void) {
  float buf[64] = {0};
  /* LSTM_CELL over {1, 2}: operands all point at buf, contiguous strides */
  nrt_launch l = nrt_test_launch(NRT_OP(LSTM_CELL), NRT_FLOAT32, 2, S(1, 2), 3, 3);
  for (int k = 0; k < 8; k++) nrt_test_operand_n(&l, k, buf, NRT_FLOAT32, S(32, 4), 2);
  CHECK_OK(nrt_launch_run(&l));
  l.ninputs = 4; /* one bias only */
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_PREFIX("LSTM_CELL: expected 3 inputs (no biases) or 5");
  l.ninputs = 5;
  CHECK_OK(nrt_launch_run(&l));
  l.ninputs = 6; /* the row's range */
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT);
  l.ninputs = 3;
  l.noutputs = 2;
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_PREFIX("LSTM_CELL: expected 3 outputs");
  l.noutputs = 3;
  l.ndim = 3;
  l.sizes[2] = 1;
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT);
  l.ndim = 2;
  l.operands[3].dtype = NRT_INT32;
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_UNSUPPORTED);
  CHECK_PREFIX("LSTM_CELL: operand 3 has dtype int32");
  l.operands[3].dtype = NRT_COMPLEX64;
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_UNSUPPORTED);
  /* LSTM_CELL_BACKWARD: p0 says which incoming gradients are present */
  l = nrt_test_launch(NRT_OP(LSTM_CELL_BACKWARD), NRT_FLOAT32, 2, S(1, 2), 2, 5);
  for (int k = 0; k < 7; k++) nrt_test_operand_n(&l, k, buf, NRT_FLOAT32, S(32, 4), 2);
  l.params[0] = 3;
  CHECK_OK(nrt_launch_run(&l));
  l.params[0] = 0;
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT);
  l.params[0] = 4;
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT);
  l.params[0] = 1;
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_PREFIX("LSTM_CELL_BACKWARD: p0 = 1 needs 4 inputs, got 5");
  l.ninputs = 4;
  CHECK_OK(nrt_launch_run(&l));
  /* GRU */
  l = nrt_test_launch(NRT_OP(GRU_CELL), NRT_FLOAT32, 2, S(1, 2), 2, 4);
  for (int k = 0; k < 7; k++) nrt_test_operand_n(&l, k, buf, NRT_FLOAT32, S(32, 4), 2);
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT);
  l.ninputs = 5;
  CHECK_OK(nrt_launch_run(&l));
  l = nrt_test_launch(NRT_OP(GRU_CELL_BACKWARD), NRT_FLOAT32, 2, S(1, 2), 3, 2);
  for (int k = 0; k < 5; k++) nrt_test_operand_n(&l, k, buf, NRT_FLOAT32, S(40, 4), 2);
  CHECK_OK(nrt_launch_run(&l));
  l.ninputs = 3;
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT);
  l.ninputs = 2;
  l.noutputs = 2;
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT);
  /* the table */
  CHECK(strcmp(nrt_op_name(NRT_OP(GRU_CELL_BACKWARD)), "GRU_CELL_BACKWARD") == 0);
  CHECK(nrt_op_kind(NRT_OP(LSTM_CELL)) == NRT_KIND_RNN);
  CHECK(nrt_op_ninputs(NRT_OP(LSTM_CELL_BACKWARD)) == 3);
}

int main(void) {
  printf("test_kernels_rnn\n");
  RUN_TEST(test_forward_against_double);
  RUN_TEST(test_backward_against_double);
  RUN_TEST(test_backward_finite_differences);
  RUN_TEST(test_fast_vs_reference);
  RUN_TEST(test_saturation);
  RUN_TEST(test_empty);
  RUN_TEST(test_errors);
  return TEST_RESULT();
}
