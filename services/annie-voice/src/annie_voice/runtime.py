"""What the app holds while it runs: the engine client, the backend, the observer and the
chat service. Built in the lifespan, closed at shutdown."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

import httpx

from annie_voice.chat import ChatService
from annie_voice.config import Settings
from annie_voice.engine import EngineClient
from annie_voice.llm import BackendName, BackendPool, ChatBackend, Tool, create_backend
from annie_voice.observe import Observer
from annie_voice.tools import ToolConfig, make_tools
from annie_voice.voice.sessions import VoiceSessions


class Runtime:
    def __init__(
        self,
        settings: Settings,
        *,
        tools: Sequence[Tool] | None = None,
        backend: ChatBackend | None = None,
        engine_transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.settings = settings
        self.engine = EngineClient(
            settings.context_engine_url,
            settings.engine_token(),
            timeout_s=settings.engine_timeout_s,
            transport=engine_transport,
        )
        self.observer = Observer(
            self.engine if settings.events_enabled else None,
            queue_size=settings.events_queue_size,
            flush_s=settings.events_flush_s,
            batch_max=settings.events_batch_max,
        )
        self.backend = backend or create_backend(settings, self.engine)

        def build(name: BackendName) -> ChatBackend:
            return create_backend(settings, self.engine, name)

        # The backends a session may choose (`llm_backend`): the default and those whose
        # settings are complete, built when first chosen.
        self.backends = BackendPool(settings, self.backend, build)
        if tools is None:  # the tools the settings enable
            tools = make_tools(tool_config(settings))
        self.chat = ChatService(
            settings, self.backend, self.engine, self.observer, tools, backends=self.backends
        )
        # Voice sessions (Pipecat over SmallWebRTC); models load in the background at start
        # (voice_preload) or on the first session.
        self.voice = VoiceSessions(settings, self.chat)
        self.preload: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.observer.start()
        if self.settings.voice_preload:
            self.preload = asyncio.create_task(self.voice.preload(), name="voice-preload")

    async def stop(self) -> None:
        if self.preload is not None and not self.preload.done():
            self.preload.cancel()  # a load already in its thread finishes there
            with contextlib.suppress(asyncio.CancelledError):
                await self.preload
        await self.voice.close()  # peer connections and pipelines first
        await self.observer.stop()
        await self.backends.aclose()  # the default and any a session chose
        await self.engine.aclose()

    async def status(self) -> dict[str, object]:
        lookahead = self.chat.lookahead
        return {
            "backend": self.backend.name,
            "model": getattr(self.backend, "model", None),
            # what a request's llm_backend may choose here (the default first)
            "backends": self.backends.available(),
            "tools": sorted(self.chat.tools) if self.backend.supports_tools else [],
            "engine": {
                "url": self.settings.context_engine_url,
                "reachable": await self.engine.reachable(),
            },
            "sessions": len(self.chat.sessions),
            "voice": {
                **self.voice.backends(),
                "sessions": len(self.voice.sessions),
                "ready": self.voice.ready,
            },
            "sessions_evicted": self.chat.sessions.evicted,
            "events": self.observer.stats.as_dict(),
            # memory searches started from voice transcripts before the turn ended
            "lookahead": None if lookahead is None else lookahead.stats(),
        }


def tool_config(settings: Settings) -> ToolConfig:
    """The tools' settings from Annie's (ANNIE_VOICE_*)."""
    return ToolConfig(
        searxng_url=settings.searxng_url,
        fetch_max_bytes=settings.fetch_max_bytes,
        fetch_timeout_s=settings.fetch_timeout_s,
        python_timeout_s=settings.python_timeout_s,
        python_memory_bytes=settings.python_memory_mb * 1024 * 1024,
        python_scratch_root=settings.python_scratch_root.resolve(),
        enabled=frozenset(settings.tools_enabled),
    )
