"""Data found bad while the recipe trains: one message that names the file and the fix, not a traceback.

A corrupt, empty or unreadable image is only found when a DataLoader reaches
it. :func:`image_loader` (ImageFolder's loader) turns that into a
:class:`DataProblem`; the recipe reports a DataProblem as a stated error
(``error`` event with ``stated``: the launcher's root cause is its message,
and the traceback stays in the rank's log).
"""

from __future__ import annotations

import os


class DataProblem(Exception):
    """A problem with the user's data, stated in full: what is wrong with which file, and what to do."""


def stated_message(exc: BaseException) -> str:
    """The DataProblem's own sentence, also when a DataLoader worker raised it: torch re-raises it in the
    rank as ``DataProblem(msg)`` with msg "Caught DataProblem in DataLoader worker process N.\\nOriginal
    Traceback ...", the worker's traceback ending in the original line (torch/_utils.py
    ``ExceptionWrapper.reraise``)."""
    text = str(exc).strip()
    marker = f"{DataProblem.__name__}: "
    at = text.rfind(marker)
    return text[at + len(marker):].strip() if at >= 0 else text


def image_loader(path: str):
    """torchvision's default loader (``pil_loader``: open, then ``convert("RGB")``), naming a bad file."""
    from PIL import Image

    try:
        with open(path, "rb") as fh:
            image = Image.open(fh)
            return image.convert("RGB")
    except OSError as exc:  # PIL's UnidentifiedImageError and "image file is truncated" are OSErrors too
        raise DataProblem(bad_image_message(path, exc)) from None


def bad_image_message(path: str, exc: OSError) -> str:
    try:
        empty = os.path.getsize(path) == 0
    except OSError:
        empty = False
    if empty:
        why = "an empty file, 0 bytes"
    elif isinstance(exc, PermissionError):
        why = "permission denied"
    else:
        why = str(exc).split(" <_io.")[0] or type(exc).__name__  # PIL names the file object: we name the path
    return (f"the image {path} cannot be read ({why}): remove it from the data folder or replace it with a good "
            "copy, then start the run again")


def cifar_message(root: str, exc: Exception) -> str:
    """torchvision's CIFAR10 says "Dataset not found or corrupted. You can use download=True", which our
    user cannot pass (torchvision/datasets/cifar.py ``_check_integrity``, an MD5 of each batch file)."""
    return (f"CIFAR-10 in {root} is damaged or incomplete (torchvision's checksum check failed: {exc}); "
            "unpack cifar-10-python.tar.gz there again")
