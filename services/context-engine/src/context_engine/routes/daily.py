"""GET /v1/daily: the reflection of a local day (daily.py does the work)."""

from __future__ import annotations

from datetime import date
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query

from context_engine.memory.daily import FutureDayError, local_today
from context_engine.routes.deps import ReflectorDep
from context_engine.routes.schemas import DailyReflectionPage

router = APIRouter(tags=["daily"])


def _bad_date(msg: str) -> HTTPException:
    # FastAPI's own validation-error shape, so clients read every 422 the same way.
    return HTTPException(
        status_code=422, detail=[{"loc": ["query", "date"], "msg": msg, "type": "value_error"}]
    )


@router.get(
    "/daily",
    response_model=DailyReflectionPage,
    summary="The reflection of a day (made when first asked, or when its inputs changed)",
    responses={422: {"description": "a malformed date, or a day that has not begun"}},
)
async def get_daily(
    reflector: ReflectorDep,
    day: Annotated[
        str | None,
        Query(
            alias="date",
            pattern=r"^\d{4}-\d{2}-\d{2}$",
            description="YYYY-MM-DD, a local day in CONTEXT_ENGINE_TIMEZONE; default today",
        ),
    ] = None,
) -> DailyReflectionPage:
    if day is None:
        wanted = local_today(reflector.settings.timezone)
    else:
        try:
            wanted = date.fromisoformat(day)
        except ValueError:
            raise _bad_date(f"{day!r} is not a calendar date") from None
    try:
        reflection = await reflector.reflect(wanted)
    except FutureDayError as exc:
        raise _bad_date(str(exc)) from None
    return DailyReflectionPage.model_validate(reflection.as_dict())
