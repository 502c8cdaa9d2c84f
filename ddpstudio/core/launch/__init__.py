"""Starting and watching one run: the launcher process and the front ends' client of it.

``launcher`` is the process that owns the ranks (``python -m
ddpstudio.core.launch.launcher PLAN.json``); ``session`` starts it and reads its
events; ``commands`` builds each rank's command line and environment;
``rundir``, ``tail``, ``rootcause`` and ``lossparse`` are the run folder, log
tailing, the failing rank's last words and the free-text loss adapter;
``history`` appends the run's measurements and load samples to
``history.jsonl``. May import the shared ground, ``process/``, ``rendezvous/``,
``gpu/`` (the load sampler), ``metrics.rows`` and (lazily, to record runs)
``cleanup.registry``; never torch.
"""
