"""The digest ledger's promises through its public methods (``Ledger``), on a real SQLite file:
what a claim leaves out, what the record says and when, old claims, and many ids at once.

Each test here was written against a change to ``digest/ledger.py`` that the rest of the
suite let through (mutation testing, tests/README.md)."""

import json
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from bot.engine.search import Engine
from digest.ledger import STALE_CLAIM, Ledger
from digest.plan import DigestItem, DigestPlan, DigestSection
from digest.subscriptions import to_iso

T0 = datetime(2024, 3, 4, 8, 0, tzinfo=UTC)


@pytest.fixture
def engine(tmp_path: Path) -> Engine:
    return Engine.open(tmp_path / "d.db")


def plan(user: str, *paper_ids: str) -> DigestPlan:
    items = [DigestItem(p, 0.5, ["graph"], new=True) for p in paper_ids]
    return DigestPlan(user, [DigestSection(1, "graph", items)] if items else [])


def sent_rows(engine: Engine, user: str) -> list[tuple]:
    return engine.db.execute(
        "select paper_id, digest_id, sent_at from sent_papers where user_id = ? order by paper_id",
        [user],
    ).fetchall()


def test_papers_sent_since_the_plan_was_made_are_left_out_of_the_claim(engine) -> None:
    """Two processes plan from the same state; the one that claims second must not send again
    what the first has sent meanwhile (only the member's own sent papers count)."""
    ledger = Ledger(engine.db, "w")
    first = ledger.claim("U1:2024-03-04", "U1", "2024-03-04", plan("U1", "p1", "p2"), T0)
    ledger.record_sent(first, "DU1", "1.0", T0)
    second = ledger.claim("U1:2024-03-05", "U1", "2024-03-05", plan("U1", "p1", "p3"), T0)
    assert second is not None and second.plan.paper_ids == ["p3"]
    assert json.loads(ledger.get("U1:2024-03-05")["paper_ids"]) == ["p3"]
    other = ledger.claim("U2:2024-03-04", "U2", "2024-03-04", plan("U2", "p1", "p2"), T0)
    assert other is not None and other.plan.paper_ids == ["p1", "p2"]


def test_a_claim_whose_papers_were_all_sent_meanwhile_is_skipped_for_the_day(engine) -> None:
    ledger = Ledger(engine.db, "w")
    ledger.record_sent(
        ledger.claim("U1:2024-03-04", "U1", "2024-03-04", plan("U1", "p1"), T0), "DU1", "1", T0
    )
    later = T0 + timedelta(hours=1)
    assert ledger.claim("U1:2024-03-05", "U1", "2024-03-05", plan("U1", "p1"), later) is None
    row = ledger.get("U1:2024-03-05")
    assert (row["status"], row["finished_at"], json.loads(row["paper_ids"])) == (
        "skipped",
        to_iso(later),
        [],
    )
    fuller = plan("U1", "p1", "p2")
    assert ledger.claim("U1:2024-03-05", "U1", "2024-03-05", fuller, later) is None  # done today


def test_an_empty_plan_is_skipped_and_not_asked_for_again(engine) -> None:
    ledger = Ledger(engine.db, "w")
    assert ledger.claim("U1:2024-03-04", "U1", "2024-03-04", plan("U1"), T0) is None
    assert ledger.get("U1:2024-03-04")["status"] == "skipped"
    assert ledger.existing(["U1:2024-03-04", "U1:2024-03-05"]) == {"U1:2024-03-04"}


def test_digest_now_with_every_paper_sent_meanwhile_writes_nothing(engine) -> None:
    ledger = Ledger(engine.db, "w")
    claim, status = ledger.claim_now("U1", "2024-03-04T08:00", plan("U1", "p1"), T0)
    assert status == "claimed" and claim.plan.paper_ids == ["p1"]
    ledger.record_sent(claim, "DU1", "1", T0)
    again = ledger.claim_now("U1", "2024-03-04T08:00", plan("U1", "p1"), T0)
    assert again == (None, "skipped")
    assert ledger.existing(["U1:2024-03-04T08:00#1", "U1:2024-03-04T08:00#2"]) == {
        "U1:2024-03-04T08:00#1"
    }
    claim, _ = ledger.claim_now("U1", "2024-03-04T08:00", plan("U1", "p1", "p2"), T0)
    assert (claim.digest_id, claim.plan.paper_ids) == ("U1:2024-03-04T08:00#2", ["p2"])


def test_one_members_digest_in_flight_does_not_hold_up_anothers(engine) -> None:
    ledger = Ledger(engine.db, "w")
    assert ledger.claim("U1:2024-03-04", "U1", "2024-03-04", plan("U1", "p1"), T0)
    assert ledger.claim_now("U1", "2024-03-04T08:00", plan("U1", "p2"), T0) == (None, "busy")
    assert ledger.claim_now("U2", "2024-03-04T08:00", plan("U2", "p2"), T0)[1] == "claimed"
    assert ledger.claim("U3:2024-03-04", "U3", "2024-03-04", plan("U3", "p1"), T0) is not None


def test_a_stale_claim_in_flight_no_longer_holds_up_the_member(engine) -> None:
    ledger = Ledger(engine.db, "w")
    ledger.claim("U1:2024-03-04", "U1", "2024-03-04", plan("U1", "p1"), T0)
    just_fresh = T0 + STALE_CLAIM
    assert ledger.claim_now("U1", "2024-03-04T08:10", plan("U1", "p2"), just_fresh)[1] == "busy"
    stale = just_fresh + timedelta(seconds=1)
    assert ledger.claim_now("U1", "2024-03-04T08:10", plan("U1", "p2"), stale)[1] == "claimed"


def test_an_on_demand_digest_keeps_the_time_of_its_first_claim_when_retaken(engine) -> None:
    """The grace period counts from the first claim, not from the retake after a crash."""
    grace = timedelta(minutes=30)
    claim, _ = Ledger(engine.db, "dead").claim_now("U1", "2024-03-04T08:00", plan("U1", "p1"), T0)
    assert claim.first_claimed_at == to_iso(T0)
    later = T0 + STALE_CLAIM + timedelta(minutes=1)
    [retaken] = Ledger(engine.db, "alive").retake_stale(later)
    assert retaken.retaken and retaken.digest_id == claim.digest_id
    assert retaken.first_claimed_at == to_iso(T0)
    assert retaken.plan == claim.plan
    ledger = Ledger(engine.db, "alive")
    assert not ledger.expired(retaken, T0 + grace, grace)
    assert ledger.expired(retaken, T0 + grace + timedelta(seconds=1), grace)


def test_a_scheduled_claim_keeps_the_time_of_its_first_claim_when_retaken(engine) -> None:
    first = Ledger(engine.db, "dead").claim(
        "U1:2024-03-04", "U1", "2024-03-04", plan("U1", "p1"), T0
    )
    assert first.first_claimed_at == to_iso(T0)
    at_the_bar = T0 + STALE_CLAIM  # not stale yet: older than STALE_CLAIM is
    other = Ledger(engine.db, "other")
    assert other.claim("U1:2024-03-04", "U1", "2024-03-04", plan("U1", "p1"), at_the_bar) is None
    later = T0 + STALE_CLAIM + timedelta(minutes=5)
    retaken = Ledger(engine.db, "alive").claim(
        "U1:2024-03-04", "U1", "2024-03-04", plan("U1", "p2"), later
    )
    assert retaken.retaken and retaken.first_claimed_at == to_iso(T0)
    assert retaken.plan.paper_ids == ["p1"]  # what was chosen first, not the new plan
    assert Ledger(engine.db, "other").retake_stale(later) == []  # fresh again


def test_a_claim_written_before_digests_kept_their_content_is_retaken_from_now(engine) -> None:
    """A row from before the ``content`` column (migration m004): no plan, no first claim."""
    engine.db.execute(
        "insert into digests (id, user_id, local_date, status, claimed_by, claimed_at, channel) "
        "values ('U1:2024-03-04', 'U1', '2024-03-04', 'claimed', 'old', ?, 'DU1')",
        [to_iso(T0 - timedelta(days=1))],
    )
    engine.db.conn.commit()
    [retaken] = Ledger(engine.db, "new").retake_stale(T0)
    assert (retaken.user_id, retaken.local_date, retaken.channel) == ("U1", "2024-03-04", "DU1")
    assert retaken.plan == DigestPlan("U1")
    assert retaken.first_claimed_at == to_iso(T0)


def test_sent_records_when_where_and_which_papers_and_only_once(engine) -> None:
    ledger = Ledger(engine.db, "w")
    claim = ledger.claim("U1:2024-03-04", "U1", "2024-03-04", plan("U1", "p2", "p1"), T0)
    in_flight = ledger.get("U1:2024-03-04")
    assert (in_flight["status"], in_flight["finished_at"], in_flight["ts"]) == (
        "claimed",
        None,
        None,
    )
    at = T0 + timedelta(minutes=2)
    ledger.record_sent(claim, "DU1", "123.4", at)
    row = ledger.get("U1:2024-03-04")
    assert (row["status"], row["channel"], row["ts"], row["finished_at"], row["error"]) == (
        "sent",
        "DU1",
        "123.4",
        to_iso(at),
        None,
    )
    assert json.loads(row["paper_ids"]) == ["p2", "p1"]
    assert sent_rows(engine, "U1") == [
        ("p1", "U1:2024-03-04", to_iso(at)),
        ("p2", "U1:2024-03-04", to_iso(at)),
    ]
    ledger.record_failed(claim, "channel_not_found", at + timedelta(minutes=1))
    ledger.record_sent(claim, "DU9", "9.9", at + timedelta(minutes=1))
    assert ledger.get("U1:2024-03-04") == row  # sent is final


def test_failed_records_the_error_and_when_and_the_papers_stay_unsent(engine) -> None:
    ledger = Ledger(engine.db, "w")
    claim = ledger.claim("U1:2024-03-04", "U1", "2024-03-04", plan("U1", "p1"), T0)
    at = T0 + timedelta(minutes=3)
    ledger.record_failed(claim, "account_inactive", at)
    row = ledger.get("U1:2024-03-04")
    assert (row["status"], row["error"], row["finished_at"]) == (
        "failed",
        "account_inactive",
        to_iso(at),
    )
    assert sent_rows(engine, "U1") == []
    assert ledger.claim("U1:2024-03-05", "U1", "2024-03-05", plan("U1", "p1"), at).plan.size == 1


def test_an_unknown_digest_has_no_row(engine) -> None:
    ledger = Ledger(engine.db, "w")
    assert ledger.get("U1:2024-03-04") is None
    ledger.claim("U1:2024-03-04", "U1", "2024-03-04", plan("U1", "p1"), T0)
    assert ledger.get("U1:2024-03-05") is None
    assert ledger.get("U1:2024-03-04")["id"] == "U1:2024-03-04"


def test_which_of_many_thousand_digests_exist(engine) -> None:
    """More ids than one SQL statement may carry (SQLite allows 32,766 variables)."""
    ledger = Ledger(engine.db, "w")
    known = [0, 4999, 5000, 10_001, 39_999]
    ids = [f"U{n}:2024-03-04" for n in range(40_000)]
    for n in known:
        ledger.claim(ids[n], f"U{n}", "2024-03-04", plan(f"U{n}"), T0)
    assert ledger.existing(ids) == {ids[n] for n in known}
    assert ledger.existing(iter(ids[4990:5010])) == {ids[4999], ids[5000]}
    assert ledger.existing([]) == set()


def test_renew_keeps_the_channel_it_knows_and_is_refused_to_others(engine) -> None:
    ledger = Ledger(engine.db, "w")
    claim = ledger.claim("U1:2024-03-04", "U1", "2024-03-04", plan("U1", "p1"), T0)
    assert ledger.renew(claim, T0 + timedelta(minutes=1), "DU1") and claim.channel == "DU1"
    assert ledger.renew(claim, T0 + timedelta(minutes=2)) and claim.channel == "DU1"
    assert ledger.get("U1:2024-03-04")["channel"] == "DU1"
    assert ledger.get("U1:2024-03-04")["claimed_at"] == to_iso(T0 + timedelta(minutes=2))
    assert not Ledger(engine.db, "x").renew(claim, T0 + timedelta(minutes=3), "C2")
    assert ledger.get("U1:2024-03-04")["channel"] == "DU1"
    ledger.record_sent(claim, "DU1", "1", T0 + timedelta(minutes=3))
    assert not ledger.renew(claim, T0 + timedelta(minutes=4))


def test_a_released_claim_is_retaken_at_once_and_forgets_a_channel_only_if_its_own(engine) -> None:
    ledger = Ledger(engine.db, "w")
    claim = ledger.claim("U1:2024-03-04", "U1", "2024-03-04", plan("U1", "p1"), T0)
    ledger.renew(claim, T0, "DU1")
    ledger.release(claim, T0)
    [again] = Ledger(engine.db, "v").retake_stale(T0)
    assert again.retaken and again.channel is None  # never posted: no lookup needed
    Ledger(engine.db, "v").renew(again, T0, "DU1")
    Ledger(engine.db, "v").release(again, T0)
    [third] = ledger.retake_stale(T0, user_id="U1")
    assert third.channel == "DU1"  # a retaken claim may already be in Slack
    assert ledger.retake_stale(T0 + STALE_CLAIM, user_id="U2") == []


def test_a_days_digest_from_before_member_keys_counts_as_taken(engine) -> None:
    """A digest claimed under the id of before s040 (``U1:2024-03-04``, no team) is that day's
    digest for the member in their workspace too: "Next:" must not promise another one, and
    none is sent (``taken`` and ``claim`` agree)."""
    ledger = Ledger(engine.db, worker="w")
    assert ledger.claim("U1:2024-03-04", "U1", "2024-03-04", plan("U1", "p1"), T0)
    assert ledger.taken("U1", "T1")(date(2024, 3, 4))
    second = plan("U1", "p2")
    assert ledger.claim("T1:U1:2024-03-04", "U1", "2024-03-04", second, T0, team_id="T1") is None
    assert not ledger.taken("U1", "T1")(date(2024, 3, 5))
    assert not ledger.taken("U2", "T1")(date(2024, 3, 4))
