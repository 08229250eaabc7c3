"""AsyncLRU (memo.py): kept values, one call for overlapping misses, bounded, failures not
kept; size 0 keeps nothing but still shares a call in flight."""

from __future__ import annotations

import asyncio

import pytest

from her_os_shared.memo import AsyncLRU


class Calls:
    """Counts computations; `gate` holds them until set."""

    def __init__(self) -> None:
        self.n = 0
        self.gate = asyncio.Event()
        self.fail = False

    async def __call__(self) -> int:
        self.n += 1
        await self.gate.wait()
        if self.fail:
            raise RuntimeError("down")
        return self.n


async def test_kept_and_bounded() -> None:
    lru: AsyncLRU[str, int] = AsyncLRU(2)
    calls = Calls()
    calls.gate.set()
    assert [await lru.get(k, calls) for k in ("a", "b", "a", "c")] == [1, 2, 1, 3]
    assert len(lru) == 2 and (lru.hits, lru.misses) == (1, 3)
    assert await lru.get("b", calls) == 4  # "b" was the least recently used: dropped


async def test_size_zero_shares_only_what_overlaps() -> None:
    lru: AsyncLRU[str, int] = AsyncLRU(0)
    calls = Calls()
    waiting = [asyncio.create_task(lru.get("health", calls)) for _ in range(4)]
    await asyncio.sleep(0)
    calls.gate.set()
    assert await asyncio.gather(*waiting) == [1, 1, 1, 1]
    assert await lru.get("health", calls) == 2  # nothing kept once it finished
    assert len(lru) == 0


async def test_a_failure_reaches_every_waiter_and_is_not_kept() -> None:
    lru: AsyncLRU[str, int] = AsyncLRU(4)
    calls = Calls()
    calls.fail = True
    waiting = [asyncio.create_task(lru.get("k", calls)) for _ in range(3)]
    await asyncio.sleep(0)
    calls.gate.set()
    outcomes = await asyncio.gather(*waiting, return_exceptions=True)
    assert all(isinstance(o, RuntimeError) for o in outcomes) and calls.n == 1
    calls.fail = False
    assert await lru.get("k", calls) == 2


def test_a_negative_size_is_refused() -> None:
    with pytest.raises(ValueError):
        AsyncLRU(-1)
