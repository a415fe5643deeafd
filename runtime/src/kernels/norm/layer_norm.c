/* Norm kernels (NRT_KIND_NORM): layer norm forward and its input
 * gradient. Rows lie along the last dim of `sizes`; the leading dims index
 * independent rows, which are the parallel work items. Per-row operands
 * (mean, rstd) have stride 0 along the row; per-column operands (weight,
 * bias) normally have stride 0 over the leading dims.
 *
 * Everything computes in float32 whatever the stored dtype (float64 too,
 * by the device rule), in the order of ATen's CPU kernel (PyTorch 2.13,
 * its AVX2 build: REGISTER_DISPATCH leaves the AVX-512 slot empty, so
 * vectors are 8 floats), so that degenerate rows cancel where the CPU's
 * do and values near the float limits overflow where the CPU's do:
 *
 * Forward:  mean and variance by RowwiseMoments (moments_utils.h): Welford
 *           updates in 8 float lanes over chunks of 16 vectors, the chunks
 *           merged in a binary cascade, a scalar Welford tail, then the 8
 *           lanes merged into it; rstd = 1 / sqrt(var + eps) in float;
 *           y = fma((x - mean) * rstd, w, b), or fma(x - mean, rstd, b)
 *           without a weight.
 * Backward: ds = sum dy x w, db = sum dy w in 8 float lanes; b = (db mean -
 *           ds) rstd^3 / n, c = -b mean - db rstd / n; dx = rstd dy w + b x
 *           + c. For n = 2 and equal gradients b is 0 exactly, and dx too.
 * A 16-bit input reads vectors of 16 elements (the bfloat16/half Vectorized
 * of AVX2), each split in two float vectors of 8 (its first and last half).
 *
 * Where the CPU's compiler fused a multiply and an add is not visible in
 * the source: each fma below was settled by crafted probes against the
 * installed CPU build (bitwise over 500 rows of 1..16393 elements, offsets
 * up to 1e5, 1 and 2 threads; see tests/test_norm.py). */
#pragma GCC optimize("O3,no-trapping-math,no-math-errno")
#include "kernels/norm/norm.h"
#include "nrt/ops/norm.h"

#define NORM_GRAIN 32768 /* elements per parallel chunk, at least */

/* Operand positions. */
enum { LN_Y = 0, LN_MEAN = 1, LN_RSTD = 2, LN_X = 3 };
enum { LNB_GX = 0, LNB_GY = 1, LNB_X = 2, LNB_MEAN = 3, LNB_RSTD = 4, LNB_W = 5 };

typedef struct norm_plan {
  int nops;
  int wk, bk;        /* operand of weight / bias, -1 if absent */
  bool w_shared, b_shared; /* the same row for every row: loaded once */
  int parts;         /* float vectors per input vector: 2 for a 16-bit input */
  nrt_dtype stat16;  /* backward: the 16-bit dtype the CPU keeps mean and rstd in, else float32 */
  float eps;
} norm_plan;

#define NORM_INLINE static inline __attribute__((always_inline))
#define LN_LANES 8   /* floats per AVX2 vector */
#define LN_CHUNK 16  /* Welford updates per chunk (ATen's kChunkSize) */
#define LN_GROUP 4   /* chunks updated side by side: independent chains */
#define LN_MAX_DEPTH 64

/* ---- RowwiseMoments ----------------------------------------------------------- */

typedef struct ln_moments {
  int64_t m0;
  float m1[LN_LANES], m2[LN_LANES];
} ln_moments;

/* AddMomentsVec: s += (m0_add, m1a, m2a), s the base. */
NORM_INLINE void ln_add_vec(ln_moments *s, int64_t m0_add, const float *m1a, const float *m2a) {
  int64_t n = s->m0 + m0_add;
  float c = n == 0 ? 0.0f : (float)m0_add / (float)n, m0 = (float)s->m0;
  for (int k = 0; k < LN_LANES; k++) {
    float d = m1a[k] - s->m1[k];
    s->m1[k] = s->m1[k] + c * d;
    s->m2[k] = __builtin_fmaf(d, d * c * m0, s->m2[k] + m2a[k]);
  }
  s->m0 = n;
}

static int ln_ceil_log2(int64_t x) {
  int r = 0;
  if (x <= 2) return 1;
  for (uint64_t v = (uint64_t)x - 1; v; v >>= 1) r++;
  return r;
}

/* Chunk i's moments into the cascade, ATen's stack: each part added to
 * the bottom (a 16-bit chunk's two halves one after the other), then full
 * levels merged upwards. m1 / m2 hold the chunk's parts `gap` rows apart. */
NORM_INLINE void ln_push(ln_moments *stk, int depth, int64_t i, int64_t m0, int parts, int gap,
                         float m1[][LN_LANES], float m2[][LN_LANES]) {
  for (int p = 0; p < parts; p++) ln_add_vec(&stk[0], m0, m1[p * gap], m2[p * gap]);
  int64_t mask = i + 1;
  for (int j = 1; j < depth && (mask & 1) == 0; j++) {
    ln_add_vec(&stk[j], stk[j - 1].m0, stk[j - 1].m1, stk[j - 1].m2);
    memset(&stk[j - 1], 0, sizeof stk[j - 1]);
    mask >>= 1;
  }
}

/* Welford over `steps` vectors of chunk part p (of `parts`) from x: lane k of
 * step j reads x[j * 8 * parts + 8 p + k]. The fast path runs LN_GROUP
 * chunks side by side (g chains); c[j] = 1 / (j + 1) in float. */
NORM_INLINE void ln_chunk_group(const float *x, int64_t stride, int g, int parts, int64_t steps, const float *c,
                                float m1[][LN_LANES], float m2[][LN_LANES]) {
  const int64_t vw = (int64_t)LN_LANES * parts;
  for (int u = 0; u < g; u++)
    for (int k = 0; k < LN_LANES; k++) m1[u][k] = m2[u][k] = 0.0f;
  for (int64_t j = 0; j < steps; j++)
    for (int u = 0; u < g; u++) {
      const float *xp = x + u * stride + j * vw;
      for (int k = 0; k < LN_LANES; k++) {
        float v = xp[k], d = v - m1[u][k];
        m1[u][k] = __builtin_fmaf(d, c[j], m1[u][k]);
        m2[u][k] = __builtin_fmaf(d, v - m1[u][k], m2[u][k]);
      }
    }
}

/* The same updates in AVX2 vectors, g (constant after inlining) chunks as
 * independent chains: the plain loops above are left partly scalar by the
 * compiler, which made the forward 1.8x slower than its old double sums. */
static inline __attribute__((always_inline, target("avx2,fma"))) void
ln_chunks_avx2_g(const float *x, int64_t stride, int g, int64_t vw, int64_t steps, const float *c,
                 float m1[][LN_LANES], float m2[][LN_LANES]) {
  __m256 a1[LN_GROUP], a2[LN_GROUP];
  for (int u = 0; u < g; u++) a1[u] = a2[u] = _mm256_setzero_ps();
  for (int64_t j = 0; j < steps; j++) {
    __m256 cj = _mm256_set1_ps(c[j]);
    for (int u = 0; u < g; u++) {
      __m256 v = _mm256_loadu_ps(x + u * stride + j * vw), d = _mm256_sub_ps(v, a1[u]);
      a1[u] = _mm256_fmadd_ps(d, cj, a1[u]);
      a2[u] = _mm256_fmadd_ps(d, _mm256_sub_ps(v, a1[u]), a2[u]);
    }
  }
  for (int u = 0; u < g; u++) {
    _mm256_storeu_ps(m1[u], a1[u]);
    _mm256_storeu_ps(m2[u], a2[u]);
  }
}
NRT_TARGET_AVX2 static void ln_chunks_avx2(const float *x, int64_t stride, int g, int parts, int64_t steps,
                                           const float *c, float m1[][LN_LANES], float m2[][LN_LANES]) {
  const int64_t vw = (int64_t)LN_LANES * parts;
  if (g == LN_GROUP) ln_chunks_avx2_g(x, stride, LN_GROUP, vw, steps, c, m1, m2);
  else if (g == 2) ln_chunks_avx2_g(x, stride, 2, vw, steps, c, m1, m2);
  else ln_chunks_avx2_g(x, stride, 1, vw, steps, c, m1, m2);
}

/* Mean and biased variance of x[0..N) as ATen's RowwiseMoments (ddof 0).
 * A row whose lane means square past FLT_MAX (|x| ~ 1.8e19) gets a NaN
 * variance, as on the CPU (inf * 0 in the merge). */
NORM_INLINE void ln_row_moments(const float *x, int64_t N, int parts, bool avx2, float *out_mean, float *out_var) {
  const int64_t vw = (int64_t)LN_LANES * parts, n = N / vw, m = (n + LN_CHUNK - 1) / LN_CHUNK, cs = LN_CHUNK * vw;
  const int depth = ln_ceil_log2(m);
  float c[LN_CHUNK];
  for (int j = 0; j < LN_CHUNK; j++) c[j] = 1.0f / (float)(j + 1);
  ln_moments stk[LN_MAX_DEPTH];
  memset(stk, 0, sizeof(ln_moments) * (size_t)depth);
  float m1[2 * LN_GROUP][LN_LANES], m2[2 * LN_GROUP][LN_LANES];
  int64_t full = n / LN_CHUNK, i = 0;
  while (i < full) {
    /* up to LN_GROUP full chunks, each part a chain of its own (constant
     * group sizes, so that each call unrolls) */
    int g = full - i >= LN_GROUP ? LN_GROUP : full - i >= 2 ? 2 : 1;
    for (int p = 0; p < parts; p++) {
      const float *xp = x + i * cs + p * LN_LANES;
      if (avx2) ln_chunks_avx2(xp, cs, g, parts, LN_CHUNK, c, &m1[p * g], &m2[p * g]);
      else ln_chunk_group(xp, cs, g, parts, LN_CHUNK, c, &m1[p * g], &m2[p * g]);
    }
    for (int u = 0; u < g; u++) ln_push(stk, depth, i + u, LN_CHUNK, parts, g, &m1[u], &m2[u]);
    i += g;
  }
  for (; i < m; i++) {
    int64_t steps = n - i * LN_CHUNK < LN_CHUNK ? n - i * LN_CHUNK : LN_CHUNK;
    for (int p = 0; p < parts; p++) {
      if (avx2) ln_chunks_avx2(x + i * cs + p * LN_LANES, cs, 1, parts, steps, c, &m1[p], &m2[p]);
      else ln_chunk_group(x + i * cs + p * LN_LANES, cs, 1, parts, steps, c, &m1[p], &m2[p]);
    }
    ln_push(stk, depth, i, steps, parts, 1, m1, m2);
  }
  for (int j = 1; j < depth; j++) ln_add_vec(&stk[0], stk[j].m0, stk[j].m1, stk[j].m2);
  int64_t m0 = 0;
  float mean = 0.0f, m2s = 0.0f;
  for (int64_t k = n * vw; k < N; k++) {
    float v = x[k], d = v - mean;
    ++m0;
    mean = mean + d / (float)m0;
    m2s = m2s + d * (v - mean);
  }
  int64_t m0_add = n * parts;
  for (int k = 0; k < LN_LANES; k++) {
    int64_t tot = m0 + m0_add;
    float cc = tot == 0 ? 0.0f : (float)m0_add / (float)tot, d = stk[0].m1[k] - mean;
    mean = __builtin_fmaf(cc, d, mean);
    m2s = m2s + __builtin_fmaf(d * d * cc, (float)m0, stk[0].m2[k]);
    m0 = tot;
  }
  *out_mean = mean;
  *out_var = m2s / (float)N;
}
/* ATen's RowwiseMoments for the channel norms (group norm's contiguous
 * groups): x[0..n) as float32, parts 2 for a 16-bit input. */
NRT_TARGET_AVX2 static void row_moments_avx2(const float *x, int64_t n, int parts, float *mean, float *var) {
  ln_row_moments(x, n, parts, true, mean, var);
}
void nrt_norm_row_moments(const float *x, int64_t n, int parts, float *mean, float *var) {
  if (nrt_kernels_isa() >= NRT_ISA_AVX2) row_moments_avx2(x, n, parts, mean, var);
  else ln_row_moments(x, n, parts, false, mean, var);
}

/* ---- forward and backward rows ------------------------------------------------- */

/* y row; w, b may be NULL. Returns mean and rstd. */
NORM_INLINE void ln_forward_row(float *y, const float *x, const float *w, const float *b, int64_t n, int parts,
                                bool avx2, float eps, float *out_mean, float *out_rstd) {
  float m, var;
  ln_row_moments(x, n, parts, avx2, &m, &var);
  float r = 1.0f / sqrtf(var + eps);
  *out_mean = m;
  *out_rstd = r;
  if (parts == 1) {
    /* (x + (-mean)) * rstd * w + b, the last step fused */
    if (w && b)
      for (int64_t i = 0; i < n; i++) y[i] = __builtin_fmaf((x[i] - m) * r, w[i], b[i]);
    else if (w) /* + 0: the CPU adds a zero bias (-0 becomes 0) */
      for (int64_t i = 0; i < n; i++) y[i] = ((x[i] - m) * r) * w[i] + 0.0f;
    else if (b) /* (x - mean) * rstd * 1 + b: the * 1 folds away and the rest fuses */
      for (int64_t i = 0; i < n; i++) y[i] = __builtin_fmaf(x[i] - m, r, b[i]);
    else
      for (int64_t i = 0; i < n; i++) y[i] = (x[i] - m) * r + 0.0f;
  } else {
    /* the 16-bit kernel folds the mean into a bias: (x * rstd + (-rstd *
     * mean)) * w + b */
    float bias = -r * m;
    for (int64_t i = 0; i < n; i++)
      y[i] = __builtin_fmaf(__builtin_fmaf(x[i], r, bias), w ? w[i] : 1.0f, b ? b[i] : 0.0f);
  }
}

/* vec_reduce_all of an AVX2 vector: lanes i + i^4, then i^2, then i^1. */
NORM_INLINE float ln_hsum8(const float *a) {
  float v1[LN_LANES], v2[LN_LANES];
  for (int k = 0; k < LN_LANES; k++) v1[k] = a[k] + a[k ^ 4];
  for (int k = 0; k < LN_LANES; k++) v2[k] = v1[k] + v1[k ^ 2];
  return v2[0] + v2[1];
}

/* ds = sum dy x w, db = sum dy w (w NULL: 1) as ATen's map*_reduce_all:
 * the first vector's products, then whole vectors added (not fused), the
 * partial last vector fused into its lanes, the lanes by ln_hsum8; fewer
 * than 8 elements add in order. */
NORM_INLINE void ln_backward_sums(const float *gy, const float *x, const float *w, int64_t n, bool fuse_tail,
                                  float *out_ds, float *out_db) {
  float ads[LN_LANES] = {0}, adb[LN_LANES] = {0};
  if (n < LN_LANES) {
    for (int64_t k = 0; k < n; k++) {
      ads[k] = w ? gy[k] * x[k] * w[k] : gy[k] * x[k];
      adb[k] = w ? gy[k] * w[k] : gy[k];
    }
    float ds = ads[0], db = adb[0];
    for (int64_t k = 1; k < n; k++) {
      ds = ds + ads[k];
      db = db + adb[k];
    }
    *out_ds = ds;
    *out_db = db;
    return;
  }
  for (int k = 0; k < LN_LANES; k++) {
    ads[k] = w ? gy[k] * x[k] * w[k] : gy[k] * x[k];
    adb[k] = w ? gy[k] * w[k] : gy[k];
  }
  int64_t d = LN_LANES, end = n - n % LN_LANES;
  if (w)
    for (; d < end; d += LN_LANES)
      for (int k = 0; k < LN_LANES; k++) {
        ads[k] = ads[k] + gy[d + k] * x[d + k] * w[d + k];
        adb[k] = adb[k] + gy[d + k] * w[d + k];
      }
  else
    for (; d < end; d += LN_LANES)
      for (int k = 0; k < LN_LANES; k++) {
        ads[k] = ads[k] + gy[d + k] * x[d + k];
        adb[k] = adb[k] + gy[d + k];
      }
  for (int64_t k = 0; k < n - d; k++) {
    if (!fuse_tail) { /* group norm's per-channel sums */
      ads[k] = ads[k] + gy[d + k] * x[d + k];
      adb[k] = adb[k] + gy[d + k];
      continue;
    }
    ads[k] = w ? __builtin_fmaf(gy[d + k] * x[d + k], w[d + k], ads[k]) : __builtin_fmaf(gy[d + k], x[d + k], ads[k]);
    adb[k] = w ? __builtin_fmaf(gy[d + k], w[d + k], adb[k]) : adb[k] + gy[d + k];
  }
  *out_ds = ln_hsum8(ads);
  *out_db = ln_hsum8(adb);
}

/* ds = sum dy x, db = sum dy over x[0..n) in the order of group norm's
 * per-channel sums (ComputeInternalGradients: as layer norm's, but the
 * partial last vector is added unfused, by probes). */
static void row_dot_sums_base(const float *gy, const float *x, int64_t n, float *ds, float *db) {
  ln_backward_sums(gy, x, NULL, n, false, ds, db);
}
/* the same adds in AVX2 registers (nothing here is fused: the same values) */
NRT_TARGET_AVX2 static void row_dot_sums_avx2(const float *gy, const float *x, int64_t n, float *ds, float *db) {
  ln_backward_sums(gy, x, NULL, n, false, ds, db);
}
void nrt_norm_row_dot_sums(const float *gy, const float *x, int64_t n, float *ds, float *db) {
  if (nrt_kernels_isa() >= NRT_ISA_AVX2) row_dot_sums_avx2(gy, x, n, ds, db);
  else row_dot_sums_base(gy, x, n, ds, db);
}

/* gx row from gy, x, the row's mean and rstd, and w (NULL: none). */
NORM_INLINE void ln_backward_row(float *gx, const float *gy, const float *x, const float *w, float m, float r,
                                 int64_t n) {
  float ds, db, scale = 1.0f / (float)n;
  ln_backward_sums(gy, x, w, n, true, &ds, &db);
  float b = __builtin_fmaf(db, m, -ds) * r * r * r * scale;
  float c = __builtin_fmaf(-b, m, -(db * r * scale));
  if (w)
    for (int64_t i = 0; i < n; i++) gx[i] = __builtin_fmaf(b, x[i], r * gy[i] * w[i]) + c;
  else
    for (int64_t i = 0; i < n; i++) gx[i] = __builtin_fmaf(b, x[i], r * gy[i]) + c;
}

/* Baseline and AVX-512 builds of the row functions (__builtin_fmaf is the
 * library's correctly rounded fma in the baseline build: the same values). */
static void forward_row_base(float *y, const float *x, const float *w, const float *b, int64_t n, int parts,
                             float eps, float *m, float *r) {
  ln_forward_row(y, x, w, b, n, parts, false, eps, m, r);
}
NRT_TARGET_AVX512 static void forward_row_avx512(float *y, const float *x, const float *w, const float *b,
                                                 int64_t n, int parts, float eps, float *m, float *r) {
  ln_forward_row(y, x, w, b, n, parts, true, eps, m, r);
}
static void backward_row_base(float *gx, const float *gy, const float *x, const float *w, float m, float r,
                              int64_t n) {
  ln_backward_row(gx, gy, x, w, m, r, n);
}
NRT_TARGET_AVX512 static void backward_row_avx512(float *gx, const float *gy, const float *x, const float *w,
                                                  float m, float r, int64_t n) {
  ln_backward_row(gx, gy, x, w, m, r, n);
}

/* ---- traversal ------------------------------------------------------------ */

static bool leading_strides_zero(const nrt_launch *l, int k) {
  for (int d = 0; d + 1 < l->ndim; d++)
    if (l->operands[k].strides[d] != 0 && l->sizes[d] != 1) return false;
  return true;
}

/* A row as float32: in place when it already is unit-stride float32,
 * otherwise converted into buf. */
static const float *row_in(const nrt_launch *l, int k, const char *ptr, int64_t st, int64_t n,
                           float *buf) {
  if (l->operands[k].dtype == NRT_FLOAT32 && st == 4) return (const float *)ptr;
  nrt_load_f32(buf, ptr, st, l->operands[k].dtype, n);
  return buf;
}

static float scalar_in(const nrt_launch *l, int k, const char *ptr) {
  float v;
  nrt_load_f32(&v, ptr, 0, l->operands[k].dtype, 1);
  return v;
}

static void scalar_out(const nrt_launch *l, int k, char *ptr, float v) {
  nrt_store_f32(ptr, 0, l->operands[k].dtype, &v, 1);
}

/* A backward row's mean or rstd as the CPU reads it: its forward keeps a
 * 16-bit input's statistics as 16-bit tensors (ours, as the meta function,
 * are float32), so its backward starts from them rounded (an expanded
 * bfloat16 row: rstd 316 not 316.2, a gradient term 410 not 412). */
static float stat_in(const norm_plan *p, float v) {
  if (p->stat16 == NRT_FLOAT32) return v;
  char h[2];
  nrt_store_f32(h, 0, p->stat16, &v, 1);
  nrt_load_f32(&v, h, 0, p->stat16, 1);
  return v;
}

/* A task's rows; scratch holds an output, two input, a weight and a bias
 * row. */
static void norm_range(const nrt_rows_job *j, int64_t begin, int64_t end, void *scratch) {
  const norm_plan *p = j->ctx;
  const nrt_launch *l = j->l;
  const int64_t n = j->g.len, *rs = j->g.st;
  bool avx512 = nrt_kernels_isa() >= NRT_ISA_AVX512;
  float *buf = scratch;
  float *out_buf = buf, *in0 = buf + n, *in1 = buf + 2 * n, *wbuf = buf + 3 * n, *bbuf = buf + 4 * n;
  const float *w = NULL, *b = NULL;
  for (int64_t r = begin; r < end; r++) {
    char *ptr[NRT_MAX_OPERANDS];
    nrt_rows_start(l, p->nops, r, ptr);
    /* weight / bias: once per chunk when every row shares them */
    if (p->wk >= 0 && (!w || !p->w_shared)) w = row_in(l, p->wk, ptr[p->wk], rs[p->wk], n, wbuf);
    if (p->bk >= 0 && (!b || !p->b_shared)) b = row_in(l, p->bk, ptr[p->bk], rs[p->bk], n, bbuf);
    int ok = l->op == NRT_OP(LAYER_NORM) ? LN_Y : LNB_GX;
    bool direct = l->operands[ok].dtype == NRT_FLOAT32 && rs[ok] == 4;
    float *out = direct ? (float *)ptr[ok] : out_buf;
    if (l->op == NRT_OP(LAYER_NORM)) {
      const float *x = row_in(l, LN_X, ptr[LN_X], rs[LN_X], n, in0);
      float m, rstd;
      if (avx512) forward_row_avx512(out, x, w, b, n, p->parts, p->eps, &m, &rstd);
      else forward_row_base(out, x, w, b, n, p->parts, p->eps, &m, &rstd);
      scalar_out(l, LN_MEAN, ptr[LN_MEAN], m);
      scalar_out(l, LN_RSTD, ptr[LN_RSTD], rstd);
    } else {
      const float *gy = row_in(l, LNB_GY, ptr[LNB_GY], rs[LNB_GY], n, in0);
      const float *x = row_in(l, LNB_X, ptr[LNB_X], rs[LNB_X], n, in1);
      float m = stat_in(p, scalar_in(l, LNB_MEAN, ptr[LNB_MEAN]));
      float rstd = stat_in(p, scalar_in(l, LNB_RSTD, ptr[LNB_RSTD]));
      if (avx512) backward_row_avx512(out, gy, x, w, m, rstd, n);
      else backward_row_base(out, gy, x, w, m, rstd, n);
    }
    if (!direct) nrt_store_f32(ptr[ok], rs[ok], l->operands[ok].dtype, out, n);
  }
}

/* ---- weight and bias gradients (LAYER_NORM_PARAM_GRADS) --------------------------
 * ATen's two-pass reduction (LayerNormBackwardKernelImplInternal): the CPU
 * splits the rows over its threads (at::parallel_for over M, grain 1:
 * chunks of ceil(M / min(T, M)) rows, one chunk when M == 1); each chunk
 * accumulates into a buffer of X's dtype, row after row, dgamma += dy *
 * (rstd * x + (-rstd * mean)) and dbeta += dy in float, rounded to that
 * dtype after every row (a 16-bit input's partial sums are 16-bit, even
 * with a float32 weight). The chunks' buffers are then added in float from
 * 0, chunk 0 first (idle threads' zero buffers change nothing), and stored
 * in the weight's dtype. At the limits this order decides: rstd * x - rstd
 * * mean stays finite where (x - mean) * rstd overflows (fuzz
 * 57721566-705600: inf). Columns are independent, so the work splits by
 * column blocks, each walking every row. */
#define PG_BLK 128

typedef struct pg_plan {
  int nops;
  int gw, gb;       /* output operands, -1 if not asked */
  int in0;          /* grad_y; x, mean, rstd follow */
  nrt_dtype buf16;  /* the CPU's buffer dtype when 16-bit, else float32 */
  nrt_dtype stat16; /* as norm_plan's */
  int64_t threads;  /* the CPU's */
  const nrt_launch *l;
  nrt_rows g;
} pg_plan;

static inline float round16(float v, nrt_dtype d) {
  if (d == NRT_BFLOAT16) return nrt_k_bf16_to_f32(nrt_k_f32_to_bf16(v));
  if (d == NRT_FLOAT16) return nrt_k_f16_to_f32(nrt_k_f32_to_f16(v));
  return v;
}

#define PG_UPDATE(acc, dy, a, x, b) __builtin_fmaf((dy), __builtin_fmaf((a), (x), (b)), (acc))

/* One row's update of the dgamma buffer: acc + dy * (a * x + b), the
 * products contracted as the CPU's build is (settled by probes). */
NORM_INLINE float pg_term(float acc, float dy, float a, float x, float b) {
  return PG_UPDATE(acc, dy, a, x, b);
}

/* One row's update of a column block's buffers (w: dgamma, b: dbeta, NULL
 * when not asked); round: the 16-bit buffer dtype, else float32. Built
 * plain and with FMA (fmaf is a library call in the baseline build). */
NORM_INLINE void pg_row_body(float *restrict aw, float *restrict ab, const float *restrict dv,
                             const float *restrict xv, float a, float b, int64_t cn, nrt_dtype round) {
  if (aw) {
    if (round == NRT_FLOAT32)
      for (int64_t j = 0; j < cn; j++) aw[j] = pg_term(aw[j], dv[j], a, xv[j], b);
    else
      for (int64_t j = 0; j < cn; j++) aw[j] = round16(pg_term(aw[j], dv[j], a, xv[j], b), round);
  }
  if (ab) {
    if (round == NRT_FLOAT32)
      for (int64_t j = 0; j < cn; j++) ab[j] = ab[j] + dv[j];
    else
      for (int64_t j = 0; j < cn; j++) ab[j] = round16(ab[j] + dv[j], round);
  }
}
static void pg_row_base(float *aw, float *ab, const float *dv, const float *xv, float a, float b, int64_t cn,
                        nrt_dtype round) {
  pg_row_body(aw, ab, dv, xv, a, b, cn, round);
}
NRT_TARGET_AVX2 static void pg_row_avx2(float *aw, float *ab, const float *dv, const float *xv, float a, float b,
                                        int64_t cn, nrt_dtype round) {
  pg_row_body(aw, ab, dv, xv, a, b, cn, round);
}

/* Units (CPU chunk t, column block): the chunk's rows in order into its
 * partial buffers part[t][0 / 1][c0 ..], in float (rounded as the CPU's
 * buffer dtype after every row). */
typedef struct pg_job {
  const pg_plan *p;
  int64_t nt, chunk, blocks;
  float *part; /* [nt][2][len] */
} pg_job;

static void pg_range(void *ctx, int64_t begin, int64_t end) {
  const pg_job *pj = ctx;
  const pg_plan *p = pj->p;
  const nrt_launch *l = p->l;
  const int64_t M = p->g.count, N = p->g.len;
  const int k_gy = p->in0, k_x = p->in0 + 1, k_m = p->in0 + 2, k_r = p->in0 + 3;
  const norm_plan sp = {.stat16 = p->stat16};
  bool fma = nrt_kernels_isa() >= NRT_ISA_AVX2;
  float xb[PG_BLK], db[PG_BLK];
  for (int64_t u = begin; u < end; u++) {
    int64_t t = u / pj->blocks, c0 = (u % pj->blocks) * PG_BLK, cn = N - c0 < PG_BLK ? N - c0 : PG_BLK;
    float *aw = p->gw >= 0 ? pj->part + (t * 2) * N + c0 : NULL;
    float *ab = p->gb >= 0 ? pj->part + (t * 2 + 1) * N + c0 : NULL;
    for (int64_t j = 0; j < cn; j++) {
      if (aw) aw[j] = 0.0f;
      if (ab) ab[j] = 0.0f;
    }
    int64_t r1 = (t + 1) * pj->chunk < M ? (t + 1) * pj->chunk : M;
    for (int64_t r = t * pj->chunk; r < r1; r++) {
      char *ptr[NRT_MAX_OPERANDS];
      nrt_rows_start(l, p->nops, r, ptr);
      const float *dv = row_in(l, k_gy, ptr[k_gy] + c0 * p->g.st[k_gy], p->g.st[k_gy], cn, db);
      const float *xv = dv;
      float a = 0.0f, b = 0.0f;
      if (aw) {
        xv = row_in(l, k_x, ptr[k_x] + c0 * p->g.st[k_x], p->g.st[k_x], cn, xb);
        a = stat_in(&sp, scalar_in(l, k_r, ptr[k_r]));
        b = -a * stat_in(&sp, scalar_in(l, k_m, ptr[k_m]));
      }
      if (fma) pg_row_avx2(aw, ab, dv, xv, a, b, cn, p->buf16);
      else pg_row_base(aw, ab, dv, xv, a, b, cn, p->buf16);
    }
  }
}

/* The reference: the same arithmetic a column at a time, elements loaded
 * one by one. */
static void pg_reference(const pg_plan *p) {
  const nrt_launch *l = p->l;
  const nrt_rows *g = &p->g;
  const int64_t M = g->count;
  int64_t nt = M > 1 ? (p->threads < M ? p->threads : M) : 1, chunk = (M + nt - 1) / nt;
  norm_plan sp = {.stat16 = p->stat16};
  for (int64_t j = 0; j < g->len; j++) {
    float tw = 0.0f, tb = 0.0f;
    for (int64_t t = 0; t < nt; t++) {
      float aw = 0.0f, ab = 0.0f;
      for (int64_t r = t * chunk; r < M && r < (t + 1) * chunk; r++) {
        char *ptr[NRT_MAX_OPERANDS];
        nrt_rows_start(l, p->nops, r, ptr);
        float dy = nrt_rows_ref_ld(l, g, ptr, p->in0, j), x = nrt_rows_ref_ld(l, g, ptr, p->in0 + 1, j);
        float m = stat_in(&sp, nrt_rows_ref_ld(l, g, ptr, p->in0 + 2, 0));
        float a = stat_in(&sp, nrt_rows_ref_ld(l, g, ptr, p->in0 + 3, 0));
        aw = round16(PG_UPDATE(aw, dy, a, x, -a * m), p->buf16);
        ab = round16(ab + dy, p->buf16);
      }
      tw += aw;
      tb += ab;
    }
    char *ptr[NRT_MAX_OPERANDS];
    nrt_rows_start(l, p->nops, 0, ptr);
    if (p->gw >= 0) nrt_rows_ref_st(l, g, ptr, p->gw, j, tw);
    if (p->gb >= 0) nrt_rows_ref_st(l, g, ptr, p->gb, j, tb);
  }
}

static nrt_status pg_run(const nrt_launch *l) {
  const char *name = nrt_op_name(l->op);
  int64_t mask = l->params[0];
  int want = (int)(((mask >> 1) & 1) + ((mask >> 2) & 1));
  if ((mask & ~(int64_t)6) || want == 0 || l->noutputs != want || l->ninputs != 4)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                           "%s: p0 = %lld (bit1 grad_weight, bit2 grad_bias) needs that many outputs and 4 inputs, "
                           "got %d and %d", name, (long long)mask, l->noutputs, l->ninputs);
  pg_plan p = {.nops = l->noutputs + l->ninputs, .gw = -1, .gb = -1, .in0 = l->noutputs, .l = l,
               .buf16 = NRT_FLOAT32, .stat16 = NRT_FLOAT32, .threads = l->params[3] > 0 ? l->params[3] : 1};
  int k = 0;
  if (mask & 2) p.gw = k++;
  if (mask & 4) p.gb = k++;
  bool half = l->compute_dtype == NRT_BFLOAT16 || l->compute_dtype == NRT_FLOAT16;
  if (half) p.buf16 = l->compute_dtype;
  /* the statistics: 16-bit on the CPU unless its weight is float32 (p1 = 1) */
  if (half && l->params[1] != 1) p.stat16 = l->compute_dtype;
  nrt_rows_init(&p.g, l);
  if (p.g.len == 0) return NRT_SUCCESS;
  if (nrt_kernels_reference()) {
    pg_reference(&p);
    return NRT_SUCCESS;
  }
  const int64_t M = p.g.count, N = p.g.len;
  pg_job pj = {.p = &p, .nt = M > 1 ? (p.threads < M ? p.threads : M) : 1, .blocks = (N + PG_BLK - 1) / PG_BLK};
  pj.chunk = (M + pj.nt - 1) / pj.nt;
  pj.part = malloc(sizeof(float) * (size_t)(2 * pj.nt * N + 2 * N));
  if (!pj.part) return nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", nrt_op_name(l->op));
  nrt_parallel_for(pj.nt * pj.blocks, 1, pg_range, &pj);
  /* the chunks' buffers added from 0 in chunk order (idle CPU threads'
   * zero buffers change nothing) */
  float *tw = pj.part + 2 * pj.nt * N, *tb = tw + N;
  for (int64_t c = 0; c < N; c++) {
    float sw = 0.0f, sb = 0.0f;
    for (int64_t t = 0; t < pj.nt; t++) {
      sw = sw + pj.part[(t * 2) * N + c];
      sb = sb + pj.part[(t * 2 + 1) * N + c];
    }
    tw[c] = sw;
    tb[c] = sb;
  }
  char *ptr[NRT_MAX_OPERANDS];
  nrt_rows_start(l, p.nops, 0, ptr);
  if (p.gw >= 0) nrt_store_f32(ptr[p.gw], p.g.st[p.gw], l->operands[p.gw].dtype, tw, N);
  if (p.gb >= 0) nrt_store_f32(ptr[p.gb], p.g.st[p.gb], l->operands[p.gb].dtype, tb, N);
  free(pj.part);
  return NRT_SUCCESS;
}

/* ---- reference: element at a time, one chunk at a time ------------------------
 * The same arithmetic as the fast path, written plainly: no chunks side by
 * side, elements loaded and stored one at a time by dtype.c. */

static void ref_moments(const float *x, int64_t N, int parts, float *out_mean, float *out_var) {
  const int64_t vw = (int64_t)LN_LANES * parts, n = N / vw, m = (n + LN_CHUNK - 1) / LN_CHUNK;
  const int depth = ln_ceil_log2(m);
  ln_moments stk[LN_MAX_DEPTH];
  memset(stk, 0, sizeof stk);
  for (int64_t i = 0; i < m; i++) {
    int64_t steps = n - i * LN_CHUNK < LN_CHUNK ? n - i * LN_CHUNK : LN_CHUNK;
    for (int p = 0; p < parts; p++) {
      float m1[LN_LANES] = {0}, m2[LN_LANES] = {0};
      for (int64_t j = 0; j < steps; j++)
        for (int k = 0; k < LN_LANES; k++) {
          float v = x[(i * LN_CHUNK + j) * vw + p * LN_LANES + k], d = v - m1[k];
          m1[k] = fmaf(d, 1.0f / (float)(j + 1), m1[k]);
          m2[k] = fmaf(d, v - m1[k], m2[k]);
        }
      ln_add_vec(&stk[0], steps, m1, m2);
    }
    for (int64_t j = 1, mask = i + 1; j < depth && (mask & 1) == 0; j++, mask >>= 1) {
      ln_add_vec(&stk[j], stk[j - 1].m0, stk[j - 1].m1, stk[j - 1].m2);
      memset(&stk[j - 1], 0, sizeof stk[j - 1]);
    }
  }
  for (int j = 1; j < depth; j++) ln_add_vec(&stk[0], stk[j].m0, stk[j].m1, stk[j].m2);
  int64_t m0 = 0;
  float mean = 0.0f, m2s = 0.0f;
  for (int64_t k = n * vw; k < N; k++) {
    float d = x[k] - mean;
    ++m0;
    mean = mean + d / (float)m0;
    m2s = m2s + d * (x[k] - mean);
  }
  for (int k = 0; k < LN_LANES; k++) {
    int64_t tot = m0 + n * parts;
    float cc = tot == 0 ? 0.0f : (float)(n * parts) / (float)tot, d = stk[0].m1[k] - mean;
    mean = fmaf(cc, d, mean);
    m2s = m2s + fmaf(d * d * cc, (float)m0, stk[0].m2[k]);
    m0 = tot;
  }
  *out_mean = mean;
  *out_var = m2s / (float)N;
}

static void norm_reference(const nrt_rows_job *j, int64_t r, char *const *ptr, void *scratch) {
  const norm_plan *p = j->ctx;
  const nrt_launch *l = j->l;
  const nrt_rows *rows = &j->g;
  int64_t n = rows->len;
  float *x = scratch; /* the input row as float32 */
#define LD(k, i) nrt_rows_ref_ld(l, rows, ptr, k, i)
#define ST(k, i, v) nrt_rows_ref_st(l, rows, ptr, k, i, (float)(v))
#define W(i) (p->wk >= 0 ? LD(p->wk, i) : 1.0f)
#define B(i) (p->bk >= 0 ? LD(p->bk, i) : 0.0f)
  if (l->op == NRT_OP(LAYER_NORM)) {
    float mean, var;
    for (int64_t i = 0; i < n; i++) x[i] = LD(LN_X, i);
    ref_moments(x, n, p->parts, &mean, &var);
    float rstd = 1.0f / sqrtf(var + p->eps);
    for (int64_t i = 0; i < n; i++)
      ST(LN_Y, i, p->parts == 2 ? fmaf(fmaf(x[i], rstd, -rstd * mean), W(i), B(i))
                  : p->wk < 0 ? fmaf(x[i] - mean, rstd, B(i)) : fmaf((x[i] - mean) * rstd, W(i), B(i)));
    ST(LN_MEAN, 0, mean);
    ST(LN_RSTD, 0, rstd);
  } else {
    float m = stat_in(p, LD(LNB_MEAN, 0)), rstd = stat_in(p, LD(LNB_RSTD, 0)), ds = 0.0f, db = 0.0f, ads[LN_LANES] = {0},
          adb[LN_LANES] = {0};
    for (int64_t i = 0; i < n; i++) {
      float gy = LD(LNB_GY, i), xv = LD(LNB_X, i), s = p->wk >= 0 ? gy * xv * W(i) : gy * xv, t = gy * W(i);
      int64_t lane = i % LN_LANES;
      if (n < LN_LANES) { /* in order */
        ds = i ? ds + s : s;
        db = i ? db + t : t;
      } else if (i < LN_LANES || i < n - n % LN_LANES) { /* first and whole vectors */
        ads[lane] = i < LN_LANES ? s : ads[lane] + s;
        adb[lane] = i < LN_LANES ? t : adb[lane] + t;
      } else { /* the partial last vector, fused */
        ads[lane] = p->wk >= 0 ? fmaf(gy * xv, W(i), ads[lane]) : fmaf(gy, xv, ads[lane]);
        adb[lane] = p->wk >= 0 ? fmaf(gy, W(i), adb[lane]) : adb[lane] + gy;
      }
    }
    if (n >= LN_LANES) {
      ds = ln_hsum8(ads);
      db = ln_hsum8(adb);
    }
    float scale = 1.0f / (float)n, b = fmaf(db, m, -ds) * rstd * rstd * rstd * scale;
    float c = fmaf(-b, m, -(db * rstd * scale));
    for (int64_t i = 0; i < n; i++) {
      float t = p->wk >= 0 ? rstd * LD(LNB_GY, i) * W(i) : rstd * LD(LNB_GY, i);
      ST(LNB_GX, i, fmaf(b, LD(LNB_X, i), t) + c);
    }
  }
#undef LD
#undef ST
#undef W
#undef B
}

nrt_status nrt_layer_norm_run(const nrt_launch *l) {
  if (l->op == NRT_OP(LAYER_NORM_PARAM_GRADS)) return pg_run(l);
  norm_plan p = {.nops = l->noutputs + l->ninputs, .wk = -1, .bk = -1, .parts = 1, .stat16 = NRT_FLOAT32};
  const char *name = nrt_op_name(l->op);
  if (l->op == NRT_OP(LAYER_NORM)) {
    if (l->noutputs != 3)
      return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expected 3 outputs (y, mean, rstd), got %d", name,
                             l->noutputs);
    int64_t flags = l->params[1];
    int want = 1 + (int)(flags & 1) + (int)((flags >> 1) & 1);
    if ((flags & ~(int64_t)3) || l->ninputs != want)
      return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                             "%s: p1 = %lld (bit0 weight, bit1 bias) needs %d inputs, got %d", name,
                             (long long)flags, want, l->ninputs);
    int k = LN_X + 1;
    if (flags & 1) p.wk = k++;
    if (flags & 2) p.bk = k++;
    p.eps = (float)l->scalars[0].f;
    p.parts = l->compute_dtype == NRT_BFLOAT16 || l->compute_dtype == NRT_FLOAT16 ? 2 : 1;
  } else if (l->op == NRT_OP(LAYER_NORM_BACKWARD)) {
    if (l->noutputs != 1)
      return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expected 1 output, got %d", name, l->noutputs);
    if (l->ninputs == 5) p.wk = LNB_W;
    /* 16-bit statistics unless a float32 weight makes it the CPU's mixed-type
     * path, which keeps them in float */
    bool half = l->compute_dtype == NRT_BFLOAT16 || l->compute_dtype == NRT_FLOAT16;
    if (half && (p.wk < 0 || l->operands[LNB_W].dtype == l->compute_dtype)) p.stat16 = l->compute_dtype;
  } else {
    return nrt_kernel_fail(NRT_ERROR_UNSUPPORTED, "kernel %s: not a norm op", name);
  }
  nrt_rows_job j = {.l = l, .ctx = &p, .nops = p.nops, .range = norm_range};
  nrt_rows_init(&j.g, l);
  if (j.g.count == 0 || j.g.len == 0) return NRT_SUCCESS;
  p.w_shared = p.wk >= 0 && leading_strides_zero(l, p.wk);
  p.b_shared = p.bk >= 0 && leading_strides_zero(l, p.bk);
  bool ref = nrt_kernels_reference();
  if (ref) { /* one row at a time on this thread */
    j.range = NULL;
    j.row = norm_reference;
    j.scratch = (size_t)j.g.len * sizeof(float);
  } else {
    j.scratch = 5 * (size_t)j.g.len * sizeof(float);
  }
  if (!nrt_rows_run(&j, NORM_GRAIN, !ref))
    return nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for a row of %lld", name,
                           (long long)j.g.len);
  return NRT_SUCCESS;
}
