"""Block Kit pieces inside Slack's limits: sections, context lines, buttons and their values,
and the message dict ``{"text", "blocks"}`` that ``respond()``, ``chat.postMessage`` and
``chat.postEphemeral`` all accept (``text`` is always set: notifications and screen readers
show it)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from slack_sdk.models.blocks import (
    Block,
    ButtonElement,
    ContextBlock,
    MarkdownTextObject,
    PlainTextObject,
    SectionBlock,
)

from .escaping import clip, clip_mrkdwn

# Slack's limits (https://docs.slack.dev/reference/block-kit/blocks).
MAX_BLOCKS = 50
MAX_SECTION_TEXT = 3000
MAX_BUTTON_LABEL = 75
MAX_HEADER = 150
MAX_BUTTON_VALUE = 2000
MAX_CONTEXT_ELEMENTS = 10
MAX_FALLBACK_TEXT = 3000  # Slack truncates far later (40k); a notification needs far less


def encode_value(data: dict[str, Any]) -> str:
    """Compact JSON for a button ``value``; a query that would not fit is cut to fit."""
    value = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    if len(value) <= MAX_BUTTON_VALUE or not isinstance(data.get("q"), str):
        return value[:MAX_BUTTON_VALUE]
    query = data["q"]
    while len(value) > MAX_BUTTON_VALUE and query:
        query = query[: len(query) - (len(value) - MAX_BUTTON_VALUE) - 1]
        value = json.dumps({**data, "q": query}, ensure_ascii=False, separators=(",", ":"))
    return value


def decode_value(value: str | None) -> dict[str, Any]:
    """The dict a button carried; ``{}`` for anything unreadable (old or forged payloads)."""
    try:
        data = json.loads(value or "")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def button(label: str, action_id: str, value: str, style: str | None = None) -> ButtonElement:
    return ButtonElement(
        text=PlainTextObject(text=clip(label, MAX_BUTTON_LABEL), emoji=True),
        action_id=action_id,
        value=value[:MAX_BUTTON_VALUE],
        style=style,
    )


def mrkdwn(text: str) -> MarkdownTextObject:
    """A mrkdwn text object; ``text`` must already be escaped (see :func:`escape`)."""
    # verbatim: Slack must not auto-link URLs or parse mentions in what papers and queries
    # contain; the links and mentions written here explicitly (<url|title>, <@U1>) still work.
    return MarkdownTextObject(text=text[:MAX_SECTION_TEXT], verbatim=True)


def section(text: str) -> SectionBlock:
    """A section of escaped mrkdwn (cut at Slack's 3000 characters)."""
    return SectionBlock(text=mrkdwn(text))


def context(*texts: str) -> ContextBlock:
    """A context line of escaped mrkdwn pieces (at most Slack's 10 elements)."""
    elements = [mrkdwn(t) for t in texts if t]
    return ContextBlock(elements=elements[:MAX_CONTEXT_ELEMENTS])


def sections(lines: Iterable[str], limit: int = MAX_SECTION_TEXT) -> list[SectionBlock]:
    """Escaped mrkdwn lines packed into as few sections as fit, each within ``limit``
    characters, never splitting a line (a line longer than ``limit`` is cut on its own)."""
    out: list[SectionBlock] = []
    chunk: list[str] = []
    used = 0
    for line in lines:
        if chunk and used + 1 + len(line) > limit:
            out.append(section("\n".join(chunk)))
            chunk, used = [], 0
        used += len(line) + (1 if chunk else 0)
        chunk.append(line)
    if chunk:
        out.append(section("\n".join(chunk)))
    return out


def as_message(text: str, blocks: Sequence[Block | dict[str, Any]]) -> dict[str, Any]:
    """``{"text", "blocks"}`` for respond()/chat.postMessage: fallback text set and cut,
    at most 50 blocks, each block validated by slack_sdk as it is serialised (a dict is a
    block already serialised so, e.g. one a digest batch reuses)."""
    return {
        "text": clip_mrkdwn(text, MAX_FALLBACK_TEXT),
        "blocks": [b if isinstance(b, dict) else b.to_dict() for b in list(blocks)[:MAX_BLOCKS]],
    }
