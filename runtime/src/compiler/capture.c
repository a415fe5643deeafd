/* Graph capture (nrt/capture.h): the observer exec/capture_link.c calls
 * for launches, synchronising calls, allocations, frees and copies, and
 * the graph it builds.
 *
 * Pointer resolution: the capture keeps the buffers that are live right
 * now (declared inputs, allocations made during the capture and not yet
 * freed), each as [start, end). An operand pointer resolves to the live
 * buffer containing it; since the caching allocator never hands out live
 * memory twice, at most one allocation contains a pointer at a time, and
 * an address reused after a free resolves to the new allocation instance.
 *
 * Locking: observer calls arrive under the device's capture link lock
 * (any thread: frees come from stream workers too); the API calls come
 * from the capturing thread. Both take the capture's own mutex. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler.h"
#include "exec/exec.h"

typedef struct live_buffer {
  int id;
  const char *start, *end;
} live_buffer;

struct nrt_capture {
  pthread_mutex_t mu;
  nrt_stream *stream;
  nrt_graph *graph;
  char *location;
  nrt_status failure;
  char message[NRT_ERROR_MESSAGE_MAX];
  live_buffer *live;
  int nlive, cap_live;
};

static const char *where(const nrt_capture *c) { return c->location ? c->location : "(no source location set)"; }

/* Records the first failure; later events leave it in place. Returns the
 * status with the thread's message set, for the offending call. */
static nrt_status capture_fail(nrt_capture *c, nrt_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static nrt_status capture_fail(nrt_capture *c, nrt_status st, const char *fmt, ...) {
  char detail[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  char msg[NRT_ERROR_MESSAGE_MAX];
  snprintf(msg, sizeof msg, "graph capture on neuron:%d stream %d failed at %s: %s",
           nrt_stream_device(c->stream), nrt_stream_index(c->stream), where(c), detail);
  if (c->failure == NRT_SUCCESS) {
    c->failure = st;
    snprintf(c->message, sizeof c->message, "%s", msg);
  }
  nrt_set_error_message("%s", msg);
  return st;
}

static live_buffer *find_live(nrt_capture *c, const void *p) {
  const char *q = p;
  for (int i = c->nlive - 1; i >= 0; i--)
    if (q >= c->live[i].start && q < c->live[i].end) return &c->live[i];
  return NULL;
}

static bool overlaps_live(nrt_capture *c, const void *p, size_t bytes) {
  const char *a = p, *b = a + bytes;
  for (int i = 0; i < c->nlive; i++)
    if (a < c->live[i].end && c->live[i].start < b) return true;
  return false;
}

static nrt_status add_live(nrt_capture *c, int id, const void *p, size_t bytes) {
  if (c->nlive == c->cap_live) {
    int cap = c->cap_live ? c->cap_live * 2 : 64;
    live_buffer *grown = realloc(c->live, (size_t)cap * sizeof *grown);
    if (!grown) return capture_fail(c, NRT_ERROR_OUT_OF_MEMORY, "host out of memory");
    c->live = grown;
    c->cap_live = cap;
  }
  c->live[c->nlive++] = (live_buffer){id, p, (const char *)p + bytes};
  return NRT_SUCCESS;
}

static nrt_status add_buffer(nrt_capture *c, nrt_buffer_kind kind, int64_t bytes, int slot, bool mutated,
                             const void *data, int *out_id) {
  nrt_graph_buffer b = {.bytes = bytes, .kind = kind, .slot = slot, .mutated = mutated, .data = data};
  nrt_status st = nrt_graph_add_buffer(c->graph, &b, out_id);
  if (st != NRT_SUCCESS) return capture_fail(c, st, "%s", nrt_last_error_message());
  return NRT_SUCCESS;
}

/* ---- recording a launch --------------------------------------------------------- */

static nrt_status resolve(nrt_capture *c, const nrt_launch *l, const nrt_graph_node *n, int k,
                          nrt_graph_operand *o) {
  const nrt_operand *src = &l->operands[k];
  o->dtype = src->dtype;
  memcpy(o->strides, src->strides, sizeof o->strides);
  o->buffer = -1;
  o->offset = 0;
  /* A value carried in the descriptor (a CPU scalar) becomes a constant
   * of the graph: replays read it from the program, as eager read it
   * from the descriptor. */
  if (src->inline_slot != 0)
    return add_buffer(c, NRT_BUFFER_CONSTANT, (int64_t)nrt_dtype_size(src->dtype), -1, false,
                      l->inline_values[src->inline_slot - 1].bytes, &o->buffer);
  if (!src->data) return NRT_SUCCESS;
  bool out = k < l->noutputs;
  live_buffer *b = find_live(c, src->data);
  if (!b)
    return capture_fail(c, NRT_ERROR_INVALID_ARGUMENT,
                        "%s: operand %d (%s) %s memory that is not a graph %s (%p): declare it with "
                        "nrt_capture_declare_input or allocate it during the capture",
                        nrt_op_name(l->op), k, out ? "an output" : "an input", out ? "writes" : "reads",
                        out ? "input or allocation" : "input", src->data);
  o->buffer = b->id;
  o->offset = (const char *)src->data - b->start;
  int64_t lo, hi;
  if (nrt_operand_extent(n, k, &lo, &hi) && lo < hi &&
      (o->offset + lo < 0 || o->offset + hi > b->end - b->start))
    return capture_fail(c, NRT_ERROR_INVALID_ARGUMENT,
                        "%s: operand %d reaches bytes [%lld, %lld) of a %lld-byte buffer", nrt_op_name(l->op),
                        k, (long long)(o->offset + lo), (long long)(o->offset + hi),
                        (long long)(b->end - b->start));
  return NRT_SUCCESS;
}

static nrt_status record_launch(nrt_capture *c, const nrt_launch *l) {
  nrt_graph_node n;
  nrt_graph_node_init(&n, l->op, l->compute_dtype, l->ndim, l->sizes, l->noutputs, l->ninputs);
  memcpy(n.scalars, l->scalars, sizeof n.scalars);
  memcpy(n.params, l->params, sizeof n.params);
  memcpy(n.aux, l->aux, sizeof n.aux);
  nrt_rng_params(l, &n.rng_seed_param, &n.rng_offset_param);
  n.location = c->location;
  for (int k = 0; k < l->noutputs + l->ninputs; k++) {
    nrt_status st = resolve(c, l, &n, k, &n.operands[k]);
    if (st != NRT_SUCCESS) return st;
  }
  nrt_status st = nrt_graph_add_node(c->graph, &n, NULL);
  if (st != NRT_SUCCESS) return capture_fail(c, st, "%s", nrt_last_error_message());
  return NRT_SUCCESS;
}

/* A byte copy as a COPY node over uint8. */
static nrt_status record_copy(nrt_capture *c, int dst_buffer, int64_t dst_offset, int src_buffer,
                              int64_t src_offset, size_t bytes) {
  int64_t size = (int64_t)bytes;
  nrt_graph_node n;
  nrt_graph_node_init(&n, NRT_OP_COPY, NRT_UINT8, 1, &size, 1, 1);
  n.location = c->location;
  n.operands[0] = (nrt_graph_operand){.buffer = dst_buffer, .offset = dst_offset, .dtype = NRT_UINT8};
  n.operands[1] = (nrt_graph_operand){.buffer = src_buffer, .offset = src_offset, .dtype = NRT_UINT8};
  n.operands[0].strides[0] = n.operands[1].strides[0] = 1;
  nrt_status st = nrt_graph_add_node(c->graph, &n, NULL);
  if (st != NRT_SUCCESS) return capture_fail(c, st, "%s", nrt_last_error_message());
  return NRT_SUCCESS;
}

static bool launch_touches(nrt_capture *c, const nrt_launch *l) {
  for (int k = 0; k < l->noutputs + l->ninputs; k++)
    if (l->operands[k].inline_slot == 0 && l->operands[k].data && find_live(c, l->operands[k].data))
      return true;
  return false;
}

/* ---- the observer ------------------------------------------------------------------ */

static nrt_status on_launch(void *arg, bool own, const nrt_launch *l) {
  nrt_capture *c = arg;
  pthread_mutex_lock(&c->mu);
  nrt_status st = NRT_SUCCESS;
  if (c->failure == NRT_SUCCESS) {
    if (own) {
      st = record_launch(c, l);
    } else if (launch_touches(c, l)) {
      /* The other stream's launch runs (it is legal eager work); the
       * graph would miss it, so the capture fails. */
      capture_fail(c, NRT_ERROR_INVALID_ARGUMENT,
                   "%s on another stream of the device touches memory the capture uses (a graph "
                   "records one stream)",
                   nrt_op_name(l->op));
      nrt_clear_error_message();
    }
  }
  pthread_mutex_unlock(&c->mu);
  return st;
}

static nrt_status on_sync(void *arg, const char *fn) {
  nrt_capture *c = arg;
  pthread_mutex_lock(&c->mu);
  nrt_status st = capture_fail(c, NRT_ERROR_UNSUPPORTED,
                               "%s on the capturing stream reads device data on the host (a graph "
                               "runs without the host; move the read out of the compiled region)",
                               fn);
  pthread_mutex_unlock(&c->mu);
  return st;
}

static void on_malloc(void *arg, void *ptr, size_t size) {
  nrt_capture *c = arg;
  pthread_mutex_lock(&c->mu);
  int id;
  if (c->failure == NRT_SUCCESS &&
      add_buffer(c, NRT_BUFFER_INTERMEDIATE, (int64_t)size, -1, false, NULL, &id) == NRT_SUCCESS)
    add_live(c, id, ptr, size);
  pthread_mutex_unlock(&c->mu);
}

static void on_free(void *arg, void *ptr) {
  nrt_capture *c = arg;
  pthread_mutex_lock(&c->mu);
  for (int i = c->nlive - 1; i >= 0; i--) {
    const nrt_graph_buffer *b = nrt_graph_buffer_at(c->graph, c->live[i].id);
    if (c->live[i].start == ptr && b->kind != NRT_BUFFER_INPUT) {
      c->live[i] = c->live[--c->nlive];
      break;
    }
  }
  pthread_mutex_unlock(&c->mu);
}

static nrt_status on_memcpy(void *arg, bool own, void *dst, const void *src, size_t bytes, int kind) {
  nrt_capture *c = arg;
  pthread_mutex_lock(&c->mu);
  nrt_status st = NRT_SUCCESS;
  if (c->failure != NRT_SUCCESS) goto done;
  if (!own) {
    bool touches = (kind != NRT_MEMCPY_HOST_TO_DEVICE && overlaps_live(c, src, bytes)) ||
                   (kind != NRT_MEMCPY_DEVICE_TO_HOST && overlaps_live(c, dst, bytes));
    if (touches) {
      capture_fail(c, NRT_ERROR_INVALID_ARGUMENT,
                   "a copy on another stream of the device touches memory the capture uses");
      nrt_clear_error_message();
    }
    goto done;
  }
  if (kind == NRT_MEMCPY_DEVICE_TO_HOST) {
    st = capture_fail(c, NRT_ERROR_UNSUPPORTED,
                      "a device-to-host copy of %zu bytes reads device data on the host", bytes);
    goto done;
  }
  live_buffer *d = find_live(c, dst);
  if (!d || (const char *)dst + bytes > d->end) {
    st = capture_fail(c, NRT_ERROR_INVALID_ARGUMENT,
                      "a %zu-byte copy writes memory that is not a graph input or allocation", bytes);
    goto done;
  }
  int src_id;
  int64_t src_offset = 0;
  if (kind == NRT_MEMCPY_HOST_TO_DEVICE) {
    /* The host bytes as they are now become a constant of the graph. */
    if ((st = add_buffer(c, NRT_BUFFER_CONSTANT, (int64_t)bytes, -1, false, src, &src_id)) != NRT_SUCCESS)
      goto done;
  } else {
    live_buffer *s = find_live(c, src);
    if (!s || (const char *)src + bytes > s->end) {
      st = capture_fail(c, NRT_ERROR_INVALID_ARGUMENT,
                        "a %zu-byte copy reads memory that is not a graph input", bytes);
      goto done;
    }
    src_id = s->id;
    src_offset = (const char *)src - s->start;
  }
  st = record_copy(c, d->id, (const char *)dst - d->start, src_id, src_offset, bytes);
done:
  pthread_mutex_unlock(&c->mu);
  return st;
}

static const nrt_capture_observer observer = {
    .launch = on_launch, .sync = on_sync, .malloc_done = on_malloc, .free_done = on_free, .memcpy_ = on_memcpy};

/* ---- the API --------------------------------------------------------------------- */

static void capture_free(nrt_capture *c) {
  nrt_graph_destroy(c->graph);
  free(c->location);
  free(c->live);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

nrt_status nrt_capture_begin(nrt_stream *stream, nrt_capture **out_capture) {
  if (!stream || !out_capture) {
    nrt_set_error_message("nrt_capture_begin: %s is NULL", stream ? "out_capture" : "stream");
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  nrt_capture *c = calloc(1, sizeof *c);
  if (!c) return NRT_ERROR_OUT_OF_MEMORY;
  pthread_mutex_init(&c->mu, NULL);
  c->stream = stream;
  nrt_status st = nrt_graph_create(&c->graph);
  if (st == NRT_SUCCESS) st = nrt_capture_attach(stream, c, &observer);
  if (st != NRT_SUCCESS) {
    capture_free(c);
    return st;
  }
  *out_capture = c;
  return NRT_SUCCESS;
}

nrt_status nrt_capture_declare_input(nrt_capture *c, int slot, const void *ptr, size_t bytes, bool mutated) {
  if (!c) return NRT_ERROR_INVALID_ARGUMENT;
  pthread_mutex_lock(&c->mu);
  nrt_status st;
  int id;
  if (slot < 0)
    st = capture_fail(c, NRT_ERROR_INVALID_ARGUMENT, "input slot %d is negative", slot);
  else if (bytes > 0 && !ptr)
    st = capture_fail(c, NRT_ERROR_INVALID_ARGUMENT, "input slot %d: NULL pointer for %zu bytes", slot, bytes);
  else if (bytes > 0 && overlaps_live(c, ptr, bytes))
    st = capture_fail(c, NRT_ERROR_INVALID_ARGUMENT,
                      "input slot %d overlaps another input or a capture allocation (declare each storage once)",
                      slot);
  else if ((st = add_buffer(c, NRT_BUFFER_INPUT, (int64_t)bytes, slot, mutated, NULL, &id)) == NRT_SUCCESS &&
           bytes > 0)
    st = add_live(c, id, ptr, bytes);
  pthread_mutex_unlock(&c->mu);
  return st;
}

nrt_status nrt_capture_declare_output(nrt_capture *c, int slot, const void *ptr, size_t bytes) {
  if (!c) return NRT_ERROR_INVALID_ARGUMENT;
  pthread_mutex_lock(&c->mu);
  nrt_status st = NRT_SUCCESS;
  live_buffer *b = ptr ? find_live(c, ptr) : NULL;
  if (slot < 0) {
    st = capture_fail(c, NRT_ERROR_INVALID_ARGUMENT, "output slot %d is negative", slot);
  } else if (!b) {
    st = capture_fail(c, NRT_ERROR_INVALID_ARGUMENT,
                      "output slot %d (%p) is not an allocation made during the capture (an input "
                      "returned as is is the caller's to alias)",
                      slot, ptr);
  } else {
    nrt_graph_buffer *gb = &c->graph->buffers[b->id];
    if (gb->kind == NRT_BUFFER_INPUT)
      st = capture_fail(c, NRT_ERROR_INVALID_ARGUMENT, "output slot %d is input slot %d (alias it instead)", slot,
                        gb->slot);
    else if (gb->kind == NRT_BUFFER_OUTPUT)
      st = capture_fail(c, NRT_ERROR_INVALID_ARGUMENT, "output slot %d is already output slot %d", slot, gb->slot);
    else if ((const char *)ptr != b->start || (int64_t)bytes > gb->bytes)
      st = capture_fail(c, NRT_ERROR_INVALID_ARGUMENT,
                        "output slot %d must be a whole allocation (starts %lld bytes in, %zu of %lld bytes)", slot,
                        (long long)((const char *)ptr - b->start), bytes, (long long)gb->bytes);
    else {
      gb->kind = NRT_BUFFER_OUTPUT;
      gb->slot = slot;
    }
  }
  pthread_mutex_unlock(&c->mu);
  return st;
}

nrt_status nrt_capture_set_location(nrt_capture *c, const char *location) {
  if (!c) return NRT_ERROR_INVALID_ARGUMENT;
  char *copy = location ? strdup(location) : NULL;
  if (location && !copy) return NRT_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&c->mu);
  free(c->location);
  c->location = copy;
  pthread_mutex_unlock(&c->mu);
  return NRT_SUCCESS;
}

/* Slots must be 0..n-1, each used once. */
static nrt_status check_slots(nrt_capture *c) {
  const nrt_graph *g = c->graph;
  int max = -1;
  for (int i = 0; i < g->nbuffers; i++)
    if (g->buffers[i].slot > max) max = g->buffers[i].slot;
  int *owner = malloc(sizeof(int) * (size_t)(max + 1 > 0 ? max + 1 : 1));
  if (!owner) return NRT_ERROR_OUT_OF_MEMORY;
  for (int s = 0; s <= max; s++) owner[s] = -1;
  nrt_status st = NRT_SUCCESS;
  for (int i = 0; i < g->nbuffers && st == NRT_SUCCESS; i++) {
    int s = g->buffers[i].slot;
    if (s < 0) continue;
    if (owner[s] >= 0) st = capture_fail(c, NRT_ERROR_INVALID_ARGUMENT, "slot %d declared twice", s);
    owner[s] = i;
  }
  for (int s = 0; s <= max && st == NRT_SUCCESS; s++)
    if (owner[s] < 0) st = capture_fail(c, NRT_ERROR_INVALID_ARGUMENT, "slot %d is never declared (slots are 0..%d)", s, max);
  free(owner);
  return st;
}

nrt_status nrt_capture_end(nrt_capture *c, uint64_t seed, uint64_t base_offset, uint64_t advance,
                           nrt_graph **out_graph) {
  if (!c || !out_graph) return NRT_ERROR_INVALID_ARGUMENT;
  *out_graph = NULL;
  /* After detach no observer call is in flight or can start. */
  nrt_capture_detach(c->stream);
  nrt_status st = c->failure;
  if (st == NRT_SUCCESS) st = check_slots(c);
  if (st != NRT_SUCCESS) {
    nrt_set_error_message("%s", c->message);
    capture_free(c);
    return st;
  }
  nrt_graph_set_rng(c->graph, seed, base_offset, advance);
  *out_graph = c->graph;
  c->graph = NULL;
  capture_free(c);
  return NRT_SUCCESS;
}

void nrt_capture_abort(nrt_capture *c) {
  if (!c) return;
  nrt_capture_detach(c->stream);
  capture_free(c);
}
