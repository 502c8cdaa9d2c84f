"""A plain single-process training script (no process group, no DDP): run on N ranks it trains N copies."""

import torch

torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
x, y = torch.randn(32, 4), torch.randn(32, 1)
for step in range(1, 6):
    loss = torch.nn.functional.mse_loss(model(x), y)
    model.zero_grad()
    loss.backward()
    # SGD by hand, as torch.optim.SGD(lr=0.1) updates (param.add_(grad, alpha=-lr)): torch/optim/optimizer.py
    # imports torch._dynamo on an optimizer's first step() (_use_grad_for_differentiable), 1.5-3 s of CPU a rank.
    with torch.no_grad():
        for param in model.parameters():
            param.add_(param.grad, alpha=-0.1)
    print(f"step {step} loss: {loss.item():.5f}", flush=True)
