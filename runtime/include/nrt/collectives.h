/* Collectives between processes on one machine, over POSIX shared memory,
 * and across machines hierarchically (nrt_hcomm, at the end: shared memory
 * within each machine, a caller's bridge between them): the transport of
 * the torch.distributed backend "neuron".
 *
 * One process per rank (torchrun starts one per logical NeuronCore). Device
 * memory is host memory, so the buffers passed here are plain host pointers
 * (nrt_malloc'd or not). Each rank owns one shared segment that every peer
 * maps; ranks find each other's segment names through an exchange the caller
 * provides (c10d's Store in the glue, a file in the C tests), so this module
 * needs neither PyTorch nor a network.
 *
 * Calls are synchronous: an operation returns once this rank's part is done
 * (its outputs are written; its inputs may be reused). Every rank of a
 * communicator must issue the same collectives in the same order with the
 * same sizes, dtype, op and root; the glue runs them on one communication
 * stream per communicator (nrt_stream_enqueue), which gives that order.
 *
 * Threading: one operation at a time per communicator. The calls lock the
 * communicator, so concurrent calls from several threads are safe but run one
 * after the other; nrt_comm_abort() is the one call that does not wait for
 * the lock. Different communicators are independent. A communicator must not
 * be used in a child after fork().
 *
 * Faults: every wait has the communicator's timeout. A peer that does not
 * reach the same step in time gives NRT_ERROR_TIMEOUT; a peer that died,
 * aborted or failed an operation gives NRT_ERROR_PEER_FAILED within tens of
 * milliseconds. The message (nrt_last_error_message) names the operation,
 * the communicator and the ranks. After either, the communicator is broken:
 * later operations fail at once, and it can only be destroyed. Argument
 * errors (NRT_ERROR_INVALID_ARGUMENT, NRT_ERROR_UNSUPPORTED) are detected
 * before any exchange and leave the communicator usable, provided every rank
 * made the same mistake.
 *
 * Shared memory never leaks: the segments are unlinked from /dev/shm as soon
 * as every peer has mapped them (inside nrt_comm_create), so the kernel frees
 * them when the last process unmaps or exits, whatever happens after. */
#ifndef NRT_COLLECTIVES_H
#define NRT_COLLECTIVES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "nrt/dtype.h"
#include "nrt/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest world size (segments are mapped by every rank). */
#define NRT_COMM_MAX_RANKS 256

/* c10d's ReduceOp, in its order. Which dtypes take which op: floats
 * (float16, bfloat16, float32, float64) SUM AVG PRODUCT MIN MAX PREMUL_SUM;
 * integers SUM AVG PRODUCT MIN MAX BAND BOR BXOR; bool SUM PRODUCT MIN MAX
 * BAND BOR BXOR (SUM and MAX are a logical or, PRODUCT and MIN an and, as
 * ProcessGroupNCCL maps them); complex SUM AVG PREMUL_SUM. */
#define NRT_REDUCE_OP_LIST(X) \
  X(SUM, sum)                 \
  X(AVG, avg)                 \
  X(PRODUCT, product)         \
  X(MIN, min)                 \
  X(MAX, max)                 \
  X(BAND, band)               \
  X(BOR, bor)                 \
  X(BXOR, bxor)               \
  X(PREMUL_SUM, premul_sum)

typedef enum nrt_reduce_op {
#define NRT_X(e, n) NRT_REDUCE_##e,
  NRT_REDUCE_OP_LIST(NRT_X)
#undef NRT_X
  NRT_REDUCE_OP_COUNT
} nrt_reduce_op;

const char *nrt_reduce_op_name(nrt_reduce_op op); /* "sum", ... or "invalid" */
bool nrt_reduce_supported(nrt_reduce_op op, nrt_dtype dtype);

/* How reductions compute (bitwise the same on every rank, and the same as a
 * single process folding the ranks' inputs in rank order 0, 1, ..., N-1):
 *  - float32, float16, bfloat16 (and complex32/complex64 componentwise)
 *    accumulate in float32 and round once at the end (to nearest even, as
 *    PyTorch converts); float64 and complex128 accumulate in float64 (a
 *    transport must not lose what the tensor holds).
 *  - AVG is the SUM divided by the world size; on integers the division
 *    truncates toward zero.
 *  - PREMUL_SUM multiplies each input by `factor` before summing; like
 *    NCCL, the factor is first rounded to the dtype (float16/bfloat16) and
 *    the products are rounded before the sum.
 *  - integers wrap on overflow, as PyTorch's integer tensors do.
 *  - MIN/MAX propagate NaN. */

/* The rendezvous: how ranks publish and find each other's segment names.
 * Keys are short strings; values are at most a few hundred bytes. Backed by
 * a c10d Store in the glue: set -> store->set(key, value); get ->
 * store->wait({key}, timeout) then store->get(key), returning
 * NRT_ERROR_TIMEOUT when the wait times out. Keys are prefixed with the
 * communicator's name, so one store can serve several communicators as long
 * as the names differ. Both functions may be called from the thread that
 * runs nrt_comm_create only. */
typedef struct nrt_comm_exchange {
  void *ctx;
  nrt_status (*set)(void *ctx, const char *key, const void *value, size_t size);
  /* Blocks until `key` exists or timeout_ms passed (0: look once). Copies at
   * most `capacity` bytes of its value to `value` and the value's full size
   * to *out_size. NRT_ERROR_TIMEOUT if the key did not appear in time. */
  nrt_status (*get)(void *ctx, const char *key, int64_t timeout_ms, void *value, size_t capacity,
                    size_t *out_size);
} nrt_comm_exchange;

/* Tuning, all optional (zero fields take the default). */
typedef struct nrt_comm_options {
  /* Staging buffer per rank: each segment holds two of these, and large
   * operations are pipelined in pieces of this size. Default 1 MiB; at least
   * 64 KiB. */
  size_t slot_bytes;
  /* Ring per ordered pair of ranks for send/recv; larger messages stream
   * through it. Default 256 KiB (64 KiB above 16 ranks). */
  size_t mailbox_bytes;
  /* all_reduce up to this many bytes uses the one-step algorithm (every rank
   * reads every rank's input); larger ones reduce-scatter then all-gather.
   * Default 64 KiB; capped at slot_bytes. */
  size_t small_bytes;
} nrt_comm_options;

typedef struct nrt_comm nrt_comm;

/* Joins communicator `name` as `rank` of `world_size` (every rank calls it
 * with the same name, world_size and exchange). Blocks until all ranks have
 * joined and mapped each other's segments, at most timeout_ms (> 0): ranks
 * that do not join in time give NRT_ERROR_TIMEOUT naming them. `exchange`
 * may be NULL when world_size is 1; `options` may be NULL. The name must be
 * unique among the communicators sharing the exchange (c10d: the group name
 * plus a counter); it also appears in the segment names in /dev/shm and in
 * error messages. */
nrt_status nrt_comm_create(int rank, int world_size, const char *name,
                           const nrt_comm_exchange *exchange, int64_t timeout_ms,
                           const nrt_comm_options *options, nrt_comm **out_comm);
/* Unmaps and frees everything, also after an error; peers still waiting on
 * this rank fail with NRT_ERROR_PEER_FAILED. NULL is a no-op. */
nrt_status nrt_comm_destroy(nrt_comm *comm);
/* Marks the communicator broken and tells the peers, so that this rank's
 * operation in progress (on another thread) and the peers' waits on this
 * rank fail promptly (c10d's Backend::abort). Thread-safe, never blocks. */
void nrt_comm_abort(nrt_comm *comm);

int nrt_comm_rank(const nrt_comm *comm);
int nrt_comm_size(const nrt_comm *comm);
const char *nrt_comm_name(const nrt_comm *comm);
/* The timeout of later waits (c10d's per-group timeout can change). */
nrt_status nrt_comm_set_timeout(nrt_comm *comm, int64_t timeout_ms);

/* ---- collectives ---------------------------------------------------------------
 * Counts are elements of `dtype`; buffers are contiguous. `factor` is used by
 * PREMUL_SUM only. "In place" lists the aliasing each call allows; other
 * overlaps between inputs and outputs are undefined. */

/* recv = reduce(send of every rank). In place: send == recv. */
nrt_status nrt_comm_all_reduce(nrt_comm *comm, const void *send, void *recv, int64_t count,
                               nrt_dtype dtype, nrt_reduce_op op, double factor);
/* all_reduce on the caller's thread, for a caller that must not block long
 * (the glue's stream would otherwise run it on a worker thread, and its
 * wake-ups are most of a small operation's latency). Never sleeps; each of
 * its two waits spins at most spin_ns. *out_state says what happened:
 *  - NRT_COMM_EAGER_DONE: done, as nrt_comm_all_reduce.
 *  - NRT_COMM_EAGER_STARTED: this rank's input is published (send may be
 *    reused) but the peers had not all arrived: recv is written by
 *    nrt_comm_finish, or by the communicator's next call of any kind,
 *    which finishes it first (its errors then come from that call).
 *  - NRT_COMM_EAGER_DECLINED: nothing happened (larger than the one-step
 *    algorithm's small_bytes, or a peer still reading the previous round):
 *    call nrt_comm_all_reduce.
 * Argument errors are returned as nrt_comm_all_reduce returns them; ranks
 * may mix this call and nrt_comm_all_reduce for the same operation. */
typedef enum nrt_comm_eager {
  NRT_COMM_EAGER_DECLINED = 0,
  NRT_COMM_EAGER_STARTED = 1,
  NRT_COMM_EAGER_DONE = 2,
} nrt_comm_eager;
nrt_status nrt_comm_all_reduce_eager(nrt_comm *comm, const void *send, void *recv, int64_t count,
                                     nrt_dtype dtype, nrt_reduce_op op, double factor, uint64_t spin_ns,
                                     nrt_comm_eager *out_state);
/* Completes an operation nrt_comm_all_reduce_eager left started (a no-op
 * when there is none), with the communicator's timeout. */
nrt_status nrt_comm_finish(nrt_comm *comm);

/* buf of every rank = buf of root. */
nrt_status nrt_comm_broadcast(nrt_comm *comm, void *buf, int64_t count, nrt_dtype dtype, int root);
/* recv of root = reduce(send of every rank); recv is unused elsewhere (may
 * be NULL). In place: send == recv. */
nrt_status nrt_comm_reduce(nrt_comm *comm, const void *send, void *recv, int64_t count,
                           nrt_dtype dtype, nrt_reduce_op op, double factor, int root);
/* recv[p*count ...] = send of rank p; recv holds world_size * count. In
 * place: send == recv + rank * count. */
nrt_status nrt_comm_all_gather(nrt_comm *comm, const void *send, void *recv, int64_t count,
                               nrt_dtype dtype);
/* Uneven all_gather: recv_bufs[p] (recv_counts[p] elements) = send of rank
 * p, which sends send_count == recv_counts[rank]. recv_bufs are separate
 * buffers (c10d's output list), or pointers into one. */
nrt_status nrt_comm_all_gatherv(nrt_comm *comm, const void *send, int64_t send_count,
                                void *const *recv_bufs, const int64_t *recv_counts,
                                nrt_dtype dtype);
/* recv = reduce over ranks of their send[rank*count ...]; send holds
 * world_size * count. In place: recv == send + rank * count. */
nrt_status nrt_comm_reduce_scatter(nrt_comm *comm, const void *send, void *recv, int64_t count,
                                   nrt_dtype dtype, nrt_reduce_op op, double factor);
/* Uneven reduce_scatter: rank p receives recv_counts[p] elements, the
 * reduction of every rank's send_bufs[p]. In place: recv == send_bufs[rank]. */
nrt_status nrt_comm_reduce_scatterv(nrt_comm *comm, const void *const *send_bufs, void *recv,
                                    const int64_t *recv_counts, nrt_dtype dtype,
                                    nrt_reduce_op op, double factor);
/* recv_bufs[p] (recv_counts[p] elements) = what rank p sent to this rank
 * (its send_bufs[rank], send_counts[rank] elements). Counts may differ per
 * pair (all_to_all_single with splits: pointers base + offset). A
 * recv_counts[p] that does not match the sender's count is found after the
 * counts are exchanged: the receiver fails with NRT_ERROR_INVALID_ARGUMENT
 * and the communicator breaks (its peers fail with NRT_ERROR_PEER_FAILED).
 * Not in place. */
nrt_status nrt_comm_all_to_all(nrt_comm *comm, const void *const *send_bufs,
                               const int64_t *send_counts, void *const *recv_bufs,
                               const int64_t *recv_counts, nrt_dtype dtype);
/* recv of root [p*count ...] = send of rank p (recv unused elsewhere). */
nrt_status nrt_comm_gather(nrt_comm *comm, const void *send, void *recv, int64_t count,
                           nrt_dtype dtype, int root);
/* recv of rank p = send of root [p*count ...] (send unused elsewhere). */
nrt_status nrt_comm_scatter(nrt_comm *comm, const void *send, void *recv, int64_t count,
                            nrt_dtype dtype, int root);
/* Returns once every rank has entered the barrier. */
nrt_status nrt_comm_barrier(nrt_comm *comm);

/* ---- point to point -------------------------------------------------------------
 * Each ordered pair of ranks has a mailbox ring in the sender's segment.
 * send returns once the message is in the ring (it streams through and
 * blocks while the ring is full, receiving meanwhile what peers send to this
 * rank so that two ranks sending to each other do not deadlock). recv takes
 * the oldest message from `peer` with `tag` (messages with other tags wait,
 * in order, for their own recv); its size must equal count elements. */
nrt_status nrt_comm_send(nrt_comm *comm, const void *buf, int64_t count, nrt_dtype dtype, int peer,
                         int64_t tag);
nrt_status nrt_comm_recv(nrt_comm *comm, void *buf, int64_t count, nrt_dtype dtype, int peer,
                         int64_t tag);

/* ---- across machines ------------------------------------------------------------
 * A hierarchical communicator spans ranks on several machines. The ranks of
 * each machine share one of the communicators above (shared memory); one
 * rank per machine, its leader (the machine's lowest rank), also talks to
 * the other machines' leaders through a bridge the caller provides (c10d's
 * ProcessGroupGloo in the glue, over TCP; another communicator in the C
 * tests). Every reduction runs by the C folds above wherever it is done on
 * this side: within the machine, then once across machines by the bridge.
 *
 * - all_reduce: reduce to the leader within each machine, all_reduce among
 *   the leaders, broadcast within each machine. reduce is the same with the
 *   last step done by the root's machine only (the leader passes the result
 *   on if it is not the root itself).
 * - broadcast: within the root's machine from the root, among the leaders
 *   from the root's machine, within the other machines from their leader.
 * - all_gather(v): within each machine, among the leaders (each machine's
 *   pieces packed into one block), within each machine the other machines'
 *   blocks.
 * - reduce_scatter(v): the whole input reduced to the leader within each
 *   machine, all_reduce among the leaders, each rank's block sent to it by
 *   its leader.
 * - barrier: within each machine, among the leaders, within each machine.
 *
 * Numerics: each machine folds its ranks in rank order (bitwise as above),
 * then the bridge combines the machines' partial results, so every rank
 * gets the same bits, but a float sum is rounded per machine first (it
 * differs in the last bits from one fold over all ranks; float16/bfloat16
 * partials are rounded to their dtype). AVG sums and divides by the world
 * size at the end; PREMUL_SUM premultiplies within the machine; integer,
 * bool, MIN and MAX results equal the single-machine fold exactly.
 *
 * The operations the hierarchy does not cover (all_to_all, gather, scatter,
 * send/recv between machines) the caller sends over its inter-machine
 * transport itself; the machine's communicator serves the ranks on one
 * machine. */

/* The inter-machine transport among the leaders: bridge rank m is machine m
 * (machines are numbered in the order of their lowest rank). Every call is
 * a collective of all leaders, made in the same order on each; it returns
 * once its outputs are written, or a failure with nrt_set_error_message()
 * saying why (the hierarchical communicator then breaks). timeout_ms bounds
 * the call. The hierarchical communicator hands the bridge only:
 *  - dtypes float16, bfloat16, float32, float64, uint8, int8, int32, int64
 *    (bool goes as uint8, int16 widened to int32, complex as its component
 *    pairs), and
 *  - ops SUM, PRODUCT, MIN, MAX (floats: IEEE arithmetic in the dtype,
 *    MIN/MAX propagating NaN is preferred), and BAND, BOR, BXOR on the
 *    integers. */
typedef struct nrt_comm_bridge {
  void *ctx;
  /* In place: buf (count elements of dtype) = op over every leader's buf. */
  nrt_status (*all_reduce)(void *ctx, void *buf, int64_t count, nrt_dtype dtype, nrt_reduce_op op,
                           int64_t timeout_ms);
  /* buf (bytes) of every leader = buf of leader `root`. */
  nrt_status (*broadcast)(void *ctx, void *buf, int64_t bytes, int root, int64_t timeout_ms);
  /* recv[m*bytes ...] = send of leader m; send may be recv + this leader's
   * rank * bytes (in place). */
  nrt_status (*all_gather)(void *ctx, const void *send, void *recv, int64_t bytes,
                           int64_t timeout_ms);
  nrt_status (*barrier)(void *ctx, int64_t timeout_ms);
} nrt_comm_bridge;

typedef struct nrt_hcomm nrt_hcomm;

/* Builds rank `rank` of `world_size`'s hierarchical communicator (no
 * exchange: the machine's communicator and the bridge are already joined).
 * machine_of_rank[p] is rank p's machine, numbered 0, 1, ... in the order of
 * each machine's lowest rank. `local` is this machine's communicator, its
 * ranks this machine's ranks in rank order; it stays the caller's (destroy
 * it after the hierarchical communicator) and serves send/recv within the
 * machine. `bridge` is copied; it is required on a leader when there are
 * several machines and ignored otherwise (may be NULL). With one machine
 * every operation is the machine communicator's own. */
nrt_status nrt_hcomm_create(int rank, int world_size, const int *machine_of_rank, nrt_comm *local,
                            const nrt_comm_bridge *bridge, int64_t timeout_ms, nrt_hcomm **out_hcomm);
/* Frees it (not the machine's communicator). NULL is a no-op. */
nrt_status nrt_hcomm_destroy(nrt_hcomm *hcomm);
int nrt_hcomm_machines(const nrt_hcomm *hcomm);
/* The timeout of later waits, within the machine and across machines. */
nrt_status nrt_hcomm_set_timeout(nrt_hcomm *hcomm, int64_t timeout_ms);

/* The collectives of the same name above, over all machines' ranks (ranks
 * and roots are global). */
nrt_status nrt_hcomm_all_reduce(nrt_hcomm *hcomm, const void *send, void *recv, int64_t count,
                                nrt_dtype dtype, nrt_reduce_op op, double factor);
nrt_status nrt_hcomm_broadcast(nrt_hcomm *hcomm, void *buf, int64_t count, nrt_dtype dtype, int root);
nrt_status nrt_hcomm_reduce(nrt_hcomm *hcomm, const void *send, void *recv, int64_t count,
                            nrt_dtype dtype, nrt_reduce_op op, double factor, int root);
nrt_status nrt_hcomm_all_gather(nrt_hcomm *hcomm, const void *send, void *recv, int64_t count,
                                nrt_dtype dtype);
nrt_status nrt_hcomm_all_gatherv(nrt_hcomm *hcomm, const void *send, int64_t send_count,
                                 void *const *recv_bufs, const int64_t *recv_counts, nrt_dtype dtype);
nrt_status nrt_hcomm_reduce_scatter(nrt_hcomm *hcomm, const void *send, void *recv, int64_t count,
                                    nrt_dtype dtype, nrt_reduce_op op, double factor);
nrt_status nrt_hcomm_reduce_scatterv(nrt_hcomm *hcomm, const void *const *send_bufs, void *recv,
                                     const int64_t *recv_counts, nrt_dtype dtype, nrt_reduce_op op,
                                     double factor);
nrt_status nrt_hcomm_barrier(nrt_hcomm *hcomm);

#ifdef __cplusplus
}
#endif
#endif
