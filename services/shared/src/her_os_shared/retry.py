"""One way to wait between tries: exponential backoff with a cap and jitter, on tenacity.

`Backoff(first_s, max_s, jitter)`: try n (0-based) waits `step(n) = min(first_s * 2**n,
max_s)`, stretched by a random factor in [1, 1 + jitter] (`delay(n)`), so that many waiters
that failed together (every job after a PostgreSQL restart, the engine's reconnecting parts)
do not all come back in the same instant. The jitter only ever lengthens a wait: a setting's
"retry after" stays the shortest wait.

- `retry_until_done(op, backoff=…, log=…, event=…)` calls `op` until it returns, logging
  each failure (`event`, attempt, retry_in_s, error) and waiting `delay(n)`; cancellation
  passes through, and `stop` (an asyncio.Event) ends it by re-raising the last failure.
- `Backoff.delays()` yields the same waits for loops that are not one call to retry (a flush
  loop that resets after a success), and `delay(n)` serves schedulers that count failures
  themselves (the job queue's retry strategy).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_never
from tenacity.stop import stop_base
from tenacity.wait import wait_base

T = TypeVar("T")

_MAX_EXPONENT = 60  # 2**60 s is past any cap: no float overflow for absurd attempt counts


@dataclass(frozen=True, slots=True)
class Backoff:
    first_s: float
    max_s: float
    jitter: float = 0.2

    def __post_init__(self) -> None:
        if self.first_s < 0 or self.max_s < 0:
            raise ValueError("backoff waits must not be negative")
        if not 0 <= self.jitter <= 1:
            raise ValueError("jitter is a fraction of the wait, between 0 and 1")

    def step(self, attempt: int) -> float:
        """The wait after failure number `attempt` (0-based), before jitter."""
        return min(self.first_s * 2 ** min(max(attempt, 0), _MAX_EXPONENT), self.max_s)

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """`step(attempt)` stretched by a random factor in [1, 1 + jitter]."""
        draw = (rng or random).random()
        return self.step(attempt) * (1.0 + self.jitter * draw)

    def delays(self) -> Iterator[float]:
        """The waits after each failure in turn, without end."""
        attempt = 0
        while True:
            yield self.delay(attempt)
            attempt += 1

    def tenacity_wait(self) -> wait_base:
        return _Wait(self)


class _Wait(wait_base):
    def __init__(self, backoff: Backoff) -> None:
        self.backoff = backoff

    def __call__(self, retry_state: RetryCallState) -> float:
        return self.backoff.delay(retry_state.attempt_number - 1)


class _StopWhen(stop_base):
    def __init__(self, event: asyncio.Event) -> None:
        self.event = event

    def __call__(self, retry_state: RetryCallState) -> bool:
        return self.event.is_set()


async def retry_until_done(
    op: Callable[[], Awaitable[T]],
    *,
    backoff: Backoff,
    log: Any,
    event: str,
    stop: asyncio.Event | None = None,
    retry_on: tuple[type[BaseException], ...] = (Exception,),
    **log_fields: Any,
) -> T:
    """`await op()` until it returns (see the module docs). `log` is a structlog logger;
    `log_fields` are added to each failure's line."""

    def before_sleep(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        log.warning(
            event,
            attempt=state.attempt_number,
            retry_in_s=round(state.upcoming_sleep, 3),
            error=repr(error)[:500],
            **log_fields,
        )

    retrying = AsyncRetrying(
        wait=backoff.tenacity_wait(),
        retry=retry_if_exception_type(retry_on),
        stop=_StopWhen(stop) if stop is not None else stop_never,
        before_sleep=before_sleep,
        reraise=True,
    )

    async def call() -> T:
        # tenacity awaits only coroutine functions: a lambda or a bound method returning an
        # awaitable would be called and its awaitable returned, never run
        return await op()

    return await retrying(call)
