"""The setup progress window: a headline, a bar, the log, and what to do next.

tkinter (stdlib; uv's Pythons include it) because the bootstrap runs before
Qt is installed, and only ``ddpstudio/gui`` may import Qt anyway. The setup
runs on a worker thread that only puts events on a queue; the Tk thread
polls the queue with ``after`` and draws :class:`ProgressModel`. Closing the
window while setup runs asks first, then stops uv.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
import tkinter as tk
from tkinter import messagebox, ttk
from tkinter.scrolledtext import ScrolledText
from typing import Callable

from ddpstudio.bootstrap import network
from ddpstudio.bootstrap.environment import Options, attempt
from ddpstudio.bootstrap.events import Event, Sink
from ddpstudio.bootstrap.failure import Problem
from ddpstudio.bootstrap.layout import Layout
from ddpstudio.bootstrap.process import Running
from ddpstudio.bootstrap.progress import ProgressModel

POLL_MS = 100
Attempt = Callable[[Options, Sink, Running], object]


class ProgressWindow:
    """One window for the whole setup, retries included."""

    def __init__(
        self,
        options: Options,
        sink: Callable[[Sink], Sink] = lambda s: s,
        start_app: Callable[[], None] | None = None,
        run_attempt: Attempt = attempt,
        icon: str | None = None,
        auto_start: bool = False,
    ) -> None:
        self.options = options
        self.wrap_sink = sink  # e.g. logfile.tee: every event also goes to bootstrap.log
        self.start_app = start_app
        self.auto_start = auto_start  # the user clicked the app's shortcut: open it when ready
        self.run_attempt = run_attempt
        self.model = ProgressModel(start_offered=start_app is not None)
        self.events: queue.Queue[Event] = queue.Queue()
        self.running = Running()
        self.worker: threading.Thread | None = None
        self.started_at = time.monotonic()
        self.shown_log = 0
        self.exit_code: int | None = None
        self.poll_id: str | None = None

        self.root = tk.Tk()
        self.root.title("DDP Studio setup")
        self.root.geometry("760x500")
        self.root.minsize(560, 380)
        if icon:
            try:
                self.root.iconbitmap(icon)
            except tk.TclError:
                pass  # not an .ico this Tk can read (Linux): keep the default
        self.root.protocol("WM_DELETE_WINDOW", self._close)
        self._build()

    def _build(self) -> None:
        frame = ttk.Frame(self.root, padding=14)
        frame.pack(fill="both", expand=True)
        self.headline = ttk.Label(frame, font=("TkDefaultFont", 12, "bold"))
        self.headline.pack(anchor="w")
        self.message = ttk.Label(frame, wraplength=720, justify="left")
        self.message.pack(anchor="w", fill="x", pady=(6, 8))
        self.bar = ttk.Progressbar(frame, mode="determinate", maximum=100)
        self.bar.pack(fill="x")
        self.elapsed = ttk.Label(frame, foreground="#555")
        self.elapsed.pack(anchor="e", pady=(2, 6))
        self.log = ScrolledText(frame, height=14, wrap="word", state="disabled", font=("TkFixedFont", 9))
        self.log.pack(fill="both", expand=True)
        buttons = ttk.Frame(frame)
        buttons.pack(fill="x", pady=(10, 0))
        self.close_button = ttk.Button(buttons, text="Close", command=self._close)
        self.close_button.pack(side="right")
        self.start_button = ttk.Button(buttons, text="Start DDP Studio", command=self._start_app)
        self.retry_button = ttk.Button(buttons, text="Retry", command=self._retry)
        self.cpu_button = ttk.Button(buttons, text="Use the CPU build instead", command=self._use_cpu)
        self.network_button = ttk.Button(buttons, text="Network settings...", command=self._network_dialog)
        self.buttons = buttons

    # --- the worker -------------------------------------------------------
    def _begin(self) -> None:
        self.started_at = time.monotonic()
        self.running = Running()
        sink = self.wrap_sink(self.events.put)
        self.worker = threading.Thread(
            target=self.run_attempt, args=(self.options, sink, self.running), name="ddpstudio-bootstrap", daemon=True
        )
        self.worker.start()

    def _poll(self) -> None:
        while True:
            try:
                self.model.apply(self.events.get_nowait())
            except queue.Empty:
                break
        self.poll_id = None
        self._render()
        if self.exit_code is None:
            self.poll_id = self.root.after(POLL_MS, self._poll)

    # --- drawing ----------------------------------------------------------
    def _render(self) -> None:
        model = self.model
        if model.state == "done" and self.auto_start and self.start_app is not None and self.exit_code is None:
            self._start_app()
            return
        self.headline.configure(text=model.headline)
        self.message.configure(text=model.message, foreground="#a00000" if model.state == "failed" else "")
        self.bar.configure(value=model.percent)
        if model.state == "running":
            seconds = int(time.monotonic() - self.started_at)
            self.elapsed.configure(text=f"{seconds // 60}:{seconds % 60:02d} elapsed")
        if len(model.log) > self.shown_log:
            self.log.configure(state="normal")
            self.log.insert("end", "\n".join(model.log[self.shown_log :]) + "\n")
            self.log.configure(state="disabled")
            self.log.see("end")
            self.shown_log = len(model.log)
        for button, wanted in (
            (self.start_button, model.can_start_app and self.start_app is not None),
            (self.retry_button, model.can_retry),
            (self.cpu_button, model.can_use_cpu),
            (self.network_button, model.can_set_network),
        ):
            if wanted and not button.winfo_ismapped():
                button.pack(side="right", padx=(0, 8))
            elif not wanted and button.winfo_ismapped():
                button.pack_forget()

    # --- buttons ----------------------------------------------------------
    def _retry(self) -> None:
        self.model.restart()
        self._begin()

    def _use_cpu(self) -> None:
        self.options = dataclasses.replace(self.options, force_cpu=True)
        self._retry()

    def save_network(self, settings: network.NetworkSettings) -> None:
        """Saves the settings (every later uv call uses them) and tries again."""
        network.save(Layout(self.options.root, self.options.platform).network_file, settings)
        self._retry()

    def _network_dialog(self) -> None:
        """Proxy, the system's certificates and a Python download mirror: what corporate networks need."""
        current = network.load(Layout(self.options.root, self.options.platform).network_file)
        dialog = tk.Toplevel(self.root)
        dialog.title("Network settings")
        dialog.transient(self.root)
        frame = ttk.Frame(dialog, padding=12)
        frame.pack(fill="both", expand=True)
        ttk.Label(frame, text=network.help_text(), wraplength=520, justify="left").grid(row=0, column=0, columnspan=2, sticky="w")
        proxy, mirror = tk.StringVar(value=current.proxy), tk.StringVar(value=current.python_mirror)
        certs = tk.BooleanVar(value=current.system_certs)
        ttk.Label(frame, text="Proxy (http://host:port):").grid(row=1, column=0, sticky="w", pady=(10, 2))
        ttk.Entry(frame, textvariable=proxy, width=48).grid(row=1, column=1, sticky="we", pady=(10, 2))
        ttk.Checkbutton(frame, text="Use the system's certificates (for proxies that inspect HTTPS)", variable=certs).grid(
            row=2, column=0, columnspan=2, sticky="w", pady=2)
        ttk.Label(frame, text="Python download mirror:").grid(row=3, column=0, sticky="w", pady=2)
        ttk.Entry(frame, textvariable=mirror, width=48).grid(row=3, column=1, sticky="we", pady=2)

        def save() -> None:
            dialog.destroy()
            self.save_network(network.NetworkSettings(proxy.get(), certs.get(), mirror.get()))

        row = ttk.Frame(frame)
        row.grid(row=4, column=0, columnspan=2, sticky="e", pady=(12, 0))
        ttk.Button(row, text="Cancel", command=dialog.destroy).pack(side="right")
        ttk.Button(row, text="Save and retry", command=save).pack(side="right", padx=(0, 8))

    def _start_app(self) -> None:
        assert self.start_app is not None
        self.start_app()
        self.exit_code = 0
        self.shut()

    def _close(self) -> None:
        if self.model.state == "running":
            if not messagebox.askyesno(
                "Stop setup?",
                "DDP Studio is still being set up. Stop now? It finishes the next time you start DDP Studio.",
                parent=self.root,
            ):
                return
            self.running.cancel()
        self.shut()

    def shut(self) -> None:
        """Closes the window (pending polls first, so Tk does not call into a dead window)."""
        if self.poll_id is not None:
            self.root.after_cancel(self.poll_id)
            self.poll_id = None
        self.root.destroy()

    def run(self) -> int:
        """Shows the window until the user closes it; 0 when setup succeeded."""
        self._begin()
        self.poll_id = self.root.after(POLL_MS, self._poll)
        self.root.mainloop()
        if self.worker is not None:
            self.worker.join(timeout=30)
        if self.exit_code is not None:
            return self.exit_code
        if self.model.state == "done":
            return 0
        if self.model.failure is not None:
            return self.model.failure.exit_code
        return Problem.CANCELLED.exit_code


def available() -> bool:
    """Whether a window can be shown (a display, a Tk that starts)."""
    try:
        probe = tk.Tk()
    except tk.TclError:
        return False
    probe.destroy()
    return True
