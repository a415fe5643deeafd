"""Launches N ranks of a worker script the way torchrun does (env://: MASTER_ADDR,
MASTER_PORT on a free port, RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE), or
under torchrun itself, as one machine or as several torchrun "nodes" on this
machine (--nnodes, --node-rank, one rendezvous endpoint; each node's ranks get
TORCH_NEURONX_NODE_ID, so the backend treats the nodes as different machines),
and collects each rank's results (dist_worker.py writes them), its exit code
and its output. TORCH_NEURONX_KERNEL_THREADS is removed from the ranks'
environment, so the backend's share of the cores (cores // LOCAL_WORLD_SIZE)
applies."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class RunResult:
    world: int
    returncodes: list
    outputs: list
    results: list = field(default_factory=list)  # per rank: {case: "ok" | traceback}
    pids: list = field(default_factory=list)
    seconds: float = 0.0
    timed_out: bool = False

    def log(self) -> str:
        who = "rank" if len(self.outputs) == self.world else "launcher"
        return "\n".join(f"--- {who} {r} (exit {c}) ---\n{o[-6000:]}"
                         for r, (c, o) in enumerate(zip(self.returncodes, self.outputs)))

    def case(self, name: str) -> None:
        """Asserts that case `name` passed on every rank."""
        problems = []
        for r, res in enumerate(self.results):
            outcome = res.get(name)
            if outcome is None:
                problems.append(f"rank {r}: case {name} did not run")
            elif outcome != "ok":
                problems.append(f"rank {r}: {outcome}")
        if problems:
            raise AssertionError(f"{name}:\n" + "\n".join(problems) +
                                 ("" if all(self.results) else "\n" + self.log()))


def run_ranks(script: str, world: int, *args: str, timeout: float = 150, env: dict | None = None,
              torchrun: bool = False, nodes: int = 1) -> RunResult:
    """`nodes` > 1: torchrun on each of that many nodes (world // nodes ranks each)."""
    torchrun = torchrun or nodes > 1
    out = tempfile.mkdtemp(prefix="neuron-dist-")
    base = dict(os.environ)
    base.pop("TORCH_NEURONX_KERNEL_THREADS", None)
    base["PYTHONPATH"] = os.pathsep.join([HERE, ROOT, base.get("PYTHONPATH", "")])
    base["PYTHONUNBUFFERED"] = "1"
    base.update(env or {})
    port = free_port()
    logs = [open(os.path.join(out, f"log{r}.txt"), "w+") for r in range(world if not torchrun else nodes)]
    t0 = time.monotonic()
    if nodes > 1:
        assert world % nodes == 0, (world, nodes)
        procs = [subprocess.Popen([sys.executable, "-m", "torch.distributed.run", f"--nnodes={nodes}",
                                   f"--node-rank={k}", f"--nproc-per-node={world // nodes}",
                                   "--master-addr=127.0.0.1", f"--master-port={port}", script, out, *args],
                                  env={**base, "TORCH_NEURONX_NODE_ID": f"node{k}"}, stdout=logs[k],
                                  stderr=subprocess.STDOUT, cwd=ROOT)
                 for k in range(nodes)]
    elif torchrun:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={world}",
               script, out, *args]
        procs = [subprocess.Popen(cmd, env=base, stdout=logs[0], stderr=subprocess.STDOUT, cwd=ROOT)]
    else:
        base.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(world),
                    LOCAL_WORLD_SIZE=str(world))
        procs = [subprocess.Popen([sys.executable, script, out, *args],
                                  env={**base, "RANK": str(r), "LOCAL_RANK": str(r)},
                                  stdout=logs[r], stderr=subprocess.STDOUT, cwd=ROOT)
                 for r in range(world)]
    timed_out = False
    for p in procs:
        left = max(0.1, timeout - (time.monotonic() - t0))
        try:
            p.wait(left)
        except subprocess.TimeoutExpired:
            timed_out = True
            break
    if timed_out:
        for p in procs:
            if p.poll() is None:
                p.kill()
        for p in procs:
            p.wait()
    seconds = time.monotonic() - t0
    outputs = []
    for f in logs:
        f.seek(0)
        outputs.append(f.read())
        f.close()
    results, pids = [], []
    for r in range(world):
        path = os.path.join(out, f"rank{r}.json")
        if os.path.exists(path):
            with open(path) as f:
                data = json.load(f)
            results.append(data["results"])
            pids.append(data["pid"])
        else:
            results.append({})
    shutil.rmtree(out, ignore_errors=True)
    return RunResult(world, [p.returncode for p in procs], outputs, results, pids, seconds, timed_out)


def shm_entries(pids) -> list[str]:
    """Entries of /dev/shm the transport made for these processes (its segment
    names hold the creator's pid: /nrt-<name>-r<rank>-<pid>-<nonce>)."""
    try:
        names = os.listdir("/dev/shm")
    except FileNotFoundError:
        return []
    return [n for n in names if n.startswith("nrt-") and any(f"-{pid}-" in n for pid in pids)]
