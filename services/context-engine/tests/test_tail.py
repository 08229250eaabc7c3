"""ingest/tail.py: the one tailing mechanism of transcripts and event files — an offset holds
only over the same bytes, batches carry the offset to store with them, a gone file is None."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from context_engine.ingest.tail import Tail, fingerprint, opened, still_holds


class Line(BaseModel):
    n: int


def _write(path: Path, *ns: int) -> None:
    path.write_text("".join(f'{{"n": {n}}}\n' for n in ns))


async def test_an_offset_holds_over_the_same_bytes_only(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    _write(path, 1, 2)
    offset = path.stat().st_size
    with path.open("rb") as f:
        stored = fingerprint(f.fileno(), offset)
    _write(path, 1, 2, 3)  # appended: still the same bytes before the offset
    with path.open("rb") as f:
        assert still_holds(f.fileno(), path.stat().st_size, offset, stored)
    _write(path, 9, 2, 3)  # rewritten before the offset
    with path.open("rb") as f:
        assert not still_holds(f.fileno(), path.stat().st_size, offset, stored)
    _write(path, 1)  # truncated
    with path.open("rb") as f:
        assert not still_holds(f.fileno(), path.stat().st_size, offset, stored)


async def test_batches_carry_their_offset_and_the_last_says_so(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    _write(path, 1, 2, 3, 4, 5)
    path.write_text(path.read_text() + "not json\n" + '{"n": 6}\n')

    def two(records):  # up to two lines a batch
        batch = []
        for rec in records:
            batch.append(rec.value.n)
            if len(batch) == 2:
                return batch, rec.end
        return batch, None

    async with opened(path) as f:
        assert f is not None
        tail = Tail(path, Line, f, 0)
        got = [(b.items, b.offset, b.last) async for b in tail.batches(two)]
    size = path.stat().st_size
    lines = path.read_bytes().split(b"\n")
    after = [sum(len(x) + 1 for x in lines[:k]) for k in range(1, len(lines))]
    assert got == [
        ([1, 2], after[1], False),
        ([3, 4], after[3], False),
        ([5, 6], after[6], False),
        ([], size, True),
    ]
    assert tail.skipped == 1  # the bad line, logged by the reader


async def test_a_later_start_reads_only_what_follows(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    _write(path, 1, 2, 3)
    start = len(b'{"n": 1}\n')
    async with opened(path) as f:
        assert f is not None
        parts = [b async for b in Tail(path, Line, f, start).batches(_all)]
    assert [p.items for p in parts] == [[2, 3]] and parts[0].last


async def test_a_gone_file_opens_as_none(tmp_path: Path) -> None:
    async with opened(tmp_path / "gone.jsonl") as f:
        assert f is None


def _all(records):
    return [r.value.n for r in records], None
