"""``torch_neuronx.profiler``: where device time goes, without torch.profiler.

    with torch_neuronx.profiler.profile(trace_path="trace.json") as prof:
        loss = model(x).sum(); loss.backward(); opt.step()
    # prints the per-kernel table; prof.kernels() has the numbers

The runtime stamps every task a neuron stream runs (kernel launches,
copies, compiled programs, collectives) on the device clock, with the bytes
and FLOPs its launch descriptor implies. The table gives, per kernel: calls,
total and mean device time, share of the device time, achieved GB/s and
GFLOP/s and the fraction of the machine's limits they reach (memory
bandwidth for GB/s; FP32 or BF16 peak for GFLOP/s, by the kernel's compute
dtype). The trace is Chrome/Perfetto JSON with one row per stream.

For device time per ATen op, beside the CPU rows that launched it, use
``torch.profiler.profile(activities=[ProfilerActivity.CPU,
ProfilerActivity.PrivateUse1])``: the same runtime record feeds it. The two
cannot record at the same time.
"""
from __future__ import annotations

import json
import time
from collections import namedtuple
from typing import Any

import torch

from . import _C

__all__ = ["profile", "Activity"]

KINDS = ("kernel", "copy", "sync", "task")

Activity = namedtuple(
    "Activity",
    "name device stream kind failed dtype ticket enqueue_ns start_ns end_ns bytes flops correlation")


def _sync_all() -> None:
    for d in range(_C._device_count()):
        _C._synchronize(d)


class profile:
    """Records the neuron device's activity inside the ``with`` block.

    trace_path: write a Chrome trace there on exit. print_table: print the
    per-kernel table on exit (``row_limit`` rows). limits: the machine's
    limits as ``{"triad_gbs", "peak_fp32_gflops", "peak_bf16_gflops"}``;
    by default measured once per machine (torch_neuronx.limits), ``False``
    leaves the fraction columns out.
    """

    def __init__(self, trace_path: str | None = None, print_table: bool = True, row_limit: int = 20,
                 limits: dict | bool | None = None):
        self.trace_path = trace_path
        self.print_table = print_table
        self.row_limit = row_limit
        self._limits = limits
        self._records: list[Activity] = []
        self.wall_ns = 0
        self.dropped = 0

    def __enter__(self) -> "profile":
        # Earlier work must not spill into the window.
        _sync_all()
        _C._profiler_start()
        self._t0 = time.perf_counter_ns()
        self._device_t0 = _C._device_clock_ns()
        return self

    def __exit__(self, *exc: Any) -> None:
        _C._profiler_stop()  # waits for every stream
        self.wall_ns = time.perf_counter_ns() - self._t0
        self._records = [Activity(*r[:3], KINDS[r[3]] if 0 <= r[3] < len(KINDS) else "task", *r[4:])
                         for r in _C._profiler_read()]
        self.dropped = _C._profiler_dropped()
        if exc[0] is not None:
            return
        if self.trace_path:
            self.export_chrome_trace(self.trace_path)
        if self.print_table:
            print(self.table(self.row_limit))

    # ---- the numbers ---------------------------------------------------------------

    def activities(self) -> list[Activity]:
        """Every recorded task, in the order the device ran them per stream."""
        return list(self._records)

    @property
    def device_time_ns(self) -> int:
        """Time the streams spent running tasks (overlapping streams add up);
        event markers are left out."""
        return sum(a.end_ns - a.start_ns for a in self._records if a.kind != "sync")

    def limits(self) -> dict | None:
        if self._limits is False:
            return None
        if self._limits is None:
            from .limits import machine_limits

            self._limits = machine_limits()
        return self._limits

    def kernels(self) -> list[dict]:
        """One row per kernel (or copy / task) name, by total device time."""
        rows: dict[tuple, dict] = {}
        for a in self._records:
            if a.kind == "sync":
                continue
            r = rows.setdefault((a.name, a.kind), {"name": a.name, "kind": a.kind, "calls": 0, "total_ns": 0,
                                                   "bytes": 0, "flops": 0, "dtypes": set(), "failed": 0})
            r["calls"] += 1
            r["total_ns"] += a.end_ns - a.start_ns
            r["bytes"] += a.bytes
            r["flops"] += a.flops
            r["failed"] += a.failed
            if a.dtype:
                r["dtypes"].add(a.dtype)
        total = self.device_time_ns or 1
        lim = self.limits() or {}
        out = []
        for r in rows.values():
            ns = r.pop("total_ns") or 1
            dtypes = sorted(r.pop("dtypes"))
            gbs = r["bytes"] / ns if r["bytes"] else None  # bytes per ns = GB/s
            gflops = r["flops"] / ns if r["flops"] else None
            low_precision = any(d in ("bfloat16", "float16") for d in dtypes)
            peak = lim.get("peak_bf16_gflops" if low_precision else "peak_fp32_gflops")
            out.append({
                **r,
                "dtypes": dtypes,
                "total_us": ns / 1e3,
                "mean_us": ns / 1e3 / r["calls"],
                "share": ns / total,
                "gbps": gbs,
                "gflops": gflops,
                "bw_fraction": gbs / lim["triad_gbs"] if gbs and lim.get("triad_gbs") else None,
                "peak_fraction": gflops / peak if gflops and peak else None,
            })
        out.sort(key=lambda r: -r["total_us"])
        return out

    # ---- the table and the trace ------------------------------------------------------

    def table(self, limit: int = 20) -> str:
        rows = self.kernels()
        dev_ms, wall_ms = self.device_time_ns / 1e6, self.wall_ns / 1e6
        busy = f" ({dev_ms / wall_ms:.0%} of wall)" if wall_ms else ""
        lines = [f"neuron profile: {sum(r['calls'] for r in rows)} device tasks, {dev_ms:.3f} ms device time "
                 f"in {wall_ms:.3f} ms wall{busy}"]
        head = f"{'kernel':<28} {'calls':>7} {'total ms':>10} {'mean us':>10} {'share':>7} " \
               f"{'GB/s':>8} {'%bw':>6} {'GFLOP/s':>9} {'%peak':>6}"
        lines += [head, "-" * len(head)]

        def num(v: float | None, fmt: str) -> str:
            return format(v, fmt) if v is not None else "-"

        for r in rows[:limit]:
            name = r["name"] if r["kind"] == "kernel" else f"{r['name']} [{r['kind']}]"
            if r["failed"]:
                name += " (failed)"
            lines.append(
                f"{name[:28]:<28} {r['calls']:>7} {r['total_us'] / 1e3:>10.3f} {r['mean_us']:>10.1f} "
                f"{r['share']:>7.1%} {num(r['gbps'], '.1f'):>8} {num(r['bw_fraction'], '.0%'):>6} "
                f"{num(r['gflops'], '.1f'):>9} {num(r['peak_fraction'], '.0%'):>6}")
        if len(rows) > limit:
            rest = rows[limit:]
            lines.append(f"... {len(rest)} more kernels, {sum(r['share'] for r in rest):.1%} of device time")
        lim = self.limits()
        if lim:
            def fig(k: str, unit: str) -> str:
                return f"{lim[k]:.1f} {unit}" if lim.get(k) else "n/a"

            lines.append(f"limits: memory bandwidth {fig('triad_gbs', 'GB/s')} (triad), FP32 peak "
                         f"{fig('peak_fp32_gflops', 'GFLOP/s')}, BF16 peak {fig('peak_bf16_gflops', 'GFLOP/s')}")
        if self.dropped:
            lines.append(f"warning: {self.dropped} device tasks were not recorded (profiler buffer full)")
        return "\n".join(lines)

    def export_chrome_trace(self, path: str) -> None:
        """Chrome / Perfetto trace: one process per device, one thread per stream,
        times in microseconds from the start of the profile."""
        events: list[dict] = []
        seen: set[tuple[int, int]] = set()
        t0 = self._device_t0
        for a in self._records:
            if (a.device, a.stream) not in seen:
                seen.add((a.device, a.stream))
                events.append({"ph": "M", "name": "thread_name", "pid": a.device, "tid": a.stream,
                               "args": {"name": f"stream {a.stream}"}})
            args: dict[str, Any] = {"kind": a.kind, "ticket": a.ticket,
                                    "queued_us": (a.start_ns - a.enqueue_ns) / 1e3}
            if a.dtype:
                args["dtype"] = a.dtype
            if a.bytes:
                args["bytes"] = a.bytes
            if a.flops:
                args["flops"] = a.flops
            if a.failed:
                args["failed"] = True
            events.append({"ph": "X", "cat": a.kind, "name": a.name, "pid": a.device, "tid": a.stream,
                           "ts": (a.start_ns - t0) / 1e3, "dur": (a.end_ns - a.start_ns) / 1e3, "args": args})
        for d in sorted({d for d, _ in seen}):
            events.append({"ph": "M", "name": "process_name", "pid": d, "args": {"name": f"neuron:{d}"}})
        with open(path, "w") as f:
            json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, f)
