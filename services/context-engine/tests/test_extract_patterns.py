"""The extraction vocabulary's rules and the pattern finders, on hand-written transcripts."""

from __future__ import annotations

from context_engine.extract.patterns import find_entities, find_relations
from context_engine.extract.schema import (
    CONFIDENCE_GATES,
    ENTITY_TYPES,
    ExtractedEntity,
    SegmentText,
    best_segment,
    canonical_name,
    dedup,
    finalise,
)


def seg(text: str, speaker: str = "Asha", segment_id: str = "c0-000") -> SegmentText:
    return SegmentText(segment_id, speaker, text)


def types_in(text: str) -> list[str]:
    return sorted({e.type for e in find_entities(seg(text))})


def test_nine_types_each_with_a_gate() -> None:
    assert len(ENTITY_TYPES) == 9 and set(CONFIDENCE_GATES) == set(ENTITY_TYPES)


def test_promises_need_a_commitment_not_just_a_future_tense() -> None:
    assert types_in("I'll call the plumber tomorrow morning.") == ["promise"]
    assert types_in("Remind me to buy milk on the way home.") == ["promise"]
    assert types_in("I promise I will be there on time.") == ["promise"]
    assert types_in("I'll be honest, it was a long day.") == []
    assert types_in("It will rain later.") == []


def test_decisions_habits_and_questions() -> None:
    assert types_in("We decided to move to Pune next year.") == ["decision"]
    assert types_in("OK, we're going with the blue sofa.") == ["decision"]
    assert types_in("I always run before breakfast.") == ["habit"]
    assert types_in("Every Sunday we call my parents.") == ["habit"]
    assert types_in("When does the train to Mumbai leave?") == ["question"]
    assert types_in("It was good, right?") == []


def test_relationships_from_either_side_and_whose_they_are() -> None:
    rels = list(find_relations(seg("My wife Priya and her brother Arjun came over.")))
    assert [(r.subject, r.predicate, r.object) for r in rels] == [
        ("Asha", "spouse", "Priya"),
        ("her", "sibling", "Arjun"),
    ]
    assert rels[0].confidence > rels[1].confidence  # the speaker's own relation is surer
    after = list(find_relations(seg("I met Ravi, my best friend, at the station.")))
    assert [(r.subject, r.predicate, r.object) for r in after] == [("Asha", "friend", "Ravi")]
    assert list(find_relations(seg("my wife said the weather is nice"))) == []  # no name


def test_gates_dedup_and_linking_to_the_best_segment() -> None:
    segments = [
        seg("We talked about the garden.", segment_id="a"),
        seg("Priya wants tomatoes in the garden this year.", segment_id="b"),
    ]
    found = [
        ExtractedEntity("person", "priya", 0.7, evidence="Priya wants tomatoes"),
        ExtractedEntity("person", "Priya ", 0.9, evidence="Priya wants tomatoes"),
        ExtractedEntity("promise", "maybe later", 0.5),  # below the promise gate: dropped
    ]
    out = finalise(found, segments)
    assert [(e.name, e.confidence, e.segment_id) for e in out] == [("Priya ", 0.9, "b")]
    assert canonical_name("  Priya   Sharma ") == "priya sharma"
    assert best_segment("nothing shared", segments) is None
    # dedup keeps the most confident of a (type, name) at its first position
    assert [e.name for e in dedup(found)] == ["Priya ", "maybe later"]
