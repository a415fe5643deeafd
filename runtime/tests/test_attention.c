/* ATTENTION family tests (nrt/ops/attention.h): the blocked kernels and the
 * reference path against a naive double-precision computation written
 * here (its own dropout mask straight from Philox), over L != S, odd
 * sizes, E != Ev, causal, bool and float masks with broadcast dims, fully
 * masked rows, grouped-query heads, non-contiguous layouts, dropout
 * determinism, bfloat16 and float16. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "testing.h"
#include "kernels/attention/attention.h"
#include "kernels/common/common.h"
#include "nrt/ops/attention.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}
static double urand(void) { return (double)(rnd() >> 11) * 0x1p-53 * 2.0 - 1.0; }

typedef struct cfg {
  int64_t B, Hq, Hk, L, S, E, Ev;
  int causal;
  int mask;            /* 0 none, 1 bool, 2 float */
  int mask_b, mask_h;  /* mask has its own batch / head dim (else broadcast) */
  int mask_dead_row;   /* bool mask: row 1 fully masked */
  double drop;
  uint64_t seed, offset;
  float scale;
  nrt_dtype dt;
  int transposed;      /* q, k, v, dO stored as [B, rows, H, cols] */
  int want_ds;
  int recompute_d;     /* float32 too: SDPA_BACKWARD_PREP recomputes out */
} cfg;

/* A 4-d device buffer [B, H, R, C] in dtype dt, contiguous or [B, R, H, C]. */
typedef struct buf4 {
  char *data;
  nrt_dtype dt;
  int64_t st[4];
  int64_t n;
} buf4;

static buf4 mkbuf(int64_t B, int64_t H, int64_t R, int64_t C, nrt_dtype dt, int transposed) {
  buf4 b;
  size_t es = nrt_dtype_size(dt);
  b.n = B * H * R * C;
  b.data = calloc((size_t)(b.n ? b.n : 1), es);
  b.dt = dt;
  if (transposed) {
    b.st[0] = R * H * C * (int64_t)es;
    b.st[1] = C * (int64_t)es;
    b.st[2] = H * C * (int64_t)es;
  } else {
    b.st[0] = H * R * C * (int64_t)es;
    b.st[1] = R * C * (int64_t)es;
    b.st[2] = C * (int64_t)es;
  }
  b.st[3] = (int64_t)es;
  return b;
}
static char *bptr(const buf4 *b, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  return b->data + i0 * b->st[0] + i1 * b->st[1] + i2 * b->st[2] + i3 * b->st[3];
}
/* Fills from canonical values x (rounded to the dtype; x updated to the
 * rounded values so the naive computation sees exactly the inputs). */
static void fill(buf4 *b, double *x, int64_t B, int64_t H, int64_t R, int64_t C) {
  for (int64_t i = 0; i < B; i++)
    for (int64_t h = 0; h < H; h++)
      for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < C; c++) {
          double *v = &x[((i * H + h) * R + r) * C + c];
          char *p = bptr(b, i, h, r, c);
          nrt_ref_store_f64(p, b->dt, *v);
          *v = nrt_ref_load_f64(p, b->dt);
        }
}
static double get(const buf4 *b, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  return nrt_ref_load_f64(bptr(b, i0, i1, i2, i3), b->dt);
}

static void set_op(nrt_launch *l, int k, const buf4 *b) {
  l->operands[k].data = b->data;
  l->operands[k].dtype = b->dt;
  for (int d = 0; d < 4; d++) l->operands[k].strides[d] = b->st[d];
}

/* Naive double results, canonical layouts. */
typedef struct naive {
  double *out, *lse, *dq, *dk, *dv, *ds;
} naive;

static int keep(const cfg *c, int64_t b, int64_t h, int64_t i, int64_t j) {
  if (c->drop <= 0) return 1;
  uint64_t e = c->offset + (uint64_t)(((b * c->Hq + h) * c->L + i) * c->S + j);
  uint32_t ctr[4] = {(uint32_t)(e >> 2), (uint32_t)(e >> 34), 0, 0}, key[2] = {(uint32_t)c->seed,
                                                                             (uint32_t)(c->seed >> 32)};
  uint32_t w[4];
  nrt_philox4x32_10(ctr, key, w);
  return (double)w[e & 3] * 0x1p-32 < 1.0 - c->drop;
}

static void compute_naive(const cfg *c, const double *q, const double *k, const double *v, const double *mk,
                          const double *g, naive *n) {
  int64_t B = c->B, Hq = c->Hq, L = c->L, S = c->S, E = c->E, Ev = c->Ev, G = c->Hq / c->Hk;
  n->out = calloc((size_t)(B * Hq * L * Ev + 1), 8);
  n->lse = calloc((size_t)(B * Hq * L + 1), 8);
  n->dq = calloc((size_t)(B * Hq * L * E + 1), 8);
  n->dk = calloc((size_t)(B * c->Hk * S * E + 1), 8);
  n->dv = calloc((size_t)(B * c->Hk * S * Ev + 1), 8);
  n->ds = calloc((size_t)(B * Hq * L * S + 1), 8);
  double *s = malloc((size_t)(S + 1) * 8), *pr = malloc((size_t)(S + 1) * 8), *z = malloc((size_t)(S + 1) * 8);
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < Hq; h++)
      for (int64_t i = 0; i < L; i++) {
        int64_t hk = h / G;
        double mx = -INFINITY;
        for (int64_t j = 0; j < S; j++) {
          double d = 0;
          for (int64_t e = 0; e < E; e++) d += q[((b * Hq + h) * L + i) * E + e] * k[((b * c->Hk + hk) * S + j) * E + e];
          d *= c->scale;
          if (c->mask) {
            double m = mk[((b * Hq + h) * L + i) * S + j];
            if (c->mask == 1) d = m != 0 ? d : -INFINITY;
            else d += m;
          }
          if (c->causal && j > i) d = -INFINITY;
          s[j] = d;
          if (d > mx) mx = d;
          z[j] = keep(c, b, h, i, j) ? 1.0 / (1.0 - c->drop) : 0.0;
        }
        double sum = 0;
        for (int64_t j = 0; j < S; j++) {
          pr[j] = mx == -INFINITY ? 0.0 : exp(s[j] - mx);
          sum += pr[j];
        }
        int64_t row = (b * Hq + h) * L + i;
        n->lse[row] = mx == -INFINITY ? -INFINITY : mx + log(sum);
        for (int64_t j = 0; j < S; j++) pr[j] = sum > 0 ? pr[j] / sum : 0.0;
        for (int64_t e = 0; e < Ev; e++) {
          double a = 0;
          for (int64_t j = 0; j < S; j++) a += pr[j] * z[j] * v[((b * c->Hk + hk) * S + j) * Ev + e];
          n->out[row * Ev + e] = a;
        }
        /* backward with upstream gradient g */
        double D = 0;
        double *dp = malloc((size_t)(S + 1) * 8);
        for (int64_t j = 0; j < S; j++) {
          double a = 0;
          for (int64_t e = 0; e < Ev; e++) a += g[row * Ev + e] * v[((b * c->Hk + hk) * S + j) * Ev + e];
          dp[j] = a * z[j];
          D += pr[j] * dp[j];
        }
        for (int64_t j = 0; j < S; j++) {
          double ds = pr[j] * (dp[j] - D);
          n->ds[row * S + j] = ds;
          for (int64_t e = 0; e < E; e++) {
            n->dq[row * E + e] += c->scale * ds * k[((b * c->Hk + hk) * S + j) * E + e];
            n->dk[((b * c->Hk + hk) * S + j) * E + e] += c->scale * ds * q[row * E + e];
          }
          for (int64_t e = 0; e < Ev; e++) n->dv[((b * c->Hk + hk) * S + j) * Ev + e] += pr[j] * z[j] * g[row * Ev + e];
        }
        free(dp);
      }
  free(s);
  free(pr);
  free(z);
}

static void free_naive(naive *n) {
  free(n->out);
  free(n->lse);
  free(n->dq);
  free(n->dk);
  free(n->dv);
  free(n->ds);
}

static int64_t mismatches;
static void near4(const char *what, const buf4 *b, const double *want, int64_t B, int64_t H, int64_t R, int64_t C,
                  double tol) {
  for (int64_t i = 0; i < B; i++)
    for (int64_t h = 0; h < H; h++)
      for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < C; c++) {
          double got = get(b, i, h, r, c), w = want[((i * H + h) * R + r) * C + c];
          if (got != w && !(fabs(got - w) <= tol * (1.0 + fabs(w)))) {
            if (mismatches++ < 8)
              fprintf(stderr, "  %s[%lld,%lld,%lld,%lld] = %.7g, want %.7g\n", what, (long long)i, (long long)h,
                      (long long)r, (long long)c, got, w);
          }
        }
}

typedef struct results {
  buf4 out, lse, rowstat, dq, dk, dv, ds;
} results;

static void free_results(results *r) {
  free(r->out.data);
  free(r->lse.data);
  free(r->rowstat.data);
  free(r->dq.data);
  free(r->dk.data);
  free(r->dv.data);
  free(r->ds.data);
}

static nrt_launch mk(nrt_op op, const cfg *c, int nout, int nin) {
  nrt_launch l;
  memset(&l, 0, sizeof l);
  l.op = op;
  l.ndim = 7;
  int64_t sz[7] = {c->B, c->Hq, c->Hk, c->L, c->S, c->E, c->Ev};
  memcpy(l.sizes, sz, sizeof sz);
  l.noutputs = nout;
  l.ninputs = nin;
  l.compute_dtype = NRT_FLOAT32;
  l.scalars[0].f = c->scale;
  l.scalars[1].f = c->drop;
  l.params[0] = c->causal;
  l.params[1] = (int64_t)c->seed;
  l.params[2] = (int64_t)c->offset;
  return l;
}

/* Runs forward and backward on one path; returns all results. */
static results run_all(const cfg *c, const buf4 *q, const buf4 *k, const buf4 *v, const buf4 *m, const buf4 *g,
                       int reference) {
  results r;
  r.out = mkbuf(c->B, c->Hq, c->L, c->Ev, c->dt, 0);
  r.lse = mkbuf(c->B, c->Hq, c->L, 1, NRT_FLOAT32, 0);
  r.rowstat = mkbuf(c->B, c->Hq, c->L, c->Ev + 2, NRT_FLOAT32, 0);
  r.dq = mkbuf(c->B, c->Hq, c->L, c->E, c->dt, c->transposed);
  r.dk = mkbuf(c->B, c->Hk, c->S, c->E, c->dt, 0);
  r.dv = mkbuf(c->B, c->Hk, c->S, c->Ev, c->dt, 0);
  r.ds = mkbuf(c->B, c->Hq, c->L, c->S, NRT_FLOAT32, 0);
  nrt_kernels_set_reference(reference);
  int has_m = c->mask != 0;
  nrt_launch l = mk(NRT_OP(SDPA_FORWARD), c, 2, 3 + has_m);
  set_op(&l, 0, &r.out);
  set_op(&l, 1, &r.lse);
  set_op(&l, 2, q);
  set_op(&l, 3, k);
  set_op(&l, 4, v);
  if (has_m) set_op(&l, 5, m);
  CHECK_OK(nrt_launch_run(&l));
  /* 16-bit outputs: D from the recomputed float32 output (as the glue). */
  int recompute = c->dt != NRT_FLOAT32 || c->recompute_d;
  l = mk(NRT_OP(SDPA_BACKWARD_PREP), c, 1, recompute ? 6 + has_m : 3);
  set_op(&l, 0, &r.rowstat);
  set_op(&l, 1, &r.out);
  set_op(&l, 2, g);
  set_op(&l, 3, &r.lse);
  if (recompute) {
    set_op(&l, 4, q);
    set_op(&l, 5, k);
    set_op(&l, 6, v);
    if (has_m) set_op(&l, 7, m);
  }
  CHECK_OK(nrt_launch_run(&l));
  l = mk(NRT_OP(SDPA_BACKWARD), c, 3, 4 + has_m);
  set_op(&l, 0, &r.dq);
  set_op(&l, 1, &r.dk);
  set_op(&l, 2, &r.dv);
  set_op(&l, 3, q);
  set_op(&l, 4, k);
  set_op(&l, 5, v);
  set_op(&l, 6, &r.rowstat);
  if (has_m) set_op(&l, 7, m);
  CHECK_OK(nrt_launch_run(&l));
  if (c->want_ds) {
    l = mk(NRT_OP(SDPA_BACKWARD_DS), c, 1, 4 + has_m);
    set_op(&l, 0, &r.ds);
    set_op(&l, 1, q);
    set_op(&l, 2, k);
    set_op(&l, 3, v);
    set_op(&l, 4, &r.rowstat);
    if (has_m) set_op(&l, 5, m);
    CHECK_OK(nrt_launch_run(&l));
  }
  nrt_kernels_set_reference(false);
  return r;
}

static double *randv(int64_t n) {
  double *x = malloc((size_t)(n + 1) * 8);
  for (int64_t i = 0; i < n; i++) x[i] = urand();
  return x;
}

/* Builds inputs for cfg, runs both paths, compares them with the naive
 * computation. Returns the blocked path's results (caller frees). */
static results check_case(const char *name, const cfg *c, double tol) {
  int64_t B = c->B, Hq = c->Hq, Hk = c->Hk, L = c->L, S = c->S, E = c->E, Ev = c->Ev;
  double *q = randv(B * Hq * L * E), *k = randv(B * Hk * S * E), *v = randv(B * Hk * S * Ev);
  double *g = randv(B * Hq * L * Ev), *mk = calloc((size_t)(B * Hq * L * S + 1), 8);
  buf4 bq = mkbuf(B, Hq, L, E, c->dt, c->transposed), bk = mkbuf(B, Hk, S, E, c->dt, c->transposed);
  buf4 bv = mkbuf(B, Hk, S, Ev, c->dt, c->transposed), bg = mkbuf(B, Hq, L, Ev, c->dt, c->transposed);
  fill(&bq, q, B, Hq, L, E);
  fill(&bk, k, B, Hk, S, E);
  fill(&bv, v, B, Hk, S, Ev);
  fill(&bg, g, B, Hq, L, Ev);
  /* The mask is stored with only the dims it has; the operand broadcasts
   * the others with stride 0, and mk holds the expanded values. */
  int64_t mB = c->mask_b ? B : 1, mH = c->mask_h ? Hq : 1;
  buf4 bm = mkbuf(mB, mH, L, S, c->mask == 1 ? NRT_BOOL : (c->mask == 2 ? NRT_FLOAT32 : NRT_FLOAT32), 0);
  if (c->mask) {
    for (int64_t b = 0; b < mB; b++)
      for (int64_t h = 0; h < mH; h++)
        for (int64_t i = 0; i < L; i++)
          for (int64_t j = 0; j < S; j++) {
            double val = c->mask == 1 ? (double)(rnd() % 4 != 0) : urand() * 2.0;
            if (c->mask == 1 && c->mask_dead_row && i == 1) val = 0;
            if (c->mask == 2 && (rnd() % 7) == 0) val = -INFINITY;
            nrt_ref_store_f64(bptr(&bm, b, h, i, j), bm.dt, val);
          }
    for (int64_t b = 0; b < B; b++)
      for (int64_t h = 0; h < Hq; h++)
        for (int64_t i = 0; i < L; i++)
          for (int64_t j = 0; j < S; j++)
            mk[((b * Hq + h) * L + i) * S + j] = get(&bm, c->mask_b ? b : 0, c->mask_h ? h : 0, i, j);
    if (!c->mask_b) bm.st[0] = 0;
    if (!c->mask_h) bm.st[1] = 0;
  }
  naive n;
  compute_naive(c, q, k, v, mk, g, &n);
  results rr = run_all(c, &bq, &bk, &bv, &bm, &bg, 1);
  results rb = run_all(c, &bq, &bk, &bv, &bm, &bg, 0);
  double gtol = tol;
  mismatches = 0;
  for (int path = 0; path < 2; path++) {
    results *r = path ? &rb : &rr;
    near4("out", &r->out, n.out, B, Hq, L, Ev, tol);
    near4("lse", &r->lse, n.lse, B, Hq, L, 1, 1e-5);
    near4("dq", &r->dq, n.dq, B, Hq, L, E, gtol);
    near4("dk", &r->dk, n.dk, B, Hk, S, E, gtol);
    near4("dv", &r->dv, n.dv, B, Hk, S, Ev, gtol);
    if (c->want_ds) near4("ds", &r->ds, n.ds, B, Hq, L, S, gtol);
  }
  if (mismatches) fprintf(stderr, "  %s: %lld mismatches\n", name, (long long)mismatches);
  CHECK(mismatches == 0);
  free_results(&rr);
  free_naive(&n);
  free(q);
  free(k);
  free(v);
  free(g);
  free(mk);
  free(bq.data);
  free(bk.data);
  free(bv.data);
  free(bg.data);
  free(bm.data);
  return rb;
}

static cfg base_cfg(int64_t B, int64_t Hq, int64_t Hk, int64_t L, int64_t S, int64_t E, int64_t Ev) {
  cfg c;
  memset(&c, 0, sizeof c);
  c.B = B;
  c.Hq = Hq;
  c.Hk = Hk;
  c.L = L;
  c.S = S;
  c.E = E;
  c.Ev = Ev;
  c.scale = (float)(1.0 / sqrt((double)E));
  c.dt = NRT_FLOAT32;
  return c;
}

static void test_plain(void) {
  cfg c = base_cfg(2, 3, 3, 37, 70, 16, 12);
  results r = check_case("plain", &c, 1e-5);
  free_results(&r);
  c = base_cfg(1, 1, 1, 1, 1, 1, 1);
  r = check_case("1x1", &c, 1e-5);
  free_results(&r);
  c = base_cfg(1, 2, 2, 130, 129, 64, 64); /* several query and key blocks */
  r = check_case("blocks", &c, 1e-5);
  free_results(&r);
  /* One kv head: the backward splits the keys into chunks of several
   * blocks whose dQ slices are summed; odd head dims exercise padding. */
  c = base_cfg(1, 2, 1, 150, 600, 20, 37);
  r = check_case("key chunks", &c, 1e-5);
  free_results(&r);
  c.causal = 1;
  c.L = 600;
  r = check_case("key chunks causal", &c, 1e-5);
  free_results(&r);
  /* The baseline and AVX2 builds of the blocked loops. */
  for (int isa = NRT_ISA_BASELINE; isa <= NRT_ISA_AVX2; isa++) {
    nrt_kernels_limit_isa((nrt_isa)isa);
    c.causal = 1;
    r = check_case("blocks, limited ISA", &c, 1e-5);
    free_results(&r);
  }
  nrt_kernels_limit_isa(NRT_ISA_BEST);
}

static void test_causal(void) {
  cfg c = base_cfg(2, 2, 2, 70, 37, 8, 5);
  c.causal = 1;
  results r = check_case("causal L>S", &c, 1e-5);
  free_results(&r);
  c = base_cfg(1, 2, 2, 37, 140, 8, 9);
  c.causal = 1;
  c.want_ds = 1;
  r = check_case("causal L<S", &c, 1e-5);
  free_results(&r);
}

static void test_masks(void) {
  cfg c = base_cfg(2, 3, 3, 20, 75, 8, 6);
  c.mask = 1; /* bool [1,1,L,S] broadcast, with a fully masked row */
  c.mask_dead_row = 1;
  results r = check_case("bool mask", &c, 1e-5);
  /* The dead row: output 0, lse 0 (the CPU flash kernel's), gradients 0 (PyTorch's math backend). */
  for (int64_t b = 0; b < c.B; b++)
    for (int64_t h = 0; h < c.Hq; h++) {
      for (int64_t e = 0; e < c.Ev; e++) CHECK(get(&r.out, b, h, 1, e) == 0.0);
      CHECK(get(&r.lse, b, h, 1, 0) == 0.0);
      for (int64_t e = 0; e < c.E; e++) CHECK(get(&r.dq, b, h, 1, e) == 0.0);
    }
  free_results(&r);
  c = base_cfg(2, 3, 3, 33, 66, 8, 8);
  c.mask = 2; /* float [B,1,L,S] with some -inf */
  c.mask_b = 1;
  c.want_ds = 1;
  r = check_case("float mask", &c, 1e-5);
  free_results(&r);
  c.mask_h = 1;
  c.mask_b = 0;
  r = check_case("float mask heads", &c, 1e-5);
  free_results(&r);
  c.recompute_d = 1;
  r = check_case("float mask, D recomputed", &c, 1e-5);
  free_results(&r);
}

static void test_gqa_layout(void) {
  cfg c = base_cfg(2, 6, 2, 19, 23, 8, 4);
  results r = check_case("gqa", &c, 1e-5);
  free_results(&r);
  c = base_cfg(1, 4, 1, 9, 71, 8, 8); /* one kv head shared by all */
  c.causal = 1;
  r = check_case("mqa causal", &c, 1e-5);
  free_results(&r);
  c = base_cfg(2, 3, 3, 21, 66, 12, 7);
  c.transposed = 1;
  c.scale = -0.7f;
  r = check_case("transposed", &c, 1e-5);
  free_results(&r);
}

static void test_dropout(void) {
  cfg c = base_cfg(2, 2, 2, 33, 70, 8, 8);
  c.drop = 0.3;
  c.seed = 1234;
  c.offset = 8;
  results a = check_case("dropout", &c, 1e-5);
  /* Same seed, same output; another seed differs. */
  results b = check_case("dropout again", &c, 1e-5);
  (void)b;
  c.causal = 1;
  c.offset = 4;
  c.recompute_d = 1;
  results d = check_case("dropout causal, D recomputed", &c, 1e-5);
  free_results(&a);
  free_results(&b);
  free_results(&d);
}

static void test_dropout_determinism(void) {
  cfg c = base_cfg(1, 2, 2, 40, 90, 8, 8);
  c.drop = 0.5;
  c.seed = 99;
  double *q = randv(c.B * c.Hq * c.L * c.E), *k = randv(c.B * c.Hk * c.S * c.E);
  double *v = randv(c.B * c.Hk * c.S * c.Ev), *g = randv(c.B * c.Hq * c.L * c.Ev);
  buf4 bq = mkbuf(1, 2, 40, 8, NRT_FLOAT32, 0), bk = mkbuf(1, 2, 90, 8, NRT_FLOAT32, 0);
  buf4 bv = mkbuf(1, 2, 90, 8, NRT_FLOAT32, 0), bg = mkbuf(1, 2, 40, 8, NRT_FLOAT32, 0), bm = {0};
  fill(&bq, q, 1, 2, 40, 8);
  fill(&bk, k, 1, 2, 90, 8);
  fill(&bv, v, 1, 2, 90, 8);
  fill(&bg, g, 1, 2, 40, 8);
  results r1 = run_all(&c, &bq, &bk, &bv, &bm, &bg, 0);
  results r2 = run_all(&c, &bq, &bk, &bv, &bm, &bg, 0);
  c.seed = 100;
  results r3 = run_all(&c, &bq, &bk, &bv, &bm, &bg, 0);
  CHECK(memcmp(r1.out.data, r2.out.data, (size_t)r1.out.n * 4) == 0);
  CHECK(memcmp(r1.dk.data, r2.dk.data, (size_t)r1.dk.n * 4) == 0);
  CHECK(memcmp(r1.out.data, r3.out.data, (size_t)r1.out.n * 4) != 0);
  free_results(&r1);
  free_results(&r2);
  free_results(&r3);
  free(q);
  free(k);
  free(v);
  free(g);
  free(bq.data);
  free(bk.data);
  free(bv.data);
  free(bg.data);
}

static void test_half(void) {
  cfg c = base_cfg(2, 4, 2, 45, 67, 16, 8);
  c.dt = NRT_BFLOAT16;
  c.causal = 1;
  results r = check_case("bf16", &c, 1e-2);
  free_results(&r);
  c.dt = NRT_FLOAT16;
  c.causal = 0;
  c.mask = 2;
  r = check_case("f16", &c, 2e-3);
  free_results(&r);
}

/* Half a bfloat16 ulp at x (8 significant bits). */
static double bf16_half_ulp(double x) {
  int e;
  frexp(x, &e);
  return ldexp(1.0, e - 9);
}

/* bfloat16 outputs are the float32 result rounded once: each lies within
 * half a bfloat16 ulp of the exact value of the same rounded inputs, up to
 * the float32 accumulation's error (2^-17 with |v| <= 1). PyTorch's CPU
 * flash kernel rounds exp(s - max) to bfloat16 before P.V and misses by an
 * ulp in many elements (38% at head dim 64); that difference is what
 * nn.Transformer's bfloat16 gradients in the ModuleInfo sweep show
 * (known_gaps.py). Shapes: the sweep's (head dim 2), then several key
 * blocks with each mask kind. */
static void test_bf16_rounds_once(void) {
  cfg cases[4];
  cases[0] = base_cfg(2, 2, 2, 3, 3, 2, 2);
  for (int m = 0; m < 3; m++) {
    cases[1 + m] = base_cfg(2, 3, 3, 37, 130, 16, 8);
    cases[1 + m].mask = m;
    cases[1 + m].mask_b = cases[1 + m].mask_h = 1;
  }
  for (int t = 0; t < 4; t++) {
    cfg *c = &cases[t];
    c->dt = NRT_BFLOAT16;
    int64_t B = c->B, H = c->Hq, L = c->L, S = c->S, E = c->E, Ev = c->Ev;
    double *q = randv(B * H * L * E), *k = randv(B * H * S * E), *v = randv(B * H * S * Ev);
    double *g = randv(B * H * L * Ev), *mk = calloc((size_t)(B * H * L * S + 1), 8);
    buf4 bq = mkbuf(B, H, L, E, c->dt, 0), bk = mkbuf(B, H, S, E, c->dt, 0), bv = mkbuf(B, H, S, Ev, c->dt, 0);
    buf4 bg = mkbuf(B, H, L, Ev, c->dt, 0);
    buf4 bm = mkbuf(B, H, L, S, c->mask == 1 ? NRT_BOOL : NRT_BFLOAT16, 0);
    fill(&bq, q, B, H, L, E);
    fill(&bk, k, B, H, S, E);
    fill(&bv, v, B, H, S, Ev);
    fill(&bg, g, B, H, L, Ev);
    for (int64_t x = 0; x < B * H * L * S; x++) /* bool: key 0 always attended */
      mk[x] = c->mask == 1 ? (double)(x % S == 0 || rnd() % 4 != 0) : urand() * 2.0;
    if (c->mask) fill(&bm, mk, B, H, L, S);
    naive n;
    compute_naive(c, q, k, v, mk, g, &n);
    for (int reference = 0; reference < 2; reference++) {
      results r = run_all(c, &bq, &bk, &bv, &bm, &bg, reference);
      int64_t bad = 0;
      for (int64_t x = 0; x < B * H * L * Ev; x++) {
        double exact = n.out[x], got = nrt_ref_load_f64(r.out.data + x * 2, NRT_BFLOAT16);
        if (fabs(got - exact) > bf16_half_ulp(exact) + 0x1p-17 && bad++ < 4)
          fprintf(stderr, "  case %d%s: out[%lld] = %.9g, exact %.9g\n", t, reference ? " (reference)" : "",
                  (long long)x, got, exact);
      }
      CHECK(bad == 0);
      free_results(&r);
    }
    free_naive(&n);
    free(q);
    free(k);
    free(v);
    free(g);
    free(mk);
    free(bq.data);
    free(bk.data);
    free(bv.data);
    free(bg.data);
    free(bm.data);
  }
}

static void test_empty_keys(void) {
  /* S = 0: every row is fully masked, output 0 and lse 0. */
  cfg c = base_cfg(1, 2, 2, 3, 0, 4, 4);
  results r = check_case("S=0", &c, 1e-6);
  for (int64_t i = 0; i < 3; i++) CHECK(get(&r.lse, 0, 1, i, 0) == 0.0);
  free_results(&r);
}

/* Non-finite inputs as PyTorch's CPU flash kernel computes them, on both
 * paths: (a) without a mask, a row whose scores are NaN and -inf only has
 * all weights 0 (the maximum ignores NaN) and outputs 0; (b) a fully
 * masked row outputs the sum of zero weights times v, NaN where v holds
 * inf; (c) causal rows also multiply the keys they cannot see by 0, so an
 * inf in the last value makes every row's column NaN. L = S = 3, E = 2. */
/* p3 = 1 replays the CPU's math decomposition (math.c): a causal row adds
 * -inf to the scores it cannot see, so an infinite hidden score is
 * inf + -inf = NaN and the row is NaN; the fused order (p3 = 0) never
 * forms that score, and the row is v of its one visible key. */
static void test_math_order(void) {
  for (int math = 0; math <= 1; math++) {
    cfg c = base_cfg(1, 1, 1, 2, 2, 1, 1);
    c.causal = 1;
    c.scale = 1.0;
    buf4 q = mkbuf(1, 1, 2, 1, NRT_FLOAT32, 0), k = mkbuf(1, 1, 2, 1, NRT_FLOAT32, 0),
         v = mkbuf(1, 1, 2, 1, NRT_FLOAT32, 0), out = mkbuf(1, 1, 2, 1, NRT_FLOAT32, 0),
         lse = mkbuf(1, 1, 2, 1, NRT_FLOAT32, 0);
    *(float *)bptr(&q, 0, 0, 0, 0) = 2.0f;
    *(float *)bptr(&q, 0, 0, 1, 0) = 2.0f;
    *(float *)bptr(&k, 0, 0, 0, 0) = 1.0f;
    *(float *)bptr(&k, 0, 0, 1, 0) = 3e38f; /* 2 * 3e38 overflows */
    *(float *)bptr(&v, 0, 0, 0, 0) = 5.0f;
    *(float *)bptr(&v, 0, 0, 1, 0) = 7.0f;
    nrt_launch l = mk(NRT_OP(SDPA_FORWARD), &c, 2, 3);
    l.params[3] = math;
    set_op(&l, 0, &out);
    set_op(&l, 1, &lse);
    set_op(&l, 2, &q);
    set_op(&l, 3, &k);
    set_op(&l, 4, &v);
    CHECK_OK(nrt_launch_run(&l));
    CHECK(math ? isnan(get(&out, 0, 0, 0, 0)) : get(&out, 0, 0, 0, 0) == 5.0);
    free(q.data);
    free(k.data);
    free(v.data);
    free(out.data);
    free(lse.data);
  }
}

static void test_nonfinite(void) {
  for (int reference = 0; reference <= 1; reference++) {
    for (int which = 0; which < 3; which++) {
      cfg c = base_cfg(1, 1, 1, 3, 3, 2, 2);
      c.causal = which == 2;
      c.mask = which == 1 ? 2 : 0;
      buf4 q = mkbuf(1, 1, 3, 2, NRT_FLOAT32, 0), k = mkbuf(1, 1, 3, 2, NRT_FLOAT32, 0),
           v = mkbuf(1, 1, 3, 2, NRT_FLOAT32, 0), m = mkbuf(1, 1, 3, 3, NRT_FLOAT32, 0),
           out = mkbuf(1, 1, 3, 2, NRT_FLOAT32, 0), lse = mkbuf(1, 1, 3, 1, NRT_FLOAT32, 0);
      for (int64_t i = 0; i < 3; i++)
        for (int64_t e = 0; e < 2; e++) {
          *(float *)bptr(&q, 0, 0, i, e) = 1.0f;
          *(float *)bptr(&k, 0, 0, i, e) = 0.5f;
          *(float *)bptr(&v, 0, 0, i, e) = (float)(i + e);
        }
      if (which == 0) { /* row 0 has q = (NaN, -inf): every score NaN*0.5 + -inf*0.5 = NaN */
        *(float *)bptr(&q, 0, 0, 0, 0) = NAN;
        *(float *)bptr(&q, 0, 0, 0, 1) = -INFINITY;
      }
      if (which == 1) { /* row 1 fully masked, v[2][1] = inf */
        for (int64_t j = 0; j < 3; j++) *(float *)bptr(&m, 0, 0, 1, j) = -INFINITY;
        *(float *)bptr(&v, 0, 0, 2, 1) = INFINITY;
      }
      if (which == 2) *(float *)bptr(&v, 0, 0, 2, 0) = INFINITY;
      nrt_kernels_set_reference(reference);
      nrt_launch l = mk(NRT_OP(SDPA_FORWARD), &c, 2, 3 + (c.mask != 0));
      set_op(&l, 0, &out);
      set_op(&l, 1, &lse);
      set_op(&l, 2, &q);
      set_op(&l, 3, &k);
      set_op(&l, 4, &v);
      if (c.mask) set_op(&l, 5, &m);
      CHECK_OK(nrt_launch_run(&l));
      if (which == 0) {
        CHECK(get(&out, 0, 0, 0, 0) == 0.0 && get(&out, 0, 0, 0, 1) == 0.0);
        CHECK(fabs(get(&out, 0, 0, 1, 0) - 1.0) < 1e-6); /* equal weights: the mean of v's column 0 */
      } else if (which == 1) {
        CHECK(get(&out, 0, 0, 1, 0) == 0.0 && isnan(get(&out, 0, 0, 1, 1)));
        CHECK(isinf(get(&out, 0, 0, 0, 1))); /* attended rows: inf times a positive weight */
      } else {
        for (int64_t i = 0; i < 2; i++) CHECK(isnan(get(&out, 0, 0, i, 0)));
        CHECK(isinf(get(&out, 0, 0, 2, 0))); /* row 2 sees the inf with weight 1/3 */
        CHECK(fabs(get(&out, 0, 0, 0, 1) - 1.0) < 1e-6); /* row 0 sees v[0] only */
      }
      free(q.data);
      free(k.data);
      free(v.data);
      free(m.data);
      free(out.data);
      free(lse.data);
    }
  }
  nrt_kernels_set_reference(0);
}

static void test_bad_args(void) {
  cfg c = base_cfg(1, 3, 2, 4, 4, 4, 4);
  nrt_launch l = mk(NRT_OP(SDPA_FORWARD), &c, 2, 3);
  float buf[64] = {0};
  for (int i = 0; i < 5; i++) {
    l.operands[i].data = buf;
    l.operands[i].dtype = NRT_FLOAT32;
  }
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT); /* 3 heads vs 2 */
  l.sizes[2] = 3;
  l.operands[2].dtype = NRT_INT64;
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT); /* integer query */
}

/* The probed q . k trees (qk_order.c): products 2^25, -2^25 and 1 at three
 * positions sum to 1 exactly when the first two meet before the third. */
static float qk_triple(nrt_attn_qk_kernel kind, int64_t E, int a, int b, int c) {
  float q[32], k[32];
  for (int64_t e = 0; e < E; e++) q[e] = 1.0f, k[e] = 0.0f;
  k[a] = 0x1p25f;
  k[b] = -0x1p25f;
  k[c] = 1.0f;
  return nrt_attn_qk_dot(kind, q, k, E);
}

static void test_qk_order(void) {
  /* SEQ: 0 + 1 first, so 2^25 absorbs the 1 at e = 0 (0, 1 | 2 keeps it) */
  CHECK(qk_triple(NRT_ATTN_QK_SEQ, 9, 0, 1, 2) == 1.0f);
  CHECK(qk_triple(NRT_ATTN_QK_SEQ, 9, 0, 8, 1) == 0.0f);
  /* LANES: e and e + 8 share a lane */
  CHECK(qk_triple(NRT_ATTN_QK_LANES, 13, 0, 8, 1) == 1.0f);
  CHECK(qk_triple(NRT_ATTN_QK_LANES, 13, 0, 1, 8) == 0.0f);
  /* HEAD: e = 0 seeds lane 0 with e = 1; TAIL: e = 0 comes last */
  CHECK(qk_triple(NRT_ATTN_QK_HEAD, 10, 0, 1, 2) == 1.0f);
  CHECK(qk_triple(NRT_ATTN_QK_TAIL, 10, 1, 2, 0) == 1.0f);
  CHECK(qk_triple(NRT_ATTN_QK_TAIL, 10, 0, 1, 2) == 0.0f);
  /* the kernel by block shape and place */
  CHECK(nrt_attn_qk_kernel_of(1, 5, 8, 0, 3) == NRT_ATTN_QK_HEAD);
  CHECK(nrt_attn_qk_kernel_of(1, 5, 8, 0, 4) == NRT_ATTN_QK_TAIL);
  CHECK(nrt_attn_qk_kernel_of(3, 2, 8, 1, 1) == NRT_ATTN_QK_LANES);
  CHECK(nrt_attn_qk_kernel_of(3, 5, 8, 1, 1) == NRT_ATTN_QK_SEQ);
  CHECK(nrt_attn_qk_kernel_of(3, 5, 3, 1, 1) == NRT_ATTN_QK_LANES);
  CHECK(nrt_attn_qk_kernel_of(12, 3, 9, 1, 1) == NRT_ATTN_QK_SEQ);
  CHECK(nrt_attn_qk_kernel_of(3, 5, 17, 1, 1) == NRT_ATTN_QK_SEQ);
  CHECK(nrt_attn_qk_kernel_of(3, 5, 33, 1, 1) == NRT_ATTN_QK_OWN);
  CHECK(nrt_attn_qk_kernel_of(1, 5, 20, 0, 0) == NRT_ATTN_QK_OWN);
  /* ATen: partials of e mod 4, the tail into the first */
  CHECK(qk_triple(NRT_ATTN_QK_ATEN, 9, 0, 4, 1) == 1.0f);
  CHECK(qk_triple(NRT_ATTN_QK_ATEN, 9, 0, 1, 8) == 0.0f);
  /* 16 lanes above a head dim of 16: e and e + 16 share one */
  CHECK(qk_triple(NRT_ATTN_QK_LANES, 20, 0, 16, 1) == 1.0f);
  CHECK(qk_triple(NRT_ATTN_QK_LANES, 20, 0, 8, 16) == 0.0f);
}

/* The bfloat16 brgemm arrangements (qk_order.c): q = 3.4e38 at positions a
 * and b, k = +3 at a and -3 at b; in a shared lane the first infinity
 * reached wins, separate lanes meet as NaN. */
static float bf16_pair(int64_t E, int a, int b, bool vector) {
  float q[64] = {0}, k[64] = {0};
  q[a] = q[b] = 3.3895313892515355e38f;
  k[a] = 3.0f;
  k[b] = -3.0f;
  return nrt_attn_qk_dot_bf16(q, k, E, vector);
}

static void test_qk_bf16(void) {
  /* vector: a pair's odd position first; pairs p and p + 16 share lane p */
  CHECK(bf16_pair(8, 1, 0, true) == INFINITY);
  CHECK(bf16_pair(8, 0, 1, true) == -INFINITY);
  CHECK(isnan(bf16_pair(8, 0, 2, true)));
  CHECK(bf16_pair(40, 0, 32, true) == INFINITY && bf16_pair(40, 33, 1, true) == -INFINITY);
  /* blocks: even and odd positions apart, in order, per 32 positions */
  CHECK(bf16_pair(8, 0, 2, false) == INFINITY && bf16_pair(8, 4, 2, false) == -INFINITY);
  CHECK(isnan(bf16_pair(8, 1, 0, false)) && isnan(bf16_pair(40, 0, 32, false)));
  /* the lanes' tree: lane x meets x + 8 first, then its neighbour */
  float q[32] = {0}, k[32] = {0};
  q[1] = 0x1p25f, q[17] = -0x1p25f, q[3] = 1.0f; /* lanes 0, 8, 1 */
  k[1] = k[17] = k[3] = 1.0f;
  CHECK(nrt_attn_qk_dot_bf16(q, k, 32, true) == 1.0f);
  q[17] = 1.0f, q[3] = -0x1p25f; /* lane 8 holds the 1 now */
  CHECK(nrt_attn_qk_dot_bf16(q, k, 32, true) == 0.0f);
  /* subnormal operands count as zero */
  q[1] = 1e-39f, q[3] = 0.0f, q[17] = 0.0f, k[1] = 1.0f;
  CHECK(nrt_attn_qk_dot_bf16(q, k, 32, true) == 0.0f);
}

/* The CPU's float32 vector exp: NaN is inf in exp_u20, below ln(FLT_MIN)
 * it is 0, and inside it is within a few ulp of expf. */
static void test_vector_exp(void) {
  CHECK(isinf(nrt_attn_exp_u20(NAN)) && nrt_attn_exp_u20(NAN) > 0);
  CHECK(nrt_attn_exp_u20(-INFINITY) == 0.0f && nrt_attn_exp_u20(-100.0f) == 0.0f);
  for (float x = -80.0f; x <= 80.0f; x += 0.37f) {
    float want = expf(x);
    CHECK(fabsf(nrt_attn_exp_u20(x) - want) <= 4e-6f * want);
  }
}

int main(void) {
  CHECK_OK(nrt_init());
  RUN_TEST(test_plain);
  RUN_TEST(test_causal);
  RUN_TEST(test_masks);
  RUN_TEST(test_gqa_layout);
  RUN_TEST(test_dropout);
  RUN_TEST(test_dropout_determinism);
  RUN_TEST(test_half);
  RUN_TEST(test_bf16_rounds_once);
  RUN_TEST(test_empty_keys);
  RUN_TEST(test_nonfinite);
  RUN_TEST(test_math_order);
  RUN_TEST(test_bad_args);
  RUN_TEST(test_qk_order);
  RUN_TEST(test_qk_bf16);
  RUN_TEST(test_vector_exp);
  return TEST_RESULT();
}
