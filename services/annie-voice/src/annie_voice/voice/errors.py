"""The voice pipeline's configuration error."""

from __future__ import annotations


class VoiceBackendError(RuntimeError):
    """A configured voice backend cannot run here (a package or a GPU is missing, a model file
    is absent); the message names the setting that chose it."""
