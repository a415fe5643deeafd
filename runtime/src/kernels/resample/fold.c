/* im2col / col2im (IM2COL, COL2IM; nrt/ops/resample.h): sliding 2-d windows
 * unfolded into columns, and the adjoint that sums columns back into an
 * image (torch.nn.functional.unfold / fold).
 *
 * IM2COL copies element bytes (zero bytes where a window hangs over the
 * padding), so every dtype is exact; parallel over (n, c, kh) column rows.
 * COL2IM gives each (n, c) image plane to one task, accumulating in a
 * float32 (integers: wrapping int64) plane buffer in (kh, kw, oh, ow) order
 * and storing once: deterministic at any thread count. Its reference path
 * accumulates in double through the out-of-line converters. */
#pragma GCC optimize("O3,no-math-errno")
#include <stdlib.h>
#include "kernels/resample/resample.h"

typedef struct fold_geom {
  int64_t N, C, OH, OW, IH, IW, KH, KW;
  int64_t dh, dw, ph, pw, sh, sw;
} fold_geom;

typedef struct fold_job {
  const nrt_launch *l;
  fold_geom g;
  size_t esize;
  bool integral, reference;
  _Atomic int failed;
} fold_job;

/* Column operand strides are {n, c, kh, kw, oh, ow}; image {n, c, h, w}. */
static void im2col_rows(void *ctx, int64_t begin, int64_t end) {
  fold_job *j = ctx;
  const fold_geom *g = &j->g;
  const nrt_operand *col = &j->l->operands[0], *im = &j->l->operands[1];
  for (int64_t r = begin; r < end; r++) {
    int64_t kh = r % g->KH, c = (r / g->KH) % g->C, n = r / (g->KH * g->C);
    for (int64_t kw = 0; kw < g->KW; kw++) {
      char *cb = (char *)col->data + n * col->strides[0] + c * col->strides[1] + kh * col->strides[2] +
                 kw * col->strides[3];
      const char *ib = (const char *)im->data + n * im->strides[0] + c * im->strides[1];
      for (int64_t oh = 0; oh < g->OH; oh++) {
        int64_t ih = oh * g->sh - g->ph + kh * g->dh;
        for (int64_t ow = 0; ow < g->OW; ow++) {
          int64_t iw = ow * g->sw - g->pw + kw * g->dw;
          char *dst = cb + oh * col->strides[4] + ow * col->strides[5];
          if (ih >= 0 && ih < g->IH && iw >= 0 && iw < g->IW)
            memcpy(dst, ib + ih * im->strides[2] + iw * im->strides[3], j->esize);
          else
            memset(dst, 0, j->esize);
        }
      }
    }
  }
}

/* Visits every in-bounds (column entry, image offset) pair of one plane in
 * the fixed order kh, kw, oh, ow. */
#define FOR_EACH_TAP(g, BODY)                                                      \
  for (int64_t kh = 0; kh < (g)->KH; kh++)                                          \
    for (int64_t kw = 0; kw < (g)->KW; kw++)                                        \
      for (int64_t oh = 0; oh < (g)->OH; oh++) {                                    \
        int64_t ih = oh * (g)->sh - (g)->ph + kh * (g)->dh;                         \
        if (ih < 0 || ih >= (g)->IH) continue;                                      \
        for (int64_t ow = 0; ow < (g)->OW; ow++) {                                  \
          int64_t iw = ow * (g)->sw - (g)->pw + kw * (g)->dw;                       \
          if (iw < 0 || iw >= (g)->IW) continue;                                    \
          BODY                                                                      \
        }                                                                           \
      }

static void col2im_planes(void *ctx, int64_t begin, int64_t end) {
  fold_job *j = ctx;
  const fold_geom *g = &j->g;
  const nrt_operand *im = &j->l->operands[0], *col = &j->l->operands[1];
  const int64_t L = g->IH * g->IW;
  /* one buffer serves all three accumulators (8 bytes per element) */
  void *mem = malloc(sizeof(double) * (size_t)(L + g->OW + 1));
  if (!mem) {
    j->failed = 1;
    return;
  }
  for (int64_t p = begin; p < end; p++) {
    int64_t n = p / g->C, c = p % g->C;
    const char *cp = (const char *)col->data + n * col->strides[0] + c * col->strides[1];
    char *ip = (char *)im->data + n * im->strides[0] + c * im->strides[1];
#define COL_AT ((const char *)cp + kh * col->strides[2] + kw * col->strides[3] + oh * col->strides[4] + \
                ow * col->strides[5])
    if (j->integral) {
      int64_t *acc = mem;
      memset(acc, 0, sizeof(int64_t) * (size_t)L);
      FOR_EACH_TAP(g, acc[ih * g->IW + iw] = nrt_wadd(acc[ih * g->IW + iw], nrt_ref_load_i64(COL_AT, col->dtype));)
      for (int64_t h = 0; h < g->IH; h++)
        nrt_store_i64(ip + h * im->strides[2], im->strides[3], im->dtype, acc + h * g->IW, g->IW);
    } else if (j->reference) {
      double *acc = mem;
      for (int64_t i = 0; i < L; i++) acc[i] = 0.0;
      FOR_EACH_TAP(g, acc[ih * g->IW + iw] += nrt_ref_load_f64(COL_AT, col->dtype);)
      for (int64_t h = 0; h < g->IH; h++)
        for (int64_t w = 0; w < g->IW; w++)
          nrt_ref_store_f64(ip + h * im->strides[2] + w * im->strides[3], im->dtype, acc[h * g->IW + w]);
    } else {
      /* fast: a column row (fixed kh, kw, oh) is loaded once, then added
       * to the image row it overlaps at stride sw */
      float *acc = mem, *row = acc + L;
      for (int64_t i = 0; i < L; i++) acc[i] = 0.0f;
      for (int64_t kh = 0; kh < g->KH; kh++)
        for (int64_t kw = 0; kw < g->KW; kw++)
          for (int64_t oh = 0; oh < g->OH; oh++) {
            int64_t ih = oh * g->sh - g->ph + kh * g->dh;
            if (ih < 0 || ih >= g->IH) continue;
            int64_t off = kw * g->dw - g->pw, lo = 0, hi = g->OW;
            while (lo < hi && lo * g->sw + off < 0) lo++;
            while (hi > lo && (hi - 1) * g->sw + off >= g->IW) hi--;
            if (lo >= hi) continue;
            nrt_load_f32(row, cp + kh * col->strides[2] + kw * col->strides[3] + oh * col->strides[4] +
                                  lo * col->strides[5],
                         col->strides[5], col->dtype, hi - lo);
            float *dst = acc + ih * g->IW;
            for (int64_t ow = lo; ow < hi; ow++) dst[ow * g->sw + off] += row[ow - lo];
          }
      for (int64_t h = 0; h < g->IH; h++)
        nrt_store_f32(ip + h * im->strides[2], im->strides[3], im->dtype, acc + h * g->IW, g->IW);
    }
#undef COL_AT
  }
  free(mem);
}

nrt_status nrt_resample_fold(const nrt_launch *l) {
  const char *op = nrt_op_name(l->op);
  fold_job j = {.l = l};
  if (l->ndim != 8 || l->noutputs != 1)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: sizes are {N, C, OH, OW, IH, IW, KH, KW} with one output",
                           op);
  fold_geom *g = &j.g;
  int64_t *f[8] = {&g->N, &g->C, &g->OH, &g->OW, &g->IH, &g->IW, &g->KH, &g->KW};
  for (int i = 0; i < 8; i++) *f[i] = l->sizes[i];
  g->dh = l->aux[0], g->dw = l->aux[1], g->ph = l->aux[2], g->pw = l->aux[3], g->sh = l->aux[4], g->sw = l->aux[5];
  if (g->dh < 1 || g->dw < 1 || g->sh < 1 || g->sw < 1 || g->ph < 0 || g->pw < 0)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: dilation, stride must be positive and padding non-negative",
                           op);
  if (l->operands[0].dtype != l->operands[1].dtype)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: input and output dtypes differ", op);
  j.esize = nrt_dtype_size(l->operands[0].dtype);
  j.integral = !nrt_dtype_is_floating(l->operands[0].dtype);
  j.reference = nrt_kernels_reference();
  if ((int)l->op == NRT_OP(IM2COL)) {
    int64_t rows = g->N * g->C * g->KH;
    if (rows == 0 || g->OH * g->OW * g->KW == 0) return NRT_SUCCESS;
    nrt_parallel_for(rows, 1 + 8192 / (g->KW * g->OH * g->OW), im2col_rows, &j);
  } else {
    int64_t planes = g->N * g->C;
    if (planes == 0 || g->IH * g->IW == 0) return NRT_SUCCESS;
    nrt_parallel_for(planes, 1, col2im_planes, &j);
  }
  if (j.failed) return nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of memory for work buffers", op);
  return NRT_SUCCESS;
}
