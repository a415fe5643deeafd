"""The fuzzer's float64 rule (tools/fuzz/fuzz_compare.py): neuron computes
float64 at float32 precision (documented), so a float64 result is accepted
when it is within float32 tolerance of the case computed in float32 on the
CPU, or no farther from the CPU's float64 result than that computation is,
and refused otherwise."""
import os
import sys

import torch

FUZZ_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tools", "fuzz")
if FUZZ_DIR not in sys.path:
    sys.path.insert(0, FUZZ_DIR)

from fuzz_compare import rescued_by_f32, rescued_by_f64  # noqa: E402

F64 = torch.float64


def _sides(dev, cpu64, cpu32):
    return ({"grad0": torch.tensor(dev, dtype=F64)}, {"grad0": torch.tensor(cpu64, dtype=F64)},
            {"grad0": torch.tensor(cpu32, dtype=torch.float32)})


def test_float64_within_float32_tolerance_of_the_float32_run_is_accepted():
    dev, cpu, r32 = _sides([1.0, 2.0000001], [1.0, 2.0], [1.0, 2.0000001])
    assert rescued_by_f32(dev, cpu, r32, ["grad0"], acc=False)


def test_float64_no_farther_than_the_cpus_float32_is_accepted():
    # 19501-2001390's shape: keys of 1e18 leave float32 rounding of 1e11 in a gradient of 9.8
    dev, cpu, r32 = _sides([-1.79e11, 1.0], [9.8, 1.0], [-1.84e11, 1.0])
    assert rescued_by_f32(dev, cpu, r32, ["grad0"], acc=True)


def test_float64_farther_than_the_cpus_float32_is_refused():
    # 19501-1454185's shape: the CPU's float32 agrees with its float64 (128), neuron's float32 order does not
    dev, cpu, r32 = _sides([5.96e10, 1.0], [128.0, 1.0], [128.0, 1.0])
    assert not rescued_by_f32(dev, cpu, r32, ["grad0"], acc=True)


def test_float64_a_few_float32_errors_off_is_accepted_and_more_is_refused():
    # 20101-2886051's shape: six gradient terms of 2.3e6 (float32 ulp 0.25) cancel to 0 in float64;
    # neuron's float32 order leaves 0.5, the CPU's float32 run 0.25
    dev, cpu, r32 = _sides([0.5, 1.0], [-1.86e-9, 1.0], [0.25, 1.0])
    assert rescued_by_f32(dev, cpu, r32, ["grad0"], acc=True)
    dev, cpu, r32 = _sides([1.25, 1.0], [-1.86e-9, 1.0], [0.25, 1.0])
    assert not rescued_by_f32(dev, cpu, r32, ["grad0"], acc=True)


def test_float32_results_are_not_judged_by_the_float64_rule():
    dev = {"out": torch.tensor([5.0])}
    cpu = {"out": torch.tensor([1.0])}
    r32 = {"out": torch.tensor([9.0])}
    assert not rescued_by_f32(dev, cpu, r32, ["out"], acc=False)


def test_nan_on_one_side_only_is_refused():
    dev, cpu, r32 = _sides([float("nan")], [1.0], [float("inf")])
    assert not rescued_by_f32(dev, cpu, r32, ["grad0"], acc=False)


def _sides32(dev, cpu, ref64):
    return ({"grad1": torch.tensor(dev)}, {"grad1": torch.tensor(cpu)}, {"grad1": torch.tensor(ref64, dtype=F64)})


def test_ill_conditioned_float32_a_few_cpu_errors_off_is_accepted():
    # 20101-1781624's shape: a key gradient next to values of 3e38, 0 - 2e21 exactly; the CPU's float32
    # order leaves 2.5e30, neuron's -5.1e30
    dev, cpu, ref = _sides32([-5.07e30, 1.0], [2.54e30, 1.0], [-2.36e21, 1.0])
    assert rescued_by_f64(dev, cpu, ref, ["grad1"], acc=True)
    dev, cpu, ref = _sides32([-1.2e31, 1.0], [2.54e30, 1.0], [-2.36e21, 1.0])
    assert not rescued_by_f64(dev, cpu, ref, ["grad1"], acc=True)


def test_slack_only_where_the_cpu_itself_is_beyond_tolerance():
    # the CPU within float32 tolerance of float64 (8e-6 off 0 with atol 1e-5): the device must be too
    dev, cpu, ref = _sides32([3e-5], [8e-6], [0.0])
    assert not rescued_by_f64(dev, cpu, ref, ["grad1"], acc=False)
    dev, cpu, ref = _sides32([3e-5], [1.2e-5], [0.0])
    assert rescued_by_f64(dev, cpu, ref, ["grad1"], acc=False)
