/* GEMM p0 = NRT_GEMM_LOOP_SDOT: C = x . y for float32 vectors (M = N = 1
 * per batch entry, K = n), in the order of MKL's sdot on Intel AVX-512
 * hosts, which the CPU's torch.dot calls (cpublas dot_fast_path) with the
 * vectors' increments. Where huge terms overflow or cancel depends on that
 * order (fuzz 18201-910074: -1 x [-3.4e38, 3.4e38, 0.97, 1.56] is 0 on the
 * CPU, the sum in order -2.53). Measured on the installed build with
 * rooted triples (2^25, -2^25, 1 at three places: which products meet
 * first), n up to 129, and fitted bit for bit on random finite vectors
 * (n 1..1025, 0 of ~1,000 differ):
 *
 *  - both increments 1 (p2 = 0): 16-lane accumulators, every product fused
 *    (lane = fma(x, y, lane)). While 64 remain, blocks of 64 go to four
 *    accumulators (16 each); then while 32 remain, blocks of 32 to the
 *    first two; then blocks of 16 to the first; then the last n % 16 to the
 *    first's lanes 0.. Four used: (a0 + a1) + (a2 + a3), else a0 + a1; the
 *    16 lanes halved by 8 and by 4, then (l0 + l1) + (l2 + l3).
 *  - otherwise (p2 != 0, a stride other than 1, 0 for an expanded vector):
 *    4 lanes (k mod 4) fused over the whole blocks of 4, then A = l0 + l2,
 *    B = l1 + l3; two more products fused into A and B where 2 or 3 remain;
 *    A + B; a last odd product fused into it.
 *
 * sdot_ref is the reference: the plain loops above, one product at a time. */
#include <math.h>
#include "kernels/common/common.h"
#include "kernels/gemm/loop.h"
#include "nrt/ops/gemm.h"

#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")

/* x_k, y_k as fmaf's first two arguments */
#define XY(k) (*(const float *)(x + (k) * sx)), (*(const float *)(y + (k) * sy))

static float unit_ref(const char *x, int64_t sx, const char *y, int64_t sy, int64_t n) {
  float acc[4][16] = {{0}};
  int64_t i = 0;
  bool four = n >= 64;
  for (; n - i >= 64; i += 64)
    for (int a = 0; a < 4; a++)
      for (int l = 0; l < 16; l++) acc[a][l] = fmaf(XY(i + 16 * a + l), acc[a][l]);
  for (; n - i >= 32; i += 32)
    for (int a = 0; a < 2; a++)
      for (int l = 0; l < 16; l++) acc[a][l] = fmaf(XY(i + 16 * a + l), acc[a][l]);
  for (; n - i >= 16; i += 16)
    for (int l = 0; l < 16; l++) acc[0][l] = fmaf(XY(i + l), acc[0][l]);
  for (int l = 0; i + l < n; l++) acc[0][l] = fmaf(XY(i + l), acc[0][l]);
  float v[16];
  for (int l = 0; l < 16; l++) v[l] = four ? (acc[0][l] + acc[1][l]) + (acc[2][l] + acc[3][l]) : acc[0][l] + acc[1][l];
  for (int h = 8; h >= 4; h /= 2)
    for (int l = 0; l < h; l++) v[l] += v[l + h];
  return (v[0] + v[1]) + (v[2] + v[3]);
}

static float strided_ref(const char *x, int64_t sx, const char *y, int64_t sy, int64_t n) {
  float lane[4] = {0, 0, 0, 0};
  int64_t i = 0;
  for (; n - i >= 4; i += 4)
    for (int q = 0; q < 4; q++) lane[q] = fmaf(XY(i + q), lane[q]);
  float a = lane[0] + lane[2], b = lane[1] + lane[3];
  if (n - i >= 2) {
    a = fmaf(XY(i), a);
    b = fmaf(XY(i + 1), b);
    i += 2;
  }
  float s = a + b;
  if (i < n) s = fmaf(XY(i), s);
  return s;
}

#undef XY

#pragma GCC pop_options

nrt_status nrt_gemm_sdot_execute(const nrt_launch *l) {
  const nrt_operand *C = &l->operands[0], *A = &l->operands[1], *B = &l->operands[2];
  if (C->dtype != NRT_FLOAT32 || A->dtype != NRT_FLOAT32 || B->dtype != NRT_FLOAT32 || l->ninputs != 2 ||
      l->sizes[1] != 1 || l->sizes[2] != 1 || l->params[1])
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "GEMM: SDOT takes float32 vectors, M = N = 1 and no bias");
  bool strided = l->params[2] != 0;
  int64_t n = l->sizes[3];
  for (int64_t b = 0; b < l->sizes[0]; b++) {
    const char *x = (const char *)A->data + b * A->strides[0], *y = (const char *)B->data + b * B->strides[0];
    /* A is [1, K] (k along dim 2), B is [K, 1] (k along dim 1) */
    float s = strided ? strided_ref(x, A->strides[2], y, B->strides[1], n) : unit_ref(x, A->strides[2], y, B->strides[1], n);
    *(float *)((char *)C->data + b * C->strides[0]) = s;
  }
  return NRT_SUCCESS;
}
