"""Speech to text: a Pipecat segmented STT service around faster-whisper.

The VAD cuts the user's speech into segments; each is transcribed off the event loop. The
model is chosen by ANNIE_VOICE_STT_BACKEND and loaded once per process, on first use:

- `faster-whisper` (embedded): the bundled Whisper base model (sha256-checked), int8 on CPU.
- `whisper-gpu` (production): a local CTranslate2 Whisper folder (ANNIE_VOICE_WHISPER_MODEL_DIR)
  on CUDA; without a CUDA device it fails with a message naming the setting.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

import numpy as np
from pipecat.frames.frames import ErrorFrame, Frame, StartFrame, TranscriptionFrame
from pipecat.services.settings import STTSettings
from pipecat.services.stt_service import SegmentedSTTService
from pipecat.utils.time import time_now_iso8601

from annie_voice.config import Settings
from annie_voice.voice.errors import VoiceBackendError
from her_os_shared.bundled import whisper_base_dir
from her_os_shared.logging import get_logger

if TYPE_CHECKING:
    from faster_whisper import WhisperModel

log = get_logger(__name__)

STT_SAMPLE_RATE = 16000


class WhisperLoader:
    """Loads the Whisper model the settings choose, once (thread-safe); shared by sessions."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.backend = settings.stt_backend
        self._model: WhisperModel | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return "whisper-base (bundled)" if self.backend == "faster-whisper" else "whisper-gpu"

    def check(self) -> None:
        """Raise VoiceBackendError when the configured backend cannot run here (cheap: no
        model is loaded)."""
        if self.backend == "whisper-gpu":
            setting = Settings.env_name("stt_backend")
            import ctranslate2

            if ctranslate2.get_cuda_device_count() < 1:
                raise VoiceBackendError(
                    f"{setting}=whisper-gpu needs a CUDA GPU, and CTranslate2 sees none; "
                    f"use {setting}=faster-whisper (the bundled model on CPU)"
                )
            model_dir = self.settings.whisper_model_dir
            if model_dir is None or not (model_dir / "model.bin").is_file():
                raise VoiceBackendError(
                    f"{Settings.env_name('whisper_model_dir')}={model_dir} is not a CTranslate2 "
                    "Whisper model folder (no model.bin)"
                )

    def load(self) -> WhisperModel:
        with self._lock:
            if self._model is None:
                self.check()
                from faster_whisper import WhisperModel

                s = self.settings
                if self.backend == "whisper-gpu":
                    assert s.whisper_model_dir is not None
                    self._model = WhisperModel(
                        str(s.whisper_model_dir),
                        device=s.whisper_device,
                        compute_type=s.whisper_compute_type,
                    )
                else:
                    self._model = WhisperModel(
                        str(whisper_base_dir(s.models_dir.resolve())),
                        device="cpu",
                        compute_type="int8",
                        cpu_threads=s.stt_threads,
                    )
                log.info("voice.stt_loaded", backend=self.backend)
            return self._model

    def transcribe(self, samples: np.ndarray) -> tuple[str, str | None]:
        """16 kHz float32 mono → (text, detected language)."""
        model = self.load()
        segments, info = model.transcribe(
            samples,
            language=self.settings.stt_language,
            beam_size=self.settings.stt_beam_size,
            vad_filter=False,  # the pipeline's VAD already cut the segment
            condition_on_previous_text=False,
        )
        text = " ".join(seg.text.strip() for seg in segments if seg.text.strip())
        return text.strip(), getattr(info, "language", None)


class WhisperSTTService(SegmentedSTTService):
    """Transcribes each VAD segment with the loader's Whisper model."""

    def __init__(self, loader: WhisperLoader, **kwargs: Any) -> None:
        super().__init__(
            sample_rate=STT_SAMPLE_RATE,
            settings=STTSettings(model=loader.name, language=loader.settings.stt_language),
            **kwargs,
        )
        self.loader = loader

    @property
    def wants_wav_segments(self) -> bool:
        return False  # raw 16-bit PCM

    def can_generate_metrics(self) -> bool:
        return True

    async def start(self, frame: StartFrame) -> None:
        await super().start(frame)
        # Load (and verify) the model before the first segment, off the event loop.
        await asyncio.to_thread(self.loader.load)

    async def run_stt(self, audio: bytes) -> AsyncGenerator[Frame | None, None]:
        samples = np.frombuffer(audio, dtype=np.int16).astype(np.float32) / 32768.0
        if self.sample_rate != STT_SAMPLE_RATE:
            import soxr

            samples = soxr.resample(samples, self.sample_rate, STT_SAMPLE_RATE).astype(np.float32)
        try:
            await self.start_processing_metrics()
            text, language = await asyncio.to_thread(self.loader.transcribe, samples)
            await self.stop_processing_metrics()
        except Exception as exc:  # a model failure must not kill the session
            log.warning("voice.stt_failed", error=str(exc)[:300])
            yield ErrorFrame(error=f"speech to text failed: {exc}")
            return
        if text:
            yield TranscriptionFrame(text, self._user_id, time_now_iso8601(), language=language)
