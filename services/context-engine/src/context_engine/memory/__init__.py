"""Memory over time: tiers and their consolidation, communities, promises, the daily reflection."""
