"""The CLI shows the launcher's stream a read at a time: the same text, one flush per read (issue 20).

A script that prints every step gives the launcher three events per line; a flush per event made the CLI
pay a write for each line the ranks print, on the cores the ranks train on."""

from __future__ import annotations

import io

from ddpstudio.cli.progress import ProgressView
from ddpstudio.core import protocol


class Flushes(io.StringIO):
    """A real text stream that counts its flushes."""

    def __init__(self) -> None:
        super().__init__()
        self.flushes = 0

    def flush(self) -> None:
        self.flushes += 1
        super().flush()


def _stream() -> list[protocol.Event]:
    events = [protocol.make_event(protocol.RUN_STARTED, run_id="r", world_size=2, backend="gloo", device="cpu",
                                  store="file", run_dir="/runs/r", kind="script", max_steps=None)]
    for step in range(1, 41):
        for rank in (0, 1):
            events.append(protocol.make_event(protocol.LOG, rank=rank, stream="stdout", line=f"step {step} loss 0.5"))
            events.append(protocol.make_event(protocol.STEP, rank=rank, step=step, loss=0.5, source="scraped"))
        events.append(protocol.make_event(protocol.GLOBAL_STEP, step=step, loss=0.5, ranks=2, source="script"))
    return events


def test_a_batch_is_the_same_text_with_one_flush():
    events = _stream()
    one_by_one, batched = Flushes(), Flushes()
    view = ProgressView(out=one_by_one, tty=False)
    for event in events:
        view.feed(event)
    ProgressView(out=batched, tty=False).feed_all(events)
    assert batched.getvalue() == one_by_one.getvalue()
    assert one_by_one.flushes > 40 and batched.flushes == 1


def test_the_types_a_view_leaves_unread_are_those_it_has_no_handler_for():
    view = ProgressView(out=io.StringIO(), tty=False)
    assert protocol.STEP in view.unread  # one per line a script prints; the view shows the global steps
    for kind in (protocol.LOG, protocol.GLOBAL_STEP, protocol.RUN_FINISHED, protocol.RUN_STARTED, protocol.EVAL):
        assert kind not in view.unread
    assert all(not hasattr(view, f"_handle_{kind}") for kind in view.unread)
