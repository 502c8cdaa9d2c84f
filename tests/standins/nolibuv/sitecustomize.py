"""Stand-in for torch's Windows build, in every Python process of a test: ``TCPStore`` refuses libuv.

Put this folder on PYTHONPATH (in a rank, DDP Studio's rank helper runs it:
``rank/helper/sitecustomize.py`` ``_chain``). ``TCPStore`` becomes a subclass
of the real one that raises what the Windows wheels raise for ``use_libuv=True``
(torch 2.14.1 win_amd64, checked under Wine: issue 19; TCPStore.cpp
``TORCH_CHECK_WITH(DistStoreError, is_libuv_tcpstore_backend_available(), ...)``,
checked before ``is_master``) and otherwise is the real store. The name is
replaced wherever torch.distributed's import left it (``torch._C._distributed_c10d``,
``torch.distributed``, ``torch.distributed.rendezvous``), as that import ends.
One exception: a store handed its own listening socket (``master_listen_fd``)
is the POSIX-only branch of ``core/nodes/store.py`` ``open_host_store``
(Windows takes the ``use_libuv=False`` one), so it keeps torch's default here.
Each store made is logged to ``$NOLIBUV_LOG`` (pid, is_master, use_libuv), so
a test can see the stand-in was in place. ``NOLIBUV_REFUSE=all``: every store
is refused with a store error that is not about the network (``BROKEN``).
"""

import os
import sys

MESSAGE = ("use_libuv was requested but PyTorch was built without libuv support, run with USE_LIBUV=0 "
           "to disable it.")
BROKEN = "TCPStore is broken in this PyTorch (test stand-in)"
WATCHED = "torch.distributed"


def _arg(args, kwargs, index, name, default):
    return kwargs[name] if name in kwargs else args[index] if len(args) > index else default


def _install():
    c10d = sys.modules["torch._C._distributed_c10d"]

    real = c10d.TCPStore

    class WindowsTCPStore(real):
        def __init__(self, *args, **kwargs):
            use_libuv = _arg(args, kwargs, 8, "use_libuv", True)
            listen_fd = _arg(args, kwargs, 7, "master_listen_fd", None)
            is_master = _arg(args, kwargs, 3, "is_master", False)
            log = os.environ.get("NOLIBUV_LOG")
            if log:
                with open(log, "a", encoding="utf-8") as f:
                    f.write(f"{os.getpid()} is_master={bool(is_master)} use_libuv={bool(use_libuv)}\n")
            refuse = sys.modules["torch.distributed"].DistStoreError
            if os.environ.get("NOLIBUV_REFUSE") == "all":
                raise refuse(BROKEN)
            if use_libuv and listen_fd is None:
                raise refuse(MESSAGE)
            super().__init__(*args, **kwargs)

    WindowsTCPStore.__name__ = WindowsTCPStore.__qualname__ = "TCPStore"
    for name in ("torch._C._distributed_c10d", "torch.distributed", "torch.distributed.rendezvous"):
        module = sys.modules.get(name)  # every module holding the name once torch.distributed is imported
        if getattr(module, "TCPStore", None) is real:
            module.TCPStore = WindowsTCPStore


class _Watch:
    """Finds nothing: wraps ``torch.distributed``'s loader so the stand-in is in place before its body runs."""

    def find_spec(self, name, path=None, target=None):
        if name != WATCHED:
            return None
        sys.meta_path.remove(self)
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find else None
            if spec is not None:
                break
        else:
            return None
        original = spec.loader.exec_module

        def exec_module(module):
            original(module)
            _install()  # before any code outside torch.distributed's import can make a store

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _Watch())
