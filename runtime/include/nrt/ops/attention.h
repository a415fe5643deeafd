/* Op family ATTENTION. Fused scaled dot-product attention, forward and
 * backward (kernels/attention/attention.c: descriptor checks, dropout
 * mask, the double-precision reference; blocked.c: the blocked
 * flash-attention kernels; math.c: the CPU math backend's order, p3). The backward is two launches:
 * SDPA_BACKWARD_PREP (per-row statistics), then SDPA_BACKWARD (plus
 * SDPA_BACKWARD_DS when a float mask needs its gradient).
 * Entries: X(name, kind, min_inputs, max_inputs); scalars (s0..s3),
 * params (p0..p3) and aux[] as each comment says. See nrt/launch.h for
 * how families are numbered.
 *
 * Common layout. sizes (ndim 7) = {B, Hq, Hk, L, S, E, Ev}: batch, query
 * heads, key/value heads (Hq % Hk == 0; query head h reads key/value head
 * h / (Hq / Hk), which covers grouped-query attention and Hk == 1
 * broadcasting), query rows, key rows, query/key head dim, value head dim.
 * 4-d operands have byte strides {b, h, row, col}; per-row float32
 * operands (lse) {b, h, row}. q [B,Hq,L,E], k [B,Hk,S,E], v [B,Hk,S,Ev],
 * out/dO [B,Hq,L,Ev]; q, k, v floating (float32, bfloat16, float16 or
 * float64 read as float32); outputs rounded once on store.
 * Optional mask [B,Hq,L,S] (stride 0 for broadcast dims): bool (true =
 * attend, false = -inf) or floating (added to the scaled scores).
 * scores s_ij = s0 * q_i.k_j + mask_ij; p0 = 1: causal, PyTorch's top-left
 * aligned tril(ones(L, S)): key j is visible to row i only when j <= i.
 * A row whose scores are all -inf (fully masked) gives output 0, logsumexp
 * -inf and zero gradients: PyTorch's math backend (_safe_softmax) does
 * the same. NaN scores propagate.
 * Dropout (s1 = p > 0): element (b, h, i, j) has linear index
 * e = p2 + ((b*Hq + h)*L + i)*S + j; Philox4x32-10 keyed by p1 (seed)
 * at counter e/4 (stream 0) gives word w = word[e % 4]; the element is kept
 * when w * 2^-32 < 1 - p and then scaled by 1/(1 - p). The backward
 * regenerates the same mask from the same p1, p2. The glue advances the
 * generator's offset by B*Hq*L*S.
 * p3 = 1 (all four ops): the CPU's math backend's order instead of the
 * flash order (kernels/attention/math.c): q and k scaled by sqrt(s0), the
 * products in ATen's plain bmm loop, its last-dim softmax and autograd's
 * backward of that decomposition. The glue sets it only for problems whose
 * every product has M*N*K < 400 (where the CPU's bmm runs that loop),
 * without dropout and with Hq == Hk. */
#ifndef NRT_OPS_ATTENTION_H
#define NRT_OPS_ATTENTION_H

#include "nrt/launch.h"

#define NRT_OPS_ATTENTION(X)                                                  \
  X(SDPA_FORWARD, ATTENTION, 3, 4)  /* outputs out [B,Hq,L,Ev], lse float32 \
     [B,Hq,L] (log sum_j exp(s_ij), before dropout); inputs q, k, v,       \
     mask? (ninputs 4). s0 scale, s1 dropout p; p0 causal, p1 seed,        \
     p2 offset */                                                         \
  X(SDPA_BACKWARD_PREP, ATTENTION, 3, 7) /* output rowstat float32         \
     [B,Hq,L,Ev+2]: row i holds dO_i in float32, then lse_i, then          \
     D_i = dO_i . out_i; inputs out, dO, lse, then optionally q, k, v,     \
     mask? (ninputs 6..7; scalars, params as the forward): D then uses out  \
     recomputed in float32 from them and lse, because D feeds dP - D, a    \
     cancellation that a 16-bit out would spoil. dO rides along so that    \
     the backward fits in eight operands */                               \
  X(SDPA_BACKWARD, ATTENTION, 4, 5) /* outputs dQ [B,Hq,L,E], dK [B,Hk,S,E], \
     dV [B,Hk,S,Ev] (dK, dV summed over the query heads of each group),    \
     fully written; inputs q, k, v, rowstat (of SDPA_BACKWARD_PREP),       \
     mask?; scalars, params as the forward */                             \
  X(SDPA_BACKWARD_DS, ATTENTION, 4, 5) /* output dS float [B,Hq,L,S] =     \
     dLoss/ds_ij (the gradient of an additive mask before any broadcast    \
     reduction), fully written; inputs, scalars, params as SDPA_BACKWARD */

NRT_OP_FAMILY_ENUM(ATTENTION, NRT_OPS_ATTENTION);

#endif
