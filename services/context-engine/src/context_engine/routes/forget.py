"""Forgetting: DELETE /v1/sessions/{id}, DELETE /v1/entities/{id}, POST /v1/forget (a person
by name), GET /v1/forget (the latest requests: Annie drops what she holds when they change),
GET /v1/forget/{request_id}. The work is in forget.py (ADR 0013)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Path, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from context_engine.privacy.forget import MIN_NAME_CHARS, ForgetQueueFn, Forgetter, Target
from context_engine.routes.deps import ForgetQueue, ForgetterDep, SessionIdPath
from context_engine.routes.entities import EntityId

router = APIRouter(tags=["forget"])

WaitS = Annotated[
    float, Query(ge=0, le=600, description="seconds to wait for every store (then 202)")
]


class ForgetPerson(BaseModel):
    # No NUL: PostgreSQL text cannot hold one (it was a 500; found by schemathesis).
    person: str = Field(
        min_length=MIN_NAME_CHARS,
        max_length=200,
        pattern=r"^[^\x00]*$",
        description="a name, e.g. Priya",
    )


class ForgetResult(BaseModel):
    request_id: int
    kind: str
    status: str  # pending | done
    stores: dict[str, Any]
    attempts: int
    created_at: datetime
    finished_at: datetime | None


_RESPONSES: dict[int | str, dict[str, Any]] = {
    202: {"description": "a store is not done yet: retried by a job; see GET /v1/forget/{id}"}
}


async def _forget(
    forgetter: Forgetter, target: Target, wait_s: float, queue: ForgetQueueFn | None
) -> JSONResponse:
    body = ForgetResult.model_validate(await forgetter.request(target, wait_s, queue))
    return JSONResponse(
        body.model_dump(mode="json"), status_code=200 if body.status == "done" else 202
    )


@router.delete(
    "/sessions/{session_id}",
    response_model=ForgetResult,
    summary="Forget a session everywhere",
    responses={404: {"description": "no such session"}, **_RESPONSES},
)
async def forget_session(
    forgetter: ForgetterDep, queue: ForgetQueue, session_id: SessionIdPath, wait_s: WaitS = 30.0
) -> JSONResponse:
    target = await forgetter.resolve_session(session_id)
    if target is None:
        raise HTTPException(status_code=404, detail=f"no session {session_id}")
    return await _forget(forgetter, target, wait_s, queue)


@router.delete(
    "/entities/{entity_id}",
    response_model=ForgetResult,
    summary="Forget an entity and everything said about it",
    responses={404: {"description": "no such entity"}, **_RESPONSES},
)
async def forget_entity(
    forgetter: ForgetterDep, queue: ForgetQueue, entity_id: EntityId, wait_s: WaitS = 30.0
) -> JSONResponse:
    target = await forgetter.resolve_entity(entity_id)
    if target is None:
        raise HTTPException(status_code=404, detail=f"no entity {entity_id}")
    return await _forget(forgetter, target, wait_s, queue)


@router.post(
    "/forget",
    response_model=ForgetResult,
    summary="Forget a person by name: what they said and everything said about them",
    responses=_RESPONSES,
)
async def forget_person(
    forgetter: ForgetterDep, queue: ForgetQueue, body: ForgetPerson, wait_s: WaitS = 30.0
) -> JSONResponse:
    try:
        target = await forgetter.resolve_person(body.person)
    except ValueError as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from exc
    return await _forget(forgetter, target, wait_s, queue)


class ForgetPage(BaseModel):
    requests: list[ForgetResult]
    unfinished: int = Field(description="requests not done yet (of any age)")


@router.get(
    "/forget",
    response_model=ForgetPage,
    summary="The latest forget requests, newest first (what they removed; never what it was)",
)
async def list_forget(
    forgetter: ForgetterDep,
    status: Literal["pending", "done", "failed"] | None = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> ForgetPage:
    found = await forgetter.latest(status=status, limit=limit)
    return ForgetPage(
        requests=[ForgetResult.model_validate(v) for v in found],
        unfinished=await forgetter.unfinished(),
    )


@router.get(
    "/forget/{request_id}",
    response_model=ForgetResult,
    summary="A forget request: its status and what each store removed",
    responses={404: {"description": "no such request"}},
)
async def get_forget(
    forgetter: ForgetterDep, request_id: Annotated[int, Path(ge=1, le=2**63 - 1)]
) -> ForgetResult:
    view = await forgetter.get(request_id)
    if view is None:
        raise HTTPException(status_code=404, detail=f"no forget request {request_id}")
    return ForgetResult.model_validate(view)
