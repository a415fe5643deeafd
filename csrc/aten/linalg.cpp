// The LINALG family's glue: matrix decompositions and solves on the
// device: Cholesky and triangular solves, LU (factor, solve, unpack,
// inverse, det/slogdet, solve), QR (geqrf, householder_product, ormqr,
// linalg.qr), SVD, symmetric eigen, general eigen (eig, eigvals), LDL,
// matrix_exp, least squares, the old cholesky/triangular_solve API, and
// linalg.cross (composed of native elementwise ops). The LINALG kernels
// compute. Complex64/complex128 inputs run the complex kernels for
// everything but LDL, matrix_exp and lstsq (real only, as before).
//
// For ATen's structured ops the meta function runs first through
// at::meta::<op>_outf on the output tensors: it raises ATen's own errors
// and resizes (and restrides) the outputs exactly as the CPU does, so out=
// follows resize_output's rules. The other ops compute a fresh result and
// leave out= to NEURON_VARIANTS, which copies it in (their into functions'
// `out` is unnamed). NEURON_VARIANTS derives ops of one or two outputs; ops
// of three or four keep their out= overload as the implementation, which
// the functional one calls with empty outputs. Batch dimensions are
// collapsed to one for the kernels (expanded inputs are made contiguous, a
// device copy).
#include <ATen/ExpandUtils.h>
#include <ATen/TensorOperators.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/cat.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_linalg_check_errors.h>
#include <ATen/ops/_linalg_det_meta_dispatch.h>
#include <ATen/ops/_linalg_eigh_meta_dispatch.h>
#include <ATen/ops/_linalg_slogdet_meta_dispatch.h>
#include <ATen/ops/_linalg_solve_ex_meta_dispatch.h>
#include <ATen/ops/_linalg_svd.h>
#include <ATen/ops/_linalg_svd_meta_dispatch.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/eye.h>
#include <ATen/ops/linalg_cholesky_ex.h>
#include <ATen/ops/linalg_inv_ex_meta_dispatch.h>
#include <ATen/ops/linalg_ldl_factor_ex_meta_dispatch.h>
#include <ATen/ops/linalg_ldl_solve_meta_dispatch.h>
#include <ATen/ops/linalg_lu_factor_ex_meta_dispatch.h>
#include <ATen/ops/linalg_lu_meta_dispatch.h>
#include <ATen/ops/linalg_lu_solve_meta_dispatch.h>
#include <ATen/ops/linalg_qr_meta_dispatch.h>
#include <ATen/ops/linalg_solve_triangular.h>
#include <ATen/ops/lu_unpack_meta_dispatch.h>
#include <ATen/ops/triangular_solve_meta_dispatch.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>

#include "launch/launch.h"
#include "nrt/ops/linalg.h"
#include "registry/variants.h"

namespace torch_neuronx {
namespace {

using at::Tensor;
using c10::IntArrayRef;

int64_t prod(IntArrayRef s) {
  int64_t p = 1;
  for (auto v : s) p *= v;
  return p;
}

// The decompositions compute in double; half-precision inputs are refused
// as the CPU refuses them (LAPACK has no such routines).
void check_float(const Tensor &t, const char *fn) {
  TORCH_CHECK(at::isFloatingType(t.scalar_type()), fn, ": Expected a floating point tensor as input. Got ",
              t.scalar_type());
  TORCH_CHECK(t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble, fn,
              ": Low precision dtypes not supported. Got ", t.scalar_type());
}

// The ops with complex kernels (LU family, Cholesky, triangular solves,
// QR, SVD, eigh, eig) take complex64/complex128 too, computed in double
// complex; complex32 is refused as the CPU refuses it.
void check_float_or_complex(const Tensor &t, const char *fn) {
  auto st = t.scalar_type();
  TORCH_CHECK(at::isFloatingType(st) || at::isComplexType(st), fn,
              ": Expected a floating point or complex tensor as input. Got ", st);
  TORCH_CHECK(st == at::kFloat || st == at::kDouble || st == at::kComplexFloat || st == at::kComplexDouble, fn,
              ": Low precision dtypes not supported. Got ", st);
}

// Options of the real counterpart of A's dtype (singular values,
// eigenvalues of Hermitian matrices, logabsdet).
c10::TensorOptions real_options(const Tensor &A) { return A.options().dtype(c10::toRealValueType(A.scalar_type())); }

// A tensor's trailing `core` dims with its batch dims collapsed into one,
// for a kernel operand. Outputs written through a view must be viewable;
// when the batch dims do not collapse, the kernel writes a temporary that
// finish() copies back.
struct Flat {
  Tensor orig, t;
  bool temp = false;
  Flat(const Tensor &x, int core, bool output) : orig(x) {
    std::vector<int64_t> shape{prod(x.sizes().slice(0, x.dim() - core))};
    for (int i = core; i > 0; i--) shape.push_back(x.size(-i));
    if (!output) {
      t = x.reshape(shape);
      return;
    }
    auto strides = at::detail::computeStride(x.sizes(), x.strides(), shape);
    if (strides) {
      t = x.as_strided(shape, *strides);
    } else {
      temp = true;
      t = at::empty(shape, x.options());
    }
  }
  void finish() {
    if (temp) orig.copy_(t.view(orig.sizes()));
  }
};

// Operand setup: matrices {batch, row, col}, vectors {batch, index},
// per-batch scalars {batch}.
void mat(nrt_launch &d, int i, const Tensor &t3) { set_operand(d.operands[i], t3, {0, 1, 2}); }
void vec(nrt_launch &d, int i, const Tensor &t2) { set_operand(d.operands[i], t2, {0, 1}); }
void one(nrt_launch &d, int i, const Tensor &t1) { set_operand(d.operands[i], t1, {0}); }

nrt_launch desc(nrt_op op, std::initializer_list<int64_t> sizes, int nout, int nin, const Tensor &like) {
  nrt_launch d = new_launch(op, sizes);
  d.noutputs = nout;
  d.ninputs = nin;
  d.compute_dtype = to_nrt_dtype(like.scalar_type());
  return d;
}

bool nonempty(const nrt_launch &d) {
  for (int i = 0; i < d.ndim; i++)
    if (d.sizes[i] == 0) return false;
  return true;
}

void run(const Tensor &like, const nrt_launch &d) {
  if (nonempty(d)) launch(like.device().index(), d);
}

std::vector<int64_t> with(IntArrayRef batch, std::initializer_list<int64_t> core) {
  std::vector<int64_t> s(batch.begin(), batch.end());
  s.insert(s.end(), core.begin(), core.end());
  return s;
}

// Batches of F-contiguous matrices, the strides LAPACK's drivers give
// their matrix outputs (ATen's batched_matrix_contiguous_strides).
std::vector<int64_t> fcontig_strides(IntArrayRef sizes) {
  std::vector<int64_t> st(sizes.size());
  int64_t acc = 1;
  for (int64_t i = (int64_t)sizes.size() - 1; i >= 0; i--) {
    st[i] = acc;
    acc *= std::max<int64_t>(sizes[i], 1);
  }
  size_t d = sizes.size();
  st[d - 1] = std::max<int64_t>(sizes[d - 2], 1);
  st[d - 2] = 1;
  return st;
}

// ---- LU ---------------------------------------------------------------------

// Factors A (..., m, n) into LU, pivots, info (already shaped).
void lu_factor_into(const Tensor &A, bool pivot, Tensor &LU, Tensor &pivots, Tensor &info) {
  int64_t m = A.size(-2), n = A.size(-1);
  info.zero_();
  Flat a(A, 2, false), lu(LU, 2, true), pv(pivots, 1, true), in(info, 0, true);
  nrt_launch d = desc(NRT_OP(LU_FACTOR), {a.t.size(0), m, n}, 3, 1, A);
  mat(d, 0, lu.t);
  vec(d, 1, pv.t);
  one(d, 2, in.t);
  mat(d, 3, a.t);
  d.params[0] = pivot;
  run(A, d);
  lu.finish();
  pv.finish();
  in.finish();
}

std::tuple<Tensor &, Tensor &, Tensor &> lu_factor_ex_out(const Tensor &A, bool pivot, bool check_errors, Tensor &LU,
                                                          Tensor &pivots, Tensor &info) {
  c10::DeviceGuard guard(A.device());
  at::meta::linalg_lu_factor_ex_outf(A, pivot, check_errors, LU, pivots, info);
  check_float_or_complex(A, "linalg.lu_factor");
  lu_factor_into(A, pivot, LU, pivots, info);
  if (check_errors) at::_linalg_check_errors(info, "torch.linalg.lu_factor_ex", A.dim() == 2);
  return {LU, pivots, info};
}

std::tuple<Tensor, Tensor, Tensor> lu_factor_ex_fn(const Tensor &A, bool pivot, bool check_errors) {
  Tensor LU = at::empty({0}, A.options()), pivots = at::empty({0}, A.options().dtype(at::kInt)),
         info = at::empty({0}, A.options().dtype(at::kInt));
  lu_factor_ex_out(A, pivot, check_errors, LU, pivots, info);
  return {LU, pivots, info};
}

// out = op(A)^-1 B (left) or B op(A)^-1 with A = P L U; out already shaped
// with the broadcast batch.
void lu_solve_into(const Tensor &LU, const Tensor &pivots, const Tensor &B, bool left, bool adjoint, Tensor &out) {
  int64_t n = LU.size(-1);
  auto batch = out.sizes().slice(0, out.dim() - 2);
  Tensor LUe = LU.expand(with(batch, {n, n}));
  Tensor Pe = pivots.expand(with(batch, {n}));
  Tensor Be = B.expand(out.sizes());
  Flat lu(LUe, 2, false), pv(Pe, 1, false), b(Be, 2, false), x(out, 2, true);
  // X A = B  <=>  A^T X^T = B^T: the same solve on transposed views.
  Tensor X3 = left ? x.t : x.t.mT(), B3 = left ? b.t : b.t.mT();
  nrt_launch d = desc(NRT_OP(LU_SOLVE), {X3.size(0), n, X3.size(2)}, 1, 3, out);
  mat(d, 0, X3);
  mat(d, 1, lu.t);
  vec(d, 2, pv.t);
  mat(d, 3, B3);
  // Kernel flags: bit 0 transpose, bit 1 conjugate (ignored for real).
  // X op(A) = B  <=>  op(A)^T X^T = B^T, and (A^H)^T = conj(A).
  d.params[0] = left ? (adjoint ? 3 : 0) : (adjoint ? 2 : 1);
  run(out, d);
  x.finish();
}

Tensor &lu_solve_out(const Tensor &LU, const Tensor &pivots, const Tensor &B, bool left, bool adjoint, Tensor &out) {
  c10::DeviceGuard guard(LU.device());
  at::meta::linalg_lu_solve_outf(LU, pivots, B, left, adjoint, out);
  check_float_or_complex(LU, "linalg.lu_solve");
  TORCH_CHECK(pivots.scalar_type() == at::kInt, "linalg.lu_solve: pivots should be a Tensor of ints, got ",
              pivots.scalar_type());
  lu_solve_into(LU, pivots, B, left, adjoint, out);
  return out;
}

Tensor lu_solve_fn(const Tensor &LU, const Tensor &pivots, const Tensor &B, bool left, bool adjoint) {
  Tensor out = at::empty({0}, B.options());
  return lu_solve_out(LU, pivots, B, left, adjoint, out);
}

// P, L, U from packed LU (any of them may be unrequested: shape {0}).
void lu_unpack_into(const Tensor &LU, const Tensor &pivots, bool data, bool perm, Tensor &P, Tensor &L, Tensor &U) {
  int64_t m = LU.size(-2), n = LU.size(-1), k = std::min(m, n);
  auto batch = LU.sizes().slice(0, LU.dim() - 2);
  Tensor Pt = perm ? P : at::empty(with(batch, {m, m}), LU.options());
  Tensor Lt = data ? L : at::empty(with(batch, {m, k}), LU.options());
  Tensor Ut = data ? U : at::empty(with(batch, {k, n}), LU.options());
  if (k == 0) {
    // Nothing pivoted: P is the identity (L, U are empty).
    if (m > 0 && Pt.numel() > 0) Pt.copy_(at::eye(m, LU.options()).expand(Pt.sizes()));
    return;
  }
  Flat lu(LU, 2, false), pv(pivots.expand(with(batch, {k})), 1, false), p(Pt, 2, true), l(Lt, 2, true),
      u(Ut, 2, true);
  nrt_launch d = desc(NRT_OP(LU_UNPACK), {lu.t.size(0), m, n}, 3, 2, LU);
  mat(d, 0, p.t);
  mat(d, 1, l.t);
  mat(d, 2, u.t);
  mat(d, 3, lu.t);
  vec(d, 4, pv.t);
  run(LU, d);
  p.finish();
  l.finish();
  u.finish();
}

std::tuple<Tensor &, Tensor &, Tensor &> lu_unpack_out(const Tensor &LU, const Tensor &pivots, bool data, bool perm,
                                                       Tensor &P, Tensor &L, Tensor &U) {
  c10::DeviceGuard guard(LU.device());
  at::meta::lu_unpack_outf(LU, pivots, data, perm, P, L, U);
  TORCH_CHECK(pivots.scalar_type() == at::kInt,
              "lu_unpack: LU_pivots is expected to be a contiguous tensor of torch.int32 dtype. Note: this function is "
              "intended to be used with the output produced by torch.linalg.lu_factor");
  if (data || perm) lu_unpack_into(LU, pivots, data, perm, P, L, U);
  return {P, L, U};
}

std::tuple<Tensor, Tensor, Tensor> lu_unpack_fn(const Tensor &LU, const Tensor &pivots, bool data, bool perm) {
  Tensor P = at::empty({0}, LU.options()), L = at::empty({0}, LU.options()), U = at::empty({0}, LU.options());
  lu_unpack_out(LU, pivots, data, perm, P, L, U);
  return {P, L, U};
}

std::tuple<Tensor &, Tensor &, Tensor &> linalg_lu_out(const Tensor &A, bool pivot, Tensor &P, Tensor &L, Tensor &U) {
  c10::DeviceGuard guard(A.device());
  at::meta::linalg_lu_outf(A, pivot, P, L, U);
  check_float_or_complex(A, "linalg.lu");
  int64_t m = A.size(-2), n = A.size(-1);
  auto batch = A.sizes().slice(0, A.dim() - 2);
  Tensor LU = at::empty(A.sizes(), A.options());
  Tensor piv = at::empty(with(batch, {std::min(m, n)}), A.options().dtype(at::kInt));
  Tensor info = at::empty(batch, A.options().dtype(at::kInt));
  lu_factor_into(A, pivot, LU, piv, info);
  lu_unpack_into(LU, piv, true, pivot, P, L, U);
  return {P, L, U};
}

std::tuple<Tensor, Tensor, Tensor> linalg_lu_fn(const Tensor &A, bool pivot) {
  Tensor P = at::empty({0}, A.options()), L = at::empty({0}, A.options()), U = at::empty({0}, A.options());
  linalg_lu_out(A, pivot, P, L, U);
  return {P, L, U};
}

std::tuple<Tensor, Tensor> inv_ex_into(Tensor inverse, Tensor info, const Tensor &A, bool check_errors) {
  if (!inverse.defined()) {
    inverse = at::empty({0}, A.options());
    info = at::empty({0}, A.options().dtype(at::kInt));
  }
  c10::DeviceGuard guard(A.device());
  at::meta::linalg_inv_ex_outf(A, check_errors, inverse, info);
  check_float_or_complex(A, "linalg.inv");
  int64_t n = A.size(-1);
  auto batch = A.sizes().slice(0, A.dim() - 2);
  Tensor LU = at::empty(A.sizes(), A.options());
  Tensor piv = at::empty(with(batch, {n}), A.options().dtype(at::kInt));
  lu_factor_into(A, true, LU, piv, info);
  Flat lu(LU, 2, false), pv(piv, 1, false), x(inverse, 2, true);
  nrt_launch d = desc(NRT_OP(LU_INVERSE), {lu.t.size(0), n}, 1, 2, A);
  mat(d, 0, x.t);
  mat(d, 1, lu.t);
  vec(d, 2, pv.t);
  run(A, d);
  x.finish();
  if (check_errors) at::_linalg_check_errors(info, "linalg.inv_ex", A.dim() == 2);
  return {inverse, info};
}


// ATen's det and slogdet factor a row-major A as A^T (LAPACK wants
// column-major; det(A^T) = det(A)), and their backward formulas read the
// returned LU and pivots accordingly: the device must return the same
// factors. (linalg.solve factors A itself.)
bool use_transpose(const Tensor &A) { return A.is_contiguous() && !A.is_complex(); }

bool is_vector_rhs(const Tensor &A, const Tensor &B) {
  auto expected = A.sizes().slice(0, A.dim() - 1);
  return B.dim() == 1 || (A.dim() - 1 == B.dim() && B.sizes() == expected);
}

std::tuple<Tensor &, Tensor &, Tensor &, Tensor &> solve_ex_out(const Tensor &A, const Tensor &B, bool left,
                                                                bool check_errors, Tensor &result, Tensor &LU,
                                                                Tensor &pivots, Tensor &info) {
  c10::DeviceGuard guard(A.device());
  at::meta::_linalg_solve_ex_outf(A, B, left, check_errors, result, LU, pivots, info);
  check_float_or_complex(A, "linalg.solve");
  lu_factor_into(A, true, LU, pivots, info);
  bool vector = is_vector_rhs(A, B);
  Tensor B_ = vector ? B.unsqueeze(-1) : B;
  Tensor R_ = vector ? result.unsqueeze(-1) : result;
  lu_solve_into(LU, pivots, B_, left, false, R_);
  if (check_errors) at::_linalg_check_errors(info, "torch.linalg.solve_ex", A.dim() == 2);
  return {result, LU, pivots, info};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> solve_ex_fn(const Tensor &A, const Tensor &B, bool left, bool check_errors) {
  Tensor result = at::empty({0}, B.options()), LU = at::empty({0}, A.options()),
         pivots = at::empty({0}, A.options().dtype(at::kInt)), info = at::empty({0}, A.options().dtype(at::kInt));
  solve_ex_out(A, B, left, check_errors, result, LU, pivots, info);
  return {result, LU, pivots, info};
}

// det (slog = false: out0 = det) or slogdet (out0 = sign, out1 = logabsdet).
void det_from_lu(const Tensor &LU, const Tensor &pivots, bool slog, Tensor &out0, Tensor *out1) {
  int64_t n = LU.size(-1);
  if (n == 0) { // the empty product
    out0.fill_(1);
    if (out1) out1->fill_(0);
    return;
  }
  Flat lu(LU, 2, false), pv(pivots, 1, false), o0(out0, 0, true);
  nrt_launch d = desc(NRT_OP(LU_DET), {lu.t.size(0), n}, slog ? 2 : 1, 2, LU);
  one(d, 0, o0.t);
  int i = 1;
  Flat o1(slog ? *out1 : out0, 0, true);
  if (slog) one(d, i++, o1.t);
  mat(d, i++, lu.t);
  vec(d, i, pv.t);
  d.params[0] = slog;
  run(LU, d);
  o0.finish();
  if (slog) o1.finish();
}

std::tuple<Tensor &, Tensor &, Tensor &> det_out(const Tensor &A, Tensor &result, Tensor &LU, Tensor &pivots) {
  c10::DeviceGuard guard(A.device());
  at::meta::_linalg_det_outf(A, result, LU, pivots);
  check_float_or_complex(A, "linalg.det");
  Tensor info = at::empty(A.sizes().slice(0, A.dim() - 2), A.options().dtype(at::kInt));
  lu_factor_into(use_transpose(A) ? A.mT() : A, true, LU, pivots, info); // det(A^T) = det(A)
  det_from_lu(LU, pivots, false, result, nullptr);
  return {result, LU, pivots};
}

std::tuple<Tensor, Tensor, Tensor> det_fn(const Tensor &A) {
  Tensor result = at::empty({0}, A.options()), LU = at::empty({0}, A.options()),
         pivots = at::empty({0}, A.options().dtype(at::kInt));
  det_out(A, result, LU, pivots);
  return {result, LU, pivots};
}

std::tuple<Tensor &, Tensor &, Tensor &, Tensor &> slogdet_out(const Tensor &A, Tensor &sign, Tensor &logabsdet,
                                                               Tensor &LU, Tensor &pivots) {
  c10::DeviceGuard guard(A.device());
  at::meta::_linalg_slogdet_outf(A, sign, logabsdet, LU, pivots);
  check_float_or_complex(A, "linalg.slogdet");
  Tensor info = at::empty(A.sizes().slice(0, A.dim() - 2), A.options().dtype(at::kInt));
  lu_factor_into(use_transpose(A) ? A.mT() : A, true, LU, pivots, info);
  det_from_lu(LU, pivots, true, sign, &logabsdet);
  return {sign, logabsdet, LU, pivots};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> slogdet_fn(const Tensor &A) {
  Tensor sign = at::empty({0}, A.options()), logabsdet = at::empty({0}, real_options(A)),
         LU = at::empty({0}, A.options()), pivots = at::empty({0}, A.options().dtype(at::kInt));
  slogdet_out(A, sign, logabsdet, LU, pivots);
  return {sign, logabsdet, LU, pivots};
}

// ---- QR -----------------------------------------------------------------------

void geqrf_launch(const Tensor &A, Tensor &QR, Tensor &tau) {
  int64_t m = A.size(-2), n = A.size(-1);
  Flat a(A, 2, false), qr(QR, 2, true), t(tau, 1, true);
  nrt_launch d = desc(NRT_OP(GEQRF), {a.t.size(0), m, n}, 2, 1, A);
  mat(d, 0, qr.t);
  vec(d, 1, t.t);
  mat(d, 2, a.t);
  run(A, d);
  qr.finish();
  t.finish();
}

std::tuple<Tensor, Tensor> geqrf_into(Tensor, Tensor, const Tensor &A) {
  TORCH_CHECK(A.dim() >= 2, "torch.geqrf: input must have at least 2 dimensions.");
  check_float_or_complex(A, "torch.geqrf");
  c10::DeviceGuard guard(A.device());
  auto batch = A.sizes().slice(0, A.dim() - 2);
  Tensor QR = at::empty_strided(A.sizes(), fcontig_strides(A.sizes()), A.options()); // as LAPACK's
  Tensor tau = at::empty(with(batch, {std::min(A.size(-2), A.size(-1))}), A.options());
  geqrf_launch(A, QR, tau);
  return {QR, tau};
}


// Q (m x cols) = H_0 ... H_{k-1} applied to the first cols columns of I.
void orgqr_into(const Tensor &V, const Tensor &tau, Tensor &Q) {
  int64_t m = Q.size(-2), cols = Q.size(-1), k = tau.size(-1);
  if (k == 0) {  // no reflectors: the first cols columns of the identity (tau has no data to describe)
    Q.zero_();
    Q.diagonal(0, -2, -1).fill_(1);
    return;
  }
  Flat v(V, 2, false), t(tau, 1, false), q(Q, 2, true);
  nrt_launch d = desc(NRT_OP(ORGQR), {q.t.size(0), m, cols}, 1, 2, Q);
  mat(d, 0, q.t);
  mat(d, 1, v.t);
  vec(d, 2, t.t);
  d.params[0] = k;
  run(Q, d);
  q.finish();
}

Tensor householder_product_into(Tensor, const Tensor &input, const Tensor &tau) {
  TORCH_CHECK(input.dim() >= 2, "torch.linalg.householder_product: input must have at least 2 dimensions.");
  TORCH_CHECK(input.size(-2) >= input.size(-1),
              "torch.linalg.householder_product: input.shape[-2] must be greater than or equal to input.shape[-1]");
  TORCH_CHECK(input.size(-1) >= tau.size(-1),
              "torch.linalg.householder_product: input.shape[-1] must be greater than or equal to tau.shape[-1]");
  TORCH_CHECK(input.dim() - tau.dim() == 1,
              "torch.linalg.householder_product: Expected tau to have one dimension less than input, but got "
              "tau.ndim equal to ", tau.dim(), " and input.ndim is equal to ", input.dim());
  if (input.dim() > 2) {
    auto expected = input.sizes().slice(0, input.dim() - 2);
    auto actual = tau.sizes().slice(0, tau.dim() - 1);
    TORCH_CHECK(actual.equals(expected), "torch.linalg.householder_product: Expected batch dimensions of tau to be "
                "equal to input.shape[:-2], but got ", actual);
  }
  TORCH_CHECK(tau.scalar_type() == input.scalar_type(),
              "torch.linalg.householder_product: tau dtype ", tau.scalar_type(),
              " does not match input dtype ", input.scalar_type());
  check_float_or_complex(input, "torch.linalg.householder_product");
  c10::DeviceGuard guard(input.device());
  Tensor Q = at::empty_strided(input.sizes(), fcontig_strides(input.sizes()), input.options());
  orgqr_into(input, tau, Q);
  return Q;
}


Tensor ormqr_into(Tensor, const Tensor &self, const Tensor &tau, const Tensor &C, bool left, bool transpose) {
  TORCH_CHECK(self.dim() >= 2, "torch.ormqr: input must have at least 2 dimensions.");
  TORCH_CHECK(C.dim() >= 2, "torch.ormqr: other must have at least 2 dimensions.");
  int64_t left_size_condition = left ? -2 : -1;
  TORCH_CHECK(C.size(left_size_condition) >= tau.size(-1),
              "torch.ormqr: other.shape[", left_size_condition, "] must be greater than or equal to tau.shape[-1]");
  TORCH_CHECK(C.size(left_size_condition) == self.size(-2),
              "torch.ormqr: other.shape[", left_size_condition, "] must be equal to input.shape[-2]");
  TORCH_CHECK(self.size(-1) >= tau.size(-1), "torch.ormqr: tau.shape[-1] must be less than or equal to input.shape[-1]");
  TORCH_CHECK(self.dim() - tau.dim() == 1,
              "torch.ormqr: ", "Expected tau to have one dimension less than input, but got tau.ndim equal to ",
              tau.dim(), " and input.ndim is equal to ", self.dim());
  TORCH_CHECK(self.dim() == C.dim(), "torch.ormqr: ", "Expected other to have the same number of dimensions as input, "
              "but got other.ndim equal to ", C.dim(), " and input.ndim is equal to ", self.dim());
  if (self.dim() > 2) {
    auto expected = self.sizes().slice(0, self.dim() - 2);
    TORCH_CHECK(tau.sizes().slice(0, tau.dim() - 1).equals(expected),
                "torch.ormqr: Expected batch dimensions of tau to be equal to input.shape[:-2]");
    TORCH_CHECK(C.sizes().slice(0, C.dim() - 2).equals(expected),
                "torch.ormqr: Expected batch dimensions of other to be equal to input.shape[:-2]");
  }
  TORCH_CHECK(tau.scalar_type() == self.scalar_type() && C.scalar_type() == self.scalar_type(),
              "torch.ormqr: Expected input, tau and other to have the same dtype, but got ", self.scalar_type(), ", ",
              tau.scalar_type(), " and ", C.scalar_type());
  check_float_or_complex(self, "torch.ormqr");
  c10::DeviceGuard guard(self.device());
  Tensor out = at::empty_strided(C.sizes(), fcontig_strides(C.sizes()), C.options());
  if (tau.size(-1) == 0) return out.copy_(C);  // no reflectors: Q is the identity
  Flat v(self, 2, false), t(tau, 1, false), c(C, 2, false), o(out, 2, true);
  nrt_launch d = desc(NRT_OP(ORMQR), {c.t.size(0), C.size(-2), C.size(-1)}, 1, 3, C);
  mat(d, 0, o.t);
  mat(d, 1, v.t);
  vec(d, 2, t.t);
  mat(d, 3, c.t);
  d.params[0] = left;
  d.params[1] = transpose;
  d.params[2] = tau.size(-1);
  run(C, d);
  o.finish();
  return out;
}


std::tuple<Tensor, Tensor> qr_into(Tensor Q, Tensor R, const Tensor &A, c10::string_view mode) {
  if (!Q.defined()) {
    Q = at::empty({0}, A.options());
    R = at::empty({0}, A.options());
  }
  c10::DeviceGuard guard(A.device());
  at::meta::linalg_qr_outf(A, mode, Q, R);
  check_float_or_complex(A, "linalg.qr");
  int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  auto batch = A.sizes().slice(0, A.dim() - 2);
  Tensor QR = at::empty(A.sizes(), A.options());
  Tensor tau = at::empty(with(batch, {k}), A.options());
  geqrf_launch(A, QR, tau);
  Tensor Rfull = QR.narrow(-2, 0, R.size(-2));
  if (A.is_complex()) // no complex triu kernel: a real upper-triangular mask
    R.copy_(Rfull * at::ones(Rfull.sizes().slice(Rfull.dim() - 2), real_options(A)).triu());
  else
    R.copy_(Rfull.triu());
  if (mode != "r") orgqr_into(QR.narrow(-1, 0, k), tau, Q);
  return {Q, R};
}


// ---- SVD, eigh --------------------------------------------------------------

std::tuple<Tensor &, Tensor &, Tensor &> svd_out(const Tensor &A, bool full_matrices, bool compute_uv,
                                                 std::optional<c10::string_view> driver, Tensor &U, Tensor &S,
                                                 Tensor &Vh) {
  c10::DeviceGuard guard(A.device());
  at::meta::_linalg_svd_outf(A, full_matrices, compute_uv, driver, U, S, Vh);
  check_float_or_complex(A, "linalg.svd");
  int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  if (k == 0) {
    // No singular values; full_matrices still wants orthonormal bases.
    if (compute_uv && full_matrices) {
      if (U.numel()) U.copy_(at::eye(m, U.options()).expand(U.sizes()));
      if (Vh.numel()) Vh.copy_(at::eye(n, Vh.options()).expand(Vh.sizes()));
    }
    return {U, S, Vh};
  }
  Flat a(A, 2, false), s(S, 1, true);
  nrt_launch d = desc(NRT_OP(SVD), {a.t.size(0), m, n}, compute_uv ? 3 : 1, 1, A);
  vec(d, 0, s.t);
  d.params[0] = full_matrices;
  if (compute_uv) {
    Flat u(U, 2, true), vh(Vh, 2, true);
    mat(d, 1, u.t);
    mat(d, 2, vh.t);
    mat(d, 3, a.t);
    run(A, d);
    u.finish();
    vh.finish();
  } else {
    mat(d, 1, a.t);
    run(A, d);
  }
  s.finish();
  return {U, S, Vh};
}

std::tuple<Tensor, Tensor, Tensor> svd_fn(const Tensor &A, bool full_matrices, bool compute_uv,
                                          std::optional<c10::string_view> driver) {
  Tensor U = at::empty({0}, A.options()), S = at::empty({0}, real_options(A)), Vh = at::empty({0}, A.options());
  svd_out(A, full_matrices, compute_uv, driver, U, S, Vh);
  return {U, S, Vh};
}

std::tuple<Tensor, Tensor> eigh_into(Tensor w, Tensor V, const Tensor &A, c10::string_view uplo, bool compute_v) {
  if (!w.defined()) {
    w = at::empty({0}, real_options(A));
    V = at::empty({0}, A.options());
  }
  c10::DeviceGuard guard(A.device());
  at::meta::_linalg_eigh_outf(A, uplo, compute_v, w, V);
  check_float_or_complex(A, "linalg.eigh");
  int64_t n = A.size(-1);
  Flat a(A, 2, false), ev(w, 1, true);
  nrt_launch d = desc(NRT_OP(EIGH), {a.t.size(0), n}, compute_v ? 2 : 1, 1, A);
  vec(d, 0, ev.t);
  d.params[0] = uplo == "U" || uplo == "u";
  if (compute_v) {
    Flat v(V, 2, true);
    mat(d, 1, v.t);
    mat(d, 2, a.t);
    run(A, d);
    v.finish();
  } else {
    mat(d, 1, a.t);
    run(A, d);
  }
  ev.finish();
  return {w, V};
}


// ---- general eigen (linalg.eig, linalg.eigvals) ------------------------------------

void check_eig_out(const Tensor &out, at::ScalarType want, const char *what) {
  TORCH_CHECK(at::canCast(want, out.scalar_type()), "torch.linalg.eig: Expected ", what,
              " to be safely castable from ", want, " dtype, but got ", what, " with dtype ", out.scalar_type());
}

// Eigenvalues (and with compute_v right eigenvectors) of a real or complex
// square A, both complex as on the CPU; the kernel follows LAPACK's geev,
// so the eigenvalues come in the CPU's order.
std::tuple<Tensor, Tensor> eig_compute(const Tensor &A, bool compute_v, const char *fn) {
  TORCH_CHECK(A.dim() >= 2, fn, ": The input tensor A must have at least 2 dimensions.");
  TORCH_CHECK(A.size(-1) == A.size(-2), fn, ": A must be batches of square matrices, but they are ", A.size(-2),
              " by ", A.size(-1), " matrices");
  TORCH_CHECK(at::isFloatingType(A.scalar_type()) || at::isComplexType(A.scalar_type()),
              "Unknown Complex ScalarType for ", A.scalar_type());
  TORCH_CHECK_NOT_IMPLEMENTED(A.scalar_type() == at::kFloat || A.scalar_type() == at::kDouble ||
                                  A.scalar_type() == at::kComplexFloat || A.scalar_type() == at::kComplexDouble,
                              "\"linalg_eig_out_cpu\" not implemented for '", c10::toString(A.scalar_type()), "'");
  c10::DeviceGuard guard(A.device());
  auto ct = c10::toComplexType(A.scalar_type());
  int64_t n = A.size(-1);
  auto batch = A.sizes().slice(0, A.dim() - 2);
  Tensor w = at::empty(with(batch, {n}), A.options().dtype(ct));
  Tensor V = compute_v ? at::empty_strided(A.sizes(), fcontig_strides(A.sizes()), A.options().dtype(ct))
                       : Tensor();
  Flat a(A, 2, false), ev(w, 1, true);
  nrt_launch d = desc(NRT_OP(EIG), {a.t.size(0), n}, compute_v ? 2 : 1, 1, A);
  vec(d, 0, ev.t);
  if (compute_v) {
    Flat v(V, 2, true);
    mat(d, 1, v.t);
    mat(d, 2, a.t);
    run(A, d);
    v.finish();
  } else {
    mat(d, 1, a.t);
    run(A, d);
  }
  ev.finish();
  return {w, V};
}

std::tuple<Tensor, Tensor> eig_into(Tensor w_out, Tensor v_out, const Tensor &A) {
  if (w_out.defined()) {
    auto ct = at::isComplexType(A.scalar_type()) || at::isFloatingType(A.scalar_type())
                  ? c10::toComplexType(A.scalar_type())
                  : at::kComplexFloat;
    check_eig_out(w_out, ct, "eigenvalues");
    check_eig_out(v_out, ct, "eigenvectors");
  }
  TORCH_CHECK(A.dim() >= 2, "linalg.eig: The input tensor A must have at least 2 dimensions.");
  // As on the CPU (a synchronising read): LAPACK's geev loops on NaN.
  if (A.numel()) TORCH_CHECK(A.isfinite().all().item<bool>(), "torch.linalg.eig: input tensor should not contain infs or NaNs.");
  return eig_compute(A, true, "linalg.eig");
}

// Without eigenvectors (what linalg.eigvals calls when no gradient is
// needed); the CPU does not check for NaN here, and NaN eigenvalues come out.
Tensor eigvals_fn(const Tensor &A) { return std::get<0>(eig_compute(A, false, "linalg.eigvals")); }

// ---- LDL ------------------------------------------------------------------------

std::tuple<Tensor &, Tensor &, Tensor &> ldl_factor_ex_out(const Tensor &A, bool hermitian, bool check_errors,
                                                           Tensor &LD, Tensor &pivots, Tensor &info) {
  c10::DeviceGuard guard(A.device());
  at::meta::linalg_ldl_factor_ex_outf(A, hermitian, check_errors, LD, pivots, info);
  check_float(A, "torch.linalg.ldl_factor_ex");
  info.zero_();
  int64_t n = A.size(-1);
  Flat a(A, 2, false), ld(LD, 2, true), pv(pivots, 1, true), in(info, 0, true);
  nrt_launch d = desc(NRT_OP(LDL_FACTOR), {a.t.size(0), n}, 3, 1, A);
  mat(d, 0, ld.t);
  vec(d, 1, pv.t);
  one(d, 2, in.t);
  mat(d, 3, a.t);
  run(A, d);
  ld.finish();
  pv.finish();
  in.finish();
  if (check_errors) at::_linalg_check_errors(info, "torch.linalg.ldl_factor_ex", A.dim() == 2);
  return {LD, pivots, info};
}

std::tuple<Tensor, Tensor, Tensor> ldl_factor_ex_fn(const Tensor &A, bool hermitian, bool check_errors) {
  Tensor LD = at::empty({0}, A.options()), pivots = at::empty({0}, A.options().dtype(at::kInt)),
         info = at::empty({0}, A.options().dtype(at::kInt));
  ldl_factor_ex_out(A, hermitian, check_errors, LD, pivots, info);
  return {LD, pivots, info};
}

Tensor &ldl_solve_out(const Tensor &LD, const Tensor &pivots, const Tensor &B, bool hermitian, Tensor &out) {
  c10::DeviceGuard guard(LD.device());
  at::meta::linalg_ldl_solve_outf(LD, pivots, B, hermitian, out);
  check_float(LD, "torch.linalg.ldl_solve");
  int64_t n = LD.size(-1);
  auto batch = out.sizes().slice(0, out.dim() - 2);
  Flat ld(LD.expand(with(batch, {n, n})), 2, false), pv(pivots.expand(with(batch, {n})), 1, false),
      b(B.expand(out.sizes()), 2, false), x(out, 2, true);
  nrt_launch d = desc(NRT_OP(LDL_SOLVE), {x.t.size(0), n, out.size(-1)}, 1, 3, out);
  mat(d, 0, x.t);
  mat(d, 1, ld.t);
  vec(d, 2, pv.t);
  mat(d, 3, b.t);
  run(out, d);
  x.finish();
  return out;
}

Tensor ldl_solve_fn(const Tensor &LD, const Tensor &pivots, const Tensor &B, bool hermitian) {
  Tensor out = at::empty({0}, B.options());
  return ldl_solve_out(LD, pivots, B, hermitian, out);
}

// ---- matrix_exp ---------------------------------------------------------------

Tensor matrix_exp_into(Tensor, const Tensor &A) {
  TORCH_CHECK(A.dim() >= 2 && A.size(-1) == A.size(-2),
              "linalg.matrix_exp: A must be batches of square matrices, but they are ", A.size(-2), " by ",
              A.size(-1), " matrices");
  TORCH_CHECK(at::isFloatingType(A.scalar_type()), "linalg.matrix_exp: Expected a floating point tensor, got ",
              A.scalar_type());
  c10::DeviceGuard guard(A.device());
  Tensor E = at::empty(A.sizes(), A.options());
  Flat a(A, 2, false), e(E, 2, true);
  nrt_launch d = desc(NRT_OP(MATRIX_EXP), {a.t.size(0), A.size(-1)}, 1, 1, A);
  mat(d, 0, e.t);
  mat(d, 1, a.t);
  run(A, d);
  e.finish();
  return E;
}


// ---- Cholesky and triangular solves (old API) ---------------------------------

Tensor cholesky_into(Tensor, const Tensor &self, bool upper) {
  TORCH_WARN_ONCE("torch.cholesky is deprecated in favor of torch.linalg.cholesky and will be removed in a future "
                  "PyTorch release.");
  TORCH_CHECK(self.dim() >= 2, "cholesky: The input tensor A must have at least 2 dimensions.");
  auto r = at::linalg_cholesky_ex(self, upper, /*check_errors=*/false);
  at::_linalg_check_errors(std::get<1>(r), "cholesky", self.dim() == 2);
  return std::get<0>(r);
}


// t itself when it has batched F-contiguous strides (what LAPACK's potrs
// and potri leave on the CPU), else an F-contiguous copy.
Tensor as_fcontig(const Tensor &t) {
  auto want = fcontig_strides(t.sizes());
  if (t.strides().equals(want)) return t;
  Tensor r = at::empty_strided(t.sizes(), want, t.options());
  return r.copy_(t);
}

// B and L already broadcast by torch.cholesky_solve: two triangular solves.
Tensor cholesky_solve_helper_into(Tensor, const Tensor &B, const Tensor &L, bool upper) {
  c10::DeviceGuard guard(B.device());
  if (upper) { // A = U^H U
    Tensor y = at::linalg_solve_triangular(L.mH(), B, /*upper=*/false);
    return as_fcontig(at::linalg_solve_triangular(L, y, /*upper=*/true));
  }
  Tensor y = at::linalg_solve_triangular(L, B, /*upper=*/false); // A = L L^H
  return as_fcontig(at::linalg_solve_triangular(L.mH(), y, /*upper=*/true));
}


Tensor cholesky_inverse_into(Tensor, const Tensor &L, bool upper) {
  TORCH_CHECK(L.dim() >= 2, "cholesky_inverse: The input tensor A must have at least 2 dimensions.");
  TORCH_CHECK(L.size(-1) == L.size(-2), "cholesky_inverse: A must be batches of square matrices, but they are ",
              L.size(-2), " by ", L.size(-1), " matrices");
  check_float_or_complex(L, "cholesky_inverse");
  c10::DeviceGuard guard(L.device());
  Tensor I = at::eye(L.size(-1), L.options()).expand(L.sizes());
  return cholesky_solve_helper_into(Tensor(), I, L, upper);
}


std::tuple<Tensor, Tensor> triangular_solve_into(Tensor X, Tensor M, const Tensor &B, const Tensor &A, bool upper,
                                                 bool transpose, bool unitriangular) {
  if (!X.defined()) {
    X = at::empty({0}, B.options());
    M = at::empty({0}, A.options());
  }
  c10::DeviceGuard guard(B.device());
  at::meta::triangular_solve_outf(B, A, upper, transpose, unitriangular, X, M);
  check_float_or_complex(A, "triangular_solve");
  Tensor Ab = A.expand(M.sizes());
  M.copy_(Ab);
  // op(A) X = B with op(A) = A^T: A^T is triangular of the other kind.
  Tensor r = at::linalg_solve_triangular(transpose ? Ab.mT() : Ab, B.expand(X.sizes()), transpose ? !upper : upper,
                                         /*left=*/true, unitriangular);
  X.copy_(r);
  return {X, M};
}


// ---- least squares ----------------------------------------------------------------

// lstsq through the SVD: x = V S^+ U^T b with singular values below
// rcond * s_max dropped, which is the minimum-norm solution every LAPACK
// driver returns for full-rank problems (and gelsd/gelss's for rank-
// deficient ones). Outputs follow the chosen driver as on the CPU: gelsy
// (default) gives rank, gels nothing extra, gelsd/gelss rank and singular
// values; residuals only when m > n and A has full rank (not for gelsy).
std::tuple<Tensor, Tensor, Tensor, Tensor> lstsq_fn(const Tensor &A, const Tensor &B, std::optional<double> rcond,
                                                    std::optional<c10::string_view> driver_opt) {
  TORCH_CHECK(A.dim() >= 2, "torch.linalg.lstsq: input must have at least 2 dimensions.");
  TORCH_CHECK(B.dim() >= 1, "torch.linalg.lstsq: other must have at least 1 dimension.");
  TORCH_CHECK(A.scalar_type() == B.scalar_type(), "torch.linalg.lstsq: Expected input and other to have the same "
              "dtype, but got input's dtype ", A.scalar_type(), " and other's dtype ", B.scalar_type());
  check_float(A, "torch.linalg.lstsq");
  bool vector = A.dim() - 1 == B.dim();
  Tensor Bm = vector ? B.unsqueeze(-1) : B;
  TORCH_CHECK(A.size(-2) == Bm.size(-2), "torch.linalg.lstsq: input.size(-2) should match other.size(-2)");
  std::string driver = driver_opt.has_value() ? std::string(*driver_opt) : "gelsy";
  TORCH_CHECK(driver == "gels" || driver == "gelsy" || driver == "gelsd" || driver == "gelss",
              "torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)");
  c10::DeviceGuard guard(A.device());
  int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  auto batch = at::infer_size(A.sizes().slice(0, A.dim() - 2), Bm.sizes().slice(0, Bm.dim() - 2));
  Tensor Ae = A.expand(with(batch, {m, n}));
  Tensor Be = Bm.expand(with(batch, {m, Bm.size(-1)}));
  double rc = rcond.has_value() ? *rcond : (double)std::max(m, n) * std::numeric_limits<float>::epsilon();
  if (A.scalar_type() == at::kDouble && !rcond.has_value())
    rc = (double)std::max(m, n) * std::numeric_limits<double>::epsilon();
  auto usv = at::_linalg_svd(Ae, /*full_matrices=*/false, /*compute_uv=*/true);
  Tensor U = std::get<0>(usv), S = std::get<1>(usv), Vh = std::get<2>(usv);
  Tensor keep, rank;
  if (k > 0) {
    Tensor smax = S.narrow(-1, 0, 1);
    keep = S.gt(smax.mul(rc));
    rank = keep.sum(-1);
  } else {
    keep = at::empty(S.sizes(), S.options().dtype(at::kBool));
    rank = at::zeros(batch, A.options().dtype(at::kLong));
  }
  Tensor Sinv = at::where(keep, S.reciprocal(), at::zeros({}, S.options()));
  Tensor X = at::matmul(Vh.mT(), Sinv.unsqueeze(-1).mul(at::matmul(U.mT(), Be)));
  if (vector) X = X.squeeze(-1);
  Tensor residuals = at::empty({0}, A.options());
  if (driver != "gelsy" && m > n && k > 0) {
    // Only defined (and only computed by LAPACK) for full-rank tall A.
    bool full = rank.min().item<int64_t>() == n;
    if (full) {
      Tensor R = at::matmul(Ae, vector ? X.unsqueeze(-1) : X).sub(Be);
      residuals = R.pow(2).sum(-2);
      if (vector) residuals = residuals.squeeze(-1);
    }
  }
  if (driver == "gels") rank = at::empty({0}, A.options().dtype(at::kLong));
  Tensor sv = (driver == "gelsd" || driver == "gelss") ? S : at::empty({0}, S.options());
  return {X, residuals, rank, sv};
}

std::tuple<Tensor &, Tensor &, Tensor &, Tensor &> lstsq_out(const Tensor &A, const Tensor &B,
                                                             std::optional<double> rcond,
                                                             std::optional<c10::string_view> driver, Tensor &X,
                                                             Tensor &residuals, Tensor &rank, Tensor &sv) {
  auto r = lstsq_fn(A, B, rcond, driver);
  Tensor *outs[4] = {&X, &residuals, &rank, &sv};
  const Tensor *vals[4] = {&std::get<0>(r), &std::get<1>(r), &std::get<2>(r), &std::get<3>(r)};
  for (int i = 0; i < 4; i++) {
    at::native::resize_output(*outs[i], vals[i]->sizes());
    outs[i]->copy_(*vals[i]);
  }
  return {X, residuals, rank, sv};
}

// ---- Cholesky and triangular solves ---------------------------------------------
// torch.linalg.cholesky(_ex) and torch.linalg.solve_triangular, which
// torch.distributions.MultivariateNormal needs. Batch dimensions broadcast
// as in ATen's linalg functions.
std::tuple<Tensor, Tensor> cholesky_ex_fn(const Tensor &self, bool upper, bool check_errors) {
  TORCH_CHECK(self.dim() >= 2, "linalg.cholesky: The input tensor A must have at least 2 dimensions.");
  TORCH_CHECK(self.size(-1) == self.size(-2), "linalg.cholesky: A must be batches of square matrices, but they are ",
              self.size(-2), " by ", self.size(-1), " matrices");
  check_float_or_complex(self, "linalg.cholesky");
  c10::DeviceGuard guard(self.device());
  int64_t n = self.size(-1);
  auto batch = self.sizes().slice(0, self.dim() - 2);
  Tensor L = at::empty_strided(self.sizes(), fcontig_strides(self.sizes()), self.options()); // the CPU's strides
  Tensor info = at::zeros(batch, self.options().dtype(at::kInt));
  int64_t nb = 1;
  for (auto b : batch) nb *= b;
  if (nb > 0 && n > 0) {
    Tensor A3 = self.reshape({nb, n, n});
    Tensor L3 = L.view({nb, n, n});
    Tensor info1 = info.view({nb, 1, 1});
    nrt_launch d = new_launch(NRT_OP(CHOLESKY), {nb, n});
    d.noutputs = 2;
    d.ninputs = 1;
    mat(d, 0, L3);
    mat(d, 1, info1);
    mat(d, 2, A3);
    d.compute_dtype = to_nrt_dtype(self.scalar_type());
    d.params[0] = upper ? 1 : 0;
    launch(self.device().index(), d);
  }
  if (check_errors) {
    // Reading info synchronises, as it does on CUDA.
    int64_t bad = info.numel() ? info.max().item<int64_t>() : 0;
    TORCH_CHECK(bad == 0, "linalg.cholesky: The factorization could not be completed because the input is not "
                          "positive-definite (the leading minor of order ", bad, " is not positive-definite).");
  }
  return {L, info};
}

Tensor solve_triangular_fn(const Tensor &A_in, const Tensor &B_in, bool upper, bool left, bool unitriangular) {
  // linalg_solve_triangular is a fallthrough of the Conjugate and Negative
  // keys (ATen's kernels read conjugated views natively): materialise them,
  // since the kernel reads plain strided data.
  Tensor A = A_in.resolve_conj().resolve_neg(), B = B_in.resolve_conj().resolve_neg();
  TORCH_CHECK(A.dim() >= 2 && B.dim() >= 2, "linalg.solve_triangular: The input tensors must have at least 2 dimensions.");
  TORCH_CHECK(A.size(-1) == A.size(-2), "linalg.solve_triangular: A must be batches of square matrices");
  int64_t m = B.size(-2), k = B.size(-1);
  TORCH_CHECK(left ? A.size(-1) == m : A.size(-1) == k, "linalg.solve_triangular: Incompatible shapes of A and B for the equation ",
              left ? "AX = B" : "XA = B", " (", A.sizes(), " and ", B.sizes(), ")");
  TORCH_CHECK(A.scalar_type() == B.scalar_type(), "linalg.solve_triangular: Expected A and B to have the same dtype, but found A of type ",
              A.scalar_type(), " and B of type ", B.scalar_type(), " instead");
  c10::DeviceGuard guard(A.device());
  auto batch = at::infer_size(A.sizes().slice(0, A.dim() - 2), B.sizes().slice(0, B.dim() - 2));
  int64_t nb = 1;
  for (auto b : batch) nb *= b;
  std::vector<int64_t> ashape(batch), bshape(batch);
  ashape.push_back(A.size(-2));
  ashape.push_back(A.size(-1));
  bshape.push_back(m);
  bshape.push_back(k);
  // The CPU's strides: F-contiguous, except that a conjugated A whose
  // transpose is contiguous (A = C.mH) makes ATen solve the transposed
  // equation and return a row-major result.
  bool row_major = A_in.is_conj() && A_in.expand(ashape).mT().is_contiguous();
  Tensor X = row_major ? at::empty(bshape, B.options()) : at::empty_strided(bshape, fcontig_strides(bshape), B.options());
  if (nb > 0 && m > 0 && k > 0) {
    Tensor A3 = A.expand(ashape).reshape({nb, A.size(-2), A.size(-1)});
    Tensor B3 = B.expand(bshape).reshape({nb, m, k});
    Tensor X3 = X.view({nb, m, k});
    nrt_launch d = new_launch(NRT_OP(TRIANGULAR_SOLVE), {nb, m, k});
    d.noutputs = 1;
    d.ninputs = 2;
    mat(d, 0, X3);
    mat(d, 1, A3);
    mat(d, 2, B3);
    d.compute_dtype = to_nrt_dtype(A.scalar_type());
    d.params[0] = upper;
    d.params[1] = left;
    d.params[2] = unitriangular;
    launch(A.device().index(), d);
  }
  return X;
}

// linalg.cross: the three components from narrowed views; each is one
// product and one fused multiply-subtract (ADDCMUL), on broadcast inputs.
Tensor cross_into(Tensor /*out: Variants copies*/, const Tensor &a, const Tensor &b, int64_t dim) {
  TORCH_CHECK(a.dim() == b.dim(), "linalg.cross: inputs must have the same number of dimensions.");
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "linalg.cross: expected input and other to have the same dtype, "
              "but got ", a.scalar_type(), " and ", b.scalar_type());
  int64_t d = c10::maybe_wrap_dim(dim, a.dim());
  TORCH_CHECK(a.size(d) == 3 && b.size(d) == 3, "linalg.cross: inputs dimension ", dim,
              " must have length 3. Got ", a.size(d), " and ", b.size(d));
  auto shape = at::infer_size(a.sizes(), b.sizes());
  Tensor A = a.expand(shape), B = b.expand(shape);
  auto c = [&](int64_t i, int64_t j) {  // A_i * B_j - A_j * B_i
    return (A.narrow(d, i, 1) * B.narrow(d, j, 1)).addcmul_(A.narrow(d, j, 1), B.narrow(d, i, 1), -1);
  };
  return at::cat({c(1, 2), c(2, 0), c(0, 1)}, d);
}

// The LINALG kernels read complex operands themselves (kernels/linalg/z*.c
// and eig.c), which the general launch path refuses: this family's
// launches with complex operands are taken here and enqueued as they are.
bool take_complex_linalg(c10::DeviceIndex device, const nrt_launch &desc) {
  if (nrt_op_kind(desc.op) != NRT_KIND_LINALG) return false;
  bool complex = false;
  for (int i = 0; i < desc.noutputs + desc.ninputs && i < NRT_MAX_OPERANDS; ++i)
    complex |= nrt_dtype_is_complex(desc.operands[i].dtype);
  if (!complex) return false;
  enqueue(device, desc);
  return true;
}

struct RegisterLinalgExtension {
  RegisterLinalgExtension() { register_launch_extension({nullptr, &take_complex_linalg}); }
} g_register_linalg_extension;

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  NEURON_IMPL(m, "linalg_lu_factor_ex", lu_factor_ex_fn);
  NEURON_IMPL(m, "linalg_lu_factor_ex.out", lu_factor_ex_out);
  NEURON_IMPL(m, "linalg_lu_solve", lu_solve_fn);
  NEURON_IMPL(m, "linalg_lu_solve.out", lu_solve_out);
  NEURON_IMPL(m, "lu_unpack", lu_unpack_fn);
  NEURON_IMPL(m, "lu_unpack.out", lu_unpack_out);
  NEURON_IMPL(m, "linalg_lu", linalg_lu_fn);
  NEURON_IMPL(m, "linalg_lu.out", linalg_lu_out);
  NEURON_VARIANTS(m, inv_ex_into, "linalg_inv_ex", nullptr, "linalg_inv_ex.inverse");
  NEURON_IMPL(m, "_linalg_solve_ex", solve_ex_fn);
  NEURON_IMPL(m, "_linalg_solve_ex.result", solve_ex_out);
  NEURON_IMPL(m, "_linalg_det", det_fn);
  NEURON_IMPL(m, "_linalg_det.result", det_out);
  NEURON_IMPL(m, "_linalg_slogdet", slogdet_fn);
  NEURON_IMPL(m, "_linalg_slogdet.sign", slogdet_out);
  NEURON_VARIANTS(m, geqrf_into, "geqrf", nullptr, "geqrf.a");
  NEURON_VARIANTS(m, householder_product_into, "linalg_householder_product", nullptr,
                  "linalg_householder_product.out");
  NEURON_VARIANTS(m, ormqr_into, "ormqr", nullptr, "ormqr.out");
  NEURON_VARIANTS(m, qr_into, "linalg_qr", nullptr, "linalg_qr.out");
  NEURON_IMPL(m, "_linalg_svd", svd_fn);
  NEURON_IMPL(m, "_linalg_svd.U", svd_out);
  NEURON_VARIANTS(m, eigh_into, "_linalg_eigh", nullptr, "_linalg_eigh.eigenvalues");
  NEURON_VARIANTS(m, eig_into, "linalg_eig", nullptr, "linalg_eig.out");
  NEURON_IMPL(m, "_linalg_eigvals", eigvals_fn);
  NEURON_IMPL(m, "linalg_ldl_factor_ex", ldl_factor_ex_fn);
  NEURON_IMPL(m, "linalg_ldl_factor_ex.out", ldl_factor_ex_out);
  NEURON_IMPL(m, "linalg_ldl_solve", ldl_solve_fn);
  NEURON_IMPL(m, "linalg_ldl_solve.out", ldl_solve_out);
  NEURON_VARIANTS(m, matrix_exp_into, "linalg_matrix_exp", nullptr, "linalg_matrix_exp.out");
  NEURON_VARIANTS(m, cholesky_into, "cholesky", nullptr, "cholesky.out");
  NEURON_VARIANTS(m, cholesky_solve_helper_into, "_cholesky_solve_helper", nullptr,
                  "_cholesky_solve_helper.out");
  NEURON_VARIANTS(m, cholesky_inverse_into, "cholesky_inverse", nullptr, "cholesky_inverse.out");
  NEURON_VARIANTS(m, triangular_solve_into, "triangular_solve", nullptr, "triangular_solve.X");
  NEURON_IMPL(m, "linalg_lstsq", lstsq_fn);
  NEURON_IMPL(m, "linalg_lstsq.out", lstsq_out);
  NEURON_IMPL(m, "linalg_cholesky_ex", cholesky_ex_fn);
  NEURON_IMPL(m, "linalg_solve_triangular", solve_triangular_fn);
  NEURON_OUT_OF(m, cholesky_ex_fn, "linalg_cholesky_ex.L");
  NEURON_OUT_OF(m, solve_triangular_fn, "linalg_solve_triangular.out");
  NEURON_VARIANTS(m, cross_into, "linalg_cross", nullptr, "linalg_cross.out");
}

}  // namespace torch_neuronx
