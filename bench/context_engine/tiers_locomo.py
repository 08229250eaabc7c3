"""Memory tiers on real conversations: which LoCoMo entities reach L1 and L2, and which do not.

Each LoCoMo dev conversation becomes its own memory — its own PostgreSQL database, transcripts
volume and FalkorDB graph (group id = the conversation), served by its own `python -m
context_engine` (uvicorn, default settings but the fast extractor named explicitly and no
vector index: embedding every turn is what `bench/locomo` measures and tiers never read it).
Its sessions are written as JSONL in order, each turn a segment with its real speaker, spoken
at the session's date (`session_<n>_date_time`); the engine's watcher ingests them and its jobs
finalise, extract and graph every session. Then `POST /v1/consolidate` with `as_of` = the end
of the last session (what the nightly run would have done by then: communities, tiers,
salience), and `GET /v1/entities` (every entity, with its tier, episodes, first/last seen,
contradiction and community) and `GET /v1/tiers/stats` (the run's tier changes and reasons).

Printed per conversation: entities per tier and per type × tier, the L1 and L2 entities, and
two checks against the design (ADR 0011, tiers.py):
- entities that meet a tier's rules but are not in it — L1: first seen ≥ 7 days before as_of,
  ≥ 3 episodes, not contradicted (a fact invalidated within the last 30 days); L2: ≥ 90 days,
  a person / place / habit / emotion, ≥ 3 episodes, not contradicted, in a community;
- entities seen in ≥ 3 episodes that stayed L0, and why.
The reason shown is the engine's: the one written with the tier change in its history when
there is one, else `tiers.classify_tier` (the function the consolidation runs) on the fields
the API returned, from L0 (every entity starts there in a fresh memory). A disagreement
between that replay and the tier the engine stored is flagged.

    uv run python bench/context_engine/tiers_locomo.py [--data ../shared/data/locomo]
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
from common import (
    EngineProcess,
    KeepOption,
    console,
    make_engine,
    pg_version,
    postgres,
    print_footer,
    print_header,
    report_log,
    workdir,
)
from rich.table import Table

# bench/locomo/locomo_recall.py: LoCoMo loading, JSONL writing, FalkorDB, one database each.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "locomo"))
from locomo_recall import (
    DEFAULT_DATA,
    CaptionsOption,
    Conversation,
    ConversationsOption,
    DataOption,
    conversation_engine,
    falkordb,
    load,
    wait_indexed,
    write_sessions,
)
from machine import code_line

from context_engine.config import Settings
from context_engine.memory.tiers import (
    TIERS,
    EntityHistory,
    TierPolicy,
    TierState,
    classify_tier,
    days_between,
)

PAGE = 500  # GET /v1/entities' largest page


@dataclass
class Entity:
    """One entity as GET /v1/entities returns it, and what the design says of it."""

    raw: dict[str, Any]
    as_of: datetime
    policy: TierPolicy
    history_reason: str | None = None  # written with its tier change by the run

    @property
    def name(self) -> str:
        return str(self.raw["name"])

    @property
    def type(self) -> str:
        return str(self.raw["type"])

    @property
    def tier(self) -> str:
        return str(self.raw["tier"])

    @property
    def episodes(self) -> int:
        return int(self.raw["episode_count"])

    @property
    def age_days(self) -> float:
        return days_between(_time(self.raw["first_seen"]), self.as_of)

    @property
    def contradicted(self) -> bool:
        """The design's "contradicted": a fact invalidated within the hold before as_of."""
        at = self.raw.get("contradicted_at")
        if at is None:
            return False
        return 0.0 <= days_between(_time(at), self.as_of) < self.policy.contradiction_hold_days

    @property
    def in_community(self) -> bool:
        return self.raw.get("community_id") is not None

    def meets_l1(self) -> bool:
        p = self.policy
        return (
            self.age_days >= p.l1_min_age_days
            and self.episodes >= p.l1_min_episodes
            and not self.contradicted
        )

    def meets_l2(self) -> bool:
        p = self.policy
        return (
            self.age_days >= p.l2_min_age_days
            and self.type in p.l2_types
            and self.episodes >= p.l2_min_episodes
            and not self.contradicted
            and self.in_community
        )

    def replay(self) -> TierState:
        """The engine's classify_tier on the API's fields, from L0 (a fresh memory)."""
        at = self.raw.get("contradicted_at")
        history = EntityHistory(
            type=self.type,
            first_seen=_time(self.raw["first_seen"]),
            last_seen=_time(self.raw["last_seen"]),
            episode_count=self.episodes,
            contradicted_at=_time(at) if at else None,
            in_community=self.in_community,
        )
        return classify_tier(history, self.as_of, self.policy)

    def reason(self) -> str:
        if self.history_reason:
            return f"{self.history_reason} (tier history)"
        state = self.replay()
        flag = "" if state.tier == self.tier else f" [stored {self.tier} ≠ replay {state.tier}]"
        return f"{state.reason} (classify_tier){flag}"

    def row(self) -> tuple[str, ...]:
        return (
            self.name,
            self.type,
            self.tier,
            str(self.episodes),
            f"{self.age_days:.0f}",
            "yes" if self.in_community else "no",
            str(self.raw.get("contradicted_at") or "—")[:10],
        )


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value)


@dataclass
class Memory:
    """One conversation's outcome."""

    conv: Conversation
    as_of: datetime
    entities: list[Entity]
    run: dict[str, Any]
    stats: dict[str, Any]
    index_s: float
    consolidate_s: float
    checks: dict[str, list[Entity]] = field(default_factory=dict)


# --- the engine -----------------------------------------------------------------------------


def _get(client: httpx.Client, path: str, **params: object) -> dict[str, Any]:
    r = client.get(path, params=params)
    r.raise_for_status()
    return r.json()


def read_memory(
    engine: EngineProcess, as_of: datetime, policy: TierPolicy
) -> tuple[dict[str, Any], dict[str, Any], list[Entity], float]:
    """Consolidate as of `as_of`, then read the run, the tier stats and every entity."""
    with httpx.Client(base_url=engine.base_url, headers=engine.headers, timeout=900) as client:
        t = time.perf_counter()
        with console.status("consolidating (communities, tiers, salience)"):
            r = client.post(
                "/v1/consolidate",
                params={"as_of": as_of.isoformat(), "wait": "true", "timeout_s": 900},
            )
            r.raise_for_status()
        seconds = time.perf_counter() - t
        run = r.json()
        if run.get("status") != "done":
            raise RuntimeError(f"consolidation did not finish: {run}")
        stats = _get(client, "/v1/tiers/stats", recent=500)
        raw: list[dict[str, Any]] = []
        while True:
            page = _get(client, "/v1/entities", limit=PAGE, offset=len(raw))
            raw += page["entities"]
            if not page["entities"] or len(raw) >= page["total"]:
                break
    reasons = {c["entity_id"]: c["reason"] for c in reversed(stats["recent_changes"])}
    entities = [Entity(e, as_of, policy, reasons.get(e["id"])) for e in raw]
    return run, stats, entities, seconds


async def ingest_one(
    conv: Conversation,
    root: Path,
    server_url: str,
    graph_url: str,
    policy: TierPolicy,
    index_timeout_s: float,
) -> Memory:
    env = {
        "CONTEXT_ENGINE_EXTRACTOR": "fast",
        "CONTEXT_ENGINE_VECTOR_INDEX_ENABLED": "false",
        "CONTEXT_ENGINE_CONTEXT_LEGS": json.dumps(["bm25", "graph"]),
        "CONTEXT_ENGINE_GRAPH_URL": graph_url,
        "CONTEXT_ENGINE_GRAPH_GROUP_ID": conv.memory_id,
    }
    engine = await conversation_engine(conv, root, server_url, env)
    with engine:
        as_of = write_sessions(conv, engine.transcripts_dir, root / conv.memory_id / "staging")
        index_s = await wait_indexed(
            engine.database_url, conv, graph=True, timeout_s=index_timeout_s, vectors=False
        )
        run, stats, entities, consolidate_s = read_memory(engine, as_of, policy)
        report_log(engine.log_events(), f"{conv.sample_id} engine log")
    return Memory(conv, as_of, entities, run, stats, index_s, consolidate_s)


# --- the report -----------------------------------------------------------------------------


def check(memory: Memory) -> None:
    es = memory.entities
    memory.checks = {
        "meets L2, not L2": [e for e in es if e.meets_l2() and e.tier != "L2"],
        "meets L1, still L0": [e for e in es if e.meets_l1() and e.tier == "L0"],
        "≥ 3 episodes, L0": [e for e in es if e.episodes >= 3 and e.tier == "L0"],
        "replay ≠ stored": [e for e in es if e.replay().tier != e.tier],
    }


def entity_table(title: str, entities: list[Entity], limit: int) -> Table:
    table = Table(title=title, title_justify="left")
    for col in (
        "entity",
        "type",
        "tier",
        "episodes",
        "age d",
        "community",
        "contradicted",
        "why (the engine's reason)",
    ):
        table.add_column(
            col, justify="right" if col in ("episodes", "age d") else "left", overflow="fold"
        )
    ordered = sorted(entities, key=lambda e: (-e.episodes, e.type, e.name.casefold()))
    for e in ordered[:limit]:
        table.add_row(*e.row(), e.reason())
    if len(ordered) > limit:
        table.add_row(f"… {len(ordered) - limit} more", *[""] * 7)
    return table


def report_memory(m: Memory, limit: int) -> None:
    es = m.entities
    tiers = Counter(e.tier for e in es)
    console.print(
        f"{m.conv.sample_id}: as_of {m.as_of.isoformat(timespec='minutes')}; {len(es)} entities "
        f"— " + ", ".join(f"{t} {tiers[t]}" for t in TIERS) + f"; {m.stats['communities']} "
        f"communities; run promoted {m.run['promoted']}, demoted {m.run['demoted']}, "
        f"low salience {m.run['low_salience']}; indexed in {m.index_s:.0f} s, consolidated in "
        f"{m.consolidate_s:.1f} s"
    )
    episodes = Counter(min(e.episodes, 3) for e in es)
    console.print(
        f"episodes per entity (sessions with a current mention): 1 → {episodes[1]}, "
        f"2 → {episodes[2]}, ≥ 3 → {episodes[3]}" + (f", 0 → {episodes[0]}" if episodes[0] else "")
    )
    if len(es) != m.stats["total"]:
        console.print(
            f"[yellow]GET /v1/entities gave {len(es)}, /v1/tiers/stats {m.stats['total']}[/]"
        )
    by_type: dict[str, Counter[str]] = {}
    for e in es:
        by_type.setdefault(e.type, Counter())[e.tier] += 1
    table = Table(title=f"{m.conv.sample_id}: entities per type × tier", title_justify="left")
    for col in ("type", *TIERS, "≥ 3 episodes", "in a community"):
        table.add_column(col, justify="left" if col == "type" else "right")
    for kind in sorted(by_type, key=lambda k: -sum(by_type[k].values())):
        mine = [e for e in es if e.type == kind]
        table.add_row(
            kind,
            *(str(by_type[kind][t]) for t in TIERS),
            str(sum(e.episodes >= 3 for e in mine)),
            str(sum(e.in_community for e in mine)),
        )
    console.print(table)
    upper = [e for e in es if e.tier != "L0"]
    if upper:
        console.print(entity_table(f"{m.conv.sample_id}: L1 and L2 entities", upper, limit))
    for title, found in m.checks.items():
        if title == "replay ≠ stored" and not found:
            continue
        if found:
            console.print(entity_table(f"{m.conv.sample_id}: {title}", found, limit))
        else:
            console.print(f"{m.conv.sample_id}: {title}: none")


def report_summary(memories: list[Memory]) -> None:
    table = Table(
        title="tiers per conversation (consolidated as of its last session)", title_justify="left"
    )
    for col in (
        "conversation",
        "sessions",
        "days",
        "entities",
        *TIERS,
        "communities",
        "contradicted",
        "meets L2, not L2",
        "meets L1, still L0",
        "≥ 3 episodes, L0",
    ):
        left = col == "conversation"
        table.add_column(col, justify="left" if left else "right", no_wrap=left)
    for m in memories:
        tiers = Counter(e.tier for e in m.entities)
        days = days_between(m.conv.sessions[0].started_at, m.as_of)
        table.add_row(
            m.conv.sample_id,
            str(len(m.conv.sessions)),
            f"{days:.0f}",
            str(len(m.entities)),
            *(str(tiers[t]) for t in TIERS),
            str(m.stats["communities"]),
            str(sum(e.raw.get("contradicted_at") is not None for e in m.entities)),
            *(
                str(len(m.checks[k]))
                for k in ("meets L2, not L2", "meets L1, still L0", "≥ 3 episodes, L0")
            ),
        )
    console.print(table)
    mismatched = sum(len(m.checks["replay ≠ stored"]) for m in memories)
    console.print(
        f"classify_tier replayed on the API's fields agrees with the stored tier for "
        f"{sum(len(m.entities) for m in memories) - mismatched} of "
        f"{sum(len(m.entities) for m in memories)} entities"
    )


# --- main -----------------------------------------------------------------------------------


async def run(
    data: Path,
    conversations: int | None,
    captions: bool,
    keep: bool,
    index_timeout_s: float,
    limit: int,
) -> str:
    path = data / "locomo-dev.json"
    if not path.exists():
        console.print(f"[red]no LoCoMo data at {path}[/] (--data; ../shared/data/README.md)")
        raise typer.Exit(2)
    convs, _ = load(path, captions, conversations)
    policy = TierPolicy.from_settings(Settings())
    print_header("Memory tiers on LoCoMo dev (real engine, fast extractor, no LLM)")
    console.print(code_line())
    console.print(
        f"{len(convs)} conversations, {sum(c.turns for c in convs)} turns; photo captions "
        f"{'kept' if captions else 'left out'}; policy: L1 ≥ {policy.l1_min_age_days:g} d and "
        f"≥ {policy.l1_min_episodes} episodes; L2 ≥ {policy.l2_min_age_days:g} d, "
        f"≥ {policy.l2_min_episodes} episodes, types {', '.join(sorted(policy.l2_types))}, in "
        f"a community; contradiction hold {policy.contradiction_hold_days:g} d"
    )
    memories: list[Memory] = []
    with workdir("her-os-tiers-", keep) as root_name, contextlib.ExitStack() as stack:
        root = Path(root_name)
        pg = stack.enter_context(postgres(None, root))
        graph_url = stack.enter_context(falkordb(root))
        for conv in convs:
            console.rule(f"{conv.sample_id}: {len(conv.sessions)} sessions, {conv.turns} turns")
            memory = await ingest_one(conv, root, pg.url, graph_url, policy, index_timeout_s)
            check(memory)
            report_memory(memory, limit)
            memories.append(memory)
        engine = make_engine(pg.url, pool_size=1)
        version = await pg_version(engine)
        await engine.dispose()
    console.rule("summary")
    report_summary(memories)
    return version


def main(
    data: DataOption = DEFAULT_DATA,
    conversations: ConversationsOption = None,
    captions: CaptionsOption = True,
    limit: Annotated[int, typer.Option(help="rows printed per entity table")] = 60,
    keep: KeepOption = False,
    index_timeout: Annotated[float, typer.Option(help="seconds to wait for indexing")] = 900,
) -> None:
    version = asyncio.run(run(data, conversations, captions, keep, index_timeout, limit))
    print_footer(version)


if __name__ == "__main__":
    typer.run(main)
