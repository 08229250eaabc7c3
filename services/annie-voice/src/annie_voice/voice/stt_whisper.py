"""Whisper speech to text through faster-whisper (CTranslate2), one of the recognizers of stt.py:

- `faster-whisper`: the bundled Whisper base model (sha256-checked), int8 on CPU.
- `whisper-gpu` (production): a local CTranslate2 Whisper folder (ANNIE_VOICE_WHISPER_MODEL_DIR)
  on CUDA; without a CUDA device it fails with a message naming the setting.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import numpy as np

from annie_voice.config import Settings
from annie_voice.voice.errors import VoiceBackendError
from annie_voice.voice.stt import SpeechRecognizer
from her_os_shared.bundled import whisper_base_dir
from her_os_shared.logging import get_logger

if TYPE_CHECKING:
    from faster_whisper import WhisperModel

log = get_logger(__name__)


class WhisperLoader(SpeechRecognizer):
    """Loads the Whisper model the settings choose, once (thread-safe); shared by sessions."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
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
