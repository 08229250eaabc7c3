"""The creature registry: every background process of her-os is a creature in the Aquarium.

An event names its creature; service, process and zone follow from this registry, so an
emitter cannot disagree with the dashboard about where a process lives.

The registry is the design's 27 creatures (her-os-architecture.md §7, "Creature Registry"),
with the design's zones, services and process names, plus creatures of the project's own for
the processes the design has no creature for (ADR 0021). Zones: *listening* (audio in, and
the browser's connection to Annie), *thinking* (watching, ingesting, extracting, searching,
keeping the memory; Annie's briefing, tools and pipeline), *acting* (the language models,
Annie's voice, ears, search, fetch and data channel).

This module is the only place a creature's name is written as a string: emitters use
`CreatureName` (`CreatureName.OWL`), and a test (tests/test_creature_names.py) fails on a
quoted creature name anywhere else in the services, the CLI, the benchmarks and the
dashboard's code.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Any


class Zone(StrEnum):
    LISTENING = "listening"
    THINKING = "thinking"
    ACTING = "acting"


class Service(StrEnum):
    AUDIO_PIPELINE = "audio-pipeline"
    CONTEXT_ENGINE = "context-engine"
    ANNIE_VOICE = "annie-voice"


class Origin(StrEnum):
    """Whose creature it is: the design's (§7) or the project's own (ADR 0021)."""

    DESIGN = "design"
    PROJECT = "project"


class CreatureName(StrEnum):
    """Every creature's name. Emitters and the dashboard refer to creatures by these."""

    # --- the design's 27 (her-os-architecture.md §7) ---
    JELLYFISH = "jellyfish"
    SIREN = "siren"
    CERBERUS = "cerberus"
    HYDRA = "hydra"
    GARGOYLE = "gargoyle"
    OWL = "owl"
    OUROBOROS = "ouroboros"
    DRAGON = "dragon"
    KRAKEN = "kraken"
    STARFISH = "starfish"
    PHOENIX = "phoenix"
    BASILISK = "basilisk"
    SPHINX = "sphinx"
    GRIFFIN = "griffin"
    LUNA_MOTH = "luna-moth"
    LION = "lion"
    UNICORN = "unicorn"
    FAIRY = "fairy"
    PEGASUS = "pegasus"
    WEREWOLF = "werewolf"
    CENTAUR = "centaur"
    MINOTAUR = "minotaur"
    LEVIATHAN = "leviathan"
    SERPENT = "serpent"
    CHIMERA = "chimera"
    SELKIE = "selkie"
    NYMPH = "nymph"
    # --- the project's own (processes the design has no creature for) ---
    SEAHORSE = "seahorse"
    CUTTLEFISH = "cuttlefish"
    STINGRAY = "stingray"
    MANTA = "manta"
    EEL = "eel"
    SHARK = "shark"
    SQUID = "squid"
    PUFFERFISH = "pufferfish"
    SALMON = "salmon"
    SEA_CUCUMBER = "sea-cucumber"
    CORAL = "coral"
    NARWHAL = "narwhal"
    MERMAID = "mermaid"
    KELPIE = "kelpie"
    LANTERNFISH = "lanternfish"


@dataclass(frozen=True, slots=True)
class Creature:
    name: CreatureName
    zone: Zone
    service: Service
    process: str
    origin: Origin
    description: str

    @property
    def from_design(self) -> bool:
        return self.origin is Origin.DESIGN


_N = CreatureName
_A, _C, _V = Service.AUDIO_PIPELINE, Service.CONTEXT_ENGINE, Service.ANNIE_VOICE
_L, _T, _X = Zone.LISTENING, Zone.THINKING, Zone.ACTING
_D, _P = Origin.DESIGN, Origin.PROJECT

_ALL = (
    # --- the design's 27, in the design's order; processes as the design names them ---
    # listening
    Creature(_N.JELLYFISH, _L, _A, "omi-stream", _D,
             "the wearable's stream: Omi audio and transcript webhooks, buffered into sessions"),
    Creature(_N.SIREN, _L, _A, "whisper-stt", _D,
             "speech-to-text of each clip (the configured STT backend)"),
    Creature(_N.CERBERUS, _L, _A, "speaker-id", _D, "names voices from the enrollment bank"),
    Creature(_N.HYDRA, _L, _A, "ser-emotion", _D, "labels the emotion of each segment"),
    Creature(_N.GARGOYLE, _L, _V, "webrtc-transport", _D,
             "the browser's WebRTC connection to Annie's voice"),
    # thinking
    Creature(_N.OWL, _T, _C, "file-watcher", _D, "watches the transcript volume for new lines"),
    Creature(_N.OUROBOROS, _T, _C, "ingest-pipeline", _D,
             "parses JSONL into sessions and segments"),
    Creature(_N.DRAGON, _T, _C, "postgresql", _D, "PostgreSQL: how busy the engine's pools are"),
    Creature(_N.KRAKEN, _T, _C, "entity-extraction", _D, "finds people, places, promises"),
    Creature(_N.STARFISH, _T, _C, "bm25-search", _D, "the keyword leg of retrieval"),
    Creature(_N.PHOENIX, _T, _C, "daily-reflection", _D,
             "writes the reflection of the day and notes the promises kept"),
    Creature(_N.BASILISK, _T, _C, "auth-gate", _D, "checks the internal token of every API call"),
    Creature(_N.SPHINX, _T, _V, "memory-loader", _D, "briefs Annie from memory as a session opens"),
    Creature(_N.GRIFFIN, _T, _V, "tool-router", _D,
             "runs Annie's other tool calls: think, tables, charts, Python"),
    Creature(_N.LUNA_MOTH, _T, _V, "pipecat-pipeline", _D,
             "Annie's voice pipeline: hear, think, speak"),
    # acting
    Creature(_N.LION, _X, _C, "llm-qwen35-35b", _D,
             "LLM calls to Qwen3.5 35B-A3B (or the 27B the design swapped in for extraction)"),
    Creature(_N.UNICORN, _X, _C, "llm-qwen3-8b", _D, "LLM calls to Qwen3 8B"),
    Creature(_N.FAIRY, _X, _C, "llm-qwen3-32b", _D, "LLM calls to Qwen3 32B"),
    Creature(_N.PEGASUS, _X, _C, "llm-mistral-small", _D, "LLM calls to Mistral Small"),
    Creature(_N.WEREWOLF, _X, _C, "llm-sarvam-m", _D, "LLM calls to Sarvam-M"),
    Creature(_N.CENTAUR, _X, _V, "llm-claude-haiku", _D, "Annie answering with Claude"),
    Creature(_N.MINOTAUR, _X, _V, "llm-ollama", _D,
             "Annie answering with an OpenAI-compatible server (Ollama, llama-server)"),
    Creature(_N.LEVIATHAN, _X, _V, "kokoro-tts", _D, "Annie's speech (Kokoro or Hibari TTS)"),
    Creature(_N.SERPENT, _X, _V, "whisper-stt-annie", _D,
             "Annie's ears: the transcript of what the user said"),
    Creature(_N.CHIMERA, _X, _V, "searxng-search", _D, "Annie's web search"),
    Creature(_N.SELKIE, _X, _V, "webpage-fetch", _D, "Annie reading a web page"),
    Creature(_N.NYMPH, _X, _V, "data-channel", _D,
             "tables and charts sent to the voice page over the WebRTC data channel"),
    # --- the project's own ---
    Creature(_N.SEAHORSE, _L, _A, "voice-activity", _P, "finds where speech is in the audio"),
    Creature(_N.CUTTLEFISH, _L, _A, "diarization", _P, "splits speech into speakers"),
    Creature(_N.STINGRAY, _L, _A, "sweep", _P,
             "re-transcribes a whole session and replaces the fast path"),
    Creature(_N.MANTA, _T, _C, "graph-sync", _P,
             "writes entities and facts into the temporal graph"),
    Creature(_N.EEL, _T, _C, "embedding", _P, "turns segments and entities into vectors"),
    Creature(_N.SHARK, _T, _C, "vector-search", _P, "the vector leg of retrieval"),
    Creature(_N.SQUID, _T, _C, "graph-search", _P, "the graph leg of retrieval"),
    Creature(_N.PUFFERFISH, _T, _C, "fusion", _P, "fuses the legs: RRF, temporal decay, MMR"),
    Creature(_N.SALMON, _T, _C, "consolidation", _P,
             "nightly promotion and demotion between tiers"),
    Creature(_N.SEA_CUCUMBER, _T, _C, "memory-upkeep", _P,
             "salience decay, store checks and forgetting"),
    Creature(_N.CORAL, _T, _C, "community-detection", _P, "groups entities into communities"),
    Creature(_N.NARWHAL, _T, _C, "chronicler", _P, "records, streams and keeps every event"),
    Creature(_N.MERMAID, _T, _V, "chat-session", _P,
             "a conversation with Annie, typed or spoken, opening"),
    Creature(_N.KELPIE, _X, _C, "llm-other", _P,
             "LLM calls to a model of no design family (the Claude fallback among them)"),
    Creature(_N.LANTERNFISH, _X, _V, "offline-responder", _P,
             "Annie answering from memory without a language model"),
)  # fmt: skip

CREATURES: MappingProxyType[str, Creature] = MappingProxyType({c.name: c for c in _ALL})
"""All creatures by name: the design's 27, then the project's own."""

DESIGN_CREATURES: tuple[Creature, ...] = tuple(c for c in _ALL if c.origin is Origin.DESIGN)
PROJECT_CREATURES: tuple[Creature, ...] = tuple(c for c in _ALL if c.origin is Origin.PROJECT)


class UnknownCreatureError(KeyError):
    pass


def get_creature(name: str) -> Creature:
    try:
        return CREATURES[name]
    except KeyError:
        raise UnknownCreatureError(
            f"unknown creature {name!r}; known: {', '.join(sorted(CREATURES))}"
        ) from None


def creatures_of(service: Service | str) -> list[Creature]:
    return [c for c in _ALL if c.service == Service(service)]


# --- language models: one creature per model family (ADR 0021) -------------------------------

# The context engine's LLM calls go to the design's creature of the model's family; a model of
# no design family (Claude, the engine's fallback, among them) to the project's kelpie.
_ENGINE_LLM_FAMILIES: tuple[tuple[re.Pattern[str], CreatureName], ...] = (
    (re.compile(r"qwen-?3\.?5\W*(35b|27b)"), _N.LION),
    (re.compile(r"qwen-?3\W*32b"), _N.FAIRY),
    (re.compile(r"qwen-?3\W*8b"), _N.UNICORN),
    (re.compile(r"mistral\W*small"), _N.PEGASUS),
    (re.compile(r"sarvam\W*m\b"), _N.WEREWOLF),
)

ENGINE_LLMS: frozenset[CreatureName] = frozenset({c for _, c in _ENGINE_LLM_FAMILIES} | {_N.KELPIE})
"""The creatures of the context engine's LLM calls."""


def engine_llm_creature(model: str) -> CreatureName:
    """The creature of a context-engine LLM call to `model` (a model name as its server
    knows it: `qwen3:8b`, `Qwen/Qwen3-32B`, `qwen3.5:35b-a3b`, `claude-sonnet-4-5`)."""
    name = model.lower()
    for pattern, creature in _ENGINE_LLM_FAMILIES:
        if pattern.search(name):
            return creature
    return _N.KELPIE


def responder_creature(backend: str) -> CreatureName:
    """The creature of Annie's answering with `backend` (a responder's `name`): Claude is the
    design's centaur, no model at all the project's lanternfish, any OpenAI-compatible server
    (Ollama in the design) the design's minotaur."""
    if backend == "claude":
        return _N.CENTAUR
    if backend == "none":
        return _N.LANTERNFISH
    return _N.MINOTAUR


# Annie's tools with a design creature of their own; the tool router (griffin) runs the rest.
_TOOL_CREATURES: Mapping[str, CreatureName] = MappingProxyType(
    {"web_search": _N.CHIMERA, "fetch_webpage": _N.SELKIE}
)


def tool_creature(name: str) -> CreatureName:
    """The creature of a call of Annie's tool `name`."""
    return _TOOL_CREATURES.get(name, _N.GRIFFIN)


# --- the registry before ADR 0021 (ADR 0001's): read old events under today's names ----------

_UPGRADE_BY_PAIR: Mapping[tuple[str, str], CreatureName] = MappingProxyType({
    ("jellyfish", "transcription"): _N.SIREN,
    ("seahorse", "voice_activity"): _N.SEAHORSE,
    ("cerberus", "diarization"): _N.CUTTLEFISH,
    ("siren", "speaker_identification"): _N.CERBERUS,
    ("dolphin", "speech_emotion"): _N.HYDRA,
    ("hydra", "sweep"): _N.STINGRAY,
    ("crab", "wearable_ingest"): _N.JELLYFISH,
    ("nautilus", "transcript_watcher"): _N.OWL,
    ("octopus", "ingestion"): _N.OUROBOROS,
    ("anglerfish", "entity_extraction"): _N.KRAKEN,
    ("manta", "graph_sync"): _N.MANTA,
    ("starfish", "embedding"): _N.EEL,
    ("turtle", "bm25_search"): _N.STARFISH,
    ("shark", "vector_search"): _N.SHARK,
    ("kraken", "graph_search"): _N.SQUID,
    ("phoenix", "consolidation"): _N.SALMON,
    ("ouroboros", "salience_decay"): _N.SEA_CUCUMBER,
    ("coral", "community_detection"): _N.CORAL,
    ("whale", "daily_reflection"): _N.PHOENIX,
    ("basilisk", "auth_gate"): _N.BASILISK,
    ("selkie", "memory_briefing"): _N.SPHINX,
})  # fmt: skip
# Old creatures that stood for several of today's: the event's data says which.
_OLD_LLM = ("leviathan", "extraction_llm")
_OLD_RESPONDER = ("lanternfish", "responder_llm")
_OLD_TOOLS = ("otter", "tools")
_OLD_VOICE = ("mermaid", "voice_session")
_VOICE_STAGES: Mapping[str, CreatureName] = MappingProxyType({
    "transcript": _N.SERPENT, "annie_speaking": _N.LEVIATHAN, "annie_stopped": _N.LEVIATHAN,
})  # fmt: skip

LEGACY_BY_DATA: frozenset[tuple[str, str]] = frozenset(
    {_OLD_LLM, _OLD_RESPONDER, _OLD_TOOLS, _OLD_VOICE}
)
"""The old (creature, process) pairs whose creature today depends on the event's data."""
LEGACY_PAIRS: frozenset[tuple[str, str]] = frozenset({*_UPGRADE_BY_PAIR, *LEGACY_BY_DATA})
"""Every (creature, process) of the registry before ADR 0021."""

RETIRED_NAMES: frozenset[str] = frozenset(c for c, _ in LEGACY_PAIRS) - set(CREATURES)
"""Names of that registry no creature bears any more (never reused: an old event is never
mistaken for a new creature by its name alone)."""


def _text(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key)
    return value if isinstance(value, str) else ""


def upgrade_legacy(creature: str, process: str, data: Mapping[str, Any]) -> Creature | None:
    """Today's creature for an event stamped with a (creature, process) of the registry before
    ADR 0021, or None when the pair is not such an old one. No old pair is a current one (a
    test says so): the pair, not the name or the process alone, tells an old event."""
    pair = (creature, process)
    if pair in _UPGRADE_BY_PAIR:
        return CREATURES[_UPGRADE_BY_PAIR[pair]]
    if pair == _OLD_LLM:  # data.model: "openai-compatible(qwen3:8b)", or with a fallback
        return CREATURES[engine_llm_creature(_text(data, "model").split(", falling back", 1)[0])]
    if pair == _OLD_RESPONDER:
        return CREATURES[responder_creature(_text(data, "backend") or "openai")]
    if pair == _OLD_TOOLS:
        return CREATURES[tool_creature(_text(data, "tool"))]
    if pair == _OLD_VOICE:
        if data.get("voice") is not True:
            return CREATURES[_N.MERMAID]
        return CREATURES[_VOICE_STAGES.get(_text(data, "stage"), _N.LUNA_MOTH)]
    return None
