"""Tailing a JSONL file the shared atomic writer appends to (a new inode per append, ADR 0002),
one mechanism for the transcripts (transcripts.py) and the audio pipeline's event files
(event_files.py):

- the file is opened once per pass (`opened`): stat, fingerprint and lines all come from the
  version read, even if the writer renames a newer one into place meanwhile;
- a stored offset still holds when the file is at least that long and its bytes before the
  offset are the same (`still_holds`: the sha256 of the first and last 64 KiB before it);
  otherwise the file was truncated or rewritten and is read again from the start;
- `Tail.batches(take)` streams it from an offset in batches (`take` pulls one from the
  records, in a worker thread) and says, for each, the offset to store with it and whether it
  is the last; the caller commits each batch and its offset in one transaction.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import AsyncIterator, Callable, Generator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Generic, TypeVar

from pydantic import BaseModel

from her_os_shared.jsonl import JsonlReader, JsonlRecord

FINGERPRINT_WINDOW = 64 * 1024

M = TypeVar("M", bound=BaseModel)
B = TypeVar("B")


def fingerprint(fd: int, offset: int) -> str:
    """sha256 of the first and the last 64 KiB before `offset` of the open file `fd`: O(1)
    per append, and any rewrite of the file (a sweep, a truncation and regrowth) changes it
    in practice. Uses pread, so the file position of a reader on the same fd is untouched."""
    h = hashlib.sha256(str(offset).encode())
    h.update(os.pread(fd, min(offset, FINGERPRINT_WINDOW), 0))
    tail = max(FINGERPRINT_WINDOW, offset - FINGERPRINT_WINDOW)
    if tail < offset:
        h.update(os.pread(fd, offset - tail, tail))
    return h.hexdigest()


def still_holds(fd: int, size: int, offset: int, stored_fingerprint: str) -> bool:
    """Whether a stored offset still points after the same bytes (neither truncated nor
    rewritten)."""
    return size >= offset and fingerprint(fd, offset) == stored_fingerprint


@asynccontextmanager
async def opened(path: Path) -> AsyncIterator[IO[bytes] | None]:
    """The file, open for one pass (None when it is gone), closed after."""
    try:
        f = await asyncio.to_thread(path.open, "rb")
    except FileNotFoundError:
        yield None
        return
    try:
        yield f
    finally:
        f.close()


@dataclass(frozen=True, slots=True)
class Batch(Generic[B]):
    items: B
    offset: int  # where the next pass starts once this batch is committed
    last: bool  # the end of the file was reached


Records = Generator[JsonlRecord[M], None, None]
# Pulls one batch from the records: (the batch, end offset of its last line or None at the
# end of the file). Runs in a worker thread.
Take = Callable[[Records[M]], tuple[B, int | None]]


class Tail(Generic[M]):
    """The records of `model` in the open file `f` from byte `start`."""

    def __init__(self, path: Path, model: type[M], f: IO[bytes], start: int) -> None:
        self.reader = JsonlReader(path, model, start=start, file=f)

    @property
    def skipped(self) -> int:
        """Lines the reader skipped (bad JSON, bad records), each logged with its reason."""
        return len(self.reader.skipped)

    async def batches(self, take: Take[M, B]) -> AsyncIterator[Batch[B]]:
        records = iter(self.reader)
        try:
            while True:
                items, end = await asyncio.to_thread(take, records)
                last = end is None
                yield Batch(items, self.reader.offset if last else end, last)
                if last:
                    return
        finally:
            records.close()
