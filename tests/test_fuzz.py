"""Short, fixed-seed versions of the tools/fuzz.py campaigns: valid instruction streams on every family and
corrupted code objects (in process and through the CLIs) end in a GPU fault or a clean, named error, never in an
emulator error, an uncaught exception, a traceback, a hang, a crash or an allocation beyond the memory limit."""
from __future__ import annotations

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
@pytest.mark.parametrize("kind,n", [("codeobjects", 90), ("clis", 6)])
def test_corrupted_code_objects(pool, kind, n):
    counts = fuzz.campaign(kind, n, fuzz.ARCHES, 1, pool)
    assert_clean(counts)
    if kind == "codeobjects":
        assert any(k.startswith("rejected:") for k in counts) and "completed" in counts
