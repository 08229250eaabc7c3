"""The memory's speakers: who has been heard, and queries with their names taken out.

A question usually names the person it is about ("What does Caroline paint?"). Every segment
is searched with its speaker's name in it (ADR 0010), so a query vector that keeps the name
is pulled towards everything that person ever said, whatever the topic. The speaker prior
(retrieve.py) and the keyword leg already weigh the name; the vector leg embeds the question
without it and searches by topic. On LoCoMo dev that took the vector leg alone from recall@10
64.3 to 70.8 and the fusion's multi-hop recall@10 up by 3–4 points (ADR 0012).

`KnownSpeakers` keeps the distinct speaker names, read with a skip scan of the speaker index
(one index probe per name, so a million segments of a dozen people cost a dozen probes) and
refreshed in the background when older than `ttl_s`: a query never waits for it except the
first one. With them it keeps a guess at the owner (whom "I", "me" and "my" in a query mean
when no owner is configured): the named speaker heard most in the latest `OWNER_WINDOW`
segments — the wearer of the microphone speaks in every conversation.
"""

from __future__ import annotations

import asyncio
import re
import time

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from context_engine.extract.schema import is_placeholder_speaker
from her_os_shared.logging import get_logger

log = get_logger(__name__)

# Names beyond this many are ignored (a skip scan is one probe per name).
MAX_NAMES = 1000

# The owner guess reads the speakers of this many of the latest segments.
OWNER_WINDOW = 2000

# Loose index scan over ix_segments_speaker: the next name after the last one, until none.
_DISTINCT_SPEAKERS = text(
    """
    WITH RECURSIVE s(speaker) AS (
      (SELECT speaker FROM segments ORDER BY speaker LIMIT 1)
      UNION ALL
      SELECT (SELECT g.speaker FROM segments g WHERE g.speaker > s.speaker
              ORDER BY g.speaker LIMIT 1)
      FROM s WHERE s.speaker IS NOT NULL
    )
    SELECT speaker FROM s WHERE speaker IS NOT NULL LIMIT :limit
    """
)
# The speakers of the latest segments, most heard first (ix_segments_active_spoken_at).
_RECENT_SPEAKERS = text(
    """
    SELECT speaker, count(*) AS n FROM (
      SELECT speaker FROM segments WHERE replaced_by IS NULL
      ORDER BY spoken_at DESC LIMIT :window
    ) recent GROUP BY speaker ORDER BY n DESC, speaker
    """
)


def without_names(query: str, names: frozenset[str]) -> str:
    """`query` with every whole-word occurrence of those names (any case, with a possessive
    "'s") removed; the query itself when that would leave no word."""
    stripped = query
    for name in sorted(names, key=len, reverse=True):  # "Ana Lu" before "Ana"
        name = name.strip()
        if not name:
            continue
        stripped = re.sub(
            rf"(?<!\w){re.escape(name)}(?:['’]s)?(?!\w)", " ", stripped, flags=re.IGNORECASE
        )
    stripped = re.sub(r"\s+", " ", stripped).strip()
    return stripped if re.search(r"\w", stripped) else query


class KnownSpeakers:
    def __init__(self, engine: AsyncEngine, *, ttl_s: float = 30.0) -> None:
        self.engine = engine
        self.ttl_s = ttl_s
        self._names: frozenset[str] | None = None
        self._owner: str | None = None
        self._loaded_at = 0.0
        self._refreshing: asyncio.Task[None] | None = None

    async def _load(self) -> None:
        async with self.engine.connect() as conn:
            rows = await conn.execute(_DISTINCT_SPEAKERS, {"limit": MAX_NAMES})
            self._names = frozenset(r.speaker for r in rows)
            recent = await conn.execute(_RECENT_SPEAKERS, {"window": OWNER_WINDOW})
            named = [r.speaker for r in recent if not is_placeholder_speaker(r.speaker)]
            self._owner = named[0] if named else None
        self._loaded_at = time.monotonic()

    async def _refresh(self) -> None:
        try:
            await self._load()
        except Exception as exc:  # stale names are better than a failed search
            log.warning("speakers.refresh_failed", error=repr(exc)[:300])

    async def names(self) -> frozenset[str]:
        """The speakers heard so far (possibly `ttl_s` stale)."""
        if self._names is None:
            await self._load()
        elif time.monotonic() - self._loaded_at > self.ttl_s and (
            self._refreshing is None or self._refreshing.done()
        ):
            self._refreshing = asyncio.create_task(self._refresh())
        assert self._names is not None
        return self._names

    async def owner(self) -> str | None:
        """The named speaker heard most lately (possibly `ttl_s` stale); None before anyone
        with a name has spoken."""
        await self.names()
        return self._owner

    def invalidate(self) -> None:
        """Make the next `names()` refresh (ingest saw a new speaker)."""
        self._loaded_at = 0.0
