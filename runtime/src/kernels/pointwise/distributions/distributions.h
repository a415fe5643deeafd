/* Family DISTRIBUTIONS' private header: one element's Philox draw stream
 * (the mapping is documented in nrt/ops/distributions.h), the scalar
 * samplers over it (samplers.c) and the reparameterised gradients
 * (grad.c). The C tests use these directly for moments and edge values. */
#ifndef NRT_KERNELS_DISTRIBUTIONS_H
#define NRT_KERNELS_DISTRIBUTIONS_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "kernels/common/philox.h"
#include "nrt/ops/distributions.h"

/* Rounds an element may take before it gives NaN (a bound on a rejection
 * loop fed parameters no valid distribution has). */
#define NRT_DIST_MAX_ROUNDS (1u << 24)

typedef struct nrt_dist_stream {
  uint32_t key[2];
  uint32_t ctr[4];      /* {lo32(e), hi32(e), tag + round of w, 0} */
  uint32_t w[4];        /* the current round's words */
  const uint32_t *pre;  /* rounds 1..npre computed in batches: round r at pre + (r - 1) * pre_stride */
  int npre, pre_stride;
  int pos;              /* next unread word of w */
  bool exhausted;       /* more than NRT_DIST_MAX_ROUNDS rounds asked for */
  bool has_spare;       /* Box-Muller's second normal, for the next draw */
  double spare;
} nrt_dist_stream;

/* Element e's stream under `seed`. rounds: the words of rounds 0 ..
 * nrounds - 1 when the caller computed them in batches (nrt_philox_batch
 * with stream = tag + j gives exactly {e, tag + j, 0}), round j at
 * rounds + j * stride; NULL to compute every round here. */
static inline void nrt_dist_stream_init(nrt_dist_stream *s, uint64_t seed, uint64_t e, const uint32_t *rounds,
                                        int nrounds, int stride) {
  s->key[0] = (uint32_t)seed;
  s->key[1] = (uint32_t)(seed >> 32);
  s->ctr[0] = (uint32_t)e;
  s->ctr[1] = (uint32_t)(e >> 32);
  s->ctr[2] = NRT_DIST_PHILOX_TAG;
  s->ctr[3] = 0;
  s->pre = rounds && nrounds > 1 ? rounds + stride : NULL;
  s->npre = rounds ? nrounds - 1 : 0;
  s->pre_stride = stride;
  s->pos = 0;
  s->exhausted = false;
  s->has_spare = false;
  if (rounds) {
    for (int k = 0; k < 4; k++) s->w[k] = rounds[k];
  } else {
    nrt_philox4x32_10(s->ctr, s->key, s->w);
  }
}

/* A uniform double in [0, 1) from the next two words (53 bits). */
static inline double nrt_dist_uniform(nrt_dist_stream *s) {
  if (s->pos == 4) {
    if (s->ctr[2] - NRT_DIST_PHILOX_TAG + 1 >= NRT_DIST_MAX_ROUNDS) {
      s->exhausted = true; /* keep drawing the last round: the caller gives NaN */
    } else {
      s->ctr[2]++;
    }
    uint32_t r = s->ctr[2] - NRT_DIST_PHILOX_TAG;
    if (r <= (uint32_t)s->npre && !s->exhausted) {
      const uint32_t *src = s->pre + (r - 1) * (uint32_t)s->pre_stride;
      for (int k = 0; k < 4; k++) s->w[k] = src[k];
    } else {
      nrt_philox4x32_10(s->ctr, s->key, s->w);
    }
    s->pos = 0;
  }
  uint32_t hi = s->w[s->pos] >> 5, lo = s->w[s->pos + 1] >> 6;
  s->pos += 2;
  return ((double)hi * 67108864.0 + (double)lo) * 0x1p-53;
}

/* A standard normal: Box-Muller over two uniforms, the pair's second
 * value kept for the next call. */
static inline double nrt_dist_normal(nrt_dist_stream *s) {
  if (s->has_spare) {
    s->has_spare = false;
    return s->spare;
  }
  double u1 = nrt_dist_uniform(s), u2 = nrt_dist_uniform(s);
  double r = sqrt(-2.0 * log(1.0 - u1)), sn, cs; /* 1 - u1 in (0, 1]: finite */
  sincos(6.283185307179586477 * u2, &sn, &cs);
  s->spare = r * sn;
  s->has_spare = true;
  return r * cs;
}

/* The samplers in double, as PyTorch's CPU runs them (samplers.c). */
double nrt_dist_gamma(double alpha, nrt_dist_stream *s);     /* unclamped sample */
double nrt_dist_gamma_log(double alpha, nrt_dist_stream *s); /* its log, no underflow */
double nrt_dist_poisson(double rate, nrt_dist_stream *s);
double nrt_dist_binomial(double count, double prob, nrt_dist_stream *s);

/* The gradients (grad.c): d sample / d alpha of Gamma(alpha) at x, and
 * Beta's scaled gradient for Dirichlet at x given alpha and total, in
 * PyTorch's precision for float32 data (_f) and float64 data (_d). */
double nrt_dist_gamma_grad(double alpha, double x);
float nrt_dist_dirichlet_grad_f(float x, float alpha, float total);
double nrt_dist_dirichlet_grad_d(double x, double alpha, double total);
/* PyTorch's digamma_one in both precisions (what the gradients use). */
float nrt_dist_digamma_f(float x);
double nrt_dist_digamma_d(double x);

#endif
