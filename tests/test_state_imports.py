"""The shared state may use slack_sdk's OAuth stores and nothing else of slack_sdk.

pyproject's import-linter contract lets ``bot.state`` import slack_sdk (it sees the package
whole); this keeps that allowance to ``slack_sdk.oauth``: storage, no Web API, no Block Kit.
"""

from __future__ import annotations

import ast
from pathlib import Path

import bot.state

STATE_DIR = Path(bot.state.__file__).parent


def slack_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
    return [name for name in found if name.split(".")[0] in ("slack_sdk", "slack_bolt")]


def test_the_state_imports_only_slack_sdks_oauth_stores():
    used = {
        str(path.relative_to(STATE_DIR)): slack_imports(path) for path in STATE_DIR.rglob("*.py")
    }
    assert any(used.values())  # the OAuth stores are there (so this test looks at real files)
    for path, names in used.items():
        for name in names:
            assert name.startswith("slack_sdk.oauth."), (path, name)
