/* Op family INDEX. Data-dependent addressing (kernels/index/): advanced indexing,
 * gather/scatter, nonzero, index-generating factories, sort.
 * Entries: X(name, kind, min_inputs, max_inputs); scalars (s0..s3),
 * params (p0..p3) and aux[] as each comment says. See nrt/launch.h for
 * how families are numbered. */
#ifndef NRT_OPS_INDEX_H
#define NRT_OPS_INDEX_H

#include "nrt/launch.h"

#define NRT_OPS_INDEX(X)                                                      \
  /* Index operands are int64 (or int32 \
     where noted); a negative index counts from the end unless the op says \
     otherwise; an index outside its range fails the launch with the        \
     CPU's message, NRT_ERROR_OUT_OF_RANGE where the CPU raises IndexError  \
     and NRT_ERROR_INVALID_ARGUMENT where it raises RuntimeError. aux[]     \
     holds the per-index sizes and byte strides described with each op. */  \
  X(INDEX_GATHER, INDEX, 1, 1)   /* advanced indexing (ATen's AdvancedIndex \
     layout): operands out, src, idx_0..idx_{K-1} (ninputs = 1 + K), all    \
     iterated over sizes; src has stride 0 along the indexed dims. p0 = K;  \
     aux[2k] = size of indexed dim k, aux[2k+1] = its byte stride in src.   \
     out[i] = *(src_ptr(i) + sum_k idx_k(i) * aux[2k+1]). p2 = how an     \
     index outside its dim is treated, as the CPU's kernel for the caller:  \
     0 = advanced indexing: [-size, size) valid, negatives wrap, else        \
     OUT_OF_RANGE "index I is out of bounds for dimension D with size N";   \
     1 = index_select (and index_add's own loop): [0, size) valid,          \
     OUT_OF_RANGE "index out of range in self"; 2 = index_select's          \
     check_indexarray_range path: [0, size) valid, INVALID_ARGUMENT         \
     "INDICES element is out of DATA bounds, id=I axis_dim=N" */            \
  X(INDEX_PUT, INDEX, 1, 1)      /* the inverse: operands out (= self        \
     restrided, written), value, idx_0..idx_{K-1}; p0 = K; aux as above;    \
     p1 = accumulate (deterministic: duplicates summed in iteration order); \
     p3 = 1: accumulate self += scalars[0] * value with the product fused  \
     into the sum (index_add's alpha; floating self and value only) */      \
  X(GATHER, INDEX, 2, 2)         /* torch.gather: operands out, src, index,  \
     iterated over index's shape; src has stride 0 along dim.               \
     aux[0] = src size along dim, aux[1] = src byte stride along dim,      \
     aux[2] = dim (named in out-of-bounds errors); indices must lie in     \
     [0, size) as in PyTorch (no wrapping for gather/scatter), else         \
     INVALID_ARGUMENT "index I is out of bounds for dimension D with size N" */ \
  X(SCATTER, INDEX, 2, 2)        /* scatter/scatter_add/scatter_reduce:      \
     operands self (written, stride 0 along dim), index, src (stride 0     \
     when p1 says src is a scalar s0), iterated over index's shape.         \
     aux[0] = self size along dim, aux[1] = self byte stride along dim,     \
     aux[2] = dim (for errors);                                             \
     p0 = reduce: 0 assign, 1 add, 2 multiply, 3 mean-sum, 4 amax, 5 amin;  \
     duplicates applied in iteration order (serial where they may collide); \
     complex64/complex128 self and src (alike) only with 2 (the textbook   \
     product); other complex reductions run over real views */             \
  X(NONZERO, INDEX, 1, 1)        /* out int64 [count, ndim] row-major coords \
     of nonzero elements of the input (row-major order), sizes = input's   \
     shape; p0 = count (computed before by the caller) */                  \
  X(ARANGE, INDEX, 0, 0)         /* out[i] = s0 + i * s1 (.f for float out, \
     .i for integer out), i = linear index over sizes (computed in double  \
     for float outputs) */                                                 \
  X(LINSPACE, INDEX, 0, 0)       /* out[i] = i < n/2 ? s0 + i*s1           \
     : s2 - (n-1-i)*s1 (PyTorch's symmetric formula), n = numel */          \
  X(TRIANGLE, INDEX, 1, 1)       /* tril/triu: operands out, in over sizes  \
     (last two dims are rows, cols); p0 = 0 tril, 1 triu; p1 = diagonal */ \
  X(SORT, INDEX, 1, 1)           /* along the last dim of sizes (rows):     \
     operands values out, int64 indices out, in; p0 = descending; stable;   \
     NaN sorts as larger than everything (PyTorch) */

NRT_OP_FAMILY_ENUM(INDEX, NRT_OPS_INDEX);

#endif
