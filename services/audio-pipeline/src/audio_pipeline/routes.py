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
from audio_pipeline.runtime import AudioRuntime, SweepConflictError
from her_os_shared.ids import ID_PATTERN, SafeId
from her_os_shared.transcript import Emotion

router = APIRouter()


def get_runtime(request: Request) -> AudioRuntime:
    return request.app.state.runtime


def require_ready(runtime: AudioRuntime) -> None:
    """503 until the models are loaded (or with the reason a backend cannot load)."""
    if not runtime.ready.is_set():
        raise HTTPException(503, runtime.load_error or "models are loading; retry shortly")


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
    file: Annotated[UploadFile, File(description="WAV audio (any rate, mono or stereo)")],
    session_id: IdForm,
    device_id: IdForm = "unknown",
    stt_backend: Annotated[str | None, Form()] = None,
    ser_all_speakers: Annotated[bool, Form()] = True,
) -> dict[str, Any]:
    settings = runtime.settings
    if stt_backend is not None and stt_backend != settings.stt_backend:
        raise HTTPException(
            422,
            f"stt_backend {stt_backend!r} is not loaded; this service runs "
            f"{settings.stt_backend!r} (AUDIO_PIPELINE_STT_BACKEND)",
        )
    clip = await _clip(runtime, file)
    out = await runtime.transcribe(
        clip, session_id=session_id, device_id=device_id, ser_all_speakers=ser_all_speakers
    )
    result = out.result
    return {
        "session_id": session_id,
        "clip": out.index,
        "duration_s": round(clip.duration_s, 3),
        "session_audio_s": round(out.offset_s + out.duration_s, 3),
        "processing_s": None if result is None else round(result.timings_s.get("total", 0.0), 3),
        "segments": [] if result is None else [s.model_dump(mode="json") for s in result.segments],
        "speakers": {}
        if result is None
        else {
            label: {"name": who.label, "person": who.person, "similarity": who.similarity}
            for label, who in result.speakers.items()
        },
        # True: a sweep holds the models; this clip is kept and transcribed after it.
        "sweep_active": result is None,
        "deferred": result is None,
    }


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
    summary="End a live session (its transcript file stays; a new clip starts a new clock)",
    responses={404: {"description": "no live session"}},
)
async def end_session(
    runtime: RuntimeDep,
    session_id: SessionIdPath,
    sweep: Annotated[
        bool, Query(description="sweep the session's unswept audio before forgetting it")
    ] = False,
) -> dict[str, Any]:
    try:
        live, status = runtime.end_session(session_id, sweep=sweep)
    except LookupError as exc:
        raise HTTPException(404, str(exc).strip("'\"")) from None
    return {**live.summary(), "ended": True, "sweep": None if status is None else status.summary()}


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
    segment_id: SafeId
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
