/* Op family SELECT. Order statistics, scans with indices, bucketing and
 * uniqueness (kernels/select.c).
 * Entries: X(name, kind, min_inputs, max_inputs); scalars (s0..s3),
 * params (p0..p3) and aux[] as each comment says. See nrt/launch.h for
 * how families are numbered.
 *
 * "Row" ops work along the last dim of sizes like SORT: the leading dims
 * index independent rows, every operand has byte strides over all dims.
 * Values are compared exactly (floats as double, integers and bool as
 * int64) with PyTorch's order: -0.0 equals 0.0, NaN is above everything.
 * Selected values are copied as element bytes, so outputs holding values
 * must have the input's dtype; index outputs are int64 (or int32 where
 * noted). */
#ifndef NRT_OPS_SELECT_H
#define NRT_OPS_SELECT_H

#include "nrt/launch.h"

#define NRT_OPS_SELECT(X)                                                       \
  X(CUMMAX, SELECT, 1, 1)        /* row scan: outputs values, int64 indices  \
     (shaped like the input); input. A later element replaces the running    \
     maximum when it is >= it (so ties take the last index) or NaN; once    \
     NaN is held only another NaN replaces it (PyTorch's rule) */            \
  X(CUMMIN, SELECT, 1, 1)        /* as CUMMAX with <= */                     \
  X(LOGCUMSUMEXP, SELECT, 1, 1)  /* row scan: output; input (floating).     \
     out[j] = log(sum_{i<=j} exp(in[i])), accumulated in double. p0 = 1:    \
     complex values, each element a (re, im) pair of the operand's real     \
     dtype (im one part size after re; the operands describe real views),  \
     scanned with PyTorch's complex step from -inf + 0i */                  \
  X(ORDER_STAT, SELECT, 1, 1)    /* per row: outputs value, int64 index     \
     (their strides along the last dim are ignored); input. p0 = statistic: \
     0 k-th smallest (p1 = k, 0-based, NaN largest), 1 median (the lower   \
     one; NaN if the row holds a NaN), 2 nanmedian (lower median of the    \
     non-NaN values; NaN if there are none), 3 mode (most frequent value,  \
     the smallest on ties; index of its last occurrence). Ties in k-th and \
     median take the first position in stable sorted order */              \
  X(UNIQUE_SLICES, SELECT, 1, 1) /* sizes {n, m}: n slices of m elements;   \
     input x with strides {slice, element}. Outputs (int64, strides[0]):   \
     perm[n] the slices in order (sorted lexicographically, stable, when    \
     p0 = 1; as given when p0 = 0: consecutive unique), group[n] the group \
     number of sorted position i, starts[n + 1] the first sorted position  \
     of each group then n (only count + 1 entries written), count[1].      \
     A slice starts a new group unless it equals the group's first slice   \
     element for element (NaN equals nothing, as in PyTorch) */            \
  X(SEARCHSORTED, SELECT, 2, 3)  /* sizes {rows, cols}: output int64/int32  \
     [rows, cols]; inputs values [rows, cols], boundaries [rows, p1] (row  \
     stride 0 when shared), optional sorter int64 [rows, p1] (positions    \
     into each boundary row, ascending order). p0 = right. Values and      \
     boundaries share a dtype (the caller promotes). Result is the first  \
     position whose boundary is >= value (> value when right), NaN-aware  \
     like PyTorch (a NaN value lands after everything) */                  \
  X(HISTOGRAM, SELECT, 2, 3)     /* sizes {N, D}: N points of D coordinates. \
     Output hist (D dims; operands[0].strides[d] per dim; fully written);   \
     inputs points with strides {n, d}, edges (all D edge sequences        \
     concatenated, strides[0] per element, points' dtype), optional weight \
     [N] (strides[0]). aux[d] = number of edges of dim d (>= 2). p0 = bin  \
     selection: 0 binary search, 1 linear interpolation (in the points'    \
     dtype, as PyTorch), 2 linear then a local search. Points outside      \
     [first, last] edge (and NaN) are skipped; the last bin is closed */   \
  X(REPEAT_INTERLEAVE, SELECT, 1, 1) /* output int64 [p0]; input repeats   \
     [n] (integer, sizes {n}). Writes i repeats[i] times, in order; p0 must \
     equal the sum (checked; negative repeats fail) */                     \
  X(NONZERO_STATIC, SELECT, 1, 1) /* output int64 [p0, ndim] (strides[0],   \
     strides[1]); input over sizes. The coordinates of the first p0 nonzero \
     elements (row-major), rows past the count filled with s0.i */

NRT_OP_FAMILY_ENUM(SELECT, NRT_OPS_SELECT);

#endif
