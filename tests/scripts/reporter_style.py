"""A torchrun-style script that reports through ``ddpstudio.report``."""

import torch
import torch.distributed as dist

from ddpstudio import report

dist.init_process_group("gloo", init_method="env://")
report.joined()
w = torch.zeros(2, requires_grad=True)
for i in range(5):
    loss = ((w - 1.0) ** 2).sum()
    loss.backward()
    dist.all_reduce(w.grad)
    with torch.no_grad():
        w -= 0.1 * w.grad / dist.get_world_size()
        w.grad.zero_()
    report.step(i + 1, loss.item(), samples_per_s=100.0)
    print(f"loss: {loss.item()}")  # also printed, but the reported events win over scraping
dist.destroy_process_group()
