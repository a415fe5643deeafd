/* The float32 convolution as an implicit GEMM over activation pointers
 * (forward, and the stride-1 input gradient as the forward of the
 * transposed convolution; see conv.c):
 *   y[pixel][co] = bias[co] + sum over taps t, input channels ci of
 *                  x[pixel's input for t][ci] * W[co][ci][t]
 * with tiles of 14 output pixels (rows) by 32 output channels (columns).
 * The im2col GEMM packs every tile's im2col panel and then streams it
 * through the micro-kernel; here the micro-kernel broadcasts the 14 input
 * values of each k step straight from x through one pointer per pixel and
 * tap (stepping by the channel stride, so NCHW and channels-last are the
 * same loop), and only the weights are packed, once per launch, as
 * [group][32-channel panel][tap][ci][32]. Nothing is generated per tile
 * except where a tap reads the padding for some of the tile's pixels: that
 * tap's 14 x Cig values are gathered with zeros into a scratch panel (the
 * padding's zeros are multiplied, as PyTorch's CPU does: a NaN weight
 * reaches every output whose window has it in the padding). A tap that
 * reads only padding is skipped when every weight is finite.
 *
 * Pixels run across rows and images (each row has its own pointer), so
 * the 14-pixel tiles waste nothing on 56-wide maps or small images. The
 * tile's 14 x 32 result is stored to y through per-pixel pointers: a
 * contiguous row per pixel in channels-last, 14 scalars per channel in
 * NCHW (a few % of the tile's FMAs).
 *
 * The input gradient of a stride-1 convolution is the forward convolution
 * of grad_y with the weights transposed (in and out channels swapped) and
 * flipped, and padding D*(K-1) - P: it needs no col2im scatter. The
 * transposed convolution multiplies grad_y's padding zeros by the
 * weights, which PyTorch's col2im does not, so launches with a non-finite
 * weight keep the GEMM + col2im path.
 *
 * Tasks are ranges of (group, pixel tile); the weights of a group (Kdim x
 * Cog floats) stay in L2 while its tiles stream. */
#pragma GCC optimize("O3,no-trapping-math,no-math-errno")
#include <immintrin.h>
#include "kernels/conv/conv.h"

enum { IMR = NRT_GEMM_MR512, INR = NRT_GEMM_NR512 };

/* One tap of a tile: the 14 rows' input pointers (channel ci at
 * row[i] + ci * cs), and the tap's index in the packed weights. */
typedef struct itap {
  const float *row[IMR];
  int64_t cs, tap;
  /* a line to prefetch per channel step, at pf + ci * pfstep (NULL: none) */
  const float *pf;
  int64_t pfstep;
} itap;

/* out[i][j] = sum over taps and ci of row[i][ci * cs] * w[tap][ci][j]:
 * the plain loop the AVX-512 kernel must agree with (and the kernel of
 * hosts without AVX2; AVX2 hosts keep the im2col GEMM). */
static void ikernel_portable(int64_t ntaps, const itap *taps, int64_t cig, const float *wp, float *out) {
  for (int64_t i = 0; i < IMR * INR; i++) out[i] = 0.0f;
  for (int64_t t = 0; t < ntaps; t++) {
    const itap *tp = &taps[t];
    const float *w = wp + tp->tap * cig * INR;
    for (int64_t ci = 0; ci < cig; ci++)
      for (int i = 0; i < IMR; i++) {
        float a = tp->row[i][ci * tp->cs];
        for (int j = 0; j < INR; j++) out[i * INR + j] += a * w[ci * INR + j];
      }
  }
}

/* 28 accumulators over the whole reduction (no k slices: the result is
 * stored once); per k step two weight rows and 14 broadcasts, each folded
 * into its FMAs. */
NRT_TARGET_AVX512 static void ikernel_avx512(int64_t ntaps, const itap *taps, int64_t cig, const float *wp,
                                             float *out) {
  __m512 acc[IMR][2];
  nrt_gemm_zero_14x32_avx512(acc, out, INR);
  for (int64_t t = 0; t < ntaps; t++) {
    const itap *tp = &taps[t];
    const float *w = wp + tp->tap * cig * INR;
    const int64_t cs = tp->cs;
    const float *r[IMR];
    for (int i = 0; i < IMR; i++) r[i] = tp->row[i];
    int64_t o = 0;
    const float *pf = tp->pf;
    const int64_t pfstep = tp->pfstep;
    for (int64_t ci = 0; ci < cig; ci++, o += cs, w += INR) {
      __m512 b0 = _mm512_load_ps(w), b1 = _mm512_load_ps(w + 16);
      if (pf) _mm_prefetch((const char *)(pf + ci * pfstep), _MM_HINT_T0);
#pragma GCC unroll 14
      for (int i = 0; i < IMR; i++) {
        __m512 av = _mm512_set1_ps(r[i][o]);
        acc[i][0] = _mm512_fmadd_ps(av, b0, acc[i][0]);
        acc[i][1] = _mm512_fmadd_ps(av, b1, acc[i][1]);
      }
    }
  }
  nrt_gemm_store_14x32_avx512(acc, out, INR, 1.0f, 0);
}

typedef void (*ikernel_fn)(int64_t ntaps, const itap *taps, int64_t cig, const float *wp, float *out);

/* ---- tile input and output in NCHW ---------------------------------------
 * With channels strided, a tap whose rows partly read padding is gathered
 * into a panel gp[ci][14], and the result of a tile is 32 channel rows of
 * 14 pixels. When the tile's pixels are consecutive in memory these move
 * 14 lanes at a time (masked; plain loops beside them). */

/* gp[ci * 14 + i] = lane i of mask ? src[ci * cs + i] : 0 for ci < cig;
 * gp has 2 floats of slack past its end (each row writes 16). */
static void gather_rows_portable(const float *src, int64_t cs, uint32_t mask, int64_t cig, float *gp) {
  for (int64_t ci = 0; ci < cig; ci++)
    for (int i = 0; i < IMR; i++) gp[ci * IMR + i] = mask >> i & 1 ? src[ci * cs + i] : 0.0f;
}

NRT_TARGET_AVX512 static void gather_rows_avx512(const float *src, int64_t cs, uint32_t mask, int64_t cig,
                                                 float *gp) {
  for (int64_t ci = 0; ci < cig; ci++)
    _mm512_storeu_ps(gp + ci * IMR, _mm512_maskz_loadu_ps((__mmask16)mask, src + ci * cs));
}

/* y0[j * ycs + i] = out[i * 32 + j] + bias[j] for rows i < nrows, columns
 * j < ncol. */
static void store_cols_portable(const float *out, const float *bias, int64_t nrows, int64_t ncol, float *y0,
                                int64_t ycs) {
  for (int64_t j = 0; j < ncol; j++)
    for (int64_t i = 0; i < nrows; i++) y0[j * ycs + i] = out[i * INR + j] + bias[j];
}

/* In-register 16 x 16 transpose: r[i] holds row i; afterwards r[c] holds
 * column c (32-bit, then 64-bit interleaves within 128-bit lanes, then
 * two rounds of lane shuffles). */
NRT_TARGET_AVX512 static inline void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    __m512d a = _mm512_castps_pd(t[i]), b = _mm512_castps_pd(t[i + 1]);
    __m512d c = _mm512_castps_pd(t[i + 2]), d = _mm512_castps_pd(t[i + 3]);
    r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  /* r[4g + j]: 128-bit lane L holds column 4L + j of rows 4g .. 4g + 3 */
  for (int j = 0; j < 4; j++) {
    __m512 u01 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x44), w01 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x44);
    __m512 u23 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xee), w23 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xee);
    t[j] = _mm512_shuffle_f32x4(u01, w01, 0x88);
    t[4 + j] = _mm512_shuffle_f32x4(u01, w01, 0xdd);
    t[8 + j] = _mm512_shuffle_f32x4(u23, w23, 0x88);
    t[12 + j] = _mm512_shuffle_f32x4(u23, w23, 0xdd);
  }
  for (int i = 0; i < 16; i++) r[i] = t[i];
}

NRT_TARGET_AVX512 static void store_cols_avx512(const float *out, const float *bias, int64_t nrows, int64_t ncol,
                                                float *y0, int64_t ycs) {
  __mmask16 m = (__mmask16)((1u << nrows) - 1);
  for (int64_t h = 0; h < ncol; h += 16) {
    __m512 r[16];
    for (int i = 0; i < 16; i++) r[i] = i < IMR ? _mm512_loadu_ps(out + i * INR + h) : _mm512_setzero_ps();
    transpose16(r);
    for (int64_t c = 0; c < 16 && h + c < ncol; c++)
      _mm512_mask_storeu_ps(y0 + (h + c) * ycs, m, _mm512_add_ps(r[c], _mm512_set1_ps(bias[h + c])));
  }
}

typedef struct iplan {
  nrt_conv_geom g;           /* the convolution computed (the transposed one for an input gradient) */
  bool transposed;           /* weights W[co][ci][t] of the launch are read as W[ci][co][flip t] */
  const nrt_launch *l;
  const float *x;            /* the input activations in this geometry, float strides xs */
  float *y;                  /* the output, float strides ys */
  int64_t xs[5], ys[5];
  float *bias;               /* G * Cog values, or NULL */
  float *wp;                 /* packed weights */
  int64_t npan, ntile;       /* 32-channel panels and 14-pixel tiles per group */
  bool finite;               /* every weight is finite */
  int64_t *tapoff;           /* byte offset of each tap in a weight row of the launch (tap_offsets) */
  bool dense;                /* the launch's weights are one [rows][cols][KK] block at wd, wrow floats a row */
  const float *wd;
  int64_t wrow;
  ikernel_fn kern;
  void (*gather_rows)(const float *src, int64_t cs, uint32_t mask, int64_t cig, float *gp);
  void (*store_cols)(const float *out, const float *bias, int64_t nrows, int64_t ncol, float *y0, int64_t ycs);
  _Atomic int failed;
} iplan;

/* Byte offsets of each flat tap k = (kd, kh, kw) of the kernel extents
 * g->K within a weight row, so the loops over weights index a table
 * instead of dividing per element (two 64-bit divisions per weight cost
 * more than the whole GEMM of a deep layer's 7 x 7 maps). off has KK
 * entries. */
static void tap_offsets(const nrt_conv_geom *g, const nrt_operand *w, int64_t *off) {
  int64_t k = 0;
  for (int64_t kd = 0; kd < g->K[0]; kd++)
    for (int64_t kh = 0; kh < g->K[1]; kh++)
      for (int64_t kw = 0; kw < g->K[2]; kw++)
        off[k++] = kd * w->strides[2] + kh * w->strides[3] + kw * w->strides[4];
}

/* Weight w[o][i][tap with byte offset toff] (float32). */
static inline float w_at(const nrt_operand *w, int64_t o, int64_t i, int64_t toff) {
  float v;
  memcpy(&v, (const char *)w->data + o * w->strides[0] + i * w->strides[1] + toff, sizeof v);
  return v;
}

/* Whether the launch's weights (geometry g) are one dense block
 * [G * Cog][Cig][KK] of floats; and whether every one is finite: one
 * vectorised pass when the weights are one dense block (the usual case),
 * else element by element. */
static bool weights_dense(const nrt_conv_geom *g, const nrt_operand *w) {
  const int64_t *ws = w->strides;
  return (g->Cig == 1 || ws[1] == g->KK * 4) && (g->G * g->Cog == 1 || ws[0] == g->Cig * g->KK * 4) &&
         (g->KK == 1 || ws[4] == 4) && nrt_conv_w_taps_linear(g, ws);
}

static bool weights_finite(const nrt_conv_geom *g, const nrt_operand *w) {
  const int64_t rows = g->G * g->Cog, KK = g->KK, *ws = w->strides;
  if (weights_dense(g, w))
    return !nrt_conv_any_nonfinite((const float *)w->data, rows * g->Cig * KK);
  for (int64_t o = 0; o < rows; o++)
    for (int64_t i = 0; i < g->Cig; i++)
      for (int64_t kd = 0; kd < g->K[0]; kd++)
        for (int64_t kh = 0; kh < g->K[1]; kh++)
          for (int64_t kw = 0; kw < g->K[2]; kw++) {
            float v = w_at(w, o, i, kd * ws[2] + kh * ws[3] + kw * ws[4]);
            if (nrt_conv_any_nonfinite(&v, 1)) return false;
          }
  return true;
}

/* Packs panel u = (group, panel): [tap][ci][32] of W[group co][ci][tap],
 * channels past Cog zero. A transpose, so in blocks: a block of channels
 * [ci0, ci0 + cb) of the 32 weight rows is read into buf[j][c][tap], each
 * row's run in memory order, then written out as [tap][ci][j]. Reading
 * the 32 rows element by element instead misses L1 on every element: a
 * deep layer's rows lie 18 KiB apart, which maps all 32 onto two cache
 * sets. */
static void ipack_w(void *ctx, int64_t begin, int64_t end) {
  iplan *p = ctx;
  const nrt_conv_geom *g = &p->g;
  const nrt_operand *w = &p->l->operands[2];
  const int64_t KK = g->KK, Cig = g->Cig, cb = nrt_max_i64(1, 256 / KK);
  float *buf = nrt_conv_falloc(INR * cb * KK);
  if (!buf) {
    p->failed = 1;
    return;
  }
  for (int64_t u = begin; u < end; u++) {
    int64_t grp = u / p->npan, co0 = u % p->npan * INR, ncol = nrt_min_i64(INR, g->Cog - co0);
    float *wp = p->wp + u * KK * Cig * INR;
    for (int64_t ci0 = 0; ci0 < Cig; ci0 += cb) {
      int64_t nc = nrt_min_i64(cb, Cig - ci0), row = nc * KK;
      if (p->dense && p->transposed) {
        for (int64_t c = 0; c < nc; c++) {
          const float *src = p->wd + (grp * Cig + ci0 + c) * p->wrow + co0 * KK;
          for (int64_t j = 0; j < ncol; j++)
            for (int64_t t = 0; t < KK; t++) buf[j * row + c * KK + t] = src[j * KK + KK - 1 - t];
        }
      } else if (p->dense) {
        for (int64_t j = 0; j < ncol; j++)
          memcpy(buf + j * row, p->wd + (grp * g->Cog + co0 + j) * p->wrow + ci0 * KK, sizeof(float) * (size_t)row);
      } else if (p->transposed) {
        /* the transposed convolution's weight is the launch's W[ci's group
         * row][co][KK - 1 - t] (flipping every dim reverses the flat tap
         * index): a launch row holds the 32 columns side by side */
        for (int64_t c = 0; c < nc; c++)
          for (int64_t j = 0; j < ncol; j++)
            for (int64_t t = 0; t < KK; t++)
              buf[j * row + c * KK + t] = w_at(w, grp * Cig + ci0 + c, co0 + j, p->tapoff[KK - 1 - t]);
      } else {
        for (int64_t j = 0; j < ncol; j++)
          for (int64_t c = 0; c < nc; c++)
            for (int64_t t = 0; t < KK; t++)
              buf[j * row + c * KK + t] = w_at(w, grp * g->Cog + co0 + j, ci0 + c, p->tapoff[t]);
      }
      for (int64_t c = 0; c < nc; c++)
        for (int64_t t = 0; t < KK; t++) {
          float *d = wp + (t * Cig + ci0 + c) * INR;
          for (int64_t j = 0; j < INR; j++) d[j] = j < ncol ? buf[j * row + c * KK + t] : 0.0f;
        }
    }
  }
  free(buf);
}

/* Tasks: (group, tile) ranges. */
static void itiles(void *ctx, int64_t begin, int64_t end) {
  iplan *p = ctx;
  const nrt_conv_geom *g = &p->g;
  const int64_t Cig = g->Cig, KK = g->KK, NL = g->N * g->L, cs = p->xs[1];
  /* taps, a gathered panel per tap (with slack), the tile's result, a zero row */
  nrt_conv_bufs b;
  int64_t sizes[4] = {nrt_cdiv(KK * (int64_t)sizeof(itap), 4), KK * Cig * IMR + 16, IMR * INR, Cig};
  nrt_conv_plan bp = {.g = g, .l = p->l};
  if (!nrt_conv_bufs_alloc(&bp, &b, 4, sizes)) {
    p->failed = 1;
    return;
  }
  itap *taps = (itap *)b.b[0];
  float *gather = b.b[1], *out = b.b[2], *zero = b.b[3];
  memset(zero, 0, sizeof(float) * (size_t)Cig);
  for (int64_t u = begin; u < end; u++) {
    int64_t grp = u / p->ntile, q0 = u % p->ntile * IMR, nrows = nrt_min_i64(IMR, NL - q0);
    /* each row's image base, output address and first input coordinates */
    const float *xb[IMR];
    float *yb[IMR];
    int64_t in0[IMR][3];
    for (int64_t i = 0; i < IMR; i++) {
      int64_t q = q0 + nrt_min_i64(i, nrows - 1);
      int64_t n = q / g->L, pix = q - n * g->L;
      int64_t o[3] = {pix / (g->O[1] * g->O[2]), pix / g->O[2] % g->O[1], pix % g->O[2]};
      xb[i] = p->x + n * p->xs[0] + grp * Cig * cs;
      yb[i] = p->y + n * p->ys[0] + grp * g->Cog * p->ys[1] + o[0] * p->ys[2] + o[1] * p->ys[3] + o[2] * p->ys[4];
      for (int d = 0; d < 3; d++) in0[i][d] = o[d] * g->S[d] - g->P[d];
    }
    int64_t ntaps = 0;
    for (int64_t t = 0; t < KK; t++) {
      int64_t k[3] = {t / (g->K[1] * g->K[2]), t / g->K[2] % g->K[1], t % g->K[2]};
      itap *tp = &taps[ntaps];
      int nvalid = 0;
      uint32_t mask = 0;
      /* each row's input offset from x, valid or not (so that a row of
       * consecutive pixels shows as offsets v0 + i) */
      int64_t voff[IMR];
      for (int64_t i = 0; i < IMR; i++) {
        bool ok = i < nrows;
        int64_t off = 0;
        for (int d = 0; d < 3; d++) {
          int64_t c = in0[i][d] + k[d] * g->D[d];
          ok = ok && c >= 0 && c < g->I[d];
          off += c * p->xs[2 + d];
        }
        voff[i] = (xb[i] - p->x) + off;
        tp->row[i] = ok ? p->x + voff[i] : NULL;
        nvalid += ok;
        mask |= (uint32_t)ok << i;
      }
      if (nvalid == 0 && p->finite) continue;
      tp->tap = t;
      tp->cs = cs;
      /* The next tile's input, a channel step at a time: with channels
       * strided (NCHW) there are as many streams as channels, more than the
       * hardware prefetchers follow, so the next tile's last pixel in each
       * channel; with channels innermost the 14 rows after the
       * tile's, 16 floats a step (about 14 rows of Cig in Cig steps). Both
       * guesses are for consecutive pixels; a wrong one costs a prefetch. */
      int64_t ahead = (cs == 1 ? 1 : IMR) * g->S[2] * p->xs[4];
      tp->pf = (const float *)((uintptr_t)p->x + (uintptr_t)(voff[IMR - 1] + ahead) * sizeof(float));
      tp->pfstep = cs == 1 ? 16 : cs;
      if (nvalid < IMR && cs == 1) {
        /* channels innermost: a row in the padding reads a zero row */
        for (int64_t i = 0; i < IMR; i++)
          if (!tp->row[i]) tp->row[i] = zero;
      } else if (nvalid < IMR) {
        /* some rows read padding (or lie past the last pixel): this tap's
         * values gathered with zeros, rows at gather + i, step 14 */
        float *gp = gather + t * Cig * IMR;
        bool consecutive = true;
        for (int64_t i = 1; i < nrows; i++) consecutive = consecutive && voff[i] == voff[0] + i;
        if (consecutive) {
          /* lanes outside the mask are never read: the address may lie
           * before x (it is formed from an integer for that reason) */
          p->gather_rows((const float *)((uintptr_t)p->x + (uintptr_t)voff[0] * sizeof(float)), cs, mask, Cig, gp);
        } else {
          for (int64_t i = 0; i < IMR; i++) {
            const float *r = tp->row[i];
            for (int64_t ci = 0; ci < Cig; ci++) gp[ci * IMR + i] = r ? r[ci * cs] : 0.0f;
          }
        }
        for (int64_t i = 0; i < IMR; i++) tp->row[i] = gp + i;
        tp->cs = IMR;
        tp->pf = NULL;
      }
      ntaps++;
    }
    for (int64_t jp = 0; jp < p->npan; jp++) {
      int64_t co0 = jp * INR, ncol = nrt_min_i64(INR, g->Cog - co0);
      if (ntaps) p->kern(ntaps, taps, Cig, p->wp + (grp * p->npan + jp) * KK * Cig * INR, out);
      else memset(out, 0, sizeof(float) * IMR * INR);
      float bias[INR] = {0};
      if (p->bias) memcpy(bias, p->bias + grp * g->Cog + co0, sizeof(float) * (size_t)ncol);
      int64_t ycs = p->ys[1];
      if (ycs == 1) {
        for (int64_t i = 0; i < nrows; i++) {
          float *yr = yb[i] + co0;
          for (int64_t j = 0; j < ncol; j++) yr[j] = out[i * INR + j] + bias[j];
        }
      } else {
        bool consecutive = true;
        for (int64_t i = 1; i < nrows; i++) consecutive = consecutive && yb[i] == yb[0] + i;
        if (consecutive) {
          p->store_cols(out, bias, nrows, ncol, yb[0] + co0 * ycs, ycs);
        } else {
          for (int64_t j = 0; j < ncol; j++)
            for (int64_t i = 0; i < nrows; i++) yb[i][(co0 + j) * ycs] = out[i * INR + j] + bias[j];
        }
      }
    }
  }
  nrt_conv_bufs_free(&b);
}

/* Whether operand o is float32 with strides in whole floats. */
static bool f32_operand(const nrt_operand *o) {
  for (int i = 0; i < 5; i++)
    if (o->strides[i] % 4) return false;
  return o->dtype == NRT_FLOAT32 && ((uintptr_t)o->data & 3) == 0;
}

bool nrt_conv_implicit_applies(const nrt_conv_geom *g, const nrt_launch *l) {
  nrt_isa isa = nrt_kernels_isa();
  if (isa != NRT_ISA_BASELINE && isa < NRT_ISA_AVX512) return false;
  for (int i = 0; i < 3; i++)
    if (!f32_operand(&l->operands[i])) return false;
  if (l->op == NRT_OP(CONV)) return true;
  if (l->op != NRT_OP(CONV_BACKWARD_INPUT)) return false;
  for (int d = 0; d < 3; d++)
    if (g->S[d] != 1 || g->D[d] * (g->K[d] - 1) < g->P[d]) return false;
  return weights_finite(g, &l->operands[2]); /* see the top of the file */
}

nrt_status nrt_conv_implicit(const nrt_conv_geom *g, const nrt_launch *l) {
  iplan p = {.g = *g, .l = l};
  const nrt_operand *out = &l->operands[0], *in = &l->operands[1];
  p.transposed = l->op == NRT_OP(CONV_BACKWARD_INPUT);
  if (p.transposed) {
    /* grad_x = conv(grad_y, W transposed and flipped, padding D (K - 1) - P) */
    nrt_conv_geom *t = &p.g;
    t->Cog = g->Cig;
    t->Cig = g->Cog;
    for (int d = 0; d < 3; d++) {
      t->O[d] = g->I[d];
      t->I[d] = g->O[d];
      t->P[d] = g->D[d] * (g->K[d] - 1) - g->P[d];
    }
    t->L = g->LI;
    t->LI = g->L;
    t->Kdim = t->Cig * t->KK;
  }
  p.x = in->data;
  p.y = out->data;
  for (int i = 0; i < 5; i++) {
    p.xs[i] = in->strides[i] / 4;
    p.ys[i] = out->strides[i] / 4;
  }
  bool avx512 = nrt_kernels_isa() >= NRT_ISA_AVX512;
  p.kern = avx512 ? ikernel_avx512 : ikernel_portable;
  p.gather_rows = avx512 ? gather_rows_avx512 : gather_rows_portable;
  p.store_cols = avx512 ? store_cols_avx512 : store_cols_portable;
  p.npan = nrt_cdiv(p.g.Cog, INR);
  p.ntile = nrt_cdiv(p.g.N * p.g.L, IMR);
  /* an input gradient took this path only with finite weights (applies) */
  p.finite = p.transposed || weights_finite(g, &l->operands[2]);
  if (l->ninputs == 3) {
    p.bias = nrt_conv_falloc(p.g.G * p.g.Cog);
    if (!p.bias) return NRT_ERROR_OUT_OF_MEMORY;
    for (int64_t c = 0; c < p.g.G * p.g.Cog; c++) p.bias[c] = nrt_conv_load1(&l->operands[3], c);
  }
  p.wp = nrt_conv_falloc(p.g.G * p.npan * p.g.KK * p.g.Cig * INR);
  p.tapoff = malloc(sizeof(int64_t) * (size_t)g->KK);
  if (!p.wp || !p.tapoff) {
    free(p.wp);
    free(p.tapoff);
    free(p.bias);
    return NRT_ERROR_OUT_OF_MEMORY;
  }
  tap_offsets(g, &l->operands[2], p.tapoff);
  p.dense = weights_dense(g, &l->operands[2]);
  p.wd = l->operands[2].data;
  p.wrow = g->Cig * g->KK;
  nrt_parallel_for(p.g.G * p.npan, 1, ipack_w, &p);
  free(p.tapoff);
  /* grain: about 2^17 FMA lanes per chunk */
  double fl = (double)p.g.Kdim * IMR * INR * (double)p.npan;
  if (!p.failed) nrt_parallel_for(p.g.G * p.ntile, fl >= 131072 ? 1 : (int64_t)(131072 / fl) + 1, itiles, &p);
  free(p.wp);
  free(p.bias);
  if (p.failed)
    return nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for work buffers", nrt_op_name(l->op));
  return NRT_SUCCESS;
}
