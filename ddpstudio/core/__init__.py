"""The Qt-free core: machine inventory, launch policy, launcher, protocol.

Nothing under this package imports PySide6 or pyqtgraph, nor ``ddpstudio.rank``,
``ddpstudio.cli`` or ``ddpstudio.gui`` (tests/test_layers.py enforces both, and
that no two core modules import each other), so the CLI, the launcher and the
GUI share exactly this logic.

The rooms:

- top level, the shared ground every room may use: ``platform`` (the one
  Windows/POSIX seam), ``paths``, ``atomic``, ``protocol`` (the event stream),
  ``plan`` (the launch plan and the names ranks and core agree on), ``policy``
  and ``validate`` (from a request to a plan), with what validation asks of
  ``checkpoint`` (a checkpoint's sidecar, verified without torch),
  ``imagesize`` (does a model take that image size), ``capacity`` (how many
  CPU ranks the machine holds) and ``userpython`` (a Python of the user's for
  a script's ranks, checked); ``words`` (counts as every front end says them);
- ``launch/``: starting and watching a run (launcher, session, rank commands,
  run folder and its disk guard, root cause);
- ``process/``: owning, identifying and stopping processes (process table,
  process tree, Job Object, killer, file lock holders);
- ``cleanup/``: what killed runs leave behind (registry, scan and clean);
- ``rendezvous/``: store URLs and TCP ports;
- ``nodes/``: several machines in one run (join code, handshake, heartbeats,
  network adapter, the node launcher); nothing else in core imports it;
- ``exchange/``: how gradients travel between ranks, and the probe of
  whether Gloo can all-reduce CUDA tensors here (pytorch #186535);
- ``gpu/`` and ``bench/``: GPU inventory and sampling; the scaling benchmark;
- ``metrics/``: what runs measured, kept and read back (``history.jsonl``),
  the list of runs, comparing runs, and exporting them (CSV, TensorBoard).
"""
