"""Voice activity: where in a clip someone is speaking.

silero (the default) runs the Silero VAD model bundled in the faster-whisper wheel on CPU;
pyannote is the production backend and is imported only when chosen.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from audio_pipeline.audio import AudioClip

if TYPE_CHECKING:
    from audio_pipeline.config import Settings


@runtime_checkable
class VoiceActivity(Protocol):
    name: str

    def load(self) -> None:
        """Load the model now (otherwise the first call does). Idempotent."""
        ...

    def regions(self, clip: AudioClip) -> list[tuple[float, float]]:
        """Speech regions as sorted, non-overlapping (start, end) seconds in clip time."""
        ...


def create_vad(settings: Settings) -> VoiceActivity:
    """The configured backend, not yet loaded (call `load()` at startup)."""
    if settings.vad_backend == "pyannote":
        from audio_pipeline.vad.pyannote import PyannoteVad

        token = settings.pyannote_token.get_secret_value() if settings.pyannote_token else None
        return PyannoteVad(token=token, device=settings.stt_device)
    from audio_pipeline.vad.silero import SileroVad

    return SileroVad()


__all__ = ["VoiceActivity", "create_vad"]
