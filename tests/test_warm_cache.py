"""The cache every test's home starts with (conftest.warm_cache) is what a first real launch writes.

Every other test's home is seeded with it, so this file keeps the cold path honest: a fresh data folder
makes ``ddpstudio run`` import torchvision, list its models, probe resnet18 at 32 pixels and cache both,
and writes the same answers.
"""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import processes_of
from tests.studio import ddpstudio


def _cache(home) -> dict[str, object]:
    return {p.name: json.loads(p.read_text(encoding="utf-8")) for p in sorted((home / "cache").iterdir())}


def test_the_warm_cache_holds_the_model_list_and_resnet18s_verdict(warm_cache):
    import importlib.metadata

    version = importlib.metadata.version("torchvision")  # metadata only: torchvision stays unimported here
    written = sorted(p.name for p in warm_cache.iterdir())
    assert written == [f"torchvision-{version}-image-sizes.json", f"torchvision-{version}-models.json"], written
    models = json.loads((warm_cache / f"torchvision-{version}-models.json").read_text(encoding="utf-8"))
    assert models == sorted(models) and {"resnet18", "resnet50", "alexnet", "inception_v3"} <= set(models)
    sizes = json.loads((warm_cache / f"torchvision-{version}-image-sizes.json").read_text(encoding="utf-8"))
    assert sizes == {"resnet18:32": ""}  # resnet18 takes 32x32 images (adaptive pooling)


@pytest.mark.slow
def test_a_cold_home_computes_the_same_cache_on_the_first_run(tmp_path, warm_cache):
    cold = tmp_path / "cold-home"
    cold.mkdir()
    res = ddpstudio("run", "--data", str(tmp_path / "nope"), env={**os.environ, "DDPSTUDIO_HOME": str(cold)})
    assert res.returncode == 2 and "does not exist" in res.stderr, res.stderr  # refused after the checks
    assert _cache(cold) == _cache(warm_cache.parent)
    assert not (cold / "runs").exists() and not processes_of(cold)
