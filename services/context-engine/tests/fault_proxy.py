"""A TCP proxy test double that injects faults between the engine and a real server.

`FaultProxyDouble` listens on a loopback port and forwards to the real server (TCP or a Unix
socket). Its `mode` is the fault:
- "pass": bytes flow both ways;
- "down": every open connection is cut and new ones are closed at once (the server died);
- "hang": connections are accepted and nothing is forwarded (a server that stopped
  answering, past every timeout).
Going back to "pass" is the server recovering: new connections work again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Literal

Mode = Literal["pass", "down", "hang"]


class FaultProxyDouble:
    def __init__(self, *, host: str | None = None, port: int | None = None,
                 unix_path: str | None = None) -> None:  # fmt: skip
        assert (host and port) or unix_path
        self.upstream = (host, port, unix_path)
        self.mode: Mode = "pass"
        self.port = 0
        self._server: asyncio.Server | None = None
        self._links: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter | None]] = set()
        self.connections = 0

    async def start(self, port: int = 0) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", port)
        self.port = self._server.sockets[0].getsockname()[1]

    def set(self, mode: Mode) -> None:
        self.mode = mode
        if mode != "pass":
            for client, upstream in list(self._links):
                for w in (client, upstream):
                    if w is not None:
                        w.close()
            self._links.clear()

    async def stop(self) -> None:
        self.set("down")
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        if self.mode == "down":
            writer.close()
            return
        if self.mode == "hang":
            link: tuple[asyncio.StreamWriter, asyncio.StreamWriter | None] = (writer, None)
            self._links.add(link)
            with contextlib.suppress(Exception):
                await reader.read()  # hold the connection open, answer nothing
            self._links.discard(link)
            writer.close()
            return
        host, port, unix_path = self.upstream
        try:
            if unix_path:
                up_reader, up_writer = await asyncio.open_unix_connection(unix_path)
            else:
                up_reader, up_writer = await asyncio.open_connection(host, port)
        except OSError:
            writer.close()
            return
        link = (writer, up_writer)
        self._links.add(link)

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(Exception):
                while data := await src.read(65536):
                    if self.mode != "pass":  # a fault began: forward nothing more
                        break
                    dst.write(data)
                    await dst.drain()
            # One side closed: close the other (a client waiting for the server to hang up
            # after its goodbye would otherwise wait for ever).
            dst.close()

        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))
        self._links.discard(link)
        for w in (writer, up_writer):
            w.close()


@contextlib.asynccontextmanager
async def fault_proxy(**upstream: object) -> AsyncIterator[FaultProxyDouble]:
    proxy = FaultProxyDouble(**upstream)  # type: ignore[arg-type]
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.stop()
