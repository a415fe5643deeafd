"""One FX graph (an AOTAutograd forward, backward or inference graph)
compiled through capture, per static input signature.

The first call with a new signature runs the graph's nodes eagerly on the
device while the current stream captures (nrt/capture.h): every launch is
recorded with its operands resolved to (buffer, offset), so the eager
results are this call's outputs and the recording is the compiler's input.
The compiled program (nrt/program.h) then serves every later call as one
stream task. Outputs are rebuilt from metadata saved at capture: a storage
the graph allocated becomes an output slot, a view or an output aliasing an
input is re-created on the run's tensors.

Ops the compiler cannot lower (no native kernel, or a read of device data
on the host) fail the compile with the op and the user's source line, or,
with fallback execution on, split the graph: the op runs eagerly between
compiled segments.
"""
from __future__ import annotations

import os
import re
import struct
import time
import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
import torch.utils._pytree as pytree
from torch.fx import GraphModule, Node

from .. import _C
from . import cache, metrics, plan
from .config import Options

_NEURON = "neuron"


class NeuronCompileError(RuntimeError):
    """A graph the neuron compiler cannot compile (names the op and the source line)."""


# ---- node descriptions ------------------------------------------------------------------

def op_name(node: Node) -> str:
    t = node.target
    if isinstance(t, torch._ops.OpOverload):
        return str(t)
    if isinstance(t, torch._ops.HigherOrderOperator):
        return t.name()
    return getattr(t, "__name__", str(t))


_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def source_location(node: Node) -> str:
    """'model.py:12 in forward' from the node's stack trace, or '' if none."""
    st = node.meta.get("stack_trace") or ""
    frames = _FRAME.findall(st)
    if not frames:
        return ""
    path, line, fn = frames[-1]
    return f"{os.path.basename(path)}:{line} in {fn}"


def describe(node: Node) -> str:
    loc = source_location(node)
    return f"{op_name(node)} at {loc}" if loc else f"{op_name(node)} (no source location)"


def _rng_hops():
    from torch._prims import rng_prims

    return rng_prims.run_and_save_rng_state, rng_prims.run_with_rng_state


def lowerable(node: Node) -> bool:
    """False for an op that would run through the CPU fallback (no native
    kernel and no composite of native ones): the capture cannot record it."""
    t = node.target
    if node.op != "call_function" or not isinstance(t, torch._ops.OpOverload):
        return True
    name = t.name()
    for key in ("PrivateUse1", "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional",
                "CompositeImplicitAutograd"):
        if torch._C._dispatch_has_kernel_for_dispatch_key(name, key):
            return True
    return False


def _mutated_roots(nodes: Sequence[Node], externals: set) -> set:
    """External nodes (graph inputs, earlier values) that nodes of `nodes` write."""
    inside = set(nodes)
    out = set()

    def root(n: Any) -> Optional[Node]:
        while isinstance(n, Node) and n in inside:
            t = n.target
            if isinstance(t, torch._ops.OpOverload) and t._schema.arguments and \
                    t._schema.arguments[0].alias_info is not None and n.args:
                n = n.args[0]  # a view or an in-place op: same storage as its first argument
            else:
                return None
        return n if isinstance(n, Node) and n in externals else None

    for n in nodes:
        t = n.target
        if not isinstance(t, torch._ops.OpOverload):
            continue
        for i, a in enumerate(t._schema.arguments):
            if a.alias_info is None or not a.alias_info.is_write:
                continue
            v = n.args[i] if i < len(n.args) else n.kwargs.get(a.name)
            for x in (v if isinstance(v, (list, tuple)) else [v]):
                r = root(x)
                if r is not None:
                    out.add(r)
    return out


# ---- RNG state carried from a forward to its backward (checkpoint recompute) -------------

def _state_tensor(seed: int, offset: int) -> torch.Tensor:
    return torch.frombuffer(bytearray(struct.pack("<QQ", seed, offset)), dtype=torch.uint8)


def _state_value(t: torch.Tensor) -> Tuple[int, int]:
    return struct.unpack("<QQ", bytes(t.cpu().contiguous().view(torch.uint8).numpy().tobytes()[:16]))


def _generator(device: int) -> torch.Generator:
    return _C._default_generator(device)


def _set_generator(gen: torch.Generator, seed: int, offset: int) -> None:
    gen.manual_seed(seed)
    gen.set_offset(offset)


# ---- signatures ---------------------------------------------------------------------------

def signature(args: Sequence[Any], state_inputs: frozenset = frozenset()) -> tuple:
    """What the static graph is specialised on: every tensor's device,
    dtype, sizes, strides, storage offset and storage size, which inputs
    share a storage, and every non-tensor input's value."""
    sig = []
    storages: Dict[int, int] = {}
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor):
            st = a.untyped_storage()
            ptr = st.data_ptr()
            share = storages.setdefault(ptr, i) if ptr else i
            entry = (str(a.device), a.dtype, tuple(a.shape), tuple(a.stride()), a.storage_offset(), st.nbytes(),
                     share)
            if a.device.type == "cpu" and a.numel() <= 16 and i not in state_inputs:
                entry += (tuple(a.flatten().tolist()),)  # a host scalar is baked into the launches
            sig.append(entry)
        elif isinstance(a, (int, float, bool, str, type(None), torch.SymInt)):
            sig.append(("v", int(a) if isinstance(a, torch.SymInt) else a))
        else:
            sig.append(("o", type(a).__name__))
    return tuple(sig)


def describe_change(old: tuple, new: tuple) -> str:
    for i, (a, b) in enumerate(zip(old, new)):
        if a != b:
            if a[0] != "v" and b[0] != "v" and len(a) > 3 and len(b) > 3:
                if a[2] != b[2]:
                    return f"input {i}: new shape {tuple(b[2])} (was {tuple(a[2])})"
                if a[1] != b[1]:
                    return f"input {i}: new dtype {b[1]} (was {a[1]})"
                return f"input {i}: new strides or storage layout"
            return f"input {i}: new value {b[-1]!r} (was {a[-1]!r})"
    return "new number of inputs" if len(old) != len(new) else "new input signature"


# ---- steps --------------------------------------------------------------------------------

class EagerStep:
    """A node the compiler cannot lower, run eagerly between compiled segments."""

    def __init__(self, node: Node, runner: "GraphRunner"):
        self.node = node
        self.runner = runner

    def run(self, env: dict) -> None:
        env[self.node] = self.runner.eval_node(self.node, env)
        metrics.count_eager_op(op_name(self.node))


class CompiledStep:
    """A captured, compiled segment of consecutive nodes: one program run."""

    def __init__(self, program, device: int, in_refs, out_specs, replay, name: str):
        self.program = program
        self.device = device
        self.in_refs = in_refs        # slot -> (external index, flat position)
        self.out_specs = out_specs    # (node, treespec, [leaf spec])
        self.replay = replay          # None or (external index, flat position) of the RNG state replayed
        self.slot_bytes = [b for (_, b, _) in program.slots()]
        self.out_slots = [i for i, (k, _, _) in enumerate(program.slots()) if k == "output"]
        self.rng_advance = program.rng_advance
        self.uses_rng = program.uses_rng
        self.name = name
        self.externals: List[Node] = []
        self.key = ""                 # the program's cache key
        self.node_count = 0           # nodes of its captured graph

    def run(self, env: dict) -> None:
        ext = [pytree.tree_leaves(env[n]) for n in self.externals]
        slots = [0] * len(self.slot_bytes)
        in_storages = {}
        for slot, (j, k) in self.in_refs.items():
            st = ext[j][k].untyped_storage()
            in_storages[slot] = st
            slots[slot] = st.data_ptr()
        out_storages = {}
        dev = torch.device(_NEURON, self.device)
        for slot in self.out_slots:
            t = torch.empty(max(self.slot_bytes[slot], 1), dtype=torch.uint8, device=dev)
            out_storages[slot] = t.untyped_storage()
            slots[slot] = t.data_ptr()
        seed = base = 0
        if self.replay is not None:
            j, k = self.replay
            seed, base = _state_value(ext[j][k])
        elif self.uses_rng:
            gen = _generator(self.device)
            seed, base = gen.initial_seed(), gen.get_offset()
            gen.set_offset(base + self.rng_advance)
        self.program.run(self.device, slots, seed, base)
        for node, spec, leaves in self.out_specs:
            vals = []
            for leaf in leaves:
                kind = leaf[0]
                if kind in ("slot", "alias"):
                    _, slot, dtype, size, stride, offset = leaf
                    st = out_storages[slot] if kind == "slot" else in_storages[slot]
                    vals.append(torch.empty(0, dtype=dtype, device=dev).set_(st, offset, size, stride))
                elif kind == "rng":
                    vals.append(_state_tensor(seed, base + leaf[1]))
                elif kind == "empty":
                    vals.append(torch.empty_strided(leaf[2], leaf[3], dtype=leaf[1], device=dev))
                else:
                    vals.append(leaf[1])
            env[node] = pytree.tree_unflatten(vals, spec)


class Variant:
    def __init__(self, steps, free_after):
        self.steps = steps
        self.free_after = free_after  # step index -> nodes dead after it


# ---- the runner ---------------------------------------------------------------------------

class GraphRunner:
    """The callable AOTAutograd gets back for one graph (boxed: one list of args)."""

    def __init__(self, gm: GraphModule, kind: str, name: str, options: Options):
        # An instance attribute, not a class one: Dynamo wraps the backward
        # runner in torch._dynamo.disable, whose functools.wraps copies the
        # instance's __dict__ only, and AOTAutograd then looks for the flag
        # on the wrapper (without it, it warns on every backward call).
        self._boxed_call = True
        self.gm = gm
        self.kind = kind
        self.name = name
        self.options = options
        self.nodes = [n for n in gm.graph.nodes if n.op not in ("placeholder", "output")]
        self.placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        self.output_node = next(n for n in gm.graph.nodes if n.op == "output")
        self.variants: Dict[tuple, Variant] = {}
        self.last_signature: Optional[tuple] = None
        self.position = {n: i for i, n in enumerate(self.nodes)}
        self.save_hop, self.with_hop = _rng_hops()
        self._states: set = set()  # ids of the RNG states a capture's save_hop nodes produced
        # inputs that are RNG states replayed by run_with_rng_state: values change per run
        self.state_inputs = frozenset(i for i, p in enumerate(self.placeholders)
                                      if any(u.target is self.with_hop and u.args and u.args[0] is p for u in p.users))
        self.layout_fixups: set = set()
        self._canonical: Optional[str] = None  # plan.canonical_text of gm, at the first cached call
        if not options.fallback_execution:
            for n in self.nodes:
                if not lowerable(n):
                    raise NeuronCompileError(self._unsupported_message(n, "it has no native kernel"))

    def _unsupported_message(self, node: Node, why: str) -> str:
        return (f"torch.compile(backend='neuron'): the graph compiler cannot lower {describe(node)}: {why}. "
                f"Rewrite that line, or set TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=0 (or "
                f"options={{'fallback_execution': True}}) to run that op eagerly outside the graph.")

    # -- evaluation ------------------------------------------------------------------------
    def _fetch(self, node: Node) -> Any:
        obj = self.gm
        for part in node.target.split("."):
            obj = getattr(obj, part)
        return obj

    def eval_node(self, node: Node, env: dict, gen: Optional[torch.Generator] = None) -> Any:
        if node.op == "get_attr":
            return self._fetch(node)
        args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: env[n])
        t = node.target
        if node.op == "call_method":
            return getattr(args[0], t)(*args[1:], **kwargs)
        if node.op == "call_module":
            return self._fetch(node)(*args, **kwargs)
        if t is self.save_hop:
            op, *rest = args
            g = gen if gen is not None else _generator(_device_of(rest, kwargs))
            state = _state_tensor(g.initial_seed(), g.get_offset())
            self._states.add(id(state))
            return state, op(*rest, **kwargs)
        if t is self.with_hop:
            state, op, *rest = args
            g = gen if gen is not None else _generator(_device_of(rest, kwargs))
            saved = (g.initial_seed(), g.get_offset())
            _set_generator(g, *_state_value(state))
            try:
                return op(*rest, **kwargs)
            finally:
                _set_generator(g, *saved)
        return self._meta_layout(node, t(*args, **kwargs))

    def _meta_layout(self, node: Node, out: Any) -> Any:
        """A compiled graph bakes in the layouts its meta values give: an eager
        kernel that returned another layout (a known mismatch) is copied into
        the meta layout, so later views of it are valid and outputs match."""
        if not isinstance(node.target, torch._ops.OpOverload) or any(
                r.alias_info is not None for r in node.target._schema.returns):
            return out
        val = node.meta.get("val")

        def fix(o: Any, v: Any) -> Any:
            if not (isinstance(o, torch.Tensor) and isinstance(v, torch.Tensor)) or o.device.type != _NEURON:
                return o
            try:
                stride = tuple(int(s) for s in v.stride())
                shape = tuple(int(s) for s in v.shape)
            except Exception:
                return o
            if tuple(o.shape) != shape or o.numel() <= 1 or all(
                    a == b for a, b, n in zip(o.stride(), stride, shape) if n > 1):
                return o
            if op_name(node) not in self.layout_fixups:
                self.layout_fixups.add(op_name(node))
                metrics.append("layout_fixups", op_name(node))
            return torch.empty_strided(shape, stride, dtype=o.dtype, device=o.device).copy_(o)

        if isinstance(out, (tuple, list)) and isinstance(val, (tuple, list)) and len(out) == len(val):
            return type(out)(fix(o, v) for o, v in zip(out, val))
        return fix(out, val)

    # -- calls -----------------------------------------------------------------------------
    def __call__(self, *call_args: Any) -> Any:
        # AOTAutograd calls boxed (one list); Dynamo calls an inference graph
        # AOTAutograd returned unwrapped with the arguments themselves.
        args = call_args[0] if len(call_args) == 1 and type(call_args[0]) is list else list(call_args)
        sig = signature(args, self.state_inputs)
        v = self.variants.get(sig)
        if v is None:
            return self._first_call(list(args), sig)
        return self._run(v, args)

    def _run(self, v: Variant, args: Sequence[Any]) -> Any:
        env = dict(zip(self.placeholders, args))
        for i, step in enumerate(v.steps):
            step.run(env)
            for n in v.free_after.get(i, ()):
                env.pop(n, None)
        return torch.fx.node.map_arg(self.output_node.args[0], lambda n: env[n])

    def _first_call(self, args: List[Any], sig: tuple) -> Any:
        if self.last_signature is not None:
            metrics.append("recompiles", {"graph": self.name, "cause": describe_change(self.last_signature, sig)})
        self.last_signature = sig
        key = self._plan_key(sig)
        if key is not None and not self.options.debug_dir:  # a debug dump needs the capture's graph text
            variant = self._from_plan(key)
            if variant is not None:
                self.variants[sig] = variant
                return self._run(variant, args)
        eager = set()
        if self.options.fallback_execution:
            for n in self.nodes:
                if not lowerable(n):
                    eager.add(n)
                    warnings.warn(f"torch_neuronx: {describe(n)} has no native kernel: it runs eagerly "
                                  f"outside the compiled graph {self.name}", RuntimeWarning, stacklevel=2)
        while True:
            try:
                outputs, variant = self._capture(args, eager)
                break
            except _CaptureFailure as f:
                if not self.options.fallback_execution or f.node is None or f.node in eager:
                    raise NeuronCompileError(self._unsupported_message(f.node, f.why) if f.node is not None
                                             else f"torch.compile(backend='neuron'): {f.why}") from None
                warnings.warn(f"torch_neuronx: {describe(f.node)} cannot be captured ({f.why}): it runs eagerly "
                              f"outside the compiled graph {self.name}", RuntimeWarning, stacklevel=2)
                eager.add(f.node)
        self.variants[sig] = variant
        if key is not None:
            try:
                body = plan.encode(variant.steps, self.position)
            except plan.Unkeyable:
                body = None
            if body is not None:
                cache.put_plan(key, body, self.options.cache_dir)
        return outputs

    # -- capture plans (plan.py) -------------------------------------------------------------
    def _plan_key(self, sig: tuple) -> Optional[str]:
        if not self.options.cache:
            return None
        if self._canonical is None:
            try:
                self._canonical = plan.canonical_text(self.gm)
            except plan.Unkeyable:
                self._canonical = ""
        if not self._canonical:
            return None
        return plan.plan_key(self._canonical, sig, self.options.flags, self.options.fallback_execution)

    def _from_plan(self, key: str) -> Optional[Variant]:
        """The variant a cached plan and its cached programs describe, or
        None (no plan, a program missing, or a plan that does not fit)."""
        t0 = time.perf_counter()
        body, source = cache.get_plan(key, self.options.cache_dir)
        if body is None:
            return None
        try:
            decoded = [plan.decode_step(d, self.nodes) for d in body["steps"]]
            eager = {d["eager"] for d in decoded if "eager" in d}
            segments, _, free_after = self._layout(eager)
            if len(segments) != len(decoded):
                raise ValueError("its segments do not match the graph")
            steps: List[Any] = []
            rows = []
            for (capturable, nodes), d in zip(segments, decoded):
                if not capturable:
                    if d.get("eager") is not nodes[0]:
                        raise ValueError("its eager nodes do not match the graph")
                    steps.append(EagerStep(nodes[0], self))
                    continue
                if "eager" in d:
                    raise ValueError("its eager nodes do not match the graph")
                prog, psource = cache.lookup(d["key"], self.options.cache_dir)
                if prog is None:
                    return None  # the program is gone (or was damaged): capture and compile it again
                externals = _externals(nodes)
                step = CompiledStep(prog, d["device"], d["in_refs"], d["outs"], d["replay"], d["name"])
                _check_fits(step, externals, set(nodes))
                step.externals, step.key, step.node_count = externals, d["key"], d["nodes"]
                steps.append(step)
                rows.append((step, psource))
        except (ValueError, KeyError, IndexError, TypeError) as e:
            cache.bad_plan(key, self.options.cache_dir, f"the capture plan does not fit: {e}")
            return None
        seconds = time.perf_counter() - t0
        metrics.record("cache.plan_hits", 1)
        metrics.record("compile_time_s", seconds)
        for step, psource in rows:
            metrics.append("graphs", {
                "name": step.name, "kind": self.kind, "nodes": step.node_count, "steps": step.program.step_count,
                "arena_bytes": step.program.arena_bytes, "compile_time_s": seconds / max(len(rows), 1),
                "source": psource, "captured": False, "compiler_time_s": 0.0, "key": step.key})
        return Variant(steps, free_after)

    def _layout(self, eager: set):
        """Segments (runs of capturable nodes, and eager nodes alone), the
        segment of each node, and the nodes dead after each segment."""
        segments: List[Tuple[bool, List[Node]]] = []
        for n in self.nodes:
            if n in eager:
                segments.append((False, [n]))
            elif segments and segments[-1][0]:
                segments[-1][1].append(n)
            else:
                segments.append((True, [n]))
        seg_of = {}
        for si, (_, nodes) in enumerate(segments):
            for n in nodes:
                seg_of[n] = si
        last_seg: Dict[Node, int] = {}
        for n in list(self.placeholders) + self.nodes:
            uses = [seg_of[u] if u in seg_of else len(segments) for u in n.users]
            last_seg[n] = max(uses) if uses else seg_of.get(n, -1)
        free_after: Dict[int, List[Node]] = {}
        for n, s in last_seg.items():
            if s < len(segments):
                free_after.setdefault(max(s, seg_of.get(n, -1)), []).append(n)
        return segments, seg_of, free_after

    def _capture(self, args: List[Any], eager: set):
        env = dict(zip(self.placeholders, args))
        segments, seg_of, free_after = self._layout(eager)
        steps = []
        for si, (capturable, nodes) in enumerate(segments):
            if capturable:
                steps.append(self._capture_segment(si, nodes, env, seg_of))
            else:
                steps.append(EagerStep(nodes[0], self))
                steps[-1].run(env)
            for n in free_after.get(si, ()):
                env.pop(n, None)
        outputs = torch.fx.node.map_arg(self.output_node.args[0], lambda n: env[n])
        return outputs, Variant(steps, free_after)

    def _capture_segment(self, si: int, nodes: List[Node], env: dict, seg_of: dict) -> CompiledStep:
        t0 = time.perf_counter()
        inside = set(nodes)
        externals = _externals(nodes)
        ext_index = {n: i for i, n in enumerate(externals)}
        ext_leaves = [pytree.tree_leaves(env[n]) for n in externals]
        outputs = [n for n in nodes if any(u not in inside for u in n.users)]
        mutated = _mutated_roots(nodes, set(externals))

        device = None
        for leaves in ext_leaves:
            for x in leaves:
                if isinstance(x, torch.Tensor) and x.device.type == _NEURON:
                    device = x.device.index or 0
                    break
            if device is not None:
                break
        if device is None:
            device = _C._get_device()

        # inputs: one slot per distinct storage
        slot_of_ptr: Dict[int, int] = {}
        in_refs: Dict[int, Tuple[int, int]] = {}
        declared = []
        for j, leaves in enumerate(ext_leaves):
            for k, x in enumerate(leaves):
                if not (isinstance(x, torch.Tensor) and x.device.type == _NEURON):
                    continue
                st = x.untyped_storage()
                ptr, nbytes = st.data_ptr(), st.nbytes()
                if ptr == 0 or nbytes == 0:
                    continue
                if ptr in slot_of_ptr:
                    if externals[j] in mutated:
                        declared[slot_of_ptr[ptr]][3] = True
                    continue
                slot = len(declared)
                slot_of_ptr[ptr] = slot
                in_refs[slot] = (j, k)
                declared.append([slot, ptr, nbytes, externals[j] in mutated])

        gen = _generator(device)
        seed0, off0 = gen.initial_seed(), gen.get_offset()
        replay = None
        cap = _C._capture_begin(device)
        current = None
        try:
            for slot, ptr, nbytes, mut in declared:
                cap.declare_input(slot, ptr, nbytes, mut)
            last_inside = {}
            for i, n in enumerate(nodes):
                for a in n.all_input_nodes:
                    if a in inside:
                        last_inside[a] = i
            for i, n in enumerate(nodes):
                current = n
                loc = source_location(n)
                cap.set_location(f"{loc}: {op_name(n)}" if loc else op_name(n))
                if n.target is self.with_hop and replay is None:
                    state_node = n.args[0]
                    if state_node in ext_index:
                        j = ext_index[state_node]
                        replay = ((j, 0), _state_value(ext_leaves[j][0]))
                env[n] = self.eval_node(n, env, gen)
                for a in n.all_input_nodes:
                    if a in inside and last_inside.get(a) == i and a not in outputs:
                        env.pop(a, None)  # dead: its storage goes back to the allocator, as at run time
                if n not in outputs and not n.users:
                    env.pop(n, None)
            current = None
            off1 = gen.get_offset()
            out_specs = []
            out_slot_of_ptr: Dict[int, int] = {}
            next_slot = len(declared)
            for n in outputs:
                leaves, spec = pytree.tree_flatten(env[n])
                lspecs = []
                for x in leaves:
                    if isinstance(x, torch.Tensor) and x.device.type == _NEURON:
                        st = x.untyped_storage()
                        ptr, nbytes = st.data_ptr(), st.nbytes()
                        meta = (x.dtype, tuple(x.shape), tuple(x.stride()), x.storage_offset())
                        if ptr == 0 or nbytes == 0:
                            lspecs.append(("empty", x.dtype, tuple(x.shape), tuple(x.stride())))
                        elif ptr in slot_of_ptr:
                            lspecs.append(("alias", slot_of_ptr[ptr]) + meta)
                        else:
                            if ptr not in out_slot_of_ptr:
                                out_slot_of_ptr[ptr] = next_slot
                                cap.declare_output(next_slot, ptr, nbytes)
                                next_slot += 1
                            lspecs.append(("slot", out_slot_of_ptr[ptr]) + meta)
                    elif isinstance(x, torch.Tensor) and id(x) in self._states:
                        s, o = _state_value(x)
                        base = replay[1][1] if replay else off0
                        lspecs.append(("rng", o - base))
                    else:
                        lspecs.append(("const", x))
                out_specs.append((n, spec, lspecs))
            if replay is not None:
                if off1 != off0:
                    raise _CaptureFailure(None, "a graph that replays a saved RNG state and also draws new "
                                                "random numbers is not supported")
                seed_c, base_c, advance = replay[1][0], replay[1][1], 0
            else:
                seed_c, base_c, advance = seed0, off0, off1 - off0
            graph = cap.end(seed_c, base_c, advance)
        except _CaptureFailure:
            cap.abort()
            raise
        except Exception as e:  # the op's own error or the capture's, naming the op and line
            cap.abort()
            if current is not None and isinstance(e, (RuntimeError, NotImplementedError)):
                raise _CaptureFailure(current, _short(e)) from e
            raise
        finally:
            self._states = set()

        name = f"{self.name}" if si == 0 else f"{self.name}_s{si}"
        text = graph.text()
        key = cache.graph_key(text, self.options.flags)
        opts = self.options
        prog, report, source = cache.get_or_compile(
            key, lambda: _C._compile(graph, opts.flags, name), enabled=opts.cache, cache_dir=opts.cache_dir)
        seconds = time.perf_counter() - t0
        if source == "compiled":
            metrics.record("graphs_compiled", 1)
        metrics.record("compile_time_s", seconds)
        metrics.append("graphs", {
            "name": name, "kind": self.kind, "nodes": graph.node_count(), "steps": prog.step_count,
            "arena_bytes": prog.arena_bytes, "compile_time_s": seconds, "source": source,
            "captured": True, "compiler_time_s": report["seconds"] if report else 0.0, "key": key})
        if opts.debug_dir:
            _dump(opts.debug_dir, name, key, self.gm, text, report, prog)
        step = CompiledStep(prog, device, in_refs, out_specs, replay[0] if replay else None, name)
        step.externals, step.key, step.node_count = externals, key, graph.node_count()
        return step


def _check_fits(step: CompiledStep, externals: List[Node], inside: set) -> None:
    """ValueError unless a planned step's slots and outputs fit its program and segment."""
    kinds = [k for (k, _, _) in step.program.slots()]
    for slot, (j, _) in step.in_refs.items():
        if not (0 <= slot < len(kinds) and kinds[slot] == "input" and 0 <= j < len(externals)):
            raise ValueError(f"input slot {slot} does not fit program {step.key[:12]}")
    if step.replay is not None and not 0 <= step.replay[0] < len(externals):
        raise ValueError("its RNG replay input does not fit")
    for node, _, leaves in step.out_specs:
        if node not in inside:
            raise ValueError(f"output {node} is not in its segment")
        for leaf in leaves:
            if leaf[0] == "slot" and not (0 <= leaf[1] < len(kinds) and kinds[leaf[1]] == "output"):
                raise ValueError(f"output slot {leaf[1]} does not fit program {step.key[:12]}")
            if leaf[0] == "alias" and leaf[1] not in step.in_refs:
                raise ValueError(f"alias of slot {leaf[1]}, which is not an input")


def _externals(nodes: Sequence[Node]) -> List[Node]:
    """The values a segment reads from outside itself, in first-use order."""
    inside = set(nodes)
    externals: List[Node] = []
    seen = set()
    for n in nodes:
        for a in n.all_input_nodes:
            if a not in inside and a not in seen:
                seen.add(a)
                externals.append(a)
    return externals


class _CaptureFailure(Exception):
    def __init__(self, node: Optional[Node], why: str):
        super().__init__(why)
        self.node = node
        self.why = why


def _short(e: BaseException) -> str:
    msg = str(e).strip().splitlines()
    return msg[0] if msg else type(e).__name__


def _device_of(args, kwargs) -> int:
    for x in pytree.tree_leaves((args, kwargs)):
        if isinstance(x, torch.Tensor) and x.device.type == _NEURON:
            return x.device.index or 0
    return _C._get_device()


def _dump(debug_dir: str, name: str, key: str, gm: GraphModule, text: str, report: Optional[dict], prog) -> None:
    d = os.path.join(debug_dir, f"{name}-{key[:12]}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "fx_graph.py"), "w") as f:
        f.write(gm.code)
    with open(os.path.join(d, "graph.nrtg"), "w") as f:
        f.write(text)
    with open(os.path.join(d, "compiler_report.txt"), "w") as f:
        f.write(report["text"] if report else "(loaded from the artifact cache: no compile)\n")
    with open(os.path.join(d, "program.txt"), "w") as f:
        f.write(prog.dump())
    prog.save(os.path.join(d, "program.neff"))
