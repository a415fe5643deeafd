/* Blocked (flash-attention style) scaled dot-product attention kernels.
 *
 * Every product of the algorithm is a small dense tile product of float32
 * blocks held in the task's workspace: C (+)= A B with A read through two
 * strides (so that A or its transpose can be used without copying) and B
 * row-major. One micro-kernel (tile_mm) computes it four rows of C at a
 * time with the rows' accumulators in registers, so that each loaded row
 * of B feeds four FMAs per vector and each broadcast of A one FMA per
 * vector of the row. Widths are padded to multiples of 16 floats with
 * zeros (Ep, Evp), which keeps the micro-kernel free of edge code; padded
 * rows and keys get zero probability, so they add nothing.
 *
 * Forward: one task per (batch*head, block of BQ query rows). Keys are
 * visited in blocks of BK; each row keeps a running maximum m, a running
 * sum l of exp(s - m) and an unnormalised float32 output accumulator that
 * is rescaled by exp(m_old - m_new) whenever the maximum grows. The L x S
 * score matrix never exists. SDPA_BACKWARD_PREP (16-bit outputs) runs the
 * same loop with the saved logsumexp in place of the running statistics.
 *
 * Backward (SDPA_BACKWARD): one pass over (query block, key block) tiles.
 * Per tile the probabilities P = exp(s - lse) are computed once and give
 * dV += P^T dO, dS = P * (dP - D), dK += dS^T Q and dQ += dS K. A task
 * owns a (batch, key/value head, chunk of key blocks): it accumulates dK,
 * dV of its keys privately (summing over the query heads of the group) and
 * its dQ contribution into its own float32 slice; a second parallel pass
 * sums the slices in chunk order. The chunking depends only on the shape,
 * so results do not depend on the thread count, and no atomics are
 * needed.
 *
 * The loops are written once (always-inline bodies) and compiled for the
 * baseline, AVX2 and AVX-512 targets; the widest the host supports runs. */
#pragma GCC optimize("O3,no-trapping-math,no-math-errno,fp-contract=fast")
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/attention/attention.h"
#include "kernels/common/vmath.h"

#define BK 64 /* keys per block */
#define BQ 64 /* query rows per block */
#define INLINE static inline __attribute__((always_inline))

/* ---- the tile product ---------------------------------------------------- */

/* 64 bytes; GCC lowers it to one zmm, two ymm or four xmm per target.
 * Accessed through v16u (any float address) by macros rather than
 * functions: a 64-byte vector passed by value trips -Wpsabi in the
 * baseline build. */
typedef float v16 __attribute__((vector_size(64)));
typedef float v16u __attribute__((vector_size(64), aligned(4), may_alias));
#define LD16(x) ((v16)(*(const v16u *)(x)))
#define ST16(x, v) (*(v16u *)(x) = (v))

/* Rows r < 4, columns [0, 16*nv) of c:
 * c[r*ldc + n] = (acc ? c[r*ldc + n] : 0) + sum_k a[r*ars + k*aks] * b[k*ldb + n]. */
INLINE void mm4(float *restrict c, int64_t ldc, const float *restrict a, int64_t ars, int64_t aks,
                const float *restrict b, int64_t ldb, int64_t K, int nv, bool acc) {
  v16 c0[4], c1[4], c2[4], c3[4];
#pragma GCC unroll 4
  for (int u = 0; u < nv; u++) {
    c0[u] = acc ? LD16(c + u * 16) : (v16){0};
    c1[u] = acc ? LD16(c + ldc + u * 16) : (v16){0};
    c2[u] = acc ? LD16(c + 2 * ldc + u * 16) : (v16){0};
    c3[u] = acc ? LD16(c + 3 * ldc + u * 16) : (v16){0};
  }
  for (int64_t k = 0; k < K; k++) {
    const float *ak = a + k * aks, *bk = b + k * ldb;
    float x0 = ak[0], x1 = ak[ars], x2 = ak[2 * ars], x3 = ak[3 * ars];
#pragma GCC unroll 4
    for (int u = 0; u < nv; u++) {
      v16 bv = LD16(bk + u * 16);
      c0[u] += x0 * bv;
      c1[u] += x1 * bv;
      c2[u] += x2 * bv;
      c3[u] += x3 * bv;
    }
  }
#pragma GCC unroll 4
  for (int u = 0; u < nv; u++) {
    ST16(c + u * 16, c0[u]);
    ST16(c + ldc + u * 16, c1[u]);
    ST16(c + 2 * ldc + u * 16, c2[u]);
    ST16(c + 3 * ldc + u * 16, c3[u]);
  }
}

/* C [M x N] (+)= A [M x K] B [K x N]; M % 4 == 0, N % 16 == 0. nv is the
 * widest column step in vectors (4 where 32 vector registers hold the 16
 * accumulators, 1 elsewhere); a compile-time constant after inlining. */
INLINE void tile_mm(float *c, int64_t ldc, int64_t M, int64_t N, const float *a, int64_t ars, int64_t aks,
                    const float *b, int64_t ldb, int64_t K, bool acc, int nv) {
  for (int64_t r = 0; r < M; r += 4) {
    int64_t n = 0;
    if (nv == 4)
      for (; n + 64 <= N; n += 64) mm4(c + r * ldc + n, ldc, a + r * ars, ars, aks, b + n, ldb, K, 4, acc);
    for (; n < N; n += 16) mm4(c + r * ldc + n, ldc, a + r * ars, ars, aks, b + n, ldb, K, 1, acc);
  }
}

/* ---- block loads (to float32, zero padded) -------------------------------- */

/* dst[r*ld + c] = x[r][c] for r < n, c < cols; zeros up to rows x ld. */
INLINE void load_rows(float *dst, int64_t ld, int64_t rows, const char *base, int64_t row_stride,
                      int64_t col_stride, nrt_dtype dt, int64_t n, int64_t cols) {
  for (int64_t r = 0; r < n; r++) {
    nrt_load_f32(dst + r * ld, base + r * row_stride, col_stride, dt, cols);
    for (int64_t c = cols; c < ld; c++) dst[r * ld + c] = 0.0f;
  }
  for (int64_t x = n * ld; x < rows * ld; x++) dst[x] = 0.0f;
}

/* dst[c*BK + r] = x[r][c] for r < n, c < cols; zeros up to colsp x BK. */
INLINE void load_transposed(float *dst, int64_t colsp, const char *base, int64_t row_stride,
                            int64_t col_stride, nrt_dtype dt, int64_t n, int64_t cols) {
  for (int64_t c = 0; c < cols; c++) {
    nrt_load_f32(dst + c * BK, base + c * col_stride, row_stride, dt, n);
    for (int64_t r = n; r < BK; r++) dst[c * BK + r] = 0.0f;
  }
  for (int64_t x = cols * BK; x < colsp * BK; x++) dst[x] = 0.0f;
}

/* Scales raw scores, -inf past n, then the mask and the causal limit. */
INLINE void finish_scores(const nrt_attn_problem *p, float *s, int64_t b, int64_t h, int64_t i, int64_t j0,
                          int64_t n) {
  float scale = p->scale;
  for (int j = 0; j < BK; j++) s[j] *= scale;
  for (int64_t j = n; j < BK; j++) s[j] = -INFINITY;
  if (p->has_mask || p->causal) nrt_attn_mask_scores(p, b, h, i, j0, n, s);
}

/* ---- forward (and the backward's D from a recomputed output) -------------- */

static size_t fwd_floats(const nrt_attn_problem *p) {
  int64_t Ep = nrt_round_up(p->E, 16), Evp = nrt_round_up(p->Ev, 16);
  return (size_t)(BQ * Ep + Ep * BK + BK * Evp + BQ * Evp + BQ * BK + Evp);
}

/* prep: the row statistics are known (lse); the loop only rebuilds the
 * float32 output to take D = dO . out. */
INLINE void fwd_body(const nrt_attn_problem *p, int64_t task, int64_t blocks, float *ws, bool prep, int nv) {
  int64_t bh = task / blocks, i0 = (task % blocks) * BQ, b = bh / p->Hq, h = bh % p->Hq;
  int64_t hk = h / p->group, E = p->E, Ev = p->Ev, Ep = nrt_round_up(E, 16), Evp = nrt_round_up(Ev, 16);
  int64_t nq = nrt_min_i64(p->L - i0, BQ);
  float *Q = ws, *Kt = Q + BQ * Ep, *Vb = Kt + Ep * BK, *acc = Vb + BK * Evp, *sb = acc + BQ * Evp,
        *o = sb + BQ * BK;
  float m[BQ], l[BQ], z[BK];
  load_rows(Q, Ep, BQ, nrt_attn_at(&p->q, b, h, i0), p->q.s[2], p->q.s[3], p->q.dtype, nq, E);
  memset(acc, 0, sizeof(float) * (size_t)(BQ * Evp));
  for (int r = 0; r < BQ; r++) {
    m[r] = r < nq && prep ? *(const float *)nrt_attn_at(&p->lse, b, h, i0 + r) : -INFINITY;
    l[r] = 0.0f;
  }
  /* Causal: keys past the block's last row are invisible to all its rows. */
  int64_t jend = p->causal && i0 + nq < p->S ? i0 + nq : p->S;
  for (int64_t j0 = 0; j0 < jend; j0 += BK) {
    int64_t n = nrt_min_i64(p->S - j0, BK);
    load_transposed(Kt, Ep, nrt_attn_at(&p->k, b, hk, j0), p->k.s[2], p->k.s[3], p->k.dtype, n, E);
    load_rows(Vb, Evp, BK, nrt_attn_at(&p->v, b, hk, j0), p->v.s[2], p->v.s[3], p->v.dtype, n, Ev);
    /* Causal: rows before j0 see nothing of the block. */
    int64_t r0 = p->causal && j0 > i0 ? ((j0 - i0) & ~(int64_t)3) : 0;
    if (r0 >= nq) continue;
    tile_mm(sb + r0 * BK, BK, BQ - r0, BK, Q + r0 * Ep, Ep, 1, Kt, BK, Ep, false, nv);
    for (int64_t r = r0; r < BQ; r++) {
      int64_t i = i0 + r;
      float *s = sb + r * BK;
      if (r >= nq || (p->causal && j0 > i)) { /* contributes nothing */
        memset(s, 0, sizeof(float) * BK);
        continue;
      }
      finish_scores(p, s, b, h, i, j0, n);
      if (prep) {
        float lse = m[r];
        for (int j = 0; j < BK; j++) {
          float e = nrt_vexpf(s[j] - lse);
          s[j] = s[j] == -INFINITY ? 0.0f : e;
        }
      } else {
        float mb = -INFINITY;
        for (int j = 0; j < BK; j++) mb = s[j] > mb ? s[j] : mb; /* NaN ignored here, kept in s */
        float mo = m[r], mn = mb > mo ? mb : mo;
        if (mn == -INFINITY && !p->has_mask) {
          /* nothing attended so far: all weights 0, a NaN score's too (the
           * CPU's flash kernel takes the maximum ignoring NaN, finds -inf
           * and zeroes the block; with a mask NaN reaches its maximum) */
          memset(s, 0, sizeof(float) * BK);
          continue;
        }
        /* expf(-inf) is exactly 0; equal maxima (also both -inf) rescale by 1. */
        float alpha = mo == mn ? 1.0f : expf(mo - mn), sum = 0.0f;
        for (int j = 0; j < BK; j++) {
          float e = nrt_vexpf(s[j] - mn);
          s[j] = s[j] == -INFINITY ? 0.0f : e;
        }
        for (int j = 0; j < BK; j++) sum += s[j];
        l[r] = l[r] * alpha + sum;
        m[r] = mn;
        float *a = acc + r * Evp;
        if (alpha != 1.0f)
          for (int64_t e = 0; e < Evp; e++) a[e] *= alpha;
      }
      if (p->dropout) { /* the sum l is of the probabilities before dropout */
        nrt_attn_dropout(p, b, h, i, j0, n, z);
        for (int64_t j = 0; j < n; j++) s[j] *= z[j];
      }
    }
    tile_mm(acc + r0 * Evp, Evp, BQ - r0, Evp, sb + r0 * BK, BK, 1, Vb, Evp, BK, true, nv);
  }
  for (int64_t r = 0; r < nq; r++) {
    int64_t i = i0 + r;
    if (prep) {
      /* D = dO . out as attention.c's prep_range takes it for a float32
       * out: float32, term by term from e = 0, each product rounded
       * (volatile keeps it out of a fused multiply-add), so that float64
       * and 16-bit outs, recomputed here in float32, give the float32
       * path's gradients. For a lone key (weight 1, out = v_j) dP - D is
       * a rounding residual that a key of 1e18 makes a dQ of 5e10: a
       * double D left other residuals (fuzz seed 27182, case 34343:
       * float64 dQ 4.9e10 where the CPU's float32 computation gives 0). */
      nrt_load_f32(o, nrt_attn_at(&p->dout, b, h, i), p->dout.s[3], p->dout.dtype, Ev);
      float d = 0.0f;
      for (int64_t e = 0; e < Ev; e++) {
        volatile float t = o[e] * acc[r * Evp + e];
        d += t;
      }
      nrt_attn_store_rowstat(p, b, h, i, m[r], d);
      continue;
    }
    float lse;
    if (l[r] == 0.0f) { /* fully masked row: the sum of its zero weights times v, 0 (v is finite here) */
      for (int64_t e = 0; e < Ev; e++) o[e] = acc[r * Evp + e];
      lse = 0.0f; /* the CPU's: its backward then takes exp(s - 0), 0 for every masked score */
    } else {
      float inv = 1.0f / l[r];
      for (int64_t e = 0; e < Ev; e++) o[e] = acc[r * Evp + e] * inv;
      lse = m[r] + logf(l[r]);
    }
    nrt_store_f32(nrt_attn_at(&p->out, b, h, i), p->out.s[3], p->out.dtype, o, Ev);
    *(float *)nrt_attn_at(&p->lse, b, h, i) = lse;
  }
}

/* ---- backward -------------------------------------------------------------- */

typedef struct bwd_plan {
  int64_t Ep, Evp, Lp;
  int64_t nkb;    /* key blocks per head */
  int64_t chunks; /* key chunks per (batch, kv head) */
  int64_t kbpc;   /* key blocks per chunk */
  float *dq_part; /* [chunks][B*Hq][Lp][Ep] */
} bwd_plan;

static size_t bwd_floats(const nrt_attn_problem *p, const bwd_plan *pl) {
  int64_t Ep = pl->Ep, Evp = pl->Evp;
  return (size_t)(pl->kbpc * BK * (3 * Ep + 2 * Evp) + pl->Lp * (Ep + Evp) + 2 * pl->Lp + 2 * BQ * BK);
}

/* Per-block buffers of one key block: K transposed (scores), K rows (dQ),
 * V transposed (dP), the dK and dV accumulators. */
typedef struct kv_blk {
  float *Kt, *Kr, *Vt, *dK, *dV;
} kv_blk;

/* Laid out as Kt [Ep][BK], Kr [BK][Ep], Vt [Evp][BK], dK [BK][Ep], dV [BK][Evp]. */
INLINE kv_blk kv_blk_at(float *w, int64_t Ep, int64_t Evp) {
  kv_blk kb = {w, w + Ep * BK, w + 2 * Ep * BK, w + 2 * Ep * BK + Evp * BK, w + 3 * Ep * BK + Evp * BK};
  return kb;
}

/* One (query block, key block) tile of query head h. Q, G: the head's
 * padded Q and dO rows; lse, dd: its row statistics; dq: its dQ slice. */
INLINE void bwd_tile(const nrt_attn_problem *p, const bwd_plan *pl, const kv_blk *kb, int64_t b, int64_t h,
                     int64_t i0, int64_t j0, const float *Q, const float *G, const float *lse, const float *dd,
                     float *dq, float *sb, float *db, int nv, bool ds_only) {
  int64_t Ep = pl->Ep, Evp = pl->Evp;
  int64_t nq = nrt_min_i64(p->L - i0, BQ), n = nrt_min_i64(p->S - j0, BK);
  bool want_ds = ds_only;
  float scale = p->scale, z[BK];
  const float *Qb = Q + i0 * Ep, *Gb = G + i0 * Evp;
  tile_mm(sb, BK, BQ, BK, Qb, Ep, 1, kb->Kt, BK, Ep, false, nv);
  tile_mm(db, BK, BQ, BK, Gb, Evp, 1, kb->Vt, BK, Evp, false, nv);
  for (int64_t r = 0; r < BQ; r++) {
    int64_t i = i0 + r;
    float *s = sb + r * BK, *d = db + r * BK;
    /* Padding rows (lse -inf) have no gradient; a fully masked row's lse
     * is 0, the CPU's, and weighs its -inf scores exp(-inf) = 0. */
    if (r >= nq || lse[i] == -INFINITY || (p->causal && j0 > i)) {
      memset(s, 0, sizeof(float) * BK);
      memset(d, 0, sizeof(float) * BK);
    } else {
      finish_scores(p, s, b, h, i, j0, n);
      float li = lse[i], di = dd[i];
      for (int j = 0; j < BK; j++) {
        float e = nrt_vexpf(s[j] - li);
        s[j] = s[j] == -INFINITY ? 0.0f : e;
      }
      if (p->dropout) {
        nrt_attn_dropout(p, b, h, i, j0, n, z);
        for (int64_t j = 0; j < n; j++) d[j] *= z[j];
      }
      for (int j = 0; j < BK; j++) d[j] = s[j] * (d[j] - di);
      if (p->dropout) /* what multiplied V */
        for (int64_t j = 0; j < n; j++) s[j] *= z[j];
    }
    if (want_ds && r < nq)
      nrt_store_f32(nrt_attn_at(&p->ds, b, h, i) + j0 * p->ds.s[3], p->ds.s[3], p->ds.dtype, d, n);
    for (int j = 0; j < BK; j++) d[j] *= scale; /* d(q.k) = scale * dS */
  }
  if (ds_only) return;
  tile_mm(kb->dV, Evp, BK, Evp, sb, 1, BK, Gb, Evp, BQ, true, nv);
  tile_mm(kb->dK, Ep, BK, Ep, db, 1, BK, Qb, Ep, BQ, true, nv);
  tile_mm(dq + i0 * Ep, Ep, BQ, Ep, db, BK, 1, kb->Kr, Ep, BK, true, nv);
}

/* ds_only (SDPA_BACKWARD_DS): the same tiles, storing dS instead of
 * accumulating gradients. */
INLINE void bwd_body(const nrt_attn_problem *p, const bwd_plan *pl, int64_t task, float *ws, int nv,
                     bool ds_only) {
  int64_t bhk = task / pl->chunks, c = task % pl->chunks, b = bhk / p->Hk, hk = bhk % p->Hk;
  int64_t E = p->E, Ev = p->Ev, Ep = pl->Ep, Evp = pl->Evp, Lp = pl->Lp;
  int64_t kb0 = c * pl->kbpc, nkb = nrt_min_i64(pl->nkb - kb0, pl->kbpc); /* 0 when S = 0: dQ = 0 */
  int64_t per = BK * (3 * Ep + 2 * Evp);
  float *Q = ws + pl->kbpc * per, *G = Q + Lp * Ep, *lse = G + Lp * Evp, *dd = lse + Lp, *sb = dd + Lp,
        *db = sb + BQ * BK;
  for (int64_t x = 0; x < nkb; x++) {
    kv_blk kb = kv_blk_at(ws + x * per, Ep, Evp);
    int64_t j0 = (kb0 + x) * BK, n = nrt_min_i64(p->S - j0, BK);
    load_transposed(kb.Kt, Ep, nrt_attn_at(&p->k, b, hk, j0), p->k.s[2], p->k.s[3], p->k.dtype, n, E);
    load_rows(kb.Kr, Ep, BK, nrt_attn_at(&p->k, b, hk, j0), p->k.s[2], p->k.s[3], p->k.dtype, n, E);
    load_transposed(kb.Vt, Evp, nrt_attn_at(&p->v, b, hk, j0), p->v.s[2], p->v.s[3], p->v.dtype, n, Ev);
    memset(kb.dK, 0, sizeof(float) * (size_t)(BK * (Ep + Evp)));
  }
  for (int64_t h = hk * p->group; h < (hk + 1) * p->group; h++) {
    float *dq = ds_only ? NULL : pl->dq_part + ((c * p->B + b) * p->Hq + h) * Lp * Ep;
    if (dq) memset(dq, 0, sizeof(float) * (size_t)(Lp * Ep));
    load_rows(Q, Ep, Lp, nrt_attn_at(&p->q, b, h, 0), p->q.s[2], p->q.s[3], p->q.dtype, p->L, E);
    load_rows(G, Evp, Lp, nrt_attn_at(&p->dout, b, h, 0), p->dout.s[2], p->dout.s[3], p->dout.dtype, p->L, Ev);
    for (int64_t i = 0; i < Lp; i++) {
      lse[i] = -INFINITY;
      dd[i] = 0.0f;
      if (i < p->L) {
        const char *st = nrt_attn_at(&p->rowstat, b, h, i);
        lse[i] = *(const float *)st;
        dd[i] = *(const float *)(st + p->rowstat.s[3]);
      }
    }
    for (int64_t x = 0; x < nkb; x++) {
      kv_blk kb = kv_blk_at(ws + x * per, Ep, Evp);
      int64_t j0 = (kb0 + x) * BK;
      /* Causal: row i sees key j only when j <= i; the dS output (a mask,
       * so never causal) needs every tile. */
      int64_t ibeg = p->causal && !ds_only ? (j0 / BQ) * BQ : 0;
      for (int64_t i0 = ibeg; i0 < p->L; i0 += BQ)
        bwd_tile(p, pl, &kb, b, h, i0, j0, Q, G, lse, dd, dq, sb, db, nv, ds_only);
    }
  }
  for (int64_t x = 0; x < nkb && !ds_only; x++) {
    kv_blk kb = kv_blk_at(ws + x * per, Ep, Evp);
    int64_t j0 = (kb0 + x) * BK, n = nrt_min_i64(p->S - j0, BK);
    for (int64_t j = 0; j < n; j++) {
      nrt_store_f32(nrt_attn_at(&p->dk, b, hk, j0 + j), p->dk.s[3], p->dk.dtype, kb.dK + j * Ep, E);
      nrt_store_f32(nrt_attn_at(&p->dv, b, hk, j0 + j), p->dv.s[3], p->dv.dtype, kb.dV + j * Evp, Ev);
    }
  }
}

/* ---- per-ISA builds and the drivers ------------------------------------- */

#define ATTN_VARIANT(suffix, target, nv)                                                         \
  target static void fwd_##suffix(const nrt_attn_problem *p, int64_t t, int64_t nb, float *ws) { \
    fwd_body(p, t, nb, ws, false, nv);                                                           \
  }                                                                                              \
  target static void prep_##suffix(const nrt_attn_problem *p, int64_t t, int64_t nb, float *ws) {\
    fwd_body(p, t, nb, ws, true, nv);                                                            \
  }                                                                                              \
  target static void bwd_##suffix(const nrt_attn_problem *p, const bwd_plan *pl, int64_t t,      \
                                  float *ws) {                                                   \
    bwd_body(p, pl, t, ws, nv, false);                                                           \
  }                                                                                              \
  target static void ds_##suffix(const nrt_attn_problem *p, const bwd_plan *pl, int64_t t,       \
                                 float *ws) {                                                    \
    bwd_body(p, pl, t, ws, nv, true);                                                            \
  }

ATTN_VARIANT(base, , 1)
ATTN_VARIANT(avx2, NRT_TARGET_AVX2, 1)
ATTN_VARIANT(avx512, NRT_TARGET_AVX512, 4)

typedef void (*task_fn)(const nrt_attn_problem *, int64_t, int64_t, float *);
typedef void (*bwd_fn)(const nrt_attn_problem *, const bwd_plan *, int64_t, float *);

typedef struct blk_ctx {
  const nrt_attn_problem *p;
  const bwd_plan *plan;
  nrt_isa isa;
  int64_t blocks; /* query blocks per (batch, head) */
  bool ds_only;   /* the backward's SDPA_BACKWARD_DS */
  atomic_int failed;
} blk_ctx;

static float *ws_alloc(size_t floats) {
  size_t bytes = (floats * sizeof(float) + 63) & ~(size_t)63;
  return aligned_alloc(64, bytes ? bytes : 64);
}

static void run_tasks(blk_ctx *c, int64_t lo, int64_t hi, size_t floats, task_fn base, task_fn avx2,
                      task_fn avx512) {
  float *ws = ws_alloc(floats);
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

/* The launch's status once its tasks ran. */
static nrt_status tasks_status(blk_ctx *c) {
  if (atomic_load(&c->failed))
    return nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY, "attention: out of memory for a task's block buffers");
  return NRT_SUCCESS;
}

static nrt_status drive(const nrt_attn_problem *p, nrt_range_fn fn) {
  blk_ctx c = {.p = p, .isa = nrt_kernels_isa(), .blocks = nrt_cdiv(p->L, BQ)};
  atomic_init(&c.failed, 0);
  nrt_parallel_for(p->B * p->Hq * c.blocks, 1, fn, &c);
  return tasks_status(&c);
}

nrt_status nrt_attn_forward_blocked(const nrt_attn_problem *p) { return drive(p, fwd_range); }
nrt_status nrt_attn_prep_blocked(const nrt_attn_problem *p) { return drive(p, prep_range); }

static void bwd_range(void *ctx, int64_t lo, int64_t hi) {
  blk_ctx *c = ctx;
  float *ws = ws_alloc(bwd_floats(c->p, c->plan));
  if (!ws) {
    atomic_store(&c->failed, 1);
    return;
  }
  bwd_fn fn = c->isa >= NRT_ISA_AVX512 ? bwd_avx512 : (c->isa >= NRT_ISA_AVX2 ? bwd_avx2 : bwd_base);
  if (c->ds_only) fn = c->isa >= NRT_ISA_AVX512 ? ds_avx512 : (c->isa >= NRT_ISA_AVX2 ? ds_avx2 : ds_base);
  for (int64_t t = lo; t < hi; t++) fn(c->p, c->plan, t, ws);
  free(ws);
}

/* dQ of each row: the chunks' slices summed in chunk order. */
static void dq_sum_range(void *ctx, int64_t lo, int64_t hi) {
  blk_ctx *c = ctx;
  const nrt_attn_problem *p = c->p;
  const bwd_plan *pl = c->plan;
  int64_t rows = p->B * p->Hq * pl->Lp, Ep = pl->Ep;
  float *t = malloc(sizeof(float) * (size_t)Ep);
  if (!t) {
    atomic_store(&c->failed, 1);
    return;
  }
  for (int64_t row = lo; row < hi; row++) {
    int64_t bh = row / p->L, i = row % p->L, b = bh / p->Hq, h = bh % p->Hq;
    const float *src = pl->dq_part + (bh * pl->Lp + i) * Ep;
    memcpy(t, src, sizeof(float) * (size_t)Ep);
    for (int64_t k = 1; k < pl->chunks; k++)
      for (int64_t e = 0; e < Ep; e++) t[e] += src[k * rows * Ep + e];
    nrt_store_f32(nrt_attn_at(&p->dq, b, h, i), p->dq.s[3], p->dq.dtype, t, p->E);
  }
  free(t);
}

static nrt_status backward(const nrt_attn_problem *p, bool ds_only) {
  bwd_plan pl = {.Ep = nrt_round_up(p->E, 16), .Evp = nrt_round_up(p->Ev, 16), .Lp = nrt_round_up(p->L, BQ),
                 .nkb = nrt_cdiv(p->S, BK)};
  /* Enough tasks for a pool of ~16 threads even with few kv heads, from
   * the shape alone (the summation order must not follow the pool). */
  int64_t heads = p->B * p->Hk, want = heads >= 16 ? 1 : (16 + heads - 1) / heads;
  pl.chunks = want < pl.nkb ? want : pl.nkb;
  if (pl.chunks < 1) pl.chunks = 1;
  pl.kbpc = nrt_cdiv(pl.nkb, pl.chunks);
  pl.chunks = pl.nkb ? nrt_cdiv(pl.nkb, pl.kbpc) : 1;
  blk_ctx c = {.p = p, .plan = &pl, .isa = nrt_kernels_isa(), .ds_only = ds_only};
  atomic_init(&c.failed, 0);
  if (!ds_only) {
    pl.dq_part = ws_alloc((size_t)(pl.chunks * p->B * p->Hq * pl.Lp * pl.Ep));
    if (!pl.dq_part)
      return nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY, "attention: out of memory for the backward's dQ partial sums");
  }
  nrt_parallel_for(p->B * p->Hk * pl.chunks, 1, bwd_range, &c);
  if (!ds_only && !atomic_load(&c.failed)) nrt_parallel_for(p->B * p->Hq * p->L, 64, dq_sum_range, &c);
  free(pl.dq_part);
  return tasks_status(&c);
}

nrt_status nrt_attn_backward_blocked(const nrt_attn_problem *p) { return backward(p, false); }
nrt_status nrt_attn_backward_ds_blocked(const nrt_attn_problem *p) { return backward(p, true); }
