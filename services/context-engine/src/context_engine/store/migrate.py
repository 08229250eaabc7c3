"""Apply the Alembic migrations (at engine start-up, or
`python -m context_engine.store.migrate`)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from alembic import command
from alembic.config import Config

from context_engine.config import Settings
from her_os_shared.logging import get_logger

MIGRATIONS = Path(__file__).with_name("migrations")
log = get_logger(__name__)


def alembic_config(url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["url"] = url
    return cfg


def upgrade(url: str, revision: str = "head") -> None:
    """Blocking; Alembic's env runs its own event loop, so call it outside one (or in a
    thread: `asyncio.to_thread(upgrade, url)`)."""
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str) -> None:
    command.downgrade(alembic_config(url), revision)


async def migrate_until_done(settings: Settings, done: asyncio.Event) -> None:
    """Upgrade to head, retrying with exponential backoff while PostgreSQL is unreachable."""
    if not settings.migrate_on_start:
        done.set()
        return
    delay = 0.5
    attempt = 0
    while True:
        attempt += 1
        try:
            await asyncio.to_thread(upgrade, settings.database_url.get_secret_value())
        except Exception as exc:  # any failure: log it and retry; health stays unavailable
            log.warning(
                "migrations.retry", attempt=attempt, retry_in_s=delay, error=repr(exc)[:500]
            )
            await asyncio.sleep(delay)
            delay = min(delay * 2, settings.migrate_retry_max_s)
            continue
        log.info("migrations.done", attempt=attempt)
        done.set()
        return


def main() -> None:
    upgrade(Settings().database_url.get_secret_value())


if __name__ == "__main__":
    main()
