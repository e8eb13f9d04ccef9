"""Short notices: a problem told kindly, an apology, a read-only database, an empty corpus."""

from __future__ import annotations

from typing import Any

from slack_sdk.models.blocks import Block

from bot.english import empty_corpus

from .blocks import MAX_SECTION_TEXT, as_message, context, section
from .escaping import clip_escaped, escape
from .help import HELP_HINT


def error_message(error: str, *, hint: bool = False) -> dict[str, Any]:
    """A problem told kindly (the engine's messages say what to type instead)."""
    text = clip_escaped(error, MAX_SECTION_TEXT - 20, markup=True)
    blocks: list[Block] = [section(f":warning: {text}")]
    if hint:
        blocks.append(context(HELP_HINT))
    return as_message(text, blocks)


def apology_message() -> dict[str, Any]:
    text = (
        "Sorry, something went wrong on Paperboy's side while answering that. "
        "Please try again in a moment; if it keeps happening, tell whoever runs Paperboy."
    )
    return as_message(text, [section(f":face_with_head_bandage: {text}")])


#: A request acknowledged as the process stops, whose work could no longer start.
STOPPING = "Paperboy is restarting and could not answer that; please try again in a minute."


def stopping_message() -> dict[str, Any]:
    return as_message(STOPPING, [section(f":arrows_counterclockwise: {STOPPING}")])


#: A write (subscribe, digest settings, digest now) refused by a read-only database.
READ_ONLY = (
    "Paperboy cannot save changes right now because its database is read-only; please ask "
    "whoever runs Paperboy to fix that. Lookups still work."
)


def read_only_message() -> dict[str, Any]:
    return as_message(READ_ONLY, [section(f":warning: {escape(READ_ONLY)}")])


def empty_corpus_message() -> dict[str, Any]:
    """A lookup over a corpus with no papers: what to run (the CLI's sentence too)."""
    sentence = empty_corpus()
    return as_message(sentence, [section(f":inbox_tray: {escape(sentence)}")])
