/* Device memory: one caching allocator per logical core, modelled on
 * PyTorch's CUDA caching allocator.
 *
 * Layout. Requests are rounded up to 512 bytes. Requests of <= 1 MiB come
 * from the small pool, carved out of 2 MiB segments; larger ones from the
 * large pool, whose segments are the request rounded up to 2 MiB, except
 * that 1..10 MiB requests get a 20 MiB segment to share (falling back to
 * the rounded size when the capacity cannot take 20 MiB). Segments are
 * mmap'd from the host lazily (MAP_NORESERVE: untouched pages cost
 * nothing) and counted against the device's capacity.
 *
 * Blocks. A segment is a list of blocks in address order. A free block is
 * kept in its pool's free tree, ordered by (stream, size, address), so a
 * lookup is best-fit among the requesting stream's blocks. Taking a block
 * splits off the tail if enough would remain (>= 512 bytes small, > 1 MiB
 * large); freeing merges with free neighbours.
 *
 * Stream-ordered reuse. A segment, and every block in it, belongs to the
 * stream it was reserved for, and only allocations on that stream reuse
 * its blocks: work on one stream runs in order, so a block freed after its
 * last use was enqueued can be handed out at once to later work of the
 * same stream. A block also used on other streams (nrt_record_stream) is
 * "pending" after nrt_free until each of those streams has completed the
 * work enqueued before the free; pending blocks are checked at each
 * malloc. Segments go back to the host (OOM retry, nrt_empty_cache) only
 * once their stream has completed the work enqueued before their last
 * free, so no queued kernel can touch unmapped memory.
 *
 * Locking. One mutex per device allocator; it is never held while
 * waiting for streams (the OOM path drops it to wait), and nothing else is
 * locked under it, so the allocator can never deadlock with a stream.
 * nrt_free may be called from anywhere, stream tasks included; nrt_malloc
 * and nrt_empty_cache may wait for the device's streams, so a stream task
 * must not call them. */
#include <stdatomic.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "memory/memory.h"
#include "nrt/profiler.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define MIN_BLOCK_SIZE ((size_t)512)
#define SMALL_SIZE MiB                /* largest request served by the small pool */
#define SMALL_SEGMENT (2 * MiB)
#define LARGE_SHARED_LIMIT (10 * MiB) /* requests below share a 20 MiB segment */
#define LARGE_SHARED_SEGMENT (20 * MiB)
#define SEGMENT_ROUND (2 * MiB)
#define MAX_REQUEST ((size_t)1 << 60)

enum { BLOCK_FREE, BLOCK_ALLOCATED, BLOCK_PENDING };

typedef struct stream_use {
  nrt_stream *stream;
  uint64_t target; /* the stream's enqueued count at free time */
} stream_use;

typedef struct segment segment;

typedef struct block {
  char *ptr;
  size_t size;
  size_t requested;
  segment *seg;
  nrt_stream *stream;         /* = seg->stream, kept here for the tree order */
  struct block *prev, *next;  /* address-order neighbours in the segment */
  struct block *left, *right; /* free tree (a treap) */
  uint32_t priority;
  unsigned char state;
  bool counted_split; /* counted in inactive_split stats */
  bool poisoned;      /* written by a kernel that failed: reads must fail */
  int nuses, cap_uses;
  stream_use *uses;           /* streams recorded with nrt_record_stream */
  struct block *pending_next; /* pending list link; also the spare-struct list */
} block;

struct segment {
  char *base;
  size_t size;
  int pool;
  nrt_stream *stream;
  block *head;            /* the block at base; never freed before the segment */
  uint64_t free_ticket;   /* stream's enqueued count at the latest free inside */
};

typedef struct allocator {
  pthread_mutex_t mu;
  int device;
  uint64_t capacity;
  block *free_root[NRT_POOL_COUNT]; /* indexed by NRT_POOL_SMALL / NRT_POOL_LARGE */
  block **table;                    /* allocated blocks by ptr (open addressing) */
  size_t table_cap, table_count;
  unsigned table_bits;
  segment **segs; /* sorted by base address */
  size_t nsegs, cap_segs;
  block *pending;
  block *spare_blocks;
  int nspare;
  nrt_memory_stats stats;
} allocator;

/* Blocks currently poisoned, over all devices. */
static atomic_int poisoned_blocks;

/* The runtime context's allocators, one per device; set up from the
 * configuration at the first memory call (memory_ready). */
static allocator allocators[NRT_MAX_DEVICES];
static int allocator_count;
static pthread_once_t memory_once = PTHREAD_ONCE_INIT;
/* Frees usually come from the thread that allocated on that device; the
 * hint saves probing the other devices' tables. */
static _Thread_local int tls_device_hint;

/* Pinned host memory registry: sorted by address. */
typedef struct host_block {
  char *ptr;
  size_t size;
} host_block;
static struct {
  pthread_mutex_t mu;
  host_block *blocks;
  size_t count, cap;
  nrt_host_memory_stats stats;
} host_registry = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* ---- helpers ------------------------------------------------------------------ */

static size_t round_up(size_t v, size_t m) { return (v + m - 1) / m * m; }

static void format_bytes(uint64_t b, char *buf, size_t size) {
  if (b < KiB)
    snprintf(buf, size, "%llu bytes", (unsigned long long)b);
  else if (b < MiB)
    snprintf(buf, size, "%.2f KiB", (double)b / (double)KiB);
  else if (b < ((uint64_t)1 << 30))
    snprintf(buf, size, "%.2f MiB", (double)b / (double)MiB);
  else
    snprintf(buf, size, "%.2f GiB", (double)b / (double)((uint64_t)1 << 30));
}

static void stat_add(nrt_stat *s, int64_t delta) {
  s->current += delta;
  if (delta > 0) {
    s->allocated += delta;
    if (s->current > s->peak) s->peak = s->current;
  } else {
    s->freed -= delta;
  }
}

/* A pool's stat and the all-pools total move together. */
static void stat_update(nrt_stat *stat, int pool, int64_t delta) {
  stat_add(&stat[NRT_POOL_ALL], delta);
  stat_add(&stat[pool], delta);
}

static uint32_t hash_priority(const void *p) {
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return (uint32_t)x;
}

static block *block_new(allocator *a) {
  block *b = a->spare_blocks;
  if (b) {
    a->spare_blocks = b->pending_next;
    a->nspare--;
  } else {
    b = malloc(sizeof *b);
    if (!b) return NULL;
  }
  memset(b, 0, sizeof *b);
  return b;
}

static void block_delete(allocator *a, block *b) {
  free(b->uses);
  if (a->nspare < 1024) {
    b->pending_next = a->spare_blocks;
    a->spare_blocks = b;
    a->nspare++;
  } else {
    free(b);
  }
}

/* ---- free tree: a treap keyed by (stream, size, ptr) --------------------------- */

static int key_cmp(const nrt_stream *stream, size_t size, const char *ptr, const block *b) {
  if (stream != b->stream) return (uintptr_t)stream < (uintptr_t)b->stream ? -1 : 1;
  if (size != b->size) return size < b->size ? -1 : 1;
  if (ptr != b->ptr) return (uintptr_t)ptr < (uintptr_t)b->ptr ? -1 : 1;
  return 0;
}

static block *treap_insert(block *root, block *n) {
  if (!root) return n;
  if (key_cmp(n->stream, n->size, n->ptr, root) < 0) {
    root->left = treap_insert(root->left, n);
    if (root->left->priority > root->priority) { /* rotate right */
      block *l = root->left;
      root->left = l->right;
      l->right = root;
      return l;
    }
  } else {
    root->right = treap_insert(root->right, n);
    if (root->right->priority > root->priority) { /* rotate left */
      block *r = root->right;
      root->right = r->left;
      r->left = root;
      return r;
    }
  }
  return root;
}

static block *treap_join(block *l, block *r) {
  if (!l) return r;
  if (!r) return l;
  if (l->priority > r->priority) {
    l->right = treap_join(l->right, r);
    return l;
  }
  r->left = treap_join(l, r->left);
  return r;
}

static block *treap_erase(block *root, block *n) {
  if (root == n) return treap_join(n->left, n->right);
  if (key_cmp(n->stream, n->size, n->ptr, root) < 0)
    root->left = treap_erase(root->left, n);
  else
    root->right = treap_erase(root->right, n);
  return root;
}

static void free_tree_insert(allocator *a, block *b) {
  b->left = b->right = NULL;
  b->priority = hash_priority(b->ptr);
  a->free_root[b->seg->pool] = treap_insert(a->free_root[b->seg->pool], b);
  /* A free block that is not its whole segment is fragmentation: count
   * it while it sits in the tree (splits and merges always take a block
   * out of the tree first, so the count stays exact). */
  if (b->prev || b->next) {
    b->counted_split = true;
    stat_update(a->stats.inactive_split, b->seg->pool, 1);
    stat_update(a->stats.inactive_split_bytes, b->seg->pool, (int64_t)b->size);
  }
}

static void free_tree_remove(allocator *a, block *b) {
  a->free_root[b->seg->pool] = treap_erase(a->free_root[b->seg->pool], b);
  b->left = b->right = NULL;
  if (b->counted_split) {
    b->counted_split = false;
    stat_update(a->stats.inactive_split, b->seg->pool, -1);
    stat_update(a->stats.inactive_split_bytes, b->seg->pool, -(int64_t)b->size);
  }
}

/* Smallest free block of `stream` with size >= `size`, removed from the tree. */
static block *free_tree_take(allocator *a, int pool, nrt_stream *stream, size_t size) {
  block *best = NULL;
  for (block *n = a->free_root[pool]; n;) {
    if (key_cmp(stream, size, NULL, n) <= 0) {
      best = n;
      n = n->left;
    } else {
      n = n->right;
    }
  }
  if (!best || best->stream != stream) return NULL;
  free_tree_remove(a, best);
  return best;
}

/* ---- allocated-block table: open addressing, linear probing ------------------- */

static size_t table_home(const allocator *a, const void *p) {
  uint64_t x = (uint64_t)(uintptr_t)p >> 9; /* blocks are 512-aligned */
  return (size_t)((x * 0x9e3779b97f4a7c15ull) >> (64 - a->table_bits));
}

static block *table_find(const allocator *a, const void *p, size_t *out_slot) {
  if (!a->table) return NULL;
  size_t mask = a->table_cap - 1;
  for (size_t i = table_home(a, p);; i = (i + 1) & mask) {
    block *b = a->table[i];
    if (!b) return NULL;
    if (b->ptr == p) {
      if (out_slot) *out_slot = i;
      return b;
    }
  }
}

static void table_put(allocator *a, block *b) {
  size_t mask = a->table_cap - 1;
  size_t i = table_home(a, b->ptr);
  while (a->table[i]) i = (i + 1) & mask;
  a->table[i] = b;
  a->table_count++;
}

/* Makes room for one more entry (load factor <= 1/2). */
static bool table_reserve(allocator *a) {
  if (a->table && (a->table_count + 1) * 2 <= a->table_cap) return true;
  unsigned bits = a->table ? a->table_bits + 1 : 10;
  block **old = a->table;
  size_t old_cap = a->table_cap;
  block **fresh = calloc((size_t)1 << bits, sizeof *fresh);
  if (!fresh) return false;
  a->table = fresh;
  a->table_bits = bits;
  a->table_cap = (size_t)1 << bits;
  a->table_count = 0;
  for (size_t i = 0; i < old_cap; i++)
    if (old[i]) table_put(a, old[i]);
  free(old);
  return true;
}

/* Backward-shift deletion keeps probe chains intact without tombstones. */
static void table_erase_slot(allocator *a, size_t i) {
  size_t mask = a->table_cap - 1;
  size_t j = i;
  for (;;) {
    j = (j + 1) & mask;
    block *b = a->table[j];
    if (!b) break;
    size_t home = table_home(a, b->ptr);
    /* b may move to i if its home is not cyclically within (i, j]. */
    bool in_range = i <= j ? (home > i && home <= j) : (home > i || home <= j);
    if (!in_range) {
      a->table[i] = b;
      i = j;
    }
  }
  a->table[i] = NULL;
  a->table_count--;
}

/* ---- segments ------------------------------------------------------------------ */

static size_t segment_index(const allocator *a, const char *p) {
  /* first segment whose base is > p */
  size_t lo = 0, hi = a->nsegs;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (a->segs[mid]->base <= p)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static segment *segment_containing(const allocator *a, const void *p) {
  size_t i = segment_index(a, p);
  if (i == 0) return NULL;
  segment *s = a->segs[i - 1];
  return (const char *)p < s->base + s->size ? s : NULL;
}

/* Maps a new segment and returns its single whole block (not in the tree).
 * NULL if the capacity cannot take it or the host refuses; *out_errno is
 * set in the latter case. */
static block *segment_create(allocator *a, int pool, nrt_stream *stream, size_t size,
                             int *out_errno) {
  uint64_t reserved = (uint64_t)a->stats.reserved_bytes[NRT_POOL_ALL].current;
  if (size > a->capacity || reserved > a->capacity - size) return NULL;
  if (a->nsegs == a->cap_segs) {
    size_t cap = a->cap_segs ? a->cap_segs * 2 : 64;
    segment **grown = realloc(a->segs, cap * sizeof *grown);
    if (!grown) {
      *out_errno = ENOMEM;
      return NULL;
    }
    a->segs = grown;
    a->cap_segs = cap;
  }
  segment *seg = malloc(sizeof *seg);
  block *b = block_new(a);
  void *p = MAP_FAILED;
  if (seg && b)
    p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
             -1, 0);
  if (p == MAP_FAILED) {
    *out_errno = (seg && b) ? errno : ENOMEM;
    free(seg);
    if (b) block_delete(a, b);
    return NULL;
  }
  seg->base = p;
  seg->size = size;
  seg->pool = pool;
  seg->stream = stream;
  seg->head = b;
  seg->free_ticket = 0;
  size_t i = segment_index(a, seg->base);
  memmove(&a->segs[i + 1], &a->segs[i], (a->nsegs - i) * sizeof *a->segs);
  a->segs[i] = seg;
  a->nsegs++;

  b->ptr = seg->base;
  b->size = size;
  b->seg = seg;
  b->stream = stream;
  b->state = BLOCK_FREE;
  stat_update(a->stats.segment, pool, 1);
  stat_update(a->stats.reserved_bytes, pool, (int64_t)size);
  a->stats.num_device_alloc++;
  return b;
}

/* Unmaps every segment that is one free block whose stream has finished
 * the work enqueued before its last free. Returns the number released. */
static size_t release_cached_segments(allocator *a) {
  size_t kept = 0, released = 0;
  for (size_t i = 0; i < a->nsegs; i++) {
    segment *seg = a->segs[i];
    block *b = seg->head;
    bool whole_free = b->state == BLOCK_FREE && !b->next;
    if (!whole_free || nrt_stream_completed(seg->stream) < seg->free_ticket) {
      a->segs[kept++] = seg;
      continue;
    }
    free_tree_remove(a, b);
    munmap(seg->base, seg->size);
    stat_update(a->stats.segment, seg->pool, -1);
    stat_update(a->stats.reserved_bytes, seg->pool, -(int64_t)seg->size);
    a->stats.num_device_free++;
    block_delete(a, b);
    free(seg);
    released++;
  }
  a->nsegs = kept;
  return released;
}

/* ---- block life cycle ------------------------------------------------------------ */

/* A block nobody uses any more: merge with free neighbours, cache it. */
static void block_release(allocator *a, block *b) {
  int pool = b->seg->pool;
  stat_update(a->stats.active, pool, -1);
  stat_update(a->stats.active_bytes, pool, -(int64_t)b->size);
  free(b->uses);
  b->uses = NULL;
  b->nuses = b->cap_uses = 0;
  b->state = BLOCK_FREE;
  block *p = b->prev;
  if (p && p->state == BLOCK_FREE) {
    free_tree_remove(a, p);
    p->size += b->size;
    p->next = b->next;
    if (b->next) b->next->prev = p;
    block_delete(a, b);
    b = p;
  }
  block *n = b->next;
  if (n && n->state == BLOCK_FREE) {
    free_tree_remove(a, n);
    b->size += n->size;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    block_delete(a, n);
  }
  free_tree_insert(a, b);
}

static bool uses_completed(const block *b) {
  for (int i = 0; i < b->nuses; i++)
    if (nrt_stream_completed(b->uses[i].stream) < b->uses[i].target) return false;
  return true;
}

static void process_pending(allocator *a) {
  block **link = &a->pending;
  while (*link) {
    block *b = *link;
    if (uses_completed(b)) {
      *link = b->pending_next;
      b->pending_next = NULL;
      block_release(a, b);
    } else {
      link = &b->pending_next;
    }
  }
}

/* Hands out `b` (already out of the tree) for a request of `rounded`
 * bytes, splitting off the tail when enough remains. */
static void block_take(allocator *a, block *b, size_t rounded, size_t requested) {
  int pool = b->seg->pool;
  size_t remaining = b->size - rounded;
  bool split = pool == NRT_POOL_SMALL ? remaining >= MIN_BLOCK_SIZE : remaining > SMALL_SIZE;
  if (split) {
    block *r = block_new(a);
    if (r) { /* without a struct the block is simply handed out whole */
      r->ptr = b->ptr + rounded;
      r->size = remaining;
      r->seg = b->seg;
      r->stream = b->stream;
      r->state = BLOCK_FREE;
      r->prev = b;
      r->next = b->next;
      if (b->next) b->next->prev = r;
      b->next = r;
      b->size = rounded;
      free_tree_insert(a, r);
    }
  }
  b->state = BLOCK_ALLOCATED;
  b->requested = requested;
  table_put(a, b);
  stat_update(a->stats.allocation, pool, 1);
  stat_update(a->stats.allocated_bytes, pool, (int64_t)b->size);
  stat_update(a->stats.active, pool, 1);
  stat_update(a->stats.active_bytes, pool, (int64_t)b->size);
  stat_update(a->stats.requested_bytes, pool, (int64_t)requested);
}

/* A fresh segment for the request: the preferred size first, then the
 * smallest that fits the request (helps near the capacity limit). */
static block *segment_for(allocator *a, int pool, nrt_stream *stream, size_t rounded,
                          int *out_errno) {
  size_t minimal = round_up(rounded, SEGMENT_ROUND);
  size_t preferred = pool == NRT_POOL_SMALL ? SMALL_SEGMENT
                     : rounded < LARGE_SHARED_LIMIT ? LARGE_SHARED_SEGMENT
                                                     : minimal;
  block *b = segment_create(a, pool, stream, preferred, out_errno);
  if (!b && minimal != preferred) b = segment_create(a, pool, stream, minimal, out_errno);
  return b;
}

/* ---- initialisation and fork --------------------------------------------------- */

static void memory_atfork_prepare(void) {
  pthread_mutex_lock(&host_registry.mu);
  for (int d = 0; d < allocator_count; d++) pthread_mutex_lock(&allocators[d].mu);
}

static void memory_atfork_parent(void) {
  for (int d = allocator_count; d-- > 0;) pthread_mutex_unlock(&allocators[d].mu);
  pthread_mutex_unlock(&host_registry.mu);
}

/* The child inherits consistent allocator state (the locks were held over
 * the fork) and its own copy of every segment (MAP_PRIVATE). The stream
 * reset in the child marks all parent work as completed, so pending blocks
 * become reusable at the next malloc. */
static void memory_atfork_child(void) {
  for (int d = 0; d < allocator_count; d++) pthread_mutex_init(&allocators[d].mu, NULL);
  pthread_mutex_init(&host_registry.mu, NULL);
}

static void memory_register_atfork(void) {
  pthread_atfork(memory_atfork_prepare, memory_atfork_parent, memory_atfork_child);
}

static nrt_status check_device(const char *fn, int device) {
  nrt_memory_ready();
  if (nrt_device_valid(device)) return NRT_SUCCESS;
  nrt_set_error_message("%s: invalid device %d", fn, device);
  return NRT_ERROR_INVALID_DEVICE;
}

static void memory_init(void) {
  const nrt_config *c = nrt_config_get();
  for (int d = 0; d < c->device_count; d++) {
    allocator *a = &allocators[d];
    pthread_mutex_init(&a->mu, NULL);
    a->device = d;
    a->capacity = c->capacity;
    a->stats.capacity = c->capacity;
  }
  allocator_count = c->device_count;
  memory_register_atfork();
}

void nrt_memory_ready(void) { pthread_once(&memory_once, memory_init); }

uint64_t nrt_memory_capacity(int device) {
  nrt_memory_ready();
  allocator *a = &allocators[device];
  pthread_mutex_lock(&a->mu);
  uint64_t c = a->capacity;
  pthread_mutex_unlock(&a->mu);
  return c;
}

nrt_status nrt_set_memory_capacity(int device, uint64_t bytes) {
  nrt_status st = check_device("nrt_set_memory_capacity", device);
  if (st != NRT_SUCCESS) return st;
  allocator *a = &allocators[device];
  pthread_mutex_lock(&a->mu);
  if (a->pending) process_pending(a);
  uint64_t reserved = (uint64_t)a->stats.reserved_bytes[NRT_POOL_ALL].current;
  if (bytes < reserved) {
    pthread_mutex_unlock(&a->mu);
    char want[32], have[32];
    format_bytes(bytes, want, sizeof want);
    format_bytes(reserved, have, sizeof have);
    nrt_set_error_message(
        "nrt_set_memory_capacity: neuron:%d has %s reserved, more than the %s asked for "
        "(nrt_empty_cache may release some)",
        device, have, want);
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  a->capacity = bytes;
  a->stats.capacity = bytes;
  pthread_mutex_unlock(&a->mu);
  return NRT_SUCCESS;
}


/* ---- malloc / free ------------------------------------------------------------ */

static nrt_status out_of_memory(allocator *a, size_t requested, int host_errno) {
  a->stats.num_ooms++;
  char req[32], alloc[32], res[32], cap[32];
  format_bytes(requested, req, sizeof req);
  format_bytes((uint64_t)a->stats.allocated_bytes[NRT_POOL_ALL].current, alloc, sizeof alloc);
  format_bytes((uint64_t)a->stats.reserved_bytes[NRT_POOL_ALL].current, res, sizeof res);
  format_bytes(a->capacity, cap, sizeof cap);
  if (host_errno)
    nrt_set_error_message(
        "neuron:%d host out of memory: tried to allocate %s; the host refused a new segment "
        "(%s); %s already allocated, %s reserved, capacity %s",
        a->device, req, strerror(host_errno), alloc, res, cap);
  else
    nrt_set_error_message(
        "neuron:%d out of memory: tried to allocate %s; %s already allocated, %s reserved, "
        "capacity %s",
        a->device, req, alloc, res, cap);
  return NRT_ERROR_OUT_OF_MEMORY;
}

nrt_status nrt_malloc(size_t size, nrt_stream *stream, void **out_ptr) {
  nrt_memory_ready();
  if (!out_ptr || !stream) {
    nrt_set_error_message("nrt_malloc: %s is NULL", out_ptr ? "stream" : "out_ptr");
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  *out_ptr = NULL;
  if (size == 0) return NRT_SUCCESS;
  int device = nrt_stream_device(stream);
  allocator *a = &allocators[device];
  tls_device_hint = device;
  if (size > MAX_REQUEST) {
    pthread_mutex_lock(&a->mu);
    nrt_status st = out_of_memory(a, size, 0);
    pthread_mutex_unlock(&a->mu);
    return st;
  }
  size_t rounded = round_up(size, MIN_BLOCK_SIZE);
  int pool = rounded <= SMALL_SIZE ? NRT_POOL_SMALL : NRT_POOL_LARGE;
  int host_errno = 0;

  pthread_mutex_lock(&a->mu);
  if (!table_reserve(a)) {
    nrt_status st = out_of_memory(a, size, ENOMEM);
    pthread_mutex_unlock(&a->mu);
    return st;
  }
  if (a->pending) process_pending(a);
  block *b = free_tree_take(a, pool, stream, rounded);
  if (!b) b = segment_for(a, pool, stream, rounded, &host_errno);
  if (!b) {
    /* Cached memory must go back to the host before the request can fit;
     * wait for the device first so no queued kernel still uses it. The
     * lock is dropped meanwhile so frees and other streams go on. */
    pthread_mutex_unlock(&a->mu);
    nrt_device_wait_idle(device);
    pthread_mutex_lock(&a->mu);
    if (a->pending) process_pending(a);
    b = free_tree_take(a, pool, stream, rounded);
    if (!b) {
      a->stats.num_alloc_retries++;
      release_cached_segments(a);
      host_errno = 0;
      b = segment_for(a, pool, stream, rounded, &host_errno);
    }
    if (!b) {
      nrt_status st = out_of_memory(a, size, host_errno);
      pthread_mutex_unlock(&a->mu);
      return st;
    }
  }
  block_take(a, b, rounded, size);
  pthread_mutex_unlock(&a->mu);
  *out_ptr = b->ptr;
  /* A graph capture tracks allocation instances, not addresses: this
   * address may have held another of its buffers a moment ago. */
  if (nrt_capture_active(device)) nrt_capture_notify_malloc(stream, b->ptr, size);
  return NRT_SUCCESS;
}

/* The allocated block containing `p`, found through its segment. */
static block *allocated_block_containing(const allocator *a, const void *p) {
  segment *seg = segment_containing(a, p);
  if (!seg) return NULL;
  for (block *b = seg->head; b; b = b->next)
    if ((const char *)p < b->ptr + b->size)
      return b->state == BLOCK_ALLOCATED ? b : NULL;
  return NULL;
}

/* Locks the allocator owning the allocated block that starts at `ptr`
 * (or, with `interior`, contains it) and returns the block; NULL, with
 * nothing locked, if there is none. out_slot (may be NULL) receives the
 * block's table slot for an exact match. */
static block *lock_allocated_block(const void *ptr, bool interior, allocator **out_a,
                                   size_t *out_slot) {
  int n = allocator_count;
  int hint = tls_device_hint < n ? tls_device_hint : 0;
  for (int k = 0; k < n; k++) {
    int d = k == 0 ? hint : (k == hint ? 0 : k); /* hint first, then the rest */
    allocator *a = &allocators[d];
    pthread_mutex_lock(&a->mu);
    block *b = table_find(a, ptr, out_slot);
    if (!b && interior) b = allocated_block_containing(a, ptr);
    if (b) {
      *out_a = a;
      return b;
    }
    pthread_mutex_unlock(&a->mu);
  }
  return NULL;
}

nrt_status nrt_free(void *ptr) {
  if (!ptr) return NRT_SUCCESS;
  nrt_memory_ready();
  allocator *a;
  size_t slot;
  block *b = lock_allocated_block(ptr, false, &a, &slot);
  if (!b) {
    nrt_set_error_message("nrt_free: %p is not an allocated device pointer", ptr);
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  table_erase_slot(a, slot);
  if (b->poisoned) {
    b->poisoned = false;
    atomic_fetch_sub(&poisoned_blocks, 1);
  }
  int pool = b->seg->pool;
  stat_update(a->stats.allocation, pool, -1);
  stat_update(a->stats.allocated_bytes, pool, -(int64_t)b->size);
  stat_update(a->stats.requested_bytes, pool, -(int64_t)b->requested);
  b->seg->free_ticket = nrt_stream_enqueued(b->seg->stream);
  bool pending = false;
  for (int i = 0; i < b->nuses; i++) {
    b->uses[i].target = nrt_stream_enqueued(b->uses[i].stream);
    if (nrt_stream_completed(b->uses[i].stream) < b->uses[i].target) pending = true;
  }
  if (pending) {
    b->state = BLOCK_PENDING;
    b->pending_next = a->pending;
    a->pending = b;
  } else {
    block_release(a, b);
  }
  int device = a->device;
  pthread_mutex_unlock(&a->mu);
  if (nrt_capture_active(device)) nrt_capture_notify_free(device, ptr);
  return NRT_SUCCESS;
}

/* ---- poisoned blocks ------------------------------------------------------------
 * A kernel that fails leaves its outputs partly written. Their blocks are
 * poisoned until freed, so a later read (a copy, or a launch taking them as
 * input) fails instead of returning garbage once the first error has been
 * reported. The counter keeps the check free while nothing is poisoned. */

void nrt_memory_poison(const void *ptr) {
  if (!ptr) return;
  nrt_memory_ready();
  allocator *a;
  block *b = lock_allocated_block(ptr, true, &a, NULL);
  if (!b) return;
  if (!b->poisoned) {
    b->poisoned = true;
    atomic_fetch_add(&poisoned_blocks, 1);
  }
  pthread_mutex_unlock(&a->mu);
}

bool nrt_memory_is_poisoned(const void *ptr) {
  if (!ptr || atomic_load_explicit(&poisoned_blocks, memory_order_relaxed) == 0) return false;
  allocator *a;
  block *b = lock_allocated_block(ptr, true, &a, NULL);
  if (!b) return false;
  bool poisoned = b->poisoned;
  pthread_mutex_unlock(&a->mu);
  return poisoned;
}

nrt_status nrt_record_stream(void *ptr, nrt_stream *stream) {
  if (!ptr || !stream) {
    nrt_set_error_message("nrt_record_stream: %s is NULL", ptr ? "stream" : "ptr");
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  nrt_memory_ready();
  allocator *a;
  block *b = lock_allocated_block(ptr, true, &a, NULL);
  if (!b) {
    nrt_set_error_message("nrt_record_stream: %p is not an allocated device pointer", ptr);
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  nrt_status st = NRT_SUCCESS;
  bool known = stream == b->stream;
  for (int i = 0; i < b->nuses && !known; i++) known = b->uses[i].stream == stream;
  if (!known) {
    if (b->nuses == b->cap_uses) {
      int cap = b->cap_uses ? b->cap_uses * 2 : 2;
      stream_use *grown = realloc(b->uses, (size_t)cap * sizeof *grown);
      if (!grown) {
        st = NRT_ERROR_OUT_OF_MEMORY;
        nrt_set_error_message("nrt_record_stream: host out of memory");
      } else {
        b->uses = grown;
        b->cap_uses = cap;
      }
    }
    if (st == NRT_SUCCESS) b->uses[b->nuses++] = (stream_use){stream, 0};
  }
  pthread_mutex_unlock(&a->mu);
  return st;
}

nrt_status nrt_pointer_get_device(const void *ptr, int *out_device) {
  nrt_memory_ready();
  if (!out_device) return NRT_ERROR_INVALID_ARGUMENT;
  if (ptr) {
    for (int d = 0; d < allocator_count; d++) {
      allocator *a = &allocators[d];
      pthread_mutex_lock(&a->mu);
      segment *s = segment_containing(a, ptr);
      pthread_mutex_unlock(&a->mu);
      if (s) {
        *out_device = d;
        return NRT_SUCCESS;
      }
    }
  }
  nrt_set_error_message("nrt_pointer_get_device: %p is not device memory", ptr);
  return NRT_ERROR_INVALID_ARGUMENT;
}

nrt_status nrt_empty_cache(int device) {
  nrt_status st = check_device("nrt_empty_cache", device);
  if (st != NRT_SUCCESS) return st;
  /* Waiting leaves sticky errors for the next synchronising call: freeing
   * the cache is not the place to report a kernel failure. */
  nrt_device_wait_idle(device);
  allocator *a = &allocators[device];
  pthread_mutex_lock(&a->mu);
  if (a->pending) process_pending(a);
  release_cached_segments(a);
  pthread_mutex_unlock(&a->mu);
  return NRT_SUCCESS;
}

/* ---- statistics ------------------------------------------------------------- */

static nrt_stat *stat_arrays(nrt_memory_stats *s, int *out_count) {
  /* The nrt_stat arrays are the leading members of nrt_memory_stats. */
  _Static_assert(offsetof(nrt_memory_stats, allocation) == 0, "stats layout");
  _Static_assert(offsetof(nrt_memory_stats, num_alloc_retries) ==
                     9 * NRT_POOL_COUNT * sizeof(nrt_stat),
                 "stats layout");
  *out_count = 9 * NRT_POOL_COUNT;
  return s->allocation;
}

nrt_status nrt_memory_get_stats(int device, nrt_memory_stats *out_stats) {
  nrt_status st = check_device("nrt_memory_get_stats", device);
  if (st != NRT_SUCCESS) return st;
  if (!out_stats) return NRT_ERROR_INVALID_ARGUMENT;
  allocator *a = &allocators[device];
  pthread_mutex_lock(&a->mu);
  if (a->pending) process_pending(a); /* report blocks whose streams have moved on as free */
  *out_stats = a->stats;
  pthread_mutex_unlock(&a->mu);
  return NRT_SUCCESS;
}

nrt_status nrt_memory_snapshot(int device, nrt_memory_segment_info *out_segments, size_t segment_cap,
                               nrt_memory_block_info *out_blocks, size_t block_cap,
                               size_t *out_nsegments, size_t *out_nblocks) {
  nrt_status st = check_device("nrt_memory_snapshot", device);
  if (st != NRT_SUCCESS) return st;
  if (!out_nsegments || !out_nblocks || (segment_cap && !out_segments) || (block_cap && !out_blocks))
    return NRT_ERROR_INVALID_ARGUMENT;
  allocator *a = &allocators[device];
  pthread_mutex_lock(&a->mu);
  if (a->pending) process_pending(a); /* blocks whose streams have moved on are free */
  size_t nb = 0;
  for (size_t s = 0; s < a->nsegs; s++) {
    const segment *seg = a->segs[s];
    if (s < segment_cap)
      out_segments[s] = (nrt_memory_segment_info){(uint64_t)(uintptr_t)seg->base, seg->size, seg->pool,
                                                  nrt_stream_index(seg->stream), nb, 0};
    for (const block *b = seg->head; b; b = b->next, nb++) {
      if (s < segment_cap) out_segments[s].nblocks++;
      if (nb < block_cap)
        out_blocks[nb] = (nrt_memory_block_info){(uint64_t)(uintptr_t)b->ptr, b->size,
                                                 b->state == BLOCK_FREE ? 0 : b->requested,
                                                 b->state == BLOCK_ALLOCATED ? NRT_BLOCK_ALLOCATED
                                                 : b->state == BLOCK_PENDING ? NRT_BLOCK_PENDING_FREE
                                                                             : NRT_BLOCK_FREE};
    }
  }
  *out_nsegments = a->nsegs;
  *out_nblocks = nb;
  pthread_mutex_unlock(&a->mu);
  return NRT_SUCCESS;
}

nrt_status nrt_memory_reset_peak_stats(int device) {
  nrt_status st = check_device("nrt_memory_reset_peak_stats", device);
  if (st != NRT_SUCCESS) return st;
  allocator *a = &allocators[device];
  pthread_mutex_lock(&a->mu);
  int n;
  nrt_stat *stats = stat_arrays(&a->stats, &n);
  for (int i = 0; i < n; i++) stats[i].peak = stats[i].current;
  pthread_mutex_unlock(&a->mu);
  return NRT_SUCCESS;
}

nrt_status nrt_memory_reset_accumulated_stats(int device) {
  nrt_status st = check_device("nrt_memory_reset_accumulated_stats", device);
  if (st != NRT_SUCCESS) return st;
  allocator *a = &allocators[device];
  pthread_mutex_lock(&a->mu);
  int n;
  nrt_stat *stats = stat_arrays(&a->stats, &n);
  for (int i = 0; i < n; i++) stats[i].allocated = stats[i].freed = 0;
  a->stats.num_alloc_retries = 0;
  a->stats.num_ooms = 0;
  a->stats.num_device_alloc = 0;
  a->stats.num_device_free = 0;
  pthread_mutex_unlock(&a->mu);
  return NRT_SUCCESS;
}

/* free = what a request could still get: the capacity not reserved plus
 * the cached (reserved but unused) bytes, i.e. capacity - active bytes. */
nrt_status nrt_mem_get_info(int device, size_t *out_free, size_t *out_total) {
  nrt_status st = check_device("nrt_mem_get_info", device);
  if (st != NRT_SUCCESS) return st;
  if (!out_free || !out_total) return NRT_ERROR_INVALID_ARGUMENT;
  allocator *a = &allocators[device];
  pthread_mutex_lock(&a->mu);
  if (a->pending) process_pending(a);
  uint64_t reserved = (uint64_t)a->stats.reserved_bytes[NRT_POOL_ALL].current;
  uint64_t active = (uint64_t)a->stats.active_bytes[NRT_POOL_ALL].current;
  uint64_t cached = reserved - active;
  uint64_t cap = a->capacity;
  pthread_mutex_unlock(&a->mu);
  *out_free = (size_t)(cap > reserved ? cap - reserved + cached : cached);
  *out_total = (size_t)cap;
  return NRT_SUCCESS;
}

/* ---- pinned host memory ------------------------------------------------------------ */

/* Index of the first registered block with ptr > p. Lock held. */
static size_t host_index(const char *p) {
  size_t lo = 0, hi = host_registry.count;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (host_registry.blocks[mid].ptr <= p)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

nrt_status nrt_host_alloc(size_t size, void **out_ptr) {
  if (!out_ptr) return NRT_ERROR_INVALID_ARGUMENT;
  *out_ptr = NULL;
  if (size == 0) return NRT_SUCCESS;
  void *p = NULL;
  /* Page-aligned, as page-locked buffers are, so a DMA engine behind
   * this interface could map them directly. */
  if (posix_memalign(&p, 4096, size) != 0) {
    char req[32];
    format_bytes(size, req, sizeof req);
    nrt_set_error_message("nrt_host_alloc: host out of memory: tried to allocate %s", req);
    return NRT_ERROR_OUT_OF_MEMORY;
  }
  pthread_mutex_lock(&host_registry.mu);
  if (host_registry.count == host_registry.cap) {
    size_t cap = host_registry.cap ? host_registry.cap * 2 : 64;
    host_block *grown = realloc(host_registry.blocks, cap * sizeof *grown);
    if (!grown) {
      pthread_mutex_unlock(&host_registry.mu);
      free(p);
      nrt_set_error_message("nrt_host_alloc: host out of memory for the registry");
      return NRT_ERROR_OUT_OF_MEMORY;
    }
    host_registry.blocks = grown;
    host_registry.cap = cap;
  }
  size_t i = host_index(p);
  memmove(&host_registry.blocks[i + 1], &host_registry.blocks[i],
          (host_registry.count - i) * sizeof *host_registry.blocks);
  host_registry.blocks[i] = (host_block){p, size};
  host_registry.count++;
  stat_add(&host_registry.stats.allocations, 1);
  stat_add(&host_registry.stats.allocated_bytes, (int64_t)size);
  pthread_mutex_unlock(&host_registry.mu);
  *out_ptr = p;
  return NRT_SUCCESS;
}

nrt_status nrt_host_free(void *ptr) {
  if (!ptr) return NRT_SUCCESS;
  pthread_mutex_lock(&host_registry.mu);
  size_t i = host_index(ptr);
  if (i == 0 || host_registry.blocks[i - 1].ptr != ptr) {
    pthread_mutex_unlock(&host_registry.mu);
    nrt_set_error_message("nrt_host_free: %p was not returned by nrt_host_alloc", ptr);
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  size_t size = host_registry.blocks[i - 1].size;
  memmove(&host_registry.blocks[i - 1], &host_registry.blocks[i],
          (host_registry.count - i) * sizeof *host_registry.blocks);
  host_registry.count--;
  stat_add(&host_registry.stats.allocations, -1);
  stat_add(&host_registry.stats.allocated_bytes, -(int64_t)size);
  pthread_mutex_unlock(&host_registry.mu);
  free(ptr);
  return NRT_SUCCESS;
}

nrt_status nrt_host_memory_get_stats(nrt_host_memory_stats *out_stats) {
  if (!out_stats) return NRT_ERROR_INVALID_ARGUMENT;
  pthread_mutex_lock(&host_registry.mu);
  *out_stats = host_registry.stats;
  pthread_mutex_unlock(&host_registry.mu);
  return NRT_SUCCESS;
}

bool nrt_host_is_pinned(const void *ptr) {
  if (!ptr) return false;
  pthread_mutex_lock(&host_registry.mu);
  size_t i = host_index(ptr);
  bool pinned = i > 0 && (const char *)ptr < host_registry.blocks[i - 1].ptr +
                                                  host_registry.blocks[i - 1].size;
  pthread_mutex_unlock(&host_registry.mu);
  return pinned;
}

/* ---- copies ------------------------------------------------------------------- */

/* Below this a single memcpy beats waking the pool. */
#define PARALLEL_COPY_MIN (4 * MiB)
#define PARALLEL_COPY_GRAIN (256 * KiB)

typedef struct copy_arg {
  void *dst;
  const void *src;
  size_t bytes;
} copy_arg;

static void copy_range(void *ctx, int64_t begin, int64_t end) {
  copy_arg *c = ctx;
  memcpy((char *)c->dst + begin, (const char *)c->src + begin, (size_t)(end - begin));
}

static nrt_status run_copy(void *p) {
  copy_arg *c = p;
  if (nrt_memory_is_poisoned(c->src)) {
    nrt_memory_poison(c->dst);
    nrt_set_error_message("the copy's source was written by a kernel that failed earlier (its error was "
                          "reported then); its contents are undefined");
    return NRT_ERROR_KERNEL_FAILED;
  }
  const char *d = c->dst, *s = c->src;
  bool overlap = d < s + c->bytes && s < d + c->bytes;
  if (overlap)
    memmove(c->dst, c->src, c->bytes);
  else if (c->bytes >= PARALLEL_COPY_MIN)
    nrt_parallel_for((int64_t)c->bytes, (int64_t)PARALLEL_COPY_GRAIN, copy_range, c);
  else
    memcpy(c->dst, c->src, c->bytes);
  return NRT_SUCCESS;
}

/* Copies up to this size cost less than a hand-off to the stream's worker. */
#define SMALL_COPY_BYTES ((size_t)64 << 10)

nrt_status nrt_memcpy_async(void *dst, const void *src, size_t bytes, nrt_memcpy_kind kind,
                            nrt_stream *stream) {
  static const char *const names[] = {"memcpy_HtoD", "memcpy_DtoH", "memcpy_DtoD"};
  if (!stream || (unsigned)kind > NRT_MEMCPY_DEVICE_TO_DEVICE) {
    nrt_set_error_message("nrt_memcpy_async: %s", stream ? "invalid kind" : "stream is NULL");
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  if (bytes == 0) return NRT_SUCCESS;
  if (!dst || !src) {
    nrt_set_error_message("nrt_memcpy_async: NULL %s for a %zu-byte copy", dst ? "src" : "dst",
                          bytes);
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  if (nrt_capture_active(nrt_stream_device(stream))) {
    nrt_status st = nrt_capture_notify_memcpy(stream, dst, src, bytes, (int)kind);
    if (st != NRT_SUCCESS) return st;
  }
  copy_arg c = {dst, src, bytes};
  /* A copy reads and writes each byte once. */
  nrt_task_cost cost = {NRT_ACTIVITY_COPY, -1, 2 * (uint64_t)bytes, 0};
  /* A short copy (a scalar read back by .item(), a small upload) runs on
   * the caller's thread when the stream is idle. */
  unsigned flags = bytes <= SMALL_COPY_BYTES ? NRT_TASK_RUN_IF_IDLE : 0;
  return nrt_stream_enqueue_ex(stream, names[kind], run_copy, &c, sizeof c, NULL, flags, &cost, NULL);
}

nrt_status nrt_memcpy(void *dst, const void *src, size_t bytes, nrt_memcpy_kind kind,
                      nrt_stream *stream) {
  nrt_status st = nrt_memcpy_async(dst, src, bytes, kind, stream);
  if (st != NRT_SUCCESS) return st;
  return nrt_stream_synchronize(stream);
}
