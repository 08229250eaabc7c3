"""Annie answers a spoken question from memory, end to end, in a real browser.

A conversation is ingested into a real context engine (real PostgreSQL); Debian's Chromium
opens Annie's page, and its fake microphone plays a question that hibari-tts spoke; Annie's
reply arrives over WebRTC, is captured in the page, transcribed with the bundled Whisper base
model, and must say the remembered fact. Everything runs in a network namespace this test
creates (tests/voice_e2e.py). Screenshot: test-artifacts/voice/answer.png.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from voice_e2e import CHROMIUM, FACT, HEARD_KEYWORDS, namespace_command, run_in_namespace

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts" / "voice"

pytestmark = pytest.mark.timeout(600)


def _unavailable(reason: str) -> None:
    """Skip where the browser stack or namespaces are missing on a developer's machine; in CI
    the project's own files install them, so their absence is a failure."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (scripts/bootstrap.sh installs it)")
    pytest.skip(reason)


def test_annie_answers_a_spoken_question_from_memory_in_chromium(tmp_path: Path) -> None:
    pytest.importorskip("playwright.async_api")
    if not CHROMIUM.exists():
        _unavailable("Debian's chromium is not installed (deploy/apt-packages.txt)")
    if namespace_command() is None:
        _unavailable("cannot create a network namespace (unshare -n or -rn)")
    result = run_in_namespace({"mode": "answer", "workdir": str(tmp_path)}, tmp_path, 540)
    shot = tmp_path / "voice.png"
    if shot.exists():
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, ARTIFACTS / "answer.png")

    heard = result["question_heard"].lower()
    assert all(word in heard for word in HEARD_KEYWORDS), result
    assert result["briefing"]["status"] == "ok", result  # briefed from memory at connect
    # What Annie meant to say, and what came out of the browser's speaker.
    assert FACT in result["reply_text"].lower(), result
    assert FACT in result["reply_heard"].lower(), result
