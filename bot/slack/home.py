"""Publishing a member's App Home (``views.publish``): when they open it, and after every
change they make anywhere (a ``/papers`` subcommand, a control on the Home tab itself).

Its own module, below the listeners (``listeners/home.py`` and ``listeners/subscriptions.py``
both republish), reading members through ``digest`` only.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from slack_sdk import WebClient

from bot.engine.search import Engine
from bot.slack import render
from bot.state import StateUnavailable, state_for
from digest.export import reading_list
from digest.ledger import Ledger
from digest.matching import match_topics
from digest.schedule import next_digest
from digest.subscriptions import MAX_TOPICS, Member, Subscriptions
from digest.taste import recommendations_for

log = logging.getLogger(__name__)


def home_view(
    engine: Engine,
    user_id: str,
    *,
    now: datetime | None = None,
    notice: str | None = None,
    team_id: str | None = None,
) -> dict[str, object]:
    """The member's Home tab as it is now (a member not yet stored sees the defaults): the
    member in the workspace whose Home tab it is."""
    now = now or datetime.now(UTC)
    subscriptions = Subscriptions(engine.db)
    team_id = subscriptions.store.team_for(user_id, team_id)
    member = subscriptions.member(user_id, team_id)
    if member is None and team_id:
        # Known without a team (see ``StateStore.add_member``): shown as they are, and the
        # workspace's from their first change.
        member = subscriptions.member(user_id, "")
        team_id = "" if member is not None else team_id
    member = member or Member(user_id, team_id)
    topics = subscriptions.topics(user_id, team_id)
    counts = [m.count for m in match_topics(engine, [t.query for t in topics])] if topics else []
    ledger = Ledger(engine.db)
    last = render.last_digest_line(ledger.latest(user_id, team_id), member.zone)
    store = state_for(engine.db_path)
    saved, saved_total = reading_list(
        store, engine, user_id, team_id=team_id, limit=render.HOME_SHOWN
    )
    found = recommendations_for(engine, user_id, limit=render.HOME_SHOWN, team_id=team_id)
    recommended = [
        (paper, render.liked_note(r.liked_count, found.liked_titles.get(r.example or "")))
        for paper, r in found.papers
    ]
    note = render.recommend_message([], likes=found.likes, dislikes=found.dislikes)["text"]
    return render.home_dashboard(
        topics=[(t.query, c) for t, c in zip(topics, counts, strict=True)],
        max_topics=MAX_TOPICS,
        enabled=member.enabled,
        digest_enabled=member.digest_enabled,
        digest_time=member.digest_time,
        digest_days=member.digest_days,
        digest_channel=member.digest_channel,
        tz=member.tz or "UTC",
        upcoming=next_digest(member, now, ledger.taken(member.user_id, member.team_id)),
        last=last,
        notice=notice,
        saved=saved,
        saved_total=saved_total,
        recommended=recommended,
        recommend_note=note,
        team_saves=(team_id, user_id) not in store.team_saves_off([(team_id, user_id)]),
    )


def publish_home(
    client: WebClient,
    engine: Engine,
    user_id: str,
    *,
    now: datetime | None = None,
    notice: str | None = None,
    team_id: str | None = None,
) -> None:
    """Publish the member's Home tab (raises what ``views.publish`` raises); ``client`` is
    the workspace ``team_id``'s (Bolt's, for the request)."""
    view = home_view(engine, user_id, now=now, notice=notice, team_id=team_id)
    client.views_publish(user_id=user_id, view=view)


def republish_home(
    client: WebClient, engine: Engine, user_id: str, team_id: str | None = None
) -> None:
    """After a change made elsewhere: refresh the Home tab, never failing the change itself
    (a member who never opened it gets it published anyway, as Slack allows)."""
    try:
        publish_home(client, engine, user_id, team_id=team_id)
    except StateUnavailable as error:  # an outage: its one sentence says it all
        log.error("could not republish the App Home of %s: %s", user_id, error)
    except Exception:
        log.exception("could not republish the App Home of %s", user_id)
