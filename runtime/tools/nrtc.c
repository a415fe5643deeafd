/* nrtc: the graph compiler's command-line driver (no Python needed).
 *
 *   nrtc GRAPH [-o ARTIFACT] [--flags "-O0 -fno-fuse ..."] [--name NAME]
 *        compiles a saved graph ("nrt-graph 1" text) and prints the passes'
 *        report: nodes before and after fusion, arena bytes against the sum
 *        of the intermediates, steps.
 *   nrtc --dump ARTIFACT
 *        prints a compiled artifact: header, slots, arena, steps.
 *   nrtc --check GRAPH [--flags ...]
 *        runs the graph compiled with the flags and with -O0 on the same
 *        random inputs and compares every output bit (exit status 1 on a
 *        difference): how a graph that computes wrongly compiled is
 *        narrowed down.
 *   nrtc --time GRAPH [--flags ...] [--runs N]
 *        runs the compiled graph N times on random inputs; prints the median.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nrt/compiler.h"
#include "nrt/graph.h"
#include "nrt/nrt.h"
#include "nrt/program.h"

static int usage(void) {
  fprintf(stderr,
          "usage: nrtc GRAPH [-o ARTIFACT] [--flags FLAGS] [--name NAME]\n"
          "       nrtc --dump ARTIFACT\n"
          "       nrtc --check GRAPH [--flags FLAGS]\n"
          "       nrtc --time GRAPH [--flags FLAGS] [--runs N]\n");
  return 2;
}

static int fail(const char *what, nrt_status st) {
  fprintf(stderr, "nrtc: %s: %s: %s\n", what, nrt_status_name(st), nrt_last_error_message());
  return 1;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct memory {
  int n;
  void **slots;
  void *arena;
} memory;

/* Slot and arena memory; inputs get small random floats in every 4-byte
 * word (the same sequence for every program of one graph). */
static int bind(nrt_program *p, memory *m) {
  m->n = nrt_program_slot_count(p);
  m->slots = calloc((size_t)(m->n ? m->n : 1), sizeof *m->slots);
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (int s = 0; s < m->n; s++) {
    nrt_program_slot info;
    nrt_program_slot_info(p, s, &info);
    size_t bytes = (size_t)((info.bytes + 63) / 64 * 64 + 64);
    m->slots[s] = aligned_alloc(64, bytes);
    if (!m->slots[s]) return 1;
    memset(m->slots[s], 0, bytes);
    if (info.kind != NRT_BUFFER_INPUT) continue;
    float *f = m->slots[s];
    for (int64_t i = 0; i < info.bytes / 4; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      f[i] = (float)((double)(x >> 11) * 0x1p-53 * 4.0 - 2.0);
    }
  }
  int64_t arena = nrt_program_arena_bytes(p);
  m->arena = arena ? aligned_alloc(64, (size_t)(arena + 64)) : NULL;
  return 0;
}

static void unbind(memory *m) {
  for (int s = 0; s < m->n; s++) free(m->slots[s]);
  free(m->slots);
  free(m->arena);
}

static nrt_status run(nrt_program *p, memory *m) {
  nrt_program_run_args a = {m->slots, m->n, m->arena, 0, 0};
  return nrt_program_run_sync(p, &a);
}

static nrt_status compile_file(const char *path, const char *flags, const char *name, nrt_program **out,
                               nrt_compile_report *report) {
  nrt_graph *g;
  nrt_status st = nrt_graph_load(path, &g);
  if (st != NRT_SUCCESS) return st;
  nrt_compile_options o;
  nrt_compile_options_default(&o);
  o.name = name;
  st = nrt_compile_options_parse(flags, &o);
  if (st == NRT_SUCCESS) st = nrt_compile(g, &o, out, report);
  nrt_graph_destroy(g);
  return st;
}

static int check(const char *path, const char *flags) {
  nrt_program *opt, *ref;
  nrt_status st = compile_file(path, flags, "optimised", &opt, NULL);
  if (st != NRT_SUCCESS) return fail(path, st);
  st = compile_file(path, "-O0", "reference", &ref, NULL);
  if (st != NRT_SUCCESS) return fail(path, st);
  memory a, b;
  if (bind(opt, &a) || bind(ref, &b)) return fail("host memory", NRT_ERROR_OUT_OF_MEMORY);
  nrt_status sa = run(opt, &a), sb = run(ref, &b);
  int bad = sa != sb;
  if (bad) fprintf(stderr, "nrtc: statuses differ: %s vs %s (-O0)\n", nrt_status_name(sa), nrt_status_name(sb));
  for (int s = 0; s < a.n; s++) {
    nrt_program_slot info;
    nrt_program_slot_info(opt, s, &info);
    const unsigned char *x = a.slots[s], *y = b.slots[s];
    int64_t first = -1, count = 0;
    for (int64_t i = 0; i < info.bytes; i++)
      if (x[i] != y[i]) {
        if (first < 0) first = i;
        count++;
      }
    if (count) {
      printf("slot %d (%s): %lld bytes differ, first at byte %lld (", s, nrt_buffer_kind_name(info.kind),
             (long long)count, (long long)first);
      for (int64_t i = first & ~(int64_t)3; i < (first & ~(int64_t)3) + 4 && i < info.bytes; i++)
        printf("%02x/%02x%s", x[i], y[i], i + 1 < (first & ~(int64_t)3) + 4 ? " " : "");
      printf(")\n");
      bad = 1;
    }
  }
  if (!bad) printf("same bits as -O0 in every slot\n");
  unbind(&a);
  unbind(&b);
  nrt_program_release(opt);
  nrt_program_release(ref);
  return bad;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static int timing(const char *path, const char *flags, int runs) {
  nrt_program *p;
  nrt_status st = compile_file(path, flags, "timed", &p, NULL);
  if (st != NRT_SUCCESS) return fail(path, st);
  memory m;
  if (bind(p, &m)) return fail("host memory", NRT_ERROR_OUT_OF_MEMORY);
  double *t = malloc(sizeof(double) * (size_t)runs);
  for (int r = 0; r < runs; r++) {
    double t0 = now();
    st = run(p, &m);
    t[r] = now() - t0;
    if (st != NRT_SUCCESS) return fail("run", st);
  }
  qsort(t, (size_t)runs, sizeof *t, cmp_double);
  printf("%s %s: median %.3f ms over %d runs (min %.3f ms)\n", path, flags ? flags : "", t[runs / 2] * 1e3, runs,
         t[0] * 1e3);
  free(t);
  unbind(&m);
  nrt_program_release(p);
  return 0;
}

int main(int argc, char **argv) {
  const char *graph = NULL, *out = NULL, *flags = NULL, *name = NULL, *dump = NULL;
  int mode = 0, runs = 20; /* 0 compile, 1 check, 2 time */
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    bool more = i + 1 < argc;
    if (!strcmp(a, "-o") && more) out = argv[++i];
    else if (!strcmp(a, "--flags") && more) flags = argv[++i];
    else if (!strcmp(a, "--name") && more) name = argv[++i];
    else if (!strcmp(a, "--runs") && more) runs = atoi(argv[++i]);
    else if (!strcmp(a, "--dump") && more) dump = argv[++i];
    else if (!strcmp(a, "--check")) mode = 1;
    else if (!strcmp(a, "--time")) mode = 2;
    else if (a[0] == '-') return usage();
    else if (!graph) graph = a;
    else return usage();
  }
  if (dump) {
    nrt_program *p;
    nrt_status st = nrt_program_load(dump, &p);
    if (st != NRT_SUCCESS) return fail(dump, st);
    char *text = nrt_program_dump(p);
    fputs(text ? text : "", stdout);
    free(text);
    nrt_program_release(p);
    return 0;
  }
  if (!graph || runs < 1) return usage();
  if (mode == 1) return check(graph, flags);
  if (mode == 2) return timing(graph, flags, runs);
  nrt_program *p;
  nrt_compile_report r;
  nrt_status st = compile_file(graph, flags, name ? name : graph, &p, &r);
  if (st != NRT_SUCCESS) return fail(graph, st);
  char *report = nrt_compile_report_format(&r);
  fputs(report ? report : "", stdout);
  free(report);
  if (out) {
    st = nrt_program_save(p, out);
    if (st != NRT_SUCCESS) return fail(out, st);
    printf("wrote %s\n", out);
  }
  nrt_program_release(p);
  return 0;
}
