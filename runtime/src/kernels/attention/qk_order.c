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
 * Every triple of positions at head dims 3..8 (blocks of 1..6 queries and
 * 1..9 keys, first and last score) and a discriminating subset at head
 * dims 9..16 (1..20 queries, 1..24 keys), on an Intel AVX-512 host
 * (MKL's AVX-512 kernels; its AMD kernels sum otherwise, so attention.c
 * applies these on such hosts only): four kernels, named by their trees.
 *   SEQ    one accumulator from e = 0, fused multiply-adds
 *   LANES  8 lanes, lane e % 8 adds its rounded products in order, then
 *          ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7))
 *   HEAD   one query or one key (a matrix-vector kernel): positions in the
 *          whole groups of 4 along the other side; q_0 k_0 + q_1 k_1 fused
 *          seeds lane 0, e = 2.. go to lane (e - 1) % 8 rounded, the lanes
 *          summed as LANES
 *   TAIL   the rest of that side: the lanes of e = 1.. as HEAD, unfused,
 *          and the product of e = 0 added last
 * With 2 or more of each: LANES for 2 keys up to 15 queries and 3 keys up
 * to 10, and for 4..11 keys where the keys outnumber both the queries and
 * the head dim minus one; SEQ otherwise. Whether SEQ fuses its first
 * products is not settled (a head dim of 2 rounded as unfused); the trees
 * decide where sums overflow, which is what inputs at float32's limits show.
 * Operands cpublas's BLAS check refuses take ATen's loop instead, on every
 * host (NRT_ATTN_QK_ATEN, chosen in attention.c).
 * Head dims 17..32 (probed to 33): LANES and TAIL take 16 lanes, paired
 * the same way, and fuse each lane's multiply-adds (a product past
 * float32's range lands in range when added to its lane: 2.3e38 - 4e38);
 * HEAD blocks the head dim (not followed: neuron's own order,
 * NRT_ATTN_QK_OWN), as do head dims above 32. */
#include <math.h>
#include "kernels/attention/attention.h"

nrt_attn_qk_kernel nrt_attn_qk_kernel_of(int64_t L, int64_t S, int64_t E, int64_t i, int64_t j) {
  if (E > 32) return NRT_ATTN_QK_OWN;
  if (L == 1 || S == 1) {
    int64_t n = L == 1 ? S : L, pos = L == 1 ? j : i;
    if (pos >= n - n % 4) return NRT_ATTN_QK_TAIL;
    return E <= 16 ? NRT_ATTN_QK_HEAD : NRT_ATTN_QK_OWN; /* HEAD blocks the head dim above 16 */
  }
  if (S == 2) return L <= 15 ? NRT_ATTN_QK_LANES : NRT_ATTN_QK_SEQ;
  if (S == 3) return L <= 10 ? NRT_ATTN_QK_LANES : NRT_ATTN_QK_SEQ;
  int64_t seq_up_to = L > E - 1 ? L : E - 1;
  return S > seq_up_to && S <= 11 ? NRT_ATTN_QK_LANES : NRT_ATTN_QK_SEQ;
}

/* Lane i meets lane i + W/2, then i + W/4, ...: for 8 lanes
 * ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)). */
static float lanes_sum(float *l, int w) {
  for (int h = w / 2; h >= 1; h /= 2)
    for (int x = 0; x < h; x++) l[x] += l[x + h];
  return l[0];
}

float nrt_attn_qk_dot(nrt_attn_qk_kernel kind, const float *q, const float *k, int64_t E) {
  /* 16 lanes above a head dim of 16 (probed to 33), 8 up to it */
  float l[16] = {0}, acc = 0.0f;
  int w = E > 16 ? 16 : 8;
  switch (kind) {
  case NRT_ATTN_QK_SEQ:
    for (int64_t e = 0; e < E; e++) acc = fmaf(q[e], k[e], acc);
    return acc;
  case NRT_ATTN_QK_LANES:
    if (w == 16) /* the 16-lane kernels fuse their multiply-adds, the 8-lane ones do not */
      for (int64_t e = 0; e < E; e++) l[e % w] = fmaf(q[e], k[e], l[e % w]);
    else
      for (int64_t e = 0; e < E; e++) l[e % w] += q[e] * k[e];
    return lanes_sum(l, w);
  case NRT_ATTN_QK_HEAD:
    if (E == 0) return 0.0f;
    l[0] = q[0] * k[0];
    if (E > 1) l[0] = fmaf(q[1], k[1], l[0]);
    for (int64_t e = 2; e < E; e++) l[(e - 1) % 8] += q[e] * k[e];
    return lanes_sum(l, 8);
  case NRT_ATTN_QK_TAIL:
    if (E == 0) return 0.0f;
    if (w == 16)
      for (int64_t e = 1; e < E; e++) l[(e - 1) % w] = fmaf(q[e], k[e], l[(e - 1) % w]);
    else
      for (int64_t e = 1; e < E; e++) l[(e - 1) % w] += q[e] * k[e];
    return lanes_sum(l, w) + q[0] * k[0];
  case NRT_ATTN_QK_ATEN: {
    /* ATen's sum(): 4 partial sums of e mod 4, the tail into the first,
     * then ((p0 + p1) + p2) + p3 */
    float part[4] = {0, 0, 0, 0};
    int64_t e = 0;
    for (; e + 4 <= E; e += 4)
      for (int u = 0; u < 4; u++) part[u] += q[e + u] * k[e + u];
    for (; e < E; e++) part[0] += q[e] * k[e];
    return ((part[0] + part[1]) + part[2]) + part[3];
  }
  default: /* NRT_ATTN_QK_OWN: term by term, each product rounded */
    for (int64_t e = 0; e < E; e++) acc += q[e] * k[e];
    return acc;
  }
}

/* bfloat16 operands enter as zero when subnormal and each step's result
 * leaves as zero when subnormal (the dot-product instructions' DAZ/FTZ). */
static float daz(float x) { return fpclassify(x) == FP_SUBNORMAL ? copysignf(0.0f, x) : x; }

static float fma_ftz(float a, float b, float c) { return daz(fmaf(daz(a), daz(b), c)); }

/* The CPU's bfloat16 flash forward takes q k^T from oneDNN's brgemm; on an
 * Intel host with AVX512-BF16 its kernels fuse each product into a float
 * accumulator, in one of two arrangements, read off by probing the
 * logsumexp of one-key problems whose products are +-1e39 at two head
 * positions (the first reached of +inf and -inf wins a shared accumulator,
 * separate accumulators meet as NaN; every pair of positions, head dims
 * 8, 16 and 40, blocks of 1..33 queries and 1..64 keys):
 *   one query or one key in the block (a matrix-vector product): 16
 *     lanes; the pair (2p, 2p + 1) goes to lane p % 16, its odd product
 *     first; lane x then meets lane x + 8, and the eight sums meet as
 *     neighbours, pairs, halves (probed with 2^25, 1 and -2^25 in three
 *     lanes: 300 of 300 random triples)
 *   two or more of each: per 32 positions of the head dim, one
 *     accumulator for the even positions and one for the odd ones, each
 *     in order; their sum, the blocks' sums added in order.
 * Finite sums round as these arrangements say (products 2^25, -2^25 and 1
 * at three positions: 400 of 400 random triples at head dims 8, 40 and 70,
 * blocks of one and of several queries). */
float nrt_attn_qk_dot_bf16(const float *q, const float *k, int64_t E, bool vector) {
  if (vector) {
    float l[16] = {0};
    for (int64_t e = 0; e < E; e += 2) {
      float *acc = &l[(e / 2) % 16];
      if (e + 1 < E) *acc = fma_ftz(q[e + 1], k[e + 1], *acc);
      *acc = fma_ftz(q[e], k[e], *acc);
    }
    /* lane x meets x + 8, then neighbours, then pairs of them, then halves */
    for (int x = 0; x < 8; x++) l[x] += l[x + 8];
    return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
  }
  float total = 0.0f;
  for (int64_t b = 0; b < E; b += 32) {
    float acc[2] = {0.0f, 0.0f};
    for (int64_t e = b; e < E && e < b + 32; e++) acc[e % 2] = fma_ftz(q[e], k[e], acc[e % 2]);
    float blk = acc[0] + acc[1];
    total = b == 0 ? blk : total + blk;
  }
  return total;
}
