"""Modals: the "Share to channel" picker, for clicks where there is no channel to share into
(its submission is handled in ``listeners/views``), and what it turns into once shared. Plain
dicts for ``views.open`` / ``response_action``."""

from __future__ import annotations

import json
import re
from typing import Any

from slack_sdk.models.blocks import (
    Block,
    ConversationFilter,
    ConversationSelectElement,
    InputBlock,
    PlainTextInputElement,
    PlainTextObject,
)
from slack_sdk.models.views import View

from .blocks import context, section
from .lookup import paper_meta, paper_title

SHARE_VIEW = "share_paper"  # the modal's callback_id
SHARE_CHANNEL_BLOCK, SHARE_CHANNEL_ACTION = "share_channel", "channel"
SHARE_COMMENT_BLOCK, SHARE_COMMENT_ACTION = "share_comment", "comment"
COMMENT_CHARS = 1000  # the comment box's max_length


def share_view(paper: dict[str, Any]) -> dict[str, Any]:
    """The "Share to channel" modal: the paper, a channel picker and an optional comment.

    The picker offers public and private channels only (never DMs) and does not preselect
    the conversation the button sat in (a DM, or a channel that already shows the paper).
    The paper's id travels in ``private_metadata``, so the submission needs nothing stored.
    """
    meta = paper_meta(paper)
    picker = ConversationSelectElement(
        action_id=SHARE_CHANNEL_ACTION,
        placeholder=PlainTextObject(text="Pick a channel"),
        default_to_current_conversation=False,
        filter=ConversationFilter(include=["public", "private"], exclude_bot_users=True),
    )
    comment = PlainTextInputElement(
        action_id=SHARE_COMMENT_ACTION,
        multiline=True,
        max_length=COMMENT_CHARS,
        placeholder=PlainTextObject(text="Why is it worth reading? (optional)"),
    )
    blocks: list[Block] = [
        section(paper_title(paper) + (f"\n{meta}" if meta else "")),
        InputBlock(
            block_id=SHARE_CHANNEL_BLOCK, label=PlainTextObject(text="Share in"), element=picker
        ),
        InputBlock(
            block_id=SHARE_COMMENT_BLOCK,
            label=PlainTextObject(text="Comment"),
            element=comment,
            optional=True,
        ),
        context(
            "Everyone in the channel sees the paper and that you shared it. "
            "For a private channel, invite @Paperboy there first (`/invite @Paperboy`)."
        ),
    ]
    view = View(
        type="modal",
        callback_id=SHARE_VIEW,
        title=PlainTextObject(text="Share a paper"),
        submit=PlainTextObject(text="Share"),
        close=PlainTextObject(text="Cancel"),
        private_metadata=json.dumps({"paper": str(paper.get("id") or "")[:2000]}),
        blocks=blocks,
    )
    return view.to_dict()


def shared_view(channel_id: str) -> dict[str, Any]:
    """What the modal turns into once the paper is posted: where it went, and a Done button."""
    where = f"<#{channel_id}>" if re.fullmatch(r"[CG][A-Z0-9]{1,20}", channel_id) else "the channel"
    view = View(
        type="modal",
        callback_id=SHARE_VIEW + "_done",
        title=PlainTextObject(text="Share a paper"),
        close=PlainTextObject(text="Done"),
        blocks=[section(f":white_check_mark: Shared in {where}.")],
    )
    return view.to_dict()
