"""Observability: the chronicler (every event, its ring, SSE and storage), the engine's event
recorder, and what /health knows.
"""
