/* The one error idiom of the kernels. */
#ifndef NRT_KERNELS_COMMON_ERROR_H
#define NRT_KERNELS_COMMON_ERROR_H

#include <stdarg.h>
#include <stdio.h>
#include "core/core.h"

/* ---- kernel error exits --------------------------------------------------
 * Sets the calling thread's error message (printf-style; it surfaces as
 * the RuntimeError at the next sync) and returns st, so that a kernel's
 * checks read `if (bad) return nrt_kernel_fail(NRT_ERROR_..., "...", ...);`. */
static inline nrt_status nrt_kernel_fail(nrt_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline nrt_status nrt_kernel_fail(nrt_status st, const char *fmt, ...) {
  char msg[NRT_ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  nrt_set_error_message("%s", msg);
  return st;
}

#endif
