"""How ranks find each other: FileStore paths and ``file://`` URLs, TCP ports and ``tcp://`` URLs.

Pure functions over ``core.platform``, and the claim of a fixed store path
(``claim``), which also uses the identity test of ``core.process.proctable``.
"""
