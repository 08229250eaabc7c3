"""Wearable webhooks (Omi-compatible), outside /v1 because such clients cannot send our
header: they authenticate with the internal token (`X-Internal-Token` or `Authorization:
Bearer`), or with the separate AUDIO_PIPELINE_WEBHOOK_TOKEN as `?token=` (or in one of those
headers, for a client that can set one). Thin: buffering and conversion are in runtime.py and
wearable.py; docs/wearables.md shows a client's setup.
"""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any
from urllib.parse import parse_qsl

from fastapi import APIRouter, Depends, HTTPException, Request, Response
from pydantic import ValidationError

from audio_pipeline.audio import AudioError
from audio_pipeline.routes import RuntimeDep, require_ready
from audio_pipeline.wearable import parse_transcript
from her_os_shared.auth import BEARER_SCHEME, TOKEN_HEADER, header_token, token_matches
from her_os_shared.idempotency import HEADER, Answer, IdempotencyKeyHeader, fingerprint, key_header
from her_os_shared.ids import InvalidIdError, validate_id

router = APIRouter(prefix="/webhook", tags=["wearable webhooks"])


def query_params(request: Request) -> dict[str, str]:
    """The query, also when a client appended `?sample_rate=…` to a URL that already had a
    query (older Omi backends do): `?token=T?sample_rate=16000&uid=u` reads as three params."""
    params: dict[str, str] = {}
    for key, value in parse_qsl(request.url.query, keep_blank_values=True):
        if "?" in value:
            value, rest = value.split("?", 1)
            params.update(parse_qsl(rest, keep_blank_values=True))
        params[key] = value
    return params


Params = Annotated[dict[str, str], Depends(query_params)]
# Omi's own name for the key (newer Omi backends send it with their webhooks' retries).
OMI_KEY_HEADER = "X-Omi-Idempotency-Key"
OmiKeyHeader = key_header(OMI_KEY_HEADER, f"the same as {HEADER}, which counts when both are sent")


def webhook_key(key: IdempotencyKeyHeader = None, omi_key: OmiKeyHeader = None) -> str | None:
    """A batch's idempotency key: ours when sent, else Omi's."""
    return key or omi_key


WebhookKey = Annotated[str | None, Depends(webhook_key)]


def require_webhook_auth(request: Request, params: Params) -> None:
    settings = request.app.state.settings
    if settings.internal_token is None:  # insecure development mode, as for /v1
        return
    provided = header_token(request)
    if token_matches(provided, settings.internal_token.get_secret_value()):
        return
    # The webhook token: in the URL for clients that cannot set headers, or in a header
    # (which no log prints) for those that can.
    hook = settings.webhook_token
    if hook is not None and any(
        token_matches(candidate, hook.get_secret_value())
        for candidate in (provided, params.get("token"))
    ):
        return
    raise HTTPException(
        401,
        f"missing or invalid {TOKEN_HEADER} header or token parameter",
        headers={"WWW-Authenticate": BEARER_SCHEME},
    )


def _id(params: dict[str, str], name: str, *, max_length: int = 128) -> str:
    value = params.get(name)
    if value is None:
        raise HTTPException(422, f"query parameter {name!r} is required")
    try:
        validate_id(value, name)
    except InvalidIdError as exc:
        raise HTTPException(422, str(exc)) from None
    if len(value) > max_length:
        raise HTTPException(422, f"{name}: at most {max_length} characters")
    return value


@router.post(
    "/audio",
    dependencies=[Depends(require_webhook_auth)],
    summary="Omi 'Realtime audio bytes': raw PCM16 mono chunks (query: sample_rate, uid) "
    "buffered into the device's current session",
    response_model=dict[str, Any],
    responses={
        400: {"description": "empty body or not PCM16"},
        409: {"description": "the Idempotency-Key was used for another chunk"},
        413: {"description": "chunk too long"},
        415: {"description": "not application/octet-stream"},
        422: {"description": "bad sample_rate or uid"},
    },
)
async def audio(
    request: Request,
    runtime: RuntimeDep,
    params: Params,
    key: WebhookKey,
) -> Response:
    require_ready(runtime)
    ctype = request.headers.get("content-type", "application/octet-stream").split(";")[0]
    if ctype.strip().lower() not in ("application/octet-stream", "audio/l16", "audio/pcm"):
        raise HTTPException(415, f"expected application/octet-stream raw PCM16, got {ctype!r}")
    uid = _id(params, "uid", max_length=64)  # the session id adds a 16-character time
    try:
        rate = int(params.get("sample_rate", ""))
    except ValueError:
        raise HTTPException(422, "query parameter 'sample_rate' must be an integer") from None
    body = await request.body()

    async def buffer() -> Answer:
        try:
            return Answer.json(200, await runtime.wearable_chunk(uid, rate, body))
        except AudioError as exc:
            raise HTTPException(exc.status_code, exc.reason) from None

    scope = f"POST /webhook/audio uid={uid}"  # a key is the wearable's own
    same = fingerprint({"sample_rate": rate}, body)
    return await runtime.idempotency.respond(scope, key, same, buffer)


@router.post(
    "/transcript",
    dependencies=[Depends(require_webhook_auth)],
    summary="Omi 'Realtime transcript': the client's own segments (query: session_id, uid) "
    "written to the session's JSONL unchanged in meaning",
    response_model=dict[str, Any],
    responses={
        409: {"description": "the Idempotency-Key was used for another batch"},
        422: {"description": "not JSON, or malformed segments"},
    },
)
async def transcript(
    request: Request,
    runtime: RuntimeDep,
    params: Params,
    key: WebhookKey,
) -> Response:
    uid = _id(params, "uid") if "uid" in params else "wearable"
    try:
        body = json.loads(await request.body())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise HTTPException(422, f"body is not JSON: {exc}") from None
    try:
        parsed = parse_transcript(body)
    except ValidationError as exc:
        raise HTTPException(422, exc.errors(include_url=False, include_input=False)) from None
    if "session_id" in params:
        session_id = _id(params, "session_id")
    elif parsed.session_id is not None:
        session_id = _id({"session_id": parsed.session_id}, "session_id")
    else:
        raise HTTPException(422, "session_id is required (query parameter or body field)")

    async def write() -> Answer:
        try:
            written = await asyncio.to_thread(runtime.wearable_transcript, session_id, uid, parsed)
        except ValueError as exc:
            raise HTTPException(422, str(exc)) from None
        return Answer.json(200, written)

    scope = f"POST /webhook/transcript uid={uid}"
    # The body as parsed JSON: a batch re-serialised with its keys in another order is the same.
    same = fingerprint({"session_id": session_id, "body": body})
    return await runtime.idempotency.respond(scope, key, same, write)
