// Native RNG ops on the device's Philox generator. Each launch takes the
// generator's (seed, offset) and advances the offset past the numbers it
// used, so the same seed gives the same numbers run after run, whatever
// the thread count (the runtime derives each element's counter from its
// linear index).
#include <cmath>

#include <ATen/TensorIterator.h>
#include <ATen/core/Generator.h>
#include <ATen/ops/empty.h>
#include <ATen/ExpandUtils.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/view_as_real.h>
#include <c10/core/DeviceGuard.h>

#include "launch/launch.h"
#include "registry/variants.h"
#include "runtime/generator.h"

namespace torch_neuronx {
namespace {

using at::Tensor;

nrt_scalar fscalar(double d) { nrt_scalar v; v.f = d; return v; }

// Fills `self` (or a contiguous temporary when it is not dense) with op.
Tensor &random_fill(Tensor &self, nrt_op op, const std::optional<at::Generator> &gen,
                    std::initializer_list<nrt_scalar> scalars, int64_t p2 = 0, int64_t p3 = 0,
                    const Tensor *prob = nullptr) {
  if (self.numel() == 0) return self;
  c10::DeviceGuard guard(self.device());
  auto cfg = at::TensorIteratorConfig();
  cfg.add_output(self).resize_outputs(false).check_all_same_dtype(false);
  if (prob) cfg.add_const_input(*prob);
  auto iter = cfg.build();
  uint64_t seed = 0, offset = 0;
  // 4 draws per element covers Box-Muller pairs and 64-bit integers.
  philox_next(gen.has_value() ? &*gen : nullptr, self.device().index(), 4 * static_cast<uint64_t>(self.numel()),
              &seed, &offset);
  launch_iter(iter, op, scalars, {static_cast<int64_t>(seed), static_cast<int64_t>(offset), p2, p3});
  return self;
}

// Complex tensors sample their real view: uniform parts, and normal parts
// with half the variance each (PyTorch's definition).
Tensor &uniform_fn(Tensor &self, double from, double to, std::optional<at::Generator> gen) {
  if (self.is_complex()) {
    Tensor parts = at::view_as_real(self);
    uniform_fn(parts, from, to, gen);
    return self;
  }
  TORCH_CHECK(from <= to, "uniform_ expects to return a [from, to) range, but found from=", from, " > to=", to);
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "uniform_ is implemented for floating types only, got ",
              self.scalar_type());
  return random_fill(self, NRT_OP_UNIFORM, gen, {fscalar(from), fscalar(to)});
}

Tensor &normal_fn(Tensor &self, double mean, double std, std::optional<at::Generator> gen) {
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  if (self.is_complex()) {
    Tensor parts = at::view_as_real(self);
    normal_fn(parts, mean, std / std::sqrt(2.0), gen);
    return self;
  }
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "normal_ is implemented for floating types only, got ",
              self.scalar_type());
  return random_fill(self, NRT_OP_NORMAL, gen, {fscalar(mean), fscalar(std)});
}

Tensor &bernoulli_float(Tensor &self, double p, std::optional<at::Generator> gen) {
  TORCH_CHECK(0 <= p && p <= 1, "bernoulli_ expects p to be in [0, 1], but got p=", p);
  return random_fill(self, NRT_OP_BERNOULLI_SCALAR, gen, {fscalar(p)});
}

Tensor &bernoulli_tensor(Tensor &self, const Tensor &p, std::optional<at::Generator> gen) {
  Tensor pp = p.device() == self.device() ? p : p.to(self.device());
  // NaN fails both comparisons, as in the CPU's check.
  TORCH_CHECK(!any_flag_set(pp.ge(0).logical_and_(pp.le(1)).logical_not_()),
              "bernoulli_ expects all elements of p to be in [0, 1]");
  return random_fill(self, NRT_OP_BERNOULLI_TENSOR, gen, {}, 0, 0, &pp);
}

// random_ family: integers in [from, to); to defaults to the dtype's range
// (2^mantissa+1 for floats, as PyTorch does).
int64_t default_random_to(const Tensor &self) {
  switch (self.scalar_type()) {
    case at::kFloat: return (1LL << 24) + 1;
    case at::kDouble: return (1LL << 53) + 1;
    case at::kHalf: return (1LL << 11) + 1;
    case at::kBFloat16: return (1LL << 8) + 1;
    case at::kBool: return 2;
    case at::kByte: return 256;
    case at::kChar: return 128;
    case at::kShort: return 1LL << 15;
    case at::kInt: return 1LL << 31;
    case at::kLong: return std::numeric_limits<int64_t>::max();
    default: TORCH_CHECK(false, "random_ not supported for ", self.scalar_type());
  }
}
Tensor &random_from(Tensor &self, int64_t from, std::optional<int64_t> to, std::optional<at::Generator> gen) {
  int64_t hi = to ? *to : default_random_to(self);
  TORCH_CHECK(from < hi, "random_ expects 'from' to be less than 'to', but got from=", from, " >= to=", hi);
  return random_fill(self, NRT_OP_RANDOM_RANGE, gen, {}, from, hi - from);
}
Tensor &random_to(Tensor &self, int64_t to, std::optional<at::Generator> gen) {
  return random_from(self, 0, to, gen);
}
Tensor &random_all(Tensor &self, std::optional<at::Generator> gen) {
  return random_from(self, 0, std::nullopt, gen);
}

std::tuple<Tensor, Tensor> native_dropout_fn(const Tensor &input, double p, std::optional<bool> train) {
  c10::DeviceGuard guard(input.device());
  TORCH_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  Tensor mask = at::empty_like(input, input.options().dtype(at::kBool));
  if (!train.has_value() || *train) {
    if (p == 1) {
      mask.zero_();
      return {input.mul(mask), mask};
    }
    bernoulli_float(mask, 1 - p, std::nullopt);
    double scale = 1.0 / (1.0 - p);
    Tensor out = input.mul(mask).mul_(scale);
    return {out, mask};
  }
  mask.fill_(true);
  return {input.clone(), mask};
}

Tensor native_dropout_backward_fn(const Tensor &grad, const Tensor &mask, double scale) {
  // Out of place, as ATen: an integer gradient times the float scale
  // promotes to float.
  Tensor r = grad.mul(mask);
  return at::isFloatingType(r.scalar_type()) ? r.mul_(scale) : r.mul(scale);
}

void check_std_tensor(const Tensor &std) {
  TORCH_CHECK(!std.is_complex(), "normal expects standard deviation to be non-complex");
  TORCH_CHECK(!any_flag_set(std.lt(0)), "normal expects all elements of std >= 0.0");
}

// normal with tensor mean/std: standard normals scaled and shifted on the device.
Tensor normal_tt(const Tensor &mean, const Tensor &std, std::optional<at::Generator> gen) {
  check_std_tensor(std);
  auto shape = at::infer_size(mean.sizes(), std.sizes());
  Tensor out = at::empty(shape, mean.options().dtype(at::result_type(mean, std)));
  normal_fn(out, 0.0, 1.0, gen);
  return out.mul_(std).add_(mean);
}
Tensor normal_tf(const Tensor &mean, double std, std::optional<at::Generator> gen) {
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  Tensor out = at::empty(mean.sizes(), mean.options());
  normal_fn(out, 0.0, std, gen);
  return out.add_(mean);
}
Tensor normal_ft(double mean, const Tensor &std, std::optional<at::Generator> gen) {
  check_std_tensor(std);
  Tensor out = at::empty(std.sizes(), std.options());
  normal_fn(out, 0.0, 1.0, gen);
  return out.mul_(std).add_(mean);
}

// exponential_: inverse CDF of uniforms, -log(1 - u) / lambda.
Tensor &exponential_fn(Tensor &self, double lambd, std::optional<at::Generator> gen) {
  TORCH_CHECK(lambd > 0.0, "exponential_ expects lambda > 0.0, but found lambda=", lambd);
  uniform_fn(self, 0.0, 1.0, gen);
  return self.neg_().log1p_().mul_(-1.0 / lambd);
}

// multinomial: with replacement, inverse-CDF sampling (count of CDF entries
// below a uniform); without, exponential races (the k smallest E/p, the
// Gumbel-top-k trick), both entirely from device ops.
Tensor multinomial_fn(const Tensor &self, int64_t n, bool replacement, std::optional<at::Generator> gen) {
  TORCH_CHECK(self.dim() == 1 || self.dim() == 2, "prob_dist must be 1 or 2 dim");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "multinomial only supports floating-point dtypes for input, got: ",
              self.scalar_type());
  TORCH_CHECK(n > 0, "cannot sample n_sample <= 0 samples");
  int64_t cats = self.size(-1);
  TORCH_CHECK(replacement || n <= cats, "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  TORCH_CHECK(cats <= (int64_t(1) << 24), "number of categories cannot exceed 2^24");
  c10::DeviceGuard guard(self.device());
  Tensor p = (self.dim() == 1 ? self.unsqueeze(0) : self).to(at::kFloat);
  // The CPU's checks, in its order (max < inf also fails on NaN); one
  // read-back for both, as ATen itself reads them back on every device.
  if (p.numel() > 0) {
    Tensor bad = at::stack({p.amax().lt(INFINITY).logical_and_(p.amin().ge(0)).logical_not_(),
                            p.sum(-1).eq(0).any()})
                     .cpu();
    TORCH_CHECK(!bad[0].item<bool>(), "probability tensor contains either `inf`, `nan` or element < 0");
    TORCH_CHECK(!bad[1].item<bool>(), "invalid multinomial distribution (sum of probabilities <= 0)");
  }
  Tensor out;
  if (replacement) {
    Tensor cdf = p.cumsum(-1);
    Tensor total = cdf.narrow(-1, cats - 1, 1);
    Tensor u = at::empty({p.size(0), n}, p.options());
    uniform_fn(u, 0.0, 1.0, gen);
    u.mul_(total);
    // index = number of CDF entries <= u (clamped for rounding at the top)
    out = cdf.unsqueeze(1).le(u.unsqueeze(-1)).sum(-1).clamp_max_(cats - 1);
  } else {
    Tensor e = at::empty(p.sizes(), p.options());
    exponential_fn(e, 1.0, gen);
    Tensor keys = e.div(p);  // p == 0 gives inf: never chosen before positive-p categories
    out = std::get<1>(keys.topk(n, -1, /*largest=*/false, /*sorted=*/true));
  }
  return self.dim() == 1 ? out.squeeze(0) : out;
}

// randperm: sort random 62-bit keys (ties have probability ~n^2/2^63) and
// keep the permutation, all on the device.
Tensor &randperm_out(int64_t n, std::optional<at::Generator> gen, Tensor &out) {
  TORCH_CHECK(n >= 0, "n must be non-negative, got", n);
  c10::DeviceGuard guard(out.device());
  out.resize_({n});
  if (n == 0) return out;
  Tensor keys = at::empty({n}, out.options().dtype(at::kLong));
  random_from(keys, 0, int64_t(1) << 62, gen);
  Tensor perm = std::get<1>(keys.sort(/*stable=*/true, 0, false));
  out.copy_(perm);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  NEURON_IMPL(m, "randperm.generator_out", randperm_out);
  NEURON_IMPL(m, "normal.Tensor_Tensor", normal_tt);
  NEURON_IMPL(m, "normal.Tensor_float", normal_tf);
  NEURON_IMPL(m, "normal.float_Tensor", normal_ft);
  NEURON_IMPL(m, "exponential_", exponential_fn);
  NEURON_IMPL(m, "multinomial", multinomial_fn);
  NEURON_OUT_OF(m, multinomial_fn, "multinomial.out");
  NEURON_OUT_OF(m, normal_tt, "normal.Tensor_Tensor_out");
  NEURON_OUT_OF(m, normal_tf, "normal.Tensor_float_out");
  NEURON_OUT_OF(m, normal_ft, "normal.float_Tensor_out");
  NEURON_IMPL(m, "uniform_", uniform_fn);
  NEURON_IMPL(m, "normal_", normal_fn);
  NEURON_IMPL(m, "bernoulli_.float", bernoulli_float);
  NEURON_IMPL(m, "bernoulli_.Tensor", bernoulli_tensor);
  NEURON_IMPL(m, "random_.from", random_from);
  NEURON_IMPL(m, "random_.to", random_to);
  NEURON_IMPL(m, "random_", random_all);
  NEURON_IMPL(m, "native_dropout", native_dropout_fn);
  NEURON_IMPL(m, "native_dropout_backward", native_dropout_backward_fn);
}

}  // namespace torch_neuronx
