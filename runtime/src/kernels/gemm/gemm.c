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
#include <pthread.h>
#include <stdatomic.h>
#include <math.h>
#include <stdlib.h>
#include "kernels/common/gemm_ukernel.h"
#include "kernels/gemm/cgemm.h"
#include "kernels/gemm/loop.h"
#include "nrt/ops/gemm.h"

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
  /* the AVX-512 float32 kernel through run_strided_slice, reading A / B
   * in place when set (see the choice in nrt_gemm_execute); a_direct
   * also for the bfloat16 pair kernel */
  bool strided, a_direct, b_direct;
  /* C = fma(beta, bias, alpha * A@B), the bias added at the store (see
   * nrt_gemm_execute); otherwise C starts as beta * bias */
  bool bias_last;
} gemm_plan;

#define OP_BYTE(o, b, i, j, si, sj) \
  ((char *)(o)->data + (b) * (o)->strides[0] + (i) * (o)->strides[si] + (j) * (o)->strides[sj])

/* ---- packing ----------------------------------------------------------------
 * Panels are padded with zeros to a full MR / NR so the micro-kernel never
 * sees a partial panel; its extra rows/columns are simply not stored. */

/* One panel of w lanes (A: w = MR rows; B: w = NR columns) over kc depth
 * steps: panel[k * w + i] = element (lane i, depth k) as float32, where the
 * element is at base + i * sl + k * sd; lanes past `lanes` are zero.
 * lanes_first: the lanes are the closer-packed direction in memory. */
static void pack_panel(const nrt_gemm_ukernel *uk, bool is_a, const char *base, int64_t sl, int64_t sd,
                       nrt_dtype dt, int64_t lanes, int64_t kc, bool lanes_first, float *panel, float *tmp) {
  int w = is_a ? uk->mr : uk->nr;
  if (lanes_first) {
    /* each depth step gives the lanes (nearly) contiguous in memory */
    bool plain = dt == NRT_FLOAT32 && sl == 4;
    if (plain && lanes == w) {
      nrt_gemm_pack_lanes(uk, is_a, base, sd, kc, panel);
      return;
    }
    for (int64_t k = 0; k < kc; k++) {
      float *d = panel + k * w;
      const char *src = base + k * sd;
      if (plain) /* a short inline copy beats a memcpy call per step */
        for (int64_t i = 0; i < lanes; i++) d[i] = ((const float *)src)[i];
      else
        nrt_load_f32(d, src, sl, dt, lanes);
      for (int64_t i = lanes; i < w; i++) d[i] = 0.0f;
    }
    return;
  }
  if (dt == NRT_FLOAT32 && sd == 4 && lanes == w) {
    /* Contiguous float32 lanes, the common case (row-major A, x @ W^T's
     * B): read them side by side so the panel is written in order. */
    const float *lp[64];
    for (int64_t i = 0; i < lanes; i++) lp[i] = (const float *)(base + i * sl);
    nrt_gemm_pack_full(uk, is_a, lp, kc, panel);
    return;
  }
  for (int64_t i = 0; i < lanes; i++) {
    const char *src = base + i * sl;
    const float *lane = (const float *)src;
    if (dt != NRT_FLOAT32 || sd != 4) {
      nrt_load_f32(tmp, src, sd, dt, kc);
      lane = tmp;
    }
    for (int64_t k = 0; k < kc; k++) panel[k * w + i] = lane[k];
  }
  for (int64_t i = lanes; i < w; i++)
    for (int64_t k = 0; k < kc; k++) panel[k * w + i] = 0.0f;
}

/* A rows [m0, m0 + mlen) x depth [k0, k0 + kc) as MR-row panels. */
static void pack_a(const gemm_plan *p, int64_t b, int64_t m0, int64_t mlen, int64_t k0,
                   int64_t kc, float *dst, float *tmp) {
  const nrt_operand *A = p->A;
  int mr = p->uk->mr;
  int64_t sm = A->strides[1], sk = A->strides[2];
  for (int64_t ip = 0; ip < mlen; ip += mr)
    pack_panel(p->uk, true, OP_BYTE(A, b, m0 + ip, k0, 1, 2), sm, sk, A->dtype, nrt_min_i64(mlen - ip, mr), kc,
               llabs(sm) < llabs(sk), dst + ip * kc, tmp);
}

/* B depth [k0, k0 + kc) x columns [n0, n0 + nlen) as NR-column panels. */
static void pack_b(const gemm_plan *p, int64_t b, int64_t n0, int64_t nlen, int64_t k0,
                   int64_t kc, float *dst, float *tmp) {
  const nrt_operand *B = p->B;
  int nr = p->uk->nr;
  int64_t sk = B->strides[1], sn = B->strides[2];
  for (int64_t jp = 0; jp < nlen; jp += nr)
    pack_panel(p->uk, false, OP_BYTE(B, b, k0, n0 + jp, 1, 2), sn, sk, B->dtype, nrt_min_i64(nlen - jp, nr), kc,
               llabs(sn) <= llabs(sk), dst + jp * kc, tmp);
}

/* bfloat16 pair panels for the AVX512_BF16 kernel: unit (kp, i) holds the
 * lane's elements at depth 2kp and 2kp + 1 (A: A[i][2kp], A[i][2kp+1]; B:
 * B[2kp][i], B[2kp+1][i]); an odd last k pairs with zero, as do lanes past
 * the edge. Elements as in pack_panel. */
static inline uint16_t bf16_at(const char *p) {
  uint16_t v;
  memcpy(&v, p, 2);
  return v;
}

static void pack_panel_bf16(const nrt_gemm_ukernel *uk, bool is_a, const char *base, int64_t sl, int64_t sd,
                            int64_t lanes, int64_t kc, uint16_t *panel) {
  int w = is_a ? uk->mr : uk->nr;
  int64_t units = (kc + 1) / 2, kp0 = 0;
  if (sd == 2 && lanes == w) {
    /* each lane's pairs are contiguous units (row-major A, x @ W^T's B) */
    const void *lp[64];
    for (int64_t i = 0; i < lanes; i++) lp[i] = base + i * sl;
    kp0 = kc / 2;
    if (is_a) nrt_gemm_pack_a14_avx512(lp, kp0, panel);
    else nrt_gemm_pack_b32_avx512(lp, kp0, panel);
  } else if (sl == 2 && lanes == w) {
    /* lanes contiguous for each k (column-major A, as in dW = dY^T @ X;
     * row-major B): interleave two depth steps */
    kp0 = kc / 2;
    if (is_a) nrt_gemm_pack_a14_bf16_cols_avx512(base, sd, kp0, panel);
    else nrt_gemm_pack_b32_bf16_rows_avx512(base, sd, kp0, panel);
  } else if (sl == 2) {
    for (; 2 * kp0 + 1 < kc; kp0++) {
      const char *r0 = base + 2 * kp0 * sd, *r1 = r0 + sd;
      uint16_t *d = panel + 2 * kp0 * w;
      for (int64_t i = 0; i < lanes; i++) {
        d[2 * i] = bf16_at(r0 + 2 * i);
        d[2 * i + 1] = bf16_at(r1 + 2 * i);
      }
      for (int64_t i = lanes; i < w; i++) d[2 * i] = d[2 * i + 1] = 0;
    }
  }
  for (int64_t kp = kp0; kp < units; kp++)
    for (int64_t i = 0; i < w; i++) {
      uint16_t lo = 0, hi = 0;
      if (i < lanes) {
        const char *e = base + i * sl + 2 * kp * sd;
        lo = bf16_at(e);
        if (2 * kp + 1 < kc) hi = bf16_at(e + sd);
      }
      panel[2 * (kp * w + i)] = lo;
      panel[2 * (kp * w + i) + 1] = hi;
    }
}

static void pack_a_bf16(const gemm_plan *p, int64_t b, int64_t m0, int64_t mlen, int64_t k0,
                        int64_t kc, float *dst) {
  const nrt_operand *A = p->A;
  int mr = p->uk->mr;
  int64_t units = (kc + 1) / 2;
  for (int64_t ip = 0; ip < mlen; ip += mr)
    pack_panel_bf16(p->uk, true, OP_BYTE(A, b, m0 + ip, k0, 1, 2), A->strides[1], A->strides[2],
                    nrt_min_i64(mlen - ip, mr), kc, (uint16_t *)(dst + ip * units));
}

static void pack_b_bf16(const gemm_plan *p, int64_t b, int64_t n0, int64_t nlen, int64_t k0,
                        int64_t kc, float *dst) {
  const nrt_operand *B = p->B;
  int nr = p->uk->nr;
  int64_t units = (kc + 1) / 2;
  for (int64_t jp = 0; jp < nlen; jp += nr)
    pack_panel_bf16(p->uk, false, OP_BYTE(B, b, k0, n0 + jp, 1, 2), B->strides[2], B->strides[1],
                    nrt_min_i64(nlen - jp, nr), kc, (uint16_t *)(dst + jp * units));
}

/* ---- one task: mpart rows x NC columns of one batch entry ------------------ */

typedef struct gemm_ws {
  float *a, *b, *c, *tmp, *edge;
  void *block;
  size_t bytes;
} gemm_ws;

/* Each thread keeps its packing buffers from one call to the next: a
 * fresh allocation of this size is mmapped, and the kernel faulting in and
 * zeroing its pages took 20-30% of a M = 256 GEMM's time. One block per
 * thread (pool workers and callers alike), grown on demand and freed with
 * the thread; blocks above WS_KEEP_BYTES are not kept. */
#define WS_KEEP_BYTES ((size_t)16 << 20)

typedef struct ws_block {
  size_t bytes;
  void *data;
} ws_block;

static pthread_key_t ws_key;
static pthread_once_t ws_key_once = PTHREAD_ONCE_INIT;
static bool ws_key_ok;

static void ws_block_free(void *v) {
  ws_block *b = v;
  free(b->data);
  free(b);
}

static void ws_key_create(void) { ws_key_ok = pthread_key_create(&ws_key, ws_block_free) == 0; }

/* A 64-byte aligned block of at least `bytes` (its size in *out_bytes);
 * ws_release gives it back. */
static void *ws_acquire(size_t bytes, size_t *out_bytes) {
  pthread_once(&ws_key_once, ws_key_create);
  ws_block *b = ws_key_ok ? pthread_getspecific(ws_key) : NULL;
  if (b && b->data) {
    void *d = b->data;
    size_t have = b->bytes;
    b->data = NULL; /* taken: a nested use on this thread allocates afresh */
    b->bytes = 0;
    if (have >= bytes) {
      *out_bytes = have;
      return d;
    }
    free(d); /* too small: the larger block replaces it on release */
  }
  *out_bytes = (bytes + 63) / 64 * 64;
  return aligned_alloc(64, *out_bytes);
}

static void ws_release(void *data, size_t bytes) {
  if (!data) return;
  ws_block *b = ws_key_ok ? pthread_getspecific(ws_key) : NULL;
  if (bytes > WS_KEEP_BYTES || !ws_key_ok || (b && b->data)) {
    free(data);
    return;
  }
  if (!b) {
    b = malloc(sizeof *b);
    if (!b || pthread_setspecific(ws_key, b) != 0) {
      free(b);
      free(data);
      return;
    }
  }
  b->data = data;
  b->bytes = bytes;
}

static bool ws_alloc(const gemm_plan *p, gemm_ws *w) {
  const nrt_gemm_ukernel *uk = p->uk;
  size_t mc = (size_t)p->MC, nc = (size_t)p->NC, kc = (size_t)p->KC;
  size_t na = mc * kc, nb = nc * kc, ncc = p->c_direct ? 0 : (size_t)p->mpart * nc;
  size_t nt = kc > nc ? kc : nc, ne = (size_t)(uk->mr * uk->nr);
  /* Each buffer starts on a 64-byte line: panels are read with aligned loads. */
  size_t total = (na + 15) / 16 * 16 + (nb + 15) / 16 * 16 + (ncc + 15) / 16 * 16 +
                 (nt + 15) / 16 * 16 + (ne + 15) / 16 * 16;
  w->block = ws_acquire(total * sizeof(float), &w->bytes);
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

/* bfloat16 rounding as nrt_k_f32_to_bf16 (to nearest even, NaN as
 * 0x7fc0), 16 lanes at a time: the generic converter went element by
 * element and was 7-12% of bfloat16 GEMMs with short K. */
NRT_TARGET_AVX512 static void store_bf16_avx512(uint16_t *dst, const float *src, int64_t n) {
  const __m512i bias = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  const __m512i qnan = _mm512_set1_epi32(0x7fc0);
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
    __m512i u = _mm512_castps_si512(_mm512_maskz_loadu_ps(m, src + i));
    __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, bias), odd), 16);
    r = _mm512_mask_mov_epi32(r, _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs_mask), inf), qnan);
    _mm256_mask_storeu_epi16(dst + i, m, _mm512_cvtepi32_epi16(r));
  }
}

/* The last K slice of one micro-tile straight into a bfloat16 C: c = tile
 * (+ the scratch tile's earlier slices when `add`), rounded as above. Done
 * tile by tile, C's lines are written (and fetched for ownership) a few
 * at a time between kernel calls instead of in bursts that stalled on
 * memory: a separate pass over a 3072 x 768 output was 12% of dW with
 * K = 256 tokens. */
NRT_TARGET_AVX512 static void store_tile_bf16_avx512(char *dst, int64_t ld_dst, const float *tile, int64_t ld_tile,
                                                     const float *prev, int64_t ld_prev, int64_t rows, int64_t cols,
                                                     bool add) {
  const __m512i bias = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  const __m512i qnan = _mm512_set1_epi32(0x7fc0);
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j += 16) {
      __mmask16 m = cols - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (cols - j)) - 1);
      __m512 v = _mm512_maskz_loadu_ps(m, tile + i * ld_tile + j);
      if (add) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, prev + i * ld_prev + j));
      __m512i u = _mm512_castps_si512(v);
      __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
      __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, bias), odd), 16);
      r = _mm512_mask_mov_epi32(r, _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs_mask), inf), qnan);
      _mm256_mask_storeu_epi16(dst + i * ld_dst + 2 * j, m, _mm512_cvtepi32_epi16(r));
    }
}

/* Rows [i0, i0 + rows) of a task's float scratch tile into C (converted),
 * done as each row block gets its last K slice, while it is still in
 * cache, rather than in a pass over the whole tile at the end. */
static void store_rows(const gemm_plan *p, int64_t b, int64_t m0, int64_t n0, float *ct, int64_t ldc,
                       int64_t rows, int64_t nlen, float *tmp) {
  const nrt_operand *C = p->C;
  bool bf16 = C->dtype == NRT_BFLOAT16 && C->strides[2] == 2 && nrt_kernels_isa() >= NRT_ISA_AVX512;
  for (int64_t i = 0; i < rows; i++) {
    char *dst = OP_BYTE(C, b, m0 + i, n0, 1, 2);
    if (p->bias_last) {
      const nrt_operand *bi = p->bias;
      float *r = ct + i * ldc;
      nrt_load_f32(tmp, OP_BYTE(bi, b, m0 + i, n0, 1, 2), bi->strides[2], bi->dtype, nlen);
      for (int64_t j = 0; j < nlen; j++) r[j] = fmaf(p->beta, tmp[j], r[j]);
    }
    if (bf16) store_bf16_avx512((uint16_t *)dst, ct + i * ldc, nlen);
    else nrt_store_f32(dst, C->strides[2], C->dtype, ct + i * ldc, nlen);
  }
}

/* One KC slice of a task on the AVX-512 float32 kernel, each operand read
 * in place when the plan says so (a_direct: row-major A; b_direct:
 * row-major B) and packed otherwise. Full blocks of two packed operands
 * take the plain 14 x 32 kernel (a few percent faster: no masks, fewer
 * address registers); everything else, edges included, the strided one. */
static void run_strided_slice(const gemm_plan *p, gemm_ws *w, int64_t b, int64_t m0, int64_t mlen, int64_t n0,
                              int64_t nlen, int64_t k0, int64_t kc, float *ct, int64_t ldc, int accumulate) {
  bool store = !p->c_direct && k0 + kc >= p->K;
  const nrt_gemm_ukernel *uk = p->uk;
  const int mr = uk->mr, nr = uk->nr;
  const float *bbase;
  int64_t ldb;
  if (p->b_direct) {
    bbase = (const float *)OP_BYTE(p->B, b, k0, n0, 1, 2);
    ldb = p->B->strides[1] / 4;
  } else {
    pack_b(p, b, n0, nlen, k0, kc, w->b, w->tmp);
    bbase = w->b;
    ldb = nr;
  }
  for (int64_t i0 = 0; i0 < mlen; i0 += p->MC) {
    int64_t mc = nrt_min_i64(mlen - i0, p->MC);
    const float *abase;
    int64_t rsa, csa;
    if (p->a_direct) {
      abase = (const float *)OP_BYTE(p->A, b, m0 + i0, k0, 1, 2);
      rsa = p->A->strides[1] / 4;
      csa = 1;
    } else {
      pack_a(p, b, m0 + i0, mc, k0, kc, w->a, w->tmp);
      abase = w->a;
      rsa = 1;
      csa = mr;
    }
    for (int64_t ip = 0; ip < mc; ip += mr) {
      int rows = (int)nrt_min_i64(mc - ip, mr);
      const float *ap = p->a_direct ? abase + ip * rsa : abase + ip * kc;
      for (int64_t jp = 0; jp < nlen; jp += nr) {
        int cols = (int)nrt_min_i64(nlen - jp, nr);
        const float *bp = p->b_direct ? bbase + jp : bbase + jp * kc;
        float *cb = ct + (i0 + ip) * ldc + jp;
        if (rows == mr && cols == nr && !p->a_direct && !p->b_direct)
          uk->fn(kc, ap, bp, cb, ldc, p->alpha, accumulate);
        else
          nrt_gemm_ukernel_avx512_strided(rows, cols, kc, ap, rsa, csa, bp, ldb, cb, ldc, p->alpha, accumulate);
      }
    }
    if (store) store_rows(p, b, m0 + i0, n0, ct + i0 * ldc, ldc, mc, nlen, w->tmp);
  }
}

static void run_task(const gemm_plan *p, gemm_ws *w, int64_t task) {
  const nrt_gemm_ukernel *uk = p->uk;
  int64_t per_batch = p->mparts * p->ntiles;
  int64_t b = task / per_batch, t = task % per_batch;
  int64_t m0 = (t / p->ntiles) * p->mpart, n0 = (t % p->ntiles) * p->NC;
  int64_t mlen = nrt_min_i64(p->M - m0, p->mpart);
  int64_t nlen = nrt_min_i64(p->N - n0, p->NC);
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
  if (p->bias && !p->bias_last) {
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
  /* bfloat16 C whose tiles the last K slice stores directly */
  bool tile_bf16 = !p->c_direct && !p->strided && !p->bias_last && C->dtype == NRT_BFLOAT16 && C->strides[2] == 2 &&
                   nrt_kernels_isa() >= NRT_ISA_AVX512;
  for (int64_t k0 = 0; k0 < p->K; k0 += p->KC) {
    int64_t kc = nrt_min_i64(p->K - k0, p->KC);
    bool last = k0 + kc >= p->K;
    if (p->strided) {
      run_strided_slice(p, w, b, m0, mlen, n0, nlen, k0, kc, ct, ldc, accumulate);
      accumulate = 1;
      continue;
    }
    /* panel depth in units: one k, or a pair of k for the bf16 kernel */
    int64_t units = uk->bf16_pairs ? (kc + 1) / 2 : kc;
    if (uk->bf16_pairs) pack_b_bf16(p, b, n0, nlen, k0, kc, w->b);
    else pack_b(p, b, n0, nlen, k0, kc, w->b, w->tmp);
    for (int64_t i0 = 0; i0 < mlen; i0 += p->MC) {
      int64_t mc = nrt_min_i64(mlen - i0, p->MC);
      if (p->a_direct) { /* bfloat16 pairs read in place (see the plan) */
      } else if (uk->bf16_pairs) {
        pack_a_bf16(p, b, m0 + i0, mc, k0, kc, w->a);
      } else {
        pack_a(p, b, m0 + i0, mc, k0, kc, w->a, w->tmp);
      }
      for (int64_t ip = 0; ip < mc; ip += uk->mr) {
        int64_t rows = nrt_min_i64(mc - ip, uk->mr);
        const float *ap = p->a_direct ? (const float *)OP_BYTE(p->A, b, m0 + i0 + ip, k0, 1, 2) : w->a + ip * units;
        for (int64_t jp = 0; jp < nlen; jp += uk->nr) {
          int64_t cols = nrt_min_i64(nlen - jp, uk->nr);
          const float *bp = w->b + jp * units;
          float *cb = ct + (i0 + ip) * ldc + jp;
          if (p->a_direct) {
            bool to_tile = tile_bf16 && last;
            nrt_gemm_ukernel_avx512_bf16_strided((int)rows, (int)cols, units, ap, p->A->strides[1] / 4, bp,
                                                 to_tile ? w->edge : cb, to_tile ? uk->nr : ldc, p->alpha,
                                                 to_tile ? 0 : accumulate);
            if (to_tile)
              store_tile_bf16_avx512(OP_BYTE(C, b, m0 + i0 + ip, n0 + jp, 1, 2), C->strides[1], w->edge, uk->nr,
                                     cb, ldc, rows, cols, accumulate);
          } else if (tile_bf16 && last) {
            uk->fn(units, ap, bp, w->edge, uk->nr, p->alpha, 0);
            store_tile_bf16_avx512(OP_BYTE(C, b, m0 + i0 + ip, n0 + jp, 1, 2), C->strides[1], w->edge, uk->nr, cb,
                                   ldc, rows, cols, accumulate);
          } else {
            nrt_gemm_ukernel_block(uk, units, ap, bp, cb, ldc, rows, cols, p->alpha, accumulate, w->edge);
          }
        }
      }
      if (!p->c_direct && last && !tile_bf16) store_rows(p, b, m0 + i0, n0, ct + i0 * ldc, ldc, mc, nlen, w->tmp);
    }
    accumulate = 1;
  }

  if (!p->c_direct && p->K == 0) store_rows(p, b, m0, n0, ct, ldc, mlen, nlen, w->tmp);
}

/* Tasks are handed out one at a time from `next` rather than in the
 * pool's chunks (a quarter of a thread's share each): with 99 column tiles
 * of the 50257-wide vocabulary projection, chunks of 13 left one thread 5
 * tiles (10%) more than the other. Each pool participant claims tasks
 * until none are left. */
typedef struct gemm_job {
  const gemm_plan *p;
  int64_t ntasks;
  _Atomic int64_t next;
  _Atomic int failed;
} gemm_job;

static void gemm_range(void *ctx, int64_t begin, int64_t end) {
  (void)begin;
  (void)end;
  gemm_job *job = ctx;
  int64_t t = atomic_fetch_add_explicit(&job->next, 1, memory_order_relaxed);
  if (t >= job->ntasks) return;
  gemm_ws w;
  if (!ws_alloc(job->p, &w)) {
    job->failed = 1;
    return;
  }
  for (; t < job->ntasks; t = atomic_fetch_add_explicit(&job->next, 1, memory_order_relaxed))
    run_task(job->p, &w, t);
  ws_release(w.block, w.bytes);
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
  int64_t nchunks = nrt_cdiv(g->n, GEMV_CHUNK);
  float *v = malloc(sizeof(float) * (size_t)(g->k + GEMV_CHUNK + 1));
  if (!v) {
    g->failed = 1;
    return;
  }
  float *y = v + g->k;
  int64_t loaded = -1;
  for (int64_t t = begin; t < end; t++) {
    int64_t b = t / nchunks, i0 = (t % nchunks) * GEMV_CHUNK;
    int64_t ni = nrt_min_i64(g->n - i0, GEMV_CHUNK);
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
  /* y = x @ B (the vector is A's row) or y = A @ x (B's column) */
  bool row = p->M == 1 && p->B->dtype == NRT_FLOAT32;
  if (!row && !(p->N == 1 && p->A->dtype == NRT_FLOAT32)) return false;
  const nrt_operand *mat = row ? p->B : p->A;
  gemv_job g = {.p = p, .failed = 0, .mat = mat->data, .mbs = mat->strides[0], .si = mat->strides[row ? 2 : 1],
                .sk = mat->strides[row ? 1 : 2], .vec_op = row ? p->A : p->B, .vec_row = row, .n = row ? p->N : p->M};
  if (g.sk != 4 && g.si != 4) return false;
  g.k = p->K;
  int64_t ntasks = p->batch * nrt_cdiv(g.n, GEMV_CHUNK);
  int64_t per_task = GEMV_CHUNK * (p->K > 0 ? p->K : 1);
  nrt_parallel_for(ntasks, per_task >= 65536 ? 1 : 65536 / per_task, gemv_range, &g);
  *st = g.failed ? nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY, "GEMM: out of host memory for a vector") : NRT_SUCCESS;
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

/* Rows `stride` bytes apart map to different L1 sets: the stride is at
 * least 256 bytes away from a multiple of 4 KiB (the set-index period). */
static bool spread_rows(int64_t stride) {
  int64_t d = llabs(stride) % 4096;
  return d >= 256 && d <= 4096 - 256;
}

/* ---- entry ------------------------------------------------------------------------- */

nrt_status nrt_gemm_execute(const nrt_launch *l) {
  if (l->op == NRT_OP(CGEMM)) return nrt_cgemm_execute(l);
  if (l->params[0] != NRT_GEMM_PACKED) return nrt_gemm_loop_execute(l);
  gemm_plan p = {.l = l};
  p.batch = l->sizes[0];
  p.M = l->sizes[1];
  p.N = l->sizes[2];
  p.K = l->sizes[3];
  if (l->noutputs != 1)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "GEMM: expected 1 output, got %d", l->noutputs);
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

  p.uk = nrt_gemm_ukernel_pick(p.A->dtype, p.B->dtype);
  /* vdpbf16ps treats subnormal bfloat16 inputs as zero. The CPU hands
   * bfloat16 products of more than 16 x 16 x 16 multiply-adds in all (the
   * whole batch: ATen's mkldnn checksize) to oneDNN, which does the same,
   * and computes smaller ones, and bmm entries below 400, in float in
   * ATen's loops, where 2.9e-39 * 3.4e38 is 0.996, not 0 (measured: mm
   * 4096 keep it, 4913 flush; bmm 3 x 512 keep, 3 x 1728 flush). Those take
   * the float32 kernel, whose packing widens bfloat16 exactly; too small
   * to miss the pair kernel. */
  int64_t macs = p.M * p.N * p.K;
  if (p.uk->bf16_pairs && (macs < 400 || p.batch * macs <= 4096)) p.uk = &nrt_gemm_ukernel_avx512;
  p.alpha = (float)l->scalars[0].f;
  p.beta = (float)l->scalars[1].f;
  /* The CPU's larger bfloat16 products (oneDNN's matmul with its sum
   * post-op) finish as fma(beta, bias, alpha * sum) (measured: 40 of 40
   * crafted addmm, alpha 0.3..1.1, beta 0.3..1.7; C = beta * bias first
   * and fma(alpha, sum, C) matched 20), so 2 * 3.4e38 - 3.4e38 stays
   * finite there. alpha = beta = 1 is the same either way: the usual
   * bias (F.linear) keeps the tile path. p3 != 0 asks for that finish for
   * any dtype (MKL's AVX-512 sgemm: C = fma(beta, bias, alpha * sum),
   * chosen by the glue on Intel hosts); C then goes through the tile. */
  p.bias_last = p.bias && (l->params[3] || (p.A->dtype == NRT_BFLOAT16 && p.B->dtype == NRT_BFLOAT16 &&
                                             p.C->dtype != NRT_FLOAT32)) &&
                !(p.alpha == 1.0f && p.beta == 1.0f) && p.K > 0;
  nrt_status gst;
  if ((p.M == 1 || p.N == 1) && try_gemv(&p, &gst)) return gst;
  p.c_direct = p.C->dtype == NRT_FLOAT32 && p.C->strides[2] == 4 && p.C->strides[1] % 4 == 0 && !p.bias_last;
  int64_t mr = p.uk->mr, nr = p.uk->nr;
  p.strided = p.uk == &nrt_gemm_ukernel_avx512;
  {
    /* K slices of even depth, as deep as the L2 budget allows: every
     * slice is a pass over the C tile, and for a converted C (bfloat16)
     * a round trip through the float scratch tile. The kernels' own kc
     * (256 / 512, which conv uses) was measured against 384 / 1024 here:
     * bfloat16 1024^3 161 -> 189 GFLOP/s (1 thread, CPU time), float32
     * +0-3%. B block 384 (1024) x 512 x 4 bytes plus the A block fit L2. */
    int64_t kmax = p.uk == &nrt_gemm_ukernel_avx512 ? 384 : p.uk->bf16_pairs ? 1024 : p.uk->kc;
    int64_t slices = nrt_cdiv(p.K > 0 ? p.K : 1, kmax);
    p.KC = nrt_round_up(nrt_cdiv(p.K > 0 ? p.K : 1, slices), 16);
    if (p.KC > kmax) p.KC = kmax;
    if (p.KC > p.K) p.KC = p.K > 0 ? p.K : 1;
  }
  p.MC = p.M < p.uk->mc ? nrt_round_up(p.M, mr) : p.uk->mc;

  /* Column tiles of at most NC, evened out (no sliver at the edge) and, when
   * there are few, a multiple of the thread count so no thread idles at
   * the end. Rows are split only when columns and batch cannot feed every
   * thread, or to bound the scratch tile of a converted C. */
  int threads = nrt_pool_threads();
  int64_t nt = nrt_cdiv(p.N, p.uk->nc);
  int64_t max_nt = nrt_cdiv(p.N, nr);
  if (p.batch * nt < 4 * threads && nt % threads != 0) nt = nrt_round_up(nt, threads);
  if (nt > max_nt) nt = max_nt;
  p.NC = nrt_round_up(nrt_cdiv(p.N, nt), nr);
  p.ntiles = nrt_cdiv(p.N, p.NC);
  int64_t mparts = 1;
  if (p.batch * p.ntiles < threads) mparts = nrt_cdiv(threads, p.batch * p.ntiles);
  if (!p.c_direct) {
    int64_t rows_max = (1 << 19) / p.NC; /* 2 MiB of float scratch */
    int64_t need = nrt_cdiv(p.M, rows_max);
    if (need > mparts) mparts = need;
  }
  int64_t max_mp = nrt_cdiv(p.M, mr);
  if (mparts > max_mp) mparts = max_mp;
  p.mpart = nrt_round_up(nrt_cdiv(p.M, mparts), mr);
  p.mparts = nrt_cdiv(p.M, p.mpart);
  if (p.MC > p.mpart) p.MC = p.mpart;

  if (p.strided) {
    /* Reading an operand in place saves its packing pass, about a cycle
     * per element, against a kernel a few percent slower (masks, more
     * address registers): worth it when each packed element would be
     * reused little, i.e. when the other operand's extent in a task is
     * short (A: NC columns; B: the task's rows), as in attention heads
     * and M = 256. Rows whose stride is (nearly) a multiple of 4 KiB all
     * land in the same L1 sets: the kernel then ran at 65% of its rate. */
    p.a_direct = p.A->dtype == NRT_FLOAT32 && p.A->strides[2] == 4 && p.A->strides[1] % 4 == 0 &&
                 spread_rows(p.A->strides[1]) && p.NC <= 256;
    p.b_direct = p.B->dtype == NRT_FLOAT32 && p.B->strides[2] == 4 && p.B->strides[1] % 4 == 0 &&
                 spread_rows(p.B->strides[1]) && llabs(p.B->strides[1]) <= 16384 && p.mpart <= 256;
  } else if (p.uk->bf16_pairs) {
    /* Row-major bfloat16 A already holds its k pairs side by side: the
     * pair kernel broadcasts them in place (same reuse rule as above),
     * when every pair is 4-byte aligned and no slice has an odd end. */
    p.a_direct = p.A->dtype == NRT_BFLOAT16 && p.A->strides[2] == 2 && p.A->strides[1] % 4 == 0 &&
                 p.A->strides[0] % 4 == 0 && (uintptr_t)p.A->data % 4 == 0 && p.K % 2 == 0 &&
                 spread_rows(p.A->strides[1]) && p.NC <= 256;
  }

  int64_t ntasks = p.batch * p.mparts * p.ntiles;
  /* Below a few hundred thousand flops a hand-off costs more than it saves. */
  double flops = 2.0 * (double)p.batch * (double)p.M * (double)p.N * (double)(p.K > 0 ? p.K : 1);
  int64_t participants = flops < 8e5 ? 1 : nrt_min_i64(threads, ntasks);
  gemm_job job = {.p = &p, .ntasks = ntasks, .next = 0, .failed = 0};
  nrt_parallel_for(participants, 1, gemm_range, &job);
  if (job.failed) return nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY, "GEMM: out of host memory for packing buffers");
  return NRT_SUCCESS;
}
