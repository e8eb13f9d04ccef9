"""Topic subscriptions and the daily digest: what each member gets, and when. No Slack here.

Data flows one way, each step in its own module:

* ``subscriptions`` — members, their topics and digest preferences (SQLite);
* ``matching`` — which papers match a topic, for all distinct topics at once;
* ``plan`` — what one member's digest holds (plain data, stored with its claim);
* ``selection`` — which papers go in each member's next digest, for all members at once;
* ``schedule`` — whose digest is due now, in their own time zone, and the APScheduler jobs;
* ``ledger`` — the exactly-once record of each digest: claimed, then sent (or skipped, failed);
* ``poster`` — the ``Poster`` interface the digest is posted through, and its two errors;
* ``delivery`` — claim, post, record each due digest through the poster it is given;
* ``clock`` — the process that ticks: token checked at start, heartbeat for ``/healthz``.

The Slack side (``bot.slack.poster.SlackPoster``, the message in ``bot.slack.render.digest``)
and the commands (``paperboy scheduler``, ``paperboy digest ...`` in ``bot/cli.py``) import
this package, never the other way round (``lint-imports`` checks it).
"""
