/* Op family FOREACH. torch._foreach_* over a whole tensor list in one
 * launch (kernels/foreach/): the optimizers' and clip_grad's elementwise
 * steps over every parameter at once, instead of one launch per tensor.
 * Entries: X(name, kind, min_inputs, max_inputs); scalars (s0..s3) and
 * params (p0..p3) as each comment says. See nrt/launch.h for how families
 * are numbered.
 *
 * Layout. sizes (ndim 1) = {rows}: one row per tensor of the lists.
 * operands[0] (the one output operand, INT64) is the list table,
 * row-major [rows][NRT_FOREACH_ROW]:
 *   {numel, out, in0, in1, in2, scalar}
 * numel: elements of the row's tensors (all the same shape); out, in0..in2:
 * data pointers (int64 bits) of the output and input tensors, each dense
 * (contiguous or any non-overlapping, dense layout) and all with the same
 * strides, so element k of one is element k of the others; unused ones 0.
 * scalar: the row's scalar as the bits of a double (ROW mode below).
 * Outputs may be their in0 (in-place ops), never another row's tensor.
 * Every tensor of the lists has dtype compute_dtype (FLOAT32, BFLOAT16 or
 * FLOAT16), except the in0 list of COPY and the out list of NORM, whose
 * dtype is p1. Values are computed in float32 and rounded once to the
 * output dtype, as the single-tensor kernels of the base list compute them
 * (same expressions; NORM accumulates in double like the reductions).
 *
 * p0, the mode, says where an op's scalar operand comes from: the second
 * input y of the binary ops, the weight of LERP, the value v of
 * ADDCMUL/ADDCDIV; ops without one take LIST:
 *   LIST    y (or the weight) is a tensor of the row (in1, or in2 for LERP);
 *   SCALAR  s1, the same for every row;
 *   ROW     the row's scalar;
 *   TENSOR  the value of operands[1], a one-element tensor of any real
 *           dtype (the launch's one input; the other modes have none),
 *           converted to compute_dtype as the single-tensor ops convert a
 *           0-d tensor operand (MUL and DIV read it in float32, as ATen's
 *           CPU mul/div kernels do; so do POW, ADDCMUL and ADDCDIV, whose
 *           single-tensor ops take it as a scalar argument).
 * s0: alpha of ADD/SUB, the order of NORM.
 *
 * Optimizer steps. ADAM and SGD update every parameter of the table in
 * place in one pass, each element of each tensor read and written once, as
 * ATen's fused CPU kernels (_fused_adam_, _fused_adamw_, _fused_sgd_)
 * compute it: in float32 (also for BFLOAT16 and FLOAT16 tensors, whose
 * states are rounded once when stored while the step goes on with the
 * float32 values), the bias corrections of each row in double from its
 * step count. Their rows are NRT_FOREACH_OPTIM_ROW wide:
 *   {numel, param, grad, state0, state1, state2, step}
 * all tensors of compute_dtype laid out alike (as above) except step, a
 * one-element tensor of dtype p1 holding the row's step count after this
 * step's increment (ADAM; read, not written). ADAM: state0 exp_avg, state1
 * exp_avg_sq, state2 max_exp_avg_sq (AMSGRAD only). SGD: state0 the
 * momentum buffer (only when the momentum s2 is nonzero).
 * p0: NRT_FOREACH_OPTIM_* flags. The inputs are the one-element tensors the
 * flags name, in this order: the learning rate (LR_TENSOR, any real dtype,
 * then s0 is ignored), grad_scale (GRAD_SCALE, FLOAT32: the gradients are
 * divided by it and the quotients stored back into grad) and found_inf
 * (FOUND_INF, FLOAT32: when it holds 1.0 the launch changes nothing,
 * ATen's skipped step, without the host reading it).
 * ADAM: s0 lr, s1 beta1, s2 beta2, s3 weight_decay, aux[0] eps (the bits of
 * a double); ADAMW decays the parameter (p *= 1 - lr * weight_decay) instead
 * of adding weight_decay * p to the gradient.
 * SGD: s0 lr, s1 weight_decay, s2 momentum, s3 dampening; FIRST_STEP puts
 * the gradient in the buffer instead of blending it in. */
#ifndef NRT_OPS_FOREACH_H
#define NRT_OPS_FOREACH_H

#include "nrt/launch.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NRT_FOREACH_ROW 6 /* int64 per table row */
enum { NRT_FOREACH_NUMEL, NRT_FOREACH_OUT, NRT_FOREACH_IN0, NRT_FOREACH_IN1, NRT_FOREACH_IN2, NRT_FOREACH_SCALAR };
enum { NRT_FOREACH_MODE_LIST, NRT_FOREACH_MODE_SCALAR, NRT_FOREACH_MODE_ROW, NRT_FOREACH_MODE_TENSOR };

#define NRT_FOREACH_OPTIM_ROW 7 /* int64 per table row of ADAM and SGD */
enum { NRT_FOREACH_OPTIM_NUMEL, NRT_FOREACH_OPTIM_PARAM, NRT_FOREACH_OPTIM_GRAD, NRT_FOREACH_OPTIM_STATE0,
       NRT_FOREACH_OPTIM_STATE1, NRT_FOREACH_OPTIM_STATE2, NRT_FOREACH_OPTIM_STEP };
enum {
  NRT_FOREACH_OPTIM_ADAMW = 1 << 0,      /* ADAM: decoupled weight decay */
  NRT_FOREACH_OPTIM_AMSGRAD = 1 << 1,    /* ADAM */
  NRT_FOREACH_OPTIM_MAXIMIZE = 1 << 2,
  NRT_FOREACH_OPTIM_NESTEROV = 1 << 3,   /* SGD */
  NRT_FOREACH_OPTIM_FIRST_STEP = 1 << 4, /* SGD */
  NRT_FOREACH_OPTIM_LR_TENSOR = 1 << 5,
  NRT_FOREACH_OPTIM_GRAD_SCALE = 1 << 6,
  NRT_FOREACH_OPTIM_FOUND_INF = 1 << 7,
};

#define NRT_OPS_FOREACH(X)                                                    \
  /* binary: x = in0, y = the scalar operand (in1 in LIST mode) */            \
  X(FOREACH_ADD, FOREACH, 0, 1)      /* x + s0 * y */                         \
  X(FOREACH_SUB, FOREACH, 0, 1)      /* x - s0 * y */                         \
  X(FOREACH_MUL, FOREACH, 0, 1)                                               \
  X(FOREACH_DIV, FOREACH, 0, 1)                                               \
  X(FOREACH_MAXIMUM, FOREACH, 0, 1)  /* NaN-propagating (also clamp_min) */   \
  X(FOREACH_MINIMUM, FOREACH, 0, 1)  /* (also clamp_max) */                   \
  X(FOREACH_POW, FOREACH, 0, 1)      /* x ** y: powf for a tensor y; a      \
     scalar exponent takes POW_SCALAR's exact forms (x*x, sqrt, 1/x, ...) */ \
  X(FOREACH_RPOW, FOREACH, 0, 1)     /* y ** x (a scalar base) */             \
  /* ternary: x = in0, y = in1, z = in2 */                                    \
  X(FOREACH_ADDCMUL, FOREACH, 0, 1)  /* x + v * y * z (v: not LIST) */        \
  X(FOREACH_ADDCDIV, FOREACH, 0, 1)  /* x + v * y / z */                      \
  X(FOREACH_LERP, FOREACH, 0, 1)     /* x + w (y - x), ATen's two forms;    \
                                        w = in2 in LIST mode */               \
  /* unary: x = in0 */                                                        \
  X(FOREACH_SQRT, FOREACH, 0, 0)                                              \
  X(FOREACH_NEG, FOREACH, 0, 0)                                               \
  X(FOREACH_RECIPROCAL, FOREACH, 0, 0)                                        \
  X(FOREACH_ABS, FOREACH, 0, 0)                                               \
  X(FOREACH_SIGN, FOREACH, 0, 0)                                              \
  X(FOREACH_EXP, FOREACH, 0, 0)                                               \
  X(FOREACH_ZERO, FOREACH, 0, 0)     /* out = 0; any real compute dtype */    \
  X(FOREACH_COPY, FOREACH, 0, 0)     /* out = in0 of dtype p1: the bits when \
     p1 is compute_dtype (any real dtype), else converted between FLOAT32,  \
     BFLOAT16 and FLOAT16 */                                                 \
  X(FOREACH_NORM, FOREACH, 0, 0)     /* out (one element of dtype p1) =      \
     ||in0||_s0: s0 = 0 (count of nonzeros), 1, 2, +-inf or any p; in       \
     double, combined in a fixed order (results do not depend on the        \
     thread count); NaN wins for +-inf; an empty row gives 0 */            \
  /* optimizer steps (rows of NRT_FOREACH_OPTIM_ROW, see above) */            \
  X(FOREACH_ADAM, FOREACH, 0, 3)     /* Adam and AdamW, amsgrad, maximize */ \
  X(FOREACH_SGD, FOREACH, 0, 3)      /* momentum, dampening, nesterov */

NRT_OP_FAMILY_ENUM(FOREACH, NRT_OPS_FOREACH);

/* int64 per table row of `op`'s launches. */
static inline int nrt_foreach_row_width(nrt_op op) {
  return (int)op == NRT_OP_FOREACH_ADAM || (int)op == NRT_OP_FOREACH_SGD ? NRT_FOREACH_OPTIM_ROW : NRT_FOREACH_ROW;
}

/* Enqueues a FOREACH launch on `stream` with its table: the sizes[0] rows
 * that launch->operands[0].data points at are copied into the stream's task
 * together with the descriptor, so the caller's table (host memory) may die
 * right after the call, and the launch is one task, with no device copy.
 * A row input written by a kernel that failed earlier fails the launch and
 * poisons its outputs, as nrt_launch_kernel does for its operands.
 * NRT_ERROR_UNSUPPORTED, enqueuing nothing, while a graph capture records
 * the stream's device (a table holds pointers the capture cannot resolve):
 * check nrt_foreach_available() first and launch the single-tensor ops
 * instead. Validation errors return at once; execution errors are sticky
 * on the stream. (nrt_launch_run runs a FOREACH launch in place: the table
 * is read where it is.) */
nrt_status nrt_foreach_launch(nrt_stream *stream, const nrt_launch *launch);
/* False while a graph capture records `stream`'s device. */
bool nrt_foreach_available(nrt_stream *stream);

#ifdef __cplusplus
}
#endif
#endif
