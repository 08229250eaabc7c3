"""Statements from clauses (extract/clauses.py): every declarative clause about a person, in
the third person with names; pronouns across turns; plans, habits, endings; and what must give
nothing. Real bundled model, own names and wording."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import spacy

from context_engine.extract import spacy_model
from context_engine.extract.clauses import Statement
from context_engine.extract.fast import FastExtractor
from context_engine.extract.schema import SegmentText

SPOKEN = datetime(2026, 5, 12, 10, 0, tzinfo=UTC)  # a Tuesday


@pytest.fixture(scope="module")
def extractor() -> FastExtractor:
    fx = FastExtractor()
    fx.load()
    return fx


def say(extractor: FastExtractor, *lines: tuple[str, str]) -> list[Statement]:
    turns = [
        SegmentText(f"s{i}", speaker, text, SPOKEN + timedelta(seconds=i))
        for i, (speaker, text) in enumerate(lines)
    ]
    return extractor.extract_sync(turns).statements


def texts(found: list[Statement]) -> list[str]:
    return [s.text for s in found]


def test_a_first_person_clause_becomes_a_third_person_statement(extractor: FastExtractor) -> None:
    found = say(extractor, ("Ines", "I just signed up for pottery lessons at the community hall."))
    assert len(found) == 1
    s = found[0]
    assert (s.subject, s.predicate, s.kind) == ("Ines", "sign up", "fact")
    assert s.text == "Ines just signed up for pottery lessons at the community hall"
    assert s.object == "for pottery lessons at the community hall"
    assert s.segment_id == "s0" and s.valid_at == "2026-05-12"


def test_present_tense_and_possessives_are_rewritten(extractor: FastExtractor) -> None:
    found = say(extractor, ("Ines", "I keep my bees on the roof and I'm proud of my honey."))
    assert "Ines keeps their bees on the roof" in texts(found)
    assert "Ines is proud of their honey" in texts(found)


def test_you_as_one_named_person_takes_the_verb_of_the_third_person(
    extractor: FastExtractor,
) -> None:
    found = say(
        extractor,
        ("Bruno", "Hi Ines! How was the week?"),
        ("Ines", "Busy! Bruno, you're so patient with the new interns and you have real guts."),
    )
    assert "Bruno is so patient with the new interns" in texts(found)
    assert "Bruno has real guts" in texts(found)


def test_a_pronoun_in_a_later_turn_resolves_to_the_one_person_named(
    extractor: FastExtractor,
) -> None:
    found = say(
        extractor,
        ("Tomas", "Did you hear from Greta? Is she still in Oslo?"),
        ("Ines", "Yes, she moved there in April. She teaches piano at a school now."),
    )
    about = {s.text for s in found if s.subject == "Greta"}
    assert "Greta moved to Oslo in April" in about
    assert "Greta teaches piano at a school now" in about
    moved = next(s for s in found if s.predicate == "move")
    assert moved.valid_at == "2026-04-12"  # "in April", said in May
    # "that place": the one place named lately
    found = say(
        extractor,
        ("Tomas", "Remember the cabin trip to Geilo?"),
        ("Ines", "I still miss that place so much."),
    )
    assert "Ines still misses Geilo so much" in texts(found)


def test_an_ambiguous_pronoun_gives_nothing(extractor: FastExtractor) -> None:
    found = say(
        extractor,
        ("Tomas", "Greta and Marit dropped by this morning."),
        ("Ines", "Oh lovely. She sold her flat last month."),
    )
    assert not [s for s in found if s.segment_id == "s1"]


def test_yes_to_a_question_states_the_question(extractor: FastExtractor) -> None:
    found = say(
        extractor, ("Tomas", "Do you still sing in the choir?"), ("Ines", "Yes, every week!")
    )
    assert [(s.subject, s.segment_id) for s in found] == [("Ines", "s1")]
    assert found[0].text == "Ines does still sing in the choir"


def test_a_plan_with_a_date_ahead_is_valid_from_that_date(extractor: FastExtractor) -> None:
    found = say(extractor, ("Ines", "I'm starting at the museum in September."))
    assert [(s.kind, s.valid_at) for s in found] == [("plan", "2026-09-12")]
    found = say(extractor, ("Ines", "I'll paint the fence tomorrow."))
    assert [(s.kind, s.valid_at, s.text) for s in found] == [
        ("plan", "2026-05-13", "Ines will paint the fence tomorrow")
    ]


def test_habits_and_endings_are_marked(extractor: FastExtractor) -> None:
    found = say(
        extractor,
        ("Ines", "Every Saturday I row on the river."),
        ("Tomas", "Cool."),
        ("Ines", "Honestly I've given up rowing, my knee hurts."),
    )
    kinds = {(s.segment_id, s.kind, s.predicate) for s in found}
    assert ("s0", "habit", "row") in kinds
    assert ("s2", "ended", "give up") in kinds
    assert "Ines's knee hurts" in texts(found)


def test_negation_is_part_of_the_predicate(extractor: FastExtractor) -> None:
    found = say(extractor, ("Ines", "I don't eat meat anymore."))
    assert [(s.predicate, s.kind, s.text) for s in found] == [
        ("not eat", "ended", "Ines doesn't eat meat anymore")
    ]


@pytest.mark.parametrize(
    "text",
    [
        "Do you want to get lunch at the harbour?",  # a question
        "If I get the grant I will buy a kiln.",  # a condition
        "I would love to live by the sea.",  # a hypothetical
        "I wish I could sail to Iceland.",  # a wish
        "My cousin said she quit the orchestra.",  # someone else's words
        "I know. I love it! I'm so glad.",  # small talk
        "They opened a bakery downtown.",  # nobody named
        "I joined the choir, isn't that odd?",  # not a tag: a question of its own
        "Did you keep the bees on your roof, Bruno?",  # a question with a name at the end
    ],
)
def test_what_states_nothing_gives_nothing(extractor: FastExtractor, text: str) -> None:
    assert say(extractor, ("Ines", text)) == []


def test_a_season_dates_the_statement(extractor: FastExtractor) -> None:
    found = say(extractor, ("Ines", "I moved to Tromsø last spring."))  # said in May 2026
    assert [(s.text, s.valid_at) for s in found] == [
        ("Ines moved to Tromsø last spring", "2025-03-01")
    ]


def test_a_statement_with_a_question_tagged_on_is_said_all_the_same(
    extractor: FastExtractor,
) -> None:
    found = say(extractor, ("Ines", "I keep bees on my roof now, did I tell you?"))
    assert texts(found) == ["Ines keeps bees on their roof now"]
    found = say(extractor, ("Ines", "We adopted a greyhound last week, you know?"))
    assert texts(found) == ["Ines and others adopted a greyhound last week"]


def test_a_turn_addressed_by_name_keeps_the_name_out_of_the_clause(
    extractor: FastExtractor,
) -> None:
    found = say(
        extractor,
        ("Ines", "Hey Tomas, big news - I'm now a volunteer at the animal shelter!"),
        ("Tomas", "Amazing."),
        ("Ines", "I'll return your ladder on Friday, Tomas."),
    )
    assert "Ines is now a volunteer at the animal shelter" in texts(found)
    assert "Ines will return Tomas's ladder on Friday" in texts(found)


def test_a_speakers_own_things_and_views_are_about_the_speaker(
    extractor: FastExtractor,
) -> None:
    found = say(
        extractor,
        ("Ines", "My brothers are always there for me. Learning new crafts is so rewarding."),
    )
    assert {s.subject for s in found} == {"Ines"}
    assert "Ines's brothers are always there for Ines" in texts(found)
    view = next(s for s in found if s.kind == "opinion")
    assert view.text == "Ines thinks learning new crafts is so rewarding"


def test_the_faster_attribute_ruler_sets_what_spacys_sets() -> None:
    """The lookup that replaces spaCy's attribute ruler (spacy_model.faster_attribute_ruler)
    gives every token the same POS, morphology and lemma, on text that exercises the
    exceptions ("ain't", "gonna", "but" as an adverb)."""
    ours = spacy_model.get_nlp()
    assert type(ours.get_pipe("attribute_ruler")).__name__ == "function"
    theirs = spacy.load(spacy_model.model_dir(), exclude=list(spacy_model.EXCLUDE))
    assert type(theirs.get_pipe("attribute_ruler")).__name__ == "AttributeRuler"
    sample = [
        "I ain't gonna lie, we're gonna win, ain't we?",
        "She was but a child. There's nothing but rain.",
        "  Two   spaces and a tab\there. Didn't you say you'd come?",
        "Lena's sister works at the Royal Bank of Canada in Toronto since 2019.",
        "Wow!!! lol that's sooo cool, u wanna come w/ me 2morrow?",
    ]
    compared = 0
    for a, b in zip(ours.pipe(sample), theirs.pipe(sample), strict=True):
        for x, y in zip(a, b, strict=True):
            assert (x.pos_, x.tag_, str(x.morph), x.lemma_) == (
                y.pos_, y.tag_, str(y.morph), y.lemma_,
            ), x.text  # fmt: skip
            compared += 1
    assert compared > 60
