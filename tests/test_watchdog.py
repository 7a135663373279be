"""The dispatch watchdog: a CPU-time limit per dispatch (argument `timeout`, HWEMU_TIMEOUT, default 60 s) that stops
kernels spinning forever and launches of too many workgroups on every tier, with a fault naming the wave, its PC and
what it was running; Ctrl-C stops a launch; the GPU goes on working after either."""
from __future__ import annotations

import _thread
import functools
import signal
import subprocess
import sys
import threading

import numpy as np
import pytest

from stack.codegen import opencl

pytestmark = pytest.mark.skipif(not opencl.available(), reason="clang-19 and ld.lld-19 are needed to build kernels")

SOURCE = r"""
kernel void spin(global volatile int *flag) { while (flag[0] == 0) {} }
kernel void one(global int *out) { out[get_global_id(0) & 63] = 1; }
"""
TIERS = ("ref", "interp", "jit", "auto")


@functools.cache
def code() -> bytes:
    return opencl.compile_cl(SOURCE, "gfx1100")


def _gpu(monkeypatch, tier: str):
    from emu.amd import GPU
    monkeypatch.setenv("HWEMU_TIER", tier)
    gpu = GPU("gfx1100")
    return gpu, gpu.load(code())


def _still_works(gpu, prog) -> None:
    out = gpu.alloc(4 * 64)
    gpu.launch(prog, "one", grid=(2,), block=(32,), args=[out])
    assert (np.frombuffer(gpu.read(out), np.int32) == 1).all()


@pytest.mark.parametrize("tier", TIERS)
def test_spinning_kernel_stops_with_a_fault_naming_the_wave(monkeypatch, tier):
    from emu.amd import GPUFault
    gpu, prog = _gpu(monkeypatch, tier)
    flag = gpu.alloc(4)
    with pytest.raises(GPUFault) as e:
        gpu.launch(prog, "spin", grid=(2,), block=(64,), args=[flag], timeout=0.5)
    r = e.value.record
    assert r.kind == "watchdog" and "longer than 0.5 s of engine CPU time" in r.detail and "kernel spin" in r.detail
    assert r.wave == 0 and r.workgroup == (0, 0, 0) and r.pc is not None and r.instruction
    assert "wave dump" in r.detail and f"{r.pc:#x}" in r.detail
    _still_works(gpu, prog)


@pytest.mark.parametrize("tier", ("ref", "jit"))
def test_too_many_workgroups_stop_by_time(monkeypatch, tier):
    """A launch of 2^24 workgroups, each short: the limit is per dispatch, not per wave."""
    from emu.amd import GPUFault
    monkeypatch.setenv("HWEMU_TIMEOUT", "0.5")  # the environment's limit when the launch gives none
    gpu, prog = _gpu(monkeypatch, tier)
    out = gpu.alloc(4 * 64)
    with pytest.raises(GPUFault) as e:
        gpu.launch(prog, "one", grid=(1 << 24,), block=(1,), args=[out])
    assert e.value.record.kind == "watchdog" and "longer than 0.5 s" in e.value.record.detail
    _still_works(gpu, prog)


def test_bad_timeout_setting_is_named(monkeypatch):
    gpu, prog = _gpu(monkeypatch, "auto")
    monkeypatch.setenv("HWEMU_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="HWEMU_TIMEOUT='soon'"):
        gpu.launch(prog, "one", grid=(1,), block=(1,), args=[gpu.alloc(4)])


@pytest.mark.parametrize("tier", ("ref", "jit"))
def test_ctrl_c_stops_a_launch(monkeypatch, tier):
    gpu, prog = _gpu(monkeypatch, tier)
    flag = gpu.alloc(4)
    # a process a shell started in the background inherits SIGINT ignored, and interrupt_main then does nothing
    handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.5, _thread.interrupt_main)  # what SIGINT does: KeyboardInterrupt in the main thread
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            gpu.launch(prog, "spin", grid=(1,), block=(32,), args=[flag], timeout=0)  # no time limit
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, handler)
    _still_works(gpu, prog)


def test_cli_timeout_exits_1_with_the_fault(tmp_path):
    co = tmp_path / "k.hsaco"
    co.write_bytes(code())
    p = subprocess.run([sys.executable, "-m", "emu.amd.run", str(co), "--kernel", "spin", "--block", "32",
                        "--arg", "buf:out:i32:1", "--out", str(tmp_path), "--timeout", "0.5"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 1, p.stderr
    assert "watchdog" in p.stderr and "longer than 0.5 s" in p.stderr and "Traceback" not in p.stderr


def test_budget_counts_cpu_time_not_waiting():
    """A dispatch's budget is CPU time of its thread: waiting (a loaded machine, the GIL) spends none of it."""
    import time

    from emu.amd.exec.wave import Deadline
    d = Deadline(0.05)
    time.sleep(0.2)
    assert not d.passed()
    while not d.passed():  # work spends it
        sum(range(1000))


def test_a_short_dispatch_never_reads_the_clock(monkeypatch):
    """Reading a thread's CPU time is a system call, dearer than most dispatches' waves: the clock starts at the
    first check (the 16th wave's start, or a wave's first full slice), and counts from there."""
    from emu.amd.exec import wave
    reads = []
    clock = wave.time.thread_time
    monkeypatch.setattr(wave.time, "thread_time", lambda: reads.append(1) or clock())
    d = wave.Deadline(0.05)
    assert not any(d.passed_lately() for _ in range(15)) and reads == []
    assert not d.passed_lately() and len(reads) == 2  # the 16th: the clock starts, and is looked at
    while not d.passed():
        sum(range(1000))
