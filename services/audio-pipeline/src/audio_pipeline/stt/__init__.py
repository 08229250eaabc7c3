"""Speech to text: the interface every backend implements, and the factory.

faster-whisper (the default) runs the bundled Whisper base model on CPU; whisperx is the
production GPU path and is imported only when chosen.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from audio_pipeline.audio import AudioClip

if TYPE_CHECKING:
    from audio_pipeline.config import Settings

Region = tuple[float, float]


@dataclass(frozen=True, slots=True)
class Word:
    text: str
    start: float  # seconds from the start of the clip
    end: float
    probability: float


@dataclass(frozen=True, slots=True)
class SttSegment:
    text: str
    start: float  # seconds from the start of the clip
    end: float
    words: tuple[Word, ...]
    language: str | None


@runtime_checkable
class SpeechToText(Protocol):
    name: str

    def load(self) -> None:
        """Load the model now (otherwise the first transcribe does). Idempotent."""
        ...

    def transcribe(self, clip: AudioClip, regions: list[Region] | None = None) -> list[SttSegment]:
        """Segments with word timings, in clip time. With `regions` (VAD speech regions in
        seconds) only those spans are decoded; an empty list means no speech."""
        ...


def normalize_regions(regions: list[Region], duration_s: float) -> list[Region]:
    """Regions clamped to the clip, sorted, overlaps merged, empty ones dropped."""
    spans = sorted(
        (max(0.0, float(s)), min(duration_s, float(e)))
        for s, e in regions
        if min(duration_s, float(e)) > max(0.0, float(s))
    )
    merged: list[Region] = []
    for s, e in spans:
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((s, e))
    return merged


def create_stt(settings: Settings) -> SpeechToText:
    """The configured backend, not yet loaded (call `load()` at startup)."""
    if settings.stt_backend == "whisperx":
        from audio_pipeline.stt.whisperx_backend import WhisperXStt

        return WhisperXStt(
            model=settings.whisperx_model,
            device=settings.stt_device,
            compute_type=settings.stt_compute_type,
            language=settings.stt_language,
            models_dir=settings.models_dir,
        )
    from audio_pipeline.stt.faster_whisper_backend import FasterWhisperStt

    return FasterWhisperStt(
        models_dir=settings.models_dir,
        language=settings.stt_language,
        device=settings.stt_device,
        compute_type=settings.stt_compute_type,
        threads=settings.stt_threads,
        temperature_fallback=settings.stt_temperature_fallback,
    )


__all__ = [
    "Region",
    "SpeechToText",
    "SttSegment",
    "Word",
    "create_stt",
    "normalize_regions",
]
