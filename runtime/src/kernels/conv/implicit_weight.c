/* The float32 weight gradient as an implicit GEMM over activation pointers
 * (see implicit.c for the forward's):
 *   dW[co][ci][t] = sum over images and output pixels p of
 *                   dy[p][co] * x[p's input for tap t][ci]
 * with tiles of 14 input channels of one tap (rows) by 32 output channels
 * (columns), reduced over pixels one output row at a time. The 14 rows
 * share the tap, so they share which output rows and columns read inside
 * the input: a row segment is one run of pixels, and the micro-kernel
 * broadcasts x through one pointer per channel, stepping along the input
 * row, while it loads dy as 32-channel vectors per pixel: straight from dy
 * when its channels are innermost (channels-last, 32 | Cog), else from a
 * copy [group][image][pixel][Cog rounded up to 32] made once per launch.
 * The old weight-gradient GEMM generated im2col A panels and repacked
 * dy^T for every block of rows.
 *
 * Segments skip the padding, so PyTorch's products of the padding's zeros
 * with a non-finite dy (NaN) are applied afterwards, as the direct path
 * does: every tap that reads padding at such a pixel becomes NaN.
 *
 * Tasks: slices of the output rows (across images) times blocks of tiles
 * (group, tap, 32-channel panel, 14-channel block); each reduces its
 * tiles over its rows a chunk of rows at a time, so that x and dy are
 * read about once per block (a tile at a time over all pixels read them
 * once per tile), into per-slice partial sums the size of grad_w that a
 * last pass adds up. */
#pragma GCC optimize("O3,no-trapping-math,no-math-errno")
#include <immintrin.h>
#include "kernels/conv/conv.h"

enum { WMR = NRT_GEMM_MR512, WNR = NRT_GEMM_NR512 };

/* A run of len pixels: x at row[i] + xoff + k * as, dy at b + boff + k * bs. */
typedef struct wseg {
  int64_t xoff, boff, len;
} wseg;

/* c[i][j] += sum over segments and k of row[i][xoff + k as] * b[boff + k bs + j]:
 * the plain loop the AVX-512 kernel must agree with. */
static void wkernel_portable(int64_t nseg, const wseg *segs, const float *const *row, int64_t as, const float *b,
                             int64_t bs, float *c) {
  for (int64_t s = 0; s < nseg; s++)
    for (int64_t k = 0; k < segs[s].len; k++) {
      const float *bk = b + segs[s].boff + k * bs;
      for (int i = 0; i < WMR; i++) {
        float a = row[i][segs[s].xoff + k * as];
        for (int j = 0; j < WNR; j++) c[i * WNR + j] += a * bk[j];
      }
    }
}

NRT_TARGET_AVX512 static void wkernel_avx512(int64_t nseg, const wseg *segs, const float *const *row, int64_t as,
                                             const float *b, int64_t bs, float *c) {
  __m512 acc[WMR][2];
  nrt_gemm_zero_14x32_avx512(acc, c, WNR);
  for (int64_t s = 0; s < nseg; s++) {
    const float *r[WMR];
    for (int i = 0; i < WMR; i++) r[i] = row[i] + segs[s].xoff;
    const float *bk = b + segs[s].boff;
    int64_t o = 0;
    for (int64_t k = 0; k < segs[s].len; k++, o += as, bk += bs) {
      __m512 b0 = _mm512_loadu_ps(bk), b1 = _mm512_loadu_ps(bk + 16);
#pragma GCC unroll 14
      for (int i = 0; i < WMR; i++) {
        __m512 av = _mm512_set1_ps(r[i][o]);
        acc[i][0] = _mm512_fmadd_ps(av, b0, acc[i][0]);
        acc[i][1] = _mm512_fmadd_ps(av, b1, acc[i][1]);
      }
    }
  }
  nrt_gemm_store_14x32_avx512(acc, c, WNR, 1.0f, 1);
}

typedef void (*wkernel_fn)(int64_t nseg, const wseg *segs, const float *const *row, int64_t as, const float *b,
                           int64_t bs, float *c);

typedef struct wplan {
  const nrt_conv_geom *g;
  const nrt_launch *l;
  const float *x;   /* operand 2, float strides xs */
  int64_t xs[5];
  const float *b;   /* dy as pixel rows of unit-stride channels: dy itself or the copy */
  int64_t bs[5];    /* its float strides {n, -, d, h, w} */
  int64_t bgrp;     /* floats from one group's channel 0 to the next's */
  float *copy;      /* the copy [G][N][L][cog_pad], or NULL */
  int64_t cog_pad, npan, ncb, ntiles;
  int64_t nslices;  /* slices of the output rows, each with partial sums */
  int64_t nblocks;  /* blocks of tiles: a task is (slice, block) */
  int64_t rows_chunk; /* output rows a chunk holds */
  float *part;      /* [nslices][ntiles][14][32] */
  wkernel_fn kern;
  _Atomic int failed;
  _Atomic int nonfinite;
} wplan;

/* Copies dy of (group, image) u into copy[u][pixel][cog_pad] (zero past
 * Cog), noting non-finite values. */
static void wcopy_dy(void *ctx, int64_t begin, int64_t end) {
  wplan *p = ctx;
  const nrt_conv_geom *g = p->g;
  const nrt_operand *gy = &p->l->operands[1];
  nrt_conv_bufs w;
  nrt_conv_plan bp = {.g = g, .l = p->l};
  if (!nrt_conv_bufs_alloc(&bp, &w, 1, (const int64_t[]){g->L})) {
    p->failed = 1;
    return;
  }
  for (int64_t u = begin; u < end; u++) {
    int64_t grp = u / g->N, n = u % g->N;
    float *d = p->copy + u * g->L * p->cog_pad;
    for (int64_t co = 0; co < p->cog_pad; co++) {
      if (co >= g->Cog) {
        for (int64_t q = 0; q < g->L; q++) d[q * p->cog_pad + co] = 0.0f;
        continue;
      }
      nrt_conv_act_cols(gy, g->O, grp * g->Cog + co, n * g->L, g->L, w.b[0], false);
      if (nrt_conv_any_nonfinite(w.b[0], g->L)) p->nonfinite = 1;
      for (int64_t q = 0; q < g->L; q++) d[q * p->cog_pad + co] = w.b[0][q];
    }
  }
  nrt_conv_bufs_free(&w);
}

/* Notes non-finite values of dy read in place (images [begin, end)). */
static void wcheck_dy(void *ctx, int64_t begin, int64_t end) {
  wplan *p = ctx;
  const nrt_conv_geom *g = p->g;
  for (int64_t n = begin; n < end && !p->nonfinite; n++)
    for (int64_t q = 0; q < g->L; q++) {
      int64_t o[3] = {q / (g->O[1] * g->O[2]), q / g->O[2] % g->O[1], q % g->O[2]};
      const float *row = p->b + n * p->bs[0] + o[0] * p->bs[2] + o[1] * p->bs[3] + o[2] * p->bs[4];
      if (nrt_conv_any_nonfinite(row, g->G * g->Cog)) {
        p->nonfinite = 1;
        break;
      }
    }
}

/* Output pixels per chunk, at least: a chunk's x and dy stay in L2 while
 * every tile of the task reduces over it, and each micro-kernel call
 * covers enough pixels to pay for loading and storing its 14 x 32 sums. */
#define CHUNK_PIXELS 64

/* Tasks: (slice of the output rows across images, block of tiles), each
 * reducing its tiles over its rows, a chunk at a time, into the slice's
 * partial sums part[slice][tile][14][32]. */
static void wtasks(void *ctx, int64_t begin, int64_t end) {
  wplan *p = ctx;
  const nrt_conv_geom *g = p->g;
  const int64_t KK = g->KK, rows_img = g->O[0] * g->O[1], nrows = g->N * rows_img, rch = p->rows_chunk;
  nrt_conv_bufs w;
  nrt_conv_plan bp = {.g = g, .l = p->l};
  if (!nrt_conv_bufs_alloc(&bp, &w, 3,
                           (const int64_t[]){nrt_cdiv(KK * rch * (int64_t)sizeof(wseg), 4),
                                             nrt_cdiv(KK * (int64_t)sizeof(nrt_conv_tap), 4), 2 * KK})) {
    p->failed = 1;
    return;
  }
  wseg *segs = (wseg *)w.b[0];
  nrt_conv_tap *taps = (nrt_conv_tap *)w.b[1];
  int64_t *nseg = (int64_t *)w.b[2];
  for (int64_t t = 0; t < KK; t++) nrt_conv_tap_init(g, t, &taps[t]); /* channel 0: offsets and valid columns */
  for (int64_t task = begin; task < end; task++) {
    int64_t sl = task / p->nblocks, blk = task % p->nblocks;
    int64_t u0 = blk * p->ntiles / p->nblocks, u1 = (blk + 1) * p->ntiles / p->nblocks;
    float *part = p->part + sl * p->ntiles * WMR * WNR;
    memset(part + u0 * WMR * WNR, 0, sizeof(float) * (size_t)((u1 - u0) * WMR * WNR));
    int64_t r0 = sl * nrows / p->nslices, r1 = (sl + 1) * nrows / p->nslices;
    for (int64_t rc = r0; rc < r1; rc += rch) {
      /* each tap's segments over the chunk's output rows */
      for (int64_t t = 0; t < KK; t++) {
        const nrt_conv_tap *tap = &taps[t];
        wseg *sg = segs + t * rch;
        nseg[t] = 0;
        if (tap->hi <= tap->lo) continue;
        for (int64_t r = rc; r < nrt_min_i64(rc + rch, r1); r++) {
          int64_t n = r / rows_img, od = r % rows_img / g->O[1], oh = r % g->O[1];
          int64_t id = od * g->S[0] + tap->off[0], ih = oh * g->S[1] + tap->off[1];
          if (id < 0 || id >= g->I[0] || ih < 0 || ih >= g->I[1]) continue;
          sg[nseg[t]].xoff = n * p->xs[0] + id * p->xs[2] + ih * p->xs[3] + (tap->lo * g->S[2] + tap->off[2]) * p->xs[4];
          sg[nseg[t]].boff = n * p->bs[0] + od * p->bs[2] + oh * p->bs[3] + tap->lo * p->bs[4];
          sg[nseg[t]].len = tap->hi - tap->lo;
          nseg[t]++;
        }
      }
      for (int64_t u = u0; u < u1; u++) {
        int64_t cb = u % p->ncb, r = u / p->ncb, jp = r % p->npan, t = r / p->npan % KK, grp = r / p->npan / KK;
        if (!nseg[t]) continue;
        int64_t ci0 = cb * WMR, nci = nrt_min_i64(WMR, g->Cig - ci0);
        /* rows past Cig repeat the last channel; their sums are dropped */
        const float *row[WMR];
        for (int64_t i = 0; i < WMR; i++) row[i] = p->x + (grp * g->Cig + ci0 + nrt_min_i64(i, nci - 1)) * p->xs[1];
        p->kern(nseg[t], segs + t * rch, row, g->S[2] * p->xs[4], p->b + grp * p->bgrp + jp * WNR, p->bs[4],
                part + u * WMR * WNR);
      }
    }
  }
  nrt_conv_bufs_free(&w);
}

/* Sums the slices' partial sums into grad_w, for units [begin, end) of
 * (group, 32-channel panel, 14-channel block) with all their taps, so
 * each (co, ci) gets its taps written side by side (unit by tile, the
 * taps of one weight row were written far apart in time, each cache line
 * of grad_w loaded once per tap). */
static void wfinish(void *ctx, int64_t begin, int64_t end) {
  wplan *p = ctx;
  const nrt_conv_geom *g = p->g;
  const nrt_operand *gw = &p->l->operands[0];
  const int64_t KK = g->KK, per_tap = p->npan * p->ncb, slice = p->ntiles * WMR * WNR;
  for (int64_t v = begin; v < end; v++) {
    int64_t cb = v % p->ncb, jp = v / p->ncb % p->npan, grp = v / per_tap;
    int64_t ci0 = cb * WMR, nci = nrt_min_i64(WMR, g->Cig - ci0), co0 = jp * WNR, ncol = nrt_min_i64(WNR, g->Cog - co0);
    /* the tile of tap t: ((grp * KK + t) * npan + jp) * ncb + cb */
    const float *tile0 = p->part + ((grp * KK * p->npan + jp) * p->ncb + cb) * WMR * WNR;
    for (int64_t j = 0; j < ncol; j++)
      for (int64_t i = 0; i < nci; i++) {
        char *e = (char *)gw->data + (grp * g->Cog + co0 + j) * gw->strides[0] + (ci0 + i) * gw->strides[1];
        int64_t t = 0;
        for (int64_t kd = 0; kd < g->K[0]; kd++)
          for (int64_t kh = 0; kh < g->K[1]; kh++)
            for (int64_t kw = 0; kw < g->K[2]; kw++, t++) {
              const float *c = tile0 + t * per_tap * WMR * WNR + i * WNR + j;
              float sum = 0.0f;
              for (int64_t sl = 0; sl < p->nslices; sl++) sum += c[sl * slice];
              memcpy(e + kd * gw->strides[2] + kh * gw->strides[3] + kw * gw->strides[4], &sum, sizeof sum);
            }
      }
  }
}

/* The padding's zeros times a non-finite dy: dW[co][*][t] = NaN for every
 * tap t that reads padding at a pixel where dy[co] is non-finite. Rare,
 * so plainly. */
static void poison(const wplan *p) {
  const nrt_conv_geom *g = p->g;
  const nrt_operand *gw = &p->l->operands[0], *gy = &p->l->operands[1];
  for (int64_t n = 0; n < g->N; n++)
    for (int64_t co = 0; co < g->G * g->Cog; co++)
      for (int64_t q = 0; q < g->L; q++) {
        float v;
        nrt_conv_act_cols(gy, g->O, co, n * g->L + q, 1, &v, false);
        if (!nrt_conv_any_nonfinite(&v, 1)) continue;
        int64_t o[3] = {q / (g->O[1] * g->O[2]), q / g->O[2] % g->O[1], q % g->O[2]};
        for (int64_t t = 0; t < g->KK; t++) {
          int64_t k[3] = {t / (g->K[1] * g->K[2]), t / g->K[2] % g->K[1], t % g->K[2]};
          bool padded = false;
          for (int d = 0; d < 3; d++) {
            int64_t c = o[d] * g->S[d] + k[d] * g->D[d] - g->P[d];
            padded = padded || c < 0 || c >= g->I[d];
          }
          if (!padded) continue;
          float nan = NAN;
          for (int64_t ci = 0; ci < g->Cig; ci++)
            memcpy((char *)gw->data + co * gw->strides[0] + ci * gw->strides[1] + k[0] * gw->strides[2] +
                       k[1] * gw->strides[3] + k[2] * gw->strides[4],
                   &nan, sizeof nan);
        }
      }
}

static bool f32_operand(const nrt_operand *o) {
  for (int i = 0; i < 5; i++)
    if (o->strides[i] % 4) return false;
  return o->dtype == NRT_FLOAT32 && ((uintptr_t)o->data & 3) == 0;
}

bool nrt_conv_implicit_weight_applies(const nrt_conv_geom *g, const nrt_launch *l) {
  nrt_isa isa = nrt_kernels_isa();
  if (isa != NRT_ISA_BASELINE && isa < NRT_ISA_AVX512) return false;
  for (int i = 0; i < 3; i++)
    if (!f32_operand(&l->operands[i])) return false;
  /* a tile's 14 rows are input channels of one tap: with 4 or fewer (an
   * image's first layer) most of its FMAs would be thrown away, where the
   * im2col GEMM folds the taps into its rows */
  return l->op == NRT_OP(CONV_BACKWARD_WEIGHT) && g->Cig > 4;
}

nrt_status nrt_conv_implicit_weight(const nrt_conv_geom *g, const nrt_launch *l) {
  wplan p = {.g = g, .l = l};
  const nrt_operand *gy = &l->operands[1], *x = &l->operands[2];
  p.x = x->data;
  for (int i = 0; i < 5; i++) p.xs[i] = x->strides[i] / 4;
  p.kern = nrt_kernels_isa() >= NRT_ISA_AVX512 ? wkernel_avx512 : wkernel_portable;
  p.npan = nrt_cdiv(g->Cog, WNR);
  p.ncb = nrt_cdiv(g->Cig, WMR);
  p.cog_pad = p.npan * WNR;
  /* dy read in place when each pixel's channels are one unit-stride run
   * that the 32-channel loads never overrun */
  bool in_place = gy->strides[1] == 4 && g->Cog % WNR == 0;
  if (in_place) {
    p.b = gy->data;
    for (int i = 0; i < 5; i++) p.bs[i] = gy->strides[i] / 4;
    p.bgrp = g->Cog;
    nrt_parallel_for(g->N, 1, wcheck_dy, &p);
  } else {
    p.copy = nrt_conv_falloc(g->G * g->N * g->L * p.cog_pad);
    if (!p.copy) return NRT_ERROR_OUT_OF_MEMORY;
    nrt_parallel_for(g->G * g->N, 1, wcopy_dy, &p);
    /* copy[grp][n][pixel][c]: each group's channels start a [N][L][cog_pad] block */
    p.b = p.copy;
    p.bgrp = g->N * g->L * p.cog_pad;
    p.bs[0] = g->L * p.cog_pad;
    p.bs[1] = 1;
    p.bs[2] = g->O[1] * g->O[2] * p.cog_pad;
    p.bs[3] = g->O[2] * p.cog_pad;
    p.bs[4] = p.cog_pad;
  }
  /* Tiles (group, tap, 32-channel panel, 14-channel block). 4 tasks per
   * thread, as slices of the output rows times blocks of tiles: each
   * slice beyond the first writes and reads partial sums the size of
   * grad_w, each block beyond the first reads x and dy once more. Pick
   * the split that moves the fewest bytes: slices for wide feature maps
   * and few channels, blocks for deep layers' small maps and large
   * weights (where partial sums of 8 slices were 7 x grad_w). */
  p.ntiles = g->G * g->KK * p.npan * p.ncb;
  int64_t nrows = g->N * g->O[0] * g->O[1];
  p.rows_chunk = nrt_max_i64(1, nrt_cdiv(CHUNK_PIXELS, g->O[2]));
  double wbytes = (double)p.ntiles * WMR * WNR * 4, abytes = 4.0 * g->N * g->G * (g->L * g->Cog + g->LI * g->Cig);
  int64_t tasks = 4 * (int64_t)nrt_pool_threads(), max_sl = nrt_max_i64(1, nrows / p.rows_chunk);
  double best = -1;
  for (int64_t sl = 1; sl <= tasks; sl *= 2) {
    int64_t ns = nrt_min_i64(sl, max_sl), nb = nrt_max_i64(1, nrt_min_i64(tasks / sl, p.ntiles));
    double cost = (double)(ns - 1) * 2 * wbytes + (double)(nb - 1) * abytes;
    if (best < 0 || cost < best) {
      best = cost;
      p.nslices = ns;
      p.nblocks = nb;
    }
  }
  if (!p.failed) p.part = nrt_conv_falloc(p.nslices * p.ntiles * WMR * WNR);
  if (!p.failed && !p.part) p.failed = 1;
  if (!p.failed) nrt_parallel_for(p.nslices * p.nblocks, 1, wtasks, &p);
  if (!p.failed) nrt_parallel_for(p.ntiles / g->KK, 1, wfinish, &p);
  if (!p.failed && p.nonfinite && (g->P[0] || g->P[1] || g->P[2])) poison(&p);
  free(p.copy);
  free(p.part);
  if (p.failed)
    return nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for work buffers", nrt_op_name(l->op));
  return NRT_SUCCESS;
}
