"""The responders a session may choose, by name.

`ANNIE_VOICE_LLM_BACKEND` picks the default; a request (`POST /v1/chat`, `POST /start`) may
name another with `llm_backend`. A request may use the project's names (`none`, `openai`,
`claude`), `auto` (the default) or the design's `qwen3.5-9b` (its llama-server model). With
`ANNIE_VOICE_LLAMA_SERVER_URL` set, `qwen3.5-9b` is a backend of its own: that second
OpenAI-compatible server (the design's llama-server on :8003) beside the default one (Ollama).
Without it, `qwen3.5-9b` names the OpenAI-compatible backend, whatever model
`ANNIE_VOICE_LLM_MODEL` names (ADR 0020). A named backend whose settings are incomplete is
refused, naming the settings, never replaced by another: a caller that asked for Claude must
not get the offline responder without knowing it.

Backends are built on first use and kept, so an SDK is imported only when some session uses
it (as `create_backend` does for the default).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, get_args

from annie_voice.config import Settings
from annie_voice.llm.base import ChatBackend

BackendName = Literal["none", "openai", "claude", "qwen3.5-9b"]
# What a request's `llm_backend` may say.
LlmBackendRequest = Literal["auto", "none", "openai", "claude", "qwen3.5-9b"]
AUTO = "auto"
LLAMA_SERVER = "qwen3.5-9b"
# The settings each backend needs (fields of Settings; `none` needs nothing but the engine).
REQUIRED: dict[BackendName, tuple[str, ...]] = {
    "none": (),
    "openai": ("llm_base_url", "llm_model"),
    "claude": ("claude_api_key",),
    LLAMA_SERVER: ("llama_server_url",),
}


class BackendUnavailableError(LookupError):
    """A request named a backend this server cannot run; `detail` says why and what enables
    it."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def canonical(requested: str, settings: Settings) -> BackendName | None:
    """The backend a request's name stands for (None: `auto` or not a known name):
    `qwen3.5-9b` is the llama-server backend where one is configured, else the
    OpenAI-compatible one."""
    if requested == LLAMA_SERVER and not settings.llama_server_url:
        return "openai"
    return requested if requested in REQUIRED else None  # type: ignore[return-value]


class BackendPool:
    """The default backend (built at start) and the others, built when first chosen."""

    def __init__(
        self,
        settings: Settings,
        default: ChatBackend,
        build: Callable[[BackendName], ChatBackend] | None,
    ) -> None:
        """`build` makes a backend the settings configure (None: only `default` is offered,
        as when a caller injected its own backend and nothing to build others with)."""
        self.settings = settings
        self.default = default
        self._build = build
        self._built: dict[str, ChatBackend] = {default.name: default}

    def _missing(self, name: BackendName) -> list[str]:
        return [
            self.settings.env_name(field)
            for field in REQUIRED[name]
            if not getattr(self.settings, field)
        ]

    def available(self) -> list[str]:
        """The backend names a session may choose here, the default first (`qwen3.5-9b` where
        a llama-server is configured; without one it is `openai` by another name)."""
        names = [self.default.name]
        if self._build is not None:
            names += [n for n in REQUIRED if n not in names and not self._missing(n)]
        return names

    def resolve(self, requested: str | None) -> str:
        """The backend name a request stands for (None or `auto`: the default). Raises
        BackendUnavailableError for an unknown name or one whose settings are missing."""
        if requested is None or requested == AUTO:
            return self.default.name
        name = canonical(requested, self.settings)
        if name is None:
            choices = ", ".join(get_args(LlmBackendRequest))
            raise BackendUnavailableError(
                f"llm_backend {requested!r} is not a backend; one of: {choices}"
            )
        if name in self._built:
            return name
        missing = self._missing(name)
        if missing or self._build is None:
            default = f"{self.default.name!r} ({self.settings.env_name('llm_backend')})"
            needs = (
                f"; set {' and '.join(missing)} to enable it"
                if missing
                else f"; only {default} runs in this process"
            )
            if missing and requested == LLAMA_SERVER and name != LLAMA_SERVER:
                needs += (
                    f" (or {self.settings.env_name('llama_server_url')} for a llama-server "
                    "of its own)"
                )
            raise BackendUnavailableError(
                f"llm_backend {requested!r} is not configured on this server, which runs "
                f"{default} by default{needs}"
            )
        return name

    def get(self, name: str) -> ChatBackend:
        """The backend of a resolved name, built on first use."""
        resolved = canonical(name, self.settings)
        backend = self._built.get(resolved or name)
        if backend is None:
            if resolved is None or self._build is None or self._missing(resolved):
                raise BackendUnavailableError(f"llm_backend {name!r} is not configured")
            backend = self._built[resolved] = self._build(resolved)
        return backend

    async def aclose(self) -> None:
        for backend in self._built.values():
            await backend.aclose()
