"""Statements: what each declarative clause says about its speaker or a known person, in the
third person with names (no LLM).

statements.py reads the closed vocabulary of ADR 0017 (lives in, works at, switched from...);
most of what people say about their lives falls outside it. This module keeps every clause
whose subject it can resolve, as said:

    Audrey: "I just started agility classes with my pups at a dog park"
        → Statement(subject="Audrey", predicate="start",
                    object="agility classes with their pups at a dog park",
                    text="Audrey just started agility classes with their pups at a dog park")

- Subject: I/me/my → the speaker; we → the speaker (less sure: "Audrey and others"); you →
  the person spoken to; a name → itself; he/she → the one person named most recently (in this
  turn before the pronoun, else in the latest earlier turn of the session that named anyone),
  by any speaker, the session's speakers left out; two candidates → no statement (gender is
  not guessed from names). "there" after a verb of motion or dwelling reads as the one place
  named most recently.
- Predicate: the verb's lemma with its particle and negation ("give up", "not eat"); the
  copula is "be" (the closed vocabulary stays with statements.py's relations).
- Kind: "plan" (will, going to, gonna, or a present progressive whose date lies ahead: "I'm
  starting at the bank in March"), "habit" (every Sunday, usually, on weekends), "ended"
  (stopped, quit, given up, no longer), else "fact".
- valid_at: the date the clause names, resolved against when it was said (a plan's date may
  lie ahead); else the day it was said.
- Nothing from: questions, conditions (if/unless), hypotheticals and wishes (would, could,
  might, should, wish, hope), reported speech of someone else ("Mom said she quit"), small talk
  (a clause with no content word beyond its verb: "I know", "I love it", "I'm so glad").
- "Yes, ..." answering a yes/no question of the other speaker also states the question's
  clause ("Do you still play chess?" "Yes!" → "Bo does still play chess").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from context_engine.extract.language import stop_words
from context_engine.extract.statements import (
    MAX_EVIDENCE,
    SUBJECT_CONFIDENCE,
    dated,
    each_sentence,
    name_of,
    said_ended,
)
from her_os_shared.dates import iso_day
from her_os_shared.logging import get_logger

if TYPE_CHECKING:
    from spacy.tokens import Doc, Span, Token

log = get_logger(__name__)

Kind = Literal["fact", "plan", "habit", "ended", "opinion"]


@dataclass(frozen=True, slots=True)
class Statement:
    """One clause, as said about one person (module docstring)."""

    subject: str
    predicate: str  # the verb's lemma with particle and negation ("give up", "not eat")
    object: str  # the rest of the clause after the verb, rewritten ("agility classes ...")
    text: str  # the whole clause in the third person with names
    segment_id: str
    speaker: str
    confidence: float
    kind: Kind = "fact"
    valid_at: str | None = None  # ISO date the clause names, else the day it was said
    when: str | None = None  # the words that dated it ("last spring")
    evidence: str = ""  # the sentence as said
    negated: bool = False


@dataclass(frozen=True, slots=True)
class _About:
    """Whom a clause is about, how that was found, the words its text opens with when its
    subject is not a person's word ("Asha thinks", "Asha has" for "Been tweaking ..."), and
    how much less sure that makes it."""

    name: str
    how: str
    opening: str | None
    scale: float
    replace: bool = False  # the subject word itself becomes the name ("I" → "Asha")
    opinion: bool = False


@dataclass(slots=True)
class Context:
    """What the session said before this turn, for pronouns: who and where was named lately,
    and the other speaker's last yes/no question."""

    speakers: frozenset[str] = frozenset()
    recent_people: tuple[str, ...] = ()  # distinct, from the latest earlier turn naming any
    recent_places: tuple[str, ...] = ()
    question: Span | None = None  # the previous turn's closing yes/no question
    question_speaker: str | None = None
    question_you: str | None = None  # whom that question addressed


@dataclass(slots=True)
class Turn:
    """One turn's facts the rules need: who speaks, to whom, when, and what it names."""

    speaker: str
    segment_id: str
    addressee: str | None = None
    spoken_at: datetime | None = None
    people: tuple[tuple[int, str], ...] = ()  # (offset, name) named in this turn
    places: tuple[tuple[int, str], ...] = ()
    known: frozenset[str] = frozenset()
    context: Context = field(default_factory=Context)


# Subject words → how the subject is found.
_SELF = {"i": "speaker", "me": "speaker", "myself": "speaker", "we": "we", "us": "we"}
_YOU = frozenset({"you"})
_THIRD = frozenset({"he", "she", "him", "her"})
_POSSESSIVE_SELF = frozenset({"my", "our", "mine", "ours"})
# A clause under these verbs is a wish, a guess or someone else's words, not a fact.
_WISHES = frozenset("wish hope pray dream imagine suppose".split())
_REPORTING = frozenset("say tell claim mention report announce hear write text".split())
_HYPOTHETICAL = frozenset({"would", "'d", "could", "might", "should", "may", "must", "ought"})
_FUTURE = frozenset({"will", "'ll", "shall", "wo", "gonna"})
_CONDITIONS = frozenset({"if", "unless", "whether", "suppose", "supposing", "whenever"})
# Verbs that end what follows them ("stopped swimming", "gave up chess", "quit the band").
_ENDING = frozenset({"stop", "quit", "drop", "cease"})
_HABIT_WORDS = re.compile(
    r"\b(?:every|each)\s+(?:day|morning|evening|night|week|weekend|month|year|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b|"
    r"\b(?:usually|always|often|regularly|daily|weekly|nightly|routinely|normally)\b|"
    r"\bon\s+(?:weekends|mondays|tuesdays|wednesdays|thursdays|fridays|saturdays|sundays)\b",
    re.IGNORECASE,
)
# Verbs of small talk: with nothing of content beside them the clause says nothing lasting.
_TALK_VERBS = frozenset(
    "be have know think guess mean see agree bet thank understand get do sound look seem mind "
    "remember wonder care appreciate love like feel want need try hear say tell let go make "
    "believe miss admire enjoy".split()
)
# Openings that answer yes to a question.
_YES = re.compile(r"^\s*(?:yes|yeah|yep|yup|sure|definitely|absolutely|of course|indeed)\b",
                  re.IGNORECASE)  # fmt: skip
_QUESTION_AUX = frozenset(
    "do does did is are was were have has had can will would could should".split()
)
_MOTION = frozenset("move go come travel fly drive head return relocate get run walk".split())
_TAG_3RD = {"am": "is", "'m": "is", "are": "is", "'re": "is", "have": "has", "'ve": "has",
            "do": "does", "were": "was"}  # fmt: skip
_PLACE_WORDS = frozenset({"there"})
# A statement with a question tagged on ("..., did I tell you?", "..., right?"): the statement
# before the tag is said all the same.
_TAG_QUESTION = re.compile(
    r",\s*(?:right|you know|did i (?:tell|mention)(?: (?:you|that))?(?: before)?|"
    r"have i (?:told|mentioned)(?: (?:you|that))?(?: before)?|remember|"
    r"(?:is|are|was|were|do|does|did|have|has|can|could|would|wo|wasn|weren|don|doesn|didn|"
    r"isn|aren|haven|hasn|couldn)(?:n't|n’t)? (?:it|they|you|i|we|he|she|there)|"
    r"no|eh|huh|ok|okay|yeah|y'know)\s*[?!]+[”\"’)]*$",
    re.IGNORECASE,
)
_TIME = re.compile(
    r"\b(?:every|each|last|next|this|today|tonight|yesterday|morning|evening|night|week|"
    r"weekend|month|year|day|monday|tuesday|wednesday|thursday|friday|saturday|sunday|"
    r"january|february|march|april|may|june|july|august|september|october|november|"
    r"december|spring|summer|fall|autumn|winter)s?\b",
    re.IGNORECASE,
)
# Words that open a subordinate clause: the clause stated alone leaves them out ("after we went
# camping" → "Melanie and others went camping").
_SUBORDINATORS = frozenset("when while after before since as because once whenever".split())
# Words that open a clause without adding to it ("Actually I've given up swimming").
_THANKS = frozenset("thanks thank congrats congratulations kudos props cheers".split())
_FILLERS = frozenset("so well also then anyway actually honestly basically oh yeah".split())
# What may stand before the subject and still belong to the clause ("Last week I ...", "After
# finishing my screenplay I got ...", "Every Sunday I swim").
_LEADING = frozenset({"advmod", "prep", "advcl", "npadvmod", "aux", "auxpass", "neg", "mark",
                      "nsubj", "nsubjpass", "csubj", "punct"})  # fmt: skip
# Verbs after which "there" is a place named before ("moved there", "lives there"); not "be
# there for you".
_PLACE_VERBS = _MOTION | frozenset("live stay work study visit settle grow".split())
# Words of content that small talk is made of ("I'm so glad", "I love that, thanks").
_SMALL_TALK = frozenset(
    "glad happy sorry sure great good awesome nice cool fine true right excited proud thankful "
    "grateful thanks love lot amazing wonderful fun agree bet totally really definitely "
    "absolutely hear idea hope luck point sense way pleasure welcome".split()
)
_NOT_SUBJECTS = frozenset("it this that there they them me us him her".split())
_CONTRACTED = {"'ll": "will", "'d": "would", "'re": "are", "'ve": "have", "'m": "am"}
_PRESENT_BE = frozenset({"am", "'m", "is", "'s", "are", "'re"})
MAX_TEXT = MAX_EVIDENCE


def _third_person(verb: str) -> str:
    """ "go" → "goes", "try" → "tries", "swim" → "swims" (a present-tense verb after I)."""
    low = verb.lower()
    if low in _TAG_3RD:
        return _TAG_3RD[low]
    if low.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if low.endswith("y") and len(low) > 1 and low[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def _content(toks: Iterable[Token]) -> list[str]:
    stops = stop_words()
    return [
        t.lower_
        for t in toks
        if t.is_alpha and t.lower_ not in stops and t.pos_ not in ("PRON", "AUX", "INTJ", "DET")
    ]


class ClauseReader:
    """Reads the statements of one parsed turn. Construct once per turn."""

    def __init__(self, doc: Doc, turn: Turn) -> None:
        self.doc = doc
        self.turn = turn
        self.found: list[Statement] = []
        self._until = len(doc.text)  # where the sentence read now stops (before a tag question)

    def run(self) -> list[Statement]:
        each_sentence(self.doc, self._sentence, "extract.clause_skipped")
        try:
            self._answer()
        except Exception as exc:
            log.warning("extract.answer_skipped", error=f"{type(exc).__name__}: {exc}")
        return self.found

    # --- who ---

    def _person_before(self, offset: int) -> str | None:
        """The one person "he"/"she" can be, or None when none or several fit."""
        speakers = self.turn.context.speakers
        here = [n for o, n in self.turn.people if o < offset and n not in speakers]
        pool = here or [n for n in self.turn.context.recent_people if n not in speakers]
        distinct = {n.casefold(): n for n in pool}
        return next(iter(distinct.values())) if len(distinct) == 1 else None

    def _place_before(self, offset: int) -> str | None:
        here = [n for o, n in self.turn.places if o < offset]
        pool = here or list(self.turn.context.recent_places)
        distinct = {n.casefold(): n for n in pool}
        return next(iter(distinct.values())) if len(distinct) == 1 else None

    def _who(self, tok: Token, *, frame: Turn | None = None) -> tuple[str, str] | None:
        """The person a subject token is, and how it was found (`frame`: whose words)."""
        turn = frame or self.turn
        low = tok.lower_
        how = _SELF.get(low)
        if how is not None:
            return (turn.speaker, how) if turn.speaker.strip() else None
        if low in _YOU:
            if self._plural_you(tok):
                return None
            return (turn.addressee, "addressee") if turn.addressee else None
        if low in _THIRD:
            person = self._person_before(tok.idx) if frame is None else None
            return (person, "pronoun") if person else None
        if tok.pos_ in ("PROPN", "NOUN") and (name := name_of(tok)):
            if name in turn.known or tok.ent_type_ == "PERSON":
                return name, "named"
        if tok.is_title and tok.text in turn.known:
            return tok.text, "named"
        return None

    # --- clauses ---

    def _sentence(self, sent: Span) -> None:
        text = sent.text.rstrip()
        end = sent.end_char
        if text.endswith("?"):
            tag = _TAG_QUESTION.search(text)
            if tag is None:
                return  # a question asks; it states nothing
            end = sent.start_char + tag.start()  # "I keep bees, did I tell you?": the statement
        self._until = end
        for tok in sent:
            if tok.idx < end and tok.pos_ in ("VERB", "AUX") and tok.dep_ not in ("aux", "auxpass"):
                self._clause(tok, sent)

    def _subject(self, verb: Token) -> Token | None:
        """The verb's subject: the nearest before it ("Hey John, I'm ..." has John as a second
        subject in the parse: a name addressed), inherited through "and"."""
        subjects = [
            c
            for c in verb.children
            if c.dep_ in ("nsubj", "nsubjpass", "csubj") and not self._vocative(c)
        ]
        before = [c for c in subjects if c.i < verb.i]
        if before or subjects:
            return (before or subjects)[-1]
        if verb.dep_ == "conj" and verb.head.pos_ in ("VERB", "AUX"):
            return self._subject(verb.head)  # "I quit X and joined Y"
        return None

    @staticmethod
    def _plural_you(tok: Token) -> bool:
        """ "you guys", "you all", "you two": more than the one person spoken to."""
        nxt = tok.doc[tok.i + 1] if tok.i + 1 < len(tok.doc) else None
        return nxt is not None and nxt.lower_ in ("guys", "all", "two", "both", "folks", "lot")

    @staticmethod
    def _vocative(tok: Token) -> bool:
        """ "Caroline, those lessons are great": a name addressed, then a comma."""
        nxt = tok.doc[tok.i + 1] if tok.i + 1 < len(tok.doc) else None
        return (
            tok.pos_ == "PROPN"
            and nxt is not None
            and nxt.text == ","
            and (tok.i == tok.sent.start or tok.doc[tok.i - 1].is_punct)
        )

    @staticmethod
    def _not_a_clause(verb: Token) -> bool:
        """A verb that heads no statement of its own: a bare infinitive ("helps you grow and
        reach your goals"), a comparison or purpose ("like I'm stepping into the books", "so
        you can watch them grow"), a coordinated verb of another form than the one it joins
        ("I respect you and being able to ..."): a gerund, not a clause."""
        aux = [c for c in verb.children if c.dep_ in ("aux", "auxpass")]
        if verb.tag_ == "VB" and not aux and verb.dep_ != "ROOT":
            return True
        marks = {c.lower_ for c in verb.children if c.dep_ == "mark"}
        if verb.dep_ == "advcl" and marks & {"like", "so", "than", "though"}:
            return True
        if verb.dep_ == "advcl" and "as" in marks and verb.lemma_ == "be":
            return True  # "as passionate as I am about rights"
        if verb.dep_ != "ROOT" and any(
            c.tag_ in ("WRB", "WP", "WDT") and c.i < verb.i for c in verb.subtree
        ):
            return True  # "how much work we still have to do": an embedded wh-clause
        if verb.dep_ == "advcl" and any(
            c.dep_ == "advmod" and c.lower_ == "so" for c in verb.children if c.i < verb.i
        ):
            return True
        if verb.dep_ == "conj" and not aux and not any(c.dep_.startswith("nsubj")
                                                      for c in verb.children):  # fmt: skip
            head = verb.head
            if head.tag_[:2] == "VB" and verb.tag_ != head.tag_:
                same_past = {verb.tag_, head.tag_} <= {"VBD", "VBN"}
                head_has_aux = any(c.dep_ in ("aux", "auxpass") for c in head.children)
                if not same_past and not (head_has_aux and verb.tag_ in ("VBG", "VBN")):
                    return True
        return False

    def _about(self, verb: Token, subj: Token | None, sent: Span) -> _About | None:
        """Whom the clause is about and how its text begins (`_About`), or None."""
        speaker = self.turn.speaker
        if subj is None:
            # "Been tweaking a recipe", "Just got back from Goa": the speaker, unsaid
            lead = [t for t in sent if not t.is_punct and t.dep_ not in ("intj",)]
            first = next((t for t in lead if t.dep_ not in ("advmod",)), None)
            if (
                verb.dep_ != "ROOT"
                or first is None
                or not speaker.strip()
                or verb.tag_ not in ("VBD", "VBN", "VBG")
                or first.i not in (verb.i, verb.i - 1)
                or (first.i == verb.i - 1 and first.lower_ != "been")
            ):
                return None
            opening = {"been": f"{speaker} has"}.get(first.lower_) or (
                f"{speaker} is" if verb.tag_ == "VBG" else speaker
            )
            return _About(speaker, "speaker", opening, 0.8)
        low = subj.lower_
        owner = next((c for c in subj.children if c.dep_ == "poss"), None)
        if (
            owner is not None
            and owner.lower_ in ("my", "our")
            and speaker.strip()
            and verb.lemma_.lower() not in _REPORTING
        ):
            return _About(speaker, "speaker", None, 0.9)  # "My family is always there for me"
        if low not in _NOT_SUBJECTS:
            who = self._who(subj)
            if who is not None:
                return _About(who[0], who[1], None, 1.0, replace=True)
        if self._opinion(verb, subj) and speaker.strip():
            return _About(speaker, "speaker", f"{speaker} thinks", 0.8, opinion=True)
        return None

    @staticmethod
    def _opinion(verb: Token, subj: Token) -> bool:
        """A view the speaker states in the present: a gerund or generic subject ("Talking
        about it is crucial", "Setbacks are opportunities") or "it's X to/how ..."."""
        if verb.dep_ != "ROOT" or verb.tag_ not in ("VBZ", "VBP"):
            return False
        if subj.lower_ in _THANKS:
            return False  # "Thanks, Gina! Appreciate ..."
        if subj.dep_ == "csubj":
            return True
        if subj.lower_ == "it":
            return any(c.dep_ == "acomp" for c in verb.children) and any(
                c.dep_ in ("xcomp", "ccomp") for c in verb.children
            )
        if subj.pos_ != "NOUN":
            return False
        kids = {c.dep_ for c in subj.children}
        return not kids & {"det", "poss", "nummod"} and subj.tag_ == "NNS"

    def _clause(self, verb: Token, sent: Span) -> None:
        if verb.dep_ in ("xcomp", "relcl", "acl", "pcomp", "csubj", "amod", "compound"):
            return  # part of another clause ("started taking", "the book I read")
        if verb.lemma_.lower() in _WISHES or verb.tag_ == "MD":
            return  # "I wish I could fly"; "I definitely will" (what, it does not say)
        if self._not_a_clause(verb):
            return
        subj = self._subject(verb)
        about = self._about(verb, subj, sent)
        if about is None or self._unreal(verb):
            return
        chain = self._chain(verb)
        kind: Kind = "opinion" if about.opinion else "fact"
        aux = {c.lower_ for v in chain for c in v.children if c.dep_ in ("aux", "auxpass")}
        if aux & _HYPOTHETICAL:
            return
        if aux & _FUTURE or self._going_to(verb):
            kind = "plan"
        negated = any(c.dep_ == "neg" or c.lower_ == "never" for c in verb.children)
        if self._ended(verb):
            kind = "ended"
        toks = self._tokens(verb, subj)
        after = [t for t in toks if t.i > verb.i and t.dep_ not in ("neg", "prt")]
        subject_words = {t.i for t in subj.subtree} if subj is not None and about.replace else set()
        content = _content(t for t in toks if t.i != verb.i and t.i not in subject_words)
        if (
            not content
            or (verb.lemma_.lower() in _TALK_VERBS and set(content) <= _SMALL_TALK)
            or (verb.lemma_.lower() in ("be", "have") and len(content) < 2 and about.replace)
        ):
            return  # small talk: "I know", "I love it", "I'm so glad"
        progressive = verb.tag_ == "VBG" and any(
            c.dep_ == "aux" and c.lower_ in _PRESENT_BE for c in verb.children
        )  # "I'm starting at the bank in March": March ahead
        when = dated(
            verb,
            self.turn.spoken_at,
            allow_future=True,
            prefer_future=progressive or kind == "plan",
        )
        valid_at = None
        if when is not None and when.get("future"):
            kind = "plan" if kind in ("fact", "opinion") else kind
            valid_at = when.get("due")
        elif when is not None:
            valid_at = when.get("valid_from")
        if kind == "fact" and _HABIT_WORDS.search(" ".join(t.text for t in toks)):
            kind = "habit"
        if valid_at is None and self.turn.spoken_at is not None and kind != "plan":
            valid_at = iso_day(self.turn.spoken_at)
        name = about.name
        text = self._rewrite(toks, verb, subj if about.replace else None, name, about.how)
        if about.opening:
            first = toks[0] if toks else None
            lower = first is not None and first.pos_ != "PROPN" and text.startswith(first.text)
            rest = text[:1].lower() + text[1:] if lower else text
            text = f"{about.opening} {rest}"
        obj = self._rewrite(after, verb, None, name, about.how) if after else ""
        particle = " ".join(c.lower_ for c in verb.children if c.dep_ == "prt")
        lemma = "think" if about.opinion else verb.lemma_.lower()
        predicate = " ".join(p for p in ("not" if negated else "", lemma, particle) if p)
        if about.opinion:
            obj = text.split(" thinks ", 1)[-1]
        if not text or len(text) > MAX_TEXT:
            return
        scale = about.scale * (0.9 if kind == "plan" else 1.0)
        self.found.append(
            Statement(
                subject=name,
                predicate=predicate,
                object=obj,
                text=text,
                segment_id=self.turn.segment_id,
                speaker=self.turn.speaker,
                confidence=round(SUBJECT_CONFIDENCE[about.how] * scale, 3),
                kind=kind,
                valid_at=valid_at,
                when=(when or {}).get("when"),
                evidence=" ".join(sent.text.split())[:MAX_EVIDENCE],
                negated=negated,
            )
        )

    @staticmethod
    def _chain(verb: Token) -> list[Token]:
        """The verb and the verbs it is the complement of ("going to move", "want to move")."""
        chain, v = [verb], verb
        while v.dep_ == "xcomp" and v.head is not v and len(chain) < 4:
            v = v.head
            chain.append(v)
        return chain

    def _going_to(self, verb: Token) -> bool:
        head = verb.head if verb.dep_ == "xcomp" else None
        return bool(head is not None and head.lower_ == "going" and head.tag_ == "VBG") or any(
            c.lower_ in ("gonna",) for c in verb.children
        )

    def _unreal(self, verb: Token) -> bool:
        """A condition, wish or someone else's reported words, in the verb's chain of heads."""
        for c in verb.children:  # "If I get the grant, I'll buy a kiln"
            if c.dep_ == "advcl" and any(
                m.dep_ == "mark" and m.lower_ in _CONDITIONS for m in c.children
            ):
                return True
        v, steps = verb, 0
        while steps < 5:
            if (
                v is not verb
                and v.dep_ == "ROOT"
                and v.tag_ == "VB"
                and not any(c.dep_ in ("nsubj", "aux") for c in v.children)
            ):
                return True  # "Make sure you watch their videos first": advice, not a fact
            for c in v.children:
                if c.dep_ == "mark" and c.lower_ in _CONDITIONS:
                    return True
                if c.dep_ in ("mark", "advmod") and c.lower_ in ("when",) and v.tag_ not in (
                    "VBD", "VBN"
                ):  # fmt: skip
                    return True  # "when I move" (not "when I moved": that is a fact)
            if v.lemma_.lower() in _WISHES and v is not verb:
                return True
            if v is not verb and v.lemma_.lower() in _REPORTING:
                head_subj = self._subject(v)
                if head_subj is None or head_subj.lower_ not in ("i", "we"):
                    return True  # "Mom said she quit": her words, not the speaker's
            if v.dep_ in ("ccomp", "advcl", "conj", "xcomp") and v.head is not v:
                v, steps = v.head, steps + 1
                continue
            return False
        return False

    @staticmethod
    def _ended(verb: Token) -> bool:
        lemma = verb.lemma_.lower()
        if lemma in _ENDING:
            return True
        if lemma == "give" and any(c.dep_ == "prt" and c.lower_ == "up" for c in verb.children):
            return True
        return said_ended(verb)  # "no longer", "not ... anymore"

    def _tokens(self, verb: Token, subj: Token | None) -> list[Token]:
        """The clause's own toks: the verb's subtree without coordinated clauses that have
        their own subject, leading conjunctions, interjections and edge punctuation."""
        skip: set[int] = set()
        start = subj.left_edge.i if subj is not None and subj.i < verb.i else verb.i
        for c in verb.children:
            below = {t.i for t in c.subtree}
            if c.dep_ == "conj" and c.pos_ in ("VERB", "AUX"):
                skip |= below
            elif c.dep_ in ("cc", "intj", "discourse", "dep") or (
                c.dep_ == "mark" and c.lower_ in ("because", "since", "so", "as", "while")
            ):
                skip |= below
            elif c.dep_ == "advmod" and c.lower_ in _FILLERS and c.i < verb.i:
                skip.add(c.i)
            elif c.dep_ in ("ccomp", "parataxis") and c.i < start:
                skip |= below  # "I've given up swimming, my shoulder hurts": its own clause
            elif c.i < start and c.dep_ not in _LEADING:
                skip |= below  # "Hey John, great news - I'm ...": a greeting, not the clause
            elif c.dep_ == "npadvmod" and c.i < start and c.ent_type_ not in ("DATE", "TIME"):
                if not _TIME.search(" ".join(t.text for t in c.subtree)):
                    skip |= below  # "Tomas, great news - ..." (not "last week", "every Sunday")
            elif (
                c.dep_ == "punct"
                and c.i > verb.i
                and c.text in ("-", "–", "—", "--", ";", ":")
                and (c.text != "-" or c.whitespace_)  # " - " parts, not "non-stop"
            ):
                skip.update(t.i for t in verb.doc[c.i : verb.right_edge.i + 1])
            elif c.i > verb.i and c.pos_ == "PROPN" and c.text == self.turn.addressee:
                skip |= below  # "..., Omar": the name addressed
        toks = [t for t in verb.subtree if t.i not in skip and t.idx < self._until]
        if subj is not None and verb.dep_ == "conj" and subj.i not in {t.i for t in toks}:
            # the inherited subject leads ("Asha joined Google"), with the auxiliaries the
            # verbs share ("I've been doing research and networking" → "has been networking")
            shared = []
            if not any(c.dep_ in ("aux", "auxpass") for c in verb.children):
                shared = [c for c in verb.head.children if c.dep_ in ("aux", "auxpass")]
            toks = [subj, *shared, *toks]
        while toks and (
            toks[0].is_punct
            or toks[0].dep_ in ("cc", "intj")
            or (
                toks[0].dep_ in ("mark", "advmod")
                and toks[0].lower_ in _SUBORDINATORS
                and toks[0].head.i == verb.i  # its own "when", not a clause inside it
            )
        ):
            toks.pop(0)
        while toks and (toks[-1].is_punct or toks[-1].dep_ in ("cc",)):
            toks.pop()
        # a trailing name addressed that the parse hung lower ("tomorrow, Omar")
        if len(toks) > 2 and toks[-1].text == self.turn.addressee and toks[-2].text == ",":
            toks = toks[:-2]
        return toks

    def _rewrite(self, toks: Sequence[Token], verb: Token, subj: Token | None, name: str,
                 how: str) -> str:  # fmt: skip
        """The toks in the third person with names: I → the speaker's name, my → their,
        am → is and a present-tense verb after I (or a one-person you) → its -s form; you → the
        addressee; he/she → the person they stand for; there → in/to the place, "that place"
        → the place."""
        speaker, addressee = self.turn.speaker, self.turn.addressee
        # the first verb word after each "I" — and a "you" that is one named person — takes
        # the third person ("I've come" → "has come", "you are so brave" → "Mel is so brave")
        finite = {
            min([c.i for c in t.head.children if c.dep_ in ("aux", "auxpass")] + [t.head.i])
            for t in toks
            if t.dep_ in ("nsubj", "nsubjpass")
            and (t.lower_ == "i" or (t.lower_ == "you" and addressee and not self._plural_you(t)))
        }
        out: list[str] = []
        said: set[str] = set()  # names already in the text: their possessive is "their"
        for k, t in enumerate(toks):
            low, word = t.lower_, t.text
            if subj is not None and t.i == subj.i:
                word = f"{name} and others" if how == "we" else name
            elif low in ("i", "me", "myself", "we", "us", "ourselves"):
                word = speaker
            elif low in _POSSESSIVE_SELF:
                mine = low in ("my", "our") and name == speaker and speaker in said
                word = "their" if mine else f"{speaker}'s"
            elif low in ("you", "yourself") and addressee and not self._plural_you(t):
                word = addressee
            elif low == "your" and addressee:
                word = "their" if name == addressee and addressee in said else f"{addressee}'s"
            elif low in _PLACE_WORDS and t.dep_ == "advmod" and t.head.lemma_ in _PLACE_VERBS:
                if (place := self._place_before(t.idx)) is not None:
                    word = ("to " if t.head.lemma_.lower() in _MOTION else "in ") + place
            elif low == "place" and k and toks[k - 1].lower_ == "that" and out:
                if (place := self._place_before(toks[k - 1].idx)) is not None:
                    out.pop()  # "that place" → the one place named lately
                    word = place
            said.update(n for n in (name, speaker, addressee) if n and word.startswith(n))
            if t.i in finite and t.tag_ == "VBP":
                word = _TAG_3RD.get(low) or _third_person(t.text)
            elif low in _CONTRACTED and t.dep_ in ("aux", "auxpass", "ROOT", "conj", "ccomp"):
                word = _CONTRACTED[low]
            if k:
                prev = toks[k - 1]
                joined = prev.i == t.i - 1 and not prev.whitespace_ and word == t.text
                out.append(word if joined else " " + word)
            else:
                out.append(word)
        return " ".join("".join(out).split())

    # --- "Yes, ..." ---

    def _answer(self) -> None:
        ctx = self.turn.context
        q = ctx.question
        if q is None or not _YES.match(self.doc.text) or ctx.question_speaker == self.turn.speaker:
            return
        root = q.root
        first = next((t for t in q if not t.is_punct), None)
        if first is None or first.lower_ not in _QUESTION_AUX:
            return  # not a yes/no question ("Where did you go?")
        subj = next((c for c in root.children if c.dep_ in ("nsubj", "nsubjpass")), None)
        if subj is None:
            return
        frame = Turn(
            speaker=ctx.question_speaker or "",
            segment_id=self.turn.segment_id,
            addressee=ctx.question_you,
            spoken_at=self.turn.spoken_at,
            known=self.turn.known,
        )
        who = self._who(subj, frame=frame)
        if who is None or (who[0] != self.turn.speaker and who[1] != "named"):
            return
        name, how = who
        toks = [t for t in q if not (t.is_punct and t.i == q.end - 1)]
        # undo the inversion: "Did Lena move" → "Lena did move", "Is Lena" → "Lena is"
        lead = toks[0]
        rest = [t for t in toks[1:]]
        words: list[str] = []
        for t in rest:
            if t.i == subj.i:
                words.append(name)
                lw = lead.lower_
                if subj.lower_ == "you":
                    lw = {"are": "is", "were": "was", "do": "does", "have": "has"}.get(lw, lw)
                words.append(lw)
            elif t.lower_ in ("you", "your") and t.i != subj.i:
                words.append("their" if t.lower_ == "your" else name)
            elif t.lower_ in ("'re", "'ve") and t.i - 1 >= 0 and t.doc[t.i - 1].lower_ == "you":
                words.append({"'re": " is", "'ve": " has"}[t.lower_])
            elif t.lower_ == "any":  # "Do you have any plans?" "Yes" → "has some plans"
                words.append("some")
            elif t.lower_ in ("i", "me"):
                words.append(frame.speaker)
            elif t.lower_ == "my":
                words.append(f"{frame.speaker}'s")
            else:
                words.append(t.text)
        text = " ".join(words)
        text = re.sub(r"\s+([,.!'])", r"\1", text).replace(" n't", "n't")
        text = " ".join(text.split())
        content = _content(t for t in rest if t.i != subj.i)
        if len(content) < 1:
            return
        self.found.append(
            Statement(
                subject=name,
                predicate=root.lemma_.lower(),
                object=" ".join(t.text for t in rest if t.i > root.i),
                text=text[:MAX_TEXT],
                segment_id=self.turn.segment_id,
                speaker=self.turn.speaker,
                confidence=round(SUBJECT_CONFIDENCE[how] * 0.9, 3),
                valid_at=iso_day(self.turn.spoken_at) if self.turn.spoken_at else None,
                evidence=" ".join(q.text.split())[:MAX_EVIDENCE],
            )
        )


def closing_question(doc: Doc) -> Span | None:
    """The turn's last sentence when it is a question (what a "Yes" in the next turn answers)."""
    sents = list(doc.sents)
    if sents and sents[-1].text.rstrip().endswith("?"):
        return sents[-1]
    return None


def read_clauses(doc: Doc, turn: Turn) -> list[Statement]:
    """The statements of one parsed turn (module docstring)."""
    return ClauseReader(doc, turn).run()
