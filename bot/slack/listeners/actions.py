"""The buttons on results: "More results"/"Previous" and the suggestions (another page, in
place), "Similar papers" (a new list, only for the clicker) and "Share to channel" (the paper,
posted visibly, naming who shared it).

"Share to channel" clicked in a channel shares into that channel. Clicked in a direct message
(a digest, a lookup in the Paperboy DM) there is no channel to share into, so it opens a
picker instead (``render.share_view``; its submission is handled in ``views``). "Share
elsewhere" (on a digest posted in a channel, where everyone already sees the paper) always
opens the picker.

The state a click needs travels in the button's ``value`` (see ``render.encode_value``), so
nothing is stored between a lookup and a click.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from slack_bolt import Ack, App
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from bot.slack import render
from bot.slack.client import error_code
from bot.slack.replies import EPHEMERAL_BELOW, reply
from bot.slack.services import Services, request_team

from . import feedback

log = logging.getLogger(__name__)

PAGE_ACTIONS = re.compile(
    rf"^(?:{render.ACTION_MORE}|{render.ACTION_PREVIOUS}|{render.ACTION_SUGGEST}:\d+)$"
)
SIMILAR_ACTIONS = re.compile(rf"^{render.ACTION_SIMILAR}:\d+$")
SHARE_ACTIONS = re.compile(rf"^{render.ACTION_SHARE}:\d+$")
SHARE_ELSEWHERE_ACTIONS = re.compile(rf"^{render.ACTION_SHARE_ELSEWHERE}:\d+$")
# chat.postMessage errors that mean "the bot may not post there", where posting through the
# response_url (as the clicking user's action) still works: private channels.
CANNOT_POST = frozenset({"not_in_channel", "channel_not_found", "restricted_action"})
#: Slack expires a trigger_id this many seconds after the click.
TRIGGER_SECONDS = 3.0
PICKER_THREADS = 4
PICKER_BUSY = "Slack is busy right now and the channel picker could not open. Please click Share again in a moment."
#: Deeper than anyone pages by hand; a larger offset in a button value is forged.
MAX_OFFSET = 100_000


def register(app: App, services: Services) -> None:
    pickers = ThreadPoolExecutor(PICKER_THREADS, thread_name_prefix="paperboy-picker")

    @app.action(PAGE_ACTIONS)
    def page(
        ack: Ack, action: dict[str, Any], body: dict[str, Any], respond: Callable[..., Any]
    ) -> None:
        ack()
        services.later(respond, show_page, action, respond, services, body)

    @app.action(SIMILAR_ACTIONS)
    def similar(
        ack: Ack, action: dict[str, Any], body: dict[str, Any], respond: Callable[..., Any]
    ) -> None:
        ack()
        services.later(respond, show_similar, action, respond, services, body)

    @app.action(SHARE_ACTIONS)
    @app.action(SHARE_ELSEWHERE_ACTIONS)
    def share(
        ack: Ack,
        action: dict[str, Any],
        body: dict[str, Any],
        respond: Callable[..., Any],
        client: WebClient,
    ) -> None:
        ack()
        elsewhere = SHARE_ELSEWHERE_ACTIONS.match(action.get("action_id") or "")
        if elsewhere or share_channel(body) is None:
            # Off Bolt's ack threads (a slow or rate-limited Slack must never hold up the
            # acknowledgement of other requests), and not on the work pool either, where
            # slow lookups could make the 3-second trigger_id expire while it waits.
            clicked = time.monotonic()
            services.submit(
                pickers,
                respond,
                open_share_picker,
                (action, body, respond, client, services, clicked),
            )
        else:
            services.later(respond, share_paper, action, body, respond, client, services)


def show_page(
    action: dict[str, Any],
    respond: Callable[..., Any],
    services: Services,
    body: dict[str, Any] | None = None,
) -> None:
    data = render.decode_value(action.get("value"))
    query, offset = data.get("q"), data.get("o", 0)
    valid = isinstance(offset, int) and not isinstance(offset, bool) and offset >= 0
    if not isinstance(query, str) or not valid:
        reply(
            respond,
            render.error_message("That button has expired; please search again."),
            **EPHEMERAL_BELOW,
        )
        return
    # The offset comes from the button's value, which the client controls: past the last
    # match (a forged or stale page) the last page is shown, never "No papers match".
    offset = min(offset, MAX_OFFSET)
    result = services.engine.search(query, limit=render.PAGE_SIZE, offset=offset)
    if not result.hits and result.total and offset >= result.total:
        last = (result.total - 1) // render.PAGE_SIZE * render.PAGE_SIZE
        result = services.engine.search(query, limit=render.PAGE_SIZE, offset=last)
    message = render.search_message(result, query=query)
    if _seen_by_others(body or {}):  # a mention's answer in a channel: nobody's choices
        reply(respond, message, replace_original=True)
    else:
        reply(respond, _marked(message, body, services), replace_original=True)


def show_similar(
    action: dict[str, Any],
    respond: Callable[..., Any],
    services: Services,
    body: dict[str, Any] | None = None,
) -> None:
    paper_id = str(action.get("value") or "")
    result = services.engine.similar(paper_id, limit=render.PAGE_SIZE)
    paper = services.engine.paper(paper_id)
    message = render.similar_message(result, paper=paper)
    reply(respond, _marked(message, body, services), **EPHEMERAL_BELOW)


def _seen_by_others(body: dict[str, Any]) -> bool:
    """Whether the clicked message is one others see too (not ephemeral, not in the
    member's own DM): a page replacing it must show nobody's 👍/👎/Save."""
    ephemeral = bool((body.get("container") or {}).get("is_ephemeral"))
    return not ephemeral and not feedback.own_conversation(body)


def _marked(
    message: dict[str, Any], body: dict[str, Any] | None, services: Services
) -> dict[str, Any]:
    """An answer only the clicker sees (a page of their own answer, similar papers),
    showing their 👍/👎/Save."""
    user_id = ((body or {}).get("user") or {}).get("id") or ""
    return feedback.marked(message, user_id, request_team(body or {}), services)


def share_channel(body: dict[str, Any]) -> str | None:
    """The channel a click can share into: where the button sat, unless that is a direct
    message (one-to-one or group) or unknown, where sharing needs the picker."""
    channel = body.get("channel") or {}
    channel_id = channel.get("id") or (body.get("container") or {}).get("channel_id") or ""
    name = str(channel.get("name") or "")
    if not channel_id or channel_id.startswith("D"):
        return None
    if name == "directmessage" or name.startswith("mpdm-"):
        return None
    return channel_id


def shared_paper(
    action: dict[str, Any], respond: Callable[..., Any], services: Services
) -> dict[str, Any] | None:
    """The paper a Share button carries, or None after telling the clicker it is gone."""
    paper_id = str(action.get("value") or "")
    paper = services.engine.paper(paper_id)
    if paper is None:
        message = f"That paper (`{paper_id}`) is no longer in the corpus, so it cannot be shared."
        reply(respond, render.error_message(message), **EPHEMERAL_BELOW)
    return paper


def open_share_picker(
    action: dict[str, Any],
    body: dict[str, Any],
    respond: Callable[..., Any],
    client: WebClient,
    services: Services,
    clicked: float | None = None,
) -> None:
    """``views.open`` once, within the trigger_id's life, with no retry: Slack expires a
    trigger_id 3 seconds after the click, so waiting out a 429 (or a slow answer) could
    never open the picker. The clicker is told to click again instead."""
    paper = shared_paper(action, respond, services)
    if paper is None:
        return
    left = TRIGGER_SECONDS - (time.monotonic() - clicked if clicked is not None else 0.0)
    if left <= 0.2:
        log.warning("share picker not opened: the click waited %.1fs", TRIGGER_SECONDS - left)
        reply(respond, render.error_message(PICKER_BUSY), **EPHEMERAL_BELOW)
        return
    once = WebClient(
        token=client.token,
        base_url=client.base_url,
        timeout=max(1, int(left)),
        retry_handlers=[],  # no rate-limit or connection retries: the trigger would expire
        logger=client.logger,
    )
    try:
        once.views_open(trigger_id=body.get("trigger_id") or "", view=render.share_view(paper))
    except SlackApiError as error:
        code = error_code(error)
        status = getattr(error.response, "status_code", 200)
        log.error("views.open for the share picker failed: %s", code)
        if status == 429 or code == "ratelimited":
            reply(respond, render.error_message(PICKER_BUSY), **EPHEMERAL_BELOW)
            return
        text = f"Sorry, Slack would not open the channel picker ({code}). Please click again."
        reply(respond, render.error_message(text), **EPHEMERAL_BELOW)
    except (SlackClientError, OSError) as error:
        log.error("views.open for the share picker failed: %s", error)
        reply(respond, render.error_message(PICKER_BUSY), **EPHEMERAL_BELOW)


def share_paper(
    action: dict[str, Any],
    body: dict[str, Any],
    respond: Callable[..., Any],
    client: WebClient,
    services: Services,
) -> None:
    """Post the paper in the channel the button was clicked in (see :func:`share_channel`)."""
    channel = share_channel(body)
    paper = shared_paper(action, respond, services)
    if paper is None or channel is None:
        return
    user_id = (body.get("user") or {}).get("id") or ""
    message = render.shared_message(paper, user_id=user_id)
    try:
        client.chat_postMessage(channel=channel, unfurl_links=False, unfurl_media=False, **message)
    except SlackApiError as error:
        code = error_code(error)
        if code not in CANNOT_POST:
            log.error("chat.postMessage to %s failed: %s", channel, code)
            text = (
                f"Sorry, Slack would not let me share that here ({code}). Please try again later."
            )
            reply(respond, render.error_message(text), **EPHEMERAL_BELOW)
            return
        # The bot is not a member of this private channel: the response_url can still post
        # visibly in the conversation the button was clicked in.
        reply(respond, message, response_type="in_channel", replace_original=False)
