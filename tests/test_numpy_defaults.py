"""numpy's process-wide knobs (``bot/numpy_defaults.py``): huge pages off everywhere, the
AVX-512 kernels off on AMD Zen 4 only, an operator's own values kept."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from bot.numpy_defaults import (
    AVX512_KERNELS,
    CPU_FEATURES,
    HUGEPAGE,
    _installed_numpy_version,
    numpy_defaults,
    slow_avx512_sorts,
)


def cpuinfo(vendor: str, family: int, flags: str) -> str:
    """Two processors' blocks, as ``/proc/cpuinfo`` lists them."""
    block = (
        f"processor\t: {{n}}\nvendor_id\t: {vendor}\ncpu family\t: {family}\nflags\t\t: {flags}\n"
    )
    return block.format(n=0) + "\n" + block.format(n=1)


ZEN4 = cpuinfo("AuthenticAMD", 25, "fpu sse2 avx2 avx512f avx512dq avx512bw avx512vl")
ZEN3 = cpuinfo("AuthenticAMD", 25, "fpu sse2 avx2")
ZEN5 = cpuinfo("AuthenticAMD", 26, "fpu sse2 avx2 avx512f avx512dq avx512bw avx512vl")
INTEL = cpuinfo("GenuineIntel", 6, "fpu sse2 avx2 avx512f avx512dq avx512bw avx512vl")


@pytest.mark.parametrize(
    ("info", "slow"), [(ZEN4, True), (ZEN3, False), (ZEN5, False), (INTEL, False), ("", False)]
)
def test_only_zen_4_counts_as_sorting_slowly_with_avx512(info: str, slow: bool) -> None:
    assert slow_avx512_sorts(info) is slow


def test_zen_4_with_numpy_2_4_turns_avx512_off_and_huge_pages_off() -> None:
    assert numpy_defaults({}, ZEN4, "2.4.6") == {HUGEPAGE: "0", CPU_FEATURES: AVX512_KERNELS}
    assert numpy_defaults({}, ZEN4, "3.0.0rc1") == {HUGEPAGE: "0", CPU_FEATURES: AVX512_KERNELS}


@pytest.mark.parametrize(
    ("info", "version"),
    [(INTEL, "2.4.6"), (ZEN5, "2.4.6"), (ZEN3, "2.4.6"), (ZEN4, "2.3.5"), (ZEN4, "1.26.4")],
)
def test_elsewhere_only_huge_pages_are_turned_off(info: str, version: str) -> None:
    """numpy before 2.4 names its AVX-512 kernels otherwise (and warns at import about a name
    it does not know): left as it is."""
    assert numpy_defaults({}, info, version) == {HUGEPAGE: "0"}


def test_an_operators_own_values_are_kept() -> None:
    assert numpy_defaults({HUGEPAGE: "1"}, ZEN4, "2.4.6") == {CPU_FEATURES: AVX512_KERNELS}
    assert numpy_defaults({CPU_FEATURES: ""}, ZEN4, "2.4.6") == {HUGEPAGE: "0"}
    assert numpy_defaults({HUGEPAGE: "1", CPU_FEATURES: "AVX512_SPR"}, ZEN4, "2.4.6") == {}


def test_numpys_version_is_read_without_importing_it() -> None:
    assert _installed_numpy_version() == np.__version__


def _fresh(code: str, **environ: str) -> str:
    """What a new interpreter that imports Paperboy first prints."""
    env = {k: v for k, v in os.environ.items() if k not in (HUGEPAGE, CPU_FEATURES)}
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**env, **environ},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


HUGEPAGES_AND_CHILD = (
    "import bot.engine.index, numpy, os, subprocess, sys\n"
    "print(numpy._core.multiarray._get_madvise_hugepage())\n"
    "child = 'import os; print(os.environ.get(\"NUMPY_MADVISE_HUGEPAGE\"))'\n"
    "print(subprocess.run([sys.executable, '-c', child], capture_output=True, text=True).stdout)"
)


def test_a_paperboy_process_and_the_processes_it_starts_run_numpy_without_huge_pages() -> None:
    assert _fresh(HUGEPAGES_AND_CHILD).split() == ["False", "0"]


def test_an_operator_who_wants_huge_pages_gets_them() -> None:
    assert _fresh(HUGEPAGES_AND_CHILD, **{HUGEPAGE: "1"}).split() == ["True", "1"]
