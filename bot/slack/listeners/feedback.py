"""👍, 👎 and Save under a paper: the click is stored for the member who made it
(``bot.state``), and answered at once.

A click asks for what its button showed (``render.shown_chosen``): "👍" likes, "👍 Liked"
undoes. Messages only the member sees (lookups, similar papers, their DM) show their
choices from the start (``marked``), so a button never offers what they already chose.
Where the message is the member's own (a digest or an answer in their DM, which Slack sends
back with the click) the buttons are redrawn to show the choice through the response_url.
Elsewhere (an answer only they see, whose blocks Slack does not send back, or a message the
whole channel sees, where one member's 👍 must not show for everyone) a note only they see
says what was recorded, with the paper's buttons showing their choice to change or undo it.

Also the reading list: ``/papers saved`` (paged) and ``/papers export bibtex|csv`` (a file in
the member's DM); ``/papers recommend`` (the member's model's picks, ``digest.taste``) and
``/papers teammates on|off`` (whether digests say how many teammates saved a paper).
"""

from __future__ import annotations

import logging
import re
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from datetime import UTC, datetime
from typing import Any

from slack_bolt import Ack, App
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from bot.english import count
from bot.slack import render
from bot.slack.client import error_code
from bot.slack.replies import EPHEMERAL, EPHEMERAL_BELOW, reply
from bot.slack.services import WORK_THREADS, Services, by_dm, request_team
from bot.state import StateError, state_for
from digest.export import EXTENSIONS, export, reading_list
from digest.taste import recommendations_for

log = logging.getLogger(__name__)

#: What ``/papers export`` offers in Slack (``paperboy saved --format`` also has json).
EXPORT_FORMATS = ("bibtex", "csv")
#: ``/papers export <one of these>`` (or alone) exports; other words after "export" are a lookup.
FEEDBACK_ACTIONS = re.compile(
    rf"^(?:{render.ACTION_LIKE}|{render.ACTION_DISLIKE}|{render.ACTION_SAVE}):\d+$"
)
SAVED_PAGES = re.compile(rf"^(?:{render.ACTION_SAVED_NEXT}|{render.ACTION_SAVED_PREVIOUS})$")
#: Deeper than anyone pages by hand; a larger offset in a button value is forged.
MAX_OFFSET = 100_000


def register(app: App, services: Services) -> None:
    @app.action(FEEDBACK_ACTIONS)
    def click(
        ack: Ack,
        action: dict[str, Any],
        body: dict[str, Any],
        respond: Callable[..., Any],
        client: WebClient,
    ) -> None:
        ack()
        if (body.get("container") or {}).get("type") == "view":  # the search modal
            apologise = by_dm(client, (body.get("user") or {}).get("id") or "")
            services.later(apologise, record_click_in_view, action, body, client, services)
        else:
            services.later(respond, record_click, action, body, respond, services)

    @app.action(SAVED_PAGES)
    def saved_page(
        ack: Ack, action: dict[str, Any], body: dict[str, Any], respond: Callable[..., Any]
    ) -> None:
        ack()
        offset = render.decode_value(action.get("value")).get("o", 0)
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            offset = 0
        user_id = (body.get("user") or {}).get("id") or ""
        services.later(
            respond,
            show_saved,
            user_id,
            respond,
            services,
            min(offset, MAX_OFFSET),
            True,
            request_team(body),
        )


def record_click(
    action: dict[str, Any], body: dict[str, Any], respond: Callable[..., Any], services: Services
) -> None:
    kind = str(action.get("action_id") or "").split(":", 1)[0]
    paper_id = str(action.get("value") or "")
    paper = services.engine.paper(paper_id)
    clicked = _store_click(action, body, services) if paper is not None else None
    if paper is None or clicked is None:
        text = f"That paper (`{render.clip_escaped(paper_id, 120)}`) is no longer in the corpus."
        reply(respond, render.error_message(text), **EPHEMERAL_BELOW)
        return
    choice, had, want = clicked
    message = body.get("message") or {}
    if message.get("blocks") and own_conversation(body):
        redrawn = {
            "text": message.get("text") or render.plain_title(paper),
            "blocks": render.with_choice(message["blocks"], paper_id, choice),
        }
        reply(respond, redrawn, replace_original=True)
        return
    note = render.feedback_note(kind, choice, paper, changed=had != want)
    if action.get("block_id") == render.FEEDBACK_NOTE_BLOCK:  # a click on an earlier note
        reply(respond, note, replace_original=True)
    else:
        reply(respond, note, **EPHEMERAL_BELOW)


def marked(
    message: dict[str, Any], user_id: str, team_id: str | None, services: Services
) -> dict[str, Any]:
    """``message`` with the member's 👍/👎/Save shown on its papers' buttons, for a message
    only they see. As it is when the shared state cannot be read: a lookup must not fail
    for want of the buttons' colours."""
    found = choices(render.feedback_papers(message), user_id, team_id, services)
    return render.with_choices(message, found) if found else message


def _store_click(
    action: dict[str, Any], body: dict[str, Any], services: Services
) -> tuple[dict[str, Any], bool, bool] | None:
    """Store what the click asks for (what its button showed: ``render.shown_chosen``):
    the member's choice on the paper afterwards, whether the paper had the clicked kind
    before, and whether the click asked for it. None without a member."""
    kind = str(action.get("action_id") or "").split(":", 1)[0]
    paper_id = str(action.get("value") or "")
    user_id = (body.get("user") or {}).get("id") or ""
    team_id = request_team(body)
    if not user_id:
        return None
    store = state_for(services.engine.db_path)
    now = datetime.now(UTC).isoformat()
    want = not render.shown_chosen(action)
    nothing = {"kind": None, "saved": False}
    before = store.feedback_on(user_id, [paper_id], team_id).get(paper_id, nothing)
    if kind == render.ACTION_SAVE:
        store.toggle_save(user_id, paper_id, now, team_id, on=want)
        had = bool(before["saved"])
    else:
        store.set_feedback(user_id, paper_id, kind, now, team_id, on=want)
        had = before["kind"] == kind
    choice = store.feedback_on(user_id, [paper_id], team_id).get(paper_id, nothing)
    return choice, had, want


#: What ``views.update`` takes of a view as Slack sends it back with a click.
VIEW_FIELDS = ("type", "callback_id", "title", "submit", "close", "private_metadata")
VIEW_FIELDS += ("clear_on_close", "notify_on_close")


def record_click_in_view(
    action: dict[str, Any], body: dict[str, Any], client: WebClient, services: Services
) -> None:
    """👍/👎/Save in the search modal: stored as anywhere, then the modal redrawn with the
    paper's buttons showing the choice (``views.update``). The view's hash makes Slack refuse
    it when the modal changed meanwhile: a newer search (which shows the choice), or a second
    click faster than the first redraw (whose choice is stored, and shown by the next page or
    search; until then its button offers what it did before, which never undoes it)."""
    paper_id = str(action.get("value") or "")
    if services.engine.paper(paper_id) is None:
        return  # gone from the corpus since the page was drawn: nothing to store
    clicked = _store_click(action, body, services)
    view = body.get("view") or {}
    if clicked is None or not view.get("id"):
        return
    shown = {k: view[k] for k in VIEW_FIELDS if k in view}
    shown["blocks"] = render.with_choice(view.get("blocks") or [], paper_id, clicked[0])
    try:
        client.views_update(view_id=view["id"], hash=view.get("hash"), view=shown)
    except SlackApiError as error:
        if error_code(error) != "hash_conflict":
            raise
        log.info("the search modal changed before its buttons were redrawn; the choice is stored")


#: How long an answer waits for the member's choices before going without them: lookups
#: need no shared state, and a PostgreSQL that does not answer (its connect timeout is 5 s)
#: must not hold them up, nor the search modal's answer, which Slack wants within 3 s.
CHOICES_WAIT_SECONDS = 1.0
#: As many as the answers being made at once (``WORK_THREADS``), so that none waits for
#: another's read while the state answers.
CHOICE_READERS = WORK_THREADS
_choice_readers = ThreadPoolExecutor(CHOICE_READERS, thread_name_prefix="paperboy-choices")
# Reads started and not yet finished: while the readers are all stuck (a state that does not
# answer), answers go without the choices at once and queue nothing behind them, so no
# backlog outlives the outage or holds up the process's exit.
_reading = threading.BoundedSemaphore(CHOICE_READERS)


def choices(
    paper_ids: list[str], user_id: str, team_id: str | None, services: Services
) -> dict[str, dict[str, Any]]:
    """The member's 👍/👎/Save on these papers; none when the shared state cannot be read
    within ``CHOICES_WAIT_SECONDS``, or its readers are still stuck on earlier answers (an
    answer must not fail or wait for the buttons' colours)."""
    if not paper_ids or not user_id:
        return {}
    db_path = services.engine.db_path
    if not _reading.acquire(blocking=False):
        log.warning("the shared state is still reading earlier choices; answering without")
        return {}

    def read() -> dict[str, dict[str, Any]]:
        try:
            return state_for(db_path).feedback_on(user_id, paper_ids, team_id)
        finally:
            _reading.release()

    try:
        future = _choice_readers.submit(read)
    except RuntimeError:  # the process is stopping: the pool takes no more work
        _reading.release()
        return {}
    try:
        return future.result(timeout=CHOICES_WAIT_SECONDS)
    except FutureTimeout:
        log.warning(
            "the shared state did not say a member's choices within %s s; answering without",
            CHOICES_WAIT_SECONDS,
        )
    except (StateError, sqlite3.Error) as error:  # (SQLite's own errors pass untranslated)
        log.warning("showing a member's choices: %s", error)
    return {}


def own_conversation(body: dict[str, Any]) -> bool:
    """Whether the clicked message is in a one-to-one DM (only the member sees it)."""
    channel = body.get("channel") or {}
    channel_id = channel.get("id") or (body.get("container") or {}).get("channel_id") or ""
    return channel_id.startswith("D") and not str(channel.get("name") or "").startswith("mpdm-")


def show_saved(
    user_id: str,
    respond: Callable[..., Any],
    services: Services,
    offset: int = 0,
    replace: bool = False,
    team_id: str | None = None,
) -> None:
    """``/papers saved`` (and its Next/Previous): a page of the member's reading list in the
    workspace ``team_id``."""
    store = state_for(services.engine.db_path)
    page = {"team_id": team_id, "limit": render.SAVED_PAGE_SIZE}
    papers, total = reading_list(store, services.engine, user_id, offset=offset, **page)
    if not papers and total and offset >= total:  # a stale page after removals: the last one
        offset = (total - 1) // render.SAVED_PAGE_SIZE * render.SAVED_PAGE_SIZE
        papers, total = reading_list(store, services.engine, user_id, offset=offset, **page)
    choices = store.feedback_on(user_id, [p["id"] for p in papers], team_id)
    message = render.saved_message(papers, total=total, offset=offset, choices=choices)
    if replace:
        reply(respond, message, replace_original=True)
    else:
        reply(respond, message, **EPHEMERAL)


#: ``/papers teammates on|off``.
TOGGLE_WORDS = frozenset({"on", "off"})
TEAMMATES_USAGE = (
    "Say `/papers teammates off` to stop your digests saying how many teammates saved a "
    "paper, or `/papers teammates on` to have it back."
)
RECOMMEND_SHOWN = 5
EXPORT_USAGE = "Say which format: `/papers export bibtex` or `/papers export csv`."


def export_saved(
    command: dict[str, Any],
    text: str,
    respond: Callable[..., Any],
    client: WebClient,
    services: Services,
) -> None:
    """``/papers export bibtex|csv``: the whole reading list as a file in the member's DM
    (files upload v2), and a line where they asked saying it is there."""
    words = text.split()
    fmt = words[1].lower() if len(words) == 2 else ""
    fmt = {"bib": "bibtex"}.get(fmt, fmt)
    if fmt not in EXPORT_FORMATS:
        usage = EXPORT_USAGE
        if fmt:  # "/papers export pdf": a format asked for, or perhaps a lookup
            usage = (
                f"I export the reading list as BibTeX or CSV, not `{fmt}`: "
                "`/papers export bibtex` or `/papers export csv`. To look up "
                f'“{" ".join(words)}” instead, send `/papers "{" ".join(words)}"`.'
            )
        reply(respond, render.error_message(usage), **EPHEMERAL)
        return
    user_id = command.get("user_id") or ""
    store = state_for(services.engine.db_path)
    papers, total = reading_list(store, services.engine, user_id, team_id=request_team(command))
    if not total:
        text = "Your reading list is empty: click Save under any paper Paperboy shows to add it."
        reply(respond, render.error_message(text), **EPHEMERAL)
        return
    filename = f"paperboy-reading-list.{EXTENSIONS[fmt]}"
    try:
        channel = client.conversations_open(users=user_id)["channel"]["id"]
        client.files_upload_v2(
            channel=channel,
            content=export(papers, fmt),
            filename=filename,
            title=f"Reading list ({count(total, 'paper')})",
            initial_comment=f"Your reading list, {count(total, 'saved paper')}, as {fmt_name(fmt)}.",
        )
    except SlackApiError as error:
        code = error_code(error)
        log.error("exporting the reading list failed: %s", code)
        text = f"Sorry, Slack would not take the file ({code}). Please try again later."
        reply(respond, render.error_message(text), **EPHEMERAL)
        return
    except (SlackClientError, OSError) as error:
        log.error("exporting the reading list failed: %s", error)
        text = "Sorry, Slack did not answer while I sent the file. Please try again in a moment."
        reply(respond, render.error_message(text), **EPHEMERAL)
        return
    done = f":mailbox: Sent {count(total, 'saved paper')} as `{filename}` to our direct messages."
    reply(respond, render.as_message(done, [render.section(done)]), **EPHEMERAL)


def fmt_name(fmt: str) -> str:
    return {"bibtex": "BibTeX", "csv": "CSV"}[fmt]


def show_recommendations(
    user_id: str, respond: Callable[..., Any], services: Services, *, team_id: str = ""
) -> None:
    """``/papers recommend``: the member's current top recommendations, only for them."""
    found = recommendations_for(services.engine, user_id, limit=RECOMMEND_SHOWN, team_id=team_id)
    papers = [
        (paper, r.liked_count, found.liked_titles.get(r.example or ""), r.score)
        for paper, r in found.papers
    ]
    message = render.recommend_message(
        papers, likes=found.likes, dislikes=found.dislikes, wanted=RECOMMEND_SHOWN
    )
    reply(respond, marked(message, user_id, team_id, services), **EPHEMERAL)


def set_teammates(
    command: dict[str, Any], text: str, respond: Callable[..., Any], services: Services
) -> None:
    """``/papers teammates on|off``: the "N teammates also saved this" line in digests."""
    words = text.split()
    choice = words[1].lower() if len(words) == 2 else ""
    if choice not in TOGGLE_WORDS:
        reply(respond, render.error_message(TEAMMATES_USAGE), **EPHEMERAL)
        return
    store = state_for(services.engine.db_path)
    store.set_team_saves(
        user_id=command.get("user_id") or "",
        on=choice == "on",
        now=datetime.now(UTC).isoformat(),
        team_id=request_team(command),
    )
    done = (
        "Your digests will say when two or more teammates saved a paper (a count, never who)."
        if choice == "on"
        else "Your digests will no longer say how many teammates saved a paper."
    )
    reply(respond, render.as_message(done, [render.section(done)]), **EPHEMERAL)
