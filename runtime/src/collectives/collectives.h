/* The collectives layer (private): the communicator, its shared segments,
 * the waits every algorithm is built from (comm.c), the reductions
 * (reduce.c), the copies (copy.c); the algorithms are in ops.c, send/recv in p2p.c, the
 * hierarchical communicator across machines in hier.c.
 *
 * Above exec (spin-waits) and kernels/common (dtype conversion, the ISA and
 * reference switches); nothing below includes this. */
#ifndef NRT_COLLECTIVES_COLLECTIVES_H
#define NRT_COLLECTIVES_COLLECTIVES_H

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/core.h"
#include "nrt/collectives.h"

/* Lines written by different processes stay apart: 128 bytes, because the
 * adjacent-line prefetcher pairs 64-byte lines. */
#define NRT_COLL_LINE 128

_Static_assert(ATOMIC_INT_LOCK_FREE == 2 && ATOMIC_LLONG_LOCK_FREE == 2,
               "atomics in shared memory must be lock-free");

enum { NRT_COLL_RUNNING = 0, NRT_COLL_FAILED = 1, NRT_COLL_LEFT = 2 };

/* The start of every rank's segment. The owner writes the identity fields
 * before it publishes the segment's name and never changes them; the other
 * fields each have their own line because different processes write them. */
typedef struct nrt_coll_header {
  alignas(NRT_COLL_LINE) uint64_t magic;
  uint64_t nonce;      /* also in the exchange: the peer checks it mapped the right segment */
  int32_t rank, world_size, pid, reserved;
  uint64_t slot_bytes, mailbox_bytes, segment_bytes;
  /* Peers that mapped the segment (each adds 1); the owner unlinks its name
   * when all have. A futex word. */
  alignas(NRT_COLL_LINE) atomic_uint mapped;
  /* Collective steps the owner has published; peers sleep on it (futex). */
  alignas(NRT_COLL_LINE) atomic_uint seq;
  alignas(NRT_COLL_LINE) atomic_uint seq_sleepers;
  /* Rung by a peer that wrote into the owner's incoming mailbox or drained
   * the owner's outgoing one; the owner sleeps on it in send/recv. */
  alignas(NRT_COLL_LINE) atomic_uint bell;
  atomic_uint bell_sleepers;
  /* NRT_COLL_RUNNING until the owner fails (failure says why) or leaves. */
  alignas(NRT_COLL_LINE) atomic_int state;
  char failure[512];
} nrt_coll_header;

/* After the header, every segment has (offsets in nrt_comm):
 *   rx_tail[world]   one line each: bytes the owner consumed from source s's ring
 *   tx_head[world]   one line each: bytes the owner wrote into its ring to d
 *   ring[world]      mailbox_bytes each: the owner's outgoing ring to d
 *   slot[2]          slot_bytes each: staging for collectives, used by
 *                    rounds alternately */
typedef struct nrt_coll_counter {
  alignas(NRT_COLL_LINE) atomic_ullong value;
} nrt_coll_counter;

/* A peer's segment as mapped here. */
typedef struct nrt_coll_peer {
  char *base;
  nrt_coll_header *hdr;
  pid_t pid;
  char shm_name[128];
  uint64_t last_alive_check_ns;
} nrt_coll_peer;

/* A message received before its recv was posted (or drained by a blocked
 * send), kept in arrival order per source. */
typedef struct nrt_coll_msg {
  struct nrt_coll_msg *next;
  int64_t tag;
  uint64_t bytes;
  char data[];
} nrt_coll_msg;

/* What this rank knows about the stream from one source. */
typedef struct nrt_coll_rx {
  uint64_t tail;            /* bytes consumed, mirrored into rx_tail[s] */
  bool in_message;          /* header read, payload arriving */
  int64_t tag;
  uint64_t bytes, got;
  char *dst;                /* user buffer, or `pending`'s data */
  nrt_coll_msg *pending;    /* NULL when the payload goes to the user buffer */
  nrt_coll_msg *queue_head, *queue_tail;
} nrt_coll_rx;

struct nrt_comm {
  int rank, world_size;
  char name[128];
  int64_t timeout_ms;
  size_t slot_bytes, mailbox_bytes, small_bytes, segment_bytes;
  size_t rx_tail_offset, tx_head_offset, ring_offset, slot_offset;
  nrt_coll_peer *peers; /* [world_size], peers[rank] is this rank's own segment */

  pthread_mutex_t mu;   /* one operation at a time */
  atomic_bool aborted;  /* nrt_comm_abort; checked by every wait */
  bool broken;          /* an operation failed: later ones fail at once */
  char broken_message[NRT_ERROR_MESSAGE_MAX];

  /* Operation state, under mu. */
  const char *op;       /* name of the running operation, for messages */
  uint64_t deadline_ns;
  uint32_t seq;         /* steps this rank published */
  uint32_t round;       /* rounds so far: round & 1 picks the slot */
  uint64_t *tx_head;    /* [world_size] mirror of this rank's tx_head */
  nrt_coll_rx *rx;      /* [world_size] */

  /* An all_reduce that nrt_comm_all_reduce_eager published but whose peers
   * had not all arrived: what is left of it (wait for them, fold the slots
   * of round half `half` into recv), run by nrt_comm_finish or by the next
   * operation's nrt_coll_begin. Under mu. */
  struct {
    bool active;
    char *recv;
    int64_t count;
    nrt_dtype dtype;
    nrt_reduce_op op;
    double factor;
    int half;
  } pending;
};

/* ---- comm.c: steps, waits, failures ------------------------------------------ */
uint64_t nrt_coll_now_ns(void);
/* Enters an operation: takes the lock, refuses a broken communicator, sets
 * the deadline. Every successful begin is paired with nrt_coll_end. */
nrt_status nrt_coll_begin(nrt_comm *c, const char *op);
nrt_status nrt_coll_end(nrt_comm *c, nrt_status st);
/* Completes c->pending (ops.c); begin calls it before any other operation,
 * so an eager all_reduce left pending always finishes first, in order. */
nrt_status nrt_coll_finish_pending(nrt_comm *c);
/* Fails the running operation: sets the message "op: communicator 'name'
 * (rank r of N): <detail>", breaks the communicator and tells the peers.
 * Returns st. */
nrt_status nrt_coll_fail(nrt_comm *c, nrt_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Argument errors: the message in the same form, nothing broken. */
nrt_status nrt_coll_invalid(nrt_comm *c, nrt_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Peer p's slot of the current round (nrt_coll_next_round picks it). */
char *nrt_coll_slot(nrt_comm *c, int p, int half);
/* Starts a round: returns the slot half every rank uses in it. */
int nrt_coll_next_round(nrt_comm *c);
/* Before this rank rewrites its slot: waits until every peer has
 * published the step before the one this rank publishes next, which means
 * it finished reading everything of two rounds ago. */
nrt_status nrt_coll_wait_writable(nrt_comm *c);
/* Publishes this rank's next step (its writes become visible). */
void nrt_coll_publish(nrt_comm *c);
/* Waits until every peer / peer p has published this rank's current step. */
nrt_status nrt_coll_wait_all(nrt_comm *c);
nrt_status nrt_coll_wait_rank(nrt_comm *c, int p);
/* Whether every peer has published step `target` within spin_ns (spinning,
 * never sleeping, nothing failed on false): the eager path's waits. */
bool nrt_coll_all_reached(nrt_comm *c, uint32_t target, uint64_t spin_ns);

/* p2p: waits on this rank's bell until ready(ctx) or the bell rings, with
 * the deadline, the abort flag and `peer`'s health checked. NRT_SUCCESS
 * means "look again"; a failure has its message set (`what` describes the
 * wait for the timeout message). */
nrt_status nrt_coll_wait_bell(nrt_comm *c, uint32_t seen_bell, int peer, const char *what);
void nrt_coll_ring(nrt_comm *c, int peer);

/* ---- copy.c ------------------------------------------------------------------ */
/* memcpy, fast whatever the alignment; `stream` bypasses the caches (for a
 * large result written once: NRT_COLL_STREAM_BYTES and up). */
#define NRT_COLL_STREAM_BYTES ((size_t)8 << 20)
void nrt_coll_copy(void *dst, const void *src, size_t bytes, bool stream);

/* ---- reduce.c ---------------------------------------------------------------- */
/* dst[0..n) = the fold of srcs[0..nsrc) (each n elements of dtype), in
 * source order, finished as `op` says (AVG divides by nsrc). dst may be one
 * of the sources. Vectorised for the host's ISA, or the scalar reference
 * when nrt_kernels_reference() is set; both give the same bits. */
void nrt_coll_reduce(nrt_dtype dtype, nrt_reduce_op op, double factor, void *dst,
                     const void *const *srcs, int nsrc, int64_t n);
/* buf[0..n) /= divisor in the fold's domain, rounded once (AVG's last
 * step when the sum was made elsewhere; integers truncate toward zero). */
void nrt_coll_divide(nrt_dtype dtype, void *buf, int64_t n, int divisor);

#endif
