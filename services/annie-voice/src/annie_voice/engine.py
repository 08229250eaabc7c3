"""The context engine as Annie sees it: memory search with what is known (`GET /v1/context`:
segments, and the facts true about the entities a question names), open promises, event
emission (`POST /v1/events/emit`) and a reachability check, over one pooled httpx client."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx

from her_os_shared.auth import TOKEN_HEADER


class EngineUnavailableError(RuntimeError):
    """The engine did not answer usefully. `reason`: timeout, unreachable, unauthorized,
    HTTP <code>, or bad response."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"context engine unavailable: {reason}")
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Memory:
    """One segment `/v1/context` returned."""

    text: str
    speaker: str | None = None
    timestamp: datetime | None = None
    source_session: str | None = None
    tier: str | None = None
    score: float = 0.0
    entities: tuple[str, ...] = field(default_factory=tuple)

    @classmethod
    def from_result(cls, item: dict[str, Any]) -> Memory | None:
        text = item.get("text")
        if not isinstance(text, str) or not text.strip():
            return None
        # `spoken_at` (ISO) and `entity_refs` (objects) are the engine's own forms; `timestamp`
        # (epoch) and `entities` ("type:name") are the design's, read when the others are absent.
        when = _when(item.get("spoken_at", item.get("timestamp")))
        entities = tuple(
            e["name"] if isinstance(e, dict) else e.partition(":")[2]
            for e in item.get("entity_refs", item.get("entities")) or []
            if (isinstance(e, dict) and isinstance(e.get("name"), str))
            or (isinstance(e, str) and ":" in e)
        )
        score = item.get("relevance_score")
        speaker = item.get("speaker")
        session = item.get("source_session")
        tier = item.get("tier")
        return cls(
            text=text,
            speaker=speaker if isinstance(speaker, str) else None,
            timestamp=when,
            source_session=session if isinstance(session, str) else None,
            tier=tier if isinstance(tier, str) else None,
            score=float(score) if isinstance(score, int | float) else 0.0,
            entities=entities,
        )


def _when(raw: object) -> datetime | None:
    """An ISO time, or the design's epoch seconds."""
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        try:
            return datetime.fromtimestamp(raw, tz=UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if not isinstance(raw, str):
        return None
    try:
        when = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _str(raw: object) -> str:
    return raw if isinstance(raw, str) else ""


@dataclass(frozen=True, slots=True)
class PastFact:
    """A fact a newer one replaced ("Arjun drinks coffee", until the switch to tea)."""

    fact: str
    predicate: str
    object: str
    valid_at: datetime | None
    invalid_at: datetime | None


@dataclass(frozen=True, slots=True)
class KnownFact:
    """A fact true at the time asked about: "Meera lives in Mumbai", since when, what it
    replaced, and the segments it was said in (as memories)."""

    fact: str
    subject: str
    predicate: str
    object: str
    since: datetime | None
    replaced: tuple[PastFact, ...] = ()
    sources: tuple[Memory, ...] = ()
    # how many of the question's words it answers (the engine's `relevance`); None: not said
    relevance: int | None = None

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> KnownFact | None:
        fact = item.get("fact")
        if not isinstance(fact, str) or not fact.strip():
            return None
        replaced = tuple(
            PastFact(_str(r.get("fact")), _str(r.get("predicate")), _str(r.get("object")),
                     _when(r.get("valid_at")), _when(r.get("invalid_at")))
            for r in item.get("replaced") or []
            if isinstance(r, dict) and isinstance(r.get("fact"), str)
        )  # fmt: skip
        sources = tuple(
            Memory(text=s["text"], speaker=s.get("speaker") if isinstance(s.get("speaker"), str)
                   else None, timestamp=_when(s.get("spoken_at")),
                   source_session=_str(s.get("session_id")) or None)
            for s in item.get("sources") or []
            if isinstance(s, dict) and isinstance(s.get("text"), str) and s["text"].strip()
        )  # fmt: skip
        return cls(
            fact=fact,
            subject=_str(item.get("subject")),
            predicate=_str(item.get("predicate")),
            object=_str(item.get("object")),
            since=_when(item.get("since") or item.get("valid_at")),
            replaced=replaced,
            sources=sources,
            relevance=rel if isinstance(rel := item.get("relevance"), int) else None,
        )


@dataclass(frozen=True, slots=True)
class Subject:
    """An entity a question names; `owner` when named by "I", "me" or "my"."""

    name: str
    type: str
    owner: bool = False


@dataclass(frozen=True, slots=True)
class KnownStatement:
    """Something said about a person the question names ("Rosa keeps bees on their roof"):
    whether it still holds, since when, what ended it and what holds instead (the engine's
    `statements` of /v1/context)."""

    text: str
    subject: str
    kind: str
    current: bool
    valid_at: datetime | None
    invalid_at: datetime | None = None
    ended_by: str | None = None
    ended_at: datetime | None = None
    kept_by: str | None = None
    instead: tuple[tuple[str, datetime | None], ...] = ()
    relevance: int = 0
    sources: tuple[Memory, ...] = ()

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> KnownStatement | None:
        text = item.get("text")
        if not isinstance(text, str) or not text.strip():
            return None

        def told(key: str) -> tuple[str | None, datetime | None]:
            x = item.get(key)
            if isinstance(x, dict) and isinstance(x.get("text"), str):
                return x["text"], _when(x.get("said_at"))
            return None, None

        ended, ended_at = told("ended_by")
        kept, _ = told("kept_by")
        sources = tuple(  # the words as said (the statement's own when the engine gives none)
            Memory(text=_str(x.get("evidence")) or x["text"],
                   speaker=_str(x.get("speaker")) or None,
                   timestamp=_when(x.get("said_at")), source_session=_str(x.get("session_id")))
            for x in item.get("sources") or []
            if isinstance(x, dict) and isinstance(x.get("text"), str)
        )  # fmt: skip
        instead = tuple(
            (x["text"], _when(x.get("valid_at")))
            for x in item.get("instead") or []
            if isinstance(x, dict) and isinstance(x.get("text"), str)
        )
        rel = item.get("relevance")
        return cls(
            text=text,
            subject=_str(item.get("subject")),
            kind=_str(item.get("kind")) or "fact",
            current=item.get("current") is True,
            valid_at=_when(item.get("valid_at")),
            invalid_at=_when(item.get("invalid_at")),
            ended_by=ended,
            ended_at=_when(item.get("invalid_at")) or ended_at,
            kept_by=kept,
            instead=instead,
            relevance=rel if isinstance(rel, int) else 0,
            sources=sources,
        )


@dataclass(frozen=True, slots=True)
class Recall:
    """What one `/v1/context` search gave: segments, and what is known about its subjects."""

    memories: list[Memory] = field(default_factory=list)
    facts: list[KnownFact] = field(default_factory=list)
    about: list[Subject] = field(default_factory=list)
    statements: list[KnownStatement] = field(default_factory=list)

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> Recall:
        """The recall in a `/v1/context` response body; KeyError/TypeError when it has no
        list of results (items it cannot read are left out)."""
        results = body["results"]
        if not isinstance(results, list):
            raise TypeError("results is not a list")
        memories = [Memory.from_result(r) for r in results if isinstance(r, dict)]
        raw_facts = body.get("facts") if isinstance(body.get("facts"), list) else []
        facts = [KnownFact.from_item(f) for f in raw_facts if isinstance(f, dict)]
        about = [
            Subject(a["name"], _str(a.get("type")), bool(a.get("owner")))
            for a in body.get("about") or []
            if isinstance(a, dict) and isinstance(a.get("name"), str)
        ]
        raw_said = body.get("statements") if isinstance(body.get("statements"), list) else []
        said = [KnownStatement.from_item(x) for x in raw_said if isinstance(x, dict)]
        return cls(
            memories=[m for m in memories if m is not None],
            facts=[f for f in facts if f is not None],
            about=about,
            statements=[x for x in said if x is not None],
        )


@dataclass(frozen=True, slots=True)
class Promise:
    """An open promise: its words, who made it and when."""

    text: str
    speaker: str | None
    said_at: datetime | None


class EngineClient:
    def __init__(
        self,
        base_url: str,
        token: str | None,
        *,
        timeout_s: float = 5.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        headers = {} if token is None else {TOKEN_HEADER: token}
        self._client = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            headers=headers,
            timeout=timeout_s,
            transport=transport,
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = await self._client.request(method, path, **kwargs)
        except httpx.TimeoutException:
            raise EngineUnavailableError("timeout") from None
        except httpx.HTTPError as exc:
            raise EngineUnavailableError(f"unreachable ({type(exc).__name__})") from None
        if response.status_code in (401, 403):
            raise EngineUnavailableError("unauthorized (check the internal token)")
        if response.status_code >= 400:
            raise EngineUnavailableError(f"HTTP {response.status_code}")
        return response

    async def context(
        self,
        query: str,
        *,
        limit: int = 5,
        tiers: Sequence[str] | None = None,
        as_of: datetime | None = None,
    ) -> list[Memory]:
        """Search the whole memory (never an `hours_back` window: it would hide every older
        memory), optionally only the given tiers: the segments found."""
        found = await self.recall(query, limit=limit, tiers=tiers, as_of=as_of)
        return found.memories

    async def recall(
        self,
        query: str,
        *,
        limit: int = 5,
        tiers: Sequence[str] | None = None,
        as_of: datetime | None = None,
        me: str | None = None,
    ) -> Recall:
        """`context`, with the facts true about the question's subjects (`me`: who "I" is,
        default the engine's owner). An engine without facts gives none."""
        params: dict[str, str | int] = {"query": query[:512], "limit": limit}
        if tiers:
            params["tier"] = ",".join(tiers)
        if as_of is not None:
            params["as_of"] = as_of.isoformat()
        if me and me.strip():
            params["me"] = me.strip()[:200]
        response = await self._request("GET", "/v1/context", params=params)
        try:
            return Recall.from_body(response.json())
        except (ValueError, KeyError, TypeError):
            raise EngineUnavailableError("bad response") from None

    async def open_promises(self, limit: int = 5) -> list[Promise]:
        """The open promises, newest first."""
        response = await self._request(
            "GET", "/v1/promises", params={"status": "open", "limit": limit}
        )
        try:
            items = response.json()["promises"]
        except (ValueError, KeyError, TypeError):
            raise EngineUnavailableError("bad response") from None
        return [
            Promise(p["evidence"] or _str(p.get("name")), p.get("speaker"),
                    _when(p.get("first_said_at")))
            for p in items if isinstance(p, dict) and isinstance(p.get("evidence"), str)
        ]  # fmt: skip

    async def forget_marker(self, timeout_s: float) -> str | None:
        """What the engine has forgotten, as a marker that changes whenever a forget request is
        made or finishes (`GET /v1/forget`: the newest request and how many are unfinished);
        None when the engine does not answer in `timeout_s`."""
        try:
            response = await self._request(
                "GET", "/v1/forget", params={"limit": 1}, timeout=timeout_s
            )
            body = response.json()
            newest = body["requests"][0]["request_id"] if body["requests"] else 0
            return f"{int(newest)}:{int(body['unfinished'])}"
        except (EngineUnavailableError, ValueError, KeyError, TypeError, IndexError):
            return None

    async def emit(self, events: list[dict[str, Any]]) -> dict[str, Any]:
        response = await self._request("POST", "/v1/events/emit", json={"events": events})
        try:
            body = response.json()
        except ValueError:
            return {}
        return body if isinstance(body, dict) else {}

    async def reachable(self, timeout_s: float = 1.0) -> bool:
        """Whether the engine answers `GET /health` with 200 within `timeout_s`."""
        try:
            response = await self._client.get("/health", timeout=timeout_s)
        except httpx.HTTPError:
            return False
        return response.status_code == 200
