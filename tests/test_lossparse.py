import math

import pytest

from ddpstudio.core.launch.lossparse import LossScraper, parse_loss


@pytest.mark.parametrize("line, loss", [
    ("Epoch: [0][ 10/500]\tTime  0.412 ( 0.5)\tLoss 6.8416e+00 (6.8416e+00)\tAcc@1   0.00", 6.8416),
    ("loss: 0.53", 0.53),
    ("step 3 loss=0.5 lr=0.1", 0.5),
    ("INFO train_loss 0.31", 0.31),
    ("Loss: 1.25E-03", 0.00125),
    ("iter 7, loss .75", 0.75),
])
def test_loss_lines_are_read(line, loss):
    found = parse_loss(line)
    assert found is not None and found[0] == pytest.approx(loss)


@pytest.mark.parametrize("line", ["val_loss 0.3", "no loss here", "lossy 3", "Loss (n/a)", ""])
def test_other_lines_are_not(line):
    assert parse_loss(line) is None


def test_scraper_steps_only_move_forward():
    s = LossScraper()
    assert s.feed("Epoch: [0][ 0/2] Loss 2.0 (2.0)") == (1, 2.0)
    assert s.feed("Epoch: [0][ 1/2] Loss 1.5 (1.7)") == (2, 1.5)
    assert s.feed("Epoch: [1][ 0/2] Loss 1.0 (1.0)") == (3, 1.0)  # the batch index restarts; the step does not
    assert s.feed("step 10 loss=0.5") == (10, 0.5)
    assert s.feed("step 4 loss=0.4") == (11, 0.4)
    step, loss = s.feed("loss: nan")
    assert step == 12 and math.isnan(loss)
    assert s.feed("nothing") is None
