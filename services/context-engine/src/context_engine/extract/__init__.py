"""Entity extraction (issue 5): what was said → typed entities and relations.

- `schema.py`: the shared vocabulary (nine entity types, sensitivity, per-type confidence
  gates) and the rules every extractor's output goes through (gates, dedup by type and
  case-folded name, linking each entity to its best segment).
- `base.py`: the `Extractor` interface (name, version, `extract(segments) -> Extraction`).
- `fast.py` (+ `spacy_model.py`, `patterns.py`, `emotion.py`): the fast extractor, the
  embedded default with no LLM — spaCy NER, patterns, VADER.
- `llm.py`: the LLM extractor over any OpenAI-compatible server (`context_engine.llm`).
"""
