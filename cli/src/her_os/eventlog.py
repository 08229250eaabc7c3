"""The supervisor's own log, data/logs/supervisor.log: one JSON object per line, like the
services' logs, so every file under data/logs/ (but PostgreSQL's and Redis's) parses alike."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


class EventLog:
    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, event: str, level: str = "info", **fields: Any) -> None:
        record = {
            "timestamp": datetime.now(UTC).isoformat(),
            "level": level,
            "logger": "her-os",
            "service": "supervisor",
            "supervisor_pid": os.getpid(),
            "event": event,
            **fields,
        }
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, default=str) + "\n")
