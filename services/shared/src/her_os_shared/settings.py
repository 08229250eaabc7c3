"""Settings every service has. Each service subclasses this in its own `config.py` with its
own env prefix (AUDIO_PIPELINE_, CONTEXT_ENGINE_, ANNIE_VOICE_)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class ServiceSettings(BaseSettings):
    model_config = SettingsConfigDict(extra="ignore", frozen=True)

    host: str = "127.0.0.1"
    port: int = Field(ge=1, le=65535)
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_format: Literal["json", "console"] = "json"
    # The shared secret of every /v1 route (header X-Internal-Token). Required unless
    # allow_insecure_no_token is set for local development.
    internal_token: SecretStr | None = None
    allow_insecure_no_token: bool = False
    # Largest request body accepted, in bytes; larger bodies get 413 before being read whole.
    max_body_bytes: int = Field(default=1024 * 1024, ge=1024)
    # Rate limiting after repeated auth failures: a client address with this many failed token
    # checks within auth_failure_window_s gets 429 (with Retry-After) on everything but
    # /health. 0 turns it off.
    auth_failure_limit: int = Field(default=20, ge=0)
    # The window those failures are counted in; the lockout lasts as long.
    auth_failure_window_s: float = Field(default=60.0, gt=0)
    # Seconds uvicorn waits for open requests on shutdown.
    graceful_shutdown_s: float = Field(default=10.0, ge=0)
    # Proxies whose X-Forwarded-For names the client (comma-separated addresses or networks,
    # e.g. the dashboard's nginx). Unset: none, the TCP peer is the client (logs, the
    # auth-failure lockout). uvicorn would otherwise trust 127.0.0.1, from where every client
    # of the embedded platform connects: any of them could forge the header.
    forwarded_allow_ips: str | None = None

    @classmethod
    def env_name(cls, field: str) -> str:
        """The environment variable that sets `field`, e.g. CONTEXT_ENGINE_INTERNAL_TOKEN."""
        return f"{cls.model_config.get('env_prefix', '')}{field}".upper()
