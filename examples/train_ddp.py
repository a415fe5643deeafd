"""Data-parallel training on the neuron device with DistributedDataParallel.

    torchrun --nproc-per-node=4 examples/train_ddp.py [--epochs N]

On several machines, the same script on each (K = 0, 1, ...):

    torchrun --nnodes=2 --node-rank=K --nproc-per-node=4 \
        --master-addr=HOST0 --master-port=29500 examples/train_ddp.py

One process per logical NeuronCore: LOCAL_RANK picks the core, the
"neuron" backend carries the gradients between the processes (shared
memory within a machine; across machines reduced within each, exchanged
through Gloo between them, broadcast within each), and each process runs
its kernels on its share of the host's cores.
The model learns a random linear teacher's labels; rank 0 prints the loss
averaged over the ranks.
"""
import argparse
import os

import torch  # the neuron backend autoloads
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64, help="per process")
    args = parser.parse_args()

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.neuron.set_device(local_rank)
    dist.init_process_group("neuron")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("neuron", local_rank)

    g = torch.Generator().manual_seed(1234)
    x = torch.randn(4096, 32, generator=g)
    teacher = torch.randn(32, 10, generator=g)
    y = (x @ teacher).argmax(dim=1)
    data = TensorDataset(x, y)
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=args.batch_size, sampler=sampler)

    torch.manual_seed(0)  # the same initial weights everywhere (DDP also broadcasts rank 0's)
    model = nn.Sequential(nn.Linear(32, 128), nn.GELU(), nn.Linear(128, 128), nn.GELU(),
                          nn.Linear(128, 10)).to(device)
    ddp = DDP(model)
    opt = torch.optim.AdamW(ddp.parameters(), lr=3e-3)

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        total = torch.zeros(2, device=device)
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            loss = F.cross_entropy(ddp(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += torch.stack([loss.detach() * len(yb), torch.tensor(float(len(yb)), device=device)])
        dist.all_reduce(total)
        if rank == 0:
            print(f"epoch {epoch}: loss {(total[0] / total[1]).item():.4f}", flush=True)

    # Every rank holds the same parameters after data-parallel steps.
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    mx, mn = flat.clone(), flat.clone()
    dist.all_reduce(mx, op=dist.ReduceOp.MAX)
    dist.all_reduce(mn, op=dist.ReduceOp.MIN)
    if rank == 0:
        same = torch.equal(mx.cpu(), mn.cpu())
        print(f"parameters equal on all {world} ranks: {same}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
