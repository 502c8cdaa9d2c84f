"""A script whose rank 1 dies of a real segmentation fault (no Python error, no traceback), as a rank
does in pytorch #186535; rank 0 waits to be stopped."""

import ctypes
import os
import time

if os.environ.get("RANK") == "1":
    ctypes.string_at(0)  # reads address 0: SIGSEGV on Linux, 0xC0000005 on Windows
time.sleep(120)
