"""Known gaps of the neuron device in the OpInfo conformance sweep: the one
place where they are listed, with the reason.

Keys are OpInfo names as in ``op_db`` (``"nn.functional.conv2d"``), optionally
with the variant (``"div.trunc_rounding"``) and/or one dtype
(``"ldexp@bfloat16"``); the most specific key wins. tools/gen_op_support.py
puts the reason in the op-support table's reason column, lists failures that
have no entry here, and marks entries that pass now as stale (delete them).
tests/conformance/test_conformance_subset.py lets a listed op fail with
``error`` unless it has a native kernel; ``mismatch`` and ``crash`` always fail.

Reasons start with one word:
  bug          a kernel or glue defect to fix (wrong result, spurious error, crash)
  gap          missing device support that makes the op fail instead of falling back
  unsupported  documented as not supported on the device (complex, sparse)
  precision    the values differ by rounding and neither side is wrong by much
               more than the other (the table shows the float64 value of the
               worst element); no fix needed. (Where the device is within
               tolerance of a float64 run, the sweep passes it by itself.)

Ops that merely fall back to the CPU need no entry (the table lists the ATen
ops that fell back for every OpInfo); one may say why it still falls back.
"""

_SPARSE = "unsupported: sparse tensors are not supported on the device (README, Not done yet)"

KNOWN_GAPS: dict[str, str] = {
    # ---- sparse layouts ----------------------------------------------------------
    "to_sparse": _SPARSE, "sparse.mm.reduce": _SPARSE, "sparse.sampled_addmm": _SPARSE,

    # ---- ops that fail instead of falling back -------------------------------
    "linalg.eig": (
        "gap (complex linear algebra): the forward falls back (a general eigensolver with complex "
        "results has no kernel); its backward solves a complex linear system, and the LU kernels are "
        "real-only, so linalg.solve raises. linalg.eigvals (no backward through eigenvectors) passes "
        "through the fallback"),

    # ---- no native kernel --------------------------------------------------------
    "hash_tensor": ("gap: the result is uint64, a dtype the runtime does not have; the CPU fallback "
                    "computes it"),

    # ---- rounding amplified by cancellation or overflow ------------------------------
    "nn.functional.normalize@bfloat16": (
        "precision: with p=0.5 over a dimension of size 1 the exact gradient is 0; the CPU's bfloat16 "
        "x**-0.5 (a vectorised reciprocal square root that is not correctly rounded) and the device's "
        "correctly rounded one differ by 1 ulp on some inputs, which leaves 0.0625 instead of 0"),
    "nn.functional.linear_cross_entropy.chunked_none@float16": (
        "precision (PyTorch's choice): linear_cross_entropy's acc_dtype='auto' picks a float32 "
        "accumulator only on CPU and CUDA (LinearCrossEntropyOptions._resolve_auto_acc_dtype); on any "
        "other device it accumulates in float16, so the gradient is a few float16 ulps from float64 "
        "(0.0035 at -0.179 in sample 11) where the CPU's is not. Passing acc_dtype=torch.float32 gives "
        "the CPU's accuracy"),
}
