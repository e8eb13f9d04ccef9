# ruff: noqa: F811 - the fixture is test_taste_ranking's, imported by name
"""The semantic space is stored with the index's main segment (issue 11, stop 20): a restarted
process reads it instead of fitting it again, a damaged copy is fitted again, a delta segment
(the daily ingest) keeps it, and a new main segment gets its own."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from bot.engine import index as index_module
from bot.engine.index import Index
from bot.engine.search import Engine
from digest import taste
from tests.digest_support import write_corpus
from tests.test_taste_ranking import _docs, _generative_papers, generative  # noqa: F401


def _stored(engine: Engine) -> list[Path]:
    return sorted(Path(engine.index.segments[0].directory).glob("taste-space-*.npz"))


def _no_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(main):
        raise AssertionError("the semantic space was fitted again")

    monkeypatch.setattr(taste, "_fit_semantic_space", fail)


@dataclass
class _Fitted:
    """Three papers projected in a space just fitted, and where that space was stored."""

    index: Index
    docs: np.ndarray
    vectors: np.ndarray
    path: Path


@pytest.fixture
def fitted(generative: Engine) -> _Fitted:
    index = generative.index
    docs = _docs(generative, "diffusion-0", "score-0", "robot-0")
    vectors = taste.semantic_vectors(index, docs)
    [path] = _stored(generative)
    return _Fitted(index, docs, vectors, path)


def test_a_restarted_process_reads_the_stored_space_instead_of_fitting_it(
    fitted: _Fitted, monkeypatch: pytest.MonkeyPatch
) -> None:
    index, docs, path = fitted.index, fitted.docs, fitted.path
    assert not list(path.parent.glob("*.tmp-*"))  # written whole, then renamed
    taste.forget()  # a restart
    _no_fit(monkeypatch)
    assert taste.semantic_vectors(index, docs).tobytes() == fitted.vectors.tobytes()


def test_a_damaged_stored_space_is_fitted_again(fitted: _Fitted) -> None:
    index, docs, path = fitted.index, fitted.docs, fitted.path
    good = path.read_bytes()
    with np.load(path) as stored:
        kept, components, check = stored["kept"], stored["components"], stored["check"]
    with open(path, "wb") as handle:  # readable, but not what was stored
        np.savez(handle, kept=kept, components=components * 2, check=check)
    taste.forget()
    assert taste.semantic_vectors(index, docs).tobytes() == fitted.vectors.tobytes()
    assert path.read_bytes() == good  # and stored again
    path.write_bytes(good[: len(good) // 2])  # cut short
    taste.forget()
    assert taste.semantic_vectors(index, docs).tobytes() == fitted.vectors.tobytes()
    assert path.read_bytes() == good


def test_a_delta_segment_keeps_the_space_and_a_new_main_segment_gets_its_own(
    generative: Engine, fitted: _Fitted, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = fitted.path
    more = [
        {**paper, "id": f"new-{paper['id']}", "authors": [f"new{paper['authors'][0]}"]}
        for paper in _generative_papers()[:5]
    ]
    monkeypatch.setattr(index_module, "MERGE_SHARE", 10.0)  # a delta, however large
    generative.ingest([write_corpus(tmp_path / "more.jsonl", more)])
    index = generative.index
    assert len(index.segments) == 2  # the ingest added a delta segment
    taste.forget()
    with monkeypatch.context() as patch:
        _no_fit(patch)
        both, robot, new = taste.semantic_vectors(
            index, _docs(generative, "both-0", "robot-0", "new-both-1")
        )
    assert both @ new > 0.9 > 0.1 > both @ robot  # the new paper has its place in the space
    generative.rebuild_index()  # one new main segment: the old one, and its space, are gone
    assert not path.exists()
    taste.forget()
    taste.semantic_vectors(generative.index, _docs(generative, "score-0"))
    assert len(_stored(generative)) == 1
