"""Idempotent writes: a client that retries a write after a timeout sends the same
`Idempotency-Key` header, and the write happens once (the semantics of Stripe's key and the
IETF httpapi idempotency-key draft).

- A repeat with the same key and the same request within `window_s` gets the first request's
  status and body again (with `Idempotent-Replayed: true`) and stores nothing.
- A repeat that arrives while the first is still running waits for it and gets its answer: in
  this process it awaits the same task; run by another process it polls the store, up to
  `wait_s`, then is a 409 with Retry-After.
- The same key with another request is a 409; a malformed key is a 422 naming the header.
- Only answers the operation returns are kept (its successes). A request that fails keeps
  nothing: it wrote nothing, and its key is free for the retry.
- Keys are scoped by the caller's `scope` (the route, and the caller where there is one).
- A claim whose process died mid-request (no answer after `abandoned_s`) is taken over by
  the next repeat; records older than `window_s` are purged as new keys are claimed.

The logic is here once; a store per backend keeps the records (`IdempotencyStore`: the
context engine's PostgreSQL in `context_engine.store.idempotency`, SQLite in
`idempotency_sqlite.py` for a service without a database).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Protocol

from fastapi import Header, HTTPException
from fastapi.responses import Response
from pydantic import AfterValidator
from pydantic_core import PydanticCustomError

from her_os_shared.logging import get_logger
from her_os_shared.retry import Backoff

log = get_logger(__name__)

HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
MAX_KEY_CHARS = 255
# Printable ASCII, no space at either end (a header value's ends are trimmed in transit).
KEY_PATTERN = r"^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$"
_KEY = re.compile(KEY_PATTERN)
DEFAULT_WINDOW_S = 24 * 3600.0
# How long a repeat waits for the original still running in another process.
WAIT_S = 10.0
# An unanswered claim this old is taken over: its process died mid-request.
ABANDONED_S = 60.0
# Expired records are purged at most this often (on a claim).
PURGE_EVERY_S = 300.0
_POLL = Backoff(first_s=0.02, max_s=0.5, jitter=0.2)

Clock = Callable[[], datetime]


def _now() -> datetime:
    return datetime.now(UTC)


class InvalidIdempotencyKeyError(ValueError):
    """A key that is empty, too long or not printable ASCII; the message says which."""


def check_key(value: str) -> str:
    """`value` if it is a usable key, else InvalidIdempotencyKeyError saying why (never
    echoing the value)."""
    if not value:
        raise InvalidIdempotencyKeyError("must not be empty")
    if len(value) > MAX_KEY_CHARS:
        raise InvalidIdempotencyKeyError(
            f"must be at most {MAX_KEY_CHARS} characters (got {len(value)})"
        )
    if not _KEY.fullmatch(value):
        raise InvalidIdempotencyKeyError(
            "must be printable ASCII (no control or non-ASCII characters, no space at either "
            "end), e.g. a UUID"
        )
    return value


def _header_value(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        return check_key(value)
    except InvalidIdempotencyKeyError as exc:
        # A custom error: its message is the reason alone, without pydantic's prefix.
        raise PydanticCustomError("idempotency_key", str(exc)) from None


KEY_DESCRIPTION = (
    "makes the write idempotent: a repeat with the same key and the same request within the "
    "window answers the first request's status and body and stores nothing; the same key "
    f"with another request is a 409. 1-{MAX_KEY_CHARS} printable ASCII characters (a UUID)."
)


def key_header(alias: str = HEADER, description: str = KEY_DESCRIPTION) -> Any:
    """A route's optional idempotency-key header under `alias`, checked (a 422 naming the
    header and why)."""
    return Annotated[
        str | None,
        Header(
            alias=alias,
            description=description,
            json_schema_extra={"pattern": KEY_PATTERN, "maxLength": MAX_KEY_CHARS},
        ),
        AfterValidator(_header_value),
    ]


IdempotencyKeyHeader = key_header()


def fingerprint(request: Any, payload: bytes = b"") -> str:
    """What "the same request" means: sha256 of `request` as canonical JSON (sorted keys, so
    a re-serialised body matches) and of the raw `payload` bytes (an audio chunk)."""
    canonical = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    digest = hashlib.sha256(canonical.encode("utf-8", "surrogatepass"))
    digest.update(b"\0")
    digest.update(payload)
    return digest.hexdigest()


@dataclass(frozen=True, slots=True)
class Answer:
    """A response as kept: its status and JSON body (bytes, replayed unchanged)."""

    status: int
    body: bytes
    replayed: bool = False

    @classmethod
    def json(cls, status: int, value: Any) -> Answer:
        return cls(status, json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())

    def response(self) -> Response:
        headers = {REPLAYED_HEADER: "true"} if self.replayed else None
        return Response(self.body, self.status, headers, media_type="application/json")


@dataclass(frozen=True, slots=True)
class Record:
    """A key's record in a store: who claimed it, for which request, when, and the answer
    (None while the request runs)."""

    fingerprint: str
    owner: str
    created_at: datetime
    status: int | None = None
    body: bytes | None = None


class IdempotencyStore(Protocol):
    """Where the records live; every method is one atomic step."""

    async def claim(
        self, scope: str, key: str, record: Record, *, replace_before: datetime,
        abandoned_before: datetime,
    ) -> Record | None:  # fmt: skip
        """Insert `record`, or replace a record created before `replace_before` or one still
        unanswered created before `abandoned_before`. None: claimed; else the record found."""
        ...

    async def finish(self, scope: str, key: str, owner: str, status: int, body: bytes) -> None:
        """Keep the answer of `owner`'s claim (nothing when the claim is no longer its own)."""
        ...

    async def release(self, scope: str, key: str, owner: str) -> None:
        """Drop `owner`'s unanswered claim."""
        ...

    async def purge(self, before: datetime) -> int:
        """Delete the records created before `before`; how many."""
        ...


Operation = Callable[[], Awaitable[Answer]]


class Idempotency:
    """Runs writes at most once per (scope, key) within the window (see the module docs)."""

    def __init__(
        self,
        store: IdempotencyStore,
        *,
        window_s: float = DEFAULT_WINDOW_S,
        wait_s: float = WAIT_S,
        abandoned_s: float = ABANDONED_S,
        clock: Clock = _now,
    ) -> None:
        self.store = store
        self.window = timedelta(seconds=window_s)
        self.wait_s = wait_s
        self.abandoned = timedelta(seconds=abandoned_s)
        self.clock = clock  # injectable: tests move time instead of sleeping
        self._running: dict[tuple[str, str], tuple[str, asyncio.Task[Answer]]] = {}
        self._next_purge: datetime | None = None

    async def respond(
        self, scope: str, key: str | None, request_fingerprint: str, op: Operation
    ) -> Response:
        """The route's response: `op`'s answer, or without a key simply `op` run."""
        answer = await op() if key is None else await self.run(scope, key, request_fingerprint, op)
        return answer.response()

    async def run(self, scope: str, key: str, request_fingerprint: str, op: Operation) -> Answer:
        """`op`'s answer, run once for the key; a repeat's answer is the first one's,
        `replayed`. Raises HTTPException 409 for another request under the key, or one still
        running elsewhere after `wait_s`."""
        deadline = time.monotonic() + self.wait_s
        waits = _POLL.delays()
        while True:
            running = self._running.get((scope, key))
            if running is not None:  # the first request, in this process
                claimed_for, task = running
                _same(claimed_for, request_fingerprint)
                await asyncio.wait({task})  # not cancelled with this caller
                if not task.cancelled() and task.exception() is None:
                    return replace(task.result(), replayed=True)
                continue  # it failed and kept nothing: this request runs on its own
            now = self.clock()
            await self._purge(now)
            owner = uuid.uuid4().hex
            found = await self.store.claim(
                scope, key, Record(request_fingerprint, owner, now),
                replace_before=now - self.window, abandoned_before=now - self.abandoned,
            )  # fmt: skip
            if found is None:
                return await self._execute(scope, key, request_fingerprint, owner, op)
            _same(found.fingerprint, request_fingerprint)
            if found.status is not None and found.body is not None:
                return Answer(found.status, found.body, replayed=True)
            # Claimed and running: here (it registers at once) or in another process.
            if time.monotonic() >= deadline:
                raise HTTPException(
                    409,
                    f"a request with this {HEADER} is still being processed; retry shortly",
                    headers={"Retry-After": "1"},
                )
            await asyncio.sleep(next(waits))

    async def _execute(
        self, scope: str, key: str, request_fingerprint: str, owner: str, op: Operation
    ) -> Answer:
        async def execute() -> Answer:
            try:
                answer = await op()
            except BaseException:
                await self.store.release(scope, key, owner)
                raise
            try:
                await self.store.finish(scope, key, owner, answer.status, answer.body)
            except Exception as exc:  # the write is done: answer it (a repeat waits, then 409)
                log.warning("idempotency.finish_failed", scope=scope, error=repr(exc)[:300])
            return answer

        # A task of its own, shielded: a caller that gives up (a client gone) neither
        # interrupts the write nor leaves its claim unanswered, and repeats await it.
        task = asyncio.create_task(execute(), name=f"idempotent {scope}")
        self._running[(scope, key)] = (request_fingerprint, task)

        def done(finished: asyncio.Task[Answer]) -> None:
            if self._running.get((scope, key), (None, None))[1] is finished:
                del self._running[(scope, key)]
            if not finished.cancelled():
                finished.exception()  # retrieved: the caller that gave up is not warned of

        task.add_done_callback(done)
        return await asyncio.shield(task)

    async def _purge(self, now: datetime) -> None:
        if self._next_purge is not None and now < self._next_purge:
            return
        self._next_purge = now + timedelta(seconds=PURGE_EVERY_S)
        try:
            purged = await self.store.purge(now - self.window)
        except Exception as exc:  # expired records are harmless until the next purge
            log.warning("idempotency.purge_failed", error=repr(exc)[:300])
            return
        if purged:
            log.info("idempotency.purged", records=purged)


def _same(claimed_for: str, request_fingerprint: str) -> None:
    if claimed_for != request_fingerprint:
        raise HTTPException(
            409,
            f"this {HEADER} was already used for a different request (another body or "
            "parameters) within the idempotency window; use a new key for a new request",
        )
