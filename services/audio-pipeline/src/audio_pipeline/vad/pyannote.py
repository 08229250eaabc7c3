"""Production voice activity: pyannote.audio's segmentation model (gated on Hugging Face,
so it needs a token). pyannote.audio and torch are imported only when this backend is chosen.
"""

from __future__ import annotations

import importlib
import threading
from typing import Any

from audio_pipeline.audio import SAMPLE_RATE, AudioClip
from audio_pipeline.backends import import_pyannote, pyannote_pretrained
from her_os_shared.logging import get_logger

log = get_logger(__name__)

SEGMENTATION_MODEL = "pyannote/segmentation-3.0"
_NEEDS = (
    "AUDIO_PIPELINE_VAD_BACKEND=pyannote needs the pyannote.audio package and "
    f"AUDIO_PIPELINE_PYANNOTE_TOKEN (a Hugging Face token with access to {SEGMENTATION_MODEL}); "
    "install pyannote.audio and set the token, or set AUDIO_PIPELINE_VAD_BACKEND=silero to use "
    "the bundled model"
)


class PyannoteVad:
    name = "pyannote"

    def __init__(self, *, token: str | None, device: str = "cpu") -> None:
        self._token = token
        self._device = device
        self._pipeline: Any = None
        self._lock = threading.Lock()

    def load(self) -> None:
        with self._lock:
            self._load_locked()

    def _load_locked(self) -> Any:
        if self._pipeline is not None:
            return self._pipeline
        audio_mod, torch = import_pyannote(_NEEDS, self._token)
        assert self._token is not None
        pipelines = importlib.import_module("pyannote.audio.pipelines")
        model = pyannote_pretrained(audio_mod.Model, SEGMENTATION_MODEL, self._token, _NEEDS)
        pipeline = pipelines.VoiceActivityDetection(segmentation=model)
        pipeline.instantiate({"min_duration_on": 0.0, "min_duration_off": 0.0})
        pipeline.to(torch.device(self._device))
        self._pipeline = pipeline
        log.info("vad_loaded", backend=self.name, model=SEGMENTATION_MODEL, device=self._device)
        return pipeline

    def regions(self, clip: AudioClip) -> list[tuple[float, float]]:
        if clip.samples.size == 0:
            return []
        with self._lock:
            pipeline = self._load_locked()  # first: its error names the setting
            import torch

            waveform = torch.from_numpy(clip.samples).unsqueeze(0)
            annotation = pipeline({"waveform": waveform, "sample_rate": SAMPLE_RATE})
        return [
            (float(seg.start), min(float(seg.end), clip.duration_s))
            for seg in annotation.get_timeline().support()
        ]
