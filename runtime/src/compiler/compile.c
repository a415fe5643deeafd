/* The compiler pipeline (nrt/compiler.h): legality, dead nodes, fusion,
 * memory plan, then scheduling: one step per group in group order, each
 * operand's pointer replaced by where it lives at run time (a slot, the
 * arena, a constant). Also the flags and the report. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compiler/compiler.h"

void nrt_compile_options_default(nrt_compile_options *o) {
  memset(o, 0, sizeof *o);
  o->fuse = o->eliminate_dead = o->plan_memory = o->inplace = true;
}

nrt_status nrt_compile_options_parse(const char *flags, nrt_compile_options *o) {
  if (!flags) return NRT_SUCCESS;
  const char *s = flags;
  while (*s) {
    while (*s == ' ' || *s == '\t') s++;
    if (!*s) break;
    const char *e = s;
    while (*e && *e != ' ' && *e != '\t') e++;
    size_t n = (size_t)(e - s);
    char flag[64];
    if (n >= sizeof flag) n = sizeof flag - 1;
    memcpy(flag, s, n);
    flag[n] = '\0';
    s = e;
    static const struct {
      const char *name;
      size_t field;
      bool value;
    } table[] = {
        {"-ffuse", offsetof(nrt_compile_options, fuse), true},
        {"-fno-fuse", offsetof(nrt_compile_options, fuse), false},
        {"-fdce", offsetof(nrt_compile_options, eliminate_dead), true},
        {"-fno-dce", offsetof(nrt_compile_options, eliminate_dead), false},
        {"-fplan", offsetof(nrt_compile_options, plan_memory), true},
        {"-fno-plan", offsetof(nrt_compile_options, plan_memory), false},
        {"-finplace", offsetof(nrt_compile_options, inplace), true},
        {"-fno-inplace", offsetof(nrt_compile_options, inplace), false},
    };
    if (!strcmp(flag, "-O0")) {
      o->fuse = o->eliminate_dead = o->plan_memory = o->inplace = false;
      continue;
    }
    if (!strcmp(flag, "-O1") || !strcmp(flag, "-O2")) {
      o->fuse = o->eliminate_dead = o->plan_memory = o->inplace = true;
      continue;
    }
    bool found = false;
    for (size_t i = 0; i < sizeof table / sizeof table[0] && !found; i++)
      if (!strcmp(flag, table[i].name)) {
        *(bool *)((char *)o + table[i].field) = table[i].value;
        found = true;
      }
    if (!found) {
      nrt_set_error_message("compiler flags: unknown flag '%s' (known: -O0 -O1 -O2 -f[no-]fuse -f[no-]dce "
                            "-f[no-]plan -f[no-]inplace)",
                            flag);
      return NRT_ERROR_INVALID_ARGUMENT;
    }
  }
  return NRT_SUCCESS;
}

static char *flags_string(const nrt_compile_options *o) {
  char buf[128];
  snprintf(buf, sizeof buf, "fuse=%d dce=%d plan=%d inplace=%d", o->fuse, o->eliminate_dead, o->plan_memory,
           o->inplace);
  return strdup(buf);
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

char *nrt_compile_report_format(const nrt_compile_report *r) {
  char *s = NULL;
  int n = asprintf(&s,
                   "nodes: %d in, %d dead, %d fused into %d steps\n"
                   "steps: %d\n"
                   "intermediates kept in tiles: %d\n"
                   "arena: %lld bytes (intermediates in memory: %lld bytes)\n"
                   "compile time: %.3f ms\n",
                   r->nodes_in, r->nodes_dead, r->nodes_fused, r->fused_steps, r->steps, r->eliminated_buffers,
                   (long long)r->arena_bytes, (long long)r->intermediate_bytes, r->seconds * 1e3);
  return n < 0 ? NULL : s;
}

/* ---- scheduling: groups -> steps ---------------------------------------------------- */

typedef struct builder {
  const nrt_graph *g;
  const nrt_fusion *f;
  const nrt_memory_plan *plan;
  int *constant_of; /* buffer -> constant index */
} builder;

static nrt_ref ref_of(const builder *b, int buffer, int64_t offset) {
  if (buffer < 0) return (nrt_ref){NRT_REF_NONE, 0, 0};
  const nrt_graph_buffer *x = &b->g->buffers[buffer];
  switch (x->kind) {
  case NRT_BUFFER_INPUT:
  case NRT_BUFFER_OUTPUT: return (nrt_ref){NRT_REF_SLOT, x->slot, offset};
  case NRT_BUFFER_CONSTANT: return (nrt_ref){NRT_REF_CONSTANT, b->constant_of[buffer], offset};
  default: return (nrt_ref){NRT_REF_ARENA, 0, b->plan->offset[buffer] + offset};
  }
}

static void launch_of(const nrt_graph_node *n, nrt_launch *l) {
  memset(l, 0, sizeof *l);
  l->op = n->op;
  l->ndim = n->ndim;
  memcpy(l->sizes, n->sizes, sizeof l->sizes);
  l->noutputs = n->noutputs;
  l->ninputs = n->ninputs;
  l->compute_dtype = n->compute_dtype;
  memcpy(l->scalars, n->scalars, sizeof l->scalars);
  memcpy(l->params, n->params, sizeof l->params);
  memcpy(l->aux, n->aux, sizeof l->aux);
  for (int k = 0; k < n->noutputs + n->ninputs; k++) {
    l->operands[k].dtype = n->operands[k].dtype;
    memcpy(l->operands[k].strides, n->operands[k].strides, sizeof l->operands[k].strides);
  }
}

static nrt_status build_step(const builder *b, const nrt_group *gr, nrt_step *step) {
  const nrt_graph *g = b->g;
  memset(step, 0, sizeof *step);
  const nrt_graph_node *last = &g->nodes[gr->position];
  step->node = gr->position;
  step->rng_seed_param = step->rng_offset_param = -1;
  if (last->location && !(step->location = strdup(last->location))) return NRT_ERROR_OUT_OF_MEMORY;
  if (gr->nmembers == 1) {
    step->type = NRT_STEP_LAUNCH;
    launch_of(last, &step->launch);
    for (int k = 0; k < last->noutputs + last->ninputs; k++)
      step->refs[k] = ref_of(b, last->operands[k].buffer, last->operands[k].offset);
    step->rng_seed_param = last->rng_seed_param;
    step->rng_offset_param = last->rng_offset_param;
    return NRT_SUCCESS;
  }
  step->type = NRT_STEP_FUSED;
  nrt_fused_chain *c = &step->chain;
  c->ndim = gr->ndim;
  memcpy(c->sizes, gr->sizes, sizeof c->sizes);
  c->nmembers = gr->nmembers;
  c->ntiles = gr->ntiles;
  nrt_fused_member *members = calloc((size_t)gr->nmembers, sizeof *members);
  step->external = malloc(sizeof(nrt_ref) * (size_t)gr->nmembers * NRT_MAX_OPERANDS);
  c->members = members;
  if (!members || !step->external) return NRT_ERROR_OUT_OF_MEMORY;
  for (int m = 0; m < gr->nmembers; m++) {
    const nrt_graph_node *n = &g->nodes[gr->members[m]];
    nrt_fused_member *fm = &members[m];
    launch_of(n, &fm->launch);
    fm->launch.ndim = gr->ndim;
    memcpy(fm->launch.sizes, gr->sizes, sizeof fm->launch.sizes);
    for (int k = 0; k < n->noutputs + n->ninputs; k++) {
      memcpy(fm->launch.operands[k].strides, gr->strides[m][k], sizeof fm->launch.operands[k].strides);
      int buf = n->operands[k].buffer;
      fm->tile[k] = -1;
      fm->external[k] = -1;
      if (b->f->tiled[buf]) {
        fm->tile[k] = (int16_t)b->f->tile_slot[buf];
        continue;
      }
      nrt_ref r = ref_of(b, buf, n->operands[k].offset);
      int e = 0;
      while (e < c->nexternal && memcmp(&step->external[e], &r, sizeof r)) e++;
      if (e == c->nexternal) step->external[c->nexternal++] = r;
      fm->external[k] = (int16_t)e;
    }
  }
  return NRT_SUCCESS;
}

static nrt_status build_program(const nrt_graph *g, const nrt_compile_options *o, const nrt_fusion *f,
                                const nrt_memory_plan *plan, nrt_program *p) {
  p->name = strdup(o->name ? o->name : "graph");
  p->compiler = strdup(NRT_COMPILER_VERSION);
  p->flags = flags_string(o);
  p->cpu_features = strdup(nrt_host_cpu_features());
  if (!p->name || !p->compiler || !p->flags || !p->cpu_features) return NRT_ERROR_OUT_OF_MEMORY;
  p->arena_bytes = plan->arena_bytes;
  for (int i = 0; i < g->nbuffers; i++)
    if (g->buffers[i].slot + 1 > p->nslots) p->nslots = g->buffers[i].slot + 1;
  p->slots = calloc((size_t)(p->nslots ? p->nslots : 1), sizeof *p->slots);
  int *constant_of = malloc(sizeof(int) * (size_t)(g->nbuffers ? g->nbuffers : 1));
  if (!p->slots || !constant_of) {
    free(constant_of);
    return NRT_ERROR_OUT_OF_MEMORY;
  }
  for (int i = 0; i < g->nbuffers; i++) {
    const nrt_graph_buffer *x = &g->buffers[i];
    constant_of[i] = -1;
    if (x->slot >= 0) p->slots[x->slot] = (nrt_program_slot){x->kind, x->bytes, x->mutated};
    if (x->kind == NRT_BUFFER_CONSTANT) constant_of[i] = p->nconstants++;
  }
  p->constant_bytes = calloc((size_t)(p->nconstants ? p->nconstants : 1), sizeof *p->constant_bytes);
  p->constant_data = calloc((size_t)(p->nconstants ? p->nconstants : 1), sizeof *p->constant_data);
  nrt_status st = p->constant_bytes && p->constant_data ? NRT_SUCCESS : NRT_ERROR_OUT_OF_MEMORY;
  for (int i = 0; i < g->nbuffers && st == NRT_SUCCESS; i++) {
    const nrt_graph_buffer *x = &g->buffers[i];
    if (x->kind != NRT_BUFFER_CONSTANT) continue;
    int c = constant_of[i];
    p->constant_bytes[c] = x->bytes;
    p->constant_data[c] = aligned_alloc(64, (size_t)((x->bytes + 63) / 64 * 64 + 64));
    if (!p->constant_data[c]) st = NRT_ERROR_OUT_OF_MEMORY;
    else if (x->bytes) memcpy(p->constant_data[c], x->data, (size_t)x->bytes);
  }
  builder b = {g, f, plan, constant_of};
  if (st == NRT_SUCCESS) {
    p->steps = calloc((size_t)(f->ngroups ? f->ngroups : 1), sizeof *p->steps);
    if (!p->steps) st = NRT_ERROR_OUT_OF_MEMORY;
  }
  for (int s = 0; s < f->ngroups && st == NRT_SUCCESS; s++) {
    st = build_step(&b, &f->groups[s], &p->steps[s]);
    p->nsteps = s + 1;
    if (p->steps[s].rng_offset_param >= 0 || p->steps[s].rng_seed_param >= 0) p->uses_rng = true;
  }
  p->rng_capture_base = g->rng_base_offset;
  p->rng_advance = g->rng_advance;
  free(constant_of);
  if (st != NRT_SUCCESS) nrt_set_error_message("nrt_compile: host out of memory");
  return st;
}

nrt_status nrt_compile(const nrt_graph *g, const nrt_compile_options *options, nrt_program **out_program,
                       nrt_compile_report *out_report) {
  if (!g || !out_program) {
    nrt_set_error_message("nrt_compile: %s is NULL", g ? "out_program" : "graph");
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  *out_program = NULL;
  double t0 = now_seconds();
  nrt_compile_options o;
  if (options) o = *options;
  else nrt_compile_options_default(&o);
  nrt_status st = nrt_check_legality(g);
  if (st != NRT_SUCCESS) return st;
  bool *live = malloc(sizeof(bool) * (size_t)(g->nnodes ? g->nnodes : 1));
  if (!live) return NRT_ERROR_OUT_OF_MEMORY;
  int dead = nrt_eliminate_dead(g, o.eliminate_dead, live);
  nrt_fusion f;
  nrt_memory_plan plan = {0};
  st = nrt_fuse(g, live, o.fuse, &f);
  if (st == NRT_SUCCESS) st = nrt_plan_memory(g, &f, o.plan_memory, o.inplace, &plan);
  nrt_program *p = NULL;
  if (st == NRT_SUCCESS) {
    p = nrt_program_alloc();
    st = p ? build_program(g, &o, &f, &plan, p) : NRT_ERROR_OUT_OF_MEMORY;
  }
  if (st == NRT_SUCCESS && out_report) {
    nrt_compile_report *r = out_report;
    memset(r, 0, sizeof *r);
    r->nodes_in = g->nnodes;
    r->nodes_dead = dead;
    r->steps = f.ngroups;
    for (int s = 0; s < f.ngroups; s++)
      if (f.groups[s].nmembers > 1) {
        r->fused_steps++;
        r->nodes_fused += f.groups[s].nmembers;
      }
    for (int b = 0; b < g->nbuffers; b++) r->eliminated_buffers += f.tiled[b];
    r->intermediate_bytes = plan.naive_bytes;
    r->arena_bytes = plan.arena_bytes;
  }
  nrt_memory_plan_free(&plan);
  nrt_fusion_free(&f);
  free(live);
  if (st != NRT_SUCCESS) {
    nrt_program_free(p);
    return st;
  }
  if (out_report) out_report->seconds = now_seconds() - t0;
  *out_program = p;
  return NRT_SUCCESS;
}
