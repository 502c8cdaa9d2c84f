"""How gradients travel between ranks: Gloo's CUDA all-reduce probe, and the exchange mode chosen from it.

Gloo's all-reduce of CUDA tensors crashes natively on Windows builds of
PyTorch (pytorch #186535); the ``staged`` exchange routes gradients through
CPU memory instead.
"""
