/* The hierarchical communicator (nrt_hcomm, nrt/collectives.h): collectives
 * over ranks on several machines, composed of the machine's shared-memory
 * communicator and the caller's bridge among the machines' leaders.
 *
 * Only the leader (a machine's lowest rank, local rank 0) calls the bridge,
 * so every step a non-leader waits for is a step of its machine's
 * communicator. When a step fails the hierarchical communicator breaks: a
 * failed bridge call also aborts the machine's communicator, so that the
 * machine's other ranks, waiting for their leader's broadcast, fail within
 * one wait slice instead of at their timeout.
 *
 * Buffers the hierarchy needs besides the caller's (a leader's partial
 * result when it may not write the caller's buffer, packed blocks, the
 * widened int16) are three scratch buffers that grow and are kept. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/collectives.h"

/* The machine's send/recv with which a leader passes reduce's result to the
 * root: beyond every tag c10d can give (an int), so no user message matches. */
#define LEADER_TO_ROOT_TAG (-((int64_t)1 << 40))

enum { SCRATCH_PACKED, SCRATCH_PARTIAL, SCRATCH_WIDE, SCRATCH_COUNT };

struct nrt_hcomm {
  int rank, world_size;
  int machines, machine;  /* how many; this rank's */
  int local_rank, local_size;
  int *machine_of;        /* [world_size] */
  int *local_of;          /* [world_size]: a rank's index among its machine's ranks */
  int *machine_start;     /* [machines + 1]: machine m's ranks are by_machine[start[m] .. start[m+1]) */
  int *by_machine;        /* [world_size]: the ranks sorted by (machine, rank) */
  nrt_comm *local;
  nrt_comm_bridge bridge; /* leaders of several machines only */
  int64_t timeout_ms;

  pthread_mutex_t mu;     /* one operation at a time (the scratch buffers) */
  const char *op;
  bool broken;
  char broken_message[NRT_ERROR_MESSAGE_MAX];
  void *scratch[SCRATCH_COUNT];
  size_t scratch_bytes[SCRATCH_COUNT];
};

#define TRY(expr)                         \
  do {                                    \
    nrt_status st_ = (expr);              \
    if (st_ != NRT_SUCCESS) return st_;   \
  } while (0)

static bool leader(const nrt_hcomm *h) { return h->local_rank == 0; }
static const int *members(const nrt_hcomm *h, int m) { return h->by_machine + h->machine_start[m]; }
static int members_of(const nrt_hcomm *h, int m) { return h->machine_start[m + 1] - h->machine_start[m]; }

/* ---- entry, exit, failures ------------------------------------------------------------ */
static nrt_status begin(nrt_hcomm *h, const char *op) {
  if (!h) {
    nrt_set_error_message("%s: hierarchical communicator is NULL", op);
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  pthread_mutex_lock(&h->mu);
  h->op = op;
  if (h->broken) {
    nrt_set_error_message("%s: communicator '%s' (rank %d of %d, machine %d of %d) is broken by an "
                          "earlier error: %s", op, nrt_comm_name(h->local), h->rank, h->world_size,
                          h->machine, h->machines, h->broken_message);
    pthread_mutex_unlock(&h->mu);
    return NRT_ERROR_PEER_FAILED;
  }
  return NRT_SUCCESS;
}

static nrt_status end(nrt_hcomm *h, nrt_status st) {
  h->op = NULL;
  pthread_mutex_unlock(&h->mu);
  return st;
}

/* Breaks the communicator with the current error message put in context:
 * "op: communicator 'name' (rank r of N, machine m of M): <where>: <message>". */
static nrt_status fail(nrt_hcomm *h, nrt_status st, const char *where) {
  /* A copy first: the message buffer is the one about to be rewritten. */
  char why[640];
  snprintf(why, sizeof why, "%s", nrt_last_error_message());
  snprintf(h->broken_message, sizeof h->broken_message, "%.300s: %s", where, why);
  h->broken = true;
  nrt_set_error_message("%s: communicator '%s' (rank %d of %d, machine %d of %d): %s", h->op,
                        nrt_comm_name(h->local), h->rank, h->world_size, h->machine, h->machines,
                        h->broken_message);
  return st;
}

/* A step within the machine. Argument errors cannot happen here (they are
 * checked before the first step), so any failure breaks the hierarchy. The
 * machine's communicator names its own ranks: the message says which ranks
 * of the whole group they are. */
static nrt_status within(nrt_hcomm *h, nrt_status st) {
  if (st == NRT_SUCCESS) return st;
  char where[300];
  int n = snprintf(where, sizeof where, "within the machine (machine %d; its communicator's ranks 0..%d are "
                   "ranks", h->machine, h->local_size - 1);
  for (int l = 0; l < h->local_size && n < (int)sizeof where - 16; l++)
    n += snprintf(where + n, sizeof where - (size_t)n, "%s %d", l ? "," : "", members(h, h->machine)[l]);
  if (n < (int)sizeof where - 2) snprintf(where + n, sizeof where - (size_t)n, ")");
  return fail(h, st, where);
}

/* A bridge call; its failure also aborts the machine's communicator. */
static nrt_status across(nrt_hcomm *h, nrt_status st) {
  if (st == NRT_SUCCESS) return st;
  fail(h, st, "between machines");
  nrt_comm_abort(h->local);
  return st;
}

/* Argument errors, found before the first step: nothing breaks. */
static nrt_status invalid(nrt_hcomm *h, nrt_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static nrt_status invalid(nrt_hcomm *h, nrt_status st, const char *fmt, ...) {
  char detail[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  nrt_set_error_message("%s: communicator '%s' (rank %d of %d): %s", h->op, nrt_comm_name(h->local),
                        h->rank, h->world_size, detail);
  return st;
}

static void *scratch(nrt_hcomm *h, int which, size_t bytes) {
  if (bytes == 0) bytes = 1;
  if (h->scratch_bytes[which] < bytes) {
    void *p = realloc(h->scratch[which], bytes);
    if (!p) return NULL;
    h->scratch[which] = p;
    h->scratch_bytes[which] = bytes;
  }
  return h->scratch[which];
}

static nrt_status out_of_memory(nrt_hcomm *h, size_t bytes) {
  return invalid(h, NRT_ERROR_OUT_OF_MEMORY, "no memory for a scratch buffer of %zu bytes", bytes);
}

/* ---- argument checks (before any step) -------------------------------------------------- */
static nrt_status check_dtype(nrt_hcomm *h, nrt_dtype dt) {
  if ((unsigned)dt < NRT_DTYPE_COUNT) return NRT_SUCCESS;
  return invalid(h, NRT_ERROR_INVALID_ARGUMENT, "invalid dtype %d", (int)dt);
}
static nrt_status check_reduce(nrt_hcomm *h, nrt_reduce_op op, nrt_dtype dt) {
  TRY(check_dtype(h, dt));
  if (nrt_reduce_supported(op, dt)) return NRT_SUCCESS;
  return invalid(h, (unsigned)op < NRT_REDUCE_OP_COUNT ? NRT_ERROR_UNSUPPORTED : NRT_ERROR_INVALID_ARGUMENT,
                 "reduce op %s does not take dtype %s", nrt_reduce_op_name(op), nrt_dtype_name(dt));
}
static nrt_status check_buf(nrt_hcomm *h, const void *p, int64_t count, const char *what) {
  if (count >= 0 && count <= INT64_MAX / 16 / h->world_size && (count == 0 || p)) return NRT_SUCCESS;
  return invalid(h, NRT_ERROR_INVALID_ARGUMENT, "%s: %lld elements %s", what, (long long)count,
                 count < 0 || count > INT64_MAX / 16 / h->world_size ? "is out of range" : "at NULL");
}
static nrt_status check_root(nrt_hcomm *h, int root) {
  if (root >= 0 && root < h->world_size) return NRT_SUCCESS;
  return invalid(h, NRT_ERROR_INVALID_ARGUMENT, "root %d is not a rank (world size %d)", root,
                 h->world_size);
}
static nrt_status check_lists(nrt_hcomm *h, const int64_t *counts, const void *const *bufs, const char *what) {
  if (!counts || !bufs) return invalid(h, NRT_ERROR_INVALID_ARGUMENT, "%s: counts and buffers are required", what);
  for (int p = 0; p < h->world_size; p++) TRY(check_buf(h, bufs[p], counts[p], what));
  return NRT_SUCCESS;
}

/* ---- the machine's steps ---------------------------------------------------------------- */
/* recv of the leader = the machine's fold (a lone rank folds itself: only
 * PREMUL_SUM changes its input). */
static nrt_status local_reduce(nrt_hcomm *h, const void *send, void *recv, int64_t count, nrt_dtype dt,
                               nrt_reduce_op op, double factor) {
  if (h->local_size == 1 && op != NRT_REDUCE_PREMUL_SUM) {
    if (send != recv) memcpy(recv, send, (size_t)count * nrt_dtype_size(dt));
    return NRT_SUCCESS;
  }
  return within(h, nrt_comm_reduce(h->local, send, recv, count, dt, op, factor, 0));
}

static nrt_status local_broadcast(nrt_hcomm *h, void *buf, int64_t count, nrt_dtype dt, int local_root) {
  if (h->local_size == 1) return NRT_SUCCESS;
  return within(h, nrt_comm_broadcast(h->local, buf, count, dt, local_root));
}

/* ---- the bridge's reductions ----------------------------------------------------------------- */
/* Within the machine AVG is a sum (divided by the world size at the end);
 * across machines SUM, AVG and PREMUL_SUM (premultiplied within) are sums. */
static nrt_reduce_op op_within(nrt_reduce_op op) { return op == NRT_REDUCE_AVG ? NRT_REDUCE_SUM : op; }
static nrt_reduce_op op_across(nrt_reduce_op op) {
  return op == NRT_REDUCE_AVG || op == NRT_REDUCE_PREMUL_SUM ? NRT_REDUCE_SUM : op;
}

/* buf = op over the machines' partial results, in the dtypes and ops the
 * bridge takes (nrt_comm_bridge). */
static nrt_status bridge_all_reduce(nrt_hcomm *h, void *buf, int64_t count, nrt_dtype dt, nrt_reduce_op op) {
  switch (dt) {
    case NRT_COMPLEX32: dt = NRT_FLOAT16; count *= 2; break;
    case NRT_COMPLEX64: dt = NRT_FLOAT32; count *= 2; break;
    case NRT_COMPLEX128: dt = NRT_FLOAT64; count *= 2; break;
    case NRT_BOOL:
      /* 0/1 bytes: "any" and "all" are bitwise or and and. */
      op = op == NRT_REDUCE_BXOR ? NRT_REDUCE_BXOR
           : (op == NRT_REDUCE_PRODUCT || op == NRT_REDUCE_MIN || op == NRT_REDUCE_BAND) ? NRT_REDUCE_BAND
                                                                                        : NRT_REDUCE_BOR;
      dt = NRT_UINT8;
      break;
    case NRT_INT16: {
      /* Gloo has no int16. Wrapping sums and products, MIN, MAX and the
       * bitwise ops of the sign-extended values, narrowed again, are the
       * int16 results. */
      int32_t *wide = scratch(h, SCRATCH_WIDE, (size_t)count * sizeof(int32_t));
      if (!wide) return out_of_memory(h, (size_t)count * sizeof(int32_t));
      int16_t *narrow = buf;
      for (int64_t i = 0; i < count; i++) wide[i] = narrow[i];
      TRY(across(h, h->bridge.all_reduce(h->bridge.ctx, wide, count, NRT_INT32, op, h->timeout_ms)));
      for (int64_t i = 0; i < count; i++) narrow[i] = (int16_t)(uint16_t)(uint32_t)wide[i];
      return NRT_SUCCESS;
    }
    default: break;
  }
  return across(h, h->bridge.all_reduce(h->bridge.ctx, buf, count, dt, op, h->timeout_ms));
}

/* ---- creation --------------------------------------------------------------------------------- */
nrt_status nrt_hcomm_create(int rank, int world_size, const int *machine_of_rank, nrt_comm *local,
                            const nrt_comm_bridge *bridge, int64_t timeout_ms, nrt_hcomm **out_hcomm) {
  if (!out_hcomm) {
    nrt_set_error_message("nrt_hcomm_create: out_hcomm is NULL");
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  *out_hcomm = NULL;
  if (world_size < 1 || world_size > NRT_COMM_MAX_RANKS || rank < 0 || rank >= world_size ||
      !machine_of_rank || !local || timeout_ms <= 0) {
    nrt_set_error_message("nrt_hcomm_create: needs rank %d of world size %d (1..%d), the machine of "
                          "every rank, the machine's communicator and a positive timeout",
                          rank, world_size, NRT_COMM_MAX_RANKS);
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  /* Machines numbered 0, 1, ... in the order of their lowest rank. */
  int machines = 0;
  for (int p = 0; p < world_size; p++) {
    int m = machine_of_rank[p];
    if (m < 0 || m > machines) {
      nrt_set_error_message("nrt_hcomm_create: rank %d's machine is %d; machines must be numbered "
                            "0, 1, ... in the order of their lowest rank (next new one: %d)", p, m, machines);
      return NRT_ERROR_INVALID_ARGUMENT;
    }
    if (m == machines) machines++;
  }
  nrt_hcomm *h = calloc(1, sizeof *h);
  if (!h) return NRT_ERROR_OUT_OF_MEMORY;
  pthread_mutex_init(&h->mu, NULL);
  h->rank = rank;
  h->world_size = world_size;
  h->machines = machines;
  h->machine = machine_of_rank[rank];
  h->local = local;
  h->timeout_ms = timeout_ms;
  h->machine_of = malloc((size_t)world_size * sizeof(int));
  h->local_of = malloc((size_t)world_size * sizeof(int));
  h->machine_start = calloc((size_t)machines + 1, sizeof(int));
  h->by_machine = malloc((size_t)world_size * sizeof(int));
  if (!h->machine_of || !h->local_of || !h->machine_start || !h->by_machine) {
    nrt_hcomm_destroy(h);
    return NRT_ERROR_OUT_OF_MEMORY;
  }
  for (int p = 0; p < world_size; p++) {
    h->machine_of[p] = machine_of_rank[p];
    h->machine_start[machine_of_rank[p] + 1]++;
  }
  for (int m = 0; m < machines; m++) h->machine_start[m + 1] += h->machine_start[m];
  int *fill = calloc((size_t)machines, sizeof(int));
  if (!fill) {
    nrt_hcomm_destroy(h);
    return NRT_ERROR_OUT_OF_MEMORY;
  }
  for (int p = 0; p < world_size; p++) {
    int m = machine_of_rank[p];
    h->local_of[p] = fill[m];
    h->by_machine[h->machine_start[m] + fill[m]++] = p;
  }
  free(fill);
  h->local_rank = h->local_of[rank];
  h->local_size = members_of(h, h->machine);
  if (nrt_comm_size(local) != h->local_size || nrt_comm_rank(local) != h->local_rank) {
    nrt_set_error_message("nrt_hcomm_create: rank %d is rank %d of %d on machine %d, but the machine's "
                          "communicator '%s' has it as rank %d of %d", rank, h->local_rank, h->local_size,
                          h->machine, nrt_comm_name(local), nrt_comm_rank(local), nrt_comm_size(local));
    nrt_hcomm_destroy(h);
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  if (machines > 1 && leader(h)) {
    if (!bridge || !bridge->all_reduce || !bridge->broadcast || !bridge->all_gather || !bridge->barrier) {
      nrt_set_error_message("nrt_hcomm_create: rank %d leads machine %d of %d and needs a bridge with "
                            "all_reduce, broadcast, all_gather and barrier", rank, h->machine, machines);
      nrt_hcomm_destroy(h);
      return NRT_ERROR_INVALID_ARGUMENT;
    }
    h->bridge = *bridge;
  }
  *out_hcomm = h;
  return NRT_SUCCESS;
}

nrt_status nrt_hcomm_destroy(nrt_hcomm *h) {
  if (!h) return NRT_SUCCESS;
  for (int i = 0; i < SCRATCH_COUNT; i++) free(h->scratch[i]);
  free(h->machine_of);
  free(h->local_of);
  free(h->machine_start);
  free(h->by_machine);
  pthread_mutex_destroy(&h->mu);
  free(h);
  return NRT_SUCCESS;
}

int nrt_hcomm_machines(const nrt_hcomm *h) { return h ? h->machines : 0; }

nrt_status nrt_hcomm_set_timeout(nrt_hcomm *h, int64_t timeout_ms) {
  if (!h || timeout_ms <= 0) {
    nrt_set_error_message("nrt_hcomm_set_timeout: needs a communicator and a positive timeout");
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  pthread_mutex_lock(&h->mu);
  h->timeout_ms = timeout_ms;
  pthread_mutex_unlock(&h->mu);
  return nrt_comm_set_timeout(h->local, timeout_ms);
}

/* ---- all_reduce, reduce, broadcast --------------------------------------------------------------- */
static nrt_status all_reduce(nrt_hcomm *h, const void *send, void *recv, int64_t count, nrt_dtype dt,
                             nrt_reduce_op op, double factor) {
  TRY(check_reduce(h, op, dt));
  TRY(check_buf(h, send, count, "send"));
  TRY(check_buf(h, recv, count, "recv"));
  if (count == 0) return NRT_SUCCESS;
  TRY(local_reduce(h, send, leader(h) ? recv : NULL, count, dt, op_within(op), factor));
  if (leader(h)) {
    TRY(bridge_all_reduce(h, recv, count, dt, op_across(op)));
    if (op == NRT_REDUCE_AVG) nrt_coll_divide(dt, recv, count, h->world_size);
  }
  return local_broadcast(h, recv, count, dt, 0);
}

nrt_status nrt_hcomm_all_reduce(nrt_hcomm *h, const void *send, void *recv, int64_t count,
                                nrt_dtype dtype, nrt_reduce_op op, double factor) {
  if (h && h->machines == 1) return nrt_comm_all_reduce(h->local, send, recv, count, dtype, op, factor);
  TRY(begin(h, "nrt_hcomm_all_reduce"));
  return end(h, all_reduce(h, send, recv, count, dtype, op, factor));
}

static nrt_status reduce(nrt_hcomm *h, const void *send, void *recv, int64_t count, nrt_dtype dt,
                         nrt_reduce_op op, double factor, int root) {
  TRY(check_reduce(h, op, dt));
  TRY(check_root(h, root));
  TRY(check_buf(h, send, count, "send"));
  if (h->rank == root) TRY(check_buf(h, recv, count, "recv"));
  if (count == 0) return NRT_SUCCESS;
  const size_t bytes = (size_t)count * nrt_dtype_size(dt);
  const bool root_machine = h->machine_of[root] == h->machine;
  /* The leader's partial result: in recv if it is the root, else aside
   * (reduce leaves a non-root's buffers as they were). */
  void *partial = NULL;
  if (leader(h)) {
    partial = h->rank == root ? recv : scratch(h, SCRATCH_PARTIAL, bytes);
    if (!partial) return out_of_memory(h, bytes);
  }
  TRY(local_reduce(h, send, partial, count, dt, op_within(op), factor));
  if (leader(h)) {
    TRY(bridge_all_reduce(h, partial, count, dt, op_across(op)));
    if (op == NRT_REDUCE_AVG && root_machine) nrt_coll_divide(dt, partial, count, h->world_size);
  }
  const int root_local = h->local_of[root];
  if (!root_machine || root_local == 0) return NRT_SUCCESS;
  if (leader(h))
    return within(h, nrt_comm_send(h->local, partial, count, dt, root_local, LEADER_TO_ROOT_TAG));
  if (h->rank == root) return within(h, nrt_comm_recv(h->local, recv, count, dt, 0, LEADER_TO_ROOT_TAG));
  return NRT_SUCCESS;
}

nrt_status nrt_hcomm_reduce(nrt_hcomm *h, const void *send, void *recv, int64_t count, nrt_dtype dtype,
                            nrt_reduce_op op, double factor, int root) {
  if (h && h->machines == 1) return nrt_comm_reduce(h->local, send, recv, count, dtype, op, factor, root);
  TRY(begin(h, "nrt_hcomm_reduce"));
  return end(h, reduce(h, send, recv, count, dtype, op, factor, root));
}

static nrt_status broadcast(nrt_hcomm *h, void *buf, int64_t count, nrt_dtype dt, int root) {
  TRY(check_dtype(h, dt));
  TRY(check_root(h, root));
  TRY(check_buf(h, buf, count, "buf"));
  if (count == 0) return NRT_SUCCESS;
  const int root_machine = h->machine_of[root];
  if (h->machine == root_machine) TRY(local_broadcast(h, buf, count, dt, h->local_of[root]));
  if (leader(h))
    TRY(across(h, h->bridge.broadcast(h->bridge.ctx, buf, count * (int64_t)nrt_dtype_size(dt), root_machine,
                                      h->timeout_ms)));
  if (h->machine != root_machine) TRY(local_broadcast(h, buf, count, dt, 0));
  return NRT_SUCCESS;
}

nrt_status nrt_hcomm_broadcast(nrt_hcomm *h, void *buf, int64_t count, nrt_dtype dtype, int root) {
  if (h && h->machines == 1) return nrt_comm_broadcast(h->local, buf, count, dtype, root);
  TRY(begin(h, "nrt_hcomm_broadcast"));
  return end(h, broadcast(h, buf, count, dtype, root));
}

/* ---- all_gather ------------------------------------------------------------------------------------ */
static nrt_status all_gatherv(nrt_hcomm *h, const void *send, int64_t send_count, void *const *recv_bufs,
                              const int64_t *recv_counts, nrt_dtype dt) {
  TRY(check_dtype(h, dt));
  TRY(check_lists(h, recv_counts, (const void *const *)recv_bufs, "recv_counts"));
  TRY(check_buf(h, send, send_count, "send"));
  if (send_count != recv_counts[h->rank])
    return invalid(h, NRT_ERROR_INVALID_ARGUMENT, "send_count %lld differs from recv_counts[%d] = %lld",
                   (long long)send_count, h->rank, (long long)recv_counts[h->rank]);
  const int64_t es = (int64_t)nrt_dtype_size(dt);
  /* 1. The machine's pieces, straight into place on each of its ranks. */
  const int *mine = members(h, h->machine);
  void *local_bufs[NRT_COMM_MAX_RANKS];
  int64_t local_counts[NRT_COMM_MAX_RANKS];
  for (int l = 0; l < h->local_size; l++) {
    local_bufs[l] = recv_bufs[mine[l]];
    local_counts[l] = recv_counts[mine[l]];
  }
  if (h->local_size > 1)
    TRY(within(h, nrt_comm_all_gatherv(h->local, send, send_count, local_bufs, local_counts, dt)));
  else if (send_count && send != recv_bufs[h->rank])
    memmove(recv_bufs[h->rank], send, (size_t)(send_count * es));
  /* 2. Among the leaders, one block per machine (the largest machine's
   * bytes), packed in rank order. */
  int64_t block = 0;
  for (int m = 0; m < h->machines; m++) {
    int64_t b = 0;
    for (int i = 0; i < members_of(h, m); i++) b += recv_counts[members(h, m)[i]] * es;
    if (b > block) block = b;
  }
  if (block == 0) return NRT_SUCCESS;
  const size_t all = (size_t)block * (size_t)h->machines;
  char *blocks = scratch(h, SCRATCH_PACKED, all);
  if (!blocks) return out_of_memory(h, all);
  if (leader(h)) {
    char *own = blocks + (int64_t)h->machine * block;
    int64_t off = 0;
    for (int l = 0; l < h->local_size; l++) {
      memcpy(own + off, local_bufs[l], (size_t)(local_counts[l] * es));
      off += local_counts[l] * es;
    }
    TRY(across(h, h->bridge.all_gather(h->bridge.ctx, own, blocks, block, h->timeout_ms)));
  }
  /* 3. The other machines' blocks to the machine's ranks. */
  TRY(local_broadcast(h, blocks, (int64_t)all, NRT_UINT8, 0));
  for (int m = 0; m < h->machines; m++) {
    if (m == h->machine) continue;
    int64_t off = (int64_t)m * block;
    for (int i = 0; i < members_of(h, m); i++) {
      int p = members(h, m)[i];
      memcpy(recv_bufs[p], blocks + off, (size_t)(recv_counts[p] * es));
      off += recv_counts[p] * es;
    }
  }
  return NRT_SUCCESS;
}

nrt_status nrt_hcomm_all_gatherv(nrt_hcomm *h, const void *send, int64_t send_count, void *const *recv_bufs,
                                 const int64_t *recv_counts, nrt_dtype dtype) {
  if (h && h->machines == 1)
    return nrt_comm_all_gatherv(h->local, send, send_count, recv_bufs, recv_counts, dtype);
  TRY(begin(h, "nrt_hcomm_all_gatherv"));
  return end(h, all_gatherv(h, send, send_count, recv_bufs, recv_counts, dtype));
}

nrt_status nrt_hcomm_all_gather(nrt_hcomm *h, const void *send, void *recv, int64_t count, nrt_dtype dtype) {
  if (h && h->machines == 1) return nrt_comm_all_gather(h->local, send, recv, count, dtype);
  TRY(begin(h, "nrt_hcomm_all_gather"));
  nrt_status st = check_dtype(h, dtype);
  if (st == NRT_SUCCESS) st = check_buf(h, recv, count, "recv");
  if (st != NRT_SUCCESS) return end(h, st);
  void *bufs[NRT_COMM_MAX_RANKS];
  int64_t counts[NRT_COMM_MAX_RANKS];
  for (int p = 0; p < h->world_size; p++) {
    bufs[p] = (char *)recv + (int64_t)p * count * (int64_t)nrt_dtype_size(dtype);
    counts[p] = count;
  }
  return end(h, all_gatherv(h, send, count, bufs, counts, dtype));
}

/* ---- reduce_scatter ---------------------------------------------------------------------------------- */
static nrt_status reduce_scatterv(nrt_hcomm *h, const void *const *send_bufs, void *recv,
                                  const int64_t *recv_counts, nrt_dtype dt, nrt_reduce_op op, double factor) {
  TRY(check_reduce(h, op, dt));
  TRY(check_lists(h, recv_counts, send_bufs, "recv_counts"));
  TRY(check_buf(h, recv, recv_counts[h->rank], "recv"));
  const int64_t es = (int64_t)nrt_dtype_size(dt);
  int64_t offsets[NRT_COMM_MAX_RANKS], total = 0;
  for (int p = 0; p < h->world_size; p++) {
    offsets[p] = total;
    total += recv_counts[p];
  }
  if (total == 0) return NRT_SUCCESS;
  /* The blocks as one buffer: the caller's if they are laid out so
   * (reduce_scatter_tensor), else packed. */
  const char *base = NULL;
  bool contiguous = true;
  for (int p = 0; p < h->world_size && contiguous; p++) {
    if (!recv_counts[p]) continue;
    const char *b = (const char *)send_bufs[p] - offsets[p] * es;
    if (!base) base = b;
    contiguous = b == base;
  }
  const char *all = base;
  if (!contiguous) {
    char *packed = scratch(h, SCRATCH_PACKED, (size_t)(total * es));
    if (!packed) return out_of_memory(h, (size_t)(total * es));
    for (int p = 0; p < h->world_size; p++)
      if (recv_counts[p]) memcpy(packed + offsets[p] * es, send_bufs[p], (size_t)(recv_counts[p] * es));
    all = packed;
  }
  /* 1-2. Every block reduced over the machine to the leader, then over the
   * machines. */
  char *partial = NULL;
  if (leader(h)) {
    partial = scratch(h, SCRATCH_PARTIAL, (size_t)(total * es));
    if (!partial) return out_of_memory(h, (size_t)(total * es));
  }
  TRY(local_reduce(h, all, partial, total, dt, op_within(op), factor));
  if (leader(h)) TRY(bridge_all_reduce(h, partial, total, dt, op_across(op)));
  /* 3. Each rank's block from its leader (an all_to_all in which only the
   * leader sends). */
  const int64_t mine = recv_counts[h->rank];
  if (h->local_size == 1) {
    memcpy(recv, partial + offsets[h->rank] * es, (size_t)(mine * es));
  } else {
    const void *sends[NRT_COMM_MAX_RANKS];
    void *recvs[NRT_COMM_MAX_RANKS];
    int64_t send_counts[NRT_COMM_MAX_RANKS], counts_in[NRT_COMM_MAX_RANKS];
    const int *ranks = members(h, h->machine);
    for (int l = 0; l < h->local_size; l++) {
      int p = ranks[l];
      sends[l] = leader(h) ? partial + offsets[p] * es : NULL;
      send_counts[l] = leader(h) ? recv_counts[p] : 0;
      recvs[l] = l == 0 ? recv : NULL;
      counts_in[l] = l == 0 ? mine : 0;
    }
    TRY(within(h, nrt_comm_all_to_all(h->local, sends, send_counts, recvs, counts_in, dt)));
  }
  if (op == NRT_REDUCE_AVG) nrt_coll_divide(dt, recv, mine, h->world_size);
  return NRT_SUCCESS;
}

nrt_status nrt_hcomm_reduce_scatterv(nrt_hcomm *h, const void *const *send_bufs, void *recv,
                                     const int64_t *recv_counts, nrt_dtype dtype, nrt_reduce_op op,
                                     double factor) {
  if (h && h->machines == 1)
    return nrt_comm_reduce_scatterv(h->local, send_bufs, recv, recv_counts, dtype, op, factor);
  TRY(begin(h, "nrt_hcomm_reduce_scatterv"));
  return end(h, reduce_scatterv(h, send_bufs, recv, recv_counts, dtype, op, factor));
}

nrt_status nrt_hcomm_reduce_scatter(nrt_hcomm *h, const void *send, void *recv, int64_t count,
                                    nrt_dtype dtype, nrt_reduce_op op, double factor) {
  if (h && h->machines == 1) return nrt_comm_reduce_scatter(h->local, send, recv, count, dtype, op, factor);
  TRY(begin(h, "nrt_hcomm_reduce_scatter"));
  nrt_status st = check_dtype(h, dtype);
  if (st == NRT_SUCCESS) st = check_buf(h, send, count, "send");
  if (st != NRT_SUCCESS) return end(h, st);
  const void *blocks[NRT_COMM_MAX_RANKS];
  int64_t counts[NRT_COMM_MAX_RANKS];
  for (int p = 0; p < h->world_size; p++) {
    blocks[p] = (const char *)send + (int64_t)p * count * (int64_t)nrt_dtype_size(dtype);
    counts[p] = count;
  }
  return end(h, reduce_scatterv(h, blocks, recv, counts, dtype, op, factor));
}

/* ---- barrier ----------------------------------------------------------------------------------------- */
nrt_status nrt_hcomm_barrier(nrt_hcomm *h) {
  if (h && h->machines == 1) return nrt_comm_barrier(h->local);
  TRY(begin(h, "nrt_hcomm_barrier"));
  nrt_status st = NRT_SUCCESS;
  if (h->local_size > 1) st = within(h, nrt_comm_barrier(h->local));
  if (st == NRT_SUCCESS && leader(h)) st = across(h, h->bridge.barrier(h->bridge.ctx, h->timeout_ms));
  if (st == NRT_SUCCESS && h->local_size > 1) st = within(h, nrt_comm_barrier(h->local));
  return end(h, st);
}
