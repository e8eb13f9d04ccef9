"""The member's reading list, ``/papers saved``: a page of saved papers, newest first, with
Next/Previous (``saved_next``/``saved_previous``, the offset in the value)."""

from __future__ import annotations

from typing import Any

from slack_sdk.models.blocks import ActionsBlock, Block, DividerBlock

from .blocks import as_message, button, encode_value, section
from .escaping import clip_escaped
from .feedback import feedback_buttons, with_choice
from .lookup import lead, paper_blocks

ACTION_SAVED_NEXT = "saved_next"
ACTION_SAVED_PREVIOUS = "saved_previous"
SAVED_PAGE_SIZE = 5


def saved_message(
    papers: list[dict[str, Any]],
    *,
    total: int,
    offset: int,
    choices: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """A page of the member's reading list, newest first, with Next/Previous; each paper with
    its buttons showing the member's 👍/👎 (and Saved, which a click removes)."""
    if not total:
        text = "Your reading list is empty: click Save under any paper Paperboy shows to add it."
        return as_message(text, [section(f":bookmark: {text}")])
    first, last = offset + 1, offset + len(papers)
    summary = f"*{total:,}* saved {'paper' if total == 1 else 'papers'}"
    if total > len(papers):
        summary += f" · showing {first}–{last}"
    blocks: list[Block] = [section(f":bookmark: Your reading list: {summary}")]
    for n, paper in enumerate(papers, start=first):
        if paper.get("missing"):
            pid = clip_escaped(paper["id"], 120)
            blocks += [DividerBlock(), section(f"{n}. `{pid}` _(no longer in the corpus)_")]
            blocks.append(ActionsBlock(elements=feedback_buttons(paper["id"], n, {"saved": True})))
            continue
        blocks.append(DividerBlock())
        blocks += paper_blocks(lead(paper), index=n, share=True, similar=True)
    nav = []
    if offset > 0:
        back = max(offset - SAVED_PAGE_SIZE, 0)
        nav.append(button("Previous", ACTION_SAVED_PREVIOUS, encode_value({"o": back})))
    if last < total:
        nav.append(button("Next", ACTION_SAVED_NEXT, encode_value({"o": last}), "primary"))
    if nav:
        blocks.append(ActionsBlock(elements=nav))
    message = as_message(f"Your reading list: {total:,} saved", blocks)
    for paper in papers:
        choice = {"kind": None, "saved": True, **choices.get(paper["id"], {})}
        message["blocks"] = with_choice(message["blocks"], paper["id"], choice)
    return message
