/* Events: a recorded event is a (stream, ticket) pair; it has completed
 * once the stream's completed counter reaches the ticket. Recording a
 * plain event therefore enqueues nothing. A timing event enqueues a marker
 * task that stamps CLOCK_MONOTONIC when the stream reaches it; the marker
 * runs even on a stream holding a sticky error, so elapsed times stay
 * defined.
 *
 * A pending marker holds a reference to its event, so destroying an event
 * whose marker has not run yet is safe (as cudaEventDestroy allows). A
 * generation number lets a re-record supersede a marker still in flight. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "exec/exec.h"
#include "nrt/profiler.h"

struct nrt_event {
  pthread_mutex_t mu;
  unsigned flags;
  _Atomic int refs;
  nrt_stream *stream; /* NULL until recorded */
  uint64_t target;
  uint64_t generation; /* bumped by every record */
  bool stamped;
  uint64_t stamp_ns;
};

static void event_unref(nrt_event *e) {
  if (atomic_fetch_sub_explicit(&e->refs, 1, memory_order_acq_rel) == 1) {
    pthread_mutex_destroy(&e->mu);
    free(e);
  }
}

nrt_status nrt_event_create(unsigned flags, nrt_event **out_event) {
  if (!out_event || (flags & ~(unsigned)NRT_EVENT_TIMING)) {
    nrt_set_error_message("nrt_event_create: invalid flags 0x%x or NULL out_event", flags);
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  nrt_event *e = calloc(1, sizeof *e);
  if (!e) {
    nrt_set_error_message("nrt_event_create: host out of memory");
    return NRT_ERROR_OUT_OF_MEMORY;
  }
  pthread_mutex_init(&e->mu, NULL);
  e->flags = flags;
  atomic_init(&e->refs, 1);
  *out_event = e;
  return NRT_SUCCESS;
}

nrt_status nrt_event_destroy(nrt_event *event) {
  if (!event) {
    nrt_set_error_message("nrt_event_destroy: event is NULL");
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  event_unref(event);
  return NRT_SUCCESS;
}

/* Event markers show in the profiler as synchronisation rows. */
static const nrt_task_cost sync_cost = {NRT_ACTIVITY_SYNC, -1, 0, 0};

typedef struct marker_arg {
  nrt_event *event;
  uint64_t generation;
} marker_arg;

static nrt_status run_marker(void *p) {
  marker_arg *m = p;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  pthread_mutex_lock(&m->event->mu);
  if (m->event->generation == m->generation) {
    m->event->stamp_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    m->event->stamped = true;
  }
  pthread_mutex_unlock(&m->event->mu);
  return NRT_SUCCESS;
}

static void release_marker(void *p) { event_unref(((marker_arg *)p)->event); }

nrt_status nrt_event_record(nrt_event *event, nrt_stream *stream) {
  if (!event || !stream) {
    nrt_set_error_message("nrt_event_record: %s is NULL", event ? "stream" : "event");
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  pthread_mutex_lock(&event->mu);
  uint64_t gen = ++event->generation;
  event->stamped = false;
  pthread_mutex_unlock(&event->mu);

  uint64_t ticket;
  if (event->flags & NRT_EVENT_TIMING) {
    marker_arg m = {event, gen};
    atomic_fetch_add_explicit(&event->refs, 1, memory_order_relaxed);
    nrt_status st = nrt_stream_enqueue_ex(stream, "event_record", run_marker, &m, sizeof m,
                                          release_marker, NRT_TASK_ALWAYS_RUN, &sync_cost, &ticket);
    if (st != NRT_SUCCESS) {
      event_unref(event);
      return st;
    }
  } else {
    ticket = nrt_stream_enqueued(stream);
  }

  pthread_mutex_lock(&event->mu);
  if (event->generation == gen) { /* a concurrent later record wins */
    event->stream = stream;
    event->target = ticket;
  }
  pthread_mutex_unlock(&event->mu);
  return NRT_SUCCESS;
}

static void snapshot(nrt_event *e, nrt_stream **out_stream, uint64_t *out_target) {
  pthread_mutex_lock(&e->mu);
  *out_stream = e->stream;
  *out_target = e->target;
  pthread_mutex_unlock(&e->mu);
}

nrt_status nrt_event_query(nrt_event *event) {
  if (!event) return NRT_ERROR_INVALID_ARGUMENT;
  nrt_stream *s;
  uint64_t target;
  snapshot(event, &s, &target);
  if (!s || nrt_stream_completed(s) >= target) return NRT_SUCCESS;
  return NRT_ERROR_NOT_READY;
}

nrt_status nrt_event_synchronize(nrt_event *event) {
  if (!event) {
    nrt_set_error_message("nrt_event_synchronize: event is NULL");
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  nrt_stream *s;
  uint64_t target;
  snapshot(event, &s, &target);
  if (!s) return NRT_SUCCESS;
  return nrt_stream_wait_until(s, target);
}

typedef struct wait_arg {
  nrt_stream *other;
  uint64_t target;
} wait_arg;

static nrt_status run_wait(void *p) {
  wait_arg *w = p;
  nrt_stream_wait_quiet(w->other, w->target);
  /* Work that depends on a failed producer must not run on its garbage:
   * the producer's failure poisons the waiting stream too (it also stays
   * sticky on the producer's own stream). */
  char msg[NRT_ERROR_MESSAGE_MAX];
  nrt_status st = nrt_stream_peek_error(w->other, w->target, msg, sizeof msg);
  if (st != NRT_SUCCESS)
    nrt_set_error_message("waited-for neuron:%d stream %d failed: %s", nrt_stream_device(w->other),
                          nrt_stream_index(w->other), msg);
  return st;
}

nrt_status nrt_stream_wait_event(nrt_stream *stream, nrt_event *event) {
  if (!stream || !event) {
    nrt_set_error_message("nrt_stream_wait_event: %s is NULL", stream ? "event" : "stream");
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  wait_arg w;
  snapshot(event, &w.other, &w.target);
  if (!w.other || w.other == stream) return NRT_SUCCESS; /* a stream is in order already */
  if (nrt_stream_completed(w.other) >= w.target &&
      nrt_stream_peek_error(w.other, w.target, NULL, 0) == NRT_SUCCESS)
    return NRT_SUCCESS;
  return nrt_stream_enqueue_ex(stream, "event_wait", run_wait, &w, sizeof w, NULL, 0, &sync_cost,
                               NULL);
}

nrt_status nrt_event_elapsed_time(nrt_event *start, nrt_event *end, float *out_ms) {
  if (!start || !end || !out_ms) {
    nrt_set_error_message("nrt_event_elapsed_time: NULL argument");
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  if (!(start->flags & NRT_EVENT_TIMING) || !(end->flags & NRT_EVENT_TIMING)) {
    nrt_set_error_message("nrt_event_elapsed_time: both events need NRT_EVENT_TIMING");
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  nrt_event *ev[2] = {start, end};
  uint64_t ns[2];
  for (int i = 0; i < 2; i++) {
    nrt_stream *s;
    uint64_t target;
    pthread_mutex_lock(&ev[i]->mu);
    s = ev[i]->stream;
    target = ev[i]->target;
    uint64_t gen = ev[i]->generation;
    pthread_mutex_unlock(&ev[i]->mu);
    if (!s) {
      nrt_set_error_message("nrt_event_elapsed_time: the %s event was never recorded",
                            i ? "end" : "start");
      return NRT_ERROR_INVALID_ARGUMENT;
    }
    /* Completion first: the marker stamps before the stream's counter
     * advances, so a completed marker has always stamped. */
    if (nrt_stream_completed(s) < target) return NRT_ERROR_NOT_READY;
    pthread_mutex_lock(&ev[i]->mu);
    bool same = ev[i]->generation == gen;
    bool stamped = ev[i]->stamped;
    ns[i] = ev[i]->stamp_ns;
    pthread_mutex_unlock(&ev[i]->mu);
    if (!same) return NRT_ERROR_NOT_READY; /* re-recorded meanwhile */
    if (!stamped) {
      /* Completed without a stamp: a fork dropped the marker. */
      nrt_set_error_message("nrt_event_elapsed_time: the %s event completed in another process",
                            i ? "end" : "start");
      return NRT_ERROR_INVALID_ARGUMENT;
    }
  }
  *out_ms = (float)(((double)ns[1] - (double)ns[0]) / 1e6);
  return NRT_SUCCESS;
}

int nrt_event_device(const nrt_event *event) {
  if (!event) return -1;
  nrt_event *e = (nrt_event *)event;
  pthread_mutex_lock(&e->mu);
  int device = e->stream ? nrt_stream_device(e->stream) : -1;
  pthread_mutex_unlock(&e->mu);
  return device;
}
