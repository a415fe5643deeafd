/* FFT_C2C, FFT_R2C, FFT_C2R (nrt/ops/complex.h): 1-d transforms along
 * dim p0 of an N-d tensor, one task per line (all other dims).
 *
 * A line is gathered into a contiguous double buffer, transformed with a
 * shared plan (fft_plan.c), scaled and scattered. A real input enters as
 * (x, 0); a Hermitian input is first extended to the full spectrum
 * (X[n-k] = conj X[k]), and the real part of its inverse transform is the
 * result, which is what ignores the imaginary parts of X[0] and X[n/2].
 * The reference path runs the O(n^2) definition instead of the plan. */
#include <stdatomic.h>
#include <stdlib.h>

#include "kernels/complex/complex.h"

typedef struct fft_job {
  const nrt_launch *l;
  int dim;
  int64_t n;      /* transform length */
  int64_t n_in;   /* input length along dim */
  int64_t n_out;  /* output length along dim */
  int sign;
  double scale;
  const nrt_fft_plan *plan; /* NULL on the reference path */
  int64_t scratch_len;
  _Atomic int failed;
} fft_job;

static void fft_lines(void *ctx, int64_t begin, int64_t end) {
  fft_job *j = ctx;
  const nrt_launch *l = j->l;
  int op = (int)l->op;
  const nrt_operand *out = &l->operands[0], *in = &l->operands[1];
  int64_t n = j->n;
  nrt_cx *buf = malloc((size_t)(n + j->scratch_len) * sizeof *buf);
  if (!buf) {
    atomic_store(&j->failed, 1);
    return;
  }
  nrt_cx *scratch = buf + n;
  int64_t ist = in->strides[j->dim], ost = out->strides[j->dim];
  for (int64_t t = begin; t < end; t++) {
    const char *pi = in->data;
    char *po = out->data;
    int64_t rem = t;
    for (int d = l->ndim - 1; d >= 0; d--) {
      if (d == j->dim) continue;
      int64_t i = rem % l->sizes[d];
      rem /= l->sizes[d];
      pi += i * in->strides[d];
      po += i * out->strides[d];
    }
    if (op == NRT_OP(FFT_C2R)) {
      int64_t half = n / 2 + 1, have = j->n_in < half ? j->n_in : half;
      for (int64_t k = 0; k < have; k++) buf[k] = nrt_cx_load(pi + k * ist, in->dtype);
      for (int64_t k = have; k < half; k++) buf[k] = nrt_cx_make(0.0, 0.0);
      for (int64_t k = half; k < n; k++) buf[k] = nrt_cx_conj(buf[n - k]);
    } else {
      for (int64_t k = 0; k < n; k++) buf[k] = nrt_cx_load(pi + k * ist, in->dtype);
      if (op == NRT_OP(FFT_R2C))
        for (int64_t k = 0; k < n; k++) buf[k].im = 0.0;
    }
    if (j->plan) nrt_fft_execute(j->plan, buf, scratch);
    else nrt_dft_reference(n, j->sign, buf, scratch);
    for (int64_t k = 0; k < j->n_out; k++) {
      nrt_cx v = nrt_cx_make(buf[k].re * j->scale, buf[k].im * j->scale);
      if (op == NRT_OP(FFT_C2R)) v.im = 0.0;
      nrt_cx_store(po + k * ost, out->dtype, v);
    }
  }
  free(buf);
}

nrt_status nrt_cx_fft(const nrt_launch *l) {
  const char *name = nrt_op_name(l->op);
  int op = (int)l->op;
  if (l->noutputs != 1 || l->ndim < 1)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expected 1 output and ndim >= 1", name);
  int64_t dim = l->params[0];
  if (dim < 0 || dim >= l->ndim)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: dim %lld outside 0..%d", name, (long long)dim, l->ndim - 1);
  fft_job j = {.l = l, .dim = (int)dim, .n_out = l->sizes[dim], .n_in = l->aux[0], .scale = l->scalars[0].f};
  bool in_complex = nrt_dtype_is_complex(l->operands[1].dtype);
  bool out_complex = nrt_dtype_is_complex(l->operands[0].dtype);
  switch ((int)op) {
  case NRT_OP(FFT_C2C):
    j.n = j.n_out;
    j.sign = l->params[1] ? -1 : 1;
    if (j.n_in != j.n || !in_complex || !out_complex)
      return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                             "%s: expects complex input and output of equal length (got %lld -> %lld)",
                             name, (long long)j.n_in, (long long)j.n_out);
    break;
  case NRT_OP(FFT_R2C):
    j.n = j.n_in;
    j.sign = -1;
    if ((j.n_out != j.n / 2 + 1 && j.n_out != j.n) || in_complex || !out_complex)
      return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                             "%s: expects a real input of length n and a complex output of length "
                             "n/2+1 or n (got %lld -> %lld)", name, (long long)j.n_in, (long long)j.n_out);
    break;
  case NRT_OP(FFT_C2R):
    j.n = j.n_out;
    j.sign = 1;
    if (!in_complex || out_complex || j.n_in < 0)
      return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects a complex input and a real output", name);
    break;
  default: return NRT_ERROR_UNSUPPORTED;
  }
  int64_t lines = 1;
  for (int d = 0; d < l->ndim; d++)
    if (d != dim) lines *= l->sizes[d];
  if (lines == 0 || j.n_out == 0) return NRT_SUCCESS;
  if (j.n == 0) { /* r2c of nothing has no output either; c2r n = 0 was excluded */
    return NRT_SUCCESS;
  }
  nrt_fft_plan *plan = NULL;
  bool reference = nrt_kernels_reference();
  if (reference) {
    j.scratch_len = j.n;
  } else {
    plan = nrt_fft_plan_create(j.n, j.sign);
    if (!plan)
      return nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY,
                             "%s: out of host memory planning a length-%lld FFT", name, (long long)j.n);
    j.plan = plan;
    j.scratch_len = nrt_fft_scratch_len(plan);
  }
  atomic_init(&j.failed, 0);
  if (reference) fft_lines(&j, 0, lines);
  else nrt_parallel_for(lines, j.n >= 4096 ? 1 : 4096 / j.n, fft_lines, &j);
  nrt_fft_plan_destroy(plan);
  if (atomic_load(&j.failed))
    return nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for FFT buffers", name);
  return NRT_SUCCESS;
}
