"""The App Home tab as each member's dashboard, through signed requests against the local
Slack stand-in (which checks every published view against Block Kit's limits)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from bot.slack import render
from digest.matching import match_topics
from digest.subscriptions import Subscriptions
from tests.slack_harness import SlackHarness, blocks_text
from tests.surfaces import element, post_payload, view_action

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


def open_home(slack: SlackHarness, user: str = "U1") -> dict[str, Any]:
    """Open the Home tab and return the view published for it (a fresh one)."""
    before = len(slack.fake.calls_to("views.publish"))
    status, _ = slack.event(
        {"type": "app_home_opened", "user": user, "channel": "D1", "tab": "home"}
    )
    assert status == 200
    slack.fake.wait_for(lambda: len(slack.fake.calls_to("views.publish")) > before)
    return slack.fake.home_view(user)


def republished(slack: SlackHarness, user: str, after: int) -> dict[str, Any]:
    """The Home view published after the ``after``-th views.publish call."""
    slack.fake.wait_for(
        lambda: (
            len(
                [c for c in slack.fake.calls_to("views.publish") if c.params.get("user_id") == user]
            )
            > after
        )
    )
    return slack.fake.home_view(user)


def publishes(slack: SlackHarness, user: str) -> int:
    return len([c for c in slack.fake.calls_to("views.publish") if c.params.get("user_id") == user])


def next_digest_text(view: dict[str, Any]) -> str:
    block = next(b for b in view["blocks"] if b.get("block_id") == "home_next")
    return blocks_text({"blocks": [block]})


def use(slack: SlackHarness, view: dict[str, Any], action: dict[str, Any], user: str = "U1") -> int:
    status, _ = post_payload(slack, view_action(view, action, user=user))
    return status


def test_opening_the_home_tab_publishes_the_members_topics_with_match_counts(
    slack: SlackHarness,
) -> None:
    subscriptions = Subscriptions(slack.engine.db)
    for topic in ("graph neural networks", "diffusion models"):
        subscriptions.add_topic("U1", topic, NOW)
    counts = [
        m.count for m in match_topics(slack.engine, ["graph neural networks", "diffusion models"])
    ]
    view = open_home(slack)
    assert view["type"] == "home"
    text = blocks_text(view)
    assert "Your topics* (2 of at most 25)" in text
    assert f"*graph neural networks* · {counts[0]:,} paper" in text
    assert f"*diffusion models* · {counts[1]:,} paper" in text
    assert element(view, "home_remove_topic:1")["value"] == "graph neural networks"
    assert element(view, "home_search")["text"]["text"] == "Search papers"
    assert "/papers subscribe" in text  # the help stays below the dashboard
    # Someone else's Home shows none of it.
    assert "*graph neural networks* ·" not in blocks_text(open_home(slack, "U2"))


def test_remove_removes_the_topic_and_republishes(slack: SlackHarness) -> None:
    subscriptions = Subscriptions(slack.engine.db)
    subscriptions.add_topic("U1", "graph neural networks", NOW)
    subscriptions.add_topic("U1", "diffusion models", NOW)
    view = open_home(slack)
    before = publishes(slack, "U1")
    remove = element(view, "home_remove_topic:1")
    assert use(slack, view, {"type": "button", **remove}) == 200
    view = republished(slack, "U1", before)
    assert [t.query for t in subscriptions.topics("U1")] == ["diffusion models"]
    assert "*graph neural networks* ·" not in blocks_text(view)
    assert "(1 of at most 25)" in blocks_text(view)


def test_a_home_tab_change_that_fails_is_apologised_for_by_dm(slack: SlackHarness) -> None:
    """The Home tab has no conversation to answer in: a Remove or a setting whose work
    fails afterwards (Slack refusing to republish) gets the apology in the member's DM."""
    Subscriptions(slack.engine.db).add_topic("U1", "graph neural networks", NOW)
    view = open_home(slack)
    slack.fake.fail_next("views.publish", error="internal_error")
    use(slack, view, {"type": "button", **element(view, "home_remove_topic:1")})
    (apology,) = slack.fake.wait_for(lambda: slack.fake.messages_in("DU1"))
    assert "Sorry, something went wrong on Paperboy's side" in apology["text"]
    slack.fake.fail_next("views.publish", error="internal_error")
    use(slack, view, {"type": "timepicker", "action_id": "home_time", "selected_time": "07:15"})
    slack.fake.wait_for(lambda: slack.fake.messages_in("DU1")[1:])


def test_the_time_picker_changes_the_next_digest_time_shown(slack: SlackHarness) -> None:
    slack.fake.set_user("U1", tz="Asia/Tokyo")
    Subscriptions(slack.engine.db).add_topic("U1", "graph neural networks", NOW)
    view = open_home(slack)
    assert re.search(
        r"Next digest: \*\w{3} \d\d? \w{3} 09:00\* \(Asia/Tokyo\)", next_digest_text(view)
    )
    before = publishes(slack, "U1")
    assert element(view, "home_time")["initial_time"] == "09:00"
    use(slack, view, {"type": "timepicker", "action_id": "home_time", "selected_time": "07:15"})
    view = republished(slack, "U1", before)
    assert re.search(
        r"Next digest: \*\w{3} \d\d? \w{3} 07:15\* \(Asia/Tokyo\)", next_digest_text(view)
    )
    assert element(view, "home_time")["initial_time"] == "07:15"
    assert Subscriptions(slack.engine.db).member("U1").digest_time == "07:15"


def test_digest_on_off_days_and_destination_are_saved_from_the_home_tab(
    slack: SlackHarness,
) -> None:
    subscriptions = Subscriptions(slack.engine.db)
    subscriptions.add_topic("U1", "graph neural networks", NOW)
    view = open_home(slack)

    def step(action: dict[str, Any]) -> dict[str, Any]:
        before = publishes(slack, "U1")
        use(slack, view, action)
        return republished(slack, "U1", before)

    view = step({"type": "button", "action_id": "home_digest_off", "value": "off"})
    assert "Daily digest: off" in blocks_text(view)
    assert "No digest scheduled" in next_digest_text(view)
    view = step({"type": "button", "action_id": "home_digest_on", "value": "on"})
    assert "Daily digest: on*, by a direct message" in blocks_text(view)
    days = [{"value": "sat", "text": {"type": "plain_text", "text": "Sat"}}]
    view = step({"type": "checkboxes", "action_id": "home_days", "selected_options": days})
    assert subscriptions.member("U1").digest_days == ("sat",)
    assert [o["value"] for o in element(view, "home_days")["initial_options"]] == ["sat"]
    assert "Next digest: *Sat" in next_digest_text(view)
    view = step({"type": "checkboxes", "action_id": "home_days", "selected_options": []})
    assert "Pick at least one day" in blocks_text(view)  # said on the tab, nothing lost
    assert subscriptions.member("U1").digest_days == ("sat",)
    view = step(
        {
            "type": "conversations_select",
            "action_id": "home_channel",
            "selected_conversation": "C42",
        }
    )
    assert "on*, in <#C42>" in blocks_text(view)
    assert element(view, "home_channel")["initial_conversation"] == "C42"
    view = step({"type": "button", "action_id": "home_dm", "value": "dm"})
    assert subscriptions.member("U1").digest_channel is None
    assert "by a direct message" in blocks_text(view)


def test_subscribing_with_papers_republishes_the_home_tab(slack: SlackHarness) -> None:
    open_home(slack)
    before = publishes(slack, "U1")
    _, url = slack.slash("subscribe graph neural networks")
    assert "Subscribed to" in blocks_text(slack.reply(url))
    view = republished(slack, "U1", before)
    assert "*graph neural networks* ·" in blocks_text(view)
    before = publishes(slack, "U1")
    _, url = slack.slash("unsubscribe 1")
    slack.reply(url)
    view = republished(slack, "U1", before)
    assert "*graph neural networks* ·" not in blocks_text(view)


def test_add_a_topic_opens_a_modal_whose_submission_previews_like_subscribe(
    slack: SlackHarness,
) -> None:
    view = open_home(slack)
    use(slack, view, {"type": "button", **element(view, "home_add_topic")})
    (modal,) = slack.fake.wait_for(slack.fake.modals)
    assert modal["callback_id"] == render.ADD_TOPIC_VIEW
    before = publishes(slack, "U1")
    status, ack = slack.submit_view(modal, {"add_topic": "diffusion models"})
    assert status == 200 and ack["response_action"] == "update"
    preview = blocks_text(ack["view"])
    count = match_topics(slack.engine, ["diffusion models"])[0].count
    assert "Subscribed to *diffusion models*" in preview
    assert f"It matches *{count:,}* paper" in preview
    assert "*diffusion models* ·" in blocks_text(republished(slack, "U1", before))
    # A query that cannot be a topic is refused under the box, where it can be fixed.
    for unusable in ("the of", "year:abc graphs"):
        status, ack = slack.submit_view(modal, {"add_topic": unusable})
        assert ack["response_action"] == "errors" and ack["errors"]["add_topic"]
    assert [t.query for t in Subscriptions(slack.engine.db).topics("U1")] == ["diffusion models"]


def test_the_home_tab_tells_how_the_last_digest_went(slack: SlackHarness) -> None:
    slack.fake.set_user("U1", tz="UTC")
    Subscriptions(slack.engine.db).add_topic("U1", "graph neural networks", NOW)
    assert "No digest sent yet." in next_digest_text(open_home(slack))
    before = publishes(slack, "U1")
    _, url = slack.slash("digest now")
    assert "Sent:" in blocks_text(slack.reply(url))
    (post,) = slack.fake.calls_to("chat.postMessage")
    papers = len(re.findall(r"similar:\d+", str(post.params.get("blocks"))))
    view = republished(slack, "U1", before)
    assert re.search(
        rf"Last digest: sent \w{{3}} \d{{1,2}} \w{{3}} \d\d:\d\d, {papers} papers?\.",
        next_digest_text(view),
    )


def test_a_full_home_tab_stays_within_block_kits_limits(slack: SlackHarness) -> None:
    subscriptions = Subscriptions(slack.engine.db)
    for n in range(25):
        subscriptions.add_topic("U1", f"topic{n} " + "learning " * 20, NOW)
    view = open_home(slack)  # the stand-in refuses a view over 100 blocks or 3000 characters
    assert "(25 of at most 25)" in blocks_text(view)
    assert len(view["blocks"]) <= 100
