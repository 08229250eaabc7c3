"""Dates said in speech, resolved against the time the words were spoken (dateparser).

"last Friday" said on Tuesday 12 May is Friday 8 May; "by Sunday" a promise is due on the
coming Sunday. Only the words a DATE/TIME span holds are parsed; a span dateparser cannot
read ("the other day", "a while ago") resolves to None and the words are kept alone. Seasons,
which dateparser does not read, resolve here to the day they begin (meteorological seasons of
the northern hemisphere: spring from 1 March, summer 1 June, autumn 1 September, winter 1
December): "last spring" is the latest spring already over; "this summer" the one under way,
else the one last begun when the words look back (`prefer` past) or it began this calendar
year, else the coming one; "next winter" the one after the one under way or last begun.
"""

from __future__ import annotations

import re
import threading
from datetime import UTC, datetime
from functools import lru_cache
from typing import Literal

Prefer = Literal["past", "future", "current_period"]

# Words dateparser does not read, rewritten to ones it does ("this weekend" → "saturday").
_REWRITES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p, re.IGNORECASE), r)
    for p, r in (
        (r"^(?:by|on|before|until|till|around|about|since|from|in the)\s+", ""),
        (r"\bthis (?:coming )?weekend\b", "saturday"),
        (r"\bnext weekend\b", "in 1 week saturday"),
        (r"\blast weekend\b", "last saturday"),
        (r"\bthe weekend\b", "saturday"),
        (r"\b(?:this|tonight's|tomorrow's)\s+(morning|evening|afternoon|night)\b", "today"),
        (r"\btonight\b", "today"),
        (r"\bthe day before yesterday\b", "2 days ago"),
        (r"\bthe day after tomorrow\b", "in 2 days"),
        (r"\b(?:a|one) couple (?:of )?", "2 "),
        (r"\ba few\b", "3"),
        (r"\bearlier this\b", "this"),
    )
)
_UNREADABLE = re.compile(
    r"\b(?:other day|while|ages|some time|sometime|soon|recently|lately|later|someday|"
    r"every|each|always|usually|often|sometimes|nowadays|these days|once)\b",
    re.IGNORECASE,
)
# Bare numbers and ordinals dateparser reads as something else ("the 5th" → a year ahead, "at
# 5" → today, "the 90s" → 90 seconds ago): no date.
_BARE = re.compile(r"^(?:the\s+|at\s+)?\d+(?:st|nd|rd|th|s|'s)?$", re.IGNORECASE)
_lock = threading.Lock()
_SEASON = re.compile(
    r"^(?:(?P<which>last|this|next|this past|this coming)\s+)?"
    r"(?P<season>spring|summer|fall|autumn|winter)$",
    re.IGNORECASE,
)
_SEASON_MONTH = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}


def _add_months(year: int, month: int, months: int) -> tuple[int, int]:
    index = year * 12 + month - 1 + months
    return index // 12, index % 12 + 1


def _season(words: str, base: datetime, prefer: Prefer) -> datetime | None:
    """The day the season `words` name begins, relative to `base` (module docstring); "this
    winter" in a past-tense clause (`prefer` past) is the one last begun."""
    m = _SEASON.match(words.strip())
    if m is None:
        return None
    which = (m["which"] or "this").casefold()
    month = _SEASON_MONTH[m["season"].casefold()]
    # the starts of this season around base: the one under way or last begun, and the next
    year = base.year if base.month >= month else base.year - 1
    begun = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(*_add_months(year, month, 3), 1, tzinfo=UTC)
    following = datetime(year + 1, month, 1, tzinfo=UTC)
    if which in ("last", "this past"):
        return begun if end <= base else datetime(year - 1, month, 1, tzinfo=UTC)
    if which in ("next", "this coming"):
        return following
    # "this summer" said in October is the summer just past; in May, the one coming
    if base < end or prefer == "past" or (prefer != "future" and begun.year == base.year):
        return begun
    return following


def _clean(words: str) -> str:
    text = " ".join(words.split())
    for pattern, repl in _REWRITES:
        text = pattern.sub(repl, text)
    return text.strip()


@lru_cache(maxsize=4096)
def _parse(text: str, base_iso: str, prefer: Prefer) -> datetime | None:
    import dateparser

    base = datetime.fromisoformat(base_iso).replace(tzinfo=None)
    settings = {
        "RELATIVE_BASE": base,
        "PREFER_DATES_FROM": prefer,
        "RETURN_AS_TIMEZONE_AWARE": False,
        "PARSERS": ["relative-time", "absolute-time", "custom-formats"],
    }
    with _lock:  # dateparser keeps per-call state in module globals
        parsed = dateparser.parse(text, languages=["en"], settings=settings)  # type: ignore[arg-type]
    return parsed


def resolve(
    words: str, spoken_at: datetime | None, prefer: Prefer = "current_period"
) -> datetime | None:
    """The date `words` name, relative to `spoken_at` (UTC-aware), or None when they name
    none (or nothing was said when)."""
    if spoken_at is None or not words.strip() or _UNREADABLE.search(words):
        return None
    if _BARE.match(words.strip()):
        return None
    text = _clean(words)
    if not text or len(text) > 60 or _BARE.match(text):
        return None
    base = spoken_at if spoken_at.tzinfo else spoken_at.replace(tzinfo=UTC)
    base = base.astimezone(UTC)
    if (season := _season(text, base, prefer)) is not None:
        return season
    try:
        parsed = _parse(text, base.isoformat(), prefer)
    except Exception:  # dateparser raises on odd input ("32nd"); the words stay, undated
        return None
    if parsed is None:
        return None
    return parsed.replace(tzinfo=UTC)


def iso_day(when: datetime) -> str:
    return when.date().isoformat()


def warm_up() -> None:
    """dateparser loads its language data on the first call (about a second): do it now."""
    from datetime import UTC, datetime

    resolve("yesterday", datetime(2026, 1, 2, tzinfo=UTC), "past")
