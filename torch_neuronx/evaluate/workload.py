"""The model, its inputs, loss and optimizer as evaluate() receives them,
and the training runs built from them: each run trains its own deep copy
of the same initial weights, so the CPU, neuron eager and neuron compiled
runs start identical and see identical data.
"""
from __future__ import annotations

import contextlib
import copy
from typing import Any, Callable, List, Optional, Sequence, Tuple

import torch
import torch.nn as nn
import torch.utils._pytree as pytree

# Compute dtypes: float32 is plain; the others are autocast's lower precision
# (weights and optimizer stay float32, as mixed-precision training does).
AUTOCAST = {"float32": None, "bfloat16": torch.bfloat16, "float16": torch.float16}
_ALIASES = {"fp32": "float32", "float": "float32", "bf16": "bfloat16", "fp16": "float16", "half": "float16"}


def dtype_name(d: Any) -> str:
    """'float32' / 'bfloat16' / 'float16' from a torch.dtype or a name."""
    if isinstance(d, torch.dtype):
        name = str(d).replace("torch.", "")
    else:
        name = str(d).strip().lower().replace("torch.", "")
    name = _ALIASES.get(name, name)
    if name not in AUTOCAST:
        raise ValueError(f"evaluate: dtype {d!r} is not supported; use float32, or bfloat16 / float16 "
                         f"(autocast mixed precision)")
    return name


def to_device(obj: Any, device: str) -> Any:
    return pytree.tree_map(lambda x: x.detach().to(device) if isinstance(x, torch.Tensor) else x, obj)


def call_model(model: Callable, inputs: Any) -> Any:
    if isinstance(inputs, dict):
        return model(**inputs)
    if isinstance(inputs, (tuple, list)):
        return model(*inputs)
    return model(inputs)


def describe_inputs(inputs: Any, prefix: str = "") -> List[str]:
    """'input_ids (4, 64) int64'-style lines for every tensor leaf."""
    out = []
    if isinstance(inputs, dict):
        items = list(inputs.items())
    elif isinstance(inputs, (tuple, list)):
        items = [(f"{prefix}[{i}]" if prefix else f"arg{i}", v) for i, v in enumerate(inputs)]
    else:
        items = [(prefix or "input", inputs)]
    for k, v in items:
        if isinstance(v, torch.Tensor):
            out.append(f"{k} {tuple(v.shape)} {str(v.dtype).replace('torch.', '')}")
        elif isinstance(v, (dict, tuple, list)):
            out.extend(describe_inputs(v, str(k)))
    return out


def grad_norm(model: nn.Module) -> torch.Tensor:
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    if not grads:
        return torch.zeros(())
    return torch.nn.utils.get_total_norm(grads, norm_type=2.0)


def _optimizer_factory(optimizer: Any, model: nn.Module) -> Tuple[Optional[Callable[[nn.Module], Any]], str]:
    if optimizer is False:
        return None, "none (forward and backward only)"
    if optimizer is None:
        # capturable: the step count lives on the device, so a compiled step
        # is one program (a CPU step count is a new constant every step).
        return (lambda m: torch.optim.AdamW(m.parameters(), lr=1e-3, capturable=_on_device(m))), \
            "AdamW(lr=0.001) (default)"
    if isinstance(optimizer, torch.optim.Optimizer):
        index = {id(p): i for i, p in enumerate(model.parameters())}
        for g in optimizer.param_groups:
            for p in g["params"]:
                if id(p) not in index:
                    raise ValueError("evaluate: the optimizer holds a tensor that is not a parameter of the model; "
                                     "pass an optimizer built on model.parameters(), or a factory "
                                     "`lambda params: torch.optim.AdamW(params, ...)`")
        state = optimizer.state_dict()
        cls = type(optimizer)

        def clone(m: nn.Module):
            params = list(m.parameters())
            groups = [dict({k: v for k, v in g.items() if k != "params"},
                           params=[params[index[id(p)]] for p in g["params"]]) for g in optimizer.param_groups]
            defaults = dict(optimizer.defaults)
            on_cpu = not _on_device(m)
            if on_cpu:
                _no_capturable([defaults] + groups)
            try:
                new = cls(groups, **defaults)
            except TypeError:
                new = cls(groups)
            new.load_state_dict(state)  # moves any state to the copy's device (and restores the groups' settings)
            if on_cpu:
                _no_capturable(new.param_groups)
            return new

        hp = optimizer.param_groups[0]
        lr = hp.get("lr")
        return clone, f"{cls.__name__}(lr={float(lr):g})" if lr is not None else cls.__name__
    if callable(optimizer):
        name = getattr(optimizer, "__name__", type(optimizer).__name__)
        return (lambda m: optimizer(m.parameters())), f"{name}(...)"
    raise TypeError(f"evaluate: optimizer must be a torch.optim.Optimizer, a callable params -> optimizer, "
                    f"None (AdamW) or False (no optimizer step); got {type(optimizer).__name__}")


def _no_capturable(groups: List[dict]) -> None:
    # capturable (step counts kept on the device) is for accelerators; the
    # CPU reference computes the same update without it.
    for g in groups:
        if g.get("capturable"):
            g["capturable"] = False


def _on_device(m: nn.Module) -> bool:
    return any(p.device.type == "neuron" for p in m.parameters())


class Workload:
    """What is evaluated, held on the CPU: a pristine copy of the model's
    initial weights, the example inputs and targets, the loss and the way to
    build an optimizer for a copy."""

    def __init__(self, model: nn.Module, example_inputs: Any, loss_fn: Optional[Callable] = None,
                 optimizer: Any = None, targets: Any = None) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"evaluate: model must be a torch.nn.Module, got {type(model).__name__}")
        if not any(isinstance(x, torch.Tensor) for x in pytree.tree_leaves(example_inputs)):
            raise TypeError("evaluate: example_inputs must hold at least one tensor (a tensor, a tuple of "
                            f"positional arguments or a dict of keyword arguments); got {type(example_inputs).__name__}")
        self.pristine = copy.deepcopy(model).to("cpu")
        self.inputs = to_device(example_inputs, "cpu")
        self.targets = to_device(targets, "cpu")
        self.loss_fn = loss_fn
        self.make_optimizer, self.optimizer_desc = _optimizer_factory(optimizer, model)
        self.loss_desc = getattr(loss_fn, "__name__", type(loss_fn).__name__) if loss_fn is not None else "?"

    @property
    def name(self) -> str:
        return type(self.pristine).__name__

    def copy_to(self, device: str) -> nn.Module:
        m = copy.deepcopy(self.pristine).to(device)
        for mod in m.modules():
            # The CPU and the device draw different random numbers: dropout
            # would make their outputs differ by design.
            if isinstance(mod, nn.modules.dropout._DropoutNd):
                mod.p = 0.0
        m.train()
        return m

    def compute_loss(self, output: Any, targets: Any) -> torch.Tensor:
        if self.loss_fn is not None:
            if targets is None:
                loss = self.loss_fn(output)
            elif isinstance(targets, (tuple, list)):
                loss = self.loss_fn(output, *targets)
            else:
                loss = self.loss_fn(output, targets)
        else:
            loss = output.get("loss") if isinstance(output, dict) else getattr(output, "loss", None)
            if loss is not None:
                self.loss_desc = "the model's own loss (output.loss)"
            elif isinstance(output, torch.Tensor) and output.numel() == 1:
                loss, self.loss_desc = output, "the model's output (a scalar)"
            else:
                leaves = [x for x in pytree.tree_leaves(output) if isinstance(x, torch.Tensor)
                          and x.is_floating_point()]
                if not leaves:
                    raise TypeError("evaluate: no loss_fn given and the model's output has no floating-point tensor "
                                    "to build a loss from; pass loss_fn")
                loss, self.loss_desc = leaves[0].float().pow(2).mean(), "mean square of the output (no loss_fn given)"
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            raise TypeError(f"evaluate: the loss must be a one-element tensor, got "
                            f"{type(loss).__name__}{tuple(loss.shape) if isinstance(loss, torch.Tensor) else ''}")
        return loss.reshape(())

    def state_bytes(self) -> dict:
        """Bytes of parameters and gradients of one training copy (the
        optimizer state is measured on a run)."""
        params = sum(p.numel() * p.element_size() for p in self.pristine.parameters())
        grads = sum(p.numel() * p.element_size() for p in self.pristine.parameters() if p.requires_grad)
        return {"parameters": params, "gradients": grads}

    def inputs_for_shape(self, shape: Any, generator: torch.Generator) -> Tuple[Any, Any]:
        """Example inputs (and targets) at another shape. A tuple of ints
        replaces every tensor of the first input's shape; other tensors whose
        first dim is the batch get the new batch size. Values are drawn
        like the originals (integers within their range). Anything else is
        taken as a full set of example inputs."""
        leaves = [x for x in pytree.tree_leaves(self.inputs) if isinstance(x, torch.Tensor)]
        primary = tuple(leaves[0].shape)
        if not (isinstance(shape, (tuple, list)) and all(isinstance(s, int) for s in shape)):
            return to_device(shape, "cpu"), self._resize(self.targets, primary, None, generator,
                                                          new_batch=_batch_of(shape))
        shape = tuple(int(s) for s in shape)
        if len(shape) != len(primary):
            raise ValueError(f"evaluate: shape {shape} has {len(shape)} dims; the first input has shape {primary}")
        return (self._resize(self.inputs, primary, shape, generator),
                self._resize(self.targets, primary, shape, generator))

    @staticmethod
    def _resize(obj: Any, primary: tuple, shape: Optional[tuple], gen: torch.Generator,
                new_batch: Optional[int] = None) -> Any:
        def one(x: Any) -> Any:
            if not isinstance(x, torch.Tensor):
                return x
            if shape is not None and tuple(x.shape) == primary:
                new = shape
            elif x.dim() >= 1 and primary and x.shape[0] == primary[0]:
                b = shape[0] if shape is not None else new_batch
                if b is None:
                    return x
                new = (b,) + tuple(x.shape[1:])
            else:
                return x
            return _like(x, new, gen)

        return pytree.tree_map(one, obj)


def _batch_of(inputs: Any) -> Optional[int]:
    for x in pytree.tree_leaves(inputs):
        if isinstance(x, torch.Tensor) and x.dim() >= 1:
            return int(x.shape[0])
    return None


def _like(x: torch.Tensor, shape: Sequence[int], gen: torch.Generator) -> torch.Tensor:
    if x.dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    if not x.is_floating_point() and not x.is_complex():
        lo = int(x.min()) if x.numel() else 0
        hi = int(x.max()) + 1 if x.numel() else 1
        return torch.randint(lo, max(hi, lo + 1), shape, generator=gen, dtype=x.dtype)
    return torch.randn(shape, generator=gen, dtype=x.dtype)


class TrainRun:
    """One training run on one device in one compute dtype: its own model
    copy and optimizer; eager, or with the loss function and the optimizer
    step compiled by ``torch.compile(backend="neuron")``."""

    def __init__(self, w: Workload, device: str, dtype: str, compiled: bool = False,
                 compile_options: Optional[dict] = None) -> None:
        self.w, self.device, self.dtype, self.compiled = w, device, dtype, compiled
        self.model = w.copy_to(device)
        self.opt = w.make_optimizer(self.model) if w.make_optimizer else None
        self.inputs = to_device(w.inputs, device)
        self.targets = to_device(w.targets, device)
        amp = AUTOCAST[dtype]
        model = self.model

        def forward_loss(inputs: Any, targets: Any) -> torch.Tensor:
            with torch.autocast(device_type=device, dtype=amp or torch.bfloat16, enabled=amp is not None):
                return w.compute_loss(call_model(model, inputs), targets)

        self.forward_loss: Callable = forward_loss
        self.opt_step: Optional[Callable] = self.opt.step if self.opt else None
        if compiled:
            opts = dict(compile_options or {})
            self.forward_loss = torch.compile(forward_loss, backend="neuron", options=opts)
            if self.opt is not None:
                self.opt_step = torch.compile(self.opt.step, backend="neuron", options=opts)

    def step(self, inputs: Any = None, targets: Any = None, phases: Any = None,
             on_grads: Optional[Callable[[], None]] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        """One training step; returns (loss, gradient norm) as tensors on the
        run's device (reading them synchronises). ``phases`` is an
        ops.PhaseTracker (or None) whose phase() brackets each part;
        ``on_grads`` runs between the backward and the optimizer step."""
        inputs = self.inputs if inputs is None else inputs
        targets = self.targets if targets is None else targets
        ph = phases.phase if phases is not None else (lambda name: contextlib.nullcontext())
        with ph("forward"):
            loss = self.forward_loss(inputs, targets)
        with ph("backward"):
            loss.backward()
        gnorm = grad_norm(self.model)
        if on_grads is not None:
            on_grads()
        if self.opt is not None:
            with ph("optimizer"):
                self.opt_step()
            self.opt.zero_grad(set_to_none=True)
        return loss.detach(), gnorm.detach()

    def optimizer_state_bytes(self) -> int:
        if self.opt is None:
            return 0
        return sum(v.numel() * v.element_size() for st in self.opt.state.values() for v in st.values()
                   if isinstance(v, torch.Tensor))

    def synchronize(self) -> None:
        if self.device.startswith("neuron"):
            torch.neuron.synchronize()
