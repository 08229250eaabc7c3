"""What the MCP tools return: typed, bounded (limits.py) views of the REST answers.

Field names follow graphiti's MCP server where the meaning is the same (a fact's `uuid`,
`name`, `fact`, `source_node_uuid`, `target_node_uuid`, `valid_at`, `invalid_at`; a node's
`uuid`, `name`, `labels`, `summary`), beside her-os's own (ADR 0026).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from context_engine.mcp.limits import MAX_FACT_SOURCES, MAX_ITEMS, Bounded, clip

Json = Mapping[str, Any]
Tier = Literal["L0", "L1", "L2"]


# --- memories -----------------------------------------------------------------------------


class MemoryHit(BaseModel):
    """Something said: one transcript segment."""

    text: str
    speaker: str = Field(description="who said it (a name, or a label such as SPEAKER_00)")
    spoken_at: datetime = Field(description="when it was said")
    session_id: str = Field(description="the conversation (episode) it belongs to")
    segment_id: str
    tier: Tier = Field(description="memory tier: L0 episode, L1 validated fact, L2 pattern")
    score: float = Field(description="relevance, higher is better")
    entities: list[str] = Field(description='entities it mentions, as "type:name"')

    @classmethod
    def from_rest(cls, item: Json) -> MemoryHit:
        return cls(
            text=clip(item["text"]) or "",
            speaker=item["speaker"],
            spoken_at=item["spoken_at"],
            session_id=item["source_session"],
            segment_id=item["segment_id"],
            tier=item["tier"],
            score=item["relevance_score"],
            entities=list(item.get("entities", []))[:MAX_ITEMS],
        )


class Source(BaseModel):
    """A segment a fact was said in."""

    session_id: str
    segment_id: str | None
    speaker: str | None
    text: str | None
    spoken_at: datetime | None

    @classmethod
    def from_rest(cls, item: Json) -> Source:
        return cls(
            session_id=item["session_id"],
            segment_id=item.get("segment_id"),
            speaker=item.get("speaker"),
            text=clip(item.get("text")),
            spoken_at=item.get("spoken_at"),
        )


class Fact(BaseModel):
    """A fact of the knowledge graph (graphiti's edge), true from valid_at until invalid_at."""

    uuid: str
    name: str = Field(description="the relation (graphiti's edge name): LIVES_IN, LIKES, …")
    fact: str = Field(description="the fact as a sentence")
    subject: str
    object: str
    source_node_uuid: str
    target_node_uuid: str
    valid_at: datetime | None = Field(description="when it became true")
    invalid_at: datetime | None = Field(description="when it stopped being true (null: holds)")
    created_at: datetime | None = None
    current: bool | None = Field(
        default=None, description="whether it held at the time asked (null: not asked)"
    )
    ended_by: str | None = Field(default=None, description="the newer fact that ended it")
    replaced: list[str] = Field(default_factory=list, description="older facts it ended")
    sources: list[Source] = Field(description="where it was said (the first few)")

    @classmethod
    def from_rest(cls, item: Json) -> Fact:
        ended = item.get("ended_by") or {}
        return cls(
            uuid=item["uuid"],
            name=item["predicate"],
            fact=clip(item["fact"]) or "",
            subject=item["subject"],
            object=item["object"],
            source_node_uuid=item["subject_uuid"],
            target_node_uuid=item["object_uuid"],
            valid_at=item.get("valid_at"),
            invalid_at=item.get("invalid_at"),
            created_at=item.get("created_at"),
            current=item.get("current"),
            ended_by=clip(ended.get("fact")),
            replaced=[clip(r["fact"]) or "" for r in item.get("replaced", [])][:MAX_ITEMS],
            sources=[Source.from_rest(s) for s in item.get("sources", [])[:MAX_FACT_SOURCES]],
        )


class Subject(BaseModel):
    """An entity a query names; `owner` when it was named by "I", "me" or "my"."""

    entity_id: int
    name: str
    type: str
    owner: bool


class SearchMemoryResult(Bounded):
    message: str
    query: str
    as_of: datetime
    results: list[MemoryHit] = Field(description="what was said, best first")
    facts: list[Fact] = Field(description="facts true at as_of about what the query names")
    about: list[Subject] = Field(description="the entities the query names")
    facts_status: str = Field(description="ok, timeout, error, or off (no knowledge graph)")
    degraded: list[str] = Field(description="search legs that failed (their results missing)")

    @classmethod
    def from_rest(cls, body: Json) -> SearchMemoryResult:
        results = [MemoryHit.from_rest(r) for r in body["results"][:MAX_ITEMS]]
        facts = [Fact.from_rest(f) for f in body.get("facts", [])[:MAX_ITEMS]]
        return cls(
            message=f"{len(results)} memories, {len(facts)} facts",
            query=body["query"],
            as_of=body["as_of"],
            results=results,
            facts=facts,
            about=[
                Subject(entity_id=s["id"], name=s["name"], type=s["type"], owner=s["owner"])
                for s in body.get("about", [])[:MAX_ITEMS]
            ],
            facts_status=body.get("facts_status", "off"),
            degraded=list(body.get("degraded", [])),
        )


class SaidFact(BaseModel):
    """What someone said about a person, merged by meaning (a statement: "Rosa keeps bees on
    their roof"), true from valid_at until invalid_at; a plan holds from its date."""

    subject: str
    text: str = Field(description="the statement, in the third person with names")
    kind: Literal["fact", "plan", "habit", "ended", "opinion"]
    valid_at: datetime
    invalid_at: datetime | None
    current: bool
    ended_by: str | None = Field(default=None, description="what was said that ended it")
    kept_by: str | None = Field(default=None, description="the act that kept a plan")
    sources: list[Source] = Field(description="where it was said (the first few)")

    @classmethod
    def from_rest(cls, item: Json) -> SaidFact:
        def text_of(x: Json | None) -> str | None:
            return clip(x.get("text")) if x else None

        return cls(
            subject=item["subject"],
            text=clip(item["text"]) or "",
            kind=item["kind"],
            valid_at=item["valid_at"],
            invalid_at=item.get("invalid_at"),
            current=item["current"],
            ended_by=text_of(item.get("ended_by")),
            kept_by=text_of(item.get("kept_by")),
            sources=[
                Source.from_rest({**s, "spoken_at": s.get("said_at")})
                for s in item.get("sources", [])[:MAX_FACT_SOURCES]
            ],
        )


class FactsResult(Bounded):
    message: str
    as_of: datetime
    facts: list[Fact]
    statements: list[SaidFact] = Field(
        default_factory=list, description="what people said about themselves and others"
    )


# --- entities -----------------------------------------------------------------------------


class Node(BaseModel):
    """An entity (graphiti's node): a person, place, organization, topic, promise, …"""

    entity_id: int = Field(description="the id other tools take (get_entity_profile, …)")
    uuid: str = Field(description="entity_id as a string (graphiti's field)")
    name: str
    type: str
    labels: list[str] = Field(description="graphiti's labels: the type, capitalised")
    summary: str = Field(description="what the memory holds about it, in one line")
    tier: Tier
    first_seen: datetime
    last_seen: datetime
    episode_count: int = Field(description="sessions that mention it")
    score: float | None = Field(default=None, description="similarity to the query (search)")

    @classmethod
    def from_rest(cls, item: Json) -> Node:
        sessions = item["episode_count"]
        last = str(item["last_seen"])[:10]
        return cls(
            entity_id=item["id"],
            uuid=str(item["id"]),
            name=clip(item["name"]) or "",
            type=item["type"],
            labels=[str(item["type"]).capitalize()],
            summary=(
                f"{item['type']} {item['name']!r}, mentioned in {sessions} "
                f"session{'s' if sessions != 1 else ''}, last on {last}, tier {item['tier']}"
            ),
            tier=item["tier"],
            first_seen=item["first_seen"],
            last_seen=item["last_seen"],
            episode_count=sessions,
            score=item.get("score"),
        )


class NodesResult(Bounded):
    message: str
    nodes: list[Node]
    total: int = Field(description="how many match: all pages (list_entities), or found")
    next_cursor: str | None = Field(
        default=None, description="pass as `cursor` for the next page; null on the last"
    )


class Mention(BaseModel):
    session_id: str
    segment_id: str
    speaker: str
    text: str
    spoken_at: datetime

    @classmethod
    def from_rest(cls, item: Json | None) -> Mention | None:
        if item is None:
            return None
        return cls(
            session_id=item["session_id"],
            segment_id=item["segment_id"],
            speaker=item["speaker"],
            text=clip(item["text"]) or "",
            spoken_at=item["spoken_at"],
        )


class ProfileSession(BaseModel):
    session_id: str
    mentions: int
    first_at: datetime
    last_at: datetime


class ProfileResult(Bounded):
    message: str
    entity: Node
    as_of: datetime
    relations: list[Fact] = Field(description="current facts joining it to a person")
    facts: list[Fact] = Field(description="its other current facts")
    changes: list[Fact] = Field(description="facts that had ended by as_of, newest first")
    first_mention: Mention | None
    last_mention: Mention | None
    sessions: list[ProfileSession] = Field(description="sessions that talk most about it")
    facts_status: str = Field(description="ok, error, or off (no knowledge graph)")

    @classmethod
    def from_rest(cls, body: Json) -> ProfileResult:
        entity = Node.from_rest(body["entity"])
        relations = [Fact.from_rest(f) for f in body["relations"][:MAX_ITEMS]]
        facts = [Fact.from_rest(f) for f in body["facts"][:MAX_ITEMS]]
        return cls(
            message=f"{entity.type} {entity.name}: {len(relations)} relations, {len(facts)} facts",
            entity=entity,
            as_of=body["as_of"],
            relations=relations,
            facts=facts,
            changes=[Fact.from_rest(f) for f in body["changes"][:MAX_ITEMS]],
            first_mention=Mention.from_rest(body.get("first_mention")),
            last_mention=Mention.from_rest(body.get("last_mention")),
            sessions=[ProfileSession.model_validate(s) for s in body["sessions"][:MAX_ITEMS]],
            facts_status=body["facts_status"],
        )


# --- sessions (graphiti's episodes) -------------------------------------------------------


class Episode(BaseModel):
    """A conversation: one transcript session."""

    session_id: str
    uuid: str = Field(description="session_id (graphiti's field)")
    device_id: str = Field(description="what recorded it (mcp: added by an MCP client)")
    started_at: datetime
    last_spoken_at: datetime | None
    ended_at: datetime | None
    status: str = Field(description="open (still going) or ended")
    segments_count: int

    @classmethod
    def from_rest(cls, item: Json) -> Episode:
        return cls(
            session_id=item["session_id"],
            uuid=item["session_id"],
            device_id=item["device_id"],
            started_at=item["started_at"],
            last_spoken_at=item.get("last_spoken_at"),
            ended_at=item.get("ended_at"),
            status=item["status"],
            segments_count=item["segments_count"],
        )


class EpisodesResult(Bounded):
    message: str
    episodes: list[Episode] = Field(description="newest first")
    total: int


class Line(BaseModel):
    """One turn of a transcript."""

    segment_id: str
    speaker: str
    text: str
    spoken_at: datetime
    start: float = Field(description="seconds from the session's start")
    end: float


class EpisodeResult(Bounded):
    message: str
    episode: Episode
    segments: list[Line] = Field(description="in the order they were said")
    offset: int
    next_offset: int | None = Field(
        description="pass as `offset` for the rest of the transcript; null at its end"
    )


class AddMemoryResult(BaseModel):
    message: str
    session_id: str = Field(
        description="the session it was written to (forget it with delete_episode)"
    )
    segment_ids: list[str]
    spoken_at: datetime
    ingest: str = Field(description="queued: searchable once ingested, within seconds")


class ForgetResult(BaseModel):
    message: str
    request_id: int
    kind: str = Field(description="session, entity or person")
    status: str = Field(description="done, or pending (a store is not done yet; it is retried)")
    stores: dict[str, str] = Field(description="each store and its status")

    @classmethod
    def from_rest(cls, body: Json, what: str) -> ForgetResult:
        done = body["status"] == "done"
        stores = {
            name: str(state.get("status", "?")) if isinstance(state, Mapping) else str(state)
            for name, state in body.get("stores", {}).items()
        }
        return cls(
            message=f"forgot {what} everywhere"
            if done
            else f"forgetting {what}: some stores are not done yet and are retried",
            request_id=body["request_id"],
            kind=body["kind"],
            status=body["status"],
            stores=stores,
        )


# --- reflection, promises, status ---------------------------------------------------------


class Reflection(Bounded):
    date: str = Field(description="YYYY-MM-DD, a local day")
    text: str = Field(description="the reflection, in prose")
    what_happened: list[str] = Field(description="the day's changes, as sentences")
    facts_new: list[str] = Field(description="facts first said that day")
    facts_changed: list[str] = Field(description="facts of that day that ended older ones")
    people: list[str]
    topics: list[str]
    promises_made: list[str]
    promises_kept: list[str]
    emotional_arc: str
    sessions_count: int
    generated_by: str = Field(description="deterministic, or llm:<model client>")

    @classmethod
    def from_rest(cls, body: Json) -> Reflection:
        def names(items: list[Any]) -> list[str]:
            return [clip(str(i)) or "" for i in items[:MAX_ITEMS]]

        return cls(
            date=body["date"],
            text=clip(body["text"]) or "",
            what_happened=names(body.get("what_happened", [])),
            facts_new=names([f["statement"] for f in body.get("facts_new", [])]),
            facts_changed=names([f["statement"] for f in body.get("facts_changed", [])]),
            people=names(body.get("people", [])),
            topics=names(body.get("topics", [])),
            promises_made=names([p["name"] for p in body.get("promises_made", [])]),
            promises_kept=names([p["name"] for p in body.get("promises_kept", [])]),
            emotional_arc=clip(body.get("emotional_arc", "")) or "",
            sessions_count=body["sessions_count"],
            generated_by=body["generated_by"],
        )


class Promise(BaseModel):
    entity_id: int
    promise: str
    evidence: str = Field(description="the words it was made in")
    speaker: str | None
    first_said_at: datetime
    session_id: str | None
    status: str

    @classmethod
    def from_rest(cls, item: Json) -> Promise:
        return cls(
            entity_id=item["id"],
            promise=clip(item["name"]) or "",
            evidence=clip(item["evidence"]) or "",
            speaker=item.get("speaker"),
            first_said_at=item["first_said_at"],
            session_id=item.get("session_id"),
            status=item["status"],
        )


class PromisesResult(Bounded):
    message: str
    promises: list[Promise] = Field(description="most recently made first")
    total: int


class StatusResult(BaseModel):
    status: str = Field(description="ok, degraded or unavailable")
    message: str
    read_only: bool = Field(description="whether this server offers the writing tools")
    sessions: int | None = None
    segments: int | None = None
    entities: int | None = None
    extractor: str | None = None
    knowledge_graph: bool | None = Field(default=None, description="a graph is configured")
    vectors: str | None = Field(default=None, description="the vector index: ready, building…")
    degraded: dict[str, str] = Field(default_factory=dict, description="layers down, and why")
