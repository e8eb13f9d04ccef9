"""Does feedback make digests better? Simulated members, through the real digest code path.

Quality (default)::

    python -m bench.feedback_digests [--rounds 5] [--method rocchio|svm] [--rebuild]

Indexes ``eval-corpus.jsonl.gz`` once into ``bench/work/feedback/paperboy.db``. Each dev query of
``qrels-dev.json`` becomes two members subscribed to it as their one topic: a *feedback* member
and a *twin* who never clicks. Each round every member gets their digest as ``digest now``
does (``select_digests``, the Slack message's cut to 50 blocks, the ledger's claim and record,
so a paper is never sent twice), at most 10 papers; the feedback member then 👍 the sent
papers in the qrels and 👎 the rest (the state store's ``set_feedback``, as a click does).
Prints, per round and for both kinds of member: papers sent, relevant papers sent, the share
relevant; then the totals over rounds 2-5 and their ratio, and the feedback members' papers
split into recommendations and topic matches. ``--dump FILE`` writes each member's counts per
round (recommendations sent/relevant, topic matches sent/relevant) as JSON.

Model speed (``--speed``): on the 87k ``paperlists.jsonl.gz`` (the index of
``bench.digest_speed``), members with 20 clicks each click once more, and the time from the
click to the model's new recommendations (read the clicks, train, score every paper) is
timed per click: p50, p99, max; and, apart, the semantic space's fit (once per index
generation, before the first click).

Batch (``--batch``): ``select_digests`` for 1,000 members with 5 topics and 20 clicks each on
the 87k corpus.

Near-duplicates (``--near``): cosines between papers of the 87k corpus with the same title
(the same paper listed twice) and between each paper and its nearest other paper, to choose
``digest.taste.NEAR_DISLIKED``.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from datetime import UTC, datetime, timedelta

import numpy as np
from sqlalchemy import select

from bench.corpora import EVAL_FILE, PAPERS_FILE, WORK_DIR, corpus_file, load_qrels
from bench.digest_speed import DIGEST_DIR, open_engine, subscribe_members
from bench.measure import log, markdown_table
from bot.state import StateStore
from bot.state.tables import feedback
from bot.state.tables import topics as topic_table

FEEDBACK_DIR = WORK_DIR / "feedback"
NOW = datetime(2025, 6, 2, 9, 0, tzinfo=UTC)


def _fresh_engine(rebuild: bool):
    db = FEEDBACK_DIR / "paperboy.db"
    FEEDBACK_DIR.mkdir(parents=True, exist_ok=True)
    engine = open_engine(db, corpus_file(EVAL_FILE), rebuild)
    for table in ("feedback", "saves", "sent_papers", "digests", "topics", "members"):
        engine.db.execute(f"delete from {table}")
    engine.db.conn.commit()
    return engine


def quality(args: argparse.Namespace) -> None:
    from bot.slack.render.digest import digest_message
    from bot.state import state_for
    from digest import taste
    from digest.ledger import Ledger
    from digest.selection import select_digests
    from digest.subscriptions import Subscriptions

    engine = _fresh_engine(args.rebuild)
    qrels = {q: set(ids) for q, ids in load_qrels().items()}
    subs = Subscriptions(engine.db)
    created = NOW - timedelta(days=1)
    members: dict[str, tuple[str, str]] = {}  # user -> (kind, query)
    for n, query in enumerate(sorted(qrels)):
        for kind in ("feedback", "twin"):
            user = f"{kind[0].upper()}{n:03d}"
            subs.add_topic(user, query, created)
            members[user] = (kind, query)
    store = state_for(engine.db_path)
    ledger = Ledger(store, worker="bench")
    original = taste.train

    def train_with(*a, **kw):
        return original(*a, **{**kw, "method": args.method})

    taste.train = train_with
    rows = []
    totals = {"feedback": [0, 0], "twin": [0, 0]}
    model_seconds: list[float] = []
    split = [0, 0, 0, 0]  # feedback members, rounds 2+: recs sent/relevant, topics sent/relevant
    rounds_by_member: list[dict] = []
    for round_no in range(1, args.rounds + 1):
        now = NOW + timedelta(days=round_no)
        started = time.perf_counter()
        plans = select_digests(engine, list(members))
        model_seconds.append(time.perf_counter() - started)
        stats = {"feedback": [0, 0], "twin": [0, 0]}
        recs = [0, 0]
        per_member = {}
        for (_, user), plan in plans.items():
            kind, query = members[user]
            _, plan = digest_message(engine, plan, now.date().isoformat())
            claim, status = ledger.claim_now(user, now.strftime("%Y-%m-%dT%H:%M"), plan, now)
            if claim is None:
                continue
            ledger.record_sent(claim, f"D{user}", f"{now.timestamp():.6f}", now)
            sent = claim.plan.paper_ids
            relevant = [p for p in sent if p in qrels[query]]
            stats[kind][0] += len(sent)
            stats[kind][1] += len(relevant)
            mine = per_member.setdefault(user, [0, 0, 0, 0])  # recs sent/relevant, topics
            for section in claim.plan.sections:
                hits = sum(i.paper_id in qrels[query] for i in section.items)
                at = 0 if section.recommended else 2
                mine[at] += len(section.items)
                mine[at + 1] += hits
                if section.recommended:
                    recs[0] += len(section.items)
                    recs[1] += hits
            if kind == "feedback":
                for paper in sent:
                    verdict = "like" if paper in qrels[query] else "dislike"
                    store.set_feedback(
                        user_id=user, paper_id=paper, kind=verdict, now=now.isoformat()
                    )
        for kind in ("feedback", "twin"):
            sent, relevant = stats[kind]
            share = f"{relevant / sent:.1%}" if sent else "-"
            rows.append([round_no, kind, sent, relevant, share])
            if round_no >= 2:
                totals[kind][0] += sent
                totals[kind][1] += relevant
        log(f"round {round_no}: {stats}, recommended {recs} ({model_seconds[-1]:.1f}s to select)")
        if round_no >= 2:
            for user, (rs, rr, ts, tr) in per_member.items():
                if members[user][0] == "feedback":
                    split[0] += rs
                    split[1] += rr
                    split[2] += ts
                    split[3] += tr
        rounds_by_member.append(per_member)
    taste.train = original
    print(f"## Feedback digests: {len(qrels)} dev queries, {args.rounds} rounds, {args.method}\n")
    print(markdown_table(["round", "member", "papers sent", "relevant sent", "share"], rows))
    f_sent, f_rel = totals["feedback"]
    t_sent, t_rel = totals["twin"]
    print(
        f"\nRounds 2-{args.rounds}: feedback members {f_rel} relevant of {f_sent} sent "
        f"({f_rel / max(f_sent, 1):.1%}); twins {t_rel} of {t_sent} "
        f"({t_rel / max(t_sent, 1):.1%}). Ratio of relevant papers: "
        f"{f_rel / max(t_rel, 1):.2f}x."
    )
    rs, rr, ts, tr = split
    print(
        f"Feedback members' recommendations: {rr} relevant of {rs} sent "
        f"({rr / max(rs, 1):.1%}); topic matches: {tr} of {ts} ({tr / max(ts, 1):.1%})."
    )
    if args.dump:
        import json

        with open(args.dump, "w") as out:
            json.dump({"members": members, "rounds": rounds_by_member}, out)


def _clicks_setup(engine, members: int, topics: int, clicks: int, seed: int) -> list[str]:
    """``members`` members with ``topics`` topics and ``clicks`` 👍/👎 each (``give_clicks``)."""
    from bot.state import state_for

    engine.db.execute("drop table if exists bench_setup")  # the batch's saved setup is gone
    subscribe_members(engine, members, topics, 0.0, seed)
    engine.db.conn.commit()
    users = [f"U{m:05d}" for m in range(members)]
    give_clicks(engine, state_for(engine.db_path), users, clicks, seed)
    return users


def give_clicks(engine, store: StateStore, users: list[str], clicks: int, seed: int) -> None:
    """Every click in ``store`` replaced by ``clicks`` 👍/👎 for each of ``users`` (on random
    papers among their topics' best matches, as digests would have shown them)."""
    rng = random.Random(seed)
    queries: dict[str, list[str]] = {}
    with store.read() as conn:
        for user, query in conn.execute(
            select(topic_table.c.user_id, topic_table.c.query).order_by(topic_table.c.id)
        ):
            queries.setdefault(user, []).append(query)
    rows = []
    for user in users if clicks else ():
        pool = []
        for query in queries.get(user, []):
            pool += [paper for paper, _ in engine.rank(query, k=20, coordinate=False)]
        pool = list(dict.fromkeys(pool)) or [
            p for p, _ in engine.rank("learning", k=clicks, coordinate=False)
        ]
        for n, paper in enumerate(rng.sample(pool, min(clicks, len(pool)))):
            kind = "like" if rng.random() < 0.5 else "dislike"
            stamp = (NOW + timedelta(seconds=n)).isoformat()
            rows.append({"user_id": user, "paper_id": paper, "kind": kind, "created_at": stamp})
    with store.write() as conn:
        conn.execute(feedback.delete())
        if rows:
            conn.execute(feedback.insert(), rows)


def speed(args: argparse.Namespace) -> None:
    """The model's update after one click, at 87k papers."""
    from bot.state import state_for
    from digest import taste

    engine = open_engine(DIGEST_DIR / "paperboy.db", corpus_file(PAPERS_FILE), args.rebuild)
    index = engine.index
    users = _clicks_setup(engine, args.clicks_members, 5, 20, args.seed)
    store = state_for(engine.db_path)
    topics = {}
    for user, query in engine.db.execute("select user_id, query from topics"):
        topics.setdefault(user, []).append(query)
    rng = random.Random(args.seed + 1)
    live = index.live_docs()
    # The semantic space is fitted once per index generation, on first use: timed apart.
    taste.forget()
    started = time.perf_counter()
    taste.semantic_vectors(index, live[:1])
    fitted = time.perf_counter() - started
    times = []
    for n, user in enumerate(users):
        taste.taste_of(engine, user, topics[user])  # the model before the click (cached)
        doc = int(rng.choice(live))
        paper = engine.corpus.ids_for_rowids([int(index.rowids[doc])])[0]
        stamp = (NOW + timedelta(minutes=5, seconds=n)).isoformat()
        store.set_feedback(user_id=user, paper_id=paper, kind="like", now=stamp)
        started = time.perf_counter()
        model = taste.taste_of(engine, user, topics[user])
        [scores] = taste.score_all(index, [model])
        taste.recommend(index, model, scores, limit=10)
        times.append(time.perf_counter() - started)
    times.sort()
    p = lambda q: times[min(len(times) - 1, int(q * len(times)))] * 1000  # noqa: E731
    print(f"## Model update after a click: {index.n_docs:,} papers, {len(times)} clicks\n")
    print(f"Semantic space fitted in {fitted:.1f}s (load {os.getloadavg()[0]:.1f}).\n")
    print(
        markdown_table(
            ["p50 ms", "p90 ms", "p99 ms", "max ms"],
            [[f"{p(0.5):.1f}", f"{p(0.9):.1f}", f"{p(0.99):.1f}", f"{times[-1] * 1000:.1f}"]],
        )
    )


def batch(args: argparse.Namespace) -> None:
    """``select_digests`` for 1,000 members with 5 topics and 20 clicks each, at 87k: with
    every cache of ``digest.taste`` emptied (a restart: every model trained, every vector read)
    and with the models kept from the run before (a scheduler that stays up)."""
    from digest import taste
    from digest.selection import select_digests

    engine = open_engine(DIGEST_DIR / "paperboy.db", corpus_file(PAPERS_FILE), args.rebuild)
    db = engine.db
    setup = f"{args.members} members, seed {args.seed}"
    db.execute("create table if not exists bench_setup (what text)")
    if [r[0] for r in db.execute("select what from bench_setup")] != [setup] or not db[
        "bench_feedback"
    ].exists():
        _clicks_setup(engine, args.members, 5, 20, args.seed)
        db.execute("drop table if exists bench_feedback")
        db.execute("create table bench_feedback as select * from feedback")
        db.execute("create table if not exists bench_setup (what text)")
        db.execute("delete from bench_setup")
        db.execute("insert into bench_setup values (?)", [setup])
        db.conn.commit()
    select_digests(engine)  # warm: matrices, vocabulary, added-at cache
    names = (
        "without clicks",
        "with 20 clicks each, after a restart",
        "with 20 clicks, models kept",
    )
    runs: dict[str, list[float]] = {name: [] for name in names}
    for run in range(args.runs):
        for name in names:
            db.execute("delete from feedback")
            if name != "without clicks":
                db.execute("insert into feedback select * from bench_feedback")
            db.conn.commit()
            if "restart" in name:
                taste.forget()  # every model trained and every vector read again
            started = time.perf_counter()
            plans = select_digests(engine)
            runs[name].append(time.perf_counter() - started)
            log(f"run {run + 1}, {name}: {runs[name][-1]:.2f}s (load {os.getloadavg()[0]:.1f})")
    recommended = sum(1 for p in plans.values() for s in p.sections if s.recommended)
    print(f"## Digest selection: {args.members:,} members x 5 topics, 87k papers\n")
    print(
        markdown_table(
            ["members", "median s", "min s", "max s"],
            [
                [
                    name,
                    f"{statistics.median(t):.2f}",
                    f"{min(t):.2f}",
                    f"{max(t):.2f}",
                ]
                for name, t in runs.items()
            ],
        )
    )
    print(
        f"\nMembers with a Recommended section: {recommended:,}; load average {os.getloadavg()[0]:.1f}."
    )


def near(args: argparse.Namespace) -> None:
    """Cosines of the same paper listed twice against those of merely related papers."""
    from digest.taste import cosines, unit_vectors

    engine = open_engine(DIGEST_DIR / "paperboy.db", corpus_file(PAPERS_FILE), args.rebuild)
    index = engine.index
    by_title: dict[str, list[int]] = {}
    for rowid, title in engine.db.execute("select rowid, title from papers"):
        key = " ".join((title or "").lower().split())
        by_title.setdefault(key, []).append(rowid)
    twins = [rows[:2] for rows in by_title.values() if len(rows) >= 2]
    rng = random.Random(args.seed)
    twins = rng.sample(twins, min(500, len(twins)))
    same = []
    for a, b in twins:
        docs = [index.doc_of_rowid(a), index.doc_of_rowid(b)]
        if None in docs:
            continue
        a, b = unit_vectors(index, docs)
        same.append(float(cosines([a], [b])[0, 0]))
    # Each sampled paper's nearest other paper, by its own vector as a query.
    nearest = []
    for doc in rng.sample(list(index.live_docs()), 200):
        terms, values = index.doc_vector(int(doc))
        found, scores = index.score(terms, values / np.linalg.norm(values))
        # Its 50 best-scoring others: the nearest by cosine is among them.
        others_mask = found != doc
        found, scores = found[others_mask], scores[others_mask]
        best = found[np.argsort(-scores)[:50]]
        others = cosines(unit_vectors(index, [int(doc)]), unit_vectors(index, best)).ravel()
        nearest.append(float(others.max()) if len(others) else 0.0)
    q = lambda xs, f: float(np.quantile(xs, f))  # noqa: E731
    print("## Cosine of a paper with its near-duplicate, and with its nearest other paper\n")
    rows = []
    for name, xs in (("same title, listed twice", same), ("nearest other paper", nearest)):
        rows.append(
            [name, len(xs), f"{q(xs, 0.05):.2f}", f"{q(xs, 0.5):.2f}", f"{q(xs, 0.95):.2f}"]
        )
    print(markdown_table(["pairs", "n", "p5", "median", "p95"], rows))
    for t in (0.3, 0.4, 0.5, 0.6, 0.7):
        print(
            f"\nthreshold {t}: {np.mean(np.asarray(same) >= t):.0%} of duplicates caught, "
            f"{np.mean(np.asarray(nearest) >= t):.0%} of papers have a non-duplicate that close"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--method", choices=("rocchio", "svm"), default="rocchio")
    parser.add_argument("--speed", action="store_true", help="model update after a click, 87k")
    parser.add_argument("--batch", action="store_true", help="1,000 members with feedback, 87k")
    parser.add_argument("--near", action="store_true", help="near-duplicate cosines, 87k")
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--clicks-members", type=int, default=300)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument(
        "--set", action="append", default=[], help="NAME=VALUE: a digest.taste constant"
    )
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--dump", help="write per-member, per-round counts to this JSON file")
    args = parser.parse_args(argv)
    from digest import selection, taste

    for assignment in args.set:
        name, _, value = assignment.partition("=")
        module = selection if hasattr(selection, name) and not hasattr(taste, name) else taste
        setattr(module, name, type(getattr(module, name))(value))
    if args.speed:
        speed(args)
    elif args.batch:
        batch(args)
    elif args.near:
        near(args)
    else:
        quality(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
