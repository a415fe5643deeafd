/* The op table: one row per op id over every family (name, kind, input
 * range), built from the X-macro lists of nrt/launch.h and the family headers. */
#include "core/core.h"
#include "nrt/ops/attention.h"
#include "nrt/ops/complex.h"
#include "nrt/ops/conv.h"
#include "nrt/ops/distributions.h"
#include "nrt/ops/foreach.h"
#include "nrt/ops/gemm.h"
#include "nrt/ops/index.h"
#include "nrt/ops/linalg.h"
#include "nrt/ops/nn.h"
#include "nrt/ops/norm.h"
#include "nrt/ops/pooling.h"
#include "nrt/ops/resample.h"
#include "nrt/ops/rnn.h"
#include "nrt/ops/segment.h"
#include "nrt/ops/select.h"
#include "nrt/ops/special.h"

/* One table over every op id, base list and families alike (designated
 * initializers; ids no family uses stay NULL-named, i.e. invalid). */
typedef struct op_info {
  const char *name;
  unsigned char kind;
  signed char min_inputs, max_inputs;
} op_info;

#define NRT_FAMILY_ASSERT(family)                                                    \
  _Static_assert(NRT_OP_##family##_END_ <= ((NRT_OP_FAMILY_##family + 1) << NRT_OP_FAMILY_BITS), \
                 "op family " #family " has more ops than its id range")
NRT_FAMILY_ASSERT(SPECIAL);
NRT_FAMILY_ASSERT(LINALG);
NRT_FAMILY_ASSERT(RESAMPLE);
NRT_FAMILY_ASSERT(SELECT);
NRT_FAMILY_ASSERT(SEGMENT);
NRT_FAMILY_ASSERT(NN);
NRT_FAMILY_ASSERT(COMPLEX);
NRT_FAMILY_ASSERT(ATTENTION);
NRT_FAMILY_ASSERT(GEMM);
NRT_FAMILY_ASSERT(INDEX);
NRT_FAMILY_ASSERT(NORM);
NRT_FAMILY_ASSERT(CONV);
NRT_FAMILY_ASSERT(POOLING);
NRT_FAMILY_ASSERT(RNN);
NRT_FAMILY_ASSERT(DISTRIBUTIONS);
NRT_FAMILY_ASSERT(FOREACH);
_Static_assert(NRT_OP_COUNT <= (1 << NRT_OP_FAMILY_BITS), "the base op list outgrew its id range");

static const op_info ops[NRT_OP_ID_LIMIT] = {
#define NRT_X(name, kind, lo, hi) [NRT_OP_##name] = {#name, NRT_KIND_##kind, lo, hi},
    NRT_OP_LIST(NRT_X)
    NRT_OPS_SPECIAL(NRT_X)
    NRT_OPS_LINALG(NRT_X)
    NRT_OPS_RESAMPLE(NRT_X)
    NRT_OPS_SELECT(NRT_X)
    NRT_OPS_SEGMENT(NRT_X)
    NRT_OPS_NN(NRT_X)
    NRT_OPS_COMPLEX(NRT_X)
    NRT_OPS_ATTENTION(NRT_X)
    NRT_OPS_GEMM(NRT_X)
    NRT_OPS_INDEX(NRT_X)
    NRT_OPS_NORM(NRT_X)
    NRT_OPS_CONV(NRT_X)
    NRT_OPS_POOLING(NRT_X)
    NRT_OPS_RNN(NRT_X)
    NRT_OPS_DISTRIBUTIONS(NRT_X)
    NRT_OPS_FOREACH(NRT_X)
#undef NRT_X
};

bool nrt_op_valid(nrt_op op) { return (unsigned)op < NRT_OP_ID_LIMIT && ops[op].name; }

const char *nrt_op_name(nrt_op op) { return nrt_op_valid(op) ? ops[op].name : "invalid"; }

/* An invalid op reports POINTWISE; callers validate the op first. */
nrt_kind nrt_op_kind(nrt_op op) {
  return nrt_op_valid(op) ? (nrt_kind)ops[op].kind : NRT_KIND_POINTWISE;
}

/* -1 for an invalid op. GEMM reports 2; it also accepts 3 (with bias). */
int nrt_op_ninputs(nrt_op op) { return nrt_op_valid(op) ? ops[op].min_inputs : -1; }

int nrt_op_max_inputs(nrt_op op) { return nrt_op_valid(op) ? ops[op].max_inputs : -1; }
