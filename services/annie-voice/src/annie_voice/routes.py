"""The routes: thin; the chat loop lives in chat.py, the rest in runtime.py."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, ConfigDict, Field, SecretStr
from sse_starlette import EventSourceResponse, ServerSentEvent

from annie_voice.chat import BackendConflictError, ChatEvent, ChatService, ChatSession
from annie_voice.llm.pool import BackendUnavailableError, LlmBackendRequest
from annie_voice.runtime import Runtime, tool_config
from annie_voice.tools import tool_availability
from annie_voice.voice.errors import VoiceBackendError
from annie_voice.voice.page import page_html
from annie_voice.voice.sessions import VoiceSessionError, VoiceSessions
from her_os_shared.auth import require_token
from her_os_shared.ids import SafeId

MAX_MESSAGE_CHARS = 32000


BACKEND_FIELD = Field(
    default="auto",
    description=(
        "The responder: `auto` (the server's default, ANNIE_VOICE_LLM_BACKEND), `none` (the "
        "offline memory responder), `openai` or its design name `qwen3.5-9b` (the "
        "OpenAI-compatible LLM), `claude`. One not configured here → 422 naming the settings."
    ),
)


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    message: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    session_id: SafeId | None = None
    # A session keeps the backend it was created with: another one named later → 409.
    llm_backend: LlmBackendRequest = BACKEND_FIELD


class StartRequest(BaseModel):
    """`POST /start`'s optional body (the design: the backend is chosen per session there)."""

    model_config = ConfigDict(extra="forbid")

    llm_backend: LlmBackendRequest = BACKEND_FIELD


def get_runtime(request: Request) -> Runtime:
    return request.app.state.runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


def _sse(event: ChatEvent) -> ServerSentEvent:
    """`event: <name>` for the project's clients, and the name again as the data's `type` for
    a client that reads only `data:` lines (the design's frames)."""
    data = {"type": event.event, **event.data}
    return ServerSentEvent(event=event.event, data=json.dumps(data, ensure_ascii=False))


def _backend_error(exc: BackendUnavailableError | BackendConflictError) -> HTTPException:
    status = 409 if isinstance(exc, BackendConflictError) else 422
    return HTTPException(status_code=status, detail=exc.detail)


async def _stream(
    chat: ChatService, session: ChatSession, message: str, new: bool
) -> AsyncIterator[ServerSentEvent]:
    async for event in chat.turn(session, message, new=new):
        yield _sse(event)


def api_router(token: SecretStr | None) -> APIRouter:
    router = APIRouter(dependencies=[Depends(require_token(token))])

    @router.post(
        "/v1/chat",
        tags=["chat"],
        summary="Chat with Annie (Server-Sent Events: session, token, tool_use, done, error)",
        response_class=EventSourceResponse,
    )
    async def chat(body: ChatRequest, runtime: RuntimeDep) -> EventSourceResponse:
        limit = runtime.settings.max_message_chars
        if not body.message.strip():
            raise HTTPException(status_code=422, detail="message: must not be blank")
        if len(body.message) > limit:
            raise HTTPException(status_code=422, detail=f"message: longer than {limit} characters")
        try:
            session, new = await runtime.chat.open_session(
                body.session_id, body.message, body.llm_backend
            )
        except (BackendUnavailableError, BackendConflictError) as exc:
            raise _backend_error(exc) from None
        if session.lock.locked():
            raise HTTPException(status_code=409, detail="a turn is already running in this session")
        return EventSourceResponse(_stream(runtime.chat, session, body.message, new))

    @router.get("/v1/chat/sessions", tags=["chat"], summary="The chat sessions held in memory")
    async def sessions(runtime: RuntimeDep) -> dict[str, Any]:
        listed = runtime.chat.sessions.list()
        return {
            "sessions": [s.info() for s in listed],
            "total": len(listed),
            "capacity": runtime.chat.sessions.capacity,
        }

    @router.get("/api/status", tags=["status"], summary="Backend, engine reachability, sessions")
    async def status(runtime: RuntimeDep) -> dict[str, Any]:
        status = await runtime.status()
        # tools the settings enable that cannot run on this host, with why (execute_python
        # without a kernel sandbox); in a thread: the first call may run the sandbox probe
        config = tool_config(runtime.settings)
        status["tool_availability"] = await asyncio.to_thread(tool_availability, config)
        return status

    return router


# --- the voice client and WebRTC signalling ---


def get_voice(request: Request) -> VoiceSessions:
    return request.app.state.runtime.voice


VoiceDep = Annotated[VoiceSessions, Depends(get_voice)]
JsonBody = Annotated[dict[str, Any], Body()]


def _voice_error(exc: VoiceSessionError | VoiceBackendError) -> HTTPException:
    if isinstance(exc, VoiceBackendError):
        return HTTPException(status_code=503, detail=str(exc))
    return HTTPException(status_code=exc.status, detail=exc.detail)


def page_router() -> APIRouter:
    """`GET /`: the voice client page. It holds no secret, so it is served without a token;
    the page takes the token from `?token=` once (then keeps it in localStorage and drops it
    from the address bar) and sends it as X-Internal-Token to `/start` and the offers."""
    router = APIRouter()

    @router.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page() -> HTMLResponse:
        return HTMLResponse(page_html(), headers={"Cache-Control": "no-store"})

    return router


def voice_router(token: SecretStr | None) -> APIRouter:
    router = APIRouter(dependencies=[Depends(require_token(token))], tags=["voice"])

    @router.post("/start", summary="Reserve a voice session (its id and backends)")
    async def start(
        voice: VoiceDep,
        runtime: RuntimeDep,
        body: Annotated[StartRequest | None, Body()] = None,  # none (or empty): the default
    ) -> dict[str, Any]:
        choice = body.llm_backend if body is not None else "auto"
        try:
            # checked (and built) before a voice session takes a slot
            runtime.chat.backends.get(runtime.chat.backends.resolve(choice))
        except BackendUnavailableError as exc:
            raise _backend_error(exc) from None
        try:
            session = voice.start()
        except (VoiceSessionError, VoiceBackendError) as exc:
            raise _voice_error(exc) from None
        if choice != "auto":
            # the pipeline opens the chat session at connect; it takes this backend then
            session.backends["llm"] = runtime.chat.reserve_backend(session.id, choice)
        return session.info()

    @router.post("/sessions/{session_id}/api/offer", summary="SDP offer → answer")
    async def offer(session_id: SafeId, body: JsonBody, voice: VoiceDep) -> dict[str, Any]:
        try:
            return await voice.offer(session_id, body)
        except (VoiceSessionError, VoiceBackendError) as exc:
            raise _voice_error(exc) from None

    @router.patch("/sessions/{session_id}/api/offer", summary="Trickle ICE candidates")
    async def candidates(session_id: SafeId, body: JsonBody, voice: VoiceDep) -> dict[str, str]:
        try:
            await voice.patch(session_id, body)
        except (VoiceSessionError, VoiceBackendError) as exc:
            raise _voice_error(exc) from None
        return {"status": "ok"}

    @router.post("/api/offer", summary="SDP offer without /start (compatibility)")
    async def offer_compat(body: JsonBody, voice: VoiceDep) -> dict[str, Any]:
        try:
            return await voice.offer(None, body)
        except (VoiceSessionError, VoiceBackendError) as exc:
            raise _voice_error(exc) from None

    return router
