"""A test double of the context engine's chronicler API, for developing the Aquarium without
the engine: the same routes and shapes as the contract (docs/api.md, issue 8), events in
memory, nothing else. It is never the product: the browser tests run the real engine.

    uv run python tests/chronicler_double.py --port 8100 --token dev-token

Routes: GET /health; GET /v1/events/stream (SSE: the last 50 events as catch-up, then live,
a keepalive comment every 15 s; token by ?token= or X-Internal-Token); GET /v1/events
(since, until, creature, service, session_id, event_type, limit <= 1000, offset; oldest
first); POST /v1/events/emit {"events": [...]}; GET /v1/tiers/stats (the consolidation creature's
metric events with data.changes move the counts).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
from collections import deque
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import uvicorn
from fastapi import FastAPI, Header, HTTPException, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import ValidationError

from her_os_shared.creatures import CreatureName
from her_os_shared.events import ObservabilityEvent

CATCHUP = 50
KEEPALIVE_S = 15.0


def create_double(token: str, ring_size: int = 10_000) -> FastAPI:
    app = FastAPI(title="chronicler test double")
    ring: deque[ObservabilityEvent] = deque(maxlen=ring_size)
    subscribers: set[asyncio.Queue[ObservabilityEvent]] = set()
    tiers = {"L0": 0, "L1": 0, "L2": 0}
    changes: deque[dict[str, Any]] = deque(maxlen=20)

    def check(given: str | None) -> None:
        if not given:
            raise HTTPException(401, "missing X-Internal-Token header")
        if not secrets.compare_digest(given.encode(), token.encode()):
            raise HTTPException(401, "invalid X-Internal-Token header")

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/events/stream")
    async def stream(
        request: Request,
        token_q: str | None = Query(None, alias="token"),
        x_internal_token: str | None = Header(None),
    ) -> StreamingResponse:
        check(token_q or x_internal_token)
        queue: asyncio.Queue[ObservabilityEvent] = asyncio.Queue()
        subscribers.add(queue)
        backlog = list(ring)[-CATCHUP:]

        async def body() -> AsyncIterator[str]:
            try:
                yield ": connected\n\n"
                for event in backlog:
                    # as the engine sends it: a plain message marked in its JSON
                    marked = event.model_dump_json()[:-1] + ',"catchup":true}'
                    yield f"id: {event.event_id}\ndata: {marked}\n\n"
                while not await request.is_disconnected():
                    try:
                        event = await asyncio.wait_for(queue.get(), KEEPALIVE_S)
                    except TimeoutError:
                        yield ": keepalive\n\n"
                        continue
                    yield f"data: {event.model_dump_json()}\n\n"
            finally:
                subscribers.discard(queue)

        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        return StreamingResponse(body(), media_type="text/event-stream", headers=headers)

    @app.get("/v1/events")
    async def events(
        since: datetime | None = None,
        until: datetime | None = None,
        creature: str | None = None,
        service: str | None = None,
        session_id: str | None = None,
        event_type: str | None = None,
        limit: int = Query(100, ge=1, le=1000),
        offset: int = Query(0, ge=0),
        x_internal_token: str | None = Header(None),
    ) -> dict[str, Any]:
        check(x_internal_token)

        def keep(e: ObservabilityEvent) -> bool:
            return (
                (since is None or e.timestamp >= since)
                and (until is None or e.timestamp <= until)
                and (creature is None or e.creature == creature)
                and (service is None or e.service == service)
                and (session_id is None or e.session_id == session_id)
                and (event_type is None or e.event_type == event_type)
            )

        found = sorted((e for e in ring if keep(e)), key=lambda e: e.timestamp)
        page = found[offset : offset + limit]
        return {
            "events": [json.loads(e.model_dump_json()) for e in page],
            "source": "ring",
            "limit": limit,
            "offset": offset,
            "total": len(found),
        }

    @app.post("/v1/events/emit")
    async def emit(
        body: dict[str, Any] | list[Any], x_internal_token: str | None = Header(None)
    ) -> dict:
        check(x_internal_token)
        # a bare array (the design's form) or {"events": [...]}
        items = body if isinstance(body, list) else body.get("events")
        if not isinstance(items, list):
            raise HTTPException(422, "events must be a list")
        accepted, rejected = 0, []
        for index, item in enumerate(items):
            try:
                event = ObservabilityEvent.model_validate(item)
            except ValidationError as exc:
                rejected.append({"index": index, "error": str(exc)[:300]})
                continue
            accepted += 1
            ring.append(event)
            if event.creature == CreatureName.SALMON and event.event_type == "metric":
                for change in event.data.get("changes") or []:
                    if not isinstance(change, dict):
                        continue
                    old, new = change.get("from"), change.get("to")
                    if old in tiers and new in tiers:
                        tiers[old] = max(0, tiers[old] - 1)
                        tiers[new] += 1
                        changes.appendleft(
                            {
                                "entity_id": change.get("id"),
                                "name": change.get("name"),
                                "type": change.get("type"),
                                "from_tier": old,
                                "to_tier": new,
                                "reason": change.get("reason", ""),
                                "changed_at": event.timestamp.isoformat(),
                                "run_id": event.data.get("run_id"),
                            }
                        )
            for queue in subscribers:
                queue.put_nowait(event)
        return {"accepted": accepted, "rejected": len(rejected), "errors": rejected,
                "total": len(items)}  # fmt: skip

    @app.post("/_double/tiers")
    async def set_tiers(body: dict[str, int], x_internal_token: str | None = Header(None)) -> dict:
        """Only in the double: set the tier counts."""
        check(x_internal_token)
        tiers.update({k: int(v) for k, v in body.items() if k in tiers})
        return tiers

    @app.get("/v1/tiers/stats")
    async def tier_stats(x_internal_token: str | None = Header(None)) -> dict[str, Any]:
        check(x_internal_token)
        return {
            "total": sum(tiers.values()),
            "tiers": {
                k: {"count": v, "low_salience": 0, "contradicted": 0, "mean_salience": None}
                for k, v in tiers.items()
            },
            "by_type": {},
            "communities": 0,
            "last_run": None,
            "recent_changes": list(changes),
        }

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8100)
    parser.add_argument("--token", default="dev-token")
    args = parser.parse_args()
    print(f"chronicler test double on http://{args.host}:{args.port} at {datetime.now(UTC):%X}")
    uvicorn.run(create_double(args.token), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
