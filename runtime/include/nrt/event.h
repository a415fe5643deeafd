/* Events: markers recorded on a stream. Semantics follow CUDA events:
 * query/synchronize on an event that was never recorded succeed at once;
 * a stream waiting on an event waits for the work captured at the time of
 * the wait call (later re-records do not affect an earlier wait). */
#ifndef NRT_EVENT_H
#define NRT_EVENT_H

#include "nrt/status.h"
#include "nrt/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nrt_event nrt_event;

enum { NRT_EVENT_DEFAULT = 0, NRT_EVENT_TIMING = 1 };

nrt_status nrt_event_create(unsigned flags, nrt_event **out_event);
nrt_status nrt_event_destroy(nrt_event *event);
nrt_status nrt_event_record(nrt_event *event, nrt_stream *stream);
/* Makes future work on `stream` wait until `event` has completed. */
nrt_status nrt_stream_wait_event(nrt_stream *stream, nrt_event *event);
/* NRT_SUCCESS if completed (or never recorded), NRT_ERROR_NOT_READY otherwise. */
nrt_status nrt_event_query(nrt_event *event);
/* Waits for the event; returns (and clears) its stream's sticky error. */
nrt_status nrt_event_synchronize(nrt_event *event);
/* Milliseconds between two completed timing events. INVALID_ARGUMENT if
 * either lacks NRT_EVENT_TIMING or was never recorded; NOT_READY if pending. */
nrt_status nrt_event_elapsed_time(nrt_event *start, nrt_event *end, float *out_ms);
/* Device of the stream it was last recorded on, -1 if never recorded. */
int nrt_event_device(const nrt_event *event);

#ifdef __cplusplus
}
#endif
#endif
