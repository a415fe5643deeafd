// torch._foreach_* (family FOREACH, nrt/ops/foreach.h): one launch for a
// whole tensor list instead of ATen's per-tensor loop.
//
// ATen gives PrivateUse1 only the slow path of these ops (a loop of
// single-tensor ops, one launch each), and torch.optim picks foreach for
// neuron by default, so an optimizer step over many small parameters paid
// hundreds of launches (and a FILL per Python scalar). Here the indices
// the one-launch path can take are grouped by (device, dtype) and each
// group is one FOREACH launch whose table lists the group's tensors; the
// rest go through ATen's own slow kernel on the sub-list of those indices,
// i.e. the native single-tensor ops, never the CPU. An index is taken when
// ATen's CUDA fast route would take it (ForeachUtils.h): every tensor of
// it a dense, strided neuron tensor on one device, of one dtype (float32,
// bfloat16 or float16; ZERO and COPY also take other real dtypes), the same
// sizes and strides across the lists, no promotion by the scalar, and for
// in-place ops no partial overlap between the output and an input. While a
// graph capture records the device, everything takes the slow path (a
// table holds pointers the capture cannot resolve), so compiled graphs see
// the single-tensor launches.
//
// The kernels compute what the single-tensor kernels compute (tests
// compare the two bit for bit): a Python scalar or ScalarList entry as
// float32, not rounded to the list's dtype (launch_iter's rule); a 0-dim
// tensor operand read on the device (a CPU one on the host), ATen's
// Tensor overloads; addcmul's packed `scalars` tensor read on the host as
// ATen does. The .out overloads and the functional _foreach_zero /
// _foreach_copy stay ATen's composites over these.
#include <ATen/MemoryOverlap.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/BinaryOps.h>
#include <ATen/ops/_foreach_abs_native.h>
#include <ATen/ops/_foreach_add_native.h>
#include <ATen/ops/_foreach_addcdiv_native.h>
#include <ATen/ops/_foreach_addcmul_native.h>
#include <ATen/ops/_foreach_clamp_max_native.h>
#include <ATen/ops/_foreach_clamp_min_native.h>
#include <ATen/ops/_foreach_copy_native.h>
#include <ATen/ops/_foreach_div_native.h>
#include <ATen/ops/_foreach_exp_native.h>
#include <ATen/ops/_foreach_lerp_native.h>
#include <ATen/ops/_foreach_mul_native.h>
#include <ATen/ops/_foreach_neg_native.h>
#include <ATen/ops/_foreach_norm_native.h>
#include <ATen/ops/_foreach_pow_native.h>
#include <ATen/ops/_foreach_reciprocal_native.h>
#include <ATen/ops/_foreach_sign_native.h>
#include <ATen/ops/_foreach_sqrt_native.h>
#include <ATen/ops/_foreach_sub_native.h>
#include <ATen/ops/_foreach_zero_native.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/core/DeviceGuard.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <vector>

#include "launch/launch.h"
#include "launch/operand.h"
#include "launch/scalar.h"
#include "nrt/ops/foreach.h"
#include "registry/registry.h"

namespace torch_neuronx {
namespace {

using at::Scalar;
using at::ScalarType;
using at::Tensor;
using at::TensorList;
using ScalarList = at::ArrayRef<Scalar>;
using Index = std::vector<size_t>;

// ---- ATen's list checks (ForeachUtils.h), with its messages --------------------------

void check_lists(TensorList a) { TORCH_CHECK(!a.empty(), "Tensor list must have at least one tensor."); }
void check_lists(TensorList a, TensorList b) {
  check_lists(a);
  check_lists(b);
  TORCH_CHECK(a.size() == b.size(), "Tensor lists must have the same number of tensors, got ", a.size(), " and ",
              b.size());
}
void check_lists(TensorList a, TensorList b, TensorList c) {
  check_lists(a, b);
  check_lists(a, c);
}
void check_scalars(TensorList a, ScalarList s) {
  TORCH_CHECK(a.size() == s.size(), "Tensor list must have same number of elements as scalar list.");
}
void check_scalar_tensor(const Tensor &t) {
  TORCH_CHECK(t.dim() == 0 && t.numel() == 1, "scalar tensor expected to be 0 dim but it has ", t.dim(),
              " dimensions and ", t.numel(), " elements.");
}

// addcmul/addcdiv's packed `scalars` tensor, read on the host as ATen's
// convert_tensor_to_scalar_list reads it.
std::vector<Scalar> packed_scalars(const Tensor &s, size_t n) {
  TORCH_CHECK(s.device() == c10::kCPU, "Expected scalars to be on CPU, got ", s.device(), " instead.");
  TORCH_CHECK(s.is_contiguous(), "Expected scalars to be contiguous.");
  TORCH_CHECK(s.dim() == 1, "Expected packed scalar Tensor to be of dimension 1. Got ", s.dim(), " instead.");
  TORCH_CHECK(static_cast<int64_t>(n) == s.size(0), "Expected length of scalars to match input of length ", n,
              " but got ", s.size(0), " instead.");
  std::vector<Scalar> out;
  out.reserve(n);
  for (int64_t i = 0; i < s.size(0); ++i) out.push_back(s[i].item());
  return out;
}

// ---- the one-launch path -------------------------------------------------------------

// One foreach call as the runtime sees it: the op, its input lists in table
// order (in0, in1, in2), where its scalar operand comes from, s0.
struct Spec {
  nrt_op op;
  std::vector<TensorList> in;
  int64_t mode = NRT_FOREACH_MODE_LIST;
  double value = 0.0;                 // SCALAR
  ScalarList row;                     // ROW
  const Tensor *tensor = nullptr;     // TENSOR: a 0-dim tensor on the lists' device
  double s0 = 1.0;                    // alpha, the norm's order
  bool any_real = false;              // ZERO / COPY: any real dtype (bits moved, not computed)
  bool fast = true;                   // false: the whole list takes the slow path (a complex scalar)
  int table_inputs = -1;              // lists of `in` the table names (-1: all)
};

bool float_dtype(ScalarType t) { return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf; }

// The real dtypes the device stores (ZERO and COPY move their bits).
bool real_dtype(ScalarType t) {
  switch (t) {
    case at::kBool: case at::kByte: case at::kChar: case at::kShort: case at::kInt: case at::kLong:
    case at::kUInt16: case at::kUInt32: case at::kUInt64: case at::kHalf: case at::kBFloat16: case at::kFloat:
    case at::kDouble:
      return true;
    default:
      return false;
  }
}

bool no_partial_overlap(const Tensor &out, const Tensor &in) {
  auto s = at::get_overlap_status(out, in);
  return s == at::MemOverlapStatus::No || s == at::MemOverlapStatus::Full;
}

// Whether no graph capture records `device`, asked once per device and call.
struct Availability {
  std::vector<int8_t> known;  // -1 unknown, 0 no, 1 yes
  bool operator()(c10::Device d) {
    size_t i = static_cast<size_t>(d.index());
    if (known.size() <= i) known.resize(i + 1, -1);
    if (known[i] < 0) known[i] = nrt_foreach_available(current_nrt_stream(d.index())) ? 1 : 0;
    return known[i] == 1;
  }
};

// Whether the one-launch path takes index i. out: the output tensor when
// it already exists (in-place ops, copy_), else undefined.
bool takes(const Spec &s, size_t i, const Tensor &out, Availability &available) {
  const Tensor &x = s.in[0][i];
  const Tensor &ref = out.defined() ? out : x;
  if (!x.defined() || x.device().type() != kNeuron) return false;
  ScalarType dt = ref.scalar_type();
  if (!(float_dtype(dt) || (s.any_real && real_dtype(dt)))) return false;
  if (out.defined() && !same_layout(out, x)) return false;
  for (size_t k = 0; k < s.in.size(); ++k) {
    const Tensor &t = s.in[k][i];
    if (!same_layout(t, x)) return false;
    bool copy_source = s.op == NRT_OP(FOREACH_COPY) && k == 0;
    if (t.scalar_type() != dt && !(copy_source && float_dtype(dt) && float_dtype(t.scalar_type()))) return false;
    if (out.defined() && !no_partial_overlap(out, t)) return false;
  }
  if (s.tensor && s.tensor->device() != x.device()) return false;
  return available(x.device());
}

int64_t pointer_bits(const Tensor &t) { return static_cast<int64_t>(reinterpret_cast<intptr_t>(t.const_data_ptr())); }

int64_t double_bits(double v) {
  int64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

// The scalar operand of a float16/bfloat16 list as the CPU's per-tensor op
// computes with it: add, sub, clamp_min/max and pow (either side) round it to the dtype
// (their kernels read it in the iterator's common dtype or as scalar_t), mul,
// div, lerp and addcmul/addcdiv keep it in float32 (launch/iter_launch.cpp's
// reduced_float_scalar has the single-tensor side).
double list_scalar(nrt_op op, ScalarType dt, double v) {
  bool rounds = op == NRT_OP(FOREACH_ADD) || op == NRT_OP(FOREACH_SUB) || op == NRT_OP(FOREACH_MAXIMUM) ||
                op == NRT_OP(FOREACH_MINIMUM) || op == NRT_OP(FOREACH_POW) || op == NRT_OP(FOREACH_RPOW);
  if (!rounds) return v;
  if (dt == at::kBFloat16) return static_cast<float>(c10::BFloat16(static_cast<float>(v)));
  if (dt == at::kHalf) return static_cast<float>(c10::Half(static_cast<float>(v)));
  return v;
}

// Launches the indices `idx` (one device, one dtype) with outputs outs[i].
void launch_group(const Spec &s, const Index &idx, const std::vector<Tensor> &outs) {
  bool norm = s.op == NRT_OP(FOREACH_NORM);
  const ScalarType in_dt = s.in[0][idx[0]].scalar_type();
  std::vector<int64_t> table;
  table.reserve(idx.size() * NRT_FOREACH_ROW);
  for (size_t i : idx) {
    int64_t n = s.in[0][i].numel();
    if (n == 0 && !norm) continue;
    int64_t row[NRT_FOREACH_ROW] = {n, pointer_bits(outs[i]), 0, 0, 0, 0};
    size_t nk = s.table_inputs < 0 ? s.in.size() : static_cast<size_t>(s.table_inputs);
    if (n > 0)
      for (size_t k = 0; k < nk; ++k) row[NRT_FOREACH_IN0 + k] = pointer_bits(s.in[k][i]);
    if (s.mode == NRT_FOREACH_MODE_ROW)
      row[NRT_FOREACH_SCALAR] = double_bits(list_scalar(s.op, in_dt, s.row[i].toDouble()));
    table.insert(table.end(), row, row + NRT_FOREACH_ROW);
  }
  int64_t rows = static_cast<int64_t>(table.size() / NRT_FOREACH_ROW);
  if (rows == 0) return;
  const Tensor &x = s.in[0][idx[0]];
  nrt_launch d = new_launch(s.op, {rows});
  d.noutputs = 1;
  d.operands[0].data = table.data();
  d.operands[0].dtype = NRT_INT64;
  ScalarType dt = s.op == NRT_OP(FOREACH_COPY) ? outs[idx[0]].scalar_type() : x.scalar_type();
  d.compute_dtype = to_nrt_dtype(dt);
  d.params[0] = s.mode;
  d.params[1] = to_nrt_dtype(norm ? outs[idx[0]].scalar_type() : x.scalar_type());
  d.scalars[0].f = s.s0;
  d.scalars[1].f = list_scalar(s.op, in_dt, s.value);
  if (s.mode == NRT_FOREACH_MODE_TENSOR) {
    d.ninputs = 1;
    d.operands[1].data = const_cast<void *>(s.tensor->const_data_ptr());
    d.operands[1].dtype = to_nrt_dtype(s.tensor->scalar_type());
  }
  c10::DeviceGuard guard(x.device());
  check(nrt_foreach_launch(current_nrt_stream(x.device().index()), &d), nrt_op_name(s.op));
}

struct Group {
  c10::Device device;
  ScalarType out, in0;
  Index idx;
};

// Splits the indices: the groups the one-launch path takes (the rest in
// `slow`). outs: the existing outputs (in-place) or empty.
std::vector<Group> plan(const Spec &s, TensorList outs, Index &slow) {
  std::vector<Group> groups;
  Availability available;
  size_t n = s.in[0].size();
  for (size_t i = 0; i < n; ++i) {
    Tensor out = outs.empty() ? Tensor() : outs[i];
    if (!takes(s, i, out, available)) {
      slow.push_back(i);
      continue;
    }
    const Tensor &x = s.in[0][i];
    ScalarType o = out.defined() ? out.scalar_type() : x.scalar_type();
    Group *g = nullptr;
    for (Group &h : groups)
      if (h.device == x.device() && h.out == o && h.in0 == x.scalar_type()) g = &h;
    if (!g) {
      groups.push_back(Group{x.device(), o, x.scalar_type(), {}});
      g = &groups.back();
    }
    g->idx.push_back(i);
  }
  return groups;
}

template <typename T>
std::vector<T> pick(at::ArrayRef<T> list, const Index &idx) {
  std::vector<T> out;
  out.reserve(idx.size());
  for (size_t i : idx) out.push_back(list[i]);
  return out;
}

// The slow path of the indices the one-launch path left: ATen's own kernel
// on their sub-lists (`pick` them), i.e. the native single-tensor ops.
using SlowFn = std::function<std::vector<Tensor>(const Index &)>;
using SlowInplaceFn = std::function<void(const Index &)>;

std::vector<Tensor> run_functional(const Spec &s, const SlowFn &slow_fn) {
  Index slow;
  std::vector<Group> groups = plan(s, {}, slow);
  std::vector<Tensor> outs(s.in[0].size());
  for (const Group &g : groups) {
    for (size_t i : g.idx) outs[i] = at::empty_like(s.in[0][i]);
    launch_group(s, g.idx, outs);
  }
  if (!slow.empty()) {
    std::vector<Tensor> r = slow_fn(slow);
    for (size_t k = 0; k < slow.size(); ++k) outs[slow[k]] = std::move(r[k]);
  }
  return outs;
}

void run_inplace(const Spec &s, TensorList self, const SlowInplaceFn &slow_fn) {
  Index slow;
  std::vector<Group> groups = plan(s, self, slow);
  std::vector<Tensor> outs(self.begin(), self.end());
  for (const Group &g : groups) launch_group(s, g.idx, outs);
  if (!slow.empty()) slow_fn(slow);
}

// ---- the scalar operand -----------------------------------------------------------------

Spec with_scalar(nrt_op op, std::vector<TensorList> in, const Scalar &v) {
  Spec s{op, std::move(in)};
  s.mode = NRT_FOREACH_MODE_SCALAR;
  s.value = v.toDouble();
  return s;
}

Spec with_row(nrt_op op, std::vector<TensorList> in, ScalarList v) {
  Spec s{op, std::move(in)};
  s.mode = NRT_FOREACH_MODE_ROW;
  s.row = v;
  return s;
}

bool any_complex(ScalarList v) {
  for (const Scalar &x : v)
    if (x.isComplex()) return true;
  return false;
}

// A complex scalar would promote the list: the slow path's business.
Spec no_fast(Spec s) {
  s.fast = false;
  return s;
}

Index all_of(size_t n) {
  Index all(n);
  for (size_t i = 0; i < n; ++i) all[i] = i;
  return all;
}

// ---- binary ops: Scalar, List, ScalarList, Tensor -------------------------------------------

namespace native = at::native;

Spec binary_scalar(nrt_op op, TensorList self, const Scalar &v) {
  check_lists(self);
  return v.isComplex() ? no_fast(Spec{op, {self}}) : with_scalar(op, {self}, v);
}

Spec binary_row(nrt_op op, TensorList self, ScalarList v) {
  check_lists(self);
  check_scalars(self, v);
  Spec s = with_row(op, {self}, v);
  return any_complex(v) ? no_fast(s) : s;
}

// The Tensor overloads: a 0-dim tensor; a CPU one is read here, a device one
// by the kernel.
Spec binary_tensor(nrt_op op, TensorList self, const Tensor &other, double alpha) {
  check_lists(self);
  check_scalar_tensor(other);
  if (other.is_complex()) return no_fast(Spec{op, {self}});
  if (other.device().is_cpu()) {
    Spec s = with_scalar(op, {self}, other.item());
    s.s0 = alpha;
    return s;
  }
  Spec s{op, {self}};
  s.mode = NRT_FOREACH_MODE_TENSOR;
  s.tensor = &other;
  s.s0 = alpha;
  return s;
}

// Runs a spec, or the whole list the slow way when the spec says no_fast.
std::vector<Tensor> functional(const Spec &s, TensorList self, const SlowFn &slow) {
  return s.fast ? run_functional(s, slow) : slow(all_of(self.size()));
}
void inplace(const Spec &s, TensorList self, const SlowInplaceFn &slow) {
  if (s.fast) run_inplace(s, self, slow);
  else slow(all_of(self.size()));
}

void check_alpha(TensorList self, const Scalar &alpha) {
  for (const Tensor &t : self)
    if (t.defined()) {
      at::native::alpha_check(t.scalar_type(), alpha);
      break;
    }
}

// alpha as the single-tensor add converts it (launch/scalar.h: to the
// tensors' dtype, with the CPU's overflow check), so the fused kernel and
// the per-tensor path compute with the same value; a complex or mixed-dtype
// list keeps the value as it is (its tensors convert it one by one).
double list_alpha(TensorList self, const Scalar &alpha) {
  const Tensor *first = nullptr;
  for (const Tensor &t : self) {
    if (!t.defined()) continue;
    if (!first) first = &t;
    if (t.scalar_type() != first->scalar_type()) return alpha.toDouble();
  }
  if (!first || first->is_complex()) return alpha.toDouble();
  return converted_scalar(alpha, first->scalar_type()).toDouble();
}

// The overloads of one binary op, each as name_<overload>(_); `slow` is
// the stem of ATen's slow kernels. ALPHA: the op takes alpha.
#define DEFINE_BINARY_SCALAR(name, OP, slow)                                                                  \
  std::vector<Tensor> name##_scalar(TensorList self, const Scalar &v) {                                       \
    return functional(binary_scalar(NRT_OP(OP), self, v), self,                                               \
                      [&](const Index &i) { return native::slow##_scalar_kernel_slow(pick(self, i), v); });   \
  }                                                                                                           \
  void name##_scalar_(TensorList self, const Scalar &v) {                                                     \
    inplace(binary_scalar(NRT_OP(OP), self, v), self,                                                         \
            [&](const Index &i) { native::slow##_scalar_kernel_slow_(pick(self, i), v); });                   \
  }                                                                                                           \
  std::vector<Tensor> name##_scalarlist(TensorList self, ScalarList v) {                                      \
    return functional(binary_row(NRT_OP(OP), self, v), self, [&](const Index &i) {                            \
      return native::slow##_scalarlist_kernel_slow(pick(self, i), pick(v, i));                                \
    });                                                                                                       \
  }                                                                                                           \
  void name##_scalarlist_(TensorList self, ScalarList v) {                                                    \
    inplace(binary_row(NRT_OP(OP), self, v), self,                                                            \
            [&](const Index &i) { native::slow##_scalarlist_kernel_slow_(pick(self, i), pick(v, i)); });      \
  }

#define DEFINE_BINARY_LIST(name, OP, slow)                                                                    \
  std::vector<Tensor> name##_list(TensorList self, TensorList other) {                                        \
    check_lists(self, other);                                                                                 \
    return functional(Spec{NRT_OP(OP), {self, other}}, self, [&](const Index &i) {                            \
      return native::slow##_list_kernel_slow(pick(self, i), pick(other, i));                                  \
    });                                                                                                       \
  }                                                                                                           \
  void name##_list_(TensorList self, TensorList other) {                                                      \
    check_lists(self, other);                                                                                 \
    inplace(Spec{NRT_OP(OP), {self, other}}, self,                                                            \
            [&](const Index &i) { native::slow##_list_kernel_slow_(pick(self, i), pick(other, i)); });        \
  }

#define DEFINE_BINARY_LIST_ALPHA(name, OP, slow)                                                              \
  Spec name##_list_spec(TensorList self, TensorList other, const Scalar &alpha) {                             \
    check_lists(self, other);                                                                                 \
    check_alpha(self, alpha);                                                                                 \
    Spec s{NRT_OP(OP), {self, other}};                                                                        \
    s.s0 = list_alpha(self, alpha);                                                                           \
    return s;                                                                                                 \
  }                                                                                                           \
  std::vector<Tensor> name##_list(TensorList self, TensorList other, const Scalar &alpha) {                   \
    return functional(name##_list_spec(self, other, alpha), self, [&](const Index &i) {                       \
      return native::slow##_list_kernel_slow(pick(self, i), pick(other, i), alpha);                           \
    });                                                                                                       \
  }                                                                                                           \
  void name##_list_(TensorList self, TensorList other, const Scalar &alpha) {                                 \
    inplace(name##_list_spec(self, other, alpha), self, [&](const Index &i) {                                 \
      native::slow##_list_kernel_slow_(pick(self, i), pick(other, i), alpha);                                 \
    });                                                                                                       \
  }

#define DEFINE_BINARY_TENSOR(name, OP, slow)                                                                  \
  std::vector<Tensor> name##_tensor(TensorList self, const Tensor &other) {                                   \
    return functional(binary_tensor(NRT_OP(OP), self, other, 1.0), self,                                      \
                      [&](const Index &i) { return native::slow##_tensor_kernel_slow(pick(self, i), other); }); \
  }                                                                                                           \
  void name##_tensor_(TensorList self, const Tensor &other) {                                                 \
    inplace(binary_tensor(NRT_OP(OP), self, other, 1.0), self,                                                \
            [&](const Index &i) { native::slow##_tensor_kernel_slow_(pick(self, i), other); });               \
  }

#define DEFINE_BINARY_TENSOR_ALPHA(name, OP, slow)                                                            \
  Spec name##_tensor_spec(TensorList self, const Tensor &other, const Scalar &alpha) {                        \
    check_lists(self);                                                                                        \
    check_alpha(self, alpha);                                                                                 \
    return binary_tensor(NRT_OP(OP), self, other, list_alpha(self, alpha));                                   \
  }                                                                                                           \
  std::vector<Tensor> name##_tensor(TensorList self, const Tensor &other, const Scalar &alpha) {              \
    return functional(name##_tensor_spec(self, other, alpha), self, [&](const Index &i) {                     \
      return native::slow##_tensor_kernel_slow(pick(self, i), other, alpha);                                  \
    });                                                                                                       \
  }                                                                                                           \
  void name##_tensor_(TensorList self, const Tensor &other, const Scalar &alpha) {                            \
    inplace(name##_tensor_spec(self, other, alpha), self,                                                     \
            [&](const Index &i) { native::slow##_tensor_kernel_slow_(pick(self, i), other, alpha); });        \
  }

DEFINE_BINARY_SCALAR(add, FOREACH_ADD, foreach_tensor_add)
DEFINE_BINARY_LIST_ALPHA(add, FOREACH_ADD, foreach_tensor_add)
DEFINE_BINARY_TENSOR_ALPHA(add, FOREACH_ADD, foreach_tensor_add)
DEFINE_BINARY_SCALAR(sub, FOREACH_SUB, foreach_tensor_sub)
DEFINE_BINARY_LIST_ALPHA(sub, FOREACH_SUB, foreach_tensor_sub)
DEFINE_BINARY_SCALAR(mul, FOREACH_MUL, foreach_tensor_mul)
DEFINE_BINARY_LIST(mul, FOREACH_MUL, foreach_tensor_mul)
DEFINE_BINARY_TENSOR(mul, FOREACH_MUL, foreach_tensor_mul)
DEFINE_BINARY_SCALAR(div, FOREACH_DIV, foreach_tensor_div)
DEFINE_BINARY_LIST(div, FOREACH_DIV, foreach_tensor_div)
DEFINE_BINARY_TENSOR(div, FOREACH_DIV, foreach_tensor_div)
// maximum/minimum are ATen's clamp_min/clamp_max for every overload.
DEFINE_BINARY_SCALAR(clamp_min, FOREACH_MAXIMUM, foreach_tensor_clamp_min)
DEFINE_BINARY_LIST(clamp_min, FOREACH_MAXIMUM, foreach_tensor_clamp_min)
DEFINE_BINARY_SCALAR(clamp_max, FOREACH_MINIMUM, foreach_tensor_clamp_max)
DEFINE_BINARY_LIST(clamp_max, FOREACH_MINIMUM, foreach_tensor_clamp_max)
DEFINE_BINARY_SCALAR(pow, FOREACH_POW, foreach_tensor_pow)
DEFINE_BINARY_LIST(pow, FOREACH_POW, foreach_tensor_pow)

// pow(Scalar base, Tensor[] exponent).
std::vector<Tensor> rpow_scalar(const Scalar &base, TensorList exponent) {
  check_lists(exponent);
  Spec s = base.isComplex() ? no_fast(Spec{NRT_OP(FOREACH_RPOW), {exponent}})
                            : with_scalar(NRT_OP(FOREACH_RPOW), {exponent}, base);
  return functional(s, exponent, [&](const Index &i) {
    return native::foreach_scalar_pow_list_kernel_slow(base, pick(exponent, i));
  });
}

// ---- ternary ops ------------------------------------------------------------------------------

#define DEFINE_ADDC(name, OP)                                                                                 \
  Spec name##_spec(TensorList self, TensorList t1, TensorList t2) {                                           \
    check_lists(self, t1, t2);                                                                                \
    return Spec{NRT_OP(OP), {self, t1, t2}};                                                                  \
  }                                                                                                           \
  Spec name##_scalar_spec(TensorList self, TensorList t1, TensorList t2, const Scalar &v) {                   \
    Spec s = name##_spec(self, t1, t2);                                                                       \
    if (v.isComplex()) return no_fast(s);                                                                     \
    s.mode = NRT_FOREACH_MODE_SCALAR;                                                                         \
    s.value = v.toDouble();                                                                                   \
    return s;                                                                                                 \
  }                                                                                                           \
  Spec name##_row_spec(TensorList self, TensorList t1, TensorList t2, ScalarList v) {                         \
    Spec s = name##_spec(self, t1, t2);                                                                       \
    check_scalars(self, v);                                                                                   \
    s.mode = NRT_FOREACH_MODE_ROW;                                                                            \
    s.row = v;                                                                                                \
    return any_complex(v) ? no_fast(s) : s;                                                                   \
  }                                                                                                           \
  std::vector<Tensor> name##_scalar(TensorList self, TensorList t1, TensorList t2, const Scalar &v) {         \
    return functional(name##_scalar_spec(self, t1, t2, v), self, [&](const Index &i) {                        \
      return native::foreach_tensor_##name##_scalar_slow(pick(self, i), pick(t1, i), pick(t2, i), v);         \
    });                                                                                                       \
  }                                                                                                           \
  void name##_scalar_(TensorList self, TensorList t1, TensorList t2, const Scalar &v) {                       \
    inplace(name##_scalar_spec(self, t1, t2, v), self, [&](const Index &i) {                                  \
      native::foreach_tensor_##name##_scalar_slow_(pick(self, i), pick(t1, i), pick(t2, i), v);               \
    });                                                                                                       \
  }                                                                                                           \
  std::vector<Tensor> name##_scalarlist(TensorList self, TensorList t1, TensorList t2, ScalarList v) {        \
    return functional(name##_row_spec(self, t1, t2, v), self, [&](const Index &i) {                           \
      return native::foreach_tensor_##name##_scalarlist_slow(pick(self, i), pick(t1, i), pick(t2, i), pick(v, i)); \
    });                                                                                                       \
  }                                                                                                           \
  void name##_scalarlist_(TensorList self, TensorList t1, TensorList t2, ScalarList v) {                      \
    inplace(name##_row_spec(self, t1, t2, v), self, [&](const Index &i) {                                     \
      native::foreach_tensor_##name##_scalarlist_slow_(pick(self, i), pick(t1, i), pick(t2, i), pick(v, i));  \
    });                                                                                                       \
  }                                                                                                           \
  std::vector<Tensor> name##_tensor(TensorList self, TensorList t1, TensorList t2, const Tensor &v) {         \
    check_lists(self, t1, t2);                                                                                \
    std::vector<Scalar> row = packed_scalars(v, self.size());                                                 \
    return name##_scalarlist(self, t1, t2, row);                                                              \
  }                                                                                                           \
  void name##_tensor_(TensorList self, TensorList t1, TensorList t2, const Tensor &v) {                       \
    check_lists(self, t1, t2);                                                                                \
    std::vector<Scalar> row = packed_scalars(v, self.size());                                                 \
    name##_scalarlist_(self, t1, t2, row);                                                                    \
  }
DEFINE_ADDC(addcmul, FOREACH_ADDCMUL)
DEFINE_ADDC(addcdiv, FOREACH_ADDCDIV)

Spec lerp_list_spec(TensorList self, TensorList end, TensorList weight) {
  check_lists(self, end, weight);
  return Spec{NRT_OP(FOREACH_LERP), {self, end, weight}};
}
Spec lerp_scalar_spec(TensorList self, TensorList end, const Scalar &w) {
  check_lists(self, end);
  return w.isComplex() ? no_fast(Spec{NRT_OP(FOREACH_LERP), {self, end}})
                       : with_scalar(NRT_OP(FOREACH_LERP), {self, end}, w);
}
Spec lerp_row_spec(TensorList self, TensorList end, ScalarList w) {
  check_lists(self, end);
  check_scalars(self, w);
  Spec s = with_row(NRT_OP(FOREACH_LERP), {self, end}, w);
  return any_complex(w) ? no_fast(s) : s;
}
std::vector<Tensor> lerp_list(TensorList self, TensorList end, TensorList weight) {
  return functional(lerp_list_spec(self, end, weight), self, [&](const Index &i) {
    return native::foreach_tensor_ternary_lerp_slow(pick(self, i), pick(end, i), pick(weight, i));
  });
}
void lerp_list_(TensorList self, TensorList end, TensorList weight) {
  inplace(lerp_list_spec(self, end, weight), self, [&](const Index &i) {
    native::foreach_tensor_ternary_lerp_slow_(pick(self, i), pick(end, i), pick(weight, i));
  });
}
std::vector<Tensor> lerp_scalar(TensorList self, TensorList end, const Scalar &w) {
  return functional(lerp_scalar_spec(self, end, w), self, [&](const Index &i) {
    return native::foreach_tensor_lerp_list_kernel_slow(pick(self, i), pick(end, i), w);
  });
}
void lerp_scalar_(TensorList self, TensorList end, const Scalar &w) {
  inplace(lerp_scalar_spec(self, end, w), self,
          [&](const Index &i) { native::foreach_tensor_lerp_list_kernel_slow_(pick(self, i), pick(end, i), w); });
}
std::vector<Tensor> lerp_scalarlist(TensorList self, TensorList end, ScalarList w) {
  return functional(lerp_row_spec(self, end, w), self, [&](const Index &i) {
    return native::foreach_tensor_lerp_scalarlist_kernel_slow(pick(self, i), pick(end, i), pick(w, i));
  });
}
void lerp_scalarlist_(TensorList self, TensorList end, ScalarList w) {
  inplace(lerp_row_spec(self, end, w), self, [&](const Index &i) {
    native::foreach_tensor_lerp_scalarlist_kernel_slow_(pick(self, i), pick(end, i), pick(w, i));
  });
}

// ---- unary ops, zero_, copy_ ----------------------------------------------------------------------

#define DEFINE_UNARY(name, OP)                                                                                \
  std::vector<Tensor> name(TensorList self) {                                                                 \
    check_lists(self);                                                                                        \
    return functional(Spec{NRT_OP(OP), {self}}, self,                                                         \
                      [&](const Index &i) { return native::foreach_tensor_##name##_slow(pick(self, i)); });   \
  }                                                                                                           \
  void name##_(TensorList self) {                                                                             \
    check_lists(self);                                                                                        \
    inplace(Spec{NRT_OP(OP), {self}}, self,                                                                   \
            [&](const Index &i) { native::foreach_tensor_##name##_slow_(pick(self, i)); });                   \
  }
DEFINE_UNARY(sqrt, FOREACH_SQRT)
DEFINE_UNARY(neg, FOREACH_NEG)
DEFINE_UNARY(reciprocal, FOREACH_RECIPROCAL)
DEFINE_UNARY(abs, FOREACH_ABS)
DEFINE_UNARY(sign, FOREACH_SIGN)
DEFINE_UNARY(exp, FOREACH_EXP)

// ZERO reads nothing: the list is in[0] only for the checks (device,
// dtype, layout) and the row sizes, not in the table.
void zero_(TensorList self) {
  check_lists(self);
  Spec s{NRT_OP(FOREACH_ZERO), {self}};
  s.table_inputs = 0;
  s.any_real = true;
  run_inplace(s, self, [&](const Index &i) { native::foreach_tensor_zero_slow_(pick(self, i)); });
}

void copy_(TensorList self, TensorList src, bool non_blocking) {
  check_lists(self, src);
  Spec s{NRT_OP(FOREACH_COPY), {src}};
  s.any_real = true;
  inplace(s, self, [&](const Index &i) {
    native::foreach_tensor_copy_list_kernel_slow_(pick(self, i), pick(src, i), non_blocking);
  });
}

// ---- norm -------------------------------------------------------------------------------------------

std::vector<Tensor> norm(TensorList self, const Scalar &ord, std::optional<ScalarType> dtype) {
  check_lists(self);
  auto slow_fn = [&](const Index &i) { return native::foreach_tensor_norm_slow(pick(self, i), ord, dtype); };
  if (ord.isComplex()) return slow_fn(all_of(self.size()));
  double p = ord.toDouble();
  Spec s{NRT_OP(FOREACH_NORM), {self}};
  s.s0 = p;
  Index slow;
  std::vector<Group> groups = plan(s, {}, slow);
  std::vector<Tensor> outs(self.size());
  for (Group &g : groups) {
    ScalarType out_dt = dtype.value_or(g.in0);
    // ATen refuses narrowing dtypes and the norms without an identity of
    // empty tensors: its slow path raises those errors. The CPU's
    // _foreach_norm is a loop of linalg.vector_norm, which sums a finite
    // nonzero order's terms in float into float32 and 16-bit results
    // (reduce.cpp, kernels/reduce/vnorm.c); the fused kernel sums in double,
    // so it keeps float64 results and the orders 0 and +-inf (a count and a
    // comparison, exact either way).
    bool float_sum = p != 0.0 && std::isfinite(p) && (out_dt == at::kFloat || at::isReducedFloatingType(out_dt));
    bool fast = float_dtype(out_dt) && at::promoteTypes(g.in0, out_dt) == out_dt && !float_sum;
    Index take;
    for (size_t i : g.idx) {
      bool empty_without_identity = self[i].numel() == 0 && (p < 0 || std::isinf(p));
      if (fast && !empty_without_identity) take.push_back(i);
      else slow.push_back(i);
    }
    if (take.empty()) continue;
    Tensor buf = at::empty({static_cast<int64_t>(take.size())}, self[take[0]].options().dtype(out_dt));
    for (size_t k = 0; k < take.size(); ++k) outs[take[k]] = buf.select(0, static_cast<int64_t>(k));
    launch_group(s, take, outs);
  }
  if (!slow.empty()) {
    std::sort(slow.begin(), slow.end());
    std::vector<Tensor> r = slow_fn(slow);
    for (size_t k = 0; k < slow.size(); ++k) outs[slow[k]] = std::move(r[k]);
  }
  return outs;
}


}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
#define REG_BINARY_SCALAR(op, name)                                                                           \
  NEURON_IMPL(m, "_foreach_" #op ".Scalar", name##_scalar);                                                   \
  NEURON_IMPL(m, "_foreach_" #op "_.Scalar", name##_scalar_);                                                 \
  NEURON_IMPL(m, "_foreach_" #op ".ScalarList", name##_scalarlist);                                           \
  NEURON_IMPL(m, "_foreach_" #op "_.ScalarList", name##_scalarlist_);
#define REG_LIST(op, name)                                                                                    \
  NEURON_IMPL(m, "_foreach_" #op ".List", name##_list);                                                       \
  NEURON_IMPL(m, "_foreach_" #op "_.List", name##_list_);
#define REG_TENSOR(op, name)                                                                                  \
  NEURON_IMPL(m, "_foreach_" #op ".Tensor", name##_tensor);                                                   \
  NEURON_IMPL(m, "_foreach_" #op "_.Tensor", name##_tensor_);
  REG_BINARY_SCALAR(add, add) REG_LIST(add, add) REG_TENSOR(add, add)
  REG_BINARY_SCALAR(sub, sub) REG_LIST(sub, sub)
  REG_BINARY_SCALAR(mul, mul) REG_LIST(mul, mul) REG_TENSOR(mul, mul)
  REG_BINARY_SCALAR(div, div) REG_LIST(div, div) REG_TENSOR(div, div)
  REG_BINARY_SCALAR(maximum, clamp_min) REG_LIST(maximum, clamp_min)
  REG_BINARY_SCALAR(minimum, clamp_max) REG_LIST(minimum, clamp_max)
  REG_BINARY_SCALAR(clamp_min, clamp_min) REG_LIST(clamp_min, clamp_min)
  REG_BINARY_SCALAR(clamp_max, clamp_max) REG_LIST(clamp_max, clamp_max)
  REG_BINARY_SCALAR(pow, pow) REG_LIST(pow, pow)
  NEURON_IMPL(m, "_foreach_pow.ScalarAndTensor", rpow_scalar);
  REG_BINARY_SCALAR(addcmul, addcmul) REG_TENSOR(addcmul, addcmul)
  REG_BINARY_SCALAR(addcdiv, addcdiv) REG_TENSOR(addcdiv, addcdiv)
  REG_LIST(lerp, lerp)
  NEURON_IMPL(m, "_foreach_lerp.Scalar", lerp_scalar);
  NEURON_IMPL(m, "_foreach_lerp_.Scalar", lerp_scalar_);
  NEURON_IMPL(m, "_foreach_lerp.ScalarList", lerp_scalarlist);
  NEURON_IMPL(m, "_foreach_lerp_.ScalarList", lerp_scalarlist_);
#define REG_UNARY(op) NEURON_IMPL(m, "_foreach_" #op, op); NEURON_IMPL(m, "_foreach_" #op "_", op##_);
  REG_UNARY(sqrt) REG_UNARY(neg) REG_UNARY(reciprocal) REG_UNARY(abs) REG_UNARY(sign) REG_UNARY(exp)
  NEURON_IMPL(m, "_foreach_zero_", zero_);
  NEURON_IMPL(m, "_foreach_copy_", copy_);
  NEURON_IMPL(m, "_foreach_norm.Scalar", norm);
#undef REG_BINARY_SCALAR
#undef REG_LIST
#undef REG_TENSOR
#undef REG_UNARY
}

}  // namespace torch_neuronx
