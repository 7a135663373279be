"""tools.bench runs end to end: a quick run of two workloads prints the table (behaviour only, never timing)."""
import subprocess
import sys
from pathlib import Path

import pytest

import emu.amd.exec as engine
from stack.codegen.opencl import available
from tools.bench import TIER_NAMES

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.llvm, pytest.mark.skipif(not available(), reason="needs clang-19 and ld.lld-19")]


def bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tools.bench", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


def test_quick_table():
    p = bench("--quick", "--only", "add,cold")
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert any(line.startswith("first launch") for line in lines)
    assert any(line.split()[:2] == ["workload", "tier"] for line in lines)
    have = getattr(engine, "TIERS", ("ref",))
    for workload in ("add", "cold"):
        for tier in TIER_NAMES:
            row = [line.split() for line in lines if line.split()[:2] == [workload, tier]]
            assert len(row) == 1, f"no single {workload} {tier} row in:\n{p.stdout}"
            if tier in have:
                assert row[0][-1].endswith("x"), row  # measured: ends with its ratio against the reference tier
            else:
                assert row[0][2:] == ["n/a"], row


def test_bad_option():
    p = bench("--only", "nope")
    assert p.returncode == 2 and "choose from" in p.stderr
