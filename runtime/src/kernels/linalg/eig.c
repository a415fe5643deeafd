/* The general (non-symmetric) eigensolver, op EIG: eigenvalues, and
 * optionally right eigenvectors, of a real or complex square matrix, both
 * complex on output.
 *
 * The algorithm is LAPACK's geev, written from its published description
 * so that results line up with the CPU's (its eigenvalues come in the
 * order the Schur form holds them, which only the same algorithm
 * reproduces): balancing (permutations isolating eigenvalues, then
 * power-of-2 scaling), Householder reduction to Hessenberg form with the
 * reflectors accumulated, then
 *  - real input: Francis double-shift QR (lahqr) to the real Schur form
 *    with 1x1 and standardised 2x2 blocks (lanv2), so complex eigenvalues
 *    come as exact conjugate pairs, positive imaginary part first;
 *  - complex input: single-shift complex QR (Wilkinson shifts, lahqr) to
 *    the triangular Schur form.
 * Exceptional shifts every 10 iterations without deflation. Eigenvectors
 * are back-substituted on the Schur form (complex arithmetic throughout,
 * tiny pivots perturbed to ulp * |lambda|), transformed back by the Schur
 * vectors and the balancing, and normalised as geev does: unit 2-norm, and
 * the largest-magnitude component made real (for complex input positive;
 * for a complex pair of real input, with the sign LAPACK's plane rotation
 * leaves, see below).
 *
 * Matrices of order >= 75, where LAPACK switches to its aggressive early
 * deflation QR, get the same small-matrix QR here (same eigenvalues to
 * rounding, possibly in another order), and LAPACK's scaling of matrices
 * with entries near overflow/underflow is not done. Row-major arrays
 * with 1-based index macros, to follow the published algorithm line by
 * line. One path, so also the reference. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "kernels/linalg/zlinalg.h"

#define EIG_KEXSH 10
#define EIG_DAT1 0.75
#define EIG_DAT2 (-0.4375)

static const double ULP = DBL_EPSILON;     /* dlamch('P') = eps * base */
static const double SAFMIN = DBL_MIN;      /* dlamch('S') */

/* ---- real helpers --------------------------------------------------------- */

/* Householder reflector (larfg): on return alpha = beta and x scaled so
 * that H = I - tau [1; x][1; x]^T maps [alpha; x] to [beta; 0]. */
static double dlarfg(int64_t n, double *alpha, double *x, int64_t incx) {
  if (n <= 1) return 0.0;
  double scale = 0.0, ssq = 0.0;
  for (int64_t i = 0; i < n - 1; i++) scale = fmax(scale, fabs(x[i * incx]));
  if (scale > 0.0)
    for (int64_t i = 0; i < n - 1; i++) {
      double t = x[i * incx] / scale;
      ssq += t * t;
    }
  double xnorm = scale * sqrt(ssq);
  if (xnorm == 0.0) return 0.0;
  double beta = -copysign(hypot(*alpha, xnorm), *alpha);
  double tau = (beta - *alpha) / beta, inv = 1.0 / (*alpha - beta);
  for (int64_t i = 0; i < n - 1; i++) x[i * incx] *= inv;
  *alpha = beta;
  return tau;
}

/* Complex reflector (zlarfg): H^H [alpha; x] = [beta; 0], beta real. */
static nrt_z zlarfg(int64_t n, nrt_z *alpha, nrt_z *x, int64_t incx) {
  if (n <= 0) return 0.0;
  double scale = 0.0, ssq = 0.0;
  for (int64_t i = 0; i < n - 1; i++) scale = fmax(scale, cabs(x[i * incx]));
  if (scale > 0.0)
    for (int64_t i = 0; i < n - 1; i++) ssq += nrt_z_abs2(x[i * incx] / scale);
  double xnorm = scale * sqrt(ssq), ar = creal(*alpha), ai = cimag(*alpha);
  if (xnorm == 0.0 && ai == 0.0) return 0.0;
  double beta = -copysign(hypot(hypot(ar, ai), xnorm), ar);
  nrt_z tau = CMPLX((beta - ar) / beta, -ai / beta);
  nrt_z inv = 1.0 / (*alpha - beta);
  for (int64_t i = 0; i < n - 1; i++) x[i * incx] *= inv;
  *alpha = beta;
  return tau;
}

/* ---- balancing (gebal 'B' / gebak) ------------------------------------------ */

/* A(i, j) of the n x n row-major complex or real matrix: one routine for
 * both element types through these accessors. */
typedef struct mat {
  double *re;  /* real matrix, or NULL */
  nrt_z *cx;   /* complex matrix, or NULL */
  int64_t n;
} mat;

static double m_abs(const mat *a, int64_t i, int64_t j) { /* 1-based */
  return a->re ? fabs(a->re[(i - 1) * a->n + j - 1]) : cabs(a->cx[(i - 1) * a->n + j - 1]);
}
static double m_abs1(const mat *a, int64_t i, int64_t j) {
  return a->re ? fabs(a->re[(i - 1) * a->n + j - 1]) : nrt_z_abs1(a->cx[(i - 1) * a->n + j - 1]);
}
static int m_nonzero(const mat *a, int64_t i, int64_t j) {
  return a->re ? a->re[(i - 1) * a->n + j - 1] != 0.0 : a->cx[(i - 1) * a->n + j - 1] != 0.0;
}
static void m_swap(const mat *a, int64_t i1, int64_t j1, int64_t i2, int64_t j2) {
  int64_t p = (i1 - 1) * a->n + j1 - 1, q = (i2 - 1) * a->n + j2 - 1;
  if (a->re) {
    double t = a->re[p];
    a->re[p] = a->re[q];
    a->re[q] = t;
  } else {
    nrt_z t = a->cx[p];
    a->cx[p] = a->cx[q];
    a->cx[q] = t;
  }
}
static void m_scale(const mat *a, int64_t i, int64_t j, double s) {
  if (a->re) a->re[(i - 1) * a->n + j - 1] *= s;
  else a->cx[(i - 1) * a->n + j - 1] *= s;
}

/* Swaps column j with column m over rows 1..l and row j with row m over
 * columns k..n (the permutation step of gebal). */
static void bal_exchange(const mat *a, int64_t j, int64_t m, int64_t k, int64_t l) {
  if (j == m) return;
  for (int64_t i = 1; i <= l; i++) m_swap(a, i, j, i, m);
  for (int64_t c = k; c <= a->n; c++) m_swap(a, j, c, m, c);
}

/* scale[1..n] (1-based) as gebal defines it: permutation indices outside
 * [ilo, ihi], scaling factors inside. */
static void gebal(const mat *a, double *scale, int64_t *ilo_out, int64_t *ihi_out) {
  int64_t n = a->n, k = 1, l = n;
  const double sclfac = 2.0, factor = 0.95;
  /* Rows isolating an eigenvalue go to the bottom. */
  int noconv = 1;
  while (noconv) {
    noconv = 0;
    for (int64_t i = l; i >= 1; i--) {
      int canswap = 1;
      for (int64_t j = 1; j <= l; j++)
        if (i != j && m_nonzero(a, i, j)) {
          canswap = 0;
          break;
        }
      if (canswap) {
        scale[l] = (double)i;
        bal_exchange(a, i, l, k, l);
        noconv = 1;
        if (l == 1) {
          *ilo_out = 1;
          *ihi_out = 1;
          return;
        }
        l--;
      }
    }
  }
  /* Columns isolating an eigenvalue go to the left. */
  noconv = 1;
  while (noconv) {
    noconv = 0;
    for (int64_t j = k; j <= l; j++) {
      int canswap = 1;
      for (int64_t i = k; i <= l; i++)
        if (i != j && m_nonzero(a, i, j)) {
          canswap = 0;
          break;
        }
      if (canswap) {
        scale[k] = (double)j;
        bal_exchange(a, j, k, k, l);
        noconv = 1;
        k++;
      }
    }
  }
  for (int64_t i = k; i <= l; i++) scale[i] = 1.0;
  /* Power-of-2 scaling of rows and columns k..l towards equal norms. */
  double sfmin1 = SAFMIN / ULP, sfmax1 = 1.0 / sfmin1, sfmin2 = sfmin1 * sclfac, sfmax2 = 1.0 / sfmin2;
  noconv = 1;
  while (noconv) {
    noconv = 0;
    for (int64_t i = k; i <= l; i++) {
      double c = 0.0, r = 0.0, ca = 0.0, ra = 0.0;
      for (int64_t j = k; j <= l; j++) {
        double x = m_abs(a, j, i), y = m_abs(a, i, j);
        c = hypot(c, x);
        r = hypot(r, y);
      }
      /* idamax/izamax pick the first largest |re| + |im|; ca, ra are that
       * entry's modulus. */
      double best = -1.0;
      for (int64_t j = 1; j <= l; j++)
        if (m_abs1(a, j, i) > best) {
          best = m_abs1(a, j, i);
          ca = m_abs(a, j, i);
        }
      best = -1.0;
      for (int64_t j = k; j <= n; j++)
        if (m_abs1(a, i, j) > best) {
          best = m_abs1(a, i, j);
          ra = m_abs(a, i, j);
        }
      if (c == 0.0 || r == 0.0) continue;
      if (isnan(c + ca + r + ra)) return; /* NaN input: leave it (the glue refuses non-finite input) */
      double g = r / sclfac, f = 1.0, s = c + r;
      while (c < g && fmax(f, fmax(c, ca)) < sfmax2 && fmin(r, fmin(g, ra)) > sfmin2) {
        f *= sclfac;
        c *= sclfac;
        ca *= sclfac;
        r /= sclfac;
        g /= sclfac;
        ra /= sclfac;
      }
      g = c / sclfac;
      while (g >= r && fmax(r, ra) < sfmax2 && fmin(fmin(f, c), fmin(g, ca)) > sfmin2) {
        f /= sclfac;
        c /= sclfac;
        g /= sclfac;
        ca /= sclfac;
        r *= sclfac;
        ra *= sclfac;
      }
      if (c + r >= factor * s) continue;
      if (f < 1.0 && scale[i] < 1.0 && f * scale[i] <= sfmin1) continue;
      if (f > 1.0 && scale[i] > 1.0 && scale[i] >= sfmax1 / f) continue;
      scale[i] *= f;
      noconv = 1;
      for (int64_t j = k; j <= n; j++) m_scale(a, i, j, 1.0 / f);
      for (int64_t j = 1; j <= l; j++) m_scale(a, j, i, f);
    }
  }
  *ilo_out = k;
  *ihi_out = l;
}

/* gebak for right eigenvectors: rows of the complex n x n V (row-major). */
static void gebak(nrt_z *v, int64_t n, const double *scale, int64_t ilo, int64_t ihi) {
  if (ilo != ihi)
    for (int64_t i = ilo; i <= ihi; i++)
      for (int64_t j = 0; j < n; j++) v[(i - 1) * n + j] *= scale[i];
  for (int64_t ii = 1; ii <= n; ii++) {
    int64_t i = ii;
    if (i >= ilo && i <= ihi) continue;
    if (i < ilo) i = ilo - ii;
    int64_t k = (int64_t)scale[i];
    if (k == i || k < 1 || k > n) continue;
    nrt_z_swap_rows(v, n, i - 1, k - 1);
  }
}

/* ---- real Hessenberg + double-shift QR ----------------------------------------- */

#define H(i, j) h[((i) - 1) * n + (j) - 1]
#define Z(i, j) z[((i) - 1) * n + (j) - 1]

/* gehd2 + orghr: H = Q^T A Q upper Hessenberg in h; Q in z when z != NULL. */
static void dgehrd(double *h, int64_t n, int64_t ilo, int64_t ihi, double *tau, double *z) {
  for (int64_t i = ilo; i <= ihi - 1; i++) {
    int64_t len = ihi - i;
    double alpha = H(i + 1, i);
    double t = dlarfg(len, &alpha, len > 1 ? &H(i + 2, i) : NULL, n);
    tau[i] = t;
    H(i + 1, i) = 1.0; /* v = H(i+1..ihi, i) with v(1) = 1 */
    if (t != 0.0) {
      for (int64_t r = 1; r <= ihi; r++) { /* A(1:ihi, i+1:ihi) H from the right */
        double s = 0.0;
        for (int64_t c = i + 1; c <= ihi; c++) s += H(r, c) * H(c, i);
        s *= t;
        for (int64_t c = i + 1; c <= ihi; c++) H(r, c) -= s * H(c, i);
      }
      for (int64_t c = i + 1; c <= n; c++) { /* H A(i+1:ihi, i+1:n) from the left */
        double s = 0.0;
        for (int64_t r = i + 1; r <= ihi; r++) s += H(r, i) * H(r, c);
        s *= t;
        for (int64_t r = i + 1; r <= ihi; r++) H(r, c) -= s * H(r, i);
      }
    }
    H(i + 1, i) = alpha;
  }
  if (!z) { /* no Q wanted: only the Hessenberg form is kept */
    for (int64_t j = 1; j <= n; j++)
      for (int64_t i = j + 2; i <= n; i++) H(i, j) = 0.0;
    return;
  }
  /* Q = H(ilo) ... H(ihi-1): identity outside rows/columns ilo+1..ihi;
   * applied to I last reflector first. */
  for (int64_t i = 0; i < n * n; i++) z[i] = 0.0;
  for (int64_t i = 1; i <= n; i++) Z(i, i) = 1.0;
  for (int64_t i = ihi - 1; i >= ilo; i--) {
    double t = tau[i];
    if (t == 0.0) continue;
    for (int64_t c = i + 1; c <= ihi; c++) {
      double s = Z(i + 1, c);
      for (int64_t r = i + 2; r <= ihi; r++) s += H(r, i) * Z(r, c);
      s *= t;
      Z(i + 1, c) -= s;
      for (int64_t r = i + 2; r <= ihi; r++) Z(r, c) -= s * H(r, i);
    }
  }
  /* The reflectors below the subdiagonal are no longer needed. */
  for (int64_t j = 1; j <= n; j++)
    for (int64_t i = j + 2; i <= n; i++) H(i, j) = 0.0;
}

/* Schur factorisation of the real 2x2 [[a, b], [c, d]] in standardised form
 * (lanv2): either upper triangular, or equal diagonal with b c < 0. */
static void dlanv2(double *a, double *b, double *c, double *d, double *rt1r, double *rt1i, double *rt2r,
                   double *rt2i, double *cs, double *sn) {
  const double multpl = 4.0;
  const double safmn2 = ldexp(1.0, -485), safmx2 = 1.0 / safmn2; /* base^(log(safmin/eps)/log(base)/2) */
  if (*c == 0.0) {
    *cs = 1.0;
    *sn = 0.0;
  } else if (*b == 0.0) {
    *cs = 0.0;
    *sn = 1.0;
    double temp = *d;
    *d = *a;
    *a = temp;
    *b = -*c;
    *c = 0.0;
  } else if (*a - *d == 0.0 && copysign(1.0, *b) != copysign(1.0, *c)) {
    *cs = 1.0;
    *sn = 0.0;
  } else {
    double temp = *a - *d, p = 0.5 * temp;
    double bcmax = fmax(fabs(*b), fabs(*c));
    double bcmis = fmin(fabs(*b), fabs(*c)) * copysign(1.0, *b) * copysign(1.0, *c);
    double scale = fmax(fabs(p), bcmax);
    double zz = (p / scale) * p + (bcmax / scale) * bcmis;
    if (zz >= multpl * ULP) { /* real eigenvalues */
      zz = p + copysign(sqrt(scale) * sqrt(zz), p);
      *a = *d + zz;
      *d = *d - (bcmax / zz) * bcmis;
      double tau = hypot(*c, zz);
      *cs = zz / tau;
      *sn = *c / tau;
      *b = *b - *c;
      *c = 0.0;
    } else { /* complex or nearly equal real eigenvalues: equalise the diagonal */
      int count = 0;
      double sigma = *b + *c;
      for (;;) {
        count++;
        scale = fmax(fabs(temp), fabs(sigma));
        if (scale >= safmx2) {
          sigma *= safmn2;
          temp *= safmn2;
          if (count <= 20) continue;
        }
        if (scale <= safmn2) {
          sigma *= safmx2;
          temp *= safmx2;
          if (count <= 20) continue;
        }
        break;
      }
      p = 0.5 * temp;
      double tau = hypot(sigma, temp);
      *cs = sqrt(0.5 * (1.0 + fabs(sigma) / tau));
      *sn = -(p / (tau * *cs)) * copysign(1.0, sigma);
      double aa = *a * *cs + *b * *sn, bb = -*a * *sn + *b * *cs;
      double cc = *c * *cs + *d * *sn, dd = -*c * *sn + *d * *cs;
      *a = aa * *cs + cc * *sn;
      *b = bb * *cs + dd * *sn;
      *c = -aa * *sn + cc * *cs;
      *d = -bb * *sn + dd * *cs;
      temp = 0.5 * (*a + *d);
      *a = temp;
      *d = temp;
      if (*c != 0.0) {
        if (*b != 0.0) {
          if (copysign(1.0, *b) == copysign(1.0, *c)) { /* real eigenvalues: triangularise */
            double sab = sqrt(fabs(*b)), sac = sqrt(fabs(*c));
            p = copysign(sab * sac, *c);
            tau = 1.0 / sqrt(fabs(*b + *c));
            *a = temp + p;
            *d = temp - p;
            *b = *b - *c;
            *c = 0.0;
            double cs1 = sab * tau, sn1 = sac * tau;
            temp = *cs * cs1 - *sn * sn1;
            *sn = *cs * sn1 + *sn * cs1;
            *cs = temp;
          }
        } else {
          *b = -*c;
          *c = 0.0;
          temp = *cs;
          *cs = -*sn;
          *sn = temp;
        }
      }
    }
  }
  *rt1r = *a;
  *rt2r = *d;
  if (*c == 0.0) {
    *rt1i = 0.0;
    *rt2i = 0.0;
  } else {
    *rt1i = sqrt(fabs(*b)) * sqrt(fabs(*c));
    *rt2i = -*rt1i;
  }
}

/* x' = c x + s y, y' = c y - s x over `count` pairs. */
static void drot(int64_t count, double *x, int64_t incx, double *y, int64_t incy, double c, double s) {
  for (int64_t i = 0; i < count; i++) {
    double xi = x[i * incx], yi = y[i * incy];
    x[i * incx] = c * xi + s * yi;
    y[i * incy] = c * yi - s * xi;
  }
}

/* Double-shift QR (lahqr) on rows/columns ilo..ihi of the Hessenberg h;
 * wr, wi 1-based. wantt: full Schur form (and Schur vectors in z when z).
 * Returns 0, or the index of an eigenvalue that did not converge. */
static int64_t dlahqr(int wantt, double *h, int64_t n, int64_t ilo, int64_t ihi, double *wr, double *wi, double *z) {
  if (n == 0) return 0;
  if (ilo == ihi) {
    wr[ilo] = H(ilo, ilo);
    wi[ilo] = 0.0;
    return 0;
  }
  for (int64_t j = ilo; j <= ihi - 3; j++) {
    H(j + 2, j) = 0.0;
    H(j + 3, j) = 0.0;
  }
  if (ilo <= ihi - 2) H(ihi, ihi - 2) = 0.0;
  int64_t nh = ihi - ilo + 1, iloz = ilo, ihiz = ihi;
  double smlnum = SAFMIN * ((double)nh / ULP);
  int64_t i1 = 1, i2 = n;
  int64_t itmax = 30 * (nh > 10 ? nh : 10), kdefl = 0;
  int64_t i = ihi;
  while (i >= ilo) {
    int64_t l = ilo;
    int converged = 0;
    for (int64_t its = 0; its <= itmax; its++) {
      int64_t k;
      for (k = i; k > l; k--) {
        if (fabs(H(k, k - 1)) <= smlnum) break;
        double tst = fabs(H(k - 1, k - 1)) + fabs(H(k, k));
        if (tst == 0.0) {
          if (k - 2 >= ilo) tst += fabs(H(k - 1, k - 2));
          if (k + 1 <= ihi) tst += fabs(H(k + 1, k));
        }
        if (fabs(H(k, k - 1)) <= ULP * tst) {
          double ab = fmax(fabs(H(k, k - 1)), fabs(H(k - 1, k)));
          double ba = fmin(fabs(H(k, k - 1)), fabs(H(k - 1, k)));
          double aa = fmax(fabs(H(k, k)), fabs(H(k - 1, k - 1) - H(k, k)));
          double bb = fmin(fabs(H(k, k)), fabs(H(k - 1, k - 1) - H(k, k)));
          double s = aa + ab;
          if (ba * (ab / s) <= fmax(smlnum, ULP * (bb * (aa / s)))) break;
        }
      }
      l = k;
      if (l > ilo) H(l, l - 1) = 0.0;
      if (l >= i - 1) {
        converged = 1;
        break;
      }
      kdefl++;
      if (!wantt) {
        i1 = l;
        i2 = i;
      }
      double h11, h12, h21, h22;
      if (kdefl % (2 * EIG_KEXSH) == 0) {
        double s = fabs(H(i, i - 1)) + fabs(H(i - 1, i - 2));
        h11 = EIG_DAT1 * s + H(i, i);
        h12 = EIG_DAT2 * s;
        h21 = s;
        h22 = h11;
      } else if (kdefl % EIG_KEXSH == 0) {
        double s = fabs(H(l + 1, l)) + fabs(H(l + 2, l + 1));
        h11 = EIG_DAT1 * s + H(l, l);
        h12 = EIG_DAT2 * s;
        h21 = s;
        h22 = h11;
      } else {
        h11 = H(i - 1, i - 1);
        h21 = H(i, i - 1);
        h12 = H(i - 1, i);
        h22 = H(i, i);
      }
      double s = fabs(h11) + fabs(h12) + fabs(h21) + fabs(h22), rt1r, rt1i, rt2r, rt2i;
      if (s == 0.0) {
        rt1r = rt1i = rt2r = rt2i = 0.0;
      } else {
        h11 /= s;
        h21 /= s;
        h12 /= s;
        h22 /= s;
        double tr = (h11 + h22) / 2.0;
        double det = (h11 - tr) * (h22 - tr) - h12 * h21;
        double rtdisc = sqrt(fabs(det));
        if (det >= 0.0) {
          rt1r = tr * s;
          rt2r = rt1r;
          rt1i = rtdisc * s;
          rt2i = -rt1i;
        } else {
          rt1r = tr + rtdisc;
          rt2r = tr - rtdisc;
          if (fabs(rt1r - h22) <= fabs(rt2r - h22)) {
            rt1r *= s;
            rt2r = rt1r;
          } else {
            rt2r *= s;
            rt1r = rt2r;
          }
          rt1i = rt2i = 0.0;
        }
      }
      double v[3];
      int64_t m;
      for (m = i - 2; m >= l; m--) {
        double h21s = H(m + 1, m);
        s = fabs(H(m, m) - rt2r) + fabs(rt2i) + fabs(h21s);
        h21s = H(m + 1, m) / s;
        v[0] = h21s * H(m, m + 1) + (H(m, m) - rt1r) * ((H(m, m) - rt2r) / s) - rt1i * (rt2i / s);
        v[1] = h21s * (H(m, m) + H(m + 1, m + 1) - rt1r - rt2r);
        v[2] = h21s * H(m + 2, m + 1);
        s = fabs(v[0]) + fabs(v[1]) + fabs(v[2]);
        v[0] /= s;
        v[1] /= s;
        v[2] /= s;
        if (m == l) break;
        double h00 = fabs(H(m, m - 1)) * (fabs(v[1]) + fabs(v[2]));
        double h01 = fabs(v[0]) * (fabs(H(m - 1, m - 1)) + fabs(H(m, m)) + fabs(H(m + 1, m + 1)));
        if (h00 <= ULP * h01) break;
      }
      for (int64_t kk = m; kk <= i - 1; kk++) {
        int64_t nr = i - kk + 1 < 3 ? i - kk + 1 : 3;
        if (kk > m)
          for (int64_t t = 0; t < nr; t++) v[t] = H(kk + t, kk - 1);
        double t1 = dlarfg(nr, &v[0], &v[1], 1);
        if (kk > m) {
          H(kk, kk - 1) = v[0];
          H(kk + 1, kk - 1) = 0.0;
          if (kk < i - 1) H(kk + 2, kk - 1) = 0.0;
        } else if (m > l) {
          /* (1 - t1) instead of a sign flip: safe when v(2), v(3) underflow */
          H(kk, kk - 1) *= 1.0 - t1;
        }
        double v2 = v[1], t2 = t1 * v2;
        if (nr == 3) {
          double v3 = v[2], t3 = t1 * v3;
          for (int64_t j = kk; j <= i2; j++) {
            double sum = H(kk, j) + v2 * H(kk + 1, j) + v3 * H(kk + 2, j);
            H(kk, j) -= sum * t1;
            H(kk + 1, j) -= sum * t2;
            H(kk + 2, j) -= sum * t3;
          }
          int64_t jmax = kk + 3 < i ? kk + 3 : i;
          for (int64_t j = i1; j <= jmax; j++) {
            double sum = H(j, kk) + v2 * H(j, kk + 1) + v3 * H(j, kk + 2);
            H(j, kk) -= sum * t1;
            H(j, kk + 1) -= sum * t2;
            H(j, kk + 2) -= sum * t3;
          }
          if (z)
            for (int64_t j = iloz; j <= ihiz; j++) {
              double sum = Z(j, kk) + v2 * Z(j, kk + 1) + v3 * Z(j, kk + 2);
              Z(j, kk) -= sum * t1;
              Z(j, kk + 1) -= sum * t2;
              Z(j, kk + 2) -= sum * t3;
            }
        } else if (nr == 2) {
          for (int64_t j = kk; j <= i2; j++) {
            double sum = H(kk, j) + v2 * H(kk + 1, j);
            H(kk, j) -= sum * t1;
            H(kk + 1, j) -= sum * t2;
          }
          for (int64_t j = i1; j <= i; j++) {
            double sum = H(j, kk) + v2 * H(j, kk + 1);
            H(j, kk) -= sum * t1;
            H(j, kk + 1) -= sum * t2;
          }
          if (z)
            for (int64_t j = iloz; j <= ihiz; j++) {
              double sum = Z(j, kk) + v2 * Z(j, kk + 1);
              Z(j, kk) -= sum * t1;
              Z(j, kk + 1) -= sum * t2;
            }
        }
      }
    }
    if (!converged) return i;
    if (l == i) {
      wr[i] = H(i, i);
      wi[i] = 0.0;
    } else if (l == i - 1) {
      double cs, sn;
      dlanv2(&H(i - 1, i - 1), &H(i - 1, i), &H(i, i - 1), &H(i, i), &wr[i - 1], &wi[i - 1], &wr[i], &wi[i], &cs,
             &sn);
      if (wantt) {
        if (i2 > i) drot(i2 - i, &H(i - 1, i + 1), 1, &H(i, i + 1), 1, cs, sn);
        drot(i - i1 - 1, &H(i1, i - 1), n, &H(i1, i), n, cs, sn);
      }
      if (z) drot(ihiz - iloz + 1, &Z(iloz, i - 1), n, &Z(iloz, i), n, cs, sn);
    }
    kdefl = 0;
    i = l - 1;
  }
  return 0;
}

#undef H
#undef Z

/* ---- complex Hessenberg + single-shift QR --------------------------------------- */

#define H(i, j) h[((i) - 1) * n + (j) - 1]
#define Z(i, j) z[((i) - 1) * n + (j) - 1]

static void zgehrd(nrt_z *h, int64_t n, int64_t ilo, int64_t ihi, nrt_z *tau, nrt_z *z) {
  for (int64_t i = ilo; i <= ihi - 1; i++) {
    int64_t len = ihi - i;
    nrt_z alpha = H(i + 1, i);
    nrt_z t = zlarfg(len, &alpha, len > 1 ? &H(i + 2, i) : NULL, n);
    tau[i] = t;
    H(i + 1, i) = 1.0;
    if (t != 0.0) {
      for (int64_t r = 1; r <= ihi; r++) { /* A H = A - tau (A v) v^H */
        nrt_z s = 0.0;
        for (int64_t c = i + 1; c <= ihi; c++) s += H(r, c) * H(c, i);
        s *= t;
        for (int64_t c = i + 1; c <= ihi; c++) H(r, c) -= s * conj(H(c, i));
      }
      for (int64_t c = i + 1; c <= n; c++) { /* H^H A = A - conj(tau) v (v^H A) */
        nrt_z s = 0.0;
        for (int64_t r = i + 1; r <= ihi; r++) s += conj(H(r, i)) * H(r, c);
        s *= conj(t);
        for (int64_t r = i + 1; r <= ihi; r++) H(r, c) -= s * H(r, i);
      }
    }
    H(i + 1, i) = alpha;
  }
  if (!z) { /* no Q wanted: only the Hessenberg form is kept */
    for (int64_t j = 1; j <= n; j++)
      for (int64_t i = j + 2; i <= n; i++) H(i, j) = 0.0;
    return;
  }
  for (int64_t i = 0; i < n * n; i++) z[i] = 0.0;
  for (int64_t i = 1; i <= n; i++) Z(i, i) = 1.0;
  for (int64_t i = ihi - 1; i >= ilo; i--) { /* Q = H(ilo) ... H(ihi-1) */
    nrt_z t = tau[i];
    if (t == 0.0) continue;
    for (int64_t c = i + 1; c <= ihi; c++) {
      nrt_z s = Z(i + 1, c);
      for (int64_t r = i + 2; r <= ihi; r++) s += conj(H(r, i)) * Z(r, c);
      s *= t;
      Z(i + 1, c) -= s;
      for (int64_t r = i + 2; r <= ihi; r++) Z(r, c) -= s * H(r, i);
    }
  }
  for (int64_t j = 1; j <= n; j++)
    for (int64_t i = j + 2; i <= n; i++) H(i, j) = 0.0;
}

static void zscal_row(nrt_z *h, int64_t n, int64_t row, int64_t c0, int64_t c1, nrt_z s) {
  for (int64_t c = c0; c <= c1; c++) H(row, c) *= s;
}
static void zscal_col(nrt_z *h, int64_t n, int64_t col, int64_t r0, int64_t r1, nrt_z s) {
  for (int64_t r = r0; r <= r1; r++) H(r, col) *= s;
}

/* Single-shift complex QR (lahqr) on ilo..ihi; w 1-based. */
static int64_t zlahqr(int wantt, nrt_z *h, int64_t n, int64_t ilo, int64_t ihi, nrt_z *w, nrt_z *z) {
  if (n == 0) return 0;
  if (ilo == ihi) {
    w[ilo] = H(ilo, ilo);
    return 0;
  }
  for (int64_t j = ilo; j <= ihi - 3; j++) {
    H(j + 2, j) = 0.0;
    H(j + 3, j) = 0.0;
  }
  if (ilo <= ihi - 2) H(ihi, ihi - 2) = 0.0;
  int64_t jlo = wantt ? 1 : ilo, jhi = wantt ? n : ihi, iloz = ilo, ihiz = ihi;
  /* Make the subdiagonal real. */
  for (int64_t i = ilo + 1; i <= ihi; i++)
    if (cimag(H(i, i - 1)) != 0.0) {
      nrt_z sc = H(i, i - 1) / nrt_z_abs1(H(i, i - 1));
      sc = conj(sc) / cabs(sc);
      H(i, i - 1) = cabs(H(i, i - 1));
      zscal_row(h, n, i, i, jhi, sc);
      zscal_col(h, n, i, jlo, (jhi < i + 1 ? jhi : i + 1), conj(sc));
      if (z) zscal_col(z, n, i, iloz, ihiz, conj(sc));
    }
  int64_t nh = ihi - ilo + 1, nz = ihiz - iloz + 1;
  double smlnum = SAFMIN * ((double)nh / ULP);
  int64_t i1 = 1, i2 = n;
  int64_t itmax = 30 * (nh > 10 ? nh : 10), kdefl = 0;
  int64_t i = ihi;
  (void)nz;
  while (i >= ilo) {
    int64_t l = ilo;
    int converged = 0;
    for (int64_t its = 0; its <= itmax; its++) {
      int64_t k;
      for (k = i; k > l; k--) {
        if (nrt_z_abs1(H(k, k - 1)) <= smlnum) break;
        double tst = nrt_z_abs1(H(k - 1, k - 1)) + nrt_z_abs1(H(k, k));
        if (tst == 0.0) {
          if (k - 2 >= ilo) tst += fabs(creal(H(k - 1, k - 2)));
          if (k + 1 <= ihi) tst += fabs(creal(H(k + 1, k)));
        }
        if (fabs(creal(H(k, k - 1))) <= ULP * tst) {
          double ab = fmax(nrt_z_abs1(H(k, k - 1)), nrt_z_abs1(H(k - 1, k)));
          double ba = fmin(nrt_z_abs1(H(k, k - 1)), nrt_z_abs1(H(k - 1, k)));
          double aa = fmax(nrt_z_abs1(H(k, k)), nrt_z_abs1(H(k - 1, k - 1) - H(k, k)));
          double bb = fmin(nrt_z_abs1(H(k, k)), nrt_z_abs1(H(k - 1, k - 1) - H(k, k)));
          double s = aa + ab;
          if (ba * (ab / s) <= fmax(smlnum, ULP * (bb * (aa / s)))) break;
        }
      }
      l = k;
      if (l > ilo) H(l, l - 1) = 0.0;
      if (l >= i) {
        converged = 1;
        break;
      }
      kdefl++;
      if (!wantt) {
        i1 = l;
        i2 = i;
      }
      nrt_z t;
      if (kdefl % (2 * EIG_KEXSH) == 0) {
        double s = EIG_DAT1 * fabs(creal(H(i, i - 1)));
        t = s + H(i, i);
      } else if (kdefl % EIG_KEXSH == 0) {
        double s = EIG_DAT1 * fabs(creal(H(l + 1, l)));
        t = s + H(l, l);
      } else { /* Wilkinson's shift */
        t = H(i, i);
        nrt_z u = csqrt(H(i - 1, i)) * csqrt(H(i, i - 1));
        double s = nrt_z_abs1(u);
        if (s != 0.0) {
          nrt_z x = 0.5 * (H(i - 1, i - 1) - t);
          double sx = nrt_z_abs1(x);
          s = fmax(s, nrt_z_abs1(x));
          nrt_z xs = x / s, us = u / s;
          nrt_z y = s * csqrt(xs * xs + us * us);
          if (sx > 0.0) {
            nrt_z xn = x / sx;
            if (creal(xn) * creal(y) + cimag(xn) * cimag(y) < 0.0) y = -y;
          }
          t = t - u * (u / (x + y));
        }
      }
      nrt_z v[2];
      int64_t m;
      for (m = i - 1; m >= l + 1; m--) {
        nrt_z h11 = H(m, m), h22 = H(m + 1, m + 1), h11s = h11 - t;
        double h21 = creal(H(m + 1, m));
        double s = nrt_z_abs1(h11s) + fabs(h21);
        h11s /= s;
        h21 /= s;
        v[0] = h11s;
        v[1] = h21;
        double h10 = creal(H(m, m - 1));
        if (fabs(h10) * fabs(h21) <= ULP * (nrt_z_abs1(h11s) * (nrt_z_abs1(h11) + nrt_z_abs1(h22)))) break;
      }
      if (m == l) {
        nrt_z h11 = H(l, l), h11s = h11 - t;
        double h21 = creal(H(l + 1, l));
        double s = nrt_z_abs1(h11s) + fabs(h21);
        v[0] = h11s / s;
        v[1] = h21 / s;
      }
      for (int64_t kk = m; kk <= i - 1; kk++) {
        if (kk > m) {
          v[0] = H(kk, kk - 1);
          v[1] = H(kk + 1, kk - 1);
        }
        nrt_z t1 = zlarfg(2, &v[0], &v[1], 1);
        if (kk > m) {
          H(kk, kk - 1) = v[0];
          H(kk + 1, kk - 1) = 0.0;
        }
        nrt_z v2 = v[1];
        double t2 = creal(t1 * v2);
        for (int64_t j = kk; j <= i2; j++) {
          nrt_z sum = conj(t1) * H(kk, j) + t2 * H(kk + 1, j);
          H(kk, j) -= sum;
          H(kk + 1, j) -= sum * v2;
        }
        int64_t jmax = kk + 2 < i ? kk + 2 : i;
        for (int64_t j = i1; j <= jmax; j++) {
          nrt_z sum = t1 * H(j, kk) + t2 * H(j, kk + 1);
          H(j, kk) -= sum;
          H(j, kk + 1) -= sum * conj(v2);
        }
        if (z)
          for (int64_t j = iloz; j <= ihiz; j++) {
            nrt_z sum = t1 * Z(j, kk) + t2 * Z(j, kk + 1);
            Z(j, kk) -= sum;
            Z(j, kk + 1) -= sum * conj(v2);
          }
        if (kk == m && m > l) {
          /* Started below a negligible H(m, m-1): keep it real. */
          nrt_z temp = 1.0 - t1;
          temp /= cabs(temp);
          H(m + 1, m) *= conj(temp);
          if (m + 2 <= i) H(m + 2, m + 1) *= temp;
          for (int64_t j = m; j <= i; j++)
            if (j != m + 1) {
              if (i2 > j) zscal_row(h, n, j, j + 1, i2, temp);
              zscal_col(h, n, j, i1, j - 1, conj(temp));
              if (z) zscal_col(z, n, j, iloz, ihiz, conj(temp));
            }
        }
      }
      nrt_z temp = H(i, i - 1);
      if (cimag(temp) != 0.0) {
        double rtemp = cabs(temp);
        H(i, i - 1) = rtemp;
        temp /= rtemp;
        if (i2 > i) zscal_row(h, n, i, i + 1, i2, conj(temp));
        zscal_col(h, n, i, i1, i - 1, temp);
        if (z) zscal_col(z, n, i, iloz, ihiz, temp);
      }
    }
    if (!converged) return i;
    w[i] = H(i, i);
    kdefl = 0;
    i = l - 1;
  }
  return 0;
}

#undef H
#undef Z

/* ---- eigenvectors of the Schur form ------------------------------------------------ */

/* Right eigenvectors of the (quasi-)upper-triangular t (complex entries;
 * a real Schur form has real ones and 2x2 blocks where t(j+1, j) != 0),
 * eigenvalue lam[j] for column j, into x (n x n, column j = eigenvector,
 * zero below its eigenvalue's block). For a 2x2 block, column j0 (positive
 * imaginary part) is computed and column j0 + 1 is its conjugate. */
static void schur_vectors(const nrt_z *t, int64_t n, const nrt_z *lam, int real_schur, nrt_z *x) {
  double tnorm = 0.0;
  for (int64_t i = 0; i < n * n; i++) tnorm = fmax(tnorm, nrt_z_abs1(t[i]));
  double smlnum = SAFMIN * ((double)n / ULP);
#define T(i, j) t[(i) * n + (j)]
#define X(i, j) x[(i) * n + (j)]
  for (int64_t i = 0; i < n * n; i++) x[i] = 0.0;
  for (int64_t ki = n - 1; ki >= 0; ki--) {
    int pair = real_schur && ki > 0 && T(ki, ki - 1) != 0.0;
    int64_t col = pair ? ki - 1 : ki, top;
    nrt_z lambda = lam[col];
    double smin = fmax(ULP * nrt_z_abs1(lambda), smlnum);
    if (pair) { /* the block's own eigenvector, as trevc starts it */
      double t12 = creal(T(ki - 1, ki)), t21 = creal(T(ki, ki - 1)), wi = fabs(cimag(lambda));
      if (fabs(t12) >= fabs(t21)) {
        X(ki - 1, col) = 1.0;
        X(ki, col) = CMPLX(0.0, wi / t12);
      } else {
        X(ki - 1, col) = -wi / t21;
        X(ki, col) = CMPLX(0.0, 1.0);
      }
      top = ki - 2;
    } else {
      X(ki, col) = 1.0;
      top = ki - 1;
    }
    int64_t last = pair ? ki : ki; /* entries col..ki are set */
    for (int64_t j = top; j >= 0; j--) {
      int block = real_schur && j > 0 && T(j, j - 1) != 0.0;
      if (!block) {
        nrt_z r = 0.0;
        for (int64_t k = j + 1; k <= last; k++) r += T(j, k) * X(k, col);
        nrt_z d = T(j, j) - lambda;
        if (nrt_z_abs1(d) < smin) d = smin;
        X(j, col) = -r / d;
      } else { /* rows j-1, j together */
        nrt_z r1 = 0.0, r2 = 0.0;
        for (int64_t k = j + 1; k <= last; k++) {
          r1 += T(j - 1, k) * X(k, col);
          r2 += T(j, k) * X(k, col);
        }
        nrt_z a = T(j - 1, j - 1) - lambda, b = T(j - 1, j), c = T(j, j - 1), d = T(j, j) - lambda;
        nrt_z det = a * d - b * c;
        if (nrt_z_abs1(det) < smin * smin) det = smin * smin;
        X(j - 1, col) = (-r1 * d + b * r2) / det;
        X(j, col) = (-a * r2 + c * r1) / det;
        j--;
      }
    }
    (void)tnorm;
    if (pair) {
      for (int64_t i = 0; i <= ki; i++) X(i, ki) = conj(X(i, col));
      ki--;
    }
  }
#undef T
#undef X
}

/* ---- the op ------------------------------------------------------------------------ */

static void eig_one(const nrt_launch *l, int64_t b, double *w) {
  int64_t n = l->sizes[1];
  int want_v = l->noutputs == 2;
  nrt_dmat W = nrt_dmat_of(l, 0), A = nrt_dmat_of(l, want_v ? 2 : 1);
  int cplx = nrt_dtype_is_complex(A.dt);
  /* Work: schur (complex n x n), zq (complex n x n), x (complex n x n),
   * lam (complex n + 1), tau (complex n + 1), scale (n + 1), and for the
   * real path wr, wi (n + 1 each) inside the real views of schur/zq. */
  nrt_z *schur = (nrt_z *)w, *zq = schur + n * n, *x = zq + n * n, *lam = x + n * n, *tau = lam + n + 1;
  double *scale = (double *)(tau + n + 1), *wr = scale + n + 1, *wi = wr + n + 1;
  int64_t ilo = 1, ihi = n, bad = 0;
  if (!cplx) {
    double *h = (double *)schur, *z = want_v ? (double *)zq : NULL;
    nrt_dmat_load(&A, b, n, n, h);
    mat m = {h, NULL, n};
    gebal(&m, scale, &ilo, &ihi);
    dgehrd(h, n, ilo, ihi, (double *)tau, z);
    for (int64_t i = 1; i < ilo; i++) {
      wr[i] = h[(i - 1) * n + i - 1];
      wi[i] = 0.0;
    }
    for (int64_t i = ihi + 1; i <= n; i++) {
      wr[i] = h[(i - 1) * n + i - 1];
      wi[i] = 0.0;
    }
    bad = dlahqr(want_v, h, n, ilo, ihi, wr, wi, z);
    for (int64_t i = 0; i < n; i++) lam[i] = CMPLX(wr[i + 1], wi[i + 1]);
    if (want_v && !bad) {
      /* Widen the real Schur form and vectors to complex in place, from the
       * back so that nothing is overwritten before it is read. */
      for (int64_t i = n * n - 1; i >= 0; i--) schur[i] = h[i];
      for (int64_t i = n * n - 1; i >= 0; i--) zq[i] = z[i];
    }
  } else {
    nrt_z *h = schur, *z = want_v ? zq : NULL;
    nrt_zmat_load(&A, b, n, n, h);
    mat m = {NULL, h, n};
    gebal(&m, scale, &ilo, &ihi);
    zgehrd(h, n, ilo, ihi, tau, z);
    nrt_z *w1 = lam - 1; /* 1-based view */
    for (int64_t i = 1; i < ilo; i++) w1[i] = h[(i - 1) * n + i - 1];
    for (int64_t i = ihi + 1; i <= n; i++) w1[i] = h[(i - 1) * n + i - 1];
    bad = zlahqr(want_v, h, n, ilo, ihi, w1, z);
  }
  if (bad) { /* no convergence (or NaN): LAPACK reports info > 0, the glue raises on NaN */
    for (int64_t j = 0; j < n; j++) nrt_zvec_st(&W, b, j, CMPLX(NAN, NAN));
    if (want_v) {
      nrt_dmat V = nrt_dmat_of(l, 1);
      for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) nrt_zmat_st(&V, b, i, j, CMPLX(NAN, NAN));
    }
    return;
  }
  for (int64_t j = 0; j < n; j++) nrt_zvec_st(&W, b, j, lam[j]);
  if (!want_v) return;
  schur_vectors(schur, n, lam, !cplx, x);
  /* V = Z X, reusing schur as the product. */
  nrt_z *v = schur;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) {
      nrt_z s = 0.0;
      for (int64_t k = 0; k <= j + 1 && k < n; k++) s += zq[i * n + k] * x[k * n + j];
      v[i * n + j] = s;
    }
  gebak(v, n, scale, ilo, ihi);
  for (int64_t j = 0; j < n; j++) {
    if (!cplx && cimag(lam[j]) < 0.0 && j > 0) { /* a real input's pair: the conjugate of the vector before */
      for (int64_t i = 0; i < n; i++) v[i * n + j] = conj(v[i * n + j - 1]);
      continue;
    }
    double nrm = 0.0;
    for (int64_t i = 0; i < n; i++) nrm = hypot(nrm, cabs(v[i * n + j]));
    if (nrm > 0.0)
      for (int64_t i = 0; i < n; i++) v[i * n + j] /= nrm;
    int complex_vec = cplx || cimag(lam[j]) != 0.0;
    if (!complex_vec) continue;
    int64_t k = 0;
    double best = -1.0;
    for (int64_t i = 0; i < n; i++)
      if (nrt_z_abs2(v[i * n + j]) > best) {
        best = nrt_z_abs2(v[i * n + j]);
        k = i;
      }
    nrt_z vk = v[k * n + j];
    double mag = cabs(vk);
    if (mag == 0.0) continue;
    /* Complex input: v_k becomes |v_k| (zgeev). A real input's pair is
     * rotated by LAPACK's plane rotation of (f, g) = (re v_k, im v_k),
     * whose r is f when g = 0, g when f = 0, and otherwise sqrt(f^2 + g^2)
     * with the sign of f only when |f| > |g| (the convention of the LAPACK
     * the CPU's MKL follows, checked against its output); v_k becomes r.
     * The partner (negative imaginary part) is set to the conjugate above. */
    double f = creal(vk), g = cimag(vk), r;
    if (cplx) r = mag;
    else if (g == 0.0) r = f;
    else if (f == 0.0) r = g;
    else r = fabs(f) > fabs(g) && f < 0.0 ? -mag : mag;
    if (r == 0.0) continue;
    nrt_z rot = conj(vk) / r;
    for (int64_t i = 0; i < n; i++) v[i * n + j] *= rot;
    v[k * n + j] = r;
  }
  nrt_dmat V = nrt_dmat_of(l, 1);
  nrt_zmat_store(&V, b, n, n, v);
}

nrt_status nrt_decomp_eig(const nrt_launch *l) {
  if ((l->noutputs != 1 && l->noutputs != 2) || l->ndim != 2)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "EIG: expected 1 or 2 outputs and sizes {batch, n}");
  int64_t n = l->sizes[1];
  size_t work = (size_t)(6 * n * n + 4 * (n + 1) + 3 * (n + 1));
  return nrt_decomp_for_batches(l, "EIG", l->sizes[0], work, eig_one);
}
