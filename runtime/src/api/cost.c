/* What a launch costs, for the profiler's record: bytes read and written
 * and floating-point operations, from the descriptor alone. Only the
 * kinds whose descriptor says it plainly are costed (0 means unknown):
 * iteration-space ops (pointwise, reductions, row ops), whose every
 * operand spans the launch's sizes except along its zero strides, and the
 * FLOP-bound engines with their own size layouts (GEMM, CONV, attention). */
#include "api/api.h"
#include "exec/exec.h"
#include "nrt/ops/attention.h"
#include "nrt/profiler.h"

static uint64_t operand_elems(const nrt_launch *l, int i) {
  uint64_t n = 1;
  for (int d = 0; d < l->ndim; d++)
    if (l->operands[i].strides[d] != 0) n *= (uint64_t)l->sizes[d];
  return n;
}

static uint64_t elem(const nrt_launch *l, int i) {
  return i < l->noutputs + l->ninputs ? nrt_dtype_size(l->operands[i].dtype) : 0;
}

void nrt_launch_cost(const nrt_launch *l, nrt_task_cost *out) {
  *out = (nrt_task_cost){NRT_ACTIVITY_KERNEL, (int)l->compute_dtype, 0, 0};
  const int64_t *z = l->sizes;
  switch (nrt_op_kind(l->op)) {
    case NRT_KIND_POINTWISE:
    case NRT_KIND_REDUCE:
    case NRT_KIND_ROW:
      for (int i = 0; i < l->noutputs + l->ninputs; i++)
        out->bytes += operand_elems(l, i) * elem(l, i);
      break;
    case NRT_KIND_GEMM: { /* {batch, M, N, K}: C (output 0) = A (1) B (2) */
      uint64_t b = z[0], m = z[1], n = z[2], k = z[3];
      out->flops = 2 * b * m * n * k;
      out->bytes = b * (m * n * elem(l, 0) + m * k * elem(l, 1) + k * n * elem(l, 2));
      break;
    }
    case NRT_KIND_CONV: { /* {N, G, Cog, Cig, OD, OH, OW, ID, IH, IW, KD, KH, KW} */
      uint64_t per_group_out = (uint64_t)z[2] * z[4] * z[5] * z[6];
      uint64_t taps = (uint64_t)z[3] * z[10] * z[11] * z[12];
      out->flops = 2 * (uint64_t)z[0] * z[1] * per_group_out * taps;
      uint64_t x = (uint64_t)z[0] * z[1] * z[3] * z[7] * z[8] * z[9];
      uint64_t y = (uint64_t)z[0] * z[1] * z[2] * z[4] * z[5] * z[6];
      uint64_t w = (uint64_t)z[1] * z[2] * taps;
      out->bytes = (x + y + w) * elem(l, 0);
      break;
    }
    case NRT_KIND_ATTENTION: { /* {B, Hq, Hk, L, S, E, Ev} */
      uint64_t rows = (uint64_t)z[0] * z[1] * z[3], s = z[4], e = z[5], ev = z[6];
      uint64_t kv = (uint64_t)z[0] * z[2] * s * (e + ev);
      if (l->op == NRT_OP(SDPA_FORWARD)) { /* S = QK^T, O = PV */
        out->flops = 2 * rows * s * (e + ev);
        out->bytes = (rows * (e + ev) + kv) * elem(l, 0);
      } else if (l->op == NRT_OP(SDPA_BACKWARD)) { /* S again, dV, dP, dQ, dK */
        out->flops = 2 * rows * s * (3 * e + 2 * ev);
        out->bytes = 2 * (rows * (e + 2 * ev) + kv) * elem(l, 0);
      }
      break;
    }
    default:
      break;
  }
}
