"""What runs on the "neuron" backend, each against a single-process reference
computed by every rank itself: DDP (plain, find_unused_parameters,
gradient_as_bucket_view, the fp16 compression hook), FSDP2 fully_shard,
DTensor redistribution on a 1-d mesh and a tensor-parallel MLP."""
from __future__ import annotations

import copy

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from dist_worker import cases, RANK, WORLD, case, device, main

PER_RANK = 8


def batch(seed: int, features: int = 16, outputs: int = 4):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(WORLD * PER_RANK, features, generator=g), torch.randn(WORLD * PER_RANK, outputs, generator=g)


def mine(t: torch.Tensor) -> torch.Tensor:
    return t[RANK * PER_RANK:(RANK + 1) * PER_RANK]


class Net(nn.Module):
    def __init__(self, unused: bool = False):
        super().__init__()
        self.a = nn.Linear(16, 32)
        self.b = nn.Linear(32, 4)
        self.unused = nn.Linear(32, 32) if unused else None

    def forward(self, x):
        return self.b(F.relu(self.a(x)))


def same_on_every_rank(t: torch.Tensor, what: str) -> None:
    t = t.detach().contiguous()
    out = [torch.empty_like(t) for _ in range(WORLD)]
    dist.all_gather(out, t)
    for r in range(WORLD):
        assert torch.equal(out[r].cpu(), t.cpu()), f"{what}: rank {r} differs from rank {RANK}"


def _ddp(seed: int, hook=None, tol=(2e-5, 2e-5), **ddp_kwargs):
    from torch.nn.parallel import DistributedDataParallel as DDP

    dev = device()
    torch.manual_seed(seed)
    unused = ddp_kwargs.get("find_unused_parameters", False)
    model = Net(unused=unused)
    ref = copy.deepcopy(model)  # one process on the full batch, on the CPU
    ddp = DDP(model.to(dev), **ddp_kwargs)
    if hook is not None:
        ddp.register_comm_hook(None, hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for step in range(3):
        x, y = batch(seed * 10 + step)
        opt.zero_grad()
        F.mse_loss(ddp(mine(x).to(dev)), mine(y).to(dev)).backward()
        ref_opt.zero_grad()
        F.mse_loss(ref(x), y).backward()
        for (name, p), q in zip(ddp.module.named_parameters(), ref.parameters()):
            if q.grad is None:
                assert p.grad is None or not p.grad.any(), f"{name}: unused parameter got a gradient"
                continue
            same_on_every_rank(p.grad, f"step {step} {name}.grad")
            torch.testing.assert_close(p.grad.cpu(), q.grad, rtol=tol[0], atol=tol[1],
                                       msg=lambda m: f"step {step} {name}.grad vs one process: {m}")
        opt.step()
        ref_opt.step()
    for p, q in zip(ddp.module.parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=tol[0] * 5, atol=tol[1] * 5)


@case
def ddp():
    _ddp(1)


@case
def ddp_find_unused_parameters():
    _ddp(2, find_unused_parameters=True)


@case
def ddp_gradient_as_bucket_view():
    _ddp(3, gradient_as_bucket_view=True)


@case
def ddp_small_buckets():
    _ddp(4, bucket_cap_mb=0.001)  # several buckets in flight


@case
def ddp_fp16_compress_hook():
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    _ddp(5, hook=default_hooks.fp16_compress_hook, tol=(2e-3, 2e-3))


def _fsdp2(seed: int, reshard_after_forward: bool, mp_policy=None, tol=(1e-5, 1e-5)):
    from torch.distributed.fsdp import fully_shard

    dev = device()
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4))
    ref = copy.deepcopy(model).to(dev)
    model = model.to(dev)
    kw = {"reshard_after_forward": reshard_after_forward}
    if mp_policy is not None:
        kw["mp_policy"] = mp_policy
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, **kw)
    fully_shard(model, **kw)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    ref_opt = torch.optim.Adam(ref.parameters(), lr=1e-2)
    for step in range(4):
        x, y = batch(seed * 10 + step)
        opt.zero_grad()
        loss = F.mse_loss(model(mine(x).to(dev)), mine(y).to(dev))
        loss.backward()
        opt.step()
        ref_opt.zero_grad()
        ref_loss = F.mse_loss(ref(x.to(dev)), y.to(dev))
        ref_loss.backward()
        ref_opt.step()
        avg = loss.detach().clone()
        dist.all_reduce(avg, op=dist.ReduceOp.AVG)
        torch.testing.assert_close(avg.cpu(), ref_loss.detach().cpu(), rtol=tol[0], atol=tol[1],
                                   msg=lambda m: f"step {step} loss: {m}")
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.full_tensor().cpu(), q.detach().cpu(), rtol=tol[0] * 10, atol=tol[1] * 10,
                                   msg=lambda m: f"{name}: {m}")


@case
def fsdp2_fully_shard():
    _fsdp2(11, reshard_after_forward=True)


@case
def fsdp2_no_reshard_after_forward():
    _fsdp2(12, reshard_after_forward=False)


@case
def fsdp2_bf16_mixed_precision():
    from torch.distributed.fsdp import MixedPrecisionPolicy

    _fsdp2(13, True, MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32),
           tol=(3e-2, 3e-2))


@case
def fsdp2_distributed_checkpoint():
    """Sharded save with torch.distributed.checkpoint and load into a fresh
    FSDP2 model (other initial weights): the full parameters come back."""
    import tempfile

    import torch.distributed.checkpoint as dcp
    from torch.distributed.fsdp import fully_shard

    dev = device()

    def build(seed):
        torch.manual_seed(seed)
        m = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to(dev)
        for layer in (m[0], m[2]):
            fully_shard(layer)
        fully_shard(m)
        return m

    model = build(61)
    path = [tempfile.mkdtemp(prefix="neuron-dcp-") if RANK == 0 else None]
    dist.broadcast_object_list(path, src=0)
    dcp.save({"model": model.state_dict()}, checkpoint_id=path[0])
    fresh = build(62)
    state = {"model": fresh.state_dict()}
    dcp.load(state, checkpoint_id=path[0])
    fresh.load_state_dict(state["model"])
    for (name, p), q in zip(model.named_parameters(), fresh.parameters()):
        torch.testing.assert_close(q.full_tensor().cpu(), p.full_tensor().cpu(), rtol=0, atol=0,
                                   msg=lambda m: f"{name}: {m}")
    dist.barrier()
    if RANK == 0:
        import shutil

        shutil.rmtree(path[0], ignore_errors=True)


@case
def dtensor_redistribute():
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor

    dev = device()
    mesh = init_device_mesh("neuron", (WORLD,))
    full = torch.randn(WORLD * 3, WORLD * 2, generator=torch.Generator().manual_seed(21))
    d = distribute_tensor(full.to(dev), mesh, [Shard(0)])
    assert d.to_local().shape == (3, WORLD * 2)
    torch.testing.assert_close(d.to_local().cpu(), full.chunk(WORLD, 0)[RANK])
    r = d.redistribute(mesh, [Replicate()])
    torch.testing.assert_close(r.to_local().cpu(), full)
    s1 = r.redistribute(mesh, [Shard(1)])
    torch.testing.assert_close(s1.to_local().cpu(), full.chunk(WORLD, 1)[RANK])
    s0 = s1.redistribute(mesh, [Shard(0)])  # all_to_all
    torch.testing.assert_close(s0.to_local().cpu(), full.chunk(WORLD, 0)[RANK])
    torch.testing.assert_close(s0.full_tensor().cpu(), full)
    p = DTensor.from_local(torch.full((2, 3), float(RANK + 1), device=dev), mesh, [Partial()])
    torch.testing.assert_close(p.redistribute(mesh, [Replicate()]).to_local().cpu(),
                               torch.full((2, 3), WORLD * (WORLD + 1) / 2.0))
    ps = DTensor.from_local(torch.full((WORLD * 2, 3), float(RANK + 1), device=dev), mesh, [Partial()])
    torch.testing.assert_close(ps.redistribute(mesh, [Shard(0)]).to_local().cpu(),
                               torch.full((2, 3), WORLD * (WORLD + 1) / 2.0))
    # an op on DTensors: sharded rows @ replicated matrix
    w = torch.randn(WORLD * 2, 5, generator=torch.Generator().manual_seed(22))
    out = d @ distribute_tensor(w.to(dev), mesh, [Replicate()])
    torch.testing.assert_close(out.full_tensor().cpu(), full @ w, rtol=1e-5, atol=1e-5)


@case
def tensor_parallel_mlp():
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    dev = device()
    mesh = init_device_mesh("neuron", (WORLD,))
    torch.manual_seed(31)
    mlp = nn.Sequential(nn.Linear(16, 8 * WORLD), nn.ReLU(), nn.Linear(8 * WORLD, 16))
    ref = copy.deepcopy(mlp)
    tp = parallelize_module(mlp.to(dev), mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    x = torch.randn(5, 16, generator=torch.Generator().manual_seed(32))
    out = tp(x.to(dev))
    want = ref(x)
    torch.testing.assert_close(out.cpu(), want, rtol=1e-5, atol=1e-5)
    out.sum().backward()
    want.sum().backward()
    g0 = tp[0].weight.grad.full_tensor().cpu()
    g2 = tp[2].weight.grad.full_tensor().cpu()
    torch.testing.assert_close(g0, ref[0].weight.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(g2, ref[2].weight.grad, rtol=1e-5, atol=1e-5)


def _pipeline(schedule_name: str):
    from torch.distributed import pipelining

    dev = device()
    torch.manual_seed(41)
    model = nn.Sequential(*[m for _ in range(WORLD) for m in (nn.Linear(16, 16), nn.Tanh())])
    ref = copy.deepcopy(model)
    stage_mod = model[2 * RANK:2 * RANK + 2].to(dev)
    stage = pipelining.PipelineStage(stage_mod, stage_index=RANK, num_stages=WORLD, device=dev)
    n_mb = 4
    sched = getattr(pipelining, schedule_name)(stage, n_microbatches=n_mb, loss_fn=F.mse_loss)
    x, y = batch(43, outputs=16)
    losses = []
    if RANK == 0:
        sched.step(x.to(dev))
    elif RANK == WORLD - 1:
        out = sched.step(target=y.to(dev), losses=losses)
    else:
        sched.step()
    # one process: the same micro-batches; the schedule averages their
    # gradients (scale_grads=True)
    ref_losses = [F.mse_loss(ref(xm), ym) for xm, ym in zip(x.chunk(n_mb), y.chunk(n_mb))]
    (sum(ref_losses) / n_mb).backward()
    if RANK == WORLD - 1:
        torch.testing.assert_close(out.detach().cpu(), ref(x).detach(), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(torch.stack([l.detach().cpu() for l in losses]),
                                   torch.stack([l.detach() for l in ref_losses]), rtol=1e-5, atol=1e-5)
    for p, q in zip(stage_mod.parameters(), ref[2 * RANK:2 * RANK + 2].parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad, rtol=1e-4, atol=1e-5)


@case
def pipeline_gpipe():
    _pipeline("ScheduleGPipe")


@case
def pipeline_1f1b():
    _pipeline("Schedule1F1B")


class Block(nn.Module):
    """A transformer block's shape: attention projections and an MLP, residuals."""

    def __init__(self, d: int = 16, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.norm2 = nn.LayerNorm(d)
        self.up = nn.Linear(d, 4 * d)
        self.down = nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        h = self.norm1(x)
        # heads from the local width, so a column-sharded projection keeps its share of heads
        q, k, v = (m(h).view(b, t, -1, d // self.heads).transpose(1, 2) for m in (self.q, self.k, self.v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, -1))
        return x + self.down(F.gelu(self.up(self.norm2(x))))


@case
def fsdp2_x_tensor_parallel_2d_mesh():
    """A small transformer trained with FSDP2 over "dp" and tensor parallelism over "tp" on a
    2 x 2 mesh, against one process on the full batch."""
    if WORLD != 4:
        return
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    dev = device()
    mesh = init_device_mesh("neuron", (2, 2), mesh_dim_names=("dp", "tp"))
    dp_rank = mesh.get_local_rank("dp")
    torch.manual_seed(51)
    model = nn.Sequential(Block(), Block())
    ref = copy.deepcopy(model).to(dev)
    model = model.to(dev)
    plan = {"q": ColwiseParallel(use_local_output=True), "k": ColwiseParallel(), "v": ColwiseParallel(),
            "o": RowwiseParallel(), "up": ColwiseParallel(), "down": RowwiseParallel()}
    for blk in model:
        parallelize_module(blk, mesh["tp"], plan)
        fully_shard(blk, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, foreach=False)
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=1e-2, foreach=False)
    g = torch.Generator().manual_seed(52)
    for step in range(3):
        x = torch.randn(4, 6, 16, generator=g)  # 2 sequences per dp rank
        y = torch.randn(4, 6, 16, generator=g)
        opt.zero_grad()
        loss = F.mse_loss(model(x[2 * dp_rank:2 * dp_rank + 2].to(dev)), y[2 * dp_rank:2 * dp_rank + 2].to(dev))
        loss.backward()
        opt.step()
        ref_opt.zero_grad()
        ref_loss = F.mse_loss(ref(x.to(dev)), y.to(dev))
        ref_loss.backward()
        ref_opt.step()
        avg = loss.detach().clone()
        dist.all_reduce(avg, op=dist.ReduceOp.AVG)
        torch.testing.assert_close(avg.cpu(), ref_loss.detach().cpu(), rtol=1e-4, atol=1e-5,
                                   msg=lambda m: f"step {step}: {m}")


import torch_neuronx  # noqa: E402,F401

CASES = cases(__name__)

if __name__ == "__main__":
    main()
