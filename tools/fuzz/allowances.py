"""Deliberate extensions: inputs the neuron device accepts where the CPU
raises, on purpose. The fuzzer marks a result covered here ``allowed``; it
does not count as a disagreement (`make test` passes with it).

Add an entry only for a behaviour that is meant to stay, with the reason a
user would accept; a disagreement waiting for a fix goes to known.py.
"""
from __future__ import annotations

from fuzz_match import Group, all_of, cpu_exc, cpu_msg, cpu_scalar, first_dtype, fn, in_dtype, kwarg, not_

CPU_RJ = ("cpu-rejects-device-accepts",)

ALLOWANCES: list[Group] = [
    Group("cpu-lacks-16bit-kernel", ("*",), CPU_RJ,
          all_of(cpu_msg("not implemented for 'Half'", "not implemented for 'BFloat16'"),
                 not_(in_dtype("int", "bool", "complex64")),
                 # bitwise ops and shifts have no floating form on any device: not an extension
                 not_(cpu_msg('"bitwise_', 'shift_cpu"'))),
          "PyTorch's CPU build has no float16/bfloat16 kernel for the op (multi_margin_loss, polar, "
          "avg_pool3d, bicubic/antialiased interpolation, cdist, ...); neuron computes it in float32 and "
          "rounds once, as CUDA does. bfloat16 is this hardware's low-precision type."),
    Group("cpu-lacks-16bit-kernel-invalid-input", ("*",), ("both-raise-different-class",),
          all_of(cpu_msg("not implemented for 'Half'", "not implemented for 'BFloat16'"),
                 not_(in_dtype("int", "bool", "complex64")), not_(cpu_msg('"bitwise_', 'shift_cpu"'))),
          "The same extension with an input that is invalid for every dtype (multi_margin_loss with a target "
          "out of range): the CPU refuses the 16-bit dtype first (NotImplementedError), neuron, which computes "
          "that dtype, raises what the CPU raises for the input in float32 (RuntimeError 'target out of range')."),
    Group("cpu-bug-sdpa-low-rank-mask", ("sdpa",), CPU_RJ + ("both-raise-different-class",),
          all_of(kwarg("attn_mask"), cpu_exc("IndexError"),
                 cpu_msg("but tensor has no dimensions", "Dimension out of range")),
          "scaled_dot_product_attention with a 0-d or 1-d attn_mask (documented: any mask broadcastable to "
          "(L, S)): the CPU's backend selection reads attn_mask.size(-2) (check_attn_mask_shape) before "
          "anything broadcasts it and raises IndexError; the same mask is computed when the check is skipped "
          "(a mask that requires grad, or sdpa_kernel(SDPBackend.MATH)). neuron broadcasts the mask as "
          "documented (and with integer q, k, v then raises for the dtype, where the CPU's IndexError came "
          "first)."),
    Group("cpu-max-pool1d-integer", ("pool",), CPU_RJ,
          all_of(fn("F.max_pool1d"), cpu_msg('"max_pool1d_impl" not implemented for'), in_dtype("int")),
          "F.max_pool1d of an integer tensor without return_indices: the CPU's max_pool1d_impl shortcut has "
          "floating kernels only, while its max_pool1d with return_indices=True, max_pool2d and max_pool3d pool "
          "integers; neuron pools integers in every form, as CUDA (whose max_pool1d is max_pool2d's)."),
    Group("cpu-conv-transpose-empty-output", ("conv",), CPU_RJ,
          all_of(cpu_msg("Output size is too small"), first_dtype("float32", "complex64")),
          "A float32 transposed convolution whose output has a size of 0: the CPU's oneDNN path returns the "
          "empty result, its native path (which it picks for small batches, 1x1 kernels, one thread) raises "
          "'Output size is too small'. neuron returns the empty result, as oneDNN and the CPU's bfloat16 do; "
          "a negative size raises on both. (complex64 convolves its float32 parts.)"),
    Group("fill-expanded-with-cpu-value", ("fill_",), CPU_RJ,
          all_of(fn("Tensor.fill_"), cpu_scalar, cpu_msg("more than one element of the written-to tensor")),
          "fill_ of an expanded tensor with a 0-d CPU value tensor: ATen's fill_ fills with value.item() when the "
          "value is on another device (fill_out, which allows the overlap; neuron does this, as CUDA does), and "
          "copies when it is on the same device (copy_, which refuses it): the CPU reference has both on the "
          "CPU. A neuron value raises on neuron too."),
    Group("cpu-memory-format-unsupported", ("pool",), CPU_RJ + ("both-raise-different-class",),
          cpu_msg("Unsupported memory format"),
          "max_pool3d of a tensor that is neither contiguous nor channels_last_3d: the CPU kernel refuses the "
          "layout, neuron pools any strides (it copies to its own layout first); with a dtype neither pools "
          "(bool), that refusal of the layout comes before the CPU's dtype check, neuron's dtype refusal is "
          "its only one (NotImplementedError)."),
]
