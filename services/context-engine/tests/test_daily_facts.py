"""What happened in a day, without a database: facts said in English (predicates.statement and
change), the day's new and changed facts from sayings (day_facts.assemble), promises as
clauses, and the deterministic reflection leading with what happened (daily.summarise and
render) — and what the LLM is given."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from context_engine.extract.predicates import PREDICATES, change, statement
from context_engine.memory import daily
from context_engine.memory.day_facts import DayFacts, SaidFact, assemble

# --- the verbaliser ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "kwargs", "expected"),
    [
        (("Ines", "lives_in", "Porto"), {}, "Ines lives in Porto"),
        (("Ines", "lives_in", "Porto"), {"current": False}, "Ines lived in Porto"),
        (("Ines", "moved_to", "Porto"), {}, "Ines moved to Porto"),
        (("Ines", "lived_in", "Braga"), {}, "Ines used to live in Braga"),
        (("Ines", "is_from", "Braga"), {}, "Ines is from Braga"),
        (("Ines", "works_at", "Farfetch"), {"current": False}, "Ines worked at Farfetch"),
        (("Ines", "quit", "Farfetch"), {}, "Ines left Farfetch"),
        (("Ines", "works_as", "a nurse"), {}, "Ines works as a nurse"),
        (("Ines", "studies_at", "Minho"), {"current": False}, "Ines studied at Minho"),
        (("Bruno", "drinks", "mate"), {}, "Bruno drinks mate"),
        (("Bruno", "drinks", "mate"), {"current": False}, "Bruno drank mate"),
        (("Bruno", "prefers", "mate"), {"current": False}, "Bruno preferred mate"),
        (("Bruno", "plays", "padel"), {}, "Bruno plays padel"),
        (("Bruno", "does", "yoga"), {"current": False}, "Bruno did yoga"),
        (("Bruno", "stopped_using", "Strava"), {}, "Bruno stopped using Strava"),
        (("Bruno", "uses", "Salomon"), {"category": "shoe"}, "Bruno uses Salomon (shoes)"),
        (("Bruno", "owns", "Kobo"), {"category": "e-reader"}, "Bruno owns Kobo (e-readers)"),
        (("Bruno", "owns", "Kobo reader"), {"category": "reader"}, "Bruno owns Kobo reader"),
        (("Bruno", "uses", "Ray-Ban"), {"category": "glass"}, "Bruno uses Ray-Ban (glasses)"),
        (("Ines", "spouse", "Bruno"), {}, "Ines's spouse is Bruno"),
        (("Ines", "spouse", "Bruno"), {"current": False}, "Ines's spouse was Bruno"),
        (("Ines", "ex_spouse", "Rui"), {}, "Ines's ex-spouse is Rui"),
        (("Ines", "in_law", "Marta"), {}, "Ines's in-law is Marta"),
        (("Ines", "pet", "Bolacha"), {}, "Ines's pet is Bolacha"),
        # an LLM's edge names: synonyms mapped, others read as their words
        (("Ines", "WORKS_FOR", "Sonae"), {}, "Ines works at Sonae"),
        (("Ines", "RESIDES_IN", "Porto"), {}, "Ines lives in Porto"),
        (("Ines", "VISITED", "Madeira"), {}, "Ines visited Madeira"),
        (("  Ines ", "lives_in", "São  Paulo"), {}, "Ines lives in São Paulo"),
    ],
)
def test_a_fact_reads_as_english(args: tuple[str, str, str], kwargs: Any, expected: str) -> None:
    assert statement(*args, **kwargs) == expected


def test_every_predicate_of_the_vocabulary_reads_as_words() -> None:
    for name, p in PREDICATES.items():
        for current in (True, False):
            said = statement("Ines", name, "X", current=current)
            assert said.startswith("Ines") and said.endswith(" X"), said
            assert "_" not in said, said
        if p.group is not None and p.state == "on" and not p.noun and name != "moved_to":
            # a current state reads differently once over
            assert statement("Ines", name, "X") != statement("Ines", name, "X", current=False)


@pytest.mark.parametrize(
    ("old", "new", "category", "expected"),
    [
        (("lives_in", "Braga"), ("moved_to", "Porto"), None, "Ines moved from Braga to Porto"),
        (("moved_to", "Braga"), ("lives_in", "Porto"), None, "Ines moved from Braga to Porto"),
        (("works_at", "Sonae"), ("works_at", "NOS"), None, "Ines left Sonae for NOS"),
        (("works_as", "nurse"), ("works_as", "midwife"), None, "Ines went from nurse to midwife"),
        (("drinks", "espresso"), ("drinks", "mate"), None, "Ines switched from espresso to mate"),
        (
            ("uses", "Salomon"),
            ("uses", "Altra"),
            "shoe",
            "Ines switched from Salomon to Altra (shoes)",
        ),
        (
            ("loves", "espresso"),
            ("avoids", "espresso"),
            None,
            "Ines avoids espresso, and no longer loves it",
        ),
        (
            ("spouse", "Rui"),
            ("ex_spouse", "Rui"),
            None,
            "Ines's ex-spouse is Rui (before: Ines's spouse was Rui)",
        ),
        (
            ("plays", "padel"),
            ("stopped", "padel"),
            None,
            "Ines stopped padel, and no longer plays it",
        ),
        # an ending no template knows: both facts said
        (
            ("likes", "Lisbon"),
            ("VISITED", "Faro"),
            None,
            "Ines visited Faro, and no longer likes Lisbon",
        ),
    ],
)
def test_a_change_says_what_it_replaced(
    old: tuple[str, str], new: tuple[str, str], category: str | None, expected: str
) -> None:
    assert change("Ines", old[0], old[1], new[0], new[1], category=category) == expected


# --- the day's new and changed facts -------------------------------------------------------

DAY0 = datetime(2025, 9, 1, tzinfo=UTC)
START, END = DAY0 + timedelta(days=5), DAY0 + timedelta(days=6)


def said(
    uuid: str,
    subject: str,
    predicate: str,
    obj: str,
    at: datetime,
    *,
    invalid_at: datetime | None = None,
    ended_by: str | None = None,
    category: str | None = None,
    valid_at: datetime | None = None,
) -> SaidFact:
    return SaidFact(
        uuid=uuid, subject=subject, predicate=predicate, object=obj, category=category,
        valid_at=valid_at or at, invalid_at=invalid_at, ended_by=ended_by, said_at=at,
        session_id=f"s{at:%d%H}", segment_id=f"s{at:%d%H}-0",
    )  # fmt: skip


def test_news_is_what_was_first_said_that_day_and_what_it_replaced() -> None:
    morning, noon, evening = (START + timedelta(hours=h) for h in (8, 12, 20))
    facts = [
        # Ines lived in Braga (said on two days); today she moved to Porto
        said("braga1", "Ines", "lives_in", "Braga", DAY0, invalid_at=morning, ended_by="porto"),
        said(
            "braga2",
            "Ines",
            "lives_in",
            "Braga",
            DAY0 + timedelta(days=2),
            invalid_at=morning,
            ended_by="porto",
        ),
        said("porto", "Ines", "moved_to", "Porto", morning, valid_at=START - timedelta(days=7)),
        # restated: known and still true, not news (in other words too)
        said("sib0", "Ines", "sibling", "Bruno", DAY0),
        said("sib5", "Ines", "sibling", "Bruno", noon),
        said("lis0", "Bruno", "moved_to", "Lisbon", DAY0),
        said("lis5", "Bruno", "lives_in", "Lisbon", noon),
        # ended on day 3, said again today: news again
        said(
            "yoga0",
            "Bruno",
            "does",
            "yoga",
            DAY0,
            invalid_at=DAY0 + timedelta(days=3),
            ended_by="stop3",
        ),
        said("stop3", "Bruno", "stopped", "yoga", DAY0 + timedelta(days=3)),
        said("yoga5", "Bruno", "does", "yoga", noon),
        # said this morning, replaced this evening: only the change is told
        said("esp", "Bruno", "drinks", "espresso", morning, invalid_at=evening, ended_by="mate"),
        said("mate", "Bruno", "drinks", "mate", evening),
        # a category; and an LLM's own predicate
        said("altra", "Bruno", "uses", "Altra", noon, category="shoe"),
        said("visit", "Ines", "visited", "Madeira", noon),
        # said after the day: not this day's
        said("late", "Ines", "works_at", "NOS", END + timedelta(hours=1)),
        said("late2", "Ines", "works_at", "NOS", END),
    ]
    out = assemble(facts, START, END)
    assert [(c["statement"], c["previous"]["statement"]) for c in out.changed] == [
        ("Ines moved from Braga to Porto", "Ines lived in Braga"),
        ("Bruno switched from espresso to mate", "Bruno drank espresso"),
    ]
    porto = out.changed[0]
    assert (porto["subject"], porto["predicate"], porto["object"]) == ("Ines", "moved_to", "Porto")
    assert porto["said_at"] == morning.isoformat()
    assert porto["valid_at"] == (START - timedelta(days=7)).isoformat()  # "last week"
    assert porto["previous"]["session_id"] == "s0100"
    assert [f["statement"] for f in out.new] == [  # in the order said (then by uuid)
        "Bruno uses Altra (shoes)",
        "Ines visited Madeira",
        "Bruno does yoga",
    ]
    assert {f["segment_id"] for f in out.new} == {"s0612-0"}
    keys = out.fingerprint_keys()
    assert len(keys) == 5 and keys == assemble(reversed(facts), START, END).fingerprint_keys()


def test_a_day_without_facts_has_no_news() -> None:
    assert assemble([], START, END) == DayFacts()
    old = [said("a", "Ines", "lives_in", "Braga", DAY0)]
    assert assemble(old, START, END) == DayFacts()


# --- promises as clauses -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "clause"),
    [
        ("I'll call the plumber tomorrow", "to call the plumber tomorrow"),
        ("I\u2019ll call the plumber tomorrow.", "to call the plumber tomorrow"),
        ("I will water the plants on Sunday", "to water the plants on Sunday"),
        ("I promise I will send Bruno the photos", "to send Bruno the photos"),
        ("I promise to send Bruno the photos", "to send Bruno the photos"),
        ("I promise that I'll be there", "to be there"),
        ("I'm going to book the ferry", "to book the ferry"),
        ("we will repaint the hall", "to repaint the hall"),
        ("remind me to renew the passport", "to renew the passport"),
        ("Don't let me forget to pay rent", "to pay rent"),
        ("Tomorrow I'll call the plumber", None),
        ("the plumber, first thing", None),
    ],
)
def test_a_promise_reads_as_what_it_commits_to(name: str, clause: str | None) -> None:
    assert daily.promise_clause(name) == clause


# --- the reflection, deterministic ---------------------------------------------------------

TZ = "Europe/Lisbon"
DAY = date(2025, 9, 6)


def segment(i: int, hour: int, speaker: str, text: str, label: str | None = None) -> Any:
    return SimpleNamespace(
        session_id="d1", segment_id=f"d1-{i}", speaker=speaker, text=text,
        spoken_at=datetime(2025, 9, 6, hour, 0, tzinfo=UTC), emotion_label=label,
        emotion_score=0.8 if label else None, device_id="dev1",
    )  # fmt: skip


def promise(pid: int, name: str, first: datetime, fulfilled: datetime | None) -> dict[str, Any]:
    return {
        "id": pid, "name": name, "speaker": "Ines", "first_said_at": first, "session_id": "d1",
        "fulfilled_at": fulfilled, "fulfilment_evidence": "I sent them" if fulfilled else None,
    }  # fmt: skip


def day_inputs(labels: tuple[str | None, str | None]) -> daily.DayInputs:
    start, end = daily.day_bounds(DAY, TZ)
    inputs = daily.DayInputs(DAY, TZ, start, end, end)
    inputs.segments = [
        segment(0, 8, "Ines", "Bruno moved to Porto last week.", labels[0]),
        segment(1, 19, "Ines", "I'll send Bruno the photos tonight.", labels[1]),
    ]
    made = promise(7, "I'll send Bruno the photos tonight", datetime(2025, 9, 6, 19, tzinfo=UTC),
                   None)  # fmt: skip
    old = promise(3, "I'll book the ferry", datetime(2025, 9, 1, 10, tzinfo=UTC),
                  datetime(2025, 9, 6, 12, tzinfo=UTC))  # fmt: skip
    inputs.promises = {"made": [made], "kept": [old], "open": [made], "open_total": 1,
                       "open_ids": [7]}  # fmt: skip
    moved = said("m", "Bruno", "moved_to", "Porto", datetime(2025, 9, 6, 8, tzinfo=UTC))
    braga = said("b", "Bruno", "lives_in", "Braga", DAY0, invalid_at=moved.said_at, ended_by="m")
    dog = said("d", "Bruno", "pet", "Pipoca", datetime(2025, 9, 6, 8, tzinfo=UTC))
    inputs.facts = assemble([braga, moved, dog], start, end)
    return inputs


def test_the_reflection_leads_with_what_happened() -> None:
    summary = daily.summarise(day_inputs(("happy", "sad")))
    happened = [
        "Bruno moved from Braga to Porto.",
        "Bruno's pet is Pipoca.",
        "Ines promised to send Bruno the photos tonight.",
        "Ines kept the promise to book the ferry (made on Monday 1 September 2025).",
    ]
    assert summary["what_happened"] == happened
    paragraphs = daily.render(summary)
    assert paragraphs[0] == f"Reflection on Saturday 6 September 2025. {' '.join(happened)}"
    assert paragraphs[1].startswith("There was one conversation: 09:00–20:00 with Ines")
    assert paragraphs[3].startswith(
        "The mood went from happy in the morning to sad in the evening."
    )
    assert summary["emotional_arc_text"] == paragraphs[3]
    assert paragraphs[-1] == "1 promise was still open at the end of the day."

    reflection = daily.Reflection(DAY, "\n\n".join(paragraphs), summary, "deterministic", "r",
                                  DAY0, DAY0, True)  # fmt: skip
    out = reflection.as_dict()
    assert out["what_happened"] == happened
    assert [f["statement"] for f in out["facts_changed"]] == ["Bruno moved from Braga to Porto"]
    assert out["facts_changed"][0]["previous"]["statement"] == "Bruno lived in Braga"
    assert [f["statement"] for f in out["facts_new"]] == ["Bruno's pet is Pipoca"]
    assert [p["id"] for p in out["promises_made"]] == [7]
    assert [p["id"] for p in out["promises_kept"]] == [3]
    assert out["emotional_arc"] == paragraphs[3]


def test_no_emotion_says_nothing_about_the_mood_and_a_promise_kept_at_once_says_so() -> None:
    inputs = day_inputs((None, None))
    inputs.promises["kept"].append({**inputs.promises["made"][0], "fulfilled_at": END})
    summary = daily.summarise(inputs)
    assert summary["emotional_arc"] == [] and summary["emotional_arc_text"] == ""
    assert (
        "Ines promised to send Bruno the photos tonight, and kept it the same day."
        in (summary["what_happened"])
    )
    text = "\n\n".join(daily.render(summary))
    assert "mood" not in text and "emotion" not in text
    # an older stored reflection (no structured fields) still answers every field
    old = daily.Reflection(DAY, "t", {"promises": {}}, "deterministic", None, DAY0, DAY0, False)
    out = old.as_dict()
    assert out["facts_new"] == out["facts_changed"] == out["promises_kept"] == []
    assert out["what_happened"] == [] and out["emotional_arc"] == ""
    assert out["people"] == out["topics"] == out["promises"] == [] and out["sessions_count"] == 0
    assert out["summary"] == out["text"] == "t" and out["details"] == {"promises": {}}


def test_a_day_with_no_news_reads_as_before() -> None:
    inputs = day_inputs(("happy", "happy"))
    inputs.facts = DayFacts()
    inputs.promises = {"made": [], "kept": [], "open": [], "open_total": 0, "open_ids": []}
    summary = daily.summarise(inputs)
    assert summary["what_happened"] == []
    first = daily.render(summary)[0]
    assert first.startswith("Reflection on Saturday 6 September 2025. There was one conversation")


def test_the_llm_is_given_what_happened() -> None:
    summary = daily.summarise(day_inputs(("happy", "sad")))
    prompt = daily.llm_prompt(summary, ["[09:00] Ines: Bruno moved to Porto last week."])
    assert '"what_happened": ["Bruno moved from Braga to Porto."' in prompt
    assert (
        '"facts_changed": [{"change": "Bruno moved from Braga to Porto", '
        '"before": "Bruno lived in Braga"}]' in prompt
    )
    assert '"facts_new": ["Bruno\'s pet is Pipoca"]' in prompt
    assert "facts_source" not in prompt and "emotional_arc_text" not in prompt
    assert "Begin with what happened" in daily.LLM_SYSTEM
