"""Dependencies shared by the routes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, TypeVar

from fastapi import Depends, HTTPException, Path, Request
from fastapi.exceptions import RequestValidationError

from context_engine.runtime import Runtime
from her_os_shared.ids import ID_PATTERN


def get_runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    if not runtime.ready:
        # Migrations are still running (or PostgreSQL is unreachable): say so plainly.
        raise HTTPException(status_code=503, detail="the context engine is starting")
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
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
