"""The App Home tab as the member's dashboard: their topics (match counts, a Remove button
each), "Add a topic", the digest's settings as controls (on/off, a time picker, days, DM or a
channel), when the next digest comes and how the last one went, and "Search papers".

Plain data in (the member, their topics with counts, the next slot, the last ledger row),
a ``views.publish`` view dict out; the listeners in ``listeners/home.py`` gather the data
and handle the controls (their action ids are here).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from slack_sdk.models.blocks import (
    ActionsBlock,
    Block,
    CheckboxesElement,
    ConversationSelectElement,
    DividerBlock,
    HeaderBlock,
    Option,
    PlainTextObject,
    SectionBlock,
    TimePickerElement,
)
from slack_sdk.models.views import View

from bot.english import day_and_time, noun_for

from .blocks import button, context, mrkdwn, section
from .escaping import clip_escaped, escape
from .help import HELP_SECTIONS
from .lookup import paper_title

# Action ids of the Home tab's controls (``listeners/home.py`` handles them).
HOME_ADD_TOPIC = "home_add_topic"
HOME_REMOVE_TOPIC = "home_remove_topic"  # home_remove_topic:<n>, value: the topic's text
HOME_DIGEST_ON = "home_digest_on"
HOME_DIGEST_OFF = "home_digest_off"
HOME_TIME = "home_time"
HOME_DAYS = "home_days"
HOME_CHANNEL = "home_channel"
HOME_DM = "home_dm"
HOME_SEARCH = "home_search"
HOME_DIGEST_BLOCK = "home_digest"
HOME_NEXT_BLOCK = "home_next"
HOME_TOPICS_BLOCK = "home_topics"
HOME_TEAM_SAVES = "home_team_saves"  # value "on" | "off"
HOME_SAVED_BLOCK = "home_saved"
HOME_RECOMMENDED_BLOCK = "home_recommended"
#: Saved papers and recommendations listed on the Home tab (each list is one block).
HOME_SHOWN = 5

DAY_LABELS = {
    "mon": "Mon",
    "tue": "Tue",
    "wed": "Wed",
    "thu": "Thu",
    "fri": "Fri",
    "sat": "Sat",
    "sun": "Sun",
}
TOPIC_SHOWN_CHARS = 200


def topic_line(query: str, matches: int) -> str:
    return f"*{clip_escaped(query, TOPIC_SHOWN_CHARS)}* · {matches:,} {noun_for(matches, 'paper')}"


def last_digest_line(row: dict[str, Any] | None, zone: Any) -> str:
    """How the last digest went, from its ledger row: sent (when, how many papers), nothing
    new, on its way, or why it failed."""
    if not row:
        return "No digest sent yet."
    status = row.get("status")
    stamp = row.get("finished_at") or row.get("claimed_at") or ""
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00")).astimezone(zone)
        shown = day_and_time(when)
    except ValueError:
        shown = "recently"
    if status == "sent":
        papers = len(_ids(row.get("paper_ids")))
        return f"Last digest: sent {shown}, {papers} {noun_for(papers, 'paper')}."
    if status == "skipped":
        return f"Last digest: nothing new on {shown}, so none was sent."
    if status == "failed":
        reason = clip_escaped(row.get("error") or "unknown error", 200)
        return f":warning: Last digest failed {shown}: Slack said `{reason}`."
    return f"A digest is on its way (since {shown})."


def _ids(raw: Any) -> list[Any]:
    try:
        ids = json.loads(raw or "[]")
    except ValueError:
        return []
    return ids if isinstance(ids, list) else []


def home_dashboard(
    *,
    topics: Sequence[tuple[str, int]],
    max_topics: int,
    enabled: bool,
    digest_enabled: bool | None,
    digest_time: str,
    digest_days: Sequence[str],
    digest_channel: str | None,
    tz: str,
    upcoming: datetime | None,
    last: str,
    notice: str | None = None,
    saved: Sequence[dict[str, Any]] = (),
    saved_total: int = 0,
    recommended: Sequence[tuple[dict[str, Any], str]] = (),
    recommend_note: str | None = None,
    team_saves: bool = True,
) -> dict[str, Any]:
    """The Home tab (a ``views.publish`` view): at most 25 topics + 25 other blocks, far
    within Slack's 100. ``saved``: the newest saved papers (of ``saved_total``);
    ``recommended``: (paper, why) pairs, or ``recommend_note`` saying why there are none."""
    blocks: list[Block] = [
        HeaderBlock(text=PlainTextObject(text="Your Paperboy", emoji=True)),
    ]
    if notice:
        blocks.append(section(f":warning: {notice}"))
    head = f"*Your topics* ({len(topics)} of at most {max_topics})"
    if not topics:
        head += "\nYou follow no topics yet. Add one and new papers on it come in your digest."
    add = button("Add a topic", HOME_ADD_TOPIC, "add", "primary")
    blocks.append(SectionBlock(block_id=HOME_TOPICS_BLOCK, text=mrkdwn(head), accessory=add))
    for n, (query, matches) in enumerate(topics, 1):
        remove = button("Remove", f"{HOME_REMOVE_TOPIC}:{n}", query, "danger")
        blocks.append(SectionBlock(text=mrkdwn(topic_line(query, matches)), accessory=remove))

    blocks.append(DividerBlock())
    where = f"in <#{digest_channel}>" if digest_channel else "by a direct message"
    if enabled:
        state = f"*Daily digest: on*, {where}."
    elif topics and digest_enabled is False:
        state = "*Daily digest: off.*"
    else:
        state = "*Daily digest* starts with your first topic."
    toggle = (
        button("Turn off", HOME_DIGEST_OFF, "off")
        if digest_enabled is not False
        else button("Turn on", HOME_DIGEST_ON, "on", "primary")
    )
    blocks.append(SectionBlock(block_id=HOME_DIGEST_BLOCK, text=mrkdwn(state), accessory=toggle))
    picker = TimePickerElement(
        action_id=HOME_TIME,
        initial_time=digest_time,
        placeholder=PlainTextObject(text="Delivery time"),
    )
    channel = ConversationSelectElement(
        action_id=HOME_CHANNEL,
        placeholder=PlainTextObject(text="Post in a channel…"),
        **({"initial_conversation": digest_channel} if digest_channel else {}),
    )
    controls: list[Any] = [picker, channel]
    if digest_channel:
        controls.append(button("Send to my DMs", HOME_DM, "dm"))
    blocks.append(ActionsBlock(elements=controls))
    options = [Option(value=d, label=label) for d, label in DAY_LABELS.items()]
    chosen = [o for o in options if o.value in digest_days]
    days = CheckboxesElement(
        action_id=HOME_DAYS,
        options=options,
        **({"initial_options": chosen} if chosen else {}),
    )
    blocks.append(ActionsBlock(elements=[days]))
    zone = escape(tz)
    when = (
        f"Next digest: *{day_and_time(upcoming)}* ({zone})"
        if upcoming and enabled
        else f"No digest scheduled (times are in {zone})"
    )
    blocks.append(_context_with_id(HOME_NEXT_BLOCK, f"{when}. {last}"))

    blocks.append(DividerBlock())
    blocks += _taste_blocks(saved, saved_total, recommended, recommend_note, team_saves)

    blocks.append(DividerBlock())
    search = button("Search papers", HOME_SEARCH, "search", "primary")
    blocks.append(
        SectionBlock(
            text=mrkdwn(
                "*Look papers up* here, with `/papers &lt;keywords&gt;`, or `@Paperboy` in a thread."
            ),
            accessory=search,
        )
    )
    blocks.append(DividerBlock())
    blocks.extend(section(text) for text in HELP_SECTIONS)
    view = View(type="home", callback_id="home", blocks=blocks)
    return view.to_dict()


def _taste_blocks(
    saved: Sequence[dict[str, Any]],
    saved_total: int,
    recommended: Sequence[tuple[dict[str, Any], str]],
    recommend_note: str | None,
    team_saves: bool,
) -> list[Block]:
    """The reading list (newest few, with the count), recommendations, and the teammates'
    saves control: four blocks whatever the lists hold."""
    if saved_total:
        head = f"*Your reading list* · {saved_total:,} saved {noun_for(saved_total, 'paper')}"
        lines = [f"• {paper_title(p)}" for p in saved[:HOME_SHOWN]]
        more = saved_total - len(lines)
        if more > 0:
            lines.append(f"_and {more:,} more: `/papers saved`_")
        text = "\n".join([head, *lines])
    else:
        text = "*Your reading list* is empty: click Save under any paper to keep it here."
    blocks: list[Block] = [SectionBlock(block_id=HOME_SAVED_BLOCK, text=mrkdwn(text))]
    if recommended:
        lines = [f"• {paper_title(p)}\n   {why}" for p, why in recommended[:HOME_SHOWN]]
        text = "\n".join(["*Recommended for you* (`/papers recommend` for more)", *lines])
    else:
        text = f"*Recommended for you*: {recommend_note or 'nothing yet.'}"
    blocks.append(SectionBlock(block_id=HOME_RECOMMENDED_BLOCK, text=mrkdwn(text)))
    state = "shown" if team_saves else "hidden"
    toggle = (
        button("Hide", HOME_TEAM_SAVES, "off")
        if team_saves
        else button("Show", HOME_TEAM_SAVES, "on")
    )
    blocks.append(
        SectionBlock(
            text=mrkdwn(
                f"*Teammates' saves in your digests:* {state} "
                "(“2 teammates also saved this”: a count, never who)."
            ),
            accessory=toggle,
        )
    )
    return blocks


def _context_with_id(block_id: str, text: str) -> Block:
    block = context(text)
    block.block_id = block_id
    return block
