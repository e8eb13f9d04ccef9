"""``/papers recommend``: the member's current top recommendations, each with why and the
👍/👎/Save buttons; and the one line that says why a paper is recommended, which the digest's
"Recommended for you" section uses too."""

from __future__ import annotations

from typing import Any

from slack_sdk.models.blocks import Block, ContextBlock, DividerBlock
from slack_sdk.models.blocks.basic_components import MarkdownTextObject

from bot.engine.latex import readable
from bot.english import count, liked

from .blocks import MAX_CONTEXT_ELEMENTS, as_message, context, section
from .escaping import clip_escaped
from .lookup import lead, paper_blocks

NO_FEEDBACK = (
    "I have nothing to recommend yet: click 👍 under papers you like (in your digest or a "
    "lookup) and I'll find more like them. `/papers recommend` then shows them."
)
ONLY_DISLIKES = (
    "You have only 👎-ed papers so far: those and papers very close to them stay out of your "
    "digests. Recommendations start with your first 👍."
)
NOTHING_LEFT = (
    "Nothing new to recommend right now: every paper like the ones you 👍 was already sent "
    "to you or rated. New papers come in your digest."
)

#: Under fewer recommendations than asked for.
FEWER = (
    "Only {} like the ones you 👍 are neither sent to you, rated nor saved yet: each 👍 finds more."
)


def liked_note(liked_count: int, example_title: str | None) -> str:
    """Why a paper is recommended: ``like the 3 papers you 👍, e.g. “…”`` (mrkdwn, escaped)."""
    note = f":sparkles: {liked(liked_count)}"
    if example_title and liked_count > 1:
        note += f", e.g. “{clip_escaped(readable(example_title), 120)}”"
    elif example_title:
        note += f": “{clip_escaped(readable(example_title), 120)}”"
    return note


def with_notes(blocks: list[Block], notes: list[str]) -> list[Block]:
    """A paper's blocks with notes added to its context line (so they cost no block)."""
    for block in blocks:
        if isinstance(block, ContextBlock) and notes:
            room = MAX_CONTEXT_ELEMENTS - len(block.elements)
            block.elements += [MarkdownTextObject(text=n, verbatim=True) for n in notes[:room]]
            break
    return blocks


def recommend_message(
    papers: list[tuple[dict[str, Any], int, str | None, float]],
    *,
    likes: int,
    dislikes: int,
    wanted: int | None = None,
) -> dict[str, Any]:
    """The recommendations: ``papers`` as (paper, how many 👍 papers it is like, the title of
    the most alike, score); or the sentence saying why there are none. Fewer than ``wanted``
    say why there are not more."""
    if not papers:
        text = (
            NO_FEEDBACK
            if not likes and not dislikes
            else (ONLY_DISLIKES if not likes else NOTHING_LEFT)
        )
        return as_message(text, [section(f":sparkles: {text}")])
    votes = f"{likes} 👍" + (f" and {dislikes} 👎" if dislikes else "")
    head = f":sparkles: *Recommended for you*, from your {votes}"
    blocks: list[Block] = [section(head)]
    for n, (paper, liked_count, example, score) in enumerate(papers, 1):
        blocks.append(DividerBlock())
        one = paper_blocks(lead(paper, score), index=n, share=True, similar=True)
        blocks += with_notes(one, [liked_note(liked_count, example)])
    if wanted and len(papers) < wanted:
        blocks += [DividerBlock(), context(FEWER.format(count(len(papers), "paper")))]
    return as_message(f"Recommended for you: {len(papers)} papers", blocks)
