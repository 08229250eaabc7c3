"""The no-LLM path: an extractor's output written as graphiti's own nodes, edges and episodes.

Same schema as graphiti's add_episode, so graphiti search, the dashboard and the queries see
one graph whichever path wrote it:

- the session is one `Episodic` node `session-{id}` (uuid5 of group + session: re-writing the
  session updates it), content "Speaker: text" lines, valid_at = the session's start;
- each entity is an `Entity` node labelled with its type ("Person", "Promise", "Topic"...),
  uuid5 of (group, type, canonical name): the same person in two sessions is one node
  (case-insensitive, whitespace-collapsed names). Attributes: type, canonical_name,
  sensitivity (the most sensitive seen), plus the name embedding of our embedder.
  Names are NOT merged by embedding: with multilingual-e5-small "Priya"/"Priyanka" score 0.92
  while "Priya"/"Priya Sharma" score 0.93 and "Mumbai"/"Bombay" 0.94, so no threshold separates
  same from different; a wrong merge mixes two people's facts, a missed one only splits them;
- `MENTIONS` from the episode to every node it wrote;
- each relation is a `RELATES_TO` edge named after its predicate ("SPOUSE", "LIVES_IN"), with
  a readable `fact` ("Asha's spouse is Priya"), valid_at = when its segment was spoken, or the
  earlier time its words named (the relation's `valid_from`: "since March"), episodes = [the
  session's episode], attributes session_id, segment_id, confidence, evidence, extractor, the
  relation's category, when, valid_from and source where it has them, and the fact's
  embedding. Its uuid is uuid5 of (source, name, target, session): re-writing a session never
  duplicates, and the same fact said in two sessions is two edges, each with its own time and
  segment (queries collapse restatements); said twice in one session, the first saying is
  kept (with the best confidence of both);
- what a speaker says rather than mentions (promise, decision, question, habit, emotion) is a
  node linked from the speaker: PROMISED, DECIDED, ASKED, HAS_HABIT, FELT (facts.py).

Re-writing a session (a new extractor version, or the same one again) replaces what that
session's episode wrote: its edges and mentions that the new extraction no longer has are
removed, and nodes left with no edge at all are removed. This replaces derived data of one
session; it is not supersession, which never deletes (supersede.py). An episode of the same
session written by graphiti's LLM path is removed first: a session has one episode.

Writes are not one transaction on FalkorDB (it has none across queries): they are ordered so
that a write that stops half-way is completed by running it again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any

from context_engine.extract.base import Extraction
from context_engine.extract.schema import canonical_name, is_placeholder_speaker
from context_engine.graph import facts as vocab
from context_engine.graph.base import GraphWrite, InvalidatedFact, SessionEpisode
from context_engine.graph.driver import run, unavailable_errors
from context_engine.graph.store import (
    delete_orphans,
    remove_episode,
    session_episode_name,
    session_episodes,
    session_of_episode_name,
    to_datetime,
    utc,
)
from context_engine.graph.supersede import (
    TimelineFact,
    Verdict,
    changed,
    in_timeline,
    resolve_timeline,
    scope,
)

if TYPE_CHECKING:
    from graphiti_core.driver.driver import GraphDriver
    from graphiti_core.embedder.client import EmbedderClient

    from context_engine.embed.base import Embedder

_SENSITIVITY = {"open": 0, "private": 1, "sensitive": 2}
_NODE_CORE = {"uuid", "name", "group_id", "summary", "created_at", "name_embedding", "labels"}
EVIDENCE_MAX = 500
# Relation properties kept as edge attributes (ExtractedRelation.properties).
EDGE_PROPERTIES = ("category", "when", "valid_from", "source")


def parse_valid_from(value: Any) -> datetime | None:
    """A relation's `valid_from` (ISO date or datetime) as aware UTC; a date is its midnight
    UTC, a naive datetime is taken as UTC. None when absent or unreadable."""
    if isinstance(value, date) and not isinstance(value, datetime):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    if isinstance(value, str):
        value = value.strip() or None
    try:
        return to_datetime(value)  # graphiti's own times are read the same way
    except ValueError:
        return None


def edge_properties(properties: Mapping[str, Any]) -> dict[str, str]:
    """The properties a relation's edge keeps: the EDGE_PROPERTIES that are non-empty text."""
    out = {}
    for key in EDGE_PROPERTIES:
        value = properties.get(key)
        if isinstance(value, str) and value.strip():
            out[key] = value.strip()
    return out


@dataclass(slots=True)
class PlannedNode:
    uuid: str
    name: str
    type: str
    sensitivity: str = "open"


@dataclass(slots=True)
class PlannedEdge:
    uuid: str
    source: PlannedNode
    target: PlannedNode
    name: str
    template: str  # "{s} likes {o}": rendered once node names are final
    valid_at: datetime
    segment_id: str | None
    confidence: float
    evidence: str
    spoken_at: datetime  # when it was said (valid_at may be earlier: its valid_from)
    properties: dict[str, str] = field(default_factory=dict)  # edge_properties()
    # filled from the graph and the supersession step
    created_at: datetime | None = None
    episodes: list[str] = field(default_factory=list)
    invalid_at: datetime | None = None
    expired_at: datetime | None = None
    invalidated_by: str | None = None
    fact_embedding: list[float] | None = None

    @property
    def fact(self) -> str:
        return self.template.format(s=self.source.name, o=self.target.name)


@dataclass(slots=True)
class SessionPlan:
    episode_uuid: str
    nodes: dict[str, PlannedNode] = field(default_factory=dict)
    edges: dict[str, PlannedEdge] = field(default_factory=dict)


def plan_session(group_id: str, episode: SessionEpisode, extraction: Extraction) -> SessionPlan:
    """The nodes and edges one session's extraction becomes (no graph access)."""
    plan = SessionPlan(vocab.episode_uuid(group_id, episode.session_id))
    by_name: dict[str, list[PlannedNode]] = {}
    speaker_of = {s.segment_id: s.speaker for s in episode.segments}

    def add_node(
        entity_type: str, name: str, sensitivity: str = "open", scope: str = ""
    ) -> PlannedNode:
        uuid = vocab.node_uuid(group_id, entity_type, f"{name}\x1f{scope}" if scope else name)
        node = plan.nodes.get(uuid)
        if node is None:
            node = plan.nodes[uuid] = PlannedNode(uuid, " ".join(name.split()), entity_type)
            by_name.setdefault(canonical_name(name), []).append(node)
        if _SENSITIVITY.get(sensitivity, 0) > _SENSITIVITY.get(node.sensitivity, 0):
            node.sensitivity = sensitivity
        return node

    def resolve(name: str, default_type: str) -> PlannedNode:
        if is_placeholder_speaker(name):
            # "SPEAKER_00" is someone else in every session: one node per session, so a fact
            # of one never ends another's (ADR 0017)
            return add_node(default_type, name, scope=episode.session_id)
        known = by_name.get(canonical_name(name))
        if known:
            rank = {t: i for i, t in enumerate(vocab.TYPE_PRIORITY)}
            return min(known, key=lambda n: rank.get(n.type, len(rank)))
        return add_node(default_type, name)

    def spoken_at(segment_id: str | None) -> datetime:
        spoken = episode.spoken_at.get(segment_id) if segment_id else None
        return utc(spoken or episode.started_at)

    def add_edge(
        source: PlannedNode,
        target: PlannedNode,
        name: str,
        template: str,
        segment_id: str | None,
        confidence: float,
        evidence: str,
        properties: Mapping[str, Any] | None = None,
    ) -> None:
        if source.uuid == target.uuid:
            return
        uuid = vocab.relation_uuid(group_id, source.uuid, name, target.uuid, episode.session_id)
        spoken = spoken_at(segment_id)
        kept = edge_properties(properties or {})
        # True from when its words say ("since March"), never from after it was said.
        start = parse_valid_from(kept.get("valid_from"))
        valid_at = start if start is not None and start <= spoken else spoken
        old = plan.edges.get(uuid)
        if old is not None:  # said twice in one session: the first saying, the best confidence
            old.confidence = max(old.confidence, confidence)
            if spoken < old.spoken_at:
                old.valid_at, old.spoken_at, old.segment_id = valid_at, spoken, segment_id
                old.evidence, old.properties = evidence[:EVIDENCE_MAX], kept
            return
        plan.edges[uuid] = PlannedEdge(
            uuid, source, target, name, template, valid_at, segment_id, confidence,
            evidence[:EVIDENCE_MAX], spoken, kept,
        )  # fmt: skip

    entity_nodes = [
        (entity, add_node(entity.type, entity.name, entity.sensitivity))
        for entity in extraction.entities
        if canonical_name(entity.name)
    ]
    for entity, node in entity_nodes:
        if entity.type not in vocab.SPEAKER_EDGES:
            continue
        speaker = entity.properties.get("speaker") or speaker_of.get(entity.segment_id or "")
        if not isinstance(speaker, str) or not canonical_name(speaker) or vocab.is_pronoun(speaker):
            continue
        name, template = vocab.SPEAKER_EDGES[entity.type]
        add_edge(
            resolve(speaker, "person"), node, name, template, entity.segment_id,
            entity.confidence, entity.evidence,
        )  # fmt: skip
    for rel in extraction.relations:
        if not canonical_name(rel.subject) or not canonical_name(rel.object):
            continue
        if vocab.is_pronoun(rel.subject) or vocab.is_pronoun(rel.object):
            continue
        predicate = vocab.normalise_predicate(rel.predicate)
        source = resolve(rel.subject, "person")
        target = resolve(rel.object, vocab.object_type(predicate))
        template = vocab.fact_sentence("{s}", predicate, "{o}")
        add_edge(
            source, target, vocab.edge_name(predicate), template, rel.segment_id,
            rel.confidence, rel.evidence, rel.properties,
        )  # fmt: skip
    return plan


def _transcript(episode: SessionEpisode) -> str:
    return "\n".join(f"{s.speaker}: {' '.join(s.text.split())}" for s in episode.segments)


def _only_in(row: dict[str, Any], episode_uuid: str) -> bool:
    """Whether no episode but this one states the fact."""
    return all(x == episode_uuid for x in row.get("episodes") or [])


def _display_name(existing: str | None, new: str) -> str:
    """Keep a node's name stable across sessions, but prefer a capitalised spelling."""
    if not existing:
        return new
    if existing == existing.lower() and new != new.lower():
        return new
    return existing


@dataclass(slots=True)
class _Existing:
    episode_created_at: datetime | None
    nodes: dict[str, dict[str, Any]]  # uuid → properties
    edges: dict[str, dict[str, Any]]  # facts whose `episodes` list the episode, by uuid
    mentions: dict[str, str]  # mention uuid → node uuid


_EDGE_RETURN = """
    e.uuid AS uuid, e.name AS name, e.fact AS fact, e.episodes AS episodes,
    s.uuid AS source_uuid, t.uuid AS target_uuid, s.name AS source_name, t.name AS target_name,
    e.created_at AS created_at, e.valid_at AS valid_at, e.invalid_at AS invalid_at,
    e.expired_at AS expired_at, e.invalidated_by AS invalidated_by,
    e.session_id AS session_id, e.segment_id AS segment_id, e.category AS category,
    e.reference_time AS reference_time
"""


def _timeline_fact(row: dict[str, Any]) -> TimelineFact:
    category = row.get("category")
    return TimelineFact(
        uuid=row["uuid"],
        source_uuid=row["source_uuid"],
        target_uuid=row["target_uuid"],
        name=row["name"],
        # graphiti's LLM path may leave valid_at empty: the fact holds from its episode's time
        # (as query.facts_as_of reads it)
        valid_at=to_datetime(row.get("valid_at")) or to_datetime(row.get("reference_time")),
        created_at=to_datetime(row.get("created_at")) or datetime.min.replace(tzinfo=UTC),
        invalid_at=to_datetime(row.get("invalid_at")),
        invalidated_by=row.get("invalidated_by"),
        session_id=row.get("session_id") or "",
        category=category if isinstance(category, str) else None,
        source_name=row.get("source_name") or "",
        target_name=row.get("target_name") or "",
    )


def merge_writes(into: GraphWrite, later: GraphWrite) -> None:
    """Add a later supersession pass's changes to `into`: a fact's last change wins (a fact
    reinstated, then ended again by another fact, is reported ended only)."""
    ended = {f.fact_uuid for f in later.invalidated}
    again = set(later.reinstated)
    into.invalidated = [f for f in into.invalidated if f.fact_uuid not in again | ended]
    into.invalidated += later.invalidated
    into.reinstated = [u for u in into.reinstated if u not in ended | again] + later.reinstated


class GraphWriter:
    def __init__(
        self,
        driver: GraphDriver,
        group_id: str,
        embedder: Embedder,
        graphiti_embedder: EmbedderClient,
    ) -> None:
        self.driver = driver
        self.group_id = group_id
        self.embedder = embedder
        self.graphiti_embedder = graphiti_embedder

    # --- reading what is there ---

    async def _load(self, plan: SessionPlan) -> _Existing:
        episode = await run(
            self.driver,
            "MATCH (e:Episodic {uuid: $uuid}) RETURN e.created_at AS created_at",
            uuid=plan.episode_uuid,
        )
        nodes = await run(
            self.driver,
            "MATCH (n:Entity) WHERE n.uuid IN $uuids RETURN n.uuid AS uuid, "
            "properties(n) AS props, labels(n) AS labels",
            uuids=list(plan.nodes),
        )
        edges = await run(
            self.driver,
            "MATCH (s:Entity)-[e:RELATES_TO]->(t:Entity) "
            "WHERE e.group_id = $group_id AND $episode IN e.episodes "
            f"RETURN {_EDGE_RETURN}, e.fact_embedding AS fact_embedding",
            group_id=self.group_id,
            episode=plan.episode_uuid,
        )
        mentions = await run(
            self.driver,
            "MATCH (ep:Episodic {uuid: $uuid})-[m:MENTIONS]->(n:Entity) "
            "RETURN m.uuid AS uuid, n.uuid AS node",
            uuid=plan.episode_uuid,
        )
        node_props = {}
        for row in nodes:
            props = dict(row["props"])
            props["labels"] = [x for x in row["labels"] if x != "Entity"]
            node_props[row["uuid"]] = props
        return _Existing(
            to_datetime(episode[0]["created_at"]) if episode else None,
            node_props,
            {r["uuid"]: r for r in edges},
            {r["uuid"]: r["node"] for r in mentions},
        )

    async def _load_timelines(
        self, facts: Iterable[tuple[str, str, str]]
    ) -> dict[str, dict[str, Any]]:
        """Every fact of the subjects of these (source, target, edge name) facts that can end
        or be ended with theirs (supersede.scope), by uuid."""
        wanted = scope(facts)
        if not wanted.subjects:
            return {}
        where = "e.group_id = $group_id AND e.name IN $names"
        rows = await run(
            self.driver,
            "MATCH (s:Entity)-[e:RELATES_TO]->(t:Entity) "
            f"WHERE s.uuid IN $subjects AND {where} RETURN {_EDGE_RETURN}",
            group_id=self.group_id,
            names=list(wanted.names),
            subjects=list(wanted.subjects),
        )
        if wanted.symmetric_names:  # the other direction of a symmetric pair
            rows += await run(
                self.driver,
                "MATCH (s:Entity)-[e:RELATES_TO]->(t:Entity) "
                f"WHERE t.uuid IN $subjects AND {where} RETURN {_EDGE_RETURN}",
                group_id=self.group_id,
                names=list(wanted.symmetric_names),
                subjects=list(wanted.subjects),
            )
        return {r["uuid"]: r for r in rows}

    # --- writing ---

    async def write(
        self, episode: SessionEpisode, extraction: Extraction, extractor_label: str
    ) -> GraphWrite:
        now = datetime.now(UTC)
        plan = plan_session(self.group_id, episode, extraction)
        # graphiti's LLM path may have written this session before: one episode per session
        replaced = await self.replace_session_episodes(episode.session_id, keep=plan.episode_uuid)
        existing = await self._load(plan)
        self._merge_nodes(plan, existing)
        for uuid, edge in plan.edges.items():
            old = existing.edges.get(uuid)
            edge.created_at = to_datetime(old["created_at"]) if old else now
            edge.episodes = [plan.episode_uuid] + [
                x for x in (old.get("episodes") or [] if old else []) if x != plan.episode_uuid
            ]
            if old:
                edge.invalid_at = to_datetime(old.get("invalid_at"))
                edge.expired_at = to_datetime(old.get("expired_at"))
                edge.invalidated_by = old.get("invalidated_by")
                if old.get("fact") == edge.fact and old.get("fact_embedding"):
                    edge.fact_embedding = list(old["fact_embedding"])
        stale = {u: r for u, r in existing.edges.items() if u not in plan.edges}
        dropped = {u: r for u, r in stale.items() if _only_in(r, plan.episode_uuid)}
        written = GraphWrite(plan.episode_uuid, nodes=len(plan.nodes), edges=len(plan.edges))
        updates = await self._supersede(plan, dropped, now, written, episode.session_id)
        embeddings = await self._embed(plan, existing)
        await self._save(plan, episode, extractor_label, existing, embeddings, now)
        await self._apply(updates)
        await self._remove_stale(plan, existing, stale, dropped)
        result = GraphWrite(plan.episode_uuid, nodes=len(plan.nodes), edges=len(plan.edges))
        result.invalidated, result.reinstated = replaced.invalidated, replaced.reinstated
        merge_writes(result, written)
        return result

    async def forget(self, session_id: str) -> GraphWrite:
        """Remove a session from the graph: its episode(s), the facts only it stated (facts
        they had ended become valid again), its mentions, and nodes nothing else refers to."""
        return await self.replace_session_episodes(session_id, keep=None)

    async def replace_session_episodes(self, session_id: str, keep: str | None) -> GraphWrite:
        """Remove every episode of the session but `keep` (this writer's own episode with
        supersession undone where it ended facts; graphiti's as store.remove_episode does,
        then the timelines of the removed facts' subjects recomputed). Returns the facts made
        valid again in `reinstated` (and any the recomputation ended in `invalidated`)."""
        own = vocab.episode_uuid(self.group_id, session_id)
        result = GraphWrite(keep or "")
        removed: list[tuple[str, str, str]] = []
        for uuid in await session_episodes(self.driver, self.group_id, session_id):
            if uuid == keep:
                continue
            if uuid == own:
                await self._remove_own_episode(session_id, result)
            else:
                removed += await remove_episode(self.driver, self.group_id, uuid)
        if removed:
            merge_writes(result, await self.supersede_facts(removed))
        return result

    async def _remove_own_episode(self, session_id: str, result: GraphWrite) -> None:
        plan = SessionPlan(vocab.episode_uuid(self.group_id, session_id))
        existing = await self._load(plan)
        dropped = {u: r for u, r in existing.edges.items() if _only_in(r, plan.episode_uuid)}
        updates = await self._supersede(plan, dropped, datetime.now(UTC), result, session_id)
        await self._apply(updates)
        await self._remove_stale(plan, existing, existing.edges, dropped)
        await run(
            self.driver,
            "MATCH (ep:Episodic {uuid: $uuid}) DETACH DELETE ep",
            uuid=plan.episode_uuid,
        )
        await delete_orphans(self.driver, sorted(set(existing.mentions.values())))

    async def _apply(self, updates: list[dict[str, Any]]) -> None:
        """Set the new invalid_at / expired_at / invalidated_by of facts already stored."""
        if updates:
            await run(
                self.driver,
                """
                UNWIND $rows AS row
                MATCH (:Entity)-[e:RELATES_TO {uuid: row.uuid}]->(:Entity)
                SET e.invalid_at = row.invalid_at, e.expired_at = row.expired_at,
                    e.invalidated_by = row.invalidated_by
                """,
                rows=updates,
            )

    def _merge_nodes(self, plan: SessionPlan, existing: _Existing) -> None:
        for uuid, node in plan.nodes.items():
            props = existing.nodes.get(uuid)
            if props is None:
                continue
            node.name = _display_name(props.get("name"), node.name)
            old = props.get("sensitivity")
            if _SENSITIVITY.get(str(old), 0) > _SENSITIVITY.get(node.sensitivity, 0):
                node.sensitivity = str(old)

    async def _supersede(
        self,
        plan: SessionPlan,
        stale: dict[str, dict[str, Any]],
        now: datetime,
        result: GraphWrite,
        session_id: str,
    ) -> list[dict[str, Any]]:
        """Recompute the timelines this write touches (supersede.py): those of the subjects of
        its facts and of the `stale` facts it removes. Sets the planned facts' invalid_at and
        returns the updates of facts already in the graph."""
        planned: dict[str, TimelineFact] = {}
        for edge in plan.edges.values():
            if in_timeline(edge.name):
                assert edge.created_at is not None
                planned[edge.uuid] = TimelineFact(
                    edge.uuid, edge.source.uuid, edge.target.uuid, edge.name, edge.valid_at,
                    edge.created_at, edge.invalid_at, edge.invalidated_by, session_id,
                    edge.properties.get("category"), edge.source.name, edge.target.name,
                )  # fmt: skip
        touched = [(f.source_uuid, f.target_uuid, f.name) for f in planned.values()]
        touched += [(r["source_uuid"], r["target_uuid"], r["name"]) for r in stale.values()]
        return await self._resolve(touched, planned, set(stale), plan, now, result)

    async def supersede_facts(self, facts: Iterable[tuple[str, str, str]]) -> GraphWrite:
        """Recompute and store the timelines of the subjects of these facts, each (source
        uuid, target uuid, edge name): after graphiti's add_episode wrote them, or after facts
        were removed (the facts they had ended become valid again)."""
        result = GraphWrite("")
        await self._apply(
            await self._resolve(list(facts), {}, set(), None, datetime.now(UTC), result)
        )
        return result

    async def _resolve(
        self,
        touched: list[tuple[str, str, str]],
        planned: dict[str, TimelineFact],
        removed: set[str],
        plan: SessionPlan | None,
        now: datetime,
        result: GraphWrite,
    ) -> list[dict[str, Any]]:
        """The timelines of the touched facts' subjects: stored facts but `removed`, with the
        `planned` ones (not stored yet) in place of their stored versions. Verdicts on planned
        facts are set on `plan`; the others are returned as updates. Changes go to `result`."""
        rows = {u: r for u, r in (await self._load_timelines(touched)).items() if u not in removed}
        timeline = {u: _timeline_fact(r) for u, r in rows.items()}
        timeline.update(planned)
        # CPU-bound on a long history (thousands of one subject's facts): off the event loop
        verdicts = await asyncio.to_thread(resolve_timeline, list(timeline.values()))
        changes = [
            (timeline[uuid], verdict)
            for uuid, verdict in verdicts.items()
            if changed(timeline[uuid], verdict)
        ]
        sessions = await self._sessions_of(changes, timeline, rows)
        updates: list[dict[str, Any]] = []
        for fact, verdict in changes:
            expired_at = now if verdict.invalid_at is not None else None
            edge = plan.edges.get(fact.uuid) if plan is not None else None
            if edge is not None:
                edge.invalid_at = verdict.invalid_at
                edge.invalidated_by = verdict.invalidated_by
                edge.expired_at = expired_at
                text, segment = edge.fact, edge.segment_id
            else:
                updates.append(
                    {
                        "uuid": fact.uuid,
                        "invalid_at": verdict.invalid_at,
                        "expired_at": expired_at,
                        "invalidated_by": verdict.invalidated_by,
                    }
                )
                text, segment = rows[fact.uuid].get("fact") or "", rows[fact.uuid].get("segment_id")
            if verdict.invalid_at is None:
                result.reinstated.append(fact.uuid)
            else:
                result.invalidated.append(self._invalidated(fact, verdict, text, segment, sessions))
        return updates

    async def _sessions_of(
        self,
        changes: list[tuple[TimelineFact, Verdict]],
        timeline: dict[str, TimelineFact],
        rows: dict[str, dict[str, Any]],
    ) -> dict[str, str]:
        """Fact uuid → the session that said it, for the facts of these changes and the facts
        that ended them. Facts of graphiti's LLM path have no session_id: their first
        episode's session."""
        sessions: dict[str, str] = {}
        episode_of: dict[str, str] = {}
        for fact, verdict in changes:
            for uuid in (fact.uuid, verdict.invalidated_by):
                known = timeline.get(uuid) if uuid else None
                if known is None or uuid is None:
                    continue
                if known.session_id:
                    sessions[uuid] = known.session_id
                elif episodes := (rows.get(uuid) or {}).get("episodes"):
                    episode_of[uuid] = episodes[0]
        if episode_of:
            names = {
                r["uuid"]: r.get("name")
                for r in await run(
                    self.driver,
                    "MATCH (ep:Episodic) WHERE ep.uuid IN $uuids "
                    "RETURN ep.uuid AS uuid, ep.name AS name",
                    uuids=sorted(set(episode_of.values())),
                )
            }
            for uuid, episode in episode_of.items():
                sessions[uuid] = session_of_episode_name(names.get(episode)) or ""
        return sessions

    @staticmethod
    def _invalidated(
        fact: TimelineFact,
        verdict: Verdict,
        text: str,
        segment: str | None,
        sessions: dict[str, str],
    ) -> InvalidatedFact:
        assert verdict.invalid_at is not None and verdict.invalidated_by is not None
        return InvalidatedFact(
            fact_uuid=fact.uuid,
            fact=text,
            predicate=fact.name,
            subject=fact.source_name,
            object=fact.target_name,
            invalid_at=verdict.invalid_at,
            invalidated_by=verdict.invalidated_by,
            session_id=sessions.get(fact.uuid, fact.session_id),
            segment_id=segment,
            subject_uuid=fact.source_uuid,
            object_uuid=fact.target_uuid,
            invalidated_by_session=sessions.get(
                verdict.invalidated_by, verdict.invalidated_by_session
            ),
        )

    async def _embed(self, plan: SessionPlan, existing: _Existing) -> dict[str, list[float]]:
        """Name embeddings of new or renamed nodes (returned by node uuid) and fact
        embeddings of new or changed facts (set on the plan), in one batch; unchanged ones
        are reused."""
        texts: list[str] = []
        targets: list[tuple[str, str]] = []
        node_embeddings: dict[str, list[float]] = {}
        for uuid, node in plan.nodes.items():
            props = existing.nodes.get(uuid) or {}
            if props.get("name") == node.name and props.get("name_embedding"):
                node_embeddings[uuid] = list(props["name_embedding"])
            else:
                texts.append(node.name)
                targets.append(("node", uuid))
        for uuid, edge in plan.edges.items():
            if edge.fact_embedding is None:
                texts.append(edge.fact)
                targets.append(("edge", uuid))
        if texts:
            vectors = await self.embedder.embed_passages(texts)
            for (kind, uuid), vector in zip(targets, vectors.tolist(), strict=True):
                if kind == "node":
                    node_embeddings[uuid] = vector
                else:
                    plan.edges[uuid].fact_embedding = vector
        return node_embeddings

    async def _save(
        self,
        plan: SessionPlan,
        episode: SessionEpisode,
        extractor_label: str,
        existing: _Existing,
        embeddings: dict[str, list[float]],
        now: datetime,
    ) -> None:
        from graphiti_core.edges import EntityEdge, EpisodicEdge
        from graphiti_core.nodes import EntityNode, EpisodeType, EpisodicNode
        from graphiti_core.utils.bulk_utils import add_nodes_and_edges_bulk

        created = existing.episode_created_at or now
        episode_node = EpisodicNode(
            uuid=plan.episode_uuid,
            name=session_episode_name(episode.session_id),
            group_id=self.group_id,
            labels=[],
            source=EpisodeType.message,
            source_description=f"her-os session {episode.session_id} ({extractor_label})",
            content=_transcript(episode),
            valid_at=utc(episode.started_at),
            created_at=created,
            entity_edges=list(plan.edges),
        )
        nodes = []
        for uuid, node in plan.nodes.items():
            props = existing.nodes.get(uuid) or {}
            attributes = {k: v for k, v in props.items() if k not in _NODE_CORE}
            attributes.update(
                type=node.type,
                canonical_name=canonical_name(node.name),
                sensitivity=node.sensitivity,
            )
            labels = sorted({*props.get("labels", []), vocab.label_of(node.type)} - {"Entity"})
            nodes.append(
                EntityNode(
                    uuid=uuid,
                    name=node.name,
                    group_id=self.group_id,
                    labels=labels,
                    created_at=to_datetime(props.get("created_at")) or now,
                    summary=props.get("summary") or "",
                    name_embedding=embeddings.get(uuid),
                    attributes=attributes,
                )
            )
        mentions = [
            EpisodicEdge(
                uuid=vocab.mention_uuid(plan.episode_uuid, uuid),
                group_id=self.group_id,
                source_node_uuid=plan.episode_uuid,
                target_node_uuid=uuid,
                created_at=created,
            )
            for uuid in plan.nodes
        ]
        edges = []
        for uuid, edge in plan.edges.items():
            attributes: dict[str, Any] = {
                "session_id": episode.session_id,
                "confidence": round(float(edge.confidence), 4),
                "extractor": extractor_label,
                "evidence": edge.evidence,
            }
            if edge.segment_id:
                attributes["segment_id"] = edge.segment_id
            attributes.update(edge.properties)
            if edge.invalidated_by:
                attributes["invalidated_by"] = edge.invalidated_by
            edges.append(
                EntityEdge(
                    uuid=uuid,
                    group_id=self.group_id,
                    source_node_uuid=edge.source.uuid,
                    target_node_uuid=edge.target.uuid,
                    created_at=edge.created_at or now,
                    name=edge.name,
                    fact=edge.fact,
                    fact_embedding=edge.fact_embedding,
                    episodes=edge.episodes,
                    valid_at=edge.valid_at,
                    invalid_at=edge.invalid_at,
                    expired_at=edge.expired_at,
                    reference_time=utc(episode.started_at),
                    attributes=attributes,
                )
            )
        try:
            await add_nodes_and_edges_bulk(
                self.driver, [episode_node], mentions, nodes, edges, self.graphiti_embedder
            )
        except unavailable_errors() as exc:
            from context_engine.graph.base import GraphUnavailableError

            raise GraphUnavailableError(f"graph database unavailable: {exc}") from exc

    async def _remove_stale(
        self,
        plan: SessionPlan,
        existing: _Existing,
        stale: dict[str, dict[str, Any]],
        dropped: dict[str, dict[str, Any]],
    ) -> None:
        """Facts the episode no longer states: deleted when no other episode states them
        (`dropped`), otherwise kept for those episodes with this one taken off their list."""
        if dropped:
            await run(
                self.driver,
                "MATCH (:Entity)-[e:RELATES_TO]->(:Entity) WHERE e.uuid IN $uuids DELETE e",
                uuids=list(dropped),
            )
        shared = [u for u in stale if u not in dropped]
        if shared:
            await run(
                self.driver,
                "MATCH (:Entity)-[e:RELATES_TO]->(:Entity) WHERE e.uuid IN $uuids "
                "SET e.episodes = [x IN e.episodes WHERE x <> $episode]",
                uuids=shared,
                episode=plan.episode_uuid,
            )
        stale_mentions = {m: n for m, n in existing.mentions.items() if n not in plan.nodes}
        if stale_mentions:
            await run(
                self.driver,
                "MATCH (:Episodic)-[m:MENTIONS]->(:Entity) WHERE m.uuid IN $uuids DELETE m",
                uuids=list(stale_mentions),
            )
        candidates = set(stale_mentions.values())
        for row in dropped.values():
            candidates.update((row["source_uuid"], row["target_uuid"]))
        await delete_orphans(self.driver, sorted(candidates - set(plan.nodes)))
