"""Differential fuzzer: random cases over the neuron op table, each run on the
CPU and on neuron from identical inputs, classified (fuzz_compare.py).

  python tools/fuzz/fuzz.py --seconds 300 [--seed N] [--workers 2]   # `make fuzz SECONDS=300 SEED=N`
  python tools/fuzz/fuzz.py --to-test CASE_ID    # minimise a case, append it to tests/fuzz/test_fuzz_regressions.py
  python tools/fuzz/fuzz.py --repro CASE_ID      # print a case's self-contained reproducer
  python tools/fuzz/fuzz.py --explain CASE_ID    # run it here, print the differing elements

Writes build/fuzz/results.jsonl (one line per case; failing cases carry the
case and a reproducer), build/fuzz/summary.md (counts per class and per op,
the known groups hit, every new group with a minimised reproducer) and
build/fuzz/repros.md (reproducers of failing cases: every new one, the first
few of each known group). Results covered by tools/fuzz/known.py or
allowances.py are marked and not "new"; with --strict the exit status is 1
when anything new (or any crash or hang) was found.
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import sys
import time
from typing import Iterator

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from allowances import ALLOWANCES  # noqa: E402
from fuzz_match import annotate, is_new  # noqa: E402
from fuzz_ops import OPS, make_case  # noqa: E402
from fuzz_pool import Pool  # noqa: E402
from fuzz_regress import append_case  # noqa: E402
from fuzz_report import Tally, summary_md, terminal_table  # noqa: E402
from fuzz_shrink import minimise  # noqa: E402
from known import KNOWN  # noqa: E402

REASONS = {g.id: g.reason for g in KNOWN + ALLOWANCES}
KEEP_PER_KNOWN = 3


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=1200, help="time budget of the whole run (default 1200)")
    p.add_argument("--seed", type=int, default=None, help="case seed (default: random, printed)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--max-cases", type=int, default=None, help="stop after this many cases")
    p.add_argument("--batch", type=int, default=16, help="cases per worker batch")
    p.add_argument("--case-timeout", type=float, default=30.0, help="seconds before a case is a hang")
    p.add_argument("--ops", default="", help="comma-separated op or family names to fuzz (default: all)")
    p.add_argument("--out", default=os.path.join(ROOT, "build", "fuzz"), help="output directory")
    p.add_argument("--no-minimise", action="store_true", help="do not minimise failing cases")
    p.add_argument("--strict", action="store_true", help="exit 1 on any new disagreement, crash or hang")
    p.add_argument("--quiet", action="store_true", help="no reproducers on the terminal")
    p.add_argument("--to-test", metavar="CASE_ID", help="minimise CASE_ID and append it to the regression tests")
    p.add_argument("--repro", metavar="CASE_ID", help="print the reproducer of CASE_ID")
    p.add_argument("--explain", metavar="CASE_ID", nargs="+", help="run cases here and print what differs")
    p.add_argument("--list-ops", action="store_true", help="list the op table and exit")
    return p.parse_args(argv)


def select_ops(spec: str) -> list:
    if not spec:
        return OPS
    want = {s.strip() for s in spec.split(",") if s.strip()}
    ops = [o for o in OPS if o.name in want or o.family in want]
    if not ops:
        raise SystemExit(f"no op or family named {sorted(want)}; see --list-ops")
    return ops


class Run:
    """One fuzz run: feeds the pool, records results, minimises, reports."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.seed = args.seed if args.seed is not None else random.randrange(1, 1_000_000)
        self.ops = select_ops(args.ops)
        os.makedirs(args.out, exist_ok=True)
        self.out = args.out
        self.results_path = os.path.join(self.out, "results.jsonl")
        self.fh = open(self.results_path, "w")
        self.pool = Pool(args.workers, args.case_timeout, os.path.join(self.out, "logs"))
        self.tally = Tally()
        self.cases: dict[str, dict] = {}
        self.groups: dict[tuple[str, str], dict] = {}       # new (op, class) -> first result
        self.group_cases: dict[tuple[str, str], dict] = {}
        self.known_kept: dict[str, list] = {}
        self.crashes: list[tuple[dict, dict]] = []
        self.t_end: float | None = None   # end of the whole run (minimising stops there)

    def case_iter(self) -> Iterator[dict]:
        for i in itertools.count():
            if self.args.max_cases is not None and i >= self.args.max_cases:
                return
            c = make_case(self.seed, i, self.ops)
            self.cases[c["id"]] = c
            yield c

    def on_result(self, res: dict) -> None:
        case = self.cases.pop(res["id"], None)
        if case is None:
            return
        annotate(case, res, ALLOWANCES, KNOWN)
        self.tally.add(res)
        if res["cls"] == "ok":
            rec = {"id": res["id"], "op": res["op"], "cls": "ok"}
            det = res.get("detail") or {}
            if det.get("f64_rescued") or det.get("f64_rescued_grads"):
                rec["f64_rescued"] = True
            self.fh.write(json.dumps(rec) + "\n")
            return
        res["case"] = case
        self.fh.write(json.dumps(res, default=str) + "\n")
        key = (res["op"], res["cls"])
        if res["cls"] in ("crash", "hang"):
            self.crashes.append((case, res))
        if is_new(res):
            if key not in self.groups:
                self.groups[key] = res
                self.group_cases[key] = case
            self.groups[key]["count"] = self.groups[key].get("count", 0) + 1
        elif res.get("known") or res.get("allowed"):
            kept = self.known_kept.setdefault(res.get("known") or res.get("allowed"), [])
            if len(kept) < KEEP_PER_KNOWN:
                kept.append(res)

    def run_list(self, cases: list[dict]) -> list[dict]:
        """Runs cases to completion (the minimiser's runner)."""
        out: list[dict] = []
        self.pool.run(iter(cases), out.append, deadline=self.t_end,
                      batch_size=max(1, (len(cases) + self.args.workers - 1) // self.args.workers))
        return out

    def main(self) -> int:
        a = self.args
        t0 = time.monotonic()
        self.t_end = t0 + a.seconds
        reserve = 0.0 if a.no_minimise else min(0.2 * a.seconds, 120.0)
        print(f"fuzz: seed {self.seed}, {a.seconds:.0f} s ({a.seconds - reserve:.0f} s of cases), "
              f"{a.workers} workers, {len(self.ops)} op entries -> {self.out}", flush=True)
        self.pool.run(self.case_iter(), self.on_result, deadline=t0 + a.seconds - reserve, batch_size=a.batch)
        fuzz_secs = time.monotonic() - t0
        n = self.tally.total
        print(f"fuzz: {n} cases in {fuzz_secs:.0f} s ({n / max(fuzz_secs, 1e-9):.1f} cases/s)", flush=True)
        minimised = self.minimise_groups(t0 + a.seconds) if not a.no_minimise else {}
        self.add_crash_repros()
        self.pool.close()
        self.fh.close()
        self.report(fuzz_secs, minimised)
        new = sum(self.tally.new_by_class.values())
        return 1 if a.strict and new else 0

    def minimise_groups(self, t_end: float) -> dict:
        keys = sorted(self.groups, key=lambda k: (k[1] not in ("crash", "hang"), k))
        done: dict = {}
        for i, key in enumerate(keys):
            left = t_end - time.monotonic()
            if left < 2:
                break
            budget = min(60.0, left / (len(keys) - i))
            case, res = minimise(self.group_cases[key], self.groups[key], self.run_list, budget)
            if res.get("cls") in ("crash", "hang") and "repro" not in res:
                res["repro"] = self.repro_of(case)
            res["case"], res["minimised_from"] = case, self.groups[key]["id"]
            self.fh.write(json.dumps(res, default=str) + "\n")
            done[key] = res
        return done

    def repro_of(self, case: dict) -> str:
        self.t_end = None
        out = self.run_list([dict(case, _repro_only=True)])
        return out[0].get("repro", "# no reproducer") if out else "# no reproducer"

    def add_crash_repros(self) -> None:
        for case, res in self.crashes[:10]:
            if "repro" not in res:
                res["repro"] = self.repro_of(case)
                self.fh.write(json.dumps({**res, "case": case}, default=str) + "\n")

    def report(self, fuzz_secs: float, minimised: dict) -> None:
        groups = {}
        for key, res in self.groups.items():
            m = minimised.get(key)
            groups[key] = dict(m, count=res.get("count", 1)) if m else res
        native = self.native_coverage()
        header = {"seed": self.seed, "cases": self.tally.total, "fuzzing time": f"{fuzz_secs:.0f} s",
                  "cases per second": f"{self.tally.total / max(fuzz_secs, 1e-9):.1f}",
                  "workers": self.args.workers, "op entries": len(self.ops),
                  "native overloads exercised": native, "results": os.path.relpath(self.results_path, ROOT)}
        md = summary_md(self.tally, header, groups, REASONS)
        with open(os.path.join(self.out, "summary.md"), "w") as f:
            f.write(md)
        with open(os.path.join(self.out, "repros.md"), "w") as f:
            f.write("# Reproducers\n\n")
            for (op, cls), res in sorted(groups.items()):
                f.write(f"## new: {op} {cls} ({res['id']})\n\n```python\n{res.get('repro', '')}\n```\n\n")
            for gid, lst in sorted(self.known_kept.items()):
                for res in lst:
                    f.write(f"## {gid}: {res['op']} {res['cls']} ({res['id']})\n\n```python\n"
                            f"{res.get('repro', '')}\n```\n\n")
        print(terminal_table(self.tally))
        print(f"seed {self.seed}; {len(groups)} new groups; summary: {os.path.join(self.out, 'summary.md')}")
        if not self.args.quiet:
            for (op, cls), res in sorted(groups.items()):
                print(f"\n==== new: {op} {cls} (case {res['id']}, {res.get('count', 1)} cases; "
                      f"add as a test: python tools/fuzz/fuzz.py --to-test {res['id']})")
                print(res.get("repro", "# no reproducer"))

    def native_coverage(self) -> str:
        """How many of torch_neuronx.native_ops() the device runs executed."""
        native = self.pool.native
        hit = native & self.pool.executed
        return f"{len(hit)} of {len(native)}" if native else f"{len(self.pool.executed)} ATen ops executed"


# ---- single cases --------------------------------------------------------------------------------

def find_case(case_id: str, out: str) -> tuple[dict, dict | None]:
    """The case (and its recorded result) from results.jsonl, else regenerated from `seed-index`."""
    path = os.path.join(out, "results.jsonl")
    found: tuple[dict, dict] | None = None
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if case_id not in line:
                    continue
                rec = json.loads(line)
                if rec.get("id") == case_id and "case" in rec:
                    found = (rec["case"], rec)
    if found:
        return found
    seed, _, idx = case_id.partition("-")
    try:
        return make_case(int(seed), int(idx.split(".")[0])), None
    except ValueError:
        raise SystemExit(f"case {case_id} not in {path} and not of the form SEED-INDEX")


def to_test(args: argparse.Namespace) -> int:
    case, rec = find_case(args.to_test, args.out)
    pool = Pool(1 if rec and rec.get("cls") in ("crash", "hang") else args.workers, args.case_timeout,
                os.path.join(args.out, "logs"))
    out: list[dict] = []

    def run_list(cases: list[dict]) -> list[dict]:
        got: list[dict] = []
        pool.run(iter(cases), got.append, batch_size=max(1, len(cases) // args.workers))
        return got
    try:
        out = run_list([case])
        res = out[0]
        annotate(case, res, ALLOWANCES, KNOWN)
        if res["cls"] == "ok":
            print(f"{case['id']} agrees now (ok); adding it as it is")
        elif not case["id"].endswith(".min"):
            print(f"{case['id']}: {res['cls']}; minimising ...", flush=True)
            case, res = minimise(case, res, run_list, budget_s=120)
    finally:
        pool.close()
    note = f"known: {res['known']}" if res.get("known") else ""
    tid = append_case(case, res["cls"], note)
    print(f"appended {tid} ({res['cls']}) to tests/fuzz/test_fuzz_regressions.py; run it with\n"
          f"  python -m pytest -q tests/fuzz/test_fuzz_regressions.py -k '{tid}'")
    return 0


def print_repro(args: argparse.Namespace) -> int:
    case, rec = find_case(args.repro, args.out)
    if rec and rec.get("repro"):
        print(rec["repro"])
        return 0
    pool = Pool(1, args.case_timeout, os.path.join(args.out, "logs"))
    got: list[dict] = []
    try:
        pool.run(iter([dict(case, _repro_only=True)]), got.append)
    finally:
        pool.close()
    print(got[0].get("repro") if got else "# no reproducer")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.list_ops:
        for o in OPS:
            print(f"{o.family:10s} {o.name}")
        return 0
    if args.to_test:
        return to_test(args)
    if args.repro:
        return print_repro(args)
    if args.explain:
        import warnings

        import torch_neuronx  # noqa: F401
        from fuzz_explain import explain
        warnings.simplefilter("ignore")
        for cid in args.explain:
            print(explain(find_case(cid, args.out)[0]))
        return 0
    return Run(args).main()


if __name__ == "__main__":
    sys.exit(main())
