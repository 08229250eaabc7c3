"""Concurrent query embeddings gathered into one pass (embed/query_batch.py), against a test
double that records each pass and can hold it open."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np
import pytest

from context_engine.embed.base import Embedder, EmbedderError
from context_engine.embed.query_batch import BatchedQueries


class PassRecordingEmbedderDouble(Embedder):
    """Test double: a query's vector is its length in dimension 0; passes are recorded, the
    first may be held open, and texts containing "refused" fail."""

    name, dim = "double", 4

    def __init__(self) -> None:
        self.passes: list[list[str]] = []
        self.singles: list[str] = []
        self.hold = asyncio.Event()
        self.hold.set()
        self.in_pass = asyncio.Event()

    def _vector(self, text: str) -> np.ndarray:
        if "refused" in text:
            raise EmbedderError(f"refused: {text}")
        v = np.zeros(self.dim, dtype=np.float32)
        v[0] = len(text)
        return v

    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        raise AssertionError("not used")

    async def embed_query(self, text: str) -> np.ndarray:
        self.singles.append(text)
        return self._vector(text)

    async def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        self.passes.append(list(texts))
        self.in_pass.set()
        await self.hold.wait()
        return np.stack([self._vector(t) for t in texts])


async def held_pass(
    most: int,
) -> tuple[PassRecordingEmbedderDouble, BatchedQueries, asyncio.Task[np.ndarray]]:
    """A batcher whose first pass ("a", alone) is running and held open."""
    inner = PassRecordingEmbedderDouble()
    batched = BatchedQueries(inner, most=most)
    inner.hold.clear()
    first = asyncio.create_task(batched.embed_query("a"))
    await asyncio.wait_for(inner.in_pass.wait(), 10)
    return inner, batched, first


async def test_queries_that_arrive_during_a_pass_share_the_next_one() -> None:
    inner, batched, first = await held_pass(3)  # "a" started at once, alone
    rest = [asyncio.create_task(batched.embed_query("b" * n)) for n in range(1, 6)]
    await asyncio.sleep(0)
    assert inner.passes == [["a"]]  # the others wait for the pass to end
    inner.hold.set()
    vectors = await asyncio.gather(first, *rest)
    assert [int(v[0]) for v in vectors] == [1, 1, 2, 3, 4, 5]  # each caller its own vector
    assert inner.passes == [["a"], ["b", "bb", "bbb"], ["bbbb", "bbbbb"]]  # at most 3 a pass
    assert batched.passes == 3 and batched.batched == 5
    assert await batched.embed_query("cc") is not None and inner.passes[-1] == ["cc"]


async def test_a_caller_that_gives_up_leaves_the_others_their_vectors() -> None:
    inner, batched, first = await held_pass(8)
    leaving = asyncio.create_task(batched.embed_query("leaving"))
    staying = asyncio.create_task(batched.embed_query("stays"))
    await asyncio.sleep(0)
    leaving.cancel()
    inner.hold.set()
    assert int((await staying)[0]) == 5 and int((await first)[0]) == 1
    assert leaving.cancelled()
    assert inner.passes[-1] == ["stays"]  # the one that left is not embedded


async def test_a_failed_pass_is_retried_query_by_query() -> None:
    inner, batched, first = await held_pass(8)
    good = asyncio.create_task(batched.embed_query("good"))
    bad = asyncio.create_task(batched.embed_query("refused one"))
    await asyncio.sleep(0)
    inner.hold.set()
    await first
    assert int((await good)[0]) == 4
    with pytest.raises(EmbedderError, match="refused one"):
        await bad
    assert inner.passes[-1] == ["good", "refused one"] and inner.singles == ["good", "refused one"]
    with pytest.raises(EmbedderError):  # alone: its own error, no retry
        await batched.embed_query("refused again")
    assert inner.singles == ["good", "refused one"]


async def test_most_one_embeds_each_query_on_its_own() -> None:
    inner = PassRecordingEmbedderDouble()
    batched = BatchedQueries(inner, most=1)
    vectors = await asyncio.gather(*(batched.embed_query(t) for t in ("x", "yy")))
    assert [int(v[0]) for v in vectors] == [1, 2]
    assert inner.passes == [] and inner.singles == ["x", "yy"]
    with pytest.raises(ValueError):
        BatchedQueries(inner, most=0)
