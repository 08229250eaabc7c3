"""Debian's Chromium for the browser tests (Playwright with executable_path: no browser is
ever downloaded) and the guide's launch flags (../shared/docs/architecture-guide.md,
"Browsers")."""

from __future__ import annotations

from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
