"""An env-style script sees what torchrun would give it: the same variables, with the same values where
they describe the world, beside real torchrun on the same script (``tests/scripts/torchrun_env.py``,
which prints its environment and starts nothing), and a restart count that counts DDP Studio's restarts.

The script joins no group, so its two-rank run ends ``not_distributed`` (exit 5): what is checked there
is only the environment each rank was started with.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ddpstudio.core import protocol
from ddpstudio.core.launch.commands import rank_env
from ddpstudio.core.plan import Plan, ScriptSpec
from tests.studio import SCRIPTS, ddpstudio, events, final, kill_left, of_type

SCRIPT = str(SCRIPTS / "torchrun_env.py")
# Where a value describes the world, torchrun's and DDP Studio's must agree.
SAME_VALUE = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_NAME",
              "ROLE_RANK", "ROLE_WORLD_SIZE", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
              "TORCH_NCCL_ASYNC_ERROR_HANDLING", "OMP_NUM_THREADS")
# torchrun's agent puts its own signal list in its process's environment (torch/distributed/launcher/api.py),
# which its workers inherit; only an agent reads it (torch/distributed/elastic/multiprocessing/api.py).
AGENTS_OWN = {"TORCHELASTIC_SIGNALS_TO_HANDLE"}


def launched_env(tmp_path: Path) -> dict[str, str]:
    """This test's environment, with BASE_KEYS naming all of it: the script prints only what a launcher added."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHELASTIC_", "ROLE_", "GROUP_"))}
    env.pop("OMP_NUM_THREADS", None)
    env.pop("TORCH_NCCL_ASYNC_ERROR_HANDLING", None)
    env["BASE_KEYS"] = json.dumps(sorted([*env, "BASE_KEYS"]))
    return env


def shown(lines: list[str]) -> list[dict[str, str]]:
    """Every ``ENV {...}`` line, parsed, in order."""
    return [json.loads(line[4:]) for line in lines if line.startswith("ENV ")]


def env_script(**changes) -> Plan:
    values = dict(run_id="r7", run_dir="/runs/r7", world_size=2, backend="gloo", device="cpu", store="tcp",
                  init_method="env://", master_port=5000, max_restarts=2,
                  script=ScriptSpec(path="/work/train.py", style="env"))
    return Plan(**{**values, **changes})


def test_an_env_style_rank_gets_torchruns_agent_variables_and_no_other_style_does():
    env = rank_env(env_script(), 1, "/events", base={}, restarts=1)
    assert {k: env[k] for k in ("ROLE_NAME", "ROLE_RANK", "ROLE_WORLD_SIZE", "GROUP_WORLD_SIZE",
                                "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
                                "TORCHELASTIC_USE_AGENT_STORE", "TORCH_NCCL_ASYNC_ERROR_HANDLING")} == {
        "ROLE_NAME": "default", "ROLE_RANK": "1", "ROLE_WORLD_SIZE": "2", "GROUP_WORLD_SIZE": "1",
        "TORCHELASTIC_RUN_ID": "r7", "TORCHELASTIC_RESTART_COUNT": "1", "TORCHELASTIC_MAX_RESTARTS": "2",
        "TORCHELASTIC_USE_AGENT_STORE": "False", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"}
    assert Path(env["TORCHELASTIC_ERROR_FILE"]) == Path("/runs/r7/logs/rank1.error1.json")
    # The user's own NCCL error handling is kept, as torchrun keeps it.
    assert rank_env(env_script(), 0, "/events", base={"TORCH_NCCL_ASYNC_ERROR_HANDLING": "3"})[
        "TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "3"
    # Scripts given their settings as arguments, and the built-in recipe, are not told torchrun started them.
    args_style = env_script(script=ScriptSpec(path="/work/train.py", style="args"), init_method="file:///tmp/pg",
                            master_port=None)
    for plan in (args_style, env_script(script=None)):
        env = rank_env(plan, 0, "/events", base={})
        assert not [k for k in env if k.startswith(("TORCHELASTIC_", "ROLE_", "TORCH_NCCL_"))], env


@pytest.mark.slow
@pytest.mark.posix_only("torchrun's rendezvous asks for libuv, which the Windows wheels lack (pytorch #148283)")
def test_an_env_style_script_sees_what_torchrun_gives_its_workers(studio_home, tmp_path):
    env = launched_env(tmp_path)
    torchrun = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
                                 "2", SCRIPT], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                stdin=subprocess.DEVNULL)
    try:
        out, err = torchrun.communicate(timeout=120)
    finally:
        kill_left([torchrun])
    assert torchrun.returncode == 0, err[-3000:]
    theirs = {int(e["RANK"]): e for e in shown(out.splitlines())}

    res = ddpstudio("run", "--json", "--script", SCRIPT, "--script-style", "env", env=env)
    evs = events(res.stdout)
    done = final(evs)
    assert (res.returncode, done.get("state")) == (5, "not_distributed"), res.stderr + res.stdout[-3000:]
    [started] = of_type(evs, protocol.RUN_STARTED)
    ours = {e.rank: seen for e in of_type(evs, protocol.LOG) for seen in shown([e.get("line", "")])}

    assert sorted(theirs) == sorted(ours) == [0, 1]
    for rank in (0, 1):
        missing = set(theirs[rank]) - set(ours[rank]) - AGENTS_OWN
        assert not missing, f"torchrun gives rank {rank} {sorted(missing)}, DDP Studio does not"
        assert {k: ours[rank][k] for k in SAME_VALUE} == {k: theirs[rank][k] for k in SAME_VALUE}
        # The job id is the run's; the store is rank 0's own (env://), where torchrun's agent serves one.
        assert ours[rank]["TORCHELASTIC_RUN_ID"] == started.get("run_id")
        assert (ours[rank]["TORCHELASTIC_USE_AGENT_STORE"], theirs[rank]["TORCHELASTIC_USE_AGENT_STORE"]) == \
            ("False", "True")
        assert Path(ours[rank]["TORCHELASTIC_ERROR_FILE"]).parent == Path(started.get("run_dir")) / "logs"


@pytest.mark.slow
def test_a_restarted_script_is_told_its_restart_and_a_record_main_leaves_its_error_in_the_run(studio_home, tmp_path):
    """The first start of the one rank fails from torchrun's ``@record`` main; DDP Studio starts it again
    (``--max-restarts 1``) with TORCHELASTIC_RESTART_COUNT=1, and the first start's error is in logs/."""
    res = ddpstudio("run", "--json", "--world-size", "1", "--max-restarts", "1", "--script", SCRIPT,
                    "--script-style", "env", "--", "--crash-first", env=launched_env(tmp_path))
    evs = events(res.stdout)
    done = final(evs)
    assert (res.returncode, done.get("state"), done.get("restarts")) == (0, "finished", 1), \
        res.stderr + res.stdout[-3000:]
    [restarted] = of_type(evs, protocol.RUN_RESTARTED)
    assert restarted.get("cause").endswith("RuntimeError: first start of rank 0 fails on purpose")
    starts = shown([e.get("line", "") for e in of_type(evs, protocol.LOG)])
    assert [(s["TORCHELASTIC_RESTART_COUNT"], s["TORCHELASTIC_MAX_RESTARTS"]) for s in starts] == \
        [("0", "1"), ("1", "1")]
    logs = Path(done.get("run_dir")) / "logs"
    assert [s["TORCHELASTIC_ERROR_FILE"] for s in starts] == [str(logs / "rank0.error0.json"),
                                                             str(logs / "rank0.error1.json")]
    error = json.loads((logs / "rank0.error0.json").read_text(encoding="utf-8"))
    assert error["message"]["message"] == "RuntimeError: first start of rank 0 fails on purpose"
    assert not (logs / "rank0.error1.json").exists()  # the second start did not fail
