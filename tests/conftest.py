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


def _host_kind() -> str:
    """'amd', 'intel-avx512' or 'other': which of MKL's kernel sets the CPU takes
    (tests/conformance/known_gaps.py HOST_BLAS_GAPS)."""
    vendor, flags = "", ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("vendor_id") and not vendor:
                    vendor = line.split(":", 1)[1].strip()
                elif line.startswith("flags") and not flags:
                    flags = line.split(":", 1)[1]
    except OSError:
        pass
    if vendor == "AuthenticAMD":
        return "amd"
    if vendor == "GenuineIntel" and " avx512f" in flags:
        return "intel-avx512"
    return "other"


def pytest_collection_modifyitems(config, items):
    from conformance.known_gaps import HOST_BLAS_GAPS

    host = _host_kind()
    for item in items:
        key = f"{item.path.name}::{getattr(item, 'originalname', item.name)}"
        gap = HOST_BLAS_GAPS.get(key)
        if gap and gap[0] != host:
            item.add_marker(pytest.mark.skip(reason=f"{gap[1]} (this host: {host})"))
