"""Settings are checked at start, all together, the same way in every command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from bot.cli import main
from bot.settings import Settings, SettingsError

COMMANDS = [
    ["search", "diffusion"],
    ["similar", "x"],
    ["stats"],
    ["ingest", "papers.jsonl"],
    ["serve"],
    ["scheduler"],
    ["worker"],
    ["digest", "send"],
    ["digest", "preview", "--user", "U1"],
]


def test_every_bad_value_is_reported_together():
    with pytest.raises(SettingsError) as raised:
        Settings.from_env(
            {
                "PORT": "http",
                "PAPERBOY_LOG_LEVEL": "loud",
                "PAPERBOY_LOG_FORMAT": "xml",
                "SLACK_API_URL": "slack.com",
                "PAPERBOY_DIGEST_GRACE_SECONDS": "6h",
            }
        )
    problems = raised.value.problems
    assert len(problems) == 5
    assert [p.split()[0] for p in problems] == [
        "PORT",
        "PAPERBOY_DIGEST_GRACE_SECONDS",
        "SLACK_API_URL",
        "PAPERBOY_LOG_LEVEL",
        "PAPERBOY_LOG_FORMAT",
    ]
    assert "'loud'" in problems[3] and "INFO" in problems[3]
    assert "'xml'" in problems[4] and "json" in problems[4]


def test_log_format_and_level():
    assert Settings.from_env({}).log_format == "text"
    assert Settings.from_env({}).log_level == "INFO"
    settings = Settings.from_env({"PAPERBOY_LOG_FORMAT": "JSON", "PAPERBOY_LOG_LEVEL": "debug"})
    assert (settings.log_format, settings.log_level) == ("json", "DEBUG")


def test_the_thread_counts_of_a_web_process():
    assert (Settings.from_env({}).http_threads, Settings.from_env({}).work_threads) == (16, 8)
    settings = Settings.from_env({"PAPERBOY_HTTP_THREADS": "4", "PAPERBOY_WORK_THREADS": "2"})
    assert (settings.http_threads, settings.work_threads) == (4, 2)
    with pytest.raises(SettingsError, match="PAPERBOY_WORK_THREADS must be a whole number"):
        Settings.from_env({"PAPERBOY_WORK_THREADS": "0"})


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_every_command_names_each_bad_setting_and_exits_2(command, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PAPERBOY_LOG_LEVEL", "loud")
    monkeypatch.setenv("PAPERBOY_LOG_FORMAT", "xml")
    result = CliRunner().invoke(main, command, catch_exceptions=False)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("PAPERBOY_LOG_LEVEL must be one of")
    assert lines[1].startswith("PAPERBOY_LOG_FORMAT must be text or json")
    assert list(tmp_path.iterdir()) == []  # nothing was started or created


def test_help_works_whatever_the_environment(monkeypatch):
    monkeypatch.setenv("PAPERBOY_LOG_LEVEL", "loud")
    result = CliRunner().invoke(main, ["search", "--help"], catch_exceptions=False)
    assert result.exit_code == 0 and "--limit" in result.output


@pytest.mark.parametrize("command", [["scheduler"], ["digest", "send", "--now"]])
def test_a_bad_log_level_is_one_sentence_in_a_real_process(command, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAPERBOY_", "SLACK_"))}
    env["PAPERBOY_LOG_LEVEL"] = "verbose"
    env["SLACK_BOT_TOKEN"] = "xoxb-test"
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli", *command],
        cwd=tmp_path,
        env=env | {"PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.strip().startswith("PAPERBOY_LOG_LEVEL must be one of")
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_every_setting_is_in_the_readmes_table_and_every_row_is_read():
    """README's Configuration table and bot/settings.py name the same variables (plus numpy's
    two, which bot/numpy_defaults.py sets), so no setting is undocumented nor a row stale."""
    import re

    root = Path(__file__).resolve().parent.parent
    source = (root / "bot" / "settings.py").read_text()
    read = set(re.findall(r'(?:opt|env\.get)\("([A-Z][A-Z0-9_]+)"', source))
    read |= set(re.findall(r'_positive\(env, "([A-Z][A-Z0-9_]+)"', source))
    readme = (root / "README.md").read_text()
    table = readme.split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    documented = {
        name for row in rows for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", row.split(" | ")[0])
    }
    numpy = set(
        re.findall(r'"((?:NUMPY|NPY)_[A-Z_]+)"', (root / "bot" / "numpy_defaults.py").read_text())
    )
    assert "PAPERBOY_FEEDS" in read and len(read) > 20  # the pattern still finds them
    assert read - documented == set(), "settings missing from README's Configuration table"
    assert documented - read - numpy == set(), "README rows that no code reads"


def test_port_0_means_any_free_port_as_with_serve_port_0():
    assert Settings.from_env({"PORT": "0"}).port == 0
    assert Settings.from_env({"PORT": "8080"}).port == 8080
    for bad in ("65536", "-1", "http"):
        with pytest.raises(SettingsError, match="PORT must be a number between 0 and 65535"):
            Settings.from_env({"PORT": bad})
