"""``torch_neuronx.evaluate``: will this model run on the neuron device,
natively, with acceptable numerics, and what will it cost?

``evaluate(model, example_inputs, ...)`` trains the model on the CPU, on
neuron eagerly and on neuron compiled, from the same weights and data, and
returns an :class:`EvaluationReport` (``.summary()``, ``.to_json()``,
``.to_html(path)``). ``python -m torch_neuronx.evaluate TARGET`` does the
same from the command line (``--help``). The module itself is callable:
``torch_neuronx.evaluate(model, inputs)`` is ``torch_neuronx.evaluate.evaluate``.

Importing this package is cheap: matplotlib, tqdm and transformers load
only when a report is drawn, a run shows progress or ``--hf`` is used.
"""
from __future__ import annotations

import sys
import types
from typing import Any

from .core import evaluate
from .report import EvaluationReport

__all__ = ["evaluate", "EvaluationReport"]


class _CallableModule(types.ModuleType):
    """``torch_neuronx.evaluate(...)`` calls evaluate() while the name stays
    this package (its submodules, ``python -m torch_neuronx.evaluate``)."""

    def __call__(self, *args: Any, **kwargs: Any) -> EvaluationReport:
        return evaluate(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
