"""Deliberate extensions: inputs the neuron device accepts where the CPU
raises, on purpose. The fuzzer marks a result covered here ``allowed``; it
does not count as a disagreement (`make test` passes with it).

Add an entry only for a behaviour that is meant to stay, with the reason a
user would accept; a disagreement waiting for a fix goes to known.py.
"""
from __future__ import annotations

from fuzz_match import Group

ALLOWANCES: list[Group] = [
]
