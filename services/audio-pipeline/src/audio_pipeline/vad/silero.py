"""Embedded voice activity: Silero VAD v6 (ONNX) as bundled in the faster-whisper wheel,
run through faster-whisper's own wrapper. The model file's sha256 is checked before first use.
"""

from __future__ import annotations

import threading

from audio_pipeline.audio import SAMPLE_RATE, AudioClip
from audio_pipeline.bundled import silero_vad_path
from her_os_shared.logging import get_logger

log = get_logger(__name__)


class SileroVad:
    name = "silero"

    def __init__(
        self,
        *,
        threshold: float = 0.5,
        min_speech_ms: int = 250,
        min_silence_ms: int = 500,
        speech_pad_ms: int = 200,
    ) -> None:
        # Tighter than faster-whisper's transcription defaults (2 s silence, 400 ms pad):
        # regions also feed diarization, where a half-second pause often is a turn change.
        self._threshold = threshold
        self._min_speech_ms = min_speech_ms
        self._min_silence_ms = min_silence_ms
        self._speech_pad_ms = speech_pad_ms
        self._loaded = False
        self._lock = threading.Lock()

    def load(self) -> None:
        with self._lock:
            if self._loaded:
                return
            path = silero_vad_path()
            from faster_whisper.vad import get_vad_model

            # faster-whisper loads (and caches) the model from this same path.
            get_vad_model()
            self._loaded = True
            log.info("vad_loaded", backend=self.name, model=str(path))

    def regions(self, clip: AudioClip) -> list[tuple[float, float]]:
        self.load()
        if clip.samples.size == 0:
            return []
        from faster_whisper.vad import VadOptions, get_speech_timestamps

        options = VadOptions(
            threshold=self._threshold,
            min_speech_duration_ms=self._min_speech_ms,
            min_silence_duration_ms=self._min_silence_ms,
            speech_pad_ms=self._speech_pad_ms,
        )
        # The ONNX session is safe to share across threads; the recurrent state is per call.
        spans = get_speech_timestamps(clip.samples, options, sampling_rate=SAMPLE_RATE)
        return [(s["start"] / SAMPLE_RATE, s["end"] / SAMPLE_RATE) for s in spans]
