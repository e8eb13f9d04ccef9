"""👍, 👎 and Save under every paper, and how a click shows: the member's choice marked on
the buttons (``👍 Liked``, style primary), or, where a message is seen by others, a note only
the clicker sees.

Action ids are ``like:<n>``, ``dislike:<n>``, ``save:<n>`` (``n`` the paper's place in the
message, so each id is unique in it) and each button's ``value`` is the paper id.
"""

from __future__ import annotations

import copy
from typing import Any

from slack_sdk.models.blocks import ButtonElement

from .blocks import as_message, button, context
from .escaping import clip_escaped

ACTION_LIKE = "like"  # like:<n>
ACTION_DISLIKE = "dislike"  # dislike:<n>
ACTION_SAVE = "save"  # save:<n>

#: (label as offered, label once chosen) per action.
LABELS = {
    ACTION_LIKE: ("👍", "👍 Liked"),
    ACTION_DISLIKE: ("👎", "👎 Disliked"),
    ACTION_SAVE: ("Save", "✓ Saved"),
}


def feedback_buttons(
    paper_id: str, index: int, choice: dict[str, Any] | None = None
) -> list[ButtonElement]:
    """The three buttons for one paper, showing ``choice`` (``{"kind", "saved"}``) if given."""
    chosen = _chosen(choice)
    out = []
    for action, (label, done) in LABELS.items():
        on = action in chosen
        out.append(
            button(done if on else label, f"{action}:{index}", paper_id, "primary" if on else None)
        )
    return out


def _chosen(choice: dict[str, Any] | None) -> set[str]:
    choice = choice or {}
    return {a for a in (choice.get("kind"),) if a} | (
        {ACTION_SAVE} if choice.get("saved") else set()
    )


def with_choice(
    blocks: list[dict[str, Any]], paper_id: str, choice: dict[str, Any]
) -> list[dict[str, Any]]:
    """A copy of a message's blocks (as Slack sent them back) with this paper's 👍/👎/Save
    buttons showing the member's choice; every other block as it was."""
    chosen = _chosen(choice)
    out = copy.deepcopy(blocks)
    for block in out:
        if block.get("type") != "actions":
            continue
        for element in block.get("elements") or []:
            action = str(element.get("action_id") or "").split(":", 1)[0]
            if action not in LABELS or element.get("value") != paper_id:
                continue
            label, done = LABELS[action]
            element["text"] = {
                "type": "plain_text",
                "text": done if action in chosen else label,
                "emoji": True,
            }
            if action in chosen:
                element["style"] = "primary"
            else:
                element.pop("style", None)
    return out


def feedback_note(
    action: str, choice: dict[str, Any], paper: dict[str, Any] | None
) -> dict[str, Any]:
    """What the clicker alone is told when the message cannot show their choice."""
    title = clip_escaped((paper or {}).get("title") or (paper or {}).get("id") or "this paper", 200)
    if action == ACTION_SAVE:
        text = (
            f"✓ Saved “{title}” to your reading list (`/papers saved`)."
            if choice.get("saved")
            else f"Removed “{title}” from your reading list."
        )
    elif choice.get("kind") == action:
        text = f"{LABELS[action][1]} “{title}”: noted. Click again to undo."
    else:
        text = f"Your {LABELS[action][0]} on “{title}” is undone."
    return as_message(text, [context(text)])
