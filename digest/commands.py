"""``paperboy scheduler`` and ``paperboy digest preview|send``: thin layers over ``digest``.

Registered on the ``paperboy`` group by ``bot/cli.py``::

    from digest.commands import digest, scheduler
    main.add_command(scheduler)
    main.add_command(digest)

Examples::

    $ paperboy scheduler                      # the Procfile's clock: process; runs until stopped
    $ paperboy digest preview --user U123     # what U123's digest would hold now
    $ paperboy digest send                    # one scheduler tick: the digests due now
    $ paperboy digest send --now              # every member's digest right away

Heavy imports (numpy, Slack, APScheduler) happen inside the commands, so ``paperboy --help``
stays fast.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from pathlib import Path

import click

from bot.cli_options import BadSettings, db_option, exit_on_sigterm, load_settings, open_engine
from bot.logs import configure_logging


def _engine(ctx: click.Context, db_path: Path | None, settings, write: bool = True):
    # `paperboy --db X digest ...` puts X on the group's context object.
    path = db_path or getattr(ctx.obj, "db_path", None) or settings.db_path
    return open_engine(settings, path, write=write)  # only writers create a database


def _settings():
    """Every setting checked, the bot token too, before anything is opened or created: a
    missing or malformed SLACK_BOT_TOKEN is one sentence and exit 2, as for ``serve``."""
    from .clock import ClockError, bot_token

    settings = load_settings()
    try:
        bot_token(settings)
    except ClockError as error:
        raise BadSettings([str(error)]) from None
    return settings


def _clock(engine, settings, **options):
    """The clock (its Slack client and dispatcher), its token checked with ``auth.test``: a
    refused token or an unreachable Slack is one sentence and exit 1, before anything is sent."""
    from .clock import Clock, ClockError

    try:
        clock = Clock(engine, settings, **options)
        clock.check_token()
    except ClockError as error:
        raise click.ClickException(str(error)) from None
    return clock


@click.command()
@db_option
@click.option("--tick", default=60, show_default=True, help="Seconds between due-checks.")
@click.pass_context
def scheduler(ctx: click.Context, db_path: Path | None, tick: int) -> None:
    """Send each member's digest at their local time; ingest PAPERBOY_FEEDS daily.

    Runs until stopped (the Procfile's `clock:` process). `serve` and `worker` send digests
    only with `--with-scheduler`, the one-box layout that needs no separate scheduler.
    Digests due while it was down are sent when it comes back, within
    PAPERBOY_DIGEST_GRACE_SECONDS (default 6 hours), once. Exits 1 with one sentence when
    Slack refuses the bot token, at start or later, so the platform restarts it and alerts.
    """
    from .clock import ClockError

    exit_on_sigterm()  # first thing: a stop during start-up is a clean stop too
    settings = _settings()
    configure_logging(settings)
    if settings.log_level != "DEBUG":  # a line per job run, every minute, is noise
        logging.getLogger("apscheduler").setLevel(logging.WARNING)
    engine = _engine(ctx, db_path, settings)
    clock = _clock(engine, settings, tick_seconds=tick)
    feeds = f", {len(settings.feeds)} feed(s) daily" if settings.feeds else ""
    click.echo(f"paperboy scheduler: {engine.db_path}, every {tick}s{feeds}", err=True)
    try:
        clock.run_forever()
    except (KeyboardInterrupt, SystemExit):
        pass
    except ClockError as error:
        raise click.ClickException(str(error)) from None


@click.group()
def digest() -> None:
    """Preview or send digests by hand (the scheduler does this by itself)."""


@digest.command()
@click.option("--user", "user_id", required=True, help="The member's Slack user id (U...).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@db_option
@click.pass_context
def preview(ctx: click.Context, user_id: str, as_json: bool, db_path: Path | None) -> None:
    """What USER's digest would hold if it were sent now (nothing is sent or recorded)."""
    from .selection import select_digests
    from .subscriptions import Subscriptions

    settings = load_settings()
    engine = _engine(ctx, db_path, settings, write=False)
    if Subscriptions(engine.db).member(user_id) is None:
        raise click.ClickException(f"{user_id} has no subscriptions in {engine.db_path}.")
    plan = select_digests(engine, [user_id])[user_id]
    if as_json:
        click.echo(json.dumps(json.loads(plan.to_json()), indent=2, ensure_ascii=False))
        return
    if not plan.size:
        click.echo(f"Nothing to send to {user_id} now: no unsent papers match their topics.")
        return
    papers = {p["id"]: p for p in engine.corpus.get_many(plan.paper_ids)}
    size = f"{plan.size} paper{'s' if plan.size != 1 else ''}"
    click.echo(f"{size} for {user_id} ({plan.new_count} new since the last digest)")
    for section in plan.sections:
        click.echo("")
        click.secho(section.query, bold=True)
        for item in section.items:
            paper = papers.get(item.paper_id, {})
            new = click.style(" new", fg="green") if item.new else ""
            click.echo(f"  {item.score:.3f}{new}  {paper.get('title', item.paper_id)}")
            venue = f"{paper.get('venue') or ''} {paper.get('year') or ''}".strip()
            click.echo(f"         {venue}  id {item.paper_id}  why: {', '.join(item.why)}")


@digest.command()
@click.option(
    "--now", "right_now", is_flag=True, help="Everyone's digest right away, whatever the time."
)
@click.option("--user", "user_ids", multiple=True, help="Only this member (repeatable).")
@db_option
@click.pass_context
def send(
    ctx: click.Context, right_now: bool, user_ids: tuple[str, ...], db_path: Path | None
) -> None:
    """Send the digests that are due now (one scheduler tick), or with --now everyone's.

    Safe beside a running scheduler: each digest is claimed first, so none goes twice.
    """
    from .clock import refused
    from .delivery import TokenRefused
    from .subscriptions import Subscriptions

    exit_on_sigterm()
    settings = _settings()
    configure_logging(settings)
    engine = _engine(ctx, db_path, settings)
    dispatcher = _clock(engine, settings).dispatcher
    now = datetime.now(UTC)
    try:
        if right_now:
            members = Subscriptions(engine.db).members(user_ids or None)
            outcomes = [dispatcher.send_now(m.user_id, now) for m in members]
        else:
            outcomes = [o for o in dispatcher.run_due(now) if not user_ids or o.user_id in user_ids]
    except TokenRefused as error:  # stop at once: no other member is attempted
        raise click.ClickException(str(refused(error.code))) from None
    for outcome in outcomes:
        detail = f" ({outcome.error})" if outcome.error else ""
        size = f"{outcome.papers} paper{'s' if outcome.papers != 1 else ''}"
        click.echo(f"{outcome.digest_id}: {outcome.status}, {size}{detail}")
    counts: dict[str, int] = {}
    for outcome in outcomes:
        counts[outcome.status] = counts.get(outcome.status, 0) + 1
    summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "nothing due"
    click.echo(summary)
    if counts.get("failed") or counts.get("pending"):
        sys.exit(1)
