/* Status names and strings, and the per-thread detail message. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"

static const char *const status_names[] = {
    "NRT_SUCCESS",
    "NRT_ERROR_INVALID_ARGUMENT",
    "NRT_ERROR_INVALID_DEVICE",
    "NRT_ERROR_OUT_OF_MEMORY",
    "NRT_ERROR_NOT_READY",
    "NRT_ERROR_UNSUPPORTED",
    "NRT_ERROR_KERNEL_FAILED",
    "NRT_ERROR_INTERNAL",
    "NRT_ERROR_TIMEOUT",
    "NRT_ERROR_PEER_FAILED",
    "NRT_ERROR_OUT_OF_RANGE",
};
_Static_assert(sizeof(status_names) / sizeof(status_names[0]) == NRT_STATUS_COUNT,
               "status_names must list every nrt_status");

static const char *const status_strings[] = {
    "success",
    "invalid argument",
    "invalid device",
    "out of device memory",
    "work still pending",
    "operation not supported",
    "kernel failed",
    "internal runtime error",
    "timed out",
    "a peer process failed",
    "index out of range",
};
_Static_assert(sizeof(status_strings) / sizeof(status_strings[0]) == NRT_STATUS_COUNT,
               "status_strings must list every nrt_status");

const char *nrt_status_name(nrt_status status) {
  if ((unsigned)status >= NRT_STATUS_COUNT) return "NRT_ERROR_UNKNOWN";
  return status_names[status];
}

const char *nrt_status_string(nrt_status status) {
  if ((unsigned)status >= NRT_STATUS_COUNT) return "unknown status";
  return status_strings[status];
}

/* Thread-local so concurrent callers (Python threads, stream workers) never
 * see each other's details; sized for an OOM sentence or a kernel name plus
 * a nested detail. */
static _Thread_local char tls_error_message[NRT_ERROR_MESSAGE_MAX];

const char *nrt_last_error_message(void) { return tls_error_message; }

void nrt_set_error_message(const char *fmt, ...) {
  /* Format into a scratch buffer first: callers may pass the current
   * message as an argument (e.g. to prefix it). */
  char scratch[NRT_ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(scratch, sizeof scratch, fmt, ap);
  va_end(ap);
  memcpy(tls_error_message, scratch, sizeof scratch);
}

void nrt_clear_error_message(void) { tls_error_message[0] = '\0'; }
