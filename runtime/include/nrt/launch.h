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
 * Ops and families. Every op belongs to one family: the base list below
 * (copy, fill, pointwise math, random numbers, reductions, scans and row
 * ops such as softmax) or a family header runtime/include/nrt/ops/<family>.h
 * whose kernels live in runtime/src/kernels/<family>/ and whose glue is
 * csrc/aten/<family>.cpp. Each op's row gives its kind: the kernel engine
 * that runs it (one entry point per kind).
 *
 * Operand layout of the base kinds (family headers document their own):
 *  POINTWISE  operands = outputs then inputs, all iterated over `sizes`.
 *  REDUCE     operands[0] = result (and [1] = int64 index for ARG/with-index
 *             ops); the input is last. Outputs have stride 0 along the
 *             reduced dimensions (TensorIterator's reduction layout).
 *  ROW        the last dimension of `sizes` is a row processed as a whole
 *             (softmax and friends, cumulative sums); the leading dims are
 *             independent rows.
 *
 * Inline values. An input may carry one value in the descriptor itself
 * instead of memory: a CPU scalar broadcast over the iteration (x + 1).
 * Its operand has inline_slot = k + 1, the value sits in inline_values[k]
 * in the operand's dtype, and its strides are 0; `data` is ignored (the
 * runtime points it at its own copy of the descriptor before the kernel
 * runs, so kernels read it like any broadcast operand). This saves the
 * device allocation and the fill launch a scalar would otherwise need. */
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
#define NRT_MAX_INLINE 2

/* Kernel engines, one per folder of runtime/src/kernels/ (pointwise and
 * reduce serve the base list; SPECIAL and NN rows run on POINTWISE). */
typedef enum nrt_kind {
  NRT_KIND_POINTWISE, /* kernels/pointwise/ (with special/ and nn/) */
  NRT_KIND_REDUCE,    /* kernels/reduce/: reductions over strided dims */
  NRT_KIND_ROW,       /* kernels/reduce/: whole-row ops (softmax, cumsum) */
  NRT_KIND_GEMM,      /* kernels/gemm/ */
  NRT_KIND_INDEX,     /* kernels/index/ */
  NRT_KIND_NORM,      /* kernels/norm/ */
  NRT_KIND_CONV,      /* kernels/conv/ */
  NRT_KIND_POOLING,   /* kernels/pooling/ */
  NRT_KIND_LINALG,    /* kernels/linalg/ */
  NRT_KIND_RESAMPLE,  /* kernels/resample/ */
  NRT_KIND_SELECT,    /* kernels/select/ */
  NRT_KIND_SEGMENT,   /* kernels/segment/ */
  NRT_KIND_COMPLEX,   /* kernels/complex/ */
  NRT_KIND_ATTENTION, /* kernels/attention/ */
  NRT_KIND_RNN,       /* kernels/rnn/: fused LSTM/GRU cells */
  NRT_KIND_FOREACH,   /* kernels/foreach/: a tensor list in one launch */
  NRT_KIND_COUNT
} nrt_kind;

/* Op families. The base list below (NRT_OP_LIST) owns ids 0..NRT_OP_COUNT-1.
 * Every other family lives in its own header, runtime/include/nrt/ops/<family>.h,
 * and numbers its ops from its own base (family << NRT_OP_FAMILY_BITS): adding
 * an op to one family renumbers nothing else, and only the glue files that
 * include that family's header recompile. Every list, base included, has
 * entries X(name, kind, min_inputs, max_inputs); use an op as NRT_OP(name),
 * which has type nrt_op in C and C++. nrt/nrt.h does not include the family
 * headers. */
#define NRT_OP_FAMILY_BITS 8
enum {
  NRT_OP_FAMILY_BASE = 0,      /* this header */
  NRT_OP_FAMILY_SPECIAL = 1,   /* nrt/ops/special.h: special functions (pointwise) */
  NRT_OP_FAMILY_LINALG = 2,    /* nrt/ops/linalg.h */
  NRT_OP_FAMILY_RESAMPLE = 3,  /* nrt/ops/resample.h */
  NRT_OP_FAMILY_SELECT = 4,    /* nrt/ops/select.h */
  NRT_OP_FAMILY_SEGMENT = 5,   /* nrt/ops/segment.h */
  NRT_OP_FAMILY_NN = 6,        /* nrt/ops/nn.h: more activations, elementwise losses (pointwise) */
  NRT_OP_FAMILY_COMPLEX = 7,   /* nrt/ops/complex.h */
  NRT_OP_FAMILY_ATTENTION = 8, /* nrt/ops/attention.h */
  NRT_OP_FAMILY_GEMM = 9,      /* nrt/ops/gemm.h */
  NRT_OP_FAMILY_INDEX = 10,    /* nrt/ops/index.h */
  NRT_OP_FAMILY_NORM = 11,     /* nrt/ops/norm.h */
  NRT_OP_FAMILY_CONV = 12,     /* nrt/ops/conv.h */
  NRT_OP_FAMILY_POOLING = 13,  /* nrt/ops/pooling.h */
  NRT_OP_FAMILY_RNN = 14,      /* nrt/ops/rnn.h: fused LSTM/GRU cells */
  NRT_OP_FAMILY_DISTRIBUTIONS = 15, /* nrt/ops/distributions.h: samplers, their gradients (pointwise) */
  NRT_OP_FAMILY_FOREACH = 16,  /* nrt/ops/foreach.h: torch._foreach_* over a tensor list */
  NRT_OP_FAMILY_COUNT = 17
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

/* X(name, kind, min_inputs, max_inputs). Scalars (s0..s3) and params
 * (p0..p3) in comments. */
#define NRT_OP_LIST(X)                                                        \
  /* data movement */                                                         \
  X(COPY, POINTWISE, 1, 1)       /* out = convert(in) */                      \
  X(FILL, POINTWISE, 0, 0)       /* out = s0 */                               \
  /* unary */                                                                 \
  X(NEG, POINTWISE, 1, 1)                                                     \
  X(ABS, POINTWISE, 1, 1)                                                     \
  X(SIGN, POINTWISE, 1, 1)                                                    \
  X(RECIPROCAL, POINTWISE, 1, 1)                                              \
  X(SQRT, POINTWISE, 1, 1)                                                    \
  X(RSQRT, POINTWISE, 1, 1)                                                   \
  X(EXP, POINTWISE, 1, 1)                                                     \
  X(EXP2, POINTWISE, 1, 1)                                                    \
  X(EXPM1, POINTWISE, 1, 1)                                                   \
  X(LOG, POINTWISE, 1, 1)                                                     \
  X(LOG2, POINTWISE, 1, 1)                                                    \
  X(LOG10, POINTWISE, 1, 1)                                                   \
  X(LOG1P, POINTWISE, 1, 1)                                                   \
  X(SIN, POINTWISE, 1, 1)                                                     \
  X(COS, POINTWISE, 1, 1)                                                     \
  X(TAN, POINTWISE, 1, 1)                                                     \
  X(ASIN, POINTWISE, 1, 1)                                                    \
  X(ACOS, POINTWISE, 1, 1)                                                    \
  X(ATAN, POINTWISE, 1, 1)                                                    \
  X(SINH, POINTWISE, 1, 1)                                                    \
  X(COSH, POINTWISE, 1, 1)                                                    \
  X(TANH, POINTWISE, 1, 1)                                                    \
  X(ASINH, POINTWISE, 1, 1)                                                   \
  X(ACOSH, POINTWISE, 1, 1)                                                   \
  X(ATANH, POINTWISE, 1, 1)                                                   \
  X(ERF, POINTWISE, 1, 1)                                                     \
  X(ERFC, POINTWISE, 1, 1)                                                    \
  X(ERFINV, POINTWISE, 1, 1)                                                  \
  X(CEIL, POINTWISE, 1, 1)                                                    \
  X(FLOOR, POINTWISE, 1, 1)                                                   \
  X(ROUND, POINTWISE, 1, 1)      /* half to even */                           \
  X(TRUNC, POINTWISE, 1, 1)                                                   \
  X(FRAC, POINTWISE, 1, 1)                                                    \
  X(SIGMOID, POINTWISE, 1, 1)                                                 \
  X(LOGIT, POINTWISE, 1, 1)      /* p0: has eps, s0: eps */                   \
  X(RELU, POINTWISE, 1, 1)                                                    \
  X(GELU, POINTWISE, 1, 1)       /* p0: 0 exact, 1 tanh */                    \
  X(SILU, POINTWISE, 1, 1)                                                    \
  X(MISH, POINTWISE, 1, 1)                                                    \
  X(SOFTPLUS, POINTWISE, 1, 1)   /* s0 beta, s1 threshold */                  \
  X(ELU, POINTWISE, 1, 1)        /* s0 alpha, s1 scale, s2 input_scale */     \
  X(LEAKY_RELU, POINTWISE, 1, 1) /* s0 negative_slope */                      \
  X(HARDSIGMOID, POINTWISE, 1, 1)                                             \
  X(HARDSWISH, POINTWISE, 1, 1)                                               \
  X(HARDTANH, POINTWISE, 1, 1)   /* s0 min, s1 max */                         \
  X(LOGICAL_NOT, POINTWISE, 1, 1)                                             \
  X(BITWISE_NOT, POINTWISE, 1, 1)                                             \
  X(ISNAN, POINTWISE, 1, 1)                                                   \
  X(ISINF, POINTWISE, 1, 1)                                                   \
  X(ISFINITE, POINTWISE, 1, 1)                                                \
  X(NAN_TO_NUM, POINTWISE, 1, 1) /* s0 nan, s1 posinf, s2 neginf */           \
  X(CLAMP_SCALAR, POINTWISE, 1, 1) /* p0 has_min, p1 has_max, s0 min, s1 max */ \
  X(POW_SCALAR, POINTWISE, 1, 1) /* out = in ** s0 */                         \
  X(RPOW_SCALAR, POINTWISE, 1, 1) /* out = s0 ** in */                         \
  /* binary: out = f(a, b) */                                                 \
  X(ADD, POINTWISE, 2, 2)        /* a + s0 * b (s0 = alpha) */                \
  X(SUB, POINTWISE, 2, 2)        /* a - s0 * b */                             \
  X(MUL, POINTWISE, 2, 2)                                                     \
  X(DIV, POINTWISE, 2, 2)        /* true division */                          \
  X(DIV_TRUNC, POINTWISE, 2, 2)                                               \
  X(DIV_FLOOR, POINTWISE, 2, 2)                                               \
  X(REMAINDER, POINTWISE, 2, 2)  /* sign of divisor (Python %) */             \
  X(FMOD, POINTWISE, 2, 2)                                                    \
  X(POW, POINTWISE, 2, 2)                                                     \
  X(ATAN2, POINTWISE, 2, 2)                                                   \
  X(HYPOT, POINTWISE, 2, 2)                                                   \
  X(COPYSIGN, POINTWISE, 2, 2)                                                \
  X(XLOGY, POINTWISE, 2, 2)                                                   \
  X(MAXIMUM, POINTWISE, 2, 2)    /* NaN-propagating */                        \
  X(MINIMUM, POINTWISE, 2, 2)                                                 \
  X(FMAX, POINTWISE, 2, 2)       /* NaN-ignoring */                           \
  X(FMIN, POINTWISE, 2, 2)                                                    \
  X(EQ, POINTWISE, 2, 2)                                                      \
  X(NE, POINTWISE, 2, 2)                                                      \
  X(LT, POINTWISE, 2, 2)                                                      \
  X(LE, POINTWISE, 2, 2)                                                      \
  X(GT, POINTWISE, 2, 2)                                                      \
  X(GE, POINTWISE, 2, 2)                                                      \
  X(LOGICAL_AND, POINTWISE, 2, 2)                                             \
  X(LOGICAL_OR, POINTWISE, 2, 2)                                              \
  X(LOGICAL_XOR, POINTWISE, 2, 2)                                             \
  X(BITWISE_AND, POINTWISE, 2, 2)                                             \
  X(BITWISE_OR, POINTWISE, 2, 2)                                              \
  X(BITWISE_XOR, POINTWISE, 2, 2)                                             \
  X(SHIFT_LEFT, POINTWISE, 2, 2)                                              \
  X(SHIFT_RIGHT, POINTWISE, 2, 2)                                             \
  /* backward helpers: out = f(grad, x-or-y) */                               \
  X(THRESHOLD_BACKWARD, POINTWISE, 2, 2) /* a=grad, b=self; s0 threshold */     \
  X(SIGMOID_BACKWARD, POINTWISE, 2, 2) /* a=grad, b=output */                 \
  X(TANH_BACKWARD, POINTWISE, 2, 2)    /* a=grad, b=output */                 \
  X(GELU_BACKWARD, POINTWISE, 2, 2)    /* a=grad, b=self; p0 approximate */   \
  X(SILU_BACKWARD, POINTWISE, 2, 2)    /* a=grad, b=self */                   \
  X(MISH_BACKWARD, POINTWISE, 2, 2)    /* a=grad, b=self */                   \
  X(SOFTPLUS_BACKWARD, POINTWISE, 2, 2) /* a=grad, b=self; s0 beta, s1 thr */  \
  X(ELU_BACKWARD, POINTWISE, 2, 2)     /* a=grad, b=self-or-result; s0..s2,   \
                                          p0 is_result */                     \
  X(LEAKY_RELU_BACKWARD, POINTWISE, 2, 2) /* a=grad, b=self; s0 slope */         \
  X(HARDSIGMOID_BACKWARD, POINTWISE, 2, 2)                                    \
  X(HARDSWISH_BACKWARD, POINTWISE, 2, 2)                                      \
  X(HARDTANH_BACKWARD, POINTWISE, 2, 2) /* s0 min, s1 max */                   \
  /* ternary */                                                               \
  X(WHERE, POINTWISE, 3, 3)      /* cond ? a : b */                           \
  X(ADDCMUL, POINTWISE, 3, 3)    /* self + s0 * t1 * t2 */                    \
  X(ADDCDIV, POINTWISE, 3, 3)    /* self + s0 * t1 / t2 */                    \
  X(LERP, POINTWISE, 3, 3)       /* self + w * (end - self) */                \
  X(CLAMP, POINTWISE, 3, 3)      /* min(max(x, lo), hi), NaN-propagating */   \
  /* random, Philox4x32-10 keyed by p0 seed, counter p1 offset + linear     \
     element index: results do not depend on threading */                    \
  X(UNIFORM, POINTWISE, 0, 0)    /* [s0, s1) */                               \
  X(NORMAL, POINTWISE, 0, 0)     /* mean s0, std s1 */                        \
  X(BERNOULLI_SCALAR, POINTWISE, 0, 0) /* p = s0 */                              \
  X(BERNOULLI_TENSOR, POINTWISE, 1, 1) /* p = in */                              \
  X(RANDOM_RANGE, POINTWISE, 0, 0) /* integers in [p2, p2 + p3) */              \
  /* reductions */                                                            \
  X(SUM, REDUCE, 1, 1)                                                        \
  X(PROD, REDUCE, 1, 1)                                                       \
  X(MEAN, REDUCE, 1, 1)                                                       \
  X(AMAX, REDUCE, 1, 1)                                                       \
  X(AMIN, REDUCE, 1, 1)                                                       \
  X(MAX_WITH_INDEX, REDUCE, 1, 1) /* out0 values, out1 int64 index */          \
  X(MIN_WITH_INDEX, REDUCE, 1, 1)                                             \
  X(ARGMAX, REDUCE, 1, 1)        /* out0 int64 index */                       \
  X(ARGMIN, REDUCE, 1, 1)                                                     \
  X(ALL, REDUCE, 1, 1)                                                        \
  X(ANY, REDUCE, 1, 1)                                                        \
  X(VAR, REDUCE, 1, 1)           /* s0 correction; p0: 1 = std; p1 = 1:       \
     var_mean, out1 the mean, in the CPU's Welford order over p2 threads */ \
  X(NORM, REDUCE, 1, 1)          /* s0 p (inf allowed) */                     \
  X(LOGSUMEXP, REDUCE, 1, 1)                                                  \
  /* row ops (last dim is the row) */                                         \
  X(SOFTMAX, ROW, 1, 1)                                                       \
  X(LOG_SOFTMAX, ROW, 1, 1)                                                   \
  X(SOFTMAX_BACKWARD, ROW, 2, 2) /* in: grad, output */                       \
  X(LOG_SOFTMAX_BACKWARD, ROW, 2, 2) /* in: grad, output */                       \
  X(CUMSUM, ROW, 1, 1)                                                        \
  X(CUMPROD, ROW, 1, 1)                                                       \
  /* data movement whose order is defined (kernels/index/copy_ordered.c) */ \
  X(COPY_ORDERED, INDEX, 1, 1)   /* out = in (one dtype) where the two       \
     share memory: element by element in the iterator's order (sizes[0]    \
     fastest), as the CPU's copy loop reads and writes; p0 = the bytes the \
     CPU's copy loop moves at once (2 vectors) along a contiguous row.     \
     COPY's order is its own (parallel, blocked). */

typedef enum nrt_op {
#define NRT_X(name, kind, lo, hi) NRT_OP_##name,
  NRT_OP_LIST(NRT_X)
#undef NRT_X
  NRT_OP_COUNT,                       /* ops in the base list */
  NRT_OP_ID_MAX_ = NRT_OP_ID_LIMIT - 1 /* family ids are nrt_op values too */
} nrt_op;

typedef struct nrt_operand {
  void *data;
  nrt_dtype dtype;
  int32_t inline_slot;           /* 0: data is memory; k + 1: inline_values[k] (see above) */
  int64_t strides[NRT_MAX_DIMS]; /* in bytes; may be 0 (broadcast) or negative */
} nrt_operand;

/* Room for one element of any dtype (complex128 included). */
typedef union nrt_inline_value {
  unsigned char bytes[16];
  double f64[2];
  int64_t i64[2];
} nrt_inline_value;

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
  int64_t aux[2 * NRT_MAX_DIMS];     /* op-specific arrays (see each family) */
  nrt_inline_value inline_values[NRT_MAX_INLINE]; /* inputs carried by value */
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

/* Which of MKL's kernel sets the host's PyTorch CPU build takes (by the
 * CPU's vendor and ISA). The kernels sum in different orders and pick
 * different paths by shape, so a family that follows the CPU's result
 * where the order decides overflow or an inf/NaN pattern (the GEMM glue's
 * path tables, sdpa's q . k trees) asks which set the host takes. */
typedef enum nrt_host_blas {
  NRT_HOST_BLAS_OTHER,
  NRT_HOST_BLAS_AMD,          /* MKL's Zen kernels */
  NRT_HOST_BLAS_INTEL_AVX512, /* MKL's AVX-512 kernels */
} nrt_host_blas;
nrt_host_blas nrt_kernels_host_blas(void);

/* Whether the host is an Intel CPU with AVX512-BF16: there oneDNN's
 * bfloat16 kernels (the CPU flash attention's brgemm) sum pairs of
 * products with its dot-product instructions, in orders sdpa follows. */
bool nrt_kernels_host_bf16_dot(void);

#ifdef __cplusplus
}
#endif
#endif
