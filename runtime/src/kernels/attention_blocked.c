/* Blocked (flash-attention style) scaled dot-product attention kernels.
 *
 * Forward: one task per (batch*head, block of BQ query rows). Keys are
 * visited in blocks of BK; each row keeps a running maximum m, a running
 * sum l of exp(s - m) and an unnormalised float32 output accumulator that
 * is rescaled by exp(m_old - m_new) whenever the maximum grows. The L x S
 * score matrix never exists; per task the working set is the query block,
 * one key block (transposed, so that a row's BK scores are one vectorised
 * loop over keys) and one value block.
 *
 * Backward: probabilities are recomputed blockwise from the saved
 * logsumexp, P = exp(s - lse), and dS = P * (dP - D) with D = dO . O
 * (SDPA_BACKWARD_PREP). To avoid atomics (and keep results independent of
 * the thread count) the gradients come from two launches: dK, dV with one
 * task per (batch, kv head, key block) summing over every query row of
 * the head's group, then dQ (and the optional dS) with one task per
 * (batch*head, query block). The second pass recomputes the scores; that
 * costs one more Q K^T but no synchronisation.
 *
 * The loops are written once (always-inline bodies) and compiled for the
 * baseline, AVX2 and AVX-512 targets; the widest the host supports runs. */
#pragma GCC optimize("O3,no-trapping-math,no-math-errno")
#include <stdatomic.h>
#include <stdlib.h>
#include "kernels/attention_kernels.h"

#define BK 64 /* keys per block */
#define BQ 32 /* query rows per task */
#define INLINE static inline __attribute__((always_inline))

typedef struct blk_ctx {
  const nrt_attn_problem *p;
  nrt_isa isa;
  int64_t blocks; /* query or key blocks per (batch, head) */
  atomic_int failed;
} blk_ctx;

/* s[j] = sum_e x[e] * t[e*BK + j] for all BK columns of a transposed block. */
INLINE void dot_block(float *restrict s, const float *restrict x, const float *restrict t, int64_t n) {
  for (int j = 0; j < BK; j++) s[j] = 0.0f;
  for (int64_t e = 0; e < n; e++) {
    float xe = x[e];
    const float *restrict te = t + e * BK;
    for (int j = 0; j < BK; j++) s[j] += xe * te[j];
  }
}

/* Four rows at once (register blocking: each loaded key column feeds four
 * accumulators): s[r][j] = sum_e x[r*ldx + e] * t[e*BK + j], r < 4. */
INLINE void dot_block4(float s[4][BK], const float *restrict x, int64_t ldx, const float *restrict t,
                       int64_t n) {
  for (int jc = 0; jc < BK; jc += 16) {
    float a0[16] = {0}, a1[16] = {0}, a2[16] = {0}, a3[16] = {0};
    for (int64_t e = 0; e < n; e++) {
      const float *restrict te = t + e * BK + jc;
      float x0 = x[e], x1 = x[ldx + e], x2 = x[2 * ldx + e], x3 = x[3 * ldx + e];
      for (int j = 0; j < 16; j++) {
        a0[j] += x0 * te[j];
        a1[j] += x1 * te[j];
        a2[j] += x2 * te[j];
        a3[j] += x3 * te[j];
      }
    }
    for (int j = 0; j < 16; j++) {
      s[0][jc + j] = a0[j];
      s[1][jc + j] = a1[j];
      s[2][jc + j] = a2[j];
      s[3][jc + j] = a3[j];
    }
  }
}

/* Four rows at once: a[r*lda + e] += sum_j c[r][j] * x[j*ldx + e] over
 * j < n, e < m. */
INLINE void gemv_block4(float *restrict a, int64_t lda, const float c[4][BK], const float *restrict x,
                        int64_t ldx, int64_t n, int64_t m) {
  int64_t ec = 0;
  for (; ec + 16 <= m; ec += 16) {
    float a0[16], a1[16], a2[16], a3[16];
    for (int e = 0; e < 16; e++) {
      a0[e] = a[ec + e];
      a1[e] = a[lda + ec + e];
      a2[e] = a[2 * lda + ec + e];
      a3[e] = a[3 * lda + ec + e];
    }
    for (int64_t j = 0; j < n; j++) {
      const float *restrict xj = x + j * ldx + ec;
      float c0 = c[0][j], c1 = c[1][j], c2 = c[2][j], c3 = c[3][j];
      for (int e = 0; e < 16; e++) {
        a0[e] += c0 * xj[e];
        a1[e] += c1 * xj[e];
        a2[e] += c2 * xj[e];
        a3[e] += c3 * xj[e];
      }
    }
    for (int e = 0; e < 16; e++) {
      a[ec + e] = a0[e];
      a[lda + ec + e] = a1[e];
      a[2 * lda + ec + e] = a2[e];
      a[3 * lda + ec + e] = a3[e];
    }
  }
  for (; ec < m; ec++)
    for (int r = 0; r < 4; r++) {
      float acc = a[r * lda + ec];
      for (int64_t j = 0; j < n; j++) acc += c[r][j] * x[j * ldx + ec];
      a[r * lda + ec] = acc;
    }
}

/* a[0..n) += c * x[0..n) */
INLINE void axpy(float *restrict a, float c, const float *restrict x, int64_t n) {
  for (int64_t e = 0; e < n; e++) a[e] += c * x[e];
}

/* Rows [0, n) of a {row, col} operand into dst[r*BK...] transposed:
 * dst[c*BK + r] = x[r][c]; columns past n are zero so that padded keys
 * contribute nothing (their scores are set to -inf anyway). */
INLINE void load_transposed(float *dst, const char *base, int64_t row_stride, int64_t col_stride,
                            nrt_dtype dt, int64_t n, int64_t cols) {
  for (int64_t c = 0; c < cols; c++) {
    nrt_load_f32(dst + c * BK, base + c * col_stride, row_stride, dt, n);
    for (int64_t r = n; r < BK; r++) dst[c * BK + r] = 0.0f;
  }
}

INLINE void load_rows(float *dst, const char *base, int64_t row_stride, int64_t col_stride, nrt_dtype dt,
                      int64_t n, int64_t cols) {
  for (int64_t r = 0; r < n; r++) nrt_load_f32(dst + r * cols, base + r * row_stride, col_stride, dt, cols);
}

/* Scores of row (b, h, i) against keys j0..j0+n-1, scaled and masked;
 * -inf past n. */
INLINE void row_scores(const nrt_attn_problem *p, float *s, const float *q, const float *kt, int64_t b,
                       int64_t h, int64_t i, int64_t j0, int64_t n) {
  dot_block(s, q, kt, p->E);
  float scale = p->scale;
  for (int j = 0; j < BK; j++) s[j] *= scale;
  for (int64_t j = n; j < BK; j++) s[j] = -INFINITY;
  if (p->has_mask || p->causal) nrt_attn_mask_scores(p, b, h, i, j0, n, s);
}

/* Scales raw scores, -inf past n, then the mask and the causal limit. */
INLINE void finish_scores(const nrt_attn_problem *p, float *s, int64_t b, int64_t h, int64_t i, int64_t j0,
                          int64_t n) {
  float scale = p->scale;
  for (int j = 0; j < BK; j++) s[j] *= scale;
  for (int64_t j = n; j < BK; j++) s[j] = -INFINITY;
  if (p->has_mask || p->causal) nrt_attn_mask_scores(p, b, h, i, j0, n, s);
}

/* ---- forward ------------------------------------------------------------ */

static size_t fwd_floats(const nrt_attn_problem *p) {
  return (size_t)(BQ * p->E + p->E * BK + BK * p->Ev + BQ * p->Ev + p->Ev);
}

INLINE void fwd_body(const nrt_attn_problem *p, int64_t task, int64_t blocks, float *ws) {
  int64_t bh = task / blocks, i0 = (task % blocks) * BQ, b = bh / p->Hq, h = bh % p->Hq;
  int64_t hk = h / p->group, E = p->E, Ev = p->Ev;
  int64_t nq = p->L - i0 < BQ ? p->L - i0 : BQ;
  float *Q = ws, *Kt = Q + BQ * E, *Vb = Kt + E * BK, *acc = Vb + BK * Ev, *o = acc + BQ * Ev;
  float m[BQ], l[BQ], s4[4][BK], z[BK];
  load_rows(Q, nrt_attn_at(&p->q, b, h, i0), p->q.s[2], p->q.s[3], p->q.dtype, nq, E);
  for (int64_t x = nq * E; x < BQ * E; x++) Q[x] = 0.0f; /* rows past nq feed discarded scores */
  for (int64_t x = 0; x < BQ * Ev; x++) acc[x] = 0.0f;
  for (int r = 0; r < BQ; r++) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
  }
  /* Causal: keys past the block's last row are invisible to all its rows. */
  int64_t jend = p->causal && i0 + nq < p->S ? i0 + nq : p->S;
  for (int64_t j0 = 0; j0 < jend; j0 += BK) {
    int64_t n = p->S - j0 < BK ? p->S - j0 : BK;
    load_transposed(Kt, nrt_attn_at(&p->k, b, hk, j0), p->k.s[2], p->k.s[3], p->k.dtype, n, E);
    load_rows(Vb, nrt_attn_at(&p->v, b, hk, j0), p->v.s[2], p->v.s[3], p->v.dtype, n, Ev);
    for (int64_t r0 = 0; r0 < nq; r0 += 4) {
      if (p->causal && j0 > i0 + r0 + 3) continue; /* no row of the group sees the block */
      dot_block4(s4, Q + r0 * E, E, Kt, E);
      for (int64_t rr = 0; rr < 4; rr++) {
        int64_t r = r0 + rr, i = i0 + r;
        float *s = s4[rr];
        if (r >= nq || (p->causal && j0 > i)) { /* contributes nothing */
          for (int j = 0; j < BK; j++) s[j] = 0.0f;
          continue;
        }
        finish_scores(p, s, b, h, i, j0, n);
        float mb = -INFINITY;
        for (int j = 0; j < BK; j++) mb = s[j] > mb ? s[j] : mb; /* NaN ignored here, kept in s */
        float mo = m[r], mn = mb > mo ? mb : mo;
        /* expf(-inf) is exactly 0; equal maxima (also both -inf) rescale by 1. */
        float alpha = mo == mn ? 1.0f : expf(mo - mn), sum = 0.0f;
        for (int j = 0; j < BK; j++) {
          float e = nrt_vexpf(s[j] - mn);
          s[j] = s[j] == -INFINITY ? 0.0f : e;
        }
        for (int j = 0; j < BK; j++) sum += s[j];
        l[r] = l[r] * alpha + sum;
        m[r] = mn;
        if (p->dropout) { /* the sum l is of the probabilities before dropout */
          nrt_attn_dropout(p, b, h, i, j0, n, z);
          for (int64_t j = 0; j < n; j++) s[j] *= z[j];
        }
        float *a = acc + r * Ev;
        if (alpha != 1.0f)
          for (int64_t e = 0; e < Ev; e++) a[e] *= alpha;
      }
      gemv_block4(acc + r0 * Ev, Ev, (const float(*)[BK])s4, Vb, Ev, n, Ev);
    }
  }
  for (int64_t r = 0; r < nq; r++) {
    int64_t i = i0 + r;
    float lse;
    if (l[r] == 0.0f) { /* fully masked row: PyTorch's math backend gives 0 */
      for (int64_t e = 0; e < Ev; e++) o[e] = 0.0f;
      lse = -INFINITY;
    } else {
      float inv = 1.0f / l[r];
      for (int64_t e = 0; e < Ev; e++) o[e] = acc[r * Ev + e] * inv;
      lse = m[r] + logf(l[r]);
    }
    nrt_store_f32(nrt_attn_at(&p->out, b, h, i), p->out.s[3], p->out.dtype, o, Ev);
    *(float *)nrt_attn_at(&p->lse, b, h, i) = lse;
  }
}

/* ---- backward: D from a float32 recomputation of the output -------------- */

INLINE void prep_body(const nrt_attn_problem *p, int64_t task, int64_t blocks, float *ws) {
  int64_t bh = task / blocks, i0 = (task % blocks) * BQ, b = bh / p->Hq, h = bh % p->Hq;
  int64_t hk = h / p->group, E = p->E, Ev = p->Ev;
  int64_t nq = p->L - i0 < BQ ? p->L - i0 : BQ;
  float *Q = ws, *Kt = Q + BQ * E, *Vb = Kt + E * BK, *acc = Vb + BK * Ev, *g = acc + BQ * Ev;
  float lse[BQ], s[BK], z[BK];
  load_rows(Q, nrt_attn_at(&p->q, b, h, i0), p->q.s[2], p->q.s[3], p->q.dtype, nq, E);
  for (int64_t x = 0; x < nq * Ev; x++) acc[x] = 0.0f;
  for (int64_t r = 0; r < nq; r++) lse[r] = *(const float *)nrt_attn_at(&p->lse, b, h, i0 + r);
  int64_t jend = p->causal && i0 + nq < p->S ? i0 + nq : p->S;
  for (int64_t j0 = 0; j0 < jend; j0 += BK) {
    int64_t n = p->S - j0 < BK ? p->S - j0 : BK;
    load_transposed(Kt, nrt_attn_at(&p->k, b, hk, j0), p->k.s[2], p->k.s[3], p->k.dtype, n, E);
    load_rows(Vb, nrt_attn_at(&p->v, b, hk, j0), p->v.s[2], p->v.s[3], p->v.dtype, n, Ev);
    for (int64_t r = 0; r < nq; r++) {
      int64_t i = i0 + r;
      if (lse[r] == -INFINITY || (p->causal && j0 > i)) continue;
      row_scores(p, s, Q + r * E, Kt, b, h, i, j0, n);
      for (int j = 0; j < BK; j++) {
        float e = nrt_vexpf(s[j] - lse[r]);
        s[j] = s[j] == -INFINITY ? 0.0f : e;
      }
      if (p->dropout) {
        nrt_attn_dropout(p, b, h, i, j0, n, z);
        for (int64_t j = 0; j < n; j++) s[j] *= z[j];
      }
      for (int64_t j = 0; j < n; j++) axpy(acc + r * Ev, s[j], Vb + j * Ev, Ev);
    }
  }
  for (int64_t r = 0; r < nq; r++) {
    nrt_load_f32(g, nrt_attn_at(&p->dout, b, h, i0 + r), p->dout.s[3], p->dout.dtype, Ev);
    double d = 0;
    for (int64_t e = 0; e < Ev; e++) d += (double)g[e] * acc[r * Ev + e];
    char *st = nrt_attn_at(&p->rowstat, b, h, i0 + r);
    *(float *)st = lse[r];
    *(float *)(st + p->rowstat.s[3]) = (float)d;
  }
}

/* ---- backward: dK, dV --------------------------------------------------- */

static size_t kv_floats(const nrt_attn_problem *p) {
  return (size_t)(p->E * BK + p->Ev * BK + BK * p->E + BK * p->Ev + 4 * p->E + 4 * p->Ev);
}

/* Probabilities, dropout and score gradients of four rows against a key
 * block, from raw scores s and raw dO.V products dp (dot_block4): s
 * becomes P*Z (what multiplied V), dp becomes dS = P*(dP - D). Rows with
 * live[r] false get zeros. */
INLINE void rows_grads4(const nrt_attn_problem *p, float s[4][BK], float dp[4][BK], const float *lse,
                        const float *dd, const bool *live, int64_t b, int64_t h, int64_t i0, int64_t j0,
                        int64_t n) {
  float z[BK];
  for (int r = 0; r < 4; r++) {
    float *sr = s[r], *dr = dp[r];
    if (!live[r]) {
      for (int j = 0; j < BK; j++) sr[j] = dr[j] = 0.0f;
      continue;
    }
    int64_t i = i0 + r;
    finish_scores(p, sr, b, h, i, j0, n);
    for (int j = 0; j < BK; j++) {
      float e = nrt_vexpf(sr[j] - lse[r]);
      sr[j] = sr[j] == -INFINITY ? 0.0f : e;
    }
    if (p->dropout) {
      nrt_attn_dropout(p, b, h, i, j0, n, z);
      for (int64_t j = 0; j < n; j++) dr[j] *= z[j];
    }
    for (int j = 0; j < BK; j++) dr[j] = sr[j] * (dr[j] - dd[r]);
    if (p->dropout)
      for (int64_t j = 0; j < n; j++) sr[j] *= z[j];
  }
}

/* a[e] += sum_r c[r] * x[r*ldx + e] for four rows. */
INLINE void axpy4(float *restrict a, const float c[4], const float *restrict x, int64_t ldx, int64_t n) {
  float c0 = c[0], c1 = c[1], c2 = c[2], c3 = c[3];
  for (int64_t e = 0; e < n; e++)
    a[e] += c0 * x[e] + c1 * x[ldx + e] + c2 * x[2 * ldx + e] + c3 * x[3 * ldx + e];
}

INLINE void kv_body(const nrt_attn_problem *p, int64_t task, int64_t blocks, float *ws) {
  int64_t bhk = task / blocks, j0 = (task % blocks) * BK, b = bhk / p->Hk, hk = bhk % p->Hk;
  int64_t E = p->E, Ev = p->Ev, n = p->S - j0 < BK ? p->S - j0 : BK;
  float *Kt = ws, *Vt = Kt + E * BK, *dK = Vt + Ev * BK, *dV = dK + BK * E, *q = dV + BK * Ev, *g = q + 4 * E;
  float s[4][BK], ds[4][BK], lse[4], dd[4], c[4];
  bool live[4];
  load_transposed(Kt, nrt_attn_at(&p->k, b, hk, j0), p->k.s[2], p->k.s[3], p->k.dtype, n, E);
  load_transposed(Vt, nrt_attn_at(&p->v, b, hk, j0), p->v.s[2], p->v.s[3], p->v.dtype, n, Ev);
  for (int64_t x = 0; x < BK * E; x++) dK[x] = 0.0f;
  for (int64_t x = 0; x < BK * Ev; x++) dV[x] = 0.0f;
  float scale = p->scale;
  for (int64_t h = hk * p->group; h < (hk + 1) * p->group; h++) {
    for (int64_t i0 = p->causal ? j0 : 0; i0 < p->L; i0 += 4) {
      bool any = false;
      for (int r = 0; r < 4; r++) {
        int64_t i = i0 + r;
        live[r] = false;
        lse[r] = dd[r] = 0.0f;
        if (i < p->L) {
          const char *st = nrt_attn_at(&p->rowstat, b, h, i);
          lse[r] = *(const float *)st;
          dd[r] = *(const float *)(st + p->rowstat.s[3]);
          live[r] = lse[r] != -INFINITY; /* fully masked rows have no gradient */
        }
        if (live[r]) {
          nrt_load_f32(q + r * E, nrt_attn_at(&p->q, b, h, i), p->q.s[3], p->q.dtype, E);
          nrt_load_f32(g + r * Ev, nrt_attn_at(&p->dout, b, h, i), p->dout.s[3], p->dout.dtype, Ev);
          any = true;
        } else {
          for (int64_t e = 0; e < E; e++) q[r * E + e] = 0.0f;
          for (int64_t e = 0; e < Ev; e++) g[r * Ev + e] = 0.0f;
        }
      }
      if (!any) continue;
      dot_block4(s, q, E, Kt, E);
      dot_block4(ds, g, Ev, Vt, Ev);
      rows_grads4(p, s, ds, lse, dd, live, b, h, i0, j0, n);
      for (int64_t j = 0; j < n; j++) {
        for (int r = 0; r < 4; r++) c[r] = s[r][j];
        axpy4(dV + j * Ev, c, g, Ev, Ev);
        for (int r = 0; r < 4; r++) c[r] = ds[r][j] * scale;
        axpy4(dK + j * E, c, q, E, E);
      }
    }
  }
  for (int64_t j = 0; j < n; j++) {
    nrt_store_f32(nrt_attn_at(&p->dk, b, hk, j0 + j), p->dk.s[3], p->dk.dtype, dK + j * E, E);
    nrt_store_f32(nrt_attn_at(&p->dv, b, hk, j0 + j), p->dv.s[3], p->dv.dtype, dV + j * Ev, Ev);
  }
}

/* ---- backward: dQ (and dS) ---------------------------------------------- */

static size_t q_floats(const nrt_attn_problem *p) {
  return (size_t)(2 * BQ * p->E + BQ * p->Ev + p->E * BK + p->Ev * BK + BK * p->E);
}

INLINE void q_body(const nrt_attn_problem *p, int64_t task, int64_t blocks, float *ws) {
  int64_t bh = task / blocks, i0 = (task % blocks) * BQ, b = bh / p->Hq, h = bh % p->Hq;
  int64_t hk = h / p->group, E = p->E, Ev = p->Ev;
  int64_t nq = p->L - i0 < BQ ? p->L - i0 : BQ;
  float *Q = ws, *dQ = Q + BQ * E, *G = dQ + BQ * E, *Kt = G + BQ * Ev, *Vt = Kt + E * BK, *Kb = Vt + Ev * BK;
  float s[4][BK], ds[4][BK], lse[BQ], dd[BQ];
  bool live[4];
  bool want_ds = p->ds.data != NULL;
  load_rows(Q, nrt_attn_at(&p->q, b, h, i0), p->q.s[2], p->q.s[3], p->q.dtype, nq, E);
  load_rows(G, nrt_attn_at(&p->dout, b, h, i0), p->dout.s[2], p->dout.s[3], p->dout.dtype, nq, Ev);
  for (int64_t x = nq * E; x < BQ * E; x++) Q[x] = 0.0f;
  for (int64_t x = nq * Ev; x < BQ * Ev; x++) G[x] = 0.0f;
  for (int64_t r = 0; r < BQ; r++) {
    lse[r] = -INFINITY;
    dd[r] = 0.0f;
    if (r < nq) {
      const char *st = nrt_attn_at(&p->rowstat, b, h, i0 + r);
      lse[r] = *(const float *)st;
      dd[r] = *(const float *)(st + p->rowstat.s[3]);
    }
  }
  for (int64_t x = 0; x < BQ * E; x++) dQ[x] = 0.0f;
  float scale = p->scale;
  /* dS is fully written, so with it every key block is visited. */
  int64_t jend = p->causal && !want_ds && i0 + nq < p->S ? i0 + nq : p->S;
  for (int64_t j0 = 0; j0 < jend; j0 += BK) {
    int64_t n = p->S - j0 < BK ? p->S - j0 : BK;
    load_transposed(Kt, nrt_attn_at(&p->k, b, hk, j0), p->k.s[2], p->k.s[3], p->k.dtype, n, E);
    load_transposed(Vt, nrt_attn_at(&p->v, b, hk, j0), p->v.s[2], p->v.s[3], p->v.dtype, n, Ev);
    load_rows(Kb, nrt_attn_at(&p->k, b, hk, j0), p->k.s[2], p->k.s[3], p->k.dtype, n, E);
    for (int64_t r0 = 0; r0 < nq; r0 += 4) {
      bool any = false;
      for (int r = 0; r < 4; r++) {
        int64_t i = i0 + r0 + r;
        live[r] = r0 + r < nq && lse[r0 + r] != -INFINITY && !(p->causal && j0 > i);
        any = any || live[r];
      }
      if (any) {
        dot_block4(s, Q + r0 * E, E, Kt, E);
        dot_block4(ds, G + r0 * Ev, Ev, Vt, Ev);
        rows_grads4(p, s, ds, lse + r0, dd + r0, live, b, h, i0 + r0, j0, n);
        for (int r = 0; r < 4; r++)
          for (int j = 0; j < BK; j++) s[r][j] = ds[r][j] * scale;
        gemv_block4(dQ + r0 * E, E, (const float(*)[BK])s, Kb, E, n, E);
      } else {
        for (int r = 0; r < 4; r++)
          for (int j = 0; j < BK; j++) ds[r][j] = 0.0f;
      }
      if (want_ds)
        for (int r = 0; r < 4 && r0 + r < nq; r++)
          nrt_store_f32(nrt_attn_at(&p->ds, b, h, i0 + r0 + r) + j0 * p->ds.s[3], p->ds.s[3], p->ds.dtype,
                        ds[r], n);
    }
  }
  for (int64_t r = 0; r < nq; r++)
    nrt_store_f32(nrt_attn_at(&p->dq, b, h, i0 + r), p->dq.s[3], p->dq.dtype, dQ + r * E, E);
}

/* ---- per-ISA builds and the drivers ------------------------------------- */

#define ATTN_VARIANT(suffix, target)                                                              \
  target static void fwd_##suffix(const nrt_attn_problem *p, int64_t t, int64_t nb, float *ws) {  \
    fwd_body(p, t, nb, ws);                                                                       \
  }                                                                                               \
  target static void prep_##suffix(const nrt_attn_problem *p, int64_t t, int64_t nb, float *ws) { \
    prep_body(p, t, nb, ws);                                                                      \
  }                                                                                               \
  target static void kv_##suffix(const nrt_attn_problem *p, int64_t t, int64_t nb, float *ws) {   \
    kv_body(p, t, nb, ws);                                                                        \
  }                                                                                               \
  target static void q_##suffix(const nrt_attn_problem *p, int64_t t, int64_t nb, float *ws) {    \
    q_body(p, t, nb, ws);                                                                         \
  }

ATTN_VARIANT(base, )
ATTN_VARIANT(avx2, NRT_TARGET_AVX2)
ATTN_VARIANT(avx512, NRT_TARGET_AVX512)

typedef void (*task_fn)(const nrt_attn_problem *, int64_t, int64_t, float *);

static void run_tasks(blk_ctx *c, int64_t lo, int64_t hi, size_t floats, task_fn base, task_fn avx2,
                      task_fn avx512) {
  float *ws = malloc(floats * sizeof(float));
  if (!ws) {
    atomic_store(&c->failed, 1);
    return;
  }
  task_fn fn = c->isa >= NRT_ISA_AVX512 ? avx512 : (c->isa >= NRT_ISA_AVX2 ? avx2 : base);
  for (int64_t t = lo; t < hi; t++) fn(c->p, t, c->blocks, ws);
  free(ws);
}

static void fwd_range(void *ctx, int64_t lo, int64_t hi) {
  blk_ctx *c = ctx;
  run_tasks(c, lo, hi, fwd_floats(c->p), fwd_base, fwd_avx2, fwd_avx512);
}
static void prep_range(void *ctx, int64_t lo, int64_t hi) {
  blk_ctx *c = ctx;
  run_tasks(c, lo, hi, fwd_floats(c->p), prep_base, prep_avx2, prep_avx512);
}
static void kv_range(void *ctx, int64_t lo, int64_t hi) {
  blk_ctx *c = ctx;
  run_tasks(c, lo, hi, kv_floats(c->p), kv_base, kv_avx2, kv_avx512);
}
static void q_range(void *ctx, int64_t lo, int64_t hi) {
  blk_ctx *c = ctx;
  run_tasks(c, lo, hi, q_floats(c->p), q_base, q_avx2, q_avx512);
}

static nrt_status drive(const nrt_attn_problem *p, int64_t heads, int64_t rows, int64_t block,
                        nrt_range_fn fn) {
  blk_ctx c = {.p = p, .isa = nrt_kernels_isa(), .blocks = (rows + block - 1) / block};
  atomic_init(&c.failed, 0);
  nrt_parallel_for(p->B * heads * c.blocks, 1, fn, &c);
  if (atomic_load(&c.failed)) {
    nrt_set_error_message("attention: out of memory for a task's block buffers");
    return NRT_ERROR_OUT_OF_MEMORY;
  }
  return NRT_SUCCESS;
}

nrt_status nrt_attn_forward_blocked(const nrt_attn_problem *p) { return drive(p, p->Hq, p->L, BQ, fwd_range); }
nrt_status nrt_attn_prep_blocked(const nrt_attn_problem *p) { return drive(p, p->Hq, p->L, BQ, prep_range); }
nrt_status nrt_attn_backward_kv_blocked(const nrt_attn_problem *p) { return drive(p, p->Hk, p->S, BK, kv_range); }
nrt_status nrt_attn_backward_q_blocked(const nrt_attn_problem *p) { return drive(p, p->Hq, p->L, BQ, q_range); }
