"""What changed since the vectors were written (issue 37): `vector_todo` holds a session whose
segments, or an entity whose document's parts, changed, filled by triggers, so the minute's
scans read what changed instead of comparing every segment and every entity's document with
what was embedded (index/vector_todo.py).

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-29 04:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

# (trigger, table, event, transition tables, what the rows name)
TRIGGERS = (
    ("vector_todo_segments_ins", "segments", "INSERT", "NEW", "session"),
    ("vector_todo_segments_upd", "segments", "UPDATE", "NEW", "session"),
    ("vector_todo_segment_vectors_del", "segment_vectors", "DELETE", "OLD", "unrecorded"),
    ("vector_todo_mentions_ins", "entity_mentions", "INSERT", "NEW", "mention"),
    ("vector_todo_mentions_upd", "entity_mentions", "UPDATE", "NEW", "mention"),
    ("vector_todo_mentions_del", "entity_mentions", "DELETE", "OLD", "mention"),
    ("vector_todo_entities_ins", "entities", "INSERT", "NEW", "entity"),
    ("vector_todo_entities_upd", "entities", "UPDATE", "OLD+NEW", "entity_update"),
    ("vector_todo_entities_del", "entities", "DELETE", "OLD", "entity"),
)
# Each function marks what its rows name; `changed` moves on at every mark, so a run that
# read the mark before the change does not clear it (PostgreSQL allows one event per trigger
# with a transition table: one trigger per event, statement-level).
KEYS = {
    "session": "SELECT DISTINCT 'session', session_id FROM changed_rows",
    # a vector record deleted while its segment is still active (a repair, a forget): the
    # segment is to embed again (not for a replaced or deleted segment: nothing to embed)
    "unrecorded": "SELECT DISTINCT 'session', o.session_id FROM changed_rows o JOIN segments s"
    " ON s.session_id = o.session_id AND s.segment_id = o.segment_id"
    " AND s.replaced_by IS NULL",
    "mention": "SELECT DISTINCT 'entity', entity_id::text FROM changed_rows",
    "entity": "SELECT DISTINCT 'entity', id::text FROM changed_rows",
    # an entity's row changes often (last seen, tier, salience: the nightly consolidation
    # updates every entity); only what its document and its point depend on marks it
    "entity_update": "SELECT DISTINCT 'entity', n.id::text FROM changed_rows n"
    " JOIN old_rows o ON o.id = n.id"
    " WHERE (n.name, n.type, n.episode_count > 0)"
    " IS DISTINCT FROM (o.name, o.type, o.episode_count > 0)",
}
REFERENCING = {
    "NEW": "NEW TABLE AS changed_rows",
    "OLD": "OLD TABLE AS changed_rows",
    "OLD+NEW": "OLD TABLE AS old_rows NEW TABLE AS changed_rows",
}


def upgrade() -> None:
    op.execute("CREATE SEQUENCE vector_todo_changed")
    op.create_table(
        "vector_todo",
        sa.Column("kind", sa.Text(), primary_key=True),  # 'session' or 'entity'
        sa.Column("key", sa.Text(), primary_key=True),
        sa.Column(
            "changed",
            sa.BigInteger(),
            nullable=False,
            server_default=sa.text("nextval('vector_todo_changed')"),
        ),
    )
    for name, select in KEYS.items():
        op.execute(
            f"""
            CREATE FUNCTION vector_todo_{name}() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
              INSERT INTO vector_todo (kind, key) {select}
              ON CONFLICT (kind, key) DO UPDATE SET changed = nextval('vector_todo_changed');
              RETURN NULL;
            END $$
            """
        )
    # A deleted session takes its mark with it (nothing is left to embed).
    op.execute(
        """
        CREATE FUNCTION vector_todo_session_gone() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          DELETE FROM vector_todo
          WHERE kind = 'session' AND key IN (SELECT session_id FROM changed_rows);
          RETURN NULL;
        END $$
        """
    )
    op.execute(
        "CREATE TRIGGER vector_todo_sessions_del AFTER DELETE ON sessions "
        "REFERENCING OLD TABLE AS changed_rows "
        "FOR EACH STATEMENT EXECUTE FUNCTION vector_todo_session_gone()"
    )
    for trigger, table, event, transition, name in TRIGGERS:
        op.execute(
            f"CREATE TRIGGER {trigger} AFTER {event} ON {table} "
            f"REFERENCING {REFERENCING[transition]} "
            f"FOR EACH STATEMENT EXECUTE FUNCTION vector_todo_{name}()"
        )


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS vector_todo_sessions_del ON sessions")
    op.execute("DROP FUNCTION IF EXISTS vector_todo_session_gone()")
    for trigger, table, *_ in TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS {trigger} ON {table}")
    for name in KEYS:
        op.execute(f"DROP FUNCTION IF EXISTS vector_todo_{name}()")
    op.drop_table("vector_todo")
    op.execute("DROP SEQUENCE IF EXISTS vector_todo_changed")
