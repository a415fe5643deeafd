/* Family SELECT (nrt/ops/select.h): order statistics, scans with indices,
 * uniqueness, bucketing, histograms.
 *
 * Comparisons go through an unsigned 64-bit key per element whose order is
 * PyTorch's: -0.0 and 0.0 equal, NaN above +inf (floats via their double
 * bits, integers and bool offset by 2^63), so one code path serves every
 * dtype exactly. Selected values are copied as element bytes.
 *
 * Each op has a fast path (block loaders, rows split over the kernel pool,
 * merge sorts) and a plain reference path selected by
 * nrt_kernels_reference() (element-at-a-time loads through dtype.c, one
 * thread, and where it is cheap a different algorithm: rank counting
 * instead of sorting, linear instead of binary search), which the C tests
 * compare. */
#include <stdlib.h>
#include "kernels/common/common.h"
#include "kernels/common/cx.h" /* the complex LOGCUMSUMEXP step: PyTorch's complex formula, kept in one place */
#include "nrt/ops/select.h"

/* Rows per parallel chunk, at least, scaled by the row length. */
#define SELECT_GRAIN 16384

static nrt_status check_counts(const nrt_launch *l, int noutputs) {
  if (l->noutputs != noutputs)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expected %d outputs, got %d", nrt_op_name(l->op), noutputs,
                           l->noutputs);
  return NRT_SUCCESS;
}

/* The ops that write int64 positions: one output, int64. */
static nrt_status check_int64_output(const nrt_launch *l) {
  nrt_status st = check_counts(l, 1);
  if (st != NRT_SUCCESS) return st;
  if (l->operands[0].dtype != NRT_INT64)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: output must be int64", nrt_op_name(l->op));
  return NRT_SUCCESS;
}

static nrt_status check_index_dtype(const nrt_launch *l, int operand) {
  nrt_dtype dt = l->operands[operand].dtype;
  if (dt != NRT_INT64 && dt != NRT_INT32)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                           "%s: operand %d must be int64 or int32, got %s", nrt_op_name(l->op),
                           operand, nrt_dtype_name(dt));
  return NRT_SUCCESS;
}

static nrt_status oom(const nrt_launch *l) {
  return nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", nrt_op_name(l->op));
}

/* ---- keys ---------------------------------------------------------------- */

/* For floats the NaN key is UINT64_MAX and no other value reaches it
 * (+inf's key is below); integers have no NaN. */
static inline bool key_is_nan(uint64_t k, bool floating) { return floating && k == UINT64_MAX; }

/* Keys of n elements at p (byte stride st), fast: through the block
 * loaders, a block at a time. */
static void load_keys(uint64_t *key, const char *p, int64_t st, nrt_dtype dt, int64_t n) {
  enum { B = 256 };
  double fb[B];
  int64_t ib[B];
  bool fl = nrt_dtype_is_floating(dt);
  for (int64_t s = 0; s < n; s += B) {
    int64_t c = n - s < B ? n - s : B;
    if (fl) {
      nrt_load_f64(fb, p + s * st, st, dt, c);
      for (int64_t j = 0; j < c; j++) key[s + j] = nrt_sort_key_f64(fb[j]);
    } else {
      nrt_load_i64(ib, p + s * st, st, dt, c);
      for (int64_t j = 0; j < c; j++) key[s + j] = nrt_sort_key_i64(ib[j]);
    }
  }
}

/* One key through dtype.c's out-of-line conversions (reference paths). */
static uint64_t ref_key(const char *p, nrt_dtype dt) {
  return nrt_dtype_is_floating(dt) ? nrt_sort_key_f64(nrt_ref_load_f64(p, dt))
                                   : nrt_sort_key_i64(nrt_ref_load_i64(p, dt));
}

static void store_index(char *dst, nrt_dtype dt, int64_t v) {
  if (dt == NRT_INT64) memcpy(dst, &v, 8);
  else nrt_ref_store_i64(dst, dt, v);
}

/* ---- rows ------------------------------------------------------------------
 * Row ops run on the shared row runner (kernels/common/rows.h); ctx points
 * at whether the reference path runs (one thread, its own algorithm). */
static inline bool job_ref(const nrt_rows_job *j) { return *(const bool *)j->ctx; }

static nrt_status run_rows(nrt_rows_job *j) {
  return nrt_rows_run(j, SELECT_GRAIN, !job_ref(j)) ? NRT_SUCCESS : oom(j->l);
}

/* ---- CUMMAX / CUMMIN ------------------------------------------------------- */
enum { SCAN_VALUES = 0, SCAN_INDICES = 1, SCAN_IN = 2 };

/* Whether element key x replaces the held key h (PyTorch's rule). */
static inline bool scan_takes(uint64_t x, uint64_t h, bool fl, bool is_max) {
  if (key_is_nan(x, fl)) return true;
  if (key_is_nan(h, fl)) return false;
  return is_max ? x >= h : x <= h;
}

static void cumext_row(const nrt_rows_job *j, int64_t r, char *const *ptr, void *scratch) {
  const nrt_launch *l = j->l;
  nrt_dtype dt = l->operands[SCAN_IN].dtype, ix = l->operands[SCAN_INDICES].dtype;
  bool fl = nrt_dtype_is_floating(dt), is_max = (int)l->op == (int)NRT_OP(CUMMAX);
  int64_t es = (int64_t)nrt_dtype_size(dt), n = j->g.len;
  if (job_ref(j)) {
    /* Reference: per output position, scan the prefix again from its
     * start (quadratic, independent of the running state of the fast
     * path). */
    char *row = scratch;
    for (int64_t i = 0; i < n; i++) memcpy(row + i * es, ptr[SCAN_IN] + i * j->g.st[SCAN_IN], (size_t)es);
    for (int64_t i = 0; i < n; i++) {
      int64_t idx = 0;
      for (int64_t t = 1; t <= i; t++)
        if (scan_takes(ref_key(row + t * es, dt), ref_key(row + idx * es, dt), fl, is_max)) idx = t;
      memcpy(ptr[SCAN_VALUES] + i * j->g.st[SCAN_VALUES], row + idx * es, (size_t)es);
      nrt_ref_store_i64(ptr[SCAN_INDICES] + i * j->g.st[SCAN_INDICES], ix, idx);
    }
    return;
  }
  uint64_t *key = scratch;
  load_keys(key, ptr[SCAN_IN], j->g.st[SCAN_IN], dt, n);
  /* Read the whole row before writing: values may alias the input. */
  char *held = (char *)(key + n);
  int64_t idx = 0;
  uint64_t h = key[0];
  memcpy(held, ptr[SCAN_IN], (size_t)es);
  for (int64_t i = 0; i < n; i++) {
    if (scan_takes(key[i], h, fl, is_max)) {
      h = key[i];
      idx = i;
      memcpy(held, ptr[SCAN_IN] + i * j->g.st[SCAN_IN], (size_t)es);
    }
    memcpy(ptr[SCAN_VALUES] + i * j->g.st[SCAN_VALUES], held, (size_t)es);
    store_index(ptr[SCAN_INDICES] + i * j->g.st[SCAN_INDICES], ix, idx);
  }
}

static nrt_status cumext_op(const nrt_launch *l) {
  nrt_status st = check_counts(l, 2);
  if (st == NRT_SUCCESS) st = check_index_dtype(l, SCAN_INDICES);
  if (st != NRT_SUCCESS) return st;
  if (l->operands[SCAN_VALUES].dtype != l->operands[SCAN_IN].dtype)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: values must have the input's dtype", nrt_op_name(l->op));
  bool ref = nrt_kernels_reference();
  nrt_rows_job j = {.l = l, .ctx = &ref, .nops = 3, .row = cumext_row};
  nrt_rows_init(&j.g, l);
  if (j.g.len == 0) return NRT_SUCCESS;
  size_t es = nrt_dtype_size(l->operands[SCAN_IN].dtype);
  j.scratch = ref ? (size_t)j.g.len * es : (size_t)j.g.len * 8 + es;
  return run_rows(&j);
}

/* ---- LOGCUMSUMEXP ------------------------------------------------------------
 * log(exp(a) + exp(b)) = max + log1p(exp(min - max)); when both are the
 * same infinity the difference would be NaN, and the sum is that
 * infinity. A NaN anywhere propagates. */
static inline double log_add_exp(double a, double b) {
  if (isnan(a) || isnan(b)) return NAN;
  double mx = a > b ? a : b, mn = a > b ? b : a;
  if (mx == mn && isinf(mx)) return mx;
  return mx + log1p(exp(mn - mx));
}

static void lcse_row(const nrt_rows_job *j, int64_t r, char *const *ptr, void *scratch) {
  const nrt_launch *l = j->l;
  double *v = scratch;
  int64_t n = j->g.len;
  if (!job_ref(j)) {
    nrt_load_f64(v, ptr[1], j->g.st[1], l->operands[1].dtype, n);
    double acc = -INFINITY;
    for (int64_t i = 0; i < n; i++) v[i] = acc = log_add_exp(acc, v[i]);
    nrt_store_f64(ptr[0], j->g.st[0], l->operands[0].dtype, v, n);
    return;
  }
  /* Reference: each output from scratch, shifting by the prefix maximum. */
  for (int64_t i = 0; i < n; i++) v[i] = nrt_ref_load_f64(ptr[1] + i * j->g.st[1], l->operands[1].dtype);
  for (int64_t i = 0; i < n; i++) {
    double mx = -INFINITY;
    bool nan = false;
    for (int64_t t = 0; t <= i; t++) {
      if (isnan(v[t])) nan = true;
      else if (v[t] > mx) mx = v[t];
    }
    double out;
    if (nan) out = NAN;
    else if (isinf(mx)) out = mx; /* all -inf, or a +inf present */
    else {
      double s = 0;
      for (int64_t t = 0; t <= i; t++) s += exp(v[t] - mx);
      out = mx + log(s);
    }
    nrt_ref_store_f64(ptr[0] + i * j->g.st[0], l->operands[0].dtype, out);
  }
}

/* Complex rows (p0 = 1): element i is the pair (re, im) at i * stride and
 * one part size further. The CPU's scan is sequential from -inf + 0i,
 * each step nrt_cx_log_add_exp(element, running value), accumulated in
 * double (its accumulate type); both paths take that order (nrt_cx_scan_row),
 * since the formula's special values depend on it. */
static nrt_cx lcse_step(nrt_cx acc, nrt_cx x) { return nrt_cx_log_add_exp(x, acc); }

static void lcse_cx_row(const nrt_rows_job *j, int64_t r, char *const *ptr, void *scratch) {
  const nrt_launch *l = j->l;
  (void)r;
  nrt_cx_scan_row(ptr[0], j->g.st[0], l->operands[0].dtype, ptr[1], j->g.st[1], l->operands[1].dtype, j->g.len,
                  nrt_cx_make(-INFINITY, 0.0), lcse_step, job_ref(j), scratch);
}

static nrt_status lcse_op(const nrt_launch *l) {
  nrt_status st = check_counts(l, 1);
  if (st != NRT_SUCCESS) return st;
  if (!nrt_dtype_is_floating(l->operands[1].dtype) || !nrt_dtype_is_floating(l->operands[0].dtype))
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "LOGCUMSUMEXP: operands must be floating");
  if (l->params[0] != 0 && l->params[0] != 1)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "LOGCUMSUMEXP: p0 = %lld is neither 0 nor 1",
                           (long long)l->params[0]);
  bool cx = l->params[0] == 1;
  bool ref = nrt_kernels_reference();
  nrt_rows_job j = {.l = l, .ctx = &ref, .nops = 2, .row = cx ? lcse_cx_row : lcse_row};
  nrt_rows_init(&j.g, l);
  if (j.g.len == 0) return NRT_SUCCESS;
  j.scratch = (size_t)j.g.len * sizeof(double) * (cx ? 2 : 1);
  return run_rows(&j);
}

/* ---- ORDER_STAT -------------------------------------------------------------- */
enum { OS_VALUE = 0, OS_INDEX = 1, OS_IN = 2 };
enum { OS_KTH = 0, OS_MEDIAN = 1, OS_NANMEDIAN = 2, OS_MODE = 3 };

/* The sorted position an order statistic selects, given the NaN count. */
static int64_t os_rank(int64_t stat, int64_t k, int64_t n, int64_t nans) {
  switch (stat) {
  case OS_KTH: return k;
  case OS_MEDIAN: return nans > 0 ? n - nans : (n - 1) / 2;
  default: return n - nans > 0 ? (n - nans - 1) / 2 : 0; /* nanmedian */
  }
}

static void os_write(const nrt_rows_job *j, char *const *ptr, int64_t idx) {
  const nrt_launch *l = j->l;
  size_t es = nrt_dtype_size(l->operands[OS_IN].dtype);
  memcpy(ptr[OS_VALUE], ptr[OS_IN] + idx * j->g.st[OS_IN], es);
  store_index(ptr[OS_INDEX], l->operands[OS_INDEX].dtype, idx);
}

/* Reference: ranks by counting. Element t's stable rank is the number of
 * smaller keys plus the equal keys before it. */
static void os_row_ref(const nrt_rows_job *j, char *const *ptr, void *scratch, nrt_dtype dt, bool fl, int64_t n,
                       int64_t stat) {
  const nrt_launch *l = j->l;
  uint64_t *key = scratch;
  int64_t nans = 0;
  for (int64_t i = 0; i < n; i++) {
    key[i] = ref_key(ptr[OS_IN] + i * j->g.st[OS_IN], dt);
    nans += key_is_nan(key[i], fl);
  }
  if (stat != OS_MODE) {
    int64_t want = os_rank(stat, l->params[1], n, nans);
    for (int64_t t = 0; t < n; t++) {
      int64_t rank = 0;
      for (int64_t i = 0; i < n; i++) rank += key[i] < key[t] || (key[i] == key[t] && i < t);
      if (rank == want) {
        os_write(j, ptr, t);
        return;
      }
    }
    return;
  }
  int64_t best = -1, best_count = 0;
  for (int64_t t = 0; t < n; t++) {
    int64_t count = 0, last = t;
    if (key_is_nan(key[t], fl)) count = 1;
    else
      for (int64_t i = 0; i < n; i++)
        if (key[i] == key[t]) {
          count++;
          last = i;
        }
    if (count > best_count || (count == best_count && key[t] < key[best])) {
      best_count = count;
      best = last;
    }
  }
  os_write(j, ptr, best);
}

static void os_row(const nrt_rows_job *j, int64_t r, char *const *ptr, void *scratch) {
  const nrt_launch *l = j->l;
  nrt_dtype dt = l->operands[OS_IN].dtype;
  bool fl = nrt_dtype_is_floating(dt);
  int64_t n = j->g.len, stat = l->params[0];
  if (job_ref(j)) {
    os_row_ref(j, ptr, scratch, dt, fl, n, stat);
    return;
  }
  nrt_sort_pair *a = scratch, *tmp = a + n;
  uint64_t *key = (uint64_t *)(tmp + n);
  load_keys(key, ptr[OS_IN], j->g.st[OS_IN], dt, n);
  int64_t nans = 0;
  for (int64_t i = 0; i < n; i++) {
    a[i].key = key[i];
    a[i].idx = i;
    nans += key_is_nan(key[i], fl);
  }
  nrt_sort_pair *s = nrt_sort_pairs_stable(a, tmp, n);
  if (stat != OS_MODE) {
    os_write(j, ptr, s[os_rank(stat, l->params[1], n, nans)].idx);
    return;
  }
  /* Mode: the first longest run of equal keys (NaN equals nothing). */
  int64_t best = 0, best_len = 0, run = 0;
  for (int64_t i = 0; i < n; i++) {
    run++;
    if (i == n - 1 || s[i].key != s[i + 1].key || key_is_nan(s[i].key, fl)) {
      if (run > best_len) {
        best_len = run;
        best = i;
      }
      run = 0;
    }
  }
  /* The run is in stable order, so its end is the last occurrence. */
  os_write(j, ptr, s[best].idx);
}

static nrt_status order_stat_op(const nrt_launch *l) {
  nrt_status st = check_counts(l, 2);
  if (st == NRT_SUCCESS) st = check_index_dtype(l, OS_INDEX);
  if (st != NRT_SUCCESS) return st;
  if (l->operands[OS_VALUE].dtype != l->operands[OS_IN].dtype)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "ORDER_STAT: the value must have the input's dtype");
  bool ref = nrt_kernels_reference();
  nrt_rows_job j = {.l = l, .ctx = &ref, .nops = 3, .row = os_row};
  nrt_rows_init(&j.g, l);
  if (l->params[0] < OS_KTH || l->params[0] > OS_MODE)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                           "ORDER_STAT: unknown statistic p0 = %lld", (long long)l->params[0]);
  if (j.g.len == 0 || (l->params[0] == OS_KTH && (l->params[1] < 0 || l->params[1] >= j.g.len)))
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "ORDER_STAT: k = %lld out of range for rows of %lld",
                           (long long)l->params[1], (long long)j.g.len);
  j.scratch = (size_t)j.g.len * (ref ? 8 : 2 * sizeof(nrt_sort_pair) + 8);
  return run_rows(&j);
}

/* ---- UNIQUE_SLICES -------------------------------------------------------------
 * Slices become rows of keys; a stable merge sort of slice numbers with a
 * lexicographic comparison orders them; one pass groups them. Serial: the
 * grouping is a scan, and the sort dominates only for huge inputs. */
enum { UQ_PERM = 0, UQ_GROUP = 1, UQ_STARTS = 2, UQ_COUNT = 3, UQ_IN = 4 };

typedef struct slices {
  const uint64_t *key; /* n x m */
  int64_t m;
  bool fl;
} slices;

static int slice_cmp(const slices *s, int64_t a, int64_t b) {
  const uint64_t *x = s->key + a * s->m, *y = s->key + b * s->m;
  for (int64_t i = 0; i < s->m; i++)
    if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
  return 0;
}

static bool slice_equal(const slices *s, int64_t a, int64_t b) {
  const uint64_t *x = s->key + a * s->m, *y = s->key + b * s->m;
  for (int64_t i = 0; i < s->m; i++)
    if (x[i] != y[i] || key_is_nan(x[i], s->fl)) return false;
  return true;
}

static void sort_slices(const slices *s, int64_t *idx, int64_t *tmp, int64_t n) {
  for (int64_t w = 1; w < n; w *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * w) {
      int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
      int64_t i = lo, k = mid, o = lo;
      while (i < mid && k < hi) tmp[o++] = slice_cmp(s, idx[k], idx[i]) < 0 ? idx[k++] : idx[i++];
      while (i < mid) tmp[o++] = idx[i++];
      while (k < hi) tmp[o++] = idx[k++];
    }
    memcpy(idx, tmp, (size_t)n * sizeof *idx);
  }
}

static nrt_status unique_op(const nrt_launch *l) {
  nrt_status st = check_counts(l, 4);
  if (st != NRT_SUCCESS) return st;
  for (int k = 0; k < 4; k++)
    if (l->operands[k].dtype != NRT_INT64)
      return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "UNIQUE_SLICES: output %d must be int64", k);
  if (l->ndim != 2) return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "UNIQUE_SLICES: sizes must be {n, m}");
  int64_t n = l->sizes[0], m = l->sizes[1];
  const nrt_operand *in = &l->operands[UQ_IN];
  if (n == 0) {
    /* No slices: no groups (the outputs may be empty allocations). */
    int64_t zero = 0;
    if (l->operands[UQ_COUNT].data) memcpy(l->operands[UQ_COUNT].data, &zero, 8);
    if (l->operands[UQ_STARTS].data) memcpy(l->operands[UQ_STARTS].data, &zero, 8);
    return NRT_SUCCESS;
  }
  bool ref = nrt_kernels_reference();
  uint64_t *key = malloc((size_t)(n * m + 1) * 8);
  int64_t *perm = malloc((size_t)(2 * n + 1) * 8);
  if (!key || !perm) {
    free(key);
    free(perm);
    return oom(l);
  }
  for (int64_t i = 0; i < n; i++) {
    const char *p = (const char *)in->data + i * in->strides[0];
    if (ref)
      for (int64_t e = 0; e < m; e++) key[i * m + e] = ref_key(p + e * in->strides[1], in->dtype);
    else
      load_keys(key + i * m, p, in->strides[1], in->dtype, m);
  }
  slices s = {key, m, nrt_dtype_is_floating(in->dtype)};
  for (int64_t i = 0; i < n; i++) perm[i] = i;
  if (l->params[0]) {
    if (ref) {
      /* Reference: insertion sort (stable, quadratic). */
      for (int64_t i = 1; i < n; i++) {
        int64_t x = perm[i], k = i;
        for (; k > 0 && slice_cmp(&s, perm[k - 1], x) > 0; k--) perm[k] = perm[k - 1];
        perm[k] = x;
      }
    } else {
      sort_slices(&s, perm, perm + n, n);
    }
  }
  char *out[4];
  int64_t os[4];
  for (int k = 0; k < 4; k++) {
    out[k] = l->operands[k].data;
    os[k] = l->operands[k].strides[0];
  }
  int64_t count = 0, head = 0;
  for (int64_t i = 0; i < n; i++) {
    if (i == 0 || !slice_equal(&s, perm[i], perm[head])) {
      memcpy(out[UQ_STARTS] + count * os[UQ_STARTS], &i, 8);
      head = i;
      count++;
    }
    int64_t g = count - 1;
    memcpy(out[UQ_PERM] + i * os[UQ_PERM], &perm[i], 8);
    memcpy(out[UQ_GROUP] + i * os[UQ_GROUP], &g, 8);
  }
  memcpy(out[UQ_STARTS] + count * os[UQ_STARTS], &n, 8);
  memcpy(out[UQ_COUNT], &count, 8);
  free(key);
  free(perm);
  return NRT_SUCCESS;
}

/* ---- SEARCHSORTED ---------------------------------------------------------------
 * PyTorch's bounds: the search moves right past boundary b while
 * !(b >= v) (left) or !(b > v) (right). Spelled as negations, a NaN value
 * (or boundary) moves the search right, as in PyTorch. */
enum { SS_OUT = 0, SS_VAL = 1, SS_BND = 2, SS_SORTER = 3 };

typedef struct ss_plan {
  const nrt_launch *l;
  int64_t rows, cols, nb;
  bool right, sorter, fl;
} ss_plan;

/* Boundary j (through the sorter) of the row at bp/sp. */
static inline const char *ss_bnd(const ss_plan *p, const char *bp, const char *sp, int64_t j) {
  const nrt_launch *l = p->l;
  if (p->sorter) {
    int64_t at;
    memcpy(&at, sp + j * l->operands[SS_SORTER].strides[1], 8);
    j = at;
  }
  return bp + j * l->operands[SS_BND].strides[1];
}

/* Whether the search moves right past boundary b for value v. */
static inline bool ss_go_right_f(double b, double v, bool right) { return right ? !(b > v) : !(b >= v); }
static inline bool ss_go_right_i(int64_t b, int64_t v, bool right) { return right ? b <= v : b < v; }

static int64_t ss_one(const ss_plan *p, const char *vp, const char *bp, const char *sp, bool ref) {
  nrt_dtype dt = p->l->operands[SS_VAL].dtype;
  double vf = 0;
  int64_t vi = 0;
  if (p->fl) vf = nrt_ref_load_f64(vp, dt);
  else vi = nrt_ref_load_i64(vp, dt);
#define GO_RIGHT(j)                                                                      \
  (p->fl ? ss_go_right_f(nrt_ref_load_f64(ss_bnd(p, bp, sp, j), dt), vf, p->right) \
         : ss_go_right_i(nrt_ref_load_i64(ss_bnd(p, bp, sp, j), dt), vi, p->right))
  if (ref) {
    /* Reference: a linear scan for the first position not passed. */
    int64_t j = 0;
    while (j < p->nb && GO_RIGHT(j)) j++;
    return j;
  }
  int64_t lo = 0, hi = p->nb;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (GO_RIGHT(mid)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
#undef GO_RIGHT
}

static void ss_rows(const ss_plan *p, int64_t begin, int64_t end, bool ref) {
  const nrt_launch *l = p->l;
  const nrt_operand *o = l->operands;
  for (int64_t r = begin; r < end; r++) {
    const char *vp = (const char *)o[SS_VAL].data + r * o[SS_VAL].strides[0];
    const char *bp = (const char *)o[SS_BND].data + r * o[SS_BND].strides[0];
    const char *sp = p->sorter ? (const char *)o[SS_SORTER].data + r * o[SS_SORTER].strides[0] : NULL;
    char *op = (char *)o[SS_OUT].data + r * o[SS_OUT].strides[0];
    for (int64_t c = 0; c < p->cols; c++) {
      int64_t pos = ss_one(p, vp + c * o[SS_VAL].strides[1], bp, sp, ref);
      store_index(op + c * o[SS_OUT].strides[1], o[SS_OUT].dtype, pos);
    }
  }
}

static void ss_range(void *ctx, int64_t begin, int64_t end) { ss_rows(ctx, begin, end, false); }

static nrt_status searchsorted_op(const nrt_launch *l) {
  nrt_status st = check_counts(l, 1);
  if (st == NRT_SUCCESS) st = check_index_dtype(l, SS_OUT);
  if (st != NRT_SUCCESS) return st;
  if (l->ndim != 2) return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "SEARCHSORTED: sizes must be {rows, cols}");
  if (l->operands[SS_VAL].dtype != l->operands[SS_BND].dtype)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "SEARCHSORTED: values and boundaries must share a dtype");
  ss_plan p = {l, l->sizes[0], l->sizes[1], l->params[1], l->params[0] != 0, l->ninputs == 3,
               nrt_dtype_is_floating(l->operands[SS_VAL].dtype)};
  if (p.sorter && l->operands[SS_SORTER].dtype != NRT_INT64)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "SEARCHSORTED: the sorter must be int64");
  if (p.nb < 0) return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "SEARCHSORTED: negative boundary count");
  if (p.rows == 0 || p.cols == 0) return NRT_SUCCESS;
  if (nrt_kernels_reference()) {
    ss_rows(&p, 0, p.rows, true);
    return NRT_SUCCESS;
  }
  int64_t grain = p.cols >= 4096 ? 1 : 4096 / p.cols;
  nrt_parallel_for(p.rows, grain, ss_range, &p);
  return NRT_SUCCESS;
}

/* ---- HISTOGRAM ------------------------------------------------------------------
 * PyTorch's bin selection, including its arithmetic: the linear position
 * (x - first) * (edges - 1) / (last - first) is evaluated in the points'
 * dtype (float32 in float, 16-bit types rounded after every operation),
 * since an element near an edge may land in a different bin otherwise.
 * Counts accumulate serially in double (in point order), then are
 * rounded once to the output dtype. */
enum { HG_OUT = 0, HG_IN = 1, HG_EDGES = 2, HG_WEIGHT = 3 };
enum { HG_BINARY = 0, HG_LINEAR = 1, HG_LINEAR_LOCAL = 2 };

/* Rounds to the representable value of dtype dt (the arithmetic type). */
static double round_to(double x, nrt_dtype dt) {
  switch (dt) {
  case NRT_FLOAT32: return (float)x;
  case NRT_BFLOAT16: return nrt_k_bf16_to_f32(nrt_k_f32_to_bf16((float)x));
  case NRT_FLOAT16: return nrt_k_f16_to_f32(nrt_k_f32_to_f16((float)x));
  default: return x;
  }
}

/* Upper bound in edges[lo, hi): the first position with edge > x. */
static int64_t upper_bound(const double *e, int64_t lo, int64_t hi, double x, bool linear_scan) {
  if (linear_scan) {
    while (lo < hi && !(e[lo] > x)) lo++;
    return lo;
  }
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (!(e[mid] > x)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static nrt_status histogram_op(const nrt_launch *l) {
  nrt_status st = check_counts(l, 1);
  if (st != NRT_SUCCESS) return st;
  if (l->ndim != 2) return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "HISTOGRAM: sizes must be {N, D}");
  int64_t N = l->sizes[0], D = l->sizes[1], algo = l->params[0];
  if (D < 1 || D > NRT_MAX_DIMS)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "HISTOGRAM: D = %lld outside 1..%d", (long long)D, NRT_MAX_DIMS);
  if (algo < HG_BINARY || algo > HG_LINEAR_LOCAL)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "HISTOGRAM: unknown bin selection p0 = %lld", (long long)algo);
  const nrt_operand *o = l->operands;
  nrt_dtype dt = o[HG_IN].dtype;
  bool ref = nrt_kernels_reference(), weighted = l->ninputs == 3;
  int64_t total_edges = 0, nbins = 1, off[NRT_MAX_DIMS];
  for (int64_t d = 0; d < D; d++) {
    if (l->aux[d] < 2)
      return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "HISTOGRAM: dim %lld has fewer than 2 edges", (long long)d);
    off[d] = total_edges;
    total_edges += l->aux[d];
    nbins *= l->aux[d] - 1;
  }
  double *edges = malloc((size_t)total_edges * sizeof(double));
  double *hist = calloc((size_t)nbins, sizeof(double));
  if (!edges || !hist) {
    free(edges);
    free(hist);
    return oom(l);
  }
  for (int64_t i = 0; i < total_edges; i++)
    edges[i] = nrt_ref_load_f64((const char *)o[HG_EDGES].data + i * o[HG_EDGES].strides[0], o[HG_EDGES].dtype);
  for (int64_t i = 0; i < N; i++) {
    int64_t flat = 0;
    bool skip = false;
    for (int64_t d = 0; d < D && !skip; d++) {
      double x = nrt_ref_load_f64((const char *)o[HG_IN].data + i * o[HG_IN].strides[0] + d * o[HG_IN].strides[1], dt);
      const double *e = edges + off[d];
      int64_t ne = l->aux[d];
      double first = e[0], last = e[ne - 1];
      if (!(x >= first && x <= last)) {
        skip = true;
        break;
      }
      int64_t pos;
      if (algo == HG_BINARY) {
        pos = upper_bound(e, 0, ne, x, ref) - 1;
      } else {
        double t = round_to(round_to(x - first, dt) * round_to((double)(ne - 1), dt), dt);
        double q = round_to(t / round_to(last - first, dt), dt);
        pos = nrt_k_f64_to_i64(q);
        if (algo == HG_LINEAR_LOCAL) {
          int64_t lo = pos - 1 > 0 ? pos - 1 : 0, hi = pos + 2 < ne ? pos + 2 : ne;
          pos = upper_bound(e, lo, hi, x, ref) - 1;
        }
      }
      if (pos == ne - 1) pos--;
      /* Guards the linear rule against a degenerate edge sequence. */
      if (pos < 0) pos = 0;
      if (pos > ne - 2) pos = ne - 2;
      flat = flat * (ne - 1) + pos;
    }
    if (skip) continue;
    double w = weighted ? nrt_ref_load_f64((const char *)o[HG_WEIGHT].data + i * o[HG_WEIGHT].strides[0], o[HG_WEIGHT].dtype) : 1.0;
    hist[flat] += w;
  }
  /* Row-major bin number -> strided output. */
  for (int64_t b = 0; b < nbins; b++) {
    int64_t rem = b, offset = 0;
    for (int64_t d = D - 1; d >= 0; d--) {
      int64_t nb = l->aux[d] - 1;
      offset += (rem % nb) * o[HG_OUT].strides[d];
      rem /= nb;
    }
    nrt_ref_store_f64((char *)o[HG_OUT].data + offset, o[HG_OUT].dtype, hist[b]);
  }
  free(edges);
  free(hist);
  return NRT_SUCCESS;
}

/* ---- REPEAT_INTERLEAVE ----------------------------------------------------------- */
static nrt_status repeat_interleave_op(const nrt_launch *l) {
  nrt_status st = check_int64_output(l);
  if (st != NRT_SUCCESS) return st;
  int64_t n = l->ndim > 0 ? l->sizes[0] : 1, total = l->params[0], sum = 0;
  const nrt_operand *in = &l->operands[1];
  for (int64_t i = 0; i < n; i++) {
    int64_t r = nrt_ref_load_i64((const char *)in->data + i * in->strides[0], in->dtype);
    if (r < 0) return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "repeats can not be negative");
    sum += r;
  }
  if (sum != total)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "allocated size does not match required size (%lld vs %lld)",
                           (long long)total, (long long)sum);
  char *out = l->operands[0].data;
  int64_t ost = l->operands[0].strides[0], o = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t r = nrt_ref_load_i64((const char *)in->data + i * in->strides[0], in->dtype);
    for (int64_t k = 0; k < r; k++, o++) memcpy(out + o * ost, &i, 8);
  }
  return NRT_SUCCESS;
}

/* ---- NONZERO_STATIC ---------------------------------------------------------------- */
static nrt_status nonzero_static_op(const nrt_launch *l) {
  nrt_status st = check_int64_output(l);
  if (st != NRT_SUCCESS) return st;
  int64_t size = l->params[0], fillv = l->scalars[0].i, numel = 1, found = 0;
  for (int d = 0; d < l->ndim; d++) numel *= l->sizes[d];
  const nrt_operand *in = &l->operands[1];
  char *out = l->operands[0].data;
  int64_t rs = l->operands[0].strides[0], cs = l->operands[0].strides[1];
  bool fl = nrt_dtype_is_floating(in->dtype);
  for (int64_t i = 0; i < numel && found < size; i++) {
    int64_t rem = i, coord[NRT_MAX_DIMS], offset = 0;
    for (int d = l->ndim - 1; d >= 0; d--) {
      coord[d] = rem % l->sizes[d];
      rem /= l->sizes[d];
      offset += coord[d] * in->strides[d];
    }
    const char *p = (const char *)in->data + offset;
    bool nz = fl ? nrt_ref_load_f64(p, in->dtype) != 0 : nrt_ref_load_i64(p, in->dtype) != 0;
    if (!nz) continue;
    for (int d = 0; d < l->ndim; d++) memcpy(out + found * rs + d * cs, &coord[d], 8);
    found++;
  }
  for (; found < size; found++)
    for (int d = 0; d < l->ndim; d++) memcpy(out + found * rs + d * cs, &fillv, 8);
  return NRT_SUCCESS;
}

nrt_status nrt_select_execute(const nrt_launch *l) {
  /* Switch on (int)l->op: family ids are not enumerators of nrt_op. */
  switch ((int)l->op) {
  case NRT_OP(CUMMAX):
  case NRT_OP(CUMMIN): return cumext_op(l);
  case NRT_OP(LOGCUMSUMEXP): return lcse_op(l);
  case NRT_OP(ORDER_STAT): return order_stat_op(l);
  case NRT_OP(UNIQUE_SLICES): return unique_op(l);
  case NRT_OP(SEARCHSORTED): return searchsorted_op(l);
  case NRT_OP(HISTOGRAM): return histogram_op(l);
  case NRT_OP(REPEAT_INTERLEAVE): return repeat_interleave_op(l);
  case NRT_OP(NONZERO_STATIC): return nonzero_static_op(l);
  default: break;
  }
  return nrt_kernel_fail(NRT_ERROR_UNSUPPORTED, "select: op %s has no kernel", nrt_op_name(l->op));
}
