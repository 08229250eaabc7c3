"""Extraction output in PostgreSQL: entities, their mentions, relations, runs, contradictions.

One extraction run of a session is stored in one transaction:
- the session's mentions and relations of the *same* extractor version are replaced (a re-run
  on new input); those of any other extractor or version stop being `current` but stay as
  history, so the latest run is what counts and nothing an older version found is lost;
- entities are upserted by (type, canonical_name) and their aggregates — first_seen,
  last_seen (spoken time of the mentions), episode_count (sessions with a current mention),
  confidence (highest) — recomputed from current mentions, so re-runs never double count.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import and_, bindparam, case, func, or_, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from context_engine.extract.base import Extraction
from context_engine.extract.clauses import Statement
from context_engine.extract.schema import (
    ExtractedEntity,
    ExtractedRelation,
    SegmentText,
    canonical_name,
)
from context_engine.graph.base import InvalidatedFact
from context_engine.store.models import (
    Entity,
    EntityContradiction,
    EntityMention,
    ExtractedRelationRow,
    ExtractionRun,
    Segment,
    Session,
    StatementRow,
)


@dataclass(frozen=True, slots=True)
class SessionText:
    """A session's active segments, in spoken order, as extractors read them."""

    session_id: str
    started_at: datetime
    segments: list[SegmentText]
    spoken_at: dict[str, datetime]


@dataclass(frozen=True, slots=True)
class StoredRun:
    run_id: int
    entities: int
    mentions: int
    relations: int


async def load_session_text(conn: AsyncConnection, session_id: str) -> SessionText | None:
    sessions, segments = Session.__table__, Segment.__table__
    started = (
        await conn.execute(select(sessions.c.started_at).where(sessions.c.session_id == session_id))
    ).scalar()
    if started is None:
        return None
    rows = await conn.execute(
        select(segments.c.segment_id, segments.c.speaker, segments.c.text, segments.c.spoken_at)
        .where(segments.c.session_id == session_id, segments.c.replaced_by.is_(None))
        .order_by(segments.c.start_s, segments.c.segment_id)
    )
    texts: list[SegmentText] = []
    spoken: dict[str, datetime] = {}
    for r in rows:
        texts.append(SegmentText(r.segment_id, r.speaker, r.text, r.spoken_at))
        spoken[r.segment_id] = r.spoken_at
    return SessionText(session_id, started, texts, spoken)


async def _upsert_entities(
    conn: AsyncConnection,
    entities: Sequence[ExtractedEntity],
    when: dict[tuple[str, str], datetime],
) -> dict[tuple[str, str], int]:
    t = Entity.__table__
    ids: dict[tuple[str, str], int] = {}
    for e in entities:
        seen = when[e.key]
        stmt = pg_insert(t).values(
            type=e.type,
            name=e.name,
            canonical_name=canonical_name(e.name),
            confidence=e.confidence,
            properties=e.properties,
            sensitivity=e.sensitivity,
            first_seen=seen,
            last_seen=seen,
            episode_count=1,
        )
        new, old = stmt.excluded.sensitivity, t.c.sensitivity
        # a name matched again (known_mentions.py) says nothing new about the entity: its
        # properties stay those the extractors gave it
        known = e.properties.get("source") == "known"
        stmt = stmt.on_conflict_do_update(
            constraint="uq_entities_type_canonical_name",
            set_={
                "properties": (
                    t.c.properties if known else t.c.properties.op("||")(stmt.excluded.properties)
                ),
                # the most restrictive sensitivity any mention was given wins
                "sensitivity": case(
                    (or_(new == "sensitive", old == "sensitive"), "sensitive"),
                    (or_(new == "private", old == "private"), "private"),
                    else_="open",
                ),
            },
        ).returning(t.c.id)
        ids[e.key] = int((await conn.execute(stmt)).scalar_one())
    return ids


_RECOMPUTE = text(
    """
    WITH m AS (
        SELECT em.entity_id, em.session_id, em.confidence,
               COALESCE(sg.spoken_at, ss.started_at) AS at
        FROM entity_mentions em
        JOIN sessions ss ON ss.session_id = em.session_id
        LEFT JOIN segments sg
               ON sg.session_id = em.session_id AND sg.segment_id = em.segment_id
        WHERE em.current AND em.entity_id = ANY(:ids)
    ), a AS (
        SELECT entity_id, min(at) AS first_seen, max(at) AS last_seen,
               count(DISTINCT session_id) AS n, max(confidence) AS confidence
        FROM m GROUP BY entity_id
    )
    UPDATE entities e
    SET first_seen = COALESCE(a.first_seen, e.first_seen),
        last_seen = COALESCE(a.last_seen, e.last_seen),
        episode_count = COALESCE(a.n, 0),
        confidence = COALESCE(a.confidence, e.confidence)
    FROM (SELECT unnest(CAST(:ids AS bigint[])) AS id) ids
    LEFT JOIN a ON a.entity_id = ids.id
    WHERE e.id = ids.id
    """
).bindparams(bindparam("ids"))


async def recompute(conn: AsyncConnection, entity_ids: Iterable[int]) -> None:
    ids = sorted(set(entity_ids))
    if ids:
        await conn.execute(_RECOMPUTE, {"ids": ids})


async def store_extraction(
    conn: AsyncConnection,
    session: SessionText,
    extraction: Extraction,
    *,
    extractor: str,
    version: int,
    fingerprint: str,
    started_at: datetime,
) -> StoredRun:
    """Replace this extractor version's output for the session (see the module docstring)."""
    mentions, relations = EntityMention.__table__, ExtractedRelationRow.__table__
    sid = session.session_id
    same = and_(mentions.c.extractor == extractor, mentions.c.extractor_version == version)
    before = await conn.execute(
        select(mentions.c.entity_id).where(mentions.c.session_id == sid, mentions.c.current)
    )
    touched = {r.entity_id for r in before}
    await conn.execute(mentions.delete().where(mentions.c.session_id == sid, same))
    await conn.execute(
        update(mentions)
        .where(mentions.c.session_id == sid, mentions.c.current, ~same)
        .values(current=False)
    )
    for table in (relations, StatementRow.__table__):
        mine = and_(table.c.extractor == extractor, table.c.extractor_version == version)
        await conn.execute(table.delete().where(table.c.session_id == sid, mine))
        await conn.execute(
            update(table)
            .where(table.c.session_id == sid, table.c.current, ~mine)
            .values(current=False)
        )

    known = set(session.spoken_at)
    when = {
        e.key: session.spoken_at.get(e.segment_id or "", session.started_at)
        for e in extraction.entities
    }
    ids = await _upsert_entities(conn, extraction.entities, when)
    rows: list[dict[str, Any]] = [
        {
            "entity_id": ids[e.key],
            "session_id": sid,
            "segment_id": e.segment_id if e.segment_id in known else None,
            "name": e.name,
            "evidence": e.evidence,
            "confidence": e.confidence,
            "properties": e.properties,
            "sensitivity": e.sensitivity,
            "extractor": extractor,
            "extractor_version": version,
            "current": True,
        }
        for e in extraction.entities
    ]
    if rows:
        await conn.execute(mentions.insert(), rows)
    rel_rows = [_relation_row(sid, r, known, extractor, version) for r in extraction.relations]
    if rel_rows:
        await conn.execute(relations.insert(), rel_rows)
    said_rows = [
        _statement_row(sid, st, session, extractor, version) for st in extraction.statements
    ]
    if said_rows:
        await conn.execute(StatementRow.__table__.insert(), said_rows)
    await recompute(conn, touched | set(ids.values()))
    run_id = (
        await conn.execute(
            ExtractionRun.__table__.insert()
            .values(
                session_id=sid,
                extractor=extractor,
                extractor_version=version,
                input_fingerprint=fingerprint,
                segments_count=len(session.segments),
                entities_count=len(ids),
                relations_count=len(rel_rows),
                started_at=started_at,
            )
            .returning(ExtractionRun.__table__.c.id)
        )
    ).scalar_one()
    return StoredRun(int(run_id), len(ids), len(rows), len(rel_rows))


def _statement_row(
    sid: str, st: Statement, session: SessionText, extractor: str, version: int
) -> dict[str, Any]:
    said_at = session.spoken_at.get(st.segment_id, session.started_at)
    return {
        "session_id": sid,
        "segment_id": st.segment_id if st.segment_id in session.spoken_at else None,
        "speaker": st.speaker,
        "subject": st.subject,
        "subject_key": canonical_name(st.subject),
        "predicate": st.predicate,
        "object": st.object,
        "text": st.text,
        "kind": st.kind,
        "confidence": st.confidence,
        "valid_at": _day(st.valid_at) or said_at,
        "said_at": said_at,
        "evidence": st.evidence,
        "extractor": extractor,
        "extractor_version": version,
        "current": True,
    }


def _day(iso: str | None) -> datetime | None:
    """An ISO day ("2026-03-10") as its midnight UTC."""
    if not iso:
        return None
    try:
        return datetime.fromisoformat(iso[:10]).replace(tzinfo=UTC)
    except ValueError:
        return None


def _relation_row(
    sid: str, r: ExtractedRelation, known: set[str], extractor: str, version: int
) -> dict[str, Any]:
    return {
        "session_id": sid,
        "segment_id": r.segment_id if r.segment_id in known else None,
        "subject": r.subject,
        "predicate": r.predicate,
        "object": r.object,
        "confidence": r.confidence,
        "evidence": r.evidence,
        "properties": dict(r.properties),
        "extractor": extractor,
        "extractor_version": version,
        "current": True,
    }


async def load_extraction(conn: AsyncConnection, session_id: str) -> Extraction:
    """The session's current extraction, as the graph stage writes it."""
    m, e, r = EntityMention.__table__, Entity.__table__, ExtractedRelationRow.__table__
    rows = await conn.execute(
        select(
            e.c.type,
            e.c.name,
            m.c.confidence,
            m.c.evidence,
            m.c.properties,
            m.c.sensitivity,
            m.c.segment_id,
        )
        .join(e, e.c.id == m.c.entity_id)
        .where(m.c.session_id == session_id, m.c.current)
        .order_by(m.c.id)
    )
    entities = [
        ExtractedEntity(
            type=x.type,
            name=x.name,
            confidence=x.confidence,
            evidence=x.evidence,
            properties=dict(x.properties or {}),
            sensitivity=x.sensitivity,
            segment_id=x.segment_id,
        )
        for x in rows
    ]
    rel = await conn.execute(
        select(r).where(r.c.session_id == session_id, r.c.current).order_by(r.c.id)
    )
    relations = [
        ExtractedRelation(
            subject=x.subject,
            predicate=x.predicate,
            object=x.object,
            confidence=x.confidence,
            evidence=x.evidence,
            segment_id=x.segment_id,
            properties=dict(x.properties or {}),
        )
        for x in rel
    ]
    return Extraction(entities, relations)


async def mark_contradictions(conn: AsyncConnection, facts: Sequence[InvalidatedFact]) -> int:
    """Record invalidated facts against the entities they were about (subject and object,
    matched by canonical name): entity_contradictions rows, and entities.contradicted_at.
    Idempotent: a fact is recorded once per entity."""
    if not facts:
        return 0
    e, c = Entity.__table__, EntityContradiction.__table__
    written = 0
    for fact in facts:
        names = {canonical_name(fact.subject), canonical_name(fact.object)}
        ids = (await conn.execute(select(e.c.id).where(e.c.canonical_name.in_(names)))).scalars()
        for entity_id in ids:
            stmt = (
                pg_insert(c)
                .values(
                    entity_id=entity_id,
                    fact_uuid=fact.fact_uuid,
                    fact=fact.fact,
                    predicate=fact.predicate,
                    invalid_at=fact.invalid_at,
                    invalidated_by=fact.invalidated_by,
                    session_id=fact.session_id,
                )
                .on_conflict_do_nothing(constraint="uq_entity_contradictions_entity_fact")
            )
            if (await conn.execute(stmt)).rowcount:
                written += 1
            await conn.execute(
                update(e)
                .where(
                    e.c.id == entity_id,
                    or_(e.c.contradicted_at.is_(None), e.c.contradicted_at < fact.invalid_at),
                )
                .values(contradicted_at=fact.invalid_at)
            )
    return written


async def clear_contradictions(conn: AsyncConnection, fact_uuids: Sequence[str]) -> int:
    """Facts valid again (the fact that ended them was removed when its session was
    re-written): their contradiction rows go, and contradicted_at falls back to the latest
    contradiction left (None when none)."""
    if not fact_uuids:
        return 0
    e, c = Entity.__table__, EntityContradiction.__table__
    gone = await conn.execute(
        c.delete().where(c.c.fact_uuid.in_(list(fact_uuids))).returning(c.c.entity_id)
    )
    ids = {r.entity_id for r in gone}
    for entity_id in ids:
        latest = (
            select(func.max(c.c.invalid_at)).where(c.c.entity_id == entity_id).scalar_subquery()
        )
        await conn.execute(update(e).where(e.c.id == entity_id).values(contradicted_at=latest))
    return len(ids)
