"""Topic subscriptions and the daily digest.

Data flows one way, each step in its own module:

* ``subscriptions`` — members, their topics and digest preferences (SQLite, no Slack);
* ``matching`` — which papers match a topic, for all distinct topics at once;
* ``plan`` — what one member's digest holds (plain data, stored with its claim);
* ``selection`` — which papers go in each member's next digest, for all members at once;
* ``schedule`` — whose digest is due now, in their own time zone, and the APScheduler jobs;
* ``ledger`` — the exactly-once record of each digest: claimed, then sent (or skipped, failed);
* ``message`` — a digest as a Slack message (the lookups' rendering plus a header per topic);
* ``delivery`` — Slack: time zones from ``users.info``, posting by DM or to a channel;
* ``clock`` — the process that ticks: token checked at start, heartbeat for ``/healthz``;
* ``commands`` — ``paperboy scheduler`` and ``paperboy digest preview|send``.

Only ``message`` and ``delivery`` know about Slack; the rest runs (and is tested) without it.
"""
