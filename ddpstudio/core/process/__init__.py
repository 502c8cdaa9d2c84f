"""Processes we start: identify them (pid + create time), own their tree, stop them.

``proctable`` is the one identity test of a process; ``proctree`` owns a run's
tree (a session/process group on POSIX, ``winjob``'s Job Object on Windows);
``killer`` stops politely, then by force; ``lockholders`` names the processes
holding a file open. May import only ``core.platform`` and psutil.
"""
