"""A full build's helper process: ``python -m bot.engine.build_helper DB`` reads rowids (int64
bytes) on stdin and writes those papers tokenised (``index.tokenise_part``, a pickle) on
stdout. Started by ``index._Helper`` so that a build tokenises on two cores."""

import pickle
import sys

import numpy as np

from .index import tokenise_part


def main() -> None:
    rowids = np.frombuffer(sys.stdin.buffer.read(), dtype=np.int64).tolist()
    pickle.dump(tokenise_part(sys.argv[1], rowids), sys.stdout.buffer, protocol=5)
    sys.stdout.buffer.flush()


if __name__ == "__main__":
    main()
