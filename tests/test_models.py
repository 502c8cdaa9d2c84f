"""The recipe's built-in ``mlp``: accepted and built without torchvision (its loss falls: test_run_e2e)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ddpstudio.core.plan import RecipeSpec
from ddpstudio.core.validate import check_recipe


def _in_child(code: str) -> str:
    """Run ``code`` in a fresh interpreter (this one may have imported torchvision already); its stdout."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120,
                          stdin=subprocess.DEVNULL).stdout.strip()


def test_mlp_is_a_valid_model_at_any_size_without_importing_torchvision(studio_home):
    out = _in_child("import sys\n"
                    "from ddpstudio.core.plan import RecipeSpec\n"
                    "from ddpstudio.core.validate import check_recipe\n"
                    "sizes = (1, 8, 224)\n"
                    "print([p.message for s in sizes for p in check_recipe(RecipeSpec(model='mlp', image_size=s))],"
                    " 'torch' in sys.modules, 'torchvision' in sys.modules)")
    assert out == "[] False False"
    [problem] = check_recipe(RecipeSpec(model="resnet9000"))
    assert "or mlp, the built-in two-layer perceptron" in problem.message
    assert [p.field for p in check_recipe(RecipeSpec(model="mlp", image_size=0))] == ["image_size"]


@pytest.mark.slow
def test_the_rank_builds_mlp_without_torchvision():
    out = _in_child("import sys\n"
                    "from ddpstudio.rank.models import build_model\n"
                    "net = build_model('mlp', 10, 8)\n"
                    "print(sum(p.numel() for p in net.parameters()), 'torchvision' in sys.modules)")
    assert out == f"{3 * 8 * 8 * 64 + 64 + 64 * 10 + 10} False"  # two layers: 3x8x8 -> 64 -> 10


@pytest.mark.parametrize("size", [1, 8, 33])
def test_mlp_maps_a_batch_of_images_to_one_score_per_class(size):
    import torch

    from ddpstudio.rank.models import build_model

    assert build_model("mlp", 7, size)(torch.zeros(5, 3, size, size)).shape == (5, 7)
