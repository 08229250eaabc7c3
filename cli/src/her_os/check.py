"""`her-os check`: the context engine's drift check between the JSONL files, PostgreSQL, the
vectors and the graph episodes (GET /v1/check, POST /v1/check/repair), with its progress.

The request runs in a thread; meanwhile the engine's progress events for this check (the
memory-upkeep creature, `data.check_id`) are polled from GET /v1/events and shown. After a
repair, the jobs it queued (embedding, graph writes) are waited for, up to `wait_s`, checking again.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx

from her_os import credentials
from her_os.paths import DataLayout
from her_os.services import CONTEXT_ENGINE
from her_os.state import live_state
from her_os_shared.creatures import CreatureName

POLL_S = 0.5
REQUEST_TIMEOUT_S = 3600.0  # a check reads every file: no short timeout on it

REPAIRS = {
    "jsonl_not_in_postgres": "re-ingest the file",
    "postgres_not_in_jsonl": "none: reported, never deleted",
    "vectors_missing": "queue embedding",
    "vector_rows_without_point": "drop the row, queue embedding",
    "orphan_points": "delete the point",
    "graph_episode_missing": "queue the graph stage",
    "graph_orphan_episodes": "remove the episode",
}


class CheckError(RuntimeError):
    pass


@dataclass(frozen=True)
class Target:
    url: str
    token: str


def find_engine(layout: DataLayout, url: str | None, token: str | None) -> Target:
    """The running platform's context engine (from its run state and secrets), unless
    `url` / `token` say otherwise."""
    if url is None:
        state = live_state(layout.state_file)
        comp = state.components.get(CONTEXT_ENGINE.name) if state else None
        if state is None or comp is None:
            raise CheckError(
                f"her-os is not running (data dir {layout.root}): start it with `her-os up`, "
                "or name an engine with --url"
            )
        url = CONTEXT_ENGINE.base_url(state.connect_host, comp.port)
    if token is None:
        creds = credentials.load(layout.secrets)
        if creds is None:
            raise CheckError(f"no internal token in {layout.secrets}: set HER_OS_INTERNAL_TOKEN")
        token = creds.internal_token
    return Target(url.rstrip("/"), token)


Progress = Callable[[str], None]


class Checker:
    def __init__(self, target: Target, client: httpx.Client | None = None) -> None:
        self.target = target
        self.client = client or httpx.Client(
            base_url=target.url,
            headers={"X-Internal-Token": target.token},
            timeout=httpx.Timeout(30.0, read=REQUEST_TIMEOUT_S),
        )

    def close(self) -> None:
        self.client.close()

    def _call(self, method: str, path: str, **params: Any) -> dict[str, Any]:
        try:
            r = self.client.request(method, path, params=params)
        except httpx.HTTPError as exc:
            raise CheckError(
                f"the context engine at {self.target.url} did not answer: {exc}"
            ) from exc
        if r.status_code != 200:
            raise CheckError(f"{method} {path} answered {r.status_code}: {r.text[:300]}")
        body: dict[str, Any] = r.json()
        return body

    def _latest_progress(self, check_id: str, seen: set[str]) -> str | None:
        try:
            page = self._call(
                "GET", "/v1/events", creature=CreatureName.SEA_CUCUMBER.value, limit=50
            )
        except CheckError:
            return None  # progress is best effort; the check's own answer is what counts
        latest = None
        for event in reversed(page.get("events", [])):  # newest first in the page
            if (event.get("data") or {}).get("check_id") != check_id:
                continue
            if event["event_id"] not in seen:
                seen.add(event["event_id"])
                latest = event.get("reasoning") or event["event_type"]
        return latest

    def run(self, *, repair: bool, progress: Progress, wait_s: float) -> dict[str, Any]:
        """The check's report; with `repair`, {"before", "repaired", "after"}, where "after"
        is checked again until the queued jobs are done (or `wait_s` passed)."""
        check_id = uuid.uuid4().hex
        method, path = ("POST", "/v1/check/repair") if repair else ("GET", "/v1/check")
        seen: set[str] = set()
        with ThreadPoolExecutor(1) as pool:
            future = pool.submit(self._call, method, path, check_id=check_id)
            while not future.done():
                said = self._latest_progress(check_id, seen)
                if said:
                    progress(said)
                time.sleep(POLL_S)
            result = future.result()
        if not repair:
            return result
        deadline = time.monotonic() + wait_s
        after = result["after"]
        while after["pending"] and time.monotonic() < deadline:
            jobs = sum(after["pending"].values())
            progress(f"waiting for {jobs} queued jobs (embedding, graph) to finish")
            time.sleep(POLL_S * 4)
            after = self._call("GET", "/v1/check", check_id=check_id)
        result["after"] = after
        return result


def final_report(result: dict[str, Any]) -> dict[str, Any]:
    """The report whose drift decides the exit code (after a repair: the one after)."""
    return result.get("after", result)
