"""Members, their topics and their digest preferences, kept in the shared state (no Slack here).

A topic is a query in the lookup language (``"graph neural networks" -survey venue:ICLR``).
Two spellings that match exactly the same papers ("Graph Neural Networks", "graph neural
network") are the same topic: ``normalize_topic`` gives both one key, so subscribing twice is
a no-op and the digest matches each distinct topic once for everybody who follows it.

``digest_enabled`` is NULL until the member says ``digest on`` or ``off``: the digest is on by
default once they have a topic ("on after the first subscription") without a flag to keep in
step with their topic list.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sqlite_utils import Database

from bot.engine.query import parse_topic
from bot.engine.text import words
from bot.state import StateStore, state_of
from bot.state.store import ByMember

MAX_TOPICS = 25
MAX_TOPIC_CHARS = 200
DEFAULT_TIME = "09:00"
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
DEFAULT_DAYS = WEEKDAYS[:5]
DEFAULT_TZ = "UTC"  # until users.info has told us the member's own
#: How long a time zone read from the Slack profile is trusted before it is read again.
TZ_MAX_AGE = timedelta(days=1)


class SubscriptionError(ValueError):
    """A request that cannot be done; the message tells the member what to type instead."""


def to_iso(moment: datetime) -> str:
    """UTC ISO 8601 to the second, the format of every timestamp in the database."""
    return moment.astimezone(UTC).isoformat(timespec="seconds")


def from_iso(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


@dataclass(frozen=True)
class Topic:
    id: int
    user_id: str
    query: str
    normalized: str
    created_at: str
    team_id: str = ""


#: A member: ``(team_id, user_id)``. The same user id in two workspaces (an Enterprise Grid
#: org, or two installs) is two members; ``""`` is the team of a single-workspace deployment
#: that never learned it.
MemberKey = tuple[str, str]

__all__ = ["ByMember", "Member", "MemberKey", "Subscriptions", "Topic", "member_keys"]


def member_keys(members: Iterable[str | MemberKey]) -> list[MemberKey]:
    """``(team_id, user_id)`` for each; a bare user id is a member of the team ``""``."""
    return [(m[0] or "", m[1]) if isinstance(m, tuple) else ("", m) for m in members]


@dataclass(frozen=True)
class Member:
    user_id: str
    team_id: str = ""
    tz: str | None = None
    tz_checked_at: str | None = None
    digest_enabled: bool | None = None  # None: the default (on once there is a topic)
    digest_time: str = DEFAULT_TIME
    digest_days: tuple[str, ...] = DEFAULT_DAYS
    digest_channel: str | None = None  # None: a direct message
    created_at: str = ""
    topic_count: int = 0
    dm_channel: str | None = None  # the D... id of the member's DM with the bot, once known

    @property
    def key(self) -> MemberKey:
        return (self.team_id, self.user_id)

    @property
    def enabled(self) -> bool:
        if self.digest_enabled is None:
            return self.topic_count > 0
        return self.digest_enabled and self.topic_count > 0

    @property
    def zone(self) -> ZoneInfo:
        try:
            return ZoneInfo(self.tz or DEFAULT_TZ)
        except (ZoneInfoNotFoundError, ValueError):
            return ZoneInfo(DEFAULT_TZ)

    @property
    def local_time(self) -> time:
        hour, minute = self.digest_time.split(":")
        return time(int(hour), int(minute))

    def tz_is_stale(self, now: datetime) -> bool:
        checked = from_iso(self.tz_checked_at)
        return checked is None or now - checked >= TZ_MAX_AGE

    @classmethod
    def from_row(cls, row: dict[str, Any], topic_count: int = 0) -> Member:
        enabled = row.get("digest_enabled")
        days = tuple(d for d in (row.get("digest_days") or "").split(",") if d in WEEKDAYS)
        return cls(
            user_id=row["user_id"],
            team_id=row.get("team_id") or "",
            tz=row.get("tz"),
            tz_checked_at=row.get("tz_checked_at"),
            digest_enabled=None if enabled is None else bool(enabled),
            digest_time=row.get("digest_time") or DEFAULT_TIME,
            digest_days=days if row.get("digest_days") is not None else DEFAULT_DAYS,
            digest_channel=row.get("digest_channel") or None,
            created_at=row.get("created_at") or "",
            topic_count=topic_count,
            dm_channel=row.get("dm_channel") or None,
        )


# --- parsing what members type -----------------------------------------------------------------


def normalize_topic(text: str) -> str:
    """One key for every spelling of the same topic (raises QueryError for an unusable query).

    Words are analysed like the index analyses them (case, accents, plurals), their order kept
    (it decides the bigrams); exclusions and filters are sorted because their order does not
    matter.
    """
    query = parse_topic(text)
    parts = [" ".join(words(w)) for w in query.words]
    parts += ['"' + " ".join(words(p)) + '"' for p in query.phrases]
    parts += sorted("-" + " ".join(words(e)) for e in query.excluded)
    parts += sorted(f"venue:{v.strip().lower()}" for v in query.venues)
    if query.year_from or query.year_to:
        parts.append(f"year:{query.year_from or ''}-{query.year_to or ''}")
    parts += sorted(f"author:{' '.join(a.lower().split())}" for a in query.authors)
    return " ".join(p for p in parts if p.strip('"-'))


_TIME = re.compile(r"^(\d{1,2})(?:[:.h](\d{2}))?\s*(am|pm|a\.m\.|p\.m\.)?$", re.IGNORECASE)


def parse_time(text: str) -> str:
    """``"08:30"``, ``"8.30"``, ``"8am"``, ``"5:15 pm"`` -> ``"HH:MM"`` (24-hour)."""
    match = _TIME.match(text.strip())
    if not match:
        raise SubscriptionError(
            f"`{text.strip()}` is not a time I understand; use 24-hour `HH:MM`, like "
            "`/papers digest time 08:30`."
        )
    hour, minute = int(match.group(1)), int(match.group(2) or 0)
    suffix = (match.group(3) or "").lower().replace(".", "")
    if suffix:
        if not 1 <= hour <= 12:
            raise SubscriptionError(f"`{text.strip()}`: with am/pm the hour goes from 1 to 12.")
        hour = hour % 12 + (12 if suffix == "pm" else 0)
    if hour > 23 or minute > 59:
        raise SubscriptionError(
            f"`{text.strip()}` is not a time of day; use `HH:MM` between 00:00 and 23:59."
        )
    return f"{hour:02d}:{minute:02d}"


_DAY_ALIASES = {
    "weekdays": WEEKDAYS[:5],
    "workdays": WEEKDAYS[:5],
    "weekends": WEEKDAYS[5:],
    "weekend": WEEKDAYS[5:],
    "daily": WEEKDAYS,
    "everyday": WEEKDAYS,
    "all": WEEKDAYS,
}


_FULL_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
#: Exact spellings only (``monkey`` is not Monday): the abbreviation, the name, its plural, and
#: the common longer abbreviations.
_DAY_NAMES = {
    **{day: i for i, day in enumerate(WEEKDAYS)},
    **{day: i for i, day in enumerate(_FULL_DAYS)},
    **{day + "s": i for i, day in enumerate(_FULL_DAYS)},
    "tues": 1,
    "weds": 2,
    "thur": 3,
    "thurs": 3,
}


def _day(word: str, original: str) -> int:
    word = word.strip().lower().rstrip(".")
    if word not in _DAY_NAMES:
        raise SubscriptionError(
            f"`{original.strip()}` is not a list of days I understand; try "
            "`/papers digest days mon-fri`, `days mon,wed,fri` or `days daily`."
        )
    return _DAY_NAMES[word]


def parse_days(text: str) -> tuple[str, ...]:
    """``"mon-fri"``, ``"mon,wed,fri"``, ``"sat sun"``, ``"fri-mon"``, ``"daily"`` -> days in
    week order."""
    cleaned = text.strip().lower().replace("every day", "daily")
    if cleaned in _DAY_ALIASES:
        return _DAY_ALIASES[cleaned]
    chosen: set[int] = set()
    for part in re.split(r"[,\s]+", cleaned):
        if not part:
            continue
        if "-" in part or "–" in part:
            first, _, last = part.replace("–", "-").partition("-")
            start, end = _day(first, text), _day(last, text)
            span = (end - start) % 7
            chosen.update((start + i) % 7 for i in range(span + 1))
        elif part in _DAY_ALIASES:
            chosen.update(WEEKDAYS.index(d) for d in _DAY_ALIASES[part])
        else:
            chosen.add(_day(part, text))
    if not chosen:
        raise SubscriptionError("Name at least one day, like `/papers digest days mon-fri`.")
    return tuple(WEEKDAYS[i] for i in sorted(chosen))


def describe_days(days: Iterable[str]) -> str:
    """``Mon–Fri``, ``every day``, ``Mon, Wed, Fri`` for messages."""
    chosen = [d for d in WEEKDAYS if d in set(days)]
    if len(chosen) == 7:
        return "every day"
    positions = [WEEKDAYS.index(d) for d in chosen]
    if len(chosen) > 2 and positions == list(range(positions[0], positions[-1] + 1)):
        return f"{chosen[0].title()}–{chosen[-1].title()}"
    return ", ".join(d.title() for d in chosen) or "no days"


# --- the store ---------------------------------------------------------------------------------


class Subscriptions:
    """Members and topics in the shared state (``bot.state``). Pass ``now`` to anything that
    writes.

    Made from a ``StateStore`` (``Subscriptions(state_for(engine.db_path))``), or, as before
    the store existed, from the engine's connection (``Subscriptions(engine.db)``), which
    means the same store. A write that reads first (count the topics, then add one) is one
    transaction in which nobody else decides for the member (``StateStore.member_transaction``).
    """

    def __init__(self, store: StateStore | Database):
        self.store = state_of(store)

    # members

    def member(self, user_id: str, team_id: str | None = None) -> Member | None:
        rows = self.members([(self.store.team_for(user_id, team_id), user_id)], enabled_only=False)
        return rows[0] if rows else None

    def teams_of(self, user_id: str) -> list[str]:
        """The workspaces in which ``user_id`` is a member (``""``: the deployment's own)."""
        return self.store.teams_of(user_id)

    def members(
        self, keys: Iterable[str | MemberKey] | None = None, *, enabled_only: bool = True
    ) -> list[Member]:
        """Members (all, or those asked for by ``(team_id, user_id)``), with their topic
        counts; by default only those whose digest is on."""
        ids = None if keys is None else self.store.resolve_keys(keys)
        if ids is not None and not ids:
            return []
        members = []
        for row in self.store.members(ids):
            member = Member.from_row(row, topic_count=row.pop("topic_count"))
            if member.enabled or not enabled_only:
                members.append(member)
        return members

    def ensure_member(self, user_id: str, now: datetime, team_id: str | None = None) -> Member:
        """The member, created (with the default digest settings) if new. Writes nothing
        when they exist and nothing changes: a write takes the database's write lock, and a
        read-only database refuses it."""
        member = self.member(user_id, team_id)
        if member is not None:
            return member
        defaults = {
            "digest_time": DEFAULT_TIME,
            "digest_days": ",".join(DEFAULT_DAYS),
            "created_at": to_iso(now),
        }
        self.store.add_member(user_id, team_id, defaults)
        member = self.member(user_id, team_id)
        assert member is not None
        return member

    def _update(self, user_id: str, now: datetime, team_id: str | None, **values: Any) -> Member:
        self.ensure_member(user_id, now, team_id)
        self.store.update_member(user_id, team_id, **values)
        member = self.member(user_id, team_id)
        assert member is not None
        return member

    def set_enabled(
        self, user_id: str, enabled: bool, now: datetime, *, team_id: str | None = None
    ) -> Member:
        return self._update(user_id, now, team_id, digest_enabled=int(enabled))

    def set_time(
        self, user_id: str, text: str, now: datetime, *, team_id: str | None = None
    ) -> Member:
        return self._update(user_id, now, team_id, digest_time=parse_time(text))

    def set_days(
        self, user_id: str, text: str, now: datetime, *, team_id: str | None = None
    ) -> Member:
        return self._update(user_id, now, team_id, digest_days=",".join(parse_days(text)))

    def set_channel(
        self, user_id: str, channel: str | None, now: datetime, *, team_id: str | None = None
    ) -> Member:
        return self._update(user_id, now, team_id, digest_channel=channel)

    def set_dm_channel(
        self, user_id: str, channel: str | None, *, team_id: str | None = None
    ) -> None:
        """Remember (or, with None, forget) the member's DM channel with the bot."""
        self.store.update_member(user_id, team_id, dm_channel=channel)

    def set_tz(
        self, user_id: str, tz: str | None, now: datetime, *, team_id: str | None = None
    ) -> Member:
        """Record the time zone read from Slack (None: keep the old one, but note the check)."""
        if tz:
            try:
                ZoneInfo(tz)
            except (ZoneInfoNotFoundError, ValueError):
                tz = None
        if tz:
            return self._update(user_id, now, team_id, tz=tz, tz_checked_at=to_iso(now))
        return self._update(user_id, now, team_id, tz_checked_at=to_iso(now))

    # topics

    def topics(self, user_id: str, team_id: str | None = None) -> list[Topic]:
        """The member's topics in the order they subscribed (their numbers in ``topics``)."""
        key = (self.store.team_for(user_id, team_id), user_id)
        return self.topics_by_member([key]).get(key, [])

    def topics_by_member(
        self, keys: Iterable[str | MemberKey] | None = None
    ) -> dict[MemberKey, list[Topic]]:
        """Each member's topics, by ``(team_id, user_id)`` (all members, or those asked for)."""
        ids = None if keys is None else self.store.resolve_keys(keys)
        if ids is not None and not ids:
            return {}
        out: dict[MemberKey, list[Topic]] = {}
        for row in self.store.topics(ids):
            out.setdefault((row["team_id"], row["user_id"]), []).append(Topic(**row))
        return out

    def add_topic(
        self, user_id: str, text: str, now: datetime, team_id: str | None = None
    ) -> tuple[Topic, bool]:
        """Subscribe; returns the topic and whether it is new (False: already subscribed).

        Raises SubscriptionError (too long, too many) or QueryError (not a usable query).
        """
        text = " ".join(text.split())
        if not text:
            raise SubscriptionError(
                'Say what to follow, like `/papers subscribe "graph neural networks"`.'
            )
        if len(text) > MAX_TOPIC_CHARS:
            raise SubscriptionError(
                f"A topic can be at most {MAX_TOPIC_CHARS} characters (this one has "
                f"{len(text)}); a few specific keywords work best."
            )
        normalized = normalize_topic(text)
        if not normalized:
            raise SubscriptionError(
                "That topic only has very common words (like “the” or “of”); name something "
                'specific, like `/papers subscribe "graph neural networks"`.'
            )
        self.ensure_member(user_id, now, team_id)
        for topic in self.topics(user_id, team_id):
            if topic.normalized == normalized:
                return topic, False
        outcome = self.store.add_topic(
            user_id, text, normalized, to_iso(now), MAX_TOPICS, team_id=team_id
        )
        if outcome == "full":
            raise SubscriptionError(
                f"You already follow {MAX_TOPICS} topics, the most Paperboy keeps per "
                "person. Drop one with `/papers unsubscribe <number>` "
                "(`/papers topics` lists them)."
            )
        topic = next(t for t in self.topics(user_id, team_id) if t.normalized == normalized)
        return topic, outcome == "added"

    def remove_topic(self, user_id: str, which: str, team_id: str | None = None) -> Topic:
        """Unsubscribe from a topic given by its number in ``topics`` or by its text."""
        if team_id:
            self.store.adopt(user_id, team_id)
        which = " ".join(which.split())
        topics = self.topics(user_id, team_id)
        if not which:
            raise SubscriptionError(
                "Say which topic to drop: its number from `/papers topics`, or its text."
            )
        if not topics:
            raise SubscriptionError(
                "You do not follow any topics yet. `/papers subscribe <topic>` starts one."
            )
        target: Topic | None = None
        if which.lstrip("#").isdigit():
            number = int(which.lstrip("#"))
            if not 1 <= number <= len(topics):
                raise SubscriptionError(
                    f"There is no topic number {number}; you have {len(topics)} "
                    f"(1–{len(topics)}, see `/papers topics`)."
                )
            target = topics[number - 1]
        else:
            try:
                key = normalize_topic(which)
            except ValueError:
                key = None
            target = next((t for t in topics if t.normalized == key or t.query == which), None)
            if target is None:
                raise SubscriptionError(
                    f"You do not follow “{which}”. `/papers topics` lists your topics; "
                    "unsubscribe by number, like `/papers unsubscribe 2`."
                )
        self.store.remove_topic(target.id)
        return target
