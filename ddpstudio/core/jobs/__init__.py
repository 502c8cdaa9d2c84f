"""Handing a run to the engines clusters use (torchrun, SLURM): the same plan, their rendezvous and restarts.

DDP Studio's own host/join serves a few workstations; on a Linux cluster the
standard engines already rendezvous, restart and schedule. ``job`` turns a
plan into the cluster's plan and says what was translated and what was left
out; one module per engine writes its command or script (docs/multi-machine.md).
"""
