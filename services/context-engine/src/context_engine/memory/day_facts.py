"""What a day changed in what her-os knows: the facts first said that day, and the older facts
they ended (the daily reflection's "what happened", daily.py).

A fact is *of the day* when it was first said in the day's speech: its segment was spoken in
[start, end) (a fact without a segment, from graphiti's LLM path: its session began then).
Its valid_at is not used for this: "Meera moved to Mumbai last week", said today, is
today's news although it has been true for a week.

- **new**: a fact of the day that was not already known and true when it was said (a
  restatement of a current fact is not news — "lives in Bhopal" after "moved to Bhopal"
  either, same timeline and state, same object; a fact that had ended and is said again
  is), that ended no older fact and that no other fact of the day ended;
- **changed**: a fact of the day that ended an older one (supersession, ADR 0017: the older
  fact's invalid_at / invalidated_by), with what it replaced: "Meera moved from Pune to
  Mumbai", "Rajesh switched from coffee to tea". An older fact said earlier the same day
  counts too.

Where the facts come from: the knowledge graph when there is one (its facts and endings are
the truth, whichever path wrote them: `facts_as_of(end, subject, history=True)` for each
subject the day's speech named); without one — or when it does not answer — PostgreSQL's
current extracted relations, with the endings the graph would have (the same rules,
graph/supersede.py). Both become `SaidFact`s, and `assemble` decides; it is pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from context_engine.extract import predicates
from context_engine.extract.schema import canonical_name, is_placeholder_speaker
from context_engine.graph import facts as vocab
from context_engine.graph.supersede import TimelineFact, resolve_timeline
from context_engine.graph.writer import parse_valid_from
from context_engine.ingest.session_kinds import NOT_REFLECTION_SQL
from context_engine.knowledge import statement_facts
from context_engine.knowledge.statement_facts import StatementFact
from her_os_shared.logging import get_logger

if TYPE_CHECKING:
    from context_engine.graph.knowledge import KnowledgeGraph

log = get_logger(__name__)

MAX_SUBJECTS = 40  # subjects whose facts are read from the graph, per day
FACTS_PER_SUBJECT = 500  # the most recent facts of each (valid_at order)
MAX_NEW = 20
MAX_CHANGED = 20
# Entity types that are never the subject of a fact.
NOT_SUBJECTS = frozenset({"promise", "emotion", "question", "decision", "habit"})


@dataclass(frozen=True, slots=True)
class SaidFact:
    """One saying of a fact (a graph edge, or an extracted relation)."""

    uuid: str
    subject: str
    predicate: str  # ours, normalised ("lives_in"); an LLM's own name in snake_case
    object: str
    category: str | None
    valid_at: datetime | None
    invalid_at: datetime | None
    ended_by: str | None  # uuid of the fact that ended it (None: not ended, or not by a fact)
    said_at: datetime | None  # when it was said: its segment, else its session's start
    session_id: str
    segment_id: str | None = None
    # identity of its ends: canonical names, but a diarization label is one per session
    subject_key: str = ""
    object_key: str = ""

    @property
    def key(self) -> tuple[str, str, str, str]:
        """What the fact says: its ends and its meaning — for a predicate of a timeline its
        group and state ("moved to Bhopal" and "lives in Bhopal" say the same), otherwise
        the predicate itself."""
        p = predicates.spec(self.predicate)
        meaning = f"{p.group}:{p.state}" if p is not None and p.group else self.predicate
        return (
            self.subject_key or canonical_name(self.subject),
            meaning,
            self.object_key or canonical_name(self.object),
            canonical_name(self.category or ""),
        )


@dataclass(slots=True)
class DayFacts:
    new: list[dict[str, Any]] = field(default_factory=list)
    changed: list[dict[str, Any]] = field(default_factory=list)
    source: str = "none"  # "graph", "postgres" or "none" (nothing to read)
    # what people said that day about themselves and others (statements merged by meaning,
    # statement_facts.py): first said that day, and those that day ended or kept
    said_new: list[dict[str, Any]] = field(default_factory=list)
    said_ended: list[dict[str, Any]] = field(default_factory=list)

    def fingerprint_keys(self) -> list[str]:
        keys = [f"n:{f['statement']}@{f['said_at']}" for f in self.new]
        keys += [
            f"c:{f['statement']}@{f['said_at']}<{f['previous']['statement']}" for f in self.changed
        ]
        keys += [f"s:{x['text']}@{x['said_at']}" for x in self.said_new]
        keys += [f"e:{x['text']}<{x['ended_by']}" for x in self.said_ended]
        return keys


def name_key(name: str, session_id: str) -> str:
    """A fact end's identity: its canonical name; a diarization label ("SPEAKER_00") is
    someone else in every session (as the graph writer scopes it)."""
    key = canonical_name(name)
    return f"{key}\x1f{session_id}" if is_placeholder_speaker(name) else key


def _iso(at: datetime | None) -> str | None:
    return at.isoformat() if at is not None else None


def _brief(fact: SaidFact, current: bool = True) -> dict[str, Any]:
    return {
        "statement": predicates.statement(
            fact.subject, fact.predicate, fact.object, category=fact.category, current=current
        ),
        "subject": fact.subject,
        "predicate": fact.predicate,
        "object": fact.object,
        "category": fact.category,
        "valid_at": _iso(fact.valid_at),
        "said_at": _iso(fact.said_at),
        "session_id": fact.session_id,
        "segment_id": fact.segment_id,
    }


def _order(fact: SaidFact) -> tuple[datetime, str]:
    assert fact.said_at is not None
    return fact.said_at, fact.uuid


def assemble(facts: Iterable[SaidFact], start: datetime, end: datetime) -> DayFacts:
    """The day's new and changed facts (module docstring), in the order they were said.
    `facts` must hold, for each subject of the day, its facts said before the day's end."""
    said = [f for f in facts if f.said_at is not None and f.said_at < end]
    of_day = sorted((f for f in said if f.said_at >= start), key=_order)  # type: ignore[operator]
    day_uuids = {f.uuid for f in of_day}
    by_uuid = {f.uuid: f for f in of_day}
    out = DayFacts()

    # Changes: older facts (of any day) ended by a fact of this day.
    enders: set[str] = set()
    ended_today: set[str] = set()
    seen_changes: set[tuple[Any, ...]] = set()
    for old in sorted(said, key=_order):
        new = by_uuid.get(old.ended_by or "")
        if new is None or old.uuid == new.uuid:
            continue
        enders.add(new.uuid)
        if old.uuid in day_uuids:
            ended_today.add(old.uuid)
        seen = (new.key, old.key[1:3])
        if seen in seen_changes:
            continue  # the same old fact said in several sessions, ended by the same news
        seen_changes.add(seen)
        entry = _brief(new)
        entry["statement"] = predicates.change(
            new.subject, old.predicate, old.object, new.predicate, new.object,
            category=new.category,
        )  # fmt: skip
        entry["previous"] = _brief(old, current=False)
        out.changed.append(entry)

    # New facts: of the day, not already known and true when said, not part of a change.
    earlier: dict[tuple[str, str, str, str], list[SaidFact]] = {}
    for f in said:
        if f.said_at < start:  # type: ignore[operator]
            earlier.setdefault(f.key, []).append(f)
    seen_new: set[tuple[str, str, str, str]] = set()
    for f in of_day:
        if f.uuid in enders or f.uuid in ended_today or f.key in seen_new:
            continue
        seen_new.add(f.key)
        if any(_still_true(e, f) for e in earlier.get(f.key, ())):
            continue
        out.new.append(_brief(f))
    out.changed.sort(key=lambda c: (c["said_at"] or "", c["statement"]))
    out.new = out.new[:MAX_NEW]
    out.changed = out.changed[:MAX_CHANGED]
    return out


def _still_true(earlier: SaidFact, now: SaidFact) -> bool:
    """Whether an earlier saying of the same fact was still true when it was said again."""
    if earlier.invalid_at is None:
        return True
    when = now.valid_at or now.said_at
    return when is not None and earlier.invalid_at > when


# --- from the knowledge graph --------------------------------------------------------------

_SPOKEN = text(
    """
    SELECT g.session_id, g.segment_id, g.spoken_at
    FROM segments g
    WHERE g.session_id = ANY(CAST(:sessions AS text[]))
      AND g.segment_id = ANY(CAST(:segments AS text[]))
    """
)
_STARTED = text(
    "SELECT session_id, started_at FROM sessions WHERE session_id = ANY(CAST(:sessions AS text[]))"
)


async def _said_at(
    conn: AsyncConnection, facts: Sequence[Any]
) -> tuple[dict[tuple[str, str], datetime], dict[str, datetime]]:
    """When each (session, segment) of the facts' sources was spoken, and when each of their
    sessions began (two queries for all of them)."""
    pairs = {pair for f in facts for pair in f.sources}
    sessions = {s for f in facts for s in f.session_ids} | {s for s, _ in pairs}
    spoken: dict[tuple[str, str], datetime] = {}
    if pairs:
        rows = await conn.execute(
            _SPOKEN,
            {"sessions": sorted({s for s, _ in pairs}), "segments": sorted({g for _, g in pairs})},
        )
        spoken = {(r.session_id, r.segment_id): r.spoken_at for r in rows if r.spoken_at}
    started: dict[str, datetime] = {}
    if sessions:
        rows = await conn.execute(_STARTED, {"sessions": sorted(sessions)})
        started = {r.session_id: r.started_at for r in rows}
    return spoken, started


async def from_graph(
    graph: KnowledgeGraph, conn: AsyncConnection, subjects: Sequence[str], end: datetime
) -> list[SaidFact]:
    """The facts of `subjects` said by `end`, ended or not, with what ended them. Raises the
    graph's errors (GraphError)."""
    found: dict[str, Any] = {}
    for subject in subjects[:MAX_SUBJECTS]:
        for fact in await graph.facts_as_of(
            end, subject, history=True, collapse=False, limit=FACTS_PER_SUBJECT
        ):
            if fact.predicate.upper() not in vocab.SPEAKER_EDGE_NAMES:
                found.setdefault(fact.uuid, fact)
    facts = list(found.values())
    spoken, started = await _said_at(conn, facts)
    out = []
    for f in facts:
        times = [spoken[p] for p in f.sources if p in spoken]
        if not times:  # no segment (graphiti's LLM path): its session's start
            times = [started[s] for s in f.session_ids if s in started]
        said_at = min(times) if times else None
        first = next((p for p in f.sources if spoken.get(p) == said_at), None)
        session = first[0] if first else (f.session_ids[0] if f.session_ids else "")
        ended_by = (f.ended_by or {}).get("uuid") or f.attributes.get("invalidated_by")
        category = f.attributes.get("category")
        out.append(
            SaidFact(
                uuid=f.uuid,
                subject=f.subject,
                predicate=predicates.normalise(f.predicate),
                object=f.object,
                category=category if isinstance(category, str) and category else None,
                valid_at=f.valid_at,
                invalid_at=f.invalid_at,
                ended_by=str(ended_by) if ended_by else None,
                said_at=said_at,
                session_id=session,
                segment_id=first[1] if first else None,
                subject_key=name_key(f.subject, session),
                object_key=name_key(f.object, session),
            )
        )
    return out


# --- from PostgreSQL (no graph) ------------------------------------------------------------

_CANONICAL = "lower(btrim(regexp_replace({col}, '\\s+', ' ', 'g')))"
_RELATIONS = text(
    f"""
    SELECT r.id, r.session_id, r.segment_id, r.subject, r.predicate, r.object, r.properties,
           r.created_at, coalesce(g.spoken_at, s.started_at) AS said_at
    FROM extracted_relations r
    JOIN sessions s ON s.session_id = r.session_id
    LEFT JOIN segments g ON g.session_id = r.session_id AND g.segment_id = r.segment_id
    WHERE r.current AND (g.segment_id IS NULL OR g.replaced_by IS NULL)
      AND coalesce(g.spoken_at, s.started_at) < :end
      AND {_CANONICAL.format(col="r.subject")} = ANY(CAST(:subjects AS text[]))
      AND {NOT_REFLECTION_SQL}
    ORDER BY said_at, r.id
    """  # noqa: S608 (constants only, no input)
)


async def from_postgres(
    conn: AsyncConnection, subjects: Sequence[str], end: datetime
) -> list[SaidFact]:
    """The extracted relations of `subjects` said by `end`, with the endings the graph would
    give them (graph/supersede.py's rules on the same facts)."""
    wanted = sorted({canonical_name(s).lower() for s in subjects if canonical_name(s)})
    if not wanted:
        return []
    rows = await conn.execute(_RELATIONS, {"subjects": wanted, "end": end})
    # One fact per (subject, predicate, object) and session, its first saying (the writer's).
    firsts: dict[tuple[str, str, str, str], Any] = {}
    for r in rows:
        if vocab.is_pronoun(r.subject) or vocab.is_pronoun(r.object):
            continue
        if not canonical_name(r.subject) or not canonical_name(r.object):
            continue
        predicate = predicates.normalise(r.predicate)
        key = (
            name_key(r.subject, r.session_id),
            predicate,
            name_key(r.object, r.session_id),
            r.session_id,
        )
        firsts.setdefault(key, (r, predicate))
    timeline: list[TimelineFact] = []
    facts: dict[str, tuple[Any, str, datetime]] = {}
    for (subject_key, _, object_key, _), (r, predicate) in firsts.items():
        props = r.properties or {}
        category = props.get("category") if isinstance(props.get("category"), str) else None
        start = parse_valid_from(props.get("valid_from"))
        valid_at = start if start is not None and start <= r.said_at else r.said_at
        uuid = f"rel-{r.id}"
        facts[uuid] = (r, predicate, valid_at)
        timeline.append(
            TimelineFact(
                uuid=uuid,
                source_uuid=subject_key,
                target_uuid=object_key,
                name=vocab.edge_name(predicate),
                valid_at=valid_at,
                created_at=r.created_at,
                invalid_at=None,
                invalidated_by=None,
                session_id=r.session_id,
                category=category,
                # no names: the keys are the ends (a diarization label's is per session)
            )
        )
    verdicts = resolve_timeline(timeline)
    out = []
    for t in timeline:
        r, predicate, valid_at = facts[t.uuid]
        verdict = verdicts.get(t.uuid)
        out.append(
            SaidFact(
                uuid=t.uuid,
                subject=" ".join(r.subject.split()),
                predicate=predicate,
                object=" ".join(r.object.split()),
                category=t.category,
                valid_at=valid_at,
                invalid_at=verdict.invalid_at if verdict else None,
                ended_by=verdict.invalidated_by if verdict else None,
                said_at=r.said_at,
                session_id=r.session_id,
                segment_id=r.segment_id,
                subject_key=t.source_uuid,
                object_key=t.target_uuid,
            )
        )
    return out


# --- the day -------------------------------------------------------------------------------

_DAY_SUBJECTS = text(
    f"""
    SELECT r.subject, count(*) AS n
    FROM extracted_relations r
    JOIN sessions s ON s.session_id = r.session_id
    LEFT JOIN segments g ON g.session_id = r.session_id AND g.segment_id = r.segment_id
    WHERE r.current AND (g.segment_id IS NULL OR g.replaced_by IS NULL)
      AND coalesce(g.spoken_at, s.started_at) >= :start
      AND coalesce(g.spoken_at, s.started_at) < :end
      AND {NOT_REFLECTION_SQL}
    GROUP BY r.subject
    ORDER BY n DESC, r.subject
    """  # noqa: S608 (the filter is a constant, no input)
)


def _unique(names: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for name in names:
        key = canonical_name(name)
        if key and key not in seen and not vocab.is_pronoun(name):
            seen.add(key)
            out.append(" ".join(name.split()))
    return out


MAX_SAID = 12  # statements listed per day, new and ended each


def _said_brief(f: StatementFact) -> dict[str, Any]:
    first = f.sources[0]
    return {"text": f.first.text, "subject": f.subject, "kind": f.kind,
            "valid_at": _iso(f.first.valid_at), "said_at": _iso(first.said_at),
            "session_id": first.session_id, "segment_id": first.segment_id}  # fmt: skip


async def day_statements(
    conn: AsyncConnection, start: datetime, end: datetime
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The statements first said in [start, end) and still holding at its end (views and
    plans aside: news is what is so), and those the day ended or kept, each with what did."""
    facts = await statement_facts.load(conn, end)
    new = [
        _said_brief(f)
        for f in facts
        if start <= f.sources[0].said_at < end and f.current(end) and f.kind != "opinion"
    ]
    ended = []
    for f in facts:
        end_by = f.ended_by or f.kept_by
        if end_by is not None and start <= end_by.said_at < end:
            ended.append({**_said_brief(f), "ended_by": end_by.text, "kept": f.kept_by is not None,
                          "ended_at": _iso(end_by.valid_at)})  # fmt: skip
    return new[-MAX_SAID:], ended[-MAX_SAID:]


async def day_facts(
    conn: AsyncConnection,
    *,
    start: datetime,
    end: datetime,
    speakers: Sequence[str],
    mentioned: Sequence[tuple[str, str]],
    graph: KnowledgeGraph | None = None,
) -> DayFacts:
    """The day's new and changed facts. Subjects: those of the day's extracted relations,
    then the speakers, then the entities mentioned (`mentioned`: (type, name), most
    mentioned first). The day's statements: `day_statements`."""
    from_day = [r.subject for r in await conn.execute(_DAY_SUBJECTS, {"start": start, "end": end})]
    if graph is not None and graph.opened:
        subjects = _unique([
            *from_day, *speakers, *(name for t, name in mentioned if t not in NOT_SUBJECTS)
        ])  # fmt: skip
        try:
            facts = await from_graph(graph, conn, subjects, end)
        except Exception as exc:  # a graph that does not answer: PostgreSQL's facts instead
            log.warning("daily.graph_facts_failed", error=repr(exc)[:300])
        else:
            assembled = assemble(facts, start, end)
            assembled.source = "graph"
            return assembled
    subjects = _unique(from_day)
    if not subjects:
        return DayFacts()
    assembled = assemble(await from_postgres(conn, subjects, end), start, end)
    assembled.source = "postgres"
    return assembled
