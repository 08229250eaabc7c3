"""Supersession of single-valued relations: a newer "avoids coffee" ends "likes coffee".

The table below lists the relations where a statement excludes another. Each group maps a
predicate to a *state*; two facts contradict when they are in the same group, between the
SAME two nodes, and in different states (likes → loves is the same state, no contradiction;
likes → avoids is not). Symmetric groups (marriage, partnership) match the pair in either
direction; the others only in the same direction ("Asha likes Bob" and "Bob avoids Asha" are
different facts). Nothing outside the pair is ever looked at: that is the fix for graphiti's
graph-wide invalidation.

Rule (applied to the whole timeline of one pair and group, so the result does not depend on
the order sessions arrive in):
  order the pair's facts by (valid_at, created_at, uuid); a fact is valid until the first
  later fact in a different state: its invalid_at is that fact's valid_at, `invalidated_by`
  its uuid, expired_at the time this was learnt. A restatement (same state) does not end it.
So a newer fact at t invalidates every earlier-or-equal fact of another state (invalid_at = t),
and an older fact arriving after a newer contradicting one is written already invalidated.
Nothing is deleted.

Only invalidations made here are ever undone (they carry the `invalidated_by` attribute):
when the fact that ended another is removed (its session re-written without it), the ended
fact becomes valid again. An invalid_at set by someone else (graphiti's LLM pipeline, or a
fact extracted with its own end date) is left as it is; such a fact still ends older facts
of another state.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType

from context_engine.graph.facts import predicate_of


@dataclass(frozen=True, slots=True)
class ExclusiveGroup:
    name: str
    states: Mapping[str, str]  # predicate → state
    symmetric: bool

    @property
    def edge_names(self) -> list[str]:
        return sorted(p.upper() for p in self.states)


def _group(name: str, symmetric: bool, states: dict[str, tuple[str, ...]]) -> ExclusiveGroup:
    by_predicate = {p: state for state, predicates in states.items() for p in predicates}
    return ExclusiveGroup(name, MappingProxyType(by_predicate), symmetric)


# The table: group → state → predicates in that state.
GROUPS: tuple[ExclusiveGroup, ...] = (
    _group(
        "preference",
        symmetric=False,
        states={
            "for": ("likes", "loves", "enjoys", "prefers"),
            "against": ("avoids", "dislikes", "hates"),
        },
    ),
    _group("marriage", symmetric=True, states={"current": ("spouse",), "former": ("ex_spouse",)}),
    _group(
        "partnership", symmetric=True, states={"current": ("partner",), "former": ("ex_partner",)}
    ),
)

_BY_PREDICATE: dict[str, ExclusiveGroup] = {p: g for g in GROUPS for p in g.states}


def group_of(name_or_predicate: str) -> ExclusiveGroup | None:
    """The exclusive group of an edge name ("LIKES") or predicate ("likes"), if any."""
    return _BY_PREDICATE.get(predicate_of(name_or_predicate))


PairKey = tuple[str, str, str]  # (group, first node, second node)


def pair_key(group: ExclusiveGroup, source: str, target: str) -> PairKey:
    """Which timeline a fact belongs to (direction-free for symmetric groups)."""
    if group.symmetric and target < source:
        source, target = target, source
    return group.name, source, target


@dataclass(slots=True)
class TimelineFact:
    uuid: str
    source_uuid: str
    target_uuid: str
    name: str  # graphiti edge name
    valid_at: datetime | None
    created_at: datetime
    invalid_at: datetime | None
    invalidated_by: str | None  # set only by this module
    session_id: str = ""

    @property
    def managed(self) -> bool:
        """Whether this module may set or clear its invalid_at (it is valid, or this module
        ended it)."""
        return self.valid_at is not None and (
            self.invalid_at is None or self.invalidated_by is not None
        )


@dataclass(frozen=True, slots=True)
class Verdict:
    invalid_at: datetime | None
    invalidated_by: str | None
    invalidated_by_session: str = ""


def resolve_timeline(facts: Iterable[TimelineFact], group: ExclusiveGroup) -> dict[str, Verdict]:
    """The invalid_at each managed fact of one pair's timeline should have."""
    dated = sorted(
        (f for f in facts if f.valid_at is not None and predicate_of(f.name) in group.states),
        key=lambda f: (f.valid_at, f.created_at, f.uuid),
    )
    verdicts: dict[str, Verdict] = {}
    for i, fact in enumerate(dated):
        if not fact.managed:
            continue
        state = group.states[predicate_of(fact.name)]
        ender = next(
            (f for f in dated[i + 1 :] if group.states[predicate_of(f.name)] != state), None
        )
        verdicts[fact.uuid] = (
            Verdict(ender.valid_at, ender.uuid, ender.session_id) if ender else Verdict(None, None)
        )
    return verdicts


def changed(fact: TimelineFact, verdict: Verdict) -> bool:
    return (fact.invalid_at, fact.invalidated_by) != (verdict.invalid_at, verdict.invalidated_by)


def facts_in(
    facts: Sequence[TimelineFact], key: PairKey, group: ExclusiveGroup
) -> list[TimelineFact]:
    """The facts of one timeline among facts loaded for a pair of nodes."""
    return [
        f
        for f in facts
        if predicate_of(f.name) in group.states
        and pair_key(group, f.source_uuid, f.target_uuid) == key
    ]
