"""How gradients travel between ranks, and whether this machine can send them the direct way.

On Windows builds of PyTorch, a Gloo all-reduce of a CUDA tensor dies with a
native access violation (pytorch #186535: the CUDA creator of Gloo's
all-reduce registry is compiled only ``if(NOT WIN32)``). ``probe`` finds out
in a child process whether this machine is affected, and caches the answer
per torch build, driver and GPU set (``probe_child`` is what that child
runs); ``crash`` recognises a rank that died of it. Nothing here imports
torch in the caller's process.
"""
