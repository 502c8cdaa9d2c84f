"""How gradients travel between ranks, and whether this machine can send them the direct way.

On Windows builds of PyTorch a Gloo all-reduce of a CUDA tensor dies with a
native access violation (pytorch #186535: the CUDA creator of Gloo's
all-reduce registry is compiled only ``if(NOT WIN32)``). ``probe`` finds out
in a child process (``probe_child``) whether this machine is affected and
caches the answer per torch build, driver and GPU set (``probekey``);
``choice`` picks the exchange mode (``native`` or ``staged`` through CPU
memory) from it; ``crash`` recognises a rank that died of it anyway. Nothing
here imports torch in the caller's process.
"""
