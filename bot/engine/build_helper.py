"""A full build's helper process, started by ``index._Helper``/``index._Reader`` so that a
build tokenises on two cores. ``python -m bot.engine.build_helper DB`` reads rowids (int64
bytes) on stdin and writes those papers tokenised (``index.tokenise_part``) on stdout.
``python -m bot.engine.build_helper --fed CLAIMS SPOOL ANNOUNCED`` (a first ingest,
``index._Reader``: three file descriptors) tokenises the papers the ingest hands it (with
their content hashes) in file order while the ingest writes them, as many as it can claim
through ``index._Claims``, and writes ``tokenise_papers``' answer on stdout. Either answer
goes as ``index._write_answer`` writes it."""

import gc
import itertools
import marshal
import os
import struct
import sys
from collections.abc import Iterator

import numpy as np

from .index import (
    TOKENISE_BATCH,
    _as_part,
    _Claims,
    _tokenise_columns,
    _write_answer,
    tokenise_part,
)
from .paper import Paper


def main() -> None:
    if sys.argv[1] == "--fed":
        claims, spool, announced = map(int, sys.argv[2:5])
        answer = tokenise_papers(papers_fed(spool, announced), _Claims(claims))
    else:
        rowids = np.frombuffer(sys.stdin.buffer.read(), dtype=np.int64).tolist()
        answer = tokenise_part(sys.argv[1], rowids)
    _write_answer(answer, sys.stdout.buffer)
    sys.stderr.flush()
    # Gone without the interpreter's teardown (freeing every object of a large part one by
    # one: 0.45 s at 872k papers, which the building process waited for).
    os._exit(0)


def tokenise_papers(papers: Iterator[tuple[Paper, str]], claims: _Claims) -> tuple:
    """The papers in file order, each with its content hash (as the ingest computed it),
    tokenised as far as the claims allow (the building process takes the rest from the back):
    the part (rowids left 0) and each paper's id and content hash, which the builder matches
    with the database's rows. Stops when the building process is gone."""
    ids: list[str] = []
    hashes: list[str] = []
    parent = os.getppid()

    def claimed() -> Iterator[Paper]:
        while os.getppid() == parent and (take := claims.take_front(TOKENISE_BATCH)):
            batch = list(itertools.islice(papers, take))
            ids.extend([paper.id for paper, _ in batch])
            hashes.extend([digest for _, digest in batch])
            yield from [paper for paper, _ in batch]
            if len(batch) < take:
                return

    papers_claimed = claimed()
    batches = iter(lambda: list(itertools.islice(papers_claimed, TOKENISE_BATCH)), [])
    # No cyclic garbage collection meanwhile: the papers in flight hold no cycles, and a
    # collection every 700 new objects walked the batch's (0.25 s of 3.4 s at 87k papers).
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _as_part(_tokenise_columns(map(_columns, batches))), ids, hashes
    finally:
        if collecting:
            gc.enable()


def _columns(papers: list[Paper]) -> tuple:
    """Papers as ``index._tokenise_columns`` takes them (rowids 0), the same texts as their
    rows read back (``corpus._documents``): what a build tokenises."""
    return (
        [0] * len(papers),
        [paper.year for paper in papers],
        [paper.venue for paper in papers],
        [paper.title for paper in papers],
        [paper.keywords for paper in papers],
        [paper.abstract for paper in papers],
        [paper.authors for paper in papers],
    )


def papers_fed(spool: int, announced: int) -> Iterator[tuple[Paper, str]]:
    """The papers ``index._Reader.feed`` hands over, each with its content hash: batches
    appended to the file ``spool``, each a length and its papers' values and hashes
    (``marshal``), announced by a byte on the pipe ``announced``; its end (the ingest done,
    or gone) leaves only what the spool holds. A record not written whole (the ingest died
    mid-way) is not read."""
    offset = 0
    while True:
        more = os.read(announced, 4096)
        end = os.fstat(spool).st_size
        while offset + 8 <= end:
            (size,) = struct.unpack("<q", os.pread(spool, 8, offset))
            if offset + 8 + size > end:
                break
            values, digests = marshal.loads(os.pread(spool, size, offset + 8))
            offset += 8 + size
            yield from zip(itertools.starmap(Paper, values), digests, strict=True)
        if not more:
            return


if __name__ == "__main__":
    main()
