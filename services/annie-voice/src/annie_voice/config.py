"""Annie voice settings (env prefix ANNIE_VOICE_)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from her_os_shared.settings import ServiceSettings


class Settings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="ANNIE_VOICE_")

    port: int = Field(default=7860, ge=1, le=65535)
    context_engine_url: str = "http://127.0.0.1:8100"
