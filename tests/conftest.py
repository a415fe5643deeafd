import os
import subprocess
import sys
import textwrap

import pytest
import torch

import torch_neuronx  # noqa: F401  (explicit, though autoload already imported it)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_python(code: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter (for environment variables read at
    start-up, fork behaviour, crashes that must not take pytest down)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=full_env, timeout=timeout, cwd=ROOT)


@pytest.fixture(autouse=True)
def _clean_tracking():
    torch_neuronx.clear_op_tracking()
    yield
    torch.neuron.synchronize()


def assert_no_fallbacks():
    fb = torch_neuronx.get_fallback_ops()
    assert fb == [], f"ops fell back to the CPU: {fb}"
