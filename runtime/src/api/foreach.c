/* FOREACH launches (nrt/ops/foreach.h): the list table travels with the
 * descriptor in the stream's task, so a whole tensor list is one task, with
 * no device allocation or copy for the table. The task does what
 * nrt_launch_kernel's does for plain operands, for every tensor the table
 * lists: a poisoned input fails it, a failure poisons its outputs. */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "exec/exec.h"
#include "kernels/kernels.h"
#include "memory/memory.h"
#include "nrt/ops/foreach.h"
#include "nrt/profiler.h"

typedef struct foreach_task {
  nrt_launch l;
  int64_t table[]; /* sizes[0] rows of nrt_foreach_row_width(op) */
} foreach_task;

static const int64_t *row_at(const nrt_launch *l, const int64_t *table, int64_t r) {
  return table + r * nrt_foreach_row_width(l->op);
}
static bool optim_op(const nrt_launch *l) { return nrt_foreach_row_width(l->op) == NRT_FOREACH_OPTIM_ROW; }

static void free_task(void *arg) { free(arg); }

static const void *slot_ptr(const int64_t *row, int s) { return (const void *)(intptr_t)row[s]; }

/* The tensors a row's kernel writes: the output, or an optimizer step's
 * parameter, states and (unscaled in place) gradient. */
static void poison_rows(const nrt_launch *l, const int64_t *table, int64_t rows) {
  for (int64_t r = 0; r < rows; r++) {
    const int64_t *row = row_at(l, table, r);
    if (!optim_op(l)) {
      nrt_memory_poison(slot_ptr(row, NRT_FOREACH_OUT));
      continue;
    }
    for (int s = NRT_FOREACH_OPTIM_PARAM; s <= NRT_FOREACH_OPTIM_STATE2; s++)
      if (row[s] && (s != NRT_FOREACH_OPTIM_GRAD || (l->params[0] & NRT_FOREACH_OPTIM_GRAD_SCALE)))
        nrt_memory_poison(slot_ptr(row, s));
  }
}

/* Table slots a row reads. */
static void input_slots(const nrt_launch *l, int *first, int *last) {
  *first = optim_op(l) ? NRT_FOREACH_OPTIM_PARAM : NRT_FOREACH_IN0;
  *last = optim_op(l) ? NRT_FOREACH_OPTIM_STEP : NRT_FOREACH_IN2;
}

static nrt_status run_foreach(void *arg) {
  foreach_task *t = arg;
  nrt_launch *l = &t->l;
  l->operands[0].data = t->table;
  int64_t rows = l->sizes[0];
  bool poisoned = false;
  for (int i = 1; i <= l->ninputs; i++) poisoned |= nrt_memory_is_poisoned(l->operands[i].data);
  int64_t bad = -1;
  int first, last;
  input_slots(l, &first, &last);
  for (int64_t r = 0; r < rows && !poisoned; r++)
    for (int s = first; s <= last && !poisoned; s++)
      if (nrt_memory_is_poisoned(slot_ptr(row_at(l, t->table, r), s))) {
        poisoned = true;
        bad = r;
      }
  if (poisoned) {
    poison_rows(l, t->table, rows);
    if (bad < 0)
      nrt_set_error_message("%s: its scalar tensor was written by a kernel that failed earlier (its error was "
                            "reported then); its contents are undefined", nrt_op_name(l->op));
    else
      nrt_set_error_message("%s: an input of list row %lld was written by a kernel that failed earlier (its "
                            "error was reported then); its contents are undefined",
                            nrt_op_name(l->op), (long long)bad);
    return NRT_ERROR_KERNEL_FAILED;
  }
  nrt_status st = nrt_kernel_execute(l);
  if (st != NRT_SUCCESS) poison_rows(l, t->table, rows);
  return st;
}

/* Bytes the launch reads and writes, for the profiler (FLOPs are not
 * counted, as for the pointwise kernels). */
static void foreach_cost(const nrt_launch *l, nrt_task_cost *out) {
  *out = (nrt_task_cost){NRT_ACTIVITY_KERNEL, (int)l->compute_dtype, 0, 0};
  const int64_t *table = l->operands[0].data;
  bool norm = (int)l->op == NRT_OP_FOREACH_NORM, copy = (int)l->op == NRT_OP_FOREACH_COPY;
  uint64_t es = nrt_dtype_size(l->compute_dtype), p1 = nrt_dtype_size((nrt_dtype)l->params[1]);
  for (int64_t r = 0; r < l->sizes[0]; r++) {
    const int64_t *row = row_at(l, table, r);
    if (optim_op(l)) { /* each tensor read and written once; grad written back only when unscaled */
      uint64_t passes = 0;
      for (int s = NRT_FOREACH_OPTIM_PARAM; s <= NRT_FOREACH_OPTIM_STATE2; s++)
        if (row[s]) passes += s == NRT_FOREACH_OPTIM_GRAD && !(l->params[0] & NRT_FOREACH_OPTIM_GRAD_SCALE) ? 1 : 2;
      out->bytes += (uint64_t)row[NRT_FOREACH_OPTIM_NUMEL] * es * passes;
      continue;
    }
    uint64_t n = (uint64_t)row[NRT_FOREACH_NUMEL], per = norm ? 0 : es;
    for (int s = NRT_FOREACH_IN0; s <= NRT_FOREACH_IN2; s++)
      if (row[s]) per += s == NRT_FOREACH_IN0 && copy ? p1 : es;
    out->bytes += n * per + (norm ? p1 : 0);
  }
}

bool nrt_foreach_available(nrt_stream *stream) {
  return stream && !nrt_capture_active(nrt_stream_device(stream));
}

nrt_status nrt_foreach_launch(nrt_stream *stream, const nrt_launch *launch) {
  nrt_status st = nrt_launch_validate("nrt_foreach_launch", launch);
  if (st != NRT_SUCCESS) return st;
  if (!stream) {
    nrt_set_error_message("nrt_foreach_launch: %s: stream is NULL", nrt_op_name(launch->op));
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  st = nrt_foreach_validate(launch);
  if (st != NRT_SUCCESS) return st;
  if (!nrt_foreach_available(stream)) {
    nrt_set_error_message("nrt_foreach_launch: %s: a graph capture records neuron:%d, and a list table holds "
                          "pointers it cannot resolve; launch the single-tensor ops instead",
                          nrt_op_name(launch->op), nrt_stream_device(stream));
    return NRT_ERROR_UNSUPPORTED;
  }
  int64_t rows = launch->sizes[0];
  size_t table_bytes = (size_t)rows * (size_t)nrt_foreach_row_width(launch->op) * sizeof(int64_t);
  foreach_task *t = malloc(sizeof *t + table_bytes);
  if (!t) {
    nrt_set_error_message("nrt_foreach_launch: %s: host out of memory for a %zu-byte table",
                          nrt_op_name(launch->op), table_bytes);
    return NRT_ERROR_OUT_OF_MEMORY;
  }
  t->l = *launch;
  if (table_bytes) memcpy(t->table, launch->operands[0].data, table_bytes);
  nrt_task_cost cost, *costp = NULL;
  if (nrt_profiler_active()) foreach_cost(launch, costp = &cost);
  st = nrt_stream_enqueue_ex(stream, nrt_op_name(launch->op), run_foreach, t, 0, free_task, 0, costp, NULL);
  /* Queued mode fails only before the task exists (release not called);
   * launch-blocking mode ran it and released it, whatever it returned. */
  if (st != NRT_SUCCESS && !nrt_launch_blocking()) free_task(t);
  return st;
}
