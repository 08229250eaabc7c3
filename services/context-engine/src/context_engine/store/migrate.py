"""Apply the Alembic migrations (at engine start-up, or
`python -m context_engine.store.migrate`)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from alembic import command
from alembic.config import Config

from context_engine.config import Settings
from her_os_shared.logging import get_logger
from her_os_shared.retry import retry_until_done

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
    url = settings.database_url.get_secret_value()
    # any failure: logged and retried; health stays unavailable meanwhile
    await retry_until_done(
        lambda: asyncio.to_thread(upgrade, url),
        backoff=settings.backoff(0.5),
        log=log,
        event="migrations.retry",
    )
    log.info("migrations.done")
    done.set()


def main() -> None:
    upgrade(Settings().database_url.get_secret_value())


if __name__ == "__main__":
    main()
