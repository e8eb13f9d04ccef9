"""Search speed and memory: Paperboy against the anchors, same corpus, same queries, same run.

For each engine, at ``--scale 1`` (87k papers) or ``--scale 10`` (872k, a replica with new ids):

1. **ingest + index**: a child process turns the JSONL.gz into a persisted, query-ready index
   (``paperboy --db X ingest FILE`` / ``python -m bench.anchors build``). Wall time, the child's
   peak RSS and the index's size on disk.
2. **cold start**: wall time of a fresh process answering one query (``paperboy --db X search
   "diffusion models"`` / ``python -m bench.anchors search``), median of ``--cold-runs``.
   Engines take turns run by run so machine noise hits them alike. The page cache is warm
   (nothing here drops it), so this is process start-up + index open, not disk reads.
3. **warm latency**: one child process per engine opens the index and answers the disjoint
   warm-up queries; then the children take turns timing a pass over every measured query
   top-``--k`` (``--passes`` rounds, the engines' order turned each round, so machine noise
   hits them alike; a query's latency is its median over passes) and each reports p50/p99/
   mean, plus its peak RSS. Paperboy is timed through ``Engine.rank`` (ids + scores, like the
   anchors) and, after the rounds, through ``Engine.search(limit=5)``, the full answer with
   snippets the Slack bot sends, and ``Engine.similar``.

Queries: the dev qrels keywords + ``--queries`` author keywords sampled with a fixed seed from
paperlists (see ``corpora.speed_queries``). Results go to stdout and ``bench/work/speed-x{N}.md``
(raw numbers in ``.json``); progress goes to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import resource
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from bench import paperboy
from bench.anchors import ANCHORS, STEMMER, index_path
from bench.corpora import WORK_DIR, corpus_for_scale, speed_queries
from bench.measure import (
    dir_size_mb,
    log,
    markdown_table,
    median,
    peak_rss_mb,
    percentile,
    python_cmd,
    rss_mb,
    rss_split_mb,
    run_child,
)

ENGINES = ("fts5", "tantivy", "bm25s", "paperboy")
COLD_QUERY = "diffusion models"


def engine_index(engine: str, workdir: Path) -> Path:
    """Where an engine's persisted index lives (Paperboy: its database; the index sits beside)."""
    return workdir / "paperboy.db" if engine == "paperboy" else index_path(engine, workdir)


def disk_mb(engine: str, workdir: Path) -> float:
    """Everything the engine keeps on disk: for Paperboy the database, its WAL and index dir."""
    path = engine_index(engine, workdir)
    if engine != "paperboy":
        return dir_size_mb(path)
    return sum(dir_size_mb(p) for p in workdir.glob(path.name + "*"))


# -- step 1: ingest + index -----------------------------------------------------------------


def build(
    engine: str, corpus: Path, workdir: Path, timeout: float, max_memory_gb: float | None
) -> dict:
    """Build one engine's index in a child process; wall time and the child's own peak RSS."""
    target = engine_index(engine, workdir)
    if engine == "paperboy":
        paperboy.reset_db(target)
        child = run_child(
            paperboy.ingest_cmd(target, corpus),
            env=paperboy.engine_env(),
            timeout=timeout,
            max_memory_gb=max_memory_gb,
        ).check("paperboy ingest")
        found = re.search(r"index: ([\d,]+) papers", child.stderr)
        docs = int(found.group(1).replace(",", "")) if found else None
    else:
        child = run_child(
            python_cmd(
                "bench.anchors",
                "build",
                "--engine",
                engine,
                "--corpus",
                str(corpus),
                "--index",
                str(target),
            ),
            timeout=timeout,
            max_memory_gb=max_memory_gb,
        ).check(f"{engine} build")
        docs = json.loads(child.stdout.strip().splitlines()[-1])["docs"]
    return {
        "build_s": child.wall_s,
        "build_rss_mb": child.peak_rss_mb,
        "docs": docs,
        "disk_mb": disk_mb(engine, workdir),
    }


# -- step 2: cold start ---------------------------------------------------------------------


def cold_start_cmd(engine: str, workdir: Path) -> list[str]:
    """The one-query command a user (or a cron job) would run against a built index."""
    target = engine_index(engine, workdir)
    if engine == "paperboy":
        return paperboy.one_search_cmd(target, COLD_QUERY)
    return python_cmd(
        "bench.anchors", "search", "--engine", engine, "--index", str(target), COLD_QUERY
    )


def cold_starts(
    engines: Sequence[str], workdir: Path, runs: int, timeout: float
) -> tuple[dict[str, list[float]], dict[str, str]]:
    """``runs`` one-query processes per engine, round-robin so drift affects all engines.

    Returns the wall times per engine and, separately, the engines whose probe failed (they
    drop out of the later runs rather than aborting the whole benchmark).
    """
    walls: dict[str, list[float]] = {e: [] for e in engines}
    failed: dict[str, str] = {}
    env = paperboy.engine_env()
    for _ in range(runs):
        for engine in engines:
            if engine in failed:
                continue
            try:
                child = run_child(cold_start_cmd(engine, workdir), env=env, timeout=timeout).check(
                    f"{engine} cold start"
                )
            except RuntimeError as error:
                failed[engine] = _first_line_of_failure(str(error))
                continue
            walls[engine].append(child.wall_s)
    return {e: w for e, w in walls.items() if e not in failed}, failed


# -- step 3: warm latency (runs inside a child process, one per engine) ---------------------


def _time_queries(
    fn: Callable[[str], int], queries: Sequence[str], passes: int
) -> tuple[list[float], list[int]]:
    """Per-query latency in ms (median over ``passes`` of ``_timed_pass``) and the number of
    results returned."""
    runs = [_timed_pass(fn, queries) for _ in range(passes)]
    return [median(s) for s in zip(*(latencies for latencies, _ in runs), strict=True)], runs[-1][1]


def _summary(latencies: list[float], counts: list[int]) -> dict:
    """p50/p99/mean of per-query latencies, and how many queries came back empty."""
    return {
        "p50_ms": percentile(latencies, 50),
        "p99_ms": percentile(latencies, 99),
        "mean_ms": sum(latencies) / len(latencies),
        "empty": sum(c == 0 for c in counts),
        "latencies_ms": latencies,
    }


def _timed_pass(fn: Callable[[str], int], queries: Sequence[str]) -> tuple[list[float], list[int]]:
    """One pass over the queries: each one's latency in ms and its number of results."""
    latencies, counts = [], []
    for query in queries:
        started = time.perf_counter()
        counts.append(fn(query))
        latencies.append((time.perf_counter() - started) * 1000)
    return latencies, counts


def warm_worker(
    engine: str,
    index: Path,
    queries: list[str],
    warmup: list[str],
    k: int,
    passes: int,
    commands=None,
    reply=None,
) -> dict:
    """Open ``index``, warm up on queries that are not measured, then time every query.

    Driven by the parent (``warm_phase``) one line at a time (``commands``, its stdin):
    ``pass`` times one pass over the queries (the reply says how many passes so far),
    ``finish`` measures the rest (Paperboy's pages without MaxScore, ``search()`` and
    ``similar()``, ``passes`` times each) and ends with the report. So the engines' passes
    can take turns: machine noise, which comes and goes over seconds here, then hits every
    engine alike. With ``commands`` None (a caller in Python), ``passes`` passes in a row.
    """
    out: dict = {"engine": engine, "base_rss_mb": rss_mb()}
    started = time.perf_counter()
    if engine == "paperboy":
        pb = paperboy.open_engine(index)

        def rank(q: str) -> int:
            return len(pb.rank(q, k=k))
    else:
        anchor = ANCHORS[engine].open(index)

        def rank(q: str) -> int:
            return len(anchor.search(q, k))

    out["open_s"] = time.perf_counter() - started
    started = time.perf_counter()
    rank(warmup[0])
    out["first_query_s"] = time.perf_counter() - started
    for q in warmup[1:]:
        rank(q)
    samples: list[list[float]] = [[] for _ in queries]
    counts: list[int] = []
    if commands is None:
        commands = ["pass"] * passes + ["finish"]
    else:
        reply({"ready": True})
    for command in commands:
        if command.strip() != "pass":
            break
        latencies, counts = _timed_pass(rank, queries)
        for sample, latency in zip(samples, latencies, strict=True):
            sample.append(latency)
        if reply is not None:
            reply({"passed": len(samples[0])})
    out["rank"] = _summary([median(s) for s in samples], counts)
    out["passes"] = len(samples[0]) if samples else 0
    if engine == "paperboy":
        # The same lookups without MaxScore, in the same warm process: pruning's gain.
        def exhaustive(q: str) -> int:
            return len(pb.rank(q, k=k, prune=False))

        out["rank_exhaustive"] = _summary(*_time_queries(exhaustive, queries, passes))

        def answer(q: str) -> int:
            return len(pb.search(q, limit=5).hits)

        for q in warmup:
            answer(q)
        out["search5"] = _summary(*_time_queries(answer, queries, passes))
    out["peak_rss_mb"] = peak_rss_mb()
    out["end_anon_mb"], out["end_file_mb"] = rss_split_mb()
    if engine == "paperboy":
        # "Similar papers" (the button under each result) for 200 papers spread over the
        # corpus, after the memory above was read: the lookups' serving memory stays theirs.
        every = max(pb.index.n_docs // SIMILAR_PAPERS, 1)
        papers = [
            row[0]
            for row in pb.db.conn.execute(
                "select id from papers where rowid % ? = 0 limit ?", [every, SIMILAR_PAPERS]
            )
        ]

        def similar(paper_id: str) -> int:
            return len(pb.similar(paper_id).hits)

        for paper_id in papers[:10]:
            similar(paper_id)
        out["similar"] = _summary(*_time_queries(similar, papers, passes))
    return out


#: Papers whose "similar papers" are timed (``warm_worker``).
SIMILAR_PAPERS = 200


class _WarmChild:
    """A ``warm_worker`` child driven over its stdin and stdout (one JSON line per reply),
    with its address space capped (``run_child``'s ``max_memory_gb``)."""

    def __init__(self, engine: str, workdir: Path, queries_file: Path, args: argparse.Namespace):
        cap = args.max_memory_gb or None

        def cap_memory() -> None:  # in the child, between fork and exec
            limit = int(cap * 2**30)  # type: ignore[operator]
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

        self.engine, self.timeout = engine, args.timeout
        self._stderr = tempfile.TemporaryFile("w+b")  # noqa: SIM115 (closed by ``close``)
        self._pending = b""  # read from the child's stdout, not yet a whole line
        cmd = python_cmd(
            "bench.search_speed",
            "--worker",
            engine,
            "--index",
            str(engine_index(engine, workdir)),
            "--queries-file",
            str(queries_file),
            "--k",
            str(args.k),
            "--passes",
            str(args.passes),
        )
        try:
            self.proc = subprocess.Popen(
                cmd,
                env=paperboy.engine_env(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                bufsize=0,
                preexec_fn=cap_memory if cap else None,
            )
        except OSError as error:
            self._stderr.close()
            raise RuntimeError(f"{engine} warm latency failed to start: {error}") from None

    def ask(self, command: str | None = None) -> dict:
        """Send ``command`` (None: only wait) and return the child's next JSON reply (lines
        that are not JSON are skipped). The child's output is read from its pipe into our
        own buffer (``os.read``), so no line already read can hide from ``select``. A child
        that dies, hangs past ``--timeout`` or answers garbage raises RuntimeError, with the
        end of its stderr."""
        try:
            if command is not None:
                self.proc.stdin.write(command.encode() + b"\n")
            deadline = time.monotonic() + self.timeout
            fd = self.proc.stdout.fileno()
            while True:
                line, newline, rest = self._pending.partition(b"\n")
                if newline:
                    self._pending = rest
                    if line.startswith(b"{"):
                        return json.loads(line)
                    continue
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([fd], [], [], left)[0]:
                    raise TimeoutError("timed out")
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    raise EOFError("its output ended")
                self._pending += chunk
        except (OSError, ValueError, EOFError) as error:  # (TimeoutError is an OSError)
            self._stderr.seek(0)
            said = self._stderr.read()[-3000:].decode(errors="replace")
            self.close(kill=True)  # (broken either way: not waited for)
            raise RuntimeError(
                f"{self.engine} warm latency failed ({error}; exit {self.proc.returncode}):\n{said}"
            ) from None

    def close(self, kill: bool = False) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.proc.stdin.close()
        if kill:
            self.proc.kill()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        finally:
            self._stderr.close()


# -- report ---------------------------------------------------------------------------------


def _versions() -> str:
    """Library versions, so a table pasted into the README says what it measured."""
    import sqlite3
    from importlib.metadata import PackageNotFoundError, version

    parts = []
    for dist in ("tantivy", "bm25s", "scikit-learn", "numpy"):
        with contextlib.suppress(PackageNotFoundError):  # report what is there, skip the rest
            parts.append(f"{dist} {version(dist)}")
    parts.append(f"SQLite {sqlite3.sqlite_version}")
    return ", ".join(parts)


def _first_line_of_failure(message: str) -> str:
    """The gist of a child's failure for the table: its exit line and last stderr line."""
    lines = [line for line in message.splitlines() if line.strip()]
    return " / ".join(dict.fromkeys([lines[0], lines[-1]])) if lines else "failed"


def render(
    scale: int,
    results: dict[str, dict],
    n_queries: int,
    k: int,
    passes: int,
    cold_runs: int,
    load: tuple[float, float],
    failed: dict[str, str],
    warnings: Sequence[str] = (),
    builds: int = 1,
) -> str:
    """Markdown: one table of absolute numbers, one of Paperboy ÷ each anchor."""
    docs = next((r["docs"] for r in results.values() if r.get("docs")), None)
    rows = []
    for name, r in results.items():
        w = r["warm"]
        rows.append(
            [
                name + (" (build reused)" if r.get("reused") else ""),
                r.get("build_s"),
                r.get("build_rss_mb"),
                r.get("disk_mb"),
                median(r["cold_s"]),
                w["open_s"] * 1000,
                w["rank"]["p50_ms"],
                w["rank"]["p99_ms"],
                w["rank"]["mean_ms"],
                w["peak_rss_mb"],
                f"{w.get('end_anon_mb', 0):,.0f} / {w.get('end_file_mb', 0):,.0f}",
            ]
        )
        if "rank_exhaustive" in w:
            ex = w["rank_exhaustive"]
            rows.append(
                [f"{name} without MaxScore"]
                + [None] * 5
                + [ex["p50_ms"], ex["p99_ms"], ex["mean_ms"], None, "-"]
            )
        for key, label in (("search5", "search() top-5 + snippets"), ("similar", "similar()")):
            if key in w:
                s5 = w[key]
                rows.append(
                    [f"{name} {label}", None, None, None, None, None]
                    + [s5["p50_ms"], s5["p99_ms"], s5["mean_ms"], None, "-"]
                )
    headers = [
        "engine",
        "ingest+index s",
        "build peak RSS MB",
        "disk MB",
        f"cold start s (median of {cold_runs})",
        "open ms",
        f"p50 ms (top-{k})",
        f"p99 ms (top-{k})",
        "mean ms",
        "serve peak RSS MB",
        "serve RSS at end, anon / file MB",
    ]
    lines = [
        f"### Search speed, scale {scale}x ({docs:,} papers)"
        if docs
        else f"### Search speed, scale {scale}x",
        "",
        f"{n_queries} queries (dev keywords + sampled author keywords), each timed {passes}x "
        "after a separate warm-up set, the engines' passes taking turns; latency = per-query "
        "median, then p50/p99 over queries. "
        f"{os.cpu_count()} CPUs, load average {load[0]:.1f} at start / {load[1]:.1f} at end; "
        f"Python {platform.python_version()}, {_versions()}; bm25s stemmer: {STEMMER}"
        + (
            f"; Paperboy source {results['paperboy'].get('code_after')}."
            if "paperboy" in results
            else "."
        ),
        "",
        *(f"> **Warning:** {w}\n" for w in warnings),
        markdown_table(headers, rows),
        "",
        "ingest+index = wall time of the child that turns the JSONL.gz into a query-ready index"
        + (
            f" (median of {builds} rounds, the engines taking turns; build peak RSS likewise); "
            if builds > 1
            else "; "
        )
        + "open = in-process time to open the index, including importing the engine's library; "
        "RSS = that child's own peak (VmHWM), Python interpreter included; anon / file = its "
        "resident memory after the last query split into private heap and file-backed pages "
        "(mmap'd index files: page cache, shared and reclaimable).",
    ]
    empty = {
        n: r["warm"]["rank"]["empty"] for n, r in results.items() if r["warm"]["rank"]["empty"]
    }
    if empty:
        lines += [
            "",
            "Queries with no results: " + ", ".join(f"{n} {c}" for n, c in empty.items()) + ".",
        ]
    reused = [f"{n} at {r['at']}" for n, r in results.items() if r.get("reused")]
    if reused:
        lines += [
            "",
            "(build reused): ingest+index numbers recorded by an earlier run ("
            + ", ".join(reused)
            + "); every other column is from this run.",
        ]
    if failed:
        lines += ["", "Failed: " + "; ".join(f"**{n}**: {m}" for n, m in failed.items())]
    if "paperboy" in results and len(results) > 1:
        pb = results["paperboy"]
        ratio_rows = []
        for name, r in results.items():
            if name == "paperboy":
                continue
            ratio_rows.append(
                [
                    f"paperboy ÷ {name}",
                    _ratio(pb.get("build_s"), r.get("build_s")),
                    _ratio(pb.get("build_rss_mb"), r.get("build_rss_mb")),
                    _ratio(pb.get("disk_mb"), r.get("disk_mb")),
                    _ratio(median(pb["cold_s"]), median(r["cold_s"])),
                    _ratio(pb["warm"]["rank"]["p50_ms"], r["warm"]["rank"]["p50_ms"]),
                    _ratio(pb["warm"]["rank"]["p99_ms"], r["warm"]["rank"]["p99_ms"]),
                    _ratio(pb["warm"]["peak_rss_mb"], r["warm"]["peak_rss_mb"]),
                ]
            )
        lines += [
            "",
            "Ratios (below 1 = Paperboy faster / smaller):",
            "",
            markdown_table(
                ["", "ingest+index", "build RSS", "disk", "cold start", "p50", "p99", "serve RSS"],
                ratio_rows,
            ),
        ]
    return "\n".join(lines)


def _ratio(a: float | None, b: float | None) -> str:
    """``a/b`` as ``1.23x``, or a dash when either side was not measured."""
    if not a or not b:
        return "-"
    return f"{a / b:.2f}x"


# -- orchestration --------------------------------------------------------------------------


def build_phase(
    engines: Sequence[str],
    corpus: Path,
    workdir: Path,
    reuse: set[str],
    args: argparse.Namespace,
    results: dict[str, dict],
    failed: dict[str, str],
) -> None:
    """Step 1 for every engine, or the recorded numbers of an earlier build for ``reuse``.

    ``--builds`` rounds, the engines taking turns (their order turned each round, as the
    warm passes are), so that noise hits them alike; an engine's time and peak are the
    medians of its rounds (each round's time in ``build_runs_s``). Each build is recorded
    in ``builds.json`` (with Paperboy's source stamp) so a later run can re-measure one
    engine without rebuilding the others.
    """
    builds_file = workdir / "builds.json"
    builds = json.loads(builds_file.read_text(encoding="utf-8")) if builds_file.exists() else {}
    order = []
    for engine in engines:
        if engine in reuse and engine in builds and engine_index(engine, workdir).exists():
            log(f"{engine}: reusing {engine_index(engine, workdir)} built {builds[engine]['at']}")
            results[engine].update(builds[engine], reused=True)
        else:
            order.append(engine)
    rounds: dict[str, list[dict]] = {engine: [] for engine in order}
    codes: dict[str, str] = {}
    for turn in range(max(args.builds, 1)):
        shift = turn % max(len(order), 1)
        for engine in order[shift:] + order[:shift]:
            if engine in failed:
                continue
            log(f"{engine}: ingest + index (round {turn + 1} of {args.builds}) ...")
            if engine == "paperboy":
                codes.setdefault(engine, paperboy.code_fingerprint())
            try:
                built = build(engine, corpus, workdir, args.timeout, args.max_memory_gb or None)
            except RuntimeError as error:
                failed[engine] = _first_line_of_failure(str(error))
                log(f"{engine}: build FAILED, skipping its other steps\n{error}")
                continue
            rounds[engine].append(built)
            log(
                f"{engine}: {built['build_s']:.1f}s, peak {built['build_rss_mb']:.0f} MB, "
                f"{built['disk_mb']:.0f} MB on disk"
            )
            # Recorded round by round: an interrupted run keeps the rounds it finished.
            done = rounds[engine]
            results[engine].update(
                built,  # (the index kept: the last round's)
                build_s=median([b["build_s"] for b in done]),
                build_rss_mb=median([b["build_rss_mb"] for b in done]),
                build_runs_s=[b["build_s"] for b in done],
            )
            if engine in codes:
                results[engine]["code"] = codes[engine]
            builds[engine] = {**results[engine], "at": time.strftime("%Y-%m-%d %H:%M")}
            builds_file.write_text(json.dumps(builds, indent=1), encoding="utf-8")


def warm_phase(
    engines: Sequence[str],
    workdir: Path,
    queries_file: Path,
    args: argparse.Namespace,
    results: dict[str, dict],
    failed: dict[str, str],
) -> None:
    """Step 3: a child per engine, all open at once, their timed passes taking turns.

    Each child opens its index and warms up (one at a time), then the passes go round:
    pass p of every engine, the engines' order turned by one each round, so machine noise
    (which comes and goes over seconds on a shared VM) hits every engine alike rather than
    whichever ran at the noisy moment. A child is idle (blocked on its stdin) while another
    runs. Paperboy's source is stamped again straight after its report.
    """
    n_queries = len(json.loads(queries_file.read_text())["queries"])
    children: dict[str, _WarmChild] = {}
    for engine in sorted(engines, key=lambda e: e != "paperboy"):
        log(f"{engine}: opening the index and warming up ...")
        child = _WarmChild(engine, workdir, queries_file, args)
        try:
            child.ask()
        except RuntimeError as error:
            failed[engine] = _first_line_of_failure(str(error))
            log(f"{engine}: warm latency FAILED\n{error}")
            continue
        children[engine] = child
    order = list(children)
    log(f"warm latency over {n_queries} queries x {args.passes}, the engines taking turns ...")
    for turn in range(args.passes):
        shift = turn % max(len(order), 1)
        for engine in order[shift:] + order[:shift]:
            if engine in failed:
                continue
            try:
                children[engine].ask("pass")
            except RuntimeError as error:
                failed[engine] = _first_line_of_failure(str(error))
                log(f"{engine}: warm latency FAILED\n{error}")
    for engine, child in children.items():
        if engine in failed:
            child.close()
            continue
        try:
            results[engine]["warm"] = w = child.ask("finish")
        except RuntimeError as error:
            failed[engine] = _first_line_of_failure(str(error))
            log(f"{engine}: warm latency FAILED\n{error}")
            continue
        finally:
            child.close()
        if engine == "paperboy":
            results[engine]["code_after"] = paperboy.code_fingerprint()
        log(
            f"{engine}: p50 {w['rank']['p50_ms']:.2f} ms, p99 {w['rank']['p99_ms']:.2f} ms, "
            f"peak {w['peak_rss_mb']:.0f} MB"
        )
        if "rank_exhaustive" in w:
            e = w["rank_exhaustive"]
            log(f"{engine} without MaxScore: p50 {e['p50_ms']:.2f} ms, p99 {e['p99_ms']:.2f} ms")


def paperboy_warnings(results: dict[str, dict], workdir: Path, stamp: str | None) -> list[str]:
    """Reasons not to trust Paperboy's row: source changed mid-measurement, index rebuilt."""
    pb = results.get("paperboy")
    if not pb:
        return []
    warnings = []
    if pb.get("code") and pb.get("code_after") and pb["code"] != pb["code_after"]:
        warnings.append(
            f"Paperboy's engine source changed between its ingest and its latency "
            f"run ({pb['code']} -> {pb['code_after']}): its numbers mix two "
            f"versions; rerun."
        )
    if paperboy.index_stamp(engine_index("paperboy", workdir)) != stamp:
        warnings.append(
            "Paperboy rebuilt its index after ingest (index format or corpus "
            "version changed?), so its open/latency/memory numbers include a "
            "rebuild; rerun."
        )
    return warnings


# -- entry point ----------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """Parse options; run the worker when asked to, else the whole benchmark for one scale."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.search_speed",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--scale", type=int, default=1, help="1 = 87k papers, 10 = 872k")
    parser.add_argument(
        "--queries",
        type=int,
        default=500,
        help="sampled keyword queries on top of the 60 dev queries",
    )
    parser.add_argument(
        "--engines",
        default=",".join(ENGINES),
        help="comma-separated subset of " + ",".join(ENGINES),
    )
    parser.add_argument("--k", type=int, default=10, help="results per ranked query")
    parser.add_argument("--passes", type=int, default=3, help="timed passes over the queries")
    parser.add_argument("--cold-runs", type=int, default=5, help="one-query processes per engine")
    parser.add_argument(
        "--builds",
        type=int,
        default=1,
        help="ingest + index rounds per engine, taking turns (the median is reported)",
    )
    parser.add_argument(
        "--reuse",
        default="",
        metavar="ENGINES",
        help="comma-separated engines whose index (and recorded ingest+index "
        "numbers) from an earlier run at this scale are reused, e.g. "
        "fts5,tantivy,bm25s to re-measure only Paperboy's build",
    )
    parser.add_argument(
        "--timeout", type=float, default=3600, help="seconds before a child process is killed"
    )
    parser.add_argument(
        "--max-memory-gb",
        type=float,
        default=16,
        help="address-space cap per child (0 = none); a child over it fails "
        "and is reported instead of OOM-killing the machine",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="report path (default bench/work/speed-x{scale}.md; JSON beside it)",
    )
    # Internal: the per-engine child of step 3.
    parser.add_argument("--worker", choices=ENGINES, help=argparse.SUPPRESS)
    parser.add_argument("--index", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--queries-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        spec = json.loads(args.queries_file.read_text(encoding="utf-8"))

        def reply(message: dict) -> None:
            print(json.dumps(message), flush=True)

        report = warm_worker(
            args.worker,
            args.index,
            spec["queries"],
            spec["warmup"],
            args.k,
            args.passes,
            commands=sys.stdin,
            reply=reply,
        )
        reply(report)
        return 0

    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    unknown = set(engines) - set(ENGINES)
    if unknown:
        parser.error(f"unknown engines: {', '.join(sorted(unknown))}")
    if "paperboy" in engines and not paperboy.available():
        log("paperboy: bot.engine.search.Engine not importable yet; measuring the anchors only")
        engines.remove("paperboy")

    load_start = os.getloadavg()[0]
    workdir = WORK_DIR / f"speed-x{args.scale}"
    workdir.mkdir(parents=True, exist_ok=True)
    corpus = corpus_for_scale(args.scale)
    queries, warmup = speed_queries(args.queries)
    queries_file = workdir / "queries.json"
    queries_file.write_text(json.dumps({"queries": queries, "warmup": warmup}), encoding="utf-8")
    log(f"scale {args.scale}x: {corpus.name}, {len(queries)} queries, engines {engines}")

    results: dict[str, dict] = {e: {} for e in engines}
    failed: dict[str, str] = {}
    reuse = {e.strip() for e in args.reuse.split(",") if e.strip()}
    build_phase(engines, corpus, workdir, reuse, args, results, failed)
    engines = [e for e in engines if e not in failed]
    stamp = paperboy.index_stamp(engine_index("paperboy", workdir))

    log(f"cold start: {args.cold_runs} runs x {len(engines)} engines ...")
    walls, cold_failed = cold_starts(engines, workdir, args.cold_runs, args.timeout)
    failed.update(cold_failed)
    for engine, engine_walls in walls.items():
        results[engine]["cold_s"] = engine_walls
        log(f"{engine}: cold start median {median(engine_walls):.2f}s")
    engines = [e for e in engines if e not in failed]

    warm_phase(engines, workdir, queries_file, args, results, failed)
    for engine in failed:
        log(f"{engine}: FAILED: {failed[engine]}")
        results.pop(engine, None)
    warnings = paperboy_warnings(results, workdir, stamp)
    for warning in warnings:
        log("WARNING: " + warning)

    report = render(
        args.scale,
        results,
        len(queries),
        args.k,
        args.passes,
        args.cold_runs,
        (load_start, os.getloadavg()[0]),
        failed,
        warnings,
        args.builds,
    )
    print(report)
    out = args.out or WORK_DIR / f"speed-x{args.scale}.md"
    out.write_text(report + "\n", encoding="utf-8")
    out.with_suffix(".json").write_text(json.dumps(results, indent=1), encoding="utf-8")
    log(f"wrote {out} and {out.with_suffix('.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
