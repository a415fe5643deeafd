"""torch.compile(backend="neuron"): registration, training steps against eager
(MLP + SGD, CNN with BatchNorm, tiny GPT-2), graph breaks, unsupported ops
(error and the opt-in split), static shapes, RNG (dropout, checkpoint), the
artifact cache across processes, and the stride cross-check against the FX
graph's meta values.

Tolerances: compiled graphs run the same kernels as eager, but fused
pointwise chains round once per chain instead of once per op, so float32
results are compared with rtol 1e-5 / atol 1e-5 (1e-4 for the GPT-2 step's
parameters after Adam, which normalises small gradient differences)."""
import os
import re
import textwrap

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_neuronx
import torch_neuronx.compiler as ncomp
from torch_neuronx.compiler import config as nconfig
from helpers import run_python

DEV = "neuron"
TOL = dict(rtol=1e-5, atol=1e-5)


@pytest.fixture(autouse=True)
def _fresh(tmp_path):
    import torch._dynamo

    torch._dynamo.reset()
    ncomp.reset()
    s = nconfig.settings()
    saved = (s.cache_dir, s.cache_enabled, s.fallback_execution, s.cc_flags, s.debug_dir)
    s.cache_dir, s.cache_enabled, s.fallback_execution, s.cc_flags, s.debug_dir = (
        str(tmp_path / "neff"), True, False, "", None)
    yield
    s.cache_dir, s.cache_enabled, s.fallback_execution, s.cc_flags, s.debug_dir = saved
    torch._dynamo.reset()


def close(a, b, **kw):
    tol = dict(TOL)
    tol.update(kw)
    torch.testing.assert_close(a.detach().cpu(), b.detach().cpu(), **tol)


# ---- registration ----------------------------------------------------------------------

def test_registration_and_default_backend():
    import importlib.metadata

    assert "neuron" in torch._dynamo.list_backends()
    eps = importlib.metadata.entry_points(group="torch_dynamo_backends")
    assert "neuron" in eps.names
    assert callable(torch.neuron.get_dynamo_metrics)
    from torch._dynamo.device_interface import get_interface_for_device

    assert get_interface_for_device("neuron").device_count() == torch.neuron.device_count()
    torch.compiler.set_default_backend("neuron")
    try:
        f = torch.compile(lambda x: torch.sin(x) * 2 + 1)
        x = torch.randn(64, device=DEV)
        close(f(x), torch.sin(x) * 2 + 1)
    finally:
        torch.compiler.set_default_backend(None)
    m = torch.neuron.get_dynamo_metrics()
    assert m["graphs_compiled"] == 1 and m["graphs"][0]["kind"] == "inference"


def test_registered_after_plain_import_torch(tmp_path):
    r = run_python("""
        import torch
        f = torch.compile(lambda x: x.relu() + 1, backend="neuron")
        print(f(torch.full((4,), -1.0, device="neuron")).cpu().tolist())
        print(torch.neuron.get_dynamo_metrics()["graphs_compiled"])
    """, env={"TORCH_NEURONX_NEFF_CACHE_DIR": str(tmp_path / "neff")})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["[1.0,", "1.0,", "1.0,", "1.0]", "1"]


def test_inductor_on_neuron_tensors_is_a_clear_error():
    f = torch.compile(lambda x: x * 2)
    with pytest.raises(Exception, match=r'Inductor.*no code generator.*backend="neuron".*set_default_backend'):
        f(torch.ones(4, device=DEV))


def test_options():
    f = torch.compile(lambda x: x + 1, backend="neuron", options={"bogus": 1})
    with pytest.raises(Exception, match="unknown option.*'bogus'"):
        f(torch.ones(4, device=DEV))
    torch._dynamo.reset()
    f = torch.compile(lambda x: x + 1, backend="neuron", options={"flags": "-fno-such-thing"})
    with pytest.raises(Exception, match="fno-such-thing"):
        f(torch.ones(4, device=DEV))
    torch._dynamo.reset()
    f = torch.compile(lambda x: (x + 1).exp(), backend="neuron", options={"flags": "-O0", "cache": False})
    x = torch.randn(8, device=DEV)
    close(f(x), (x + 1).exp())
    close(f(x), (x + 1).exp())
    m = torch.neuron.get_dynamo_metrics()
    assert m["cache"]["misses"] == 0 and m["graphs_compiled"] == 1


# ---- training steps ----------------------------------------------------------------------

def _train(model, opt, x, y, loss_fn):
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    return loss.detach()


def test_mlp_forward_backward_sgd_matches_eager():
    torch.manual_seed(0)
    ref = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 10)).to(DEV)
    model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 10)).to(DEV)
    model.load_state_dict(ref.state_dict())
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    cmodel = torch.compile(model, backend="neuron")
    cstep = torch.compile(opt.step, backend="neuron")
    for i in range(3):
        x, y = torch.randn(16, 32, device=DEV), torch.randint(0, 10, (16,), device=DEV)
        l_ref = _train(ref, opt_ref, x, y, F.cross_entropy)
        opt.zero_grad()
        loss = F.cross_entropy(cmodel(x), y)
        loss.backward()
        for p, q in zip(model.parameters(), ref.parameters()):
            close(p.grad, q.grad)
        cstep()
        close(loss, l_ref)
        for p, q in zip(model.parameters(), ref.parameters()):
            close(p, q)
    m = torch.neuron.get_dynamo_metrics()
    kinds = {g["kind"] for g in m["graphs"]}
    assert {"forward", "backward"} <= kinds
    # opt.step is traced again once its momentum buffers exist (Dynamo guards); never for a shape
    assert not any("new shape" in r["cause"] for r in m["recompiles"]), m["recompiles"]


def test_cnn_batchnorm_running_stats_and_inference_graph():
    torch.manual_seed(0)

    def make():
        return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(8 * 4 * 4, 5))

    ref, model = make().to(DEV), make().to(DEV)
    model.load_state_dict(ref.state_dict())
    cmodel = torch.compile(model, backend="neuron")
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.05)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for _ in range(2):
        x, y = torch.randn(4, 3, 8, 8, device=DEV), torch.randint(0, 5, (4,), device=DEV)
        l_ref = _train(ref, opt_ref, x, y, F.cross_entropy)
        loss = _train(cmodel, opt, x, y, F.cross_entropy)
        close(loss, l_ref)
    bn, bn_ref = model[1], ref[1]
    close(bn.running_mean, bn_ref.running_mean)
    close(bn.running_var, bn_ref.running_var)
    assert int(bn.num_batches_tracked) == int(bn_ref.num_batches_tracked) == 2
    assert not torch.equal(bn.running_mean.cpu(), torch.zeros(8))
    model.eval(), ref.eval()
    with torch.no_grad():
        x = torch.randn(4, 3, 8, 8, device=DEV)
        close(cmodel(x), ref(x))
        close(cmodel(x), ref(x))
    assert "inference" in {g["kind"] for g in torch.neuron.get_dynamo_metrics()["graphs"]}


def test_tiny_gpt2_training_step_matches_eager():
    transformers = pytest.importorskip("transformers")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    cfg = transformers.GPT2Config(n_embd=32, n_layer=2, n_head=4, vocab_size=64, n_positions=32, bos_token_id=0,
                                  eos_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    torch.manual_seed(0)
    ref = transformers.GPT2LMHeadModel(cfg).to(DEV)
    model = transformers.GPT2LMHeadModel(cfg).to(DEV)
    model.load_state_dict(ref.state_dict())
    opt_ref = torch.optim.AdamW(ref.parameters(), lr=1e-3)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    cmodel = torch.compile(model, backend="neuron")
    ids = torch.randint(0, 64, (2, 16), device=DEV)
    for _ in range(2):
        opt_ref.zero_grad()
        l_ref = ref(ids, labels=ids).loss
        l_ref.backward()
        opt_ref.step()
        opt.zero_grad()
        loss = cmodel(ids, labels=ids).loss
        loss.backward()
        for (n, p), q in zip(model.named_parameters(), ref.parameters()):
            close(p.grad, q.grad, rtol=1e-4, atol=1e-5)
        opt.step()
        close(loss, l_ref, rtol=1e-5, atol=1e-5)
    for p, q in zip(model.parameters(), ref.parameters()):
        close(p, q, rtol=1e-4, atol=1e-4)


# ---- graph breaks, unsupported ops -----------------------------------------------------------

def test_graph_break_runs_the_rest_eagerly():
    def f(x):
        y = torch.tanh(x) * 3
        torch._dynamo.graph_break()
        s = y.sum().item()  # a host read: eager, outside any graph
        return y + s

    x = torch.randn(32, device=DEV)
    cf = torch.compile(f, backend="neuron")
    close(cf(x), f(x))
    close(cf(x), f(x))
    assert torch.neuron.get_dynamo_metrics()["graphs_compiled"] >= 2


_lib = torch.library.Library("neuron_compile_test", "DEF")
_lib.define("cpu_only(Tensor x) -> Tensor")
_lib.impl("cpu_only", lambda x: x * 2 + 1, "CPU")
_lib.impl("cpu_only", lambda x: torch.empty_like(x), "Meta")


def _uses_cpu_only(x):
    y = x.exp()
    z = torch.ops.neuron_compile_test.cpu_only(y)  # the unsupported line
    return z.sin()


def test_unsupported_op_fails_naming_op_and_line():
    f = torch.compile(_uses_cpu_only, backend="neuron")
    with pytest.raises(Exception) as e:
        f(torch.randn(8, device=DEV))
    msg = str(e.value)
    assert "neuron_compile_test.cpu_only" in msg
    assert re.search(r"test_compile\.py:\d+ in _uses_cpu_only", msg), msg
    assert "TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=0" in msg


def test_unsupported_op_opt_in_split_runs_it_eagerly():
    nconfig.settings().fallback_execution = True
    x = torch.randn(8, device=DEV)
    f = torch.compile(_uses_cpu_only, backend="neuron")
    with pytest.warns(RuntimeWarning, match="cpu_only.*runs eagerly"):
        out = f(x)
    expect = ((x.cpu().exp()) * 2 + 1).sin()
    close(out, expect, rtol=1e-5, atol=1e-5)
    close(f(x), expect, rtol=1e-5, atol=1e-5)
    assert "neuron_compile_test::cpu_only" in torch_neuronx.get_fallback_ops()
    m = torch.neuron.get_dynamo_metrics()
    assert m["eager_ops"].get("neuron_compile_test.cpu_only.default", 0) >= 1
    assert m["graphs_compiled"] == 2  # exp before, sin after


# ---- static shapes ----------------------------------------------------------------------------

def test_dynamic_true_is_an_error():
    f = torch.compile(lambda x: x * 2, backend="neuron", dynamic=True)
    with pytest.raises(Exception, match="static shapes.*dynamic=True.*pad.*bucket"):
        f(torch.ones(4, device=DEV))


def test_mark_dynamic_is_an_error():
    f = torch.compile(lambda x: x * 2, backend="neuron")
    x = torch.ones(4, 3, device=DEV)
    torch._dynamo.mark_dynamic(x, 0)
    with pytest.raises(Exception, match="static shapes.*mark_dynamic.*pad.*bucket"):
        f(x)


def test_new_shape_recompiles_a_static_graph_repeated_shape_reuses_it():
    def f(x):
        return torch.relu(x) * 2

    cf = torch.compile(f, backend="neuron")
    for n in (4, 4, 6, 6, 4, 9):
        x = torch.randn(n, 3, device=DEV)
        close(cf(x), f(x))
    m = torch.neuron.get_dynamo_metrics()
    assert m["graphs_compiled"] == 3, m["graphs"]
    for g in m["graphs"]:
        assert "SymInt" not in str(g)
    causes = [r["cause"] for r in m["recompiles"]]
    assert any("new shape (6, 3) (was (4, 3))" in c for c in causes), causes
    assert any("new shape (9, 3)" in c for c in causes), causes


def test_new_sequence_length_through_fused_attention_recompiles():
    # After a shape change Dynamo's fake tensors reach the fused-attention
    # choice with symbolic sizes; the choice must trace them (it once called
    # numel() and failed the compile) and the graph still compiles static.
    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True) * 2

    cf = torch.compile(f, backend="neuron")
    for seq in (16, 24, 24, 40):
        q, k, v = (torch.randn(2, 2, seq, 8) for _ in range(3))
        got = cf(q.to(DEV), k.to(DEV), v.to(DEV))
        close(got, f(q, k, v), rtol=1e-4, atol=1e-5)
    m = torch.neuron.get_dynamo_metrics()
    assert m["graphs_compiled"] == 3, m["recompiles"]
    assert sum("new shape" in r["cause"] for r in m["recompiles"]) == 2, m["recompiles"]


# ---- RNG -------------------------------------------------------------------------------------


def test_dropout_same_seed_same_result():
    def f(x):
        return F.dropout(x, p=0.5, training=True) + 1

    cf = torch.compile(f, backend="neuron")
    x = torch.ones(4096, device=DEV)
    torch.manual_seed(7)
    a = cf(x)  # captured: runs eagerly
    b = cf(x)  # the program
    torch.manual_seed(7)
    a2 = cf(x)
    b2 = cf(x)
    assert torch.equal(a.cpu(), a2.cpu()) and torch.equal(b.cpu(), b2.cpu())
    assert not torch.equal(a.cpu(), b.cpu())  # the generator moved on
    zeros = (b == 1).float().mean().item()
    assert 0.4 < zeros < 0.6
    torch.manual_seed(7)
    e = f(x)
    assert torch.equal(a.cpu(), e.cpu())  # same draws as eager from the same state


def test_checkpoint_with_dropout_under_compile():
    from torch.utils.checkpoint import checkpoint

    w = torch.randn(64, device=DEV, requires_grad=True)

    def block(x):
        return F.dropout(x * w, p=0.5, training=True)

    def f(x):
        return checkpoint(block, x, use_reentrant=False).sum()

    cf = torch.compile(f, backend="neuron")
    for _ in range(2):
        x = torch.randn(64, device=DEV, requires_grad=True)
        w.grad = None
        torch.manual_seed(3)
        y = checkpoint(block, x, use_reentrant=False)
        kept = (y != 0).float()
        torch.manual_seed(3)
        out = cf(x)
        out.backward()
        # the recomputed dropout in backward used the forward's mask
        close(x.grad, kept * w.detach() * 2)
        close(w.grad, kept * x.detach() * 2)


# ---- cache across processes ---------------------------------------------------------------------

_CACHE_SCRIPT = """
import hashlib, sys, warnings
import torch
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4)).to("neuron")
x = torch.randn(8, 16, device="neuron")
cm = torch.compile(m, backend="neuron")
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    out = cm(x)
    out.sum().backward()
    out2 = cm(x)
print("WARN", any("corrupted compile cache entry" in str(i.message) for i in w))
h = hashlib.sha256(out2.detach().cpu().numpy().tobytes() + m[0].weight.grad.cpu().numpy().tobytes()).hexdigest()
met = torch.neuron.get_dynamo_metrics()
print("HASH", h)
print("STATS", met["graphs_compiled"], met["cache"]["disk_hits"], met["cache"]["corrupt_entries"],
      met["cache"]["plan_hits"], sum(g["captured"] for g in met["graphs"]))
"""


def _run_cache(cache_dir, timeout=240):
    r = run_python(_CACHE_SCRIPT, env={"TORCH_NEURONX_NEFF_CACHE_DIR": str(cache_dir)}, timeout=timeout)
    assert r.returncode == 0, r.stderr[-3000:]
    out = dict(line.split(" ", 1) for line in r.stdout.strip().splitlines())
    return out["HASH"], [int(v) for v in out["STATS"].split()], out["WARN"] == "True"


def _entries(d, ext=".neff"):
    return sorted(os.path.join(r, f) for r, _, fs in os.walk(d) for f in fs if f.endswith(ext))


def _flip_byte(path, at):
    with open(path, "r+b") as f:
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ 0xFF]))


def test_cache_written_hit_from_new_process_and_corrupt_entry_rebuilt(tmp_path):
    d = tmp_path / "cache"
    h1, (compiled, hits, corrupt, plans, captured), _ = _run_cache(d)
    assert compiled >= 2 and hits == 0 and corrupt == 0 and plans == 0 and captured == compiled
    entries = _entries(d)
    assert len(entries) >= 2 and len(_entries(d, ".plan")) >= 2
    # a new process finds the capture plans: no eager run, no capture, no compile
    h2, (compiled, hits, corrupt, plans, captured), _ = _run_cache(d)
    assert h2 == h1 and compiled == 0 and hits >= 2 and plans >= 2 and captured == 0
    _flip_byte(entries[0], 60)  # a damaged program: its plan cannot be served, the graph is captured again
    h3, (compiled, hits, corrupt, plans, captured), warned = _run_cache(d)
    assert h3 == h1 and corrupt == 1 and compiled == 1 and warned and captured >= 1
    h4, (compiled, hits, corrupt, plans, captured), _ = _run_cache(d)
    assert h4 == h1 and compiled == 0 and corrupt == 0 and captured == 0


def test_corrupt_capture_plan_rebuilt(tmp_path):
    d = tmp_path / "cache"
    h1, _, _ = _run_cache(d)
    plans = _entries(d, ".plan")
    assert plans
    _flip_byte(plans[0], 40)
    h2, (compiled, hits, corrupt, nplans, captured), warned = _run_cache(d)
    # the damaged plan is reported and rebuilt by a capture; its programs still come from the cache
    assert h2 == h1 and warned and corrupt == 1 and compiled == 0 and captured >= 1
    h3, (compiled, hits, corrupt, nplans, captured), _ = _run_cache(d)
    assert h3 == h1 and corrupt == 0 and captured == 0 and nplans == len(plans)


_PLAN_RNG_SCRIPT = """
import hashlib
import torch, torch.nn.functional as F
q0 = torch.randn(2, 2, 16, 8, generator=torch.Generator().manual_seed(0))
def f(q):
    return F.scaled_dot_product_attention(q, q, q, dropout_p=0.5).sum(-1).pow(2).sum()
def run(fn):
    torch.manual_seed(123)
    h = hashlib.sha256()
    for _ in range(2):
        q = q0.to("neuron").requires_grad_()
        loss = fn(q)
        loss.backward()
        h.update(loss.detach().cpu().numpy().tobytes() + q.grad.cpu().numpy().tobytes())
    return h.hexdigest()
eager = run(f)
compiled = run(torch.compile(f, backend="neuron"))
met = torch.neuron.get_dynamo_metrics()
print("SAME", eager == compiled)
print("PLANS", met["cache"]["plan_hits"], sum(g["captured"] for g in met["graphs"]))
"""


def test_capture_plan_keeps_sdpa_dropout_rng(tmp_path):
    # SDPA with dropout returns its Philox seed and offset as host tensors, which the
    # plan keeps by value: a process served from the plan draws the eager masks
    env = {"TORCH_NEURONX_NEFF_CACHE_DIR": str(tmp_path / "cache")}
    runs = []
    for _ in range(2):
        r = run_python(_PLAN_RNG_SCRIPT, env=env, timeout=240)
        assert r.returncode == 0, r.stderr[-3000:]
        runs.append(dict(line.split(" ", 1) for line in r.stdout.strip().splitlines()))
    assert runs[0]["SAME"] == "True" and runs[1]["SAME"] == "True"
    plans, captured = (int(v) for v in runs[1]["PLANS"].split())
    assert plans >= 2 and captured == 0


def test_two_processes_compiling_at_once(tmp_path):
    import subprocess
    import sys

    from helpers import ROOT

    d = tmp_path / "cache"
    env = dict(os.environ, TORCH_NEURONX_NEFF_CACHE_DIR=str(d))
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(_CACHE_SCRIPT)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT) for _ in range(2)]
    outs = [p.communicate(timeout=240) for p in procs]
    for p, (o, e) in zip(procs, outs):
        assert p.returncode == 0, e[-3000:]
    hashes = {o.split("HASH ")[1].split()[0] for o, _ in outs}
    assert len(hashes) == 1
    for path in _entries(d):
        torch_neuronx._C._program_load(path)  # every entry is whole
    h, (compiled, hits, corrupt, _, captured), _ = _run_cache(d)
    assert h in hashes and compiled == 0 and corrupt == 0 and captured == 0


def test_debug_dir_dumps_graph_report_and_program(tmp_path):
    nconfig.settings().debug_dir = str(tmp_path / "dbg")
    f = torch.compile(lambda x: (x * 2).sigmoid(), backend="neuron")
    f(torch.randn(16, device=DEV))
    dirs = os.listdir(tmp_path / "dbg")
    assert len(dirs) == 1
    files = set(os.listdir(tmp_path / "dbg" / dirs[0]))
    assert {"fx_graph.py", "graph.nrtg", "compiler_report.txt", "program.txt", "program.neff"} <= files
    assert (tmp_path / "dbg" / dirs[0] / "graph.nrtg").read_text().startswith("nrt-graph 1")


# ---- stride cross-check ----------------------------------------------------------------------

def test_outputs_match_the_fx_graph_meta():
    from torch_neuronx.compiler import graph as G

    checked = []
    orig = G.GraphRunner.__call__

    def checking(self, *args):
        outs = orig(self, *args)
        metas = self.output_node.args[0]
        for o, n in zip(outs, metas):
            if isinstance(o, torch.Tensor) and isinstance(n, torch.fx.Node) and "val" in n.meta:
                v = n.meta["val"]
                assert (tuple(o.shape), o.stride(), o.dtype) == (tuple(v.shape), v.stride(), v.dtype), n
                checked.append(n.name)
        return outs

    G.GraphRunner.__call__ = checking
    try:
        def f(x, y):
            a = x.t() @ y
            return a.transpose(0, 1), (x * 2)[:, 1:], a.softmax(-1), x.view(-1)[::2].to(torch.bfloat16)

        cf = torch.compile(f, backend="neuron")
        x, y = torch.randn(8, 6, device=DEV), torch.randn(8, 5, device=DEV)
        for _ in range(2):
            for got, want in zip(cf(x, y), f(x, y)):
                assert got.stride() == want.stride()
                close(got.float(), want.float(), rtol=1e-5, atol=1e-5)
    finally:
        G.GraphRunner.__call__ = orig
    assert len(checked) >= 8
