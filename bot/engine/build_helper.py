"""A full build's helper process, started by ``index._Helper``/``index._Reader`` so that a
build tokenises on two cores. ``python -m bot.engine.build_helper DB`` reads rowids (int64
bytes) on stdin and writes those papers tokenised (``index.tokenise_part``, a pickle) on
stdout. ``python -m bot.engine.build_helper --files FD PATH...`` (a first ingest) reads the
input files itself and tokenises their papers in file order while the ingest writes them,
as many as it can claim through ``index._Claims`` (the shared file FD), and writes
``tokenise_files``' answer on stdout."""

import itertools
import os
import pickle
import sys
from collections.abc import Iterator

import numpy as np

from .formats.common import CorpusFileError
from .formats.detect import open_corpus_file
from .index import TOKENISE_BATCH, _as_part, _Claims, _tokenise, tokenise_part
from .paper import Paper


def main() -> None:
    if sys.argv[1] == "--files":
        answer = tokenise_files(sys.argv[3:], _Claims(int(sys.argv[2])))
    else:
        rowids = np.frombuffer(sys.stdin.buffer.read(), dtype=np.int64).tolist()
        answer = tokenise_part(sys.argv[1], rowids)
    pickle.dump(answer, sys.stdout.buffer, protocol=5)
    sys.stdout.buffer.flush()


def tokenise_files(paths: list[str], claims: _Claims) -> tuple:
    """The files' papers in file order, tokenised as far as the claims allow (the building
    process takes the rest from the back): the part (rowids left 0) and each paper's id and
    content hash, which the builder matches with the database's rows. Stops when the
    building process is gone."""
    ids: list[str] = []
    hashes: list[str] = []
    papers = _papers_in(paths)
    parent = os.getppid()

    def documents() -> Iterator[tuple[int, dict]]:
        while os.getppid() == parent and (take := claims.take_front(TOKENISE_BATCH)):
            batch = list(itertools.islice(papers, take))
            for paper in batch:
                ids.append(paper.id)
                hashes.append(paper.content_hash())
                yield 0, _document(paper)
            if len(batch) < take:
                return

    return _as_part(_tokenise(documents())), ids, hashes


def _document(paper: Paper) -> dict:
    """A paper as ``corpus._documents`` reads its row back (what a build tokenises)."""
    return {
        "title": paper.title or "",
        "abstract": paper.abstract or "",
        "authors": paper.authors,
        "keywords": paper.keywords,
        "venue": paper.venue or "",
        "year": paper.year,
    }


def _papers_in(paths: list[str]) -> Iterator[Paper]:
    """The papers of the files in order, as an ingest reads them; up to the first file that
    cannot be read (the builder tokenises whatever does not match the database)."""
    for path in paths:
        try:
            with open_corpus_file(path) as stream:
                yield from (item for item in stream.items if isinstance(item, Paper))
        except CorpusFileError:
            return


if __name__ == "__main__":
    main()
