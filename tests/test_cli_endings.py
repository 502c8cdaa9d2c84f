"""How `ddpstudio run` ends a script's run on a terminal: its last step, a traceback once, what to do.

Found running timm's and torchvision's train.py through the CLI (2026-12-07): a script's steps have no total,
so a run of 4 steps showed only step 1 (every 5th step is printed); each rank's traceback began with the
script's own log line naming the rank, so the root cause's lines were printed again under the one on screen."""

from __future__ import annotations

import io

from ddpstudio.cli.progress import ProgressView
from ddpstudio.core import protocol


def _view() -> tuple[ProgressView, io.StringIO]:
    out = io.StringIO()
    view = ProgressView(out=out, tty=False, show_output="0")
    view.feed(protocol.make_event(protocol.RUN_STARTED, run_id="r", world_size=2, backend="gloo", device="cpu",
                                  store="tcp", run_dir="/runs/r", kind="script", script_style="env"))
    return view, out


def test_a_scripts_last_step_is_shown_when_the_run_ends():
    view, out = _view()
    for step, loss in ((1, 0.70), (2, 0.69), (3, 0.65), (4, 0.58)):
        view.feed(protocol.make_event(protocol.GLOBAL_STEP, step=step, loss=loss))
    view.feed(protocol.make_event(protocol.RUN_FINISHED, state=protocol.FINISHED, duration_s=13.2, world_size=2))
    lines = out.getvalue().splitlines()
    assert [line for line in lines if line.startswith("step")] == ["step     1  loss 0.7000", "step     4  loss 0.5800"]
    assert lines[-1] == "run finished after 13.2 s (world size 2)"
    # A last step that was printed already is not printed twice.
    view, out = _view()
    for step in range(1, 6):
        view.feed(protocol.make_event(protocol.GLOBAL_STEP, step=step, loss=1.0 / step))
    view.feed(protocol.make_event(protocol.RUN_FINISHED, state=protocol.FINISHED, duration_s=2.0, world_size=2))
    assert [line for line in out.getvalue().splitlines() if line.startswith("step")] == [
        "step     1  loss 1.0000", "step     5  loss 0.2000"]


def test_a_traceback_on_screen_is_not_printed_again_when_the_ranks_own_log_line_differs():
    view, out = _view()
    frames = ["Traceback (most recent call last):", '  File "train.py", line 1028, in main',
              "    model = NativeDDP(model, device_ids=[device])",
              "ValueError: DistributedDataParallel device_ids and output_device arguments only work with GPUs"]
    for line in ["Training in distributed mode with 2 processes. Process 0, total 2, device cpu.", *frames]:
        view.feed(protocol.make_event(protocol.LOG, rank=0, stream="stderr", line=line))
    cause = {"rank": 1, "exit_code": 1, "message": frames[-1],
             "traceback_tail": ["Training in distributed mode with 2 processes. Process 1, total 2, device cpu.",
                                *frames]}
    view.feed(protocol.make_event(protocol.RUN_FINISHED, state=protocol.FAILED, duration_s=7.6, world_size=2,
                                  root_cause=cause, summary=f"rank 1 failed first (exit code 1): {frames[-1]}",
                                  run_dir=None))
    text = out.getvalue()
    assert "    (the same traceback is printed above, from rank 0)" in text
    assert text.count("line 1028, in main") == 1


def test_a_spawn_style_scripts_traceback_on_screen_is_not_printed_again():
    """The script's own process's lines are shown under no rank (None); a failure there was printed twice (helper
    trial, an Ignite script asked for NCCL on the CPU in spawn style)."""
    out = io.StringIO()
    view = ProgressView(out=out, tty=False, show_output="0")
    view.feed(protocol.make_event(protocol.RUN_STARTED, run_id="r", world_size=None, backend="gloo", device="cpu",
                                  store="file", run_dir="/runs/r", kind="script", script_style="spawn"))
    frames = ["Traceback (most recent call last):", '  File "main.py", line 81, in <module>',
              "    with idist.Parallel(backend=args.backend, nproc_per_node=2) as parallel:",
              "RuntimeError: Nccl backend is required but no cuda capable devices"]
    for line in frames:
        view.feed(protocol.make_event(protocol.LOG, stream="stderr", line=line))
    cause = {"rank": -1, "exit_code": 1, "message": frames[-1], "traceback_tail": frames}
    view.feed(protocol.make_event(protocol.RUN_FINISHED, state=protocol.FAILED, duration_s=3.1, world_size=None,
                                  root_cause=cause, summary=f"the script failed: {frames[-1]}", run_dir=None))
    text = out.getvalue()
    assert text.count("line 81, in <module>") == 1, text
    assert "    (the same traceback is printed above, from the script's own process)" in text


def test_small_losses_keep_their_significant_digits():
    """A converged Trainer run (helper trial 2026-12-08): "eval after step 1000, loss 0.0001" where Trainer printed
    5.836e-05, and the step lines the same. Four decimals from 0.01 up, four significant digits below."""
    from ddpstudio.cli.progress import eval_line, loss_text

    assert [loss_text(v) for v in (1.38988, 0.0123456, 5.836e-05, 0.0001336, 0.0, -0.5)] == [
        "1.3899", "0.0123", "5.836e-05", "0.0001336", "0.0000", "-0.5000"]
    assert loss_text(float("nan")) == "nan"
    assert eval_line(protocol.make_event(protocol.EVAL, step=1000, loss=5.836e-05)) == \
        "eval after step 1000, loss 5.836e-05"
