"""Structured logging for every her-os process: one JSON object per line on stderr.

Standard-library loggers (uvicorn, sqlalchemy, ...) go through the same renderer, so a log
file is uniformly machine-readable. `console` format is for humans at a terminal.
"""

from __future__ import annotations

import logging
import re
import sys
from typing import Any
from urllib.parse import unquote_plus

import structlog

_SHARED: list[Any] = [
    structlog.contextvars.merge_contextvars,
    structlog.stdlib.add_log_level,
    structlog.stdlib.add_logger_name,
    structlog.processors.TimeStamper(fmt="iso", utc=True),
    structlog.processors.StackInfoRenderer(),
]


# Query parameters that carry a secret, whatever their case or percent-encoding: the auth
# rule's token parameters (`token`, the design's `x_internal_token`; auth.TOKEN_QUERY_PARAMS),
# the audio pipeline's webhook `token`, and OAuth's `access_token`. A client that writes the
# header's name (`X-Internal-Token`) as a parameter is covered too.
REDACTED_PARAMS = frozenset({"token", "x_internal_token", "access_token"})
# One `name=value` of a query string, wherever it appears in a line (an access log's request
# line, httpx's "HTTP Request: GET <url>", a traceback). The value stops where a query value
# cannot go on: `&`, a second `?` (old webhook clients append one), whitespace, a quote, or
# the backslash of a JSON-escaped quote.
_QUERY_PAIR = re.compile(r"(?<=[?&])([^=&?\s\"\\]+)=([^&?\s\"\\]*)")


def _is_secret(name: str) -> bool:
    # Decoded as Starlette decodes it: `?%74oken=` is `token` to the route, so to us.
    return unquote_plus(name).strip().lower().replace("-", "_") in REDACTED_PARAMS


def redact_query_tokens(text: str) -> str:
    """`/v1/events/stream?token=abc&x=1` → `/v1/events/stream?token=[redacted]&x=1`."""
    return _QUERY_PAIR.sub(
        lambda m: f"{m.group(1)}=[redacted]" if _is_secret(m.group(1)) else m.group(0), text
    )


# The API's routes: their query strings are private as a whole (a `/v1/context?query=` is the
# owner's own question), not only their tokens.
_PRIVATE_PATH = "/v1/"


def redact_access_path(path: str) -> str:
    """`/v1/context?query=where+is+Priya&token=…` → `/v1/context?[redacted]`; other paths keep
    their query with its tokens redacted (`/webhook/transcript?token=[redacted]&uid=d1`)."""
    route, mark, _query = path.partition("?")
    if mark and route.startswith(_PRIVATE_PATH):
        return f"{route}?[redacted]"
    return redact_query_tokens(path)


# A her-os API path with its query string, wherever a line holds one: a URL that a client
# library logs (httpx's "HTTP Request: GET http://engine:8100/v1/context?query=…", Annie asking
# the engine), a traceback, an access line. The path stays; the query goes as a whole.
_PRIVATE_QUERY = re.compile(r"(/v1/[^\s?\"'\\]*)\?[^\s\"'\\]*")


def redact_private(text: str) -> str:
    """Every `/v1/…?query` in `text` loses its query; every other query its tokens."""
    return redact_query_tokens(_PRIVATE_QUERY.sub(r"\1?[redacted]", text))


class RedactQueryTokens(logging.Filter):
    """uvicorn's access log prints the path with its query string: on `/v1/` the whole query
    goes, elsewhere the tokens in it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                redact_access_path(a)
                if isinstance(a, str) and a.startswith("/")
                else redact_query_tokens(a)
                if isinstance(a, str)
                else a
                for a in record.args
            )
        if isinstance(record.msg, str):
            record.msg = redact_query_tokens(record.msg)
        return True


class RedactingFormatter(structlog.stdlib.ProcessorFormatter):
    """The last word on every line, whoever logged it (uvicorn's access log, httpx's "HTTP
    Request: GET …", Pipecat through loguru, a traceback, our own events): an API path's query
    string and any query token are redacted."""

    def format(self, record: logging.LogRecord) -> str:
        return redact_private(super().format(record))


def _route_loguru(level: str) -> None:
    """Libraries that log through loguru (Pipecat) write to stderr in their own format,
    past the formatter above: send their records through the standard logging instead, so
    the same level, JSON shape and redaction apply."""
    try:
        from loguru import logger
    except ImportError:
        return

    def sink(message: Any) -> None:
        r = message.record
        error = r["exception"]
        logging.getLogger(r["name"] or "loguru").log(
            # loguru's TRACE (5) and SUCCESS (25) as the standard levels below them
            max(logging.DEBUG, r["level"].no // 10 * 10),
            r["message"],
            exc_info=(error.type, error.value, error.traceback) if error else None,
        )

    logger.remove()
    logger.add(sink, level=level.upper(), format="{message}")


def configure_logging(service: str, level: str = "info", fmt: str = "json") -> None:
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    structlog.configure(
        processors=[*_SHARED, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        RedactingFormatter(
            foreign_pre_chain=_SHARED,
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                renderer,
            ],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers.clear()
        logging.getLogger(name).propagate = True
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, RedactQueryTokens) for f in access.filters):
        access.addFilter(RedactQueryTokens())
    _route_loguru(level)
    structlog.contextvars.bind_contextvars(service=service)


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    return structlog.stdlib.get_logger(name)
