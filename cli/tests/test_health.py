"""`http_health`: what the CLI counts as a healthy service (`her-os up`, `status`)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from her_os.health import http_health


@pytest.fixture
def health_server() -> Iterator[tuple[str, list[tuple[int, object]]]]:
    """A local HTTP server answering /health with whatever the test puts in `answer`."""
    answer: list[tuple[int, object]] = [(200, {"status": "ok"})]

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status, body = answer[0]
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/health", answer
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("status", "body", "healthy", "detail"),
    [
        (200, {"status": "ok"}, True, "ok"),
        (200, {"status": "degraded", "degraded": ["graph", "llm"]}, True, "degraded: graph, llm"),
        (503, {"status": "unavailable"}, False, "HTTP 503"),
        (200, {"status": "starting"}, False, "HTTP 200"),
        (200, ["not", "an", "object"], False, "HTTP 200"),
    ],
)
def test_serving_counts_as_healthy_and_says_what_is_degraded(
    health_server: tuple[str, list[tuple[int, object]]],
    status: int,
    body: object,
    healthy: bool,
    detail: str,
) -> None:
    url, answer = health_server
    answer[0] = (status, body)
    probe = http_health(url)
    assert (probe.healthy, probe.detail) == (healthy, detail)


def test_an_unreachable_service_is_not_healthy() -> None:
    probe = http_health("http://127.0.0.1:1/health", timeout=0.5)
    assert not probe.healthy and probe.detail.startswith("unreachable")
