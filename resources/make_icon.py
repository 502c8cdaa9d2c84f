"""Draws DDP Studio's icon: four linked GPU blocks on a rounded square.

Run ``python resources/make_icon.py`` to regenerate ``ddpstudio.png`` (256 px),
``ddpstudio.ico`` (16, 32, 48 and 256 px) and ``installer-welcome.bmp`` (the
164 x 314 picture on the installer's Welcome and Finish pages). The design is ours, drawn with
Pillow; each size is rendered from a 4x supersampled canvas so the small
sizes stay crisp instead of being shrunk from the 256 px image.
"""

from __future__ import annotations

import sys
from pathlib import Path

from PIL import Image, ImageDraw

HERE = Path(__file__).resolve().parent
ICO_SIZES = (16, 32, 48, 256)
PNG_SIZE = 256
SUPERSAMPLE = 4

BACKGROUND_TOP = (32, 58, 96)
BACKGROUND_BOTTOM = (18, 32, 56)
BLOCK = (118, 185, 0)  # the green of a lit GPU board
BLOCK_EDGE = (214, 245, 160)
LINK = (236, 242, 250)


def _gradient(size: int) -> Image.Image:
    """A vertical two-colour gradient, the icon's background."""
    column = Image.new("RGB", (1, size))
    for y in range(size):
        t = y / max(size - 1, 1)
        column.putpixel((0, y), tuple(round(a + (b - a) * t) for a, b in zip(BACKGROUND_TOP, BACKGROUND_BOTTOM)))
    return column.resize((size, size))


def render(size: int) -> Image.Image:
    """The icon at ``size`` x ``size`` pixels, RGBA."""
    big = size * SUPERSAMPLE
    unit = big / 64  # the design is laid out on a 64 x 64 grid

    mask = Image.new("L", (big, big), 0)
    ImageDraw.Draw(mask).rounded_rectangle((0, 0, big - 1, big - 1), radius=round(13 * unit), fill=255)
    canvas = Image.new("RGBA", (big, big), (0, 0, 0, 0))
    canvas.paste(_gradient(big), (0, 0), mask)
    draw = ImageDraw.Draw(canvas)

    # Four blocks in a 2 x 2 grid; small icons get fewer details.
    blocks = [(12, 12), (36, 12), (12, 36), (36, 36)]
    w, h = 16, 16
    centres = [((x + w / 2) * unit, (y + h / 2) * unit) for x, y in blocks]
    link_width = max(round(3 * unit), 1)
    # A ring of links: the all-reduce ring of a DDP run.
    for a, b in [(0, 1), (1, 3), (3, 2), (2, 0)]:
        draw.line([centres[a], centres[b]], fill=LINK, width=link_width)
    for x, y in blocks:
        box = (x * unit, y * unit, (x + w) * unit, (y + h) * unit)
        draw.rounded_rectangle(box, radius=round(3 * unit), fill=BLOCK, outline=BLOCK_EDGE, width=max(round(1.2 * unit), 1))
        if size >= 32:
            # Three contact pins on the lower edge: reads as a board, not a square.
            for i in range(3):
                px = (x + 4 + i * 4) * unit
                draw.rectangle((px, (y + h) * unit, px + 2 * unit, (y + h + 2.5) * unit), fill=BLOCK_EDGE)
    return canvas.resize((size, size), Image.LANCZOS)


def welcome_bitmap() -> Image.Image:
    """The installer's side picture: the background gradient with the icon near the top."""
    width, height = 164, 314
    column = _gradient(height).resize((width, height))
    icon = render(112)
    column.paste(icon, ((width - 112) // 2, 40), icon)
    return column.convert("RGB")  # NSIS wants a plain 24-bit BMP


def main(out_dir: Path = HERE) -> int:
    """Writes the PNG, the ICO and the installer's BMP into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    render(PNG_SIZE).save(out_dir / "ddpstudio.png")
    images = [render(s) for s in ICO_SIZES]
    # Pillow writes one ICO entry per size; the pre-rendered images are used
    # as they are instead of being shrunk from the largest one.
    images[-1].save(out_dir / "ddpstudio.ico", sizes=[(s, s) for s in ICO_SIZES], append_images=images[:-1])
    welcome_bitmap().save(out_dir / "installer-welcome.bmp")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE))
