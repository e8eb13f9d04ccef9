"""The installed package, as a user gets it: a wheel built from the repository, installed into a
fresh virtual environment, run in an empty folder.

The wheel is built with ``pip wheel`` exactly as a user would (isolated build, setuptools from
the index or pip's cache). The fresh venv gets only the wheel; the dependencies are borrowed from
this test environment through a ``.pth`` line (a path entry, so the editable install's finder
living there is never activated), which keeps the test to a few seconds and offline after CI's
own install.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
import tomllib
import urllib.request
import venv
import zipfile
from pathlib import Path

import pytest

from tests.slack_harness import free_port

REPO = Path(__file__).resolve().parent.parent
SKIP = {".git", ".venv", "build", "bench", "__pycache__", ".pytest_cache", ".ruff_cache"}


def _source_copy(target: Path) -> Path:
    """The repository's files without build leftovers (a stale build/ would leak into a wheel)."""

    def ignore(directory: str, names: list[str]) -> set[str]:
        return {
            n
            for n in names
            if n in SKIP or n.endswith((".egg-info", ".db", ".index", ".db-wal", ".db-shm"))
        }

    shutil.copytree(REPO, target, ignore=ignore)
    return target


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("wheel")
    source = _source_copy(work / "src")
    out = work / "dist"
    # From requirements.txt, in the project's root, as Heroku's buildpack installs it.
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out)]
        + ["-r", "requirements.txt"],
        cwd=source,
        check=True,
        capture_output=True,
    )
    (built,) = out.glob("paperboy-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding the wheel; returns its bin/ folder."""
    env_dir = tmp_path_factory.mktemp("venv") / "v"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # The dependencies come from this environment, after the venv's own site-packages.
    (Path(site) / "_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q"]
        + ["--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
    )
    return env_dir / "bin"


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAPERBOY_", "SLACK_"))}
    env.pop("PYTHONPATH", None)
    return env


def test_the_wheel_holds_every_module_and_the_seed_corpus(wheel: Path):
    names = set(zipfile.ZipFile(wheel).namelist())
    for package in ("bot", "digest"):
        for source in (REPO / package).rglob("*"):
            if source.suffix in (".py", ".html") and "__pycache__" not in source.parts:
                assert source.relative_to(REPO).as_posix() in names, f"{source} is not in the wheel"
    seeds = [p.name for p in (REPO / "data").iterdir() if p.suffix == ".txt"]
    assert seeds and all(f"bot/seeds/{name}" in names for name in seeds)
    assert "bot/slack/manifest.yml" in names  # (`paperboy manifest`: creating the Slack app)


#: What only tests use of the Slack stand-in (tests/fake_slack.py, tests/waiting.py): failure injection, waiting,
#: recorded calls and inspection. The playground's stand-in must not carry any of it.
TEST_ONLY_FAKE_SLACK = {
    "Call",
    "Response",
    "_Failure",
    "fail_next",
    "disconnect_next",
    "revoke_token",
    "restore_token",
    "add_channel",
    "set_socket_mode_url",
    "calls",
    "calls_to",
    "responses",
    "is_member",
    "home_view",
    "modals",
    "wait_for",
}


TEST_SLACK_MODULES = ("fake_slack.py", "waiting.py")


def _defined_names(source: str) -> set[str]:
    """Every class, function and method name defined in a module's source."""
    return {
        node.name
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
    }


def test_the_wheel_holds_no_test_support(wheel: Path):
    archive = zipfile.ZipFile(wheel)
    names = set(archive.namelist())
    assert not [n for n in names if n.startswith("tests/")], "the tests package is in the wheel"
    assert not [n for n in names if n.rsplit("/", 1)[-1] in ("testing.py", "conftest.py")]
    # The list above is what the tests' stand-in really adds (kept honest here) ...
    in_tests = set().union(
        *(_defined_names((REPO / "tests" / name).read_text()) for name in TEST_SLACK_MODULES)
    )
    assert not TEST_ONLY_FAKE_SLACK - in_tests
    # ... and none of it is in the product's stand-in.
    shipped = archive.read("bot/playground/fake_slack.py").decode()
    assert not TEST_ONLY_FAKE_SLACK & _defined_names(shipped)


def test_every_package_is_listed_in_pyproject():
    """pyproject.toml lists packages by hand (see there): a new one must be added."""
    listed = set(
        tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    on_disk = {
        ".".join(init.parent.relative_to(REPO).parts)
        for package in ("bot", "digest")
        for init in (REPO / package).rglob("__init__.py")
    }
    assert on_disk <= listed, f"add {sorted(on_disk - listed)} to pyproject.toml"


def test_an_installed_wheel_answers_from_the_seed_corpus_in_an_empty_folder(
    installed: Path, tmp_path: Path
):
    empty = tmp_path / "empty"
    empty.mkdir()
    env = _clean_env()
    where = subprocess.run(
        [installed / "python", "-c", "import bot; print(bot.__file__)"],
        cwd=empty,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert where.startswith(str(installed.parent)), where  # the wheel, not the checkout

    search = subprocess.run(
        [installed / "paperboy", "search", "diffusion"],
        cwd=empty,
        env=env,
        capture_output=True,
        text=True,
    )
    assert search.returncode == 0, search.stderr
    assert "papers match" in search.stdout and "No papers match" not in search.stdout
    assert "diffusion" in search.stdout.lower()

    stats = subprocess.run(
        [installed / "paperboy", "stats"], cwd=empty, env=env, capture_output=True, text=True
    )
    assert stats.returncode == 0, stats.stderr
    assert "38" in stats.stdout and "ICML" in stats.stdout and "ICLR" in stats.stdout
    assert list(empty.iterdir()) == []  # lookups never create a database

    # The Slack app's manifest, to create the app from a wheel install (no checkout).
    manifest = subprocess.run(
        [installed / "paperboy", "manifest", "--host", "papers.example.org"],
        cwd=empty,
        env=env,
        capture_output=True,
        text=True,
    )
    assert manifest.returncode == 0, manifest.stderr
    assert manifest.stdout == (REPO / "bot" / "slack" / "manifest.yml").read_text().replace(
        "https://YOUR-HOST", "https://papers.example.org"
    )


def test_an_installed_wheel_serves_the_playground(installed: Path, tmp_path: Path):
    """`paperboy serve` from the wheel: creates the database from the packaged seeds and serves
    the playground page (package data too)."""
    port = free_port()
    server = subprocess.Popen(
        [installed / "paperboy", "serve"],
        cwd=tmp_path,
        env=_clean_env() | {"PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        page = None
        for _ in range(600):  # polls until the port answers (not a timing assertion)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as response:
                    page = response.read().decode()
                break
            except OSError:
                if server.poll() is not None:
                    break
                time.sleep(0.1)
        assert page is not None, server.stderr.read() if server.poll() is not None else ""
        assert "playground" in page.lower()
        assert (tmp_path / "paperboy.db").exists()
    finally:
        server.terminate()
        server.wait(timeout=30)
    stats = subprocess.run(
        [installed / "paperboy", "stats", "--json"], cwd=tmp_path, env=_clean_env(),
        capture_output=True, text=True,
    )  # fmt: skip
    assert json.loads(stats.stdout)["papers"] == 38


# --- Heroku's Python buildpack (github.com/heroku/heroku-buildpack-python) -------------------
# It picks its package manager from requirements.txt / poetry.lock / uv.lock / Pipfile.lock
# (exactly one; a pyproject.toml alone is not enough), runs `pip install -r requirements.txt`
# in the app's root, and reads the Python version from .python-version ("3.11" or "3.11.x").
PYTHON_VERSION = re.compile(r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(\.(0|[1-9][0-9]*))?")


def test_heroku_finds_one_package_manager_and_a_python_version():
    assert (REPO / "requirements.txt").is_file()
    assert not [
        name
        for name in ("poetry.lock", "uv.lock", "Pipfile", "Pipfile.lock")
        if (REPO / name).exists()
    ]
    lines = (REPO / ".python-version").read_text(encoding="ascii").split()
    assert len(lines) == 1 and PYTHON_VERSION.fullmatch(lines[0]), lines
    requires = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
    major, minor = (int(x) for x in lines[0].split(".")[:2])
    assert requires == ">=3.11" and (major, minor) >= (3, 11)


def test_requirements_txt_installs_paperboy_with_its_dependencies(wheel: Path):
    """The wheel above was built from requirements.txt (`.`): it is this project, and it
    declares pyproject.toml's dependencies, so pip installs them too."""
    lines = [
        line.strip()
        for line in (REPO / "requirements.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines == ["."]
    archive = zipfile.ZipFile(wheel)
    metadata = archive.read(next(n for n in archive.namelist() if n.endswith("-info/METADATA")))
    requires = {
        line.split(":", 1)[1].strip()
        for line in metadata.decode().splitlines()
        if line.startswith("Requires-Dist:") and "extra ==" not in line
    }
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    assert len(requires) == len(declared) and wheel.name.startswith("paperboy-")
