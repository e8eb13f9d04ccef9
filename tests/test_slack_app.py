"""The Slack app end to end: signed HTTP requests in, Slack Web API / response_url calls out."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlencode

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.playground.fake_slack import validate_blocks
from bot.slack import render
from bot.slack.listeners import views
from tests.slack_harness import SlackHarness, assert_valid, blocks_text, buttons


def paper_ids(message: dict[str, Any]) -> list[str]:
    return [b["value"] for aid, b in buttons(message).items() if aid.startswith("similar:")]


# --- lookups --------------------------------------------------------------------------------


def test_lookup_answers_ephemerally_with_the_top_five(slack: SlackHarness) -> None:
    expected = [h.id for h in slack.engine.search("diffusion models", limit=5).hits]
    status, url = slack.slash("diffusion models")
    assert status == 200
    reply = slack.reply(url)
    assert reply["response_type"] == "ephemeral"
    assert paper_ids(reply) == expected
    text = blocks_text(reply)
    assert "*diffusion*" in text  # matched terms in bold
    assert "papers match “diffusion models”" in text and "showing 1–5" in text
    assert "more" in buttons(reply)


def test_the_ack_is_empty_so_slack_shows_only_the_answer(slack: SlackHarness) -> None:
    form = {
        "command": "/papers",
        "text": "diffusion",
        "user_id": "U1",
        "channel_id": "C1",
        "team_id": "T0PAPERBOY",
        "response_url": slack.fake.response_url("C1", "U1"),
    }
    status, body = slack.post(urlencode(form).encode())
    assert (status, body) == (200, "")


def test_more_replaces_the_message_with_the_next_page(slack: SlackHarness) -> None:
    _, url = slack.slash("diffusion models")
    first = slack.reply(url)
    status, click_url = slack.click("more", buttons(first)["more"]["value"])
    assert status == 200
    second = slack.reply(click_url)
    assert second["replace_original"] is True
    assert "showing 6–10" in blocks_text(second)
    expected = [h.id for h in slack.engine.search("diffusion models", limit=5, offset=5).hits]
    assert paper_ids(second) == expected
    assert not set(expected) & set(paper_ids(first))
    assert "similar:6" in buttons(second)  # numbering continues across pages
    _, back_url = slack.click("previous", buttons(second)["previous"]["value"])
    assert paper_ids(slack.reply(back_url)) == paper_ids(first)


def test_similar_papers_arrive_as_a_new_ephemeral_list(slack: SlackHarness) -> None:
    _, url = slack.slash("graph neural networks")
    first = slack.reply(url)
    paper_id = buttons(first)["similar:1"]["value"]
    _, click_url = slack.click("similar:1", paper_id)
    reply = slack.reply(click_url)
    assert reply["response_type"] == "ephemeral" and reply["replace_original"] is False
    assert "Papers similar to" in blocks_text(reply)
    ids = paper_ids(reply)
    assert ids == [h.id for h in slack.engine.similar(paper_id, limit=5).hits]
    assert paper_id not in ids


def test_share_posts_the_paper_to_the_channel_naming_the_sharer(slack: SlackHarness) -> None:
    _, url = slack.slash("diffusion models", user="U123", channel="C42")
    paper_id = buttons(slack.reply(url))["share:2"]["value"]
    status, _ = slack.click("share:2", paper_id, user="U123", channel="C42")
    assert status == 200
    (call,) = slack.fake.wait_for(lambda: slack.fake.calls_to("chat.postMessage"))
    assert call.params["channel"] == "C42"
    assert call.params["text"].startswith("<@U123> shared a paper")
    (message,) = slack.fake.messages_in("C42")
    assert_valid(message)
    assert "<@U123> shared a paper" in blocks_text(message)
    assert paper_ids(message) == [paper_id]


def test_share_waits_out_a_rate_limit_then_posts_once(slack: SlackHarness) -> None:
    slack.fake.fail_next("chat.postMessage", status=429, retry_after=1)
    paper_id = slack.engine.search("diffusion").hits[0].id
    slack.click("share:1", paper_id, user="U7", channel="C9")
    calls = slack.fake.wait_for(
        lambda: (
            len(slack.fake.calls_to("chat.postMessage")) >= 2
            and slack.fake.calls_to("chat.postMessage")
        )
    )
    assert calls[1].at - calls[0].at >= 1.0  # waited for Retry-After
    slack.fake.wait_for(lambda: slack.fake.messages_in("C9"))
    assert len(slack.fake.messages_in("C9")) == 1


def test_share_survives_a_dropped_connection(slack: SlackHarness) -> None:
    slack.fake.disconnect_next("chat.postMessage")
    paper_id = slack.engine.search("diffusion").hits[0].id
    slack.click("share:1", paper_id, user="U7", channel="C8")
    slack.fake.wait_for(lambda: slack.fake.messages_in("C8"))
    assert len(slack.fake.calls_to("chat.postMessage")) == 2


def test_share_where_the_bot_is_not_a_member_posts_through_the_response_url(
    slack: SlackHarness,
) -> None:
    slack.fake.fail_next("chat.postMessage", error="channel_not_found")
    paper_id = slack.engine.search("diffusion").hits[0].id
    _, url = slack.click("share:1", paper_id, user="U7", channel="G1")
    reply = slack.reply(url)
    assert reply["response_type"] == "in_channel"
    assert "<@U7> shared a paper" in blocks_text(reply)


def test_share_of_a_paper_that_is_gone_says_so(slack: SlackHarness) -> None:
    _, url = slack.click("share:1", "no-such-paper")
    assert "no longer in the corpus" in slack.reply(url)["text"]
    assert not slack.fake.calls_to("chat.postMessage")


def test_suggestions_are_clickable(slack: SlackHarness) -> None:
    _, url = slack.slash("diffusoin")
    reply = slack.reply(url)
    assert "No papers match" in reply["text"]
    suggestion = buttons(reply)["suggest:1"]
    assert render.decode_value(suggestion["value"])["q"] == "diffusion"
    _, click_url = slack.click("suggest:1", suggestion["value"])
    page = slack.reply(click_url)
    assert page["replace_original"] is True and paper_ids(page)


def test_a_forged_or_expired_button_value_gets_a_kind_answer(slack: SlackHarness) -> None:
    _, url = slack.click("more", "not json")
    assert "expired" in slack.reply(url)["text"]
    _, url = slack.click("similar:1", "no-such-paper")
    assert "no paper with id" in slack.reply(url)["text"]


# --- help and subcommands -------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "   ", "help", "HELP"])
def test_help(slack: SlackHarness, text: str) -> None:
    _, url = slack.slash(text)
    reply = slack.reply(url)
    body = blocks_text(reply)
    for sub in (
        "subscribe",
        "unsubscribe",
        "topics",
        "digest on",
        "time 08:30",
        "days mon-fri",
        "preview",
        "digest now",
        "venue:ICLR",
    ):
        assert sub in body


def test_subcommands_are_handed_to_the_subscriptions_listener(
    slack: SlackHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple] = []

    def handle(command, args, respond, client, services) -> None:
        seen.append((command["user_id"], args, client.token, services.engine is slack.engine))
        respond(text=f"handled {args}")

    module = SimpleNamespace(handle=handle)
    monkeypatch.setattr("bot.slack.listeners.commands.subscriptions", module)
    texts = ("subscribe diffusion", "unsubscribe 2", "topics", "topic", "digest time 08:30")
    for text in texts:
        _, url = slack.slash(text, user="U5")
        assert slack.reply(url)["text"] == f"handled {text}"
    assert seen[0] == ("U5", "subscribe diffusion", "xoxb-test-paperboy", True)
    # "topics" with more words is a lookup, not the subcommand.
    _, url = slack.slash("topics in reinforcement learning")
    assert "papers match" in slack.reply(url)["text"] or "No papers" in slack.reply(url)["text"]
    assert len(seen) == len(texts)


# --- awkward input --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        "x" * 3000,
        "🎉🎉🎉",
        "<!channel>",
        "<!here> <@U999> <https://evil.example|click me>",
        "&amp; &lt; & < >",
        "venue:NOPE diffusion",
        '"unclosed phrase',
        "-only -excluded",
        "the of and",
        "year:banana",
        "*bold* _it_ ~s~ `code` ```pre```",
    ],
)
@pytest.mark.parametrize("escape", [True, False], ids=["as-slack-sends", "unescaped"])
def test_awkward_queries_get_valid_harmless_answers(
    slack: SlackHarness, query: str, escape: bool
) -> None:
    status, url = slack.slash(query, escape=escape)
    assert status == 200
    reply = slack.reply(url)  # checked against Slack's block validation
    shown = reply["text"] + blocks_text(reply)  # button values are data, never shown
    for dangerous in ("<!channel>", "<!here>", "<@U999>", "<https://evil.example"):
        assert dangerous not in shown
    assert "Sorry, something went wrong" not in reply["text"]


def test_a_failure_inside_the_lookup_becomes_an_apology(
    slack: SlackHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(slack.engine, "search", broken)
    status, url = slack.slash("diffusion")
    assert status == 200
    assert "Sorry, something went wrong" in slack.reply(url)["text"]


def test_fifty_concurrent_lookups_are_all_acknowledged_and_answered(slack: SlackHarness) -> None:
    queries = [
        f"{word} learning" for word in ("graph", "diffusion", "reinforcement", "deep", "federated")
    ] * 10
    with ThreadPoolExecutor(50) as pool:
        results = list(pool.map(lambda q: slack.slash(q), queries))
    assert [status for status, _ in results] == [200] * 50
    urls = {url for _, url in results}
    slack.fake.wait_for(lambda: all(slack.replies(u) for u in urls), timeout=30)
    for url in urls:
        assert_valid(slack.replies(url)[0])


# --- request verification -------------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        {"secret": "not-the-signing-secret"},
        {"timestamp": int(time.time()) - 6 * 60},  # replayed: older than five minutes
        {"signature": "v0=" + "0" * 64},
    ],
    ids=["wrong-secret", "stale-timestamp", "forged-signature"],
)
def test_unsigned_or_stale_requests_are_refused(slack: SlackHarness, options: dict) -> None:
    status, bad_url = slack.slash("diffusion", **options)
    assert status == 401
    status, _ = slack.click("share:1", slack.engine.search("diffusion").hits[0].id, **options)
    assert status == 401
    # A good request after the refused ones is answered; the refused ones never were.
    _, good_url = slack.slash("diffusion")
    slack.reply(good_url)
    assert slack.replies(bad_url) == []
    assert not slack.fake.calls_to("chat.postMessage")


def test_request_without_signature_headers_is_refused(slack: SlackHarness) -> None:
    status, _ = slack.request("/slack/events", b"command=%2Fpapers&text=x", {})
    assert status == 401


# --- events ---------------------------------------------------------------------------------


def test_url_verification_challenge(slack: SlackHarness) -> None:
    body = json.dumps(
        {"token": "t", "challenge": "3eZbrw1aBm2rZgRNFdxV", "type": "url_verification"}
    )
    status, answer = slack.post(body.encode(), content_type="application/json")
    assert status == 200 and "3eZbrw1aBm2rZgRNFdxV" in answer


def test_app_home_shows_the_help(slack: SlackHarness) -> None:
    status, _ = slack.event(
        {"type": "app_home_opened", "user": "U3", "channel": "D3", "tab": "home"}
    )
    assert status == 200
    view = slack.fake.wait_for(lambda: slack.fake.home_view("U3"))
    assert view["type"] == "home"
    assert "/papers subscribe" in blocks_text(view)


def test_slack_escaped_command_text_is_read_as_typed(
    slack: SlackHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Slack sends "&", "<", ">" in slash command text as &amp; &lt; &gt;.
    seen: list[str] = []
    search = slack.engine.search
    monkeypatch.setattr(slack.engine, "search", lambda q, **kw: seen.append(q) or search(q, **kw))
    _, url = slack.slash("<!channel> graph & networks")
    reply = slack.reply(url)
    assert seen == ["<!channel> graph & networks"]
    assert "“&lt;!channel&gt; graph &amp; networks”" in blocks_text(reply)
    assert "&amp;lt;" not in blocks_text(reply)


@pytest.mark.parametrize(
    ("sent", "query"),
    [
        ("<!channel> diffusion", "diffusion"),
        ("<!here> graph <@U999|bob> networks <!everyone>", "graph   networks"),
        ("<!subteam^S0ML|@ml-team> <#C0GENERAL|general> diffusion models", "diffusion models"),
        ("<@W123> &lt;!channel&gt; typed", "<!channel> typed"),  # typed as text: searched
    ],
)
def test_mentions_are_no_search_terms(
    slack: SlackHarness, monkeypatch: pytest.MonkeyPatch, sent: str, query: str
) -> None:
    seen: list[str] = []
    search = slack.engine.search
    monkeypatch.setattr(slack.engine, "search", lambda q, **kw: seen.append(q) or search(q, **kw))
    _, url = slack.slash(sent, escape=False)  # as Slack sends mentions picked in the client
    reply = slack.reply(url)
    assert seen == [query]
    assert "channel" not in reply["text"].replace("&lt;!channel&gt;", "")


def test_the_playground_sends_mentions_as_slack_does() -> None:
    from bot.playground.playground import slack_escape

    assert slack_escape("@channel diffusion #reading-group <b>") == (
        "<!channel> diffusion <#C0READING|reading-group> &lt;b&gt;"
    )
    assert slack_escape("me@here.org @heretic") == "me@here.org @heretic"


@pytest.mark.parametrize("sent", ["<!channel>", "<@U999|bob> <!here>", "<#C0GENERAL|general>"])
def test_only_mentions_is_an_empty_query(
    slack: SlackHarness, monkeypatch: pytest.MonkeyPatch, sent: str
) -> None:
    monkeypatch.setattr(slack.engine, "search", lambda *a, **kw: pytest.fail("searched"))
    _, url = slack.slash(sent, escape=False)
    assert "Paperboy help" in slack.reply(url)["text"]


def test_channel_mentions_stay_where_a_subcommand_needs_them(
    slack: SlackHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []

    def handle(command, args, respond, client, services) -> None:
        seen.append(args)
        respond(text="ok")

    module = SimpleNamespace(handle=handle)
    monkeypatch.setattr("bot.slack.listeners.commands.subscriptions", module)
    for sent in (
        "digest channel <#CPAPERS|papers>",
        "<!here> digest channel <#CPAPERS|papers>",
        "subscribe <!channel> graph <#CPAPERS|papers> networks",
    ):
        _, url = slack.slash(sent, escape=False)
        slack.reply(url)
    assert [a.split() for a in seen] == [
        ["digest", "channel", "<#CPAPERS|papers>"],
        ["digest", "channel", "<#CPAPERS|papers>"],
        ["subscribe", "graph", "networks"],
    ]


def test_a_reply_slack_refuses_is_resent_as_plain_text(
    slack: SlackHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    too_many = {"text": "fallback words", "blocks": [{"type": "divider"}] * 51}
    monkeypatch.setattr(render, "search_message", lambda result, query: too_many)
    _, url = slack.slash("diffusion")
    first, second = slack.fake.wait_for(lambda: len(slack.replies(url)) >= 2 and slack.replies(url))
    assert len(first["blocks"]) == 51  # refused by Slack (invalid_blocks)
    assert second == {"text": "fallback words", "response_type": "ephemeral"}


# --- "Share to channel" where there is no channel: the picker ------------------------------


def share_modal(slack: SlackHarness, paper_id: str, **click: Any) -> dict[str, Any]:
    """Click Share (in a DM unless ``click`` says otherwise) and return the modal it opened."""
    options = {"user": "U7", "channel": "DU7", **click}
    status, _ = slack.click("share:1", paper_id, **options)
    assert status == 200
    (call,) = slack.fake.wait_for(lambda: slack.fake.calls_to("views.open"))
    assert call.params["trigger_id"] == slack.trigger_ids[-1]  # the click's own, at once
    return slack.fake.modals()[-1]


@pytest.mark.parametrize(
    ("channel", "name"),
    [("DU7", "directmessage"), ("D0OTHER", "directmessage"), ("G0GROUP", "mpdm-u7--u8-1")],
    ids=["paperboy-dm", "dm-with-someone", "group-dm"],
)
def test_share_from_a_dm_opens_a_channel_picker_instead_of_posting_there(
    slack: SlackHarness, channel: str, name: str
) -> None:
    paper_id = slack.engine.search("diffusion").hits[0].id
    modal = share_modal(slack, paper_id, channel=channel, channel_name=name)
    assert modal["type"] == "modal" and modal["callback_id"] == render.SHARE_VIEW
    assert not validate_blocks(modal["blocks"], max_blocks=100)
    inputs = {b["block_id"]: b for b in modal["blocks"] if b["type"] == "input"}
    picker = inputs[render.SHARE_CHANNEL_BLOCK]["element"]
    assert picker["type"] == "conversations_select"
    assert picker["default_to_current_conversation"] is False
    assert picker["filter"] == {"include": ["public", "private"], "exclude_bot_users": True}
    assert not inputs[render.SHARE_CHANNEL_BLOCK].get("optional")
    comment = inputs[render.SHARE_COMMENT_BLOCK]
    assert comment["optional"] is True and comment["element"]["type"] == "plain_text_input"
    assert json.loads(modal["private_metadata"]) == {"paper": paper_id}
    assert render.paper_title(slack.engine.paper(paper_id)) in blocks_text(modal)
    # Nothing was posted anywhere, least of all back into the DM.
    assert not slack.fake.calls_to("chat.postMessage") and not slack.fake.responses


def test_the_picker_shares_in_the_chosen_channel_with_the_comment_escaped(
    slack: SlackHarness,
) -> None:
    paper_id = slack.engine.search("diffusion").hits[0].id
    modal = share_modal(slack, paper_id)
    comment = "Worth a read <!channel> & @here\n\n<https://evil.example|click>"
    status, ack = slack.submit_view(
        modal, {render.SHARE_CHANNEL_BLOCK: "C42", render.SHARE_COMMENT_BLOCK: comment}, user="U7"
    )
    assert status == 200
    # Posted before the acknowledgement, which shows where it went.
    assert ack["response_action"] == "update"
    assert "Shared in <#C42>" in blocks_text(ack["view"])
    (message,) = slack.fake.messages_in("C42")
    assert_valid(message)
    assert message["text"].startswith("<@U7> shared a paper")
    shown = message["text"] + blocks_text(message)
    assert "> Worth a read &lt;!channel&gt; &amp; @\u2060here\n> &lt;https:" in shown
    for dangerous in ("<!channel>", "@here", "<https://evil.example"):
        assert dangerous not in shown
    assert paper_ids(message) == [paper_id]
    assert not slack.fake.messages_in("DU7")


def test_the_picker_without_a_comment(slack: SlackHarness) -> None:
    paper_id = slack.engine.search("graph").hits[0].id
    modal = share_modal(slack, paper_id)
    _, ack = slack.submit_view(modal, {render.SHARE_CHANNEL_BLOCK: "C5"}, user="U7")
    assert ack["response_action"] == "update"
    (message,) = slack.fake.messages_in("C5")
    assert [b["type"] for b in message["blocks"]][:2] == ["context", "section"]
    assert not blocks_text(message).split("\n")[1].startswith("&gt;")  # no empty quote


@pytest.mark.parametrize("code", ["channel_not_found", "not_in_channel"])
def test_a_channel_paperboy_is_not_in_is_refused_in_the_modal(
    slack: SlackHarness, code: str
) -> None:
    paper_id = slack.engine.search("diffusion").hits[0].id
    modal = share_modal(slack, paper_id)
    slack.fake.fail_next("chat.postMessage", error=code)
    status, ack = slack.submit_view(modal, {render.SHARE_CHANNEL_BLOCK: "G0SECRET"}, user="U7")
    assert status == 200
    assert ack["response_action"] == "errors"
    error = ack["errors"][render.SHARE_CHANNEL_BLOCK]
    assert "invite @Paperboy to it first" in error and "pick another channel" in error
    assert not slack.fake.messages_in("G0SECRET")
    # The modal stayed open: picking another channel then works.
    _, ack = slack.submit_view(modal, {render.SHARE_CHANNEL_BLOCK: "C1"}, user="U7")
    assert ack["response_action"] == "update" and slack.fake.messages_in("C1")


def test_when_slack_is_slow_the_modal_closes_and_only_a_failure_comes_by_dm(
    slack: SlackHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(views, "ACK_WAIT_SECONDS", 0.2)
    paper_id = slack.engine.search("diffusion").hits[0].id
    for channel in ("C3", "G0SECRET"):  # both rate-limited; then C3 works, G0SECRET refuses
        slack.fake.fail_next("chat.postMessage", status=429, retry_after=3, channel=channel)
    slack.fake.fail_next("chat.postMessage", error="channel_not_found", channel="G0SECRET")
    modal = share_modal(slack, paper_id)
    for channel in ("C3", "G0SECRET"):
        started = time.monotonic()
        status, ack = slack.submit_view(modal, {render.SHARE_CHANNEL_BLOCK: channel}, user="U7")
        assert (status, ack) == (200, "")  # acknowledged empty: the modal closes
        assert time.monotonic() - started < 2.5  # not held until the retry, 3 s later
    (notice,) = slack.fake.wait_for(lambda: slack.fake.messages_in("DU7"), timeout=15)
    assert_valid(notice)
    assert "invite @Paperboy to <#G0SECRET> first" in blocks_text(notice)
    assert not slack.fake.messages_in("G0SECRET")
    slack.fake.wait_for(lambda: slack.fake.messages_in("C3"), timeout=15)
    assert len(slack.fake.messages_in("DU7")) == 1  # the share that worked sent no notice


def test_the_picker_refuses_a_submission_without_channel_or_paper(slack: SlackHarness) -> None:
    modal = share_modal(slack, slack.engine.search("diffusion").hits[0].id)
    with pytest.raises(AssertionError, match="required"):  # Slack's client would not send it
        slack.submit_view(modal, {})
    # A submission that gets through anyway is answered in the modal, not with a crash.
    blocks = [{**b, "optional": True} if b["type"] == "input" else b for b in modal["blocks"]]
    _, ack = slack.submit_view({**modal, "blocks": blocks}, {})
    assert ack == {"response_action": "errors", "errors": {"share_channel": "Pick a channel."}}
    gone = {**modal, "private_metadata": json.dumps({"paper": "no-such-paper"})}
    _, ack = slack.submit_view(gone, {render.SHARE_CHANNEL_BLOCK: "C1"})
    assert "no longer in the corpus" in ack["errors"]["share_channel"]
    assert not slack.fake.calls_to("chat.postMessage")


def test_a_picker_slack_will_not_open_is_explained(slack: SlackHarness) -> None:
    slack.fake.fail_next("views.open", error="expired_trigger_id")
    paper_id = slack.engine.search("diffusion").hits[0].id
    _, url = slack.click("share:1", paper_id, user="U7", channel="DU7")
    reply = slack.reply(url)
    assert reply["response_type"] == "ephemeral"
    assert "would not open the channel picker (expired_trigger_id)" in reply["text"]


def test_share_of_a_gone_paper_in_a_dm_says_so_without_a_picker(slack: SlackHarness) -> None:
    _, url = slack.click("share:1", "no-such-paper", channel="DU1")
    assert "no longer in the corpus" in slack.reply(url)["text"]
    assert not slack.fake.calls_to("views.open")


def test_the_stand_in_checks_modals_like_slack(slack: SlackHarness) -> None:
    client = WebClient(token="xoxb-1", base_url=slack.fake.api_url)
    view = render.share_view(slack.engine.search("diffusion").hits[0].paper)
    assert client.views_open(trigger_id="t1", view=view)["view"]["id"]
    with pytest.raises(SlackApiError, match="exchanged_trigger_id"):  # a trigger works once
        client.views_open(trigger_id="t1", view=view)
    with pytest.raises(SlackApiError, match="invalid_trigger_id"):
        client.views_open(trigger_id="", view=view)
    too_long = {**view, "title": {"type": "plain_text", "text": "x" * 25}}
    with pytest.raises(SlackApiError, match="invalid_arguments"):
        client.views_open(trigger_id="t2", view=too_long)
    many = {**view, "blocks": [{"type": "divider"}] * 101}
    with pytest.raises(SlackApiError, match="invalid_blocks"):
        client.views_open(trigger_id="t3", view=many)
    assert client.views_open(trigger_id="t4", view={**many, "blocks": many["blocks"][:100]})


@pytest.mark.parametrize("offset", [10**12, 5_000, 10**30])
def test_a_forged_huge_offset_shows_the_last_page_not_no_match(
    slack: SlackHarness, offset: int
) -> None:
    total = slack.engine.search("diffusion models", limit=1).total
    assert total > 5
    _, url = slack.click("more", json.dumps({"q": "diffusion models", "o": offset}))
    reply = slack.reply(url)
    text = blocks_text(reply)
    assert "No papers match" not in text
    last = (total - 1) // 5 * 5
    assert paper_ids(reply) == [h.id for h in slack.engine.search("diffusion models", 5, last).hits]


@pytest.mark.parametrize("value", ['{"q": "diffusion", "o": true}', '{"q": "diffusion", "o": -5}'])
def test_a_nonsense_offset_says_the_button_expired(slack: SlackHarness, value: str) -> None:
    _, url = slack.click("more", value)
    assert "expired" in slack.reply(url)["text"]


def test_a_rate_limited_picker_never_holds_up_acknowledgements(slack: SlackHarness, caplog) -> None:
    """views.open answers 429 to 32 Share clicks in DMs: each is tried once, off Bolt's ack
    threads (a trigger_id expires after 3 s, so a retry could never succeed), and the twenty
    slash commands that follow are all acknowledged and answered. On a loaded machine a
    click may wait out its trigger's life before its turn: it is then not tried at all (and
    logged), never late."""
    slack.fake.fail_next("views.open", times=1000, status=429, retry_after=5)
    paper_id = slack.engine.search("diffusion").hits[0].id
    caplog.set_level("WARNING", logger="bot.slack.listeners.actions")
    with ThreadPoolExecutor(32) as pool:
        clicks = list(
            pool.map(
                lambda n: slack.click("share:1", paper_id, user=f"U{n}", channel=f"DU{n}"),
                range(32),
            )
        )
        commands = list(pool.map(lambda n: slack.slash("diffusion", user=f"U{n}"), range(20)))
    assert [status for status, _ in clicks] == [200] * 32
    assert [status for status, _ in commands] == [200] * 20
    for _, url in commands:
        assert_valid(slack.reply(url))
    for _, url in clicks:
        assert "Slack is busy" in slack.reply(url)["text"]
    tried = [call.params["trigger_id"] for call in slack.fake.calls_to("views.open")]
    expired = [r for r in caplog.records if "share picker not opened" in r.getMessage()]
    assert len(set(tried)) == len(tried) and set(tried) <= set(slack.trigger_ids)  # no retry
    assert len(tried) + len(expired) == 32  # each click tried once, or left as expired


def test_a_lookup_over_an_empty_corpus_says_what_to_run(tmp_path) -> None:
    """The same sentence as the CLI's, never "No papers match" (which would blame the query)."""
    from bot.engine.search import Engine
    from bot.english import empty_corpus

    with SlackHarness(tmp_path, engine=Engine.open(tmp_path / "empty.db")) as slack:
        _, url = slack.slash("diffusion models")
        answer = slack.reply(url)
    assert_valid(answer)
    assert answer["text"] == empty_corpus()
    assert empty_corpus() in blocks_text(answer)
    assert "No papers match" not in json.dumps(answer)
    assert "paperboy ingest FILE" in answer["text"]


def test_subscriptions_and_digests_over_an_empty_corpus_say_what_to_run(tmp_path) -> None:
    """With no papers at all, "digest now" and "digest preview" must not claim every paper was
    already sent, and subscribing must not call the topic bad: the empty-corpus sentence."""
    from bot.engine.search import Engine
    from bot.english import empty_corpus

    with SlackHarness(tmp_path, engine=Engine.open(tmp_path / "empty.db")) as slack:
        slack.fake.set_user("U1", tz="UTC")
        answers = {}
        for text in ("subscribe diffusion models", "digest preview", "digest now"):
            _, url = slack.slash(text)
            answers[text] = slack.reply(url)
        topics = slack.engine.db.execute("select query from topics").fetchall()
        posted = slack.fake.calls_to("chat.postMessage")
    for text, answer in answers.items():
        assert_valid(answer)
        assert empty_corpus() in blocks_text(answer), (text, answer)
        assert "already been in your digests" not in json.dumps(answer), text
        assert "nothing" not in blocks_text(answer).lower(), (text, answer)
    assert answers["digest now"]["text"] == empty_corpus()
    assert "Subscribed to" in answers["subscribe diffusion models"]["text"]
    assert topics == [("diffusion models",)]  # the topic is kept for when papers come
    assert not posted


def test_a_command_acked_while_the_process_stops_is_told_to_try_again(
    slack: SlackHarness,
) -> None:
    """SIGTERM shuts the work pool while Slack may still deliver a command: its ack stays a
    200 and the member is told to try again, not given a crash's apology."""
    slack.executor.shutdown(wait=True)
    status, url = slack.slash("diffusion", user="U7")
    assert status == 200
    reply = slack.reply(url)
    assert "Paperboy is restarting and could not answer that" in reply["text"]
    assert reply["response_type"] == "ephemeral"


def test_work_that_cannot_start_never_raises_after_the_ack() -> None:
    """Only a pool shut down means the process is stopping; a thread that cannot start yet
    leaves the work queued (it runs later), so the member is not told to try again."""
    from concurrent.futures import ThreadPoolExecutor

    from bot.slack.services import Services

    told: list[str] = []

    def respond(**message: Any) -> None:
        told.append(message["text"])

    class NoThreads:
        def submit(self, *args: Any) -> None:
            raise RuntimeError("can't start new thread")

    Services.submit(NoThreads(), respond, print, ())  # type: ignore[arg-type]
    assert told == []
    stopped = ThreadPoolExecutor(1)
    stopped.shutdown()
    Services.submit(stopped, respond, print, ())
    assert len(told) == 1 and "Paperboy is restarting" in told[0]
