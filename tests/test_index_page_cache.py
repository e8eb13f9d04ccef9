"""Opening an index checksums its files; on a cold page cache that read must not bring the
files back in large folios, or every lookup touching one byte of a mapped file maps up to
2 MB of it (a serving process of the 872k index: 624 MB instead of 412)."""

import mmap
import os
import re
from pathlib import Path

import pytest

from bot.engine.index import WRITE_CHUNK, file_checksum

SIZE = 32 << 20
STRIDE = 1 << 20


def _written(path: Path) -> Path:
    """A file written as the index writer writes (``WRITE_CHUNK`` at a time), on disk."""
    piece = os.urandom(WRITE_CHUNK)
    with open(path, "wb") as handle:
        for _ in range(SIZE // WRITE_CHUNK):
            handle.write(piece)
        handle.flush()
        os.fsync(handle.fileno())
    return path


def _drop(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _resident_after_touches(path: Path) -> int:
    """KB of the file's mapping resident after touching one byte every MB, as lookups do."""
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as m:
        for offset in range(0, SIZE, STRIDE):
            m[offset]
        total, inside = 0, False
        for line in Path("/proc/self/smaps").read_text().splitlines():
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                inside = line.endswith(str(path))
            elif inside and line.startswith("Rss:"):
                total += int(line.split()[1])
        return total


def _plain_read(path: Path) -> None:
    with open(path, "rb", buffering=0) as handle:
        while handle.read(1 << 20):
            pass


def test_a_checksum_on_a_cold_cache_leaves_small_folios(tmp_path):
    path = _written(tmp_path / "xt_indices.npy")
    _drop(path)
    _plain_read(path)
    control = _resident_after_touches(path)
    if control <= (SIZE // STRIDE) * 256:
        pytest.skip(f"this filesystem's readahead makes no large folios ({control} KB resident)")
    _drop(path)
    file_checksum(path)
    after_checksum = _resident_after_touches(path)
    # 32 touches: fault-around maps 64 KB each (2 MB in all) against up to 64 MB.
    assert after_checksum < control / 4, (after_checksum, control)
