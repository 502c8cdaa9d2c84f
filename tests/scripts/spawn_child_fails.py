"""A script that starts a process with multiprocessing's spawn method and ignores its failure.

No torch (fast): the child raises before any process group, the parent exits 0
anyway. Knows nothing of DDP Studio.
"""

import multiprocessing


def work():
    print("child starting", flush=True)
    raise ValueError("boom in a spawned child")


if __name__ == "__main__":
    child = multiprocessing.get_context("spawn").Process(target=work)
    child.start()
    child.join()
    print(f"parent: child ended with {child.exitcode}, carrying on", flush=True)
