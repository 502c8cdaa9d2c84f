"""The free-text adapter: loss values scraped from progress lines of scripts that know nothing of us.

Only for scripts that do not use ``ddpstudio.report``; everything else speaks
the protocol. Understands, among others, the PyTorch ImageNet example's
``Loss 6.8416e+00 (6.8416e+00)``, ``loss: 0.53``, ``loss=0.5``,
``train_loss 0.31``, ``tensor(0.5321, grad_fn=...)``, ``Loss: 1,234.5`` and
Hugging Face's ``{'loss': 0.53, 'learning_rate': ...}`` (Transformers 5 quotes the
numbers: ``{'loss': '0.53', ...}``). Validation lines
(ImageNet's ``Test: [..] Loss``, MNIST's ``Test set: Average loss:``,
``val_loss``, ``eval_loss``, ``validation loss``) are evaluations, not
training steps. A line that gives a held-out loss after a training one is
both a step and an evaluation (``Epoch 3: train_loss=0.52, val_loss=0.61``),
or, where it names a step, an evaluation alone (nanoGPT's ``step 20: train
loss 4.44, val loss 4.43``, whose train loss is an estimate). A progress
bar's postfix (Lightning's ``train_loss=..., val_loss=...``) shows the last
evaluation on every update: an evaluation only where that value changes. A
step number is taken from ``step 12``, ``iter 7``, ``it 7`` or a tqdm bar's
``10/500 [``; otherwise (e.g. ``[ 10/500]``, which restarts every epoch) loss
lines are numbered in order.

An evaluation printed batch by batch (``Test: [ 3/10] ... Loss 0.69 (0.68)``:
ImageNet's example, timm, torchvision's references) is one evaluation: its
value is the running average in brackets, and the pass's last line gives it
(:class:`LossScraper` holds it until the pass is over).
"""

from __future__ import annotations

import math
import re
from typing import NamedTuple

_PLAIN = r"[-+]?(?:\d{1,3}(?:,\d{3})+(?:\.\d*)?|\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf"
_VALUE = rf"(?:tensor\(\s*)?(?P<value>{_PLAIN})"
_LOSS = re.compile(
    rf"(?<![\w.])(?P<prefix>(?:train|training|val|valid|validation|test|eval|dev)[_ ])?loss\b"
    rf"['\"]?\s*[:=]?\s*['\"]?{_VALUE}",  # 'loss': '0.53': Transformers 5 quotes its numbers
    re.IGNORECASE)
# A line that is about held-out data, wherever it says so (ImageNet's "Test: [ 10/196] ... Loss 1.2").
_EVAL_LINE = re.compile(r"^\W*(?:test|val|valid|validation|eval|evaluation)\b|\btest set\b|\bvalidation\b",
                        re.IGNORECASE)
# Readings are tuples (NamedTuple), not frozen dataclasses, which are slower to make: one per loss line.
# Cheap first looks (issue 20: the launcher reads hundreds of lines a second per rank). Each is a substring
# that every match of the full pattern contains, searched with the same case rules (re.IGNORECASE, so
# "loſs" stays a loss line), so a line they miss can never match: the same matches, fewer tries. On a
# line without "loss", _LOSS's look-behind at every position costs about 8 times _LOSS_HINT.
_LOSS_HINT = re.compile("loss", re.IGNORECASE)
_EVAL_HINT = re.compile("test|val", re.IGNORECASE)  # "eval", "evaluation" and "validation" contain "val"
# Every held-out loss _LOSS matches contains one of these ("eval_loss" contains "val_loss"): "device" alone does not
# send a line through _LOSS again.
_HELD_OUT_HINT = re.compile("(?:val|valid|validation|test|dev)[_ ]loss", re.IGNORECASE)
_TRAINING = ("", "train", "training")
# Transformers' Trainer ends with {'train_runtime': ..., 'train_loss': '0.8733', ...}: the whole run's mean, no step.
_RUN_SUMMARY = "train_runtime"
# The running average an AverageMeter prints after the value: "Loss 0.691 ( 0.684)", "loss: 5.0000 (3.0000)".
_AVERAGE = re.compile(rf"\s*\(\s*(?P<average>{_PLAIN})\s*\)", re.IGNORECASE)
_STEP = re.compile(r"(?:\bstep|\biter(?:ation)?|\bit)\s*[:=#]?\s*(?P<step>\d+)"
                   r"|\|\s*(?P<bar>\d+)/\d+\s*\["  # a tqdm bar: " 10/500 [00:01<..."
                   r"|\[\s*(?P<batch>\d+)\s*/\s*\d+\s*\]", re.IGNORECASE)


class Reading(NamedTuple):
    """A loss found in one line: training or evaluation, the step the line named (if any), and for a line of an
    evaluation printed batch by batch its batch number (``[ 3/10]``)."""

    loss: float
    step: int | None = None
    eval: bool = False
    batch: int | None = None
    held_out: float | None = None  # a training line's held-out loss too ("Epoch 3: train_loss=0.52, val_loss=0.61")
    bar: bool = False  # a progress bar's line: a held-out loss in its postfix is the last evaluation's, on every update


def parse_loss(line: str) -> Reading | None:
    """The loss a progress line reports, or None."""
    match = _LOSS.search(line) if _LOSS_HINT.search(line) else None
    if not match or _RUN_SUMMARY in line:
        return None
    try:
        loss = float(match.group("value").replace(",", ""))
    except ValueError:
        return None
    prefix = (match.group("prefix") or "").strip(" _").lower()
    step_match = _STEP.search(line)
    held_out = None
    bar = step_match is not None and step_match.group("bar") is not None
    if prefix in _TRAINING and _HELD_OUT_HINT.search(line, match.end()) is not None:
        later = _held_out(line, match.end())
        if later is not None and not bar and step_match is not None and step_match.group("step"):
            # "step 20: train loss 4.4400, val loss 4.4305" (nanoGPT): an evaluation at a step the iterations
            # count; its train loss is an estimate over evaluation batches, not a step
            match, prefix, loss = later
        elif later is not None:
            held_out = later[2]  # "Epoch 3: train_loss=0.52, val_loss=0.61" (Keras' "- val_loss: 0.61"): both
    is_eval = prefix not in _TRAINING or (
        prefix == "" and _EVAL_HINT.search(line) is not None and _EVAL_LINE.search(line) is not None)
    step = batch = None
    if step_match and (step_match.group("step") or step_match.group("bar")):
        step = int(step_match.group("step") or step_match.group("bar"))
    elif step_match and is_eval:
        batch = int(step_match.group("batch"))
    if is_eval and (average := _AVERAGE.match(line, match.end())) is not None:
        try:
            loss = float(average.group("average").replace(",", ""))  # the pass so far, not this batch alone
        except ValueError:
            pass
    return Reading(loss, step, is_eval, batch, held_out, bar)


def _held_out(line: str, start: int) -> tuple[re.Match, str, float] | None:
    """The first held-out loss after ``start``: its match, prefix and value."""
    for later in _LOSS.finditer(line, start):
        prefix = (later.group("prefix") or "").strip(" _").lower()
        if prefix not in _TRAINING:
            try:
                return later, prefix, float(later.group("value").replace(",", ""))
            except ValueError:
                return None
    return None


def _finite(value: float) -> float:
    return value if math.isfinite(value) else float("nan")


class Scraped(NamedTuple):
    """What a line adds to the run: a training step or an evaluation at the current step; ``at``: where the line
    that gave it sits in the rank's output, ``(stream, offset)``, when the reader knows (core/launch/tail.py)."""

    step: int
    loss: float
    eval: bool = False
    at: tuple[str, int] | None = None


class LossScraper:
    """Per-rank state: turns loss lines into steps that only move forward; evaluations keep the step.

    An evaluation printed batch by batch is held while its pass goes on (each line's running average replaces
    the last) and given once: at the next training line, when a batch number goes back (the next pass), when a
    line reports a whole evaluation (which then stands for the pass), or at :meth:`flush` (the run's end)."""

    def __init__(self) -> None:
        self.step = 0
        self._named: int | None = None  # the step the last training line named
        self._postfix: float | None = None  # the held-out loss a progress bar showed last
        self._pass: tuple[int, Scraped] | None = None  # an evaluation pass going on: (its last batch, its value)

    def feed(self, line: str, at: tuple[str, int] | None = None) -> list[Scraped]:
        found = parse_loss(line)
        if found is None:
            return []
        loss = found.loss if math.isfinite(found.loss) else float("nan")
        if found.eval and found.batch is None:
            self._pass = None  # a whole evaluation's line: the batches printed before it were its progress
            return [Scraped(self.step, loss, eval=True, at=at)]
        if found.eval:
            done = self.flush() if self._pass is not None and found.batch <= self._pass[0] else []
            self._pass = (found.batch, Scraped(self.step, loss, eval=True, at=at))
            return done
        if found.step is not None and (found.step == self._named or (found.bar and found.step == 0)):
            # the same step again (a progress bar redrawn), or a bar at 0/N (a new epoch's, showing the last
            # step's loss): counted once, but an evaluation that ended meanwhile shows in a bar's postfix
            return self._postfix_changed(found, at)
        done = self.flush()
        self._named = found.step
        self.step = found.step if found.step is not None and found.step > self.step else self.step + 1
        if found.bar:
            return [*done, Scraped(self.step, loss), *self._postfix_changed(found, at)]
        if found.held_out is not None:  # the same line's evaluation, at the step it closes
            return [*done, Scraped(self.step, loss), Scraped(self.step, _finite(found.held_out), eval=True, at=at)]
        return [*done, Scraped(self.step, loss)]

    def _postfix_changed(self, found: Reading, at: tuple[str, int] | None) -> list[Scraped]:
        """A progress bar's held-out loss that differs from the one it showed before: an evaluation has just ended
        (Lightning's ``val_loss=...`` after its validation), at the step the bar is on."""
        if not found.bar or found.held_out is None or found.held_out == self._postfix:
            return []
        self._postfix = found.held_out
        return [Scraped(self.step, _finite(found.held_out), eval=True, at=at)]

    def flush(self) -> list[Scraped]:
        """The evaluation pass still held, if any (its last line's running average)."""
        held, self._pass = self._pass, None
        return [held[1]] if held is not None else []
