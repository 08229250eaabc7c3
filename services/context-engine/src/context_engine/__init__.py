"""her-os context engine: the shared brain (port 8100)."""

__version__ = "0.1.0"
