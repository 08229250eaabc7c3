"""The extraction and graph stages of a session (run as durable jobs by jobs.py).

finalise → extract → graph:
- extract: the configured extractor reads the session's active segments; its output replaces
  that extractor version's earlier output in PostgreSQL (entity_store.py). Idempotent by
  (session, extractor name and version, input fingerprint).
- graph: the session becomes a graphiti episode. With an LLM, graphiti's `add_episode` does
  its own extraction; without one, the stored extraction is written as graphiti nodes and edges
  (graph/writer.py). Facts it invalidated are recorded as contradictions in PostgreSQL.
A graph failure never undoes extraction: the stages are separate jobs, retried separately.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal

from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from context_engine.config import Settings
from context_engine.extract.base import Extractor
from context_engine.graph.base import SessionEpisode
from context_engine.ingest import sessions
from context_engine.ingest.session_kinds import is_reflection_session
from context_engine.knowledge import entity_store, known_mentions
from context_engine.llm.client import LLMClient
from context_engine.llm.errors import LLMConfigError
from context_engine.observe.recorder import EventRecorder
from context_engine.pipeline import stages
from context_engine.pipeline.stages import StageKey
from context_engine.store.models import ExtractionRun
from her_os_shared.creatures import CreatureName
from her_os_shared.events import EventType
from her_os_shared.logging import get_logger

if TYPE_CHECKING:
    from context_engine.graph import KnowledgeGraph

log = get_logger(__name__)

EXTRACT_STAGE = "extract"
GRAPH_STAGE = "graph"
# Bump when what the graph stage writes changes: every session is written again. (Adding
# the entity annotations to the LLM path's episode body did not bump it: on a box with an
# LLM that would rewrite every episode, hours of GPU; sessions get them when next written.)
GRAPH_VERSION = 1


def extractor_mode(settings: Settings) -> Literal["fast", "llm"]:
    if settings.extractor == "auto":
        return "llm" if settings.llm_base_url else "fast"
    return settings.extractor


def make_extractor(settings: Settings, llm: LLMClient | None) -> Extractor:
    """The LLM extractor on `llm` (the runtime's client) when the settings choose it, else
    the fast one (no LLM)."""
    if extractor_mode(settings) == "fast":
        from context_engine.extract.fast import FastExtractor

        return FastExtractor()
    from context_engine.extract.fast import FastExtractor
    from context_engine.extract.llm import LLMExtractor

    if llm is None:  # make_llm_client(required=True) raises first, naming the setting
        raise LLMConfigError("the LLM extractor needs CONTEXT_ENGINE_LLM_BASE_URL")
    # the clauses' statements as on the fast path: both paths merge the same (ADR 0017)
    return LLMExtractor(
        llm, window_segments=settings.extract_window_segments, statements=FastExtractor()
    )


def _fingerprint(*parts: object) -> str:
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class StageOutcome:
    status: Literal["done", "already_done", "missing", "empty", "skipped"]
    detail: dict[str, int | str]


class SessionStages:
    """The bodies of the extract and graph stages."""

    def __init__(
        self,
        settings: Settings,
        engine: AsyncEngine,
        extractor: Extractor,
        graph: KnowledgeGraph | None,
        recorder: EventRecorder | None = None,
    ) -> None:
        self.settings = settings
        self.engine = engine
        self.extractor = extractor
        self.graph = graph
        self.recorder = recorder
        self.graph_mode: Literal["llm", "entities"] = (
            "llm" if extractor_mode(settings) == "llm" else "entities"
        )

    def extract_key(self, session_id: str) -> StageKey:
        return StageKey(session_id, EXTRACT_STAGE, self.extractor.version)

    def graph_key(self, session_id: str) -> StageKey:
        return StageKey(session_id, GRAPH_STAGE, GRAPH_VERSION)

    async def _emit(
        self, creature: str, event: EventType, session_id: str, **data: int | str
    ) -> None:
        if self.recorder is not None:
            await self.recorder.emit(creature, event, session_id=session_id, data=dict(data))

    # --- extract ---

    async def extract_input(self, conn: AsyncConnection, session_id: str) -> str:
        # The label leads, so `pending` finds sessions extracted by another extractor.
        fp, _ = await sessions.finalise_input(conn, session_id)
        return f"{self.extractor.label}:{fp}"

    async def extract(self, key: StageKey) -> StageOutcome:
        sid = key.session_id
        async with self.engine.begin() as conn:
            fingerprint = await self.extract_input(conn, sid)
            if await stages.is_done(conn, key, fingerprint):
                await stages.mark(conn, key, stages.DONE)
                return StageOutcome("already_done", {})
            if await is_reflection_session(conn, sid):
                # A daily reflection retells the day: extracting it would count every person
                # and promise twice. Done, with nothing extracted (write_graph skips it too).
                await stages.mark(conn, key, stages.DONE, fingerprint=fingerprint)
                log.info("extract.skipped", session_id=sid, reason="daily reflection")
                return StageOutcome("skipped", {"reason": "reflection"})
            session = await entity_store.load_session_text(conn, sid)
        if session is None:
            return StageOutcome("missing", {})
        started = datetime.now(UTC)
        await self._emit(
            CreatureName.KRAKEN, EventType.START, sid, extractor=self.extractor.label,
            segments=len(session.segments),
        )  # fmt: skip
        # The extractor runs outside any transaction: an LLM may take minutes.
        extraction = await self.extractor.extract(session.segments)
        async with self.engine.begin() as conn:
            if await self.extract_input(conn, sid) != fingerprint:
                # New segments arrived meanwhile: finalisation queues this stage again.
                await stages.mark(conn, key, stages.QUEUED)
                return StageOutcome("skipped", {"reason": "input_changed"})
            # Names already known that the extractor missed this time still count: every
            # session that says them is an episode (known_mentions.py; a session extracted
            # before a name was known is not rescanned).
            extraction = await known_mentions.add_known_mentions(conn, session, extraction)
            stored = await entity_store.store_extraction(
                conn,
                session,
                extraction,
                extractor=self.extractor.name,
                version=self.extractor.version,
                fingerprint=fingerprint,
                started_at=started,
            )
            await stages.mark(conn, key, stages.DONE, fingerprint=fingerprint)
        detail: dict[str, int | str] = {
            "extractor": self.extractor.label,
            "entities": stored.entities,
            "mentions": stored.mentions,
            "relations": stored.relations,
            "run_id": stored.run_id,
        }
        log.info("extract.stored", session_id=sid, **detail)
        await self._emit(CreatureName.KRAKEN, EventType.COMPLETE, sid, **detail)
        return StageOutcome("done", detail)

    # --- graph ---

    async def graph_input(self, conn: AsyncConnection, session_id: str) -> str | None:
        """The latest extraction run of the session (the graph stage's input), or None."""
        runs = ExtractionRun.__table__
        run_id = (
            await conn.execute(
                select(runs.c.id)
                .where(runs.c.session_id == session_id)
                .order_by(runs.c.id.desc())
                .limit(1)
            )
        ).scalar()
        if run_id is None:
            return None
        return _fingerprint(self.graph_mode, run_id, self.settings.graph_group_id)

    async def write_graph(self, key: StageKey) -> StageOutcome:
        if self.graph is None:
            return StageOutcome("skipped", {"reason": "no_graph"})
        sid = key.session_id
        async with self.engine.begin() as conn:
            if await is_reflection_session(conn, sid):  # never extracted: nothing to write
                await stages.mark(conn, key, stages.DONE, fingerprint="reflection")
                log.info("graph.skipped", session_id=sid, reason="daily reflection")
                return StageOutcome("skipped", {"reason": "reflection"})
            fingerprint = await self.graph_input(conn, sid)
            if fingerprint is None:
                return StageOutcome("missing", {})
            if await stages.is_done(conn, key, fingerprint):
                await stages.mark(conn, key, stages.DONE)
                return StageOutcome("already_done", {})
            session = await entity_store.load_session_text(conn, sid)
            extraction = await entity_store.load_extraction(conn, sid)
        if session is None:
            return StageOutcome("missing", {})
        episode = SessionEpisode(
            sid,
            session.started_at,
            session.segments,
            session.spoken_at,
            annotations=tuple((e.type, e.name) for e in extraction.entities),
        )
        await self._emit(CreatureName.MANTA, EventType.START, sid, mode=self.graph_mode)
        if self.graph_mode == "llm":
            written = await self.graph.add_episode(episode)
        else:
            written = await self.graph.write_extraction(episode, extraction, self.extractor.label)
        async with self.engine.begin() as conn:
            contradictions = await entity_store.mark_contradictions(conn, written.invalidated)
            await entity_store.clear_contradictions(conn, written.reinstated)
            await stages.mark(conn, key, stages.DONE, fingerprint=fingerprint)
        detail: dict[str, int | str] = {
            "mode": self.graph_mode,
            "nodes": written.nodes,
            "edges": written.edges,
            "invalidated": len(written.invalidated),
            "contradictions": contradictions,
            "reinstated": len(written.reinstated),
        }
        log.info("graph.written", session_id=sid, **detail)
        await self._emit(CreatureName.MANTA, EventType.COMPLETE, sid, **detail)
        return StageOutcome("done", detail)

    # --- what is pending (new sessions, a new extractor version, a new graph version) ---

    async def pending(self, *, limit: int = 200) -> tuple[list[str], list[str]]:
        """Sessions whose extraction, and sessions whose graph write, is not up to date with
        the current extractor / graph version (and not queued, running or dead-lettered)."""
        params = {
            "extract": EXTRACT_STAGE,
            "graph": GRAPH_STAGE,
            "extract_prefix": f"v{self.extractor.version}:{self.extractor.label}:%",
            "graph_prefix": f"v{GRAPH_VERSION}:%",
            "limit": limit,
        }
        async with self.engine.connect() as conn:
            to_extract = (await conn.execute(_PENDING_EXTRACT, params)).scalars().all()
            to_graph: list[str] = []
            if self.graph is not None:
                to_graph = list((await conn.execute(_PENDING_GRAPH, params)).scalars().all())
        return list(to_extract), to_graph


# A finalised session without a completed extraction by this version. Sessions whose stage
# ran with this version but on other input are re-queued by finalisation, not here.
_PENDING_EXTRACT = text(
    """
    SELECT s.session_id FROM sessions s
    LEFT JOIN session_stages st ON st.session_id = s.session_id AND st.stage = :extract
    WHERE s.ended_at IS NOT NULL
      AND (st.session_id IS NULL
           OR (st.status = 'done' AND (st.input_fingerprint IS NULL
                                       OR st.input_fingerprint NOT LIKE :extract_prefix)))
    ORDER BY s.ended_at LIMIT :limit
    """
)
# Extraction done, graph stage never done by this graph version.
_PENDING_GRAPH = text(
    """
    SELECT s.session_id FROM sessions s
    JOIN session_stages ex ON ex.session_id = s.session_id AND ex.stage = :extract
         AND ex.status = 'done'
    LEFT JOIN session_stages g ON g.session_id = s.session_id AND g.stage = :graph
    WHERE g.session_id IS NULL
       OR (g.status = 'done' AND (g.input_fingerprint IS NULL
                                  OR g.input_fingerprint NOT LIKE :graph_prefix))
    ORDER BY s.ended_at LIMIT :limit
    """
)
