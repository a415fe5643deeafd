/* Scalar special functions in double precision, for the SPECIAL family's
 * block functions (kernels/special.c). Each follows PyTorch's conventions
 * at the edges of its domain (poles, NaN for out-of-domain arguments,
 * limits at infinity), so that the device and the CPU agree on them; in
 * between, results are accurate to well below float32 rounding.
 *
 *   special_gamma.c   digamma, polygamma, Hurwitz zeta, incomplete gamma
 *   special_bessel.c  modified Bessel I/K, Airy Ai
 *   special_erf.c     erfcx, log_ndtr, ndtri */
#ifndef NRT_KERNELS_SPECIAL_MATH_H
#define NRT_KERNELS_SPECIAL_MATH_H

#include <stdint.h>

double nrt_sf_digamma(double x);
double nrt_sf_trigamma(double x);
double nrt_sf_polygamma(int64_t n, double x); /* n >= 0 */
double nrt_sf_zeta(double s, double q);       /* Hurwitz zeta(s, q) */
double nrt_sf_igamma(double a, double x);     /* regularised lower P(a, x) */
double nrt_sf_igammac(double a, double x);    /* regularised upper Q(a, x) */

double nrt_sf_i0(double x);
double nrt_sf_i0e(double x); /* exp(-|x|) I0(x) */
double nrt_sf_i1(double x);
double nrt_sf_i1e(double x); /* exp(-|x|) I1(x) */
double nrt_sf_k0(double x);
double nrt_sf_k0e(double x); /* exp(x) K0(x) */
double nrt_sf_k1(double x);
double nrt_sf_k1e(double x); /* exp(x) K1(x) */
double nrt_sf_airy_ai(double x);

double nrt_sf_erfcx(double x);    /* exp(x^2) erfc(x) */
double nrt_sf_log_ndtr(double x); /* log of the standard normal CDF */
double nrt_sf_ndtri(double p);    /* inverse of the standard normal CDF */

#endif
