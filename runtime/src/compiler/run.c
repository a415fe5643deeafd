/* Running a program (nrt/program.h): every step in order inside ONE stream
 * task. Each step's descriptor is completed with real pointers (slot,
 * arena or constant base plus the recorded offset) and its Philox params
 * fixed up, then goes through the same kernel dispatch eager launches use
 * (api/dispatch.c), or the fused engine for a fused chain. A failure
 * names the program, the step's op and its source location; the stream
 * makes it sticky like an eager launch's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler.h"

typedef struct run_env {
  const nrt_program *p;
  void *const *slots;
  char *arena;
  uint64_t seed, base;
} run_env;

static char *resolve(const run_env *e, nrt_ref r) {
  char *base = NULL;
  switch (r.kind) {
  case NRT_REF_SLOT: base = e->slots[r.index]; break;
  case NRT_REF_ARENA: base = e->arena; break;
  case NRT_REF_CONSTANT: base = e->p->constant_data[r.index]; break;
  default: return NULL;
  }
  return base ? base + r.offset : NULL;
}

static nrt_status step_failed(const run_env *e, int s, nrt_status st) {
  const nrt_step *step = &e->p->steps[s];
  char detail[NRT_ERROR_MESSAGE_MAX];
  snprintf(detail, sizeof detail, "%s", nrt_last_error_message());
  const char *what = step->type == NRT_STEP_FUSED ? "fused chain ending in " : "";
  const char *op = nrt_op_name(step->type == NRT_STEP_FUSED ? step->chain.members[step->chain.nmembers - 1].launch.op
                                                            : step->launch.op);
  nrt_set_error_message("program %s: step %d (%s%s, graph node %d at %s): %s", e->p->name, s, what, op, step->node,
                        step->location ? step->location : "unknown location", detail);
  return st;
}

static nrt_status run_steps(const run_env *e) {
  const nrt_program *p = e->p;
  for (int s = 0; s < p->nsteps; s++) {
    const nrt_step *step = &p->steps[s];
    nrt_status st;
    if (step->type == NRT_STEP_LAUNCH) {
      nrt_launch l = step->launch;
      for (int k = 0; k < l.noutputs + l.ninputs; k++) l.operands[k].data = resolve(e, step->refs[k]);
      /* The draw's place in the run's stream of Philox counters is where
       * it was in the capture's, moved to this run's base. */
      if (step->rng_seed_param >= 0) l.params[step->rng_seed_param] = (int64_t)e->seed;
      if (step->rng_offset_param >= 0)
        l.params[step->rng_offset_param] =
            (int64_t)(e->base + ((uint64_t)l.params[step->rng_offset_param] - p->rng_capture_base));
      st = nrt_kernel_execute(&l);
    } else {
      char *stack_ptrs[64];
      int n = step->chain.nexternal;
      char **ptrs = n <= 64 ? stack_ptrs : malloc(sizeof(char *) * (size_t)n);
      if (!ptrs) return step_failed(e, s, NRT_ERROR_OUT_OF_MEMORY);
      for (int x = 0; x < n; x++) ptrs[x] = resolve(e, step->external[x]);
      st = nrt_fused_execute(&step->chain, ptrs);
      if (ptrs != stack_ptrs) free(ptrs);
    }
    if (st != NRT_SUCCESS) return step_failed(e, s, st);
  }
  return NRT_SUCCESS;
}

static nrt_status check_args(const nrt_program *p, const nrt_program_run_args *a, const char *fn) {
  if (!p || !a) {
    nrt_set_error_message("%s: %s is NULL", fn, p ? "args" : "program");
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  if (a->nslots != p->nslots || (p->nslots && !a->slots)) {
    nrt_set_error_message("%s: program %s has %d slots, %d bound", fn, p->name, p->nslots, a->nslots);
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  for (int s = 0; s < p->nslots; s++)
    if (p->slots[s].bytes > 0 && !a->slots[s]) {
      nrt_set_error_message("%s: program %s: slot %d (%s, %lld bytes) is bound to NULL", fn, p->name, s,
                            nrt_buffer_kind_name(p->slots[s].kind), (long long)p->slots[s].bytes);
      return NRT_ERROR_INVALID_ARGUMENT;
    }
  if (p->arena_bytes > 0 && !a->arena) {
    nrt_set_error_message("%s: program %s needs an arena of %lld bytes", fn, p->name, (long long)p->arena_bytes);
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  return NRT_SUCCESS;
}

nrt_status nrt_program_run_sync(nrt_program *p, const nrt_program_run_args *a) {
  nrt_status st = check_args(p, a, "nrt_program_run_sync");
  if (st != NRT_SUCCESS) return st;
  nrt_clear_error_message();
  run_env e = {p, a->slots, a->arena, a->rng_seed, a->rng_base_offset};
  return run_steps(&e);
}

typedef struct run_task {
  nrt_program *p;
  char *arena;
  uint64_t seed, base;
  int nslots;
  void *slots[]; /* the bindings, copied: the caller's array may die at once */
} run_task;

static nrt_status run_task_fn(void *arg) {
  run_task *t = arg;
  run_env e = {t->p, t->slots, t->arena, t->seed, t->base};
  return run_steps(&e);
}

static void release_task(void *arg) {
  run_task *t = arg;
  nrt_program_release(t->p);
  free(t);
}

nrt_status nrt_program_run(nrt_program *p, nrt_stream *stream, const nrt_program_run_args *a) {
  nrt_status st = check_args(p, a, "nrt_program_run");
  if (st != NRT_SUCCESS) return st;
  if (!stream) {
    nrt_set_error_message("nrt_program_run: stream is NULL");
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  run_task *t = malloc(sizeof *t + sizeof(void *) * (size_t)p->nslots);
  if (!t) {
    nrt_set_error_message("nrt_program_run: host out of memory");
    return NRT_ERROR_OUT_OF_MEMORY;
  }
  t->p = p;
  t->arena = a->arena;
  t->seed = a->rng_seed;
  t->base = a->rng_base_offset;
  t->nslots = p->nslots;
  if (p->nslots) memcpy(t->slots, a->slots, sizeof(void *) * (size_t)p->nslots);
  nrt_program_retain(p);
  /* The name lives as long as the program, which the task holds. */
  st = nrt_stream_enqueue(stream, p->name, run_task_fn, t, release_task);
  /* Queued mode fails only before the task exists (release not called);
   * launch-blocking mode ran it and released it, whatever it returned. */
  if (st != NRT_SUCCESS && !nrt_launch_blocking()) release_task(t);
  return st;
}
