"""The LLM extractor: a session read in windows by any `LLMClient`, answers checked item by item.

Each window of `window_segments` segments is sent as "[segment_id] Speaker: text" lines with a
JSON schema (strict-mode compatible: every field required, no extra fields; enums for the type,
the sensitivity and the predicate, which small local models need). The answer is read with
`llm.parse` (reasoning blocks, fences, prose, a bare list or a single item all survive), and each
item is validated on its own: a bad item is skipped with a logged reason, never the whole answer.
Unknown types and predicates are dropped (after mapping common synonyms: "organisation",
"location", "wife", "loves", …), confidences are clamped to [0, 1] (2 to 100 is read as a
percentage), an unknown sensitivity becomes "open". Then `schema.finalise`: the per-type
gates, dedup by (type, case-folded name) keeping the most confident, and linking — a segment
id the model cites is kept when it exists in the window, otherwise the entity goes to the
segment of that window its evidence overlaps most. Relations get the same treatment (gate
`RELATION_GATE`, dedup by (subject, predicate, object), linking; "I"/"my" become the speaker
of the cited segment, other pronouns are dropped).

Failures: an unavailable server or a refused request propagates (the durable job retries the
whole session later). An answer with no readable JSON is asked once more, with a note saying
so; if that fails too the window is skipped and logged (`llm_window_unreadable`), so one window
a small model chokes on does not lose the rest of the session. If no window at all is readable
the extraction raises `LLMOutputError`, so the job retries and finally dead-letters visibly.

Statements (ADR 0017 rule 8): the clauses about people are read by the same reader as the fast
path's (extract/clauses.py, through a `statements` extractor, the fast one in production), and
the LLM's own relations about a person (lives in, works at, likes, ...) become statements too,
so both go through one merge by meaning (knowledge/statement_facts.py) and both paths end with
the same current truth: an LLM relation that a clause also states is one fact with two sources.

Bump `LLM_EXTRACTOR_VERSION` when the prompt or the schema changes: the version labels what it
produced, and a new one re-extracts every session. (Adding the statements did not bump it: that
would run the LLM over every session again; a session gets its statements when next extracted.)
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from context_engine.extract.base import Extraction, Extractor
from context_engine.extract.clauses import Statement
from context_engine.extract.patterns import RELATIONS as RELATION_WORDS
from context_engine.extract.schema import (
    ENTITY_TYPES,
    EntityType,
    ExtractedEntity,
    ExtractedRelation,
    SegmentText,
    Sensitivity,
    best_segment,
    canonical_name,
    finalise,
)
from context_engine.llm.client import LLMClient
from context_engine.llm.errors import LLMOutputError
from context_engine.llm.factory import make_llm_client
from context_engine.llm.parse import as_list, parse_json_payload, snippet
from her_os_shared.dates import iso_day
from her_os_shared.logging import get_logger

if TYPE_CHECKING:
    from context_engine.config import Settings
    from context_engine.observe.recorder import EventRecorder

log = get_logger(__name__)

LLM_EXTRACTOR_VERSION = 1
SCHEMA_NAME = "memory_extraction"
SENSITIVITIES: tuple[Sensitivity, ...] = ("open", "private", "sensitive")

# Relations the extractor keeps. Family and social ones read "the object is the subject's
# <predicate>": (Asha, spouse, Priya) = Priya is Asha's spouse, as patterns.find_relations
# writes them; the rest read as a sentence: (Asha, likes, jazz). "likes" and "avoids" are what
# the graph supersedes (a newer "avoids coffee" invalidates "likes coffee").
SOCIAL_PREDICATES: tuple[str, ...] = (
    "spouse", "partner", "sibling", "parent", "child", "grandparent", "cousin", "uncle", "aunt",
    "relative", "friend", "colleague", "boss", "roommate", "neighbor", "doctor", "therapist",
)  # fmt: skip
OTHER_PREDICATES: tuple[str, ...] = (
    "likes", "avoids", "lives_in", "works_at", "studies_at", "member_of", "located_in",
    "attends", "owns",
)  # fmt: skip
PREDICATES: tuple[str, ...] = SOCIAL_PREDICATES + OTHER_PREDICATES
RELATION_GATE = 0.6

TYPE_ALIASES: dict[str, EntityType] = {
    "people": "person", "per": "person", "human": "person", "name": "person",
    "location": "place", "loc": "place", "gpe": "place", "city": "place", "country": "place",
    "organisation": "organization", "org": "organization", "company": "organization",
    "institution": "organization", "commitment": "promise", "task": "promise",
    "todo": "promise", "choice": "decision", "routine": "habit", "feeling": "emotion",
    "mood": "emotion", "meeting": "event", "appointment": "event",
}  # fmt: skip
PREDICATE_ALIASES: dict[str, str] = {
    **{word.replace(" ", "_"): predicate for word, predicate in RELATION_WORDS.items()},
    "married_to": "spouse", "neighbour": "neighbor", "manager": "boss", "coworker": "colleague",
    "co_worker": "colleague", "brother_of": "sibling", "sister_of": "sibling",
    "loves": "likes", "enjoys": "likes", "prefers": "likes", "like": "likes", "love": "likes",
    "dislikes": "avoids", "hates": "avoids", "avoid": "avoids", "dislike": "avoids",
    "works_for": "works_at", "employed_by": "works_at", "employed_at": "works_at",
    "works_in": "works_at", "lives_at": "lives_in", "resides_in": "lives_in",
    "lives": "lives_in", "studies": "studies_at", "goes_to": "attends",
}  # fmt: skip
_FIRST_PERSON = frozenset({"i", "me", "my", "myself", "mine"})
_PRONOUNS = _FIRST_PERSON | {
    "you", "your", "he", "him", "his", "she", "her", "they", "them", "their", "we", "us",
    "our", "it",
}  # fmt: skip

_STR = {"type": "string"}
_NUM = {"type": "number"}


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


# Field order is generation order for constrained decoding: where it was said, what it is,
# the quote, then the judgements about it.
EXTRACTION_SCHEMA: dict[str, Any] = _object(
    {
        "entities": {
            "type": "array",
            "items": _object(
                {
                    "segment_id": _STR,
                    "type": {"type": "string", "enum": list(ENTITY_TYPES)},
                    "name": _STR,
                    "evidence": _STR,
                    "properties": {
                        "type": "array",
                        "items": _object({"key": _STR, "value": _STR}),
                    },
                    "sensitivity": {"type": "string", "enum": list(SENSITIVITIES)},
                    "confidence": _NUM,
                }
            ),
        },
        "relations": {
            "type": "array",
            "items": _object(
                {
                    "segment_id": _STR,
                    "subject": _STR,
                    "predicate": {"type": "string", "enum": list(PREDICATES)},
                    "object": _STR,
                    "evidence": _STR,
                    "confidence": _NUM,
                }
            ),
        },
    }
)

SYSTEM_PROMPT = f"""\
You read a conversation transcript and write down what a personal memory should keep.
Each transcript line is "[segment_id] Speaker: text".

Answer with a JSON object with two lists, "entities" and "relations".

Each entity has:
- segment_id: the id in brackets of the line that says it.
- type: one of {", ".join(ENTITY_TYPES)}.
  person = a named person; place = a named location; organization = a company, school, team or
  other group; event = something that happened or is planned; promise = a commitment someone
  made ("I'll call the bank tomorrow"); decision = a choice that was settled; question = an
  open question that matters later; habit = something someone does regularly; emotion = a
  feeling someone expressed.
- name: a short name. People, places and organizations: the name as spoken. Other types: a
  short phrase such as "call the bank" or "move to Pune".
- evidence: the exact words of the transcript that say it, copied verbatim.
- properties: extra facts as key/value pairs, e.g. who, when, where, feeling.
- sensitivity: "open"; "private" for personal matters (family, relationships, home); or
  "sensitive" for health, money, sex, religion, politics, legal trouble or secrets.
- confidence: from 0 to 1, how sure you are that the transcript says this.

Each relation links two named entities: segment_id, subject, predicate, object, evidence,
confidence. predicate is one of: {", ".join(PREDICATES)}.
For {", ".join(SOCIAL_PREDICATES)}: the object is the subject's <predicate>, so
(Asha, spouse, Priya) means Priya is Asha's spouse and (Asha, boss, Ravi) means Ravi is Asha's
boss. The others read as a sentence: (Asha, likes, jazz), (Asha, works_at, Acme).
Use people's names (a speaker's name for "I" or "my"), never pronouns.

Only write down what the transcript says; do not guess. If nothing is worth keeping, answer
{{"entities": [], "relations": []}}."""

RETRY_NOTE = (
    "\n\nYour previous answer could not be read as JSON ({error}). Answer again with only the "
    'JSON object {{"entities": [...], "relations": [...]}}.'
)


def format_transcript(segments: Sequence[SegmentText]) -> str:
    """One "[segment_id] Speaker: text" line per segment (newlines inside text flattened)."""
    lines = [
        f"[{s.segment_id}] {' '.join(s.speaker.split()) or 'Unknown'}: {' '.join(s.text.split())}"
        for s in segments
    ]
    return "Transcript:\n" + "\n".join(lines)


# --- reading one item ---


class _EntityItem(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: str
    name: str
    confidence: float
    evidence: str | None = None
    properties: dict[str, Any] | list[Any] | None = None
    sensitivity: str | None = None
    segment_id: str | int | None = None


class _RelationItem(BaseModel):
    model_config = ConfigDict(extra="ignore")

    subject: str
    predicate: str
    object: str
    confidence: float
    evidence: str | None = None
    segment_id: str | int | None = None


class SkippedItem(ValueError):
    """Why one item of an answer was not kept."""


def _clean(text: str | None, limit: int) -> str:
    return " ".join((text or "").split())[:limit]


def _confidence(value: float) -> float:
    if not math.isfinite(value):
        raise SkippedItem(f"confidence is {value}")
    if 2.0 <= value <= 100.0:  # a percentage ("85"); just above 1 is over-confidence: clamped
        value /= 100.0
    return min(1.0, max(0.0, value))


def _entity_type(raw: str) -> EntityType:
    key = raw.strip().lower().replace("-", "_").replace(" ", "_")
    if key in ENTITY_TYPES:
        return key  # type: ignore[return-value]
    if key.endswith("s") and key[:-1] in ENTITY_TYPES:
        return key[:-1]  # type: ignore[return-value]
    if key in TYPE_ALIASES:
        return TYPE_ALIASES[key]
    raise SkippedItem(f"unknown type {raw!r}")


def _predicate(raw: str) -> str:
    key = re.sub(r"[\s-]+", "_", raw.strip().lower())
    key = PREDICATE_ALIASES.get(key, key)
    if key not in PREDICATES:
        raise SkippedItem(f"unknown predicate {raw!r}")
    return key


def _properties(raw: dict[str, Any] | list[Any] | None) -> dict[str, Any]:
    """A dict from either a dict or the strict schema's [{"key": …, "value": …}] pairs."""
    pairs: list[tuple[Any, Any]] = []
    if isinstance(raw, dict):
        pairs = list(raw.items())
    elif isinstance(raw, list):
        pairs = [(p.get("key"), p.get("value")) for p in raw if isinstance(p, dict)]
    out: dict[str, Any] = {}
    for key, value in pairs[:20]:
        name = _clean(str(key) if key is not None else "", 60)
        if not name or value is None or value == "":
            continue
        out[name] = value if not isinstance(value, str) else value.strip()[:500]
    return out


def _segment(raw: str | int | None, known: dict[str, SegmentText]) -> str | None:
    """The cited segment id when it exists (brackets tolerated), else None."""
    if raw is None:
        return None
    key = str(raw).strip().strip("[]").strip()
    return key if key in known else None


_Item = TypeVar("_Item", bound=BaseModel)


def _validated(model: type[_Item], item: Any) -> _Item:
    """An answer item parsed as `model`, or `SkippedItem` naming every problem."""
    if not isinstance(item, dict):
        raise SkippedItem(f"not an object: {type(item).__name__}")
    try:
        return model.model_validate(item)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'item'}: {e['msg']}" for e in exc.errors()
        )
        raise SkippedItem(problems) from None


def read_entity(item: Any, known: dict[str, SegmentText]) -> ExtractedEntity:
    """One answer item as an entity, or `SkippedItem` saying why not."""
    raw = _validated(_EntityItem, item)
    name = _clean(raw.name, 200)
    if not name:
        raise SkippedItem("empty name")
    sensitivity = (raw.sensitivity or "").strip().lower()
    return ExtractedEntity(
        type=_entity_type(raw.type),
        name=name,
        confidence=_confidence(raw.confidence),
        evidence=_clean(raw.evidence, 1000),
        properties=_properties(raw.properties),
        sensitivity=sensitivity if sensitivity in SENSITIVITIES else "open",  # type: ignore[arg-type]
        segment_id=_segment(raw.segment_id, known),
    )


def _party(name: str, segment_id: str | None, known: dict[str, SegmentText]) -> str:
    """A relation's subject or object: first-person pronouns become the segment's speaker;
    other pronouns are not names."""
    word = name.casefold()
    if word in _FIRST_PERSON and segment_id is not None:
        return known[segment_id].speaker
    if word in _PRONOUNS:
        raise SkippedItem(f"pronoun {name!r} instead of a name")
    return name


def read_relation(item: Any, known: dict[str, SegmentText]) -> ExtractedRelation:
    raw = _validated(_RelationItem, item)
    evidence = _clean(raw.evidence, 1000)
    segment_id = _segment(raw.segment_id, known)
    if segment_id is None and evidence:
        segment_id = best_segment(evidence, list(known.values()))
    subject = _clean(raw.subject, 200)
    obj = _clean(raw.object, 200)
    if not subject or not obj:
        raise SkippedItem("empty subject or object")
    subject = _party(subject, segment_id, known)
    obj = _party(obj, segment_id, known)
    if canonical_name(subject) == canonical_name(obj):
        raise SkippedItem(f"relation of {subject!r} to itself")
    return ExtractedRelation(
        subject=subject,
        predicate=_predicate(raw.predicate),
        object=obj,
        confidence=_confidence(raw.confidence),
        evidence=evidence,
        segment_id=segment_id,
    )


def split_payload(payload: Any) -> tuple[list[Any], list[Any]]:
    """(entity items, relation items) from the usual shapes of an answer: the schema's
    object, a bare list (relations told apart by their keys), or a single item."""
    if isinstance(payload, dict) and ("entities" in payload or "relations" in payload):
        return (
            as_list(payload, "entities", item_keys=("name", "type")) if "entities" in payload
            else [],
            as_list(payload, "relations", item_keys=("subject", "predicate"))
            if "relations" in payload else [],
        )  # fmt: skip
    items = as_list(payload, item_keys=("name", "type", "subject", "predicate"))
    entities: list[Any] = []
    relations: list[Any] = []
    for item in items:
        is_relation = isinstance(item, dict) and "predicate" in item and "name" not in item
        (relations if is_relation else entities).append(item)
    return entities, relations


def finalise_relations(relations: Sequence[ExtractedRelation]) -> list[ExtractedRelation]:
    """Gate, then one relation per (subject, predicate, object) — the most confident."""
    best: dict[tuple[str, str, str], ExtractedRelation] = {}
    for r in relations:
        if r.confidence < RELATION_GATE:
            continue
        key = (canonical_name(r.subject), r.predicate, canonical_name(r.object))
        old = best.get(key)
        if old is None or r.confidence > old.confidence:
            best[key] = r
    return list(best.values())


# The LLM's relations about a person that are statements too: (verb lemma, preposition, the
# verb in the third person). Family and social ones stay relations only (rule 2 of ADR 0017).
_AS_STATEMENT: dict[str, tuple[str, str, str]] = {
    "lives_in": ("live", "in", "lives"), "works_at": ("work", "at", "works"),
    "studies_at": ("study", "at", "studies"), "attends": ("attend", "", "attends"),
    "member_of": ("belong", "to", "belongs"), "likes": ("like", "", "likes"),
    "avoids": ("avoid", "", "avoids"), "owns": ("own", "", "owns"),
}  # fmt: skip


def relation_statements(
    relations: Sequence[ExtractedRelation],
    segments: Sequence[SegmentText],
    people: Sequence[ExtractedEntity],
) -> list[Statement]:
    """The relations about a known person as statements ("Asha lives in Pune"), from the
    segment each cites, valid from the date it names or the day it was said."""
    by_id = {s.segment_id: s for s in segments}
    persons = {canonical_name(e.name) for e in people if e.type == "person"}
    out: list[Statement] = []
    for r in relations:
        form = _AS_STATEMENT.get(r.predicate)
        seg = by_id.get(r.segment_id or "")
        if form is None or seg is None or canonical_name(r.subject) not in persons:
            continue
        verb, preposition, third = form
        obj = f"{preposition} {r.object}".strip()
        valid = r.properties.get("valid_from")
        out.append(Statement(
            subject=r.subject, predicate=verb, object=obj, text=f"{r.subject} {third} {obj}",
            segment_id=seg.segment_id, speaker=seg.speaker, confidence=r.confidence,
            valid_at=valid if isinstance(valid, str) else
            (iso_day(seg.spoken_at) if seg.spoken_at else None),
            evidence=r.evidence,
        ))  # fmt: skip
    return out


class LLMExtractor:
    """Entities and relations by an LLM, in windows of `window_segments` segments; the
    statements of the same turns by `statements` (the fast extractor's clause reader) and
    from the LLM's relations."""

    name = "llm"

    def __init__(
        self,
        client: LLMClient,
        window_segments: int = 40,
        version: int = LLM_EXTRACTOR_VERSION,
        statements: Extractor | None = None,
    ) -> None:
        if window_segments < 1:
            raise ValueError("window_segments must be at least 1")
        self.client = client
        self.window_segments = window_segments
        self.version = version
        self.statements = statements

    @classmethod
    def from_settings(
        cls, settings: Settings, recorder: EventRecorder | None = None
    ) -> LLMExtractor:
        """The extractor on the configured LLM (`LLMConfigError` names what is missing); with
        a recorder each LLM call is an event."""
        client = make_llm_client(settings, required=True, recorder=recorder)
        assert client is not None  # required=True raises instead
        return cls(client, window_segments=settings.extract_window_segments)

    @property
    def label(self) -> str:
        return f"{self.name}@{self.version}"

    async def aclose(self) -> None:
        await self.client.aclose()

    async def extract(self, segments: Sequence[SegmentText]) -> Extraction:
        segments = list(segments)
        if not segments:
            return Extraction()
        size = self.window_segments
        windows = [segments[i : i + size] for i in range(0, len(segments), size)]
        entities: list[ExtractedEntity] = []
        relations: list[ExtractedRelation] = []
        unreadable: list[LLMOutputError] = []
        for index, window in enumerate(windows):
            try:
                payload = await self._ask(window)
            except LLMOutputError as exc:
                log.warning(
                    "llm_window_unreadable", extractor=self.label, client=self.client.name,
                    window=index, windows=len(windows), first_segment=window[0].segment_id,
                    error=str(exc)[:300],
                )  # fmt: skip
                unreadable.append(exc)
                continue
            found, said = self._read(payload, window, index)
            entities += found
            relations += said
        if len(unreadable) == len(windows):
            raise LLMOutputError(
                f"{self.client.name} gave no readable answer for any of {len(windows)} "
                f"window(s); the first: {unreadable[0]}"
            )
        kept = finalise(entities, segments)
        kept_relations = finalise_relations(relations)
        said = relation_statements(kept_relations, segments, kept)
        if self.statements is not None:
            said = (await self.statements.extract(segments)).statements + said
        log.info(
            "llm_extracted", extractor=self.label, client=self.client.name,
            segments=len(segments), windows=len(windows), unreadable_windows=len(unreadable),
            entities_read=len(entities), entities=len(kept), relations_read=len(relations),
            relations=len(kept_relations), statements=len(said),
        )  # fmt: skip
        return Extraction(entities=kept, relations=kept_relations, statements=said)

    async def _ask(self, window: Sequence[SegmentText]) -> Any:
        """The parsed answer for one window; one more try when it is unreadable."""
        user = format_transcript(window)
        try:
            return self._payload(
                await self.client.complete_json(SYSTEM_PROMPT, user, EXTRACTION_SCHEMA, SCHEMA_NAME)
            )
        except LLMOutputError as exc:
            log.info(
                "llm_answer_unreadable_retrying", client=self.client.name, error=str(exc)[:300]
            )
            retry = user + RETRY_NOTE.format(error=snippet(str(exc), 120))
            return self._payload(
                await self.client.complete_json(
                    SYSTEM_PROMPT, retry, EXTRACTION_SCHEMA, SCHEMA_NAME
                )
            )

    @staticmethod
    def _payload(text: str) -> Any:
        payload = parse_json_payload(text)
        if not isinstance(payload, (dict, list)):
            raise LLMOutputError(
                f"the answer is JSON but not an object or a list: {snippet(text)!r}"
            )
        return payload

    def _read(
        self, payload: Any, window: Sequence[SegmentText], index: int
    ) -> tuple[list[ExtractedEntity], list[ExtractedRelation]]:
        known = {s.segment_id: s for s in window}
        entity_items, relation_items = split_payload(payload)
        entities: list[ExtractedEntity] = []
        relations: list[ExtractedRelation] = []
        skipped: list[str] = []
        for item in entity_items:
            try:
                entity = read_entity(item, known)
            except SkippedItem as exc:
                skipped.append(f"entity: {exc}")
                log.debug("llm_item_skipped", kind="entity", reason=str(exc), item=_show(item))
                continue
            if entity.segment_id is None:  # link within the window that said it
                entity = replace(
                    entity, segment_id=best_segment(entity.evidence or entity.name, window)
                )
            entities.append(entity)
        for item in relation_items:
            try:
                relations.append(read_relation(item, known))
            except SkippedItem as exc:
                skipped.append(f"relation: {exc}")
                log.debug("llm_item_skipped", kind="relation", reason=str(exc), item=_show(item))
        if skipped:
            log.info(
                "llm_items_skipped", extractor=self.label, window=index, skipped=len(skipped),
                kept=len(entities) + len(relations), reasons=skipped[:5],
            )  # fmt: skip
        return entities, relations


def _show(item: Any) -> str:
    try:
        return snippet(json.dumps(item, ensure_ascii=False), 200)
    except (TypeError, ValueError):
        return snippet(repr(item), 200)
