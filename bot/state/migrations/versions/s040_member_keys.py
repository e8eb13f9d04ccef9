"""Member data keyed by workspace as well as user: ``(team_id, user_id)`` on members, topics,
digests, sent papers, feedback, saves and taste choices (issue 12). In Enterprise Grid one user
id spans an org's workspaces, and the same id in two installs is two members.

Existing rows get their workspace from the member's ``team_id``, else the row's own, else the
single installed workspace, else ``""`` (a single-workspace deployment that never recorded a
team). Each table is rebuilt in the shape ``bot/state/tables.py`` gives it (one path for
SQLite, which cannot change a primary key in place, and PostgreSQL); a table already in that
shape (a database that began at this revision's tables) is left alone.

Revision ID: s040_member_keys
Revises: s020_workspaces
"""

from __future__ import annotations

from alembic import op
from sqlalchemy import Connection, inspect, text
from sqlalchemy.schema import CreateTable

from bot.state.tables import MEMBER_TABLES

revision = "s040_member_keys"
down_revision = "s020_workspaces"
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    present = set(inspect(bind).get_table_names())
    default = _single_installed_team(bind, present)
    for table in MEMBER_TABLES:
        if table.name not in present or _keyed(bind, table.name):
            continue
        _rebuild(bind, table, default, present)


def downgrade() -> None:
    raise NotImplementedError("The shared state is never migrated down.")


def _keyed(bind: Connection, name: str) -> bool:
    """Whether the table already has its member key (``team_id`` in its primary key, or for
    topics and digests, whose keys are ids, a ``team_id`` column)."""
    inspector = inspect(bind)
    if name in ("topics", "digests"):
        return "team_id" in {c["name"] for c in inspector.get_columns(name)}
    return "team_id" in inspector.get_pk_constraint(name)["constrained_columns"]


def _single_installed_team(bind: Connection, present: set[str]) -> str:
    """The team of the one workspace Paperboy is installed in, when there is exactly one."""
    if "workspaces" not in present:
        return ""
    teams = (
        bind.execute(
            text("select team_id from workspaces where uninstalled_at is null and team_id <> ''")
        )
        .scalars()
        .all()
    )
    return teams[0] if len(teams) == 1 else ""


def _rebuild(bind: Connection, table, default: str, present: set[str]) -> None:
    """Copy ``table`` into its new shape under a temporary name, with each row's team, then
    put the copy in its place (indexes made afresh under their new names)."""
    name = table.name
    old_columns = {c["name"] for c in inspect(bind).get_columns(name)}
    # Members are rebuilt first, so the other tables read each member's team as filled in.
    member_team = (
        "nullif((select m.team_id from members m where m.user_id = t.user_id limit 1), '')"
    )
    if name == "members":
        team = "coalesce(nullif(t.team_id, ''), :default)"
    elif "team_id" in old_columns and "members" in present:
        team = f"coalesce({member_team}, nullif(t.team_id, ''), :default)"
    else:
        team = f"coalesce({member_team}, :default)"
    columns = [c.name for c in table.columns if c.name != "team_id"]
    temporary = f"_s040_{name}"
    ddl = str(CreateTable(table).compile(dialect=bind.dialect))
    bind.execute(text(ddl.replace(f"CREATE TABLE {name} ", f"CREATE TABLE {temporary} ", 1)))
    listed = ", ".join(columns)
    selected = ", ".join(f"t.{c}" if c in old_columns else "null" for c in columns)
    bind.execute(
        text(
            f"insert into {temporary} ({listed}, team_id) select {selected}, {team} from {name} t"
        ),
        {"default": default},
    )
    cascade = " cascade" if bind.dialect.name == "postgresql" else ""
    bind.execute(text(f"drop table {name}{cascade}"))
    bind.execute(text(f"alter table {temporary} rename to {name}"))
    for index in table.indexes:
        index.create(bind)
    if bind.dialect.name == "postgresql" and name == "topics":
        bind.execute(
            text(
                "select setval(pg_get_serial_sequence('topics', 'id'), "
                "coalesce((select max(id) from topics), 0) + 1, false)"
            )
        )
