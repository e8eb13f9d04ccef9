"""The shared state's tables, described once for both backends (SQLAlchemy Core).

They are the tables the SQLite corpus file has held since migrations m002-m006 of
``bot/engine/schema.py`` (same names, columns, keys and index names), so an existing SQLite
deployment is adopted as it is, and a PostgreSQL database gets the very same shape. Timestamps
are ISO 8601 UTC text in both, so comparisons and ``max()`` behave alike.
"""

from __future__ import annotations

from slack_sdk.oauth.installation_store.sqlalchemy import SQLAlchemyInstallationStore
from slack_sdk.oauth.state_store.sqlalchemy import SQLAlchemyOAuthStateStore
from sqlalchemy import Column, ForeignKey, Index, Integer, MetaData, Table, Text

metadata = MetaData()

members = Table(
    "members",
    metadata,
    Column("user_id", Text, primary_key=True),
    Column("team_id", Text),
    Column("tz", Text),  # IANA name from users.info
    Column("tz_checked_at", Text),
    Column("digest_enabled", Integer),  # NULL: the default (on once there is a topic)
    Column("digest_time", Text),  # "HH:MM" local time
    Column("digest_days", Text),  # "mon,tue,wed,thu,fri"
    Column("digest_channel", Text),  # NULL: a direct message
    Column("created_at", Text),
    Column("dm_channel", Text),
)

topics = Table(
    "topics",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("user_id", Text, ForeignKey("members.user_id")),
    Column("query", Text),
    Column("normalized", Text),
    Column("created_at", Text),
    Index("idx_topics_user_id_normalized", "user_id", "normalized", unique=True),
)

digests = Table(
    "digests",
    metadata,
    Column("id", Text, primary_key=True),  # "U1:2025-03-04" or "U1:2025-03-04T08:30#2"
    Column("user_id", Text),
    Column("local_date", Text),
    Column("status", Text),  # claimed | sent | skipped | failed
    Column("claimed_by", Text),
    Column("claimed_at", Text),
    Column("channel", Text),
    Column("ts", Text),
    Column("paper_ids", Text),  # JSON list
    Column("error", Text),
    Column("finished_at", Text),
    Column("content", Text),  # JSON: the plan as claimed, so a retry posts the same digest
    Index("idx_digests_user_id_local_date", "user_id", "local_date", unique=True),
    Index("idx_digests_status_claimed_at", "status", "claimed_at"),
)

sent_papers = Table(
    "sent_papers",
    metadata,
    Column("user_id", Text, primary_key=True),
    Column("paper_id", Text, primary_key=True),
    Column("digest_id", Text),
    Column("sent_at", Text),
)

clock_heartbeat = Table(
    "clock_heartbeat",
    metadata,
    Column("name", Text, primary_key=True),
    Column("last_tick", Text),
    Column("tick_seconds", Integer),
    Column("worker", Text),
)

#: In the order rows can be copied (topics refer to members).
ALL = (members, topics, digests, sent_papers, clock_heartbeat)

# -- what members think of papers (issue 11; revision s002) ----------------------------------

#: A member's 👍 or 👎 on a paper: at most one of the two (a second click on the same removes it).
feedback = Table(
    "feedback",
    metadata,
    Column("user_id", Text, primary_key=True),
    Column("paper_id", Text, primary_key=True),
    Column("team_id", Text),
    Column("kind", Text, nullable=False),  # like | dislike
    Column("created_at", Text),
    Index("idx_feedback_paper_id", "paper_id"),
)

#: A member's reading list ("Save"), independent of 👍/👎.
saves = Table(
    "saves",
    metadata,
    Column("user_id", Text, primary_key=True),
    Column("paper_id", Text, primary_key=True),
    Column("team_id", Text),
    Column("saved_at", Text),
    Index("idx_saves_user_id_saved_at", "user_id", "saved_at"),
    Index("idx_saves_paper_id", "paper_id"),
)

#: Tables added after s001 (ALL stays what s001 adopts), in the order rows can be copied.
FEEDBACK_TABLES = (feedback, saves)

# -- what a member's digest may say about their taste (issue 11; revision s010_taste) --------

#: A member's choices about the taste features, in a table of its own rather than columns of
#: ``members``: a read-only file from before this revision keeps serving ``members`` as it is.
member_taste = Table(
    "member_taste",
    metadata,
    Column("user_id", Text, primary_key=True),
    Column("team_id", Text),
    Column("team_saves", Integer),  # NULL: the default (on): "2 teammates also saved this"
    Column("updated_at", Text),
)

#: Tables added by s010_taste, in the order rows can be copied.
TASTE_TABLES = (member_taste,)
# -- workspaces the app is installed in (issue 12; revision s020) ----------------------------

#: Each workspace Paperboy was installed in, and when it was uninstalled (``app_uninstalled``
#: or ``tokens_revoked``): members of an uninstalled workspace get no digest until it is
#: installed again, and their data is kept for that day. A single-workspace deployment
#: (``SLACK_BOT_TOKEN``) has a row only once Slack told it of an uninstall.
workspaces = Table(
    "workspaces",
    metadata,
    Column("team_id", Text, primary_key=True),
    Column("team_name", Text),
    Column("installed_at", Text),
    Column("uninstalled_at", Text),  # NULL: installed
)

#: slack_sdk's own OAuth tables (``SQLAlchemyInstallationStore``, ``SQLAlchemyOAuthStateStore``
#: bind to them by name), built by slack_sdk's builders so the columns are exactly theirs.
#: They hold the workspaces' bot tokens and the OAuth flow's one-use ``state`` values.
slack_installations = SQLAlchemyInstallationStore.build_installations_table(
    metadata, SQLAlchemyInstallationStore.default_installations_table_name
)
slack_bots = SQLAlchemyInstallationStore.build_bots_table(
    metadata, SQLAlchemyInstallationStore.default_bots_table_name
)
slack_oauth_states = SQLAlchemyOAuthStateStore.build_oauth_states_table(
    metadata, SQLAlchemyOAuthStateStore.default_table_name
)

#: Tables added by s020, in the order rows can be copied.
WORKSPACE_TABLES = (workspaces, slack_installations, slack_bots, slack_oauth_states)
