/* Op family DISTRIBUTIONS. The samplers behind torch.distributions (Gamma,
 * Beta, Dirichlet, Chi2, StudentT, Poisson, Binomial) and their
 * reparameterised gradients, run by the pointwise engine
 * (kernels/pointwise/distributions/). Operand layout as POINTWISE:
 * outputs, then inputs, elementwise over the launch's sizes.
 * Entries: X(name, kind, min_inputs, max_inputs); scalars (s0..s3),
 * params (p0..p3) as each comment says. See nrt/launch.h for how families
 * are numbered.
 *
 * All are float-domain ops; inside, values are computed in double (the
 * CPU's accumulation type for these ops) and rounded once on store. The
 * gradients also reproduce where the CPU computes in the data's own
 * precision (float32 data: PyTorch's scalar_t steps stay float).
 *
 * Samplers: p0 = seed (Philox key), p1 = offset. Each element draws from a
 * Philox stream of its own, so a rejection loop can take as many rounds as
 * it needs and the result depends only on (seed, offset, position):
 *   e        = p1 + the element's linear index, row-major over sizes (the
 *              order the pointwise engine numbers random ops in)
 *   round j  = Philox4x32-10(key = {lo32(p0), hi32(p0)},
 *                            counter = {lo32(e), hi32(e), 0x44495354 + j, 0})
 *              gives four 32-bit words w0..w3, j = 0, 1, 2, ... < 2^24
 * Word 2 is the family tag "DIST" plus the round: the base RNG ops
 * (nrt/launch.h) use word 2 = 0 or 1 (their stream selector), attention
 * dropout word 2 = 0, so no sampler ever shares a block with them, and two
 * elements (or two launches whose offsets are at least their element
 * counts apart, as the glue advances them) never share one either. The
 * round sits in word 2 rather than word 3 so that one round of many
 * consecutive elements is one batch of the shared Philox
 * (nrt_philox_batch with stream = tag + j).
 * A round holds two uniform doubles, u = ((w0 >> 5) 2^26 + (w1 >> 6)) 2^-53
 * and the same of (w2, w3), in [0, 1), drawn in that order; a normal is
 * Box-Muller over two consecutive uniforms, sqrt(-2 log(1 - u1)) times
 * cos(2 pi u2), its sin partner kept for the element's next normal. An
 * element that needs more than 2^24 rounds (never, for valid parameters)
 * gives NaN. */
#ifndef NRT_OPS_DISTRIBUTIONS_H
#define NRT_OPS_DISTRIBUTIONS_H

#include "nrt/launch.h"

/* Word 2 of every sampler counter ("DIST") is this plus the round. */
#define NRT_DIST_PHILOX_TAG 0x44495354u

#define NRT_OPS_DISTRIBUTIONS(X)                                                          \
  /* samplers: p0 seed, p1 offset */                                                      \
  X(STANDARD_GAMMA, POINTWISE, 1, 1)     /* Gamma(alpha = a, 1), Marsaglia-Tsang with     \
                                            the alpha < 1 boost; results below the        \
                                            output dtype's smallest normal (float32's     \
                                            for float64 data) or NaN give that normal */  \
  X(STANDARD_GAMMA_LOG, POINTWISE, 1, 1) /* log of the same sample, computed without      \
                                            underflow, clamped below at log(DBL_MIN)      \
                                            (NaN too): Dirichlet's normaliser */          \
  X(POISSON, POINTWISE, 1, 1)            /* Poisson(rate = a): product of uniforms below  \
                                            10, Hoermann's PTRS from 10; a < 0 or NaN     \
                                            gives NaN (the glue raises first) */          \
  X(BINOMIAL, POINTWISE, 2, 2)           /* Binomial(count = a, prob = b): inversion for  \
                                            n min(p, 1 - p) < 10, Hoermann's BTRS above */ \
  /* reparameterised gradients (pure math, no draws) */                                   \
  X(STANDARD_GAMMA_GRAD, POINTWISE, 2, 2) /* a = alpha, b = sample x: -(dF/dalpha)/f */   \
  X(DIRICHLET_GRAD, POINTWISE, 3, 3)      /* a = x, b = alpha, c = total (alpha + beta): \
                                             Beta's -(dF/dalpha) / f / (1 - x) */

NRT_OP_FAMILY_ENUM(DISTRIBUTIONS, NRT_OPS_DISTRIBUTIONS);

#endif
