/* Channel normalisation kernels (NRT_KIND_NORM): batch norm
 * (training with batch statistics and running-stat update, eval with the
 * running statistics, backward) and group norm (forward, backward), over
 * activations viewed as [N, C, S] with strides {n, c, s}.
 *
 * The formulas are ATen's CPU ones:
 *   batch norm    mean, biased var over (N, S) per channel; invstd =
 *                 1/sqrt(var + eps); y = fma(x, a, fma(-mean, a, bias))
 *                 with a = invstd * w, or ((x - mean) * invstd) * w + bias
 *                 where the CPU takes its strided kernel; running = (1 -
 *                 m) * running + m * stat with the unbiased variance; the
 *                 order and types of each step are those of the ATen
 *                 kernel the CPU runs (see "batch norm forward" below);
 *   its backward  sum_dy, dot = sum (x - mean) dy; training: dx = (dy -
 *                 sum_dy/M - (x - mean) dot invstd^2 / M) invstd w; eval:
 *                 dx = dy invstd w; dw = dot invstd, db = sum_dy;
 *   group norm    mean, biased var per (n, group); rstd = 1/sqrt(max(var,
 *                 0) + eps); y = x * rstd w + (bias - mean rstd w);
 *   its backward  ds = sum dy x, db = sum dy per (n, c); c2 = (db_g mean
 *                 - ds_g) rstd^3 / M, c3 = -c2 mean - db_g rstd / M; dx =
 *                 rstd w dy + c2 x + c3; dw = sum_n (ds - db mean) rstd,
 *                 dbias = sum_n db.
 * Batch norm forward statistics follow the CPU's kernel; the others
 * accumulate in double (blocks of float32 partial sums on the fast path);
 * the normalisation itself runs in float32.
 *
 * Work split: batch norm forward by groups of 4 channels (their planes
 * summed side by side, then normalised), or with channels-last statistics
 * by (CPU thread chunk, channel block), normalising by rows; backward by
 * channel, or for channels-innermost activations by fixed chunks of (n, s)
 * rows whose per-channel partial sums are combined in chunk order; group
 * norm by (n, group) row. The reference path is plain double loops. */
#pragma GCC optimize("O3,no-trapping-math,no-math-errno")
#include <stdlib.h>
#include "kernels/norm/norm.h"
#include "nrt/ops/norm.h"

#define BLK 1024

typedef struct cn_geom {
  int64_t N, C, S, G, Cg; /* batch norm: G = C, Cg = 1 */
  bool has_w, has_b;
} cn_geom;

/* A channel's normalisation y = fma(x, a, bb), or the strided formula
 * from mean, invstd, w, b (see "batch norm forward" below). */
typedef struct bn_coef {
  float a, bb, mean, invstd, w, b;
} bn_coef;

/* Which of ATen's CPU kernels a batch norm forward follows (p1, p2, p3). */
typedef struct bn_mode {
  bool strided;  /* its TensorIterator formula */
  nrt_dtype r16; /* the 16-bit dtype the CPU keeps the statistics in, else float32 */
  int stats;     /* NRT_BN_STATS_* */
  int64_t threads;
} bn_mode;

typedef struct cn_job {
  const nrt_launch *l;
  cn_geom g;
  const nrt_operand *out[5], *in[5];
  int nout, nin;
  double *ds, *db; /* group norm backward: per (n, c) sums */
  bn_mode mode;     /* batch norm forward */
  bn_coef *coef;    /* batch norm forward: per channel, when normalised after the statistics */
  _Atomic int failed;
} cn_job;

static inline char *seg(const nrt_operand *o, int64_t n, int64_t c) {
  return (char *)o->data + n * o->strides[0] + c * o->strides[1];
}

static float vload(const nrt_operand *o, int64_t i) {
  float v;
  nrt_load_f32(&v, (const char *)o->data + i * o->strides[0], 0, o->dtype, 1);
  return v;
}

static void vstore(const nrt_operand *o, int64_t i, double v) {
  float f = (float)v;
  nrt_store_f32((char *)o->data + i * o->strides[0], 0, o->dtype, &f, 1);
}

/* Vector of a [N, G]-shaped statistic (group norm mean / rstd). */
static inline char *stat2(const nrt_operand *o, int64_t n, int64_t g) {
  return (char *)o->data + n * o->strides[0] + g * o->strides[1];
}

/* ---- block sums ----------------------------------------------------------- */

static double sum_f(const float *x, int64_t n) {
  float acc[16] = {0};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; j++) acc[j] += x[i + j];
  double s = 0.0;
  for (; i < n; i++) s += x[i];
  for (int j = 0; j < 16; j++) s += acc[j];
  return s;
}

static double sumsq_dev_f(const float *x, float m, int64_t n) {
  float acc[16] = {0};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; j++) {
      float d = x[i + j] - m;
      acc[j] += d * d;
    }
  double s = 0.0;
  for (; i < n; i++) s += (double)(x[i] - m) * (x[i] - m);
  for (int j = 0; j < 16; j++) s += acc[j];
  return s;
}

static double dot_f(const float *x, const float *y, int64_t n) {
  float acc[16] = {0};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; j++) acc[j] += x[i + j] * y[i + j];
  double s = 0.0;
  for (; i < n; i++) s += (double)x[i] * y[i];
  for (int j = 0; j < 16; j++) s += acc[j];
  return s;
}

/* Segment (n, c) of operand o in blocks: load (store = false) or store. */
#define FOR_BLOCKS(S, b0, bn) for (int64_t b0 = 0, bn = 0; b0 < (S) && ((bn = ((S) - b0 < BLK ? (S) - b0 : BLK)), 1); b0 += BLK)

static void seg_load(const nrt_operand *o, int64_t n, int64_t c, int64_t b0, int64_t bn, float *buf) {
  nrt_load_f32(buf, seg(o, n, c) + b0 * o->strides[2], o->strides[2], o->dtype, bn);
}
static void seg_store(const nrt_operand *o, int64_t n, int64_t c, int64_t b0, int64_t bn, const float *buf) {
  nrt_store_f32(seg(o, n, c) + b0 * o->strides[2], o->strides[2], o->dtype, buf, bn);
}

/* Over the blocks of segment (n, c) of x, in order: *s += the block's sum
 * of x, or with dev of (x - *dev)^2. */
static void seg_sums(const nrt_operand *x, int64_t n, int64_t c, int64_t S, const float *dev, double *s, float *buf) {
  FOR_BLOCKS(S, b0, bn) {
    seg_load(x, n, c, b0, bn, buf);
    *s += dev ? sumsq_dev_f(buf, *dev, bn) : sum_f(buf, bn);
  }
}

/* ---- batch norm forward: ATen's CPU arithmetic --------------------------------
 * The glue says which of ATen's CPU kernels the CPU runs for the same
 * tensors (p2 NRT_BN_STATS_*, p3 its thread count, p1 NRT_BN_STRIDED /
 * NRT_BN_ROUND16), and the statistics and the normalisation follow that
 * kernel's formulas in its order: at the float limits (a sum of +-3.4e38
 * that overflows or cancels, an infinite weight) the rounding, inf and NaN
 * then come out as the CPU's, not merely as close to float64.
 *   PLANES  (contiguous NCHW, S > 1; ROWS with N*S <= threads): per
 *           channel a sequential double sum of x over (n, s), mean =
 *           (float)(sum / count); var_sum = the sequential double sum of
 *           the float (x - mean)^2 (squared in double for ROWS), rounded
 *           to float;
 *   ROWS    (channels-last, or S == 1): the N*S rows (n, s) split in
 *           `threads` chunks of ceil(rows / threads); per chunk and channel
 *           a float sum (the variance's as fma(d, d, acc): ATen's vectorised
 *           acc + d * d is contracted), the chunks added in double;
 *   STRIDED (any other input): at::mean's mean (here the PLANES sum);
 *           var_sum in double of ((double)x - mean)^2.
 * invstd = 1/sqrt(var + eps) in double (0 when both are 0), var =
 * var_sum / count in float for PLANES/ROWS (ATen keeps var_sum in float).
 * y: ATen's contiguous kernels fold it as fma(x, a, fma(-mean, a, b)),
 * a = invstd * w (2e38 * 2 - 3e38 gives 1e38, an infinite w gives NaN);
 * its TensorIterator kernel (a strided input, weight, bias or running
 * stat) computes ((x - mean) * invstd) * w + b rounding each step, in the
 * 16-bit dtype when the parameters are 16-bit too. */

#define KCH 4    /* channels summed side by side: independent add chains */
#define SBLK 256 /* their block length */
#define RCB 512  /* channels per rows task */

static inline float round_to(float v, nrt_dtype d) {
  if (d == NRT_BFLOAT16) return nrt_k_bf16_to_f32(nrt_k_f32_to_bf16(v));
  if (d == NRT_FLOAT16) return nrt_k_f16_to_f32(nrt_k_f32_to_f16(v));
  return v;
}

static bn_mode bn_mode_of(const nrt_launch *l) {
  bn_mode m = {.strided = (l->params[1] & NRT_BN_STRIDED) != 0, .r16 = NRT_FLOAT32, .stats = (int)l->params[2],
               .threads = l->params[3] > 0 ? l->params[3] : 1};
  if ((l->params[1] & NRT_BN_ROUND16) && (l->compute_dtype == NRT_BFLOAT16 || l->compute_dtype == NRT_FLOAT16))
    m.r16 = l->compute_dtype;
  return m;
}

/* Training: the saved statistics are rounded to the 16-bit dtype the CPU
 * keeps them in; eval folds the running stats' float invstd directly. */
static bn_coef bn_coef_of(const bn_mode *m, bool train, float mean, float invstd, float w, float b) {
  nrt_dtype r = train ? m->r16 : NRT_FLOAT32;
  bn_coef f = {.mean = round_to(mean, r), .invstd = round_to(invstd, r), .w = w, .b = b};
  f.a = f.invstd * w;
  f.bb = fmaf(-f.mean, f.a, b);
  return f;
}

/* The eval invstd: 1/sqrt(running_var + eps) in float (the strided
 * kernel's tensor ops round each step to a 16-bit dtype). */
static float bn_eval_invstd(const bn_mode *m, float rv, double eps) {
  if (m->strided && m->r16 != NRT_FLOAT32)
    return round_to(1.0f / round_to(sqrtf(round_to(rv + (float)eps, m->r16)), m->r16), m->r16);
  return 1.0f / sqrtf(rv + (float)eps);
}

/* v[i] = fma(v[i], a, bb): baseline (fmaf is a library call there) and a
 * build with FMA, picked by the ISA. */
static void fold_base(float *v, int64_t n, const float *a, const float *bb, int64_t as) {
  for (int64_t i = 0; i < n; i++) v[i] = fmaf(v[i], a[i * as], bb[i * as]);
}
NRT_TARGET_AVX2 static void fold_fma1(float *v, int64_t n, float a, float bb) {
  for (int64_t i = 0; i < n; i++) v[i] = __builtin_fmaf(v[i], a, bb);
}
static bool have_fma(void) { return nrt_kernels_isa() >= NRT_ISA_AVX2; }

/* The TensorIterator kernel's formula over n values of one channel. */
static void strided_apply(float *v, int64_t n, const bn_coef *f, nrt_dtype r16) {
  if (r16 == NRT_FLOAT32) {
    for (int64_t i = 0; i < n; i++) v[i] = ((v[i] - f->mean) * f->invstd) * f->w + f->b;
  } else {
    for (int64_t i = 0; i < n; i++) {
      float t = round_to(round_to(v[i] - f->mean, r16) * f->invstd, r16);
      v[i] = round_to(t * f->w, r16) + f->b;
    }
  }
}

static void coef_apply(float *v, int64_t n, const bn_coef *f, const bn_mode *m) {
  if (m->strided) strided_apply(v, n, f, m->r16);
  else if (have_fma()) fold_fma1(v, n, f->a, f->bb);
  else fold_base(v, n, &f->a, &f->bb, 0);
}

/* Segment (n, c) of y = the normalisation of that of x, a block at a time. */
static void seg_apply(const nrt_operand *x, const nrt_operand *y, int64_t n, int64_t c, int64_t S,
                      const bn_coef *f, const bn_mode *m, float *buf) {
  FOR_BLOCKS(S, b0, bn) {
    seg_load(x, n, c, b0, bn, buf);
    coef_apply(buf, bn, f, m);
    seg_store(y, n, c, b0, bn, buf);
  }
}

/* PLANES order for channels c0 .. c0+kc-1 (kc <= KCH), side by side:
 * kind 0 sums x, kind 1 the float (x - mean)^2, kind 2 the double
 * ((double)x - mean)^2, kind 4 the float (x - mean)^2 summed in float (a
 * strided 16-bit input), kind 3 the float x - mean squared in double (ATen's
 * channels-last kernel with no more rows than threads: its compiler widens
 * the float product into a double fma); each channel's order is (n, s). */
static void planes_sums(const nrt_operand *x, const cn_geom *g, int64_t c0, int kc, int kind, const float *mean,
                        double *out) {
  float buf[KCH][SBLK];
  double acc[KCH] = {0};
  float mf[KCH] = {0}, facc[KCH] = {0};
  memset(buf, 0, sizeof buf);
  for (int k = 0; k < kc; k++) mf[k] = mean ? mean[k] : 0.0f;
  for (int64_t n = 0; n < g->N; n++)
    for (int64_t b0 = 0; b0 < g->S; b0 += SBLK) {
      int64_t bn = g->S - b0 < SBLK ? g->S - b0 : SBLK;
      for (int k = 0; k < kc; k++) seg_load(x, n, c0 + k, b0, bn, buf[k]);
      if (kind == 0) {
        for (int64_t i = 0; i < bn; i++)
          for (int k = 0; k < KCH; k++) acc[k] += buf[k][i];
      } else if (kind == 1) {
        for (int64_t i = 0; i < bn; i++)
          for (int k = 0; k < KCH; k++) {
            float d = buf[k][i] - mf[k];
            acc[k] += d * d;
          }
      } else if (kind == 2) {
        for (int64_t i = 0; i < bn; i++)
          for (int k = 0; k < KCH; k++) {
            double d = (double)buf[k][i] - mf[k];
            acc[k] += d * d;
          }
      } else if (kind == 3) {
        for (int64_t i = 0; i < bn; i++)
          for (int k = 0; k < KCH; k++) {
            double d = buf[k][i] - mf[k];
            acc[k] += d * d;
          }
      } else {
        for (int64_t i = 0; i < bn; i++)
          for (int k = 0; k < KCH; k++) {
            float d = buf[k][i] - mf[k];
            facc[k] = facc[k] + d * d;
          }
      }
    }
  for (int k = 0; k < kc; k++) out[k] = kind == 4 ? facc[k] : acc[k];
}

/* ATen's 16-bit contiguous statistics (its collect_stats_contiguous
 * kernel), channel c: per image, each 16-bit vector of 2L values adds its
 * first L then its last L values into L float lanes; the image's remaining
 * values add into a float scalar; after all images the lanes are summed in
 * order from lane 0 (vec_reduce_all with a size) and added to that scalar.
 * L = 8: batch norm has no AVX-512 kernel (REGISTER_DISPATCH leaves the
 * AVX512 slot empty, so the AVX2 one runs; 24 of 24 crafted bfloat16
 * channels agree with 8 lanes, 13-18 with 16). dev: the lanes' terms
 * are fma(d, d, acc), d = x - *dev, as the CPU's compiler contracts acc +
 * d * d; the scalar tail's are not (float32 parameters, images of fewer
 * than 16 values: the saved invstd was an ulp off fused). */
#define BN_LANES 8
static float lanes16_sum(const nrt_operand *x, const cn_geom *g, int64_t c, const float *dev, float *buf) {
  const int L = BN_LANES;
  float lane[BN_LANES] = {0}, tail = 0.0f;
  int64_t main_end = g->S - g->S % (2 * L);
  for (int64_t n = 0; n < g->N; n++)
    FOR_BLOCKS(g->S, b0, bn) {
      seg_load(x, n, c, b0, bn, buf);
      for (int64_t i = 0; i < bn; i++) {
        float v = buf[i];
        int64_t d = b0 + i;
        if (dev) {
          float e = v - *dev;
          if (d < main_end) lane[d % L] = lane[d % L] + e * e;
          else tail = tail + e * e; /* the scalar tail is not contracted (probes) */
        } else if (d < main_end) {
          lane[d % L] += v;
        } else {
          tail += v;
        }
      }
    }
  float all = lane[0];
  for (int k = 1; k < L; k++) all += lane[k];
  return tail + all;
}

/* Channel c's saved statistics and running-stat update from its mean and
 * var_sum, in ATen's arithmetic for the stats mode; returns invstd. */
/* mean_stat: the mean as the CPU's statistics tensor holds it (bfloat16
 * rounded), for the running mean; the saved float32 mean stays unrounded,
 * as the backward is closer to float64 with it. */
static float bn_save(cn_job *j, const bn_mode *m, int64_t c, float mean, float mean_stat, double var_sum) {
  const cn_geom *g = &j->g;
  double count = (double)(g->N * g->S), eps = j->l->scalars[0].f, mom = j->l->scalars[1].f;
  bool contig = m->stats != NRT_BN_STATS_STRIDED;
  double var, unbiased;
  if (contig) {
    /* ATen's var_sum tensor is float (bfloat16 when the statistics are) */
    float vs = m->r16 == NRT_BFLOAT16 ? round_to((float)var_sum, NRT_BFLOAT16) : (float)var_sum;
    if (m->r16 == NRT_BFLOAT16) {
      var = round_to(vs / round_to((float)count, NRT_BFLOAT16), NRT_BFLOAT16);
      unbiased = round_to(vs / round_to((float)(count - 1), NRT_BFLOAT16), NRT_BFLOAT16);
    } else {
      var = vs / (float)count;
      unbiased = vs / (float)(count - 1);
    }
  } else {
    var = var_sum / count;
    unbiased = var_sum / (count - 1);
  }
  float invstd = (float)(var == 0.0 && eps == 0.0 ? 0.0 : 1.0 / sqrt(var + eps));
  vstore(j->out[1], c, mean);
  vstore(j->out[2], c, invstd);
  if (j->nout == 5) {
    float rm = vload(j->out[3], c), rv = vload(j->out[4], c);
    if (contig && m->r16 == NRT_BFLOAT16) {
      /* bfloat16 statistics: momentum is a bfloat16, and BFloat16 operators
       * round each product and sum to bfloat16, except the unbiased
       * variance's product, which ATen holds in a float (bf16 * float is
       * float) */
      float mb = round_to((float)mom, NRT_BFLOAT16), ob = round_to(1.0f - mb, NRT_BFLOAT16);
      float um = round_to(mb * mean_stat, NRT_BFLOAT16), ur = round_to(ob * rm, NRT_BFLOAT16);
      vstore(j->out[3], c, round_to(um + ur, NRT_BFLOAT16));
      vstore(j->out[4], c, mb * (float)unbiased + round_to(ob * rv, NRT_BFLOAT16));
    } else if (contig) {
      float mf = (float)mom, om = 1.0f - mf, t = mf * mean, u = om * rm;
      vstore(j->out[3], c, t + u);
      vstore(j->out[4], c, (double)mf * (double)(float)unbiased + (double)(om * rv));
    } else {
      vstore(j->out[3], c, mom * (double)mean + (1.0 - mom) * rm);
      vstore(j->out[4], c, mom * unbiased + (1.0 - mom) * rv);
    }
  }
  return invstd;
}

/* ---- batch norm (fast) -------------------------------------------------------- */

/* Training, PLANES / STRIDED stats (and ROWS with few rows): units of KCH
 * channels; stats, then the normalisation while the planes are cached. */
static void bn_train_planes(void *ctx, int64_t begin, int64_t end) {
  cn_job *j = ctx;
  const cn_geom *g = &j->g;
  const nrt_launch *l = j->l;
  bn_mode m = bn_mode_of(l);
  const nrt_operand *x = j->in[0], *y = j->out[0];
  const nrt_operand *w = g->has_w ? j->in[1] : NULL, *b = g->has_b ? j->in[g->has_w ? 2 : 1] : NULL;
  double count = (double)(g->N * g->S);
  float buf[BLK];
  /* 16-bit contiguous planes: the CPU sums in float vector lanes */
  bool lanes16 = m.stats == NRT_BN_STATS_PLANES && (l->compute_dtype == NRT_BFLOAT16 || l->compute_dtype == NRT_FLOAT16);
  for (int64_t u = begin; u < end; u++) {
    int64_t c0 = u * KCH;
    int kc = (int)(g->C - c0 < KCH ? g->C - c0 : KCH);
    double s[KCH], ss[KCH];
    float mean[KCH];
    if (lanes16) {
      for (int k = 0; k < kc; k++) {
        mean[k] = lanes16_sum(x, g, c0 + k, NULL, buf) / (float)count;
        ss[k] = lanes16_sum(x, g, c0 + k, &mean[k], buf);
      }
    } else {
      if (l->params[0] == 1) { /* training, p0 = 1: save_mean holds the CPU's at::mean (glue) */
        for (int k = 0; k < kc; k++) mean[k] = vload(j->out[1], c0 + k);
      } else {
        planes_sums(x, g, c0, kc, 0, NULL, s);
        for (int k = 0; k < kc; k++) mean[k] = (float)(s[k] / count);
      }
      /* 16-bit statistics of a strided input: the CPU's at::mean is a
       * 16-bit tensor, and its variance loop subtracts that rounded mean,
       * summing in float (8314-89297: two nearly equal values) */
      bool strided16 = m.stats == NRT_BN_STATS_STRIDED && m.r16 != NRT_FLOAT32;
      if (strided16)
        for (int k = 0; k < kc; k++) mean[k] = round_to(mean[k], m.r16);
      planes_sums(x, g, c0, kc,
                  strided16 ? 4 : m.stats == NRT_BN_STATS_STRIDED ? 2 : m.stats == NRT_BN_STATS_ROWS ? 3 : 1, mean,
                  ss);
    }
    for (int k = 0; k < kc; k++) {
      int64_t c = c0 + k;
      /* the running mean takes the mean in the statistics' dtype (bfloat16;
       * float16 statistics match the CPU's in float) */
      float invstd = bn_save(j, &m, c, mean[k], round_to(mean[k], m.r16 == NRT_BFLOAT16 ? NRT_BFLOAT16 : NRT_FLOAT32),
                             ss[k]);
      bn_coef f = bn_coef_of(&m, true, mean[k], invstd, w ? vload(w, c) : 1.0f, b ? vload(b, c) : 0.0f);
      for (int64_t n = 0; n < g->N; n++) seg_apply(x, y, n, c, g->S, &f, &m, buf);
    }
  }
}

/* ---- batch norm: ROWS statistics, and the normalisation by rows ------------------- */

typedef struct rows_job {
  cn_job *j;
  int pass;                          /* 0: sum x; 1: fma(d, d, acc), d = x - mean */
  int64_t chunk_rows, blocks;        /* ATen's per-thread chunks; RCB-channel blocks */
  float *part;                       /* [chunks][C] */
  const float *mean;
} rows_job;

static inline char *row_ptr(const nrt_operand *o, const cn_geom *g, int64_t r) {
  int64_t n = r / g->S, s = r - n * g->S;
  return (char *)o->data + n * o->strides[0] + s * o->strides[2];
}

/* A row's channels c0 .. c0+cn-1 as float32: read in place when the
 * operand is float32 with adjacent channels (at C = 64 a copy per row cost
 * as much as the sums themselves), else converted into buf. */
static inline const float *row_f32(const nrt_operand *o, const cn_geom *g, int64_t r, int64_t c0, int64_t cn,
                                   float *buf) {
  const char *p = row_ptr(o, g, r) + c0 * o->strides[1];
  if (o->dtype == NRT_FLOAT32 && o->strides[1] == (int64_t)sizeof(float)) return (const float *)p;
  nrt_load_f32(buf, p, o->strides[1], o->dtype, cn);
  return buf;
}

/* Rows r0 .. r1-1 of channels c0 .. c0+cn-1 into acc, one float chain per
 * channel in row order (pass 0: acc += x; pass 1: fma(d, d, acc), d = x -
 * mean). The channels are independent, so every vector width gives the
 * same sums; it is instantiated per ISA below. */
static inline __attribute__((always_inline)) void rows_sum_body(float *restrict acc, const nrt_operand *x,
                                                               const cn_geom *g, int pass, const float *mean,
                                                               int64_t r0, int64_t r1, int64_t c0, int64_t cn,
                                                               float *buf) {
  for (int64_t r = r0; r < r1; r++) {
    const float *restrict xr = row_f32(x, g, r, c0, cn, buf);
    if (pass == 0) {
      for (int64_t c = 0; c < cn; c++) acc[c] += xr[c];
    } else {
      for (int64_t c = 0; c < cn; c++) {
        float d = xr[c] - mean[c];
        acc[c] = __builtin_fmaf(d, d, acc[c]);
      }
    }
  }
}
/* Plain build: fmaf is the library's correctly rounded fma, the same value. */
static void rows_sum_base(float *acc, const nrt_operand *x, const cn_geom *g, int pass, const float *mean,
                          int64_t r0, int64_t r1, int64_t c0, int64_t cn, float *buf) {
  rows_sum_body(acc, x, g, pass, mean, r0, r1, c0, cn, buf);
}
NRT_TARGET_AVX2 static void rows_sum_avx2(float *acc, const nrt_operand *x, const cn_geom *g, int pass,
                                          const float *mean, int64_t r0, int64_t r1, int64_t c0, int64_t cn,
                                          float *buf) {
  rows_sum_body(acc, x, g, pass, mean, r0, r1, c0, cn, buf);
}
NRT_TARGET_AVX512 static void rows_sum_avx512(float *acc, const nrt_operand *x, const cn_geom *g, int pass,
                                              const float *mean, int64_t r0, int64_t r1, int64_t c0, int64_t cn,
                                              float *buf) {
  rows_sum_body(acc, x, g, pass, mean, r0, r1, c0, cn, buf);
}

/* Units (chunk t, channel block): a float sum per channel over the chunk's
 * rows in order. */
static void rows_range(void *ctx, int64_t begin, int64_t end) {
  rows_job *rj = ctx;
  cn_job *j = rj->j;
  const cn_geom *g = &j->g;
  const nrt_operand *x = j->in[0];
  int64_t R = g->N * g->S;
  nrt_isa isa = nrt_kernels_isa();
  float bx[RCB], acc[RCB];
  for (int64_t u = begin; u < end; u++) {
    int64_t t = u / rj->blocks, c0 = (u % rj->blocks) * RCB, cn = g->C - c0 < RCB ? g->C - c0 : RCB;
    const float *mean = rj->pass ? rj->mean + c0 : NULL;
    for (int64_t c = 0; c < cn; c++) acc[c] = 0.0f;
    int64_t r0 = t * rj->chunk_rows, r1 = r0 + rj->chunk_rows < R ? r0 + rj->chunk_rows : R;
    if (isa >= NRT_ISA_AVX512) rows_sum_avx512(acc, x, g, rj->pass, mean, r0, r1, c0, cn, bx);
    else if (isa >= NRT_ISA_AVX2) rows_sum_avx2(acc, x, g, rj->pass, mean, r0, r1, c0, cn, bx);
    else rows_sum_base(acc, x, g, rj->pass, mean, r0, r1, c0, cn, bx);
    memcpy(rj->part + t * g->C + c0, acc, sizeof(float) * (size_t)cn);
  }
}

/* Chunk partials added in chunk order: in double for float32 (ATen's
 * accumulate type), in float for a 16-bit input (its opmath type). */
static void rows_combine(const rows_job *rj, int64_t chunks, int64_t C, bool in_float, double *out) {
  for (int64_t c = 0; c < C; c++) {
    double s = 0.0;
    float sf = 0.0f;
    for (int64_t t = 0; t < chunks; t++) {
      s += rj->part[t * C + c];
      sf += rj->part[t * C + c];
    }
    out[c] = in_float ? sf : s;
  }
}

static nrt_status bn_train_rows(cn_job *j) {
  const cn_geom *g = &j->g;
  const bn_mode *m = &j->mode;
  const nrt_operand *w = g->has_w ? j->in[1] : NULL, *b = g->has_b ? j->in[g->has_w ? 2 : 1] : NULL;
  int64_t C = g->C, R = g->N * g->S, T = m->threads;
  rows_job rj = {.j = j, .chunk_rows = (R + T - 1) / T, .blocks = (C + RCB - 1) / RCB};
  rj.part = malloc(sizeof(float) * (size_t)(T * C));
  float *mean = malloc(sizeof(float) * (size_t)(2 * C)), *mean_raw = mean + C;
  double *sums = malloc(sizeof(double) * (size_t)C);
  if (!rj.part || !mean || !sums) {
    free(rj.part);
    free(mean);
    free(sums);
    return NRT_ERROR_OUT_OF_MEMORY;
  }
  bool in_float = j->l->compute_dtype != NRT_FLOAT32 && j->l->compute_dtype != NRT_FLOAT64;
  nrt_parallel_for(T * rj.blocks, 1, rows_range, &rj);
  rows_combine(&rj, T, C, in_float, sums);
  /* the 16-bit kernel keeps the mean in the statistics' dtype, and its
   * variance pass subtracts that rounded mean */
  for (int64_t c = 0; c < C; c++) {
    mean_raw[c] = in_float ? (float)sums[c] / (float)R : (float)(sums[c] / (double)R);
    mean[c] = round_to(mean_raw[c], m->r16 == NRT_BFLOAT16 ? NRT_BFLOAT16 : NRT_FLOAT32);
  }
  rj.pass = 1;
  rj.mean = mean;
  nrt_parallel_for(T * rj.blocks, 1, rows_range, &rj);
  rows_combine(&rj, T, C, in_float, sums);
  for (int64_t c = 0; c < C; c++) {
    float invstd = bn_save(j, m, c, mean_raw[c], mean[c], sums[c]);
    j->coef[c] = bn_coef_of(m, true, mean[c], invstd, w ? vload(w, c) : 1.0f, b ? vload(b, c) : 0.0f);
  }
  free(rj.part);
  free(mean);
  free(sums);
  return NRT_SUCCESS;
}

/* Units (channel, image) segments, normalised with j->coef. */
static void bn_apply_segments(void *ctx, int64_t begin, int64_t end) {
  cn_job *j = ctx;
  const cn_geom *g = &j->g;
  float buf[BLK];
  for (int64_t u = begin; u < end; u++) {
    int64_t c = u / g->N, n = u % g->N;
    seg_apply(j->in[0], j->out[0], n, c, g->S, &j->coef[c], &j->mode, buf);
  }
}

#define CL_CHUNKS 64

/* Rows r0 .. r1-1 of y = fma(x, a, bb) per channel, read and written in
 * place where x / y are float32 (else through buf); instantiated per ISA. */
static inline __attribute__((always_inline)) void fold_rows_body(const nrt_operand *x, const nrt_operand *y,
                                                                const cn_geom *g, const float *a, const float *bb,
                                                                int64_t r0, int64_t r1, float *buf) {
  const int64_t C = g->C;
  bool y_direct = y->dtype == NRT_FLOAT32 && y->strides[1] == (int64_t)sizeof(float);
  for (int64_t r = r0; r < r1; r++) {
    const float *xr = row_f32(x, g, r, 0, C, buf);
    float *yr = y_direct ? (float *)row_ptr(y, g, r) : buf;
    for (int64_t c = 0; c < C; c++) yr[c] = __builtin_fmaf(xr[c], a[c], bb[c]);
    if (!y_direct) nrt_store_f32(row_ptr(y, g, r), y->strides[1], y->dtype, buf, C);
  }
}
static void fold_rows_base(const nrt_operand *x, const nrt_operand *y, const cn_geom *g, const float *a,
                           const float *bb, int64_t r0, int64_t r1, float *buf) {
  fold_rows_body(x, y, g, a, bb, r0, r1, buf);
}
NRT_TARGET_AVX2 static void fold_rows_avx2(const nrt_operand *x, const nrt_operand *y, const cn_geom *g,
                                           const float *a, const float *bb, int64_t r0, int64_t r1, float *buf) {
  fold_rows_body(x, y, g, a, bb, r0, r1, buf);
}
NRT_TARGET_AVX512 static void fold_rows_avx512(const nrt_operand *x, const nrt_operand *y, const cn_geom *g,
                                               const float *a, const float *bb, int64_t r0, int64_t r1, float *buf) {
  fold_rows_body(x, y, g, a, bb, r0, r1, buf);
}

/* Units are fixed chunks of rows (channels innermost), normalised whole. */
static void bn_apply_rows(void *ctx, int64_t begin, int64_t end) {
  cn_job *j = ctx;
  const cn_geom *g = &j->g;
  const int64_t C = g->C, R = g->N * g->S;
  const nrt_operand *x = j->in[0], *y = j->out[0];
  float *bx = malloc(sizeof(float) * (size_t)(3 * C + 1)), *a = bx + C, *bb = a + C;
  if (!bx) {
    j->failed = 1;
    return;
  }
  for (int64_t c = 0; c < C; c++) {
    a[c] = j->coef[c].a;
    bb[c] = j->coef[c].bb;
  }
  nrt_isa isa = nrt_kernels_isa();
  for (int64_t chunk = begin; chunk < end; chunk++) {
    int64_t r0 = chunk * R / CL_CHUNKS, r1 = (chunk + 1) * R / CL_CHUNKS;
    if (j->mode.strided) {
      for (int64_t r = r0; r < r1; r++) {
        nrt_load_f32(bx, row_ptr(x, g, r), x->strides[1], x->dtype, C);
        for (int64_t c = 0; c < C; c++) strided_apply(&bx[c], 1, &j->coef[c], j->mode.r16);
        nrt_store_f32(row_ptr(y, g, r), y->strides[1], y->dtype, bx, C);
      }
    } else if (isa >= NRT_ISA_AVX512) {
      fold_rows_avx512(x, y, g, a, bb, r0, r1, bx);
    } else if (isa >= NRT_ISA_AVX2) {
      fold_rows_avx2(x, y, g, a, bb, r0, r1, bx);
    } else {
      fold_rows_base(x, y, g, a, bb, r0, r1, bx);
    }
  }
  free(bx);
}

static bool channels_inner(const nrt_operand *o) {
  return o->strides[1] == (int64_t)nrt_dtype_size(o->dtype);
}

/* y from x with j->coef: by rows when the channels are innermost, else by segments. */
static void bn_apply_all(cn_job *j) {
  const cn_geom *g = &j->g;
  int64_t R = g->N * g->S;
  if (g->C > 1 && R >= CL_CHUNKS && channels_inner(j->in[0]) && channels_inner(j->out[0]))
    nrt_parallel_for(CL_CHUNKS, 1, bn_apply_rows, j);
  else if (g->N > 0)
    nrt_parallel_for(g->C * g->N, g->S >= 8192 ? 1 : 8192 / (g->S + 1) + 1, bn_apply_segments, j);
}

/* Backward outputs by mask: index of grad_x / grad_w / grad_b in out[], or -1. */
static void mask_slots(int64_t mask, int slot[3]) {
  int k = 0;
  for (int i = 0; i < 3; i++) slot[i] = (mask >> i) & 1 ? k++ : -1;
}

/* dx = (fma(-(x - mean), k, dy - grad_mean) * invstd) * w over a block, in
 * place of dy: plain (fmaf is a library call there) and with FMA. */
static inline __attribute__((always_inline)) void bn_dx_fused_body(float *by, const float *bx, int64_t n, float mean,
                                                                  float k, float gm, float is, float wv) {
  for (int64_t i = 0; i < n; i++) by[i] = (__builtin_fmaf(-(bx[i] - mean), k, by[i] - gm) * is) * wv;
}
static void bn_dx_fused_base(float *by, const float *bx, int64_t n, float mean, float k, float gm, float is, float wv) {
  bn_dx_fused_body(by, bx, n, mean, k, gm, is, wv);
}
NRT_TARGET_AVX2 static void bn_dx_fused_fma(float *by, const float *bx, int64_t n, float mean, float k, float gm,
                                            float is, float wv) {
  bn_dx_fused_body(by, bx, n, mean, k, gm, is, wv);
}

static void bn_backward_channels(void *ctx, int64_t begin, int64_t end) {
  cn_job *j = ctx;
  const cn_geom *g = &j->g;
  const nrt_launch *l = j->l;
  const nrt_operand *gy = j->in[0], *x = j->in[1], *w = g->has_w ? j->in[4] : NULL;
  int slot[3];
  mask_slots(l->params[0], slot);
  bool train = l->params[2] != 0;
  double count = (double)(g->N * g->S), eps = l->scalars[0].f;
  float bx[BLK], by[BLK];
  /* a whole plane of dy and x - mean: the CPU's contiguous kernel sums
   * each image's plane in float (vec::reduce_all / map2_reduce_all: 8
   * lanes, then across them) and adds those sums in double */
  float *pd = malloc(sizeof(float) * (size_t)(2 * g->S + 2)), *pe = pd + g->S;
  if (!pd) {
    j->failed = 1;
    return;
  }
  for (int64_t c = begin; c < end; c++) {
    float mean = vload(j->in[2], c);
    double invstd = train ? vload(j->in[3], c) : 1.0 / sqrt((double)vload(j->in[3], c) + eps);
    double sdy = 0.0, dot = 0.0;
    for (int64_t n = 0; n < g->N; n++) {
      /* float32 planes are read in place */
      const float *dyp = pd, *xp = pe;
      if (gy->dtype == NRT_FLOAT32 && gy->strides[2] == 4) dyp = (const float *)seg(gy, n, c);
      else seg_load(gy, n, c, 0, g->S, pd);
      if (x->dtype == NRT_FLOAT32 && x->strides[2] == 4) xp = (const float *)seg(x, n, c);
      else seg_load(x, n, c, 0, g->S, pe);
      for (int64_t i = 0; i < g->S; i++) pe[i] = xp[i] - mean;
      float ds, db;
      nrt_norm_row_dot_sums(dyp, pe, g->S, &ds, &db);
      sdy += db;
      dot += ds;
    }
    if (slot[1] >= 0) vstore(j->out[slot[1]], c, dot * invstd);
    if (slot[2] >= 0) vstore(j->out[slot[2]], c, sdy);
    if (slot[0] < 0) continue;
    const nrt_operand *gx = j->out[slot[0]];
    float wv = w ? vload(w, c) : 1.0f, is = (float)invstd;
    if (train) {
      /* (t * invstd) * w as the CPU: invstd * w alone can overflow */
      /* k in float from the float dot product, grad_mean rounded from the
       * double quotient: the CPU's contiguous kernel (a weight near 1e38
       * multiplies any difference; fuzz 8311-33050) */
      float k = (float)dot * is * is / (float)count, gm = (float)(sdy / count);
      bool fused = !(l->params[1] & (NRT_BN_STRIDED | NRT_BN_BWD_ROWS));
      for (int64_t n = 0; n < g->N; n++) FOR_BLOCKS(g->S, b0, bn) {
          seg_load(gy, n, c, b0, bn, by);
          seg_load(x, n, c, b0, bn, bx);
          if (fused && have_fma()) /* the contiguous kernel's vector code contracts it (fuzz 8311-33050) */
            bn_dx_fused_fma(by, bx, bn, mean, k, gm, is, wv);
          else if (fused)
            bn_dx_fused_base(by, bx, bn, mean, k, gm, is, wv);
          else
            for (int64_t i = 0; i < bn; i++) by[i] = ((by[i] - gm - (bx[i] - mean) * k) * is) * wv;
          seg_store(gx, n, c, b0, bn, by);
        }
    } else {
      for (int64_t n = 0; n < g->N; n++) FOR_BLOCKS(g->S, b0, bn) {
          seg_load(gy, n, c, b0, bn, by);
          for (int64_t i = 0; i < bn; i++) by[i] = (by[i] * is) * wv;
          seg_store(gx, n, c, b0, bn, by);
        }
    }
  }
  free(pd);
}

/* ---- batch norm backward, channels innermost (channels-last) ----------------------
 * With the channels contiguous, a per-channel sweep would touch every cache
 * line once per channel; instead rows of C channels (one per (n, s)) are
 * processed whole: per-channel partial sums per chunk of rows (fixed
 * chunks, so results do not depend on the thread count), combined in chunk
 * order, then a pass over the rows computes grad_x. */

typedef struct cl_job {
  cn_job *j;
  int phase;       /* 3: backward sums, 4: grad_x */
  double *part;    /* [CL_CHUNKS][2][C] */
  float *mean, *a, *b, *k, *gm; /* per channel */
  int64_t rows;
} cl_job;

static void cl_range(void *ctx, int64_t begin, int64_t end) {
  cl_job *cj = ctx;
  cn_job *j = cj->j;
  const cn_geom *g = &j->g;
  const int64_t C = g->C;
  float *bx = malloc(sizeof(float) * (size_t)(2 * C + 1)), *by = bx + C;
  if (!bx) {
    j->failed = 1;
    return;
  }
  const nrt_launch *l = j->l;
  bool bwd = l->op == NRT_OP(BATCH_NORM_BACKWARD);
  const nrt_operand *x = bwd ? j->in[1] : j->in[0];
  for (int64_t chunk = begin; chunk < end; chunk++) {
    int64_t r0 = chunk * cj->rows / CL_CHUNKS, r1 = (chunk + 1) * cj->rows / CL_CHUNKS;
    double *p0 = cj->part + chunk * 2 * C, *p1 = p0 + C;
    if (cj->phase == 3)
      for (int64_t c = 0; c < C; c++) p0[c] = p1[c] = 0.0;
    for (int64_t r = r0; r < r1; r++) {
      nrt_load_f32(bx, row_ptr(x, g, r), x->strides[1], x->dtype, C);
      switch (cj->phase) {
      case 3: {
        const nrt_operand *gy = j->in[0];
        nrt_load_f32(by, row_ptr(gy, g, r), gy->strides[1], gy->dtype, C);
        for (int64_t c = 0; c < C; c++) {
          p0[c] += by[c];
          p1[c] += (bx[c] - cj->mean[c]) * by[c];
        }
        break;
      }
      default: { /* 4: grad_x */
        const nrt_operand *gy = j->in[0];
        int slot[3];
        mask_slots(l->params[0], slot);
        const nrt_operand *gx = j->out[slot[0]];
        nrt_load_f32(by, row_ptr(gy, g, r), gy->strides[1], gy->dtype, C);
        if (l->params[2])
          for (int64_t c = 0; c < C; c++)
            by[c] = ((by[c] - cj->gm[c] - (bx[c] - cj->mean[c]) * cj->k[c]) * cj->a[c]) * cj->b[c];
        else
          for (int64_t c = 0; c < C; c++) by[c] = (by[c] * cj->a[c]) * cj->b[c];
        nrt_store_f32(row_ptr(gx, g, r), gx->strides[1], gx->dtype, by, C);
        break;
      }
      }
    }
  }
  free(bx);
}

/* Sums chunk partials [chunk][which][C] in chunk order. */
static void cl_combine(const cl_job *cj, int which, int64_t C, double *out) {
  for (int64_t c = 0; c < C; c++) out[c] = 0.0;
  for (int64_t k = 0; k < CL_CHUNKS; k++)
    for (int64_t c = 0; c < C; c++) out[c] += cj->part[(k * 2 + which) * C + c];
}


static nrt_status bn_backward_channels_last(cn_job *j) {
  const cn_geom *g = &j->g;
  const nrt_launch *l = j->l;
  const int64_t C = g->C;
  cl_job cj = {.j = j, .rows = g->N * g->S};
  cj.part = malloc(sizeof(double) * (size_t)(CL_CHUNKS * 2 * C + 2 * C));
  float *vecs = malloc(sizeof(float) * (size_t)(5 * C));
  if (!cj.part || !vecs) {
    free(cj.part);
    free(vecs);
    return NRT_ERROR_OUT_OF_MEMORY;
  }
  double *s0 = cj.part + CL_CHUNKS * 2 * C, *s1 = s0 + C;
  cj.mean = vecs;
  cj.a = vecs + C;
  cj.b = vecs + 2 * C;
  cj.k = vecs + 3 * C;
  cj.gm = vecs + 4 * C;
  double count = (double)(g->N * g->S), eps = l->scalars[0].f;
  {
    const nrt_operand *w = g->has_w ? j->in[4] : NULL;
    bool train = l->params[2] != 0;
    int slot[3];
    mask_slots(l->params[0], slot);
    for (int64_t c = 0; c < C; c++) cj.mean[c] = vload(j->in[2], c);
    cj.phase = 3;
    nrt_parallel_for(CL_CHUNKS, 1, cl_range, &cj);
    cl_combine(&cj, 0, C, s0);
    cl_combine(&cj, 1, C, s1);
    for (int64_t c = 0; c < C; c++) {
      double invstd = train ? vload(j->in[3], c) : 1.0 / sqrt((double)vload(j->in[3], c) + eps);
      if (slot[1] >= 0) vstore(j->out[slot[1]], c, (float)s1[c] * (float)invstd);
      if (slot[2] >= 0) vstore(j->out[slot[2]], c, s0[c]);
      /* dx = (t * invstd) * w, the CPU's order: invstd * w alone can
       * overflow (3.4e38 weights) where the product through t does not */
      cj.a[c] = (float)invstd;
      cj.b[c] = w ? vload(w, c) : 1.0f;
      /* the CPU's channels-last kernel keeps the combined sums in float and
       * derives k and grad_mean from them in float */
      cj.k[c] = (float)s1[c] * cj.a[c] * cj.a[c] / (float)count;
      cj.gm[c] = (float)s0[c] / (float)count;
    }
    cj.phase = slot[0] >= 0 ? 4 : -1;
  }
  if (cj.phase >= 0) nrt_parallel_for(CL_CHUNKS, 1, cl_range, &cj);
  free(cj.part);
  free(vecs);
  return j->failed ? NRT_ERROR_OUT_OF_MEMORY : NRT_SUCCESS;
}

/* ---- batch norm backward, 16-bit: ATen's CPU kernels ---------------------------------
 * A 16-bit input whose input and gradient are contiguous in one memory
 * format runs the CPU's batch_norm_cpu_backward_{contiguous,channels_last}
 * _internal, all in float, and the glue says which (p1 NRT_BN_BWD_ROWS:
 * channels-last or one value per plane; NRT_BN_ROUND16: the CPU's saved
 * mean / invstd are 16-bit, as its forward keeps them without a float32
 * parameter; p3 its thread count). Planes: per channel 8 float lanes over
 * each image's whole 16-value vectors (a vector's first 8 values, then its
 * last 8) and one float scalar over the images' remaining values, the
 * lanes then summed from lane 0 and added to the scalar. Rows: per chunk of
 * the CPU's threads a float buffer per channel, summed over the rows in
 * order, the chunks then added from 0 in float. Then k = dotp * invstd *
 * invstd / M, grad_mean = sum / M, dx = (dy - grad_mean - (x - mean) * k)
 * * invstd * w rounded once, grad_weight = dotp * invstd, grad_bias = sum.
 * The contractions are the CPU build's (settled by probes). A constant
 * (expanded) 16-bit plane has invstd 316 there, not 316.2: its gradients,
 * summed over the expansion, then cancel as the CPU's (fuzz
 * 14142135-273746). */
/* Contractions (probes with float32 weights, where the 16-bit rounding of
 * the statistics does not hide them): the dot product's vector lanes and
 * the channels-last buffers are fused (15 of 15 / 10 of 10 shapes), the
 * contiguous kernel's scalar tail is not (the fused tail: 6 of 15); nor is
 * dy - grad_mean - (x - mean) * k (a fused one missed two channels-last
 * bfloat16 gradients). */
#define BNB_DOT(e, dy, acc) fmaf((e), (dy), (acc))
#define BNB_DOT_TAIL(e, dy, acc) ((acc) + (e) * (dy))
#define BNB_DX_FUSED 0

typedef struct bnb_chan {
  float mean, invstd, w;
} bnb_chan;

/* Channel c's mean, invstd and weight as the CPU's backward reads them. */
static bnb_chan bnb_chan_of(const cn_job *j, int64_t c) {
  const nrt_launch *l = j->l;
  const nrt_operand *w = j->g.has_w ? j->in[4] : NULL;
  bool train = l->params[2] != 0;
  nrt_dtype r = (l->params[1] & NRT_BN_ROUND16) ? l->compute_dtype : NRT_FLOAT32;
  bnb_chan ch = {.w = w ? vload(w, c) : 1.0f};
  if (train) {
    ch.mean = round_to(vload(j->in[2], c), r);
    ch.invstd = round_to(vload(j->in[3], c), r);
  } else {
    ch.mean = vload(j->in[2], c);
    ch.invstd = (float)(1.0 / sqrt((double)vload(j->in[3], c) + l->scalars[0].f));
  }
  return ch;
}

static inline float bnb_dx(float dy, float x, const bnb_chan *ch, float k, float gm, bool train) {
  if (!train) return (dy * ch->invstd) * ch->w;
  float e = x - ch->mean, t = BNB_DX_FUSED ? fmaf(-e, k, dy - gm) : (dy - gm) - e * k;
  return (t * ch->invstd) * ch->w;
}

/* Stores grad_weight / grad_bias of channel c and returns k and grad_mean. */
static void bnb_finish(const cn_job *j, int64_t c, const bnb_chan *ch, float sum, float dotp, float *k, float *gm) {
  int slot[3];
  mask_slots(j->l->params[0], slot);
  float cnt = (float)(j->g.N * j->g.S);
  *k = dotp * ch->invstd * ch->invstd / cnt;
  *gm = sum / cnt;
  if (slot[1] >= 0) vstore(j->out[slot[1]], c, dotp * ch->invstd);
  if (slot[2] >= 0) vstore(j->out[slot[2]], c, sum);
}

/* Planes: units are channels. */
static void bnb_planes16(void *ctx, int64_t begin, int64_t end) {
  cn_job *j = ctx;
  const cn_geom *g = &j->g;
  const nrt_launch *l = j->l;
  const nrt_operand *gy = j->in[0], *x = j->in[1];
  int slot[3];
  mask_slots(l->params[0], slot);
  bool train = l->params[2] != 0;
  const int64_t S = g->S, main = S - S % 16;
  float bx[BLK], by[BLK];
  for (int64_t c = begin; c < end; c++) {
    bnb_chan ch = bnb_chan_of(j, c);
    float ls[8] = {0}, ld[8] = {0}, s = 0.0f, d = 0.0f;
    for (int64_t n = 0; n < g->N; n++) FOR_BLOCKS(S, b0, bn) {
        seg_load(gy, n, c, b0, bn, by);
        seg_load(x, n, c, b0, bn, bx);
        for (int64_t i = 0; i < bn; i++) {
          float e = bx[i] - ch.mean;
          if (b0 + i < main) {
            int k = (int)((b0 + i) % 8);
            ls[k] = ls[k] + by[i];
            ld[k] = BNB_DOT(e, by[i], ld[k]);
          } else {
            s = s + by[i];
            d = BNB_DOT_TAIL(e, by[i], d);
          }
        }
      }
    float as = ls[0], ad = ld[0];
    for (int k = 1; k < 8; k++) {
      as = as + ls[k];
      ad = ad + ld[k];
    }
    s = s + as;
    d = d + ad;
    float kk, gm;
    bnb_finish(j, c, &ch, s, d, &kk, &gm);
    if (slot[0] < 0) continue;
    for (int64_t n = 0; n < g->N; n++) FOR_BLOCKS(S, b0, bn) {
        seg_load(gy, n, c, b0, bn, by);
        seg_load(x, n, c, b0, bn, bx);
        for (int64_t i = 0; i < bn; i++) by[i] = bnb_dx(by[i], bx[i], &ch, kk, gm, train);
        seg_store(j->out[slot[0]], n, c, b0, bn, by);
      }
  }
}

/* Rows: the CPU's per-thread buffers. */
typedef struct bnb_rows {
  cn_job *j;
  bnb_chan *ch;
  float *part;         /* [chunks][2][C]: sum, dotp */
  float *k, *gm;       /* per channel */
  int64_t chunk_rows, chunks, blocks;
} bnb_rows;

static void bnb_rows_sums(void *ctx, int64_t begin, int64_t end) {
  bnb_rows *b = ctx;
  cn_job *j = b->j;
  const cn_geom *g = &j->g;
  const int64_t C = g->C, R = g->N * g->S;
  float bx[RCB], by[RCB];
  for (int64_t u = begin; u < end; u++) {
    int64_t t = u / b->blocks, c0 = (u % b->blocks) * RCB, cn = C - c0 < RCB ? C - c0 : RCB;
    float *ps = b->part + t * 2 * C + c0, *pd = ps + C;
    for (int64_t c = 0; c < cn; c++) ps[c] = pd[c] = 0.0f;
    int64_t r1 = (t + 1) * b->chunk_rows < R ? (t + 1) * b->chunk_rows : R;
    for (int64_t r = t * b->chunk_rows; r < r1; r++) {
      nrt_load_f32(by, row_ptr(j->in[0], g, r) + c0 * j->in[0]->strides[1], j->in[0]->strides[1], j->in[0]->dtype, cn);
      nrt_load_f32(bx, row_ptr(j->in[1], g, r) + c0 * j->in[1]->strides[1], j->in[1]->strides[1], j->in[1]->dtype, cn);
      for (int64_t c = 0; c < cn; c++) {
        ps[c] = by[c] + ps[c];
        pd[c] = BNB_DOT(bx[c] - b->ch[c0 + c].mean, by[c], pd[c]);
      }
    }
  }
}

static void bnb_rows_dx(void *ctx, int64_t begin, int64_t end) {
  bnb_rows *b = ctx;
  cn_job *j = b->j;
  const cn_geom *g = &j->g;
  const int64_t C = g->C, R = g->N * g->S;
  int slot[3];
  mask_slots(j->l->params[0], slot);
  bool train = j->l->params[2] != 0;
  const nrt_operand *gx = j->out[slot[0]];
  float *bx = malloc(sizeof(float) * (size_t)(2 * C + 1)), *by = bx + C;
  if (!bx) {
    j->failed = 1;
    return;
  }
  for (int64_t chunk = begin; chunk < end; chunk++)
    for (int64_t r = chunk * R / CL_CHUNKS; r < (chunk + 1) * R / CL_CHUNKS; r++) {
      nrt_load_f32(by, row_ptr(j->in[0], g, r), j->in[0]->strides[1], j->in[0]->dtype, C);
      nrt_load_f32(bx, row_ptr(j->in[1], g, r), j->in[1]->strides[1], j->in[1]->dtype, C);
      for (int64_t c = 0; c < C; c++) by[c] = bnb_dx(by[c], bx[c], &b->ch[c], b->k[c], b->gm[c], train);
      nrt_store_f32(row_ptr(gx, g, r), gx->strides[1], gx->dtype, by, C);
    }
  free(bx);
}

static nrt_status bnb_rows16(cn_job *j) {
  const cn_geom *g = &j->g;
  const int64_t C = g->C, R = g->N * g->S, T = j->l->params[3] > 0 ? j->l->params[3] : 1;
  bnb_rows b = {.j = j, .blocks = (C + RCB - 1) / RCB};
  b.chunks = R > 1 ? (T < R ? T : R) : 1;
  b.chunk_rows = (R + b.chunks - 1) / b.chunks;
  b.part = malloc(sizeof(float) * (size_t)(2 * b.chunks * C + 2 * C));
  b.ch = malloc(sizeof(bnb_chan) * (size_t)C);
  if (!b.part || !b.ch) {
    free(b.part);
    free(b.ch);
    return NRT_ERROR_OUT_OF_MEMORY;
  }
  b.k = b.part + 2 * b.chunks * C;
  b.gm = b.k + C;
  for (int64_t c = 0; c < C; c++) b.ch[c] = bnb_chan_of(j, c);
  nrt_parallel_for(b.chunks * b.blocks, 1, bnb_rows_sums, &b);
  for (int64_t c = 0; c < C; c++) {
    float s = 0.0f, d = 0.0f;
    for (int64_t t = 0; t < b.chunks; t++) {
      s = s + b.part[t * 2 * C + c];
      d = d + b.part[t * 2 * C + C + c];
    }
    bnb_finish(j, c, &b.ch[c], s, d, &b.k[c], &b.gm[c]);
  }
  if (j->l->params[0] & 1) nrt_parallel_for(CL_CHUNKS, 1, bnb_rows_dx, &b);
  free(b.part);
  free(b.ch);
  return j->failed ? NRT_ERROR_OUT_OF_MEMORY : NRT_SUCCESS;
}

/* ---- group norm (fast) --------------------------------------------------------- */

/* Group norm forward where the CPU runs its contiguous kernel (p2 = 1):
 * the group's Cg * S values by RowwiseMoments (layer_norm.c's order), rstd
 * = 1 / sqrt(max(var, 0) + eps) in double (eps is a double there), then per
 * channel scale = rstd * w, bias = fma(-scale, mean, b), y = fma(scale, x,
 * bias); with neither weight nor bias y = (x - mean) * rstd. A row past
 * float32's range gives the CPU's NaN. */
static void gn_rows_contiguous(void *ctx, int64_t begin, int64_t end) {
  cn_job *j = ctx;
  const cn_geom *g = &j->g;
  const nrt_operand *x = j->in[0], *y = j->out[0];
  const nrt_operand *w = g->has_w ? j->in[1] : NULL, *b = g->has_b ? j->in[g->has_w ? 2 : 1] : NULL;
  const int64_t len = g->Cg * g->S;
  int parts = j->l->compute_dtype == NRT_BFLOAT16 || j->l->compute_dtype == NRT_FLOAT16 ? 2 : 1;
  float *buf = malloc(sizeof(float) * (size_t)(len + 1));
  if (!buf) {
    j->failed = 1;
    return;
  }
  for (int64_t r = begin; r < end; r++) {
    int64_t n = r / g->G, grp = r % g->G, c0 = grp * g->Cg;
    for (int64_t c = 0; c < g->Cg; c++) seg_load(x, n, c0 + c, 0, g->S, buf + c * g->S);
    float mf, var;
    nrt_norm_row_moments(buf, len, parts, &mf, &var);
    float rf = (float)(1.0 / sqrt((double)(var < 0.0f ? 0.0f : var) + j->l->scalars[0].f));
    if (isnan(var)) rf = var; /* std::max(NaN, 0) keeps the NaN */
    nrt_store_f32(stat2(j->out[1], n, grp), 0, j->out[1]->dtype, &mf, 1);
    nrt_store_f32(stat2(j->out[2], n, grp), 0, j->out[2]->dtype, &rf, 1);
    for (int64_t c = 0; c < g->Cg; c++) {
      float *v = buf + c * g->S;
      if (!w && !b) {
        for (int64_t i = 0; i < g->S; i++) v[i] = (v[i] - mf) * rf;
      } else {
        float sc = rf * (w ? vload(w, c0 + c) : 1.0f), bb = fmaf(-sc, mf, b ? vload(b, c0 + c) : 0.0f);
        for (int64_t i = 0; i < g->S; i++) v[i] = fmaf(sc, v[i], bb);
      }
      seg_store(y, n, c0 + c, 0, g->S, v);
    }
  }
  free(buf);
}

/* Group norm forward where the CPU runs its channels-last kernel with
 * planes of fewer than 1024 values (p2 = 2, float32): ColumnwiseMoments,
 * per (n, group) 8 float lanes (channel d of the group into lane d % 8)
 * over the plane's positions of sum x and sum x * x (not contracted), the
 * lanes reduced as vec_reduce_all (i + i^4, then i^2, then i^1); mean =
 * sum * s, var = max(fma(sumsq, s, -mean * mean), 0) with s = 1 / (D *
 * HxW) in float, rstd = 1 / sqrt(var + eps) in double; per channel scale =
 * rstd * w, bias = fma(-scale, mean, b), y = fma(x, scale, bias) (probes:
 * 7256 of 7312 values and statistics over 12 shapes; the double sums: 3386). */
static inline float cn_hsum8(const float *a) {
  float v1[8], v2[8];
  for (int k = 0; k < 8; k++) v1[k] = a[k] + a[k ^ 4];
  for (int k = 0; k < 8; k++) v2[k] = v1[k] + v1[k ^ 2];
  return v2[0] + v2[1];
}

static void gn_rows_cl(void *ctx, int64_t begin, int64_t end) {
  cn_job *j = ctx;
  const cn_geom *g = &j->g;
  const nrt_operand *x = j->in[0], *y = j->out[0];
  const nrt_operand *w = g->has_w ? j->in[1] : NULL, *b = g->has_b ? j->in[g->has_w ? 2 : 1] : NULL;
  const int64_t D = g->Cg, S = g->S;
  const float s = 1.0f / (float)(D * S);
  float *buf = malloc(sizeof(float) * (size_t)(3 * D + 1)), *sc = buf + D, *bb = sc + D;
  if (!buf) {
    j->failed = 1;
    return;
  }
  for (int64_t r = begin; r < end; r++) {
    int64_t n = r / g->G, grp = r % g->G, c0 = grp * D;
    float a0[8] = {0}, a1[8] = {0};
    for (int64_t m = 0; m < S; m++) {
      nrt_load_f32(buf, seg(x, n, c0) + m * x->strides[2], x->strides[1], x->dtype, D);
      for (int64_t d = 0; d < D; d++) {
        a0[d % 8] = a0[d % 8] + buf[d];
        a1[d % 8] = a1[d % 8] + buf[d] * buf[d];
      }
    }
    float mu = cn_hsum8(a0) * s, var = fmaf(cn_hsum8(a1), s, -(mu * mu));
    if (var < 0.0f) var = 0.0f; /* std::max(var, 0): NaN stays */
    float rf = (float)(1.0 / sqrt((double)var + j->l->scalars[0].f));
    nrt_store_f32(stat2(j->out[1], n, grp), 0, j->out[1]->dtype, &mu, 1);
    nrt_store_f32(stat2(j->out[2], n, grp), 0, j->out[2]->dtype, &rf, 1);
    for (int64_t d = 0; d < D; d++) {
      sc[d] = rf * (w ? vload(w, c0 + d) : 1.0f);
      bb[d] = fmaf(-sc[d], mu, b ? vload(b, c0 + d) : 0.0f);
    }
    for (int64_t m = 0; m < S; m++) {
      nrt_load_f32(buf, seg(x, n, c0) + m * x->strides[2], x->strides[1], x->dtype, D);
      for (int64_t d = 0; d < D; d++) buf[d] = fmaf(buf[d], sc[d], bb[d]);
      nrt_store_f32(seg(y, n, c0) + m * y->strides[2], y->strides[1], y->dtype, buf, D);
    }
  }
  free(buf);
}

static void gn_rows(void *ctx, int64_t begin, int64_t end) {
  cn_job *j = ctx;
  const cn_geom *g = &j->g;
  const nrt_operand *x = j->in[0], *y = j->out[0];
  const nrt_operand *w = g->has_w ? j->in[1] : NULL, *b = g->has_b ? j->in[g->has_w ? 2 : 1] : NULL;
  double count = (double)(g->Cg * g->S), eps = j->l->scalars[0].f;
  float buf[BLK];
  for (int64_t r = begin; r < end; r++) {
    int64_t n = r / g->G, grp = r % g->G, c0 = grp * g->Cg;
    double s = 0.0;
    for (int64_t c = c0; c < c0 + g->Cg; c++) seg_sums(x, n, c, g->S, NULL, &s, buf);
    double mean = s / count, ss = 0.0;
    float md = (float)mean;
    for (int64_t c = c0; c < c0 + g->Cg; c++) seg_sums(x, n, c, g->S, &md, &ss, buf);
    /* max(var, 0) as ATen's: a NaN variance (inf or NaN in the group) stays NaN */
    double var = ss / count, rstd = 1.0 / sqrt((var < 0.0 ? 0.0 : var) + eps);
    float mf = (float)mean, rf = (float)rstd;
    nrt_store_f32(stat2(j->out[1], n, grp), 0, j->out[1]->dtype, &mf, 1);
    nrt_store_f32(stat2(j->out[2], n, grp), 0, j->out[2]->dtype, &rf, 1);
    for (int64_t c = c0; c < c0 + g->Cg; c++) {
      /* ATen's group norm has only the x * a + bb form, non-finite weights included */
      float a = rf * (w ? vload(w, c) : 1.0f), bb = (b ? vload(b, c) : 0.0f) - mf * a;
      FOR_BLOCKS(g->S, b0, bn) {
        seg_load(x, n, c, b0, bn, buf);
        for (int64_t i = 0; i < bn; i++) buf[i] = buf[i] * a + bb;
        seg_store(y, n, c, b0, bn, buf);
      }
    }
  }
}

/* Group norm input gradient where the CPU runs its contiguous kernel (p2
 * = 1), in its float order: per channel ds = sum dy x, db = sum dy
 * (map2_reduce_all), per group the channels' w ds and w db summed in 8
 * lanes of whole vectors of channels, the lanes in order, then the
 * remaining channels; c2 = fma(db, mean, -ds) rstd^3 / M, c3 = fma(-db
 * rstd, 1 / M, -c2 mean), dx = fma(rstd w, dy, c2 x) + c3 (each fused step
 * settled by probes against the CPU build). A group of 2 nearly equal values
 * with equal gradients then cancels to 0, as on the CPU. */
static void gn_backward_rows_contiguous(void *ctx, int64_t begin, int64_t end) {
  cn_job *j = ctx;
  const cn_geom *g = &j->g;
  const nrt_launch *l = j->l;
  const nrt_operand *gy = j->in[0], *x = j->in[1], *w = g->has_w ? j->in[4] : NULL;
  int slot[3];
  mask_slots(l->params[0], slot);
  const int64_t S = g->S, Cg = g->Cg;
  float *buf = malloc(sizeof(float) * (size_t)(2 * S + 2 * Cg + 2)), *bx = buf + S, *dsc = bx + S, *dbc = dsc + Cg;
  if (!buf) {
    j->failed = 1;
    return;
  }
  float sc = 1.0f / (float)(Cg * S);
  for (int64_t r = begin; r < end; r++) {
    int64_t n = r / g->G, grp = r % g->G, c0 = grp * Cg;
    for (int64_t c = 0; c < Cg; c++) {
      seg_load(gy, n, c0 + c, 0, S, buf);
      seg_load(x, n, c0 + c, 0, S, bx);
      nrt_norm_row_dot_sums(buf, bx, S, &dsc[c], &dbc[c]);
      j->ds[n * g->C + c0 + c] = dsc[c];
      j->db[n * g->C + c0 + c] = dbc[c];
    }
    if (slot[0] < 0) continue;
    float ds_arr[8] = {0}, db_arr[8] = {0}, dsv = 0.0f, dbv = 0.0f;
    int64_t dv = Cg / 8 * 8;
    for (int64_t c = 0; c < dv; c++) {
      float wv = w ? vload(w, c0 + c) : 1.0f;
      ds_arr[c % 8] = fmaf(dsc[c], wv, ds_arr[c % 8]);
      db_arr[c % 8] = fmaf(dbc[c], wv, db_arr[c % 8]);
    }
    for (int k = 0; k < 8; k++) {
      dsv = dsv + ds_arr[k];
      dbv = dbv + db_arr[k];
    }
    for (int64_t c = dv; c < Cg; c++) {
      float wv = w ? vload(w, c0 + c) : 1.0f;
      dsv = fmaf(dsc[c], wv, dsv);
      dbv = fmaf(dbc[c], wv, dbv);
    }
    float mf, rf;
    nrt_load_f32(&mf, stat2(j->in[2], n, grp), 0, j->in[2]->dtype, 1);
    nrt_load_f32(&rf, stat2(j->in[3], n, grp), 0, j->in[3]->dtype, 1);
    float c2 = fmaf(dbv, mf, -dsv) * rf * rf * rf * sc, c3 = fmaf(-(dbv * rf), sc, -(c2 * mf));
    const nrt_operand *gx = j->out[slot[0]];
    for (int64_t c = 0; c < Cg; c++) {
      float c1 = rf * (w ? vload(w, c0 + c) : 1.0f);
      seg_load(gy, n, c0 + c, 0, S, buf);
      seg_load(x, n, c0 + c, 0, S, bx);
      for (int64_t i = 0; i < S; i++) buf[i] = fmaf(c1, buf[i], c2 * bx[i]) + c3;
      seg_store(gx, n, c0 + c, 0, S, buf);
    }
  }
  free(buf);
}

static void gn_backward_rows(void *ctx, int64_t begin, int64_t end) {
  cn_job *j = ctx;
  const cn_geom *g = &j->g;
  const nrt_launch *l = j->l;
  const nrt_operand *gy = j->in[0], *x = j->in[1], *w = g->has_w ? j->in[4] : NULL;
  int slot[3];
  mask_slots(l->params[0], slot);
  double count = (double)(g->Cg * g->S);
  float bx[BLK], by[BLK];
  for (int64_t r = begin; r < end; r++) {
    int64_t n = r / g->G, grp = r % g->G, c0 = grp * g->Cg;
    double dsg = 0.0, dbg = 0.0;
    for (int64_t c = c0; c < c0 + g->Cg; c++) {
      double ds = 0.0, db = 0.0;
      FOR_BLOCKS(g->S, b0, bn) {
        seg_load(gy, n, c, b0, bn, by);
        seg_load(x, n, c, b0, bn, bx);
        ds += dot_f(by, bx, bn);
        db += sum_f(by, bn);
      }
      j->ds[n * g->C + c] = ds;
      j->db[n * g->C + c] = db;
      double wv = w ? vload(w, c) : 1.0;
      dsg += ds * wv;
      dbg += db * wv;
    }
    if (slot[0] < 0) continue;
    float mf, rf;
    nrt_load_f32(&mf, stat2(j->in[2], n, grp), 0, j->in[2]->dtype, 1);
    nrt_load_f32(&rf, stat2(j->in[3], n, grp), 0, j->in[3]->dtype, 1);
    double mean = mf, rstd = rf;
    double c2 = (dbg * mean - dsg) * rstd * rstd * rstd / count;
    double c3 = -c2 * mean - dbg * rstd / count;
    float c2f = (float)c2, c3f = (float)c3;
    const nrt_operand *gx = j->out[slot[0]];
    for (int64_t c = c0; c < c0 + g->Cg; c++) {
      float c1 = rf * (w ? vload(w, c) : 1.0f);
      FOR_BLOCKS(g->S, b0, bn) {
        seg_load(gy, n, c, b0, bn, by);
        seg_load(x, n, c, b0, bn, bx);
        for (int64_t i = 0; i < bn; i++) by[i] = c1 * by[i] + c2f * bx[i] + c3f;
        seg_store(gx, n, c, b0, bn, by);
      }
    }
  }
}

/* grad_weight / grad_bias per channel from the per-(n, c) sums. */
static void gn_backward_params(cn_job *j) {
  const cn_geom *g = &j->g;
  int slot[3];
  mask_slots(j->l->params[0], slot);
  for (int64_t c = 0; c < g->C; c++) {
    int64_t grp = c / g->Cg;
    double dw = 0.0, dbias = 0.0;
    for (int64_t n = 0; n < g->N; n++) {
      float mf, rf;
      nrt_load_f32(&mf, stat2(j->in[2], n, grp), 0, j->in[2]->dtype, 1);
      nrt_load_f32(&rf, stat2(j->in[3], n, grp), 0, j->in[3]->dtype, 1);
      dw += (j->ds[n * g->C + c] - j->db[n * g->C + c] * mf) * rf;
      dbias += j->db[n * g->C + c];
    }
    if (slot[1] >= 0) vstore(j->out[slot[1]], c, dw);
    if (slot[2] >= 0) vstore(j->out[slot[2]], c, dbias);
  }
}

/* ---- reference ----------------------------------------------------------------- */

static double rl(const nrt_operand *o, int64_t n, int64_t c, int64_t s) {
  return (float)nrt_ref_load_f64(seg(o, n, c) + s * o->strides[2], o->dtype);
}
static void rs(const nrt_operand *o, int64_t n, int64_t c, int64_t s, double v) {
  nrt_ref_store_f64(seg(o, n, c) + s * o->strides[2], o->dtype, v);
}
static double rv(const nrt_operand *o, int64_t i) {
  return (float)nrt_ref_load_f64((const char *)o->data + i * o->strides[0], o->dtype);
}
static void rvs(const nrt_operand *o, int64_t i, double v) {
  nrt_ref_store_f64((char *)o->data + i * o->strides[0], o->dtype, v);
}
static double rl2(const nrt_operand *o, int64_t n, int64_t g) {
  return (float)nrt_ref_load_f64(stat2(o, n, g), o->dtype);
}

/* ---- batch norm backward, a strided float32 input ------------------------------
 * ATen's generic loop (batch_norm_backward_cpu_template for an input or
 * gradient that is not dense in one memory format), in its float steps:
 * dot = the double sum of the float products (x - mean) * dy in (n, s)
 * order; k = (float)dot * invstd * invstd / count and grad_mean = sum / count
 * in float; dx = ((dy - grad_mean) - (x - mean) * k) * invstd * w, each step
 * in float; grad_weight = dot * invstd in double. A huge x there keeps its
 * product finite where float lane sums overflow (fuzz 18101-863788). The
 * gradient's sum stays the double sum of the planes path (ATen's at::sum). */
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
static void bn_backward_strided(void *ctx, int64_t begin, int64_t end) {
  cn_job *j = ctx;
  const cn_geom *g = &j->g;
  const nrt_launch *l = j->l;
  const nrt_operand *gy = j->in[0], *x = j->in[1], *w = g->has_w ? j->in[4] : NULL;
  int slot[3];
  mask_slots(l->params[0], slot);
  const bool train = l->params[2] != 0;
  const float count = (float)(g->N * g->S);
  for (int64_t c = begin; c < end; c++) {
    float mean = (float)rv(j->in[2], c);
    float invstd = train ? (float)rv(j->in[3], c) : (float)(1.0 / sqrt(rv(j->in[3], c) + (double)l->scalars[0].f));
    float wv = w ? (float)rv(w, c) : 1.0f;
    double sdy = 0.0, dot = 0.0;
    for (int64_t n = 0; n < g->N; n++)
      for (int64_t s = 0; s < g->S; s++) {
        float dy = (float)rl(gy, n, c, s), d = (float)rl(x, n, c, s) - mean;
        sdy += dy;
        dot += (double)(d * dy);
      }
    if (slot[1] >= 0) rvs(j->out[slot[1]], c, dot * (double)invstd);
    if (slot[2] >= 0) rvs(j->out[slot[2]], c, (double)(float)sdy);
    if (slot[0] < 0) continue;
    float k = (float)dot * invstd * invstd / count, gm = (float)sdy / count;
    for (int64_t n = 0; n < g->N; n++)
      for (int64_t s = 0; s < g->S; s++) {
        float dy = (float)rl(gy, n, c, s), v;
        if (train) {
          float t = ((float)rl(x, n, c, s) - mean) * k;
          v = ((dy - gm) - t) * invstd * wv;
        } else {
          v = dy * invstd * wv;
        }
        rs(j->out[slot[0]], n, c, s, (double)v);
      }
  }
}

#pragma GCC pop_options

static nrt_status reference(cn_job *j) {
  const cn_geom *g = &j->g;
  const nrt_launch *l = j->l;
  double eps = l->scalars[0].f;
  int slot[3];
  mask_slots(l->params[0], slot);
  switch ((int)l->op) {
  case NRT_OP(BATCH_NORM):
  case NRT_OP(BATCH_NORM_EVAL):
  case NRT_OP(BATCH_NORM_BACKWARD): {
    bool train_fwd = l->op == NRT_OP(BATCH_NORM);
    int wi = l->op == NRT_OP(BATCH_NORM) ? 1 : l->op == NRT_OP(BATCH_NORM_EVAL) ? 3 : 4;
    const nrt_operand *w = g->has_w ? j->in[wi] : NULL, *b = g->has_b ? j->in[wi + (g->has_w ? 1 : 0)] : NULL;
    double count = (double)(g->N * g->S);
    for (int64_t c = 0; c < g->C; c++) {
      double wv = w ? rv(w, c) : 1.0, bv = b ? rv(b, c) : 0.0;
      if (l->op == NRT_OP(BATCH_NORM_BACKWARD)) {
        const nrt_operand *gy = j->in[0], *x = j->in[1];
        bool train = l->params[2] != 0;
        double mean = rv(j->in[2], c), invstd = train ? rv(j->in[3], c) : 1.0 / sqrt(rv(j->in[3], c) + eps);
        double sdy = 0.0, dot = 0.0;
        for (int64_t n = 0; n < g->N; n++)
          for (int64_t s = 0; s < g->S; s++) {
            double dy = rl(gy, n, c, s);
            sdy += dy;
            dot += (rl(x, n, c, s) - mean) * dy;
          }
        if (slot[1] >= 0) rvs(j->out[slot[1]], c, dot * invstd);
        if (slot[2] >= 0) rvs(j->out[slot[2]], c, sdy);
        if (slot[0] >= 0)
          for (int64_t n = 0; n < g->N; n++)
            for (int64_t s = 0; s < g->S; s++) {
              double dy = rl(gy, n, c, s), v;
              if (train) v = (dy - sdy / count - (rl(x, n, c, s) - mean) * dot * invstd * invstd / count) * invstd * wv;
              else v = dy * invstd * wv;
              rs(j->out[slot[0]], n, c, s, v);
            }
        continue;
      }
      const nrt_operand *x = j->in[0];
      double mean, invstd;
      if (train_fwd) {
        double s1 = 0.0, s2 = 0.0;
        for (int64_t n = 0; n < g->N; n++)
          for (int64_t s = 0; s < g->S; s++) s1 += rl(x, n, c, s);
        mean = s1 / count;
        for (int64_t n = 0; n < g->N; n++)
          for (int64_t s = 0; s < g->S; s++) s2 += (rl(x, n, c, s) - mean) * (rl(x, n, c, s) - mean);
        invstd = 1.0 / sqrt(s2 / count + eps);
        rvs(j->out[1], c, mean);
        rvs(j->out[2], c, invstd);
        if (j->nout == 5) {
          double mom = l->scalars[1].f;
          rvs(j->out[3], c, mom * mean + (1.0 - mom) * rv(j->out[3], c));
          rvs(j->out[4], c, mom * s2 / (count - 1.0) + (1.0 - mom) * rv(j->out[4], c));
        }
      } else {
        mean = rv(j->in[1], c);
        invstd = 1.0 / sqrt(rv(j->in[2], c) + eps);
      }
      for (int64_t n = 0; n < g->N; n++)
        for (int64_t s = 0; s < g->S; s++) rs(j->out[0], n, c, s, (rl(x, n, c, s) - mean) * invstd * wv + bv);
    }
    return NRT_SUCCESS;
  }
  case NRT_OP(GROUP_NORM): {
    const nrt_operand *x = j->in[0];
    const nrt_operand *w = g->has_w ? j->in[1] : NULL, *b = g->has_b ? j->in[g->has_w ? 2 : 1] : NULL;
    double count = (double)(g->Cg * g->S);
    for (int64_t n = 0; n < g->N; n++)
      for (int64_t grp = 0; grp < g->G; grp++) {
        double s1 = 0.0, s2 = 0.0;
        for (int64_t c = grp * g->Cg; c < (grp + 1) * g->Cg; c++)
          for (int64_t s = 0; s < g->S; s++) s1 += rl(x, n, c, s);
        double mean = s1 / count;
        for (int64_t c = grp * g->Cg; c < (grp + 1) * g->Cg; c++)
          for (int64_t s = 0; s < g->S; s++) s2 += (rl(x, n, c, s) - mean) * (rl(x, n, c, s) - mean);
        double rstd = 1.0 / sqrt(s2 / count + eps);
        nrt_ref_store_f64(stat2(j->out[1], n, grp), j->out[1]->dtype, mean);
        nrt_ref_store_f64(stat2(j->out[2], n, grp), j->out[2]->dtype, rstd);
        for (int64_t c = grp * g->Cg; c < (grp + 1) * g->Cg; c++) {
          double wv = w ? rv(w, c) : 1.0, bv = b ? rv(b, c) : 0.0;
          for (int64_t s = 0; s < g->S; s++) rs(j->out[0], n, c, s, (rl(x, n, c, s) - mean) * rstd * wv + bv);
        }
      }
    return NRT_SUCCESS;
  }
  default: { /* GROUP_NORM_BACKWARD */
    const nrt_operand *gy = j->in[0], *x = j->in[1], *w = g->has_w ? j->in[4] : NULL;
    double count = (double)(g->Cg * g->S);
    double *dw = calloc((size_t)g->C + 1, sizeof(double)), *dbs = calloc((size_t)g->C + 1, sizeof(double));
    if (!dw || !dbs) {
      free(dw);
      free(dbs);
      return NRT_ERROR_OUT_OF_MEMORY;
    }
    for (int64_t n = 0; n < g->N; n++)
      for (int64_t grp = 0; grp < g->G; grp++) {
        double mean = rl2(j->in[2], n, grp), rstd = rl2(j->in[3], n, grp), dsg = 0.0, dbg = 0.0;
        for (int64_t c = grp * g->Cg; c < (grp + 1) * g->Cg; c++) {
          double ds = 0.0, db = 0.0, wv = w ? rv(w, c) : 1.0;
          for (int64_t s = 0; s < g->S; s++) {
            ds += rl(gy, n, c, s) * rl(x, n, c, s);
            db += rl(gy, n, c, s);
          }
          dsg += ds * wv;
          dbg += db * wv;
          dw[c] += (ds - db * mean) * rstd;
          dbs[c] += db;
        }
        double c2 = (dbg * mean - dsg) * rstd * rstd * rstd / count, c3 = -c2 * mean - dbg * rstd / count;
        if (slot[0] >= 0)
          for (int64_t c = grp * g->Cg; c < (grp + 1) * g->Cg; c++) {
            double c1 = rstd * (w ? rv(w, c) : 1.0);
            for (int64_t s = 0; s < g->S; s++)
              rs(j->out[slot[0]], n, c, s, c1 * rl(gy, n, c, s) + c2 * rl(x, n, c, s) + c3);
          }
      }
    for (int64_t c = 0; c < g->C; c++) {
      if (slot[1] >= 0) rvs(j->out[slot[1]], c, dw[c]);
      if (slot[2] >= 0) rvs(j->out[slot[2]], c, dbs[c]);
    }
    free(dw);
    free(dbs);
    return NRT_SUCCESS;
  }
  }
}

/* ---- entry ------------------------------------------------------------------------ */

static nrt_status bad(const nrt_launch *l, const char *what) {
  return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: %s", nrt_op_name(l->op), what);
}

nrt_status nrt_channel_norm_run(const nrt_launch *l) {
  cn_job j = {.l = l};
  cn_geom *g = &j.g;
  bool group = l->op == NRT_OP(GROUP_NORM) || l->op == NRT_OP(GROUP_NORM_BACKWARD);
  bool backward = l->op == NRT_OP(BATCH_NORM_BACKWARD) || l->op == NRT_OP(GROUP_NORM_BACKWARD);
  if (!nrt_dtype_is_floating(l->compute_dtype))
    return nrt_kernel_fail(NRT_ERROR_UNSUPPORTED,
                           "%s: floating dtypes only, got %s", nrt_op_name(l->op), nrt_dtype_name(l->compute_dtype));
  if (l->ndim != (group ? 4 : 3)) return bad(l, group ? "sizes are {N, G, Cg, S}" : "sizes are {N, C, S}");
  g->N = l->sizes[0];
  if (group) {
    g->G = l->sizes[1];
    g->Cg = l->sizes[2];
    g->C = g->G * g->Cg;
    g->S = l->sizes[3];
  } else {
    g->C = g->G = l->sizes[1];
    g->Cg = 1;
    g->S = l->sizes[2];
  }
  j.nout = l->noutputs;
  j.nin = l->ninputs;
  for (int i = 0; i < j.nout; i++) j.out[i] = &l->operands[i];
  for (int i = 0; i < j.nin; i++) j.in[i] = &l->operands[j.nout + i];
  int base_in = l->op == NRT_OP(BATCH_NORM_EVAL) ? 3 : backward ? 4 : 1;
  g->has_w = backward ? j.nin == 5 : (l->params[1] & 1) != 0;
  g->has_b = !backward && (l->params[1] & 2) != 0;
  if (j.nin != base_in + g->has_w + g->has_b) return bad(l, "inputs do not match the weight / bias bits of p1");
  if (backward) {
    int64_t m = l->params[0];
    int want = (int)((m & 1) + ((m >> 1) & 1) + ((m >> 2) & 1));
    if (m < 1 || m > 7 || j.nout != want) return bad(l, "outputs do not match the p0 mask");
  } else if (l->op == NRT_OP(BATCH_NORM) && j.nout != 3 && j.nout != 5) {
    return bad(l, "expected 3 outputs (5 with running statistics)");
  } else if ((l->op == NRT_OP(GROUP_NORM) && j.nout != 3) ||
             (l->op == NRT_OP(BATCH_NORM_EVAL) && j.nout != 1 && j.nout != 3)) {
    return bad(l, "wrong number of outputs");
  }
  if (l->op == NRT_OP(BATCH_NORM_EVAL) && j.nout == 3) {
    /* The saved statistics of an eval step are the running mean and
     * 1/sqrt(running_var + eps): what the op's meta function (and CUDA)
     * return, so a compiled graph sees the same [C] outputs. O(C), shared
     * by the fast and reference paths. */
    double eps = l->scalars[0].f;
    for (int64_t c = 0; c < g->C; c++) {
      vstore(j.out[1], c, vload(j.in[1], c));
      vstore(j.out[2], c, 1.0 / sqrt((double)vload(j.in[2], c) + eps));
    }
  }
  if (g->C == 0) return NRT_SUCCESS;
  if (nrt_kernels_reference()) return reference(&j);
  int64_t per_channel = g->N * g->S;
  if (l->op == NRT_OP(BATCH_NORM_BACKWARD) && (l->compute_dtype == NRT_BFLOAT16 || l->compute_dtype == NRT_FLOAT16) &&
      !(l->params[1] & NRT_BN_STRIDED)) {
    if (l->params[1] & NRT_BN_BWD_ROWS) return bnb_rows16(&j);
    nrt_parallel_for(g->C, per_channel >= 8192 ? 1 : 8192 / (per_channel + 1) + 1, bnb_planes16, &j);
    return NRT_SUCCESS;
  }
  if (l->op == NRT_OP(BATCH_NORM_BACKWARD) && l->compute_dtype == NRT_FLOAT32 && (l->params[1] & NRT_BN_STRIDED)) {
    nrt_parallel_for(g->C, per_channel >= 8192 ? 1 : 8192 / (per_channel + 1) + 1, bn_backward_strided, &j);
    return NRT_SUCCESS;
  }
  if (l->op == NRT_OP(BATCH_NORM_BACKWARD) && g->C > 1 && per_channel >= CL_CHUNKS) {
    /* every activation operand channels-innermost: the row path */
    bool cl = !(l->params[0] & 1) || channels_inner(j.out[0]);
    for (int i = 0; i < 2; i++) cl = cl && channels_inner(j.in[i]);
    if (cl) return bn_backward_channels_last(&j);
  }
  if (l->op == NRT_OP(BATCH_NORM) || l->op == NRT_OP(BATCH_NORM_EVAL)) {
    j.mode = bn_mode_of(l);
    bool rows = l->op == NRT_OP(BATCH_NORM) && j.mode.stats == NRT_BN_STATS_ROWS && per_channel > j.mode.threads;
    if (l->op == NRT_OP(BATCH_NORM) && !rows) {
      nrt_parallel_for((g->C + KCH - 1) / KCH, per_channel >= 2048 ? 1 : 2048 / (per_channel + 1) + 1,
                       bn_train_planes, &j);
      return NRT_SUCCESS;
    }
    j.coef = malloc(sizeof(bn_coef) * (size_t)g->C);
    if (!j.coef) return NRT_ERROR_OUT_OF_MEMORY;
    nrt_status st = NRT_SUCCESS;
    if (rows) {
      st = bn_train_rows(&j);
    } else {
      const nrt_operand *w = g->has_w ? j.in[3] : NULL, *b = g->has_b ? j.in[g->has_w ? 4 : 3] : NULL;
      for (int64_t c = 0; c < g->C; c++)
        j.coef[c] = bn_coef_of(&j.mode, false, vload(j.in[1], c), bn_eval_invstd(&j.mode, vload(j.in[2], c), l->scalars[0].f),
                               w ? vload(w, c) : 1.0f, b ? vload(b, c) : 0.0f);
    }
    if (st == NRT_SUCCESS) bn_apply_all(&j);
    free(j.coef);
    return st != NRT_SUCCESS ? st : j.failed ? NRT_ERROR_OUT_OF_MEMORY : NRT_SUCCESS;
  }
  switch ((int)l->op) {
  case NRT_OP(BATCH_NORM_BACKWARD):
    nrt_parallel_for(g->C, per_channel >= 8192 ? 1 : 8192 / (per_channel + 1) + 1, bn_backward_channels, &j);
    if (j.failed) return NRT_ERROR_OUT_OF_MEMORY;
    break;
  case NRT_OP(GROUP_NORM): {
    int64_t per_row = g->Cg * g->S;
    nrt_parallel_for(g->N * g->G, per_row >= 8192 ? 1 : 8192 / (per_row + 1) + 1,
                     l->params[2] == 1 ? gn_rows_contiguous : l->params[2] == 2 ? gn_rows_cl : gn_rows, &j);
    if (j.failed) return NRT_ERROR_OUT_OF_MEMORY;
    break;
  }
  default: {
    j.ds = malloc(sizeof(double) * (size_t)(g->N * g->C + 1));
    j.db = malloc(sizeof(double) * (size_t)(g->N * g->C + 1));
    if (!j.ds || !j.db) {
      free(j.ds);
      free(j.db);
      return NRT_ERROR_OUT_OF_MEMORY;
    }
    int64_t per_row = g->Cg * g->S;
    nrt_parallel_for(g->N * g->G, per_row >= 8192 ? 1 : 8192 / (per_row + 1) + 1,
                     l->params[2] == 1 ? gn_backward_rows_contiguous : gn_backward_rows, &j);
    if (l->params[0] & 6 && !j.failed) gn_backward_params(&j);
    free(j.ds);
    free(j.db);
    if (j.failed) return NRT_ERROR_OUT_OF_MEMORY;
    break;
  }
  }
  return NRT_SUCCESS;
}
