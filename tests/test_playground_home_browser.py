"""The playground page's App Home tab, shortcuts and search modal in a real (headless)
Chromium: the Home tab lists your topics and changes your digest, "Search papers" (⚡ and
the Home tab's button) opens the modal that answers and pages in itself, "Find papers about
this message" answers privately, and @Paperboy and the Paperboy DM answer queries."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.playground.playground import USER_ID, Playground
from bot.state import state_for
from digest.subscriptions import Subscriptions
from tests.playground_page import needs_chromium, send

pytestmark = needs_chromium


@pytest.fixture
def playground_options() -> dict[str, Any]:
    return {"tick_seconds": None}  # no digest scheduler running beside the clicks


def test_the_home_tab_lists_topics_removes_them_and_sets_the_digest_time(
    page, playground: Playground, tmp_path: Path
) -> None:
    send(page, "/papers subscribe graph neural networks")
    page.locator(".msg.ephemeral", has_text="Subscribed to").wait_for()
    page.locator(".room", has_text="Home").click()
    home = page.locator(".home-view")
    home.locator(".block", has_text="graph neural networks ·").wait_for()
    assert page.locator("#composer").is_hidden()
    page.screenshot(path=str(tmp_path / "home.png"), animations="disabled")

    page.locator('input[type="time"]').fill("07:15")
    home.locator(".block", has_text="07:15").wait_for()  # the next digest, at the new time
    assert Subscriptions(playground.engine.db).member(USER_ID).digest_time == "07:15"

    home.locator(".block", has_text="graph neural networks ·").locator(
        "button", has_text="Remove"
    ).click()
    home.locator(".block", has_text="(0 of at most 25)").wait_for()
    assert Subscriptions(playground.engine.db).topics(USER_ID) == []


def test_search_papers_opens_the_modal_which_answers_and_pages_in_itself(
    page, playground: Playground
) -> None:
    expected = playground.engine.search("language models", limit=10).hits
    page.locator("#shortcuts").click()
    page.locator("[data-shortcut=search_papers]").click()
    modal = page.locator(".modal")
    modal.locator("h2", has_text="Search papers").wait_for()
    modal.locator("input").fill("language models")
    modal.locator("button.submit").click()
    modal.locator("text=showing 1–5").wait_for()
    modal.locator("code", has_text=expected[0].paper["id"]).wait_for()
    modal.locator("button", has_text="Next").click()
    page.locator(".modal", has_text="showing 6–10").wait_for()
    page.locator(".modal code", has_text=expected[5].paper["id"]).wait_for()
    page.locator(".modal button", has_text="Previous").click()
    page.locator(".modal", has_text="showing 1–5").wait_for()
    page.locator(".modal .close-x").click()

    page.locator(".room", has_text="Home").click()
    page.locator(".home-view button", has_text="Search papers").click()
    page.locator(".modal h2", has_text="Search papers").wait_for()


def test_save_in_the_search_modal_marks_the_paper_and_a_second_click_unsaves_it(
    page, playground: Playground
) -> None:
    """The modal as Slack keeps it after a submit's ``response_action: update``: a click on
    a result's Save is stored, the modal redrawn with its results and "✓ Saved", and a
    click on "✓ Saved" (its label sent with the click, as Slack does) takes the save back."""
    store = state_for(playground.engine.db_path)
    first = playground.engine.search("language models", limit=5).hits[0].paper["id"]
    page.locator("#shortcuts").click()
    page.locator("[data-shortcut=search_papers]").click()
    modal = page.locator(".modal")
    modal.locator("input").fill("language models")
    modal.locator("button.submit").click()
    modal.locator("text=showing 1–5").wait_for()
    modal.locator("button", has_text="Save").first.click()
    page.locator(".modal button", has_text="✓ Saved").wait_for()
    page.locator(".modal", has_text="showing 1–5").wait_for()  # the results are still there
    assert [p["paper_id"] for p in store.saved_papers(USER_ID)[0]] == [first]
    page.locator(".modal button", has_text="✓ Saved").click()
    page.locator(".modal button", has_text="✓ Saved").wait_for(state="detached")
    assert store.saved_papers(USER_ID)[1] == 0


def test_find_papers_about_a_message_mentions_and_the_dm(page) -> None:
    send(page, "@Paperboy graph neural networks")
    answer = page.locator(".msg:not(.ephemeral)", has_text="papers match").first
    answer.wait_for()
    assert "graph neural networks" in answer.inner_text()

    mine = page.locator(".msg", has_text="@Paperboy graph neural networks").first
    mine.hover()
    mine.locator("button.find-papers").click()
    page.locator(".msg.ephemeral", has_text="papers match").first.wait_for()

    page.locator(".room", has_text="● Paperboy").click()
    send(page, "diffusion models")
    page.locator(".msg", has_text="match “diffusion models”").first.wait_for()
