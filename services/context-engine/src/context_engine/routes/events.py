"""The chronicler's routes (chronicler.py does the work): `POST /v1/events/emit`,
`GET /v1/events` and the live stream `GET /v1/events/stream`.

The design's forms are taken beside ours: a bare JSON array of events to emit, and
`start`/`end`/`source=buffer|db` for the time machine (routes/deps.either).

The stream is on its own router (`stream_router`): it also takes the token as `?token=` or
`?x_internal_token=` (the design's spelling), because a browser's EventSource cannot set
headers (routes/__init__.py). Our dashboard sends the header; the access log redacts both."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Body, Depends, Header, HTTPException, Query, Request
from pydantic import Field
from sse_starlette import EventSourceResponse, ServerSentEvent

from context_engine.observe.chronicler import Chronicler, EventFilter, sse_stream
from context_engine.routes.deps import (
    ChroniclerDep,
    SettingsDep,
    either,
    invalid_query,
)
from context_engine.routes.schemas import (
    MAX_EMIT_EVENTS,
    EmitEvents,
    EmitRequest,
    EmitResponse,
    EventPage,
)
from her_os_shared.creatures import CREATURES, Service
from her_os_shared.events import EventType
from her_os_shared.ids import ID_PATTERN

router = APIRouter(tags=["events"])
stream_router = APIRouter(tags=["events"])


def _warm_chronicler(chronicler: ChroniclerDep) -> Chronicler:
    # the ring is filled from PostgreSQL at start: until then a query would miss events
    if not chronicler.warmed.is_set():
        raise HTTPException(status_code=503, detail="the context engine is starting")
    return chronicler


WarmChronicler = Annotated[Chronicler, Depends(_warm_chronicler)]
CreatureQuery = Annotated[
    str | None, Query(description="comma-separated creature names (default: all)")
]
ServiceQuery = Annotated[str | None, Query(description="comma-separated services (default: all)")]
SinceQuery = Annotated[datetime | None, Query(description="at or after (ISO; naive = UTC)")]
UntilQuery = Annotated[datetime | None, Query(description="before (ISO; naive = UTC)")]
# The design's body is a bare array; ours wraps it. Either, at most MAX_EMIT_EVENTS events.
EmitBody = Annotated[
    Annotated[EmitEvents, Field(max_length=MAX_EMIT_EVENTS)] | EmitRequest,
    Body(description='a JSON array of events, or {"events": [...]}'),
]


def _names(value: str | None, known: set[str], param: str) -> frozenset[str] | None:
    if value is None:
        return None
    names = frozenset(v.strip() for v in value.split(",") if v.strip())
    unknown = sorted(names - known)
    if unknown or not names:
        raise invalid_query(param, f"unknown {param} {', '.join(unknown) or repr(value)}")
    return names


def _utc(when: datetime | None) -> datetime | None:
    return when if when is None or when.tzinfo else when.replace(tzinfo=UTC)


def _filter(
    creature: str | None,
    service: str | None,
    event_type: str | None = None,
    session_id: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> EventFilter:
    since, until = _utc(since), _utc(until)
    if since is not None and until is not None and since >= until:
        raise invalid_query("until", "until must be after since")
    return EventFilter(
        creatures=_names(creature, set(CREATURES), "creature"),
        services=_names(service, {s.value for s in Service}, "service"),
        event_types=_names(event_type, {t.value for t in EventType}, "event_type"),
        session_id=session_id,
        since=since,
        until=until,
    )


@router.post(
    "/events/emit",
    response_model=EmitResponse,
    summary="Record events of other services (each validated on its own)",
)
async def emit_events(chronicler: WarmChronicler, body: EmitBody) -> EmitResponse:
    events = body.events if isinstance(body, EmitRequest) else body
    return EmitResponse.model_validate(chronicler.emit(events))


@router.get(
    "/events",
    response_model=EventPage,
    summary="Recent events (from memory) or a time range (from PostgreSQL), newest first",
)
async def list_events(
    chronicler: WarmChronicler,
    creature: CreatureQuery = None,
    service: ServiceQuery = None,
    event_type: Annotated[
        str | None, Query(description="comma-separated: start, complete, error, metric")
    ] = None,
    session_id: Annotated[str | None, Query(pattern=ID_PATTERN, max_length=128)] = None,
    since: SinceQuery = None,
    until: UntilQuery = None,
    start: Annotated[datetime | None, Query(description="as `since` (the design's name)")] = None,
    end: Annotated[datetime | None, Query(description="as `until` (the design's name)")] = None,
    source: Annotated[
        Literal["buffer", "db"] | None,
        Query(
            description="buffer: the ring in memory alone (recent events); db: PostgreSQL "
            "alone; default: the ring when it holds the whole page, else PostgreSQL"
        ),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> EventPage:
    since = either("since", since, "start", start)
    until = either("until", until, "end", end)
    flt = _filter(creature, service, event_type, session_id, since, until)
    page = await chronicler.query(flt, limit=limit, offset=offset, source=source or "auto")
    return EventPage.model_validate(page)


@stream_router.get(
    "/events/stream",
    summary="Live events as Server-Sent Events (catch-up first, then live)",
    response_class=EventSourceResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": "the event stream"}},
)
async def stream_events(
    request: Request,
    chronicler: WarmChronicler,
    settings: SettingsDep,
    creature: CreatureQuery = None,
    service: ServiceQuery = None,
    last_event_id: Annotated[
        str | None,
        Header(alias="Last-Event-ID", description="resume after this event (EventSource)"),
    ] = None,
    resume_after: Annotated[
        str | None, Query(alias="last_event_id", description="as the Last-Event-ID header")
    ] = None,
    token: Annotated[
        str | None,
        Query(description="the internal token, for clients that cannot set headers"),
    ] = None,  # checked by the router's token dependency; declared here for the docs
    x_internal_token: Annotated[
        str | None, Query(description="as `token` (the design's name for it)")
    ] = None,  # likewise
) -> EventSourceResponse:
    flt = _filter(creature, service)
    return EventSourceResponse(
        sse_stream(
            chronicler,
            flt,
            last_event_id=last_event_id or resume_after,
            client=request.client.host if request.client else None,
        ),
        ping=settings.events_keepalive_s,
        ping_message_factory=lambda: ServerSentEvent(comment="keepalive", sep="\n"),
        sep="\n",
        send_timeout=settings.events_send_timeout_s,
    )
