"""The event id rule: a UUID, in our 32-hex form or the design's canonical 8-4-4-4-12 form,
kept as 32 lowercase hex digits."""

from __future__ import annotations

import uuid

import pytest
from pydantic import ValidationError

from her_os_shared.errors import describe_validation_error
from her_os_shared.events import ObservabilityEvent, normalize_event_id

DESIGN_ID = "550e8400-e29b-41d4-a716-446655440000"  # the design's example event's id


def _event(event_id: str) -> ObservabilityEvent:
    base = ObservabilityEvent.for_creature("kraken", "complete").model_dump(mode="json")
    return ObservabilityEvent.model_validate({**base, "event_id": event_id})


@pytest.mark.parametrize(
    "given", [DESIGN_ID, DESIGN_ID.upper(), DESIGN_ID.replace("-", ""), uuid.UUID(DESIGN_ID).hex]
)
def test_a_uuid_in_either_form_is_kept_as_32_lowercase_hex_digits(given: str) -> None:
    assert _event(given).event_id == "550e8400e29b41d4a716446655440000"
    assert normalize_event_id(given) == "550e8400e29b41d4a716446655440000"


def test_new_ids_are_already_in_the_stored_form() -> None:
    ev = ObservabilityEvent.for_creature("kraken", "start")
    assert normalize_event_id(ev.event_id) == ev.event_id and len(ev.event_id) == 32


@pytest.mark.parametrize(
    "bad",
    [
        "550e8400-e29b-41d4-a716",  # too short
        "550e8400e29b-41d4-a716-446655440000",  # hyphens misplaced
        "g" * 32,
        DESIGN_ID + "\n",
        "{" + DESIGN_ID + "}",
        "urn:uuid:" + DESIGN_ID,
        "",
    ],
)
def test_anything_else_is_refused_naming_the_field(bad: str) -> None:
    with pytest.raises(ValidationError) as info:
        _event(bad)
    assert describe_validation_error(info.value).startswith("event_id:")
