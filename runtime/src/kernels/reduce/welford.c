/* VAR p1 = 1: var_mean / std_mean as PyTorch's CPU computes them
 * (std_var_mean_out -> std_var_stub: binary_kernel_reduce with WelfordOps,
 * aten/src/ATen/native/SharedReduceOps.h and native/cpu/Reduce.h).
 *
 * Both results come from one running (mean, m2, n) in double, fed one
 * element at a time: delta = x - mean, mean += delta / n, m2 += delta *
 * (x - mean). Its mean is not sum / n: 1e18 + 0.5 - 1e18 over three terms
 * has Welford mean 0.166..., and mean() gives 0 (a float cascade sum), so
 * var_mean's second result must come from here, not from mean().
 *
 * Order, as the CPU's: each output takes its reduced elements in the
 * launch's linear order (the iterator's, dim 0 fastest). One output with
 * at least GRAIN (32768) elements and p2 > 1 CPU threads is cut as
 * at::parallel_for cuts it (T = min(threads, ceil(n / GRAIN)) chunks of
 * ceil(n / T)), each chunk from a fresh state, combined left to right
 * with WelfordOps::combine. Every other output is one sequence (the CPU
 * runs those inside its parallel loop over outputs, or serially).
 *
 * Operands: out0 var (or std, p0 = 1), out1 mean, then the input, all one
 * float dtype; s0 the correction. The result is stored as the CPU's
 * project() casts it: double -> the dtype (16-bit via float). */
#pragma GCC optimize("O3,no-trapping-math,no-math-errno")
#include "kernels/common/common.h"
#include "kernels/reduce/welford.h"

#define WF_GRAIN 32768 /* at::internal::GRAIN_SIZE */

typedef struct wf_state {
  double mean, m2, nf;
  int64_t n;
} wf_state;

typedef struct wf_plan {
  const nrt_launch *l;
  nrt_dtype dt;
  const char *in;
  int kd[NRT_MAX_DIMS], rd[NRT_MAX_DIMS], nkd, nrd;
  int64_t nkept, nred;
  int64_t chunk;     /* split of a lone output: elements per chunk */
  wf_state *partial; /* one per chunk */
} wf_plan;

static inline double wf_load(nrt_dtype dt, const char *src) {
  switch (dt) {
  case NRT_FLOAT32: return *(const float *)src;
  case NRT_FLOAT64: return *(const double *)src;
  default: return nrt_ref_load_f64(src, dt);
  }
}

/* WelfordOps::combine: an empty side returns the other unchanged. */
static wf_state wf_combine(wf_state a, wf_state b) {
  if (a.nf == 0) return b;
  if (b.nf == 0) return a;
  double delta = b.mean - a.mean, count = a.nf + b.nf, nb_over_n = b.nf / count;
  wf_state r = {a.mean + delta * nb_over_n, a.m2 + b.m2 + delta * delta * a.nf * nb_over_n, count, -1};
  return r;
}

/* Reduced elements [r0, r1) (linear over the reduced dims, rd[0] fastest)
 * of the output whose first input element is at base, into s. */
static void wf_feed(const wf_plan *p, wf_state *s, const char *base, int64_t r0, int64_t r1) {
  const nrt_launch *l = p->l;
  int in_op = l->noutputs;
  int64_t size0 = p->nrd > 0 ? l->sizes[p->rd[0]] : 1, st0 = p->nrd > 0 ? l->operands[in_op].strides[p->rd[0]] : 0;
  double mean = s->mean, m2 = s->m2;
  int64_t n = s->n;
  int64_t r = r0;
  while (r < r1) {
    /* the offset of r's run along rd[0], then the rest of that run */
    int64_t i0 = r % size0, rest = r / size0, off = 0;
    for (int k = 1; k < p->nrd; k++) {
      int d = p->rd[k];
      off += (rest % l->sizes[d]) * l->operands[in_op].strides[d];
      rest /= l->sizes[d];
    }
    int64_t len = size0 - i0 < r1 - r ? size0 - i0 : r1 - r;
    const char *src = base + off + i0 * st0;
    for (int64_t i = 0; i < len; i++, src += st0) {
      double x = wf_load(p->dt, src);
      n += 1;
      double delta = x - mean;
      mean += delta / (double)n;
      m2 += delta * (x - mean);
    }
    r += len;
  }
  s->mean = mean;
  s->m2 = m2;
  s->n = n;
  s->nf = (double)n;
}

static void wf_offsets(const wf_plan *p, int64_t g, int64_t *in_off, int64_t out_off[2]) {
  const nrt_launch *l = p->l;
  int in_op = l->noutputs;
  *in_off = out_off[0] = out_off[1] = 0;
  for (int i = 0; i < p->nkd; i++) { /* kd[0] fastest */
    int d = p->kd[i];
    int64_t idx = g % l->sizes[d];
    g /= l->sizes[d];
    *in_off += idx * l->operands[in_op].strides[d];
    out_off[0] += idx * l->operands[0].strides[d];
    out_off[1] += idx * l->operands[1].strides[d];
  }
}

/* WelfordOps::project, then the cast to the output dtype. */
static void wf_store(const wf_plan *p, const wf_state *s, const int64_t out_off[2]) {
  const nrt_launch *l = p->l;
  double correction = l->scalars[0].f;
  double divisor = s->nf > correction ? s->nf - correction : 0.0;
  double var = s->m2 / divisor;
  if (l->params[0]) var = sqrt(var);
  nrt_ref_store_f64((char *)l->operands[0].data + out_off[0], l->operands[0].dtype, var);
  nrt_ref_store_f64((char *)l->operands[1].data + out_off[1], l->operands[1].dtype, s->mean);
}

static void wf_outputs(void *ctx, int64_t b, int64_t e) {
  const wf_plan *p = ctx;
  for (int64_t g = b; g < e; g++) {
    int64_t in_off, out_off[2];
    wf_offsets(p, g, &in_off, out_off);
    wf_state s = {0};
    wf_feed(p, &s, p->in + in_off, 0, p->nred);
    wf_store(p, &s, out_off);
  }
}

static void wf_chunks(void *ctx, int64_t b, int64_t e) {
  const wf_plan *p = ctx;
  for (int64_t t = b; t < e; t++) {
    int64_t r0 = t * p->chunk, r1 = r0 + p->chunk < p->nred ? r0 + p->chunk : p->nred;
    wf_state s = {0};
    wf_feed(p, &s, p->in, r0, r1);
    p->partial[t] = s;
  }
}

nrt_status nrt_reduce_welford(const nrt_launch *l) {
  if (l->noutputs != 2 || l->ninputs != 1)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "VAR: p1 = 1 expects 2 outputs (var, mean) and 1 input, got %d "
                           "and %d", l->noutputs, l->ninputs);
  nrt_dtype dt = l->operands[2].dtype;
  bool fl = dt == NRT_FLOAT32 || dt == NRT_FLOAT64 || dt == NRT_BFLOAT16 || dt == NRT_FLOAT16;
  if (!fl || l->operands[0].dtype != dt || l->operands[1].dtype != dt)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "VAR: p1 = 1 needs one float dtype for input and outputs, got "
                           "%s -> %s, %s", nrt_dtype_name(dt), nrt_dtype_name(l->operands[0].dtype),
                           nrt_dtype_name(l->operands[1].dtype));
  if (l->params[2] < 1)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "VAR: p2 = %lld is not a CPU thread count",
                           (long long)l->params[2]);
  wf_plan p = {.l = l, .dt = dt, .in = l->operands[2].data, .nkept = 1, .nred = 1};
  for (int d = 0; d < l->ndim; d++) {
    if (l->sizes[d] == 1) continue;
    if (l->operands[0].strides[d] == 0 && l->operands[1].strides[d] == 0) {
      p.rd[p.nrd++] = d;
      p.nred *= l->sizes[d];
    } else {
      p.kd[p.nkd++] = d;
      p.nkept *= l->sizes[d];
    }
  }
  if (p.nkept == 0 || p.nred == 0) return NRT_SUCCESS; /* the glue fills empty reductions */
  bool ref = nrt_kernels_reference();
  int64_t threads = l->params[2];
  if (p.nkept == 1 && p.nred >= WF_GRAIN && threads > 1) {
    int64_t tasks = (p.nred + WF_GRAIN - 1) / WF_GRAIN;
    if (tasks > threads) tasks = threads;
    p.chunk = (p.nred + tasks - 1) / tasks;
    wf_state part[64];
    if (tasks > 64)
      return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "VAR: p2 = %lld threads, at most 64", (long long)threads);
    p.partial = part;
    if (ref) wf_chunks(&p, 0, tasks);
    else nrt_parallel_for(tasks, 1, wf_chunks, &p);
    wf_state s = {0};
    for (int64_t t = 0; t < tasks; t++) s = wf_combine(s, part[t]);
    int64_t out_off[2];
    int64_t in_off;
    wf_offsets(&p, 0, &in_off, out_off);
    wf_store(&p, &s, out_off);
    return NRT_SUCCESS;
  }
  if (ref) {
    wf_outputs(&p, 0, p.nkept);
    return NRT_SUCCESS;
  }
  int64_t grain = p.nred >= WF_GRAIN ? 1 : WF_GRAIN / p.nred;
  nrt_parallel_for(p.nkept, grain, wf_outputs, &p);
  return NRT_SUCCESS;
}
