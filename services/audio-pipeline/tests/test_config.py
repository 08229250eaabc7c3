from __future__ import annotations

from pathlib import Path

from audio_pipeline.config import Settings


def test_volumes_default_to_the_data_dir_and_follow_the_environment(monkeypatch) -> None:
    s = Settings(allow_insecure_no_token=True)
    assert (s.transcripts_dir, s.events_dir) == (Path("data/transcripts"), Path("data/events"))
    monkeypatch.setenv("AUDIO_PIPELINE_TRANSCRIPTS_DIR", "/volumes/transcripts")
    assert Settings().transcripts_dir == Path("/volumes/transcripts")
