"""Memory searches started from a voice transcript before the turn ends (lookahead.py), and
how the chat service keeps them true to what the engine has forgotten."""

from __future__ import annotations

import asyncio

from annie_doubles import TOKEN, EngineDouble, memory

from annie_voice.config import Settings
from annie_voice.engine import EngineUnavailableError, Memory
from annie_voice.llm.offline import SEARCH_LIMIT, OfflineMemoryResponder
from annie_voice.lookahead import MemoryLookahead, query_key
from annie_voice.runtime import Runtime


class SearchDouble:
    """A memory search that answers when released (a test double)."""

    def __init__(self, fail: bool = False) -> None:
        self.queries: list[str] = []
        self.fail = fail
        self.release = asyncio.Event()

    async def __call__(self, query: str) -> list[Memory]:
        self.queries.append(query)
        await self.release.wait()
        if self.fail:
            raise EngineUnavailableError("timeout")
        return [Memory(text=f"about {query}")]


def test_the_same_words_are_the_same_query() -> None:
    assert query_key("Where is Priya moving to?") == query_key("where is  priya moving to")
    assert query_key("Where is Priya moving") != query_key("Where is Priya moving to?")
    assert query_key(" ?! ") == ""


async def test_a_started_search_is_taken_once_and_not_repeated() -> None:
    search = SearchDouble()
    lookahead = MemoryLookahead(search)
    lookahead.start("Where is Priya moving to?", "3:0")
    lookahead.start("where is Priya moving to", "3:0")  # the same words again: not repeated
    assert lookahead.pending("Where is Priya moving to?")
    search.release.set()
    found = await lookahead.take("Where is Priya moving to")
    assert found == [Memory(text="about Where is Priya moving to?")]
    assert search.queries == ["Where is Priya moving to?"]
    assert await lookahead.take("Where is Priya moving to") is None  # taken: gone
    assert lookahead.stats() == {"used": 1, "unused": 0, "pending": 0}


async def test_nothing_starts_without_a_forget_marker_or_words() -> None:
    search = SearchDouble()
    lookahead = MemoryLookahead(search)
    lookahead.start("Where is Priya?", None)  # the engine did not say what it forgot
    lookahead.start("…", "1:0")
    await asyncio.sleep(0)
    assert search.queries == [] and len(lookahead) == 0


async def test_searches_under_another_marker_are_dropped() -> None:
    search = SearchDouble()
    lookahead = MemoryLookahead(search)
    lookahead.start("Where is Priya?", "1:0")
    lookahead.start("Who is Ravi?", "2:1")
    lookahead.keep_only("2:1")
    assert not lookahead.pending("Where is Priya?") and lookahead.pending("Who is Ravi?")
    lookahead.keep_only(None)  # the marker is unknown now: none can be trusted
    assert len(lookahead) == 0
    assert lookahead.stats()["unused"] == 2


async def test_old_failed_or_evicted_searches_leave_the_caller_to_search() -> None:
    search = SearchDouble(fail=True)
    search.release.set()
    failing = MemoryLookahead(search)
    failing.start("Where is Priya?", "1:0")
    assert await failing.take("Where is Priya?") is None  # failed: the turn searches itself
    stale = MemoryLookahead(SearchDouble(), ttl_s=0.0)
    stale.start("Where is Priya?", "1:0")
    assert await stale.take("Where is Priya?") is None  # too old
    small = MemoryLookahead(SearchDouble(), capacity=2)
    for query in ("one thing", "two things", "three things"):
        small.start(query, "1:0")
    assert not small.pending("one thing") and len(small) == 2


def offline_runtime(engine: EngineDouble) -> Runtime:
    return Runtime(
        Settings(internal_token=TOKEN, events_enabled=False),
        engine_transport=engine.transport(),
    )


def searches(engine: EngineDouble, query: str) -> int:
    """The offline responder's searches for `query` (a briefing asks with another limit)."""
    return sum(
        r.url.params.get("query") == query and r.url.params.get("limit") == str(SEARCH_LIMIT)
        for r in engine.context_requests
    )


async def answer(runtime: Runtime, session_id: str, text: str) -> dict:
    session, new = await runtime.chat.open_session(session_id)
    events = [e async for e in runtime.chat.turn(session, text, new=new)]
    return {e.event: e.data for e in events}


async def test_a_prepared_turn_takes_the_search_already_made() -> None:
    question = "Where is Priya moving to?"
    engine = EngineDouble(memories=[memory("I am moving to Lisbon in March.")], forgets=[])
    runtime = offline_runtime(engine)
    responder = runtime.backend
    assert isinstance(responder, OfflineMemoryResponder)
    try:
        await runtime.chat.open_session("voice-1")  # the session opens (and is briefed) first
        await runtime.chat.prepare(question)  # the transcript, before the turn ends
        assert responder.lookahead.pending(question)
        done = (await answer(runtime, "voice-1", question))["done"]
        assert "Lisbon" in done["text"]
        assert searches(engine, question) == 1  # the turn did not search again
        status = await runtime.status()
        assert status["lookahead"] == {"used": 1, "unused": 0, "pending": 0}
        # A turn whose final words differ (the user went on speaking) searches as always.
        await runtime.chat.prepare("Where is Priya")
        await answer(runtime, "voice-1", "Where is Priya moving to, and when?")
        assert searches(engine, "Where is Priya moving to, and when?") == 1
    finally:
        await runtime.stop()


async def test_a_forget_between_the_transcript_and_the_turn_is_respected() -> None:
    question = "Where is Priya moving to?"
    engine = EngineDouble(memories=[memory("I am moving to Lisbon in March.")], forgets=[])
    runtime = offline_runtime(engine)
    try:
        await runtime.chat.open_session("voice-1")
        await answer(runtime, "voice-1", "hello")
        await runtime.chat.prepare(question)  # searched while Priya was still remembered
        await asyncio.sleep(0)
        # The owner forgets Priya before the turn ends: the engine's marker changes.
        engine.memories = [memory("Ravi bought mangoes", speaker="Ravi")]
        engine.forgets = [{"request_id": 1, "status": "pending"}]
        engine.unfinished = 1
        events = await answer(runtime, "voice-1", question)
        assert events["session"]["memory_reset"] is True
        # Priya is forgotten: what is left says nothing of her, and the answer says so.
        said = events["done"]["text"]
        assert "Lisbon" not in said and "nothing is remembered about Priya" in said
        assert searches(engine, question) == 2  # the prepared search was dropped
    finally:
        await runtime.stop()


async def test_without_the_engines_forget_marker_nothing_is_prepared() -> None:
    # An engine without GET /v1/forget (404): the marker is unknown, so no lookahead.
    engine = EngineDouble(memories=[memory("I am moving to Lisbon in March.")])
    runtime = offline_runtime(engine)
    try:
        await runtime.chat.prepare("Where is Priya moving to?")
        assert len(runtime.backend.lookahead) == 0
        done = (await answer(runtime, "voice-1", "Where is Priya moving to?"))["done"]
        assert "Lisbon" in done["text"]
    finally:
        await runtime.stop()
