"""The voice pipeline, assembled in one function from the settings:

    transport in → STT → observer → lookahead → user aggregator (Silero VAD, user turns) →
    Annie (LLM: ChatService) → tool-call text filter → TTS → transport out → assistant
    aggregator

Annie greets when the client connects (brain.py: the transport's `ClientConnectedFrame`).

The lookahead hands each transcript to the chat service before the turn ends, so the offline
responder's memory search runs during the silence that ends the turn (lookahead.py).

Pipecat 1.14 puts the VAD in the user aggregator (`LLMUserAggregatorParams(vad_analyzer=…)`);
it broadcasts the VAD frames both ways, so the segmented STT before it cuts its segments on
them. The user turn ends a fixed
`user_speech_timeout_s` after the VAD hears silence, once a transcript arrived (no smart-turn
model: it waits seconds on synthetic voices).
"""

from __future__ import annotations

from dataclasses import dataclass

from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import (
    LLMContextAggregatorPair,
    LLMUserAggregatorParams,
)
from pipecat.processors.frame_processor import FrameProcessor
from pipecat.transports.base_transport import BaseTransport
from pipecat.turns.user_start import VADUserTurnStartStrategy
from pipecat.turns.user_stop import SpeechTimeoutUserTurnStopStrategy
from pipecat.turns.user_turn_strategies import UserTurnStrategies

from annie_voice.chat import ChatService
from annie_voice.config import Settings
from annie_voice.voice.brain import AnnieLLMProcessor, TranscriptLookaheadProcessor
from annie_voice.voice.filters import ToolCallTextFilterProcessor, VoiceObserverProcessor
from annie_voice.voice.stt import (
    STT_SAMPLE_RATE,
    LocalSTTService,
    SpeechRecognizer,
    make_recognizer,
)
from annie_voice.voice.tts import TTS_SAMPLE_RATE, SpeechSynth, SynthTTSService
from annie_voice.voice.vad import check_vad, silero_vad


@dataclass
class VoiceModels:
    """The STT and TTS models of this process (loaded once, on first use; shared by sessions)."""

    stt: SpeechRecognizer
    tts: SpeechSynth

    @classmethod
    def from_settings(cls, settings: Settings) -> VoiceModels:
        return cls(stt=make_recognizer(settings), tts=SpeechSynth(settings))

    def check(self) -> None:
        """Raise VoiceBackendError (naming the setting) when a configured backend cannot run,
        or when the VAD's model file is not the pinned one."""
        self.stt.check()
        self.tts.check()
        check_vad()

    def describe(self) -> dict[str, str]:
        return {"stt": self.stt.backend, "tts": self.tts.backend}


def build_processors(
    settings: Settings,
    models: VoiceModels,
    chat: ChatService,
    session_id: str,
    transport: BaseTransport | None = None,
) -> list[FrameProcessor]:
    """The voice pipeline's processors in order (without a transport: the middle part, for
    tests). Raises VoiceBackendError when a configured backend cannot run here."""
    models.check()
    context = LLMContext()
    aggregators = LLMContextAggregatorPair(
        context,
        user_params=LLMUserAggregatorParams(
            vad_analyzer=silero_vad(STT_SAMPLE_RATE, settings.vad_stop_s),
            user_turn_strategies=UserTurnStrategies(
                start=[VADUserTurnStartStrategy()],
                stop=[
                    SpeechTimeoutUserTurnStopStrategy(
                        user_speech_timeout=settings.user_speech_timeout_s
                    )
                ],
            ),
        ),
    )
    tools = sorted(chat.tools) if chat.backend.supports_tools else []
    middle: list[FrameProcessor] = [
        LocalSTTService(models.stt),
        VoiceObserverProcessor(chat.observer, session_id),
        TranscriptLookaheadProcessor(chat),
        aggregators.user(),
        AnnieLLMProcessor(
            chat,
            session_id,
            greeting=settings.greeting,
            greeting_wait_s=settings.briefing_timeout_s,
        ),
        ToolCallTextFilterProcessor(tools),
        SynthTTSService(models.tts),
    ]
    if transport is None:
        return [*middle, aggregators.assistant()]
    return [transport.input(), *middle, transport.output(), aggregators.assistant()]


def build_worker(
    settings: Settings,
    models: VoiceModels,
    chat: ChatService,
    session_id: str,
    transport: BaseTransport,
) -> PipelineWorker:
    pipeline = Pipeline(build_processors(settings, models, chat, session_id, transport))
    return PipelineWorker(
        pipeline,
        params=PipelineParams(
            audio_in_sample_rate=STT_SAMPLE_RATE,
            audio_out_sample_rate=TTS_SAMPLE_RATE,
            enable_metrics=True,
        ),
        enable_rtvi=False,
    )
