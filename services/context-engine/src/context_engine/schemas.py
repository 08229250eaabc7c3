"""Response models of the REST API (what /openapi.json documents)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel


class EntityRef(BaseModel):
    name: str
    type: str


class ContextItem(BaseModel):
    text: str
    source_session: str
    segment_id: str
    timestamp: datetime
    relevance_score: float
    speaker: str
    entities: list[EntityRef]


class ContextResponse(BaseModel):
    query: str
    as_of: datetime
    hours_back: float | None
    results: list[ContextItem]
    legs: list[str]
    degraded: list[str]


class EntityOut(BaseModel):
    id: int
    type: str
    name: str
    confidence: float
    properties: dict[str, Any]
    first_seen: datetime
    last_seen: datetime
    episode_count: int


class EntityPage(BaseModel):
    entities: list[EntityOut]
    total: int
    limit: int
    offset: int


class IngestResponse(BaseModel):
    session_id: str
    status: Literal["ingested", "up_to_date", "reread", "missing", "invalid_name"]
    lines: int
    segments: int
    skipped: int
    deleted_stale: int
    offset: int
    size: int


class Emotion(BaseModel):
    label: str
    score: float | None
    engine: str | None


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


class KeywordIndexState(BaseModel):
    backend: Literal["index", "postgres"]
    ready: bool  # false while (re)building: the keyword leg uses PostgreSQL meanwhile
    documents: int | None  # active segments indexed
