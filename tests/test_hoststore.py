"""A rank given the host's store by rank/hoststore.py meets a rank that let torch build that client itself.

torch's ``init_process_group`` puts a store it builds from ``init_method`` under ``PrefixStore("default_pg")``
and leaves a store passed in as it is (torch/distributed/distributed_c10d.py, ``init_process_group``: the
``PrefixStore("default_pg", store)`` line sits in the ``if store is None`` branch). So the store that
``with_host_store`` passes in must carry that prefix already, or its rank writes its Gloo address under
other keys than a rank whose torch built the client: a script's process the rank helper does not reach
(or torchrun's agent reading the group's keys) would wait for a peer that never appears.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ddpstudio.core.rendezvous.ports import find_free_port
from tests.studio import kill_left

pytestmark = pytest.mark.slow

# One rank: through with_host_store (mode "ours") or torch's own env:// client (mode "torch"); one all-reduce.
RANK = r"""
import sys
from datetime import timedelta
import torch, torch.distributed as dist
from ddpstudio.rank.hoststore import with_host_store
rank, mode = int(sys.argv[1]), sys.argv[2]
arguments = {"backend": "gloo", "init_method": "env://", "rank": rank, "world_size": 2,
             "timeout": timedelta(seconds=20)}
if mode == "ours":
    arguments = with_host_store(arguments)
    assert "store" in arguments, arguments
dist.init_process_group(**arguments)
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
print("sum", t.item(), flush=True)
dist.destroy_process_group()
"""


def test_a_host_store_rank_and_a_torch_built_rank_share_one_group(tmp_path):
    from torch.distributed import TCPStore

    port = find_free_port()
    # The agent's store: served here, as torchrun's agent or core/nodes/store.py serves it.
    server = TCPStore("127.0.0.1", port, 3, True, use_libuv=False, wait_for_workers=False)
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
           "TORCHELASTIC_USE_AGENT_STORE": "True", "GLOO_SOCKET_IFNAME": "lo"}
    ranks = [subprocess.Popen([sys.executable, "-c", RANK, str(rank), mode], env=env, cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for rank, mode in ((0, "ours"), (1, "torch"))]
    try:
        outputs = [r.communicate(timeout=90)[0] for r in ranks]
    finally:
        kill_left(ranks)
    del server
    assert [r.returncode for r in ranks] == [0, 0], outputs
    assert all("sum 3.0" in out for out in outputs), outputs
