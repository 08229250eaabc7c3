"""Annie's turn in the voice pipeline: the same ChatService as the text chat, so the memory
briefing, the tools, the offline memory responder and the tool-call text filter behave the
same in voice and text.

When the pipeline starts it opens the voice session's chat session, which briefs it from
memory, so the first answer does not wait for the briefing; the page gets a `briefing` message
with its status and time. When the client connects (the transport's `ClientConnectedFrame`)
Annie greets, as the design orders it: once the briefing is loaded, or once the briefing's
timeout has passed, whichever is first, a `TTSSpeakFrame` speaks the greeting (the assistant
aggregator adds it to the Pipecat context) and it opens the chat session's history as her
message; the model's system prompt says she greeted (chat.py). On each user turn (an
`LLMContextFrame` from the user aggregator) the processor takes the latest user message, runs
one chat turn in the voice session's chat session, and pushes the answer as `LLMTextFrame`s
between `LLMFullResponseStartFrame` and `LLMFullResponseEndFrame` (TTS speaks them). It also
sends the client page, over the data channel: the user's transcript, Annie's words as they
come, the tables and charts of render_table / render_chart, and errors.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pipecat.frames.frames import (
    ClientConnectedFrame,
    Frame,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    OutputTransportMessageUrgentFrame,
    StartFrame,
    TranscriptionFrame,
    TTSSpeakFrame,
    UserStoppedSpeakingFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from annie_voice.chat import ChatService, ChatSession
from her_os_shared.creatures import CreatureName
from her_os_shared.events import EventType
from her_os_shared.logging import get_logger

log = get_logger(__name__)

RENDER_KINDS = ("table", "chart")


def last_user_text(messages: list[Any]) -> str | None:
    """The text of the last user message of a Pipecat context (string or content parts)."""
    for message in reversed(messages):
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content.strip() or None
        if isinstance(content, list):
            parts = [
                p.get("text", "")
                for p in content
                if isinstance(p, dict) and p.get("type") == "text"
            ]
            return " ".join(t.strip() for t in parts if t.strip()) or None
        return None
    return None


class TranscriptLookaheadProcessor(FrameProcessor):
    """Before the user aggregator: the user's words so far in this turn, as soon as a
    transcript arrives, go to `ChatService.prepare` (the offline responder starts the memory
    search the turn will make) while the turn's end is still being waited for. The words
    gather, joined as the aggregator joins them, until the turn ends (the aggregator
    broadcasts `UserStoppedSpeakingFrame` upstream too)."""

    def __init__(self, chat: ChatService, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.chat = chat
        self._heard: list[str] = []

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, TranscriptionFrame) and frame.text.strip():
            self._heard.append(frame.text.strip())
            self.create_task(self.chat.prepare(" ".join(self._heard)), name="lookahead")
        elif isinstance(frame, UserStoppedSpeakingFrame):
            self._heard.clear()
        await self.push_frame(frame, direction)


class AnnieLLMProcessor(FrameProcessor):
    """`greeting`: said once when the client connects ("": none); `greeting_wait_s`: how long
    the greeting waits for the briefing (the briefing's own timeout)."""

    def __init__(
        self,
        chat: ChatService,
        session_id: str,
        *,
        greeting: str = "",
        greeting_wait_s: float = 3.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.chat = chat
        self.session_id = session_id
        self.greeting = greeting
        self.greeting_wait_s = greeting_wait_s
        # The chat session being opened (and briefed) since the pipeline started.
        self._opening: asyncio.Task[tuple[ChatSession, bool]] | None = None
        self._greeting: asyncio.Task[None] | None = None  # once per session, even on reconnect
        self._answered = False  # a user turn began: too late to greet

    async def send_client(self, message: dict[str, Any]) -> None:
        """A JSON message to the client page over the data channel."""
        await self.push_frame(OutputTransportMessageUrgentFrame(message=message))

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, StartFrame) and self._opening is None:
            self._opening = self.create_task(self._open(), name=f"brief-{self.session_id}")
        elif isinstance(frame, ClientConnectedFrame) and self.greeting and self._greeting is None:
            self._greeting = self.create_task(self._greet(), name=f"greet-{self.session_id}")
        if isinstance(frame, LLMContextFrame):
            text = last_user_text(list(frame.context.get_messages()))
            if text:
                await self.respond(text)
            return
        await self.push_frame(frame, direction)

    async def _open(self) -> tuple[ChatSession, bool]:
        session, new = await self.chat.open_session(self.session_id)
        if session.briefing is not None:
            await self.send_client(
                {"type": "briefing", "session_id": session.id, **session.briefing.info()}
            )
        return session, new

    async def _greet(self) -> None:
        opening = self._opening
        if opening is not None:
            # After the briefing, as the design orders it; a slow briefing holds the greeting
            # no longer than its own timeout (it goes on, for the first turn). Not awaited:
            # its failure is the first turn's to report.
            await asyncio.wait({opening}, timeout=self.greeting_wait_s)
        if self._answered:
            log.info("voice.greeting_skipped", session_id=self.session_id, reason="user_first")
            return
        # The session is in the store from the opening's first step, briefed or not.
        session = self.chat.sessions.get(self.session_id)
        recorded = session is not None and self.chat.record_greeting(session, self.greeting)
        log.info("voice.greeting", session_id=self.session_id, recorded=recorded)
        await self.send_client(
            {"type": "transcript", "role": "assistant", "text": self.greeting, "final": True}
        )
        # Interruptible as any speech: the user talking over it interrupts it as usual.
        await self.push_frame(TTSSpeakFrame(self.greeting))

    async def cleanup(self) -> None:
        for task in (self._greeting, self._opening):
            if task is not None and not task.done():
                await self.cancel_task(task)
        await super().cleanup()

    async def respond(self, text: str) -> None:
        self._answered = True
        if self._opening is not None:
            # The first turn: the session opened at connect (its briefing may still run).
            opening, self._opening = self._opening, None
            session, new = await opening
        else:
            session, new = await self.chat.open_session(self.session_id)
        if session.lock.locked():
            log.info("voice.turn_busy", session_id=self.session_id)
            return
        await self.send_client({"type": "transcript", "role": "user", "text": text, "final": True})
        await self.push_frame(LLMFullResponseStartFrame())
        try:
            async for event in self.chat.turn(session, text, new=new):
                data = event.data
                if event.event == "token":
                    await self.push_frame(LLMTextFrame(data["text"]))
                    await self.send_client(
                        {
                            "type": "transcript",
                            "role": "assistant",
                            "text": data["text"],
                            "final": False,
                        }
                    )
                elif event.event == "tool_use":
                    shown = data.get("data")
                    if isinstance(shown, dict) and shown.get("kind") in RENDER_KINDS:
                        await self.send_client({"type": "render", "payload": shown})
                        self.chat.observer.emit(
                            CreatureName.NYMPH, EventType.METRIC, session_id=self.session_id,
                            data={"kind": shown.get("kind"), "tool": data.get("name")},
                        )  # fmt: skip
                    await self.send_client(
                        {"type": "tool", "name": data.get("name"), "ok": data.get("ok")}
                    )
                elif event.event == "done":
                    await self.send_client(
                        {
                            "type": "transcript",
                            "role": "assistant",
                            "text": data["text"],
                            "final": True,
                        }
                    )
                elif event.event == "error":
                    await self.send_client({"type": "error", "message": data.get("message", "")})
                    # Say it too: a voice user sees no error box.
                    await self.push_frame(LLMTextFrame("Sorry, I could not answer that just now."))
                elif event.event == "session":
                    await self.send_client({"type": "session", **data})
        finally:
            await self.push_frame(LLMFullResponseEndFrame())
