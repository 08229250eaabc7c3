"""The SER sidecar's wire format, shared by the sidecar (`sidecar.py`) and its client
(`remote.py`) so the two cannot drift apart.

Requests are `multipart/form-data`, like the audio pipeline's own uploads, with the token as
on every /v1 route (`Authorization: Bearer <token>` or `X-Internal-Token`):

- `POST /v1/emotion` — one segment. `audio`: the segment as a WAV file; `text`: its
  transcript (optional: the heuristic reads its sentiment, emotion2vec ignores it).
  → `{"emotion": {"label", "score", "engine"} | null, "classifier"}`; `null` means too little
  speech to judge (under `MIN_SPEECH_S`), as in process.
- `POST /v1/emotion/batch` — the segments of one clip, in order: `audio` repeated, `text`
  repeated as often (or left out). → `{"emotions": [...], "classifier"}`, one per segment in
  order. This is `classify_many`, so the heuristic measures arousal against the clip's own
  prosody exactly as it does in process. At most `MAX_BATCH` segments a request.
- `GET /v1/status` → `SidecarStatus`.

The audio: the client sends 16 kHz mono IEEE-float32 WAV (`wav_bytes`), so the sidecar
classifies exactly the samples the pipeline holds (PCM16 would round them). The sidecar decodes
with the pipeline's own `decode_audio`, so any WAV the pipeline accepts (PCM 8–32 bit or float,
any rate, any channels; e.g. from curl) is downmixed and resampled to 16 kHz mono; anything else
is a 400/413/415/422 with the reason.
"""

from __future__ import annotations

import io

import numpy as np
import soundfile as sf
from pydantic import BaseModel

from audio_pipeline.emotion import mono_samples
from her_os_shared.transcript import Emotion

EMOTION_PATH = "/v1/emotion"
BATCH_PATH = "/v1/emotion/batch"
STATUS_PATH = "/v1/status"
AUDIO_FIELD = "audio"
TEXT_FIELD = "text"
# Segments in one batch request: well under Starlette's 1,000 multipart parts, and more than a
# 10-minute clip holds; the client splits longer lists.
MAX_BATCH = 256


class EmotionAnswer(BaseModel):
    """`POST /v1/emotion`: the segment's emotion (None: too little speech) and the classifier
    that judged it (the sidecar's `AUDIO_PIPELINE_SER_BACKEND`)."""

    emotion: Emotion | None
    classifier: str


class BatchAnswer(BaseModel):
    """`POST /v1/emotion/batch`: one emotion (or None) per segment, in the order sent."""

    emotions: list[Emotion | None]
    classifier: str


class SidecarStatus(BaseModel):
    """`GET /v1/status` of the sidecar."""

    # The classifier is loaded and answering (GET /health is 200 exactly then).
    ready: bool
    # heuristic or emotion2vec, and what it writes as `Emotion.engine` (None: not built).
    classifier: str
    engine: str | None
    # Why the classifier cannot run here (e.g. funasr missing), naming the setting.
    load_error: str | None
    warmup_s: float | None
    max_batch: int
    max_audio_seconds: float


def wav_bytes(samples: np.ndarray, sample_rate: int) -> bytes:
    """A segment as the client sends it: mono IEEE-float32 WAV, non-finite samples replaced
    as the classifiers themselves replace them (`mono_samples`)."""
    buf = io.BytesIO()
    sf.write(buf, mono_samples(samples, sample_rate), sample_rate, format="WAV", subtype="FLOAT")
    return buf.getvalue()
