/* Communicators: the rendezvous of shared segments, the step protocol the
 * algorithms are built from, and the waits (spin, then futex sleep in
 * slices that check the deadline and the peers' health).
 *
 * Step protocol. Each rank publishes a counter `seq` in its own segment: the
 * number of steps it has finished. Every rank runs the same steps in the
 * same order, so "peer p reached step t" means p's writes for step t are in
 * its slot, and p has finished reading everything of steps before t. A step
 * that writes this rank's slot first waits until all peers reached the step
 * before (nrt_coll_wait_writable), and rounds alternate between the two
 * slots, so a slot is rewritten only once every peer is done with what it
 * held two rounds ago. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "collectives/collectives.h"
#include "exec/exec.h"

#define NRT_COLL_MAGIC 0x4e52544353484d31ull /* "NRTCSHM1" */
#define DEFAULT_SLOT_BYTES ((size_t)1 << 20)
#define MIN_SLOT_BYTES ((size_t)64 << 10)
#define DEFAULT_SMALL_BYTES ((size_t)64 << 10)
/* Busy/yield phase before sleeping: long enough to catch a peer that is a
 * step behind on another core, short enough not to hold a core the peer
 * needs when ranks outnumber cores (nrt_spin_until yields after 2 us). */
#define SPIN_NS 50000ull
/* Sleep slice: how often a sleeping wait looks at the deadline, the abort
 * flag and whether the peer still lives. */
#define SLICE_NS 10000000ull

uint64_t nrt_coll_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* now + ms, saturated: c10d may pass a timeout of days. */
static uint64_t deadline_after(int64_t ms) {
  uint64_t now = nrt_coll_now_ns(), cap = (UINT64_MAX - now) / 1000000ull;
  return now + ((uint64_t)ms < cap ? (uint64_t)ms : cap) * 1000000ull;
}

/* ---- futex on words in shared memory (not FUTEX_PRIVATE: other processes) ---- */
static void futex_wait(atomic_uint *word, unsigned seen, uint64_t ns) {
  struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, seen, &ts, NULL, 0);
}
static void futex_wake_all(atomic_uint *word) {
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Whether process pid still runs. kill(pid, 0) alone sees a zombie as
 * alive (a killed rank whose parent has not reaped it yet), so /proc tells
 * the state. Ranks share the pid namespace (torchrun's children do). */
static bool pid_alive(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno != ENOENT;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return true;
  buf[n] = '\0';
  const char *paren = strrchr(buf, ')'); /* the command name may hold spaces */
  if (!paren || paren[1] != ' ') return true;
  return paren[2] != 'Z' && paren[2] != 'X';
}

/* ---- messages and failure ------------------------------------------------------ */
static void vformat(nrt_comm *c, char *out, size_t size, const char *fmt, va_list ap) {
  int k = snprintf(out, size, "%s: communicator '%s' (rank %d of %d): ", c->op ? c->op : "nrt_comm",
                   c->name, c->rank, c->world_size);
  if (k < 0) k = 0;
  if ((size_t)k < size) vsnprintf(out + k, size - (size_t)k, fmt, ap);
}

nrt_status nrt_coll_invalid(nrt_comm *c, nrt_status st, const char *fmt, ...) {
  char msg[NRT_ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vformat(c, msg, sizeof msg, fmt, ap);
  va_end(ap);
  nrt_set_error_message("%s", msg);
  return st;
}

/* Tells the peers: they read `failure` when their wait on this rank sees
 * the state change, and the wake-ups make sleeping ones look now. */
static void announce(nrt_comm *c, int state, const char *why) {
  nrt_coll_header *h = c->peers[c->rank].hdr;
  if (atomic_load(&h->state) != NRT_COLL_RUNNING) return; /* the first reason stands */
  if (why) snprintf(h->failure, sizeof h->failure, "%s", why);
  atomic_store(&h->state, state); /* seq_cst: after the text, before the wakes */
  futex_wake_all(&h->seq);
  atomic_fetch_add(&h->bell, 1);
  futex_wake_all(&h->bell);
  futex_wake_all(&h->mapped);
}

nrt_status nrt_coll_fail(nrt_comm *c, nrt_status st, const char *fmt, ...) {
  char msg[NRT_ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vformat(c, msg, sizeof msg, fmt, ap);
  va_end(ap);
  nrt_set_error_message("%s", msg);
  if (!c->broken) {
    c->broken = true;
    snprintf(c->broken_message, sizeof c->broken_message, "%s", msg);
    if (c->peers && c->peers[c->rank].hdr) announce(c, NRT_COLL_FAILED, msg);
  }
  return st;
}

/* Why peer p can no longer take part, or false if it still can. */
static bool peer_gone(nrt_comm *c, int p, char *why, size_t size) {
  nrt_coll_peer *peer = &c->peers[p];
  int state = atomic_load(&peer->hdr->state);
  if (state == NRT_COLL_FAILED) {
    snprintf(why, size, "rank %d failed: %.400s", p, peer->hdr->failure);
    return true;
  }
  if (state == NRT_COLL_LEFT) {
    snprintf(why, size, "rank %d left the communicator (nrt_comm_destroy)", p);
    return true;
  }
  uint64_t now = nrt_coll_now_ns();
  if (now - peer->last_alive_check_ns >= SLICE_NS / 2) {
    peer->last_alive_check_ns = now;
    if (!pid_alive(peer->pid)) {
      snprintf(why, size, "rank %d (pid %d) died", p, (int)peer->pid);
      return true;
    }
  }
  return false;
}

/* ---- waits ------------------------------------------------------------------------ */
typedef struct seq_ready {
  atomic_uint *seq;
  uint32_t target;
} seq_ready;

static bool seq_reached(uint32_t seq, uint32_t target) { return (int32_t)(seq - target) >= 0; }

static bool seq_ready_fn(const void *ctx) {
  const seq_ready *r = ctx;
  return seq_reached(atomic_load_explicit(r->seq, memory_order_acquire), r->target);
}

/* Waits until peer p published step `target`. TIMEOUT and PEER_FAILED
 * come back without a message (the caller names every late rank); `why`
 * says what happened to p. */
static nrt_status wait_seq(nrt_comm *c, int p, uint32_t target, char *why, size_t size) {
  nrt_coll_header *h = c->peers[p].hdr;
  seq_ready r = {&h->seq, target};
  if (seq_ready_fn(&r)) return NRT_SUCCESS;
  uint64_t now = nrt_coll_now_ns();
  uint64_t left = c->deadline_ns > now ? c->deadline_ns - now : 0;
  if (nrt_spin_until(seq_ready_fn, &r, left < SPIN_NS ? left : SPIN_NS)) return NRT_SUCCESS;
  for (;;) {
    unsigned seen = atomic_load(&h->seq);
    if (seq_reached(seen, target)) return NRT_SUCCESS;
    if (atomic_load(&c->aborted)) {
      snprintf(why, size, "aborted (nrt_comm_abort)");
      return NRT_ERROR_PEER_FAILED;
    }
    if (peer_gone(c, p, why, size)) return NRT_ERROR_PEER_FAILED;
    now = nrt_coll_now_ns();
    if (now >= c->deadline_ns) return NRT_ERROR_TIMEOUT;
    uint64_t slice = c->deadline_ns - now < SLICE_NS ? c->deadline_ns - now : SLICE_NS;
    atomic_fetch_add(&h->seq_sleepers, 1);
    /* The owner stores seq before it looks at the sleepers: either it sees
     * us and wakes us, or we see its new seq here and do not sleep. */
    if (!seq_reached(atomic_load(&h->seq), target)) futex_wait(&h->seq, seen, slice);
    atomic_fetch_sub(&h->seq_sleepers, 1);
  }
}

/* The ranks that have not reached `target`, as "rank 2" or "ranks 2, 3". */
static void late_ranks(nrt_comm *c, uint32_t target, char *out, size_t size) {
  int count = 0;
  size_t k = 0;
  char list[512] = "";
  for (int p = 0; p < c->world_size; p++) {
    if (p == c->rank || seq_reached(atomic_load(&c->peers[p].hdr->seq), target)) continue;
    int w = snprintf(list + k, sizeof list - k, "%s%d", count ? ", " : "", p);
    if (w > 0 && k + (size_t)w < sizeof list) k += (size_t)w;
    count++;
  }
  snprintf(out, size, "%s %s", count == 1 ? "rank" : "ranks", list);
}

static nrt_status wait_target(nrt_comm *c, int only, uint32_t target) {
  char why[600];
  for (int p = only < 0 ? 0 : only; p < (only < 0 ? c->world_size : only + 1); p++) {
    if (p == c->rank) continue;
    nrt_status st = wait_seq(c, p, target, why, sizeof why);
    if (st == NRT_ERROR_TIMEOUT) {
      char late[600];
      late_ranks(c, target, late, sizeof late);
      return nrt_coll_fail(c, st, "timed out after %lld ms waiting for %s (step %u)",
                           (long long)c->timeout_ms, late, target);
    }
    if (st != NRT_SUCCESS) return nrt_coll_fail(c, st, "%s", why);
  }
  return NRT_SUCCESS;
}

typedef struct all_ready {
  nrt_comm *c;
  uint32_t target;
} all_ready;

static bool all_ready_fn(const void *ctx) {
  const all_ready *r = ctx;
  for (int p = 0; p < r->c->world_size; p++)
    if (p != r->c->rank &&
        !seq_reached(atomic_load_explicit(&r->c->peers[p].hdr->seq, memory_order_acquire), r->target))
      return false;
  return true;
}

bool nrt_coll_all_reached(nrt_comm *c, uint32_t target, uint64_t spin_ns) {
  all_ready r = {c, target};
  return all_ready_fn(&r) || (spin_ns > 0 && nrt_spin_until(all_ready_fn, &r, spin_ns));
}

nrt_status nrt_coll_wait_all(nrt_comm *c) { return wait_target(c, -1, c->seq); }
nrt_status nrt_coll_wait_rank(nrt_comm *c, int p) { return wait_target(c, p, c->seq); }
nrt_status nrt_coll_wait_writable(nrt_comm *c) { return wait_target(c, -1, c->seq); }

void nrt_coll_publish(nrt_comm *c) {
  nrt_coll_header *h = c->peers[c->rank].hdr;
  c->seq++;
  atomic_store(&h->seq, c->seq); /* seq_cst: ordered before the sleepers load */
  if (atomic_load(&h->seq_sleepers)) futex_wake_all(&h->seq);
}

int nrt_coll_next_round(nrt_comm *c) { return (int)(c->round++ & 1u); }

char *nrt_coll_slot(nrt_comm *c, int p, int half) {
  return c->peers[p].base + c->slot_offset + (size_t)half * c->slot_bytes;
}

void nrt_coll_ring(nrt_comm *c, int peer) {
  nrt_coll_header *h = c->peers[peer].hdr;
  atomic_fetch_add(&h->bell, 1);
  if (atomic_load(&h->bell_sleepers)) futex_wake_all(&h->bell);
}

typedef struct bell_ready {
  atomic_uint *bell;
  unsigned seen;
} bell_ready;
static bool bell_rang(const void *ctx) {
  const bell_ready *r = ctx;
  return atomic_load_explicit(r->bell, memory_order_acquire) != r->seen;
}

nrt_status nrt_coll_wait_bell(nrt_comm *c, uint32_t seen, int peer, const char *what) {
  nrt_coll_header *h = c->peers[c->rank].hdr;
  bell_ready r = {&h->bell, seen};
  uint64_t now = nrt_coll_now_ns();
  uint64_t left = c->deadline_ns > now ? c->deadline_ns - now : 0;
  if (nrt_spin_until(bell_rang, &r, left < SPIN_NS ? left : SPIN_NS)) return NRT_SUCCESS;
  char why[600];
  if (atomic_load(&c->aborted)) return nrt_coll_fail(c, NRT_ERROR_PEER_FAILED, "aborted (nrt_comm_abort)");
  if (peer_gone(c, peer, why, sizeof why)) return nrt_coll_fail(c, NRT_ERROR_PEER_FAILED, "%s", why);
  now = nrt_coll_now_ns();
  if (now >= c->deadline_ns)
    return nrt_coll_fail(c, NRT_ERROR_TIMEOUT, "timed out after %lld ms %s",
                         (long long)c->timeout_ms, what);
  uint64_t slice = c->deadline_ns - now < SLICE_NS ? c->deadline_ns - now : SLICE_NS;
  atomic_fetch_add(&h->bell_sleepers, 1);
  if (!bell_rang(&r)) futex_wait(&h->bell, seen, slice);
  atomic_fetch_sub(&h->bell_sleepers, 1);
  return NRT_SUCCESS;
}

/* ---- operations' entry and exit -------------------------------------------------- */
nrt_status nrt_coll_begin(nrt_comm *c, const char *op) {
  if (!c) {
    nrt_set_error_message("%s: communicator is NULL", op);
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  pthread_mutex_lock(&c->mu);
  c->op = op;
  if (c->broken || atomic_load(&c->aborted)) {
    nrt_set_error_message("%s: communicator '%s' (rank %d of %d) is broken by an earlier error: %s",
                          op, c->name, c->rank, c->world_size,
                          c->broken ? c->broken_message : "aborted (nrt_comm_abort)");
    pthread_mutex_unlock(&c->mu);
    return NRT_ERROR_PEER_FAILED;
  }
  c->deadline_ns = deadline_after(c->timeout_ms);
  if (c->pending.active) {
    nrt_status st = nrt_coll_finish_pending(c);
    c->op = op;
    if (st != NRT_SUCCESS) {
      pthread_mutex_unlock(&c->mu);
      return st;
    }
    c->deadline_ns = deadline_after(c->timeout_ms);
  }
  return NRT_SUCCESS;
}

nrt_status nrt_coll_end(nrt_comm *c, nrt_status st) {
  c->op = NULL;
  pthread_mutex_unlock(&c->mu);
  return st;
}

/* ---- creation ------------------------------------------------------------------------ */
/* What a rank publishes through the exchange. */
typedef struct seg_record {
  char shm_name[128];
  int32_t pid, rank, world_size, reserved;
  uint64_t nonce, segment_bytes;
} seg_record;

static size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

static void layout(nrt_comm *c) {
  size_t n = (size_t)c->world_size;
  c->rx_tail_offset = round_up(sizeof(nrt_coll_header), NRT_COLL_LINE);
  c->tx_head_offset = c->rx_tail_offset + n * sizeof(nrt_coll_counter);
  c->ring_offset = round_up(c->tx_head_offset + n * sizeof(nrt_coll_counter), 4096);
  c->slot_offset = round_up(c->ring_offset + n * c->mailbox_bytes, 4096);
  c->segment_bytes = c->slot_offset + 2 * c->slot_bytes;
}

/* Segment names: "/nrt-<name>-r<rank>-<pid>-<nonce>", the name reduced to
 * characters a file name may hold, so a leak (there should be none) says
 * whose it is. */
static void segment_name(const nrt_comm *c, uint64_t nonce, char *out, size_t size) {
  char clean[48];
  size_t k = 0;
  for (const char *s = c->name; *s && k < sizeof clean - 1; s++)
    clean[k++] = (char)((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
                                (*s >= '0' && *s <= '9') || *s == '_' || *s == '.'
                            ? *s
                            : '_');
  clean[k] = '\0';
  snprintf(out, size, "/nrt-%s-r%d-%d-%08llx", clean, c->rank, (int)getpid(),
           (unsigned long long)(nonce & 0xffffffffull));
}

static uint64_t random_nonce(void) {
  uint64_t v = 0;
  if (getrandom(&v, sizeof v, GRND_NONBLOCK) != (ssize_t)sizeof v)
    v = nrt_coll_now_ns() ^ ((uint64_t)getpid() << 32);
  return v | 1; /* never 0: an unwritten header has nonce 0 */
}

static void exchange_key(const nrt_comm *c, int rank, char *out, size_t size) {
  snprintf(out, size, "%s/nrt_comm/segment/%d", c->name, rank);
}

static void free_comm(nrt_comm *c) {
  if (!c) return;
  if (c->peers) {
    for (int p = 0; p < c->world_size; p++)
      if (c->peers[p].base) munmap(c->peers[p].base, c->segment_bytes);
    free(c->peers);
  }
  if (c->rx) {
    for (int p = 0; p < c->world_size; p++) {
      nrt_coll_rx *rx = &c->rx[p];
      free(rx->pending);
      for (nrt_coll_msg *m = rx->queue_head; m;) {
        nrt_coll_msg *next = m->next;
        free(m);
        m = next;
      }
    }
    free(c->rx);
  }
  free(c->tx_head);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

/* Creates, sizes and maps this rank's segment. */
static nrt_status create_own_segment(nrt_comm *c, uint64_t nonce) {
  nrt_coll_peer *me = &c->peers[c->rank];
  segment_name(c, nonce, me->shm_name, sizeof me->shm_name);
  int fd = shm_open(me->shm_name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0)
    return nrt_coll_invalid(c, NRT_ERROR_INTERNAL, "shm_open(%s) failed: %s", me->shm_name,
                            strerror(errno));
  int err = ftruncate(fd, (off_t)c->segment_bytes) != 0 ? errno : 0;
  void *base = err ? MAP_FAILED : mmap(NULL, c->segment_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (!err && base == MAP_FAILED) err = errno;
  close(fd);
  if (err) {
    shm_unlink(me->shm_name);
    return nrt_coll_invalid(c, err == ENOMEM || err == ENOSPC ? NRT_ERROR_OUT_OF_MEMORY : NRT_ERROR_INTERNAL,
                            "shared segment %s of %zu bytes: %s", me->shm_name, c->segment_bytes,
                            strerror(err));
  }
  me->base = base;
  me->hdr = base;
  me->pid = getpid();
  /* ftruncate zeroed the segment: every counter starts at 0, state RUNNING. */
  nrt_coll_header *h = me->hdr;
  h->nonce = nonce;
  h->rank = c->rank;
  h->world_size = c->world_size;
  h->pid = (int32_t)getpid();
  h->slot_bytes = c->slot_bytes;
  h->mailbox_bytes = c->mailbox_bytes;
  h->segment_bytes = c->segment_bytes;
  atomic_store(&h->state, NRT_COLL_RUNNING);
  atomic_thread_fence(memory_order_release);
  h->magic = NRT_COLL_MAGIC;
  return NRT_SUCCESS;
}

/* Maps peer p's segment, named in its record, and checks it is the one. */
static nrt_status map_peer(nrt_comm *c, int p, const seg_record *rec) {
  nrt_coll_peer *peer = &c->peers[p];
  snprintf(peer->shm_name, sizeof peer->shm_name, "%s", rec->shm_name);
  peer->pid = rec->pid;
  if (rec->rank != p || rec->world_size != c->world_size || rec->segment_bytes != c->segment_bytes)
    return nrt_coll_fail(c, NRT_ERROR_INVALID_ARGUMENT,
                         "rank %d joined with rank %d of %d and a %llu-byte segment (this rank: %zu "
                         "bytes): every rank must pass the same world size and options",
                         p, rec->rank, rec->world_size, (unsigned long long)rec->segment_bytes,
                         c->segment_bytes);
  int fd = shm_open(rec->shm_name, O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) {
    if (errno == ENOENT)
      return nrt_coll_fail(c, NRT_ERROR_PEER_FAILED,
                           "rank %d's segment %s is gone (rank %d gave up or a stale name under "
                           "this communicator name was found)",
                           p, rec->shm_name, p);
    return nrt_coll_fail(c, NRT_ERROR_INTERNAL, "shm_open(%s): %s", rec->shm_name, strerror(errno));
  }
  void *base = mmap(NULL, c->segment_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = base == MAP_FAILED ? errno : 0;
  close(fd);
  if (err) return nrt_coll_fail(c, NRT_ERROR_INTERNAL, "mmap of rank %d's segment: %s", p, strerror(err));
  peer->base = base;
  peer->hdr = base;
  if (peer->hdr->magic != NRT_COLL_MAGIC || peer->hdr->nonce != rec->nonce)
    return nrt_coll_fail(c, NRT_ERROR_INTERNAL, "rank %d's segment %s does not hold what it announced",
                         p, rec->shm_name);
  return NRT_SUCCESS;
}

/* Every rank's record from the exchange, with one deadline; the ranks that
 * did not publish in time are named together. */
static nrt_status gather_records(nrt_comm *c, const nrt_comm_exchange *ex, seg_record *recs) {
  char key[256], missing[600] = "";
  size_t k = 0;
  int nmissing = 0;
  for (int p = 0; p < c->world_size; p++) {
    if (p == c->rank) continue;
    exchange_key(c, p, key, sizeof key);
    uint64_t now = nrt_coll_now_ns();
    int64_t left = nmissing || now >= c->deadline_ns ? 0 : (int64_t)((c->deadline_ns - now) / 1000000ull);
    size_t got = 0;
    nrt_status st = ex->get(ex->ctx, key, left, &recs[p], sizeof recs[p], &got);
    if (st == NRT_ERROR_TIMEOUT) {
      int w = snprintf(missing + k, sizeof missing - k, "%s%d", nmissing ? ", " : "", p);
      if (w > 0 && k + (size_t)w < sizeof missing) k += (size_t)w;
      nmissing++;
      continue;
    }
    if (st != NRT_SUCCESS)
      return nrt_coll_fail(c, st, "exchange get(\"%s\") failed: %s", key, nrt_last_error_message());
    if (got != sizeof recs[p])
      return nrt_coll_fail(c, NRT_ERROR_INTERNAL, "exchange key \"%s\" holds %zu bytes, not a segment record",
                           key, got);
  }
  if (nmissing)
    return nrt_coll_fail(c, NRT_ERROR_TIMEOUT, "timed out after %lld ms: %s %s did not join",
                         (long long)c->timeout_ms, nmissing == 1 ? "rank" : "ranks", missing);
  return NRT_SUCCESS;
}

typedef struct mapped_ready {
  atomic_uint *mapped;
  unsigned want;
} mapped_ready;
static bool mapped_ready_fn(const void *ctx) {
  const mapped_ready *r = ctx;
  return atomic_load_explicit(r->mapped, memory_order_acquire) >= r->want;
}

/* Until every peer has mapped this rank's segment; then it may be unlinked. */
static nrt_status wait_mapped(nrt_comm *c) {
  nrt_coll_header *h = c->peers[c->rank].hdr;
  mapped_ready r = {&h->mapped, (unsigned)c->world_size - 1};
  if (nrt_spin_until(mapped_ready_fn, &r, SPIN_NS)) return NRT_SUCCESS;
  char why[600];
  for (;;) {
    unsigned seen = atomic_load(&h->mapped);
    if (seen >= r.want) return NRT_SUCCESS;
    for (int p = 0; p < c->world_size; p++)
      if (p != c->rank && peer_gone(c, p, why, sizeof why))
        return nrt_coll_fail(c, NRT_ERROR_PEER_FAILED, "%s", why);
    uint64_t now = nrt_coll_now_ns();
    if (now >= c->deadline_ns)
      return nrt_coll_fail(c, NRT_ERROR_TIMEOUT, "timed out after %lld ms waiting for %u of %d peers to "
                           "map this rank's segment", (long long)c->timeout_ms, r.want - seen,
                           c->world_size - 1);
    futex_wait(&h->mapped, seen, SLICE_NS);
  }
}

nrt_status nrt_comm_create(int rank, int world_size, const char *name,
                           const nrt_comm_exchange *exchange, int64_t timeout_ms,
                           const nrt_comm_options *options, nrt_comm **out_comm) {
  if (!out_comm) {
    nrt_set_error_message("nrt_comm_create: out_comm is NULL");
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  *out_comm = NULL;
  if (world_size < 1 || world_size > NRT_COMM_MAX_RANKS || rank < 0 || rank >= world_size) {
    nrt_set_error_message("nrt_comm_create: rank %d of world size %d (world size 1..%d, rank below it)",
                          rank, world_size, NRT_COMM_MAX_RANKS);
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  if (!name || !name[0] || strlen(name) >= 128) {
    nrt_set_error_message("nrt_comm_create: the name must be 1..127 characters");
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  if (timeout_ms <= 0) {
    nrt_set_error_message("nrt_comm_create: timeout_ms must be positive, got %lld", (long long)timeout_ms);
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  if (world_size > 1 && (!exchange || !exchange->set || !exchange->get)) {
    nrt_set_error_message("nrt_comm_create: world size %d needs an exchange with set and get", world_size);
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  nrt_comm_options opt = options ? *options : (nrt_comm_options){0};
  size_t slot = opt.slot_bytes ? opt.slot_bytes : DEFAULT_SLOT_BYTES;
  /* The minimum holds all_to_all's row of counts (8 * 256 bytes) and a
   * 64-byte part per pair. */
  if (slot < MIN_SLOT_BYTES) {
    nrt_set_error_message("nrt_comm_create: slot_bytes %zu is below the minimum %zu", slot, MIN_SLOT_BYTES);
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  size_t mbox = opt.mailbox_bytes ? opt.mailbox_bytes : world_size > 16 ? (size_t)64 << 10 : (size_t)256 << 10;
  if (mbox < 4096) {
    nrt_set_error_message("nrt_comm_create: mailbox_bytes %zu is below the minimum 4096", mbox);
    return NRT_ERROR_INVALID_ARGUMENT;
  }

  nrt_comm *c = calloc(1, sizeof *c);
  if (!c) return NRT_ERROR_OUT_OF_MEMORY;
  pthread_mutex_init(&c->mu, NULL);
  c->rank = rank;
  c->world_size = world_size;
  snprintf(c->name, sizeof c->name, "%s", name);
  c->timeout_ms = timeout_ms;
  c->slot_bytes = round_up(slot, 4096);
  c->mailbox_bytes = round_up(mbox, 64);
  c->small_bytes = opt.small_bytes ? opt.small_bytes : DEFAULT_SMALL_BYTES;
  if (c->small_bytes > c->slot_bytes) c->small_bytes = c->slot_bytes;
  layout(c);
  c->op = "nrt_comm_create";
  c->deadline_ns = deadline_after(timeout_ms);
  c->peers = calloc((size_t)world_size, sizeof *c->peers);
  c->rx = calloc((size_t)world_size, sizeof *c->rx);
  c->tx_head = calloc((size_t)world_size, sizeof *c->tx_head);
  seg_record *recs = calloc((size_t)world_size, sizeof *recs);
  if (!c->peers || !c->rx || !c->tx_head || !recs) {
    free(recs);
    free_comm(c);
    return NRT_ERROR_OUT_OF_MEMORY;
  }

  uint64_t nonce = random_nonce();
  nrt_status st = create_own_segment(c, nonce);
  if (st != NRT_SUCCESS) {
    free(recs);
    free_comm(c);
    return st;
  }
  nrt_coll_peer *me = &c->peers[rank];
  if (world_size > 1) {
    seg_record mine = {.pid = (int32_t)getpid(), .rank = rank, .world_size = world_size,
                       .nonce = nonce, .segment_bytes = c->segment_bytes};
    snprintf(mine.shm_name, sizeof mine.shm_name, "%s", me->shm_name);
    char key[256];
    exchange_key(c, rank, key, sizeof key);
    st = exchange->set(exchange->ctx, key, &mine, sizeof mine);
    if (st != NRT_SUCCESS) st = nrt_coll_fail(c, st, "exchange set(\"%s\") failed: %s", key, nrt_last_error_message());
    if (st == NRT_SUCCESS) st = gather_records(c, exchange, recs);
    for (int p = 0; p < world_size && st == NRT_SUCCESS; p++)
      if (p != rank) st = map_peer(c, p, &recs[p]);
    if (st == NRT_SUCCESS)
      for (int p = 0; p < world_size; p++)
        if (p != rank) {
          atomic_fetch_add(&c->peers[p].hdr->mapped, 1);
          futex_wake_all(&c->peers[p].hdr->mapped);
        }
    if (st == NRT_SUCCESS) st = wait_mapped(c);
  }
  /* Unlinked now, whatever happened: the segment lives on while mapped. */
  shm_unlink(me->shm_name);
  if (st != NRT_SUCCESS) {
    /* A peer that died before unlinking its own name would leak it. */
    for (int p = 0; p < world_size; p++)
      if (p != rank && recs[p].shm_name[0] && !pid_alive(recs[p].pid)) shm_unlink(recs[p].shm_name);
    free(recs);
    free_comm(c);
    return st;
  }
  free(recs);
  c->op = NULL;
  *out_comm = c;
  return NRT_SUCCESS;
}

nrt_status nrt_comm_destroy(nrt_comm *c) {
  if (!c) return NRT_SUCCESS;
  pthread_mutex_lock(&c->mu);
  announce(c, NRT_COLL_LEFT, NULL);
  pthread_mutex_unlock(&c->mu);
  free_comm(c);
  return NRT_SUCCESS;
}

void nrt_comm_abort(nrt_comm *c) {
  if (!c) return;
  atomic_store(&c->aborted, true);
  /* Without the lock: the header is shared memory, announce only stores. */
  announce(c, NRT_COLL_FAILED, "aborted (nrt_comm_abort)");
}

int nrt_comm_rank(const nrt_comm *c) { return c ? c->rank : -1; }
int nrt_comm_size(const nrt_comm *c) { return c ? c->world_size : 0; }
const char *nrt_comm_name(const nrt_comm *c) { return c ? c->name : ""; }

nrt_status nrt_comm_set_timeout(nrt_comm *c, int64_t timeout_ms) {
  if (!c || timeout_ms <= 0) {
    nrt_set_error_message("nrt_comm_set_timeout: needs a communicator and a positive timeout");
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  pthread_mutex_lock(&c->mu);
  c->timeout_ms = timeout_ms;
  pthread_mutex_unlock(&c->mu);
  return NRT_SUCCESS;
}
