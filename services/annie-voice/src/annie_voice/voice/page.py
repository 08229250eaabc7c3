"""The voice client page served at `GET /` (plain HTML and JavaScript in the package; no build)."""

from __future__ import annotations

import importlib.resources
from functools import cache


@cache
def page_html() -> str:
    return (
        importlib.resources.files("annie_voice.voice")
        .joinpath("static", "voice.html")
        .read_text(encoding="utf-8")
    )
