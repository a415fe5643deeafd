// Native distribution samplers and their reparameterised gradients (family
// DISTRIBUTIONS): _standard_gamma, _sample_dirichlet, poisson, binomial,
// _standard_gamma_grad, _dirichlet_grad, which torch.distributions' Gamma,
// Beta, Dirichlet, Chi2, StudentT, Poisson and Binomial sample through.
// Samplers draw from the device's Philox generator (or a neuron
// torch.Generator) and advance its offset by the element count, so
// torch.neuron.manual_seed makes them reproducible and the CPU's stream is
// never touched. Argument checks, dtypes and output shapes are the CPU's.
#include <cfloat>
#include <cmath>

#include <ATen/ExpandUtils.h>
#include <ATen/TensorIterator.h>
#include <ATen/core/Generator.h>
#include <ATen/ops/_softmax.h>
#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>

#include "launch/launch.h"
#include "nrt/ops/distributions.h"
#include "registry/variants.h"
#include "runtime/generator.h"

namespace torch_neuronx {
namespace {

using at::Tensor;

// The CPU kernels' dtype lists and names, for the same NotImplementedError.
void check_float_or_double(const Tensor &t, const char *cpu_name) {
  at::ScalarType st = t.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(st == at::kFloat || st == at::kDouble, "\"", cpu_name, "\" not implemented for '",
                              c10::toString(st), "'");
}

// One sampler launch over `out` (contiguous, so elements are numbered in
// its row-major order) and the parameter tensors, with (seed, offset) from
// the generator, the offset advanced past out.numel() elements: each
// element e = offset + index owns the Philox counters {e, tag, round}.
void launch_sampler(const Tensor &out, std::initializer_list<Tensor> params, nrt_op op,
                    const std::optional<at::Generator> &gen) {
  if (gen.has_value() && gen->defined())
    TORCH_CHECK(gen->device().type() == kNeuron, "Expected a '", c10::DeviceType(kNeuron),
                "' device type for generator but found '", gen->device().type(), "'");
  if (out.numel() == 0) return;
  c10::DeviceGuard guard(out.device());
  auto cfg = at::TensorIteratorConfig();
  cfg.add_output(out).resize_outputs(false);
  for (const Tensor &p : params) cfg.add_const_input(p);
  auto iter = cfg.build();
  uint64_t seed = 0, offset = 0;
  philox_next(gen.has_value() ? &*gen : nullptr, out.device().index(), static_cast<uint64_t>(out.numel()), &seed,
              &offset);
  launch_iter(iter, op, {}, {static_cast<int64_t>(seed), static_cast<int64_t>(offset)});
}

Tensor standard_gamma_fn(const Tensor &alpha, std::optional<at::Generator> gen) {
  check_float_or_double(alpha, "gamma_cpu");
  Tensor out = at::empty(alpha.sizes(), alpha.options().memory_format(at::MemoryFormat::Contiguous));
  launch_sampler(out, {alpha}, NRT_OP(STANDARD_GAMMA), gen);
  return out;
}

// Gamma samples normalised along the last dim. The CPU clamps every gamma
// sample to float64's smallest normal and divides by the row's sum, so a
// row of zero (or NaN, or negative) concentrations comes out uniform and a
// dominated entry as the smallest normal. Here the kernel gives each
// sample's log with that floor (no underflow, whatever alpha), the
// normalisation is a softmax of the logs, and the result is clamped to the
// CPU's [smallest normal, largest value below 1]. float64 data is sampled
// at float32 precision (the device's rule), so its bounds are float32's.
Tensor sample_dirichlet_fn(const Tensor &alpha, std::optional<at::Generator> gen) {
  check_float_or_double(alpha, "dirichlet");
  c10::DeviceGuard guard(alpha.device());
  if (alpha.scalar_type() == at::kDouble) warn_float64_once();
  Tensor a = alpha.to(at::kFloat);
  Tensor log_gamma = at::empty(alpha.sizes(), a.options().memory_format(at::MemoryFormat::Contiguous));
  launch_sampler(log_gamma, {a}, NRT_OP(STANDARD_GAMMA_LOG), gen);
  if (alpha.numel() == 0) return at::empty(alpha.sizes(), alpha.options());
  Tensor p = at::_softmax(log_gamma, -1, false);
  p.clamp_(FLT_MIN, std::nextafter(1.0f, 0.0f));
  return p.to(alpha.scalar_type());
}

Tensor poisson_fn(const Tensor &rate, std::optional<at::Generator> gen) {
  at::ScalarType st = rate.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(st), "\"poisson_cpu\" not implemented for '", c10::toString(st),
                              "'");
  // The CPU checks every rate in its kernel; one read-back here raises at
  // the op, as it does (NaN fails the comparison too).
  TORCH_CHECK(!any_flag_set(rate.ge(0).logical_not_()), "invalid Poisson rate, expected rate to be non-negative");
  Tensor out = at::empty(rate.sizes(), rate.options().memory_format(at::MemoryFormat::Contiguous));
  launch_sampler(out, {rate}, NRT_OP(POISSON), gen);
  return out;
}

Tensor binomial_fn(const Tensor &count, const Tensor &prob, std::optional<at::Generator> gen) {
  TORCH_CHECK_VALUE(at::isFloatingType(count.scalar_type()),
                    "binomial only supports floating-point dtypes for count, got: ", count.scalar_type());
  TORCH_CHECK_VALUE(at::isFloatingType(prob.scalar_type()),
                    "binomial only supports floating-point dtypes for prob, got: ", prob.scalar_type());
  // The CPU's TensorIterator: broadcast shapes, one dtype for all.
  auto shape = at::infer_size_dimvector(count.sizes(), prob.sizes());
  TORCH_CHECK(prob.scalar_type() == count.scalar_type(), "Found dtype ", prob.scalar_type(), " but expected ",
              count.scalar_type());
  check_float_or_double(count, "binomial_cpu");
  Tensor out = at::empty(shape, count.options().memory_format(at::MemoryFormat::Contiguous));
  launch_sampler(out, {count, prob}, NRT_OP(BINOMIAL), gen);
  return out;
}

// The gradients: pure math, elementwise over the broadcast inputs, one
// dtype for all (the CPU's TensorIterator checks), float32 or float64.
Tensor grad_launch(std::initializer_list<Tensor> inputs, nrt_op op, const char *cpu_name) {
  const Tensor &first = *inputs.begin();
  at::DimVector shape(first.sizes().begin(), first.sizes().end());
  for (const Tensor &t : inputs) {
    shape = at::infer_size_dimvector(shape, t.sizes());
    TORCH_CHECK(t.scalar_type() == first.scalar_type(), "Found dtype ", t.scalar_type(), " but expected ",
                first.scalar_type());
  }
  check_float_or_double(first, cpu_name);
  c10::DeviceGuard guard(first.device());
  Tensor out = at::empty(shape, first.options().memory_format(at::MemoryFormat::Contiguous));
  auto cfg = at::TensorIteratorConfig();
  cfg.add_output(out).resize_outputs(false);
  for (const Tensor &t : inputs) cfg.add_const_input(t);
  auto iter = cfg.build();
  launch_iter(iter, op);
  return out;
}

Tensor standard_gamma_grad_fn(const Tensor &self, const Tensor &output) {
  return grad_launch({self, output}, NRT_OP(STANDARD_GAMMA_GRAD), "_standard_gamma_grad_cpu");
}

Tensor dirichlet_grad_fn(const Tensor &x, const Tensor &alpha, const Tensor &total) {
  return grad_launch({x, alpha, total}, NRT_OP(DIRICHLET_GRAD), "_dirichlet_grad_cpu");
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  NEURON_IMPL(m, "_standard_gamma", standard_gamma_fn);
  NEURON_IMPL(m, "_sample_dirichlet", sample_dirichlet_fn);
  NEURON_IMPL(m, "poisson", poisson_fn);
  NEURON_IMPL(m, "binomial", binomial_fn);
  NEURON_IMPL(m, "_standard_gamma_grad", standard_gamma_grad_fn);
  NEURON_IMPL(m, "_dirichlet_grad", dirichlet_grad_fn);
}

}  // namespace torch_neuronx
