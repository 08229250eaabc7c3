"""Forgetting (issue 11, ADR 0013): a session, an entity or a person removed from every store.

A request is resolved once into a `Target` (sessions to remove whole, names whose every
mention goes, entity ids, segments the extractor tied to those entities) and stored in
`forget_requests`; then each store is brought in line, in this order, each step idempotent:

1. the transcript JSONL files (the source of truth): rewritten under the appenders' flock
   without the matching segments (and without the target's voice in the `overlap` of the
   segments that stay), or removed when nothing is left — first, so nothing derived can ever
   be re-ingested from them;
2. PostgreSQL, one transaction: segments (and overlap entries naming the target), mentions,
   relations, statements, entities (and those left with no mention at all), contradictions,
   fulfilments, reflections, communities, sessions, offsets, stage rows, queued jobs of
   removed sessions;
3. the keyword index (re-read from PostgreSQL for the sessions touched);
4. the vectors: every point of every touched session in every space (the followers of a
   removed segment were embedded with it as context), re-embedded by their job;
5. the graph: episodes of touched sessions, nodes, facts, summaries and communities naming
   the target; touched sessions are written again from PostgreSQL by their graph job;
6. the events: the chronicler's ring and backlog, the event JSONL files, the events table;
7. the voices: a person forgotten by name is deleted from the audio pipeline's enrollment
   bank (voices.py), so new transcripts stop naming them.

A step that fails is reported with its error and retried by the `forget` job with backoff;
the request is `done` only when every step is, and its target is then reduced to a digest.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from context_engine.extract.schema import canonical_name
from context_engine.index.keyword import Changes
from context_engine.knowledge import entity_store
from her_os_shared.creatures import CreatureName
from her_os_shared.events import EventType
from her_os_shared.ids import InvalidIdError, validate_id
from her_os_shared.jsonl import SUFFIX, rewrite_stream
from her_os_shared.logging import get_logger

if TYPE_CHECKING:
    from context_engine.graph import KnowledgeGraph
    from context_engine.index.keyword import SegmentSearchIndex
    from context_engine.index.segment_vectors import SegmentEmbedding
    from context_engine.ingest.event_files import EventFileReader
    from context_engine.ingest.transcripts import Ingestor
    from context_engine.observe.chronicler import Chronicler
    from context_engine.observe.recorder import EventRecorder
    from context_engine.privacy.voices import VoiceBank

log = get_logger(__name__)

STEPS = ("jsonl", "postgres", "keyword_index", "vectors", "graph", "events", "voices")
MIN_NAME_CHARS = 2
DEADLOCK_RETRIES = 5
_ID_CHARS = "A-Za-z0-9_-"


def _pg_escape(value: str) -> str:
    """A literal inside a PostgreSQL ARE: every non-alphanumeric character escaped."""
    return "".join(c if c.isalnum() else "\\" + c for c in value)


@dataclass
class Target:
    kind: str  # session | entity | person
    sessions: list[str] = field(default_factory=list)  # removed whole
    names: list[str] = field(default_factory=list)  # every word-bounded mention goes
    entity_ids: list[int] = field(default_factory=list)
    segments: list[list[str]] = field(default_factory=list)  # [session_id, segment_id]
    # filled as steps run, so retries know what they touched
    touched: list[str] = field(default_factory=list)  # sessions rewritten, not removed
    # entities that lost mentions (or went): their vectors held forgotten words
    entities_changed: list[int] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)  # sessions whose file is gone

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Target:
        return cls(**{k: raw[k] for k in cls.__dataclass_fields__ if k in raw})

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()

    @property
    def gone_sessions(self) -> list[str]:
        return sorted({*self.sessions, *self.removed})

    @property
    def all_sessions(self) -> list[str]:
        return sorted({*self.sessions, *self.removed, *self.touched})

    # --- matching ---

    def name_re(self) -> re.Pattern[str] | None:
        if not self.names:
            return None
        alts = "|".join(re.escape(n) for n in self.names)
        return re.compile(rf"(?<!\w)(?:{alts})(?!\w)", re.IGNORECASE)

    def id_re(self) -> re.Pattern[str] | None:
        if not self.gone_sessions:
            return None
        alts = "|".join(re.escape(s) for s in self.gone_sessions)
        return re.compile(rf"(?<![{_ID_CHARS}])(?:{alts})(?![{_ID_CHARS}])")

    def sql_params(self) -> dict[str, Any]:
        """The parameters of every statement below: `names_re` (case-insensitive, word
        bounded) and `ids_re` (the removed sessions' ids, id-bounded) or NULL."""
        names_re = ids_re = None
        if self.names:
            alts = "|".join(_pg_escape(n) for n in self.names)
            names_re = f"(^|[^[:alnum:]_])({alts})($|[^[:alnum:]_])"
        if self.gone_sessions:
            alts = "|".join(_pg_escape(s) for s in self.gone_sessions)
            ids_re = f"(^|[^{_ID_CHARS}])({alts})($|[^{_ID_CHARS}])"
        return {
            "names_re": names_re,
            "ids_re": ids_re,
            "sessions": self.gone_sessions,
            "speakers": [canonical_name(n) for n in self.names],
            "entity_ids": self.entity_ids,
            "k_sid": [s for s, _ in self.segments],
            "k_gid": [g for _, g in self.segments],
        }


@dataclass
class _SegmentFilter:
    """Which segments of a transcript payload go (plain Python, for the JSONL files)."""

    target: Target
    removed: int = 0
    overlaps: int = 0  # entries of `overlap` (another voice) taken out of kept segments

    def __post_init__(self) -> None:
        self.names = self.target.name_re()
        self.speakers = {canonical_name(n) for n in self.target.names}
        self.keys = {(s, g) for s, g in self.target.segments}

    def segment_goes(self, session_id: str, seg: dict[str, Any]) -> bool:
        if (session_id, str(seg.get("segment_id"))) in self.keys:
            return True
        if canonical_name(str(seg.get("speaker") or "")) in self.speakers:
            return True
        return self.names is not None and bool(self.names.search(str(seg.get("text") or "")))

    def voice_goes(self, speaker: str) -> bool:
        """An overlapping voice named by the target (its name, or a name that says it)."""
        if canonical_name(speaker) in self.speakers:
            return True
        return self.names is not None and bool(self.names.search(speaker))

    def trim_overlap(self, seg: Any) -> Any:
        """The segment without the overlap entries naming the target (the same dict when none
        does); the field is left out when nothing is left, as the contract writes it."""
        if not isinstance(seg, dict) or not isinstance(seg.get("overlap"), list):
            return seg
        voices = seg["overlap"]
        left = [
            o
            for o in voices
            if not self.voice_goes(str(o.get("speaker") or "") if isinstance(o, dict) else str(o))
        ]
        if len(left) == len(voices):
            return seg
        self.overlaps += len(voices) - len(left)
        return {k: left if k == "overlap" else v for k, v in seg.items() if k != "overlap" or left}

    def transform(self, session_id: str) -> Callable[[bytes], bytes | None]:
        def rewrite(old: bytes) -> bytes | None:
            out: list[bytes] = []
            for line in old.splitlines(keepends=True):
                try:
                    payload = json.loads(line)
                    segments = payload["segments"]
                except (ValueError, KeyError, TypeError):
                    # A malformed line is kept unless it names the target.
                    raw = line.decode("utf-8", "replace")
                    if self.names is None or not self.names.search(raw):
                        out.append(line)
                    continue
                kept = [
                    self.trim_overlap(s) for s in segments if not self.segment_goes(session_id, s)
                ]
                self.removed += len(segments) - len(kept)
                if len(kept) == len(segments) and all(
                    k is s for k, s in zip(kept, segments, strict=True)
                ):
                    out.append(line)
                elif kept:
                    payload["segments"] = kept
                    body = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
                    out.append(body.encode("utf-8") + b"\n")
            return b"".join(out)

        return rewrite


def _text_match(col: str) -> str:
    return (
        f"((CAST(:names_re AS text) IS NOT NULL AND {col} ~* CAST(:names_re AS text)) OR "
        f"(CAST(:ids_re AS text) IS NOT NULL AND {col} ~ CAST(:ids_re AS text)))"
    )


_KEYS = "(SELECT * FROM unnest(CAST(:k_sid AS text[]), CAST(:k_gid AS text[])))"
_DOOMED = text(
    f"""
    SELECT session_id, segment_id FROM segments
    WHERE session_id = ANY(CAST(:sessions AS text[]))
       OR (session_id, segment_id) IN {_KEYS}
       OR lower(speaker) = ANY(CAST(:speakers AS text[]))
       OR (CAST(:names_re AS text) IS NOT NULL AND text ~* CAST(:names_re AS text))
    """  # noqa: S608 (constant SQL, values bound)
)


def _sql(body: str) -> Any:
    return text(body)


def _voice_match(col: str) -> str:
    """An overlap entry's speaker named by the target: its canonical name, or a word-bounded
    mention of a name (as `voice_goes` decides for the JSONL files)."""
    return (
        f"(lower({col}) = ANY(CAST(:speakers AS text[])) OR "
        f"(CAST(:names_re AS text) IS NOT NULL AND {col} ~* CAST(:names_re AS text)))"
    )


# Segments that stay keep their overlap without the voices of the target (NULL when none is
# left); returns how many entries each lost.
_TRIM_OVERLAP = _sql(
    f"""
    WITH trimmed AS (
        SELECT g.session_id, g.segment_id,
               (SELECT jsonb_agg(o.value ORDER BY o.ordinality)
                FROM jsonb_array_elements(g.overlap) WITH ORDINALITY o
                WHERE NOT {_voice_match("coalesce(o.value->>'speaker', '')")}) AS kept,
               (SELECT count(*) FROM jsonb_array_elements(g.overlap) o
                WHERE {_voice_match("coalesce(o.value->>'speaker', '')")}) AS dropped
        FROM segments g
        WHERE g.overlap IS NOT NULL AND jsonb_typeof(g.overlap) = 'array'
    )
    UPDATE segments g SET overlap = t.kept FROM trimmed t
    WHERE g.session_id = t.session_id AND g.segment_id = t.segment_id AND t.dropped > 0
    RETURNING t.dropped
    """  # noqa: S608 (constant SQL, values bound)
)


_PG_STATEMENTS: list[tuple[str, Any]] = [
    # mentions first: a person's mention may sit in a segment that stays (its evidence does not)
    (
        "entity_mentions",
        _sql(
            f"""DELETE FROM entity_mentions WHERE session_id = ANY(CAST(:sessions AS text[]))
            OR entity_id = ANY(CAST(:entity_ids AS bigint[]))
            OR {_text_match("name")} OR {_text_match("evidence")}
            OR {_text_match("properties::text")}"""  # noqa: S608 (constant SQL, values bound)
        ),
    ),
    (
        "relations",
        _sql(
            f"""DELETE FROM extracted_relations WHERE session_id = ANY(CAST(:sessions AS text[]))
            OR (session_id, segment_id) IN {_KEYS}
            OR {_text_match("subject")} OR {_text_match("object")}
            OR {_text_match("evidence")}"""  # noqa: S608 (constant SQL, values bound)
        ),
    ),
    (
        "statements",
        _sql(
            f"""DELETE FROM statements WHERE session_id = ANY(CAST(:sessions AS text[]))
            OR (session_id, segment_id) IN {_KEYS}
            OR {_text_match("subject")} OR {_text_match("text")}
            OR {_text_match("evidence")}"""  # noqa: S608 (constant SQL, values bound)
        ),
    ),
    (
        "entities",
        _sql(
            f"""DELETE FROM entities WHERE id = ANY(CAST(:entity_ids AS bigint[]))
            OR {_text_match("name")} OR {_text_match("properties::text")}"""  # noqa: S608 (constant SQL, values bound)
        ),
    ),
    (
        "contradictions",
        _sql(
            f"""DELETE FROM entity_contradictions
            WHERE session_id = ANY(CAST(:sessions AS text[])) OR {_text_match("fact")}"""  # noqa: S608 (constant SQL, values bound)
        ),
    ),
    (
        "promise_fulfilments",
        _sql(
            f"""DELETE FROM promise_fulfilments
            WHERE session_id = ANY(CAST(:sessions AS text[])) OR {_text_match("evidence")}"""  # noqa: S608 (constant SQL, values bound)
        ),
    ),
    (
        "daily_reflections",
        _sql(
            f"""DELETE FROM daily_reflections
            WHERE session_id = ANY(CAST(:sessions AS text[]))
            OR {_text_match("text")} OR {_text_match("summary::text")}"""  # noqa: S608 (constant SQL, values bound)
        ),
    ),
    ("communities", _sql(f"DELETE FROM communities WHERE {_text_match('name')}")),  # noqa: S608 (constant SQL, values bound)
    # procrastinate's triggers name its tables unqualified
    ("_", _sql("SET LOCAL search_path TO public, procrastinate")),
    # queued stage jobs of removed sessions (their args name the session); never a running one
    (
        "jobs",
        _sql(
            """DELETE FROM procrastinate.procrastinate_jobs j
            WHERE j.args->>'session_id' = ANY(CAST(:sessions AS text[]))
              AND j.status::text <> 'doing'
              AND NOT EXISTS (SELECT 1 FROM procrastinate.procrastinate_periodic_defers d
                              WHERE d.job_id = j.id)"""
        ),
    ),
    (
        "ingest_offsets",
        _sql("DELETE FROM ingest_offsets WHERE session_id = ANY(CAST(:sessions AS text[]))"),
    ),
    (
        "sessions",
        _sql("DELETE FROM sessions WHERE session_id = ANY(CAST(:sessions AS text[]))"),
    ),
]
_DELETE_EVENTS = _sql(
    f"""DELETE FROM observability_events WHERE session_id = ANY(CAST(:sessions AS text[]))
    OR {_text_match("data::text")} OR {_text_match("coalesce(reasoning, '')")}"""  # noqa: S608 (constant SQL, values bound)
)


# How a forget request is made durable: a job, queued by its id, that retries it.
ForgetQueueFn = Callable[[int], Awaitable[Any]]


class ForgetError(RuntimeError):
    pass


@dataclass
class ForgetParts:
    """What forgetting reaches: the engine's stores and the jobs that re-derive."""

    engine: AsyncEngine
    events_engine: AsyncEngine
    transcripts_dir: Path
    events_dir: Path
    ingestor: Ingestor
    chronicler: Chronicler
    event_files: EventFileReader | None = None
    search_index: SegmentSearchIndex | None = None
    embedding: SegmentEmbedding | None = None
    graph: KnowledgeGraph | None = None
    recorder: EventRecorder | None = None
    # re-derive a touched session: (session_id) → queue its embed and graph jobs
    rederive: Callable[[str], Awaitable[None]] | None = None
    voices: VoiceBank | None = None  # the audio pipeline's enrollment bank


class Forgetter:
    def __init__(self, parts: ForgetParts) -> None:
        self.p = parts
        self._lock = asyncio.Lock()  # one forget at a time: steps read each other's results

    # --- resolving a request ---

    async def resolve_session(self, session_id: str) -> Target | None:
        async with self.p.engine.connect() as conn:
            known = (
                await conn.execute(
                    text("SELECT 1 FROM sessions WHERE session_id = :s"), {"s": session_id}
                )
            ).first()
        if known is None and not (self.p.transcripts_dir / f"{session_id}{SUFFIX}").exists():
            return None
        return Target("session", sessions=[session_id])

    async def resolve_entity(self, entity_id: int) -> Target | None:
        async with self.p.engine.connect() as conn:
            row = (
                await conn.execute(
                    text("SELECT name FROM entities WHERE id = :i"), {"i": entity_id}
                )
            ).first()
            if row is None:
                return None
            target = Target("entity", names=_names([row.name]), entity_ids=[entity_id])
            await self._add_mentioned(conn, target)
        return target

    async def resolve_person(self, name: str) -> Target:
        target = Target("person", names=_names([name]))
        if not target.names:
            raise ValueError(f"a name needs at least {MIN_NAME_CHARS} characters")
        async with self.p.engine.connect() as conn:
            ids = (
                await conn.execute(
                    _sql(
                        f"""SELECT id FROM entities WHERE (type = 'person'
                        AND canonical_name = ANY(CAST(:speakers AS text[])))
                        OR {_text_match("name")}"""  # noqa: S608 (constant SQL, values bound)
                    ),
                    target.sql_params(),
                )
            ).scalars()
            target.entity_ids = sorted(ids)
            await self._add_mentioned(conn, target)
        return target

    @staticmethod
    async def _add_mentioned(conn: AsyncConnection, target: Target) -> None:
        """The segments the extractor tied to these entities (an LLM extractor may tie one
        that never spells the name out)."""
        rows = await conn.execute(
            text(
                "SELECT DISTINCT session_id, segment_id FROM entity_mentions "
                "WHERE entity_id = ANY(:ids) AND segment_id IS NOT NULL"
            ),
            {"ids": target.entity_ids},
        )
        target.segments = sorted([r.session_id, r.segment_id] for r in rows)

    async def create(self, target: Target) -> int:
        async with self.p.engine.begin() as conn:
            return int(
                (
                    await conn.execute(
                        text(
                            "INSERT INTO forget_requests (kind, target) "
                            "VALUES (:kind, CAST(:target AS jsonb)) RETURNING id"
                        ),
                        {"kind": target.kind, "target": json.dumps(asdict(target))},
                    )
                ).scalar_one()
            )

    async def request(
        self,
        target: Target,
        wait_s: float,
        queue: ForgetQueueFn | None = None,
    ) -> dict[str, Any]:
        """Record a forget request, make it durable with `queue` (a job that retries it until
        every store is done; None while the job queue is not open), run it for at most
        `wait_s` and return its view: `status` "done", or "pending" with the store that is
        not done yet in its report."""
        request_id = await self.create(target)
        if queue is not None:
            await queue(request_id)
        try:
            async with asyncio.timeout(wait_s):
                await self.run(request_id)
        except (ForgetError, TimeoutError):
            pass  # the report says which store, the job retries it
        view = await self.get(request_id)
        assert view is not None
        return view

    async def get(self, request_id: int) -> dict[str, Any] | None:
        found = await self.latest(request_id=request_id)
        return found[0] if found else None

    async def unfinished(self) -> int:
        """How many requests are not done yet (pending, or failed and waiting for a retry)."""
        async with self.p.engine.connect() as conn:
            found = await conn.execute(
                text("SELECT count(*) FROM forget_requests WHERE status <> 'done'")
            )
            return int(found.scalar_one())

    async def latest(
        self, *, request_id: int | None = None, status: str | None = None, limit: int = 1
    ) -> list[dict[str, Any]]:
        """Requests newest first (one by id, or the latest `limit`, optionally of a status)."""
        async with self.p.engine.connect() as conn:
            rows = (
                await conn.execute(
                    text(
                        "SELECT id, kind, status, report, attempts, created_at, finished_at "
                        "FROM forget_requests WHERE (CAST(:i AS bigint) IS NULL OR id = :i) "
                        "AND (CAST(:s AS text) IS NULL OR status = :s) "
                        "ORDER BY id DESC LIMIT :n"
                    ),
                    {"i": request_id, "s": status, "n": limit},
                )
            ).all()
        return [
            {
                "request_id": row.id,
                "kind": row.kind,
                "status": row.status,
                "stores": row.report,
                "attempts": row.attempts,
                "created_at": row.created_at,
                "finished_at": row.finished_at,
            }
            for row in rows
        ]

    # --- running it ---

    async def run(self, request_id: int) -> dict[str, Any]:
        """One attempt at every step not yet done. Raises ForgetError when a step failed
        (the job retries it); the request's report says which and why."""
        async with self._lock:
            async with self.p.engine.connect() as conn:
                row = (
                    await conn.execute(
                        text("SELECT * FROM forget_requests WHERE id = :i "),
                        {"i": request_id},
                    )
                ).first()
            if row is None:
                raise ForgetError(f"no forget request {request_id}")
            if row.status == "done":
                return await self._view(request_id)
            target = Target.from_json(row.target)
            report: dict[str, Any] = dict(row.report)
            failed: list[str] = []
            for step in STEPS:
                if report.get(step, {}).get("status") == "done":
                    continue
                try:
                    result = await getattr(self, f"_{step}")(target)
                    report[step] = {"status": "done", **result}
                except Exception as exc:
                    log.warning("forget.step_failed", request_id=request_id, step=step,
                                error=type(exc).__name__)  # fmt: skip
                    report[step] = {"status": "error", "error": _describe(exc, target)}
                    failed.append(step)
                    if step == "jsonl":  # the source of truth first, or nothing else
                        break
                await self._save(request_id, target, report, done=False)
            await self._save(request_id, target, report, done=not failed, attempted=True)
        if self.p.recorder is not None:
            await self.p.recorder.emit(
                CreatureName.SEA_CUCUMBER,
                EventType.ERROR if failed else EventType.COMPLETE,
                data={"forget_request": request_id, "kind": target.kind, "failed": failed},
                reasoning=f"forget request {request_id}: "
                + (f"{', '.join(failed)} to retry" if failed else "forgotten everywhere"),
            )
        if failed:
            raise ForgetError(f"forget request {request_id}: {', '.join(failed)} failed")
        return await self._view(request_id)

    async def _view(self, request_id: int) -> dict[str, Any]:
        found = await self.get(request_id)
        assert found is not None
        return found

    async def _save(
        self,
        request_id: int,
        target: Target,
        report: dict[str, Any],
        *,
        done: bool,
        attempted: bool = False,
    ) -> None:
        stored = {"kind": target.kind, "digest": target.digest()} if done else asdict(target)
        async with self.p.engine.begin() as conn:
            await conn.execute(
                text(
                    """UPDATE forget_requests SET target = CAST(:target AS jsonb),
                    report = CAST(:report AS jsonb), attempts = attempts + :a,
                    status = CASE WHEN :done THEN 'done' ELSE status END,
                    finished_at = CASE WHEN :done THEN now() ELSE finished_at END
                    WHERE id = :i"""
                ),
                {
                    "target": json.dumps(stored),
                    "report": json.dumps(report),
                    "a": int(attempted),
                    "done": done,
                    "i": request_id,
                },
            )

    # --- the steps ---

    async def _jsonl(self, target: Target) -> dict[str, Any]:
        """Every transcript file: removed (a whole session, or nothing left) or rewritten
        without the matching segments. Under the ingestor's per-file lock, so a pass that
        read the old version has committed before the rewrite (and PostgreSQL is cleaned
        after it)."""
        flt = _SegmentFilter(target)
        touched, removed = set(target.touched), set(target.removed)
        directory = self.p.transcripts_dir
        paths = await asyncio.to_thread(lambda: sorted(directory.glob(f"*{SUFFIX}")))
        for path in paths:
            try:
                sid = validate_id(path.stem, "session_id")
            except InvalidIdError:
                continue
            if sid in target.sessions:
                transform: Callable[[bytes], bytes | None] = lambda _old: None  # noqa: E731
            else:
                transform = flt.transform(sid)
            async with self.p.ingestor.path_lock(path):
                outcome = await asyncio.to_thread(rewrite_stream, directory, sid, transform)
            if outcome == "removed":
                removed.add(sid)
                touched.discard(sid)
            elif outcome == "rewritten":
                touched.add(sid)
        target.touched, target.removed = sorted(touched - removed), sorted(removed)
        return {
            "files_removed": len(removed),
            "files_rewritten": len(target.touched),
            "segments": flt.removed,
            "overlaps": flt.overlaps,
        }

    async def _postgres(self, target: Target) -> dict[str, Any]:
        # A stage job of a touched session (re-extracting it) may deadlock with this
        # transaction: PostgreSQL aborts one of the two, and this one is simply run again.
        for attempt in range(DEADLOCK_RETRIES):
            try:
                return await self._postgres_once(target)
            except DBAPIError as exc:
                if "deadlock detected" not in str(exc) or attempt == DEADLOCK_RETRIES - 1:
                    raise
                log.info("forget.deadlock_retry", attempt=attempt + 1)
                await asyncio.sleep(0.2 * (attempt + 1))
        raise AssertionError("unreachable")

    async def _postgres_once(self, target: Target) -> dict[str, Any]:
        params = target.sql_params()
        counts: dict[str, int] = {}
        async with self.p.engine.begin() as conn:
            doomed = (await conn.execute(_DOOMED, params)).all()
            keys = [[r.session_id, r.segment_id] for r in doomed]
            touched = sorted({r.session_id for r in doomed} - set(target.gone_sessions))
            # entities that lose mentions here: recomputed, or deleted if none are left
            had = (
                await conn.execute(
                    text(
                        f"""SELECT DISTINCT entity_id FROM entity_mentions
                        WHERE session_id = ANY(CAST(:sessions AS text[]))
                        OR entity_id = ANY(CAST(:entity_ids AS bigint[]))
                        OR (session_id, segment_id) IN {_KEYS}"""  # noqa: S608 (constant SQL, values bound)
                    ),
                    {**params, "k_sid": [k[0] for k in keys], "k_gid": [k[1] for k in keys]},
                )
            ).scalars()
            had_ids = sorted(set(had))
            deleted = await conn.execute(
                _sql(f"DELETE FROM segments WHERE (session_id, segment_id) IN {_KEYS}"),  # noqa: S608 (constant SQL, values bound)
                {**params, "k_sid": [k[0] for k in keys], "k_gid": [k[1] for k in keys]},
            )
            counts["segments"] = deleted.rowcount
            counts["overlaps"] = 0
            if target.names:
                trimmed = (await conn.execute(_TRIM_OVERLAP, params)).scalars()
                counts["overlaps"] = int(sum(trimmed))
            for name, stmt in _PG_STATEMENTS:
                result = await conn.execute(stmt, params)
                if not name.startswith("_"):
                    counts[name] = result.rowcount
            orphans = await conn.execute(
                text(
                    """DELETE FROM entities e WHERE e.id = ANY(CAST(:ids AS bigint[]))
                    AND NOT EXISTS (SELECT 1 FROM entity_mentions m WHERE m.entity_id = e.id)"""
                ),
                {"ids": had_ids},
            )
            counts["entities"] += orphans.rowcount
            await entity_store.recompute(conn, had_ids)
            await conn.execute(
                text(
                    """UPDATE sessions s SET segments_count = (SELECT count(*) FROM segments g
                    WHERE g.session_id = s.session_id AND g.replaced_by IS NULL)
                    WHERE s.session_id = ANY(CAST(:t AS text[])) AND s.ended_at IS NOT NULL"""
                ),
                {"t": touched},
            )
        target.touched = sorted({*target.touched, *touched} - set(target.gone_sessions))
        target.entities_changed = sorted({*target.entities_changed, *had_ids})
        return counts

    async def _keyword_index(self, target: Target) -> dict[str, Any]:
        index = self.p.search_index
        if index is None:
            return {"configured": False}
        changes = Changes()
        for sid in target.all_sessions:
            changes.add(sid, None)  # re-read from PostgreSQL: gone rows leave the index
        await index.apply(changes)
        return {"sessions": len(target.all_sessions)}

    async def _vectors(self, target: Target) -> dict[str, Any]:
        emb = self.p.embedding
        if emb is None:
            return {"configured": False}
        from context_engine.index.entity_vectors import EntityEmbedding

        store = emb.store
        spaces = await store.spaces()
        for space in spaces:
            for sid in target.all_sessions:
                await store.delete_session(space, sid)  # type: ignore[arg-type]
        async with self.p.engine.begin() as conn:
            await conn.execute(
                text("DELETE FROM segment_vectors WHERE session_id = ANY(CAST(:t AS text[]))"),
                {"t": target.all_sessions},
            )
            await conn.execute(
                text("UPDATE vector_spaces SET status = 'building', ready_at = NULL")
            )
        # The entities' points, in every space: those forgotten, and those whose documents
        # held forgotten words (embedded again from what remains by their job). Entities
        # matched by name may have gone without losing a mention by session: the orphan
        # sweep finds those.
        entity_vectors = EntityEmbedding(emb)
        entities = await entity_vectors.drop([*target.entity_ids, *target.entities_changed])
        entities += await entity_vectors.drop_orphans()
        await self._rederive(target)
        return {
            "spaces": len(spaces),
            "sessions": len(target.all_sessions),
            "entity_vectors_dropped": entities,
        }

    async def _rederive(self, target: Target) -> None:
        if self.p.rederive is not None:
            for sid in target.touched:
                await self.p.rederive(sid)

    async def _voices(self, target: Target) -> dict[str, Any]:
        """A person forgotten by name: their enrolled voices (sessions and entities keep
        theirs: a voice is a person's, and only a person request names one)."""
        if target.kind != "person":
            return {"applies": False}
        if self.p.voices is None:
            return {"configured": False}
        deleted = 0
        for name in target.names:
            deleted += await self.p.voices.forget_person(name)
        return {"persons": deleted}

    async def _graph(self, target: Target) -> dict[str, Any]:
        graph = self.p.graph
        if graph is None:
            return {"configured": False}
        if not graph.opened:
            from context_engine.graph import GraphUnavailableError

            raise GraphUnavailableError("the graph is not open (its server has not answered)")
        for sid in target.all_sessions:
            await graph.forget_session(sid)
        name_re = target.name_re()
        counts = await graph.forget_text(
            [n.casefold() for n in target.names],
            (lambda s: bool(name_re.search(s))) if name_re is not None else (lambda _s: False),
            target.gone_sessions,
        )
        async with self.p.engine.begin() as conn:
            # touched sessions are written again from what PostgreSQL has left
            await conn.execute(
                text(
                    """UPDATE session_stages SET completed_at = NULL, input_fingerprint = NULL
                    WHERE stage = 'graph' AND session_id = ANY(CAST(:t AS text[]))"""
                ),
                {"t": target.touched},
            )
        await self._rederive(target)
        return {"sessions": len(target.all_sessions), **counts}

    async def _events(self, target: Target) -> dict[str, Any]:
        ch = self.p.chronicler
        await ch.flush()  # what is queued reaches PostgreSQL first, then goes with the rest
        name_re, id_re = target.name_re(), target.id_re()
        gone = set(target.gone_sessions)

        def matches(raw: str, session_id: str | None) -> bool:
            return (
                (session_id is not None and session_id in gone)
                or (name_re is not None and bool(name_re.search(raw)))
                or (id_re is not None and bool(id_re.search(raw)))
            )

        ring, pending = ch.forget(lambda sid, raw: matches(raw, sid))
        files = 0
        directory = self.p.events_dir
        paths = await asyncio.to_thread(lambda: sorted(directory.glob(f"*{SUFFIX}")))

        def drop_lines(old: bytes) -> bytes:
            out = []
            for line in old.splitlines(keepends=True):
                raw = line.decode("utf-8", "replace")
                try:
                    sid = json.loads(raw).get("session_id")
                except (ValueError, AttributeError):
                    sid = None
                if not matches(raw, sid if isinstance(sid, str) else None):
                    out.append(line)
            return b"".join(out)

        for path in paths:
            try:
                stream = validate_id(path.stem, "stream")
            except InvalidIdError:
                continue
            lock = self.p.event_files.path_lock(path) if self.p.event_files else asyncio.Lock()
            async with lock:
                outcome = await asyncio.to_thread(rewrite_stream, directory, stream, drop_lines)
            files += outcome in ("rewritten", "removed")
        async with self.p.events_engine.begin() as conn:
            rows = (await conn.execute(_DELETE_EVENTS, target.sql_params())).rowcount
        # anything recorded meanwhile (a job of a removed session finishing) goes too
        ring2, pending2 = ch.forget(lambda sid, raw: matches(raw, sid))
        return {"ring": ring + ring2, "backlog": pending + pending2, "files": files, "rows": rows}


def _names(names: list[str]) -> list[str]:
    out = []
    for n in names:
        n = " ".join(n.split())
        if len(n) >= MIN_NAME_CHARS and n.casefold() not in {o.casefold() for o in out}:
            out.append(n)
    return out


def _describe(exc: BaseException, target: Target) -> str:
    """The error for the report, with the forgotten names and ids taken out."""
    msg = f"{type(exc).__name__}: {exc}"[:300]
    for pattern in (target.name_re(), target.id_re()):
        if pattern is not None:
            msg = pattern.sub("…", msg)
    return msg
