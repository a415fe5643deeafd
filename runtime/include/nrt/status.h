/* Status codes returned by every fallible nrt_ call.
 *
 * Errors raised inside asynchronous work are "sticky" on the stream that ran
 * them: the next synchronising call on that stream (or the device) returns
 * the status, and nrt_last_error_message() names the kernel that failed. */
#ifndef NRT_STATUS_H
#define NRT_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum nrt_status {
  NRT_SUCCESS = 0,
  NRT_ERROR_INVALID_ARGUMENT,
  NRT_ERROR_INVALID_DEVICE,
  NRT_ERROR_OUT_OF_MEMORY,
  NRT_ERROR_NOT_READY,      /* query: work still pending; not a failure */
  NRT_ERROR_UNSUPPORTED,    /* op/dtype combination has no kernel */
  NRT_ERROR_KERNEL_FAILED,  /* a kernel reported failure during execution */
  NRT_ERROR_INTERNAL,
  NRT_ERROR_TIMEOUT,        /* a wait ran out of time (a collective a peer never joined) */
  NRT_ERROR_PEER_FAILED,    /* another process of a communicator died or gave up */
  NRT_ERROR_OUT_OF_RANGE,   /* a kernel read an index or class target outside its dim: PyTorch's
                               IndexError, where a malformed launch is INVALID_ARGUMENT */
  NRT_STATUS_COUNT
} nrt_status;

/* Short identifier, e.g. "NRT_ERROR_OUT_OF_MEMORY". Never NULL. */
const char *nrt_status_name(nrt_status status);
/* Human sentence, e.g. "out of device memory". Never NULL. */
const char *nrt_status_string(nrt_status status);

/* Detail for the last failing nrt_ call on this thread (figures for OOM,
 * the kernel name for async failures). Empty string if none. The pointer
 * stays valid until the next nrt_ call on this thread. */
const char *nrt_last_error_message(void);

/* Internal helper used by the runtime to set the thread's detail message. */
void nrt_set_error_message(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

#ifdef __cplusplus
}
#endif
#endif
