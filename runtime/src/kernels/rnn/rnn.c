/* Fused recurrent cells (NRT_KIND_RNN, nrt/ops/rnn.h): the elementwise half
 * of an LSTM or GRU time step, forward and backward, each in one pass over
 * a batch row (all gates of a unit are read, activated and combined
 * together, instead of the five to ten separate elementwise launches the
 * unfused cell costs).
 *
 * Work split: batch rows are independent, so rows are the parallel work
 * items; a chunk of rows shares one scratch buffer. A row of every operand
 * is brought into float32 (in place when it already is unit-stride
 * float32), computed by a row function that the compiler vectorises
 * (baseline, AVX2 and AVX-512 builds of the same inline code), and stored
 * back in the operand's dtype. Biases are the same for every row and are
 * loaded once per chunk; absent biases are zeros, which changes no result
 * (x + 0 is exact).
 *
 * The reference path (nrt_kernels_reference()) is a serial scalar loop
 * that reads and writes every element through dtype.c's conversions and
 * uses libm's expf/tanhf, so the tests check the vectorised math, the row
 * loaders and the strides against independent code.
 *
 * Precision: float32 throughout (float64 data at float32 precision, the
 * device rule); each output rounds once to its dtype. The workspace is
 * stored in the data's dtype, as ATen's CUDA kernels store it, so a
 * bfloat16 backward reads bfloat16-rounded gates, exactly like CUDA's. */
#pragma GCC optimize("O3,no-trapping-math,no-math-errno")
#include <stdatomic.h>
#include <stdlib.h>
#include "kernels/common/common.h"
#include "nrt/ops/rnn.h"

/* Elements (gate values) per parallel chunk, at least: a chunk must pay
 * for a thread hand-off. */
#define RNN_GRAIN 16384
/* Scratch floats per unit of H a chunk needs: the largest op (LSTM_CELL:
 * 4H input gates, 4H hidden gates, 4H + 4H biases, 4H workspace, cx, hy,
 * cy = 23H; GRU_CELL needs 19H and, 8-byte aligned at 20H, H doubles). */
#define RNN_SCRATCH 24

/* A matrix operand: element (b, c) is at data + b * rs + c * cs. */
typedef struct rnn_mat {
  char *data;
  nrt_dtype dt;
  int64_t rs, cs;
} rnn_mat;

/* Operands by role. Forward: IG, HG, STATE (cx or hx), BI, BH in; HY, CY,
 * WS out. Backward: GHY, GCY, CX, CY_IN, WS_IN in; GG (LSTM grad_gates or
 * GRU grad_input_gates), GHG (GRU grad_hidden_gates), GSTATE (grad_cx or
 * grad_hx) out. Absent operands have data NULL. */
enum {
  R_IG, R_HG, R_STATE, R_BI, R_BH, R_HY, R_CY, R_WS,
  R_GHY, R_GCY, R_CX, R_CY_IN, R_WS_IN, R_GG, R_GHG, R_GSTATE,
  R_COUNT
};

typedef struct rnn_job {
  nrt_op op;
  int64_t B, H;
  rnn_mat m[R_COUNT];
  atomic_int failed;
} rnn_job;

#define RNN_INLINE static inline __attribute__((always_inline))

/* ---- row math (float32, vectorisable) -------------------------------------- */

/* LSTM forward over one row. ig, hg, bi, bh: 4H; cx, hy, cy: H; ws: 4H.
 * The gate sum is (ig + bi) + (hg + bh), the order in which the unfused
 * cell adds two biased linear layers. */
RNN_INLINE void lstm_fwd_row(float *restrict ws, float *restrict hy, float *restrict cy,
                             const float *ig, const float *hg, const float *bi, const float *bh,
                             const float *cx, int64_t H) {
  for (int64_t k = 0; k < 4 * H; k++) ws[k] = (ig[k] + bi[k]) + (hg[k] + bh[k]);
  float *wi = ws, *wf = ws + H, *wg = ws + 2 * H, *wo = ws + 3 * H;
  for (int64_t j = 0; j < H; j++) {
    float i = nrt_vsigmoidf(wi[j]), f = nrt_vsigmoidf(wf[j]);
    float g = nrt_vtanhf(wg[j]), o = nrt_vsigmoidf(wo[j]);
    float c = f * cx[j] + i * g;
    cy[j] = c;
    hy[j] = o * nrt_vtanhf(c);
    wi[j] = i;
    wf[j] = f;
    wg[j] = g;
    wo[j] = o;
  }
}

/* LSTM backward over one row (an absent ghy or gcy is a row of zeros, so
 * that the loop has no branch and vectorises). With
 * t = tanh(cy): dc = ghy * o * (1 - t^2) + gcy, then each gate's
 * gradient times its activation's derivative (s(1 - s) for sigmoid,
 * 1 - g^2 for tanh). */
RNN_INLINE void lstm_bwd_row(float *restrict gg, float *restrict gcx, const float *ghy, const float *gcy,
                             const float *cx, const float *cy, const float *ws, int64_t H) {
  const float *wi = ws, *wf = ws + H, *wg = ws + 2 * H, *wo = ws + 3 * H;
  for (int64_t j = 0; j < H; j++) {
    float gh = ghy[j], gc_out = gcy[j];
    float i = wi[j], f = wf[j], g = wg[j], o = wo[j];
    float t = nrt_vtanhf(cy[j]);
    float dc = gh * o * (1.0f - t * t) + gc_out;
    gg[j] = dc * g * i * (1.0f - i);
    gg[H + j] = dc * cx[j] * f * (1.0f - f);
    gg[2 * H + j] = dc * i * (1.0f - g * g);
    gg[3 * H + j] = gh * t * o * (1.0f - o);
    gcx[j] = dc * f;
  }
}

/* GRU forward over one row. ig, hg, bi, bh: 3H; hx, hy: H; ws: 5H. */
RNN_INLINE void gru_fwd_row(float *restrict ws, float *restrict hy, const float *ig, const float *hg,
                            const float *bi, const float *bh, const float *hx, int64_t H) {
  float *wr = ws, *wz = ws + H, *wn = ws + 2 * H, *wh = ws + 3 * H, *whn = ws + 4 * H;
  for (int64_t j = 0; j < H; j++) {
    float r = nrt_vsigmoidf((ig[j] + bi[j]) + (hg[j] + bh[j]));
    float z = nrt_vsigmoidf((ig[H + j] + bi[H + j]) + (hg[H + j] + bh[H + j]));
    float hn = hg[2 * H + j] + bh[2 * H + j];
    float n = nrt_vtanhf((ig[2 * H + j] + bi[2 * H + j]) + r * hn);
    hy[j] = n + z * (hx[j] - n);
    wr[j] = r;
    wz[j] = z;
    wn[j] = n;
    wh[j] = hx[j];
    whn[j] = hn;
  }
}

/* GRU backward over one row. go, ghx: H; ws: 5H; gi, gh: 3H. */
RNN_INLINE void gru_bwd_row(float *restrict gi, float *restrict gh, float *restrict ghx, const float *go,
                            const float *ws, int64_t H) {
  const float *wr = ws, *wz = ws + H, *wn = ws + 2 * H, *wh = ws + 3 * H, *whn = ws + 4 * H;
  for (int64_t j = 0; j < H; j++) {
    float g = go[j], r = wr[j], z = wz[j], n = wn[j];
    float dz = g * (wh[j] - n) * (1.0f - z) * z;
    float dn = g * (1.0f - z) * (1.0f - n * n);
    float dr = dn * whn[j] * (1.0f - r) * r;
    gi[j] = gh[j] = dr;
    gi[H + j] = gh[H + j] = dz;
    gi[2 * H + j] = dn;
    gh[2 * H + j] = dn * r;
    ghx[j] = g * z;
  }
}

/* The row functions built for each ISA level. */
typedef struct rnn_rows {
  void (*lstm_fwd)(float *, float *, float *, const float *, const float *, const float *, const float *,
                   const float *, int64_t);
  void (*lstm_bwd)(float *, float *, const float *, const float *, const float *, const float *, const float *,
                   int64_t);
  void (*gru_fwd)(float *, float *, const float *, const float *, const float *, const float *, const float *,
                  int64_t);
  void (*gru_bwd)(float *, float *, float *, const float *, const float *, int64_t);
} rnn_rows;

#define RNN_ROWS(suffix, target)                                                                          \
  target static void lstm_fwd_##suffix(float *ws, float *hy, float *cy, const float *ig, const float *hg,  \
                                       const float *bi, const float *bh, const float *cx, int64_t H) {     \
    lstm_fwd_row(ws, hy, cy, ig, hg, bi, bh, cx, H);                                                       \
  }                                                                                                        \
  target static void lstm_bwd_##suffix(float *gg, float *gcx, const float *ghy, const float *gcy,          \
                                       const float *cx, const float *cy, const float *ws, int64_t H) {     \
    lstm_bwd_row(gg, gcx, ghy, gcy, cx, cy, ws, H);                                                        \
  }                                                                                                        \
  target static void gru_fwd_##suffix(float *ws, float *hy, const float *ig, const float *hg,              \
                                      const float *bi, const float *bh, const float *hx, int64_t H) {      \
    gru_fwd_row(ws, hy, ig, hg, bi, bh, hx, H);                                                            \
  }                                                                                                        \
  target static void gru_bwd_##suffix(float *gi, float *gh, float *ghx, const float *go, const float *ws,  \
                                      int64_t H) {                                                         \
    gru_bwd_row(gi, gh, ghx, go, ws, H);                                                                   \
  }                                                                                                        \
  static const rnn_rows rows_##suffix = {lstm_fwd_##suffix, lstm_bwd_##suffix, gru_fwd_##suffix,           \
                                         gru_bwd_##suffix};

RNN_ROWS(base, )
RNN_ROWS(avx2, NRT_TARGET_AVX2)
RNN_ROWS(avx512, NRT_TARGET_AVX512)

static const rnn_rows *pick_rows(void) {
  nrt_isa isa = nrt_kernels_isa();
  if (isa >= NRT_ISA_AVX512) return &rows_avx512;
  if (isa >= NRT_ISA_AVX2) return &rows_avx2;
  return &rows_base;
}

/* ---- row loads and stores ---------------------------------------------------- */

/* Row b of m as n float32 values: in place when it already is unit-stride
 * float32, otherwise converted into buf. NULL for an absent operand. */
static const float *row_in(const rnn_mat *m, int64_t b, int64_t n, float *buf) {
  if (!m->data) return NULL;
  const char *p = m->data + b * m->rs;
  if (m->dt == NRT_FLOAT32 && m->cs == 4) return (const float *)p;
  nrt_load_f32(buf, p, m->cs, m->dt, n);
  return buf;
}

/* Where a row of output m is computed: the row itself when it is
 * unit-stride float32 (row_out_done then has nothing to do), else buf. */
static float *row_out(const rnn_mat *m, int64_t b, float *buf) {
  if (m->dt == NRT_FLOAT32 && m->cs == 4) return (float *)(m->data + b * m->rs);
  return buf;
}

static void row_out_done(const rnn_mat *m, int64_t b, int64_t n, const float *v) {
  char *p = m->data + b * m->rs;
  if ((const char *)v != p) nrt_store_f32(p, m->cs, m->dt, v, n);
}

/* A bias vector (row stride ignored), or zeros when absent. */
static void bias_in(const rnn_mat *m, int64_t n, float *buf) {
  if (m->data) nrt_load_f32(buf, m->data, m->cs, m->dt, n);
  else memset(buf, 0, (size_t)n * sizeof(float));
}

/* Copies row b of src (n elements) into row b of dst from column c0
 * through double, which keeps float64 values exact. buf: n doubles. */
static void copy_exact(const rnn_mat *dst, int64_t b, int64_t c0, const rnn_mat *src, int64_t n, double *buf) {
  nrt_load_f64(buf, src->data + b * src->rs, src->cs, src->dt, n);
  nrt_store_f64(dst->data + b * dst->rs + c0 * dst->cs, dst->cs, dst->dt, buf, n);
}

/* ---- the fast path ------------------------------------------------------------ */

static void rnn_range(void *ctx, int64_t begin, int64_t end) {
  rnn_job *J = ctx;
  const rnn_mat *m = J->m;
  int64_t H = J->H;
  const rnn_rows *rows = pick_rows();
  float *s = malloc((size_t)RNN_SCRATCH * (size_t)H * sizeof(float));
  if (!s) {
    atomic_store(&J->failed, 1);
    return;
  }
  switch ((int)J->op) {
  case NRT_OP(LSTM_CELL): {
    float *bi = s, *bh = s + 4 * H, *b_ig = s + 8 * H, *b_hg = s + 12 * H, *b_ws = s + 16 * H,
          *b_cx = s + 20 * H, *b_hy = s + 21 * H, *b_cy = s + 22 * H;
    bias_in(&m[R_BI], 4 * H, bi);
    bias_in(&m[R_BH], 4 * H, bh);
    for (int64_t b = begin; b < end; b++) {
      const float *ig = row_in(&m[R_IG], b, 4 * H, b_ig), *hg = row_in(&m[R_HG], b, 4 * H, b_hg);
      const float *cx = row_in(&m[R_STATE], b, H, b_cx);
      float *ws = row_out(&m[R_WS], b, b_ws), *hy = row_out(&m[R_HY], b, b_hy), *cy = row_out(&m[R_CY], b, b_cy);
      rows->lstm_fwd(ws, hy, cy, ig, hg, bi, bh, cx, H);
      row_out_done(&m[R_HY], b, H, hy);
      row_out_done(&m[R_CY], b, H, cy);
      row_out_done(&m[R_WS], b, 4 * H, ws);
    }
    break;
  }
  case NRT_OP(LSTM_CELL_BACKWARD): {
    float *b_ghy = s, *b_gcy = s + H, *b_cx = s + 2 * H, *b_cy = s + 3 * H, *b_ws = s + 4 * H,
          *b_gg = s + 8 * H, *b_gcx = s + 12 * H;
    if (!m[R_GHY].data) memset(b_ghy, 0, (size_t)H * sizeof(float));
    if (!m[R_GCY].data) memset(b_gcy, 0, (size_t)H * sizeof(float));
    for (int64_t b = begin; b < end; b++) {
      const float *ghy = m[R_GHY].data ? row_in(&m[R_GHY], b, H, b_ghy) : b_ghy;
      const float *gcy = m[R_GCY].data ? row_in(&m[R_GCY], b, H, b_gcy) : b_gcy;
      const float *cx = row_in(&m[R_CX], b, H, b_cx), *cy = row_in(&m[R_CY_IN], b, H, b_cy);
      const float *ws = row_in(&m[R_WS_IN], b, 4 * H, b_ws);
      float *gg = row_out(&m[R_GG], b, b_gg), *gcx = row_out(&m[R_GSTATE], b, b_gcx);
      rows->lstm_bwd(gg, gcx, ghy, gcy, cx, cy, ws, H);
      row_out_done(&m[R_GG], b, 4 * H, gg);
      row_out_done(&m[R_GSTATE], b, H, gcx);
    }
    break;
  }
  case NRT_OP(GRU_CELL): {
    float *bi = s, *bh = s + 3 * H, *b_ig = s + 6 * H, *b_hg = s + 9 * H, *b_ws = s + 12 * H,
          *b_hx = s + 17 * H, *b_hy = s + 18 * H;
    bias_in(&m[R_BI], 3 * H, bi);
    bias_in(&m[R_BH], 3 * H, bh);
    for (int64_t b = begin; b < end; b++) {
      const float *ig = row_in(&m[R_IG], b, 3 * H, b_ig), *hg = row_in(&m[R_HG], b, 3 * H, b_hg);
      const float *hx = row_in(&m[R_STATE], b, H, b_hx);
      float *ws = row_out(&m[R_WS], b, b_ws), *hy = row_out(&m[R_HY], b, b_hy);
      rows->gru_fwd(ws, hy, ig, hg, bi, bh, hx, H);
      row_out_done(&m[R_HY], b, H, hy);
      row_out_done(&m[R_WS], b, 5 * H, ws);
      if (m[R_WS].dt == NRT_FLOAT64) /* the saved hx stays exact, as ATen saves it */
        copy_exact(&m[R_WS], b, 3 * H, &m[R_STATE], H, (double *)(s + 20 * H));
    }
    break;
  }
  default: { /* GRU_CELL_BACKWARD */
    float *b_go = s, *b_ws = s + H, *b_gi = s + 6 * H, *b_gh = s + 9 * H, *b_ghx = s + 12 * H;
    for (int64_t b = begin; b < end; b++) {
      const float *go = row_in(&m[R_GHY], b, H, b_go), *ws = row_in(&m[R_WS_IN], b, 5 * H, b_ws);
      float *gi = row_out(&m[R_GG], b, b_gi), *gh = row_out(&m[R_GHG], b, b_gh);
      float *ghx = row_out(&m[R_GSTATE], b, b_ghx);
      rows->gru_bwd(gi, gh, ghx, go, ws, H);
      row_out_done(&m[R_GG], b, 3 * H, gi);
      row_out_done(&m[R_GHG], b, 3 * H, gh);
      row_out_done(&m[R_GSTATE], b, H, ghx);
    }
    break;
  }
  }
  free(s);
}

/* ---- the reference path ------------------------------------------------------ */

static float ref_get(const rnn_mat *m, int64_t b, int64_t c) {
  if (!m->data) return 0.0f;
  return (float)nrt_ref_load_f64(m->data + b * m->rs + c * m->cs, m->dt);
}

/* A bias element: row stride ignored, zero when absent. */
static float ref_bias(const rnn_mat *m, int64_t c) { return ref_get(m, 0, c); }

static void ref_put(const rnn_mat *m, int64_t b, int64_t c, float v) {
  nrt_ref_store_f64(m->data + b * m->rs + c * m->cs, m->dt, (double)v);
}

static float ref_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

static void rnn_reference(const rnn_job *J) {
  const rnn_mat *m = J->m;
  int64_t H = J->H;
  for (int64_t b = 0; b < J->B; b++)
    for (int64_t j = 0; j < H; j++) {
      switch ((int)J->op) {
      case NRT_OP(LSTM_CELL): {
        float a[4];
        for (int k = 0; k < 4; k++) {
          int64_t c = k * H + j;
          a[k] = (ref_get(&m[R_IG], b, c) + ref_bias(&m[R_BI], c)) + (ref_get(&m[R_HG], b, c) + ref_bias(&m[R_BH], c));
        }
        float i = ref_sigmoid(a[0]), f = ref_sigmoid(a[1]), g = tanhf(a[2]), o = ref_sigmoid(a[3]);
        float cy = f * ref_get(&m[R_STATE], b, j) + i * g;
        ref_put(&m[R_CY], b, j, cy);
        ref_put(&m[R_HY], b, j, o * tanhf(cy));
        ref_put(&m[R_WS], b, j, i);
        ref_put(&m[R_WS], b, H + j, f);
        ref_put(&m[R_WS], b, 2 * H + j, g);
        ref_put(&m[R_WS], b, 3 * H + j, o);
        break;
      }
      case NRT_OP(LSTM_CELL_BACKWARD): {
        float gh = ref_get(&m[R_GHY], b, j), gc_out = ref_get(&m[R_GCY], b, j);
        float i = ref_get(&m[R_WS_IN], b, j), f = ref_get(&m[R_WS_IN], b, H + j);
        float g = ref_get(&m[R_WS_IN], b, 2 * H + j), o = ref_get(&m[R_WS_IN], b, 3 * H + j);
        float t = tanhf(ref_get(&m[R_CY_IN], b, j));
        float dc = gh * o * (1.0f - t * t) + gc_out;
        ref_put(&m[R_GG], b, j, dc * g * i * (1.0f - i));
        ref_put(&m[R_GG], b, H + j, dc * ref_get(&m[R_CX], b, j) * f * (1.0f - f));
        ref_put(&m[R_GG], b, 2 * H + j, dc * i * (1.0f - g * g));
        ref_put(&m[R_GG], b, 3 * H + j, gh * t * o * (1.0f - o));
        ref_put(&m[R_GSTATE], b, j, dc * f);
        break;
      }
      case NRT_OP(GRU_CELL): {
        float a[3], hgate[3];
        for (int k = 0; k < 3; k++) {
          int64_t c = k * H + j;
          a[k] = ref_get(&m[R_IG], b, c) + ref_bias(&m[R_BI], c);
          hgate[k] = ref_get(&m[R_HG], b, c) + ref_bias(&m[R_BH], c);
        }
        float hx = ref_get(&m[R_STATE], b, j);
        float r = ref_sigmoid(a[0] + hgate[0]), z = ref_sigmoid(a[1] + hgate[1]);
        float n = tanhf(a[2] + r * hgate[2]);
        ref_put(&m[R_HY], b, j, n + z * (hx - n));
        ref_put(&m[R_WS], b, j, r);
        ref_put(&m[R_WS], b, H + j, z);
        ref_put(&m[R_WS], b, 2 * H + j, n);
        nrt_ref_store_f64(m[R_WS].data + b * m[R_WS].rs + (3 * H + j) * m[R_WS].cs, m[R_WS].dt,
                          nrt_ref_load_f64(m[R_STATE].data + b * m[R_STATE].rs + j * m[R_STATE].cs, m[R_STATE].dt));
        ref_put(&m[R_WS], b, 4 * H + j, hgate[2]);
        break;
      }
      default: { /* GRU_CELL_BACKWARD */
        float g = ref_get(&m[R_GHY], b, j);
        float r = ref_get(&m[R_WS_IN], b, j), z = ref_get(&m[R_WS_IN], b, H + j);
        float n = ref_get(&m[R_WS_IN], b, 2 * H + j), hx = ref_get(&m[R_WS_IN], b, 3 * H + j);
        float hn = ref_get(&m[R_WS_IN], b, 4 * H + j);
        float dz = g * (hx - n) * (1.0f - z) * z;
        float dn = g * (1.0f - z) * (1.0f - n * n);
        float dr = dn * hn * (1.0f - r) * r;
        ref_put(&m[R_GG], b, j, dr);
        ref_put(&m[R_GG], b, H + j, dz);
        ref_put(&m[R_GG], b, 2 * H + j, dn);
        ref_put(&m[R_GHG], b, j, dr);
        ref_put(&m[R_GHG], b, H + j, dz);
        ref_put(&m[R_GHG], b, 2 * H + j, dn * r);
        ref_put(&m[R_GSTATE], b, j, g * z);
        break;
      }
      }
    }
}

/* ---- decoding ------------------------------------------------------------------ */

static void set_mat(rnn_mat *dst, const nrt_operand *o) {
  dst->data = o->data;
  dst->dt = o->dtype;
  dst->rs = o->strides[0];
  dst->cs = o->strides[1];
}

/* Maps the launch's operands to their roles; checks counts and dtypes. */
static nrt_status decode(const nrt_launch *l, rnn_job *J) {
  const char *name = nrt_op_name(l->op);
  int want_out, nin = l->ninputs;
  /* roles of the outputs, then of the inputs, in launch order */
  int roles[NRT_MAX_OPERANDS];
  switch ((int)l->op) {
  case NRT_OP(LSTM_CELL):
  case NRT_OP(GRU_CELL): {
    bool lstm = l->op == NRT_OP(LSTM_CELL);
    want_out = lstm ? 3 : 2;
    if (nin != 3 && nin != 5)
      return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                             "%s: expected 3 inputs (no biases) or 5 (both biases), got %d", name, nin);
    int k = 0;
    roles[k++] = R_HY;
    if (lstm) roles[k++] = R_CY;
    roles[k++] = R_WS;
    roles[k++] = R_IG;
    roles[k++] = R_HG;
    roles[k++] = R_STATE;
    roles[k++] = R_BI;
    roles[k++] = R_BH;
    break;
  }
  case NRT_OP(LSTM_CELL_BACKWARD): {
    want_out = 2;
    int64_t which = l->params[0];
    if (which < 1 || which > 3)
      return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                             "%s: p0 = %lld, expected 1 (grad_hy), 2 (grad_cy) or 3 (both)", name,
                             (long long)which);
    int expect = 3 + (int)(which & 1) + (int)((which >> 1) & 1);
    if (nin != expect)
      return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: p0 = %lld needs %d inputs, got %d", name,
                             (long long)which, expect, nin);
    int k = 0;
    roles[k++] = R_GG;
    roles[k++] = R_GSTATE;
    if (which & 1) roles[k++] = R_GHY;
    if (which & 2) roles[k++] = R_GCY;
    roles[k++] = R_CX;
    roles[k++] = R_CY_IN;
    roles[k++] = R_WS_IN;
    break;
  }
  case NRT_OP(GRU_CELL_BACKWARD):
    want_out = 3;
    roles[0] = R_GG;
    roles[1] = R_GHG;
    roles[2] = R_GSTATE;
    roles[3] = R_GHY;
    roles[4] = R_WS_IN;
    break;
  default:
    return nrt_kernel_fail(NRT_ERROR_UNSUPPORTED, "kernel %s: not an rnn op", name);
  }
  if (l->noutputs != want_out)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expected %d outputs, got %d", name, want_out,
                           l->noutputs);
  if (l->ndim != 2)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: sizes are {batch, hidden}, got ndim %d", name,
                           l->ndim);
  memset(J, 0, sizeof *J);
  J->op = l->op;
  J->B = l->sizes[0];
  J->H = l->sizes[1];
  for (int i = 0; i < l->noutputs + nin; i++) {
    nrt_dtype dt = l->operands[i].dtype;
    if (!nrt_dtype_is_floating(dt) || nrt_dtype_is_complex(dt))
      return nrt_kernel_fail(NRT_ERROR_UNSUPPORTED, "%s: operand %d has dtype %s; the cells compute real floats only",
                             name, i, nrt_dtype_name(dt));
    set_mat(&J->m[roles[i]], &l->operands[i]);
  }
  return NRT_SUCCESS;
}

nrt_status nrt_rnn_execute(const nrt_launch *l) {
  rnn_job J;
  nrt_status st = decode(l, &J);
  if (st != NRT_SUCCESS) return st;
  if (J.B == 0 || J.H == 0) return NRT_SUCCESS;
  if (J.H > INT64_MAX / (RNN_SCRATCH * (int64_t)sizeof(float)))
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: hidden size %lld is too large", nrt_op_name(l->op),
                           (long long)J.H);
  if (nrt_kernels_reference()) {
    rnn_reference(&J);
    return NRT_SUCCESS;
  }
  atomic_init(&J.failed, 0);
  int64_t per_row = 5 * J.H; /* gate values a row touches, roughly */
  int64_t grain = per_row >= RNN_GRAIN ? 1 : RNN_GRAIN / per_row;
  nrt_parallel_for(J.B, grain, rnn_range, &J);
  if (atomic_load(&J.failed))
    return nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for a row scratch of hidden size %lld",
                           nrt_op_name(l->op), (long long)J.H);
  return NRT_SUCCESS;
}
