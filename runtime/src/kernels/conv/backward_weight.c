/* The convolution's weight gradient as a GEMM (see conv.c): per group,
 * dW^T (Kdim x Cog) = col (Kdim x N*L) @ dy^T (N*L x Cog), with the
 * im2col rows generated straight into A panels. Tasks are (column slice,
 * group, block of Kdim rows); column slices keep partial sums, added up
 * in a final pass. */
#pragma GCC optimize("O3,no-trapping-math,no-math-errno")
#include "kernels/conv/conv.h"

/* A bfloat16 pair panel of w lanes from n lanes of kc floats (lane i at
 * lanes + i * kc): unit (kp, i) = (lane i at 2kp, at 2kp + 1 or 0 past
 * kc); lanes n..w-1 are zero units. */
static void pairs_from_lanes(const float *lanes, int64_t n, int64_t w, int64_t kc, uint32_t *panel) {
  for (int64_t kp = 0; kp < (kc + 1) / 2; kp++)
    for (int64_t i = 0; i < w; i++) {
      const float *r = lanes + i * kc;
      panel[kp * w + i] = i < n ? nrt_conv_bf16_pair(r[2 * kp], 2 * kp + 1 < kc ? r[2 * kp + 1] : 0.0f) : 0;
    }
}

/* A panel of MR im2col rows (taps kk0..) over kc columns from q0: element
 * (k, i) = col[kk0 + i][q0 + k]; rows past Kdim are zero. */
static void bwdw_pack_a(const nrt_conv_plan *p, int64_t grp, int64_t kk0, int64_t q0, int64_t kc, float *rows,
                        float *panel) {
  const nrt_conv_geom *g = p->g;
  const nrt_operand *x = &p->l->operands[2];
  int64_t MR = p->MR;
  int64_t nrow = nrt_min_i64(MR, g->Kdim - kk0);
  for (int64_t i = 0; i < nrow; i++) {
    nrt_conv_tap t;
    nrt_conv_tap_init(g, kk0 + i, &t);
    nrt_conv_im2col(g, &t, x, grp, q0, kc, rows + i * kc, false);
  }
  for (int64_t i = nrow; i < MR; i++) memset(rows + i * kc, 0, sizeof(float) * (size_t)kc);
  if (p->uk->bf16_pairs) {
    pairs_from_lanes(rows, MR, MR, kc, (uint32_t *)panel);
  } else {
    const float *rp[32];
    for (int64_t i = 0; i < MR; i++) rp[i] = rows + i * kc;
    nrt_gemm_pack_full(p->uk, true, rp, kc, panel);
  }
}

/* B panels of dy^T over kc columns from q0 (one image): element (k, j) =
 * dy[group channel jp + j][q0 + k]. */
static void bwdw_pack_b(const nrt_conv_plan *p, int64_t grp, int64_t q0, int64_t kc, float *rows, float *bp) {
  const nrt_conv_geom *g = p->g;
  const nrt_operand *gy = &p->l->operands[1];
  int64_t NR = p->NR;
  int64_t n = q0 / g->L, pix0 = q0 - n * g->L;
  bool fast = gy->dtype == NRT_FLOAT32 && gy->strides[4] == 4 && nrt_conv_plane_linear(g->O, gy->strides + 2);
  /* bfloat16 pairs straight from dy when its pixels are contiguous bits */
  bool raw = gy->dtype == NRT_BFLOAT16 && gy->strides[4] == 2 && nrt_conv_plane_linear(g->O, gy->strides + 2);
  int64_t ku = nrt_conv_units(p, kc);
  for (int64_t jp = 0; jp < p->cog_pad; jp += NR) {
    float *panel = bp + jp * ku;
    int64_t cols = nrt_min_i64(NR, g->Cog - jp);
    if (p->uk->bf16_pairs && raw && cols == NR && !(kc & 1)) {
      const void *cp[32];
      for (int64_t j = 0; j < NR; j++) cp[j] = NRT_CONV_ACT(gy, n, grp * g->Cog + jp + j) + pix0 * 2;
      nrt_gemm_pack_b32_avx512(cp, ku, panel);
      continue;
    }
    if (!p->uk->bf16_pairs && fast && cols == NR) {
      const float *cp[64];
      for (int64_t j = 0; j < NR; j++) cp[j] = (const float *)(NRT_CONV_ACT(gy, n, grp * g->Cog + jp + j) + pix0 * 4);
      nrt_gemm_pack_full(p->uk, false, cp, kc, panel);
      continue;
    }
    for (int64_t j = 0; j < cols; j++) nrt_conv_act_cols(gy, g->O, grp * g->Cog + jp + j, q0, kc, rows + j * kc, false);
    if (p->uk->bf16_pairs) {
      pairs_from_lanes(rows, cols, NR, kc, (uint32_t *)panel);
    } else {
      for (int64_t k = 0; k < kc; k++)
        for (int64_t j = 0; j < NR; j++) panel[k * NR + j] = j < cols ? rows[j * kc + k] : 0.0f;
    }
  }
}

/* Tasks (column slice, group, block of rb Kdim rows): C^T[rows][co] summed
 * over the slice's columns (whole batch when nsplit == 1, then stored
 * straight into grad_w; else into the partial buffer). */
static void bwdw_tasks(void *ctx, int64_t begin, int64_t end) {
  nrt_conv_plan *p = ctx;
  const nrt_conv_geom *g = p->g;
  const nrt_operand *gw = &p->l->operands[0];
  int64_t MR = p->MR, NR = p->NR, KC = p->KC, rb = p->cb;
  int64_t rbuf_n = nrt_max_i64(MR, NR) * KC;
  /* one column slice: the task's block of C^T is local, else a slice of
   * the partial buffer */
  nrt_conv_bufs w;
  int64_t sizes[4] = {MR * KC, p->cog_pad * KC, nrt_max_i64(rbuf_n, rb), p->nsplit == 1 ? rb * p->cog_pad : 0};
  if (!nrt_conv_bufs_alloc(p, &w, 4, sizes)) return;
  float *ap = w.b[0], *bp = w.b[1], *rows = w.b[2], *local = p->nsplit == 1 ? w.b[3] : NULL;
  int64_t cols = g->N * g->L;
  for (int64_t task = begin; task < end; task++) {
    int64_t split = task / (g->G * p->nblk), u = task % (g->G * p->nblk);
    int64_t grp = u / p->nblk, blk = u % p->nblk;
    int64_t r0 = blk * rb, nr_rows = nrt_min_i64(rb, g->Kdim - r0);
    float *c = local ? local : p->part + ((split * g->G + grp) * p->kdim_pad + r0) * p->cog_pad;
    for (int64_t i = 0; i < rb * p->cog_pad; i++) c[i] = 0.0f;
    int64_t qa = split * cols / p->nsplit, qb = (split + 1) * cols / p->nsplit;
    for (int64_t q0 = qa; q0 < qb;) {
      /* slices of at most KC columns within one image */
      int64_t n = q0 / g->L, kc = nrt_min_i64(nrt_min_i64(KC, qb - q0), (n + 1) * g->L - q0);
      bwdw_pack_b(p, grp, q0, kc, rows, bp);
      for (int64_t ip = 0; ip < nr_rows; ip += MR) {
        bwdw_pack_a(p, grp, r0 + ip, q0, kc, rows, ap);
        for (int64_t jp = 0; jp < p->cog_pad; jp += NR)
          p->uk->fn(nrt_conv_units(p, kc), ap, bp + jp * nrt_conv_units(p, kc), c + ip * p->cog_pad + jp, p->cog_pad,
                    1.0f, 1);
      }
      q0 += kc;
    }
    if (local)
      for (int64_t co = 0; co < g->Cog; co++) {
        for (int64_t r = 0; r < nr_rows; r++) rows[r] = local[r * p->cog_pad + co];
        nrt_conv_w_row(g, gw, grp * g->Cog + co, r0, nr_rows, rows, true);
      }
  }
  nrt_conv_bufs_free(&w);
}

/* Sums the batch slices and stores grad_w rows: units are (group, block
 * of 16 output channels), read 16 contiguous floats per tap. */
#define FINISH_CO 16

static void bwdw_finish(void *ctx, int64_t begin, int64_t end) {
  nrt_conv_plan *p = ctx;
  const nrt_conv_geom *g = p->g;
  const nrt_operand *gw = &p->l->operands[0];
  int64_t nb = (g->Cog + FINISH_CO - 1) / FINISH_CO;
  nrt_conv_bufs w;
  if (!nrt_conv_bufs_alloc(p, &w, 1, (const int64_t[]){FINISH_CO * g->Kdim})) return;
  float *rows = w.b[0];
  for (int64_t u = begin; u < end; u++) {
    int64_t grp = u / nb, co0 = u % nb * FINISH_CO, nco = nrt_min_i64(FINISH_CO, g->Cog - co0);
    for (int64_t kk = 0; kk < g->Kdim; kk++) {
      float s[FINISH_CO] = {0};
      for (int64_t sp = 0; sp < p->nsplit; sp++) {
        const float *src = p->part + ((sp * g->G + grp) * p->kdim_pad + kk) * p->cog_pad + co0;
        for (int64_t j = 0; j < nco; j++) s[j] += src[j];
      }
      for (int64_t j = 0; j < nco; j++) rows[j * g->Kdim + kk] = s[j];
    }
    for (int64_t j = 0; j < nco; j++)
      nrt_conv_w_row(g, gw, grp * g->Cog + co0 + j, 0, g->Kdim, rows + j * g->Kdim, true);
  }
  nrt_conv_bufs_free(&w);
}

nrt_status nrt_conv_backward_weight(const nrt_conv_geom *g, const nrt_launch *l) {
  nrt_conv_plan p;
  nrt_conv_plan_init(&p, g, l);
  p.KC = p.uk->kc;
  p.cog_pad = nrt_round_up(g->Cog, p.NR);
  int threads = nrt_pool_threads();
  int64_t rpanels = nrt_cdiv(g->Kdim, p.MR);
  /* Row blocks of at least 8 panels (112 rows: the dy^T panels are packed
   * per block, and amortised over its rows), split further while there are
   * fewer than 4 tasks per thread; then the batch columns are sliced, with
   * partial sums added at the end. */
  int64_t want = 4 * threads;
  int64_t pb = nrt_max_i64(nrt_min_i64(8, rpanels), nrt_cdiv(rpanels, nrt_cdiv(want, g->G)));
  p.nblk = nrt_cdiv(rpanels, pb);
  p.cb = pb * p.MR;
  p.kdim_pad = p.nblk * p.cb;
  p.nsplit = 1;
  if (g->G * p.nblk < want) p.nsplit = nrt_min_i64(nrt_cdiv(g->N * g->L, 4 * p.KC), nrt_cdiv(want, g->G * p.nblk));
  if (p.nsplit < 1) p.nsplit = 1;
  if (p.nsplit > 1) {
    p.part = nrt_conv_falloc(p.nsplit * g->G * p.kdim_pad * p.cog_pad);
    if (!p.part) return NRT_ERROR_OUT_OF_MEMORY;
  }
  nrt_parallel_for(p.nsplit * g->G * p.nblk, 1, bwdw_tasks, &p);
  if (!p.failed && p.nsplit > 1) nrt_parallel_for(g->G * nrt_cdiv(g->Cog, FINISH_CO), 1, bwdw_finish, &p);
  free(p.part);
  return nrt_conv_plan_status(&p, "packing buffers");
}

