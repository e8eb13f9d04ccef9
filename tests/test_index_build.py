"""A full build tokenises its papers in two processes (each reading its share of the papers
from the database, the helper's unigram ids renumbered in the parent): the index files must
be the same, byte for byte, as a one-process build's."""

import json

import numpy as np

import bot.engine.index as index_module
from bot.engine.index import GENERATION_FILES, read_current
from bot.engine.search import Engine
from tests.test_live_index import make_papers, write_jsonl


def _files(directory) -> dict[str, bytes]:
    """Every file of the published generation, meta.json without its build time."""
    current = read_current(directory)
    segment = directory / current["segments"][0]["name"]
    out = {}
    for path in sorted(segment.iterdir()):
        data = path.read_bytes()
        if path.name == "meta.json":
            meta = json.loads(data)
            meta.pop("built_at")
            data = json.dumps(meta, sort_keys=True).encode()
        out[path.name] = data
    for key in GENERATION_FILES:
        out[key] = (directory / current[key]["file"]).read_bytes()
    return out


def test_a_two_process_build_writes_the_same_files_as_a_one_process_build(
    tmp_path, sentences, monkeypatch
):
    papers = make_papers(sentences, "t", 300, seed=51)
    # Words only the second half has: the helper numbers them from 0, the parent after its own.
    for k, paper in enumerate(papers[150:]):
        paper["abstract"] += f" zeta{k % 7}word omega{k % 5}term"
    engine = Engine.open(tmp_path / "t.db")
    engine.ingest([write_jsonl(tmp_path / "t.jsonl", papers)])
    monkeypatch.setattr(index_module, "PARALLEL_MIN_DOCS", 0)
    helpers = []
    real = index_module._append_part

    def appending(tokens, part):
        helpers.append(len(part[2]))  # papers the helper process tokenised
        real(tokens, part)

    monkeypatch.setattr(index_module, "_append_part", appending)
    monkeypatch.setattr(index_module, "BUILD_PROCESSES", 2)
    index_module.build_index(engine.corpus, tmp_path / "two")
    assert helpers == [150]
    monkeypatch.setattr(index_module, "BUILD_PROCESSES", 1)
    index_module.build_index(engine.corpus, tmp_path / "one")
    assert helpers == [150]
    one, two = _files(tmp_path / "one"), _files(tmp_path / "two")
    assert one.keys() == two.keys() and "xt_indices.npy" in one
    for name in one:
        assert one[name] == two[name], name
    terms = index_module.Index(tmp_path / "two").vocab
    assert terms.id_of("zeta3word") >= 0 and terms.id_of("zeta3word omega3term") >= 0
    assert np.array_equal(
        index_module.Index(tmp_path / "two").rowids, index_module.Index(tmp_path / "one").rowids
    )
