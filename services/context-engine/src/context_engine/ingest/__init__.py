"""Ingestion: JSONL transcripts and event files tailed into PostgreSQL, the dedup rules,
sessions, memories added as text.
"""
