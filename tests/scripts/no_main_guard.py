"""A torchrun-style script with no ``if __name__ == "__main__":`` and DataLoader workers started by spawning.

On Windows every worker process starts by spawning, which imports the script again: its top level, process
group included, runs again in each worker. ``multiprocessing_context="spawn"`` does the same on Linux.
Knows nothing of DDP Studio.
"""

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, TensorDataset

dist.init_process_group("gloo")
data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
loader = DataLoader(data, batch_size=8, num_workers=1, multiprocessing_context="spawn")
for inputs, _targets in loader:
    print("batch", tuple(inputs.shape), flush=True)
dist.destroy_process_group()
