"""Short, fixed-seed versions of the tools/fuzz.py campaigns: valid instruction streams on every family, corrupted
code objects (in process, through the CLIs' main()s and through CLI processes) and wrong calls to the GPU API end in
a GPU fault or a clean, named error, never in an emulator error, an uncaught exception, a traceback, a hang, a
crash, an allocation beyond the documented limits, a leaked mapping or one beyond the memory limit."""
from __future__ import annotations

import itertools

import pytest

from stack.codegen import opencl
from tools import fuzz


@pytest.fixture(scope="module")
def pool():
    p = fuzz.Pool(timeout=60, memory=4096 << 20)
    yield p
    p.close()


def assert_clean(counts):
    bad = {k: v for k, v in counts.items() if fuzz.is_bad(k)}
    assert not bad, fuzz.table({"campaign": counts})
    assert sum(counts.values()) > 0


@pytest.mark.parametrize("arch", fuzz.ARCHES)
def test_instruction_streams(pool, arch):
    assert_clean(fuzz.campaign("streams", 40, [arch], 1, pool))


@pytest.mark.skipif(not opencl.available(), reason="clang-19 and ld.lld-19 build the code objects to corrupt")
@pytest.mark.parametrize("kind,n", [("codeobjects", 120), ("clis", 45), ("cli-processes", 3)])
def test_corrupted_code_objects(pool, kind, n):
    counts = fuzz.campaign(kind, n, fuzz.ARCHES, 1, pool)
    assert_clean(counts)
    if kind == "codeobjects":
        assert {"rejected:CodeObjectError", "rejected:CodeObjectLimitError", "completed"} <= set(counts)


@pytest.mark.skipif(not opencl.available(), reason="clang-19 and ld.lld-19 build the code object")
def test_api_misuse(pool):
    counts = fuzz.campaign("misuse", 60, fuzz.ARCHES, 1, pool)
    assert_clean(counts)
    assert sum(v for k, v in counts.items() if k.startswith("rejected:")) > 40


def test_a_spinning_input_is_a_hang_and_the_pool_goes_on():
    """The time limit counts the worker's CPU time (waiting for a core on a loaded machine is not a hang)."""
    p = fuzz.Pool(timeout=1, memory=0)
    try:
        assert p.run(sum, itertools.repeat(0)) == "hang"  # spins for ever
        assert p.run(sum, [1, 2]) == 3  # a fresh worker
    finally:
        p.close()
