"""The retrieval legs, one module each: keyword (BM25), vector, graph."""
