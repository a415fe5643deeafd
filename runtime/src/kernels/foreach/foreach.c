/* The FOREACH engine: one launch over a whole list of tensors
 * (nrt/ops/foreach.h has the table layout and the modes).
 *
 * Fast path: the rows' elements are laid end to end in one global element
 * space, cut into work items of FE_CHUNK elements; the kernel pool takes
 * the items in ranges (nrt_parallel_for), so a list of many small tensors
 * and a list of a few large ones both spread over every thread. An item
 * walks the rows it overlaps; each row segment runs in blocks of
 * NRT_BLOCK: inputs are used in place when they are float32, else
 * converted into small buffers; a scalar operand is a block filled with
 * its value; the result is converted into the output. NORM keeps one
 * partial per (row, item) and combines them in row order after the
 * parallel part, so its result does not depend on the thread count.
 *
 * The reference path walks every row element by element on the calling
 * thread, converting through dtype.c and computing with libm. */
#pragma GCC optimize("O3,no-trapping-math,no-math-errno")
#include <stdlib.h>
#include "kernels/foreach/foreach.h"

/* Elements per work item: large enough to amortise the item's setup,
 * small enough that a list of a few tensors still splits. */
#define FE_CHUNK 16384
/* Work items per parallel task, at least (PW_GRAIN's 32768 elements). */
#define FE_GRAIN 2

static inline const int64_t *table_row(const nrt_launch *l, int64_t r) {
  return (const int64_t *)l->operands[0].data + r * nrt_foreach_row_width(l->op);
}
static inline char *row_ptr(const int64_t *row, int k) { return (char *)(intptr_t)row[k]; }
static inline double row_scalar(const int64_t *row) {
  double d;
  memcpy(&d, &row[NRT_FOREACH_SCALAR], sizeof d);
  return d;
}

static bool op_in_family(nrt_op op) {
  return (int)op > NRT_OP_FOREACH_BEFORE_ && (int)op < NRT_OP_FOREACH_END_;
}
static bool is_op(nrt_op op, int id) { return (int)op == id; }
static bool optim_op(nrt_op op) { return is_op(op, NRT_OP_FOREACH_ADAM) || is_op(op, NRT_OP_FOREACH_SGD); }

static bool float_dtype(nrt_dtype dt) { return dt == NRT_FLOAT32 || dt == NRT_BFLOAT16 || dt == NRT_FLOAT16; }
static bool real_dtype(nrt_dtype dt) { return (unsigned)dt < NRT_DTYPE_COUNT && !nrt_dtype_is_complex(dt); }

/* The table pointers a row of this launch must have when it has elements. */
static unsigned needed_slots(const nrt_launch *l, const fe_kernel *k) {
  unsigned need = 1u << NRT_FOREACH_OUT;
  if (is_op(l->op, NRT_OP_FOREACH_ZERO)) return need;
  if (!k) return need | 1u << NRT_FOREACH_IN0; /* COPY, NORM */
  for (int i = 0; i < k->ninputs; i++)
    if (!(l->params[0] != NRT_FOREACH_MODE_LIST && k->scalar == i)) need |= 1u << (NRT_FOREACH_IN0 + i);
  return need;
}

nrt_status nrt_foreach_validate(const nrt_launch *l) {
  const char *name = nrt_op_name(l->op);
  if (!op_in_family(l->op)) return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "foreach: %s is not a FOREACH op", name);
  if (l->ndim != 1 || l->sizes[0] < 0)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: sizes must be {rows}, got ndim %d", name, l->ndim);
  int64_t rows = l->sizes[0];
  if (l->noutputs != 1 || l->operands[0].dtype != NRT_INT64 || (rows > 0 && !l->operands[0].data))
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: operand 0 must be the INT64 list table", name);
  if (optim_op(l->op)) return nrt_fe_optim_validate(l);
  const fe_kernel *k = nrt_fe_kernel(l->op);
  int64_t mode = l->params[0];
  int scalar = k ? k->scalar : FE_NONE;
  bool list = mode == NRT_FOREACH_MODE_LIST;
  if (mode < NRT_FOREACH_MODE_LIST || mode > NRT_FOREACH_MODE_TENSOR || (scalar == FE_NONE && !list) ||
      (scalar == FE_VALUE && list))
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: mode p0 = %lld is not one this op takes", name,
                           (long long)mode);
  bool tensor = mode == NRT_FOREACH_MODE_TENSOR;
  if (l->ninputs != (tensor ? 1 : 0) || (tensor && (!l->operands[1].data || !real_dtype(l->operands[1].dtype))))
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                           "%s: %s", name, tensor ? "TENSOR mode needs operand 1, a real one-element tensor"
                                                  : "only TENSOR mode has an input operand");
  nrt_dtype dt = l->compute_dtype, p1 = (nrt_dtype)l->params[1];
  bool ok;
  if (is_op(l->op, NRT_OP_FOREACH_ZERO)) ok = real_dtype(dt);
  else if (is_op(l->op, NRT_OP_FOREACH_COPY)) ok = real_dtype(dt) && (p1 == dt || (float_dtype(dt) && float_dtype(p1)));
  else if (is_op(l->op, NRT_OP_FOREACH_NORM)) ok = float_dtype(dt) && (float_dtype(p1) || p1 == NRT_FLOAT64);
  else ok = float_dtype(dt);
  if (!ok)
    return nrt_kernel_fail(NRT_ERROR_UNSUPPORTED, "%s: not supported for %s (p1 %s)", name, nrt_dtype_name(dt),
                           real_dtype(p1) ? nrt_dtype_name(p1) : "-");
  unsigned need = needed_slots(l, k);
  bool norm = is_op(l->op, NRT_OP_FOREACH_NORM);
  for (int64_t r = 0; r < rows; r++) {
    const int64_t *row = table_row(l, r);
    if (row[NRT_FOREACH_NUMEL] < 0)
      return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: row %lld has %lld elements", name, (long long)r,
                             (long long)row[NRT_FOREACH_NUMEL]);
    if (row[NRT_FOREACH_NUMEL] == 0 && !norm) continue;
    for (int s = NRT_FOREACH_OUT; s <= NRT_FOREACH_IN2; s++) {
      bool wanted = (need >> s) & 1u;
      if (s != NRT_FOREACH_OUT && row[NRT_FOREACH_NUMEL] == 0) wanted = false;
      if (wanted && !row[s])
        return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: row %lld has a NULL %s pointer", name, (long long)r,
                               s == NRT_FOREACH_OUT ? "output" : "input");
    }
  }
  return NRT_SUCCESS;
}

/* ---- the plan ------------------------------------------------------------------ */

/* A NORM partial: a sum, count or extreme in double, and whether a NaN
 * was seen (the +-inf norms, whose extremes skip NaN). */
typedef struct fe_partial {
  double v;
  int nan;
} fe_partial;

typedef struct fe_plan {
  const nrt_launch *l;
  const fe_kernel *k;
  fe_fn fn;           /* the ISA's build (or scalar_f32) */
  bool wide;          /* AVX-512 builds */
  int64_t rows, total;
  int64_t *start;     /* rows + 1: each row's first element in the global space */
  int64_t mode;
  double tensor_value; /* TENSOR mode: the operand's value, as float32 */
  fe_args args;
  nrt_dtype dt, in0_dt, out_dt;
  double p;           /* NORM order */
  fe_partial *partial; /* NORM: one per (row, item it overlaps) */
  int64_t *part_base;  /* NORM: rows; the first partial of each row */
  fe_optim optim;      /* ADAM, SGD */
} fe_plan;

/* The value of the mode's scalar for row `row` (as a double: POW's scalar
 * form compares the exponent at full precision, like POW_SCALAR). */
static double scalar_of(const fe_plan *p, const int64_t *row) {
  switch (p->mode) {
  case NRT_FOREACH_MODE_SCALAR: return p->l->scalars[1].f;
  case NRT_FOREACH_MODE_ROW: return row_scalar(row);
  case NRT_FOREACH_MODE_TENSOR: return p->tensor_value;
  default: return 0.0;
  }
}

/* ---- norms ------------------------------------------------------------------------ */

typedef void (*norm_fn)(fe_partial *s, const float *x, int64_t n, double p);

#define NORM_BODY                                                                       \
  if (p == 2.0) {                                                                       \
    s->v += nrt_sumsq_f64(x, n, 0.0);                                                   \
  } else if (p == 1.0) {                                                                \
    s->v += nrt_sumabs_f64(x, n);                                                       \
  } else if (p == 0.0) {                                                                \
    int64_t c = 0;                                                                      \
    for (int64_t i = 0; i < n; i++) c += x[i] != 0.0f;                                  \
    s->v += (double)c;                                                                  \
  } else if (p == INFINITY || p == -INFINITY) {                                         \
    float m = p > 0 ? -INFINITY : INFINITY;                                             \
    int any = 0;                                                                        \
    for (int64_t i = 0; i < n; i++) {                                                   \
      float a = fabsf(x[i]);                                                            \
      m = p > 0 ? (a > m ? a : m) : (a < m ? a : m);                                    \
      any |= a != a;                                                                    \
    }                                                                                   \
    s->nan |= any;                                                                      \
    s->v = p > 0 ? (m > s->v ? m : s->v) : (m < s->v ? m : s->v);                       \
  } else {                                                                              \
    double a = 0;                                                                       \
    for (int64_t i = 0; i < n; i++) a += pow(fabs((double)x[i]), p);                    \
    s->v += a;                                                                          \
  }

static void norm_block(fe_partial *s, const float *x, int64_t n, double p) { NORM_BODY }
NRT_TARGET_AVX512 static void norm_block_avx512(fe_partial *s, const float *x, int64_t n, double p) { NORM_BODY }

static fe_partial norm_identity(double p) { return (fe_partial){p == -INFINITY ? INFINITY : 0.0, 0}; }

static void norm_merge(fe_partial *s, const fe_partial *t, double p) {
  s->nan |= t->nan;
  if (p == INFINITY) s->v = t->v > s->v ? t->v : s->v;
  else if (p == -INFINITY) s->v = t->v < s->v ? t->v : s->v;
  else s->v += t->v;
}

/* An empty row gives 0 (the glue sends +-inf norms of empty tensors, which
 * PyTorch refuses, to the single-tensor op). */
static double norm_finish(const fe_partial *s, double p, int64_t numel) {
  if (numel == 0) return 0.0;
  if (s->nan) return NAN;
  if (p == 2.0) return sqrt(s->v);
  if (p != 0.0 && p != 1.0 && p != INFINITY && p != -INFINITY) return pow(s->v, 1.0 / p);
  return s->v;
}

/* ---- one row segment, fast path ----------------------------------------------- */

/* Elements [a, b) of row `row` of an elementwise op. */
static void run_elementwise(const fe_plan *p, const int64_t *row, int64_t a, int64_t b) {
  union {
    float f[4][NRT_BLOCK];
  } buf;
  float bcast[NRT_BLOCK];
  const fe_kernel *k = p->k;
  fe_args args = p->args;
  bool scalar_input = p->mode != NRT_FOREACH_MODE_LIST && k->scalar >= 1;
  if (p->mode != NRT_FOREACH_MODE_LIST) {
    double s = scalar_of(p, row);
    if (k->scalar == FE_VALUE) args.v = (float)s;
    args.e = s;
    if (scalar_input)
      for (int i = 0; i < NRT_BLOCK; i++) bcast[i] = (float)s;
  }
  nrt_dtype dt = p->dt;
  size_t es = nrt_dtype_size(dt);
  bool direct = dt == NRT_FLOAT32;
  char *out = row_ptr(row, NRT_FOREACH_OUT);
  for (int64_t j = a; j < b; j += NRT_BLOCK) {
    int64_t m = b - j < NRT_BLOCK ? b - j : NRT_BLOCK;
    const float *in[3] = {NULL, NULL, NULL};
    for (int i = 0; i < k->ninputs; i++) {
      if (scalar_input && k->scalar == i) {
        in[i] = bcast;
        continue;
      }
      const char *src = row_ptr(row, NRT_FOREACH_IN0 + i) + j * (int64_t)es;
      if (direct) {
        in[i] = (const float *)src;
      } else {
        nrt_load_f32(buf.f[i + 1], src, (int64_t)es, dt, m);
        in[i] = buf.f[i + 1];
      }
    }
    char *dst = out + j * (int64_t)es;
    float *o = direct ? (float *)dst : buf.f[0];
    p->fn(o, in[0], in[1], in[2], m, &args);
    if (!direct) nrt_store_f32(dst, (int64_t)es, dt, o, m);
  }
}

static void run_copy(const fe_plan *p, const int64_t *row, int64_t a, int64_t b) {
  size_t os = nrt_dtype_size(p->dt), is = nrt_dtype_size(p->in0_dt);
  char *out = row_ptr(row, NRT_FOREACH_OUT);
  const char *in = row_ptr(row, NRT_FOREACH_IN0);
  if (p->in0_dt == p->dt) {
    memmove(out + a * (int64_t)os, in + a * (int64_t)os, (size_t)(b - a) * os);
    return;
  }
  float buf[NRT_BLOCK];
  for (int64_t j = a; j < b; j += NRT_BLOCK) {
    int64_t m = b - j < NRT_BLOCK ? b - j : NRT_BLOCK;
    nrt_load_f32(buf, in + j * (int64_t)is, (int64_t)is, p->in0_dt, m);
    nrt_store_f32(out + j * (int64_t)os, (int64_t)os, p->dt, buf, m);
  }
}

static void run_norm(const fe_plan *p, const int64_t *row, int64_t a, int64_t b, fe_partial *s) {
  float buf[NRT_BLOCK];
  size_t es = nrt_dtype_size(p->dt);
  const char *in = row_ptr(row, NRT_FOREACH_IN0);
  norm_fn f = p->wide ? norm_block_avx512 : norm_block;
  for (int64_t j = a; j < b; j += NRT_BLOCK) {
    int64_t m = b - j < NRT_BLOCK ? b - j : NRT_BLOCK;
    const float *x = (const float *)(in + j * (int64_t)es);
    if (p->dt != NRT_FLOAT32) {
      nrt_load_f32(buf, (const char *)x, (int64_t)es, p->dt, m);
      x = buf;
    }
    f(s, x, m, p->p);
  }
}

/* The last row starting at or before element e (rows are never empty
 * there: an empty row starts where the next one does). */
static int64_t row_of(const fe_plan *p, int64_t e) {
  int64_t lo = 0, hi = p->rows - 1;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo + 1) / 2;
    if (p->start[mid] <= e) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

static void fe_range(void *ctx, int64_t begin, int64_t end) {
  const fe_plan *p = ctx;
  int op = (int)p->l->op;
  for (int64_t item = begin; item < end; item++) {
    int64_t e0 = item * FE_CHUNK, e1 = e0 + FE_CHUNK < p->total ? e0 + FE_CHUNK : p->total;
    for (int64_t r = row_of(p, e0); e0 < e1; r++) {
      int64_t rs = p->start[r], re = p->start[r + 1];
      if (re <= e0) continue;
      int64_t a = e0 - rs, b = (e1 < re ? e1 : re) - rs;
      const int64_t *row = table_row(p->l, r);
      if (op == NRT_OP_FOREACH_ZERO) {
        size_t es = nrt_dtype_size(p->dt);
        memset(row_ptr(row, NRT_FOREACH_OUT) + a * (int64_t)es, 0, (size_t)(b - a) * es);
      } else if (op == NRT_OP_FOREACH_COPY) {
        run_copy(p, row, a, b);
      } else if (op == NRT_OP_FOREACH_NORM) {
        fe_partial *s = &p->partial[p->part_base[r] + item - rs / FE_CHUNK];
        *s = norm_identity(p->p);
        run_norm(p, row, a, b, s);
      } else if (optim_op(p->l->op)) {
        nrt_fe_optim_run(&p->optim, row, a, b);
      } else {
        run_elementwise(p, row, a, b);
      }
      e0 = rs + b;
    }
  }
}

/* ---- reference: one element at a time ------------------------------------------ */

static float ref_load(const int64_t *row, int slot, nrt_dtype dt, int64_t i) {
  return (float)nrt_ref_load_f64(row_ptr(row, slot) + i * (int64_t)nrt_dtype_size(dt), dt);
}

static void ref_row(const fe_plan *p, const int64_t *row) {
  const nrt_launch *l = p->l;
  int op = (int)l->op;
  int64_t n = row[NRT_FOREACH_NUMEL];
  size_t os = nrt_dtype_size(op == NRT_OP_FOREACH_NORM ? p->out_dt : p->dt);
  char *out = row_ptr(row, NRT_FOREACH_OUT);
  if (op == NRT_OP_FOREACH_ZERO) {
    for (int64_t i = 0; i < n; i++) memset(out + i * (int64_t)os, 0, os);
  } else if (op == NRT_OP_FOREACH_COPY) {
    const char *in = row_ptr(row, NRT_FOREACH_IN0);
    size_t is = nrt_dtype_size(p->in0_dt);
    for (int64_t i = 0; i < n; i++) {
      if (p->in0_dt == p->dt) memcpy(out + i * (int64_t)os, in + i * (int64_t)is, os);
      else nrt_ref_store_f64(out + i * (int64_t)os, p->dt, nrt_ref_load_f64(in + i * (int64_t)is, p->in0_dt));
    }
  } else if (op == NRT_OP_FOREACH_NORM) {
    fe_partial s = norm_identity(p->p);
    for (int64_t i = 0; i < n; i++) {
      double a = fabs((double)ref_load(row, NRT_FOREACH_IN0, p->dt, i));
      if (p->p == INFINITY || p->p == -INFINITY) {
        s.nan |= a != a;
        if (a == a) s.v = p->p > 0 ? fmax(s.v, a) : fmin(s.v, a);
      } else if (p->p == 0.0) {
        s.v += a != 0.0;
      } else if (p->p == 1.0) {
        s.v += a;
      } else if (p->p == 2.0) {
        s.v += a * a;
      } else {
        s.v += pow(a, p->p);
      }
    }
    nrt_ref_store_f64(out, p->out_dt, norm_finish(&s, p->p, n));
  } else {
    const fe_kernel *k = p->k;
    fe_fn f = k->f32_ref ? k->f32_ref : k->f32;
    fe_args args = p->args;
    bool scalar_input = false;
    float sv = 0.0f;
    if (p->mode != NRT_FOREACH_MODE_LIST) {
      double s = scalar_of(p, row);
      sv = (float)s;
      args.v = sv;
      args.e = s;
      scalar_input = k->scalar >= 1;
      if (k->scalar_f32) f = k->scalar_f32;
    }
    for (int64_t i = 0; i < n; i++) {
      float in[3] = {0, 0, 0}, o = 0;
      for (int j = 0; j < k->ninputs; j++)
        in[j] = scalar_input && k->scalar == j ? sv : ref_load(row, NRT_FOREACH_IN0 + j, p->dt, i);
      f(&o, &in[0], &in[1], &in[2], 1, &args);
      nrt_ref_store_f64(out + i * (int64_t)os, p->dt, o);
    }
  }
}

/* ---- entry -------------------------------------------------------------------------- */

nrt_status nrt_foreach_execute(const nrt_launch *l) {
  nrt_status st = nrt_foreach_validate(l);
  if (st != NRT_SUCCESS) return st;
  fe_plan p = {.l = l, .k = nrt_fe_kernel(l->op), .rows = l->sizes[0], .mode = l->params[0], .dt = l->compute_dtype};
  p.in0_dt = is_op(l->op, NRT_OP_FOREACH_COPY) ? (nrt_dtype)l->params[1] : p.dt;
  p.out_dt = is_op(l->op, NRT_OP_FOREACH_NORM) ? (nrt_dtype)l->params[1] : p.dt;
  p.p = l->scalars[0].f;
  p.args = (fe_args){.alpha = (float)l->scalars[0].f, .v = 0.0f, .e = 0.0, .dt = p.dt};
  bool optim = optim_op(l->op);
  if (optim && !nrt_fe_optim_prepare(&p.optim, l, nrt_kernels_isa() >= NRT_ISA_AVX512)) return NRT_SUCCESS;
  if (p.mode == NRT_FOREACH_MODE_TENSOR && !optim) {
    float v;
    nrt_load_f32(&v, l->operands[1].data, 0, l->operands[1].dtype, 1);
    /* As the single-tensor op reads a 0-d tensor operand: converted to the
     * list's dtype (the pointwise engine's rule, pointwise.c), except by mul
     * and div, whose CPU kernels read it in float32, and where it is a
     * scalar argument of the single-tensor op (POW's exponent, ADDCMUL and
     * ADDCDIV's value), kept in float32 as those are. */
    if (!is_op(l->op, NRT_OP_FOREACH_MUL) && !is_op(l->op, NRT_OP_FOREACH_DIV) && !is_op(l->op, NRT_OP_FOREACH_POW) &&
        !is_op(l->op, NRT_OP_FOREACH_ADDCMUL) && !is_op(l->op, NRT_OP_FOREACH_ADDCDIV)) {
      if (p.dt == NRT_FLOAT16 && l->operands[1].dtype != NRT_FLOAT16) v = nrt_k_f16_to_f32(nrt_k_f32_to_f16(v));
      if (p.dt == NRT_BFLOAT16 && l->operands[1].dtype != NRT_BFLOAT16) v = nrt_k_bf16_to_f32(nrt_k_f32_to_bf16(v));
    }
    p.tensor_value = v;
  }
  if (p.rows == 0) return NRT_SUCCESS;

  if (nrt_kernels_reference()) {
    for (int64_t r = 0; r < p.rows; r++) {
      if (optim) nrt_fe_optim_ref_row(&p.optim, table_row(l, r));
      else ref_row(&p, table_row(l, r));
    }
    return NRT_SUCCESS;
  }

  p.wide = nrt_kernels_isa() >= NRT_ISA_AVX512;
  if (p.k) {
    p.fn = p.k->f32;
    if (p.mode != NRT_FOREACH_MODE_LIST && p.k->scalar_f32) p.fn = p.k->scalar_f32;
    else if (p.wide && p.k->f32_avx512) p.fn = p.k->f32_avx512;
  }
  p.start = malloc((size_t)(p.rows + 1) * sizeof *p.start);
  if (!p.start) return nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: host out of memory", nrt_op_name(l->op));
  p.start[0] = 0;
  for (int64_t r = 0; r < p.rows; r++) p.start[r + 1] = p.start[r] + table_row(l, r)[NRT_FOREACH_NUMEL];
  p.total = p.start[p.rows];
  int64_t items = nrt_cdiv(p.total, FE_CHUNK);
  bool norm = is_op(l->op, NRT_OP_FOREACH_NORM);
  if (norm) {
    p.part_base = malloc((size_t)p.rows * sizeof *p.part_base);
    int64_t nparts = 0;
    for (int64_t r = 0; r < p.rows; r++) {
      p.part_base[r] = nparts;
      if (p.start[r + 1] > p.start[r]) nparts += (p.start[r + 1] - 1) / FE_CHUNK - p.start[r] / FE_CHUNK + 1;
    }
    p.partial = malloc((size_t)(nparts > 0 ? nparts : 1) * sizeof *p.partial);
    if (!p.part_base || !p.partial) {
      free(p.start);
      free(p.part_base);
      free(p.partial);
      return nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: host out of memory", nrt_op_name(l->op));
    }
  }
  if (items > 0) nrt_parallel_for(items, FE_GRAIN, fe_range, &p);
  if (norm) {
    for (int64_t r = 0; r < p.rows; r++) {
      const int64_t *row = table_row(l, r);
      int64_t n = row[NRT_FOREACH_NUMEL];
      fe_partial s = norm_identity(p.p);
      int64_t parts = n > 0 ? (p.start[r + 1] - 1) / FE_CHUNK - p.start[r] / FE_CHUNK + 1 : 0;
      for (int64_t i = 0; i < parts; i++) norm_merge(&s, &p.partial[p.part_base[r] + i], p.p);
      double v = norm_finish(&s, p.p, n);
      nrt_store_f64(row_ptr(row, NRT_FOREACH_OUT), 0, p.out_dt, &v, 1);
    }
    free(p.part_base);
    free(p.partial);
  }
  free(p.start);
  return NRT_SUCCESS;
}
