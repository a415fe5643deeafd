/* Float sums accumulated in double, shared by the reductions, the row ops
 * and the norms: eight independent partial sums, so the loops vectorise
 * without any reassociation the compiler would have to prove, combined
 * pairwise at the end. Always inlined, so that each lands in the caller's
 * build (baseline or AVX-512). */
#ifndef NRT_KERNELS_COMMON_ACCUM_H
#define NRT_KERNELS_COMMON_ACCUM_H

#include <math.h>
#include <stdint.h>

#define NRT_ACCUM_INLINE static inline __attribute__((always_inline))

/* The pairwise total of eight partial sums. */
NRT_ACCUM_INLINE double nrt_sum8(const double acc[8]) {
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/* sum x[i] */
NRT_ACCUM_INLINE double nrt_sum_f64(const float *x, int64_t n) {
  /* 32 partial sums (four vectors of eight): with one vector, each add
   * waited for the previous one (3-4 cycles per 8 floats), below the
   * memory bandwidth of a row sum */
  double acc[32] = {0};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int j = 0; j < 32; j++) acc[j] += (double)x[i + j];
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; j++) acc[j] += (double)x[i + j];
  for (; i < n; i++) acc[0] += x[i];
  for (int j = 0; j < 8; j++) acc[j] = (acc[j] + acc[j + 8]) + (acc[j + 16] + acc[j + 24]);
  return nrt_sum8(acc);
}

/* sum x[i] * y[i] */
NRT_ACCUM_INLINE double nrt_dot_f64(const float *x, const float *y, int64_t n) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; j++) acc[j] += (double)x[i + j] * (double)y[i + j];
  for (; i < n; i++) acc[0] += (double)x[i] * (double)y[i];
  return nrt_sum8(acc);
}

/* sum (x[i] - shift)^2 */
NRT_ACCUM_INLINE double nrt_sumsq_f64(const float *x, int64_t n, double shift) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; j++) {
      double d = (double)x[i + j] - shift;
      acc[j] += d * d;
    }
  for (; i < n; i++) {
    double d = (double)x[i] - shift;
    acc[0] += d * d;
  }
  return nrt_sum8(acc);
}

/* sum |x[i]| */
NRT_ACCUM_INLINE double nrt_sumabs_f64(const float *x, int64_t n) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; j++) acc[j] += fabs((double)x[i + j]);
  for (; i < n; i++) acc[0] += fabs((double)x[i]);
  return nrt_sum8(acc);
}

#endif
