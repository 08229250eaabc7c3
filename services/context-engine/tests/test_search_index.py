"""The keyword index (Tantivy) against PostgreSQL full-text search: same matches, kept in
line with every ingest, rebuilt after an unclean stop. tsquery.py translation included."""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import threading
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from context_engine.index import tsquery
from context_engine.index.keyword import Changes, SegmentSearchIndex
from context_engine.ingest.transcripts import Ingestor
from context_engine.search.legs.keyword import Bm25Leg, is_natural
from context_engine.search.query import ContextQuery
from her_os_shared.jsonl import append_records, encode_line
from her_os_shared.transcript import Segment, TranscriptPayload

T0 = datetime(2026, 2, 1, 8, 0, tzinfo=UTC)
WORDS = (
    "priya moving koramangala coffee ordered the a to of and dinner sunday mother "
    "birthday doctor appointment running marathon book reading it's don't can't well"
).split()


async def open_index(path: Path, db: AsyncEngine) -> SegmentSearchIndex:
    index = SegmentSearchIndex(path, db)
    await index.open()
    for _ in range(600):
        if index.ready:
            return index
        await asyncio.sleep(0.05)
    raise AssertionError("the index never became ready")


def applier(index: SegmentSearchIndex) -> Callable[[str, set[str] | None], Awaitable[None]]:
    """The ingestor's change callback, applied to the index as the runtime does."""

    async def changed(session_id: str, ids: set[str] | None) -> None:
        changes = Changes()
        changes.add(session_id, ids)
        await index.apply(changes)

    return changed


def corpus(transcripts: Path, sessions: int = 4, per_session: int = 60, seed: int = 7) -> None:
    rnd = random.Random(seed)
    for s in range(sessions):
        lines = []
        for i in range(per_session):
            words = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(1, 9)))
            seg = Segment(
                segment_id=f"g{i}",
                speaker="A",
                text=words.capitalize(),
                start=i * 3.0,
                end=i * 3.0 + 2,
                stt_engine="test",
            )
            started = T0 + timedelta(days=s)
            lines.append(
                TranscriptPayload(
                    session_id=f"s{s}", device_id="d", session_started_at=started, segments=[seg]
                )
            )
        if s == 0:  # a sweep over part of the first session: replaced rows must not match
            sweep = Segment(
                segment_id="w0",
                speaker="A",
                text="sweep coffee sunday mother",
                start=0.0,
                end=30.0,
                stt_engine="test",
            )
            lines.append(
                TranscriptPayload(
                    session_id="s0",
                    device_id="d",
                    session_started_at=T0,
                    is_sweep=True,
                    segments=[sweep],
                )
            )
        append_records(transcripts, f"s{s}", lines)


def queries(seed: int = 11, n: int = 80) -> list[str]:
    rnd = random.Random(seed)
    out = [
        "the",
        "coffee",
        '"ordered coffee"',
        '"moving to koramangala"',
        "-coffee",
        "coffee or dinner",
        "priya -sunday",
        "it's",
        "don't can't",
        "birthday mother",
    ]
    for _ in range(n):
        a, b, c = rnd.sample(WORDS, 3)
        out.append(
            rnd.choice(
                [
                    a,
                    f"{a} {b}",
                    f'"{a} {b}"',
                    f"{a} or {b}",
                    f"{a} -{b}",
                    f"{a} {b} -{c}",
                    f'"{a} {b} {c}"',
                    f"({a} or {b}) {c}",
                ]
            )
        )
    return out


# The reference: PostgreSQL's own `@@` over the documents the index holds for a segment
# (`lex`: the turn before it and its speaker, then its speaker and words; `lex_next`: its
# speaker and words, then the turn after it), with the query as the keyword leg reads it
# (natural language: every word an alternative; search syntax: websearch).
_REFERENCE = """
    WITH w AS (SELECT websearch_to_tsquery('english', :query) AS q),
    t AS (SELECT CASE WHEN :natural
                      THEN regexp_replace(w.q::text, ' (&|<->|<[0-9]+>) ', ' | ', 'g')::tsquery
                      ELSE w.q END AS q FROM w),
    d AS (
      SELECT session_id, segment_id, spoken_at,
             {doc} AS doc
      FROM segments WHERE replaced_by IS NULL
      WINDOW win AS (PARTITION BY session_id ORDER BY start_s, segment_id)
    )
    SELECT session_id, segment_id FROM d, t
    WHERE d.doc @@ t.q AND spoken_at <= :as_of
      AND (CAST(:since AS timestamptz) IS NULL OR spoken_at >= CAST(:since AS timestamptz))
    """
_SPEAKER_TEXT = "to_tsvector('english', speaker) || tsv"
_DOCS = {
    "lex": f"coalesce(lag({_SPEAKER_TEXT}) OVER win, ''::tsvector) || {_SPEAKER_TEXT}",
    "lex_next": f"{_SPEAKER_TEXT} || coalesce(lead({_SPEAKER_TEXT}) OVER win, ''::tsvector)",
}


async def both(
    db: AsyncEngine, index: SegmentSearchIndex, q: str, field: str = "lex", **window: object
) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    cq = ContextQuery(
        query=q,
        limit=10_000,
        as_of=window.get("as_of", T0 + timedelta(days=30)),
        hours_back=window.get("hours_back"),
    )
    hours = cq.hours_back
    since = None if hours is None else cq.as_of - timedelta(hours=hours)
    async with db.connect() as conn:
        # The index itself, not the fallback: a comparison of PostgreSQL with itself proves nothing.
        ranked = await Bm25Leg(db, index)._search_index(cq, since, 10_000, {field: field})
        params = {"query": q, "natural": is_natural(q), "as_of": cq.as_of, "since": since}
        reference = text(_REFERENCE.format(doc=_DOCS[field]))
        via_pg = (await conn.execute(reference, params)).all()
    assert ranked is not None, f"{q!r} was not served by the index"
    return {(c.session_id, c.segment_id) for c in ranked[field]}, {tuple(r) for r in via_pg}


async def test_the_index_matches_exactly_what_postgresql_matches(
    db: AsyncEngine, tmp_path: Path
) -> None:
    transcripts = tmp_path / "t"
    corpus(transcripts)
    index = await open_index(tmp_path / "idx", db)

    changed = applier(index)
    ingestor = Ingestor(db, transcripts, batch_segments=25, on_changed=changed)
    for path in sorted(transcripts.glob("*.jsonl")):
        await ingestor.ingest_file(path)
    nonempty = 0
    for q in queries():
        for field in _DOCS:
            got, expected = await both(db, index, q, field)
            assert got == expected, (q, field)
            nonempty += bool(expected)
    assert nonempty > 80  # the comparison is not between empty sets
    # Windows: as_of and hours_back are applied by both in the same way.
    for q in ("coffee", "mother or doctor"):
        for field in _DOCS:
            got, expected = await both(
                db, index, q, field, as_of=T0 + timedelta(days=1, hours=1), hours_back=30
            )
            assert got == expected and expected
    await index.close()


async def test_the_index_follows_sweeps_rewrites_and_restarts(
    db: AsyncEngine, tmp_path: Path
) -> None:
    transcripts = tmp_path / "t"
    corpus(transcripts, sessions=2)
    index = await open_index(tmp_path / "idx", db)

    changed = applier(index)
    ingestor = Ingestor(db, transcripts, on_changed=changed)
    for path in sorted(transcripts.glob("*.jsonl")):
        await ingestor.ingest_file(path)
    # The sweep rewrites session s1 entirely: everything old leaves the index.
    tmp = transcripts / ".s1.jsonl.tmp"
    tmp.write_bytes(
        encode_line(
            TranscriptPayload(
                session_id="s1",
                device_id="d",
                session_started_at=T0,
                is_sweep=True,
                segments=[
                    Segment(
                        segment_id="w9",
                        speaker="A",
                        text="zebra crossing",
                        start=0,
                        end=5,
                        stt_engine="test",
                    )
                ],
            )
        )
    )
    os.rename(tmp, transcripts / "s1.jsonl")
    await ingestor.ingest_file(transcripts / "s1.jsonl")
    for q, field in itertools.product(("coffee", "zebra", "mother -sunday"), _DOCS):
        got, expected = await both(db, index, q, field)
        assert got == expected, (q, field)
    assert (await both(db, index, "zebra"))[0] == {("s1", "w9")}

    # A clean close reopens ready at once; a crash (no close) means a rebuild.
    await index.close()
    reopened = SegmentSearchIndex(tmp_path / "idx", db)
    await reopened.open()
    assert reopened.ready
    await reopened.apply(Changes())  # nothing to do
    # Simulate a crash: the marker is gone (open() removed it) and close() never runs.
    crashed = reopened
    crashed._writer.commit()
    crashed._writer = None
    rebuilt = SegmentSearchIndex(tmp_path / "idx", db)
    await rebuilt.open()
    assert not rebuilt.ready  # rebuilding in the background; the leg uses PostgreSQL meanwhile
    cq = ContextQuery(query="zebra", limit=5, as_of=T0 + timedelta(days=30))
    assert [c.segment_id for c in await Bm25Leg(db, rebuilt).search(cq, 5)] == ["w9"]
    for _ in range(600):
        if rebuilt.ready:
            break
        await asyncio.sleep(0.05)
    assert rebuilt.ready
    for q, field in itertools.product(("coffee", "zebra", '"ordered coffee"'), _DOCS):
        got, expected = await both(db, rebuilt, q, field)
        assert got == expected, (q, field)
    await rebuilt.close()


L = tsquery.Lexeme
OR_AND_NOT = tsquery.Op("or", (L("a"), tsquery.Op("and", (L("b"), tsquery.Op("not", (L("c"),))))))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("'coffe'", tsquery.Lexeme("coffe")),
        ("'priya' & 'move'", tsquery.Op("and", (tsquery.Lexeme("priya"), tsquery.Lexeme("move")))),
        ("'move' <2> 'koramangala'", tsquery.Phrase(((0, "move"), (2, "koramangala")))),
        ("'a' <-> 'b' <-> 'c'", tsquery.Phrase(((0, "a"), (1, "b"), (2, "c")))),
        ("'a' | 'b' & !'c'", OR_AND_NOT),
        ("'it''s'", tsquery.Lexeme("it's")),
        ("", None),
    ],
)
def test_tsquery_text_is_parsed_with_postgresql_precedence(
    text: str, expected: tsquery.Node | None
) -> None:
    assert tsquery.parse(text) == expected


@pytest.mark.parametrize("text", ["'a':*", "'a':AB & 'b'", "( 'a' | 'b' ) <-> 'c'", "'a' &"])
def test_what_websearch_never_produces_is_refused(text: str) -> None:
    with pytest.raises((tsquery.UnsupportedQuery, IndexError)):
        tsquery.parse(text)


class BorrowCheckingWriterDouble:
    """Test double around the Tantivy writer: like the real one (a pyo3 object), it refuses
    two calls at once ("Already borrowed"), and each call takes a little while, so a close
    lands in the middle of a rebuild."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.busy = threading.Lock()

    def __getattr__(self, name: str) -> object:
        method = getattr(self.inner, name)

        def call(*args: object, **kwargs: object) -> object:
            if not self.busy.acquire(blocking=False):
                raise RuntimeError("Already borrowed")
            try:
                time.sleep(0.02)
                return method(*args, **kwargs)
            finally:
                self.busy.release()

        return call


async def test_closing_during_a_rebuild_stops_cleanly_and_rebuilds_next_time(
    db: AsyncEngine, tmp_path: Path
) -> None:
    transcripts = tmp_path / "t"
    corpus(transcripts, sessions=2)
    for path in sorted(transcripts.glob("*.jsonl")):
        await Ingestor(db, transcripts).ingest_file(path)
    index = SegmentSearchIndex(tmp_path / "idx", db)
    await index.open()  # no clean marker: a rebuild is queued in the background
    index._writer = BorrowCheckingWriterDouble(index._writer)  # before the rebuild runs
    await asyncio.sleep(0.3)
    assert not index.ready
    await asyncio.wait_for(index.close(), 30)  # must not hang on the cancelled rebuild
    assert not (tmp_path / "idx" / "CLEAN").exists()
    again = await open_index(tmp_path / "idx", db)  # rebuilt from PostgreSQL
    got, expected = await both(db, again, "coffee")
    assert got == expected and expected
    await again.close()
    assert (tmp_path / "idx" / "CLEAN").exists()


async def test_a_segment_is_also_found_by_the_turn_after_it(
    db: AsyncEngine, tmp_path: Path
) -> None:
    """`rankings` (inside a fused request): `bm25` by the turn before, `bm25_next` by the turn
    after; a turn arriving re-indexes the one before it."""
    transcripts = tmp_path / "t"
    transcripts.mkdir()
    index = await open_index(tmp_path / "idx", db)

    changed = applier(index)
    ingestor = Ingestor(db, transcripts, on_changed=changed)
    path = transcripts / "n1.jsonl"

    def say(i: int, speaker: str, words: str) -> None:
        seg = Segment(segment_id=f"t{i}", speaker=speaker, text=words, start=i * 3.0,
                      end=i * 3.0 + 2, stt_engine="test")  # fmt: skip
        payload = TranscriptPayload(
            session_id="n1", device_id="d", session_started_at=T0, segments=[seg]
        )
        append_records(transcripts, "n1", [payload])

    say(0, "Asha", "Did you end up adopting one?")
    say(1, "Ravi", "Yes, a beagle called Max.")
    say(2, "Asha", "How lovely.")
    await ingestor.ingest_file(path)
    leg = Bm25Leg(db, index)
    asked = ContextQuery(query="beagle", limit=5, as_of=T0 + timedelta(days=1))
    ranked = await leg.rankings(asked, 5)
    assert {c.segment_id for c in ranked["bm25"]} == {"t1", "t2"}  # itself, the turn after
    assert {c.segment_id for c in ranked["bm25_next"]} == {"t0", "t1"}  # the turn before
    assert [c.segment_id for c in await leg.search(asked, 5)] == [
        c.segment_id for c in ranked["bm25"]
    ]
    assert set(await Bm25Leg(db, index, next_turn=False).rankings(asked, 5)) == {"bm25"}

    say(3, "Ravi", "He chews every slipper in the flat.")
    await ingestor.ingest_file(path)
    slipper = ContextQuery(query="slipper", limit=5, as_of=asked.as_of)
    ranked = await leg.rankings(slipper, 5)
    assert {c.segment_id for c in ranked["bm25_next"]} == {"t2", "t3"}  # t2 indexed again
    await index.close()
