from __future__ import annotations

from pathlib import Path

from audio_pipeline.config import Settings


def test_volumes_default_to_the_data_dir_and_follow_the_environment(monkeypatch) -> None:
    s = Settings(allow_insecure_no_token=True)
    assert (s.transcripts_dir, s.events_dir) == (Path("data/transcripts"), Path("data/events"))
    monkeypatch.setenv("AUDIO_PIPELINE_TRANSCRIPTS_DIR", "/volumes/transcripts")
    assert Settings().transcripts_dir == Path("/volumes/transcripts")


def test_the_webhook_token_is_optional_but_never_short(monkeypatch) -> None:
    import pytest
    from pydantic import ValidationError

    monkeypatch.setenv("AUDIO_PIPELINE_WEBHOOK_TOKEN", "")  # compose's unset variable
    assert Settings(allow_insecure_no_token=True).webhook_token is None
    monkeypatch.setenv("AUDIO_PIPELINE_WEBHOOK_TOKEN", "short")
    with pytest.raises(ValidationError, match="at least 16"):
        Settings(allow_insecure_no_token=True)
