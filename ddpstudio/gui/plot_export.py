"""Export a plot to PNG, SVG or CSV (the format follows the suffix).

PNG and CSV go through pyqtgraph's exporters (CSV writes the original data of
every curve, not the downsampled points on screen). SVG is drawn with Qt's
QSvgGenerator: pyqtgraph 0.14.0's SVGExporter fails on the closed paths
("... Z") Qt 6.10+ writes for every plot ("not enough values to unpack",
pyqtgraph #3495, #3485).
"""

from __future__ import annotations

from pathlib import Path

import pyqtgraph as pg
import pyqtgraph.exporters  # noqa: F401  (registers the exporters on pg.exporters)

FORMATS = {".png": "ImageExporter", ".svg": "svg", ".csv": "CSVExporter"}
FILTER = "PNG image (*.png);;SVG drawing (*.svg);;CSV data (*.csv)"


def export_plot(plot_item: pg.PlotItem, path: str | Path) -> Path:
    """Write ``plot_item`` to ``path``; raises ValueError for a suffix other than .png/.svg/.csv."""
    path = Path(path)
    name = FORMATS.get(path.suffix.lower())
    if name is None:
        raise ValueError(f"cannot export to {path.name}: use a .png, .svg or .csv file name")
    if name == "svg":
        return _export_svg(plot_item, path)
    exporter = getattr(pg.exporters, name)(plot_item)
    if name == "ImageExporter":
        # Twice the on-screen size: sharp in documents. Integer sizes (pyqtgraph rejects floats here).
        exporter.parameters()["width"] = int(max(640, 2 * plot_item.sceneBoundingRect().width()))
    exporter.export(str(path))
    return path


def _export_svg(plot_item: pg.PlotItem, path: Path) -> Path:
    from PySide6.QtCore import QRectF, QSize
    from PySide6.QtGui import QPainter
    from PySide6.QtSvg import QSvgGenerator

    source = plot_item.sceneBoundingRect()
    generator = QSvgGenerator()
    generator.setFileName(str(path))
    generator.setSize(QSize(int(source.width()), int(source.height())))
    generator.setViewBox(QRectF(0, 0, source.width(), source.height()))
    generator.setTitle(plot_item.titleLabel.text or "plot")
    painter = QPainter(generator)
    try:
        plot_item.scene().render(painter, QRectF(0, 0, source.width(), source.height()), source)
    finally:
        painter.end()
    if not path.is_file():
        raise OSError(f"could not write {path}")
    return path
