"""The DDP tutorial's structure as most copies of it are written: one rank per CUDA GPU,
``world_size = torch.cuda.device_count()`` then ``mp.spawn(..., nprocs=world_size)``. On a machine without CUDA
GPUs it starts no process at all and exits 0. Knows nothing of DDP Studio."""

import os
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, world_size):
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = os.environ.get("TUTORIAL_PORT", "12356")
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    t = torch.ones(1) * rank
    dist.all_reduce(t)
    print(f"rank {rank} sum {t.item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    n_gpus = torch.cuda.device_count()
    world_size = n_gpus
    mp.spawn(worker, args=(world_size,), nprocs=world_size, join=True)
