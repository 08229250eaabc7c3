"""The fast path: one clip → transcript segments with speakers, identities and emotions.

VAD finds speech and the diarizer splits it into speaker turns (the segmented diarizer with
the segmentation VAD does both in one pass); STT decodes only the speech; each word goes to
the main speaker's turn it overlaps most; consecutive words of one speaker (without a long
pause) form a segment, and other speakers' turns inside it are its overlap. Each diarized
voice is then named — an enrolled person, or a session-stable `unknown_N` — and each segment
gets an emotion. Times are shifted by the clip's offset in its session, so segments of
successive clips line up on the session's clock.
The HTTP routes, sessions and sweep build on `transcribe_clip`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from audio_pipeline.audio import SAMPLE_RATE, AudioClip
from audio_pipeline.config import Settings
from audio_pipeline.emotion import SpeechEmotion, create_emotion
from audio_pipeline.speakers import (
    Diarizer,
    SpeakerEmbedder,
    SpeechDiarizer,
    Turn,
    create_diarizer,
    create_embedder,
    exclusive_turns,
    speaker_embeddings,
)
from audio_pipeline.speakers.enrollment import SessionSpeakers, SpeakerIdentity
from audio_pipeline.stt import SpeechToText, Word, create_stt
from audio_pipeline.vad import VoiceActivity, create_vad, pad_regions
from her_os_shared.transcript import MAX_OVERLAPS_PER_SEGMENT, Overlap, Segment

# A pause this long inside one speaker's words starts a new segment.
SEGMENT_PAUSE_S = 1.0
# Overlapped speech shorter than this is not recorded on a segment (a frame or two of the
# segmentation model at a turn change).
MIN_OVERLAP_S = 0.1


@dataclass
class Models:
    """The configured backends; `load()` loads them all (at start-up, off the event loop)."""

    stt: SpeechToText
    vad: VoiceActivity
    diarizer: Diarizer
    embedder: SpeakerEmbedder
    emotion: SpeechEmotion

    # The diarizer finds the speech itself (segmented diarizer with the segmentation VAD): one
    # segmentation pass gives speech and turns, and the VAD serves enrollment alone.
    speech_from_diarizer: bool = False

    @classmethod
    def from_settings(cls, settings: Settings) -> Models:
        # One embedder (settings speaker_embedder) serves both the embedded diarizer and
        # speaker identification, so every voiceprint lives in the enrollment bank's space;
        # one segmentation model serves the segmentation VAD and the segmented diarizer.
        embedder = create_embedder(settings)
        segmentation = None
        if settings.vad_backend == "segmentation" or settings.diarization_backend == "segmented":
            from audio_pipeline.speakers.segmentation import SpeakerSegmentation

            segmentation = SpeakerSegmentation(threads=min(2, settings.stt_threads))
        diarizer = create_diarizer(settings, embedder=embedder, segmentation=segmentation)
        return cls(
            stt=create_stt(settings),
            vad=create_vad(settings, segmentation=segmentation),
            diarizer=diarizer,
            embedder=embedder,
            emotion=create_emotion(settings),
            speech_from_diarizer=settings.vad_backend == "segmentation"
            and isinstance(diarizer, SpeechDiarizer),
        )

    def load(self) -> None:
        self.stt.load()
        self.vad.load()
        self.diarizer.load()
        load = getattr(self.embedder, "load", None)
        if load is not None:
            load()


@dataclass(frozen=True, slots=True)
class ClipResult:
    segments: list[Segment]
    # diarized label (SPEAKER_00…) → who it is (person or unknown_N)
    speakers: dict[str, SpeakerIdentity]
    regions: list[tuple[float, float]]
    timings_s: dict[str, float] = field(default_factory=dict)
    # the diarizer's turns, overlapping where two people talk at once (clip time)
    turns: list[Turn] = field(default_factory=list)


def _turn_of(word: Word, turns: Sequence[Turn]) -> str | None:
    """The speaker of the turn the word overlaps most (or the nearest turn)."""
    best, best_overlap = None, 0.0
    for t in turns:
        overlap = min(word.end, t.end) - max(word.start, t.start)
        if overlap > best_overlap:
            best, best_overlap = t.speaker, overlap
    if best is not None:
        return best
    mid = (word.start + word.end) / 2
    nearest = min(turns, key=lambda t: min(abs(mid - t.start), abs(mid - t.end)), default=None)
    return None if nearest is None else nearest.speaker


def _overlaps(
    speaker: str,
    start: float,
    end: float,
    turns: Sequence[Turn],
    identities: dict[str, SpeakerIdentity],
    offset_s: float,
) -> list[Overlap]:
    """Other speakers' turns inside a segment of `speaker` (their overlapped speech), in
    session time, by who they are; pieces shorter than MIN_OVERLAP_S are noise."""
    pieces: dict[str, list[tuple[float, float]]] = {}
    for t in turns:
        a, b = max(start, t.start), min(end, t.end)
        if t.speaker != speaker and b - a >= MIN_OVERLAP_S:
            pieces.setdefault(t.speaker, []).append((a, b))
    out = [
        Overlap(
            speaker=identities[sp].label if sp in identities else sp,
            start=round(offset_s + a, 3),
            end=round(offset_s + b, 3),
        )
        for sp, found in pieces.items()
        for a, b in found
    ]
    return sorted(out, key=lambda o: (o.start, o.speaker))[:MAX_OVERLAPS_PER_SEGMENT]


def _group(words: Sequence[Word], turns: Sequence[Turn]) -> list[tuple[str, list[Word]]]:
    groups: list[tuple[str, list[Word]]] = []
    for w in words:
        speaker = _turn_of(w, turns) or "SPEAKER_00"
        same = groups and groups[-1][0] == speaker
        if same and w.start - groups[-1][1][-1].end < SEGMENT_PAUSE_S:
            groups[-1][1].append(w)
        else:
            groups.append((speaker, [w]))
    return groups


def transcribe_clip(
    models: Models,
    clip: AudioClip,
    *,
    speakers: SessionSpeakers,
    offset_s: float = 0.0,
    id_prefix: str = "c0",
    ser_all_speakers: bool = True,
) -> ClipResult:
    """Run the fast path on one clip (blocking: call it from a worker thread).

    `ser_all_speakers=False` labels emotion only for enrolled people (the wearer and those
    they named), not for unknown voices around them.
    """
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    if models.speech_from_diarizer:
        found = models.diarizer.diarize_speech(clip)  # type: ignore[attr-defined]
        # STT gets the speech padded as the segmentation VAD pads it (SPEECH_PAD_S).
        regions = pad_regions(found.speech, clip.duration_s)
        turns, exclusive = found.turns, found.exclusive
        timings["vad"] = found.timings_s.get("segmentation", 0.0)
        timings["diarization"] = time.perf_counter() - t0 - timings["vad"]
        if not regions:
            return ClipResult([], {}, [], timings)
    else:
        regions = models.vad.regions(clip)
        timings["vad"] = time.perf_counter() - t0
        if not regions:
            return ClipResult([], {}, [], timings)
        t = time.perf_counter()
        turns = models.diarizer.diarize(clip, regions)
        exclusive = exclusive_turns(turns)
        timings["diarization"] = time.perf_counter() - t
    t = time.perf_counter()
    stt_segments = models.stt.transcribe(clip, regions)
    timings["stt"] = time.perf_counter() - t
    words = [w for s in stt_segments for w in s.words if w.text.strip()]
    language = next((s.language for s in stt_segments if s.language), None)
    t = time.perf_counter()
    # Voiceprints from each speaker's main-speaker time: overlapped frames mix two voices.
    identities = speakers.resolve_many(speaker_embeddings(clip, exclusive, models.embedder))
    timings["speaker_id"] = time.perf_counter() - t

    groups = _group(words, exclusive)
    spans = []
    for speaker, ws in groups:
        start, end = max(0.0, ws[0].start), min(clip.duration_s, max(ws[-1].end, ws[0].start))
        text = " ".join(w.text.strip() for w in ws)
        spans.append((speaker, start, end, text))
    t = time.perf_counter()
    wanted = [
        ser_all_speakers or (sp in identities and identities[sp].person is not None)
        for sp, *_ in spans
    ]
    audio = [
        (clip.slice(start, end).samples, SAMPLE_RATE, text)
        for (_, start, end, text), want in zip(spans, wanted, strict=True)
        if want
    ]
    found = iter(models.emotion.classify_many(audio))
    emotions = [next(found) if want else None for want in wanted]
    timings["emotion"] = time.perf_counter() - t

    segments = [
        Segment(
            segment_id=f"{id_prefix}-{i:03d}",
            speaker=identities[sp].label if sp in identities else sp,
            text=text,
            start=round(offset_s + start, 3),
            end=round(offset_s + end, 3),
            language=language,
            stt_engine=models.stt.name,
            emotion=emotion,
            overlap=_overlaps(sp, start, end, turns, identities, offset_s),
        )
        for i, ((sp, start, end, text), emotion) in enumerate(zip(spans, emotions, strict=True))
        if text
    ]
    timings["total"] = time.perf_counter() - t0
    return ClipResult(segments, identities, regions, timings, turns)
