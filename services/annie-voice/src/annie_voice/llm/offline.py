"""The offline memory responder: Annie without a language model. It answers from
`/v1/context` in plain sentences ("On Tuesday, Priya said: “…”."), picks the best one to
three memories, and says plainly when it found nothing and what it cannot do."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Collection, Sequence
from datetime import UTC, date, datetime, tzinfo
from zoneinfo import ZoneInfo

from annie_voice.briefing import clean
from annie_voice.engine import EngineClient, EngineUnavailableError, Memory
from annie_voice.llm.base import Message, StreamEvent, TextDelta, Tool
from annie_voice.lookahead import MemoryLookahead

LIMITS = (
    "I'm answering from your memories only: no language model is configured, so I can't use "
    "general knowledge, search the web or run tools."
)
# Diarization labels that name nobody.
_ANONYMOUS = re.compile(r"^(speaker[_ ]?\d+|unknown[_ ]?\d+|unknown|spk\d+)$", re.IGNORECASE)
# A sentence: up to a full stop, question or exclamation mark (and a closing quote) followed
# by spaces or the end; or the rest of the text.
_SENTENCE_PIECE = re.compile(r".+?[.!?][”\"’)]*(?:\s+|$)|.+$", re.DOTALL)
GIST_CHARS = 180
_WORD = re.compile(r"\w+")
# Words a question shares with any sentence, which say nothing about which sentence answers it.
_COMMON = frozenset(
    "the and are was were what where when who whom why how did does you your about that this "
    "with for from have has had".split()
)
SEARCH_LIMIT = 8
# How an answer opens: one memory, or several.
LEAD_ONE = "Here's what I found."
LEAD_MANY = "Here's what I remember."


def relative_day(when: datetime, now: datetime, zone: tzinfo) -> str:
    """`today`, `yesterday`, `on Tuesday` (within the week), `on 3 May`, `on 3 May 2024`."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    day: date = when.astimezone(zone).date()
    today: date = now.astimezone(zone).date()
    delta = (today - day).days
    if delta == 0:
        return "today"
    if delta == 1:
        return "yesterday"
    if 1 < delta < 7:
        return f"on {day.strftime('%A')}"
    if day.year == today.year:
        return f"on {day.day} {day.strftime('%B')}"
    return f"on {day.day} {day.strftime('%B')} {day.year}"


def sentences(text: str) -> list[str]:
    """`text` cut after each sentence's end (and the spaces after it); joined, it is `text`."""
    return [part for part in _SENTENCE_PIECE.findall(text) if part]


def _telling(query: str) -> set[str]:
    """The words of `query` that can tell one sentence from another (3+ letters, not common)."""
    words = _WORD.findall(query.casefold())
    return {w for w in words if len(w) >= 3 and w not in _COMMON}


def gist(text: str, query: str = "") -> str:
    """The sentence of `text` sharing the most telling words with `query` (the first on a tie,
    or without a query), at most GIST_CHARS characters, without its final full stop. A
    segment often holds more than one sentence, and the one asked about need not lead."""
    parts = [part.strip() for part in sentences(clean(text))] or [""]
    wanted = _telling(query)
    first = max(parts, key=lambda part: len(wanted & set(_WORD.findall(part.casefold()))))
    if len(first) > GIST_CHARS:
        cut = first[:GIST_CHARS].rsplit(" ", 1)[0]
        first = cut + "…"
    return first.rstrip(" .")


def who(speaker: str | None, owner_speakers: Collection[str]) -> str:
    if not speaker or _ANONYMOUS.match(speaker.strip()):
        return "someone"
    if speaker.strip().casefold() in {s.casefold() for s in owner_speakers}:
        return "you"
    return clean(speaker)[:64]


def pick(memories: Sequence[Memory], most: int = 3) -> list[Memory]:
    """The best memory and up to `most - 1` more that score at least half as well; the same
    words said twice count once."""
    ranked = sorted(memories, key=lambda m: m.score, reverse=True)
    chosen: list[Memory] = []
    seen: set[str] = set()
    for m in ranked:
        key = clean(m.text).casefold()
        if not key or key in seen:
            continue
        if chosen and m.score < chosen[0].score * 0.5:
            break
        seen.add(key)
        chosen.append(m)
        if len(chosen) == most:
            break
    return chosen


def sentence(
    memory: Memory, now: datetime, zone: tzinfo, owner_speakers: Collection[str], query: str = ""
) -> str:
    speaker = who(memory.speaker, owner_speakers)
    said = f"{speaker} said: “{gist(memory.text, query)}”."
    if memory.timestamp is None:
        return said[0].upper() + said[1:]
    day = relative_day(memory.timestamp, now, zone)
    return f"{day[0].upper()}{day[1:]}, {said}"


def compose(
    query: str,
    memories: Sequence[Memory],
    *,
    now: datetime,
    zone: tzinfo,
    owner_speakers: Collection[str],
    first_turn: bool,
) -> str:
    shown_query = gist(query)
    best = pick(memories)
    if not best:
        return (
            f"I looked through your memories for “{shown_query}” and found nothing about it. "
            f"{LIMITS}"
        )
    lead = LEAD_MANY if len(best) > 1 else LEAD_ONE
    lines = [sentence(m, now, zone, owner_speakers, query) for m in best]
    text = " ".join([lead, *lines])
    return f"{text} {LIMITS}" if first_turn else text


class OfflineMemoryResponder:
    """The `none` backend: memory search turned into sentences, streamed sentence by sentence."""

    name = "none"
    supports_tools = False
    # Sentences it says often, which a voice can synthesise ahead of time.
    phrases = (LEAD_ONE, LEAD_MANY)

    def __init__(
        self,
        engine: EngineClient,
        *,
        timezone: str = "UTC",
        owner_speakers: Collection[str] = (),
        clock: type[datetime] = datetime,
    ) -> None:
        self.engine = engine
        self.zone: tzinfo = ZoneInfo(timezone)
        self.owner_speakers = tuple(owner_speakers)
        self._clock = clock
        # Searches a voice turn starts from its transcript before the turn ends (ChatService
        # keeps them true to the forget marker).
        self.lookahead = MemoryLookahead(self._search)

    async def _search(self, query: str) -> list[Memory]:
        return await self.engine.context(query, limit=SEARCH_LIMIT)

    async def aclose(self) -> None:
        return None

    async def answer(self, query: str, *, first_turn: bool) -> str:
        if not query.strip():
            return f"Ask me about something you talked about. {LIMITS}"
        try:
            memories = await self.lookahead.take(query)
            if memories is None:
                memories = await self._search(query)
        except EngineUnavailableError as exc:
            return (
                f"I couldn't reach your memories just now ({exc.reason}). Without a language "
                "model they're the only thing I can answer from, so please try again in a "
                "moment."
            )
        return compose(
            query,
            memories,
            now=self._clock.now(UTC),
            zone=self.zone,
            owner_speakers=self.owner_speakers,
            first_turn=first_turn,
        )

    async def stream(
        self, *, system: str, messages: Sequence[Message], tools: Sequence[Tool]
    ) -> AsyncIterator[StreamEvent]:
        users = [m for m in messages if m.role == "user"]
        query = users[-1].content if users else ""
        first_turn = not any(m.role == "assistant" for m in messages)
        text = await self.answer(query, first_turn=first_turn)
        # Sentence by sentence: the whole answer is there at once, and a voice speaks
        # sentences (word-sized pieces only cost frames and data-channel messages).
        for part in sentences(text):
            yield TextDelta(part)
