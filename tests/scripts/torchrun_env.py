"""An env-style script that prints what its launcher put in its environment, and starts nothing.

``BASE_KEYS`` (a JSON list) names the variables the test itself passed down; every other variable is
the launcher's and is printed as one line ``ENV {json}``. With ``--crash-first`` a first start (a
TORCHELASTIC_RESTART_COUNT of 0) raises from a ``@record`` main, torchrun's error-file decorator, so
the launcher restarts the group; that import costs a torch import, so only that form makes it.
"""

import json
import os
import sys

base = set(json.loads(os.environ.get("BASE_KEYS", "[]")))
# One write per line: under PYTHONUNBUFFERED, print() writes the text and its newline apart, and torchrun's
# workers share one pipe, so two ranks' lines could interleave.
sys.stdout.write("ENV " + json.dumps({k: v for k, v in sorted(os.environ.items()) if k not in base}) + "\n")
sys.stdout.flush()

if "--crash-first" in sys.argv:
    from torch.distributed.elastic.multiprocessing.errors import record

    @record
    def main() -> None:
        if os.environ["TORCHELASTIC_RESTART_COUNT"] == "0":
            raise RuntimeError(f"first start of rank {os.environ['RANK']} fails on purpose")
        print("step 1 loss: 1.0", flush=True)

    main()
