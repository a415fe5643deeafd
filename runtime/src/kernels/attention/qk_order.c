/* Family ATTENTION: the order in which the CPU's float32 flash kernel sums
 * a score q_i . k_j, for the reference path (attention.c ref_row_probs).
 *
 * The CPU's flash forward and backward take q k^T from one sgemm per block
 * (cpublas::gemm, transa = T, m = keys, n = queries, k = head dim), which
 * is MKL's. MKL picks a kernel by the block's shape, and each kernel sums
 * the head dim in its own tree. Where the inputs hold infinities or values
 * near float32's limit, that tree decides whether a score is +inf, -inf or
 * NaN (3e38 + 3e38 - 3e38), and so whether a row's output is NaN or a
 * number. The trees below were read off the CPU by probing: products of
 * +2^25, -2^25 and 1 at three positions give a score of 1 exactly when the
 * first two meet before the third joins them, and the score is visible as
 * the logsumexp of a one-key problem (the other keys' scores at -1e3).
 * Every triple of positions at head dims 3..16 for the first block shapes,
 * every row and key of blocks of 1..9 queries and 1..12 keys at head dim
 * 9, on an Intel AVX-512 host (MKL's AVX-512 kernels; its AMD kernels sum
 * otherwise, so attention.c applies these on such hosts only): four
 * kernels, named here by their trees. Head dims below 9 were probed at the
 * first shapes only; a random probe of +-3e38 / inf rows (300 problems)
 * still differs in 1 of 10 problems, mostly 4..11 keys at small head dims,
 * where the kernel is not the one the head dim 9 table gives.
 *   SEQ    one accumulator from e = 0, fused multiply-adds (queries >= 2,
 *          keys 4..8, 12, and 9..11 with more than 8 queries)
 *   LANES  8 lanes, lane e % 8 adds its rounded products in order, then
 *          ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)) (queries >= 2,
 *          keys 2..3, and 9..11 with up to 8 queries)
 *   HEAD   one query or one key (a matrix-vector kernel): positions in the
 *          whole groups of 4 along the other side; q_0 k_0 + q_1 k_1 fused
 *          seeds lane 0, e = 2.. go to lane (e - 1) % 8 rounded, the lanes
 *          summed as LANES
 *   TAIL   the rest of that side: the lanes of e = 1.. as HEAD, unfused,
 *          and the product of e = 0 added last
 * Head dims above 16 (MKL moves to 16 lanes and blocks the head dim) and
 * larger blocks keep neuron's own order (nrt_attn_qk_kernel returns
 * NRT_ATTN_QK_OWN). */
#include <math.h>
#include "kernels/attention/attention.h"

nrt_attn_qk_kernel nrt_attn_qk_kernel_of(int64_t L, int64_t S, int64_t E, int64_t i, int64_t j) {
  if (E > 16) return NRT_ATTN_QK_OWN;
  if (L == 1 || S == 1) {
    int64_t n = L == 1 ? S : L, pos = L == 1 ? j : i;
    return pos < n - n % 4 ? NRT_ATTN_QK_HEAD : NRT_ATTN_QK_TAIL;
  }
  if (S <= 3) return NRT_ATTN_QK_LANES;
  if (S <= 8 || S == 12) return NRT_ATTN_QK_SEQ;
  if (S <= 11) return L <= 8 ? NRT_ATTN_QK_LANES : NRT_ATTN_QK_SEQ;
  return NRT_ATTN_QK_OWN;
}

/* ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)) */
static float lanes8_sum(const float *l) {
  return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

float nrt_attn_qk_dot(nrt_attn_qk_kernel kind, const float *q, const float *k, int64_t E) {
  float l[8] = {0, 0, 0, 0, 0, 0, 0, 0}, acc = 0.0f;
  switch (kind) {
  case NRT_ATTN_QK_SEQ:
    for (int64_t e = 0; e < E; e++) acc = fmaf(q[e], k[e], acc);
    return acc;
  case NRT_ATTN_QK_LANES:
    for (int64_t e = 0; e < E; e++) l[e % 8] += q[e] * k[e];
    return lanes8_sum(l);
  case NRT_ATTN_QK_HEAD:
    if (E == 0) return 0.0f;
    l[0] = q[0] * k[0];
    if (E > 1) l[0] = fmaf(q[1], k[1], l[0]);
    for (int64_t e = 2; e < E; e++) l[(e - 1) % 8] += q[e] * k[e];
    return lanes8_sum(l);
  case NRT_ATTN_QK_TAIL:
    if (E == 0) return 0.0f;
    for (int64_t e = 1; e < E; e++) l[(e - 1) % 8] += q[e] * k[e];
    return lanes8_sum(l) + q[0] * k[0];
  default: /* NRT_ATTN_QK_OWN: term by term, each product rounded */
    for (int64_t e = 0; e < E; e++) acc += q[e] * k[e];
    return acc;
  }
}
