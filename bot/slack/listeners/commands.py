"""``/papers``: look papers up, show help, or hand topic and digest subcommands over.

The listener acknowledges at once (Slack allows 3 seconds, whatever the corpus size) and
answers through ``respond()`` (the command's response_url) from the work pool.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

from slack_bolt import Ack, App
from slack_sdk import WebClient

from bot.slack import render
from bot.slack.replies import EPHEMERAL, reply
from bot.slack.services import Services, request_team

from . import feedback, subscriptions

log = logging.getLogger(__name__)

COMMAND = "/papers"
HELP_WORDS = frozenset({"help", "?", "-h", "--help", "usage"})
# Handled by the subscriptions listener; "topics" (or "topic") only on its own, so that
# "/papers topics in RL" stays a lookup.
SUBSCRIPTION_WORDS = frozenset({"subscribe", "unsubscribe", "digest"})
#: Subcommands only when typed alone (``subcommand``).
ALONE_WORDS = frozenset({"topics", "topic", "saved", "recommend"})

# Mentions as Slack sends them (``should_escape``: a typed "<" arrives as "&lt;", so these are
# always real mentions picked in Slack's autocomplete, never text the user typed): special
# ones (<!channel>, <!here>, <!everyone>, <!subteam^S1|@team>), users, and channels.
_MENTION = re.compile(r"<(?:![^<>]*|@[UW][A-Z0-9]+(?:\|[^<>]*)?)>")
_CHANNEL_MENTION = re.compile(r"<#[CG][A-Z0-9]+(?:\|[^<>]*)?>")
# Subcommands whose arguments name a channel (``digest channel #papers``).
CHANNEL_WORDS = frozenset({"digest"})


def register(app: App, services: Services) -> None:
    @app.command(COMMAND)
    def papers(
        ack: Ack, command: dict[str, Any], respond: Callable[..., Any], client: WebClient
    ) -> None:
        ack()
        services.later(respond, answer, command, respond, client, services)


def answer(
    command: dict[str, Any], respond: Callable[..., Any], client: WebClient, services: Services
) -> None:
    """Everything ``/papers`` can mean, decided by its first word.

    Subcommands go to ``subscriptions.handle(command, args, respond, client, services)`` with
    ``args`` the whole (unescaped) text after ``/papers``, subcommand included, e.g.
    ``"digest time 08:30"``.
    """
    text = command_text(command.get("text") or "")
    word = subcommand(text)
    if word == "help":
        reply(respond, render.help_message(), **EPHEMERAL)
    elif word == "saved":
        team = request_team(command)
        feedback.show_saved(command.get("user_id") or "", respond, services, team_id=team)
    elif word == "recommend":
        team = request_team(command)
        feedback.show_recommendations(command.get("user_id") or "", respond, services, team_id=team)
    elif word == "teammates":
        feedback.set_teammates(command, text, respond, services)
    elif word == "export":
        feedback.export_saved(command, text, respond, client, services)
    elif word:
        subscriptions.handle(command, text, respond, client, services)
    else:
        result = services.engine.search(text, limit=render.PAGE_SIZE)
        if not result.hits and services.engine.corpus.count() == 0:
            reply(respond, render.empty_corpus_message(), **EPHEMERAL)
            return
        message = render.search_message(result, query=text)
        user_id, team = command.get("user_id") or "", request_team(command)
        reply(respond, feedback.marked(message, user_id, team, services), **EPHEMERAL)


def subcommand(text: str) -> str:
    """The subcommand ``/papers <text>`` runs, by its first word ("help" for no text), or
    "" for a lookup. Words that are also search terms count only where they cannot be one:
    "topics" and "saved" alone, "export" alone or with one word (a format: an unknown one
    is told the formats); so "/papers topic models" is a lookup."""
    words = text.split(maxsplit=1)
    word, alone = (words[0].lower() if words else ""), len(words) < 2
    rest = "" if alone else words[1].strip().lower()
    if not text or (word in HELP_WORDS and alone):
        return "help"
    if word in ALONE_WORDS and alone:
        return word
    if word == "teammates" and (alone or rest in feedback.TOGGLE_WORDS):
        return word
    if word == "export" and len(rest.split()) < 2:  # one word: a format, known or not
        return word
    return word if word in SUBSCRIPTION_WORDS else ""


def command_text(raw: str) -> str:
    """What the user typed after ``/papers``, without mentions, which are no search terms:
    ``/papers @channel diffusion`` looks up "diffusion" (and ``/papers @channel`` alone is an
    empty query). Channel mentions stay after ``digest``, which needs them.

    Mentions are found in the text as Slack sends it, before ``&``, ``<`` and ``>`` are
    unescaped: a "<!channel>" the user typed as text arrives as ``&lt;!channel&gt;`` and is
    searched for like any other words.
    """
    raw = _MENTION.sub(" ", raw)
    words = render.unescape(raw).split(maxsplit=1)
    if not words or words[0].lower() not in CHANNEL_WORDS:
        raw = _CHANNEL_MENTION.sub(" ", raw)
    # Slack sends the text with &, < and > escaped; the engine wants what the user typed.
    return render.unescape(raw).strip()
