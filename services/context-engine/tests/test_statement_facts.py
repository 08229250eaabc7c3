"""Merging statements by meaning (knowledge/statement_facts.py): restate → one fact with more
sources, stop / negate → ended (never deleted), the promised act → kept, plans from their date,
and the same result whatever order the statements arrive in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from context_engine.knowledge.statement_facts import Said, merge

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def said(i: int, predicate: str, obj: str, text: str, *, kind: str = "fact", day: float = 0,
         valid_day: float | None = None, subject: str = "Noor",
         confidence: float = 0.85) -> Said:  # fmt: skip
    at = T0 + timedelta(days=day)
    valid = T0 + timedelta(days=valid_day) if valid_day is not None else at
    return Said(i, subject, predicate, obj, text, kind, confidence, valid, at, f"s{i}", f"s{i}-0")


def test_a_restatement_is_one_fact_with_two_sources_and_more_confidence() -> None:
    facts = merge([
        said(1, "keep", "bees on their roof", "Noor keeps bees on their roof"),
        said(2, "keep", "bees on the roof, you know", "Noor keeps bees on the roof", day=4),
    ])  # fmt: skip
    assert len(facts) == 1
    assert [s.id for s in facts[0].sources] == [1, 2]
    assert facts[0].confidence > 0.85


def test_other_objects_and_other_people_are_other_facts() -> None:
    facts = merge([
        said(1, "keep", "bees", "Noor keeps bees"),
        said(2, "keep", "chickens", "Noor keeps chickens", day=1),
        said(3, "keep", "bees", "Ilya keeps bees", day=1, subject="Ilya"),
    ])  # fmt: skip
    assert len(facts) == 3


def test_giving_up_ends_the_habit_and_keeps_it_in_history() -> None:
    facts = merge([
        said(1, "swim", "at the lido", "Every Sunday Noor swims at the lido", kind="habit"),
        said(2, "give up", "swimming", "Noor has given up swimming", kind="ended", day=20),
    ])  # fmt: skip
    habit = facts[0]
    assert habit.invalid_at == T0 + timedelta(days=20) and habit.ended_by is not None
    assert habit.current(T0 + timedelta(days=10)) and not habit.current(T0 + timedelta(days=30))


def test_a_negation_ends_what_it_negates_and_nothing_else() -> None:
    facts = merge([
        said(1, "drink", "oat milk", "Noor drinks oat milk"),
        said(2, "drink", "green tea", "Noor drinks green tea"),
        said(3, "not drink", "oat milk anymore", "Noor doesn't drink oat milk anymore",
             kind="ended", day=9),
    ])  # fmt: skip
    milk, tea = facts[0], facts[1]
    assert milk.ended_by is not None and milk.ended_by.id == 3
    assert tea.invalid_at is None


def test_what_holds_instead_ends_the_same_act_on_another_thing() -> None:
    facts = merge([
        said(1, "drink", "black coffee", "Noor drinks black coffee", kind="habit"),
        said(2, "play", "chess", "Noor plays chess"),
        said(3, "drink", "rooibos instead", "Noor drinks rooibos instead", day=5),
        said(4, "drink", "rooibos", "Noor drinks rooibos", day=8),
    ])  # fmt: skip
    coffee, chess, rooibos = facts
    assert coffee.ended_by is not None and coffee.ended_by.id == 3
    assert coffee.invalid_at == T0 + timedelta(days=5)
    assert chess.invalid_at is None  # another act
    # "instead" does not end what it restates: the later "drinks rooibos" reinforces it
    assert rooibos.invalid_at is None and [s.id for s in rooibos.sources] == [3, 4]


def test_moving_away_ends_where_they_lived() -> None:
    facts = merge([
        said(1, "live", "in Tromsø near the harbour", "Noor lives in Tromsø near the harbour"),
        said(2, "live", "with two cats", "Noor lives with two cats", subject="Ilya"),
        said(3, "keep", "bees", "Noor keeps bees"),
        said(4, "move", "away from Tromsø", "Noor moved away from Tromsø", day=30),
    ])  # fmt: skip
    home, ilya, bees, moved = facts
    assert home.ended_by is not None and home.ended_by.id == 4
    assert ilya.invalid_at is None and bees.invalid_at is None
    assert moved.current(T0 + timedelta(days=31))
    # away from another place: where they live holds
    other = merge([
        said(1, "live", "in Tromsø", "Noor lives in Tromsø"),
        said(2, "move", "away from Oslo", "Noor moved away from Oslo", day=3),
    ])  # fmt: skip
    assert other[0].invalid_at is None
    # no place named: where they lived ends
    bare = merge([
        said(1, "live", "in Tromsø", "Noor lives in Tromsø"),
        said(2, "move", "away", "Noor moved away", day=3),
    ])  # fmt: skip
    assert bare[0].invalid_at == T0 + timedelta(days=3)


def test_an_ending_said_before_the_fact_began_does_not_end_it() -> None:
    facts = merge([
        said(1, "give up", "running", "Noor gave up running", kind="ended"),
        said(2, "run", "every morning", "Noor runs every morning", kind="habit", day=40),
    ])  # fmt: skip
    assert facts[1].invalid_at is None


def test_a_plan_holds_from_its_date_and_is_kept_by_the_promised_act() -> None:
    facts = merge([
        said(1, "return", "Ilya's drill tomorrow", "Noor will return Ilya's drill tomorrow",
             kind="plan", valid_day=1),
        said(2, "bring back", "Ilya's drill this morning", "Noor brought Ilya's drill back",
             day=1.1),
    ])  # fmt: skip
    plan = facts[0]
    assert not plan.current(T0 + timedelta(hours=1))  # not yet due
    assert plan.kept_by is not None and plan.kept_by.id == 2
    assert not plan.current(T0 + timedelta(days=2))  # kept: no longer a plan


def test_another_act_or_thing_does_not_keep_a_promise() -> None:
    facts = merge([
        said(1, "return", "Ilya's drill", "Noor will return Ilya's drill", kind="plan",
             valid_day=1),
        said(2, "bring back", "some bread", "Noor brought back some bread", day=2),
        said(3, "borrow", "Ilya's drill", "Noor borrowed Ilya's drill", day=2),
    ])  # fmt: skip
    assert facts[0].kept_by is None


ROWS = [
    said(1, "swim", "at the lido", "Noor swims at the lido", kind="habit"),
    said(2, "keep", "bees", "Noor keeps bees", day=1),
    said(3, "keep", "bees on the roof", "Noor keeps bees on the roof", day=3),
    said(4, "give up", "swimming", "Noor gave up swimming", kind="ended", day=5),
    said(5, "return", "the drill", "Noor will return the drill", kind="plan", day=6, valid_day=7),
    said(6, "bring back", "the drill", "Noor brought the drill back", day=8),
]


def summary(rows: list[Said]) -> list[tuple]:
    return sorted(
        (
            f.first.id,
            tuple(s.id for s in f.sources),
            f.invalid_at,
            f.kept_by.id if f.kept_by else None,
        )
        for f in merge(rows)
    )


@given(st.permutations(ROWS))
def test_the_result_does_not_depend_on_the_order_rows_arrive_in(rows: list[Said]) -> None:
    assert summary(list(rows)) == summary(ROWS)
