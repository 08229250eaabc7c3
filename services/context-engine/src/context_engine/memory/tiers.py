"""Memory tiers: what an entity is worth keeping as, decided from its history (ADR 0011).

- L0 — episodes: everything starts here (and stays while it is young or seldom seen).
- L1 — validated facts: at least `l1_min_age_days` old, seen in `l1_min_episodes` sessions,
  not contradicted.
- L2 — deep patterns of who the user is: at least `l2_min_age_days` old, one of `l2_types`,
  seen in `l2_min_episodes` sessions, not contradicted, member of a community.

A contradiction (a fact of the entity invalidated by a newer one, entity_store.py) demotes L2
to L1 and blocks every promotion while it is younger than `contradiction_hold_days`. Nothing
else demotes: L1 never falls back to L0, and L2 stays L2 when a community detection run
reshuffles its members (Louvain is not stable). The seed's `classify_tier()` never returned L2,
so each nightly run sent every L2 entity back to L1; here an L2 entity is re-classified as L2.

Salience, 2^(-days since last seen / half-life), fades what is not talked about; evergreen
types (people, places) never fall below the floor; under `low_salience_threshold` an entity is
marked low_salience (faded, never deleted). `decay` is the one definition of temporal decay:
the nightly job's salience and retrieval's decay (retrieve.py) both use it.

Everything here is pure: the clock is an argument, so tests and replays control it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from context_engine.config import Settings

Tier = Literal["L0", "L1", "L2"]
TIERS: tuple[Tier, ...] = ("L0", "L1", "L2")
DAY_S = 86400.0


def decay(age_days: float, half_life_days: float | None, floor: float = 0.0) -> float:
    """Weight of something `age_days` old: halves every half-life, never below `floor`; a
    negative age (clock skew, a replay before it happened) never boosts; None = no decay."""
    if half_life_days is None:
        return 1.0
    return max(floor, 0.5 ** (max(age_days, 0.0) / half_life_days))


def days_between(earlier: datetime, later: datetime) -> float:
    return (later - earlier).total_seconds() / DAY_S


@dataclass(frozen=True, slots=True)
class TierPolicy:
    l1_min_age_days: float = 7.0
    l1_min_episodes: int = 3
    l2_min_age_days: float = 90.0
    l2_min_episodes: int = 3
    l2_types: frozenset[str] = frozenset({"person", "place", "habit", "emotion"})
    contradiction_hold_days: float = 30.0
    salience_half_life_days: float = 30.0
    salience_floor: float = 0.3
    evergreen_types: frozenset[str] = frozenset({"person", "place"})
    low_salience_threshold: float = 0.1

    @classmethod
    def from_settings(cls, s: Settings) -> TierPolicy:
        return cls(
            l1_min_age_days=s.tier_l1_min_age_days,
            l1_min_episodes=s.tier_l1_min_episodes,
            l2_min_age_days=s.tier_l2_min_age_days,
            l2_min_episodes=s.tier_l2_min_episodes,
            l2_types=frozenset(s.tier_l2_types),
            contradiction_hold_days=s.contradiction_hold_days,
            salience_half_life_days=s.salience_half_life_days,
            salience_floor=s.salience_floor,
            evergreen_types=frozenset(s.salience_evergreen_types),
            low_salience_threshold=s.low_salience_threshold,
        )


@dataclass(frozen=True, slots=True)
class EntityHistory:
    """What the tier logic reads of an entity."""

    type: str
    first_seen: datetime
    last_seen: datetime
    episode_count: int
    contradicted_at: datetime | None = None
    in_community: bool = False
    tier: Tier = "L0"


@dataclass(frozen=True, slots=True)
class TierState:
    tier: Tier
    reason: str  # why it is (or became) this tier
    salience: float
    low_salience: bool
    contradicted: bool

    def changed(self, before: Tier) -> bool:
        return self.tier != before


def salience(e: EntityHistory, now: datetime, p: TierPolicy) -> float:
    floor = p.salience_floor if e.type in p.evergreen_types else 0.0
    return decay(days_between(e.last_seen, now), p.salience_half_life_days, floor)


def is_contradicted(e: EntityHistory, now: datetime, p: TierPolicy) -> bool:
    """A contradiction counts while it is recent (and not in the future of `now`)."""
    if e.contradicted_at is None:
        return False
    return 0.0 <= days_between(e.contradicted_at, now) < p.contradiction_hold_days


def _l1_gaps(e: EntityHistory, now: datetime, p: TierPolicy) -> list[str]:
    age = days_between(e.first_seen, now)
    gaps = []
    if age < p.l1_min_age_days:
        gaps.append(f"age {age:.0f} d < {p.l1_min_age_days:g}")
    if e.episode_count < p.l1_min_episodes:
        gaps.append(f"{e.episode_count} episodes < {p.l1_min_episodes}")
    return gaps


def _l2_gaps(e: EntityHistory, now: datetime, p: TierPolicy) -> list[str]:
    age = days_between(e.first_seen, now)
    gaps = []
    if e.type not in p.l2_types:
        gaps.append(f"type {e.type} is not a pattern type")
    if age < p.l2_min_age_days:
        gaps.append(f"age {age:.0f} d < {p.l2_min_age_days:g}")
    if e.episode_count < p.l2_min_episodes:
        gaps.append(f"{e.episode_count} episodes < {p.l2_min_episodes}")
    if not e.in_community:
        gaps.append("in no community")
    return gaps


def classify_tier(e: EntityHistory, now: datetime, p: TierPolicy) -> TierState:
    """The tier of `e` at `now`, and why (module docstring for the rules)."""
    contradicted = is_contradicted(e, now, p)
    sal = salience(e, now, p)
    low = sal < p.low_salience_threshold

    def state(tier: Tier, reason: str) -> TierState:
        return TierState(tier, reason, sal, low, contradicted)

    age = days_between(e.first_seen, now)
    facts = f"age {age:.0f} d, {e.episode_count} episodes"
    if contradicted:
        assert e.contradicted_at is not None
        when = e.contradicted_at.date().isoformat()
        if e.tier == "L2":
            return state("L1", f"demoted: a fact was contradicted on {when}")
        return state(e.tier, f"promotion blocked: a fact was contradicted on {when}")
    if e.tier == "L2":
        return state("L2", f"stays L2: {facts}, not contradicted")
    if not _l2_gaps(e, now, p):
        return state("L2", f"promoted: {facts}, a {e.type} in a community, not contradicted")
    if e.tier == "L1":
        return state("L1", "stays L1: " + "; ".join(_l2_gaps(e, now, p)))
    gaps = _l1_gaps(e, now, p)
    if not gaps:
        return state("L1", f"promoted: {facts}, not contradicted")
    return state("L0", "stays L0: " + "; ".join(gaps))
