// torch.optim's fused=True steps of Adam, AdamW and SGD: _fused_adam_,
// _fused_adamw_, _fused_sgd_ (lr as a double and as a tensor), as one
// FOREACH_ADAM / FOREACH_SGD launch per (device, dtype) group of the
// parameters (nrt/ops/foreach.h): each element of each tensor read and
// written once, ATen's fused CPU arithmetic in float32. The launch reads
// the step counts, a device learning rate, grad_scale and found_inf when it
// runs, so a step never synchronises with the host; found_inf = 1 skips it
// (torch.amp.GradScaler's skipped step; its own ops are in optim.cpp).
//
// A parameter the launch cannot take (float64, tensors laid out unlike
// their parameter, step counts off the device, a graph capture recording
// the device: a table holds pointers a capture cannot resolve) takes the
// chain of per-tensor device ops instead: grad_scale divides the
// gradients, found_inf restores what the chain changed.
#include <ATen/ops/empty.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/where.h>
#include <c10/core/DeviceGuard.h>

#include <cstring>
#include <optional>
#include <vector>

#include "launch/launch.h"
#include "nrt/ops/foreach.h"
#include "registry/variants.h"

namespace torch_neuronx {
namespace {

using at::Tensor;
using at::TensorList;

// Restores `t` from `saved` where found_inf is set (skipped step).
void keep_if_inf(const Tensor &t, const Tensor &saved, const Tensor &inf) {
  t.copy_(at::where(inf.ne(0), saved, t));
}

// ---- the per-tensor chains (what the one launch cannot take) ---------------------------

void adam_chain(TensorList params, TensorList grads, TensorList exp_avgs, TensorList exp_avg_sqs,
                TensorList max_exp_avg_sqs, TensorList steps, const Tensor &lr, double beta1, double beta2,
                double weight_decay, double eps, bool amsgrad, bool maximize, const std::optional<Tensor> &grad_scale,
                const std::optional<Tensor> &found_inf, bool adamw) {
  size_t n = params.size();
  TORCH_CHECK(grads.size() == n && exp_avgs.size() == n && exp_avg_sqs.size() == n && steps.size() == n,
              "_fused_adam_: all tensor lists must have the same length");
  TORCH_CHECK(!amsgrad || max_exp_avg_sqs.size() == n, "_fused_adam_: max_exp_avg_sqs must match params");
  bool has_inf = found_inf && found_inf->defined();
  for (size_t i = 0; i < n; ++i) {
    const Tensor &p = params[i];
    c10::DeviceGuard guard(p.device());
    Tensor saved_p, saved_m, saved_v, saved_vmax;
    if (has_inf) {
      saved_p = p.clone();
      saved_m = exp_avgs[i].clone();
      saved_v = exp_avg_sqs[i].clone();
      if (amsgrad) saved_vmax = max_exp_avg_sqs[i].clone();
    }
    Tensor g = grads[i].to(at::kFloat);
    if (grad_scale && grad_scale->defined()) g = g.div(*grad_scale);
    if (maximize) g = g.neg();
    Tensor pf = p.to(at::kFloat);
    if (weight_decay != 0) {
      if (adamw) pf.mul_(lr.mul(-weight_decay).add(1));
      else g = g.add(pf, weight_decay);
    }
    const Tensor &m = exp_avgs[i], &v = exp_avg_sqs[i];
    m.lerp_(g.to(m.scalar_type()), 1 - beta1);
    v.mul_(beta2).addcmul_(g.to(v.scalar_type()), g.to(v.scalar_type()), 1 - beta2);
    Tensor step = steps[i].to(at::kFloat);
    Tensor bc1 = at::pow(beta1, step).neg().add(1);
    Tensor bc2_sqrt = at::pow(beta2, step).neg().add(1).sqrt();
    Tensor vv = v;
    if (amsgrad) {
      max_exp_avg_sqs[i].copy_(at::maximum(max_exp_avg_sqs[i], v));
      vv = max_exp_avg_sqs[i];
    }
    Tensor denom = vv.to(at::kFloat).sqrt().div(bc2_sqrt).add(eps);
    Tensor step_size = lr.div(bc1);
    pf.sub_(m.to(at::kFloat).div(denom).mul(step_size));
    p.copy_(pf);
    if (has_inf) {
      keep_if_inf(p, saved_p, *found_inf);
      keep_if_inf(m, saved_m, *found_inf);
      keep_if_inf(v, saved_v, *found_inf);
      if (amsgrad) keep_if_inf(max_exp_avg_sqs[i], saved_vmax, *found_inf);
    }
  }
}

void sgd_chain(TensorList params, TensorList grads, TensorList bufs, double weight_decay, double momentum,
               const Tensor &lr, double dampening, bool nesterov, bool maximize, bool is_first_step,
               const std::optional<Tensor> &grad_scale, const std::optional<Tensor> &found_inf) {
  bool has_inf = found_inf && found_inf->defined();
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor &p = params[i];
    c10::DeviceGuard guard(p.device());
    Tensor saved_p, saved_b;
    if (has_inf) {
      saved_p = p.clone();
      if (momentum != 0) saved_b = bufs[i].clone();
    }
    Tensor g = grads[i];
    if (grad_scale && grad_scale->defined()) g = g.div(*grad_scale);
    if (maximize) g = g.neg();
    if (weight_decay != 0) g = g.add(p, weight_decay);
    if (momentum != 0) {
      const Tensor &b = bufs[i];
      if (is_first_step) b.copy_(g);
      else b.mul_(momentum).add_(g, 1 - dampening);
      g = nesterov ? g.add(b, momentum) : b;
    }
    p.sub_(g.mul(lr));
    if (has_inf) {
      keep_if_inf(p, saved_p, *found_inf);
      if (momentum != 0) keep_if_inf(bufs[i], saved_b, *found_inf);
    }
  }
}

// ---- the one-launch steps ---------------------------------------------------------

using Index = std::vector<size_t>;

bool float_dtype(at::ScalarType t) { return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf; }

// Laid out like `ref` (same_layout) and of its dtype: one row of the
// launch addresses every tensor of a parameter with the same offsets.
bool alike(const Tensor &t, const Tensor &ref) {
  return same_layout(t, ref) && t.scalar_type() == ref.scalar_type();
}

bool real_dtype(at::ScalarType t) { return !at::isComplexType(t) && t != at::kBool && t != at::ScalarType::Undefined; }

int64_t pointer_bits(const Tensor &t) { return static_cast<int64_t>(reinterpret_cast<intptr_t>(t.const_data_ptr())); }

// One fused step as the runtime sees it. lists: param, grad, state0..2 in
// table order (an empty list: the slot is unused); lr: a device tensor, or
// undefined with the value in scalars[0].
struct Step {
  nrt_op op;
  std::vector<TensorList> lists;
  TensorList steps;  // ADAM
  int64_t flags = 0;  // the op's options; the inputs' flags follow from lr, grad_scale, found_inf
  double scalars[4] = {0, 0, 0, 0};
  double eps = 0;
  Tensor lr;
  std::optional<Tensor> grad_scale, found_inf;
};

// A one-element tensor on `d`, in dtype `t` (copied there if it is not).
Tensor on_device(const Tensor &x, c10::Device d, std::optional<at::ScalarType> t = std::nullopt) {
  return x.to(d, t ? *t : x.scalar_type());
}

bool takes(const Step &s, size_t i, std::vector<int8_t> &available) {
  const Tensor &p = s.lists[0][i];
  if (!p.defined() || p.device().type() != kNeuron || !float_dtype(p.scalar_type()) || !alike(p, p)) return false;
  for (size_t k = 1; k < s.lists.size(); ++k)
    if (!s.lists[k].empty() && !alike(s.lists[k][i], p)) return false;
  if (!s.steps.empty()) {
    const Tensor &st = s.steps[i];
    if (!st.defined() || st.device() != p.device() || st.numel() != 1 || !real_dtype(st.scalar_type())) return false;
  }
  size_t dev = static_cast<size_t>(p.device().index());
  if (available.size() <= dev) available.resize(dev + 1, -1);
  if (available[dev] < 0) available[dev] = nrt_foreach_available(current_nrt_stream(p.device().index())) ? 1 : 0;
  return available[dev] == 1;
}

// Launches the indices `idx` (one device, one dtype, one step dtype).
void launch_group(const Step &s, const Index &idx) {
  std::vector<int64_t> table;
  table.reserve(idx.size() * NRT_FOREACH_OPTIM_ROW);
  for (size_t i : idx) {
    int64_t n = s.lists[0][i].numel();
    if (n == 0) continue;
    int64_t row[NRT_FOREACH_OPTIM_ROW] = {n, 0, 0, 0, 0, 0, 0};
    for (size_t k = 0; k < s.lists.size(); ++k)
      if (!s.lists[k].empty()) row[NRT_FOREACH_OPTIM_PARAM + k] = pointer_bits(s.lists[k][i]);
    if (!s.steps.empty()) row[NRT_FOREACH_OPTIM_STEP] = pointer_bits(s.steps[i]);
    table.insert(table.end(), row, row + NRT_FOREACH_OPTIM_ROW);
  }
  int64_t rows = static_cast<int64_t>(table.size() / NRT_FOREACH_OPTIM_ROW);
  if (rows == 0) return;
  const Tensor &p = s.lists[0][idx[0]];
  c10::Device dev = p.device();
  c10::DeviceGuard guard(dev);
  nrt_launch d = new_launch(s.op, {rows});
  d.noutputs = 1;
  d.operands[0].data = table.data();
  d.operands[0].dtype = NRT_INT64;
  d.compute_dtype = to_nrt_dtype(p.scalar_type());
  d.params[0] = s.flags | (s.lr.defined() ? NRT_FOREACH_OPTIM_LR_TENSOR : 0) |
                (s.grad_scale ? NRT_FOREACH_OPTIM_GRAD_SCALE : 0) | (s.found_inf ? NRT_FOREACH_OPTIM_FOUND_INF : 0);
  d.params[1] = s.steps.empty() ? NRT_FLOAT32 : to_nrt_dtype(s.steps[idx[0]].scalar_type());
  for (int k = 0; k < 4; ++k) d.scalars[k].f = s.scalars[k];
  std::memcpy(&d.aux[0], &s.eps, sizeof s.eps);
  // The inputs in the flags' order, on the group's device (kept alive until
  // the launch is queued; the stream orders their reuse after it).
  std::vector<Tensor> inputs;
  if (s.lr.defined()) inputs.push_back(on_device(s.lr, dev));
  if (s.grad_scale) inputs.push_back(on_device(*s.grad_scale, dev, at::kFloat));
  if (s.found_inf) inputs.push_back(on_device(*s.found_inf, dev, at::kFloat));
  for (const Tensor &t : inputs) {
    nrt_operand &o = d.operands[1 + d.ninputs++];
    o.data = const_cast<void *>(t.const_data_ptr());
    o.dtype = to_nrt_dtype(t.scalar_type());
  }
  check(nrt_foreach_launch(current_nrt_stream(dev.index()), &d), nrt_op_name(s.op));
}

// Runs the indices the launch takes; returns the others.
Index run_step(const Step &s) {
  struct Group {
    c10::Device device;
    at::ScalarType dtype, step;
    Index idx;
  };
  std::vector<Group> groups;
  std::vector<int8_t> available;
  Index slow;
  for (size_t i = 0; i < s.lists[0].size(); ++i) {
    if (!takes(s, i, available)) {
      slow.push_back(i);
      continue;
    }
    const Tensor &p = s.lists[0][i];
    at::ScalarType st = s.steps.empty() ? at::kFloat : s.steps[i].scalar_type();
    Group *g = nullptr;
    for (Group &h : groups)
      if (h.device == p.device() && h.dtype == p.scalar_type() && h.step == st) g = &h;
    if (!g) {
      groups.push_back(Group{p.device(), p.scalar_type(), st, {}});
      g = &groups.back();
    }
    g->idx.push_back(i);
  }
  for (const Group &g : groups) launch_group(s, g.idx);
  return slow;
}

std::vector<Tensor> pick(TensorList list, const Index &idx) {
  std::vector<Tensor> out;
  if (list.empty()) return out;
  out.reserve(idx.size());
  for (size_t i : idx) out.push_back(list[i]);
  return out;
}

// grad_scale and found_inf as ATen's fused kernels read them: float32.
void check_amp_tensors(const std::optional<Tensor> &grad_scale, const std::optional<Tensor> &found_inf) {
  for (const auto *t : {&grad_scale, &found_inf})
    if (*t && (*t)->defined())
      TORCH_CHECK((*t)->scalar_type() == at::kFloat && (*t)->numel() == 1,
                  t == &grad_scale ? "grad_scale" : "found_inf", " must be a one-element float32 tensor, got ",
                  (*t)->scalar_type(), " with ", (*t)->numel(), " elements");
}

std::optional<Tensor> present(const std::optional<Tensor> &t) {
  return t && t->defined() ? t : std::nullopt;
}

// lr: a double, or a tensor (a CPU one is read here, as ATen does).
struct Lr {
  double value = 0;
  Tensor tensor;  // undefined: value
  // A float32 one-element tensor on like's device, for the per-tensor chains.
  Tensor as_tensor(const Tensor &like) const {
    return tensor.defined() ? tensor.to(like.device(), at::kFloat)
                            : at::empty({}, like.options().dtype(at::kFloat)).fill_(value);
  }
};
Lr lr_of(double lr) { return Lr{lr, Tensor()}; }
Lr lr_of(const Tensor &lr) {
  TORCH_CHECK(lr.numel() == 1, "lr must be a one-element tensor, got ", lr.numel(), " elements");
  if (lr.device().is_cpu()) return Lr{lr.item<double>(), Tensor()};
  return Lr{0, lr};
}

void adam_step(TensorList params, TensorList grads, TensorList exp_avgs, TensorList exp_avg_sqs,
               TensorList max_exp_avg_sqs, TensorList steps, const Lr &lr, double beta1, double beta2,
               double weight_decay, double eps, bool amsgrad, bool maximize, const std::optional<Tensor> &grad_scale_,
               const std::optional<Tensor> &found_inf_, bool adamw) {
  size_t n = params.size();
  TORCH_CHECK(grads.size() == n && exp_avgs.size() == n && exp_avg_sqs.size() == n && steps.size() == n,
              "_fused_adam_: all tensor lists must have the same length");
  TORCH_CHECK(amsgrad ? max_exp_avg_sqs.size() == n : max_exp_avg_sqs.empty(),
              "_fused_adam_: max_exp_avg_sqs must match params with amsgrad and be empty without");
  std::optional<Tensor> grad_scale = present(grad_scale_), found_inf = present(found_inf_);
  check_amp_tensors(grad_scale, found_inf);
  Step s{NRT_OP(FOREACH_ADAM), {params, grads, exp_avgs, exp_avg_sqs}, steps};
  if (amsgrad) s.lists.push_back(max_exp_avg_sqs);
  s.flags = (adamw ? NRT_FOREACH_OPTIM_ADAMW : 0) | (amsgrad ? NRT_FOREACH_OPTIM_AMSGRAD : 0) |
            (maximize ? NRT_FOREACH_OPTIM_MAXIMIZE : 0);
  double sc[4] = {lr.value, beta1, beta2, weight_decay};
  std::memcpy(s.scalars, sc, sizeof sc);
  s.eps = eps;
  s.lr = lr.tensor;
  s.grad_scale = grad_scale;
  s.found_inf = found_inf;
  Index slow = run_step(s);
  if (slow.empty()) return;
  std::vector<Tensor> p = pick(params, slow);
  Tensor lr_t = lr.as_tensor(p[0]);
  adam_chain(p, pick(grads, slow), pick(exp_avgs, slow), pick(exp_avg_sqs, slow), pick(max_exp_avg_sqs, slow),
             pick(steps, slow), lr_t, beta1, beta2, weight_decay, eps, amsgrad, maximize, grad_scale, found_inf, adamw);
}

void sgd_step(TensorList params, TensorList grads, TensorList bufs, double weight_decay, double momentum,
              const Lr &lr, double dampening, bool nesterov, bool maximize, bool is_first_step,
              const std::optional<Tensor> &grad_scale_, const std::optional<Tensor> &found_inf_) {
  size_t n = params.size();
  TORCH_CHECK(grads.size() == n, "_fused_sgd_: params and grads must have the same length");
  TORCH_CHECK(momentum == 0 || bufs.size() == n, "_fused_sgd_: momentum_buffer_list must match params");
  std::optional<Tensor> grad_scale = present(grad_scale_), found_inf = present(found_inf_);
  check_amp_tensors(grad_scale, found_inf);
  Step s{NRT_OP(FOREACH_SGD), {params, grads}};
  if (momentum != 0) s.lists.push_back(bufs);
  s.flags = (nesterov ? NRT_FOREACH_OPTIM_NESTEROV : 0) | (is_first_step ? NRT_FOREACH_OPTIM_FIRST_STEP : 0) |
            (maximize ? NRT_FOREACH_OPTIM_MAXIMIZE : 0);
  double sc[4] = {lr.value, weight_decay, momentum, dampening};
  std::memcpy(s.scalars, sc, sizeof sc);
  s.lr = lr.tensor;
  s.grad_scale = grad_scale;
  s.found_inf = found_inf;
  Index slow = run_step(s);
  if (slow.empty()) return;
  std::vector<Tensor> p = pick(params, slow);
  Tensor lr_t = lr.as_tensor(p[0]);
  sgd_chain(p, pick(grads, slow), pick(bufs, slow), weight_decay, momentum, lr_t, dampening, nesterov, maximize,
            is_first_step, grad_scale, found_inf);
}

#define DEFINE_FUSED_ADAM(name, ADAMW)                                                                       \
  void name(TensorList self, TensorList grads, TensorList exp_avgs, TensorList exp_avg_sqs,                 \
            TensorList max_exp_avg_sqs, TensorList steps, double lr, double beta1, double beta2,             \
            double weight_decay, double eps, bool amsgrad, bool maximize,                                   \
            const std::optional<Tensor> &grad_scale, const std::optional<Tensor> &found_inf) {              \
    if (self.empty()) return;                                                                                \
    adam_step(self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr_of(lr), beta1, beta2,           \
              weight_decay, eps, amsgrad, maximize, grad_scale, found_inf, ADAMW);                           \
  }                                                                                                          \
  void name##_tlr(TensorList self, TensorList grads, TensorList exp_avgs, TensorList exp_avg_sqs,           \
                  TensorList max_exp_avg_sqs, TensorList steps, const Tensor &lr, double beta1, double beta2, \
                  double weight_decay, double eps, bool amsgrad, bool maximize,                             \
                  const std::optional<Tensor> &grad_scale, const std::optional<Tensor> &found_inf) {        \
    if (self.empty()) return;                                                                                \
    adam_step(self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr_of(lr), beta1, beta2,           \
              weight_decay, eps, amsgrad, maximize, grad_scale, found_inf, ADAMW);                           \
  }
DEFINE_FUSED_ADAM(fused_adam, false)
DEFINE_FUSED_ADAM(fused_adamw, true)
#undef DEFINE_FUSED_ADAM

void fused_sgd(TensorList self, TensorList grads, TensorList bufs, double weight_decay, double momentum, double lr,
               double dampening, bool nesterov, bool maximize, bool is_first_step,
               const std::optional<Tensor> &grad_scale, const std::optional<Tensor> &found_inf) {
  if (self.empty()) return;
  sgd_step(self, grads, bufs, weight_decay, momentum, lr_of(lr), dampening, nesterov, maximize, is_first_step,
           grad_scale, found_inf);
}
void fused_sgd_tlr(TensorList self, TensorList grads, TensorList bufs, double weight_decay, double momentum,
                   const Tensor &lr, double dampening, bool nesterov, bool maximize, bool is_first_step,
                   const std::optional<Tensor> &grad_scale, const std::optional<Tensor> &found_inf) {
  if (self.empty()) return;
  sgd_step(self, grads, bufs, weight_decay, momentum, lr_of(lr), dampening, nesterov, maximize, is_first_step,
           grad_scale, found_inf);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  NEURON_IMPL(m, "_fused_adam_", fused_adam);
  NEURON_IMPL(m, "_fused_adam_.tensor_lr", fused_adam_tlr);
  NEURON_IMPL(m, "_fused_adamw_", fused_adamw);
  NEURON_IMPL(m, "_fused_adamw_.tensor_lr", fused_adamw_tlr);
  NEURON_IMPL(m, "_fused_sgd_", fused_sgd);
  NEURON_IMPL(m, "_fused_sgd_.tensor_lr", fused_sgd_tlr);
}

}  // namespace torch_neuronx
