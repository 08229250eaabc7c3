"""/v1/context: the query, the legs (keyword, vector, graph) and their fusion."""
