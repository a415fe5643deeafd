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
    for name in ("timeout_names_op_group_and_rank", "timeout_cpu_tensors", "debug_detail_catches_mismatch"):
        run.case(name)
    # rank 1 died on purpose; rank 0 must have seen it fail and left cleanly
    assert run.results[0].get("rank_dies") == "ok", run.log()
    assert run.returncodes[0] == 0, run.log()
    assert dist_launch.shm_entries(run.pids) == []


def test_debug_detail_checks_collectives():
    # TORCH_DISTRIBUTED_DEBUG=DETAIL wraps the backend (c10d's wrapper over
    # Gloo) and reports ranks that issue different collectives.
    run = dist_launch.run_ranks(SCRIPT, 2, "debug_detail_catches_mismatch", timeout=90,
                                env={"TORCH_DISTRIBUTED_DEBUG": "DETAIL"})
    assert not run.timed_out, "hung\n" + run.log()
    run.case("debug_detail_catches_mismatch")
    assert run.returncodes == [0, 0], run.log()
