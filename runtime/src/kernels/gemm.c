/* GEMM: C[b] = alpha * A[b] @ B[b] + beta * bias[b] over arbitrary byte
 * strides (transposed and broadcast views included). beta == 0 ignores
 * the bias entirely, NaNs included, as BLAS and PyTorch do.
 *
 * Floating types take the packed path (the classic Goto/BLIS structure):
 * C is cut into MC x NC tiles, one parallel task each; for every KC-deep
 * slice the task packs its A rows into MR-row panels and its B columns
 * into NR-column panels (converting bf16/f16/f64 to f32 while packing, so
 * every input dtype reaches the same micro-kernel), then runs the
 * micro-kernel over the panels: A panel in L1, B panels streaming from L2.
 * Accumulation is float32 as in PyTorch; float64 operands therefore run
 * at float32 precision (DESIGN.md 3). The tile accumulates in C itself
 * when C is unit-stride float32, otherwise in a float scratch tile that is
 * converted out at the end.
 *
 * Integer GEMM and the reference mode use a plain triple loop
 * (accumulating in int64 / double). */
#pragma GCC optimize("O3,no-trapping-math,no-math-errno")
#include <stdlib.h>
#include "kernels/gemm.h"

/* ---- portable micro-kernel --------------------------------------------- */

#define MRS 4
#define NRS 16

static void ukernel_scalar(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                           float alpha, int accumulate) {
  float acc[MRS][NRS];
  for (int i = 0; i < MRS; i++)
    for (int j = 0; j < NRS; j++) acc[i][j] = 0.0f;
  for (int64_t k = 0; k < kc; k++) {
    for (int i = 0; i < MRS; i++)
      for (int j = 0; j < NRS; j++) acc[i][j] += a[i] * b[j];
    a += MRS;
    b += NRS;
  }
  for (int i = 0; i < MRS; i++)
    for (int j = 0; j < NRS; j++)
      c[i * ldc + j] = accumulate ? c[i * ldc + j] + alpha * acc[i][j] : alpha * acc[i][j];
}

static const nrt_gemm_ukernel ukernel_portable = {
    .name = "portable-4x16", .mr = MRS, .nr = NRS, .kc = 256, .mc = 64, .nc = 256,
    .fn = ukernel_scalar};

static const nrt_gemm_ukernel *pick_ukernel(void) {
  switch (nrt_kernels_isa()) {
  case NRT_ISA_AVX512: return &nrt_gemm_ukernel_avx512;
  case NRT_ISA_AVX2: return &nrt_gemm_ukernel_avx2;
  default: return &ukernel_portable;
  }
}

/* ---- plan ------------------------------------------------------------------ */

typedef struct gemm_plan {
  const nrt_launch *l;
  const nrt_gemm_ukernel *uk;
  int64_t batch, M, N, K;
  const nrt_operand *C, *A, *B, *bias; /* bias NULL when beta == 0 */
  float alpha, beta;
  int64_t MC, NC, KC;
  int64_t mpart, mparts, ntiles; /* a task: mpart rows x NC columns of one batch */
  bool c_direct;
} gemm_plan;

#define OP_BYTE(o, b, i, j, si, sj) \
  ((char *)(o)->data + (b) * (o)->strides[0] + (i) * (o)->strides[si] + (j) * (o)->strides[sj])

/* ---- packing ----------------------------------------------------------------
 * Panels are padded with zeros to a full MR / NR so the micro-kernel never
 * sees a partial panel; its extra rows/columns are simply not stored. */

static void pack_a(const gemm_plan *p, int64_t b, int64_t m0, int64_t mlen, int64_t k0,
                   int64_t kc, float *dst, float *tmp) {
  const nrt_operand *A = p->A;
  int mr = p->uk->mr;
  int64_t sm = A->strides[1], sk = A->strides[2];
  for (int64_t ip = 0; ip < mlen; ip += mr) {
    int64_t rows = mlen - ip < mr ? mlen - ip : mr;
    float *panel = dst + ip * kc;
    if (llabs(sm) < llabs(sk)) {
      /* A is column-major-ish: each k gives rows contiguous in memory. */
      for (int64_t k = 0; k < kc; k++) {
        float *d = panel + k * mr;
        nrt_load_f32(d, OP_BYTE(A, b, m0 + ip, k0 + k, 1, 2), sm, A->dtype, rows);
        for (int64_t r = rows; r < mr; r++) d[r] = 0.0f;
      }
      continue;
    }
    for (int64_t r = 0; r < rows; r++) {
      const char *src = OP_BYTE(A, b, m0 + ip + r, k0, 1, 2);
      const float *row = (const float *)src;
      if (A->dtype != NRT_FLOAT32 || sk != 4) {
        nrt_load_f32(tmp, src, sk, A->dtype, kc);
        row = tmp;
      }
      for (int64_t k = 0; k < kc; k++) panel[k * mr + r] = row[k];
    }
    for (int64_t r = rows; r < mr; r++)
      for (int64_t k = 0; k < kc; k++) panel[k * mr + r] = 0.0f;
  }
}

static void pack_b(const gemm_plan *p, int64_t b, int64_t n0, int64_t nlen, int64_t k0,
                   int64_t kc, float *dst, float *tmp) {
  const nrt_operand *B = p->B;
  int nr = p->uk->nr;
  int64_t sk = B->strides[1], sn = B->strides[2];
  for (int64_t jp = 0; jp < nlen; jp += nr) {
    int64_t cols = nlen - jp < nr ? nlen - jp : nr;
    float *panel = dst + jp * kc;
    if (llabs(sn) <= llabs(sk)) {
      bool plain = B->dtype == NRT_FLOAT32 && sn == 4;
      for (int64_t k = 0; k < kc; k++) {
        float *d = panel + k * nr;
        const char *src = OP_BYTE(B, b, k0 + k, n0 + jp, 1, 2);
        if (plain) /* a short inline copy beats a memcpy call per row */
          for (int64_t c = 0; c < cols; c++) d[c] = ((const float *)src)[c];
        else
          nrt_load_f32(d, src, sn, B->dtype, cols);
        for (int64_t c = cols; c < nr; c++) d[c] = 0.0f;
      }
      continue;
    }
    /* Transposed B (x @ W^T with W row-major): columns are contiguous. */
    for (int64_t c = 0; c < cols; c++) {
      const char *src = OP_BYTE(B, b, k0, n0 + jp + c, 1, 2);
      const float *col = (const float *)src;
      if (B->dtype != NRT_FLOAT32 || sk != 4) {
        nrt_load_f32(tmp, src, sk, B->dtype, kc);
        col = tmp;
      }
      for (int64_t k = 0; k < kc; k++) panel[k * nr + c] = col[k];
    }
    for (int64_t c = cols; c < nr; c++)
      for (int64_t k = 0; k < kc; k++) panel[k * nr + c] = 0.0f;
  }
}

/* ---- one task: mpart rows x NC columns of one batch entry ------------------ */

typedef struct gemm_ws {
  float *a, *b, *c, *tmp, *edge;
  void *block;
} gemm_ws;

static bool ws_alloc(const gemm_plan *p, gemm_ws *w) {
  const nrt_gemm_ukernel *uk = p->uk;
  size_t mc = (size_t)p->MC, nc = (size_t)p->NC, kc = (size_t)p->KC;
  size_t na = mc * kc, nb = nc * kc, ncc = p->c_direct ? 0 : (size_t)p->mpart * nc;
  size_t nt = kc > nc ? kc : nc, ne = (size_t)(uk->mr * uk->nr);
  /* Each buffer starts on a 64-byte line: panels are read with aligned loads. */
  size_t total = (na + 15) / 16 * 16 + (nb + 15) / 16 * 16 + (ncc + 15) / 16 * 16 +
                 (nt + 15) / 16 * 16 + (ne + 15) / 16 * 16;
  w->block = aligned_alloc(64, total * sizeof(float));
  if (!w->block) return false;
  float *f = w->block;
  w->a = f;
  f += (na + 15) / 16 * 16;
  w->b = f;
  f += (nb + 15) / 16 * 16;
  w->c = f;
  f += (ncc + 15) / 16 * 16;
  w->tmp = f;
  f += (nt + 15) / 16 * 16;
  w->edge = f;
  return true;
}

static void run_task(const gemm_plan *p, gemm_ws *w, int64_t task) {
  const nrt_gemm_ukernel *uk = p->uk;
  int64_t per_batch = p->mparts * p->ntiles;
  int64_t b = task / per_batch, t = task % per_batch;
  int64_t m0 = (t / p->ntiles) * p->mpart, n0 = (t % p->ntiles) * p->NC;
  int64_t mlen = p->M - m0 < p->mpart ? p->M - m0 : p->mpart;
  int64_t nlen = p->N - n0 < p->NC ? p->N - n0 : p->NC;
  const nrt_operand *C = p->C;
  if (mlen <= 0) return;

  float *ct;
  int64_t ldc;
  if (p->c_direct) {
    ct = (float *)OP_BYTE(C, b, m0, n0, 1, 2);
    ldc = C->strides[1] / 4;
  } else {
    ct = w->c;
    ldc = nlen;
  }

  int accumulate = 0;
  if (p->bias) {
    /* C = beta * bias first, so the tile can accumulate into itself; a
     * bias that is C itself (addmm_) is read before it is overwritten. */
    const nrt_operand *bi = p->bias;
    for (int64_t i = 0; i < mlen; i++) {
      nrt_load_f32(w->tmp, OP_BYTE(bi, b, m0 + i, n0, 1, 2), bi->strides[2], bi->dtype, nlen);
      float *row = ct + i * ldc;
      for (int64_t j = 0; j < nlen; j++) row[j] = p->beta * w->tmp[j];
    }
    accumulate = 1;
  } else if (p->K == 0) {
    for (int64_t i = 0; i < mlen; i++)
      for (int64_t j = 0; j < nlen; j++) ct[i * ldc + j] = 0.0f;
  }

  /* Goto order: a KC x NC slice of B is packed once and reused by every
   * MC x KC block of A. */
  for (int64_t k0 = 0; k0 < p->K; k0 += p->KC) {
    int64_t kc = p->K - k0 < p->KC ? p->K - k0 : p->KC;
    pack_b(p, b, n0, nlen, k0, kc, w->b, w->tmp);
    for (int64_t i0 = 0; i0 < mlen; i0 += p->MC) {
      int64_t mc = mlen - i0 < p->MC ? mlen - i0 : p->MC;
      pack_a(p, b, m0 + i0, mc, k0, kc, w->a, w->tmp);
      for (int64_t ip = 0; ip < mc; ip += uk->mr) {
        int64_t rows = mc - ip < uk->mr ? mc - ip : uk->mr;
        const float *ap = w->a + ip * kc;
        for (int64_t jp = 0; jp < nlen; jp += uk->nr) {
          int64_t cols = nlen - jp < uk->nr ? nlen - jp : uk->nr;
          const float *bp = w->b + jp * kc;
          float *cb = ct + (i0 + ip) * ldc + jp;
          if (rows == uk->mr && cols == uk->nr) {
            uk->fn(kc, ap, bp, cb, ldc, p->alpha, accumulate);
          } else {
            uk->fn(kc, ap, bp, w->edge, uk->nr, p->alpha, 0);
            for (int64_t i = 0; i < rows; i++)
              for (int64_t j = 0; j < cols; j++)
                cb[i * ldc + j] = accumulate ? cb[i * ldc + j] + w->edge[i * uk->nr + j]
                                             : w->edge[i * uk->nr + j];
          }
        }
      }
    }
    accumulate = 1;
  }

  if (!p->c_direct)
    for (int64_t i = 0; i < mlen; i++)
      nrt_store_f32(OP_BYTE(C, b, m0 + i, n0, 1, 2), C->strides[2], C->dtype, ct + i * ldc, nlen);
}

typedef struct gemm_job {
  const gemm_plan *p;
  _Atomic int failed;
} gemm_job;

static void gemm_range(void *ctx, int64_t begin, int64_t end) {
  gemm_job *job = ctx;
  gemm_ws w;
  if (!ws_alloc(job->p, &w)) {
    job->failed = 1;
    return;
  }
  for (int64_t t = begin; t < end; t++) run_task(job->p, &w, t);
  free(w.block);
}

/* ---- reference ----------------------------------------------------------------- */

static double ref_load(const nrt_operand *o, int64_t b, int64_t i, int64_t j) {
  /* float32 precision for every floating input, as the device computes */
  return (float)nrt_ref_load_f64(OP_BYTE(o, b, i, j, 1, 2), o->dtype);
}

static void gemm_reference_f(const gemm_plan *p) {
  const nrt_launch *l = p->l;
  double alpha = l->scalars[0].f, beta = l->scalars[1].f;
  for (int64_t b = 0; b < p->batch; b++)
    for (int64_t i = 0; i < p->M; i++)
      for (int64_t j = 0; j < p->N; j++) {
        double acc = 0.0;
        for (int64_t k = 0; k < p->K; k++) acc += ref_load(p->A, b, i, k) * ref_load(p->B, b, k, j);
        double v = alpha * acc;
        if (p->bias) v += beta * ref_load(p->bias, b, i, j);
        nrt_ref_store_f64(OP_BYTE(p->C, b, i, j, 1, 2), p->C->dtype, v);
      }
}

static void gemm_reference_i(const gemm_plan *p) {
  const nrt_launch *l = p->l;
  int64_t alpha = l->scalars[0].i, beta = l->scalars[1].i;
  for (int64_t b = 0; b < p->batch; b++)
    for (int64_t i = 0; i < p->M; i++)
      for (int64_t j = 0; j < p->N; j++) {
        int64_t acc = 0;
        for (int64_t k = 0; k < p->K; k++)
          acc = nrt_wadd(acc, nrt_wmul(nrt_ref_load_i64(OP_BYTE(p->A, b, i, k, 1, 2), p->A->dtype),
                                       nrt_ref_load_i64(OP_BYTE(p->B, b, k, j, 1, 2), p->B->dtype)));
        int64_t v = nrt_wmul(alpha, acc);
        if (p->bias)
          v = nrt_wadd(v, nrt_wmul(beta, nrt_ref_load_i64(OP_BYTE(p->bias, b, i, j, 1, 2),
                                                          p->bias->dtype)));
        nrt_ref_store_i64(OP_BYTE(p->C, b, i, j, 1, 2), p->C->dtype, v);
      }
}

/* ---- entry ------------------------------------------------------------------------- */

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

nrt_status nrt_gemm_execute(const nrt_launch *l) {
  gemm_plan p;
  memset(&p, 0, sizeof p);
  p.l = l;
  p.batch = l->sizes[0];
  p.M = l->sizes[1];
  p.N = l->sizes[2];
  p.K = l->sizes[3];
  if (l->noutputs != 1) {
    nrt_set_error_message("GEMM: expected 1 output, got %d", l->noutputs);
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  p.C = &l->operands[0];
  p.A = &l->operands[1];
  p.B = &l->operands[2];
  bool fdomain = nrt_dtype_is_floating(l->compute_dtype);
  bool has_beta = fdomain ? l->scalars[1].f != 0.0 : l->scalars[1].i != 0;
  p.bias = l->ninputs == 3 && has_beta ? &l->operands[3] : NULL;
  if (p.batch == 0 || p.M == 0 || p.N == 0) return NRT_SUCCESS;

  if (!fdomain) {
    gemm_reference_i(&p);
    return NRT_SUCCESS;
  }
  if (nrt_kernels_reference()) {
    gemm_reference_f(&p);
    return NRT_SUCCESS;
  }

  p.uk = pick_ukernel();
  p.alpha = (float)l->scalars[0].f;
  p.beta = (float)l->scalars[1].f;
  p.c_direct = p.C->dtype == NRT_FLOAT32 && p.C->strides[2] == 4 && p.C->strides[1] % 4 == 0;
  int64_t mr = p.uk->mr, nr = p.uk->nr;
  p.KC = p.K < p.uk->kc ? (p.K > 0 ? p.K : 1) : p.uk->kc;
  p.MC = p.M < p.uk->mc ? round_up(p.M, mr) : p.uk->mc;

  /* Column tiles of at most NC, evened out (no sliver at the edge) and, when
   * there are few, a multiple of the thread count so no thread idles at
   * the end. Rows are split only when columns and batch cannot feed every
   * thread, or to bound the scratch tile of a converted C. */
  int threads = nrt_pool_threads();
  int64_t nt = (p.N + p.uk->nc - 1) / p.uk->nc;
  int64_t max_nt = (p.N + nr - 1) / nr;
  if (p.batch * nt < 4 * threads && nt % threads != 0) nt = round_up(nt, threads);
  if (nt > max_nt) nt = max_nt;
  p.NC = round_up((p.N + nt - 1) / nt, nr);
  p.ntiles = (p.N + p.NC - 1) / p.NC;
  int64_t mparts = 1;
  if (p.batch * p.ntiles < threads) mparts = (threads + p.batch * p.ntiles - 1) / (p.batch * p.ntiles);
  if (!p.c_direct) {
    int64_t rows_max = (1 << 19) / p.NC; /* 2 MiB of float scratch */
    int64_t need = (p.M + rows_max - 1) / rows_max;
    if (need > mparts) mparts = need;
  }
  int64_t max_mp = (p.M + mr - 1) / mr;
  if (mparts > max_mp) mparts = max_mp;
  p.mpart = round_up((p.M + mparts - 1) / mparts, mr);
  p.mparts = (p.M + p.mpart - 1) / p.mpart;
  if (p.MC > p.mpart) p.MC = p.mpart;

  int64_t ntasks = p.batch * p.mparts * p.ntiles;
  double flops_per_task = 2.0 * (double)p.mpart * (double)p.NC * (double)(p.K > 0 ? p.K : 1);
  /* Below a few hundred thousand flops a hand-off costs more than it saves. */
  int64_t grain = flops_per_task >= 4e5 ? 1 : (int64_t)(4e5 / flops_per_task) + 1;
  gemm_job job = {.p = &p, .failed = 0};
  nrt_parallel_for(ntasks, grain, gemm_range, &job);
  if (job.failed) {
    nrt_set_error_message("GEMM: out of host memory for packing buffers");
    return NRT_ERROR_OUT_OF_MEMORY;
  }
  return NRT_SUCCESS;
}
