"""English words, one of each mechanism the extractors and readers share: where sentences
end (`sentence_bounds`, `sentences`), a verb or noun to its base (`stem`), a plural to its
singular (`singular`) and the stop words (`stop_words`: spaCy's list).

The word lists of particular rules stay with their rules, named for what they hold (the words
that end a liked thing, a question's fillers, the function words of a promise): each is a
choice of words for that rule, not a second stop-word list.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

# Sentence ends: . ? ! (and, for `clauses=True`, ; and a line break too).
_SENTENCE = re.compile(r"[^.?!]+[.?!]*")
_SENTENCE_OR_CLAUSE = re.compile(r"[^.!?;\n]+[.!?;]*")


def sentence_bounds(text: str, *, clauses: bool = False) -> list[tuple[int, int]]:
    """(start, end) of each sentence in a text (split after . ? !; with `clauses` also after
    ; and at line breaks)."""
    pattern = _SENTENCE_OR_CLAUSE if clauses else _SENTENCE
    return [(m.start(), m.end()) for m in pattern.finditer(text)]


def sentences(text: str, *, clauses: bool = False) -> Iterator[tuple[str, int]]:
    """Sentences (with their end punctuation) and where each starts."""
    pattern = _SENTENCE_OR_CLAUSE if clauses else _SENTENCE
    for m in pattern.finditer(text):
        yield m.group(0), m.start()


# Irregular pasts and participles of common verbs → the base form.
IRREGULAR: dict[str, str] = {
    "bought": "buy", "brought": "bring", "got": "get", "gotten": "get", "paid": "pay",
    "told": "tell", "wrote": "write", "written": "write", "met": "meet", "came": "come",
    "took": "take", "taken": "take", "made": "make", "did": "do", "done": "do", "sent": "send",
    "drove": "drive", "driven": "drive", "gave": "give", "given": "give", "fed": "feed",
    "rang": "ring", "rung": "ring", "went": "go", "gone": "go", "found": "find", "kept": "keep",
    "left": "leave", "read": "read", "put": "put", "set": "set", "sold": "sell", "spoke":
    "speak", "spoken": "speak", "thought": "think", "caught": "catch", "taught": "teach",
    "built": "build", "spent": "spend", "lent": "lend", "held": "hold", "ran": "run",
    "saw": "see", "seen": "see", "swept": "sweep", "sat": "sit", "won": "win", "hung": "hang",
}  # fmt: skip


def stem(word: str) -> str:
    """A light stem: irregular pasts to their base, then -ies/-ied → y, -ing/-ed/-es/-s off,
    a final e off and a doubled final consonant single ("dropped" → "drop")."""
    word = word.lower().removesuffix("'s")
    word = IRREGULAR.get(word, word)
    if len(word) > 4 and word.endswith(("ies", "ied")):
        return word[:-3] + "y"
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            word = word[: -len(suffix)]
            break
    if len(word) > 3 and word.endswith("e"):
        word = word[:-1]
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiouls":
        word = word[:-1]
    return word


def singular(word: str) -> str:
    """A plural's singular by spelling (enough for topics and categories: shoes, berries,
    boxes, classes)."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith(("sses", "ches", "shes", "xes", "zes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


@cache
def stop_words() -> frozenset[str]:
    """spaCy's English stop words (326), read from the installed spaCy's own list. The file is
    loaded on its own, not through `import spacy`: the package takes seconds to import, and
    the LLM mode and the readers never need the rest of it."""
    found = importlib.util.find_spec("spacy")  # locates the package without running it
    if found is None or not found.submodule_search_locations:
        raise RuntimeError("spaCy is not installed (the context engine depends on it)")
    path = Path(next(iter(found.submodule_search_locations))) / "lang" / "en" / "stop_words.py"
    spec = importlib.util.spec_from_file_location("_spacy_en_stop_words", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # a list of words: it imports nothing
    return frozenset(module.STOP_WORDS)


# Words spaCy lists as stop words that carry what is said in talk: the deed ("what did you
# make?", "I'll call her"), the move, the place or the order of things ("what's next?").
CONTENT_IN_TALK = frozenset(
    "back became become bottom call empty first front full give keep last made make move "
    "name next own part put see serious show side take top up used using whole".split()
)


@cache
def talk_stop_words() -> frozenset[str]:
    """spaCy's stop words less those that carry content in talk (CONTENT_IN_TALK)."""
    return stop_words() - CONTENT_IN_TALK
