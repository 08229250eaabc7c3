from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from context_engine.config import Settings

# Helpers beside the tests import as top-level modules (pytest runs in importlib mode); the
# PostgreSQL fixtures come from pg_harness, a plugin of the root conftest.py.
sys.path.insert(0, str(Path(__file__).parent))
from engine_harness import TOKEN, Engine, start_engine


@pytest.fixture
def settings(db_url: str, tmp_path: Path) -> Settings:
    return Settings(
        internal_token=TOKEN,
        database_url=db_url,
        transcripts_dir=tmp_path / "transcripts",
        events_dir=tmp_path / "events",
        search_index_dir=tmp_path / "search-index",
        vector_dir=tmp_path / "vectors",
        watch_debounce_s=0.1,
        watch_max_delay_s=0.5,
        reconcile_interval_s=2.0,
        job_retry_base_s=0.0,
        job_max_attempts=3,
    )


@pytest.fixture
async def engine(settings: Settings) -> AsyncIterator[Engine]:
    async for e in start_engine(settings):
        yield e
