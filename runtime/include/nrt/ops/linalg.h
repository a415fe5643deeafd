/* Op family LINALG. Dense linear algebra (kernels/linalg/): Cholesky and
 * triangular solves, and the decompositions LU, QR, SVD, symmetric eigen,
 * general eigen and what is built on them. Batched matrices,
 * computed in double; strides per operand are {batch, row, col} in bytes
 * unless an op says otherwise; vectors (pivots, tau, singular values, info)
 * have strides {batch, index}. sizes[0] is always the batch count.
 * Integer outputs (pivots, info) are int32 as in LAPACK/ATen; pivots are
 * 1-based row numbers. Complex operands (complex64/complex128, interleaved
 * re/im) run complex kernels in double complex for CHOLESKY,
 * TRIANGULAR_SOLVE, LU_*, GEQRF, ORGQR, ORMQR, SVD, EIGH and EIG, with
 * LAPACK's complex conventions: Cholesky is L L^H, QR reflectors are
 * I - tau v v^H (ORMQR's transpose is the conjugate transpose), SVD is
 * U S V^H with S real, EIGH reads a Hermitian triangle and writes real
 * eigenvalues; slogdet's sign is complex and logabsdet real.
 * Entries: X(name, kind, min_inputs, max_inputs); scalars (s0..s3),
 * params (p0..p3) and aux[] as each comment says. See nrt/launch.h for
 * how families are numbered. */
#ifndef NRT_OPS_LINALG_H
#define NRT_OPS_LINALG_H

#include "nrt/launch.h"

#define NRT_OPS_LINALG(X)                                                     \
  /* Cholesky and triangular solves: batched small matrices, computed       \
     in double; strides per operand are {batch, row, col} in bytes. */      \
  X(CHOLESKY, LINALG, 1, 1)      /* outputs L (n x n; the other triangle is \
     zeroed), info int32 [batch] (0, or the order k of the first minor that \
     is not positive-definite); input A; sizes {batch, n}; p0 = upper */     \
  X(TRIANGULAR_SOLVE, LINALG, 2, 2) /* output X; inputs A (triangular), B;     \
     sizes {batch, m, k} = X's shape; p0 = upper, p1 = left (A X = B, A is  \
     m x m; else X A = B, A is k x k), p2 = unitriangular */                \
  /* An empty launch (some size 0) writes nothing: the glue fills what     \
     empty matrices define. */                                              \
  /* LU with partial pivoting (getrf): sizes {batch, m, n}; outputs LU       \
     (m x n, unit-lower L below the diagonal, U on and above), pivots        \
     [batch, min(m,n)], info [batch] (0, or the 1-based column of the first \
     exactly-zero pivot: the factorisation still completes); input A.       \
     p0 = pivot (0: no row exchanges, pivots are 1..k). */                   \
  X(LU_FACTOR, LINALG, 1, 1)                                                  \
  /* Solves op(A) X = B with A = P L U given as LU, pivots: sizes {batch,   \
     n, k}; output X (n x k, may alias B); inputs LU (n x n), pivots, B.    \
     p0 bit 0: transpose, bit 1: conjugate (complex only), so p0 = 0: A,   \
     1: A^T, 2: conj(A), 3: A^H. */                                          \
  X(LU_SOLVE, LINALG, 3, 3)                                                   \
  /* A^-1 from LU, pivots: sizes {batch, n}; output X (n x n); inputs LU,   \
     pivots. A zero pivot gives inf/nan, as the division does. */           \
  X(LU_INVERSE, LINALG, 2, 2)                                                 \
  /* Determinant from LU, pivots: sizes {batch, n}; inputs LU, pivots.      \
     p0 = 0: output det [batch]; p0 = 1: outputs sign, logabsdet [batch]    \
     (sign 0 and logabsdet -inf for a singular matrix). */                  \
  X(LU_DET, LINALG, 2, 2)                                                     \
  /* A = P L U unpacked: sizes {batch, m, n}, k = min(m, n); outputs P      \
     (m x m), L (m x k, unit diagonal), U (k x n); inputs LU, pivots. */    \
  X(LU_UNPACK, LINALG, 2, 2)                                                  \
  /* Householder QR (geqrf): sizes {batch, m, n}; outputs QR (m x n: R on   \
     and above the diagonal, reflector j's tail below it, its head 1        \
     implied), tau [batch, min(m,n)]; input A. H_j = I - tau_j v_j v_j^T    \
     with beta = -sign(alpha) * ||x|| (R's diagonal), tau = 0 when the      \
     column below the diagonal is already zero (LAPACK's convention, so     \
     Q and R agree with the CPU's). */                                       \
  X(GEQRF, LINALG, 1, 1)                                                      \
  /* Q = H_0 ... H_{k-1} (orgqr / householder_product): sizes {batch, m,  \
     n}, p0 = k; output Q (m x n); inputs V (m x >= k: reflectors below the  \
     diagonal of its first k columns), tau [batch, k]. k <= n <= m. */      \
  X(ORGQR, LINALG, 2, 2)                                                      \
  /* op(Q) C or C op(Q) (ormqr): sizes {batch, m, n}, p2 = k; output      \
     (m x n, may alias C); inputs V (nq x >= k, nq = m when left else n),   \
     tau [batch, k], C (m x n). p0 = left, p1 = transpose (op(Q) = Q^T). */ \
  X(ORMQR, LINALG, 3, 3)                                                      \
  /* Singular value decomposition (one-sided Jacobi): sizes {batch, m, n},  \
     k = min(m, n); outputs S [batch, k] (descending) and, when noutputs is \
     3, U (m x k, or m x m when p0 = full_matrices) and Vh (k x n, or n x n); \
     input A. Singular vectors are unique only up to sign (the CPU's sign   \
     choice comes from its own algorithm). */                               \
  X(SVD, LINALG, 1, 1)                                                        \
  /* Symmetric eigendecomposition (cyclic Jacobi): sizes {batch, n};        \
     outputs w [batch, n] (ascending) and, when noutputs is 2, V (n x n,    \
     eigenvectors in columns); input A, of which only the lower (p0 = 0)    \
     or upper (p0 = 1) triangle is read. */                                 \
  X(EIGH, LINALG, 1, 1)                                                       \
  /* Symmetric indefinite LDL^T with Bunch-Kaufman pivoting (sytrf, lower): \
     sizes {batch, n}; outputs LD (n x n: D's 1x1/2x2 blocks on the         \
     diagonal and subdiagonal, L's columns below; strict upper triangle     \
     zeroed), pivots [batch, n] (LAPACK's: k > 0 a 1x1 block that swapped  \
     rows k; a 2x2 block stores -p twice), info [batch] (first exactly     \
     singular D block, 1-based); input A (lower triangle read). */          \
  X(LDL_FACTOR, LINALG, 1, 1)                                                 \
  /* Solves A X = B from LDL_FACTOR's LD and pivots: sizes {batch, n, k};   \
     output X (n x k, may alias B); inputs LD, pivots, B. */                \
  X(LDL_SOLVE, LINALG, 3, 3)                                                  \
  /* Matrix exponential (scaling and squaring of a Taylor polynomial in     \
     double): sizes {batch, n}; output E (n x n); input A. */               \
  X(MATRIX_EXP, LINALG, 1, 1)                                                 \
  /* General eigendecomposition (geev: balancing, Hessenberg, shifted QR):  \
     sizes {batch, n}; outputs w [batch, n] (complex, in the Schur form's   \
     order as LAPACK returns them; a real input's conjugate pairs come      \
     positive imaginary part first) and, when noutputs is 2, V (n x n,      \
     complex, right eigenvectors in columns, unit 2-norm, largest entry     \
     real); input A, real or complex. */                                    \
  X(EIG, LINALG, 1, 1)

NRT_OP_FAMILY_ENUM(LINALG, NRT_OPS_LINALG);

#endif
