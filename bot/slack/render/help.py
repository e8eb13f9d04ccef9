"""The help, written from ``bot.help_text`` (the one list of what Paperboy understands, which
the command line's help uses too): ``/papers help``, the sections under the App Home's
dashboard, the usage line of the digest subcommands, and the hint under a problem."""

from __future__ import annotations

from typing import Any

from slack_sdk.models.blocks import Block, DividerBlock, HeaderBlock, PlainTextObject

from bot.help_text import (
    DIGEST_COMMANDS,
    QUERY_EXAMPLES,
    READING_LIST_COMMANDS,
    TASTE_COMMANDS,
    TOPIC_COMMANDS,
    Usage,
)

from .blocks import as_message, context, section
from .escaping import escape

COMMAND = "/papers"
HELP_HINT = f"Type `{COMMAND} help` to see everything Paperboy understands."


def command(args: str) -> str:
    """``/papers <args>`` as code, its placeholders escaped (Slack reads ``<...>`` as a link)."""
    return f"`{COMMAND} {escape(args)}`"


def usage_line(usage: Usage) -> str:
    line = f"{command(usage.args)} · {escape(usage.does)}"
    return line + (f" · e.g. {command(usage.example)}" if usage.example else "")


HELP_SECTIONS = (
    "*Look papers up* (only you see the results until you share one)\n"
    + "\n".join(usage_line(u) for u in QUERY_EXAMPLES),
    "*Subscribe to topics* (new papers come in your daily digest)\n"
    + "\n".join(usage_line(u) for u in TOPIC_COMMANDS),
    "*Daily digest* (a direct message with new papers on your topics)\n"
    + "\n".join(usage_line(u) for u in DIGEST_COMMANDS),
    "*Reading list* (👍, 👎 and *Save* under every paper; only you see what you chose)\n"
    + "\n".join(usage_line(u) for u in READING_LIST_COMMANDS),
    "*Recommendations* (from your 👍 and 👎: your digest ranks your topics' papers by them and "
    "adds a few you may like)\n" + "\n".join(usage_line(u) for u in TASTE_COMMANDS),
)
#: The digest subcommands in one line (``/papers digest`` alone, or one it does not know).
DIGEST_USAGE = " · ".join(command(u.args) for u in DIGEST_COMMANDS)


def help_message() -> dict[str, Any]:
    """``/papers help``: every subcommand with an example."""
    blocks: list[Block] = [
        HeaderBlock(text=PlainTextObject(text="Paperboy: research papers in Slack", emoji=True))
    ]
    for n, text in enumerate(HELP_SECTIONS):
        if n:
            blocks.append(DividerBlock())
        blocks.append(section(text))
    blocks.append(
        context(
            "Each result has *Similar papers*, *Share to channel*, 👍, 👎 and *Save* buttons. "
            "To look up one "
            'of the words above, put it in quotes: `/papers "digest"`.'
        )
    )
    topics = ", ".join(f"{COMMAND} {escape(u.args)}" for u in TOPIC_COMMANDS)
    digests = ", ".join(f"{COMMAND} {escape(u.args)}" for u in DIGEST_COMMANDS)
    saved = ", ".join(
        f"{COMMAND} {escape(u.args)}" for u in (*READING_LIST_COMMANDS, *TASTE_COMMANDS)
    )
    text = (
        f"Paperboy help: {COMMAND} &lt;keywords&gt; to look papers up; {topics}; {digests}; "
        f"{saved}."
    )
    return as_message(text, blocks)
