"""The tier rules of tiers.py, pure (the clock is an argument): 24 tests in 6 classes —
L0, promotion to L1, promotion to L2, contradiction, salience, and stability (the seed's
classify_tier never returned L2, so each night demoted every L2 entity)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from context_engine.config import Settings
from context_engine.memory.tiers import (
    EntityHistory,
    TierPolicy,
    classify_tier,
    decay,
    is_contradicted,
    salience,
)
from context_engine.search.retrieve import FusionParams
from context_engine.search.retrieve import decay as retrieval_decay

DAY0 = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)
P = TierPolicy()


def day(n: float) -> datetime:
    return DAY0 + timedelta(days=n)


def entity(
    type_: str = "place",
    *,
    first: float = 0,
    last: float | None = None,
    episodes: int = 5,
    contradicted: float | None = None,
    community: bool = True,
    tier: str = "L0",
) -> EntityHistory:
    return EntityHistory(
        type=type_,
        first_seen=day(first),
        last_seen=day(first if last is None else last),
        episode_count=episodes,
        contradicted_at=None if contradicted is None else day(contradicted),
        in_community=community,
        tier=tier,  # type: ignore[arg-type]
    )


class TestL0:
    def test_a_new_entity_is_l0(self) -> None:
        state = classify_tier(entity(), day(0), P)
        assert state.tier == "L0" and "age 0 d < 7" in state.reason

    def test_young_but_often_seen_stays_l0(self) -> None:
        state = classify_tier(entity(episodes=40), day(6.9), P)
        assert state.tier == "L0" and "age" in state.reason

    def test_old_but_seldom_seen_stays_l0(self) -> None:
        state = classify_tier(entity(episodes=2), day(200), P)
        assert state.tier == "L0" and "2 episodes < 3" in state.reason

    def test_non_pattern_types_mature_no_further_than_l1(self) -> None:
        for type_ in ("promise", "organization", "event", "decision", "question"):
            assert classify_tier(entity(type_), day(365), P).tier == "L1"


class TestPromotionToL1:
    def test_promoted_at_seven_days_and_three_episodes(self) -> None:
        state = classify_tier(entity("promise", episodes=3), day(7), P)
        assert state.tier == "L1" and state.reason.startswith("promoted")

    def test_the_boundaries_are_inclusive(self) -> None:
        p = TierPolicy(l1_min_age_days=7, l1_min_episodes=3)
        assert classify_tier(entity("event", episodes=3), day(7), p).tier == "L1"
        assert classify_tier(entity("event", episodes=2), day(7), p).tier == "L0"
        assert classify_tier(entity("event", episodes=3), day(6.99), p).tier == "L0"

    def test_l1_is_never_sent_back_to_l0(self) -> None:
        # Fewer current episodes later (a re-extraction) or a long silence: still L1.
        faded = entity("event", episodes=1, last=10, tier="L1")
        assert classify_tier(faded, day(400), P).tier == "L1"

    def test_thresholds_come_from_settings(self) -> None:
        p = TierPolicy.from_settings(Settings(tier_l1_min_age_days=2, tier_l1_min_episodes=1))
        assert classify_tier(entity("event", episodes=1), day(2), p).tier == "L1"


class TestPromotionToL2:
    def test_a_place_in_a_community_reaches_l2_at_ninety_days(self) -> None:
        assert classify_tier(entity(tier="L1"), day(89.9), P).tier == "L1"
        state = classify_tier(entity(tier="L1"), day(90), P)
        assert state.tier == "L2" and "in a community" in state.reason

    def test_outside_a_community_it_stays_l1(self) -> None:
        state = classify_tier(entity(community=False, tier="L1"), day(120), P)
        assert state.tier == "L1" and "in no community" in state.reason

    def test_pattern_types_only(self) -> None:
        for type_ in ("person", "place", "habit", "emotion"):
            assert classify_tier(entity(type_, tier="L1"), day(100), P).tier == "L2"
        state = classify_tier(entity("organization", tier="L1"), day(100), P)
        assert state.tier == "L1" and "not a pattern type" in state.reason

    def test_an_old_memory_seen_for_the_first_time_goes_straight_to_l2(self) -> None:
        # An import of months of recordings: the first night already knows it all.
        assert classify_tier(entity("person", tier="L0"), day(100), P).tier == "L2"


class TestContradiction:
    def test_a_contradiction_demotes_l2_to_l1(self) -> None:
        state = classify_tier(entity(contradicted=95, tier="L2"), day(95), P)
        assert state.tier == "L1" and state.contradicted
        assert state.reason == "demoted: a fact was contradicted on 2026-04-06"

    def test_it_blocks_promotion_while_recent(self) -> None:
        state = classify_tier(entity(contradicted=1, tier="L0"), day(8), P)
        assert state.tier == "L0" and state.reason.startswith("promotion blocked")
        assert classify_tier(entity(contradicted=95, tier="L1"), day(100), P).tier == "L1"

    def test_the_block_ends_after_the_hold(self) -> None:
        e = entity(contradicted=95, tier="L1")
        assert is_contradicted(e, day(124.9), P)
        assert not is_contradicted(e, day(125), P)
        assert classify_tier(e, day(125), P).tier == "L2"  # stable again: it may mature

    def test_a_contradiction_after_as_of_is_ignored(self) -> None:
        # A replay "as of" day 91 must not see the day-95 contradiction.
        state = classify_tier(entity(contradicted=95, tier="L1"), day(91), P)
        assert state.tier == "L2" and not state.contradicted


class TestSalience:
    def test_halves_every_thirty_days_since_last_seen(self) -> None:
        e = entity("event", first=0, last=10)
        assert salience(e, day(10), P) == 1.0
        assert salience(e, day(40), P) == pytest.approx(0.5)
        assert salience(e, day(70), P) == pytest.approx(0.25)

    def test_people_and_places_never_fade_below_the_evergreen_floor(self) -> None:
        for type_ in ("person", "place"):
            assert salience(entity(type_), day(1000), P) == pytest.approx(0.3)
        assert salience(entity("habit"), day(1000), P) < 0.001

    def test_low_salience_below_the_threshold_marks_without_demoting(self) -> None:
        state = classify_tier(entity("event", tier="L1"), day(100), P)  # 2^(-100/30) ≈ 0.099
        assert state.low_salience and state.tier == "L1"
        assert not classify_tier(entity("event"), day(99), P).low_salience  # ≈ 0.101
        assert not classify_tier(entity("person"), day(1000), P).low_salience

    @given(
        st.floats(min_value=-1000, max_value=10_000),
        st.floats(min_value=0.1, max_value=1000),
        st.floats(min_value=0, max_value=1),
    )
    def test_one_decay_definition_for_the_nightly_job_and_retrieval(
        self, age: float, half_life: float, floor: float
    ) -> None:
        params = FusionParams(decay_half_life_days=half_life, decay_floor=floor)
        assert retrieval_decay(age, params) == decay(age, half_life, floor)
        assert floor <= decay(age, half_life, floor) <= 1.0


class TestStability:
    def test_an_l2_entity_stays_l2_night_after_night(self) -> None:
        e = entity("person", tier="L2")
        for n in (91, 92, 200, 1000):
            state = classify_tier(e, day(n), P)
            assert state.tier == "L2" and state.reason.startswith("stays L2")

    def test_l2_survives_a_community_reshuffle(self) -> None:
        assert classify_tier(entity(community=False, tier="L2"), day(150), P).tier == "L2"

    @given(
        st.sampled_from(["person", "place", "habit", "emotion", "event", "promise"]),
        st.floats(min_value=0, max_value=400),
        st.integers(min_value=0, max_value=20),
        st.one_of(st.none(), st.floats(min_value=0, max_value=400)),
        st.booleans(),
        st.sampled_from(["L0", "L1", "L2"]),
        st.floats(min_value=0, max_value=500),
    )
    def test_classifying_again_changes_nothing(
        self, type_, first, episodes, contradicted, community, tier, now
    ) -> None:
        e = entity(type_, first=first, episodes=episodes, contradicted=contradicted,
                   community=community, tier=tier)  # fmt: skip
        once = classify_tier(e, day(first + now), P)
        again = classify_tier(
            EntityHistory(e.type, e.first_seen, e.last_seen, e.episode_count,
                          e.contradicted_at, e.in_community, once.tier),
            day(first + now),
            P,
        )  # fmt: skip
        assert again.tier == once.tier

    @given(
        st.sampled_from(["person", "place", "habit", "event", "promise"]),
        st.floats(min_value=0, max_value=400),
        st.integers(min_value=0, max_value=20),
        st.one_of(st.none(), st.floats(min_value=0, max_value=400)),
        st.booleans(),
        st.sampled_from(["L0", "L1", "L2"]),
    )
    def test_only_a_contradiction_ever_demotes(
        self, type_, now, episodes, contradicted, community, tier
    ) -> None:
        e = entity(type_, episodes=episodes, contradicted=contradicted, community=community,
                   tier=tier)  # fmt: skip
        state = classify_tier(e, day(now), P)
        rank = {"L0": 0, "L1": 1, "L2": 2}
        if rank[state.tier] < rank[tier]:
            assert state.contradicted and tier == "L2" and state.tier == "L1"
