"""👍, 👎 and Save under every paper, and how a click shows: the member's choice marked on
the buttons (``👍 Liked``, style primary), or, where a message is seen by others, a note only
the clicker sees.

Action ids are ``like:<n>``, ``dislike:<n>``, ``save:<n>`` (``n`` the paper's place in the
message, so each id is unique in it) and each button's ``value`` is the paper id. What a
click asks for is what its button showed (``shown_chosen``): "👍" likes (a paper liked
already stays liked), "👍 Liked" undoes. So a button that could not show the member's choice
(a message the whole channel reads) never takes it away.
"""

from __future__ import annotations

import copy
from typing import Any

from slack_sdk.models.blocks import ActionsBlock, ButtonElement

from .blocks import as_message, button, context
from .escaping import plain_title

ACTION_LIKE = "like"  # like:<n>
ACTION_DISLIKE = "dislike"  # dislike:<n>
ACTION_SAVE = "save"  # save:<n>

#: The block_id of the buttons in a ``feedback_note``: a click there redraws the note.
FEEDBACK_NOTE_BLOCK = "paperboy_feedback_note"

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


def shown_chosen(action: dict[str, Any]) -> bool:
    """Whether the clicked 👍/👎/Save button showed the choice as made ("👍 Liked", style
    primary), from the click as Slack sends it. Only the label's last word is compared:
    Slack may send an emoji back as its :name:."""
    kind = str(action.get("action_id") or "").split(":", 1)[0]
    if kind not in LABELS or action.get("style") == "primary":
        return action.get("style") == "primary"
    shown = str((action.get("text") or {}).get("text") or "").split()
    return shown[-1:] == LABELS[kind][1].split()[-1:]


def feedback_papers(message: dict[str, Any]) -> list[str]:
    """The ids of the papers with 👍/👎/Save buttons in a message, in order."""
    out: dict[str, None] = {}
    for block in message.get("blocks") or []:
        if isinstance(block, dict) and block.get("type") == "actions":
            for element in block.get("elements") or []:
                action = str(element.get("action_id") or "").split(":", 1)[0]
                if action in LABELS and element.get("value"):
                    out[str(element["value"])] = None
    return list(out)


def with_choices(message: dict[str, Any], choices: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A copy of ``message`` whose papers' buttons show the member's ``choices``
    (``StateStore.feedback_on``): for a message only they see."""
    blocks = message.get("blocks") or []
    for paper_id, choice in choices.items():
        if _chosen(choice):
            blocks = with_choice(blocks, paper_id, choice)
    return {**message, "blocks": blocks} if blocks is not message.get("blocks") else message


def feedback_note(
    action: str,
    choice: dict[str, Any],
    paper: dict[str, Any] | None,
    *,
    changed: bool = True,
) -> dict[str, Any]:
    """What the clicker alone is told when the message cannot show their choice, with the
    paper's three buttons showing it (a click there redraws the note: ``FEEDBACK_NOTE_BLOCK``).
    ``changed``: False when the paper already was as the click asked (a 👍 on a paper the
    member liked before, from a message that could not show it)."""
    title = plain_title(paper, default="this paper")
    chosen = _chosen(choice)
    if action == ACTION_SAVE:
        if ACTION_SAVE in chosen:
            text = (
                f"✓ Saved “{title}” to your reading list (`/papers saved`)."
                if changed
                else f"“{title}” was already on your reading list (`/papers saved`)."
            )
        else:
            text = f"Removed “{title}” from your reading list."
    elif action in chosen:
        done = LABELS[action][1]
        text = (
            f"{done} “{title}”: noted. Click *{done}* below to undo."
            if changed
            else f"You had already {LABELS[action][0]} “{title}”. Click *{done}* below to undo."
        )
    else:
        text = f"Your {LABELS[action][0]} on “{title}” is undone."
    blocks: list[Any] = [context(text)]
    paper_id = str((paper or {}).get("id") or "")
    if paper_id:
        buttons = feedback_buttons(paper_id, 1, choice)
        blocks.append(ActionsBlock(block_id=FEEDBACK_NOTE_BLOCK, elements=buttons))
    return as_message(text, blocks)
