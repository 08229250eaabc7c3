"""What the routes depend on, typed: each route declares the parts it uses (the database, the
retriever, the graph, the chronicler, ...), never the whole runtime. Every part comes from the
app's runtime (runtime.py, the composition root) once it is ready: before that, 503."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from fastapi import Depends, HTTPException, Path, Request
from fastapi.exceptions import RequestValidationError
from sqlalchemy.ext.asyncio import AsyncEngine

from context_engine.config import Settings
from context_engine.index.entity_vectors import EntityEmbedding
from context_engine.ingest.transcripts import Ingestor
from context_engine.memory.daily import DailyReflector
from context_engine.observe.chronicler import Chronicler
from context_engine.pipeline.drift import StoreChecker
from context_engine.pipeline.jobs import JobQueue
from context_engine.privacy.forget import ForgetQueueFn, Forgetter
from context_engine.runtime import Runtime
from context_engine.search.retrieve import Retriever
from her_os_shared.idempotency import Idempotency
from her_os_shared.ids import ID_PATTERN

if TYPE_CHECKING:
    from context_engine.graph import KnowledgeGraph


def get_runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    if not runtime.ready:
        # Migrations are still running (or PostgreSQL is unreachable): say so plainly.
        raise HTTPException(status_code=503, detail="the context engine is starting")
    return runtime


_Runtime = Annotated[Runtime, Depends(get_runtime)]  # FastAPI resolves it once per request


def _db(runtime: _Runtime) -> AsyncEngine:
    return runtime.db.main


def _settings(runtime: _Runtime) -> Settings:
    return runtime.settings


def _retriever(runtime: _Runtime) -> Retriever:
    return runtime.retriever


def _graph(runtime: _Runtime) -> KnowledgeGraph | None:
    return runtime.graph


def _chronicler(runtime: _Runtime) -> Chronicler:
    return runtime.chronicler


def _jobs(runtime: _Runtime) -> JobQueue:
    return runtime.jobs


def _forgetter(runtime: _Runtime) -> Forgetter:
    return runtime.forgetter


def _forget_queue(runtime: _Runtime) -> ForgetQueueFn | None:
    return runtime.jobs.defer_forget if runtime.jobs_open else None


def _ingestor(runtime: _Runtime) -> Ingestor:
    return runtime.ingestor


def _checker(runtime: _Runtime) -> StoreChecker:
    return runtime.checker


def _reflector(runtime: _Runtime) -> DailyReflector:
    return runtime.reflector


def _entity_vectors(runtime: _Runtime) -> EntityEmbedding | None:
    return runtime.entity_embedding


def _idempotency(runtime: _Runtime) -> Idempotency:
    return runtime.idempotency


def _engine_stats(runtime: _Runtime) -> Callable[[], Awaitable[dict[str, Any]]]:
    return runtime.stats


# PostgreSQL's main pool (API, ingestion, jobs): `async with db.connect() as conn`.
Database = Annotated[AsyncEngine, Depends(_db)]
SettingsDep = Annotated[Settings, Depends(_settings)]
RetrieverDep = Annotated[Retriever, Depends(_retriever)]
# None when no graph is configured. Typed for checkers only: importing the graph at run time
# would load graphiti in every engine, with or without a graph.
if TYPE_CHECKING:
    GraphDep = KnowledgeGraph | None
else:
    GraphDep = Annotated[Any, Depends(_graph)]
ChroniclerDep = Annotated[Chronicler, Depends(_chronicler)]
JobsDep = Annotated[JobQueue, Depends(_jobs)]
ForgetterDep = Annotated[Forgetter, Depends(_forgetter)]
# How a forget request is made durable (a job retries it); None while the queue is not open.
ForgetQueue = Annotated[ForgetQueueFn | None, Depends(_forget_queue)]
IngestorDep = Annotated[Ingestor, Depends(_ingestor)]
CheckerDep = Annotated[StoreChecker, Depends(_checker)]
ReflectorDep = Annotated[DailyReflector, Depends(_reflector)]
# None when the vector index is disabled.
EntityVectors = Annotated[EntityEmbedding | None, Depends(_entity_vectors)]
# Writes run once per Idempotency-Key (her_os_shared.idempotency).
IdempotencyDep = Annotated[Idempotency, Depends(_idempotency)]
# What the whole engine holds and serves without (GET /v1/stats).
EngineStats = Annotated[Callable[[], Awaitable[dict[str, Any]]], Depends(_engine_stats)]
# PostgreSQL's bigint: a larger id or offset is a 422 here, not a database error (500; found
# by schemathesis).
PG_BIGINT_MAX = 2**63 - 1
SessionIdPath = Annotated[
    str, Path(pattern=ID_PATTERN, max_length=128, description="[A-Za-z0-9_-]{1,128}")
]


def as_of_or_now(when: datetime | None) -> datetime:
    """A request's `as_of`: now when not given, UTC when naive."""
    if when is None:
        return datetime.now(UTC)
    return when if when.tzinfo else when.replace(tzinfo=UTC)


T = TypeVar("T")


def invalid_query(param: str, msg: str) -> RequestValidationError:
    """A 422 in FastAPI's own validation-error shape, so clients read every 422 the same way."""
    return RequestValidationError([{"type": "value_error", "loc": ("query", param), "msg": msg}])


def either(name: str, value: T | None, alias: str, alias_value: T | None) -> T | None:
    """A parameter the design names differently (`entity_type` for `type`): either name
    works; both with different values is a 422, not a silent choice."""
    if value is not None and alias_value is not None and value != alias_value:
        raise invalid_query(alias, f"{alias} and {name} are the same parameter; give one")
    return value if value is not None else alias_value
