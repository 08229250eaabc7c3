"""Response models of the REST API (what /openapi.json documents)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    computed_field,
    field_validator,
)

from her_os_shared.ids import ID_PATTERN, SafeId
from her_os_shared.transcript import EARLIEST_YEAR, reject_lone_surrogates


class EntityRef(BaseModel):
    name: str
    type: str
    tier: Literal["L0", "L1", "L2"]


class ContextItem(BaseModel):
    """A segment found. `timestamp` and `entities` have the design's meaning (epoch seconds,
    `"type:name"` strings); `spoken_at` and `entity_refs` say the same as an ISO time and as
    objects with the entity's tier."""

    text: str
    # the highest tier among the entities the segment mentions (L0 when none)
    tier: Literal["L0", "L1", "L2"]
    source_session: str
    segment_id: str
    spoken_at: datetime
    relevance_score: float
    speaker: str
    entity_refs: list[EntityRef]

    @computed_field
    @property
    def timestamp(self) -> float:
        """When it was said, in seconds since the epoch (the design's form)."""
        at = self.spoken_at
        return (at if at.tzinfo else at.replace(tzinfo=UTC)).timestamp()

    @computed_field
    @property
    def entities(self) -> list[str]:
        """The entities it mentions as `"type:name"` (the design's form)."""
        return [f"{e.type}:{e.name}" for e in self.entity_refs]

    @classmethod
    def from_result(cls, item: Mapping[str, Any]) -> ContextItem:
        """A retrieval result (retrieve.py: `timestamp` a datetime, `entities` objects)."""
        fields = dict(item)
        fields["spoken_at"] = fields.pop("timestamp")
        fields["entity_refs"] = fields.pop("entities")
        return cls.model_validate(fields)


class EntityOut(BaseModel):
    id: int
    type: str
    name: str
    confidence: float
    properties: dict[str, Any]
    sensitivity: Literal["open", "private", "sensitive"]
    first_seen: datetime
    last_seen: datetime
    # sessions with a current mention; 0 = only older extractor versions mentioned it
    episode_count: int
    # when a fact about it was last invalidated by a newer one (None: never)
    contradicted_at: datetime | None
    # memory tier and salience as of the last consolidation (tiers.py)
    tier: Literal["L0", "L1", "L2"]
    salience: float
    low_salience: bool
    contradicted: bool  # a contradiction recent enough to block promotion
    tier_changed_at: datetime | None
    community_id: int | None

    # The design's names for `id` and `type`.
    @computed_field
    @property
    def entity_id(self) -> str:
        """`id` as a string (the design's name and type)."""
        return str(self.id)

    @computed_field
    @property
    def entity_type(self) -> str:
        """`type` (the design's name)."""
        return self.type


class MentionOut(BaseModel):
    session_id: str
    segment_id: str | None
    name: str
    evidence: str
    confidence: float
    properties: dict[str, Any]
    sensitivity: str
    extractor: str
    extractor_version: int
    created_at: datetime
    segment_text: str | None
    speaker: str | None
    spoken_at: datetime | None


class ContradictionOut(BaseModel):
    fact_uuid: str
    fact: str
    predicate: str
    invalid_at: datetime
    invalidated_by: str
    session_id: str
    detected_at: datetime


class EntityDetail(EntityOut):
    mentions: list[MentionOut]
    history_mentions: int  # mentions by older extractor versions, kept as history
    contradictions: list[ContradictionOut]


class FactSource(BaseModel):
    """A segment a fact was said in."""

    session_id: str
    segment_id: str
    speaker: str | None
    text: str | None
    spoken_at: datetime | None


class FactEnd(BaseModel):
    """The fact that ended another ("avoids coffee" ended "likes coffee"); uuid, fact and
    predicate are null when another writer ended it without saying with which fact."""

    uuid: str | None
    fact: str | None
    predicate: str | None
    valid_at: datetime | None


class FactOut(BaseModel):
    uuid: str
    subject: str
    subject_uuid: str
    predicate: str
    object: str
    object_uuid: str
    fact: str
    valid_at: datetime | None
    invalid_at: datetime | None
    created_at: datetime
    expired_at: datetime | None
    episodes: list[str]
    attributes: dict[str, Any]
    sources: list[FactSource]
    # Only with history=true: whether it still held at as_of, and what ended it if not.
    current: bool | None = None
    ended_by: FactEnd | None = None


class GraphNodeOut(BaseModel):
    uuid: str
    name: str
    labels: list[str]
    summary: str
    attributes: dict[str, Any]
    created_at: datetime | None


class GraphEntityResponse(BaseModel):
    entity: EntityOut
    nodes: list[GraphNodeOut]  # the graph nodes of this entity (one, unless graphiti split it)
    neighbours: list[GraphNodeOut]
    facts: list[FactOut]


class StatementSource(BaseModel):
    session_id: str
    segment_id: str | None
    said_at: datetime
    speaker: str
    text: str  # the statement as this source said it
    evidence: str = ""  # the sentence as it was said


class StatementOut(BaseModel):
    """A fact merged from what people said (knowledge/statement_facts.py): the clause in the
    third person, since when, until when, what ended it or kept it, and every source."""

    id: int
    subject: str
    predicate: str  # the verb's lemma with particle and negation ("give up", "not eat")
    object: str
    text: str
    kind: Literal["fact", "plan", "habit", "ended", "opinion"]
    confidence: float
    valid_at: datetime
    invalid_at: datetime | None
    current: bool
    ended_by: StatementSource | None
    kept_by: StatementSource | None  # a plan or promise the same person later carried out
    sources: list[StatementSource]


class StatementInstead(BaseModel):
    text: str
    valid_at: datetime


class ContextStatement(StatementOut):
    """A statement about a person the query names: how many of the query's words it shares,
    and for one that had ended, what was said to hold instead."""

    relevance: int
    instead: list[StatementInstead] = Field(default_factory=list)


class FactPage(BaseModel):
    as_of: datetime
    facts: list[FactOut]
    # what people said about themselves and others, merged by meaning (not in the graph)
    statements: list[StatementOut] = Field(default_factory=list)


class ContextSubject(BaseModel):
    """An entity the query names; `owner` when it was named by "I", "me" or "my"."""

    id: int
    type: str
    name: str
    tier: Literal["L0", "L1", "L2"]
    owner: bool


class ReplacedFact(BaseModel):
    """A fact a newer one ended ("drinks coffee", ended when "drinks tea" began)."""

    uuid: str
    fact: str
    predicate: str
    object: str
    valid_at: datetime | None
    invalid_at: datetime | None


class ContextFact(FactOut):
    """A fact true at as_of about a subject of the query: since when, and what it replaced."""

    since: datetime | None
    replaced: list[ReplacedFact]
    # how many of the query's words (people's names aside) it answers; 0: only who it is about
    relevance: int = 0


class ContextResponse(BaseModel):
    query: str
    as_of: datetime
    hours_back: float | None
    tiers: list[Literal["L0", "L1", "L2"]] | None  # the tier filter, when one was given
    results: list[ContextItem]
    # every leg that ran, with how it went: "ok", "timeout" or "error"
    legs: dict[str, Literal["ok", "timeout", "error"]]
    degraded: list[str]  # the legs that are not "ok" (their results are missing)
    # What is known (query_facts.py): the entities the query names, and the facts true at
    # as_of about them, most relevant first; `facts_status` "off" without a graph.
    about: list[ContextSubject] = []
    facts: list[ContextFact] = []
    facts_status: Literal["ok", "timeout", "error", "off"] = "off"
    # what was said about the people the query names that shares its words (statements,
    # ADR 0017 rule 8), most relevant first; no graph needed
    statements: list[ContextStatement] = []

    @computed_field
    @property
    def total(self) -> int:
        """How many results came back (the design's field)."""
        return len(self.results)


class MentionAt(BaseModel):
    """A segment that mentions an entity."""

    session_id: str
    segment_id: str
    speaker: str
    text: str
    spoken_at: datetime


class ProfileSession(BaseModel):
    """A session that talks about an entity: how many of its segments mention it, when."""

    session_id: str
    mentions: int
    first_at: datetime
    last_at: datetime


class ChangedFact(FactOut):
    """A fact that had ended by as_of; `ended_by` is the fact that ended it."""


class EntityProfile(BaseModel):
    """Who or what an entity is at as_of (profile.py)."""

    entity: EntityOut
    as_of: datetime
    relations: list[ContextFact]  # current facts joining it to a person
    facts: list[ContextFact]  # its other current facts
    changes: list[ChangedFact]  # facts that had ended, newest first
    first_mention: MentionAt | None
    last_mention: MentionAt | None
    sessions: list[ProfileSession]  # the sessions with the most about it
    facts_status: Literal["ok", "error", "off"]
    # what was said about a person (people only), current first, then what ended or was kept
    statements: list[StatementOut] = Field(default_factory=list)


class EntityPage(BaseModel):
    entities: list[EntityOut]
    total: int
    limit: int
    offset: int


class EntityMatch(EntityOut):
    score: float  # cosine similarity of the query to the entity (its name, type, first words)


class EntitySearchPage(BaseModel):
    query: str
    entities: list[EntityMatch]  # best first
    total: int  # entities returned


class IngestResponse(BaseModel):
    session_id: str
    status: Literal["ingested", "up_to_date", "reread", "missing", "invalid_name"]
    lines: int
    segments: int
    skipped: int
    deleted_stale: int
    offset: int
    size: int

    @computed_field
    @property
    def segments_count(self) -> int:
        """`segments` (the design's name): the segments this ingestion read."""
        return self.segments


class Emotion(BaseModel):
    label: str
    score: float | None
    engine: str | None


class SegmentOverlap(BaseModel):
    """Another voice that talked during a segment (the transcript's `overlap`, ADR 0025)."""

    speaker: str
    start: float  # seconds from session start
    end: float


class SegmentOut(BaseModel):
    segment_id: str
    speaker: str
    text: str
    start: float
    end: float
    spoken_at: datetime
    language: str | None
    stt_engine: str
    emotion: Emotion | None
    overlap: list[SegmentOverlap] = Field(
        description="other voices that talked during the segment, each with when (seconds "
        "from session start, within the segment); empty when nobody did"
    )
    pinned: bool
    is_sweep: bool
    replaced_by: str | None


class StageOut(BaseModel):
    stage: str
    stage_version: int
    status: str
    attempts: int
    last_error: str | None
    updated_at: datetime
    completed_at: datetime | None


class SessionOut(BaseModel):
    session_id: str
    device_id: str
    started_at: datetime
    last_spoken_at: datetime | None
    ended_at: datetime | None
    status: Literal["open", "ended"]
    segments_count: int


class SessionDetail(SessionOut):
    segments: list[SegmentOut]
    stages: list[StageOut]


class SessionPage(BaseModel):
    sessions: list[SessionOut]
    total: int
    limit: int
    offset: int


class JobOut(BaseModel):
    id: int
    task_name: str
    status: str
    args: dict[str, Any]
    attempts: int
    scheduled_at: datetime | None
    queueing_lock: str | None
    updated_at: datetime | None


class JobPage(BaseModel):
    jobs: list[JobOut]
    limit: int
    offset: int


class StatsResponse(BaseModel):
    sessions: dict[str, int]
    segments: dict[str, int]
    entities: int
    entity_mentions: int
    ingest: dict[str, Any]
    stages_failed: int
    jobs: dict[str, int]
    keyword_index: KeywordIndexState
    extraction: ExtractionState
    vectors: VectorState
    # Layers the engine is serving without, and why (health.py; /health names them only).
    degraded: dict[str, str] = {}

    # The design's three counts, from the breakdowns above.
    @computed_field
    @property
    def sessions_count(self) -> int:
        """Every session, open or ended (`sessions.total`)."""
        return self.sessions["total"]

    @computed_field
    @property
    def segments_count(self) -> int:
        """Segments in the memory (`segments.active`): a fast-path segment a sweep replaced
        is counted once, as its replacement."""
        return self.segments["active"]

    @computed_field
    @property
    def entities_count(self) -> int:
        """`entities`."""
        return self.entities


class VectorState(BaseModel):
    enabled: bool  # CONTEXT_ENGINE_VECTOR_INDEX_ENABLED
    space: str | None  # the collection of the current embedding model and dimension
    # the space searches use: the current one, or while it fills, the one ready before it
    searching: str | None = None
    status: Literal["building", "ready", "unavailable"] | None  # ready: every segment embedded
    embedded: int  # segments with a vector in that space
    entities_embedded: int = 0  # entities with a vector in that space (entity_embedding.py)


class ExtractionState(BaseModel):
    extractor: str  # "fast@1", "llm@1": the extractor new sessions go through
    graph_backend: Literal["falkordb", "neo4j"] | None  # None: no graph configured
    graph_mode: Literal["llm", "entities"] | None  # add_episode, or our own nodes and edges
    graph_open: bool  # false while the graph server is unreachable (graph jobs retry)


class KeywordIndexState(BaseModel):
    backend: Literal["index", "postgres"]
    ready: bool  # false while (re)building: the keyword leg uses PostgreSQL meanwhile
    documents: int | None  # active segments indexed


class ConsolidationRunOut(BaseModel):
    id: int
    trigger: Literal["schedule", "api"]
    night: str | None  # the local date of a scheduled run
    as_of: datetime
    status: Literal["queued", "running", "done", "failed"]
    entities_total: int
    processed: int
    promoted: int
    demoted: int
    low_salience: int
    communities: int
    error: str | None
    started_at: datetime
    finished_at: datetime | None


class ConsolidationRunPage(BaseModel):
    runs: list[ConsolidationRunOut]
    limit: int
    offset: int


class TierCount(BaseModel):
    count: int
    low_salience: int
    contradicted: int
    mean_salience: float | None


class TierChangeOut(BaseModel):
    entity_id: int
    name: str
    type: str
    from_tier: str
    to_tier: str
    reason: str
    changed_at: datetime
    run_id: int | None


class TierStats(BaseModel):
    total: int
    tiers: dict[Literal["L0", "L1", "L2"], TierCount]
    by_type: dict[str, dict[Literal["L0", "L1", "L2"], int]]
    communities: int
    last_run: ConsolidationRunOut | None
    recent_changes: list[TierChangeOut]


class DailyReflectionOut(BaseModel):
    """GET /v1/daily: the reflection of one local day (daily.py, Reflection.as_dict)."""

    date: str  # YYYY-MM-DD, a local day in CONTEXT_ENGINE_TIMEZONE
    # The design's fields.
    summary: str  # the reflection's prose (the same as `text`)
    people: list[str]  # the people mentioned, most mentioned first
    topics: list[str]  # what came up (topic entities; frequent words before extraction ran)
    promises: list[str]  # the promises made that day (`promises_made` has them whole)
    emotional_arc: str = ""  # how the mood moved through the day; "" when none was recorded
    sessions_count: int
    text: str
    # The structured summary the text is written from: sessions, speakers, people, topics,
    # keywords, decisions, promises {made, kept, open}, emotional_arc (the parts), mood…
    details: dict[str, Any]
    # "deterministic", "llm:<client>", or "deterministic:llm_failed" (the LLM failed)
    generated_by: str
    session_id: str | None  # the memory session it is stored as (None: an empty day)
    created_at: datetime
    updated_at: datetime


class DailyFact(BaseModel):
    """A fact first said that day (day_facts.py)."""

    statement: str  # "Meera lives in Mumbai" (predicates.statement)
    subject: str
    predicate: str  # ours ("lives_in"), or an LLM's own edge name in snake_case
    object: str
    category: str | None = None  # "shoe" for (Rajesh, uses, Hoka)
    valid_at: str | None = None  # ISO: since when it is true (may precede said_at: "last week")
    said_at: str | None = None  # ISO: when it was first said that day
    session_id: str
    segment_id: str | None = None


class DailyChange(DailyFact):
    """A fact of that day that ended an older one: `statement` says both ("Meera moved from
    Pune to Mumbai"), `previous` is the fact it ended (its statement in the past tense)."""

    previous: DailyFact


class DailyStatement(BaseModel):
    """Something said that day about a person (a statement, merged by meaning)."""

    text: str
    subject: str
    kind: str
    valid_at: str | None = None
    said_at: str | None = None
    session_id: str
    segment_id: str | None = None


class DailyStatementEnded(DailyStatement):
    """A statement that day ended ("gave up rowing") or kept (a promise carried out)."""

    ended_by: str
    kept: bool
    ended_at: str | None = None


class DailyPromise(BaseModel):
    id: int
    name: str
    speaker: str | None = None
    first_said_at: str | None = None
    session_id: str | None = None
    fulfilled_at: str | None = None
    fulfilment_evidence: str | None = None


class DailyReflectionPage(DailyReflectionOut):
    """DailyReflectionOut and what happened, structured (all also in `details`)."""

    what_happened: list[str] = Field(default_factory=list)  # the text's first sentences
    facts_new: list[DailyFact] = Field(default_factory=list)
    facts_changed: list[DailyChange] = Field(default_factory=list)
    statements_new: list[DailyStatement] = Field(default_factory=list)
    statements_ended: list[DailyStatementEnded] = Field(default_factory=list)
    promises_made: list[DailyPromise] = Field(default_factory=list)
    promises_kept: list[DailyPromise] = Field(default_factory=list)


class PromiseOut(BaseModel):
    """A promise entity, where it was first said, and whether it was kept (promises.py)."""

    id: int
    name: str
    evidence: str
    speaker: str | None
    first_said_at: datetime
    session_id: str | None
    segment_id: str | None
    last_said_at: datetime
    status: Literal["open", "fulfilled"]
    fulfilled_at: datetime | None
    fulfilled_by: Literal["detected", "manual"] | None
    fulfilment_evidence: str | None
    fulfilment_session_id: str | None
    fulfilment_segment_id: str | None


class PromisePage(BaseModel):
    promises: list[PromiseOut]
    total: int
    limit: int
    offset: int


class EventOut(BaseModel):
    """An observability event as stored (the contract's fields, her_os_shared.events)."""

    schema_version: int
    event_id: str
    timestamp: datetime
    service: str
    process: str
    creature: str
    zone: str
    event_type: str
    session_id: str | None
    data: dict[str, Any]
    reasoning: str | None


class EventPage(BaseModel):
    events: list[EventOut]  # newest first (timestamp, then event_id)
    # "buffer": the chronicler's ring in memory (it held every event of this page, or
    # source=buffer asked for it alone); "db": PostgreSQL (the design's names)
    source: Literal["buffer", "db"]
    limit: int
    offset: int
    next_offset: int | None  # the offset of the next page; null when this is the last

    @computed_field
    @property
    def total(self) -> int:
        """How many events this page holds (the design's field; `next_offset` pages on)."""
        return len(self.events)


# Each item is validated on its own (one bad event does not refuse the others).
EmitEvents = list[Any]
MAX_EMIT_EVENTS = 1000


class EmitRequest(BaseModel):
    """`{"events": [...]}`; the design's bare JSON array is taken too (routes/events.py)."""

    events: EmitEvents = Field(max_length=MAX_EMIT_EVENTS)


class EmitRejection(BaseModel):
    index: int
    error: str


class EmitResponse(BaseModel):
    accepted: int
    rejected: int  # how many were refused (the design's count); `errors` says which and why
    total: int
    errors: list[EmitRejection]


# --- POST /v1/memories (memories.py) ---

MEMORY_MAX_CHARS = 20_000
MEMORY_FUTURE_SLACK = timedelta(minutes=5)  # clock skew between a client and the engine
# The transcript contract's earliest session year (what every store can hold).
MEMORY_EARLIEST = datetime(EARLIEST_YEAR, 1, 1, tzinfo=UTC)
_SAFE_ID_SCHEMA = {"pattern": ID_PATTERN, "maxLength": 128}


def _clean_text(value: str | None) -> str | None:
    if value is None:
        return None
    # PostgreSQL text cannot hold NUL: refused here, not as a poison line at ingestion.
    value = value.strip()
    if not value:
        raise ValueError("must not be blank")
    if "\x00" in value:
        raise ValueError("must not contain a NUL character (\\u0000)")
    return value


class AddMemory(BaseModel):
    """A memory as text, written as a transcript session like speech (memories.py)."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(
        min_length=1,
        max_length=MEMORY_MAX_CHARS,
        description="what to remember; paragraphs (and sentences of a long one) become "
        "segments, as turns of a transcript",
    )
    speaker: str | None = Field(
        default=None,
        min_length=1,
        max_length=128,
        description='who said it (default: the engine\'s owner_name setting, else "owner")',
    )
    at: AwareDatetime | None = Field(
        default=None,
        description="when it was said or happened, ISO 8601 with a timezone (default: now); "
        f"from {EARLIEST_YEAR} to 5 minutes from now",
    )
    session_id: SafeId | None = Field(
        default=None,
        json_schema_extra=_SAFE_ID_SCHEMA,
        description="an existing session to append to (its clock is kept: `at` must not be "
        "before its start), or a new one; default: a new `memory-<UTC time>-<8 hex>`",
    )
    source: SafeId = Field(
        default="api",
        json_schema_extra=_SAFE_ID_SCHEMA,
        description="what sent it, written as the session's `device_id` (e.g. mcp)",
    )

    # Lone surrogates cannot be written as UTF-8 (the transcript contract's rule).
    _unicode = field_validator("text", "speaker", mode="before")(reject_lone_surrogates)
    _cleaned = field_validator("text", "speaker")(_clean_text)

    @field_validator("at")
    @classmethod
    def _in_range(cls, at: datetime | None) -> datetime | None:
        if at is None:
            return None
        try:
            utc = at.astimezone(UTC)
        except OverflowError:  # year 1 east of UTC, year 9999 west of it
            raise ValueError("is out of range") from None
        if utc < MEMORY_EARLIEST:
            raise ValueError(f"must not be before {MEMORY_EARLIEST.isoformat()}")
        if utc > datetime.now(UTC) + MEMORY_FUTURE_SLACK:
            raise ValueError("is more than 5 minutes in the future")
        return at


class MemoryAdded(BaseModel):
    session_id: str = Field(description="the session the memory was written to")
    segment_ids: list[str] = Field(description="its segments, in order")
    spoken_at: datetime = Field(description="when it was said (the request's `at`, or now)")
    ingest: Literal["queued"] = Field(
        description="ingestion was started (the file watcher would also pick the file up); "
        "finalisation, extraction and embedding follow as for any session"
    )
