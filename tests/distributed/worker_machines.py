"""The rank side of the multi-machine tests (test_dist_machines.py): launched as
several torchrun "nodes" on this machine, each with its own
TORCH_NEURONX_NODE_ID, so the backend runs hierarchically (shared memory within
a node, Gloo between the nodes). Runs the collectives and training cases of
worker_collectives.py and worker_training.py (each against the single-process
reference it computes itself), and its own: the group sees the machines as
launched, and the same operations on a group per transport (hierarchical,
forced shm, forced gloo) agree with each other and with the reference."""
from __future__ import annotations

import os

import torch
import torch.distributed as dist
from torch.distributed import ReduceOp

import worker_collectives as wc
import worker_training as wt
from dist_worker import REGISTRY, RANK, WORLD, case, device, main

# Machines as launched: torchrun's node count (GROUP_WORLD_SIZE), 1 without it.
MACHINES = int(os.environ.get("GROUP_WORLD_SIZE", "1"))
LOCAL = int(os.environ.get("LOCAL_WORLD_SIZE", str(WORLD)))
# Several rounds of the 1 MiB slot (and several Gloo chunks) in float32.
LARGE = 300_001
FLOAT_SUMS = {"SUM", "AVG", "PREMUL_SUM"}


@case
def launched_as_machines():
    import torch_neuronx

    info = torch_neuronx.distributed.backend_info()
    want = {"transport": "hierarchical", "machines": MACHINES, "local_size": LOCAL}
    assert {k: info[k] for k in want} == want, info
    assert info["comm_name"].endswith(f".m{RANK // LOCAL}") == (MACHINES > 1), info


def _digest(g) -> dict:
    """Every collective once on group `g` (all ranks, in rank order), each
    result with the single-process reference: {name: (got, want, exact)}.
    `exact`: every transport must give the same bits (no float sum whose
    rounding depends on how the ranks are grouped)."""
    dev = device()
    out = {}
    seed = 5000

    def put(name, got, want, exact=True):
        out[name] = (got.cpu(), want, exact)

    for dtype, op in ((torch.float32, "SUM"), (torch.bfloat16, "AVG"), (torch.float16, "PREMUL_SUM"),
                      (torch.float64, "AVG"), (torch.float32, "MAX"), (torch.int64, "PRODUCT"),
                      (torch.int32, "BXOR"), (torch.int16, "SUM"), (torch.int8, "MIN"), (torch.uint8, "BAND"),
                      (torch.int64, "AVG"), (torch.bool, "SUM"), (torch.bool, "PRODUCT"),
                      (torch.complex64, "AVG")):
        for n in (7, LARGE):
            seed += 1
            xs = [wc.make(r, (n,), dtype, seed) for r in range(WORLD)]
            t = xs[RANK].to(dev)
            dist.all_reduce(t, op=wc.reduce_op(op, dtype), group=g)
            exact = not (op in FLOAT_SUMS and (dtype.is_floating_point or dtype.is_complex))
            put(f"all_reduce {op} {dtype} x{n}", t, wc.reference(xs, op, dtype), exact)
    # reduce to a leader and to a rank that is not one, AVG and MAX
    for root, dtype, op in ((WORLD - 1, torch.float32, "AVG"), (0, torch.int64, "MAX"), (1, torch.float32, "SUM")):
        seed += 1
        xs = [wc.make(r, (LARGE,), dtype, seed) for r in range(WORLD)]
        t = xs[RANK].to(dev)
        dist.reduce(t, dst=root, op=wc.reduce_op(op, dtype), group=g)
        if RANK == root:
            put(f"reduce {op} {dtype} to {root}", t, wc.reference(xs, op, dtype), op == "MAX")
        else:
            put(f"reduce {op} {dtype} to {root}: input kept", t, xs[RANK])
    for root, dtype, n in ((WORLD - 1, torch.float32, 7), (1, torch.bfloat16, LARGE), (0, torch.int8, 33)):
        seed += 1
        xs = [wc.make(r, (n,), dtype, seed) for r in range(WORLD)]
        t = xs[RANK].to(dev)
        dist.broadcast(t, src=root, group=g)
        put(f"broadcast {dtype} from {root}", t, xs[root])
    seed += 1
    xs = [wc.make(r, (LARGE,), torch.float32, seed) for r in range(WORLD)]
    o = torch.empty(WORLD * LARGE, device=dev)
    dist.all_gather_into_tensor(o, xs[RANK].to(dev), group=g)
    put("all_gather_into_tensor", o, torch.cat(xs))
    xs = [wc.make(r, (r + 1, 3), torch.int64, seed) for r in range(WORLD)]
    outs = [torch.empty(r + 1, 3, dtype=torch.int64, device=dev) for r in range(WORLD)]
    dist.all_gather(outs, xs[RANK].to(dev), group=g)
    put("all_gather uneven", torch.cat(outs), torch.cat(xs))
    seed += 1
    xs = [wc.make(r, (WORLD * LARGE,), torch.float32, seed) for r in range(WORLD)]
    o = torch.empty(LARGE, device=dev)
    dist.reduce_scatter_tensor(o, xs[RANK].to(dev), group=g)
    put("reduce_scatter_tensor", o, wc.reference([x[RANK * LARGE:(RANK + 1) * LARGE] for x in xs], "SUM",
                                                 torch.float32), False)
    ins = [[wc.make(r, (5, 2), torch.int32, seed + p) for p in range(WORLD)] for r in range(WORLD)]
    o = torch.empty(5, 2, dtype=torch.int32, device=dev)
    dist.reduce_scatter(o, [x.to(dev) for x in ins[RANK]], op=ReduceOp.MAX, group=g)
    put("reduce_scatter MAX int32", o, wc.reference([ins[r][RANK] for r in range(WORLD)], "MAX", torch.int32))

    def rows(src, dst):
        return (src + 2 * dst) % 3 + (dst == 0)

    ins = [wc.make(r, (sum(rows(r, p) for p in range(WORLD)), 2), torch.float32, seed) for r in range(WORLD)]
    o = torch.empty(sum(rows(p, RANK) for p in range(WORLD)), 2, device=dev)
    dist.all_to_all_single(o, ins[RANK].to(dev), output_split_sizes=[rows(p, RANK) for p in range(WORLD)],
                           input_split_sizes=[rows(RANK, p) for p in range(WORLD)], group=g)
    want = [ins[p][sum(rows(p, q) for q in range(RANK)):][:rows(p, RANK)] for p in range(WORLD)]
    put("all_to_all_single uneven", o, torch.cat(want))
    ins = [[wc.make(r, (p + 1,), torch.bfloat16, seed + p) for p in range(WORLD)] for r in range(WORLD)]
    outs = [torch.empty(RANK + 1, dtype=torch.bfloat16, device=dev) for _ in range(WORLD)]
    dist.all_to_all(outs, [x.to(dev) for x in ins[RANK]], group=g)
    put("all_to_all lists", torch.cat(outs), torch.cat([ins[p][RANK] for p in range(WORLD)]))
    xs = [wc.make(r, (4, 3), torch.float32, seed) for r in range(WORLD)]
    root = 1 % WORLD
    gl = [torch.empty(4, 3, device=dev) for _ in range(WORLD)] if RANK == root else None
    dist.gather(xs[RANK].to(dev), gather_list=gl, dst=root, group=g)
    if RANK == root:
        put("gather", torch.cat(gl), torch.cat(xs))
    o = torch.empty(6, dtype=torch.int64, device=dev)
    chunks = [wc.make(r, (6,), torch.int64, seed + 1) for r in range(WORLD)]
    dist.scatter(o, [c.to(dev) for c in chunks] if RANK == WORLD - 1 else None, src=WORLD - 1, group=g)
    put("scatter", o, chunks[RANK])
    # a ring of sends, two tags received in the other order, then a batch
    nxt, prv = (RANK + 1) % WORLD, (RANK - 1) % WORLD
    small = torch.full((3,), float(RANK), device=dev)
    big = torch.arange(LARGE, dtype=torch.float32, device=dev) + RANK
    works = [dist.isend(small, nxt, tag=1, group=g), dist.isend(big, nxt, tag=2, group=g)]
    rb, rs = torch.empty(LARGE, device=dev), torch.empty(3, device=dev)
    dist.recv(rb, prv, tag=2, group=g)
    dist.recv(rs, prv, tag=1, group=g)
    for w in works:
        w.wait()
    put("send/recv tag 2", rb, torch.arange(LARGE, dtype=torch.float32) + prv)
    put("send/recv tag 1", rs, torch.full((3,), float(prv)))
    r1 = torch.empty(1000, device=dev)
    ops = [dist.P2POp(dist.irecv, r1, prv, g), dist.P2POp(dist.isend, big[:1000] * 2, nxt, g)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    put("batch_isend_irecv", r1, (torch.arange(1000, dtype=torch.float32) + prv) * 2)
    dist.barrier(group=g)
    objs = [None] * WORLD
    dist.all_gather_object(objs, ("rank", RANK), group=g)
    assert objs == [("rank", r) for r in range(WORLD)], objs
    return out


@case
def transports_agree():
    """One group per transport (TORCH_NEURONX_DIST_TRANSPORT is read when a
    group is created): every collective matches the single-process reference
    on each, bit for bit across transports where no float sum is regrouped,
    and DDP trains like one process on each."""
    import torch_neuronx

    groups = {}
    before = os.environ.get("TORCH_NEURONX_DIST_TRANSPORT")
    try:
        for t in ("hierarchical", "shm", "gloo"):
            os.environ["TORCH_NEURONX_DIST_TRANSPORT"] = t
            groups[t] = dist.new_group(list(range(WORLD)))
    finally:
        if before is None:
            os.environ.pop("TORCH_NEURONX_DIST_TRANSPORT", None)
        else:
            os.environ["TORCH_NEURONX_DIST_TRANSPORT"] = before
    want = {"hierarchical": (MACHINES, LOCAL), "shm": (1, WORLD), "gloo": (WORLD, 1)}
    for t, g in groups.items():
        info = torch_neuronx.distributed.backend_info(g)
        assert (info["transport"], info["machines"], info["local_size"]) == (t, *want[t]), (t, info)
    digests = {t: _digest(g) for t, g in groups.items()}
    for name, (got, ref, exact) in digests["shm"].items():
        for t in groups:
            other = digests[t][name][0]
            if exact:
                wc.close(other, ref, f"{name} ({t})")
                assert torch.equal(other, got), f"{name}: {t} differs from shm"
            else:
                rtol, atol = wc.REGROUPED_TOL[ref.dtype]
                torch.testing.assert_close(other, ref, rtol=rtol, atol=atol, msg=lambda m: f"{name} ({t}): {m}")
    for i, g in enumerate(groups.values()):
        wt._ddp(70 + i, process_group=g)
    for g in groups.values():
        dist.destroy_process_group(g)


@case
def rank_dies_on_a_machine():
    """The last rank dies: its machine's ranks see it over shared memory at
    once, the other machine's when its leader's Gloo connection closes; every
    survivor fails far sooner than the group's 60 s timeout, no hang. Runs
    last (the rank is gone afterwards)."""
    from datetime import timedelta

    import time

    from worker_faults import expect_failure
    from dist_worker import ExitNow

    dev = device()
    g = dist.new_group(list(range(WORLD)), timeout=timedelta(seconds=60))
    t = torch.ones(1000, device=dev)
    dist.all_reduce(t, group=g)
    t.cpu()
    if RANK == WORLD - 1:
        os._exit(0)
    time.sleep(0.2)

    def op():
        dist.all_reduce(t, group=g)
        t.cpu()

    msg = expect_failure(op, "all_reduce", within=15)
    if RANK // LOCAL == (WORLD - 1) // LOCAL:  # on the dead rank's machine: named, as a rank of the group
        assert f"ranks {', '.join(str(r) for r in range(WORLD - LOCAL, WORLD))}" in msg, msg
    raise ExitNow


COLLECTIVES = list(wc.CASES)
TRAINING = ["ddp", "dtensor_redistribute", "pipeline_1f1b", "fsdp2_x_tensor_parallel_2d_mesh"]
OWN = ["launched_as_machines", "transports_agree"]
CASES = OWN + COLLECTIVES + TRAINING
LAST = "rank_dies_on_a_machine"

if __name__ == "__main__":
    import torch_neuronx  # noqa: F401

    registry = {**REGISTRY["worker_collectives"], **REGISTRY["worker_training"], **REGISTRY["__main__"]}
    main(registry={n: registry[n] for n in CASES + [LAST]})
