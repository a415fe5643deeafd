/* Family SEGMENT: SEGMENT_REDUCE and SEGMENT_REDUCE_BACKWARD
 * (nrt/ops/segment.h). The segment bounds are validated serially first
 * (the first bad value is the one reported, nothing is written on
 * failure) and turned into a table of starts; then every (outer row,
 * segment) pair is an independent task that owns its output row (forward)
 * or its rows of the data gradient (backward). Values are float32 inside,
 * in data order, so results do not depend on the thread count. The fast
 * path moves whole inner rows through the block loaders; the reference
 * path goes element by element through dtype.c with the same arithmetic. */
#include <math.h>
#include <stdlib.h>
#include "kernels/common/common.h"
#include "kernels/segment/segment.h"
#include "nrt/ops/segment.h"

#define SEG_GRAIN_WORK 16384 /* elements of work per pool task, at least */

typedef struct seg_ctx {
  const nrt_launch *l;
  int64_t O, S, I, L;
  int red;
  bool has_init;
  float init;      /* initial, rounded to the output dtype */
  int64_t *starts; /* [O][S + 1]: segment s of row o is [starts[s], starts[s + 1]) */
  bool reference;
  bool oom; /* a task could not get scratch memory */
} seg_ctx;

/* Operand numbers. */
enum { FW_OUT = 0, FW_DATA = 1, FW_BOUNDS = 2 };
enum { BW_GDATA = 0, BW_GRAD = 1, BW_OUT = 2, BW_DATA = 3, BW_BOUNDS = 4 };

static const char *red_name(int red) {
  static const char *const names[] = {"sum", "mean", "max", "min", "prod"};
  return red >= 0 && red <= NRT_SEG_PROD ? names[red] : "?";
}

static inline const char *at3(const nrt_operand *o, int64_t i, int64_t j, int64_t k) {
  return (const char *)o->data + i * o->strides[0] + j * o->strides[1] + k * o->strides[2];
}

/* Inner row [n] of a 3-d operand at (i, j, 0). */
static void load_row(float *dst, const nrt_operand *o, int64_t i, int64_t j, int64_t n, bool reference) {
  if (reference) {
    for (int64_t k = 0; k < n; k++) dst[k] = (float)nrt_ref_load_f64(at3(o, i, j, k), o->dtype);
  } else {
    nrt_load_f32(dst, at3(o, i, j, 0), o->strides[2], o->dtype, n);
  }
}

static void store_row(const nrt_operand *o, int64_t i, int64_t j, const float *src, int64_t n, bool reference) {
  if (reference) {
    for (int64_t k = 0; k < n; k++) nrt_ref_store_f64((char *)at3(o, i, j, k), o->dtype, src[k]);
  } else {
    nrt_store_f32((char *)at3(o, i, j, 0), o->strides[2], o->dtype, src, n);
  }
}

static int64_t grain_for(int64_t work_per_item) {
  if (work_per_item < 1) work_per_item = 1;
  return work_per_item >= SEG_GRAIN_WORK ? 1 : SEG_GRAIN_WORK / work_per_item;
}

/* Checks the bounds operand and fills c->starts. */
static nrt_status build_starts(seg_ctx *c, int bounds_k) {
  const nrt_launch *l = c->l;
  const nrt_operand *b = &l->operands[bounds_k];
  bool lengths = l->params[1] != 0;
  for (int64_t o = 0; o < c->O; o++) {
    int64_t *st = c->starts + o * (c->S + 1);
    const char *row = (const char *)b->data + o * b->strides[0];
    if (lengths) {
      st[0] = 0;
      for (int64_t s = 0; s < c->S; s++) {
        int64_t len = nrt_ref_load_i64(row + s * b->strides[1], b->dtype);
        if (len < 0)
          return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "segment_reduce(): lengths contains negative value %lld",
                                 (long long)len);
        if (len > c->L - st[s])
          return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                                 "segment_reduce(): the lengths of row %lld sum past data.size(axis) = %lld",
                                 (long long)o, (long long)c->L);
        st[s + 1] = st[s] + len;
      }
    } else {
      for (int64_t s = 0; s <= c->S; s++) {
        int64_t v = nrt_ref_load_i64(row + s * b->strides[1], b->dtype);
        if (v < 0 || v > c->L)
          return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                                 "segment_reduce(): offset %lld is out of range [0, %lld] (data.size(axis))",
                                 (long long)v, (long long)c->L);
        if (s > 0 && v < st[s - 1])
          return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                                 "segment_reduce(): offsets must be non-decreasing, got %lld after %lld", (long long)v,
                                 (long long)st[s - 1]);
        st[s] = v;
      }
    }
  }
  return NRT_SUCCESS;
}

static float identity_of(int red) {
  switch (red) {
  case NRT_SEG_MAX: return -INFINITY;
  case NRT_SEG_MIN: return INFINITY;
  case NRT_SEG_PROD: return 1.0f;
  default: return 0.0f;
  }
}

/* ---- forward ------------------------------------------------------------------ */

/* acc[k] = acc[k] (op) row[k]; max/min let a NaN in and keep it. */
static void combine(int red, float *acc, const float *row, int64_t n) {
  switch (red) {
  case NRT_SEG_SUM:
  case NRT_SEG_MEAN:
    for (int64_t k = 0; k < n; k++) acc[k] += row[k];
    break;
  case NRT_SEG_PROD:
    for (int64_t k = 0; k < n; k++) acc[k] *= row[k];
    break;
  case NRT_SEG_MAX:
    for (int64_t k = 0; k < n; k++)
      if (isnan(row[k]) || row[k] > acc[k]) acc[k] = row[k];
    break;
  case NRT_SEG_MIN:
    for (int64_t k = 0; k < n; k++)
      if (isnan(row[k]) || row[k] < acc[k]) acc[k] = row[k];
    break;
  default: break;
  }
}

static void forward_range(void *ctx, int64_t begin, int64_t end) {
  seg_ctx *c = ctx;
  const nrt_operand *out = &c->l->operands[FW_OUT], *data = &c->l->operands[FW_DATA];
  size_t n = (size_t)(c->I > 0 ? c->I : 1);
  float *acc = malloc(2 * n * sizeof(float));
  if (!acc) {
    c->oom = true;
    return;
  }
  float *row = acc + n;
  float start_value = c->has_init ? c->init : identity_of(c->red);
  for (int64_t t = begin; t < end; t++) {
    int64_t o = t / c->S, s = t % c->S;
    const int64_t *st = c->starts + o * (c->S + 1);
    int64_t len = st[s + 1] - st[s];
    for (int64_t k = 0; k < c->I; k++) acc[k] = start_value;
    for (int64_t j = st[s]; j < st[s + 1]; j++) {
      load_row(row, data, o, j, c->I, c->reference);
      combine(c->red, acc, row, c->I);
    }
    if (c->red == NRT_SEG_MEAN) {
      /* an empty segment without initial has no mean; a NaN sum stays NaN */
      for (int64_t k = 0; k < c->I; k++) {
        if (len == 0 && !c->has_init)
          acc[k] = NAN;
        else if (len > 0 && !isnan(acc[k]))
          acc[k] /= (float)len;
      }
    }
    store_row(out, o, s, acc, c->I, c->reference);
  }
  free(acc);
}

/* ---- backward ----------------------------------------------------------------- */

/* Gradient of one segment of one outer row, written row by row. The
 * scratch holds g (grad), y (the forward's result), x (a data row), gi (a
 * gradient row) and cnt (max/min ties), I floats each. */
static void backward_segment(const seg_ctx *c, int64_t o, int64_t s, float *scratch) {
  const nrt_launch *l = c->l;
  const nrt_operand *gd = &l->operands[BW_GDATA], *grad = &l->operands[BW_GRAD], *out = &l->operands[BW_OUT],
                    *data = &l->operands[BW_DATA];
  int64_t I = c->I;
  float *g = scratch, *y = g + I, *x = y + I, *gi = x + I, *cnt = gi + I;
  const int64_t *st = c->starts + o * (c->S + 1);
  int64_t a = st[s], b = st[s + 1], len = b - a;
  if (len == 0) return;
  load_row(g, grad, o, s, I, c->reference);
  switch (c->red) {
  case NRT_SEG_SUM:
  case NRT_SEG_MEAN:
    if (c->red == NRT_SEG_MEAN)
      for (int64_t k = 0; k < I; k++) g[k] /= (float)len;
    for (int64_t j = a; j < b; j++) store_row(gd, o, j, g, I, c->reference);
    break;
  case NRT_SEG_MAX:
  case NRT_SEG_MIN:
    load_row(y, out, o, s, I, c->reference);
    for (int64_t k = 0; k < I; k++) cnt[k] = 0.0f;
    for (int64_t j = a; j < b; j++) {
      load_row(x, data, o, j, I, c->reference);
      for (int64_t k = 0; k < I; k++)
        if (isnan(x[k]) || x[k] == y[k]) cnt[k] += 1.0f;
    }
    for (int64_t j = a; j < b; j++) {
      load_row(x, data, o, j, I, c->reference);
      for (int64_t k = 0; k < I; k++) {
        bool hit = isnan(x[k]) || x[k] == y[k];
        /* ATen shares the gradient among ties only where it is positive;
         * matching it keeps the two backends' gradients equal. */
        gi[k] = !hit ? 0.0f : (cnt[k] >= 2.0f && g[k] > 0.0f ? g[k] / cnt[k] : g[k]);
      }
      store_row(gd, o, j, gi, I, c->reference);
    }
    break;
  case NRT_SEG_PROD: {
    load_row(y, out, o, s, I, c->reference);
    float init_prod = c->has_init ? c->init : 1.0f;
    for (int64_t k = 0; k < I; k++) y[k] *= g[k];
    for (int64_t j = a; j < b; j++) {
      load_row(x, data, o, j, I, c->reference);
      for (int64_t k = 0; k < I; k++) {
        if (!isnan(x[k]) && x[k] != 0.0f) {
          gi[k] = y[k] / x[k];
          continue;
        }
        /* out / x is undefined here: multiply the others out instead */
        float excl = init_prod;
        for (int64_t m = a; m < b; m++)
          if (m != j) excl *= (float)nrt_ref_load_f64(at3(data, o, m, k), data->dtype);
        gi[k] = g[k] * excl;
      }
      store_row(gd, o, j, gi, I, c->reference);
    }
    break;
  }
  default: break;
  }
}

static void backward_range(void *ctx, int64_t begin, int64_t end) {
  seg_ctx *c = ctx;
  const nrt_operand *gd = &c->l->operands[BW_GDATA];
  size_t n = (size_t)(c->I > 0 ? c->I : 1);
  float *scratch = calloc(6 * n, sizeof(float));
  if (!scratch) {
    c->oom = true;
    return;
  }
  float *zeros = scratch + 5 * n; /* stays zero */
  for (int64_t t = begin; t < end; t++) {
    int64_t o = t / c->S, s = t % c->S;
    const int64_t *st = c->starts + o * (c->S + 1);
    /* rows before the first and after the last segment belong to no
     * segment: the first and last tasks of the row clear them */
    if (s == 0)
      for (int64_t j = 0; j < st[0]; j++) store_row(gd, o, j, zeros, c->I, c->reference);
    if (s == c->S - 1)
      for (int64_t j = st[c->S]; j < c->L; j++) store_row(gd, o, j, zeros, c->I, c->reference);
    backward_segment(c, o, s, scratch);
  }
  free(scratch);
}

/* ---- entry points --------------------------------------------------------------- */

static nrt_status setup(seg_ctx *c, const nrt_launch *l, int bounds_k) {
  const char *name = nrt_op_name(l->op);
  if (l->noutputs != 1)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expected 1 output, got %d", name, l->noutputs);
  if (l->ndim != 4)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: sizes must be {O, S, I, L}, got ndim %d", name, l->ndim);
  for (int k = 0; k < l->noutputs + l->ninputs; k++) {
    nrt_dtype dt = l->operands[k].dtype;
    bool ok = k == bounds_k ? dt >= NRT_UINT8 && dt <= NRT_INT64 : nrt_dtype_is_floating(dt);
    if (!ok)
      return nrt_kernel_fail(NRT_ERROR_UNSUPPORTED, "%s: not supported for %s (operand %d)", name, nrt_dtype_name(dt),
                             k);
  }
  *c = (seg_ctx){.l = l, .O = l->sizes[0], .S = l->sizes[1], .I = l->sizes[2], .L = l->sizes[3],
                 .red = (int)l->params[0], .has_init = l->params[2] != 0, .reference = nrt_kernels_reference()};
  if (c->O < 0 || c->S < 0 || c->I < 0 || c->L < 0)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: negative size", name);
  if (l->params[0] < NRT_SEG_SUM || l->params[0] > NRT_SEG_PROD)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: unknown reduction %lld", name, (long long)l->params[0]);
  if (c->has_init) {
    /* ATen converts initial to the data's dtype before reducing */
    char tmp[8];
    nrt_ref_store_f64(tmp, l->operands[0].dtype, l->scalars[0].f);
    c->init = (float)nrt_ref_load_f64(tmp, l->operands[0].dtype);
  }
  c->starts = malloc((size_t)(c->O * (c->S + 1) + 1) * sizeof(int64_t));
  if (!c->starts)
    return nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for %lld segment bounds", name,
                           (long long)(c->O * (c->S + 1)));
  nrt_status st = build_starts(c, bounds_k);
  if (st != NRT_SUCCESS) {
    free(c->starts);
    c->starts = NULL;
  }
  return st;
}

static nrt_status run(seg_ctx *c, nrt_range_fn fn) {
  int64_t items = c->O * c->S;
  if (items > 0) {
    if (c->reference) {
      fn(c, 0, items);
    } else {
      int64_t per_item = (c->L / (c->S > 0 ? c->S : 1) + 1) * (c->I + 1);
      nrt_parallel_for(items, grain_for(per_item), fn, c);
    }
  }
  free(c->starts);
  if (c->oom)
    return nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY, "%s (%s): out of host memory for %lld-wide rows",
                           nrt_op_name(c->l->op), red_name(c->red), (long long)c->I);
  return NRT_SUCCESS;
}

nrt_status nrt_segment_reduce_execute(const nrt_launch *l) {
  seg_ctx c;
  nrt_status st = setup(&c, l, FW_BOUNDS);
  if (st != NRT_SUCCESS) return st;
  return run(&c, forward_range);
}

nrt_status nrt_segment_reduce_backward_execute(const nrt_launch *l) {
  seg_ctx c;
  nrt_status st = setup(&c, l, BW_BOUNDS);
  if (st != NRT_SUCCESS) return st;
  if (c.S == 0 && c.I > 0) {
    /* no segments: the gradient is zero everywhere */
    float *zeros = calloc((size_t)c.I, sizeof(float));
    if (!zeros) {
      free(c.starts);
      return nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", nrt_op_name(l->op));
    }
    for (int64_t o = 0; o < c.O; o++)
      for (int64_t j = 0; j < c.L; j++) store_row(&l->operands[BW_GDATA], o, j, zeros, c.I, c.reference);
    free(zeros);
  }
  return run(&c, backward_range);
}
