"""The row above the plots: smoothing slider, log scale, reset view, export."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QMenu, QPushButton, QSlider, QWidget

from ddpstudio.gui.plot_export import export_plot

DEFAULT_SMOOTHING = 0.6  # TensorBoard's default weight


class PlotToolbar(QWidget):
    def __init__(self, plots) -> None:
        super().__init__(plots)
        self.plots = plots
        self.smoothing = QSlider(Qt.Orientation.Horizontal)
        self.smoothing.setRange(0, 99)
        self.smoothing.setAccessibleName("Smoothing")
        self.smoothing.setToolTip("Exponential moving average of loss and throughput, as in TensorBoard; "
                                  "the raw curve stays faint behind. 0 = off.")
        self.smoothing.setMaximumWidth(160)
        self.smoothing_value = QLabel()
        self.log_y = QCheckBox("Log scale (loss)")
        self.reset = QPushButton("Reset view")
        self.reset.setToolTip("Fit every plot to its data again (after zooming or panning)")
        self.export = QPushButton("Export…")
        self.export.setToolTip("Save a plot as PNG or SVG, or its data as CSV (also: right-click a plot, Export)")
        menu = QMenu(self.export)
        for plot in plots.all:
            menu.addAction(plot.name, lambda plot=plot: self.export_one(plot))
        self.export.setMenu(menu)
        label = QLabel("Smoothing:")
        label.setBuddy(self.smoothing)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(4, 0, 4, 0)
        for widget in (label, self.smoothing, self.smoothing_value, self.log_y):
            layout.addWidget(widget)
        layout.addStretch(1)
        layout.addWidget(self.reset)
        layout.addWidget(self.export)
        self.smoothing.valueChanged.connect(self._on_smoothing)
        self.log_y.toggled.connect(plots.set_log_y)
        self.reset.clicked.connect(plots.reset_view)
        self.smoothing.setValue(int(DEFAULT_SMOOTHING * 100))
        self._on_smoothing(self.smoothing.value())

    def _on_smoothing(self, value: int) -> None:
        self.smoothing_value.setText(f"{value / 100:.2f}")
        self.plots.set_smoothing(value / 100)

    def export_one(self, plot) -> Path | None:
        """Ask for a file name (the suffix picks PNG, SVG or CSV) and write it; None if cancelled."""
        dialogs = self.plots.dialogs
        if dialogs is None:
            return None
        path = dialogs.save_file(f"Export the {plot.name} plot (.png, .svg or .csv)",
                                 f"{plot.name.lower().replace(' ', '-')}.png")
        if not path:
            return None
        try:
            return export_plot(plot.item, path)
        except (ValueError, OSError) as exc:
            dialogs.error("Could not export the plot", str(exc))
            return None
