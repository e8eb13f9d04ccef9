"""What Paperboy understands, said once: the query language and the ``/papers`` subcommands.

Plain text, no markup: the Slack help (``bot.slack.render.help``: ``/papers help``, the App
Home, the digest subcommands' usage line) and the command line (``paperboy search --help``)
are both written from these lists, so a new filter or subcommand is added in one place.
"""

from __future__ import annotations

from typing import NamedTuple


class Usage(NamedTuple):
    """One thing to type (after ``/papers``, or ``paperboy search``), what it does, and an
    example when the placeholder needs one."""

    args: str
    does: str
    example: str = ""


#: The query language, one example per feature.
QUERY_EXAMPLES: tuple[Usage, ...] = (
    Usage("diffusion models", "keywords, best matches first"),
    Usage('"graph neural networks"', "an exact phrase must occur"),
    Usage("transformers -survey", "leave out papers with a word"),
    Usage("venue:ICLR year:2024-2025 reinforcement learning", "filter by venue and year"),
    Usage('author:"Jane Doe" optimization', "filter by author"),
)
#: The query language in one line.
QUERY_SUMMARY = 'keywords, "quoted phrases", -excluded words, venue:, year:, author:'
#: Placeholders are in angle brackets (``<topic>``), which Slack needs escaped.
TOPIC_COMMANDS: tuple[Usage, ...] = (
    Usage("subscribe <topic>", "follow a topic", 'subscribe "diffusion models" venue:ICLR'),
    Usage("unsubscribe <topic or number>", "stop following a topic"),
    Usage("topics", "list your topics, numbered"),
)
DIGEST_COMMANDS: tuple[Usage, ...] = (
    Usage("digest on", "your daily digest on (it starts with your first topic)"),
    Usage("digest off", "no more digests"),
    Usage("digest time 08:30", "when, in your Slack time zone"),
    Usage("digest days mon-fri", "which days"),
    Usage("digest preview", "see what the next digest would hold"),
    Usage("digest now", "send a digest right away"),
    Usage(
        "digest channel #papers", "post your digest in a channel (digest channel dm: back to DMs)"
    ),
)
#: The reading list: 👍, 👎 and Save are buttons under every paper; these read what was saved.
READING_LIST_COMMANDS: tuple[Usage, ...] = (
    Usage("saved", "your reading list: the papers you saved, newest first"),
    Usage("export bibtex", "your reading list as a file in our DM (also: export csv)"),
)
#: What Paperboy learns from 👍 and 👎 (digest/taste.py).
TASTE_COMMANDS: tuple[Usage, ...] = (
    Usage("recommend", "papers picked for you from your 👍 and 👎, now"),
    Usage(
        "teammates off",
        "digests stop saying how many teammates saved a paper (teammates on: back)",
    ),
)
