"""SSRF guard for fetch_webpage: only public internet addresses may be reached.

The check runs where the socket is made, not on the URL: `GuardedBackend` (an httpcore network
backend) resolves the host itself, refuses the connection unless every resolved address is
public, and connects to the vetted IP. So DNS rebinding (a name that resolves public for a check
and private for the connect) has no second lookup to exploit, odd IP spellings (2130706433,
0x7f.0.0.1, 017700000001) are judged by what they resolve to, and every redirect hop and every
new connection is checked the same way. TLS SNI and the Host header still carry the URL's
hostname (httpcore takes them from the request's origin, not from the address connected to).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import httpcore
import httpx
from httpcore._backends.auto import AutoBackend

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# host, port -> the addresses the host resolves to
Resolver = Callable[[str, int], Awaitable[list[IPAddress]]]
AddressPolicy = Callable[[IPAddress], bool]


_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


class BlockedAddressError(httpx.TransportError):
    """The destination is not a public internet address (loopback, private, link-local, ...)."""


async def system_resolver(host: str, port: int) -> list[IPAddress]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    # IPv6 sockaddr[0] may carry a zone ("fe80::1%eth0"); the zone is not part of the address.
    return [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]


def is_public_address(ip: IPAddress) -> bool:
    """True only for globally routable unicast addresses."""
    if isinstance(ip, ipaddress.IPv6Address):
        # ::ffff:127.0.0.1 and friends reach the IPv4 address: judge that.
        mapped = ip.ipv4_mapped or ip.sixtofour
        if mapped is not None:
            return is_public_address(mapped)
        if ip.teredo is not None:
            return False
        if ip in _NAT64:  # 64:ff9b::a00:1 is 10.0.0.1 through a NAT64 gateway
            return is_public_address(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    return not (
        ip.is_loopback
        or ip.is_private  # RFC 1918, ULA fc00::/7, 100.64/10 shared address space, ...
        or ip.is_link_local  # 169.254/16 (cloud metadata), fe80::/10
        or ip.is_unspecified  # 0.0.0.0, ::
        or ip.is_multicast
        or ip.is_reserved
        or not ip.is_global
    )


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """Resolves, vets and pins: connect_tcp only ever dials an address the policy allows."""

    def __init__(self, resolver: Resolver, allow: AddressPolicy) -> None:
        self._resolver = resolver
        self._allow = allow
        self._inner = AutoBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        ip = await vet_host(host, port, self._resolver, self._allow)
        return await self._inner.connect_tcp(
            str(ip), port, timeout=timeout, local_address=local_address,
            socket_options=socket_options,
        )  # fmt: skip

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        socket_options: Any = None,
    ) -> httpcore.AsyncNetworkStream:
        raise BlockedAddressError("unix sockets are not allowed")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


async def vet_host(host: str, port: int, resolver: Resolver, allow: AddressPolicy) -> IPAddress:
    host = host.strip("[]")
    try:
        addresses = await resolver(host, port)
    except (OSError, ValueError) as exc:
        raise httpx.ConnectError(f"cannot resolve {host}: {exc}") from exc
    if not addresses:
        raise httpx.ConnectError(f"cannot resolve {host}")
    # All must pass: a name with one public and one private answer is still refused, so the
    # choice of address cannot be steered toward the private one.
    refused = [ip for ip in addresses if not allow(ip)]
    if refused:
        raise BlockedAddressError(
            f"{host} resolves to {refused[0]}, which is not a public internet address"
        )
    return addresses[0]


class GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx transport whose connections all go through GuardedBackend."""

    def __init__(self, resolver: Resolver, allow: AddressPolicy) -> None:
        super().__init__(trust_env=False, retries=0)
        # httpx 0.28 does not take a network backend: swap its pool for one that uses ours
        # (tests/test_tools_fetch.py proves every connection goes through the guard).
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(),
            max_connections=10,
            max_keepalive_connections=0,
            network_backend=GuardedBackend(resolver, allow),
        )
