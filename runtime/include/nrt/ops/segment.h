/* Op family SEGMENT. Keyed and segmented reductions, pairwise distances
 * and the CTC loss (kernels/segment.c dispatches; segment_reduce.c,
 * segment_ctc.c).
 * Entries: X(name, kind, min_inputs, max_inputs); scalars (s0..s3),
 * params (p0..p3) and aux[] as each comment says. See nrt/launch.h for
 * how families are numbered.
 *
 * Index operands (indices, offsets) may be any integer dtype and are read
 * as int64. Float operands compute in float32 (cdist, the margin and nll
 * losses in the input's dtype as ATen does, pdist in double); every
 * op here is floating-only. Each kernel writes every element of its
 * outputs, and each output element is produced by exactly one task, so
 * results do not depend on the thread count. */
#ifndef NRT_OPS_SEGMENT_H
#define NRT_OPS_SEGMENT_H

#include "nrt/launch.h"

/* EMBEDDING_BAG modes (p0), ATen's numbering. */
enum { NRT_BAG_SUM = 0, NRT_BAG_MEAN = 1, NRT_BAG_MAX = 2 };

/* SEGMENT_REDUCE reductions (p0). */
enum { NRT_SEG_SUM = 0, NRT_SEG_MEAN = 1, NRT_SEG_MAX = 2, NRT_SEG_MIN = 3, NRT_SEG_PROD = 4 };

/* CTC_LOSS / CTC_LOSS_BACKWARD per-sequence table (int64 [B, 4]) columns:
 * the sequence's input length, its target length, and where its targets
 * start in the targets operand (row, column). */
enum { NRT_CTC_INPUT_LEN = 0, NRT_CTC_TARGET_LEN = 1, NRT_CTC_TARGET_ROW = 2, NRT_CTC_TARGET_COL = 3,
       NRT_CTC_TABLE_COLS = 4 };

/* Loss reductions (p0 of MULTI_MARGIN_LOSS, NLL_LOSS_REDUCE), ATen's numbering. */
enum { NRT_LOSS_NONE = 0, NRT_LOSS_MEAN = 1, NRT_LOSS_SUM = 2 };

#define NRT_OPS_SEGMENT(X)                                                    \
  /* Bags of embedding rows. sizes (ndim 3) = {B, D, N}: bags, embedding   \
     width, number of indices. Outputs: out [B, D] strides {b, d};          \
     offset2bag int64 [N] (bag of each index) strides {n}; bag_size int64  \
     [B] (indices in the bag other than padding_idx) strides {b};          \
     with noutputs = 4, max_indices int64 [B, D] strides {b, d} (MAX mode: \
     the weight row of each maximum, the first on ties, -1 for an empty    \
     bag). Inputs: weight [V, D] strides {v, d}, indices [N] strides {n},  \
     offsets strides {b} (B + p2 entries), optional per_sample_weights [N] \
     strides {n} (SUM mode; ninputs 4). p0 = mode (NRT_BAG_*), p1 =        \
     padding_idx (-1: none; such indices add nothing), p2 =                \
     include_last_offset (offsets[B] ends the last bag, else N does);     \
     aux[0] = V. Bag b is [offsets[b], offsets[b+1]). Fails on offsets[0] \
     != 0, decreasing offsets, offsets past N, or an index outside [0, V). \
     SUM / MEAN accumulate in float32 in index order; an empty bag gives 0. */ \
  X(EMBEDDING_BAG, SEGMENT, 3, 4)                                           \
  /* Pairwise p-norm distances between rows. sizes (ndim 4) = {B, P, R,    \
     M}. s0 (.f) = p >= 0 (inf allowed): p = 0 counts differing           \
     coordinates, p = inf takes the largest |difference|. Sums in the     \
     dtype (float32 for 16-bit) in ATen's serial order. */                 \
  X(CDIST, SEGMENT, 2, 2)            /* output dist [B, P, R] strides      \
     {b, p, r}; inputs x1 [B, P, M] strides {b, p, m}, x2 [B, R, M]       \
     strides {b, r, m} */                                                  \
  X(CDIST_BACKWARD, SEGMENT, 4, 4)   /* output grad_x1 [B, P, M] strides    \
     {b, p, m}; inputs grad [B, P, R] strides {b, p, r}, x1, x2 (as CDIST), \
     dist [B, P, R] (CDIST's result) strides {b, p, r}; s0 = p.           \
     grad_x1[i] = sum_j grad[i, j] * d dist(x1_i, x2_j) / d x1_i, with 0  \
     where dist is 0. The gradient of x2 is this op with the roles        \
     exchanged and grad, dist transposed. */                               \
  X(PDIST, SEGMENT, 1, 1)            /* sizes {N, M}; output [N(N-1)/2]    \
     strides {k}: the distances of rows i < j in row-major order of       \
     (i, j); input x [N, M] strides {n, m}; s0 = p as CDIST */             \
  X(PDIST_BACKWARD, SEGMENT, 3, 3)   /* sizes {N, M}; output grad_x [N, M] \
     strides {n, m}; inputs grad [N(N-1)/2] strides {k}, x [N, M], pdist   \
     [N(N-1)/2] strides {k}; s0 = p */                                     \
  /* Segmented reduction along one axis. sizes (ndim 4) = {O, S, I, L}:    \
     outer size, segments, inner size, data length along the axis. Output  \
     out [O, S, I] strides {o, s, i}; inputs data [O, L, I] strides {o, l,  \
     i}, bounds [O, S] (lengths, p1 = 1) or [O, S + 1] (offsets, p1 = 0)   \
     strides {o, s}. p0 = reduction (NRT_SEG_*); p2 = has initial, s0 (.f) \
     = initial (rounded to out's dtype first, as ATen does). Segment s of  \
     row o is [start, end): lengths run from 0, offsets give them directly \
     (offsets[0] may be > 0). An empty segment gives initial, else the      \
     reduction's identity (max -inf, min +inf, sum 0, prod 1), or NaN for   \
     mean. NaN propagates through max/min. Accumulates in float32 in data  \
     order. Fails on a negative length, decreasing offsets or a segment     \
     past L. */                                                            \
  X(SEGMENT_REDUCE, SEGMENT, 2, 2)                                          \
  /* Its gradient. sizes, p0..p2, s0 as SEGMENT_REDUCE. Output grad_data   \
     [O, L, I] strides {o, l, i} (0 outside every segment); inputs grad     \
     [O, S, I] strides {o, s, i}, out [O, S, I] (the forward's result)     \
     strides {o, s, i}, data [O, L, I] strides {o, l, i}, bounds as the     \
     forward. max/min: every element equal to the result (or NaN) gets     \
     grad, and when several do, the positive shares are divided by their  \
     count (ATen's rule); mean: grad / length; prod: grad * out / x, or    \
     grad times the product of the others (with initial) where x is 0 or   \
     NaN. */                                                                \
  X(SEGMENT_REDUCE_BACKWARD, SEGMENT, 4, 4)                                 \
  /* CTC loss forward (alpha recursion in log space, double inside).       \
     sizes (ndim 4) = {T, B, C, Smax}: input time steps, batch, classes,   \
     longest target. Outputs: neg_log_likelihood [B] strides {b};          \
     log_alpha [B, T, 2 Smax + 1] strides {b, t, s} (entries past a        \
     sequence's input length or 2 target_length + 1 are -inf). Inputs:     \
     log_probs [T, B, C] strides {t, b, c}; targets (any integer dtype)    \
     strides {row, col}; table int64 [B, 4] strides {b, k} (NRT_CTC_*).    \
     p0 = blank. Sequence b's k-th label is targets[row_b, col_b + k].     \
     Input length 0 gives 0 for an empty target, else inf; an impossible  \
     alignment gives inf. Fails on a label outside [0, C) or lengths out  \
     of range. Sequences run in parallel. */                                \
  X(CTC_LOSS, SEGMENT, 3, 3)                                                \
  /* CTC loss gradient wrt log_probs. sizes, p0 as CTC_LOSS; p1 =          \
     zero_infinity (an infinite loss gives a zero gradient). Output        \
     grad_log_probs [T, B, C] strides {t, b, c} (0 past the input length); \
     inputs grad [B] strides {b}, log_probs, targets, table as CTC_LOSS,   \
     neg_log_likelihood [B] strides {b}, log_alpha [B, T, 2 Smax + 1]      \
     strides {b, t, s} (CTC_LOSS's results). */                            \
  X(CTC_LOSS_BACKWARD, SEGMENT, 6, 6)                                       \
  /* Multi-class hinge loss in ATen's order (kernels/segment.c). sizes     \
     (ndim 2) = {N, C}. Output: p0 = NRT_LOSS_NONE: per-row losses [N]   \
     strides {n}, else one element (the sum or mean over rows). Inputs: x  \
     [N, C] strides {n, c}, target (any integer dtype) [N] strides {n},   \
     optional weight [C] strides {c}. p1 = p (1 or 2); s0 (.f) = margin.   \
     Row n: sum over d != y of w[y] max(0, margin - x[y] + x[d])^p / C,    \
     in x's dtype (float32 for 16-bit x); rows summed in double. Fails on  \
     a target outside [0, C) before writing anything. */                   \
  X(MULTI_MARGIN_LOSS, SEGMENT, 2, 3)                                       \
  /* Its gradient wrt x. sizes, p0, p1, s0 as MULTI_MARGIN_LOSS. Output    \
     grad_x [N, C] strides {n, c}; inputs grad [N] strides {n} (stride 0  \
     for one value), x, target, optional weight as the forward. */         \
  X(MULTI_MARGIN_LOSS_BACKWARD, SEGMENT, 3, 4)                              \
  /* nll_loss's sum (p0 = NRT_LOSS_SUM) or mean (NRT_LOSS_MEAN) in     \
     ATen's cascade order (kernels/segment.c). sizes (ndim 3) = {N, C, M}. \
     Outputs (one element each): the loss, the total weight. Inputs: x    \
     [N, C, M] strides {n, c, m}, target (any integer dtype) [N, M]       \
     strides {n, m}, optional weight [C] strides {c}. p1 = ignore_index.   \
     Arithmetic in x's dtype, each step rounded; N M = 0 gives a NaN mean  \
     or a 0 sum. Fails on a target outside [0, C) other than ignore_index. \
     Serial. p0 = NRT_LOSS_NONE sums as NRT_LOSS_SUM (the CPU's 1-d input  \
     without a reduction). */                                              \
  X(NLL_LOSS_REDUCE, SEGMENT, 2, 3)                                         \
  /* nll_loss of rows without a reduction. sizes (ndim 2) = {N, C}.       \
     Output loss [N] strides {n}: -x[n, t] w[t] (0 where t = p1 =          \
     ignore_index), in x's dtype. Inputs x [N, C] strides {n, c}, target  \
     (any integer dtype) [N] strides {n}, optional weight [C] strides {c}. \
     Fails on a target outside [0, C) other than ignore_index. */          \
  X(NLL_LOSS, SEGMENT, 2, 3)                                                \
  /* Its gradient (and the sum's and mean's). sizes {N, C}; p0 = the       \
     reduction, p1 = ignore_index. Output grad_x [N, C] strides {n, c},    \
     fully written: w[t] * -(p0 mean ? g[n] / total_weight : g[n]) at      \
     t = target[n], else 0, each step in grad_x's dtype. Inputs target    \
     [N] strides {n}, g [N] strides {n} (stride 0 for one value),          \
     total_weight (one element), optional weight [C] strides {c}. */       \
  X(NLL_LOSS_BACKWARD, SEGMENT, 3, 4)

NRT_OP_FAMILY_ENUM(SEGMENT, NRT_OPS_SEGMENT);

#endif
