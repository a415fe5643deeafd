/* CX_REDUCE (nrt/ops/complex.h): sum, mean, product, all, any of complex
 * (or real) values into a complex, real or bool output, in TensorIterator's
 * reduction layout (the output has stride 0 along the reduced dims).
 *
 * Each output element is one task: its reduced elements are summed in a
 * fixed order in double, so results do not depend on the thread count.
 * This loop is also the reference path. */
#include "kernels/complex/complex.h"

typedef struct cx_reduce {
  const nrt_launch *l;
  int nkeep, nred;
  int keep[NRT_MAX_DIMS], red[NRT_MAX_DIMS]; /* dims, innermost last */
  int64_t count;                              /* reduced elements per output */
} cx_reduce;

static void cx_reduce_range(void *ctx, int64_t begin, int64_t end) {
  const cx_reduce *r = ctx;
  const nrt_launch *l = r->l;
  const nrt_operand *out = &l->operands[0], *in = &l->operands[1];
  for (int64_t t = begin; t < end; t++) {
    char *po = out->data;
    const char *pi = in->data;
    int64_t rem = t;
    for (int j = r->nkeep - 1; j >= 0; j--) {
      int d = r->keep[j];
      int64_t i = rem % l->sizes[d];
      rem /= l->sizes[d];
      po += i * out->strides[d];
      pi += i * in->strides[d];
    }
    int64_t idx[NRT_MAX_DIMS] = {0};
    int64_t mode = l->params[0];
    /* all/any keep a 0/1 flag in acc.re */
    nrt_cx acc = nrt_cx_make(mode == 2 || mode == 3 ? 1.0 : 0.0, 0.0);
    for (int64_t e = 0; e < r->count; e++) {
      nrt_cx v = nrt_cx_load(pi, in->dtype);
      bool nz = v.re != 0.0 || v.im != 0.0;
      switch (mode) {
      case 2: acc = nrt_cx_mul(acc, v); break;
      case 3: acc.re = acc.re != 0.0 && nz; break;
      case 4: acc.re = acc.re != 0.0 || nz; break;
      default: acc = nrt_cx_add(acc, v); break;
      }
      for (int j = r->nred - 1; j >= 0; j--) {
        int d = r->red[j];
        pi += in->strides[d];
        if (++idx[j] < l->sizes[d]) break;
        pi -= in->strides[d] * l->sizes[d];
        idx[j] = 0;
      }
    }
    /* the mean multiplies the sum by the complex factor (1/n, 0), as ATen's
     * MeanOps: an infinite part makes the other NaN (inf * 0), so the mean
     * of [1+infj, 2] is nan+infj on the CPU too */
    if (mode == 1 && r->count > 0) acc = nrt_cx_mul(acc, nrt_cx_make(1.0 / (double)r->count, 0.0));
    nrt_cx_store(po, out->dtype, acc);
  }
}

nrt_status nrt_cx_reduce(const nrt_launch *l) {
  if (l->params[0] < 0 || l->params[0] > 4)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                           "%s: reduction mode p0 = %lld outside 0..4", nrt_op_name(l->op), (long long)l->params[0]);
  if (l->noutputs != 1)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                           "%s: expected 1 output, got %d", nrt_op_name(l->op), l->noutputs);
  cx_reduce r = {.l = l, .count = 1};
  int64_t nout = 1;
  for (int d = 0; d < l->ndim; d++) {
    if (l->sizes[d] == 0) return NRT_SUCCESS; /* no outputs to write: the glue fills empties */
    if (l->operands[0].strides[d] == 0 && l->sizes[d] > 1) {
      r.red[r.nred++] = d;
      r.count *= l->sizes[d];
    } else {
      r.keep[r.nkeep++] = d;
      nout *= l->sizes[d];
    }
  }
  int64_t grain = r.count >= 4096 ? 1 : 4096 / r.count;
  if (nrt_kernels_reference()) cx_reduce_range(&r, 0, nout);
  else nrt_parallel_for(nout, grain, cx_reduce_range, &r);
  return NRT_SUCCESS;
}
