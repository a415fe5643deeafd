/* The convolution's reference path, all three passes as plain loop nests
 * (see conv.c): values in double in the float domain (inputs at float32
 * precision, as the device computes), in wrapping int64 in the integer
 * domain (PyTorch's CPU convolves integers too; narrowing the int64 sum
 * on store gives the same bits as accumulating in the type). It also
 * serves the degenerate shapes and the integer dtypes. Floating taps in the
 * zero padding are multiplied by that zero, as the CPU's im2col does (see
 * direct.c on non-finite values). */
#pragma GCC optimize("O3,no-trapping-math,no-math-errno")
#include "kernels/conv/conv.h"

typedef struct rval {
  double f;
  int64_t i;
} rval;

static const char *ref_at(const nrt_operand *o, const int64_t *idx, int nidx) {
  const char *p = o->data;
  for (int i = 0; i < nidx; i++) p += idx[i] * o->strides[i];
  return p;
}

static rval ref_ld(const nrt_operand *o, const int64_t *idx, int nidx, bool ints) {
  rval v = {0.0, 0};
  if (ints) v.i = nrt_ref_load_i64(ref_at(o, idx, nidx), o->dtype);
  else v.f = (float)nrt_ref_load_f64(ref_at(o, idx, nidx), o->dtype);
  return v;
}

static void ref_st(const nrt_operand *o, const int64_t *idx, int nidx, rval v, bool ints) {
  char *p = (char *)ref_at(o, idx, nidx);
  if (ints) nrt_ref_store_i64(p, o->dtype, v.i);
  else nrt_ref_store_f64(p, o->dtype, v.f);
}

static inline void ref_mac(rval *acc, rval a, rval b, bool ints) {
  if (ints) acc->i = nrt_wadd(acc->i, nrt_wmul(a.i, b.i));
  else acc->f += a.f * b.f;
}

static inline void ref_add(rval *acc, rval b, bool ints) {
  if (ints) acc->i = nrt_wadd(acc->i, b.i);
  else acc->f += b.f;
}

/* A tap in the zero padding: the CPU's im2col multiplies it too, and for
 * floats that matters (NaN * 0 and inf * 0 are NaN); integers skip it.
 * Not when the input is empty (LI == 0, reached only by the backward of a
 * transposed convolution whose output is empty, float32 and bfloat16):
 * the CPU's oneDNN path has no input to pad and returns zeros. */
static inline void ref_mac_pad(const nrt_conv_geom *g, rval *acc, rval a, bool ints) {
  if (!ints && g->LI > 0) acc->f += a.f * 0.0;
}

/* Input position of output position o[3] through tap k[3]; false in padding. */
static bool ref_in(const nrt_conv_geom *g, const int64_t *o, const int64_t *k, int64_t *in) {
  for (int i = 0; i < 3; i++) {
    in[i] = o[i] * g->S[i] - g->P[i] + k[i] * g->D[i];
    if (in[i] < 0 || in[i] >= g->I[i]) return false;
  }
  return true;
}

#define FOR3(v, ext)                          \
  for (v[0] = 0; v[0] < (ext)[0]; v[0]++)   \
    for (v[1] = 0; v[1] < (ext)[1]; v[1]++) \
      for (v[2] = 0; v[2] < (ext)[2]; v[2]++)

static void ref_forward(const nrt_conv_geom *g, const nrt_launch *l, bool ints) {
  const nrt_operand *y = &l->operands[0], *x = &l->operands[1], *w = &l->operands[2];
  const nrt_operand *bias = l->ninputs == 3 ? &l->operands[3] : NULL;
  int64_t o[3], k[3], in[3];
  const bool intel = nrt_kernels_host_blas() == NRT_HOST_BLAS_INTEL_AVX512;
  for (int64_t n = 0; n < g->N; n++)
    for (int64_t c = 0; c < g->G * g->Cog; c++) {
      int64_t grp = c / g->Cog;
      FOR3(o, g->O) {
        /* Where the bias goes follows the CPU's float64 (im2col) path,
         * the fuzz's reference: its GEMM per image, [Cog, K] x [K, L],
         * starts from the bias for one or two output channels and adds it
         * after the products from three (probed on Intel AVX-512 with taps
         * of [3e38, -3e38, 1] and bias 0.375: 1.0 vs 1.375, 480 of 480
         * random patterns, float32 oneDNN alike in 20101-1041488); a
         * single output pixel (its GEMV) adds it last too. On other hosts
         * (AMD: MKL's Zen kernels) the bias first, as probed there. */
        bool bias_first = !intel || (g->Cog <= 2 && g->L >= 2);
        rval acc = {0.0, 0};
        if (bias && bias_first) acc = ref_ld(bias, &c, 1, ints);
        for (int64_t ci = 0; ci < g->Cig; ci++)
          FOR3(k, g->K) {
            int64_t wi[5] = {c, ci, k[0], k[1], k[2]};
            if (!ref_in(g, o, k, in)) {
              ref_mac_pad(g, &acc, ref_ld(w, wi, 5, ints), ints);
              continue;
            }
            int64_t xi[5] = {n, grp * g->Cig + ci, in[0], in[1], in[2]};
            ref_mac(&acc, ref_ld(x, xi, 5, ints), ref_ld(w, wi, 5, ints), ints);
          }
        if (bias && !bias_first) ref_add(&acc, ref_ld(bias, &c, 1, ints), ints);
        int64_t yi[5] = {n, c, o[0], o[1], o[2]};
        ref_st(y, yi, 5, acc, ints);
      }
    }
}

static nrt_status ref_backward_input(const nrt_conv_geom *g, const nrt_launch *l, bool ints) {
  const nrt_operand *gx = &l->operands[0], *gy = &l->operands[1], *w = &l->operands[2];
  const nrt_operand *bias = l->ninputs == 3 ? &l->operands[3] : NULL;
  rval *acc = malloc(sizeof(rval) * (size_t)(g->Cig * g->LI + 1));
  if (!acc) return NRT_ERROR_OUT_OF_MEMORY;
  int64_t o[3], k[3], in[3], i3[3];
  for (int64_t n = 0; n < g->N; n++)
    for (int64_t grp = 0; grp < g->G; grp++) {
      for (int64_t i = 0; i < g->Cig * g->LI; i++) acc[i] = (rval){0.0, 0};
      /* The CPU's order: each im2col element sums over the output channels
       * (dcol = W^T dy), then col2im adds them tap by tap, output pixel by
       * pixel, and the bias (a transposed convolution's) comes last, on
       * the float64 path and oneDNN's alike; it matters once huge terms
       * cancel. */
      for (int64_t ci = 0; ci < g->Cig; ci++)
        FOR3(k, g->K)
          FOR3(o, g->O) {
            if (!ref_in(g, o, k, in)) continue;
            rval col = {0.0, 0};
            for (int64_t co = 0; co < g->Cog; co++) {
              int64_t yi[5] = {n, grp * g->Cog + co, o[0], o[1], o[2]};
              int64_t wi[5] = {grp * g->Cog + co, ci, k[0], k[1], k[2]};
              ref_mac(&col, ref_ld(gy, yi, 5, ints), ref_ld(w, wi, 5, ints), ints);
            }
            ref_add(&acc[ci * g->LI + (in[0] * g->I[1] + in[1]) * g->I[2] + in[2]], col, ints);
          }
      for (int64_t ci = 0; ci < g->Cig; ci++) {
        int64_t c = grp * g->Cig + ci;
        FOR3(i3, g->I) {
          rval *a = &acc[ci * g->LI + (i3[0] * g->I[1] + i3[1]) * g->I[2] + i3[2]];
          if (bias) ref_add(a, ref_ld(bias, &c, 1, ints), ints);
          int64_t xi[5] = {n, c, i3[0], i3[1], i3[2]};
          ref_st(gx, xi, 5, *a, ints);
        }
      }
    }
  free(acc);
  return NRT_SUCCESS;
}

static void ref_backward_weight(const nrt_conv_geom *g, const nrt_launch *l, bool ints) {
  const nrt_operand *gw = &l->operands[0], *gy = &l->operands[1], *x = &l->operands[2];
  int64_t o[3], k[3], in[3];
  for (int64_t c = 0; c < g->G * g->Cog; c++) {
    int64_t grp = c / g->Cog;
    for (int64_t ci = 0; ci < g->Cig; ci++)
      FOR3(k, g->K) {
        /* A sum per image, then the images in order, as the CPU's
         * per-image GEMMs accumulate into grad_w: once huge terms cancel,
         * what is left depends on that grouping. */
        rval acc = {0.0, 0};
        for (int64_t n = 0; n < g->N; n++) {
          rval part = {0.0, 0};
          FOR3(o, g->O) {
            int64_t yi[5] = {n, c, o[0], o[1], o[2]};
            if (!ref_in(g, o, k, in)) {
              ref_mac_pad(g, &part, ref_ld(gy, yi, 5, ints), ints);
              continue;
            }
            int64_t xi[5] = {n, grp * g->Cig + ci, in[0], in[1], in[2]};
            ref_mac(&part, ref_ld(gy, yi, 5, ints), ref_ld(x, xi, 5, ints), ints);
          }
          ref_add(&acc, part, ints);
        }
        int64_t wi[5] = {c, ci, k[0], k[1], k[2]};
        ref_st(gw, wi, 5, acc, ints);
      }
  }
}

nrt_status nrt_conv_reference(const nrt_conv_geom *g, const nrt_launch *l, bool ints) {
  switch ((int)l->op) {
  case NRT_OP(CONV): ref_forward(g, l, ints); return NRT_SUCCESS;
  case NRT_OP(CONV_BACKWARD_INPUT): return ref_backward_input(g, l, ints);
  default: ref_backward_weight(g, l, ints); return NRT_SUCCESS;
  }
}
