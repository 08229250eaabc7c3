"""Contracts: transcript payload, events, creature registry, ids, error messages."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from pydantic import ValidationError

from her_os_shared.creatures import (
    CREATURES,
    CreatureName,
    Service,
    Zone,
    creatures_of,
    get_creature,
)
from her_os_shared.errors import describe_validation_error
from her_os_shared.events import EventType, ObservabilityEvent
from her_os_shared.ids import InvalidIdError, validate_id
from her_os_shared.transcript import TranscriptPayload


def test_registry_has_three_zones_and_three_services() -> None:
    assert {c.zone for c in CREATURES.values()} == set(Zone)
    assert {c.service for c in CREATURES.values()} == set(Service)
    # one creature per (service, process): an event can be routed by either key
    assert len({(c.service, c.process) for c in CREATURES.values()}) == len(CREATURES)
    assert [c.name for c in creatures_of("annie-voice")] == [
        CreatureName.GARGOYLE,
        CreatureName.SPHINX,
        CreatureName.GRIFFIN,
        CreatureName.LUNA_MOTH,
        CreatureName.CENTAUR,
        CreatureName.MINOTAUR,
        CreatureName.LEVIATHAN,
        CreatureName.SERPENT,
        CreatureName.CHIMERA,
        CreatureName.SELKIE,
        CreatureName.NYMPH,
        CreatureName.MERMAID,
        CreatureName.LANTERNFISH,
    ]


def test_event_built_from_creature_name_alone() -> None:
    ev = ObservabilityEvent.for_creature(
        CreatureName.SIREN, "start", session_id="s1", data={"seconds": 3.5}, reasoning="new clip"
    )
    assert (ev.service, ev.process, ev.zone) == ("audio-pipeline", "whisper-stt", "listening")
    assert ev.creature == "siren" and type(ev.creature) is str
    assert ev.event_type is EventType.START
    assert len(ev.event_id) == 32 and ev.timestamp.tzinfo is not None
    again = ObservabilityEvent.model_validate_json(ev.model_dump_json())
    assert again == ev


def test_event_that_disagrees_with_the_registry_is_refused() -> None:
    fields = get_creature(CreatureName.BASILISK)
    with pytest.raises(ValidationError) as info:
        ObservabilityEvent(
            service="audio-pipeline",
            process=fields.process,
            creature=CreatureName.BASILISK,
            zone=fields.zone,
            event_type="error",
        )
    assert "service audio-pipeline does not match creature 'basilisk'" in str(info.value)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"creature": "dolphin"}, "creature"),  # a retired name, with today's process
        ({"creature": "yeti"}, "creature"),
        ({"event_type": "explode"}, "event_type"),
        ({"session_id": "../../etc"}, "session_id"),
        ({"timestamp": "2026-01-01T00:00:00"}, "timestamp"),  # naive time is ambiguous
        ({"reasoning": "x" * 1001}, "reasoning"),
        ({"data": {"blob": "x" * 70_000}}, "(root)"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_invalid_events_name_the_field(change: dict, field: str) -> None:
    base = ObservabilityEvent.for_creature(CreatureName.STARFISH, "metric").model_dump(mode="json")
    with pytest.raises(ValidationError) as info:
        ObservabilityEvent.model_validate({**base, **change})
    message = describe_validation_error(info.value)
    assert message.startswith(f"{field}:"), message


def test_unknown_creature_lists_the_known_ones() -> None:
    with pytest.raises(KeyError, match="known: basilisk, centaur, cerberus"):
        ObservabilityEvent.for_creature("otter", "start")


def _payload(**over) -> dict:
    seg = {
        "segment_id": "a1",
        "speaker": "SPEAKER_00",
        "text": "hi",
        "start": 0.0,
        "end": 1.0,
        "language": "en",
        "stt_engine": "faster-whisper",
        "emotion": {"label": "neutral", "score": 0.5, "engine": "heuristic"},
        "pinned": False,
    }
    body = {
        "schema_version": 1,
        "session_id": "s1",
        "device_id": "omi-1",
        "session_started_at": "2026-05-08T13:56:00+00:00",
        "is_sweep": False,
        "segments": [seg],
    }
    for key, value in over.items():
        if key.startswith("seg_"):
            seg[key[4:]] = value
        else:
            body[key] = value
    return body


def test_design_payload_parses_and_serialises_every_field() -> None:
    p = TranscriptPayload.model_validate(_payload())
    dumped = json.loads(p.model_dump_json())
    assert set(dumped) == {
        "schema_version",
        "session_id",
        "device_id",
        "session_started_at",
        "is_sweep",
        "segments",
    }
    assert set(dumped["segments"][0]) == {
        "segment_id",
        "speaker",
        "text",
        "start",
        "end",
        "language",
        "stt_engine",
        "emotion",
        "pinned",
    }
    assert isinstance(p.session_started_at, datetime)


def test_overlapped_speech_is_written_only_where_there_is_some() -> None:
    """ADR 0025: a segment records who else talked during it; segments without overlap are
    written in the design's format, without the field."""
    overlap = [{"speaker": "priya", "start": 0.4, "end": 0.9}]
    p = TranscriptPayload.model_validate(_payload(seg_overlap=overlap))
    dumped = json.loads(p.model_dump_json())
    assert dumped["segments"][0]["overlap"] == overlap
    assert TranscriptPayload.model_validate_json(p.model_dump_json()) == p
    plain = json.loads(TranscriptPayload.model_validate(_payload()).model_dump_json())
    assert "overlap" not in plain["segments"][0]
    assert TranscriptPayload.model_validate(_payload(seg_overlap=[])).segments[0].overlap == []


@pytest.mark.parametrize(
    ("over", "expected"),
    [
        ({"schema_version": 2}, "schema_version: Input should be 1"),
        ({"session_id": "a/b"}, "session_id: must be 1-128 characters"),
        ({"seg_end": -1.0}, "segments.0.end: Input should be greater than or equal to 0"),
        ({"seg_start": 5.0}, "segments.0: end (1.0) must not be before start (5.0)"),
        ({"seg_start": float("nan")}, "segments.0.start: Input should be a finite number"),
        ({"seg_emotion": {"label": "joy", "score": 2}}, "segments.0.emotion.score"),
        ({"session_started_at": "2026-05-08T13:56:00"}, "session_started_at: Input should have"),
        ({"seg_language": "english language"}, "segments.0.language: String should match"),
        ({"extra": 1}, "extra: Extra inputs are not permitted"),
        # Times every store can hold (the keyword index keeps years 1677-2262 only)
        ({"session_started_at": "1500-05-08T13:56:00+00:00"}, "session_started_at: must lie"),
        ({"session_started_at": "2300-05-08T13:56:00+00:00"}, "session_started_at: must lie"),
        ({"seg_end": 2e7}, "segments.0.end: Input should be less than or equal to 10000000"),
        (
            {"seg_overlap": [{"speaker": "priya", "start": 0.8, "end": 0.2}]},
            "segments.0.overlap.0: end (0.2) must not be before start (0.8)",
        ),
        ({"seg_overlap": [{"speaker": "", "start": 0, "end": 1}]}, "segments.0.overlap.0.speaker"),
        (
            {"seg_overlap": [{"speaker": "a", "start": 0, "end": 1}] * 65},
            "segments.0.overlap: List",
        ),
    ],
)
def test_payload_errors_name_the_field_and_the_reason(over: dict, expected: str) -> None:
    with pytest.raises(ValidationError) as info:
        TranscriptPayload.model_validate(_payload(**over))
    assert describe_validation_error(info.value).startswith(expected)


def test_duplicate_segment_ids_in_one_payload_are_refused() -> None:
    body = _payload()
    body["segments"] = body["segments"] * 2
    with pytest.raises(ValidationError, match="appears twice"):
        TranscriptPayload.model_validate(body)


@pytest.mark.parametrize("good", ["a", "A-b_9", "x" * 128])
def test_valid_ids(good: str) -> None:
    assert validate_id(good) == good


@pytest.mark.parametrize("bad", ["", "x" * 129, "a.b", "a\n", "ä", None, 5])
def test_invalid_ids_name_the_field(bad) -> None:
    with pytest.raises(InvalidIdError, match=r"^device_id: "):
        validate_id(bad, "device_id")
