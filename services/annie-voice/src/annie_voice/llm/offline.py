"""The offline memory responder: Annie without a language model. It answers from
`/v1/context` in plain sentences: what is known first — the current fact about what was asked,
since when, what it replaced ("Kavya lives in Hyderabad (since 1 May). Before that, Kavya lived
in Pune.") and one quote behind it — else the best one or two memories quoted ("On Tuesday,
Priya said: “…”."); a name nobody mentioned, or nothing found, is said plainly (with what it
cannot do). Each answer also says which facts and memories it used (`MemoryUsed`)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, tzinfo
from zoneinfo import ZoneInfo

from annie_voice.briefing import clean
from annie_voice.engine import EngineClient, EngineUnavailableError, KnownFact, Memory, Recall
from annie_voice.llm.base import MemoryUsed, Message, StreamEvent, TextDelta, Tool
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


def pick(memories: Sequence[Memory], most: int = 2) -> list[Memory]:
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


# --- answers from facts ----------------------------------------------------------------------

# Past tenses a fact's verb needs that "-ed" does not give.
_IRREGULAR_PAST = {
    "is": "was", "are": "were", "has": "had", "drinks": "drank", "eats": "ate",
    "goes": "went", "does": "did", "makes": "made", "buys": "bought", "teaches": "taught",
    "prefers": "preferred", "leaves": "left", "runs": "ran", "swims": "swam",
    "rides": "rode", "sings": "sang", "writes": "wrote", "reads": "read", "knows": "knew",
    "studies": "studied", "plays": "played", "enjoys": "enjoyed", "stays": "stayed",
}  # fmt: skip
# Second person of the verbs that do not just lose their -s.
_IRREGULAR_YOU = {"is": "are", "has": "have", "was": "were", "does": "do", "goes": "go"}
_NOUN_FACT = re.compile(r"^(?P<owner>.+?)['’]s (?P<noun>[\w -]+?) is (?P<other>.+)$")
_NAME_WORD = re.compile(r"\b([A-Z][a-z]+(?:[-'][A-Za-z]+)?)\b")
# Capitalised words of a question that are not names.
_NOT_NAMES = frozenset(
    "I I'm I've I'd I'll Do Does Did Is Are Was Were What Where When Who Whom Why How Which "
    "Can Could Would Should Will Have Has Had Tell Remind Please Annie The A An My Your "
    "Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March April "
    "May June July August September October November December OK Okay Hey Hi".split()
)


def _base(verb: str) -> str:
    """The verb a "you" takes: "lives" → "live", "studies" → "study", "is" → "are"."""
    if verb in _IRREGULAR_YOU:
        return _IRREGULAR_YOU[verb]
    if verb.endswith("ies") and len(verb) > 4:
        return verb[:-3] + "y"
    if verb.endswith(("sses", "shes", "ches", "xes", "zes", "oes")):
        return verb[:-2]
    return verb[:-1] if verb.endswith("s") and not verb.endswith("ss") else verb


def past(verb: str) -> str:
    """ "likes" → "liked", "drinks" → "drank", "lives" → "lived", "is" → "was"."""
    if verb in _IRREGULAR_PAST:
        return _IRREGULAR_PAST[verb]
    if not verb.endswith("s") or verb.endswith("ss"):
        return verb  # already past ("moved", "used to") or not a verb
    base = _base(verb)
    return base + "d" if base.endswith("e") else base + "ed"


def _starts_with(text: str, name: str) -> bool:
    return bool(name) and text.casefold().startswith(name.casefold() + " ")


def clause(fact: str, subject: str, *, you: bool, tense: str = "now") -> str:
    """The fact's words as a clause: "Arjun avoids coffee" → "you avoid coffee" (you) or
    "Arjun avoided coffee" (past); "Arjun's spouse is Meera" → "your spouse is Meera"."""
    words = clean(fact)
    noun = _NOUN_FACT.match(words)
    if noun and subject and noun["owner"].casefold() == subject.casefold():
        owner = "your" if you else noun["owner"] + "'s"
        verb = "was" if tense == "past" else "is"
        return f"{owner} {noun['noun']} {verb} {noun['other']}"
    if not _starts_with(words, subject):
        return words
    rest = words[len(subject) + 1 :]
    verb, _, tail = rest.partition(" ")
    if tense == "past":
        verb = past(verb)
    elif you:
        verb = _base(verb)
    who_ = "you" if you else subject
    return " ".join(p for p in (who_, verb, tail) if p)


def inverted(fact: str, asked: Collection[str]) -> str | None:
    """A relation told from its other side when the question is about that side: asked
    about Meera, "Arjun's spouse is Meera" → "Meera is Arjun's spouse"."""
    noun = _NOUN_FACT.match(clean(fact))
    if noun and noun["other"].casefold() in {a.casefold() for a in asked}:
        return f"{noun['other']} is {noun['owner']}'s {noun['noun']}"
    return None


def _since(when: datetime | None, now: datetime, zone: tzinfo) -> str:
    if when is None:
        return ""
    day = relative_day(when, now, zone)
    return f" (since {day.removeprefix('on ')})" if day != "today" else " (since today)"


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def state_fact(
    fact: KnownFact, recall: Recall, *, now: datetime, zone: tzinfo, owners: Collection[str]
) -> str:
    """One or two sentences: the fact, since when, and what it replaced."""
    you = fact.subject.casefold() in {o.casefold() for o in owners}
    asked = [s.name for s in recall.about if not s.owner]
    turned = inverted(fact.fact, asked) if fact.subject not in asked else None
    if turned is not None:
        for owner in owners:  # "Meera is Arjun's spouse" to Arjun: "your spouse"
            turned = re.sub(rf"\b{re.escape(owner)}['’]s\b", "your", turned, flags=re.I)
        said = turned
    else:
        said = clause(fact.fact, fact.subject, you=you)
    text = f"{_cap(said)}{_since(fact.since, now, zone)}."
    before = [
        clause(r.fact, fact.subject, you=you, tense="past")
        for r in fact.replaced[:2]
        if r.fact.strip()
    ]
    if before:
        text += f" Before that, {' and '.join(before)}."
    return text


def unknown_name(query: str, recall: Recall) -> str | None:
    """A name the question asks about that the memory does not know: capitalised, not the
    first word, named by no subject, said in no memory found and the speaker of none."""
    words = query.split()
    for m in _NAME_WORD.finditer(query):
        name = m.group(1)
        if name in _NOT_NAMES or m.start() == 0 or (words and words[0] == name):
            continue
        pattern = re.compile(rf"\b{re.escape(name)}\b", re.IGNORECASE)
        if any(pattern.search(s.name) for s in recall.about):
            continue
        if any(pattern.search(f"{mem.speaker or ''} {mem.text}") for mem in recall.memories):
            continue
        return name
    return None


@dataclass(frozen=True, slots=True)
class Answer:
    """What the responder says, and the facts and memories it said it from."""

    text: str
    facts: tuple[KnownFact, ...] = ()
    memories: tuple[Memory, ...] = ()


def compose(
    query: str,
    recall: Recall | Sequence[Memory],
    *,
    now: datetime,
    zone: tzinfo,
    owner_speakers: Collection[str],
    first_turn: bool = False,
) -> Answer:
    """The answer to `query` from what was recalled: the current fact about what it asks
    (with since when and what it replaced) and at most one quote behind it; without a fact,
    the best one or two memories quoted; without either, that nothing is remembered."""
    if not isinstance(recall, Recall):
        recall = Recall(memories=list(recall))
    shown_query = gist(query)
    owners = [*owner_speakers, *(s.name for s in recall.about if s.owner)]
    if recall.facts:
        facts = [recall.facts[0]]
        second = recall.facts[1] if len(recall.facts) > 1 else None
        if second is not None and second.replaced and set(second.sources) & set(facts[0].sources):
            facts.append(second)  # said in the same breath: "tea" with "not coffee"
        lines = [state_fact(f, recall, now=now, zone=zone, owners=owners) for f in facts]
        quotes = [m for f in facts for m in f.sources][:1]
        lines += [sentence(m, now, zone, owners, query) for m in quotes]
        return Answer(" ".join(lines), tuple(facts), tuple(quotes))
    best = pick(recall.memories)
    name = unknown_name(query, recall) if best else None
    if name is not None:
        return Answer(f"I don't know: nothing is remembered about {name}.")
    if not best:
        return Answer(
            f"I looked through your memories for “{shown_query}” and found nothing about it. "
            f"{LIMITS}"
        )
    lead = LEAD_MANY if len(best) > 1 else LEAD_ONE
    lines = [sentence(m, now, zone, owners, query) for m in best]
    return Answer(" ".join([lead, *lines]), (), tuple(best))


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
        self.lookahead: MemoryLookahead[Recall] = MemoryLookahead(self._search)

    async def _search(self, query: str) -> Recall:
        me = self.owner_speakers[0] if self.owner_speakers else None
        return await self.engine.recall(query, limit=SEARCH_LIMIT, me=me)

    async def aclose(self) -> None:
        return None

    async def answer(self, query: str, *, first_turn: bool = False) -> str:
        return (await self.reply(query)).text

    async def reply(self, query: str) -> Answer:
        """The answer and what it was said from."""
        if not query.strip():
            return Answer(f"Ask me about something you talked about. {LIMITS}")
        try:
            found = await self.lookahead.take(query)
            if found is None:
                found = await self._search(query)
        except EngineUnavailableError as exc:
            return Answer(
                f"I couldn't reach your memories just now ({exc.reason}). Without a language "
                "model they're the only thing I can answer from, so please try again in a "
                "moment."
            )
        return compose(
            query,
            found,
            now=self._clock.now(UTC),
            zone=self.zone,
            owner_speakers=self.owner_speakers,
        )

    async def stream(
        self, *, system: str, messages: Sequence[Message], tools: Sequence[Tool]
    ) -> AsyncIterator[StreamEvent]:
        users = [m for m in messages if m.role == "user"]
        query = users[-1].content if users else ""
        answer = await self.reply(query)
        yield MemoryUsed(facts=answer.facts, memories=answer.memories)
        # Sentence by sentence: the whole answer is there at once, and a voice speaks
        # sentences (word-sized pieces only cost frames and data-channel messages).
        for part in sentences(answer.text):
            yield TextDelta(part)
