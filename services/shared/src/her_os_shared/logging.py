"""Structured logging for every her-os process: one JSON object per line on stderr.

Standard-library loggers (uvicorn, sqlalchemy, ...) go through the same renderer, so a log
file is uniformly machine-readable. `console` format is for humans at a terminal.
"""

from __future__ import annotations

import logging
import re
import sys
from typing import Any

import structlog

_SHARED: list[Any] = [
    structlog.contextvars.merge_contextvars,
    structlog.stdlib.add_log_level,
    structlog.stdlib.add_logger_name,
    structlog.processors.TimeStamper(fmt="iso", utc=True),
    structlog.processors.StackInfoRenderer(),
]


# `token=...` in a query string (the auth rule's TOKEN_QUERY, webhook tokens): never logged.
_TOKEN_IN_QUERY = re.compile(r"([?&](?:token|access_token)=)[^&\s\"]*", re.IGNORECASE)


def redact_query_tokens(text: str) -> str:
    """`/v1/events/stream?token=abc&x=1` → `/v1/events/stream?token=[redacted]&x=1`."""
    return _TOKEN_IN_QUERY.sub(r"\1[redacted]", text)


class RedactQueryTokens(logging.Filter):
    """uvicorn's access log prints the path with its query string: redact tokens in it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                redact_query_tokens(a) if isinstance(a, str) else a for a in record.args
            )
        if isinstance(record.msg, str):
            record.msg = redact_query_tokens(record.msg)
        return True


class RedactingFormatter(structlog.stdlib.ProcessorFormatter):
    """The last word on every line: a query token is redacted whoever logged it (uvicorn's
    access log, httpx's "HTTP Request: GET …?token=…", a traceback, our own events)."""

    def format(self, record: logging.LogRecord) -> str:
        return redact_query_tokens(super().format(record))


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
    structlog.contextvars.bind_contextvars(service=service)


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    return structlog.stdlib.get_logger(name)
