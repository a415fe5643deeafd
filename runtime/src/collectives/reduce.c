/* The reductions of the collectives: folding N ranks' buffers element by
 * element, in rank order, so that every rank (and a single process doing
 * the same fold) gets the same bits.
 *
 * Each stored dtype folds in its domain: float32 for float32/float16/
 * bfloat16, float64 for float64, the stored width for integers and bool
 * (complex types fold as pairs of their component type). The fast path
 * works in blocks of NRT_COLL_BLOCK elements small enough for L1: the first
 * source is loaded into an accumulator block, each further source folded
 * into it by a loop compiled for the best ISA (AVX-512, AVX2 or the x86-64-v2
 * baseline, chosen at run time), and the block finished and stored once.
 * Only element-wise operations are used (no reassociation), so the
 * vectorised loops and the scalar reference below agree bit for bit. */
#pragma GCC optimize("O3,no-trapping-math")
#include <string.h>

#include "collectives/collectives.h"
#include "kernels/common/convert.h"
#include "kernels/common/isa.h"

#define NRT_COLL_BLOCK 1024

const char *nrt_reduce_op_name(nrt_reduce_op op) {
  static const char *const names[] = {
#define NRT_X(e, n) #n,
      NRT_REDUCE_OP_LIST(NRT_X)
#undef NRT_X
  };
  _Static_assert(sizeof(names) / sizeof(names[0]) == NRT_REDUCE_OP_COUNT,
                 "names must list every nrt_reduce_op");
  return (unsigned)op < NRT_REDUCE_OP_COUNT ? names[op] : "invalid";
}

bool nrt_reduce_supported(nrt_reduce_op op, nrt_dtype dt) {
  if ((unsigned)op >= NRT_REDUCE_OP_COUNT || (unsigned)dt >= NRT_DTYPE_COUNT) return false;
  bool bitwise = op == NRT_REDUCE_BAND || op == NRT_REDUCE_BOR || op == NRT_REDUCE_BXOR;
  if (nrt_dtype_is_complex(dt))
    return op == NRT_REDUCE_SUM || op == NRT_REDUCE_AVG || op == NRT_REDUCE_PREMUL_SUM;
  if (nrt_dtype_is_floating(dt)) return !bitwise;
  if (dt == NRT_BOOL) return op != NRT_REDUCE_AVG && op != NRT_REDUCE_PREMUL_SUM;
  return op != NRT_REDUCE_PREMUL_SUM;
}

/* Complex types fold componentwise: as twice as many elements of their
 * component type. */
static nrt_dtype fold_dtype(nrt_dtype dt, int64_t *n) {
  switch (dt) {
    case NRT_COMPLEX32: *n *= 2; return NRT_FLOAT16;
    case NRT_COMPLEX64: *n *= 2; return NRT_FLOAT32;
    case NRT_COMPLEX128: *n *= 2; return NRT_FLOAT64;
    default: return dt;
  }
}

/* PREMUL_SUM's factor as NCCL takes it: a value of the tensor's dtype. */
static float factor_f32(nrt_dtype dt, double factor) {
  if (dt == NRT_BFLOAT16) return nrt_bf16_to_f32(nrt_f32_to_bf16((float)factor));
  if (dt == NRT_FLOAT16) return nrt_f16_to_f32(nrt_f32_to_f16((float)factor));
  return (float)factor;
}

/* ---- the scalar reference ----------------------------------------------------
 * One element at a time through dtype.c's out-of-line conversions, so the
 * block loaders of kernels/common are checked against independent code. */
static float ref_load_f32(nrt_dtype dt, const void *p, int64_t i) {
  if (dt == NRT_BFLOAT16) return nrt_bf16_to_f32(((const uint16_t *)p)[i]);
  if (dt == NRT_FLOAT16) return nrt_f16_to_f32(((const uint16_t *)p)[i]);
  return ((const float *)p)[i];
}
static void ref_store_f32(nrt_dtype dt, void *p, int64_t i, float v) {
  if (dt == NRT_BFLOAT16) ((uint16_t *)p)[i] = nrt_f32_to_bf16(v);
  else if (dt == NRT_FLOAT16) ((uint16_t *)p)[i] = nrt_f32_to_f16(v);
  else ((float *)p)[i] = v;
}

/* NaN-propagating min/max; on ties the newer operand wins (one rule for
 * both paths). */
#define FMIN(a, b) (((a) < (b) || (a) != (a)) ? (a) : (b))
#define FMAX(a, b) (((a) > (b) || (a) != (a)) ? (a) : (b))

static float ref_fold_f32(nrt_reduce_op op, float f, float acc, float x) {
  switch (op) {
    case NRT_REDUCE_SUM: case NRT_REDUCE_AVG: return acc + x;
    case NRT_REDUCE_PREMUL_SUM: return acc + f * x;
    case NRT_REDUCE_PRODUCT: return acc * x;
    case NRT_REDUCE_MIN: return FMIN(acc, x);
    case NRT_REDUCE_MAX: return FMAX(acc, x);
    default: return acc;
  }
}
static double ref_fold_f64(nrt_reduce_op op, double f, double acc, double x) {
  switch (op) {
    case NRT_REDUCE_SUM: case NRT_REDUCE_AVG: return acc + x;
    case NRT_REDUCE_PREMUL_SUM: return acc + f * x;
    case NRT_REDUCE_PRODUCT: return acc * x;
    case NRT_REDUCE_MIN: return FMIN(acc, x);
    case NRT_REDUCE_MAX: return FMAX(acc, x);
    default: return acc;
  }
}

static int64_t ref_load_int(nrt_dtype dt, const void *p, int64_t i) {
  switch (dt) {
    case NRT_BOOL: case NRT_UINT8: return ((const uint8_t *)p)[i];
    case NRT_INT8: return ((const int8_t *)p)[i];
    case NRT_INT16: return ((const int16_t *)p)[i];
    case NRT_INT32: return ((const int32_t *)p)[i];
    default: return ((const int64_t *)p)[i];
  }
}
/* Wraps v to the dtype's width (the value the stored type holds). */
static int64_t ref_wrap_int(nrt_dtype dt, uint64_t v) {
  switch (dt) {
    case NRT_BOOL: return v != 0;
    case NRT_UINT8: return (uint8_t)v;
    case NRT_INT8: return (int8_t)v;
    case NRT_INT16: return (int16_t)v;
    case NRT_INT32: return (int32_t)v;
    default: return (int64_t)v;
  }
}
static void ref_store_int(nrt_dtype dt, void *p, int64_t i, int64_t v) {
  switch (dt) {
    case NRT_BOOL: case NRT_UINT8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case NRT_INT8: ((int8_t *)p)[i] = (int8_t)v; break;
    case NRT_INT16: ((int16_t *)p)[i] = (int16_t)v; break;
    case NRT_INT32: ((int32_t *)p)[i] = (int32_t)v; break;
    default: ((int64_t *)p)[i] = v; break;
  }
}
static int64_t ref_fold_int(nrt_dtype dt, nrt_reduce_op op, int64_t acc, int64_t x) {
  if (dt == NRT_BOOL) {
    /* ProcessGroupNCCL's mapping: sum and max are "any", product and min "all". */
    switch (op) {
      case NRT_REDUCE_SUM: case NRT_REDUCE_MAX: case NRT_REDUCE_BOR: return acc | x;
      case NRT_REDUCE_PRODUCT: case NRT_REDUCE_MIN: case NRT_REDUCE_BAND: return acc & x;
      case NRT_REDUCE_BXOR: return acc ^ x;
      default: return acc;
    }
  }
  switch (op) {
    case NRT_REDUCE_SUM: case NRT_REDUCE_AVG: return ref_wrap_int(dt, (uint64_t)acc + (uint64_t)x);
    case NRT_REDUCE_PRODUCT: return ref_wrap_int(dt, (uint64_t)acc * (uint64_t)x);
    case NRT_REDUCE_MIN: return x < acc ? x : acc;
    case NRT_REDUCE_MAX: return x > acc ? x : acc;
    case NRT_REDUCE_BAND: return acc & x;
    case NRT_REDUCE_BOR: return acc | x;
    case NRT_REDUCE_BXOR: return acc ^ x;
    default: return acc;
  }
}

static void reduce_reference(nrt_dtype dt, nrt_reduce_op op, double factor, void *dst,
                             const void *const *srcs, int nsrc, int64_t n) {
  if (dt == NRT_FLOAT32 || dt == NRT_FLOAT16 || dt == NRT_BFLOAT16) {
    float f = factor_f32(dt, factor);
    for (int64_t i = 0; i < n; i++) {
      float x0 = ref_load_f32(dt, srcs[0], i);
      float acc = op == NRT_REDUCE_PREMUL_SUM ? f * x0 : x0;
      for (int s = 1; s < nsrc; s++) acc = ref_fold_f32(op, f, acc, ref_load_f32(dt, srcs[s], i));
      if (op == NRT_REDUCE_AVG) acc = acc / (float)nsrc;
      ref_store_f32(dt, dst, i, acc);
    }
  } else if (dt == NRT_FLOAT64) {
    for (int64_t i = 0; i < n; i++) {
      double x0 = ((const double *)srcs[0])[i];
      double acc = op == NRT_REDUCE_PREMUL_SUM ? factor * x0 : x0;
      for (int s = 1; s < nsrc; s++) acc = ref_fold_f64(op, factor, acc, ((const double *)srcs[s])[i]);
      if (op == NRT_REDUCE_AVG) acc = acc / (double)nsrc;
      ((double *)dst)[i] = acc;
    }
  } else {
    for (int64_t i = 0; i < n; i++) {
      int64_t acc = ref_load_int(dt, srcs[0], i);
      for (int s = 1; s < nsrc; s++) acc = ref_fold_int(dt, op, acc, ref_load_int(dt, srcs[s], i));
      if (op == NRT_REDUCE_AVG) acc = acc / nsrc;
      ref_store_int(dt, dst, i, acc);
    }
  }
}

/* ---- the vectorised folds ------------------------------------------------------
 * acc[i] = op(acc[i], x[i]) over a block, one tight loop per op so the
 * compiler vectorises each; the same source is compiled for each ISA. */
#define FOLD_FLOAT(NAME, T, ATTR)                                                     \
  ATTR static void NAME(nrt_reduce_op op, T f, T *restrict acc, const T *restrict x,   \
                        int64_t n) {                                                  \
    switch (op) {                                                                     \
      case NRT_REDUCE_SUM: case NRT_REDUCE_AVG:                                       \
        for (int64_t i = 0; i < n; i++) acc[i] = acc[i] + x[i];                       \
        break;                                                                        \
      case NRT_REDUCE_PREMUL_SUM:                                                     \
        for (int64_t i = 0; i < n; i++) acc[i] = acc[i] + f * x[i];                   \
        break;                                                                        \
      case NRT_REDUCE_PRODUCT:                                                        \
        for (int64_t i = 0; i < n; i++) acc[i] = acc[i] * x[i];                       \
        break;                                                                        \
      case NRT_REDUCE_MIN:                                                            \
        for (int64_t i = 0; i < n; i++) acc[i] = FMIN(acc[i], x[i]);                  \
        break;                                                                        \
      case NRT_REDUCE_MAX:                                                            \
        for (int64_t i = 0; i < n; i++) acc[i] = FMAX(acc[i], x[i]);                  \
        break;                                                                        \
      default: break;                                                                 \
    }                                                                                 \
  }

/* Integers wrap: the arithmetic is done in the unsigned type U (at least
 * unsigned int, so nothing promotes to a signed int that could overflow). */
#define FOLD_INT(NAME, T, U, ATTR)                                                    \
  ATTR static void NAME(nrt_reduce_op op, T *restrict acc, const T *restrict x, int64_t n) { \
    switch (op) {                                                                     \
      case NRT_REDUCE_SUM: case NRT_REDUCE_AVG:                                       \
        for (int64_t i = 0; i < n; i++) acc[i] = (T)((U)acc[i] + (U)x[i]);            \
        break;                                                                        \
      case NRT_REDUCE_PRODUCT:                                                        \
        for (int64_t i = 0; i < n; i++) acc[i] = (T)((U)acc[i] * (U)x[i]);            \
        break;                                                                        \
      case NRT_REDUCE_MIN:                                                            \
        for (int64_t i = 0; i < n; i++) acc[i] = x[i] < acc[i] ? x[i] : acc[i];       \
        break;                                                                        \
      case NRT_REDUCE_MAX:                                                            \
        for (int64_t i = 0; i < n; i++) acc[i] = x[i] > acc[i] ? x[i] : acc[i];       \
        break;                                                                        \
      case NRT_REDUCE_BAND:                                                           \
        for (int64_t i = 0; i < n; i++) acc[i] = acc[i] & x[i];                       \
        break;                                                                        \
      case NRT_REDUCE_BOR:                                                            \
        for (int64_t i = 0; i < n; i++) acc[i] = acc[i] | x[i];                       \
        break;                                                                        \
      case NRT_REDUCE_BXOR:                                                           \
        for (int64_t i = 0; i < n; i++) acc[i] = acc[i] ^ x[i];                       \
        break;                                                                        \
      default: break;                                                                 \
    }                                                                                 \
  }

#define FOLD_BOOL(NAME, ATTR)                                                         \
  ATTR static void NAME(nrt_reduce_op op, uint8_t *restrict acc, const uint8_t *restrict x, \
                        int64_t n) {                                                  \
    switch (op) {                                                                     \
      case NRT_REDUCE_SUM: case NRT_REDUCE_MAX: case NRT_REDUCE_BOR:                  \
        for (int64_t i = 0; i < n; i++) acc[i] = acc[i] | x[i];                       \
        break;                                                                        \
      case NRT_REDUCE_PRODUCT: case NRT_REDUCE_MIN: case NRT_REDUCE_BAND:             \
        for (int64_t i = 0; i < n; i++) acc[i] = acc[i] & x[i];                       \
        break;                                                                        \
      case NRT_REDUCE_BXOR:                                                           \
        for (int64_t i = 0; i < n; i++) acc[i] = acc[i] ^ x[i];                       \
        break;                                                                        \
      default: break;                                                                 \
    }                                                                                 \
  }

#define FOLD_ALL(SUFFIX, ATTR)                                \
  FOLD_FLOAT(fold_f32_##SUFFIX, float, ATTR)                  \
  FOLD_FLOAT(fold_f64_##SUFFIX, double, ATTR)                 \
  FOLD_INT(fold_i8_##SUFFIX, int8_t, unsigned, ATTR)          \
  FOLD_INT(fold_u8_##SUFFIX, uint8_t, unsigned, ATTR)         \
  FOLD_INT(fold_i16_##SUFFIX, int16_t, unsigned, ATTR)        \
  FOLD_INT(fold_i32_##SUFFIX, int32_t, unsigned, ATTR)        \
  FOLD_INT(fold_i64_##SUFFIX, int64_t, uint64_t, ATTR)        \
  FOLD_BOOL(fold_bool_##SUFFIX, ATTR)

FOLD_ALL(base, )
FOLD_ALL(avx2, NRT_TARGET_AVX2)
FOLD_ALL(avx512, NRT_TARGET_AVX512)

typedef struct fold_table {
  void (*f32)(nrt_reduce_op, float, float *restrict, const float *restrict, int64_t);
  void (*f64)(nrt_reduce_op, double, double *restrict, const double *restrict, int64_t);
  void (*i8)(nrt_reduce_op, int8_t *restrict, const int8_t *restrict, int64_t);
  void (*u8)(nrt_reduce_op, uint8_t *restrict, const uint8_t *restrict, int64_t);
  void (*i16)(nrt_reduce_op, int16_t *restrict, const int16_t *restrict, int64_t);
  void (*i32)(nrt_reduce_op, int32_t *restrict, const int32_t *restrict, int64_t);
  void (*i64)(nrt_reduce_op, int64_t *restrict, const int64_t *restrict, int64_t);
  void (*b)(nrt_reduce_op, uint8_t *restrict, const uint8_t *restrict, int64_t);
} fold_table;

#define FOLD_TABLE(SUFFIX)                                                             \
  {fold_f32_##SUFFIX, fold_f64_##SUFFIX, fold_i8_##SUFFIX, fold_u8_##SUFFIX,          \
   fold_i16_##SUFFIX, fold_i32_##SUFFIX, fold_i64_##SUFFIX, fold_bool_##SUFFIX}
static const fold_table fold_tables[] = {FOLD_TABLE(base), FOLD_TABLE(avx2), FOLD_TABLE(avx512)};

static const fold_table *pick_folds(void) {
  nrt_isa isa = nrt_kernels_isa();
  return &fold_tables[isa >= NRT_ISA_AVX512 ? 2 : isa >= NRT_ISA_AVX2 ? 1 : 0];
}

/* Float32-domain dtypes stored narrower: convert each source block to
 * float32, fold, finish, round once. */
static void reduce_narrow_floats(const fold_table *t, nrt_dtype dt, nrt_reduce_op op, float f,
                                 void *dst, const void *const *srcs, int nsrc, int64_t n) {
  const int64_t es = (int64_t)nrt_dtype_size(dt);
  float acc[NRT_COLL_BLOCK], x[NRT_COLL_BLOCK];
  for (int64_t b = 0; b < n; b += NRT_COLL_BLOCK) {
    int64_t m = n - b < NRT_COLL_BLOCK ? n - b : NRT_COLL_BLOCK;
    nrt_load_f32(acc, (const char *)srcs[0] + b * es, es, dt, m);
    if (op == NRT_REDUCE_PREMUL_SUM)
      for (int64_t i = 0; i < m; i++) acc[i] = f * acc[i];
    for (int s = 1; s < nsrc; s++) {
      nrt_load_f32(x, (const char *)srcs[s] + b * es, es, dt, m);
      t->f32(op, f, acc, x, m);
    }
    if (op == NRT_REDUCE_AVG)
      for (int64_t i = 0; i < m; i++) acc[i] = acc[i] / (float)nsrc;
    nrt_store_f32((char *)dst + b * es, es, dt, acc, m);
  }
}

/* Dtypes that fold in their stored type: the sources are folded in place
 * into a block accumulator (which makes dst aliasing a source harmless). */
static void reduce_native(const fold_table *t, nrt_dtype dt, nrt_reduce_op op, double factor,
                          void *dst, const void *const *srcs, int nsrc, int64_t n) {
  const int64_t es = (int64_t)nrt_dtype_size(dt);
  _Alignas(64) char accbuf[NRT_COLL_BLOCK * 8];
  for (int64_t b = 0; b < n; b += NRT_COLL_BLOCK) {
    int64_t m = n - b < NRT_COLL_BLOCK ? n - b : NRT_COLL_BLOCK;
    memcpy(accbuf, (const char *)srcs[0] + b * es, (size_t)(m * es));
    if (dt == NRT_FLOAT32) {
      float *acc = (float *)accbuf, f = (float)factor;
      if (op == NRT_REDUCE_PREMUL_SUM)
        for (int64_t i = 0; i < m; i++) acc[i] = f * acc[i];
      for (int s = 1; s < nsrc; s++) t->f32(op, f, acc, (const float *)srcs[s] + b, m);
      if (op == NRT_REDUCE_AVG)
        for (int64_t i = 0; i < m; i++) acc[i] = acc[i] / (float)nsrc;
    } else if (dt == NRT_FLOAT64) {
      double *acc = (double *)accbuf;
      if (op == NRT_REDUCE_PREMUL_SUM)
        for (int64_t i = 0; i < m; i++) acc[i] = factor * acc[i];
      for (int s = 1; s < nsrc; s++) t->f64(op, factor, acc, (const double *)srcs[s] + b, m);
      if (op == NRT_REDUCE_AVG)
        for (int64_t i = 0; i < m; i++) acc[i] = acc[i] / (double)nsrc;
    } else {
      for (int s = 1; s < nsrc; s++) {
        const char *x = (const char *)srcs[s] + b * es;
        switch (dt) {
          case NRT_BOOL: t->b(op, (uint8_t *)accbuf, (const uint8_t *)x, m); break;
          case NRT_UINT8: t->u8(op, (uint8_t *)accbuf, (const uint8_t *)x, m); break;
          case NRT_INT8: t->i8(op, (int8_t *)accbuf, (const int8_t *)x, m); break;
          case NRT_INT16: t->i16(op, (int16_t *)accbuf, (const int16_t *)x, m); break;
          case NRT_INT32: t->i32(op, (int32_t *)accbuf, (const int32_t *)x, m); break;
          default: t->i64(op, (int64_t *)accbuf, (const int64_t *)x, m); break;
        }
      }
      /* Integer averages are rare: the element helpers serve. */
      if (op == NRT_REDUCE_AVG)
        for (int64_t i = 0; i < m; i++) ref_store_int(dt, accbuf, i, ref_load_int(dt, accbuf, i) / nsrc);
    }
    memcpy((char *)dst + b * es, accbuf, (size_t)(m * es));
  }
}

void nrt_coll_reduce(nrt_dtype dtype, nrt_reduce_op op, double factor, void *dst,
                     const void *const *srcs, int nsrc, int64_t n) {
  nrt_dtype dt = fold_dtype(dtype, &n);
  if (n <= 0) return;
  if (nrt_kernels_reference()) {
    reduce_reference(dt, op, factor, dst, srcs, nsrc, n);
    return;
  }
  const fold_table *t = pick_folds();
  if (dt == NRT_FLOAT16 || dt == NRT_BFLOAT16)
    reduce_narrow_floats(t, dt, op, factor_f32(dt, factor), dst, srcs, nsrc, n);
  else
    reduce_native(t, dt, op, factor, dst, srcs, nsrc, n);
}

void nrt_coll_divide(nrt_dtype dtype, void *buf, int64_t n, int divisor) {
  nrt_dtype dt = fold_dtype(dtype, &n);
  if (n <= 0) return;
  if (dt == NRT_FLOAT32) {
    float *p = buf, d = (float)divisor;
    for (int64_t i = 0; i < n; i++) p[i] = p[i] / d;
  } else if (dt == NRT_FLOAT64) {
    double *p = buf, d = (double)divisor;
    for (int64_t i = 0; i < n; i++) p[i] = p[i] / d;
  } else if (dt == NRT_FLOAT16 || dt == NRT_BFLOAT16) {
    const int64_t es = (int64_t)nrt_dtype_size(dt);
    float x[NRT_COLL_BLOCK], d = (float)divisor;
    for (int64_t b = 0; b < n; b += NRT_COLL_BLOCK) {
      int64_t m = n - b < NRT_COLL_BLOCK ? n - b : NRT_COLL_BLOCK;
      char *p = (char *)buf + b * es;
      if (nrt_kernels_reference()) {
        for (int64_t i = 0; i < m; i++) ref_store_f32(dt, p, i, ref_load_f32(dt, p, i) / d);
        continue;
      }
      nrt_load_f32(x, p, es, dt, m);
      for (int64_t i = 0; i < m; i++) x[i] = x[i] / d;
      nrt_store_f32(p, es, dt, x, m);
    }
  } else {
    for (int64_t i = 0; i < n; i++) ref_store_int(dt, buf, i, ref_load_int(dt, buf, i) / divisor);
  }
}
