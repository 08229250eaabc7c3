"""Turn pydantic validation errors into messages that name the field and the reason."""

from __future__ import annotations

from pydantic import ValidationError


def validation_problems(exc: ValidationError, limit: int = 5) -> list[str]:
    """One `field: reason` per problem (`segments.0.end: must not be before start`), at most
    `limit` and a `(+N more)`. Never the rejected value nor pydantic's link: the value may be
    long or private, and the link says nothing a caller can act on."""
    parts = []
    for err in exc.errors(include_url=False, include_input=False)[:limit]:
        loc = ".".join(str(p) for p in err["loc"]) or "(root)"
        msg = err["msg"].removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}")
    more = exc.error_count() - limit
    if more > 0:
        parts.append(f"(+{more} more)")
    return parts


def describe_validation_error(exc: ValidationError, limit: int = 5) -> str:
    """`segments.0.end: must not be before start; session_id: Field required`."""
    return "; ".join(validation_problems(exc, limit))
