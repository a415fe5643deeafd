"""DDP, FSDP2, DTensor and tensor parallelism on the "neuron" backend, 2 ranks,
each against a single-process reference (worker_training.py)."""
import os

import pytest

import dist_launch
import worker_training

SCRIPT = os.path.join(dist_launch.HERE, "worker_training.py")
XFAIL: dict = {}


@pytest.fixture(scope="module")
def two():
    return dist_launch.run_ranks(SCRIPT, 2, timeout=170)


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.xfail(reason=XFAIL[n], strict=True)) if n in XFAIL else n
    for n in worker_training.CASES])
def test_two_ranks(two, name):
    two.case(name)


def test_clean_exit_and_no_shm_leftovers(two):
    assert not two.timed_out and two.returncodes == [0, 0], two.log()
    assert dist_launch.shm_entries(two.pids) == []
