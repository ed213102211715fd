"""honestyd: watches what AI agents write and scores, verifiably, how honest each one is."""

__version__ = "0.1.0"
