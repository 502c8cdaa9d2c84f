"""The torchrun export: a bash script every node runs, meeting at HEAD_NODE's c10d rendezvous.

torchrun's elastic agent does not start on Windows wheels (pytorch #148283),
so this is for Linux machines; run it on each node, the first one included.
"""

from __future__ import annotations

from ddpstudio.core.jobs import shell
from ddpstudio.core.jobs.job import Job


def render(job: Job) -> str:
    shape = job.shape
    if shape.host:
        head = f'HEAD_NODE="${{HEAD_NODE:-{shape.host}}}"'
        left = f"run this script on each of the {shape.nodes} node(s); they meet at {shape.host}:{shape.port}"
    else:
        # No apostrophe in the message: inside "${VAR:?word}" bash reads a ' as opening a quote, so
        # "first node's" left the script unparseable (bash -n: unexpected EOF looking for the matching ').
        head = 'HEAD_NODE="${HEAD_NODE:?set HEAD_NODE to the address of the first node}"'
        left = (f"run this script on each of the {shape.nodes} node(s) with HEAD_NODE set to the first node's "
                f"address (its port {shape.port} must be open to the others)")
    lines = ["#!/usr/bin/env bash", *shell.header(job, "torchrun", left), "set -euo pipefail", head,
             *shell.run_dir_lines(job, f"$HOME/ddpstudio-runs/{job.plan.run_id}"), *shell.restart_lines(job),
             "exec " + shell.torchrun_words(job, str(shape.nodes), f'"$HEAD_NODE:{shape.port}"', job.plan.run_id)]
    return "\n".join(lines) + "\n"
