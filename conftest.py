"""Test-run wide setup: the services' test helpers (top-level modules beside their tests:
pytest runs in importlib mode, where several `tests` packages would clash) and the real
PostgreSQL fixtures (pg_harness), shared by the context engine's and cross-service tests."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
for helpers in (
    "services/audio-pipeline/tests",
    "services/context-engine/tests",
    "services/annie-voice/tests",
    "tests",
):
    sys.path.insert(0, str(ROOT / helpers))

pytest_plugins = ["pg_harness", "falkordb_harness", "run_resources"]
