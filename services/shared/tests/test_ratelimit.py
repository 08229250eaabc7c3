"""Rate limiting after repeated auth failures: the bookkeeping (with a fake clock) and the
middleware in a service app."""

from __future__ import annotations

import httpx
from fastapi import Depends
from pydantic_settings import SettingsConfigDict

from her_os_shared import ratelimit
from her_os_shared.auth import TOKEN_HEADER, require_token
from her_os_shared.ratelimit import AuthFailureLimiter
from her_os_shared.service import create_service_app
from her_os_shared.settings import ServiceSettings

TOKEN = "r" * 32


class ClockDouble:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_nth_failure_in_the_window_locks_out_for_the_window() -> None:
    clock = ClockDouble()
    limiter = AuthFailureLimiter(limit=3, window_s=60, clock=clock)
    assert not limiter.failed("a") and not limiter.failed("a")
    assert limiter.retry_after("a") is None
    assert limiter.failed("a")
    assert limiter.retry_after("a") == 60
    assert limiter.retry_after("b") is None  # per address
    clock.now += 59.5
    assert limiter.retry_after("a") == 1
    clock.now += 0.5
    assert limiter.retry_after("a") is None
    assert not limiter.failed("a")  # a fresh start after the lockout


def test_failures_older_than_the_window_do_not_count() -> None:
    clock = ClockDouble()
    limiter = AuthFailureLimiter(limit=3, window_s=60, clock=clock)
    limiter.failed("a")
    limiter.failed("a")
    clock.now += 61
    assert not limiter.failed("a")
    assert limiter.retry_after("a") is None


def test_memory_is_bounded_by_the_number_of_tracked_addresses(monkeypatch) -> None:
    monkeypatch.setattr(ratelimit, "MAX_TRACKED", 100)
    limiter = AuthFailureLimiter(limit=1, window_s=60, clock=ClockDouble())
    for i in range(1000):
        limiter.failed(f"10.0.{i // 256}.{i % 256}")
    assert len(limiter._failures) <= 100 and len(limiter._locked_until) <= 100
    assert limiter.retry_after("10.0.3.231") is not None  # the most recent is still locked


class DemoSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="DEMO_")
    port: int = 9999


def _client(app, host: str = "192.0.2.1") -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=(host, 5555))
    return httpx.AsyncClient(transport=transport, base_url="http://t")


async def test_a_service_answers_429_with_retry_after_after_repeated_failures() -> None:
    s = DemoSettings(internal_token=TOKEN, auth_failure_limit=3, auth_failure_window_s=30)
    app = create_service_app(service="demo", title="demo", version="0", settings=s)

    @app.get("/v1/thing", dependencies=[Depends(require_token(s.internal_token))])
    async def thing() -> dict:
        return {"ok": True}

    right, wrong = {TOKEN_HEADER: TOKEN}, {TOKEN_HEADER: "w" * 32}
    async with _client(app) as c, _client(app, "192.0.2.2") as other:
        assert (await c.get("/v1/thing", headers=right)).status_code == 200
        assert [(await c.get("/v1/thing", headers=wrong)).status_code for _ in range(3)] == [
            401
        ] * 3
        locked = await c.get("/v1/thing", headers=right)  # even the right token now
        assert locked.status_code == 429
        assert 1 <= int(locked.headers["Retry-After"]) <= 30
        assert (await c.get("/health")).status_code == 200  # never locked
        assert (await other.get("/v1/thing", headers=right)).status_code == 200


async def test_zero_turns_it_off() -> None:
    s = DemoSettings(internal_token=TOKEN, auth_failure_limit=0)
    app = create_service_app(service="demo", title="demo", version="0", settings=s)

    @app.get("/v1/thing", dependencies=[Depends(require_token(s.internal_token))])
    async def thing() -> dict:
        return {"ok": True}

    async with _client(app) as c:
        codes = {(await c.get("/v1/thing")).status_code for _ in range(50)}
    assert codes == {401}
