"""The App Home tab: published when a member opens it, and its controls (remove a topic,
"Add a topic", digest on/off, time, days, DM or channel, "Search papers").

Every control saves through ``digest.subscriptions`` and republishes the tab, so what the
member sees is always what is stored. A click on the Home tab carries no response_url: a
problem is shown at the top of the republished tab instead.
"""

from __future__ import annotations

import logging
import re
from datetime import UTC, datetime
from functools import partial
from typing import Any

from slack_bolt import Ack, App
from slack_sdk import WebClient

from bot.engine.query import QueryError
from bot.slack import render
from bot.slack.home import publish_home
from bot.slack.poster import SlackPoster
from bot.slack.services import Services, by_dm, open_modal, request_team
from bot.state import state_for
from digest.delivery import refresh_time_zone
from digest.poster import TokenRefused
from digest.subscriptions import SubscriptionError, Subscriptions, normalize_topic

from . import subscriptions as subscription_commands

log = logging.getLogger(__name__)

REMOVE_ACTIONS = re.compile(rf"^{render.HOME_REMOVE_TOPIC}:\d+$")
SETTINGS_ACTIONS = re.compile(
    rf"^(?:{render.HOME_DIGEST_ON}|{render.HOME_DIGEST_OFF}|{render.HOME_TIME}"
    rf"|{render.HOME_DAYS}|{render.HOME_CHANNEL}|{render.HOME_DM}|{render.HOME_TEAM_SAVES})$"
)
COMMON_WORDS_ONLY = (
    "That topic only has very common words (like “the” or “of”); name something specific."
)
CHANNEL_ID = re.compile(r"[CG][A-Z0-9]{1,20}")


def register(app: App, services: Services) -> None:
    @app.event("app_home_opened")
    def home_opened(event: dict[str, Any], body: dict[str, Any], client: WebClient) -> None:
        # Events are acknowledged by Bolt before this runs.
        if event.get("tab", "home") != "home" or not event.get("user"):
            return
        services.later(None, show_home, event["user"], request_team(body), client, services)

    @app.action(REMOVE_ACTIONS)
    def remove_topic(ack: Ack, action: dict[str, Any], body: dict[str, Any], client: WebClient):
        ack()
        user_id = (body.get("user") or {}).get("id") or ""
        query = str(action.get("value") or "")
        apologise = by_dm(client, user_id)
        services.later(apologise, remove, user_id, request_team(body), query, client, services)

    @app.action(SETTINGS_ACTIONS)
    def change_setting(ack: Ack, action: dict[str, Any], body: dict[str, Any], client: WebClient):
        ack()
        user_id = (body.get("user") or {}).get("id") or ""
        apologise = by_dm(client, user_id)
        services.later(apologise, change, user_id, request_team(body), action, client, services)

    @app.action(render.HOME_ADD_TOPIC)
    def add_topic(ack: Ack, body: dict[str, Any], client: WebClient) -> None:
        ack()
        open_modal(client, body, render.add_topic_view())

    @app.view(render.ADD_TOPIC_VIEW)
    def topic_submitted(
        ack: Ack, body: dict[str, Any], view: dict[str, Any], client: WebClient
    ) -> None:
        submit_topic(ack, body, view, client, services)


def show_home(user_id: str, team_id: str | None, client: WebClient, services: Services) -> None:
    """Publish the tab, first reading the member's time zone from Slack when it is stale
    (so "next digest" is in their own time); a member is stored only once they change
    something."""
    now = datetime.now(UTC)
    subscriptions = Subscriptions(services.engine.db)
    if not services.engine.read_only:
        subscriptions.store.adopt(user_id, team_id)  # known without a team: now this one's
    member = subscriptions.member(user_id, team_id)
    if member is not None and not services.engine.read_only and member.tz_is_stale(now):
        try:
            refresh_time_zone(
                SlackPoster(client, services.engine),
                subscriptions,
                user_id,
                now,
                team_id=team_id,
            )
        except TokenRefused as error:
            log.error("Slack refused the bot token (%s); the operator must replace it", error.code)
    publish_home(client, services.engine, user_id, now=now, team_id=team_id)


def remove(user_id: str, team_id: str, query: str, client: WebClient, services: Services) -> None:
    notice = None
    if services.engine.read_only:
        notice = render.READ_ONLY
    else:
        try:
            Subscriptions(services.engine.db).remove_topic(user_id, query, team_id)
        except SubscriptionError as error:
            notice = str(error)  # already gone (removed in another tab, or by /papers)
    publish_home(
        client,
        services.engine,
        user_id,
        notice=notice and render.escape(notice),
        team_id=team_id,
    )


def change(
    user_id: str, team_id: str, action: dict[str, Any], client: WebClient, services: Services
) -> None:
    """Save one digest setting from the Home tab, then republish it."""
    now = datetime.now(UTC)
    subscriptions = Subscriptions(services.engine.db)
    action_id = action.get("action_id")
    notice = None
    try:
        if services.engine.read_only:
            raise SubscriptionError(render.READ_ONLY)
        if action_id in (render.HOME_DIGEST_ON, render.HOME_DIGEST_OFF):
            on = action_id == render.HOME_DIGEST_ON
            subscriptions.set_enabled(user_id, on, now, team_id=team_id)
        elif action_id == render.HOME_TIME:
            picked = str(action.get("selected_time") or "")
            subscriptions.set_time(user_id, picked, now, team_id=team_id)
        elif action_id == render.HOME_DAYS:
            days = [str(o.get("value")) for o in action.get("selected_options") or []]
            if not days:
                raise SubscriptionError(
                    "Pick at least one day; to stop the digest, turn it off instead."
                )
            subscriptions.set_days(user_id, ",".join(days), now, team_id=team_id)
        elif action_id == render.HOME_CHANNEL:
            channel = str(action.get("selected_conversation") or "")
            if not CHANNEL_ID.fullmatch(channel):
                raise SubscriptionError(
                    "Pick a channel (a digest cannot go to another person's direct messages)."
                )
            subscriptions.set_channel(user_id, channel, now, team_id=team_id)
        elif action_id == render.HOME_DM:
            subscriptions.set_channel(user_id, None, now, team_id=team_id)
        elif action_id == render.HOME_TEAM_SAVES:
            subscriptions.ensure_member(user_id, now, team_id)
            state_for(services.engine.db_path).set_team_saves(
                user_id=user_id,
                on=action.get("value") == "on",
                now=now.isoformat(),
                team_id=team_id,
            )
    except SubscriptionError as error:
        notice = render.escape(str(error))
    publish_home(client, services.engine, user_id, now=now, notice=notice, team_id=team_id)


def read_topic(view: dict[str, Any]) -> str:
    values = (view.get("state") or {}).get("values") or {}
    typed = (values.get(render.ADD_TOPIC_BLOCK) or {}).get(render.ADD_TOPIC_ACTION) or {}
    return str(typed.get("value") or "").strip()


def submit_topic(
    ack: Ack, body: dict[str, Any], view: dict[str, Any], client: WebClient, services: Services
) -> None:
    """Subscribe, answering in the modal with the same preview ``/papers subscribe`` gives
    (matches now, the best papers, a verdict on broad topics); a topic that cannot be used
    is refused under the box, where it can be fixed."""
    user_id = (body.get("user") or {}).get("id") or ""
    team_id = request_team(body)
    text = read_topic(view)
    if services.engine.read_only:
        ack(response_action="errors", errors={render.ADD_TOPIC_BLOCK: render.READ_ONLY})
        return
    try:
        # Cheap checks first (the query's syntax, words worth following), before the search.
        if not normalize_topic(text):
            raise SubscriptionError(COMMON_WORDS_ONLY)
    except (SubscriptionError, QueryError) as error:
        ack(response_action="errors", errors={render.ADD_TOPIC_BLOCK: str(error)[:300]})
        return
    now = datetime.now(UTC)
    subscriptions = Subscriptions(services.engine.db)
    member = subscriptions.ensure_member(user_id, now, team_id)
    try:
        message = subscription_commands.subscribe(services, subscriptions, member, text, now)
    except (SubscriptionError, QueryError) as error:
        ack(response_action="errors", errors={render.ADD_TOPIC_BLOCK: str(error)[:300]})
        return
    ack(response_action="update", view=render.topic_added_view(message["blocks"]))
    services.later(None, partial(publish_home, team_id=team_id), client, services.engine, user_id)
