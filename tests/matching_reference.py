"""The reference for topic matching: each topic through the engine's public lookup, one query
per topic. ``digest.matching.match_topics`` must give the same results in one batch;
tests/test_digest_selection.py and bench/digest_speed.py compare the two."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from bot.engine.search import Engine
from digest.matching import (
    MATCH_THRESHOLD,
    TopicMatch,
    _empty,
    _finish,
    _no_scores,
    _prepare,
    _rowids_of_ids,
)


def match_topics_one_by_one(
    engine: Engine, queries: Sequence[str], *, threshold: float = MATCH_THRESHOLD, **_: Any
) -> list[TopicMatch]:
    """The reference: each topic through the engine's public lookup (``Engine.rank``), asking
    for more results until the scores drop below the threshold. Same results, one query per
    topic; the tests and the benchmark compare the batch against it."""
    index = engine.index
    out = []
    for text in queries:
        prepared = _prepare(engine, index, text)
        docs, scores = _empty(), _no_scores()
        if prepared.error is None and len(prepared.term_ids) and not prepared.filters_only:
            k = 64
            while True:
                ranked = engine.rank(text, k=k, coordinate=False)
                if len(ranked) < k or ranked[-1][1] < threshold:
                    break
                k *= 4
            score_of = {i: s for i, s in ranked if s >= threshold}
            rows = _rowids_of_ids(engine, list(score_of))
            pairs = sorted(
                (int(d), score_of[i]) for i, r in rows if (d := index.doc_of_rowid(r)) is not None
            )
            docs = np.asarray([d for d, _ in pairs], np.int64)
            scores = np.asarray([s for _, s in pairs], np.float32)
        out.append(_finish(engine, index, prepared, docs, scores, threshold))
    return out
