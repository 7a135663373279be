"""tools/tinygrad_ci: the device's share of a profiled run, from py-spy's raw samples."""
from __future__ import annotations

import collections
import os

import emu
from tools import tinygrad_ci as ci


def test_device_share_counts_frames_and_leaves_out_blocked_waits(tmp_path):
    e = os.path.join(os.path.dirname(os.path.abspath(emu.__file__)), "amd", "queue.py") + ":10"
    raw = tmp_path / "run.raw"
    raw.write_text("\n".join([
        "process 1:\"pytest\";thread (1): MainThread;compile (/t/tinygrad/codegen.py:3) 50",
        f"process 1:\"pytest\";thread (2): hwemu-engine;Engine._loop ({e});run (x.py:1) 20",
        f"process 1:\"pytest\";thread (2): hwemu-engine;Engine._loop ({e});Doorbells.wait ({e}) 20",
        f"process 1:\"pytest\";thread (1): MainThread;_sleep ({e});Engine.wait_progress ({e}) 10",
        # a waiter running the device's work itself is busy
        f"process 1:\"pytest\";thread (1): MainThread;_sleep ({e});Engine.wait_progress ({e});Engine.serve ({e});"
        "run (x.py:1) 5",
        "garbage line",
    ]) + "\n")
    share, busy = ci.device_share(str(raw), ci.device_frame("hwemu", "/t"))
    assert share == 55 / 105 and busy == 25 / 75
    assert ci.device_share(str(tmp_path / "missing.raw"), ci.device_frame("hwemu", "/t")) is None


def test_report_gives_the_floor_and_both_shares():
    step = ci.Step("share", "tiny", "pytest test_tiny.py", ())
    counts = collections.Counter(passed=3)
    res = {"hwemu": ci.Result(30.0, 0, counts, {}, {}, "", (0.4, 0.2)),
           "tinygrad": ci.Result(50.0, 0, counts, {}, {}, "", (0.6, 0.6))}
    line = ci.report(step, res)[0]
    assert "client    20.0s  vs floor  1.50x" in line
    assert "hwemu dev 40.0% (busy 20.0%)" in line and "tinygrad dev 60.0%" in line


def test_a_chip_llvm_19_does_not_know_gets_a_newer_libllvm(tmp_path):
    for name in ("libLLVM.so.19.1", "libLLVM.so.22.1", "libLLVM-22.so", "libLLVM.so.21", "libLLVMfoo.so.30"):
        (tmp_path / name).write_bytes(b"")
    assert ci.libllvm(20, (str(tmp_path),)) == str(tmp_path / "libLLVM.so.22.1")
    assert ci.libllvm(23, (str(tmp_path),)) is None
    env = {"DEV": "MOCKKFD+AMD:LLVM:gfx1100"}
    ci._llvm_for(env)
    assert "LLVM_PATH" not in env
    env = {"DEV": "MOCKKFD+AMD::gfx950", "LLVM_PATH": "/x"}
    ci._llvm_for(env)
    assert env["LLVM_PATH"] == "/x"
