"""Memory tiers, consolidation, communities, daily reflections, promises (issue 7).

- entities: tier, salience, low_salience, contradicted, tier_changed_at, consolidated_at,
  community_id.
- communities, consolidation_runs, entity_tier_history, daily_reflections,
  promise_fulfilments: new.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-22 11:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


_COUNTS = ("entities_total", "processed", "promoted", "demoted", "low_salience", "communities")


def _ts(name: str, *, now: bool = False, nullable: bool = True) -> sa.Column:
    default = sa.text("now()") if now else None
    return sa.Column(
        name, sa.DateTime(timezone=True), server_default=default, nullable=nullable and not now
    )


def upgrade() -> None:
    op.create_table(
        "communities",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("uuid", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("size", sa.Integer(), server_default="0", nullable=False),
        _ts("created_at", now=True),
        _ts("updated_at", now=True),
        sa.PrimaryKeyConstraint("id", name="pk_communities"),
        sa.UniqueConstraint("uuid", name="uq_communities_uuid"),
    )
    op.create_table(
        "consolidation_runs",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("trigger", sa.Text(), nullable=False),
        sa.Column("night", sa.Text()),
        _ts("as_of", nullable=False),
        sa.Column("status", sa.Text(), server_default="running", nullable=False),
        *(sa.Column(name, sa.Integer(), server_default="0", nullable=False) for name in _COUNTS),
        sa.Column("error", sa.Text()),
        _ts("started_at", now=True),
        _ts("finished_at"),
        sa.PrimaryKeyConstraint("id", name="pk_consolidation_runs"),
        sa.UniqueConstraint("night", name="uq_consolidation_runs_night"),
    )
    op.add_column("entities", sa.Column("tier", sa.Text(), server_default="L0", nullable=False))
    op.add_column("entities", sa.Column("salience", sa.Float(), server_default="1", nullable=False))
    for flag in ("low_salience", "contradicted"):
        op.add_column(
            "entities", sa.Column(flag, sa.Boolean(), server_default="false", nullable=False)
        )
    op.add_column("entities", _ts("tier_changed_at"))
    op.add_column("entities", _ts("consolidated_at"))
    op.add_column("entities", sa.Column("community_id", sa.BigInteger()))
    op.create_foreign_key(
        "fk_entities_community_id_communities",
        "entities",
        "communities",
        ["community_id"],
        ["id"],
        ondelete="SET NULL",
    )
    op.create_index("ix_entities_tier", "entities", ["tier"])
    op.create_index("ix_entities_community_id", "entities", ["community_id"])

    op.create_table(
        "entity_tier_history",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("entity_id", sa.BigInteger(), nullable=False),
        sa.Column("from_tier", sa.Text(), nullable=False),
        sa.Column("to_tier", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        _ts("changed_at", nullable=False),
        sa.Column("run_id", sa.BigInteger()),
        sa.ForeignKeyConstraint(
            ["entity_id"],
            ["entities.id"],
            name="fk_entity_tier_history_entity_id_entities",
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["consolidation_runs.id"],
            name="fk_entity_tier_history_run_id_consolidation_runs",
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_entity_tier_history"),
    )
    op.create_index(
        "ix_entity_tier_history_entity", "entity_tier_history", ["entity_id", "changed_at"]
    )
    op.create_table(
        "daily_reflections",
        sa.Column("day", sa.Text(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column(
            "summary",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default="{}",
            nullable=False,
        ),
        sa.Column("generated_by", sa.Text(), nullable=False),
        sa.Column("input_fingerprint", sa.Text(), nullable=False),
        sa.Column("session_id", sa.Text()),
        _ts("created_at", now=True),
        _ts("updated_at", now=True),
        sa.PrimaryKeyConstraint("day", name="pk_daily_reflections"),
    )
    op.create_table(
        "promise_fulfilments",
        sa.Column("entity_id", sa.BigInteger(), nullable=False),
        _ts("fulfilled_at", nullable=False),
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("segment_id", sa.Text()),
        sa.Column("evidence", sa.Text(), server_default="", nullable=False),
        _ts("detected_at", now=True),
        sa.ForeignKeyConstraint(
            ["entity_id"],
            ["entities.id"],
            name="fk_promise_fulfilments_entity_id_entities",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("entity_id", name="pk_promise_fulfilments"),
    )


def downgrade() -> None:
    op.drop_table("promise_fulfilments")
    op.drop_table("daily_reflections")
    op.drop_index("ix_entity_tier_history_entity", table_name="entity_tier_history")
    op.drop_table("entity_tier_history")
    op.drop_index("ix_entities_community_id", table_name="entities")
    op.drop_index("ix_entities_tier", table_name="entities")
    op.drop_constraint("fk_entities_community_id_communities", "entities", type_="foreignkey")
    for column in (
        "community_id", "consolidated_at", "tier_changed_at", "contradicted", "low_salience",
        "salience", "tier",
    ):  # fmt: skip
        op.drop_column("entities", column)
    op.drop_table("consolidation_runs")
    op.drop_table("communities")
