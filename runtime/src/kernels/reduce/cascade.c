/* SUM/MEAN p0 = 1: float sums in the order of PyTorch's CPU cascade_sum
 * (aten/src/ATen/native/cpu/SumKernel.cpp), so sums of terms near the
 * float limits overflow or cancel where the CPU's do (3e38 + 3e38 - 3e38 is
 * inf there, 3e38 in a double accumulator; int32 [-6, 2147483646,
 * -2147483648] summed as float32 is 0 there, -6 in double).
 *
 * The launch is the TensorIterator the CPU builds (dim 0 fastest, reduced
 * dims first), so its 2-d loop is replayed as the CPU's serial_for_each
 * calls it: once per index of dims 2.., with (sizes[0], sizes[1]). Each
 * call picks one of four paths by the strides of those two dims, and sums
 * with ATen's multi_row_sum: a running sum per row (or per vector lane),
 * folded into up to three higher levels every 2^level_power elements; a
 * vector row_sum interleaves four such sums. Every result is added into the
 * output ("store accumulate"), which starts at 0.
 *
 * Sums accumulate in the output dtype's accumulator: float for float32,
 * bfloat16 and float16 (values held in double and rounded to float after
 * every add: the exact sum of two floats rounded to double and then to float
 * is the float sum), double for float64. A complex64 / complex128 SUM is two
 * such sums, one per part, with the complex element as the lane: the CPU's
 * Vectorized<complex<float>> adds parts lane by lane, so its real parts
 * follow this same cascade with 4 complex64 (2 complex128) per 32-byte
 * vector, in float (double). Both parts run together: the accumulators
 * hold components (a vector of 4 complex64 is 8 float lanes, interleaved
 * as in memory), so the float32 vector loops serve complex64 as they are.
 * p1 is the CPU's vector width in
 * bytes (64 for AVX-512), p2 = 1 reads NaN as 0 (nansum). The input and the
 * output share one dtype: the glue converts first, as the CPU does.
 *
 * Outputs written by different 2-d calls or rows are independent, so the
 * rows of a call (the kept dim 1) are split across threads at block
 * boundaries; everything else runs in order on one thread.
 *
 * A whole-tensor sum (one output) of at least GRAIN (32768) elements is
 * split as the CPU's parallel_reduce splits it when it runs on p3 > 1
 * threads (two_pass_reduction, aten/src/ATen/TensorIteratorReduce.cpp):
 * at::parallel_for cuts the iterator's linear range into T = min(p3,
 * ceil(n / GRAIN)) chunks of ceil(n / T); each chunk replays
 * serial_for_each over its range (DimCounter: a partial first row, whole
 * rows, a partial last row) into its own slot of a p3-long buffer of the
 * output dtype that starts at 0, and the buffer is then summed by the
 * same loop into the output. The chunks run in parallel here too. */
#pragma GCC optimize("O3,no-trapping-math,no-math-errno")
#include "kernels/common/common.h"
#include "kernels/reduce/cascade.h"

#define CS_LEVELS 4
#define CS_GRAIN 32768 /* at::internal::GRAIN_SIZE */
#define CS_MAX_LANES 16 /* 64-byte vectors of float */

typedef struct cs_plan {
  const nrt_launch *l;
  nrt_dtype dt;         /* the summed components' dtype: a complex launch's part dtype */
  int64_t es;           /* element size (a whole complex element) */
  int parts;            /* components per element: 2 for complex, else 1 */
  int64_t ces;          /* component size, es / parts */
  bool f32acc;          /* float accumulator (rounded after every add) */
  bool nan0;            /* NaN reads as 0 */
  int vec, vacc;        /* elements in Vectorized<scalar_t> and in Vectorized<acc_t> */
  int vw;               /* components in Vectorized<acc_t>: vacc * parts */
  const char *in;
  char *out;
} cs_plan;

enum { LD_SCALAR, LD_INNER, LD_OUTER };

/* The float32 vector loops read lanes as adjacent floats: float32 and
 * complex64 elements (their components). */
static inline bool cs_fast_f32(const cs_plan *p) {
  return p->dt == NRT_FLOAT32 && !p->nan0 && !nrt_kernels_reference();
}

static inline double cs_round(const cs_plan *p, double v) { return p->f32acc ? (double)(float)v : v; }

static inline double cs_elem(const cs_plan *p, const char *src) {
  double v;
  switch (p->dt) {
  case NRT_FLOAT32: v = *(const float *)src; break;
  case NRT_FLOAT64: v = *(const double *)src; break;
  case NRT_BFLOAT16: v = nrt_k_bf16_to_f32(*(const uint16_t *)src); break;
  case NRT_FLOAT16: v = nrt_k_f16_to_f32(*(const uint16_t *)src); break;
  default: v = 0; break;
  }
  return v;
}

static inline double cs_load1(const cs_plan *p, const char *src) {
  double v = cs_elem(p, src);
  return p->nan0 && v != v ? 0.0 : v;
}

/* One load of w components (an element's parts for LD_SCALAR, vw
 * otherwise) at src into v. */
static inline void cs_load(const cs_plan *p, int mode, const char *src, double *v) {
  if (mode == LD_SCALAR) {
    for (int c = 0; c < p->parts; c++) v[c] = cs_load1(p, src + c * p->ces);
    return;
  }
  if (mode == LD_OUTER || p->vec == p->vacc) {
    for (int k = 0; k < p->vw; k++) v[k] = cs_load1(p, src + k * p->ces);
    return;
  }
  /* LD_INNER of 16-bit elements: a vector of vec = 2 * vacc elements
   * converted to two float vectors, its first and second halves, and added
   * (InnerSumCastLoadPolicy for reduced floating types, bfloat16 and float16
   * alike; nansum zeroes NaN in each half first). */
  for (int k = 0; k < p->vacc; k++) {
    double a = cs_load1(p, src + k * p->es), b = cs_load1(p, src + (k + p->vacc) * p->es);
    v[k] = cs_round(p, a + b);
  }
}

static int64_t cs_ceil_log2(int64_t x) {
  if (x <= 2) return 1;
  return 64 - __builtin_clzll((unsigned long long)(x - 1));
}

/* The float32 vector loads of multi_row_sum with the lane count a
 * constant, so the lane loops compile to vector adds: the same float adds
 * in the same order as the general version below (its reference). */
#define MRS_F32(NAME, W, ATTR)                                                                          \
  ATTR static void NAME(const char *in, int64_t row_stride, int64_t col_stride, int64_t size, int nrows,    \
                   int64_t lp, double *ret) {                                                         \
    int64_t step = (int64_t)1 << lp, mask = step - 1;                                                \
    float acc[CS_LEVELS][4][W];                                                                      \
    memset(acc, 0, sizeof acc);                                                                      \
    int64_t i = 0;                                                                                   \
    for (; i + step <= size;) {                                                                      \
      for (int64_t j = 0; j < step; ++j, ++i) {                                                      \
        const char *base = in + i * row_stride;                                                      \
        for (int k = 0; k < nrows; k++) {                                                            \
          const float *x = (const float *)(base + k * col_stride);                                   \
          for (int c = 0; c < W; c++) acc[0][k][c] += x[c];                                          \
        }                                                                                            \
      }                                                                                              \
      for (int j = 1; j < CS_LEVELS; j++) {                                                          \
        for (int k = 0; k < nrows; k++)                                                              \
          for (int c = 0; c < W; c++) {                                                              \
            acc[j][k][c] += acc[j - 1][k][c];                                                        \
            acc[j - 1][k][c] = 0.0f;                                                                 \
          }                                                                                          \
        if ((i & (mask << (j * lp))) != 0) break;                                                    \
      }                                                                                              \
    }                                                                                                \
    for (; i < size; ++i) {                                                                          \
      const char *base = in + i * row_stride;                                                        \
      for (int k = 0; k < nrows; k++) {                                                              \
        const float *x = (const float *)(base + k * col_stride);                                     \
        for (int c = 0; c < W; c++) acc[0][k][c] += x[c];                                            \
      }                                                                                              \
    }                                                                                                \
    for (int j = 1; j < CS_LEVELS; j++)                                                              \
      for (int k = 0; k < nrows; k++)                                                                \
        for (int c = 0; c < W; c++) acc[0][k][c] += acc[j][k][c];                                    \
    for (int k = 0; k < nrows; k++)                                                                  \
      for (int c = 0; c < W; c++) ret[k * W + c] = acc[0][k][c];                                    \
  }
/* Each lane's adds are its own, so wider vectors (an AVX2 / AVX-512 build
 * of the same loops, picked by the ISA) give the same sums bit for bit. */
MRS_F32(mrs_f32x8, 8, )
MRS_F32(mrs_f32x16, 16, )
MRS_F32(mrs_f32x8_avx2, 8, NRT_TARGET_AVX2)
MRS_F32(mrs_f32x16_avx2, 16, NRT_TARGET_AVX2)

/* multi_row_sum's lanes are independent and its level folds depend only on
 * the step, so side-by-side vector blocks of a contiguous outer reduction
 * (sum over dim 0 of a row-major matrix) can advance together, a row of up
 * to CS_TILE columns at a time, reading memory in order where the CPU walks
 * each 128-byte block down all the rows: the same adds per column. */
#define CS_TILE 1024
#define MRS_F32_TILE(NAME, ATTR)                                                                      \
  ATTR static void NAME(const char *in, int64_t row_stride, int64_t ncols, int64_t size, int64_t lp,  \
                       double *ret) {                                                                 \
  int64_t step = (int64_t)1 << lp, mask = step - 1;                                                   \
  static _Thread_local float acc[CS_LEVELS][CS_TILE];                                                 \
  for (int j = 0; j < CS_LEVELS; j++)                                                                 \
    for (int64_t c = 0; c < ncols; c++) acc[j][c] = 0.0f;                                             \
  int64_t i = 0;                                                                                      \
  for (; i + step <= size;) {                                                                         \
    for (int64_t j = 0; j < step; ++j, ++i) {                                                         \
      const float *x = (const float *)(in + i * row_stride);                                          \
      for (int64_t c = 0; c < ncols; c++) acc[0][c] += x[c];                                          \
    }                                                                                                 \
    for (int j = 1; j < CS_LEVELS; j++) {                                                             \
      for (int64_t c = 0; c < ncols; c++) {                                                           \
        acc[j][c] += acc[j - 1][c];                                                                   \
        acc[j - 1][c] = 0.0f;                                                                         \
      }                                                                                               \
      if ((i & (mask << (j * lp))) != 0) break;                                                       \
    }                                                                                                 \
  }                                                                                                   \
  for (; i < size; ++i) {                                                                             \
    const float *x = (const float *)(in + i * row_stride);                                            \
    for (int64_t c = 0; c < ncols; c++) acc[0][c] += x[c];                                            \
  }                                                                                                   \
  for (int j = 1; j < CS_LEVELS; j++)                                                                 \
    for (int64_t c = 0; c < ncols; c++) acc[0][c] += acc[j][c];                                       \
  for (int64_t c = 0; c < ncols; c++) ret[c] = acc[0][c];                                             \
}
MRS_F32_TILE(mrs_f32_tile_base, )
MRS_F32_TILE(mrs_f32_tile_avx512, NRT_TARGET_AVX512)

static void mrs_f32_tile(const char *in, int64_t row_stride, int64_t ncols, int64_t size, int64_t lp, double *ret) {
  if (nrt_kernels_isa() >= NRT_ISA_AVX512) mrs_f32_tile_avx512(in, row_stride, ncols, size, lp, ret);
  else mrs_f32_tile_base(in, row_stride, ncols, size, lp, ret);
}

/* ATen's multi_row_sum: nrows running sums of width w over `size` steps. */
static int64_t cs_level_power(int64_t size) {
  int64_t lp = cs_ceil_log2(size) / CS_LEVELS;
  return lp < 4 ? 4 : lp;
}

static void multi_row_sum(const cs_plan *p, int mode, const char *in, int64_t row_stride, int64_t col_stride,
                          int64_t size, int nrows, double *ret /* nrows * w */) {
  int w = mode == LD_SCALAR ? p->parts : p->vw;
  int64_t lp = cs_ceil_log2(size) / CS_LEVELS;
  if (lp < 4) lp = 4;
  if (mode != LD_SCALAR && cs_fast_f32(p)) {
    bool avx2 = nrt_kernels_isa() >= NRT_ISA_AVX2;
    if (w == 8) return (avx2 ? mrs_f32x8_avx2 : mrs_f32x8)(in, row_stride, col_stride, size, nrows, lp, ret);
    if (w == 16) return (avx2 ? mrs_f32x16_avx2 : mrs_f32x16)(in, row_stride, col_stride, size, nrows, lp, ret);
  }
  int64_t step = (int64_t)1 << lp, mask = step - 1;
  double acc[CS_LEVELS][4 * CS_MAX_LANES] = {{0}};
  double v[CS_MAX_LANES];
  int nw = nrows * w;
  int64_t i = 0;
  for (; i + step <= size;) {
    for (int64_t j = 0; j < step; ++j, ++i) {
      const char *base = in + i * row_stride;
      for (int k = 0; k < nrows; k++) {
        cs_load(p, mode, base + k * col_stride, v);
        for (int c = 0; c < w; c++) acc[0][k * w + c] = cs_round(p, acc[0][k * w + c] + v[c]);
      }
    }
    for (int j = 1; j < CS_LEVELS; j++) {
      for (int c = 0; c < nw; c++) {
        acc[j][c] = cs_round(p, acc[j][c] + acc[j - 1][c]);
        acc[j - 1][c] = 0.0;
      }
      if ((i & (mask << (j * lp))) != 0) break;
    }
  }
  for (; i < size; ++i) {
    const char *base = in + i * row_stride;
    for (int k = 0; k < nrows; k++) {
      cs_load(p, mode, base + k * col_stride, v);
      for (int c = 0; c < w; c++) acc[0][k * w + c] = cs_round(p, acc[0][k * w + c] + v[c]);
    }
  }
  for (int j = 1; j < CS_LEVELS; j++)
    for (int c = 0; c < nw; c++) acc[0][c] = cs_round(p, acc[0][c] + acc[j][c]);
  for (int c = 0; c < nw; c++) ret[c] = acc[0][c];
}

/* ATen's row_sum: four interleaved multi_row_sum rows, the tail into the
 * first, then the four added left to right. */
static void row_sum(const cs_plan *p, int mode, const char *in, int64_t stride, int64_t size, double *ret) {
  int w = mode == LD_SCALAR ? p->parts : p->vw;
  double part[4 * CS_MAX_LANES], v[CS_MAX_LANES];
  int64_t n4 = size / 4;
  multi_row_sum(p, mode, in, stride * 4, stride, n4, 4, part);
  for (int64_t i = n4 * 4; i < size; i++) {
    cs_load(p, mode, in + i * stride, v);
    for (int c = 0; c < w; c++) part[c] = cs_round(p, part[c] + v[c]);
  }
  for (int k = 1; k < 4; k++)
    for (int c = 0; c < w; c++) part[c] = cs_round(p, part[c] + part[k * w + c]);
  for (int c = 0; c < w; c++) ret[c] = part[c];
}

/* CastStoreAccumulate: out += value in the output dtype (a 16-bit output
 * rounds the value first: BFloat16 += BFloat16). */
static void cs_store(const cs_plan *p, char *dst, double v) {
  double o = cs_elem(p, dst);
  if (p->dt == NRT_BFLOAT16 || p->dt == NRT_FLOAT16) {
    union { char c[8]; double d; } tmp;
    nrt_ref_store_f64(tmp.c, p->dt, v);
    v = cs_elem(p, tmp.c);
  }
  nrt_ref_store_f64(dst, p->dt, cs_round(p, o + v));
}

typedef struct cs_call {
  const char *in;
  char *out;
  int64_t size0, size1, in0, in1, out0, out1;
  int path;
} cs_call;
enum { P_ELEMENTWISE, P_VEC_INNER, P_VEC_OUTER, P_SCALAR_INNER, P_SCALAR_OUTER };

static void cs_setup(const cs_plan *p, cs_call *c) {
  if (c->out0 != 0 && c->out1 == 0) {
    int64_t t;
    t = c->in0; c->in0 = c->in1; c->in1 = t;
    t = c->out0; c->out0 = c->out1; c->out1 = t;
    t = c->size0; c->size0 = c->size1; c->size1 = t;
  }
  if (c->out0 != 0 && c->out1 != 0) c->path = P_ELEMENTWISE;
  else if (c->in0 == p->es && c->size0 >= p->vec) c->path = P_VEC_INNER;
  else if (c->in1 == p->es && c->size1 >= p->vec) c->path = P_VEC_OUTER;
  else if (c->in0 < c->in1) c->path = P_SCALAR_INNER;
  else c->path = P_SCALAR_OUTER;
}

/* Block of dim-1 indices that a split must keep together. */
static int64_t cs_unit(const cs_plan *p, const cs_call *c) {
  switch (c->path) {
  case P_VEC_OUTER: return CS_TILE; /* a multiple of the blocks of 4 vectors: tiles stay whole */
  case P_SCALAR_OUTER: return 4;
  default: return 1;
  }
}

/* The 2-d loop body for dim-1 indices [j0, j1) (j0 on a block boundary). */
static void cs_run(const cs_plan *p, const cs_call *c, int64_t j0, int64_t j1) {
  double r[4 * CS_MAX_LANES];
  int np = p->parts;
  int64_t ces = p->ces;
  switch (c->path) {
  case P_ELEMENTWISE:
    for (int64_t j = j0; j < j1; j++)
      for (int64_t i = 0; i < c->size0; i++)
        for (int q = 0; q < np; q++)
          cs_store(p, c->out + j * c->out1 + i * c->out0 + q * ces,
                   cs_load1(p, c->in + j * c->in1 + i * c->in0 + q * ces));
    break;
  case P_VEC_INNER: {
    int64_t nv = c->size0 / p->vec;
    for (int64_t j = j0; j < j1; j++) {
      const char *row = c->in + j * c->in1;
      row_sum(p, LD_INNER, row, p->vec * p->es, nv, r);
      for (int q = 0; q < np; q++) {
        double fin = 0.0;
        for (int64_t k = nv * p->vec; k < c->size0; k++)
          fin = cs_round(p, fin + cs_load1(p, row + k * p->es + q * ces));
        for (int k = 0; k < p->vacc; k++) fin = cs_round(p, fin + r[k * np + q]);
        cs_store(p, c->out + j * c->out1 + q * ces, fin);
      }
    }
    break;
  }
  case P_VEC_OUTER: {
    /* w elements a vector; r holds their components, element k's part q
     * at k * np + q */
    int64_t j = j0, w = p->vacc;
    if (cs_fast_f32(p)) {
      double t[CS_TILE];
      int64_t lp = cs_level_power(c->size0), blocks = (j1 - j) / (4 * w), most = CS_TILE / (4 * w * np);
      while (blocks > 0) {
        int64_t nb = blocks < most ? blocks : most, ncols = nb * 4 * w;
        mrs_f32_tile(c->in + j * p->es, c->in0, ncols * np, c->size0, lp, t);
        for (int64_t k = 0; k < ncols * np; k++) cs_store(p, c->out + (j + k / np) * c->out1 + k % np * ces, t[k]);
        j += ncols;
        blocks -= nb;
      }
    }
    for (; j + 4 * w <= j1; j += 4 * w) {
      multi_row_sum(p, LD_OUTER, c->in + j * p->es, c->in0, w * p->es, c->size0, 4, r);
      for (int64_t k = 0; k < 4 * w * np; k++) cs_store(p, c->out + (j + k / np) * c->out1 + k % np * ces, r[k]);
    }
    for (; j + w <= j1; j += w) {
      row_sum(p, LD_OUTER, c->in + j * p->es, c->in0, c->size0, r);
      for (int64_t k = 0; k < w * np; k++) cs_store(p, c->out + (j + k / np) * c->out1 + k % np * ces, r[k]);
    }
    for (; j < j1; j++) {
      row_sum(p, LD_SCALAR, c->in + j * p->es, c->in0, c->size0, r);
      for (int q = 0; q < np; q++) cs_store(p, c->out + j * c->out1 + q * ces, r[q]);
    }
    break;
  }
  case P_SCALAR_INNER:
    for (int64_t j = j0; j < j1; j++) {
      row_sum(p, LD_SCALAR, c->in + j * c->in1, c->in0, c->size0, r);
      for (int q = 0; q < np; q++) cs_store(p, c->out + j * c->out1 + q * ces, r[q]);
    }
    break;
  case P_SCALAR_OUTER: {
    int64_t j = j0;
    for (; j + 3 < j1; j += 4) {
      multi_row_sum(p, LD_SCALAR, c->in + j * c->in1, c->in0, c->in1, c->size0, 4, r);
      for (int k = 0; k < 4 * np; k++) cs_store(p, c->out + (j + k / np) * c->out1 + k % np * ces, r[k]);
    }
    for (; j < j1; j++) {
      row_sum(p, LD_SCALAR, c->in + j * c->in1, c->in0, c->size0, r);
      for (int q = 0; q < np; q++) cs_store(p, c->out + j * c->out1 + q * ces, r[q]);
    }
    break;
  }
  }
}

/* serial_for_each over linear positions [begin, end) of the launch (dim 0
 * fastest): one 2-d call per DimCounter step, as at::internal's, into the
 * outputs at out (their strides as the launch's). */
static void cs_replay(const cs_plan *p, char *out, int64_t begin, int64_t end) {
  const nrt_launch *l = p->l;
  int nd = l->ndim > 0 ? l->ndim : 1;
  int64_t shape[NRT_MAX_DIMS], v[NRT_MAX_DIMS], rem = begin;
  for (int d = 0; d < nd; d++) {
    shape[d] = l->ndim > 0 ? l->sizes[d] : 1;
    v[d] = rem % shape[d];
    rem /= shape[d];
  }
  int64_t off = begin;
  while (off < end) {
    int64_t step0 = shape[0] - v[0] < end - off ? shape[0] - v[0] : end - off, step1 = 1;
    if (nd > 1 && step0 == shape[0]) {
      step1 = (end - off) / shape[0];
      if (shape[1] - v[1] < step1) step1 = shape[1] - v[1];
    }
    cs_call c = {.in = p->in, .out = out, .size0 = step0, .size1 = step1};
    for (int d = 0; d < l->ndim; d++) {
      c.in += v[d] * l->operands[1].strides[d];
      c.out += v[d] * l->operands[0].strides[d];
    }
    if (l->ndim > 0) { c.in0 = l->operands[1].strides[0]; c.out0 = l->operands[0].strides[0]; }
    if (l->ndim > 1) { c.in1 = l->operands[1].strides[1]; c.out1 = l->operands[0].strides[1]; }
    cs_setup(p, &c);
    cs_run(p, &c, 0, c.size1);
    /* DimCounter::increment */
    off += step0 * step1;
    int64_t carry = step0;
    int d = 0;
    if (step1 != 1) {
      d = 1;
      carry = step1;
    }
    for (; d < nd && carry > 0; d++) {
      int64_t nv = v[d] + carry;
      carry = nv >= shape[d] ? 1 : 0;
      v[d] = nv >= shape[d] ? nv - shape[d] : nv;
    }
  }
}

typedef struct cs_two_pass {
  const cs_plan *p;
  char *slots; /* p3 outputs of the output dtype, es apart */
  int64_t chunk, numel;
} cs_two_pass;

static void cs_chunks(void *ctx, int64_t b, int64_t e) {
  const cs_two_pass *t = ctx;
  for (int64_t k = b; k < e; k++) {
    int64_t r0 = k * t->chunk, r1 = r0 + t->chunk < t->numel ? r0 + t->chunk : t->numel;
    cs_replay(t->p, t->slots + k * t->p->es, r0, r1);
  }
}

/* two_pass_reduction: the chunks into the slots, then the slots (all p3 of
 * them, unused ones 0) summed by the same loop into the output. */
static nrt_status cs_two_pass_sum(const cs_plan *p, int64_t numel, int64_t threads) {
  char slot_mem[64 * 16]; /* up to 64 complex128 */
  if (threads > 64)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: p3 = %lld CPU threads, at most 64",
                           nrt_op_name(p->l->op), (long long)threads);
  for (int64_t k = 0; k < threads * p->parts; k++) nrt_ref_store_f64(slot_mem + k * p->ces, p->dt, 0.0);
  int64_t tasks = (numel + CS_GRAIN - 1) / CS_GRAIN;
  if (tasks > threads) tasks = threads;
  cs_two_pass t = {.p = p, .slots = slot_mem, .chunk = (numel + tasks - 1) / tasks, .numel = numel};
  if (nrt_kernels_reference()) cs_chunks(&t, 0, tasks);
  else nrt_parallel_for(tasks, 1, cs_chunks, &t);
  cs_plan q = *p;
  q.in = slot_mem;
  cs_call c = {.in = slot_mem, .out = p->out, .size0 = threads, .size1 = 1, .in0 = p->es};
  cs_setup(&q, &c);
  cs_run(&q, &c, 0, 1);
  return NRT_SUCCESS;
}

typedef struct cs_par {
  const cs_plan *p;
  const cs_call *c;
  int64_t unit;
} cs_par;

static void cs_range(void *ctx, int64_t b, int64_t e) {
  const cs_par *q = ctx;
  int64_t j0 = b * q->unit, j1 = e * q->unit;
  if (j1 > q->c->size1) j1 = q->c->size1;
  cs_run(q->p, q->c, j0, j1);
}

/* Byte offset of output g, counting over the dims the output advances along. */
static int64_t cs_out_offset(const nrt_launch *l, int64_t g) {
  int64_t off = 0;
  for (int d = 0; d < l->ndim; d++) {
    if (l->operands[0].strides[d] == 0) continue;
    off += (g % l->sizes[d]) * l->operands[0].strides[d];
    g /= l->sizes[d];
  }
  return off;
}


nrt_status nrt_reduce_cascade(const nrt_launch *l) {
  nrt_dtype dt = l->operands[0].dtype, in_dt = l->operands[1].dtype;
  bool cx = dt == NRT_COMPLEX64 || dt == NRT_COMPLEX128;
  if (dt != in_dt || (dt != NRT_FLOAT32 && dt != NRT_FLOAT64 && dt != NRT_BFLOAT16 && dt != NRT_FLOAT16 && !cx))
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                           "%s: p0 = 1 needs one float or complex dtype for input and output, got %s and %s",
                           nrt_op_name(l->op), nrt_dtype_name(in_dt), nrt_dtype_name(dt));
  /* The CPU's complex mean divides the sum by a complex count (the glue's
   * div_), which is not a division of each part. */
  if (cx && (l->op != NRT_OP_SUM || l->params[2] != 0))
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: p0 = 1 of %s is a plain sum only", nrt_op_name(l->op),
                           nrt_dtype_name(dt));
  int64_t vbytes = l->params[1];
  if (vbytes != 16 && vbytes != 32 && vbytes != 64)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: p1 = %lld is not a vector width of 16, 32 or 64 bytes",
                           nrt_op_name(l->op), (long long)vbytes);
  if (l->params[3] < 0)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: p3 = %lld is not a CPU thread count", nrt_op_name(l->op),
                           (long long)l->params[3]);
  nrt_dtype part = dt == NRT_COMPLEX64 ? NRT_FLOAT32 : dt == NRT_COMPLEX128 ? NRT_FLOAT64 : dt;
  cs_plan p = {.l = l, .dt = part, .es = (int64_t)nrt_dtype_size(dt), .parts = cx ? 2 : 1,
               .f32acc = part != NRT_FLOAT64, .nan0 = l->params[2] != 0, .in = l->operands[1].data,
               .out = l->operands[0].data};
  p.ces = p.es / p.parts;
  /* the accumulator vector holds acc_t: float/double, or complex of them */
  int64_t acc_es = (p.f32acc ? 4 : 8) * p.parts;
  p.vec = (int)(vbytes / p.es);
  p.vacc = (int)(vbytes / acc_es);
  p.vw = p.vacc * p.parts;

  /* The output starts at 0 (the CPU fills it before its loops). */
  int64_t numel = 1, nout = 1;
  for (int d = 0; d < l->ndim; d++) {
    numel *= l->sizes[d];
    if (l->operands[0].strides[d] != 0) nout *= l->sizes[d];
  }
  if (numel == 0) return NRT_SUCCESS;
  for (int64_t g = 0; g < nout; g++)
    for (int q = 0; q < p.parts; q++) nrt_ref_store_f64(p.out + cs_out_offset(l, g) + q * p.ces, p.dt, 0.0);

  int64_t threads = l->params[3], outer = 1;
  for (int d = 2; d < l->ndim; d++) outer *= l->sizes[d];
  if (nout == 1 && numel >= CS_GRAIN && threads > 1) {
    nrt_status st = cs_two_pass_sum(&p, numel, threads);
    if (st != NRT_SUCCESS) return st;
    outer = 0; /* summed */
  }
  for (int64_t o = 0; o < outer; o++) {
    cs_call c = {.in = p.in, .out = p.out, .size0 = l->ndim > 0 ? l->sizes[0] : 1,
                 .size1 = l->ndim > 1 ? l->sizes[1] : 1};
    if (l->ndim > 0) { c.in0 = l->operands[1].strides[0]; c.out0 = l->operands[0].strides[0]; }
    if (l->ndim > 1) { c.in1 = l->operands[1].strides[1]; c.out1 = l->operands[0].strides[1]; }
    int64_t rem = o;
    for (int d = 2; d < l->ndim; d++) {
      int64_t i = rem % l->sizes[d];
      rem /= l->sizes[d];
      c.in += i * l->operands[1].strides[d];
      c.out += i * l->operands[0].strides[d];
    }
    cs_setup(&p, &c);
    int64_t unit = cs_unit(&p, &c);
    /* Rows of dim 1 go to different outputs when its output stride is
     * nonzero: those may run in parallel. */
    if (c.out1 != 0 && !nrt_kernels_reference()) {
      cs_par q = {.p = &p, .c = &c, .unit = unit};
      int64_t blocks = (c.size1 + unit - 1) / unit, per = c.size0 * unit;
      int64_t grain = per >= 32768 ? 1 : 32768 / (per > 0 ? per : 1);
      nrt_parallel_for(blocks, grain, cs_range, &q);
    } else {
      cs_run(&p, &c, 0, c.size1);
    }
  }
  if (l->op == NRT_OP_MEAN) {
    /* the CPU's mean: the sum, then div_ by the count in the output dtype */
    double n = (double)(numel / nout);
    for (int64_t g = 0; g < nout; g++) {
      char *o = p.out + cs_out_offset(l, g);
      nrt_ref_store_f64(o, p.dt, cs_elem(&p, o) / n);
    }
  }
  return NRT_SUCCESS;
}
