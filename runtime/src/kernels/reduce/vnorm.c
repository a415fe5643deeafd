/* NORM p1 = 1: a vector norm of finite nonzero order p into float32,
 * bfloat16 or float16, as PyTorch's CPU computes it (norm_stub,
 * ReduceOpsKernel.cpp, with NormOps / NormOneOps / NormTwoOps of
 * SharedReduceOps.h): terms and their sum in float, so a square of 1e20
 * is inf there and one of 1e-30 is 0 (a double accumulator keeps both,
 * and a gradient masked where the norm is 0 then differs).
 *
 * Per output, as binary_kernel_reduce: acc = 0, acc + term(x) for each
 * reduced element in the launch's linear order (dim 0 fastest), then the
 * root (sqrtf for p = 2, powf(acc, 1 / p) otherwise, none for p = 1). A
 * lone output of at least GRAIN (32768) elements on p2 > 1 CPU threads is
 * cut as at::parallel_for cuts it and the chunk sums added left to right.
 * p = 2 with the input in the output's dtype (float32 or bfloat16) reduced
 * over one unit-stride dim takes the CPU's vectorised last-dim kernel
 * instead: 8 float lanes (its AVX2 build; a bfloat16 vector of 16 adds
 * its two float halves in turn), lanes added left to right, then the tail.
 * An output of one element is |x| (the CPU returns it without squaring:
 * the norm of [1e20] is 1e20) unless p3 = 1: linalg_vector_norm's shortcut
 * tests the reduced dims' sizes, and a 0-d input given a dim has none to
 * test (ATen reads past its empty sizes), so the CPU computes the root of
 * the power there (ord=3 of 1.2e-38 is 0).
 *
 * Operands: the output, then the input; s0 = p. */
#pragma GCC optimize("O3,no-trapping-math,no-math-errno")
#include "kernels/common/common.h"
#include "kernels/reduce/vnorm.h"

#define VN_GRAIN 32768 /* at::internal::GRAIN_SIZE */
#define VN_LANES 8     /* Vectorized<float> in the CPU's AVX2 build */

typedef struct vn_plan {
  const nrt_launch *l;
  nrt_dtype in_dt;
  float p;
  int kd[NRT_MAX_DIMS], rd[NRT_MAX_DIMS], nkd, nrd;
  int64_t nkept, nred, chunk;
  bool lastdim;
  float *partial;
} vn_plan;

static inline float vn_load(nrt_dtype dt, const char *src) {
  switch (dt) {
  case NRT_FLOAT32: return *(const float *)src;
  case NRT_BFLOAT16: return nrt_k_bf16_to_f32(*(const uint16_t *)src);
  case NRT_FLOAT16: return nrt_k_f16_to_f32(*(const uint16_t *)src);
  default: return (float)nrt_ref_load_f64(src, dt);
  }
}

static inline float vn_term(float p, float x) {
  float a = fabsf(x);
  if (p == 1.0f) return a;
  if (p == 2.0f) return x * x;
  return powf(a, p);
}

/* Reduced elements [r0, r1) of the output whose first element is at base. */
static float vn_feed(const vn_plan *p, float acc, const char *base, int64_t r0, int64_t r1) {
  const nrt_launch *l = p->l;
  int64_t size0 = p->nrd > 0 ? l->sizes[p->rd[0]] : 1, st0 = p->nrd > 0 ? l->operands[1].strides[p->rd[0]] : 0;
  int64_t r = r0;
  while (r < r1) {
    int64_t i0 = r % size0, rest = r / size0, off = 0;
    for (int k = 1; k < p->nrd; k++) {
      int d = p->rd[k];
      off += (rest % l->sizes[d]) * l->operands[1].strides[d];
      rest /= l->sizes[d];
    }
    int64_t len = size0 - i0 < r1 - r ? size0 - i0 : r1 - r;
    const char *src = base + off + i0 * st0;
    for (int64_t i = 0; i < len; i++, src += st0) acc = acc + vn_term(p->p, vn_load(p->in_dt, src));
    r += len;
  }
  return acc;
}

/* The CPU's last-dim kernel for p = 2 (see the top). */
static float vn_lastdim(const vn_plan *p, const char *base) {
  int64_t n = p->nred, es = (int64_t)nrt_dtype_size(p->in_dt), vec = p->in_dt == NRT_BFLOAT16 ? 16 : 8;
  float lane[VN_LANES] = {0};
  int64_t d = 0;
  for (; d < n - n % vec; d += vec) {
    for (int k = 0; k < VN_LANES; k++) {
      float x = vn_load(p->in_dt, base + (d + k) * es);
      lane[k] = lane[k] + x * x;
    }
    if (vec == 16)
      for (int k = 0; k < VN_LANES; k++) {
        float x = vn_load(p->in_dt, base + (d + 8 + k) * es);
        lane[k] = lane[k] + x * x;
      }
  }
  float acc = lane[0];
  for (int k = 1; k < VN_LANES; k++) acc = acc + lane[k];
  for (; d < n; d++) {
    float x = vn_load(p->in_dt, base + d * es);
    acc += x * x;
  }
  return acc;
}

static float vn_project(const vn_plan *p, float acc) {
  if (p->p == 1.0f) return acc;
  if (p->p == 2.0f) return sqrtf(acc);
  return powf(acc, 1.0f / p->p);
}

static void vn_offsets(const vn_plan *p, int64_t g, int64_t *in_off, int64_t *out_off) {
  const nrt_launch *l = p->l;
  *in_off = *out_off = 0;
  for (int i = 0; i < p->nkd; i++) {
    int d = p->kd[i];
    int64_t idx = g % l->sizes[d];
    g /= l->sizes[d];
    *in_off += idx * l->operands[1].strides[d];
    *out_off += idx * l->operands[0].strides[d];
  }
}

static void vn_outputs(void *ctx, int64_t b, int64_t e) {
  const vn_plan *p = ctx;
  const nrt_launch *l = p->l;
  for (int64_t g = b; g < e; g++) {
    int64_t in_off, out_off;
    vn_offsets(p, g, &in_off, &out_off);
    const char *base = (const char *)l->operands[1].data + in_off;
    float v;
    if (p->nred == 1 && !l->params[3]) v = fabsf(vn_load(p->in_dt, base));
    else v = vn_project(p, p->lastdim ? vn_lastdim(p, base) : vn_feed(p, 0.0f, base, 0, p->nred));
    nrt_ref_store_f64((char *)l->operands[0].data + out_off, l->operands[0].dtype, v);
  }
}

static void vn_chunks(void *ctx, int64_t b, int64_t e) {
  const vn_plan *p = ctx;
  for (int64_t t = b; t < e; t++) {
    int64_t r0 = t * p->chunk, r1 = r0 + p->chunk < p->nred ? r0 + p->chunk : p->nred;
    p->partial[t] = vn_feed(p, 0.0f, p->l->operands[1].data, r0, r1);
  }
}

nrt_status nrt_reduce_vnorm(const nrt_launch *l) {
  nrt_dtype odt = l->operands[0].dtype;
  double pd = l->scalars[0].f;
  if (l->noutputs != 1 || l->ninputs != 1 || (odt != NRT_FLOAT32 && odt != NRT_BFLOAT16 && odt != NRT_FLOAT16) ||
      !nrt_dtype_is_floating(l->operands[1].dtype) || l->operands[1].dtype == NRT_FLOAT64)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "NORM: p1 = 1 needs one output of float32, bfloat16 or "
                           "float16 and one input of those, got %s <- %s", nrt_dtype_name(odt),
                           nrt_dtype_name(l->operands[1].dtype));
  if (!(pd != 0 && isfinite(pd)) || l->params[2] < 1)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "NORM: p1 = 1 needs a finite nonzero order and p2 >= 1 "
                           "CPU threads, got %g and %lld", pd, (long long)l->params[2]);
  vn_plan p = {.l = l, .in_dt = l->operands[1].dtype, .p = (float)pd, .nkept = 1, .nred = 1};
  for (int d = 0; d < l->ndim; d++) {
    if (l->sizes[d] == 1) continue;
    if (l->operands[0].strides[d] == 0) {
      p.rd[p.nrd++] = d;
      p.nred *= l->sizes[d];
    } else {
      p.kd[p.nkd++] = d;
      p.nkept *= l->sizes[d];
    }
  }
  if (p.nkept == 0 || p.nred == 0) return NRT_SUCCESS; /* the glue fills empty reductions */
  p.lastdim = p.p == 2.0f && p.in_dt == odt && (odt == NRT_FLOAT32 || odt == NRT_BFLOAT16) && p.nrd == 1 &&
              p.rd[0] == 0 && l->operands[1].strides[0] == (int64_t)nrt_dtype_size(p.in_dt);
  bool ref = nrt_kernels_reference();
  int64_t threads = l->params[2];
  if (p.nkept == 1 && !p.lastdim && p.nred >= VN_GRAIN && threads > 1) {
    int64_t tasks = (p.nred + VN_GRAIN - 1) / VN_GRAIN;
    if (tasks > threads) tasks = threads;
    if (tasks > 64)
      return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "NORM: p2 = %lld threads, at most 64", (long long)threads);
    float part[64];
    p.chunk = (p.nred + tasks - 1) / tasks;
    p.partial = part;
    if (ref) vn_chunks(&p, 0, tasks);
    else nrt_parallel_for(tasks, 1, vn_chunks, &p);
    float acc = 0.0f;
    for (int64_t t = 0; t < tasks; t++) acc = acc + part[t];
    int64_t in_off, out_off;
    vn_offsets(&p, 0, &in_off, &out_off);
    nrt_ref_store_f64((char *)l->operands[0].data + out_off, odt, vn_project(&p, acc));
    return NRT_SUCCESS;
  }
  if (ref) {
    vn_outputs(&p, 0, p.nkept);
    return NRT_SUCCESS;
  }
  int64_t grain = p.nred >= VN_GRAIN ? 1 : VN_GRAIN / p.nred;
  nrt_parallel_for(p.nkept, grain, vn_outputs, &p);
  return NRT_SUCCESS;
}
