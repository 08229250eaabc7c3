"""Speech to text: the recognizer interface, its factory, and the Pipecat segmented STT service.

The VAD cuts the user's speech into segments; each is transcribed off the event loop by the
recognizer ANNIE_VOICE_STT_BACKEND chooses, loaded once per process on first use:

- `moonshine` (embedded default; stt_moonshine.py): Moonshine base English, bundled in
  moonshine-cpp (sha256-checked), run by onnxruntime on CPU. Its cost follows the length of
  the speech, so a short question is transcribed in a fraction of Whisper's time (ADR 0015).
- `faster-whisper` (stt_whisper.py): the bundled Whisper base model, int8 on CPU; any language.
- `whisper-gpu` (production; stt_whisper.py): a local CTranslate2 Whisper folder
  (ANNIE_VOICE_WHISPER_MODEL_DIR) on CUDA; without a CUDA device it fails with a message
  naming the setting.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator
from typing import Any

import numpy as np
from pipecat.frames.frames import ErrorFrame, Frame, StartFrame, TranscriptionFrame
from pipecat.services.settings import STTSettings
from pipecat.services.stt_service import SegmentedSTTService
from pipecat.utils.time import time_now_iso8601

from annie_voice.config import Settings
from her_os_shared.logging import get_logger

log = get_logger(__name__)

STT_SAMPLE_RATE = 16000


class SpeechRecognizer(ABC):
    """One speech-to-text model of this process, shared by the voice sessions."""

    backend: str  # the ANNIE_VOICE_STT_BACKEND value

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    @property
    @abstractmethod
    def name(self) -> str:
        """The model, for Pipecat's metrics and logs."""

    @abstractmethod
    def check(self) -> None:
        """Raise VoiceBackendError (naming the setting) when this backend cannot run here.
        Cheap: loads no model."""

    @abstractmethod
    def load(self) -> Any:
        """Load (and verify) the model now; idempotent and thread-safe."""

    @abstractmethod
    def transcribe(self, samples: np.ndarray) -> tuple[str, str | None]:
        """16 kHz float32 mono → (text, language). Blocking: call it from a worker thread."""


def make_recognizer(settings: Settings) -> SpeechRecognizer:
    """The recognizer the settings choose (nothing is loaded yet)."""
    if settings.stt_backend == "moonshine":
        from annie_voice.voice.stt_moonshine import MoonshineRecognizer

        return MoonshineRecognizer(settings)
    from annie_voice.voice.stt_whisper import WhisperLoader

    return WhisperLoader(settings)


class LocalSTTService(SegmentedSTTService):
    """Transcribes each VAD segment with this process's recognizer."""

    def __init__(self, recognizer: SpeechRecognizer, **kwargs: Any) -> None:
        super().__init__(
            sample_rate=STT_SAMPLE_RATE,
            settings=STTSettings(model=recognizer.name, language=recognizer.settings.stt_language),
            **kwargs,
        )
        self.recognizer = recognizer

    @property
    def wants_wav_segments(self) -> bool:
        return False  # raw 16-bit PCM

    def can_generate_metrics(self) -> bool:
        return True

    async def start(self, frame: StartFrame) -> None:
        await super().start(frame)
        # Load (and verify) the model before the first segment, off the event loop.
        await asyncio.to_thread(self.recognizer.load)

    async def run_stt(self, audio: bytes) -> AsyncGenerator[Frame | None, None]:
        samples = np.frombuffer(audio, dtype=np.int16).astype(np.float32) / 32768.0
        if self.sample_rate != STT_SAMPLE_RATE:
            import soxr

            samples = soxr.resample(samples, self.sample_rate, STT_SAMPLE_RATE).astype(np.float32)
        try:
            await self.start_processing_metrics()
            text, language = await asyncio.to_thread(self.recognizer.transcribe, samples)
            await self.stop_processing_metrics()
        except Exception as exc:  # a model failure must not kill the session
            log.warning("voice.stt_failed", error=str(exc)[:300])
            yield ErrorFrame(error=f"speech to text failed: {exc}")
            return
        if text:
            yield TranscriptionFrame(text, self._user_id, time_now_iso8601(), language=language)
