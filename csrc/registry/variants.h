// One op, three schemas: ATen has a functional, an in-place and an out=
// overload of most ops, which differ only in where the result goes. A glue
// file writes the op once as an "into" function
//
//   Tensor abs_into(Tensor out, const Tensor &self, Args... args);
//
// that writes into `out` when it is defined (out= or in-place: `out` is
// `self`) and allocates the result otherwise, and registers all overloads
// from it:
//
//   NEURON_VARIANTS(m, abs_into, "abs", "abs_", "abs.out");
//
// (nullptr for an overload the op does not have). Each overload is its own
// counted native kernel, exactly as if registered with NEURON_IMPL.
//
// An into function may also return a fresh tensor instead of writing `out`
// (ops composed of other native ops): the out= overload then resizes `out`
// with ATen's rules and copies the result in, the in-place one copies it
// into `self`.
//
// Ops with two outputs take two: `std::tuple<Tensor, Tensor> into(Tensor
// out0, Tensor out1, Args...)`; their out= overload takes both outputs
// last, as ATen's schemas do (no in-place overload).
#pragma once

#include <tuple>
#include <type_traits>

#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>

#include "registry/registry.h"

namespace torch_neuronx {

// A structured op's out= (when given) must already have the result's dtype,
// as ATen's generated out= wrappers check before the kernel runs.
inline void check_out_dtype(const at::Tensor &out, c10::ScalarType want) {
  TORCH_CHECK(!out.defined() || out.scalar_type() == want, "Expected out tensor to have dtype ",
              c10::scalarTypeToTypeMeta(want), ", but got ", out.dtype(), " instead");
}

namespace variants {

using at::Tensor;

// Puts an into function's result where the caller asked for it.
inline Tensor &store_out(Tensor &out, const Tensor &result) {
  if (!result.is_same(out)) {
    at::native::resize_output(out, result.sizes());
    out.copy_(result);
  }
  return out;
}
inline Tensor &store_self(Tensor &self, const Tensor &result) {
  if (!result.is_same(self)) self.copy_(result);
  return self;
}

template <auto into, typename Sig = decltype(into)>
struct Variants;

template <auto into, typename... A>
struct Variants<into, Tensor (*)(Tensor, A...)> {
  static Tensor functional(A... args) { return into(Tensor(), args...); }
  static Tensor &out(A... args, Tensor &out) { return store_out(out, into(out, args...)); }
  static constexpr bool kHasSelf = false;
};

// In-place needs a tensor `self` first; this partial specialisation adds
// it (more specialised, so chosen whenever it matches).
template <auto into, typename... A>
struct Variants<into, Tensor (*)(Tensor, const Tensor &, A...)> {
  static Tensor functional(const Tensor &self, A... args) { return into(Tensor(), self, args...); }
  static Tensor &out(const Tensor &self, A... args, Tensor &out) { return store_out(out, into(out, self, args...)); }
  static Tensor &inplace(Tensor &self, A... args) { return store_self(self, into(self, self, args...)); }
  static constexpr bool kHasSelf = true;
};

template <auto into, typename... A>
struct Variants<into, std::tuple<Tensor, Tensor> (*)(Tensor, Tensor, A...)> {
  static std::tuple<Tensor, Tensor> functional(A... args) { return into(Tensor(), Tensor(), args...); }
  static std::tuple<Tensor &, Tensor &> out(A... args, Tensor &out0, Tensor &out1) {
    auto [r0, r1] = into(out0, out1, args...);
    store_out(out0, r0);
    store_out(out1, r1);
    return std::forward_as_tuple(out0, out1);
  }
  static constexpr bool kHasSelf = false;
};

// The out= overload of an op whose kernel returns a fresh result (`Tensor
// fn(Args...)`, or a pair): computed, then stored as ATen's out= wrappers
// store it (each out must already have its result's dtype; it is resized).
inline Tensor &store_checked(Tensor &out, const Tensor &result) {
  check_out_dtype(out, result.scalar_type());
  return store_out(out, result);
}

template <auto fn, typename Sig = decltype(fn)>
struct OutOf;

template <auto fn, typename... A>
struct OutOf<fn, Tensor (*)(A...)> {
  static Tensor &out(A... args, Tensor &out) { return store_checked(out, fn(args...)); }
};

template <auto fn, typename... A>
struct OutOf<fn, std::tuple<Tensor, Tensor> (*)(A...)> {
  static std::tuple<Tensor &, Tensor &> out(A... args, Tensor &out0, Tensor &out1) {
    auto [r0, r1] = fn(args...);
    store_checked(out0, r0);
    store_checked(out1, r1);
    return std::forward_as_tuple(out0, out1);
  }
};

template <auto fn, typename... A>
struct OutOf<fn, std::tuple<Tensor, Tensor, Tensor> (*)(A...)> {
  static std::tuple<Tensor &, Tensor &, Tensor &> out(A... args, Tensor &out0, Tensor &out1, Tensor &out2) {
    auto [r0, r1, r2] = fn(args...);
    store_checked(out0, r0);
    store_checked(out1, r1);
    store_checked(out2, r2);
    return std::forward_as_tuple(out0, out1, out2);
  }
};

template <auto fn, typename... A>
struct OutOf<fn, std::tuple<Tensor, Tensor, Tensor, Tensor> (*)(A...)> {
  static std::tuple<Tensor &, Tensor &, Tensor &, Tensor &> out(A... args, Tensor &out0, Tensor &out1, Tensor &out2,
                                                                Tensor &out3) {
    auto [r0, r1, r2, r3] = fn(args...);
    store_checked(out0, r0);
    store_checked(out1, r1);
    store_checked(out2, r2);
    store_checked(out3, r3);
    return std::forward_as_tuple(out0, out1, out2, out3);
  }
};

}  // namespace variants

// Registers the out= overload `out` of a kernel `fn` that returns a fresh
// result (its functional overload is registered with NEURON_IMPL).
template <auto fn>
void register_out_of(torch::Library &m, const char *out) {
  register_impl<&variants::OutOf<fn>::out>(m, out);
}

#define NEURON_OUT_OF(m, fn, out) ::torch_neuronx::register_out_of<&(fn)>((m), (out))

// Registers the functional, in-place and out= overloads derived from
// `into`; a nullptr name skips that overload.
template <auto into>
void register_variants(torch::Library &m, const char *functional, const char *inplace, const char *out) {
  using V = variants::Variants<into>;
  if (functional) register_impl<&V::functional>(m, functional);
  if constexpr (V::kHasSelf) {
    if (inplace) register_impl<&V::inplace>(m, inplace);
  } else {
    TORCH_INTERNAL_ASSERT(!inplace, inplace, ": an in-place overload needs a tensor first argument");
  }
  if (out) register_impl<&V::out>(m, out);
}

#define NEURON_VARIANTS(m, into, functional, inplace, out) \
  ::torch_neuronx::register_variants<&(into)>((m), (functional), (inplace), (out))

}  // namespace torch_neuronx
