"""Annie voice settings (env prefix ANNIE_VOICE_)."""

from __future__ import annotations

import platform
import sys
from pathlib import Path
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from her_os_shared.settings import ServiceSettings

LlmBackendChoice = Literal["auto", "none", "openai", "claude"]
# Speech to text: Moonshine base English (embedded default, bundled, CPU; ADR 0015),
# faster-whisper on the bundled Whisper base model (embedded, CPU, any language) or Whisper on
# the GPU (production: a local CTranslate2 model folder, e.g. large-v3).
SttBackendChoice = Literal["moonshine", "faster-whisper", "whisper-gpu"]


def moonshine_platform() -> bool:
    """moonshine-cpp ships wheels for Linux x86_64 only (pyproject's marker)."""
    return sys.platform == "linux" and platform.machine() == "x86_64"


def default_stt_backend() -> SttBackendChoice:
    return "moonshine" if moonshine_platform() else "faster-whisper"


# Text to speech: hibari-tts (embedded, bundled ONNX voice) or Kokoro (production, kokoro-onnx).
TtsBackendChoice = Literal["hibari", "kokoro"]

DEFAULT_SYSTEM_PROMPT = (
    "You are Annie, the warm and concise companion of her-os, a personal memory platform. "
    "You speak with one person, the owner of these memories. Answer briefly and naturally, "
    "as in conversation. When the memory below helps, use it and say when and who; when it "
    "does not hold the answer, say so rather than invent it."
)

# What Annie says when a voice session connects (the design's words, §8).
DEFAULT_GREETING = "Hey! I'm Annie. What's on your mind?"


class Settings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="ANNIE_VOICE_")

    port: int = Field(default=7860, ge=1, le=65535)
    # Chat bodies are small: a message and a session id.
    max_body_bytes: int = Field(default=64 * 1024, ge=1024)

    # --- the context engine (memory) ---
    context_engine_url: str = "http://127.0.0.1:8100"
    # The token sent to the engine as X-Internal-Token; default: this service's own
    # internal_token (one shared secret across her-os).
    context_engine_token: SecretStr | None = None
    # Timeout of one engine request (the offline responder's search, event batches), seconds.
    engine_timeout_s: float = Field(default=5.0, gt=0, le=120)

    # --- the memory briefing (prepended to the system prompt of a new session) ---
    briefing_enabled: bool = True
    briefing_timeout_s: float = Field(default=3.0, gt=0, le=60)
    briefing_max_chars: int = Field(default=2000, ge=200, le=20000)
    # Memories asked for per part (recent conversations; L1/L2 key facts).
    briefing_limit: int = Field(default=6, ge=1, le=50)
    # The search text at a session start with no message yet (a voice session).
    briefing_query: str = Field(
        default="today plans people promises family friends work", min_length=1, max_length=512
    )
    # With a language model, each turn after the first also searches memory for its own words
    # and puts what it finds (current facts first) in the prompt; off: only the briefing.
    turn_memory: bool = True
    # Before each turn Annie asks the engine whether anything was forgotten since the session
    # was briefed (GET /v1/forget); if so she drops the session's history and briefs it again.
    # The check's timeout, seconds: an engine that does not answer in time skips the check.
    forget_check_timeout_s: float = Field(default=0.5, gt=0, le=10)

    # --- the responder LLM ---
    # auto: openai-compatible if llm_base_url is set, else claude if claude_api_key is set,
    # else none (the offline memory responder).
    llm_backend: LlmBackendChoice = "auto"
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_api_key: SecretStr | None = None
    claude_api_key: SecretStr | None = None
    claude_model: str = "claude-haiku-4-5"  # the design's choice (fast, for voice and fallback)
    # Another Messages API endpoint (a proxy); default: Anthropic's.
    claude_base_url: str | None = None
    llm_timeout_s: float = Field(default=60.0, gt=0, le=600)
    llm_max_tokens: int = Field(default=1024, ge=16, le=32768)
    llm_temperature: float = Field(default=0.6, ge=0, le=2)
    system_prompt: str = Field(default=DEFAULT_SYSTEM_PROMPT, min_length=1, max_length=20000)
    # The design's llama-server (Qwen3.5-9B Q4_K_M on :8003, §8 LLM Backend Selection): a
    # second OpenAI-compatible server beside the default one. Set, a session that asks for
    # `llm_backend: "qwen3.5-9b"` talks to it with `llama_server_model`; unset, `qwen3.5-9b`
    # means the OpenAI-compatible backend above (llm_base_url), whatever its model.
    llama_server_url: str | None = None
    # The model name sent (llama-server answers with the one model it loaded, under the name
    # its --alias gives it).
    llama_server_model: str = Field(default="qwen3.5-9b", min_length=1, max_length=256)
    # The key of a llama-server started with --api-key (unset: none is sent).
    llama_server_api_key: SecretStr | None = None

    # --- chat limits ---
    max_message_chars: int = Field(default=4000, ge=1, le=32000)
    # Sessions kept in memory (least recently used dropped first).
    max_sessions: int = Field(default=200, ge=1, le=100000)
    # Messages of a session's history sent to the LLM (the oldest dropped first).
    max_history_messages: int = Field(default=40, ge=2, le=1000)
    # Rounds of tool calls within one turn before the model must answer in words.
    max_tool_rounds: int = Field(default=4, ge=0, le=20)
    tool_timeout_s: float = Field(default=30.0, gt=0, le=600)
    # A tool result is cut to this many characters of JSON before the model sees it.
    tool_result_max_chars: int = Field(default=8000, ge=100, le=200000)

    # --- tools (tools/; offered to LLM backends only: the offline responder has none) ---
    tools_enabled: list[str] = Field(
        default_factory=lambda: [
            "think", "render_table", "render_chart", "web_search", "fetch_webpage",
            "execute_python",
        ]
    )  # fmt: skip
    # SearXNG for web_search (unset: web_search answers that it needs this setting).
    searxng_url: str | None = None
    fetch_max_bytes: int = Field(default=2 * 1024 * 1024, ge=1024)
    fetch_timeout_s: float = Field(default=10.0, gt=0, le=120)
    python_timeout_s: float = Field(default=10.0, gt=0, le=300)
    python_memory_mb: int = Field(default=256, ge=32, le=16384)
    # Scratch directories of execute_python (one per run, deleted after).
    python_scratch_root: Path = Path("data/annie/scratch")

    # --- the offline responder's sentences ---
    # Speaker labels that are the owner ("You said …"), compared case-insensitively.
    owner_speakers: list[str] = Field(default_factory=list)
    # IANA time zone for "today", "yesterday", "on Tuesday".
    timezone: str = "UTC"

    # --- observability (events batched to the engine's /v1/events/emit) ---
    events_enabled: bool = True
    events_queue_size: int = Field(default=500, ge=1, le=100000)
    events_flush_s: float = Field(default=2.0, gt=0, le=600)
    events_batch_max: int = Field(default=500, ge=1, le=1000)

    # --- the voice pipeline (Pipecat over SmallWebRTC; voice/) ---
    # Default: moonshine on Linux x86_64, faster-whisper elsewhere (no Moonshine wheel there).
    stt_backend: SttBackendChoice = Field(default_factory=default_stt_backend)
    # whisper-gpu: a local CTranslate2 Whisper model folder (nothing is fetched from a hub).
    whisper_model_dir: Path | None = None
    whisper_device: str = "cuda"
    whisper_compute_type: str = "float16"
    # Spoken language (Whisper: None detects it; Moonshine: English only, "en" or None).
    stt_language: str | None = "en"
    # CPU threads of the embedded STT (Moonshine, faster-whisper); Whisper's beam width.
    stt_threads: int = Field(default=2, ge=1, le=64)
    stt_beam_size: int = Field(default=5, ge=1, le=20)
    # Where the bundled Whisper base model is assembled on first use (sha256-checked).
    models_dir: Path = Path("data/annie/models")
    tts_backend: TtsBackendChoice = "hibari"
    # hibari voice (the bundled one: heart).
    hibari_voice: str = "heart"
    tts_speed: float = Field(default=1.0, ge=0.5, le=2.0)
    # kokoro: local kokoro-onnx model and voices files.
    kokoro_model_path: Path | None = None
    kokoro_voices_path: Path | None = None
    kokoro_voice: str = "af_heart"
    # The VAD hears silence after vad_stop_s of it; the user's turn ends user_speech_timeout_s
    # later, once a transcript arrived: 0.5 s of silence in all, as OpenAI's server VAD and
    # LiveKit's endpointing default to (ADR 0015). Longer: fewer cut-in pauses, slower replies.
    user_speech_timeout_s: float = Field(default=0.3, ge=0.1, le=10)
    vad_stop_s: float = Field(default=0.2, ge=0.05, le=5)
    # Load the STT and TTS models in the background at start: otherwise the first session
    # loads them (Whisper: seconds on 2 cores) and the caller's first words are lost.
    voice_preload: bool = True
    # Spoken when a voice session's client connects, once the briefing is loaded (or after
    # briefing_timeout_s, whichever comes first); the model is told it greeted (its system
    # prompt), and the conversation it sees still opens with the user. Empty: no greeting.
    greeting: str = Field(default=DEFAULT_GREETING, max_length=300)
    # Voice sessions held at once (each holds a peer connection and a pipeline).
    max_voice_sessions: int = Field(default=4, ge=1, le=1000)
    # STUN/TURN URLs for the peer connection (none: host candidates only, a LAN).
    ice_servers: list[str] = Field(default_factory=list)

    @field_validator("llama_server_url", "llama_server_api_key", mode="before")
    @classmethod
    def _empty_is_unset(cls, v: object) -> object:
        return None if v == "" else v  # compose passes an unset variable as ""

    @field_validator("greeting")
    @classmethod
    def _strip_greeting(cls, value: str) -> str:
        return value.strip()  # whitespace alone speaks nothing: no greeting

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"{value!r} is not an IANA time zone (e.g. Asia/Kolkata)") from None
        return value

    @model_validator(mode="after")
    def _llm_settings_complete(self) -> Settings:
        backend = self.resolved_llm_backend()
        if backend == "openai":
            if not self.llm_base_url:
                raise ValueError(
                    f"{self.env_name('llm_backend')}=openai needs "
                    f"{self.env_name('llm_base_url')} (e.g. http://127.0.0.1:11434/v1)"
                )
            if not self.llm_model:
                raise ValueError(
                    f"the OpenAI-compatible LLM needs {self.env_name('llm_model')} "
                    "(the model name the server knows, e.g. qwen3:8b)"
                )
        if backend == "claude" and self.claude_api_key is None:
            raise ValueError(
                f"{self.env_name('llm_backend')}=claude needs {self.env_name('claude_api_key')}"
            )
        if self.stt_backend == "whisper-gpu" and self.whisper_model_dir is None:
            raise ValueError(
                f"{self.env_name('stt_backend')}=whisper-gpu needs "
                f"{self.env_name('whisper_model_dir')} (a local CTranslate2 Whisper model folder)"
            )
        if self.tts_backend == "kokoro" and (
            self.kokoro_model_path is None or self.kokoro_voices_path is None
        ):
            raise ValueError(
                f"{self.env_name('tts_backend')}=kokoro needs {self.env_name('kokoro_model_path')} "
                f"and {self.env_name('kokoro_voices_path')} (local kokoro-onnx files)"
            )
        return self

    def resolved_llm_backend(self) -> Literal["none", "openai", "claude"]:
        """The backend `auto` stands for, given what is configured."""
        if self.llm_backend != "auto":
            return self.llm_backend
        if self.llm_base_url:
            return "openai"
        if self.claude_api_key is not None:
            return "claude"
        return "none"

    def engine_token(self) -> str | None:
        token = self.context_engine_token or self.internal_token
        return None if token is None else token.get_secret_value()
