"""Durable work: the procrastinate jobs, the session stages (finalise, extract, graph, embed),
drift checks.
"""
