"""The creature registry against the design's table (her-os-architecture.md §7), the rule for
the LLM creatures, and how events of the registry before ADR 0021 are read.

Names are written out here on purpose: these tests pin the wire format a design-built client
sends and reads."""

from __future__ import annotations

import pytest

from her_os_shared.creatures import (
    CREATURES,
    DESIGN_CREATURES,
    ENGINE_LLMS,
    LEGACY_PAIRS,
    PROJECT_CREATURES,
    RETIRED_NAMES,
    CreatureName,
    Origin,
    engine_llm_creature,
    responder_creature,
    tool_creature,
    upgrade_legacy,
)
from her_os_shared.events import ObservabilityEvent

# The design's "Creature Registry" table, row by row: creature, zone, service, process.
DESIGN_TABLE = [
    ("jellyfish", "listening", "audio-pipeline", "omi-stream"),
    ("siren", "listening", "audio-pipeline", "whisper-stt"),
    ("cerberus", "listening", "audio-pipeline", "speaker-id"),
    ("hydra", "listening", "audio-pipeline", "ser-emotion"),
    ("gargoyle", "listening", "annie-voice", "webrtc-transport"),
    ("owl", "thinking", "context-engine", "file-watcher"),
    ("ouroboros", "thinking", "context-engine", "ingest-pipeline"),
    ("dragon", "thinking", "context-engine", "postgresql"),
    ("kraken", "thinking", "context-engine", "entity-extraction"),
    ("starfish", "thinking", "context-engine", "bm25-search"),
    ("phoenix", "thinking", "context-engine", "daily-reflection"),
    ("basilisk", "thinking", "context-engine", "auth-gate"),
    ("sphinx", "thinking", "annie-voice", "memory-loader"),
    ("griffin", "thinking", "annie-voice", "tool-router"),
    ("luna-moth", "thinking", "annie-voice", "pipecat-pipeline"),
    ("lion", "acting", "context-engine", "llm-qwen35-35b"),
    ("unicorn", "acting", "context-engine", "llm-qwen3-8b"),
    ("fairy", "acting", "context-engine", "llm-qwen3-32b"),
    ("pegasus", "acting", "context-engine", "llm-mistral-small"),
    ("werewolf", "acting", "context-engine", "llm-sarvam-m"),
    ("centaur", "acting", "annie-voice", "llm-claude-haiku"),
    ("minotaur", "acting", "annie-voice", "llm-ollama"),
    ("leviathan", "acting", "annie-voice", "kokoro-tts"),
    ("serpent", "acting", "annie-voice", "whisper-stt-annie"),
    ("chimera", "acting", "annie-voice", "searxng-search"),
    ("selkie", "acting", "annie-voice", "webpage-fetch"),
    ("nymph", "acting", "annie-voice", "data-channel"),
]

# The project's own creatures (ADR 0021): the processes the design has no creature for.
PROJECT_TABLE = [
    ("seahorse", "listening", "audio-pipeline", "voice-activity"),
    ("cuttlefish", "listening", "audio-pipeline", "diarization"),
    ("stingray", "listening", "audio-pipeline", "sweep"),
    ("manta", "thinking", "context-engine", "graph-sync"),
    ("eel", "thinking", "context-engine", "embedding"),
    ("shark", "thinking", "context-engine", "vector-search"),
    ("squid", "thinking", "context-engine", "graph-search"),
    ("pufferfish", "thinking", "context-engine", "fusion"),
    ("salmon", "thinking", "context-engine", "consolidation"),
    ("sea-cucumber", "thinking", "context-engine", "memory-upkeep"),
    ("coral", "thinking", "context-engine", "community-detection"),
    ("narwhal", "thinking", "context-engine", "chronicler"),
    ("mermaid", "thinking", "annie-voice", "chat-session"),
    ("kelpie", "acting", "context-engine", "llm-other"),
    ("lanternfish", "acting", "annie-voice", "offline-responder"),
]


def _rows(creatures):
    return [(c.name, c.zone, c.service, c.process) for c in creatures]


def test_the_design_27_are_the_designs_rows() -> None:
    assert _rows(DESIGN_CREATURES) == DESIGN_TABLE
    assert all(c.origin is Origin.DESIGN and c.from_design for c in DESIGN_CREATURES)


def test_the_projects_own_creatures() -> None:
    assert _rows(PROJECT_CREATURES) == PROJECT_TABLE
    assert all(c.origin is Origin.PROJECT and not c.from_design for c in PROJECT_CREATURES)
    assert len(CREATURES) == len(DESIGN_TABLE) + len(PROJECT_TABLE) == 42
    assert {name for name, *_ in DESIGN_TABLE}.isdisjoint(name for name, *_ in PROJECT_TABLE)


def test_names_are_the_enum() -> None:
    assert set(CREATURES) == set(CreatureName)
    assert [c.name for c in CREATURES.values()] == list(CreatureName)
    assert all(isinstance(c.name, CreatureName) for c in CREATURES.values())
    for c in CREATURES.values():  # kebab-case, as the design writes them
        assert c.process == c.process.lower() and "_" not in c.process and " " not in c.process


def test_the_designs_emit_example_validates() -> None:
    # her-os-architecture.md §6, POST /v1/events/emit
    example = {
        "creature": "serpent", "event_type": "complete", "service": "annie-voice",
        "process": "whisper-stt-annie", "zone": "acting",
        "data": {"duration_ms": 450}, "reasoning": "STT completed",
    }  # fmt: skip
    event = ObservabilityEvent.model_validate(example)
    assert (event.creature, event.process, event.zone) == ("serpent", "whisper-stt-annie", "acting")


def test_the_designs_event_schema_example_matches_the_registry() -> None:
    # §7 "Event Schema" (its event_id is a UUID with dashes: see the audit's O9, not this ADR)
    event = ObservabilityEvent.model_validate(
        {
            "timestamp": "2026-03-04T14:30:00.000Z",
            "service": "context-engine",
            "process": "entity-extraction",
            "creature": "kraken",
            "zone": "thinking",
            "event_type": "complete",
            "data": {"entities_found": 7, "duration_ms": 8400},
            "reasoning": "Extracted 7 entities in 8400ms",
        }
    )
    assert event.creature == CreatureName.KRAKEN


@pytest.mark.parametrize(
    ("model", "creature"),
    [
        ("qwen3.5:35b-a3b", "lion"),
        ("Qwen3.5-35B-A3B-Q4_K_M.gguf", "lion"),
        ("qwen3.5:27b", "lion"),
        ("qwen3:8b", "unicorn"),
        ("Qwen/Qwen3-8B", "unicorn"),
        ("qwen3:32b", "fairy"),
        ("mistral-small3.2:24b", "pegasus"),
        ("sarvam-m", "werewolf"),
        ("claude-sonnet-4-5", "kelpie"),
        ("qwen3.5:9b", "kelpie"),
        ("qwen3:30b-a3b", "kelpie"),
        ("llama3.1:8b", "kelpie"),
        ("", "kelpie"),
    ],
)
def test_engine_llm_by_model_family(model: str, creature: str) -> None:
    assert engine_llm_creature(model) == creature
    assert engine_llm_creature(model) in ENGINE_LLMS
    assert CREATURES[engine_llm_creature(model)].service == "context-engine"


def test_annie_responders_and_tools() -> None:
    assert responder_creature("claude") == "centaur"
    assert responder_creature("openai") == "minotaur"
    assert responder_creature("none") == "lanternfish"
    assert tool_creature("web_search") == "chimera"
    assert tool_creature("fetch_webpage") == "selkie"
    for name in ("think", "render_table", "render_chart", "execute_python", "anything"):
        assert tool_creature(name) == "griffin"


# The registry before ADR 0021 (ADR 0001): every (creature, process) and what it reads as now.
OLD_EVENTS = [
    ("jellyfish", "transcription", {}, "siren"),
    ("seahorse", "voice_activity", {}, "seahorse"),
    ("cerberus", "diarization", {}, "cuttlefish"),
    ("siren", "speaker_identification", {}, "cerberus"),
    ("dolphin", "speech_emotion", {}, "hydra"),
    ("hydra", "sweep", {}, "stingray"),
    ("crab", "wearable_ingest", {}, "jellyfish"),
    ("nautilus", "transcript_watcher", {}, "owl"),
    ("octopus", "ingestion", {}, "ouroboros"),
    ("anglerfish", "entity_extraction", {}, "kraken"),
    ("leviathan", "extraction_llm", {"model": "openai-compatible(qwen3:8b)"}, "unicorn"),
    (
        "leviathan",
        "extraction_llm",
        {"model": "openai-compatible(llama3:8b), falling back to claude(claude-sonnet-4-5)"},
        "kelpie",
    ),
    ("leviathan", "extraction_llm", {}, "kelpie"),
    ("manta", "graph_sync", {}, "manta"),
    ("starfish", "embedding", {}, "eel"),
    ("turtle", "bm25_search", {}, "starfish"),
    ("shark", "vector_search", {}, "shark"),
    ("kraken", "graph_search", {}, "squid"),
    ("phoenix", "consolidation", {}, "salmon"),
    ("ouroboros", "salience_decay", {}, "sea-cucumber"),
    ("coral", "community_detection", {}, "coral"),
    ("whale", "daily_reflection", {}, "phoenix"),
    ("basilisk", "auth_gate", {}, "basilisk"),
    ("mermaid", "voice_session", {"backend": "none"}, "mermaid"),
    ("mermaid", "voice_session", {"voice": True, "stage": "voice_session"}, "luna-moth"),
    ("mermaid", "voice_session", {"voice": True, "stage": "transcript"}, "serpent"),
    ("mermaid", "voice_session", {"voice": True, "stage": "annie_speaking"}, "leviathan"),
    ("selkie", "memory_briefing", {}, "sphinx"),
    ("lanternfish", "responder_llm", {"backend": "claude"}, "centaur"),
    ("lanternfish", "responder_llm", {"backend": "openai"}, "minotaur"),
    ("lanternfish", "responder_llm", {"backend": "none"}, "lanternfish"),
    ("otter", "tools", {"tool": "web_search"}, "chimera"),
    ("otter", "tools", {"tool": "fetch_webpage"}, "selkie"),
    ("otter", "tools", {"tool": "render_chart"}, "griffin"),
]


@pytest.mark.parametrize(("creature", "process", "data", "now"), OLD_EVENTS)
def test_old_events_read_under_todays_names(creature, process, data, now) -> None:
    assert upgrade_legacy(creature, process, data).name == now
    old = {
        "schema_version": 1,
        "event_id": "a" * 32,
        "timestamp": "2026-05-01T10:00:00+00:00",
        "service": CREATURES[now].service.value,
        "process": process,
        "creature": creature,
        "zone": "acting",  # whatever the old zone was: today's replaces it
        "event_type": "metric",
        "data": data,
    }
    event = ObservabilityEvent.model_validate(old)
    c = CREATURES[now]
    assert (event.creature, event.service, event.process, event.zone) == (
        now,
        c.service,
        c.process,
        c.zone,
    )
    assert event.data == data and event.event_id == "a" * 32


def test_every_old_pair_is_covered_and_old_names_are_not_reused() -> None:
    assert {(c, p) for c, p, _, _ in OLD_EVENTS} == LEGACY_PAIRS
    assert RETIRED_NAMES == {
        "dolphin", "crab", "nautilus", "octopus", "anglerfish", "turtle", "whale", "otter"
    }  # fmt: skip
    assert RETIRED_NAMES.isdisjoint(CREATURES)
    current = {(c.name, c.process) for c in CREATURES.values()}
    assert LEGACY_PAIRS.isdisjoint(current)  # an old pair never reads as a current one
    assert upgrade_legacy("kraken", "entity-extraction", {}) is None  # today's pair
    assert upgrade_legacy("unicorn", "llm-qwen3-8b", {}) is None


def test_a_current_event_is_left_alone_and_a_wrong_pair_still_fails() -> None:
    from pydantic import ValidationError

    ok = ObservabilityEvent.for_creature(CreatureName.SALMON, "start").model_dump(mode="json")
    assert ObservabilityEvent.model_validate(ok).creature == "salmon"
    with pytest.raises(ValidationError, match="process"):
        ObservabilityEvent.model_validate({**ok, "process": "sweep"})
