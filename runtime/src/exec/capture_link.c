/* The link between a stream and the graph capture recording it (see
 * exec.h): per device at most one capture, its stream and its observer.
 * `active` is the fast-path flag; everything else is read under `mu`. */
#include <pthread.h>
#include <stdatomic.h>

#include "exec/exec.h"

typedef struct capture_link {
  pthread_mutex_t mu;
  atomic_bool active;
  nrt_stream *stream;
  void *capture;
  const nrt_capture_observer *observer;
} capture_link;

static capture_link links[NRT_MAX_DEVICES];
static pthread_once_t links_once = PTHREAD_ONCE_INIT;

static void links_init(void) {
  for (int d = 0; d < NRT_MAX_DEVICES; d++) pthread_mutex_init(&links[d].mu, NULL);
}

bool nrt_capture_active(int device) {
  return device >= 0 && device < NRT_MAX_DEVICES &&
         atomic_load_explicit(&links[device].active, memory_order_relaxed);
}

nrt_status nrt_capture_attach(nrt_stream *stream, void *capture, const nrt_capture_observer *observer) {
  pthread_once(&links_once, links_init);
  int device = nrt_stream_device(stream);
  if (device < 0 || device >= NRT_MAX_DEVICES) return NRT_ERROR_INVALID_ARGUMENT;
  capture_link *k = &links[device];
  pthread_mutex_lock(&k->mu);
  if (k->capture) {
    int busy = nrt_stream_index(k->stream);
    pthread_mutex_unlock(&k->mu);
    nrt_set_error_message("nrt_capture_begin: neuron:%d stream %d is already capturing a graph "
                          "(one capture per device at a time)",
                          device, busy);
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  k->stream = stream;
  k->capture = capture;
  k->observer = observer;
  atomic_store_explicit(&k->active, true, memory_order_release);
  pthread_mutex_unlock(&k->mu);
  return NRT_SUCCESS;
}

void nrt_capture_detach(nrt_stream *stream) {
  pthread_once(&links_once, links_init);
  int device = nrt_stream_device(stream);
  if (device < 0 || device >= NRT_MAX_DEVICES) return;
  capture_link *k = &links[device];
  pthread_mutex_lock(&k->mu);
  if (k->stream == stream) {
    atomic_store_explicit(&k->active, false, memory_order_relaxed);
    k->stream = NULL;
    k->capture = NULL;
    k->observer = NULL;
  }
  pthread_mutex_unlock(&k->mu);
}

/* Locks the device's link if a capture is attached; NULL (nothing locked)
 * otherwise. */
static capture_link *lock_link(int device) {
  if (!nrt_capture_active(device)) return NULL;
  capture_link *k = &links[device];
  pthread_mutex_lock(&k->mu);
  if (k->capture) return k;
  pthread_mutex_unlock(&k->mu);
  return NULL;
}

nrt_status nrt_capture_notify_launch(nrt_stream *stream, const nrt_launch *launch) {
  capture_link *k = lock_link(nrt_stream_device(stream));
  if (!k) return NRT_SUCCESS;
  nrt_status st = k->observer->launch(k->capture, k->stream == stream, launch);
  pthread_mutex_unlock(&k->mu);
  return st;
}

nrt_status nrt_capture_notify_sync(nrt_stream *stream, const char *fn) {
  capture_link *k = lock_link(nrt_stream_device(stream));
  if (!k) return NRT_SUCCESS;
  nrt_status st = k->stream == stream ? k->observer->sync(k->capture, fn) : NRT_SUCCESS;
  pthread_mutex_unlock(&k->mu);
  return st;
}

void nrt_capture_notify_malloc(nrt_stream *stream, void *ptr, size_t size) {
  capture_link *k = lock_link(nrt_stream_device(stream));
  if (!k) return;
  if (k->stream == stream) k->observer->malloc_done(k->capture, ptr, size);
  pthread_mutex_unlock(&k->mu);
}

void nrt_capture_notify_free(int device, void *ptr) {
  capture_link *k = lock_link(device);
  if (!k) return;
  k->observer->free_done(k->capture, ptr);
  pthread_mutex_unlock(&k->mu);
}

nrt_status nrt_capture_notify_memcpy(nrt_stream *stream, void *dst, const void *src, size_t bytes,
                                     int kind) {
  capture_link *k = lock_link(nrt_stream_device(stream));
  if (!k) return NRT_SUCCESS;
  nrt_status st = k->observer->memcpy_(k->capture, k->stream == stream, dst, src, bytes, kind);
  pthread_mutex_unlock(&k->mu);
  return st;
}
