"""Frame processors around the LLM: the tool-call text filter and the observability tap."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    EndFrame,
    ErrorFrame,
    Frame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    OutputTransportMessageUrgentFrame,
    StartFrame,
    TranscriptionFrame,
    UserStartedSpeakingFrame,
    UserStoppedSpeakingFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from annie_voice.llm.toolfilter import ToolCallTextFilter
from annie_voice.observe import Observer
from her_os_shared.creatures import CreatureName
from her_os_shared.events import EventType
from her_os_shared.logging import get_logger

log = get_logger(__name__)


class ToolCallTextFilterProcessor(FrameProcessor):
    """Keeps tool calls that a model leaked into its text (`<tool_call>…</tool_call>`, a bare
    `{"name": …, "arguments": …}` line naming a known tool) from being spoken. Annie's own
    turn already filters (chat.py); this guards any LLM text that reaches TTS."""

    def __init__(self, known_tools: Collection[str] = (), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.known_tools = frozenset(known_tools)
        self._filter = ToolCallTextFilter(self.known_tools)
        self.removed_calls = 0

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, LLMFullResponseStartFrame):
            self._filter = ToolCallTextFilter(self.known_tools)
        elif isinstance(frame, LLMTextFrame):
            safe, calls = self._filter.feed(frame.text)
            self._count(calls)
            if safe:
                await self.push_frame(LLMTextFrame(safe), direction)
            return
        elif isinstance(frame, LLMFullResponseEndFrame):
            rest, calls = self._filter.flush()
            self._count(calls)
            if rest:
                await self.push_frame(LLMTextFrame(rest), direction)
        await self.push_frame(frame, direction)

    def _count(self, calls: list[Any]) -> None:
        if calls:
            self.removed_calls += len(calls)
            log.info("voice.leaked_tool_calls_removed", calls=[c.name for c in calls])


class VoiceObserverProcessor(FrameProcessor):
    """Emits the voice session's events through Annie's Observer: the pipeline's (the design's
    luna-moth: start and end of the session, the user speaking, errors), what Annie heard
    (serpent: each transcript) and Annie speaking (leviathan, the TTS: start and complete). Who
    is speaking also goes to the page (`{type: "speaking", role, speaking}`), which shows it."""

    def __init__(self, observer: Observer, session_id: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.observer = observer
        self.session_id = session_id

    def _emit(
        self, event_type: EventType, creature: CreatureName = CreatureName.LUNA_MOTH, **data: Any
    ) -> None:
        self.observer.emit(
            creature, event_type, session_id=self.session_id, data={"voice": True, **data}
        )

    async def _speaking(self, role: str, speaking: bool) -> None:
        message = {"type": "speaking", "role": role, "speaking": speaking}
        await self.push_frame(OutputTransportMessageUrgentFrame(message=message))

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, StartFrame):
            self._emit(EventType.START, stage="voice_session")
        elif isinstance(frame, EndFrame):
            self._emit(EventType.COMPLETE, stage="voice_session")
        elif isinstance(frame, UserStartedSpeakingFrame):
            self._emit(EventType.METRIC, stage="user_speaking")
            await self._speaking("user", True)
        elif isinstance(frame, UserStoppedSpeakingFrame):
            self._emit(EventType.METRIC, stage="user_stopped")
            await self._speaking("user", False)
        elif isinstance(frame, TranscriptionFrame):
            self._emit(
                EventType.COMPLETE, CreatureName.SERPENT, stage="transcript", chars=len(frame.text)
            )
        elif isinstance(frame, BotStartedSpeakingFrame):
            self._emit(EventType.START, CreatureName.LEVIATHAN, stage="annie_speaking")
            await self._speaking("assistant", True)
        elif isinstance(frame, BotStoppedSpeakingFrame):
            self._emit(EventType.COMPLETE, CreatureName.LEVIATHAN, stage="annie_stopped")
            await self._speaking("assistant", False)
        elif isinstance(frame, ErrorFrame):
            self._emit(EventType.ERROR, error=str(frame.error)[:300])
        await self.push_frame(frame, direction)
