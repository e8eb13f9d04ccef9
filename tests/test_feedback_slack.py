"""👍, 👎 and Save through Slack: signed block_actions requests against the app over HTTP,
answered through the local Slack stand-in; the choice stored per member in the shared state
(SQLite and PostgreSQL), shown on the member's own message, undone by a second click, and
the saved papers in ``/papers saved``."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlencode

from slack_sdk import WebClient

from bot.help_text import READING_LIST_COMMANDS
from bot.slack import render
from bot.state import state_for
from tests.slack_harness import (
    BOT_TOKEN,
    TEAM_ID,
    SlackHarness,
    assert_valid,
    block_actions,
    blocks_text,
    buttons,
)


def lookup(slack: SlackHarness, query: str = "diffusion models", user: str = "U1") -> dict:
    _, url = slack.slash(query, user=user)
    return slack.reply(url)


def papers_shown(slack: SlackHarness, count: int) -> list[str]:
    """Ids of ``count`` different papers from lookups' Save buttons."""
    out: list[str] = []
    for query in ("diffusion models", "graph neural networks", "reinforcement learning"):
        for action, button in buttons(lookup(slack, query)).items():
            if action.startswith("save:") and button["value"] not in out:
                out.append(button["value"])
    assert len(out) >= count
    return out[:count]


def store(slack: SlackHarness):
    return state_for(slack.engine.db_path)


def test_every_paper_of_a_lookup_has_like_dislike_and_save_with_its_id(
    slack: SlackHarness, state_backend: str
) -> None:
    reply = lookup(slack)
    found = buttons(reply)
    papers = [b["value"] for a, b in found.items() if a.startswith("similar:")]
    assert len(papers) == 5
    for n, paper in enumerate(papers, start=1):
        for action in ("like", "dislike", "save"):
            assert found[f"{action}:{n}"]["value"] == paper
    assert found["like:1"]["text"]["text"] == "👍" and "style" not in found["like:1"]


def test_like_is_stored_per_member_shown_on_its_buttons_and_undone_from_the_note(
    slack: SlackHarness, state_backend: str
) -> None:
    answer = lookup(slack)
    paper = buttons(answer)["like:1"]["value"]
    _, url = slack.press(answer, "like:1")
    note = slack.reply(url)
    assert note["replace_original"] is False and note["response_type"] == "ephemeral"
    assert "👍 Liked" in note["text"] and "undo" in note["text"]
    assert store(slack).feedback_of("U1") == {paper: "like"}
    assert store(slack).feedback_of("U2") == {}
    # The note's own buttons show the choice; the next lookup's do too (only to U1).
    assert buttons(note)["like:1"]["text"]["text"] == "👍 Liked"
    assert buttons(lookup(slack))["like:1"]["text"]["text"] == "👍 Liked"
    assert buttons(lookup(slack, user="U2"))["like:1"]["text"]["text"] == "👍"

    # The first answer still offers 👍 (Slack cannot redraw it): a second click keeps the like.
    _, url = slack.press(answer, "like:1")
    again = slack.reply(url)
    assert "already" in again["text"] and store(slack).feedback_of("U1") == {paper: "like"}

    _, url = slack.press(again, "dislike:1")  # on the note: the note is redrawn
    note = slack.reply(url)
    assert note["replace_original"] is True
    assert buttons(note)["dislike:1"]["text"]["text"] == "👎 Disliked"
    assert buttons(note)["like:1"]["text"]["text"] == "👍"
    assert store(slack).feedback_of("U1") == {paper: "dislike"}

    _, url = slack.press(note, "dislike:1")  # "👎 Disliked": undone
    undone = slack.reply(url)
    assert "undone" in undone["text"] and undone["replace_original"] is True
    assert store(slack).feedback_of("U1") == {}
    assert buttons(lookup(slack))["dislike:1"]["text"]["text"] == "👎"


def test_save_on_a_paper_saved_before_keeps_it(slack: SlackHarness, state_backend: str) -> None:
    """A button that could not show the choice (a lookup from before the save) never
    removes it: Slack sends the label the member saw, "Save"."""
    answer = lookup(slack)
    paper = buttons(answer)["save:2"]["value"]
    for _ in range(2):
        _, url = slack.press(answer, "save:2")
        note = slack.reply(url)
        assert [p["paper_id"] for p in store(slack).saved_papers("U1")[0]] == [paper]
    assert "already on your reading list" in note["text"]
    assert buttons(lookup(slack))["save:2"]["text"]["text"] == "✓ Saved"
    _, url = slack.press(lookup(slack), "save:2")  # "✓ Saved": removed
    assert "Removed" in slack.reply(url)["text"]
    assert store(slack).saved_papers("U1")[1] == 0


def own_message(slack: SlackHarness, user: str = "U1") -> tuple[str, dict[str, Any]]:
    """A message with papers in the member's DM (as a digest is), as Slack stored it."""
    client = WebClient(token=BOT_TOKEN, base_url=slack.fake.api_url)
    channel = client.conversations_open(users=user)["channel"]["id"]
    result = slack.engine.search("graph neural networks", limit=3)
    posted = client.chat_postMessage(channel=channel, **render.search_message(result, query="g"))
    return channel, posted["message"]


def click_on(slack: SlackHarness, channel: str, message: dict, action_id: str, user: str = "U1"):
    """Click a button of a message Slack sends back with the click (a non-ephemeral one),
    with the button's label and style as Slack sends them."""
    button = buttons(message)[action_id]
    payload, url = block_actions(
        slack.fake,
        action_id,
        button["value"],
        user=user,
        channel=channel,
        message_ts=message["ts"],
        ephemeral=False,
        label=button["text"]["text"],
        style=button.get("style"),
    )
    payload["message"] = message
    status, _ = slack.post(urlencode({"payload": json.dumps(payload)}).encode())
    assert status == 200
    return url


def test_a_click_on_the_members_own_message_redraws_its_buttons(
    slack: SlackHarness, state_backend: str
) -> None:
    channel, message = own_message(slack)
    paper = buttons(message)["like:2"]["value"]
    url = click_on(slack, channel, message, "like:2")
    assert slack.reply(url)["replace_original"] is True
    [shown] = slack.fake.messages_in(channel)
    assert_valid(shown)
    liked = buttons(shown)
    assert liked["like:2"]["text"]["text"] == "👍 Liked" and liked["like:2"]["style"] == "primary"
    assert "style" not in liked["like:1"] and "style" not in liked["dislike:2"]
    assert store(slack).feedback_of("U1") == {paper: "like"}

    url = click_on(slack, channel, shown, "dislike:2")  # replaces the like
    slack.reply(url)
    [shown] = slack.fake.messages_in(channel)
    after = buttons(shown)
    assert after["dislike:2"]["text"]["text"] == "👎 Disliked"
    assert after["like:2"]["text"]["text"] == "👍" and "style" not in after["like:2"]
    assert store(slack).feedback_of("U1") == {paper: "dislike"}

    url = click_on(slack, channel, shown, "dislike:2")  # undone
    slack.reply(url)
    [shown] = slack.fake.messages_in(channel)
    assert buttons(shown)["dislike:2"]["text"]["text"] == "👎"
    assert store(slack).feedback_of("U1") == {}


def test_a_like_in_a_channel_is_told_only_to_the_clicker(slack: SlackHarness) -> None:
    client = WebClient(token=BOT_TOKEN, base_url=slack.fake.api_url)
    paper = slack.engine.search("transformers", limit=1).hits[0].paper
    posted = client.chat_postMessage(channel="C1", **render.shared_message(paper, user_id="U2"))
    url = click_on(slack, "C1", posted["message"], "save:1", user="U3")
    note = slack.reply(url)
    assert note["response_type"] == "ephemeral" and "reading list" in note["text"]
    [shown] = slack.fake.messages_in("C1")
    assert buttons(shown)["save:1"]["text"]["text"] == "Save"  # unchanged for everyone
    assert store(slack).saved_papers("U3")[0][0]["paper_id"] == paper["id"]


def test_saved_papers_appear_in_papers_saved_newest_first_with_paging(
    slack: SlackHarness, state_backend: str
) -> None:
    empty = lookup(slack, "saved")
    assert "reading list is empty" in empty["text"]
    saved = papers_shown(slack, 6)
    for paper in saved:
        _, url = slack.click("save:1", paper)
        slack.reply(url)
    _, url = slack.click("like:1", saved[-1])
    slack.reply(url)
    _, url = slack.click("save:1", saved[0], label="✓ Saved")  # "✓ Saved" clicked: removed
    slack.reply(url)

    page = lookup(slack, "saved")
    assert "*5* saved papers" in blocks_text(page) and "showing" not in blocks_text(page)
    on_page = buttons(page)
    assert [on_page[f"save:{n}"]["value"] for n in range(1, 6)] == saved[:0:-1]
    assert (
        on_page["save:1"]["text"]["text"] == "✓ Saved" and on_page["like:1"]["style"] == "primary"
    )
    assert "saved_previous" not in on_page and "saved_next" not in on_page
    # Others' reading lists are their own.
    assert "reading list is empty" in lookup(slack, "saved", user="U2")["text"]


def test_the_reading_list_pages_with_next_and_previous(slack: SlackHarness) -> None:
    saved = papers_shown(slack, 7)
    for paper in saved:
        _, url = slack.click("save:1", paper)
        slack.reply(url)
    first = lookup(slack, "saved")
    _, url = slack.click("saved_next", buttons(first)["saved_next"]["value"])
    second = slack.reply(url)
    assert second["replace_original"] is True
    assert "showing 6–7" in blocks_text(second)
    assert [buttons(second)[f"save:{n}"]["value"] for n in (6, 7)] == saved[1::-1]
    _, url = slack.click("saved_previous", buttons(second)["saved_previous"]["value"])
    assert "showing 1–5" in blocks_text(slack.reply(url))


def test_help_lists_the_reading_list_commands(slack: SlackHarness) -> None:
    _, url = slack.slash("help")
    shown = slack.reply(url)
    for usage in READING_LIST_COMMANDS:
        assert f"`/papers {usage.args}`" in blocks_text(shown)
        assert f"/papers {usage.args}" in shown["text"]
    assert {u.args.split()[0] for u in READING_LIST_COMMANDS} == {"saved", "export"}


def test_a_page_of_an_answer_the_channel_sees_shows_nobodys_choices(
    slack: SlackHarness, state_backend: str
) -> None:
    """ "More results" under a mention's answer replaces it for the whole channel: the new
    page must not show what the clicker liked or saved."""
    client = WebClient(token=BOT_TOKEN, base_url=slack.fake.api_url)
    query = "diffusion models"
    second_page = slack.engine.search(query, limit=5, offset=5).hits
    for hit in second_page:
        store(slack).toggle_save("U1", hit.id, "2024-03-04T08:00:00+00:00", TEAM_ID)
    answer = render.search_message(slack.engine.search(query, limit=5), query=query)
    posted = client.chat_postMessage(channel="C1", **answer)["message"]
    url = click_on(slack, "C1", posted, render.ACTION_MORE)
    slack.reply(url)
    [shown] = slack.fake.messages_in("C1")
    saves = [b for a, b in buttons(shown).items() if a.startswith("save:")]
    assert [b["value"] for b in saves] == [h.id for h in second_page]
    assert all(b["text"]["text"] == "Save" and "style" not in b for b in saves)
    # The same page of an answer only U1 sees shows their saves.
    _, url = slack.click(render.ACTION_MORE, buttons(lookup(slack, query))["more"]["value"])
    own = buttons(slack.reply(url))
    assert all(b["text"]["text"] == "✓ Saved" for a, b in own.items() if a.startswith("save:"))


def test_answers_go_without_the_members_choices_when_the_state_is_slow(
    slack: SlackHarness, monkeypatch
) -> None:
    """A shared state that does not answer (a PostgreSQL host gone) must not hold up a
    lookup: after ``CHOICES_WAIT_SECONDS`` the answer goes, its buttons unmarked though the
    state would say the paper is saved; and while the readers are stuck, further answers
    start no reads (no backlog to outlive the outage)."""
    import threading
    import time

    from bot.slack.listeners import feedback

    release = threading.Event()
    reads: list[str] = []
    first = slack.engine.search("diffusion models", limit=5).hits[0].id

    class Stuck:
        def feedback_on(self, user_id, paper_ids, team_id=None):
            reads.append(user_id)
            release.wait(30)
            return {first: {"kind": None, "saved": True}}

    started: list[object] = []  # reads handed to the readers' pool, queued ones included
    readers = feedback._choice_readers

    class Counting:
        def submit(self, read):
            started.append(read)
            return readers.submit(read)

    monkeypatch.setattr(feedback, "CHOICES_WAIT_SECONDS", 0.2)
    monkeypatch.setattr(feedback, "state_for", lambda path: Stuck())
    monkeypatch.setattr(feedback, "_choice_readers", Counting())
    try:
        reply = lookup(slack)  # the whole lookup through Slack, answered without them
        assert buttons(reply)["save:1"]["value"] == first
        assert buttons(reply)["save:1"]["text"]["text"] == "Save"
        services = SimpleNamespace(engine=slack.engine)
        for _ in range(feedback.CHOICE_READERS + 3):
            assert feedback.choices([first], "U1", "T1", services) == {}
        # The last reader may not have run yet: wait for it, then see that no more started.
        deadline = time.monotonic() + 10
        while len(reads) < feedback.CHOICE_READERS and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(reads) == feedback.CHOICE_READERS  # then none: all the readers are stuck
        assert len(started) == feedback.CHOICE_READERS  # nor any queued behind them
    finally:
        release.set()
    # Once the state answers again, answers show the choices again.
    slack.fake.wait_for(lambda: feedback.choices([first], "U1", "T1", services) or None)


def test_answers_made_at_once_all_show_the_members_choices(slack: SlackHarness, monkeypatch):
    """Three answers at the same moment, the state answering in 50 ms: none goes without
    the member's choices (two readers once left the third's buttons blank)."""
    import threading
    import time

    from bot.slack.listeners import feedback

    class Slow:
        def feedback_on(self, user_id, paper_ids, team_id=None):
            time.sleep(0.05)
            return {paper_ids[0]: {"kind": "like", "saved": False}}

    monkeypatch.setattr(feedback, "state_for", lambda path: Slow())
    services = SimpleNamespace(engine=slack.engine)
    found: list[dict] = []
    answers = [
        threading.Thread(
            target=lambda: found.append(feedback.choices(["p1"], "U1", "T1", services))
        )
        for _ in range(3)
    ]
    for answer in answers:
        answer.start()
    for answer in answers:
        answer.join()
    assert found == [{"p1": {"kind": "like", "saved": False}}] * 3


def test_an_unreadable_sqlite_state_leaves_the_buttons_blank(slack: SlackHarness, monkeypatch):
    import sqlite3

    from bot.slack.listeners import feedback

    class Locked:
        def feedback_on(self, *args, **kwargs):
            raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(feedback, "state_for", lambda path: Locked())
    assert buttons(lookup(slack))["save:1"]["text"]["text"] == "Save"
