"""The suite's plan for several workers (tests/parallel.py): no two files that build the wheel in the
checkout run at once, whole files stay together, and the heaviest start first."""

from __future__ import annotations

import re

import pytest

from tests import parallel
from tests.conftest import REPO

# What builds the app's wheel from the checkout: installer/build.py (run, or its build_wheel called).
BUILDS_THE_WHEEL = re.compile(r"build_wheel\(|\"installer\" / \"build\.py\"")


def test_every_file_that_builds_the_wheel_in_the_checkout_shares_one_unit():
    builders = sorted(f"tests/{path.name}" for path in (REPO / "tests").glob("test_*.py")
                      if BUILDS_THE_WHEEL.search(path.read_text(encoding="utf-8")))
    assert len(builders) >= 2, builders  # the pattern still finds them
    assert len({parallel.unit_of(f"{path}::test_x") for path in builders}) == 1, builders


class Item:
    """What heaviest_first reads of a pytest item: its node id and whether it is marked slow."""

    def __init__(self, nodeid: str, slow: bool) -> None:
        self.nodeid, self.slow = nodeid, slow

    def get_closest_marker(self, name: str):
        return pytest.mark.slow.mark if name == "slow" and self.slow else None


def test_units_with_more_slow_tests_start_first_and_keep_their_order_inside():
    items = [Item("tests/test_a.py::one", False), Item("tests/test_a.py::two", False),
             Item("tests/test_b.py::one", True), Item("tests/test_c.py::one", True),
             Item("tests/test_b.py::two", True), Item("tests/test_installer_build.py::x", True),
             Item("tests/test_bootstrap_e2e.py::y", True), Item("tests/test_installer_wine.py::z", True)]
    parallel.heaviest_first(items)
    assert [i.nodeid for i in items] == [
        "tests/test_installer_build.py::x", "tests/test_bootstrap_e2e.py::y", "tests/test_installer_wine.py::z",
        "tests/test_b.py::one", "tests/test_b.py::two", "tests/test_c.py::one",
        "tests/test_a.py::one", "tests/test_a.py::two"]
    assert parallel.unit_of("tests/test_b.py::one[x::y]") == "tests/test_b.py"
