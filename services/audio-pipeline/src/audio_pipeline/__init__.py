"""her-os audio pipeline: speech to memory-ready transcripts (port 9100)."""

__version__ = "0.1.0"
