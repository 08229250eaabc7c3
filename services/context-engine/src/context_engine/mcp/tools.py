"""The MCP tools: each one REST call (or two) through `MemoryApi`, its answer made into a
bounded, typed result (results.py). Names follow graphiti's MCP server where the meaning is
the same (ADR 0026). A REST error becomes the tool's error with the REST message."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Annotated, Any

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import AfterValidator, Field

from context_engine.extract.schema import EntityType
from context_engine.knowledge.statement_facts import content
from context_engine.mcp.client import FORGET_WAIT_S, MemoryApi, MemoryApiError, Params, path_id
from context_engine.mcp.limits import MAX_ITEMS, MAX_SEGMENTS, bound, clip
from context_engine.mcp.results import (
    AddMemoryResult,
    Episode,
    EpisodeResult,
    EpisodesResult,
    Fact,
    FactsResult,
    ForgetResult,
    Line,
    Node,
    NodesResult,
    ProfileResult,
    Promise,
    PromisesResult,
    Reflection,
    SaidFact,
    SearchMemoryResult,
    StatusResult,
)
from context_engine.memory.tiers import Tier
from her_os_shared.idempotency import HEADER as IDEMPOTENCY_HEADER
from her_os_shared.idempotency import KEY_PATTERN, MAX_KEY_CHARS, check_key
from her_os_shared.ids import ID_PATTERN, SafeId

ApiFactory = Callable[[], MemoryApi]

# Written as the added memory's session `device_id`: where it came from.
MEMORY_SOURCE = "mcp"
# Entities fetched when a search's filters are applied here (the REST search takes one type
# and one tier): the REST maximum.
SEARCH_POOL = 100

AsOf = Annotated[
    datetime | None,
    Field(
        description="ISO 8601 time the question is about, e.g. 2025-06-01T12:00:00Z "
        "(default now; without a timezone it is UTC)"
    ),
]
SessionId = Annotated[
    SafeId,
    Field(
        description="a session id as other tools return it (letters, digits, _ and -)",
        json_schema_extra={"pattern": ID_PATTERN, "maxLength": 128},
    ),
]
EntityId = Annotated[int, Field(ge=1, le=2**63 - 1, description="an entity_id from search_nodes")]


class MemoryTools:
    """The tools, bound to the memory they read (`api_factory` gives its MemoryApi)."""

    def __init__(self, api_factory: ApiFactory, *, read_only: bool) -> None:
        self._api = api_factory
        self.read_only = read_only

    async def _rest(self, call: Callable[[MemoryApi], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        try:
            return await call(self._api())
        except MemoryApiError as exc:
            raise ToolError(str(exc)) from None

    async def _get(self, path: str, params: Params | None = None) -> dict[str, Any]:
        return await self._rest(lambda api: api.get(path, params))

    # --- reading ----------------------------------------------------------------------------

    async def search_memory(
        self,
        query: Annotated[
            str,
            Field(
                min_length=1,
                max_length=512,
                description='what to look for, in natural language ("where does Priya live '
                'now?") or keywords; "I", "me" and "my" mean the owner',
            ),
        ],
        limit: Annotated[int, Field(ge=1, le=MAX_ITEMS, description="memories at most")] = 10,
        as_of: AsOf = None,
        hours_back: Annotated[
            float | None,
            Field(
                gt=0,
                le=24 * 365 * 100,
                description="only what was said in the hours before as_of (default: all time)",
            ),
        ] = None,
        tiers: Annotated[
            list[Tier] | None,
            Field(
                min_length=1,
                description="only memories of these tiers: L0 episodes, L1 validated facts, "
                "L2 deep patterns (default: all)",
            ),
        ] = None,
    ) -> SearchMemoryResult:
        """Search everything the owner's memory holds: conversations heard by the wearable,
        typed notes, daily reflections. Hybrid search (keywords, meaning and the knowledge
        graph). Returns what was said (text, speaker, when, which session), best first, and
        the facts true at `as_of` about the people and things the query names, each with
        since when and what it replaced. Use this first for any question about the owner's
        life, people, places, preferences or past conversations."""
        params: dict[str, Any] = {"query": query, "limit": limit, "hours_back": hours_back}
        if as_of is not None:
            params["as_of"] = as_of.isoformat()
        if tiers:
            params["tier"] = ",".join(dict.fromkeys(tiers))
        body = await self._get("/v1/context", params)
        return bound(SearchMemoryResult.from_rest(body))

    async def search_memory_facts(
        self,
        query: Annotated[
            str | None,
            Field(
                min_length=1,
                max_length=512,
                description="search the facts by words and meaning (graphiti's hybrid search)",
            ),
        ] = None,
        subject: Annotated[
            str | None,
            Field(min_length=1, max_length=200, description="only facts about this name"),
        ] = None,
        as_of: AsOf = None,
        include_history: Annotated[
            bool,
            Field(description="also facts that had ended by as_of, each with what ended it"),
        ] = False,
        max_facts: Annotated[int, Field(ge=1, le=MAX_ITEMS)] = 10,
    ) -> FactsResult:
        """Facts of the knowledge graph that were true at a time ("Priya lives in Lisbon",
        "Arjun drinks tea"), each with when it became true (valid_at), when it stopped
        (invalid_at) and where it was said; and `statements`, what people said about
        themselves and others ("Rosa keeps bees on their roof", plans, habits, what ended).
        Give `subject` for everything known about one person or thing, `query` to search the
        facts, neither for the latest facts.
        `include_history` also lists what used to be true (works with subject, not query).
        Needs the knowledge graph (the engine says so when there is none)."""
        if query is not None and include_history:
            raise ToolError(
                "include_history lists the facts about a subject over time and cannot be "
                "combined with query: give subject instead"
            )
        when = as_of.isoformat() if as_of is not None else None
        if query is None:
            params: dict[str, Any] = {"as_of": when, "subject": subject, "limit": max_facts}
            params["history"] = include_history
            body = await self._get("/v1/facts", params)
            facts = body["facts"]
        else:
            fetch = SEARCH_POOL if subject else max_facts
            search = {"query": query, "as_of": when, "limit": fetch}
            body = await self._get("/v1/graph/search", search)
            facts = body["facts"]
            if subject:
                wanted = subject.casefold()
                facts = [
                    f for f in facts if wanted in (f["subject"].casefold(), f["object"].casefold())
                ]
        found = [Fact.from_rest(f) for f in facts[:max_facts]]
        said = body.get("statements", [])
        if query is not None:  # the statements about the subject (or all) that share its words
            listed = await self._get(
                "/v1/facts", {"as_of": when, "subject": subject, "limit": SEARCH_POOL}
            )
            said = matching(listed.get("statements", []), query)
        statements = [SaidFact.from_rest(x) for x in said[:max_facts]]
        return bound(
            FactsResult(
                message=f"{len(found)} facts, {len(statements)} statements",
                as_of=body["as_of"],
                facts=found,
                statements=statements,
            )
        )

    async def search_nodes(
        self,
        query: Annotated[
            str,
            Field(
                min_length=1, max_length=500, description='what to look for: "my wife", "Bangalore"'
            ),
        ],
        max_nodes: Annotated[int, Field(ge=1, le=MAX_ITEMS)] = 10,
        entity_types: Annotated[
            list[EntityType] | None, Field(min_length=1, description="only these types")
        ] = None,
        tiers: Annotated[
            list[Tier] | None, Field(min_length=1, description="only these tiers")
        ] = None,
    ) -> NodesResult:
        """Find entities (people, places, organizations, topics, events, promises, …) by
        meaning: "who is my wife" finds Priya, "Bangalore" finds Bengaluru. Returns each with
        its entity_id (for get_entity_profile and delete_entity), type, tier and how often it
        came up, best first."""
        types = list(dict.fromkeys(entity_types or []))
        wanted_tiers = list(dict.fromkeys(tiers or []))
        params: dict[str, Any] = {"query": query}
        if len(types) == 1:
            params["type"] = types[0]
        if len(wanted_tiers) == 1:
            params["tier"] = wanted_tiers[0]
        here = len(types) > 1 or len(wanted_tiers) > 1  # filters the REST search cannot apply
        params["limit"] = SEARCH_POOL if here else max_nodes
        body = await self._get("/v1/entities/search", params)
        found = [
            e
            for e in body["entities"]
            if (not types or e["type"] in types) and (not wanted_tiers or e["tier"] in wanted_tiers)
        ][:max_nodes]
        nodes = [Node.from_rest(e) for e in found]
        return bound(NodesResult(message=f"{len(nodes)} entities", nodes=nodes, total=len(nodes)))

    async def list_entities(
        self,
        entity_type: Annotated[EntityType | None, Field(description="only this type")] = None,
        tier: Annotated[Tier | None, Field(description="only this memory tier")] = None,
        name_contains: Annotated[
            str | None, Field(min_length=1, max_length=200, description="name contains (any case)")
        ] = None,
        limit: Annotated[int, Field(ge=1, le=MAX_ITEMS)] = 20,
        cursor: Annotated[
            str | None, Field(max_length=20, description="next_cursor of the previous page")
        ] = None,
    ) -> NodesResult:
        """List the entities the memory knows, most recently mentioned first, optionally of
        one type (person, place, organization, event, promise, decision, question, habit,
        emotion, topic) or tier. Page with `cursor`."""
        offset = 0
        if cursor is not None:
            if not cursor.isdigit():
                raise ToolError("cursor: not a cursor this tool returned (pass next_cursor as is)")
            offset = int(cursor)
        params = {
            "type": entity_type,
            "tier": tier,
            "q": name_contains,
            "limit": limit,
            "offset": offset,
        }
        body = await self._get("/v1/entities", params)
        nodes = [Node.from_rest(e) for e in body["entities"]]
        after = offset + len(nodes)
        return bound(
            NodesResult(
                message=f"{len(nodes)} of {body['total']} entities",
                nodes=nodes,
                total=body["total"],
                next_cursor=str(after) if nodes and after < body["total"] else None,
            )
        )

    async def get_entity_profile(
        self,
        entity_id: Annotated[EntityId | None, Field(description="the entity's id")] = None,
        name: Annotated[
            str | None,
            Field(min_length=1, max_length=200, description="or its exact name (any case)"),
        ] = None,
        as_of: AsOf = None,
    ) -> ProfileResult:
        """Who or what an entity is: its relations to people (spouse, sister, boss…), its
        current facts (since when, and what they replaced), what changed, where it was first
        and last mentioned and the sessions that talk most about it. Give entity_id (from
        search_nodes or list_entities) or an exact name; a name several entities share is
        an error listing them."""
        if (entity_id is None) == (name is None):
            raise ToolError("give entity_id or name (one of them)")
        if entity_id is None:
            assert name is not None
            entity_id = await self._resolve(name)
        params = {"as_of": as_of.isoformat() if as_of is not None else None}
        body = await self._get(f"/v1/entities/{path_id(entity_id)}/profile", params)
        return bound(ProfileResult.from_rest(body))

    async def _resolve(self, name: str) -> int:
        body = await self._get("/v1/entities", {"q": name, "limit": 500})
        wanted = " ".join(name.split()).casefold()
        same = [e for e in body["entities"] if e["name"].casefold() == wanted]
        if not same:
            raise ToolError(f"no entity is named {name!r}: find it with search_nodes")
        if len(same) > 1:
            listed = ", ".join(f"{e['name']} ({e['type']}, entity_id {e['id']})" for e in same[:10])
            raise ToolError(f"several entities are named {name!r}: {listed}; give entity_id")
        return int(same[0]["id"])

    async def get_episodes(
        self, max_episodes: Annotated[int, Field(ge=1, le=MAX_ITEMS)] = 10
    ) -> EpisodesResult:
        """The most recent conversations (sessions; graphiti's episodes), newest first: when
        each started and ended and how many segments it has. Read one with get_episode."""
        body = await self._get("/v1/sessions", {"limit": max_episodes})
        episodes = [Episode.from_rest(s) for s in body["sessions"]]
        return bound(
            EpisodesResult(
                message=f"{len(episodes)} of {body['total']} sessions",
                episodes=episodes,
                total=body["total"],
            )
        )

    async def get_episode(
        self,
        session_id: SessionId,
        offset: Annotated[int, Field(ge=0, description="first segment to return")] = 0,
        max_segments: Annotated[int, Field(ge=1, le=MAX_SEGMENTS)] = 100,
    ) -> EpisodeResult:
        """One conversation's transcript: who said what, in order. Long ones come in pages:
        pass next_offset as offset for the rest."""
        body = await self._get(
            f"/v1/sessions/{path_id(session_id)}", {"offset": offset, "limit": max_segments}
        )
        page, total = body["segments"], body["segments_count"]  # only the page is read
        lines = [
            Line(
                segment_id=s["segment_id"],
                speaker=s["speaker"],
                text=clip(s["text"]) or "",
                spoken_at=s["spoken_at"],
                start=s["start"],
                end=s["end"],
            )
            for s in page
        ]
        result = bound(
            EpisodeResult(
                message=f"segments {offset + 1}-{offset + len(lines)} of {total}"
                if lines
                else f"no segments from {offset} (the session has {total})",
                episode=Episode.from_rest(body),
                segments=lines,
                offset=offset,
                next_offset=None,
            )
        )
        after = offset + len(result.segments)
        result.next_offset = after if after < total else None
        return result

    async def get_daily_reflection(
        self,
        date: Annotated[
            str | None,
            Field(
                pattern=r"^\d{4}-\d{2}-\d{2}$",
                description="YYYY-MM-DD, a day in the engine's timezone (default today)",
            ),
        ] = None,
    ) -> Reflection:
        """The reflection of one day: what happened (facts first said, facts that changed),
        the conversations, the people and topics, promises made and kept, and the mood. It is
        written when first asked and again when the day's memories change."""
        body = await self._get("/v1/daily", {"date": date})
        return bound(Reflection.from_rest(body))

    async def get_open_promises(
        self, limit: Annotated[int, Field(ge=1, le=MAX_ITEMS)] = 20
    ) -> PromisesResult:
        """Promises made and not yet kept ("I'll call the movers tomorrow"), most recent
        first, with who made them, when, and the words they were made in."""
        body = await self._get("/v1/promises", {"status": "open", "limit": limit})
        promises = [Promise.from_rest(p) for p in body["promises"]]
        return bound(
            PromisesResult(
                message=f"{len(promises)} of {body['total']} open promises",
                promises=promises,
                total=body["total"],
            )
        )

    async def get_status(self) -> StatusResult:
        """Whether the memory is up and what it holds: sessions, segments, entities, and any
        layer it is running without (knowledge graph, vectors)."""
        api = self._api()
        health = await api.health()
        try:
            stats = await api.get("/v1/stats")
        except MemoryApiError as exc:
            return StatusResult(status="unavailable", message=str(exc), read_only=self.read_only)
        degraded = {str(k): clip(str(v), 300) or "" for k, v in stats.get("degraded", {}).items()}
        return StatusResult(
            status=health,
            message=f"the memory holds {stats['sessions_count']} sessions, "
            f"{stats['segments_count']} segments and {stats['entities_count']} entities",
            read_only=self.read_only,
            sessions=stats["sessions_count"],
            segments=stats["segments_count"],
            entities=stats["entities_count"],
            extractor=stats["extraction"]["extractor"],
            knowledge_graph=stats["extraction"]["graph_backend"] is not None,
            vectors=stats["vectors"]["status"] if stats["vectors"]["enabled"] else "off",
            degraded=degraded,
        )

    # --- writing ----------------------------------------------------------------------------

    async def add_memory(
        self,
        episode_body: Annotated[
            str,
            Field(
                min_length=1,
                max_length=20_000,
                description="what to remember, as it would be said or written; paragraphs "
                "become separate segments",
            ),
        ],
        speaker: Annotated[
            str | None,
            Field(
                min_length=1,
                max_length=128,
                description="who said or wrote it (default: the owner)",
            ),
        ] = None,
        reference_time: Annotated[
            datetime | None,
            Field(
                description="when it was said or happened, ISO 8601 with a timezone "
                "(default now; from 1900 to 5 minutes ahead; a time without a timezone is refused)"
            ),
        ] = None,
        session_id: Annotated[
            SafeId | None,
            Field(
                description="an existing session to append to (default: a new one)",
                json_schema_extra={"pattern": ID_PATTERN, "maxLength": 128},
            ),
        ] = None,
        idempotency_key: Annotated[
            str | None,
            Field(
                description="a unique key (e.g. a UUID) for this memory: retrying the call with "
                "the same key and the same arguments (within the engine's window, 24 hours by "
                "default) returns the first result and stores nothing twice",
                json_schema_extra={"pattern": KEY_PATTERN, "maxLength": MAX_KEY_CHARS},
            ),
            AfterValidator(check_key),
        ] = None,
    ) -> AddMemoryResult:
        """Remember something: the text is written as a transcript session, like speech
        the wearable heard, so it is searched, extracted into entities and facts, and
        forgettable like everything else. It is ingested in the background: searchable by
        search_memory within seconds; its entities and facts follow once the session is
        finalised (after a pause in it, 15 minutes by default, or at once for a
        reference_time that long ago)."""
        payload: dict[str, Any] = {"text": episode_body, "source": MEMORY_SOURCE}
        if speaker is not None:
            payload["speaker"] = speaker
        if reference_time is not None:
            payload["at"] = reference_time.isoformat()
        if session_id is not None:
            payload["session_id"] = session_id
        # The REST route's header: the same key, the same window, the same answer.
        headers = {IDEMPOTENCY_HEADER: idempotency_key} if idempotency_key is not None else None
        body = await self._rest(lambda api: api.post("/v1/memories", payload, headers=headers))
        return AddMemoryResult(
            message=f"remembered as session {body['session_id']} "
            f"({len(body['segment_ids'])} segments); searchable once ingested, within seconds",
            session_id=body["session_id"],
            segment_ids=body["segment_ids"][:MAX_SEGMENTS],
            spoken_at=body["spoken_at"],
            ingest=body["ingest"],
        )

    async def delete_episode(self, session_id: SessionId) -> ForgetResult:
        """DESTRUCTIVE: forgets one conversation (session) everywhere: its transcript file,
        its segments, the entities and facts that only it mentioned, its vectors and its
        graph episode. It cannot be undone."""
        path = f"/v1/sessions/{path_id(session_id)}"
        body = await self._rest(lambda api: api.delete(path, {"wait_s": FORGET_WAIT_S}))
        return ForgetResult.from_rest(body, f"session {session_id}")

    async def delete_entity(self, entity_id: EntityId) -> ForgetResult:
        """DESTRUCTIVE: forgets an entity everywhere: the entity, every fact naming it, and
        every segment that mentions it (removed whole, from the transcripts too). It cannot
        be undone. Find the entity_id with search_nodes first."""
        path = f"/v1/entities/{path_id(entity_id)}"
        body = await self._rest(lambda api: api.delete(path, {"wait_s": FORGET_WAIT_S}))
        return ForgetResult.from_rest(body, f"entity {entity_id}")

    async def forget_person(
        self,
        name: Annotated[
            str,
            Field(min_length=2, max_length=200, description="the person's name, e.g. Priya"),
        ],
    ) -> ForgetResult:
        """DESTRUCTIVE: forgets a person by name everywhere: every person of that name, every
        fact and segment naming them (any case), every segment they spoke, and their enrolled
        voice. It cannot be undone."""
        body = await self._rest(
            lambda api: api.post("/v1/forget", {"person": name}, {"wait_s": FORGET_WAIT_S})
        )
        return ForgetResult.from_rest(body, "that person")

    # --- resources --------------------------------------------------------------------------

    async def owner_profile(self) -> ProfileResult | str:
        """The owner's profile, or why there is none: the owner is who "I" and "me" mean to
        the engine (CONTEXT_ENGINE_OWNER_NAME, else the named speaker heard most)."""
        body = await self._get("/v1/context", {"query": "about me", "limit": 1})
        owner = next((s for s in body.get("about", []) if s.get("owner")), None)
        if owner is None:
            return (
                "The owner is not known: set CONTEXT_ENGINE_OWNER_NAME to the owner's name as "
                "it is spoken (a knowledge graph must be configured), or nothing they said "
                "has been extracted yet."
            )
        profile = await self._get(f"/v1/entities/{path_id(owner['id'])}/profile")
        return bound(ProfileResult.from_rest(profile))

    async def reflection_today(self) -> Reflection:
        body = await self._get("/v1/daily")
        return bound(Reflection.from_rest(body))


READ_TOOLS = (
    "search_memory", "search_memory_facts", "search_nodes", "list_entities",
    "get_entity_profile", "get_episodes", "get_episode", "get_daily_reflection",
    "get_open_promises", "get_status",
)  # fmt: skip
WRITE_TOOLS = ("add_memory",)
DESTRUCTIVE_TOOLS = ("delete_episode", "delete_entity", "forget_person")

TITLES: Mapping[str, str] = {
    "search_memory": "Search the memory",
    "search_memory_facts": "Search facts true at a time",
    "search_nodes": "Find entities",
    "list_entities": "List entities",
    "get_entity_profile": "Entity profile",
    "get_episodes": "Recent conversations",
    "get_episode": "A conversation's transcript",
    "get_daily_reflection": "Daily reflection",
    "get_open_promises": "Open promises",
    "get_status": "Memory status",
    "add_memory": "Remember something",
    "delete_episode": "Forget a conversation",
    "delete_entity": "Forget an entity",
    "forget_person": "Forget a person",
}


def matching(statements: list[dict[str, Any]], query: str) -> list[dict[str, Any]]:
    """The statements that share a content word with the query, most shared first."""
    want = content(query)
    scored = [(len(want & content(x["text"])), i, x) for i, x in enumerate(statements)]
    return [x for n, _, x in sorted(scored, key=lambda t: (-t[0], t[1])) if n]
