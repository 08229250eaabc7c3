"""deploy/qdrant_snapshots.py, run as deploy/backup.sh and restore.sh run it, against a test
double of Qdrant's snapshot API (no Qdrant server binary exists in any registry here; the
double follows Qdrant's documented routes and answers, on 127.0.0.1 only)."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import tarfile
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "deploy" / "qdrant_snapshots.py"
API_KEY = "test-api-key"


class QdrantDouble(ThreadingHTTPServer):
    """Collections as snapshot bytes; every request recorded as (method, path, query)."""

    def __init__(self, collections: dict[str, bytes]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.collections = dict(collections)
        self.snapshots: dict[str, bytes] = {}  # file name -> bytes, while it exists
        self.requests: list[tuple[str, str, dict]] = []
        self.keys: set[str | None] = set()
        self.listed_only: list[str] = []  # names GET /collections lists without having them

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: QdrantDouble

    def log_message(self, *args: object) -> None:
        pass

    def _answer(self, status: int, payload: object = None, raw: bytes | None = None) -> None:
        body = raw if raw is not None else json.dumps({"result": payload, "status": "ok"}).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _route(self, method: str) -> None:
        parts = urlsplit(self.path)
        path, query = unquote(parts.path), parse_qs(parts.query)
        self.server.requests.append((method, path, query))
        self.server.keys.add(self.headers.get("api-key"))
        srv = self.server
        if method == "GET" and path == "/collections":
            names = [*srv.collections, *srv.listed_only]
            return self._answer(200, {"collections": [{"name": n} for n in names]})
        match = re.fullmatch(r"/collections/([^/]+)/snapshots(?:/(.+))?", path)
        if not match or (match[1] not in srv.collections and match[2] != "upload"):
            return self._answer(404, raw=b'{"status": {"error": "not found"}}')
        name, file = match[1], match[2]
        if method == "POST" and file is None:
            snapshot = f"{name}-1.snapshot"
            srv.snapshots[snapshot] = srv.collections[name]
            return self._answer(200, {"name": snapshot, "size": len(srv.snapshots[snapshot])})
        if method == "GET" and file in srv.snapshots:
            return self._answer(200, raw=srv.snapshots[file])
        if method == "DELETE" and file in srv.snapshots:
            del srv.snapshots[file]
            return self._answer(200, True)
        if method == "POST" and file == "upload":
            body = self.rfile.read(int(self.headers["Content-Length"]))
            boundary = self.headers["Content-Type"].split("boundary=", 1)[1].encode()
            part = body.split(b"--" + boundary)[1]
            head, content = part.split(b"\r\n\r\n", 1)
            assert b'name="snapshot"' in head
            srv.collections[name] = content.removesuffix(b"\r\n")
            return self._answer(200, True)
        return self._answer(400, raw=b'{"status": {"error": "bad request"}}')

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def do_DELETE(self) -> None:
        self._route("DELETE")


@pytest.fixture
def qdrant() -> Iterator[Callable[[dict[str, bytes]], QdrantDouble]]:
    servers: list[QdrantDouble] = []

    def start(collections: dict[str, bytes]) -> QdrantDouble:
        server = QdrantDouble(collections)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def run(server: QdrantDouble, action: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXT_ENGINE_")}
    env |= {"CONTEXT_ENGINE_QDRANT_URL": server.url, "CONTEXT_ENGINE_QDRANT_API_KEY": API_KEY}
    # Exactly as deploy/backup.sh runs it: the script's text through `python -c`.
    return subprocess.run(
        [sys.executable, "-c", SCRIPT.read_text(encoding="utf-8"), action],
        input=stdin, capture_output=True, env=env, timeout=60, check=False,
    )  # fmt: skip


def test_backup_then_restore_into_an_empty_qdrant(qdrant) -> None:
    source = qdrant({"her_os_qwen3-embedding_1024": os.urandom(300_000), "other": b"tiny"})
    done = run(source, "backup")
    assert done.returncode == 0, done.stderr
    assert b"2 collection(s) snapshotted" in done.stderr
    with tarfile.open(fileobj=io.BytesIO(done.stdout), mode="r|") as tar:
        got = {m.name: tar.extractfile(m).read() for m in tar}
    assert got == {f"{n}.snapshot": data for n, data in source.collections.items()}
    assert source.snapshots == {}  # removed from the server after the download
    assert source.keys == {API_KEY}

    target = qdrant({})
    done = run(target, "restore", stdin=done.stdout)
    assert done.returncode == 0, done.stderr
    assert target.collections == source.collections
    uploads = [r for r in target.requests if r[1].endswith("/snapshots/upload")]
    assert len(uploads) == 2
    assert all(r[2]["priority"] == ["snapshot"] for r in uploads)
    assert target.keys == {API_KEY}


def test_a_failing_qdrant_fails_the_backup(qdrant) -> None:
    server = qdrant({"c": b"x"})
    server.listed_only = ["vanished"]  # listed, but gone when the snapshot is asked for
    done = run(server, "backup")
    assert done.returncode != 0
    assert b"HTTP Error 404" in done.stderr


def test_usage() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2 and "usage" in done.stderr
