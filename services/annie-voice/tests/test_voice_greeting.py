"""Annie greets when a voice session's client connects (design §8: after the memory briefing,
"Hey! I'm Annie. What's on your mind?"), in a real Pipecat pipeline (frame_harness): the
voice pipeline build_processors makes, on the embedded hibari voice, with the engine double."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from annie_doubles import TOKEN, EngineDouble, memory
from frame_harness import run_stages
from pipecat.frames.frames import (
    ClientConnectedFrame,
    Frame,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    OutputTransportMessageUrgentFrame,
    TTSAudioRawFrame,
    TTSSpeakFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMAssistantAggregator
from pydantic import ValidationError

from annie_voice.config import DEFAULT_GREETING, Settings
from annie_voice.llm.base import Message, StreamEvent, TextDelta, Tool, Usage
from annie_voice.runtime import Runtime
from annie_voice.voice.brain import AnnieLLMProcessor
from annie_voice.voice.pipeline import VoiceModels, build_processors
from annie_voice.voice.tts import TTS_SAMPLE_RATE

MARKER = "That is all."


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> VoiceModels:
    settings = Settings(
        internal_token=TOKEN, models_dir=tmp_path_factory.mktemp("models"), stt_beam_size=1
    )
    return VoiceModels.from_settings(settings)


@dataclass
class SlowBriefingEngineDouble(EngineDouble):
    """The engine double answering each memory search after `delay_s` (a slow briefing)."""

    delay_s: float = 3.0

    async def handle(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/context":
            await asyncio.sleep(self.delay_s)
        return await super().handle(request)


def voice_settings(**kw: Any) -> Settings:
    return Settings(internal_token=TOKEN, events_enabled=False, stt_beam_size=1, **kw)


def client_messages(frames: Sequence[Frame]) -> list[dict[str, Any]]:
    return [f.message for f in frames if isinstance(f, OutputTransportMessageUrgentFrame)]


def page_message(kind: str) -> Callable[[Frame], bool]:
    return lambda f: isinstance(f, OutputTransportMessageUrgentFrame) and f.message["type"] == kind


def said(text: str) -> Callable[[Frame], bool]:
    """The assistant aggregator's context frame once `text` was spoken (it consumes the TTS
    text frames and adds what they said to the context as an assistant message)."""

    def check(frame: Frame) -> bool:
        if not isinstance(frame, LLMContextFrame):
            return False
        messages = frame.context.get_messages()
        return bool(messages) and messages[-1] == {"role": "assistant", "content": text}

    return check


def assistant_messages(aggregator: LLMAssistantAggregator) -> list[Any]:
    return [m["content"] for m in aggregator.messages if m.get("role") == "assistant"]


def context_frame(text: str) -> LLMContextFrame:
    return LLMContextFrame(LLMContext(messages=[{"role": "user", "content": text}]))


def test_the_greeting_defaults_to_the_designs_and_is_bounded() -> None:
    assert Settings().greeting == DEFAULT_GREETING == "Hey! I'm Annie. What's on your mind?"
    assert Settings(greeting="   ").greeting == ""  # nothing to say: no greeting
    assert Settings(greeting=" Hi. ").greeting == "Hi."
    with pytest.raises(ValidationError, match="greeting"):
        Settings(greeting="x" * 301)


async def test_annie_greets_once_when_the_client_connects_after_the_briefing(
    models: VoiceModels,
) -> None:
    # The briefing is still loading when the client connects: the greeting waits for it.
    engine = SlowBriefingEngineDouble(
        memories=[memory("Priya is moving to Koramangala", tier="L1")]
    )
    settings = voice_settings(briefing_timeout_s=10)
    runtime = Runtime(settings, engine_transport=engine.transport())
    processors = build_processors(settings, models, runtime.chat, "voice-g1")
    aggregator = processors[-1]
    assert isinstance(aggregator, LLMAssistantAggregator)
    (brain,) = [p for p in processors if isinstance(p, AnnieLLMProcessor)]
    assert brain.greeting_wait_s == settings.briefing_timeout_s  # the briefing's own timeout
    try:
        run = await run_stages(
            Pipeline(processors),
            [
                # the transport's frame when the peer connects; the greeting, spoken, reaches
                # the assistant aggregator, which adds it to the context
                ([ClientConnectedFrame()], said(DEFAULT_GREETING)),
                # a second connect (a renegotiation) greets no more; the marker, spoken after
                # it, shows the TTS has said all it was given
                ([ClientConnectedFrame(), TTSSpeakFrame(MARKER)], said(MARKER)),
            ],
        )  # fmt: skip
    finally:
        await runtime.stop()
    greeting = DEFAULT_GREETING
    # Spoken through the TTS, once (then the marker): audio between TTSStarted and TTSStopped;
    # the TTS's text frames made the context's assistant messages.
    assert assistant_messages(aggregator) == [greeting, MARKER]
    kinds = [type(f) for f in run.down]
    assert kinds.count(TTSStartedFrame) == kinds.count(TTSStoppedFrame) == 2
    start, stop = kinds.index(TTSStartedFrame), kinds.index(TTSStoppedFrame)
    audio = [f for f in run.down[start:stop] if isinstance(f, TTSAudioRawFrame)]
    assert 1.0 < sum(len(f.audio) for f in audio) / 2 / TTS_SAMPLE_RATE < 10.0
    # After the briefing; the page shows it as Annie's words.
    sent = client_messages(run.down)
    said_on_page = {"type": "transcript", "role": "assistant", "text": greeting, "final": True}
    assert [m["type"] for m in sent if m["type"] in ("briefing", "transcript")] == [
        "briefing",
        "transcript",
    ]
    assert sent[-1] == said_on_page and sent[0]["status"] == "ok"
    # At the head of the chat session's history (what the model is sent), as Annie's message.
    session = runtime.chat.sessions.get("voice-g1")
    assert session is not None and session.briefed
    assert session.history == [Message(role="assistant", content=greeting)]


class RecordingBackendDouble:
    """A ChatBackend double that records the messages each call was given and answers."""

    name = "openai"
    supports_tools = False

    def __init__(self) -> None:
        self.seen: list[list[Message]] = []
        self.systems: list[str] = []

    async def stream(
        self, *, system: str, messages: Sequence[Message], tools: Sequence[Tool]
    ) -> AsyncIterator[StreamEvent]:
        self.seen.append(list(messages))
        self.systems.append(system)
        yield TextDelta("Koramangala, she said.")
        yield Usage(input_tokens=1, output_tokens=1)

    async def aclose(self) -> None:
        return None


async def test_the_model_is_told_it_greeted_and_a_cut_history_still_starts_with_the_user() -> None:
    backend = RecordingBackendDouble()
    settings = voice_settings(briefing_enabled=False, max_history_messages=2)
    runtime = Runtime(settings, backend=backend)
    greeting = Message(role="assistant", content=DEFAULT_GREETING)
    try:
        session, new = await runtime.chat.open_session("voice-g2")
        assert runtime.chat.record_greeting(session, DEFAULT_GREETING)
        assert not runtime.chat.record_greeting(session, DEFAULT_GREETING)  # opens it only
        async for _ in runtime.chat.turn(session, "where is Priya moving?", new=new):
            pass
        async for _ in runtime.chat.turn(session, "and when?", new=False):
            pass
    finally:
        await runtime.stop()
    first, second = backend.seen
    # The conversation the model sees opens with the user (some chat templates and APIs
    # refuse one that opens with the assistant); the system prompt says she greeted.
    assert first == [Message(role="user", content="where is Priya moving?")]
    assert session.history[0] == greeting
    said = f'You opened this voice conversation by saying: "{DEFAULT_GREETING}"'
    assert all(system.endswith(said) for system in backend.systems)
    # Two messages of history: the cut leaves Annie's answer first, which is dropped as before.
    assert second == [Message(role="user", content="and when?")]


async def test_a_slow_briefing_holds_the_greeting_no_longer_than_its_wait() -> None:
    # The engine never answers the briefing's search (timeout 60 s): the greeting waits 0.2 s.
    engine = EngineDouble(mode="slow")
    runtime = Runtime(voice_settings(briefing_timeout_s=60), engine_transport=engine.transport())
    brain = AnnieLLMProcessor(
        runtime.chat, "voice-g3", greeting="Hello there.", greeting_wait_s=0.2
    )
    started = time.monotonic()
    try:
        run = await run_stages(
            brain, [([ClientConnectedFrame()], lambda f: isinstance(f, TTSSpeakFrame))]
        )
        elapsed = time.monotonic() - started
        session = runtime.chat.sessions.get("voice-g3")
    finally:
        await runtime.stop()
    # The whole run (start, greeting, end) in far less than waiting on the briefing would take.
    assert elapsed < 5.0
    assert [f.text for f in run.down if isinstance(f, TTSSpeakFrame)] == ["Hello there."]
    assert [m["type"] for m in client_messages(run.down)] == ["transcript"]  # no briefing yet
    assert engine.context_requests  # the briefing was under way
    assert session is not None and session.briefing is None
    assert session.history == [Message(role="assistant", content="Hello there.")]


async def test_no_greeting_when_the_setting_is_empty(models: VoiceModels) -> None:
    engine = EngineDouble(memories=[memory("Priya is moving to Koramangala", tier="L1")])
    settings = voice_settings(greeting="")
    runtime = Runtime(settings, engine_transport=engine.transport())
    processors = build_processors(settings, models, runtime.chat, "voice-g4")
    aggregator = processors[-1]
    assert isinstance(aggregator, LLMAssistantAggregator)
    try:
        run = await run_stages(
            Pipeline(processors),
            [
                ([ClientConnectedFrame()], page_message("briefing")),
                ([TTSSpeakFrame(MARKER)], said(MARKER)),
            ],
        )
    finally:
        await runtime.stop()
    assert assistant_messages(aggregator) == [MARKER]
    assert [type(f) for f in run.down].count(TTSStartedFrame) == 1
    assert not [m for m in client_messages(run.down) if m["type"] == "transcript"]
    session = runtime.chat.sessions.get("voice-g4")
    assert session is not None and session.history == []


async def test_no_greeting_once_the_user_has_spoken_first() -> None:
    engine = EngineDouble(memories=[memory("Priya is moving to Koramangala", tier="L1")])
    runtime = Runtime(voice_settings(), engine_transport=engine.transport())
    brain = AnnieLLMProcessor(runtime.chat, "voice-g5", greeting=DEFAULT_GREETING)
    try:
        run = await run_stages(
            brain,
            [
                ([context_frame("where is Priya moving?")],
                 lambda f: isinstance(f, LLMFullResponseEndFrame)),
                ([ClientConnectedFrame(), TTSSpeakFrame(MARKER)],
                 lambda f: isinstance(f, TTSSpeakFrame)),
            ],
        )  # fmt: skip
        session = runtime.chat.sessions.get("voice-g5")
    finally:
        await runtime.stop()
    assert [f.text for f in run.down if isinstance(f, TTSSpeakFrame)] == [MARKER]
    assert session is not None and session.history[0].role == "user"
