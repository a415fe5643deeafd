/* Launch descriptors: the op tables, validation (each rule, with the op
 * named in the message), the copy made at enqueue, and the reference flag. */
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "exec/exec.h"
#include "memory/memory.h"
#include "testing.h"
#include "nrt/ops/foreach.h"
#include "nrt/ops/gemm.h"

static void test_op_tables(void) {
  CHECK(strcmp(nrt_op_name(NRT_OP_COPY), "COPY") == 0);
  CHECK(strcmp(nrt_op_name(NRT_OP_ADD), "ADD") == 0);
  CHECK(strcmp(nrt_op_name(NRT_OP(GEMM)), "GEMM") == 0);
  CHECK(strcmp(nrt_op_name(NRT_OP_COUNT), "invalid") == 0);
  CHECK(strcmp(nrt_op_name((nrt_op)-1), "invalid") == 0);
  CHECK(nrt_op_kind(NRT_OP_ADD) == NRT_KIND_POINTWISE);
  CHECK(nrt_op_kind(NRT_OP_SUM) == NRT_KIND_REDUCE);
  CHECK(nrt_op_kind(NRT_OP_SOFTMAX) == NRT_KIND_ROW);
  CHECK(nrt_op_kind(NRT_OP(GEMM)) == NRT_KIND_GEMM);
  CHECK(nrt_op_ninputs(NRT_OP_FILL) == 0);
  CHECK(nrt_op_ninputs(NRT_OP_NEG) == 1);
  CHECK(nrt_op_ninputs(NRT_OP_ADD) == 2);
  CHECK(nrt_op_ninputs(NRT_OP_WHERE) == 3);
  CHECK(nrt_op_ninputs(NRT_OP(GEMM)) == 2);
  CHECK(nrt_op_ninputs(NRT_OP_COUNT) == -1);
  /* Ids between families, or past a family's last op, are invalid. */
  CHECK(strcmp(nrt_op_name((nrt_op)NRT_OP_COUNT), "invalid") == 0);
  CHECK(strcmp(nrt_op_name((nrt_op)(NRT_OP_FAMILY_SEGMENT << NRT_OP_FAMILY_BITS | 0xff)), "invalid") == 0);
  /* The last family's first op, and nothing past the id limit. */
  CHECK(strcmp(nrt_op_name((nrt_op)(NRT_OP_FAMILY_FOREACH << NRT_OP_FAMILY_BITS)), "FOREACH_ADD") == 0);
  CHECK(strcmp(nrt_op_name((nrt_op)NRT_OP_ID_LIMIT), "invalid") == 0);
  CHECK(nrt_op_ninputs((nrt_op)NRT_OP_ID_LIMIT) == -1);
  for (int op = 0; op < NRT_OP_COUNT; op++) {
    CHECK(strcmp(nrt_op_name((nrt_op)op), "invalid") != 0);
    CHECK(nrt_op_ninputs((nrt_op)op) >= 0 && nrt_op_ninputs((nrt_op)op) <= 4);  /* LAYER_NORM_BACKWARD takes 4 (5 with weight) */
  }
}

static void test_reference_flag(void) {
  CHECK(!nrt_kernels_reference());
  nrt_kernels_set_reference(true);
  CHECK(nrt_kernels_reference());
  nrt_kernels_set_reference(false);
  CHECK(!nrt_kernels_reference());
}

static float out_buf[4], in_a[4], in_b[4];

static nrt_launch add_launch(void) {
  nrt_launch l = nrt_test_launch(NRT_OP_ADD, NRT_FLOAT32, 1, (const int64_t[]){4}, 1, 2);
  float *ptrs[3] = {out_buf, in_a, in_b};
  for (int i = 0; i < 3; i++) {
    l.operands[i].data = ptrs[i];
    l.operands[i].dtype = NRT_FLOAT32;
    l.operands[i].strides[0] = 4;
  }
  l.scalars[0].f = 1.0;
  return l;
}

static nrt_launch gemm_launch(int ninputs, int64_t b, int64_t m, int64_t n, int64_t k) {
  nrt_launch l = nrt_test_launch(NRT_OP(GEMM), NRT_FLOAT32, 4, (const int64_t[]){b, m, n, k}, 1, ninputs);
  for (int i = 0; i < 1 + ninputs; i++) {
    l.operands[i].data = out_buf;
    l.operands[i].dtype = NRT_FLOAT32;
  }
  return l;
}

/* Checks that validation rejects `l` with a message naming `what`. */
static void expect_invalid(const nrt_launch *l, const char *what, int line) {
  nrt_status st = nrt_launch_validate("nrt_launch_kernel", l);
  if (st != NRT_ERROR_INVALID_ARGUMENT || !strstr(nrt_last_error_message(), what)) {
    fprintf(stderr, "line %d: got %s \"%s\", want \"%s\"\n", line, nrt_status_name(st),
            nrt_last_error_message(), what);
    CHECK(0);
  }
}

#define EXPECT_INVALID(l, what) expect_invalid(&(l), what, __LINE__)

static void test_validation(void) {
  nrt_launch l = add_launch();
  CHECK_OK(nrt_launch_validate("t", &l));
  CHECK_STATUS(nrt_launch_validate("t", NULL), NRT_ERROR_INVALID_ARGUMENT);

  l = add_launch(); l.op = NRT_OP_COUNT;
  EXPECT_INVALID(l, "invalid op");
  l = add_launch(); l.op = (nrt_op)-3;
  EXPECT_INVALID(l, "invalid op");
  l = add_launch(); l.ndim = -1;
  EXPECT_INVALID(l, "ADD: ndim -1");
  l = add_launch(); l.ndim = NRT_MAX_DIMS + 1;
  EXPECT_INVALID(l, "ADD: ndim 17");
  l = add_launch(); l.sizes[0] = -2;
  EXPECT_INVALID(l, "ADD: negative size");
  l = add_launch(); l.noutputs = 0;
  EXPECT_INVALID(l, "ADD: noutputs 0");
  l = add_launch(); l.ninputs = 1;
  EXPECT_INVALID(l, "ADD: expected 2 inputs, got 1");
  l = add_launch(); l.ninputs = 3;
  EXPECT_INVALID(l, "ADD: expected 2 inputs");
  l = add_launch(); l.noutputs = 7;
  EXPECT_INVALID(l, "ADD: 9 operands, at most 8");
  l = add_launch(); l.compute_dtype = NRT_DTYPE_COUNT;
  EXPECT_INVALID(l, "ADD: invalid compute dtype");
  l = add_launch(); l.operands[2].dtype = (nrt_dtype)99;
  EXPECT_INVALID(l, "ADD: operand 2 has invalid dtype 99");
  l = add_launch(); l.operands[1].data = NULL;
  EXPECT_INVALID(l, "ADD: operand 1 has NULL data");
  /* The message names the entry point too. */
  l = add_launch(); l.ninputs = 0;
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(nrt_last_error_message(), "nrt_launch_run: ADD:") != NULL);
  nrt_stream *s;
  CHECK_OK(nrt_stream_get(0, 1, &s));
  CHECK_STATUS(nrt_launch_kernel(s, &l), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(nrt_last_error_message(), "nrt_launch_kernel: ADD:") != NULL);
  l = add_launch();
  CHECK_STATUS(nrt_launch_kernel(NULL, &l), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_launch_kernel(s, NULL), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_OK(nrt_stream_synchronize(s)); /* nothing was enqueued by the failures */

  /* An empty iteration needs no data; a 0-d launch is one element. */
  l = add_launch(); l.sizes[0] = 0;
  l.operands[0].data = l.operands[1].data = l.operands[2].data = NULL;
  CHECK_OK(nrt_launch_validate("t", &l));
  l = add_launch(); l.ndim = 0;
  CHECK_OK(nrt_launch_validate("t", &l));
  l.operands[0].data = NULL;
  EXPECT_INVALID(l, "operand 0 has NULL data");
  l = add_launch(); l.ndim = NRT_MAX_DIMS;
  for (int d = 0; d < NRT_MAX_DIMS; d++) l.sizes[d] = 1;
  CHECK_OK(nrt_launch_validate("t", &l));
  /* Two outputs (values and indices) are fine for a reduction. */
  l = add_launch(); l.op = NRT_OP_MAX_WITH_INDEX; l.noutputs = 2; l.ninputs = 1;
  CHECK_OK(nrt_launch_validate("t", &l));
}

static void test_gemm_validation(void) {
  nrt_launch l = gemm_launch(2, 1, 4, 4, 4);
  CHECK_OK(nrt_launch_validate("t", &l));
  l = gemm_launch(3, 1, 4, 4, 4); /* with bias */
  CHECK_OK(nrt_launch_validate("t", &l));
  l = gemm_launch(1, 1, 4, 4, 4);
  EXPECT_INVALID(l, "GEMM: expected 2 inputs (3 with bias), got 1");
  l = gemm_launch(4, 1, 4, 4, 4);
  EXPECT_INVALID(l, "GEMM: expected 2 inputs");
  l = gemm_launch(2, 1, 4, 4, 4); l.ndim = 3;
  EXPECT_INVALID(l, "GEMM: GEMM sizes are {batch, M, N, K}");
  /* K == 0: A and B are empty and may be NULL, C is not. */
  l = gemm_launch(3, 2, 4, 4, 0);
  l.operands[1].data = l.operands[2].data = NULL;
  CHECK_OK(nrt_launch_validate("t", &l));
  l.operands[0].data = NULL;
  EXPECT_INVALID(l, "GEMM: operand 0 has NULL data");
  l = gemm_launch(3, 2, 4, 4, 0); l.operands[3].data = NULL;
  EXPECT_INVALID(l, "GEMM: operand 3 has NULL data");
  /* M == 0: everything but B is empty. */
  l = gemm_launch(2, 2, 0, 4, 4);
  l.operands[0].data = l.operands[1].data = NULL;
  CHECK_OK(nrt_launch_validate("t", &l));
  l.operands[2].data = NULL;
  EXPECT_INVALID(l, "GEMM: operand 2 has NULL data"); /* B is K x N = 4 x 4 */
}

static void test_enqueue_copies_descriptor(void) {
  /* FILL through the real kernels: the caller's descriptor may change or
   * die right after nrt_launch_kernel returns. */
  nrt_stream *s;
  CHECK_OK(nrt_stream_get(0, 2, &s));
  float out[4] = {0, 0, 0, 0}, other[4] = {0, 0, 0, 0};
  nrt_launch l = nrt_test_launch(NRT_OP_FILL, NRT_FLOAT32, 1, (const int64_t[]){4}, 1, 0);
  l.operands[0].data = out;
  l.operands[0].dtype = NRT_FLOAT32;
  l.operands[0].strides[0] = 4;
  l.scalars[0].f = 3.5;
  nrt_test_gate g;
  nrt_test_gate_close(s, &g, "gate");
  CHECK_OK(nrt_launch_kernel(s, &l));
  l.scalars[0].f = -1.0;
  l.operands[0].data = other;
  nrt_test_gate_open(&g);
  nrt_status st = nrt_stream_synchronize(s);
  if (st == NRT_SUCCESS) {
    CHECK(out[0] == 3.5f && out[3] == 3.5f);
    CHECK(other[0] == 0.0f);
  } else {
    /* Kernels not built yet: the failure still names the op. */
    CHECK(st == NRT_ERROR_UNSUPPORTED);
    CHECK(strstr(nrt_last_error_message(), "kernel FILL failed on neuron:0 stream 2") != NULL);
  }
}

/* out[i] = a[i] * v with v an inline value of `dtype` in slot 2. */
static nrt_launch mul_inline_launch(float *out, const float *a) {
  nrt_launch l = nrt_test_launch(NRT_OP_MUL, NRT_FLOAT32, 1, (const int64_t[]){4}, 1, 2);
  l.operands[0].data = out;
  l.operands[0].dtype = NRT_FLOAT32;
  l.operands[0].strides[0] = 4;
  l.operands[1].data = (void *)a;
  l.operands[1].dtype = NRT_FLOAT32;
  l.operands[1].strides[0] = 4;
  l.operands[2].inline_slot = 2;
  return l;
}

static void test_inline_values(void) {
  float a[4] = {1, -2, 3.5f, 0}, out[4] = {0};
  /* Validation: inputs only, a slot that exists, no strides. */
  nrt_launch l = mul_inline_launch(out, a);
  l.operands[2].dtype = NRT_FLOAT64;
  l.inline_values[1].f64[0] = 2.0;
  CHECK_OK(nrt_launch_validate("t", &l));
  nrt_launch bad = l;
  bad.operands[2].inline_slot = NRT_MAX_INLINE + 1;
  EXPECT_INVALID(bad, "MUL: operand 2 has inline slot 3 outside 1..2");
  bad = l;
  bad.operands[2].inline_slot = -1;
  EXPECT_INVALID(bad, "inline slot -1");
  bad = l;
  bad.operands[2].strides[0] = 8;
  EXPECT_INVALID(bad, "MUL: inline operand 2 has stride 8 in dim 0, expected 0");
  bad = l;
  bad.operands[0].inline_slot = 1;
  EXPECT_INVALID(bad, "operand 0 is an output and cannot be an inline value");

  /* Synchronous run: the value is read in its own dtype (float64 here). */
  CHECK_OK(nrt_launch_run(&l));
  CHECK(out[0] == 2.0f && out[1] == -4.0f && out[2] == 7.0f && out[3] == 0.0f);

  /* Enqueued: the value travels in the task's copy of the descriptor, so
   * the caller may change it right after the call. Two launches in a row
   * with different values, the second in an int64 slot 1. */
  nrt_stream *s;
  CHECK_OK(nrt_stream_get(0, 2, &s));
  float out2[4] = {0};
  nrt_test_gate g;
  nrt_test_gate_close(s, &g, "gate");
  l.inline_values[1].f64[0] = -0.5;
  CHECK_OK(nrt_launch_kernel(s, &l));
  l.inline_values[1].f64[0] = 100.0;
  nrt_launch l2 = mul_inline_launch(out2, a);
  l2.operands[2].dtype = NRT_INT64;
  l2.operands[2].inline_slot = 1;
  l2.inline_values[0].i64[0] = 3;
  CHECK_OK(nrt_launch_kernel(s, &l2));
  l2.inline_values[0].i64[0] = 7;
  nrt_test_gate_open(&g);
  CHECK_OK(nrt_stream_synchronize(s));
  CHECK(out[0] == -0.5f && out[1] == 1.0f && out[2] == -1.75f);
  CHECK(out2[0] == 3.0f && out2[1] == -6.0f && out2[2] == 10.5f);
}

int main(void) {
  unsetenv("NEURON_LAUNCH_BLOCKING");
  RUN_TEST(test_op_tables);
  RUN_TEST(test_reference_flag);
  RUN_TEST(test_validation);
  RUN_TEST(test_gemm_validation);
  RUN_TEST(test_enqueue_copies_descriptor);
  RUN_TEST(test_inline_values);
  return TEST_RESULT();
}
