"""Name recognition: which known entities a text names, by its word n-grams against the
entities' canonical names (rarest first). The graph leg ranks the segments behind them, and the
facts lookup takes them as a query's subjects."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from context_engine.extract.schema import canonical_name

NAMED_TYPES = ("person", "place", "organization", "event", "topic")
_WORD = re.compile(r"[\w'’-]+", re.UNICODE)

_RECOGNISE = text(
    """
    SELECT e.id, e.type, e.name, e.canonical_name, e.episode_count, e.tier,
           greatest(ln((n.sessions + 1.0) / (e.episode_count + 0.5)), 0.05) AS weight
    FROM entities e, (SELECT count(*) AS sessions FROM sessions) n
    WHERE e.canonical_name = ANY(CAST(:names AS text[])) AND e.type = ANY(CAST(:types AS text[]))
      AND e.episode_count > 0
    ORDER BY e.episode_count, e.id LIMIT :limit
    """
)


def query_ngrams(query: str, max_words: int = 4) -> list[str]:
    """Every run of 1..max_words consecutive words, case-folded (possessive 's dropped)."""
    words = [re.sub(r"['’]s$", "", w) for w in _WORD.findall(query)]
    words = [w for w in words if w]
    grams = {
        canonical_name(" ".join(words[i : i + n]))
        for n in range(1, max_words + 1)
        for i in range(len(words) - n + 1)
    }
    return sorted(grams)


async def recognise(
    conn: AsyncConnection, names: Sequence[str], limit: int, types: Sequence[str] = NAMED_TYPES
) -> list[Any]:
    """The entities (id, type, name, canonical_name, episode_count, weight) whose canonical
    name is one of `names`, rarest first: the query's recognised entities."""
    if not names:
        return []
    rows = await conn.execute(
        _RECOGNISE, {"names": list(names), "types": list(types), "limit": limit}
    )
    return list(rows.all())
