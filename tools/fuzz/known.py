"""Known disagreements between neuron and the CPU, one group per root cause.

The fuzzer marks a result covered here ``known``: it is reported, but does
not fail the seeded smoke run in `make test` (tests/fuzz/test_fuzz_smoke.py).
When a root is fixed, delete its group: the smoke run then guards the fix.
Each group says which ops and classes it covers, a matcher over the case and
its result (fuzz_match.py), and why (what the CPU does, what neuron does).
"""
from __future__ import annotations

from fuzz_match import Group

KNOWN: list[Group] = [
]
