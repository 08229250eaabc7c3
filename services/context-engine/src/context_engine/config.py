"""Context engine settings (env prefix CONTEXT_ENGINE_)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict

from her_os_shared.settings import ServiceSettings


class Settings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="CONTEXT_ENGINE_")

    port: int = Field(default=8100, ge=1, le=65535)
    # SQLAlchemy URL of PostgreSQL (asyncpg driver). `her-os up` points it at the embedded
    # server; docker-compose at the postgres container.
    database_url: SecretStr = SecretStr("postgresql+asyncpg://heros@127.0.0.1:55432/heros")
    transcripts_dir: Path = Path("data/transcripts")
    events_dir: Path = Path("data/events")
    db_pool_size: int = Field(default=5, ge=1)
    health_timeout_s: float = Field(default=2.0, gt=0)
    # Apply Alembic migrations at start-up (off when an operator runs them separately:
    # `python -m context_engine.migrate`).
    migrate_on_start: bool = True
    # Longest wait between migration attempts while PostgreSQL is unreachable.
    migrate_retry_max_s: float = Field(default=30.0, gt=0)
