"""``ddpstudio export-job RUN --to torchrun|slurm|skypilot|k8s``: a past run, or ``run`` options, as a cluster job.

    ddpstudio export-job 20261126-204501-ab12cd --to slurm --nodes 4 --gpus-per-node 8 -o job.sbatch
    ddpstudio export-job --to torchrun --nodes 2 --host 10.0.0.1 run --model resnet50 --data /data/imagenet

The run options go through ``ddpstudio run``'s own parser, request and plan
(cli/run.py), so an export trains exactly what ``ddpstudio run`` would.
"""

from __future__ import annotations

import argparse
import sys

EXIT_BAD_INPUT = 2


def add_parser(sub) -> None:
    from ddpstudio.core.jobs.engines import ENGINES
    from ddpstudio.core.jobs.job import DEFAULT_PORT

    p = sub.add_parser("export-job", help="write a run as a torchrun command or SLURM script for a cluster",
                       description="Hand a past run, or the options 'ddpstudio run' takes, to the engines "
                                   "clusters use. The output's comment header says what was translated and "
                                   "what is left to you.")
    p.add_argument("--to", required=True, choices=ENGINES,
                   help="torchrun (a script each node runs), slurm (an sbatch script), skypilot (a task YAML) or "
                        "k8s (a Kubeflow Trainer v2 TrainJob)")
    p.add_argument("--nodes", type=int, default=1, help="machines (default 1)")
    p.add_argument("--gpus-per-node", type=int, metavar="G",
                   help="processes per node, one per GPU (default: the run's ranks on one machine)")
    p.add_argument("--device", choices=("cuda", "cpu"), help="the cluster's device (default: the run's); "
                                                             "cuda uses NCCL, cpu uses Gloo")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"rendezvous port (default {DEFAULT_PORT})")
    p.add_argument("--host", help="torchrun: the first node's address (default: HEAD_NODE set when it runs)")
    p.add_argument("--accelerator", default="A100", help="skypilot: the GPU type to ask for (default A100)")
    p.add_argument("--image", default="", help="k8s: the container image with torch and ddpstudio")
    p.add_argument("--max-restarts", type=int, metavar="K",
                   help="torchrun restarts (default: the run's own --max-restarts, else 0)")
    p.add_argument("-o", "--output", metavar="FILE", help="write here (default: print)")
    p.add_argument("source", nargs=argparse.REMAINDER, metavar="RUN | run OPTIONS...",
                   help="a run id or folder, or 'run' followed by 'ddpstudio run' options")
    p.set_defaults(func=main)


def _error(message: str) -> int:
    for line in message.splitlines():
        print(f"ddpstudio: error: {line}", file=sys.stderr)
    return EXIT_BAD_INPUT


def source_plan(source: list[str], platform=None):
    """(plan, where it came from, DataLoader workers asked for) for a run id/folder or ``run OPTIONS``;
    raises JobError, one problem a line. The window's Copy as comes here too, with the form as ``run``
    options (gui/command_line.py run_arguments), so it plans exactly what this command plans."""
    from ddpstudio.cli.export import run_folder
    from ddpstudio.core.jobs.job import JobError
    from ddpstudio.core.plan import Plan

    if not source:
        raise JobError("say what to export: a run id, a run folder, or 'run' with 'ddpstudio run' options")
    if source[0] == "run":
        from ddpstudio.cli.main import _parser
        from ddpstudio.cli.run import module_as_script, plan_or_problems
        from ddpstudio.core.platform import current

        run_args = _parser().parse_args(source)
        module_problem = module_as_script(run_args)
        if module_problem:
            raise JobError(module_problem)
        if run_args.python is not None:
            raise JobError(f"--python {run_args.python} is a Python on this machine; each node of the cluster runs "
                           "the python of its own environment (the job says which one is left to you): leave "
                           "--python out")
        # The data, the script and free ports belong to the cluster, not this machine; so do the cores and
        # memory that bound the ranks and DataLoader workers (core/capacity.py): no bound of this machine's.
        run_args.oversubscribe = True
        elsewhere = {"script", "cwd", "port", "data_folder"} | ({"data_dir"} if run_args.data else set())
        plan = plan_or_problems(run_args, platform or current(), frozenset(elsewhere))
        if isinstance(plan, list):
            raise JobError("\n".join(plan))
        return plan, "the run options given", run_args.workers
    if len(source) > 1:
        raise JobError(f"unexpected arguments {' '.join(source[1:])!r}: give one run, or 'run' and its options")
    folder = run_folder(source[0])
    if folder is None:
        raise JobError(f"no run {source[0]!r}: give a run id from 'ddpstudio runs' or a run folder")
    return Plan.read(folder / "plan.json"), f"run {folder.name}", None


def main(args: argparse.Namespace) -> int:
    from ddpstudio.core.jobs.engines import Options, export, save
    from ddpstudio.core.jobs.job import JobError

    options = Options(nodes=args.nodes, procs_per_node=args.gpus_per_node, device=args.device, port=args.port,
                      max_restarts=args.max_restarts, host=args.host, accelerator=args.accelerator,
                      image=args.image)
    try:
        plan, where, workers = source_plan(list(args.source))
        text = export(args.to, options, plan, where, workers)
        if args.output:
            out = save(text, args.output)
    except JobError as exc:
        return _error(str(exc))
    if not args.output:
        sys.stdout.write(text)
        return 0
    print(f"{args.to} job written to {out}", file=sys.stderr)
    return 0
