"""her_os_shared.retry: the one backoff (exponential, capped, jitter that only lengthens) and
retry_until_done on tenacity."""

from __future__ import annotations

import asyncio
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from her_os_shared.retry import Backoff, retry_until_done


class Log:
    """Records structlog-style calls (a test double)."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, dict]] = []

    def warning(self, event: str, **fields: object) -> None:
        self.lines.append((event, fields))


def test_steps_double_up_to_the_cap() -> None:
    b = Backoff(first_s=0.5, max_s=4.0, jitter=0.0)
    assert [b.step(n) for n in range(6)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert [b.delay(n) for n in range(6)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert b.step(10**9) == 4.0  # no overflow
    assert b.step(-3) == 0.5


@given(
    first=st.floats(0, 100),
    cap=st.floats(0, 1000),
    jitter=st.floats(0, 1),
    attempt=st.integers(0, 500),
    seed=st.integers(0, 2**32),
)
def test_jitter_only_lengthens_a_wait_by_at_most_its_fraction(
    first: float, cap: float, jitter: float, attempt: int, seed: int
) -> None:
    b = Backoff(first, cap, jitter)
    step = b.step(attempt)
    assert step <= cap
    d = b.delay(attempt, random.Random(seed))
    assert step <= d <= step * (1 + jitter) + 1e-9


def test_jitter_spreads_waits_that_failed_together() -> None:
    b = Backoff(1.0, 60.0, jitter=0.5)
    rng = random.Random(7)
    waits = {round(b.delay(3, rng), 6) for _ in range(50)}
    assert len(waits) > 40 and min(waits) >= 8.0 and max(waits) <= 12.0


def test_delays_iterate_the_same_waits() -> None:
    b = Backoff(1.0, 8.0, jitter=0.0)
    it = b.delays()
    assert [next(it) for _ in range(5)] == [1.0, 2.0, 4.0, 8.0, 8.0]


@pytest.mark.parametrize(("first", "cap", "jitter"), [(-1, 1, 0), (1, -1, 0), (1, 1, 1.5)])
def test_nonsense_is_refused(first: float, cap: float, jitter: float) -> None:
    with pytest.raises(ValueError):
        Backoff(first, cap, jitter)


async def test_retry_until_done_logs_each_failure_and_returns_the_answer() -> None:
    calls = 0

    async def flaky() -> str:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise ConnectionError(f"down {calls}")
        return "up"

    log = Log()
    answer = await retry_until_done(
        flaky, backoff=Backoff(0.01, 0.02, 0.0), log=log, event="x.retry", store="pg"
    )
    assert answer == "up" and calls == 3
    assert [e for e, _ in log.lines] == ["x.retry", "x.retry"]
    first, second = (f for _, f in log.lines)
    assert first["attempt"] == 1 and first["retry_in_s"] == 0.01 and first["store"] == "pg"
    assert "down 1" in first["error"] and second["retry_in_s"] == 0.02


async def test_an_op_that_returns_an_awaitable_is_awaited() -> None:
    # a lambda around asyncio.to_thread is not a coroutine function: it must run all the same
    ran: list[int] = []

    def work() -> int:
        ran.append(1)
        return 7

    answer = await retry_until_done(
        lambda: asyncio.to_thread(work), backoff=Backoff(0, 0), log=Log(), event="x"
    )
    assert answer == 7 and ran == [1]


async def test_retry_until_done_stops_when_told_and_raises_the_last_failure() -> None:
    stop = asyncio.Event()
    calls = 0

    async def failing() -> None:
        nonlocal calls
        calls += 1
        if calls == 2:
            stop.set()
        raise RuntimeError(f"boom {calls}")

    with pytest.raises(RuntimeError, match="boom 2"):
        await retry_until_done(failing, backoff=Backoff(0.0, 0.0), log=Log(), event="x", stop=stop)
    assert calls == 2


async def test_what_is_not_retried_and_cancellation_pass_through() -> None:
    async def wrong() -> None:
        raise KeyError("not a transient failure")

    with pytest.raises(KeyError):
        await retry_until_done(
            wrong, backoff=Backoff(0, 0), log=Log(), event="x", retry_on=(ConnectionError,)
        )

    started = asyncio.Event()

    async def forever() -> None:
        started.set()
        raise ConnectionError("down")

    task = asyncio.create_task(
        retry_until_done(forever, backoff=Backoff(30.0, 30.0), log=Log(), event="x")
    )
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
