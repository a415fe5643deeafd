/* Graph capture and program runs (nrt/capture.h, nrt/program.h) with real
 * launches on a stream:
 * 1. a sequence with allocations, frees and address reuse, captured,
 *    compiled, run with new input and output pointers: same results as
 *    eager on those inputs; the run is one stream task;
 * 2. RNG: the program's Philox offsets move with the run's base;
 * 3. failures: a synchronize, a pointer outside every buffer, a launch on
 *    another stream touching captured memory; an error inside a run is
 *    sticky and names the program and the node's location. */
#include <string.h>
#include "testing.h"
#include "nrt/capture.h"
#include "nrt/compiler.h"
#include "nrt/program.h"

#define N 4096

static nrt_launch pw(nrt_op op, void *out, const void *a, const void *b) {
  int64_t sizes[1] = {N};
  nrt_launch l = nrt_test_launch_op(op, NRT_FLOAT32, 1, sizes);
  nrt_test_operand_1d(&l, 0, out, NRT_FLOAT32, 1);
  if (a) nrt_test_operand_1d(&l, 1, a, NRT_FLOAT32, 1);
  if (b) nrt_test_operand_1d(&l, 2, b, NRT_FLOAT32, 1);
  l.scalars[0].f = 1.0;
  return l;
}

/* y = exp(x) * w + x; t1, t2 freed in between so t3 reuses an address. */
static void model(nrt_stream *s, float *x, float *w, float **out_y, nrt_capture *cap) {
  void *t1, *t2, *t3, *y;
  if (cap) nrt_capture_set_location(cap, "model.py:1 in forward: exp");
  CHECK_OK(nrt_malloc(N * 4, s, &t1));
  nrt_launch l = pw(NRT_OP(EXP), t1, x, NULL);
  CHECK_OK(nrt_launch_kernel(s, &l));
  if (cap) nrt_capture_set_location(cap, "model.py:2 in forward: mul");
  CHECK_OK(nrt_malloc(N * 4, s, &t2));
  l = pw(NRT_OP(MUL), t2, t1, w);
  CHECK_OK(nrt_launch_kernel(s, &l));
  CHECK_OK(nrt_free(t1));
  if (cap) nrt_capture_set_location(cap, "model.py:3 in forward: add");
  CHECK_OK(nrt_malloc(N * 4, s, &t3)); /* the caching allocator hands out t1's address */
  CHECK(t3 == t1);
  l = pw(NRT_OP(ADD), t3, t2, x);
  CHECK_OK(nrt_launch_kernel(s, &l));
  CHECK_OK(nrt_free(t2));
  CHECK_OK(nrt_malloc(N * 4, s, &y));
  l = pw(NRT_OP(SIGMOID), y, t3, NULL);
  CHECK_OK(nrt_launch_kernel(s, &l));
  CHECK_OK(nrt_free(t3));
  *out_y = y;
}

static float *device_input(nrt_stream *s, double lo, double hi) {
  void *p;
  CHECK_OK(nrt_malloc(N * 4, s, &p));
  float h[N];
  for (int i = 0; i < N; i++) h[i] = (float)nrt_test_uniform(lo, hi);
  CHECK_OK(nrt_memcpy(p, h, sizeof h, NRT_MEMCPY_HOST_TO_DEVICE, s));
  return p;
}

static void test_capture_and_run(void) {
  nrt_stream *s = nrt_test_stream(0, 3);
  float *x = device_input(s, -1, 1), *w = device_input(s, -1, 1);
  nrt_capture *cap;
  CHECK_OK(nrt_capture_begin(s, &cap));
  CHECK_OK(nrt_capture_declare_input(cap, 0, x, N * 4, false));
  CHECK_OK(nrt_capture_declare_input(cap, 1, w, N * 4, false));
  float *y;
  model(s, x, w, &y, cap);
  CHECK_OK(nrt_capture_declare_output(cap, 2, y, N * 4));
  nrt_graph *g = NULL;
  CHECK_OK(nrt_capture_end(cap, 0, 0, 0, &g));
  if (!g) return;
  CHECK(nrt_graph_node_count(g) == 4);
  CHECK(!strcmp(nrt_graph_node_at(g, 2)->location, "model.py:3 in forward: add"));
  /* the reused address resolved to the new allocation: node 2 writes a
   * buffer other than node 0's */
  CHECK(nrt_graph_node_at(g, 2)->operands[0].buffer != nrt_graph_node_at(g, 0)->operands[0].buffer);
  nrt_program *p = NULL;
  nrt_compile_report r;
  CHECK_OK(nrt_compile(g, NULL, &p, &r));
  CHECK(r.fused_steps == 1 && r.steps == 1 && r.arena_bytes == 0);
  /* new inputs and output, run on the stream, against eager */
  float *x2 = device_input(s, -2, 2), *w2 = device_input(s, -2, 2), *y_eager, *y_prog;
  model(s, x2, w2, &y_eager, NULL);
  CHECK_OK(nrt_malloc(N * 4, s, (void **)&y_prog));
  void *slots[3] = {x2, w2, y_prog};
  nrt_program_run_args a = {slots, 3, NULL, 0, 0};
  uint64_t before = nrt_stream_enqueued(s);
  CHECK_OK(nrt_program_run(p, s, &a));
  CHECK(nrt_stream_enqueued(s) == before + 1); /* one task */
  nrt_program_release(p);                      /* the queued run keeps it alive */
  CHECK_OK(nrt_stream_synchronize(s));
  float he[N], hp[N];
  CHECK_OK(nrt_memcpy(he, y_eager, sizeof he, NRT_MEMCPY_DEVICE_TO_HOST, s));
  CHECK_OK(nrt_memcpy(hp, y_prog, sizeof hp, NRT_MEMCPY_DEVICE_TO_HOST, s));
  CHECK(!memcmp(he, hp, sizeof he));
  nrt_free(x);
  nrt_free(w);
  nrt_free(y);
  nrt_free(x2);
  nrt_free(w2);
  nrt_free(y_eager);
  nrt_free(y_prog);
  nrt_graph_destroy(g);
}

/* An inline value (a CPU scalar carried in the descriptor) becomes a
 * graph constant: the program computes y = x * 2.5 with the value the
 * capture saw, though the caller's descriptor is gone. */
static void test_capture_inline_value(void) {
  nrt_stream *s = nrt_test_stream(0, 3);
  float *x = device_input(s, -1, 1);
  void *y;
  nrt_capture *cap;
  CHECK_OK(nrt_capture_begin(s, &cap));
  CHECK_OK(nrt_capture_declare_input(cap, 0, x, N * 4, false));
  CHECK_OK(nrt_malloc(N * 4, s, &y));
  nrt_launch l = pw(NRT_OP(MUL), y, x, NULL);
  l.operands[2].dtype = NRT_FLOAT64;
  l.operands[2].inline_slot = 1;
  l.inline_values[0].f64[0] = 2.5;
  CHECK_OK(nrt_launch_kernel(s, &l));
  CHECK_OK(nrt_capture_declare_output(cap, 1, y, N * 4));
  nrt_graph *g = NULL;
  CHECK_OK(nrt_capture_end(cap, 0, 0, 0, &g));
  if (!g) return;
  CHECK(nrt_graph_node_count(g) == 1);
  nrt_program *p = NULL;
  nrt_compile_report r;
  CHECK_OK(nrt_compile(g, NULL, &p, &r));
  float *x2 = device_input(s, -2, 2), *y2;
  CHECK_OK(nrt_malloc(N * 4, s, (void **)&y2));
  void *slots[2] = {x2, y2};
  nrt_program_run_args a = {slots, 2, NULL, 0, 0};
  CHECK_OK(nrt_program_run(p, s, &a));
  nrt_program_release(p);
  CHECK_OK(nrt_stream_synchronize(s));
  static float hx[N], hy[N];
  CHECK_OK(nrt_memcpy(hx, x2, sizeof hx, NRT_MEMCPY_DEVICE_TO_HOST, s));
  CHECK_OK(nrt_memcpy(hy, y2, sizeof hy, NRT_MEMCPY_DEVICE_TO_HOST, s));
  int bad = 0;
  for (int i = 0; i < N; i++) bad += hy[i] != hx[i] * 2.5f;
  CHECK(bad == 0);
  nrt_free(x);
  nrt_free(y);
  nrt_free(x2);
  nrt_free(y2);
  nrt_graph_destroy(g);
}

/* Host-to-device copies become constants; device-to-device ones COPY nodes. */
static void test_capture_copies(void) {
  nrt_stream *s = nrt_test_stream(0, 3);
  float *x = device_input(s, -1, 1);
  float c[N];
  for (int i = 0; i < N; i++) c[i] = (float)i;
  nrt_capture *cap;
  CHECK_OK(nrt_capture_begin(s, &cap));
  CHECK_OK(nrt_capture_declare_input(cap, 0, x, N * 4, false));
  void *k, *y;
  CHECK_OK(nrt_malloc(N * 4, s, &k));
  CHECK_OK(nrt_memcpy_async(k, c, sizeof c, NRT_MEMCPY_HOST_TO_DEVICE, s));
  CHECK_OK(nrt_malloc(N * 4, s, &y));
  nrt_launch l = pw(NRT_OP(ADD), y, x, k);
  CHECK_OK(nrt_launch_kernel(s, &l));
  CHECK_OK(nrt_capture_declare_output(cap, 1, y, N * 4));
  nrt_graph *g = NULL;
  CHECK_OK(nrt_capture_end(cap, 0, 0, 0, &g));
  CHECK_OK(nrt_stream_synchronize(s));   /* the eager copy has read c */
  for (int i = 0; i < N; i++) c[i] = -1; /* the constant was copied at capture */
  nrt_program *p = NULL;
  CHECK_OK(nrt_compile(g, NULL, &p, NULL));
  float hy[N], hx[N], out[N];
  CHECK_OK(nrt_memcpy(hx, x, sizeof hx, NRT_MEMCPY_DEVICE_TO_HOST, s));
  void *slots[2] = {x, y}, *arena = NULL;
  /* the constant's COPY writes uint8 that ADD reads as float32: no fusion,
   * so the copied buffer lives in the arena */
  CHECK_OK(nrt_malloc((size_t)nrt_program_arena_bytes(p), s, &arena));
  nrt_program_run_args a = {slots, 2, arena, 0, 0};
  CHECK_OK(nrt_memcpy(out, y, sizeof out, NRT_MEMCPY_DEVICE_TO_HOST, s)); /* eager result */
  memset(hy, 0, sizeof hy);
  CHECK_OK(nrt_memcpy(y, hy, sizeof hy, NRT_MEMCPY_HOST_TO_DEVICE, s));
  CHECK_OK(nrt_program_run(p, s, &a));
  CHECK_OK(nrt_memcpy(hy, y, sizeof hy, NRT_MEMCPY_DEVICE_TO_HOST, s));
  CHECK(!memcmp(hy, out, sizeof hy));
  CHECK(hy[7] == hx[7] + 7.0f);
  nrt_program_release(p);
  nrt_graph_destroy(g);
  nrt_free(arena);
  nrt_free(x);
  nrt_free(k);
  nrt_free(y);
}

/* Dropout-like: mask = bernoulli(0.5) at offset base + 16, y = x * mask. */
static void test_rng_fixup(void) {
  nrt_stream *s = nrt_test_stream(0, 4);
  float *x = device_input(s, 1, 2);
  const uint64_t seed = 99, capture_base = 1000, run_base = 77777;
  nrt_capture *cap;
  CHECK_OK(nrt_capture_begin(s, &cap));
  CHECK_OK(nrt_capture_declare_input(cap, 0, x, N * 4, false));
  void *mask, *y;
  CHECK_OK(nrt_malloc(N * 4, s, &mask));
  int64_t sizes[1] = {N};
  nrt_launch l = nrt_test_launch_op(NRT_OP(BERNOULLI_SCALAR), NRT_FLOAT32, 1, sizes);
  nrt_test_operand_1d(&l, 0, mask, NRT_FLOAT32, 1);
  l.scalars[0].f = 0.5;
  l.params[0] = (int64_t)seed;
  l.params[1] = (int64_t)(capture_base + 16);
  CHECK_OK(nrt_launch_kernel(s, &l));
  CHECK_OK(nrt_malloc(N * 4, s, &y));
  nrt_launch m = pw(NRT_OP(MUL), y, x, mask);
  CHECK_OK(nrt_launch_kernel(s, &m));
  CHECK_OK(nrt_free(mask));
  CHECK_OK(nrt_capture_declare_output(cap, 1, y, N * 4));
  nrt_graph *g = NULL;
  CHECK_OK(nrt_capture_end(cap, seed, capture_base, 16 + N, &g));
  CHECK(g && nrt_graph_node_at(g, 0)->rng_offset_param == 1);
  nrt_program *p = NULL;
  CHECK_OK(nrt_compile(g, NULL, &p, NULL));
  CHECK(nrt_program_uses_rng(p) && nrt_program_rng_advance(p) == 16 + N);
  /* eager at the run's offsets, new seed */
  void *mask2, *y2, *yp;
  CHECK_OK(nrt_malloc(N * 4, s, &mask2));
  CHECK_OK(nrt_malloc(N * 4, s, &y2));
  CHECK_OK(nrt_malloc(N * 4, s, &yp));
  l.operands[0].data = mask2;
  l.params[0] = 5;
  l.params[1] = (int64_t)(run_base + 16);
  CHECK_OK(nrt_launch_kernel(s, &l));
  m = pw(NRT_OP(MUL), y2, x, mask2);
  CHECK_OK(nrt_launch_kernel(s, &m));
  void *slots[2] = {x, yp}, *arena;
  CHECK_OK(nrt_malloc((size_t)nrt_program_arena_bytes(p), s, &arena)); /* the mask */
  nrt_program_run_args a = {slots, 2, arena, 5, run_base};
  CHECK_OK(nrt_program_run(p, s, &a));
  float h1[N], h2[N];
  CHECK_OK(nrt_memcpy(h1, y2, sizeof h1, NRT_MEMCPY_DEVICE_TO_HOST, s));
  CHECK_OK(nrt_memcpy(h2, yp, sizeof h2, NRT_MEMCPY_DEVICE_TO_HOST, s));
  CHECK(!memcmp(h1, h2, sizeof h1));
  int zeros = 0;
  for (int i = 0; i < N; i++) zeros += h2[i] == 0;
  CHECK(zeros > N / 4 && zeros < 3 * N / 4);
  nrt_program_release(p);
  nrt_graph_destroy(g);
  nrt_free(x);
  nrt_free(y);
  nrt_free(mask2);
  nrt_free(y2);
  nrt_free(yp);
  nrt_free(arena);
}

static void test_capture_failures(void) {
  nrt_stream *s = nrt_test_stream(0, 5), *other = nrt_test_stream(0, 6);
  float *x = device_input(s, -1, 1);
  nrt_graph *g = (nrt_graph *)1;

  /* a synchronize: the wait happens, the call fails, so does the capture */
  nrt_capture *cap;
  CHECK_OK(nrt_capture_begin(s, &cap));
  CHECK_OK(nrt_capture_declare_input(cap, 0, x, N * 4, false));
  CHECK_OK(nrt_capture_set_location(cap, "train.py:40 in step"));
  nrt_capture *second;
  CHECK_STATUS(nrt_capture_begin(other, &second), NRT_ERROR_INVALID_ARGUMENT); /* one per device */
  CHECK_STATUS(nrt_stream_synchronize(s), NRT_ERROR_UNSUPPORTED);
  CHECK(strstr(nrt_last_error_message(), "reads device data on the host") != NULL);
  CHECK(strstr(nrt_last_error_message(), "train.py:40 in step") != NULL);
  CHECK_STATUS(nrt_capture_end(cap, 0, 0, 0, &g), NRT_ERROR_UNSUPPORTED);
  CHECK(g == NULL);
  CHECK_OK(nrt_stream_synchronize(s)); /* not capturing any more */

  /* a pointer outside every known buffer */
  float host[N];
  CHECK_OK(nrt_capture_begin(s, &cap));
  CHECK_OK(nrt_capture_declare_input(cap, 0, x, N * 4, false));
  CHECK_OK(nrt_capture_set_location(cap, "train.py:41 in step"));
  void *y;
  CHECK_OK(nrt_malloc(N * 4, s, &y));
  nrt_launch l = pw(NRT_OP(ADD), y, x, host);
  CHECK_STATUS(nrt_launch_kernel(s, &l), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(nrt_last_error_message(), "ADD: operand 2 (an input) reads memory that is not a graph input") != NULL);
  CHECK(strstr(nrt_last_error_message(), "train.py:41") != NULL);
  CHECK_STATUS(nrt_capture_end(cap, 0, 0, 0, &g), NRT_ERROR_INVALID_ARGUMENT);
  nrt_free(y);

  /* a device-to-host copy; another stream touching captured memory */
  CHECK_OK(nrt_capture_begin(s, &cap));
  CHECK_OK(nrt_capture_declare_input(cap, 0, x, N * 4, false));
  CHECK_STATUS(nrt_memcpy_async(host, x, 16, NRT_MEMCPY_DEVICE_TO_HOST, s), NRT_ERROR_UNSUPPORTED);
  nrt_capture_abort(cap);
  CHECK_OK(nrt_capture_begin(s, &cap));
  CHECK_OK(nrt_capture_declare_input(cap, 0, x, N * 4, false));
  void *z;
  CHECK_OK(nrt_malloc(N * 4, other, &z));
  l = pw(NRT_OP(NEG), z, x, NULL);
  CHECK_OK(nrt_launch_kernel(other, &l)); /* runs; the capture fails */
  CHECK_STATUS(nrt_capture_end(cap, 0, 0, 0, &g), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(nrt_last_error_message(), "another stream") != NULL);
  CHECK_OK(nrt_stream_synchronize(other));
  nrt_free(z);
  nrt_free(x);
}

/* An integer division by zero inside a run: sticky on the stream, naming
 * the program, the step and the source location. */
static void test_program_error(void) {
  nrt_graph *g;
  CHECK_OK(nrt_graph_create(&g));
  nrt_graph_buffer in = {.bytes = 64 * 8, .kind = NRT_BUFFER_INPUT, .slot = 0};
  nrt_graph_buffer out = {.bytes = 64 * 8, .kind = NRT_BUFFER_OUTPUT, .slot = 1};
  int bi, bo;
  CHECK_OK(nrt_graph_add_buffer(g, &in, &bi));
  CHECK_OK(nrt_graph_add_buffer(g, &out, &bo));
  int64_t sizes[1] = {64};
  nrt_graph_node n;
  nrt_graph_node_init(&n, NRT_OP(DIV_TRUNC), NRT_INT64, 1, sizes, 1, 2);
  n.operands[0] = (nrt_graph_operand){.buffer = bo, .dtype = NRT_INT64, .strides = {8}};
  n.operands[1] = (nrt_graph_operand){.buffer = bi, .dtype = NRT_INT64, .strides = {8}};
  n.operands[2] = (nrt_graph_operand){.buffer = bi, .dtype = NRT_INT64, .strides = {8}};
  n.location = "loss.py:9 in forward";
  CHECK_OK(nrt_graph_add_node(g, &n, NULL));
  nrt_compile_options o;
  nrt_compile_options_default(&o);
  o.name = "divide";
  nrt_program *p = NULL;
  CHECK_OK(nrt_compile(g, &o, &p, NULL));
  int64_t a[64] = {0}, b[64];
  void *slots[2] = {a, b};
  nrt_program_run_args args = {slots, 2, NULL, 0, 0};
  nrt_stream *s = nrt_test_stream(0, 7);
  CHECK_OK(nrt_program_run(p, s, &args));
  CHECK_STATUS(nrt_stream_synchronize(s), NRT_ERROR_INVALID_ARGUMENT);
  const char *msg = nrt_last_error_message();
  CHECK(strstr(msg, "program divide: step 0 (DIV_TRUNC, graph node 0 at loss.py:9 in forward): ZeroDivisionError"));
  void *too_few[1] = {a};
  nrt_program_run_args bad = {too_few, 1, NULL, 0, 0};
  CHECK_STATUS(nrt_program_run(p, s, &bad), NRT_ERROR_INVALID_ARGUMENT);
  nrt_program_release(p);
  nrt_graph_destroy(g);
}

/* Fused vs unfused on a large chain; printed, never checked. Set
 * NRT_TEST_BENCH=1 for 16M elements. */
static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void test_bench_chain(void) {
  int64_t n = getenv("NRT_TEST_BENCH") ? (int64_t)1 << 24 : (int64_t)1 << 18;
  nrt_graph *g;
  CHECK_OK(nrt_graph_create(&g));
  nrt_graph_buffer x = {.bytes = n * 4, .kind = NRT_BUFFER_INPUT, .slot = 0};
  nrt_graph_buffer y = {.bytes = n * 4, .kind = NRT_BUFFER_OUTPUT, .slot = 1};
  nrt_graph_buffer t = {.bytes = n * 4, .kind = NRT_BUFFER_INTERMEDIATE, .slot = -1};
  int bx, by, prev;
  CHECK_OK(nrt_graph_add_buffer(g, &x, &bx));
  CHECK_OK(nrt_graph_add_buffer(g, &y, &by));
  prev = bx;
  static const nrt_op ops[] = {NRT_OP(MUL), NRT_OP(ADD), NRT_OP(TANH), NRT_OP(MUL), NRT_OP(SIGMOID)};
  for (int i = 0; i < 5; i++) {
    int out = by;
    if (i < 4) CHECK_OK(nrt_graph_add_buffer(g, &t, &out));
    nrt_graph_node nd;
    nrt_graph_node_init(&nd, ops[i], NRT_FLOAT32, 1, &n, 1, nrt_op_ninputs(ops[i]));
    nd.operands[0] = (nrt_graph_operand){.buffer = out, .dtype = NRT_FLOAT32, .strides = {4}};
    nd.operands[1] = (nrt_graph_operand){.buffer = prev, .dtype = NRT_FLOAT32, .strides = {4}};
    if (nd.ninputs == 2) nd.operands[2] = (nrt_graph_operand){.buffer = bx, .dtype = NRT_FLOAT32, .strides = {4}};
    nd.scalars[0].f = 1.0;
    CHECK_OK(nrt_graph_add_node(g, &nd, NULL));
    prev = out;
  }
  float *xs = aligned_alloc(64, (size_t)n * 4), *ys = aligned_alloc(64, (size_t)n * 4);
  for (int64_t i = 0; i < n; i++) xs[i] = (float)((i % 1000) * 0.001 - 0.5);
  double best[2] = {1e9, 1e9};
  for (int fused = 0; fused < 2; fused++) {
    nrt_compile_options o;
    nrt_compile_options_default(&o);
    o.fuse = fused;
    nrt_program *p = NULL;
    CHECK_OK(nrt_compile(g, &o, &p, NULL));
    void *arena = nrt_program_arena_bytes(p) ? aligned_alloc(64, (size_t)nrt_program_arena_bytes(p)) : NULL;
    void *slots[2] = {xs, ys};
    nrt_program_run_args a = {slots, 2, arena, 0, 0};
    for (int r = 0; r < 5; r++) {
      double t0 = now_s();
      CHECK_OK(nrt_program_run_sync(p, &a));
      double dt = now_s() - t0;
      if (dt < best[fused]) best[fused] = dt;
    }
    free(arena);
    nrt_program_release(p);
  }
  printf("    5-op chain over %lld elements: unfused %.2f ms, fused %.2f ms (%.2fx)\n", (long long)n, best[0] * 1e3,
         best[1] * 1e3, best[0] / best[1]);
  free(xs);
  free(ys);
  nrt_graph_destroy(g);
}

int main(void) {
  printf("test_capture\n");
  RUN_TEST(test_capture_and_run);
  RUN_TEST(test_capture_inline_value);
  RUN_TEST(test_capture_copies);
  RUN_TEST(test_rng_fixup);
  RUN_TEST(test_capture_failures);
  RUN_TEST(test_program_error);
  RUN_TEST(test_bench_chain);
  return TEST_RESULT();
}
