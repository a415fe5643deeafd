/* Family ATTENTION (nrt/ops/attention.h): descriptor decoding, the pieces
 * shared by both paths (masking, dropout), the backward's per-row
 * statistics and the plain reference path.
 *
 * The reference path is the textbook computation, one query row at a
 * time in double: all S scores of the row, their softmax, then the
 * output (or the gradients). The backward takes the forward's logsumexp
 * from the rowstat, as the CPU's flash backward does (see ref_row_grad). */
#include <float.h>
#include <stdatomic.h>
#include <stdlib.h>
#include "kernels/attention/attention.h"
#include "kernels/common/isa.h"
#include "nrt/ops/attention.h"

/* ---- shared pieces ------------------------------------------------------ */

void nrt_attn_dropout(const nrt_attn_problem *p, int64_t b, int64_t h, int64_t i, int64_t j0,
                      int64_t n, float *z) {
  uint64_t e0 = p->offset + (uint64_t)(((b * p->Hq + h) * p->L + i) * p->S + j0);
  uint32_t w[4];
  uint64_t have = UINT64_MAX;
  for (int64_t j = 0; j < n; j++) {
    uint64_t e = e0 + (uint64_t)j, c = e >> 2;
    if (c != have) { /* four consecutive elements share one Philox block */
      nrt_philox4x32(p->seed, c, w);
      have = c;
    }
    z[j] = (double)w[e & 3] * 0x1p-32 < p->keep_prob ? p->keep_scale : 0.0f;
  }
}

void nrt_attn_mask_scores(const nrt_attn_problem *p, int64_t b, int64_t h, int64_t i, int64_t j0,
                          int64_t n, float *s) {
  if (p->has_mask) {
    const nrt_attn_view *m = &p->mask;
    const char *row = nrt_attn_at(m, b, h, i) + j0 * m->s[3];
    if (p->mask_bool) {
      /* PyTorch turns a bool mask into an additive one (-inf where
       * False) first: a NaN or +inf score under False stays NaN */
      for (int64_t j = 0; j < n; j++)
        if (!row[j * m->s[3]]) s[j] += -INFINITY;
    } else {
      float buf[64];
      for (int64_t c = 0; c < n; c += 64) {
        int64_t len = n - c < 64 ? n - c : 64;
        nrt_load_f32(buf, row + c * m->s[3], m->s[3], m->dtype, len);
        for (int64_t j = 0; j < len; j++) s[c + j] += buf[j];
      }
    }
  }
  if (p->causal) /* top-left aligned: key j is visible to row i iff j <= i */
    for (int64_t j = i + 1 - j0 < 0 ? 0 : i + 1 - j0; j < n; j++) s[j] = -INFINITY;
}

/* ---- backward row statistics (SDPA_BACKWARD_PREP) ----------------------- */

void nrt_attn_store_rowstat(const nrt_attn_problem *p, int64_t b, int64_t h, int64_t i, float lse, float d) {
  float g[64];
  const char *src = nrt_attn_at(&p->dout, b, h, i);
  char *dst = nrt_attn_at(&p->dcopy, b, h, i);
  for (int64_t e = 0; e < p->Ev; e += 64) {
    int64_t n = p->Ev - e < 64 ? p->Ev - e : 64;
    nrt_load_f32(g, src + e * p->dout.s[3], p->dout.s[3], p->dout.dtype, n);
    nrt_store_f32(dst + e * p->dcopy.s[3], p->dcopy.s[3], NRT_FLOAT32, g, n);
  }
  char *st = nrt_attn_at(&p->rowstat, b, h, i);
  *(float *)st = lse;
  *(float *)(st + p->rowstat.s[3]) = d;
}

static void prep_range(void *ctx, int64_t lo, int64_t hi) {
  const nrt_attn_problem *p = ctx;
  for (int64_t r = lo; r < hi; r++) {
    int64_t i = r % p->L, bh = r / p->L, h = bh % p->Hq, b = bh / p->Hq;
    const char *o = nrt_attn_at(&p->out, b, h, i), *g = nrt_attn_at(&p->dout, b, h, i);
    /* In float32, term by term from e = 0 with each product rounded: the
     * blocked backward's dP = dO . v_j (tile_mm) sums the same way, so where
     * out is v_j (a lone key, weight 1) dP - D cancels to exactly 0, as on
     * the CPU, instead of leaving a rounding residual that a q or k of
     * 3.4e38 turns into a gradient of 1e31. */
    float d = 0.0f; /* float64 operands at float32 precision */
    for (int64_t e = 0; e < p->Ev; e++)
      d += (float)nrt_ref_load_f64(g + e * p->dout.s[3], p->dout.dtype) *
           (float)nrt_ref_load_f64(o + e * p->out.s[3], p->out.dtype);
    nrt_attn_store_rowstat(p, b, h, i, *(const float *)nrt_attn_at(&p->lse, b, h, i), d);
  }
}

/* ---- reference path ----------------------------------------------------- */

typedef struct ref_ctx {
  const nrt_attn_problem *p;
  atomic_int failed;
} ref_ctx;

typedef struct ref_buf {
  double *s, *prob, *ds, *acc;
  float *z, *o, *g; /* o, g: the backward's float32 out and dO rows */
  float *ef;        /* the row's exp(s - max) as the CPU's forward multiplies v by them */
  float *qf, *kf;   /* float32 q and k rows for the CPU's q . k orders (qk_order.c) */
  float rsum;       /* 1 / their float32 sum */
} ref_buf;

static bool ref_buf_init(ref_buf *r, const nrt_attn_problem *p) {
  int64_t S = p->S ? p->S : 1, W = (p->E > p->Ev ? p->E : p->Ev) + 1;
  r->s = malloc((size_t)S * sizeof(double));
  r->prob = malloc((size_t)S * sizeof(double));
  r->ds = malloc((size_t)S * sizeof(double));
  r->acc = malloc((size_t)W * sizeof(double));
  r->z = malloc((size_t)S * sizeof(float));
  r->o = malloc((size_t)W * sizeof(float));
  r->g = malloc((size_t)W * sizeof(float));
  r->ef = malloc((size_t)S * sizeof(float));
  r->qf = malloc((size_t)W * sizeof(float));
  r->kf = malloc((size_t)W * sizeof(float));
  return r->s && r->prob && r->ds && r->acc && r->z && r->o && r->g && r->ef && r->qf && r->kf;
}

static void ref_buf_free(ref_buf *r) {
  free(r->s);
  free(r->prob);
  free(r->ds);
  free(r->acc);
  free(r->z);
  free(r->o);
  free(r->g);
  free(r->ef);
  free(r->qf);
  free(r->kf);
}

/* x, or an infinity of its sign where x is past float32's range. */
static double f32_range(double x) { return fabs(x) > FLT_MAX ? copysign(INFINITY, x) : x; }

/* float64 at float32 precision, as the blocked kernels load it: the fuzz
 * and users compare with the CPU's float32 computation of the same values. */
static double ref_load(const nrt_attn_view *t, const char *row, int64_t col) {
  double x = nrt_ref_load_f64(row + col * t->s[3], t->dtype);
  return t->dtype == NRT_FLOAT64 ? (double)(float)x : x;
}

/* The CPU flash kernel's query block: 32 queries (64 from 192, 256 from 768). */
static int64_t q_split(const nrt_attn_problem *p) { return p->L >= 768 ? 256 : p->L >= 192 ? 64 : 32; }

/* Whether the CPU's flash forward takes score (i, j) in a whole vector of
 * keys (vector instructions) rather than its scalar tail: it walks the keys
 * in blocks of 512, each block's first len / lanes * lanes keys in vectors.
 * A causal row sees the keys up to the end of its query block only. Vectors
 * are 64 bytes on AVX-512 hosts, 32 elsewhere; float32 lanes (also the
 * 16-bit types' accumulators) or float64 ones. This decides the exp (see
 * ref_row_probs) and whether a NaN score reaches an unmasked row's maximum:
 * the vectors take it with at::vec::maximum (NaN propagates), the tail with
 * std::max (a NaN second operand is dropped). Probed: 16 float keys take
 * NaN from any key, 15 from none, 17 from the first 16. */
static bool key_in_vector(const nrt_attn_problem *p, int64_t i, int64_t j) {
  int64_t lanes = (nrt_kernels_isa() >= NRT_ISA_AVX512 ? 64 : 32) / (p->q.dtype == NRT_FLOAT64 ? 8 : 4);
  int64_t qs = q_split(p), keys = p->S;
  if (p->causal && i / qs * qs + qs < keys) keys = i / qs * qs + qs;
  int64_t n = j - j % 512, len = keys - n < 512 ? keys - n : 512;
  return j < n + len / lanes * lanes;
}

/* The CPU flash kernel's block around score (i, j): *lb queries (of at
 * most q_split) by *sb keys (of at most 512). */
static void block_shape(const nrt_attn_problem *p, int64_t i, int64_t j, int64_t *lb, int64_t *sb) {
  int64_t qs = q_split(p), l = p->L - i / qs * qs, s = p->S - j / 512 * 512;
  *lb = l < qs ? l : qs;
  *sb = s < 512 ? s : 512;
}

/* Whether the CPU took its flash kernel for these operands as far as their
 * layout decides: every last dim contiguous and one head dim (else its
 * math decomposition ran, whose bmm takes other kernels). */
static bool flash_layout(const nrt_attn_problem *p) {
  int64_t elt = (int64_t)nrt_dtype_size(p->q.dtype);
  return p->q.s[3] == elt && p->k.s[3] == elt && p->v.s[3] == elt && p->E == p->Ev;
}

/* The MKL kernel of the CPU's float32 q k^T for score (i, j): the flash
 * kernels take it per block of up to 32 queries (64 from 192, 256 from
 * 768) and 512 keys, so the block's shape and the score's place in it
 * decide (qk_order.c). MKL's trees were probed on an Intel AVX-512 host
 * and apply there only: other hosts' MKL (AMD's Zen kernels) and other
 * dtypes keep neuron's order. ATen's own loop (operands BLAS refuses) is
 * the same code on every host and is followed everywhere. tn_kernel is
 * that choice for any gemm(T, N, m = keys of the block, n = queries,
 * k = E) whose 'a' rows (keys) are a_row bytes apart and 'b' rows
 * (queries) b_row. */
static nrt_attn_qk_kernel tn_kernel(const nrt_attn_problem *p, int64_t i, int64_t j, int64_t a_row, int64_t b_row) {
  /* float64 runs at float32 precision: the CPU's float32 run of the same
   * values is its reference, so it takes float32's orders; float16 too:
   * its flash kernel's GEMM sums as MKL's sgemm does (probed with products
   * 2^25, -2^25 and 1 at head dims 8 and 40: the LANES/SEQ switch at 2
   * keys and 16 queries, 3 keys and 11, as float32's) */
  bool f32 = (p->q.dtype == NRT_FLOAT32 || p->q.dtype == NRT_FLOAT64 || p->q.dtype == NRT_FLOAT16) &&
             p->k.dtype == p->q.dtype;
  if (!f32) return NRT_ATTN_QK_OWN;
  if (!flash_layout(p)) return NRT_ATTN_QK_OWN; /* only where the CPU took its flash kernel */
  int64_t elt = (int64_t)nrt_dtype_size(p->q.dtype);
  int64_t lb, sb;
  block_shape(p, i, j, &lb, &sb);
  /* cpublas::gemm's BLAS check wants lda (the keys' row stride) and ldb
   * (the queries') of at least the head dim, after it normalises them for
   * a block of one key or one query; else the CPU runs ATen's own loop, on
   * every host (probed: keys expanded over the sequence sum in ATen's
   * 4-partial order; one transposed key still takes MKL's TAIL tree) */
  int64_t row = p->E * elt;
  if ((sb > 1 && a_row < row) || (lb > 1 && b_row < row)) return NRT_ATTN_QK_ATEN;
  if (nrt_kernels_host_blas() != NRT_HOST_BLAS_INTEL_AVX512) return NRT_ATTN_QK_OWN;
  return nrt_attn_qk_kernel_of(lb, sb, p->E, i % q_split(p), j % 512);
}

static nrt_attn_qk_kernel qk_kernel(const nrt_attn_problem *p, int64_t i, int64_t j) {
  return tn_kernel(p, i, j, p->k.s[2], p->q.s[2]);
}

/* The same for the flash backward's dP = dO v^T, the same gemm(T, N) shape
 * with v as the keys and dO (contiguous on the CPU) as the queries. */
static nrt_attn_qk_kernel dp_kernel(const nrt_attn_problem *p, int64_t i, int64_t j) {
  return tn_kernel(p, i, j, p->v.s[2], p->Ev * (int64_t)nrt_dtype_size(p->q.dtype));
}

/* Which operand MKL's sgemm scales by alpha before the products on an
 * Intel AVX-512 host, for the CPU flash backward's float32 scores
 * (gemm(T, N, m = keys of the block, n = queries, k = E, alpha = scale)):
 * 1 the keys, 2 the queries, 0 neither (alpha times the sum, as the
 * forward's separate scaling). Probed with addmm(0, q, k^T, beta=0,
 * alpha) on one-term products, blocks of 1..33 queries, 1..300 keys and
 * head dims 1..128: a head dim of 1 scales the queries from 2 x 2; else
 * the keys once there are at least 12 of them, at least E and more than
 * the queries (3.4e38 x 1.4 at scale 0.41 is then 1.9e38, not inf: fuzz
 * 18201-2529230). Head dims above 44 are left out: there the boundary
 * depends on the queries too (none at 2 queries from 48, none at 3 from
 * 72, part of the blocks at 8 from 96). */
static int mkl_alpha_operand(const nrt_attn_problem *p, int64_t i, int64_t j) {
  int64_t lb, sb;
  block_shape(p, i, j, &lb, &sb);
  if (lb < 2 || p->E > 44) return 0;
  if (p->E == 1) return sb >= 2 ? 2 : 0;
  return sb >= 12 && sb >= p->E && sb > lb ? 1 : 0;
}

/* Whether the CPU's backward scales an operand before q k^T (see
 * ref_row_probs): probed on AMD hosts; on Intel AVX-512 hosts oneDNN's
 * bfloat16 GEMM scales after the sum, as the forward (fuzz 19402-245661: a
 * lone key's weight exp(s - lse) is 1 there, and inf with the prescaled
 * score; sdpa-only fuzz seeds 15001 / 15002: 39 -> 37, 24 -> 19). */
static bool prescaled(const nrt_attn_problem *p) {
  return p->q.dtype == NRT_BFLOAT16 && (p->L == 1 || p->S == 1) &&
         nrt_kernels_host_blas() != NRT_HOST_BLAS_INTEL_AVX512;
}

/* Softmax probabilities of row (b, h, i) into r->prob (0 everywhere for a
 * fully masked row) and the dropout multipliers into r->z. Returns false
 * for a fully masked row. */
static bool ref_row_probs(const nrt_attn_problem *p, int64_t b, int64_t h, int64_t i, ref_buf *r,
                          bool backward) {
  int64_t hk = h / p->group;
  const char *q = nrt_attn_at(&p->q, b, h, i);
  double mx = -INFINITY;
  bool nan = false;
  /* The CPU's bfloat16 flash backward recomputes the scores with a GEMM
   * whose alpha is the scale; where a block is one query or one key (here:
   * L or S is 1) that GEMM scales its matrix operand (the queries if S is
   * 1, else the keys) before the products, so 3e38 * 2 at scale 0.5 is a finite 3e38 there, not inf,
   * and inf * -1 plus it is -inf, not NaN (fuzz 14142135-508801 / -350498;
   * crafted probes: the forward and float32 scale after the sum, most
   * larger bfloat16 blocks too). Its sum's order (below) matched 360 of 360
   * probed rows of +-3e38 / inf terms, head dims 4 to 36 (sequential: 95%);
   * scaling the other operand breaks finite 1e38 scores' equality with the
   * forward's lse (exp(s - lse) = exp(+-1e31) instead of 1). */
  bool prescale = backward && prescaled(p);
  /* the bfloat16 brgemm's arrangements on AVX512-BF16 Intel hosts (the
   * flash path's inputs only: every last dim contiguous, one head dim;
   * not expanded over the sequence: such keys take
   * another kernel there, which keeps a subnormal key, 15002-111265: inf x
   * 2.9e-39 is inf on the CPU, NaN in the brgemm's arrangements) */
  bool bf16_dot = p->q.dtype == NRT_BFLOAT16 && p->k.dtype == NRT_BFLOAT16 && flash_layout(p) &&
                  p->q.s[2] != 0 && p->k.s[2] != 0 && nrt_kernels_host_bf16_dot();
  for (int64_t e = 0; e < p->E; e++) r->qf[e] = (float)ref_load(&p->q, q, e);
  for (int64_t j = 0; j < p->S; j++) {
    const char *k = nrt_attn_at(&p->k, b, hk, j);
    /* In float32, term by term from e = 0, each product rounded before it
     * is added: the CPU's flash kernel takes q k^T from MKL's sgemm, whose
     * order for head dims up to 11 is exactly this (crafted probes of rows
     * of +-3e38: 150 of 150 per head dim 2..11 overflow as it does; beyond,
     * MKL's blocking differs, 92-97%). Past float32's range a product or a
     * partial sum is infinite, and opposite infinities make NaN. The score
     * itself is then a float32 value as the CPU's: its backward's
     * exp(s - lse) with the stored float32 lse is exp(0) = 1 for a lone key
     * of score 2e17, not exp of a double's rounding error. */
    float dot = 0.0f;
    double s;
    if (prescale) {
      /* four sums over e mod 4 up to the last multiple of 4, combined as
       * (0 + 2) + (1 + 3), then the tail in order */
      float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      int64_t main = p->E - p->E % 4;
      for (int64_t e = 0; e < p->E; e++) {
        double qe = ref_load(&p->q, q, e), ke = ref_load(&p->k, k, e);
        float t = p->S == 1 ? (float)((double)(float)((double)p->scale * qe) * ke)
                            : (float)((double)(float)((double)p->scale * ke) * qe);
        if (e < main) acc[e % 4] += t;
        else if (e == main) dot = ((acc[0] + acc[2]) + (acc[1] + acc[3])) + t;
        else dot += t;
      }
      if (main == p->E) dot = (acc[0] + acc[2]) + (acc[1] + acc[3]);
      s = dot;
    } else {
      nrt_attn_qk_kernel kind = qk_kernel(p, i, j);
      /* the backward's GEMM takes the scale as alpha (mkl_alpha_operand) */
      int pre = backward && kind != NRT_ATTN_QK_OWN && kind != NRT_ATTN_QK_ATEN ? mkl_alpha_operand(p, i, j) : 0;
      if (kind != NRT_ATTN_QK_OWN) {
        for (int64_t e = 0; e < p->E; e++)
          r->kf[e] = pre == 1 ? (float)((double)p->scale * ref_load(&p->k, k, e)) : (float)ref_load(&p->k, k, e);
        float q0 = pre == 2 ? (float)((double)p->scale * r->qf[0]) : r->qf[0]; /* pre == 2: E is 1 */
        dot = pre == 2 ? q0 * r->kf[0] : nrt_attn_qk_dot(kind, r->qf, r->kf, p->E);
      } else {
        /* 16-bit: the CPU's oneDNN kernels (AVX512-BF16, AMX) fuse each
         * product into the float accumulator, so -0.6 x inf then -2 x
         * -3.4e38 stays -inf instead of meeting a rounded +inf (fuzz
         * 19402-373996). bfloat16 on AVX512-BF16 Intel hosts: the
         * forward's brgemm arrangements (qk_order.c), taken for the
         * backward's recomputed scores too, which must equal the
         * forward's where exp(s - lse) meets 1e36-scale scores (sdpa-only
         * fuzz, seed 15001: 27 -> 16 cases; the backward's gemm with keys
         * expanded over the sequence is not followed: probes give NaN
         * where this gives -inf, yet 15001-123700 agrees only this way).
         * Elsewhere in order, a partial model of their chains (sdpa-only
         * fuzz: 45 -> 39 and 27 -> 24 cases on seeds 15001 and 15002; 3
         * new there, rows the CPU finds dead). */
        if (bf16_dot) {
          for (int64_t e = 0; e < p->E; e++) r->kf[e] = (float)ref_load(&p->k, k, e);
          int64_t lb, sb;
          block_shape(p, i, j, &lb, &sb);
          dot = nrt_attn_qk_dot_bf16(r->qf, r->kf, p->E, lb == 1 || sb == 1);
        } else if (p->q.dtype == NRT_BFLOAT16 || p->q.dtype == NRT_FLOAT16)
          for (int64_t e = 0; e < p->E; e++) dot = fmaf((float)ref_load(&p->q, q, e), (float)ref_load(&p->k, k, e), dot);
        else
          for (int64_t e = 0; e < p->E; e++) dot += (float)(ref_load(&p->q, q, e) * ref_load(&p->k, k, e));
      }
      s = pre ? dot : (float)((double)p->scale * dot);
    }
    if (p->has_mask) {
      const char *m = nrt_attn_at(&p->mask, b, h, i) + j * p->mask.s[3];
      if (p->mask_bool)
        s = *m ? s : s + -INFINITY;
      else
        s = (float)f32_range(s + nrt_ref_load_f64(m, p->mask.dtype));
    }
    if (p->causal && j > i) s = -INFINITY;
    r->s[j] = s;
    if (isnan(s)) nan = nan || p->has_mask || key_in_vector(p, i, j);
    else if (s > mx) mx = s;
  }
  for (int64_t j = 0; j < p->S; j++) r->z[j] = 1.0f;
  if (p->dropout) nrt_attn_dropout(p, b, h, i, 0, p->S, r->z);
  /* No finite or +inf score: every weight is 0, unless a NaN reached the
   * maximum (nan: see key_in_vector; with a mask any NaN does). */
  if (mx == -INFINITY && !nan) {
    /* The CPU's backward recomputes the weights as exp(s - lse) with the
     * lse such a row gets (0): NaN where the score is NaN. */
    for (int64_t j = 0; j < p->S; j++) r->prob[j] = backward && isnan(r->s[j]) ? NAN : 0.0;
    return false;
  }
  /* float32 as the CPU's flash forward (_exp_reduce_sum_fusion_kernel):
   * exp(s - max) with Vectorized<float>::exp_u20 over whole vectors of keys
   * (nrt_attn_exp_u20: NaN, i.e. inf - inf in a row with +inf scores, gives
   * inf there, so the sum and lse are inf, not NaN) and expf over the tail;
   * the vector part summed per lane and the lanes reduced pairwise, then
   * the tail added in key order (per block of 512 keys; the blocks' sums
   * are added without the CPU's rescaling, exact for one block); lse = max
   * + log(sum); the output is then sum_j e_j v_j times 1 / sum
   * (ref_forward_row), the order that decides where 1e18-scale values
   * cancel, and the backward's dO . out with them. 16-bit inputs take
   * Vectorized<float>::fexp_u20 in the vectors: its NaN passes the range
   * masks and converts to the integer indefinite, -0.0, so the key weighs
   * 0 (probed: a bfloat16 row with a +inf score and 16 keys has out 0 and
   * lse +inf on the CPU); elsewhere its cubic is within 1e-4 of expf,
   * below bfloat16's and float16's resolution, so expf stands in for it.
   * float64: Sleef's exp in the vectors, which keeps NaN as expf does. */
  /* a NaN that reaches the maximum makes it NaN: exp_u20 gives inf, expf NaN */
  float sum = 0.0f, mxf = nan ? NAN : (float)mx;
  bool u20 = p->q.dtype != NRT_FLOAT64;
  for (int64_t j0 = 0; j0 < p->S; j0 += 512) {
    float lane[16] = {0};
    int64_t W = (nrt_kernels_isa() >= NRT_ISA_AVX512 ? 64 : 32) / (u20 ? 4 : 8), nvec = 0;
    for (int64_t j = j0; j < p->S && j < j0 + 512; j++) {
      float d = (float)r->s[j] - mxf;
      bool vec = key_in_vector(p, i, j);
      r->ef[j] = r->s[j] == -INFINITY ? 0.0f
                 : !vec || !u20 ? expf(d)
                 : p->q.dtype == NRT_FLOAT32 ? nrt_attn_exp_u20(d)
                 : isnan(d)                  ? -0.0f
                                             : expf(d);
      if (vec) lane[nvec++ % W] += r->ef[j];
    }
    float block = 0.0f;
    if (nvec > 0) {
      for (int64_t h = W / 2; h > 0; h /= 2)
        for (int64_t l = 0; l < h; l++) lane[l] += lane[l + h];
      block = lane[0];
    }
    for (int64_t j = j0 + nvec; j < p->S && j < j0 + 512; j++) block += r->ef[j]; /* the scalar tail */
    sum += block;
  }
  /* The CPU adds exp(previous max - max) * previous sum, 0 * 0 for the
   * first block unless the maximum is NaN: then NaN, whatever the weights.
   * Every weight 0 (16-bit: a +inf maximum's -0.0 from fexp_u20): the CPU
   * takes a sum of 0 as 1, so out is 0 and lse the maximum. */
  if (nan) sum = NAN;
  if (sum == 0.0f) sum = 1.0f;
  r->rsum = 1.0f / sum;
  /* keys a causal row cannot see weigh exactly 0 (the CPU zeroes them after
   * the exponential), also in a row whose sum is NaN */
  if (p->causal)
    for (int64_t j = i + 1; j < p->S; j++) r->ef[j] = 0.0f;
  for (int64_t j = 0; j < p->S; j++) r->prob[j] = (double)r->ef[j] / sum;
  r->acc[0] = mxf + logf(sum); /* the row's logsumexp, for the forward */
  return true;
}

/* Output element e of a live row as the CPU's forward stores it (after
 * ref_row_probs with backward false): the CPU's gemm of weights and v, key
 * order from 0, products rounded, then times 1 / sum (its 16-bit kernel
 * rounds the weights to bfloat16/float16 first, which neuron does not: a
 * 16-bit output is the float32 result rounded once, runtime/tests/
 * test_attention.c test_bf16_rounds_once). */
static float ref_out_elem(const nrt_attn_problem *p, int64_t b, int64_t hk, int64_t e, const ref_buf *r) {
  float a = 0.0f;
  for (int64_t j = 0; j < p->S; j++) a += r->ef[j] * r->z[j] * (float)ref_load(&p->v, nrt_attn_at(&p->v, b, hk, j), e);
  return a * r->rsum;
}

/* The reference's row tasks: one query row (b, h, i) at a time, with row
 * buffers per task. */
typedef void (*ref_row_fn)(const nrt_attn_problem *p, int64_t b, int64_t h, int64_t i, ref_buf *r);

static void ref_rows(void *ctx, int64_t lo, int64_t hi, ref_row_fn fn) {
  ref_ctx *c = ctx;
  const nrt_attn_problem *p = c->p;
  ref_buf r;
  if (!ref_buf_init(&r, p)) {
    atomic_store(&c->failed, 1);
    ref_buf_free(&r);
    return;
  }
  for (int64_t row = lo; row < hi; row++) {
    int64_t i = row % p->L, bh = row / p->L;
    fn(p, bh / p->Hq, bh % p->Hq, i, &r);
  }
  ref_buf_free(&r);
}

/* The forward's output element o (computed in double) as the CPU's
 * backward reads it: stored in the output's dtype, float64 at float32
 * precision (neuron's float64 is the CPU's float32 computation). */
static float stored_out(nrt_dtype dt, double o) {
  if (dt != NRT_BFLOAT16 && dt != NRT_FLOAT16) return (float)o;
  char buf[8];
  nrt_ref_store_f64(buf, dt, o);
  return (float)nrt_ref_load_f64(buf, dt);
}

static void ref_forward_row(const nrt_attn_problem *p, int64_t b, int64_t h, int64_t i, ref_buf *r) {
  int64_t hk = h / p->group;
  bool live = ref_row_probs(p, b, h, i, r, false);
  double lse = live ? r->acc[0] : 0.0; /* a row with no weight: the CPU's lse is 0 */
  char *o = nrt_attn_at(&p->out, b, h, i);
  for (int64_t e = 0; e < p->Ev; e++) {
    if (!live) { /* weights 0 (0 * inf in v is still NaN) */
      double a = 0;
      for (int64_t j = 0; j < p->S; j++)
        a += r->prob[j] * r->z[j] * ref_load(&p->v, nrt_attn_at(&p->v, b, hk, j), e);
      nrt_ref_store_f64(o + e * p->out.s[3], p->out.dtype, a);
      continue;
    }
    nrt_ref_store_f64(o + e * p->out.s[3], p->out.dtype, ref_out_elem(p, b, hk, e, r));
  }
  *(float *)nrt_attn_at(&p->lse, b, h, i) = (float)lse;
}

/* D_i = dO_i . out_i with out_i recomputed in double (SDPA_BACKWARD_PREP
 * given q, k, v). */
static void ref_prep_row(const nrt_attn_problem *p, int64_t b, int64_t h, int64_t i, ref_buf *r) {
  int64_t hk = h / p->group;
  ref_row_probs(p, b, h, i, r, false);
  const char *g = nrt_attn_at(&p->dout, b, h, i);
  double d = 0;
  for (int64_t e = 0; e < p->Ev; e++) {
    double a = 0;
    for (int64_t j = 0; j < p->S; j++) a += r->prob[j] * r->z[j] * ref_load(&p->v, nrt_attn_at(&p->v, b, hk, j), e);
    d += a * ref_load(&p->dout, g, e);
  }
  nrt_attn_store_rowstat(p, b, h, i, *(const float *)nrt_attn_at(&p->lse, b, h, i), (float)d);
}

/* Gradient of the row's scores, r->ds (and r->prob, r->z) from dO, in the
 * CPU flash backward's float32 arithmetic: dsum = dO . out over the stored
 * output (at::vec::map2_reduce_all's lane order), dP_j = dO . v_j term by
 * term from e = 0 with each product rounded (MKL's sgemm order for head
 * dims up to 11, as q k^T in ref_row_probs), dS_j = P_j * (dP_j - dsum).
 * Where v holds 1e18-scale values dP_j and dsum cancel to a float32
 * residual (1e11, a gradient of 1e9 or, with keys of 1e18, 1e30) that the
 * CPU keeps and double arithmetic would not (fuzz 9161-41571: dq -2e9 on
 * the CPU, -6 in double). A lone key still cancels exactly: out is v_j.
 * A live row takes its weights as the CPU's flash backward does,
 * P = exp(s - lse) with the forward's float32 logsumexp (not the textbook
 * sum_j prob_j dLoss/dprob_j): scores near 1.7e38 absorb log(sum) into lse,
 * so five equal maxima weigh 1 each, not 0.2; and a dead row's out is 0,
 * so its NaN scores do not spread NaN to the keys they do not reach. */
static void ref_row_grad(const nrt_attn_problem *p, int64_t b, int64_t h, int64_t i, ref_buf *r) {
  int64_t hk = h / p->group;
  const char *g = nrt_attn_at(&p->dout, b, h, i);
  /* Where the q k^T order is the CPU's (MKL's kernel on Intel AVX-512
   * hosts, ATen's loop where BLAS refuses the operands), dP and D follow
   * the CPU too: dP_j = dO . v_j from the same gemm(T, N) kernel, D by
   * map2_reduce_all over the stored output (recomputed here bit for bit as
   * ref_forward_row stores it). Their difference is what a 1e18-scale q
   * or k magnifies into the gradient: for a lone key (out = v_j) the two
   * orders leave the CPU's residual, 0 where they agree (random edge
   * problems: float32 lone/two-key dq and dk). */
  bool f32 = p->q.dtype == NRT_FLOAT32 || p->q.dtype == NRT_FLOAT64;
  bool cpu_dp = f32 && dp_kernel(p, i, 0) != NRT_ATTN_QK_OWN, have_dsum = false;
  float dsum_cpu = 0.0f;
  /* Whether the forward found a weight: recomputed, not read off the lse
   * (the flash op's lse is 0 for such a row, as the CPU's) */
  bool fwd_live = !(cpu_dp || prescaled(p)) || ref_row_probs(p, b, h, i, r, false);
  if (cpu_dp && fwd_live) {
    for (int64_t e = 0; e < p->Ev; e++) {
      r->o[e] = ref_out_elem(p, b, hk, e, r);
      r->g[e] = (float)ref_load(&p->dout, g, e);
    }
    dsum_cpu = nrt_attn_vec_sum(r->g, r->o, p->Ev);
    have_dsum = true;
  }
  bool live = ref_row_probs(p, b, h, i, r, true);
  /* The forward found no weight (the CPU's lse 0), but prescaled scores can
   * be finite where the forward's were not: weights exp(s - 0) below. */
  bool fwd_dead = prescaled(p) && !fwd_live;
  if (fwd_dead) live = false;
  /* 16-bit: the CPU's backward rounds its weights and dS to the input's
   * dtype between the GEMMs (not followed here); double sums as before */
  double dsum16 = 0;
  for (int64_t e = 0; e < p->Ev; e++) {
    double o = 0;
    for (int64_t j = 0; j < p->S; j++) {
      /* a dead row's forward weights are 0 (0 * inf in v is still NaN) */
      double w = fwd_dead ? 0.0 : live || !isnan(r->prob[j]) ? r->prob[j] : 0.0;
      o += w * r->z[j] * ref_load(&p->v, nrt_attn_at(&p->v, b, hk, j), e);
    }
    r->o[e] = stored_out(p->q.dtype, o);
    r->g[e] = (float)ref_load(&p->dout, g, e);
    dsum16 += ref_load(&p->dout, g, e) * o;
  }
  /* float32: the rowstat's D, taken from the stored output itself (a
   * recomputed one can be an ulp off, which the cancellation magnifies) */
  float dsum = have_dsum                  ? dsum_cpu
               : p->q.dtype == NRT_FLOAT32 ? *(const float *)(nrt_attn_at(&p->rowstat, b, h, i) + p->rowstat.s[3])
                                           : nrt_attn_vec_sum(r->g, r->o, p->Ev);
  if (fwd_dead) /* 0 for s = -2e38, NaN for NaN */
    for (int64_t j = 0; j < p->S; j++) r->prob[j] = p->causal && j > i ? 0.0 : exp(r->s[j]);
  if (live) {
    double lse = *(const float *)nrt_attn_at(&p->rowstat, b, h, i);
    /* exp(-inf - lse) is NaN where lse is (a row with +inf and NaN scores);
     * float32: Vectorized<float>::exp, as the CPU's vec::map over the row */
    for (int64_t j = 0; j < p->S; j++)
      r->prob[j] = f32 ? nrt_attn_sleef_expf((float)r->s[j] - (float)lse) : exp(r->s[j] - lse);
    if (p->causal) /* the CPU fills 0 after the exponential */
      for (int64_t j = i + 1; j < p->S; j++) r->prob[j] = 0.0;
  }
  for (int64_t j = 0; j < p->S; j++) {
    const char *v = nrt_attn_at(&p->v, b, hk, j);
    if (!f32) {
      double dp = 0;
      for (int64_t e = 0; e < p->Ev; e++) dp += ref_load(&p->dout, g, e) * ref_load(&p->v, v, e);
      r->ds[j] = r->prob[j] * (dp * r->z[j] - dsum16);
      continue;
    }
    float dp = 0.0f;
    if (cpu_dp) {
      for (int64_t e = 0; e < p->Ev; e++) r->kf[e] = (float)ref_load(&p->v, v, e);
      dp = nrt_attn_qk_dot(dp_kernel(p, i, j), r->g, r->kf, p->Ev);
    } else {
      for (int64_t e = 0; e < p->Ev; e++) dp += r->g[e] * (float)ref_load(&p->v, v, e);
    }
    r->ds[j] = (float)r->prob[j] * (dp * r->z[j] - dsum); /* dLoss/dprob_j - dsum, weighted */
  }
}

static void ref_backward_q_row(const nrt_attn_problem *p, int64_t b, int64_t h, int64_t i, ref_buf *r) {
  int64_t hk = h / p->group;
  ref_row_grad(p, b, h, i, r);
  char *dq = p->dq.data ? nrt_attn_at(&p->dq, b, h, i) : NULL;
  /* Keys whose row stride is below the head dim (expanded over keys: 0) are
   * no valid BLAS operand (use_blas_gemm), so the CPU's grad_q += scale *
   * dS k falls back to ATen's gemm_notrans_: per key in order, c += k_je *
   * (dS_j * scale), the multiply-add fused, in float32 (fuzz 9161-41571:
   * -2.0e9 where double sums give -9.7e8). */
  bool aten_gemm = (p->q.dtype == NRT_FLOAT32 || p->q.dtype == NRT_FLOAT64) &&
                   llabs(p->k.s[2]) < p->E * (int64_t)nrt_dtype_size(p->k.dtype);
  for (int64_t e = 0; dq && aten_gemm && e < p->E; e++) {
    float a = 0.0f;
    for (int64_t j = 0; j < p->S; j++)
      a = fmaf((float)ref_load(&p->k, nrt_attn_at(&p->k, b, hk, j), e), (float)r->ds[j] * p->scale, a);
    nrt_ref_store_f64(dq + e * p->dq.s[3], p->dq.dtype, a);
  }
  for (int64_t e = 0; dq && !aten_gemm && e < p->E; e++) {
    double a = 0;
    for (int64_t j = 0; j < p->S; j++) a += r->ds[j] * ref_load(&p->k, nrt_attn_at(&p->k, b, hk, j), e);
    nrt_ref_store_f64(dq + e * p->dq.s[3], p->dq.dtype, (double)p->scale * a);
  }
  if (p->ds.data) {
    char *ds = nrt_attn_at(&p->ds, b, h, i);
    for (int64_t j = 0; j < p->S; j++) nrt_ref_store_f64(ds + j * p->ds.s[3], p->ds.dtype, r->ds[j]);
  }
}

static void ref_forward_range(void *ctx, int64_t lo, int64_t hi) { ref_rows(ctx, lo, hi, ref_forward_row); }
static void ref_prep_range(void *ctx, int64_t lo, int64_t hi) { ref_rows(ctx, lo, hi, ref_prep_row); }
static void ref_backward_q_range(void *ctx, int64_t lo, int64_t hi) { ref_rows(ctx, lo, hi, ref_backward_q_row); }

/* One task per (b, key/value head): it owns dK, dV of that head and sums
 * over every query row of its query heads. */
static void ref_backward_kv_range(void *ctx, int64_t lo, int64_t hi) {
  ref_ctx *c = ctx;
  const nrt_attn_problem *p = c->p;
  ref_buf r;
  double *dk = malloc((size_t)(p->S * p->E + 1) * sizeof(double));
  double *dv = malloc((size_t)(p->S * p->Ev + 1) * sizeof(double));
  if (!ref_buf_init(&r, p) || !dk || !dv) {
    atomic_store(&c->failed, 1);
    ref_buf_free(&r);
    free(dk);
    free(dv);
    return;
  }
  for (int64_t task = lo; task < hi; task++) {
    int64_t b = task / p->Hk, hk = task % p->Hk;
    memset(dk, 0, (size_t)(p->S * p->E) * sizeof(double));
    memset(dv, 0, (size_t)(p->S * p->Ev) * sizeof(double));
    for (int64_t h = hk * p->group; h < (hk + 1) * p->group; h++) {
      for (int64_t i = 0; i < p->L; i++) {
        ref_row_grad(p, b, h, i, &r);
        const char *q = nrt_attn_at(&p->q, b, h, i), *g = nrt_attn_at(&p->dout, b, h, i);
        for (int64_t j = 0; j < p->S; j++) {
          double pz = r.prob[j] * r.z[j], ds = r.ds[j] * (double)p->scale;
          for (int64_t e = 0; e < p->Ev; e++) dv[j * p->Ev + e] += pz * ref_load(&p->dout, g, e);
          for (int64_t e = 0; e < p->E; e++) dk[j * p->E + e] += ds * ref_load(&p->q, q, e);
        }
      }
    }
    for (int64_t j = 0; j < p->S; j++) {
      char *k = nrt_attn_at(&p->dk, b, hk, j), *v = nrt_attn_at(&p->dv, b, hk, j);
      for (int64_t e = 0; e < p->E; e++) nrt_ref_store_f64(k + e * p->dk.s[3], p->dk.dtype, dk[j * p->E + e]);
      for (int64_t e = 0; e < p->Ev; e++) nrt_ref_store_f64(v + e * p->dv.s[3], p->dv.dtype, dv[j * p->Ev + e]);
    }
  }
  ref_buf_free(&r);
  free(dk);
  free(dv);
}

static nrt_status ref_run(const nrt_attn_problem *p, int64_t n, nrt_range_fn fn) {
  ref_ctx c = {.p = p};
  atomic_init(&c.failed, 0);
  nrt_parallel_for(n, 1, fn, &c);
  if (atomic_load(&c.failed))
    return nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY, "attention: out of memory for the reference path's row buffers");
  return NRT_SUCCESS;
}

/* ---- descriptor decoding ------------------------------------------------ */

static void view(nrt_attn_view *t, const nrt_operand *o) {
  t->data = o->data;
  t->dtype = o->dtype;
  for (int d = 0; d < 4; d++) t->s[d] = o->strides[d];
}

static nrt_status bad(const nrt_launch *l, const char *what) {
  return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "attention: %s: %s", nrt_op_name(l->op), what);
}

static bool floating(const nrt_attn_view *t) { return nrt_dtype_is_floating(t->dtype); }

/* The rowstat operand [B,Hq,L,Ev+2] {dO_i (float32), lse_i, D_i}: `dout`
 * views its first Ev columns, `rowstat` starts at lse with strides[3] the
 * step from lse to D. */
static nrt_status rowstat_views(const nrt_launch *l, nrt_attn_problem *p, const nrt_operand *o,
                                nrt_attn_view *dcopy) {
  if (o->dtype != NRT_FLOAT32) return bad(l, "rowstat must be float32");
  view(dcopy, o);
  p->rowstat = *dcopy;
  p->rowstat.data += p->Ev * o->strides[3];
  return NRT_SUCCESS;
}

/* Decodes the descriptor. */
static nrt_status decode(const nrt_launch *l, nrt_attn_problem *p) {
  memset(p, 0, sizeof *p);
  if (l->ndim != 7) return bad(l, "sizes must be {B, Hq, Hk, L, S, E, Ev}");
  p->B = l->sizes[0];
  p->Hq = l->sizes[1];
  p->Hk = l->sizes[2];
  p->L = l->sizes[3];
  p->S = l->sizes[4];
  p->E = l->sizes[5];
  p->Ev = l->sizes[6];
  if (p->Hk == 0 ? p->Hq != 0 : p->Hq % p->Hk != 0)
    return bad(l, "query heads must be a multiple of key/value heads");
  p->group = p->Hk ? p->Hq / p->Hk : 1;
  p->scale = (float)l->scalars[0].f;
  p->scale_d = l->scalars[0].f;
  double drop = l->scalars[1].f;
  if (!(drop >= 0.0 && drop < 1.0)) return bad(l, "dropout probability must be in [0, 1)");
  p->dropout = drop > 0.0;
  p->keep_prob = 1.0 - drop;
  p->keep_scale = (float)(1.0 / (1.0 - drop));
  p->causal = l->params[0] != 0;
  p->seed = (uint64_t)l->params[1];
  p->offset = (uint64_t)l->params[2];
  p->math = l->params[3] == 1;
  int op = (int)l->op;
  int want_out = op == NRT_OP(SDPA_FORWARD) ? 2 : (op == NRT_OP(SDPA_BACKWARD) ? 3 : 1);
  if (l->noutputs != want_out)
    return bad(l, op == NRT_OP(SDPA_FORWARD)    ? "expected 2 outputs (out, lse)"
                  : op == NRT_OP(SDPA_BACKWARD) ? "expected 3 outputs (dQ, dK, dV)"
                  : op == NRT_OP(SDPA_BACKWARD_DS) ? "expected 1 output (dS)"
                                                  : "expected 1 output (rowstat)");
  int in = l->noutputs, nin_base = 3;
  if (op == NRT_OP(SDPA_BACKWARD_PREP)) {
    nrt_status st = rowstat_views(l, p, &l->operands[0], &p->dcopy);
    if (st != NRT_SUCCESS) return st;
    view(&p->out, &l->operands[1]);
    view(&p->dout, &l->operands[2]);
    view(&p->lse, &l->operands[3]);
    if (p->lse.dtype != NRT_FLOAT32) return bad(l, "lse must be float32");
    if (!floating(&p->out) || !floating(&p->dout)) return bad(l, "out and dO must be floating");
    if (l->ninputs == 4 || l->ninputs == 5) return bad(l, "expected q, k and v together");
    if (l->ninputs < 6) return NRT_SUCCESS;
    in = 4;
    nin_base = 6;
  } else if (op != NRT_OP(SDPA_FORWARD)) {
    nrt_status st = rowstat_views(l, p, &l->operands[in + 3], &p->dout);
    if (st != NRT_SUCCESS) return st;
    nin_base = 4;
  }
  view(&p->q, &l->operands[in]);
  view(&p->k, &l->operands[in + 1]);
  view(&p->v, &l->operands[in + 2]);
  if (!floating(&p->q) || !floating(&p->k) || !floating(&p->v))
    return bad(l, "query, key and value must be floating");
  p->has_mask = l->ninputs > nin_base;
  if (p->has_mask) {
    view(&p->mask, &l->operands[l->noutputs + nin_base]);
    p->mask_bool = p->mask.dtype == NRT_BOOL;
    if (!p->mask_bool && !floating(&p->mask)) return bad(l, "the mask must be bool or floating");
    if (p->causal) return bad(l, "a mask and causal are exclusive");
  }
  switch ((int)op) {
  case NRT_OP(SDPA_FORWARD):
    view(&p->out, &l->operands[0]);
    view(&p->lse, &l->operands[1]);
    if (!floating(&p->out) || p->lse.dtype != NRT_FLOAT32)
      return bad(l, "out must be floating and lse float32");
    break;
  case NRT_OP(SDPA_BACKWARD):
    view(&p->dq, &l->operands[0]);
    view(&p->dk, &l->operands[1]);
    view(&p->dv, &l->operands[2]);
    if (!floating(&p->dq) || !floating(&p->dk) || !floating(&p->dv)) return bad(l, "gradients must be floating");
    break;
  case NRT_OP(SDPA_BACKWARD_DS):
    view(&p->ds, &l->operands[0]);
    if (!floating(&p->ds)) return bad(l, "dS must be floating");
    break;
  default:
    break;
  }
  return NRT_SUCCESS;
}

/* Whether a [B, H, R, C] operand holds a value beyond bound, or NaN. */
static bool view_beyond(const nrt_attn_view *t, int64_t B, int64_t H, int64_t R, int64_t C, float bound) {
  float buf[64];
  if (!t->data) return false;
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < H; h++)
      for (int64_t r = 0; r < R; r++) {
        const char *row = nrt_attn_at(t, b, h, r);
        for (int64_t c = 0; c < C; c += 64) {
          int64_t n = C - c < 64 ? C - c : 64;
          nrt_load_f32(buf, row + c * t->s[3], t->s[3], t->dtype, n);
          for (int64_t x = 0; x < n; x++)
            if (!(fabsf(buf[x]) <= bound)) return true;
        }
      }
  return false;
}

/* Inputs holding inf or NaN take the reference path, whatever the
 * setting. It is PyTorch's arithmetic without shortcuts, as the CPU's flash
 * kernel does it: every key of a row is multiplied by its weight, masked
 * (0 x inf = NaN) or not, and every row of the backward contributes, a
 * fully masked one too (0 times a NaN gradient). The blocked kernels skip
 * the keys a causal row cannot see and the rows nothing reaches, which is
 * exact only for finite values. On hosts whose q . k order the reference
 * path follows (qk_order.c: Intel AVX-512), float32 inputs beyond 2^64
 * take it too: their products can overflow, and the order decides
 * (sdpa-only fuzz there, seed 15001, 150k cases: 79 -> 60
 * nonfinite-attention cases); so do bfloat16 ones where the bfloat16
 * forward's order is followed (AVX512-BF16), and float16 ones beyond 1024
 * there: their scores can reach 1e9, whose last bits exp(s - lse) turns
 * into factors of e^256 (sdpa-only fuzz, seeds 15001 and 15002: 7 -> 2
 * float16 cases; the reference path costs about 100x the blocked kernel,
 * 0.18 s for 8 heads of 256 x 256 x 64). One pass over the
 * inputs decides; it costs about 1/S of the attention itself. */
static bool inputs_nonfinite(const nrt_attn_problem *p, bool backward) {
  bool huge = ((p->q.dtype == NRT_FLOAT32 || p->q.dtype == NRT_FLOAT64) &&
               nrt_kernels_host_blas() == NRT_HOST_BLAS_INTEL_AVX512) ||
              (p->q.dtype == NRT_BFLOAT16 && nrt_kernels_host_bf16_dot());
  bool half = p->q.dtype == NRT_FLOAT16 && nrt_kernels_host_blas() == NRT_HOST_BLAS_INTEL_AVX512;
  float bound = huge ? 0x1p64f : half ? 1024.0f : FLT_MAX;
  return view_beyond(&p->q, p->B, p->Hq, p->L, p->E, bound) || view_beyond(&p->k, p->B, p->Hk, p->S, p->E, bound) ||
         view_beyond(&p->v, p->B, p->Hk, p->S, p->Ev, bound) ||
         (backward && view_beyond(&p->dout, p->B, p->Hq, p->L, p->Ev, bound));
}

nrt_status nrt_attention_execute(const nrt_launch *l) {
  /* Switch on (int)l->op: family ids are not enumerators of nrt_op. */
  int op = (int)l->op;
  if (op != NRT_OP(SDPA_FORWARD) && op != NRT_OP(SDPA_BACKWARD_PREP) && op != NRT_OP(SDPA_BACKWARD) &&
      op != NRT_OP(SDPA_BACKWARD_DS)) {
    return nrt_kernel_fail(NRT_ERROR_UNSUPPORTED, "attention: op %s has no kernel", nrt_op_name(l->op));
  }
  nrt_attn_problem p;
  nrt_status st = decode(l, &p);
  if (st != NRT_SUCCESS) return st;
  bool ref = nrt_kernels_reference() ||
             inputs_nonfinite(&p, op == NRT_OP(SDPA_BACKWARD) || op == NRT_OP(SDPA_BACKWARD_DS));
  int64_t rows = p.B * p.Hq * p.L;
  if (p.math && op != NRT_OP(SDPA_BACKWARD_PREP)) /* PREP still gives the backward its float32 dO */
    return rows == 0 ? NRT_SUCCESS
                     : nrt_attn_math(&p, op == NRT_OP(SDPA_FORWARD) ? 0 : op == NRT_OP(SDPA_BACKWARD) ? 1 : 2);
  switch ((int)op) {
  case NRT_OP(SDPA_FORWARD):
    if (rows == 0) return NRT_SUCCESS;
    return ref ? ref_run(&p, rows, ref_forward_range) : nrt_attn_forward_blocked(&p);
  case NRT_OP(SDPA_BACKWARD_PREP):
    if (rows == 0) return NRT_SUCCESS;
    if (!p.q.data) { /* D from the stored output */
      nrt_parallel_for(rows, 64, prep_range, &p);
      return NRT_SUCCESS;
    }
    return ref ? ref_run(&p, rows, ref_prep_range) : nrt_attn_prep_blocked(&p);
  case NRT_OP(SDPA_BACKWARD):
    if (rows == 0 && p.B * p.Hk * p.S == 0) return NRT_SUCCESS;
    if (!ref) return nrt_attn_backward_blocked(&p);
    st = ref_run(&p, p.B * p.Hk, ref_backward_kv_range);
    return st != NRT_SUCCESS ? st : ref_run(&p, rows, ref_backward_q_range);
  case NRT_OP(SDPA_BACKWARD_DS):
    if (rows * p.S == 0) return NRT_SUCCESS;
    return ref ? ref_run(&p, rows, ref_backward_q_range) : nrt_attn_backward_ds_blocked(&p);
  default:
    break;
  }
  return NRT_ERROR_INTERNAL;
}
