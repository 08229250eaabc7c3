"""her-os Annie: the voice companion (port 7860)."""

__version__ = "0.1.0"
