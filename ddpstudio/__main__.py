from ddpstudio.cli.main import main

raise SystemExit(main())
