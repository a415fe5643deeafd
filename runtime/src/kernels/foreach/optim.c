/* The optimizer steps of the FOREACH engine (nrt/ops/foreach.h): ADAM
 * (Adam, AdamW) and SGD over a table of parameters, each element of each
 * tensor read and written once.
 *
 * The expressions are those of ATen's fused CPU kernels
 * (aten/src/ATen/native/cpu/FusedAdamKernel.cpp, FusedSGDKernel.cpp), in
 * their scalar form: float32 arithmetic on float32 constants, which ATen
 * derives per tensor in double from the hyperparameters and the step
 * count; the lerp of exp_avg in ATen's two forms, the same association
 * everywhere, no contraction into FMAs (-std=c11). ATen's vector loops fuse
 * the lerp into an FMA where the host has one, so a float32 exp_avg may
 * differ from theirs in the last bit; bfloat16 and float16 tensors are
 * rounded once, when stored, in both.
 *
 * The flags that change the loop (AMSGRAD, the kind of weight decay, a
 * gradient to store back, SGD's momentum form and nesterov) pick one of
 * a few specialised copies of one inline body, so the loops vectorise
 * without branches; maximize and grad_scale are a multiplication by -1
 * and a division by the scale (1 when there is none), both exact when
 * they change nothing. */
#pragma GCC optimize("O3,no-trapping-math,no-math-errno")
#include "kernels/foreach/foreach.h"

#define FE_INLINE static inline __attribute__((always_inline))

/* NaN-propagating max, as ATen's vectorised maximum. */
FE_INLINE float fe_optim_maxf(float a, float b) { return a != a ? a : (b != b ? b : (a > b ? a : b)); }

/* One row's float32 constants. */
typedef struct fe_adam_k {
  float scale, sign;       /* grad / scale, * sign (-1: maximize) */
  float wd, decay_factor;  /* Adam: g += p * wd; AdamW: p *= decay_factor */
  float w, w1;             /* exp_avg.lerp_(grad, w); w1 = 1 - w */
  bool small;              /* |w| < 0.5: ATen's first lerp form */
  float beta2, c2;         /* exp_avg_sq * beta2 + c2 * g * g */
  float bc2_sqrt, eps, step_size;
} fe_adam_k;

typedef struct fe_sgd_k {
  float scale, sign, wd, momentum, damp1 /* 1 - dampening */, lr;
} fe_sgd_k;

enum { DECAY_NONE, DECAY_GRAD, DECAY_PARAM };       /* Adam: wd * p into g; AdamW: p decays */
enum { MOMENTUM_NONE, MOMENTUM_FIRST, MOMENTUM_BLEND }; /* SGD's buffer: none, = g, blended */

FE_INLINE void adam_body(float *restrict p, float *restrict g, float *restrict m, float *restrict v,
                         float *restrict vmax, int64_t n, const fe_adam_k *k, const int decay, const bool ams,
                         const bool store_grad) {
  const float scale = k->scale, sign = k->sign, wd = k->wd, decay_factor = k->decay_factor, w = k->w, w1 = k->w1;
  const float beta2 = k->beta2, c2 = k->c2, bc2_sqrt = k->bc2_sqrt, eps = k->eps, step_size = k->step_size;
  const bool small = k->small;
  for (int64_t i = 0; i < n; i++) {
    float gv = g[i] / scale;
    if (store_grad) g[i] = gv;
    gv = gv * sign;
    float pv = p[i];
    if (decay == DECAY_GRAD) gv = gv + pv * wd;
    else if (decay == DECAY_PARAM) pv = pv * decay_factor;
    float mv = m[i];
    mv = small ? mv + w * (gv - mv) : gv - (gv - mv) * w1;
    m[i] = mv;
    float vv = v[i] * beta2;
    vv = vv + c2 * gv * gv;
    v[i] = vv;
    float denom;
    if (ams) {
      float x = fe_optim_maxf(vmax[i], vv);
      vmax[i] = x;
      denom = sqrtf(x) / bc2_sqrt + eps;
    } else {
      denom = sqrtf(vv) / bc2_sqrt + eps;
    }
    p[i] = pv - step_size * mv / denom;
  }
}

FE_INLINE void sgd_body(float *restrict p, float *restrict g, float *restrict buf, int64_t n, const fe_sgd_k *k,
                        const bool decay, const int mom, const bool nesterov, const bool store_grad) {
  const float scale = k->scale, sign = k->sign, wd = k->wd, momentum = k->momentum, damp1 = k->damp1, lr = k->lr;
  for (int64_t i = 0; i < n; i++) {
    float gv = g[i] / scale;
    if (store_grad) g[i] = gv;
    gv = gv * sign;
    float pv = p[i];
    if (decay) gv = gv + pv * wd;
    if (mom != MOMENTUM_NONE) {
      float b = mom == MOMENTUM_FIRST ? gv : buf[i] * momentum + gv * damp1;
      buf[i] = b;
      gv = nesterov ? gv + b * momentum : b;
    }
    p[i] = pv - gv * lr;
  }
}

/* The specialised copies, for one ISA each (ATTR). */
#define ADAM_CASE(D, A, S) \
  if (decay == D && ams == A && store_grad == S) return adam_body(p, g, m, v, vmax, n, k, D, A, S);
#define ADAM_S(D, A) ADAM_CASE(D, A, false) ADAM_CASE(D, A, true)
#define ADAM_A(D) ADAM_S(D, false) ADAM_S(D, true)
#define SGD_CASE(D, M, N, S) \
  if (decay == D && mom == M && nesterov == N && store_grad == S) return sgd_body(p, g, buf, n, k, D, M, N, S);
#define SGD_S(D, M, N) SGD_CASE(D, M, N, false) SGD_CASE(D, M, N, true)
#define SGD_N(D, M) SGD_S(D, M, false) SGD_S(D, M, true)
#define SGD_M(D) SGD_N(D, MOMENTUM_NONE) SGD_N(D, MOMENTUM_FIRST) SGD_N(D, MOMENTUM_BLEND)
#define FE_OPTIM_BUILD(suffix, ATTR)                                                                             \
  ATTR static void adam_block##suffix(float *p, float *g, float *m, float *v, float *vmax, int64_t n,             \
                                      const fe_adam_k *k, int decay, bool ams, bool store_grad) {                 \
    ADAM_A(DECAY_NONE) ADAM_A(DECAY_GRAD) ADAM_A(DECAY_PARAM)                                                     \
  }                                                                                                               \
  ATTR static void sgd_block##suffix(float *p, float *g, float *buf, int64_t n, const fe_sgd_k *k, bool decay,    \
                                     int mom, bool nesterov, bool store_grad) {                                   \
    SGD_M(false) SGD_M(true)                                                                                      \
  }
FE_OPTIM_BUILD(, )
FE_OPTIM_BUILD(_avx512, NRT_TARGET_AVX512)

/* ---- per launch and per row -------------------------------------------------------- */

static bool is_adam(const fe_optim *o) { return o->op == NRT_OP_FOREACH_ADAM; }
static double sbits(int64_t b) {
  double d;
  memcpy(&d, &b, sizeof d);
  return d;
}
static char *slot(const int64_t *row, int s) { return (char *)(intptr_t)row[s]; }

bool nrt_fe_optim_prepare(fe_optim *o, const nrt_launch *l, bool wide) {
  *o = (fe_optim){.op = (int)l->op, .flags = (unsigned)l->params[0], .dt = l->compute_dtype,
                  .step_dt = (nrt_dtype)l->params[1], .wide = wide, .grad_scale = 1.0f};
  o->lr = l->scalars[0].f;
  if (is_adam(o)) {
    o->beta1 = l->scalars[1].f;
    o->beta2 = l->scalars[2].f;
    o->weight_decay = l->scalars[3].f;
    o->eps = sbits(l->aux[0]);
  } else {
    o->weight_decay = l->scalars[1].f;
    o->momentum = l->scalars[2].f;
    o->dampening = l->scalars[3].f;
  }
  int in = 1;
  if (o->flags & NRT_FOREACH_OPTIM_LR_TENSOR) {
    o->lr = nrt_ref_load_f64(l->operands[in].data, l->operands[in].dtype);
    in++;
  }
  if (o->flags & NRT_FOREACH_OPTIM_GRAD_SCALE) o->grad_scale = *(const float *)l->operands[in++].data;
  if (o->flags & NRT_FOREACH_OPTIM_FOUND_INF) return *(const float *)l->operands[in].data != 1.0f;
  return true;
}

/* ATen's per-tensor constants: the bias corrections in double from the
 * step count read as a float (state_step.item<float>()). */
static fe_adam_k adam_consts(const fe_optim *o, const int64_t *row) {
  double step = (float)nrt_ref_load_f64(slot(row, NRT_FOREACH_OPTIM_STEP), o->step_dt);
  double bc1 = 1 - pow(o->beta1, step), bc2 = 1 - pow(o->beta2, step);
  double w = 1 - o->beta1;
  fe_adam_k k = {
      .scale = o->grad_scale,
      .sign = o->flags & NRT_FOREACH_OPTIM_MAXIMIZE ? -1.0f : 1.0f,
      .wd = (float)o->weight_decay,
      .decay_factor = (float)(1 - o->lr * o->weight_decay),
      .w = (float)w,
      .beta2 = (float)o->beta2,
      .c2 = (float)(1 - o->beta2),
      .bc2_sqrt = (float)sqrt(bc2),
      .eps = (float)o->eps,
      .step_size = (float)(o->lr / bc1),
  };
  k.w1 = 1.0f - k.w;
  k.small = fabsf(k.w) < 0.5f;
  return k;
}

static fe_sgd_k sgd_consts(const fe_optim *o) {
  return (fe_sgd_k){
      .scale = o->grad_scale,
      .sign = o->flags & NRT_FOREACH_OPTIM_MAXIMIZE ? -1.0f : 1.0f,
      .wd = (float)o->weight_decay,
      .momentum = (float)o->momentum,
      .damp1 = (float)(1 - o->dampening),
      .lr = (float)o->lr,
  };
}

static int adam_decay(const fe_optim *o) {
  if (o->weight_decay == 0) return DECAY_NONE;
  return o->flags & NRT_FOREACH_OPTIM_ADAMW ? DECAY_PARAM : DECAY_GRAD;
}
static int sgd_momentum(const fe_optim *o) {
  if (o->momentum == 0) return MOMENTUM_NONE;
  return o->flags & NRT_FOREACH_OPTIM_FIRST_STEP ? MOMENTUM_FIRST : MOMENTUM_BLEND;
}

/* The row's tensors a step touches, in slot order from PARAM (0: unused). */
static void used_slots(const fe_optim *o, bool used[5]) {
  bool ams = o->flags & NRT_FOREACH_OPTIM_AMSGRAD;
  used[0] = used[1] = true;
  used[2] = is_adam(o) || o->momentum != 0;
  used[3] = is_adam(o);
  used[4] = is_adam(o) && ams;
}

/* Elements [a, b) of a row: float32 in place; other dtypes through block
 * buffers, the written tensors converted back. */
void nrt_fe_optim_run(const fe_optim *o, const int64_t *row, int64_t a, int64_t b) {
  bool used[5];
  used_slots(o, used);
  bool store_grad = o->flags & NRT_FOREACH_OPTIM_GRAD_SCALE;
  fe_adam_k ak;
  fe_sgd_k sk;
  if (is_adam(o)) ak = adam_consts(o, row);
  else sk = sgd_consts(o);
  int decay = adam_decay(o), mom = sgd_momentum(o);
  bool ams = used[4], sdecay = o->weight_decay != 0, nesterov = o->flags & NRT_FOREACH_OPTIM_NESTEROV;
  size_t es = nrt_dtype_size(o->dt);
  bool direct = o->dt == NRT_FLOAT32;
  float buf[5][NRT_BLOCK];
  int64_t step = direct ? b - a : NRT_BLOCK;
  for (int64_t j = a; j < b; j += step) {
    int64_t n = b - j < step ? b - j : step;
    float *t[5] = {NULL, NULL, NULL, NULL, NULL};
    for (int s = 0; s < 5; s++) {
      if (!used[s]) continue;
      char *src = slot(row, NRT_FOREACH_OPTIM_PARAM + s) + j * (int64_t)es;
      bool load = !(s == 2 && !is_adam(o) && mom == MOMENTUM_FIRST); /* a first step's buffer is only written */
      if (direct) {
        t[s] = (float *)src;
      } else {
        t[s] = buf[s];
        if (load) nrt_load_f32(buf[s], src, (int64_t)es, o->dt, n);
      }
    }
    if (is_adam(o)) {
      if (o->wide) adam_block_avx512(t[0], t[1], t[2], t[3], t[4], n, &ak, decay, ams, store_grad);
      else adam_block(t[0], t[1], t[2], t[3], t[4], n, &ak, decay, ams, store_grad);
    } else {
      if (o->wide) sgd_block_avx512(t[0], t[1], t[2], n, &sk, sdecay, mom, nesterov, store_grad);
      else sgd_block(t[0], t[1], t[2], n, &sk, sdecay, mom, nesterov, store_grad);
    }
    if (direct) continue;
    for (int s = 0; s < 5; s++)
      if (used[s] && (s != 1 || store_grad))
        nrt_store_f32(slot(row, NRT_FOREACH_OPTIM_PARAM + s) + j * (int64_t)es, (int64_t)es, o->dt, t[s], n);
  }
}

/* The reference path: element by element through dtype.c's conversions. */
void nrt_fe_optim_ref_row(const fe_optim *o, const int64_t *row) {
  bool used[5];
  used_slots(o, used);
  bool store_grad = o->flags & NRT_FOREACH_OPTIM_GRAD_SCALE;
  fe_adam_k ak;
  fe_sgd_k sk;
  if (is_adam(o)) ak = adam_consts(o, row);
  else sk = sgd_consts(o);
  int mom = sgd_momentum(o);
  size_t es = nrt_dtype_size(o->dt);
  int64_t n = row[NRT_FOREACH_OPTIM_NUMEL];
  for (int64_t i = 0; i < n; i++) {
    float x[5] = {0, 0, 0, 0, 0};
    for (int s = 0; s < 5; s++)
      if (used[s] && !(s == 2 && !is_adam(o) && mom == MOMENTUM_FIRST)) x[s] = (float)nrt_ref_load_f64(slot(row, NRT_FOREACH_OPTIM_PARAM + s) + i * (int64_t)es, o->dt);
    if (is_adam(o))
      adam_body(&x[0], &x[1], &x[2], &x[3], &x[4], 1, &ak, adam_decay(o), used[4], store_grad);
    else
      sgd_body(&x[0], &x[1], &x[2], 1, &sk, o->weight_decay != 0, mom, o->flags & NRT_FOREACH_OPTIM_NESTEROV,
               store_grad);
    for (int s = 0; s < 5; s++)
      if (used[s] && (s != 1 || store_grad))
        nrt_ref_store_f64(slot(row, NRT_FOREACH_OPTIM_PARAM + s) + i * (int64_t)es, o->dt, x[s]);
  }
}

nrt_status nrt_fe_optim_validate(const nrt_launch *l) {
  const char *name = nrt_op_name(l->op);
  bool adam = (int)l->op == NRT_OP_FOREACH_ADAM;
  unsigned flags = (unsigned)l->params[0];
  unsigned known = NRT_FOREACH_OPTIM_MAXIMIZE | NRT_FOREACH_OPTIM_LR_TENSOR | NRT_FOREACH_OPTIM_GRAD_SCALE |
                   NRT_FOREACH_OPTIM_FOUND_INF |
                   (adam ? NRT_FOREACH_OPTIM_ADAMW | NRT_FOREACH_OPTIM_AMSGRAD
                         : NRT_FOREACH_OPTIM_NESTEROV | NRT_FOREACH_OPTIM_FIRST_STEP);
  if (l->params[0] < 0 || (flags & ~known))
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: flags p0 = %lld has bits this op does not take", name,
                           (long long)l->params[0]);
  nrt_dtype dt = l->compute_dtype, step_dt = (nrt_dtype)l->params[1];
  if (dt != NRT_FLOAT32 && dt != NRT_BFLOAT16 && dt != NRT_FLOAT16)
    return nrt_kernel_fail(NRT_ERROR_UNSUPPORTED, "%s: not supported for %s", name, nrt_dtype_name(dt));
  if (adam && ((unsigned)step_dt >= NRT_DTYPE_COUNT || nrt_dtype_is_complex(step_dt)))
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: p1 (the step dtype) must be a real dtype", name);
  const unsigned inputs[3] = {NRT_FOREACH_OPTIM_LR_TENSOR, NRT_FOREACH_OPTIM_GRAD_SCALE, NRT_FOREACH_OPTIM_FOUND_INF};
  const char *input_name[3] = {"the learning rate", "grad_scale", "found_inf"};
  int want = 0;
  for (int i = 0; i < 3; i++) want += (flags & inputs[i]) != 0;
  if (l->ninputs != want)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: the flags name %d input tensors, the launch has %d", name,
                           want, l->ninputs);
  for (int i = 0, in = 1; i < 3; i++) {
    if (!(flags & inputs[i])) continue;
    const nrt_operand *op = &l->operands[in++];
    bool ok = op->data && (i == 0 ? (unsigned)op->dtype < NRT_DTYPE_COUNT && !nrt_dtype_is_complex(op->dtype)
                                  : op->dtype == NRT_FLOAT32);
    if (!ok)
      return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: %s must be a one-element %s tensor", name,
                             input_name[i], i == 0 ? "real" : "FLOAT32");
  }
  fe_optim o = {.op = (int)l->op, .flags = flags, .momentum = adam ? 0 : l->scalars[2].f};
  bool used[5];
  used_slots(&o, used);
  static const char *slot_name[6] = {"param", "grad", "state0", "state1", "state2", "step"};
  for (int64_t r = 0; r < l->sizes[0]; r++) {
    const int64_t *row = (const int64_t *)l->operands[0].data + r * NRT_FOREACH_OPTIM_ROW;
    if (row[NRT_FOREACH_OPTIM_NUMEL] < 0)
      return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: row %lld has %lld elements", name, (long long)r,
                             (long long)row[NRT_FOREACH_OPTIM_NUMEL]);
    if (row[NRT_FOREACH_OPTIM_NUMEL] == 0) continue;
    for (int s = 0; s < 6; s++) {
      bool wanted = s < 5 ? used[s] : adam;
      if (wanted && !row[NRT_FOREACH_OPTIM_PARAM + s])
        return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: row %lld has a NULL %s pointer", name, (long long)r,
                               slot_name[s]);
    }
  }
  return NRT_SUCCESS;
}
