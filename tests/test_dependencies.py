"""What ``pip install paperboy`` brings is enough to import every module of the app.

The test environment holds more than a user's (the ``test`` extra: pytest, playwright and what
they pull in), so a package the app imports but pyproject does not declare goes unnoticed
everywhere else: SQLAlchemy 2.1, for one, no longer installs ``greenlet``, which slack_sdk's
SQLAlchemy installation store needs through ``sqlalchemy.ext.asyncio``. Here every module of
``bot`` and ``digest`` is imported in a child that can import only the standard library and the
distributions pyproject's ``dependencies`` require, transitively, with their markers.
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement


def _required(requirements: list[str] | None, extras: set[str]) -> list[Requirement]:
    out = []
    for line in requirements or []:
        requirement = Requirement(line)
        marker = requirement.marker
        if marker is None or any(marker.evaluate({"extra": e}) for e in extras or {""}):
            out.append(requirement)
    return out


def runtime_modules() -> set[str]:
    """Top-level modules of paperboy's runtime dependency closure."""
    todo = _required(metadata.requires("paperboy"), set())
    seen: set[str] = set()
    modules: set[str] = set()
    while todo:
        requirement = todo.pop()
        key = requirement.name.lower().replace("_", "-")
        extras = set(requirement.extras)
        if (key, tuple(sorted(extras))) in seen:
            continue
        seen.add((key, tuple(sorted(extras))))
        dist = metadata.distribution(requirement.name)
        for file in dist.files or []:
            top = file.parts[0]
            if top.endswith((".dist-info", ".data")) or top in ("..", "__pycache__"):
                continue
            name = top.removesuffix(".py").split(".")[0]
            if file.suffix in (".py", ".so", ".pth") or len(file.parts) > 1:
                modules.add(name)
        todo += _required(dist.requires, extras)
    return modules


CHILD = """
import importlib, json, pkgutil, sys
allowed = set(json.loads(sys.argv[1])) | set(sys.stdlib_module_names) | {"bot", "digest"}
refused = []

class Undeclared:
    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top not in allowed and top not in sys.modules and not top.startswith("_sysconfigdata"):
            refused.append(name)
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Undeclared())
import bot, digest
failed = []
for package in (bot, digest):
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        if info.name == "bot.state.migrations.env":  # runs only under Alembic's own runner
            continue
        try:
            importlib.import_module(info.name)
        except Exception as error:
            failed.append(f"{info.name}: {type(error).__name__}: {error}"[:300])
print(json.dumps({"failed": failed, "refused": sorted(set(refused))}))
"""


def test_the_declared_dependencies_are_enough_to_import_every_module() -> None:
    allowed = runtime_modules()
    assert {"slack_bolt", "slack_sdk", "sqlalchemy", "sklearn", "apscheduler"} <= allowed
    run = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(sorted(allowed))],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert run.returncode == 0, run.stderr[-3000:]
    found = json.loads(run.stdout.strip().splitlines()[-1])
    assert found["failed"] == [], found
