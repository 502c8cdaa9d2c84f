"""Code that runs inside a training rank.

Imports neither Qt nor the GUI; ``emit`` needs only the standard library so
that ``ddpstudio.report`` is cheap to import from a user's script.
"""
