"""No token and no private words in the logs of a real run.

The three services as real processes (`python -m …` at debug level, where uvicorn's access
log is on; stdout and stderr to a file each), and the dashboard's nginx (dashboard/nginx.conf,
its access-log format as compose runs it) in front of the engine where nginx is installed.
Requests carry the tokens every way a client may: the `X-Internal-Token` header, and on the
event stream `?token=` and the design's `?x_internal_token=` (right and wrong, a
percent-encoded name too), on other routes the query forms they refuse, the voice page's
`/?token=` and the audio pipeline's webhook `?token=`. Then every log is read for every
secret, and for the request lines themselves, so a run that logged nothing cannot pass.

Then the owner's words: a memory added, a search, a chat turn with Annie (who asks the engine
for context: httpx logs that request's URL at INFO), MCP calls (a search, a memory added, a
bad argument) and a wearable's webhook batch, each holding made-up words; no line at INFO or
above of any service may hold one of them (whatever library wrote it), nor a token.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from engine_harness import free_port
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from platform_harness import START_S, Service, platform
from platform_harness import until as _until
from service_process import tail

ROOT = Path(__file__).resolve().parents[1]
ENGINE_TOKEN = "engine-token-" + "e" * 19
AUDIO_TOKEN = "audio-token-" + "a" * 20
ANNIE_TOKEN = "annie-token-" + "n" * 20
WEBHOOK_TOKEN = "webhook-token-" + "w" * 18
WRONG = "wrong-token-" + "x" * 20  # a refused token must not be logged either
SECRETS = (ENGINE_TOKEN, AUDIO_TOKEN, ANNIE_TOKEN, WEBHOOK_TOKEN, WRONG)
LOG_WAIT_S = 30.0

pytestmark = pytest.mark.timeout(480)


@pytest.fixture(scope="module")
def services(
    postgres_server: tuple[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Service]]:
    """The context engine, the audio pipeline and Annie (talking to that engine), each a
    real process at debug level, started together."""
    root = tmp_path_factory.mktemp("token-logs")
    tokens = {"engine": ENGINE_TOKEN, "audio": AUDIO_TOKEN, "annie": ANNIE_TOKEN}
    with platform(
        postgres_server,
        root,
        tokens,
        common={"LOG_LEVEL": "debug", "LOG_FORMAT": "json"},
        extra={"audio": {"WEBHOOK_TOKEN": WEBHOOK_TOKEN}},
    ) as started:
        yield started


def _open_stream(client: httpx.Client, path: str, **kwargs: Any) -> int:
    """Open the event stream, read its first bytes when it answers 200, and hang up."""
    with client.stream("GET", path, **kwargs) as r:
        if r.status_code == 200:
            next(r.iter_bytes())
        return r.status_code


def _escaped(line: str) -> str:
    # The logs are JSON lines: a request line's quotes come escaped.
    return line.replace('"', '\\"')


def _logged(service: Service, lines: list[str]) -> str:
    """The service's log once it holds every one of `lines` (access lines are written as each
    response starts; a streamed one may trail its client), or after LOG_WAIT_S: the caller
    checks for secrets first, then for the lines, so a leak is reported as one."""
    wanted = [_escaped(x) for x in lines]
    deadline = time.monotonic() + LOG_WAIT_S
    while not all(x in service.text() for x in wanted) and time.monotonic() < deadline:
        time.sleep(0.1)
    return service.text()


def _assert_no_secret(name: str, text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"the {name} log holds a token:\n" + "\n".join(
            x for x in text.splitlines() if secret in x
        )


def test_no_service_logs_a_token(services: dict[str, Service]) -> None:
    engine, audio, annie = services["engine"], services["audio"], services["annie"]
    header = {"X-Internal-Token": ENGINE_TOKEN}
    with httpx.Client(base_url=engine.url, timeout=30) as c:
        # The chronicler answers 503 until it has warmed its ring.
        _until(
            "the engine's events",
            lambda: c.get("/v1/events", params={"limit": 1}, headers=header).status_code == 200,
            START_S,
            engine.log,
        )
        stream = "/v1/events/stream"
        assert _open_stream(c, stream, headers=header) == 200  # the dashboard's way
        assert _open_stream(c, stream, params={"x_internal_token": ENGINE_TOKEN}) == 200
        assert _open_stream(c, stream, params={"token": ENGINE_TOKEN, "creature": "chimera"}) == 200
        assert _open_stream(c, f"{stream}?%74oken={ENGINE_TOKEN}") == 200  # decoded by the route
        assert _open_stream(c, stream, params={"x_internal_token": WRONG}) == 401
        assert _open_stream(c, stream, headers={"X-Internal-Token": WRONG}) == 401
        # Other routes take the header only; a query token is refused, and still not logged.
        assert c.get("/v1/events", params={"token": ENGINE_TOKEN}).status_code == 401
        assert c.get("/v1/events", params={"x_internal_token": ENGINE_TOKEN}).status_code == 401
    with httpx.Client(base_url=audio.url, timeout=30) as c:
        assert c.get("/v1/status", headers={"X-Internal-Token": AUDIO_TOKEN}).status_code == 200
        assert c.get("/v1/status", params={"token": AUDIO_TOKEN}).status_code == 401
        assert c.get("/v1/status", headers={"X-Internal-Token": WRONG}).status_code == 401
        # Wearables cannot send headers: the webhook token rides in the URL by design.
        hook = c.post(
            "/webhook/transcript",
            params={"token": WEBHOOK_TOKEN, "uid": "device1", "session_id": "s1"},
            json=[],
        )
        assert hook.status_code != 401, hook.text
    with httpx.Client(base_url=annie.url, timeout=30) as c:
        ok = c.get("/v1/chat/sessions", headers={"X-Internal-Token": ANNIE_TOKEN})
        assert ok.status_code == 200
        assert (
            c.get("/v1/chat/sessions", params={"x_internal_token": ANNIE_TOKEN}).status_code == 401
        )
        # The voice page is opened once as /?token=… (it then keeps the token itself).
        assert c.get("/", params={"token": ANNIE_TOKEN}).status_code == 200

    # On /v1/ the access log drops the whole query (tokens and the owner's questions alike);
    # elsewhere only the token's value.
    expected = [
        (engine, [
            'GET /v1/events?[redacted] HTTP/1.1" 200',
            'GET /v1/events/stream HTTP/1.1" 200',
            'GET /v1/events/stream?[redacted] HTTP/1.1" 200',
            'GET /v1/events/stream?[redacted] HTTP/1.1" 401',
            'GET /v1/events/stream HTTP/1.1" 401',
            'GET /v1/events?[redacted] HTTP/1.1" 401',
        ]),
        (audio, [
            'GET /v1/status HTTP/1.1" 200',
            'GET /v1/status?[redacted] HTTP/1.1" 401',
            "POST /webhook/transcript?token=[redacted]&uid=device1&session_id=s1 HTTP/1.1",
        ]),
        (annie, [
            'GET /v1/chat/sessions HTTP/1.1" 200',
            'GET /v1/chat/sessions?[redacted] HTTP/1.1" 401',
            'GET /?token=[redacted] HTTP/1.1" 200',
        ]),
    ]  # fmt: skip
    for service, lines in expected:
        text = _logged(service, lines)
        _assert_no_secret(service.name, text)
        # The access log was written (and read): a run that logged nothing cannot pass.
        missing = [x for x in lines if _escaped(x) not in text]
        assert not missing, f"{service.name}'s log lacks {missing}:\n{tail(service.log)}"


# ---------------------------------------------------------------- the owner's words

# Made up, so that no log line can hold them by chance; each request carries some.
MEMORY = "Vellimor keeps the spare key under the quarzite heron planter."
QUESTION = "where does Vellimor keep the quarzite key"
CHAT = "What does Vellimor hide under the quarzite planter?"
MCP_MEMORY = "Ostrandel fixed the zumbrelia lamp on Sunday."
MCP_QUERY = "who fixed the zumbrelia lamp"
WEARABLE = "Tomorrow Orsandre collects the brindlewood parcel from the depot."
PRIVATE_WORDS = ("vellimor", "quarzite", "ostrandel", "zumbrelia", "orsandre", "brindlewood")
LOUD = {"info", "warning", "warn", "error", "critical", "exception"}


def _loud_lines(text: str) -> list[str]:
    """Lines at INFO or above: the JSON lines of those levels, and any line that is not JSON
    (a library writing past the formatter has no level we could trust)."""
    out = []
    for line in text.splitlines():
        try:
            level = str(json.loads(line).get("level", "")).lower()
        except (json.JSONDecodeError, AttributeError):
            out.append(line)
            continue
        if level in LOUD:
            out.append(line)
    return out


async def _mcp_calls(url: str) -> None:
    async with (
        httpx2.AsyncClient(headers={"X-Internal-Token": ENGINE_TOKEN}, timeout=120) as http,
        Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client,
    ):
        found = await client.call_tool("search_memory", {"query": MCP_QUERY})
        assert not found.is_error, found
        added = await client.call_tool("add_memory", {"episode_body": MCP_MEMORY})
        assert not added.is_error, added
        bad = await client.call_tool("search_memory", {"query": MCP_QUERY, "limit": "zumbrelia"})
        assert bad.is_error


def test_no_service_logs_the_owners_words(services: dict[str, Service]) -> None:
    engine, audio, annie = services["engine"], services["audio"], services["annie"]
    header = {"X-Internal-Token": ENGINE_TOKEN}
    with httpx.Client(base_url=engine.url, timeout=60) as c:
        assert c.post("/v1/memories", json={"text": MEMORY}, headers=header).status_code < 300
        assert c.get("/v1/context", params={"query": QUESTION}, headers=header).status_code == 200
    asyncio.run(_mcp_calls(engine.url))
    with httpx.Client(base_url=annie.url, timeout=120) as c:
        with c.stream(
            "POST", "/v1/chat", json={"message": CHAT}, headers={"X-Internal-Token": ANNIE_TOKEN}
        ) as r:
            assert r.status_code == 200
            said = "".join(r.iter_text())
        assert "done" in said, said
    with httpx.Client(base_url=audio.url, timeout=60) as c:
        hook = c.post(
            "/webhook/transcript",
            params={"token": WEBHOOK_TOKEN, "uid": "device2", "session_id": "s2"},
            json=[{"text": WEARABLE, "speaker_id": 1, "start": 0.0, "end": 3.0}],
        )
        assert hook.status_code == 200, hook.text
    # The batch reaches the engine (the shared transcripts folder) and is ingested there.
    with httpx.Client(base_url=engine.url, timeout=60) as c:
        _until(
            "the wearable's words to be searchable",
            lambda: (
                "brindlewood"
                in c.get(
                    "/v1/context", params={"query": "brindlewood parcel"}, headers=header
                ).text.lower()
            ),
            START_S,
            engine.log,
        )
    # Each service logged the requests it served (so a silent run cannot pass), and Annie's
    # request for context (httpx's INFO line) is there without its query.
    expected = [
        (engine, ['POST /v1/memories HTTP/1.1"', 'GET /v1/context?[redacted] HTTP/1.1" 200',
                  'POST /mcp HTTP/1.1"']),
        (annie, ['POST /v1/chat HTTP/1.1" 200', "/v1/context?[redacted]"]),
        (audio, ["POST /webhook/transcript?token=[redacted]&uid=device2&session_id=s2"]),
    ]  # fmt: skip
    for service, lines in expected:
        text = _logged(service, lines)  # a leak is reported as one, before what is missing
        loud = _loud_lines(text)
        leaks = [x for x in loud if any(w in x.lower() for w in PRIVATE_WORDS)]
        assert not leaks, f"{service.name} logs the owner's words:\n" + "\n".join(leaks[:10])
        _assert_no_secret(service.name, "\n".join(loud))
        missing = [x for x in lines if _escaped(x) not in "\n".join(loud)]
        assert not missing, f"{service.name}'s log lacks {missing}:\n{tail(service.log)}"


# ---------------------------------------------------------------- nginx (compose)

NGINX_CONF = ROOT / "dashboard" / "nginx.conf"
# Variables that would write the query string, the body, or a header (the token's, or a
# Referer: a page URL can hold `?token=`) into a log line; the User-Agent alone is kept.
LEAKY = {"$request", "$request_uri", "$args", "$query_string", "$is_args", "$request_body"}
LEAKY_PREFIXES = ("$arg_", "$http_", "$cookie_", "$sent_http_", "$upstream_http_")
HARMLESS = {"$http_user_agent"}


def test_nginx_access_log_format_has_no_query_string_or_header() -> None:
    conf = NGINX_CONF.read_text(encoding="utf-8")
    formats = dict(re.findall(r"log_format\s+(\S+)\s+((?:'[^']*'\s*)+);", conf))
    assert formats, "dashboard/nginx.conf defines its own log_format"
    used = re.findall(r"^\s*access_log\s+(\S+)\s+(\S+);", conf, re.M)
    assert used, "the server's access_log names a format (the image's default writes $request)"
    for _, fmt in used:
        variables = set(re.findall(r"\$\w+", formats[fmt])) - HARMLESS
        leaky = {v for v in variables if v in LEAKY or v.startswith(LEAKY_PREFIXES)}
        assert not leaky, f"log_format {fmt} writes {leaky}"
        assert "$uri" in variables


class _Upstream(BaseHTTPRequestHandler):
    """Stands in for the engine behind nginx: an event stream's first bytes."""

    def do_GET(self) -> None:
        if self.path.startswith("/v1/broken"):  # the engine dying mid-request: nginx's 502
            self.close_connection = True
            self.connection.close()
            return
        body = b": connected\n\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def _nginx_conf(site: str, port: int, engine_url: str, root: Path) -> str:
    """dashboard/nginx.conf as compose runs it, with this machine's port, files and engine."""
    site = site.replace("listen 5174;", f"listen 127.0.0.1:{port};")
    site = site.replace("root /usr/share/nginx/html;", f"root {root / 'html'};")
    site = re.sub(r"set \$engine http://[^;]+;", f"set $engine {engine_url};", site)
    site = re.sub(r"^\s*resolver [^;]+;", "", site, flags=re.M)  # an address: no lookup
    site = site.replace("/var/log/nginx/access.log", str(root / "access.log"))
    site = site.replace("/var/log/nginx/error.log", str(root / "error.log"))
    temp = "\n".join(
        f"    {kind}_temp_path {root / kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    user = "user root root;\n" if os.geteuid() == 0 else ""
    return (
        f"{user}daemon off;\npid {root / 'nginx.pid'};\nerror_log {root / 'error.log'} info;\n"
        f"events {{}}\nhttp {{\n{temp}\n    default_type application/octet-stream;\n{site}\n}}\n"
    )


def test_nginx_access_log_has_no_token(tmp_path: Path) -> None:
    """nginx in front of an event stream, as compose deploys it (compose runs nginx in its
    image; here it runs where the machine has nginx installed): its access log and its error
    log (the engine failing a request) hold no token."""
    nginx = shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx",) if Path(p).is_file()), None
    )
    if nginx is None:
        pytest.skip("nginx is not installed (compose runs it in its own image)")
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    (tmp_path / "html").mkdir()
    (tmp_path / "html" / "index.html").write_text("<!doctype html><title>aquarium</title>")
    port = free_port()
    conf = tmp_path / "nginx.conf"
    engine_url = f"http://127.0.0.1:{upstream.server_address[1]}"
    conf.write_text(_nginx_conf(NGINX_CONF.read_text(encoding="utf-8"), port, engine_url, tmp_path))
    log = tmp_path / "nginx.out"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [nginx, "-c", str(conf), "-p", str(tmp_path)], stdout=out, stderr=out
        )
    access = tmp_path / "access.log"
    try:
        base = f"http://127.0.0.1:{port}"

        def up() -> bool:
            assert proc.poll() is None, tail(log) + tail(tmp_path / "error.log")
            try:
                return httpx.get(base + "/healthz", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        _until("nginx to answer", up, 60, log)
        with httpx.Client(base_url=base, timeout=10) as c:
            assert c.get("/", params={"token": ENGINE_TOKEN}).status_code == 200
            stream = "/v1/events/stream"
            assert c.get(stream, params={"x_internal_token": ENGINE_TOKEN}).status_code == 200
            assert c.get(stream, params={"token": WRONG, "creature": "chimera"}).status_code == 200
            assert c.get(stream, headers={"X-Internal-Token": ENGINE_TOKEN}).status_code == 200
            assert c.get("/v1/events", params={"token": ENGINE_TOKEN}).status_code == 200
            # nginx's error log (at info here) would write this request line, token and all.
            assert c.get("/v1/broken", params={"x_internal_token": ENGINE_TOKEN}).status_code == 502
        _until(
            "nginx's access lines",
            lambda: access.exists() and access.read_text().count('"GET /v1/') >= 5,
            LOG_WAIT_S,
            access,
        )
    finally:
        proc.send_signal(signal.SIGQUIT)  # graceful: the access log is complete
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(20)
        upstream.shutdown()
    text = access.read_text()
    for name, body in (
        ("access", text),
        ("error", (tmp_path / "error.log").read_text()),
        ("output", log.read_text()),
    ):
        _assert_no_secret(f"nginx {name}", body)
    assert '"GET /v1/events/stream HTTP/1.1" 200' in text
    assert '"GET /v1/events HTTP/1.1" 200' in text
    assert '"GET /v1/broken HTTP/1.1" 502' in text
    assert '"GET /index.html HTTP/1.1" 200' in text  # `/?token=…`, as served ($uri)
