"""Statements merged by meaning into facts, without an LLM: the add / update / no-op / end
decision mem0 and graphiti ask a model for, made by rules (ADR 0017, "Statements").

Every stored statement of a person (table `statements`, extract/clauses.py) is read in the
order it became true (valid_at, then when it was said, then id); each one, against the facts
built so far for that person:

- **restates** a fact — the same predicate (negation included) and objects that share at least
  half their content words, or one's content words all in the other's (or both none) — and
  reinforces it: one fact, one more source, a higher confidence (1 − Π(1 − cᵢ));
- **ends** a fact — it says the activity stopped ("stopped", "quit", "gave up", "no longer" /
  "not ... anymore", kind "ended"), negates it ("I don't drink coffee" against "drinks
  coffee"), says what holds instead ("I drink tea instead": the same verb, another object) or
  that the person moved away (from where they lived): the fact gets `invalid_at` = when the
  ending became true and `ended_by`, and is never deleted; a habit ends the same way;
- **keeps** a promise or plan — the same person later does the promised act (the same verb, or
  one of its kin: return / bring back / give back) to the same object: the plan is `kept`, with
  the statement that kept it;
- otherwise it is **added**. A plan is valid from its date: before it, it is not yet current.

The merge is a pure function of the rows, so the result does not depend on the order sessions
arrive in, and a forgotten session (its rows deleted) takes its statements' effects with it.
Single-valued attributes (home, employer) are ended by the closed vocabulary's rules on the
graph's relations (graph/supersede.py); statements do not end those.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from context_engine.extract.language import stem, stop_words
from context_engine.extract.schema import canonical_name
from context_engine.store.models import StatementRow

# Verbs that end what follows them, and the words "no longer" / "anymore" that end their own.
_ENDERS = frozenset({"stop", "quit", "give up", "drop", "cease", "leave", "abandon"})
# Where someone lives, which "moved away (from X)" ends.
_DWELLS = frozenset({"live", "stay", "reside", "move", "settle", "rent"})
_INSTEAD = re.compile(r"\binstead\b", re.IGNORECASE)
_AWAY = re.compile(r"^away\b(?:\s+from\b)?", re.IGNORECASE)
# Acts that keep a promise of another: "I'll return your drill" ... "I brought your drill back".
_KIN: dict[str, frozenset[str]] = {
    "return": frozenset({"return", "bring back", "give back", "hand back", "drop off", "bring"}),
    "pay": frozenset({"pay", "pay back", "repay", "transfer", "send"}),
    "call": frozenset({"call", "ring", "phone", "call back"}),
    "send": frozenset({"send", "mail", "email", "text", "forward"}),
    "fix": frozenset({"fix", "repair", "mend", "sort out"}),
    "visit": frozenset({"visit", "see", "go", "drop by", "come by"}),
}
# Words that date or qualify rather than name what a statement is about.
_NOT_CONTENT = frozenset(
    "today tomorrow yesterday tonight morning evening night week weekend month year day now "
    "anymore longer ago last next soon later recently lately finally already still again "
    "every each always usually often really just also instead".split()
)
_WORD = re.compile(r"[a-z][a-z'-]*")


def content(text: str) -> frozenset[str]:
    """The stems of the words that say what a statement is about."""
    stops = stop_words()
    return frozenset(
        stem(w)
        for w in _WORD.findall(text.casefold())
        if w not in stops and w not in _NOT_CONTENT and len(w) > 1
    )


def _base(predicate: str) -> tuple[bool, str]:
    """ "not drink" → (True, "drink")."""
    negated = predicate.startswith("not ")
    return negated, predicate[4:] if negated else predicate


@dataclass(slots=True)
class Said:
    """One stored statement (a row of `statements`)."""

    id: int
    subject: str
    predicate: str
    object: str
    text: str
    kind: str
    confidence: float
    valid_at: datetime
    said_at: datetime
    session_id: str
    segment_id: str | None
    speaker: str = ""
    evidence: str = ""  # the sentence as said


@dataclass(slots=True)
class StatementFact:
    """A fact merged from one or more statements: what is said, since when, until when."""

    first: Said
    sources: list[Said] = field(default_factory=list)
    confidence: float = 0.0
    invalid_at: datetime | None = None
    ended_by: Said | None = None
    kept_by: Said | None = None

    @property
    def subject(self) -> str:
        return self.first.subject

    @property
    def kind(self) -> str:
        return self.first.kind

    def current(self, as_of: datetime) -> bool:
        """True at `as_of`: begun, not ended, and not a plan already kept."""
        if self.first.valid_at > as_of:
            return False
        if self.invalid_at is not None and self.invalid_at <= as_of:
            return False
        return not (self.kept_by is not None and self.kept_by.valid_at <= as_of)

    def as_dict(self, as_of: datetime) -> dict[str, Any]:
        s = self.first

        def source(x: Said) -> dict[str, Any]:
            return {"session_id": x.session_id, "segment_id": x.segment_id,
                    "said_at": x.said_at, "speaker": x.speaker, "text": x.text,
                    "evidence": x.evidence}  # fmt: skip

        return {
            "id": s.id,
            "subject": s.subject,
            "predicate": s.predicate,
            "object": s.object,
            "text": s.text,
            "kind": s.kind,
            "confidence": round(self.confidence, 3),
            "valid_at": s.valid_at,
            "invalid_at": self.invalid_at,
            "current": self.current(as_of),
            "ended_by": source(self.ended_by) if self.ended_by else None,
            "kept_by": source(self.kept_by) if self.kept_by else None,
            "sources": [source(x) for x in self.sources],
        }


def _restates(fact: StatementFact, s: Said) -> bool:
    f = fact.first
    if f.predicate != s.predicate or (f.kind == "plan" and s.kind != "plan"):
        return False
    a, b = content(f.object), content(s.object)
    if not a and not b:
        return True
    if a and b and (a <= b or b <= a):  # "in Tromsø" and "in Tromsø with two cats"
        return True
    return len(a & b) * 2 >= max(len(a), len(b))


def _ends(fact: StatementFact, s: Said) -> bool:
    """Whether s says the fact's activity stopped or is not so."""
    negated, verb = _base(s.predicate)
    f_negated, f_verb = _base(fact.first.predicate)
    if f_negated or fact.kind in ("plan", "opinion"):
        return False
    target = content(s.object)
    if verb in _ENDERS or (s.kind == "ended" and not negated):
        # "gave up swimming" ends "swims at the lake"; "stopped playing chess" ends "plays chess"
        what = content(fact.first.object) | {stem(f_verb)}
        return bool(target & what)
    if negated and verb == f_verb:
        # "doesn't drink coffee anymore" ends "drinks coffee"; "I don't play chess" too
        a = content(fact.first.object)
        return not a or not target or bool(a & target)
    if verb == "move" and (away := _AWAY.match(s.object.strip())):
        # "moved away (from Porto)" ends "lives in Porto"; with no place, where they lived
        if f_verb not in _DWELLS or _AWAY.match(fact.first.object.strip()):
            return False
        left = content(s.object[away.end() :])
        return not left or bool(left & content(fact.first.object))
    if not negated and verb == f_verb and _INSTEAD.search(s.object):
        # "I drink tea instead" ends "drinks coffee" (not "drinks tea": that it restates)
        return not _restates(fact, s)
    return False


def _keeps(plan: StatementFact, s: Said) -> bool:
    if plan.kind != "plan" or s.kind == "plan" or s.valid_at < plan.first.said_at:
        return False
    negated, verb = _base(s.predicate)
    p_negated, p_verb = _base(plan.first.predicate)
    if negated or p_negated:
        return False
    kin = _KIN.get(p_verb, frozenset({p_verb}))
    if verb not in kin and verb != p_verb:
        return False
    return bool(content(plan.first.object) & content(s.object))


def merge(rows: Iterable[Said]) -> list[StatementFact]:
    """The facts the statements make, per the module docstring, oldest first."""
    ordered = sorted(rows, key=lambda r: (r.valid_at, r.said_at, r.id))
    facts: dict[str, list[StatementFact]] = {}
    out: list[StatementFact] = []
    for s in ordered:
        mine = facts.setdefault(canonical_name(s.subject), [])
        for fact in mine:
            if fact.kept_by is None and _keeps(fact, s):
                fact.kept_by = s
        for fact in mine:
            if fact.invalid_at is None and fact.first.valid_at <= s.valid_at and _ends(fact, s):
                fact.invalid_at, fact.ended_by = s.valid_at, s
        same = next((f for f in mine if f.invalid_at is None and _restates(f, s)), None)
        if same is not None:
            same.sources.append(s)
            same.confidence = 1 - (1 - same.confidence) * (1 - s.confidence)
            continue
        fact = StatementFact(first=s, sources=[s], confidence=s.confidence)
        mine.append(fact)
        out.append(fact)
    return out


def _said(row: Any) -> Said:
    return Said(
        id=row.id,
        subject=row.subject,
        predicate=row.predicate,
        object=row.object,
        text=row.text,
        kind=row.kind,
        confidence=row.confidence,
        valid_at=row.valid_at or row.said_at or datetime.fromtimestamp(0, UTC),
        said_at=row.said_at or row.valid_at or datetime.fromtimestamp(0, UTC),
        session_id=row.session_id,
        segment_id=row.segment_id,
        speaker=row.speaker,
        evidence=row.evidence,
    )


async def load(
    conn: AsyncConnection, as_of: datetime, *, subjects: Sequence[str] | None = None
) -> list[StatementFact]:
    """The merged facts of the statements said by `as_of` (about `subjects`, or everyone)."""
    t = StatementRow.__table__
    query = select(t).where(t.c.current, t.c.said_at <= as_of)
    if subjects is not None:
        keys = sorted({canonical_name(s) for s in subjects if s.strip()})
        if not keys:
            return []
        query = query.where(t.c.subject_key.in_(keys))
    rows = (await conn.execute(query)).all()
    return merge(_said(r) for r in rows)


async def statement_facts(
    engine: AsyncEngine,
    as_of: datetime,
    *,
    subjects: Sequence[str] | None = None,
    history: bool = False,
    limit: int = 100,
) -> list[dict[str, Any]]:
    """The merged facts about `subjects` (every person when None) as of a time: the current
    ones, newest first; with `history`, also those that had ended or were kept by then."""
    async with engine.connect() as conn:
        facts = await load(conn, as_of, subjects=subjects)
    shown = [f for f in facts if history or f.current(as_of)]
    shown.sort(key=lambda f: (f.sources[-1].said_at, f.first.id), reverse=True)
    return [f.as_dict(as_of) for f in shown[:limit]]
