/* Family COMPLEX (nrt/ops/complex.h): the dispatcher and the elementwise
 * ops.
 *
 * Elementwise ops walk the N-d iteration one element at a time through
 * nrt_cx_load / nrt_cx_store (double inside). That loop is both the
 * reference and the only path: complex work here is data movement and a
 * handful of flops per element, and the per-element dtype switch keeps
 * every mix of complex and real operands correct without a kernel per
 * pair. */
#include <math.h>

#include "kernels/complex/complex.h"

#define CX_GRAIN 4096

static void cx_element(const nrt_launch *l, char *const *p) {
  const nrt_operand *o = l->operands;
  nrt_cx alpha = nrt_cx_make(l->scalars[0].f, l->scalars[1].f);
  nrt_cx r;
  switch ((int)l->op) {
  case NRT_OP(CX_COPY):
    if (o[0].dtype == o[1].dtype && !l->params[0] && !l->params[1]) {
      memcpy(p[0], p[1], nrt_dtype_size(o[0].dtype)); /* bit-exact, NaN payloads too */
      return;
    }
    r = nrt_cx_load(p[1], o[1].dtype);
    if (l->params[0]) r.im = -r.im;
    if (l->params[1]) r = nrt_cx_make(-r.re, -r.im);
    break;
  case NRT_OP(CX_FILL): r = alpha; break;
  case NRT_OP(CX_ADD):
    r = nrt_cx_add(nrt_cx_load(p[1], o[1].dtype), nrt_cx_mul(alpha, nrt_cx_load(p[2], o[2].dtype)));
    break;
  case NRT_OP(CX_SUB):
    r = nrt_cx_sub(nrt_cx_load(p[1], o[1].dtype), nrt_cx_mul(alpha, nrt_cx_load(p[2], o[2].dtype)));
    break;
  case NRT_OP(CX_MUL): r = nrt_cx_mul(nrt_cx_load(p[1], o[1].dtype), nrt_cx_load(p[2], o[2].dtype)); break;
  case NRT_OP(CX_DIV): r = nrt_cx_div(nrt_cx_load(p[1], o[1].dtype), nrt_cx_load(p[2], o[2].dtype)); break;
  case NRT_OP(CX_EQ):
  case NRT_OP(CX_NE): {
    nrt_cx a = nrt_cx_load(p[1], o[1].dtype), b = nrt_cx_load(p[2], o[2].dtype);
    bool eq = a.re == b.re && a.im == b.im;
    r = nrt_cx_make((int)l->op == NRT_OP(CX_EQ) ? eq : !eq, 0.0);
    break;
  }
  case NRT_OP(CX_WHERE): {
    nrt_cx c = nrt_cx_load(p[1], o[1].dtype);
    bool take_a = c.re != 0.0 || c.im != 0.0;
    r = take_a ? nrt_cx_load(p[2], o[2].dtype) : nrt_cx_load(p[3], o[3].dtype);
    break;
  }
  case NRT_OP(CX_COMPLEX):
    r = nrt_cx_make(nrt_cx_load(p[1], o[1].dtype).re, nrt_cx_load(p[2], o[2].dtype).re);
    break;
  case NRT_OP(CX_POLAR): {
    double m = nrt_cx_load(p[1], o[1].dtype).re, t = nrt_cx_load(p[2], o[2].dtype).re;
    r = nrt_cx_make(m * cos(t), m * sin(t));
    break;
  }
  case NRT_OP(CX_ABS): {
    nrt_cx z = nrt_cx_load(p[1], o[1].dtype);
    r = nrt_cx_make(hypot(z.re, z.im), 0.0);
    break;
  }
  case NRT_OP(CX_ANGLE): {
    nrt_cx z = nrt_cx_load(p[1], o[1].dtype);
    r = nrt_cx_make(atan2(z.im, z.re), 0.0);
    break;
  }
  default: return; /* not reached: nrt_complex_execute picks the op */
  }
  nrt_cx_store(p[0], o[0].dtype, r);
}

/* sgn as ATen's kernel computes it, which differs between its paths once
 * a part is infinite or NaN, or |z| overflows: the vector body divides each
 * part by |z| (0 where |z| is 0: (-0 - inf i) gives -0 + NaN i), the scalar
 * function is z / complex(|z|, 0) after a z == 0 test, whose scaled
 * division makes any infinite part NaN + NaN i. complex64 rounds in float,
 * so |3.4e38 + 3.4e38i| overflows there as on the CPU. */
static void cx_sgn_element(const nrt_launch *l, char *const *p, bool vec) {
  const nrt_operand *o = l->operands;
  nrt_cx z = nrt_cx_load(p[1], o[1].dtype), r;
  if (o[0].dtype == NRT_COMPLEX64 || o[0].dtype == NRT_COMPLEX32) {
    cxf f = cxf_of(z);
    float m = hypotf(f.re, f.im);
    if (vec) r = m == 0.0f ? nrt_cx_make(0.0, 0.0) : nrt_cx_make(f.re / m, f.im / m);
    else r = f.re == 0.0f && f.im == 0.0f ? nrt_cx_make(0.0, 0.0) : cxf_to(cxf_div(f, (cxf){m, 0.0f}));
  } else {
    double m = hypot(z.re, z.im);
    if (vec) r = m == 0.0 ? nrt_cx_make(0.0, 0.0) : nrt_cx_make(z.re / m, z.im / m);
    else r = z.re == 0.0 && z.im == 0.0 ? nrt_cx_make(0.0, 0.0) : nrt_cx_div(z, nrt_cx_make(m, 0.0));
  }
  nrt_cx_store(p[0], o[0].dtype, r);
}

typedef struct cx_job {
  const nrt_launch *l;
  nrt_cx_element_fn fn;
  nrt_cx_element_split_fn split; /* instead of fn: told the CPU's path */
  int64_t block;
  int64_t pairs; /* instead of block: the strided loop's vector width */
} cx_job;

/* Whether ATen's cpu_kernel_vec runs rows of this iteration through its
 * vectorized_loop (Loops.h): the output and every input contiguous along
 * the innermost dim (sizes[0]), or exactly one input broadcast (stride 0)
 * and the others contiguous. Otherwise its basic_loop computes every
 * element with the scalar function. */
static bool cx_rows_vectorised(const nrt_launch *l) {
  if (l->ndim == 0) return false;
  int nops = l->noutputs + l->ninputs, broadcast = 0;
  for (int k = 0; k < nops; k++) {
    int64_t st = l->operands[k].strides[0], esz = (int64_t)nrt_dtype_size(l->operands[k].dtype);
    if (st == esz) continue;
    if (st != 0 || k < l->noutputs || ++broadcast > 1) return false;
  }
  return true;
}

static void cx_range(void *ctx, int64_t begin, int64_t end) {
  const cx_job *job = ctx;
  const nrt_launch *l = job->l;
  int nd = l->ndim, nops = l->noutputs + l->ninputs;
  int64_t idx[NRT_MAX_DIMS];
  int64_t rem = begin;
  for (int d = nd - 1; d >= 0; d--) {
    idx[d] = rem % l->sizes[d];
    rem /= l->sizes[d];
  }
  char *ptr[NRT_MAX_OPERANDS];
  for (int k = 0; k < nops; k++) {
    ptr[k] = l->operands[k].data;
    for (int d = 0; d < nd; d++) ptr[k] += idx[d] * l->operands[k].strides[d];
  }
  /* vectorized_loop takes blocks of `block` elements while a whole one is
     left in the row; the rest of the row goes through the scalar function */
  bool rows_vec = job->split && job->block > 0 && cx_rows_vectorised(l);
  int64_t vec_end = nd > 0 && rows_vec ? l->sizes[0] / job->block * job->block : 0;
  bool contiguous_rows = job->pairs > 0 && cx_rows_vectorised(l);
  int64_t n0 = nd > 0 ? l->sizes[0] : 1;
  /* a contiguous row: ATen's vector body (blocks of 16) and GCC's loop
     over the tail (8 at a time, then a group of 4) compute as the scalar
     code but for the group of 4; a strided row: groups of `pairs` */
  int64_t tail = n0 / 16 * 16 + (n0 % 16) / 8 * 8;
  if (job->pairs > 0) vec_end = contiguous_rows ? 0 : n0 / job->pairs * job->pairs;
  for (int64_t i = begin; i < end; i++) {
    if (job->pairs > 0 && contiguous_rows) {
      int64_t j = nd > 0 ? idx[0] : 0;
      job->split(l, ptr, j >= tail && j < tail + (n0 - tail) / 4 * 4);
    } else if (job->split) job->split(l, ptr, nd > 0 && idx[0] < vec_end);
    else job->fn(l, ptr);
    for (int d = nd - 1; d >= 0; d--) { /* odometer step, innermost dim first */
      for (int k = 0; k < nops; k++) ptr[k] += l->operands[k].strides[d];
      if (++idx[d] < l->sizes[d]) break;
      for (int k = 0; k < nops; k++) ptr[k] -= l->operands[k].strides[d] * l->sizes[d];
      idx[d] = 0;
    }
  }
}

static nrt_status cx_run(const cx_job *job) {
  const nrt_launch *l = job->l;
  if (l->noutputs != 1)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                           "%s: expected 1 output, got %d", nrt_op_name(l->op), l->noutputs);
  int64_t numel = 1;
  for (int d = 0; d < l->ndim; d++) numel *= l->sizes[d];
  if (numel == 0) return NRT_SUCCESS;
  if (nrt_kernels_reference()) cx_range((void *)job, 0, numel);
  else nrt_parallel_for(numel, CX_GRAIN, cx_range, (void *)job);
  return NRT_SUCCESS;
}

nrt_status nrt_cx_for_each(const nrt_launch *l, nrt_cx_element_fn fn) {
  cx_job job = {l, fn, NULL, 0, 0};
  return cx_run(&job);
}

nrt_status nrt_cx_for_each_split(const nrt_launch *l, nrt_cx_element_split_fn fn, int64_t block) {
  if (block < 0)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: a vector block of %lld elements",
                           nrt_op_name(l->op), (long long)block);
  cx_job job = {l, NULL, fn, block, 0};
  return cx_run(&job);
}

nrt_status nrt_cx_for_each_strided_groups(const nrt_launch *l, nrt_cx_element_split_fn fn, int64_t width) {
  if (width <= 0)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: a group of %lld elements", nrt_op_name(l->op),
                           (long long)width);
  cx_job job = {l, NULL, fn, 0, width};
  return cx_run(&job);
}

nrt_status nrt_complex_execute(const nrt_launch *l) {
  /* Switch on (int)l->op: family ids are not enumerators of nrt_op. */
  switch ((int)l->op) {
  case NRT_OP(CX_COPY): case NRT_OP(CX_FILL): case NRT_OP(CX_ADD): case NRT_OP(CX_SUB):
  case NRT_OP(CX_MUL): case NRT_OP(CX_DIV): case NRT_OP(CX_EQ): case NRT_OP(CX_NE):
  case NRT_OP(CX_WHERE): case NRT_OP(CX_COMPLEX): case NRT_OP(CX_POLAR): case NRT_OP(CX_ABS):
  case NRT_OP(CX_ANGLE):
    return nrt_cx_for_each(l, cx_element);
  case NRT_OP(CX_SGN): return nrt_cx_for_each_split(l, cx_sgn_element, l->params[0]);
  case NRT_OP(CX_REDUCE): return nrt_cx_reduce(l);
  case NRT_OP(CX_MATH): case NRT_OP(CX_POW_SCALAR): case NRT_OP(CX_POW): case NRT_OP(CX_LOGICAL):
  case NRT_OP(CX_ADDCMUL): case NRT_OP(CX_ADDCDIV): case NRT_OP(CX_LERP): case NRT_OP(CX_LOGADDEXP):
    return nrt_cx_math(l);
  case NRT_OP(FFT_C2C): case NRT_OP(FFT_R2C): case NRT_OP(FFT_C2R): return nrt_cx_fft(l);
  default: break;
  }
  return nrt_kernel_fail(NRT_ERROR_UNSUPPORTED, "complex: op %s has no kernel", nrt_op_name(l->op));
}
