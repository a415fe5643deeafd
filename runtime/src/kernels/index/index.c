/* Index kernels (NRT_KIND_INDEX): data-dependent addressing (advanced
 * indexing, gather/scatter, nonzero, sort) and the index-
 * generating factories (arange, linspace, tril/triu). Operand layouts are
 * in nrt/launch.h.
 *
 * Ops that only move values (INDEX_GATHER, INDEX_PUT without accumulate,
 * GATHER, SCATTER assign and amax/amin, TRIANGLE, SORT) copy element bytes,
 * so int64 and float64 stay bit-exact; arithmetic (accumulate, scatter
 * add/multiply) runs in the launch's compute domain: float32 when
 * compute_dtype is floating, int64 (wrapping) otherwise.
 *
 * Writes that may collide (INDEX_PUT, SCATTER) run serially in iteration
 * order, so duplicates resolve deterministically: the last write wins and
 * sums accumulate in order. The other ops split across the kernel pool.
 *
 * Each op has a plain reference path (element at a time, pointers from the
 * linear index, dtype.c's conversions) selected by nrt_kernels_reference();
 * the fast paths walk runs along the last dim and copy whole runs where the
 * index is constant along them (index_select, embedding). */
#include <stdatomic.h>
#include <stdlib.h>
#include "kernels/common/common.h"
#include "kernels/common/cx.h"
#include "kernels/index/index.h"
#include "nrt/ops/index.h"

/* Elements per parallel chunk, at least: below this the pool's hand-off
 * costs more than the copy. */
#define INDEX_GRAIN 16384

/* Multi-index operand positions. */
enum { ADV_OUT = 0, ADV_SRC = 1, ADV_IDX0 = 2 };

/* SCATTER reductions (p0), as in launch.h. */
enum { RED_ASSIGN = 0, RED_ADD = 1, RED_MUL = 2, RED_MEAN_SUM = 3, RED_AMAX = 4, RED_AMIN = 5 };

static int64_t launch_numel(const nrt_launch *l) {
  int64_t n = 1;
  for (int d = 0; d < l->ndim; d++) n *= l->sizes[d];
  return n;
}

/* ---- traversal -------------------------------------------------------------
 * A run is a stretch of consecutive elements along the last dim of sizes:
 * fn gets the operands' pointers at its first element, their byte strides
 * along the dim, its length and the linear (row-major) index of its first
 * element. Operands [first, first + nops) of the launch are walked; fn
 * returns nonzero to stop (an index out of range). */
typedef int (*run_fn)(void *ctx, char *const *ptr, const int64_t *st, int64_t n, int64_t linear);

static int for_each_run(const nrt_launch *l, int first, int nops, int64_t begin, int64_t end,
                        run_fn fn, void *ctx) {
  if (begin >= end) return 0;
  const nrt_operand *op = l->operands + first;
  char *p[NRT_MAX_OPERANDS];
  int64_t st[NRT_MAX_OPERANDS];
  int nd = l->ndim;
  if (nd == 0) {
    for (int k = 0; k < nops; k++) {
      p[k] = op[k].data;
      st[k] = 0;
    }
    return fn(ctx, p, st, 1, 0);
  }
  int64_t coord[NRT_MAX_DIMS], r = begin;
  for (int d = nd - 1; d >= 0; d--) {
    coord[d] = r % l->sizes[d];
    r /= l->sizes[d];
  }
  for (int k = 0; k < nops; k++) {
    p[k] = op[k].data;
    st[k] = op[k].strides[nd - 1];
    for (int d = 0; d < nd; d++) p[k] += coord[d] * op[k].strides[d];
  }
  int64_t i = begin, last = l->sizes[nd - 1];
  for (;;) {
    int64_t n = last - coord[nd - 1];
    if (n > end - i) n = end - i;
    int rc = fn(ctx, p, st, n, i);
    if (rc) return rc;
    i += n;
    if (i >= end) return 0;
    /* the run ended at the end of its row: back to column 0, carry */
    for (int k = 0; k < nops; k++) p[k] -= coord[nd - 1] * st[k];
    coord[nd - 1] = 0;
    for (int d = nd - 2; d >= 0; d--) {
      coord[d]++;
      for (int k = 0; k < nops; k++) p[k] += op[k].strides[d];
      if (coord[d] < l->sizes[d]) break;
      for (int k = 0; k < nops; k++) p[k] -= coord[d] * op[k].strides[d];
      coord[d] = 0;
    }
  }
}

typedef struct par_job {
  const nrt_launch *l;
  int first, nops;
  run_fn fn;
  void *ctx;
  atomic_int failed;
} par_job;

static void par_range(void *arg, int64_t begin, int64_t end) {
  par_job *j = arg;
  if (atomic_load_explicit(&j->failed, memory_order_relaxed)) return;
  if (for_each_run(j->l, j->first, j->nops, begin, end, j->fn, j->ctx))
    atomic_store_explicit(&j->failed, 1, memory_order_relaxed);
}

/* for_each_run over all elements on the kernel pool; false if a run
 * failed. fn must only touch what its own elements own. */
static bool run_parallel(const nrt_launch *l, int first, int nops, run_fn fn, void *ctx) {
  par_job j = {.l = l, .first = first, .nops = nops, .fn = fn, .ctx = ctx};
  atomic_init(&j.failed, 0);
  nrt_parallel_for(launch_numel(l), INDEX_GRAIN, par_range, &j);
  return !atomic_load(&j.failed);
}

/* Reference traversal: operand k's element at linear index i. */
static char *elem_ptr(const nrt_launch *l, int k, int64_t i) {
  char *p = l->operands[k].data;
  for (int d = l->ndim - 1; d >= 0; d--) {
    p += (i % l->sizes[d]) * l->operands[k].strides[d];
    i /= l->sizes[d];
  }
  return p;
}

/* ---- element moves -------------------------------------------------------
 * Same dtype: the bytes. Otherwise a conversion through int64 (both
 * integral) or double (exact for every stored float type). */
static void convert_elem(char *dst, nrt_dtype ddt, const char *src, nrt_dtype sdt) {
  if (ddt == sdt) memcpy(dst, src, nrt_dtype_size(ddt));
  else if (nrt_dtype_is_floating(ddt) || nrt_dtype_is_floating(sdt))
    nrt_ref_store_f64(dst, ddt, nrt_ref_load_f64(src, sdt));
  else nrt_ref_store_i64(dst, ddt, nrt_ref_load_i64(src, sdt));
}

typedef struct mover {
  nrt_dtype ddt, sdt;
  int64_t es; /* element size when ddt == sdt */
  bool same;
} mover;

static mover make_mover(nrt_dtype ddt, nrt_dtype sdt) {
  mover m = {ddt, sdt, (int64_t)nrt_dtype_size(ddt), ddt == sdt};
  return m;
}

static inline void move_elem(const mover *m, char *dst, const char *src) {
  if (!m->same) {
    convert_elem(dst, m->ddt, src, m->sdt);
    return;
  }
  switch (m->es) { /* constant sizes: one load and one store each */
  case 1: memcpy(dst, src, 1); break;
  case 2: memcpy(dst, src, 2); break;
  case 4: memcpy(dst, src, 4); break;
  default: memcpy(dst, src, 8); break;
  }
}

#define MOVE_LOOP(T)                                                          \
  for (int64_t j = 0; j < n; j++) memcpy(dst + j * dst_st, src + j * src_st, sizeof(T))

static void move_run(const mover *m, char *dst, int64_t dst_st, const char *src, int64_t src_st,
                     int64_t n) {
  if (!m->same) {
    for (int64_t j = 0; j < n; j++) convert_elem(dst + j * dst_st, m->ddt, src + j * src_st, m->sdt);
    return;
  }
  if (dst_st == m->es && src_st == m->es) {
    memmove(dst, src, (size_t)(n * m->es));
    return;
  }
  switch (m->es) {
  case 1: MOVE_LOOP(uint8_t); break;
  case 2: MOVE_LOOP(uint16_t); break;
  case 4: MOVE_LOOP(uint32_t); break;
  default: MOVE_LOOP(uint64_t); break;
  }
}

/* Zero is all-zero bytes in every dtype (+0.0 for the floats). */
static void zero_run(char *dst, int64_t st, int64_t es, int64_t n) {
  if (st == es) {
    memset(dst, 0, (size_t)(n * es));
    return;
  }
  for (int64_t j = 0; j < n; j++) memset(dst + j * st, 0, (size_t)es);
}

/* One step of an accumulating write: *dst (op)= *src in the compute
 * domain; amax/amin keep the winner's bytes and propagate NaN as
 * PyTorch's scatter_reduce does (self < src ? src : self, NaN src wins). */
static inline void reduce_elem(int red, bool fdomain, const mover *m, char *dst, const char *src) {
  switch (red) {
  case RED_ADD:
  case RED_MEAN_SUM:
  case RED_MUL:
    if (fdomain) {
      float a, b;
      if (m->ddt == NRT_FLOAT32 && m->sdt == NRT_FLOAT32) {
        memcpy(&a, dst, 4);
        memcpy(&b, src, 4);
        a = red == RED_MUL ? a * b : a + b;
        memcpy(dst, &a, 4);
        return;
      }
      a = (float)nrt_ref_load_f64(dst, m->ddt);
      b = (float)nrt_ref_load_f64(src, m->sdt);
      nrt_ref_store_f64(dst, m->ddt, red == RED_MUL ? a * b : a + b);
    } else {
      int64_t a = nrt_ref_load_i64(dst, m->ddt), b = nrt_ref_load_i64(src, m->sdt);
      nrt_ref_store_i64(dst, m->ddt, red == RED_MUL ? nrt_wmul(a, b) : nrt_wadd(a, b));
    }
    return;
  case RED_AMAX:
  case RED_AMIN: {
    bool take;
    if (fdomain) {
      double a = nrt_ref_load_f64(dst, m->ddt), b = nrt_ref_load_f64(src, m->sdt);
      take = isnan(b) || (red == RED_AMAX ? a < b : b < a);
    } else {
      int64_t a = nrt_ref_load_i64(dst, m->ddt), b = nrt_ref_load_i64(src, m->sdt);
      take = red == RED_AMAX ? a < b : b < a;
    }
    if (take) move_elem(m, dst, src);
    return;
  }
  default: move_elem(m, dst, src); return;
  }
}

/* ---- indices ---------------------------------------------------------------- */

/* How an out-of-range index is reported: the CPU raises IndexError for
 * advanced indexing, take/put and most of index_select, but RuntimeError
 * (a plain TORCH_CHECK) for gather/scatter and for index_select along dim 1
 * of a >1-d self (its check_indexarray_range path); the status says which
 * (NRT_ERROR_OUT_OF_RANGE -> IndexError) and the message is the CPU's. */
typedef enum bad_kind {
  BAD_ADVANCED = 0,   /* IndexError "index i is out of bounds for dimension d with size s" */
  BAD_SELECT,         /* IndexError "index out of range in self" (index_select, embedding) */
  BAD_SELECT_BOUNDS,  /* RuntimeError "INDICES element is out of DATA bounds" */
  BAD_GATHER_SCATTER, /* RuntimeError "index i is out of bounds for dimension d with size s" */
} bad_kind;

typedef struct bad_index {
  int64_t value, size;
  int dim;
  bad_kind kind;
} bad_index;

static nrt_status bad_index_error(const bad_index *b) {
  long long v = (long long)b->value, n = (long long)b->size;
  switch (b->kind) {
  case BAD_SELECT:
    return nrt_kernel_fail(NRT_ERROR_OUT_OF_RANGE, "index out of range in self (index %lld, size %lld)", v, n);
  case BAD_SELECT_BOUNDS:
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "INDICES element is out of DATA bounds, id=%lld axis_dim=%lld",
                           v, n);
  case BAD_GATHER_SCATTER:
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "index %lld is out of bounds for dimension %d with size %lld", v,
                           b->dim, n);
  case BAD_ADVANCED: break;
  }
  return nrt_kernel_fail(NRT_ERROR_OUT_OF_RANGE, "index %lld is out of bounds for dimension %d with size %lld", v,
                         b->dim, n);
}

static inline int64_t load_index(const char *p, nrt_dtype dt) {
  if (dt == NRT_INT32) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
  }
  int64_t v;
  memcpy(&v, p, 8);
  return v;
}

/* Byte offset into the indexed operand of element j of a run (false on an
 * index out of range, recorded in *bad when bad is not NULL). */
typedef bool (*elem_offset_fn)(const void *plan, char *const *ptr, const int64_t *st, int64_t j, int64_t *off,
                               bad_index *bad);

/* A gather run, out[j] <- src[j + offset of j] (operands out_k, src_k),
 * one strided move when the offset is the same for the whole run; with
 * bad (the serial checking passes) only the offsets are validated.
 * Returns 1 on a bad index. Inlined with the offset function. */
static inline __attribute__((always_inline)) int gather_elems(const void *p, elem_offset_fn offset, bool constant,
                                                             bad_index *bad, const mover *mv, char *const *ptr,
                                                             const int64_t *st, int out_k, int src_k, int64_t n) {
  int64_t off;
  if (!bad && constant) {
    if (!offset(p, ptr, st, 0, &off, NULL)) return 1;
    move_run(mv, ptr[out_k], st[out_k], ptr[src_k] + off, st[src_k], n);
    return 0;
  }
  for (int64_t j = 0; j < n; j++) {
    if (!offset(p, ptr, st, j, &off, bad)) return 1;
    if (!bad) move_elem(mv, ptr[out_k] + j * st[out_k], ptr[src_k] + j * st[src_k] + off);
  }
  return 0;
}

static nrt_status check_index_operand(const nrt_launch *l, int k, const char *what) {
  nrt_dtype dt = l->operands[k].dtype;
  if (dt == NRT_INT64 || dt == NRT_INT32) return NRT_SUCCESS;
  return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: %s (operand %d) must be int64 or int32, got %s",
                         nrt_op_name(l->op), what, k, nrt_dtype_name(dt));
}

static nrt_status check_outputs(const nrt_launch *l, int want) {
  if (l->noutputs == want) return NRT_SUCCESS;
  return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expected %d output%s, got %d", nrt_op_name(l->op), want,
                         want == 1 ? "" : "s", l->noutputs);
}

/* ---- INDEX_GATHER / INDEX_PUT (ATen's AdvancedIndex layout) ------------------ */

typedef struct adv_plan {
  const nrt_launch *l;
  int nidx;
  nrt_dtype idt[NRT_MAX_OPERANDS];
  int64_t size[NRT_MAX_OPERANDS], stride[NRT_MAX_OPERANDS];
  mover mv;       /* out <- src (gather), self <- value (put) */
  bool accumulate, fdomain;
  bool scaled;    /* p3 = 1: self += alpha * value, fused (index_add's alpha) */
  double alpha;
  bool nowrap;    /* p2 != 0: negative indices are errors (index_select) */
  bad_kind kind;  /* p2 = 2: reported as the CPU's check_indexarray_range */
  bad_index bad;  /* the first bad index, filled by the serial passes */
} adv_plan;

/* Byte offset of element j of a run into the indexed operand; false on an
 * index outside [-size, size), recorded in *bad when bad is not NULL. */
static inline bool adv_offset(const adv_plan *p, char *const *ptr, const int64_t *st, int64_t j,
                              int64_t *out, bad_index *bad) {
  int64_t off = 0;
  for (int k = 0; k < p->nidx; k++) {
    int64_t v = load_index(ptr[ADV_IDX0 + k] + j * st[ADV_IDX0 + k], p->idt[k]), size = p->size[k];
    if (v < (p->nowrap ? 0 : -size) || v >= size) {
      if (bad) *bad = (bad_index){v, size, k, p->kind};
      return false;
    }
    if (v < 0) v += size;
    off += v * p->stride[k];
  }
  *out = off;
  return true;
}

static bool adv_index_constant(const adv_plan *p, const int64_t *st) {
  for (int k = 0; k < p->nidx; k++)
    if (st[ADV_IDX0 + k] != 0) return false;
  return true;
}

static inline bool adv_elem_offset(const void *p, char *const *ptr, const int64_t *st, int64_t j, int64_t *off,
                                   bad_index *bad) {
  return adv_offset(p, ptr, st, j, off, bad);
}

/* Constant indices make one source run: index_select, embedding. */
static int adv_gather_run(void *ctx, char *const *ptr, const int64_t *st, int64_t n, int64_t linear) {
  const adv_plan *p = ctx;
  return gather_elems(p, adv_elem_offset, adv_index_constant(p, st), NULL, &p->mv, ptr, st, ADV_OUT, ADV_SRC, n);
}

static int adv_check_run(void *ctx, char *const *ptr, const int64_t *st, int64_t n, int64_t linear) {
  adv_plan *p = ctx;
  return gather_elems(p, adv_elem_offset, false, &p->bad, &p->mv, ptr, st, ADV_OUT, ADV_SRC, n);
}

/* *dst += alpha * *src with the product fused into the sum, as the CPU's
 * index_add adds a slice with alpha (add_(source, alpha): vec::fmadd, and
 * its scalar loop contracted alike): 3.4e38 + 2 * -1.3 is finite where
 * the rounded product 2 * -1.7e38 added after would be -inf. float64 in
 * double, the other floating types in float (16-bit selves come here as
 * float32, rounded once by the glue). */
static inline void add_scaled_elem(const adv_plan *p, char *dst, const char *src) {
  if (p->mv.ddt == NRT_FLOAT32 && p->mv.sdt == NRT_FLOAT32) {
    float a, b;
    memcpy(&a, dst, 4);
    memcpy(&b, src, 4);
    a = fmaf((float)p->alpha, b, a);
    memcpy(dst, &a, 4);
    return;
  }
  double a = nrt_ref_load_f64(dst, p->mv.ddt), b = nrt_ref_load_f64(src, p->mv.sdt);
  nrt_ref_store_f64(dst, p->mv.ddt,
                    p->mv.ddt == NRT_FLOAT64 ? fma(p->alpha, b, a) : (double)fmaf((float)p->alpha, (float)b, (float)a));
}

/* dst[j] += src[j] over a float32 run (embedding backward's rows). */
static void add_run_f32(char *dst, int64_t dst_st, const char *src, int64_t src_st, int64_t n) {
  if (dst_st == 4 && src_st == 4) {
    float *d = (float *)dst;
    const float *s = (const float *)src;
    for (int64_t j = 0; j < n; j++) d[j] += s[j];
    return;
  }
  for (int64_t j = 0; j < n; j++) *(float *)(dst + j * dst_st) += *(const float *)(src + j * src_st);
}

static int adv_put_run(void *ctx, char *const *ptr, const int64_t *st, int64_t n, int64_t linear) {
  adv_plan *p = ctx;
  int64_t off;
  if (adv_index_constant(p, st)) {
    bool add_f32 = p->fdomain && !p->scaled && p->mv.ddt == NRT_FLOAT32 && p->mv.sdt == NRT_FLOAT32;
    if (!p->accumulate || add_f32) {
      /* in order along the run, like the element loop below */
      if (!adv_offset(p, ptr, st, 0, &off, &p->bad)) return 1;
      if (p->accumulate) add_run_f32(ptr[ADV_OUT] + off, st[ADV_OUT], ptr[ADV_SRC], st[ADV_SRC], n);
      else move_run(&p->mv, ptr[ADV_OUT] + off, st[ADV_OUT], ptr[ADV_SRC], st[ADV_SRC], n);
      return 0;
    }
  }
  for (int64_t j = 0; j < n; j++) {
    if (!adv_offset(p, ptr, st, j, &off, &p->bad)) return 1;
    char *dst = ptr[ADV_OUT] + j * st[ADV_OUT] + off;
    const char *src = ptr[ADV_SRC] + j * st[ADV_SRC];
    if (p->scaled) add_scaled_elem(p, dst, src);
    else if (p->accumulate) reduce_elem(RED_ADD, p->fdomain, &p->mv, dst, src);
    else move_elem(&p->mv, dst, src);
  }
  return 0;
}

static nrt_status adv_reference(adv_plan *p, bool put) {
  const nrt_launch *l = p->l;
  int64_t numel = launch_numel(l);
  for (int64_t i = 0; i < numel; i++) {
    int64_t off = 0;
    for (int k = 0; k < p->nidx; k++) {
      int64_t v = load_index(elem_ptr(l, ADV_IDX0 + k, i), p->idt[k]), size = p->size[k];
      if (v < (p->nowrap ? 0 : -size) || v >= size) {
        p->bad = (bad_index){v, size, k, p->kind};
        return bad_index_error(&p->bad);
      }
      off += (v < 0 ? v + size : v) * p->stride[k];
    }
    char *out = elem_ptr(l, ADV_OUT, i), *src = elem_ptr(l, ADV_SRC, i);
    if (!put) convert_elem(out, l->operands[ADV_OUT].dtype, src + off, l->operands[ADV_SRC].dtype);
    else if (p->scaled) add_scaled_elem(p, out + off, src);
    else if (p->accumulate) reduce_elem(RED_ADD, p->fdomain, &p->mv, out + off, src);
    else convert_elem(out + off, l->operands[ADV_OUT].dtype, src, l->operands[ADV_SRC].dtype);
  }
  return NRT_SUCCESS;
}

/* The glue describes TensorIterator's layout, whose dims run fastest
 * first, while the traversal here takes the last dim as the run. A launch
 * that steps least along its first dim (judged, as TensorIterator does, by
 * the first operand that moves along both: a put's self has stride 0 along
 * the index dims) is turned around, sizes and every operand's strides
 * reversed: runs then follow memory (index_select and embedding rows
 * become one move each instead of an element loop over the index dim), and
 * a serial put visits elements in TensorIterator's order, which is the
 * CPU's. Row-major launches are used as they are. */
static const nrt_launch *runs_along_memory(const nrt_launch *l, nrt_launch *copy) {
  int nd = l->ndim;
  if (nd < 2) return l;
  bool turn = false;
  for (int k = 0; k < l->noutputs + l->ninputs && k < NRT_MAX_OPERANDS; k++) {
    int64_t first = llabs(l->operands[k].strides[0]), last = llabs(l->operands[k].strides[nd - 1]);
    if (first != 0 && last != 0) {
      turn = first < last;
      break;
    }
  }
  if (!turn) return l;
  *copy = *l;
  for (int d = 0; d < nd; d++) {
    copy->sizes[d] = l->sizes[nd - 1 - d];
    for (int k = 0; k < l->noutputs + l->ninputs && k < NRT_MAX_OPERANDS; k++)
      copy->operands[k].strides[d] = l->operands[k].strides[nd - 1 - d];
  }
  return copy;
}

static nrt_status advanced_index(const nrt_launch *launch, bool put) {
  nrt_launch turned;
  const nrt_launch *l = runs_along_memory(launch, &turned);
  nrt_status st = check_outputs(l, 1);
  if (st != NRT_SUCCESS) return st;
  adv_plan p = {.l = l};
  p.nidx = (int)l->params[0]; /* validated: 1 + p0 == ninputs */
  for (int k = 0; k < p.nidx; k++) {
    st = check_index_operand(l, ADV_IDX0 + k, "index");
    if (st != NRT_SUCCESS) return st;
    p.idt[k] = l->operands[ADV_IDX0 + k].dtype;
    p.size[k] = l->aux[2 * k];
    p.stride[k] = l->aux[2 * k + 1];
  }
  p.mv = make_mover(l->operands[ADV_OUT].dtype, l->operands[ADV_SRC].dtype);
  p.accumulate = put && l->params[1] != 0;
  /* p2: 0 = advanced indexing (negative indices wrap), 1 = index_select
   * (no wrapping, IndexError), 2 = index_select reported as RuntimeError */
  p.nowrap = l->params[2] != 0;
  p.kind = l->params[2] == 2 ? BAD_SELECT_BOUNDS : p.nowrap ? BAD_SELECT : BAD_ADVANCED;
  p.fdomain = nrt_dtype_is_floating(l->compute_dtype);
  p.scaled = put && l->params[3] == 1;
  p.alpha = l->scalars[0].f;
  if (p.scaled && !(p.accumulate && nrt_dtype_is_floating(l->operands[ADV_OUT].dtype) &&
                    nrt_dtype_is_floating(l->operands[ADV_SRC].dtype)))
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "index_put: a scaled put (p3 = 1) accumulates into a floating self");
  if (launch_numel(l) == 0) return NRT_SUCCESS;
  if (nrt_kernels_reference()) return adv_reference(&p, put);
  int nops = 2 + p.nidx;
  if (put) { /* serial: duplicates resolve in iteration order */
    if (for_each_run(l, 0, nops, 0, launch_numel(l), adv_put_run, &p)) return bad_index_error(&p.bad);
    return NRT_SUCCESS;
  }
  if (!run_parallel(l, 0, nops, adv_gather_run, &p)) {
    /* find the first bad index in order, on this thread, for the message */
    for_each_run(l, 0, nops, 0, launch_numel(l), adv_check_run, &p);
    return bad_index_error(&p.bad);
  }
  return NRT_SUCCESS;
}

/* ---- GATHER / SCATTER (torch.gather, scatter family) ------------------------
 * Unlike advanced indexing, PyTorch does not wrap negative indices here:
 * anything outside [0, size) is out of bounds. aux[2] names the dim in the
 * error message (the glue passes the gather/scatter dim there). */

enum { GS_OUT = 0, GS_SRC = 1, GS_GIDX = 2 };   /* GATHER: out, src, index */
enum { SC_SELF = 0, SC_IDX = 1, SC_SRC = 2 };   /* SCATTER: self, index, src */

typedef struct gs_plan {
  const nrt_launch *l; /* for SCATTER with a scalar source: a patched copy */
  nrt_dtype idt;
  int64_t size, stride;
  int dim;
  int red;
  bool fdomain;
  nrt_dtype cx; /* SCATTER multiply of complex64/complex128 (else NRT_DTYPE_COUNT) */
  mover mv;
  bad_index bad;
} gs_plan;

static inline bool gs_offset(const gs_plan *p, const char *ip, int64_t *out, bad_index *bad) {
  int64_t v = load_index(ip, p->idt);
  if (v < 0 || v >= p->size) {
    if (bad) *bad = (bad_index){v, p->size, p->dim, BAD_GATHER_SCATTER};
    return false;
  }
  *out = v * p->stride;
  return true;
}

static inline bool gs_elem_offset(const void *p, char *const *ptr, const int64_t *st, int64_t j, int64_t *off,
                                  bad_index *bad) {
  return gs_offset(p, ptr[GS_GIDX] + j * st[GS_GIDX], off, bad);
}

static int gather_run(void *ctx, char *const *ptr, const int64_t *st, int64_t n, int64_t linear) {
  const gs_plan *p = ctx;
  return gather_elems(p, gs_elem_offset, st[GS_GIDX] == 0, NULL, &p->mv, ptr, st, GS_OUT, GS_SRC, n);
}

static int gather_check_run(void *ctx, char *const *ptr, const int64_t *st, int64_t n, int64_t linear) {
  gs_plan *p = ctx;
  return gather_elems(p, gs_elem_offset, false, &p->bad, &p->mv, ptr, st, GS_OUT, GS_SRC, n);
}

/* *dst *= *src for complex elements, the textbook product in the
 * element's own precision, as c10::complex's operator*= (which the CPU's
 * scatter "multiply"/"prod" applies in index order). Other complex
 * reductions are launched over real views (sum, mean) or refused. */
static inline void cx_mul_elem(char *dst, const char *src, nrt_dtype dt) {
  if (dt == NRT_COMPLEX64) {
    cxf a, b;
    memcpy(&a, dst, sizeof a);
    memcpy(&b, src, sizeof b);
    a = cxf_mul(a, b);
    memcpy(dst, &a, sizeof a);
  } else { /* complex128: nrt_cx is its two doubles */
    nrt_cx a, b;
    memcpy(&a, dst, sizeof a);
    memcpy(&b, src, sizeof b);
    a = nrt_cx_mul(a, b);
    memcpy(dst, &a, sizeof a);
  }
}

static inline void scatter_elem(const gs_plan *p, char *dst, const char *src) {
  if (p->cx != NRT_DTYPE_COUNT) cx_mul_elem(dst, src, p->cx);
  else reduce_elem(p->red, p->fdomain, &p->mv, dst, src);
}

static int scatter_run(void *ctx, char *const *ptr, const int64_t *st, int64_t n, int64_t linear) {
  gs_plan *p = ctx;
  int64_t off;
  for (int64_t j = 0; j < n; j++) {
    if (!gs_offset(p, ptr[SC_IDX] + j * st[SC_IDX], &off, &p->bad)) return 1;
    scatter_elem(p, ptr[SC_SELF] + j * st[SC_SELF] + off, ptr[SC_SRC] + j * st[SC_SRC]);
  }
  return 0;
}

static nrt_status gs_reference(gs_plan *p, bool scatter) {
  const nrt_launch *l = p->l;
  int64_t numel = launch_numel(l);
  int iop = scatter ? SC_IDX : GS_GIDX;
  for (int64_t i = 0; i < numel; i++) {
    int64_t v = load_index(elem_ptr(l, iop, i), p->idt);
    if (v < 0 || v >= p->size) {
      p->bad = (bad_index){v, p->size, p->dim, BAD_GATHER_SCATTER};
      return bad_index_error(&p->bad);
    }
    if (scatter)
      scatter_elem(p, elem_ptr(l, SC_SELF, i) + v * p->stride, elem_ptr(l, SC_SRC, i));
    else
      convert_elem(elem_ptr(l, GS_OUT, i), l->operands[GS_OUT].dtype,
                   elem_ptr(l, GS_SRC, i) + v * p->stride, l->operands[GS_SRC].dtype);
  }
  return NRT_SUCCESS;
}

static nrt_status gather_scatter(const nrt_launch *launch, bool scatter) {
  nrt_launch turned;
  const nrt_launch *l = scatter ? launch : runs_along_memory(launch, &turned);
  nrt_status st = check_outputs(l, 1);
  if (st != NRT_SUCCESS) return st;
  int iop = scatter ? SC_IDX : GS_GIDX;
  st = check_index_operand(l, iop, "index");
  if (st != NRT_SUCCESS) return st;
  gs_plan p = {.l = l, .cx = NRT_DTYPE_COUNT};
  p.idt = l->operands[iop].dtype;
  p.size = l->aux[0];
  p.stride = l->aux[1];
  p.dim = l->aux[2] >= 0 && l->aux[2] < NRT_MAX_DIMS ? (int)l->aux[2] : 0;
  p.fdomain = nrt_dtype_is_floating(l->compute_dtype);
  if (launch_numel(l) == 0) return NRT_SUCCESS;
  if (!scatter) {
    p.mv = make_mover(l->operands[GS_OUT].dtype, l->operands[GS_SRC].dtype);
    if (nrt_kernels_reference()) return gs_reference(&p, false);
    if (!run_parallel(l, 0, 3, gather_run, &p)) {
      for_each_run(l, 0, 3, 0, launch_numel(l), gather_check_run, &p);
      return bad_index_error(&p.bad);
    }
    return NRT_SUCCESS;
  }
  p.red = (int)l->params[0];
  if (p.red < RED_ASSIGN || p.red > RED_AMIN)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "SCATTER: unknown reduction p0 = %lld",
                           (long long)l->params[0]);
  /* A scalar source (p1) becomes a stride-0 operand holding s0 in self's
   * dtype, so the loops below see one layout. */
  nrt_launch patched;
  int64_t scalar_bits = 0;
  nrt_dtype self_dt = l->operands[SC_SELF].dtype;
  if (l->params[1]) {
    patched = *l;
    if (p.fdomain) nrt_ref_store_f64((char *)&scalar_bits, self_dt, l->scalars[0].f);
    else nrt_ref_store_i64((char *)&scalar_bits, self_dt, l->scalars[0].i);
    memset(&patched.operands[SC_SRC], 0, sizeof patched.operands[SC_SRC]);
    patched.operands[SC_SRC].data = &scalar_bits;
    patched.operands[SC_SRC].dtype = self_dt;
    p.l = &patched;
  }
  if (nrt_dtype_is_complex(self_dt) || nrt_dtype_is_complex(p.l->operands[SC_SRC].dtype)) {
    if (p.red != RED_MUL || l->params[1] || p.l->operands[SC_SRC].dtype != self_dt ||
        (self_dt != NRT_COMPLEX64 && self_dt != NRT_COMPLEX128))
      return nrt_kernel_fail(NRT_ERROR_UNSUPPORTED,
                             "SCATTER: complex operands only for multiply, complex64/128 self and source alike");
    p.cx = self_dt;
  } else {
    p.mv = make_mover(self_dt, p.l->operands[SC_SRC].dtype);
  }
  if (nrt_kernels_reference()) return gs_reference(&p, true);
  /* serial: colliding indices apply in iteration order */
  if (for_each_run(p.l, 0, 3, 0, launch_numel(l), scatter_run, &p)) return bad_index_error(&p.bad);
  return NRT_SUCCESS;
}

/* ---- NONZERO ---------------------------------------------------------------
 * Operand 0 is the [count, ndim] int64 result (strides[0] between rows,
 * strides[1] between coordinates), operand 1 the input over sizes. The
 * fast path counts blocks in parallel, checks the total against p0 before
 * writing anything, then writes each block's rows from its prefix offset. */

/* Nonzero test per dtype, as a bit mask on the element: a float is zero
 * when every bit but the sign is clear (NaN counts as nonzero). */
#define NZ_DISPATCH(dt, BODY)                                             \
  switch (dt) {                                                           \
  case NRT_INT16: BODY(uint16_t, 0xffffu); break;                         \
  case NRT_FLOAT16:                                                       \
  case NRT_BFLOAT16: BODY(uint16_t, 0x7fffu); break;                      \
  case NRT_INT32: BODY(uint32_t, 0xffffffffu); break;                     \
  case NRT_FLOAT32: BODY(uint32_t, 0x7fffffffu); break;                   \
  case NRT_INT64: BODY(uint64_t, 0xffffffffffffffffull); break;           \
  case NRT_FLOAT64: BODY(uint64_t, 0x7fffffffffffffffull); break;         \
  default: BODY(uint8_t, 0xffu); break; /* bool, uint8, int8 */           \
  }

static bool is_nonzero(const char *p, nrt_dtype dt) {
  bool nz = false;
#define NZ_ONE(T, MASK)  \
  {                      \
    T v;                 \
    memcpy(&v, p, sizeof v); \
    nz = (v & (MASK)) != 0; \
  }
  NZ_DISPATCH(dt, NZ_ONE)
#undef NZ_ONE
  return nz;
}

typedef struct nz_plan {
  const nrt_launch *l;
  int64_t numel, block, nblocks;
  int64_t *counts; /* per block, then the block's first output row */
  nrt_dtype dt;
  char *out;
  int64_t row_st, col_st;
} nz_plan;

typedef struct nz_cursor {
  const nz_plan *p;
  int64_t count; /* counting pass: nonzeros seen; writing pass: next row */
} nz_cursor;

static int nz_count_run(void *ctx, char *const *ptr, const int64_t *st, int64_t n, int64_t linear) {
  nz_cursor *c = ctx;
  const char *p = ptr[0];
  int64_t s = st[0], count = 0;
#define NZ_COUNT(T, MASK)                                            \
  if (s == (int64_t)sizeof(T)) { /* unit stride: vectorises */       \
    for (int64_t j = 0; j < n; j++) {                                \
      T v;                                                           \
      memcpy(&v, p + j * (int64_t)sizeof(T), sizeof v);              \
      count += (v & (MASK)) != 0;                                    \
    }                                                                \
  } else {                                                           \
    for (int64_t j = 0; j < n; j++) {                                \
      T v;                                                           \
      memcpy(&v, p + j * s, sizeof v);                               \
      count += (v & (MASK)) != 0;                                    \
    }                                                                \
  }
  NZ_DISPATCH(c->p->dt, NZ_COUNT)
#undef NZ_COUNT
  c->count += count;
  return 0;
}

static void nz_write_row(const nz_plan *p, int64_t row, const int64_t *coord) {
  char *o = p->out + row * p->row_st;
  for (int d = 0; d < p->l->ndim; d++) memcpy(o + d * p->col_st, &coord[d], 8);
}

static int nz_write_run(void *ctx, char *const *ptr, const int64_t *st, int64_t n, int64_t linear) {
  nz_cursor *c = ctx;
  const nz_plan *p = c->p;
  const nrt_launch *l = p->l;
  int nd = l->ndim;
  int64_t coord[NRT_MAX_DIMS], r = linear;
  for (int d = nd - 1; d >= 0; d--) {
    coord[d] = r % l->sizes[d];
    r /= l->sizes[d];
  }
  int64_t c0 = coord[nd - 1], s = st[0];
  const char *q = ptr[0];
#define NZ_WRITE(T, MASK)                                    \
  for (int64_t j = 0; j < n; j++) {                          \
    T v;                                                     \
    memcpy(&v, q + j * s, sizeof v);                         \
    if ((v & (MASK)) == 0) continue;                         \
    coord[nd - 1] = c0 + j;                                  \
    nz_write_row(p, c->count++, coord);                      \
  }
  NZ_DISPATCH(p->dt, NZ_WRITE)
#undef NZ_WRITE
  return 0;
}

static void nz_count_blocks(void *ctx, int64_t begin, int64_t end) {
  nz_plan *p = ctx;
  for (int64_t b = begin; b < end; b++) {
    nz_cursor c = {p, 0};
    int64_t e = (b + 1) * p->block < p->numel ? (b + 1) * p->block : p->numel;
    for_each_run(p->l, 1, 1, b * p->block, e, nz_count_run, &c);
    p->counts[b] = c.count;
  }
}

static void nz_write_blocks(void *ctx, int64_t begin, int64_t end) {
  nz_plan *p = ctx;
  for (int64_t b = begin; b < end; b++) {
    nz_cursor c = {p, p->counts[b]};
    int64_t e = (b + 1) * p->block < p->numel ? (b + 1) * p->block : p->numel;
    for_each_run(p->l, 1, 1, b * p->block, e, nz_write_run, &c);
  }
}

static nrt_status nonzero_changed(int64_t count, int64_t want) {
  return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                         "nonzero: input changed (%lld nonzero elements, the launch expected p0 = %lld)",
                         (long long)count, (long long)want);
}

static nrt_status nonzero(const nrt_launch *l) {
  nrt_status st = check_outputs(l, 1);
  if (st != NRT_SUCCESS) return st;
  if (l->operands[0].dtype != NRT_INT64)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "NONZERO: the output must be int64, got %s",
                           nrt_dtype_name(l->operands[0].dtype));
  int64_t want = l->params[0];
  nz_plan p = {.l = l, .numel = launch_numel(l), .dt = l->operands[1].dtype,
               .out = l->operands[0].data, .row_st = l->operands[0].strides[0],
               .col_st = l->operands[0].strides[1]};
  if (p.numel == 0) return want == 0 ? NRT_SUCCESS : nonzero_changed(0, want);
  if (l->ndim == 0) { /* a [count, 0] result: nothing to write */
    int64_t count = is_nonzero(l->operands[1].data, p.dt);
    return count == want ? NRT_SUCCESS : nonzero_changed(count, want);
  }
  if (nrt_kernels_reference()) {
    int64_t count = 0, coord[NRT_MAX_DIMS];
    for (int64_t i = 0; i < p.numel; i++) {
      if (!is_nonzero(elem_ptr(l, 1, i), p.dt)) continue;
      if (count < want) {
        int64_t r = i;
        for (int d = l->ndim - 1; d >= 0; d--) {
          coord[d] = r % l->sizes[d];
          r /= l->sizes[d];
        }
        nz_write_row(&p, count, coord);
      }
      count++;
    }
    return count == want ? NRT_SUCCESS : nonzero_changed(count, want);
  }
  /* blocks: enough for the pool to balance, big enough to amortise */
  p.block = INDEX_GRAIN;
  if (p.numel / p.block > 1024) p.block = (p.numel + 1023) / 1024;
  p.nblocks = nrt_cdiv(p.numel, p.block);
  p.counts = malloc((size_t)p.nblocks * sizeof *p.counts);
  if (!p.counts) return nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY, "NONZERO: out of host memory");
  nrt_parallel_for(p.nblocks, 1, nz_count_blocks, &p);
  int64_t total = 0;
  for (int64_t b = 0; b < p.nblocks; b++) {
    int64_t c = p.counts[b];
    p.counts[b] = total;
    total += c;
  }
  if (total != want) {
    free(p.counts);
    return nonzero_changed(total, want);
  }
  nrt_parallel_for(p.nblocks, 1, nz_write_blocks, &p);
  free(p.counts);
  return NRT_SUCCESS;
}

/* ---- ARANGE / LINSPACE -------------------------------------------------------
 * Each element from its linear index, so any split gives the same result.
 *
 * ARANGE: s0 + i * s1 in double for float outputs (.f), in wrapping int64
 * for integer outputs (.i).
 *
 * LINSPACE reproduces ATen's linspace kernel bit for bit: start and end
 * are first rounded to the output type, the step is computed in the
 * output's precision (double for integer outputs), and the two halves are
 * start + step * i and end - step * (n - 1 - i), each a fused multiply-add
 * in that precision (as ATen's build contracts them). float16/bfloat16
 * round after every operation, as c10's Half and BFloat16 arithmetic does.
 * s1 (the step the caller computed) is therefore not used. */

enum { LIN_DOUBLE, LIN_FLOAT, LIN_HALF, LIN_BF16 };

typedef struct fill_plan {
  const nrt_launch *l;
  nrt_dtype dt;
  bool fout;       /* floating output */
  int kind;        /* LINSPACE arithmetic */
  int64_t n, half; /* LINSPACE: numel, first index of the end-anchored half */
  double start, end, step; /* in the output type, widened */
} fill_plan;

static inline float round_half(float x, int kind) {
  return kind == LIN_HALF ? nrt_k_f16_to_f32(nrt_k_f32_to_f16(x))
                          : nrt_k_bf16_to_f32(nrt_k_f32_to_bf16(x));
}

static double linspace_value(const fill_plan *p, int64_t i) {
  if (p->n == 1) return p->start;
  bool head = i < p->half;
  int64_t k = head ? i : p->n - 1 - i;
  switch (p->kind) {
  case LIN_FLOAT: {
    float s = (float)p->step;
    return head ? fmaf(s, (float)k, (float)p->start) : fmaf(-s, (float)k, (float)p->end);
  }
  case LIN_HALF:
  case LIN_BF16: {
    float prod = round_half((float)p->step * round_half((float)k, p->kind), p->kind);
    return round_half(head ? (float)p->start + prod : (float)p->end - prod, p->kind);
  }
  default: return head ? fma(p->step, (double)k, p->start) : fma(-p->step, (double)k, p->end);
  }
}

/* A scalar rounded to the output type and widened back. */
static double to_out_type(nrt_dtype dt, bool fout, nrt_scalar s) {
  char tmp[8] = {0};
  if (fout) nrt_ref_store_f64(tmp, dt, s.f);
  else nrt_ref_store_i64(tmp, dt, s.i);
  return nrt_ref_load_f64(tmp, dt);
}

static int fill_run(void *ctx, char *const *ptr, const int64_t *st, int64_t n, int64_t linear) {
  const fill_plan *p = ctx;
  const nrt_launch *l = p->l;
  union {
    double f[NRT_BLOCK];
    int64_t i[NRT_BLOCK];
  } buf;
  for (int64_t b = 0; b < n; b += NRT_BLOCK) {
    int64_t m = n - b < NRT_BLOCK ? n - b : NRT_BLOCK;
    char *dst = ptr[0] + b * st[0];
    if (l->op == NRT_OP(LINSPACE)) {
      for (int64_t j = 0; j < m; j++) buf.f[j] = linspace_value(p, linear + b + j);
      nrt_store_f64(dst, st[0], p->dt, buf.f, m);
    } else if (p->fout) {
      for (int64_t j = 0; j < m; j++) buf.f[j] = l->scalars[0].f + (double)(linear + b + j) * l->scalars[1].f;
      nrt_store_f64(dst, st[0], p->dt, buf.f, m);
    } else {
      for (int64_t j = 0; j < m; j++)
        buf.i[j] = nrt_wadd(l->scalars[0].i, nrt_wmul(linear + b + j, l->scalars[1].i));
      nrt_store_i64(dst, st[0], p->dt, buf.i, m);
    }
  }
  return 0;
}

static nrt_status fill_index(const nrt_launch *l) {
  nrt_status st = check_outputs(l, 1);
  if (st != NRT_SUCCESS) return st;
  fill_plan p = {.l = l, .dt = l->operands[0].dtype, .n = launch_numel(l)};
  p.fout = nrt_dtype_is_floating(p.dt);
  if (p.n == 0) return NRT_SUCCESS;
  if (l->op == NRT_OP(LINSPACE)) {
    p.kind = p.dt == NRT_FLOAT32    ? LIN_FLOAT
             : p.dt == NRT_FLOAT16  ? LIN_HALF
             : p.dt == NRT_BFLOAT16 ? LIN_BF16
                                    : LIN_DOUBLE;
    p.half = p.n / 2;
    p.start = to_out_type(p.dt, p.fout, l->scalars[0]);
    p.end = to_out_type(p.dt, p.fout, l->scalars[2]);
    if (p.kind == LIN_FLOAT) p.step = ((float)p.end - (float)p.start) / (float)(p.n - 1);
    else if (p.kind == LIN_DOUBLE) p.step = (p.end - p.start) / (double)(p.n - 1);
    else
      p.step = round_half(round_half((float)p.end - (float)p.start, p.kind) /
                              round_half((float)(p.n - 1), p.kind),
                          p.kind);
  }
  if (nrt_kernels_reference()) {
    for (int64_t i = 0; i < p.n; i++) {
      char *dst = elem_ptr(l, 0, i);
      if (l->op == NRT_OP(LINSPACE)) nrt_ref_store_f64(dst, p.dt, linspace_value(&p, i));
      else if (p.fout) nrt_ref_store_f64(dst, p.dt, l->scalars[0].f + (double)i * l->scalars[1].f);
      else nrt_ref_store_i64(dst, p.dt, nrt_wadd(l->scalars[0].i, nrt_wmul(i, l->scalars[1].i)));
    }
    return NRT_SUCCESS;
  }
  run_parallel(l, 0, 1, fill_run, &p);
  return NRT_SUCCESS;
}

/* ---- TRIANGLE (tril / triu) ------------------------------------------------------
 * Rows are dim ndim-2, columns dim ndim-1; out may be in itself (each
 * element is read before it is written, at the same place). */

typedef struct tri_plan {
  const nrt_launch *l;
  bool upper;
  int64_t diag, rows, cols;
  mover mv;
} tri_plan;

/* Columns [lo, hi) of `row` are kept. */
static void tri_keep(const tri_plan *p, int64_t row, int64_t *lo, int64_t *hi) {
  /* row + diag saturated: row >= 0, so only the upper side can overflow */
  int64_t lim = p->diag > INT64_MAX - row ? INT64_MAX : row + p->diag;
  if (p->upper) { /* col - row >= diag */
    *lo = lim < 0 ? 0 : (lim > p->cols ? p->cols : lim);
    *hi = p->cols;
  } else {        /* col - row <= diag */
    *lo = 0;
    *hi = lim < 0 ? 0 : (lim >= p->cols ? p->cols : lim + 1);
  }
}

static int tri_run(void *ctx, char *const *ptr, const int64_t *st, int64_t n, int64_t linear) {
  const tri_plan *p = ctx;
  int64_t c0 = linear % p->cols, row = (linear / p->cols) % p->rows, lo, hi;
  tri_keep(p, row, &lo, &hi);
  /* the run covers columns [c0, c0 + n): zero / keep / zero pieces */
  int64_t a = lo < c0 ? c0 : (lo > c0 + n ? c0 + n : lo);
  int64_t b = hi < a ? a : (hi > c0 + n ? c0 + n : hi);
  int64_t es = (int64_t)nrt_dtype_size(p->l->operands[0].dtype);
  zero_run(ptr[0], st[0], es, a - c0);
  move_run(&p->mv, ptr[0] + (a - c0) * st[0], st[0], ptr[1] + (a - c0) * st[1], st[1], b - a);
  zero_run(ptr[0] + (b - c0) * st[0], st[0], es, c0 + n - b);
  return 0;
}

static nrt_status triangle(const nrt_launch *l) {
  nrt_status st = check_outputs(l, 1);
  if (st != NRT_SUCCESS) return st;
  if (l->ndim < 2)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "TRIANGLE: needs at least 2 dims (rows, cols), got %d",
                           l->ndim);
  tri_plan p = {.l = l, .upper = l->params[0] != 0, .diag = l->params[1],
                .rows = l->sizes[l->ndim - 2], .cols = l->sizes[l->ndim - 1]};
  p.mv = make_mover(l->operands[0].dtype, l->operands[1].dtype);
  int64_t numel = launch_numel(l);
  if (numel == 0) return NRT_SUCCESS;
  if (nrt_kernels_reference()) {
    int64_t es = (int64_t)nrt_dtype_size(l->operands[0].dtype);
    for (int64_t i = 0; i < numel; i++) {
      int64_t col = i % p.cols, row = (i / p.cols) % p.rows;
      /* col - row cannot overflow: both are sizes */
      bool keep = p.upper ? col - row >= p.diag : col - row <= p.diag;
      char *dst = elem_ptr(l, 0, i);
      if (keep) convert_elem(dst, l->operands[0].dtype, elem_ptr(l, 1, i), l->operands[1].dtype);
      else memset(dst, 0, (size_t)es);
    }
    return NRT_SUCCESS;
  }
  run_parallel(l, 0, 2, tri_run, &p);
  return NRT_SUCCESS;
}

/* ---- SORT -------------------------------------------------------------------------
 * Rows along the last dim, in parallel. Each value maps to an unsigned key
 * whose order is PyTorch's: -0.0 and 0.0 equal, every NaN equal and above
 * +inf; descending complements the key, so a stable ascending merge sort
 * of (key, position) pairs gives both orders with ties in input order. The
 * row is copied before anything is written, so values may alias the input. */

enum { SORT_VALUES = 0, SORT_INDICES = 1, SORT_IN = 2 };

static void row_keys(nrt_sort_pair *a, const char *row, int64_t es, nrt_dtype dt, int64_t n, bool desc) {
  uint64_t flip = desc ? UINT64_MAX : 0;
#define KEYS(T, KEY)                                              \
  for (int64_t j = 0; j < n; j++) {                               \
    T v;                                                          \
    memcpy(&v, row + j * es, sizeof v);                           \
    a[j].key = (KEY) ^ flip;                                      \
    a[j].idx = j;                                                 \
  }
  switch (dt) {
  case NRT_BOOL:
  case NRT_UINT8: KEYS(uint8_t, (uint64_t)v); break;
  case NRT_INT8: KEYS(int8_t, nrt_sort_key_i64(v)); break;
  case NRT_INT16: KEYS(int16_t, nrt_sort_key_i64(v)); break;
  case NRT_INT32: KEYS(int32_t, nrt_sort_key_i64(v)); break;
  case NRT_INT64: KEYS(int64_t, nrt_sort_key_i64(v)); break;
  case NRT_UINT16: KEYS(uint16_t, (uint64_t)v); break;
  case NRT_UINT32: KEYS(uint32_t, (uint64_t)v); break;
  case NRT_UINT64: KEYS(uint64_t, v); break;
  case NRT_FLOAT16: KEYS(uint16_t, nrt_sort_key_f64(nrt_k_f16_to_f32(v))); break;
  case NRT_BFLOAT16: KEYS(uint16_t, nrt_sort_key_f64(nrt_k_bf16_to_f32(v))); break;
  case NRT_FLOAT32: KEYS(float, nrt_sort_key_f64(v)); break;
  default: KEYS(double, nrt_sort_key_f64(v)); break;
  }
#undef KEYS
}

typedef struct sort_plan {
  const nrt_launch *l;
  int64_t len, rows;
  int nlead;
  bool desc;
  mover mv;
  int64_t es; /* input element size */
  atomic_int failed;
} sort_plan;

static void sort_row_pointers(const sort_plan *p, int64_t r, char **ptr) {
  const nrt_launch *l = p->l;
  for (int k = 0; k < 3; k++) ptr[k] = l->operands[k].data;
  for (int d = p->nlead - 1; d >= 0; d--) {
    int64_t i = r % l->sizes[d];
    r /= l->sizes[d];
    for (int k = 0; k < 3; k++) ptr[k] += i * l->operands[k].strides[d];
  }
}

static void store_index(char *dst, nrt_dtype dt, int64_t v) {
  if (dt == NRT_INT64) memcpy(dst, &v, 8);
  else nrt_ref_store_i64(dst, dt, v);
}

static void sort_rows(void *ctx, int64_t begin, int64_t end) {
  sort_plan *p = ctx;
  const nrt_launch *l = p->l;
  int64_t n = p->len, rd = l->ndim > 0 ? l->ndim - 1 : 0;
  int64_t st[3];
  for (int k = 0; k < 3; k++) st[k] = l->ndim > 0 ? l->operands[k].strides[rd] : 0;
  nrt_dtype in_dt = l->operands[SORT_IN].dtype, ix_dt = l->operands[SORT_INDICES].dtype;
  char *mem = malloc((size_t)n * (2 * sizeof(nrt_sort_pair) + (size_t)p->es));
  if (!mem) {
    atomic_store(&p->failed, 1);
    return;
  }
  nrt_sort_pair *pairs = (nrt_sort_pair *)mem, *tmp = pairs + n;
  char *row = (char *)(tmp + n);
  for (int64_t r = begin; r < end; r++) {
    char *ptr[3];
    sort_row_pointers(p, r, ptr);
    mover copy_in = make_mover(in_dt, in_dt);
    move_run(&copy_in, row, p->es, ptr[SORT_IN], st[SORT_IN], n);
    row_keys(pairs, row, p->es, in_dt, n, p->desc);
    nrt_sort_pair *sorted = nrt_sort_pairs_stable(pairs, tmp, n);
    for (int64_t j = 0; j < n; j++) {
      move_elem(&p->mv, ptr[SORT_VALUES] + j * st[SORT_VALUES], row + sorted[j].idx * p->es);
      store_index(ptr[SORT_INDICES] + j * st[SORT_INDICES], ix_dt, sorted[j].idx);
    }
  }
  free(mem);
}

/* Reference: a top-down merge sort of positions with a direct comparator. */
typedef struct sort_ref {
  const char *row;
  int64_t es;
  nrt_dtype dt;
  bool desc, fdomain;
} sort_ref;

/* Whether position a goes strictly before position b. */
static bool ref_before(const sort_ref *s, int64_t a, int64_t b) {
  const char *pa = s->row + a * s->es, *pb = s->row + b * s->es;
  if (s->fdomain) {
    double x = nrt_ref_load_f64(pa, s->dt), y = nrt_ref_load_f64(pb, s->dt);
    if (s->desc) return isnan(x) ? !isnan(y) : (!isnan(y) && x > y);
    return isnan(x) ? false : (isnan(y) || x < y);
  }
  int64_t x = nrt_ref_load_i64(pa, s->dt), y = nrt_ref_load_i64(pb, s->dt);
  return s->desc ? x > y : x < y;
}

static void ref_merge_sort(const sort_ref *s, int64_t *idx, int64_t *tmp, int64_t n) {
  if (n < 2) return;
  int64_t h = n / 2;
  ref_merge_sort(s, idx, tmp, h);
  ref_merge_sort(s, idx + h, tmp, n - h);
  int64_t i = 0, j = h, o = 0;
  while (i < h && j < n) tmp[o++] = ref_before(s, idx[j], idx[i]) ? idx[j++] : idx[i++];
  while (i < h) tmp[o++] = idx[i++];
  while (j < n) tmp[o++] = idx[j++];
  memcpy(idx, tmp, (size_t)n * sizeof *idx);
}

static nrt_status sort_reference(sort_plan *p) {
  const nrt_launch *l = p->l;
  int64_t n = p->len, rd = l->ndim > 0 ? l->ndim - 1 : 0;
  nrt_dtype in_dt = l->operands[SORT_IN].dtype;
  int64_t *idx = malloc((size_t)n * 2 * sizeof *idx);
  char *row = malloc((size_t)(n * p->es));
  if (!idx || !row) {
    free(idx);
    free(row);
    return nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY, "SORT: out of host memory for a row of %lld", (long long)n);
  }
  sort_ref s = {row, p->es, in_dt, p->desc, nrt_dtype_is_floating(in_dt)};
  for (int64_t r = 0; r < p->rows; r++) {
    char *ptr[3];
    sort_row_pointers(p, r, ptr);
    int64_t in_st = l->ndim > 0 ? l->operands[SORT_IN].strides[rd] : 0;
    for (int64_t j = 0; j < n; j++) memcpy(row + j * p->es, ptr[SORT_IN] + j * in_st, (size_t)p->es);
    for (int64_t j = 0; j < n; j++) idx[j] = j;
    ref_merge_sort(&s, idx, idx + n, n);
    for (int64_t j = 0; j < n; j++) {
      int64_t vs = l->ndim > 0 ? l->operands[SORT_VALUES].strides[rd] : 0;
      int64_t is = l->ndim > 0 ? l->operands[SORT_INDICES].strides[rd] : 0;
      convert_elem(ptr[SORT_VALUES] + j * vs, l->operands[SORT_VALUES].dtype, row + idx[j] * p->es, in_dt);
      nrt_ref_store_i64(ptr[SORT_INDICES] + j * is, l->operands[SORT_INDICES].dtype, idx[j]);
    }
  }
  free(idx);
  free(row);
  return NRT_SUCCESS;
}

static nrt_status sort_op(const nrt_launch *l) {
  nrt_status st = check_outputs(l, 2);
  if (st != NRT_SUCCESS) return st;
  if (!nrt_dtype_is_integral(l->operands[SORT_INDICES].dtype))
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "SORT: the indices output must be an integer type, got %s",
                           nrt_dtype_name(l->operands[SORT_INDICES].dtype));
  sort_plan p = {.l = l};
  p.desc = l->params[0] != 0;
  p.len = l->ndim > 0 ? l->sizes[l->ndim - 1] : 1;
  p.nlead = l->ndim > 0 ? l->ndim - 1 : 0;
  p.rows = 1;
  for (int d = 0; d < p.nlead; d++) p.rows *= l->sizes[d];
  p.es = (int64_t)nrt_dtype_size(l->operands[SORT_IN].dtype);
  p.mv = make_mover(l->operands[SORT_VALUES].dtype, l->operands[SORT_IN].dtype);
  if (p.rows == 0 || p.len == 0) return NRT_SUCCESS;
  if (nrt_kernels_reference()) return sort_reference(&p);
  atomic_init(&p.failed, 0);
  int64_t grain = p.len >= INDEX_GRAIN ? 1 : INDEX_GRAIN / p.len;
  nrt_parallel_for(p.rows, grain, sort_rows, &p);
  if (atomic_load(&p.failed))
    return nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY, "SORT: out of host memory for a row of %lld",
                           (long long)p.len);
  return NRT_SUCCESS;
}

/* ---- dispatch ------------------------------------------------------------------------ */

nrt_status nrt_index_execute(const nrt_launch *l) {
  switch ((int)l->op) {
  case NRT_OP(INDEX_GATHER): return advanced_index(l, false);
  case NRT_OP(INDEX_PUT): return advanced_index(l, true);
  case NRT_OP(GATHER): return gather_scatter(l, false);
  case NRT_OP(SCATTER): return gather_scatter(l, true);
  case NRT_OP(NONZERO): return nonzero(l);
  case NRT_OP(ARANGE):
  case NRT_OP(LINSPACE): return fill_index(l);
  case NRT_OP(TRIANGLE): return triangle(l);
  case NRT_OP(SORT): return sort_op(l);
  case NRT_OP(COPY_ORDERED): return nrt_index_copy_ordered(l);
  default: break;
  }
  return nrt_kernel_fail(NRT_ERROR_UNSUPPORTED, "kernel %s: not an index op", nrt_op_name(l->op));
}
