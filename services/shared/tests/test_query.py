"""forbid_unknown_query: a query parameter no route declares is a 422, never ignored."""

from __future__ import annotations

from typing import Annotated

import pytest
from fastapi import APIRouter, Depends, FastAPI, Query
from fastapi.testclient import TestClient
from pydantic import BaseModel, ConfigDict

from her_os_shared.auth import require_token
from her_os_shared.query import forbid_unknown_query

TOKEN = "t" * 32


class Page(BaseModel):
    model_config = ConfigDict(extra="forbid")

    limit: int = 10
    offset: int = 0


def paging(cursor: Annotated[str | None, Query()] = None) -> str | None:
    return cursor


@pytest.fixture
def client() -> TestClient:
    from pydantic import SecretStr

    app = FastAPI()
    v1 = APIRouter(
        prefix="/v1",
        dependencies=[
            Depends(require_token(SecretStr(TOKEN), allow_query=True)),
            Depends(forbid_unknown_query(allow=("token", "x_internal_token"))),
        ],
    )

    @v1.get("/items")
    async def items(
        speaker: str | None = None,
        since: Annotated[str | None, Query(alias="from")] = None,
        cursor: Annotated[str | None, Depends(paging)] = None,
    ) -> dict:
        return {"speaker": speaker, "from": since, "cursor": cursor}

    @v1.get("/pages")
    async def pages(page: Annotated[Page, Query()]) -> dict:
        return page.model_dump()

    @v1.get("/plain")
    async def plain() -> dict:
        return {}

    app.include_router(v1)
    return TestClient(app, headers={"X-Internal-Token": TOKEN})


def test_declared_parameters_their_aliases_and_dependencies_pass(client: TestClient) -> None:
    r = client.get("/v1/items", params={"speaker": "asha", "from": "2026-01-01", "cursor": "c"})
    assert r.status_code == 200, r.text
    assert r.json() == {"speaker": "asha", "from": "2026-01-01", "cursor": "c"}
    assert client.get("/v1/pages", params={"limit": 5, "offset": 1}).json() == {
        "limit": 5,
        "offset": 1,
    }


def test_an_unknown_parameter_is_a_422_naming_it_and_the_accepted_ones(
    client: TestClient,
) -> None:
    r = client.get("/v1/items", params={"speakr": "asha", "since": "x"})
    assert r.status_code == 422
    detail = r.json()["detail"]
    assert [d["loc"] for d in detail] == [["query", "speakr"], ["query", "since"]]
    assert "cursor, from, speaker" in detail[0]["msg"] and "input" not in detail[0]
    r = client.get("/v1/plain", params={"verbose": "1"})
    assert r.status_code == 422 and "accepts: none" in r.json()["detail"][0]["msg"]
    assert client.get("/v1/pages", params={"limt": 5}).status_code == 422


def test_auth_comes_first_and_allowed_names_are_not_unknown(client: TestClient) -> None:
    anonymous = TestClient(client.app)
    assert anonymous.get("/v1/plain", params={"verbose": "1"}).status_code == 401
    assert anonymous.get("/v1/plain", params={"token": TOKEN}).status_code == 200
