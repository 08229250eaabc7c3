"""Voice sessions: `POST /start` reserves one (an id and its backends); the first SDP offer for
it opens the peer connection and starts its pipeline; the connection closing ends both.

SmallWebRTC signalling is Pipecat's `SmallWebRTCRequestHandler`; the app's lifespan calls
`close()` so open peer connections and pipelines end with the app (otherwise shutdown waits
about 30 s for them).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pipecat.transports.base_transport import TransportParams
from pipecat.transports.smallwebrtc.connection import IceServer, SmallWebRTCConnection
from pipecat.transports.smallwebrtc.request_handler import (
    SmallWebRTCPatchRequest,
    SmallWebRTCRequest,
    SmallWebRTCRequestHandler,
)
from pipecat.transports.smallwebrtc.transport import SmallWebRTCTransport
from pipecat.workers.runner import WorkerRunner

from annie_voice.chat import ChatService
from annie_voice.config import Settings
from annie_voice.voice.pipeline import VoiceModels, build_worker
from annie_voice.voice.rtc import unbuffer_audio_receivers
from annie_voice.voice.stt import STT_SAMPLE_RATE
from annie_voice.voice.tts import TTS_SAMPLE_RATE
from her_os_shared.creatures import CreatureName
from her_os_shared.events import EventType
from her_os_shared.logging import get_logger

log = get_logger(__name__)


class VoiceSessionError(RuntimeError):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


@dataclass
class VoiceSession:
    id: str
    backends: dict[str, str]
    created: datetime = field(default_factory=lambda: datetime.now(UTC))
    pc_id: str | None = None
    task: asyncio.Task[None] | None = None
    connection: SmallWebRTCConnection | None = None

    def info(self) -> dict[str, Any]:
        return {
            "session_id": self.id,
            "created": self.created.isoformat(),
            "connected": self.pc_id is not None,
            **self.backends,
        }


class VoiceSessions:
    def __init__(self, settings: Settings, chat: ChatService) -> None:
        self.settings = settings
        self.chat = chat
        self.models = VoiceModels.from_settings(settings)
        self.handler = SmallWebRTCRequestHandler(
            ice_servers=[IceServer(urls=url) for url in settings.ice_servers] or None
        )
        self.sessions: dict[str, VoiceSession] = {}
        self.ready = False  # the models are loaded (preload)

    async def preload(self) -> None:
        """Load (and verify) the configured models now, off the event loop. A backend that
        cannot run here is logged; /start reports it to the caller."""
        try:
            self.models.check()
            await asyncio.to_thread(self.models.stt.load)
            await asyncio.to_thread(self.models.tts.load)
            # The responder's stock phrases (how every offline answer opens) are synthesised
            # now, so a reply's first words cost no synthesis.
            phrases = tuple(getattr(self.chat.backend, "phrases", ()))
            await asyncio.to_thread(self.models.tts.warm, phrases)
        except Exception as exc:
            log.warning("voice.preload_failed", error=str(exc)[:300])
            return
        self.ready = True
        log.info("voice.models_ready", **self.models.describe())

    def backends(self) -> dict[str, str]:
        return {**self.models.describe(), "llm": self.chat.backend.name}

    def start(self) -> VoiceSession:
        """Reserve a session (checks the configured backends can run: VoiceBackendError)."""
        self.models.check()
        live = [s for s in self.sessions.values() if s.task is None or not s.task.done()]
        if len(live) >= self.settings.max_voice_sessions:
            raise VoiceSessionError(
                429, f"{len(live)} voice sessions are open (ANNIE_VOICE_MAX_VOICE_SESSIONS)"
            )
        for sid in [s.id for s in self.sessions.values() if s.task is not None and s.task.done()]:
            self.sessions.pop(sid, None)
        session = VoiceSession(id=uuid.uuid4().hex, backends=self.backends())
        self.sessions[session.id] = session
        return session

    async def offer(self, session_id: str | None, body: dict[str, Any]) -> dict[str, Any]:
        """An SDP offer (a new connection, or a renegotiation with `pc_id`) → the answer."""
        if session_id is None:  # POST /api/offer: a session on the fly
            session = self.start()
        else:
            found = self.sessions.get(session_id)
            if found is None:
                raise VoiceSessionError(404, f"no voice session {session_id}; POST /start first")
            session = found
        sdp, sdp_type = body.get("sdp"), body.get("type")
        if not isinstance(sdp, str) or not sdp.startswith("v=0") or sdp_type != "offer":
            raise VoiceSessionError(400, 'expected an SDP offer: {"sdp": "v=0…", "type": "offer"}')
        if "\nm=audio " not in sdp.replace("\r\n", "\n"):
            raise VoiceSessionError(400, "the SDP offer has no audio section (m=audio)")
        pc_id = body.get("pc_id")
        if pc_id is not None and pc_id != session.pc_id:
            raise VoiceSessionError(400, "pc_id does not belong to this session")
        if pc_id is None and session.pc_id is not None:
            raise VoiceSessionError(409, "this session is already connected; start a new one")
        request = SmallWebRTCRequest(
            sdp=sdp, type="offer", pc_id=pc_id, restart_pc=bool(body.get("restart_pc"))
        )

        async def on_connection(connection: SmallWebRTCConnection) -> None:
            session.pc_id = connection.pc_id
            session.connection = connection
            self.chat.observer.emit(CreatureName.GARGOYLE, EventType.START, session_id=session.id)
            session.task = asyncio.create_task(
                self._run(session, connection), name=f"voice-{session.id}"
            )

        try:
            answer = await self.handler.handle_web_request(request, on_connection)
        except VoiceSessionError:
            raise
        except Exception as exc:
            log.warning("voice.offer_failed", session_id=session.id, error=str(exc)[:300])
            raise VoiceSessionError(400, f"the SDP offer was refused: {exc}") from exc
        if not answer:
            raise VoiceSessionError(400, "the SDP offer produced no answer")
        if session.connection is not None:
            # Before the answer goes back (no media can flow before it); a renegotiation
            # may have made new receivers.
            unbuffer_audio_receivers(session.connection.pc)
        return {**answer, "session_id": session.id}

    async def patch(self, session_id: str, body: dict[str, Any]) -> None:
        """Trickle ICE: candidates for the session's peer connection."""
        session = self.sessions.get(session_id)
        if session is None:
            raise VoiceSessionError(404, f"no voice session {session_id}")
        if session.pc_id is None or body.get("pc_id") != session.pc_id:
            raise VoiceSessionError(400, "pc_id does not belong to this session")
        from pipecat.transports.smallwebrtc.request_handler import IceCandidate

        try:
            candidates = [
                IceCandidate(
                    candidate=c["candidate"],
                    sdp_mid=c["sdp_mid"],
                    sdp_mline_index=c["sdp_mline_index"],
                )
                for c in body.get("candidates") or []
            ]
        except (KeyError, TypeError) as exc:
            raise VoiceSessionError(400, f"bad ICE candidate: {exc}") from exc
        await self.handler.handle_patch_request(
            SmallWebRTCPatchRequest(pc_id=session.pc_id, candidates=candidates)
        )

    async def _run(self, session: VoiceSession, connection: SmallWebRTCConnection) -> None:
        transport = SmallWebRTCTransport(
            webrtc_connection=connection,
            params=TransportParams(
                audio_in_enabled=True,
                audio_out_enabled=True,
                audio_in_sample_rate=STT_SAMPLE_RATE,
                audio_out_sample_rate=TTS_SAMPLE_RATE,
            ),
        )
        worker = build_worker(self.settings, self.models, self.chat, session.id, transport)

        @transport.event_handler("on_client_disconnected")
        async def _gone(_transport: Any, _client: Any) -> None:
            await worker.cancel()

        runner = WorkerRunner(handle_sigint=False)
        try:
            await runner.add_workers(worker)
            await runner.run()
        except Exception:
            log.exception("voice.pipeline_failed", session_id=session.id)
        finally:
            log.info("voice.session_ended", session_id=session.id)
            self.chat.observer.emit(
                CreatureName.GARGOYLE, EventType.COMPLETE, session_id=session.id
            )

    async def close(self) -> None:
        await self.handler.close()
        tasks = [s.task for s in self.sessions.values() if s.task is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self.sessions.clear()
