"""The rank side of the distributed tests: a worker module declares cases with
@case; main() initialises the process group "neuron" from the environment
(env://), runs the selected cases in order on every rank, and writes
{case: "ok" | traceback} to <out>/rank<R>.json after each case (a later hang
still leaves the earlier results). After each case the ranks meet in a
barrier, so a failed case does not shift the next one's collectives."""
from __future__ import annotations

import json
import os
import sys
import traceback
from datetime import timedelta

import torch
import torch.distributed as dist

# Cases by module: the parent pytest process imports several worker modules.
REGISTRY: dict = {}


class ExitNow(Exception):
    """Raised by a case that leaves the job (its peers may be gone): the case
    counts as passed and the process exits without the closing barrier."""


def case(fn):
    REGISTRY.setdefault(fn.__module__, {})[fn.__name__] = fn
    return fn


def cases(module: str) -> list:
    """Names of the cases a worker module declares, in order."""
    return list(REGISTRY.get(module, {}))


RANK = int(os.environ.get("RANK", "0"))
WORLD = int(os.environ.get("WORLD_SIZE", "1"))
LOCAL_RANK = int(os.environ.get("LOCAL_RANK", "0"))


def device() -> torch.device:
    return torch.device("neuron", LOCAL_RANK % torch.neuron.device_count())


def main(timeout_s: float = 60, registry: dict | None = None) -> None:
    """Runs the cases of `registry` (default: the ones the script itself declares)."""
    out = sys.argv[1]
    CASES = registry if registry is not None else REGISTRY["__main__"]
    selected = sys.argv[2:] or list(CASES)
    torch.neuron.set_device(device())
    dist.init_process_group("neuron", timeout=timedelta(seconds=timeout_s))
    results = {}
    path = os.path.join(out, f"rank{RANK}.json")

    def save():
        with open(path + ".tmp", "w") as f:
            json.dump({"pid": os.getpid(), "results": results}, f)
        os.replace(path + ".tmp", path)

    save()
    for name in selected:
        try:
            CASES[name]()
            torch.neuron.synchronize()
            results[name] = "ok"
        except ExitNow:
            results[name] = "ok"
            save()
            os._exit(0)
        except Exception:
            results[name] = traceback.format_exc()
        save()
        try:
            dist.barrier()
        except Exception:
            results[name + ".barrier"] = traceback.format_exc()
            save()
            break
    dist.destroy_process_group()
