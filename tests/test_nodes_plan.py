"""A node's plan: the host's spread over N machines, a joining node's from the host's shared part, and
each rank's global rank (node rank x ranks per node + local rank)."""

from __future__ import annotations

from ddpstudio.core.launch.commands import rank_env
from ddpstudio.core.nodes.adapter import AdapterChoice
from ddpstudio.core.nodes.nodeplan import (NodeRole, NodeSpec, host_plan, join_stub_plan, joined_plan,
                                           shared_part, with_local_script)
from ddpstudio.core.plan import ONE_RANK_EXCHANGE, Plan, RecipeSpec, ScriptSpec
from ddpstudio.core.protocol import NO_NCCL_ENV, NO_NCCL_WINDOWS
from ddpstudio.core.platform import LINUX, WINDOWS

LAN = AdapterChoice("eth0", "192.168.1.20", "eth0 (192.168.1.20): the only LAN adapter")


def single(**changes) -> Plan:
    values = dict(run_id="r1", run_dir="/runs/r1", world_size=2, backend="gloo", device="cpu", store="tcp",
                  init_method="tcp://127.0.0.1:5000", master_port=5000, python="/py",
                  env={"GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"},
                  reasons=["Gloo pinned to the loopback interface (lo) so ...", "effective batch 32 = 2 ranks x 16"],
                  recipe=RecipeSpec(batch_size=16), effective_batch=32)
    return Plan(**{**values, **changes})


def test_the_host_plan_counts_every_machines_ranks_and_pins_gloo_to_the_lan_adapter():
    plan = host_plan(single(), 3, 2, LAN, 29400, LINUX)
    assert (plan.world_size, plan.nodes, plan.node_rank, plan.ranks_per_node) == (6, 3, 0, 2)
    assert list(plan.local_ranks()) == [0, 1]
    assert plan.init_method == "tcp://192.168.1.20:29400" and plan.master_addr == "192.168.1.20"
    assert plan.env["GLOO_SOCKET_IFNAME"] == "eth0" and plan.env["TORCHELASTIC_USE_AGENT_STORE"] == "True"
    assert plan.effective_batch == 96 and "effective batch 96 = 6 ranks x 16 per rank" in plan.reasons
    assert not any("loopback" in r for r in plan.reasons)
    windows = host_plan(single(), 2, 1, LAN, 29400, WINDOWS)
    assert windows.init_method.endswith("?use_libuv=0")
    # One rank per machine: the plan of one machine says "no gradient exchange"; two machines exchange.
    from ddpstudio.core.gpu import detect_inventory
    from ddpstudio.core.policy import Request, build_plan

    one = build_plan(Request(world_size=1, recipe=RecipeSpec(batch_size=16)), LINUX, detect_inventory(),
                     interfaces={"lo": ["127.0.0.1"]})
    assert ONE_RANK_EXCHANGE in one.reasons
    two = host_plan(one, 2, 1, LAN, 29400, LINUX)
    assert ONE_RANK_EXCHANGE not in two.reasons and "native gradient exchange between the machines' ranks" in \
        two.reasons
    # On Windows too: psutil's name is the FriendlyName Gloo's libuv transport matches (tests/test_glooiface.py).
    assert windows.env["GLOO_SOCKET_IFNAME"] == "eth0"


def test_a_joining_node_runs_the_hosts_workload_with_its_own_machine_fields():
    host = host_plan(single(), 2, 2, LAN, 29400, LINUX)
    me = AdapterChoice("wlan0", "192.168.1.31", "wlan0 (192.168.1.31): on the host's subnet (192.168.1.20)")
    stub = join_stub_plan(4, 2, "192.168.1.20", 29400, me, LINUX)
    plan = joined_plan(stub, shared_part(host), 1, cuda=False)
    assert (plan.run_id, plan.run_dir, plan.python) == (stub.run_id, stub.run_dir, stub.python)
    assert plan.recipe == host.recipe and plan.world_size == 4 and list(plan.local_ranks()) == [2, 3]
    assert plan.env["GLOO_SOCKET_IFNAME"] == "wlan0" and plan.env["TORCHELASTIC_USE_AGENT_STORE"] == "True"
    assert plan.reasons[0] == "joined the host's run r1 as node 1 of 2" and "wlan0" in plan.reasons[1]


def test_a_windows_node_joining_a_script_run_tells_its_ranks_there_is_no_nccl_whatever_the_host_is():
    """As on a single Windows machine (core/policy.py): the script's init_process_group("nccl") gets Gloo
    with the Windows wording (rank/ncclswap.py), also when the host is a Linux machine."""
    host = host_plan(single(recipe=None, script=ScriptSpec(path="/home/ana/train.py", style="env")), 2, 1, LAN,
                     29400, LINUX)
    me = AdapterChoice("Ethernet", "192.168.1.31", "Ethernet (192.168.1.31): on the host's subnet")
    for platform, expected in ((WINDOWS, NO_NCCL_WINDOWS), (LINUX, None)):
        stub = join_stub_plan(2, 2, "192.168.1.20", 29400, me, platform)
        plan = with_local_script(joined_plan(stub, shared_part(host), 1, cuda=False), r"D:\work\train.py", platform)
        assert plan.script.path == r"D:\work\train.py" and plan.env.get(NO_NCCL_ENV) == expected
        assert rank_env(plan, 1, "/events", base={}).get(NO_NCCL_ENV) == expected


def test_each_rank_gets_its_global_rank_and_its_place_on_the_machine():
    plan = host_plan(single(), 2, 2, LAN, 29400, LINUX)
    plan.node_rank = 1
    env = rank_env(plan, 3, "/events", base={})
    assert (env["RANK"], env["LOCAL_RANK"], env["WORLD_SIZE"], env["LOCAL_WORLD_SIZE"], env["GROUP_RANK"]) == \
        ("3", "1", "4", "2", "1")
    assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == ("192.168.1.20", "29400")
    one = single()  # a single machine is node 0 of 1: unchanged
    assert list(one.local_ranks()) == [0, 1] and rank_env(one, 1, "/e", base={})["LOCAL_RANK"] == "1"


def test_the_node_file_round_trips(tmp_path):
    spec = NodeSpec(NodeRole.JOIN, "192.168.1.20", 29400, 2, 1, 300.0, "b (192.168.1.31)", host_run_id="r1")
    assert NodeSpec.read(spec.write(tmp_path)) == spec


def test_an_env_style_scripts_ranks_on_every_machine_share_the_hosts_job_id_and_the_hosts_store():
    """torchrun's TORCHELASTIC_RUN_ID is the job's, one on every node; the ranks are clients of the
    host's store (TORCHELASTIC_USE_AGENT_STORE), whatever the single-machine default says."""
    host = host_plan(single(recipe=None, script=ScriptSpec(path="/home/ana/train.py", style="env")), 2, 2, LAN,
                     29400, LINUX)
    me = AdapterChoice("wlan0", "192.168.1.31", "wlan0 (192.168.1.31): on the host's subnet (192.168.1.20)")
    stub = join_stub_plan(4, 2, "192.168.1.20", 29400, me, LINUX)
    joined = joined_plan(stub, shared_part(host), 1, cuda=False)
    assert joined.run_id != host.run_id
    for plan, rank in ((host, 1), (joined, 3)):
        env = rank_env(plan, rank, "/events", base={})
        assert (env["TORCHELASTIC_RUN_ID"], env["TORCHELASTIC_USE_AGENT_STORE"], env["GROUP_WORLD_SIZE"],
                env["ROLE_RANK"]) == ("r1", "True", "2", str(rank))
    # The built-in recipe's ranks are not told torchrun started them, on any machine.
    recipe = joined_plan(stub, shared_part(host_plan(single(), 2, 2, LAN, 29400, LINUX)), 1, cuda=False)
    assert "TORCHELASTIC_RUN_ID" not in rank_env(recipe, 3, "/events", base={})
