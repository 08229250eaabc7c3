"""The audio pipeline's enrollment bank, as forgetting reaches it: a person forgotten by name
loses their enrolled voice too, or the pipeline would go on naming them in new transcripts."""

from __future__ import annotations

from urllib.parse import quote

import httpx

from her_os_shared.logging import get_logger

log = get_logger(__name__)


class VoiceBankError(RuntimeError):
    """The audio pipeline did not answer, or answered with an error (the step is retried)."""


class VoiceBank:
    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout_s: float = 5.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._client = httpx.AsyncClient(
            base_url=self.base_url,
            headers={"X-Internal-Token": token},
            timeout=timeout_s,
            transport=transport,
        )

    async def forget_person(self, name: str) -> int:
        """Delete every enrolled voice of `name` (any case); returns how many people the bank
        removed (0: none was enrolled under that name)."""
        try:
            r = await self._client.delete(f"/v1/enrollment/persons/{quote(name, safe='')}")
        except httpx.HTTPError as exc:
            raise VoiceBankError(f"audio pipeline at {self.base_url}: {exc!r}") from exc
        if r.status_code == 404:
            return 0
        if r.status_code != 200:
            raise VoiceBankError(
                f"audio pipeline at {self.base_url} answered {r.status_code} to a voice deletion"
            )
        return int(r.json().get("deleted_persons", 0))

    async def close(self) -> None:
        await self._client.aclose()
