"""Ingestion and the dedup rules, on a real PostgreSQL (no HTTP): ingest.py + dedup.py."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from context_engine.ingest.transcripts import Ingestor
from her_os_shared.jsonl import append_records, encode_line
from her_os_shared.transcript import Overlap, Segment, TranscriptPayload

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def seg(sid: str, start: float, end: float, words: str = "", *, pinned: bool = False) -> Segment:
    return Segment(
        segment_id=sid,
        speaker="A",
        text=words or f"words of {sid}",
        start=start,
        end=end,
        stt_engine="test",
        pinned=pinned,
    )


def payload(*segments: Segment, session: str = "s1", sweep: bool = False) -> TranscriptPayload:
    return TranscriptPayload(
        session_id=session,
        device_id="dev",
        session_started_at=T0,
        is_sweep=sweep,
        segments=list(segments),
    )


@pytest.fixture
def transcripts(tmp_path: Path) -> Path:
    d = tmp_path / "transcripts"
    d.mkdir()
    return d


@pytest.fixture
def ingestor(db: AsyncEngine, transcripts: Path) -> Ingestor:
    return Ingestor(db, transcripts, batch_segments=3)


async def rows(db: AsyncEngine, session: str = "s1") -> dict[str, dict]:
    async with db.connect() as conn:
        result = await conn.execute(
            text(
                "SELECT segment_id, text, pinned, is_sweep, replaced_by, start_s, end_s"
                " FROM segments WHERE session_id = :s"
            ),
            {"s": session},
        )
        return {r.segment_id: dict(r._mapping) for r in result}


def active(found: dict[str, dict]) -> set[str]:
    return {k for k, v in found.items() if v["replaced_by"] is None}


async def test_ingests_every_segment_once_and_resumes_from_the_offset(
    ingestor: Ingestor, db: AsyncEngine, transcripts: Path
) -> None:
    path = append_records(transcripts, "s1", [payload(seg(f"g{i}", i, i + 1)) for i in range(7)])
    first = await ingestor.ingest_file(path)
    assert (first.status, first.lines, first.segments) == ("ingested", 7, 7)
    assert first.offset == path.stat().st_size
    again = await ingestor.ingest_file(path)
    assert again.status == "up_to_date" and again.segments == 0

    append_records(transcripts, "s1", [payload(seg("g7", 7, 8)), payload(seg("g8", 8, 9))])
    more = await ingestor.ingest_file(path)
    assert (more.status, more.lines, more.segments) == ("ingested", 2, 2)
    assert set(await rows(db)) == {f"g{i}" for i in range(9)}


async def test_a_fresh_ingestor_resumes_from_the_stored_offset(
    db: AsyncEngine, transcripts: Path
) -> None:
    path = append_records(transcripts, "s1", [payload(seg("a", 0, 1))])
    await Ingestor(db, transcripts).ingest_file(path)
    append_records(transcripts, "s1", [payload(seg("b", 1, 2))])
    after_restart = await Ingestor(db, transcripts).ingest_file(path)
    assert (after_restart.lines, after_restart.segments) == (1, 1)


async def test_malformed_and_truncated_lines_are_skipped_and_the_rest_kept(
    ingestor: Ingestor, db: AsyncEngine, transcripts: Path
) -> None:
    path = transcripts / "s1.jsonl"
    good = encode_line(payload(seg("a", 0, 1)))
    other_session = encode_line(payload(seg("x", 0, 1), session="s2"))
    bad_contract = b'{"schema_version": 1, "session_id": "s1", "segments": []}\n'
    path.write_bytes(
        good + b"not json\n" + b"\xff\xfe\n" + bad_contract + other_session
        + encode_line(payload(seg("b", 1, 2)))
        + encode_line(payload(seg("c", 2, 3)))[:40]  # a line still being written
    )  # fmt: skip
    result = await ingestor.ingest_file(path)
    assert (result.segments, result.skipped) == (2, 4)
    assert set(await rows(db)) == {"a", "b"}
    # The trailing partial line is not consumed: completing it makes it count.
    complete = good + b"not json\n" + b"\xff\xfe\n" + bad_contract + other_session
    complete += encode_line(payload(seg("b", 1, 2))) + encode_line(payload(seg("c", 2, 3)))
    tmp = transcripts / ".s1.jsonl.tmp"
    tmp.write_bytes(complete)
    os.rename(tmp, path)
    later = await ingestor.ingest_file(path)
    assert later.status == "ingested" and later.segments == 1
    assert set(await rows(db)) == {"a", "b", "c"}
    assert await rows(db, "s2") == {}  # a line naming another session is never ingested


async def test_fast_path_latest_write_wins(
    ingestor: Ingestor, db: AsyncEngine, transcripts: Path
) -> None:
    path = append_records(
        transcripts,
        "s1",
        [payload(seg("a", 0, 1, "first draft")), payload(seg("a", 0, 1.5, "second draft"))],
    )
    await ingestor.ingest_file(path)
    append_records(transcripts, "s1", [payload(seg("a", 0, 2, "final words"))])
    await ingestor.ingest_file(path)
    found = await rows(db)
    assert found["a"]["text"] == "final words" and found["a"]["end_s"] == 2


async def test_overlap_is_stored_as_written_and_null_when_nobody_talked_over(
    ingestor: Ingestor, db: AsyncEngine, transcripts: Path
) -> None:
    over = seg("a", 0, 2, "I was saying").model_copy(
        update={"overlap": [Overlap(speaker="B", start=0.5, end=1.25)]}
    )
    path = append_records(transcripts, "s1", [payload(over, seg("b", 2, 3))])
    await ingestor.ingest_file(path)
    stored = await overlaps(db)
    assert stored == {"a": [{"speaker": "B", "start": 0.5, "end": 1.25}], "b": None}
    # The latest write wins for the overlap too: a rewrite without it leaves NULL.
    append_records(transcripts, "s1", [payload(seg("a", 0, 2, "I was saying"))])
    await ingestor.ingest_file(path)
    assert await overlaps(db) == {"a": None, "b": None}


async def overlaps(db: AsyncEngine) -> dict[str, object]:
    async with db.connect() as conn:
        result = await conn.execute(text("SELECT segment_id, overlap FROM segments"))
        return {r.segment_id: r.overlap for r in result}


async def test_pinned_segments_are_never_replaced(
    ingestor: Ingestor, db: AsyncEngine, transcripts: Path
) -> None:
    path = append_records(
        transcripts,
        "s1",
        [payload(seg("p", 0, 2, "corrected by the user", pinned=True)), payload(seg("f", 3, 4))],
    )
    await ingestor.ingest_file(path)
    # A later unpinned write of the same id, and a sweep over the same time: both lose.
    append_records(transcripts, "s1", [payload(seg("p", 0, 2, "machine text"))])
    append_records(transcripts, "s1", [payload(seg("w", 0, 5, "sweep text"), sweep=True)])
    await ingestor.ingest_file(path)
    found = await rows(db)
    assert found["p"]["text"] == "corrected by the user" and found["p"]["pinned"]
    assert found["p"]["replaced_by"] is None
    assert found["f"]["replaced_by"] == "w"
    assert active(found) == {"p", "w"}


async def test_sweep_replaces_only_overlapping_fast_path_segments_in_any_order(
    db: AsyncEngine, transcripts: Path
) -> None:
    fast = [seg("f1", 0, 2), seg("f2", 2, 4), seg("f3", 10, 12), seg("f4", 4, 4)]
    sweep = [seg("w1", 0, 4.5)]
    # Sweep after fast path, and sweep before a late fast path: the same result.
    for session, lines in (
        ("late_sweep", [payload(*fast, session="late_sweep"),
                        payload(*sweep, session="late_sweep", sweep=True)]),
        ("late_fast", [payload(*sweep, session="late_fast", sweep=True),
                       payload(*fast, session="late_fast")]),
    ):  # fmt: skip
        path = append_records(transcripts, session, lines)
        await Ingestor(db, transcripts).ingest_file(path)
        found = await rows(db, session)
        assert {k: v["replaced_by"] for k, v in found.items()} == {
            "f1": "w1", "f2": "w1", "f4": "w1", "f3": None, "w1": None,
        }  # fmt: skip


async def test_a_file_replaced_by_sweep_payloads_is_read_again(
    ingestor: Ingestor, db: AsyncEngine, transcripts: Path
) -> None:
    path = append_records(transcripts, "s1", [payload(seg(f"f{i}", i, i + 1)) for i in range(6)])
    await ingestor.ingest_file(path)
    # The sweep rewrites the whole file (atomically) with its own segments.
    tmp = transcripts / ".s1.jsonl.tmp"
    tmp.write_bytes(
        encode_line(payload(seg("w1", 0, 3), seg("w2", 3, 6), sweep=True))
        + encode_line(payload(seg("f6", 7, 8)))
    )
    os.rename(tmp, path)
    result = await ingestor.ingest_file(path)
    assert result.status == "reread" and result.deleted_stale == 6
    found = await rows(db)
    assert set(found) == {"w1", "w2", "f6"} and active(found) == {"w1", "w2", "f6"}


async def test_a_truncated_file_is_read_again(
    ingestor: Ingestor, db: AsyncEngine, transcripts: Path
) -> None:
    path = append_records(transcripts, "s1", [payload(seg("a", 0, 1)), payload(seg("b", 1, 2))])
    await ingestor.ingest_file(path)
    path.write_bytes(encode_line(payload(seg("c", 0, 1))))  # smaller than the stored offset
    result = await ingestor.ingest_file(path)
    assert result.status == "reread"
    assert set(await rows(db)) == {"c"}


async def test_a_full_re_read_interrupted_midway_still_removes_stale_rows(
    db: AsyncEngine, transcripts: Path
) -> None:
    path = append_records(transcripts, "s1", [payload(seg(f"f{i}", i, i + 1)) for i in range(4)])
    await Ingestor(db, transcripts).ingest_file(path)
    tmp = transcripts / ".s1.jsonl.tmp"
    tmp.write_bytes(b"".join(encode_line(payload(seg(f"n{i}", i, i + 1))) for i in range(6)))
    os.rename(tmp, path)

    class Crash(Exception):
        pass

    crashing = Ingestor(db, transcripts, batch_segments=2)
    calls = 0
    real = crashing._save_offset

    async def save_then_crash(*args: object, **kwargs: object) -> None:
        nonlocal calls
        calls += 1
        if calls == 3:  # after the generation bump and one committed batch
            raise Crash
        await real(*args, **kwargs)  # type: ignore[arg-type]

    crashing._save_offset = save_then_crash  # type: ignore[method-assign]
    with pytest.raises(Crash):
        await crashing.ingest_file(path)
    await Ingestor(db, transcripts).ingest_file(path)
    assert set(await rows(db)) == {f"n{i}" for i in range(6)}


async def test_names_that_are_not_session_ids_are_skipped(
    ingestor: Ingestor, transcripts: Path
) -> None:
    weird = transcripts / "bad name.jsonl"
    weird.write_bytes(encode_line(payload(seg("a", 0, 1))))
    assert (await ingestor.ingest_file(weird)).status == "invalid_name"
    assert (await ingestor.ingest_file(transcripts / "gone.jsonl")).status == "missing"
