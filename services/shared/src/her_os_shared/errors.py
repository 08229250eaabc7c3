"""Turn pydantic validation errors into messages that name the field and the reason."""

from __future__ import annotations

from pydantic import ValidationError


def describe_validation_error(exc: ValidationError, limit: int = 5) -> str:
    """`segments.0.end: must not be before start; session_id: Field required`."""
    parts = []
    for err in exc.errors()[:limit]:
        loc = ".".join(str(p) for p in err["loc"]) or "(root)"
        msg = err["msg"].removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}")
    more = exc.error_count() - limit
    if more > 0:
        parts.append(f"(+{more} more)")
    return "; ".join(parts)
