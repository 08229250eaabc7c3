"""Scoring answers as the LoCoMo paper does (snap-research/locomo, task_eval/evaluation.py),
re-implemented here: normalise (lower case, punctuation, commas and the articles a/an/the and
"and" removed), Porter-stem every token (NLTK's stemmer, as the paper), token F1. One
difference: the paper removes ASCII punctuation only; here Unicode punctuation goes too, so a
quote in typographic marks (“Sweden”) is the word it quotes.

- categories 2 (temporal), 3 (open-domain: the gold's first ";" alternative) and 4
  (single-hop): F1 of the whole reply against the gold answer;
- category 1 (multi-hop): the gold split at commas, each part scored against the best of the
  reply's comma-separated parts, averaged;
- category 5 (adversarial: the question has no answer in the conversation): 1 when the reply
  says it does not know — the paper's phrases ("no information available", "not mentioned")
  or her-os's own ("nothing is remembered", "found nothing", "I don't know") — else 0.

`contains`: whether the reply holds the gold answer's normalised, stemmed tokens in order
(answer containment; adversarial as above).
"""

from __future__ import annotations

import re
import string
import sys
import unicodedata
from collections import Counter
from functools import cache

from nltk.stem import PorterStemmer

_STEMMER = PorterStemmer()
_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_PUNCTUATION = str.maketrans(
    "", "", string.punctuation
    + "".join(c for i in range(sys.maxunicode + 1)
              if unicodedata.category(c := chr(i)).startswith("P")),
)  # fmt: skip
ABSTENTIONS = (
    "no information available", "not mentioned", "nothing is remembered", "found nothing",
    "i don't know", "i do not know",
)  # fmt: skip


def normalise(text: str) -> str:
    text = text.replace(",", "").lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


@cache
def _stem(word: str) -> str:
    return _STEMMER.stem(word)


def tokens(text: str) -> list[str]:
    return [_stem(w) for w in normalise(text).split()]


def f1(prediction: str, gold: str) -> float:
    pred, truth = tokens(prediction), tokens(gold)
    same = sum((Counter(pred) & Counter(truth)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(truth)
    return 2 * precision * recall / (precision + recall)


def f1_multi(prediction: str, gold: str) -> float:
    parts = [p.strip() for p in prediction.split(",")]
    golds = [g.strip() for g in gold.split(",")]
    return sum(max(f1(p, g) for p in parts) for g in golds) / len(golds)


def abstains(reply: str) -> bool:
    said = reply.lower().replace("’", "'")
    return any(phrase in said for phrase in ABSTENTIONS)


def gold_of(answer: str | None, category: int) -> str | None:
    if answer is None:
        return None
    return answer.split(";")[0].strip() if category == 3 else answer


def score(reply: str, answer: str | None, category: int) -> float:
    """The paper's score of one reply."""
    if category == 5:
        return float(abstains(reply))
    gold = gold_of(answer, category)
    if gold is None:
        return 0.0
    return f1_multi(reply, gold) if category == 1 else f1(reply, gold)


def contains(reply: str, answer: str | None, category: int) -> bool:
    """Whether the reply holds the whole gold answer (its tokens, in order)."""
    if category == 5:
        return abstains(reply)
    gold = gold_of(answer, category)
    if not gold or not tokens(gold):
        return False
    return f" {' '.join(tokens(gold))} " in f" {' '.join(tokens(reply))} "


def words(reply: str) -> int:
    return len(reply.split())
