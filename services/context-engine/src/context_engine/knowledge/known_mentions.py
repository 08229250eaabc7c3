"""Mentions of entities the memory already knows, found by their name in a session's text.

An extractor misses names it has found before: the fast extractor's small NER model tags
"Koramangala" in "we moved to Koramangala" but not in "that Koramangala cafe", so a place said
in four sessions had an episode count of two and never reached a memory tier. After the
extractor ran, `add_known_mentions` adds a mention for each known person, place,
organisation, named event and topic whose name the session says but the extractor did not
return. The mentions go through `entity_store.store_extraction` with the extractor's own
output (same extractor label and version), so a re-run replaces them and versions stay
history; no entity is created here, only mentions of existing ones.

What counts as saying a name:
- people, places, organisations and events with a capitalised name: the name's words,
  capitalised, as whole words ("Koramangala", "Koramangala's"; "Bank of America" keeps its
  lower-case "of"); never lower case ("may", "will"), nor a one-word name that is a stop word
  at the start of a sentence ("Will you come?"); names that are not names (patterns.NOT_NAMES:
  "May", "Honey") are never candidates. Events named in lower case ("wedding") are not
  matched: without their date they are any wedding;
- topics: case-insensitive whole words, singular or plural of the last word ("running
  shoe" / "running shoes"); stop words are not topics.
Longer names win over names inside them ("New York" over "York"); a name known as two types
that fit the same words is left alone (which one was meant is a guess), and so are the
extractor's own names and anything inside them.

Only entities with a current mention from another session that is not itself a string match
are candidates: string matches never keep each other alive once the extractors stop finding
the name.

Not order independent: a session extracted before a name was known is not rescanned when it
becomes known (its next extraction, e.g. by a new extractor version, picks it up).

Cost: the session's text is cut into words and n-grams of 1 to 4 words once, in a thread;
one query fetches the known entities whose canonical name is one of those n-grams; matching
is set look-ups from the words that start a known name. Measured on LoCoMo turns with ~5,600
and ~51,000 known entities (511,000 mentions): about 0.1-0.25 ms per segment, ~5% of the
fast extractor's own time (2,000 segments: ~0.4-0.5 s against 8-13 s; the query ~40-70 ms).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import bindparam, text
from sqlalchemy.ext.asyncio import AsyncConnection

from context_engine.extract.base import Extraction
from context_engine.extract.language import sentence_bounds, singular, stop_words
from context_engine.extract.patterns import (
    normalise_text,
    not_a_name,
    sentence_at,
)
from context_engine.extract.schema import (
    CONFIDENCE_GATES,
    EntityType,
    ExtractedEntity,
    SegmentText,
    Sensitivity,
    canonical_name,
)
from context_engine.knowledge.entity_store import SessionText
from her_os_shared.logging import get_logger

log = get_logger(__name__)

NAME_TYPES: tuple[EntityType, ...] = ("person", "place", "organization", "event")
KNOWN_TYPES: tuple[EntityType, ...] = (*NAME_TYPES, "topic")
SOURCE = "known"
# A string match of a name already validated elsewhere: a little above its type's gate, never
# above the entity's own confidence.
KNOWN_MARGIN = 0.05
MAX_WORDS = 4
MIN_CHARS = 3

_TOKEN = re.compile(r"\S+")
_LEFT_EDGE = re.compile(r"^[^\w]+")
_RIGHT_EDGE = re.compile(r"[^\w]+$")
_POSSESSIVE = re.compile(r"(?:'s|')$")
_CLAUSE_END = re.compile(r"[,;:!?]\W*$")


@dataclass(frozen=True, slots=True)
class KnownEntity:
    id: int
    type: EntityType
    name: str
    canonical: str
    confidence: float
    sensitivity: Sensitivity


@dataclass(slots=True)  # not frozen: a frozen __init__ costs half of the tokenising
class _Token:
    """A word of a segment in the forms an n-gram takes it in: alone (edge punctuation
    removed), first (leading removed), inside (as written) or last (trailing removed); the
    keys are case-folded, `*_bare` without a possessive ("Koramangala's" → "koramangala")."""

    start: int  # offset in the segment's text
    opens: bool  # opens a sentence
    capital: bool
    stop: bool  # a stop word
    ends_clause: bool  # "," "?"... after it: no name runs across
    only: str
    first: str
    mid: str
    last: str
    k_only: str
    k_first: str
    k_mid: str
    k_last: str
    k_only_bare: str | None
    k_last_bare: str | None


def _bare(key: str) -> str | None:
    """The key without a possessive ("koramangala's" → "koramangala"), None without one."""
    if key.endswith("'s") and len(key) > 2:
        return key[:-2]
    return None


def _tokens(said: str, stops: frozenset[str]) -> list[_Token]:
    out: list[_Token] = []
    opens = True
    for m in _TOKEN.finditer(said):
        raw = m.group(0)
        if raw.isalnum():  # most words: one form, and nothing ends after them
            k = raw.casefold()
            out.append(
                _Token(m.start(), opens, raw[0].isupper(), k in stops, False,
                       raw, raw, raw, raw, k, k, k, k, None, None)
            )  # fmt: skip
            opens = False
            continue
        left = _LEFT_EDGE.sub("", raw)
        right = _RIGHT_EDGE.sub("", raw)
        only = _RIGHT_EDGE.sub("", left)
        if only:
            k_only, k_last = only.casefold(), right.casefold()
            out.append(
                _Token(
                    m.start(), opens, only[:1].isupper(), k_only in stops,
                    bool(_CLAUSE_END.search(raw)), only, left, raw, right,
                    k_only, left.casefold(), raw.casefold(), k_last,
                    _bare(k_only), _bare(k_last),
                )
            )  # fmt: skip
        opens = raw.rstrip("\"')]").endswith((".", "?", "!"))
    return out


def _ngrams(tokens: Sequence[_Token], i: int) -> Iterator[tuple[int, str, list[str]]]:
    """The n-grams starting at tokens[i], longest first, as (n, key, words as written); a
    possessive last word also without its "'s" (after the form with it)."""
    n_max = 1
    while n_max < MAX_WORDS and i + n_max < len(tokens) and not tokens[i + n_max - 1].ends_clause:
        n_max += 1
    t = tokens[i]
    for n in range(n_max, 0, -1):
        if n == 1:
            yield 1, t.k_only, [t.only]
            if t.k_only_bare:
                yield 1, t.k_only_bare, [_POSSESSIVE.sub("", t.only)]
            continue
        inner = tokens[i + 1 : i + n - 1]
        u = tokens[i + n - 1]
        head = " ".join([t.k_first, *(x.k_mid for x in inner)])
        words = [t.first, *(x.mid for x in inner)]
        yield n, f"{head} {u.k_last}", [*words, u.last]
        if u.k_last_bare:
            yield n, f"{head} {u.k_last_bare}", [*words, _POSSESSIVE.sub("", u.last)]


def plural(word: str) -> str:
    if len(word) > 2 and word.endswith("y") and word[-2] not in "aeiou":
        return word[:-1] + "ies"
    if word.endswith(("s", "x", "z", "ch", "sh")):
        return word + "es"
    return word + "s"


def _numbers(word: str) -> tuple[str, str, str]:
    """A word as written, its singular and that singular's plural: the forms a topic ending
    in it may be stored as."""
    one = singular(word)
    return word, one, plural(one)


def _topic_key(key: str) -> str:
    """The form topics are compared in: the last word singular."""
    head, _, last = key.rpartition(" ")
    return f"{head} {singular(last)}" if head else singular(last)


@dataclass(frozen=True, slots=True)
class Prepared:
    """A session's segments cut into words, and the canonical forms a known name could have
    in them: n-grams of 1 to MAX_WORDS words starting capitalised (names), or neither
    starting nor ending with a stop word (topics, in either number)."""

    segments: list[tuple[SegmentText, str, list[_Token]]]  # (segment, its text, its words)
    keys: set[str]


def prepare(segments: Sequence[SegmentText]) -> Prepared:
    stops = stop_words()
    keys: set[str] = set()
    numbers: dict[str, tuple[str, str, str]] = {}  # words repeat: each one's forms once
    out: list[tuple[SegmentText, str, list[_Token]]] = []
    for seg in segments:
        said = normalise_text(seg.text)
        tokens = _tokens(said, stops)
        out.append((seg, said, tokens))
        for i, t in enumerate(tokens):
            if t.stop and not t.capital:
                continue
            topical = not t.stop
            head = ""
            for j in range(i, min(i + MAX_WORDS, len(tokens))):
                u = tokens[j]
                if j == i:
                    last, bare = u.k_only, u.k_only_bare
                else:
                    head = f"{head} {tokens[j - 1].k_mid}" if j - 1 > i else t.k_first
                    last, bare = u.k_last, u.k_last_bare
                key = f"{head} {last}" if head else last
                if len(key) >= MIN_CHARS:
                    if t.capital:
                        keys.add(key)
                    if topical and not u.stop:
                        forms = numbers.get(last) or numbers.setdefault(last, _numbers(last))
                        if head:
                            keys.update(f"{head} {w}" for w in forms)
                        else:
                            keys.update(forms)
                if bare and len(bare) >= MIN_CHARS:
                    keys.add(f"{head} {bare}" if head else bare)
                if u.ends_clause:
                    break
    return Prepared(out, keys)


# The mention check is a subquery per candidate (ix_entity_mentions_entity_id), not EXISTS:
# the planner turns EXISTS into a semi-join that may read every mention in the store.
_CANDIDATES = text(
    """
    SELECT e.id, e.type, e.name, e.canonical_name, e.confidence, e.sensitivity
    FROM entities e
    WHERE e.canonical_name = ANY(:names) AND e.type = ANY(:types)
      AND (SELECT true FROM entity_mentions m
           WHERE m.entity_id = e.id AND m.current AND m.session_id <> :sid
             AND coalesce(m.properties->>'source', '') <> :source
           LIMIT 1)
    """
).bindparams(bindparam("names"), bindparam("types"))


async def load_known(
    conn: AsyncConnection, session_id: str, names: Iterable[str]
) -> list[KnownEntity]:
    """Known entities (KNOWN_TYPES) named by one of `names`, found by another session."""
    names = sorted(set(names))
    if not names:
        return []
    rows = await conn.execute(
        _CANDIDATES,
        {"names": names, "types": list(KNOWN_TYPES), "sid": session_id, "source": SOURCE},
    )
    return [
        KnownEntity(r.id, r.type, r.name, r.canonical_name, r.confidence, r.sensitivity)
        for r in rows
    ]


def _usable(e: KnownEntity) -> bool:
    """A name that can be string-matched without matching ordinary words."""
    if len(e.canonical) < MIN_CHARS or e.confidence < CONFIDENCE_GATES[e.type]:
        return False
    if e.type == "topic":
        return e.canonical not in stop_words()
    if not e.name[:1].isupper():
        return False  # "wedding", "koramangala": nothing says when it is a name
    words = e.name.split()
    return not all(not_a_name(w) or not_a_name(w.capitalize()) for w in words)


def _capitalised_as(written: Sequence[str], name: str, opens: bool) -> bool:
    """The words as written are the name capitalised: every word capitalised where the name
    has it so (a lower-case "of" may stay), none in capitals unless the name is, and not a
    one-word stop word opening a sentence ("Will you...")."""
    stored = name.split()
    if len(stored) != len(written):
        return False
    if len(written) == 1 and opens and written[0].casefold() in stop_words():
        return False
    for k, (w, s) in enumerate(zip(written, stored, strict=True)):
        if not w[:1].isupper():
            if k == 0 or s[:1].isupper():
                return False
        elif len(w) > 1 and w.isupper() and not s.isupper():
            return False
    return True


@dataclass(slots=True)
class _Index:
    names: dict[str, list[KnownEntity]]  # canonical name → people, places, orgs, events
    topics: dict[str, list[KnownEntity]]  # singular form → topics
    claimed: set[str]  # canonical names the extractor returned
    claimed_topics: set[str]  # singular forms of the topics it returned
    firsts: set[str]  # first words of all of these: other words start nothing

    def is_claimed(self, key: str, *, topic: bool = True) -> bool:
        return key in self.claimed or (topic and _topic_key(key) in self.claimed_topics)

    def starts(self, t: _Token) -> bool:
        firsts = self.firsts
        return t.k_first in firsts or t.k_only in firsts or t.k_only_bare in firsts

    def fits(self, key: str, written: Sequence[str], opens: bool) -> list[KnownEntity]:
        """The known entities these words name: one, or several when ambiguous (an exact
        topic spelling beats its other number: "shoes" over "shoe")."""
        names = [e for e in self.names.get(key, ()) if _capitalised_as(written, e.name, opens)]
        topics = self.topics.get(_topic_key(key), [])
        if len(topics) > 1:
            topics = [e for e in topics if e.canonical == key] or topics
        return names + topics


def _index(known: Sequence[KnownEntity], extraction: Extraction) -> _Index:
    index = _Index({}, {}, set(), set(), set())
    for e in extraction.entities:
        if e.type in KNOWN_TYPES:
            key = canonical_name(e.name)
            index.claimed.add(key)
            index.firsts.add(key.split(" ", 1)[0])
            if e.type == "topic":
                index.claimed_topics.add(_topic_key(key))
                index.firsts.update(_numbers(key.split(" ", 1)[0]))
    for k in known:
        if not _usable(k) or index.is_claimed(k.canonical, topic=k.type == "topic"):
            continue  # the extractor returned this name (as whatever type): its call
        first, _, rest = k.canonical.partition(" ")
        if k.type == "topic":
            index.topics.setdefault(_topic_key(k.canonical), []).append(k)
            index.firsts.update(_numbers(first) if not rest else (first,))
        else:
            index.names.setdefault(k.canonical, []).append(k)
            index.firsts.add(first)
    return index


def find_known(
    session: SessionText | Prepared, known: Sequence[KnownEntity], extraction: Extraction
) -> list[ExtractedEntity]:
    """One mention per known entity the session says and the extractor did not return: its
    first occurrence, with the sentence as evidence. Longest names first, left to right."""
    index = _index(known, extraction)
    if not index.names and not index.topics:
        return []
    prepared = session if isinstance(session, Prepared) else prepare(session.segments)
    found: dict[int, ExtractedEntity] = {}
    for seg, said, tokens in prepared.segments:
        bounds: list[tuple[int, int]] | None = None
        i = 0
        while i < len(tokens):
            taken = 0
            if index.starts(tokens[i]):
                for n, key, written in _ngrams(tokens, i):
                    if index.is_claimed(key):
                        taken = n  # the extractor's own name: nothing inside it either
                        break
                    fits = index.fits(key, written, tokens[i].opens)
                    if not fits:
                        continue
                    taken = n  # ambiguous or not, the words are taken
                    if len(fits) == 1 and fits[0].id not in found:
                        bounds = bounds if bounds is not None else sentence_bounds(said)
                        evidence = sentence_at(said, tokens[i].start, bounds)
                        found[fits[0].id] = _mention(fits[0], evidence, seg)
                    break
            i += taken or 1
    return list(found.values())


def _mention(e: KnownEntity, evidence: str, seg: SegmentText) -> ExtractedEntity:
    properties: dict[str, Any] = {"source": SOURCE, "speaker": seg.speaker}
    return ExtractedEntity(
        type=e.type,
        name=e.name,
        confidence=min(e.confidence, CONFIDENCE_GATES[e.type] + KNOWN_MARGIN),
        evidence=evidence,
        properties=properties,
        sensitivity=e.sensitivity,
        segment_id=seg.segment_id,
    )


async def add_known_mentions(
    conn: AsyncConnection, session: SessionText, extraction: Extraction
) -> Extraction:
    """The extraction with mentions of known entities the session names added (see the
    module docstring). Text work runs in a thread: long sessions must not stall the loop."""
    started = time.perf_counter()
    prepared = await asyncio.to_thread(prepare, session.segments)
    known = await load_known(conn, session.session_id, prepared.keys)
    added = await asyncio.to_thread(find_known, prepared, known, extraction) if known else []
    log.debug(
        "extract.known_mentions", session_id=session.session_id, ngrams=len(prepared.keys),
        candidates=len(known), added=len(added), ms=round((time.perf_counter() - started) * 1e3),
    )  # fmt: skip
    if not added:
        return extraction
    return replace(extraction, entities=[*extraction.entities, *added])
