/* Reductions over TensorIterator's reduction layout: operands[0] (and [1]
 * for the with-index ops) have stride 0 along the reduced dims; the input
 * is the last operand.
 *
 * Dims split into kept (some output stride != 0) and reduced (every output
 * stride 0). Each reduction is a small state (rstate) fed with converted
 * blocks of input, merged in index order when the reduced range was split
 * across threads, and finished into the output(s). Two traversals:
 *  - rows:    the input's fastest dim is reduced: one output at a time,
 *             blocks run along the reduced dim;
 *  - columns: the input's fastest dim is kept (sum over dim 0 of a
 *             row-major matrix): a tile of neighbouring outputs advances
 *             together, reading memory in order. The simple ops (sums,
 *             extremes, all/any, 1- and 2-norms) accumulate "vertically",
 *             one running value per column, vectorised across columns;
 *             the others gather each output's values into a column
 *             buffer and feed the usual block functions. Short
 *             reductions of the simple ops (at most 32 elements per
 *             output) also go this way, to spread the per-output cost.
 * Outputs are parallel tasks; when there are too few (a full reduction has
 * one), the reduced range is cut into chunks as well.
 *
 * Float inputs accumulate in double (sums, products, norms, variance by
 * Chan/Welford), integers in wrapping int64. Indices (argmax and friends)
 * count row-major over the reduced dims in the order given, and pick the
 * first occurrence of the extreme; NaN is the extreme of both max and
 * min, as in PyTorch. */
#pragma GCC optimize("O3,no-trapping-math,no-math-errno")
#include <immintrin.h>
#include <stdlib.h>
#include "kernels/common/common.h"
#include "kernels/reduce/cascade.h"
#include "kernels/reduce/vnorm.h"
#include "kernels/reduce/welford.h"

#define RED_COLS 64    /* columns per tile when values are gathered per column */
#define RED_ROWS 64
/* Columns per tile for the vertical ops: 4096 columns of float32 are 16 KiB
 * of a row read in one run (4 pages, so the prefetchers stay ahead; a 4 KiB
 * run restarted them every page), and the running values (32 KiB of
 * double) stay in L1/L2. */
#define RED_VCOLS 4096
#define RED_GRAIN 32768 /* elements per parallel task, at least */

typedef struct rstate {
  double a, b;  /* float value / sum / mean; b: m2 (VAR), exp-sum (LOGSUMEXP) */
  int64_t i;    /* integer value, ALL/ANY flag */
  int64_t n;    /* VAR count */
  int64_t idx;  /* index of the extreme, -1 while empty */
  int flags;    /* RS_NAN, RS_POSINF */
} rstate;
enum { RS_NAN = 1, RS_POSINF = 2 };

typedef struct red_plan red_plan;
typedef void (*acc_f32_fn)(const red_plan *p, struct rstate *s, const float *x, int64_t n,
                           int64_t idx0);

struct red_plan {
  const nrt_launch *l;
  acc_f32_fn acc;           /* baseline or AVX-512 build of the float accumulators */
  bool wide;                /* AVX-512 builds */
  nrt_op op;
  bool fdomain;
  bool with_index;          /* the op produces an index */
  double p;                 /* NORM order */
  int nout;
  char *in;
  nrt_dtype in_dt;
  char *out[2];
  nrt_dtype out_dt[2];
  /* kept dims outer -> inner; reduced dims outer -> inner */
  int nk, nr;
  int64_t ksize[NRT_MAX_DIMS], kin[NRT_MAX_DIMS], kout[2][NRT_MAX_DIMS];
  int64_t rsize[NRT_MAX_DIMS], rin[NRT_MAX_DIMS];
  int64_t nkept, nred;
  bool columns;
  bool vertical;  /* columns path with per-column running values */
  int tile;       /* columns per tile */
  int64_t ntiles; /* columns: tiles along the innermost kept dim */
  int64_t groups, chunks;
  rstate *partial; /* groups * chunks * (columns ? tile : 1), when chunks > 1 */
};

/* ---- states ---------------------------------------------------------------- */

static void st_init(const red_plan *p, rstate *s) {
  memset(s, 0, sizeof *s);
  s->idx = -1;
  switch (p->op) {
  case NRT_OP_PROD: s->a = 1.0; s->i = 1; break;
  case NRT_OP_AMAX: s->a = -INFINITY; s->i = INT64_MIN; break;
  case NRT_OP_AMIN: s->a = INFINITY; s->i = INT64_MAX; break;
  case NRT_OP_ALL: s->i = 1; break;
  case NRT_OP_NORM: s->a = p->p == -INFINITY ? INFINITY : 0.0; break;
  case NRT_OP_LOGSUMEXP: s->a = -INFINITY; break;
  default: break;
  }
}

static bool is_max_op(nrt_op op) {
  return op == NRT_OP_AMAX || op == NRT_OP_MAX_WITH_INDEX || op == NRT_OP_ARGMAX;
}

/* The block accumulators (and accum.h's double sums) are inlined into two
 * builds of acc_f32 (baseline and AVX-512), chosen per launch. */
#define RED_INLINE static inline __attribute__((always_inline))

/* Block max/min ignoring NaN, plus whether a NaN was seen. By hand with
 * SSE (part of x86-64): the compiler will not vectorise a running float
 * max, max not being associative under NaN and signed-zero rules.
 * maxps(v, m) keeps m when v is NaN; cmpunordps finds the NaNs. */
#define BLOCK_EXTREME(name, VOP, CMP, INIT)                                 \
  RED_INLINE float name(const float *x, int64_t n, int *nan) {           \
    __m128 m0 = _mm_set1_ps(INIT), m1 = m0, u0 = _mm_setzero_ps(), u1 = u0; \
    int64_t i = 0;                                                         \
    for (; i + 8 <= n; i += 8) {                                           \
      __m128 a = _mm_loadu_ps(x + i), b = _mm_loadu_ps(x + i + 4);         \
      m0 = VOP(a, m0);                                                     \
      m1 = VOP(b, m1);                                                     \
      u0 = _mm_or_ps(u0, _mm_cmpunord_ps(a, a));                           \
      u1 = _mm_or_ps(u1, _mm_cmpunord_ps(b, b));                           \
    }                                                                      \
    float lanes[4];                                                        \
    _mm_storeu_ps(lanes, VOP(m0, m1));                                     \
    int any = _mm_movemask_ps(_mm_or_ps(u0, u1)) != 0;                     \
    float r = lanes[0];                                                    \
    for (int j = 1; j < 4; j++) r = lanes[j] CMP r ? lanes[j] : r;         \
    for (; i < n; i++) {                                                   \
      r = x[i] CMP r ? x[i] : r;                                           \
      any |= x[i] != x[i];                                                 \
    }                                                                      \
    *nan = any;                                                            \
    return r;                                                              \
  }
BLOCK_EXTREME(block_max, _mm_max_ps, >, -INFINITY)
BLOCK_EXTREME(block_min, _mm_min_ps, <, INFINITY)

/* The same with 16 lanes. */
#define BLOCK_EXTREME512(name, VOP, CMP, INIT)                               \
  NRT_TARGET_AVX512 static float name(const float *x, int64_t n, int *nan) { \
    __m512 m0 = _mm512_set1_ps(INIT), m1 = m0;                              \
    __mmask16 u = 0;                                                         \
    int64_t i = 0;                                                           \
    for (; i + 32 <= n; i += 32) {                                           \
      __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);    \
      m0 = VOP(a, m0);                                                       \
      m1 = VOP(b, m1);                                                       \
      u |= _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q) |                          \
           _mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q);                           \
    }                                                                        \
    float lanes[16];                                                         \
    _mm512_storeu_ps(lanes, VOP(m0, m1));                                    \
    int any = u != 0;                                                        \
    float r = lanes[0];                                                      \
    for (int j = 1; j < 16; j++) r = lanes[j] CMP r ? lanes[j] : r;          \
    for (; i < n; i++) {                                                     \
      r = x[i] CMP r ? x[i] : r;                                             \
      any |= x[i] != x[i];                                                   \
    }                                                                        \
    *nan = any;                                                              \
    return r;                                                                \
  }
BLOCK_EXTREME512(block_max512, _mm512_max_ps, >, -INFINITY)
BLOCK_EXTREME512(block_min512, _mm512_min_ps, <, INFINITY)

static void merge_var(rstate *s, int64_t nb, double mean_b, double m2_b) {
  if (nb == 0) return;
  if (s->n == 0) {
    s->n = nb;
    s->a = mean_b;
    s->b = m2_b;
    return;
  }
  double n = (double)(s->n + nb), delta = mean_b - s->a;
  s->a += delta * ((double)nb / n);
  s->b += m2_b + delta * delta * ((double)s->n * (double)nb / n);
  s->n += nb;
}

static void merge_lse(rstate *s, double m, double sum, int flags) {
  s->flags |= flags;
  if (m == -INFINITY) return; /* nothing but -inf: contributes 0 */
  if (m > s->a) {
    s->b = s->b * exp(s->a - m) + sum;
    s->a = m;
  } else {
    s->b += sum * exp(m - s->a);
  }
}

/* Block steps written once for both domains (x is a float or an int64
 * block, FIELD the state's value of that domain): the extremes with index
 * take the first position of the block's extreme m when it is strictly
 * better than the held one (on ties the earlier index stays); ALL and ANY
 * test x[i] != 0. */
#define TAKE_EXTREME_INDEX(FIELD)                                   \
  if (s->idx < 0 || (mx ? m > s->FIELD : m < s->FIELD)) {          \
    for (int64_t i = 0; i < n; i++)                                 \
      if (x[i] == m) {                                              \
        s->FIELD = m;                                               \
        s->idx = idx0 + i;                                          \
        break;                                                      \
      }                                                             \
  }
#define ALL_ANY_CASES                                               \
  case NRT_OP_ALL: {                                                \
    int all = 1;                                                    \
    for (int64_t i = 0; i < n; i++) all &= x[i] != 0;               \
    s->i &= all;                                                    \
    break;                                                          \
  }                                                                 \
  case NRT_OP_ANY: {                                                \
    int any = 0;                                                    \
    for (int64_t i = 0; i < n; i++) any |= x[i] != 0;               \
    s->i |= any;                                                    \
    break;                                                          \
  }

RED_INLINE void acc_f32_impl(const red_plan *p, rstate *s, const float *x, int64_t n,
                             int64_t idx0, bool wide) {
  int nan;
  switch (p->op) {
  case NRT_OP_SUM:
  case NRT_OP_MEAN: s->a += nrt_sum_f64(x, n); break;
  case NRT_OP_PROD: {
    double a = s->a;
    for (int64_t i = 0; i < n; i++) a *= x[i];
    s->a = a;
    break;
  }
  case NRT_OP_AMAX: {
    float m = (wide ? block_max512(x, n, &nan) : block_max(x, n, &nan));
    if (nan) s->flags |= RS_NAN;
    if (m > s->a) s->a = m;
    break;
  }
  case NRT_OP_AMIN: {
    float m = (wide ? block_min512(x, n, &nan) : block_min(x, n, &nan));
    if (nan) s->flags |= RS_NAN;
    if (m < s->a) s->a = m;
    break;
  }
  case NRT_OP_MAX_WITH_INDEX:
  case NRT_OP_ARGMAX:
  case NRT_OP_MIN_WITH_INDEX:
  case NRT_OP_ARGMIN: {
    if (s->flags & RS_NAN) break; /* the first NaN stays the answer */
    bool mx = is_max_op(p->op);
    float m = mx ? (wide ? block_max512(x, n, &nan) : block_max(x, n, &nan)) : (wide ? block_min512(x, n, &nan) : block_min(x, n, &nan));
    if (nan) {
      for (int64_t i = 0; i < n; i++)
        if (x[i] != x[i]) {
          s->flags |= RS_NAN;
          s->a = x[i];
          s->idx = idx0 + i;
          break;
        }
      break;
    }
    TAKE_EXTREME_INDEX(a)
    break;
  }
  ALL_ANY_CASES
  case NRT_OP_VAR: {
    double mean = nrt_sum_f64(x, n) / (double)n;
    merge_var(s, n, mean, nrt_sumsq_f64(x, n, mean));
    break;
  }
  case NRT_OP_NORM: {
    double pp = p->p;
    if (pp == 0.0) {
      int64_t c = 0;
      for (int64_t i = 0; i < n; i++) c += x[i] != 0.0f;
      s->a += (double)c;
    } else if (pp == 1.0) {
      s->a += nrt_sumabs_f64(x, n);
    } else if (pp == 2.0) {
      s->a += nrt_sumsq_f64(x, n, 0.0);
    } else if (pp == INFINITY || pp == -INFINITY) {
      float m = pp > 0 ? -INFINITY : INFINITY;
      int any = 0;
      for (int64_t i = 0; i < n; i++) {
        float v = fabsf(x[i]);
        m = pp > 0 ? (v > m ? v : m) : (v < m ? v : m);
        any |= v != v;
      }
      if (any) s->flags |= RS_NAN;
      s->a = pp > 0 ? (m > s->a ? m : s->a) : (m < s->a ? m : s->a);
    } else {
      double a = 0;
      for (int64_t i = 0; i < n; i++) a += pow(fabs((double)x[i]), pp);
      s->a += a;
    }
    break;
  }
  case NRT_OP_LOGSUMEXP: {
    float m = (wide ? block_max512(x, n, &nan) : block_max(x, n, &nan));
    int flags = (nan ? RS_NAN : 0) | (m == INFINITY ? RS_POSINF : 0);
    double sum = 0;
    if (m != -INFINITY && m != INFINITY) {
      /* expf of a value <= 0 cannot overflow; the sum is double. */
      for (int64_t i = 0; i < n; i++) sum += (double)nrt_vexpf(x[i] - m);
    }
    merge_lse(s, m, sum, flags);
    break;
  }
  default: break;
  }
}

static void acc_f32_base(const red_plan *p, rstate *s, const float *x, int64_t n, int64_t idx0) {
  acc_f32_impl(p, s, x, n, idx0, false);
}
NRT_TARGET_AVX512 static void acc_f32_avx512(const red_plan *p, rstate *s, const float *x, int64_t n,
                                             int64_t idx0) {
  acc_f32_impl(p, s, x, n, idx0, true);
}

static void acc_f32(const red_plan *p, rstate *s, const float *x, int64_t n, int64_t idx0) {
  p->acc(p, s, x, n, idx0);
}

static void acc_i64(const red_plan *p, rstate *s, const int64_t *x, int64_t n, int64_t idx0) {
  switch (p->op) {
  case NRT_OP_SUM: {
    uint64_t a = 0;
    for (int64_t i = 0; i < n; i++) a += (uint64_t)x[i];
    s->i = nrt_wadd(s->i, (int64_t)a);
    break;
  }
  case NRT_OP_PROD:
    for (int64_t i = 0; i < n; i++) s->i = nrt_wmul(s->i, x[i]);
    break;
  case NRT_OP_AMAX: {
    int64_t m = s->i;
    for (int64_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
    s->i = m;
    break;
  }
  case NRT_OP_AMIN: {
    int64_t m = s->i;
    for (int64_t i = 0; i < n; i++) m = x[i] < m ? x[i] : m;
    s->i = m;
    break;
  }
  case NRT_OP_MAX_WITH_INDEX:
  case NRT_OP_ARGMAX:
  case NRT_OP_MIN_WITH_INDEX:
  case NRT_OP_ARGMIN: {
    bool mx = is_max_op(p->op);
    int64_t m = x[0];
    for (int64_t i = 1; i < n; i++) m = mx ? (x[i] > m ? x[i] : m) : (x[i] < m ? x[i] : m);
    TAKE_EXTREME_INDEX(i)
    break;
  }
  ALL_ANY_CASES
  default: break;
  }
}

/* t covers indices after s's. */
static void st_combine(const red_plan *p, rstate *s, const rstate *t) {
  switch (p->op) {
  case NRT_OP_SUM:
  case NRT_OP_MEAN: s->a += t->a; s->i = nrt_wadd(s->i, t->i); break;
  case NRT_OP_PROD: s->a *= t->a; s->i = nrt_wmul(s->i, t->i); break;
  case NRT_OP_AMAX:
    s->flags |= t->flags;
    if (t->a > s->a) s->a = t->a;
    if (t->i > s->i) s->i = t->i;
    break;
  case NRT_OP_AMIN:
    s->flags |= t->flags;
    if (t->a < s->a) s->a = t->a;
    if (t->i < s->i) s->i = t->i;
    break;
  case NRT_OP_MAX_WITH_INDEX:
  case NRT_OP_ARGMAX:
  case NRT_OP_MIN_WITH_INDEX:
  case NRT_OP_ARGMIN: {
    if (t->idx < 0 || (s->flags & RS_NAN)) break;
    bool mx = is_max_op(p->op), better;
    if (s->idx < 0 || (t->flags & RS_NAN)) better = true;
    else if (p->fdomain) better = mx ? t->a > s->a : t->a < s->a;
    else better = mx ? t->i > s->i : t->i < s->i;
    if (better) *s = *t;
    break;
  }
  case NRT_OP_ALL: s->i &= t->i; break;
  case NRT_OP_ANY: s->i |= t->i; break;
  case NRT_OP_VAR: merge_var(s, t->n, t->a, t->b); break;
  case NRT_OP_NORM:
    s->flags |= t->flags;
    if (p->p == INFINITY) s->a = t->a > s->a ? t->a : s->a;
    else if (p->p == -INFINITY) s->a = t->a < s->a ? t->a : s->a;
    else s->a += t->a;
    break;
  case NRT_OP_LOGSUMEXP: merge_lse(s, t->a, t->b, t->flags); break;
  default: break;
  }
}

/* Writes the finished state to the outputs at the given byte offsets. */
static void st_store(const red_plan *p, const rstate *s, const int64_t *off) {
  if (!p->fdomain) {
    switch (p->op) {
    case NRT_OP_ARGMAX:
    case NRT_OP_ARGMIN: nrt_store_i64(p->out[0] + off[0], 0, p->out_dt[0], &s->idx, 1); return;
    case NRT_OP_MAX_WITH_INDEX:
    case NRT_OP_MIN_WITH_INDEX:
      nrt_store_i64(p->out[0] + off[0], 0, p->out_dt[0], &s->i, 1);
      nrt_store_i64(p->out[1] + off[1], 0, p->out_dt[1], &s->idx, 1);
      return;
    default: nrt_store_i64(p->out[0] + off[0], 0, p->out_dt[0], &s->i, 1); return;
    }
  }
  double v = s->a;
  switch (p->op) {
  case NRT_OP_MEAN: v = s->a / (double)p->nred; break;
  case NRT_OP_AMAX:
  case NRT_OP_AMIN: v = (s->flags & RS_NAN) ? NAN : s->a; break;
  case NRT_OP_ARGMAX:
  case NRT_OP_ARGMIN: nrt_store_i64(p->out[0] + off[0], 0, p->out_dt[0], &s->idx, 1); return;
  case NRT_OP_MAX_WITH_INDEX:
  case NRT_OP_MIN_WITH_INDEX:
    nrt_store_f64(p->out[0] + off[0], 0, p->out_dt[0], &v, 1);
    nrt_store_i64(p->out[1] + off[1], 0, p->out_dt[1], &s->idx, 1);
    return;
  case NRT_OP_ALL:
  case NRT_OP_ANY: v = (double)s->i; break;
  case NRT_OP_VAR: {
    double dof = (double)s->n - p->l->scalars[0].f;
    v = s->b / (dof > 0.0 ? dof : 0.0);
    if (p->l->params[0]) v = sqrt(v);
    break;
  }
  case NRT_OP_NORM:
    if (s->flags & RS_NAN) v = NAN;
    else if (p->p == 2.0) v = sqrt(s->a);
    else if (p->p != 0.0 && p->p != 1.0 && p->p != INFINITY && p->p != -INFINITY)
      v = pow(s->a, 1.0 / p->p);
    break;
  case NRT_OP_LOGSUMEXP:
    if (s->flags & RS_NAN) v = NAN;
    else if (s->flags & RS_POSINF) v = INFINITY;
    else if (s->a == -INFINITY) v = -INFINITY;
    else v = s->a + log(s->b);
    break;
  default: break;
  }
  nrt_store_f64(p->out[0] + off[0], 0, p->out_dt[0], &v, 1);
}

/* ---- traversals -------------------------------------------------------------- */

/* Byte offsets of reduced position r in the input. */
static int64_t reduced_offset(const red_plan *p, int64_t r) {
  int64_t off = 0;
  for (int d = p->nr - 1; d >= 0; d--) {
    off += (r % p->rsize[d]) * p->rin[d];
    r /= p->rsize[d];
  }
  return off;
}

/* Offsets of kept index g over kept dims [0, nk_used). */
static void kept_offsets(const red_plan *p, int64_t g, int nk_used, int64_t *in_off, int64_t *out_off) {
  *in_off = 0;
  out_off[0] = out_off[1] = 0;
  for (int d = nk_used - 1; d >= 0; d--) {
    int64_t i = g % p->ksize[d];
    g /= p->ksize[d];
    *in_off += i * p->kin[d];
    out_off[0] += i * p->kout[0][d];
    out_off[1] += i * p->kout[1][d];
  }
}

/* Feeds reduced positions [r0, r1) of one output (input base `base`). */
static void feed_rows(const red_plan *p, rstate *s, const char *base, int64_t r0, int64_t r1) {
  union { float f[NRT_BLOCK]; int64_t i[NRT_BLOCK]; } buf;
  int64_t inner = p->rsize[p->nr - 1], st = p->rin[p->nr - 1];
  int64_t r = r0;
  while (r < r1) {
    int64_t j = r % inner;
    int64_t n = inner - j < r1 - r ? inner - j : r1 - r;
    const char *src = base + reduced_offset(p, r);
    if (p->fdomain && p->in_dt == NRT_FLOAT32 && st == 4) {
      /* read in place: the whole run in one call, rather than a call (and
       * a fold of the partial sums) per block, which cost a quarter of a
       * row sum's time */
      acc_f32(p, s, (const float *)src, n, r);
      r += n;
      continue;
    }
    for (int64_t b = 0; b < n; b += NRT_BLOCK) {
      int64_t m = n - b < NRT_BLOCK ? n - b : NRT_BLOCK;
      const char *q = src + b * st;
      if (p->fdomain) {
        const float *x = buf.f;
        if (p->in_dt == NRT_FLOAT32 && st == 4) x = (const float *)q;
        else nrt_load_f32(buf.f, q, st, p->in_dt, m);
        acc_f32(p, s, x, m, r + b);
      } else {
        const int64_t *x = buf.i;
        if (p->in_dt == NRT_INT64 && st == 8) x = (const int64_t *)q;
        else nrt_load_i64(buf.i, q, st, p->in_dt, m);
        acc_i64(p, s, x, m, r + b);
      }
    }
    r += n;
  }
}

/* Columns: nc outputs along the innermost kept dim, from input base `base`. */
static void feed_columns(const red_plan *p, rstate *s, int nc, const char *base, int64_t r0,
                         int64_t r1) {
  union {
    float f[RED_COLS][RED_ROWS];
    int64_t i[RED_COLS][RED_ROWS];
  } col;
  union { float f[RED_COLS]; int64_t i[RED_COLS]; } row;
  int64_t cst = p->kin[p->nk - 1];
  int64_t first = r0;
  int rows = 0;
  for (int64_t r = r0; r < r1; r++) {
    const char *src = base + reduced_offset(p, r);
    if (p->fdomain) {
      nrt_load_f32(row.f, src, cst, p->in_dt, nc);
      for (int c = 0; c < nc; c++) col.f[c][rows] = row.f[c];
    } else {
      nrt_load_i64(row.i, src, cst, p->in_dt, nc);
      for (int c = 0; c < nc; c++) col.i[c][rows] = row.i[c];
    }
    if (++rows == RED_ROWS || r + 1 == r1) {
      for (int c = 0; c < nc; c++) {
        if (p->fdomain) acc_f32(p, &s[c], col.f[c], rows, first);
        else acc_i64(p, &s[c], col.i[c], rows, first);
      }
      first = r + 1;
      rows = 0;
    }
  }
}

static bool vertical_op(const red_plan *p) {
  switch (p->op) {
  case NRT_OP_SUM: case NRT_OP_AMAX: case NRT_OP_AMIN: case NRT_OP_ALL: case NRT_OP_ANY: return true;
  case NRT_OP_MEAN: return p->fdomain;
  case NRT_OP_NORM: return p->p == 1.0 || p->p == 2.0;
  default: return false;
  }
}

/* Columns, vertical form: nc running values advance one input row at a
 * time, each loop vectorised across the columns. One array of running
 * values per tile (the op uses one of them), so a tile of RED_VCOLS
 * columns keeps its values in L1/L2 while the input streams past. */
typedef union vert_acc {
  double d[RED_VCOLS]; /* sums and norms, in double */
  float f[RED_VCOLS];  /* AMAX/AMIN: a NaN, once seen, stays */
  int64_t i[RED_VCOLS]; /* integer domain; ALL/ANY flags */
} vert_acc;

RED_INLINE void vert_init(const red_plan *p, vert_acc *v, int nc) {
  nrt_op op = p->op;
  if (p->fdomain && (op == NRT_OP_AMAX || op == NRT_OP_AMIN)) {
    for (int c = 0; c < nc; c++) v->f[c] = op == NRT_OP_AMAX ? -INFINITY : INFINITY;
  } else if (p->fdomain && op != NRT_OP_ALL && op != NRT_OP_ANY) {
    for (int c = 0; c < nc; c++) v->d[c] = 0;
  } else {
    int64_t init = op == NRT_OP_AMAX ? INT64_MIN : (op == NRT_OP_AMIN ? INT64_MAX : (op == NRT_OP_ALL));
    for (int c = 0; c < nc; c++) v->i[c] = init;
  }
}

/* Row r of the tile: where it starts in memory, or converted into buf
 * (float32) when its dtype has no direct loop below. */
RED_INLINE const void *vert_row(const red_plan *p, const char *base, int64_t r, int nc, bool direct, float *buf) {
  const char *src = base + reduced_offset(p, r);
  if (direct) return src;
  nrt_load_f32(buf, src, p->kin[p->nk - 1], p->in_dt, nc);
  return buf;
}

/* Four rows per step: each running value is loaded and stored once per
 * four input rows (added in row order, so the sums are the one-row
 * sums), which keeps the L1/L2 traffic of the running values below the
 * input's. */
#define VERT_ROWS 4

/* The float-domain steps over one dtype read in place (T its C type, CV
 * its conversion to float): unit-stride float32 and bfloat16 convert in
 * the loop, as a separate conversion pass would write and re-read a row
 * buffer of twice bfloat16's bytes. A NaN replaces the running extreme
 * and then stays: nothing compares greater (or less) than it, and a
 * later NaN is a NaN. */
#define VMAX(m, v) ((v) > (m)) | ((v) != (v)) ? (v) : (m)
#define VMIN(m, v) ((v) < (m)) | ((v) != (v)) ? (v) : (m)
#define VERT_FLOAT_LOOPS(T, CV)                                                                \
  for (; r + VERT_ROWS <= r1; r += VERT_ROWS) {                                                \
    const T *x0 = vert_row(p, base, r, nc, direct, buf.f[0]);                                  \
    const T *x1 = vert_row(p, base, r + 1, nc, direct, buf.f[1]);                              \
    const T *x2 = vert_row(p, base, r + 2, nc, direct, buf.f[2]);                              \
    const T *x3 = vert_row(p, base, r + 3, nc, direct, buf.f[3]);                              \
    switch (op) {                                                                              \
    case NRT_OP_SUM: case NRT_OP_MEAN:                                                         \
      for (int c = 0; c < nc; c++)                                                             \
        acc[c] = (((acc[c] + (double)CV(x0[c])) + (double)CV(x1[c])) + (double)CV(x2[c])) +    \
                 (double)CV(x3[c]);                                                            \
      break;                                                                                   \
    case NRT_OP_NORM:                                                                          \
      if (l1)                                                                                  \
        for (int c = 0; c < nc; c++)                                                           \
          acc[c] = (((acc[c] + fabs((double)CV(x0[c]))) + fabs((double)CV(x1[c]))) +           \
                    fabs((double)CV(x2[c]))) + fabs((double)CV(x3[c]));                        \
      else                                                                                     \
        for (int c = 0; c < nc; c++) {                                                         \
          double a = CV(x0[c]), b = CV(x1[c]), d = CV(x2[c]), e = CV(x3[c]);                  \
          acc[c] = (((acc[c] + a * a) + b * b) + d * d) + e * e;                               \
        }                                                                                      \
      break;                                                                                   \
    case NRT_OP_AMAX:                                                                          \
      for (int c = 0; c < nc; c++) {                                                           \
        float m = fm[c], a = CV(x0[c]), b = CV(x1[c]), d = CV(x2[c]), e = CV(x3[c]);          \
        m = VMAX(m, a);                                                                        \
        m = VMAX(m, b);                                                                        \
        m = VMAX(m, d);                                                                        \
        fm[c] = VMAX(m, e);                                                                    \
      }                                                                                        \
      break;                                                                                   \
    case NRT_OP_AMIN:                                                                          \
      for (int c = 0; c < nc; c++) {                                                           \
        float m = fm[c], a = CV(x0[c]), b = CV(x1[c]), d = CV(x2[c]), e = CV(x3[c]);          \
        m = VMIN(m, a);                                                                        \
        m = VMIN(m, b);                                                                        \
        m = VMIN(m, d);                                                                        \
        fm[c] = VMIN(m, e);                                                                    \
      }                                                                                        \
      break;                                                                                   \
    case NRT_OP_ALL:                                                                           \
      for (int c = 0; c < nc; c++)                                                             \
        im[c] &= (CV(x0[c]) != 0.0f) & (CV(x1[c]) != 0.0f) & (CV(x2[c]) != 0.0f) & (CV(x3[c]) != 0.0f); \
      break;                                                                                   \
    case NRT_OP_ANY:                                                                           \
      for (int c = 0; c < nc; c++)                                                             \
        im[c] |= (CV(x0[c]) != 0.0f) | (CV(x1[c]) != 0.0f) | (CV(x2[c]) != 0.0f) | (CV(x3[c]) != 0.0f); \
      break;                                                                                   \
    default: break;                                                                            \
    }                                                                                          \
  }                                                                                            \
  for (; r < r1; r++) {                                                                        \
    const T *x = vert_row(p, base, r, nc, direct, buf.f[0]);                                   \
    switch (op) {                                                                              \
    case NRT_OP_SUM: case NRT_OP_MEAN:                                                         \
      for (int c = 0; c < nc; c++) acc[c] += (double)CV(x[c]);                                 \
      break;                                                                                   \
    case NRT_OP_NORM:                                                                          \
      if (l1) for (int c = 0; c < nc; c++) acc[c] += fabs((double)CV(x[c]));                   \
      else for (int c = 0; c < nc; c++) acc[c] += (double)CV(x[c]) * (double)CV(x[c]);         \
      break;                                                                                   \
    case NRT_OP_AMAX:                                                                          \
      for (int c = 0; c < nc; c++) {                                                           \
        float a = CV(x[c]);                                                                    \
        fm[c] = VMAX(fm[c], a);                                                                \
      }                                                                                        \
      break;                                                                                   \
    case NRT_OP_AMIN:                                                                          \
      for (int c = 0; c < nc; c++) {                                                           \
        float a = CV(x[c]);                                                                    \
        fm[c] = VMIN(fm[c], a);                                                                \
      }                                                                                        \
      break;                                                                                   \
    case NRT_OP_ALL: for (int c = 0; c < nc; c++) im[c] &= CV(x[c]) != 0.0f; break;            \
    case NRT_OP_ANY: for (int c = 0; c < nc; c++) im[c] |= CV(x[c]) != 0.0f; break;            \
    default: break;                                                                            \
    }                                                                                          \
  }
#define VERT_AS_IS(v) (v)

/* Rows [r0, r1) into v. Inlined into a baseline and an AVX-512 build:
 * the double sums convert and add 8 lanes at a time in the wide one. */
RED_INLINE void vert_rows_impl(const red_plan *p, vert_acc *v, int nc, const char *base, int64_t r0,
                               int64_t r1) {
  union { float f[VERT_ROWS][RED_VCOLS]; int64_t i[RED_VCOLS]; } buf;
  int64_t cst = p->kin[p->nk - 1];
  nrt_op op = p->op;
  bool l1 = p->p == 1.0;
  double *acc = v->d;
  float *fm = v->f;
  int64_t *im = v->i;
  int64_t r = r0;
  if (p->fdomain) {
    if (p->in_dt == NRT_BFLOAT16 && cst == 2) {
      bool direct = true;
      VERT_FLOAT_LOOPS(uint16_t, nrt_k_bf16_to_f32)
    } else {
      bool direct = p->in_dt == NRT_FLOAT32 && cst == 4;
      VERT_FLOAT_LOOPS(float, VERT_AS_IS)
    }
    return;
  }
  for (; r < r1; r++) {
    const char *src = base + reduced_offset(p, r);
    const int64_t *x = buf.i;
    if (p->in_dt == NRT_INT64 && cst == 8) x = (const int64_t *)src;
    else nrt_load_i64(buf.i, src, cst, p->in_dt, nc);
    switch (op) {
    case NRT_OP_SUM: for (int c = 0; c < nc; c++) im[c] = (int64_t)((uint64_t)im[c] + (uint64_t)x[c]); break;
    case NRT_OP_AMAX: for (int c = 0; c < nc; c++) im[c] = x[c] > im[c] ? x[c] : im[c]; break;
    case NRT_OP_AMIN: for (int c = 0; c < nc; c++) im[c] = x[c] < im[c] ? x[c] : im[c]; break;
    case NRT_OP_ALL: for (int c = 0; c < nc; c++) im[c] &= x[c] != 0; break;
    case NRT_OP_ANY: for (int c = 0; c < nc; c++) im[c] |= x[c] != 0; break;
    default: break;
    }
  }
}

static void vert_rows_base(const red_plan *p, vert_acc *v, int nc, const char *base, int64_t r0, int64_t r1) {
  vert_rows_impl(p, v, nc, base, r0, r1);
}
NRT_TARGET_AVX512 static void vert_rows_avx512(const red_plan *p, vert_acc *v, int nc, const char *base,
                                               int64_t r0, int64_t r1) {
  vert_rows_impl(p, v, nc, base, r0, r1);
}

/* Column c's running value as a state. */
static void vert_state(const red_plan *p, const vert_acc *v, int c, rstate *s) {
  st_init(p, s);
  nrt_op op = p->op;
  if (!p->fdomain || op == NRT_OP_ALL || op == NRT_OP_ANY) {
    s->i = v->i[c];
  } else if (op == NRT_OP_AMAX || op == NRT_OP_AMIN) {
    s->a = v->f[c];
    if (v->f[c] != v->f[c]) s->flags |= RS_NAN;
  } else {
    s->a = v->d[c];
  }
}

static void run_task(const red_plan *p, int64_t task) {
  int64_t g = task / p->chunks, q = task % p->chunks;
  int64_t r0 = p->nred * q / p->chunks, r1 = p->nred * (q + 1) / p->chunks;
  int64_t in_off, out_off[2];
  rstate s[RED_COLS];
  if (!p->columns) {
    kept_offsets(p, g, p->nk, &in_off, out_off);
    st_init(p, &s[0]);
    feed_rows(p, &s[0], p->in + in_off, r0, r1);
    if (p->chunks == 1) st_store(p, &s[0], out_off);
    else p->partial[task] = s[0];
    return;
  }
  int64_t outer = g / p->ntiles, tile = g % p->ntiles;
  int64_t c0 = tile * p->tile, inner = p->ksize[p->nk - 1];
  int nc = (int)(inner - c0 < p->tile ? inner - c0 : p->tile);
  kept_offsets(p, outer, p->nk - 1, &in_off, out_off);
  in_off += c0 * p->kin[p->nk - 1];
  vert_acc v;
  if (p->vertical) {
    vert_init(p, &v, nc);
    if (p->wide) vert_rows_avx512(p, &v, nc, p->in + in_off, r0, r1);
    else vert_rows_base(p, &v, nc, p->in + in_off, r0, r1);
  } else {
    for (int c = 0; c < nc; c++) st_init(p, &s[c]);
    feed_columns(p, s, nc, p->in + in_off, r0, r1);
  }
  for (int c = 0; c < nc; c++) {
    /* vertical tiles are wider than s[] (only the non-vertical path uses it) */
    rstate vs;
    const rstate *st = &vs;
    if (p->vertical) vert_state(p, &v, c, &vs);
    else st = &s[c];
    if (p->chunks == 1) {
      int64_t o[2] = {out_off[0] + (c0 + c) * p->kout[0][p->nk - 1],
                      out_off[1] + (c0 + c) * p->kout[1][p->nk - 1]};
      st_store(p, st, o);
    } else {
      p->partial[task * p->tile + c] = *st;
    }
  }
}

static void red_range(void *ctx, int64_t begin, int64_t end) {
  for (int64_t t = begin; t < end; t++) run_task(ctx, t);
}

/* Merges the chunks of every group in index order and stores. */
static void finish_chunks(const red_plan *p) {
  int width = p->columns ? p->tile : 1;
  for (int64_t g = 0; g < p->groups; g++) {
    int64_t in_off, out_off[2], c0 = 0;
    int nc = 1;
    if (p->columns) {
      int64_t outer = g / p->ntiles, inner = p->ksize[p->nk - 1];
      c0 = (g % p->ntiles) * p->tile;
      nc = (int)(inner - c0 < p->tile ? inner - c0 : p->tile);
      kept_offsets(p, outer, p->nk - 1, &in_off, out_off);
    } else {
      kept_offsets(p, g, p->nk, &in_off, out_off);
    }
    for (int c = 0; c < nc; c++) {
      rstate s = p->partial[(g * p->chunks) * width + c];
      for (int64_t q = 1; q < p->chunks; q++)
        st_combine(p, &s, &p->partial[(g * p->chunks + q) * width + c]);
      int64_t o[2] = {out_off[0], out_off[1]};
      if (p->columns) {
        o[0] += (c0 + c) * p->kout[0][p->nk - 1];
        o[1] += (c0 + c) * p->kout[1][p->nk - 1];
      }
      st_store(p, &s, o);
    }
  }
}

/* ---- layout ----------------------------------------------------------------- */

/* Sorts dims (indices into launch dims) outermost-first by |input stride|
 * and merges neighbours the input (and outputs) step through evenly. */
static int arrange(const red_plan *p, const int *dims, int n, bool sort, int64_t *size,
                   int64_t *in_st, int64_t out_st[2][NRT_MAX_DIMS]) {
  const nrt_launch *l = p->l;
  int in_op = l->noutputs;
  int order[NRT_MAX_DIMS];
  for (int i = 0; i < n; i++) order[i] = dims[i];
  if (sort)
    for (int i = 1; i < n; i++)
      for (int j = i; j > 0 && llabs(l->operands[in_op].strides[order[j]]) >
                                   llabs(l->operands[in_op].strides[order[j - 1]]); j--) {
        int t = order[j];
        order[j] = order[j - 1];
        order[j - 1] = t;
      }
  int m = 0;
  for (int i = 0; i < n; i++) {
    int d = order[i];
    int64_t is = l->operands[in_op].strides[d];
    int64_t os0 = l->operands[0].strides[d], os1 = p->nout > 1 ? l->operands[1].strides[d] : 0;
    /* d is inner to dim m-1: merge when m-1 steps exactly over all of d */
    if (m > 0 && in_st[m - 1] == is * l->sizes[d] && out_st[0][m - 1] == os0 * l->sizes[d] &&
        out_st[1][m - 1] == os1 * l->sizes[d]) {
      size[m - 1] *= l->sizes[d];
      in_st[m - 1] = is;
      out_st[0][m - 1] = os0;
      out_st[1][m - 1] = os1;
      continue;
    }
    size[m] = l->sizes[d];
    in_st[m] = is;
    out_st[0][m] = os0;
    out_st[1][m] = os1;
    m++;
  }
  return m;
}

/* ---- reference: one element at a time, plain formulas ---------------------- */

static nrt_status reduce_reference(const red_plan *p, const int *kd, int nkd, const int *rd, int nrd) {
  const nrt_launch *l = p->l;
  int in_op = l->noutputs;
  for (int64_t g = 0; g < p->nkept; g++) {
    int64_t in_off = 0, out_off[2] = {0, 0}, rem = g;
    for (int i = nkd - 1; i >= 0; i--) {
      int d = kd[i];
      int64_t idx = rem % l->sizes[d];
      rem /= l->sizes[d];
      in_off += idx * l->operands[in_op].strides[d];
      out_off[0] += idx * l->operands[0].strides[d];
      if (p->nout > 1) out_off[1] += idx * l->operands[1].strides[d];
    }
    double sum = 0, prod = 1, best = NAN, mean = 0, m2 = 0, mx = -INFINITY;
    int64_t isum = 0, iprod = 1, ibest = 0, bidx = -1, all = 1, any = 0;
    bool nan = false;
    for (int pass = 0; pass < (p->op == NRT_OP_LOGSUMEXP ? 2 : 1); pass++) {
      for (int64_t r = 0; r < p->nred; r++) {
        int64_t off = in_off, rr = r;
        for (int i = nrd - 1; i >= 0; i--) {
          int d = rd[i];
          off += (rr % l->sizes[d]) * l->operands[in_op].strides[d];
          rr /= l->sizes[d];
        }
        const char *src = p->in + off;
        if (!p->fdomain) {
          int64_t v = nrt_ref_load_i64(src, p->in_dt);
          isum = nrt_wadd(isum, v);
          iprod = nrt_wmul(iprod, v);
          all &= v != 0;
          any |= v != 0;
          if (bidx < 0 || (is_max_op(p->op) ? v > ibest : v < ibest)) {
            ibest = v;
            bidx = r;
          }
          continue;
        }
        double v = (float)nrt_ref_load_f64(src, p->in_dt);
        if (pass == 1) {
          sum += exp(v - mx);
          continue;
        }
        sum += v;
        prod *= v;
        all &= v != 0;
        any |= v != 0;
        nan |= v != v;
        if (p->op == NRT_OP_VAR) { /* Welford */
          double d = v - mean;
          mean += d / (double)(r + 1);
          m2 += d * (v - mean);
        }
        if (p->op == NRT_OP_NORM) {
          double a = fabs(v), pp = p->p;
          if (pp == 0) m2 += a != 0;
          else if (pp == INFINITY) m2 = r == 0 || a > m2 ? a : m2;
          else if (pp == -INFINITY) m2 = r == 0 || a < m2 ? a : m2;
          else m2 += pow(a, pp);
        }
        if (v > mx) mx = v;
        bool better = is_max_op(p->op) ? v > best : v < best;
        if (bidx < 0 || (best == best && (v != v || better))) {
          best = v;
          bidx = r;
        }
      }
      if (p->op == NRT_OP_LOGSUMEXP && pass == 0) {
        if (nan || mx == INFINITY || mx == -INFINITY) break;
        sum = 0;
      }
    }
    rstate s;
    memset(&s, 0, sizeof s);
    s.idx = bidx;
    s.n = p->nred;
    switch (p->op) {
    case NRT_OP_SUM: case NRT_OP_MEAN: s.a = sum; s.i = isum; break;
    case NRT_OP_PROD: s.a = prod; s.i = iprod; break;
    case NRT_OP_ALL: s.i = all; break;
    case NRT_OP_ANY: s.i = any; break;
    case NRT_OP_VAR: s.a = mean; s.b = nan ? NAN : m2; break;
    case NRT_OP_NORM:
      s.a = m2;
      if (nan && (p->p == INFINITY || p->p == -INFINITY)) s.flags = RS_NAN;
      if (nan && p->p != 0.0) s.a = NAN; /* p = 0 counts NaN as nonzero */
      break;
    case NRT_OP_LOGSUMEXP:
      s.a = mx;
      s.b = sum;
      s.flags = (nan ? RS_NAN : 0) | (mx == INFINITY ? RS_POSINF : 0);
      break;
    default: s.a = best; s.i = ibest; s.flags = best != best ? RS_NAN : 0; break;
    }
    st_store(p, &s, out_off);
  }
  return NRT_SUCCESS;
}

/* ---- PROD p0 = 1: in the output dtype, in the CPU's order -------------------
 * PyTorch's CPU multiplies a product in its result dtype, rounding after
 * every multiply (float16 32768 * 32768 is inf there, and inf * 0 NaN),
 * in the order of ATen's binary_kernel_reduce_vec over the TensorIterator
 * this launch was built from (the descriptor's dim 0 is the iterator's,
 * the fastest; reduced dims come first). Each output starts at 1 and takes
 * its reduced elements with dim 0 fastest; a run along dim 0 that is
 * unit-stride and at least 4 vectors long (p1 = the CPU kernel's vector width in
 * bytes, 32 for its AVX2 and default builds) is grouped as that kernel groups
 * it: four vector accumulators loaded from the first 4 * lanes elements,
 * each later block of 4 * lanes multiplied lane-wise into them, then
 * (a0 * a1) * (a2 * a3) lane-wise, its lanes multiplied left to right, that
 * into the output, and the run's tail one element at a time. Rounding and
 * overflow depend on exactly that sequence, so both paths follow it: the
 * fast one over converted blocks, the reference one element at a time.
 * Input and output share a float16, bfloat16 or float32 dtype (the glue
 * converts first, as the CPU does). One thread per output: a split would
 * change the sequence. */
#define STEP_BLOCK 4096 /* elements converted at a time, a multiple of every 4 * lanes */
#define STEP_MAX_WIDTH 128 /* 4 * lanes for 16-bit elements in 64-byte vectors */

typedef struct step_plan {
  const nrt_launch *l;
  nrt_dtype dt;
  int in_op;
  int kd[NRT_MAX_DIMS], rd[NRT_MAX_DIMS], nkd, nrd;
  int64_t n0, st0; /* the innermost reduced dim's size and input stride (1, 0 when nothing is reduced) */
  int64_t width;   /* 4 * lanes; 0 when the innermost run is not grouped */
} step_plan;

static inline float step_round(nrt_dtype dt, float v) {
  switch (dt) {
  case NRT_FLOAT16: return nrt_k_f16_to_f32(nrt_k_f32_to_f16(v));
  case NRT_BFLOAT16: return nrt_k_bf16_to_f32(nrt_k_f32_to_bf16(v));
  default: return v;
  }
}

/* Byte offsets of output g's first input element and of the output. */
static void step_offsets(const step_plan *sp, int64_t g, int64_t *in_off, int64_t *out_off) {
  const nrt_launch *l = sp->l;
  *in_off = *out_off = 0;
  for (int i = sp->nkd - 1; i >= 0; i--) {
    int d = sp->kd[i];
    int64_t idx = g % l->sizes[d];
    g /= l->sizes[d];
    *in_off += idx * l->operands[sp->in_op].strides[d];
    *out_off += idx * l->operands[0].strides[d];
  }
}

/* Byte offset of the start of outer run r (dims rd[1..], rd[1] fastest). */
static int64_t step_run_offset(const step_plan *sp, int64_t r) {
  const nrt_launch *l = sp->l;
  int64_t off = 0;
  for (int i = 1; i < sp->nrd; i++) {
    int d = sp->rd[i];
    off += (r % l->sizes[d]) * l->operands[sp->in_op].strides[d];
    r /= l->sizes[d];
  }
  return off;
}

static int64_t step_runs(const step_plan *sp) {
  int64_t runs = 1;
  for (int i = 1; i < sp->nrd; i++) runs *= sp->l->sizes[sp->rd[i]];
  return runs;
}

/* Fast path: each run converted in blocks. */
static void step_range(void *ctx, int64_t begin, int64_t end) {
  const step_plan *sp = ctx;
  const nrt_launch *l = sp->l;
  nrt_dtype dt = sp->dt;
  int64_t n0 = sp->n0, st0 = sp->st0, runs = step_runs(sp);
  int64_t w = sp->width, lanes = w / 4;
  float buf[STEP_BLOCK], acc4[STEP_MAX_WIDTH];
  for (int64_t g = begin; g < end; g++) {
    int64_t in_off, out_off;
    step_offsets(sp, g, &in_off, &out_off);
    float acc = 1.0f;
    for (int64_t r = 0; r < runs; r++) {
      const char *src = (const char *)l->operands[sp->in_op].data + in_off + step_run_offset(sp, r);
      int64_t count = w ? n0 / w : 0, grouped = count * w;
      for (int64_t b = 0; b < grouped; b += STEP_BLOCK) {
        int64_t m = grouped - b < STEP_BLOCK ? grouped - b : STEP_BLOCK;
        nrt_load_f32(buf, src + b * st0, st0, dt, m);
        int64_t c0 = 0;
        if (b == 0) {
          for (int64_t k = 0; k < w; k++) acc4[k] = buf[k];
          c0 = w;
        }
        for (int64_t c = c0; c < m; c += w)
          for (int64_t k = 0; k < w; k++) acc4[k] = step_round(dt, acc4[k] * buf[c + k]);
      }
      if (count > 0) {
        for (int64_t k = 0; k < lanes; k++)
          acc4[k] = step_round(dt, step_round(dt, acc4[k] * acc4[lanes + k]) *
                                       step_round(dt, acc4[2 * lanes + k] * acc4[3 * lanes + k]));
        float lane = acc4[0];
        for (int64_t k = 1; k < lanes; k++) lane = step_round(dt, lane * acc4[k]);
        acc = step_round(dt, acc * lane);
      }
      for (int64_t b = grouped; b < n0; b += STEP_BLOCK) {
        int64_t m = n0 - b < STEP_BLOCK ? n0 - b : STEP_BLOCK;
        nrt_load_f32(buf, src + b * st0, st0, dt, m);
        for (int64_t i = 0; i < m; i++) acc = step_round(dt, acc * buf[i]);
      }
    }
    nrt_ref_store_f64((char *)l->operands[0].data + out_off, dt, acc);
  }
}

/* Reference: an element at a time, the same sequence written plainly. */
static void step_reference(const step_plan *sp, int64_t nkept) {
  const nrt_launch *l = sp->l;
  nrt_dtype dt = sp->dt;
  int64_t n0 = sp->n0, st0 = sp->st0, runs = step_runs(sp);
  int64_t w = sp->width, lanes = w / 4;
  for (int64_t g = 0; g < nkept; g++) {
    int64_t in_off, out_off;
    step_offsets(sp, g, &in_off, &out_off);
    float acc = 1.0f;
    for (int64_t r = 0; r < runs; r++) {
      const char *src = (const char *)l->operands[sp->in_op].data + in_off + step_run_offset(sp, r);
#define X(i) ((float)nrt_ref_load_f64(src + (i) * st0, dt))
      int64_t count = w ? n0 / w : 0;
      if (count > 0) {
        float a[STEP_MAX_WIDTH];
        for (int64_t k = 0; k < w; k++) a[k] = X(k);
        for (int64_t c = 1; c < count; c++)
          for (int64_t k = 0; k < w; k++) a[k] = step_round(dt, a[k] * X(c * w + k));
        float v[STEP_MAX_WIDTH / 4] = {0};
        for (int64_t k = 0; k < lanes; k++) {
          float lo = step_round(dt, a[k] * a[lanes + k]), hi = step_round(dt, a[2 * lanes + k] * a[3 * lanes + k]);
          v[k] = step_round(dt, lo * hi);
        }
        for (int64_t k = 1; k < lanes; k++) v[0] = step_round(dt, v[0] * v[k]);
        acc = step_round(dt, acc * v[0]);
      }
      for (int64_t i = count * w; i < n0; i++) acc = step_round(dt, acc * X(i));
#undef X
    }
    nrt_ref_store_f64((char *)l->operands[0].data + out_off, dt, acc);
  }
}

static nrt_status prod_stepwise(const red_plan *p, const int *kd, int nkd, const int *rd, int nrd) {
  const nrt_launch *l = p->l;
  nrt_dtype dt = p->out_dt[0];
  if (dt != NRT_FLOAT16 && dt != NRT_BFLOAT16 && dt != NRT_FLOAT32)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "PROD: p0 = 1 needs a float16, bfloat16 or float32 output, "
                           "got %s", nrt_dtype_name(dt));
  if (p->in_dt != dt)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "PROD: p0 = 1 needs the input in the output's dtype %s, got %s",
                           nrt_dtype_name(dt), nrt_dtype_name(p->in_dt));
  int64_t vbytes = l->params[1], es = (int64_t)nrt_dtype_size(dt);
  if (vbytes != 16 && vbytes != 32 && vbytes != 64)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "PROD: p1 = %lld is not a vector width of 16, 32 or 64 bytes",
                           (long long)vbytes);
  step_plan sp = {.l = l, .dt = dt, .in_op = l->noutputs, .nkd = nkd, .nrd = nrd};
  memcpy(sp.kd, kd, sizeof(int) * (size_t)nkd);
  memcpy(sp.rd, rd, sizeof(int) * (size_t)nrd);
  /* Grouped only when the iterator's dim 0 itself is the unit-stride run
   * (dims before the first reduced one can only be of size 1). */
  sp.n0 = 1;
  if (nrd > 0) {
    sp.n0 = l->sizes[rd[0]];
    sp.st0 = l->operands[sp.in_op].strides[rd[0]];
    bool dim0 = true;
    for (int d = 0; d < rd[0]; d++) dim0 = dim0 && l->sizes[d] == 1;
    int64_t width = 4 * (vbytes / es);
    if (dim0 && sp.st0 == es && sp.n0 >= width) sp.width = width;
  }
  if (nrt_kernels_reference()) {
    step_reference(&sp, p->nkept);
    return NRT_SUCCESS;
  }
  int64_t grain = p->nred >= RED_GRAIN ? 1 : RED_GRAIN / p->nred;
  nrt_parallel_for(p->nkept, grain, step_range, &sp);
  return NRT_SUCCESS;
}

/* ---- entry --------------------------------------------------------------------- */

nrt_status nrt_reduce_execute(const nrt_launch *l) {
  red_plan p = {.l = l};
  p.op = l->op;
  p.with_index = l->op == NRT_OP_MAX_WITH_INDEX || l->op == NRT_OP_MIN_WITH_INDEX ||
                 l->op == NRT_OP_ARGMAX || l->op == NRT_OP_ARGMIN;
  p.nout = l->noutputs;
  /* p1 = 1: var_mean / std_mean in the CPU's Welford order (welford.c) */
  if (l->op == NRT_OP_VAR && l->params[1] == 1) return nrt_reduce_welford(l);
  /* p1 = 1: a float vector norm in the CPU's accumulator and order (vnorm.c) */
  if (l->op == NRT_OP_NORM && l->params[1] == 1) return nrt_reduce_vnorm(l);
  int want_out = (l->op == NRT_OP_MAX_WITH_INDEX || l->op == NRT_OP_MIN_WITH_INDEX) ? 2 : 1;
  if (p.nout != want_out || l->ninputs != 1)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                           "%s: expected %d output(s) and 1 input", nrt_op_name(l->op), want_out);
  /* p0 = 1: the CPU's float summation order (cascade.c) */
  if ((l->op == NRT_OP_SUM || l->op == NRT_OP_MEAN) && l->params[0] == 1) return nrt_reduce_cascade(l);
  p.in = l->operands[p.nout].data;
  p.in_dt = l->operands[p.nout].dtype;
  for (int o = 0; o < p.nout; o++) {
    p.out[o] = l->operands[o].data;
    p.out_dt[o] = l->operands[o].dtype;
  }
  /* ALL/ANY test the input's own truth value: a float 0.5 is true even
   * when the caller's compute dtype is an integer one. */
  p.fdomain = (l->op == NRT_OP_ALL || l->op == NRT_OP_ANY) ? nrt_dtype_is_floating(p.in_dt)
                                                           : nrt_dtype_is_floating(l->compute_dtype);
  p.p = l->scalars[0].f;
  bool float_only = l->op == NRT_OP_MEAN || l->op == NRT_OP_VAR || l->op == NRT_OP_NORM ||
                    l->op == NRT_OP_LOGSUMEXP;
  if (float_only && !p.fdomain)
    return nrt_kernel_fail(NRT_ERROR_UNSUPPORTED, "%s: not supported for %s", nrt_op_name(l->op),
                           nrt_dtype_name(l->compute_dtype));

  int kd[NRT_MAX_DIMS], rd[NRT_MAX_DIMS], nkd = 0, nrd = 0;
  p.nkept = 1;
  p.nred = 1;
  for (int d = 0; d < l->ndim; d++) {
    bool reduced = l->sizes[d] != 1;
    for (int o = 0; o < p.nout; o++) reduced = reduced && l->operands[o].strides[d] == 0;
    if (reduced) {
      rd[nrd++] = d;
      p.nred *= l->sizes[d];
    } else if (l->sizes[d] != 1) {
      kd[nkd++] = d;
      p.nkept *= l->sizes[d];
    }
  }
  if (p.nkept == 0) return NRT_SUCCESS;
  if (p.nred == 0) {
    bool has_identity = !(p.with_index || l->op == NRT_OP_AMAX || l->op == NRT_OP_AMIN ||
                          (l->op == NRT_OP_NORM && (p.p < 0 || isinf(p.p))));
    if (!has_identity)
      return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: reduction over zero elements has no identity",
                             nrt_op_name(l->op));
  }
  if (l->op == NRT_OP_PROD && (l->params[0] != 0 && l->params[0] != 1))
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "PROD: p0 = %lld is neither 0 nor 1", (long long)l->params[0]);
  if (l->op == NRT_OP_PROD && l->params[0] == 1 && p.nred > 0) return prod_stepwise(&p, kd, nkd, rd, nrd);
  if (nrt_kernels_reference() || p.nred == 0) {
    /* With nothing to reduce, every output is the fresh state. */
    if (p.nred == 0) {
      p.nred = 0;
      rstate s;
      st_init(&p, &s);
      if (l->op == NRT_OP_LOGSUMEXP) s.a = -INFINITY;
      for (int64_t g = 0; g < p.nkept; g++) {
        int64_t off[2] = {0, 0}, rem = g;
        for (int i = nkd - 1; i >= 0; i--) {
          int64_t idx = rem % l->sizes[kd[i]];
          rem /= l->sizes[kd[i]];
          for (int o = 0; o < p.nout; o++) off[o] += idx * l->operands[o].strides[kd[i]];
        }
        st_store(&p, &s, off);
      }
      return NRT_SUCCESS;
    }
    return reduce_reference(&p, kd, nkd, rd, nrd);
  }

  /* Index ops count in the given order of the reduced dims. */
  p.wide = nrt_kernels_isa() >= NRT_ISA_AVX512;
  p.acc = p.wide ? acc_f32_avx512 : acc_f32_base;
  p.nk = arrange(&p, kd, nkd, true, p.ksize, p.kin, p.kout);
  int64_t dummy[2][NRT_MAX_DIMS];
  p.nr = arrange(&p, rd, nrd, !(p.with_index && nrd > 1), p.rsize, p.rin, dummy);
  if (p.nr == 0) { /* every reduced size was 1 (cannot happen: nred > 0 needs a dim) */
    p.nr = 1;
    p.rsize[0] = 1;
    p.rin[0] = 0;
  }
  p.columns = p.nk > 0 && llabs(p.kin[p.nk - 1]) < llabs(p.rin[p.nr - 1]);
  /* Short reductions (sum over a last dim of 4) cost more per output than
   * per element in the rows form; the vertical form amortises that over
   * a tile of outputs even though its loads are strided. */
  if (!p.columns && p.nk > 0 && p.nred <= 32 && vertical_op(&p)) p.columns = true;
  if (p.columns) {
    p.vertical = vertical_op(&p);
    p.tile = p.vertical ? RED_VCOLS : RED_COLS;
    if (p.ksize[p.nk - 1] < p.tile) p.tile = (int)p.ksize[p.nk - 1]; /* partials per task: no more than the columns */
    p.ntiles = (p.ksize[p.nk - 1] + p.tile - 1) / p.tile;
    p.groups = p.nkept / p.ksize[p.nk - 1] * p.ntiles;
  } else {
    p.groups = p.nkept;
  }
  int threads = nrt_pool_threads();
  /* Few groups: cut each group's reduced range too, keeping chunks of at
   * least RED_GRAIN elements. */
  p.chunks = 1;
  int64_t width = p.columns ? (p.ksize[p.nk - 1] < p.tile ? p.ksize[p.nk - 1] : p.tile) : 1;
  int64_t group_work = p.nred * width;
  if (p.groups < 2 * threads && group_work >= 2 * RED_GRAIN) {
    int64_t want = (4 * threads + p.groups - 1) / p.groups;
    int64_t most = group_work / RED_GRAIN;
    p.chunks = want < most ? want : most;
    if (p.chunks > p.nred) p.chunks = p.nred;
    if (p.chunks < 1) p.chunks = 1;
  }
  int64_t ntasks = p.groups * p.chunks;
  if (p.chunks > 1) {
    int width = p.columns ? p.tile : 1;
    p.partial = malloc(sizeof(rstate) * (size_t)(ntasks * width));
    if (!p.partial)
      return nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for partial results", nrt_op_name(l->op));
  }
  int64_t per_task = (p.nkept / p.groups) * (p.nred / p.chunks);
  if (per_task < 1) per_task = 1;
  int64_t grain = per_task >= RED_GRAIN ? 1 : RED_GRAIN / (per_task > 0 ? per_task : 1);
  nrt_parallel_for(ntasks, grain, red_range, &p);
  if (p.chunks > 1) {
    finish_chunks(&p);
    free(p.partial);
  }
  return NRT_SUCCESS;
}
