"""The feedback state in the store (bot/state): likes, dislikes and saves per member, the
same on SQLite and on a real PostgreSQL server; and the App Home's latest digest read."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.state import StateStore
from digest.ledger import Ledger
from digest.plan import DigestItem, DigestPlan, DigestSection

NOW = datetime(2024, 3, 4, 8, 0, tzinfo=UTC)
#: The SQLite file from before the state store (see tests/test_state.py).
BEFORE_STORE = Path(__file__).parent / "fixtures" / "state" / "main-1d7ce52.db"


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> StateStore:
    if request.param == "sqlite":
        return StateStore(tmp_path / "state.db")
    return StateStore(request.getfixturevalue("postgres_url"))


def plan(user: str, *papers: str) -> DigestPlan:
    return DigestPlan(
        user, [DigestSection(1, "t", [DigestItem(p, 0.5, ["w"], True) for p in papers])]
    )


def test_latest_digest_is_the_members_most_recent_of_any_status(store: StateStore) -> None:
    ledger = Ledger(store, "w")
    assert ledger.latest("U1") is None
    first = ledger.claim("U1:2024-03-04", "U1", "2024-03-04", plan("U1", "p1"), NOW)
    ledger.record_sent(first, "DU1", "1.1", NOW)
    later = NOW + timedelta(days=1)
    second = ledger.claim("U1:2024-03-05", "U1", "2024-03-05", plan("U1", "p2"), later)
    assert ledger.latest("U1")["id"] == "U1:2024-03-05"  # claimed only, still the latest
    ledger.record_failed(second, "user_disabled", later)
    latest = store.latest_digest("U1")
    assert (latest["id"], latest["status"]) == ("U1:2024-03-05", "failed")
    assert store.latest_digest("U2") is None


def test_like_and_dislike_exclude_each_other_and_a_second_click_undoes(store: StateStore) -> None:
    assert store.set_feedback("U1", "p1", "like", "2024-03-04T08:00:00+00:00", "T1") == "like"
    assert store.feedback_of("U1") == {"p1": "like"}
    assert store.set_feedback("U1", "p1", "dislike", "2024-03-04T08:01:00+00:00") == "dislike"
    assert store.feedback_of("U1") == {"p1": "dislike"}
    assert store.set_feedback("U1", "p1", "dislike", "2024-03-04T08:02:00+00:00") is None
    assert store.feedback_of("U1") == {}
    store.set_feedback("U1", "p2", "like", "2024-03-04T08:03:00+00:00")
    store.set_feedback("U2", "p2", "dislike", "2024-03-04T08:03:00+00:00")
    assert store.feedback_of("U1") == {"p2": "like"}  # per member
    assert store.feedback_of("U2") == {"p2": "dislike"}
    with pytest.raises(ValueError):
        store.set_feedback("U1", "p3", "love", "2024-03-04T08:04:00+00:00")


def test_a_click_that_says_what_it_wants_never_undoes_by_accident(store: StateStore) -> None:
    """``on=True`` (a button that showed 👍, not "👍 Liked") keeps a like; ``on=False`` takes
    away only what the paper had."""
    t = "2024-03-04T08:00:00+00:00"
    assert store.set_feedback("U1", "p1", "like", t, "T1", on=True) == "like"
    assert store.set_feedback("U1", "p1", "like", t, "T1", on=True) == "like"
    assert store.feedback_of("U1") == {"p1": "like"}
    assert store.set_feedback("U1", "p1", "dislike", t, "T1", on=False) == "like"  # not 👎-ed
    assert store.feedback_of("U1") == {"p1": "like"}
    assert store.set_feedback("U1", "p1", "dislike", t, "T1", on=True) == "dislike"
    assert store.set_feedback("U1", "p1", "dislike", t, "T1", on=False) is None
    assert store.set_feedback("U1", "p1", "dislike", t, "T1", on=False) is None
    assert store.feedback_of("U1") == {}
    assert store.toggle_save("U1", "p1", t, "T1", on=True) is True
    assert store.toggle_save("U1", "p1", t, "T1", on=True) is True  # still saved
    assert [r["paper_id"] for r in store.saved_papers("U1", team_id="T1")[0]] == ["p1"]
    assert store.toggle_save("U1", "p1", t, "T1", on=False) is False
    assert store.toggle_save("U1", "p1", t, "T1", on=False) is False
    assert store.saved_papers("U1", team_id="T1")[1] == 0


def test_saves_toggle_page_newest_first_and_are_counted_for_others(store: StateStore) -> None:
    for n in range(1, 6):
        assert store.toggle_save("U1", f"p{n}", f"2024-03-04T08:0{n}:00+00:00", "T1") is True
    assert store.toggle_save("U1", "p3", "2024-03-04T09:00:00+00:00") is False  # undone
    page, total = store.saved_papers("U1", limit=2)
    assert total == 4 and [r["paper_id"] for r in page] == ["p5", "p4"]
    page, _ = store.saved_papers("U1", limit=2, offset=2)
    assert [r["paper_id"] for r in page] == ["p2", "p1"]
    assert store.saved_papers("U9") == ([], 0)
    store.set_feedback("U1", "p1", "like", "2024-03-04T10:00:00+00:00")
    assert store.feedback_on("U1", ["p1", "p2", "p3"]) == {
        "p1": {"kind": "like", "saved": True},
        "p2": {"kind": None, "saved": True},
    }
    store.toggle_save("U2", "p1", "2024-03-04T10:00:00+00:00", "T1")
    store.toggle_save("U3", "p1", "2024-03-04T10:00:00+00:00", "T1")
    store.toggle_save("U3", "p2", "2024-03-04T10:00:00+00:00", "T1")
    store.toggle_save("U4", "p1", "2024-03-04T10:00:00+00:00", "T2")  # another workspace
    assert store.saved_by_others("U1", ["p1", "p2", "p4"]) == {"p1": 2, "p2": 1}
    assert store.saved_by_others("U3", ["p1"]) == {"p1": 2}  # U1 and U2, never U3 itself


def test_feedback_is_copied_by_migrate_state(store: StateStore, tmp_path: Path) -> None:
    store.set_feedback("U1", "p1", "like", "2024-03-04T08:00:00+00:00")
    store.toggle_save("U1", "p1", "2024-03-04T08:00:00+00:00")
    target = StateStore(tmp_path / "copy.db")
    counts = store.copy_to(target)
    assert (counts["feedback"], counts["saves"]) == (1, 1)
    assert target.feedback_of("U1") == {"p1": "like"}
    assert target.saved_papers("U1")[1] == 1


def test_a_read_only_file_from_before_the_feedback_tables_has_no_feedback(tmp_path: Path) -> None:
    """A SQLite file this process may only read, made before revision s002: it is served as
    it is (not written), and every member simply has no 👍/👎 or saved papers yet."""
    path = tmp_path / "old.db"
    path.write_bytes(BEFORE_STORE.read_bytes())
    before = path.read_bytes()
    store = StateStore(path, read_only=True)
    assert store.revision() == "s001"
    assert store.feedback_of("U1") == {} and store.saved_papers("U1") == ([], 0)
    assert store.feedback_on("U1", ["p1"]) == {} and store.saved_by_others("U1", ["p1"]) == {}
    assert path.read_bytes() == before
