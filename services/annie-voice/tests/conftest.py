from __future__ import annotations

import sys
from pathlib import Path

import pytest

# The test doubles beside these tests import as top-level modules (importlib mode).
sys.path.insert(0, str(Path(__file__).parent))

# Pipecat logs through loguru, whose default sink is the stderr of import time; under pytest's
# output capture that stream is replaced, so log to the real stderr, warnings and up only.
from loguru import logger

logger.remove()
logger.add(sys.__stderr__, level="WARNING")


@pytest.fixture(autouse=True)
def _no_voice_preload(monkeypatch: pytest.MonkeyPatch) -> None:
    """Apps built by tests do not load Whisper and hibari in the background (each would cost
    seconds of CPU); the tests of the preload turn it on explicitly."""
    monkeypatch.setenv("ANNIE_VOICE_VOICE_PRELOAD", "false")
