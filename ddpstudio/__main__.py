try:
    from ddpstudio.cli.main import main
except KeyboardInterrupt:  # Ctrl+C while the command line is still being imported
    import sys

    print("\nddpstudio: stopped (Ctrl+C)", file=sys.stderr)
    raise SystemExit(3) from None

raise SystemExit(main())
