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

Ops that merely fall back to the CPU need no entry: the table lists the ATen
ops that fell back for every OpInfo.
"""

_COMPLEX = ("unsupported: complex dtypes have no device kernels (README, Not done yet); "
            "the CPU fallback computes the complex result but it cannot be used on the device")
_SPARSE = "unsupported: sparse tensors are not supported on the device (README, Not done yet)"
_CONJ_CRASH = (
    "bug (crash, all dtypes): the result carries the conjugate bit; copying it (`aten::_copy_from` "
    "when the fallback returns it, or `.cpu()`) goes through the Conjugate fallback, which clones "
    "(clone -> copy_ -> _copy_from) with the bit still set and recurses until the stack overflows "
    "(SIGSEGV). Fix in the glue: resolve conj/neg bits in _copy_from (or register it as a "
    "fallthrough for the Conjugate/Negative keys) and raise a clear error for complex dtypes")
_CONV_INT = (
    "gap (native convolution, int64): 'neuron convolution not implemented for Long'; the CPU "
    "convolves integers, so non-floating dtypes should go to the CPU fallback. (Before the native "
    "kernel, every dtype raised: aten::convolution_overrideable has a default kernel that raises, "
    "so the boxed fallback never ran.)")
_CONV_T = (
    "bug (native convolution): transposed convolution runs CONV_BACKWARD_INPUT, whose shape check "
    "requires conv_out(output) == input exactly; with output_padding >= stride (allowed while "
    "< dilation) it is larger: input 4, kernel 5, stride 2, padding 2, dilation 4, "
    "output_padding 3 -> output 22, and conv_out(22) = 5, so the kernel fails with 'invalid argument'")
_UNFOLD = (
    "gap: uses `aten::unfold`, a view op: the boxed CPU fallback cannot serve views, so it raises. "
    "Register unfold natively (an as_strided view, like the other view ops in ops_minimal.cpp); "
    "Tensor.repeat and tile use it, so this also breaks `x.repeat(...)`")
_SCALAR = (
    "bug: a Python scalar in a bfloat16/float16 op is rounded to bfloat16/float16 before use "
    "(iter_launch.cpp materialises CPU scalars as a 0-dim tensor of the common dtype), while "
    "PyTorch computes with the scalar in float32 (`iter.original_scalar_value`). "
    "`x * 0.6931` in bfloat16 differs from the CPU in ~46% of elements (1 ulp, biased), "
    "add(alpha=), div by a scalar and lerp(weight=float) likewise; summed over a gradient "
    "it becomes visible ({where})")
_INDEX_0DIM = ("bug (native indexing, work in progress): a 0-dim self is treated as 1-dim: "
               "{what}")

KNOWN_GAPS: dict[str, str] = {
    # ---- complex dtypes and sparse layouts -----------------------------------
    "cfloat": _COMPLEX, "cdouble": _COMPLEX, "chalf": _COMPLEX, "view_as_complex": _COMPLEX,
    "linalg.eig": _COMPLEX + " (the backward builds complex tensors)",
    "stft": _COMPLEX,
    **{f"fft.{n}": _COMPLEX for n in ("fft", "fft2", "fftn", "hfft", "hfft2", "hfftn", "ifft2", "ifftn",
                                      "irfft", "irfft2", "irfftn", "rfft", "rfft2", "rfftn")},
    **{f"fft.{n}": _COMPLEX for n in ("ifft", "ihfft", "ihfft2", "ihfftn")},
    "complex": _COMPLEX, "polar": _COMPLEX, "linalg.eigvals": _COMPLEX,
    "to_sparse": _SPARSE, "sparse.mm.reduce": _SPARSE, "sparse.sampled_addmm": _SPARSE,

    # ---- ops that fail instead of falling back -------------------------------

    # ---- kernel and glue bugs --------------------------------------------------
    "addr": _SCALAR.format(where="addr has no native kernel; its decomposition scales by beta and alpha "
                                 "through aten::mul.Scalar and rounds the outer product first"),
    "native_dropout_backward@int64": (
        "bug (native native_dropout_backward): computes grad * mask * scale in float and cannot cast "
        "to an integer grad; the CPU accepts integer grads"),
    "native_dropout_backward@bool": (
        "bug (native native_dropout_backward): computes grad * mask * scale in float and cannot cast "
        "to a bool grad; the CPU accepts it"),

    # ---- no native kernel: the decomposition loses precision --------------------
    "_unsafe_masked_index": (
        "precision (bfloat16, float16): the backward accumulates duplicate indices in the tensor dtype, "
        "so the result depends on the order; the CPU and the device are both ~1% from float64"),
    "_unsafe_masked_index_put_accumulate": (
        "precision (bfloat16, float16): accumulate=True with duplicate indices rounds after every "
        "addition in the tensor dtype; order-dependent on the CPU too (both ~2% from float64)"),

    # ---- rounding amplified by cancellation --------------------------------------
    "nn.functional.normalize@bfloat16": (
        "precision: with p=0.5 over a dimension of size 1 the exact gradient is 0; a bfloat16 pow that "
        "rounds the other way by 1 ulp (the device's float32 pow is correctly rounded, the CPU's is "
        "not always) leaves 0.0625 instead of 0"),
}
