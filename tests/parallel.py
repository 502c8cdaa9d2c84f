"""How the suite shares a machine's cores (pytest-xdist, ``-n``): whole files per worker, heaviest first.

A test file is one unit of work, as with ``--dist loadfile``: its module-scoped fixtures (one real run
read by several tests) then run once, not once per worker. Files that touch the same place outside
their temporary folders are one unit together, so they never run at the same time: the three that
build the app's wheel in place (``pip wheel`` of the checkout writes ``build/`` and the egg-info into
it). Units start in order of how many slow tests they hold (those that start processes, seconds each),
so the longest ones do not start last and leave one worker running alone at the end.
"""

from __future__ import annotations

import pytest

# Files that must never run at the same time as each other, by the resource they share.
SHARED = {
    "tests/test_bootstrap_e2e.py": "builds the wheel in the checkout",
    "tests/test_installer_build.py": "builds the wheel in the checkout",
    "tests/test_installer_wine.py": "builds the wheel in the checkout",
}


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to: its file, or the shared resource its file touches."""
    path = nodeid.split("::", 1)[0]
    return SHARED.get(path, path)


def heaviest_first(items: list[pytest.Item]) -> None:
    """Reorder ``items`` in place: units with more slow tests first; within a unit, collection order."""
    slow: dict[str, int] = {}
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        unit = unit_of(item.nodeid)
        first.setdefault(unit, index)
        slow[unit] = slow.get(unit, 0) + (item.get_closest_marker("slow") is not None)
    items.sort(key=lambda item: (-slow[unit_of(item.nodeid)], first[unit_of(item.nodeid)]))


def scheduler(config, log):
    """xdist's scope scheduler, its scopes being our units, handed out in collection order."""
    from xdist.scheduler import LoadScopeScheduling

    class UnitScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    config.option.loadscopereorder = False  # keep heaviest_first's order, not "most tests first"
    return UnitScheduling(config, log)
