/* The precision-generic half of grad.c, included once per data precision
 * with S (the data's type: float or double), SFX (the name suffix) and
 * S_LOG, S_POW, S_FLOOR, S_TAN (its libm functions) defined. PyTorch
 * computes these steps in the data's type (its scalar_t), widening to
 * double (accscalar_t) only where noted; mirroring that keeps float32
 * results within a rounding or two of the CPU's. No include guard: it is
 * meant to be included twice. */
#define DG_CAT2(a, b) a##b
#define DG_CAT(a, b) DG_CAT2(a, b)
#define DG(name) DG_CAT(name, SFX)

/* Cephes' digamma as PyTorch writes it: reflection for x < 0, recurrence
 * up to 10, asymptotic series; the sum and the series in double, the
 * argument's steps in S. */
S DG(nrt_dist_digamma_)(S x) {
  const double psi_10 = 2.25175258906672110764;
  if (x == 0) return INFINITY;
  double extra = 0;
  int is_integer = x == S_FLOOR(x);
  if (x < 0) {
    if (is_integer) return INFINITY;
    const S pi = (S)3.14159265358979323846;
    extra = -pi / S_TAN(pi * x);
    x = 1 - x;
  }
  double result = 0;
  while (x < 10) {
    result -= 1 / x;
    x += 1;
  }
  if (x == 10) return (S)(result + psi_10 + extra);
  double y = 0;
  if (x < (double)1.0e17f) {
    const double z = 1.0 / (x * x);
    y = z * digamma_series(z);
  }
  return (S)(result + S_LOG(x) - ((S)0.5f / x) - y + extra);
}

/* Beta(alpha, beta)'s gradient in alpha near x = 0: a Taylor series. */
static S DG(beta_grad_alpha_small_)(S x, S alpha, S beta) {
  const S factor = DG(nrt_dist_digamma_)(alpha) - DG(nrt_dist_digamma_)(alpha + beta) - S_LOG(x);
  S numer = 1;
  S series = numer / alpha * (factor + 1 / alpha);
  for (int i = 1; i <= 10; ++i) {
    const S si = (S)i;
    numer *= (si - beta) * x / si;
    const S denom = alpha + si;
    series += numer / denom * (factor + 1 / denom);
  }
  const S result = x * S_POW(1 - x, -beta) * series;
  return result != result ? (S)0 : result;
}

/* ... and in beta near x = 0. */
static S DG(beta_grad_beta_small_)(S x, S alpha, S beta) {
  const S factor = DG(nrt_dist_digamma_)(alpha + beta) - DG(nrt_dist_digamma_)(beta);
  S numer = 1, betas = 1, dbetas = 0, series = factor / alpha;
  for (int i = 1; i <= 8; ++i) {
    const S si = (S)i;
    numer *= -x / si;
    dbetas = dbetas * (beta - si) + betas;
    betas = betas * (beta - si);
    series += numer / (alpha + si) * (dbetas + factor * betas);
  }
  const S result = -S_POW(1 - x, 1 - beta) * series;
  return result != result ? (S)0 : result;
}

/* -(dF/dalpha) / f / (1 - x) for x ~ Beta(alpha, total - alpha): the
 * small-x and small-(1 - x) series, the saddle point for large alpha and
 * beta (double), else a rational correction (double) of the analytic
 * approximation x (psi(total) - psi(alpha)) / beta, whose digammas take
 * the data's precision. */
S DG(nrt_dist_dirichlet_grad_)(S x, S alpha, S total) {
  const double xd = x, alphad = alpha, totald = total;
  const S beta = total - alpha;
  const double betad = totald - alphad;
  const S boundary = total * x * (1 - x);
  if (x <= 0.5f && boundary < 2.5f) return DG(beta_grad_alpha_small_)(x, alpha, beta);
  if (x >= 0.5f && boundary < 0.75f) return -DG(beta_grad_beta_small_)(1 - x, beta, alpha);
  if (alpha > 6 && beta > 6) return (S)beta_grad_alpha_mid(xd, alphad, betad);
  const double u = log(xd), a = log(alphad) - u, b = log(totald) - a;
  const double pow_u[3] = {1, u, u * u}, pow_a[3] = {1, a, a * a};
  double p = 0.0, q = 0.0;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      const double ua = pow_u[i] * pow_a[j];
      const double *cp = dirichlet_coef[0][i][j], *cq = dirichlet_coef[1][i][j];
      p += ua * (cp[0] + b * (cp[1] + b * (cp[2] + b * cp[3])));
      q += ua * (cq[0] + b * (cq[1] + b * (cq[2] + b * cq[3])));
    }
  const S dpsi = DG(nrt_dist_digamma_)((S)totald) - DG(nrt_dist_digamma_)((S)alphad);
  const double approx = xd * dpsi / betad;
  return (S)(p / q * approx);
}

#undef DG
#undef DG_CAT
#undef DG_CAT2
