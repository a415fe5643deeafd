"""Faults of the "neuron" backend: a collective one rank skips times out on the
others within the group's timeout, naming the operation, the group and the
late rank, and breaks only that group; a rank that dies makes the others fail
promptly. The dying case must run last (its rank is gone afterwards)."""
from __future__ import annotations

import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist

from dist_worker import cases, RANK, WORLD, ExitNow, case, device, main

GROUP_TIMEOUT_S = 2.0


def expect_failure(fn, *needles, within: float):
    t0 = time.monotonic()
    try:
        fn()
    except RuntimeError as e:
        elapsed = time.monotonic() - t0
        msg = str(e)
        assert isinstance(e, dist.DistBackendError), f"{type(e).__name__}: {msg}"
        for n in needles:
            assert n in msg, f"{n!r} not in the error: {msg}"
        assert elapsed < within, f"raised after {elapsed:.1f} s (limit {within} s): {msg}"
        return msg
    raise AssertionError("no error")


@case
def timeout_names_op_group_and_rank():
    dev = device()
    g = dist.new_group(list(range(WORLD)), timeout=timedelta(seconds=GROUP_TIMEOUT_S))
    name = dist.distributed_c10d._get_process_group_name(g)
    t = torch.ones(4, device=dev)
    dist.all_reduce(t, group=g)
    assert t.cpu().tolist() == [float(WORLD)] * 4
    late = WORLD - 1
    if RANK != late:
        def skipped():
            dist.all_reduce(t, group=g)
            t.cpu()  # the stream's sticky error surfaces at the synchronising call

        expect_failure(skipped, "all_reduce", name, f"rank {late}", within=GROUP_TIMEOUT_S + 8)
        # the group is broken now: its next operation fails at once
        expect_failure(lambda: dist.all_reduce(torch.ones(2), group=g), "all_reduce", within=2)
    dist.destroy_process_group(g)
    # the world group is untouched
    w = torch.full((3,), float(RANK), device=dev)
    dist.all_reduce(w)
    assert w.cpu().tolist() == [WORLD * (WORLD - 1) / 2.0] * 3


@case
def timeout_cpu_tensors():
    g = dist.new_group(list(range(WORLD)), timeout=timedelta(seconds=GROUP_TIMEOUT_S))
    if RANK != 0:
        expect_failure(lambda: dist.broadcast(torch.ones(3), src=0, group=g), "broadcast", "rank 0",
                       within=GROUP_TIMEOUT_S + 8)
    dist.destroy_process_group(g)


@case
def debug_detail_catches_mismatch():
    # Under TORCH_DISTRIBUTED_DEBUG=DETAIL c10d wraps the backend and checks,
    # before each operation, that every rank issues the same one.
    if os.environ.get("TORCH_DISTRIBUTED_DEBUG") != "DETAIL":
        return
    dev = device()
    t = torch.ones(4, device=dev)
    dist.all_reduce(t)
    assert t.cpu().tolist() == [float(WORLD)] * 4
    try:
        if RANK == 0:
            dist.all_reduce(t)
        else:
            dist.broadcast(t, src=0)
    except RuntimeError as e:
        assert "mismatch" in str(e).lower(), e
    else:
        raise AssertionError("the mismatched collectives were not detected")
    dist.all_reduce(t)  # still usable: the mismatch was caught before the backend ran
    assert t.cpu().tolist() == [float(WORLD) * 2] * 4


@case
def rank_dies():
    dev = device()
    g = dist.new_group(list(range(WORLD)), timeout=timedelta(seconds=60))
    t = torch.ones(1000, device=dev)
    dist.all_reduce(t, group=g)
    t.cpu()
    if RANK == WORLD - 1:
        os._exit(0)  # gone without a word (its result file says nothing about this case)
    time.sleep(0.2)

    def op():
        dist.all_reduce(t, group=g)
        t.cpu()

    # far sooner than the group's 60 s timeout
    expect_failure(op, "all_reduce", f"rank {WORLD - 1}", within=10)
    # leave without the default group's closing barrier (its last rank is gone)
    raise ExitNow


import torch_neuronx  # noqa: E402,F401

CASES = cases(__name__)

if __name__ == "__main__":
    main()
