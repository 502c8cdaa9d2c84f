"""The project's own launcher, in the shape of detectron2's engine/launch.py: one process per GPU through
torch.multiprocessing, each joining the group at ``dist_url`` before it runs ``main``."""

import socket

import torch.distributed as dist
import torch.multiprocessing as mp


def launch(main, num_gpus_per_machine, dist_url, args=()):
    if dist_url == "auto":  # a free port on this machine, as detectron2's "auto" picks one
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            dist_url = f"tcp://127.0.0.1:{s.getsockname()[1]}"
    if num_gpus_per_machine > 1:
        mp.start_processes(_worker, nprocs=num_gpus_per_machine, args=(main, num_gpus_per_machine, dist_url, args),
                           daemon=False, start_method="spawn")
    else:
        main(*args)


def _worker(local_rank, main, world_size, dist_url, args):
    dist.init_process_group("gloo", init_method=dist_url, world_size=world_size, rank=local_rank)
    main(*args)
    dist.destroy_process_group()
