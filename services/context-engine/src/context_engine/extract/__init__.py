"""Entity extraction (issue 5): what was said → typed entities and relations.

`schema.py` holds the shared vocabulary (the nine entity types, sensitivity, per-type
confidence gates) and the rules every extractor's output goes through (gates, dedup by type and
case-folded name, linking each entity to its best segment). `patterns.py` finds promises,
decisions, questions, relationships and habits in text. The extractors build on these.
"""
