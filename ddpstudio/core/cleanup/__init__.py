"""What killed runs leave behind: the run registry, stale store files, orphaned ranks.

``registry`` keeps one record per launch (the source of truth for "ours");
``hygiene`` scans for and cleans leftovers and guards a launch; ``findings``
holds the plain values every front end shows. May import the shared ground,
``process/`` and ``rendezvous/``; never ``launch/``.
"""
