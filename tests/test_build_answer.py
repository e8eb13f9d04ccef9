"""A build helper's answer (``index._write_answer``/``_read_answer``): what the building
process reads back is the answer the helper made, value for value, whatever its size; an
answer cut short is never taken for one (the helper died: the build tokenises its share)."""

import gc
import io

import pytest

import bot.engine.build_helper as build_helper
import bot.engine.index as index_module
from tests.test_build_reader import _hashed_papers_in, papers  # noqa: F401 (a fixture)
from tests.test_live_index import write_jsonl


def _answer() -> tuple:
    big = bytes(range(256)) * (index_module._RAW_BYTES // 128)  # travels apart
    part = (
        b"\x00" * 24,
        big[:12],
        ["NeurIPS", "", "ICML", "NeurIPS"],
        [(big, bytes(16)), (b"", b"\x01" * 8), (big[::-1], big[1:])],
        ["alpha", "béta", "self attention"],
    )
    return part, ["p1", "p2", "p3"], ["a" * 40, "b" * 40, "c" * 40]


def _written(answer: tuple) -> bytes:
    out = io.BytesIO()
    index_module._write_answer(answer, out)
    return out.getvalue()


@pytest.mark.parametrize("answer", [_answer(), _answer()[0]], ids=["reader", "helper"])
def test_an_answer_reads_back_as_written(answer):
    data = _written(answer)
    assert index_module._read_answer(io.BytesIO(data)) == answer
    assert len(data) > 3 * index_module._RAW_BYTES  # the big bytes are in it once each


def test_an_answer_cut_short_is_never_read_as_one():
    data = _written(_answer())
    for end in [0, 4, 8, 9, 40, len(data) // 2, len(data) - 1]:
        with pytest.raises(EOFError):
            index_module._read_answer(io.BytesIO(data[:end]))


def test_a_reader_s_part_holds_one_string_a_venue_and_leaves_the_collector_on(
    tmp_path,
    papers,  # noqa: F811 (the fixture)
):
    for k, paper in enumerate(papers):
        paper["venue"] = ["ICLR", "NeurIPS", ""][k % 3]
    source = write_jsonl(tmp_path / "p.jsonl", papers)
    assert gc.isenabled()
    claims = index_module._Claims()
    part, ids, hashes = build_helper.tokenise_papers(_hashed_papers_in([str(source)]), claims)
    claims.close()
    assert gc.isenabled()
    venues = part[2]
    assert venues == [p["venue"] for p in papers] and len(ids) == len(hashes) == len(papers)
    assert len({id(venue) for venue in venues}) == 3
