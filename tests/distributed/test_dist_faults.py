"""Faults on the "neuron" backend (worker_faults.py): a skipped collective times
out within the group's timeout naming the operation, the group and the late
rank, without a hang; a dead rank fails its peers promptly; nothing is left in
/dev/shm."""
import os

import dist_launch

SCRIPT = os.path.join(dist_launch.HERE, "worker_faults.py")


def test_faults():
    run = dist_launch.run_ranks(SCRIPT, 2, timeout=90)
    assert not run.timed_out, "hung\n" + run.log()
    for name in ("timeout_names_op_group_and_rank", "timeout_cpu_tensors"):
        run.case(name)
    # rank 1 died on purpose; rank 0 must have seen it fail and left cleanly
    assert run.results[0].get("rank_dies") == "ok", run.log()
    assert run.returncodes[0] == 0, run.log()
    assert dist_launch.shm_entries(run.pids) == []
