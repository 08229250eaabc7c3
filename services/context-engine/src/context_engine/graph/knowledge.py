"""`KnowledgeGraph`: the one object the engine holds for the graph.

    graph = KnowledgeGraph(settings)          # validates settings; no connection yet
    await graph.open()                        # driver, indices (idempotent)
    await graph.write_extraction(episode, extraction, "fast@1")   # no LLM
    await graph.add_episode(episode)          # graphiti + LLM (settings.llm_base_url)
    await graph.neighbourhood(uuid); await graph.facts_as_of(when); await graph.search("...")
    await graph.close()

Writes (write_extraction, add_episode, forget_session) run one at a time per KnowledgeGraph:
supersession reads a subject's timelines and then writes them, which must not interleave.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from contextlib import suppress
from datetime import datetime
from typing import TYPE_CHECKING, Any

from context_engine.graph.base import (
    Fact,
    GraphLLMError,
    GraphNode,
    GraphUnavailableError,
    GraphWrite,
    Neighbourhood,
    SessionEpisode,
)
from context_engine.graph.driver import build_driver, run, unavailable_errors, validate_settings
from context_engine.graph.episodes import (
    HerGraphiti,
    add_session_episode,
    make_llm_client,
    normalise_edge_names,
)
from context_engine.graph.query import GraphQueries
from context_engine.graph.store import all_session_episodes, forget_text, session_episodes
from context_engine.graph.writer import GraphWriter, merge_writes
from her_os_shared.logging import get_logger

if TYPE_CHECKING:
    from graphiti_core.driver.driver import GraphDriver
    from graphiti_core.llm_client import LLMClient as GraphitiLLMClient

    from context_engine.config import Settings
    from context_engine.embed.base import Embedder
    from context_engine.extract.base import Extraction

log = get_logger(__name__)


class KnowledgeGraph:
    def __init__(
        self,
        settings: Settings,
        *,
        embedder: Embedder | None = None,
        llm: GraphitiLLMClient | None = None,
        recorder: Any = None,
    ) -> None:
        """Raises GraphConfigError (naming the variable) when the settings cannot work.
        The engine's runtime passes the embedder and graphiti's LLM client it built (shared
        and observed); a graph made on its own (tests, benchmarks) builds and closes its own
        from the settings. `recorder` (an EventRecorder) makes each of graphiti's LLM calls an
        event."""
        validate_settings(settings)
        self.settings = settings
        self.recorder = recorder
        self.group_id = settings.graph_group_id
        self._embedder = embedder
        self._own_embedder = embedder is None
        self._llm = llm
        self._driver: GraphDriver | None = None
        self._graphiti: HerGraphiti | None = None
        self._writer: GraphWriter | None = None
        self._queries: GraphQueries | None = None
        self._write_lock = asyncio.Lock()

    @property
    def opened(self) -> bool:
        return self._driver is not None

    @property
    def graphiti(self) -> HerGraphiti:
        """graphiti itself, on our driver, embedder and reranker (for what this class does
        not wrap)."""
        if self._graphiti is None:
            raise RuntimeError("KnowledgeGraph is not open")
        return self._graphiti

    async def open(self) -> None:
        """Connect and build graphiti's indices and constraints (idempotent). Raises
        GraphUnavailableError when the database does not answer."""
        if self._driver is not None:
            return
        from context_engine.embed import make_embedder
        from context_engine.embed.graphiti import EmbeddingReranker, GraphitiEmbedder

        if self._embedder is None:
            self._embedder = make_embedder(self.settings)
        embedder = self._embedder
        unavailable = f"graph database at {self.settings.env_name('graph_url')} unavailable"
        try:
            # In a worker thread: falkordb's client probes the server synchronously when it is
            # constructed (it would block the event loop), and graphiti's drivers, built
            # outside a running loop, do not start index builds of their own.
            driver = await asyncio.to_thread(build_driver, self.settings)
        except unavailable_errors() as exc:
            raise GraphUnavailableError(f"{unavailable}: {type(exc).__name__}: {exc}") from exc
        try:
            await driver.build_indices_and_constraints()
        except unavailable_errors() as exc:
            await self._close_driver(driver)
            raise GraphUnavailableError(f"{unavailable}: {type(exc).__name__}: {exc}") from exc
        except BaseException:
            await self._close_driver(driver)
            raise
        graphiti_embedder = GraphitiEmbedder(embedder)
        self._graphiti = HerGraphiti(
            graph_driver=driver,
            llm_client=self._llm or make_llm_client(self.settings, self.recorder),
            embedder=graphiti_embedder,
            cross_encoder=EmbeddingReranker(embedder),
            max_coroutines=4,
        )
        self._writer = GraphWriter(driver, self.group_id, embedder, graphiti_embedder)
        self._queries = GraphQueries(driver, self.group_id, self._graphiti, embedder)
        self._driver = driver
        log.info(
            "graph.opened",
            backend=self.settings.graph_backend,
            group_id=self.group_id,
            embedder=embedder.name,
            llm=bool(self.settings.llm_base_url),
        )

    @staticmethod
    async def _close_driver(driver: GraphDriver) -> None:
        with suppress(Exception):
            await driver.close()

    async def close(self) -> None:
        driver, self._driver = self._driver, None
        self._graphiti = self._writer = self._queries = None
        if driver is not None:
            await self._close_driver(driver)
        if self._own_embedder and self._embedder is not None:
            await self._embedder.close()
            self._embedder = None

    async def healthy(self) -> bool:
        """Whether the graph database answers a trivial query within health_timeout_s."""
        if self._driver is None:
            return False
        try:
            await asyncio.wait_for(
                run(self._driver, "MATCH (n:Episodic) RETURN n.uuid AS uuid LIMIT 1"),
                self.settings.health_timeout_s,
            )
        except Exception:
            return False
        return True

    def _ready(self) -> tuple[GraphWriter, GraphQueries]:
        if self._writer is None or self._queries is None:
            raise RuntimeError("KnowledgeGraph is not open: await open() first")
        return self._writer, self._queries

    # --- writing ---

    async def write_extraction(
        self, episode: SessionEpisode, extraction: Extraction, extractor_label: str
    ) -> GraphWrite:
        """The no-LLM path (writer.py): the session's episode, entities and relations as
        graphiti nodes and edges, with supersession (supersede.py). Idempotent per session."""
        writer, _ = self._ready()
        async with self._write_lock:
            return await writer.write(episode, extraction, extractor_label)

    async def add_episode(self, episode: SessionEpisode) -> GraphWrite:
        """The LLM path (episodes.py): graphiti's add_episode for the session, replacing any
        earlier episode of it (from either path); then its edge names mapped to our
        vocabulary and the writer's supersession run over the subjects it touched, so the
        current truth is the same as without an LLM. Raises GraphLLMError when the LLM fails
        (retryable; the graph is left as it was)."""
        writer, _ = self._ready()
        if not self.settings.llm_base_url:  # before anything of the session is touched
            raise GraphLLMError(
                f"no LLM configured: set {self.settings.env_name('llm_base_url')} to use "
                "add_episode (write_extraction needs none)"
            )
        async with self._write_lock:
            # The session's earlier episode goes only once the new one is in: if the LLM
            # fails, the graph keeps what it had. Facts the new episode restates survive the
            # removal (they list the new episode too).
            earlier = await session_episodes(
                self.graphiti.driver, self.group_id, episode.session_id
            )
            result = await add_session_episode(
                self.graphiti, self.group_id, episode, replacing=earlier
            )
            touched = (
                await normalise_edge_names(self.graphiti.driver, self.group_id, result.episode_uuid)
                if result.episode_uuid
                else []
            )
            removed = await writer.replace_session_episodes(
                episode.session_id, keep=result.episode_uuid or None
            )
            if earlier and result.invalidated:  # facts of the earlier episode are gone
                alive = {
                    r["uuid"]
                    for r in await run(
                        self.graphiti.driver,
                        "MATCH ()-[e:RELATES_TO]->() WHERE e.uuid IN $uuids RETURN e.uuid AS uuid",
                        uuids=[f.fact_uuid for f in result.invalidated],
                    )
                }
                result.invalidated = [f for f in result.invalidated if f.fact_uuid in alive]
            merge_writes(result, removed)
            if touched:
                merge_writes(result, await writer.supersede_facts(touched))
            return result

    async def forget_session(self, session_id: str) -> GraphWrite:
        """Remove a session from the graph (its episode, its facts, the mentions, nodes only
        it referred to); facts only its facts had ended become valid again."""
        writer, _ = self._ready()
        async with self._write_lock:
            return await writer.forget(session_id)

    async def session_episode_index(self) -> dict[str, list[str]]:
        """Session id → its episode uuids, for every session episode in the group."""
        if self._driver is None:
            raise GraphUnavailableError("the graph is not open")
        return await all_session_episodes(self._driver, self.group_id)

    async def forget_text(
        self, needles: Sequence[str], matches: Callable[[str], bool], session_ids: Sequence[str]
    ) -> dict[str, int]:
        """Remove what names a forgotten target anywhere in the graph (forget.py): entity
        nodes, facts, episodes and communities whose text `matches`, summaries blanked, and
        facts still attributed to `session_ids` (store.forget_text)."""
        if self._driver is None:
            raise GraphUnavailableError("the graph is not open")
        async with self._write_lock:
            return await forget_text(self._driver, self.group_id, needles, matches, session_ids)

    # --- reading (query.py) ---

    async def find_entity_nodes(
        self, name: str, type: str | None = None, limit: int = 20
    ) -> list[GraphNode]:
        return await self._ready()[1].find_entity_nodes(name, type, limit)

    async def get_node(self, node_uuid: str) -> GraphNode | None:
        return await self._ready()[1].get_node(node_uuid)

    async def neighbourhood(
        self, node_uuid: str, depth: int = 1, limit: int = 500
    ) -> Neighbourhood | None:
        return await self._ready()[1].neighbourhood(node_uuid, depth, limit)

    async def facts_as_of(
        self,
        as_of: datetime,
        subject: str | None = None,
        *,
        entity_uuid: str | None = None,
        known_at: datetime | None = None,
        limit: int = 100,
        collapse: bool = True,
        entity_uuids: Sequence[str] | None = None,
        history: bool = False,
    ) -> list[Fact]:
        return await self._ready()[1].facts_as_of(
            as_of,
            subject,
            entity_uuid=entity_uuid,
            known_at=known_at,
            limit=limit,
            collapse=collapse,
            entity_uuids=entity_uuids,
            history=history,
        )

    async def search(
        self, query: str, limit: int = 10, as_of: datetime | None = None
    ) -> list[Fact]:
        return await self._ready()[1].search(query, limit, as_of)
