"""How ranks find each other: FileStore paths and ``file://`` URLs, TCP ports and ``tcp://`` URLs.

Pure functions over ``core.platform``; imports nothing else of ours.
"""
