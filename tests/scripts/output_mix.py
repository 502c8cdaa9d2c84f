"""Prints a fixed mix of what user scripts print (no torch): plain lines, loss lines the scraper reads,
near misses it must not read, evaluation lines, tqdm-style ``\\r`` redraws on stderr, a ``\\r\\n`` line,
blank lines and a last line without a newline. Its events, history and CLI text are pinned
(tests/test_output_pin.py)."""

import sys
import time

out, err = sys.stdout, sys.stderr
# stderr first, whole, then stdout: the launcher reads a rank's stderr before its stdout in each pass and
# scrapes both into one step count, so this order gives the same steps however the passes fall.
x = 2.5
for bar in range(6):
    for done in range(1, 4):  # a progress bar redrawn with \r, then finished with a newline
        err.write(f"\r{done * 33:3d}%|#   | {done}/3 [00:01<00:01, 9.9it/s, loss={x * done + bar:.4f}]")
        err.flush()
    err.write("\n")
err.write("a warning on stderr\n")
err.flush()
time.sleep(0.5)
out.write("starting: naïve → ok, 東京\n\n   \n")
for line in ("lossless compression 3.0", "gloss 0.5", "floss: 0.7", "my.loss 0.2", "loss", "loss: abc",
             "Loss: 1,234.5", "step 3 loss=0.5", "iter 7 train_loss 0.31", "{'loss': 0.53, 'learning_rate': 0.001}",
             "step 9 loss tensor(0.5321, grad_fn=<AddBackward0>)", "Test: [ 10/196] Loss 1.2e+00 (1.3e+00)",
             "val_loss 0.9", "Test set: Average loss: 0.4, Accuracy: 10/10 (100%)", "validation loss 0.8",
             "step 11 loss nan", "step 12 LOSS inf", "it 13 Loss -0.5", "[ 14/500] loss .25", "step 14 loss 0.25",
             "loß 0.1", "loſs 0.3"):
    out.write(line + "\n")
out.flush()
x = 2.5
for i in range(15, 315):
    x *= 0.99
    out.write(f"step {i} loss {x:.4f}\n")
    if i % 50 == 0:
        out.flush()
out.write("windows line\r\n")
out.write("done, no newline")
out.flush()
