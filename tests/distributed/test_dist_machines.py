"""The "neuron" backend across machines, tested on this one: two torchrun nodes
(--nnodes=2 --node-rank=0/1, one rendezvous endpoint on localhost, two ranks
each) with different TORCH_NEURONX_NODE_ID, so every group spanning both runs
hierarchically for real: shared memory within a node, Gloo between them
(worker_machines.py). Every collective and the training cases against the
single-process reference each rank computes; one group per transport
(hierarchical, forced shm, forced gloo) compared with each other; at the end a
rank dies and every other fails promptly."""
import os

import pytest

import dist_launch
import worker_machines

SCRIPT = os.path.join(dist_launch.HERE, "worker_machines.py")


@pytest.fixture(scope="module")
def two_nodes():
    return dist_launch.run_ranks(SCRIPT, 4, timeout=240, nodes=2)


@pytest.mark.parametrize("name", worker_machines.CASES)
def test_two_nodes(two_nodes, name):
    two_nodes.case(name)


def test_two_nodes_rank_dies(two_nodes):
    # the last rank died on purpose (its result file says nothing of this case)
    for r in range(3):
        assert two_nodes.results[r].get(worker_machines.LAST) == "ok", two_nodes.log()


def test_two_nodes_clean_exit_and_no_shm_leftovers(two_nodes):
    assert not two_nodes.timed_out and two_nodes.returncodes == [0, 0], two_nodes.log()
    assert dist_launch.shm_entries(two_nodes.pids) == []
