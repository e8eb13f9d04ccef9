"""Events that ask for papers in plain words: ``@Paperboy <keywords>`` in a channel or a thread
(``app_mention``, answered in the thread) and a direct message to Paperboy (``message.im``,
the Messages tab: the message is read as a query and answered there).

Slash commands do not work in threads; a mention does. The App Home's events are in ``home``.

Uninstalls too: ``app_uninstalled`` and ``tokens_revoked`` (of the bot's token) delete that
workspace's installation and bot token (installed through OAuth) and stop its members'
digests (``StateStore.workspace_uninstalled``); other workspaces are untouched.
"""

from __future__ import annotations

import logging
import re
from datetime import UTC, datetime
from typing import Any

from slack_bolt import App, BoltContext
from slack_sdk import WebClient
from slack_sdk.oauth.installation_store import InstallationStore

from bot.slack import render
from bot.slack.services import Services
from bot.state import state_for

from . import feedback
from .commands import HELP_WORDS, command_text, subcommand

log = logging.getLogger(__name__)

#: At most this much of a message is searched for (a long message is mostly noise).
MAX_QUERY_CHARS = 500
# Links as Slack sends them: <https://x.org|label> (the label is kept) or <https://x.org>.
_LINK = re.compile(r"<(?:https?|mailto):[^<>|]*(?:\|([^<>]*))?>")
#: A subcommand typed in the DM, or with a mention (where slash commands do not run in a
#: thread, and only a mention is read).
TYPED_COMMAND_HINT = (
    "That is a command: send `/papers {}` (slash commands work here too). "
    "Anything else you type is looked up."
)
MENTIONED_COMMAND_HINT = (
    "That is a command: send `/papers {}` in a channel's message box or in your DM with me "
    "(slash commands do not run in threads). Mention me with anything else to look it up."
)
MENTION_HINT = (
    "Mention me with keywords to look papers up, like `@Paperboy diffusion models year:2024`. "
    + render.HELP_HINT
)


def register(app: App, services: Services) -> None:
    @app.event("app_mention")
    def mentioned(event: dict[str, Any], client: WebClient, context: BoltContext) -> None:
        if event.get("bot_id") or event.get("subtype"):
            return
        # In the thread the mention started, or is in.
        thread = event.get("thread_ts") or event.get("ts")
        services.later(None, answer_in, client, services, event, thread, context.team_id)

    # Bolt matches on type and subtype only ("subtype": None: none, so no edits, deletions
    # or joins); the conversation's kind is checked below.
    @app.event({"type": "message", "subtype": None})
    def direct_message(event: dict[str, Any], client: WebClient, context: BoltContext) -> None:
        # Only what a person typed in their DM with Paperboy: not our own replies, other bots.
        if event.get("channel_type") != "im" or event.get("bot_id") or not event.get("user"):
            return
        thread = event.get("thread_ts")
        services.later(None, answer_in, client, services, event, thread, context.team_id)

    @app.event("app_uninstalled")
    def uninstalled(context: BoltContext) -> None:
        services.later(
            None, forget_workspace, services, app.installation_store, context, "uninstalled"
        )

    @app.event("tokens_revoked")
    def revoked(event: dict[str, Any], context: BoltContext) -> None:
        if not (event.get("tokens") or {}).get("bot"):
            return  # user tokens only: Paperboy keeps none
        services.later(
            None, forget_workspace, services, app.installation_store, context, "token revoked"
        )


def forget_workspace(
    services: Services,
    installations: InstallationStore | None,
    context: BoltContext,
    why: str,
) -> None:
    """The workspace removed Paperboy: delete its installation (and bot token) and stop its
    members' digests; their topics and settings are kept for a reinstall."""
    team_id = context.team_id
    if not team_id:
        log.warning("an uninstall event named no workspace; nothing deleted")
        return
    if installations is not None:
        installations.delete_all(enterprise_id=context.enterprise_id, team_id=team_id)
    now = datetime.now(UTC).isoformat(timespec="seconds")
    state_for(services.engine.db_path).workspace_uninstalled(team_id, now)
    log.info(
        "workspace %s: Paperboy %s; its installation is deleted and its digests stop",
        team_id,
        why,
    )


def message_query(text: str) -> str:
    """What a Slack message asks for: its words without mentions and link targets (a link's
    label is kept), unescaped, cut to :data:`MAX_QUERY_CHARS`."""
    text = _LINK.sub(lambda m: f" {m.group(1) or ''} ", text or "")
    return " ".join(command_text(text).split())[:MAX_QUERY_CHARS].strip()


def lookup_message(services: Services, query: str) -> dict[str, Any]:
    """The answer to a query typed in a message: results, or how to ask."""
    if not query or query.lower() in HELP_WORDS:
        return render.as_message(MENTION_HINT, [render.section(MENTION_HINT)])
    result = services.engine.search(query, limit=render.PAGE_SIZE)
    if not result.hits and services.engine.corpus.count() == 0:
        return render.empty_corpus_message()
    return render.search_message(result, query=query)


def answer_in(
    client: WebClient,
    services: Services,
    event: dict[str, Any],
    thread_ts: str | None,
    team_id: str | None = None,
) -> None:
    """Post the answer where the question was asked (in ``thread_ts``'s thread if given).
    In the member's DM it shows their 👍/👎/Save; in a channel, everyone's buttons are blank.
    A subcommand typed as a message ("saved", "subscribe gnn") says how to run it."""
    query = message_query(event.get("text") or "")
    word = subcommand(query) if query else ""
    if word and word != "help":  # "/papers" would run it: say so rather than look it up
        hint = TYPED_COMMAND_HINT if event.get("channel_type") == "im" else MENTIONED_COMMAND_HINT
        text = hint.format(render.clip_escaped(query, 200))
        message = render.as_message(text, [render.section(text)])
    elif event.get("channel_type") == "im" and word == "help":
        message = render.help_message()
    else:
        message = lookup_message(services, query)
    if event.get("channel_type") == "im":
        team = team_id or str(event.get("team") or "")
        message = feedback.marked(message, str(event.get("user") or ""), team, services)
    client.chat_postMessage(
        channel=event.get("channel") or "",
        unfurl_links=False,
        unfurl_media=False,
        **({"thread_ts": thread_ts} if thread_ts else {}),
        **message,
    )
