"""The context engine as Annie sees it: memory search (`GET /v1/context`), event emission
(`POST /v1/events/emit`) and a reachability check, over one pooled httpx client."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
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
        when: datetime | None = None
        raw = item.get("timestamp")
        if isinstance(raw, str):
            try:
                when = datetime.fromisoformat(raw.replace("Z", "+00:00"))
            except ValueError:
                when = None
        entities = tuple(
            e["name"]
            for e in item.get("entities") or []
            if isinstance(e, dict) and isinstance(e.get("name"), str)
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
        memory), optionally only the given tiers."""
        params: dict[str, str | int] = {"query": query[:512], "limit": limit}
        if tiers:
            params["tier"] = ",".join(tiers)
        if as_of is not None:
            params["as_of"] = as_of.isoformat()
        response = await self._request("GET", "/v1/context", params=params)
        try:
            body = response.json()
            results = body["results"]
        except (ValueError, KeyError, TypeError):
            raise EngineUnavailableError("bad response") from None
        if not isinstance(results, list):
            raise EngineUnavailableError("bad response")
        memories = [Memory.from_result(r) for r in results if isinstance(r, dict)]
        return [m for m in memories if m is not None]

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
