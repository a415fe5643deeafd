"""Collective bandwidth of the torch.distributed backend "neuron" against Gloo,
nccl-tests style, in the same run (`make bench-dist`; not part of `make test`):

    .venv/bin/python benchmarks/bench_dist.py [--worlds 2,4] [--max-mib 64]
        [--ops all_reduce,broadcast] [--machines 2] [--ddp 2]

For each world size it launches that many ranks (env:// on a free port, as
torchrun does); --machines M splits them into M simulated machines
(TORCH_NEURONX_NODE_ID), so the neuron backend runs hierarchically (shared
memory within, Gloo between). Every rank joins the default group "neuron"
(neuron tensors) and a Gloo group (CPU tensors), and times each collective
and size on both:
median of the repeats, each repeat ended by a barrier-free completion on
every rank (neuron: synchronize; Gloo: wait). Columns as nccl-tests prints
them: size (bytes of one rank's largest buffer: the gathered output of
all_gather, the input of reduce_scatter), count (float32 elements), time
(us), algbw = size / time, busbw = algbw x the collective's factor
(all_reduce 2(n-1)/n; all_gather, reduce_scatter and all_to_all (n-1)/n;
broadcast 1), the neuron / Gloo busbw ratio and neuron's busbw as a share of
the machine's memory bandwidth (STREAM triad, build/triad run at the start,
else the cached torch_neuronx.limits; the
memcpy bandwidth of one large CPU copy, measured here, is printed beside it):
a shared-memory collective moves every byte through memory at least twice.

--ddp N also times a DDP training step (an MLP stack, SGD) on N ranks against
one process doing the same per-rank work: the same model and batch with the
kernel threads of one rank (its share of the cores), the issue's 1.25 target.
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time

FACTORS = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
}


def _triad_now() -> float | None:
    """The STREAM triad measured now, in this run (build/triad, which
    `make bench-dist` builds), or None without it."""
    import json

    tool = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "triad")
    try:
        out = subprocess.run([tool], capture_output=True, text=True, timeout=120, check=True).stdout
        return float(json.loads(out)["gbs"])
    except (OSError, subprocess.SubprocessError, ValueError, KeyError):
        return None


def _rank_main(max_mib: int, ops: list[str]) -> None:
    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning)  # the *_into_tensor names
    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.neuron.set_device(rank % torch.neuron.device_count())
    dev = torch.device("neuron", rank % torch.neuron.device_count())
    dist.init_process_group("neuron")
    gloo = dist.new_group(backend="gloo")

    sizes = [8, 1 << 10, 64 << 10, 1 << 20, 8 << 20]
    if max_mib >= 64:
        sizes.append(64 << 20)
    sizes = [s for s in sizes if s <= max_mib << 20]

    def run(op, t, out, group):
        if op == "all_reduce":
            dist.all_reduce(t, group=group)
        elif op == "all_gather":
            dist.all_gather_into_tensor(out, t, group=group)
        elif op == "reduce_scatter":
            dist.reduce_scatter_tensor(out, t, group=group)
        elif op == "all_to_all":
            dist.all_to_all_single(out, t, group=group)
        elif op == "broadcast":
            dist.broadcast(t, src=0, group=group)

    def buffers(op, count, device):
        n = max(world, count - count % world)
        t = torch.ones(n, device=device)
        if op == "all_gather":  # size: the gathered output (nccl-tests' convention)
            t = torch.ones(n // world, device=device)
            return t, torch.empty(n, device=device), n
        if op == "reduce_scatter":
            return t, torch.empty(n // world, device=device), n
        if op == "all_to_all":
            return t, torch.empty(n, device=device), n
        return t, None, n

    def timed(op, size, backend):
        device = dev if backend == "neuron" else "cpu"
        group = None if backend == "neuron" else gloo
        t, out, n = buffers(op, size // 4, device)
        reps = 300 if size <= (64 << 10) else (12 if size <= (8 << 20) else 5)
        # Small sizes: enough warm-up calls for the ranks to fall into step
        # (the first calls after a large size arrive apart).
        for _ in range(30 if size <= (64 << 10) else 2):
            run(op, t, out, group)
        if backend == "neuron":
            torch.neuron.synchronize()
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            run(op, t, out, group)
            if backend == "neuron":
                torch.neuron.synchronize()
            times.append(time.perf_counter() - t0)
        # the slowest rank's median
        m = torch.tensor([statistics.median(times)], dtype=torch.float64)
        dist.all_reduce(m, op=dist.ReduceOp.MAX, group=gloo)
        return m.item(), n * 4

    triad = None
    if rank == 0:
        from torch_neuronx.limits import machine_limits

        triad = _triad_now() or machine_limits().get("triad_gbs")
        big = torch.empty(64 << 18)
        dst = torch.empty_like(big)
        dst.copy_(big)
        t0 = time.perf_counter()
        for _ in range(5):
            dst.copy_(big)
        copy_gbs = 5 * 2 * big.numel() * 4 / (time.perf_counter() - t0) / 1e9
        import torch_neuronx

        info = torch_neuronx.distributed.backend_info()
        where = f"{info['machines']} machines x {info['local_size']} ranks" if info["machines"] > 1 else "one machine"
        print(f"\n== {world} ranks, {where} (memcpy read+write bandwidth here: {copy_gbs:.1f} GB/s,"
              f" triad {triad or float('nan'):.1f} GB/s) ==")
        print(f"{'collective':>15} {'size(B)':>10} {'count':>9} | {'neuron us':>10} {'algbw':>7} {'busbw':>7} |"
              f" {'gloo us':>10} {'algbw':>7} {'busbw':>7} | {'ratio':>6} {'%triad':>6}")
    for op in [o for o in FACTORS if o in ops]:
        for size in sizes:
            row = {}
            for backend in ("neuron", "gloo"):
                sec, nbytes = timed(op, size, backend)
                alg = nbytes / sec / 1e9
                row[backend] = (sec * 1e6, alg, alg * FACTORS[op](world))
            if rank == 0:
                (nt, na, nb), (gt, ga, gb) = row["neuron"], row["gloo"]
                share = f"{100 * nb / triad:>5.0f}%" if triad else f"{'-':>6}"
                print(f"{op:>15} {nbytes:>10} {nbytes // 4:>9} | {nt:>10.1f} {na:>7.2f} {nb:>7.2f} |"
                      f" {gt:>10.1f} {ga:>7.2f} {gb:>7.2f} | {nb / gb if gb else float('inf'):>6.1f} {share}",
                      flush=True)
    dist.destroy_process_group()


def _ddp_main(steps: int) -> None:
    """One rank of the DDP step benchmark, or (WORLD_SIZE=1) the single
    process doing the same per-rank work: the same model, batch and kernel
    threads (a rank's share of the cores), no DDP."""
    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning)
    import torch
    import torch.distributed as dist
    from torch import nn

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dev = torch.device("neuron", rank % torch.neuron.device_count())
    torch.neuron.set_device(dev)
    torch.manual_seed(0)
    # GPT-2-block-sized MLPs: 4 x (768 -> 3072 -> 768), 19 M parameters,
    # 76 MB of gradients in DDP's 25 MB buckets.
    layers = []
    for _ in range(4):
        layers += [nn.Linear(768, 3072), nn.GELU(), nn.Linear(3072, 768)]
    model = nn.Sequential(*layers).to(dev)
    if world > 1:
        dist.init_process_group("neuron")
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(8, 64, 768, device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        model(x).square().mean().backward()
        opt.step()
        torch.neuron.synchronize()

    for _ in range(3):
        step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    if world > 1:
        m = torch.tensor([med], dtype=torch.float64)
        dist.all_reduce(m, op=dist.ReduceOp.MAX, group=dist.new_group(backend="gloo"))
        med = m.item()
        dist.destroy_process_group()
    if rank == 0:
        print(f"DDP_STEP {world} {med * 1e3:.2f}", flush=True)


def _ddp(world: int, steps: int) -> None:
    """The DDP step on `world` ranks against one process doing the same per-rank work."""
    from torch_neuronx.distributed import kernel_threads_for

    threads = str(kernel_threads_for(world))
    got = {}
    for w in (1, world):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(w),
                   LOCAL_WORLD_SIZE=str(w), TORCH_NEURONX_KERNEL_THREADS=threads)
        cmd = [sys.executable, __file__, "--ddp-main", "--ddp-steps", str(steps)]
        procs = [subprocess.Popen(cmd, env=dict(env, RANK=str(r), LOCAL_RANK=str(r)), stdout=subprocess.PIPE,
                                  text=True) for r in range(w)]
        for p in procs:
            out, _ = p.communicate()
            for line in out.splitlines():
                if line.startswith("DDP_STEP"):
                    got[w] = float(line.split()[2])
    print(f"\n== DDP training step (4 x MLP 768-3072-768, batch 8x64, SGD; {threads} kernel thread(s) per "
          f"process) ==")
    print(f"one process: {got.get(1, float('nan')):.1f} ms; DDP on {world} ranks: {got.get(world, float('nan')):.1f} ms"
          f" per step; ratio {got.get(world, float('nan')) / got.get(1, float('nan')):.2f} (target <= 1.25)")


def _launch(world: int, max_mib: int, ops: str, machines: int) -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    local = world // machines
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(world),
               LOCAL_WORLD_SIZE=str(local))
    cmd = [sys.executable, __file__, "--rank-main", "--max-mib", str(max_mib), "--ops", ops]
    procs = [subprocess.Popen(cmd, env=dict(env, RANK=str(r), LOCAL_RANK=str(r % local),
                                            **({"TORCH_NEURONX_NODE_ID": f"m{r // local}"} if machines > 1 else {})))
             for r in range(world)]
    return max(p.wait() for p in procs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--worlds", default="2,4")
    ap.add_argument("--max-mib", type=int, default=64)
    ap.add_argument("--ops", default=",".join(FACTORS), help="collectives to time, comma-separated")
    ap.add_argument("--machines", type=int, default=1, help="simulated machines the ranks are split into")
    ap.add_argument("--ddp", type=int, default=0, metavar="RANKS",
                    help="also time a DDP training step on RANKS ranks against one process")
    ap.add_argument("--ddp-steps", type=int, default=10)
    ap.add_argument("--rank-main", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--ddp-main", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.ddp_main:
        _ddp_main(args.ddp_steps)
        return
    ops = [o for o in args.ops.split(",") if o]
    unknown = sorted(set(ops) - set(FACTORS))
    if unknown:
        ap.error(f"unknown collectives {unknown}; choose from {', '.join(FACTORS)}")
    if args.rank_main:
        _rank_main(args.max_mib, ops)
        return
    rc = 0
    for w in (int(x) for x in args.worlds.split(",") if x):
        if w % args.machines:
            ap.error(f"{w} ranks do not split into {args.machines} machines")
        rc = max(rc, _launch(w, args.max_mib, args.ops, args.machines))
    if args.ddp:
        _ddp(args.ddp, args.ddp_steps)
    sys.exit(rc)


if __name__ == "__main__":
    main()
