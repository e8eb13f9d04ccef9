"""Search from anywhere: the global shortcut "Search papers" (and the Home tab's button),
which opens the search modal, the modal's submissions and paging, and the message shortcut
"Find papers about this message", answered in the message's thread, visible only to the
member (with the Share buttons every lookup has).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from slack_bolt import Ack, App
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.slack import render
from bot.slack.client import error_code
from bot.slack.replies import EPHEMERAL, reply
from bot.slack.services import Services, by_dm, open_modal, request_team

from . import feedback
from .actions import MAX_OFFSET
from .events import lookup_message, message_query

log = logging.getLogger(__name__)

SEARCH_SHORTCUT = "search_papers"  # manifest.yml: the global shortcut's callback_id
MESSAGE_SHORTCUT = "find_papers_message"  # manifest.yml: the message shortcut's callback_id


def register(app: App, services: Services) -> None:
    @app.shortcut(SEARCH_SHORTCUT)
    @app.action(render.HOME_SEARCH)
    def open_search(ack: Ack, body: dict[str, Any], client: WebClient) -> None:
        ack()
        open_modal(client, body, render.search_view())

    @app.view(render.SEARCH_VIEW)
    def search_submitted(ack: Ack, view: dict[str, Any], body: dict[str, Any]) -> None:
        query = read_query(view)
        if not query:
            ack(response_action="errors", errors={render.SEARCH_QUERY_BLOCK: "Type a few words."})
            return
        result = services.engine.search(query, limit=render.PAGE_SIZE)
        ack(response_action="update", view=_results_view(query, result, body, services))

    @app.action(render.SEARCH_NEXT)
    @app.action(render.SEARCH_PREVIOUS)
    def page(ack: Ack, action: dict[str, Any], body: dict[str, Any], client: WebClient) -> None:
        ack()
        apologise = by_dm(client, (body.get("user") or {}).get("id") or "")
        view = body.get("view") or {}
        services.later(apologise, show_page, action, view, client, services, body)

    @app.message_shortcut(MESSAGE_SHORTCUT)
    def about_message(
        ack: Ack, shortcut: dict[str, Any], respond: Callable[..., Any], client: WebClient
    ) -> None:
        ack()
        services.later(respond, answer_message, shortcut, respond, client, services)


def read_query(view: dict[str, Any]) -> str:
    values = (view.get("state") or {}).get("values") or {}
    typed = (values.get(render.SEARCH_QUERY_BLOCK) or {}).get(render.SEARCH_QUERY_ACTION) or {}
    return " ".join(str(typed.get("value") or "").split())


def _results_view(
    query: str, result: Any, body: dict[str, Any], services: Services
) -> dict[str, Any]:
    """The modal with a page of results, each paper's buttons showing the member's 👍/👎/Save."""
    user_id = (body.get("user") or {}).get("id") or ""
    found = feedback.choices([h.id for h in result.hits], user_id, request_team(body), services)
    return render.search_view(query, result, found)


def show_page(
    action: dict[str, Any],
    view: dict[str, Any],
    client: WebClient,
    services: Services,
    body: dict[str, Any] | None = None,
) -> None:
    """Next/Previous in the modal: the other page, in place (``views.update``; the view's
    hash makes Slack refuse it if the member submitted a new query meanwhile)."""
    data = render.decode_value(action.get("value"))
    query, offset = data.get("q"), data.get("o", 0)
    if not isinstance(query, str) or not isinstance(offset, int) or isinstance(offset, bool):
        return
    offset = min(max(offset, 0), MAX_OFFSET)
    result = services.engine.search(query, limit=render.PAGE_SIZE, offset=offset)
    try:
        client.views_update(
            view_id=view.get("id") or "",
            hash=view.get("hash"),
            view=_results_view(query, result, body or {}, services),
        )
    except SlackApiError as error:
        if error_code(error) != "hash_conflict":  # a newer search won: nothing to do
            raise


def answer_message(
    shortcut: dict[str, Any],
    respond: Callable[..., Any],
    client: WebClient,
    services: Services,
) -> None:
    """Papers about a message, in its thread, only for the member who asked."""
    message = shortcut.get("message") or {}
    channel = (shortcut.get("channel") or {}).get("id") or ""
    user_id = (shortcut.get("user") or {}).get("id") or ""
    query = message_query(message.get("text") or "")
    if not query:
        text = "That message has no words to look papers up with."
        reply(respond, render.error_message(text), **EPHEMERAL)
        return
    team = request_team(shortcut)
    answer = feedback.marked(lookup_message(services, query), user_id, team, services)
    thread = message.get("thread_ts") or message.get("ts")
    try:
        client.chat_postEphemeral(channel=channel, user=user_id, thread_ts=thread, **answer)
    except SlackApiError as error:
        # A private channel or DM without Paperboy: the shortcut's response_url still works.
        log.info(
            "chat.postEphemeral in %s refused (%s); answering via response_url",
            channel,
            error_code(error),
        )
        reply(respond, answer, **EPHEMERAL)
