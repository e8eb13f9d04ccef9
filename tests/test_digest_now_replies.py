"""What ``/papers digest now`` answers when it cannot send at once, over HTTP with the Slack
stand-in (a gap mutation testing found: tests/README.md)."""

from datetime import UTC, datetime

from digest.ledger import Ledger
from digest.plan import DigestItem, DigestPlan, DigestSection
from tests.slack_harness import SlackHarness


def test_digest_now_while_a_digest_is_in_flight_says_it_is_on_its_way(slack: SlackHarness) -> None:
    slack.fake.set_user("U1", tz="UTC")
    _, url = slack.slash("subscribe diffusion models", user="U1")
    assert "Subscribed to" in slack.reply(url)["text"]
    plan = DigestPlan("U1", [DigestSection(1, "diffusion", [DigestItem("p1", 0.5, [], True)])])
    today = datetime.now(UTC)
    claim = Ledger(slack.engine.db, "scheduler").claim(
        f"U1:{today:%Y-%m-%d}", "U1", f"{today:%Y-%m-%d}", plan, today
    )
    assert claim is not None
    _, url = slack.slash("digest now", user="U1")
    answer = slack.reply(url)
    assert answer["text"] == "A digest for you is already on its way; it will be there in a moment."
    assert slack.fake.calls_to("chat.postMessage") == []
