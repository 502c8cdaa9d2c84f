"""``ddpstudio doctor``: what this machine is and what DDP Studio would choose, and why."""

from __future__ import annotations

import argparse
import json
import platform as pyplatform
import socket
import sys
from typing import Any


def add_parser(sub) -> None:
    p = sub.add_parser("doctor", help="check this machine: GPUs, backend, store, known traps")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--probe", action="store_true",
                   help="check again whether Gloo can all-reduce CUDA tensors here, even if a result is cached")
    p.set_defaults(func=main)


def network_facts(hostname: str | None = None) -> dict[str, Any]:
    """Where the host name resolves, and the loopback interface Gloo is pinned to."""
    from ddpstudio.core.policy import loopback_interface

    hostname = hostname or socket.gethostname()
    try:
        address = socket.gethostbyname(hostname)
    except OSError:
        address = None
    facts = {"hostname": hostname, "hostname_address": address, "loopback_interface": loopback_interface()}
    if address is None:
        facts["note"] = ("the host name does not resolve; single-machine runs are pinned to the loopback "
                         "interface, so this does not matter to them")
    elif not address.startswith("127."):
        facts["note"] = (f"the host name resolves to {address}; if that is a VPN or virtual adapter Gloo can fail "
                         "(error 10049), so single-machine runs are pinned to the loopback interface")
    return facts


def exchange_fact(force: bool = False) -> dict[str, Any]:
    """The Gloo-on-CUDA probe's answer (cached per torch build, driver and GPU set; ``force`` runs it again)."""
    from ddpstudio.core.exchange import probe

    cached = None if force else probe.cached_result()
    result = cached or probe.probe(force=True)
    return {**result.to_dict(), "from_cache": cached is not None}


def collect(force_probe: bool = False) -> dict[str, Any]:
    from ddpstudio import __version__
    from ddpstudio.core.gpu import detect_inventory
    from ddpstudio.core.platform import current
    from ddpstudio.core.policy import Request, choose_backend, choose_grad_exchange, choose_store, choose_world_size

    plat = current()
    inventory = detect_inventory()
    backend = choose_backend(plat, inventory)
    device = "cuda" if backend.value == "nccl" or (inventory.cuda_available and inventory.gpu_count) else "cpu"
    world = choose_world_size(inventory, None, device)
    store = choose_store(plat, Request().store, None)
    exchange, _ = choose_grad_exchange(Request(), str(backend.value), device)
    report: dict[str, Any] = {
        "ddpstudio": __version__,
        "platform": plat.name,
        "os": pyplatform.platform(),
        "python": sys.version.split()[0],
        "inventory": inventory.to_dict(),
        "mode": "cpu" if inventory.cpu_mode else "gpu",
        "choice": {"backend": backend.value, "backend_reason": backend.reason,
                   "world_size": world.value, "world_size_reason": world.reason,
                   "store": store.value, "store_reason": store.reason,
                   "grad_exchange": str(exchange.value), "grad_exchange_reason": exchange.reason},
        "libuv": _libuv_fact(plat),
        "network": network_facts(),
        "gloo_cuda_all_reduce": exchange_fact(force_probe),
    }
    from ddpstudio.bootstrap.record import for_running_environment

    installed = for_running_environment()
    if installed is not None:
        report["environment"] = installed
    findings = _findings()
    if findings is not None:
        report["leftovers"] = findings
    return report


def _libuv_fact(plat) -> str:
    if plat.is_windows:
        return ("PyTorch for Windows is built without libuv: TCP stores get use_libuv=0 (USE_LIBUV=0) "
                "automatically; torchrun ignores that switch (pytorch #148283), so ranks are started directly")
    return "libuv is available on this platform; nothing to switch off"


def _findings():
    """Stale stores and orphaned ranks, once the cleanup module exists."""
    try:
        from ddpstudio.core.cleanup.hygiene import scan
    except ModuleNotFoundError:
        return None
    return scan().to_dict()


def print_human(report: dict[str, Any]) -> None:
    inv = report["inventory"]
    print(f"DDP Studio {report['ddpstudio']} on {report['os']}, Python {report['python']}")
    print(f"PyTorch {inv.get('torch_version')}, CUDA build {inv.get('torch_cuda_version') or 'none'}, "
          f"CUDA available: {'yes' if inv.get('cuda_available') else 'no'}")
    print(f"NVML: {inv.get('nvml_state')}"
          + (f", driver {inv.get('driver_version')}" if inv.get("driver_version") else ""))
    gpus = inv.get("gpus") or []
    if gpus:
        for gpu in gpus:
            print(f"  GPU {gpu.get('index')}: {gpu.get('name')}, {gpu.get('total_memory_mb', 0) / 1024:.1f} GiB")
    else:
        print("  no NVIDIA GPU found: training runs on the CPU with Gloo")
    for note in inv.get("notes") or []:
        print(f"  note: {note}")
    choice = report["choice"]
    print("Would choose:")
    print(f"  backend {choice['backend']}: {choice['backend_reason']}")
    print(f"  world size {choice['world_size']}: {choice['world_size_reason']}")
    print(f"  store {choice['store']}: {choice['store_reason']}")
    print(f"  gradient exchange {choice['grad_exchange']}: {choice['grad_exchange_reason']}")
    print(f"libuv: {report['libuv']}")
    net = report["network"]
    print(f"network: host {net['hostname']} -> {net['hostname_address'] or 'unresolved'}; "
          f"Gloo pinned to {net['loopback_interface'] or 'the loopback address'}")
    if net.get("note"):
        print(f"  {net['note']}")
    print_exchange(report["gloo_cuda_all_reduce"])
    env = report.get("environment")
    if env:
        print("environment: set up by the installer: " + ", ".join(f"{k} {v}" for k, v in env.items()
                                                                  if isinstance(v, (str, int, float)))[:300])
    leftovers = report.get("leftovers")
    if leftovers is not None:
        from ddpstudio.cli.clean import print_findings

        print_findings(leftovers)


def print_exchange(fact: dict[str, Any]) -> None:
    import time

    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(fact["t"]))
    source = f"checked {when}" + (", cached" if fact.get("from_cache") else f", took {fact['duration_s']:.1f} s")
    print(f"{fact['sentence']}.")
    print(f"  Gloo all-reduce of CUDA tensors: {fact['outcome']} ({fact['detail']}; {source}; "
          "'ddpstudio doctor --probe' checks again)")
    for gpu in fact.get("gpus") or []:
        print(f"  GPU {gpu['index']} {gpu['name']}: {gpu['outcome']}" + (f" ({gpu['detail']})" if gpu["detail"] else ""))


def main(args: argparse.Namespace) -> int:
    report = collect(force_probe=args.probe)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_human(report)
    return 0
