"""The hover read-out: the point nearest the mouse, marked, with its curve's name and values.

Nearest in screen pixels (so a steep curve and a flat one are judged alike),
among the curves shown, within ``RADIUS_PX``; nothing when the mouse leaves.
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF

RADIUS_PX = 30.0


class HoverReadout:
    def __init__(self, plot) -> None:
        self.plot = plot
        view = plot.item.getViewBox()
        self.marker = pg.ScatterPlotItem(size=9, pen=pg.mkPen(plot.text), brush=None)
        self.label = pg.TextItem(color=plot.text, anchor=(0, 1), fill=pg.mkBrush(128, 128, 128, 60))
        for item in (self.marker, self.label):
            item.setZValue(1000)
            view.addItem(item, ignoreBounds=True)
        self.hide()
        self.text = ""
        plot.widget.scene().sigMouseMoved.connect(self.on_moved)

    def hide(self) -> None:
        self.marker.setVisible(False)
        self.label.setVisible(False)
        self.text = ""

    def on_moved(self, scene_pos: QPointF) -> None:
        view = self.plot.item.getViewBox()
        if not view.sceneBoundingRect().contains(scene_pos):
            self.hide()
            return
        found = self.nearest(scene_pos)
        if found is None:
            self.hide()
            return
        name, x, y, shown_y = found
        self.text = f"{name}: {self.plot.item.getAxis('bottom').labelText} {x:g}, {y:.4g}"
        self.marker.setData([x], [shown_y])
        self.label.setText(self.text)
        self.label.setPos(x, shown_y)
        self.marker.setVisible(True)
        self.label.setVisible(True)

    def nearest(self, scene_pos: QPointF) -> tuple[str, float, float, float] | None:
        """(curve name, x, y, y in view coordinates) of the nearest visible point, or None."""
        view = self.plot.item.getViewBox()
        log_y = self.plot.item.ctrl.logYCheck.isChecked()
        mouse = view.mapSceneToView(scene_pos)
        # View units per pixel, to measure distance in pixels.
        px = view.viewPixelSize()
        best, best_d = None, RADIUS_PX
        for curve in self.plot.curves.values():
            if not curve.isVisible():
                continue
            x, y = curve.getData()  # what is drawn: smoothed, clipped, in view coordinates (log10 under log y)
            if x is None or not len(x):
                continue
            d = np.hypot((x - mouse.x()) / px[0], (y - mouse.y()) / px[1])
            d[~np.isfinite(d)] = np.inf
            i = int(np.argmin(d))
            if d[i] < best_d:
                shown = float(y[i])
                best_d, best = d[i], (curve.name() or "", float(x[i]), 10 ** shown if log_y else shown, shown)
        if best is not None and not math.isfinite(best[2]):
            return None
        return best
