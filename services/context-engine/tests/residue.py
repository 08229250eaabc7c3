"""The residue scan: every place a running engine keeps data, searched for forgotten text and
ids. Reusable by any test: `await residue(engine.runtime, ["Priya", "s-forget-1"])` returns
one line per place a needle was found (empty = forgotten everywhere).

Places: every file under the transcripts and events directories (dot-files and temporary
files too), every text-like column of every table of every PostgreSQL schema (found through
information_schema, so a table added later is scanned without editing this), the Tantivy
keyword index (the needles' lexemes and session terms, and every stored key), the payloads
of every point of every vector space, every property of every node and edge of the graph,
and the chronicler's ring and unwritten backlog."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import numpy as np
import tantivy
from sqlalchemy import text

from context_engine.vectors.base import MAX_LIMIT

if TYPE_CHECKING:
    from context_engine.runtime import Runtime

# text-like types whose ::text a needle could hide in (arrays and tsvector too)
_TEXTISH = ("text", "character varying", "character", "json", "jsonb", "tsvector", "ARRAY")


async def residue(runtime: Runtime, needles: list[str]) -> list[str]:
    found: list[str] = []
    found += _files(runtime, needles)
    found += await _postgres(runtime, needles)
    found += await _keyword_index(runtime, needles)
    found += await _vectors(runtime, needles)
    found += await _graph(runtime, needles)
    found += _events(runtime, needles)
    return found


def _hits(where: str, blob: str, needles: list[str]) -> list[str]:
    low = blob.casefold()
    return [f"{where}: {n!r}" for n in needles if n.casefold() in low]


def _files(runtime: Runtime, needles: list[str]) -> list[str]:
    found: list[str] = []
    for directory in (runtime.settings.transcripts_dir, runtime.settings.events_dir):
        if not directory.exists():
            continue
        for path in sorted(directory.rglob("*")):
            if path.is_file():
                blob = path.read_bytes().decode("utf-8", "replace")
                found += _hits(f"file {path.relative_to(directory.parent)}", blob, needles)
    return found


async def _postgres(runtime: Runtime, needles: list[str]) -> list[str]:
    await runtime.chronicler.flush()
    found: list[str] = []
    async with runtime.db.main.connect() as conn:
        columns = (
            await conn.execute(
                text(
                    """SELECT c.table_schema, c.table_name, c.column_name
                    FROM information_schema.columns c
                    JOIN information_schema.tables t
                      ON t.table_schema = c.table_schema AND t.table_name = c.table_name
                    WHERE t.table_type = 'BASE TABLE'
                      AND c.table_schema NOT IN ('pg_catalog', 'information_schema')
                      AND c.data_type = ANY(:types)"""
                ),
                {"types": list(_TEXTISH)},
            )
        ).all()
        assert columns, "information_schema listed no text columns"
        for schema, table, column in columns:
            for needle in needles:
                n = (
                    await conn.execute(
                        text(
                            f'SELECT count(*) FROM "{schema}"."{table}" '
                            f'WHERE position(lower(:n) IN lower("{column}"::text)) > 0'
                        ),
                        {"n": needle},
                    )
                ).scalar_one()
                if n:
                    found.append(f"postgres {schema}.{table}.{column}: {needle!r} ({n} rows)")
    return found


async def _keyword_index(runtime: Runtime, needles: list[str]) -> list[str]:
    index = runtime.search_index
    if index is None or index._index is None:
        return []
    async with runtime.db.main.connect() as conn:
        lexemes = {
            n: list(
                (
                    await conn.execute(
                        text("SELECT unnest(tsvector_to_array(to_tsvector('english', :n)))"),
                        {"n": n},
                    )
                ).scalars()
            )
            for n in needles
        }
    searcher = index._index.searcher()
    found: list[str] = []
    for needle in needles:
        for field, terms in (("lex", lexemes[needle]), ("session", [needle])):
            for term in terms:
                q = tantivy.Query.term_query(index.schema, field, term)
                if searcher.search(q, 1).count:
                    found.append(f"keyword index {field}:{term}: {needle!r}")
    total = searcher.num_docs
    if total:
        every = searcher.search(tantivy.Query.all_query(), total)
        keys = " ".join(searcher.doc(addr)["key"][0] for _, addr in every.hits)
        found += _hits("keyword index keys", keys, needles)
    return found


async def _vectors(runtime: Runtime, needles: list[str]) -> list[str]:
    emb = runtime.embedding
    if emb is None or not emb.opened:
        return []
    found: list[str] = []
    store = emb.store
    probe = np.ones(emb.space.dim, dtype=np.float32) / np.sqrt(emb.space.dim)
    for name in await store.spaces():
        count = await store.count(name)  # type: ignore[arg-type]
        if not count:
            continue
        hits = await store.search(emb.space, probe, min(count, MAX_LIMIT))
        assert len(hits) == min(count, MAX_LIMIT)
        for hit in hits:
            found += _hits(f"vectors {name} {hit.id}", json.dumps(hit.payload), needles)
    return found


async def _graph(runtime: Runtime, needles: list[str]) -> list[str]:
    graph = runtime.graph
    if graph is None or not graph.opened:
        return []
    from context_engine.graph.driver import run

    driver = graph.graphiti.driver
    found: list[str] = []
    for what, cypher in (
        ("node", "MATCH (n) RETURN labels(n) AS kind, properties(n) AS props"),
        ("edge", "MATCH ()-[r]->() RETURN type(r) AS kind, properties(r) AS props"),
    ):
        for row in await run(driver, cypher):
            props = {k: v for k, v in row["props"].items() if "embedding" not in k}
            found += _hits(f"graph {what} {row['kind']}", json.dumps(props, default=str), needles)
    return found


def _events(runtime: Runtime, needles: list[str]) -> list[str]:
    ch = runtime.chronicler
    found: list[str] = []
    for entry in ch.ring.after(0, ch.ring.capacity):
        found += _hits(f"event ring {entry.event.creature}", entry.data.decode(), needles)
    for row in list(ch._pending):
        blob: Any = json.dumps(row, default=str, ensure_ascii=False)
        found += _hits("event backlog", blob, needles)
    return found


async def assert_no_residue(runtime: Runtime, needles: list[str]) -> None:
    found = await residue(runtime, needles)
    assert not found, "residue found:\n" + "\n".join(found)
