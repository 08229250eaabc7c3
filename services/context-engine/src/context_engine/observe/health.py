"""What the engine is serving without: `GET /health` and `/v1/stats` read it.

Two kinds of knowledge, because probing costs differ:
- probed on each check, in parallel, each within `health_timeout_s`: PostgreSQL (required —
  without it nothing is served: "unavailable"), the graph database and the vector store
  (cheap queries);
- observed: the embedder and the LLM are too costly to call for a health check, so the
  outcome of their last real call is kept (`Outcomes`); a failure marks the layer degraded
  until a call succeeds again.
Layer names are generic ("graph", "vectors", "embedder", "llm", "jobs"): `/health` is
unauthenticated and tells no backend, address or version.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from her_os_shared.logging import get_logger

log = get_logger(__name__)


@dataclass(slots=True)
class Outcome:
    ok: bool
    at: float  # time.monotonic()
    error: str | None = None


@dataclass
class Outcomes:
    """The last outcome of each observed layer; logs each change of state once."""

    last: dict[str, Outcome] = field(default_factory=dict)

    def succeeded(self, layer: str) -> None:
        before = self.last.get(layer)
        if before is not None and not before.ok:
            log.info("health.recovered", layer=layer)
        self.last[layer] = Outcome(True, time.monotonic())

    def failed(self, layer: str, error: BaseException | str) -> None:
        before = self.last.get(layer)
        message = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        if before is None or before.ok:
            log.warning("health.degraded", layer=layer, error=message[:300])
        self.last[layer] = Outcome(False, time.monotonic(), message[:300])

    def failing(self) -> dict[str, str]:
        return {k: v.error or "failed" for k, v in self.last.items() if not v.ok}


@dataclass(frozen=True, slots=True)
class Health:
    ready: bool  # PostgreSQL answers and the engine has started
    degraded: dict[str, str]  # layer → why (the reason is only shown behind the token)


Probe = Callable[[], Awaitable[bool]]


async def check(
    *,
    started: bool,
    required: Probe,
    probes: dict[str, Probe],
    outcomes: Outcomes,
    timeout_s: float,
) -> Health:
    """Run the probes concurrently (each bounded by `timeout_s`) and merge the outcomes."""

    async def bounded(probe: Probe) -> bool:
        try:
            async with asyncio.timeout(timeout_s):
                return await probe()
        except Exception:  # a probe that fails or hangs means "not answering"
            return False

    names = list(probes)
    results = await asyncio.gather(bounded(required), *(bounded(probes[n]) for n in names))
    degraded = {n: "not answering" for n, ok in zip(names, results[1:], strict=True) if not ok}
    for layer, why in outcomes.failing().items():
        degraded.setdefault(layer, why)
    return Health(ready=started and results[0], degraded=dict(sorted(degraded.items())))
