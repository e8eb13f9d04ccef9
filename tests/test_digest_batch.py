# ruff: noqa: F811 - the fixtures are test_digest_delivery's, imported by name
"""The digest batch (``Dispatcher.run_due`` for many members at once, digest/delivery.py):
claims made many at a time in one transaction (``Ledger.claim_many``), posts through a pool of
workers, records in batches, and still every digest exactly once: two dispatchers racing, a
crash mid-batch, Slack's 429s, a token refused halfway. On SQLite and PostgreSQL."""

import json
import threading
from datetime import timedelta

import pytest
from sqlalchemy import event

from bot.settings import Settings, SettingsError
from bot.slack import poster as poster_module
from bot.slack.render.digest import digest_message
from bot.state import state_for
from digest import delivery
from digest.delivery import Dispatcher
from digest.ledger import STALE_CLAIM, ClaimRequest, Ledger
from digest.plan import DigestItem, DigestPlan, DigestSection
from digest.selection import select_digests
from digest.subscriptions import Subscriptions
from tests.digest_support import synthetic_papers, write_corpus
from tests.test_digest_delivery import (  # noqa: F401 - fixtures
    BERLIN_0900,
    GNN,
    Crash,
    clock,
    digest_row,
    dispatcher,
    engine,
    fake,
    join,
    sent_papers,
    waits,
)

pytestmark = pytest.mark.usefixtures("state_backend")

TEAM = [f"U{n}" for n in range(7)]


@pytest.fixture(autouse=True)
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Claims three at a time, so seven members take three claim transactions."""
    monkeypatch.setattr(delivery, "CLAIM_BATCH", 3)


@pytest.fixture
def team(engine, fake) -> list[str]:
    for user in TEAM:
        join(engine, fake, user)
    return TEAM


def assert_each_sent_once(engine, fake, posts: int = len(TEAM)) -> None:
    for user in TEAM:
        [message] = fake.messages_in(f"D{user}")
        row = digest_row(engine, f"{user}:2024-03-04")
        assert (row["status"], row["channel"], row["ts"]) == ("sent", f"D{user}", message["ts"])
        assert len(sent_papers(engine, user)) == GNN
    assert len(fake.calls_to("chat.postMessage")) == posts


def test_every_member_of_a_batch_gets_one_digest_posted_side_by_side(
    engine, fake, waits, team
) -> None:
    outcomes = dispatcher(engine, fake, waits, workers=3).run_due(BERLIN_0900)
    assert sorted((o.user_id, o.status) for o in outcomes) == [(u, "sent") for u in team]
    assert_each_sent_once(engine, fake)
    # The next tick finds every digest handled.
    assert dispatcher(engine, fake, waits).run_due(BERLIN_0900 + timedelta(minutes=1)) == []


def test_two_dispatchers_racing_on_the_same_batch_send_each_digest_once(
    engine, fake, waits, team, monkeypatch
) -> None:
    # Both see every digest as not yet handled, as when they look at the same instant: only
    # the batch claims decide.
    monkeypatch.setattr(Ledger, "existing", lambda self, ids: set())
    start = threading.Barrier(2)
    results: dict[str, list] = {}

    def scheduler(name: str) -> None:
        send = dispatcher(engine, fake, waits, worker=name, workers=3)
        start.wait()
        results[name] = send.run_due(BERLIN_0900)

    threads = [threading.Thread(target=scheduler, args=(n,)) for n in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    sent = sorted(o.user_id for name in results for o in results[name] if o.status == "sent")
    assert sent == team
    assert_each_sent_once(engine, fake)


@pytest.mark.parametrize("step", ["claimed", "opened", "posted", "recorded"])
def test_a_crash_mid_batch_neither_loses_nor_doubles_a_digest(
    engine, fake, waits, team, step
) -> None:
    seen: list[str] = []
    lock = threading.Lock()

    def crash_on_the_fourth(current: str, digest_id: str) -> None:
        if current != step:
            return
        with lock:
            seen.append(digest_id)
            if len(seen) == 4:
                raise Crash(f"killed after {step} of {digest_id}")

    doomed = dispatcher(engine, fake, waits, worker="doomed", workers=3, faults=crash_on_the_fourth)
    with pytest.raises(Crash):
        doomed.run_due(BERLIN_0900)
    assert len(fake.calls_to("chat.postMessage")) < len(TEAM) or step == "recorded"

    later = BERLIN_0900 + STALE_CLAIM + timedelta(minutes=1)
    restarted = dispatcher(engine, fake, waits, worker="restarted", workers=3)
    restarted.run_due(later)
    assert_each_sent_once(engine, fake)


def test_rate_limits_on_some_posts_are_waited_out_and_every_digest_goes(
    engine, fake, waits, team
) -> None:
    fake.fail_next("chat.postMessage", times=3, retry_after=2)
    outcomes = dispatcher(engine, fake, waits, workers=3).run_due(BERLIN_0900)
    assert sorted(o.status for o in outcomes) == ["sent"] * len(TEAM)
    assert waits == [2, 2, 2]
    for user in team:
        assert len(fake.messages_in(f"D{user}")) == 1
    assert len(fake.calls_to("chat.postMessage")) == len(TEAM) + 3


def test_a_token_refused_releases_the_claims_not_posted_for_the_next_run(
    engine, fake, waits, team
) -> None:
    # The first post goes alone: it meets the refusal while its batch's others wait, claimed.
    fake.fail_next("chat.postMessage", error="token_revoked")
    send = dispatcher(engine, fake, waits, workers=3)
    with pytest.raises(delivery.TokenRefused):
        send.run_due(BERLIN_0900)
    assert len(fake.calls_to("chat.postMessage")) == 1
    # The token replaced, the next tick (long before a claim could go stale) sends them all.
    send.run_due(BERLIN_0900 + timedelta(minutes=1))
    assert_each_sent_once(engine, fake, posts=len(TEAM) + 1)


def test_no_worker_holds_a_database_connection_while_slack_is_asked(
    engine, fake, waits, team
) -> None:
    store = state_for(engine.db_path)
    owners: dict[int, int] = {}  # connection record -> thread that has it checked out

    def checkout(dbapi_connection, record, proxy) -> None:
        owners[id(record)] = threading.get_ident()

    def checkin(dbapi_connection, record) -> None:
        owners.pop(id(record), None)

    event.listen(store.engine, "checkout", checkout)
    event.listen(store.engine, "checkin", checkin)
    held: list[int] = []
    send = dispatcher(engine, fake, waits, workers=3)
    post = send.poster.post_digest

    def watched(*args, **kwargs):
        held.append(sum(1 for t in list(owners.values()) if t == threading.get_ident()))
        return post(*args, **kwargs)

    send.poster.post_digest = watched
    try:
        send.run_due(BERLIN_0900)
    finally:
        event.remove(store.engine, "checkout", checkout)
        event.remove(store.engine, "checkin", checkin)
    assert held == [0] * len(TEAM)


def plan(user: str, *paper_ids: str) -> DigestPlan:
    items = [DigestItem(p, 0.5, ["graph"], new=True) for p in paper_ids]
    return DigestPlan(user, [DigestSection(1, "graph", items)] if items else [])


def test_a_batch_claim_decides_for_each_member_as_one_claim_would(engine) -> None:
    now = BERLIN_0900
    ledger, other = Ledger(engine.db, "batch"), Ledger(engine.db, "other")
    ledger.record_sent(
        ledger.claim("U3:2024-03-03", "U3", "2024-03-03", plan("U3", "p1"), now), "DU3", "1", now
    )
    assert other.claim("U2:2024-03-03", "U2", "2024-03-03", plan("U2", "p1"), now)  # in flight
    stale = other.claim("U5:2024-03-04", "U5", "2024-03-04", plan("U5", "p7"), now)
    later = now + STALE_CLAIM + timedelta(minutes=1)
    assert other.claim("U6:2024-03-03", "U6", "2024-03-03", plan("U6", "p1"), later)
    results = ledger.claim_many(
        [
            ClaimRequest("U1:2024-03-04", "U1", "2024-03-04", plan("U1", "p1", "p2"), "DU1"),
            ClaimRequest("U1:2024-03-04T09", "U1", "2024-03-04T09", plan("U1", "p3")),
            ClaimRequest("U2:2024-03-04", "U2", "2024-03-04", plan("U2", "p1")),
            ClaimRequest("U3:2024-03-04", "U3", "2024-03-04", plan("U3", "p1", "p2")),
            ClaimRequest("U4:2024-03-04", "U4", "2024-03-04", plan("U4")),
            ClaimRequest("U5:2024-03-04", "U5", "2024-03-04", plan("U5", "p8")),
            ClaimRequest("U6:2024-03-04", "U6", "2024-03-04", plan("U6", "p2")),
        ],
        later,
    )
    by_id = {r.request.digest_id: r for r in results}
    assert [r.request.digest_id for r in results] == [
        "U1:2024-03-04",
        "U1:2024-03-04T09",
        "U2:2024-03-04",
        "U3:2024-03-04",
        "U4:2024-03-04",
        "U5:2024-03-04",
        "U6:2024-03-04",
    ]
    first = by_id["U1:2024-03-04"]
    assert first.status == "claimed" and first.claim.channel == "DU1"
    assert digest_row(engine, "U1:2024-03-04")["channel"] == "DU1"
    # One digest in flight per member, also within one batch.
    assert (by_id["U1:2024-03-04T09"].status, by_id["U1:2024-03-04T09"].claim) == ("busy", None)
    assert ledger.get("U1:2024-03-04T09") is None
    # U2's other digest went stale by `later`: U2 may have this one.
    assert by_id["U2:2024-03-04"].status == "claimed"
    # Papers already sent are left out, in the claim and in its row.
    assert by_id["U3:2024-03-04"].claim.plan.paper_ids == ["p2"]
    assert json.loads(digest_row(engine, "U3:2024-03-04")["paper_ids"]) == ["p2"]
    # Nothing to send: recorded skipped, not claimed.
    assert (by_id["U4:2024-03-04"].status, by_id["U4:2024-03-04"].claim) == ("skipped", None)
    assert digest_row(engine, "U4:2024-03-04")["status"] == "skipped"
    # A stale claim of the same digest is retaken with the content it had.
    retaken = by_id["U5:2024-03-04"].claim
    assert retaken.retaken and retaken.plan == stale.plan
    assert digest_row(engine, "U5:2024-03-04")["claimed_by"] == "batch"
    # A member with a digest in flight (claimed by a live worker) gets none.
    assert (by_id["U6:2024-03-04"].status, by_id["U6:2024-03-04"].claim) == ("busy", None)
    # A second batch of the same digests gets none of them.
    again = ledger.claim_many([r.request for r in results], later)
    assert [r.claim for r in again] == [None] * 7


def test_the_number_of_digest_workers_is_a_setting(engine, fake, waits) -> None:
    settings = Settings.from_env({"PAPERBOY_DIGEST_WORKERS": "7"})
    poster = dispatcher(engine, fake, waits).poster
    assert Dispatcher.from_settings(engine, poster, settings).workers == 7
    assert Dispatcher.from_settings(engine, poster, Settings()).workers == delivery.DIGEST_WORKERS
    with pytest.raises(SettingsError, match="PAPERBOY_DIGEST_WORKERS must be a whole number"):
        Settings.from_env({"PAPERBOY_DIGEST_WORKERS": "0"})


def test_a_batch_claim_grown_old_is_renewed_before_its_post_and_not_posted_if_lost(
    engine, fake, waits, team, monkeypatch
) -> None:
    """Posts that fell far behind their claim (long rate limits) renew it first: one another
    worker has retaken meanwhile is not posted by this one."""
    monkeypatch.setattr(delivery, "LEASE_MARGIN", -1.0)  # every claim counts as old
    thief = Ledger(engine.db, "thief")
    send = dispatcher(engine, fake, waits, workers=3, faults=None)
    for user in team:  # DMs known, so each claim carries its channel from the start
        Subscriptions(engine.db).set_dm_channel(user, send.poster.open_dm(user))

    def retaken_meanwhile(step: str, digest_id: str) -> None:
        if step == "claimed" and digest_id.startswith("U3:"):
            [stolen] = thief.retake_stale(BERLIN_0900 + STALE_CLAIM + timedelta(minutes=1), "U3")
            assert stolen.digest_id == digest_id

    send.faults = retaken_meanwhile
    outcomes = {o.user_id: o.status for o in send.run_due(BERLIN_0900)}
    assert outcomes == {**{u: "sent" for u in team}, "U3": "busy"}
    assert fake.messages_in("DU3") == []
    assert digest_row(engine, "U3:2024-03-04")["claimed_by"] == "thief"


def test_a_cut_digest_is_posted_as_its_claimed_papers_render_with_every_count_right(
    engine, fake, waits
) -> None:
    """The message ``fit`` rendered is the one posted (rendered once): for a plan cut to 50
    blocks it must read exactly as the claimed papers alone would render."""
    topics = ["graph neural networks", "diffusion models", "reinforcement learning"]
    topics += ["federated learning", "protein design"]
    join(engine, fake, "U1", *topics)
    [outcome] = dispatcher(engine, fake, waits, limit=40).run_due(BERLIN_0900)
    [message] = fake.messages_in("DU1")
    claimed = DigestPlan.from_json(
        json.dumps(json.loads(digest_row(engine, "U1:2024-03-04")["content"])["plan"])
    )
    assert outcome.papers == claimed.size < 40
    alone, _ = digest_message(engine, claimed, "2024-03-04", digest_id=outcome.digest_id)
    assert (message["text"], message["blocks"]) == (alone["text"], alone["blocks"])
    tallies = [b["text"]["text"] for b in message["blocks"] if ":label:" in str(b)]
    assert sum(int(t.split("· ")[1].split(" paper")[0]) for t in tallies) == claimed.size


def test_each_digest_is_rendered_once(engine, fake, waits, team, monkeypatch) -> None:
    """Rendering is most of a digest's cost: the message made to fit the plan is posted."""
    rendered: list[str] = []
    render = poster_module.DigestRenderer.message

    def counted(self, plan, *args, **kwargs):
        rendered.append(plan.user_id)
        return render(self, plan, *args, **kwargs)

    monkeypatch.setattr(poster_module.DigestRenderer, "message", counted)
    dispatcher(engine, fake, waits, workers=3, limit=40).run_due(BERLIN_0900)
    assert sorted(rendered) == team
    assert len(fake.calls_to("chat.postMessage")) == len(team)


def test_every_digest_of_a_batch_is_the_message_digest_message_makes(engine, fake, waits) -> None:
    """The batch renders from blocks it keeps across members (``DigestRenderer``): members
    sharing papers at other places, in a DM or a channel, each get exactly the message
    ``digest_message`` makes of their claimed plan."""
    gnn, diffusion, rl = "graph neural networks", "diffusion models", "reinforcement learning"
    topics = {"U0": [gnn, diffusion], "U1": [diffusion, gnn], "U2": [gnn], "U3": [rl, gnn]}
    topics["U4"] = [diffusion, rl, gnn]
    for user, chosen in topics.items():
        join(engine, fake, user, *chosen)
    Subscriptions(engine.db).set_channel("U4", "CPAPERS", BERLIN_0900 - timedelta(hours=1))
    outcomes = dispatcher(engine, fake, waits, workers=3).run_due(BERLIN_0900)
    assert sorted((o.user_id, o.status) for o in outcomes) == [(u, "sent") for u in topics]
    for user in topics:
        row = digest_row(engine, f"{user}:2024-03-04")
        claimed = DigestPlan.from_json(json.dumps(json.loads(row["content"])["plan"]))
        [message] = fake.messages_in(row["channel"])
        owner = user if row["channel"] == "CPAPERS" else None
        alone, _ = digest_message(engine, claimed, "2024-03-04", digest_id=row["id"], owner=owner)
        assert (message["text"], message["blocks"]) == (alone["text"], alone["blocks"])
        assert message["metadata"] == alone["metadata"]


def test_a_paper_changed_between_two_batches_is_posted_as_it_is_now(
    engine, fake, waits, tmp_path
) -> None:
    """The batch keeps papers and their blocks across members and runs (``DigestRenderer``,
    read ahead by ``prepare``): a paper changed in the corpus after one batch posted it is
    posted with its new text by the next batch of the same process."""
    join(engine, fake, "U0")
    now = [0.0]
    batch = dispatcher(engine, fake, waits, workers=2, limit=3)
    batch.poster.renderer.clock = lambda: now[0]
    assert {o.status for o in batch.run_due(BERLIN_0900)} == {"sent"}
    papers = synthetic_papers()
    for paper in papers:
        paper["title"] = f"Revised: {paper['title']}"
    engine.ingest([write_corpus(tmp_path / "revised.jsonl", papers)])
    join(engine, fake, "U1")  # gets the papers U0 got yesterday
    now[0] += 60  # the next day's tick
    assert {o.status for o in batch.run_due(BERLIN_0900 + timedelta(days=1))} == {"sent"}
    [yesterday, today] = fake.messages_in("DU0")
    [first] = fake.messages_in("DU1")
    assert "Revised" not in json.dumps(yesterday["blocks"])
    shown = [b["elements"][0]["value"] for b in yesterday["blocks"] if b["type"] == "actions"]
    assert [b["elements"][0]["value"] for b in first["blocks"] if b["type"] == "actions"] == shown
    for user, message in (("U0", today), ("U1", first)):
        row = digest_row(engine, f"{user}:2024-03-05")
        claimed = DigestPlan.from_json(json.dumps(json.loads(row["content"])["plan"]))
        alone, _ = digest_message(engine, claimed, "2024-03-05", digest_id=row["id"])
        assert (message["text"], message["blocks"]) == (alone["text"], alone["blocks"])
        assert json.dumps(message["blocks"]).count("Revised: ") == claimed.size == 3


def test_each_member_of_a_batch_is_chosen_and_explained_as_if_alone(engine, fake) -> None:
    """Selection does what members share once for the batch (topics, each paper's why): a
    member's plan chosen with everyone's is the one chosen for them alone, each paper
    explained by that member's own topic."""
    topics = {
        "U0": ["graph neural networks"],
        "U1": ["message passing"],
        "U2": ["message passing", "graph neural networks"],
        "U3": ["graph neural networks", "diffusion models"],
    }
    for user, chosen in topics.items():
        join(engine, fake, user, *chosen)
    together = select_digests(engine)
    whys = set()
    for user in topics:
        assert together[user].to_json() == select_digests(engine, [user])[user].to_json()
        whys |= {tuple(i.why) for s in together[user].sections for i in s.items}
    assert len({w for w in whys if w}) > 2  # papers shared under other terms


def test_the_next_chunk_is_fitted_while_this_one_is_claimed(
    engine, fake, waits, team, monkeypatch
) -> None:
    """Rendering overlaps the claims (``_deliver_batch``): the second chunk's fitting has
    begun, in another thread, before the first chunk's claim returns; every digest still
    goes once."""
    send = dispatcher(engine, fake, waits, workers=3)
    second_chunk = set(team[3:6])
    fitting_second = threading.Event()
    fit, claim_many = send.poster.fit, Ledger.claim_many
    fitted_in: set[int] = set()
    seen: list[bool] = []

    def watched_fit(plan, *args, **kwargs):
        fitted_in.add(threading.get_ident())
        if plan.user_id in second_chunk:
            fitting_second.set()
        return fit(plan, *args, **kwargs)

    def watched_claim(self, requests, now):
        if requests and requests[0].user_id == team[0]:
            seen.append(fitting_second.wait(timeout=10))
        return claim_many(self, requests, now)

    send.poster.fit = watched_fit
    monkeypatch.setattr(Ledger, "claim_many", watched_claim)
    outcomes = send.run_due(BERLIN_0900)
    assert seen == [True]
    assert threading.get_ident() not in fitted_in
    assert sorted((o.user_id, o.status) for o in outcomes) == [(u, "sent") for u in team]
    assert_each_sent_once(engine, fake)


def test_a_member_whose_fitting_fails_is_left_pending_and_the_others_go(
    engine, fake, waits, team
) -> None:
    """A bug while fitting one member's digest (in the fitting thread, a chunk ahead) is that
    member's outcome alone: nothing claimed for them, everyone else sent."""
    send = dispatcher(engine, fake, waits, workers=3)
    fit = send.poster.fit

    def flaky(plan, *args, **kwargs):
        if plan.user_id == "U4":
            raise RuntimeError("boom")
        return fit(plan, *args, **kwargs)

    send.poster.fit = flaky
    outcomes = {o.user_id: (o.status, o.error) for o in send.run_due(BERLIN_0900)}
    assert outcomes == {
        u: ("pending", "RuntimeError") if u == "U4" else ("sent", None) for u in team
    }
    assert Ledger(engine.db).get("U4:2024-03-04") is None
    send.poster.fit = fit
    # Nothing was claimed for U4: the next tick sends it.
    later = send.run_due(BERLIN_0900 + timedelta(minutes=1))
    assert [(o.user_id, o.status) for o in later] == [("U4", "sent")]


def test_inserting_many_digest_rows_names_only_those_inserted(engine) -> None:
    """``StateStore.insert_digests`` (a batch claim's insert): rows whose id, or member and
    date, is taken are left out and not among the ids returned (the claim then says busy)."""
    ledger = Ledger(engine.db, "w")
    now = BERLIN_0900
    assert ledger.claim("U1:2024-03-04", "U1", "2024-03-04", plan("U1", "p1"), now) is not None
    store = state_for(engine.db_path)
    rows = [
        ledger._row("U1:2024-03-04", "", "U1", "2024-03-04", plan("U1", "p2"), now),  # id
        ledger._row("U2:2024-03-04", "", "U2", "2024-03-04", plan("U2", "p2"), now),
        ledger._row("U1:again", "", "U1", "2024-03-04", plan("U1", "p3"), now),  # member, date
        ledger._row("U3:2024-03-04", "", "U3", "2024-03-04", plan("U3", "p2"), now),
    ]
    with store.write() as conn:
        inserted = store.insert_digests(conn, rows)
    assert inserted == {"U2:2024-03-04", "U3:2024-03-04"}
    assert json.loads(ledger.get("U1:2024-03-04")["paper_ids"]) == ["p1"]
    assert ledger.get("U1:again") is None
