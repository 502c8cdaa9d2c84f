"""``python -m ddpstudio.bootstrap``: see :mod:`ddpstudio.bootstrap.cli`."""

from ddpstudio.bootstrap.cli import main

raise SystemExit(main())
