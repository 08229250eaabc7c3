"""The knowledge graph layer: graphiti-core on FalkorDB (embedded default) or Neo4j.

`KnowledgeGraph` (knowledge.py) is what the engine uses: open/close/healthy, the no-LLM writer
(`write_extraction`), graphiti's LLM pipeline (`add_episode`), and queries (entities,
neighbourhoods, facts as of a time, graphiti search). graphiti's telemetry is switched off
before graphiti is imported anywhere in this package (a personal memory platform sends
nothing anywhere). Importing this package stays light: graphiti is imported on first use of
`KnowledgeGraph`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

os.environ["GRAPHITI_TELEMETRY_ENABLED"] = "false"

from context_engine.graph.base import (
    EpisodeRef,
    Fact,
    GraphConfigError,
    GraphError,
    GraphLLMError,
    GraphNode,
    GraphUnavailableError,
    GraphWrite,
    InvalidatedFact,
    Neighbourhood,
    SessionEpisode,
)

if TYPE_CHECKING:
    from context_engine.graph.knowledge import KnowledgeGraph

__all__ = [
    "EpisodeRef",
    "Fact",
    "GraphConfigError",
    "GraphError",
    "GraphLLMError",
    "GraphNode",
    "GraphUnavailableError",
    "GraphWrite",
    "InvalidatedFact",
    "KnowledgeGraph",
    "Neighbourhood",
    "SessionEpisode",
]


def __getattr__(name: str) -> Any:
    if name == "KnowledgeGraph":
        from context_engine.graph.knowledge import KnowledgeGraph

        return KnowledgeGraph
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
