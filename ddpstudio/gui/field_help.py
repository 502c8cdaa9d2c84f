"""What each setup field is, why it matters for DDP, and its default: the form's tooltips."""

from __future__ import annotations

FIELD_HELP: dict[str, str] = {
    "workload": "What to train: the built-in recipe (a torchvision classifier), or your own script started "
                "once per rank, or once when it starts its own ranks (mp.spawn, --multiprocessing-distributed: "
                "spawn style, chosen for you when the script shows it). Default: the built-in recipe.",
    "model": "A torchvision classification model, trained from scratch. Bigger models send bigger gradients "
             "between ranks each step, so DDP's communication share grows with them. Default: resnet18.",
    "data": "Where images come from. Synthetic needs no download and no disk; a folder is one sub-folder per "
            "class (with train/ and val/ it uses them); CIFAR-10 uses its test batch for validation. "
            "Each rank reads a different shard (DistributedSampler). Default: synthetic.",
    "data_dir": "The folder holding the images (ImageFolder layout) or CIFAR-10's cifar-10-batches-py. "
                "Every rank reads it, so it must be reachable from all of them. No default.",
    "image_size": "Images are resized to this square size. Compute per step grows with its square while the "
                  "gradients exchanged stay the same. Default: 32 px.",
    "script_path": "Your training script (.py), started once per rank. No default.",
    "script_args": "Arguments for your script, as on a command line. Default: none.",
    "dist_args": "Appended for each rank, in the PyTorch examples' style. Fields: {url} {backend} "
                 "{world_size} {rank} {local_rank} {gpu} (the CUDA device index the rank should use; GPU runs "
                 "only) {port} {addr}. With env:// every rank gets MASTER_ADDR and MASTER_PORT. Where your "
                 "arguments set the same flag, the template's value wins (a warning names both). Default: "
                 "--dist-url {url} --dist-backend {backend} --world-size {world_size} --rank {rank}; for a "
                 "script that starts its own ranks (node-level settings): --dist-url {url} --dist-backend "
                 "{backend} --world-size 1 --rank 0.",
    "script_cwd": "The folder your script runs in (relative paths in it resolve here). "
                  "Default: the script's own folder; for a module of a package, which runs as python -m "
                  "pkg.train, the folder above the package.",
    "script_python": "The Python your script's ranks run in: the python of the environment (venv, conda) that "
                     "has your script's packages and PyTorch, or that environment's folder. It is checked before "
                     "the start (it must import torch, with CUDA for a GPU run). Default: DDP Studio's own Python "
                     "(empty), which has torch and torchvision only.",
    "world_size": "How many processes (ranks) train together; each holds a full copy of the model. "
                  "Default: one per GPU, or 2 on the CPU.",
    "backend": "How ranks exchange gradients. NCCL is the fast GPU path but is not built into PyTorch for "
               "Windows; Gloo works everywhere. Default: auto (NCCL on Linux GPUs, Gloo otherwise).",
    "store": "Where ranks meet before training (the rendezvous). A fresh FileStore per run cannot collide "
             "with a leftover file or a busy port; a fixed path repeats the blog's file:///D:\\pg; "
             "TCP needs a free port. Default: a fresh FileStore.",
    "store_path": "The FileStore file at a fixed path. A file left by a killed run makes the next run hang, "
                  "so it is checked before launch. No default.",
    "port": "The TCP store's port on this machine; it must be free. Default: a free one is picked.",
    "grad_exchange": "How gradient buckets travel between ranks. Staged copies each bucket to CPU memory and "
                     "all-reduces it there: Gloo's all-reduce of CUDA tensors crashes on Windows "
                     "(pytorch #186535). Default: auto, which stages when that could happen (the reason shows "
                     "with the decisions).",
    "grad_compression": "fp16 sends each gradient bucket as float16: half the bytes, approximate results. "
                        "Default: none (full precision).",
    "rank_helper": "Puts DDP Studio's start-up helper on your script's ranks' import path (your script is not "
                   "changed): it reports each rank as it joins, stages gradients when needed and lets the "
                   "window stop the ranks politely. Default: on.",
    "one_gpu_per_rank": "Sets CUDA_VISIBLE_DEVICES so each rank sees only its own GPU: for scripts that always "
                        "use cuda:0 (each rank's cuda:0 is then a different GPU, and {gpu} is 0). Needs CUDA "
                        "GPUs. Default: off.",
    "batch_size": "Samples per step. With 'per rank', every rank takes this many (the effective batch grows "
                  "with the ranks); with 'split', it is divided over them. Default: 32.",
    "batch_mode": "per rank: keeps each rank's batch, so more ranks take bigger steps; split: keeps the "
                  "effective batch, so results compare with one process. Default: per rank.",
    "accumulate": "Gradient accumulation: this many micro-batches of the batch size per optimizer step; "
                  "gradients are exchanged once, on the last (DDP's no_sync on the others). The effective batch "
                  "is ranks x batch x this; steps, max steps and checkpoints count optimizer steps. For a bigger "
                  "batch than the GPU holds. Default: 1 (none).",
    "balance": "Per-rank batches for mixed GPUs (an RTX 4090 and a 3060): each rank's batch sized for its "
               "speed, the global batch (ranks x batch size) kept and the gradients weighted by each share, so "
               "the training itself is unchanged. Built-in recipe, two ranks or more. Default: auto.",
    "scale_lr": "Multiply the learning rate by the number of ranks x the accumulated micro-batches (the "
                "effective batch over one rank's batch: the linear scaling rule). Default: off.",
    "lr": "The SGD learning rate (momentum 0.9). Default: 0.02.",
    "lr_schedule": "How the learning rate changes over the run: constant; step (x0.1 at 50% and 75% of "
                   "the steps); cosine (down to 0). Needs a known length (epochs or max steps). "
                   "Default: constant.",
    "warmup_steps": "Raise the learning rate linearly over this many steps first; helps large effective "
                    "batches (many ranks) start stably. Default: 0.",
    "eval_every": "Also measure validation loss and accuracy every N steps, across all ranks (each scores "
                  "its shard). Default: only at the end of each epoch.",
    "epochs": "Passes over the training data; each rank sees 1/N of it per epoch. Default: 1.",
    "max_steps": "Stop after this many steps, even mid-epoch. Default: no limit.",
    "workers": "DataLoader worker processes per rank: every rank starts its own, so N ranks x W workers "
               "processes read data. On Windows each worker is a spawned process (a few seconds to start, once per "
               "run: workers are kept between epochs). Default: auto, one core kept per rank and the others "
               "shared out, at most 8 per rank; the machine panel says how many. 0 loads data in the rank.",
    "checkpoint_dir": "Rank 0 saves a checkpoint here after each epoch (after a barrier, so all ranks agree), "
                      "and the final weights as model.pt. Default: no checkpoints.",
    "checkpoint_every": "Also save a checkpoint every N optimizer steps, so a crash or a restart loses at most "
                        "N steps. Default: at each epoch's end only.",
    "resume": "Continue from the checkpoint in that folder, loaded onto each rank's own device. "
              "Default: off.",
    "keep_training": "When a rank dies (a crash, a kill), stop the others and start them all again: the "
                     "built-in recipe resumes from its last checkpoint; your script starts again from its "
                     "beginning and must resume itself. Each restart is shown in the log. Default: off.",
    "max_restarts": "How many restarts at most; one more crash ends the run as failed. Default: 3.",
    "hang_timeout": "A rank that makes no progress for this long while the others wait for it is named in the "
                    "log and above the plots (which rank, which step, doing what), its Python stack goes to its "
                    "log, and you are offered Stop. Raise it for steps, evaluations or checkpoints that take "
                    "longer. Default: 45 s.",
    "on_hang": "What happens once a rank is named stuck: warn says so and offers Stop while the run keeps "
               "waiting; stop ends the run as failed, e.g. 'rank 1 stuck in the data loader at step 812'. "
               "Default: warn.",
}
# The balance choices' own tooltips: docs/balance.md's words.
BALANCE_HELP: dict[str, str] = {
    "auto": "Balances only when the run's GPUs have different names; identical GPUs and CPU ranks get equal "
            "batches and no measurement.",
    "equal": "Turns balancing off: every rank takes the batch size.",
    "measured": "Forces it (on the CPU too): each rank's batch sized for its measured speed after its first "
                "passes, the global batch kept.",
}
