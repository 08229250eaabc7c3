"""What the memory knows about a query's subjects: the facts true at `as_of` about the
entities a query names, for `/v1/context` (its `facts`, `about` and ranking) and the entity
profile.

1. Subjects: the entities the query names (names.recognise: word n-grams against the
   entities' canonical names) and, when the query says "I", "me", "my" (or "mine",
   "myself"), the owner — the `me` of the request, else the configured owner, else the named
   speaker heard most lately (speakers.KnownSpeakers.owner).
2. Facts: every fact on either side of the subjects' graph nodes said by `as_of`, with history
   (graph.facts_as_of(history=True): restatements collapsed per period, each ended fact with
   the fact that ended it). When the query names the owner and something else ("Do I still
   like coffee?"), only the facts touching that something else count, and the current facts
   that ended them ("drinks tea" ended "drinks coffee"): the owner's hundred other facts are
   not what was asked.
3. The current facts (invalid_at unset or after as_of) are ranked — the subjects they join,
   then their `relevance` (0 unless the query asks the fact's kind — "live" for residence,
   "sister" for a sibling, predicates.QUESTION_CUES, patterns.RELATIONS —, then the query's
   words, names of people aside, found among those and the fact's own), then the words they
   share with the query at all, then the newest — and the first `limit` are returned, each
   with its relevance, its sources (the segments it was said in), since when it holds
   (`valid_at`) and the facts it replaced (ended ones whose `ended_by` is this fact).
4. For ranking (retrieve.fuse): the segments behind the facts returned that replaced an older
   one are `current_sources` (only a change needs the newer words lifted: lifting every
   fact's segment cost LoCoMo 1.8 points of recall@5), and those behind the facts that had
   ended by as_of (unless a current fact was said in them too) are `superseded_sources`; a
   search weighs the first up and the second down, so what is true now comes before what
   used to be.

5. Statements (statement_facts.py): what was said about the query's people, merged by meaning,
   that shares the query's words (names aside); an ended one carries what ended it and what was
   said to hold instead in the same breath. Read from PostgreSQL, so they come without a graph.

Only facts about the world count: the edges of things said (asked, felt, decided, promised:
graph.facts.SPEECH_ACTS) are left out. A fact whose every source segment has been forgotten
is left out (the graph job that rewrites the session may not have run yet): forgetting
reaches what the query shows at once.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy.ext.asyncio import AsyncEngine

from context_engine.extract import predicates
from context_engine.extract.language import singular
from context_engine.extract.patterns import RELATIONS
from context_engine.extract.schema import canonical_name
from context_engine.graph.base import Fact
from context_engine.graph.facts import SPEECH_ACTS
from context_engine.knowledge.graph_view import with_sources
from context_engine.knowledge.names import query_ngrams, recognise
from context_engine.knowledge.speakers import KnownSpeakers
from context_engine.knowledge.statement_facts import content, statement_facts

if TYPE_CHECKING:
    from context_engine.graph.knowledge import KnowledgeGraph

# What was said to hold in place of something ended, in the same breath ("I play go now").
_INSTEAD = re.compile(r"\b(?:instead|now|these days|nowadays|switched|anymore)\b", re.IGNORECASE)
FIRST_PERSON = re.compile(r"(?<![\w'’])(?:i|me|my|mine|myself)(?![\w])", re.IGNORECASE)
_WORD = re.compile(r"[a-z0-9]+")
# Words a question shares with every fact, which say nothing about which fact it asks for.
# Deliberately not spaCy's stop words (extract/language.py), even less the words that carry
# content in talk: that list was measured on LoCoMo dev (bench/answers) and changed 4 answers,
# all for the worse — "both" and "besides" are what "What animal do both Nate and Joanna
# like?" and "What sports does John like besides basketball?" ask, so a fact of one of them
# must not answer; "move", "used", "own" ask for a kind of fact.
_EMPTY = frozenset(
    "the and are was were what which whose where when who whom why how did does do you your "
    "about that "
    "this with for from have has had still now any there their they them is it its".split()
)


class AskedQuery(Protocol):
    """What a lookup reads of a search request (search.query.ContextQuery is one): the words,
    the time they are asked as of, and who "I" is."""

    @property
    def query(self) -> str: ...
    @property
    def as_of(self) -> datetime: ...
    @property
    def me(self) -> str | None: ...


def says_first_person(query: str) -> bool:
    """Whether the query speaks of its asker ("Do I still like coffee?", "my sister")."""
    return FIRST_PERSON.search(query) is not None


def stems(text: str) -> set[str]:
    """The content words of `text`, lower case, a plural or verb -s taken off ("likes" and
    "like" meet, and "watches" and "watch": language.singular): enough to tell which fact a
    question is about."""
    return {singular(w) for w in _WORD.findall(text.casefold()) if len(w) >= 3 and w not in _EMPTY}


_KIN_WORDS: dict[str, set[str]] = {}
for _word, _predicate in RELATIONS.items():
    _KIN_WORDS.setdefault(_predicate, set()).add(_word)


def cue_words(predicate: str) -> set[str]:
    """The words a question asks a fact of this predicate by."""
    name = predicates.normalise(predicate)
    known = predicates.spec(name)
    words = set(name.split("_")) | _KIN_WORDS.get(name, set())
    if known is not None:
        words |= set(known.phrase.split())
        if known.group:
            words |= predicates.QUESTION_CUES.get(known.group, frozenset())
    return words


# Words a question may hold beside what it asks ("Where does she live now?").
_FILLER = stems(
    "now still currently these days today anymore usually often always ever really actually "
    "name kind sort type most more much"
)


def relevance(fact: Fact, wanted: set[str]) -> int:
    """How well the fact answers the query (`wanted`: its content words, stemmed, people's
    names removed): 0 unless the query asks this kind of fact ("live" for where someone
    lives, "sister" for a sibling, the predicate's own words) and the fact covers what else
    it asks but one word ("Which running shoes do I use?" and "Dev uses Asics", category
    shoe); then those words and the ones it shares with the fact. A fact that only shares
    its topic ("likes pottery" for "what did she make at the pottery class?") or its kind
    ("John's child is Sara" for "how often does he take his kids to the park?") does not
    answer."""
    asked = wanted & stems(" ".join(cue_words(fact.predicate)))
    if not asked:
        return 0
    category = str(fact.attributes.get("category") or "")
    said = wanted & stems(f"{fact.fact} {fact.object} {category}")
    if len(wanted - asked - said - _FILLER) > 1:
        return 0
    return len(asked | said)


def is_current(fact: Fact, as_of: datetime) -> bool:
    return fact.invalid_at is None or fact.invalid_at > as_of


@dataclass(frozen=True, slots=True)
class Subject:
    """An entity a query names; `owner` when it was named by "I/me/my"."""

    id: int
    type: str
    name: str
    tier: str
    owner: bool = False

    def out(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class Knowledge:
    """What `QueryFacts.lookup` found for one query."""

    about: list[Subject] = field(default_factory=list)
    facts: list[dict[str, Any]] = field(default_factory=list)  # the API's ContextFact shape
    # what was said about the people it names (statement_facts.py), the API's ContextStatement
    statements: list[dict[str, Any]] = field(default_factory=list)
    current_sources: set[tuple[str, str]] = field(default_factory=set)
    superseded_sources: set[tuple[str, str]] = field(default_factory=set)


def _replaced_out(fact: Fact) -> dict[str, Any]:
    return {
        "uuid": fact.uuid,
        "fact": fact.fact,
        "predicate": fact.predicate,
        "object": fact.object,
        "valid_at": fact.valid_at,
        "invalid_at": fact.invalid_at,
    }


def forgotten(item: dict[str, Any]) -> bool:
    """Every segment the fact was said in is gone (forgotten or deleted)."""
    sources = item["sources"]
    return bool(sources) and all(s["text"] is None for s in sources)


async def facts_with_history(
    engine: AsyncEngine,
    facts: Sequence[Fact],
    as_of: datetime,
) -> tuple[list[dict[str, Any]], list[tuple[Fact, dict[str, Any]]]]:
    """The current ones of `facts` as the API shows them (sources, `since`, `replaced`), in
    the order given, leaving out forgotten ones (as current facts, and as what one replaced);
    and the ended ones, each with its API item (sources read in the same query)."""
    items = await with_sources(engine, facts)
    ended = [(f, item) for f, item in zip(facts, items, strict=True) if not is_current(f, as_of)]
    replaced: dict[str, list[Fact]] = {}
    for f, item in ended:
        by = (f.ended_by or {}).get("uuid")
        if by and not forgotten(item):  # a forgotten fact is not told as what was replaced
            replaced.setdefault(by, []).append(f)
    out = []
    for item, fact in zip(items, facts, strict=True):
        if not is_current(fact, as_of) or forgotten(item):
            continue
        item["since"] = fact.valid_at
        item["current"] = True
        item["replaced"] = [_replaced_out(r) for r in replaced.get(fact.uuid, [])]
        out.append(item)
    return out, ended


class QueryFacts:
    """`lookup(q)`: the subjects a query names and what is true about them (module docs)."""

    def __init__(
        self,
        engine: AsyncEngine,
        graph: KnowledgeGraph | None,
        speakers: KnownSpeakers | None = None,
        *,
        owner: str | None = None,
        limit: int = 8,
        max_entities: int = 5,
        fetch: int = 200,
    ) -> None:
        self.engine = engine
        self.graph = graph
        self.speakers = speakers
        self.owner = owner
        self.limit = limit
        self.max_entities = max_entities
        self.fetch = fetch

    @property
    def available(self) -> bool:
        return self.graph is not None and self.graph.opened

    async def owner_name(self, me: str | None = None) -> str | None:
        if me and me.strip():
            return me.strip()
        if self.owner:
            return self.owner
        return await self.speakers.owner() if self.speakers is not None else None

    async def subjects(self, query: str, me: str | None = None) -> list[Subject]:
        """The entities the query names, rarest first, and the owner (first) when it says
        "I/me/my" and the owner is a known person."""
        owner = await self.owner_name(me) if says_first_person(query) else None
        async with self.engine.connect() as conn:
            named = await recognise(conn, query_ngrams(query), self.max_entities)
            mine = (
                await recognise(conn, [canonical_name(owner)], 1, types=("person",))
                if owner
                else []
            )
        out = [Subject(r.id, r.type, r.name, r.tier, owner=True) for r in mine]
        seen = {s.id for s in out}
        out += [Subject(r.id, r.type, r.name, r.tier) for r in named if r.id not in seen]
        return out

    async def said(self, q: AskedQuery, about: Sequence[Subject]) -> list[dict[str, Any]]:
        """The statements about the query's people that share its words (names aside), most
        shared first: current ones, and ended ones each with what ended it and what holds
        instead (the current statements said with the ending: "gave up chess, I play go now").
        PostgreSQL only: no graph needed."""
        people = [s.name for s in about if s.type == "person" or s.owner]
        if not people:
            return []
        items = await statement_facts(
            self.engine, q.as_of, subjects=people, history=True, limit=self.fetch
        )
        wanted = content(q.query) - content(" ".join(people))
        if not wanted:
            return []
        by_segment: dict[tuple[str, Any], list[dict[str, Any]]] = {}
        for item in items:
            if item["current"]:
                for src in item["sources"]:
                    by_segment.setdefault((src["session_id"], src["segment_id"]), []).append(item)
        out = []
        for item in items:
            shared = len(wanted & content(item["text"]))
            if not shared:
                continue
            end = item["ended_by"] or item["kept_by"]
            instead = []
            if not item["current"] and end is not None:
                key = (end["session_id"], end["segment_id"])
                instead = [
                    {"text": x["text"], "valid_at": x["valid_at"]}
                    for x in by_segment.get(key, [])
                    if x["id"] != item["id"] and x["kind"] != "ended" and _INSTEAD.search(x["text"])
                ]
            out.append({**item, "relevance": shared, "instead": instead})
        out.sort(key=lambda x: (-x["relevance"], not x["current"]))
        return out[: self.limit]

    async def lookup(self, q: AskedQuery) -> Knowledge:
        about = await self.subjects(q.query, q.me)
        told = await self.said(q, about) if about else []
        if not about or not self.available:
            return Knowledge(about=about, statements=told)
        graph = self.graph
        assert graph is not None
        nodes = await asyncio.gather(
            *(graph.find_entity_nodes(s.name, s.type, limit=3) for s in about)
        )
        subject_of = {n.uuid: s for s, found in zip(about, nodes, strict=True) for n in found}
        if not subject_of:
            return Knowledge(about=about, statements=told)
        facts = knowledge_only(
            await graph.facts_as_of(
                q.as_of, entity_uuids=list(subject_of), limit=self.fetch, history=True
            )
        )
        others = {u for u, s in subject_of.items() if not s.owner}
        if others and len(others) < len(subject_of):  # the owner and something else
            facts = _touching(facts, others)
        people = {s.name for s in about if s.type == "person" or s.owner}
        wanted = stems(q.query) - stems(" ".join(people))
        score = {f.uuid: relevance(f, wanted) for f in facts}
        ranked = _rank(facts, wanted, subject_of, score)
        shown, ended = await facts_with_history(self.engine, ranked, q.as_of)
        for item in shown:
            item["relevance"] = score[item["uuid"]]
        said = {(s["session_id"], s["segment_id"]) for item in shown for s in item["sources"]}
        shown = shown[: self.limit]
        return Knowledge(
            about=about,
            facts=shown,
            statements=told,
            current_sources={
                (s["session_id"], s["segment_id"])
                for item in shown
                if item["replaced"]
                for s in item["sources"]
            },
            superseded_sources={key for f, _ in ended for key in f.sources} - said,
        )


def knowledge_only(facts: Iterable[Fact]) -> list[Fact]:
    """The facts about the world: not the edges of things said (SPEECH_ACTS)."""
    return [f for f in facts if f.predicate.upper() not in SPEECH_ACTS]


def _touching(facts: Iterable[Fact], nodes: set[str]) -> list[Fact]:
    """The facts on either side of `nodes`, and the current facts that ended one of them."""
    facts = list(facts)
    kept = [f for f in facts if f.subject_uuid in nodes or f.object_uuid in nodes]
    enders = {str(f.ended_by["uuid"]) for f in kept if f.ended_by and f.ended_by.get("uuid")}
    kept_ids = {f.uuid for f in kept}
    kept += [f for f in facts if f.uuid in enders and f.uuid not in kept_ids]
    return kept


def _rank(
    facts: Sequence[Fact],
    wanted: set[str],
    subject_of: dict[str, Subject],
    score: dict[str, int],
) -> list[Fact]:
    """Most subjects joined first, then the most relevant to the query's words (`score`:
    each fact's relevance), then those sharing the most words with it at all, then newest."""

    def key(f: Fact) -> tuple[float, ...]:
        joined = len({subject_of[u].id for u in (f.subject_uuid, f.object_uuid) if u in subject_of})
        shared = len(wanted & stems(f"{f.fact} {f.object}"))
        when = f.valid_at or f.created_at
        return (-joined, -score[f.uuid], -shared, -(when.timestamp() if when else 0.0))

    return sorted(facts, key=key)
