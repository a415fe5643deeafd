/* The convolution's direct path (few output channels per group, see
 * conv.c). Depthwise-style convolutions have almost nothing to reuse, so a
 * GEMM tile would be mostly padding. These work tap by tap over whole
 * planes held as dense float32: for each tap and output row, a
 * unit-stride (or strided) axpy between an input row and an output row.
 * Tasks: (image, group) for the forward and input gradient, group for the
 * weight gradient (it sums over images). */
#pragma GCC optimize("O3,no-trapping-math,no-math-errno")
#include <immintrin.h>
#include "kernels/conv/conv.h"

/* Loads (store = false) or stores `nc` channel planes of image n, channels
 * from c0, as dense float [nc][extent] (extent e[3]). */
static void planes_io(const nrt_operand *o, const int64_t *e, int64_t n, int64_t c0, int64_t nc, float *buf,
                      bool store) {
  int64_t npix = e[0] * e[1] * e[2];
  for (int64_t c = 0; c < nc; c++) nrt_conv_act_cols(o, e, c0 + c, n * npix, npix, buf + c * npix, store);
}

/* nc dense planes of npix set to bias[c0 + c] (or 0). */
static void planes_fill(float *buf, int64_t nc, int64_t npix, const nrt_operand *bias, int64_t c0) {
  for (int64_t c = 0; c < nc; c++) {
    float v = bias ? nrt_conv_load1(bias, c0 + c) : 0.0f;
    for (int64_t i = 0; i < npix; i++) buf[c * npix + i] = v;
  }
}

/* Calls body(tap, out row index ro, input row pointer offset ri) for every
 * output row whose tap row lies inside the input, with the tap's valid
 * output columns [t.lo, t.hi). */
#define FOR_TAP_ROWS(g, t, ro, ri, ...)                                                        \
  for (int64_t od_ = 0; od_ < (g)->O[0]; od_++) {                                              \
    int64_t id_ = od_ * (g)->S[0] + (t).off[0];                                                \
    if (id_ < 0 || id_ >= (g)->I[0]) continue;                                                 \
    for (int64_t oh_ = 0; oh_ < (g)->O[1]; oh_++) {                                            \
      int64_t ih_ = oh_ * (g)->S[1] + (t).off[1];                                              \
      if (ih_ < 0 || ih_ >= (g)->I[1]) continue;                                               \
      int64_t ro = (od_ * (g)->O[1] + oh_) * (g)->O[2];                                        \
      int64_t ri = (id_ * (g)->I[1] + ih_) * (g)->I[2] + (t).off[2];                           \
      __VA_ARGS__                                                                              \
    }                                                                                          \
  }

/* ---- non-finite values and the zero padding ----------------------------------
 * PyTorch's CPU convolutions (im2col, and every float64 one) multiply each
 * tap of a window that falls in the padding by the padding's zero, and
 * inf * 0 = NaN * 0 = NaN. The GEMM paths do too (they generate those
 * zeros); this path visits only the taps inside the input, so it applies
 * the rule afterwards, and only where a non-finite value exists: a NaN or
 * inf weight makes NaN of every output whose window has that tap in the
 * padding; a non-finite output gradient makes NaN of every weight-gradient
 * tap that reads padding at that output. (The input gradient needs
 * nothing: col2im drops what lands in the padding.) The checks are one
 * pass over values already loaded, so finite launches pay next to
 * nothing. */

/* Whether tap t of output pixel p reads the padding. */
static bool tap_padded(const nrt_conv_geom *g, const nrt_conv_tap *t, int64_t p) {
  int64_t od = p / (g->O[1] * g->O[2]), r = p - od * g->O[1] * g->O[2], oh = r / g->O[2], ow = r - oh * g->O[2];
  int64_t in[3] = {od * g->S[0] + t->off[0], oh * g->S[1] + t->off[1], ow * g->S[2] + t->off[2]};
  for (int i = 0; i < 3; i++)
    if (in[i] < 0 || in[i] >= g->I[i]) return true;
  return false;
}

static bool has_padding(const nrt_conv_geom *g) { return g->P[0] > 0 || g->P[1] > 0 || g->P[2] > 0; }

/* Forward: y[p] = NaN (one output plane) wherever a tap with a non-finite
 * weight wrow[kk] falls in the padding. */
static void poison_outputs(const nrt_conv_geom *g, const float *wrow, float *y) {
  for (int64_t kk = 0; kk < g->Kdim; kk++) {
    if (!nrt_conv_any_nonfinite(wrow + kk, 1)) continue;
    nrt_conv_tap t;
    nrt_conv_tap_init(g, kk, &t);
    for (int64_t p = 0; p < g->L; p++)
      if (tap_padded(g, &t, p)) y[p] = NAN;
  }
}

/* Weight gradient: acc[kk] = NaN for every tap that falls in the padding
 * at an output whose gradient dy[p] (one plane) is non-finite. */
static void poison_taps(const nrt_conv_geom *g, const float *dy, double *acc) {
  for (int64_t p = 0; p < g->L; p++) {
    if (!nrt_conv_any_nonfinite(dy + p, 1)) continue;
    for (int64_t kk = 0; kk < g->Kdim; kk++) {
      nrt_conv_tap t;
      nrt_conv_tap_init(g, kk, &t);
      if (tap_padded(g, &t, p)) acc[kk] = NAN;
    }
  }
}

/* ---- unit column stride on AVX-512: taps summed in registers ------------------
 * The tap-by-tap axpys above run one short loop (an output row) per tap
 * and row, each a vector loop with its alias checks and tails: on 56-wide
 * maps that overhead was most of a depthwise convolution. Here each 16
 * columns of an output row keep their sum in a register across all taps:
 *   out[pos] += w[t] * in[t's plane][pos + off[t]]
 * a masked load and a masked FMA per tap, the mask leaving out columns
 * whose input lies outside the row (padding: not multiplied, as the
 * scalar loops skip it) and columns past the row's end. Output rows step
 * the input rows by rs[0], rs[1] (the stride of the forward; 1 for the
 * input gradient); columns step by one. */
/* Columns per pass: four 16-lane sums, four independent FMA chains (one
 * chain waited out the FMA latency at every tap). */
#define DW_VECS 4

typedef struct dw_tap {
  int64_t plane, off[3]; /* input plane offset (floats) and offsets per dim */
  float w;
  uint16_t mask[DW_VECS]; /* the current columns' lanes that read inside the row */
} dw_tap;

/* live[v]: the lanes of vector v of the columns from ow0 that lie in the
 * output row (ocols wide); and each tap's mask: those of them whose input
 * column lies inside the input row (icols wide). */
static void dw_set_masks(dw_tap *taps, int64_t ntaps, int64_t ow0, int64_t ocols, int64_t icols,
                         uint32_t live[DW_VECS]) {
  for (int v = 0; v < DW_VECS; v++) {
    int64_t left = ocols - ow0 - 16 * v;
    live[v] = left >= 16 ? 0xffffu : left > 0 ? (1u << left) - 1 : 0;
  }
  for (int64_t t = 0; t < ntaps; t++)
    for (int v = 0; v < DW_VECS; v++) {
      int64_t c0 = ow0 + 16 * v + taps[t].off[2];
      int64_t lo = c0 < 0 ? -c0 : 0, hi = icols - c0 < 16 ? icols - c0 : 16;
      taps[t].mask[v] = (uint16_t)(hi <= lo ? 0 : live[v] & (((1u << hi) - 1) & ~((1u << lo) - 1)));
    }
}

/* Passes over 64 output columns at a time: the taps' lane masks depend
 * only on the columns, so they are set once per pass (taps[].mask), and
 * the rows then run with a row check, a masked load and a masked FMA per
 * tap and vector. */
NRT_TARGET_AVX512 static void dw_plane_avx512(const float *in, const int64_t *ie, float *out, const int64_t *oe,
                                              const int64_t *rs, dw_tap *taps, int64_t ntaps) {
  for (int64_t ow0 = 0; ow0 < oe[2]; ow0 += 16 * DW_VECS) {
    uint32_t live[DW_VECS];
    dw_set_masks(taps, ntaps, ow0, oe[2], ie[2], live);
    for (int64_t od = 0; od < oe[0]; od++)
      for (int64_t oh = 0; oh < oe[1]; oh++) {
        float *orow = out + (od * oe[1] + oh) * oe[2] + ow0;
        __m512 acc[DW_VECS];
        for (int v = 0; v < DW_VECS; v++) acc[v] = _mm512_maskz_loadu_ps((__mmask16)live[v], orow + 16 * v);
        for (int64_t t = 0; t < ntaps; t++) {
          const dw_tap *tp = &taps[t];
          int64_t id = od * rs[0] + tp->off[0], ih = oh * rs[1] + tp->off[1];
          if (id < 0 || id >= ie[0] || ih < 0 || ih >= ie[1]) continue;
          /* lanes before the row's start or past its end are masked off (no
           * fault); the address is formed as an integer, since it may lie
           * before the buffer */
          uintptr_t x0 = (uintptr_t)(in + tp->plane + (id * ie[1] + ih) * ie[2]) + (uintptr_t)((ow0 + tp->off[2]) * 4);
          __m512 wv = _mm512_set1_ps(tp->w);
          for (int v = 0; v < DW_VECS; v++) {
            __m512 xv = _mm512_maskz_loadu_ps((__mmask16)tp->mask[v], (const void *)(x0 + 64 * (uintptr_t)v));
            acc[v] = _mm512_mask3_fmadd_ps(wv, xv, acc[v], (__mmask16)tp->mask[v]);
          }
        }
        for (int v = 0; v < DW_VECS; v++) _mm512_mask_storeu_ps(orow + 16 * v, (__mmask16)live[v], acc[v]);
      }
  }
}

/* The weight gradient's form: acc[t] += sum over output pixels of
 * dy[pos] * in[t's plane][pos + off[t]], over the same masked lanes
 * (float sums per column block and plane, added in double). */
NRT_TARGET_AVX512 static void dw_wgrad_plane_avx512(const float *in, const int64_t *ie, const float *dy,
                                                    const int64_t *oe, const int64_t *rs, dw_tap *taps,
                                                    int64_t ntaps, double *acc) {
  for (int64_t ow0 = 0; ow0 < oe[2]; ow0 += 16 * DW_VECS) {
    uint32_t live[DW_VECS];
    dw_set_masks(taps, ntaps, ow0, oe[2], ie[2], live);
    for (int64_t t = 0; t < ntaps; t++) {
      const dw_tap *tp = &taps[t];
      __m512 sum[DW_VECS];
      for (int v = 0; v < DW_VECS; v++) sum[v] = _mm512_setzero_ps();
      for (int64_t od = 0; od < oe[0]; od++)
        for (int64_t oh = 0; oh < oe[1]; oh++) {
          int64_t id = od * rs[0] + tp->off[0], ih = oh * rs[1] + tp->off[1];
          if (id < 0 || id >= ie[0] || ih < 0 || ih >= ie[1]) continue;
          const float *drow = dy + (od * oe[1] + oh) * oe[2] + ow0;
          uintptr_t x0 = (uintptr_t)(in + tp->plane + (id * ie[1] + ih) * ie[2]) + (uintptr_t)((ow0 + tp->off[2]) * 4);
          for (int v = 0; v < DW_VECS; v++) {
            __mmask16 m = (__mmask16)tp->mask[v];
            __m512 xv = _mm512_maskz_loadu_ps(m, (const void *)(x0 + 64 * (uintptr_t)v));
            __m512 dv = _mm512_maskz_loadu_ps(m, drow + 16 * v);
            sum[v] = _mm512_mask3_fmadd_ps(dv, xv, sum[v], m);
          }
        }
      __m512 total = _mm512_add_ps(_mm512_add_ps(sum[0], sum[1]), _mm512_add_ps(sum[2], sum[3]));
      acc[t] += (double)_mm512_reduce_add_ps(total);
    }
  }
}

/* Whether a launch runs through dw_plane_avx512: AVX-512, unit column
 * stride, and for the input gradient unit strides everywhere (so it is a
 * forward over dy with the taps mirrored). */
static bool dw_applies(const nrt_conv_geom *g, bool backward) {
  if (nrt_kernels_isa() < NRT_ISA_AVX512 || g->S[2] != 1) return false;
  return !backward || (g->S[0] == 1 && g->S[1] == 1);
}

/* Output channel co's taps (wrow NULL: offsets only, no weights): the
 * forward reads x at o * S + k * D - P;
 * the input gradient, a forward over dy, reads dy at i + P - k * D. */
static void dw_taps(const nrt_conv_geom *g, const float *wrow, bool backward, dw_tap *taps) {
  for (int64_t kk = 0; kk < g->Kdim; kk++) {
    nrt_conv_tap t;
    nrt_conv_tap_init(g, kk, &t);
    dw_tap *d = &taps[kk];
    d->w = wrow ? wrow[kk] : 0.0f;
    d->plane = backward ? 0 : t.ci * g->LI;
    for (int i = 0; i < 3; i++) d->off[i] = backward ? -t.off[i] : t.off[i];
  }
}

/* Dense planes of one (image, group): x [Cig][LI], y [Cog][L], weights
 * [Cog][Kdim]; nacc doubles; and Kdim taps. */
static bool direct_alloc(nrt_conv_plan *p, nrt_conv_bufs *w, int64_t nacc) {
  const nrt_conv_geom *g = p->g;
  /* the last buffer holds dw_plane's taps (Kdim of them) */
  return nrt_conv_bufs_alloc(p, w, 5, (const int64_t[]){g->Cig * g->LI, g->Cog * g->L, g->Cog * g->Kdim, 2 * nacc,
                                                        nrt_cdiv(g->Kdim * (int64_t)sizeof(dw_tap), 4)});
}

/* Tasks (image, group) of the forward (y = sum over taps of w * x rows)
 * and of the input gradient (x = sum over taps of w * y rows, scattered
 * back through the same rows): the two passes differ only in which planes
 * are the input and which start at the bias and accumulate. */
static void direct_images(nrt_conv_plan *p, int64_t begin, int64_t end, bool backward) {
  const nrt_conv_geom *g = p->g;
  const nrt_launch *l = p->l;
  const nrt_operand *out = &l->operands[0], *in = &l->operands[1], *w = &l->operands[2];
  const nrt_operand *bias = l->ninputs == 3 ? &l->operands[3] : NULL;
  nrt_conv_bufs bufs;
  if (!direct_alloc(p, &bufs, 0)) return;
  float *bx = bufs.b[0], *by = bufs.b[1], *bw = bufs.b[2];
  dw_tap *taps = (dw_tap *)bufs.b[4];
  const int64_t S2 = g->S[2];
  const bool dw = dw_applies(g, backward);
  for (int64_t task = begin; task < end; task++) {
    int64_t n = task / g->G, grp = task % g->G;
    for (int64_t co = 0; co < g->Cog; co++)
      nrt_conv_w_row(g, w, grp * g->Cog + co, 0, g->Kdim, bw + co * g->Kdim, false);
    if (!backward) {
      planes_fill(by, g->Cog, g->L, bias, grp * g->Cog);
      planes_io(in, g->I, n, grp * g->Cig, g->Cig, bx, false);
    } else {
      planes_fill(bx, g->Cig, g->LI, NULL, grp * g->Cig); /* the bias last, below */
      planes_io(in, g->O, n, grp * g->Cog, g->Cog, by, false);
    }
    if (dw && !backward) {
      for (int64_t co = 0; co < g->Cog; co++) {
        dw_taps(g, bw + co * g->Kdim, false, taps);
        dw_plane_avx512(bx, g->I, by + co * g->L, g->O, g->S, taps, g->Kdim);
      }
    } else if (dw) {
      /* each input channel ci gathers from every output channel's dy
       * through that channel's taps of ci */
      for (int64_t co = 0; co < g->Cog; co++) {
        dw_taps(g, bw + co * g->Kdim, true, taps);
        for (int64_t ci = 0; ci < g->Cig; ci++)
          dw_plane_avx512(by + co * g->L, g->O, bx + ci * g->LI, g->I, (const int64_t[]){1, 1}, taps + ci * g->KK,
                          g->KK);
      }
    }
    for (int64_t kk = 0; !dw && kk < g->Kdim; kk++) {
      nrt_conv_tap t;
      nrt_conv_tap_init(g, kk, &t);
      float *xc = bx + t.ci * g->LI;
      FOR_TAP_ROWS(g, t, ro, ri, {
        for (int64_t co = 0; co < g->Cog; co++) {
          float wv = bw[co * g->Kdim + kk], *yr = by + co * g->L + ro, *xr = xc + ri;
          if (!backward && S2 == 1) {
            for (int64_t ow = t.lo; ow < t.hi; ow++) yr[ow] += wv * xr[ow];
          } else if (!backward) {
            for (int64_t ow = t.lo; ow < t.hi; ow++) yr[ow] += wv * xr[ow * S2];
          } else if (S2 == 1) {
            for (int64_t ow = t.lo; ow < t.hi; ow++) xr[ow] += wv * yr[ow];
          } else {
            for (int64_t ow = t.lo; ow < t.hi; ow++) xr[ow * S2] += wv * yr[ow];
          }
        }
      })
    }
    if (!backward && has_padding(g))
      for (int64_t co = 0; co < g->Cog; co++)
        if (nrt_conv_any_nonfinite(bw + co * g->Kdim, g->Kdim)) poison_outputs(g, bw + co * g->Kdim, by + co * g->L);
    /* A transposed convolution's bias after the sums, as the CPU adds it
     * (oneDNN and the float64 path alike): added first, large terms that
     * cancel would absorb it. */
    if (backward && bias)
      for (int64_t ci = 0; ci < g->Cig; ci++) {
        float v = nrt_conv_load1(bias, grp * g->Cig + ci);
        for (int64_t i = 0; i < g->LI; i++) bx[ci * g->LI + i] += v;
      }
    if (!backward) planes_io(out, g->O, n, grp * g->Cog, g->Cog, by, true);
    else planes_io(out, g->I, n, grp * g->Cig, g->Cig, bx, true);
  }
  nrt_conv_bufs_free(&bufs);
}

static void direct_fwd(void *ctx, int64_t begin, int64_t end) { direct_images(ctx, begin, end, false); }
static void direct_bwdi(void *ctx, int64_t begin, int64_t end) { direct_images(ctx, begin, end, true); }

/* Tasks: groups. Each (tap, output channel) sums dy * x over every image's
 * rows, eight partial sums per row, in double across rows and images. */
static void direct_bwdw(void *ctx, int64_t begin, int64_t end) {
  nrt_conv_plan *p = ctx;
  const nrt_conv_geom *g = p->g;
  const nrt_launch *l = p->l;
  const nrt_operand *gw = &l->operands[0], *gy = &l->operands[1], *x = &l->operands[2];
  nrt_conv_bufs bufs;
  if (!direct_alloc(p, &bufs, g->Cog * g->Kdim)) return;
  float *bx = bufs.b[0], *by = bufs.b[1], *bw = bufs.b[2];
  double *acc = (double *)bufs.b[3];
  dw_tap *taps = (dw_tap *)bufs.b[4];
  const int64_t S2 = g->S[2];
  const bool dw = dw_applies(g, false);
  if (dw) dw_taps(g, NULL, false, taps); /* the same offsets for every channel and image */
  for (int64_t grp = begin; grp < end; grp++) {
    for (int64_t i = 0; i < g->Cog * g->Kdim; i++) acc[i] = 0.0;
    for (int64_t n = 0; n < g->N; n++) {
      planes_io(x, g->I, n, grp * g->Cig, g->Cig, bx, false);
      planes_io(gy, g->O, n, grp * g->Cog, g->Cog, by, false);
      bool poison = has_padding(g) && nrt_conv_any_nonfinite(by, g->Cog * g->L);
      if (dw)
        for (int64_t co = 0; co < g->Cog; co++)
          dw_wgrad_plane_avx512(bx, g->I, by + co * g->L, g->O, g->S, taps, g->Kdim, acc + co * g->Kdim);
      for (int64_t kk = 0; !dw && kk < g->Kdim; kk++) {
        nrt_conv_tap t;
        nrt_conv_tap_init(g, kk, &t);
        const float *xc = bx + t.ci * g->LI;
        for (int64_t co = 0; co < g->Cog; co++) {
          float sum = 0.0f;
          FOR_TAP_ROWS(g, t, ro, ri, {
            const float *dy = by + co * g->L + ro, *src = xc + ri;
            float s8[8] = {0};
            int64_t ow = t.lo;
            if (S2 == 1) {
              for (; ow + 8 <= t.hi; ow += 8)
                for (int v = 0; v < 8; v++) s8[v] += dy[ow + v] * src[ow + v];
            }
            for (; ow < t.hi; ow++) s8[0] += dy[ow] * src[ow * S2];
            sum += ((s8[0] + s8[1]) + (s8[2] + s8[3])) + ((s8[4] + s8[5]) + (s8[6] + s8[7]));
          })
          acc[co * g->Kdim + kk] += sum;
        }
      }
      for (int64_t co = 0; poison && co < g->Cog; co++) poison_taps(g, by + co * g->L, acc + co * g->Kdim);
    }
    for (int64_t co = 0; co < g->Cog; co++) {
      for (int64_t kk = 0; kk < g->Kdim; kk++) bw[kk] = (float)acc[co * g->Kdim + kk];
      nrt_conv_w_row(g, gw, grp * g->Cog + co, 0, g->Kdim, bw, true);
    }
  }
  nrt_conv_bufs_free(&bufs);
}

nrt_status nrt_conv_direct(const nrt_conv_geom *g, const nrt_launch *l) {
  nrt_conv_plan p = {.g = g, .l = l};
  int64_t work = (g->L + g->LI) * (g->Cog + g->Cig) * g->KK;
  int64_t grain = work >= 65536 ? 1 : 65536 / (work + 1) + 1;
  switch ((int)l->op) {
  case NRT_OP(CONV): nrt_parallel_for(g->N * g->G, grain, direct_fwd, &p); break;
  case NRT_OP(CONV_BACKWARD_INPUT): nrt_parallel_for(g->N * g->G, grain, direct_bwdi, &p); break;
  default: nrt_parallel_for(g->G, 1, direct_bwdw, &p); break;
  }
  return nrt_conv_plan_status(&p, "work buffers");
}
