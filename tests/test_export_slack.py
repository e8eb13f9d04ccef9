"""``/papers export bibtex|csv`` through Slack: the reading list uploaded to the member's DM
with files upload v2 (slack_sdk's files_upload_v2 against the stand-in, which checks each
step), parsing back with every saved paper; and the stand-in's upload steps themselves."""

from __future__ import annotations

import csv
import io
import urllib.error
import urllib.request

import bibtexparser
import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.playground.fake_slack import TEAM_ID
from bot.state import state_for
from tests.slack_harness import BOT_TOKEN, SlackHarness


def save_some(slack: SlackHarness, user: str = "U1", n: int = 3) -> list[str]:
    hits = slack.engine.search("diffusion models", limit=n).hits
    store = state_for(slack.engine.db_path)
    for k, hit in enumerate(hits):
        store.toggle_save(user, hit.id, f"2024-03-04T08:0{k}:00+00:00", TEAM_ID)
    return [h.id for h in reversed(hits)]  # newest first


def exported(slack: SlackHarness, channel: str) -> tuple[dict, str]:
    """The message carrying the file in ``channel``, and the file's text."""
    [message] = [m for m in slack.fake.messages_in(channel) if m.get("files")]
    [shared] = message["files"]
    upload = slack.fake.uploaded_file(shared["id"])
    assert upload is not None and upload["channel"] == channel
    return message, upload["data"].decode()


def test_export_bibtex_uploads_the_reading_list_to_the_members_dm(
    slack: SlackHarness, state_backend: str
) -> None:
    saved = save_some(slack)
    _, url = slack.slash("export bibtex", channel="C1")
    answer = slack.reply(url)
    assert answer["response_type"] == "ephemeral"
    assert "Sent 3 saved papers as `paperboy-reading-list.bib`" in answer["text"]
    message, text = exported(slack, "DU1")
    assert message["files"][0]["name"] == "paperboy-reading-list.bib"
    assert "3 saved papers, as BibTeX" in message["text"]
    library = bibtexparser.parse_string(text)
    assert not library.failed_blocks
    ids = [e.fields_dict["note"].value.removeprefix("Paperboy id: ") for e in library.entries]
    assert ids == saved
    assert slack.fake.messages_in("C1") == []  # nothing in the channel it was asked from


def test_export_csv_has_every_saved_paper(slack: SlackHarness) -> None:
    saved = save_some(slack, n=4)
    _, url = slack.slash("export csv")
    slack.reply(url)
    _, text = exported(slack, "DU1")
    assert [row["id"] for row in csv.DictReader(io.StringIO(text))] == saved


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("export", "Say which format"),
        ("export json", "BibTeX or CSV, not `json`"),
        ("export csv", "reading list is empty"),
    ],
)
def test_export_without_a_format_or_papers_says_so_and_uploads_nothing(
    slack: SlackHarness, command: str, expected: str
) -> None:
    _, url = slack.slash(command)
    assert expected in slack.reply(url)["text"]
    assert slack.fake.messages_in("DU1") == []


def test_export_followed_by_other_words_is_a_lookup(slack: SlackHarness) -> None:
    _, url = slack.slash("export control policy")
    assert "Say which format" not in slack.reply(url)["text"]


def test_export_in_a_format_it_does_not_make_names_the_formats(slack: SlackHarness) -> None:
    """``/papers export pdf`` was looked up ("No papers match ... Try: expert pdf")."""
    _, url = slack.slash("export pdf")
    text = slack.reply(url)["text"]
    assert "BibTeX or CSV, not `pdf`" in text and '`/papers "export pdf"`' in text
    assert slack.fake.messages_in("DU1") == []


def test_the_stand_in_refuses_uploads_out_of_order(slack: SlackHarness) -> None:
    client = WebClient(token=BOT_TOKEN, base_url=slack.fake.api_url)
    channel = client.conversations_open(users="U1")["channel"]["id"]
    step = client.files_getUploadURLExternal(filename="a.csv", length=3)
    assert step["upload_url"].startswith("http://127.0.0.1:")
    files = [{"id": step["file_id"], "title": "a"}]
    with pytest.raises(SlackApiError) as early:  # completed before its bytes arrived
        client.files_completeUploadExternal(files=files, channel_id=channel)
    assert early.value.response["error"] == "file_upload_not_complete"
    wrong = urllib.request.Request(step["upload_url"], data=b"toolong", method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(wrong)
    assert refused.value.code == 400
    ok = urllib.request.Request(step["upload_url"], data=b"a,b", method="POST")
    assert urllib.request.urlopen(ok).status == 200
    with pytest.raises(SlackApiError) as nowhere:
        client.files_completeUploadExternal(files=files, channel_id="DU9")
    assert nowhere.value.response["error"] == "channel_not_found"
    done = client.files_completeUploadExternal(files=files, channel_id=channel)
    assert done["files"][0]["id"] == step["file_id"]
    with pytest.raises(SlackApiError) as twice:
        client.files_completeUploadExternal(files=files, channel_id=channel)
    assert twice.value.response["error"] == "file_not_found"
    with pytest.raises(SlackApiError) as empty:
        client.files_getUploadURLExternal(filename="b.csv", length=0)
    assert empty.value.response["error"] == "invalid_arguments"
