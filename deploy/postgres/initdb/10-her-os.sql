-- Runs once, when the postgres container starts on an empty volume: the image's entrypoint
-- runs it with psql, connected to POSTGRES_DB as POSTGRES_USER, after creating both. The
-- schema itself is the context engine's: it applies its Alembic migrations when it starts.
-- (tests/test_compose.py runs this file against a real PostgreSQL.)
DO $$
BEGIN
    -- Times are stored as timestamptz; sessions see them in UTC whatever the host's zone.
    EXECUTE format('ALTER DATABASE %I SET timezone TO %L', current_database(), 'UTC');
    -- Only the platform's role (the owner) may connect to its database.
    EXECUTE format('REVOKE CONNECT, TEMPORARY ON DATABASE %I FROM PUBLIC', current_database());
END
$$;
