"""The predicate vocabulary: every relation her-os knows, and how a newer fact ends an older one.

One table (PREDICATES) is read by the fast extractor (which predicates it may emit), by the
graph writers of both paths (readable fact sentences, object node types, supersession), by
the LLM path's edge-name mapping (SYNONYMS) and by whatever says a fact in English
(`statement`, `change`: the daily reflection's "Meera moved from Pune to Mumbai").
docs/adr/0017 explains the choices.

Each predicate belongs to at most one *group* (a timeline) in a *state*, "on" or "off":
- residence: lives_in / moved_to (on), moved_from / lived_in (off);
- employment: works_at (on), quit / worked_at (off); role: works_as (on), worked_as (off);
- education: studies_at (on), studied_at / graduated_from (off);
- preference: likes / loves / enjoys / prefers (on), avoids / dislikes / hates (off);
- drink: drinks (on) — the daily drink;
- usage: uses / owns (on), stopped_using (off) — things used or owned, per category;
- activity: does / plays (on), stopped (off);
- marriage: spouse (on), ex_spouse (off); partnership: partner (on), ex_partner (off).

How a later fact g ends an earlier, still valid fact f of the same subject (a fact's
invalid_at is g's valid_at, expired_at when her-os learnt it; nothing is deleted):
1. Same pair, same group, other state: "avoids coffee" ends "likes coffee" (symmetric groups
   match the pair in either direction).
2. Single-valued groups (SINGLE_VALUED): g "on" about ANOTHER object of the same slot ends f
   "on": "lives in Mumbai" ends "lives in Pune". The slot is (subject, group), and for
   category-scoped groups (usage) also the fact's `category`: (Rajesh, uses, Hoka, shoe) ends
   (Rajesh, uses, Nike, shoe) but not (Rajesh, uses, Kindle, reader).
3. Explicit endings (ENDS): g's predicate ends facts of other groups on the same pair:
   "switched from Nike" ends "likes Nike" and "uses Nike"; "avoids coffee" also ends
   "drinks coffee"; "stopped playing tennis" ends "plays tennis".
A fact in an "off" state is itself a current truth ("avoids coffee"), ended only by rule 1.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

State = Literal["on", "off"]


@dataclass(frozen=True, slots=True)
class Predicate:
    name: str
    noun: bool = False  # kinship/role nouns read "X's spouse is Y"; others "X likes Y"
    object_type: str = "topic"  # node type of an object that is not an extracted entity
    group: str | None = None
    state: State = "on"
    ends: tuple[str, ...] = ()  # other groups this fact ends on the same pair (rule 3)
    phrase: str = ""  # how the fact reads, when not the predicate's words
    past: str = ""  # how it reads once over ("lived in"), when not the same as `phrase`


def _p(name: str, **kw: object) -> Predicate:
    return Predicate(name, **kw)  # type: ignore[arg-type]


_PERSON = {"noun": True, "object_type": "person"}
_ENDS_HAVING = ("preference", "usage", "drink", "activity")

PREDICATES: MappingProxyType[str, Predicate] = MappingProxyType(
    {
        p.name: p
        for p in (
            # people and pets
            _p("spouse", group="marriage", **_PERSON),
            _p("ex_spouse", group="marriage", state="off", phrase="ex-spouse", **_PERSON),
            _p("partner", group="partnership", **_PERSON),
            _p("ex_partner", group="partnership", state="off", phrase="ex-partner", **_PERSON),
            *(
                _p(n, **_PERSON)
                for n in (
                    "sibling",
                    "parent",
                    "child",
                    "grandparent",
                    "grandchild",
                    "cousin",
                    "uncle",
                    "aunt",
                    "niece",
                    "nephew",
                    "in_law",
                    "relative",
                    "friend",
                    "colleague",
                    "boss",
                    "employee",
                    "neighbor",
                    "roommate",
                    "classmate",
                    "mentor",
                    "doctor",
                    "therapist",
                )
            ),
            _p("pet", noun=True, object_type="topic"),
            # places
            _p(
                "lives_in",
                object_type="place",
                group="residence",
                phrase="lives in",
                past="lived in",
            ),
            _p("moved_to", object_type="place", group="residence", phrase="moved to"),
            _p(
                "moved_from",
                object_type="place",
                group="residence",
                state="off",
                phrase="moved away from",
            ),
            _p(
                "lived_in",
                object_type="place",
                group="residence",
                state="off",
                phrase="used to live in",
            ),
            _p("is_from", object_type="place", phrase="is from", past="was from"),
            # work and study
            _p(
                "works_at",
                object_type="organization",
                group="employment",
                phrase="works at",
                past="worked at",
            ),
            _p(
                "worked_at",
                object_type="organization",
                group="employment",
                state="off",
                phrase="used to work at",
            ),
            _p("quit", object_type="organization", group="employment", state="off", phrase="left"),
            _p("works_as", group="role", phrase="works as", past="worked as"),
            _p("worked_as", group="role", state="off", phrase="used to work as"),
            _p(
                "studies_at",
                object_type="organization",
                group="education",
                phrase="studies at",
                past="studied at",
            ),
            _p(
                "studied_at",
                object_type="organization",
                group="education",
                state="off",
                phrase="studied at",
            ),
            _p(
                "graduated_from",
                object_type="organization",
                group="education",
                state="off",
                phrase="graduated from",
            ),
            # preferences, habits, things
            *(
                _p(n, group="preference", past=past)
                for n, past in (
                    ("likes", "liked"),
                    ("loves", "loved"),
                    ("enjoys", "enjoyed"),
                    ("prefers", "preferred"),
                )
            ),
            *(
                _p(
                    n,
                    group="preference",
                    state="off",
                    ends=("usage", "drink", "activity"),
                    past=past,
                )
                for n, past in (("avoids", "avoided"), ("dislikes", "disliked"), ("hates", "hated"))
            ),
            _p("drinks", group="drink", past="drank"),
            _p("uses", group="usage", past="used"),
            _p("owns", group="usage", past="owned"),
            _p("stopped_using", group="usage", state="off", phrase="stopped using"),
            _p("does", group="activity", past="did"),
            _p("plays", group="activity", past="played"),
            _p(
                "stopped",
                group="activity",
                state="off",
                ends=("preference", "drink"),
                phrase="stopped",
            ),
            _p("switched_from", ends=_ENDS_HAVING, phrase="switched away from"),
        )
    }
)

# Groups whose "on" facts hold one object at a time per subject (rule 2).
SINGLE_VALUED: frozenset[str] = frozenset(
    {"residence", "employment", "role", "education", "drink", "usage"}
)
# Single-valued groups whose slot is per category (the fact's `category` property).
CATEGORY_SCOPED: frozenset[str] = frozenset({"usage"})
# Groups whose pair is direction-free.
SYMMETRIC: frozenset[str] = frozenset({"marriage", "partnership"})

# Edge names an LLM (graphiti's add_episode) writes, mapped to ours so both paths end facts the
# same way. Keys are normalised (snake_case, lower case). Names that are ambiguous between a
# single-valued predicate and something else ("works_in" a city, "joined" a gym, "located_in",
# "is_a" mother) are left unmapped: a wrong mapping would end a true fact.
SYNONYMS: MappingProxyType[str, str] = MappingProxyType(
    {
        "married_to": "spouse", "is_married_to": "spouse", "wife": "spouse",
        "husband": "spouse", "wife_of": "spouse", "husband_of": "spouse", "spouse_of": "spouse",
        "has_wife": "spouse", "has_husband": "spouse", "has_spouse": "spouse",
        "divorced": "ex_spouse", "divorced_from": "ex_spouse",
        "dating": "partner", "is_dating": "partner", "girlfriend": "partner",
        "boyfriend": "partner", "partner_of": "partner",
        "sister": "sibling", "brother": "sibling", "sibling_of": "sibling",
        "has_sister": "sibling", "has_brother": "sibling", "sister_of": "sibling",
        "brother_of": "sibling", "friend_of": "friend", "friends_with": "friend",
        "is_friends_with": "friend", "has_friend": "friend",
        "lives": "lives_in", "living_in": "lives_in", "resides_in": "lives_in",
        "is_living_in": "lives_in",
        "relocated_to": "moved_to", "moves_to": "moved_to", "moving_to": "moved_to",
        "comes_from": "is_from", "born_in": "is_from",
        "hometown": "is_from", "works_for": "works_at", "employed_by": "works_at",
        "employed_at": "works_at",
        "job_at": "works_at", "quit_job_at": "quit", "resigned_from": "quit",
        "left_job_at": "quit", "has_job_title": "works_as", "job_title": "works_as",
        "student_at": "studies_at",
        "enrolled_at": "studies_at",
        "like": "likes", "loves": "loves", "love": "loves", "enjoy": "enjoys",
        "prefer": "prefers", "favorite": "likes", "favourite": "likes",
        "dislike": "dislikes", "hate": "hates", "avoid": "avoids", "gave_up": "avoids",
        "quit_drinking": "avoids", "drink": "drinks", "drinks_daily": "drinks",
        "switched_to": "uses", "uses": "uses", "use": "uses", "owns": "owns",
        "wears": "uses", "plays_sport": "plays", "practices": "does",
        "took_up": "does", "stopped_playing": "stopped", "stopped_doing": "stopped",
        "gave_up_on": "stopped", "switched_from": "switched_from", "replaced": "switched_from",
    }
)  # fmt: skip

_SNAKE = re.compile(r"[^0-9a-z]+")


def normalise(predicate: str) -> str:
    """snake_case ("Ex Spouse" → "ex_spouse"), LLM synonyms mapped to ours ("WORKS_FOR" →
    "works_at"); an unknown predicate stays as it is, in snake_case."""
    p = _SNAKE.sub("_", predicate.strip().casefold()).strip("_") or "related_to"
    return SYNONYMS.get(p, p)


# Words a question asks a group by ("Where does Tara live?" asks residence, "Who is her
# husband?" marriage): query_facts.py ranks facts by them, beside the facts' own words.
QUESTION_CUES: MappingProxyType[str, frozenset[str]] = MappingProxyType(
    {
        group: frozenset(words.split())
        for group, words in {
            "residence": "live lives living lived home move moved moving stay stays reside "
            "resides city town house flat apartment neighbourhood neighborhood",
            "employment": "work works working worked job employer company office employed career",
            "role": "job work works profession occupation career",
            "education": "study studies studying studied school college university degree "
            "student graduate graduated",
            # not "favourite" or "fan": "her favourite book" asks for one thing, not a taste
            "preference": "like likes love loves enjoy enjoys prefer prefers hate hates "
            "dislike dislikes",
            "drink": "drink drinks drinking beverage",
            "usage": "use uses using wear wears own owns",
            "activity": "play plays playing sport sports hobby hobbies",
            "marriage": "married marry wife husband spouse",
            "partnership": "dating girlfriend boyfriend partner",
        }.items()
    }
)


def spec(predicate: str) -> Predicate | None:
    return PREDICATES.get(normalise(predicate))


def is_single_valued(predicate: str) -> bool:
    s = spec(predicate)
    return s is not None and s.group in SINGLE_VALUED and s.state == "on"


# --- facts as English ----------------------------------------------------------------------

# How a change of object within a single-valued group reads ({s} the subject, {old} / {new}
# the objects). Other endings read "<new statement>, and no longer <old>" (change()).
CHANGES: MappingProxyType[str, str] = MappingProxyType(
    {
        "residence": "{s} moved from {old} to {new}",
        "employment": "{s} left {old} for {new}",
        "education": "{s} moved from {old} to {new}",
        "role": "{s} went from {old} to {new}",
        "drink": "{s} switched from {old} to {new}",
        "usage": "{s} switched from {old} to {new}",
    }
)


def _plural(word: str) -> str:
    """A category word as a plural: shoe → shoes, glass → glasses, battery → batteries (one
    already plural, "headphones", stays)."""
    if word.endswith(("ss", "x", "z", "ch", "sh")):
        return f"{word}es"
    if word.endswith("s"):
        return word
    if word.endswith("y") and word[-2:-1] not in ("a", "e", "i", "o", "u", ""):
        return f"{word[:-1]}ies"
    return f"{word}s"


def _thing(obj: str, category: str | None) -> str:
    """The object, with its category when it adds something: "Hoka (shoes)"."""
    obj = " ".join(obj.split())
    kind = " ".join((category or "").split()).casefold()
    if not kind or kind in obj.casefold():
        return obj
    return f"{obj} ({_plural(kind)})"


def _words(predicate: str, current: bool) -> tuple[Predicate | None, str]:
    """The predicate's spec and its words: "lives in" (current) / "lived in" (over)."""
    p = normalise(predicate)
    known = PREDICATES.get(p)
    if known is None:
        return None, p.replace("_", " ")
    if known.noun:
        return known, known.phrase or p.replace("_", "-")
    words = known.phrase or p.replace("_", " ")
    return known, words if current else (known.past or words)


def statement(
    subject: str, predicate: str, obj: str, *, category: str | None = None, current: bool = True
) -> str:
    """A fact as a short English clause (no final full stop), from the vocabulary's own
    words: ("Meera", "lives_in", "Mumbai") → "Meera lives in Mumbai"; `current=False` → "Meera
    lived in Mumbai"; kinship nouns → "Asha's spouse is Priya" / "… was Priya"; a category →
    "Rajesh uses Hoka (shoes)". An unknown predicate (an LLM's edge name) reads as its words:
    ("Asha", "VISITED", "Goa") → "Asha visited Goa". Predicate names are normalised first
    (synonyms, any case)."""
    subject = " ".join(subject.split())
    known, words = _words(predicate, current)
    thing = _thing(obj, category)
    if known is not None and known.noun:
        return f"{subject}'s {words} {'is' if current else 'was'} {thing}"
    return f"{subject} {words} {thing}"


def change(
    subject: str,
    old_predicate: str,
    old_obj: str,
    new_predicate: str,
    new_obj: str,
    *,
    category: str | None = None,
) -> str:
    """How a newer fact that ended an older one of the same subject reads: a new object in
    a single-valued group by CHANGES ("Meera moved from Pune to Mumbai", "Rajesh switched
    from coffee to tea", "Rajesh switched from Nike to Hoka (shoes)"); the same object in
    another state "Rajesh avoids coffee, and no longer loves it"; a kinship noun "<new>
    (before: <old, over>)"; anything else "<new>, and no longer <old's words> <old object>"."""
    subject = " ".join(subject.split())
    old, new = spec(old_predicate), spec(new_predicate)
    said = statement(subject, new_predicate, new_obj, category=category)
    same_object = " ".join(old_obj.split()).casefold() == " ".join(new_obj.split()).casefold()
    if (
        not same_object
        and old is not None
        and new is not None
        and old.group == new.group
        and old.state == new.state == "on"
        and (template := CHANGES.get(old.group or "")) is not None
    ):
        return template.format(
            s=subject, old=" ".join(old_obj.split()), new=_thing(new_obj, category)
        )
    _, words = _words(old_predicate, True)
    if old is not None and old.noun:
        return f"{said} (before: {statement(subject, old_predicate, old_obj, current=False)})"
    what = "it" if same_object else _thing(old_obj, category)
    return f"{said}, and no longer {words} {what}"
