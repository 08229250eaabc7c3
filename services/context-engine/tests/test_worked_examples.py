"""Acceptance tests of the memory design's worked examples, end to end through the real engine
(fast extractor, no LLM, real PostgreSQL and FalkorDB) and asserted through the HTTP API only.

One household's four months, spoken as JSONL sessions in the past: Arjun (the owner) with his
wife Meera, his colleague Sameer and his friend Rohan. Coffee from day 0 until a switch to tea
on day 95; Asics running shoes until Brooks on day 70; Meera introduced as "my wife"; his
sister Kavya in Pune until she moves to Hyderabad; the Jayanagar neighbourhood in four sessions
over 35 days; a promise to call Farhan, kept three days later.

Sessions are written in day order; each is ingested (finalised at once: it is long silent),
extracted and written to the graph before the next, and the consolidation runs the night after
each session day as the nightly job would (coffee can only be L1 on day 120 if a night
promoted it before the day-95 contradiction blocked promotion), then as of day 120. One engine
serves the whole module.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from engine_harness import (
    Engine,
    graph_engine_settings,
    ingest,
    stages_done,
    start_graph_engine,
    write_conversation,
)

pytestmark = [pytest.mark.platform, pytest.mark.asyncio(loop_scope="module")]

OWNER = "Arjun"
STEP_S = 5.0  # write_conversation's spacing: segment i is spoken i * STEP_S after the start
DAY0 = datetime(2025, 2, 3, 0, 0, tzinfo=UTC)  # a Monday
LAST_DAY = 120
# Predicates saying a thing is liked, drunk, used or owned now (an "on" state).
LIKING = {"likes", "loves", "enjoys", "prefers", "drinks"}
HAVING = LIKING | {"uses", "owns"}
RESIDENCE = {"lives_in", "moved_to"}


def day(n: float, hour: int = 0, minute: int = 0) -> datetime:
    return DAY0 + timedelta(days=n, hours=hour, minutes=minute)


@dataclass(frozen=True)
class Session:
    session_id: str
    started_at: datetime
    lines: list[tuple[str, str]]

    def spoken_at(self, index: int) -> datetime:
        return self.started_at + timedelta(seconds=index * STEP_S)


SESSIONS: list[Session] = [
    Session("s000", day(0, 8, 40), [
        ("Sameer", "Morning Arjun. You look half asleep."),
        ("Arjun", "I am. I love coffee, and the machine on our floor is broken again."),
        ("Sameer", "Arjun, there's a tiny bakery in Jayanagar that does proper filter coffee."),
        ("Arjun", "That's right by our flat, Meera and I walk past it most evenings."),
    ]),
    Session("s003", day(3, 7, 15), [
        ("Meera", "Arjun, do you want coffee before your run?"),
        ("Arjun", "Yes please, I drink coffee every morning, you know that."),
        ("Arjun", "And I love my Asics running shoes, they still feel new after six months."),
        ("Meera", "Let's have breakfast at that bakery in Jayanagar after your run, Arjun."),
    ]),
    Session("s008", day(8, 13, 20), [
        ("Sameer", "Arjun, your sister Kavya dropped off a box of sweets at reception."),
        ("Arjun", "That's so like her. Kavya lives in Pune, she must be here for a conference."),
        ("Sameer", "Lucky you. Want to grab a coffee with her?"),
        ("Arjun", "Definitely, I love coffee after lunch."),
    ]),
    Session("s012", day(12, 20, 10), [
        ("Rohan", "How do you keep track of everyone's birthdays?"),
        ("Arjun", "I don't. Meera, my wife, remembers every single one for me."),
        ("Rohan", "Smart man. Still running on weekends?"),
        ("Arjun", "Every Sunday. I really love my Asics for the long runs."),
    ]),
    Session("s020", day(20, 18, 45), [
        ("Meera", "Kavya says the rain in Pune has been terrible this year."),
        ("Arjun", "She can't complain, Kavya lives in Pune because of the monsoon."),
        ("Arjun", "Meera, let's get vegetables at the Jayanagar market on Saturday."),
    ]),
    Session("s035", day(35, 9, 5), [
        ("Sameer", "You're late today."),
        ("Arjun", "Traffic. I love coffee from that little cart by the gate, worth the wait."),
        ("Arjun", "Good news, the flat in Jayanagar finally has hot water, Meera is thrilled."),
        ("Arjun", "And I love my Asics more every week, no knee pain at all."),
    ]),
    Session("s060", day(60, 19, 0), [  # a Friday
        ("Meera", "Farhan messaged again, he thinks you've forgotten him."),
        ("Arjun", "I know, I know. I promise I will call Farhan this weekend."),
        ("Meera", "Good, it's been months since you two spoke."),
    ]),
    Session("s063", day(63, 8, 30), [  # the Monday after
        ("Meera", "How was your weekend?"),
        ("Arjun", "Good. I called Farhan on Sunday, we talked for two hours about college."),
    ]),
    Session("s070", day(70, 7, 50), [
        ("Sameer", "New shoes?"),
        ("Arjun", "Yes, and these Brooks shoes are fantastic, I switched from Asics for my runs."),
        ("Sameer", "Maybe I should try them too."),
    ]),
    Session("s088", day(88, 21, 0), [
        ("Meera", "Has Kavya settled in?"),
        ("Arjun", "Mostly. Kavya moved to Hyderabad last week, her new team is based there."),
    ]),
    Session("s095", day(95, 8, 0), [
        ("Meera", "Shall I make you a coffee?"),
        ("Arjun", "No thanks. I've been switching to tea, coffee keeps giving me headaches."),
        ("Meera", "Tea it is, then."),
    ]),
    Session("s110", day(110, 17, 30), [
        ("Sameer", "Did the release go out?"),
        ("Arjun", "Yes, on Tuesday, and no rollbacks so far."),
    ]),
]  # fmt: skip
BY_ID = {s.session_id: s for s in SESSIONS}
TEA_SWITCH = ("s095", 1)  # (session, segment index) of "I've been switching to tea"
SHOE_SWITCH = ("s070", 1)
MOVE = ("s088", 1)
PROMISE = ("s060", 1)
KEPT = ("s063", 1)


def spoken(at: tuple[str, int]) -> datetime:
    session_id, index = at
    return BY_ID[session_id].spoken_at(index)


def segment_id(at: tuple[str, int]) -> str:
    return f"{at[0]}-{at[1]}"


# --- the shared engine ------------------------------------------------------------------------


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def engine(
    module_database: str, falkordb_server: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Engine]:
    """The engine with the four months spoken, graphed and consolidated night by night."""
    root: Path = tmp_path_factory.mktemp("worked-examples")
    settings = graph_engine_settings(root, module_database, falkordb_server)
    async for e in start_graph_engine(settings):
        for session in SESSIONS:
            write_conversation(
                settings.transcripts_dir,
                session.session_id,
                session.started_at,
                session.lines,
                step_s=STEP_S,
            )
            await ingest(e, session.session_id)
            await stages_done(e, session.session_id, deadline_s=120)
            night = session.started_at.replace(hour=3, minute=0) + timedelta(days=1)
            await consolidate(e, night)
        await consolidate(e, day(LAST_DAY, 3))
        yield e


async def consolidate(engine: Engine, as_of: datetime) -> dict[str, Any]:
    r = await engine.post("/v1/consolidate", as_of=as_of.isoformat(), wait="true")
    assert r.status_code == 200, r.text
    run = r.json()
    assert run["status"] == "done", run
    return run


# --- reading the API --------------------------------------------------------------------------


async def get_json(engine: Engine, path: str, **params: object) -> dict[str, Any]:
    r = await engine.get(path, **params)
    assert r.status_code == 200, f"{path} {params}: {r.status_code} {r.text}"
    return r.json()


async def facts_at(engine: Engine, when: datetime) -> list[dict[str, Any]]:
    return (await get_json(engine, "/v1/facts", as_of=when.isoformat(), limit=1000))["facts"]


async def entity(engine: Engine, type_: str, name: str) -> dict[str, Any]:
    """The one entity of that type and name (any case)."""
    page = await get_json(engine, "/v1/entities", type=type_, q=name, limit=500)
    found = [e for e in page["entities"] if e["name"].casefold() == name.casefold()]
    assert len(found) == 1, (type_, name, page["entities"])
    return found[0]


async def all_facts_of(engine: Engine, type_: str, name: str) -> list[dict[str, Any]]:
    """Every fact around an entity, ended ones included (GET /v1/graph/entities/{id})."""
    found = await entity(engine, type_, name)
    return (await get_json(engine, f"/v1/graph/entities/{found['id']}"))["facts"]


def pred(fact: dict[str, Any]) -> str:
    return str(fact["predicate"]).casefold()


def about(
    facts: list[dict[str, Any]], subject: str, predicates: set[str], obj: str
) -> list[dict[str, Any]]:
    """Facts of `subject` with one of `predicates` whose object names `obj` (any case)."""
    return [
        f
        for f in facts
        if f["subject"].casefold() == subject.casefold()
        and pred(f) in predicates
        and obj.casefold() in f["object"].casefold()
    ]


def between(facts: list[dict[str, Any]], a: str, b: str, predicate: str) -> list[dict[str, Any]]:
    """Facts joining a and b (either direction) with that predicate."""
    pair = {a.casefold(), b.casefold()}
    return [
        f
        for f in facts
        if pred(f) == predicate and {f["subject"].casefold(), f["object"].casefold()} == pair
    ]


def at(value: str | None) -> datetime:
    assert value is not None
    t = datetime.fromisoformat(value)
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def said_in(fact: dict[str, Any]) -> set[str]:
    return {s["session_id"] for s in fact["sources"]}


def brief(facts: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Facts as short tuples, for failure messages."""
    return [
        (f["subject"], f["predicate"], f["object"], f["valid_at"], f["invalid_at"]) for f in facts
    ]


# --- the worked examples ----------------------------------------------------------------------


async def test_coffee_gives_way_to_tea(engine: Engine) -> None:
    end = await facts_at(engine, day(LAST_DAY, 3))
    # Now: Arjun likes or drinks tea; no fact says he still likes or drinks coffee.
    tea = about(end, OWNER, LIKING, "tea")
    assert tea, brief(about(end, OWNER, HAVING | {"avoids", "switched_from"}, ""))
    assert all(said_in(f) == {"s095"} for f in tea), brief(tea)
    assert about(end, OWNER, LIKING, "coffee") == [], brief(about(end, OWNER, LIKING, "coffee"))

    # Before the switch he did.
    before = about(await facts_at(engine, day(90)), OWNER, LIKING, "coffee")
    assert {"s000", "s008", "s035"} <= set().union(*map(said_in, before)), brief(before)

    # History: the coffee facts ended when the switch was said, and the switch ended them.
    history = await all_facts_of(engine, "person", OWNER)
    liked = about(history, OWNER, LIKING, "coffee")
    assert liked, brief(history)
    for f in liked:
        assert abs(at(f["invalid_at"]) - spoken(TEA_SWITCH)) < timedelta(hours=1), brief([f])
        assert f["expired_at"] is not None
    coffee = await entity(engine, "topic", "coffee")
    detail = await get_json(engine, f"/v1/entities/{coffee['id']}")
    ended = {c["fact_uuid"]: c for c in detail["contradictions"]}
    assert {f["uuid"] for f in liked} <= set(ended), detail["contradictions"]
    enders = {f["uuid"]: f for f in history}
    for f in liked:
        ender = enders.get(ended[f["uuid"]]["invalidated_by"])
        assert ender is not None and "s095" in said_in(ender), (ended[f["uuid"]], brief(history))

    # /v1/facts with history: what used to be, and the fact said on day 95 that ended it.
    page = await get_json(
        engine, "/v1/facts", as_of=day(LAST_DAY, 3).isoformat(), subject=OWNER, history="true",
        limit=1000,
    )  # fmt: skip
    past = about(page["facts"], OWNER, LIKING, "coffee")
    assert past and all(f["current"] is False for f in past), brief(past)
    for f in past:
        assert f["ended_by"]["uuid"] in enders, f["ended_by"]
        assert "s095" in said_in(enders[f["ended_by"]["uuid"]])
        assert "coffee" in f["ended_by"]["fact"].lower() or "tea" in f["ended_by"]["fact"].lower()
    assert all(f["current"] for f in about(page["facts"], OWNER, LIKING, "tea"))

    # Tiers: coffee was validated (L1) before the switch and stays L1, contradicted; tea is new.
    assert (coffee["tier"], coffee["contradicted"]) == ("L1", True), coffee
    assert coffee["episode_count"] == 5, coffee  # days 0, 3, 8, 35, 95
    tea_topic = await entity(engine, "topic", "tea")
    assert (tea_topic["tier"], tea_topic["contradicted"]) == ("L0", False), tea_topic
    changes = (await get_json(engine, "/v1/tiers/stats", recent=500))["recent_changes"]
    promoted = [c for c in changes if c["name"] == "coffee" and c["type"] == "topic"]
    assert [(c["from_tier"], c["to_tier"]) for c in promoted] == [("L0", "L1")], promoted
    assert at(promoted[0]["changed_at"]) == day(9, 3)  # the night after its third session


async def test_asics_give_way_to_brooks(engine: Engine) -> None:
    end = await facts_at(engine, day(LAST_DAY, 3))
    brooks = about(end, OWNER, HAVING, "brooks")
    assert brooks, brief(about(end, OWNER, HAVING | {"switched_from"}, ""))
    assert all(abs(at(f["valid_at"]) - spoken(SHOE_SWITCH)) < timedelta(hours=1) for f in brooks)
    assert about(end, OWNER, HAVING, "asics") == [], brief(about(end, OWNER, HAVING, "asics"))

    liked = about(await facts_at(engine, day(60)), OWNER, HAVING, "asics")
    assert {"s003", "s012", "s035"} <= set().union(*map(said_in, liked)), brief(liked)

    history = about(await all_facts_of(engine, "person", OWNER), OWNER, HAVING, "asics")
    assert history
    for f in history:
        assert abs(at(f["invalid_at"]) - spoken(SHOE_SWITCH)) < timedelta(hours=1), brief([f])


async def test_the_wife_named_in_passing_is_the_speaker(engine: Engine) -> None:
    end = await facts_at(engine, day(LAST_DAY, 3))
    spouses = between(end, OWNER, "Meera", "spouse")
    assert len(spouses) == 1, brief(end)
    spouse = spouses[0]
    assert spouse["invalid_at"] is None and "s012" in said_in(spouse)
    source = next(s for s in spouse["sources"] if s["session_id"] == "s012")
    assert source["segment_id"] == "s012-1" and source["speaker"] == OWNER

    # Meera, who speaks in six sessions, is one person entity, and the spouse fact is hers.
    meera = await entity(engine, "person", "Meera")
    assert meera["type"] == "person"
    around = await get_json(engine, f"/v1/graph/entities/{meera['id']}")
    assert spouse["uuid"] in {f["uuid"] for f in around["facts"]}, brief(around["facts"])


async def test_the_sister_moves_from_pune_to_hyderabad(engine: Engine) -> None:
    end = await facts_at(engine, day(LAST_DAY, 3))
    sibling = between(end, OWNER, "Kavya", "sibling")
    assert sibling and "s008" in set().union(*map(said_in, sibling)), brief(end)

    # Kavya lived in Pune from day 8; on day 88 she had moved to Hyderabad "last week".
    assert about(await facts_at(engine, day(50)), "Kavya", RESIDENCE, "pune")
    assert about(end, "Kavya", RESIDENCE, "pune") == [], brief(about(end, "Kavya", RESIDENCE, ""))
    now = about(end, "Kavya", RESIDENCE, "hyderabad")
    assert len(now) == 1, brief(about(end, "Kavya", RESIDENCE | {"moved_from", "lived_in"}, ""))
    hyderabad = now[0]
    moved = at(hyderabad["valid_at"])
    assert abs(moved - (spoken(MOVE) - timedelta(days=7))) <= timedelta(days=3), hyderabad
    assert said_in(hyderabad) == {"s088"}

    history = about(await all_facts_of(engine, "person", "Kavya"), "Kavya", RESIDENCE, "pune")
    assert history
    for f in history:
        assert at(f["invalid_at"]) == moved, brief([f])


async def test_the_neighbourhood_becomes_a_deep_pattern(engine: Engine) -> None:
    named = (await get_json(engine, "/v1/entities", q="Jayanagar"))["entities"]
    assert [(e["type"], e["episode_count"]) for e in named] == [("place", 4)], named
    jayanagar = await entity(engine, "place", "Jayanagar")
    assert jayanagar["episode_count"] == 4, jayanagar  # days 0, 3, 20, 35
    assert at(jayanagar["first_seen"]) == spoken(("s000", 2))
    assert at(jayanagar["last_seen"]) == spoken(("s035", 2))
    assert jayanagar["tier"] == "L2", jayanagar
    # 85 days unsaid: 2^(-85/30) = 0.14, held at the evergreen floor of places.
    assert jayanagar["salience"] == pytest.approx(0.3), jayanagar
    assert jayanagar["community_id"] is not None


async def test_the_promise_to_call_farhan_is_kept(engine: Engine) -> None:
    page = await get_json(engine, "/v1/promises", status="all")
    assert page["total"] == 1, page["promises"]
    (promise,) = page["promises"]
    assert "call Farhan" in promise["name"], promise
    assert (promise["session_id"], promise["segment_id"], promise["speaker"]) == (
        PROMISE[0],
        segment_id(PROMISE),
        OWNER,
    )
    assert at(promise["first_said_at"]) == spoken(PROMISE)
    assert (promise["status"], promise["fulfilled_by"]) == ("fulfilled", "detected"), promise
    assert (promise["fulfilment_session_id"], promise["fulfilment_segment_id"]) == (
        KEPT[0],
        segment_id(KEPT),
    )
    assert "called Farhan" in promise["fulfilment_evidence"]


async def test_asking_about_the_drink_finds_the_switch(engine: Engine) -> None:
    r = await get_json(
        engine,
        "/v1/context",
        query="Does Arjun still drink coffee?",
        as_of=day(LAST_DAY, 3).isoformat(),
        limit=10,
    )
    top = [x["segment_id"] for x in r["results"][:3]]
    assert segment_id(TEA_SWITCH) in top, [(x["segment_id"], x["text"]) for x in r["results"]]


# --- what /v1/context knows (issue 24) --------------------------------------------------------


async def context(engine: Engine, query: str, when: datetime, **params: object) -> dict[str, Any]:
    return await get_json(
        engine, "/v1/context", query=query, as_of=when.isoformat(), limit=10, **params
    )


async def test_context_answers_the_owner_with_what_is_true_now(engine: Engine) -> None:
    # "I" is the owner: nobody configured him; he is the speaker heard most.
    r = await context(engine, "Do I still like coffee?", day(LAST_DAY, 3))
    assert r["facts_status"] == "ok"
    named = {(s["type"], s["name"].casefold(), s["owner"]) for s in r["about"]}
    assert ("person", OWNER.casefold(), True) in named, r["about"]
    assert any(t == "topic" and n == "coffee" for t, n, _ in named), r["about"]
    facts = r["facts"]
    assert facts, r
    # Only what is true at as_of, the switch first; nothing says he still likes coffee.
    assert all(f["current"] and f["invalid_at"] is None for f in facts), brief(facts)
    assert about(facts, OWNER, LIKING, "coffee") == [], brief(facts)
    first = facts[0]
    assert said_in(first) == {"s095"}, brief(facts)
    assert at(first["since"]).date() == spoken(TEA_SWITCH).date()
    # ... and it says what it replaced: the coffee he liked or drank before.
    replaced = [x for f in facts for x in f["replaced"]]
    assert any("coffee" in x["object"].casefold() for x in replaced), facts
    assert all(at(x["invalid_at"]) <= at(first["since"]) for x in first["replaced"]), first
    # The segment behind the current fact ranks above the ones behind the ended facts.
    ids = [x["segment_id"] for x in r["results"]]
    assert segment_id(TEA_SWITCH) in ids[:3], [(x["segment_id"], x["text"]) for x in r["results"]]


async def test_context_facts_are_those_of_as_of(engine: Engine) -> None:
    r = await context(engine, "Does Arjun like coffee?", day(90))
    liked = about(r["facts"], OWNER, LIKING, "coffee")
    assert liked, brief(r["facts"])
    assert about(r["facts"], OWNER, LIKING, "tea") == [], brief(r["facts"])


async def test_context_knows_where_a_named_person_lives(engine: Engine) -> None:
    r = await context(engine, "Where does Kavya live these days?", day(LAST_DAY, 3))
    assert [s["name"] for s in r["about"] if s["type"] == "person"] == ["Kavya"], r["about"]
    homes = about(r["facts"], "Kavya", RESIDENCE, "")
    assert [f["object"].casefold() for f in homes] == ["hyderabad"], brief(r["facts"])
    assert any(x["object"].casefold() == "pune" for x in homes[0]["replaced"]), homes
    # "me" overrides the owner: Meera asking about herself is not about Arjun.
    mine = await context(engine, "Who am I married to?", day(LAST_DAY, 3), me="Meera")
    assert [s["name"] for s in mine["about"] if s["owner"]] == ["Meera"], mine["about"]


async def test_context_without_known_subjects_has_no_facts(engine: Engine) -> None:
    r = await context(engine, "What happened with the release?", day(LAST_DAY, 3))
    assert r["facts_status"] == "ok"
    assert r["about"] == [] and r["facts"] == []
    assert r["results"], r


async def test_the_profile_says_who_someone_is(engine: Engine) -> None:
    wife = await entity(engine, "person", "Meera")
    p = await get_json(
        engine, f"/v1/entities/{wife['id']}/profile", as_of=day(LAST_DAY, 3).isoformat()
    )
    assert p["entity"]["id"] == wife["id"] and p["facts_status"] == "ok"
    assert between(p["relations"], OWNER, "Meera", "spouse"), brief(p["relations"])
    assert all(f["current"] for f in p["relations"] + p["facts"])
    # Mentioned from the first session on; the sessions that talk most about her first.
    assert p["first_mention"]["session_id"] == "s000", p["first_mention"]
    assert at(p["last_mention"]["spoken_at"]) <= day(LAST_DAY, 3)
    counts = [s["mentions"] for s in p["sessions"]]
    assert counts == sorted(counts, reverse=True) and len(counts) <= 5, p["sessions"]


async def test_the_profile_says_what_changed(engine: Engine) -> None:
    sister = await entity(engine, "person", "Kavya")
    url = f"/v1/entities/{sister['id']}/profile"
    now = await get_json(engine, url, as_of=day(LAST_DAY, 3).isoformat())
    homes = about(now["facts"], "Kavya", RESIDENCE, "")
    assert [f["object"].casefold() for f in homes] == ["hyderabad"], brief(now["facts"])
    pune = about(now["changes"], "Kavya", RESIDENCE, "pune")
    assert pune and all(not f["current"] for f in pune), brief(now["changes"])
    assert all("hyderabad" in (f["ended_by"]["fact"] or "").casefold() for f in pune), pune
    assert between(now["relations"], OWNER, "Kavya", "sibling"), brief(now["relations"])
    # As of before the move, Pune is current and nothing has changed yet.
    before = await get_json(engine, url, as_of=day(80).isoformat())
    assert [f["object"].casefold() for f in about(before["facts"], "Kavya", RESIDENCE, "")] == [
        "pune"
    ], brief(before["facts"])
    assert about(before["changes"], "Kavya", RESIDENCE, "") == []
    missing = await engine.get("/v1/entities/999999999/profile")
    assert missing.status_code == 404
