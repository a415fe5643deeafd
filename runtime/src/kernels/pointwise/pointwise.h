/* The pointwise engine's private header: its op table types, the per-file
 * table lookups, and the macros the pointwise op files use to write block functions. A block
 * function is one flat loop over `n` converted elements; writing them
 * through these macros keeps every loop simple enough to vectorise and
 * keeps the op semantics readable as one expression each.
 *
 * In an expression: x, y, z are the element of input a, b, c; s0..s3 are
 * the launch scalars (float in float functions, int64 in integer ones);
 * p0..p3 the integer params. */
#ifndef NRT_KERNELS_POINTWISE_H
#define NRT_KERNELS_POINTWISE_H

#include "kernels/common/common.h"

/* ---- the op table ----------------------------------------------------------
 * A block function computes n elements from converted input blocks (a, b,
 * c; unused ones are NULL). out may alias an input at the same index (in-
 * place ops), never at a shifted one. Float blocks hold float32 values,
 * integer blocks int64 values; integer functions return nonzero on an
 * integer division by zero. Random functions also get the linear index of
 * their first element (consecutive elements have consecutive indices). */
typedef void (*nrt_pw_f32_fn)(float *out, const float *a, const float *b, const float *c,
                              int64_t n, const nrt_launch *l);
typedef int (*nrt_pw_i64_fn)(int64_t *out, const int64_t *a, const int64_t *b,
                             const int64_t *c, int64_t n, const nrt_launch *l);
typedef void (*nrt_pw_rng_f32_fn)(float *out, const float *a, int64_t n, int64_t index,
                                  const nrt_launch *l);
typedef void (*nrt_pw_rng_i64_fn)(int64_t *out, int64_t n, int64_t index, const nrt_launch *l);
/* A random function over up to three inputs (the DISTRIBUTIONS samplers). */
typedef void (*nrt_pw_rng3_f32_fn)(float *out, const float *a, const float *b, const float *c, int64_t n,
                                   int64_t index, const nrt_launch *l);

typedef struct nrt_pw_kernel {
  nrt_pw_f32_fn f32;        /* float domain; NULL: not supported */
  nrt_pw_f32_fn f32_avx512; /* optional AVX-512 build of f32 */
  nrt_pw_f32_fn f32_ref;    /* scalar reference when f32 is hand-vectorised */
  nrt_pw_i64_fn i64;        /* integer domain; NULL: not supported */
  nrt_pw_rng_f32_fn rng_f32;
  nrt_pw_rng_i64_fn rng_i64;
  nrt_pw_rng3_f32_fn rng3_f32; /* random, float domain, all inputs (else rng_f32) */
} nrt_pw_kernel;
/* The kernel draws random numbers (numbered by linear index, never fused). */
/* Whether operand `o` is one element broadcast over the whole launch (every
 * stride 0 where the size is not 1): ATen's iter.is_scalar(). Its reduced-
 * float mul/div kernels take such a second input at its float32 value and
 * compute in float32 (pointwise.c, binary.c). */
static inline bool nrt_pw_broadcast_scalar(const nrt_launch *l, int o) {
  for (int d = 0; d < l->ndim; d++)
    if (l->sizes[d] != 1 && l->operands[o].strides[d] != 0) return false;
  return true;
}

static inline bool nrt_pw_is_random(const nrt_pw_kernel *k) {
  return k && (k->rng_f32 || k->rng_i64 || k->rng3_f32);
}

/* Family lookups: NULL if the op is not in the family. */
const nrt_pw_kernel *nrt_pw_unary_kernel(nrt_op op);
const nrt_pw_kernel *nrt_pw_binary_kernel(nrt_op op);
const nrt_pw_kernel *nrt_pw_activation_kernel(nrt_op op);
const nrt_pw_kernel *nrt_pw_random_kernel(nrt_op op);
const nrt_pw_kernel *nrt_pw_special_kernel(nrt_op op); /* special/, family SPECIAL */
const nrt_pw_kernel *nrt_pw_nn_kernel(nrt_op op);      /* nn/, family NN */
const nrt_pw_kernel *nrt_pw_distributions_kernel(nrt_op op); /* distributions/, family DISTRIBUTIONS */
/* Any pointwise op's kernel (NULL for COPY and for non-pointwise ops). */
const nrt_pw_kernel *nrt_pw_lookup(nrt_op op);

/* ---- one row of a launch (pointwise.c), shared with fused.c --------------------
 * The engine's inner loop over n elements along one dim: the kernel and
 * domain of the launch, each operand's dtype and byte stride along the
 * row. The fused engine runs chains of launches through exactly this loop,
 * with some operands pointing at L1 tile buffers, so a fused chain gives
 * the bits the launches give one by one. */
typedef struct nrt_pw_row {
  const nrt_launch *l;
  const nrt_pw_kernel *k; /* NULL for COPY */
  nrt_pw_f32_fn f32;      /* the ISA's build of k->f32 */
  bool fdomain, copy;
  int nops;
  nrt_dtype dt[NRT_MAX_OPERANDS];
  int64_t st[NRT_MAX_OPERANDS];
  /* Input k holds values the compute dtype cannot (a 0-d int32 tensor
   * beside uint8 ones computes in uint8, a 0-d float32 one beside float16
   * ones in float16): after loading it converts into the compute dtype
   * (integers wrap, floats round), as TensorIterator's cast of every input
   * to the common dtype does. */
  bool cast_in[NRT_MAX_OPERANDS];
} nrt_pw_row;
/* The launch's kernel, and NRT_ERROR_UNSUPPORTED (message set) when the
 * engine cannot run it (more than one output, no kernel for the domain). */
nrt_status nrt_pw_prepare(const nrt_launch *l, const nrt_pw_kernel **out_kernel);
/* inner_strides: one byte stride per operand along the row (NULL: zeros,
 * for the reference path, which takes full pointers per element). */
void nrt_pw_row_init(nrt_pw_row *row, const nrt_launch *l, const nrt_pw_kernel *k,
                     const int64_t *inner_strides);
/* n elements starting at ptr[k]; index: the first element's linear index
 * (random ops). Nonzero on an integer division by zero. */
int nrt_pw_row_run(const nrt_pw_row *row, char *const *ptr, int64_t n, int64_t index);
/* The reference path's one element (libm builds, conversions through
 * double); NRT_ERROR_INVALID_ARGUMENT on an integer division by zero. */
nrt_status nrt_pw_ref_element(const nrt_pw_row *row, char *const *ptr, int64_t lin);


#define PW_U __attribute__((unused))

#define PW_SCALARS_F                                                           \
  PW_U const float s0 = (float)l->scalars[0].f, s1 = (float)l->scalars[1].f,   \
                   s2 = (float)l->scalars[2].f, s3 = (float)l->scalars[3].f;   \
  PW_U const int64_t p0 = l->params[0], p1 = l->params[1], p2 = l->params[2], \
                     p3 = l->params[3];
#define PW_SCALARS_I                                                           \
  PW_U const int64_t s0 = l->scalars[0].i, s1 = l->scalars[1].i,              \
                     s2 = l->scalars[2].i, s3 = l->scalars[3].i;              \
  PW_U const int64_t p0 = l->params[0], p1 = l->params[1], p2 = l->params[2], \
                     p3 = l->params[3];

#define PW_X0
#define PW_X1 PW_U const float x = a[i];
#define PW_X2 PW_U const float x = a[i], y = b[i];
#define PW_X3 PW_U const float x = a[i], y = b[i], z = c[i];
#define PW_I0
#define PW_I1 PW_U const int64_t x = a[i];
#define PW_I2 PW_U const int64_t x = a[i], y = b[i];
#define PW_I3 PW_U const int64_t x = a[i], y = b[i], z = c[i];

#define PW_DEF_F32(fname, ATTR, ARITY, EXPR)                                     \
  ATTR static void fname(float *out, const float *a, const float *b, const float *c, \
                         int64_t n, const nrt_launch *l) {                       \
    PW_SCALARS_F                                                                 \
    for (int64_t i = 0; i < n; i++) {                                            \
      PW_X##ARITY                                                                \
      out[i] = (EXPR);                                                           \
    }                                                                            \
  }

/* name##_f32: baseline build. */
#define PW_F32(name, ARITY, EXPR) PW_DEF_F32(name##_f32, , ARITY, EXPR)
/* Also name##_f32_avx512, for compute-bound expressions (the engine
 * picks it on AVX-512 hosts). */
#define PW_F32_MV(name, ARITY, EXPR)             \
  PW_DEF_F32(name##_f32, , ARITY, EXPR)          \
  PW_DEF_F32(name##_f32_avx512, NRT_TARGET_AVX512, ARITY, EXPR)

#define PW_I64(name, ARITY, EXPR)                                                \
  static int name##_i64(int64_t *out, const int64_t *a, const int64_t *b,       \
                        const int64_t *c, int64_t n, const nrt_launch *l) {      \
    PW_SCALARS_I                                                                 \
    for (int64_t i = 0; i < n; i++) {                                            \
      PW_I##ARITY                                                                \
      out[i] = (EXPR);                                                           \
    }                                                                            \
    return 0;                                                                    \
  }

/* v rounded to a float16/bfloat16 compute dtype d (else v): for the CPU
 * kernels that round an intermediate to the 16-bit type (c10's math
 * functions of a reduced float return one). */
static inline float nrt_pw_round16(float v, nrt_dtype d) {
  if (d == NRT_BFLOAT16) return nrt_k_bf16_to_f32(nrt_k_f32_to_bf16(v));
  if (d == NRT_FLOAT16) return nrt_k_f16_to_f32(nrt_k_f32_to_f16(v));
  return v;
}

/* Table entries: `PW_CASE(NEG, .f32 = neg_f32, .i64 = neg_i64)`. */
#define PW_CASE(OP, ...)                                \
  case NRT_OP_##OP: {                                   \
    static const nrt_pw_kernel k_ = {__VA_ARGS__};      \
    return &k_;                                         \
  }
#define PW_MV(name) .f32 = name##_f32, .f32_avx512 = name##_f32_avx512

/* NaN-propagating max/min (torch.maximum, clamp): any NaN operand wins. */
static inline float pw_maxf(float a, float b) { return a != a ? a : (b != b ? b : (a > b ? a : b)); }
static inline float pw_minf(float a, float b) { return a != a ? a : (b != b ? b : (a < b ? a : b)); }

#endif
