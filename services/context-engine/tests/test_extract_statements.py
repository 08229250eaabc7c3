"""Facts the fast extractor reads from the dependency parse (extract/statements.py), dates
resolved against the spoken time (her_os_shared/dates.py), and what it must not read."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context_engine.extract.fast import FastExtractor
from context_engine.extract.schema import ExtractedRelation, SegmentText
from her_os_shared.dates import resolve

SPOKEN = datetime(2026, 5, 12, 10, 0, tzinfo=UTC)  # a Tuesday


@pytest.fixture(scope="module")
def extractor() -> FastExtractor:
    fx = FastExtractor()
    fx.load()
    return fx


def say(extractor: FastExtractor, *lines: tuple[str, str]) -> list[ExtractedRelation]:
    segs = [
        SegmentText(f"s{i}", speaker, text, SPOKEN + timedelta(seconds=i))
        for i, (speaker, text) in enumerate(lines)
    ]
    return extractor.extract_sync(segs).relations


def triples(rels: list[ExtractedRelation]) -> set[tuple[str, str, str]]:
    return {(r.subject, r.predicate, r.object) for r in rels}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("We moved to Hyderabad in March.", ("Kavya", "moved_to", "Hyderabad")),
        ("I live in Jaipur with my parents.", ("Kavya", "lives_in", "Jaipur")),
        ("I used to live in Lucknow.", ("Kavya", "lived_in", "Lucknow")),
        ("I don't live in Lucknow anymore.", ("Kavya", "lived_in", "Lucknow")),
        ("I'm originally from Kochi.", ("Kavya", "is_from", "Kochi")),
        ("I grew up in Nagpur.", ("Kavya", "is_from", "Nagpur")),
        ("I work at Wipro now.", ("Kavya", "works_at", "Wipro")),
        ("I quit Accenture last month.", ("Kavya", "quit", "Accenture")),
        ("I finally joined Zomato.", ("Kavya", "works_at", "Zomato")),
        ("I got a new job at Flipkart.", ("Kavya", "works_at", "Flipkart")),
        ("I'm a pharmacist.", ("Kavya", "works_as", "pharmacist")),
        ("I'm studying at Ashoka University.", ("Kavya", "studies_at", "Ashoka University")),
        ("Lately I've switched to green tea.", ("Kavya", "drinks", "tea")),
        ("Espresso makes me jittery, honestly.", ("Kavya", "avoids", "espresso")),
        ("I stopped playing squash.", ("Kavya", "stopped", "squash")),
        ("I play chess every Sunday.", ("Kavya", "plays", "chess")),
        ("I took up knitting this winter.", ("Kavya", "does", "knitting")),
        ("I started taking salsa classes.", ("Kavya", "does", "salsa")),
        ("Our cat Mishti sleeps all day.", ("Kavya", "pet", "Mishti")),
        ("I'm married to Farhan.", ("Kavya", "spouse", "Farhan")),
        ("Farhan, my husband, cooks on Sundays.", ("Kavya", "spouse", "Farhan")),
    ],
)
def test_reads_the_fact(extractor: FastExtractor, text: str, expected: tuple) -> None:
    assert expected in triples(say(extractor, ("Kavya", text)))


@pytest.mark.parametrize(
    "text",
    [
        "Do you live in Jaipur?",  # a question states nothing
        "I'll move to Pune next year.",  # a plan
        "I would love to live in Paris.",  # a wish
        "I don't work at Wipro.",  # negated, not ended
        "He moved to Delhi.",  # nobody mentioned before: "he" is unknown
        "They said it moved to the cloud.",  # no person, no place
        "The meeting moved to Thursday.",
    ],
)
def test_reads_nothing_it_cannot_resolve(extractor: FastExtractor, text: str) -> None:
    rels = say(extractor, ("Kavya", text))
    assert not [r for r in rels if r.predicate in ("lives_in", "moved_to", "works_at")], rels


def test_third_person_and_dates(extractor: FastExtractor) -> None:
    rels = say(extractor, ("Kavya", "Sana moved to Chennai last week for her new role."))
    moved = next(r for r in rels if r.predicate == "moved_to")
    assert (moved.subject, moved.object) == ("Sana", "Chennai")
    assert moved.properties["when"] == "last week"
    assert moved.properties["valid_from"] == "2026-05-05"  # a week before it was said


def test_a_person_named_before_is_a_subject_the_tagger_missed(extractor: FastExtractor) -> None:
    # the small tagger reads "Tara" at the start of the sentence as an adjective
    rels = say(
        extractor,
        ("Nikhil", "Dev, your sister Tara called the office looking for you."),
        ("Dev", "She always forgets my number. Tara lives in Chennai, she works at a bank."),
    )
    assert {("Dev", "sibling", "Tara"), ("Tara", "lives_in", "Chennai")} <= triples(rels)
    # never named before: no subject, no fact
    assert not any(
        r.predicate == "lives_in" for r in say(extractor, ("Dev", "Tara lives in Chennai."))
    )


def test_you_is_the_other_party(extractor: FastExtractor) -> None:
    rels = say(
        extractor,
        ("Kavya", "How was the drive back?"),
        ("Imran", "Long. You moved to Indore, right? Your brother Zubin told me."),
    )
    assert ("Kavya", "sibling", "Zubin") in triples(rels)


def test_brand_switch_keeps_the_category(extractor: FastExtractor) -> None:
    before = say(extractor, ("Kavya", "I love my Asics trail shoes."))
    assert ("Kavya", "likes", "Asics") in triples(before)
    assert {r.properties.get("category") for r in before} == {"shoe"}
    after = say(
        extractor, ("Kavya", "These Salomon shoes are amazing, I switched from Asics for hiking.")
    )
    got = {(r.predicate, r.object, r.properties.get("category")) for r in after}
    assert ("uses", "Salomon", "shoe") in got
    assert ("switched_from", "Asics", "shoe") in got


def test_one_promise_per_statement(extractor: FastExtractor) -> None:
    segs = [SegmentText("p", "Kavya", "I promise I will call Nani this weekend.", SPOKEN)]
    promises = [e for e in extractor.extract_sync(segs).entities if e.type == "promise"]
    assert len(promises) == 1
    assert promises[0].properties["due"] == "2026-05-16"  # the coming Saturday


def test_filler_questions_are_not_entities(extractor: FastExtractor) -> None:
    segs = [
        SegmentText("q1", "Kavya", "Oh nice, which one?"),
        SegmentText("q2", "Imran", "Where did you buy the blue sofa?"),
    ]
    questions = {e.name for e in extractor.extract_sync(segs).entities if e.type == "question"}
    assert questions == {"Where did you buy the blue sofa?"}


def test_topics_for_what_facts_are_about(extractor: FastExtractor) -> None:
    segs = [SegmentText("t", "Kavya", "I started doing pottery and I drink chai every day.")]
    topics = {e.name for e in extractor.extract_sync(segs).entities if e.type == "topic"}
    assert {"pottery", "chai"} <= topics


def test_dates_resolve_against_the_spoken_time() -> None:
    assert resolve("last Friday", SPOKEN, "past") == datetime(2026, 5, 8, tzinfo=UTC)
    assert resolve("by Sunday", SPOKEN, "future") == datetime(2026, 5, 17, tzinfo=UTC)
    assert resolve("the other day", SPOKEN, "past") is None  # vague: words kept, no date
    assert resolve("next week", None) is None  # no time said: nothing to resolve against


def test_seasons_resolve_to_the_day_they_begin() -> None:
    may = datetime(2026, 5, 12, tzinfo=UTC)  # in spring
    october = datetime(2026, 10, 2, tzinfo=UTC)
    assert resolve("last spring", may, "past") == datetime(2025, 3, 1, tzinfo=UTC)
    assert resolve("last spring", october, "past") == datetime(2026, 3, 1, tzinfo=UTC)
    assert resolve("this summer", may) == datetime(2026, 6, 1, tzinfo=UTC)  # coming
    assert resolve("this summer", october) == datetime(2026, 6, 1, tzinfo=UTC)  # just past
    assert resolve("next spring", may) == datetime(2027, 3, 1, tzinfo=UTC)
    assert resolve("next winter", datetime(2026, 1, 15, tzinfo=UTC)) == datetime(
        2026, 12, 1, tzinfo=UTC
    )
    assert resolve("last winter", datetime(2026, 1, 15, tzinfo=UTC)) == datetime(
        2024, 12, 1, tzinfo=UTC
    )  # the winter under way is not the last one
    assert resolve("last autumn", may) == resolve("last fall", may)


_WORDS = st.sampled_from(
    "I you he she we my your his her moved to from lives in live work at quit joined switched "
    "Pune Mumbai Google Infosys tea coffee Nike shoes stopped playing tennis started the a and "
    "not never will , . ? ! Priya Meera married sister dog Biscuit".split()
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(_WORDS, min_size=1, max_size=25))
def test_any_words_give_a_resolved_subject_or_nothing(
    extractor: FastExtractor, words: list[str]
) -> None:
    text = " ".join(words)
    rels = say(extractor, ("Imran", "Hello there."), ("Kavya", text))
    for r in rels:
        # the subject is a speaker or a name said in the text, never a pronoun
        assert r.subject in ("Kavya", "Imran") or r.subject.split()[0] in text, (text, r)
        assert r.subject.lower() not in ("i", "you", "he", "she", "we", "my", "her", "his")


@pytest.mark.parametrize(
    "text",
    [
        "I asked Priya to move to Delhi.",  # Priya would move, not the speaker
        "My parents want me to move to Delhi.",  # a wish
        "If I move to Mumbai, I'll need a car.",  # a condition
        "If I get a job at Google I'll tell you.",
        "I'm moving to Pune next month.",  # a plan with a future date
        "When you move to Mumbai, you realise how expensive it is.",  # generic "you"
        "I work with Priya.",  # a person is no employer
        "I'm a terrible singer.",  # a description, not a job
        "I drank wine at the party last night.",  # once, not the daily drink
        "I left Mumbai for a week.",  # a trip, not a move
        "My boss gives me headaches.",  # no food to avoid
    ],
)
def test_plans_wishes_and_guesses_end_nothing(extractor: FastExtractor, text: str) -> None:
    rels = say(extractor, ("Ravi", "Tell me."), ("Kavya", text))
    single = {"lives_in", "moved_to", "moved_from", "works_at", "works_as", "drinks", "avoids"}
    assert not [r for r in rels if r.predicate in single], rels


def test_an_ending_said_of_another_verb_ends_nothing_else(extractor: FastExtractor) -> None:
    rels = say(extractor, ("Kavya", "I work at Wipro, and I don't play tennis anymore."))
    assert ("Kavya", "works_at", "Wipro") in triples(rels)
    assert ("Kavya", "stopped", "tennis") in triples(rels)
    assert not [r for r in rels if r.predicate == "worked_at"]


def test_a_duration_is_not_a_start_date(extractor: FastExtractor) -> None:
    rels = say(extractor, ("Kavya", "I worked at Infosys for two years."))
    worked = next(r for r in rels if r.predicate == "worked_at")
    assert "valid_from" not in worked.properties and "when" not in worked.properties


def test_a_guessed_she_never_changes_a_home(extractor: FastExtractor) -> None:
    rels = say(extractor, ("Kavya", "Sana called. She moved to Goa."))
    assert not [r for r in rels if r.predicate == "moved_to"]  # "she" is a guess


def test_diarization_labels_are_no_people(extractor: FastExtractor) -> None:
    segs = [
        SegmentText("a", "SPEAKER_00", "I live in Pune."),
        SegmentText("b", "SPEAKER_01", "You're my best friend."),
    ]
    out = extractor.extract_sync(segs)
    assert not [e for e in out.entities if e.name.startswith("SPEAKER")]
    # the facts stay (the graph keeps a label's node to its session: test_graph_writer)
    assert ("SPEAKER_00", "lives_in", "Pune") in triples(out.relations)


def test_relations_said_to_the_person_spoken_to(extractor: FastExtractor) -> None:
    rels = say(
        extractor,
        ("Imran", "Happy birthday!"),
        ("Kavya", "Thanks. You're my best friend, you know. Sana and I are roommates now."),
        ("Imran", "Hi Mom! I broke up with Zoya last week."),
    )
    got = triples(rels)
    assert ("Kavya", "friend", "Imran") in got
    assert ("Kavya", "roommate", "Sana") in got
    assert ("Imran", "parent", "Kavya") in got  # "Hi Mom!" said to the other party
    assert ("Imran", "ex_partner", "Zoya") in got


@pytest.mark.parametrize(
    "text",
    ["You're like my sister.", "I broke up with him.", "We're married, Imran and I, you know."],
)
def test_dialogue_readings_that_would_guess(extractor: FastExtractor, text: str) -> None:
    rels = say(extractor, ("Imran", "So?"), ("Kavya", text))
    assert not [r for r in rels if r.predicate in ("sibling", "ex_partner")], rels
    assert not [r for r in rels if r.predicate == "spouse" and r.object == "Imran"], rels
