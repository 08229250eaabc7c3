"""The creature registry: every background process of her-os is a creature in the Aquarium.

An event names its creature; service, process and zone follow from this registry, so an
emitter cannot disagree with the dashboard about where a process lives. Zones follow the
flow of a memory: *listening* (audio in, transcripts in), *thinking* (extraction, graph,
embeddings, retrieval, memory upkeep), *acting* (the API gate, Annie and her tools).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType


class Zone(StrEnum):
    LISTENING = "listening"
    THINKING = "thinking"
    ACTING = "acting"


class Service(StrEnum):
    AUDIO_PIPELINE = "audio-pipeline"
    CONTEXT_ENGINE = "context-engine"
    ANNIE_VOICE = "annie-voice"


@dataclass(frozen=True, slots=True)
class Creature:
    name: str
    zone: Zone
    service: Service
    process: str
    description: str


_A, _C, _V = Service.AUDIO_PIPELINE, Service.CONTEXT_ENGINE, Service.ANNIE_VOICE
_L, _T, _X = Zone.LISTENING, Zone.THINKING, Zone.ACTING

_ALL = (
    # listening: audio becomes words with speakers, and words reach the engine
    Creature("jellyfish", _L, _A, "transcription", "speech-to-text on the fast path"),
    Creature("seahorse", _L, _A, "voice_activity", "finds where speech is in the audio"),
    Creature("cerberus", _L, _A, "diarization", "splits speech into speakers"),
    Creature("siren", _L, _A, "speaker_identification", "names voices from the enrollment bank"),
    Creature("dolphin", _L, _A, "speech_emotion", "labels the emotion of each segment"),
    Creature("hydra", _L, _A, "sweep", "re-transcribes a whole session and replaces the fast path"),
    Creature("crab", _L, _A, "wearable_ingest", "buffers wearable audio into sessions"),
    Creature("nautilus", _L, _C, "transcript_watcher", "watches the JSONL volume for new lines"),
    Creature("octopus", _L, _C, "ingestion", "parses JSONL into sessions and segments"),
    # thinking: the memory is built, searched and kept
    Creature("anglerfish", _T, _C, "entity_extraction", "finds people, places, promises"),
    Creature("leviathan", _T, _C, "extraction_llm", "the language model behind extraction"),
    Creature("manta", _T, _C, "graph_sync", "writes entities and facts into the temporal graph"),
    Creature("starfish", _T, _C, "embedding", "turns segments and entities into vectors"),
    Creature("turtle", _T, _C, "bm25_search", "the keyword leg of retrieval"),
    Creature("shark", _T, _C, "vector_search", "the vector leg of retrieval"),
    Creature("kraken", _T, _C, "graph_search", "the graph leg of retrieval"),
    Creature("pufferfish", _T, _C, "fusion", "fuses the legs: RRF, temporal decay, MMR"),
    Creature("phoenix", _T, _C, "consolidation", "nightly promotion and demotion between tiers"),
    Creature("ouroboros", _T, _C, "salience_decay", "fades what has not been seen for a while"),
    Creature("coral", _T, _C, "community_detection", "groups entities into communities"),
    Creature("whale", _T, _C, "daily_reflection", "writes the reflection of the day"),
    Creature("narwhal", _T, _C, "chronicler", "records, streams and keeps every event"),
    # acting: who may ask, and Annie answering
    Creature("basilisk", _X, _C, "auth_gate", "checks the internal token of every API call"),
    Creature("mermaid", _X, _V, "voice_session", "Annie's voice pipeline: listen, think, speak"),
    Creature("selkie", _X, _V, "memory_briefing", "briefs Annie from memory at session start"),
    Creature("lanternfish", _X, _V, "responder_llm", "the language model Annie answers with"),
    Creature("otter", _X, _V, "tools", "Annie's tools: search, fetch, tables, charts, Python"),
)

CREATURES: MappingProxyType[str, Creature] = MappingProxyType({c.name: c for c in _ALL})
"""All creatures by name (27)."""


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
