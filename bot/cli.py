"""The ``paperboy`` command line: a thin layer over the engine, the Slack app and the digest.

Every command takes ``--db PATH`` (default: ``$PAPERBOY_DB``, else ``paperboy.db`` in the
working directory). A fresh database is filled from the seed corpus in ``data/`` the first
time a command other than ``ingest`` uses it.

Examples::

    $ paperboy search "diffusion models" venue:ICLR
    $ paperboy serve                          # the Slack app (or the local playground)
    $ paperboy scheduler                      # the Procfile's clock: process; runs until stopped
    $ paperboy digest preview --user U123     # what U123's digest would hold now
    $ paperboy digest send                    # one scheduler tick: the digests due now
    $ paperboy digest send --now              # every member's digest right away

The Slack app, the digest clock, numpy and the shared state (SQLAlchemy) are imported inside
the commands that use them (not to break a cycle: there is none), so ``paperboy --help`` and a
lookup stay fast (tests/test_cli_imports.py holds them to it).
"""

from __future__ import annotations

import json
import logging
import os
import select
import shlex
import shutil
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from .engine.latex import readable, readable_pieces
from .engine.query import QueryError
from .english import count, empty_corpus, liked
from .help_text import QUERY_EXAMPLES, QUERY_SUMMARY
from .logs import configure_logging, say
from .settings import DEFAULT_DB, Settings, SettingsError

if TYPE_CHECKING:  # the engine (and numpy) load only in the commands that use them
    from .engine.search import Engine
from .stopping import stops_on_sigterm

NO_DATABASE = (
    "There is no database at {path}: check the path, or create one with `paperboy ingest FILE` "
    "(or `paperboy serve`, which starts it from the seed corpus)."
)


def db_option(func):
    return click.option(
        "--db",
        "db_path",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="SQLite database (default: $PAPERBOY_DB or ./paperboy.db).",
    )(func)


class BadSettings(click.ClickException):
    """Exit 2 with one line per bad setting, and no traceback."""

    exit_code = 2

    def __init__(self, problems: list[str]):
        super().__init__(" ".join(problems))
        self.problems = problems

    def show(self, file=None) -> None:
        for problem in self.problems:
            click.echo(problem, err=True)


def load_settings() -> Settings:
    """Settings from the environment, all checked: every bad value is named, then exit 2.

    Every command calls this before doing anything, so they all fail alike.
    """
    try:
        return Settings.from_env()
    except SettingsError as error:
        raise BadSettings(error.problems) from None


def open_engine(
    settings: Settings,
    db_path: Path,
    *,
    write: bool,
    seed: bool = True,
    allow_read_only: bool = False,
    shared_state: bool = True,
):
    """The engine for a command; database problems end it with one sentence (exit 1).

    Only commands that write (``write=True``: ingest, serve, worker, scheduler, digest send)
    create a database, filling a new one from the seed corpus when ``seed``, and they refuse
    one this user may not write, unless ``allow_read_only`` (a Slack app, which can still
    answer lookups from it; see ``Engine.read_only``). The others never create a database,
    say so when there is none, and read a read-only one.

    ``shared_state=False``: a lookup, which reads only the corpus file, so it neither opens
    ``DATABASE_URL`` (a round trip and a migration check) nor imports SQLAlchemy.
    """
    from .engine.corpus import DatabaseError, NoDatabase
    from .engine.search import Engine

    seed_dir = settings.seed_dir if write and seed else None
    if seed_dir and not db_path.exists() and not seed_dir.is_dir():
        click.echo(
            f"The seed folder {seed_dir} does not exist, so the new database starts empty: "
            "add papers with `paperboy ingest FILE`.",
            err=True,
        )
        seed_dir = None
    try:
        shared = False
        # Without DATABASE_URL the state is the corpus file: SQLAlchemy (half a second of an
        # ingest's start) is not imported for nothing, unless a state was configured before.
        if (shared_state or write) and (settings.database_url or "bot.state" in sys.modules):
            from .state import configure as configure_state  # SQLAlchemy: see above

            # DATABASE_URL, when set, holds the state
            shared = configure_state(settings.database_url) is not None
        if write and shared:  # seeded from the shared corpus's papers when it has some
            from . import replica

            engine = replica.open_engine(db_path, seed_dir, create=write)
        else:
            engine = Engine.open(db_path, seed_dir=seed_dir, create=write)
    except NoDatabase:
        raise click.ClickException(NO_DATABASE.format(path=db_path)) from None
    except DatabaseError as error:
        raise click.ClickException(str(error)) from None
    if write and engine.read_only and not allow_read_only:
        raise click.ClickException(
            f"Cannot write to the database at {db_path}: this user may not write it or its "
            "folder (run paperboy as the database's owner, or fix the permissions)."
        )
    return engine


class Context:
    """What a command needs: the settings (read, checked and logging set up on first use, so
    ``paperboy CMD --help`` works whatever the environment) and the database path."""

    def __init__(self, db_path: Path | None):
        self._db_path = db_path
        self._settings: Settings | None = None
        self.seed_preview = False  # answering from the seed corpus, no database yet

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = load_settings()
            configure_logging(self._settings)
        return self._settings

    @property
    def db_path(self) -> Path:
        return self._db_path or self.settings.db_path

    def engine(self, write: bool = False, seed: bool = True, shared_state: bool = True):
        """The engine; read-only commands never create a database (see ``open_engine``, also
        for ``shared_state``).

        One exception keeps a fresh install useful: with no database at the default
        ``./paperboy.db``, a lookup answers from the seed corpus, read into a temporary
        folder that is removed when the command ends (nothing is left in the working folder).
        """
        path = self.db_path
        if not write and path == DEFAULT_DB and not path.exists():
            return self._seed_engine()
        return open_engine(self.settings, path, write=write, seed=seed, shared_state=shared_state)

    def _seed_engine(self):
        seed_dir = self.settings.seed_dir
        if not seed_dir.is_dir():
            raise click.ClickException(
                f"There is no database at {self.db_path} and no seed folder at {seed_dir}: "
                "add papers with `paperboy ingest FILE`."
            )
        self.seed_preview = True
        folder = Path(tempfile.mkdtemp(prefix="paperboy-seeds-"))
        click.get_current_context().call_on_close(lambda: shutil.rmtree(folder, True))
        engine = open_engine(self.settings, folder / "seeds.db", write=True)
        click.secho(
            f"(No database at {self.db_path} yet: answering from the "
            f"{count(engine.corpus.count(), 'seed paper')}. `paperboy serve` creates it with "
            "these papers, `paperboy ingest FILE` with yours.)",
            dim=True,
            err=True,
        )
        return engine


def _ctx(click_ctx: click.Context, db_path: Path | None) -> Context:
    parent = click_ctx.find_object(Context)
    if db_path is None and parent is not None:
        return parent
    return Context(db_path)


class _Commands(click.Group):
    """The command group, ending quietly with status 0 when its reader goes away
    (``paperboy search x | head``) where click would exit 1: the reader had all it wanted."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            if not _stdout_closed():  # another pipe (a socket, a child): a real failure
                raise
            # Python's advice (the signal module's docs): stdout to devnull, so that the
            # flush at exit does not fail on the closed pipe again.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise SystemExit(0) from None


def _title(paper: dict) -> str:
    """A paper's title as the terminal shows it: its LaTeX readable, a derived one marked."""
    title = readable(paper.get("title") or "")
    if title and paper.get("title_derived"):
        title += "  (title derived from the abstract)"
    return title


def _check_user(user_id: str) -> None:
    if not user_id.strip():
        raise click.BadParameter(
            "give a member's Slack user id, like U0123ABCD.", param_hint="--user"
        )


def _stdout_closed() -> bool:
    """Whether stdout is a pipe whose reader has gone (poll reports an error on it)."""
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError):  # not a file at all (tests' CliRunner)
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & select.POLLERR for _, events in poller.poll(0))


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@db_option
@click.version_option(package_name="paperboy")
@click.pass_context
def main(ctx: click.Context, db_path: Path | None) -> None:
    """Paperboy: find ML papers, subscribe to topics, get a daily digest in Slack."""
    ctx.obj = Context(db_path)
    if os.environ.get("NO_COLOR"):  # https://no-color.org: any non-empty value
        ctx.color = False  # every command's echo/secho inherits this, on a terminal too


@main.command()
@click.argument("sources", nargs=-1, required=True, metavar="PATHS...")
@db_option
@click.pass_context
def ingest(ctx: click.Context, sources: tuple[str, ...], db_path: Path | None) -> None:
    """Add or update papers from files (seed text, JSON, JSON Lines, CSV, arXiv Atom; .gz too).

    Re-ingesting a file changes nothing; a changed paper is updated in place. Rejected
    records are listed with their file and line; the exit status is 1 when nothing at all
    could be read.
    """
    for source in sources:
        if "://" in source or source.startswith("arxiv:"):
            raise click.BadParameter(
                f"{source} is not a file: ingest reads files. Download it first (curl -o "
                "papers.xml URL), or list it in PAPERBOY_FEEDS, which the scheduler fetches "
                "daily (arXiv categories too).",
                param_hint="PATHS",
            )
    paths = tuple(Path(source) for source in sources)
    context = _ctx(ctx, db_path)
    fresh = not context.db_path.exists()
    engine = context.engine(write=True, seed=False)
    report = engine.ingest(paths, progress=_progress)
    # Nothing read (a typo, an empty file) into a database made for it: none is left, so a
    # fresh folder's lookups still answer from the seed corpus.
    discard = fresh and not report.ok
    for message in report.file_errors:
        click.secho(message, fg="red", err=True)
    rejected = report.rejected
    for item in rejected[:50]:
        click.secho(f"rejected: {item}", fg="yellow", err=True)
    if len(rejected) > 50:
        click.secho(f"... and {len(rejected) - 50:,} more rejected records.", fg="yellow", err=True)
    for result in report.files:
        click.echo(
            f"{result.path}: {result.format}, {count(result.papers, 'paper')} read", err=True
        )
    if report.index and not discard:
        built, searchable = report.index, engine.index.n_live
        if built.documents < searchable:  # a delta segment: its size is not the index's
            click.echo(
                f"index: {count(built.documents, 'paper')} indexed ({count(built.terms, 'term')}) "
                f"in {built.seconds:.1f}s; {count(searchable, 'paper')} searchable",
                err=True,
            )
        else:
            click.echo(
                f"index: {count(built.documents, 'paper')}, {count(built.terms, 'term')}, "
                f"built in {built.seconds:.1f}s",
                err=True,
            )
    click.echo(report.summary())
    if discard:
        _remove_database(context.db_path)
        sys.exit(1)
    _share(engine, report)
    if not report.ok:
        sys.exit(1)


def _remove_database(path: Path) -> None:
    """Remove a database this command made, its index and their companions."""
    from .engine.index import index_dir_for

    shutil.rmtree(index_dir_for(path), ignore_errors=True)
    for name in (f"{path}-wal", f"{path}-shm", f"{path}-journal", f"{index_dir_for(path)}.lock"):
        Path(name).unlink(missing_ok=True)
    path.unlink(missing_ok=True)


def _share(engine, report) -> None:
    """With DATABASE_URL, the papers go to the shared corpus too (every host follows it); a
    database that does not answer is one sentence and exit 1 (running it again shares them)."""
    state = sys.modules.get("bot.state")
    if state is None or state.configured() is None:
        return  # no DATABASE_URL: nothing to share with
    from .replica import publish
    from .state import StateError

    try:
        shared = publish(engine)
    except StateError as error:
        raise click.ClickException(
            f"The papers were saved in {engine.db_path} ({report.summary()}), but not shared "
            f"with the other hosts: {error} Run the same `paperboy ingest` again to share them."
        ) from None
    if shared is not None and shared.changed:
        click.echo(f"shared corpus: {shared.added:,} added, {shared.updated:,} updated", err=True)


def _progress(papers: Iterable) -> Iterable:
    """A progress bar on a terminal (papers stream in, so it counts rather than estimates)."""
    if not sys.stderr.isatty():
        return papers
    return _bar(papers)


def _bar(papers: Iterable) -> Iterable:
    with click.progressbar(
        papers, length=0, label="reading papers", file=sys.stderr, show_pos=True, show_eta=False
    ) as bar:
        yield from bar


#: ``paperboy search --help``: the query language from ``bot.help_text`` (Slack's help too).
SEARCH_HELP = f"Look papers up: {QUERY_SUMMARY}.\n\n\b\n" + "\n".join(
    f"{u.does[0].upper()}{u.does[1:]}:\n  paperboy search {shlex.quote(u.args)}"
    for u in QUERY_EXAMPLES
)


class QueryCommand(click.Command):
    """A command whose words may start with "-": `search -diffusion` is a query with an
    exclusion (answered by the query parser), not an unknown option "-d"."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        options: list[str] = []
        words: list[str] = []
        names = {
            name: p
            for p in self.get_params(ctx)
            if p.param_type_name == "option"
            for name in p.opts
        }
        rest = iter(args)
        for arg in rest:
            if arg == "--":
                words.extend(rest)
            elif arg[:2] in names and arg[2:].isdigit() and not arg.startswith("--"):
                options.append(arg)  # -n5
            elif arg.split("=", 1)[0] in names and arg.startswith("-"):
                options.append(arg)
                param = names[arg.split("=", 1)[0]]
                if "=" not in arg and not getattr(param, "is_flag", False):
                    options.extend(value for value in [next(rest, None)] if value is not None)
            else:
                words.append(arg)
        return super().parse_args(ctx, options + (["--", *words] if words else []))


@main.command(cls=QueryCommand, help=SEARCH_HELP, short_help="Look papers up.")
@click.argument("query", nargs=-1)
@click.option(
    "--limit",
    "-n",
    default=10,
    show_default=True,
    type=click.IntRange(min=1),
    help="How many results.",
)
@click.option(
    "--offset", default=0, type=click.IntRange(min=0), help="Skip this many results (paging)."
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.option(
    "--batch",
    type=click.File("rb"),
    default=None,
    help="Read one query per line from FILE ('-' for stdin); prints one JSON line per query.",
)
@db_option
@click.pass_context
def search(ctx, query: tuple[str, ...], limit: int, offset: int, as_json: bool, batch, db_path):
    # The help is written from bot/help_text.py, as Slack's is (see SEARCH_HELP).
    if batch is not None and query:
        raise click.UsageError(
            f"Give the queries in the --batch file or as words, not both ({' '.join(query)!r})."
        )
    query = " ".join(query)
    engine = _with_papers(_ctx(ctx, db_path).engine(shared_state=False))
    if batch is not None:
        for answer in _batch(engine, batch, limit):
            click.echo(json.dumps(answer, ensure_ascii=False))
        return
    _show(engine.search(query, limit=limit, offset=offset), as_json)


def _batch(engine, lines: Iterable[bytes], limit: int) -> Iterable[dict]:
    """One answer per non-blank line, numbered. Lines are decoded one by one, so a line that
    is not UTF-8 is reported on its own and the others are still answered."""
    for number, raw in enumerate(lines, start=1):
        try:
            text = raw.decode("utf-8-sig" if number == 1 else "utf-8").strip()
        except UnicodeDecodeError as error:
            yield {
                "line": number,
                "query": raw.decode("utf-8", "replace").strip(),
                "results": [],
                "error": f"Line {number} is not UTF-8 text (byte {raw[error.start]:#04x} at "
                f"position {error.start + 1}), so it was not searched.",
            }
            continue
        if not text:
            continue
        answer: dict = {"line": number, "query": text, "results": []}
        try:
            ranked = engine.rank(text, k=limit, raise_errors=True)
            answer["results"] = [{"id": i, "score": round(s, 6)} for i, s in ranked]
        except QueryError as error:
            answer["error"] = str(error)
        yield answer


@main.command()
@click.argument("paper_id")
@click.option(
    "--limit", "-n", default=5, show_default=True, type=click.IntRange(min=1), help="How many."
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@db_option
@click.pass_context
def similar(ctx, paper_id: str, limit: int, as_json: bool, db_path) -> None:
    """Papers most like PAPER_ID (ids are shown by `paperboy search`)."""
    engine = _with_papers(_ctx(ctx, db_path).engine(shared_state=False))
    result = engine.similar(paper_id, limit=limit)
    if not as_json and not result.error and not result.hits:
        # Said as Slack's "Similar papers" says it: the result's query ("similar:ID") is
        # the engine's label, not something the user typed.
        click.echo(f"No papers are similar to {paper_id}.")
        return
    if not as_json and not result.error:
        # Which paper these are like: the id alone says nothing to a reader.
        title = readable(
            (engine.paper(paper_id) or {}).get("title") or paper_id
        )  # (derived: clipped)
        click.echo(f"Papers similar to “{title}” ({paper_id}):")  # (as Slack says it)
    _show(result, as_json)


@main.command()
@click.option(
    "--host",
    metavar="HOST",
    help="The public HTTPS host Paperboy runs at (replaces YOUR-HOST in the URLs).",
)
def manifest(host: str | None) -> None:
    """Print the Slack app's manifest, to paste at api.slack.com/apps (Create New App, From a
    manifest): its slash command, shortcuts, events, scopes and URLs."""
    from importlib import resources

    text = resources.files("bot.slack").joinpath("manifest.yml").read_text(encoding="utf-8")
    if host is not None:
        host = host.strip().removeprefix("https://").removeprefix("http://").rstrip("/")
        if not host or "/" in host or any(c.isspace() for c in host):
            raise click.UsageError(
                f"--host wants a host name such as papers.example.org, not {host!r}"
            )
        text = text.replace("https://YOUR-HOST", f"https://{host}")
    click.echo(text, nl=False)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@db_option
@click.pass_context
def stats(ctx, as_json: bool, db_path) -> None:
    """What is in the corpus: papers per venue and year, index size, the feeds' last runs."""
    from digest.feeds import feed_status, status_lines  # numpy: not for `paperboy --help`

    context = _ctx(ctx, db_path)
    engine = context.engine()
    data = engine.corpus.stats()
    index = engine.index
    data["index"] = {
        "documents": index.n_live,
        "terms": index.n_terms,
        "path": None if context.seed_preview else str(index.directory),
    }
    data["database"] = None if context.seed_preview else str(engine.db_path)
    data["read_only"] = engine.read_only
    data["feeds"] = feed_status(engine.db, context.settings.feeds)  # each feed's last run
    # With DATABASE_URL: how far behind the shared corpus (without, the shared state's
    # packages, SQLAlchemy among them, are not even imported: 0.7 s of a 1 s `stats`).
    data["replica"] = _replica_lag(engine) if context.settings.database_url else None
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    if context.seed_preview:
        click.echo(f"database  none at {context.db_path} yet (this is the seed corpus)")
    else:
        click.echo(f"database  {data['database']}" + ("  (read-only)" if engine.read_only else ""))
    click.echo(f"papers    {data['papers']:,}")
    click.echo(f"index     {count(index.n_terms, 'term')} over {count(index.n_live, 'paper')}")
    if data["replica"] is not None:
        click.echo(f"replica   {_lag_line(data['replica'])}")
    for n, line in enumerate(status_lines(data["feeds"])):
        click.echo(f"{'feeds' if n == 0 else '':<10}{line}")
    click.echo("")
    width = max((len(r["venue"] or "(no venue)") for r in data["by_venue_year"]), default=5)
    for row in data["by_venue_year"]:
        click.echo(
            f"  {(row['venue'] or '?'):<{width}}  {row['year'] or '':>4}  {row['papers']:>8,}"
        )
    if not data["papers"]:
        click.echo(empty_corpus(str(engine.db_path)))


def _replica_lag(engine) -> dict | None:
    from .replica import lag
    from .state import StateError

    try:
        return lag(engine)
    except StateError as error:  # stats still shows the local corpus
        return {"error": str(error)}


def _lag_line(lag: dict) -> str:
    if "error" in lag:
        return f"the shared corpus cannot be read now: {lag['error']}"
    state = "up to date with" if not lag["behind"] else f"{count(lag['behind'], 'change')} behind"
    return f"{state} the shared corpus (applied {lag['position']:,} of {lag['shared']:,})"


def _with_papers(engine):
    """Lookups over an empty corpus say what to do instead of "No papers match"."""
    if engine.corpus.count() == 0:
        raise click.ClickException(empty_corpus(str(engine.db_path)))
    return engine


#: One box: the Slack app and the digest clock in one process (``serve`` and ``worker``).
with_scheduler_option = click.option(
    "--with-scheduler",
    is_flag=True,
    help="Also send the digests from this process (one box: no separate `paperboy scheduler`).",
)


@main.command()
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Port to listen on (default: $PORT or 3000; 0: any free port, named at start-up).",
)
@click.option(
    "--host", default=None, help="Address to bind (default: $HOST; the playground: 127.0.0.1)."
)
@with_scheduler_option
@db_option
@click.pass_context
@stops_on_sigterm  # first thing: the imports and the start-up take a while
def serve(ctx, port: int | None, host: str | None, with_scheduler: bool, db_path) -> None:
    """Run the Slack app: HTTP at /slack/events, Socket Mode with SLACK_APP_TOKEN, or, with no
    Slack credentials at all, the local playground at http://127.0.0.1:$PORT/.

    The HTTP port answers at once; /healthz says 503 "warming up" until the database and
    index are ready.
    """
    from .playground.playground import run as run_playground
    from .slack.server import run

    context = _ctx(ctx, db_path)
    settings = replace(context.settings, db_path=context.db_path)
    if port is not None:
        settings = replace(settings, port=port)
    if host:
        settings = replace(settings, host=host)
    run(settings, with_scheduler=with_scheduler, playground=run_playground)


@main.command()
@with_scheduler_option
@db_option
@click.pass_context
@stops_on_sigterm  # first thing: the imports and the start-up take a while
def worker(ctx, with_scheduler: bool, db_path) -> None:
    """Run the Slack app over Socket Mode (SLACK_APP_TOKEN + SLACK_BOT_TOKEN): no public URL,
    no port. The Procfile's `worker:` process; stops cleanly on SIGTERM.

    It starts as `serve` does with SLACK_APP_TOKEN (the same code): the token checked with
    Slack, with retries; a read-only database still answers lookups.
    """
    from .slack.server import run

    context = _ctx(ctx, db_path)
    settings = replace(context.settings, db_path=context.db_path)
    run(settings, with_scheduler=with_scheduler, socket_only=True)


def _show(result, as_json: bool) -> None:
    """Print a search result as text or JSON; exit 2 when the query could not be run."""
    if as_json:
        click.echo(json.dumps(_result_json(result), ensure_ascii=False, indent=2))
    else:
        _print_result(result)
    if result.error:
        sys.exit(2)


def _result_json(result) -> dict:
    return {
        "query": result.query,
        "total": result.total,
        "offset": result.offset,
        "error": result.error,
        "suggestions": result.suggestions,
        "results": [
            {
                "id": hit.id,
                "score": round(hit.score, 6),
                "title": hit.paper["title"],
                "title_derived": hit.paper["title_derived"],
                "venue": hit.paper["venue"],
                "year": hit.paper["year"],
                "authors": hit.paper["authors"],
                "url": hit.paper["url"],
                "snippet": "".join(t for t, _ in hit.snippet),
                "matched": sorted({t for t, m in hit.snippet if m}),
                "why": hit.why,
            }
            for hit in result.hits
        ],
    }


def short_authors(authors: list[str], limit: int = 3) -> str:
    if len(authors) <= limit:
        return ", ".join(authors)
    return ", ".join(authors[:limit]) + " et al."


def _print_result(result) -> None:
    if result.error:
        click.secho(result.error, fg="red", err=True)
        return
    for notice in result.notices:
        click.secho(notice, dim=True)
    if not result.hits and result.total:  # paged past the end
        matches = count(result.total, "paper matches", "papers match")
        click.echo(f"{matches} “{result.query}”; none after the first {result.total}.")
        return
    if not result.hits:
        click.echo(f"No papers match “{result.query}”.")
        for suggestion in result.suggestions:
            click.echo(f"  try: paperboy search {json.dumps(suggestion)}")
        return
    click.echo(
        f"{count(result.total, 'paper matches', 'papers match')}; showing {result.offset + 1}-"
        f"{result.offset + len(result.hits)}."
    )
    for rank, hit in enumerate(result.hits, start=result.offset + 1):
        paper = hit.paper
        title = _title(paper)
        click.echo("")
        click.echo(f"{rank:>3}. {hit.score:.3f}  " + click.style(title, bold=True))
        meta = " · ".join(
            x
            for x in (
                f"{paper['venue']} {paper['year'] or ''}".strip(),
                short_authors(paper["authors"]),
            )
            if x
        )
        click.echo(f"{'':11}{meta}")
        click.echo(f"{'':11}id {paper['id']}" + (f"  {paper['url']}" if paper["url"] else ""))
        snippet = "".join(
            click.style(t, bold=True, fg="yellow") if m else t
            for t, m in readable_pieces(hit.snippet)
        )
        click.echo(f"{'':11}{snippet}")
        if hit.why:
            click.echo(f"{'':11}" + click.style("why: " + ", ".join(hit.why), dim=True))
    if result.has_more:
        click.echo(f"\nmore: --offset {result.offset + len(result.hits)}")


# --- the digest ------------------------------------------------------------------------------


def _engine(ctx: click.Context, db_path: Path | None, settings, write: bool = True):
    # `paperboy --db X digest ...` puts X on the group's context object.
    path = db_path or getattr(ctx.obj, "db_path", None) or settings.db_path
    return open_engine(settings, path, write=write)  # only writers create a database


def _digest_settings():
    """Every setting checked, the bot token too, before anything is opened or created: a
    missing or malformed SLACK_BOT_TOKEN is one sentence and exit 2, as for ``serve``."""
    from .slack.client import bot_token

    settings = load_settings()
    try:
        bot_token(settings)
    except SettingsError as error:
        raise BadSettings(error.problems) from None
    return settings


def _clock(engine, settings, **options):
    """The clock (its dispatcher posting through Slack), its token checked with
    ``auth.test``: a refused token or an unreachable Slack is one sentence and exit 1,
    before anything is sent."""
    from digest.clock import Clock, ClockError

    from .slack.poster import SlackPoster

    try:
        clock = Clock(engine, settings, SlackPoster.from_settings(settings, engine), **options)
        clock.check_token()
    except ClockError as error:
        raise click.ClickException(str(error)) from None
    return clock


@main.command()
@db_option
@click.option(
    "--tick",
    default=60,
    show_default=True,
    type=click.IntRange(min=1),
    help="Seconds between due-checks.",
)
@click.pass_context
@stops_on_sigterm  # first thing: the imports and the start-up take a while
def scheduler(ctx: click.Context, db_path: Path | None, tick: int) -> None:
    """Send each member's digest at their local time; ingest PAPERBOY_FEEDS daily.

    Runs until stopped (the Procfile's `clock:` process). `serve` and `worker` send digests
    only with `--with-scheduler`, the one-box layout that needs no separate scheduler.
    Digests due while it was down are sent when it comes back, within
    PAPERBOY_DIGEST_GRACE_SECONDS (default 6 hours), once. Exits 1 with one sentence when
    Slack refuses the bot token, at start or later, so the platform restarts it and alerts.
    """
    from digest.clock import ClockError

    from .replica import follow

    settings = _digest_settings()
    configure_logging(settings)
    if settings.log_level != "DEBUG":  # a line per job run, every minute, is noise
        logging.getLogger("apscheduler").setLevel(logging.WARNING)
    engine = _engine(ctx, db_path, settings)
    follow(engine, settings.corpus_sync_seconds)  # with DATABASE_URL: the shared corpus
    clock = _clock(engine, settings, tick_seconds=tick)
    feeds = f", {len(settings.feeds)} feed(s) daily" if settings.feeds else ""
    say(settings, f"paperboy scheduler: {engine.db_path}, every {tick}s{feeds}")
    try:
        clock.run_forever()
    except (KeyboardInterrupt, SystemExit):
        pass
    except ClockError as error:
        raise click.ClickException(str(error)) from None


#: How a member gets topics, for the digest commands' "no subscriptions".
SUBSCRIBE_HINT = "(a member subscribes in Slack: /papers subscribe TOPIC)."


@main.group()
def digest() -> None:
    """Preview or send digests by hand (the scheduler does this by itself)."""


def _team_of(engine: Engine, user_id: str, team: str | None) -> str:
    """The workspace of the member ``user_id`` a command means: ``--team``, else the only one
    they are a member of; the same id in several workspaces is several members (one
    sentence naming them). ``""`` when they are in none (the caller says so)."""
    from digest.subscriptions import Subscriptions

    if team is not None:
        return team.strip()
    teams = Subscriptions(engine.db).teams_of(user_id)
    if len(teams) > 1:
        named = ", ".join(t or '""' for t in teams)
        raise click.ClickException(
            f"{user_id} is a member in {len(teams)} workspaces ({named}); say which with --team."
        )
    return teams[0] if teams else ""


team_option = click.option(
    "--team",
    "team_id",
    default=None,
    help="The member's workspace (T...), when the same user id is in more than one.",
)


@digest.command()
@click.option("--user", "user_id", required=True, help="The member's Slack user id (U...).")
@team_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@db_option
@click.pass_context
def preview(
    ctx: click.Context, user_id: str, team_id: str | None, as_json: bool, db_path: Path | None
) -> None:
    """What USER's digest would hold if it were sent now (nothing is sent or recorded)."""
    from digest.selection import select_digests
    from digest.subscriptions import Subscriptions

    _check_user(user_id)
    settings = load_settings()
    engine = _engine(ctx, db_path, settings, write=False)
    team_id = _team_of(engine, user_id, team_id)
    if Subscriptions(engine.db).member(user_id, team_id) is None:
        where = f" in workspace {team_id}" if team_id else ""
        raise click.ClickException(
            f"{user_id} has no subscriptions{where} in {engine.db_path} {SUBSCRIBE_HINT}"
        )
    plan = select_digests(engine, [(team_id, user_id)])[(team_id, user_id)]
    if as_json:
        click.echo(json.dumps(json.loads(plan.to_json()), indent=2, ensure_ascii=False))
        return
    if not plan.size:
        click.echo(f"Nothing to send to {user_id} now: no unsent papers match their topics.")
        return
    papers = {p["id"]: p for p in engine.corpus.get_many(plan.paper_ids)}
    click.echo(
        f"{count(plan.size, 'paper')} for {user_id} ({plan.new_count} new since the last digest)"
    )
    for section in plan.sections:
        click.echo("")
        click.secho(section.query, bold=True)
        for item in section.items:
            paper = papers.get(item.paper_id, {})
            new = click.style(" new", fg="green") if item.new else ""
            click.echo(f"  {item.score:.3f}{new}  {_title(paper) or item.paper_id}")
            venue = f"{paper.get('venue') or ''} {paper.get('year') or ''}".strip()
            why = ", ".join(item.why) or (liked(item.liked_count) if item.liked_count else "")
            click.echo(f"         {venue}  id {item.paper_id}  why: {why}")


@digest.command()
@click.option(
    "--now", "right_now", is_flag=True, help="Everyone's digest right away, whatever the time."
)
@click.option("--user", "user_ids", multiple=True, help="Only this member (repeatable).")
@db_option
@click.pass_context
@stops_on_sigterm  # first thing: the imports and the start-up take a while
def send(
    ctx: click.Context, right_now: bool, user_ids: tuple[str, ...], db_path: Path | None
) -> None:
    """Send the digests that are due now (one scheduler tick), or with --now everyone's.

    Safe beside a running scheduler: each digest is claimed first, so none goes twice.
    """
    from digest.clock import refused
    from digest.poster import TokenRefused
    from digest.subscriptions import Subscriptions

    from .replica import catch_up

    settings = _digest_settings()
    configure_logging(settings)
    engine = _engine(ctx, db_path, settings)
    catch_up(engine)  # with DATABASE_URL: the papers other hosts ingested, first
    subscriptions = Subscriptions(engine.db)
    keys = []  # every workspace's member of each id asked for
    for user_id in user_ids:  # as `digest preview` says it
        teams = subscriptions.teams_of(user_id)
        if not teams:
            raise click.ClickException(
                f"{user_id} has no subscriptions in {engine.db_path} {SUBSCRIBE_HINT}"
            )
        keys += [(team, user_id) for team in teams]
    dispatcher = _clock(engine, settings).dispatcher
    now = datetime.now(UTC)
    try:
        if right_now:
            members = subscriptions.members(keys or None)
            outcomes = [dispatcher.send_now(m.user_id, now, team_id=m.team_id) for m in members]
        else:
            outcomes = [o for o in dispatcher.run_due(now) if not user_ids or o.user_id in user_ids]
    except TokenRefused as error:  # stop at once: no other member is attempted
        raise click.ClickException(str(refused(error.code))) from None
    for outcome in outcomes:
        detail = f" ({outcome.error})" if outcome.error else ""
        size = count(outcome.papers, "paper")
        click.echo(f"{outcome.digest_id}: {outcome.status}, {size}{detail}")
    counts: dict[str, int] = {}
    for outcome in outcomes:
        counts[outcome.status] = counts.get(outcome.status, 0) + 1
    summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "nothing due"
    click.echo(summary)
    if counts.get("failed") or counts.get("pending"):
        sys.exit(1)


# --- the shared state ------------------------------------------------------------------------


@main.command("migrate-state")
@click.option(
    "--to",
    "target",
    envvar="DATABASE_URL",
    metavar="postgresql://...",
    help="The PostgreSQL database to copy into (default: $DATABASE_URL).",
)
@db_option
@click.pass_context
def migrate_state(ctx, target: str | None, db_path) -> None:
    """Copy this SQLite deployment's shared state (members, topics, digests, sent papers) and
    its papers into PostgreSQL. Safe to run again: rows already there are written again (an
    unchanged paper is left as it is), never doubled."""
    from .state import StateError, StateStore, database_url, describe

    if not target:
        raise click.UsageError(
            "Name the PostgreSQL database: --to postgresql://... (or set DATABASE_URL)."
        )
    path = _ctx(ctx, db_path).db_path
    if not path.exists():
        raise click.ClickException(f"There is no database at {path} to copy the state from.")
    try:
        target_store = StateStore(database_url(target))
        if not target_store.is_postgres:
            raise click.UsageError("--to must be a postgresql:// URL.")
        copied = StateStore(path).copy_to(target_store)
        shared = _copy_corpus(path, target_store)
    except StateError as error:
        raise click.ClickException(str(error)) from None
    rows = ", ".join(f"{count(n, name)}" for name, n in _state_rows(copied))
    rows += f", {count(shared.added + shared.updated + shared.unchanged, 'paper')}"
    click.echo(f"Copied the state of {path} into {describe(target_store.url)}: {rows}.")
    configured = os.environ.get("DATABASE_URL")
    if configured and configured.replace("postgres://", "postgresql://", 1) == target.replace(
        "postgres://", "postgresql://", 1
    ):
        click.echo("DATABASE_URL names it already: restart every Paperboy process to use it.")
    else:
        click.echo("Now set DATABASE_URL to it for every Paperboy process.")


def _copy_corpus(path: Path, target):
    """The corpus too, into the shared corpus every host follows (unchanged papers are left
    as they are, so a second run adds nothing)."""
    from .engine.corpus import Corpus, open_database
    from .replica import PUBLISHED
    from .state.shared_corpus import SharedCorpus

    db = open_database(path)
    try:
        corpus = Corpus(db)
        version = corpus.version
        done = SharedCorpus(target).publish(corpus.papers_changed_since(-1))
        with db.atomic():
            corpus.set_meta(PUBLISHED, str(version))
    finally:
        db.close()
    return done


def _state_rows(copied: dict[str, int]) -> list[tuple[str, int]]:
    names = {
        "members": "member",
        "topics": "topic",
        "digests": "digest",
        "sent_papers": "sent paper",
        "clock_heartbeat": "clock heartbeat",
        "feedback": "👍/👎 rating",
        "saves": "saved paper",
        "member_taste": "taste setting",
        "workspaces": "workspace",
        "slack_installations": "installation",
        "slack_bots": "bot token",
    }
    return [(names[table], n) for table, n in copied.items()]


@main.command()
@click.option("--user", "user_id", required=True, help="The member's Slack user id (U...).")
@team_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "bibtex", "csv", "json"]),
    default="text",
    show_default=True,
    help="A list to read, or a file for a reference manager or a spreadsheet.",
)
@db_option
@click.pass_context
def saved(
    ctx: click.Context, user_id: str, team_id: str | None, fmt: str, db_path: Path | None
) -> None:
    """USER's reading list: the papers they saved in Slack, newest first."""
    from digest.export import export, reading_list

    from .state import state_for

    _check_user(user_id)
    engine = _ctx(ctx, db_path).engine()
    team_id = _team_of(engine, user_id, team_id)
    papers, total = reading_list(state_for(engine.db_path), engine, user_id, team_id=team_id)
    if fmt != "text":
        click.echo(export(papers, fmt), nl=False)
        return
    if not total:
        click.echo(f"{user_id} has saved no papers.")
        return
    click.echo(f"{count(total, 'saved paper')} for {user_id}, newest first")
    for paper in papers:
        venue = f"{paper.get('venue') or ''} {paper.get('year') or ''}".strip()
        title = _title(paper) if paper.get("title") else "(no longer in the corpus)"
        click.echo(f"  {paper['saved_at'][:10]}  {title}")
        click.echo(f"              {venue}  id {paper['id']}".rstrip())


if __name__ == "__main__":  # pragma: no cover
    main()
