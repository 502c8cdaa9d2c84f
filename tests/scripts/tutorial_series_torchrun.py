"""The DDP tutorial series' torchrun script as its users run it: ``torchrun --nproc-per-node N train.py 3 1``.

Positional ``total_epochs save_every`` and ``--batch_size`` (argparse: any other argument stops it), the rank
from ``LOCAL_RANK``, ``init_process_group(backend="nccl")`` with no init_method, a ``DistributedSampler``, a
snapshot that rank 0 saves every ``save_every`` epochs into the working folder and every rank loads when it
is there. Prints the tutorial's epoch lines. Knows nothing of DDP Studio: started once per rank, by
environment variables only.
"""

import os

import torch
import torch.nn.functional as F
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

SNAPSHOT = "snapshot.pt"


def ddp_setup():
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    init_process_group(backend="nccl")


def train(total_epochs, save_every, batch_size):
    gpu_id = int(os.environ["LOCAL_RANK"])
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(256, 20), torch.randn(256, 1))
    loader = DataLoader(data, batch_size=batch_size, shuffle=False, sampler=DistributedSampler(data))
    model = torch.nn.Linear(20, 1)
    epochs_run = 0
    if os.path.exists(SNAPSHOT):
        snapshot = torch.load(SNAPSHOT)
        model.load_state_dict(snapshot["MODEL_STATE"])
        epochs_run = snapshot["EPOCHS_RUN"]
        print(f"Resuming training from snapshot at Epoch {epochs_run}", flush=True)
    model = DDP(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(epochs_run, total_epochs):
        loader.sampler.set_epoch(epoch)
        for source, targets in loader:
            optimizer.zero_grad()
            loss = F.mse_loss(model(source), targets)
            loss.backward()
            optimizer.step()
        print(f"[GPU{gpu_id}] Epoch {epoch} | Batchsize: {batch_size} | Steps: {len(loader)} | loss {loss.item():.4f}",
              flush=True)
        if gpu_id == 0 and epoch % save_every == 0:
            torch.save({"MODEL_STATE": model.module.state_dict(), "EPOCHS_RUN": epoch + 1}, SNAPSHOT)
            print(f"Epoch {epoch} | Training snapshot saved at {SNAPSHOT}", flush=True)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="simple distributed training job")
    parser.add_argument("total_epochs", type=int, help="Total epochs to train the model")
    parser.add_argument("save_every", type=int, help="How often to save a snapshot")
    parser.add_argument("--batch_size", default=32, type=int, help="Input batch size on each device")
    args = parser.parse_args()
    ddp_setup()
    train(args.total_epochs, args.save_every, args.batch_size)
    destroy_process_group()
