# ruff: noqa: F811 - the fixtures are test_digest_delivery's, imported by name
"""A large batch chosen chunk by chunk while it is delivered (digest/selector.py): most chunks
by a helper process, the first one and any the helper cannot answer by this one; every digest
still exactly once and the one ``select_digests`` chooses for the whole batch at once. On
SQLite and PostgreSQL (the helper opens the same state)."""

import threading

import pytest

from digest import delivery, selector
from digest.selection import select_digests
from tests.test_digest_delivery import (  # noqa: F401 - fixtures
    BERLIN_0900,
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

TOPICS = {
    "U0": ["graph neural networks"],
    "U1": ["message passing"],
    "U2": ["message passing", "graph neural networks"],
    "U3": ["graph neural networks", "diffusion models"],
    "U4": ["diffusion models"],
    "U5": ["graph"],
    "U6": ["neural networks"],
}


@pytest.fixture(autouse=True)
def pipelined(monkeypatch: pytest.MonkeyPatch) -> None:
    """Seven members, three a chunk: three chunks, chosen chunk by chunk."""
    monkeypatch.setattr(delivery, "CLAIM_BATCH", 3)
    monkeypatch.setattr(delivery, "PIPELINE_FROM", 2)


@pytest.fixture
def team(engine, fake) -> dict:
    for user, topics in TOPICS.items():
        join(engine, fake, user, *topics)
    # What each member's digest holds when the whole batch is chosen at once, here.
    return {plan.user_id: sorted(plan.paper_ids) for plan in select_digests(engine).values()}


@pytest.fixture
def chosen_here(monkeypatch: pytest.MonkeyPatch) -> list[list]:
    """The chunks this process chose itself (``select_digests_apart`` as ``Selections``
    calls it)."""
    calls: list[list] = []
    lock = threading.Lock()

    def spy(engine, keys, limit):
        with lock:
            calls.append(sorted(user for _, user in keys))
        return select_digests(engine, keys, limit=limit)

    monkeypatch.setattr(selector, "select_digests_apart", spy)
    return calls


def assert_each_sent_once_as_chosen_at_once(engine, fake, team: dict) -> None:
    for user, papers in team.items():
        [message] = fake.messages_in(f"D{user}")
        row = digest_row(engine, f"{user}:2024-03-04")
        assert (row["status"], row["ts"]) == ("sent", message["ts"])
        assert sent_papers(engine, user) == papers
    assert len(fake.calls_to("chat.postMessage")) == len(team)


def test_a_batch_chosen_by_the_helper_is_the_batch_chosen_at_once_each_sent_once(
    engine, fake, waits, team, chosen_here
) -> None:
    send = dispatcher(engine, fake, waits, workers=3, pipeline=True)
    send.start_helper()
    helper = send._helper[0]
    try:
        outcomes = send.run_due(BERLIN_0900)
        assert sorted(o.status for o in outcomes) == ["sent"] * len(team)
        assert_each_sent_once_as_chosen_at_once(engine, fake, team)
        assert len(chosen_here) == 1  # the first chunk; the helper chose the other two
        assert helper.alive  # kept for the next batch
    finally:
        send.close()
    assert helper.process.poll() is not None  # stopped with its dispatcher


def test_the_chunks_of_a_helper_gone_mid_batch_are_chosen_here(
    engine, fake, waits, team, chosen_here, monkeypatch
) -> None:
    send = dispatcher(engine, fake, waits, workers=3, pipeline=True)
    send.start_helper()
    helper = send._helper[0]
    asked = helper.send

    def dies_when_asked(keys, limit):
        helper.process.kill()
        helper.process.wait()
        asked(keys, limit)

    monkeypatch.setattr(helper, "send", dies_when_asked)
    try:
        outcomes = send.run_due(BERLIN_0900)
    finally:
        send.close()
    assert sorted(o.status for o in outcomes) == ["sent"] * len(team)
    assert_each_sent_once_as_chosen_at_once(engine, fake, team)
    assert sorted(user for chunk in chosen_here for user in chunk) == sorted(team)


def test_an_error_choosing_stops_the_batch_after_the_digests_chosen_before_it(
    engine, fake, waits, team, monkeypatch
) -> None:
    """Without a helper every chunk is chosen here, one after another: the second one fails
    (an error ``select_digests_apart`` lets through, as an outage), so the first chunk's
    digests go (once), the run raises, and the next run sends the rest."""
    calls = []

    def second_fails(engine, keys, limit):
        calls.append(keys)
        if len(calls) == 2:
            raise RuntimeError("a bug in choosing")
        return select_digests(engine, keys, limit=limit)

    monkeypatch.setattr(selector, "select_digests_apart", second_fails)
    send = dispatcher(engine, fake, waits, workers=3, pipeline=True, select_helper=False)
    with pytest.raises(RuntimeError, match="a bug in choosing"):
        send.run_due(BERLIN_0900)
    first = sorted(user for _, user in calls[0])
    assert sorted(c.params["channel"] for c in fake.calls_to("chat.postMessage")) == [
        f"D{u}" for u in first
    ]
    assert dispatcher(engine, fake, waits).run_due(BERLIN_0900)  # the others, now
    assert_each_sent_once_as_chosen_at_once(engine, fake, team)


def test_without_a_spare_core_the_batch_is_chosen_at_once_here(
    engine, fake, waits, team, monkeypatch
) -> None:
    """On one core, chunks and a helper only add work: the batch is chosen in one call, in
    this process, and no helper is started (the default follows the CPUs the process may use)."""
    monkeypatch.setattr(delivery.os, "sched_getaffinity", lambda pid: {0})
    calls = []

    def at_once(engine, keys, limit):
        calls.append(sorted(user for _, user in keys))
        return select_digests(engine, keys, limit=limit)

    monkeypatch.setattr(delivery, "select_digests_apart", at_once)
    send = dispatcher(engine, fake, waits, workers=3)
    assert not send.pipeline
    send.run_due(BERLIN_0900)
    assert calls == [sorted(team)]
    assert not send._helper
    assert_each_sent_once_as_chosen_at_once(engine, fake, team)
    monkeypatch.setattr(delivery.os, "sched_getaffinity", lambda pid: {0, 1})
    assert dispatcher(engine, fake, waits).pipeline
