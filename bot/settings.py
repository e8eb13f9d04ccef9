"""Every setting Paperboy reads, from the environment, in one typed object (12-factor)."""

from __future__ import annotations

import difflib
import logging
import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

SLACK_API_DEFAULT = "https://slack.com/api/"
DEFAULT_DB = Path("paperboy.db")
LOG_FORMATS = ("text", "json")
ARXIV_API_DEFAULT = "https://export.arxiv.org/api/query"
#: The bot scopes an installation asks for (bot/slack/manifest.yml's
#: ``oauth_config.scopes.bot``; a test checks they agree). ``SLACK_SCOPES`` overrides them.
SLACK_SCOPES_DEFAULT = (
    "commands",
    "chat:write",
    "chat:write.public",
    "app_mentions:read",
    "im:write",
    "files:write",
    "users:read",
    "im:history",
    "channels:history",
    "groups:history",
    "channels:join",
)

#: arXiv's category taxonomy (https://arxiv.org/category_taxonomy): archive -> subject classes;
#: an archive with no classes is itself the category (hep-th, quant-ph, ...).
_ARXIV_TAXONOMY = {
    "astro-ph": "astro-ph CO EP GA HE IM SR",
    "cond-mat": "dis-nn mes-hall mtrl-sci other quant-gas soft stat-mech str-el supr-con",
    "cs": "AI AR CC CE CG CL CR CV CY DB DC DL DM DS ET FL GL GR GT HC IR IT LG LO MA MM MS NA "
    "NE NI OH OS PF PL RO SC SD SE SI SY",
    "econ": "EM GN TH",
    "eess": "AS IV SP SY",
    "math": "AC AG AP AT CA CO CT CV DG DS FA GM GN GR GT HO IT KT LO MG MP NA NT OA OC PR QA RA "
    "RT SG SP ST",
    "nlin": "AO CD CG PS SI",
    "physics": "acc-ph ao-ph app-ph atm-clus atom-ph bio-ph chem-ph class-ph comp-ph data-an "
    "ed-ph flu-dyn gen-ph geo-ph hist-ph ins-det med-ph optics plasm-ph pop-ph soc-ph space-ph",
    "q-bio": "BM CB GN MN NC OT PE QM SC TO",
    "q-fin": "CP EC GN MF PM PR RM ST TR",
    "stat": "AP CO ME ML OT TH",
    **dict.fromkeys(("gr-qc", "hep-ex", "hep-lat", "hep-ph", "hep-th", "math-ph"), ""),
    **dict.fromkeys(("nucl-ex", "nucl-th", "quant-ph"), ""),
}
ARXIV_CATEGORIES = frozenset(
    f"{archive}.{subject}" if subject != archive else archive
    for archive, subjects in _ARXIV_TAXONOMY.items()
    for subject in (subjects.split() or [archive])
)
_CANONICAL = {c.lower(): c for c in ARXIV_CATEGORIES}


def parse_feeds(text: str) -> tuple[tuple[str, ...], list[str]]:
    """``PAPERBOY_FEEDS`` as feeds (files, URLs, ``arxiv:cat,cat``) and the problems found.

    Items are separated by commas or spaces (quote a path that holds a space). ``arxiv:``
    starts an arXiv feed; the items after it that name an arXiv archive (``cs.CL``,
    ``stat.ML``, ``hep-th``) are its categories, checked against arXiv's taxonomy; the first
    item that does not is a file or URL again. One arXiv feed is one API query (its
    categories ORed), kept as ``arxiv:`` and its categories sorted, so the order never matters.
    """
    lexer = shlex.shlex(text, posix=True)
    lexer.whitespace += ","
    lexer.whitespace_split = True
    lexer.commenters = ""  # a URL may hold a '#'
    try:
        items = list(lexer)
    except ValueError:
        return (), [f"PAPERBOY_FEEDS has an unclosed quote: {text!r}."]
    feeds: list[str] = []
    problems: list[str] = []
    group: list[str] | None = None  # the categories of the arXiv feed being read
    named = False  # the feed being read named a category (known or not)

    def close() -> None:
        if group is None:
            return
        if not group and not named:
            problems.append(
                "PAPERBOY_FEEDS has 'arxiv:' with no category after it: write, for example, "
                "arxiv:cs.LG,cs.CL,stat.ML."
            )
        feed = "arxiv:" + ",".join(sorted(set(group)))
        if group and feed not in feeds:
            feeds.append(feed)

    for item in items:
        if item.lower().startswith("arxiv:"):
            close()
            group, named, item = [], False, item[len("arxiv:") :]
            if not item:
                continue
            if item.split(".", 1)[0].lower() not in _ARXIV_TAXONOMY:  # arxiv:foo.bar
                named = True
                problems.append(
                    f"PAPERBOY_FEEDS names {item}, which is not an arXiv category: "
                    "see https://arxiv.org/category_taxonomy."
                )
                continue
        archive = item.split(".", 1)[0].lower()
        if group is not None and "/" not in item and archive in _ARXIV_TAXONOMY:
            category, named = _CANONICAL.get(item.lower()), True
            if category is None:
                like = difflib.get_close_matches(item, sorted(ARXIV_CATEGORIES), n=1, cutoff=0.8)
                hint = f" (did you mean {like[0]}?)" if like else ""
                problems.append(
                    f"PAPERBOY_FEEDS names {item}, which is not an arXiv category{hint}: "
                    "see https://arxiv.org/category_taxonomy."
                )
            else:
                group.append(category)
            continue
        close()
        group = None
        if item not in feeds:
            feeds.append(item)
    close()
    return tuple(feeds), problems


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


#: A sane cap on the arXiv pages one feed reads a day.
MAX_ARXIV_PAGES = 100


class SettingsError(ValueError):
    """Bad settings; ``problems`` holds one sentence per bad value, for the operator."""

    def __init__(self, *problems: str):
        self.problems = list(problems)
        super().__init__(" ".join(problems))


#: A URL's user, ``:``, password, ``@``, then what is read as its host (up to the path or the
#: query), as SQLAlchemy's parse (and libpq's) reads them: the password ends at its first @.
_PASSWORD_THEN_HOST = re.compile(r"[\w+]+://[^:/]*:[^@]*@(?P<host>[^/?]*)")


def _password_holds_at(url: str) -> bool:
    """Whether an @ left in the URL's password split it, the rest of the password read as
    the host. (An @ in the user name alone, as Azure's ``user@server`` names, parses right.)
    Matched here, not parsed by SQLAlchemy: a lookup never imports it."""
    found = _PASSWORD_THEN_HOST.match(url)
    return found is not None and "@" in found.group("host")


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
    # arXiv feeds: the API (a mirror or a test server instead), who to contact about the
    # requests (sent in the User-Agent), and how many pages of results one run may fetch.
    arxiv_api_url: str = ARXIV_API_DEFAULT
    arxiv_contact: str | None = None
    arxiv_max_pages: int = 10
    digest_grace_seconds: int = 6 * 3600
    digest_workers: int = 4  # digests posted at once (PAPERBOY_DIGEST_WORKERS)
    log_level: str = "INFO"
    log_format: str = "text"  # or "json": one JSON object per log line
    # The web server (waitress): request threads, open connections, idle seconds before closing.
    http_threads: int = 16
    # The app's pool for the work after ack() (lookups, replies): PAPERBOY_WORK_THREADS.
    work_threads: int = 8
    http_connection_limit: int = 1000
    http_channel_timeout: int = 30
    # Where the shared state lives: None keeps it in the SQLite database (db_path);
    # a postgresql:// URL puts it in PostgreSQL, shared by processes on any host.
    database_url: str | None = None
    # With DATABASE_URL: how often each process pulls new papers from the shared corpus.
    corpus_sync_seconds: int = 15
    # Installing into many workspaces (OAuth v2): the app's credentials (Basic Information),
    # the bot scopes asked for, the Redirect URL registered with Slack (None: the one set on
    # the app's OAuth & Permissions page), and, for an app with token rotation turned on, how
    # many minutes before a bot token expires it is refreshed (with its refresh token).
    slack_client_id: str | None = None
    slack_client_secret: str | None = None
    slack_scopes: tuple[str, ...] = SLACK_SCOPES_DEFAULT
    slack_redirect_uri: str | None = None
    slack_token_refresh_minutes: int = 120

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Read and check every setting; all bad values are reported together (SettingsError)."""
        env = os.environ if env is None else env
        problems: list[str] = []

        def opt(name: str) -> str | None:
            value = env.get(name, "").strip()
            return value or None

        port_text = opt("PORT") or "3000"
        if not port_text.isdigit() or not 0 <= int(port_text) < 65536:
            # 0 as with --port 0: any free port, which the start-up lines name.
            problems.append(f"PORT must be a number between 0 and 65535, not {port_text!r}.")
            port_text = "3000"
        grace = opt("PAPERBOY_DIGEST_GRACE_SECONDS") or str(6 * 3600)
        if grace.startswith("-") and grace[1:].isdigit():
            problems.append(f"PAPERBOY_DIGEST_GRACE_SECONDS can't be negative, not {grace!r}.")
            grace = "0"
        elif not grace.isdigit():
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
        digest_workers = _positive(env, "PAPERBOY_DIGEST_WORKERS", 4, problems)
        http_threads = _positive(env, "PAPERBOY_HTTP_THREADS", 16, problems)
        work_threads = _positive(env, "PAPERBOY_WORK_THREADS", 8, problems)
        http_connections = _positive(env, "PAPERBOY_HTTP_CONNECTIONS", 1000, problems)
        http_timeout = _positive(env, "PAPERBOY_HTTP_TIMEOUT", 30, problems)
        corpus_sync_seconds = _positive(env, "PAPERBOY_CORPUS_SYNC_SECONDS", 15, problems)
        database_url = opt("DATABASE_URL")
        if database_url and not database_url.startswith(("postgresql://", "postgres://")):
            scheme = database_url.split("://", 1)[0] if "://" in database_url else database_url
            problems.append(
                "DATABASE_URL must be a postgresql:// URL (or unset, to keep the state in the "
                f"SQLite database), not one starting {scheme[:20]!r}."
            )
        elif database_url and _password_holds_at(database_url):
            problems.append(  # (the URL not echoed: part of a password is in it)
                "DATABASE_URL has an @ in its password: write it %40 there."
            )
        feeds, feed_problems = parse_feeds(opt("PAPERBOY_FEEDS") or "")
        problems += feed_problems
        arxiv_api_url = opt("PAPERBOY_ARXIV_API_URL") or ARXIV_API_DEFAULT
        if not arxiv_api_url.startswith(("http://", "https://")):
            problems.append(
                f"PAPERBOY_ARXIV_API_URL must be an http(s) URL, not {arxiv_api_url!r}."
            )
        arxiv_max_pages = _positive(env, "PAPERBOY_ARXIV_MAX_PAGES", 10, problems)
        if arxiv_max_pages > MAX_ARXIV_PAGES:  # each page is one more request to arXiv
            problems.append(
                f"PAPERBOY_ARXIV_MAX_PAGES must be at most {MAX_ARXIV_PAGES}, "
                f"not {arxiv_max_pages}."
            )
        scopes = tuple(
            dict.fromkeys(s for s in (opt("SLACK_SCOPES") or "").replace(",", " ").split())
        )
        redirect_uri = opt("SLACK_REDIRECT_URI")
        if (
            redirect_uri
            and not redirect_uri.startswith("https://")
            and not (redirect_uri.startswith("http://") and _is_local_url(redirect_uri))
        ):
            problems.append(
                f"SLACK_REDIRECT_URI must be an https:// URL (Slack refuses others), not "
                f"{redirect_uri!r}."
            )
        refresh_minutes = _positive(env, "SLACK_TOKEN_REFRESH_MINUTES", 120, problems)
        if refresh_minutes >= 12 * 60:  # a rotating token lives twelve hours
            problems.append(
                "SLACK_TOKEN_REFRESH_MINUTES must be under 720 (a rotating token lives 12 "
                f"hours), not {refresh_minutes}."
            )
        if problems:
            raise SettingsError(*problems)
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
            arxiv_api_url=arxiv_api_url,
            arxiv_contact=opt("PAPERBOY_ARXIV_CONTACT"),
            arxiv_max_pages=arxiv_max_pages,
            digest_grace_seconds=int(grace),
            digest_workers=digest_workers,
            log_level=log_level,
            log_format=log_format,
            http_threads=http_threads,
            work_threads=work_threads,
            http_connection_limit=http_connections,
            http_channel_timeout=http_timeout,
            database_url=database_url,
            corpus_sync_seconds=corpus_sync_seconds,
            slack_client_id=opt("SLACK_CLIENT_ID"),
            slack_client_secret=opt("SLACK_CLIENT_SECRET"),
            slack_scopes=scopes or SLACK_SCOPES_DEFAULT,
            slack_redirect_uri=redirect_uri,
            slack_token_refresh_minutes=refresh_minutes,
        )

    @property
    def has_slack_credentials(self) -> bool:
        return bool(
            self.slack_bot_token
            or self.slack_signing_secret
            or self.slack_app_token
            or self.slack_client_id
            or self.slack_client_secret
        )

    @property
    def multi_workspace(self) -> bool:
        """Installed into workspaces through OAuth (``/slack/install``): each workspace's bot
        token comes from its installation, not from ``SLACK_BOT_TOKEN``."""
        return bool(self.slack_client_id and self.slack_client_secret)

    def check_slack(self) -> None:
        """Refuse a half-configured Slack connection with one sentence naming what is missing."""
        if not self.has_slack_credentials:
            return
        if self.slack_client_id or self.slack_client_secret:
            self.check_oauth()
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

    def check_oauth(self, *, serving: bool = True) -> None:
        """The settings of a deployment installed through OAuth (see ``multi_workspace``);
        ``serving``: for the web process, which also needs the signing secret (the digest
        commands do not)."""
        missing = [
            name
            for name, value in (
                ("SLACK_CLIENT_ID", self.slack_client_id),
                ("SLACK_CLIENT_SECRET", self.slack_client_secret),
                ("SLACK_SIGNING_SECRET", self.slack_signing_secret if serving else "-"),
            )
            if not value
        ]
        if missing:
            raise SettingsError(
                f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} missing: "
                "installing into many workspaces needs the app's Client ID, Client Secret and "
                "Signing Secret (Basic Information page)."
            )
        if self.slack_bot_token:
            raise SettingsError(
                "SLACK_BOT_TOKEN and SLACK_CLIENT_ID are both set: with OAuth each workspace's "
                "token comes from its installation, so unset SLACK_BOT_TOKEN and install your "
                "workspace again at /slack/install."
            )
        if self.slack_app_token:
            raise SettingsError(
                "SLACK_APP_TOKEN and SLACK_CLIENT_ID are both set: installing into many "
                "workspaces runs over HTTP (/slack/install), not Socket Mode; unset one."
            )


def _is_local_url(url: str) -> bool:
    """http:// is fine for this machine only (a local test of the install pages)."""
    host = url.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[0]
    return host in ("127.0.0.1", "localhost", "[::1]")
