/* GEMM in the CPU's plain loops (GEMM p0 != NRT_GEMM_PACKED): the shapes
 * where PyTorch's CPU does not reach a blocked BLAS kernel but ATen's own
 * loops (bmm/baddbmm below 400 multiply-adds per batch entry, gemv with a
 * zero-stride vector) or the reference BLAS loops. There each product is
 * rounded before it is added, in k order from the first, with no fused
 * multiply-add, so sums of huge terms overflow or cancel, and 0 * inf turns
 * into NaN, exactly where the CPU's do; the packed kernels' fused k blocks
 * do not (3e38 * 0.3 - 3e38 * 0.3 leaves the first product's rounding
 * error, -3.8e30, where the CPU gets 0).
 *
 * Accumulation is in the operands' math type as on the CPU: float for
 * float32/bfloat16/float16, double for float64. p0 (nrt_gemm_order) says
 * where alpha and the bias go:
 *   AFTER    C = alpha * sum + beta * bias (ATen's loop: r * beta + alpha *
 *            sum, r read after the sum; BLAS's 'T' loops; gemv 't')
 *   ALPHA_A  C starts as beta * bias (0 for beta == 0, the bias itself for
 *   ALPHA_B  beta == 1) and adds (alpha * a_k) * b_k, or a_k * (alpha *
 *            b_k), for each k (BLAS's 'N' loops, ATen's gemv 'n')
 * p1 != 0: C's elements share memory (an expanded in-place self): one
 * thread, outputs in (batch, row, column) order, each reading the bias
 * just before its store, as the CPU's loop does through the aliases.
 * This loop is both the kernel and its reference: these shapes are small. */
#include "kernels/common/common.h"
#include "kernels/gemm/loop.h"
#include "nrt/ops/gemm.h"

typedef struct loop_job {
  const nrt_launch *l;
  int64_t M, N, K;
  int order;
  bool bias;
} loop_job;

#define AT(o, b, i, j) ((char *)(o)->data + (b) * (o)->strides[0] + (i) * (o)->strides[1] + (j) * (o)->strides[2])

/* Output row i of batch b; T is the math type (float or double). */
#define GEMM_LOOP_ROW(T, NAME)                                                                   \
  static void NAME(const loop_job *jb, int64_t b, int64_t i) {                                   \
    const nrt_launch *l = jb->l;                                                                 \
    const nrt_operand *C = &l->operands[0], *A = &l->operands[1], *B = &l->operands[2];          \
    const nrt_operand *Y = &l->operands[3];                                                      \
    const T alpha = (T)l->scalars[0].f, beta = (T)l->scalars[1].f;                               \
    for (int64_t j = 0; j < jb->N; j++) {                                                        \
      T r = 0;                                                                                   \
      if (jb->order == NRT_GEMM_LOOP_AFTER) {                                                    \
        for (int64_t k = 0; k < jb->K; k++)                                                      \
          r += (T)nrt_ref_load_f64(AT(A, b, i, k), A->dtype) * (T)nrt_ref_load_f64(AT(B, b, k, j), B->dtype); \
        r = alpha * r;                                                                           \
        if (jb->bias) r = (T)nrt_ref_load_f64(AT(Y, b, i, j), Y->dtype) * beta + r;              \
      } else {                                                                                   \
        if (jb->bias) {                                                                          \
          r = (T)nrt_ref_load_f64(AT(Y, b, i, j), Y->dtype);                                     \
          if (beta != 1) r = beta * r;                                                           \
        }                                                                                        \
        for (int64_t k = 0; k < jb->K; k++) {                                                    \
          T x = (T)nrt_ref_load_f64(AT(A, b, i, k), A->dtype);                                   \
          T y = (T)nrt_ref_load_f64(AT(B, b, k, j), B->dtype);                                   \
          if (jb->order == NRT_GEMM_LOOP_ALPHA_A) x = alpha * x;                                 \
          else y = alpha * y;                                                                    \
          r += x * y;                                                                            \
        }                                                                                        \
      }                                                                                          \
      nrt_ref_store_f64(AT(C, b, i, j), C->dtype, (double)r);                                    \
    }                                                                                            \
  }

/* No contraction of x * y + r into a fused multiply-add: the CPU's loops
 * round each product (their builds target x86-64 without FMA). */
#pragma GCC push_options
#pragma GCC optimize("O2,fp-contract=off")
GEMM_LOOP_ROW(float, row_f32)
GEMM_LOOP_ROW(double, row_f64)
#pragma GCC pop_options

static void loop_range(void *ctx, int64_t begin, int64_t end) {
  const loop_job *jb = ctx;
  bool f64 = jb->l->compute_dtype == NRT_FLOAT64;
  for (int64_t t = begin; t < end; t++) {
    if (f64) row_f64(jb, t / jb->M, t % jb->M);
    else row_f32(jb, t / jb->M, t % jb->M);
  }
}

nrt_status nrt_gemm_loop_execute(const nrt_launch *l) {
  loop_job jb = {.l = l, .M = l->sizes[1], .N = l->sizes[2], .K = l->sizes[3], .order = (int)l->params[0]};
  if (jb.order < NRT_GEMM_LOOP_AFTER || jb.order > NRT_GEMM_LOOP_ALPHA_B)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "GEMM: p0 = %d is no loop order", jb.order);
  if (!nrt_dtype_is_floating(l->compute_dtype))
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "GEMM: the loop order takes floating operands only");
  jb.bias = l->ninputs == 3 && l->scalars[1].f != 0.0;
  if (l->sizes[0] == 0 || jb.M == 0 || jb.N == 0) return NRT_SUCCESS;
  int64_t rows = l->sizes[0] * jb.M;
  if (l->params[1]) {
    loop_range(&jb, 0, rows); /* C aliases itself: in order, one thread */
    return NRT_SUCCESS;
  }
  /* about 2 flops per multiply-add: a thread's share from ~32k of them */
  int64_t per_row = jb.N * (jb.K > 0 ? jb.K : 1);
  nrt_parallel_for(rows, nrt_max_i64(1, 32768 / per_row), loop_range, &jb);
  return NRT_SUCCESS;
}
