"""Promises: the deterministic fulfilment rule on sentences (kept, and near misses that must
not count), and through the real engine: detection after the promise's first mention and by
`as_of`, idempotency, GET /v1/promises, the manual mark, and the daily reflection's view."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from engine_harness import Engine, eventually, ingest, query, write_conversation

from context_engine.config import Settings
from context_engine.extract.language import stem
from context_engine.memory.promises import fulfils, promise_words, update_fulfilments

MOVERS = "I'll call the movers tomorrow morning"
TICKETS = "I'll book the train tickets to Pune"
CONTRACT = "I'll email Ravi the contract tonight"


@pytest.mark.parametrize(
    ("promise", "sentence", "promiser"),
    [
        (MOVERS, "I called the movers, they're coming on Friday.", "Priya"),
        (MOVERS, "I called the movers, they'll come Friday.", "Priya"),
        (MOVERS, "Priya called the movers this morning.", "Priya"),  # reported by someone else
        (MOVERS, "Already called the movers.", "Priya"),
        (MOVERS, "I took care of the movers.", "Priya"),
        (TICKETS, "I booked the train tickets last night.", "Asha"),
        (CONTRACT, "I emailed the contract to Ravi.", "Asha"),
        ("remind me to renew the passport", "I renewed my passport today.", "Asha"),
        ("I'll buy milk and eggs", "I bought the milk and the eggs.", "Asha"),
        (
            "I'll drop the parcel at the post office",
            "I dropped the parcel at the post office.",
            None,
        ),
    ],
)
def test_a_sentence_that_reports_the_promise_done(
    promise: str, sentence: str, promiser: str | None
) -> None:
    words = promise_words(promise)
    assert words is not None and fulfils(words, sentence, promiser)


@pytest.mark.parametrize(
    ("promise", "sentence"),
    [
        (MOVERS, "Did you call the movers?"),  # a question
        (MOVERS, "Not yet, I haven't called the movers."),  # negated
        (MOVERS, "I called the movers but nobody answered."),  # tried, not done
        (MOVERS, "I'm going to call the movers after lunch."),  # restated
        (MOVERS, "I should have called the movers."),
        (MOVERS, "The movers called me back."),  # someone else's act
        (MOVERS, "I called the plumber, the movers are next."),  # another object
        (TICKETS, "I booked the hotel in Pune."),  # one of three words: not enough
        (CONTRACT, "Ravi emailed me the contract."),  # the other way round
        ("I'll call him tomorrow", "I called him."),  # nothing to tell one call from another
    ],
)
def test_near_misses_do_not_count(promise: str, sentence: str) -> None:
    words = promise_words(promise)
    assert words is None or not fulfils(words, sentence, "Asha")


def test_words_of_a_promise() -> None:
    words = promise_words(TICKETS)
    assert words is not None
    assert (words.verb, words.objects, words.required) == ("book", ("train", "ticket", "pun"), 2)
    assert promise_words("I'll call him tomorrow") is None
    assert [stem(w) for w in ("movers", "called", "dropped", "replied", "booking")] == [
        "mover", "call", "drop", "reply", "book",
    ]  # fmt: skip


# --- through the engine ----------------------------------------------------------------------

DAY0 = datetime(2025, 5, 31, 10, 0, tzinfo=UTC)
DAY1 = datetime(2025, 6, 1, 10, 0, tzinfo=UTC)
DAY2 = datetime(2025, 6, 2, 10, 0, tzinfo=UTC)


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"vector_index_enabled": False})


async def write_memory(engine: Engine, settings: Settings) -> None:
    conversations = {
        # before any promise: "called the movers" here fulfils nothing
        "p0": (DAY0, [("Priya", "I called the movers last year for the old flat.")]),
        "p1": (DAY1, [
            ("Priya", f"{MOVERS}."),
            ("Asha", f"And {TICKETS}."),
            ("Asha", f"{CONTRACT}."),
        ]),
        "p2": (DAY2, [
            ("Asha", "Did you call the movers?"),
            ("Priya", "Not yet, I haven't called the movers."),
            ("Asha", "I booked the hotel in Pune."),
            ("Ravi", "I emailed the contract to you, Asha."),
            ("Priya", "I called the movers, they're coming on Friday."),
        ]),
    }  # fmt: skip
    for sid, (started, lines) in conversations.items():
        write_conversation(settings.transcripts_dir, sid, started, lines, step_s=10)
        await ingest(engine, sid)
    await engine.runtime.jobs.scan_idle()

    async def extracted() -> bool | None:
        rows = await query(
            engine,
            "SELECT count(*) AS n FROM session_stages WHERE stage = 'extract'"
            " AND status = 'done' AND completed_at IS NOT NULL",
        )
        return True if rows[0]["n"] == len(conversations) else None

    await eventually(extracted, "extraction of the three sessions")


async def promises(engine: Engine, **params: object) -> dict[str, Any]:
    r = await engine.get("/v1/promises", **params)
    assert r.status_code == 200, r.text
    return r.json()


def by_name(page: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in page["promises"]}


async def test_promises_open_kept_and_marked_by_hand(engine: Engine, settings: Settings) -> None:
    await write_memory(engine, settings)
    page = await promises(engine)
    assert page["total"] == 3 and set(by_name(page)) == {MOVERS, TICKETS, CONTRACT}
    movers = by_name(page)[MOVERS]
    assert movers["status"] == "open" and movers["fulfilled_at"] is None
    assert (movers["session_id"], movers["segment_id"], movers["speaker"]) == (
        "p1",
        "p1-0",
        "Priya",
    )
    assert movers["first_said_at"] == "2025-06-01T10:00:00Z"

    db = engine.runtime.db.main
    # As of before Priya says it is done: nothing is kept yet (the near misses do not count).
    assert await update_fulfilments(db, as_of=datetime(2025, 6, 2, 10, 0, 35, tzinfo=UTC)) == 0
    assert await update_fulfilments(db, as_of=datetime.now(UTC)) == 1
    assert await update_fulfilments(db, as_of=datetime.now(UTC)) == 0  # idempotent

    kept = await promises(engine, status="fulfilled")
    (item,) = kept["promises"]
    assert item["name"] == MOVERS and item["status"] == "fulfilled"
    assert item["fulfilled_by"] == "detected" and item["fulfilled_at"] == "2025-06-02T10:00:40Z"
    assert item["fulfilment_evidence"] == "I called the movers, they're coming on Friday."
    assert (item["fulfilment_session_id"], item["fulfilment_segment_id"]) == ("p2", "p2-4")
    assert set(by_name(await promises(engine))) == {TICKETS, CONTRACT}

    # Marked kept by hand: 200, and again 200 with the same mark; a detected one stays so.
    tickets = by_name(await promises(engine))[TICKETS]
    r = await engine.post(f"/v1/promises/{tickets['id']}/fulfil")
    assert r.status_code == 200, r.text
    marked = r.json()
    assert marked["status"] == "fulfilled" and marked["fulfilled_by"] == "manual"
    assert marked["fulfilment_session_id"] is None and marked["fulfilment_evidence"]
    r = await engine.post(f"/v1/promises/{tickets['id']}/fulfil")
    assert r.status_code == 200 and r.json()["fulfilled_at"] == marked["fulfilled_at"]
    r = await engine.post(f"/v1/promises/{item['id']}/fulfil")
    assert r.json()["fulfilled_by"] == "detected"
    assert (await engine.post("/v1/promises/999999/fulfil")).status_code == 404
    person = await query(engine, "SELECT id FROM entities WHERE type = 'person' LIMIT 1")
    assert (await engine.post(f"/v1/promises/{person[0]['id']}/fulfil")).status_code == 404

    everything = await promises(engine, status="all", limit=1, offset=1)
    assert everything["total"] == 3 and len(everything["promises"]) == 1
    assert everything["limit"] == 1 and everything["offset"] == 1
    assert [p["name"] for p in (await promises(engine))["promises"]] == [CONTRACT]
    assert (await engine.get("/v1/promises", status="done")).status_code == 422

    assert (await engine.client.get("/v1/promises")).status_code == 401
    assert (await engine.client.post(f"/v1/promises/{item['id']}/fulfil")).status_code == 401


async def test_the_daily_reflection_tells_made_kept_and_open(
    engine: Engine, settings: Settings
) -> None:
    await write_memory(engine, settings)
    day1 = (await engine.get("/v1/daily", date="2025-06-01")).json()
    made = day1["details"]["promises"]["made"]
    assert {p["name"] for p in made} == {MOVERS, TICKETS, CONTRACT}
    assert day1["details"]["promises"]["open_total"] == 3
    assert "3 promises were still open at the end of the day." in day1["text"]

    # The reflection of day 2 looks for fulfilments itself: the movers were called that day.
    day2 = (await engine.get("/v1/daily", date="2025-06-02")).json()
    promises_ = day2["details"]["promises"]
    assert [p["name"] for p in promises_["kept"]] == [MOVERS]
    assert {p["name"] for p in promises_["open"]} == {TICKETS, CONTRACT}
    assert [p["name"] for p in day2["promises_kept"]] == [MOVERS]
    kept = (
        "Priya kept the promise to call the movers tomorrow morning (made on Sunday 1 June 2025)."
    )
    assert kept in day2["what_happened"] and kept in day2["text"].split("\n\n")[0]
    assert "Still open from earlier days:" in day2["text"]

    # Day 1 is as of its own end, when the movers were still open: a later fulfilment
    # changes nothing there, so it is not made again.
    assert (await engine.get("/v1/daily", date="2025-06-01")).json() == day1
