"""The "Search papers" modal (the global shortcut, the Home tab's button) and the small
modals of the Home tab ("Add a topic" and its preview).

The search modal is one view in three states: empty (a query box), with a page of results
(after a submission, ``response_action: update``), and paged (Next/Previous, ``views.update``).
The query and the page travel in ``private_metadata`` and the buttons' values, so nothing is
stored between clicks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from slack_sdk.models.blocks import (
    ActionsBlock,
    Block,
    DividerBlock,
    InputBlock,
    PlainTextInputElement,
    PlainTextObject,
)
from slack_sdk.models.views import View

from bot.engine.search import SearchResult
from bot.english import noun_for

from .blocks import MAX_SECTION_TEXT, button, context, encode_value, section
from .escaping import clip, clip_escaped, escape_plain
from .feedback import with_choices
from .lookup import PAGE_SIZE, QUERY_SHOWN_CHARS, paper_blocks

SEARCH_VIEW = "search_papers_modal"  # the modal's callback_id
SEARCH_QUERY_BLOCK, SEARCH_QUERY_ACTION = "search_query", "query"
SEARCH_NEXT = "search_modal_next"
SEARCH_PREVIOUS = "search_modal_previous"
QUERY_CHARS = 500  # the query box's max_length

ADD_TOPIC_VIEW = "add_topic_modal"
ADD_TOPIC_BLOCK, ADD_TOPIC_ACTION = "add_topic", "topic"
TOPIC_CHARS = 200  # digest.subscriptions.MAX_TOPIC_CHARS


def search_view(
    query: str = "",
    result: SearchResult | None = None,
    choices: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The search modal: the query box (holding ``query``), and ``result``'s page under it,
    each paper with 👍/👎/Save showing the member's ``choices`` (``StateStore.feedback_on``)."""
    box = PlainTextInputElement(
        action_id=SEARCH_QUERY_ACTION,
        max_length=QUERY_CHARS,
        placeholder=PlainTextObject(text="e.g. diffusion models year:2024 -survey"),
        **({"initial_value": clip(query, QUERY_CHARS)} if query else {}),
    )
    blocks: list[Block] = [
        InputBlock(
            block_id=SEARCH_QUERY_BLOCK,
            label=PlainTextObject(text="Search papers"),
            element=box,
            hint=PlainTextObject(
                text='Keywords, "exact phrases", -exclusions, venue:, year:, author:'
            ),
        )
    ]
    if result is not None:
        blocks += _result_blocks(query, result)
    view = View(
        type="modal",
        callback_id=SEARCH_VIEW,
        title=PlainTextObject(text="Search papers"),
        submit=PlainTextObject(text="Search"),
        close=PlainTextObject(text="Close"),
        private_metadata=encode_value(
            {"q": clip(query, QUERY_CHARS), "o": result.offset if result else 0}
        ),
        blocks=blocks,
    )
    shown = view.to_dict()
    if choices:
        shown["blocks"] = with_choices({"blocks": shown["blocks"]}, choices)["blocks"]
    return shown


def _result_blocks(query: str, result: SearchResult) -> list[Block]:
    shown = clip_escaped(query, QUERY_SHOWN_CHARS)
    if result.error:
        return [section(f":warning: {escape_plain(result.error)}"[:MAX_SECTION_TEXT])]
    if not result.hits:
        text = f":shrug: No papers match “{shown}”."
        if result.suggestions:
            text += " Try: " + "; ".join(escape_plain(s) for s in result.suggestions[:5])
        return [section(text)]
    first, last = result.offset + 1, result.offset + len(result.hits)
    noun = noun_for(result.total, "paper matches", "papers match")
    blocks: list[Block] = [
        section(f":mag: *{result.total:,}* {noun} “{shown}” · showing {first}–{last}")
    ]
    for n, hit in enumerate(result.hits, start=first):
        blocks.append(DividerBlock())
        blocks += paper_blocks(hit, index=n, share=False, similar=False)
    nav = []
    if result.offset > 0:
        back = max(result.offset - PAGE_SIZE, 0)
        nav.append(button("Previous", SEARCH_PREVIOUS, encode_value({"q": query, "o": back})))
    if result.has_more:
        value = encode_value({"q": query, "o": last})
        nav.append(button("Next", SEARCH_NEXT, value, "primary"))
    if nav:
        blocks.append(ActionsBlock(elements=nav))
    blocks.append(context("To share a paper, look it up with `/papers` in a channel."))
    return blocks


def add_topic_view(error: str | None = None) -> dict[str, Any]:
    """ "Add a topic" (from the Home tab): one box; the submission shows the preview."""
    box = PlainTextInputElement(
        action_id=ADD_TOPIC_ACTION,
        max_length=TOPIC_CHARS,
        placeholder=PlainTextObject(text='e.g. "graph neural networks" -survey'),
    )
    view = View(
        type="modal",
        callback_id=ADD_TOPIC_VIEW,
        title=PlainTextObject(text="Add a topic"),
        submit=PlainTextObject(text="Subscribe"),
        close=PlainTextObject(text="Cancel"),
        blocks=[
            InputBlock(block_id=ADD_TOPIC_BLOCK, label=PlainTextObject(text="Follow"), element=box),
            context("New papers matching it come in your daily digest."),
        ],
    )
    return view.to_dict()


def topic_added_view(blocks: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """What "Add a topic" turns into: the same preview ``/papers subscribe`` answers with."""
    return {
        "type": "modal",
        "callback_id": ADD_TOPIC_VIEW + "_done",
        "title": {"type": "plain_text", "text": "Add a topic"},
        "close": {"type": "plain_text", "text": "Done"},
        "blocks": list(blocks)[:100],
    }
