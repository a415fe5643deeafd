"""The fuzzer's outputs: counts per class and per op, the summary table
(printed, and written to build/fuzz/summary.md) and the reproducers.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

CLASSES = ["ok", "value-mismatch", "dtype-mismatch", "shape-mismatch", "device-rejects-cpu-accepts",
           "cpu-rejects-device-accepts", "both-raise-different-class", "crash", "hang", "fuzzer-error",
           "invalid-case"]
SHORT = {"value-mismatch": "value", "dtype-mismatch": "dtype", "shape-mismatch": "shape",
         "device-rejects-cpu-accepts": "dev-rej", "cpu-rejects-device-accepts": "cpu-rej",
         "both-raise-different-class": "exc-cls", "crash": "crash", "hang": "hang", "fuzzer-error": "fz-err",
         "invalid-case": "invalid"}


@dataclass
class Tally:
    """Running counts of a fuzz run."""
    total: int = 0
    by_class: Counter = field(default_factory=Counter)
    new_by_class: Counter = field(default_factory=Counter)
    known_by_class: Counter = field(default_factory=Counter)
    allowed_by_class: Counter = field(default_factory=Counter)
    by_op: dict = field(default_factory=lambda: defaultdict(Counter))
    known: Counter = field(default_factory=Counter)
    allowed: Counter = field(default_factory=Counter)
    f64_rescued: int = 0
    late_errors: int = 0
    fallback_ops: Counter = field(default_factory=Counter)

    def add(self, res: dict) -> None:
        cls = res.get("cls", "?")
        self.total += 1
        self.by_class[cls] += 1
        self.by_op[res.get("op", "?")][cls] += 1
        if res.get("known"):
            self.known[res["known"]] += 1
            self.known_by_class[cls] += 1
        elif res.get("allowed"):
            self.allowed[res["allowed"]] += 1
            self.allowed_by_class[cls] += 1
        elif cls != "ok":
            self.new_by_class[cls] += 1
        det = res.get("detail") or {}
        if det.get("f64_rescued") or det.get("f64_rescued_grads"):
            self.f64_rescued += 1
        if cls == "ok" and res.get("cpu_exc") and (res.get("dev_exc") or [0, 0, "call"])[2] != "call":
            self.late_errors += 1
        for f in res.get("fallback") or []:
            self.fallback_ops[f] += 1


def top_ops(t: Tally, cls: str, n: int = 5) -> list[tuple[str, int]]:
    rows = [(op, c[cls]) for op, c in t.by_op.items() if c[cls]]
    return sorted(rows, key=lambda x: (-x[1], x[0]))[:n]


def summary_md(t: Tally, header: dict, new_groups: dict, known_reasons: dict) -> str:
    """The summary as Markdown: run facts, counts per class, top ops per class,
    the per-op table, known groups hit, and the new groups with a reproducer."""
    lines = ["# Fuzz summary", ""]
    for k, v in header.items():
        lines.append(f"- {k}: {v}")
    lines += ["", "| class | cases | new | known | allowed | top ops |", "|---|---:|---:|---:|---:|---|"]
    for cls in CLASSES:
        n = t.by_class.get(cls, 0)
        if not n and cls in ("fuzzer-error", "invalid-case"):
            continue
        new = t.new_by_class.get(cls, 0)
        tops = ", ".join(f"{o} {c}" for o, c in top_ops(t, cls)) if cls != "ok" else ""
        kn = str(t.known_by_class.get(cls, 0)) if cls != "ok" else ""
        al = str(t.allowed_by_class.get(cls, 0)) if cls != "ok" else ""
        lines.append(f"| {cls} | {n} | {new if cls != 'ok' else ''} | {kn} | {al} | {tops} |")
    lines += ["", f"float64 re-check turned {t.f64_rescued} value mismatches into ok (the CPU was no closer).",
              f"{t.late_errors} cases where both raise, the device only at synchronize/copy, counted ok.", ""]
    cols = [c for c in CLASSES[1:] if t.by_class.get(c)]
    lines += ["## Per op", "", "| op | cases | ok | " + " | ".join(SHORT[c] for c in cols) + " |",
              "|---|---:|---:|" + "---:|" * len(cols)]
    for op in sorted(t.by_op, key=lambda o: (-(sum(t.by_op[o].values()) - t.by_op[o]["ok"]), o)):
        c = t.by_op[op]
        lines.append(f"| {op} | {sum(c.values())} | {c['ok']} | " + " | ".join(str(c[k] or "") for k in cols) + " |")
    if t.known or t.allowed:
        lines += ["", "## Known groups and allowances hit", "", "| group | cases | reason |", "|---|---:|---|"]
        for gid, n in t.known.most_common():
            lines.append(f"| {gid} | {n} | {known_reasons.get(gid, '')} |")
        for gid, n in t.allowed.most_common():
            lines.append(f"| {gid} (allowed) | {n} | {known_reasons.get(gid, '')} |")
    if t.fallback_ops:
        lines += ["", "CPU fallbacks seen: " + ", ".join(f"{k} ({v})" for k, v in t.fallback_ops.most_common())]
    lines += ["", f"## New disagreements ({len(new_groups)} groups: op x class, not in known.py/allowances.py)", ""]
    for (op, cls), res in sorted(new_groups.items()):
        lines += [f"### {op}: {cls} (case {res['id']}, {res.get('count', 1)} cases)", "",
                  _describe(res), "", "```python", res.get("repro", "# no reproducer"), "```", ""]
    return "\n".join(lines) + "\n"


def _describe(res: dict) -> str:
    parts = []
    for side in ("cpu", "dev"):
        for k in ("exc", "bexc"):
            e = res.get(f"{side}_{k}")
            if e:
                parts.append(f"{'CPU' if side == 'cpu' else 'neuron'}{' (backward)' if k == 'bexc' else ''} raises "
                             f"{e[0]} at {e[2]}: {e[1][:200]}")
    det = res.get("detail") or {}
    if det.get("maxdiff"):
        parts.append("; ".join(f"{k}: {v}" for k, v in det["maxdiff"].items()))
    if det.get("reason"):
        parts.append(f"worker: {det['reason']} while running the {det.get('side', '?')} side"
                     + (f" (only after {det['only_after']})" if det.get("only_after") else ""))
    return "\n".join(f"- {p}" for p in parts) or "-"


def terminal_table(t: Tally) -> str:
    """The counts per class with the top ops, for the terminal."""
    rows = [f"{'class':28s} {'cases':>7s} {'new':>5s}  top ops"]
    for cls in CLASSES:
        n = t.by_class.get(cls, 0)
        if not n and cls in ("fuzzer-error", "invalid-case"):
            continue
        tops = ", ".join(f"{o} {c}" for o, c in top_ops(t, cls, 4)) if cls != "ok" else ""
        rows.append(f"{cls:28s} {n:7d} {t.new_by_class.get(cls, 0) if cls != 'ok' else '':>5}  {tops}")
    return "\n".join(rows)
