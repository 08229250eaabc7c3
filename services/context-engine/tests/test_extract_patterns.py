"""The extraction vocabulary's rules and the pattern finders, on hand-written transcripts."""

from __future__ import annotations

from typing import Any

from context_engine.extract.patterns import (
    find_entities,
    find_preferences,
    find_relations,
    find_vocatives,
    not_a_name,
)
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


def test_ten_types_each_with_a_gate() -> None:
    assert len(ENTITY_TYPES) == 10 and set(CONFIDENCE_GATES) == set(ENTITY_TYPES)


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
        ("Priya", "sibling", "Arjun"),  # "her": the person named last before it
    ]
    assert rels[0].confidence > rels[1].confidence  # the speaker's own relation is surer
    after = list(find_relations(seg("I met Ravi, my best friend, at the station.")))
    assert [(r.subject, r.predicate, r.object) for r in after] == [("Asha", "friend", "Ravi")]
    assert list(find_relations(seg("my wife said the weather is nice"))) == []  # no name
    assert relations_in("Priya's brother Arjun is here.") == [("Priya", "sibling", "Arjun")]
    assert relations_in("Priya is my wife.") == [("Asha", "spouse", "Priya")]


def relations_in(text: str, **context: Any) -> list[tuple[str, str, str]]:
    return [(r.subject, r.predicate, r.object) for r in find_relations(seg(text), **context)]


def test_pronoun_and_addressee_owners_are_resolved_or_dropped() -> None:
    assert relations_in("Her sister Amy called.") == []  # nobody to be "her": never ("her", ...)
    assert relations_in("Her sister Amy called.", previous_person="Priya") == [
        ("Priya", "sibling", "Amy")
    ]
    # a person found by NER (offset, name) before the pronoun
    assert relations_in("Lunch with Rohan, and his son Kabir.", people=[(11, "Rohan")]) == [
        ("Rohan", "child", "Kabir")
    ]
    assert relations_in("How is your dad Vikram?") == []  # nobody spoken to
    assert relations_in("How is your dad Vikram?", addressee="Priya") == [
        ("Priya", "parent", "Vikram")
    ]


def test_names_that_are_not_names() -> None:
    assert relations_in("Listen, my friend, it will be fine.") == []  # a vocative, no name
    assert relations_in("I saw my mom Monday.") == []
    for word in ("Y'know", "You'll", "Noooo", "Hey", "Monday", "Woohoo"):
        assert not_a_name(word), word
    for word in ("Priya", "Ravi", "O'Brien"):
        assert not not_a_name(word), word


def test_vocatives() -> None:
    said = [
        (v.name, v.greeted)
        for v in find_vocatives(
            "Hey Gina! That's great, Nate. Good morning, Mr. Geller. I visited Rome, Paris."
        )
    ]
    assert said == [("Gina", True), ("Nate", False), ("Mr. Geller", True)]  # not Rome/Paris
    assert find_vocatives("Hey Man! Thanks, Y'know.") == []


def preferences(text: str) -> list[tuple[str, str]]:
    return [(r.predicate, r.object) for r in find_preferences(seg(text))]


def test_likes_and_avoids_for_supersession() -> None:
    assert preferences("I love coffee.") == [("likes", "coffee")]
    assert preferences("I really enjoy green tea in the morning.") == [("likes", "green tea")]
    assert preferences("I like to paint on weekends.") == [("likes", "painting")]
    assert preferences("I'm really into photography these days.") == [("likes", "photography")]
    assert preferences("I stopped drinking coffee last month.") == [("avoids", "coffee")]
    assert preferences("I gave up coffee.") == [("avoids", "coffee")]
    assert preferences("I don't drink coffee anymore.") == [("avoids", "coffee")]
    assert preferences("I can't stand coffee.") == [("avoids", "coffee")]
    assert preferences("I quit smoking.") == [("avoids", "smoking")]
    assert preferences("I've stopped going to the gym.") == [("avoids", "gym")]
    assert preferences("I'm allergic to cats.") == [("avoids", "cats")]
    r = next(find_preferences(seg("I love coffee.", segment_id="c9-001")))
    assert (r.subject, r.segment_id) == ("Asha", "c9-001")  # the speaker, where it was said
    # not preferences: reactions, pronouns, clauses, questions, wishes, quitting a job
    for text in (
        "I love you.",
        "I love how you did that.",
        "I love the energy!",
        "Do I like coffee?",
        "I'd like to go.",
        "I quit my job.",
        "I don't have time.",
        "I like, you know, stuff.",
        "I stopped by the shop.",
        "I'm off to work.",
        "I love it when you cook.",
    ):
        assert preferences(text) == [], text


def test_curly_apostrophes_are_read_as_straight_ones() -> None:
    assert types_in("I’ll call the plumber tomorrow.") == ["promise"]
    assert preferences("I don’t drink coffee.") == [("avoids", "coffee")]
    assert types_in("You know what I mean?") == []  # a filler, not a question


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
