/* The collective algorithms over the step protocol of comm.c.
 *
 * Data moves through each rank's slot in its segment: a rank copies its
 * input into its own slot (the one copy out of private memory), peers read
 * it from there directly. Large buffers go in rounds of one slot, so the
 * segment stays small whatever the message size, and consecutive rounds use
 * the two slots alternately so a rank can fill the next while slower peers
 * still read the last.
 *
 * all_reduce picks by size: up to small_bytes, one step in which every rank
 * reduces every rank's whole input (latency: one exchange); above, each round
 * is a reduce-scatter (each rank folds its 1/N share of the round from all
 * slots, writing the result back into its own slot) followed by an
 * all-gather of the shares (bandwidth: each byte is folded once, by one
 * rank). Both fold in rank order, so the results agree bit for bit with each
 * other, across ranks, and with a single process folding rank 0, 1, ... */
#include <string.h>

#include "collectives/collectives.h"

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
/* Bytes left of a piece starting at `off` of a `total`-byte buffer, at most `cap`. */
static int64_t clip(int64_t total, int64_t off, int64_t cap) {
  return total > off ? min64(total - off, cap) : 0;
}
/* Shares and pieces start on 64-byte boundaries: whole vectors, and no
 * cache line written by two ranks. */
static int64_t align_elems(size_t es) { return es >= 64 ? 1 : (int64_t)(64 / es); }

/* Elements per rank-piece when a round holds one piece for each rank. */
static int64_t piece_elems(const nrt_comm *c, size_t es) {
  int64_t a = align_elems(es);
  int64_t per = (int64_t)(c->slot_bytes / ((size_t)c->world_size * es));
  return max64(per / a * a, 1);
}

/* ---- argument checks (before any step: nothing to undo) ----------------------- */
static nrt_status check_dtype(nrt_comm *c, nrt_dtype dt) {
  if ((unsigned)dt >= NRT_DTYPE_COUNT)
    return nrt_coll_invalid(c, NRT_ERROR_INVALID_ARGUMENT, "invalid dtype %d", (int)dt);
  return NRT_SUCCESS;
}
static nrt_status check_count(nrt_comm *c, int64_t count, nrt_dtype dt, const char *what) {
  if (count < 0 || count > INT64_MAX / 16 / (int64_t)c->world_size)
    return nrt_coll_invalid(c, NRT_ERROR_INVALID_ARGUMENT, "%s is %lld elements of %s", what,
                            (long long)count, nrt_dtype_name(dt));
  return NRT_SUCCESS;
}
static nrt_status check_buf(nrt_comm *c, const void *p, int64_t count, const char *what) {
  if (count > 0 && !p)
    return nrt_coll_invalid(c, NRT_ERROR_INVALID_ARGUMENT, "%s is NULL for %lld elements", what,
                            (long long)count);
  return NRT_SUCCESS;
}
static nrt_status check_reduce(nrt_comm *c, nrt_reduce_op op, nrt_dtype dt) {
  if ((unsigned)op >= NRT_REDUCE_OP_COUNT)
    return nrt_coll_invalid(c, NRT_ERROR_INVALID_ARGUMENT, "invalid reduce op %d", (int)op);
  if (!nrt_reduce_supported(op, dt))
    return nrt_coll_invalid(c, NRT_ERROR_UNSUPPORTED, "reduce op %s does not take dtype %s",
                            nrt_reduce_op_name(op), nrt_dtype_name(dt));
  return NRT_SUCCESS;
}
static nrt_status check_root(nrt_comm *c, int root) {
  if (root < 0 || root >= c->world_size)
    return nrt_coll_invalid(c, NRT_ERROR_INVALID_ARGUMENT, "root %d is not a rank (world size %d)",
                            root, c->world_size);
  return NRT_SUCCESS;
}
/* A per-rank count array with its buffers. */
static nrt_status check_lists(nrt_comm *c, const int64_t *counts, const void *const *bufs,
                              nrt_dtype dt, const char *what) {
  if (!counts || !bufs)
    return nrt_coll_invalid(c, NRT_ERROR_INVALID_ARGUMENT, "%s: counts and buffers are required", what);
  for (int p = 0; p < c->world_size; p++) {
    nrt_status st = check_count(c, counts[p], dt, what);
    if (st == NRT_SUCCESS) st = check_buf(c, bufs[p], counts[p], what);
    if (st != NRT_SUCCESS) return st;
  }
  return NRT_SUCCESS;
}

#define TRY(expr)                         \
  do {                                    \
    nrt_status st_ = (expr);              \
    if (st_ != NRT_SUCCESS) return st_;   \
  } while (0)

/* ---- all_reduce and reduce ------------------------------------------------------ */
/* One step: every rank (or the root only) folds all slots. */
static nrt_status reduce_small(nrt_comm *c, const char *send, char *recv, int64_t count, nrt_dtype dt,
                               nrt_reduce_op op, double factor, int root) {
  const int n = c->world_size, r = c->rank;
  const void *srcs[NRT_COMM_MAX_RANKS];
  int h = nrt_coll_next_round(c);
  TRY(nrt_coll_wait_writable(c));
  memcpy(nrt_coll_slot(c, r, h), send, (size_t)count * nrt_dtype_size(dt));
  nrt_coll_publish(c);
  if (root >= 0 && r != root) return NRT_SUCCESS;
  TRY(nrt_coll_wait_all(c));
  for (int p = 0; p < n; p++) srcs[p] = nrt_coll_slot(c, p, h);
  nrt_coll_reduce(dt, op, factor, recv, srcs, n, count);
  return NRT_SUCCESS;
}

/* Rounds of reduce-scatter + all-gather (root < 0) or gather to root. */
static nrt_status reduce_large(nrt_comm *c, const char *send, char *recv, int64_t count, nrt_dtype dt,
                               nrt_reduce_op op, double factor, int root) {
  const int n = c->world_size, r = c->rank;
  const size_t es = nrt_dtype_size(dt);
  const int64_t q = piece_elems(c, es), round_elems = q * n, a = align_elems(es);
  const void *srcs[NRT_COMM_MAX_RANKS];
  /* The result streams past the caches when large, on 3 ranks and more: 4
   * ranks' 64 MiB all_reduce measured 43-49 ms against 46-61; 2 ranks
   * gained nothing (20-24 ms against 20-21). */
  const bool stream = n > 2 && (size_t)count * es >= NRT_COLL_STREAM_BYTES;
  for (int64_t off = 0; off < count; off += round_elems) {
    int64_t m = min64(round_elems, count - off);
    int64_t share = (m + n - 1) / n;
    share = (share + a - 1) / a * a; /* <= q: q is a multiple of a */
    int h = nrt_coll_next_round(c);
    char *mine = nrt_coll_slot(c, r, h);
    const char *in = send + off * (int64_t)es;
    int64_t s0 = min64(m, r * share), len = min64(m, s0 + share) - s0;
    /* Peers read the other shares from this rank's slot; its own share
     * only this rank reads, from the send buffer directly. */
    TRY(nrt_coll_wait_writable(c));
    nrt_coll_copy(mine, in, (size_t)s0 * es, false);
    nrt_coll_copy(mine + (s0 + len) * (int64_t)es, in + (s0 + len) * (int64_t)es, (size_t)(m - s0 - len) * es,
                  false);
    nrt_coll_publish(c);
    TRY(nrt_coll_wait_all(c));
    /* The result goes where the own share would have been staged: nobody
     * else reads that part of this slot. */
    if (len > 0) {
      for (int p = 0; p < n; p++) srcs[p] = p == r ? in + s0 * (int64_t)es : nrt_coll_slot(c, p, h) + s0 * (int64_t)es;
      nrt_coll_reduce(dt, op, factor, mine + s0 * (int64_t)es, srcs, n, len);
    }
    nrt_coll_publish(c);
    if (root >= 0 && r != root) continue;
    TRY(nrt_coll_wait_all(c));
    for (int p = 0; p < n; p++) {
      int64_t p0 = min64(m, p * share), plen = min64(m, p0 + share) - p0;
      if (plen > 0)
        nrt_coll_copy(recv + (off + p0) * (int64_t)es, nrt_coll_slot(c, p, h) + p0 * (int64_t)es,
                      (size_t)plen * es, stream);
    }
  }
  return NRT_SUCCESS;
}

static nrt_status reduce_any(nrt_comm *c, const void *send, void *recv, int64_t count, nrt_dtype dt,
                             nrt_reduce_op op, double factor, int root) {
  TRY(check_dtype(c, dt));
  TRY(check_reduce(c, op, dt));
  TRY(check_count(c, count, dt, "count"));
  TRY(check_buf(c, send, count, "send"));
  if (root < 0 || root == c->rank) TRY(check_buf(c, recv, count, "recv"));
  if (count == 0) return NRT_SUCCESS;
  if ((size_t)count * nrt_dtype_size(dt) <= c->small_bytes)
    return reduce_small(c, send, recv, count, dt, op, factor, root);
  return reduce_large(c, send, recv, count, dt, op, factor, root);
}

nrt_status nrt_comm_all_reduce(nrt_comm *c, const void *send, void *recv, int64_t count,
                               nrt_dtype dtype, nrt_reduce_op op, double factor) {
  nrt_status st = nrt_coll_begin(c, "nrt_comm_all_reduce");
  if (st != NRT_SUCCESS) return st;
  return nrt_coll_end(c, reduce_any(c, send, recv, count, dtype, op, factor, -1));
}

/* The eager form of reduce_small: the same steps (a peer running the
 * ordinary call meets it), but it never sleeps. It declines, changing
 * nothing, when the slot is still being read; once it has published, the
 * fold waits in c->pending if the peers are late. */
nrt_status nrt_comm_all_reduce_eager(nrt_comm *c, const void *send, void *recv, int64_t count,
                                     nrt_dtype dt, nrt_reduce_op op, double factor, uint64_t spin_ns,
                                     nrt_comm_eager *out_state) {
  if (!out_state) {
    nrt_set_error_message("nrt_comm_all_reduce_eager: out_state is NULL");
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  *out_state = NRT_COMM_EAGER_DECLINED;
  nrt_status st = nrt_coll_begin(c, "nrt_comm_all_reduce");
  if (st != NRT_SUCCESS) return st;
  st = check_dtype(c, dt);
  if (st == NRT_SUCCESS) st = check_reduce(c, op, dt);
  if (st == NRT_SUCCESS) st = check_count(c, count, dt, "count");
  if (st == NRT_SUCCESS) st = check_buf(c, send, count, "send");
  if (st == NRT_SUCCESS) st = check_buf(c, recv, count, "recv");
  const size_t bytes = (size_t)count * nrt_dtype_size(dt);
  if (st != NRT_SUCCESS || count == 0 || bytes > c->small_bytes || !nrt_coll_all_reached(c, c->seq, spin_ns))
    return nrt_coll_end(c, st);
  int h = nrt_coll_next_round(c);
  memcpy(nrt_coll_slot(c, c->rank, h), send, bytes);
  nrt_coll_publish(c);
  c->pending = (__typeof__(c->pending)){true, recv, count, dt, op, factor, h};
  if (!nrt_coll_all_reached(c, c->seq, spin_ns)) {
    *out_state = NRT_COMM_EAGER_STARTED;
    return nrt_coll_end(c, NRT_SUCCESS);
  }
  *out_state = NRT_COMM_EAGER_DONE;
  return nrt_coll_end(c, nrt_coll_finish_pending(c));
}

nrt_status nrt_coll_finish_pending(nrt_comm *c) {
  c->op = "nrt_comm_all_reduce";
  c->pending.active = false;
  TRY(nrt_coll_wait_all(c));
  const void *srcs[NRT_COMM_MAX_RANKS];
  for (int p = 0; p < c->world_size; p++) srcs[p] = nrt_coll_slot(c, p, c->pending.half);
  nrt_coll_reduce(c->pending.dtype, c->pending.op, c->pending.factor, c->pending.recv, srcs, c->world_size,
                  c->pending.count);
  return NRT_SUCCESS;
}

nrt_status nrt_comm_finish(nrt_comm *c) {
  nrt_status st = nrt_coll_begin(c, "nrt_comm_finish"); /* begin finishes what is pending */
  if (st != NRT_SUCCESS) return st;
  return nrt_coll_end(c, NRT_SUCCESS);
}

nrt_status nrt_comm_reduce(nrt_comm *c, const void *send, void *recv, int64_t count,
                           nrt_dtype dtype, nrt_reduce_op op, double factor, int root) {
  nrt_status st = nrt_coll_begin(c, "nrt_comm_reduce");
  if (st != NRT_SUCCESS) return st;
  st = check_root(c, root);
  if (st == NRT_SUCCESS) st = reduce_any(c, send, recv, count, dtype, op, factor, root);
  return nrt_coll_end(c, st);
}

/* ---- broadcast, gather, scatter -------------------------------------------------- */
static nrt_status broadcast(nrt_comm *c, char *buf, int64_t count, nrt_dtype dt, int root) {
  TRY(check_dtype(c, dt));
  TRY(check_root(c, root));
  TRY(check_count(c, count, dt, "count"));
  TRY(check_buf(c, buf, count, "buf"));
  const int64_t bytes = count * (int64_t)nrt_dtype_size(dt), chunk = (int64_t)c->slot_bytes;
  for (int64_t off = 0; off < bytes; off += chunk) {
    int64_t m = min64(chunk, bytes - off);
    int h = nrt_coll_next_round(c);
    if (c->rank == root) {
      TRY(nrt_coll_wait_writable(c));
      nrt_coll_copy(nrt_coll_slot(c, root, h), buf + off, (size_t)m, false);
      nrt_coll_publish(c);
    } else {
      nrt_coll_publish(c);
      TRY(nrt_coll_wait_rank(c, root));
      nrt_coll_copy(buf + off, nrt_coll_slot(c, root, h), (size_t)m, false);
    }
  }
  return NRT_SUCCESS;
}

nrt_status nrt_comm_broadcast(nrt_comm *c, void *buf, int64_t count, nrt_dtype dtype, int root) {
  nrt_status st = nrt_coll_begin(c, "nrt_comm_broadcast");
  if (st != NRT_SUCCESS) return st;
  return nrt_coll_end(c, broadcast(c, buf, count, dtype, root));
}

static nrt_status gather(nrt_comm *c, const char *send, char *recv, int64_t count, nrt_dtype dt, int root) {
  TRY(check_dtype(c, dt));
  TRY(check_root(c, root));
  TRY(check_count(c, count, dt, "count"));
  TRY(check_buf(c, send, count, "send"));
  if (c->rank == root) TRY(check_buf(c, recv, count, "recv"));
  const int64_t bytes = count * (int64_t)nrt_dtype_size(dt), chunk = (int64_t)c->slot_bytes;
  const int r = c->rank;
  for (int64_t off = 0; off < bytes; off += chunk) {
    int64_t m = min64(chunk, bytes - off);
    int h = nrt_coll_next_round(c);
    if (r != root) {
      TRY(nrt_coll_wait_writable(c));
      nrt_coll_copy(nrt_coll_slot(c, r, h), send + off, (size_t)m, false);
      nrt_coll_publish(c);
      continue;
    }
    nrt_coll_publish(c);
    memmove(recv + r * bytes + off, send + off, (size_t)m);
    TRY(nrt_coll_wait_all(c));
    for (int p = 0; p < c->world_size; p++)
      if (p != r) nrt_coll_copy(recv + p * bytes + off, nrt_coll_slot(c, p, h), (size_t)m, false);
  }
  return NRT_SUCCESS;
}

nrt_status nrt_comm_gather(nrt_comm *c, const void *send, void *recv, int64_t count,
                           nrt_dtype dtype, int root) {
  nrt_status st = nrt_coll_begin(c, "nrt_comm_gather");
  if (st != NRT_SUCCESS) return st;
  return nrt_coll_end(c, gather(c, send, recv, count, dtype, root));
}

static nrt_status scatter(nrt_comm *c, const char *send, char *recv, int64_t count, nrt_dtype dt, int root) {
  TRY(check_dtype(c, dt));
  TRY(check_root(c, root));
  TRY(check_count(c, count, dt, "count"));
  TRY(check_buf(c, recv, count, "recv"));
  if (c->rank == root) TRY(check_buf(c, send, count, "send"));
  const int64_t es = (int64_t)nrt_dtype_size(dt), q = piece_elems(c, (size_t)es);
  const int r = c->rank;
  for (int64_t off = 0; off < count; off += q) {
    int64_t m = min64(q, count - off);
    int h = nrt_coll_next_round(c);
    if (r == root) {
      char *mine = nrt_coll_slot(c, r, h);
      TRY(nrt_coll_wait_writable(c));
      for (int p = 0; p < c->world_size; p++)
        if (p != r) nrt_coll_copy(mine + p * q * es, send + (p * count + off) * es, (size_t)(m * es), false);
      nrt_coll_publish(c);
      memmove(recv + off * es, send + (r * count + off) * es, (size_t)(m * es));
    } else {
      nrt_coll_publish(c);
      TRY(nrt_coll_wait_rank(c, root));
      nrt_coll_copy(recv + off * es, nrt_coll_slot(c, root, h) + r * q * es, (size_t)(m * es), false);
    }
  }
  return NRT_SUCCESS;
}

nrt_status nrt_comm_scatter(nrt_comm *c, const void *send, void *recv, int64_t count,
                            nrt_dtype dtype, int root) {
  nrt_status st = nrt_coll_begin(c, "nrt_comm_scatter");
  if (st != NRT_SUCCESS) return st;
  return nrt_coll_end(c, scatter(c, send, recv, count, dtype, root));
}

/* ---- all_gather ---------------------------------------------------------------------- */
/* Rank p contributes bytes[p] from its send buffer into everyone's out[p]. */
static nrt_status gather_all(nrt_comm *c, const char *send, const int64_t *bytes, char *const *out) {
  const int r = c->rank;
  int64_t most = 0;
  for (int p = 0; p < c->world_size; p++) most = max64(most, bytes[p]);
  const int64_t chunk = (int64_t)c->slot_bytes;
  for (int64_t off = 0; off < most; off += chunk) {
    int h = nrt_coll_next_round(c);
    int64_t m = clip(bytes[r], off, chunk);
    TRY(nrt_coll_wait_writable(c));
    if (m) nrt_coll_copy(nrt_coll_slot(c, r, h), send + off, (size_t)m, false);
    nrt_coll_publish(c);
    TRY(nrt_coll_wait_all(c));
    for (int p = 0; p < c->world_size; p++) {
      int64_t mp = clip(bytes[p], off, chunk);
      if (mp) nrt_coll_copy(out[p] + off, nrt_coll_slot(c, p, h), (size_t)mp, false);
    }
  }
  return NRT_SUCCESS;
}

static nrt_status all_gather(nrt_comm *c, const char *send, char *recv, int64_t count, nrt_dtype dt) {
  TRY(check_dtype(c, dt));
  TRY(check_count(c, count, dt, "count"));
  TRY(check_buf(c, send, count, "send"));
  TRY(check_buf(c, recv, count, "recv"));
  int64_t bytes[NRT_COMM_MAX_RANKS];
  char *out[NRT_COMM_MAX_RANKS];
  const int64_t b = count * (int64_t)nrt_dtype_size(dt);
  for (int p = 0; p < c->world_size; p++) {
    bytes[p] = b;
    out[p] = recv + p * b;
  }
  return gather_all(c, send, bytes, out);
}

nrt_status nrt_comm_all_gather(nrt_comm *c, const void *send, void *recv, int64_t count,
                               nrt_dtype dtype) {
  nrt_status st = nrt_coll_begin(c, "nrt_comm_all_gather");
  if (st != NRT_SUCCESS) return st;
  return nrt_coll_end(c, all_gather(c, send, recv, count, dtype));
}

static nrt_status all_gatherv(nrt_comm *c, const char *send, int64_t send_count, void *const *recv_bufs,
                              const int64_t *recv_counts, nrt_dtype dt) {
  TRY(check_dtype(c, dt));
  TRY(check_lists(c, recv_counts, (const void *const *)recv_bufs, dt, "recv_counts"));
  if (send_count != recv_counts[c->rank])
    return nrt_coll_invalid(c, NRT_ERROR_INVALID_ARGUMENT,
                            "send_count %lld differs from recv_counts[%d] = %lld", (long long)send_count,
                            c->rank, (long long)recv_counts[c->rank]);
  TRY(check_buf(c, send, send_count, "send"));
  int64_t bytes[NRT_COMM_MAX_RANKS];
  const int64_t es = (int64_t)nrt_dtype_size(dt);
  for (int p = 0; p < c->world_size; p++) bytes[p] = recv_counts[p] * es;
  return gather_all(c, send, bytes, (char *const *)recv_bufs);
}

nrt_status nrt_comm_all_gatherv(nrt_comm *c, const void *send, int64_t send_count,
                                void *const *recv_bufs, const int64_t *recv_counts,
                                nrt_dtype dtype) {
  nrt_status st = nrt_coll_begin(c, "nrt_comm_all_gatherv");
  if (st != NRT_SUCCESS) return st;
  return nrt_coll_end(c, all_gatherv(c, send, send_count, recv_bufs, recv_counts, dtype));
}

/* ---- reduce_scatter ------------------------------------------------------------------ */
/* Block p (counts[p] elements at blocks[p]) of every rank reduces into rank
 * p's recv. A round stages piece `off` of every block: one step, and each
 * rank folds its own piece from all slots. */
static nrt_status scatter_reduce(nrt_comm *c, const char *const *blocks, const int64_t *counts, char *recv,
                                 nrt_dtype dt, nrt_reduce_op op, double factor) {
  const int n = c->world_size, r = c->rank;
  const int64_t es = (int64_t)nrt_dtype_size(dt), q = piece_elems(c, (size_t)es);
  int64_t most = 0;
  for (int p = 0; p < n; p++) most = max64(most, counts[p]);
  const void *srcs[NRT_COMM_MAX_RANKS];
  for (int64_t off = 0; off < most; off += q) {
    int h = nrt_coll_next_round(c);
    char *mine = nrt_coll_slot(c, r, h);
    TRY(nrt_coll_wait_writable(c));
    /* Every block but this rank's own, which only it folds (from blocks[r]). */
    for (int p = 0; p < n; p++) {
      int64_t m = p == r ? 0 : clip(counts[p], off, q);
      if (m) nrt_coll_copy(mine + p * q * es, blocks[p] + off * es, (size_t)(m * es), false);
    }
    nrt_coll_publish(c);
    TRY(nrt_coll_wait_all(c));
    int64_t m = clip(counts[r], off, q);
    if (!m) continue;
    for (int p = 0; p < n; p++) srcs[p] = p == r ? blocks[r] + off * es : nrt_coll_slot(c, p, h) + r * q * es;
    nrt_coll_reduce(dt, op, factor, recv + off * es, srcs, n, m);
  }
  return NRT_SUCCESS;
}

static nrt_status reduce_scatter(nrt_comm *c, const char *send, char *recv, int64_t count, nrt_dtype dt,
                                 nrt_reduce_op op, double factor) {
  TRY(check_dtype(c, dt));
  TRY(check_reduce(c, op, dt));
  TRY(check_count(c, count, dt, "count"));
  TRY(check_buf(c, send, count, "send"));
  TRY(check_buf(c, recv, count, "recv"));
  const char *blocks[NRT_COMM_MAX_RANKS];
  int64_t counts[NRT_COMM_MAX_RANKS];
  const int64_t b = count * (int64_t)nrt_dtype_size(dt);
  for (int p = 0; p < c->world_size; p++) {
    blocks[p] = send + p * b;
    counts[p] = count;
  }
  return scatter_reduce(c, blocks, counts, recv, dt, op, factor);
}

nrt_status nrt_comm_reduce_scatter(nrt_comm *c, const void *send, void *recv, int64_t count,
                                   nrt_dtype dtype, nrt_reduce_op op, double factor) {
  nrt_status st = nrt_coll_begin(c, "nrt_comm_reduce_scatter");
  if (st != NRT_SUCCESS) return st;
  return nrt_coll_end(c, reduce_scatter(c, send, recv, count, dtype, op, factor));
}

static nrt_status reduce_scatterv(nrt_comm *c, const void *const *send_bufs, char *recv,
                                  const int64_t *recv_counts, nrt_dtype dt, nrt_reduce_op op,
                                  double factor) {
  TRY(check_dtype(c, dt));
  TRY(check_reduce(c, op, dt));
  TRY(check_lists(c, recv_counts, send_bufs, dt, "recv_counts"));
  TRY(check_buf(c, recv, recv_counts[c->rank], "recv"));
  return scatter_reduce(c, (const char *const *)send_bufs, recv_counts, recv, dt, op, factor);
}

nrt_status nrt_comm_reduce_scatterv(nrt_comm *c, const void *const *send_bufs, void *recv,
                                    const int64_t *recv_counts, nrt_dtype dtype,
                                    nrt_reduce_op op, double factor) {
  nrt_status st = nrt_coll_begin(c, "nrt_comm_reduce_scatterv");
  if (st != NRT_SUCCESS) return st;
  return nrt_coll_end(c, reduce_scatterv(c, send_bufs, recv, recv_counts, dtype, op, factor));
}

/* ---- all_to_all --------------------------------------------------------------------- */
/* A first step shares every rank's send counts (the N x N table), so every
 * rank knows how many rounds the largest pair needs and each receiver can
 * check its counts against its senders'. Each round then gives every
 * ordered pair a 1/N part of the sender's slot. */
static nrt_status all_to_all(nrt_comm *c, const void *const *send_bufs, const int64_t *send_counts,
                             void *const *recv_bufs, const int64_t *recv_counts, nrt_dtype dt) {
  TRY(check_dtype(c, dt));
  TRY(check_lists(c, send_counts, send_bufs, dt, "send_counts"));
  TRY(check_lists(c, recv_counts, (const void *const *)recv_bufs, dt, "recv_counts"));
  const int n = c->world_size, r = c->rank;
  const int64_t es = (int64_t)nrt_dtype_size(dt);
  int h = nrt_coll_next_round(c);
  TRY(nrt_coll_wait_writable(c));
  memcpy(nrt_coll_slot(c, r, h), send_counts, (size_t)n * sizeof(int64_t));
  nrt_coll_publish(c);
  TRY(nrt_coll_wait_all(c));
  int64_t most = 0;
  for (int p = 0; p < n; p++) {
    const int64_t *row = (const int64_t *)nrt_coll_slot(c, p, h);
    for (int q = 0; q < n; q++)
      if (q != p) most = max64(most, row[q] * es);
    if (row[r] != recv_counts[p])
      return nrt_coll_fail(c, NRT_ERROR_INVALID_ARGUMENT,
                           "rank %d sends %lld elements to this rank, recv_counts[%d] is %lld", p,
                           (long long)row[r], p, (long long)recv_counts[p]);
  }
  if (send_counts[r] && send_bufs[r] != recv_bufs[r])
    memmove(recv_bufs[r], send_bufs[r], (size_t)(send_counts[r] * es));
  const int64_t part = (int64_t)(c->slot_bytes / (size_t)n) / 64 * 64;
  for (int64_t off = 0; off < most; off += part) {
    h = nrt_coll_next_round(c);
    char *mine = nrt_coll_slot(c, r, h);
    TRY(nrt_coll_wait_writable(c));
    for (int p = 0; p < n; p++) {
      int64_t m = p == r ? 0 : clip(send_counts[p] * es, off, part);
      if (m) nrt_coll_copy(mine + p * part, (const char *)send_bufs[p] + off, (size_t)m, false);
    }
    nrt_coll_publish(c);
    TRY(nrt_coll_wait_all(c));
    for (int p = 0; p < n; p++) {
      int64_t m = p == r ? 0 : clip(recv_counts[p] * es, off, part);
      if (m) nrt_coll_copy((char *)recv_bufs[p] + off, nrt_coll_slot(c, p, h) + r * part, (size_t)m, false);
    }
  }
  return NRT_SUCCESS;
}

nrt_status nrt_comm_all_to_all(nrt_comm *c, const void *const *send_bufs,
                               const int64_t *send_counts, void *const *recv_bufs,
                               const int64_t *recv_counts, nrt_dtype dtype) {
  nrt_status st = nrt_coll_begin(c, "nrt_comm_all_to_all");
  if (st != NRT_SUCCESS) return st;
  return nrt_coll_end(c, all_to_all(c, send_bufs, send_counts, recv_bufs, recv_counts, dtype));
}

/* ---- barrier --------------------------------------------------------------------------- */
nrt_status nrt_comm_barrier(nrt_comm *c) {
  nrt_status st = nrt_coll_begin(c, "nrt_comm_barrier");
  if (st != NRT_SUCCESS) return st;
  nrt_coll_publish(c);
  return nrt_coll_end(c, nrt_coll_wait_all(c));
}
