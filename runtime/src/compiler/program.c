/* The program object (nrt/program.h): ownership, queries, the dump. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler.h"
#include "kernels/common/isa.h"

nrt_program *nrt_program_alloc(void) {
  nrt_program *p = calloc(1, sizeof *p);
  if (p) atomic_init(&p->refs, 1);
  return p;
}

void nrt_program_free(nrt_program *p) {
  if (!p) return;
  for (int s = 0; s < p->nsteps; s++) {
    free(p->steps[s].location);
    free((void *)p->steps[s].chain.members);
    free(p->steps[s].external);
  }
  free(p->steps);
  for (int c = 0; c < p->nconstants; c++) free(p->constant_data ? p->constant_data[c] : NULL);
  free(p->constant_data);
  free(p->constant_bytes);
  free(p->slots);
  free(p->name);
  free(p->compiler);
  free(p->flags);
  free(p->cpu_features);
  free(p);
}

void nrt_program_retain(nrt_program *p) {
  if (p) atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
}

void nrt_program_release(nrt_program *p) {
  if (p && atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) == 1) nrt_program_free(p);
}

const char *nrt_program_name(const nrt_program *p) { return p->name; }
int64_t nrt_program_arena_bytes(const nrt_program *p) { return p->arena_bytes; }
int nrt_program_slot_count(const nrt_program *p) { return p->nslots; }
int nrt_program_step_count(const nrt_program *p) { return p->nsteps; }
uint64_t nrt_program_rng_advance(const nrt_program *p) { return p->rng_advance; }
bool nrt_program_uses_rng(const nrt_program *p) { return p->uses_rng; }
const char *nrt_program_compiler(const nrt_program *p) { return p->compiler; }
const char *nrt_program_flags(const nrt_program *p) { return p->flags; }
const char *nrt_program_cpu_features(const nrt_program *p) { return p->cpu_features; }

nrt_status nrt_program_slot_info(const nrt_program *p, int slot, nrt_program_slot *out_slot) {
  if (!p || !out_slot || slot < 0 || slot >= p->nslots) {
    nrt_set_error_message("nrt_program_slot_info: slot %d outside 0..%d", slot, p ? p->nslots - 1 : -1);
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  *out_slot = p->slots[slot];
  return NRT_SUCCESS;
}

/* The kernels pick their ISA at run time, so an artifact runs anywhere;
 * the features are recorded for cache keys and for reading a dump. */
const char *nrt_host_cpu_features(void) {
  switch (nrt_kernels_isa()) {
  case NRT_ISA_AVX512_BF16: return "x86-64 avx2 avx512 avx512_bf16";
  case NRT_ISA_AVX512: return "x86-64 avx2 avx512";
  case NRT_ISA_AVX2: return "x86-64 avx2";
  default: return "x86-64-v2";
  }
}

const char *nrt_ref_kind_name(int kind) {
  switch (kind) {
  case NRT_REF_NONE: return "none";
  case NRT_REF_SLOT: return "slot";
  case NRT_REF_ARENA: return "arena";
  case NRT_REF_CONSTANT: return "const";
  default: return "invalid";
  }
}

static void dump_ref(FILE *f, nrt_ref r) {
  if (r.kind == NRT_REF_NONE) fprintf(f, "none");
  else if (r.kind == NRT_REF_ARENA) fprintf(f, "arena+%lld", (long long)r.offset);
  else fprintf(f, "%s%d+%lld", nrt_ref_kind_name(r.kind), r.index, (long long)r.offset);
}

static void dump_sizes(FILE *f, int ndim, const int64_t *sizes) {
  fprintf(f, "[");
  for (int d = 0; d < ndim; d++) fprintf(f, d ? " %lld" : "%lld", (long long)sizes[d]);
  fprintf(f, "]");
}

char *nrt_program_dump(const nrt_program *p) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (!f) return NULL;
  fprintf(f, "program %s\n  compiler %s\n  flags %s\n  cpu %s\n", p->name, p->compiler, p->flags, p->cpu_features);
  fprintf(f, "  arena %lld bytes\n  rng: %s, capture base %llu, advance %llu\n", (long long)p->arena_bytes,
          p->uses_rng ? "draws" : "none", (unsigned long long)p->rng_capture_base,
          (unsigned long long)p->rng_advance);
  for (int s = 0; s < p->nslots; s++)
    fprintf(f, "  slot %d %s %lld bytes%s\n", s, nrt_buffer_kind_name(p->slots[s].kind),
            (long long)p->slots[s].bytes, p->slots[s].mutated ? " mutated" : "");
  for (int c = 0; c < p->nconstants; c++)
    fprintf(f, "  const %d %lld bytes\n", c, (long long)p->constant_bytes[c]);
  for (int s = 0; s < p->nsteps; s++) {
    const nrt_step *st = &p->steps[s];
    if (st->type == NRT_STEP_LAUNCH) {
      const nrt_launch *l = &st->launch;
      fprintf(f, "  step %d launch %s %s ", s, nrt_op_name(l->op), nrt_dtype_name(l->compute_dtype));
      dump_sizes(f, l->ndim, l->sizes);
      for (int k = 0; k < l->noutputs + l->ninputs; k++) {
        fprintf(f, k < l->noutputs ? " out " : " in ");
        dump_ref(f, st->refs[k]);
        fprintf(f, ":%s", nrt_dtype_name(l->operands[k].dtype));
      }
      if (st->rng_offset_param >= 0) fprintf(f, " rng(seed p%d, offset p%d)", st->rng_seed_param, st->rng_offset_param);
    } else {
      const nrt_fused_chain *c = &st->chain;
      fprintf(f, "  step %d fused %d members, %d tiles, %d externals ", s, c->nmembers, c->ntiles, c->nexternal);
      dump_sizes(f, c->ndim, c->sizes);
      for (int e = 0; e < c->nexternal; e++) {
        fprintf(f, e ? " " : " ext ");
        dump_ref(f, st->external[e]);
      }
      for (int m = 0; m < c->nmembers; m++) {
        const nrt_fused_member *fm = &c->members[m];
        const nrt_launch *l = &fm->launch;
        fprintf(f, "\n      %s %s", nrt_op_name(l->op), nrt_dtype_name(l->compute_dtype));
        for (int k = 0; k < l->noutputs + l->ninputs; k++) {
          fprintf(f, k < l->noutputs ? " out " : " in ");
          if (fm->tile[k] >= 0) fprintf(f, "tile%d", fm->tile[k]);
          else fprintf(f, "ext%d", fm->external[k]);
          fprintf(f, ":%s", nrt_dtype_name(l->operands[k].dtype));
        }
      }
    }
    if (st->location) fprintf(f, "\n      at %s", st->location);
    fprintf(f, "\n");
  }
  fclose(f);
  return text;
}
