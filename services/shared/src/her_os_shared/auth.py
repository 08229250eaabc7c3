"""The auth rule: every /v1 route requires the internal token, compared in constant time.

A client sends it as `X-Internal-Token: <token>`, or as `Authorization: Bearer <token>` (the
header most HTTP clients and wearable SDKs can set); when both are sent, `X-Internal-Token` is
the one that counts. Headers are never logged (uvicorn's access log prints the request line
only), so neither form reaches a log.

A service refuses to start without a token unless the explicit development setting
`*_ALLOW_INSECURE_NO_TOKEN=true` is given.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable

from fastapi import HTTPException, Request, status
from pydantic import SecretStr

TOKEN_HEADER = "X-Internal-Token"  # noqa: S105 (a header name, not a secret)
AUTHORIZATION_HEADER = "Authorization"
BEARER_SCHEME = "Bearer"
# The query parameters a route may also take the token from, for clients that cannot set
# headers (a browser's EventSource): `token`, and `x_internal_token` as the design's API
# reference writes it. Query strings reach access logs: logging.py redacts both (its
# REDACTED_PARAMS), and the dashboard sends the header instead.
TOKEN_QUERY = "token"  # noqa: S105 (a parameter name, not a secret)
TOKEN_QUERY_DESIGN = "x_internal_token"  # noqa: S105 (a parameter name, not a secret)
TOKEN_QUERY_PARAMS = (TOKEN_QUERY, TOKEN_QUERY_DESIGN)
MIN_TOKEN_CHARS = 16


class TokenConfigError(RuntimeError):
    """The service was asked to start without a usable token."""


def check_token_config(
    token: SecretStr | None, allow_insecure: bool, token_env: str, allow_env: str
) -> None:
    """Raise TokenConfigError unless a usable token is set or insecure mode is explicit."""
    if token is None or not token.get_secret_value():
        if allow_insecure:
            return
        raise TokenConfigError(
            f"no internal token: set {token_env} (at least {MIN_TOKEN_CHARS} characters), "
            f"or {allow_env}=true for local development only"
        )
    if len(token.get_secret_value()) < MIN_TOKEN_CHARS:
        raise TokenConfigError(
            f"{token_env} is too short: use at least {MIN_TOKEN_CHARS} characters"
        )


def token_matches(provided: str | None, expected: str) -> bool:
    """Constant-time comparison; a missing token never matches."""
    if provided is None:
        return False
    return hmac.compare_digest(provided.encode("utf-8"), expected.encode("utf-8"))


def bearer_credentials(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header's value (the scheme's case does
    not matter, RFC 9110); None when there is no such header or it names another scheme."""
    if authorization is None:
        return None
    scheme, _, credentials = authorization.strip().partition(" ")
    if scheme.lower() != BEARER_SCHEME.lower():
        return None
    return credentials.strip()


def header_token(request: Request) -> str | None:
    """The token a request carries in a header: `X-Internal-Token`, else the Bearer token of
    `Authorization` (None: neither)."""
    provided = request.headers.get(TOKEN_HEADER)
    if provided is None:
        provided = bearer_credentials(request.headers.get(AUTHORIZATION_HEADER))
    return provided


AuthFailureHook = Callable[[Request, str], Awaitable[None]]


def require_token(
    expected: SecretStr | None,
    on_failure: AuthFailureHook | None = None,
    *,
    allow_query: bool = False,
) -> Callable[[Request], Awaitable[None]]:
    """A FastAPI dependency enforcing the token. `expected=None` means insecure dev mode.
    The token is read from `X-Internal-Token`, else from `Authorization: Bearer` (header_token).
    `allow_query`: a request without either header may give the token as `?token=` or
    `?x_internal_token=` instead (a header, when present, is the one that counts)."""
    where = f"{TOKEN_HEADER} header" + (f" or {TOKEN_QUERY} parameter" if allow_query else "")

    async def dependency(request: Request) -> None:
        if expected is None:
            return
        provided = header_token(request)
        if provided is None and allow_query:
            for name in TOKEN_QUERY_PARAMS:
                provided = request.query_params.get(name)
                if provided is not None:
                    break
        if token_matches(provided, expected.get_secret_value()):
            return
        reason = "missing" if provided is None else "invalid"
        if on_failure is not None:
            await on_failure(request, reason)
        raise HTTPException(
            status_code=status.HTTP_401_UNAUTHORIZED,
            detail=f"{reason} {where}",
            # RFC 6750: a refusal names the scheme the client may use.
            headers={"WWW-Authenticate": BEARER_SCHEME},
        )

    return dependency
