"""A module a script imports that its Python does not have: its name in the failure's words, and the command
that installs it there (the hint itself: core/hints.py ``missing_module_hint``).

The ranks run in the environment DDP Studio runs in: torch, torchvision and
the app. A script that also needs timm or transformers stops at once with
"ModuleNotFoundError: No module named 'timm'", and a user who never opened a
terminal does not know which Python that is. The hint names it and gives the
line: the bundled uv's ``pip install`` in an installed app (its environment
has no pip: bootstrap/layout.py), ``python -m pip install`` elsewhere. A
Repair or an update rebuilds that environment, so the hint says to install
again after one.
"""

from __future__ import annotations

import difflib
import re
import sys
from pathlib import Path

from ddpstudio.bootstrap.layout import Layout
from ddpstudio.core import cmdline
from ddpstudio.core.launch.commands import console_python
from ddpstudio.core.platform import Platform, current

# CPython's words (importlib._bootstrap): "No module named 'timm'", "No module named 'timm.models'".
MISSING = re.compile(r"no module named '([A-Za-z_]\w*)[\w.]*'", re.IGNORECASE)
# Import names whose PyPI project is named otherwise.
PROJECTS = {"cv2": "opencv-python", "PIL": "pillow", "sklearn": "scikit-learn", "skimage": "scikit-image",
            "yaml": "pyyaml", "bs4": "beautifulsoup4", "Crypto": "pycryptodome",
            "attr": "attrs"}


# Import names of the packages training scripts use most: a missing name one letter or two away from one of them
# is a misspelling, whose PyPI namesake (if any) is another project, not the fix.
KNOWN = ("torch", "torchvision", "torchaudio", "lightning", "pytorch_lightning", "transformers", "timm",
         "accelerate", "datasets", "tokenizers", "huggingface_hub", "safetensors", "deepspeed", "ignite",
         "torchmetrics", "numpy", "scipy", "pandas", "matplotlib", "tqdm", "wandb", "tensorboard", "einops",
         "omegaconf", "hydra", "fire", "jsonargparse", "albumentations", "ultralytics", "sentencepiece", "PIL",
         "cv2", "sklearn", "yaml")


def misspelled(name: str) -> str | None:
    """The well-known package ``name`` is probably a misspelling of (``lightnin``: ``lightning``), or None."""
    if name in KNOWN or name in PROJECTS or len(name) < 5:  # "tim", "cv": too short to tell
        return None
    close = difflib.get_close_matches(name, KNOWN, n=1, cutoff=0.8)
    if not close or name in (close[0] + "s", close[0].removesuffix("s")):
        return None  # "dataset", "transformer": a script's own module as often as a slip
    return close[0]


def missing_module(*texts: str) -> str | None:
    """The top-level module a failure's text says is missing, or None."""
    found = MISSING.search("\n".join(t for t in texts if t))
    return found.group(1) if found else None


def install_command(project: str, prefix: str = sys.prefix, executable: str = sys.executable,
                    platform: Platform | None = None) -> str:
    """The console line that installs ``project`` into the environment at ``prefix``."""
    platform = platform or current()
    env = Path(prefix)
    layout = Layout(env.parent, platform)
    if env.name == layout.env.name and layout.uv.is_file():  # an installed app: its bundled uv, no pip
        return cmdline.shell_line([str(layout.uv), "pip", "install", "--python", str(layout.python(env)), project],
                                  platform)
    return cmdline.pip_install_line(console_python(executable, platform), project, platform)
