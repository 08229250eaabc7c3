"""The pure parts of query_facts.py: first person, the words that tell facts apart, which
facts count when the owner and something else are named, and their order. The lookup itself
runs end to end in test_worked_examples.py (real PostgreSQL and FalkorDB)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from context_engine.graph.base import Fact
from context_engine.knowledge import query_facts
from context_engine.knowledge.query_facts import (
    Subject,
    _rank,
    _touching,
    is_current,
    knowledge_only,
    relevance,
    says_first_person,
    stems,
)

T = datetime(2025, 5, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("query", "first"),
    [
        ("Do I still like coffee?", True),
        ("do i like coffee", True),
        ("Where does my sister live?", True),
        ("Tell me about Priya", True),
        ("Is this mine?", True),
        ("I'm curious where Ravi works", True),
        ("Where does Priya live?", False),
        ("Is it mimic or I.T.?", True),
        ("What did Mia say?", False),  # "Mia" contains no first-person word
    ],
)
def test_first_person(query: str, first: bool) -> None:
    assert says_first_person(query) is first


def test_stems_meet_across_plural_and_verb_forms() -> None:
    assert stems("Does he like running shoes?") == {"like", "running", "shoe"}
    assert stems("Arjun likes shoes") == {"arjun", "like", "shoe"}
    assert "glass" in stems("a glass")  # -ss is not a plural


def fact(uuid: str, s: str, p: str, o: str, days: int, *, ended_by: str | None = None) -> Fact:
    return Fact(
        uuid=uuid, subject=s, subject_uuid=f"n-{s}", predicate=p, object=o,
        object_uuid=f"n-{o}", fact=f"{s} {p} {o}", valid_at=T + timedelta(days=days),
        invalid_at=T + timedelta(days=90) if ended_by else None, created_at=T,
        expired_at=None, episodes=[],
        ended_by={"uuid": ended_by} if ended_by else None,
    )  # fmt: skip


LIKES = fact("f1", "Arjun", "likes", "coffee", 0, ended_by="f3")
DRINKS = fact("f2", "Arjun", "drinks", "coffee", 1, ended_by="f4")
AVOIDS = fact("f3", "Arjun", "avoids", "coffee", 90)
TEA = fact("f4", "Arjun", "drinks", "tea", 90)
HOME = fact("f5", "Arjun", "lives_in", "Jayanagar", 10)


def test_the_owner_and_a_topic_keep_the_topics_facts_and_what_ended_them() -> None:
    facts = [LIKES, DRINKS, AVOIDS, TEA, HOME]
    kept = _touching(facts, {"n-coffee"})
    assert [f.uuid for f in kept] == ["f1", "f2", "f3", "f4"]  # not where he lives


def test_facts_joining_more_subjects_and_sharing_words_come_first() -> None:
    owner = Subject(1, "person", "Arjun", "L1", owner=True)
    coffee = Subject(2, "topic", "coffee", "L2")
    subjects = {"n-Arjun": owner, "n-coffee": coffee}
    wanted = stems("Do I still like coffee?")
    score = {f.uuid: relevance(f, wanted) for f in (HOME, TEA, AVOIDS)}
    ranked = _rank([HOME, TEA, AVOIDS], wanted, subjects, score)
    assert [f.uuid for f in ranked] == ["f3", "f4", "f5"]
    # Only the owner named: the words decide, then the newest.
    wanted = stems("Where do I live?")
    score = {f.uuid: relevance(f, wanted) for f in (TEA, HOME)}
    ranked = _rank([TEA, HOME], wanted, {"n-Arjun": owner}, score)
    assert [f.uuid for f in ranked] == ["f5", "f4"]


def test_current_is_relative_to_as_of() -> None:
    assert is_current(LIKES, T + timedelta(days=89))
    assert not is_current(LIKES, T + timedelta(days=90))
    assert is_current(AVOIDS, T + timedelta(days=1000))


def test_things_said_are_not_knowledge() -> None:
    asked = fact("f9", "Arjun", "ASKED", "which bakery?", 5)
    felt = fact("f10", "Arjun", "FELT", "joy", 5)
    habit = fact("f11", "Arjun", "HAS_HABIT", "runs every Sunday", 5)
    kept = knowledge_only([asked, felt, habit, TEA])
    assert [f.uuid for f in kept] == ["f11", "f4"]


def test_relevance_counts_the_words_a_kind_of_fact_is_asked_by() -> None:
    moved = fact("f12", "Tara", "MOVED_TO", "Delhi", 80)
    sister = fact("f13", "Dev", "SIBLING", "Tara", 10)
    assert relevance(moved, stems("Where does Tara live now?") - {"tara"}) == 1  # "live"
    assert relevance(moved, stems("What does Tara study?") - {"tara"}) == 0
    assert relevance(sister, stems("Who is Dev's sister?") - {"dev"}) == 1  # "sister"
    assert relevance(TEA, stems("What do I drink in the morning?")) == 1
    # sharing the topic is not answering: "likes pottery" for what was made at a class
    pottery = fact("f14", "Mel", "LIKES", "pottery", 10)
    assert relevance(pottery, stems("What did she make at the pottery class?")) == 0
    assert relevance(pottery, stems("Does she like pottery?")) == 2
    # the kind alone, with more asked than the fact says
    child = fact("f15", "John", "CHILD", "Sara", 10)
    assert relevance(child, stems("How often does he take his kids to the park?")) == 0
    assert relevance(child, stems("What is the name of his child?")) == 1
    shoes = fact("f16", "Dev", "USES", "Asics", 10)
    shoes.attributes["category"] = "shoe"
    assert relevance(shoes, stems("Which running shoes do I use now?")) == 2  # one left over


async def test_a_forgotten_fact_is_not_told_as_what_was_replaced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Forgetting the session that said "Arjun likes coffee" must not leave it in the
    `replaced` of the fact that ended it, before the graph job rewrites the session."""
    likes = replace(LIKES, sources=[("s1", "s1-0")])
    drinks = replace(DRINKS, sources=[("s2", "s2-0")])
    avoids = replace(AVOIDS, sources=[("s3", "s3-0")])
    drinks.ended_by = {"uuid": "f3"}
    gone = {("s1", "s1-0")}

    async def sources_double(engine: object, facts: list[Fact]) -> list[dict]:
        """Test double of graph_view.with_sources: the forgotten segment has no text."""
        return [
            {"uuid": f.uuid, "sources": [
                {"session_id": s, "segment_id": g, "text": None if (s, g) in gone else "said"}
                for s, g in f.sources
            ]}
            for f in facts
        ]  # fmt: skip

    monkeypatch.setattr(query_facts, "with_sources", sources_double)
    current, ended = await query_facts.facts_with_history(
        None, [avoids, likes, drinks], T + timedelta(days=120)
    )
    assert [item["uuid"] for item in current] == ["f3"]
    assert [r["uuid"] for r in current[0]["replaced"]] == ["f2"]  # not the forgotten f1
    assert [f.uuid for f, _ in ended] == ["f1", "f2"]
