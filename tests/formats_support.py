"""What the corpus-format tests (``tests/test_formats_*.py``) share: the fixture files and small
readers of results."""

from __future__ import annotations

from contextlib import chdir
from pathlib import Path

import pytest

from bot.engine.formats import (
    CorpusFileError,
    ReadResult,
    read_corpus_file,
)

FIXTURES = Path(__file__).parent / "fixtures" / "formats"
DATA = Path(__file__).resolve().parents[1] / "data"


def read(name: str) -> ReadResult:
    return read_corpus_file(FIXTURES / name)


def locations(result: ReadResult) -> list[tuple[str, str]]:
    return [(r.location, r.reason) for r in result.rejected]


def error_for(path: Path) -> str:
    """The refusal of ``path`` read from its own folder, as an operator would name it there
    (messages name the file as given, so this is just its name)."""
    with chdir(path.parent), pytest.raises(CorpusFileError) as caught:
        read_corpus_file(path.name)
    return str(caught.value)


def seed_paragraphs(path: Path) -> list[str]:
    """The abstracts of a real seed file, whitespace-collapsed, header dropped."""
    chunks = path.read_text(encoding="utf-8").split("\n\n")[1:]
    return [" ".join(chunk.split()) for chunk in chunks if chunk.strip()]
