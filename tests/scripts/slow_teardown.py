"""A script whose interpreter teardown never ends (an object whose destructor blocks when the
interpreter clears this module at exit), like a rank tearing down a Gloo group whose peer is gone.
It trains "forever", lets Ctrl+C go uncaught, and has an atexit handler that says it ran."""

import atexit
import time


class Group:
    def __del__(self):
        time.sleep(3600)


group = Group()
atexit.register(lambda: print("atexit handler ran", flush=True))
step = 0
while True:
    step += 1
    print(f"step {step} loss: {1.0 / step:.5f}", flush=True)
    time.sleep(0.05)
