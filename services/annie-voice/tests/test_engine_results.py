"""Annie reads /v1/context results in the engine's forms and in the design's."""

from __future__ import annotations

from datetime import UTC, datetime

from annie_voice.engine import Memory

WHEN = datetime(2026, 5, 8, 13, 56, tzinfo=UTC)


def test_the_engines_result_gives_time_and_entity_names() -> None:
    item = {
        "text": "Priya is moving to Lisbon",
        "speaker": "Priya",
        "timestamp": WHEN.timestamp(),  # the design's epoch seconds
        "spoken_at": "2026-05-08T13:56:00Z",
        "entities": ["person:Priya", "place:Lisbon"],
        "entity_refs": [{"name": "Priya", "type": "person"}, {"name": "Lisbon", "type": "place"}],
        "relevance_score": 0.8,
    }
    memory = Memory.from_result(item)
    assert memory is not None
    assert memory.timestamp == WHEN
    assert memory.entities == ("Priya", "Lisbon")


def test_a_design_built_result_is_read_too() -> None:
    # a server answering as the design writes it: epoch `timestamp`, "type:name" entities
    item = {
        "text": "Priya is moving to Lisbon",
        "timestamp": WHEN.timestamp(),
        "entities": ["person:Priya", "place:coffee shop", "no-type"],
    }
    memory = Memory.from_result(item)
    assert memory is not None
    assert memory.timestamp == WHEN
    assert memory.entities == ("Priya", "coffee shop")
