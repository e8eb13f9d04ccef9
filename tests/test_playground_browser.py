"""The playground page in a real (headless) Chromium: type a lookup, see results, page with
"More results", share a paper, get a digest in the Paperboy DM and share from it through the
channel picker, and nothing a query contains can inject HTML."""

from __future__ import annotations

import re
from pathlib import Path

from bot.playground.playground import USER_ID, Playground
from tests.playground_page import needs_chromium, send

pytestmark = needs_chromium


def test_lookup_more_and_share_in_the_browser(page, playground: Playground, tmp_path: Path) -> None:
    expected = playground.engine.search("language models", limit=10)
    page.locator(".banner").filter(has_text="SLACK_BOT_TOKEN").wait_for()

    send(page, "/papers language models")
    answer = page.locator(".msg.ephemeral", has_text="papers match").first
    answer.wait_for()
    assert "showing 1–5" in answer.inner_text()
    assert answer.locator("b", has_text="models").count() > 0  # matched terms in bold
    assert answer.locator("button", has_text="Similar papers").count() == 5

    answer.locator("button", has_text="More results").click()
    page.locator(".msg.ephemeral", has_text="showing 6–10").wait_for()
    # Replaced in place: still one answer, now the second page.
    assert page.locator(".msg.ephemeral", has_text="papers match").count() == 1
    second = expected.hits[5].paper["id"]
    page.locator(".msg.ephemeral code", has_text=second).wait_for()

    # For a person checking the page by eye (pytest keeps the last runs' tmp dirs).
    page.screenshot(path=str(tmp_path / "playground.png"), full_page=False, animations="disabled")

    page.locator(".msg.ephemeral button", has_text="Share to channel").first.click()
    shared = page.locator(".msg:not(.ephemeral)", has_text="shared a paper")
    shared.wait_for()
    assert "@you shared a paper" in shared.inner_text()


def test_queries_cannot_inject_html(page) -> None:
    send(page, '/papers <img src=x onerror="window.pwned=1"> <!channel> models')
    page.locator(".msg.ephemeral", has_text="papers match").first.wait_for()
    assert page.locator("#messages img").count() == 0
    assert page.evaluate("window.pwned === undefined")
    assert page.locator(".msg.ephemeral .mention").count() == 0  # <!channel> shown as text
    assert "<!channel>" in page.locator(".msg.ephemeral").first.inner_text()


def test_help_and_unknown_commands(page) -> None:
    send(page, "/papers help")
    page.locator(".msg.ephemeral .block.header", has_text="Paperboy").wait_for()
    send(page, "hello there")
    page.locator(".msg", has_text="Only the /papers command is wired up here").wait_for()


def test_digest_arrives_in_the_paperboy_dm_and_shares_through_the_picker(
    page, playground: Playground, tmp_path: Path
) -> None:
    send(page, "/papers subscribe graph neural networks")
    page.locator(".msg.ephemeral", has_text="Subscribed to").wait_for()
    send(page, "/papers digest now")
    page.locator(".msg.ephemeral", has_text="Sent:").wait_for()

    dm = page.locator("nav button.room", has_text="Paperboy")
    dm.locator(".badge", has_text="1").wait_for()  # unread, as in Slack's sidebar
    dm.click()
    page.locator("#room-title", has_text="Paperboy").wait_for()
    digest = page.locator(".msg:not(.ephemeral)", has_text="Your paper digest")
    digest.wait_for()
    assert digest.locator(".block.header").inner_text().startswith("Your paper digest")
    assert digest.locator("b", has_text="graph neural networks").count() >= 1  # the topic
    shares = digest.locator("button", has_text="Share to channel")
    assert (
        shares.count() >= 2
        and shares.count() == digest.locator("button", has_text="Similar papers").count()
    )
    page.screenshot(path=str(tmp_path / "digest.png"), full_page=False, animations="disabled")

    digest.locator("button", has_text="Similar papers").first.click()
    page.locator(".msg.ephemeral", has_text="Papers similar to").wait_for()

    shares.nth(1).click()
    dialog = page.get_by_role("dialog", name="Share a paper")
    dialog.wait_for()
    assert dialog.locator("select option", has_text="Paperboy").count() == 0  # channels only
    dialog.locator("button.submit").click()
    dialog.locator(".input-error", has_text="required").wait_for()  # nothing sent yet
    assert not playground.fake.calls_to("chat.postMessage")[1:]
    dialog.locator("select").select_option(label="# reading-group")
    dialog.locator("textarea").fill("For Thursday <b>&</b> @here")
    dialog.locator("button.submit").click()
    dialog.locator(".block.section", has_text="Shared in #reading-group").wait_for()
    dialog.locator("button", has_text="Done").click()
    assert page.get_by_role("dialog").count() == 0

    page.locator("nav button.room", has_text="reading-group").click()
    shared = page.locator(".msg:not(.ephemeral)", has_text="shared a paper")
    shared.wait_for()
    assert "@you shared a paper" in shared.inner_text()
    quote = shared.locator("blockquote", has_text="For Thursday <b>&</b>")
    assert quote.inner_text() == "For Thursday <b>&</b> @\u2060here"  # no broadcast either
    assert shared.locator("b", has_text="&").count() == 0  # the comment's markup stays text
    # Nothing went back into the DM but the digest (and the ephemeral similar list).
    assert len(playground.fake.messages_in("D" + USER_ID)) == 1


def test_a_digest_in_a_channel_says_whose_it_is_and_draws_every_emoji(page) -> None:
    send(page, "/papers @channel")  # a mention is no search term: the empty query's help
    page.locator(".msg.ephemeral .block.header", has_text="Paperboy").wait_for()
    send(page, "/papers subscribe graph neural networks")
    page.locator(".msg.ephemeral", has_text="Subscribed to").wait_for()
    send(page, "/papers digest channel #reading-group")
    page.locator(".msg.ephemeral", has_text="Everyone in the channel").wait_for()
    send(page, "/papers digest now")
    page.locator(".msg.ephemeral", has_text="Sent:").wait_for()

    page.locator("nav button.room", has_text="reading-group").click()
    digest = page.locator(".msg:not(.ephemeral)", has_text="Paper digest for")
    digest.wait_for()
    assert (
        digest.locator(".block.section").first.inner_text().startswith("Paper digest for @you · ")
    )
    assert digest.locator("button", has_text="Share elsewhere").count() >= 1
    assert digest.locator("button", has_text="Share to channel").count() == 0
    assert "🏷️" in digest.inner_text()
    page.locator("nav button.room", has_text="general").click()
    page.locator(".msg.ephemeral", has_text="Sent:").wait_for()
    shown = page.locator("#messages").inner_text()
    assert "📨" in shown
    assert not re.findall(r":[a-z_]+:", shown), "an emoji code the page did not draw"


def test_the_page_loads_without_a_failed_request(browser, playground: Playground) -> None:
    """A newcomer's first look (devtools open) shows no 404: the browser's favicon request
    was one, on every load."""
    context = browser.new_context()
    try:
        page = context.new_page()
        failed: list[str] = []
        page.on(
            "response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None
        )
        page.on("console", lambda m: failed.append(m.text) if m.type == "error" else None)
        page.goto(playground.url)
        page.locator("#channel-list .room").first.wait_for()
        page.wait_for_load_state("networkidle")
        assert failed == []
    finally:
        context.close()
