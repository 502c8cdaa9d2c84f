"""A script that never imports torch: prints which heavy modules its interpreter loaded, and its argv."""

import sys

heavy = sorted(m for m in ("torch", "ddpstudio", "numpy") if m in sys.modules)
print(f"heavy modules: {heavy}; sitecustomize: {getattr(sys.modules.get('sitecustomize'), '__file__', None)}",
      flush=True)
print(f"rank loss: 1.0 argv {sys.argv[1:]}", flush=True)
