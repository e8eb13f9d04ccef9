"""Paperboy's Slack messages in Block Kit: the one place that knows Slack's markup and limits.

Split along its seams, each module with one job:

* ``escaping`` — text made inert in mrkdwn (no pings, no disguised links) and cut to fit;
* ``blocks`` — sections, context lines, buttons and their values, the message dict, within
  Slack's limits;
* ``lookup`` — the answers to lookups (a page of results, similar papers, a shared paper);
* ``digest`` — a digest as a message (``bot.slack.poster`` posts it);
* ``modals`` — the "Share to channel" picker;
* ``notices`` — problems, apologies, a read-only database, an empty corpus;
* ``help`` — ``/papers help`` and the App Home, written from ``bot.help_text``;
* ``home`` — the App Home as the member's dashboard (topics, digest controls, search);
* ``feedback`` — 👍/👎/Save under each paper and how a click shows; ``saved`` — the
  reading list (``/papers saved``);
* ``recommend`` — ``/papers recommend`` and why a paper is recommended;
* ``search_modal`` — the "Search papers" modal and the Home tab's "Add a topic" modal.

Listeners use them through this package (``render.search_message`` ...), which re-exports
each module's public names.
"""

from __future__ import annotations

from .blocks import (
    MAX_BLOCKS,
    MAX_BUTTON_LABEL,
    MAX_BUTTON_VALUE,
    MAX_CONTEXT_ELEMENTS,
    MAX_FALLBACK_TEXT,
    MAX_HEADER,
    MAX_SECTION_TEXT,
    as_message,
    button,
    context,
    decode_value,
    encode_value,
    mrkdwn,
    section,
    sections,
)
from .escaping import (
    clip,
    clip_escaped,
    clip_mrkdwn,
    escape,
    escape_plain,
    link,
    mention,
    one_line,
    short_authors,
    snippet_mrkdwn,
    unescape,
)
from .feedback import (
    ACTION_DISLIKE,
    ACTION_LIKE,
    ACTION_SAVE,
    feedback_buttons,
    feedback_note,
    with_choice,
)
from .help import DIGEST_USAGE, HELP_HINT, HELP_SECTIONS, help_message
from .home import (
    HOME_ADD_TOPIC,
    HOME_CHANNEL,
    HOME_DAYS,
    HOME_DIGEST_OFF,
    HOME_DIGEST_ON,
    HOME_DM,
    HOME_RECOMMENDED_BLOCK,
    HOME_REMOVE_TOPIC,
    HOME_SAVED_BLOCK,
    HOME_SEARCH,
    HOME_SHOWN,
    HOME_TEAM_SAVES,
    HOME_TIME,
    home_dashboard,
    last_digest_line,
)
from .lookup import (
    ACTION_MORE,
    ACTION_PREVIOUS,
    ACTION_SHARE,
    ACTION_SHARE_ELSEWHERE,
    ACTION_SIMILAR,
    ACTION_SUGGEST,
    PAGE_SIZE,
    paper_blocks,
    paper_buttons,
    paper_meta,
    paper_texts,
    paper_title,
    search_message,
    shared_message,
    similar_message,
)
from .modals import (
    COMMENT_CHARS,
    SHARE_CHANNEL_ACTION,
    SHARE_CHANNEL_BLOCK,
    SHARE_COMMENT_ACTION,
    SHARE_COMMENT_BLOCK,
    SHARE_VIEW,
    share_view,
    shared_view,
)
from .notices import (
    READ_ONLY,
    apology_message,
    empty_corpus_message,
    error_message,
    read_only_message,
)
from .recommend import liked_note, recommend_message, with_notes
from .saved import (
    ACTION_SAVED_NEXT,
    ACTION_SAVED_PREVIOUS,
    SAVED_PAGE_SIZE,
    saved_message,
)
from .search_modal import (
    ADD_TOPIC_ACTION,
    ADD_TOPIC_BLOCK,
    ADD_TOPIC_VIEW,
    SEARCH_NEXT,
    SEARCH_PREVIOUS,
    SEARCH_QUERY_ACTION,
    SEARCH_QUERY_BLOCK,
    SEARCH_VIEW,
    add_topic_view,
    search_view,
    topic_added_view,
)

__all__ = [
    "ACTION_SAVED_NEXT",
    "ACTION_SAVED_PREVIOUS",
    "SAVED_PAGE_SIZE",
    "saved_message",
    "ACTION_DISLIKE",
    "ACTION_LIKE",
    "ACTION_SAVE",
    "feedback_buttons",
    "feedback_note",
    "with_choice",
    "HOME_ADD_TOPIC",
    "HOME_CHANNEL",
    "HOME_DAYS",
    "HOME_DIGEST_OFF",
    "HOME_DIGEST_ON",
    "HOME_DM",
    "HOME_RECOMMENDED_BLOCK",
    "HOME_REMOVE_TOPIC",
    "HOME_SAVED_BLOCK",
    "HOME_SHOWN",
    "HOME_TEAM_SAVES",
    "HOME_SEARCH",
    "HOME_TIME",
    "home_dashboard",
    "last_digest_line",
    "liked_note",
    "recommend_message",
    "with_notes",
    "ADD_TOPIC_ACTION",
    "ADD_TOPIC_BLOCK",
    "ADD_TOPIC_VIEW",
    "SEARCH_NEXT",
    "SEARCH_PREVIOUS",
    "SEARCH_QUERY_ACTION",
    "SEARCH_QUERY_BLOCK",
    "SEARCH_VIEW",
    "add_topic_view",
    "search_view",
    "topic_added_view",
    "ACTION_MORE",
    "ACTION_PREVIOUS",
    "ACTION_SHARE",
    "ACTION_SHARE_ELSEWHERE",
    "ACTION_SIMILAR",
    "ACTION_SUGGEST",
    "COMMENT_CHARS",
    "DIGEST_USAGE",
    "HELP_HINT",
    "HELP_SECTIONS",
    "MAX_BLOCKS",
    "MAX_BUTTON_LABEL",
    "MAX_BUTTON_VALUE",
    "MAX_CONTEXT_ELEMENTS",
    "MAX_FALLBACK_TEXT",
    "MAX_HEADER",
    "MAX_SECTION_TEXT",
    "PAGE_SIZE",
    "READ_ONLY",
    "SHARE_CHANNEL_ACTION",
    "SHARE_CHANNEL_BLOCK",
    "SHARE_COMMENT_ACTION",
    "SHARE_COMMENT_BLOCK",
    "SHARE_VIEW",
    "apology_message",
    "as_message",
    "button",
    "clip",
    "clip_escaped",
    "clip_mrkdwn",
    "context",
    "decode_value",
    "empty_corpus_message",
    "encode_value",
    "error_message",
    "escape",
    "escape_plain",
    "help_message",
    "link",
    "mention",
    "mrkdwn",
    "one_line",
    "paper_blocks",
    "paper_buttons",
    "paper_meta",
    "paper_texts",
    "paper_title",
    "read_only_message",
    "search_message",
    "section",
    "sections",
    "share_view",
    "shared_message",
    "shared_view",
    "short_authors",
    "similar_message",
    "snippet_mrkdwn",
    "unescape",
]
