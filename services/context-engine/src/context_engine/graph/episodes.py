"""The LLM path: graphiti's `add_episode`, one episode per session, with four guards against
graphiti's known failure modes.

1. Cost: one episode per *session* (name `session-{id}`, reference_time = the session's start,
   episode body = "Speaker: text" lines), not per message; extraction prompts get a short
   vocabulary instruction so relation names match the writer's (LIKES/AVOIDS, SPOUSE,
   LIVES_IN...).
2. Structured output that small local models break: the client asks for `json_schema` output
   (graphiti's OpenAIGenericClient against any OpenAI-compatible /v1: Ollama, llama-server,
   vLLM), validates every answer against graphiti's response model, and turns any failure
   (HTTP error, timeout, not JSON, wrong shape) into `GraphLLMError` at once. graphiti's own
   retry loop (4 tries, 5-120 s random waits each) and the SDK's retries are switched off:
   the durable job queue is the one place that retries, with its own backoff. graphiti writes
   an episode's nodes and edges only after every LLM call succeeded, so a failed call leaves
   nothing half-written.
3. Context from the wrong time: the previous episodes graphiti shows the model are chosen here
   (the last sessions that started before this one); graphiti's own choice returns later ones
   too on FalkorDB (see `previous_episodes`).
4. Graph-wide invalidation: graphiti searches the whole group for facts a new fact might
   contradict and lets the model pick any of them. Here that search is limited to facts
   between the same two entities (the facts it already compares for duplicates), and any
   invalidation of a fact outside the new fact's pair is dropped before saving.

A session has one episode: an earlier episode of the same session (from either path) is
removed once the new one is in (KnowledgeGraph.add_episode), so a failing LLM leaves the graph
as it was; facts the new episode restated are kept for it.

After add_episode, the episode's edge names are mapped to our vocabulary (`normalise_edge_names`:
WORKS_FOR → WORKS_AT, the model's name kept in `original_name`) and the no-LLM writer's
supersession runs over the subjects they touched (KnowledgeGraph.add_episode), so both paths
end facts by the same rules (supersede.py), across objects too ("lives in Mumbai" ends "lives
in Pune"), which graphiti's pair-scoped invalidation above never does.
"""

from __future__ import annotations

import json
import time
from contextvars import ContextVar
from datetime import datetime
from typing import TYPE_CHECKING, Any

from graphiti_core import Graphiti
from graphiti_core.edges import EntityEdge
from graphiti_core.llm_client.client import LLMClient
from graphiti_core.llm_client.config import DEFAULT_MAX_TOKENS, LLMConfig, ModelSize
from graphiti_core.llm_client.openai_generic_client import OpenAIGenericClient
from graphiti_core.nodes import EpisodeType
from graphiti_core.prompts.models import Message
from graphiti_core.search.search_config import SearchResults
from graphiti_core.search.search_filters import SearchFilters
from graphiti_core.utils.maintenance import edge_operations
from pydantic import BaseModel, ValidationError

from context_engine.extract.predicates import PREDICATES
from context_engine.graph.base import (
    GraphLLMError,
    GraphUnavailableError,
    GraphWrite,
    InvalidatedFact,
    SessionEpisode,
)
from context_engine.graph.driver import run, unavailable_errors
from context_engine.graph.facts import edge_name
from context_engine.graph.query import at_or_before
from context_engine.graph.store import session_episode_name, session_of_episode_name, utc
from her_os_shared.creatures import engine_llm_creature
from her_os_shared.events import EventType

if TYPE_CHECKING:
    from graphiti_core.driver.driver import GraphDriver

    from context_engine.config import Settings

# --- what graphiti is asked to extract ---


class Person(BaseModel):
    """A human being, named or clearly identified (a speaker, a relative, a friend)."""


class Place(BaseModel):
    """A location: city, country, address, venue, building."""


class Organization(BaseModel):
    """A company, school, team, institution or other group."""


class Event(BaseModel):
    """Something that happens at a time: a meeting, trip, party, appointment."""


class Topic(BaseModel):
    """A thing, activity, food, subject or idea people like, avoid or talk about."""


ENTITY_TYPES: dict[str, type[BaseModel]] = {
    "Person": Person,
    "Place": Place,
    "Organization": Organization,
    "Event": Event,
    "Topic": Topic,
}

# Our entity types that graphiti's ENTITY_TYPES cover, as the annotations name them.
ANNOTATED_TYPES = {
    "person": "Person",
    "place": "Place",
    "organization": "Organization",
    "event": "Event",
    "topic": "Topic",
}
ANNOTATION_LIMIT = 40
ANNOTATION_HEADER = "Entities already found in this conversation (type: name):"

# The relations whose facts end one another (predicates.py): the model is asked for these
# names; others it writes are mapped after the episode (normalise_edge_names).
_TIMELINE_NAMES = ", ".join(
    p.name.upper() for p in PREDICATES.values() if p.group is not None or p.ends
)
EXTRACTION_INSTRUCTIONS = (
    "The episode is a transcript: each line is 'Speaker: words'. 'I', 'me' and 'my' in a "
    "line refer to that line's speaker. Name relations in SCREAMING_SNAKE_CASE; use LIKES or "
    "AVOIDS for preferences, SPOUSE or EX_SPOUSE for marriage, PARTNER or EX_PARTNER for "
    "romantic partners, and a relative's role (SIBLING, PARENT, CHILD...) for family. Where "
    f"one of these fits, use it: {_TIMELINE_NAMES}. A list after the transcript names "
    "entities already found in it: use those names for them; the list itself states no fact."
)

# --- guard 4: invalidation only between the same two entities ---

_PAIR_ONLY: ContextVar[bool] = ContextVar("her_os_pair_only_invalidation", default=False)
_INVALIDATED: ContextVar[list[tuple[EntityEdge, EntityEdge]] | None] = ContextVar(
    "her_os_invalidated_edges", default=None
)
_original_search = edge_operations.search


async def _pair_scoped_search(*args: Any, **kwargs: Any) -> SearchResults:
    """graphiti's `search` as edge_operations calls it. Inside our add_episode, the search for
    invalidation candidates (the one without an endpoint filter) finds nothing: the candidates
    are the same-pair facts the endpoint-filtered duplicate search already found."""
    search_filter = kwargs.get("search_filter")
    if search_filter is None and len(args) > 4:
        search_filter = args[4]
    if (
        _PAIR_ONLY.get()
        and isinstance(search_filter, SearchFilters)
        and search_filter.edge_source_node_uuids is None
        and search_filter.edge_target_node_uuids is None
    ):
        return SearchResults()
    return await _original_search(*args, **kwargs)


def install_pair_scoped_invalidation() -> None:
    """Route edge_operations' search through `_pair_scoped_search` (idempotent; inert outside
    our add_episode)."""
    if edge_operations.search is not _pair_scoped_search:
        edge_operations.search = _pair_scoped_search


install_pair_scoped_invalidation()


def _pair(edge: EntityEdge) -> frozenset[str]:
    return frozenset((edge.source_node_uuid, edge.target_node_uuid))


class HerGraphiti(Graphiti):
    """graphiti with invalidations limited to facts between the same two entities."""

    async def _extract_and_resolve_edges(  # type: ignore[override]
        self, *args: Any, **kwargs: Any
    ) -> tuple[list[EntityEdge], list[EntityEdge], list[EntityEdge]]:
        resolved, invalidated, new = await super()._extract_and_resolve_edges(*args, **kwargs)
        by_pair: dict[frozenset[str], EntityEdge] = {}
        for edge in resolved:
            by_pair.setdefault(_pair(edge), edge)
        kept = [edge for edge in invalidated if _pair(edge) in by_pair]
        record = _INVALIDATED.get()
        if record is not None:
            record.extend((edge, by_pair[_pair(edge)]) for edge in kept)
        return resolved, kept, new


# --- guard 2: one clear error, no hidden retries ---

# graphiti's contradiction check: given a new fact, which existing facts it repeats and which
# it contradicts (EdgeDuplicate: duplicate_facts, contradicted_facts). The one call that
# `contradiction_model` routes (CONTEXT_ENGINE_CONTRADICTION_MODEL).
CONTRADICTION_PROMPT = "dedupe_edges.resolve_edge"


class GraphitiLLM(OpenAIGenericClient):
    """graphiti's OpenAI-compatible client (json_schema output) that fails fast and clearly:
    every failure is a GraphLLMError, every answer is checked against its schema, and no call
    is retried here. Counts its calls; with a recorder each is an event of the model's creature
    (`her_os_shared.creatures.engine_llm_creature`). The contradiction check
    (CONTRADICTION_PROMPT) goes to `contradiction_model` (None: the client's model)."""

    def __init__(
        self,
        config: LLMConfig,
        client: Any,
        max_tokens: int,
        recorder: Any = None,
        contradiction_model: str | None = None,
    ) -> None:
        super().__init__(config=config, client=client, max_tokens=max_tokens)
        self.calls = 0
        self.recorder = recorder  # an EventRecorder, or None
        self.contradiction_model = contradiction_model

    def model_for(self, prompt_name: str | None) -> str:
        """The model a call of this graphiti prompt goes to."""
        if prompt_name == CONTRADICTION_PROMPT and self.contradiction_model:
            return self.contradiction_model
        return self.model or ""

    async def _emit(
        self, event_type: EventType, data: dict[str, Any], reasoning: str, model: str | None = None
    ) -> None:
        if self.recorder is not None:
            model = model or self.model
            await self.recorder.emit(
                engine_llm_creature(model or ""),
                event_type,
                data={"model": model} | data,
                reasoning=reasoning,
            )

    async def _generate_response_with_retry(  # type: ignore[override]
        self,
        messages: list[Message],
        response_model: type[BaseModel] | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        model_size: ModelSize = ModelSize.medium,
        *,
        model: str | None = None,
    ) -> dict[str, Any]:
        overrides = {"model": model} if model is not None else {}
        return await self._generate_response(
            messages, response_model, max_tokens, model_size, **overrides
        )

    async def generate_response(  # type: ignore[override]
        self,
        messages: list[Message],
        response_model: type[BaseModel] | None = None,
        *args: Any,
        **kwargs: Any,
    ) -> dict[str, Any]:
        self.calls += 1
        what = kwargs.get("prompt_name") or getattr(response_model, "__name__", "completion")
        model = self.model_for(kwargs.get("prompt_name"))
        if model != self.model:
            kwargs["model"] = model  # graphiti's generate_response passes it to the request
        await self._emit(EventType.START, {"schema": what}, f"graphiti asks for {what}", model)
        started = time.perf_counter()
        try:
            result = await self._checked(what, messages, response_model, *args, **kwargs)
        except GraphLLMError as exc:
            await self._emit(
                EventType.ERROR, {"schema": what, "error": str(exc)[:300]}, str(exc)[:200], model
            )
            raise
        seconds = round(time.perf_counter() - started, 3)
        await self._emit(
            EventType.COMPLETE,
            {"schema": what, "seconds": seconds},
            f"{what} in {seconds:.1f} s",
            model,
        )
        return result

    async def _checked(
        self,
        what: str,
        messages: list[Message],
        response_model: type[BaseModel] | None,
        *args: Any,
        **kwargs: Any,
    ) -> dict[str, Any]:
        try:
            result = await super().generate_response(messages, response_model, *args, **kwargs)
        except GraphLLMError:
            raise
        except json.JSONDecodeError as exc:
            raise GraphLLMError(f"LLM answer to {what} is not JSON: {exc}") from exc
        except Exception as exc:
            raise GraphLLMError(f"LLM call {what} failed: {type(exc).__name__}: {exc}") from exc
        if response_model is not None:
            try:
                response_model.model_validate(result)
            except ValidationError as exc:
                errors = "; ".join(
                    f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3]
                )
                raise GraphLLMError(
                    f"LLM answer to {what} does not match its schema: {errors}"
                ) from exc
        return result


class NoLLM(LLMClient):
    """Stands in for an LLM when none is configured (graphiti's search needs none; only
    add_episode would call it)."""

    def __init__(self, setting: str) -> None:
        super().__init__(LLMConfig(model="none"))
        self.setting = setting

    async def _generate_response(  # type: ignore[override]
        self, *args: Any, **kwargs: Any
    ) -> dict[str, Any]:
        raise GraphLLMError(f"no LLM configured: set {self.setting} to use add_episode")


def make_llm_client(settings: Settings, recorder: Any = None) -> LLMClient:
    if not settings.llm_base_url:
        return NoLLM(settings.env_name("llm_base_url"))
    from openai import AsyncOpenAI

    client = AsyncOpenAI(
        base_url=settings.llm_base_url,
        api_key=settings.llm_api_key.get_secret_value(),
        timeout=settings.llm_timeout_s,
        max_retries=0,
    )
    config = LLMConfig(
        api_key=settings.llm_api_key.get_secret_value(),
        model=settings.llm_model,
        small_model=settings.llm_model,
        base_url=settings.llm_base_url,
        temperature=0.0,
        max_tokens=settings.llm_max_tokens,
    )
    return GraphitiLLM(
        config,
        client,
        settings.llm_max_tokens,
        recorder,
        contradiction_model=settings.contradiction_model or settings.llm_model,
    )


# --- the episode ---


async def previous_episodes(
    graphiti: HerGraphiti, group_id: str, before: datetime, exclude: list[str]
) -> list[str]:
    """The episodes graphiti shows the model as context: the last few sessions that started
    at or before this one, oldest first. Chosen here because graphiti's own query
    (`valid_at <= $reference_time`) hits FalkorDB's range-index bug (query.at_or_before) and
    would also return sessions that started later."""
    from graphiti_core.search.search_utils import RELEVANT_SCHEMA_LIMIT

    rows = await run(
        graphiti.driver,
        "MATCH (e:Episodic) WHERE e.group_id = $group_id AND e.source = $source "
        f"AND {at_or_before('e.valid_at', '$before')} AND NOT e.uuid IN $exclude "
        "RETURN e.uuid AS uuid, e.valid_at AS valid_at ORDER BY valid_at DESC, uuid LIMIT $n",
        group_id=group_id,
        source=EpisodeType.message.value,
        before=before,
        exclude=exclude,
        n=RELEVANT_SCHEMA_LIMIT,
    )
    return [r["uuid"] for r in reversed(rows)]


def transcript(episode: SessionEpisode) -> str:
    return "\n".join(
        f"{s.speaker}: {' '.join(s.text.split())}" for s in episode.segments if s.text.strip()
    )


def episode_body(episode: SessionEpisode) -> str:
    """The transcript, then the entities her-os's extractor found in it (the design's
    annotations): graphiti's entity prompt sees the names the rest of the memory uses, so
    "Priya" the speaker and "Priya" the wife resolve to one node. Only the types graphiti is
    asked to extract (ENTITY_TYPES) are listed, each once, at most ANNOTATION_LIMIT."""
    lines = transcript(episode)
    if not lines:
        return ""
    notes: dict[tuple[str, str], str] = {}  # (label, folded name) -> the name as first written
    for kind, raw in episode.annotations:
        label, name = ANNOTATED_TYPES.get(kind), " ".join(raw.split())
        if label is not None and name:
            notes.setdefault((label, name.casefold()), f"- {label}: {name}")
        if len(notes) == ANNOTATION_LIMIT:
            break
    if not notes:
        return lines
    listed = "\n".join(notes.values())
    return f"{lines}\n\n{ANNOTATION_HEADER}\n{listed}"


async def add_session_episode(
    graphiti: HerGraphiti,
    group_id: str,
    episode: SessionEpisode,
    replacing: list[str] | None = None,
) -> GraphWrite:
    """graphiti's add_episode for one session. `replacing`: earlier episodes of the session,
    which the caller removes afterwards (they are not shown to the model as context).
    Raises GraphLLMError / GraphUnavailableError; both are retryable."""
    body = episode_body(episode)
    if not body:
        return GraphWrite(episode_uuid="")
    llm = graphiti.llm_client
    calls_before = getattr(llm, "calls", 0)
    previous = await previous_episodes(
        graphiti, group_id, utc(episode.started_at), list(replacing or [])
    )
    invalidated: list[tuple[EntityEdge, EntityEdge]] = []
    pair_token = _PAIR_ONLY.set(True)
    record_token = _INVALIDATED.set(invalidated)
    try:
        results = await graphiti.add_episode(
            name=session_episode_name(episode.session_id),
            episode_body=body,
            source_description=f"her-os session {episode.session_id} (transcript)",
            reference_time=utc(episode.started_at),
            source=EpisodeType.message,
            group_id=group_id,
            entity_types=ENTITY_TYPES,
            custom_extraction_instructions=EXTRACTION_INSTRUCTIONS,
            previous_episode_uuids=previous,
        )
    except (GraphLLMError, GraphUnavailableError):
        raise
    except unavailable_errors() as exc:
        raise GraphUnavailableError(f"graph database unavailable: {exc}") from exc
    except (ValidationError, ValueError, KeyError, IndexError, TypeError) as exc:
        raise GraphLLMError(
            f"graphiti could not use the LLM's answers: {type(exc).__name__}: {exc}"
        ) from exc
    finally:
        _INVALIDATED.reset(record_token)
        _PAIR_ONLY.reset(pair_token)
    names = {n.uuid: n.name for n in results.nodes}
    episode_uuid = results.episode.uuid
    found = await _invalidations(
        graphiti, group_id, episode, episode_uuid, results.edges, invalidated, names
    )
    return GraphWrite(
        episode_uuid=episode_uuid,
        nodes=len(results.nodes),
        edges=len({e.uuid for e in results.edges} - {edge.uuid for edge, _ in invalidated}),
        invalidated=found,
        llm_calls=getattr(llm, "calls", 0) - calls_before,
    )


async def _invalidations(
    graphiti: HerGraphiti,
    group_id: str,
    episode: SessionEpisode,
    episode_uuid: str,
    edges: list[EntityEdge],
    invalidated: list[tuple[EntityEdge, EntityEdge]],
    names: dict[str, str],
) -> list[InvalidatedFact]:
    """Facts this episode ended: existing facts it contradicted, and its own facts that a
    newer fact between the same entities had already ended (an older statement arriving late).
    A fact extracted with its own end date ("used to live in Pune") is not a contradiction."""
    pairs: list[tuple[EntityEdge, str, datetime, str]] = []  # (ended, by, when, by-session)
    for edge, by in invalidated:
        if edge.invalid_at is not None:
            pairs.append((edge, by.uuid, edge.invalid_at, episode.session_id))
    born_ended = [
        e for e in edges if e.invalid_at is not None and e.episodes[:1] == [episode_uuid]
        and e.uuid not in {x.uuid for x, _ in invalidated}
    ]  # fmt: skip
    for edge in born_ended:
        rows = await run(
            graphiti.driver,
            "MATCH (s:Entity)-[e:RELATES_TO]-(t:Entity) WHERE s.uuid = $a AND t.uuid = $b "
            "AND e.group_id = $group_id AND e.valid_at = $when AND e.uuid <> $uuid "
            "RETURN e.uuid AS uuid, e.episodes AS episodes LIMIT 1",
            a=edge.source_node_uuid,
            b=edge.target_node_uuid,
            group_id=group_id,
            when=edge.invalid_at,
            uuid=edge.uuid,
        )
        if rows and edge.invalid_at is not None:
            by_session = await _session_of(graphiti, (rows[0].get("episodes") or [""])[0])
            pairs.append((edge, rows[0]["uuid"], edge.invalid_at, by_session))
    out = []
    for edge, by, when, by_session in pairs:
        for uuid in (edge.source_node_uuid, edge.target_node_uuid):
            if uuid not in names:
                rows = await run(
                    graphiti.driver,
                    "MATCH (n:Entity {uuid: $uuid}) RETURN n.name AS name",
                    uuid=uuid,
                )
                names[uuid] = rows[0]["name"] if rows else ""
        session = (
            episode.session_id
            if edge.episodes[:1] == [episode_uuid]
            else await _session_of(graphiti, (edge.episodes or [""])[0])
        )
        out.append(
            InvalidatedFact(
                fact_uuid=edge.uuid,
                fact=edge.fact,
                predicate=edge_name(edge.name),
                subject=names.get(edge.source_node_uuid, ""),
                object=names.get(edge.target_node_uuid, ""),
                invalid_at=utc(when),
                invalidated_by=by,
                session_id=session,
                subject_uuid=edge.source_node_uuid,
                object_uuid=edge.target_node_uuid,
                invalidated_by_session=by_session,
            )
        )
    return out


async def _session_of(graphiti: HerGraphiti, episode_uuid: str) -> str:
    if not episode_uuid:
        return ""
    rows = await run(
        graphiti.driver, "MATCH (e:Episodic {uuid: $uuid}) RETURN e.name AS name", uuid=episode_uuid
    )
    return (session_of_episode_name(rows[0].get("name")) if rows else None) or ""


async def normalise_edge_names(
    driver: GraphDriver, group_id: str, episode_uuid: str
) -> list[tuple[str, str, str]]:
    """Rename the episode's edges to our vocabulary (predicates.normalise, upper-case as the
    writer's: WORKS_FOR → WORKS_AT, lives_in → LIVES_IN), keeping the model's name in
    `original_name`. Returns the episode's facts as (source uuid, target uuid, edge name), for
    supersession."""
    rows = await run(
        driver,
        "MATCH (s:Entity)-[e:RELATES_TO]->(t:Entity) "
        "WHERE e.group_id = $group_id AND $episode IN e.episodes "
        "RETURN e.uuid AS uuid, e.name AS name, s.uuid AS source, t.uuid AS target",
        group_id=group_id,
        episode=episode_uuid,
    )
    renames = [
        {"uuid": r["uuid"], "name": edge_name(r["name"] or ""), "original": r["name"]}
        for r in rows
        if edge_name(r["name"] or "") != r["name"]
    ]
    if renames:
        await run(
            driver,
            """
            UNWIND $rows AS row
            MATCH (:Entity)-[e:RELATES_TO {uuid: row.uuid}]->(:Entity)
            SET e.name = row.name, e.original_name = coalesce(e.original_name, row.original)
            """,
            rows=renames,
        )
    return [(r["source"], r["target"], edge_name(r["name"] or "")) for r in rows]
