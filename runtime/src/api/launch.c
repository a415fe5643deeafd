/* Kernel launches: descriptor validation and the enqueue of a launch on a
 * stream. The op table is core/ops.c; execution is nrt_kernel_execute()
 * (api/dispatch.c). */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

#include "api/api.h"
#include "exec/exec.h"
#include "memory/memory.h"
#include "nrt/ops/index.h"
#include "nrt/profiler.h"

/* The descriptor is copied into the stream's task; it must fit. */
_Static_assert(sizeof(nrt_launch) <= NRT_TASK_INLINE_MAX, "nrt_launch exceeds a task's payload");

static nrt_status invalid(const char *fn, const char *op, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static nrt_status invalid(const char *fn, const char *op, const char *fmt, ...) {
  char detail[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  nrt_set_error_message("%s: %s: %s", fn, op, detail);
  return NRT_ERROR_INVALID_ARGUMENT;
}

static bool dtype_valid(nrt_dtype d) { return (unsigned)d < NRT_DTYPE_COUNT; }

/* Whether operand i of a GEMM launch has no elements: C and bias span
 * batch*M*N, A batch*M*K, B batch*K*N. With K == 0, C is not empty
 * although A and B are. */
static bool gemm_operand_empty(const nrt_launch *l, int i) {
  int64_t batch = l->sizes[0], m = l->sizes[1], n = l->sizes[2], k = l->sizes[3];
  switch (i) {
    case 1: return batch == 0 || m == 0 || k == 0;
    case 2: return batch == 0 || k == 0 || n == 0;
    default: return batch == 0 || m == 0 || n == 0;
  }
}

/* Inputs an op accepts: its row's range, except for the advanced-indexing
 * ops, which take one index operand per indexed dim (p0 of them). */
static nrt_status input_range(const char *fn, const nrt_launch *l, int *lo, int *hi) {
  *lo = nrt_op_ninputs(l->op);
  *hi = nrt_op_max_inputs(l->op);
  if (l->op == NRT_OP(INDEX_GATHER) || l->op == NRT_OP(INDEX_PUT)) {
    int64_t k = l->params[0];
    if (k < 1 || 2 + k > NRT_MAX_OPERANDS)
      return invalid(fn, nrt_op_name(l->op), "p0 = %lld index operands, expected 1..%d",
                     (long long)k, NRT_MAX_OPERANDS - 2);
    *lo = *hi = (int)(1 + k);
  }
  return NRT_SUCCESS;
}

nrt_status nrt_launch_validate(const char *fn, const nrt_launch *l) {
  if (!l) {
    nrt_set_error_message("%s: launch descriptor is NULL", fn);
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  if (!nrt_op_valid(l->op)) return invalid(fn, "?", "invalid op %d", (int)l->op);
  const char *op = nrt_op_name(l->op);
  if (l->ndim < 0 || l->ndim > NRT_MAX_DIMS)
    return invalid(fn, op, "ndim %d outside 0..%d", l->ndim, NRT_MAX_DIMS);
  bool empty = false;
  for (int d = 0; d < l->ndim; d++) {
    if (l->sizes[d] < 0)
      return invalid(fn, op, "negative size %lld in dim %d", (long long)l->sizes[d], d);
    if (l->sizes[d] == 0) empty = true;
  }
  bool gemm = nrt_op_kind(l->op) == NRT_KIND_GEMM;
  if (gemm && l->ndim != 4)
    return invalid(fn, op, "GEMM sizes are {batch, M, N, K}, got ndim %d", l->ndim);
  if (l->noutputs < 1 || l->noutputs > NRT_MAX_OPERANDS)
    return invalid(fn, op, "noutputs %d outside 1..%d", l->noutputs, NRT_MAX_OPERANDS);
  int want = nrt_op_ninputs(l->op);
  int lo, hi;
  nrt_status st = input_range(fn, l, &lo, &hi);
  if (st != NRT_SUCCESS) return st;
  if (l->ninputs < lo || l->ninputs > hi) {
    if (lo == hi && lo != want) /* INDEX_GATHER / INDEX_PUT: 1 + p0 */
      return invalid(fn, op, "expected %d inputs (1 + p0 index operands), got %d", lo, l->ninputs);
    if (lo == hi)
      return invalid(fn, op, "expected %d inputs, got %d", want, l->ninputs);
    if (gemm)
      return invalid(fn, op, "expected %d inputs (3 with bias), got %d", want, l->ninputs);
    return invalid(fn, op, "expected %d to %d inputs, got %d", lo, hi, l->ninputs);
  }
  if (l->op == NRT_OP(SORT) && l->noutputs != 2)
    return invalid(fn, op, "expected 2 outputs (values, indices), got %d", l->noutputs);
  if (l->noutputs + l->ninputs > NRT_MAX_OPERANDS)
    return invalid(fn, op, "%d operands, at most %d", l->noutputs + l->ninputs,
                   NRT_MAX_OPERANDS);
  if (!dtype_valid(l->compute_dtype))
    return invalid(fn, op, "invalid compute dtype %d", (int)l->compute_dtype);
  for (int i = 0; i < l->noutputs + l->ninputs; i++) {
    const nrt_operand *o = &l->operands[i];
    if (!dtype_valid(o->dtype))
      return invalid(fn, op, "operand %d has invalid dtype %d", i, (int)o->dtype);
    if (o->inline_slot != 0) {
      if (i < l->noutputs)
        return invalid(fn, op, "operand %d is an output and cannot be an inline value", i);
      if (o->inline_slot < 0 || o->inline_slot > NRT_MAX_INLINE)
        return invalid(fn, op, "operand %d has inline slot %d outside 1..%d", i, (int)o->inline_slot,
                       NRT_MAX_INLINE);
      /* One value broadcast everywhere: a stride would walk off the slot. */
      for (int d = 0; d < l->ndim; d++)
        if (o->strides[d] != 0)
          return invalid(fn, op, "inline operand %d has stride %lld in dim %d, expected 0", i,
                         (long long)o->strides[d], d);
      continue;
    }
    bool operand_empty = gemm ? gemm_operand_empty(l, i) : empty;
    if (!o->data && !operand_empty)
      return invalid(fn, op, "operand %d has NULL data", i);
  }
  return NRT_SUCCESS;
}

/* A launch reading a poisoned input fails, and a failed launch poisons its
 * outputs (memory/memory.h): garbage never reads back as a result. */
static void poison_outputs(const nrt_launch *l) {
  for (int i = 0; i < l->noutputs && i < NRT_MAX_OPERANDS; i++) nrt_memory_poison(l->operands[i].data);
}

static nrt_status run_launch(void *arg) {
  const nrt_launch *l = arg;
  for (int i = l->noutputs; i < l->noutputs + l->ninputs && i < NRT_MAX_OPERANDS; i++) {
    if (l->operands[i].inline_slot == 0 && nrt_memory_is_poisoned(l->operands[i].data)) {
      poison_outputs(l);
      nrt_set_error_message("%s: input %d was written by a kernel that failed earlier (its error was reported "
                            "then); its contents are undefined", nrt_op_name(l->op), i - l->noutputs);
      return NRT_ERROR_KERNEL_FAILED;
    }
  }
  nrt_status st = nrt_kernel_execute(l);
  if (st != NRT_SUCCESS) poison_outputs(l);
  return st;
}

/* Elementwise, reduction and row kernels over at most this many elements
 * run on the enqueuing thread when their stream is idle: below it, the
 * kernel takes less time than handing it to the stream's worker (about a
 * microsecond). Other kinds' cost is not their element count. */
#define SMALL_LAUNCH_ELEMENTS 4096

static bool small_launch(const nrt_launch *l) {
  nrt_kind kind = nrt_op_kind(l->op);
  if (kind != NRT_KIND_POINTWISE && kind != NRT_KIND_REDUCE && kind != NRT_KIND_ROW) return false;
  int64_t n = 1;
  for (int d = 0; d < l->ndim; d++) {
    n *= l->sizes[d];
    if (n > SMALL_LAUNCH_ELEMENTS) return false;
  }
  return true;
}

nrt_status nrt_launch_kernel(nrt_stream *stream, const nrt_launch *launch) {
  nrt_status st = nrt_launch_validate("nrt_launch_kernel", launch);
  if (st != NRT_SUCCESS) return st;
  if (!stream) {
    nrt_set_error_message("nrt_launch_kernel: %s: stream is NULL", nrt_op_name(launch->op));
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  /* A graph capture records the launch (or refuses it) before it runs. */
  if (nrt_capture_active(nrt_stream_device(stream))) {
    st = nrt_capture_notify_launch(stream, launch);
    if (st != NRT_SUCCESS) return st;
  }
  /* The descriptor is copied into the task, so the caller's copy may die
   * right after this call. */
  nrt_task_cost cost, *costp = NULL;
  if (nrt_profiler_active()) nrt_launch_cost(launch, costp = &cost);
  return nrt_stream_enqueue_ex(stream, nrt_op_name(launch->op), run_launch, (void *)launch,
                               sizeof *launch, NULL, small_launch(launch) ? NRT_TASK_RUN_IF_IDLE : 0,
                               costp, NULL);
}

nrt_status nrt_launch_run(const nrt_launch *launch) {
  nrt_status st = nrt_launch_validate("nrt_launch_run", launch);
  if (st != NRT_SUCCESS) return st;
  nrt_clear_error_message();
  return nrt_kernel_execute(launch);
}
