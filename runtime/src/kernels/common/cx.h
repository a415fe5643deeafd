/* The complex value type of the kernels: (re, im) in double, its
 * arithmetic as PyTorch's c10::complex defines it, and the logaddexp step
 * of the CPU's complex formula. Shared by the COMPLEX family and the
 * SELECT family's complex LOGCUMSUMEXP. */
#ifndef NRT_KERNELS_COMMON_CX_H
#define NRT_KERNELS_COMMON_CX_H

#include <complex.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "nrt/dtype.h"

/* Values compute in double: complex products and FFT twiddles lose less
 * that way, and the result is rounded once on store. */
typedef struct nrt_cx {
  double re, im;
} nrt_cx;

static inline nrt_cx nrt_cx_make(double re, double im) {
  nrt_cx z = {re, im};
  return z;
}
static inline nrt_cx nrt_cx_add(nrt_cx a, nrt_cx b) { return nrt_cx_make(a.re + b.re, a.im + b.im); }
static inline nrt_cx nrt_cx_sub(nrt_cx a, nrt_cx b) { return nrt_cx_make(a.re - b.re, a.im - b.im); }
/* The textbook product (no C99 Annex G NaN/inf recovery, like PyTorch's
 * c10::complex operator*). */
static inline nrt_cx nrt_cx_mul(nrt_cx a, nrt_cx b) {
  return nrt_cx_make(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re);
}
/* The same product as ATen's AVX2 build compiles c10::complex<double>'s
 * scalar operator*: with fused multiply-adds (cxf_mul_fma's double twin). */
static inline nrt_cx nrt_cx_mul_fma(nrt_cx a, nrt_cx b) {
  return nrt_cx_make(fma(a.re, b.re, -(a.im * b.im)), fma(a.re, b.im, a.im * b.re));
}
static inline nrt_cx nrt_cx_conj(nrt_cx a) { return nrt_cx_make(a.re, -a.im); }
/* PyTorch's c10::complex division: Smith's scaling keeps c^2 + d^2 from
 * overflowing; a zero divisor gives inf/NaN parts as a / 0 and b / 0. */
static inline nrt_cx nrt_cx_div(nrt_cx x, nrt_cx y) {
  double a = x.re, b = x.im, c = y.re, d = y.im;
  double ac = fabs(c), ad = fabs(d);
  if (ac >= ad) {
    if (ac == 0.0 && ad == 0.0) return nrt_cx_make(a / ac, b / ad);
    double rat = d / c, scl = 1.0 / (c + d * rat);
    return nrt_cx_make((a + b * rat) * scl, (b - a * rat) * scl);
  }
  double rat = c / d, scl = 1.0 / (d + c * rat);
  return nrt_cx_make((a * rat + b) * scl, (b * rat - a) * scl);
}

static inline double complex nrt_cx_to_c(nrt_cx z) { return CMPLX(z.re, z.im); }
static inline nrt_cx nrt_cx_from_c(double complex z) { return nrt_cx_make(creal(z), cimag(z)); }
static inline bool nrt_cx_isnan(nrt_cx z) { return isnan(z.re) || isnan(z.im); }

/* complex64 in float: the CPU computes complex64 with c10::complex<float>,
 * whose products and quotients round in float (the complex family's math, the index family's scatter product). */
typedef struct cxf {
  float re, im;
} cxf;

static inline cxf cxf_of(nrt_cx z) { return (cxf){(float)z.re, (float)z.im}; }
static inline nrt_cx cxf_to(cxf z) { return nrt_cx_make(z.re, z.im); }
/* c10::complex<float>'s operator* as ATen's vector body computes it
 * (textbook, separate products, no NaN recovery); its scalar function's
 * contracted form is cxf_mul_fma */
static inline cxf cxf_mul(cxf a, cxf b) { return (cxf){a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re}; }
static inline cxf cxf_mul_fma(cxf a, cxf b) {
  return (cxf){fmaf(a.re, b.re, -(a.im * b.im)), fmaf(a.re, b.im, a.im * b.re)};
}
/* c10::complex<float>'s operator/ (nrt_cx_div's scaling, in float), with
 * the fused multiply-adds GCC contracts it into in ATen's AVX-512 build
 * (bit for bit: 1 / csqrtf(z) is the CPU's rsqrt) */
static inline cxf cxf_div(cxf x, cxf y) {
  float a = x.re, b = x.im, c = y.re, d = y.im;
  float ac = fabsf(c), ad = fabsf(d);
  if (ac >= ad) {
    if (ac == 0.0f && ad == 0.0f) return (cxf){a / ac, b / ad};
    float rat = d / c, scl = 1.0f / fmaf(d, rat, c);
    return (cxf){fmaf(b, rat, a) * scl, fmaf(-a, rat, b) * scl};
  }
  float rat = c / d, scl = 1.0f / fmaf(c, rat, d);
  return (cxf){fmaf(a, rat, b) * scl, fmaf(b, rat, -a) * scl};
}

/* log(1 + z) the way PyTorch's CPU build of c10 computes it (torch.log1p
 * and the logaddexp step): z itself when u = 1 + z rounds to 1, log(u)
 * when u - 1 == z, else log(u) rescaled by z / (u - 1) for the rounding of
 * u. Its special values follow that formula: an infinite imaginary part
 * with a nonzero real part gives NaN + NaN i (inf i / inf i), not the
 * analytic inf + pi/2 i. In double (complex<double>). */
nrt_cx nrt_cx_log1p(nrt_cx z);

/* log(exp(x) + exp(y)) by the CPU's complex formula (ATen's LogAddExp.h):
 * min and max by real part, NaN in either part, the equal-infinity
 * branches, and c10's log1p. */
nrt_cx nrt_cx_log_add_exp(nrt_cx x, nrt_cx y);

/* One complex scan along a row, in the CPU's sequential order and in
 * double: acc = step(acc, x_i) from `init`, y_i = acc, rounded on store.
 * src and dst are real views (dtype = a part's; the imaginary part one
 * element size further). The fast path loads and stores each part of the
 * row as a block (scratch: 2n doubles), the reference path goes an element
 * at a time. */
typedef nrt_cx (*nrt_cx_step_fn)(nrt_cx acc, nrt_cx x);
void nrt_cx_scan_row(char *dst, int64_t dst_stride, nrt_dtype out_dt, const char *src, int64_t src_stride,
                     nrt_dtype in_dt, int64_t n, nrt_cx init, nrt_cx_step_fn step, bool reference, double *scratch);

#endif
