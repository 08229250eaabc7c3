"""The SER sidecar: speech emotion as a service of its own (the design's "SER Pipeline", :9101).

    python -m audio_pipeline.emotion.sidecar

It runs the same classifier code the audio pipeline runs in process — `heuristic` or
`emotion2vec`, chosen by `AUDIO_PIPELINE_SER_BACKEND` — so the pipeline can hand emotion to it
(`AUDIO_PIPELINE_EMOTION_BACKEND=sidecar`, `remote.py`) and emotion2vec+ gets a process and a
GPU reservation of its own. It reads the audio pipeline's settings (same prefix, same internal
token, same body and audio limits) and listens on `AUDIO_PIPELINE_SER_PORT` (9101).

Routes (wire format: `wire.py`): `GET /health` (no auth; 503 until the classifier is loaded,
and while it cannot load), `GET /v1/status`, `POST /v1/emotion`, `POST /v1/emotion/batch`.
Like every service's /health, this one names no backend: the classifier is in /v1/status.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Annotated, TypeVar

from fastapi import APIRouter, Depends, FastAPI, File, Form, HTTPException, Request, UploadFile

from audio_pipeline import __version__
from audio_pipeline.audio import SAMPLE_RATE, AudioError, decode_audio
from audio_pipeline.backends import BackendUnavailableError
from audio_pipeline.config import Settings
from audio_pipeline.emotion import BACKEND_SETTING, SegmentAudio, SpeechEmotion, create_emotion
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
)
from her_os_shared.auth import require_token
from her_os_shared.logging import get_logger
from her_os_shared.query import forbid_unknown_query
from her_os_shared.service import create_service_app, serve
from her_os_shared.transcript import Emotion

SERVICE = "ser"
# The setting that picks the sidecar's classifier (the pipeline's own is BACKEND_SETTING).
SER_BACKEND_SETTING = "AUDIO_PIPELINE_SER_BACKEND"

T = TypeVar("T")

log = get_logger(__name__)


def sidecar_settings(settings: Settings) -> Settings:
    """The audio pipeline's settings as the sidecar runs them: listening on `ser_port`."""
    return settings.model_copy(update={"port": settings.ser_port})


class SerRuntime:
    """The classifier, built and loaded in the background at start, and the one worker
    thread it runs on (one inference at a time: no two requests compete for the GPU)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.classifier = settings.ser_backend
        self.emotion: SpeechEmotion | None = None
        self.ready = asyncio.Event()
        self.load_error: str | None = None
        self.warmup_s: float | None = None
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="ser")
        self._loader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._loader = asyncio.create_task(self._load(), name="load-ser")

    async def stop(self) -> None:
        if self._loader is not None:
            self._loader.cancel()
            await asyncio.gather(self._loader, return_exceptions=True)
        self.pool.shutdown(wait=False, cancel_futures=True)

    async def _load(self) -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            await loop.run_in_executor(self.pool, self._build)
        except BackendUnavailableError as exc:
            # Stay up and say why (in /v1/status and every 503), as the audio pipeline does;
            # here the classifier is chosen by SER_BACKEND, so the message names that setting.
            self.load_error = str(exc).replace(BACKEND_SETTING, SER_BACKEND_SETTING)
            log.error("ser.unavailable", classifier=self.classifier, reason=self.load_error)
            return
        except Exception as exc:  # anything else: the same, rather than a silently dead task
            self.load_error = f"loading the {self.classifier} classifier failed: {exc!r}"[:500]
            log.error("ser.unavailable", classifier=self.classifier, reason=self.load_error)
            return
        self.warmup_s = round(loop.time() - started, 3)
        self.ready.set()
        engine = self.emotion.engine if self.emotion else None
        log.info("ser.loaded", classifier=self.classifier, engine=engine, seconds=self.warmup_s)

    def _build(self) -> None:
        emotion = create_emotion(self.settings, self.settings.ser_backend)
        self.emotion = emotion
        load = getattr(emotion, "load", None)  # emotion2vec: the model now, not on first use
        if load is not None:
            load()

    def status(self) -> SidecarStatus:
        return SidecarStatus(
            ready=self.ready.is_set(),
            classifier=self.classifier,
            engine=self.emotion.engine if self.emotion is not None else None,
            load_error=self.load_error,
            warmup_s=self.warmup_s,
            max_batch=MAX_BATCH,
            max_audio_seconds=self.settings.max_audio_seconds,
        )

    def require_ready(self) -> SpeechEmotion:
        """The classifier, or a 503 saying why there is none yet."""
        if not self.ready.is_set() or self.emotion is None:
            raise HTTPException(
                503, self.load_error or "the emotion classifier is loading; retry shortly"
            )
        return self.emotion

    async def classify(self, segment: SegmentAudio) -> Emotion | None:
        """`classify` of the classifier, on its worker thread."""
        emotion = self.require_ready()
        return await self._run(emotion.classify, *segment)

    async def classify_many(self, segments: Sequence[SegmentAudio]) -> list[Emotion | None]:
        """`classify_many`: the segments of one clip judged together, as in process."""
        emotion = self.require_ready()
        return await self._run(emotion.classify_many, list(segments))

    async def _run(self, fn: Callable[..., T], *args: object) -> T:
        try:
            return await asyncio.get_running_loop().run_in_executor(self.pool, fn, *args)
        except BackendUnavailableError as exc:  # emotion2vec failing to load lazily
            raise HTTPException(503, str(exc)) from None
        except ValueError as exc:  # mono_samples refusing what decode_audio let through
            raise HTTPException(422, f"unusable audio: {exc}") from None


def get_runtime(request: Request) -> SerRuntime:
    return request.app.state.runtime


RuntimeDep = Annotated[SerRuntime, Depends(get_runtime)]

router = APIRouter()

_AUDIO_ERRORS: dict[int | str, dict[str, str]] = {
    400: {"description": "empty, corrupt or not audio (the reason is given)"},
    413: {"description": "body or audio over the limits (MAX_BODY_BYTES, MAX_AUDIO_SECONDS)"},
    415: {"description": "not a supported WAV encoding"},
    422: {"description": "zero-length audio, or a missing or bad field"},
    503: {"description": "the classifier is loading, or cannot run here (the reason is given)"},
}


async def _segment(runtime: SerRuntime, upload: UploadFile, text: str, where: str) -> SegmentAudio:
    """One uploaded WAV as (16 kHz float32 mono samples, rate, text); bad audio is a 4xx
    whose reason names the part."""
    try:
        clip = decode_audio(await upload.read(), max_seconds=runtime.settings.max_audio_seconds)
    except AudioError as exc:
        raise HTTPException(exc.status_code, f"{where}{exc.reason}") from None
    return clip.samples, SAMPLE_RATE, text


@router.get(STATUS_PATH, summary="The classifier: which, loaded or not, and why not")
async def status(runtime: RuntimeDep) -> SidecarStatus:
    return runtime.status()


@router.post(
    EMOTION_PATH,
    summary="The emotion of one segment (multipart: a WAV `audio`, its transcript `text`)",
    responses=_AUDIO_ERRORS,
)
async def emotion(
    runtime: RuntimeDep,
    audio: Annotated[UploadFile, File(description="the segment as WAV (16 kHz mono float32)")],
    text: Annotated[str, Form(description="the segment's transcript (may be empty)")] = "",
) -> EmotionAnswer:
    runtime.require_ready()  # 503 before decoding anything
    found = await runtime.classify(await _segment(runtime, audio, text, ""))
    return EmotionAnswer(emotion=found, classifier=runtime.classifier)


@router.post(
    BATCH_PATH,
    summary="The emotions of one clip's segments, in order (multipart: `audio` and `text` "
    "repeated)",
    responses=_AUDIO_ERRORS,
)
async def emotion_batch(
    runtime: RuntimeDep,
    audio: Annotated[list[UploadFile], File(description="each segment as WAV, in order")],
    text: Annotated[
        list[str], Form(description="each segment's transcript, in the same order")
    ] = [],  # noqa: B006 - FastAPI copies defaults per request
) -> BatchAnswer:
    if len(audio) > MAX_BATCH:
        raise HTTPException(422, f"{len(audio)} segments: send at most {MAX_BATCH} a request")
    if text and len(text) != len(audio):
        raise HTTPException(
            422, f"{len(audio)} `{AUDIO_FIELD}` parts but {len(text)} `{TEXT_FIELD}` parts"
        )
    runtime.require_ready()
    texts = text or [""] * len(audio)
    segments = [
        await _segment(runtime, upload, said, f"{AUDIO_FIELD}[{i}]: ")
        for i, (upload, said) in enumerate(zip(audio, texts, strict=True))
    ]
    found = await runtime.classify_many(segments) if segments else []
    return BatchAnswer(emotions=found, classifier=runtime.classifier)


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = sidecar_settings(settings or Settings())

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        runtime = SerRuntime(settings)
        app.state.runtime = runtime
        await runtime.start()  # the classifier loads in the background; /health is 503 until
        try:
            yield
        finally:
            await runtime.stop()

    async def healthy(app: FastAPI) -> bool:
        return app.state.runtime.ready.is_set()

    app = create_service_app(
        service=SERVICE,
        title="her-os SER sidecar",
        version=__version__,
        settings=settings,
        lifespan=lifespan,
        health_check=healthy,
    )
    # As the audio pipeline's /v1: the token first (401 before 422), then no stray query.
    v1 = APIRouter(
        dependencies=[
            Depends(require_token(settings.internal_token)),
            Depends(forbid_unknown_query()),
        ],
    )
    v1.include_router(router)
    app.include_router(v1)
    return app


def main() -> None:
    settings = sidecar_settings(Settings())
    serve(lambda: create_app(settings), settings, SERVICE)


if __name__ == "__main__":
    main()
