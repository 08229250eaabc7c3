"""The text chat: sessions (in memory, least recently used dropped past `max_sessions`) and
one turn of the conversation as a stream of events.

A turn: on a new session the memory briefing first (`session` event); then what the turn
answers from (`memories` event: the facts and segments — a language model gets them in its
prompt, from the briefing on a session's first turn and from a search of the turn's own words
on later ones; the offline responder says which it used), then the backend streams; text goes
through the tool-call text filter to `token` events; tool calls are run (`tool_use` events)
and their results given back to the model, at most `max_tool_rounds` times; `done` closes the
turn with the full text, usage and timings, `error` when it failed.

No memory leaves the machine through a tool: while the session's context holds memory, a
`fetch_webpage` call may read only a URL the user gave in this turn or this turn's web_search
returned (`UrlProvenance`); any other is refused before it runs, and the model is told why.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from dataclasses import asdict, dataclass, field, is_dataclass
from datetime import UTC, datetime
from typing import Any

from annie_voice.briefing import Briefing, build_briefing, system_prompt
from annie_voice.config import Settings
from annie_voice.engine import EngineClient, KnownFact, Memory
from annie_voice.llm.base import (
    ChatBackend,
    LLMError,
    MemoryUsed,
    Message,
    TextDelta,
    Tool,
    ToolCall,
    Usage,
)
from annie_voice.llm.pool import BackendPool
from annie_voice.llm.toolfilter import ToolCallTextFilter
from annie_voice.lookahead import MemoryLookahead
from annie_voice.observe import Observer
from annie_voice.tools.fetch import UrlProvenance, url_host
from her_os_shared.creatures import CreatureName, responder_creature, tool_creature
from her_os_shared.events import EventType
from her_os_shared.logging import get_logger

log = get_logger(__name__)

SUMMARY_CHARS = 300
# The tool whose reads are limited by provenance, and the one whose results it may read.
FETCH_TOOL = "fetch_webpage"
SEARCH_TOOL = "web_search"


@dataclass(frozen=True, slots=True)
class ChatEvent:
    """One Server-Sent Event of a turn: `session`, `memories`, `token`, `tool_use`, `done` or
    `error`."""

    event: str
    data: dict[str, Any]


@dataclass
class ChatSession:
    id: str
    backend: str
    created: datetime = field(default_factory=lambda: datetime.now(UTC))
    turns: int = 0
    briefing: Briefing | None = None
    history: list[Message] = field(default_factory=list)
    # the engine's forget marker when the session was briefed (None: not known)
    memory_marker: str | None = None
    # Whether memory has been in this session's context (a briefing or a turn's memory in
    # the prompt; the history may quote it after): fetch_webpage is then limited.
    holds_memory: bool = False
    # what Annie said when the voice session opened ("": no greeting)
    greeting: str = ""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def briefed(self) -> bool:
        return self.briefing is not None and self.briefing.status == "ok"

    def info(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "created": self.created.isoformat(),
            "backend": self.backend,
            "turns": self.turns,
            "briefed": self.briefed,
            "memory": None if self.briefing is None else self.briefing.status,
        }


class SessionStore:
    """Sessions by id, most recently used last; past `capacity` the least recent goes."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._sessions: OrderedDict[str, ChatSession] = OrderedDict()
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: str) -> ChatSession | None:
        session = self._sessions.get(session_id)
        if session is not None:
            self._sessions.move_to_end(session_id)
        return session

    def add(self, session: ChatSession) -> None:
        self._sessions[session.id] = session
        self._sessions.move_to_end(session.id)
        while len(self._sessions) > self.capacity:
            oldest, _ = self._sessions.popitem(last=False)
            self.evicted += 1
            log.info("chat.session_evicted", session_id=oldest)

    def list(self) -> list[ChatSession]:
        """Most recently used first."""
        return list(reversed(self._sessions.values()))


class SessionBusyError(RuntimeError):
    """A turn is already running in this session."""


class BackendConflictError(RuntimeError):
    """A request named another backend than the one its session was created with."""

    def __init__(self, session_id: str, backend: str, requested: str) -> None:
        self.detail = (
            f"session {session_id} runs llm_backend {backend!r}; it cannot switch to "
            f"{requested!r} (start a new session for another backend, or omit llm_backend)"
        )
        super().__init__(self.detail)


def _iso(when: datetime | None) -> str | None:
    return when.isoformat() if when else None


def memories_event(facts: Sequence[KnownFact], memories: Sequence[Memory]) -> ChatEvent:
    """The `memories` event: the facts (with what they replaced) and segments a turn used."""
    return ChatEvent(
        "memories",
        {
            "facts": [
                {"fact": f.fact, "subject": f.subject, "predicate": f.predicate,
                 "object": f.object, "since": _iso(f.since),
                 "replaced": [{"fact": r.fact, "valid_at": _iso(r.valid_at),
                               "invalid_at": _iso(r.invalid_at)} for r in f.replaced]}
                for f in facts
            ],
            "memories": [
                {"text": m.text, "speaker": m.speaker, "timestamp": _iso(m.timestamp),
                 "source_session": m.source_session, "tier": m.tier}
                for m in memories
            ],
        },
    )  # fmt: skip


def _lookahead_of(backend: ChatBackend) -> MemoryLookahead | None:
    lookahead = getattr(backend, "lookahead", None)
    return lookahead if isinstance(lookahead, MemoryLookahead) else None


def summarise(result: dict[str, Any]) -> str:
    text = json.dumps(result, ensure_ascii=False, default=str)
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"


class ChatService:
    def __init__(
        self,
        settings: Settings,
        backend: ChatBackend,
        engine: EngineClient | None,
        observer: Observer,
        tools: Sequence[Tool] = (),
        backends: BackendPool | None = None,
    ) -> None:
        """`backend`: the default responder; `backends`: those a session may choose instead
        (None: the default alone)."""
        self.settings = settings
        self.backend = backend
        self.backends = backends or BackendPool(settings, backend, None)
        # Backend choices made before their session opens (POST /start: the voice pipeline
        # opens the chat session at connect), by session id; kept past the open so a session
        # evicted and opened again keeps its backend; bounded like the sessions.
        self._reserved: OrderedDict[str, str] = OrderedDict()
        self.engine = engine
        self.observer = observer
        names = [t.name for t in tools]
        if len(set(names)) != len(names):
            raise ValueError(f"tool names must be unique: {names}")
        self.tools: dict[str, Tool] = {t.name: t for t in tools}
        self.sessions = SessionStore(settings.max_sessions)

    @property
    def me(self) -> str | None:
        """Who "I" is to the engine: the first owner speaker label, else the engine's guess."""
        owners = self.settings.owner_speakers
        return owners[0] if owners else None

    async def turn_memory(self, message: str) -> Briefing:
        """The memory block for a later turn's own words (facts first), for a language model;
        the owner's facts and promises are in the session's briefing already."""
        return await build_briefing(
            self.engine if self.settings.briefing_enabled and self.settings.turn_memory else None,
            message,
            limit=self.settings.briefing_limit,
            timeout_s=self.settings.briefing_timeout_s,
            max_chars=self.settings.briefing_max_chars,
            me=self.me,
            owner=False,
        )

    # --- sessions ---

    async def brief(self, session: ChatSession, query: str | None) -> Briefing:
        self.observer.emit(CreatureName.SPHINX, EventType.START, session_id=session.id)
        briefing = await build_briefing(
            self.engine if self.settings.briefing_enabled else None,
            (query or "").strip() or self.settings.briefing_query,
            limit=self.settings.briefing_limit,
            timeout_s=self.settings.briefing_timeout_s,
            max_chars=self.settings.briefing_max_chars,
            me=self.me,
        )
        session.briefing = briefing
        self.observer.emit(
            CreatureName.SPHINX,
            "error" if briefing.status == "unavailable" else "complete",
            session_id=session.id,
            data=briefing.info(),
        )
        return briefing

    def reserve_backend(self, session_id: str, llm_backend: str | None) -> str:
        """Fix the backend of a session not opened yet (a voice session at `/start`); returns
        its name. Raises BackendUnavailableError."""
        name = self.backends.resolve(llm_backend)
        self.backends.get(name)  # built now: a failure belongs to /start, not to the call
        self._reserved[session_id] = name
        self._reserved.move_to_end(session_id)
        while len(self._reserved) > self.settings.max_sessions:
            self._reserved.popitem(last=False)
        return name

    def backend_of(self, session: ChatSession) -> ChatBackend:
        return self.backends.get(session.backend)

    async def open_session(
        self,
        session_id: str | None,
        first_message: str | None = None,
        llm_backend: str | None = None,
    ) -> tuple[ChatSession, bool]:
        """The session with this id, or a new one (briefed from memory). Returns it and
        whether it is new. `llm_backend` is a request's choice (None or `auto`: an existing
        session's own, else the one reserved at /start, else the default), checked before
        anything opens: unknown or unconfigured → BackendUnavailableError; another than the
        session's → BackendConflictError. A session keeps its backend: its history holds the
        memory it was briefed with, and a switch (say from a local model to Claude) would send
        that history to another provider than the one the session was started with."""
        explicit = llm_backend is not None and llm_backend != "auto"
        wanted = self.backends.resolve(llm_backend) if explicit else None
        if session_id is not None:
            existing = self.sessions.get(session_id)
            if existing is not None:
                if wanted is not None and wanted != existing.backend:
                    raise BackendConflictError(existing.id, existing.backend, str(llm_backend))
                return existing, False
            reserved = self._reserved.get(session_id)
            if reserved is not None and wanted is not None and wanted != reserved:
                raise BackendConflictError(session_id, reserved, str(llm_backend))
            wanted = wanted or reserved
        name = wanted or self.backend.name
        backend = self.backends.get(name)
        session = ChatSession(id=session_id or uuid.uuid4().hex, backend=backend.name)
        self.sessions.add(session)
        self.observer.emit(
            CreatureName.MERMAID,
            EventType.START,
            session_id=session.id,
            data={"backend": backend.name},
        )
        session.memory_marker = await self._forget_marker()  # before the briefing it covers
        await self.brief(session, first_message)
        return session, True

    async def _forget_marker(self) -> str | None:
        if self.engine is None:
            return None
        return await self.engine.forget_marker(self.settings.forget_check_timeout_s)

    async def forget_if_forgotten(
        self, session: ChatSession, message: str, marker: str | None
    ) -> bool:
        """When the engine forgot something since this session was briefed (`marker`: the
        engine's forget marker, read now), the session lets go of what it holds: its history
        (the user's words and Annie's answers may quote the forgotten memory) and its
        briefing, which is taken again. Returns whether it did. A session briefed while the
        marker was unknown (engine down) adopts the marker."""
        if marker is None or marker == session.memory_marker:
            return False
        if session.memory_marker is None:
            session.memory_marker = marker
            return False
        log.info("chat.memory_reset", session_id=session.id, reason="forget",
                 dropped_messages=len(session.history))  # fmt: skip
        session.history.clear()
        session.holds_memory = False  # the history that quoted it is gone; re-briefed below
        session.memory_marker = marker
        await self.brief(session, message)
        return True

    @property
    def lookahead(self) -> MemoryLookahead | None:
        """The default backend's searches started ahead of a turn; only a backend that
        searches memory on every turn (the offline responder) has one."""
        return _lookahead_of(self.backend)

    async def prepare(self, message: str) -> None:
        """The user's next message, known before their turn ends (a voice transcript): start
        what the turn will need (the offline responder's memory search), under the forget
        marker read first."""
        lookahead = self.lookahead
        if lookahead is None or not message.strip():
            return
        lookahead.start(message, await self._forget_marker())

    # --- a turn ---

    async def _run_tool(
        self, call: ToolCall, provenance: UrlProvenance
    ) -> tuple[dict[str, Any], tuple[str, ...]]:
        """The call's result for the model, and the URLs it offered (web_search's)."""
        result = await self._tool_result(call, provenance)
        if call.name != SEARCH_TOOL:
            return result, ()
        links = result.pop("links", None)
        if "error" in result or not isinstance(links, (list, tuple)):
            return result, ()
        return result, tuple(u for u in links if isinstance(u, str))

    async def _tool_result(self, call: ToolCall, provenance: UrlProvenance) -> dict[str, Any]:
        tool = self.tools.get(call.name)
        if call.error is not None:
            return {"error": call.error}
        if tool is None:
            return {"error": f"unknown tool {call.name!r}; available: {sorted(self.tools)}"}
        if call.name == FETCH_TOOL:
            url = call.arguments.get("url")
            refusal = provenance.refusal(url)
            if refusal is not None:
                # the host only: the path and query are what may carry a memory
                log.warning("chat.fetch_refused", reason="provenance", host=url_host(str(url)))
                return {"ok": False, "content": f"Error: {refusal}", "error": refusal}
        try:
            async with asyncio.timeout(self.settings.tool_timeout_s):
                result = await tool.run(call.arguments)
        except TimeoutError:
            return {"error": f"the tool took longer than {self.settings.tool_timeout_s:g} s"}
        except Exception as exc:
            log.warning("chat.tool_failed", tool=call.name, error=str(exc)[:300])
            return {"error": f"{type(exc).__name__}: {exc}"[:1000]}
        if is_dataclass(result) and not isinstance(result, type):
            # annie_voice.tools' ToolResult: ok, content, data (for the client page), error
            return {k: v for k, v in asdict(result).items() if v is not None}
        if not isinstance(result, dict):
            return {"result": result}
        return result

    def _history_window(self, session: ChatSession) -> list[Message]:
        history = session.history[-self.settings.max_history_messages :]
        # Never start with a tool result whose call was cut off, nor with Annie's voice
        # greeting: several chat templates and APIs refuse a conversation that opens with
        # the assistant. The system prompt says she greeted (`_greeted`).
        while history and history[0].role != "user":
            history = history[1:]
        return history

    @staticmethod
    def _greeted(system: str, session: ChatSession) -> str:
        if not session.greeting:
            return system
        return f'{system}\n\nYou opened this voice conversation by saying: "{session.greeting}"'

    def record_greeting(self, session: ChatSession, text: str) -> bool:
        """A voice session's greeting, spoken before the user's first turn, as the opening
        assistant message of the session's history. Only into an empty, idle session (a
        greeting after the user spoke would sit out of order); returns whether it was."""
        if not text or session.history or session.lock.locked():
            return False
        session.history.append(Message(role="assistant", content=text))
        session.greeting = text
        return True

    async def turn(
        self, session: ChatSession, message: str, *, new: bool
    ) -> AsyncIterator[ChatEvent]:
        """Run one turn; yields its events. Raises SessionBusyError when the session is busy
        (check before streaming: `session.lock.locked()`)."""
        if session.lock.locked():
            raise SessionBusyError(session.id)
        async with session.lock:
            async for event in self._turn(session, message, new=new):
                yield event

    async def _turn(
        self, session: ChatSession, message: str, *, new: bool
    ) -> AsyncIterator[ChatEvent]:
        started = time.monotonic()
        backend = self.backend_of(session)
        lookahead = _lookahead_of(backend)
        prepared = lookahead is not None and lookahead.pending(message)
        # A new session was briefed under the marker just read; a prepared search is used
        # only if nothing was forgotten since it started, which needs the marker now.
        marker = await self._forget_marker() if not new or prepared else None
        if lookahead is not None and prepared:
            lookahead.keep_only(marker)
        reset = not new and await self.forget_if_forgotten(session, message, marker)
        briefing = session.briefing or Briefing(status="disabled")
        yield ChatEvent(
            "session",
            {
                "session_id": session.id,
                "new": new,
                "backend": session.backend,
                "tools": sorted(self.tools) if backend.supports_tools else [],
                "memory": briefing.info(),
                "memory_reset": reset,
            },
        )
        mark = len(session.history)
        session.history.append(Message(role="user", content=message))
        system = system_prompt(self.settings.system_prompt, briefing)
        session.holds_memory |= bool(briefing.text)
        if lookahead is None:  # a language model: it answers from what the prompt holds
            used = briefing
            if not new and not reset:  # a new or reset session was briefed on `message`
                used = await self.turn_memory(message)
                system = system_prompt(system, used)
                session.holds_memory |= bool(used.text)
            yield memories_event(used.facts, used.memories)
        system = self._greeted(system, session)
        tools = list(self.tools.values()) if backend.supports_tools else []
        # The user's own words (typed, or the transcript of what they said) may name URLs.
        provenance = UrlProvenance(restricted=session.holds_memory, user_text=message)
        usage = Usage()
        full: list[str] = []
        first_token_ms: int | None = None
        tool_runs = 0
        self.observer.emit(
            responder_creature(backend.name),
            EventType.START,
            session_id=session.id,
            data={"backend": backend.name},
        )
        try:
            for round_no in range(self.settings.max_tool_rounds + 1):
                offered = tools if round_no < self.settings.max_tool_rounds else []
                text_filter = ToolCallTextFilter(known_tools=[t.name for t in offered])
                round_text: list[str] = []
                calls: list[ToolCall] = []
                async for item in backend.stream(
                    system=system, messages=self._history_window(session), tools=offered
                ):
                    if isinstance(item, TextDelta):
                        visible, leaked = text_filter.feed(item.text)
                        calls += leaked
                    elif isinstance(item, ToolCall):
                        visible = ""
                        calls.append(item)
                    elif isinstance(item, MemoryUsed):
                        yield memories_event(item.facts, item.memories)
                        continue
                    else:
                        usage = Usage(
                            usage.input_tokens + item.input_tokens,
                            usage.output_tokens + item.output_tokens,
                        )
                        continue
                    if visible:
                        if first_token_ms is None:
                            first_token_ms = int((time.monotonic() - started) * 1000)
                        round_text.append(visible)
                        yield ChatEvent("token", {"text": visible})
                visible, leaked = text_filter.flush()
                calls += leaked
                if visible:
                    round_text.append(visible)
                    yield ChatEvent("token", {"text": visible})
                text = "".join(round_text)
                full.append(text)
                if not calls or not offered:
                    session.history.append(Message(role="assistant", content=text))
                    break
                session.history.append(
                    Message(role="assistant", content=text, tool_calls=tuple(calls))
                )
                for call in calls:
                    tool_runs += 1
                    self.observer.emit(
                        tool_creature(call.name),
                        EventType.START,
                        session_id=session.id,
                        data={"tool": call.name},
                    )
                    tool_started = time.monotonic()
                    result, links = await self._run_tool(call, provenance)
                    provenance.allow(links)
                    ok = "error" not in result
                    self.observer.emit(
                        tool_creature(call.name),
                        "complete" if ok else "error",
                        session_id=session.id,
                        data={
                            "tool": call.name,
                            "ms": int((time.monotonic() - tool_started) * 1000),
                            "ok": ok,
                        },
                    )
                    # A table or chart payload is for the client page; the model reads the rest.
                    shown = result.get("data")
                    for_model = {k: v for k, v in result.items() if k != "data"}
                    content = json.dumps(for_model, ensure_ascii=False, default=str)
                    if len(content) > self.settings.tool_result_max_chars:
                        content = content[: self.settings.tool_result_max_chars] + "…(cut)"
                    session.history.append(
                        Message(role="tool", content=content, tool_call_id=call.id, name=call.name)
                    )
                    yield ChatEvent(
                        "tool_use",
                        {
                            "id": call.id,
                            "name": call.name,
                            "args": call.arguments,
                            # the design's name for the arguments (`tool_use {name, input}`)
                            "input": call.arguments,
                            "ok": ok,
                            "result_summary": summarise(for_model),
                            **({"data": shown} if isinstance(shown, dict) else {}),
                        },
                    )
        except LLMError as exc:
            del session.history[mark:]
            log.warning("chat.llm_failed", session_id=session.id, error=str(exc))
            self.observer.emit(
                responder_creature(backend.name),
                EventType.ERROR,
                session_id=session.id,
                data={"error": str(exc)[:500]},
            )
            yield ChatEvent("error", {"message": str(exc), "kind": "llm"})
            return
        except Exception as exc:
            del session.history[mark:]
            log.exception("chat.turn_failed", session_id=session.id)
            yield ChatEvent(
                "error", {"message": f"the turn failed: {type(exc).__name__}", "kind": "internal"}
            )
            return
        session.turns += 1
        total_ms = int((time.monotonic() - started) * 1000)
        self.observer.emit(
            responder_creature(backend.name),
            EventType.COMPLETE,
            session_id=session.id,
            data={
                "backend": backend.name,
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
                "tool_calls": tool_runs,
                "ms": total_ms,
            },
        )
        yield ChatEvent(
            "done",
            {
                "session_id": session.id,
                "text": "".join(full),
                "turn": session.turns,
                "tool_calls": tool_runs,
                "usage": {
                    "input_tokens": usage.input_tokens,
                    "output_tokens": usage.output_tokens,
                },
                "timing": {
                    "briefing_ms": briefing.elapsed_ms if new else 0,
                    "first_token_ms": first_token_ms,
                    "total_ms": total_ms,
                },
            },
        )
