"""``@Paperboy <keywords>`` answered in the thread, a direct message read as a query, and the
global error handler: a listener that raises gives the member a friendly word, never
``dispatch_failed``."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

import pytest
from slack_sdk import WebClient

from bot.state import state_for
from tests.slack_harness import BOT_TOKEN, TEAM_ID, SlackHarness, assert_valid, buttons
from tests.surfaces import element, global_shortcut, post_payload, view_action


def shared_ids(message: dict[str, Any]) -> list[str]:
    return [b["value"] for aid, b in buttons(message).items() if aid.startswith("share:")]


def test_a_mention_in_a_channel_answers_in_a_thread_under_it(slack: SlackHarness) -> None:
    event = {
        "type": "app_mention",
        "user": "U2",
        "text": "<@UPAPERBOY> diffusion models",
        "ts": "1700000000.000300",
        "channel": "C5",
    }
    status, _ = slack.event(event)
    assert status == 200
    (answer,) = slack.fake.wait_for(lambda: slack.fake.messages_in("C5"))
    assert answer["thread_ts"] == "1700000000.000300"
    assert_valid(answer)
    assert shared_ids(answer) == [h.id for h in slack.engine.search("diffusion models").hits]


def test_a_mention_with_a_subcommand_says_where_to_send_it(slack: SlackHarness) -> None:
    """In a channel's thread slash commands do not run and only mentions are read: the hint
    says so (not the DM's "slash commands work here too")."""
    event = {"type": "app_mention", "user": "U2", "ts": "1700000000.000700", "channel": "C5"}
    slack.event({**event, "text": "<@UPAPERBOY> topics"})
    (answer,) = slack.fake.wait_for(lambda: slack.fake.messages_in("C5"))
    assert "send `/papers topics` in a channel's message box or in your DM" in answer["text"]
    assert "work here too" not in answer["text"] and not buttons(answer)


def test_a_mention_inside_a_thread_answers_in_that_thread(slack: SlackHarness) -> None:
    slack.event(
        {
            "type": "app_mention",
            "user": "U2",
            "text": "what about <@UPAPERBOY> graph neural networks",
            "ts": "1700000000.000500",
            "thread_ts": "1700000000.000100",
            "channel": "C5",
        }
    )
    (answer,) = slack.fake.wait_for(lambda: slack.fake.messages_in("C5"))
    assert answer["thread_ts"] == "1700000000.000100"
    expected = slack.engine.search("what about graph neural networks").hits
    assert shared_ids(answer) == [h.id for h in expected]


def open_dm(slack: SlackHarness, user: str) -> str:
    """The DM a member opened with Paperboy (on Slack it exists once they write in it)."""
    client = WebClient(token=BOT_TOKEN, base_url=slack.fake.api_url)
    return client.conversations_open(users=user)["channel"]["id"]


def test_a_direct_message_is_read_as_a_query(slack: SlackHarness) -> None:
    channel = open_dm(slack, "U2")
    dm = {"type": "message", "channel_type": "im", "channel": channel, "user": "U2"}
    # Our own messages, other bots' and edits are not questions.
    slack.event({**dm, "text": "graph neural networks", "bot_id": "B1", "ts": "1.1"})
    slack.event({**dm, "subtype": "message_changed", "ts": "1.2", "message": {"text": "x"}})
    slack.event({**dm, "text": "graph neural networks", "ts": "1700000000.000400"})
    (answer,) = slack.fake.wait_for(lambda: slack.fake.messages_in(channel))
    assert "thread_ts" not in answer  # a DM answers in the conversation itself
    assert shared_ids(answer) == [h.id for h in slack.engine.search("graph neural networks").hits]
    assert len(slack.fake.calls_to("chat.postMessage")) == 1


def finish_listeners_before_bolt_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bolt runs a listener on its ack pool and polls every 10 ms for its ``ack()``: make each
    listener finish before the first poll (in production, a views.open refused in under
    10 ms), so the race below is lost every time instead of now and then."""
    submit = ThreadPoolExecutor.submit

    def submit_and_wait(self: ThreadPoolExecutor, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        future = submit(self, fn, *args, **kwargs)
        if self._thread_name_prefix.startswith("paperboy-ack"):
            wait([future])
        return future

    monkeypatch.setattr(ThreadPoolExecutor, "submit", submit_and_wait)


@pytest.mark.parametrize("surface", ["shortcut", "home"])
def test_a_modal_that_cannot_open_answers_200_and_apologises_privately(
    slack: SlackHarness, monkeypatch: pytest.MonkeyPatch, surface: str
) -> None:
    """Bolt resets the acknowledgement of a listener that raises after ``ack()``; raised before
    its poll saw the ack, Slack got a 404 three seconds later (a flaky CI failure)."""
    if surface == "home":
        slack.event({"type": "app_home_opened", "user": "U3", "channel": "D1", "tab": "home"})
        home = slack.fake.wait_for(lambda: slack.fake.home_view("U3"))
        payload = view_action(
            home, {"type": "button", **element(home, "home_add_topic")}, user="U3"
        )
    else:
        payload = global_shortcut("search_papers", user="U3")
    finish_listeners_before_bolt_polls(monkeypatch)
    slack.fake.fail_next("views.open", error="internal_error")
    status, _ = post_payload(slack, payload)
    assert status == 200
    (apology,) = slack.fake.wait_for(lambda: slack.fake.messages_in("DU3"))
    assert "Sorry, something went wrong on Paperboy's side" in apology["text"]


def test_a_listener_raising_before_its_ack_answers_200_not_dispatch_failed(
    slack: SlackHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    post_payload(slack, global_shortcut("search_papers", user="U4"))
    (modal,) = slack.fake.wait_for(slack.fake.modals)

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("the index is on fire")

    monkeypatch.setattr(slack.engine, "search", broken)
    status, ack = slack.submit_view(modal, {"search_query": "diffusion"}, user="U4")
    assert (status, ack) == (200, "")  # Bolt's default is a 500, which Slack shows as an error
    (apology,) = slack.fake.wait_for(lambda: slack.fake.messages_in("DU4"))
    assert "Sorry, something went wrong on Paperboy's side" in apology["text"]


def test_a_message_in_a_channel_without_a_mention_is_not_a_query(slack: SlackHarness) -> None:
    channel = open_dm(slack, "U2")
    slack.event(
        {
            "type": "message",
            "channel_type": "channel",
            "channel": "C5",
            "user": "U2",
            "text": "graph neural networks",
            "ts": "1.3",
        }
    )
    slack.event(
        {
            "type": "message",
            "channel_type": "im",
            "channel": channel,
            "user": "U2",
            "text": "diffusion",
            "ts": "1.4",
        }
    )
    slack.fake.wait_for(lambda: slack.fake.messages_in(channel))
    assert not slack.fake.messages_in("C5")


def test_a_direct_message_answers_help_and_commands_and_shows_the_members_choices(
    slack: SlackHarness,
) -> None:
    channel = open_dm(slack, "U2")
    dm = {"type": "message", "channel_type": "im", "channel": channel, "user": "U2"}

    def answer_to(text: str, ts: str) -> dict[str, Any]:
        before = len(slack.fake.messages_in(channel))
        slack.event({**dm, "text": text, "ts": ts})
        return slack.fake.wait_for(lambda: slack.fake.messages_in(channel)[before:])[0]

    help_answer = answer_to("help", "1700000000.000601")
    assert_valid(help_answer)
    assert "/papers subscribe" in str(help_answer["blocks"])  # the whole help, not a hint
    saved = answer_to("saved", "1700000000.000602")
    assert "send `/papers saved`" in saved["text"] and not buttons(saved)
    # Words that are subcommands only alone, as with /papers, are looked up otherwise.
    topic_models = answer_to("topic models", "1700000000.000604")
    assert "That is a command" not in topic_models["text"] and buttons(topic_models)
    assert "send `/papers subscribe gnn`" in answer_to("subscribe gnn", "1700000000.000605")["text"]
    paper = slack.engine.search("graph neural networks").hits[0].id
    state_for(slack.engine.db_path).toggle_save("U2", paper, "2024-03-04T08:00:00+00:00", TEAM_ID)
    found = buttons(answer_to("graph neural networks", "1700000000.000603"))
    assert found["save:1"]["value"] == paper and found["save:1"]["text"]["text"] == "✓ Saved"
