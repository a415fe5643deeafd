/* The convolution's forward pass as a GEMM (see conv.c):
 * y (Cog x N*L) = W (Cog x Kdim) @ col (Kdim x N*L) per group. The weights
 * are packed once per launch into A panels; the im2col matrix is never
 * materialised: each tile generates its KC-deep slices straight into B
 * panels. Tasks are (group, tile of output columns, block of output
 * channels); columns run across images, so small feature maps still make
 * wide tiles; with channel blocks, each tile's panels are generated once
 * into a shared buffer. */
#pragma GCC optimize("O3,no-trapping-math,no-math-errno")
#include "kernels/conv/conv.h"

/* bfloat16 pair panels of the weights: unit (kp, i) = (W[i][k0 + 2kp],
 * W[i][k0 + 2kp + 1]), from bf16 rows contiguous in the taps. */
static void fwd_pack_w_bf16(nrt_conv_plan *p, int64_t u, uint16_t *rows) {
  const nrt_conv_geom *g = p->g;
  const nrt_operand *w = &p->l->operands[2];
  int64_t MR = p->MR, grp = u / p->mp, ip = u % p->mp;
  int64_t nrow = nrt_min_i64(MR, g->Cog - ip * MR);
  const uint16_t *rp[14];
  const int64_t *ws = w->strides;
  bool lin = w->dtype == NRT_BFLOAT16 && ws[4] == 2 && nrt_conv_w_taps_linear(g, ws);
  for (int64_t i = 0; i < MR; i++) {
    uint16_t *r = rows + i * g->Kdim;
    if (i < nrow && lin) {
      rp[i] = (const uint16_t *)((const char *)w->data + (grp * g->Cog + ip * MR + i) * ws[0]);
      continue;
    }
    if (i < nrow) {
      float *tmp = (float *)(rows + MR * g->Kdim);
      nrt_conv_w_row(g, w, grp * g->Cog + ip * MR + i, 0, g->Kdim, tmp, false);
      for (int64_t k = 0; k < g->Kdim; k++) r[k] = nrt_k_f32_to_bf16(tmp[k]);
    } else {
      memset(r, 0, sizeof(uint16_t) * (size_t)g->Kdim);
    }
    rp[i] = r;
  }
  float *base = p->wp + grp * p->wp_unit;
  for (int64_t k0 = 0; k0 < g->Kdim; k0 += p->KC) {
    int64_t kc = nrt_min_i64(p->KC, g->Kdim - k0), full = kc / 2;
    uint16_t *panel = (uint16_t *)(base + p->mp * MR * nrt_conv_units(p, k0) + ip * MR * nrt_conv_units(p, kc));
    const void *r[14];
    for (int64_t i = 0; i < MR; i++) r[i] = rp[i] + k0;
    nrt_gemm_pack_a14_avx512(r, full, panel);
    if (kc & 1)
      for (int64_t i = 0; i < MR; i++) {
        panel[2 * (full * MR + i)] = rp[i][k0 + kc - 1];
        panel[2 * (full * MR + i) + 1] = 0;
      }
  }
}

/* Weight panels for the forward: per group, for each KC slice of taps, for
 * each MR-row panel: element (k, i) = W[group row i][tap k]. */
static void fwd_pack_w(void *ctx, int64_t begin, int64_t end) {
  nrt_conv_plan *p = ctx;
  const nrt_conv_geom *g = p->g;
  const nrt_operand *w = &p->l->operands[2];
  int64_t MR = p->MR;
  nrt_conv_bufs wb;
  if (!nrt_conv_bufs_alloc(p, &wb, 1, (const int64_t[]){MR * g->Kdim + g->Kdim})) return;
  float *rows = wb.b[0];
  if (p->uk->bf16_pairs) {
    for (int64_t u = begin; u < end; u++) fwd_pack_w_bf16(p, u, (uint16_t *)rows);
    nrt_conv_bufs_free(&wb);
    return;
  }
  for (int64_t u = begin; u < end; u++) {
    int64_t grp = u / p->mp, ip = u % p->mp;
    int64_t nrow = nrt_min_i64(MR, g->Cog - ip * MR);
    const float *rp[32];
    for (int64_t i = 0; i < MR; i++) {
      const float *direct = i < nrow ? nrt_conv_w_row_f32(g, w, grp * g->Cog + ip * MR + i) : NULL;
      if (!direct) {
        if (i < nrow) nrt_conv_w_row(g, w, grp * g->Cog + ip * MR + i, 0, g->Kdim, rows + i * g->Kdim, false);
        else memset(rows + i * g->Kdim, 0, sizeof(float) * (size_t)g->Kdim);
        direct = rows + i * g->Kdim;
      }
      rp[i] = direct;
    }
    float *base = p->wp + grp * p->wp_unit;
    for (int64_t k0 = 0; k0 < g->Kdim; k0 += p->KC) {
      int64_t kc = nrt_min_i64(p->KC, g->Kdim - k0);
      const float *r[32];
      for (int64_t i = 0; i < MR; i++) r[i] = rp[i] + k0;
      nrt_gemm_pack_full(p->uk, true, r, kc, base + p->mp * MR * k0 + ip * MR * kc);
    }
  }
  nrt_conv_bufs_free(&wb);
}

/* Columns [q0, q0 + nt) of forward tile t. */
static void fwd_tile_cols(const nrt_conv_plan *p, int64_t t, int64_t *q0, int64_t *nt) {
  const nrt_conv_geom *g = p->g;
  if (p->tpi) {
    *q0 = t / p->tpi * g->L + t % p->tpi * p->NT;
    *nt = nrt_min_i64(p->NT, g->L - t % p->tpi * p->NT);
  } else {
    *q0 = t * p->NT;
    *nt = nrt_min_i64(p->NT, g->N * g->L - *q0);
  }
}

/* Packed B panels (im2col rows) of one KC slice of a tile: slice k0 of
 * tile (grp, t) occupies NT * kc floats from bp. */
static void fwd_gen_slice(const nrt_conv_plan *p, int64_t grp, int64_t q0, int64_t nt, int64_t k0, int64_t kc,
                          float *row, float *bp) {
  if (p->uk->bf16_pairs) {
    /* pairs of im2col rows, interleaved 16 bits at a time: unit (kp, j) =
     * (col[k0 + 2kp][j], col[k0 + 2kp + 1][j]); the rows are bfloat16
     * values already, so the round trip through float is exact */
    int64_t NR = p->NR, ku = nrt_conv_units(p, kc);
    uint16_t *r0 = (uint16_t *)row, *r1 = r0 + p->NT;
    uint32_t *b32 = (uint32_t *)bp;
    for (int64_t kp = 0; kp < ku; kp++) {
      nrt_conv_tap t;
      nrt_conv_tap_init(p->g, k0 + 2 * kp, &t);
      nrt_conv_im2col(p->g, &t, &p->l->operands[1], grp, q0, nt, r0, true);
      if (2 * kp + 1 < kc) {
        nrt_conv_tap_init(p->g, k0 + 2 * kp + 1, &t);
        nrt_conv_im2col(p->g, &t, &p->l->operands[1], grp, q0, nt, r1, true);
      } else {
        memset(r1, 0, sizeof(uint16_t) * (size_t)nt);
      }
      for (int64_t jp = 0; jp < nt; jp += NR) {
        uint32_t *d = b32 + jp * ku + kp * NR;
        int64_t cols = nrt_min_i64(NR, nt - jp);
        for (int64_t j = 0; j < cols; j++) d[j] = (uint32_t)r0[jp + j] | (uint32_t)r1[jp + j] << 16;
        for (int64_t j = cols; j < NR; j++) d[j] = 0;
      }
    }
    return;
  }
  for (int64_t k = 0; k < kc; k++) {
    nrt_conv_tap t;
    nrt_conv_tap_init(p->g, k0 + k, &t);
    nrt_conv_im2col(p->g, &t, &p->l->operands[1], grp, q0, nt, row, false);
    nrt_conv_row_to_bpanels(p, row, nt, k, kc, bp);
  }
}

static void fwd_gen_shared(void *ctx, int64_t begin, int64_t end) {
  nrt_conv_plan *p = ctx;
  const nrt_conv_geom *g = p->g;
  int64_t nslices = nrt_cdiv(g->Kdim, p->KC);
  nrt_conv_bufs w;
  if (!nrt_conv_bufs_alloc(p, &w, 1, (const int64_t[]){2 * p->NT})) return;
  for (int64_t u = begin; u < end; u++) {
    int64_t gt = u / nslices, k0 = u % nslices * p->KC, q0, nt;
    fwd_tile_cols(p, gt % p->ntiles, &q0, &nt);
    fwd_gen_slice(p, gt / p->ntiles, q0, nt, k0, nrt_min_i64(p->KC, g->Kdim - k0), w.b[0],
                  p->bshared + gt * nrt_conv_units(p, g->Kdim) * p->NT + nrt_conv_units(p, k0) * p->NT);
  }
  nrt_conv_bufs_free(&w);
}

static void fwd_tiles(void *ctx, int64_t begin, int64_t end) {
  nrt_conv_plan *p = ctx;
  const nrt_conv_geom *g = p->g;
  const nrt_launch *l = p->l;
  const nrt_operand *y = &l->operands[0];
  const nrt_operand *bias = l->ninputs == 3 ? &l->operands[3] : NULL;
  int64_t MR = p->MR, NR = p->NR, NT = p->NT, KC = p->KC;
  int64_t rows_pad = p->mp * MR;
  nrt_conv_bufs w;
  if (!nrt_conv_bufs_alloc(p, &w, 4, (const int64_t[]){KC * NT, 2 * NT, rows_pad * NT, MR * NR})) return;
  float *bp = w.b[0], *row = w.b[1], *ct = w.b[2], *edge = w.b[3];
  bool y_lin = y->dtype == NRT_FLOAT32 && nrt_conv_plane_linear(g->O, y->strides + 2) && y->strides[4] == 4;
  for (int64_t task = begin; task < end; task++) {
    int64_t mb = task % p->nmb, gt = task / p->nmb;
    int64_t grp = gt / p->ntiles, t = gt % p->ntiles, q0, nt;
    int64_t ip0 = mb * p->mpb, ip1 = nrt_min_i64(p->mp, ip0 + p->mpb);
    int64_t m0 = ip0 * MR, m1 = nrt_min_i64(g->Cog, ip1 * MR);
    fwd_tile_cols(p, t, &q0, &nt);
    if (nt <= 0 || m0 >= m1) continue;
    int64_t n0 = q0 / g->L, pix0 = q0 - n0 * g->L;
    /* Direct C: y's own memory when the tile is one linear run of it. */
    bool direct = y_lin && pix0 + nt <= g->L;
    float *c;
    int64_t ldc;
    if (direct) {
      c = (float *)(NRT_CONV_ACT(y, n0, grp * g->Cog) + pix0 * 4);
      ldc = y->strides[1] / 4;
    } else {
      c = ct;
      ldc = NT;
    }
    int accumulate = 0;
    if (bias) {
      for (int64_t m = m0; m < m1; m++) {
        float v = nrt_conv_load1(bias, grp * g->Cog + m);
        for (int64_t j = 0; j < nt; j++) c[m * ldc + j] = v;
      }
      accumulate = 1;
    }
    const float *wg = p->wp + grp * p->wp_unit;
    for (int64_t k0 = 0; k0 < g->Kdim; k0 += KC) {
      int64_t kc = nrt_min_i64(KC, g->Kdim - k0), ku = nrt_conv_units(p, kc), k0u = nrt_conv_units(p, k0);
      const float *b;
      if (p->bshared) {
        b = p->bshared + gt * nrt_conv_units(p, g->Kdim) * NT + k0u * NT;
      } else {
        fwd_gen_slice(p, grp, q0, nt, k0, kc, row, bp);
        b = bp;
      }
      for (int64_t ip = ip0; ip < ip1; ip++) {
        int64_t rows = nrt_min_i64(MR, g->Cog - ip * MR);
        const float *ap = wg + p->mp * MR * k0u + ip * MR * ku;
        for (int64_t jp = 0; jp < nt; jp += NR) {
          int64_t cols = nrt_min_i64(NR, nt - jp);
          float *cb = c + ip * MR * ldc + jp;
          if (direct) {
            nrt_gemm_ukernel_block(p->uk, ku, ap, b + jp * ku, cb, ldc, rows, cols, 1.0f, accumulate, edge);
          } else {
            /* the scratch tile has room for full blocks */
            p->uk->fn(ku, ap, b + jp * ku, cb, ldc, 1.0f, accumulate);
          }
        }
      }
      accumulate = 1;
    }
    if (!direct)
      for (int64_t m = m0; m < m1; m++) {
        /* columns may span images: act_cols splits them */
        int64_t e[3] = {g->O[0], g->O[1], g->O[2]};
        nrt_conv_act_cols(y, e, grp * g->Cog + m, q0, nt, ct + m * NT, true);
      }
  }
  nrt_conv_bufs_free(&w);
}

nrt_status nrt_conv_forward(const nrt_conv_geom *g, const nrt_launch *l) {
  nrt_conv_plan p;
  nrt_conv_plan_init(&p, g, l);
  p.KC = nrt_min_i64(p.uk->kc, g->Kdim);
  p.mp = nrt_cdiv(g->Cog, p.MR);
  p.wp_unit = p.mp * p.MR * nrt_conv_units(&p, g->Kdim);
  int threads = nrt_pool_threads();
  int64_t cols = g->N * g->L;
  /* Column tiles of at most 512, evened out; large images are tiled one
   * by one, so that tiles write straight into y, small ones together.
   * When that leaves fewer than 4 tasks per thread, the output channels
   * are split into blocks of at least 4 row panels (each block generates
   * its own im2col tile, which costs 1 / (2 * rows) of its flops), and
   * then, for small Cog, the columns into narrower tiles. */
  int64_t want = 4 * threads;
  const int64_t ntmax = 512;
  if (g->L >= ntmax || g->N * g->L >= ntmax * want) {
    p.tpi = nrt_cdiv(g->L, ntmax);
    p.NT = nrt_round_up(nrt_cdiv(g->L, p.tpi), p.NR);
    p.tpi = nrt_cdiv(g->L, p.NT);
    p.ntiles = g->N * p.tpi;
  } else {
    p.NT = nrt_round_up(nrt_cdiv(cols, nrt_cdiv(cols, ntmax)), p.NR);
    p.ntiles = nrt_cdiv(cols, p.NT);
  }
  p.nmb = nrt_max_i64(1, nrt_min_i64(nrt_cdiv(want, g->G * p.ntiles), p.mp / 4));
  p.mpb = nrt_cdiv(p.mp, p.nmb);
  p.nmb = nrt_cdiv(p.mp, p.mpb);
  if (g->G * p.ntiles * p.nmb < want && p.tpi == 0) {
    int64_t nt = nrt_min_i64(nrt_cdiv(want, g->G * p.nmb), nrt_cdiv(cols, 4 * p.NR));
    if (nt > p.ntiles) {
      p.NT = nrt_round_up(nrt_cdiv(cols, nt), p.NR);
      p.ntiles = nrt_cdiv(cols, p.NT);
    }
  } else if (g->G * p.ntiles * p.nmb < want) {
    int64_t tpi = nrt_min_i64(nrt_cdiv(want, g->G * p.nmb * g->N), nrt_cdiv(g->L, 4 * p.NR));
    if (tpi > p.tpi) {
      p.NT = nrt_round_up(nrt_cdiv(g->L, tpi), p.NR);
      p.tpi = nrt_cdiv(g->L, p.NT);
      p.ntiles = g->N * p.tpi;
    }
  }
  p.wp = nrt_conv_falloc(g->G * p.wp_unit);
  if (!p.wp) return NRT_ERROR_OUT_OF_MEMORY;
  nrt_parallel_for(g->G * p.mp, 1, fwd_pack_w, &p);
  /* Channel blocks would each regenerate their tile's im2col panels:
   * generate them once instead when they fit in 64 MiB. */
  int64_t shared = g->G * p.ntiles * nrt_conv_units(&p, g->Kdim) * p.NT;
  if (!p.failed && p.nmb > 1 && shared <= (64 << 20) / 4) {
    p.bshared = nrt_conv_falloc(shared);
    if (p.bshared) nrt_parallel_for(g->G * p.ntiles * nrt_cdiv(g->Kdim, p.KC), 1, fwd_gen_shared, &p);
  }
  if (!p.failed) {
    double flops = 2.0 * (double)(p.mpb * p.MR) * (double)g->Kdim * (double)p.NT;
    nrt_parallel_for(g->G * p.ntiles * p.nmb, flops >= 2e5 ? 1 : (int64_t)(2e5 / flops) + 1, fwd_tiles, &p);
  }
  free(p.wp);
  free(p.bshared);
  return nrt_conv_plan_status(&p, "packing buffers");
}

