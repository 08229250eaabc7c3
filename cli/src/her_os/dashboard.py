"""The Aquarium dashboard as a component of `her-os up`: the built dashboard (dashboard/dist)
served by Vite's preview server, which proxies /v1 (the event stream included) to the context
engine, so the page talks to its own origin. `make up` builds it first; without a build, its
npm packages or Node.js, `up` says so and runs without it.

The browser tests (tests/test_dashboard_browser.py) serve the dashboard through these same
functions."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import httpx

from her_os.config import Settings
from her_os.health import Probe

NAME = "dashboard"
TITLE = "her-os Aquarium"  # in index.html: tells our page from anything else on the port


def default_dir() -> Path:
    """dashboard/ of the checkout this CLI runs from (cli/src/her_os/ -> repository root)."""
    return Path(__file__).resolve().parents[3] / "dashboard"


@dataclass(frozen=True)
class Server:
    """What serving needs: Node.js, Vite from the project's node_modules, the project."""

    node: str
    vite: Path
    project: Path

    def argv(self, host: str, port: int) -> list[str]:
        # `vite preview <root>` serves <root>/dist with <root>/vite.config.ts (its proxy).
        return [
            self.node,
            str(self.vite),
            "preview",
            str(self.project),
            "--host",
            host,
            "--port",
            str(port),
            "--strictPort",
        ]


class NotServable(Exception):
    """The dashboard cannot be served here; the message says why and what to run."""


def locate(project: Path | None = None) -> Server:
    project = (project or default_dir()).resolve()
    if not (project / "package.json").is_file():
        raise NotServable(f"no dashboard project at {project}")
    if not (project / "dist" / "index.html").is_file():
        raise NotServable(
            f"the dashboard is not built ({project / 'dist'} is missing): "
            "`make up` builds it, or run `npm run build` in dashboard/"
        )
    node = shutil.which("node")
    if node is None:
        raise NotServable("Node.js is not installed (`node` is not on PATH)")
    vite = project / "node_modules" / "vite" / "bin" / "vite.js"
    if not vite.is_file():
        raise NotServable(
            "the dashboard's npm packages are not installed: run `scripts/bootstrap.sh --node`"
        )
    return Server(node, vite, project)


def server_env(engine_url: str, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of the preview server: where its /v1 proxy sends requests."""
    env = dict(os.environ if base is None else base)
    env["HER_OS_ENGINE_URL"] = engine_url
    env["NO_COLOR"] = "1"  # plain log lines in data/logs/dashboard.log
    return env


def probe(url: str, timeout: float = 2.0) -> Probe:
    """GET the page: healthy when it is the Aquarium's."""
    try:
        response = httpx.get(url, timeout=timeout)
    except httpx.HTTPError as exc:
        return Probe(False, f"unreachable ({type(exc).__name__})")
    if response.status_code == 200 and TITLE in response.text:
        return Probe(True, "ok")
    return Probe(False, f"HTTP {response.status_code}")


def url(settings: Settings, host: str, port: int | None = None) -> str:
    return f"http://{host}:{port or settings.dashboard_port}/"
