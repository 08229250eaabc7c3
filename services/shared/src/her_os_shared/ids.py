"""Identifiers that may become part of a file path (session ids, device ids, stream ids), and
segment ids, which never do.

Every path id is validated against one pattern *before* anything touches the disk, so path
tricks (`../`, `/`, NUL, dots, unicode look-alikes) are rejected with a clear error.

Segment ids also allow dots, because the design's own ids carry times (`seg-001-0.00-4.52`).
They name a segment inside a session's JSONL and a database row, never a file, and are joined
to a session id only with `/` (which they cannot contain). Even so the rule keeps them inert
as a path part: no leading dot and no `..`.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

ID_PATTERN = r"^[A-Za-z0-9_-]{1,128}$"
_ID_RE = re.compile(ID_PATTERN)


class InvalidIdError(ValueError):
    """An id that is not safe to use in a path."""


def validate_id(value: object, field: str = "id") -> str:
    """Return `value` if it is a safe id, else raise InvalidIdError naming the field."""
    if not isinstance(value, str):
        raise InvalidIdError(f"{field}: must be a string, got {type(value).__name__}")
    # fullmatch, not match: `$` would accept a trailing newline.
    if not _ID_RE.fullmatch(value):
        shown = value if len(value) <= 40 else value[:40] + "…"
        raise InvalidIdError(
            f"{field}: {shown!r} is not a valid id (1-128 characters of A-Z a-z 0-9 _ -)"
        )
    return value


def _check(value: str) -> str:
    # Inside pydantic the field name is added to the error location, so say only why.
    if not _ID_RE.fullmatch(value):
        raise ValueError("must be 1-128 characters of A-Z a-z 0-9 _ - (no dots, slashes or spaces)")
    return value


SafeId = Annotated[str, AfterValidator(_check)]
"""A pydantic field type for ids that may become part of a path."""

SEGMENT_ID_PATTERN = r"^(?!.*\.\.)[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$"
_SEGMENT_ID_RE = re.compile(SEGMENT_ID_PATTERN)


def _check_segment_id(value: str) -> str:
    if not _SEGMENT_ID_RE.fullmatch(value):
        raise ValueError(
            "must be 1-128 characters of A-Z a-z 0-9 _ - . (not starting with a dot, no '..', "
            "no slashes or spaces)"
        )
    return value


SegmentId = Annotated[str, AfterValidator(_check_segment_id)]
"""A pydantic field type for segment ids: a path id's characters plus single dots."""
