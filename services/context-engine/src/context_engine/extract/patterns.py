"""Patterns for what NER does not see: promises, decisions, questions, habits, relationships
between people, and likes and dislikes.

Each pattern carries a confidence that says how often such a match is what it claims (a
first-person "I'll call him tomorrow" is nearly always a promise; "I'll" alone in "I'll be
honest" is not, so bare "I'll" needs an action verb after it). Confidences are on the same
scale as the gates in schema.py.

Relations: "my wife Priya" said by Asha gives (Asha, spouse, Priya); "her brother Arjun" gives
(X, sibling, Arjun) where X is the person mentioned last before it (in the same segment, else
the caller's `previous_person`), and nothing when there is none; "your sister Amy" needs the
caller's `addressee`. Preferences: "I love coffee" gives (speaker, likes, coffee), "I gave up
coffee" (speaker, avoids, coffee): the object is a short lower-cased noun phrase, so a later
opposite preference about the same thing can supersede the earlier one in the graph.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from context_engine.extract.language import sentences, talk_stop_words
from context_engine.extract.schema import (
    EntityType,
    ExtractedEntity,
    ExtractedRelation,
    SegmentText,
)

# Verbs after "I'll"/"I will" that make a commitment rather than a prediction or a filler.
_ACTION = (
    r"(?:call|text|email|send|bring|buy|get|pick|book|pay|fix|finish|check|ask|tell|"
    r"remind|write|meet|visit|come|drop|return|clean|cook|make|do|take|look|sort|order|"
    r"handle|arrange|organi[sz]e|schedule|ring|submit|review|update|share|help|"
    r"drive|give|sign|renew|cancel|reply|follow|talk|print|feed|water|walk|set|fill|"
    r"collect|mail|post|phone|message|confirm|reserve|prepare)"
)


@dataclass(frozen=True, slots=True)
class _Pattern:
    type: EntityType
    regex: re.Pattern[str]
    confidence: float


def _p(type_: EntityType, pattern: str, confidence: float) -> _Pattern:
    return _Pattern(type_, re.compile(pattern, re.IGNORECASE), confidence)


PATTERNS: tuple[_Pattern, ...] = (
    _p("promise", rf"\b(?:I'll|I will|I'm going to|I am going to)\s+(?:\w+\s+)?{_ACTION}\b"
                  r"[^.?!]*", 0.8),
    _p("promise", r"\bremind me to\b[^.?!]*", 0.85),
    _p("promise", r"\bI promise\b[^.?!]*", 0.9),
    _p("promise", r"\b(?:don't let me forget|I need to remember) to\b[^.?!]*", 0.8),
    _p("decision", r"\b(?:we|I) (?:have |'ve )?decided\b[^.?!]*", 0.85),
    _p("decision", r"\b(?:we're|we are|I'm|I am) going with\b[^.?!]*", 0.8),
    _p("decision", r"\blet's go with\b[^.?!]*", 0.75),
    _p("decision", r"\b(?:we|I) (?:agreed|settled on|chose|picked)\b[^.?!]*", 0.75),
    _p("habit", r"\bI (?:always|usually|never|often)\s+\w+[^.?!]*", 0.7),
    _p("habit", r"\bevery (?:morning|evening|night|day|week|weekend|monday|tuesday|wednesday|"
                r"thursday|friday|saturday|sunday)\b[^.?!]*", 0.7),
)  # fmt: skip

# A sentence is a question when it ends with "?" and has a question word before it (so not a
# tag like "right?"). Checked sentence by sentence: one regex over the whole text backtracks
# quadratically on long unpunctuated text.
_QUESTION_WORD = re.compile(r"\b(?:who|what|when|where|why|how|which|can|could|should|"
                            r"would|do|does|did|is|are|will)\b", re.IGNORECASE)  # fmt: skip
# Questions that are conversational fillers, not something asked.
_FILLER_QUESTION = re.compile(
    r"^(?:\W*(?:and|but|so|oh|well|or)\W+)?(?:you know what I mean|know what I mean|"
    r"(?:do|don't) you (?:know|think so|agree)|isn't it|aren't you|wouldn't you say|"
    r"can you believe it|how (?:cool|awesome|great|amazing|nice|sweet|fun) is that|"
    r"what do you know|who knew|how about that|how are you|how's it going|what's up|"
    r"how have you been|how are things|what about you|how about you|and you)\W*$",
    re.IGNORECASE,
)

# Words that carry no content of their own in a question: spaCy's stop words (less those that
# carry content in talk: language.CONTENT_IN_TALK) and these fillers of talk. What is left
# must name something ("Which one?", "Oh nice, how so?" and "How're you doing?" leave
# nothing; "Where did you go hiking?" leaves two).
_QUESTION_FILLERS = frozenset(
    "ah cool going gonna got great guess haha having hey hi hmm huh kind know like lol mean "
    "nice oh ok okay ones right said shall sort stuff sure thing things think uh um wanna wow "
    "yeah yes".split()
)
_QUESTION_STOP = talk_stop_words() | _QUESTION_FILLERS


QUESTION_MIN_CONTENT = 1
_CONTENT_WORD = re.compile(r"[A-Za-z][A-Za-z'-]+")


def question_content(question: str) -> list[str]:
    """The question's words that are not stop words or fillers (_QUESTION_STOP)."""
    words = (w.lower().strip("'-") for w in _CONTENT_WORD.findall(question))
    return [w for w in words if len(w) > 2 and w not in _QUESTION_STOP and "'" not in w]


# Relationship words → the relation's predicate.
RELATIONS: dict[str, str] = {
    "wife": "spouse", "husband": "spouse", "partner": "partner", "spouse": "spouse",
    "girlfriend": "partner", "boyfriend": "partner", "fiancee": "partner", "fiancé": "partner",
    "fiance": "partner", "fiancée": "partner",
    "brother": "sibling", "sister": "sibling", "sibling": "sibling",
    "mother": "parent", "mom": "parent", "mum": "parent", "father": "parent", "dad": "parent",
    "son": "child", "daughter": "child", "kid": "child",
    "friend": "friend", "best friend": "friend", "colleague": "colleague", "boss": "boss",
    "manager": "boss", "coworker": "colleague", "roommate": "roommate", "neighbour": "neighbor",
    "neighbor": "neighbor", "cousin": "cousin", "uncle": "uncle", "aunt": "aunt",
    "grandmother": "grandparent", "grandma": "grandparent", "grandfather": "grandparent",
    "grandpa": "grandparent", "doctor": "doctor", "therapist": "therapist",
    "ex-wife": "ex_spouse", "ex-husband": "ex_spouse", "ex-girlfriend": "ex_partner",
    "ex-boyfriend": "ex_partner", "half-brother": "sibling", "half-sister": "sibling",
    "stepbrother": "sibling", "stepsister": "sibling", "twin brother": "sibling",
    "twin sister": "sibling", "stepmother": "parent", "stepfather": "parent",
    "stepmom": "parent", "stepdad": "parent", "niece": "niece", "nephew": "nephew",
    "grandson": "grandchild", "granddaughter": "grandchild", "roomie": "roommate",
    "flatmate": "roommate", "housemate": "roommate", "assistant": "employee",
    "mother-in-law": "in_law", "father-in-law": "in_law", "sister-in-law": "in_law",
    "brother-in-law": "in_law", "classmate": "classmate", "mentor": "mentor",
    "lover": "partner",
}  # fmt: skip
_REL_WORDS = "|".join(sorted((re.escape(w) for w in RELATIONS), key=len, reverse=True))
_CAP = r"[A-Z][a-z]+(?:[-'][A-Z][a-z]+)?"
_NAME = rf"({_CAP}(?:\s{_CAP})?)"
_OWNER = r"((?i:my|our|his|her|their|your)|[A-Z][a-z]+'s)"
# "my wife Priya", "my best friend, Ravi", "Priya, my wife", "her brother Arjun",
# "Priya's brother Arjun" (owner and relation words in any case; the name must be capitalised)
_REL_BEFORE = re.compile(rf"\b{_OWNER}\s+((?i:{_REL_WORDS})),?\s+{_NAME}")
_REL_AFTER = re.compile(rf"{_NAME},\s+{_OWNER}\s+((?i:{_REL_WORDS}))\b")
# "Priya is my wife" (only the speaker's own: "Priya is her sister" is too often a guess)
_REL_IS = re.compile(rf"{_NAME} (?:is|was|'s) ((?i:my|our)) ((?i:{_REL_WORDS}))\b")

_OWNER_WORDS = {"my": "speaker", "our": "speaker"}
_PRONOUN_OWNERS = {"his", "her", "their"}
# Capitalised words that are not names though they stand where one would ("my mom Monday",
# "Hey Man!", "Y'know"): function words, interjections, forms of address, days and months.
NOT_NAMES = frozenset(
    "I Im Ive Id Ill I'm I've I'd I'll The A An And But So Or Oh Okay OK Ok Yeah Yes No Hey Hi "
    "Well Wow Uh Um Hmm Please Thanks Sorry God Lord Jesus Monday Tuesday Wednesday Thursday "
    "Friday Saturday Sunday January February March April May June July August September "
    "October November December Christmas Easter Today Tomorrow Yesterday Tonight Mom Dad Mum "
    "Mommy Daddy Sir Madam Ma'am Honey Baby Sweetie Dear Buddy Dude Man Guys Everyone "
    "Everybody Nobody Somebody Someone It That What Let He She There Here Who Where When How "
    "This Listen Look Thanks Cheers Welcome Congratulations Congrats Goodbye Bye Night "
    "You Your You'll You're You've Y'know Ya Yep Yup Nope Nah Yay Yeah Yo Whoa Whoah Woah Ooh "
    "Ohh Oops Ow Ouch Wha Huh Ugh Aww Aw Ah Ahh Mmm Mm Shh Hush Gosh Geez Jeez Damn Dammit Darn "
    "Hello Hiya Cool Great Nice Sure Right Alright Fine Good Awesome Amazing Wonderful Fantastic "
    "Really Seriously Totally Absolutely Exactly Definitely Anyway Actually Honestly Maybe "
    "Boy Boys Girl Girls Folks Team Darling Sweetheart Love Bro Sis Mate Pal Kiddo Champ Son "
    "Father Mother Brother Sister Grandma Grandpa Grandmother Grandfather Aunt Uncle Cousin "
    "Mister Miss Doctor Officer Captain Coach Everything Nothing Something Anything Happy "
    "Merry New Year Birthday Morning Evening Afternoon Weekend All Both Mr Mrs Ms Dr "
    "Woohoo Woo Whoo Whee Yippee Hooray Hurray Yikes Eek Uh-oh Oh-oh Noo Un Er Erm Ahem Bah "
    "Meh Pfft Phew Psst Voila Oy Oi Haha Hah Lol Omg Wait Guess Glad Wanna Gonna Gotta Sounds "
    "Nature Dance Congratz Awww Wooo Yess Yesss Sweet Lovely Gorgeous Beautiful Thank".split()
)
_CONTRACTION = re.compile(r"^(?:\w+'(?:ll|re|ve|d|m|t|know|all)|[ycdg]'\w+)$", re.IGNORECASE)
_STRETCHED = re.compile(r"(\w)\1\1")  # "Noooo", "Ohhh", "Sooo"


def not_a_name(word: str) -> bool:
    """A capitalised word that is not a name: NOT_NAMES, a contraction ("You'll", "Y'know")
    or a stretched interjection ("Noooo")."""
    return word in NOT_NAMES or bool(_CONTRACTION.match(word) or _STRETCHED.search(word))


_PERSONAL = frozenset({"i", "me", "you", "he", "she", "we", "they", "him", "her", "us", "them"})


_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"'})


def normalise_text(text: str) -> str:
    """Curly quotes → straight ones (speech-to-text and chat both produce them); one character
    for one, so offsets into the text stay valid."""
    return text.translate(_QUOTES)


# --- entities -------------------------------------------------------------------------------


def find_entity_spans(segment: SegmentText) -> Iterator[tuple[ExtractedEntity, int, int]]:
    """Promises, decisions, habits and questions said in one segment, each with the character
    span of its match in the segment's text."""
    text = normalise_text(segment.text)
    matches = [(p, m) for p in PATTERNS for m in p.regex.finditer(text)]
    # One entity per statement: "I promise I will call Amma" matches two promise patterns;
    # the longest match of a type wins over any match of that type it overlaps.
    matches.sort(key=lambda pm: (pm[1].start() - pm[1].end(), pm[1].start()))
    taken: dict[str, list[tuple[int, int]]] = {}
    for pattern, m in matches:
        spans = taken.setdefault(pattern.type, [])
        if any(m.start() < end and start < m.end() for start, end in spans):
            continue
        spans.append((m.start(), m.end()))
        said = _sentence_of(m)
        yield (
            ExtractedEntity(
                type=pattern.type,
                name=said[:200],
                confidence=pattern.confidence,
                evidence=said,
                properties={"speaker": segment.speaker},
                segment_id=segment.segment_id,
            ),
            m.start(),
            m.end(),
        )
    for sentence, at in sentences(text):
        end = sentence.find("?")
        if end < 0 or not _QUESTION_WORD.search(sentence, 0, end):
            continue
        asked = sentence[: end + 1].strip()
        # "right?", "you know?", "which one?" and "you know what I mean?" are not questions
        # worth keeping: a kept question has content words of its own
        if (
            len(asked.split()) >= 3
            and not _FILLER_QUESTION.match(asked)
            and len(question_content(asked)) >= QUESTION_MIN_CONTENT
        ):
            yield (
                ExtractedEntity(
                    type="question",
                    name=asked[:200],
                    confidence=0.6,
                    evidence=asked,
                    properties={"speaker": segment.speaker},
                    segment_id=segment.segment_id,
                ),
                at + (len(sentence) - len(sentence.lstrip())),
                at + end + 1,
            )


def find_entities(segment: SegmentText) -> Iterator[ExtractedEntity]:
    """Promises, decisions, habits and questions said in one segment."""
    for entity, _, _ in find_entity_spans(segment):
        yield entity


def _sentence_of(match: re.Match[str]) -> str:
    return match.group(0).strip(" ,;")


# --- relations between people ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RelationMention:
    """A relation word with its owner and a name, as said: ("her", "sibling", "Arjun")."""

    owner: str  # "my", "her", "your", or a name ("Priya" from "Priya's brother Arjun")
    predicate: str
    object: str
    evidence: str
    start: int  # where the match starts in the text
    object_start: int  # where the name starts


def _starts_sentence(text: str, at: int) -> bool:
    before = text[:at].rstrip()
    return not before or before[-1] in ".?!:;\"'"


_TITLE = re.compile(r"^(?:Mr|Mrs|Ms|Dr)\.?\s+")


def _is_name(name: str) -> bool:
    name = _TITLE.sub("", name)
    return bool(name) and not any(not_a_name(w) for w in name.split())


def _owner_of(raw: str) -> str:
    return raw[:-2] if raw.endswith("'s") else raw.lower()


def relation_mentions(text: str) -> list[RelationMention]:
    """Every relation mention in a text, in the order said; names that are not names
    ("my mom Monday") are left out."""
    text = normalise_text(text)
    found: list[RelationMention] = []
    for m in _REL_BEFORE.finditer(text):
        found.append(RelationMention(_owner_of(m.group(1)), RELATIONS[m.group(2).lower()],
                                     m.group(3), m.group(0), m.start(), m.start(3)))  # fmt: skip
    for m in _REL_AFTER.finditer(text):
        # "Listen, my friend" is not a name; "Priya, my wife, never…" is: the appositive's
        # closing comma says the name is the sentence's subject
        if _starts_sentence(text, m.start()) and not text[m.end() : m.end() + 1] == ",":
            continue
        found.append(RelationMention(_owner_of(m.group(2)), RELATIONS[m.group(3).lower()],
                                     m.group(1), m.group(0), m.start(), m.start(1)))  # fmt: skip
    for m in _REL_IS.finditer(text):
        found.append(RelationMention(m.group(2).lower(), RELATIONS[m.group(3).lower()],
                                     m.group(1), m.group(0), m.start(), m.start(1)))  # fmt: skip
    kept = [r for r in found if _is_name(r.object) and (r.owner.islower() or _is_name(r.owner))]
    # one mention per (owner, predicate, name), the first said
    unique: dict[tuple[str, str, str], RelationMention] = {}
    for r in sorted(kept, key=lambda r: r.start):
        unique.setdefault((r.owner, r.predicate, r.object), r)
    return list(unique.values())


# --- vocatives ------------------------------------------------------------------------------

_GREETING = (
    r"hey|hi|hello|hiya|thanks|thank you|thank u|congrats|congratulations|bye|goodbye|"
    r"good morning|good night|good evening|good afternoon|morning|welcome|welcome back|cheers|"
    r"oh|wow|yes|yeah|no|sorry|okay|ok|well|listen|yo|see you|love you|miss you|great job|"
    r"good job|nice job|well done|good luck|happy birthday|take care|night|dear"
)
_VOC_NAME = rf"((?:(?:Mr|Mrs|Ms|Dr)\.?\s)?{_CAP}(?:\s{_CAP})?)"
# "Hey Gina!", "Thanks, Nate." — a greeting word, the name, then punctuation or the end
_VOC_LEAD = re.compile(rf"(?<![\w'])(?i:{_GREETING})\s*,?\s+{_VOC_NAME}(?=\s*(?:[,!.?;:]|$))")
# "That's great, Gina!" — a comma, the name, then the end of the sentence
_VOC_END = re.compile(rf",\s+{_VOC_NAME}(?=\s*(?:[!?.]|$))")


@dataclass(frozen=True, slots=True)
class Vocative:
    offset: int
    name: str
    greeted: bool  # after a greeting ("Hey Gina!"), not only after a comma ("great, Gina!")


def find_vocatives(text: str) -> list[Vocative]:
    """Names the speaker addresses: "Hey Gina!", "Thanks, Nate.", "That's great, Gina!". A
    name after a comma counts only when the word before the comma is not capitalised, so lists
    of places ("Rome, Paris.") are not taken for one; an appositive ("my home country, Sweden.")
    still is, so the caller should check such a name against NER (`greeted` is False)."""
    text = normalise_text(text)
    found: dict[int, Vocative] = {}
    for m in _VOC_LEAD.finditer(text):
        found[m.start(1)] = Vocative(m.start(1), m.group(1), greeted=True)
    for m in _VOC_END.finditer(text):
        before = text[: m.start()].split()
        if before and before[-1][:1].islower() and m.start(1) not in found:
            found[m.start(1)] = Vocative(m.start(1), m.group(1), greeted=False)
    return [v for _, v in sorted(found.items()) if _is_name(v.name)]


# Confidence of a relation by how its owner was found: the speaker's own ("my wife Priya") is
# nearly always right; a named owner ("Priya's brother Arjun") is said outright; a pronoun
# resolved to the last person mentioned, or "your" to the previous speaker, is a guess.
REL_CONFIDENCE = {"speaker": 0.85, "named": 0.75, "pronoun": 0.6, "addressee": 0.6}


def find_relations(
    segment: SegmentText,
    *,
    people: Sequence[tuple[int, str]] = (),
    previous_person: str | None = None,
    addressee: str | None = None,
) -> Iterator[ExtractedRelation]:
    """Person–person relations named in one segment, with their owner resolved.

    "my wife Priya" said by Asha gives (Asha, spouse, Priya). "her brother Arjun" gives
    (X, sibling, Arjun) with X the last person mentioned before it: the names in `people`
    (character offset, name — e.g. from NER) and the relations' own names in this segment,
    else `previous_person`; with none, nothing is yielded. "your sister Amy" needs `addressee`
    (the person spoken to, e.g. the previous speaker in a two-person conversation)."""
    mentions = relation_mentions(segment.text)
    seen = sorted([*people, *((r.object_start, r.object) for r in mentions)])
    for r in mentions:
        if r.owner in _OWNER_WORDS:
            subject, how = segment.speaker.strip(), "speaker"
        elif r.owner == "your":
            subject, how = addressee, "addressee"
        elif r.owner in _PRONOUN_OWNERS:
            before = [name for offset, name in seen if offset < r.start]
            subject, how = (before[-1] if before else previous_person), "pronoun"
        else:
            subject, how = r.owner, "named"
        if not subject or not subject.strip() or subject.casefold() == r.object.casefold():
            continue
        yield ExtractedRelation(
            subject=subject,
            predicate=r.predicate,
            object=r.object,
            confidence=REL_CONFIDENCE[how],
            evidence=r.evidence,
            segment_id=segment.segment_id,
        )


# --- relations said to the person spoken to -----------------------------------------------

_KIN_WORDS = "|".join(sorted((re.escape(w) for w in RELATIONS), key=len, reverse=True))
_QUAL = r"(?:(?:very|best|only|oldest|closest|dearest|new|old|good|favou?rite|little|big|baby)\s+)*"
# "You're my best friend" → (speaker, friend, addressee); "I'm your brother" → the converse.
_YOU_ARE_MY = re.compile(
    rf"\byou(?:'re| are| were|'ve been| have been)\s+(?:(?:still|always)\s+)?(?:my|our)\s+"
    rf"{_QUAL}({_KIN_WORDS})\b",
    re.IGNORECASE,
)
_I_AM_YOUR = re.compile(
    rf"\bI(?:'m| am| was)\s+(?:(?:still|always)\s+)?your\s+{_QUAL}({_KIN_WORDS})\b",
    re.IGNORECASE,
)
# "She's my sister" → (speaker, sibling, the person mentioned last).
_PRONOUN_IS_MY = re.compile(
    rf"\b(?:she|he)(?:'s| is| was)\s+(?:still\s+)?(?:my|our)\s+{_QUAL}({_KIN_WORDS})\b",
    re.IGNORECASE,
)
_TOGETHER = {
    "friends": "friend", "married": "spouse", "engaged": "partner", "roommates": "roommate",
    "divorced": "ex_spouse", "dating": "partner", "neighbors": "neighbor",
    "neighbours": "neighbor", "cousins": "cousin", "colleagues": "colleague",
    "together": "partner", "siblings": "sibling", "classmates": "classmate",
}  # fmt: skip
_TOGETHER_WORDS = "|".join(_TOGETHER)
# "Priya and I are friends", "Ravi and I got married"
_NAME_AND_I = re.compile(
    rf"{_NAME}\s+and\s+(?:I|me)\s+(?:are|were|'re|have been|had been|got|just got|"
    rf"are getting|were getting|used to be|are still|were still)\s+(?:(?:best|good|close|just|"
    rf"old|really)\s+)*({_TOGETHER_WORDS})\b"
)
# "we're best friends" said to someone: the speaker and the addressee ("we're married" is not
# read: "my wife and I, we've been married" is said to a third person)
_WE_ARE = re.compile(
    r"\bwe(?:'re| are| were|'ve been| have been| used to be)\s+(?:(?:best|good|close|just|"
    r"old|such good|really|still)\s+)*(friends|roommates|neighbou?rs)\b",
    re.IGNORECASE,
)
_FRIENDSHIP = re.compile(r"\b(?:my|our) friendship with you\b", re.IGNORECASE)
# "I broke up with Ross", "I'm dating Paul", "I dumped you" (not "him"/"her": see below)
_PARTNER_VERB = re.compile(
    rf"\bI(?:'m| am| was|'ve| have)?\s+(?:just\s+|finally\s+|still\s+|been\s+)*"
    rf"(broke up with|break up with|breaking up with|split up with|dumped|dating|"
    rf"going out with|engaged to|married to|divorced)\s+(you|him|her|{_CAP}(?:\s{_CAP})?)\b"
)
_PARTNER_VERBS = {
    "broke up with": "ex_partner", "break up with": "ex_partner",
    "breaking up with": "ex_partner", "split up with": "ex_partner", "dumped": "ex_partner",
    "dating": "partner", "going out with": "partner", "engaged to": "partner",
    "married to": "spouse", "divorced": "ex_spouse",
}  # fmt: skip
# A parent addressed: "Hi Mom!", "Dad, listen", "Thanks, Mom."
_PARENT_WORDS = r"Mom|Dad|Mommy|Daddy|Mum|Mama|Papa|Mother|Father"
_PARENT_ADDRESSED = re.compile(
    rf"(?:^|[.!?]\s+|(?i:hi|hey|hello|thanks|oh|yes|no|okay|ok|bye|night|sorry),?\s+)"
    rf"({_PARENT_WORDS})(?=\s*[,!.?]|\s*$)|,\s+({_PARENT_WORDS})(?=\s*[!.?]|\s*$)"
)
DIALOGUE_CONFIDENCE = {"you": 0.6, "pronoun": 0.6, "named": 0.8, "we": 0.55, "parent": 0.6}


def find_dialogue_relations(
    segment: SegmentText,
    *,
    addressee: str | None = None,
    last_person: str | None = None,
) -> Iterator[ExtractedRelation]:
    """Relations between the speaker and someone else said without an "X is my Y" name: "you
    are my best friend" (the addressee), "she's my sister" (the person mentioned last), "Ravi
    and I are friends", "I broke up with Ross", "Hi Mom!" (the addressee is the speaker's
    parent). Nothing is yielded without the speaker and the other person resolved."""
    me = segment.speaker.strip()
    if not me:
        return
    text = normalise_text(segment.text)

    def rel(subject: str | None, predicate: str, obj: str | None, how: str,
            m: re.Match[str]) -> Iterator[ExtractedRelation]:  # fmt: skip
        if not subject or not obj or subject.casefold() == obj.casefold():
            return
        if not_a_name(obj.split()[0]) and obj not in (addressee, last_person):
            return
        yield ExtractedRelation(
            subject=subject, predicate=predicate, object=obj,
            confidence=DIALOGUE_CONFIDENCE[how], evidence=m.group(0).strip(),
            segment_id=segment.segment_id, properties={"source": "dialogue"},
        )  # fmt: skip

    for m in _YOU_ARE_MY.finditer(text):
        yield from rel(me, RELATIONS[m.group(1).lower()], addressee, "you", m)
    for m in _I_AM_YOUR.finditer(text):
        yield from rel(addressee, RELATIONS[m.group(1).lower()], me, "you", m)
    for m in _PRONOUN_IS_MY.finditer(text):
        yield from rel(me, RELATIONS[m.group(1).lower()], last_person, "pronoun", m)
    for m in _NAME_AND_I.finditer(text):
        if _is_name(m.group(1)):
            yield from rel(me, _TOGETHER[m.group(2).lower()], m.group(1), "named", m)
    for m in _WE_ARE.finditer(text):
        word = m.group(1).lower().replace("neighbours", "neighbors")
        yield from rel(me, _TOGETHER[word], addressee, "we", m)
    for m in _FRIENDSHIP.finditer(text):
        yield from rel(me, "friend", addressee, "you", m)
    for m in _PARTNER_VERB.finditer(text):
        who = m.group(2)
        if who.lower() in ("him", "her"):
            continue  # the last person named is too often someone else (DialogRE: 0 of 2)
        other = addressee if who.lower() == "you" else who
        how = "you" if who.lower() == "you" else "named"
        yield from rel(me, _PARTNER_VERBS[m.group(1).lower()], other, how, m)
    for m in _PARENT_ADDRESSED.finditer(text):
        yield from rel(me, "parent", addressee, "parent", m)


# --- preferences ----------------------------------------------------------------------------

_ADVERB = (
    r"(?:(?:really|just|absolutely|totally|also|still|truly|actually|kinda|kind of|so|"
    r"genuinely|honestly|now|generally|mostly|personally|completely)\s+)*"
)
_CONSUME = r"(?:drink|eat|touch|smoke)"
_CONSUMING = r"(?:drinking|eating|having|taking|using|smoking|buying|ordering)"
_LIKES = re.compile(
    rf"\bI(?:'m| am)?\s+{_ADVERB}(?:love|like|enjoy|adore|(?:a\s+)?(?:big\s+|huge\s+)?fan of|"
    rf"into|crazy about|passionate about|obsessed with)\s+(?P<obj>[^.?!,;:()\"]+)",
    re.IGNORECASE,
)
_AVOIDS = re.compile(
    rf"\bI(?:'m| am|'ve| have)?\s+{_ADVERB}(?:"
    rf"(?P<plain>avoid|hate|dislike|detest|can't stand|cannot stand|can not stand|"
    rf"(?:don't|do not|never|no longer|can't|cannot)\s+{_ADVERB}(?:{_CONSUME}|like|enjoy)|"
    rf"not a\s+(?:big\s+|huge\s+)?fan of|allergic to|cut out|cutting out)|"
    rf"(?P<quit>stopped|quit|gave up|given up|giving up|quitting)(?:\s+on)?)"
    rf"\s+(?P<obj>[^.?!,;:()\"]+)",
    re.IGNORECASE,
)
# Words that end the object of a preference or a habit ("I stopped X because ..."): not a
# stop-word list but where the thing named ends.
_OBJECT_ENDS = frozenset(
    "because since so when while if with at in on for from about during after before every "
    "as than though although that which who whom whose too also anymore now lately nowadays "
    "these days really very much more most sometimes again today tonight tomorrow yesterday "
    "last next ago this here there but even only just either anyway like is are was were "
    "be been i you he she we they it".split()
)  # fmt: skip
_DETERMINERS = frozenset("a an some all any most many lots of my our".split())
# First words that make the "object" a clause or a reaction, not a thing liked ("I love that",
# "I love how you did it", "I love the energy" — a definite "the" is about one thing seen).
_NOT_OBJECT = frozenset(
    "it that this these those them him her you me us myself yourself how what when where why "
    "who which the your his their its being having seeing hearing knowing getting "
    "every each one something anything everything nothing someone anyone everyone".split()
)  # fmt: skip
_BAD_TO_VERB = frozenset(
    "be think say believe know imagine point keep remind thank ask tell mention add hope note "
    "hear see make call welcome stay get go have try let start".split()
)  # fmt: skip
_GERUND_VERBS = frozenset(("going",))
_TO_ADVERBS = frozenset("just really also always still even actually finally sometimes".split())
# Gerunds that say nothing alone (the thing made, played or spent is what is liked).
_EMPTY_GERUNDS = frozenset(
    "making playing doing having getting being spending creating seeing trying taking giving "
    "going helping working using putting keeping finding looking experimenting".split()
)
# Words a noun phrase does not end on: what followed was cut ("a safe", "a new").
_DANGLING = frozenset("safe new good great big little whole same own other more such".split())
_MAX_OBJECT_WORDS = 4
_VOWELS = "aeiou"


def _gerund(verb: str) -> str:
    """The -ing form: paint → painting, run → running, bake → baking (enough for hobbies)."""
    v = verb.lower()
    if v.endswith("ie"):
        return v[:-2] + "ying"
    if v.endswith("e") and not v.endswith(("ee", "ye", "oe")):
        return v[:-1] + "ing"
    if (len(v) <= 4 and len(v) >= 3 and v[-1] not in _VOWELS + "wxy" and v[-2] in _VOWELS
            and v[-3] not in _VOWELS):  # fmt: skip
        return v + v[-1] + "ing"
    return v + "ing"


def preference_object(raw: str, *, quitting: bool = False) -> str | None:
    """The short noun phrase a preference is about, lower-cased, or None when what follows
    the verb is not one ("I love how you...", "I like it", "I quit my job")."""
    words = [w.strip("'\"-") for w in raw.split()]
    words = [w for w in words if w]
    if not words:
        return None
    if words[0].lower() == "to":  # "I like to paint" → "painting"
        while len(words) > 2 and words[1].lower() in _TO_ADVERBS:  # "to just take" → "take"
            words = [words[0], *words[2:]]
        if len(words) < 2 or words[1].lower() in _BAD_TO_VERB or not words[1].isalpha():
            return None
        words = [_gerund(words[1]), *words[2:]]
    if quitting:
        # "gave up coffee", "stopped drinking coffee", "quit smoking" — not "quit my job",
        # "stopped by the shop", "quit Infosys" (an employer: statements.py reads it), nor
        # "stopped playing tennis" (an activity stopped, not a thing avoided: statements.py)
        first = words[0].lower()
        if words[0][:1].isupper() or (
            first.endswith("ing")
            and not re.fullmatch(_CONSUMING, first)
            and first not in _GERUND_VERBS
        ):
            return None
        if re.fullmatch(_CONSUMING, first) and len(words) > 1:
            words = words[1:]
        elif not first.endswith("ing") and first in _DETERMINERS | _NOT_OBJECT | {"by"}:
            return None
    elif re.fullmatch(_CONSUMING, words[0].lower()) and len(words) > 1:
        words = words[1:]
    if words[0].lower() in _GERUND_VERBS and len(words) > 1:  # "going (on) road trips"
        words = words[2:] if words[1].lower() in ("on", "to", "for") else words[1:]
        if words and words[0].lower() == "the":  # "stopped going to the gym" → "gym"
            words = words[1:]
        if not words:
            return None
    kept: list[str] = []
    for w in words:
        if w.lower() in _OBJECT_ENDS or "'" in w or w.lower() in ("not", "no", "never"):
            break  # "dancing and it'd…", "i'm loving", "not being": the phrase ended
        kept.append(w)
    if len(kept) > _MAX_OBJECT_WORDS:  # "helping the community and making it better"
        for i, w in enumerate(kept):
            if w.lower() in ("and", "or"):
                kept = kept[:i]
                break
    while kept and kept[0].lower() in _DETERMINERS:
        kept = kept[1:]
    while kept and kept[-1].lower() in ("and", "or", "of", "the", "a", "an", "to"):
        kept = kept[:-1]
    if not kept or len(kept) > _MAX_OBJECT_WORDS:
        return None
    if kept[0].lower() in _NOT_OBJECT or any(w.lower() in _PERSONAL for w in kept):
        return None
    if len(kept) == 1 and kept[0].lower() in _EMPTY_GERUNDS:
        return None  # "I love making…", "I enjoy spending…": the thing itself was not said
    if kept[-1].lower() in _DANGLING:
        return None  # "creating a safe (space)": the noun was cut off
    if not all(re.fullmatch(r"[\w'&-]+", w) for w in kept):
        return None
    return " ".join(kept).lower()


# Not measured (no labelled data has preferences): set between the habit and the decision
# patterns'; the object rules above drop reactions and clauses rather than guess.
PREFERENCE_CONFIDENCE = 0.75


def find_preferences(segment: SegmentText) -> Iterator[ExtractedRelation]:
    """(speaker, "likes" | "avoids", thing) from first-person statements; questions
    ("Do I like it?") and hypotheticals ("I'd like to", "I would love") are not matched, and
    nothing is without a speaker to own it."""
    if not segment.speaker.strip():
        return
    for sentence, _ in sentences(normalise_text(segment.text)):
        if sentence.rstrip().endswith("?"):
            continue
        for predicate, regex in (("likes", _LIKES), ("avoids", _AVOIDS)):
            for m in regex.finditer(sentence):
                if predicate == "likes" and _negated(sentence, m.start()):
                    continue
                obj = preference_object(m.group("obj"), quitting=bool(m.groupdict().get("quit")))
                if obj is None:
                    continue
                evidence = m.group(0).strip()
                yield ExtractedRelation(
                    subject=segment.speaker.strip(),
                    predicate=predicate,
                    object=obj,
                    confidence=PREFERENCE_CONFIDENCE,
                    evidence=evidence,
                    segment_id=segment.segment_id,
                )


def _negated(sentence: str, start: int) -> bool:
    """A condition ("if I like it", "whether I like it"), not a statement."""
    before = sentence[:start].split()[-2:]
    return any(w.lower().strip(",") in ("if", "whether", "unless", "not") for w in before)


# Characters of a sentence kept as an entity's or a fact's evidence.
MAX_EVIDENCE = 300


def sentence_index(offset: int, bounds: Sequence[tuple[int, int]]) -> int:
    """Which of `bounds` (sentence_bounds) holds the character at `offset` (the last one when
    none does)."""
    for i, (start, end) in enumerate(bounds):
        if start <= offset < end:
            return i
    return len(bounds) - 1


def sentence_at(text: str, offset: int, bounds: Sequence[tuple[int, int]]) -> str:
    """The sentence holding `offset`, whitespace collapsed and cut to MAX_EVIDENCE (the whole
    text when it has no sentences)."""
    if not bounds:
        return " ".join(text.split())[:MAX_EVIDENCE]
    start, end = bounds[sentence_index(offset, bounds)]
    return " ".join(text[start:end].split())[:MAX_EVIDENCE]
