"""The observability event: what every process reports to the chronicler and the Aquarium."""

from __future__ import annotations

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
from her_os_shared.creatures import CREATURES, Service, Zone, get_creature
from her_os_shared.ids import SafeId

MAX_EVENT_BYTES = 64 * 1024


class EventType(StrEnum):
    START = "start"
    COMPLETE = "complete"
    ERROR = "error"
    METRIC = "metric"


def _new_event_id() -> str:
    return uuid.uuid4().hex


class ObservabilityEvent(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    schema_version: Literal[1] = SCHEMA_VERSION
    event_id: str = Field(default_factory=_new_event_id, pattern=r"^[0-9a-f]{32}$")
    timestamp: AwareDatetime = Field(default_factory=lambda: datetime.now(UTC))
    service: Service
    process: str = Field(min_length=1, max_length=64)
    creature: str
    zone: Zone
    event_type: EventType
    session_id: SafeId | None = None
    data: dict[str, JsonValue] = Field(default_factory=dict)
    reasoning: str | None = Field(default=None, max_length=1000)

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
            creature=c.name,
            zone=c.zone,
            event_type=EventType(event_type),
            session_id=session_id,
            data=data or {},
            reasoning=reasoning,
            **extra,
        )
