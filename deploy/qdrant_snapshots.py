"""Snapshot every Qdrant collection into one tar on stdout, or restore them from one on stdin.

Run by deploy/backup.sh and deploy/restore.sh inside a context-engine container (which can
reach http://qdrant:6333 on the compose network), with the standard library only:

    python -c "$(cat deploy/qdrant_snapshots.py)" backup  > qdrant.tar
    python -c "$(cat deploy/qdrant_snapshots.py)" restore < qdrant.tar

It uses Qdrant's snapshot API: POST /collections/{name}/snapshots makes a consistent snapshot
of a live collection, GET …/snapshots/{file} downloads it, DELETE removes it from the server
afterwards; POST /collections/{name}/snapshots/upload?priority=snapshot recreates a
collection from one. CONTEXT_ENGINE_QDRANT_URL and CONTEXT_ENGINE_QDRANT_API_KEY (when set)
say where Qdrant is, as for the engine itself.
"""

from __future__ import annotations

import io
import json
import os
import sys
import tarfile
import urllib.parse
import urllib.request
import uuid
from typing import Any

CHUNK = 1 << 20


def _base() -> str:
    return os.environ.get("CONTEXT_ENGINE_QDRANT_URL", "http://qdrant:6333").rstrip("/")


def _request(method: str, path: str, body: bytes | None = None, headers: dict | None = None) -> Any:
    url = _base() + path
    if not url.startswith(("http://", "https://")):
        raise SystemExit(f"not an http(s) Qdrant URL: {url}")
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})  # noqa: S310
    key = os.environ.get("CONTEXT_ENGINE_QDRANT_API_KEY")
    if key:
        req.add_header("api-key", key)
    return urllib.request.urlopen(req, timeout=600)  # noqa: S310 - scheme checked above


def _json(method: str, path: str) -> Any:
    with _request(method, path) as response:
        return json.load(response)["result"]


def backup(out: io.BufferedWriter) -> list[str]:
    names = [c["name"] for c in _json("GET", "/collections")["collections"]]
    with tarfile.open(fileobj=out, mode="w|") as tar:
        for name in names:
            quoted = urllib.parse.quote(name, safe="")
            snapshot = _json("POST", f"/collections/{quoted}/snapshots?wait=true")["name"]
            path = f"/collections/{quoted}/snapshots/{urllib.parse.quote(snapshot, safe='')}"
            with _request("GET", path) as response:
                size = int(response.headers["Content-Length"])
                info = tarfile.TarInfo(f"{name}.snapshot")
                info.size = size
                tar.addfile(info, response)
            _json("DELETE", path)
    return names


def restore(source: io.BufferedReader) -> list[str]:
    restored = []
    with tarfile.open(fileobj=source, mode="r|") as tar:
        for member in tar:
            if not member.isfile() or not member.name.endswith(".snapshot"):
                continue
            name = member.name.removesuffix(".snapshot")
            data = tar.extractfile(member)
            assert data is not None
            boundary = uuid.uuid4().hex
            head = (
                f'--{boundary}\r\nContent-Disposition: form-data; name="snapshot"; '
                f'filename="{name}.snapshot"\r\nContent-Type: application/octet-stream\r\n\r\n'
            ).encode()
            body = head + data.read() + f"\r\n--{boundary}--\r\n".encode()
            quoted = urllib.parse.quote(name, safe="")
            with _request(
                "POST",
                f"/collections/{quoted}/snapshots/upload?priority=snapshot&wait=true",
                body,
                {"Content-Type": f"multipart/form-data; boundary={boundary}"},
            ) as response:
                json.load(response)
            restored.append(name)
    return restored


def main(argv: list[str]) -> int:
    if argv[1:] == ["backup"]:
        names = backup(sys.stdout.buffer)
        print(f"qdrant: {len(names)} collection(s) snapshotted: {names}", file=sys.stderr)
        return 0
    if argv[1:] == ["restore"]:
        names = restore(sys.stdin.buffer)
        print(f"qdrant: {len(names)} collection(s) restored: {names}", file=sys.stderr)
        return 0
    print("usage: qdrant_snapshots.py backup|restore", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
