"""Starting and watching one run: the launcher process and the front ends' client of it.

``launcher`` is the process that owns the ranks (``python -m
ddpstudio.core.launch.launcher PLAN.json``): start, loop, stop and reap there;
reading what the ranks say in ``intake``, its records (processes.json, the
registry, the store-path claim) in ``records``, the run's one ending in
``ending`` (refusals in ``endings``), its stop listeners in ``stoplisten``, a
failed rank's last words in ``lastwords``, a stalled rendezvous's facts in
``stall``, the rank record and run states in ``rankproc``; ``session`` starts
it and reads its events; ``commands`` builds each rank's command line and environment;
``rundir``, ``tail``, ``rootcause`` and ``lossparse`` are the run folder, log
tailing, the failing rank's last words and the free-text loss adapter;
``history`` appends the run's measurements and load samples to
``history.jsonl``. May import the shared ground, ``process/``, ``rendezvous/``,
``gpu/`` (the load sampler), ``metrics.rows`` and (lazily, to record runs)
``cleanup.registry``; never torch.
"""
