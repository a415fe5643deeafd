"""torch.distributed backend "neuron": every collective on 2 ranks and a subset
on 4, each rank checking against a reference it computes itself
(worker_collectives.py; the ranks are launched once per world size, env://
on a free port, as torchrun does)."""
import os

import pytest

import dist_launch
import worker_collectives

SCRIPT = os.path.join(dist_launch.HERE, "worker_collectives.py")
CASES = list(worker_collectives.CASES)
FOUR_RANKS = ["all_reduce_floats", "all_reduce_ints", "all_reduce_bool", "all_reduce_large", "broadcast",
              "reduce", "all_gather_uneven", "all_gather_into_tensor", "gather_scatter", "reduce_scatter",
              "reduce_scatter_tensor", "all_to_all_single", "all_to_all_lists", "barrier_and_objects",
              "send_recv_tags", "batch_isend_irecv", "coalesced", "subgroups", "async_wait_ordering",
              "kernel_threads_share", "bench_small_latency"]
# Cases that do not pass yet, with the missing feature (strict: a pass is news).
XFAIL: dict = {}


def _params(names):
    return [pytest.param(n, marks=pytest.mark.xfail(reason=XFAIL[n], strict=True)) if n in XFAIL else n
            for n in names]


@pytest.fixture(scope="module")
def two():
    return dist_launch.run_ranks(SCRIPT, 2, timeout=150)


@pytest.fixture(scope="module")
def four():
    return dist_launch.run_ranks(SCRIPT, 4, *FOUR_RANKS, timeout=150)


@pytest.mark.parametrize("name", _params(CASES))
def test_two_ranks(two, name):
    two.case(name)


@pytest.mark.parametrize("name", _params(FOUR_RANKS))
def test_four_ranks(four, name):
    four.case(name)


def test_clean_exit_and_no_shm_leftovers(two, four):
    for run in (two, four):
        assert not run.timed_out and run.returncodes == [0] * run.world, run.log()
    assert dist_launch.shm_entries(two.pids + four.pids) == []
