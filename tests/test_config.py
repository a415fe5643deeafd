"""The one environment-variable table: every variable read through the
runtime, one boolean grammar, and docs/env-vars.md generated from it."""
import pathlib
import subprocess
import sys

import pytest
import torch_neuronx

from helpers import run_python

# An op with only a CPU kernel, so neuron inputs take the fallback.
DEFINE_CPU_ONLY = """
import torch
_lib = torch.library.Library("neuron_config_test", "DEF")
_lib.define("cpu_only(Tensor x) -> Tensor")
_lib.impl("cpu_only", lambda x: x * 2 + 1, "CPU")
"""

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_env_table_rows():
    rows = torch_neuronx.env_vars()
    names = [r["name"] for r in rows]
    for n in ["NEURON_RT_VISIBLE_CORES", "NEURON_RT_NUM_CORES", "NEURON_LAUNCH_BLOCKING",
              "TORCH_NEURONX_DEVICE_MEMORY", "TORCH_NEURONX_KERNEL_THREADS", "TORCH_NEURONX_DISABLE_FALLBACK"]:
        assert n in names
    for r in rows:
        assert r["type"] in ("bool", "int", "size", "cores", "string") and r["help"] and r["reader"]


def test_values_read_through_the_runtime():
    r = run_python("import torch_neuronx; print({r['name']: r['value'] for r in torch_neuronx.env_vars()}"
                   "['TORCH_NEURONX_KERNEL_THREADS'])", env={"TORCH_NEURONX_KERNEL_THREADS": "1"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "1"


@pytest.mark.parametrize("value,strict", [("yes", True), ("ON", True), ("1", True), ("0", False),
                                          ("off", False), ("false", False), ("", False)])
def test_bool_grammar(value, strict):
    # Strict mode turns a CPU-only op into NotImplementedError; "false" no
    # longer means true (the old grammar treated any non-"0" value as true).
    r = run_python(DEFINE_CPU_ONLY + """
try:
    torch.ops.neuron_config_test.cpu_only(torch.ones(2, device="neuron"))
    print("ran")
except NotImplementedError:
    print("strict")
""", env={"TORCH_NEURONX_DISABLE_FALLBACK": value})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == ("strict" if strict else "ran")


def test_invalid_bool_is_a_clear_error():
    r = run_python("import torch\ntry:\n    torch.ones(2, device='neuron')\nexcept RuntimeError as e:\n    print(e)",
                   env={"NEURON_LAUNCH_BLOCKING": "maybe"})
    assert r.returncode == 0, r.stderr
    assert 'NEURON_LAUNCH_BLOCKING="maybe" is not a boolean' in r.stdout
    assert "true/false" in r.stdout


def test_env_docs_are_generated_from_the_table():
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_env_docs.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
