"""Worker processes for the fuzzer: cases go out in batches, one batch per
worker at a time; a worker that dies (signal, abort) or exceeds the per-case
timeout is killed and replaced, and the cases of its batch that had not
finished are re-run one by one in workers of their own. A case that dies
alone is a ``crash`` (or ``hang``); the case that was running when a batch
died but passes alone is still recorded as ``crash``/``hang``, with the ids of
the batch's earlier cases (``only_after``), since it needs them to fail.
"""
from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Iterator

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "fuzz_worker.py")


@dataclass
class Worker:
    wid: int
    proc: subprocess.Popen
    log_path: str
    spawned: float
    ready: bool = False
    batch: list[dict] = field(default_factory=list)
    done: set = field(default_factory=set)
    solo: bool = False
    inflight: str | None = None
    started: float = 0.0
    phase: str = ""
    killed_for: str | None = None


def _tail(path: str, n: int = 1500) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - n))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


class Pool:
    """`n` worker processes running cases under a per-case timeout."""

    def __init__(self, n: int, case_timeout: float, log_dir: str, start_timeout: float = 300.0,
                 python: str | None = None, worker: str = WORKER):
        self.n, self.case_timeout, self.start_timeout = n, case_timeout, start_timeout
        self.log_dir = log_dir
        self.python = python or sys.executable
        self.worker = worker
        os.makedirs(log_dir, exist_ok=True)
        self.q: queue.Queue = queue.Queue()
        self.workers: dict[int, Worker] = {}
        self.next_wid = 0
        self.spawn_failures = 0
        self.executed: set[str] = set()   # ATen ops run on the device (torch_neuronx.get_executed_ops)
        self.native: set[str] = set()     # torch_neuronx.native_ops(), as a worker reports it

    # ---- processes -----------------------------------------------------------------
    def _spawn(self) -> Worker:
        wid = self.next_wid
        self.next_wid += 1
        log_path = os.path.join(self.log_dir, f"worker-{wid % (2 * self.n)}.log")
        env = dict(os.environ, TORCH_NEURONX_KERNEL_THREADS="1", OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        log = open(log_path, "wb")
        proc = subprocess.Popen([self.python, self.worker], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                env=env, text=True, bufsize=1, cwd=HERE)
        log.close()
        w = Worker(wid, proc, log_path, time.monotonic())
        threading.Thread(target=self._reader, args=(w,), daemon=True).start()
        self.workers[wid] = w
        return w

    def _reader(self, w: Worker) -> None:
        assert w.proc.stdout is not None
        for line in w.proc.stdout:
            try:
                self.q.put((w.wid, json.loads(line)))
            except json.JSONDecodeError:
                continue
        self.q.put((w.wid, None))

    def _kill(self, w: Worker, why: str) -> None:
        w.killed_for = why
        try:
            w.proc.send_signal(signal.SIGKILL)
        except ProcessLookupError:
            pass

    def close(self) -> None:
        """Stops every worker (closing stdin lets it exit; a stuck one is killed)."""
        for w in list(self.workers.values()):
            try:
                assert w.proc.stdin is not None
                w.proc.stdin.close()
            except OSError:
                pass
        deadline = time.monotonic() + 5
        for w in list(self.workers.values()):
            try:
                w.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self._kill(w, "close")
                w.proc.wait()
        self.workers.clear()

    def _send(self, w: Worker, batch: list[dict], solo: bool, repro: bool) -> None:
        w.batch, w.done, w.solo, w.inflight = batch, set(), solo, None
        assert w.proc.stdin is not None
        try:
            for c in batch:
                msg = {"case": c, "repro": repro, "repro_only": bool(c.get("_repro_only"))}
                w.proc.stdin.write(json.dumps(msg) + "\n")
            w.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass   # the reader thread reports the death

    # ---- the loop ------------------------------------------------------------------------
    def run(self, cases: Iterator[dict], on_result: Callable[[dict], None], deadline: float | None = None,
            batch_size: int = 16, repro: bool = True) -> None:
        """Runs cases from `cases` until it is exhausted or `deadline` (monotonic)
        passes, calling `on_result` with every case's result record."""
        pending: deque = deque()          # (batch, solo)
        suspects: dict[str, dict] = {}    # case id -> how its batch died
        exhausted = False
        while len(self.workers) < self.n:
            self._spawn()
        while True:
            now = time.monotonic()
            past = deadline is not None and now >= deadline
            for w in list(self.workers.values()):
                if not w.ready or w.batch:
                    continue
                if pending:
                    b, solo = pending.popleft()
                    self._send(w, b, solo, repro)
                elif not exhausted and not past:
                    b = []
                    for c in cases:
                        b.append(c)
                        if len(b) >= batch_size:
                            break
                    if len(b) < batch_size:
                        exhausted = True
                    if b:
                        self._send(w, b, False, repro)
            busy = [w for w in self.workers.values() if w.batch]
            if not busy and not pending and (exhausted or past):
                return
            try:
                wid, msg = self.q.get(timeout=0.25)
            except queue.Empty:
                wid, msg = None, None
            if wid is not None and wid in self.workers:
                w = self.workers[wid]
                if msg is None:
                    self._died(w, pending, suspects, on_result)
                elif "ready" in msg:
                    w.ready = True
                    self.native.update(msg.get("native", []))
                    self.spawn_failures = 0
                elif "start" in msg:
                    w.inflight, w.started, w.phase = msg["start"], time.monotonic(), "setup"
                elif "phase" in msg:
                    w.phase = msg["phase"]
                elif "result" in msg:
                    res = msg["result"]
                    self.executed.update(res.pop("executed", []) or [])
                    if res["id"] in suspects:
                        res = self._confirm(res, suspects.pop(res["id"]))
                    w.done.add(res["id"])
                    w.inflight = None
                    if len(w.done) >= len(w.batch):
                        w.batch = []
                    on_result(res)
            now = time.monotonic()
            for w in list(self.workers.values()):
                if w.killed_for:
                    continue
                if w.inflight and now - w.started > self.case_timeout:
                    self._kill(w, "hang")
                elif not w.ready and now - w.spawned > self.start_timeout:
                    self._kill(w, "start-timeout")

    def _died(self, w: Worker, pending: deque, suspects: dict, on_result: Callable[[dict], None]) -> None:
        rc = w.proc.wait()
        del self.workers[w.wid]
        why = w.killed_for or (f"signal {signal.Signals(-rc).name}" if rc < 0 else f"exit {rc}")
        if not w.ready:
            self.spawn_failures += 1
            if self.spawn_failures >= 3:
                raise RuntimeError(f"worker failed to start 3 times ({why}); log:\n{_tail(w.log_path)}")
            time.sleep(min(60, 10 * self.spawn_failures))  # e.g. the extension being relinked
            if w.batch:
                pending.appendleft((w.batch, w.solo))
            self._spawn()
            return
        cls = "hang" if w.killed_for == "hang" else "crash"
        info = {"reason": why, "side": w.phase, "stderr_tail": _tail(w.log_path, 800)}
        left = [c for c in w.batch if c["id"] not in w.done]
        if w.solo and left:
            c = left[0]
            earlier = {k: v for k, v in suspects.pop(c["id"], {}).items() if k not in ("only_after", "cls")}
            on_result({"id": c["id"], "op": c["op"], "family": c.get("family"), "fn": c.get("fn"), "cls": cls,
                       "detail": {**earlier, **info}})
        else:
            prior = [c["id"] for c in w.batch if c["id"] in w.done]
            for c in reversed(left):
                if c["id"] == w.inflight:
                    suspects[c["id"]] = {"cls": cls, **info, "only_after": prior}
                pending.appendleft(([c], True))
        self._spawn()

    @staticmethod
    def _confirm(res: dict, suspect: dict) -> dict:
        """A case that killed its batch but passed alone: still recorded, with the cases before it."""
        res = dict(res)
        res["detail"] = {"alone": res.get("cls"), **suspect}
        res["cls"] = suspect["cls"]
        return res
