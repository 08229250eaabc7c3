"""The voice pipeline's processors at frame level, each in a real Pipecat pipeline
(frame_harness.run_until: waits for the frame the test expects, never for a fixed time), on
the real embedded backends: hibari-tts speaks, Moonshine (the default) and the bundled Whisper
base model hear it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soxr
from annie_doubles import TOKEN, EngineDouble, memory
from frame_harness import run_stages, run_until
from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    InputAudioRawFrame,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    OutputTransportMessageUrgentFrame,
    TranscriptionFrame,
    TTSAudioRawFrame,
    TTSSpeakFrame,
    TTSStoppedFrame,
    UserStartedSpeakingFrame,
    UserStoppedSpeakingFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.processors.aggregators.llm_context import LLMContext

from annie_voice.config import Settings
from annie_voice.llm.base import Message, StreamEvent, TextDelta, Tool, ToolCall, Usage
from annie_voice.runtime import Runtime
from annie_voice.tools import ToolConfig, make_tools
from annie_voice.voice.brain import (
    AnnieLLMProcessor,
    TranscriptLookaheadProcessor,
    last_user_text,
)
from annie_voice.voice.bundled import HIBARI_HEART
from annie_voice.voice.filters import ToolCallTextFilterProcessor, VoiceObserverProcessor
from annie_voice.voice.pipeline import VoiceModels
from annie_voice.voice.stt import STT_SAMPLE_RATE, LocalSTTService, make_recognizer
from annie_voice.voice.tts import (
    SILENCE_LEVEL,
    TTS_SAMPLE_RATE,
    SynthTTSService,
    trim_leading_silence,
)
from her_os_shared.bundled import ModelIntegrityError, verified_path, verify_sha256
from her_os_shared.creatures import CreatureName


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> VoiceModels:
    settings = Settings(
        internal_token=TOKEN, models_dir=tmp_path_factory.mktemp("models"), stt_beam_size=1
    )
    return VoiceModels.from_settings(settings)


def speech(models: VoiceModels, text: str) -> bytes:
    """`text` spoken by hibari, as 16 kHz 16-bit PCM (what the transport hands STT)."""
    samples = np.concatenate(models.tts.sentences(text))
    samples = soxr.resample(samples, TTS_SAMPLE_RATE, STT_SAMPLE_RATE).astype(np.float32)
    return (np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes()


async def test_tts_speaks_text_as_24k_audio_frames(models: VoiceModels) -> None:
    run = await run_until(
        SynthTTSService(models.tts),
        [TTSSpeakFrame("Good morning. Priya called yesterday.")],
        until=lambda f: isinstance(f, TTSStoppedFrame),
    )
    audio = [f for f in run.down if isinstance(f, TTSAudioRawFrame)]
    assert audio and all(f.sample_rate == TTS_SAMPLE_RATE and f.num_channels == 1 for f in audio)
    seconds = sum(len(f.audio) for f in audio) / 2 / TTS_SAMPLE_RATE
    assert 1.0 < seconds < 10.0
    # The reply starts at once: hibari's ~0.3 s of leading silence is cut to 10 ms.
    first = np.frombuffer(audio[0].audio, dtype="<i2")
    onset = np.flatnonzero(np.abs(first) > SILENCE_LEVEL * 32767)[0] / TTS_SAMPLE_RATE
    assert onset <= 0.015


def test_short_sentences_are_synthesised_once(models: VoiceModels) -> None:
    short, long = "Here's what I found.", "Yesterday, Priya said: " + "we talked a lot. " * 6
    models.tts.warm([short])
    assert short in models.tts.cached()
    first, again = models.tts.sentences(short), models.tts.sentences(short)
    assert len(first) == len(again) >= 1
    assert all(a is b for a, b in zip(first, again, strict=True))  # the cached arrays
    assert all(not a.flags.writeable for a in again)  # shared: nobody may change them
    assert float(np.abs(np.concatenate(again)).max()) > 0.05  # speech, not silence
    models.tts.sentences(long)
    assert long not in models.tts.cached()  # longer texts are rarely said twice


def test_trim_leading_silence_keeps_10_ms_before_the_sound() -> None:
    rate = TTS_SAMPLE_RATE
    sound = np.concatenate([np.zeros(rate // 2), np.full(rate // 10, 0.5), np.zeros(rate // 4)])
    trimmed = trim_leading_silence(sound.astype(np.float32))
    assert len(trimmed) == len(sound) - rate // 2 + int(0.01 * rate)
    assert trimmed[-1] == 0.0  # trailing silence (the pause before the next sentence) stays
    assert trim_leading_silence(np.zeros(100, dtype=np.float32)).size == 0


@pytest.mark.parametrize("backend", ["moonshine", "faster-whisper"])
async def test_stt_transcribes_a_vad_segment(
    models: VoiceModels, backend: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    settings = Settings(
        internal_token=TOKEN,
        models_dir=tmp_path_factory.mktemp("models"),
        stt_backend=backend,
        stt_beam_size=1,
    )
    recognizer = models.stt if backend == models.stt.backend else make_recognizer(settings)
    assert recognizer.backend == backend
    pcm = speech(models, "Remind me to call my sister tomorrow.")
    chunk = STT_SAMPLE_RATE // 50 * 2  # 20 ms frames, as the transport sends them
    frames: list[Any] = [VADUserStartedSpeakingFrame()]
    frames += [
        InputAudioRawFrame(pcm[i : i + chunk], sample_rate=STT_SAMPLE_RATE, num_channels=1)
        for i in range(0, len(pcm), chunk)
    ]
    frames.append(VADUserStoppedSpeakingFrame())
    # Waits for the transcript itself: on a loaded machine the model load and the
    # transcription take as long as they take.
    run = await run_until(
        LocalSTTService(recognizer), frames, until=lambda f: isinstance(f, TranscriptionFrame)
    )
    texts = [f.text.lower() for f in run.down if isinstance(f, TranscriptionFrame)]
    assert len(texts) == 1
    assert "sister" in texts[0] and "tomorrow" in texts[0]


def context_frame(text: str) -> LLMContextFrame:
    return LLMContextFrame(LLMContext(messages=[{"role": "user", "content": text}]))


def is_response_end(frame: Any) -> bool:
    return isinstance(frame, LLMFullResponseEndFrame)


def client_messages(frames: Sequence[Any]) -> list[dict[str, Any]]:
    return [f.message for f in frames if isinstance(f, OutputTransportMessageUrgentFrame)]


class PrepareRecorderDouble:
    """Stands in for ChatService.prepare: records each text when the processor calls it."""

    def __init__(self) -> None:
        self.prepared: list[str] = []

    def prepare(self, message: str) -> Any:
        self.prepared.append(message)
        return asyncio.sleep(0)


async def test_transcripts_go_to_prepare_before_the_turn_ends() -> None:
    chat = PrepareRecorderDouble()

    def passed(text: str) -> Callable[[Any], bool]:
        return lambda f: isinstance(f, TranscriptionFrame) and f.text == text

    run = await run_stages(
        TranscriptLookaheadProcessor(chat),  # type: ignore[arg-type]
        [
            # a pause, then more words: the words so far, as the aggregator will join them
            ([TranscriptionFrame("Where is Priya", "user", "t1"),
              TranscriptionFrame("moving to?", "user", "t2")], passed("moving to?")),
            # the turn ended; then silence (nothing to prepare) and the next turn's words
            ([UserStoppedSpeakingFrame()], lambda f: isinstance(f, UserStoppedSpeakingFrame)),
            ([TranscriptionFrame("   ", "user", "t3"),
              TranscriptionFrame("Thanks.", "user", "t4")], passed("Thanks.")),
        ],
    )  # fmt: skip
    assert chat.prepared == ["Where is Priya", "Where is Priya moving to?", "Thanks."]
    texts = [f.text for f in run.down if isinstance(f, TranscriptionFrame)]
    assert texts == ["Where is Priya", "moving to?", "   ", "Thanks."]  # all passed on


async def test_offline_responder_answers_a_voice_turn_from_memory() -> None:
    engine = EngineDouble(memories=[memory("Priya is moving to Koramangala", tier="L1")])
    runtime = Runtime(
        Settings(internal_token=TOKEN, events_enabled=False),
        engine_transport=engine.transport(),
    )
    try:
        down = (
            await run_until(
                AnnieLLMProcessor(runtime.chat, "voice-1"),
                [context_frame("where is Priya moving?")],
                until=is_response_end,
            )
        ).down
    finally:
        await runtime.stop()
    kinds = [type(f) for f in down if not isinstance(f, OutputTransportMessageUrgentFrame)]
    assert kinds[0] is LLMFullResponseStartFrame and kinds[-1] is LLMFullResponseEndFrame
    spoken = "".join(f.text for f in down if isinstance(f, LLMTextFrame))
    assert "Koramangala" in spoken
    sent = client_messages(down)
    assert {
        "type": "transcript",
        "role": "user",
        "text": "where is Priya moving?",
        "final": True,
    } in sent
    final = [m for m in sent if m.get("role") == "assistant" and m.get("final")]
    assert final and final[0]["text"] == spoken
    assert runtime.chat.sessions.get("voice-1") is not None  # the voice session's chat session
    # Briefed once, at connect (pipeline start), before the first turn.
    briefings = [m for m in sent if m["type"] == "briefing"]
    assert len(briefings) == 1 and briefings[0]["status"] == "ok"
    assert briefings[0]["session_id"] == "voice-1" and briefings[0]["items"] >= 1
    assert sent.index(briefings[0]) < next(i for i, m in enumerate(sent) if m.get("role"))


async def test_the_briefing_starts_at_connect_before_anyone_speaks() -> None:
    engine = EngineDouble(memories=[memory("Priya is moving to Koramangala", tier="L1")])
    runtime = Runtime(
        Settings(internal_token=TOKEN, events_enabled=False),
        engine_transport=engine.transport(),
    )
    try:
        run = await run_until(
            AnnieLLMProcessor(runtime.chat, "voice-3"),
            [],
            until=lambda f: (
                isinstance(f, OutputTransportMessageUrgentFrame) and f.message["type"] == "briefing"
            ),
        )
    finally:
        await runtime.stop()
    (briefing,) = client_messages(run.down)
    assert briefing["status"] == "ok" and briefing["elapsed_ms"] >= 0
    session = runtime.chat.sessions.get("voice-3")
    assert session is not None and session.briefed and session.turns == 0


async def test_the_observer_tells_the_page_who_is_speaking() -> None:
    runtime = Runtime(Settings(internal_token=TOKEN, events_enabled=False))
    try:
        run = await run_until(
            VoiceObserverProcessor(runtime.observer, "voice-4"),
            [
                UserStartedSpeakingFrame(),
                UserStoppedSpeakingFrame(),
                BotStartedSpeakingFrame(),
                BotStoppedSpeakingFrame(),
            ],
            until=lambda f: isinstance(f, BotStoppedSpeakingFrame),
        )
    finally:
        await runtime.stop()
    assert [(m["role"], m["speaking"]) for m in client_messages(run.down)] == [
        ("user", True),
        ("user", False),
        ("assistant", True),
        ("assistant", False),
    ]


class ObserverDouble:
    """Records what would be emitted: (creature, event_type, data)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict[str, Any]]] = []

    def emit(self, creature: str, event_type: str, **kw: Any) -> None:
        self.events.append((creature, event_type, kw.get("data") or {}))


async def test_the_voice_observer_reports_the_designs_creatures() -> None:
    observer = ObserverDouble()
    await run_until(
        VoiceObserverProcessor(observer, "voice-5"),  # type: ignore[arg-type]
        [
            UserStartedSpeakingFrame(),
            TranscriptionFrame("where is Priya", "user", "t1"),
            BotStartedSpeakingFrame(),
            BotStoppedSpeakingFrame(),
        ],
        until=lambda f: isinstance(f, BotStoppedSpeakingFrame),
    )
    seen = [(c, t) for c, t, _ in observer.events]
    assert (CreatureName.LUNA_MOTH, "metric") in seen  # the pipeline: the user speaking
    assert (CreatureName.SERPENT, "complete") in seen  # what Annie heard
    speech = [x for x in seen if x[0] == CreatureName.LEVIATHAN]  # Annie's voice, the TTS
    assert speech == [(CreatureName.LEVIATHAN, "start"), (CreatureName.LEVIATHAN, "complete")]
    heard = next(d for c, _, d in observer.events if c == CreatureName.SERPENT)
    assert heard["chars"] == len("where is Priya") and heard["voice"] is True


class RenderingBackendDouble:
    """A ChatBackend double: first round calls render_table and leaks a tool call as text;
    the second answers in words."""

    name = "openai"
    supports_tools = True

    def __init__(self) -> None:
        self.rounds = 0

    async def stream(
        self, *, system: str, messages: Sequence[Message], tools: Sequence[Tool]
    ) -> AsyncIterator[StreamEvent]:
        self.rounds += 1
        if self.rounds == 1:
            yield TextDelta('Here it is. <tool_call>{"name": "think", "arguments": {}}</tool_call>')
            yield ToolCall(
                id="c1",
                name="render_table",
                arguments={
                    "title": "Calls",
                    "columns": ["who", "when"],
                    "rows": [["Priya", "Mon"]],
                },
            )
        else:
            yield TextDelta("I put the calls on your screen.")
        yield Usage(input_tokens=3, output_tokens=4)

    async def aclose(self) -> None:
        return None


async def test_llm_turn_sends_tables_over_the_data_channel_and_never_speaks_leaked_calls(
    tmp_path: Path,
) -> None:
    settings = Settings(internal_token=TOKEN, events_enabled=False, briefing_enabled=False)
    tools = make_tools(
        ToolConfig(python_scratch_root=tmp_path, enabled=frozenset({"think", "render_table"}))
    )
    runtime = Runtime(settings, tools=tools, backend=RenderingBackendDouble())
    observer = ObserverDouble()
    runtime.chat.observer = observer  # type: ignore[assignment]
    try:
        down = (
            await run_until(
                AnnieLLMProcessor(runtime.chat, "voice-2"),
                [context_frame("show my calls")],
                until=is_response_end,
            )
        ).down
    finally:
        await runtime.stop()
    spoken = "".join(f.text for f in down if isinstance(f, LLMTextFrame))
    assert "tool_call" not in spoken and "Here it is." in spoken
    assert "on your screen" in spoken
    renders = [m for m in client_messages(down) if m["type"] == "render"]
    assert renders == [
        {
            "type": "render",
            "payload": {
                "kind": "table",
                "title": "Calls",
                "columns": ["who", "when"],
                "rows": [["Priya", "Mon"]],
            },
        }
    ]
    seen = [(c, t) for c, t, _ in observer.events]
    assert (CreatureName.MINOTAUR, "complete") in seen  # an OpenAI-compatible responder
    assert (CreatureName.GRIFFIN, "complete") in seen  # render_table, through the tool router
    assert (CreatureName.NYMPH, "metric") in seen  # the table, over the data channel


async def test_tool_call_text_filter_processor_removes_leaked_calls() -> None:
    processor = ToolCallTextFilterProcessor(["web_search"])
    run = await run_until(
        processor,
        [
            LLMFullResponseStartFrame(),
            LLMTextFrame("Let me look.\n"),
            LLMTextFrame('{"name": "web_search", "arguments": {"query": "rain"}}\n'),
            LLMTextFrame('<tool_call>{"name": "x", '),
            LLMTextFrame('"arguments": {}}</tool_call>It may rain.'),
            LLMFullResponseEndFrame(),
        ],
        until=is_response_end,
    )
    spoken = "".join(f.text for f in run.down if isinstance(f, LLMTextFrame))
    assert spoken.replace("\n", " ").split() == ["Let", "me", "look.", "It", "may", "rain."]
    assert processor.removed_calls == 2


def test_last_user_text_reads_strings_and_content_parts() -> None:
    assert last_user_text([{"role": "user", "content": " hi "}]) == "hi"
    parts = [{"type": "text", "text": "a"}, {"type": "image_url"}, {"type": "text", "text": "b"}]
    messages = [{"role": "user", "content": parts}, {"role": "assistant", "content": "x"}]
    assert last_user_text(messages) == "a b"
    assert last_user_text([{"role": "assistant", "content": "x"}]) is None


def test_the_bundled_voice_matches_its_record_and_a_tampered_copy_is_refused(
    tmp_path: Path,
) -> None:
    path = verified_path(HIBARI_HEART)
    assert path.name == "hibari.onnx"
    bad = tmp_path / "hibari.onnx"
    bad.write_bytes(path.read_bytes()[:-1] + b"\x00")
    with pytest.raises(ModelIntegrityError, match="corrupt or not the pinned version"):
        verify_sha256(bad, HIBARI_HEART.sha256)
