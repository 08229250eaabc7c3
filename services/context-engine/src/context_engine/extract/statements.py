"""Facts from the dependency parse: where people live and work, what they switched, started,
stopped, drink and use (no LLM).

Each rule reads one verb (or a copula) and its arguments in spaCy's parse of a sentence:

    "Meera moved to Mumbai last week"        → (Meera, moved_to, Mumbai), valid_from a week
                                               before the words were said
    "I used to live in Chennai"              → (speaker, lived_in, Chennai)
    "I quit Infosys and joined Google"       → (speaker, quit, Infosys), (speaker, works_at, Google)
    "I'm a nurse" / "she works as a chef"    → (…, works_as, nurse)
    "I've been switching to tea"             → (speaker, drinks, tea)
    "Coffee was giving me headaches"         → (speaker, avoids, coffee)
    "These Hoka shoes are incredible, I switched from Nike"
                                             → (speaker, likes | uses, Hoka, category shoe),
                                               (speaker, switched_from, Nike, category shoe)
    "I stopped playing tennis, I play badminton instead"
                                             → (speaker, stopped, tennis),
                                               (speaker, plays, badminton)
    "I started taking pottery classes"       → (speaker, does, pottery)
    "our dog Biscuit"                        → (speaker, pet, Biscuit)

Subjects: "I/me/my" are the speaker, "we/our" the speaker too (a little less sure), "you/your"
the person spoken to (a name addressed in the segment, else the other party of a two-person
session), "he/she" the person mentioned last (a guess: lower confidence), a name is itself, and
"my sister Meera" is Meera. A subject the rules cannot resolve yields no fact: a sentence the
patterns cannot read gives nothing rather than a wrong subject. Negated statements give nothing,
except "no longer" / "not … anymore", which end the fact. Future and hypothetical statements
("I'll move to Pune", "I'd love to live in Paris") give nothing: they are plans, not facts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from context_engine.extract.patterns import MAX_EVIDENCE, not_a_name
from context_engine.extract.predicates import is_single_valued
from context_engine.extract.schema import ExtractedRelation
from her_os_shared.dates import iso_day, resolve
from her_os_shared.logging import get_logger

if TYPE_CHECKING:
    from spacy.tokens import Doc, Span, Token

log = get_logger(__name__)

# Confidence by how the subject was found (as for person–person relations in patterns.py).
SUBJECT_CONFIDENCE = {"speaker": 0.85, "we": 0.75, "named": 0.8, "addressee": 0.65,
                      "pronoun": 0.6}  # fmt: skip

# Words for the rules. Small closed lists: a word outside them yields no fact (precision first).
DRINKS = frozenset(
    "coffee tea chai espresso latte cappuccino americano matcha water juice soda coke pepsi "
    "beer wine whisky whiskey vodka rum gin milk kombucha cocoa smoothie smoothies lemonade "
    "decaf".split()
)
SPORTS = frozenset(
    "tennis badminton football soccer cricket basketball baseball volleyball hockey golf "
    "squash chess rugby pickleball table ping-pong poker bridge guitar piano violin drums "
    "cello flute ukulele saxophone video games frisbee softball handball polo lacrosse "
    "darts pool billiards bowling".split()
)
ACTIVITIES = frozenset(
    "running jogging swimming cycling biking hiking climbing yoga pilates pottery painting "
    "drawing knitting crochet baking cooking gardening dancing boxing meditation meditating "
    "photography surfing skiing skating skateboarding rowing walking journaling writing "
    "singing sewing woodworking fishing camping karate judo taekwondo kickboxing crossfit "
    "weightlifting lifting zumba salsa ballet archery fencing gymnastics volunteering "
    "blogging reading sketching calligraphy origami birdwatching".split()
)
FOODS = frozenset(
    "dairy gluten sugar caffeine alcohol chocolate cheese bread meat pizza spice peanut nut "
    "shellfish seafood egg wheat soy garlic onion candy dessert fried junk food".split()
)
HABIT_NOUNS = frozenset("class classes lesson lessons course courses practice".split())
PETS = frozenset("dog cat puppy kitten parrot rabbit bunny hamster horse pony turtle fish "
                 "bird guinea".split())  # fmt: skip
ROLES = frozenset(
    "nurse doctor teacher engineer developer programmer designer lawyer accountant architect "
    "chef cook pilot driver farmer scientist researcher professor lecturer student manager "
    "consultant analyst writer journalist editor photographer artist musician singer actor "
    "actress dentist pharmacist therapist counselor counsellor psychologist surgeon "
    "paramedic firefighter officer soldier veterinarian vet plumber electrician carpenter "
    "mechanic baker barista waiter waitress bartender cashier librarian entrepreneur founder "
    "freelancer intern coach trainer instructor tutor principal banker economist "
    "data scientist product manager software engineer web developer graphic designer "
    "social worker real estate agent salesperson realtor".split()
) | {"data scientist", "product manager", "software engineer", "web developer",
      "graphic designer", "social worker", "real estate agent"}  # fmt: skip
ILLS = frozenset(
    "headache headaches migraine migraines stomachache acne heartburn jitters insomnia "
    "nausea rash rashes cramps bloating anxiety".split()
)
PRAISE = frozenset(
    "incredible amazing awesome great fantastic excellent wonderful brilliant perfect "
    "comfortable comfy superb terrific outstanding".split()
)
_FIRST = {"i": "speaker", "me": "speaker", "my": "speaker", "myself": "speaker", "mine": "speaker",
          "we": "we", "us": "we", "our": "we", "you": "addressee", "your": "addressee",
          "he": "pronoun", "she": "pronoun", "him": "pronoun", "her": "pronoun",
          "his": "pronoun"}  # fmt: skip
_PLACE_ENTS = frozenset({"GPE", "LOC", "FAC"})
# Predicates of a past state: a date said with them is within the period, not when it ended.
_PERIOD_PREDICATES = frozenset({"worked_at", "lived_in", "worked_as", "studied_at"})
# Adjectives that make "I'm a good cook" a description, not a job.
_EVALUATIVE = frozenset(
    "good great bad terrible awful big huge amazing awesome excellent decent true real "
    "better best worse worst lousy natural born total complete such horrible fantastic".split()
)
# NER labels that are never a person, place or organisation (the small model often labels a
# town ORG or a person NORP, so the verb's cue is trusted over those labels).
_NOT_NAMED = frozenset({"DATE", "TIME", "MONEY", "QUANTITY", "CARDINAL", "ORDINAL", "PERCENT"})
_ORG_ENTS = frozenset({"ORG", "FAC"})
_FUTURE = frozenset({"will", "'ll", "shall", "would", "'d", "could", "might", "should", "may",
                     "can", "must", "wanna", "gonna"})  # fmt: skip


@dataclass(frozen=True, slots=True)
class Speech:
    """Who a segment's words are about: its speaker, the person spoken to, the person
    mentioned last (for he/she), and when the words were said."""

    speaker: str
    segment_id: str
    addressee: str | None = None
    last_person: str | None = None  # said in an earlier segment
    # people named in this segment (character offset, name): "she" is the last one said
    # before the pronoun, never one said after it
    people: tuple[tuple[int, str], ...] = ()
    spoken_at: datetime | None = None
    # people named earlier in the session (by NER, a relation, or as a speaker): a capitalised
    # subject the tagger missed ("Tara lives in Chennai", Tara read as an adjective) is one
    known: frozenset[str] = frozenset()


def _sentence_text(sent: Span) -> str:
    return " ".join(sent.text.split())[:MAX_EVIDENCE]


def name_of(tok: Token) -> str | None:
    """A proper name from a PROPN token and its compounds ("Priya Sharma"), or None."""
    if tok.pos_ != "PROPN" and not (tok.pos_ == "NOUN" and tok.is_title and tok.i > tok.sent.start):
        return None  # a capitalised word the tagger took for a noun mid-sentence ("cat Mishti")
    if tok.ent_type_ in _NOT_NAMED:
        return None
    parts = [c for c in tok.children if c.dep_ == "compound" and c.pos_ == "PROPN" and c.i < tok.i]
    words = [*(p.text for p in parts), tok.text]
    if any(not_a_name(w) or not w[:1].isupper() for w in words):
        return None
    return " ".join(words)


def _who(tok: Token, speech: Speech) -> tuple[str, str] | None:
    """The person a subject (or possessor) token is, and how it was found."""
    low = tok.lower_
    how = _FIRST.get(low)
    if how in ("speaker", "we"):
        return (speech.speaker, how) if speech.speaker.strip() else None
    if how == "addressee":
        return (speech.addressee, how) if speech.addressee else None
    if how == "pronoun":
        before = [name for offset, name in speech.people if offset < tok.idx]
        person = before[-1] if before else speech.last_person
        return (person, how) if person else None
    if tok.pos_ == "PROPN":
        name = name_of(tok)
        return (name, "named") if name else None
    if tok.dep_ in ("nsubj", "nsubjpass") and tok.is_title and tok.text in speech.known:
        return tok.text, "named"
    if tok.pos_ == "NOUN":  # "my sister Meera lives…": the appositive name
        for child in tok.children:
            if child.dep_ in ("appos", "compound") and (name := name_of(child)):
                return name, "named"
    return None


def _subject(verb: Token) -> Token | None:
    """The verb's subject, inherited through "and" and "to" ("I quit X and joined Y", "I
    stopped playing")."""
    seen = 0
    while seen < 4:
        for child in verb.children:
            if child.dep_ in ("nsubj", "nsubjpass"):
                return child
        if verb.dep_ in ("conj", "xcomp") and verb.head is not verb:
            objects = [c for c in verb.head.children if c.dep_ in ("dobj", "dative")]
            if verb.dep_ == "xcomp" and objects:
                return None  # "I asked Priya to move": Priya moves, not the asker
            verb, seen = verb.head, seen + 1
            continue
        return None
    return None


def _negated(verb: Token) -> bool:
    return any(c.dep_ == "neg" for c in verb.children) or any(
        c.lower_ == "never" for c in verb.children
    )


def said_ended(verb: Token) -> bool:
    """ "no longer" / "not … anymore" said of this verb itself (its own children: "I work at
    Google, and I don't play tennis anymore" ends the tennis, not the job)."""
    kids = list(verb.children)
    negated = any(c.dep_ == "neg" for c in kids)
    anymore = any(c.lower_ in ("anymore", "any more") for c in kids)
    longer = [c for c in kids if c.lower_ == "longer"]
    no_longer = any(g.lower_ == "no" for c in longer for g in (*c.children, *kids))
    return (negated and anymore) or no_longer


# Verbs whose complement is a wish, plan or request, not a fact ("they want me to move").
_WISH_VERBS = frozenset(
    "want wish hope plan ask tell convince persuade expect consider need like love prefer "
    "suggest urge encourage try mean intend decide think imagine dream".split()
)
# A clause under these is a condition, not a fact ("if I move to Mumbai").
_CONDITIONS = frozenset({"if", "unless", "whether", "suppose", "supposing", "once"})


def _conditional(verb: Token) -> bool:
    """The verb, or a verb it hangs from, is in an if/unless clause; "when/whenever" clauses
    count too unless told in the past ("when I moved to Pune, I was 20" is a fact)."""
    v, seen = verb, 0
    while seen < 4:
        for c in v.children:
            if c.dep_ == "mark" and c.lower_ in _CONDITIONS:
                return True
            if c.dep_ in ("mark", "advmod") and c.lower_ in ("when", "whenever"):
                if v.tag_ not in ("VBD", "VBN"):
                    return True
        if v.dep_ in ("conj", "xcomp", "ccomp", "advcl") and v.head is not v:
            v, seen = v.head, seen + 1
            continue
        return False
    return False


def _future(verb: Token) -> bool:
    chain = [verb, *([verb.head] if verb.dep_ in ("xcomp", "conj", "ccomp") else [])]
    if verb.dep_ in ("xcomp", "ccomp") and verb.head.lemma_ in _WISH_VERBS:
        return True  # "my parents want me to move to Delhi", "I'd love to live in Paris"
    for v in chain:
        for c in v.children:
            if c.dep_ == "aux" and c.lower_ in _FUTURE:
                return True
            if (c.dep_ == "aux" and c.lower_ == "going") or c.lower_ == "gonna":
                return True
        if v.lower_ in ("going", "plan", "planning", "want", "wants", "hope", "hoping"):
            return True
    return False


def _past(verb: Token) -> bool:
    """Simple past ("I lived", "I worked") or "used to": not present perfect."""
    if verb.dep_ == "xcomp" and verb.head.lemma_ == "use" and verb.head.tag_ == "VBD":
        return True
    if verb.tag_ != "VBD":
        return False
    return not any(c.dep_ == "aux" and c.lemma_ == "have" for c in verb.children)


def _span_of(tok: Token) -> str:
    """A place or organisation named by a token: its entity span, else it with its compounds."""
    if tok.ent_type_:
        for ent in tok.doc.ents:
            if ent.start <= tok.i < ent.end:
                text = ent.text
                return text[4:] if text.lower().startswith("the ") else text
    parts = [c.text for c in tok.children if c.dep_ == "compound" and c.i < tok.i]
    return " ".join([*parts, tok.text])


def _named(tok: Token, labels: frozenset[str]) -> str | None:
    """The name a token stands for where a verb's cue says what it is: an entity of one of
    `labels`, or any proper noun NER gave no numeric or time label."""
    if tok.ent_type_ in labels or (tok.pos_ == "PROPN" and tok.ent_type_ not in _NOT_NAMED):
        name = _span_of(tok)
        return name if name[:1].isupper() and not not_a_name(name.split()[0]) else None
    return None


def _place(tok: Token) -> str | None:
    """A place named where a verb's cue says one stands ("moved to X", "lives in X")."""
    return _named(tok, _PLACE_ENTS)


def _org(tok: Token, *, person_ok: bool = False) -> str | None:
    """An organisation named where a verb's cue says one stands ("works at X", "quit X"); a
    name NER calls a person is not one ("I work for Priya") unless the cue allows nothing
    else (`person_ok`: "I joined Zomato", where the small model says PERSON)."""
    if tok.ent_type_ == "PERSON" and not person_ok:
        return None
    return _named(tok, _ORG_ENTS)


def _pobj(verb: Token, *preps: str) -> Iterator[Token]:
    for child in verb.children:
        if child.dep_ in ("prep", "dative") and child.lower_ in preps:
            for obj in child.children:
                if obj.dep_ == "pobj":
                    yield obj
                    yield from (c for c in obj.children if c.dep_ == "conj")


def _dobj(verb: Token) -> Token | None:
    return next((c for c in verb.children if c.dep_ in ("dobj", "attr", "oprd")), None)


def _brand_and_category(noun: Token) -> tuple[str, str | None]:
    """ "Hoka shoes" → ("Hoka", "shoe"); "tea" → ("tea", None); "pottery classes" → pottery."""
    brand = [c for c in noun.children if c.dep_ in ("compound", "nmod") and c.pos_ == "PROPN"]
    if brand and noun.pos_ == "NOUN":
        return " ".join(_span_of(b) for b in brand[:1]), noun.lemma_.lower()
    if noun.lemma_.lower() in HABIT_NOUNS:
        compound = [c for c in noun.children if c.dep_ in ("compound", "amod") and c.pos_ == "NOUN"]
        if compound:
            return compound[0].lower_, None
    if noun.pos_ == "PROPN":
        return _span_of(noun), None
    mods = [c.lower_ for c in noun.children if c.dep_ == "compound" and c.pos_ == "NOUN"]
    return " ".join([*mods, noun.lower_]), None


def each_sentence(doc: Doc, read: Callable[[Span], None], event: str) -> None:
    """`read` on every sentence of a parsed turn; one odd parse (an exception) is logged as
    `event` and never costs the rest of the session."""
    for sent in doc.sents:
        try:
            read(sent)
        except Exception as exc:
            log.warning(event, error=f"{type(exc).__name__}: {exc}")


def dated(
    verb: Token,
    spoken: datetime | None,
    *,
    allow_future: bool = False,
    prefer_future: bool = False,
) -> dict[str, Any] | None:
    """The date a clause names, resolved against when it was said: {"when": the words,
    "valid_from": an ISO day not after it} or {"when", "future": True} when it lies ahead
    (with `allow_future`, its day as "due"); None when the clause names no date. "For two
    years" is how long, not when. `prefer_future`: a date that reads either way ("in March")
    is the coming one (a plan, "I'm starting in March")."""
    for tok in verb.subtree:
        if tok.ent_type_ != "DATE":
            continue
        ent = next((e for e in tok.doc.ents if e.start <= tok.i < e.end), None)
        if ent is None:
            continue
        root = ent.root
        governed = root.head if root.dep_ == "pobj" else None
        if governed is not None and governed.lower_ in ("for", "during", "over", "within"):
            if "ago" not in ent.text.lower():
                continue
        out: dict[str, Any] = {"when": ent.text}
        future = resolve(ent.text, spoken, "future") if spoken is not None else None
        when = resolve(ent.text, spoken, "past")
        if (
            future is not None
            and spoken is not None
            and future.date() > spoken.date()
            and (prefer_future or when is None or when.date() >= spoken.date())
        ):
            out["future"] = True
            if allow_future:
                out["due"] = iso_day(future)
        elif when is not None and spoken is not None and when.date() <= spoken.date():
            out["valid_from"] = iso_day(when)
        return out
    return None


class StatementRules:
    """Applies the rules to one parsed segment. Construct once per segment."""

    def __init__(self, doc: Doc, speech: Speech) -> None:
        self.doc = doc
        self.speech = speech
        self.found: list[ExtractedRelation] = []
        # a thing praised earlier in the segment ("these Hoka shoes are incredible"): what a
        # bare "I switched from Nike" switched to, and the category both belong to
        self._switched_with: tuple[str, str] | None = None

    def run(self) -> list[ExtractedRelation]:
        each_sentence(self.doc, self._sentence, "extract.sentence_skipped")
        return self.found

    # --- output ---

    def _add(self, subject: tuple[str, str], predicate: str, obj: str, verb: Token | None,
             sent: Span, confidence_scale: float = 1.0, **properties: Any) -> None:  # fmt: skip
        name, how = subject
        obj = " ".join(obj.split()).strip(" .,!?'\"")
        if not obj or not name or obj.casefold() == name.casefold() or len(obj) > 60:
            return
        if how in ("addressee", "pronoun") and is_single_valued(predicate):
            # a guessed subject must not end someone's home or job (rule 2, ADR 0017)
            return
        props: dict[str, Any] = {"source": "parse", **{k: v for k, v in properties.items() if v}}
        if verb is not None and (when := self._date(verb)):
            if when.pop("future", None):
                return  # "I'm moving to Pune next month": a plan, not yet a fact
            if predicate in _PERIOD_PREDICATES:
                when.pop("valid_from", None)  # "worked at X in 2019": a period, not its end
            props.update(when)
        self.found.append(
            ExtractedRelation(
                subject=name,
                predicate=predicate,
                object=obj,
                confidence=round(SUBJECT_CONFIDENCE[how] * confidence_scale, 3),
                evidence=_sentence_text(sent),
                segment_id=self.speech.segment_id,
                properties=props,
            )
        )

    def _date(self, verb: Token) -> dict[str, Any] | None:
        return dated(verb, self.speech.spoken_at)

    # --- rules ---

    def _sentence(self, sent: Span) -> None:
        if sent.text.rstrip().endswith("?"):
            return  # a question asks; it states nothing
        for tok in sent:
            if tok.pos_ in ("VERB", "AUX") and tok.dep_ != "aux":
                self._verb(tok, sent)
            if tok.pos_ == "NOUN" and tok.lemma_.lower() in PETS:
                self._pet(tok, sent)
            if tok.lemma_.lower() == "job" and tok.pos_ == "NOUN":
                self._job_noun(tok, sent)

    def _verb(self, verb: Token, sent: Span) -> None:
        lemma = verb.lemma_.lower()
        handler = _HANDLERS.get(lemma)
        if handler is None:
            return
        if _future(verb) or _conditional(verb):
            return
        subj_tok = _subject(verb)
        if subj_tok is None:
            return
        subject = _who(subj_tok, self.speech)
        ended = said_ended(verb)
        if _negated(verb) and not ended:
            return
        handler(self, verb, sent, subject, subj_tok, ended)

    def _live(self, verb: Token, sent: Span, subject: tuple[str, str] | None, subj_tok: Token,
              ended: bool) -> None:  # fmt: skip
        if subject is None:
            return
        for obj in _pobj(verb, "in"):
            if place := _place(obj):
                past = ended or _past(verb)
                self._add(subject, "lived_in" if past else "lives_in", place, verb, sent)

    def _move(self, verb: Token, sent: Span, subject: tuple[str, str] | None, subj_tok: Token,
              ended: bool) -> None:  # fmt: skip
        if subject is None:
            return
        for obj in _pobj(verb, "to"):
            if place := _place(obj):
                self._add(subject, "moved_to", place, verb, sent)
        for obj in _pobj(verb, "from"):
            if place := _place(obj):
                self._add(subject, "moved_from", place, verb, sent)

    def _be(self, verb: Token, sent: Span, subject: tuple[str, str] | None, subj_tok: Token,
            ended: bool) -> None:  # fmt: skip
        for obj in _pobj(verb, "from"):  # "I'm from Kerala"
            if subject is not None and (place := _place(obj)):
                self._add(subject, "is_from", place, None, sent)
        attr = next((c for c in verb.children if c.dep_ == "attr"), None)
        if attr is not None and subject is not None and attr.pos_ == "NOUN":
            role = " ".join([*(c.lower_ for c in attr.children if c.dep_ == "compound"),
                             attr.lower_])  # fmt: skip
            described = any(c.lower_ in _EVALUATIVE for c in attr.children)
            if (role in ROLES or attr.lower_ in ROLES) and not described:
                past = ended or _past(verb)
                self._add(subject, "worked_as" if past else "works_as", role, None, sent)
                for org_tok in _pobj(attr, "at", "for"):
                    if org := _org(org_tok):
                        self._add(subject, "worked_at" if past else "works_at", org, verb, sent)
        acomp = next((c for c in verb.children if c.dep_ == "acomp"), None)
        if acomp is not None and acomp.lower_ in ("married", "engaged", "divorced"):
            predicate = {"married": "spouse", "engaged": "partner", "divorced": "ex_spouse"}[
                acomp.lower_
            ]
            for obj in _pobj(acomp, "to", "from"):
                if subject is not None and (who := _who(obj, self.speech)) is not None:
                    self._add(subject, predicate, who[0], None, sent)
        if acomp is not None and acomp.lower_ in PRAISE and subj_tok.pos_ == "NOUN":
            # "These Hoka shoes are incredible": the speaker likes and uses them
            mine = {c.lower_ for c in subj_tok.children} & {"these", "this", "my", "our"}
            thing, category = _brand_and_category(subj_tok)
            if mine and category and thing[:1].isupper() and self.speech.speaker.strip():
                me = (self.speech.speaker, "speaker")
                self._add(me, "likes", thing, None, sent, 0.9, category=category)
                self._add(me, "uses", thing, None, sent, 0.9, category=category)
                self._switched_with = (thing, category)

    def _work(self, verb: Token, sent: Span, subject: tuple[str, str] | None, subj_tok: Token,
              ended: bool) -> None:  # fmt: skip
        if subject is None:
            return
        past = ended or _past(verb)
        for obj in _pobj(verb, "at", "for"):  # not "with": "I work with Priya" (tagged ORG)
            if org := _org(obj):
                self._add(subject, "worked_at" if past else "works_at", org, verb, sent)
        for obj in _pobj(verb, "as"):
            role = obj.lower_
            if role in ROLES:
                self._add(subject, "worked_as" if past else "works_as", role, verb, sent)

    def _join(self, verb: Token, sent: Span, subject: tuple[str, str] | None, subj_tok: Token,
              ended: bool) -> None:  # fmt: skip
        obj = _dobj(verb)
        if subject is None or obj is None or obj.ent_type_ in _PLACE_ENTS:
            return
        if any(c.dep_ == "prep" and c.lower_ in ("for", "on", "in") for c in verb.children):
            return  # "joined Priya for lunch", "joined them on the trip"
        if obj.pos_ == "PROPN" and (org := _org(obj, person_ok=True)):
            self._add(subject, "works_at", org, verb, sent, 0.95, joined=True)

    def _quit(self, verb: Token, sent: Span, subject: tuple[str, str] | None, subj_tok: Token,
              ended: bool) -> None:  # fmt: skip
        if subject is None:
            return
        targets = [t for t in (_dobj(verb),) if t is not None] + list(_pobj(verb, "from"))
        for obj in targets:
            if obj.ent_type_ in _PLACE_ENTS and verb.lemma_ == "leave":
                trip = any(c.dep_ == "prep" and c.lower_ in ("for", "on") for c in verb.children)
                if not trip and (place := _place(obj)):  # "left Mumbai for a week": a trip
                    self._add(subject, "moved_from", place, verb, sent)
            elif (
                obj.pos_ == "PROPN"
                and obj.ent_type_ in ("ORG", "", "PERSON")
                and (org := _org(obj))
            ):
                if obj.ent_type_ == "PERSON" and verb.lemma_ == "leave":
                    continue  # "I left Priya" is not a job
                self._add(subject, "quit", org, verb, sent)
            elif verb.lemma_ in ("quit", "stop") and obj.pos_ == "NOUN":
                self._stop_thing(subject, obj, verb, sent)
        for x in verb.children:  # "stopped playing tennis", "quit drinking coffee"
            if x.dep_ == "xcomp" and x.tag_ == "VBG":
                self._stop_doing(subject, x, verb, sent)

    def _stop_thing(self, subject: tuple[str, str], obj: Token, verb: Token, sent: Span) -> None:
        thing, _ = _brand_and_category(obj)
        low = obj.lower_
        if low in DRINKS:
            self._add(subject, "avoids", thing, verb, sent)
        elif low in SPORTS or low in ACTIVITIES or obj.lemma_.lower() in HABIT_NOUNS:
            self._add(subject, "stopped", thing, verb, sent)

    def _stop_doing(self, subject: tuple[str, str], gerund: Token, verb: Token,
                    sent: Span) -> None:  # fmt: skip
        obj = _dobj(gerund)
        if gerund.lemma_ in ("drink", "eat", "smoke", "have", "buy", "use", "wear"):
            if obj is not None and obj.pos_ in ("NOUN", "PROPN"):
                thing, category = _brand_and_category(obj)
                consumed = gerund.lemma_ in ("drink", "eat", "smoke")
                predicate = "avoids" if consumed else "stopped_using"
                self._add(subject, predicate, thing, verb, sent, category=category)
            return
        if gerund.lemma_ in ("play", "do", "practice", "take") and obj is not None:
            thing, _ = _brand_and_category(obj)
            self._add(subject, "stopped", thing, verb, sent)
        elif gerund.lower_ in ACTIVITIES:
            self._add(subject, "stopped", gerund.lower_, verb, sent)

    def _start(self, verb: Token, sent: Span, subject: tuple[str, str] | None, subj_tok: Token,
               ended: bool) -> None:  # fmt: skip
        if subject is None:
            return
        if verb.lemma_ == "take" and not any(c.dep_ == "prt" and c.lower_ == "up"
                                             for c in verb.children):  # fmt: skip
            return
        obj = _dobj(verb)
        if obj is not None and obj.pos_ == "NOUN":
            thing, _ = _brand_and_category(obj)
            if thing in ACTIVITIES or obj.lower_ in SPORTS or obj.lemma_.lower() in HABIT_NOUNS:
                self._add(subject, "does", thing, verb, sent, started=True)
            return
        for x in verb.children:
            if x.dep_ == "xcomp" and x.tag_ == "VBG":
                inner = _dobj(x)
                if x.lemma_ in ("play", "do", "practice", "take", "learn") and inner is not None:
                    thing, _ = _brand_and_category(inner)
                    self._add(subject, "does", thing, verb, sent, started=True)
                elif x.lower_ in ACTIVITIES:
                    self._add(subject, "does", x.lower_, verb, sent, started=True)

    def _play(self, verb: Token, sent: Span, subject: tuple[str, str] | None, subj_tok: Token,
              ended: bool) -> None:  # fmt: skip
        if subject is None or (verb.dep_ == "xcomp" and verb.head.lemma_ in _STOPS | _STARTS):
            return
        obj = _dobj(verb)
        if obj is not None and (obj.lower_ in SPORTS or obj.lemma_.lower() in SPORTS):
            predicate = "stopped" if ended else "plays"
            self._add(subject, predicate, obj.lower_, verb, sent)

    def _drink(self, verb: Token, sent: Span, subject: tuple[str, str] | None, subj_tok: Token,
               ended: bool) -> None:  # fmt: skip
        if subject is None or (verb.dep_ == "xcomp" and verb.head.lemma_ in _STOPS | _STARTS):
            return
        if not ended and (_past(verb) or verb.tag_ == "VBD"):
            return  # "I drank wine at the party": once, not the daily drink
        obj = _dobj(verb)
        if obj is not None and obj.lower_ in DRINKS:
            self._add(subject, "avoids" if ended else "drinks", obj.lower_, verb, sent)

    def _switch(self, verb: Token, sent: Span, subject: tuple[str, str] | None, subj_tok: Token,
                ended: bool) -> None:  # fmt: skip
        if subject is None:
            return
        olds = [o for o in _pobj(verb, "from") if o.pos_ in ("NOUN", "PROPN")]
        news = [o for o in _pobj(verb, "to") if o.pos_ in ("NOUN", "PROPN")]
        if verb.lemma_ in ("replace", "swap", "trade"):
            obj = _dobj(verb)
            olds, news = ([obj] if obj is not None else []), list(_pobj(verb, "with", "for"))
        praised = self._switched_with
        category = None
        moving = verb.lemma_ in ("move", "relocate", "shift")  # "moved from Pune": a place
        for new in news:
            thing, category = _brand_and_category(new)
            if moving and new.ent_type_ in _PLACE_ENTS:
                continue
            predicate = "drinks" if new.lower_ in DRINKS else "uses"
            self._add(subject, predicate, thing, verb, sent, category=category, switched=True)
        if not news and praised is not None:
            category = praised[1]
        for old in olds:
            if moving and old.ent_type_ in _PLACE_ENTS:
                continue
            thing, own = _brand_and_category(old)
            self._add(subject, "switched_from", thing, verb, sent, category=own or category)

    def _give(self, verb: Token, sent: Span, subject: tuple[str, str] | None, subj_tok: Token,
              ended: bool) -> None:  # fmt: skip
        """ "Coffee was giving me headaches", "dairy makes me sick": the speaker avoids it."""
        me = any(c.lower_ in ("me", "us") and c.dep_ in ("dative", "dobj", "nsubj")
                 for c in verb.subtree)  # fmt: skip
        obj = _dobj(verb)
        bad = (obj is not None and obj.lower_ in ILLS) or any(
            c.lower_ in ("sick", "ill", "nauseous", "jittery") for c in verb.subtree
        )
        if not (me and bad) or subj_tok.pos_ not in ("NOUN", "PROPN"):
            return
        if subj_tok.lower_ not in DRINKS and subj_tok.lemma_.lower() not in FOODS:
            return  # "my boss gives me headaches" is no food to avoid
        if not self.speech.speaker.strip():
            return
        thing, category = _brand_and_category(subj_tok)
        self._add((self.speech.speaker, "speaker"), "avoids", thing.lower(), verb, sent,
                  category=category)  # fmt: skip

    def _study(self, verb: Token, sent: Span, subject: tuple[str, str] | None, subj_tok: Token,
               ended: bool) -> None:  # fmt: skip
        if subject is None:
            return
        past = ended or _past(verb)
        preds = ("graduated_from",) if verb.lemma_ == "graduate" else (
            ("studied_at",) if past else ("studies_at",))  # fmt: skip
        for obj in _pobj(verb, "at", "from", "in"):
            if obj.ent_type_ in _ORG_ENTS or (obj.pos_ == "PROPN" and obj.ent_type_ == ""):
                if org := _org(obj):
                    self._add(subject, preds[0], org, verb, sent)

    def _grow(self, verb: Token, sent: Span, subject: tuple[str, str] | None, subj_tok: Token,
              ended: bool) -> None:  # fmt: skip
        """ "I grew up in Pune", "she was born in Goa"."""
        if subject is None:
            return
        if verb.lemma_ == "grow" and not any(c.lower_ == "up" for c in verb.children):
            return
        for obj in _pobj(verb, "in"):
            if place := _place(obj):
                self._add(subject, "is_from", place, None, sent)

    def _marry(self, verb: Token, sent: Span, subject: tuple[str, str] | None, subj_tok: Token,
               ended: bool) -> None:  # fmt: skip
        """ "I'm married to Priya", "Priya and I got married" (no date: a wedding is an event)."""
        if any(t.lower_ in ("almost", "nearly") for t in verb.doc[max(0, verb.i - 3) : verb.i]):
            return  # "they almost got married" ("almost" hangs from "got")
        partners: list[tuple[str, str]] = []
        for obj in _pobj(verb, "to"):
            if (who := _who(obj, self.speech)) is not None:
                partners.append(who)
        for conj in subj_tok.children:
            if conj.dep_ == "conj" and (who := _who(conj, self.speech)) is not None:
                partners.append(who)
        predicate = "ex_spouse" if ended or verb.lemma_ == "divorce" else "spouse"
        if verb.lemma_ == "divorce" and (obj := _dobj(verb)) is not None:
            if (who := _who(obj, self.speech)) is not None:
                partners.append(who)
        if subject is None:
            return
        for name, _how in partners:
            self._add(subject, predicate, name, None, sent)

    def _pet(self, noun: Token, sent: Span) -> None:
        """ "our dog Biscuit", "my cat, Luna", "a dog named Biscuit"."""
        owner = next((c for c in noun.children if c.dep_ == "poss"), None)
        name_tok = next((c for c in noun.children if c.dep_ in ("appos", "compound")
                         and c.i > noun.i and name_of(c)), None)  # fmt: skip
        for acl in noun.children:  # "a dog named Biscuit"
            if acl.dep_ == "acl" and acl.lemma_ in ("name", "call"):
                name_tok = next((c for c in acl.children if c.pos_ == "PROPN"), name_tok)
        if name_tok is None:
            return
        name = name_of(name_tok)
        if name is None:
            return
        who: tuple[str, str] | None = None
        if owner is not None:
            who = _who(owner, self.speech)
        elif noun.head.lemma_ in ("have", "get", "adopt") and (s := _subject(noun.head)):
            who = _who(s, self.speech)
        if who is not None:
            self._add(who, "pet", name, None, sent, species=noun.lemma_.lower())

    def _job_noun(self, noun: Token, sent: Span) -> None:
        """ "I got a new job at Google", "my new job at Infosys"."""
        orgs = list(_pobj(noun, "at", "with")) or (
            list(_pobj(noun.head, "at", "with")) if noun.dep_ == "dobj" else []
        )
        if not orgs:
            return
        owner = next((c for c in noun.children if c.dep_ == "poss"), None)
        verb = noun.head if noun.dep_ in ("dobj", "attr") else None
        # "lost her job at Door Dash", "quit my job at Infosys": the job ended
        lost = verb is not None and verb.lemma_ in ("lose", "quit", "leave")
        who = None
        if owner is not None:
            who = _who(owner, self.speech)
        elif verb is not None and verb.lemma_ in ("get", "start", "land", "take", "accept",
                                                  "have", "find", "lose", "quit",
                                                  "leave"):  # fmt: skip
            if _future(verb) or _negated(verb) or _conditional(verb):
                return
            if (s := _subject(verb)) is not None:
                who = _who(s, self.speech)
        if who is None:
            return
        for org_tok in orgs:
            if org := _org(org_tok):
                predicate = "quit" if lost else "works_at"
                self._add(who, predicate, org, verb if verb is not None else noun, sent)


_STOPS = frozenset({"stop", "quit", "give", "drop"})
_STARTS = frozenset({"start", "begin", "take"})
_HANDLERS: dict[str, Any] = {
    "live": StatementRules._live,
    "reside": StatementRules._live,
    "move": StatementRules._move,
    "relocate": StatementRules._move,
    "shift": StatementRules._move,
    "be": StatementRules._be,
    "work": StatementRules._work,
    "join": StatementRules._join,
    "quit": StatementRules._quit,
    "leave": StatementRules._quit,
    "resign": StatementRules._quit,
    "stop": StatementRules._quit,
    "start": StatementRules._start,
    "begin": StatementRules._start,
    "take": StatementRules._start,
    "play": StatementRules._play,
    "drink": StatementRules._drink,
    "switch": StatementRules._switch,
    "change": StatementRules._switch,
    "replace": StatementRules._switch,
    "swap": StatementRules._switch,
    "give": StatementRules._give,
    "make": StatementRules._give,
    "study": StatementRules._study,
    "graduate": StatementRules._study,
    "grow": StatementRules._grow,
    "marry": StatementRules._marry,
    "divorce": StatementRules._marry,
    "bear": StatementRules._grow,
}


def statements(doc: Doc, speech: Speech) -> list[ExtractedRelation]:
    """The facts the rules read in one parsed segment (module docstring)."""
    return StatementRules(doc, speech).run()
