"""Creatures reconciled with the design (ADR 0021): stored events of the registry before it are
renamed (creature, service, process, zone), so the time machine and `GET /v1/events?creature=`
find them under today's names and an old name never reads as a new creature.

The mapping is `her_os_shared.creatures.upgrade_legacy`, the same one that reads old event
files and old clients' events; that table is frozen history, so this migration stays what it
was. Downgrading leaves the names as they are (the old registry's code skips events it does
not know; the events age out within the retention window).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from her_os_shared.creatures import LEGACY_BY_DATA, LEGACY_PAIRS, Creature, upgrade_legacy

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

_BATCH = 1000
_RENAME = sa.text(
    "UPDATE observability_events SET creature = :new, service = :service, process = :new_process,"
    " zone = :zone WHERE creature = :creature AND process = :process"
)
_RENAME_ONE = sa.text(
    "UPDATE observability_events SET creature = :new, service = :service, process = :new_process,"
    " zone = :zone WHERE event_id = :event_id"
)
_BY_DATA = sa.text(
    "SELECT event_id, data FROM observability_events WHERE creature = :creature"
    " AND process = :process AND event_id > :after ORDER BY event_id LIMIT :n"
)


def _now(c: Creature) -> dict[str, str]:
    return {
        "new": c.name.value,
        "service": c.service.value,
        "new_process": c.process,
        "zone": c.zone.value,
    }


def upgrade() -> None:
    conn = op.get_bind()
    for creature, process in sorted(LEGACY_PAIRS - LEGACY_BY_DATA):
        now = upgrade_legacy(creature, process, {})
        assert now is not None
        conn.execute(_RENAME, {"creature": creature, "process": process, **_now(now)})
    for creature, process in sorted(LEGACY_BY_DATA):
        after = ""
        while True:
            rows = conn.execute(
                _BY_DATA, {"creature": creature, "process": process, "after": after, "n": _BATCH}
            ).all()
            if not rows:
                break
            updates = []
            for event_id, data in rows:
                now = upgrade_legacy(creature, process, data if isinstance(data, dict) else {})
                assert now is not None
                updates.append({"event_id": event_id, **_now(now)})
            conn.execute(_RENAME_ONE, updates)
            after = rows[-1][0]


def downgrade() -> None:
    pass
