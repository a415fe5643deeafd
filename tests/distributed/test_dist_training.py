"""DDP, FSDP2, DTensor, tensor and pipeline parallelism on the "neuron" backend,
each against a single-process reference (worker_training.py): everything on 2
ranks; FSDP2 x tensor parallelism on a 2 x 2 mesh, a 4-stage pipeline and DDP
on 4."""
import os

import pytest

import dist_launch
import worker_training

SCRIPT = os.path.join(dist_launch.HERE, "worker_training.py")
XFAIL: dict = {}
FOUR_RANKS = ["fsdp2_x_tensor_parallel_2d_mesh", "pipeline_1f1b", "ddp"]


@pytest.fixture(scope="module")
def two():
    return dist_launch.run_ranks(SCRIPT, 2, *[n for n in worker_training.CASES
                                              if n != "fsdp2_x_tensor_parallel_2d_mesh"], timeout=170)


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.xfail(reason=XFAIL[n], strict=True)) if n in XFAIL else n
    for n in worker_training.CASES if n != "fsdp2_x_tensor_parallel_2d_mesh"])
def test_two_ranks(two, name):
    two.case(name)


@pytest.fixture(scope="module")
def four():
    return dist_launch.run_ranks(SCRIPT, 4, *FOUR_RANKS, timeout=170)


@pytest.mark.parametrize("name", FOUR_RANKS)
def test_four_ranks(four, name):
    four.case(name)


def test_clean_exit_and_no_shm_leftovers(two, four):
    for run in (two, four):
        assert not run.timed_out and run.returncodes == [0] * run.world, run.log()
    assert dist_launch.shm_entries(two.pids + four.pids) == []
