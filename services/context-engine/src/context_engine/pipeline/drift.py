"""Drift between the four stores (issue 11): JSONL ≡ PostgreSQL ≡ vectors ≡ graph episodes.

The JSONL files are the source of truth; everything else is derived from them, so a crash
(SIGKILL, power loss, a store restored from an older copy) can leave a derived store behind
or ahead. `check()` compares, and `repair()` brings the derived stores back in line:

- `jsonl_not_in_postgres`: a segment of a JSONL line with no row in `segments` → the file
  is ingested again (a whole re-read, upserts only);
- `postgres_not_in_jsonl`: a `segments` row no JSONL line has → reported, never repaired;
- `vectors_missing`: an active segment with no vector row in the current space → its
  session's embed job is queued;
- `vector_rows_without_point`: a `segment_vectors` row whose point is not in the store →
  the row is dropped and the embed job queued;
- `orphan_points`: a point in the store of no active segment → deleted;
- `graph_episode_missing`: the graph stage is done but the graph has no episode of the
  session → the stage is reset and queued again;
- `graph_orphan_episodes`: an episode of a session neither the JSONL nor PostgreSQL has →
  removed (with the facts only it stated).

Rule: nothing is lost. PostgreSQL rows without a JSONL line are never deleted here (the file
may be what was lost); they are reported for a person to decide.

Not drift: sessions with a stage job queued or running (`pending`: the job will bring them in
line) and sessions of a forget request not yet done (`forgetting`). A check reads PostgreSQL
before the file of each session, so an append racing the check can only show as
`jsonl_not_in_postgres` (repaired by an idempotent re-ingest), never as phantom rows.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from context_engine.pipeline.session_stages import GRAPH_STAGE
from her_os_shared.creatures import CreatureName
from her_os_shared.events import EventType
from her_os_shared.ids import InvalidIdError, validate_id
from her_os_shared.jsonl import SUFFIX, JsonlReader
from her_os_shared.logging import get_logger
from her_os_shared.transcript import TranscriptPayload

if TYPE_CHECKING:
    from context_engine.graph import KnowledgeGraph
    from context_engine.index.segment_vectors import SegmentEmbedding
    from context_engine.ingest.transcripts import Ingestor
    from context_engine.observe.recorder import EventRecorder
    from context_engine.pipeline.jobs import JobQueue

log = get_logger(__name__)

KINDS = (
    "jsonl_not_in_postgres",
    "postgres_not_in_jsonl",
    "vectors_missing",
    "vector_rows_without_point",
    "orphan_points",
    "graph_episode_missing",
    "graph_orphan_episodes",
)
REPORT_ONLY = frozenset({"postgres_not_in_jsonl"})
SAMPLE = 20
CREATURE = CreatureName.SEA_CUCUMBER  # memory upkeep: salience decay, checks, forgetting
PROGRESS_EVERY_S = 0.5

_PG_IDS = text("SELECT segment_id FROM segments WHERE session_id = :sid")
_PG_SESSIONS = text("SELECT session_id, count(*) AS n FROM segments GROUP BY session_id")
_PG_ONLY_IDS = text(
    "SELECT segment_id FROM segments WHERE session_id = :sid ORDER BY segment_id LIMIT :n"
)
# Sessions some job will still bring in line: a stage job queued or running.
_PENDING = text(
    """
    SELECT DISTINCT task_name, args->>'session_id' AS sid FROM procrastinate.procrastinate_jobs
    WHERE status::text IN ('todo', 'doing') AND args ? 'session_id'
    """
)
_FORGETTING = text("SELECT target FROM forget_requests WHERE status <> 'done'")
_NO_VECTOR = text(
    """
    SELECT s.session_id, s.segment_id FROM segments s
    LEFT JOIN segment_vectors v
      ON v.session_id = s.session_id AND v.segment_id = s.segment_id AND v.space = :space
    WHERE s.replaced_by IS NULL AND v.session_id IS NULL
    """
)
_VECTOR_ROWS = text("SELECT session_id, segment_id FROM segment_vectors WHERE space = :space")
_ACTIVE_AMONG = text(
    """
    SELECT session_id, segment_id FROM segments WHERE replaced_by IS NULL
      AND (session_id, segment_id) IN
          (SELECT * FROM unnest(CAST(:sids AS text[]), CAST(:gids AS text[])))
    """
)
# Graph stage completed for its input (a reflection is done with nothing written).
_GRAPH_DONE = text(
    """
    SELECT session_id FROM session_stages
    WHERE stage = :stage AND status = 'done' AND completed_at IS NOT NULL
      AND coalesce(input_fingerprint, '') NOT LIKE :reflection
    """
)
_SESSIONS = text("SELECT session_id FROM sessions")
_RESET_GRAPH = text(
    """UPDATE session_stages SET completed_at = NULL, input_fingerprint = NULL
    WHERE stage = :stage AND session_id = ANY(CAST(:sids AS text[]))"""
)
_DROP_ROWS = text(
    """DELETE FROM segment_vectors WHERE space = :space AND (session_id, segment_id) IN
    (SELECT * FROM unnest(CAST(:sids AS text[]), CAST(:gids AS text[])))"""
)


@dataclass
class Drift:
    """One kind of drift: how many, a bounded sample of ids, and the sessions it touches."""

    count: int = 0
    sample: list[str] = field(default_factory=list)
    sessions: set[str] = field(default_factory=set)
    # kind-specific data the repair needs (point ids, vector rows), never reported
    items: list[Any] = field(default_factory=list)

    def add(self, session_id: str, ident: str, item: Any = None) -> None:
        self.count += 1
        self.sessions.add(session_id)
        if len(self.sample) < SAMPLE:
            self.sample.append(ident)
        if item is not None:
            self.items.append(item)

    def view(self) -> dict[str, Any]:
        return {"count": self.count, "sessions": len(self.sessions), "sample": self.sample}


@dataclass
class Report:
    check_id: str
    drift: dict[str, Drift] = field(default_factory=lambda: {k: Drift() for k in KINDS})
    counts: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # store → why it was not checked
    pending: dict[str, int] = field(default_factory=dict)  # task → sessions in flight
    forgetting: int = 0
    seconds: float = 0.0

    @property
    def total(self) -> int:
        return sum(d.count for d in self.drift.values())

    def view(self) -> dict[str, Any]:
        return {
            "check_id": self.check_id,
            "drift_total": self.total,
            "repairable": sum(d.count for k, d in self.drift.items() if k not in REPORT_ONLY),
            "drift": {k: d.view() for k, d in self.drift.items()},
            "counts": self.counts,
            "skipped": self.skipped,
            "pending": self.pending,
            "forgetting": self.forgetting,
            "seconds": round(self.seconds, 3),
        }


def _sid(session_id: str, segment_id: str) -> str:
    return f"{session_id}/{segment_id}"


class StoreChecker:
    """Compares and repairs the stores of one engine (built by the runtime)."""

    def __init__(
        self,
        engine: AsyncEngine,
        transcripts_dir: Path,
        ingestor: Ingestor,
        *,
        jobs: JobQueue | None = None,
        embedding: SegmentEmbedding | None = None,
        graph: KnowledgeGraph | None = None,
        recorder: EventRecorder | None = None,
        jobs_open: Callable[[], bool] = lambda: True,
    ) -> None:
        self.engine = engine
        self.jobs_open = jobs_open
        self.transcripts_dir = Path(transcripts_dir)
        self.ingestor = ingestor
        self.jobs = jobs
        self.embedding = embedding
        self.graph = graph
        self.recorder = recorder
        self._lock = asyncio.Lock()  # one check or repair at a time
        self._last_progress = 0.0

    # --- progress ---

    async def _emit(self, event: EventType, check_id: str, reasoning: str, **data: Any) -> None:
        if self.recorder is not None:
            await self.recorder.emit(
                CREATURE, event, data={"check_id": check_id, **data}, reasoning=reasoning
            )

    async def _progress(
        self, check_id: str, phase: str, done: int, total: int, *, force: bool = False
    ) -> None:
        now = time.monotonic()
        if not force and now - self._last_progress < PROGRESS_EVERY_S:
            return
        self._last_progress = now
        await self._emit(
            EventType.METRIC, check_id, f"drift check: {phase} {done}/{total}",
            phase=phase, done=done, total=total,
        )  # fmt: skip

    # --- the check ---

    async def check(self, check_id: str | None = None) -> Report:
        async with self._lock:
            return await self._check(check_id or uuid.uuid4().hex)

    async def _check(self, check_id: str) -> Report:
        started = time.monotonic()
        report = Report(check_id)
        await self._emit(EventType.START, check_id, "drift check started")
        pending, forgetting = await self._in_flight()
        report.forgetting = len(forgetting)
        report.pending = {task: len(s) for task, s in sorted(pending.items())}
        files = await self._jsonl_vs_postgres(report, pending, forgetting)
        await self._vectors(report, pending, forgetting)
        await self._graph(report, pending, forgetting, files)
        report.seconds = time.monotonic() - started
        summary = {k: d.count for k, d in report.drift.items() if d.count}
        await self._emit(
            EventType.COMPLETE, check_id,
            f"drift check: {report.total} drifted" + (f" ({summary})" if summary else ""),
            drift_total=report.total, drift=summary,
        )  # fmt: skip
        log.info("check.done", check_id=check_id, drift=summary, seconds=round(report.seconds, 2))
        return report

    async def _in_flight(self) -> tuple[dict[str, set[str]], set[str]]:
        pending: dict[str, set[str]] = {}
        forgetting: set[str] = set()
        async with self.engine.connect() as conn:
            for task, sid in await conn.execute(_PENDING):
                pending.setdefault(task, set()).add(sid)
            for (target,) in await conn.execute(_FORGETTING):
                raw = target if isinstance(target, dict) else json.loads(target)
                for key in ("sessions", "touched", "removed"):
                    forgetting.update(raw.get(key) or [])
                forgetting.update(s for s, _ in raw.get("segments") or [])
        return pending, forgetting

    def _session_files(self) -> dict[str, Path]:
        out: dict[str, Path] = {}
        for path in sorted(self.transcripts_dir.glob(f"*{SUFFIX}")):
            try:
                out[validate_id(path.stem, "session_id")] = path
            except InvalidIdError:
                continue  # the ingestor skips it too
        return out

    async def _jsonl_vs_postgres(
        self, report: Report, pending: dict[str, set[str]], forgetting: set[str]
    ) -> set[str]:
        """Per session: PostgreSQL's segment ids first, then the file's (see the module doc).
        Returns the sessions that have a file."""
        files = await asyncio.to_thread(self._session_files)
        missing, extra = (
            report.drift["jsonl_not_in_postgres"],
            report.drift["postgres_not_in_jsonl"],
        )
        lines = segments = 0
        for i, (sid, path) in enumerate(files.items()):
            await self._progress(report.check_id, "jsonl", i, len(files))
            async with self.engine.connect() as conn:
                stored = set((await conn.execute(_PG_IDS, {"sid": sid})).scalars())
            in_file, n = await asyncio.to_thread(_file_segments, path, sid)
            lines += n
            segments += len(in_file)
            if sid in forgetting:
                continue
            for g in sorted(in_file - stored):
                missing.add(sid, _sid(sid, g))
            for g in sorted(stored - in_file):
                extra.add(sid, _sid(sid, g))
        await self._progress(report.check_id, "jsonl", len(files), len(files), force=True)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(_PG_SESSIONS)).all()
            for sid, n in rows:
                if sid in files or sid in forgetting:
                    continue
                ids = (await conn.execute(_PG_ONLY_IDS, {"sid": sid, "n": SAMPLE})).scalars()
                sample = [_sid(sid, g) for g in ids]
                extra.count += n
                extra.sessions.add(sid)
                extra.sample.extend(sample[: max(0, SAMPLE - len(extra.sample))])
        report.counts.update(
            jsonl_files=len(files),
            jsonl_lines=lines,
            jsonl_segments=segments,
            postgres_segments=sum(n for _, n in rows),
        )
        return set(files)

    async def _vectors(
        self, report: Report, pending: dict[str, set[str]], forgetting: set[str]
    ) -> None:
        emb = self.embedding
        if emb is None:
            report.skipped["vectors"] = "no vector index configured"
            return
        if not emb.opened:
            report.skipped["vectors"] = "the vector store is not open"
            return
        space = emb.space_name
        busy = pending.get("embed_session", set()) | forgetting
        await self._progress(report.check_id, "vectors", 0, 3, force=True)
        async with self.engine.connect() as conn:
            no_vector = (await conn.execute(_NO_VECTOR, {"space": space})).all()
            rows = {(r.session_id, r.segment_id) for r in await conn.execute(
                _VECTOR_ROWS, {"space": space})}  # fmt: skip
        drift = report.drift["vectors_missing"]
        for sid, g in sorted(no_vector):
            if sid not in busy:
                drift.add(sid, _sid(sid, g))
        await self._progress(report.check_id, "vectors", 1, 3, force=True)
        try:
            points = await emb.store.segment_points(emb.space)
        except Exception as exc:  # a store down: said, the rest of the check still runs
            report.skipped["vectors"] = f"the vector store could not be read: {exc!r}"[:300]
            return
        await self._progress(report.check_id, "vectors", 2, 3, force=True)
        stored = {(s, g) for _, s, g in points}
        drift = report.drift["vector_rows_without_point"]
        for sid, g in sorted(rows - stored):
            if sid not in busy:
                drift.add(sid, _sid(sid, g), (sid, g))
        # A point with no row may be an embed run between its upsert and its row: only
        # points of no active segment are orphans.
        candidates = [(pid, s, g) for pid, s, g in points if (s, g) not in rows]
        active: set[tuple[str, str]] = set()
        async with self.engine.connect() as conn:
            for i in range(0, len(candidates), 5000):
                chunk = candidates[i : i + 5000]
                found = await conn.execute(
                    _ACTIVE_AMONG,
                    {"sids": [c[1] for c in chunk], "gids": [c[2] for c in chunk]},
                )
                active.update((r.session_id, r.segment_id) for r in found)
        drift = report.drift["orphan_points"]
        for pid, sid, g in sorted(candidates, key=lambda c: (c[1], c[2])):
            if (sid, g) not in active and sid not in busy:
                drift.add(sid, _sid(sid, g), pid)
        await self._progress(report.check_id, "vectors", 3, 3, force=True)
        report.counts.update(vector_rows=len(rows), vector_points=len(points))

    async def _graph(
        self,
        report: Report,
        pending: dict[str, set[str]],
        forgetting: set[str],
        files: set[str],
    ) -> None:
        graph = self.graph
        if graph is None:
            report.skipped["graph"] = "no graph configured"
            return
        if not graph.opened:
            report.skipped["graph"] = "the graph is not open"
            return
        await self._progress(report.check_id, "graph", 0, 1, force=True)
        try:
            episodes = await graph.session_episode_index()
        except Exception as exc:
            report.skipped["graph"] = f"the graph could not be read: {exc!r}"[:300]
            return
        async with self.engine.connect() as conn:
            params = {"stage": GRAPH_STAGE, "reflection": "%:reflection"}
            done = set((await conn.execute(_GRAPH_DONE, params)).scalars())
            known = set((await conn.execute(_SESSIONS)).scalars())
        busy = pending.get("graph_session", set()) | forgetting
        drift = report.drift["graph_episode_missing"]
        for sid in sorted(done - set(episodes) - busy):
            drift.add(sid, sid)
        drift = report.drift["graph_orphan_episodes"]
        for sid in sorted(set(episodes) - known - files - busy):
            drift.add(sid, sid)
        await self._progress(report.check_id, "graph", 1, 1, force=True)
        report.counts.update(graph_done=len(done), graph_episodes=len(episodes))

    # --- the repair ---

    async def repair(self, check_id: str | None = None) -> dict[str, Any]:
        """Check, repair what can be repaired, check again. Work handed to jobs (embedding,
        graph writes) shows as `pending` in the second check until the jobs finish."""
        check_id = check_id or uuid.uuid4().hex
        async with self._lock:
            before = await self._check(check_id)
            repaired = await self._repair(before)
            after = await self._check(check_id)
        return {"before": before.view(), "repaired": repaired, "after": after.view()}

    async def _repair(self, report: Report) -> dict[str, int]:
        cid = report.check_id
        done: dict[str, int] = {}
        d = report.drift
        emb = self.embedding if self.embedding is not None and self.embedding.opened else None
        # 1. Vectors that belong to nothing, first: a segment re-ingested below gets its
        # point back from its embed job (same point id), which a deletion after it could hit.
        if emb is not None:
            rows = d["vector_rows_without_point"].items
            if rows:
                async with self.engine.begin() as conn:
                    await conn.execute(
                        _DROP_ROWS,
                        {"space": emb.space_name, "sids": [s for s, _ in rows],
                         "gids": [g for _, g in rows]},
                    )  # fmt: skip
            done["vector_rows_dropped"] = len(rows)
            points = d["orphan_points"].items
            if points:
                await emb.store.delete(emb.space, points)
            done["orphan_points_deleted"] = len(points)
        # 2. PostgreSQL from the files: a whole re-read, upserts only (the ingest commits
        # queue the embed job of each session as usual).
        sessions = sorted(d["jsonl_not_in_postgres"].sessions)
        for i, sid in enumerate(sessions):
            await self._progress(cid, "repair: re-ingest", i, len(sessions))
            await self.ingestor.ingest_file(self.ingestor.path_for(sid), from_start=True)
        done["reingested_sessions"] = len(sessions)
        if emb is not None:
            to_embed = d["vectors_missing"].sessions | d["vector_rows_without_point"].sessions
            done["embed_queued"] = await self._defer("embed", to_embed)
        missing = sorted(d["graph_episode_missing"].sessions)
        if missing:
            async with self.engine.begin() as conn:
                await conn.execute(_RESET_GRAPH, {"stage": GRAPH_STAGE, "sids": missing})
            done["graph_queued"] = await self._defer("graph", missing)
        orphans = sorted(d["graph_orphan_episodes"].sessions)
        if orphans and self.graph is not None:
            for sid in orphans:
                await self.graph.forget_session(sid)
            done["graph_episodes_removed"] = len(orphans)
        done["reported_only"] = d["postgres_not_in_jsonl"].count
        await self._emit(EventType.COMPLETE, cid, f"drift repair: {done}", repaired=done)
        log.info("check.repaired", check_id=cid, **done)
        return done

    async def _defer(self, stage: str, sessions: Iterable[str]) -> int:
        if self.jobs is None or not self.jobs_open():
            return 0
        defer = self.jobs.defer_embed if stage == "embed" else self.jobs.defer_graph
        queued = 0
        for sid in sorted(sessions):
            queued += await defer(sid) is not None
        return queued


def _file_segments(path: Path, session_id: str) -> tuple[set[str], int]:
    """The segment ids of a session's file, as the ingestor reads it (lines of another
    session and malformed lines are skipped by both); and the number of lines."""
    ids: set[str] = set()
    lines = 0
    try:
        for rec in JsonlReader(path, TranscriptPayload):
            if rec.value.session_id != session_id:
                continue
            lines += 1
            ids.update(s.segment_id for s in rec.value.segments)
    except FileNotFoundError:  # removed meanwhile (a forget): nothing in it
        pass
    return ids, lines
