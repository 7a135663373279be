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
        "garbage line",
    ]) + "\n")
    share, busy = ci.device_share(str(raw), ci.device_frame("hwemu", "/t"))
    assert share == 50 / 100 and busy == 20 / 70
    assert ci.device_share(str(tmp_path / "missing.raw"), ci.device_frame("hwemu", "/t")) is None


def test_report_gives_the_floor_and_both_shares():
    step = ci.Step("share", "tiny", "pytest test_tiny.py", ())
    counts = collections.Counter(passed=3)
    res = {"hwemu": ci.Result(30.0, 0, counts, {}, {}, "", (0.4, 0.2)),
           "tinygrad": ci.Result(50.0, 0, counts, {}, {}, "", (0.6, 0.6))}
    line = ci.report(step, res)[0]
    assert "client    20.0s  vs floor  1.50x" in line
    assert "hwemu dev 40.0% (busy 20.0%)" in line and "tinygrad dev 60.0%" in line
