from __future__ import annotations

from annie_voice.config import Settings


def test_context_engine_url_defaults_to_the_local_engine(monkeypatch) -> None:
    assert Settings().context_engine_url == "http://127.0.0.1:8100"
    monkeypatch.setenv("ANNIE_VOICE_CONTEXT_ENGINE_URL", "http://context-engine:8100")
    assert Settings().context_engine_url == "http://context-engine:8100"
