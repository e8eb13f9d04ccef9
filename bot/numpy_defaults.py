"""numpy's process-wide knobs, given Paperboy's defaults before numpy is first imported.

numpy reads two environment variables once, when it is imported (``bot/__init__`` sets them,
so every Paperboy process, the build's helper processes included, starts with them):

- ``NUMPY_MADVISE_HUGEPAGE``: numpy asks the kernel for transparent huge pages for every
  large array. An index build makes and drops gigabytes of temporary arrays, and on the
  virtual machines Paperboy was measured on, faulting each one in as huge pages (zeroing,
  compaction) cost more than the work on them: copying 1 GB took 2.8 s with them and 0.7 s
  without; the 872k-paper build spent 47 s of its 129 s in the kernel with them, 19 s of 95 s
  without. Off (``0``).
- ``NPY_DISABLE_CPU_FEATURES``: on AMD Zen 4 (family 0x19 with AVX-512) numpy's AVX-512
  sorts store each partition with ``vpcompress`` to memory, which that core runs in microcode
  (over 100 cycles): 4 M int64 sort in 271 ms there against 59 ms on numpy's AVX2 path
  (numpy/x86-simd-sort#6). Off on that CPU only, for numpy 2.4 and later (which name the
  AVX-512 kernels this way); Zen 5 and Intel's AVX-512 cores are fast and keep them.

An operator who sets either variable keeps their value. Nothing changes once numpy has been
imported (a program that imported it before Paperboy keeps its own settings). Index files
and answers are the same, bit for bit, either way (compared on the 87k benchmark corpus).
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from collections.abc import MutableMapping
from pathlib import Path

HUGEPAGE = "NUMPY_MADVISE_HUGEPAGE"
CPU_FEATURES = "NPY_DISABLE_CPU_FEATURES"
#: numpy 2.4's names for its AVX-512 kernels (earlier versions name them otherwise).
AVX512_KERNELS = "X86_V4 AVX512_ICL AVX512_SPR"
#: The first numpy that names them so.
AVX512_NAMES_FROM = (2, 4)


def numpy_defaults(
    environ: MutableMapping[str, str], cpuinfo: str, numpy_version: str | None
) -> dict[str, str]:
    """The variables to set: those the environment does not set already."""
    wanted = {HUGEPAGE: "0"}
    if slow_avx512_sorts(cpuinfo) and _at_least(numpy_version, AVX512_NAMES_FROM):
        wanted[CPU_FEATURES] = AVX512_KERNELS
    return {name: value for name, value in wanted.items() if name not in environ}


def slow_avx512_sorts(cpuinfo: str) -> bool:
    """Whether ``/proc/cpuinfo``'s first processor is an AMD Zen 4: AMD, family 25 (0x19,
    which also holds Zen 3, without AVX-512) and AVX-512."""
    first = cpuinfo.split("\n\n", 1)[0]
    fields = dict(
        (name.strip(), value.strip())
        for name, _, value in (line.partition(":") for line in first.splitlines())
    )
    return (
        fields.get("vendor_id") == "AuthenticAMD"
        and fields.get("cpu family") == "25"
        and "avx512f" in fields.get("flags", "").split()
    )


def _at_least(version: str | None, wanted: tuple[int, int]) -> bool:
    found = re.match(r"(\d+)\.(\d+)", version or "")
    return found is not None and (int(found[1]), int(found[2])) >= wanted


def _installed_numpy_version() -> str | None:
    """numpy's version, read from its ``version.py`` without importing it (importing is what
    must come after; ``importlib.metadata`` takes ~40 ms)."""
    spec = importlib.util.find_spec("numpy")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        try:
            text = (Path(folder) / "version.py").read_text()
        except OSError:
            continue
        found = re.search(r"^version\s*(?::\s*str\s*)?=\s*[\"']([^\"']+)", text, re.MULTILINE)
        if found:
            return found[1]
    return None


def _cpuinfo() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            return handle.read(16384)
    except OSError:  # not Linux
        return ""


def set_numpy_defaults() -> None:
    """Set the defaults in this process's environment (inherited by the processes it starts),
    if numpy is not imported yet."""
    if "numpy" in sys.modules:
        return
    cpuinfo = _cpuinfo()
    version = _installed_numpy_version() if slow_avx512_sorts(cpuinfo) else None
    os.environ.update(numpy_defaults(os.environ, cpuinfo, version))
