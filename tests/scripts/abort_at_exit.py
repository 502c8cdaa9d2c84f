"""A script that trains, then dies at exit the way a Gloo rank does in pytorch PR #179291's bug: the C++
runtime's message on stderr, then abort() (SIGABRT on Linux, exit code 3 on Windows). Rank 1 only."""

import os
import sys

rank = int(os.environ.get("RANK", "0"))
for step in range(1, 6):
    print(f"rank {rank} step {step} loss: {1.0 / step:.5f}", flush=True)
if rank == 1:
    print("terminate called without an active exception", file=sys.stderr, flush=True)
    os.abort()
