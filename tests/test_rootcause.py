"""The failing rank's own words: the whole exception message, from real tracebacks."""

import subprocess
import sys

from ddpstudio.core.launch.rootcause import StderrTail


def stderr_of(code: str) -> list[str]:
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 1
    return res.stderr.splitlines()


def tail_of(lines, prefix="") -> StderrTail:
    tail = StderrTail()
    for line in lines:
        tail.add(prefix + line)
    return tail


def test_a_multi_line_message_is_kept_whole():
    lines = stderr_of("raise RuntimeError('Unable to locate sufficient 2 gpus\\nto run this example. Exiting.')")
    expected = "RuntimeError: Unable to locate sufficient 2 gpus\nto run this example. Exiting."
    assert tail_of(lines).message() == expected
    # torch.distributed's "[rank1]: " prefix and native log lines after the traceback change nothing.
    noisy = tail_of(lines + ["[W1124 00:12:01.123 ProcessGroupGloo.cpp:123] Warning: destroy"], prefix="[rank1]: ")
    assert noisy.message() == expected


def test_the_last_exception_of_a_chain_is_the_message():
    lines = stderr_of("try:\n    1 / 0\nexcept ZeroDivisionError:\n    raise ValueError('bad batch')")
    assert "During handling of the above exception" in "\n".join(lines)
    assert tail_of(lines).message() == "ValueError: bad batch"


def test_without_a_traceback_the_last_line_speaks():
    assert tail_of(["starting", "Killed: out of memory", ""]).message() == "Killed: out of memory"
    assert StderrTail().message() == ""
    # torchrun's failure summary (ChildFailedError's table) ends in a rule: the last line that says something
    summary = ["worker.py FAILED", "-" * 60, "Root Cause (first observed failure):", "[0]:",
               "  exitcode  : 1 (pid: 4242)", "  traceback : To enable traceback see: "
               "https://pytorch.org/docs/stable/elastic/errors.html", "=" * 60]
    assert tail_of(summary).message() == ("traceback : To enable traceback see: "
                                          "https://pytorch.org/docs/stable/elastic/errors.html")
