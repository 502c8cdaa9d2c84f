"""The ``ddpstudio`` command line: a front end over the same core the window uses."""
