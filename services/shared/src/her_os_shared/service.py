"""The common shape of a her-os service: a FastAPI app with `GET /health`, the token rule,
a request body limit, structured logs and graceful shutdown under uvicorn."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass

import uvicorn
from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from her_os_shared.auth import TokenConfigError, check_token_config
from her_os_shared.logging import configure_logging, get_logger
from her_os_shared.ratelimit import AuthFailureLimitMiddleware
from her_os_shared.settings import ServiceSettings


@dataclass(frozen=True, slots=True)
class HealthReport:
    """A service's health: `ready` (it can serve its API) and the layers it is serving
    without (generic names such as "graph", never backends, versions or addresses)."""

    ready: bool
    degraded: tuple[str, ...] = ()


HealthCheck = Callable[[FastAPI], Awaitable[bool | HealthReport]]
Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]


class BodyLimitMiddleware:
    """Answer 413 when a request body is larger than the limit, without reading it whole."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for key, value in scope.get("headers", []):
            if key == b"content-length" and value.isdigit() and int(value) > self.max_bytes:
                await self._reject(scope, receive, send)
                return
        seen = 0
        rejected = False

        async def limited_receive() -> Message:
            nonlocal seen, rejected
            message = await receive()
            if message["type"] == "http.request" and not rejected:
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    # Answer now and tell the app the client went away; anything it sends
                    # afterwards is dropped (raising here would become a 400 in FastAPI).
                    rejected = True
                    await self._reject(scope, receive, send)
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            if not rejected:
                await send(message)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except Exception:
            if not rejected:
                raise

    async def _reject(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = JSONResponse(
            {"detail": f"request body larger than {self.max_bytes} bytes"}, status_code=413
        )
        await response(scope, receive, send)


def create_service_app(
    *,
    service: str,
    title: str,
    version: str,
    settings: ServiceSettings,
    lifespan: Lifespan | None = None,
    health_check: HealthCheck | None = None,
) -> FastAPI:
    """Build the app. Raises TokenConfigError before anything starts if the token is missing."""
    check_token_config(
        settings.internal_token,
        settings.allow_insecure_no_token,
        type(settings).env_name("internal_token"),
        type(settings).env_name("allow_insecure_no_token"),
    )
    log = get_logger(service)

    @asynccontextmanager
    async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
        if settings.internal_token is None:
            log.warning("auth.disabled", reason="allow_insecure_no_token is set; /v1 is open")
        log.info("service.starting", host=settings.host, port=settings.port)
        if lifespan is None:
            yield
        else:
            async with lifespan(app):
                yield
        log.info("service.stopped")

    app = FastAPI(title=title, version=version, lifespan=_lifespan)
    app.state.settings = settings
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    # Outside the body limit: a locked-out client is refused before anything is read.
    app.add_middleware(
        AuthFailureLimitMiddleware,
        limit=settings.auth_failure_limit,
        window_s=settings.auth_failure_window_s,
    )

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> Response:
        # FastAPI's own 422, but rendered ASCII-safe: its errors echo the input, and an input
        # holding a lone surrogate cannot be encoded as UTF-8 (the default handler's 500).
        body = {"detail": jsonable_encoder(exc.errors())}
        return Response(json.dumps(body), status_code=422, media_type="application/json")

    @app.get("/health", tags=["health"], summary="Liveness and readiness (no auth)")
    async def health(request: Request) -> JSONResponse:
        # The app from the request, not from this closure: FastAPI keeps its endpoints in
        # process-wide caches, and an endpoint that held its app would keep every app built
        # in a process alive (a test run builds hundreds, each with its models).
        found = True if health_check is None else await health_check(request.app)
        report = found if isinstance(found, HealthReport) else HealthReport(ready=found)
        # No versions, paths or backend names here: /health is unauthenticated.
        if not report.ready:
            body: dict[str, object] = {"status": "unavailable"}
            if report.degraded:
                body["degraded"] = list(report.degraded)
            return JSONResponse(body, status_code=503)
        if report.degraded:  # still serving, without those layers
            return JSONResponse({"status": "degraded", "degraded": list(report.degraded)})
        return JSONResponse({"status": "ok"})

    return app


def serve(app_factory: Callable[[], FastAPI], settings: ServiceSettings, service: str) -> None:
    """Run under uvicorn; SIGINT/SIGTERM drain open requests, then the lifespan closes."""
    configure_logging(service, settings.log_level, settings.log_format)
    try:
        app = app_factory()
    except TokenConfigError as exc:
        get_logger(service).error("service.refused_to_start", reason=str(exc))
        raise SystemExit(2) from None
    uvicorn.Server(server_config(app, settings)).run()


def server_config(app: FastAPI, settings: ServiceSettings) -> uvicorn.Config:
    """How every service runs under uvicorn: our logging (access lines only at debug, with
    query tokens redacted by configure_logging), no Server header, X-Forwarded-For believed
    only from the configured proxies."""
    return uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_config=None,
        access_log=settings.log_level == "debug",
        timeout_graceful_shutdown=int(settings.graceful_shutdown_s),
        server_header=False,
        proxy_headers=settings.forwarded_allow_ips is not None,
        forwarded_allow_ips=settings.forwarded_allow_ips,
    )
