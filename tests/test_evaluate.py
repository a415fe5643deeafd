"""torch_neuronx.evaluate: the op, numerics and recompile findings on models
built to have exactly one known problem, the command's files, and its
errors for bad targets.

The problems are test doubles registered here through torch.library:
an op with only a CPU kernel (it can reach the device only through the CPU
fallback, whatever ATen gains natively) and an op whose neuron kernel is
deliberately wrong (adds 0.25), each with autograd so that a training step
runs through it.
"""
import json
import subprocess
import sys

import pytest
import torch
import torch.nn as nn

import torch_neuronx.evaluate as tne
from torch_neuronx.evaluate import cli
from helpers import ROOT

_lib = torch.library.Library("neuron_evaluate_test", "DEF")
_lib.define("cpu_only(Tensor x) -> Tensor")
_lib.impl("cpu_only", lambda x: x * 2, "CPU")
_lib.impl("cpu_only", lambda x: torch.empty_like(x), "Meta")
_lib.define("scale(Tensor x) -> Tensor")
_lib.impl("scale", lambda x: x * 2, "CPU")
_lib.impl("scale", lambda x: torch.empty_like(x), "Meta")
_lib.define("wrong_scale(Tensor x) -> Tensor")
_lib.impl("wrong_scale", lambda x: x * 2, "CPU")
_lib.impl("wrong_scale", lambda x: x * 2 + 0.25, "PrivateUse1")  # the wrong kernel
_lib.impl("wrong_scale", lambda x: torch.empty_like(x), "Meta")
_lib.impl("scale", lambda x: x * 2, "PrivateUse1")  # a correct one, for the control


def _setup(ctx, inputs, output):
    pass


def _times_two(ctx, grad):
    return grad * 2


for _name in ("cpu_only", "scale", "wrong_scale"):
    torch.library.register_autograd(f"neuron_evaluate_test::{_name}", _times_two, setup_context=_setup)


class OpModule(nn.Module):
    def __init__(self, op):
        super().__init__()
        self.op = op

    def forward(self, x):
        return self.op(x)


class Net(nn.Module):
    """Linear -> Tanh -> the op under test (module 'special') -> Linear."""

    def __init__(self, op):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.act = nn.Tanh()
        self.special = OpModule(op)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x):
        return self.fc2(self.special(self.act(self.fc1(x))))


def _net(op):
    torch.manual_seed(0)
    return Net(op), torch.randn(4, 8)


QUIET = dict(progress=False, profile=False)


def test_fallback_op_is_reported_exactly():
    model, x = _net(torch.ops.neuron_evaluate_test.cpu_only)
    r = tne.evaluate(model, x, steps=1, compile=True, compile_options={"fallback_execution": False}, **QUIET)
    assert r.fallback_ops() == ["neuron_evaluate_test::cpu_only"]
    rows = {row["name"]: row for row in r["ops"]["float32"]["ops"]}
    row = rows["neuron_evaluate_test::cpu_only"]
    assert (row["forward"], row["backward"], row["execution"], row["compiler"]) == (1, 0, "cpu fallback", "no")
    assert [n for n, row in rows.items() if row["execution"] != "native"] == ["neuron_evaluate_test::cpu_only"]
    assert r["ops"]["float32"]["not_lowerable"] == ["neuron_evaluate_test::cpu_only"]
    verdict = {v["check"]: v for v in r.verdict}
    assert verdict["runs natively"]["status"] == "FAIL"
    assert "neuron_evaluate_test::cpu_only (1 calls)" in verdict["runs natively"]["detail"]
    # The compile fails on that op, and the other phases still reported.
    assert r.phase("neuron compiled")["status"] == "error"
    assert verdict["compiles"]["status"] == "FAIL"
    assert "neuron_evaluate_test::cpu_only" in verdict["compiles"]["next"]
    assert r.phase("neuron eager")["status"] == "ok"
    assert r["numerics"]["float32"]["status"] == "measured"
    assert verdict["numerics within tolerance"]["status"] == "PASS"


def test_wrong_kernel_names_the_module_where_the_error_appears():
    model, x = _net(torch.ops.neuron_evaluate_test.wrong_scale)
    r = tne.evaluate(model, x, steps=2, compile=False, **QUIET)
    num = r["numerics"]["float32"]
    first = num["first_exceeding"]
    assert first is not None and first["module"] == "special", first
    assert first["input_max_rel"] <= num["module_tolerance"] < first["max_rel"]
    # fc1 and act (before it) match the CPU; fc2 (after it) inherits the error.
    by_module = {row["module"]: row for row in num["modules"]}
    assert by_module["fc1"]["max_rel"] <= num["module_tolerance"]
    assert by_module["act"]["max_rel"] <= num["module_tolerance"]
    assert by_module["fc2"]["input_max_rel"] > num["module_tolerance"]
    verdict = {v["check"]: v for v in r.verdict}
    assert verdict["numerics within tolerance"]["status"] == "FAIL"
    assert "'special' (OpModule)" in verdict["numerics within tolerance"]["detail"]
    assert "special" in r.summary()


def test_correct_kernel_is_within_tolerance_through_the_callable_module():
    model, x = _net(torch.ops.neuron_evaluate_test.scale)
    r = tne(model, x, steps=2, compile=False, **QUIET)  # the module itself is callable
    assert isinstance(r, tne.EvaluationReport)
    num = r["numerics"]["float32"]
    assert num["first_exceeding"] is None
    assert num["loss_max_rel"] <= num["curve_tolerance"]
    assert len(num["modules"]) == 5  # fc1, act, special, fc2 and the model
    assert r.fallback_ops() == []


def test_shape_list_gives_the_expected_recompiles():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
    shapes = [(8, 16), (4, 16), (8, 16), (2, 16), (4, 16)]
    r = tne.evaluate(model, (x,), loss_fn=nn.functional.cross_entropy, targets=y, steps=1, shapes=shapes,
                     **QUIET)
    sh = r["shapes"]
    assert [row["recompiled"] for row in sh["rows"]] == [False, True, False, True, False], sh["rows"]
    assert sh["recompiles"] == 2
    assert sh["distinct_shapes"] == 3
    assert "Pad every batch to (8, 16)" in sh["recommendation"]
    # Steady state at one shape: nothing rebuilt (capturable default optimizer).
    assert r["performance"]["float32"]["neuron_compiled"]["rebuilt_in_timed_steps"] == 0
    assert {v["check"]: v["status"] for v in r.verdict}["static shapes"] == "WARN"


def test_float64_is_flagged():
    torch.manual_seed(0)
    model = nn.Linear(4, 2).double()
    r = tne.evaluate(model, torch.randn(3, 4, dtype=torch.float64), steps=1, compile=False, **QUIET)
    verdict = {v["check"]: v for v in r.verdict}
    assert verdict["no float64"]["status"] == "WARN"
    assert "weight" in verdict["no float64"]["detail"]
    assert "aten::addmm" in r["ops"]["float32"]["float64_ops"]


def test_gradient_that_is_zero_in_exact_arithmetic_is_measured_at_the_models_scale():
    from torch_neuronx.evaluate.numerics import gradient_errors

    # A conv bias before BatchNorm: ~1e-9 noise on both sides, beside a
    # weight gradient of order 1. Noise over noise must not read as 100%.
    expected = {"w": torch.tensor([1.0, -2.0]), "b": torch.tensor([3e-9, -1e-9])}
    actual = {"w": torch.tensor([1.0, -2.0 + 2 ** -20]), "b": torch.tensor([-2e-9, 2e-9])}
    rows = {r["parameter"]: r for r in gradient_errors(actual, expected)}
    assert rows["b"]["near_zero"] and not rows["w"]["near_zero"]
    assert rows["b"]["max_rel"] == pytest.approx(5e-9 / 2e-3)
    assert rows["w"]["max_rel"] == pytest.approx(2 ** -21)
    # A real error in a small gradient still shows.
    actual["b"] = torch.tensor([1e-2, 0.0])
    assert gradient_errors(actual, expected)[0]["parameter"] == "b"


TARGET = """
import torch, torch.nn as nn

def build(batch_size=8):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4))
    return {"model": model, "example_inputs": (torch.randn(batch_size, 16),),
            "targets": torch.randint(0, 4, (batch_size,)), "loss_fn": nn.functional.cross_entropy}

def wrong():
    return 42

def not_a_module():
    return ("model", torch.ones(2))

def no_tensor():
    return nn.Linear(2, 2), "inputs"
"""


@pytest.fixture
def target_file(tmp_path):
    path = tmp_path / "target.py"
    path.write_text(TARGET)
    return path


def test_command_writes_html_and_json(target_file, tmp_path):
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "torch_neuronx.evaluate", f"{target_file}:build", "--steps", "1",
                        "--batch", "4", "--no-progress", "--out", str(out)],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Verdict" in r.stdout and f"HTML report: {out / 'report.html'}" in r.stdout
    data = json.loads((out / "report.json").read_text())
    assert data["model"]["inputs"] == ["arg0 (4, 16) float32"]
    assert [v["check"] for v in data["verdict"]][:4] == ["runs natively", "numerics within tolerance", "compiles",
                                                         "faster than the CPU"]
    phases = {p["name"]: p["status"] for p in data["phases"]}
    assert phases["cpu eager"] == phases["neuron eager"] == phases["neuron compiled"] == "ok", phases
    assert set(phases.values()) == {"ok"}, phases
    assert data["performance"]["float32"]["neuron_compiled"]["step_s"] > 0
    page = (out / "report.html").read_text()
    assert page.count('src="data:image/png;base64,') >= 3  # loss curves, module error, step times, phases
    assert "http://" not in page and "https://" not in page  # self-contained
    assert (out / "summary.txt").read_text().startswith("TorchNeuron evaluation: Sequential")


@pytest.mark.parametrize("target,message", [
    ("missing_dir/nothing.py:build", "target file not found: missing_dir/nothing.py"),
    ("{file}:absent", "has no function 'absent' (its functions: build, no_tensor, not_a_module, wrong)"),
    ("{file}:wrong", "returned int; expected a dict {'model'"),
    ("{file}:not_a_module", "returned a model of type str, not a torch.nn.Module"),
    ("{file}:no_tensor", "with no tensor in it"),
    ("no_such_package_xyz.models:build", "cannot import module 'no_such_package_xyz.models'"),
    ("{file}", "must be path/to/file.py:function or package.module:function"),
])
def test_bad_targets_are_clear_errors(target_file, capsys, target, message):
    code = cli.main([target.format(file=target_file), "--no-progress", "--out", str(target_file.parent / "o")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("evaluate: error: ") and message in err, err


def test_bad_arguments_are_clear_errors(target_file, capsys):
    assert cli.main([f"{target_file}:wrong", "--seq", "16"]) == 2
    assert "takes no parameter 'seq_len', so --seq cannot be applied" in capsys.readouterr().err
    assert cli.main([f"{target_file}:build", "--dtype", "int8"]) == 2
    assert "--dtype: dtype 'int8' is not supported" in capsys.readouterr().err
    assert cli.main([f"{target_file}:build", "--shapes", "4xq"]) == 2
    assert "is not a shape like 2x64" in capsys.readouterr().err
    assert cli.main(["--hf", "gpt2", f"{target_file}:build"]) == 2
    assert "not both or neither" in capsys.readouterr().err
    pytest.importorskip("transformers")
    assert cli.main(["--hf", "no_such_model_type"]) == 2
    assert "--hf 'no_such_model_type' is not a transformers model type" in capsys.readouterr().err


def test_bad_target_exit_code_from_the_command(target_file):
    r = subprocess.run([sys.executable, "-m", "torch_neuronx.evaluate", f"{target_file}:absent"],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2
    assert "evaluate: error:" in r.stderr and "has no function 'absent'" in r.stderr
    assert r.stdout == ""
