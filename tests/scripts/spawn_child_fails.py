"""A script that starts a process with multiprocessing's spawn method and ignores its failure.

No torch (fast): the child raises before any process group, the parent exits 0
anyway; with ``--then-fail`` the parent fails after it, as a script that ran
torchrun with ``subprocess.run(..., check=True)`` does. Knows nothing of DDP Studio.
"""

import multiprocessing
import sys


def work():
    print("child starting", flush=True)
    raise ValueError("boom in a spawned child")


if __name__ == "__main__":
    child = multiprocessing.get_context("spawn").Process(target=work)
    child.start()
    child.join()
    if "--then-fail" in sys.argv:
        raise SystemExit(f"parent: child ended with {child.exitcode}")
    print(f"parent: child ended with {child.exitcode}, carrying on", flush=True)
