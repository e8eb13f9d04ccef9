"""Small English helpers shared by every front end (CLI, Slack, digests)."""

from datetime import datetime


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``"1 paper"``, ``"2 papers"``, ``"1,200 papers"``."""
    return f"{n:,} {noun_for(n, noun, plural)}"


def noun_for(n: int, noun: str, plural: str | None = None) -> str:
    """The noun (or phrase) that goes with ``n``: ``noun_for(2, "paper matches", "papers
    match")`` is ``"papers match"``; for a number shown on its own (in bold, say)."""
    return noun if n == 1 else plural or noun + "s"


def empty_corpus(where: str = "") -> str:
    """The one sentence every front end (CLI, Slack) gives for a lookup over an empty corpus:
    it says what to run, where "No papers match" would blame the query. ``where`` names the
    database for an operator at the command line."""
    place = f" in {where}" if where else ""
    return f"Paperboy has no papers{place} yet: an operator adds them with `paperboy ingest FILE`."


def day_and_time(when: datetime) -> str:
    """ "Thu 3 Dec 09:00": how every message names a day and time (the digest's own header
    says "Thu 3 Dec" too, so no zero-padded day)."""
    return f"{when:%a} {when.day} {when:%b %H:%M}"


def liked(liked_count: int) -> str:
    """Why a paper is recommended, in words: ``like the 3 papers you 👍`` (Slack's note and
    the CLI's preview say it alike)."""
    return f"like {'the paper' if liked_count <= 1 else f'the {liked_count} papers'} you 👍"
