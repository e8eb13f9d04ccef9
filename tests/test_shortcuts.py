"""Search from anywhere: the global shortcut's modal (submission and paging in the modal),
the Home tab's "Search papers", and the message shortcut answered in the thread, privately."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.slack import render
from bot.slack.listeners.shortcuts import MESSAGE_SHORTCUT, SEARCH_SHORTCUT
from bot.state import state_for
from tests.slack_harness import (
    BOT_TOKEN,
    SlackHarness,
    assert_valid,
    blocks_text,
    buttons,
    trigger_id,
)
from tests.surfaces import (
    element,
    global_shortcut,
    message_shortcut,
    post_payload,
    view_action,
)


def ids_in(view: dict[str, Any]) -> list[str]:
    """The paper ids a results view shows (each result's context line: id `...`)."""
    text = blocks_text(view)
    return [line.rsplit("id `", 1)[1].rstrip("`") for line in text.splitlines() if "id `" in line]


def open_search(slack: SlackHarness) -> dict[str, Any]:
    status, body = post_payload(slack, global_shortcut("search_papers"))
    assert (status, body) == (200, "")
    (modal,) = slack.fake.wait_for(slack.fake.modals)
    return modal


def test_the_global_shortcut_opens_a_modal_that_answers_in_itself_with_paging(
    slack: SlackHarness,
) -> None:
    modal = open_search(slack)
    assert modal["callback_id"] == render.SEARCH_VIEW
    assert modal["blocks"][0]["block_id"] == "search_query"

    status, ack = slack.submit_view(modal, {"search_query": "diffusion models"})
    assert status == 200 and ack["response_action"] == "update"
    first = ack["view"]
    expected = [h.id for h in slack.engine.search("diffusion models", limit=5).hits]
    assert ids_in(first) == expected
    assert "showing 1–5" in blocks_text(first)
    assert "search_modal_previous" not in buttons(first)

    # Slack shows the updated view in the same modal (same id; the stand-in keeps its hash).
    shown = {**first, "id": modal["id"], "hash": slack.fake.modal(modal["id"])["hash"]}
    post_payload(
        slack, view_action(shown, {"type": "button", **element(first, "search_modal_next")})
    )
    slack.fake.wait_for(lambda: slack.fake.calls_to("views.update"))
    second = slack.fake.modal(modal["id"])
    assert "showing 6–10" in blocks_text(second)
    page_two = [h.id for h in slack.engine.search("diffusion models", limit=5, offset=5).hits]
    assert ids_in(second) == page_two
    assert element(second, "query")["initial_value"] == "diffusion models"

    previous = element(second, "search_modal_previous")
    post_payload(slack, view_action(second, {"type": "button", **previous}))
    slack.fake.wait_for(lambda: len(slack.fake.calls_to("views.update")) >= 2)
    assert ids_in(slack.fake.modal(modal["id"])) == expected


def test_the_modals_papers_take_likes_and_saves_in_place(slack: SlackHarness) -> None:
    modal = open_search(slack)
    _, ack = slack.submit_view(modal, {"search_query": "diffusion models"})
    first = {**ack["view"], "id": modal["id"], "hash": slack.fake.modal(modal["id"])["hash"]}
    save = element(first, "save:1")
    assert save["text"]["text"] == "Save"
    post_payload(slack, view_action(first, {"type": "button", **save}))
    slack.fake.wait_for(lambda: slack.fake.calls_to("views.update"))
    shown = slack.fake.modal(modal["id"])
    assert element(shown, "save:1")["text"]["text"] == "✓ Saved"
    assert element(shown, "save:2")["text"]["text"] == "Save"
    assert ids_in(shown) == ids_in(first)  # the same page, only the button changed
    store = state_for(slack.engine.db_path)
    assert [r["paper_id"] for r in store.saved_papers("U1")[0]] == [save["value"]]
    # A new search shows it saved; "✓ Saved" clicked there removes it.
    _, ack = slack.submit_view(shown, {"search_query": "diffusion models"})
    again = {**ack["view"], "id": modal["id"], "hash": slack.fake.modal(modal["id"])["hash"]}
    saved = element(again, "save:1")
    assert saved["text"]["text"] == "✓ Saved"
    post_payload(slack, view_action(again, {"type": "button", **saved}))
    slack.fake.wait_for(lambda: len(slack.fake.calls_to("views.update")) >= 2)
    assert element(slack.fake.modal(modal["id"]), "save:1")["text"]["text"] == "Save"
    assert store.saved_papers("U1")[1] == 0


def test_a_click_in_the_modal_that_fails_is_apologised_for_by_dm(slack: SlackHarness) -> None:
    """The modal has no conversation to answer in: a click whose work fails afterwards (here
    Slack refusing views.update) gets the apology in the member's DM, not only a log line."""
    modal = open_search(slack)
    _, ack = slack.submit_view(modal, {"search_query": "diffusion models"})
    first = {**ack["view"], "id": modal["id"], "hash": slack.fake.modal(modal["id"])["hash"]}
    slack.fake.fail_next("views.update", error="internal_error")
    post_payload(slack, view_action(first, {"type": "button", **element(first, "save:1")}))
    (apology,) = slack.fake.wait_for(lambda: slack.fake.messages_in("DU1"))
    assert "Sorry, something went wrong on Paperboy's side" in apology["text"]
    slack.fake.fail_next("views.update", error="internal_error")
    post_payload(
        slack, view_action(first, {"type": "button", **element(first, "search_modal_next")})
    )
    slack.fake.wait_for(lambda: slack.fake.messages_in("DU1")[1:])


def test_an_empty_search_is_refused_under_the_box(slack: SlackHarness) -> None:
    modal = open_search(slack)
    status, ack = slack.submit_view(modal, {"search_query": "   "})
    assert ack == {"response_action": "errors", "errors": {"search_query": "Type a few words."}}


def test_the_home_tabs_search_button_opens_the_same_modal(slack: SlackHarness) -> None:
    slack.event({"type": "app_home_opened", "user": "U1", "channel": "D1", "tab": "home"})
    home = slack.fake.wait_for(lambda: slack.fake.home_view("U1"))
    post_payload(slack, view_action(home, {"type": "button", **element(home, "home_search")}))
    (modal,) = slack.fake.wait_for(slack.fake.modals)
    assert modal["callback_id"] == render.SEARCH_VIEW


def test_the_message_shortcut_answers_in_the_thread_only_for_the_member(
    slack: SlackHarness,
) -> None:
    payload, _ = message_shortcut(
        slack,
        "find_papers_message",
        "Has anyone read about <https://example.org/x|graph neural networks> lately? <@U7>",
        user="U5",
        channel="C7",
        ts="1700000000.000200",
    )
    status, body = post_payload(slack, payload)
    assert (status, body) == (200, "")
    (call,) = slack.fake.wait_for(lambda: slack.fake.calls_to("chat.postEphemeral"))
    params = call.params
    assert (params["channel"], params["user"], params["thread_ts"]) == (
        "C7",
        "U5",
        "1700000000.000200",
    )
    assert_valid(params)
    query = "Has anyone read about graph neural networks lately?"
    expected = [h.id for h in slack.engine.search(query, limit=5).hits]
    shares = [b["value"] for aid, b in buttons(params).items() if aid.startswith("share:")]
    assert shares == expected  # a Share button on each, as every lookup has
    assert not slack.fake.calls_to("chat.postMessage")  # nothing visible to others


def test_the_message_shortcut_in_a_thread_answers_in_that_thread(slack: SlackHarness) -> None:
    payload, _ = message_shortcut(
        slack,
        "find_papers_message",
        "diffusion models",
        ts="1700000000.000900",
        thread_ts="1700000000.000100",
    )
    post_payload(slack, payload)
    (call,) = slack.fake.wait_for(lambda: slack.fake.calls_to("chat.postEphemeral"))
    assert call.params["thread_ts"] == "1700000000.000100"


def test_a_message_without_words_gets_a_private_hint(slack: SlackHarness) -> None:
    payload, url = message_shortcut(slack, "find_papers_message", "<@U7>")
    post_payload(slack, payload)
    reply = slack.reply(url)
    assert reply["response_type"] == "ephemeral"
    assert "no words to look papers up with" in reply["text"]


def test_the_manifest_declares_the_shortcuts_events_and_scopes_they_need() -> None:
    manifest = (Path(__file__).parents[1] / "bot" / "slack" / "manifest.yml").read_text()
    for callback_id, kind in ((SEARCH_SHORTCUT, "global"), (MESSAGE_SHORTCUT, "message")):
        assert re.search(rf"type: {kind}\n\s+callback_id: {callback_id}\n", manifest)
    events = re.search(r"bot_events:\n((?:\s+(?:- \S+|#.*)\n)+)", manifest).group(1)
    assert {"app_home_opened", "app_mention", "message.im"} <= set(re.findall(r"- (\S+)", events))
    scopes = re.search(r"bot:\n((?:\s+(?:- \S+|#.*)\n)+)", manifest).group(1)
    assert {"app_mentions:read", "im:history", "chat:write"} <= set(re.findall(r"- (\S+)", scopes))
    assert "messages_tab_read_only_enabled: false" in manifest


def test_each_request_is_logged_with_its_surface(
    slack: SlackHarness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="paperboy.requests")
    open_search(slack)
    slack.event({"type": "app_home_opened", "user": "U1", "channel": "D1", "tab": "home"})
    payload, _ = message_shortcut(slack, MESSAGE_SHORTCUT, "diffusion")
    post_payload(slack, payload)
    slack.fake.wait_for(lambda: slack.fake.calls_to("chat.postEphemeral"))
    slack.fake.wait_for(lambda: slack.fake.home_view("U1"))
    logged = {r.surface: r for r in caplog.records if r.name == "paperboy.requests"}
    assert {"global_shortcut", "home", "message_shortcut"} <= set(logged)
    shortcut = logged["global_shortcut"]
    assert (shortcut.team, shortcut.user, shortcut.callback_id) == (
        "T0PAPERBOY",
        "U1",
        "search_papers",
    )
    assert isinstance(shortcut.latency_ms, float)


def test_the_stand_in_refuses_a_stale_views_update_as_slack_does(slack: SlackHarness) -> None:
    client = WebClient(token=BOT_TOKEN, base_url=slack.fake.api_url)
    opened = client.views_open(trigger_id=trigger_id(), view=render.search_view())["view"]
    newer = client.views_update(
        view_id=opened["id"], hash=opened["hash"], view=render.search_view("x")
    )
    with pytest.raises(SlackApiError) as stale:
        client.views_update(view_id=opened["id"], hash=opened["hash"], view=render.search_view("y"))
    assert stale.value.response["error"] == "hash_conflict"
    assert slack.fake.modal(opened["id"])["hash"] == newer["view"]["hash"]
    with pytest.raises(SlackApiError) as gone:
        client.views_update(view_id="VM404", view=render.search_view("y"))
    assert gone.value.response["error"] == "not_found"
