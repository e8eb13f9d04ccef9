"""Measurement helpers shared by the benchmark scripts: memory, child processes, tables.

Memory is always measured per process (each engine runs in its own child), because peak RSS
of one long-lived benchmark process would mix every engine's allocations together.
"""

from __future__ import annotations

import contextlib
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


def _status_kb(field: str, pid: int | str = "self") -> float | None:
    """A ``kB`` field of ``/proc/<pid>/status`` (Linux only), or None (elsewhere, or a zombie)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return float(line.split()[1])
    except OSError:
        return None
    return None


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far (VmHWM; getrusage where /proc is missing)."""
    kb = _status_kb("VmHWM")
    if kb is None:
        kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kB on Linux
    return kb / 1024


def rss_mb() -> float:
    """Current resident memory of this process (VmRSS), for a baseline before the work starts."""
    kb = _status_kb("VmRSS")
    return (kb or 0.0) / 1024


def rss_split_mb() -> tuple[float, float]:
    """Current (anonymous, file-backed) resident memory of this process.

    Engines that mmap their index (tantivy, Paperboy, bm25s with mmap) show the touched index
    pages in RSS; those pages are page cache, shared between processes and reclaimable, unlike
    anonymous memory. Reporting the split keeps "uses 2 GB" from being misread either way.
    """
    anon = _status_kb("RssAnon") or 0.0
    file_backed = (_status_kb("RssFile") or 0.0) + (_status_kb("RssShmem") or 0.0)
    return anon / 1024, file_backed / 1024


@dataclass
class ChildRun:
    """What a measured child process did: wall time, its own peak RSS, exit code, output."""

    wall_s: float
    peak_rss_mb: float
    returncode: int
    stdout: str
    stderr: str

    def check(self, what: str) -> ChildRun:
        """Raise with the child's stderr if it failed, so a broken run is never tabulated."""
        if self.returncode != 0:
            raise RuntimeError(f"{what} failed (exit {self.returncode}):\n{self.stderr[-3000:]}")
        return self


def run_child(
    cmd: Sequence[str],
    *,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float | None = None,
    max_memory_gb: float | None = None,
) -> ChildRun:
    """Run ``cmd`` and return its wall time and *its own* peak RSS.

    The peak is the child's ``VmHWM``, sampled from ``/proc/<pid>/status`` every 2 ms while it
    runs; the last sample is kept because VmHWM only grows after ``exec``. ``wait4``'s
    ``ru_maxrss`` is *not* used where /proc is available: it also counts the forked copy of
    this (benchmark) process before ``exec``, so a 40 MB child of a 120 MB parent reports 120.
    Output goes to temporary files rather than pipes so a chatty child never blocks on a full
    pipe. A child still running after ``timeout`` seconds is killed (exit -9), so one runaway
    engine cannot stall a whole benchmark. ``max_memory_gb`` caps the child's address space
    (RLIMIT_AS), so an engine that needs more memory than the machine can spare fails with
    MemoryError instead of pushing the OOM killer onto someone else's process.
    """

    def cap_memory() -> None:  # runs in the child between fork and exec
        limit = int(max_memory_gb * 2**30)  # type: ignore[operator]
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        proc = subprocess.Popen(
            list(cmd),
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=err,
            preexec_fn=cap_memory if max_memory_gb else None,
        )
        hwm_kb: float | None = None
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            hwm_kb = _status_kb("VmHWM", proc.pid) or hwm_kb
            if timeout is not None and time.perf_counter() - started > timeout:
                proc.kill()
                _, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.002)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        peak_kb = hwm_kb if hwm_kb is not None else usage.ru_maxrss
        return ChildRun(wall, peak_kb / 1024, proc.returncode, out.read(), err.read())


def python_cmd(module: str, *args: str) -> list[str]:
    """``python -m module args`` with the interpreter running the benchmark (the venv's)."""
    return [sys.executable, "-m", module, *args]


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation, like numpy's default."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def median(values: Sequence[float]) -> float:
    """Median, or NaN for no values (a skipped engine shows up as a blank, not a crash)."""
    return statistics.median(values) if values else float("nan")


def fmt(value: float | int | str | None, digits: int = 3) -> str:
    """Format a table cell: numbers to ``digits`` significant-ish places, None as a dash."""
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return f"{value:,}"
    if value != value:  # NaN
        return "-"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.{digits}f}"


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub-flavoured markdown table; numbers right-aligned so columns read easily."""
    cells = [[fmt(c) if not isinstance(c, str) else c for c in row] for row in rows]
    align = ["---" if i == 0 else "---:" for i in range(len(headers))]
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in cells]
    return "\n".join(lines)


def dir_size_mb(path: Path) -> float:
    """On-disk size of an index (a file or a directory tree), to report alongside memory."""
    if path.is_file():
        return path.stat().st_size / 2**20
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):  # a file merged away mid-walk
                total += os.path.getsize(os.path.join(root, name))
    return total / 2**20


def log(msg: str) -> None:
    """Progress to stderr, so stdout stays clean markdown for copy-paste."""
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)
