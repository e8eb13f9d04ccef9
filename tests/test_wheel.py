"""The installed package, as a user gets it: a wheel built from the repository, installed into a
fresh virtual environment, run in an empty folder.

The wheel is built with ``pip wheel`` exactly as a user would (isolated build, setuptools from
the index or pip's cache). The fresh venv gets only the wheel; the dependencies are borrowed from
this test environment through a ``.pth`` line (a path entry, so the editable install's finder
living there is never activated), which keeps the test to a few seconds and offline after CI's
own install.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

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
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(source)],
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
