"""Devices: discovery, selection, properties, autoload, torch.accelerator."""
import os
import pytest
import torch

from helpers import close, run_python


def test_default_four_logical_cores():
    r = run_python("import torch; print(torch.neuron.device_count())",
                   env={"NEURON_RT_VISIBLE_CORES": "", "NEURON_RT_NUM_CORES": ""})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "4"


@pytest.mark.parametrize("env,count", [({"NEURON_RT_VISIBLE_CORES": "0-1"}, 2), ({"NEURON_RT_VISIBLE_CORES": "2"}, 1),
                                       ({"NEURON_RT_VISIBLE_CORES": "0,2,3"}, 3), ({"NEURON_RT_NUM_CORES": "3"}, 3)])
def test_visible_cores_env(env, count):
    r = run_python("import torch; print(torch.neuron.device_count(), torch.accelerator.device_count())", env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(count), str(count)]


@pytest.mark.parametrize("env", [{"NEURON_RT_VISIBLE_CORES": "7"}, {"NEURON_RT_VISIBLE_CORES": "1,4", "NEURON_RT_NUM_CORES": "4"}])
def test_visible_core_the_device_lacks_is_an_error(env):
    # A real instance fails start-up when a listed core does not exist; the
    # software device has NEURON_RT_NUM_CORES cores (default 4).
    r = run_python("import torch\ntry:\n    torch.ones(2, device='neuron')\nexcept RuntimeError as e:\n    print(e)",
                   env=env)
    assert r.returncode == 0, r.stderr
    assert "names core" in r.stdout and "has 4 NeuronCores (0-3)" in r.stdout, r.stdout


def test_visible_cores_beyond_default_with_num_cores():
    r = run_python("import torch; print(torch.neuron.device_count(), torch.neuron.get_device_properties(0).physical_core)",
                   env={"NEURON_RT_VISIBLE_CORES": "6", "NEURON_RT_NUM_CORES": "8"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1", "6"]


def test_visible_core_maps_to_physical_id():
    r = run_python("import torch; p = torch.neuron.get_device_properties(0); print(p.physical_core)",
                   env={"NEURON_RT_VISIBLE_CORES": "2"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "2"


def test_autoload_and_opt_out():
    r = run_python("import torch; x = torch.ones(3, device='neuron'); print(x.device, (x + x).cpu().tolist())")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "neuron:0 [2.0, 2.0, 2.0]"
    r = run_python("import torch; torch.ones(3, device='neuron')", env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert r.returncode != 0


def test_properties_and_names():
    assert torch.neuron.is_available()
    p = torch.neuron.get_device_properties(0)
    expected = 24 << 30 if not os.environ.get("TORCH_NEURONX_DEVICE_MEMORY") else p.total_memory
    assert p.total_memory == expected
    assert "NeuronCore" in torch.neuron.get_device_name(0)
    assert torch.neuron.is_bf16_supported()


def test_set_device_and_context():
    assert torch.neuron.current_device() == 0
    with torch.neuron.device(1):
        assert torch.neuron.current_device() == 1
        t = torch.empty(2, device="neuron")
        assert t.device == torch.device("neuron", 1)
    assert torch.neuron.current_device() == 0
    torch.neuron.set_device(1)
    try:
        assert torch.accelerator.current_device_index() == 1
    finally:
        torch.neuron.set_device(0)


def test_invalid_device_index():
    n = torch.neuron.device_count()
    with pytest.raises(RuntimeError, match="out of range"):
        torch.empty(2, device=f"neuron:{n}")
    with pytest.raises(RuntimeError, match="out of range"):
        torch.neuron.set_device(n + 3)
    with pytest.raises(RuntimeError, match="out of range"):
        torch.ones(2).to(f"neuron:{n}")


def test_accelerator_api():
    assert torch.accelerator.current_accelerator() == torch.device("neuron")
    assert torch.accelerator.device_count() == torch.neuron.device_count()
    torch.accelerator.set_device_index(0)
    assert torch.accelerator.current_device_index() == 0
    s = torch.accelerator.current_stream()
    assert s.device == torch.device("neuron", 0)
    torch.accelerator.synchronize()


def test_tensor_methods():
    x = torch.arange(4.0)
    y = x.neuron()
    assert y.is_neuron and not x.is_neuron
    assert y.device.type == "neuron"
    assert torch.equal(y.cpu(), x)
    m = torch.nn.Linear(2, 2).neuron()
    assert m.weight.is_neuron
    st = x.untyped_storage().neuron()
    assert st.device.type == "neuron"


def test_mixing_devices_is_an_error():
    a = torch.randn(3).neuron()
    with pytest.raises(RuntimeError, match="same device"):
        a + torch.randn(3)
    with pytest.raises(RuntimeError, match="same device"):
        a @ torch.randn(3, 3)  # noqa: B018
    # A CPU scalar (0-dim) is allowed, as with CUDA.
    close(a + torch.tensor(2.0), a.cpu() + 2)
