"""Modals: the "Share to channel" picker's submission (the picker is opened by ``actions``).

Posting takes one ``chat.postMessage``. The listener waits for it, briefly, before
acknowledging, so that a refusal shows up in the modal itself, under the channel picker
("invite @Paperboy first"), where the user can pick another channel. Slack gives a submission
3 seconds; if Slack is slow (a rate limit), the modal closes after :data:`ACK_WAIT_SECONDS` and a
failure is told to the user in a direct message instead.
"""

from __future__ import annotations

import json
import logging
import re
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from slack_bolt import Ack, App
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from bot.slack import render
from bot.slack.client import error_code
from bot.slack.services import Services

log = logging.getLogger(__name__)

ACK_WAIT_SECONDS = 2.0
# What chat.postMessage's refusals mean for someone sharing a paper into a channel.
NOT_MEMBER = frozenset({"not_in_channel", "channel_not_found"})
PROBLEMS = {
    "is_archived": "That channel is archived. Pick another one.",
    "restricted_action": "Paperboy may not post in that channel. Pick another one.",
}
CHANNEL_ID = re.compile(r"[CG][A-Z0-9]{1,20}")


def register(app: App, services: Services) -> None:
    @app.view(render.SHARE_VIEW)
    def share_submitted(
        ack: Ack, body: dict[str, Any], view: dict[str, Any], client: WebClient
    ) -> None:
        submit_share(ack, body, view, client, services)


def read_share(view: dict[str, Any]) -> tuple[str, str, str]:
    """(paper id, channel id, comment) from a submitted share modal; "" for anything missing."""
    try:
        metadata = json.loads(view.get("private_metadata") or "{}")
    except ValueError:
        metadata = {}
    paper_id = str(metadata.get("paper") or "") if isinstance(metadata, dict) else ""
    values = (view.get("state") or {}).get("values") or {}
    picked = (values.get(render.SHARE_CHANNEL_BLOCK) or {}).get(render.SHARE_CHANNEL_ACTION) or {}
    typed = (values.get(render.SHARE_COMMENT_BLOCK) or {}).get(render.SHARE_COMMENT_ACTION) or {}
    return paper_id, str(picked.get("selected_conversation") or ""), str(typed.get("value") or "")


def submit_share(
    ack: Ack, body: dict[str, Any], view: dict[str, Any], client: WebClient, services: Services
) -> None:
    paper_id, channel, comment = read_share(view)
    user_id = (body.get("user") or {}).get("id") or ""
    if not channel:
        ack(response_action="errors", errors={render.SHARE_CHANNEL_BLOCK: "Pick a channel."})
        return
    paper = services.engine.paper(paper_id)
    if paper is None:
        gone = "That paper is no longer in the corpus, so it cannot be shared."
        ack(response_action="errors", errors={render.SHARE_CHANNEL_BLOCK: gone})
        return
    message = render.shared_message(paper, user_id=user_id, comment=comment)
    posting: Future = services.executor.submit(post, client, channel, message)
    try:
        posting.result(timeout=ACK_WAIT_SECONDS)
    except FutureTimeout:
        ack()  # close the modal now; a late failure is told by direct message
        posting.add_done_callback(lambda done: tell_if_failed(done, client, user_id, channel))
        return
    except Exception as error:
        ack(response_action="errors", errors={render.SHARE_CHANNEL_BLOCK: problem(error)})
        return
    ack(response_action="update", view=render.shared_view(channel))


def post(client: WebClient, channel: str, message: dict[str, Any]) -> None:
    client.chat_postMessage(channel=channel, unfurl_links=False, unfurl_media=False, **message)


def problem(error: BaseException, channel: str | None = None) -> str:
    """Why the share failed and what to do, in one plain sentence (``channel`` given: as
    mrkdwn naming it, for a direct message; else for the modal, right under the picker)."""
    if isinstance(error, SlackApiError):
        answer = error_code(error)
        code = render.escape(answer or "unknown_error")
        if code in NOT_MEMBER and channel and CHANNEL_ID.fullmatch(channel):
            return (
                f"Paperboy is not in <#{channel}> yet: invite @Paperboy to <#{channel}> first "
                "(`/invite @Paperboy` there), then share the paper again."
            )
        if code in NOT_MEMBER:
            return (
                "Paperboy is not in that channel yet: invite @Paperboy to it first "
                "(/invite @Paperboy), or pick another channel."
            )
        log.error("sharing a paper in %s failed: %s", channel or "a channel", code)
        return PROBLEMS.get(code, f"Slack would not take the post ({code}). Please try again.")
    if isinstance(error, SlackClientError | OSError):
        log.warning("sharing a paper: Slack unreachable (%s)", error)
        return "Slack could not be reached just now. Please try again."
    log.error("sharing a paper failed", exc_info=error)
    return "Sorry, something went wrong on Paperboy's side. Please try again."


def tell_if_failed(done: Future, client: WebClient, user_id: str, channel: str) -> None:
    """After the modal closed: if the post failed after all, say so in a direct message."""
    error = done.exception()
    if error is None or not user_id:
        return
    # Not render.error_message: that would escape the <#channel> link this text names.
    text = f":warning: I could not share that paper. {problem(error, channel)}"
    try:
        client.chat_postMessage(channel=user_id, **render.as_message(text, [render.section(text)]))
    except Exception:
        log.exception("could not tell %s that their share failed", user_id)
