/* The convolution's input gradient as a GEMM (see conv.c), which is also
 * the transposed convolution: dcol (Kdim x cols) = W^T (Kdim x Cog) @ dy
 * (Cog x cols) per group, then col2im adds each dcol element to the input
 * element it was read from. W^T is packed once per launch; dy rows are
 * packed per tile. Tasks are (images, group, block of input channels):
 * col2im of different channels or images never touches the same element;
 * small images are grouped into one tile. */
#pragma GCC optimize("O3,no-trapping-math,no-math-errno")
#include "kernels/conv/conv.h"

/* col2im of one row segment: acc[input element of (tap, p0 + j)] += src[j]
 * for pixels of one image; `ac` is the tap's channel plane of float
 * accumulators with float strides as[0..2] (d, h, w). */
static void col2im_img(const nrt_conv_geom *g, const nrt_conv_tap *t, float *ac, const int64_t *as, int64_t p0,
                       int64_t len, const float *src) {
  const int64_t S2 = g->S[2], step = S2 * as[2];
  for (nrt_conv_run r = nrt_conv_run_first(g, t, p0, len); r.done < len; nrt_conv_run_next(g, t, len, &r)) {
    if (!r.inside) continue;
    const float *s = src + r.done + (r.a - r.ow);
    float *d = ac + r.id * as[0] + r.ih * as[1] + (r.a * S2 + t->off[2]) * as[2];
    if (step == 1) {
      for (int64_t j = 0; j < r.b - r.a; j++) d[j] += s[j];
    } else {
      for (int64_t j = 0; j < r.b - r.a; j++) d[j * step] += s[j];
    }
  }
}

/* Sets (add = false) or adds to (add = true) the channel planes [c0, c0 +
 * nc) of float accumulators (float strides as[0..3]: c, d, h, w)
 * bias[cb + c] (or 0). */
static void acc_bias(const nrt_conv_geom *g, float *ac, const int64_t *as, int64_t nc, const nrt_operand *bias,
                     int64_t cb, bool add) {
  for (int64_t c = 0; c < nc; c++) {
    float v = bias ? nrt_conv_load1(bias, cb + c) : 0.0f;
    for (int64_t d = 0; d < g->I[0]; d++)
      for (int64_t h = 0; h < g->I[1]; h++) {
        float *row = ac + c * as[0] + d * as[1] + h * as[2];
        int64_t s = as[3];
        if (add) {
          for (int64_t w = 0; w < g->I[2]; w++) row[w * s] += v;
        } else {
          for (int64_t w = 0; w < g->I[2]; w++) row[w * s] = v;
        }
      }
  }
}

/* Stores dense accumulator planes [nc][LI] into grad_x channels cb.. of image n. */
static void acc_store(const nrt_conv_geom *g, const nrt_operand *gx, int64_t n, int64_t cb, int64_t nc,
                      const float *ac) {
  for (int64_t c = 0; c < nc; c++) nrt_conv_act_cols(gx, g->I, cb + c, n * g->LI, g->LI, (float *)ac + c * g->LI, true);
}

/* Accumulator planes for image n, channels [cb, cb + nc) of grad_x: grad_x
 * itself when it is float32 (float strides), else a dense scratch. */
static float *acc_planes(const nrt_conv_geom *g, const nrt_operand *gx, int64_t n, int64_t cb, float *scratch,
                         int64_t as[4]) {
  if (gx->dtype == NRT_FLOAT32) {
    for (int i = 0; i < 4; i++) as[i] = gx->strides[1 + i] / 4;
    return (float *)NRT_CONV_ACT(gx, n, cb);
  }
  as[0] = g->LI;
  as[1] = g->I[1] * g->I[2];
  as[2] = g->I[2];
  as[3] = 1;
  return scratch;
}

/* W^T panels per (group, channel block): rows are the block's taps, the
 * depth runs over Cog in KC slices: element (k, i) = W[group row k][tap i]. */
static void bwdi_pack_w(void *ctx, int64_t begin, int64_t end) {
  nrt_conv_plan *p = ctx;
  const nrt_conv_geom *g = p->g;
  const nrt_operand *w = &p->l->operands[2];
  int64_t MR = p->MR, nrows_max = p->cb * g->KK;
  nrt_conv_bufs wb;
  if (p->KC > 512) { /* the slice's row pointers live on the stack */
    p->failed = 1;
    return;
  }
  if (!nrt_conv_bufs_alloc(p, &wb, 1, (const int64_t[]){p->KC * (nrows_max + MR)})) return;
  float *rows = wb.b[0];
  for (int64_t u = begin; u < end; u++) {
    int64_t grp = u / p->nblk, blk = u % p->nblk;
    int64_t ci0 = blk * p->cb, nrows = nrt_min_i64(p->cb, g->Cig - ci0) * g->KK;
    int64_t rows_pad = nrt_round_up(nrows, MR), ld = rows_pad;
    float *base = p->wp + u * p->wp_unit;
    for (int64_t k0 = 0; k0 < g->Cog; k0 += p->KC) {
      int64_t kc = nrt_min_i64(p->KC, g->Cog - k0);
      /* the slice's W rows (taps of this block), zero-padded to rows_pad */
      const float *src[512 + 1];
      for (int64_t k = 0; k < kc; k++) {
        int64_t o = grp * g->Cog + k0 + k;
        const float *direct = rows_pad == nrows ? nrt_conv_w_row_f32(g, w, o) : NULL;
        if (direct) {
          src[k] = direct + ci0 * g->KK;
        } else {
          nrt_conv_w_row(g, w, o, ci0 * g->KK, nrows, rows + k * ld, false);
          memset(rows + k * ld + nrows, 0, sizeof(float) * (size_t)(rows_pad - nrows));
          src[k] = rows + k * ld;
        }
      }
      /* panel ip, row k (= output channel k0 + k): MR consecutive taps;
       * bfloat16 pairs: unit (kp, i) = channels k0 + 2kp, + 1 */
      int64_t ku = nrt_conv_units(p, kc);
      for (int64_t ip = 0; ip < rows_pad; ip += MR) {
        float *panel = base + rows_pad * nrt_conv_units(p, k0) + ip * ku;
        if (p->uk->bf16_pairs) {
          for (int64_t kp = 0; kp < ku; kp++)
            nrt_conv_pair_row((uint32_t *)panel + kp * MR, src[2 * kp] + ip,
                              2 * kp + 1 < kc ? src[2 * kp + 1] + ip : NULL, MR, MR);
        } else {
          for (int64_t k = 0; k < kc; k++) memcpy(panel + k * MR, src[k] + ip, sizeof(float) * (size_t)MR);
        }
      }
    }
  }
  nrt_conv_bufs_free(&wb);
}

/* Tasks (image group, group, channel block). An image group is one image
 * tiled by pixels, or several whole small images forming one tile. */
static void bwdi_tasks(void *ctx, int64_t begin, int64_t end) {
  nrt_conv_plan *p = ctx;
  const nrt_conv_geom *g = p->g;
  const nrt_launch *l = p->l;
  const nrt_operand *gx = &l->operands[0], *gy = &l->operands[1];
  const nrt_operand *bias = l->ninputs == 3 ? &l->operands[3] : NULL;
  int64_t MR = p->MR, NR = p->NR, NT = p->NT, KC = p->KC, ipt = p->tpi;
  int64_t rows_pad_max = nrt_round_up(p->cb * g->KK, MR);
  /* float32 grad_x accumulates in place; else in a dense scratch; the
   * last buffer holds the ipt images' accumulator pointers */
  bool in_place = gx->dtype == NRT_FLOAT32;
  nrt_conv_bufs w;
  int64_t sizes[5] = {KC * NT, 2 * NT, rows_pad_max * NT, in_place ? 0 : ipt * p->cb * g->LI,
                      nrt_cdiv(ipt * (int64_t)sizeof(float *), (int64_t)sizeof(float))};
  if (!nrt_conv_bufs_alloc(p, &w, 5, sizes)) return;
  float *bp = w.b[0], *row = w.b[1], *dcol = w.b[2], *scratch = in_place ? NULL : w.b[3];
  float **acs = (float **)w.b[4];
  for (int64_t task = begin; task < end; task++) {
    int64_t ig = task / (g->G * p->nblk), u = task % (g->G * p->nblk);
    int64_t grp = u / p->nblk, blk = u % p->nblk;
    int64_t n0 = ig * ipt, ni = nrt_min_i64(ipt, g->N - n0);
    int64_t ci0 = blk * p->cb, ncb = nrt_min_i64(p->cb, g->Cig - ci0), nrows = ncb * g->KK;
    int64_t rows_pad = nrt_round_up(nrows, MR);
    int64_t as[4] = {0, 0, 0, 0};
    for (int64_t i = 0; i < ni; i++) {
      acs[i] = acc_planes(g, gx, n0 + i, grp * g->Cig + ci0, scratch ? scratch + i * p->cb * g->LI : NULL, as);
      acc_bias(g, acs[i], as, ncb, NULL, grp * g->Cig + ci0, false);
    }
    const float *wb = p->wp + u * p->wp_unit;
    int64_t cols = ni * g->L;
    for (int64_t c0 = 0; c0 < cols; c0 += NT) {
      int64_t nt = nrt_min_i64(NT, cols - c0), q0 = n0 * g->L + c0;
      for (int64_t k0 = 0; k0 < g->Cog; k0 += KC) {
        int64_t kc = nrt_min_i64(KC, g->Cog - k0), ku = nrt_conv_units(p, kc);
        if (p->uk->bf16_pairs) {
          for (int64_t kp = 0; kp < ku; kp++) {
            nrt_conv_act_cols(gy, g->O, grp * g->Cog + k0 + 2 * kp, q0, nt, row, false);
            bool two = 2 * kp + 1 < kc;
            if (two) nrt_conv_act_cols(gy, g->O, grp * g->Cog + k0 + 2 * kp + 1, q0, nt, row + NT, false);
            nrt_conv_rows_to_bpanels_pairs(p, row, two ? row + NT : NULL, nt, kp, ku, bp);
          }
        } else {
          for (int64_t k = 0; k < kc; k++) {
            nrt_conv_act_cols(gy, g->O, grp * g->Cog + k0 + k, q0, nt, row, false);
            nrt_conv_row_to_bpanels(p, row, nt, k, kc, bp);
          }
        }
        for (int64_t ip = 0; ip < rows_pad; ip += MR) {
          const float *ap = wb + rows_pad * nrt_conv_units(p, k0) + ip * ku;
          for (int64_t jp = 0; jp < nt; jp += NR)
            p->uk->fn(ku, ap, bp + jp * ku, dcol + ip * NT + jp, NT, 1.0f, k0 > 0);
        }
      }
      for (int64_t r = 0; r < nrows; r++) {
        nrt_conv_tap t;
        nrt_conv_tap_init(g, ci0 * g->KK + r, &t);
        for (int64_t q = q0; q < q0 + nt;) {
          int64_t n = q / g->L, pix = q - n * g->L, len = nrt_min_i64(g->L - pix, q0 + nt - q);
          col2im_img(g, &t, acs[n - n0] + (t.ci - ci0) * as[0], as + 1, pix, len, dcol + r * NT + (q - q0));
          q += len;
        }
      }
    }
    /* The bias (a transposed convolution's) last, after col2im, as the
     * CPU adds it (oneDNN and the float64 path alike): with large terms
     * that cancel, added first it would be absorbed. */
    if (bias)
      for (int64_t i = 0; i < ni; i++) acc_bias(g, acs[i], as, ncb, bias, grp * g->Cig + ci0, true);
    if (gx->dtype != NRT_FLOAT32)
      for (int64_t i = 0; i < ni; i++) acc_store(g, gx, n0 + i, grp * g->Cig + ci0, ncb, acs[i]);
  }
  nrt_conv_bufs_free(&w);
}

nrt_status nrt_conv_backward_input(const nrt_conv_geom *g, const nrt_launch *l) {
  nrt_conv_plan p;
  nrt_conv_plan_init(&p, g, l);
  p.KC = nrt_min_i64(p.uk->kc, g->Cog);
  int threads = nrt_pool_threads();
  /* Channel blocks of at most ~256 taps (rows of dcol), and enough blocks
   * for 4 tasks per thread; then a dcol tile of about 512 KiB (half an L2)
   * sets the width. Small images are grouped into one tile (whole images,
   * so that no two tasks scatter into the same image), large ones are
   * tiled by pixels, evened out. */
  int64_t want = 4 * threads;
  int64_t nblk = nrt_min_i64(g->Cig, nrt_max_i64(nrt_cdiv(want, g->N * g->G), nrt_cdiv(g->Kdim, 256)));
  p.cb = nrt_cdiv(g->Cig, nblk);
  p.nblk = nrt_cdiv(g->Cig, p.cb);
  int64_t rows_pad = nrt_round_up(p.cb * g->KK, p.MR);
  int64_t ntmax = nrt_min_i64(1024, nrt_max_i64(p.NR, (131072 / rows_pad) / p.NR * p.NR));
  int64_t ipt = 1;
  if (g->L < ntmax) {
    ipt = nrt_max_i64(1, nrt_min_i64(g->N, ntmax / g->L));
    /* keep enough tasks */
    while (ipt > 1 && nrt_cdiv(g->N, ipt) * g->G * p.nblk < want) ipt--;
    p.NT = nrt_round_up(ipt * g->L, p.NR);
  } else {
    p.NT = nrt_round_up(nrt_cdiv(g->L, nrt_cdiv(g->L, ntmax)), p.NR);
  }
  p.tpi = ipt;
  p.wp_unit = rows_pad * nrt_conv_units(&p, g->Cog);
  p.wp = nrt_conv_falloc(g->G * p.nblk * p.wp_unit);
  if (!p.wp) return NRT_ERROR_OUT_OF_MEMORY;
  nrt_parallel_for(g->G * p.nblk, 1, bwdi_pack_w, &p);
  if (!p.failed) nrt_parallel_for(nrt_cdiv(g->N, ipt) * g->G * p.nblk, 1, bwdi_tasks, &p);
  free(p.wp);
  return nrt_conv_plan_status(&p, "packing buffers");
}

