/* Kernel launches: the one way compute reaches the device.
 *
 * The glue fills an nrt_launch descriptor (operands with pointer, dtype and
 * byte strides over a common N-d iteration shape; scalars; integer params)
 * and enqueues it on a stream. A runtime worker later runs the kernel,
 * splitting it across the kernel thread pool. Shapes, broadcasting and type
 * promotion are decided by the caller (PyTorch's TensorIterator): a kernel
 * never broadcasts or promotes on its own, it only converts each operand
 * from its stored dtype to the compute domain and back.
 *
 * Compute domains: if compute_dtype is floating, values are computed in
 * float32; otherwise in int64 (bool included).
 *
 * Kinds and operand layout:
 *  POINTWISE  operands = outputs then inputs, all iterated over `sizes`.
 *  REDUCE     operands[0] = result (and [1] = int64 index for ARG/with-index
 *             ops); the input is last. Outputs have stride 0 along the
 *             reduced dimensions (TensorIterator's reduction layout).
 *  ROW        the last dimension of `sizes` is a row processed as a whole
 *             (softmax and friends); the leading dims are independent rows.
 *  GEMM       sizes = {batch, M, N, K}; operands: 0 = C (out), 1 = A, 2 = B,
 *             3 = optional bias/C-in (ninputs == 3); strides per operand:
 *             A {batch, m, k}, B {batch, k, n}, C/bias {batch, m, n}.
 *             C = alpha * A@B + beta * bias. */
#ifndef NRT_LAUNCH_H
#define NRT_LAUNCH_H

#include <stdint.h>
#include <stdbool.h>
#include "nrt/dtype.h"
#include "nrt/status.h"
#include "nrt/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NRT_MAX_DIMS 16
#define NRT_MAX_OPERANDS 8
#define NRT_MAX_SCALARS 4
#define NRT_MAX_PARAMS 4

typedef enum nrt_kind {
  NRT_KIND_POINTWISE,
  NRT_KIND_REDUCE,
  NRT_KIND_ROW,
  NRT_KIND_GEMM,
  NRT_KIND_INDEX, /* data-dependent addressing; layouts per op below */
  NRT_KIND_NORM,  /* normalisation over the last dim (rows), like ROW */
  NRT_KIND_CONV,  /* convolution (kernels/convolution.c); layout per op below */
  NRT_KIND_POOL,  /* spatial pooling (kernels/pooling.c) */
  NRT_KIND_CHANNEL_NORM, /* batch / group norm over (N, C, S) (kernels/channel_norm.c) */
  NRT_KIND_LINALG, /* small dense factorisations and solves (kernels/linalg.c) */
  NRT_KIND_DECOMP,  /* LU, QR, SVD, eigh and what is built on them (kernels/decomp*.c) */
  NRT_KIND_RESAMPLE, /* interpolation, grid sampling, im2col, unpooling (kernels/resample.c) */
  NRT_KIND_SELECT,  /* order statistics, scans, bucketing, uniqueness (kernels/select.c) */
  NRT_KIND_SEGMENT, /* keyed and segmented reductions, distances (kernels/segment.c) */
  NRT_KIND_COMPLEX, /* complex elementwise ops and FFTs (kernels/complex*.c, fft*.c) */
  NRT_KIND_ATTENTION /* fused scaled dot-product attention (kernels/attention*.c) */
} nrt_kind;

/* Op families. The base list below (NRT_OP_LIST) owns ids 0..NRT_OP_COUNT-1.
 * Every later family lives in its own header, runtime/include/nrt/ops/<family>.h,
 * and numbers its ops from its own base (family << NRT_OP_FAMILY_BITS): adding
 * an op to one family renumbers nothing else, and only the glue files that
 * include that family's header recompile. A family's entries are
 * X(name, kind, min_inputs, max_inputs); use an op as NRT_OP(name), which has
 * type nrt_op in C and C++. nrt/nrt.h does not include the family headers. */
#define NRT_OP_FAMILY_BITS 8
enum {
  NRT_OP_FAMILY_BASE = 0,     /* this header */
  NRT_OP_FAMILY_SPECIAL = 1,  /* nrt/ops/special.h: special functions (pointwise) */
  NRT_OP_FAMILY_DECOMP = 2,   /* nrt/ops/decomp.h */
  NRT_OP_FAMILY_RESAMPLE = 3, /* nrt/ops/resample.h */
  NRT_OP_FAMILY_SELECT = 4,   /* nrt/ops/select.h */
  NRT_OP_FAMILY_SEGMENT = 5,  /* nrt/ops/segment.h */
  NRT_OP_FAMILY_NN = 6,       /* nrt/ops/nn.h: more activations, elementwise losses (pointwise) */
  NRT_OP_FAMILY_COMPLEX = 7,  /* nrt/ops/complex.h */
  NRT_OP_FAMILY_ATTENTION = 8, /* nrt/ops/attention.h */
  NRT_OP_FAMILY_COUNT = 9
};
#define NRT_OP_ID_LIMIT (NRT_OP_FAMILY_COUNT << NRT_OP_FAMILY_BITS)
#define NRT_OP(name) ((nrt_op)NRT_OP_##name)
/* Opens a family's enum: its first op gets id family << NRT_OP_FAMILY_BITS. */
#define NRT_OP_FAMILY_ENUM(family, list)                                     \
  enum {                                                                     \
    NRT_OP_##family##_BEFORE_ = (NRT_OP_FAMILY_##family << NRT_OP_FAMILY_BITS) - 1, \
    list(NRT_OP_FAMILY_ENUM_X_) NRT_OP_##family##_END_                        \
  }
#define NRT_OP_FAMILY_ENUM_X_(name, kind, lo, hi) NRT_OP_##name,

/* X(name, kind, inputs). Scalars (s0..s3) and params (p0..p3) in comments. */
#define NRT_OP_LIST(X)                                                        \
  /* data movement */                                                         \
  X(COPY, POINTWISE, 1)          /* out = convert(in) */                      \
  X(FILL, POINTWISE, 0)          /* out = s0 */                               \
  /* unary */                                                                 \
  X(NEG, POINTWISE, 1)                                                        \
  X(ABS, POINTWISE, 1)                                                        \
  X(SIGN, POINTWISE, 1)                                                       \
  X(RECIPROCAL, POINTWISE, 1)                                                 \
  X(SQRT, POINTWISE, 1)                                                       \
  X(RSQRT, POINTWISE, 1)                                                      \
  X(EXP, POINTWISE, 1)                                                        \
  X(EXP2, POINTWISE, 1)                                                       \
  X(EXPM1, POINTWISE, 1)                                                      \
  X(LOG, POINTWISE, 1)                                                        \
  X(LOG2, POINTWISE, 1)                                                       \
  X(LOG10, POINTWISE, 1)                                                      \
  X(LOG1P, POINTWISE, 1)                                                      \
  X(SIN, POINTWISE, 1)                                                        \
  X(COS, POINTWISE, 1)                                                        \
  X(TAN, POINTWISE, 1)                                                        \
  X(ASIN, POINTWISE, 1)                                                       \
  X(ACOS, POINTWISE, 1)                                                       \
  X(ATAN, POINTWISE, 1)                                                       \
  X(SINH, POINTWISE, 1)                                                       \
  X(COSH, POINTWISE, 1)                                                       \
  X(TANH, POINTWISE, 1)                                                       \
  X(ASINH, POINTWISE, 1)                                                      \
  X(ACOSH, POINTWISE, 1)                                                      \
  X(ATANH, POINTWISE, 1)                                                      \
  X(ERF, POINTWISE, 1)                                                        \
  X(ERFC, POINTWISE, 1)                                                       \
  X(ERFINV, POINTWISE, 1)                                                     \
  X(CEIL, POINTWISE, 1)                                                       \
  X(FLOOR, POINTWISE, 1)                                                      \
  X(ROUND, POINTWISE, 1)         /* half to even */                           \
  X(TRUNC, POINTWISE, 1)                                                      \
  X(FRAC, POINTWISE, 1)                                                       \
  X(SIGMOID, POINTWISE, 1)                                                    \
  X(LOGIT, POINTWISE, 1)         /* p0: has eps, s0: eps */                   \
  X(RELU, POINTWISE, 1)                                                       \
  X(GELU, POINTWISE, 1)          /* p0: 0 exact, 1 tanh */                    \
  X(SILU, POINTWISE, 1)                                                       \
  X(MISH, POINTWISE, 1)                                                       \
  X(SOFTPLUS, POINTWISE, 1)      /* s0 beta, s1 threshold */                  \
  X(ELU, POINTWISE, 1)           /* s0 alpha, s1 scale, s2 input_scale */     \
  X(LEAKY_RELU, POINTWISE, 1)    /* s0 negative_slope */                      \
  X(HARDSIGMOID, POINTWISE, 1)                                                \
  X(HARDSWISH, POINTWISE, 1)                                                  \
  X(HARDTANH, POINTWISE, 1)      /* s0 min, s1 max */                         \
  X(LOGICAL_NOT, POINTWISE, 1)                                                \
  X(BITWISE_NOT, POINTWISE, 1)                                                \
  X(ISNAN, POINTWISE, 1)                                                      \
  X(ISINF, POINTWISE, 1)                                                      \
  X(ISFINITE, POINTWISE, 1)                                                   \
  X(NAN_TO_NUM, POINTWISE, 1)    /* s0 nan, s1 posinf, s2 neginf */           \
  X(CLAMP_SCALAR, POINTWISE, 1)  /* p0 has_min, p1 has_max, s0 min, s1 max */ \
  X(POW_SCALAR, POINTWISE, 1)    /* out = in ** s0 */                         \
  X(RPOW_SCALAR, POINTWISE, 1)   /* out = s0 ** in */                         \
  /* binary: out = f(a, b) */                                                 \
  X(ADD, POINTWISE, 2)           /* a + s0 * b (s0 = alpha) */                \
  X(SUB, POINTWISE, 2)           /* a - s0 * b */                             \
  X(MUL, POINTWISE, 2)                                                        \
  X(DIV, POINTWISE, 2)           /* true division */                          \
  X(DIV_TRUNC, POINTWISE, 2)                                                  \
  X(DIV_FLOOR, POINTWISE, 2)                                                  \
  X(REMAINDER, POINTWISE, 2)     /* sign of divisor (Python %) */             \
  X(FMOD, POINTWISE, 2)                                                       \
  X(POW, POINTWISE, 2)                                                        \
  X(ATAN2, POINTWISE, 2)                                                      \
  X(HYPOT, POINTWISE, 2)                                                      \
  X(COPYSIGN, POINTWISE, 2)                                                   \
  X(XLOGY, POINTWISE, 2)                                                      \
  X(MAXIMUM, POINTWISE, 2)       /* NaN-propagating */                        \
  X(MINIMUM, POINTWISE, 2)                                                    \
  X(FMAX, POINTWISE, 2)          /* NaN-ignoring */                           \
  X(FMIN, POINTWISE, 2)                                                       \
  X(EQ, POINTWISE, 2)                                                         \
  X(NE, POINTWISE, 2)                                                         \
  X(LT, POINTWISE, 2)                                                         \
  X(LE, POINTWISE, 2)                                                         \
  X(GT, POINTWISE, 2)                                                         \
  X(GE, POINTWISE, 2)                                                         \
  X(LOGICAL_AND, POINTWISE, 2)                                                \
  X(LOGICAL_OR, POINTWISE, 2)                                                 \
  X(LOGICAL_XOR, POINTWISE, 2)                                                \
  X(BITWISE_AND, POINTWISE, 2)                                                \
  X(BITWISE_OR, POINTWISE, 2)                                                 \
  X(BITWISE_XOR, POINTWISE, 2)                                                \
  X(SHIFT_LEFT, POINTWISE, 2)                                                 \
  X(SHIFT_RIGHT, POINTWISE, 2)                                                \
  /* backward helpers: out = f(grad, x-or-y) */                               \
  X(THRESHOLD_BACKWARD, POINTWISE, 2)  /* a=grad, b=self; s0 threshold */     \
  X(SIGMOID_BACKWARD, POINTWISE, 2)    /* a=grad, b=output */                 \
  X(TANH_BACKWARD, POINTWISE, 2)       /* a=grad, b=output */                 \
  X(GELU_BACKWARD, POINTWISE, 2)       /* a=grad, b=self; p0 approximate */   \
  X(SILU_BACKWARD, POINTWISE, 2)       /* a=grad, b=self */                   \
  X(MISH_BACKWARD, POINTWISE, 2)       /* a=grad, b=self */                   \
  X(SOFTPLUS_BACKWARD, POINTWISE, 2)   /* a=grad, b=self; s0 beta, s1 thr */  \
  X(ELU_BACKWARD, POINTWISE, 2)        /* a=grad, b=self-or-result; s0..s2,   \
                                          p0 is_result */                     \
  X(LEAKY_RELU_BACKWARD, POINTWISE, 2) /* a=grad, b=self; s0 slope */         \
  X(HARDSIGMOID_BACKWARD, POINTWISE, 2)                                       \
  X(HARDSWISH_BACKWARD, POINTWISE, 2)                                         \
  X(HARDTANH_BACKWARD, POINTWISE, 2)   /* s0 min, s1 max */                   \
  /* ternary */                                                               \
  X(WHERE, POINTWISE, 3)         /* cond ? a : b */                           \
  X(ADDCMUL, POINTWISE, 3)       /* self + s0 * t1 * t2 */                    \
  X(ADDCDIV, POINTWISE, 3)       /* self + s0 * t1 / t2 */                    \
  X(LERP, POINTWISE, 3)          /* self + w * (end - self) */                \
  X(CLAMP, POINTWISE, 3)         /* min(max(x, lo), hi), NaN-propagating */   \
  /* random, Philox4x32-10 keyed by p0 seed, counter p1 offset + linear     \
     element index: results do not depend on threading */                    \
  X(UNIFORM, POINTWISE, 0)       /* [s0, s1) */                               \
  X(NORMAL, POINTWISE, 0)        /* mean s0, std s1 */                        \
  X(BERNOULLI_SCALAR, POINTWISE, 0) /* p = s0 */                              \
  X(BERNOULLI_TENSOR, POINTWISE, 1) /* p = in */                              \
  X(RANDOM_RANGE, POINTWISE, 0)  /* integers in [p2, p2 + p3) */              \
  /* reductions */                                                            \
  X(SUM, REDUCE, 1)                                                           \
  X(PROD, REDUCE, 1)                                                          \
  X(MEAN, REDUCE, 1)                                                          \
  X(AMAX, REDUCE, 1)                                                          \
  X(AMIN, REDUCE, 1)                                                          \
  X(MAX_WITH_INDEX, REDUCE, 1)   /* out0 values, out1 int64 index */          \
  X(MIN_WITH_INDEX, REDUCE, 1)                                                \
  X(ARGMAX, REDUCE, 1)           /* out0 int64 index */                       \
  X(ARGMIN, REDUCE, 1)                                                        \
  X(ALL, REDUCE, 1)                                                           \
  X(ANY, REDUCE, 1)                                                           \
  X(VAR, REDUCE, 1)              /* s0 correction; p0: 1 = std */             \
  X(NORM, REDUCE, 1)             /* s0 p (inf allowed) */                     \
  X(LOGSUMEXP, REDUCE, 1)                                                     \
  /* row ops (last dim is the row) */                                         \
  X(SOFTMAX, ROW, 1)                                                          \
  X(LOG_SOFTMAX, ROW, 1)                                                      \
  X(SOFTMAX_BACKWARD, ROW, 2)    /* in: grad, output */                       \
  X(LOG_SOFTMAX_BACKWARD, ROW, 2)/* in: grad, output */                       \
  X(CUMSUM, ROW, 1)                                                           \
  X(CUMPROD, ROW, 1)                                                          \
  /* matrix multiply */                                                       \
  X(GEMM, GEMM, 2)               /* s0 alpha, s1 beta; 3 inputs with bias */ \
  /* ---- INDEX kind (kernels/index.c). Index operands are int64 (or int32 \
     where noted); a negative index counts from the end; an index outside \
     [-size, size) fails the launch with "index I is out of bounds for     \
     dimension D with size N" (NRT_ERROR_INVALID_ARGUMENT). aux[] holds the \
     per-index sizes and byte strides described with each op. */            \
  X(INDEX_GATHER, INDEX, 1)      /* advanced indexing (ATen's AdvancedIndex \
     layout): operands out, src, idx_0..idx_{K-1} (ninputs = 1 + K), all    \
     iterated over sizes; src has stride 0 along the indexed dims. p0 = K;  \
     aux[2k] = size of indexed dim k, aux[2k+1] = its byte stride in src.   \
     out[i] = *(src_ptr(i) + sum_k idx_k(i) * aux[2k+1]); p2 = 1: negative  \
     indices are out of range ("index out of range in self", index_select) */ \
  X(INDEX_PUT, INDEX, 1)         /* the inverse: operands out (= self        \
     restrided, written), value, idx_0..idx_{K-1}; p0 = K; aux as above;    \
     p1 = accumulate (deterministic: duplicates summed in iteration order) */ \
  X(GATHER, INDEX, 2)            /* torch.gather: operands out, src, index,  \
     iterated over index's shape; src has stride 0 along dim.               \
     aux[0] = src size along dim, aux[1] = src byte stride along dim,      \
     aux[2] = dim (named in out-of-bounds errors); indices must lie in     \
     [0, size) as in PyTorch (no wrapping for gather/scatter). */   \
  X(SCATTER, INDEX, 2)           /* scatter/scatter_add/scatter_reduce:      \
     operands self (written, stride 0 along dim), index, src (stride 0     \
     when p1 says src is a scalar s0), iterated over index's shape.         \
     aux[0] = self size along dim, aux[1] = self byte stride along dim,     \
     aux[2] = dim (for errors);                                             \
     p0 = reduce: 0 assign, 1 add, 2 multiply, 3 mean-sum, 4 amax, 5 amin;  \
     duplicates applied in iteration order (serial where they may collide) */ \
  X(NONZERO, INDEX, 1)           /* out int64 [count, ndim] row-major coords \
     of nonzero elements of the input (row-major order), sizes = input's   \
     shape; p0 = count (computed before by the caller) */                  \
  X(ARANGE, INDEX, 0)            /* out[i] = s0 + i * s1 (.f for float out, \
     .i for integer out), i = linear index over sizes (computed in double  \
     for float outputs) */                                                 \
  X(LINSPACE, INDEX, 0)          /* out[i] = i < n/2 ? s0 + i*s1           \
     : s2 - (n-1-i)*s1 (PyTorch's symmetric formula), n = numel */          \
  X(TRIANGLE, INDEX, 1)          /* tril/triu: operands out, in over sizes  \
     (last two dims are rows, cols); p0 = 0 tril, 1 triu; p1 = diagonal */ \
  X(SORT, INDEX, 1)              /* along the last dim of sizes (rows):     \
     operands values out, int64 indices out, in; p0 = descending; stable;   \
     NaN sorts as larger than everything (PyTorch) */                      \
  X(NLL_LOSS, INDEX, 2)          /* rows = sizes[0], classes = sizes[1]:    \
     outputs loss[N] and w[N] (per-sample weight, 0 where ignored);        \
     inputs self [N,C] (log-probs), target [N] int64, optional weight [C]  \
     (ninputs 3); p0 = ignore_index. loss = -w * self[n, target[n]] */      \
  X(NLL_LOSS_BACKWARD, INDEX, 2) /* output grad_input [N,C] (fully written); \
     inputs target [N], gscale [N] (grad * w / denominator, computed by the \
     caller); p0 = ignore_index. grad_input[n,t] = -gscale[n] at t = target */ \
  /* ---- NORM kind (kernels/norm.c): rows along the last dim of sizes,     \
     leading dims index rows; all float domain. */                          \
  X(LAYER_NORM, NORM, 1)         /* outputs y, mean[rows], rstd[rows];       \
     inputs x, optional weight[row], optional bias[row] (ninputs 1..3,      \
     p1 bit0 = has weight, bit1 = has bias); s0 = eps */                   \
  X(LAYER_NORM_BACKWARD, NORM, 4) /* output grad_x; inputs grad_y, x, mean, \
     rstd, optional weight (ninputs 4..5) */                                \
  /* ---- LINALG kind (kernels/linalg.c): batched small matrices, computed  \
     in double; strides per operand are {batch, row, col} in bytes. */      \
  X(CHOLESKY, LINALG, 1)         /* outputs L (n x n; the other triangle is \
     zeroed), info int32 [batch] (0, or the order k of the first minor that \
     is not positive-definite); input A; sizes {batch, n}; p0 = upper */     \
  X(TRIANGULAR_SOLVE, LINALG, 2) /* output X; inputs A (triangular), B;     \
     sizes {batch, m, k} = X's shape; p0 = upper, p1 = left (A X = B, A is  \
     m x m; else X A = B, A is k x k), p2 = unitriangular */                \
  /* ---- CONV kind (kernels/convolution.c): grouped N-d convolution as     \
     im2col x packed GEMM, 1-3 spatial dims (unused leading ones size 1).   \
     sizes (ndim 13) = {N, G, Cog, Cig, OD, OH, OW, ID, IH, IW, KD, KH, KW}: \
     batch, groups, out / in channels per group, output, input and kernel  \
     extents; aux[0..8] = stride d,h,w, padding d,h,w, dilation d,h,w.     \
     Activation strides {n, c, d, h, w} (channel = g * C?g + c), weight    \
     strides {o, i, kd, kh, kw} (shape [G*Cog, Cig, KD, KH, KW]), bias {c}. \
     Floats accumulate in float32 (float64 at float32); integers (not bool) \
     in wrapping int64, through the plain loop nest. Outputs may be fewer   \
     than the input allows (transposed conv with output_padding >= stride). \
     A transposed convolution is CONV_BACKWARD_INPUT of the forward one. */ \
  X(CONV, CONV, 2)               /* output y [N, G*Cog, O*]; inputs x       \
     [N, G*Cig, I*], weight, optional bias [G*Cog] (ninputs 2..3) */        \
  X(CONV_BACKWARD_INPUT, CONV, 2) /* output grad_x [N, G*Cig, I*] (fully    \
     written); inputs grad_y [N, G*Cog, O*], weight, optional bias [G*Cig]  \
     added to every grad_x element of its channel (ninputs 2..3) */         \
  X(CONV_BACKWARD_WEIGHT, CONV, 2) /* output grad_w [G*Cog, Cig, K*] (fully \
     written); inputs grad_y [N, G*Cog, O*], x [N, G*Cig, I*] */             \
  /* ---- POOL kind (kernels/pooling.c): windows over the (d, h, w) planes  \
     of each (n, c). sizes (ndim 11) = {N, C, OD, OH, OW, ID, IH, IW, KD,   \
     KH, KW}; aux[0..8] = stride d,h,w, padding d,h,w, dilation d,h,w;      \
     strides {n, c, d, h, w}. p0 = 1: adaptive windows (start            \
     floor(o*I/O), end ceil((o+1)*I/O); kernel, aux ignored). Indices are  \
     int64 offsets within the input plane, d*IH*IW + h*IW + w. */           \
  X(MAX_POOL, POOL, 1)           /* outputs y, indices; input x. NaN wins   \
     (the last NaN of a window); an all -inf window gives its first        \
     in-bounds element */                                                  \
  X(MAX_POOL_BACKWARD, POOL, 2)  /* output grad_x (fully written); inputs  \
     grad_y, indices (shaped like grad_y) */                                \
  X(AVG_POOL, POOL, 1)           /* output y; input x. p1 count_include_pad, \
     p2 divisor_override (0: none); window ends clip at I + pad for the    \
     divisor, at I for the sum (ATen's rule) */                            \
  X(AVG_POOL_BACKWARD, POOL, 1)  /* output grad_x (fully written); input    \
     grad_y; params as AVG_POOL */                                          \
  /* ---- CHANNEL_NORM kind (kernels/channel_norm.c). Activations [N, C, S] \
     with strides {n, c, s} (spatial dims collapsed into s by the caller),  \
     per-channel vectors strides {c}. Statistics accumulate in double; p1  \
     bit0 = has weight, bit1 = has bias (those inputs follow in order). */ \
  X(BATCH_NORM, CHANNEL_NORM, 1) /* training: sizes {N, C, S}; outputs y,   \
     save_mean[C], save_invstd[C] (1/sqrt(biased var + s0)) and, when       \
     noutputs = 5, running_mean[C], running_var[C] updated in place with   \
     momentum s1 (unbiased var); inputs x, weight?, bias? (1..3) */         \
  X(BATCH_NORM_EVAL, CHANNEL_NORM, 3) /* sizes {N, C, S}; output y; inputs  \
     x, running_mean, running_var, weight?, bias? (3..5); s0 eps */         \
  X(BATCH_NORM_BACKWARD, CHANNEL_NORM, 4) /* sizes {N, C, S}; outputs by    \
     p0 mask, in order: bit0 grad_x, bit1 grad_weight (sum dy*xhat), bit2   \
     grad_bias (sum dy); inputs grad_y, x, mean, invstd, weight? (4..5).    \
     p2 = 1 training (grad_x through the batch statistics); p2 = 0: mean,  \
     invstd are running_mean, running_var and invstd = 1/sqrt(var + s0) */  \
  X(GROUP_NORM, CHANNEL_NORM, 1) /* sizes {N, G, Cg, S}; outputs y, mean,    \
     rstd (strides {n, g}); inputs x, weight?, bias? (1..3); s0 eps */      \
  X(GROUP_NORM_BACKWARD, CHANNEL_NORM, 4) /* sizes {N, G, Cg, S}; outputs   \
     by p0 mask as BATCH_NORM_BACKWARD (grad_x, grad_weight, grad_bias);   \
     inputs grad_y, x, mean, rstd, weight? (4..5) */

typedef enum nrt_op {
#define NRT_X(name, kind, nin) NRT_OP_##name,
  NRT_OP_LIST(NRT_X)
#undef NRT_X
  NRT_OP_COUNT,                       /* ops in the base list */
  NRT_OP_ID_MAX_ = NRT_OP_ID_LIMIT - 1 /* family ids are nrt_op values too */
} nrt_op;

typedef struct nrt_operand {
  void *data;
  nrt_dtype dtype;
  int64_t strides[NRT_MAX_DIMS]; /* in bytes; may be 0 (broadcast) or negative */
} nrt_operand;

typedef union nrt_scalar {
  double f;
  int64_t i;
} nrt_scalar;

typedef struct nrt_launch {
  nrt_op op;
  int ndim;                          /* 0 means a single element */
  int64_t sizes[NRT_MAX_DIMS];
  int noutputs;
  int ninputs;
  nrt_operand operands[NRT_MAX_OPERANDS]; /* outputs first, then inputs */
  nrt_dtype compute_dtype;           /* selects float32 or int64 domain */
  nrt_scalar scalars[NRT_MAX_SCALARS]; /* .f in float domain, .i in int domain,
                                          unless an op's comment says otherwise */
  int64_t params[NRT_MAX_PARAMS];
  int64_t aux[2 * NRT_MAX_DIMS];     /* op-specific arrays (INDEX kind) */
} nrt_launch;

const char *nrt_op_name(nrt_op op);   /* "ADD", ... or "invalid" */
nrt_kind nrt_op_kind(nrt_op op);
int nrt_op_ninputs(nrt_op op);        /* the minimum, -1 for an invalid op */

/* Checks the descriptor and enqueues a copy of it on `stream`. Validation
 * errors return at once; execution errors are sticky on the stream. */
nrt_status nrt_launch_kernel(nrt_stream *stream, const nrt_launch *launch);

/* Runs a launch on the calling thread, synchronously (tests, benchmarks). */
nrt_status nrt_launch_run(const nrt_launch *launch);

/* Tests: route every kernel through its plain scalar reference loop
 * instead of the fast path, to compare the two. Process-wide. */
void nrt_kernels_set_reference(bool use_reference);
bool nrt_kernels_reference(void);

#ifdef __cplusplus
}
#endif
#endif
