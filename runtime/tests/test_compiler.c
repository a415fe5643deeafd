/* Graph compiler tests (nrt/graph.h, nrt/compiler.h, nrt/program.h).
 *
 * 1. The text format: write / parse round trip, malformed input rejected
 *    with its line number, a small fuzz (mutated and truncated texts never
 *    crash the parser).
 * 2. Legality errors name the node.
 * 3. Fusion: every pointwise op in a chain, and random chains with
 *    broadcasts, transposes and dtype changes, give the same bits fused as
 *    unfused (fast and reference paths; a NaN's sign and payload aside, see
 *    same_bits), and do fuse.
 * 4. The memory plan never overlaps intermediates that are live at once
 *    (brute force over random graphs) and beats the naive sum on a chain.
 * 5. The artifact round trip; a flipped byte, a truncation, a bad magic or
 *    version are each reported.
 * 6. A 1,000-node graph compiles (time printed, never checked). */
#include <stdint.h>
#include <string.h>
#include <time.h>
#include "testing.h"
#include "nrt/compiler.h"
#include "nrt/graph.h"
#include "nrt/program.h"
#include "compiler/compiler.h"

/* ---- helpers ---------------------------------------------------------------------- */

static int add_buf(nrt_graph *g, nrt_buffer_kind kind, int64_t bytes, int slot, bool mutated) {
  nrt_graph_buffer b = {.bytes = bytes, .kind = kind, .slot = slot, .mutated = mutated};
  int id = -1;
  CHECK_OK(nrt_graph_add_buffer(g, &b, &id));
  return id;
}

/* Operand k over ndim dims with strides counted in elements. */
static void set_op(nrt_graph_node *n, int k, int buffer, nrt_dtype dt, const int64_t *elem_strides) {
  n->operands[k].buffer = buffer;
  n->operands[k].offset = 0;
  n->operands[k].dtype = dt;
  memset(n->operands[k].strides, 0, sizeof n->operands[k].strides);
  for (int d = 0; d < n->ndim; d++) n->operands[k].strides[d] = elem_strides[d] * (int64_t)nrt_dtype_size(dt);
}

static double seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Slot memory for a program, filled with random values per slot dtype. */
typedef struct bound {
  int n;
  void *slots[64];
  void *arena;
} bound;

static void bind(nrt_program *p, bound *b, uint64_t seed) {
  b->n = nrt_program_slot_count(p);
  for (int s = 0; s < b->n; s++) {
    nrt_program_slot info;
    CHECK_OK(nrt_program_slot_info(p, s, &info));
    size_t bytes = (size_t)((info.bytes + 63) / 64 * 64 + 64);
    b->slots[s] = aligned_alloc(64, bytes);
    unsigned char *q = b->slots[s];
    for (size_t i = 0; i < bytes; i++) q[i] = 0;
  }
  int64_t arena = nrt_program_arena_bytes(p);
  b->arena = arena ? aligned_alloc(64, (size_t)(arena + 64)) : NULL;
}

static void unbind(bound *b) {
  for (int s = 0; s < b->n; s++) free(b->slots[s]);
  free(b->arena);
}

static nrt_status run(nrt_program *p, bound *b, uint64_t base) {
  nrt_program_run_args a = {b->slots, b->n, b->arena, 1234, base};
  return nrt_program_run_sync(p, &a);
}

/* Random float bits for an input of `count` elements of dt in [lo, hi). */
static void fill(void *data, nrt_dtype dt, int64_t count, double lo, double hi) {
  for (int64_t i = 0; i < count; i++) {
    double v = nrt_test_uniform(lo, hi);
    if (!nrt_dtype_is_floating(dt)) v = floor(v);
    nrt_test_put(data, dt, i, v);
  }
}

/* ---- 1. text format ------------------------------------------------------------------- */

#define NAN_BITS_UNUSED_0 123456789

static nrt_graph *sample_graph(void) {
  nrt_graph *g;
  CHECK_OK(nrt_graph_create(&g));
  int x = add_buf(g, NRT_BUFFER_INPUT, 64 * 4, 0, false);
  int w = add_buf(g, NRT_BUFFER_INPUT, 64 * 4, 1, true);
  int t = add_buf(g, NRT_BUFFER_INTERMEDIATE, 64 * 4, -1, false);
  int y = add_buf(g, NRT_BUFFER_OUTPUT, 64 * 4, 2, false);
  unsigned char bytes[8] = {0, 1, 2, 0xab, 0xcd, 0xef, 0x7f, 0x80};
  nrt_graph_buffer cb = {.bytes = 8, .kind = NRT_BUFFER_CONSTANT, .slot = -1, .data = bytes};
  int c;
  CHECK_OK(nrt_graph_add_buffer(g, &cb, &c));
  int64_t sizes[2] = {8, 8}, st[2] = {8, 1}, bc[2] = {0, 1};
  nrt_graph_node n;
  nrt_graph_node_init(&n, NRT_OP(ADD), NRT_FLOAT32, 2, sizes, 1, 2);
  set_op(&n, 0, t, NRT_FLOAT32, st);
  set_op(&n, 1, x, NRT_FLOAT32, st);
  set_op(&n, 2, w, NRT_FLOAT32, bc);
  n.scalars[0].f = 0.1;
  n.scalars[1].i = NAN_BITS_UNUSED_0;
  n.scalars[2].f = -0.0;
  n.scalars[3].f = NAN;
  n.params[2] = -7;
  n.aux[5] = 99;
  n.location = "model.py:12 in forward \"quoted\" \\ back";
  CHECK_OK(nrt_graph_add_node(g, &n, NULL));
  nrt_graph_node_init(&n, NRT_OP(UNIFORM), NRT_FLOAT32, 2, sizes, 1, 0);
  set_op(&n, 0, y, NRT_FLOAT32, st);
  n.params[0] = 42;
  n.params[1] = 1 << 20;
  n.rng_seed_param = 0;
  n.rng_offset_param = 1;
  CHECK_OK(nrt_graph_add_node(g, &n, NULL));
  nrt_graph_node_init(&n, NRT_OP(MUL), NRT_FLOAT32, 2, sizes, 1, 2);
  set_op(&n, 0, w, NRT_FLOAT32, st);
  set_op(&n, 1, t, NRT_FLOAT32, st);
  set_op(&n, 2, y, NRT_FLOAT32, st);
  CHECK_OK(nrt_graph_add_node(g, &n, NULL));
  (void)c;
  nrt_graph_set_rng(g, 7, 100, 64);
  return g;
}

static void test_graph_roundtrip(void) {
  nrt_graph *g = sample_graph();
  char *a, *b;
  size_t la, lb;
  CHECK_OK(nrt_graph_write(g, &a, &la));
  nrt_graph *h = NULL;
  CHECK_OK(nrt_graph_parse(a, la, &h));
  if (!h) {
    fprintf(stderr, "%s\n", a);
    nrt_graph_destroy(g);
    free(a);
    return;
  }
  CHECK_OK(nrt_graph_write(h, &b, &lb));
  CHECK(la == lb && !memcmp(a, b, la));
  CHECK(nrt_graph_node_count(h) == 3 && nrt_graph_buffer_count(h) == 5);
  const nrt_graph_node *n0 = nrt_graph_node_at(h, 0), *o0 = nrt_graph_node_at(g, 0);
  CHECK(!memcmp(n0->scalars, o0->scalars, sizeof n0->scalars)); /* NaN and -0 bits too */
  CHECK(!strcmp(n0->location, o0->location));
  CHECK(n0->aux[5] == 99 && n0->params[2] == -7 && n0->operands[2].strides[0] == 0);
  CHECK(nrt_graph_node_at(h, 1)->rng_offset_param == 1);
  const nrt_graph_buffer *cb = nrt_graph_buffer_at(h, 4);
  CHECK(cb->kind == NRT_BUFFER_CONSTANT && cb->bytes == 8 && ((const unsigned char *)cb->data)[7] == 0x80);
  CHECK(nrt_graph_buffer_at(h, 1)->mutated);
  uint64_t seed, base, adv;
  nrt_graph_get_rng(h, &seed, &base, &adv);
  CHECK(seed == 7 && base == 100 && adv == 64);
  /* files */
  CHECK_OK(nrt_graph_save(g, "build/ctest/test_compiler.graph"));
  nrt_graph *f = NULL;
  CHECK_OK(nrt_graph_load("build/ctest/test_compiler.graph", &f));
  CHECK(f && nrt_graph_node_count(f) == 3);
  nrt_graph_destroy(f);
  free(a);
  free(b);
  nrt_graph_destroy(g);
  nrt_graph_destroy(h);
}

static void expect_parse_error(const char *text, const char *want) {
  nrt_graph *g = (nrt_graph *)1;
  nrt_status st = nrt_graph_parse(text, strlen(text), &g);
  CHECK(st == NRT_ERROR_INVALID_ARGUMENT && g == NULL);
  if (!strstr(nrt_last_error_message(), want)) {
    fprintf(stderr, "parse error \"%s\", want it to contain \"%s\"\n", nrt_last_error_message(), want);
    nrt_test_failures++;
  }
}

static void test_graph_malformed(void) {
  expect_parse_error("", "expected the header");
  expect_parse_error("nrt-graph 2\n", "line 1: format version 2");
  expect_parse_error("nrt-graph 1\nbuffer 1 input bytes 4 slot 0\n", "line 2: buffer 1 out of order");
  expect_parse_error("nrt-graph 1\nbuffer 0 weird bytes 4\n", "line 2: unknown buffer kind");
  expect_parse_error("nrt-graph 1\nbuffer 0 input bytes 4\n", "need a slot");
  expect_parse_error("nrt-graph 1\nbuffer 0 constant bytes 2 data 0g00\n", "not hex");
  expect_parse_error("nrt-graph 1\nbuffer 0 constant bytes 2 data 001\n", "hex digits");
  expect_parse_error("nrt-graph 1\n\n# c\nnode 0 NOPE compute float32 sizes [4] outputs 1 inputs 1\n",
                     "line 4: unknown op 'NOPE'");
  expect_parse_error("nrt-graph 1\nnode 0 NEG compute float32 sizes [4] outputs 1 inputs 1\n  out b0 @0 float32 [4]\n",
                     "has no 'end'");
  expect_parse_error("nrt-graph 1\nnode 0 NEG compute float32 sizes [4] outputs 1 inputs 1\n  in b0 @0 float32 [4]\nend\n",
                     "line 3: operand 0 must be 'out'");
  expect_parse_error("nrt-graph 1\nnode 0 NEG compute float32 sizes [4 outputs 1 inputs 1\n", "'outputs' is not an integer");
  expect_parse_error("nrt-graph 1\nnode 0 NEG compute float32 sizes [4\n", "missing ']'");
  expect_parse_error("nrt-graph 1\nnode 0 NEG compute float32 sizes [4] outputs 1 inputs 1\n  out b0 @x float32 [4]\nend\n",
                     "bad offset");
  expect_parse_error("nrt-graph 1\nnode 0 NEG compute float32 sizes [1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17] "
                     "outputs 1 inputs 1\n",
                     "more than 16");
  expect_parse_error("nrt-graph 1\nnode 0 NEG compute float32 sizes [4] outputs 1 inputs 1\n  loc \"abc\nend\n",
                     "unterminated string");
  expect_parse_error("nrt-graph 1\nnode 0 NEG compute float32 sizes [4] outputs 1 inputs 99\n", "inputs outside");
  expect_parse_error("nrt-graph 1\nnode 0 NEG compute float32 sizes [4] outputs 1 inputs 1\n  scalars 1 2 3\nend\n",
                     "scalars takes 4");
  expect_parse_error("nrt-graph 1\nnode 0 NEG compute float32 sizes [4] outputs 1 inputs 1\n  rng 9 0\nend\n",
                     "expected 'rng");
  expect_parse_error("nrt-graph 1\nrng seed -1 base 0 advance 0\n", "line 2: expected 'rng seed");
  expect_parse_error("nrt-graph 1\nbuffer 0 input bytes 99999999999999999999 slot 0\n", "bytes <n>");

  /* Fuzz: mutated and truncated versions of a valid text parse or fail,
   * never crash (ASan checks the "never"). */
  nrt_graph *g = sample_graph();
  char *text;
  size_t len;
  CHECK_OK(nrt_graph_write(g, &text, &len));
  nrt_graph_destroy(g);
  char *m = malloc(len + 1);
  static const char alphabet[] = " \n[]\"\\#@b-0123456789xi:.enodbufferinoutend";
  int accepted = 0;
  for (int it = 0; it < 3000; it++) {
    memcpy(m, text, len + 1);
    size_t n = len;
    int edits = 1 + (int)nrt_test_rand_range(0, 4);
    for (int e = 0; e < edits && n > 0; e++) {
      size_t at = (size_t)nrt_test_rand_range(0, (int64_t)n);
      int kind = (int)nrt_test_rand_range(0, 3);
      if (kind == 0) m[at] = alphabet[nrt_test_rand_range(0, (int64_t)sizeof alphabet - 1)];
      else if (kind == 1) m[at] = (char)nrt_test_rand_range(1, 256);
      else n = at;
    }
    nrt_graph *h = NULL;
    nrt_status st = nrt_graph_parse(m, n, &h);
    CHECK(st == NRT_SUCCESS || st == NRT_ERROR_INVALID_ARGUMENT);
    CHECK((st == NRT_SUCCESS) == (h != NULL));
    if (st != NRT_SUCCESS) CHECK(strstr(nrt_last_error_message(), "line ") != NULL);
    accepted += st == NRT_SUCCESS;
    nrt_graph_destroy(h);
  }
  CHECK(accepted < 3000);
  free(m);
  free(text);
}

/* ---- 2. legality ----------------------------------------------------------------------- */

static void expect_compile_error(nrt_graph *g, const char *want) {
  nrt_program *p = (nrt_program *)1;
  nrt_status st = nrt_compile(g, NULL, &p, NULL);
  CHECK(st != NRT_SUCCESS && p == NULL);
  if (!strstr(nrt_last_error_message(), want)) {
    fprintf(stderr, "compile error \"%s\", want \"%s\"\n", nrt_last_error_message(), want);
    nrt_test_failures++;
  }
}

static nrt_graph *one_node(nrt_op op, bool mutated_input, int64_t in_bytes, int64_t out_bytes) {
  nrt_graph *g;
  CHECK_OK(nrt_graph_create(&g));
  int x = add_buf(g, NRT_BUFFER_INPUT, in_bytes, 0, mutated_input);
  int y = add_buf(g, NRT_BUFFER_OUTPUT, out_bytes, 1, false);
  int64_t sizes[1] = {16}, st[1] = {1};
  nrt_graph_node n;
  nrt_graph_node_init(&n, op, NRT_FLOAT32, 1, sizes, 1, 1);
  set_op(&n, 0, y, NRT_FLOAT32, st);
  set_op(&n, 1, x, NRT_FLOAT32, st);
  n.location = "net.py:3 in forward";
  CHECK_OK(nrt_graph_add_node(g, &n, NULL));
  return g;
}

static void test_legality(void) {
  nrt_graph *g = one_node(NRT_OP(NEG), false, 64, 64);
  nrt_program *p = NULL;
  CHECK_OK(nrt_compile(g, NULL, &p, NULL));
  nrt_program_release(p);
  nrt_graph_destroy(g);

  g = one_node(NRT_OP(NEG), false, 60, 64);
  expect_compile_error(g, "node 0 (NEG at net.py:3 in forward): operand 1 reaches bytes [0, 64) of 60-byte buffer 0");
  nrt_graph_destroy(g);

  g = one_node(NRT_OP(NEG), false, 64, 64);
  g->nodes[0].operands[0].buffer = 0; /* writes the input */
  expect_compile_error(g, "writes input slot 0, which is not declared mutated");
  nrt_graph_destroy(g);

  g = one_node(NRT_OP(ADD), false, 64, 64); /* ADD with one input */
  expect_compile_error(g, "ADD: expected 2 inputs, got 1");
  nrt_graph_destroy(g);

  g = one_node(NRT_OP(NEG), false, 64, 64);
  g->nodes[0].operands[1].buffer = 9;
  expect_compile_error(g, "operand 1 refers to buffer 9 of 2");
  nrt_graph_destroy(g);

  g = one_node(NRT_OP(NEG), false, 64, 64);
  g->nodes[0].op = (nrt_op)4000;
  expect_compile_error(g, "unknown op id 4000");
  nrt_graph_destroy(g);

  g = one_node(NRT_OP(NEG), false, 64, 64);
  g->buffers[1].slot = 2;
  expect_compile_error(g, "slot 1 has no buffer");
  nrt_graph_destroy(g);

  nrt_compile_options o;
  nrt_compile_options_default(&o);
  CHECK_OK(nrt_compile_options_parse("-O0 -ffuse", &o));
  CHECK(o.fuse && !o.eliminate_dead && !o.plan_memory);
  CHECK_STATUS(nrt_compile_options_parse("-fbogus", &o), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_PREFIX("compiler flags: unknown flag '-fbogus'");
}

/* ---- 3. fusion ------------------------------------------------------------------------ */

/* The dtype a slot is read (or written) as, from the nodes using it. */
static nrt_dtype slot_dtype(const nrt_graph *g, int slot, bool read) {
  nrt_dtype dt = NRT_FLOAT32;
  for (int i = 0; i < g->nnodes; i++) {
    const nrt_graph_node *n = &g->nodes[i];
    int lo = read ? n->noutputs : 0, hi = read ? n->noutputs + n->ninputs : n->noutputs;
    for (int k = lo; k < hi; k++) {
      int b = n->operands[k].buffer;
      if (b >= 0 && g->buffers[b].slot == slot) dt = n->operands[k].dtype;
    }
  }
  return dt;
}

/* Byte-identical, except that a NaN equals any NaN: x86 propagates the
 * first NaN operand of an instruction, and the vectorised loop of a block
 * function and its scalar tail order operands differently, so which NaN
 * (sign, payload) an op returns depends on where an element falls in its
 * block, in eager runs as much as fused ones. Every other value, -0
 * included, must keep its bits. */
static bool same_bits(const void *a, const void *b, int64_t bytes, nrt_dtype dt) {
  if (!memcmp(a, b, (size_t)bytes)) return true;
  if (!nrt_dtype_is_floating(dt)) return false;
  int64_t esz = (int64_t)nrt_dtype_size(dt);
  for (int64_t i = 0; i < bytes / esz; i++) {
    const char *x = (const char *)a + i * esz, *y = (const char *)b + i * esz;
    if (!memcmp(x, y, (size_t)esz)) continue;
    if (!(isnan(nrt_test_get(x, dt, 0)) && isnan(nrt_test_get(y, dt, 0)))) return false;
  }
  return true;
}

/* Compiles g twice (fused, and -fno-fuse as the reference), runs both on
 * the same random inputs and compares every output bit. Returns the fused
 * report. */
static nrt_compile_report compare_fused(nrt_graph *g, double lo, double hi, bool reference, const char *what) {
  nrt_compile_options fo, uo;
  nrt_compile_options_default(&fo);
  nrt_compile_options_default(&uo);
  uo.fuse = false;
  nrt_program *pf = NULL, *pu = NULL;
  nrt_compile_report rf = {0}, ru;
  CHECK_OK(nrt_compile(g, &fo, &pf, &rf));
  if (getenv("NRT_TEST_O0")) nrt_compile_options_parse("-O0", &uo);
  CHECK_OK(nrt_compile(g, &uo, &pu, &ru));
  if (!pf || !pu) {
    nrt_program_release(pf);
    nrt_program_release(pu);
    return rf;
  }
  bound bf, bu;
  bind(pf, &bf, 1);
  bind(pu, &bu, 1);
  for (int s = 0; s < bf.n; s++) {
    nrt_program_slot info;
    nrt_program_slot_info(pf, s, &info);
    if (info.kind != NRT_BUFFER_INPUT) continue;
    nrt_dtype dt = slot_dtype(g, s, true);
    fill(bf.slots[s], dt, info.bytes / (int64_t)nrt_dtype_size(dt), lo, hi);
    memcpy(bu.slots[s], bf.slots[s], (size_t)info.bytes);
  }
  nrt_kernels_set_reference(reference);
  nrt_status sf = run(pf, &bf, 0), su = run(pu, &bu, 0);
  nrt_kernels_set_reference(false);
  CHECK(sf == su);
  for (int s = 0; s < bf.n; s++) {
    nrt_program_slot info;
    nrt_program_slot_info(pf, s, &info);
    if (!same_bits(bf.slots[s], bu.slots[s], info.bytes, slot_dtype(g, s, false))) {
      fprintf(stderr, "fusion changed the bits of slot %d: %s%s\n", s, what, reference ? " (reference path)" : "");
      if (getenv("NRT_TEST_DUMP")) {
        char *t = NULL;
        nrt_graph_write(g, &t, NULL);
        char *d = nrt_program_dump(pf);
        fprintf(stderr, "%s%s", t, d);
        free(t);
        free(d);
      }
      nrt_test_failures++;
    }
  }
  unbind(&bf);
  unbind(&bu);
  nrt_program_release(pf);
  nrt_program_release(pu);
  return rf;
}

static bool skip_op(nrt_op op) {
  int seed, offset;
  nrt_launch l;
  memset(&l, 0, sizeof l);
  l.op = op;
  nrt_rng_params(&l, &seed, &offset);
  return offset >= 0 || op == NRT_OP(FILL);
}

/* op(x, broadcast y, z) into T (dtype tdt), then T * 2 + x into out: every
 * pointwise op as a chain's first member. */
static void test_fusion_every_op(void) {
  int tried = 0, fused = 0;
  for (int id = 0; id < NRT_OP_ID_LIMIT; id++) {
    nrt_op op = (nrt_op)id;
    if (!nrt_op_valid(op) || nrt_op_kind(op) != NRT_KIND_POINTWISE || skip_op(op)) continue;
    int nin = nrt_op_ninputs(op);
    if (nin < 0 || nin > 3) continue;
    for (int domain = 0; domain < 2; domain++) {
      nrt_dtype cd = domain ? NRT_INT64 : NRT_FLOAT32;
      nrt_dtype idt = domain ? NRT_INT32 : NRT_FLOAT32;
      nrt_graph *g;
      CHECK_OK(nrt_graph_create(&g));
      int64_t sizes[2] = {37, 29}, st[2] = {29, 1}, bc[2] = {0, 1}, tr[2] = {1, 37};
      int in[3];
      for (int k = 0; k < 3; k++) in[k] = add_buf(g, NRT_BUFFER_INPUT, 37 * 29 * 4, k, false);
      int t = add_buf(g, NRT_BUFFER_INTERMEDIATE, 37 * 29 * 8, -1, false);
      int out = add_buf(g, NRT_BUFFER_OUTPUT, 37 * 29 * 8, 3, false);
      nrt_graph_node n;
      nrt_graph_node_init(&n, op, cd, 2, sizes, 1, nin);
      nrt_dtype tdt = domain ? NRT_INT64 : NRT_BFLOAT16;
      set_op(&n, 0, t, tdt, st);
      for (int k = 0; k < nin; k++) set_op(&n, 1 + k, in[k], idt, k == 1 ? bc : (k == 2 ? tr : st));
      n.scalars[0].f = domain ? 0 : 0.75;
      if (domain) n.scalars[0].i = 2;
      n.params[0] = 1;
      CHECK_OK(nrt_graph_add_node(g, &n, NULL));
      nrt_graph_node_init(&n, NRT_OP(ADD), cd, 2, sizes, 1, 2);
      set_op(&n, 0, out, domain ? NRT_INT64 : NRT_FLOAT32, st);
      set_op(&n, 1, t, tdt, st);
      set_op(&n, 2, in[0], idt, st);
      if (domain) n.scalars[0].i = 3;
      else n.scalars[0].f = 2.0;
      CHECK_OK(nrt_graph_add_node(g, &n, NULL));
      /* Only ops the engine runs in this domain compile. */
      nrt_program *p = NULL;
      bool runs = nrt_compile(g, NULL, &p, NULL) == NRT_SUCCESS;
      nrt_program_release(p);
      if (runs) {
        char what[64];
        snprintf(what, sizeof what, "%s in %s", nrt_op_name(op), nrt_dtype_name(cd));
        nrt_compile_report r = compare_fused(g, domain ? 1 : -2, domain ? 9 : 2, false, what);
        compare_fused(g, domain ? 1 : -2, domain ? 9 : 2, true, what);
        tried++;
        fused += r.fused_steps == 1 && r.eliminated_buffers == 1;
      }
      nrt_graph_destroy(g);
    }
  }
  printf("    %d op/domain chains compared, %d fused with the intermediate in tiles\n", tried, fused);
  CHECK(tried > 150);
  CHECK(fused == tried);
}

static const nrt_op chain_unary[] = {NRT_OP(NEG), NRT_OP(ABS), NRT_OP(EXP), NRT_OP(TANH), NRT_OP(SIGMOID),
                                     NRT_OP(RELU), NRT_OP(GELU), NRT_OP(SILU), NRT_OP(SIN), NRT_OP(SQRT),
                                     NRT_OP(FLOOR), NRT_OP(COPY)};
static const nrt_op chain_binary[] = {NRT_OP(ADD), NRT_OP(SUB), NRT_OP(MUL), NRT_OP(DIV), NRT_OP(MAXIMUM),
                                      NRT_OP(POW), NRT_OP(ATAN2), NRT_OP(LT), NRT_OP(WHERE)};

/* Random chains: dims split differently per node (a [6, 40] node next to a
 * [240] one), broadcast and transposed inputs, bfloat16/float16/float64
 * intermediates, a diamond (two members read one tile). */
static void test_fusion_random_chains(void) {
  int fused_steps = 0;
  for (int it = 0; it < 60; it++) {
    nrt_graph *g;
    CHECK_OK(nrt_graph_create(&g));
    int64_t R = nrt_test_rand_range(2, 9), C = nrt_test_rand_range(2, 50);
    int nslots = 0;
    int x = add_buf(g, NRT_BUFFER_INPUT, R * C * 4, nslots++, false);
    int bias = add_buf(g, NRT_BUFFER_INPUT, C * 4, nslots++, false);
    int xt = add_buf(g, NRT_BUFFER_INPUT, R * C * 4, nslots++, false);
    int len = (int)nrt_test_rand_range(2, 9);
    int prev = x, prev2 = x;
    nrt_dtype prev_dt = NRT_FLOAT32;
    nrt_dtype prev2_dt = NRT_FLOAT32;
    static const nrt_dtype dts[] = {NRT_FLOAT32, NRT_FLOAT32, NRT_BFLOAT16, NRT_FLOAT16, NRT_FLOAT64};
    for (int i = 0; i < len; i++) {
      bool last = i == len - 1;
      nrt_dtype odt = last ? NRT_FLOAT32 : dts[nrt_test_rand_range(0, 5)];
      int out = last ? add_buf(g, NRT_BUFFER_OUTPUT, R * C * 8, nslots++, false)
                     : add_buf(g, NRT_BUFFER_INTERMEDIATE, R * C * 8, -1, false);
      bool binary = nrt_test_rand_range(0, 2);
      nrt_op op = binary ? chain_binary[nrt_test_rand_range(0, 9)] : chain_unary[nrt_test_rand_range(0, 12)];
      int nin = nrt_op_ninputs(op);
      /* Shape of this node: 2-d [R, C] or flattened [R*C] when all its
       * operands are contiguous. */
      int form = (int)nrt_test_rand_range(0, 2);
      nrt_graph_node n;
      int64_t s2[2] = {R, C}, s1[1] = {R * C}, st2[2] = {C, 1}, st1[1] = {1}, bc[2] = {0, 1}, tr[2] = {1, R};
      int other = nrt_test_rand_range(0, 3) == 0 ? bias : (nrt_test_rand_range(0, 2) ? xt : prev2);
      bool needs2 = other == bias || other == xt;
      if (needs2 || form == 0) nrt_graph_node_init(&n, op, NRT_FLOAT32, 2, s2, 1, nin);
      else nrt_graph_node_init(&n, op, NRT_FLOAT32, 1, s1, 1, nin);
      const int64_t *st = n.ndim == 2 ? st2 : st1;
      set_op(&n, 0, out, odt, st);
      set_op(&n, 1, prev, prev_dt, st);
      if (nin >= 2) {
        const int64_t *os = other == bias ? bc : (other == xt ? tr : st);
        set_op(&n, 2, other, other == prev2 ? prev2_dt : NRT_FLOAT32, os);
      }
      if (nin == 3) set_op(&n, 3, prev, prev_dt, st);
      n.scalars[0].f = 1.0;
      CHECK_OK(nrt_graph_add_node(g, &n, NULL));
      prev2 = prev;
      prev2_dt = prev_dt;
      prev = out;
      prev_dt = odt;
    }
    char what[64];
    snprintf(what, sizeof what, "random chain %d", it);
    nrt_compile_report r = compare_fused(g, -3, 3, false, what);
    compare_fused(g, -3, 3, true, what);
    fused_steps += r.fused_steps;
    CHECK(r.steps < len || len == 1);
    nrt_graph_destroy(g);
  }
  CHECK(fused_steps >= 60);
}

/* ---- 4. memory plan ------------------------------------------------------------------- */

static void check_plan(const nrt_graph *g, bool fuse) {
  bool *live = malloc(sizeof(bool) * (size_t)g->nnodes);
  nrt_eliminate_dead(g, true, live);
  nrt_fusion f;
  CHECK_OK(nrt_fuse(g, live, fuse, &f));
  nrt_memory_plan plan;
  CHECK_OK(nrt_plan_memory(g, &f, true, true, &plan));
  int nb = g->nbuffers;
  int64_t *first = malloc(sizeof(int64_t) * (size_t)nb), *last = malloc(sizeof(int64_t) * (size_t)nb);
  for (int b = 0; b < nb; b++) first[b] = last[b] = -1;
  for (int s = 0; s < f.ngroups; s++)
    for (int m = 0; m < f.groups[s].nmembers; m++) {
      const nrt_graph_node *n = &g->nodes[f.groups[s].members[m]];
      for (int k = 0; k < n->noutputs + n->ninputs; k++) {
        int b = n->operands[k].buffer;
        if (b < 0 || g->buffers[b].kind != NRT_BUFFER_INTERMEDIATE || f.tiled[b]) continue;
        if (first[b] < 0) first[b] = s;
        last[b] = s;
      }
    }
  for (int a = 0; a < nb; a++) {
    if (first[a] < 0) continue;
    CHECK(plan.offset[a] >= 0 && plan.offset[a] % 64 == 0);
    CHECK(plan.offset[a] + g->buffers[a].bytes <= plan.arena_bytes);
    for (int b = a + 1; b < nb; b++) {
      if (first[b] < 0) continue;
      bool live_together = first[a] <= last[b] && first[b] <= last[a];
      bool overlap = plan.offset[a] < plan.offset[b] + g->buffers[b].bytes &&
                     plan.offset[b] < plan.offset[a] + g->buffers[a].bytes;
      /* in place: the one step where a dies as b is born, same range */
      bool inplace = plan.offset[a] == plan.offset[b] && (last[a] == first[b] || last[b] == first[a]);
      if (live_together && overlap && !inplace) {
        fprintf(stderr, "plan overlaps buffers %d [%lld..%lld] and %d [%lld..%lld]\n", a, (long long)first[a],
                (long long)last[a], b, (long long)first[b], (long long)last[b]);
        nrt_test_failures++;
      }
    }
  }
  free(first);
  free(last);
  free(live);
  nrt_memory_plan_free(&plan);
  nrt_fusion_free(&f);
}

/* A random DAG of pointwise and reduction nodes over buffers of random
 * sizes, each reading random earlier buffers. */
static nrt_graph *random_dag(int nodes, int64_t *out_chain_naive) {
  nrt_graph *g;
  CHECK_OK(nrt_graph_create(&g));
  int ids[512], nids = 0;
  int64_t elems[512];
  ids[nids] = add_buf(g, NRT_BUFFER_INPUT, 4096 * 4, 0, false);
  elems[nids++] = 4096;
  for (int i = 0; i < nodes; i++) {
    bool last = i == nodes - 1;
    int64_t e = last ? 4096 : (int64_t)nrt_test_rand_range(1, 64) * 64;
    int out = last ? add_buf(g, NRT_BUFFER_OUTPUT, e * 4, 1, false) : add_buf(g, NRT_BUFFER_INTERMEDIATE, e * 4, -1, false);
    int a = (int)nrt_test_rand_range(nids > 6 ? nids - 6 : 0, nids);
    int b = (int)nrt_test_rand_range(0, nids);
    int64_t n = e < elems[a] ? e : elems[a];
    if (elems[b] < n) n = elems[b];
    nrt_graph_node node;
    int64_t sz[1] = {n}, st[1] = {1};
    nrt_graph_node_init(&node, NRT_OP(ADD), NRT_FLOAT32, 1, sz, 1, 2);
    node.scalars[0].f = 1;
    set_op(&node, 0, out, NRT_FLOAT32, st);
    set_op(&node, 1, ids[a], NRT_FLOAT32, st);
    set_op(&node, 2, ids[b], NRT_FLOAT32, st);
    CHECK_OK(nrt_graph_add_node(g, &node, NULL));
    ids[nids] = out;
    elems[nids++] = e;
  }
  (void)out_chain_naive;
  return g;
}

static void test_memory_plan(void) {
  for (int it = 0; it < 40; it++) {
    nrt_graph *g = random_dag((int)nrt_test_rand_range(2, 120), NULL);
    check_plan(g, false);
    check_plan(g, true);
    nrt_graph_destroy(g);
  }
  /* A chain of 20 intermediates: at most three live at once (in place
   * makes it two). */
  nrt_graph *g;
  CHECK_OK(nrt_graph_create(&g));
  int prev = add_buf(g, NRT_BUFFER_INPUT, 1 << 16, 0, false);
  int64_t sz[1] = {1 << 14}, st[1] = {1};
  for (int i = 0; i < 20; i++) {
    int out = i == 19 ? add_buf(g, NRT_BUFFER_OUTPUT, 1 << 16, 1, false)
                      : add_buf(g, NRT_BUFFER_INTERMEDIATE, 1 << 16, -1, false);
    nrt_graph_node n;
    nrt_graph_node_init(&n, i % 2 ? NRT_OP(EXP) : NRT_OP(NEG), NRT_FLOAT32, 1, sz, 1, 1);
    set_op(&n, 0, out, NRT_FLOAT32, st);
    set_op(&n, 1, prev, NRT_FLOAT32, st);
    CHECK_OK(nrt_graph_add_node(g, &n, NULL));
    prev = out;
  }
  nrt_compile_options o;
  nrt_compile_options_default(&o);
  o.fuse = false;
  nrt_program *p = NULL;
  nrt_compile_report r;
  CHECK_OK(nrt_compile(g, &o, &p, &r));
  printf("    chain of 19 intermediates: arena %lld bytes, naive %lld bytes\n", (long long)r.arena_bytes,
         (long long)r.intermediate_bytes);
  CHECK(r.intermediate_bytes == 19 * (1 << 16));
  CHECK(r.arena_bytes <= 2 * (1 << 16));
  nrt_program_release(p);
  check_plan(g, false);
  /* fused: every intermediate stays in tiles, the arena is empty */
  CHECK_OK(nrt_compile(g, NULL, &p, &r));
  CHECK(r.fused_steps == 1 && r.steps == 1 && r.arena_bytes == 0 && r.eliminated_buffers == 19);
  nrt_program_release(p);
  nrt_graph_destroy(g);
}

/* ---- 5. artifact ------------------------------------------------------------------------ */

static void test_artifact(void) {
  nrt_graph *g = sample_graph();
  /* the sample writes a mutated input and an output from an intermediate */
  nrt_program *p = NULL;
  CHECK_OK(nrt_compile(g, NULL, &p, NULL));
  if (!p) {
    nrt_graph_destroy(g);
    return;
  }
  void *blob, *blob2;
  size_t size, size2;
  CHECK_OK(nrt_program_serialize(p, &blob, &size));
  nrt_program *q = NULL;
  CHECK_OK(nrt_program_deserialize(blob, size, &q));
  CHECK_OK(nrt_program_serialize(q, &blob2, &size2));
  CHECK(size == size2 && !memcmp(blob, blob2, size));
  CHECK(!strcmp(nrt_program_compiler(q), NRT_COMPILER_VERSION));
  CHECK(!strcmp(nrt_program_cpu_features(q), nrt_host_cpu_features()));
  CHECK(nrt_program_uses_rng(q) && nrt_program_rng_advance(q) == 64);
  char *dump = nrt_program_dump(q);
  CHECK(dump && strstr(dump, "UNIFORM") && strstr(dump, "model.py:12"));
  free(dump);
  /* both run to the same bits */
  bound a, b;
  bind(p, &a, 5);
  bind(q, &b, 5);
  for (int s = 0; s < 2; s++) {
    fill(a.slots[s], NRT_FLOAT32, 64, -1, 1);
    memcpy(b.slots[s], a.slots[s], 256);
  }
  CHECK_OK(run(p, &a, 500));
  CHECK_OK(run(q, &b, 500));
  for (int s = 0; s < 3; s++) CHECK(!memcmp(a.slots[s], b.slots[s], 256));
  unbind(&a);
  unbind(&b);
  nrt_program_release(q);
  q = NULL;
  /* corruption: every byte flipped in turn (a sample), truncations */
  unsigned char *c = malloc(size);
  int detected = 0, tried = 0;
  for (size_t i = 0; i < size; i += 1 + size / 300) {
    memcpy(c, blob, size);
    c[i] ^= 0x5a;
    nrt_program *bad = NULL;
    tried++;
    if (nrt_program_deserialize(c, size, &bad) != NRT_SUCCESS && !bad) detected++;
    nrt_program_release(bad);
  }
  CHECK(detected == tried);
  for (size_t n = 0; n < size; n += 1 + size / 50) {
    nrt_program *bad = NULL;
    CHECK_STATUS(nrt_program_deserialize(blob, n, &bad), NRT_ERROR_INVALID_ARGUMENT);
    CHECK(!bad);
  }
  memcpy(c, blob, size);
  c[0] = 'X';
  CHECK_STATUS(nrt_program_deserialize(c, size, &q), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_PREFIX("nrt_program_deserialize: bad magic");
  memcpy(c, blob, size);
  c[8] = 9;
  CHECK_STATUS(nrt_program_deserialize(c, size, &q), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_PREFIX("nrt_program_deserialize: format version 9");
  memcpy(c, blob, size);
  c[size - 1] ^= 1;
  CHECK_STATUS(nrt_program_deserialize(c, size, &q), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_PREFIX("nrt_program_deserialize: checksum mismatch");
  CHECK_STATUS(nrt_program_deserialize(c, size - 3, &q), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_PREFIX("nrt_program_deserialize: truncated");
  /* files, atomically renamed */
  CHECK_OK(nrt_program_save(p, "build/ctest/test_compiler.neff"));
  nrt_program *l = NULL;
  CHECK_OK(nrt_program_load("build/ctest/test_compiler.neff", &l));
  CHECK(l && nrt_program_step_count(l) == nrt_program_step_count(p));
  nrt_program_release(l);
  free(c);
  free(blob);
  free(blob2);
  nrt_program_release(p);
  nrt_graph_destroy(g);
}

/* ---- 6. a 1,000-node graph --------------------------------------------------------------- */

static void test_compile_1000(void) {
  nrt_graph *g;
  CHECK_OK(nrt_graph_create(&g));
  int x = add_buf(g, NRT_BUFFER_INPUT, 256 * 256 * 4, 0, false);
  int prev = x, slot = 1;
  int64_t s2[2] = {256, 256}, st2[2] = {256, 1}, red[2] = {1, 0};
  for (int i = 0; i < 1000; i++) {
    bool last = i == 999;
    nrt_graph_node n;
    int out;
    if (i % 10 == 9) { /* a row sum, then a broadcast divide */
      out = add_buf(g, NRT_BUFFER_INTERMEDIATE, 256 * 4, -1, false);
      nrt_graph_node_init(&n, NRT_OP(SUM), NRT_FLOAT32, 2, s2, 1, 1);
      set_op(&n, 0, out, NRT_FLOAT32, red);
      set_op(&n, 1, prev, NRT_FLOAT32, st2);
      CHECK_OK(nrt_graph_add_node(g, &n, NULL));
      int q = last ? add_buf(g, NRT_BUFFER_OUTPUT, 256 * 256 * 4, slot++, false)
                   : add_buf(g, NRT_BUFFER_INTERMEDIATE, 256 * 256 * 4, -1, false);
      nrt_graph_node_init(&n, NRT_OP(DIV), NRT_FLOAT32, 2, s2, 1, 2);
      set_op(&n, 0, q, NRT_FLOAT32, st2);
      set_op(&n, 1, prev, NRT_FLOAT32, st2);
      set_op(&n, 2, out, NRT_FLOAT32, red);
      CHECK_OK(nrt_graph_add_node(g, &n, NULL));
      prev = q;
      continue;
    }
    out = last ? add_buf(g, NRT_BUFFER_OUTPUT, 256 * 256 * 4, slot++, false)
               : add_buf(g, NRT_BUFFER_INTERMEDIATE, 256 * 256 * 4, -1, false);
    nrt_graph_node_init(&n, i % 3 ? NRT_OP(TANH) : NRT_OP(ADD), NRT_FLOAT32, 2, s2, 1, i % 3 ? 1 : 2);
    set_op(&n, 0, out, NRT_FLOAT32, st2);
    set_op(&n, 1, prev, NRT_FLOAT32, st2);
    if (!(i % 3)) set_op(&n, 2, x, NRT_FLOAT32, st2);
    n.scalars[0].f = 0.5;
    CHECK_OK(nrt_graph_add_node(g, &n, NULL));
    prev = out;
  }
  double t0 = seconds();
  nrt_program *p = NULL;
  nrt_compile_report r;
  CHECK_OK(nrt_compile(g, NULL, &p, &r));
  double t1 = seconds();
  char *rep = nrt_compile_report_format(&r);
  printf("    %d nodes compiled in %.1f ms:\n%s", r.nodes_in, (t1 - t0) * 1e3, rep);
  free(rep);
  CHECK(r.nodes_in == 1100 && r.fused_steps > 90 && r.steps < 400);
  void *blob;
  size_t size;
  CHECK_OK(nrt_program_serialize(p, &blob, &size));
  t0 = seconds();
  nrt_program *q = NULL;
  CHECK_OK(nrt_program_deserialize(blob, size, &q));
  printf("    artifact %zu bytes, loaded in %.2f ms\n", size, (seconds() - t0) * 1e3);
  nrt_program_release(q);
  free(blob);
  nrt_program_release(p);
  nrt_graph_destroy(g);
}

int main(void) {
  printf("test_compiler\n");
  RUN_TEST(test_graph_roundtrip);
  RUN_TEST(test_graph_malformed);
  RUN_TEST(test_legality);
  RUN_TEST(test_fusion_every_op);
  RUN_TEST(test_fusion_random_chains);
  RUN_TEST(test_memory_plan);
  RUN_TEST(test_artifact);
  RUN_TEST(test_compile_1000);
  return TEST_RESULT();
}
