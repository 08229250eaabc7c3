"""Refuse query parameters a route does not declare.

FastAPI ignores a query parameter no route parameter names, so a misspelt filter
(`?sweeep=false`, `?speakr=asha`) silently does nothing and the client gets an answer to a
question it did not ask. `forbid_unknown_query()` is a dependency for a router (or a route)
that turns such a parameter into a 422 in FastAPI's own validation-error shape.

The names a route accepts are read from its dependant tree (its own parameters, its
dependencies' and its router's), so declaring a parameter is all a route needs to do.
Parameters read from `request.query_params` by hand (the token of `require_token(...,
allow_query=True)`) are not declared: pass them as `allow`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from fastapi import Request
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel


def declared_query_names(dependant: Dependant) -> frozenset[str]:
    """Every query parameter name of a dependant and its sub-dependencies (a pydantic model
    used as the query contributes its fields' aliases)."""
    names: set[str] = set()
    stack, seen = [dependant], set()
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        for field in current.query_params:
            annotation = field.field_info.annotation
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                names.update(f.alias or n for n, f in annotation.model_fields.items())
            else:
                names.add(field.alias)
        stack.extend(current.dependencies)
    return frozenset(names)


def forbid_unknown_query(*, allow: Iterable[str] = ()) -> Callable[[Request], Awaitable[None]]:
    """A dependency: 422 for a query parameter the matched route does not declare (nor
    `allow`). Put it after the auth dependency, so an unauthenticated request gets 401."""
    extra = frozenset(allow)
    # Names per route, computed once. Keyed by id (routes are not hashable), the route kept
    # beside its names so a recycled id is never mistaken for it.
    cache: dict[int, tuple[Any, frozenset[str]]] = {}

    async def dependency(request: Request) -> None:
        route = request.scope.get("route")
        dependant = getattr(route, "dependant", None)
        if dependant is None:  # not a FastAPI route: nothing declared to compare with
            return
        cached = cache.get(id(route))
        if cached is None or cached[0] is not route:
            cached = cache[id(route)] = (route, declared_query_names(dependant) | extra)
        known = cached[1]
        unknown = [k for k in dict.fromkeys(request.query_params.keys()) if k not in known]
        if unknown:
            accepted = ", ".join(sorted(known - extra)) or "none"
            raise RequestValidationError(
                [
                    {
                        "type": "extra_forbidden",
                        "loc": ("query", name),
                        # No "input": the value is not echoed (it may be a misplaced secret).
                        "msg": f"Unknown query parameter (this route accepts: {accepted})",
                    }
                    for name in unknown
                ]
            )

    return dependency
