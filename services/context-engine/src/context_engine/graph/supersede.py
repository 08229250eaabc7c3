"""Supersession: how a newer fact ends an older one, by the rules of predicates.py.

predicates.py (its docstring is the contract) puts each predicate in a group and a state; a
later fact g ends an earlier, still valid fact f of the same subject when
1. g is in f's group, in the other state, on the same pair ("avoids coffee" ends "likes
   coffee"; symmetric groups match the pair in either direction);
2. f's group is single-valued, both are "on", and g is about another object of the same slot
   ("lives in Mumbai" ends "lives in Pune"); for category-scoped groups (usage) only when
   both carry the same `category` ("uses Hoka"/shoe ends "uses Nike"/shoe);
3. g's predicate explicitly ends f's group on the same pair and f is "on" ("switched from
   Nike" ends "likes Nike" and "uses Nike").

Rule, applied to all the facts of a subject at once so the result does not depend on the
order sessions arrive in: order the facts by (valid_at, created_at, uuid); a fact is valid
until the first fact that ends it: its invalid_at is that fact's valid_at, `invalidated_by`
its uuid, expired_at the time this was learnt. A restatement (same group and state, same
object) ends nothing. "Later" is per rule: rule 1 uses the order above (a tie in valid_at
goes to the later written fact, as before); rule 2 needs a strictly later valid_at (two
objects named at the same moment, "I use Nike and Hoka", are both true); rule 3 also ends a
fact said at the same moment ("I don't drink coffee any more" may yield drinks and avoids
together; the explicit ending wins). Nothing is deleted.

Two ends of facts are the same node when they have the same uuid or the same canonical name
(within one subject's facts): a name resolved to a place in one session and a topic in
another ("Nike" as a brand, then as an organisation) is still the same object.

Only invalidations made here are ever undone (they carry the `invalidated_by` attribute):
when the fact that ended another is removed (its session re-written without it, or
forgotten), the ended fact becomes valid again. An invalid_at set by someone else (graphiti's
LLM pipeline, or a fact extracted with its own end date) is left as it is; such a fact still
ends older facts.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from functools import cache

from context_engine.extract.predicates import (
    CATEGORY_SCOPED,
    PREDICATES,
    SINGLE_VALUED,
    SYMMETRIC,
    SYNONYMS,
    Predicate,
    spec,
)
from context_engine.extract.schema import canonical_name


@dataclass(slots=True)
class TimelineFact:
    uuid: str
    source_uuid: str
    target_uuid: str
    name: str  # graphiti edge name ("LIVES_IN"); synonyms ("WORKS_FOR") are understood
    valid_at: datetime | None
    created_at: datetime
    invalid_at: datetime | None
    invalidated_by: str | None  # set only by this module
    session_id: str = ""
    category: str | None = None  # the `category` attribute (category-scoped groups)
    source_name: str = ""  # node names: "" when unknown (then uuids identify the nodes)
    target_name: str = ""

    @property
    def managed(self) -> bool:
        """Whether this module may set or clear its invalid_at (it is valid, or this module
        ended it)."""
        return self.valid_at is not None and (
            self.invalid_at is None or self.invalidated_by is not None
        )

    @property
    def subject(self) -> str:
        return canonical_name(self.source_name) or self.source_uuid

    @property
    def object(self) -> str:
        return canonical_name(self.target_name) or self.target_uuid

    @property
    def order(self) -> tuple[datetime, int, datetime, str]:
        """Timeline order. Of two facts said at the same moment the "off" one counts as later:
        "I love coffee but it gives me headaches" ends the liking whatever the uuids."""
        assert self.valid_at is not None
        p = _timeline_spec(self.name)
        return self.valid_at, int(p is not None and p.state == "off"), self.created_at, self.uuid


@dataclass(frozen=True, slots=True)
class Verdict:
    invalid_at: datetime | None
    invalidated_by: str | None
    invalidated_by_session: str = ""


@cache  # edge names are few; resolve_timeline asks for each pair it compares
def _timeline_spec(name: str) -> Predicate | None:
    """The predicate of an edge name if it takes part in supersession (has a group or ends
    groups)."""
    p = spec(name)
    return p if p is not None and (p.group is not None or p.ends) else None


def in_timeline(name: str) -> bool:
    """Whether facts of this edge name can end or be ended."""
    return _timeline_spec(name) is not None


def _same_pair(later: TimelineFact, fact: TimelineFact, symmetric: bool) -> bool:
    if (later.subject, later.object) == (fact.subject, fact.object):
        return True
    return symmetric and (later.subject, later.object) == (fact.object, fact.subject)


def ends(later: TimelineFact, fact: TimelineFact) -> bool:
    """Whether `later` ends `fact` (rules 1-3 of the module docstring, with their notion of
    "later")."""
    f, g = _timeline_spec(fact.name), _timeline_spec(later.name)
    if (
        f is None
        or g is None
        or f.group is None
        or later.uuid == fact.uuid
        or later.valid_at is None
        or fact.valid_at is None
    ):
        return False
    if g.group == f.group:
        if g.state != f.state:  # rule 1
            return later.order > fact.order and _same_pair(later, fact, f.group in SYMMETRIC)
        if (  # rule 2
            f.state != "on"
            or f.group not in SINGLE_VALUED
            or later.subject != fact.subject
            or later.object == fact.object
            or later.valid_at <= fact.valid_at
        ):
            return False
        if f.group in CATEGORY_SCOPED:
            category = canonical_name(fact.category or "")
            return bool(category) and category == canonical_name(later.category or "")
        return True
    return (  # rule 3
        f.state == "on"
        and f.group in g.ends
        and later.valid_at >= fact.valid_at
        and _same_pair(later, fact, f.group in SYMMETRIC)
    )


def resolve_timeline(facts: Iterable[TimelineFact]) -> dict[str, Verdict]:
    """The invalid_at each managed fact among `facts` should have. `facts` must hold, for
    every subject it covers, all of that subject's facts that could end them (writer.py
    loads them with `scope`)."""
    dated = sorted(
        (f for f in facts if f.valid_at is not None and in_timeline(f.name)),
        key=lambda f: f.order,
    )
    # Who can end a fact: facts on its pair (rules 1 and 3), in either direction for
    # symmetric groups, and for single-valued groups the "on" facts of its slot (rule 2).
    # Each bucket is in timeline order, so its first ender after a fact is the earliest.
    by_pair: dict[tuple[str, str], _Bucket] = defaultdict(_Bucket)
    by_slot: dict[tuple[str, str], _Bucket] = defaultdict(_Bucket)
    for f in dated:
        by_pair[f.subject, f.object].add(f)
        p = _timeline_spec(f.name)
        if p is not None and p.group in SINGLE_VALUED and p.state == "on":
            by_slot[f.subject, p.group].add(f)
    verdicts: dict[str, Verdict] = {}
    for fact in dated:
        p = _timeline_spec(fact.name)
        if not fact.managed or p is None or p.group is None:
            continue
        buckets = [by_pair[fact.subject, fact.object]]
        if p.group in SYMMETRIC and fact.subject != fact.object:
            buckets.append(by_pair[fact.object, fact.subject])
        if p.group in SINGLE_VALUED and p.state == "on":
            buckets.append(by_slot[fact.subject, p.group])
        enders = [g for g in (b.first_ender(fact) for b in buckets) if g is not None]
        ender = min(enders, key=lambda g: g.order, default=None)
        verdicts[fact.uuid] = (
            Verdict(ender.valid_at, ender.uuid, ender.session_id) if ender else Verdict(None, None)
        )
    return verdicts


class _Bucket:
    """Facts in timeline order (added in order)."""

    __slots__ = ("facts", "orders")

    def __init__(self) -> None:
        self.facts: list[TimelineFact] = []
        self.orders: list[tuple[datetime, int, datetime, str]] = []

    def add(self, fact: TimelineFact) -> None:
        self.facts.append(fact)
        self.orders.append(fact.order)

    def first_ender(self, fact: TimelineFact) -> TimelineFact | None:
        # no rule lets a fact with an earlier valid_at end it: start at its valid_at
        start = bisect_left(self.orders, (fact.valid_at,))
        return next((g for g in self.facts[start:] if ends(g, fact)), None)


def changed(fact: TimelineFact, verdict: Verdict) -> bool:
    return (fact.invalid_at, fact.invalidated_by) != (verdict.invalid_at, verdict.invalidated_by)


# --- what to load for a subject's timelines ---


@cache
def _components() -> dict[str, frozenset[str]]:
    """Group → the groups whose facts can end one another through it: a group, the groups its
    predicates end, and the groups of predicates that end it, transitively (preference, usage,
    drink and activity form one; residence is alone)."""
    parent: dict[str, str] = {}

    def root(g: str) -> str:
        while parent.setdefault(g, g) != g:
            g = parent[g]
        return g

    for p in PREDICATES.values():
        linked = [g for g in (p.group, *p.ends) if g is not None]
        for g in linked[1:]:
            parent[root(g)] = root(linked[0])
        for g in linked[:1]:
            root(g)
    members: dict[str, set[str]] = defaultdict(set)
    for g in parent:
        members[root(g)].add(g)
    return {g: frozenset(members[root(g)]) for g in parent}


def _groups_of(p: Predicate) -> set[str]:
    return {g for g in (p.group, *p.ends) if g is not None}


@cache
def _edge_names(groups: frozenset[str]) -> tuple[str, ...]:
    """Edge names of the predicates in or ending these groups, with the names an LLM may have
    written for them (SYNONYMS), upper-case as graphiti writes them."""
    wanted = {p.name for p in PREDICATES.values() if _groups_of(p) & groups}
    names = {n.upper() for n in wanted}
    names.update(k.upper() for k, v in SYNONYMS.items() if v in wanted)
    return tuple(sorted(names))


@dataclass(frozen=True, slots=True)
class Scope:
    """The facts to load so that the timelines of some facts' subjects can be recomputed:
    edges named `names` from `subjects`, and edges named `symmetric_names` to them."""

    subjects: tuple[str, ...]
    names: tuple[str, ...]
    symmetric_names: tuple[str, ...]


def scope(facts: Iterable[tuple[str, str, str]]) -> Scope:
    """The scope of these facts, each (source uuid, target uuid, edge name): their subjects
    (both ends for symmetric groups) and every group that can end, or be ended by, theirs."""
    subjects: set[str] = set()
    groups: set[str] = set()
    components = _components()
    for source, target, name in facts:
        p = _timeline_spec(name)
        if p is None:
            continue
        subjects.add(source)
        if p.group in SYMMETRIC:
            subjects.add(target)
        for g in _groups_of(p):
            groups |= components.get(g, {g})
    names = _edge_names(frozenset(groups))
    symmetric = _edge_names(frozenset(groups & SYMMETRIC))
    return Scope(tuple(sorted(subjects)), names, symmetric)
