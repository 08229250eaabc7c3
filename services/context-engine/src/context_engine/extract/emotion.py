"""Emotions said in a segment, from VADER's sentiment score (no model, no LLM).

VADER gives each text a compound score in [-1, 1]. A segment whose score is strong enough
becomes an `emotion` entity: named "positive" or "negative", or — when the text also holds an
emotion word of the same sign ("sad", "furious", "scared", "thrilled") — the coarse emotion
that word names ("sadness", "anger", "fear", "joy"). Properties: the speaker, the compound
score, "strong" or "moderate" intensity, and the cue word when there is one.

Confidence is the share of segments in a score band that a reader judged to express that
feeling. Calibration (hand-labelled, one reader, so a rough guide): 71 DialogRE dev turns drawn
at random from six bands. Negative scores are reliable — 13 of 15 turns at ≤ -0.85 expressed a
negative feeling, 9 of 12 in (-0.85, -0.7], 6 of 12 in (-0.7, -0.5] — while positive scores
are mostly politeness, greetings and "yeah": 7 of 12 at ≥ 0.85, 5 of 12 in [0.7, 0.85),
4 of 12 in [0.5, 0.7). With the emotion gate at 0.5 (schema.py), positive segments below 0.85
are therefore dropped. On LoCoMo (synthetic, relentlessly upbeat chat) about half of the turns
pass (bench/extract/extract_quality.py prints the share): there the emotion entities mostly say
that a session was warm. Dedup keeps one entity per name and session, the strongest.

Texts longer than WHOLE_TEXT_CHARS are scored sentence by sentence and the strongest sentence
counts (VADER's cost grows faster than the length of the text).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from context_engine.extract.language import sentence_bounds
from context_engine.extract.schema import ExtractedEntity, SegmentText
from her_os_shared.bundled import VADER

if TYPE_CHECKING:
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

# (lowest |compound|, confidence) per sign, highest band first: the calibration above.
POSITIVE_BANDS: tuple[tuple[float, float], ...] = ((0.85, 0.6), (0.7, 0.4), (0.5, 0.35))
NEGATIVE_BANDS: tuple[tuple[float, float], ...] = ((0.85, 0.85), (0.7, 0.75), (0.5, 0.5))
STRONG = 0.85
MAX_EVIDENCE = 300
WHOLE_TEXT_CHARS = 600

# Emotion words → the coarse emotion; used only to name a feeling VADER already found.
_CUES: dict[str, tuple[str, ...]] = {
    "joy": ("happy", "glad", "thrilled", "excited", "delighted", "overjoyed", "ecstatic",
            "joy", "joyful", "grateful", "thankful", "proud", "elated", "cheerful"),
    "sadness": ("sad", "unhappy", "depressed", "miserable", "heartbroken", "lonely", "down",
                "upset", "crying", "cried", "grief", "grieving", "devastated", "hopeless",
                "disappointed", "miss"),
    "anger": ("angry", "furious", "mad", "annoyed", "irritated", "pissed", "outraged",
              "frustrated", "livid", "hate", "sick of", "fed up"),
    "fear": ("scared", "afraid", "terrified", "frightened", "worried", "anxious", "nervous",
             "panicking", "panic", "stressed", "dread", "freaking out"),
}  # fmt: skip
_POSITIVE_EMOTIONS = {"joy"}
_CUE_RE = {
    emotion: re.compile(r"\b(" + "|".join(re.escape(w) for w in words) + r")\b", re.IGNORECASE)
    for emotion, words in _CUES.items()
}


def analyzer() -> SentimentIntensityAnalyzer:
    """The process's one VADER analyser (her_os_shared.bundled.VADER: lexicons hash-checked,
    loaded once)."""
    return VADER.get()


def confidence_of(compound: float) -> float:
    """The calibrated confidence of a segment with this compound score (0 below every band)."""
    bands = POSITIVE_BANDS if compound > 0 else NEGATIVE_BANDS
    for lowest, confidence in bands:
        if abs(compound) >= lowest:
            return confidence
    return 0.0


def _cue(text: str, positive: bool) -> tuple[str, str] | None:
    for emotion, regex in _CUE_RE.items():
        if (emotion in _POSITIVE_EMOTIONS) != positive:
            continue
        m = regex.search(text)
        if m:
            return emotion, m.group(1).lower()
    return None


_ANY_CUE = re.compile(
    r"\b(" + "|".join(re.escape(w) for ws in _CUES.values() for w in ws) + r")\b", re.IGNORECASE
)


def names_a_feeling(text: str) -> bool:
    """Whether the text holds an emotion word ("sad", "thrilled"): without one, VADER's score
    could only name the sign ("positive"), which the fast extractor does not keep."""
    return _ANY_CUE.search(text) is not None


def emotion_of(segment: SegmentText, text: str | None = None) -> ExtractedEntity | None:
    """The emotion a segment expresses, or None when its score is in no band.
    `text` overrides the segment's text (e.g. a capped copy)."""
    said = segment.text if text is None else text
    if not said.strip():
        return None
    if len(said) > WHOLE_TEXT_CHARS:  # VADER's cost grows faster than the text: per sentence
        parts = [said[a:b][:WHOLE_TEXT_CHARS] for a, b in sentence_bounds(said)]
        scored = [(float(analyzer().polarity_scores(p)["compound"]), p) for p in parts if p]
        compound, said = max(scored, key=lambda cs: abs(cs[0]), default=(0.0, said))
    else:
        compound = float(analyzer().polarity_scores(said)["compound"])
    confidence = confidence_of(compound)
    if confidence <= 0:
        return None
    positive = compound > 0
    cue = _cue(said, positive)
    properties: dict[str, object] = {
        "speaker": segment.speaker,
        "compound": round(compound, 4),
        "intensity": "strong" if abs(compound) >= STRONG else "moderate",
    }
    if cue:
        properties["cue"] = cue[1]
    return ExtractedEntity(
        type="emotion",
        name=cue[0] if cue else ("positive" if positive else "negative"),
        confidence=confidence,
        evidence=" ".join(said.split())[:MAX_EVIDENCE],
        properties=properties,
        segment_id=segment.segment_id,
    )
