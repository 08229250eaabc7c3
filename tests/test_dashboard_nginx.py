"""docker-compose serves the Aquarium with nginx (dashboard/nginx.conf): the page's /v1 calls,
the event stream included, must reach the compose service `context-engine`, unbuffered."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NGINX = (REPO / "dashboard" / "nginx.conf").read_text(encoding="utf-8")


def _location(path: str) -> str:
    match = re.search(r"location " + re.escape(path) + r" \{(.*?)\n    \}", NGINX, re.S)
    assert match, f"no `location {path}` in nginx.conf"
    return match.group(1)


def test_v1_is_proxied_to_the_compose_engine_service() -> None:
    compose = (REPO / "docker-compose.yml").read_text(encoding="utf-8")
    assert re.search(r"^  context-engine:$", compose, re.M), "the engine's compose service"
    found = re.search(r'^      CONTEXT_ENGINE_PORT: "(\d+)"$', compose, re.M)
    assert found, "the engine's port in docker-compose.yml"
    port = found.group(1)
    assert re.search(rf"set \$engine http://context-engine:{port};", NGINX)
    # Looked up per request (Docker's DNS), so nginx starts before the engine does.
    assert "resolver 127.0.0.11" in NGINX
    assert "proxy_pass $engine;" in _location("/v1/")


def test_the_event_stream_is_not_buffered_or_cut_short() -> None:
    v1 = _location("/v1/")
    for directive in (
        "proxy_buffering off;",
        "proxy_cache off;",
        "proxy_http_version 1.1;",
        'proxy_set_header Connection "";',
        "gzip off;",
    ):
        assert directive in v1, directive
    read_timeout = re.search(r"proxy_read_timeout (\d+)([smh]);", v1)
    assert read_timeout, "the stream needs a read timeout longer than its 15 s keepalive"
    value, unit = int(read_timeout.group(1)), read_timeout.group(2)
    assert value * {"s": 1, "m": 60, "h": 3600}[unit] > 15
