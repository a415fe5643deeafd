"""Known disagreements between neuron and the CPU, one group per root cause.

The fuzzer marks a result covered here ``known``: it is reported, but does
not fail the seeded smoke run in `make test` (tests/fuzz/test_fuzz_smoke.py).
When a root is fixed, delete its group: the smoke run then guards the fix.
Each group says which ops (op-table names, ``python tools/fuzz/fuzz.py
--list-ops``) and classes it covers, a matcher over the case and its result
(fuzz_match.py), and why: what the CPU does, what neuron does. The first
group that matches a result takes it: the CPU's own bugs first, then
float64-beyond-float32 (the documented float64 semantics), then specific
groups before general ones.
"""
from __future__ import annotations

from fuzz_match import (Group, all_of, always, any_of, cpu_exc, cpu_msg, cpu_scalar, dev_msg, dev_stage, fill,
                        first_dtype, fn, fn_suffix, has_out, in_dtype, kwarg, layout, maxdiff_below, mixed_dtypes,
                        nonfinite, not_, phase, py_scalar_arg, py_scalar_beyond, zero_size)

VAL = ("value-mismatch",)
DTYPE = ("dtype-mismatch",)
SHAPE = ("shape-mismatch",)
DEV_RJ = ("device-rejects-cpu-accepts",)
CPU_RJ = ("cpu-rejects-device-accepts",)
EXC = ("both-raise-different-class",)
ANY_DIFF = VAL + DTYPE + SHAPE
ALL_RAISE = DEV_RJ + CPU_RJ + EXC

def _aa_output_width_one(c: dict, r: dict) -> bool:
    """Whether an interpolate case's output width is 1 (size, or floor(W * scale_factor))."""
    kw = c["kwargs"]
    if "size" in kw:
        size = kw["size"]
        return (size[-1] if isinstance(size, (list, tuple)) else size) == 1
    sf = kw.get("scale_factor")
    if sf is None:
        return False
    sf = sf[-1] if isinstance(sf, (list, tuple)) else sf
    w = c["tensors"][0]["shape"][-1]
    w = c["sizes"].get(w, 1) if isinstance(w, str) else w
    return int(w * sf) == 1


def _bn_input_not_contiguous(c: dict, r: dict) -> bool:
    """batch_norm's activation (its first argument) is transposed, strided or expanded."""
    a = c["args"][0] if c["args"] else None
    return isinstance(a, dict) and "t" in a and c["tensors"][a["t"]]["layout"] in ("transposed", "strided", "expanded")


def _in_size(c: dict, dim: int) -> int:
    s = c["tensors"][0]["shape"][dim]
    return c["sizes"].get(s, 1) if isinstance(s, str) else s


def _uint8_generic_interp(c: dict, r: dict) -> bool:
    """uint8 bilinear/bicubic through the CPU's generic separable kernel (more than 4 channels, not channels-last)."""
    return c["tensors"][0]["dtype"] == "uint8" and _in_size(c, 1) > 4 and c["tensors"][0]["layout"] != "channels_last"


def _uint8_interp_width_one_view(c: dict, r: dict) -> bool:
    """uint8 bilinear/bicubic of a transposed [N, C <= 4, H > 1, 1] view (W stride != H stride)."""
    return (c["tensors"][0]["dtype"] == "uint8" and c["kwargs"].get("mode") in ("bilinear", "bicubic")
            and c["tensors"][0]["layout"] == "transposed" and _in_size(c, -1) == 1 and _in_size(c, -2) > 1
            and _in_size(c, 1) <= 4)


def _tiny_scalar_arg(c: dict, r: dict) -> bool:
    """A nonzero real Python scalar argument below float32's smallest normal (1.2e-38)."""
    vals = list(c["args"]) + list(c["kwargs"].values())
    return any(isinstance(v, float) and 0.0 < abs(v) < 1.1754943508222875e-38 for v in vals)


def _value_last_dim_expanded(c: dict, r: dict) -> bool:
    """sdpa's value (third tensor) is an expanded view whose last dim has stride 0."""
    from fuzz_case import base_shape, shape_of

    ins = [t for t in c.get("tensors", []) if t.get("role") == "in"]
    if len(ins) < 3 or ins[2].get("layout") != "expanded":
        return False
    shape = shape_of(c, ins[2])
    base, how = base_shape(ins[2], shape)
    return how[0] == "expand" and len(shape) >= 1 and base[-1] == 1 and shape[-1] != 1


def _host_amd(c: dict, r: dict) -> bool:
    """The host is AMD: the MKL orders the gemm family follows were probed there (MKL's Intel AVX-512
    kernels sum in other trees; docs/architecture.md)."""
    from torch_neuronx.limits import host_blas_kind

    return host_blas_kind() == "amd"


def _host_amd_or_intel(c: dict, r: dict) -> bool:
    """The host takes MKL's Zen or its Intel AVX-512 kernels, whose sgemv 'n' orders neuron follows."""
    from torch_neuronx.limits import host_blas_kind

    return host_blas_kind() in ("amd", "intel-avx512")


def _elementwise_in_float32(c: dict, r: dict) -> bool:
    """An elementwise op's result that float32's range explains: its forward, a unary op's gradient, or a
    gradient that overflowed (a binary op's finite gradient of a broadcast operand is a sum, whose order
    decides)."""
    family = c.get("family")
    if family == "loss" and c.get("fn") in ("F.mse_loss", "F.l1_loss", "F.smooth_l1_loss", "F.huber_loss"):
        # elementwise with reduction='none'; every reduction's gradient is elementwise (the reduction
        # only scales it): float32's range explains both when no operand is broadcast (15101-27676:
        # mse_loss of 3.4e38 and a float64 target, 1.2e77 in float64, inf at float32 precision)
        return _no_broadcast(c) and (kwarg("reduction", "none")(c, r) or not phase("forward")(c, r))
    if family not in ("unary", "binary", "ternary", "scalar", "copy", "complex"):
        return False
    return phase("forward")(c, r) or family == "unary" or nonfinite(c, r) or _no_broadcast(c)


def _bmm_over_16_cubed(c: dict, r: dict) -> bool:
    """baddbmm_'s batch1 [B, M, K] and batch2 [B, K, N] (the arguments after self) make more than 16^3
    multiply-adds in all: oneDNN's whole-batch size rule."""
    try:
        a, b = ([s if isinstance(s, int) else c["sizes"].get(s, 1) for s in c["tensors"][x["t"]]["shape"]]
                for x in c["args"][1:3])
        return a[0] * a[1] * a[2] * b[2] > 4096
    except (KeyError, IndexError, TypeError, ValueError):
        return False


def _no_broadcast(c: dict) -> bool:
    """Every tensor operand has one shape: each gradient is elementwise, no sum over a broadcast dim
    (atan2(0, -1e-30)'s float64 gradient -1e30 needs 1e-60, which float32 flushes: 60221409-1126032)."""
    shapes = {tuple(t["shape"]) for t in c.get("tensors", []) if t.get("role") == "in"}
    return len(shapes) == 1


KNOWN: list[Group] = [
    # ---- the CPU's own bugs (checked against float64 / the documented semantics) ----------------------
    Group("cpu-bug-median-expanded", ("median", "nanmedian"), VAL, layout("expanded"),
          "CPU bug: median/nanmedian over an expanded (stride-0) dimension returns garbage (denormals, wrong "
          "elements) where float64 and neuron agree on the true median."),
    Group("cpu-bug-addmv-k0-0d-bias", ("addmm",), SHAPE + CPU_RJ,
          all_of(fn("torch.addmv"), zero_size, lambda c, r: c["tensors"][c["args"][0]["t"]]["shape"] == []),
          "CPU bug: addmv with K=0 and a 0-d bias returns a 0-d result (or raises 'outer: Expected 1-D "
          "argument'); the documented result has shape [M], as neuron returns."),

    Group("cpu-bug-maxpool-dilation", ("pool",), ("crash",) + VAL,
          all_of(kwarg("dilation", 2), fn("F.max_pool1d", "F.max_pool2d", "F.max_pool3d")),
          "CPU bug (PyTorch): max pooling with dilation and padding where a window holds no input element "
          "returns -inf with an out-of-range index, and its backward writes the gradient there: heap "
          "corruption (or a gradient in the wrong element); the worker aborts with "
          "'corrupted size vs. prev_size'. Reproduced on the CPU alone (the fuzzer now runs only the "
          "forward of such cases); the "
          "device side survives 1,200 such calls."),
    Group("cpu-bug-conv-16bit-empty-output", ("conv",), DEV_RJ,
          all_of(in_dtype("float16", "bfloat16"), dev_msg("Output size is too small")),
          "CPU bug (Intel AVX-512 hosts): a float16/bfloat16 convolution whose output would have a size-0 "
          "spatial dim (conv_transpose2d of a 1 x 1 input with padding=1 and a 2 x 3 kernel) returns an empty "
          "tensor through oneDNN there, where the same call in float32, and on AMD hosts in every dtype, raises "
          "'Output size is too small' (seed 15101: 14 cases). neuron raises as float32 does."),
    Group("cpu-bug-conv-16bit-dilated-segfault", ("conv",), ("crash",),
          all_of(fn("F.conv1d", "F.conv2d", "F.conv3d", "F.conv_transpose1d", "F.conv_transpose2d",
                    "F.conv_transpose3d"), any_of(in_dtype("bfloat16", "float16"), layout("channels_last")),
                 kwarg("dilation"),
                 lambda c, r: r.get("detail", {}).get("side") == "cpu"),
          "CPU bug (Intel AVX-512 hosts): the backward of a bfloat16 conv3d with dilation=2 and padding=1 "
          "(input [2, 3, 1, 1, 4], weight [3, 2, 3, 2, 2], groups by the channel count) segfaults inside the "
          "CPU's kernel; the forward runs, and the same call in float32 runs (15101-276963, reproduced on "
          "the CPU alone). A float16 conv1d with dilation=2, stride=2, padding=1 and groups=2 segfaults already "
          "in the CPU's forward (161803398-517630: 4 cases of that run, reproduced on the CPU alone); bfloat16 "
          "conv_transpose2d/3d with dilation=2 likewise (161803398-1017376, -2135822; the pool records the CPU "
          "side). float32 too where an operand is channels-last: conv2d of a [2, 2, 3, 1] input with a channels-last "
          "[3, 2, 3, 1] weight, stride=2, padding=1, dilation=2 segfaults on the CPU alone, every run (21101-3595)."),
    Group("cpu-bug-baddbmm-16bit-self-expanded-within-entry", ("addmm",), DEV_RJ + ("crash",),
          all_of(fn("Tensor.baddbmm_"), in_dtype("float16", "bfloat16"), _bmm_over_16_cubed,
                 any_of(dev_msg("single memory location"), lambda c, r: r.get("detail", {}).get("side") == "cpu")),
          "CPU bug (hosts with oneDNN's 16-bit support: AVX512-FP16 for float16, AVX-512 for bfloat16): a "
          "float16/bfloat16 baddbmm_ over 16^3 multiply-adds in all runs through oneDNN's whole-batch matmul, "
          "which does not check the in-place self for overlap. A self expanded over rows or columns then gets "
          "a result that depends on oneDNN's blocking (rows read per register block, columns chained element "
          "by element) and, with more than one thread, races (two runs differ by 17); bfloat16 raises SIGFPE. "
          "Smaller products take the CPU's addmm_ per entry, which refuses such a self as neuron always does "
          "(a self expanded over the batch only is taken on both)."),
    Group("cpu-bug-batch-norm-eval-backward", ("batch_norm",), VAL,
          all_of(phase("backward"), kwarg("training", False), layout("transposed", "strided", "offset", "expanded")),
          "CPU bug: batch_norm in eval mode, backward, with a non-contiguous input: the CPU's input gradient "
          "uses 1/sqrt(eps) (316.2) for some channels instead of 1/sqrt(running_var + eps); the same input "
          "made contiguous gives neuron's values."),
    Group("cpu-bug-gather-expanded-int32-index", ("gather",), VAL + CPU_RJ,
          all_of(layout("expanded"), in_dtype("int32", roles=("idx",)),
                 any_of(lambda c, r: r.get("cls") == "value-mismatch",
                        cpu_msg("expected scalar type Long but found Int"))),
          "CPU bug: gather with an expanded (stride-0) int32 index reads the wrong rows: gather(arange(38.)"
          ".view(19, 2), 0, tensor([[1], [9], [6]], dtype=int32).expand(3, 2)) is [[2, 3], [2, 3], [18, 19]] on "
          "the CPU, [[2, 3], [18, 19], [12, 13]] with an int64 or contiguous index and on neuron. Its backward "
          "(scatter_add's expanded-index path, along dim 0 of a contiguous gradient) refuses that index: "
          "RuntimeError 'expected scalar type Long but found Int' where neuron returns the gradient (seed 4242)."),
    Group("cpu-bug-activation-nan-grad", ("activation", "relu", "clamp", "logit"), VAL,
          all_of(phase("backward"), fill("edge"), in_dtype("float")),
          "CPU bug: the gradient of hardtanh/relu6, hardshrink/softshrink, elu/celu/selu and hardswish at a NaN "
          "input depends on where the element sits: ATen's vectorised loop gives 0 (hardtanh, shrink: their masks "
          "are false for NaN) or NaN (elu, hardswish: NaN enters the formula), its scalar tail (the last "
          "numel % vector-width elements, and float16 throughout) passes the incoming gradient; float64 the "
          "same. neuron gives every element the vector body's value, what nearly every element of a large "
          "tensor gets. (The kinks themselves agree: relu6 at 0 and 6, hardtanh at its bounds, clamp at a "
          "bound.) logit's gradient too: with eps its vector body gives a NaN input 0 (outside [eps, 1 - eps]), "
          "its scalar tail NaN; at x = -0.0 the body divides (dy / -0: -inf for dy = 1), the tail multiplies by "
          "inf (+inf); neuron gives the body's."),
    Group("index-put-duplicate-indices", ("index_put_",), VAL,
          all_of(fn("Tensor.index_put_", "torch.index_put", "setitem"), not_(kwarg("accumulate", True)),
                 not_(in_dtype("float64")), not_(nonfinite)),
          "index_put_/setitem without accumulate and with repeated indices: documented as undefined; the CPU's "
          "serial loop keeps the last write in its iteration order, neuron's kernel writes in another order "
          "(2 of 153,006 cases of seed 7006; complex64 too, 1 of 1,636,992 of seed 31415926)."),
    Group("cpu-bug-batch-norm-strided-weight-backward", ("batch_norm",), VAL,
          all_of(phase("backward"), layout("expanded", "strided", "offset")),
          "CPU bug: batch_norm (training) backward with a non-contiguous weight reads the weight as if it "
          "were contiguous: with w = tensor([1., 2., 3., 4.])[::2] the CPU's input gradient of channel 1 uses "
          "2.0 instead of 3.0 (an expanded weight reads past its one element, -1.7e-40); its float64 run has "
          "the same bug. The same weight made contiguous gives neuron's values."),
    Group("cpu-norm-cancellation", ("layer_norm", "group_norm"), VAL,
          all_of(in_dtype("float64"), fill("edge"), not_(nonfinite)),
          "float64 rows with |mean| >> std (values of 1e18): the CPU normalises as x * (rstd w) + (b - mean "
          "rstd w), which cancels catastrophically (a group of [1e18, 1e18] gives 947 where the exact result "
          "is the bias; layer_norm's weight gradient -26556 where it is 1.0), in its float64 run too. "
          "neuron's layer norm centres x - mean first (exact there); its group norm uses the CPU's form at "
          "float32 precision, whose error differs (0.0)."),
    Group("cpu-bug-pad-circular-uninitialized", ("pad",), VAL, kwarg("mode", "circular"),
          "CPU bug: F.pad circular with a negative pad on one side and a wrap wider than what is left of the "
          "row (pad [2, -1] of a width-2 row): ATen's composite copies the wrap out of elements of its "
          "at::empty output that nothing wrote, so the CPU returns whatever memory held (4.6e-41, 6.4e35); "
          "neuron's fresh block held zeros. Every written element agrees: the wraps copied from the output "
          "itself follow the CPU's copy order since COPY_ORDERED (a 90 s pad fuzz of seed 8675309: the 43 cases left "
          "are all of this kind)."),
    Group("cpu-bug-sdpa-value-stride0-last-dim", ("sdpa",), VAL, _value_last_dim_expanded,
          "CPU bug (Intel AVX-512 hosts): scaled_dot_product_attention with a value expanded along its last dim "
          "(stride 0; the CPU then takes its math path) gives NaN rows where the same values made contiguous give "
          "numbers: 15001-28795, a causal row whose one visible value row is 0 and whose masked keys hold -3.4e38, "
          "is NaN on the CPU, 0 with v.contiguous() on the CPU and on neuron (bit for bit). Ordinary values agree "
          "(100 random problems)."),
    Group("cpu-quirk-sdpa-zero-scale", ("sdpa",), VAL, kwarg("scale", 0.0),
          "scaled_dot_product_attention with scale=0.0: the documented math (softmax(q k^T * 0 + bias)) gives "
          "a causal row the mean of its visible values. The CPU's flash kernel fills the causal -inf before "
          "scaling (-inf * 0 = NaN: every causal row is NaN) and multiplies an infinite q k^T by 0 (NaN) in "
          "the forward, while its backward hands scale to the GEMM as alpha, which BLAS applies without "
          "forming the product (no NaN there). neuron computes the documented formula for causal rows and "
          "the flash forward's NaN for infinite products."),
    Group("cpu-bug-multi-margin-empty", ("cross_entropy",), VAL, all_of(fn("F.multi_margin_loss"), zero_size),
          "CPU bug: multi_margin_loss of an empty integer input with reduction='sum' returns an uninitialised "
          "value (116, 8 in the float64 run); neuron returns 0, the sum of nothing."),
    Group("cpu-bug-int-min-div-trunc", ("div", "floor_divide", "operator"), ("crash",),
          all_of(fn("torch.div", "Tensor.div", "Tensor.div_", "torch.floor_divide", "Tensor.floor_divide",
                    "Tensor.floor_divide_", "operator.floordiv", "operator.ifloordiv"), in_dtype("int")),
          "CPU bug: integer division of the type's minimum by -1 (int32 -2147483648 // -1, rounding_mode='trunc') "
          "traps: SIGFPE in the CPU's kernel kills the worker; neuron wraps, as two's complement does."),
    Group("cpu-bug-fmod-vector-huge-quotient", ("fmod", "remainder", "operator"), VAL,
          all_of(fn("torch.fmod", "Tensor.fmod", "Tensor.fmod_", "torch.remainder", "Tensor.remainder",
                    "Tensor.remainder_", "operator.mod", "operator.imod"), nonfinite,
                 any_of(fill("edge"), _tiny_scalar_arg)),
          "CPU bug: ATen's vectorised fmod (and remainder, built on it) returns NaN where x / y overflows the "
          "float type, e.g. a divisor of 1e-40: fmod(5., 1e-40) is NaN in the loop's vector body, 4.2e-41 in "
          "its scalar tail and in std::fmod (the exact remainder); torch.fmod(torch.full((20,), 5.), 1e-40) gives "
          "NaN for the first 16 elements only (seed 5150, an int16 tensor promoted to float32). neuron gives the "
          "exact remainder everywhere."),
    Group("cpu-bug-var-mean-welford-inf", ("var_mean", "std_mean"), VAL,
          all_of(nonfinite, phase("forward"), lambda c, r: set(r.get("detail", {}).get("names", {})) == {"out[1]"}),
          "CPU quirk: the mean output of var_mean/std_mean comes from Welford's update, so a group with an inf "
          "gets NaN (inf - inf) unless the inf is last: var_mean([1, inf, 2]) has mean nan, var_mean([1, 2, "
          "inf]) mean inf, and torch.mean of either is inf (its float64 run the same); neuron returns the "
          "mean, inf. The variances agree (NaN)."),
    Group("cpu-bug-mode-nan-order", ("mode",), VAL, any_of(nonfinite, fill("edge")),
          "CPU bug: mode of a group with NaN sorts with operator< (NaN breaks its ordering), so the answer "
          "depends on where NaN sits: mode([15, nan]) is 15, mode([nan, 15]) nan, mode([2, nan, 2, nan, nan]) "
          "2 (float64 the same); neuron gives 15, 15, 2."),
    Group("cpu-bug-antialias-output-width-1", ("interpolate",), VAL,
          all_of(any_of(kwarg("antialias", True), _uint8_generic_interp), _aa_output_width_one),
          "CPU bug: antialiased bilinear/bicubic interpolation to an output width of 1 gives every output row "
          "the value of the first ([1, 10] -> 3 rows is [1, 1, 1], its float64 run too); the same "
          "computed transposed (output height 1) agrees with neuron ([1, 5.5, 10] for bilinear). The same "
          "separable kernel computes uint8 bilinear/bicubic with more than 4 channels (not channels-last), "
          "antialiased or not: a [1, 5, 4, 3] ramp to (3, 1) is [6, 6, 6] per channel, [6, 22, 38] in float "
          "and on neuron. (uint8 with up to 4 channels takes the AVX2 kernel and agrees with neuron.)"),
    Group("cpu-bug-uint8-interpolate-width-1-view", ("interpolate",), VAL, _uint8_interp_width_one_view,
          "CPU bug: the AVX2 uint8 bilinear/bicubic kernel (up to 4 channels) repacks a 'contiguous' input "
          "reading pixel i at i * stride(W); a [N, C, H, 1] transposed view has stride(W) = H, so it reads "
          "other pixels or past the storage (2 -> 3 rows of [0, 3] gives [0, 71, 153], varying run to run). "
          "neuron reads the view's elements."),
    # ---- float64 at float32 precision (documented) ---------------------------------------------------------
    # Only what float32 precision explains: Python scalars beyond float32's reach, eps parameters, small
    # differences, and elementwise results at the edges. A float64 reduction or summed gradient at the edges
    # has the order issue its float32 run has too: it stays with its op's group.
    Group("float64-beyond-float32", ("*",), VAL,
          any_of(all_of(kwarg("dtype", {"dtype": "float64"}), any_of(nonfinite, fill("edge"))),
                 all_of(in_dtype("float64"),
                        any_of(py_scalar_beyond(1e18), kwarg("eps"), maxdiff_below(1e-3),
                               all_of(any_of(nonfinite, fill("edge")), _elementwise_in_float32),
                               # a broadcast operand's gradient: a sum at float32 resolution (18201-1684380:
                               # addcdiv's divisor gradient of integers over normals, 0.054 off where float64
                               # cancels to 2e-13)
                               all_of(phase("backward"), maxdiff_below(1.0),
                                      lambda c, r: c.get("family") in ("binary", "ternary")),
                               # an expanded input's gradient, summed by autograd over its copies, from
                               # finite ordinary values: the sum at float32 resolution (19402-58844: a
                               # layer_norm input gradient that cancels to 1e-12 in float64 is 1e-3)
                               all_of(phase("backward"), layout("expanded"), not_(fill("edge")),
                                      not_(nonfinite), maxdiff_below(1e-2)),
                               # gradient formulas that square or multiply edge values past float32's
                               # range (19501-143113: addcdiv's t1 / t2^2 with t2 = 1e-30 is 0 / 0 at
                               # float32 precision, a number in float64)
                               all_of(phase("backward"), fill("edge"),
                                      lambda c, r: c.get("family") in ("binary", "ternary")),
                               # a norm's gradient divides by norm^(p - 1), which float32 flushes to 0 for
                               # small norms the double forward keeps (20101-861654: vector_norm(ord=3) of
                               # [0, -1e-30] is 1e-30, its gradient x |x| / norm^2 is 0 / 0 = NaN at float32
                               # precision; the CPU's float32 run flushes the norm itself and masks it to 0)
                               all_of(phase("backward"), fill("edge"), fn("linalg.vector_norm", "torch.norm")),
                               # sinc's backward cancels for small x (libm-ulp-cancellation), at float32
                               # resolution here (19501-876691: x = 7.8e-5, 1.5e-3 where float64 gives 2.6e-4)
                               all_of(phase("backward"), fn("torch.sinc", "Tensor.sinc", "Tensor.sinc_"),
                                      maxdiff_below(1e-2)),
                               all_of(fill("edge"), lambda c, r: c.get("family") in ("matmul", "conv"))))),
          "float64 is computed at float32 precision on neuron (documented): values past float32's range "
          "become inf (fill_(3.5e38), nan_to_num's default posinf, 1e18 products), parameters round to float32 "
          "(logit's clamp at 1 - 1e-6 is 0.99999899: 13.802 where float64 gives 13.8155), and sums of +-1e18 cancel "
          "(a Python scalar of 1e30 as lerp's weight or add's alpha: the CPU's float64 gradient keeps a rounding "
          "residual of -1.4e14, float32's cancels to 0) "
          "at float32 resolution; gradients that should cancel to ~1e-13 come out ~1e-4 (~1e-3 where an expanded "
          "input's gradient sums dozens of them). Python scalars past "
          "float32's range also reach index_fill/scatter/masked_fill values (1e308 becomes inf) and float64 "
          "remainder by an integer (1e18 % 255: 100 in float64, 85 from float32(1e18)). Matrix products and "
          "convolutions of float64 edge values likewise sum 1e18 terms at float32 resolution (seed 27182818: "
          "addmm of integers by a column holding 1e18 is -6.9e10 where float64 gives -0.49). A float32 input "
          "reduced with dtype=torch.float64 has a float64 result, and the pointwise steps after the double sum "
          "run at float32 precision: nanmean's division (its float64 nansum of -6.8e38 divided by the count "
          "is -inf), the float64 backward formulas of cumprod. A norm's gradient divides by norm^(p - 1), which is 0 at float32 "
          "precision for norms the double forward keeps (vector_norm(ord=3) of 1e-30: 0 / 0 = NaN)."),

    Group("reduce-dtype-kwarg", ("sum", "mean", "nansum", "nanmean", "prod", "cumprod", "vector_norm"),
          VAL + DTYPE + CPU_RJ + DEV_RJ + EXC, kwarg("dtype"),
          "Reductions with dtype= where the arithmetic differs from the CPU's "
          "(complex64/complex128 sums and products follow the CPU's cascade / vectorised order in complex<float> "
          "(kernels/reduce/cascade.c, kernels/complex/reduce.c): 3.4e38 * 10 + 0j is inf + nan j on both); "
          "(vector_norm of every finite order into float32/16-bit sums in float as the CPU since dfe5eca); "
          "(float64 pointwise steps after a "
          "float64 dtype= reduction, nanmean's division and cumprod's backward, are float64-beyond-float32). Row ops into float64 compute in double, "
          "16-bit scans in float, nansum follows the CPU (build/fuzz-16180339: 14 -> 7 cases by --explain: "
          "2 complex64 prod, 2 nanmean and 3 float64 backward formulas)."),
    Group("norm-backward-ill-conditioned", ("group_norm", "layer_norm"), VAL,
          all_of(phase("backward"), maxdiff_below(1e-2), any_of(kwarg("eps", 0.0), layout("expanded")),
                 any_of(fn("F.group_norm", "F.instance_norm"), in_dtype("bfloat16", "float16"))),
          "group_norm/layer_norm gradients with eps=0 or repeated (expanded) rows: a near-zero variance "
          "amplifies rounding, and neuron's gradient is farther from float64 than the CPU's (by up to 1e-3). "
          "float32 layer_norm follows the CPU's forward and backward order bit for bit since fe08159 (case "
          "16180339-1500063 agrees), and contiguous float32 group_norm's input gradient mostly does (51 of 54 "
          "crafted shapes; groups of more than 16 weighted channels still differ); left: 16-bit and "
          "channels-last group_norm/instance_norm, 16-bit layer_norm backward."),
    Group("norm-backward-zero-variance-16bit", ("group_norm", "layer_norm"), VAL,
          all_of(phase("backward"), layout("expanded"), in_dtype("bfloat16", "float16"),
                 not_(fn("F.layer_norm")), not_(fn("F.instance_norm"))),
          "(F.layer_norm left out: its backward reads the 16-bit-rounded mean/rstd as the CPU does; "
          "14142135-13702 and -135982 agree. F.instance_norm left out: its batch_norm backward follows the "
          "CPU's 16-bit kernels with 16-bit saved statistics, invstd 316 not 316.2; 14142135-273746, -817771, "
          "-846423 agree.) "
          "16-bit group_norm input gradients of constant (expanded) rows: the exact "
          "gradient summed over the expansion is 0 (float64: 1e-13), but each term is rstd = 1/sqrt(eps) = 316 "
          "times a gradient, rounded to 16 bits, so both sides return rounding noise of a few ulps at that "
          "magnitude (seed 90210: CPU -2.75, neuron 7.25 over 17 terms)."),

    # ---- non-finite propagation ---------------------------------------------------------------------------
    Group("nonfinite-attention", ("sdpa",), VAL, any_of(nonfinite, fill("edge", "maskrows", "mask")),
          "scaled_dot_product_attention with inf/NaN or values near float32's limit: neuron takes the CPU's "
          "path (flash or math, by the CPU's rules, a 3-d mask to math) and, for inf/NaN inputs, a reference "
          "path with the CPU flash kernel's arithmetic: q k^T in float32 term by term (MKL's order up to head "
          "dim 11), NaN reaching an unmasked row's maximum only from whole 16-float vectors of a 512-key block, "
          "0 x inf for every key, a backward with exp(s - lse) weights and dsum = dO . out (seeds 27182818 / "
          "4242, sdpa only: 58 -> 29 of 19,888 and 69 -> 34 of 29,088 cases; the blocked backward's D = dO . out "
          "is float32 as its dP, so a lone key cancels). On the CPU's math path, problems "
          "whose bmm's are all small (M*N*K < 400, ATen's plain loop) replay that decomposition's order "
          "(kernels/attention/math.c; build/fuzz-16180339's 43 cases: 32 agree now; fresh 120 s sdpa runs: "
          "seed 27182 10 of 37.5k cases, seed 31337 8 of 41.5k, 7 of them flash). The reference path's forward "
          "and float32/float64 backward are the flash kernel's float32 arithmetic (out = sum e_j v_j times "
          "1/sum, dS = P (dP - D) with D from the stored output, float64 too; grad_q of keys expanded over the "
          "sequence by ATen's gemm loop): fresh seed 9161, 120 s: 13 -> 9 of the same 42k cases; seed 9173: 8 "
          "of 40k. What is left: math-path "
          "problems with a bmm of 400 or more (MKL's order, via neuron's bmm and softmax), gradients of "
          "expanded inputs that autograd sums after the op in another layout than the CPU's math path leaves "
          "them (its dK is the transpose of a contiguous [E, S] product; the meta function's empty_like(key) "
          "fixes ours as contiguous, and neuron's composed math path differs in dq instead: 6 of 96 crafted "
          "results vs 5; on the flash path neuron now runs the CPU's own op, whose backward returns dK in the "
          "CPU's transposed [B, S, H, E] layout, so the sum runs in the CPU's order; an expanded key's "
          "gradient from 1e18/3e38 inputs still differs where the summed dK differs by an ulp: 300 random "
          "such problems, 110 -> 95 beyond tolerance), 16-bit backward (the CPU rounds weights and dS to 16 bits between its GEMMs; on AVX512-BF16 Intel "
          "hosts bfloat16 scores follow the brgemm's two arrangements, qk_order.c: sdpa-only fuzz 27 -> 15 "
          "and 10 -> 9 of seeds 15001 and 15002's cases; keys expanded over the sequence take another kernel, "
          "not followed), and "
          "flash cases with finite edge values on the blocked kernel (its q k^T order is not MKL's: "
          "92-97% agree from head dim "
          "12 up) and float64 gradients of 1e18-scale inputs that are farther from the CPU's float64 result than "
          "the CPU's own float32 computation (the fuzzer accepts the others, fuzz_compare.rescued_by_f32); and "
          "the CPU's own blocking of "
          "keys beyond 512. The bfloat16 backward with one query or one key follows the CPU's "
          "(its GEMM scales the matrix operand before the products, four sums over e mod 4: 14142135-508801 and "
          "-350498 agree); other bfloat16 backward blocks were probed only by their scaling (mostly after the "
          "sum, as neuron; L = 2..17 with S = 33 before). The float32 cases 14142135-596436 / -778009 are the "
          "math path with a bmm of 400 or more (expanded q, transposed v): MKL's sgemm sums K = 8 so that "
          "2e38 + 2e38 - 2e38 stays finite (neuron's bmm: inf). The MKL orders above were probed on AMD (Zen) "
          "hosts. On Intel AVX-512 hosts the reference path sums q . k in the tree of the MKL kernel the CPU's "
          "flash kernel takes there (kernels/attention/qk_order.c: four kernels by block shape, read off with "
          "rooted-triple probes), ATen's loop for operands BLAS refuses on every host, and float32/float64 "
          "inputs beyond 2^64 take the reference path there (sdpa-only fuzz, seed 15001, ~150k cases: 79 -> 53). "
          "Left on Intel: bfloat16 (the CPU's oneDNN AMX GEMM treats denormal inputs as 0, so 1e-39 x inf is NaN, "
          "and sums the even and the odd positions in two chains; one query or one key in a pairwise tree; its "
          "row maximum takes NaN from fewer than 16 keys: a model of the GEMM alone moved random +-3e38/inf/"
          "denormal problems from 175 to 118 of 300 NaN-pattern mismatches but fixed no fuzz case and broke a "
          "backward one, so it is not in), dP - D "
          "cancellations with 1e18-scale v (the CPU's dP and its map2_reduce_all D in orders not followed: "
          "following dP alone broke 4 lone-key cases), P . V at the limits, and one-query/one-key kernels above "
          "head dim 16. Followed since session 19: the forward's exp over whole vectors of keys is "
          "Vectorized<float>::exp_u20 (float32: NaN -> inf, so a row with a +inf score has lse +inf) or "
          "fexp_u20 (16-bit: NaN -> -0.0, weight 0), the tail's expf keeps NaN, a NaN maximum makes the sum NaN "
          "and a sum of 0 counts as 1; MKL's Intel sgemm in the float32 backward scales the keys by the scale "
          "before the products from 12 keys (>= E, > queries; 18201-2529230). Random edge problems: float32 "
          "23 -> 10 of 400, bfloat16 28 -> 1 of 300, float16 11 -> 0 of 300. Then: dP in the CPU's gemm kernel "
          "and D by map2_reduce_all (float32 random problems 10 -> 0), 16-bit scores with every product fused "
          "(oneDNN; 19402-373996) and, on Intel hosts, the bfloat16 backward's scale after the sum "
          "(19402-245661). sdpa-only fuzz, the same 146,944 cases of seed 15001: 48 at the start of session "
          "19 -> 37; what is left is mostly gradients of expanded keys (summed in our dK's layout, the meta "
          "function's), float64 run at float32 precision, and oneDNN's bfloat16 chains."),
    Group("edge-magnitude-batch-norm-stats",
          ("batch_norm",), VAL,
          all_of(fill("edge"), any_of(all_of(kwarg("training", True), _bn_input_not_contiguous,
                                             not_(in_dtype("float32"))),
                                      in_dtype("float16"))),
          "batch_norm with inputs near the float limits where neuron does not yet follow the CPU's order: "
          "training with a non-contiguous float64 or 16-bit input, whose mean the CPU takes with at::mean (a "
          "float cascade sum that overflows: 3e38 + 3e38 = inf, where neuron sums in double; float32 inputs "
          "take the device's at::mean since this commit: the 8 cases of seed 16180339 agree), and float16 "
          "inputs with float32 "
          "parameters, whose running variance update differs from the CPU's in the last bit. Contiguous, "
          "channels-last and 2-d float32 inputs follow the CPU's kernels bit for bit (seed 4242: 69 -> 6 norm "
          "cases), and bfloat16 ones too since 6c3056c (8 float lanes, the rounded mean, BFloat16 running-stat "
          "arithmetic; crafted 5% +-3e38 inputs: 0 of 10 trials differ)."),
    Group("edge-magnitude-interpolate", ("interpolate",), VAL,
          all_of(fill("edge"), not_(all_of(kwarg("mode", "bicubic"), not_(kwarg("antialias", True)),
                                           in_dtype("float32", "bfloat16"), not_(phase("backward")))),
                 # float32/bfloat16/float16 linear/bilinear/trilinear forwards follow the CPU's kernels
                 # (p3 of INTERP)
                 not_(all_of(any_of(kwarg("mode", "linear"), kwarg("mode", "bilinear"), kwarg("mode", "trilinear")),
                             not_(kwarg("antialias", True)), in_dtype("float32", "bfloat16", "float16"),
                             not_(phase("backward")))),
                 # every backward but float64's follows the CPU's scatter order (a10740d)
                 not_(all_of(phase("backward"), not_(in_dtype("float64"))))),
          "interpolate with inputs near the float limits: the forward of 2-d bicubic and antialiased modes "
          "follows the CPU's order (width sums per height tap, then the height sum, each a chain of fused "
          "multiply-adds from the first tap), so plain float32/bfloat16 bicubic forwards agree (seed 9090, "
          "90 s --ops interpolate: edge-magnitude 85 -> 46 interpolate cases, plain bicubic 34 -> 0). Left: "
          "antialiased weights differ from the CPU's in the last bit for some windows (6 -> 2 wide, 6 -> 9), "
          "so sums of huge terms cancel differently; float64 computes in float32 (the warned precision); "
          "backward and the other modes keep their own order. Linear modes (seed 31337: a bilinear and a "
          "trilinear case; 16180339-1434936, trilinear: the whole-row axpys overflow to -inf, then a 0-weight "
          "tap makes NaN): ATen's two-tap Interpolate nests dims and returns t0 * w0 + t1 * w1, compiled as "
          "fma(t0, w0, t1 * w1), and its linear tables fuse scale * (o + 0.5) - 0.5 (one-hot probes: 912 of "
          "912 size pairs now give the CPU's weights): float32 1-d linear follows both (a crafted probe: 43 -> "
          "0 of 68 differ bitwise; float16 tables are not fused there). float32 bilinear/trilinear follow the "
          "kernel the CPU picks (UpSampleKernel.cpp): the nested one, or cpu_upsample_linear_channels_last for "
          "channels-last inputs of C > 3, bilinear outputs with OH + OW <= 128 (why the nested orders probed "
          "before matched nothing: small outputs take this kernel) and C == 3 on one thread, whose 4/8 corner "
          "terms sum in one fma order in its vector lanes and another in its scalar tail (crafted probe, 1 and "
          "2 threads, 4 layouts: 0 of 320 shapes differ; 14142135-355907 agrees). 16-bit bilinear/trilinear take "
          "the same kernels (the nested one with lambdas rounded to the dtype; the channels-last one with "
          "float lambdas, its lanes fusing the other product of the first pair, and float16's tail too): 480 "
          "of 480 probed shapes exact; 16-bit 1-d linear through the nested one (240 of 240). Backward (a10740d): "
          "every mode in the CPU's scatter order (output points in order, bicubic's width tap outer and unfused), "
          "float32/16-bit bitwise in probes (0 of 2,592 2-d/3-d cases, both layouts, 1 and 2 threads). float64 "
          "(a10740d) builds its tables in double as the CPU's opmath, so 57721566-691265 (an antialiased tap at "
          "the filter's edge, 1e-17 in double and 0 in float: inf * 0 = NaN where the CPU has -inf) agrees; its "
          "sums stay float32 (the warned precision). Antialiased float32 weights are exact since a10740d (fused "
          "polynomials: 652 of 652 one-hot size pairs). Left: the antialiased forward's sums, which the CPU "
          "fuses or not by which loop its TensorIterator picks (crafted probes: neither order matches every "
          "shape; seeds 9161 and 9162, 120 s each over interpolate, pool, unfold: 0 cases in this group); "
          "plain bicubic float32/float16 weights, a few ulps from the CPU's (one-hot probes: 238 of 332 1-d "
          "size pairs; fused, unfused and double-index models all miss 83 of 176)."),
    Group("edge-magnitude-gemm", ("linear", "mm", "bmm", "matmul", "addmm", "vecdot"), VAL,
          all_of(fill("edge"),
                 # followed since ec267db/21a8dfc/b6d5885: 16-bit GEMMs, bfloat16 gemv, float32 sgemv 'n'
                 not_(all_of(in_dtype("bfloat16", "float16"),
                             fn("F.linear", "torch.mm", "torch.bmm", "torch.addmm", "Tensor.addmm_", "torch.baddbmm",
                                "Tensor.baddbmm_", "torch.addbmm", "Tensor.addbmm_"))),
                 not_(all_of(in_dtype("bfloat16"), fn("torch.mv", "torch.addmv", "Tensor.addmv_"))),
                 # float16 gemv like bfloat16's since this session (a strided matrix: 2 of 400 still differ)
                 not_(all_of(in_dtype("float16"), fn("torch.mv", "torch.addmv", "Tensor.addmv_"),
                             lambda c, r: c["tensors"][c["args"][-2]["t"]]["layout"] != "strided")),
                 # MKL's sgemv 'n' (a column-major matrix): followed on AMD and Intel AVX-512 hosts
                 not_(all_of(_host_amd_or_intel, in_dtype("float32"), fn("torch.addmv", "Tensor.addmv_"),
                             not_(phase("backward")),
                             lambda c, r: c["tensors"][c["args"][1]["t"]]["layout"] == "transposed")),
                 # float32 sgemv 't' (a row-major matrix, any vector but a strided one): AMD since a31625d,
                 # Intel AVX-512 since session 18
                 not_(all_of(_host_amd_or_intel, in_dtype("float32"), fn("torch.mv", "torch.addmv", "Tensor.addmv_"),
                             not_(phase("backward")),
                             lambda c, r: c["tensors"][c["args"][-1]["t"]]["layout"] != "strided"))),
          "Inputs near the dtype's limits (float32 +-3.4e38) in GEMMs where neuron does not yet follow the CPU's "
          "order: MKL's sgemv 't' with a strided vector (MKL reads it through a buffer of its own), MKL's "
          "small-sgemm loops where they are not yet pinned down (e.g. 6 x 13 x 6 with a column-major B: 22 of "
          "189 crafted 2-d products differ; bmm entries from 400 multiply-adds take the same paths since "
          "6274aaf), MKL's sdot and small 'T' dot where a row starts off a 32-byte boundary, float16 addmv "
          "of a strided matrix, bfloat16 dot, float64 (run at float32 "
          "precision, DESIGN.md 3) and complex64 huge parts. Followed: bmm/baddbmm below 400 multiply-adds per "
          "entry, float32 mm/addmm below MKL's blocked sgemm, addmv of an expanded vector, and since ec267db "
          "bfloat16/float16 mm/addmm/F.linear/bmm/baddbmm (ATen's cpublas loops up to 16^3 multiply-adds for "
          "bfloat16, every float16; oneDNN's fma(beta, bias, alpha * sum) above: 14142135-471423/-861864 "
          "agree), bfloat16 mv/addmv (ATen's gemv<BFloat16>, 21a8dfc) and float32 addmv of a column-major "
          "matrix (MKL's sgemv 'n', b6d5885), float32 sgemv 't' (row-major mv/addmv, mm/addmm with one output "
          "column or row, F.linear of a vector: 4-row blocks with a head up to the 16-byte boundary of the "
          "block's last row, 4 lanes; rows after the blocks from the vector's address, 8 lanes; a31625d: "
          "57721566-446342 agrees), k == 1 addmm's alpha placement (70a3219: 9301-10022), 1 x 1 addmm "
          "(1a147d6). Fresh seeds, 120 s of the gemm ops: 9301 (94k cases) 1 (fixed since), 9302 (70k) 3 "
          "(float32 baddbmm, fixed since; bfloat16 dot; complex64), 9303 (42k) 0. Those are MKL's Zen "
          "kernels. On Intel AVX-512 hosts (session 18) neuron follows MKL's AVX-512 cgemm/zgemm paths and "
          "cdotu/cdotc (inf/NaN parts), sgemm's fused k order with C = fma(beta, bias, alpha * sum) for C of "
          "2 x 2 and more with 'a' not transposed, k == 1 and 1 x 1 products, sgemv 'n' (SGEMV_N8) and sgemv "
          "'t' up to 8k multiply-adds (SGEMV_T p3: mv of a row-major matrix, F.linear of a vector, one column "
          "of C over a row-major A); not yet its 'a'-transposed lane kernels (8 lanes for k < 10 on some "
          "shapes, 4-deep chunks for m >= 13 with both transposed), larger sgemv 't', zgemm's beta == 1 "
          "split. 120 s of the gemm ops, 2 workers (~210k cases each): 316 (seed 18001, before) -> 50 "
          "(18004); the 20-minute run 18201 (2.56M cases, before sgemv 't'): 10, 7 of them agree since. "
          "Session 19: float32 torch.dot follows MKL's AVX-512 sdot there (kernels/gemm/sdot.c: 16-lane "
          "accumulators, four from 64 elements, fused; strided: 4 lanes and a pairwise tail), 18201-910074 "
          "agrees. Session 21: complex mm/addmm with one output column from a row-major matrix of 2+ rows "
          "sums each row in MKL's cgemv/zgemv 't' lanes there (8 complex64 / 4 complex128, then halves; "
          "20101-2248090 agrees); complex mv/addmv's own gemv order is not followed."),
    Group("edge-magnitude-conv", ("conv",), VAL, fill("edge"),
          "Convolutions with inputs near the dtype's limits where the CPU's own order decides. Launches whose "
          "sums could pass FLT_MAX run neuron's loop nest in double in the CPU's float64 (im2col) grouping, "
          "which the CPU's float32 result or the float64 re-check accepts almost always (seed 501: 26 -> 2 "
          "of 42k cases); the forward's bias goes where the float64 GEMM adds it (on Intel AVX-512 hosts "
          "first for one or two output channels per group, after the products from three; 20101-1041488 "
          "agrees; AMD: first); left: a single output pixel (the GEMV's lanes, not followed), oneDNN's direct kernels skip taps in the zero padding (an inf weight or output "
          "gradient there: the CPU finite, float64 and neuron NaN), oneDNN's float32 order overflows or "
          "cancels huge terms unlike float64 where the re-check does not settle it, and float16 products of "
          "+-65504 cancel in float32 in another order (not rerouted: real float16 data reach such products)."),
    Group("edge-magnitude-norm", ("layer_norm", "group_norm"), VAL,
          all_of(fill("edge"), any_of(layout("channels_last"), phase("backward")),
                 not_(fn("F.layer_norm")), not_(fn("F.instance_norm")),
                 # float32 channels-last forwards follow ColumnwiseMoments (0a4bb37)
                 not_(all_of(fn("F.group_norm"), phase("forward"), in_dtype("float32")))),
          "group_norm/rms_norm with inputs near the dtype's limits where neuron does not yet "
          "follow the CPU's order: 16-bit channels-last group_norm statistics (the CPU's ColumnwiseMoments / "
          "CalcMeanVar in float lanes of paired halves), and group_norm's backward. (float32 channels-last "
          "group_norm forwards of planes under 1024 values follow ColumnwiseMoments bit for bit, 8313-76726 "
          "agrees.) (F.layer_norm's weight/bias gradients follow the CPU's "
          "per-thread buffers, 57721566-705600 agrees; F.instance_norm's backward is batch_norm's, which "
          "follows the CPU's contiguous and channels-last kernels, 8311-33050 agrees.) layer_norm and contiguous group_norm forwards follow ATen's "
          "RowwiseMoments (float Welford, 8 lanes, cascade) bit for bit (fe08159 and after): of the 9 cases of "
          "seed 16180339 (1.5M-case run) 8 agree now; the one left is a channels-last bfloat16 group_norm "
          "(16180339-983201: CPU inf, neuron NaN)."),
    Group("libm-ulp-cancellation", ("sinc",), VAL, all_of(phase("backward"), in_dtype("float32")),
          "sinc's backward, PyTorch's composite (pi x cos(pi x) - sin(pi x)) / (pi x^2), cancels for small x: "
          "a 1-ulp difference in cos is the whole difference. Neuron's float32 cos is the correctly rounded one "
          "where the CPU's vectorised Sleef cos is an ulp off (x = 5.44e-4: cos(pi x) 0.99999851 on neuron, "
          "0.99999857 on the CPU, 0.9999985381 exact), and the CPU's gradient happens to land nearer float64 "
          "(fuzz 9103-71704: -0.0017511 CPU, -0.0018762 neuron, -0.0017907 float64). Following the CPU would "
          "mean Sleef's cosf/sinf bit for bit."),
    Group("edge-magnitude", ("loss", "cross_entropy", "pool", "cumsum", "normalize"),
          VAL, all_of(fill("edge"), not_(fn("F.multi_margin_loss")),
                      # nll_loss of any rank sums in the CPU's cascade (NLL_LOSS_REDUCE)
                      not_(fn("F.nll_loss"))),
          "Inputs near the dtype's limits (float32/bfloat16 +-3.4e38, float16 +-65504) in reductions, pooling "
          "and losses: sums of huge terms overflow or cancel differently in neuron's accumulation order than in "
          "the CPU's (adaptive_avg_pool1d of [.., 3.4e38, .., -3.4e38] gives 0.0 on neuron, -0.045 on the CPU "
          "and in float64). multi_margin_loss follows ATen's kernel term for term since the MULTI_MARGIN_LOSS "
          "kernel (build/fuzz-16180339: its 11 cases agree), and so does a spatial nll_loss's sum/mean "
          "(NLL_LOSS_REDUCE, the CPU's cascade: the one nll_loss case there agrees), as do the "
          "1-d/2-d nll_loss's (NLL_LOSS_REDUCE with M = 1; 14142135-849927 agrees). cdist left the group: it computes in the input dtype "
          "in ATen's order (seed 777002, 100 s of cdist, 57k cases: 0 value mismatches). Real float sum/mean follow the CPU's cascade order "
          "since 096cd9b (seed 27182818, "
          "110 s of sum,mean,nansum,nanmean,var_mean,std_mean: 0 real sum/mean cases); nansum/nanmean (the "
          "cascade's NaN-as-0 mode on self) and var_mean/std_mean (the CPU's Welford order) left the group "
          "(build/fuzz-16180339's 13 var_mean/std_mean and nansum cases agree by --explain; seed 16180339, 112 s "
          "of the reduce family, 122k cases: none)."),
]
