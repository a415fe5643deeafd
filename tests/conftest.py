"""pytest fixtures for the whole suite. Functions and tolerance tables that
tests import live in helpers.py (see README.md)."""
import pytest
import torch

import torch_neuronx  # noqa: F401  (explicit, though autoload already imported it)

# Re-exported for tests written against the old location (branches merged
# later); new tests import them from helpers.
from helpers import assert_no_fallbacks, run_python  # noqa: F401


@pytest.fixture(autouse=True)
def _clean_tracking():
    torch_neuronx.clear_op_tracking()
    yield
    torch.neuron.synchronize()
