"""Several machines in one run (issue 13): the host, the nodes that join it, and what they agree on.

What lives here: the join code (``joincode``), the facts two nodes compare
before any rank starts (``facts``), the network adapter that routes to the
other machines (``adapter``), the host's TCPStore and the handshake through it
(``store``, ``handshake``), the heartbeats that stop every node when one ends
(``link``), a node's plan (``nodeplan``) and the node launcher
(``launch``: ``python -m ddpstudio.core.nodes.launch``).

What it may import: the shared core ground (``platform``, ``paths``,
``protocol``, ``plan``, ``policy``), ``core.launch`` (the node launcher is a
launcher with a handshake before it and heartbeats around it) and
``core.rendezvous``. Nothing in ``core`` outside this room imports it, and it
never imports the rank side or a front end (tests/test_layers.py). torch is
imported only where a TCPStore is made (``store``), never at module import.
"""
