"""The hint for a script that imports a package DDP Studio's Python does not have, with the command that
installs it there.

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

import re
import sys
from pathlib import Path

from ddpstudio.bootstrap.layout import Layout
from ddpstudio.core import cmdline
from ddpstudio.core.launch.commands import console_python
from ddpstudio.core.platform import Platform, current
from ddpstudio.gui.hints import Hint

# CPython's words (importlib._bootstrap): "No module named 'timm'", "No module named 'timm.models'".
MISSING = re.compile(r"no module named '([A-Za-z_]\w*)[\w.]*'", re.IGNORECASE)
# Import names whose PyPI project is named otherwise.
PROJECTS = {"cv2": "opencv-python", "PIL": "pillow", "sklearn": "scikit-learn", "skimage": "scikit-image",
            "yaml": "pyyaml", "bs4": "beautifulsoup4", "Crypto": "pycryptodome",
            "attr": "attrs"}


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


def missing_module_hint(*texts: str, prefix: str = sys.prefix, executable: str = sys.executable,
                        platform: Platform | None = None, chosen: str | None = None) -> Hint | None:
    """The hint for a failure whose text names a missing module, or None. ``chosen``: the Python the user chose
    for the script (core/userpython.py), where the package belongs instead of DDP Studio's."""
    name = missing_module(*texts)
    if name is None:
        return None
    project = PROJECTS.get(name, name)
    if chosen:
        line = cmdline.pip_install_line(chosen, project, platform)
        return Hint("missing_module", f"The script needs {name}, which the Python you chose does not have",
                    f"The ranks run in the Python you chose for the script ({chosen}), which does not have "
                    f"{name}. If {name} is a package from PyPI, install it there from a terminal:\n{line}\n(the "
                    f"PyPI name may differ from the import name; in a conda environment, conda install works "
                    f"too). If {name} is your own code, keep it in the script's folder or its package.")
    return Hint("missing_module", f"The script needs {name}, which DDP Studio's Python does not have",
                f"The ranks run in DDP Studio's Python environment ({prefix}), which has PyTorch, torchvision "
                f"and the app but not {name}. If {name} is a package from PyPI, install it there from a "
                f"terminal:\n{install_command(project, prefix, executable, platform)}\n(the PyPI name may "
                f"differ from the import name), and install it again after a Repair or an update, which "
                f"rebuild that environment. If {name} is your own code, keep it in the script's folder or "
                f"its package.")
