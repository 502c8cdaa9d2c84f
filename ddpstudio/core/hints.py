"""What to do about a failure: the hint that applies to a root cause, found by its words.

The launcher reports the earliest failure (the rank's last exception line and
traceback tail, or its rendezvous watchdog's findings); each rule below
recognises one of the failures of docs in WINDOWS_DDP terms and says the fix,
in the words of the front that shows it: the window's controls, or the CLI's
commands and options (``FRONTS``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace

from ddpstudio.core import cmdline
from ddpstudio.core.missing_module import PROJECTS, install_command, missing_module, misspelled
from ddpstudio.core.platform import Platform

CLEANUP = "cleanup"  # the action a hint may offer: run the Clean up dialog

WINDOW, CLI = "window", "cli"
# What a hint's text calls the controls it names, in each front ({name} in the rules below).
FRONTS: dict[str, dict[str, str]] = {
    WINDOW: {"Clean": "Click Clean up", "clean": "click Clean up", "cleanup": "Clean up",
             "port": "Leave the port empty", "python": "the Python field", "no_python": "leave Python empty",
             "spawn": "choose the kind \"My script: starts its own ranks\""},
    CLI: {"Clean": "Run ddpstudio clean", "clean": "run ddpstudio clean", "cleanup": "ddpstudio clean",
          "port": "Leave out --port", "python": "--python", "no_python": "leave out --python",
          "spawn": "run it with --script-style spawn"},
}


@dataclass(frozen=True)
class Hint:
    key: str
    title: str
    text: str
    action: str | None = None


_RULES: tuple[tuple[Hint, tuple[str, ...]], ...] = (
    (Hint("stale_store", "A killed run left its store file behind",
          "The FileStore file was not new, so the ranks read a dead run's addresses and could not connect "
          "(pytorch #55967). {Clean} to remove it, or use a fresh FileStore (the default).", CLEANUP),
     ("existed before this run started", "connectfullmesh failed", "a killed run left it behind")),
    (Hint("copies_start_ranks", "The script starts its own ranks",
          "DDP Studio started the script once per rank, and each copy started processes of its own (its library's "
          "launcher: Lightning's ddp_spawn, Ignite's Parallel with nproc_per_node, torchrun run by the script): "
          "separate groups, or processes fighting over one port. Start the script once and let it start its "
          "ranks: {spawn}."),
     ("more processes than ranks meet there", "each copy of the script started ranks of its own")),
    (Hint("held_port", "The script's port is taken",
          "Another program listens on the port the rank wanted (named above, with the process that holds it). "
          "Scripts in the DDP tutorial's style fix MASTER_PORT (12355): change it in the script, or end that "
          "process if it is yours ({cleanup} lists what killed runs left behind).", CLEANUP),
     ("is already in use, held by",)),  # core/launch/busyport.py HELD_BY
    (Hint("busy_port", "The port is already in use",
          "Another process (often an orphaned rank of an earlier run) listens on the store's port. {port} "
          "to pick a free one, or {clean} to find and end orphaned ranks.", CLEANUP),
     ("address already in use", "eaddrinuse", "errno: 98", "error 10048", "is held by another process",
      "failed to listen", "failed to bind")),
    (Hint("libuv", "This PyTorch build has no libuv",
          "Windows wheels are built without libuv but TCPStore asks for it (pytorch #139990). Use the "
          "FileStore (the default), or keep USE_LIBUV=0 in the environment: DDP Studio sets it for its "
          "TCP store, but torchrun-style rendezvous ignores it (#148283)."),
     ("use_libuv was requested", "without libuv support")),
    (Hint("network_adapter", "Gloo picked the wrong network adapter",
          "The host name resolves to a VPN, Hyper-V or Docker adapter (pytorch #77523). For a run on one "
          "machine, pin Gloo to the loopback adapter: set GLOO_SOCKET_IFNAME to it (DDP Studio does this "
          "unless your environment overrides it) and use 127.0.0.1 as the master address."),
     ("10049", "address not valid in its context", "makedeviceforhostname", "unsupported gloo device")),
    (Hint("no_nccl", "NCCL is not available here",
          "PyTorch for Windows has no NCCL, and NCCL needs CUDA GPUs. Choose the gloo backend (auto does). A "
          "script that asks for NCCL itself gets Gloo on Windows from DDP Studio's rank helper: keep the helper "
          "on (leave out --no-rank-helper; in the window, tick \"Rank helper in my script\"), or change the "
          "script's backend to gloo."),
     ("nccl built in", "doesn't have nccl", "nccl is not available", "processgroupnccl is only supported with gpus")),
    (Hint("library_nccl", "The script's library refuses NCCL here",
          "The script asks for the NCCL backend and its library checks for CUDA GPUs before any process group "
          "exists, so DDP Studio's rank helper cannot give it Gloo. Give the script the gloo backend in its own "
          "arguments (Ignite's examples: --backend gloo, a Transformers Trainer: --ddp_backend gloo) or code: NCCL "
          "needs CUDA GPUs (and PyTorch for Windows "
          "has no NCCL at all)."),
     ("nccl backend is required but no cuda capable devices",  # ignite/distributed/comp_models/native.py
      "your assigned backend nccl is not available")),  # accelerate/state.py (Trainer's --ddp_backend nccl)
    (Hint("gloo_cuda_crash", "Gloo crashed all-reducing GPU tensors",
          "A rank died inside PyTorch without a Python error while Gloo exchanged gradients on the GPU. "
          "PyTorch for Windows cannot all-reduce CUDA tensors with Gloo (pytorch #186535). Choose the staged "
          "gradient exchange (--grad-exchange staged), which all-reduces gradients on the CPU; DDP Studio "
          "will check this machine again before the next automatic choice."),
     ("pytorch #186535",)),
    (Hint("dist_args", "The script does not take the distributed arguments",
          "In this kind DDP Studio appends its distributed settings to the script's arguments (the template under "
          "Kind: --dist-url, --dist-backend, --world-size, --rank) and the script's argument parser does not know "
          "them. A script written for torchrun reads its rank from the environment instead: choose \"My script: "
          "torchrun environment variables\" (--script-style env). Otherwise change the template to the options "
          "the script takes."),
     tuple(f"{said}{flag}" for flag in ("--dist-url", "--dist-backend", "--world-size", "--rank")
           for said in ("unrecognized arguments: ", "not used by the hfargumentparser: ['"))),  # argparse, HF
    (Hint("main_guard", "The script runs again in each process it starts",
          "On Windows a new process (each DataLoader worker, each spawned rank) starts by importing your script "
          "again, so code at its top level runs again there and tries to start processes of its own. Put the "
          "training code under if __name__ == \"__main__\": (a main() called from there), or set the "
          "DataLoader's num_workers=0."),
     ("has finished its bootstrapping phase", "forgotten to use the proper idiom",  # multiprocessing/spawn.py
      "while that process was importing your script")),  # rank/script_hooks.py REIMPORTED_MAIN
    (Hint("package_import", "The script must run inside its package",
          "The script imports relatively (from .model import ...), which works only when Python runs it as a "
          "module of its package (python -m mypkg.train). DDP Studio does that by itself when the package's "
          "folders have Python names: rename a folder such as my-project to my_project."),
     ("attempted relative import with no known parent package",)),  # importlib._bootstrap
    (Hint("compile_toolchain", "torch.compile cannot build its kernels here",
          "The script compiles its model (torch.compile), which needs Triton to build GPU kernels and a C++ "
          "compiler for CPU ones. PyTorch for Windows ships neither: the triton-windows package provides "
          "Triton, and Visual Studio's C++ build tools provide cl.exe. Or turn compiling off in the script "
          "(nanoGPT: --compile=False); training then runs without it."),
     ("cannot find a working triton installation", "no working c++ compiler found",  # torch/_inductor/exc.py
      "compiler: cl is not found", "compiler: cl.exe is not found")),  # torch/_inductor/cpp_builder.py
    (Hint("stdin_input", "The script waits for typed input",
          "A rank read from its standard input (input(), or a prompt such as \"press Enter\"), and ranks "
          "started by DDP Studio have no keyboard: the read ended at once. Remove the prompt, or give the "
          "answer as one of the script's arguments."),
     ("eof when reading a line",)),  # CPython's input() at the end of stdin
    (Hint("cpu_torch", "This PyTorch has no CUDA",
          "The script puts its work on a CUDA GPU, but the PyTorch it runs is a CPU-only build (what pip installs "
          "on Windows unless told otherwise). DDP Studio's own Python gets a CUDA build matched to the driver when "
          "it is set up; a Python you chose for the script ({python}) needs one too: install torch there "
          "from https://download.pytorch.org/whl/cuNNN (the CUDA version nvidia-smi shows, or an older one), or "
          "{no_python}."),
     ("torch not compiled with cuda enabled",)),  # torch/cuda/__init__.py _lazy_init
    (Hint("no_cuda_device", "The script needs a CUDA GPU",
          "The script puts its work on a CUDA GPU (.cuda(), cuda:N, torch.cuda.set_device), and PyTorch finds no "
          "NVIDIA GPU or driver on this machine. Run it where there are NVIDIA GPUs and their driver, or make the "
          "script keep to the CPU: DDP Studio then runs its ranks over Gloo. A device option alone may not do it "
          "(torchvision's reference scripts call torch.cuda.set_device whenever they run distributed): the "
          "traceback names the line that asks for CUDA."),
     ("found no nvidia driver on your system", "no cuda gpus are available")),  # c10/cuda's words
    (Hint("cpu_device_ids", "DistributedDataParallel was given a GPU for a model on the CPU",
          "The script wraps its model with DistributedDataParallel(model, device_ids=[...]), and the model is on "
          "the CPU: device_ids name GPUs. On the CPU leave device_ids out (or give None); keep them where the "
          "model is on a GPU (nanoGPT and the DDP tutorials pass device_ids=[local_rank] always): the traceback "
          "names the line."),
     ("and module parameters {device(type='cpu')}",)),  # torch/nn/parallel/distributed.py, a model all on the CPU
    (Hint("lightning_devices", "Lightning's devices do not match the ranks",
          "The script's Lightning Trainer is given a number of devices (times num_nodes) that is not the number "
          "of ranks DDP Studio started, and Lightning refuses to train. Make them agree: set Ranks "
          "(--world-size) to the Trainer's devices, or the Trainer's devices to the number of ranks."),
     ("in lightning, but the product",)),  # lightning/fabric/plugins/environments/torchelastic.py validate_settings
    (Hint("out_of_memory", "A GPU ran out of memory",
          "Lower the batch size per rank, or split the batch over the ranks instead of scaling it."),
     ("cuda out of memory", "outofmemoryerror")),
    (Hint("rendezvous", "The ranks never met",
          "A rank did not join in time. Check that nothing else uses the store ({cleanup} lists leftovers) "
          "and that no firewall blocks local connections; the logs of the missing rank say more.", CLEANUP),
     ("rendezvous stalled", "timed out initializing process group", "socket timeout")),
)


def hints_for(*texts: str, python: str | None = None, front: str = WINDOW) -> list[Hint]:
    """Hints whose words appear in any of ``texts`` (summary, message, traceback), most specific first, worded
    for ``front``; ``python``: the interpreter the user chose for the script, if any (the missing-module hint
    names it)."""
    haystack = "\n".join(t for t in texts if t).lower()
    words_of = FRONTS[front]
    found = [replace(hint, text=hint.text.format(**words_of)) for hint, words in _RULES
             if any(w in haystack for w in words)]
    if any(h.key == "stale_store" for h in found):
        found = [h for h in found if h.key != "rendezvous"]
    keys = {h.key for h in found}
    if "library_nccl" in keys:  # the library refused NCCL before any group: the helper's swap never applied
        found = [h for h in found if h.key != "no_nccl"]
        keys.discard("no_nccl")
    if "copies_start_ranks" in keys:  # the run's own port, taken by its own processes: not the script's port
        found = [h for h in found if h.key not in ("busy_port", "held_port")]
    elif "held_port" in keys:  # the holder is named: no guessing at orphans
        found = [h for h in found if h.key != "busy_port"]
    missing = missing_module_hint(*texts, chosen=python)
    return found + ([missing] if missing is not None else [])


def low_load_hint(mean_gpu_util: float | None, data_wait_fraction: float | None) -> Hint | None:
    """Advice while a run trains: the GPUs are idle much of the time, or the ranks wait for data."""
    if data_wait_fraction is not None and data_wait_fraction > 0.25:
        return Hint("data_wait", "The ranks wait for data",
                    f"{100 * data_wait_fraction:.0f}% of each step is spent waiting for the next batch. "
                    "Raise the number of DataLoader workers.")
    if mean_gpu_util is not None and mean_gpu_util < 40:
        return Hint("low_gpu_load", "Low GPU load",
                    f"The GPUs were busy only {mean_gpu_util:.0f}% of the time in the last 30 s. Raise the batch "
                    "size per rank or the number of DataLoader workers.")
    return None


def script_python(run_dir: str | None) -> str | None:
    """The Python the user chose for the script of the run in ``run_dir`` (its plan's ``script.python``), if any."""
    from ddpstudio.core.launch.rundir import RunDir
    from ddpstudio.core.plan import Plan

    try:
        plan = Plan.read(RunDir.at(run_dir).plan)
    except (TypeError, OSError, ValueError):
        return None
    return plan.script.python if plan.script is not None else None


def missing_module_hint(*texts: str, prefix: str = sys.prefix, executable: str = sys.executable,
                        platform: Platform | None = None, chosen: str | None = None) -> Hint | None:
    """The hint for a failure whose text names a missing module, or None. ``chosen``: the Python the user chose
    for the script (core/userpython.py), where the package belongs instead of DDP Studio's."""
    name = missing_module(*texts)
    if name is None:
        return None
    meant = misspelled(name)
    if meant is not None:  # helper trial: "import lightnin" got "pip install lightnin"
        return Hint("missing_module", f"The script imports {name}, perhaps a misspelling of {meant}",
                    f"No module named {name} is installed, and the name is one letter or two from {meant}: correct "
                    f"the import in the script (the traceback names its line). Do not install {name} to fix it: "
                    f"a package of that name, if PyPI has one, is not {meant}. If {name} is your own code, keep "
                    f"it in the script's folder or its package.")
    project = PROJECTS.get(name, name)
    if chosen:
        line = cmdline.pip_install_line(chosen, project, platform)
        return Hint("missing_module", f"The script needs {name}, which the Python you chose does not have",
                    f"The ranks run in the Python you chose for the script ({chosen}), which does not have "
                    f"{name}. If {name} is a package from PyPI, install it there from a terminal:\n{line}\n(the "
                    f"PyPI name may differ from the import name; in a conda environment, conda install works "
                    f"too). If {name} is your own code, keep it in the script's folder or its package.")
    return Hint("missing_module", f"The script needs {name}, which DDP Studio's Python does not have",
                f"The ranks run in DDP Studio's Python environment ({prefix}), which has PyTorch, torchvision "
                f"and the app but not {name}. If {name} is a package from PyPI, install it there from a "
                f"terminal:\n{install_command(project, prefix, executable, platform)}\n(the PyPI name may "
                f"differ from the import name), and install it again after a Repair or an update, which "
                f"rebuild that environment. If {name} is your own code, keep it in the script's folder or "
                f"its package.")
