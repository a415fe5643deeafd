/* The FOREACH engine's private header: the block functions of its
 * elementwise ops (math.c) and their table. A block function computes n
 * float32 elements from converted input blocks x, y, z (unused ones NULL);
 * out may be x (in-place ops). A scalar operand arrives as a block filled
 * with its value, so one expression serves every mode. */
#ifndef NRT_KERNELS_FOREACH_FOREACH_H
#define NRT_KERNELS_FOREACH_FOREACH_H

#include "kernels/common/common.h"
#include "nrt/ops/foreach.h"

typedef struct fe_args {
  float alpha;   /* s0 of ADD/SUB */
  float v;       /* ADDCMUL/ADDCDIV's value */
  double e;      /* a scalar exponent (POW's scalar form) */
  nrt_dtype dt;  /* the compute dtype */
} fe_args;

typedef void (*fe_fn)(float *out, const float *x, const float *y, const float *z, int64_t n,
                      const fe_args *a);

typedef struct fe_kernel {
  fe_fn f32;          /* baseline build */
  fe_fn f32_avx512;   /* optional AVX-512 build of f32 */
  fe_fn f32_ref;      /* the reference path's, when f32 uses vmath.h */
  fe_fn scalar_f32;   /* optional: used instead when the scalar operand is not a tensor */
  int ninputs;        /* tensor inputs the expression reads: x, y, z */
  /* Where the mode's scalar goes: the input it replaces (1 = y, 2 = z),
   * FE_VALUE for the v of ADDCMUL/ADDCDIV, FE_NONE for ops without one. */
  int scalar;
} fe_kernel;
enum { FE_NONE = -1, FE_VALUE = -2 };

/* The elementwise ops' kernels; NULL for ZERO, COPY and NORM (foreach.c
 * runs those itself) and for ops of other families. */
const fe_kernel *nrt_fe_kernel(nrt_op op);

/* The optimizer steps ADAM and SGD (optim.c): one launch's settings, read
 * from the descriptor and its input tensors. */
typedef struct fe_optim {
  int op;
  unsigned flags;          /* NRT_FOREACH_OPTIM_* */
  double lr, beta1, beta2, weight_decay, eps, momentum, dampening;
  float grad_scale;        /* 1 without GRAD_SCALE */
  nrt_dtype dt, step_dt;
  bool wide;               /* AVX-512 builds */
} fe_optim;

nrt_status nrt_fe_optim_validate(const nrt_launch *l);
/* Fills *o; false when found_inf says the step is skipped. */
bool nrt_fe_optim_prepare(fe_optim *o, const nrt_launch *l, bool wide);
/* Elements [a, b) of one table row (fast path). */
void nrt_fe_optim_run(const fe_optim *o, const int64_t *row, int64_t a, int64_t b);
/* A whole row, element by element (reference path). */
void nrt_fe_optim_ref_row(const fe_optim *o, const int64_t *row);

#endif
