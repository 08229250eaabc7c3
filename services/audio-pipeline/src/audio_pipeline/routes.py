"""The /v1 API of the audio pipeline (thin: decoding in audio.py, work in runtime.py)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, File, Form, HTTPException, Request, UploadFile

from audio_pipeline.audio import AudioError, decode_audio
from audio_pipeline.runtime import AudioRuntime
from her_os_shared.ids import ID_PATTERN

router = APIRouter()


def get_runtime(request: Request) -> AudioRuntime:
    return request.app.state.runtime


RuntimeDep = Annotated[AudioRuntime, Depends(get_runtime)]
IdForm = Annotated[str, Form(pattern=ID_PATTERN, max_length=128)]


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
    if not runtime.ready.is_set():
        raise HTTPException(503, runtime.load_error or "models are loading; retry shortly")
    data = await file.read()
    try:
        clip = decode_audio(data, max_seconds=settings.max_audio_seconds)
    except AudioError as exc:
        raise HTTPException(exc.status_code, exc.reason) from None
    live, result, index = await runtime.transcribe(
        clip, session_id=session_id, device_id=device_id, ser_all_speakers=ser_all_speakers
    )
    return {
        "session_id": session_id,
        "clip": index,
        "duration_s": round(clip.duration_s, 3),
        "session_audio_s": round(live.offset_s, 3),
        "processing_s": round(result.timings_s.get("total", 0.0), 3),
        "segments": [s.model_dump(mode="json") for s in result.segments],
        "speakers": {
            label: {"name": who.label, "person": who.person, "similarity": who.similarity}
            for label, who in result.speakers.items()
        },
        "sweep_active": False,
    }
