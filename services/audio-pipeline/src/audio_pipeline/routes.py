"""The /v1 API of the audio pipeline (thin: decoding in audio.py, work in runtime.py)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

from fastapi import (
    APIRouter,
    Depends,
    File,
    Form,
    HTTPException,
    Path,
    Query,
    Request,
    UploadFile,
)
from pydantic import BaseModel, ConfigDict, Field

from audio_pipeline.audio import AudioClip, AudioError, decode_audio
from audio_pipeline.responses import end_answer, transcribe_answer
from audio_pipeline.runtime import AudioRuntime, SweepConflictError
from her_os_shared.ids import ID_PATTERN, SafeId, SegmentId
from her_os_shared.transcript import Emotion

router = APIRouter()


def get_runtime(request: Request) -> AudioRuntime:
    return request.app.state.runtime


def require_ready(runtime: AudioRuntime) -> None:
    """503 until the models are loaded (or with the reason a backend cannot load)."""
    if not runtime.ready.is_set():
        raise HTTPException(503, runtime.load_error or "models are loading; retry shortly")


def one_upload(**fields: UploadFile | None) -> UploadFile:
    """The one audio upload among alternative field names (`file`, the design's `audio`)."""
    given = [f for f in fields.values() if f is not None]
    names = " or ".join(repr(name) for name in fields)
    if not given:
        raise HTTPException(422, f"no audio: send the WAV as the multipart field {names}")
    if len(given) > 1:
        raise HTTPException(422, f"two audio files: send the WAV as one of {names}, not both")
    return given[0]


def check_stt_backend(runtime: AudioRuntime, name: str | None) -> None:
    """`auto` (the design's value) or no value means the loaded backend; another name must be
    the loaded one: the service runs one backend and never switches per request."""
    loaded = runtime.settings.stt_backend
    if name is not None and name not in ("auto", loaded):
        raise HTTPException(
            422,
            f"stt_backend {name!r} is not loaded; this service runs {loaded!r} "
            "(AUDIO_PIPELINE_STT_BACKEND); send 'auto' or that name",
        )


async def _clip(runtime: AudioRuntime, file: UploadFile) -> AudioClip:
    require_ready(runtime)
    data = await file.read()
    try:
        return decode_audio(data, max_seconds=runtime.settings.max_audio_seconds)
    except AudioError as exc:
        raise HTTPException(exc.status_code, exc.reason) from None


RuntimeDep = Annotated[AudioRuntime, Depends(get_runtime)]
IdForm = Annotated[str, Form(pattern=ID_PATTERN, max_length=128)]
SessionIdPath = Annotated[str, Path(pattern=ID_PATTERN, max_length=128)]


@router.get("/status", summary="Models, backends, enrollment and live sessions")
async def status(runtime: RuntimeDep) -> dict[str, Any]:
    return runtime.status()


@router.post(
    "/transcribe",
    summary="Transcribe a WAV clip of a session (fast path): segments are appended to "
    "data/transcripts/{session_id}.jsonl",
    responses={
        400: {"description": "empty, corrupt or not audio"},
        413: {"description": "body or audio too long"},
        415: {"description": "not a supported WAV encoding"},
        503: {"description": "models still loading, or a backend is unavailable"},
    },
)
async def transcribe(
    runtime: RuntimeDep,
    session_id: IdForm,
    file: Annotated[
        UploadFile | None, File(description="WAV audio (any rate, mono or stereo)")
    ] = None,
    audio: Annotated[
        UploadFile | None, File(description="the same, under the design's field name")
    ] = None,
    device_id: IdForm = "unknown",
    stt_backend: Annotated[
        str | None, Form(description="'auto' or the loaded backend's name")
    ] = None,
    ser_all_speakers: Annotated[bool, Form()] = True,
) -> dict[str, Any]:
    upload = one_upload(file=file, audio=audio)
    check_stt_backend(runtime, stt_backend)
    clip = await _clip(runtime, upload)
    out = await runtime.transcribe(
        clip, session_id=session_id, device_id=device_id, ser_all_speakers=ser_all_speakers
    )
    return transcribe_answer(out)


@router.post(
    "/enroll",
    summary="Enroll a person's voice from a clip of them speaking (adds a style)",
    responses={422: {"description": "bad name, or too little speech"}},
)
async def enroll(
    runtime: RuntimeDep,
    file: Annotated[UploadFile, File(description="WAV of the person speaking (≥ a few seconds)")],
    person: Annotated[str, Form(min_length=1, max_length=128)],
    style: Annotated[
        str | None, Form(max_length=64, description="e.g. 'phone', 'outdoors'")
    ] = None,
) -> dict[str, Any]:
    clip = await _clip(runtime, file)
    try:
        return await runtime.enroll(clip, person, style)
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from None


@router.get("/enrollment", summary="Enrolled people and their voice styles")
async def list_enrollment(runtime: RuntimeDep) -> dict[str, Any]:
    return {"persons": [asdict(p) for p in runtime.bank.list()]}


@router.delete(
    "/enrollment/{style}",
    summary="Forget one voice style",
    responses={404: {"description": "no such style"}},
)
async def delete_style(
    runtime: RuntimeDep, style: Annotated[str, Path(max_length=128)]
) -> dict[str, Any]:
    if not runtime.bank.delete_style(style):
        raise HTTPException(404, f"no voice style {style!r}")
    return {"deleted": style}


@router.delete(
    "/enrollment/persons/{person}",
    summary="Forget a person's voice: every style of theirs (the name in any case)",
    responses={404: {"description": "no such person"}},
)
async def delete_person(
    runtime: RuntimeDep, person: Annotated[str, Path(min_length=1, max_length=128)]
) -> dict[str, Any]:
    # The context engine calls this when a person is forgotten by name (ADR 0013).
    deleted = runtime.bank.delete_person(person)
    if not deleted:
        raise HTTPException(404, "no enrolled person of that name")
    return {"deleted_persons": len(deleted)}


@router.delete("/enrollment", summary="Forget every enrolled voice")
async def delete_enrollment(runtime: RuntimeDep) -> dict[str, Any]:
    return {"deleted_persons": runtime.bank.delete_all()}


@router.get(
    "/session/{session_id}",
    summary="A live session: its clock, clips, segments and unnamed speakers",
    responses={404: {"description": "no live session"}},
)
async def get_session(runtime: RuntimeDep, session_id: SessionIdPath) -> dict[str, Any]:
    live = runtime.sessions.get(session_id)
    if live is None:
        raise HTTPException(404, f"no live session {session_id}")
    return live.summary()


@router.post(
    "/session/{session_id}/end",
    summary="End a live session and answer with its segments (its transcript file stays; a "
    "new clip starts a new clock)",
    responses={404: {"description": "no live session"}},
)
async def end_session(
    runtime: RuntimeDep,
    session_id: SessionIdPath,
    sweep: Annotated[
        bool | None,
        Query(
            description="sweep the session's unswept audio before forgetting it; default: "
            "yes when AUDIO_PIPELINE_SWEEP_AUTO is on and that audio may hold speech"
        ),
    ] = None,
) -> dict[str, Any]:
    try:
        live, status = runtime.end_session(session_id, sweep=sweep)
    except LookupError as exc:
        raise HTTPException(404, str(exc).strip("'\"")) from None
    return end_answer(live, status)


@router.post(
    "/sweep/{session_id}",
    status_code=202,
    summary="Sweep a live session: re-transcribe its audio since the last sweep as a whole; "
    "the is_sweep segments replace overlapping non-pinned fast-path ones",
    responses={
        404: {"description": "no live session"},
        409: {"description": "a sweep of it is under way, or no new audio"},
        503: {"description": "models still loading"},
    },
)
async def sweep(runtime: RuntimeDep, session_id: SessionIdPath) -> dict[str, Any]:
    require_ready(runtime)
    try:
        status = runtime.start_sweep(session_id)
    except LookupError as exc:
        raise HTTPException(404, str(exc).strip("'\"")) from None
    except SweepConflictError as exc:
        raise HTTPException(409, str(exc)) from None
    return {"session_id": session_id, **status.summary(),
            "poll": f"/v1/session/{session_id}"}  # fmt: skip


@router.post("/cleanup", summary="Drop live sessions idle for longer than the session timeout")
async def cleanup(runtime: RuntimeDep) -> dict[str, Any]:
    return {"removed": runtime.sessions.cleanup()}


class FeedbackIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    session_id: SafeId
    segment_id: SegmentId  # the design's ids carry dots (seg-001-0.00-4.52)
    speaker: str | None = Field(default=None, min_length=1, max_length=128)
    emotion: Emotion | None = None


@router.post(
    "/feedback",
    summary="Correct a segment's speaker or emotion; the corrected segment is written pinned",
    responses={404: {"description": "no such session or segment"}},
)
async def feedback(runtime: RuntimeDep, body: FeedbackIn) -> dict[str, Any]:
    if body.speaker is None and body.emotion is None:
        raise HTTPException(422, "nothing to correct: give speaker and/or emotion")
    emotion = body.emotion
    if emotion is not None and emotion.engine is None:
        emotion = emotion.model_copy(update={"engine": "user"})
    try:
        return await runtime.feedback(body.session_id, body.segment_id, body.speaker, emotion)
    except LookupError as exc:
        raise HTTPException(404, str(exc).strip("'\"")) from None
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from None
