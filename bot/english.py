"""Small English helpers shared by every front end (CLI, Slack, digests)."""


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``"1 paper"``, ``"2 papers"``, ``"1,200 papers"``."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"
