"""PostgreSQL: the two pools, the schema and its migrations, the stats queries."""
