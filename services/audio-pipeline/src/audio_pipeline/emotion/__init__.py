"""Speech emotion of a segment (the ser-emotion process: the `CreatureName.HYDRA` creature).

Two classifiers behind one interface, chosen by `AUDIO_PIPELINE_EMOTION_BACKEND`:

- `heuristic` (embedded default, `heuristic.py`): prosody (loudness, pitch spread, speaking
  rate) gives arousal, the transcript's VADER sentiment gives valence; written with
  engine "heuristic". It only ever says angry, happy, sad or neutral.
- `emotion2vec` (production, `emotion2vec.py`): emotion2vec+ through funasr on the GPU box;
  written with engine e.g. "emotion2vec_plus_large". funasr is imported only when this
  backend is configured, so this package imports without it.

and a third backend, `sidecar` (`remote.py`), that runs neither here: it sends the segments to
the SER sidecar (`sidecar.py`, the design's "SER Pipeline" on :9101), which runs one of the
two classifiers above (`AUDIO_PIPELINE_SER_BACKEND`), the same code as in process. Docker
compose uses it so emotion2vec+ has a process (and a GPU reservation) of its own; the
embedded default keeps classifying in process.

Both write labels from one stable set, `LABELS`. emotion2vec+ has 9 classes (its raw labels
are bilingual, e.g. "生气/angry"); they map onto the set as

    angry → angry          happy → happy          sad → sad
    disgusted → disgusted  neutral → neutral      surprised → surprised
    fearful → fearful      other → other          unknown / <unk> → other

i.e. the English part is kept and "unknown" folds into "other" (a catch-all is one label, not
two that mean the same). Common spellings of other models ("anger", "fear", "sadness", ...)
map the same way; anything unrecognised is "other" rather than a new label, so readers of
the JSONL can rely on the set.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from audio_pipeline.backends import BackendUnavailableError
from her_os_shared.logging import get_logger
from her_os_shared.transcript import Emotion

if TYPE_CHECKING:
    from audio_pipeline.config import Settings

__all__ = [
    "BACKEND_SETTING",
    "LABELS",
    "MIN_SPEECH_S",
    "Emotion",
    "EmotionBackendUnavailable",
    "SegmentAudio",
    "SpeechEmotion",
    "create_emotion",
    "emotion_status",
    "mono_samples",
    "shared_label",
]

log = get_logger(__name__)

# The stable label set of `Emotion.label` written by this service (both backends).
LABELS: tuple[str, ...] = (
    "angry",
    "disgusted",
    "fearful",
    "happy",
    "neutral",
    "other",
    "sad",
    "surprised",
)

# Raw labels (English part, lower case) → shared label. emotion2vec+'s nine classes first,
# then other models' spellings of the same classes.
_LABEL_MAP: dict[str, str] = {
    **{label: label for label in LABELS},
    "unknown": "other",
    "<unk>": "other",
    "unk": "other",
    "anger": "angry",
    "disgust": "disgusted",
    "fear": "fearful",
    "happiness": "happy",
    "joy": "happy",
    "sadness": "sad",
    "surprise": "surprised",
    "neu": "neutral",
    "ang": "angry",
    "hap": "happy",
}

# Less active speech than this (seconds, leading/trailing silence trimmed) carries too little
# prosody to judge: both backends return None (the segment's emotion stays null).
MIN_SPEECH_S = 0.25

# One segment for `classify_many`: (float32 mono samples, sample rate, transcript text).
SegmentAudio = tuple[np.ndarray, int, str]

# The environment variable that picks the backend; errors name it so the fix is obvious.
BACKEND_SETTING = "AUDIO_PIPELINE_EMOTION_BACKEND"


class EmotionBackendUnavailable(BackendUnavailableError):
    """The configured emotion backend cannot run here (package or model missing). A
    `BackendUnavailableError`, so startup handles it like the other backends' errors."""


@runtime_checkable
class SpeechEmotion(Protocol):
    """Classifies the emotion of one stretch of speech by one speaker."""

    # The backend's setting value ("heuristic", "emotion2vec").
    name: str
    # What is written as `Emotion.engine` (never claims a model that did not run).
    engine: str

    def classify(self, samples: np.ndarray, sample_rate: int, text: str) -> Emotion | None:
        """Emotion of one segment: float32 mono samples, their rate, the segment's transcript.

        None when there is too little speech to judge (under `MIN_SPEECH_S`)."""
        ...

    def classify_many(
        self, segments: Sequence[tuple[np.ndarray, int, str]]
    ) -> list[Emotion | None]:
        """Emotions of the segments of one call, in order. Backends may use the call as
        context (the heuristic measures arousal against the call's own prosody)."""
        ...


def shared_label(raw: str) -> str:
    """The shared label of a backend's raw label, e.g. "生气/angry" → "angry"."""
    english = raw.rsplit("/", 1)[-1].strip().lower()
    return _LABEL_MAP.get(english, "other")


def mono_samples(samples: np.ndarray, sample_rate: int) -> np.ndarray:
    """`samples` as a finite float32 1-D array; rejects what is not mono audio."""
    if sample_rate <= 0:
        raise ValueError(f"sample_rate must be positive, got {sample_rate}")
    arr = np.asarray(samples)
    if arr.ndim != 1:
        raise ValueError(f"expected mono samples (1-D), got shape {arr.shape}")
    arr = arr.astype(np.float32, copy=False)
    if not np.all(np.isfinite(arr)):
        # A corrupt sample should not cost the whole segment its emotion.
        arr = np.nan_to_num(arr, nan=0.0, posinf=1.0, neginf=-1.0)
    return arr


def create_emotion(settings: Settings, backend: str | None = None) -> SpeechEmotion:
    """The backend `settings.emotion_backend` names (or `backend`: the sidecar passes its
    `ser_backend`). emotion2vec fails here, at startup, with an `EmotionBackendUnavailable`
    naming the setting when funasr is not installed; its model loads on first use (or
    `load()`). sidecar only builds its HTTP client: nothing is contacted here."""
    backend = backend or settings.emotion_backend
    if backend == "heuristic":
        from audio_pipeline.emotion.heuristic import HeuristicEmotion

        emotion: SpeechEmotion = HeuristicEmotion()
    elif backend == "emotion2vec":
        from audio_pipeline.emotion.emotion2vec import Emotion2VecEmotion, model_source

        emotion = Emotion2VecEmotion(model_source(settings.models_dir))
    elif backend == "sidecar":
        from audio_pipeline.emotion.remote import SidecarEmotion

        emotion = SidecarEmotion.from_settings(settings)
    else:  # pragma: no cover - the settings' Literal rejects anything else
        raise ValueError(f"unknown {BACKEND_SETTING}: {backend!r}")
    log.info("emotion backend", backend=emotion.name, engine=emotion.engine)
    return emotion


def emotion_status(emotion: SpeechEmotion) -> dict[str, object]:
    """What `/v1/status` says about speech emotion under "ser": where it runs and, for the
    sidecar, whether it answers and which classifier it runs (no I/O: the sidecar backend
    reports what it last saw)."""
    report = getattr(emotion, "sidecar_status", None)
    if callable(report):
        return report()
    return {
        "configured": False,  # classified in process: no sidecar
        "url": None,
        "reachable": None,
        "ready": None,
        "classifier": emotion.name,
        "engine": emotion.engine,
        "error": None,
        "checked_at": None,
    }
