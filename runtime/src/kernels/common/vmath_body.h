/* The functions of vmath.h, included there twice: NRT_VM(name) names
 * each function and NRT_VM_MADD(a, b, c) is a * b + c, as two operations
 * in the plain family and as one fused multiply-add in the _fma family.
 * No include guard: vmath.h includes it once per family. */
static inline float NRT_VM(nrt_vexpf)(float x) {
  /* Clamping keeps 2^n representable as two normal factors; the clamp
   * values still overflow / underflow to inf / 0. NaN fails both tests
   * and flows through. */
  float xc = x < -104.0f ? -104.0f : (x > 89.0f ? 89.0f : x);
  float t = xc * 1.44269504088896341f;
  float n = (t + 0x1.8p23f) - 0x1.8p23f; /* round to nearest */
  /* Cody-Waite: ln2 split so n * 0.693359375 is exact. */
  float r = xc - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  float z = r * r;
  float p = NRT_VM_MADD(1.9875691500e-4f, r, 1.3981999507e-3f);
  p = NRT_VM_MADD(p, r, 8.3334519073e-3f);
  p = NRT_VM_MADD(p, r, 4.1665795894e-2f);
  p = NRT_VM_MADD(p, r, 1.6666665459e-1f);
  p = NRT_VM_MADD(p, r, 5.0000001201e-1f);
  p = NRT_VM_MADD(p, z, r) + 1.0f;
  int32_t ni = (int32_t)n;
  int32_t n1 = ni >> 1, n2 = ni - n1;
  /* Two factors so results down to the subnormal range round once. */
  float s1 = nrt_vm_float((uint32_t)(n1 + 127) << 23);
  float s2 = nrt_vm_float((uint32_t)(n2 + 127) << 23);
  return p * s1 * s2;
}

static inline float NRT_VM(nrt_vlogf)(float x) {
  int sub = x < 0x1p-126f;
  float xs = sub ? x * 0x1p23f : x;
  uint32_t u = nrt_vm_bits(xs);
  int32_t e = (int32_t)((u >> 23) & 0xffu) - 126 - (sub ? 23 : 0);
  float m = nrt_vm_float((u & 0x007fffffu) | 0x3f000000u); /* [0.5, 1) */
  int lo = m < 0.707106781186547524f;
  float f = lo ? (m + m) - 1.0f : m - 1.0f;
  float ef = (float)(e - lo);
  float z = f * f;
  float y = NRT_VM_MADD(7.0376836292e-2f, f, -1.1514610310e-1f);
  y = NRT_VM_MADD(y, f, 1.1676998740e-1f);
  y = NRT_VM_MADD(y, f, -1.2420140846e-1f);
  y = NRT_VM_MADD(y, f, 1.4249322787e-1f);
  y = NRT_VM_MADD(y, f, -1.6668057665e-1f);
  y = NRT_VM_MADD(y, f, 2.0000714765e-1f);
  y = NRT_VM_MADD(y, f, -2.4999993993e-1f);
  y = NRT_VM_MADD(y, f, 3.3333331174e-1f) * f * z;
  y = y + -2.12194440e-4f * ef;
  y = y + -0.5f * z;
  float r = f + y;
  r = r + 0.693359375f * ef;
  r = x == __builtin_inff() ? x : r;
  r = x == 0.0f ? -__builtin_inff() : r;
  r = x < 0.0f ? __builtin_nanf("") : r;
  return x != x ? x : r;
}

static inline float NRT_VM(nrt_vtanhf)(float x) {
  float ax = x < 0.0f ? -x : x;
  float s = x * x;
  float small = NRT_VM_MADD(-5.70498872745e-3f, s, 2.06390887954e-2f);
  small = NRT_VM_MADD(small, s, -5.37397155531e-2f);
  small = NRT_VM_MADD(small, s, 1.33314422036e-1f);
  small = NRT_VM_MADD(small, s, -3.33332819422e-1f);
  small = NRT_VM_MADD(small * s, x, x);
  float e = NRT_VM(nrt_vexpf)(ax + ax);
  float big = 1.0f - 2.0f / (e + 1.0f);
  big = x < 0.0f ? -big : big;
  float r = ax < 0.625f ? small : big;
  return x == 0.0f ? x : r; /* keeps the sign of -0 */
}

static inline float NRT_VM(nrt_vsigmoidf)(float x) { return 1.0f / (1.0f + NRT_VM(nrt_vexpf)(-x)); }

/* Standard normal CDF, Phi(x) = erfc(-x / sqrt 2) / 2, for the exact GELU
 * and its gradient. Unlike 0.5 * (1 + erf(x / sqrt 2)), it keeps its
 * relative accuracy for negative x. With z = -x / sqrt 2:
 *   |z| < 1: erf|z| = |z| P(z^2), then erfc z = 1 -+ erf|z|;
 *   |z| >= 1: erfc|z| = exp(-z^2) Q(u), u = (1/|z| - 0.547) / 0.453,
 *             erfc z = 2 - erfc|z| for z < 0.
 * P and Q are least-squares fits of relative error (P: 3e-11, Q: 1.5e-8;
 * coefficients fitted for this file). Within ~1e-6 relative for
 * |x| < 3 and ~4e-6 beyond; the rounding of z amplifies into erfc's steep
 * tail, which libm's erff (1 + erf) handles no better. */
static inline float NRT_VM(nrt_vnormcdf)(float x) {
  float z = -x * 0.70710678118654752440f;
  float az = z < 0.0f ? -z : z;
  float t = az * az;
  float p = -9.6417610387e-06f;
  p = NRT_VM_MADD(p, t, 1.1257040337e-04f);
  p = NRT_VM_MADD(p, t, -8.4828428090e-04f);
  p = NRT_VM_MADD(p, t, 5.2209465084e-03f);
  p = NRT_VM_MADD(p, t, -2.6865400486e-02f);
  p = NRT_VM_MADD(p, t, 1.1283781984e-01f);
  p = NRT_VM_MADD(p, t, -3.7612638436e-01f);
  p = NRT_VM_MADD(p, t, 1.1283791671e+00f);
  float e = az * p; /* erf|z| */
  float ab = az < 1.0f ? 1.0f : az;
  float u = (1.0f / ab - 0.547f) * 2.2075055188f;
  float q = -2.1759310309e-06f;
  q = NRT_VM_MADD(q, u, -1.8892268746e-05f);
  q = NRT_VM_MADD(q, u, 5.7355780138e-05f);
  q = NRT_VM_MADD(q, u, -3.4587552766e-05f);
  q = NRT_VM_MADD(q, u, -1.0384704145e-04f);
  q = NRT_VM_MADD(q, u, 4.9463747728e-04f);
  q = NRT_VM_MADD(q, u, -1.3396364867e-03f);
  q = NRT_VM_MADD(q, u, 1.9385210461e-03f);
  q = NRT_VM_MADD(q, u, 3.0839035686e-03f);
  q = NRT_VM_MADD(q, u, -3.7252864223e-02f);
  q = NRT_VM_MADD(q, u, 1.8569490737e-01f);
  q = NRT_VM_MADD(q, u, 2.7506624836e-01f);
  float tail = NRT_VM(nrt_vexpf)(-ab * ab) * q; /* erfc|z| */
  float r = az < 1.0f ? (z < 0.0f ? 1.0f + e : 1.0f - e) : (z < 0.0f ? 2.0f - tail : tail);
  return 0.5f * r;
}
