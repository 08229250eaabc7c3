"""The MCP server: her-os as any agent's memory (issue 28; docs/mcp.md, ADR 0026).

Every tool is a call to the engine's own REST API (`client.MemoryApi`), so a tool's input
gets exactly the REST validation and its errors are the REST errors. Served by the engine at
`/mcp` (streamable HTTP, `http.py`) and by `her-os mcp` over stdio (`stdio.py`).

The package is `context_engine.mcp`; the SDK is the top-level `mcp`, which absolute imports
always reach (nothing here puts this directory on sys.path).
"""
