"""The search indexes: the keyword index (Tantivy) and the segment and entity vectors."""
