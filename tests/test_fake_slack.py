"""FakeSlack behaves like Slack's Web API as slack_sdk, Bolt's respond() and plain HTTP see it."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest
from slack_bolt.context.respond import Respond
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry import ConnectionErrorRetryHandler, FixedValueRetryIntervalCalculator

from bot.playground.fake_slack import validate_blocks
from tests.fake_slack import FakeSlack

WINTER = 1_700_000_000.0  # 2023-11-14, standard time in Europe and the US
SUMMER = 1_720_000_000.0  # 2024-07-03, daylight saving time


class Clock:
    def __init__(self, now: float = WINTER) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def fake(clock: Clock) -> Iterator[FakeSlack]:
    with FakeSlack(clock=clock) as running:
        yield running


@pytest.fixture
def client(fake: FakeSlack) -> WebClient:
    # No retry handlers: each test decides whether the client retries.
    return WebClient(token="xoxb-test", base_url=fake.api_url, retry_handlers=[])


def http(
    url: str, body: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, Any, Any]:
    """POST (or GET without body) with urllib; returns status, decoded body, headers."""
    request = urllib.request.Request(url, data=body, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            status, raw, answer_headers = answer.status, answer.read(), answer.headers
    except urllib.error.HTTPError as error:
        status, raw, answer_headers = error.code, error.read(), error.headers
    text = raw.decode()
    return status, json.loads(text) if text.startswith("{") else text, answer_headers


def section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def button(action_id: str, label: str = "Open") -> dict[str, Any]:
    return {"type": "button", "action_id": action_id, "text": {"type": "plain_text", "text": label}}


# --- identity, auth, dispatch ------------------------------------------------------------------


def test_auth_test_identifies_the_bot_and_is_recorded(fake: FakeSlack, client: WebClient) -> None:
    answer = client.auth_test()
    assert (answer["team_id"], answer["user_id"], answer["bot_id"]) == (
        "T0PAPERBOY",
        "UBOT",
        "BBOT",
    )
    assert [c.method for c in fake.calls] == ["auth.test"]
    assert fake.calls[0].at == WINTER


def test_views_and_messages_carry_the_calling_tokens_workspace(
    fake: FakeSlack, client: WebClient
) -> None:
    """A token issued by another workspace's install makes that workspace's views and
    messages, as on Slack; a token the fake did not issue stays the home workspace's."""
    fake.register_app("CID", "SECRET")
    granted = client.oauth_v2_access(
        client_id="CID", client_secret="SECRET", code=fake.authorize("T2", "Other Lab")
    )
    other = WebClient(token=granted["access_token"], base_url=fake.api_url)
    modal = {"type": "modal", "title": {"type": "plain_text", "text": "Share"}, "blocks": []}
    home = {"type": "home", "blocks": [section("hi")]}
    for caller, team, bot in ((other, "T2", "BBOTT2"), (client, "T0PAPERBOY", "BBOT")):
        opened = caller.views_open(trigger_id=f"t-{team}", view=modal)["view"]
        assert (opened["team_id"], opened["bot_id"]) == (team, bot)
        assert caller.views_publish(user_id="U1", view=home)["view"]["team_id"] == team
        posted = caller.chat_postMessage(channel="C1", text="hi")["message"]
        assert (posted["team"], posted["bot_id"]) == (team, bot)
    with pytest.raises(SlackApiError, match="cannot_dm_bot"):
        other.conversations_open(users="UBOTT2")


def test_urls_point_at_the_loopback_server(fake: FakeSlack) -> None:
    assert fake.base_url.startswith("http://127.0.0.1:")
    assert fake.api_url == fake.base_url + "/api/"


def test_a_call_without_token_is_not_authed(fake: FakeSlack) -> None:
    with pytest.raises(SlackApiError) as raised:
        WebClient(base_url=fake.api_url, retry_handlers=[]).auth_test()
    assert raised.value.response["error"] == "not_authed"
    assert http(fake.api_url + "auth.test", b"")[1] == {"ok": False, "error": "not_authed"}


def test_token_may_come_as_a_form_parameter(fake: FakeSlack) -> None:
    form = urlencode({"token": "xoxb-form"}).encode()
    status, body, _ = http(fake.api_url + "auth.test", form)
    assert (status, body["ok"], body["user_id"]) == (200, True, "UBOT")
    assert "token" not in fake.calls[0].params


def test_unknown_method_answers_unknown_method(client: WebClient) -> None:
    with pytest.raises(SlackApiError) as raised:
        client.api_call("papers.teleport")
    assert raised.value.response["error"] == "unknown_method"


# --- messages ----------------------------------------------------------------------------------


def test_history_is_newest_first_and_metadata_only_on_request(client: WebClient) -> None:
    client.conversations_join(channel="C1")
    metadata = {"event_type": "paperboy_digest", "event_payload": {"day": "2023-11-14"}}
    first = client.chat_postMessage(channel="C1", text="first", metadata=metadata)
    second = client.chat_postMessage(channel="C1", text="second", blocks=[section("*second*")])
    assert float(first["ts"]) < float(second["ts"])

    plain = client.conversations_history(channel="C1")["messages"]
    assert [m["text"] for m in plain] == ["second", "first"]
    assert all("metadata" not in m for m in plain)
    assert plain[0]["blocks"] == [section("*second*")]
    assert plain[0]["bot_id"] == "BBOT"

    full = client.conversations_history(channel="C1", include_all_metadata=True)["messages"]
    assert full[1]["metadata"] == metadata


def test_history_honours_oldest_and_limit(client: WebClient) -> None:
    client.conversations_join(channel="C1")
    stamps = [client.chat_postMessage(channel="C1", text=f"m{i}")["ts"] for i in range(4)]
    page = client.conversations_history(channel="C1", oldest=stamps[0], limit=2)
    assert [m["ts"] for m in page["messages"]] == [stamps[3], stamps[2]]
    assert page["has_more"] is True
    rest = client.conversations_history(
        channel="C1", oldest=stamps[0], limit=2, cursor=page["response_metadata"]["next_cursor"]
    )
    assert [m["ts"] for m in rest["messages"]] == [stamps[1]]


def test_history_only_where_the_bot_is_a_member(fake: FakeSlack, client: WebClient) -> None:
    """As on Slack: chat:write.public posts into a public channel without joining it, but
    reading the channel back needs membership."""
    client.chat_postMessage(channel="CPUBLIC", text="posted without joining")
    with pytest.raises(SlackApiError, match="not_in_channel"):
        client.conversations_history(channel="CPUBLIC")
    assert client.conversations_join(channel="CPUBLIC")["channel"]["is_member"] is True
    assert client.conversations_join(channel="CPUBLIC")["warning"] == "already_in_channel"
    [message] = client.conversations_history(channel="CPUBLIC")["messages"]
    assert message["text"] == "posted without joining"
    client.conversations_open(users="U3")
    assert client.conversations_history(channel="DU3")["messages"] == []  # its own DM


def test_private_channels_need_an_invitation(fake: FakeSlack, client: WebClient) -> None:
    fake.add_channel("GSECRET", private=True)
    for call in (
        lambda: client.chat_postMessage(channel="GSECRET", text="hi"),
        lambda: client.conversations_history(channel="GSECRET"),
    ):
        with pytest.raises(SlackApiError, match="not_in_channel"):
            call()
    with pytest.raises(SlackApiError, match="method_not_supported_for_channel_type"):
        client.conversations_join(channel="GSECRET")
    fake.add_channel("GSECRET", private=True, member=True)  # /invite @Paperboy
    client.chat_postMessage(channel="GSECRET", text="hi")
    assert len(client.conversations_history(channel="GSECRET")["messages"]) == 1


def test_a_revoked_token_fails_every_call(fake: FakeSlack, client: WebClient) -> None:
    assert client.auth_test()["ok"]
    fake.revoke_token()
    for call in (client.auth_test, lambda: client.chat_postMessage(channel="C1", text="x")):
        with pytest.raises(SlackApiError, match="token_revoked"):
            call()


def test_form_encoded_json_fields_are_decoded(fake: FakeSlack) -> None:
    metadata = {"event_type": "t", "event_payload": {}}
    fields = {"channel": "C1", "text": "hi", "blocks": json.dumps([section("hello")])}
    form = urlencode({**fields, "metadata": json.dumps(metadata)}).encode()
    status, body, _ = http(
        fake.api_url + "chat.postMessage", form, {"Authorization": "Bearer xoxb-t"}
    )
    assert (status, body["ok"]) == (200, True)
    [message] = fake.messages_in("C1")
    assert message["blocks"] == [section("hello")]
    assert fake.calls_to("chat.postMessage")[0].params["metadata"]["event_type"] == "t"


def test_json_bodies_are_accepted(fake: FakeSlack) -> None:
    payload = json.dumps({"channel": "C2", "text": "via json"}).encode()
    headers = {"Authorization": "Bearer xoxb-t", "Content-Type": "application/json; charset=utf-8"}
    assert http(fake.api_url + "chat.postMessage", payload, headers)[1]["ok"] is True
    assert [m["text"] for m in fake.messages_in("C2")] == ["via json"]


def test_dm_channel_is_d_plus_user_id(fake: FakeSlack, client: WebClient) -> None:
    assert client.conversations_open(users="U3")["channel"]["id"] == "DU3"
    assert client.chat_postMessage(channel="U3", text="digest")["channel"] == "DU3"
    assert [m["text"] for m in fake.messages_in("DU3")] == ["digest"]


def test_conversations_open_refuses_the_bot_and_deactivated_users(
    fake: FakeSlack, client: WebClient
) -> None:
    fake.set_user("U5", deleted=True)
    for user, error in [("UBOT", "cannot_dm_bot"), ("U5", "user_disabled")]:
        with pytest.raises(SlackApiError) as raised:
            client.conversations_open(users=user)
        assert raised.value.response["error"] == error


def test_update_delete_and_permalink(fake: FakeSlack, client: WebClient) -> None:
    ts = client.chat_postMessage(channel="C1", text="draft")["ts"]
    client.chat_update(channel="C1", ts=ts, text="final", blocks=[section("final")])
    assert fake.messages_in("C1")[0]["text"] == "final"
    link = client.chat_getPermalink(channel="C1", message_ts=ts)["permalink"]
    assert link.endswith("/archives/C1/p" + ts.replace(".", ""))

    client.chat_delete(channel="C1", ts=ts)
    assert fake.messages_in("C1") == []
    with pytest.raises(SlackApiError, match="message_not_found"):
        client.chat_update(channel="C1", ts=ts, text="x")
    with pytest.raises(SlackApiError, match="message_not_found"):
        client.chat_delete(channel="C1", ts=ts)


def test_ephemerals_are_events_but_not_history(fake: FakeSlack, client: WebClient) -> None:
    client.conversations_join(channel="C1")
    answer = client.chat_postEphemeral(channel="C1", user="U1", text="only you")
    assert answer["message_ts"]
    assert client.conversations_history(channel="C1")["messages"] == []
    [event] = fake.events_since(0)
    assert (event.kind, event.channel, event.user, event.text) == (
        "ephemeral",
        "C1",
        "U1",
        "only you",
    )


def test_events_feed_orders_every_visible_change(fake: FakeSlack, client: WebClient) -> None:
    ts = client.chat_postMessage(channel="C1", text="a")["ts"]
    client.chat_postEphemeral(channel="C1", user="U1", text="b")
    client.chat_update(channel="C1", ts=ts, text="a2")
    client.chat_delete(channel="C1", ts=ts)
    events = fake.events_since(0)
    assert [e.kind for e in events] == ["message", "ephemeral", "update", "delete"]
    assert [e.seq for e in events] == [1, 2, 3, 4]
    assert [e.kind for e in fake.events_since(2)] == ["update", "delete"]
    assert events[2].to_dict()["text"] == "a2"


def test_concurrent_posts_get_unique_increasing_ts(fake: FakeSlack) -> None:
    def post_ten() -> None:
        own = WebClient(token="xoxb-test", base_url=fake.api_url, retry_handlers=[])
        for i in range(10):
            own.chat_postMessage(channel="C9", text=str(i))

    threads = [threading.Thread(target=post_ten) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stamps = [m["ts"] for m in fake.messages_in("C9")]
    assert len(set(stamps)) == 60
    assert stamps == sorted(stamps, key=float)
    assert [e.seq for e in fake.events_since(0)] == list(range(1, 61))


# --- validation --------------------------------------------------------------------------------

INVALID_BLOCKS = {
    "too many blocks": ([section("x")] * 51, "no more than 50 items"),
    "unknown type": ([{"type": "carousel_of_doom"}], "unknown block type"),
    "section text": ([section("x" * 3001)], "less than 3001 characters"),
    "section as plain string": ([{"type": "section", "text": "hi"}], "must be a text object"),
    "header length": (
        [{"type": "header", "text": {"type": "plain_text", "text": "h" * 151}}],
        "less than 151",
    ),
    "header mrkdwn": (
        [{"type": "header", "text": {"type": "mrkdwn", "text": "*h*"}}],
        "plain_text",
    ),
    "button text": ([{"type": "actions", "elements": [button("a", "b" * 76)]}], "less than 76"),
    "action_id length": ([{"type": "actions", "elements": [button("a" * 256)]}], "255 characters"),
    "duplicate action_id": (
        [
            {**section("x"), "accessory": button("open")},
            {"type": "actions", "elements": [button("open")]},
        ],
        "duplicate action_id",
    ),
    "context elements": (
        [{"type": "context", "elements": [{"type": "mrkdwn", "text": "c"}] * 11}],
        "between 1 and 10",
    ),
    "actions elements": (
        [{"type": "actions", "elements": [button(f"b{i}") for i in range(26)]}],
        "between 1 and 25",
    ),
    "too many fields": (
        [{"type": "section", "fields": [{"type": "mrkdwn", "text": "f"}] * 11}],
        "no more than 10",
    ),
    "field length": (
        [{"type": "section", "fields": [{"type": "mrkdwn", "text": "f" * 2001}]}],
        "less than 2001",
    ),
    "image without alt_text (slack_sdk)": (
        [{"type": "image", "image_url": "https://x/y.png"}],
        "alt_text",
    ),
    "image alt_text length (slack_sdk)": (
        [{"type": "image", "image_url": "https://x/y.png", "alt_text": "a" * 2001}],
        "alt_text attribute cannot exceed 2000 characters",
    ),
}


@pytest.mark.parametrize("blocks, problem", INVALID_BLOCKS.values(), ids=INVALID_BLOCKS.keys())
def test_invalid_blocks_are_refused_like_slack(
    fake: FakeSlack, client: WebClient, blocks: list, problem: str
) -> None:
    with pytest.raises(SlackApiError) as raised:
        client.chat_postMessage(channel="C1", text="fallback", blocks=blocks)
    assert raised.value.response["error"] == "invalid_blocks"
    assert any(problem in e for e in raised.value.response["errors"]), raised.value.response[
        "errors"
    ]
    assert fake.messages_in("C1") == []


def test_blocks_exactly_at_the_limits_are_accepted(client: WebClient) -> None:
    blocks = [
        {"type": "header", "text": {"type": "plain_text", "text": "h" * 150}},
        {**section("s" * 3000), "accessory": button("open-" + "a" * 250, "b" * 75)},
        {"type": "section", "fields": [{"type": "mrkdwn", "text": "f" * 2000}] * 10},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": "c"}] * 10},
        {"type": "actions", "elements": [button(f"b{i}") for i in range(25)]},
        {"type": "divider"},
    ]
    blocks += [section(str(i)) for i in range(50 - len(blocks))]
    assert validate_blocks(blocks) == []
    assert client.chat_postMessage(channel="C1", text="ok", blocks=blocks)["ok"] is True


def test_message_text_rules(client: WebClient) -> None:
    for body, error in [({"text": "x" * 40_001}, "msg_too_long"), ({}, "no_text")]:
        with pytest.raises(SlackApiError) as raised:
            client.api_call("chat.postMessage", json={"channel": "C1", **body})
        assert raised.value.response["error"] == error
    assert client.chat_postMessage(channel="C1", text="x" * 40_000)["ok"] is True


def test_views_publish_allows_100_blocks_not_101(fake: FakeSlack, client: WebClient) -> None:
    view = {"type": "home", "blocks": [section(str(i)) for i in range(100)]}
    assert client.views_publish(user_id="U1", view=view)["view"]["id"]
    assert len(fake.home_view("U1")["blocks"]) == 100
    with pytest.raises(SlackApiError) as raised:
        client.views_publish(user_id="U1", view={**view, "blocks": view["blocks"] + [section("x")]})
    assert raised.value.response["error"] == "invalid_blocks"


# --- users -------------------------------------------------------------------------------------


def test_users_info_reports_timezone_for_now(
    fake: FakeSlack, client: WebClient, clock: Clock
) -> None:
    fake.set_user("U1", tz="Europe/Berlin", real_name="Ada Lovelace")
    ada = client.users_info(user="U1")["user"]
    assert (ada["tz"], ada["tz_label"], ada["tz_offset"]) == ("Europe/Berlin", "CET", 3600)
    assert (ada["real_name"], ada["deleted"]) == ("Ada Lovelace", False)

    stranger = client.users_info(user="U2")["user"]
    assert (stranger["tz"], stranger["tz_offset"]) == ("America/Los_Angeles", -8 * 3600)

    clock.now = SUMMER
    assert client.users_info(user="U1")["user"]["tz_offset"] == 7200


# --- response_url ------------------------------------------------------------------------------


def test_bolt_respond_is_recorded_as_a_response_event(fake: FakeSlack) -> None:
    url = fake.response_url(channel="C1", user="U1")
    assert url.startswith(fake.base_url + "/respond/") and url != fake.response_url()
    answer = Respond(response_url=url)(text="3 papers", blocks=[section("3 papers")])
    assert (answer.status_code, answer.body) == (200, "ok")
    [response] = fake.responses
    assert response.payload["text"] == "3 papers"
    [event] = fake.events_since(0)
    assert (event.kind, event.channel, event.user, event.response_type) == (
        "response",
        "C1",
        "U1",
        "ephemeral",
    )


def test_response_url_refuses_invalid_blocks_and_unknown_urls(fake: FakeSlack) -> None:
    answer = Respond(response_url=fake.response_url())(text="t", blocks=[section("x" * 3001)])
    assert (answer.status_code, answer.body) == (400, "invalid_blocks")
    assert fake.events_since(0) == []
    assert http(fake.base_url + "/respond/nope", b"{}")[0] == 404


def test_replace_and_delete_original_act_on_the_message(fake: FakeSlack, client: WebClient) -> None:
    ts = client.chat_postMessage(channel="C1", text="subscribe?")["ts"]
    respond = Respond(response_url=fake.response_url(channel="C1", user="U1", message_ts=ts))
    respond(text="subscribed", replace_original=True)
    assert [m["text"] for m in fake.messages_in("C1")] == ["subscribed"]
    respond(delete_original=True)
    assert fake.messages_in("C1") == []
    flags = [(e.replace_original, e.delete_original, e.ts) for e in fake.events_since(1)]
    assert flags == [(True, False, ts), (False, True, ts)]


# --- failure injection -------------------------------------------------------------------------


def test_rate_limit_then_recovery(fake: FakeSlack, client: WebClient) -> None:
    fake.fail_next("chat.postMessage", retry_after=7)
    with pytest.raises(SlackApiError) as raised:
        client.chat_postMessage(channel="C1", text="hi")
    assert raised.value.response.status_code == 429
    assert raised.value.response["error"] == "ratelimited"
    assert raised.value.response.headers["Retry-After"] == "7"
    assert client.chat_postMessage(channel="C1", text="hi")["ok"] is True
    assert len(fake.calls_to("chat.postMessage")) == 2


def test_errors_can_target_one_user_or_channel(fake: FakeSlack, client: WebClient) -> None:
    fake.fail_next("conversations.open", error="user_not_found", user="U3")
    fake.fail_next("chat.postMessage", 2, error="not_in_channel", channel="C7")
    assert client.conversations_open(users="U4")["ok"] is True
    with pytest.raises(SlackApiError) as raised:
        client.conversations_open(users="U3")
    assert (raised.value.response.status_code, raised.value.response["error"]) == (
        200,
        "user_not_found",
    )
    assert client.conversations_open(users="U3")["ok"] is True  # times=1 is used up

    assert client.chat_postMessage(channel="C1", text="fine")["ok"] is True
    for _ in range(2):
        with pytest.raises(SlackApiError, match="not_in_channel"):
            client.chat_postMessage(channel="C7", text="nope")
    assert client.chat_postMessage(channel="C7", text="now fine")["ok"] is True


def test_disconnect_surfaces_as_connection_error_and_sdk_retry_recovers(
    fake: FakeSlack, client: WebClient
) -> None:
    fake.disconnect_next("chat.postMessage")
    with pytest.raises(ConnectionError):  # http.client.RemoteDisconnected: no status line
        client.chat_postMessage(channel="C1", text="lost")

    fake.disconnect_next("chat.postMessage")
    retry = ConnectionErrorRetryHandler(
        max_retry_count=1, interval_calculator=FixedValueRetryIntervalCalculator(0)
    )
    retrying = WebClient(token="xoxb-test", base_url=fake.api_url, retry_handlers=[retry])
    assert retrying.chat_postMessage(channel="C1", text="kept")["ok"] is True
    assert len(fake.calls_to("chat.postMessage")) == 3
    assert [m["text"] for m in fake.messages_in("C1")] == ["kept"]


# --- waiting and housekeeping ------------------------------------------------------------------


def test_wait_for_wakes_when_another_thread_posts(fake: FakeSlack) -> None:
    waiting = threading.Event()

    def post_once_the_test_waits() -> None:
        waiting.wait(5)
        WebClient(token="xoxb-test", base_url=fake.api_url).chat_postMessage(
            channel="C1", text="late"
        )

    def posted() -> list[dict[str, Any]]:
        waiting.set()  # first check sees nothing, so only a notification can end the wait
        return fake.messages_in("C1")

    worker = threading.Thread(target=post_once_the_test_waits)
    worker.start()
    started = time.monotonic()
    messages = fake.wait_for(posted, timeout=5)
    worker.join()
    assert [m["text"] for m in messages] == ["late"]
    assert time.monotonic() - started < 2.5, "woke by timeout, not by notification"


def test_wait_for_timeout_describes_what_was_recorded(fake: FakeSlack, client: WebClient) -> None:
    client.chat_postMessage(channel="C1", text="not what you wanted")
    with pytest.raises(TimeoutError, match=r"chat\.postMessage.*C1"):
        fake.wait_for(lambda: fake.calls_to("views.publish"), timeout=0.05)


def test_requests_are_not_logged_to_stderr(
    fake: FakeSlack, client: WebClient, capfd: pytest.CaptureFixture[str]
) -> None:
    client.auth_test()
    http(fake.base_url + "/nowhere")
    assert capfd.readouterr().err == ""


def test_stop_closes_the_port(clock: Clock) -> None:
    with FakeSlack(clock=clock) as fake:
        url = fake.api_url
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url + "auth.test", data=b"", timeout=5)


def test_conversations_open_is_rate_limited_like_tier_3(client: WebClient) -> None:
    for n in range(50):
        client.conversations_open(users=f"U{n}")
    with pytest.raises(SlackApiError) as raised:
        client.conversations_open(users="U99")
    assert raised.value.response.status_code == 429
    assert 1 <= int(raised.value.response.headers["Retry-After"]) <= 60


def test_a_trigger_id_expires_after_three_seconds(clock: Clock, client: WebClient) -> None:
    view = {"type": "modal", "title": {"type": "plain_text", "text": "Share"}, "blocks": []}
    fresh = f"{int(clock.now)}.123.abc"
    assert client.views_open(trigger_id=fresh, view=view)["ok"]
    stale = f"{int(clock.now) - 5}.456.def"
    with pytest.raises(SlackApiError, match="expired_trigger_id"):
        client.views_open(trigger_id=stale, view=view)
