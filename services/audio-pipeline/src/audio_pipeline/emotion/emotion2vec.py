"""The production emotion backend: emotion2vec+ (9 classes) through funasr, on the GPU box.

funasr (and torch) are imported only when this backend is built, never at import time; the
model loads on first use or `load()`. The model comes from `{models_dir}/emotion2vec_plus_large`
when that folder exists (no network); otherwise funasr fetches "iic/emotion2vec_plus_large"
from its model hub on that first load, which is for the production box only: this machine
has no funasr, so choosing the backend here fails at startup with an error naming
AUDIO_PIPELINE_EMOTION_BACKEND.

emotion2vec+ scores all nine classes; they are folded onto the shared set (see
`audio_pipeline.emotion`) by summing the probabilities of raw labels that share a label, and
the best shared label is written with its probability as the score.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import soxr

from audio_pipeline.backends import module_available
from audio_pipeline.emotion import (
    BACKEND_SETTING,
    MIN_SPEECH_S,
    EmotionBackendUnavailable,
    SegmentAudio,
    mono_samples,
    shared_label,
)
from her_os_shared.logging import get_logger
from her_os_shared.transcript import Emotion

log = get_logger(__name__)

DEFAULT_MODEL = "iic/emotion2vec_plus_large"
LOCAL_MODEL_DIR = "emotion2vec_plus_large"
MODEL_RATE = 16_000  # emotion2vec+ takes 16 kHz mono


def model_source(models_dir: Path) -> str:
    """A local copy of the model under `models_dir` when there is one, else the hub id."""
    local = models_dir / LOCAL_MODEL_DIR
    return str(local) if local.is_dir() else DEFAULT_MODEL


def engine_name(model: str) -> str:
    """The `Emotion.engine` of a model id or folder, e.g. "emotion2vec_plus_large"."""
    name = Path(model.rstrip("/")).name or "emotion2vec"
    return name[:64]


def missing_packages() -> list[str]:
    """The packages this backend needs that are not installed (without importing them)."""
    return [pkg for pkg in ("funasr", "torch") if not module_available(pkg)]


def _unavailable(reason: str) -> EmotionBackendUnavailable:
    return EmotionBackendUnavailable(
        f"{BACKEND_SETTING}=emotion2vec cannot run here: {reason}. Install funasr (and torch) "
        f"on the GPU box with the model available, or set {BACKEND_SETTING}=heuristic."
    )


class Emotion2VecEmotion:
    """emotion2vec+ as a `SpeechEmotion` backend."""

    name = "emotion2vec"

    def __init__(self, model: str = DEFAULT_MODEL, *, device: str | None = None) -> None:
        missing = missing_packages()
        if missing:
            raise _unavailable(f"the {' and '.join(missing)} package(s) are not installed")
        self.model = model
        self.engine = engine_name(model)
        # None: funasr's default (cuda, falling back to cpu when there is none).
        self._device = device
        self._auto_model: Any = None
        self._lock = threading.Lock()

    def load(self) -> None:
        """Load the model now (otherwise the first `classify` does)."""
        self._loaded()

    def classify(self, samples: np.ndarray, sample_rate: int, text: str) -> Emotion | None:
        del text  # emotion2vec judges the voice alone
        audio = self._prepare(samples, sample_rate)
        if audio is None:
            return None
        results = self._loaded().generate(
            audio, granularity="utterance", extract_embedding=False, output_dir=None
        )
        return self._emotion(results[0])

    def classify_many(self, segments: Sequence[SegmentAudio]) -> list[Emotion | None]:
        return [self.classify(samples, rate, text) for samples, rate, text in segments]

    def _loaded(self) -> Any:
        with self._lock:
            if self._auto_model is None:
                try:
                    from funasr import AutoModel
                except ImportError as exc:
                    raise _unavailable(f"importing funasr failed ({exc})") from exc
                kwargs: dict[str, Any] = {
                    "model": self.model,
                    # No pip version check on startup; no progress bars in the logs.
                    "disable_update": True,
                    "disable_pbar": True,
                }
                if self._device is not None:
                    kwargs["device"] = self._device
                log.info("loading emotion model", model=self.model)
                try:
                    self._auto_model = AutoModel(**kwargs)
                except Exception as exc:
                    raise _unavailable(f"loading the model {self.model!r} failed ({exc})") from exc
            return self._auto_model

    @staticmethod
    def _prepare(samples: np.ndarray, sample_rate: int) -> np.ndarray | None:
        audio = mono_samples(samples, sample_rate)
        if sample_rate != MODEL_RATE and audio.size:
            audio = soxr.resample(audio, sample_rate, MODEL_RATE).astype(np.float32)
        # Same floor as the heuristic, on the raw length (the model has no silence gate).
        if audio.size < MIN_SPEECH_S * MODEL_RATE or not np.any(audio):
            return None
        return audio

    def _emotion(self, result: dict[str, Any]) -> Emotion | None:
        labels: list[str] = list(result.get("labels") or [])
        scores: list[float] = [float(s) for s in result.get("scores") or []]
        if not labels or len(labels) != len(scores):
            log.warning("emotion model returned no scores", model=self.model)
            return None
        totals: dict[str, float] = {}
        for raw, score in zip(labels, scores, strict=True):
            if np.isfinite(score):
                label = shared_label(raw)
                totals[label] = totals.get(label, 0.0) + score
        if not totals:
            return None
        label = max(totals, key=lambda k: totals[k])
        score = float(min(1.0, max(0.0, totals[label])))
        return Emotion(label=label, score=round(score, 4), engine=self.engine)
