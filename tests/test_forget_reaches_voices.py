"""Forgetting a person by name reaches the audio pipeline's enrollment bank: the context
engine's client (context_engine.privacy.voices) against the real audio-pipeline app (its route and
bank; models are not needed for it, so the test does not wait for them)."""

from __future__ import annotations

from pathlib import Path

import httpx
import numpy as np
import pytest
from api_harness import TOKEN, make_settings
from asgi_lifespan import LifespanManager

from audio_pipeline.app import create_app
from context_engine.privacy.voices import VoiceBank, VoiceBankError


async def test_the_engines_client_deletes_a_persons_voices(tmp_path: Path) -> None:
    app = create_app(make_settings(tmp_path))
    async with LifespanManager(app, startup_timeout=60, shutdown_timeout=30):
        bank = app.state.runtime.bank
        dim = bank.dim
        for i, (person, style) in enumerate([("Priya", None), ("Priya", "phone"), ("Ravi", None)]):
            bank.enroll(person, np.eye(dim, dtype=np.float32)[i], style=style)
        transport = httpx.ASGITransport(app=app)
        voices = VoiceBank("http://audio-pipeline", TOKEN, transport=transport)
        try:
            assert await voices.forget_person("priya") == 1  # both of her styles, any case
            assert bank.persons() == ["Ravi"]
            assert await voices.forget_person("priya") == 0  # already gone: not an error
            wrong = VoiceBank("http://audio-pipeline", "not-the-token", transport=transport)
            try:  # a refused token fails the step (the forget job retries it)
                with pytest.raises(VoiceBankError, match="401"):
                    await wrong.forget_person("Ravi")
            finally:
                await wrong.close()
            assert bank.persons() == ["Ravi"]
        finally:
            await voices.close()
