# ruff: noqa: F811 - the fixtures are test_digest_delivery's, imported by name
"""The batch's claims and records in the shared state, on SQLite and PostgreSQL (where members,
ids and papers go as arrays, ``StateStore._members_among``/``_among``/``_insert_many``): one
user id in two workspaces is two members, for papers sent and digests in flight; a hundred
rows of papers and digests are written as given, NULLs included."""

import json

import pytest
from sqlalchemy import select

from bot.state import state_for
from bot.state.tables import sent_papers
from digest.ledger import ClaimRequest, Ledger
from tests.test_digest_batch import plan
from tests.test_digest_delivery import BERLIN_0900, digest_row, engine  # noqa: F401

pytestmark = pytest.mark.usefixtures("state_backend")


def sent(engine) -> set[tuple[str, str, str, str]]:
    with state_for(engine.db_path).read() as conn:
        table = sent_papers.c
        query = select(table.team_id, table.user_id, table.paper_id, table.digest_id)
        return {tuple(row) for row in conn.execute(query)}


def test_a_batch_tells_one_user_id_in_two_workspaces_apart(engine) -> None:
    now = BERLIN_0900
    ledger = Ledger(engine.db, "batch")
    first = ledger.claim(
        "T1:U1:2024-03-03", "U1", "2024-03-03", plan("U1", "p1"), now, team_id="T1"
    )
    ledger.record_sent_many([(first, "D1", "1.1")], now)
    in_flight = ledger.claim(
        "T1:U2:2024-03-04", "U2", "2024-03-04", plan("U2", "p1"), now, team_id="T1"
    )
    assert in_flight is not None
    results = ledger.claim_many(
        [
            ClaimRequest(
                "T1:U1:2024-03-04", "U1", "2024-03-04", plan("U1", "p1", "p2"), None, "T1"
            ),
            ClaimRequest(
                "T2:U1:2024-03-04", "U1", "2024-03-04", plan("U1", "p1", "p2"), "D9", "T2"
            ),
            ClaimRequest("T2:U2:2024-03-04", "U2", "2024-03-04", plan("U2", "p1"), None, "T2"),
            ClaimRequest("U2:2024-03-04", "U2", "2024-03-04", plan("U2", "p3"), None, ""),
        ],
        now,
    )
    claims = {r.request.digest_id: r.claim for r in results}
    # p1 went to U1 of T1, not of T2.
    assert claims["T1:U1:2024-03-04"].plan.paper_ids == ["p2"]
    assert claims["T2:U1:2024-03-04"].plan.paper_ids == ["p1", "p2"]
    # U2 of T1 has a digest in flight; U2 of T2 and U2 of no team do not.
    assert claims["T2:U2:2024-03-04"] is not None and claims["U2:2024-03-04"] is not None
    assert digest_row(engine, "T2:U1:2024-03-04")["channel"] == "D9"
    assert digest_row(engine, "T1:U1:2024-03-04")["channel"] is None
    assert json.loads(digest_row(engine, "T1:U1:2024-03-04")["paper_ids"]) == ["p2"]
    ledger.record_sent_many(
        [(claim, f"D{n}", f"2.{n}") for n, claim in enumerate(claims.values())], now
    )
    assert sent(engine) == {
        ("T1", "U1", "p1", "T1:U1:2024-03-03"),
        ("T1", "U1", "p2", "T1:U1:2024-03-04"),
        ("T2", "U1", "p1", "T2:U1:2024-03-04"),
        ("T2", "U1", "p2", "T2:U1:2024-03-04"),
        ("T2", "U2", "p1", "T2:U2:2024-03-04"),
        ("", "U2", "p3", "U2:2024-03-04"),
    }
    assert [digest_row(engine, i)["status"] for i in claims] == ["sent"] * 4
    # Claimed again: none of them (existing rows), and nothing written twice.
    again = ledger.claim_many([r.request for r in results], now)
    assert [r.claim for r in again] == [None] * 4


def test_a_hundred_members_claimed_and_recorded_at_once(engine) -> None:
    now = BERLIN_0900
    ledger = Ledger(engine.db, "batch")
    users = [f"U{n:03d}" for n in range(120)]
    requests = [
        ClaimRequest(
            f"T1:{u}:2024-03-04",
            u,
            "2024-03-04",
            plan(u, *(f"p{n}" for n in range(10))),
            None,
            "T1",
        )
        for u in users
    ]
    results = ledger.claim_many(requests, now)
    assert all(r.status == "claimed" for r in results)
    ledger.record_sent_many([(r.claim, "D", r.request.user_id) for r in results], now)
    assert len(sent(engine)) == 1200
    assert digest_row(engine, "T1:U119:2024-03-04")["ts"] == "U119"
    assert all(r.claim is None for r in ledger.claim_many(requests, now))
