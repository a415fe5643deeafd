/* The logaddexp step and the row scan of complex values (kernels/common/cx.h). */
#include "kernels/common/cx.h"

#include "kernels/common/convert.h"

nrt_cx nrt_cx_log1p(nrt_cx z) {
  nrt_cx u = nrt_cx_make(z.re + 1.0, z.im);
  if (u.re == 1.0 && u.im == 0.0) return z;
  nrt_cx log_u = nrt_cx_from_c(clog(nrt_cx_to_c(u)));
  nrt_cx um1 = nrt_cx_make(u.re - 1.0, u.im);
  if (um1.re == z.re && um1.im == z.im) return log_u;
  return nrt_cx_mul(log_u, nrt_cx_div(z, um1));
}

nrt_cx nrt_cx_log_add_exp(nrt_cx x, nrt_cx y) {
  nrt_cx mn, mx;
  /* a NaN operand is both ends, y's first (the running value of a scan) */
  if (nrt_cx_isnan(y)) mn = mx = y;
  else if (nrt_cx_isnan(x)) mn = mx = x;
  else if (x.re < y.re) mn = x, mx = y;
  else mn = y, mx = x;
  if (nrt_cx_isnan(mn)) return nrt_cx_make(NAN, NAN);
  if (!isfinite(mn.re) && mn.re == mx.re) {
    /* both -inf: the sum is 0 with no defined angle; the CPU keeps min.
       Both +inf: min - max would be NaN, so the sum is formed directly. */
    if (mn.re < 0) return mn;
    return nrt_cx_from_c(clog(cexp(nrt_cx_to_c(mn)) + cexp(nrt_cx_to_c(mx))));
  }
  /* parts subtract and add separately (c10's operators), so an infinite
     imaginary part meets no 0 * inf */
  nrt_cx d = nrt_cx_from_c(cexp(nrt_cx_to_c(nrt_cx_sub(mn, mx))));
  return nrt_cx_add(nrt_cx_log1p(d), mx);
}

void nrt_cx_scan_row(char *dst, int64_t dst_stride, nrt_dtype out_dt, const char *src, int64_t src_stride,
                     nrt_dtype in_dt, int64_t n, nrt_cx init, nrt_cx_step_fn step, bool reference, double *scratch) {
  int64_t in_half = (int64_t)nrt_dtype_size(in_dt), out_half = (int64_t)nrt_dtype_size(out_dt);
  nrt_cx acc = init;
  if (!reference) {
    double *re = scratch, *im = re + n;
    nrt_load_f64(re, src, src_stride, in_dt, n);
    nrt_load_f64(im, src + in_half, src_stride, in_dt, n);
    for (int64_t i = 0; i < n; i++) {
      acc = step(acc, nrt_cx_make(re[i], im[i]));
      re[i] = acc.re;
      im[i] = acc.im;
    }
    nrt_store_f64(dst, dst_stride, out_dt, re, n);
    nrt_store_f64(dst + out_half, dst_stride, out_dt, im, n);
    return;
  }
  for (int64_t i = 0; i < n; i++) {
    const char *x = src + i * src_stride;
    char *y = dst + i * dst_stride;
    acc = step(acc, nrt_cx_make(nrt_ref_load_f64(x, in_dt), nrt_ref_load_f64(x + in_half, in_dt)));
    nrt_ref_store_f64(y, out_dt, acc.re);
    nrt_ref_store_f64(y + out_half, out_dt, acc.im);
  }
}
