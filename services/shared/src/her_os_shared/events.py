"""The observability event: what every process reports to the chronicler and the Aquarium."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    field_validator,
    model_validator,
)

from her_os_shared import SCHEMA_VERSION
from her_os_shared.creatures import CREATURES, Service, Zone, get_creature, upgrade_legacy
from her_os_shared.ids import SafeId

MAX_EVENT_BYTES = 64 * 1024


class EventType(StrEnum):
    START = "start"
    COMPLETE = "complete"
    ERROR = "error"
    METRIC = "metric"


def _new_event_id() -> str:
    return uuid.uuid4().hex


# An event id is a UUID: 32 hex digits (ours), or the canonical 8-4-4-4-12 form the design's
# examples use (any case). Both are kept as 32 lowercase hex digits, so one event sent in
# either form is one event (the chronicler's duplicate check, the table's primary key).
_EVENT_ID_FORMS = re.compile(r"[0-9a-f]{32}|[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}", re.I)


def normalize_event_id(value: str) -> str:
    """`value` as a stored event id (32 lowercase hex digits); ValueError if not a UUID."""
    if not _EVENT_ID_FORMS.fullmatch(value):
        raise ValueError("event_id must be a UUID: 32 hex digits, or 8-4-4-4-12 with hyphens")
    return value.replace("-", "").lower()


class ObservabilityEvent(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    schema_version: Literal[1] = SCHEMA_VERSION
    event_id: str = Field(default_factory=_new_event_id, min_length=32, max_length=36)
    timestamp: AwareDatetime = Field(default_factory=lambda: datetime.now(UTC))
    service: Service
    process: str = Field(min_length=1, max_length=64)
    creature: str
    zone: Zone
    event_type: EventType
    session_id: SafeId | None = None
    data: dict[str, JsonValue] = Field(default_factory=dict)
    reasoning: str | None = Field(default=None, max_length=1000)

    @field_validator("event_id")
    @classmethod
    def _uuid_event_id(cls, value: str) -> str:
        return normalize_event_id(value)

    @model_validator(mode="before")
    @classmethod
    def _read_old_names(cls, value: Any) -> Any:
        """An event of the registry before ADR 0021 (an old event file, an old client) is read
        under today's creature: name, service, process and zone together."""
        if not isinstance(value, dict):
            return value
        creature, process = value.get("creature"), value.get("process")
        if not isinstance(creature, str) or not isinstance(process, str):
            return value
        known = CREATURES.get(creature)
        if known is not None and known.process == process:
            return value
        data = value.get("data")
        now = upgrade_legacy(creature, process, data if isinstance(data, dict) else {})
        if now is None:
            return value
        return {
            **value,
            "creature": now.name.value,
            "service": now.service.value,
            "process": now.process,
            "zone": now.zone.value,
        }

    @field_validator("creature")
    @classmethod
    def _known_creature(cls, value: str) -> str:
        if value not in CREATURES:
            raise ValueError(f"unknown creature {value!r}")
        return value

    @model_validator(mode="after")
    def _matches_registry(self) -> ObservabilityEvent:
        c = CREATURES[self.creature]
        for field, expected in (("service", c.service), ("process", c.process), ("zone", c.zone)):
            if getattr(self, field) != expected:
                raise ValueError(
                    f"{field} {getattr(self, field)!s} does not match creature "
                    f"{self.creature!r}, which is {expected!s}"
                )
        if len(self.model_dump_json()) > MAX_EVENT_BYTES:
            raise ValueError(f"event is larger than {MAX_EVENT_BYTES} bytes")
        return self

    @classmethod
    def for_creature(
        cls,
        creature: str,
        event_type: EventType | str,
        *,
        session_id: str | None = None,
        data: dict[str, Any] | None = None,
        reasoning: str | None = None,
        timestamp: datetime | None = None,
    ) -> ObservabilityEvent:
        """Build an event from the creature name alone; the registry fills the rest."""
        c = get_creature(creature)
        extra: dict[str, Any] = {} if timestamp is None else {"timestamp": timestamp}
        return cls(
            service=c.service,
            process=c.process,
            creature=c.name.value,
            zone=c.zone,
            event_type=EventType(event_type),
            session_id=session_id,
            data=data or {},
            reasoning=reasoning,
            **extra,
        )
