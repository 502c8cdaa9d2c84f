import math
import re

import pytest

from ddpstudio.core.launch.lossparse import LossScraper, Scraped, parse_loss
from ddpstudio.core.launch.tail import LineTail


@pytest.mark.parametrize("line, loss", [
    ("Epoch: [0][ 10/500]\tTime  0.412 ( 0.5)\tLoss 6.8416e+00 (6.8416e+00)\tAcc@1   0.00", 6.8416),
    ("loss: 0.53", 0.53),
    ("step 3 loss=0.5 lr=0.1", 0.5),
    ("INFO train_loss 0.31", 0.31),
    ("Loss: 1.25E-03", 0.00125),
    ("iter 7, loss .75", 0.75),
    ("loss 5.3e-01", 0.53),
    ("Loss: 1,234.5", 1234.5),
    ("loss 12,345,678", 12345678.0),
    ("step 4 loss tensor(0.5321, device='cuda:0', grad_fn=<NllLossBackward0>)", 0.5321),
    ("loss=tensor(2.25)", 2.25),
    ("{'loss': 0.53, 'grad_norm': 1.2, 'learning_rate': 5e-05, 'epoch': 0.1}", 0.53),
    ('{"loss": 0.25, "step": 10}', 0.25),
    ("{'loss': '0.6931', 'grad_norm': '1.2', 'learning_rate': '5e-05', 'epoch': '0.5'}", 0.6931),  # Transformers 5
    ("loss: 0.53, acc: 0.91", 0.53),  # a comma between fields is not a thousands separator
])
def test_training_loss_lines_are_read(line, loss):
    found = parse_loss(line)
    assert found is not None and not found.eval and found.loss == pytest.approx(loss)


@pytest.mark.parametrize("line, loss", [
    # The running average in brackets: the pass so far, not this batch alone (AverageMeter's "value (average)").
    ("Test: [ 10/196]\tTime  0.210 ( 0.3)\tLoss 1.2345e+00 (1.3000e+00)\tAcc@1  71.88 ( 70.00)", 1.3),
    ("Test set: Average loss: 0.0345, Accuracy: 9890/10000 (99%)", 0.0345),
    ("val_loss 0.3", 0.3),
    ("epoch 2 val loss: 0.41", 0.41),
    ("validation loss = 0.5", 0.5),
    ("{'eval_loss': 0.4123, 'eval_runtime': 3.2, 'epoch': 1.0}", 0.4123),
    ("{'eval_loss': '0.4123', 'eval_runtime': '3.2', 'epoch': '1'}", 0.4123),
    ("test_loss=264590.0", 264590.0),
    # A training loss and a held-out one on a line that names its step: the evaluation (helper trial 2026-12-08,
    # nanoGPT: its "train loss" there is estimated over eval batches; read as a step it took iter 0's place)
    ("step 20: train loss 4.4400, val loss 4.4305", 4.4305),
    ("iter 500 | train loss 2.10 | val loss 2.31", 2.31),
])
def test_validation_lines_are_evaluations_not_steps(line, loss):
    found = parse_loss(line)
    assert found is not None and found.eval and found.loss == pytest.approx(loss)


@pytest.mark.parametrize("line", ["no loss here", "lossy 3", "Loss (n/a)", "", "closs 3", "loss 'n/a'",
                                  # Transformers' Trainer's end-of-training summary: the run's mean, no step (helper
                                  # trial 2026-12-08, --no-rank-helper: it became steps 31 and 32 and the final loss)
                                  "{'train_runtime': '3.1', 'train_samples_per_second': '154.6', "
                                  "'train_steps_per_second': '9.663', 'train_loss': '0.8733', 'epoch': '0.9375'}"])
def test_other_lines_are_not(line):
    assert parse_loss(line) is None


def test_scraper_steps_only_move_forward():
    s = LossScraper()
    assert s.feed("Epoch: [0][ 0/2] Loss 2.0 (2.0)") == [Scraped(1, 2.0)]
    assert s.feed("Epoch: [0][ 1/2] Loss 1.5 (1.7)") == [Scraped(2, 1.5)]  # training: this batch's own loss
    assert s.feed("Epoch: [1][ 0/2] Loss 1.0 (1.0)") == [Scraped(3, 1.0)]  # the batch index restarts; the step not
    assert s.feed("step 10 loss=0.5") == [Scraped(10, 0.5)]
    assert s.feed("step 4 loss=0.4") == [Scraped(11, 0.4)]
    [found] = s.feed("loss: nan")
    assert found.step == 12 and math.isnan(found.loss)
    assert s.feed("nothing") == [] and s.flush() == []


@pytest.mark.parametrize("line, loss, held_out", [
    ("Epoch 3: train_loss=0.52, val_loss=0.61", 0.52, 0.61),
    ("313/313 - 2s - loss: 0.5312 - accuracy: 0.81 - val_loss: 0.6120 - val_accuracy: 0.78", 0.5312, 0.612),  # Keras
    ("epoch 3 | loss 1.25 | dev loss 1.5", 1.25, 1.5),
])
def test_a_summary_line_with_a_held_out_loss_is_a_step_and_an_evaluation(line, loss, held_out):
    found = parse_loss(line)
    assert found is not None and not found.eval and found.loss == pytest.approx(loss)
    assert found.held_out == pytest.approx(held_out) and not found.bar
    s = LossScraper()
    s.feed("step 6 loss 0.9")
    expected = [Scraped(found.step or 7, loss)] + ([Scraped(found.step or 7, held_out, eval=True)] if held_out else [])
    assert s.feed(line) == expected


def test_a_progress_bars_held_out_loss_is_an_evaluation_where_it_changes():
    """Lightning's TQDM bar with ``self.log("val_loss", prog_bar=True)``: every update after the first validation
    shows ``val_loss=...``, the last evaluation's. Lines as Lightning 2.6.6 drew them (a real run, 3 epochs of 8
    steps, one validation after each): one evaluation per validation, at the epoch's last step."""
    bar = "Epoch {e}: {pct:>3}%|##########| {n}/8 [00:00<00:00, 359.45it/s, train_loss={t}{v}]"
    lines = []
    for epoch, val in enumerate(("0.107", "0.00426", "0.000193")):
        before = "" if epoch == 0 else f", val_loss={('0.107', '0.00426')[epoch - 1]}"
        lines.append(bar.format(e=epoch, pct=0, n=0, t="0.160", v=before))
        for n in range(1, 9):
            lines += [bar.format(e=epoch, pct=n * 12, n=n, t=f"0.{n}1", v=before),
                      bar.format(e=epoch, pct=n * 12, n=n, t=f"0.{n}2", v=before)]
        lines += [bar.format(e=epoch, pct=100, n=8, t="0.82", v=f", val_loss={val}")] * 2
    s = LossScraper()
    found = [f for line in lines for f in s.feed(line)]
    assert [(f.step, f.loss) for f in found if f.eval] == [(8, 0.107), (16, 0.00426), (24, 0.000193)]
    assert [f.step for f in found if not f.eval] == list(range(1, 25))  # a step per bar count, none at 0/8
    assert parse_loss(lines[-1]).bar and not parse_loss("Epoch 3: train_loss=0.5, val_loss=0.6").bar


def test_nanogpts_evaluation_line_keeps_its_iterations_steps():
    """nanoGPT prints ``step N: train loss X, val loss Y`` before iteration N trains. Read as a training step, it
    took step N's place and the ``iter N`` line after it was dropped as the same step again (helper trial,
    --no-rank-helper: steps 1, 21 and 41 were the estimates)."""
    s = LossScraper()
    assert s.feed("step 0: train loss 4.4647, val loss 4.4331") == [Scraped(0, 4.4331, eval=True)]
    assert s.feed("iter 0: loss 4.4685, time 12.50ms, mfu -100.00%") == [Scraped(1, 4.4685)]
    assert s.feed("iter 1: loss 4.4420, time 11.90ms, mfu -100.00%") == [Scraped(2, 4.442)]


def test_an_evaluation_keeps_the_training_step_and_a_redrawn_bar_counts_once():
    s = LossScraper()
    assert s.feed(" 10%|█         | 10/100 [00:01<00:09, 9.9it/s, loss=0.9]") == [Scraped(10, 0.9)]
    assert s.feed(" 10%|█         | 10/100 [00:01<00:09, 9.8it/s, loss=0.9]") == []  # same step, redrawn
    assert s.feed(" 11%|█         | 11/100 [00:01<00:09, 9.9it/s, loss=0.8]") == [Scraped(11, 0.8)]
    assert s.feed("Test set: Average loss: 0.7") == [Scraped(11, 0.7, eval=True)]
    assert s.feed(" 12%|█▏        | 12/100 [00:01<00:09, 9.9it/s, loss=0.6]") == [Scraped(12, 0.6)]


def test_an_evaluation_printed_batch_by_batch_is_one_evaluation_at_its_running_average():
    """timm's validate() and ImageNet's example print each evaluation batch with the average so far in brackets;
    the pass is one evaluation, given when it is over, at the average of its last line."""
    s = LossScraper()
    assert s.feed("Train: 0 [   3/4 (100%)]  Loss: 0.584 (0.655)  Time: 0.2s") == [Scraped(1, 0.584)]
    assert s.feed("Test: [   0/1]  Time: 0.1 (0.1)  Loss:  0.6910 (0.6910)  Acc@1: 75.0000 (75.0000)") == []
    assert s.feed("Test: [   1/1]  Time: 0.1 (0.1)  Loss:  0.6770 (0.6840)  Acc@1: 100.0000 (87.5000)") == []
    assert s.feed(" * Acc@1 87.500 Acc@5 100.000") == []  # ImageNet's summary line: no loss
    # The next training line ends the pass: the evaluation first, at the step it was made, then the step.
    assert s.feed("Train: 1 [   0/4 (  0%)]  Loss: 0.512 (0.512)") == [Scraped(1, 0.684, eval=True), Scraped(2, 0.512)]
    # A pass whose batch number goes back is a new pass: the one before is given.
    s.feed("Test: [ 10/196]  Loss 1.0 (1.2)")
    assert s.feed("Test: [  0/196]  Loss 0.9 (0.9)") == [Scraped(2, 1.2, eval=True)]
    # A line that reports a whole evaluation stands for the pass printed before it.
    assert s.feed("Validation loss = 0.95") == [Scraped(2, 0.95, eval=True)]
    assert s.flush() == []
    # The output's end ends a pass too (the launcher flushes each rank's scraper when the run ends).
    s.feed("Test:  [0/2]  eta: 0:00:01  loss: 5.0000 (3.0000)  acc1: 50.0 (50.0)")  # torchvision's MetricLogger
    assert s.flush() == [Scraped(2, 3.0, eval=True)] and s.flush() == []


def test_progress_bar_redraws_are_read_at_every_update(tmp_path):
    path = tmp_path / "rank0.err.log"
    tail = LineTail(path)
    with open(path, "wb") as fh:
        fh.write(b"starting\n\r  1%| 1/100 [loss=0.9]\r  2%| 2/100 [loss=0.8]\r  3%| 3/10")
        fh.flush()
        assert tail.read_segments() == [("starting", False), ("  1%| 1/100 [loss=0.9]", True),
                                        ("  2%| 2/100 [loss=0.8]", True)]
        fh.write(b"0 [loss=0.7]\r")  # the \r may be half of a \r\n: held back
        fh.flush()
        assert tail.read_segments() == []
        fh.write(b"\nWindows line\r\nlast")
        fh.flush()
        assert tail.read_segments() == [("  3%| 3/100 [loss=0.7]", False), ("Windows line", False)]
    assert tail.read_segments(final=True) == [("last", False)]
    # Plain reading (events files, logs) is unchanged: whole lines only.
    plain = LineTail(path)
    assert plain.read_lines(final=True)[-2:] == ["Windows line", "last"]
    tail.close()
    plain.close()


@pytest.mark.parametrize("line", [
    # near misses of "loss" and of the evaluation words, in every case the patterns fold
    "lossless 3.0", "gloss 0.5", "floss: 0.7", "my.loss 0.2", "los 0.5", "l o s s 0.5", "lo ss: 1", "LOSS 2.5",
    "lOsS=0.1", "lo\u017fs 0.3", "LO\u017fS 0.3", "lo\u00dfs 0.1", "lo\u00df 0.1", "\u0142oss 0.2", "loss\u00a00.4",
    "test loss 0.5", "TEST: [1/2] Loss 0.5", "te\u017ft: [1/2] Loss 0.5", "contest loss 0.2", "latest loss 0.3",
    "interval loss 0.4", "value loss 0.2", "eval loss 0.2", "evaluation loss 0.6", "Validation Loss 0.7",
    "validated loss 0.3", "VAL_LOSS 0.9", "retest set loss 0.1", "test sets loss 0.1", "dev_loss 0.2",
    "step 3 val 4 loss 0.5", "it 3 loss 0.2", "iteration 9 loss 0.1", "| 3/9 [ loss 0.3", "[ 4/9] loss 0.4",
    "\u200bloss 0.5", "\u0130t 5 loss 0.5", "", " ", "loss", "val", "test",
    "train loss 0.4, val loss 0.3", "step 4 train loss 0.4, val loss 0.3", "| 3/9 [ loss 0.4 val_loss 0.2",
    "loss 0.4 dev_loss 0.2", "loss 0.4 DE\u0056 loss 0.2", "loss 0.4 vaL loss 0.2",
    "loss 0.4, device loss 0.1", "loss 0.4 te\u017ft_loss 0.2", "loss 0.4 retrain loss 0.2", "loss 0.5 val loss n/a",
])
def test_the_first_looks_keep_exactly_the_full_patterns_matches(line, monkeypatch):
    from ddpstudio.core.launch import lossparse

    found = parse_loss(line)
    # Without the cheap first looks (lossparse._LOSS_HINT, _EVAL_HINT): the full patterns on every line.
    monkeypatch.setattr(lossparse, "_LOSS_HINT", re.compile(""))
    monkeypatch.setattr(lossparse, "_EVAL_HINT", re.compile(""))
    monkeypatch.setattr(lossparse, "_HELD_OUT_HINT", re.compile(""))
    assert found == parse_loss(line)


def test_each_segment_read_says_where_its_line_starts_in_the_file(tmp_path):
    """Byte offsets, across reads, a multi-byte character, a line completed later and a progress bar's updates
    (each at its line's start): where an evaluation line sits against the helper's step marks."""
    path = tmp_path / "rank0.out.log"
    tail = LineTail(path)
    with open(path, "wb") as fh:
        fh.write("a\u00e9\nbb\ncc".encode())
        fh.flush()
        assert tail.read_segments() == [("a\u00e9", False), ("bb", False)] and tail.starts == [0, 4]
        fh.write(b"c\n10%\r20%\r30")
        fh.flush()
        assert tail.read_segments() == [("ccc", False), ("10%", True), ("20%", True)] and tail.starts == [7, 11, 11]
        fh.write(b"%\ndone\n")
        fh.flush()
        assert tail.read_segments() == [("30%", False), ("done", False)] and tail.starts == [19, 23]
    data = path.read_bytes()
    assert data[19:23] == b"30%\n" and data[23:] == b"done\n"
    assert tail.read_segments(final=True) == [] and tail.starts == []
    tail.close()


def test_an_evaluation_is_placed_by_the_step_marks_before_its_line():
    from ddpstudio.core.launch.scriptsteps import step_at

    marks = [(1, 0, 0), (2, 40, 0), (3, 80, 12), (4, 120, 12)]  # (step, stdout size, stderr size) at each step
    assert step_at(marks, ("stdout", 85)) == 3  # printed after step 3 closed, before step 4 did
    assert step_at(marks, ("stdout", 120)) == 4
    assert step_at(marks, ("stderr", 12)) == 4 and step_at(marks, ("stderr", 5)) == 2  # printed after step 4 closed
    assert step_at([(1, 10, None), (2, 20, None)], ("stdout", 3)) == 0  # before the first step
    assert step_at([(64, 10, 0), (128, 20, 0)], ("stdout", 3)) is None  # older than the marks kept
    assert step_at([(1, None, None)], ("stdout", 3)) is None and step_at(marks, None) is None
    assert step_at([], ("stdout", 3)) is None
    scraper = LossScraper()
    assert scraper.feed("val_loss 0.5", ("stderr", 12)) == [Scraped(0, 0.5, eval=True, at=("stderr", 12))]
