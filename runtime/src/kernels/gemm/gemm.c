/* GEMM: C[b] = alpha * A[b] @ B[b] + beta * bias[b] over arbitrary byte
 * strides (transposed and broadcast views included). beta == 0 ignores
 * the bias entirely, NaNs included, as BLAS and PyTorch do.
 *
 * Floating types take the packed path (the Goto/BLIS structure). A task
 * owns up to NC columns of C and a range of rows of one batch entry; for
 * every KC-deep slice it packs its B columns into NR-wide panels once,
 * then, MC rows at a time, packs A into MR-row panels and runs the
 * micro-kernel over them: A panel in L1, B panels streaming from L2.
 * Packing converts bf16/f16/f64 to f32, so every dtype reaches the same
 * micro-kernel; when both inputs are bf16 and the CPU has AVX512_BF16,
 * panels keep bf16 pairs for the vdpbf16ps kernel instead. Accumulation is
 * float32 as in PyTorch; float64 operands therefore run at float32
 * precision (DESIGN.md 3). The tile accumulates in C itself when C is
 * unit-stride float32, otherwise in a float scratch tile converted out at
 * the end. Matrix-vector shapes (M or N = 1) skip packing.
 *
 * Integer GEMM and the reference mode use a plain triple loop
 * (accumulating in int64 / double). */
#pragma GCC optimize("O3,no-trapping-math,no-math-errno")
#include <stdlib.h>
#include "kernels/common/gemm_ukernel.h"

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

static const nrt_gemm_ukernel *pick_ukernel(nrt_dtype a, nrt_dtype b) {
  switch (nrt_kernels_isa()) {
  case NRT_ISA_AVX512_BF16:
    if (a == NRT_BFLOAT16 && b == NRT_BFLOAT16) return &nrt_gemm_ukernel_avx512_bf16;
    return &nrt_gemm_ukernel_avx512;
  case NRT_ISA_AVX512: return &nrt_gemm_ukernel_avx512;
  case NRT_ISA_AVX2: return &nrt_gemm_ukernel_avx2;
  default: return &ukernel_portable;
  }
}

/* The float32 micro-kernel for this host (convolution.c drives it itself). */
const nrt_gemm_ukernel *nrt_gemm_ukernel_f32(void) { return pick_ukernel(NRT_FLOAT32, NRT_FLOAT32); }

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
    if (A->dtype == NRT_FLOAT32 && sk == 4 && rows == mr) {
      /* Row-major float32, the common case: read the MR rows side by side
       * so the panel is written in order (transposed in registers with
       * AVX-512). */
      const float *rp[32];
      for (int64_t r = 0; r < rows; r++) rp[r] = (const float *)OP_BYTE(A, b, m0 + ip + r, k0, 1, 2);
      if (p->uk == &nrt_gemm_ukernel_avx512) {
        nrt_gemm_pack_a14_avx512((const void *const *)rp, kc, panel);
      } else {
        for (int64_t k = 0; k < kc; k++)
          for (int r = 0; r < mr; r++) panel[k * mr + r] = rp[r][k];
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
    if (B->dtype == NRT_FLOAT32 && sk == 4 && cols == nr) {
      const float *cp[64];
      for (int64_t c = 0; c < cols; c++) cp[c] = (const float *)OP_BYTE(B, b, k0, n0 + jp + c, 1, 2);
      if (p->uk == &nrt_gemm_ukernel_avx512) {
        nrt_gemm_pack_b32_avx512((const void *const *)cp, kc, panel);
      } else {
        for (int64_t k = 0; k < kc; k++)
          for (int c = 0; c < nr; c++) panel[k * nr + c] = cp[c][k];
      }
      continue;
    }
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

/* bfloat16 pair panels for the AVX512_BF16 kernel: unit (kp, r) holds
 * A[r][2kp] and A[r][2kp+1] (B: B[2kp][c] and B[2kp+1][c]); an odd last k
 * pairs with zero, as do rows and columns past the edge. */
static inline uint16_t bf16_at(const char *p) {
  uint16_t v;
  memcpy(&v, p, 2);
  return v;
}

static void pack_a_bf16(const gemm_plan *p, int64_t b, int64_t m0, int64_t mlen, int64_t k0,
                        int64_t kc, float *dst) {
  const nrt_operand *A = p->A;
  int mr = p->uk->mr;
  int64_t units = (kc + 1) / 2, sm = A->strides[1], sk = A->strides[2];
  for (int64_t ip = 0; ip < mlen; ip += mr) {
    int64_t rows = mlen - ip < mr ? mlen - ip : mr;
    uint16_t *panel = (uint16_t *)(dst + ip * units);
    int64_t kp0 = 0;
    if (sk == 2 && rows == mr) { /* row-major: pairs are contiguous units */
      const void *rp[32];
      for (int64_t r = 0; r < rows; r++) rp[r] = OP_BYTE(A, b, m0 + ip + r, k0, 1, 2);
      kp0 = kc / 2;
      nrt_gemm_pack_a14_avx512(rp, kp0, panel);
    } else if (sm == 2 && rows == mr) { /* column-major (dW = dY^T @ X) */
      kp0 = kc / 2;
      nrt_gemm_pack_a14_bf16_cols_avx512(OP_BYTE(A, b, m0 + ip, k0, 1, 2), sk, kp0, panel);
    }
    for (int64_t kp = kp0; kp < units; kp++)
      for (int64_t r = 0; r < mr; r++) {
        uint16_t lo = 0, hi = 0;
        if (r < rows) {
          const char *e = OP_BYTE(A, b, m0 + ip + r, k0 + 2 * kp, 1, 2);
          lo = bf16_at(e);
          if (2 * kp + 1 < kc) hi = bf16_at(e + sk);
        }
        panel[2 * (kp * mr + r)] = lo;
        panel[2 * (kp * mr + r) + 1] = hi;
      }
  }
}

static void pack_b_bf16(const gemm_plan *p, int64_t b, int64_t n0, int64_t nlen, int64_t k0,
                        int64_t kc, float *dst) {
  const nrt_operand *B = p->B;
  int nr = p->uk->nr;
  int64_t units = (kc + 1) / 2, sk = B->strides[1], sn = B->strides[2];
  for (int64_t jp = 0; jp < nlen; jp += nr) {
    int64_t cols = nlen - jp < nr ? nlen - jp : nr;
    uint16_t *panel = (uint16_t *)(dst + jp * units);
    int64_t kp0 = 0;
    if (sk == 2 && cols == nr) { /* x @ W^T: each column's pairs are contiguous units */
      const void *cp[64];
      for (int64_t c = 0; c < cols; c++) cp[c] = OP_BYTE(B, b, k0, n0 + jp + c, 1, 2);
      kp0 = kc / 2;
      nrt_gemm_pack_b32_avx512(cp, kp0, panel);
    } else if (sn == 2 && cols == nr) { /* row-major: interleave two rows */
      kp0 = kc / 2;
      nrt_gemm_pack_b32_bf16_rows_avx512(OP_BYTE(B, b, k0, n0 + jp, 1, 2), sk, kp0, panel);
    } else if (sn == 2) {
      for (; 2 * kp0 + 1 < kc; kp0++) {
        const char *r0 = OP_BYTE(B, b, k0 + 2 * kp0, n0 + jp, 1, 2), *r1 = r0 + sk;
        uint16_t *d = panel + 2 * kp0 * nr;
        for (int64_t c = 0; c < cols; c++) {
          d[2 * c] = bf16_at(r0 + 2 * c);
          d[2 * c + 1] = bf16_at(r1 + 2 * c);
        }
        for (int64_t c = cols; c < nr; c++) d[2 * c] = d[2 * c + 1] = 0;
      }
    }
    for (int64_t kp = kp0; kp < units; kp++)
      for (int64_t c = 0; c < nr; c++) {
        uint16_t lo = 0, hi = 0;
        if (c < cols) {
          const char *e = OP_BYTE(B, b, k0 + 2 * kp, n0 + jp + c, 1, 2);
          lo = bf16_at(e);
          if (2 * kp + 1 < kc) hi = bf16_at(e + sk);
        }
        panel[2 * (kp * nr + c)] = lo;
        panel[2 * (kp * nr + c) + 1] = hi;
      }
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
    /* panel depth in units: one k, or a pair of k for the bf16 kernel */
    int64_t units = uk->bf16_pairs ? (kc + 1) / 2 : kc;
    if (uk->bf16_pairs) pack_b_bf16(p, b, n0, nlen, k0, kc, w->b);
    else pack_b(p, b, n0, nlen, k0, kc, w->b, w->tmp);
    for (int64_t i0 = 0; i0 < mlen; i0 += p->MC) {
      int64_t mc = mlen - i0 < p->MC ? mlen - i0 : p->MC;
      if (uk->bf16_pairs) pack_a_bf16(p, b, m0 + i0, mc, k0, kc, w->a);
      else pack_a(p, b, m0 + i0, mc, k0, kc, w->a, w->tmp);
      for (int64_t ip = 0; ip < mc; ip += uk->mr) {
        int64_t rows = mc - ip < uk->mr ? mc - ip : uk->mr;
        const float *ap = w->a + ip * units;
        for (int64_t jp = 0; jp < nlen; jp += uk->nr) {
          int64_t cols = nlen - jp < uk->nr ? nlen - jp : uk->nr;
          const float *bp = w->b + jp * units;
          float *cb = ct + (i0 + ip) * ldc + jp;
          if (rows == uk->mr && cols == uk->nr) {
            uk->fn(units, ap, bp, cb, ldc, p->alpha, accumulate);
          } else {
            uk->fn(units, ap, bp, w->edge, uk->nr, p->alpha, 0);
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

/* ---- matrix-vector -------------------------------------------------------------
 * With M == 1 (or N == 1) there is no reuse for packing to pay for: each
 * matrix element is used once. y[i] = sum_k mat[i][k] * v[k] runs as dot
 * products when the matrix's k-stride is 1, or as axpy sweeps when its
 * i-stride is 1, straight from memory. */

typedef struct gemv_job {
  const gemm_plan *p;
  const char *mat;    /* batch 0 */
  int64_t mbs, si, sk; /* matrix batch / i / k strides in bytes */
  const nrt_operand *vec_op;
  int vec_row;        /* vector is A's row (M == 1) or B's column (N == 1) */
  int64_t n, k;       /* length of y and of the sums */
  _Atomic int failed;
} gemv_job;

static float dot_f32(const float *x, const float *y, int64_t n) {
  float acc[16] = {0};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; j++) acc[j] += x[i + j] * y[i + j];
  for (; i < n; i++) acc[0] += x[i] * y[i];
  float s = 0;
  for (int j = 0; j < 16; j++) s += acc[j];
  return s;
}

/* Tasks: (batch, chunk of GEMV_CHUNK outputs). */
#define GEMV_CHUNK 256

static void gemv_range(void *ctx, int64_t begin, int64_t end) {
  gemv_job *g = ctx;
  const gemm_plan *p = g->p;
  int64_t nchunks = (g->n + GEMV_CHUNK - 1) / GEMV_CHUNK;
  float *v = malloc(sizeof(float) * (size_t)(g->k + GEMV_CHUNK + 1));
  if (!v) {
    g->failed = 1;
    return;
  }
  float *y = v + g->k;
  int64_t loaded = -1;
  for (int64_t t = begin; t < end; t++) {
    int64_t b = t / nchunks, i0 = (t % nchunks) * GEMV_CHUNK;
    int64_t ni = g->n - i0 < GEMV_CHUNK ? g->n - i0 : GEMV_CHUNK;
    if (loaded != b) { /* the vector, converted once per batch entry */
      const nrt_operand *vo = g->vec_op;
      if (g->vec_row)
        nrt_load_f32(v, OP_BYTE(vo, b, 0, 0, 1, 2), vo->strides[2], vo->dtype, g->k);
      else
        nrt_load_f32(v, OP_BYTE(vo, b, 0, 0, 1, 2), vo->strides[1], vo->dtype, g->k);
      loaded = b;
    }
    const char *mat = g->mat + b * g->mbs + i0 * g->si;
    if (g->sk == 4) {
      for (int64_t i = 0; i < ni; i++) y[i] = dot_f32((const float *)(mat + i * g->si), v, g->k);
    } else {
      for (int64_t i = 0; i < ni; i++) y[i] = 0.0f;
      for (int64_t k = 0; k < g->k; k++) {
        const float *row = (const float *)(mat + k * g->sk);
        float vk = v[k];
        for (int64_t i = 0; i < ni; i++) y[i] += vk * row[i];
      }
    }
    /* epilogue: alpha, beta * bias, conversion into C */
    const nrt_operand *C = p->C, *bi = p->bias;
    int64_t cst = g->vec_row ? C->strides[2] : C->strides[1];
    char *cp = g->vec_row ? OP_BYTE(C, b, 0, i0, 1, 2) : OP_BYTE(C, b, i0, 0, 1, 2);
    if (bi) {
      float bias[GEMV_CHUNK];
      if (g->vec_row) nrt_load_f32(bias, OP_BYTE(bi, b, 0, i0, 1, 2), bi->strides[2], bi->dtype, ni);
      else nrt_load_f32(bias, OP_BYTE(bi, b, i0, 0, 1, 2), bi->strides[1], bi->dtype, ni);
      for (int64_t i = 0; i < ni; i++) y[i] = p->beta * bias[i] + p->alpha * y[i];
    } else {
      for (int64_t i = 0; i < ni; i++) y[i] = p->alpha * y[i];
    }
    nrt_store_f32(cp, cst, C->dtype, y, ni);
  }
  free(v);
}

/* Returns false when the shape or layout is not a plain float32 GEMV. */
static bool try_gemv(const gemm_plan *p, nrt_status *st) {
  gemv_job g = {.p = p, .failed = 0};
  if (p->M == 1 && p->B->dtype == NRT_FLOAT32) {
    g.mat = p->B->data;
    g.mbs = p->B->strides[0];
    g.si = p->B->strides[2];
    g.sk = p->B->strides[1];
    g.vec_op = p->A;
    g.vec_row = 1;
    g.n = p->N;
  } else if (p->N == 1 && p->A->dtype == NRT_FLOAT32) {
    g.mat = p->A->data;
    g.mbs = p->A->strides[0];
    g.si = p->A->strides[1];
    g.sk = p->A->strides[2];
    g.vec_op = p->B;
    g.vec_row = 0;
    g.n = p->M;
  } else {
    return false;
  }
  if (g.sk != 4 && g.si != 4) return false;
  g.k = p->K;
  int64_t ntasks = p->batch * ((g.n + GEMV_CHUNK - 1) / GEMV_CHUNK);
  int64_t per_task = GEMV_CHUNK * (p->K > 0 ? p->K : 1);
  nrt_parallel_for(ntasks, per_task >= 65536 ? 1 : 65536 / per_task, gemv_range, &g);
  *st = NRT_SUCCESS;
  if (g.failed) {
    nrt_set_error_message("GEMM: out of host memory for a vector");
    *st = NRT_ERROR_OUT_OF_MEMORY;
  }
  return true;
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

  p.uk = pick_ukernel(p.A->dtype, p.B->dtype);
  p.alpha = (float)l->scalars[0].f;
  p.beta = (float)l->scalars[1].f;
  nrt_status gst;
  if ((p.M == 1 || p.N == 1) && try_gemv(&p, &gst)) return gst;
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
