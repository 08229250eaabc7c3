"""The `sidecar` emotion backend: the segments go to the SER sidecar (`sidecar.py`) over HTTP.

`AUDIO_PIPELINE_EMOTION_BACKEND=sidecar` with `AUDIO_PIPELINE_SER_URL`; the sidecar is called
with the pipeline's own internal token (as `Authorization: Bearer`). A clip's segments go in
one `POST /v1/emotion/batch` (the wire format: `wire.py`), so the sidecar's `classify_many`
sees the clip as the in-process backend would.

Emotion enriches a segment; it never holds one back. A sidecar that is down, still loading,
too slow or answering nonsense costs the segments their emotion (None, as for too little
speech), never their transcript: every failure is logged as a warning with its reason and
kept for `/v1/status`. After a failure the sidecar is left alone for `RETRY_AFTER_S`, so a
dead one does not add its timeout to every clip meanwhile.

Retries: httpx's own transport retries (`AUDIO_PIPELINE_SER_RETRIES`, with its backoff: 0 s,
0.5 s, 1 s, ...) repeat a connection that could not be made. A request that reached the
sidecar is not sent again: it may have been classified already, and the fast path would wait
out its timeout twice. (Retrying connections is the transport's job here, not a loop of ours:
her_os_shared.retry serves the loops that retry a call.)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

import httpx
import numpy as np
from pydantic import BaseModel, SecretStr, ValidationError

from audio_pipeline.emotion import EmotionBackendUnavailable, SegmentAudio
from audio_pipeline.emotion.wire import (
    AUDIO_FIELD,
    BATCH_PATH,
    EMOTION_PATH,
    MAX_BATCH,
    STATUS_PATH,
    TEXT_FIELD,
    BatchAnswer,
    EmotionAnswer,
    SidecarStatus,
    wav_bytes,
)
from her_os_shared.errors import describe_validation_error
from her_os_shared.logging import get_logger
from her_os_shared.transcript import Emotion

if TYPE_CHECKING:
    from audio_pipeline.config import Settings

log = get_logger(__name__)

M = TypeVar("M", bound=BaseModel)

# After a failed call, segments get no emotion for this long without asking the sidecar.
RETRY_AFTER_S = 15.0
# The runtime's housekeeping asks the sidecar's /v1/status this often (for /v1/status and
# /health), and gives it this long to answer.
PROBE_EVERY_S = 15.0
PROBE_TIMEOUT_S = 3.0
# Samples in one batch request: 10 minutes of 16 kHz float32 (38 MB), under the sidecar's
# default body limit (AUDIO_PIPELINE_MAX_BODY_BYTES, 64 MiB) whatever the clip length.
MAX_BATCH_SAMPLES = 600 * 16_000
# Reasons are kept and logged up to this length (a sidecar's 4xx detail can be long).
_REASON_CHARS = 300


def _batches(indices: list[int], sizes: list[int]) -> list[list[int]]:
    """`indices` split into requests of at most `MAX_BATCH` segments and about
    `MAX_BATCH_SAMPLES` samples (one always goes, however long)."""
    batches: list[list[int]] = [[]]
    total = 0
    for i, size in zip(indices, sizes, strict=True):
        full = len(batches[-1]) >= MAX_BATCH or total + size > MAX_BATCH_SAMPLES
        if batches[-1] and full:
            batches.append([])
            total = 0
        batches[-1].append(i)
        total += size
    return batches


class SidecarError(Exception):
    """One failed exchange with the sidecar; `reached` says whether it answered at all."""

    def __init__(self, reason: str, *, reached: bool, ready: bool | None = None) -> None:
        super().__init__(reason)
        self.reason = reason[:_REASON_CHARS]
        self.reached = reached
        self.ready = ready


@dataclass(frozen=True, slots=True)
class SidecarState:
    """What the pipeline last learnt about the sidecar (None: not known yet)."""

    reachable: bool | None = None
    ready: bool | None = None
    classifier: str | None = None
    engine: str | None = None
    error: str | None = None
    checked_at: datetime | None = None


def public_url(url: str) -> str:
    """The URL without any user:password in it (it is shown in /v1/status and in logs)."""
    return str(httpx.URL(url).copy_with(username=None, password=None))


class SidecarEmotion:
    """The `SpeechEmotion` backend that asks the SER sidecar (see the module docstring)."""

    name = "sidecar"

    def __init__(
        self,
        url: str,
        token: SecretStr | None,
        *,
        timeout_s: float = 30.0,
        retries: int = 2,
        retry_after_s: float = RETRY_AFTER_S,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = public_url(url)
        self.timeout_s = timeout_s
        self.retry_after_s = retry_after_s
        headers = {"Authorization": f"Bearer {token.get_secret_value()}"} if token else {}
        self._client = httpx.Client(
            base_url=url,
            headers=headers,
            timeout=timeout_s,
            transport=transport or httpx.HTTPTransport(retries=retries),
        )
        self._lock = threading.Lock()
        self._state = SidecarState()
        self._failed_at: float | None = None  # monotonic time of the last failure
        self._checked_at = float("-inf")  # monotonic time of the last exchange

    @classmethod
    def from_settings(cls, settings: Settings) -> SidecarEmotion:
        if not settings.ser_url:  # the settings refuse this already; kept for direct callers
            raise EmotionBackendUnavailable(
                "AUDIO_PIPELINE_EMOTION_BACKEND=sidecar needs AUDIO_PIPELINE_SER_URL "
                "(e.g. http://127.0.0.1:9101)"
            )
        return cls(
            settings.ser_url,
            settings.internal_token,
            timeout_s=settings.ser_timeout_s,
            retries=settings.ser_retries,
        )

    @property
    def engine(self) -> str:
        """The sidecar's engine once known; each `Emotion` carries the one that judged it."""
        return self._state.engine or self.name

    # --- SpeechEmotion ---------------------------------------------------------------------

    def classify(self, samples: np.ndarray, sample_rate: int, text: str) -> Emotion | None:
        if not self._may_call(1) or np.asarray(samples).size == 0:
            return None
        try:
            answer = self._post(EMOTION_PATH, [(samples, sample_rate, text)], EmotionAnswer)
        except SidecarError as exc:
            self._failed(exc, segments=1)
            return None
        self._succeeded(answer.classifier, [answer.emotion])
        return answer.emotion

    def classify_many(self, segments: Sequence[SegmentAudio]) -> list[Emotion | None]:
        found: list[Emotion | None] = [None] * len(segments)
        # Empty audio is no WAV; it has no emotion in process either (and no prosody, so it
        # does not move the heuristic's baseline for the others).
        todo = [i for i, (samples, _, _) in enumerate(segments) if np.asarray(samples).size]
        if not todo or not self._may_call(len(segments)):
            return found
        for part in _batches(todo, [np.asarray(segments[i][0]).size for i in todo]):
            try:
                answer = self._post(BATCH_PATH, [segments[i] for i in part], BatchAnswer)
                if len(answer.emotions) != len(part):
                    raise SidecarError(
                        f"bad answer: {len(answer.emotions)} emotions for {len(part)} segments",
                        reached=True,
                    )
            except SidecarError as exc:
                self._failed(exc, segments=len(segments))
                return found  # what is left goes without emotion too (the sidecar failed)
            for i, emotion in zip(part, answer.emotions, strict=True):
                found[i] = emotion
            self._succeeded(answer.classifier, answer.emotions)
        return found

    # --- status ----------------------------------------------------------------------------

    def probe_due(self) -> bool:
        """Whether the sidecar has not been heard from (or tried) for `PROBE_EVERY_S`."""
        return time.monotonic() - self._checked_at >= PROBE_EVERY_S

    def probe(self) -> SidecarState:
        """Ask the sidecar's /v1/status now (blocking, `PROBE_TIMEOUT_S`); never raises."""
        try:
            status = self._parse(
                self._request("GET", STATUS_PATH, timeout=PROBE_TIMEOUT_S), SidecarStatus
            )
        except SidecarError as exc:
            self._record(exc.reached, exc.ready, error=exc.reason, failed=False)
            return self._state
        self._record(
            True, status.ready, classifier=status.classifier, engine=status.engine,
            error=status.load_error, failed=False,
        )  # fmt: skip
        return self._state

    def sidecar_status(self) -> dict[str, object]:
        """The "ser" part of the pipeline's /v1/status (no I/O)."""
        s = self._state
        return {
            "configured": True,
            "url": self.url,
            "reachable": s.reachable,
            "ready": s.ready,
            "classifier": s.classifier,
            "engine": s.engine,
            "error": s.error,
            "checked_at": s.checked_at.isoformat() if s.checked_at else None,
        }

    @property
    def degraded(self) -> bool:
        """Known not to be classifying right now (unreachable, loading or failing)."""
        s = self._state
        return s.reachable is False or s.ready is False or self._failed_at is not None

    def close(self) -> None:
        self._client.close()

    # --- the exchanges ---------------------------------------------------------------------

    def _may_call(self, segments: int) -> bool:
        failed_at = self._failed_at
        if failed_at is not None and time.monotonic() - failed_at < self.retry_after_s:
            log.debug("emotion.sidecar_skipped", segments=segments, reason=self._state.error)
            return False
        return True

    def _post(self, path: str, segments: Sequence[SegmentAudio], model: type[M]) -> M:
        files = [
            (AUDIO_FIELD, (f"{i}.wav", wav_bytes(samples, rate), "audio/wav"))
            for i, (samples, rate, _) in enumerate(segments)
        ]
        data = {TEXT_FIELD: [text for _, _, text in segments]}
        return self._parse(self._request("POST", path, files=files, data=data), model)

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return self._client.request(method, path, **kwargs)
        except httpx.TimeoutException:
            timeout = kwargs.get("timeout", self.timeout_s)
            raise SidecarError(
                f"no answer from {self.url} within {timeout:g} s", reached=False
            ) from None
        except httpx.TransportError as exc:
            raise SidecarError(
                f"cannot reach {self.url}: {exc or type(exc).__name__}", reached=False
            ) from None

    @staticmethod
    def _parse(response: httpx.Response, model: type[M]) -> M:
        if response.status_code != 200:
            try:
                detail = response.json().get("detail")
            except (ValueError, AttributeError):
                detail = None
            raise SidecarError(
                f"HTTP {response.status_code}: {detail or response.reason_phrase}",
                reached=True,
                # 503: up, but its classifier is loading or cannot run.
                ready=False if response.status_code == 503 else None,
            )
        try:
            return model.model_validate_json(response.content)
        except ValidationError as exc:
            raise SidecarError(
                f"bad answer: {describe_validation_error(exc)}", reached=True
            ) from None

    def _succeeded(self, classifier: str, emotions: Sequence[Emotion | None]) -> None:
        engine = next((e.engine for e in emotions if e is not None and e.engine), None)
        was_down = self._failed_at is not None
        self._record(True, True, classifier=classifier, engine=engine, error=None, failed=False)
        if was_down:
            log.info("emotion.sidecar_back", url=self.url, classifier=classifier)

    def _failed(self, exc: SidecarError, *, segments: int) -> None:
        self._record(exc.reached, exc.ready, error=exc.reason, failed=True)
        # The transcript goes on without emotion: say so, with why.
        log.warning(
            "emotion.sidecar_failed", url=self.url, reason=exc.reason, segments=segments,
            retry_after_s=self.retry_after_s,
        )  # fmt: skip

    def _record(
        self,
        reachable: bool,
        ready: bool | None,
        *,
        failed: bool,
        error: str | None,
        classifier: str | None = None,
        engine: str | None = None,
    ) -> None:
        with self._lock:
            s = self._state
            self._state = replace(
                s,
                reachable=reachable,
                ready=ready if ready is not None else (s.ready if reachable else None),
                classifier=classifier or s.classifier,
                engine=engine or s.engine,
                error=error,
                checked_at=datetime.now(UTC),
            )
            self._checked_at = time.monotonic()
            if failed:
                self._failed_at = self._checked_at
            elif error is None:
                self._failed_at = None
