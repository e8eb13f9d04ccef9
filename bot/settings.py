"""Every setting Paperboy reads, from the environment, in one typed object (12-factor)."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

SLACK_API_DEFAULT = "https://slack.com/api/"
DEFAULT_DB = Path("paperboy.db")
LOG_FORMATS = ("text", "json")


def _seed_dir() -> Path:
    """The seed corpus: the repository's data/ folder, installed as the package ``bot.seeds``.

    Read through importlib.resources so that a wheel and an editable install both find it;
    a bare checkout on ``PYTHONPATH`` (nothing installed) falls back to ``data/`` beside ``bot/``.
    """
    try:
        return Path(str(resources.files("bot.seeds")))
    except ModuleNotFoundError:
        return Path(__file__).resolve().parent.parent / "data"


#: The embedded default corpus a fresh database is filled from.
SEED_DIR = _seed_dir()


class SettingsError(ValueError):
    """Bad settings; ``problems`` holds one sentence per bad value, for the operator."""

    def __init__(self, *problems: str):
        self.problems = list(problems)
        super().__init__(" ".join(problems))


def _positive(env: Mapping[str, str], name: str, default: int, problems: list[str]) -> int:
    text = env.get(name, "").strip() or str(default)
    if not text.isdigit() or int(text) < 1:
        problems.append(f"{name} must be a whole number above 0, not {text!r}.")
        return default
    return int(text)


@dataclass(frozen=True)
class Settings:
    db_path: Path = DEFAULT_DB
    seed_dir: Path = SEED_DIR
    slack_bot_token: str | None = None
    slack_signing_secret: str | None = None
    slack_app_token: str | None = None
    slack_api_url: str = SLACK_API_DEFAULT
    port: int = 3000
    host: str = "0.0.0.0"
    feeds: tuple[str, ...] = field(default_factory=tuple)
    digest_grace_seconds: int = 6 * 3600
    log_level: str = "INFO"
    log_format: str = "text"  # or "json": one JSON object per log line
    # The web server (waitress): request threads, open connections, idle seconds before closing.
    http_threads: int = 16
    http_connection_limit: int = 1000
    http_channel_timeout: int = 30
    # Where the shared state lives: None keeps it in the SQLite database (db_path);
    # a postgresql:// URL puts it in PostgreSQL, shared by processes on any host.
    database_url: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Read and check every setting; all bad values are reported together (SettingsError)."""
        env = os.environ if env is None else env
        problems: list[str] = []

        def opt(name: str) -> str | None:
            value = env.get(name, "").strip()
            return value or None

        port_text = opt("PORT") or "3000"
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            problems.append(f"PORT must be a number between 1 and 65535, not {port_text!r}.")
            port_text = "3000"
        grace = opt("PAPERBOY_DIGEST_GRACE_SECONDS") or str(6 * 3600)
        if not grace.isdigit():
            problems.append(
                f"PAPERBOY_DIGEST_GRACE_SECONDS must be a whole number of seconds, not {grace!r}."
            )
            grace = "0"
        api_url = opt("SLACK_API_URL") or SLACK_API_DEFAULT
        if not api_url.startswith(("http://", "https://")):
            problems.append(f"SLACK_API_URL must be an http(s) URL, not {api_url!r}.")
        if not api_url.endswith("/"):
            api_url += "/"
        log_level = (opt("PAPERBOY_LOG_LEVEL") or "INFO").upper()
        levels = [n for n in logging.getLevelNamesMapping() if n not in ("NOTSET", "WARN", "FATAL")]
        if log_level not in levels:
            problems.append(
                f"PAPERBOY_LOG_LEVEL must be one of {', '.join(sorted(levels))}, "
                f"not {opt('PAPERBOY_LOG_LEVEL')!r}."
            )
        log_format = (opt("PAPERBOY_LOG_FORMAT") or "text").lower()
        if log_format not in LOG_FORMATS:
            problems.append(
                f"PAPERBOY_LOG_FORMAT must be {' or '.join(LOG_FORMATS)}, "
                f"not {opt('PAPERBOY_LOG_FORMAT')!r}."
            )
        http_threads = _positive(env, "PAPERBOY_HTTP_THREADS", 16, problems)
        http_connections = _positive(env, "PAPERBOY_HTTP_CONNECTIONS", 1000, problems)
        http_timeout = _positive(env, "PAPERBOY_HTTP_TIMEOUT", 30, problems)
        database_url = opt("DATABASE_URL")
        if database_url and not database_url.startswith(("postgresql://", "postgres://")):
            scheme = database_url.split("://", 1)[0] if "://" in database_url else database_url
            problems.append(
                "DATABASE_URL must be a postgresql:// URL (or unset, to keep the state in the "
                f"SQLite database), not one starting {scheme[:20]!r}."
            )
        if problems:
            raise SettingsError(*problems)
        feeds = tuple(f.strip() for f in (opt("PAPERBOY_FEEDS") or "").split(",") if f.strip())
        return cls(
            db_path=Path(opt("PAPERBOY_DB") or DEFAULT_DB),
            seed_dir=Path(opt("PAPERBOY_SEED_DIR") or SEED_DIR),
            slack_bot_token=opt("SLACK_BOT_TOKEN"),
            slack_signing_secret=opt("SLACK_SIGNING_SECRET"),
            slack_app_token=opt("SLACK_APP_TOKEN"),
            slack_api_url=api_url,
            port=int(port_text),
            host=opt("HOST") or "0.0.0.0",
            feeds=feeds,
            digest_grace_seconds=int(grace),
            log_level=log_level,
            log_format=log_format,
            http_threads=http_threads,
            http_connection_limit=http_connections,
            http_channel_timeout=http_timeout,
            database_url=database_url,
        )

    @property
    def has_slack_credentials(self) -> bool:
        return bool(self.slack_bot_token or self.slack_signing_secret or self.slack_app_token)

    def check_slack(self) -> None:
        """Refuse a half-configured Slack connection with one sentence naming what is missing."""
        if not self.has_slack_credentials:
            return
        if not self.slack_bot_token:
            raise SettingsError(
                "SLACK_BOT_TOKEN is missing: copy the Bot User OAuth Token (xoxb-...) from your "
                "app's OAuth & Permissions page, or unset the other SLACK_* variables to use the "
                "local playground."
            )
        if not self.slack_bot_token.startswith("xoxb-"):
            raise SettingsError("SLACK_BOT_TOKEN must be a bot token starting with 'xoxb-'.")
        if self.slack_app_token:
            if not self.slack_app_token.startswith("xapp-"):
                raise SettingsError(
                    "SLACK_APP_TOKEN must be an app-level token starting with 'xapp-' (Socket Mode)."
                )
        elif not self.slack_signing_secret:
            raise SettingsError(
                "SLACK_SIGNING_SECRET is missing: copy it from your app's Basic Information page "
                "(or set SLACK_APP_TOKEN to use Socket Mode instead of HTTP)."
            )
