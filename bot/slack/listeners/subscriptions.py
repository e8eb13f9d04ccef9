"""``/papers subscribe|unsubscribe|topics|digest ...``: topics and the daily digest.

``commands.answer`` hands these subcommands over to :func:`handle` (already off the ack path).
Every reply is ephemeral: what a member follows is nobody else's business. The work itself
is in ``digest/``; this module parses, calls it and renders.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from slack_sdk import WebClient
from slack_sdk.models.blocks import Block

from bot.engine.query import QueryError
from bot.english import count, day_and_time, empty_corpus, noun_for
from bot.slack import render
from bot.slack.home import republish_home
from bot.slack.poster import SlackPoster
from bot.slack.render.digest import digest_message
from bot.slack.replies import EPHEMERAL, reply
from bot.slack.services import Services, request_team
from digest.delivery import Dispatcher, refresh_time_zone
from digest.ledger import Ledger
from digest.matching import check_topic, match_topics
from digest.poster import TokenRefused
from digest.schedule import next_digest
from digest.subscriptions import (
    MAX_TOPICS,
    Member,
    SubscriptionError,
    Subscriptions,
    describe_days,
)

log = logging.getLogger(__name__)

SUBCOMMANDS = ("subscribe", "unsubscribe", "topics", "topic", "digest")
_CHANNEL = re.compile(r"^<#([CG][A-Z0-9]+)(?:\|[^>]*)?>$|^([CG][A-Z0-9]{6,})$")


def _message(text: str, blocks: list[Block] | None = None) -> dict[str, Any]:
    """A reply whose ``text`` is already escaped mrkdwn (one section unless ``blocks``)."""
    return render.as_message(text, blocks or [render.section(text)])


def _split(args: str) -> tuple[str, str]:
    """(subcommand, the rest) of ``args``: the whole text after ``/papers``, already unescaped
    by ``commands.answer`` (Slack sends & < > as entities), subcommand included."""
    words = (args or "").strip().split(maxsplit=1)
    word = words[0].lower() if words else ""
    if word not in SUBCOMMANDS:
        return "", (args or "").strip()
    return word, (words[1].strip() if len(words) > 1 else "")


def handle(
    command: dict[str, Any],
    args: str,
    respond: Callable[..., Any],
    client: WebClient,
    services: Services,
    *,
    now: datetime | None = None,
) -> None:
    """Answer one topic or digest subcommand, privately."""
    now = now or datetime.now(UTC)
    user_id = command.get("user_id") or ""
    team_id = request_team(command)
    word, rest = _split(args)
    subscriptions = Subscriptions(services.engine.db)
    if services.engine.read_only:
        # Nothing can be saved: the member as stored (or a new one's defaults), so that
        # reads (topics, digest preview) still answer; writes say why they cannot.
        # A member not yet of this workspace (known without a team, see ``add_member``) is
        # read as they are: they become the workspace's at the first write.
        member = (
            subscriptions.member(user_id, team_id)
            or subscriptions.member(user_id, "")
            or Member(user_id, team_id)
        )
    else:
        member = subscriptions.ensure_member(user_id, now, team_id)
        try:
            poster = SlackPoster(client, services.engine)
            member = refresh_time_zone(poster, subscriptions, user_id, now, team_id=team_id)
        except TokenRefused as error:  # topics need no Slack: answer with the zone we have
            log.error("Slack refused the bot token (%s); the operator must replace it", error.code)
    try:
        if services.engine.read_only and _writes(word, rest):
            # Refused before trying; a write that fails anyway (the file's mode changed
            # under a running app) is told the same way by ``Services.guarded``.
            message = render.read_only_message()
        elif word == "subscribe":
            message = subscribe(services, subscriptions, member, rest, now)
        elif word == "unsubscribe":
            message = unsubscribe(subscriptions, member, rest)
        elif word in ("topics", "topic"):
            message = topics(services, subscriptions, member, now)
        elif word == "digest":
            message = digest(services, subscriptions, member, rest, client, now)
        else:
            message = render.help_message()
    except (SubscriptionError, QueryError) as error:
        message = render.error_message(str(error))
    reply(respond, message, **EPHEMERAL)
    if _writes(word, rest) and not services.engine.read_only:
        republish_home(client, services.engine, user_id, team_id)  # the Home tab shows it


#: ``digest`` actions that save something (``now`` records the digest it sends).
DIGEST_WRITES = frozenset({"on", "off", "time", "days", "channel", "now"})


def _writes(word: str, rest: str) -> bool:
    """Whether the subcommand saves something (refused at once on a read-only database)."""
    if word in ("subscribe", "unsubscribe"):
        return True
    return word == "digest" and rest.strip().partition(" ")[0].lower() in DIGEST_WRITES


# --- subcommands -------------------------------------------------------------------------------


def _schedule_line(services: Services, member: Member, now: datetime) -> str:
    if not member.enabled:
        if member.topic_count and member.digest_enabled is False:
            return "Your digest is *off* (`/papers digest on` turns it back on)."
        return "Your digest starts with your first topic."
    where = f"in <#{member.digest_channel}>" if member.digest_channel else "by a direct message"
    taken = Ledger(services.engine.db).taken(member.user_id, member.team_id)
    upcoming = next_digest(member, now, taken)
    when = f" Next: {day_and_time(upcoming)}." if upcoming else ""
    return (
        f"Your digest: {describe_days(member.digest_days)} at {member.digest_time} "
        f"({render.escape(member.tz or 'UTC')}), {where}.{when}"
    )


def _paper_line(hit: Any) -> str:
    paper = hit.paper
    meta = render.paper_meta(paper)
    return f"• {render.paper_title(paper)}" + (f" · {meta}" if meta else "")


def subscribe(
    services: Services, subscriptions: Subscriptions, member: Member, text: str, now: datetime
) -> dict[str, Any]:
    if not text.strip():
        raise SubscriptionError(
            'Say what to follow, like `/papers subscribe "graph neural networks" -survey`.'
        )
    check = check_topic(services.engine, text)
    if check.error:
        return render.error_message(check.error)
    topic, created = subscriptions.add_topic(member.user_id, text, now, member.team_id)
    member = subscriptions.member(member.user_id, member.team_id) or member
    shown = render.clip_escaped(topic.query, 200)
    number = next(
        (
            n
            for n, t in enumerate(subscriptions.topics(member.user_id, member.team_id), 1)
            if t.id == topic.id
        ),
        0,
    )
    if created:
        head = (
            f":white_check_mark: Subscribed to *{shown}* (topic {number} of {member.topic_count})."
        )
    else:
        head = f"You already follow *{shown}* (topic {number}); nothing changed."
    found = f"It matches *{check.matches:,}* {noun_for(check.matches, 'paper')} in the corpus now"
    if check.mentions > check.matches:
        # A lookup counts every paper with any of the words: say why this number is smaller.
        found += (
            f" (mainly about it: {check.mentions:,} mention its words, which is what "
            "a lookup counts)"
        )
    found += ", the best:" if check.top else "."
    # No papers at all: "matches nothing" would blame the topic; say what to run instead.
    empty = not check.matches and services.engine.corpus.count() == 0
    if empty:
        found = render.escape(empty_corpus())
    blocks: list[Block] = [render.section(f"{head}\n{found}")]
    blocks += render.sections(_paper_line(h) for h in check.top)
    if check.advice and not empty:
        warn = check.verdict in ("broad", "general", "partly")
        icon = ":warning:" if warn else ":information_source:"
        advice = render.clip_escaped(check.advice, render.MAX_SECTION_TEXT - 30, markup=True)
        blocks.append(render.section(f"{icon} {advice}"))
    blocks.append(
        render.context(
            f"{_schedule_line(services, member, now)} `/papers unsubscribe {number}` undoes this; "
            "`/papers topics` lists your topics."
        )
    )
    return _message(f"{head} {found}", blocks)


def unsubscribe(subscriptions: Subscriptions, member: Member, text: str) -> dict[str, Any]:
    topic = subscriptions.remove_topic(member.user_id, text, member.team_id)
    left = len(subscriptions.topics(member.user_id, member.team_id))
    rest = (
        f"You follow {count(left, 'topic')}."
        if left
        else ("You follow no topics now, so no digests will come.")
    )
    text = f"Unsubscribed from *{render.clip_escaped(topic.query, 200)}*. {rest}"
    return _message(text)


def topics(
    services: Services, subscriptions: Subscriptions, member: Member, now: datetime
) -> dict[str, Any]:
    mine = subscriptions.topics(member.user_id, member.team_id)
    if not mine:
        return _message(
            "You do not follow any topics yet. `/papers subscribe &lt;topic&gt;` starts one, like "
            '`/papers subscribe "graph neural networks"`.'
        )
    counts = [m.count for m in match_topics(services.engine, [t.query for t in mine])]
    lines = [
        f"{n}. {render.clip_escaped(t.query, 200)} · {count(c, 'paper')}"
        for n, (t, c) in enumerate(zip(mine, counts, strict=True), 1)
    ]
    head = f"*Your topics* ({len(mine)} of at most {MAX_TOPICS}):"
    # 25 topics of 200 characters do not fit in one section (3000): as many as it takes.
    blocks: list[Block] = [*render.sections([head, *lines])]
    blocks.append(
        render.context(
            f"{_schedule_line(services, member, now)} `/papers unsubscribe &lt;number&gt;` drops a topic. "
            "Counts are papers mainly about each topic; a lookup counts every paper with "
            "any of its words."
        )
    )
    return _message(head + " " + "; ".join(lines), blocks)


#: ``/papers digest <setting>`` without a value: the setting is shown, with how to change it
#: (an empty channel used to mean "back to my DMs", a change nobody asked for).
SETTING_EXAMPLES = {
    "time": "`/papers digest time 08:30` (your local time)",
    "days": "`/papers digest days mon-fri` (or `weekdays`, `daily`, `mon,wed,fri`)",
    "channel": "`/papers digest channel #papers`, or `/papers digest channel dm` for direct "
    "messages",
}


def digest(
    services: Services,
    subscriptions: Subscriptions,
    member: Member,
    text: str,
    client: WebClient,
    now: datetime,
) -> dict[str, Any]:
    action, _, value = text.strip().partition(" ")
    action, value = action.lower(), value.strip()
    user_id = member.user_id
    if action in ("", "status"):
        return _message(f"{_schedule_line(services, member, now)}\n{render.DIGEST_USAGE}")
    if action in SETTING_EXAMPLES and not value:  # what it is now, and how to change it
        example = SETTING_EXAMPLES[action]
        return _message(f"{_schedule_line(services, member, now)}\nTo change it: {example}.")
    if action in ("on", "off"):
        member = subscriptions.set_enabled(user_id, action == "on", now, team_id=member.team_id)
        if action == "on" and not member.topic_count:
            return _message(
                "Your digest is on, and starts with your first topic: `/papers subscribe &lt;topic&gt;`."
            )
        return _message(_schedule_line(services, member, now))
    if action == "time":
        member = subscriptions.set_time(user_id, value, now, team_id=member.team_id)
        return _message(_schedule_line(services, member, now))
    if action == "days":
        member = subscriptions.set_days(user_id, value, now, team_id=member.team_id)
        return _message(_schedule_line(services, member, now))
    if action == "channel":
        return _set_channel(services, subscriptions, member, value, now)
    poster = SlackPoster(client, services.engine)
    dispatcher = Dispatcher.from_settings(services.engine, poster, services.settings)
    if action == "preview":
        plan = dispatcher.preview(user_id, member.team_id)
        if not plan.size:
            return _nothing(services, member)
        local = now.astimezone(member.zone).date().isoformat()
        message, _ = digest_message(services.engine, plan, local, preview=True)
        return message
    if action == "now":
        if member.topic_count and services.engine.corpus.count() == 0:
            return render.empty_corpus_message()
        try:
            outcome = dispatcher.send_now(user_id, now, team_id=member.team_id)
        except TokenRefused as error:
            log.error("Slack refused the bot token (%s); the operator must replace it", error.code)
            return _message(
                "Slack refused Paperboy's token, so no digest can be sent right now; please "
                "tell whoever runs Paperboy."
            )
        if outcome.status == "skipped":
            return _nothing(services, member)
        where = f"<#{outcome.channel}>" if member.digest_channel else "your direct messages"
        texts = {
            "sent": f":incoming_envelope: Sent: {count(outcome.papers, 'paper')}, in {where}.",
            "busy": "A digest for you is already on its way; it will be there in a moment.",
            "failed": f"Slack would not take your digest ({render.escape(outcome.error or '')}). "
            + (
                "Is Paperboy in that channel? `/invite @Paperboy` there, or "
                "`/papers digest channel dm`."
                if member.digest_channel
                else "Please try again later."
            ),
            "pending": "Slack is busy right now; your digest will follow shortly.",
        }
        return _message(texts[outcome.status])
    # Not escaped here: error_message escapes the whole sentence (once).
    raise SubscriptionError(f"I don't know `digest {action}`. {render.DIGEST_USAGE}")


def _nothing(services: Services, member: Member) -> dict[str, Any]:
    """Why the member's digest is empty: no topics, no papers at all, or all sent already."""
    if not member.topic_count:
        return _message(
            "You follow no topics yet: `/papers subscribe &lt;topic&gt;` starts your digest."
        )
    if services.engine.corpus.count() == 0:
        return render.empty_corpus_message()
    return _message(
        "Nothing to send: every paper matching your topics has already been in your digests. "
        "New papers will come as they are added."
    )


def _set_channel(
    services: Services, subscriptions: Subscriptions, member: Member, value: str, now: datetime
) -> dict[str, Any]:
    if value.lower() in ("dm", "direct", "me", "off", "none", ""):
        member = subscriptions.set_channel(member.user_id, None, now, team_id=member.team_id)
        return _message(_schedule_line(services, member, now))
    match = _CHANNEL.match(value)
    if not match:
        raise SubscriptionError(
            "Name the channel as a link, like `/papers digest channel #papers` (pick it from "
            "the list Slack offers as you type), or `channel dm` for direct messages."
        )
    channel = match.group(1) or match.group(2)
    member = subscriptions.set_channel(member.user_id, channel, now, team_id=member.team_id)
    return _message(
        f"{_schedule_line(services, member, now)}\nIf Paperboy is not in that channel yet, "
        "`/invite @Paperboy` there. Everyone in the channel will see your digest."
    )
