"""Every collective of the "neuron" backend against a single-process reference
each rank computes itself: rank r's input is a function of (r, case), so every
rank can rebuild every rank's input on the CPU and fold them in rank order (the
transport's documented order: float16/bfloat16 accumulate in float32 and round
once, float64 in float64, integers wrap)."""
from __future__ import annotations

import math
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.distributed import ReduceOp

from dist_worker import cases, RANK, WORLD, case, device, main

FLOATS = [torch.float32, torch.bfloat16, torch.float16, torch.float64]
INTS = [torch.int64, torch.int32, torch.int8, torch.uint8]
FLOAT_OPS = ["SUM", "AVG", "PRODUCT", "MIN", "MAX", "PREMUL_SUM"]
INT_OPS = ["SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"]
BOOL_OPS = ["SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"]
TOL = {torch.float32: (1e-5, 1e-5), torch.bfloat16: (1.6e-2, 1e-2), torch.float16: (1e-3, 1e-3),
       torch.float64: (1e-7, 1e-7), torch.complex64: (1e-5, 1e-5)}
PREMUL = 0.5
# Across machines a float sum is rounded once per machine before the machines'
# partials are added (nrt/collectives.h, "across machines"): up to about one
# and a half units in the last place of the largest partial (|partial| < 4
# here) away from one fold over all ranks. Launched as several torchrun
# nodes, the reference comparisons allow that.
REGROUPED_TOL = {torch.float32: (1e-5, 2e-5), torch.bfloat16: (3.2e-2, 5e-2), torch.float16: (4e-3, 6e-3),
                 torch.float64: (1e-7, 1e-7), torch.complex64: (1e-5, 2e-5)}
if int(os.environ.get("GROUP_WORLD_SIZE", "1")) > 1:
    TOL = REGROUPED_TOL


def make(r: int, shape, dtype, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed * 1000 + r)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_complex:
        return torch.randn(shape, dtype=dtype, generator=g)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    lo = 0 if dtype == torch.uint8 else -9
    return torch.randint(lo, 10, shape, generator=g).to(dtype)


def reference(xs, op: str, dtype):
    """Folds the ranks' inputs in rank order, as the transport does."""
    if dtype == torch.bool:
        b = [x.clone() for x in xs]
        acc = b[0]
        for x in b[1:]:
            if op in ("SUM", "MAX", "BOR"):
                acc = acc | x
            elif op in ("PRODUCT", "MIN", "BAND"):
                acc = acc & x
            elif op == "BXOR":
                acc = acc ^ x
        return acc
    wide = torch.float64 if dtype in (torch.float64, torch.complex128) else (
        torch.complex64 if dtype.is_complex else (torch.float32 if dtype.is_floating_point else torch.int64))
    if op == "PREMUL_SUM":
        xs = [(x * torch.tensor(PREMUL, dtype=dtype)).to(dtype) for x in xs]
    w = [x.to(wide) for x in xs]
    acc = w[0].clone()
    for x in w[1:]:
        if op in ("SUM", "AVG", "PREMUL_SUM"):
            acc = acc + x
        elif op == "PRODUCT":
            acc = acc * x
        elif op == "MIN":
            acc = torch.minimum(acc, x)
        elif op == "MAX":
            acc = torch.maximum(acc, x)
        elif op == "BAND":
            acc = acc & x
        elif op == "BOR":
            acc = acc | x
        elif op == "BXOR":
            acc = acc ^ x
    if op == "AVG":
        acc = acc / len(xs) if (dtype.is_floating_point or dtype.is_complex) else torch.div(
            acc, len(xs), rounding_mode="trunc")
    return acc.to(dtype)


def reduce_op(op: str, dtype):
    if op == "PREMUL_SUM":
        return dist._make_nccl_premul_sum(PREMUL)
    return getattr(ReduceOp, op)


def close(got: torch.Tensor, want: torch.Tensor, what: str = "") -> None:
    got = got.cpu()
    rtol, atol = TOL.get(want.dtype, (0, 0))
    torch.testing.assert_close(got, want, rtol=rtol, atol=atol, msg=lambda m: f"{what}: {m}")


# ---- all_reduce ---------------------------------------------------------------------------
def _all_reduce(dtypes, ops, shape, seed0):
    dev = device()
    seed = seed0
    for dtype in dtypes:
        for op in ops:
            seed += 1
            xs = [make(r, shape, dtype, seed) for r in range(WORLD)]
            t = xs[RANK].to(dev)
            dist.all_reduce(t, op=reduce_op(op, dtype))
            close(t, reference(xs, op, dtype), f"all_reduce {op} {dtype} {tuple(shape)}")


@case
def all_reduce_floats():
    _all_reduce(FLOATS, FLOAT_OPS, (3, 7), 100)


@case
def all_reduce_ints():
    _all_reduce(INTS, INT_OPS, (13,), 200)


@case
def all_reduce_bool():
    _all_reduce([torch.bool], BOOL_OPS, (33,), 300)


@case
def all_reduce_complex():
    _all_reduce([torch.complex64], ["SUM", "AVG"], (5,), 400)


@case
def all_reduce_large():
    # Beyond the one-step size and one 1 MiB slot: the pipelined
    # reduce-scatter + all-gather path.
    _all_reduce([torch.float32, torch.bfloat16], ["SUM", "MAX"], (3 * 1024 * 1024 // 4 + 5,), 500)
    _all_reduce([torch.int64], ["SUM"], (70001,), 510)


@case
def all_reduce_non_contiguous():
    dev = device()
    xs = [make(r, (8, 6), torch.float32, 600) for r in range(WORLD)]
    base = xs[RANK].to(dev)
    t = base.t()  # a transposed view: reduced through a contiguous copy and copied back
    assert not t.is_contiguous()
    dist.all_reduce(t)
    close(base, reference(xs, "SUM", torch.float32), "transposed view")
    # a strided slice of a larger tensor: the rest stays as it was
    big = torch.zeros(4, 10, device=dev)
    view = big[:, ::2]
    view.copy_(xs[RANK][:4, :5].to(dev))
    dist.all_reduce(view)
    want = torch.zeros(4, 10)
    want[:, ::2] = reference([x[:4, :5] for x in xs], "SUM", torch.float32)
    close(big, want, "strided slice")


@case
def all_reduce_cpu_tensors():
    for dtype in (torch.float32, torch.int64):
        xs = [make(r, (9,), dtype, 700) for r in range(WORLD)]
        t = xs[RANK].clone()
        dist.all_reduce(t, op=ReduceOp.MAX)
        close(t, reference(xs, "MAX", dtype), f"cpu {dtype}")
    t = make(RANK, (4, 4), torch.float32, 701).t()
    dist.all_reduce(t)
    close(t, reference([make(r, (4, 4), torch.float32, 701).t() for r in range(WORLD)], "SUM",
                       torch.float32), "cpu transposed")


@case
def all_reduce_empty():
    t = torch.empty(0, device=device())
    dist.all_reduce(t)
    assert t.numel() == 0


# ---- broadcast / reduce ---------------------------------------------------------------------
@case
def broadcast():
    dev = device()
    for dtype in (torch.float32, torch.bfloat16, torch.int8, torch.bool, torch.complex64, torch.float64):
        for root in range(WORLD):
            xs = [make(r, (5, 3), dtype, 800 + root) for r in range(WORLD)]
            t = xs[RANK].to(dev)
            dist.broadcast(t, src=root)
            close(t, xs[root], f"broadcast {dtype} root {root}")
    xs = [make(r, (6, 4), torch.float32, 810) for r in range(WORLD)]
    t = xs[RANK].to(dev).t()
    dist.broadcast(t, src=WORLD - 1)
    close(t, xs[WORLD - 1].t(), "broadcast transposed")


@case
def reduce():
    dev = device()
    root = WORLD - 1
    for dtype, op in ((torch.float32, "SUM"), (torch.bfloat16, "MAX"), (torch.int32, "PRODUCT")):
        xs = [make(r, (17,), dtype, 900) for r in range(WORLD)]
        t = xs[RANK].to(dev)
        dist.reduce(t, dst=root, op=reduce_op(op, dtype))
        if RANK == root:
            close(t, reference(xs, op, dtype), f"reduce {op} {dtype}")


# ---- gathers --------------------------------------------------------------------------------
@case
def all_gather():
    dev = device()
    for dtype in (torch.float32, torch.float16, torch.int64, torch.bool, torch.complex64):
        xs = [make(r, (4, 3), dtype, 1000) for r in range(WORLD)]
        outs = [torch.empty(4, 3, dtype=dtype, device=dev) for _ in range(WORLD)]
        dist.all_gather(outs, xs[RANK].to(dev))
        for r in range(WORLD):
            close(outs[r], xs[r], f"all_gather {dtype} from {r}")


@case
def all_gather_uneven():
    dev = device()
    xs = [make(r, (r + 1, 2), torch.float32, 1010) for r in range(WORLD)]
    outs = [torch.empty(r + 1, 2, device=dev) for r in range(WORLD)]
    dist.all_gather(outs, xs[RANK].to(dev))
    for r in range(WORLD):
        close(outs[r], xs[r], f"uneven from {r}")


@case
def all_gather_into_tensor():
    dev = device()
    for dtype in (torch.float32, torch.bfloat16, torch.int8):
        xs = [make(r, (5, 2), dtype, 1020) for r in range(WORLD)]
        out = torch.empty(WORLD * 5, 2, dtype=dtype, device=dev)
        dist.all_gather_into_tensor(out, xs[RANK].to(dev))
        close(out, torch.cat(xs), f"all_gather_into_tensor {dtype}")
    # in place: the input is this rank's chunk of the output (FSDP2 does this)
    out = torch.zeros(WORLD * 6, device=dev)
    chunk = out.narrow(0, RANK * 6, 6)
    chunk.copy_(make(RANK, (6,), torch.float32, 1021).to(dev))
    dist.all_gather_into_tensor(out, chunk)
    close(out, torch.cat([make(r, (6,), torch.float32, 1021) for r in range(WORLD)]), "in place")
    # a stacked output (WORLD, n)
    out = torch.empty(WORLD, 6, device=dev)
    dist.all_gather_into_tensor(out, make(RANK, (6,), torch.float32, 1022).to(dev))
    close(out, torch.stack([make(r, (6,), torch.float32, 1022) for r in range(WORLD)]), "stacked")


@case
def all_gather_non_contiguous_outputs():
    dev = device()
    xs = [make(r, (3, 4), torch.float32, 1030) for r in range(WORLD)]
    bases = [torch.zeros(4, 3, device=dev) for _ in range(WORLD)]
    outs = [b.t() for b in bases]
    dist.all_gather(outs, xs[RANK].to(dev).t().contiguous().t())
    for r in range(WORLD):
        close(bases[r], xs[r].t(), f"non-contiguous output {r}")


@case
def gather_scatter():
    dev = device()
    root = WORLD - 1
    xs = [make(r, (3, 2), torch.float32, 1100) for r in range(WORLD)]
    outs = [torch.empty(3, 2, device=dev) for _ in range(WORLD)] if RANK == root else None
    dist.gather(xs[RANK].to(dev), gather_list=outs, dst=root)
    if RANK == root:
        for r in range(WORLD):
            close(outs[r], xs[r], f"gather from {r}")
    chunks = [make(r, (4,), torch.int64, 1101) for r in range(WORLD)]
    out = torch.empty(4, dtype=torch.int64, device=dev)
    dist.scatter(out, scatter_list=[c.to(dev) for c in chunks] if RANK == 0 else None, src=0)
    close(out, chunks[RANK], "scatter")


# ---- reduce_scatter / all_to_all ----------------------------------------------------------------
@case
def reduce_scatter():
    dev = device()
    for dtype, op in ((torch.float32, "SUM"), (torch.bfloat16, "AVG"), (torch.int64, "MAX"),
                      (torch.float32, "PREMUL_SUM")):
        ins = [[make(r, (3, 5), dtype, 1200 + 10 * p) for p in range(WORLD)] for r in range(WORLD)]
        out = torch.empty(3, 5, dtype=dtype, device=dev)
        dist.reduce_scatter(out, [x.to(dev) for x in ins[RANK]], op=reduce_op(op, dtype))
        close(out, reference([ins[r][RANK] for r in range(WORLD)], op, dtype), f"reduce_scatter {op} {dtype}")


@case
def reduce_scatter_tensor():
    dev = device()
    for dtype, op in ((torch.float32, "SUM"), (torch.float16, "AVG"), (torch.int32, "MIN")):
        xs = [make(r, (WORLD * 4, 3), dtype, 1300) for r in range(WORLD)]
        out = torch.empty(4, 3, dtype=dtype, device=dev)
        dist.reduce_scatter_tensor(out, xs[RANK].to(dev), op=reduce_op(op, dtype))
        want = reference([x[RANK * 4:(RANK + 1) * 4] for x in xs], op, dtype)
        close(out, want, f"reduce_scatter_tensor {op} {dtype}")
    # large: several rounds of the slot
    xs = [make(r, (WORLD * 300000,), torch.float32, 1301) for r in range(WORLD)]
    out = torch.empty(300000, device=dev)
    dist.reduce_scatter_tensor(out, xs[RANK].to(dev))
    close(out, reference([x[RANK * 300000:(RANK + 1) * 300000] for x in xs], "SUM", torch.float32), "large")


@case
def all_to_all_single():
    dev = device()
    # equal splits
    xs = [make(r, (WORLD * 2, 3), torch.float32, 1400) for r in range(WORLD)]
    out = torch.empty(WORLD * 2, 3, device=dev)
    dist.all_to_all_single(out, xs[RANK].to(dev))
    close(out, torch.cat([xs[p][RANK * 2:(RANK + 1) * 2] for p in range(WORLD)]), "equal splits")

    # uneven: rank r sends (r + p) % 3 + (p == 0) rows to rank p (zero rows included)
    def rows(src, dst):
        return (src + dst) % 3 + (1 if dst == 0 else 0)

    ins = [make(r, (sum(rows(r, p) for p in range(WORLD)), 2), torch.int64, 1401) for r in range(WORLD)]
    in_splits = [rows(RANK, p) for p in range(WORLD)]
    out_splits = [rows(p, RANK) for p in range(WORLD)]
    out = torch.empty(sum(out_splits), 2, dtype=torch.int64, device=dev)
    dist.all_to_all_single(out, ins[RANK].to(dev), output_split_sizes=out_splits, input_split_sizes=in_splits)
    want = []
    for p in range(WORLD):
        off = sum(rows(p, q) for q in range(RANK))
        want.append(ins[p][off:off + rows(p, RANK)])
    close(out, torch.cat(want), "uneven splits")


@case
def all_to_all_lists():
    dev = device()
    ins = [[make(r, (p + 1,), torch.bfloat16, 1500 + p) for p in range(WORLD)] for r in range(WORLD)]
    outs = [torch.empty(RANK + 1, dtype=torch.bfloat16, device=dev) for _ in range(WORLD)]
    dist.all_to_all(outs, [x.to(dev) for x in ins[RANK]])
    for p in range(WORLD):
        close(outs[p], ins[p][RANK], f"all_to_all from {p}")


@case
def barrier_and_objects():
    dist.barrier()
    got = [None] * WORLD
    dist.all_gather_object(got, {"rank": RANK, "s": "x" * RANK})
    assert got == [{"rank": r, "s": "x" * r} for r in range(WORLD)], got
    objs = [f"from {RANK}", RANK * 10]
    dist.broadcast_object_list(objs, src=WORLD - 1)
    assert objs == [f"from {WORLD - 1}", (WORLD - 1) * 10], objs
    out = [None]
    dist.scatter_object_list(out, [("s", r) for r in range(WORLD)] if RANK == 0 else None, src=0)
    assert out == [("s", RANK)], out
    gathered = [None] * WORLD if RANK == 0 else None
    dist.gather_object(RANK * 3, gathered, dst=0)
    if RANK == 0:
        assert gathered == [r * 3 for r in range(WORLD)], gathered


# ---- point to point -------------------------------------------------------------------------------
@case
def send_recv_tags():
    dev = device()
    peer = (RANK + 1) % WORLD
    src = (RANK - 1) % WORLD
    a = torch.full((5,), float(RANK), device=dev)
    b = torch.arange(300000, dtype=torch.float32, device=dev) + RANK  # streams through the ring
    w1 = dist.isend(a, peer, tag=1)
    w2 = dist.isend(b, peer, tag=2)
    rb = torch.empty(300000, device=dev)
    ra = torch.empty(5, device=dev)
    dist.recv(rb, src, tag=2)  # the other tag first: tag 1 waits in order for its own recv
    dist.recv(ra, src, tag=1)
    w1.wait()
    w2.wait()
    close(ra, torch.full((5,), float(src)), "tag 1")
    close(rb, torch.arange(300000, dtype=torch.float32) + src, "tag 2")
    # CPU tensors, irecv. A rank runs its operations in issue order (as on one
    # NCCL stream): a recv waits for its message before the rank's next send
    # starts, so around a ring one rank must send first (or use
    # batch_isend_irecv, which runs a batch's sends before its receives).
    c = torch.tensor([RANK, 7], dtype=torch.int32)
    rc = torch.empty(2, dtype=torch.int32)
    if RANK == 0:
        reqs = [dist.isend(c, peer), dist.irecv(rc, src)]
    else:
        reqs = [dist.irecv(rc, src), dist.isend(c, peer)]
    for q in reqs:
        q.wait()
    assert rc.tolist() == [src, 7], rc


@case
def batch_isend_irecv():
    dev = device()
    peer = (RANK + 1) % WORLD
    src = (RANK - 1) % WORLD
    send = torch.arange(1000, dtype=torch.float32, device=dev) * (RANK + 1)
    recv = torch.empty(1000, device=dev)
    send2 = torch.full((3,), RANK, dtype=torch.int64, device=dev)
    recv2 = torch.empty(3, dtype=torch.int64, device=dev)
    # receives listed before sends on every rank: a batch must not deadlock
    ops = [dist.P2POp(dist.irecv, recv, src), dist.P2POp(dist.irecv, recv2, src, tag=5),
           dist.P2POp(dist.isend, send, peer), dist.P2POp(dist.isend, send2, peer, tag=5)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    close(recv, torch.arange(1000, dtype=torch.float32) * (src + 1), "batch")
    close(recv2, torch.full((3,), src, dtype=torch.int64), "batch tag 5")
    # CPU tensors, a non-contiguous receive buffer
    cbase = torch.zeros(4, 2)
    crecv = cbase.t()
    ops = [dist.P2POp(dist.irecv, crecv, src), dist.P2POp(dist.isend, torch.full((2, 4), float(RANK)), peer)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    close(cbase, torch.full((4, 2), float(src)), "cpu batch")


# ---- coalesced forms, groups, async -----------------------------------------------------------------
@case
def coalesced():
    from torch.distributed.distributed_c10d import _coalescing_manager

    dev = device()
    xs = [[make(r, (i + 2,), torch.float32, 1600 + i) for i in range(3)] for r in range(WORLD)]
    ts = [x.to(dev) for x in xs[RANK]]
    with _coalescing_manager(async_ops=True) as cm:
        for t in ts:
            dist.all_reduce(t)
    cm.wait()
    for i, t in enumerate(ts):
        close(t, reference([xs[r][i] for r in range(WORLD)], "SUM", torch.float32), f"all_reduce {i}")
    ins = [make(RANK, (4,), torch.float32, 1610 + i).to(dev) for i in range(2)]
    outs = [torch.empty(WORLD * 4, device=dev) for _ in range(2)]
    with _coalescing_manager(async_ops=True) as cm:
        for o, i in zip(outs, ins):
            dist.all_gather_into_tensor(o, i)
    cm.wait()
    for k in range(2):
        close(outs[k], torch.cat([make(r, (4,), torch.float32, 1610 + k) for r in range(WORLD)]), f"ag {k}")
    rs_in = [make(RANK, (WORLD * 3,), torch.float32, 1620 + i).to(dev) for i in range(2)]
    rs_out = [torch.empty(3, device=dev) for _ in range(2)]
    with _coalescing_manager(async_ops=True) as cm:
        for o, i in zip(rs_out, rs_in):
            dist.reduce_scatter_tensor(o, i)
    cm.wait()
    for k in range(2):
        want = reference([make(r, (WORLD * 3,), torch.float32, 1620 + k)[RANK * 3:(RANK + 1) * 3]
                          for r in range(WORLD)], "SUM", torch.float32)
        close(rs_out[k], want, f"rs {k}")
    # all_gather_coalesced and all_reduce_coalesced (the older list APIs)
    outl = [[torch.empty(2, device=dev) for _ in range(2)] for _ in range(WORLD)]
    dist.all_gather_coalesced(outl, [torch.full((2,), RANK + 0.5, device=dev),
                                     torch.full((2,), -RANK - 0.5, device=dev)])
    for r in range(WORLD):
        close(outl[r][0], torch.full((2,), r + 0.5), "agc 0")
        close(outl[r][1], torch.full((2,), -r - 0.5), "agc 1")
    ars = [torch.full((3,), RANK + 1.0, device=dev), torch.full((2,), 2.0, device=dev)]
    dist.all_reduce_coalesced(ars)
    close(ars[0], torch.full((3,), WORLD * (WORLD + 1) / 2), "arc 0")
    close(ars[1], torch.full((2,), 2.0 * WORLD), "arc 1")


@case
def subgroups():
    dev = device()
    # every rank alone, and the world in reverse order
    groups = [dist.new_group([r]) for r in range(WORLD)]
    t = torch.full((4,), RANK + 1.0, device=dev)
    dist.all_reduce(t, group=groups[RANK])
    close(t, torch.full((4,), RANK + 1.0), "singleton group")
    rev = dist.new_group(list(reversed(range(WORLD))))
    t = torch.full((3,), float(RANK), device=dev)
    dist.broadcast(t, src=0, group=rev)  # src is a global rank
    close(t, torch.zeros(3), "reversed group broadcast")
    if WORLD >= 4:
        evens = dist.new_group([0, 2])
        odds = dist.new_group([1, 3])
        mine = evens if RANK % 2 == 0 else odds
        t = torch.full((2,), float(RANK), device=dev)
        dist.all_reduce(t, group=mine)
        close(t, torch.full((2,), float(2 * (RANK % 2) + 2)), "evens/odds")
        out = [torch.empty(2, device=dev) for _ in range(2)]
        dist.all_gather(out, torch.full((2,), float(RANK), device=dev), group=mine)
        close(out[0], torch.full((2,), float(RANK % 2)), "evens/odds gather")
    for g in groups + [rev]:
        dist.destroy_process_group(g)


@case
def all_reduce_late_peer():
    # A small all_reduce runs on the caller's thread when it can start at
    # once; a peer arriving after the bounded spin leaves it to the stream.
    # Every result, and the order of what follows, must be as without it.
    dev = device()
    for i in range(6):
        if RANK == WORLD - 1 and i % 2:
            time.sleep(0.05)  # the others are left started
        t = torch.full((3,), float(RANK + i), device=dev)
        dist.all_reduce(t)
        big = torch.full((300_000,), float(RANK), device=dev)  # beyond the one-step size
        dist.all_reduce(big, op=dist.ReduceOp.MAX)
        b = torch.full((5,), float(RANK * 10 + i), device=dev)
        dist.broadcast(b, src=0)
        u = torch.full((2,), float(RANK + 1), device=dev)
        w = dist.all_reduce(u, op=dist.ReduceOp.PRODUCT, async_op=True)
        w.wait()
        close(t, torch.full((3,), float(sum(r + i for r in range(WORLD)))), f"late small {i}")
        close(big, torch.full((300_000,), float(WORLD - 1)), f"late large {i}")
        close(b, torch.full((5,), float(i)), f"late broadcast {i}")
        close(u, torch.full((2,), float(math.factorial(WORLD))), f"late async {i}")


@case
def async_wait_ordering():
    dev = device()
    # produced on the current stream by queued work the communication stream must wait for
    a = torch.ones(512, 512, device=dev)
    v = 1.0
    for _ in range(4):
        a = a @ a / 512.0 + 1.0
        v = v * v + 1.0  # 677 at the end
    work = dist.all_reduce(a, async_op=True)
    fut = work.get_future()
    work.wait()  # orders the current stream after the all_reduce; no host block
    b = a * 2  # runs after it on the current stream
    close(b, torch.full((512, 512), 2.0 * v * WORLD), "after wait")
    assert work.is_completed()
    assert work.is_success()
    vals = fut.wait()
    close(vals[0], torch.full((512, 512), v * WORLD), "future value")
    # a Future callback (what DDP's comm hooks chain)
    t = torch.full((8,), RANK + 1.0, device=dev)
    fut2 = dist.all_reduce(t, async_op=True).get_future().then(lambda f: f.value()[0] / WORLD)
    close(fut2.wait(), torch.full((8,), (WORLD + 1) / 2.0), "then")
    # wait with a timeout blocks the host until done
    t = torch.full((16,), 1.0, device=dev)
    assert dist.all_reduce(t, async_op=True).wait(timeout=timedelta(seconds=30))
    close(t, torch.full((16,), float(WORLD)), "wait(timeout)")
    # many in flight, waited in reverse order
    ts = [torch.full((100,), float(i + RANK), device=dev) for i in range(20)]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    for w in reversed(works):
        w.wait()
    for i, t in enumerate(ts):
        close(t, torch.full((100,), float(i * WORLD + WORLD * (WORLD - 1) / 2)), f"in flight {i}")
    # the input is freed by the caller right after the call: the backend keeps it alive
    out = torch.empty(WORLD * 1000, device=dev)
    w = dist.all_gather_into_tensor(out, torch.full((1000,), float(RANK), device=dev), async_op=True)
    w.wait()
    close(out, torch.cat([torch.full((1000,), float(r)) for r in range(WORLD)]), "temporary input")


@case
def cpu_future_callback_then_destroy():
    # A Python callback on a CPU operation's Future runs on the backend's
    # completer thread; destroying the group right away (the GIL held) must
    # neither deadlock nor lose it.
    g = dist.new_group(list(range(WORLD)))
    t = torch.ones(3)
    seen = []
    fut = dist.all_reduce(t, group=g, async_op=True).get_future()
    chained = fut.then(lambda f: seen.append(float(f.value()[0].sum())) or len(seen))
    dist.destroy_process_group(g)
    assert chained.wait() == 1
    assert seen == [3.0 * WORLD], seen


@case
def two_devices_one_group():
    # One group used on two devices: each has its communication stream, and
    # the group's operations keep their issue order across them.
    n = torch.neuron.device_count()
    other = torch.device("neuron", (device().index + 1) % n)
    a = torch.full((1000,), float(RANK), device=other)
    b = torch.full((1000,), float(RANK + 1), device=device())
    c = torch.full((10,), float(RANK + 2), device=other)
    works = [dist.all_reduce(x, async_op=True) for x in (a, b, c)]
    for w in works:
        w.wait()
    s = WORLD * (WORLD - 1) / 2
    close(a, torch.full((1000,), s), "other device")
    close(b, torch.full((1000,), s + WORLD), "own device")
    close(c, torch.full((10,), s + 2 * WORLD), "other device again")


@case
def side_stream():
    dev = device()
    s = torch.neuron.Stream()
    with torch.neuron.stream(s):
        t = torch.full((64,), float(RANK), device=dev) + 1
        w = dist.all_reduce(t, async_op=True)
        w.wait()
        r = t * 1
    s.synchronize()
    close(r, torch.full((64,), WORLD * (WORLD + 1) / 2.0), "side stream")
    # the group's own communication stream: a pool stream, not the default one
    info = torch_neuronx.distributed.backend_info()
    assert info["device"] == device().index and info["stream"] > 0, info
    assert info["operations"] > 0 and info["comm_name"].startswith("pg"), info


@case
def functional_collectives():
    import torch.distributed._functional_collectives as funcol

    dev = device()
    t = torch.full((4,), float(RANK + 1), device=dev)
    got = funcol.all_reduce(t, "sum", dist.group.WORLD)
    close(got, torch.full((4,), WORLD * (WORLD + 1) / 2.0), "funcol all_reduce")
    g = funcol.all_gather_tensor(t, 0, dist.group.WORLD)
    close(g, torch.cat([torch.full((4,), float(r + 1)) for r in range(WORLD)]), "funcol all_gather")
    rs = funcol.reduce_scatter_tensor(torch.ones(WORLD * 2, device=dev), "sum", 0, dist.group.WORLD)
    close(rs, torch.full((2,), float(WORLD)), "funcol reduce_scatter")


@case
def unsupported_is_clear():
    t = torch.ones(3, device=device())
    try:
        dist.all_reduce(t, op=ReduceOp.BAND)
    except (RuntimeError, ValueError) as e:
        assert "band" in str(e).lower() and "float" in str(e).lower(), e
    else:
        raise AssertionError("BAND on float32 did not raise")


@case
def kernel_threads_share():
    import os

    cores = len(os.sched_getaffinity(0))
    want = max(1, cores // int(os.environ["LOCAL_WORLD_SIZE"]))
    row = [r for r in torch_neuronx.env_vars() if r["name"] == "TORCH_NEURONX_KERNEL_THREADS"][0]
    assert row["value"] == str(want), (row, cores)


@case
def bench_small_latency():
    # The timing is printed for the log, never asserted; the values are checked.
    t = torch.full((2,), float(RANK), device=device())
    times = []
    for _ in range(200):
        t0 = time.perf_counter()
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        torch.neuron.synchronize()
        times.append(time.perf_counter() - t0)
    close(t, torch.full((2,), float(WORLD - 1)), "8-byte all_reduce")
    times.sort()
    print(f"rank {RANK}: 8-byte all_reduce median {times[len(times) // 2] * 1e6:.1f} us", flush=True)


import torch_neuronx  # noqa: E402

CASES = cases(__name__)

if __name__ == "__main__":
    main()
