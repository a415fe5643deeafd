/* Point-to-point: a ring per ordered pair of ranks, in the sender's
 * segment. The sender advances tx_head[dest] (in its segment), the
 * receiver rx_tail[src] (in its own); each rings the other's bell after
 * moving, so a blocked side sleeps on its own futex word only.
 *
 * Messages are a header (tag, size) and the payload, streamed: a message
 * larger than the ring goes through in parts while the receiver drains it.
 * A receiver takes messages from a source in order; one whose tag no recv
 * wants yet is drained into a private queue (malloc), so it does not block
 * the messages behind it. A sender waiting for ring space drains its own
 * incoming rings the same way, which is what lets two ranks send each other
 * large messages before receiving (batch_isend_irecv run in order). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/collectives.h"

#define MSG_MAGIC 0x4e52544dU /* "NRTM" */

typedef struct msg_header {
  uint32_t magic, reserved;
  int64_t tag;
  uint64_t bytes;
} msg_header;

/* What a recv in progress wants from its source. */
typedef struct recv_want {
  int64_t tag;
  char *buf;
  uint64_t bytes;
  bool bound;   /* the message arriving now streams into buf */
  bool blocked; /* a message with the tag but another size came first */
} recv_want;

static atomic_ullong *tx_head(nrt_comm *c, int owner, int dest) {
  return &((nrt_coll_counter *)(c->peers[owner].base + c->tx_head_offset))[dest].value;
}
static atomic_ullong *rx_tail(nrt_comm *c, int owner, int src) {
  return &((nrt_coll_counter *)(c->peers[owner].base + c->rx_tail_offset))[src].value;
}
static char *ring(nrt_comm *c, int owner, int dest) {
  return c->peers[owner].base + c->ring_offset + (size_t)dest * c->mailbox_bytes;
}

static void ring_write(char *ring, uint64_t size, uint64_t pos, const char *src, uint64_t n) {
  uint64_t at = pos % size, first = n < size - at ? n : size - at;
  memcpy(ring + at, src, (size_t)first);
  if (n > first) memcpy(ring, src + first, (size_t)(n - first));
}
static void ring_read(char *dst, const char *ring, uint64_t size, uint64_t pos, uint64_t n) {
  uint64_t at = pos % size, first = n < size - at ? n : size - at;
  memcpy(dst, ring + at, (size_t)first);
  if (n > first) memcpy(dst + first, ring, (size_t)(n - first));
}

/* Moves whatever source s has written: headers, payload into the wanted
 * buffer or the queue. Never blocks. *moved says whether anything came;
 * *done that the wanted message is complete. */
static nrt_status progress(nrt_comm *c, int s, recv_want *want, bool *moved, bool *done) {
  nrt_coll_rx *rx = &c->rx[s];
  const uint64_t size = c->mailbox_bytes;
  const char *in = ring(c, s, c->rank);
  uint64_t head = atomic_load_explicit(tx_head(c, s, c->rank), memory_order_acquire);
  uint64_t start = rx->tail;
  nrt_status st = NRT_SUCCESS;
  while (!*done) {
    if (!rx->in_message) {
      if (head - rx->tail < sizeof(msg_header)) break;
      msg_header hdr;
      ring_read((char *)&hdr, in, size, rx->tail, sizeof hdr);
      rx->tail += sizeof hdr;
      if (hdr.magic != MSG_MAGIC) {
        st = nrt_coll_fail(c, NRT_ERROR_INTERNAL, "corrupt message header from rank %d", s);
        break;
      }
      rx->in_message = true;
      rx->tag = hdr.tag;
      rx->bytes = hdr.bytes;
      rx->got = 0;
      rx->pending = NULL;
      if (want && !want->blocked && hdr.tag == want->tag && hdr.bytes == want->bytes) {
        want->bound = true;
        rx->dst = want->buf;
      } else {
        if (want && hdr.tag == want->tag) want->blocked = true;
        rx->pending = malloc(sizeof(nrt_coll_msg) + hdr.bytes);
        if (!rx->pending) {
          st = nrt_coll_fail(c, NRT_ERROR_OUT_OF_MEMORY, "no host memory to queue a %llu-byte message from rank %d",
                             (unsigned long long)hdr.bytes, s);
          break;
        }
        rx->pending->next = NULL;
        rx->pending->tag = hdr.tag;
        rx->pending->bytes = hdr.bytes;
        rx->dst = rx->pending->data;
      }
    }
    uint64_t k = head - rx->tail < rx->bytes - rx->got ? head - rx->tail : rx->bytes - rx->got;
    if (k) ring_read(rx->dst + rx->got, in, size, rx->tail, k);
    rx->got += k;
    rx->tail += k;
    if (rx->got < rx->bytes) break;
    rx->in_message = false;
    if (rx->pending) {
      /* A queued message with the wanted tag is older than any header
       * behind it: binding the next one to the recv's buffer would hand
       * the recv the later message (two same-tag sends swapped when the
       * first was drained while this rank was sending). The recv takes it
       * from the queue instead, and later ones queue behind it. */
      if (want && rx->pending->tag == want->tag) want->blocked = true;
      if (rx->queue_tail) rx->queue_tail->next = rx->pending;
      else rx->queue_head = rx->pending;
      rx->queue_tail = rx->pending;
      rx->pending = NULL;
    } else {
      want->bound = false;
      *done = true;
    }
  }
  if (rx->tail != start) {
    atomic_store_explicit(rx_tail(c, c->rank, s), rx->tail, memory_order_release);
    nrt_coll_ring(c, s);
    *moved = true;
  }
  return st;
}

/* Drains every source other than `except` into the queues. */
static nrt_status progress_others(nrt_comm *c, int except, bool *moved) {
  for (int s = 0; s < c->world_size; s++) {
    if (s == c->rank || s == except) continue;
    bool done = false;
    nrt_status st = progress(c, s, NULL, moved, &done);
    if (st != NRT_SUCCESS) return st;
  }
  return NRT_SUCCESS;
}

static nrt_status stream_out(nrt_comm *c, int peer, const char *data, uint64_t n) {
  const uint64_t size = c->mailbox_bytes;
  char *out = ring(c, c->rank, peer);
  atomic_ullong *tail = rx_tail(c, peer, c->rank);
  atomic_uint *bell = &c->peers[c->rank].hdr->bell;
  char what[96];
  while (n) {
    unsigned seen = atomic_load(bell);
    uint64_t head = c->tx_head[peer];
    uint64_t space = size - (head - atomic_load_explicit(tail, memory_order_acquire));
    if (space == 0) {
      bool moved = false;
      nrt_status st = progress_others(c, -1, &moved);
      if (st != NRT_SUCCESS) return st;
      if (moved) continue;
      snprintf(what, sizeof what, "sending to rank %d (its mailbox stayed full)", peer);
      st = nrt_coll_wait_bell(c, seen, peer, what);
      if (st != NRT_SUCCESS) return st;
      continue;
    }
    /* At most half the ring per publish, so the receiver copies out one
     * half while this side fills the other. */
    uint64_t k = n < space ? n : space;
    if (k > size / 2) k = size / 2;
    ring_write(out, size, head, data, k);
    c->tx_head[peer] = head + k;
    atomic_store_explicit(tx_head(c, c->rank, peer), head + k, memory_order_release);
    nrt_coll_ring(c, peer);
    data += k;
    n -= k;
  }
  return NRT_SUCCESS;
}

static nrt_status check_p2p(nrt_comm *c, const void *buf, int64_t count, nrt_dtype dt, int peer) {
  if ((unsigned)dt >= NRT_DTYPE_COUNT)
    return nrt_coll_invalid(c, NRT_ERROR_INVALID_ARGUMENT, "invalid dtype %d", (int)dt);
  if (count < 0 || (count > 0 && !buf))
    return nrt_coll_invalid(c, NRT_ERROR_INVALID_ARGUMENT, "%lld elements at %p", (long long)count, buf);
  if (peer < 0 || peer >= c->world_size || peer == c->rank)
    return nrt_coll_invalid(c, NRT_ERROR_INVALID_ARGUMENT, "peer %d is not another rank (world size %d)",
                            peer, c->world_size);
  return NRT_SUCCESS;
}

nrt_status nrt_comm_send(nrt_comm *c, const void *buf, int64_t count, nrt_dtype dtype, int peer,
                         int64_t tag) {
  nrt_status st = nrt_coll_begin(c, "nrt_comm_send");
  if (st != NRT_SUCCESS) return st;
  st = check_p2p(c, buf, count, dtype, peer);
  if (st == NRT_SUCCESS) {
    msg_header hdr = {MSG_MAGIC, 0, tag, (uint64_t)count * nrt_dtype_size(dtype)};
    st = stream_out(c, peer, (const char *)&hdr, sizeof hdr);
    if (st == NRT_SUCCESS) st = stream_out(c, peer, buf, hdr.bytes);
  }
  return nrt_coll_end(c, st);
}

/* The oldest queued message from rx with `tag`, unlinked; NULL if none. */
static nrt_coll_msg *take_queued(nrt_coll_rx *rx, int64_t tag) {
  nrt_coll_msg *prev = NULL;
  for (nrt_coll_msg *m = rx->queue_head; m; prev = m, m = m->next) {
    if (m->tag != tag) continue;
    if (prev) prev->next = m->next;
    else rx->queue_head = m->next;
    if (rx->queue_tail == m) rx->queue_tail = prev;
    return m;
  }
  return NULL;
}

static nrt_status recv(nrt_comm *c, char *buf, uint64_t bytes, int peer, int64_t tag) {
  recv_want want = {tag, buf, bytes, false, false};
  atomic_uint *bell = &c->peers[c->rank].hdr->bell;
  char what[128];
  for (;;) {
    if (!want.bound) {
      nrt_coll_msg *m = take_queued(&c->rx[peer], tag);
      if (m) {
        nrt_status st = NRT_SUCCESS;
        if (m->bytes != bytes)
          st = nrt_coll_invalid(c, NRT_ERROR_INVALID_ARGUMENT,
                                "recv of %llu bytes from rank %d with tag %lld got a message of %llu bytes",
                                (unsigned long long)bytes, peer, (long long)tag,
                                (unsigned long long)m->bytes);
        else if (bytes)
          memcpy(buf, m->data, (size_t)bytes);
        free(m);
        return st;
      }
    }
    unsigned seen = atomic_load(bell);
    bool moved = false, done = false;
    nrt_status st = progress(c, peer, &want, &moved, &done);
    if (st != NRT_SUCCESS) return st;
    if (done) return NRT_SUCCESS;
    st = progress_others(c, peer, &moved);
    if (st != NRT_SUCCESS) return st;
    if (moved) continue;
    snprintf(what, sizeof what, "waiting for a message from rank %d with tag %lld", peer, (long long)tag);
    st = nrt_coll_wait_bell(c, seen, peer, what);
    if (st != NRT_SUCCESS) return st;
  }
}

nrt_status nrt_comm_recv(nrt_comm *c, void *buf, int64_t count, nrt_dtype dtype, int peer,
                         int64_t tag) {
  nrt_status st = nrt_coll_begin(c, "nrt_comm_recv");
  if (st != NRT_SUCCESS) return st;
  st = check_p2p(c, buf, count, dtype, peer);
  if (st == NRT_SUCCESS) st = recv(c, buf, (uint64_t)count * nrt_dtype_size(dtype), peer, tag);
  return nrt_coll_end(c, st);
}
