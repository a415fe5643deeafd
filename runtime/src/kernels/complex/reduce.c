/* CX_REDUCE (nrt/ops/complex.h): sum, mean, product, all, any of complex
 * (or real) values into a complex, real or bool output, in TensorIterator's
 * reduction layout (the output has stride 0 along the reduced dims).
 *
 * Each output element is one task: its reduced elements are summed in a
 * fixed order in double, so results do not depend on the thread count.
 * This loop is also the reference path. A product with p1 != 0 follows
 * the CPU's order and precision instead (cx_prod_stepwise, one plain loop
 * for both paths, its rows split over threads on the fast one). (Complex sums in the CPU's order are the reduce
 * family's cascade.) */
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

/* ---- PROD in the CPU's order (p1 = its vector width in bytes) ---------------
 * The CPU multiplies a complex64 (complex128) product in complex<float>
 * (complex<double>), rounding every step, as ATen's binary_kernel_reduce_vec
 * runs it over the TensorIterator this launch was built from (dim 0
 * fastest, reduced dims first): every output starts at 1, and each 2-d
 * loop (dims 0 and 1, once per index of dims 2..) takes one of three paths
 * by its strides:
 *  - contiguous reduction (dim 0 reduced, unit stride): per row, blocks of
 *    4 vectors (4 * lanes elements; lanes = p1 / element size, p1 = 32:
 *    prod_stub runs its AVX2 build on AVX-512 machines) multiplied lane-wise
 *    into four accumulators loaded from the first block, combined as
 *    (a0 a1)(a2 a3), the lanes multiplied left to right into lane 0 and that
 *    into the output; the row's tail then one element at a time;
 *  - outer reduction (dim 0 reduced, dim 1 unit stride in and out): columns
 *    in blocks of 4 vectors, each column's product down dim 0 started from
 *    its first row, then multiplied into the output; the remaining columns
 *    one element at a time;
 *  - otherwise one element at a time into the output.
 * The multiplies differ in the last bit and at infinities, and which one
 * runs where was measured on the installed build (150-200 random draws per
 * layout, all matching): vector steps round each product (ac - bd,
 * ad + bc); scalar steps are compiled with fused multiply-adds
 * (fma(a, c, -bd), fma(a, d, bc)), except, for complex64, the last lane
 * step and the third path's steps. Not matched yet: a block's
 * product into an output that is not 1 (a reduction over several
 * contiguous rows; 94 of 150 draws agree to the bit), and the CPU's
 * two-pass split of one product of 32768 elements or more over threads. */
typedef struct cx_prod {
  const nrt_launch *l;
  bool f32;      /* complex64: float arithmetic */
  int64_t es;    /* element size */
  int64_t lanes; /* complex elements per CPU vector */
} cx_prod;

/* Vectorized<complex>'s operator* (each product rounded: cxf_mul) and
 * c10::complex's scalar one as that build compiles it (cxf_mul_fma), in
 * float for complex64. */
static inline nrt_cx cs_vmul(bool f32, nrt_cx a, nrt_cx b) {
  return f32 ? cxf_to(cxf_mul(cxf_of(a), cxf_of(b))) : nrt_cx_mul(a, b);
}
static inline nrt_cx cs_smul(bool f32, nrt_cx a, nrt_cx b) {
  return f32 ? cxf_to(cxf_mul_fma(cxf_of(a), cxf_of(b))) : nrt_cx_mul_fma(a, b);
}

#define CXP_MAX_WIDTH 32 /* 4 vectors of at most 8 lanes (complex64 in 64 bytes) */

/* out *= x, in the multiply `fused` names. */
static inline void cxp_into(const cx_prod *p, char *out, nrt_cx x, bool fused) {
  nrt_dtype dt = p->l->operands[0].dtype;
  nrt_cx o = nrt_cx_load(out, dt);
  nrt_cx_store(out, dt, fused ? cs_smul(p->f32, o, x) : cs_vmul(p->f32, o, x));
}

/* vectorized_reduction of one unit-stride row of n elements into out. */
/* The blocks of a complex64 row multiplied on floats directly: the same
 * rounded products in the same order as cxp_row's plain loop (its
 * reference), without a double round trip per element. */
static void cxp_blocks_c64(const float *x, int64_t count, int64_t w, nrt_cx *acc) {
  cxf a[CXP_MAX_WIDTH];
  for (int64_t k = 0; k < w; k++) a[k] = (cxf){x[2 * k], x[2 * k + 1]};
  for (int64_t c = 1; c < count; c++) {
    const float *b = x + 2 * c * w;
    for (int64_t k = 0; k < w; k++) a[k] = cxf_mul(a[k], (cxf){b[2 * k], b[2 * k + 1]});
  }
  for (int64_t k = 0; k < w; k++) acc[k] = cxf_to(a[k]);
}

static void cxp_row(const cx_prod *p, char *out, const char *in, int64_t n) {
  nrt_dtype dt = p->l->operands[1].dtype;
  bool f32 = p->f32;
  int64_t lanes = p->lanes, w = 4 * lanes, count = n / w;
  if (count > 0) {
    nrt_cx a[CXP_MAX_WIDTH];
    if (f32 && !nrt_kernels_reference()) {
      cxp_blocks_c64((const float *)in, count, w, a);
    } else {
      for (int64_t k = 0; k < w; k++) a[k] = nrt_cx_load(in + k * p->es, dt);
      for (int64_t c = 1; c < count; c++)
        for (int64_t k = 0; k < w; k++) a[k] = cs_vmul(f32, a[k], nrt_cx_load(in + (c * w + k) * p->es, dt));
    }
    nrt_cx lane[CXP_MAX_WIDTH / 4];
    for (int64_t k = 0; k < lanes; k++)
      lane[k] = cs_vmul(f32, cs_vmul(f32, a[k], a[lanes + k]), cs_vmul(f32, a[2 * lanes + k], a[3 * lanes + k]));
    for (int64_t k = 1; k < lanes; k++)
      lane[0] = !f32 || k + 1 < lanes ? cs_smul(f32, lane[0], lane[k]) : cs_vmul(f32, lane[0], lane[k]);
    cxp_into(p, out, lane[0], true);
  }
  for (int64_t i = count * w; i < n; i++) cxp_into(p, out, nrt_cx_load(in + i * p->es, dt), true);
}

/* vectorized_outer_reduction: size1 unit-stride columns of size0 rows
 * (input rows in0 bytes apart) into the unit-stride outputs at out. */
static void cxp_columns(const cx_prod *p, char *out, const char *in, int64_t in0, int64_t size0, int64_t size1) {
  nrt_dtype dt = p->l->operands[1].dtype;
  int64_t w = 4 * p->lanes, j = 0;
  for (; j + w <= size1; j += w)
    for (int64_t k = 0; k < w; k++) {
      const char *col = in + (j + k) * p->es;
      nrt_cx acc = nrt_cx_load(col, dt);
      for (int64_t i = 1; i < size0; i++) acc = cs_vmul(p->f32, acc, nrt_cx_load(col + i * in0, dt));
      cxp_into(p, out + (j + k) * p->es, acc, false);
    }
  for (; j < size1; j++)
    for (int64_t i = 0; i < size0; i++)
      cxp_into(p, out + j * p->es, nrt_cx_load(in + j * p->es + i * in0, dt), true);
}

typedef struct cxp_rows {
  const cx_prod *p;
  char *out;
  const char *in;
  int64_t n, out1, in1;
} cxp_rows;

static void cxp_rows_range(void *ctx, int64_t begin, int64_t end) {
  const cxp_rows *r = ctx;
  for (int64_t j = begin; j < end; j++) cxp_row(r->p, r->out + j * r->out1, r->in + j * r->in1, r->n);
}

static void cxp_loop2d(const cx_prod *p, char *out, const char *in, int64_t size0, int64_t size1, int64_t out0,
                       int64_t in0, int64_t out1, int64_t in1) {
  if (out0 == 0 && in0 == p->es) {
    /* rows into different outputs are independent: they may run in parallel */
    cxp_rows r = {.p = p, .out = out, .in = in, .n = size0, .out1 = out1, .in1 = in1};
    if (out1 != 0 && !nrt_kernels_reference())
      nrt_parallel_for(size1, size0 >= 4096 ? 1 : 4096 / (size0 > 0 ? size0 : 1), cxp_rows_range, &r);
    else
      cxp_rows_range(&r, 0, size1);
  } else if (out0 == 0 && out1 == p->es && in1 == p->es) {
    cxp_columns(p, out, in, in0, size0, size1);
  } else {
    nrt_dtype dt = p->l->operands[1].dtype;
    for (int64_t j = 0; j < size1; j++)
      for (int64_t i = 0; i < size0; i++)
        cxp_into(p, out + j * out1 + i * out0, nrt_cx_load(in + j * in1 + i * in0, dt), !p->f32);
  }
}

/* The 2-d loops run in the CPU's order; only the rows of a contiguous
 * reduction, each into its own output, are split over threads. */
static nrt_status cx_prod_stepwise(const nrt_launch *l) {
  nrt_dtype dt = l->operands[0].dtype;
  if ((dt != NRT_COMPLEX64 && dt != NRT_COMPLEX128) || l->operands[1].dtype != dt)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: a product in the CPU's order (p1 != 0) needs one "
                           "complex64 or complex128 dtype for input and output, got %s and %s", nrt_op_name(l->op),
                           nrt_dtype_name(l->operands[1].dtype), nrt_dtype_name(dt));
  int64_t vbytes = l->params[1], es = (int64_t)nrt_dtype_size(dt);
  if (vbytes != 16 && vbytes != 32 && vbytes != 64)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: p1 = %lld is not a vector width of 16, 32 or 64 bytes",
                           nrt_op_name(l->op), (long long)vbytes);
  cx_prod p = {.l = l, .f32 = dt == NRT_COMPLEX64, .es = es, .lanes = vbytes / es};
  const nrt_operand *out = &l->operands[0], *in = &l->operands[1];
  int64_t outer = 1, nout = 1;
  for (int d = 0; d < l->ndim; d++) {
    if (l->sizes[d] == 0) return NRT_SUCCESS; /* the glue fills empties */
    if (d >= 2) outer *= l->sizes[d];
    if (out->strides[d] != 0) nout *= l->sizes[d];
  }
  /* every output starts at 1 (the CPU fills it with the identity first) */
  for (int64_t g = 0; g < nout; g++) {
    int64_t off = 0, rem = g;
    for (int d = 0; d < l->ndim; d++) {
      if (out->strides[d] == 0) continue;
      off += (rem % l->sizes[d]) * out->strides[d];
      rem /= l->sizes[d];
    }
    nrt_cx_store((char *)out->data + off, dt, nrt_cx_make(1.0, 0.0));
  }
  int64_t size0 = l->ndim > 0 ? l->sizes[0] : 1, size1 = l->ndim > 1 ? l->sizes[1] : 1;
  int64_t out0 = l->ndim > 0 ? out->strides[0] : 0, in0 = l->ndim > 0 ? in->strides[0] : 0;
  int64_t out1 = l->ndim > 1 ? out->strides[1] : 0, in1 = l->ndim > 1 ? in->strides[1] : 0;
  for (int64_t o = 0; o < outer; o++) {
    char *po = out->data;
    const char *pi = in->data;
    int64_t rem = o;
    for (int d = 2; d < l->ndim; d++) {
      int64_t i = rem % l->sizes[d];
      rem /= l->sizes[d];
      po += i * out->strides[d];
      pi += i * in->strides[d];
    }
    cxp_loop2d(&p, po, pi, size0, size1, out0, in0, out1, in1);
  }
  return NRT_SUCCESS;
}

nrt_status nrt_cx_reduce(const nrt_launch *l) {
  if (l->params[0] < 0 || l->params[0] > 4)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                           "%s: reduction mode p0 = %lld outside 0..4", nrt_op_name(l->op), (long long)l->params[0]);
  if (l->noutputs != 1)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                           "%s: expected 1 output, got %d", nrt_op_name(l->op), l->noutputs);
  if (l->params[0] == 2 && l->params[1] != 0) return cx_prod_stepwise(l);
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
