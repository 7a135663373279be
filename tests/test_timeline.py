"""Timelines (HWEMU_TIMELINE, `hwemu trace`): the Perfetto trace parses with the perfetto package's protos, its slices
nest as Perfetto's importer requires, and it holds what ran: the dispatches (kernel names, grid, block), one slice
per workgroup and wave, SDMA copies with the sizes the test copied, the packets the stack says it wrote, and a fault
instant at the address the kernel faulted on; through stack.Device, the runner API and `hwemu trace` as a process."""
from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from collections import Counter
from types import SimpleNamespace

import numpy as np
import pytest

from emu.amd import GPU, timeline, topology
from emu.amd.exec import jit
from emu.amd.memory import VM
from stack import Device, GPUError
from stack.codegen import opencl

pytestmark = [pytest.mark.llvm,
              pytest.mark.skipif(not opencl.available(), reason="clang-19 and ld.lld-19 are needed to build kernels")]
Trace = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2").Trace

SOURCE = """
__kernel void add1(__global float *a, float b) { int i = get_global_id(0); a[i] = a[i] + b; }
__kernel void mul2(__global float *a) { int i = get_global_id(0); a[i] *= 2.0f; }
__kernel void oob(__global int *a, long off) { a[get_global_id(0) + off] = 1; }
"""
BEGIN, END, INSTANT = 1, 2, 3  # TrackEvent.Type
WAIT = 120.0  # seconds a wait may take (a bound against hangs, not a timing check)


def code(arch: str = "gfx1100") -> bytes:
    return opencl.compile_cl(SOURCE, arch)


def read(path) -> tuple[list[dict], list[dict]]:
    """(slices, instants) of a trace; each has `track` (the names from the root track down), name, ts, args and
    slices dur. Checks what Perfetto's importer needs: every event on a described track, and on each track, in
    timestamp order, each end closing the slice begun last there."""
    trace = Trace.FromString(open(path, "rb").read())
    tracks, events = {}, []
    for p in trace.packet:
        assert p.trusted_packet_sequence_id
        if p.HasField("track_descriptor"):
            t = p.track_descriptor
            tracks[t.uuid] = (t.name, t.parent_uuid)
        elif p.HasField("track_event"):
            events.append(p)

    def where(uuid: int) -> tuple[str, ...]:
        name, parent = tracks[uuid]
        return (where(parent) if parent else ()) + (name,)
    open_, slices, instants = {}, [], []
    for p in sorted(events, key=lambda p: p.timestamp):  # stable: file order breaks ties, as in Perfetto's sorter
        e = p.track_event
        assert e.track_uuid in tracks
        args = {a.name: a.int_value if a.HasField("int_value") else a.string_value for a in e.debug_annotations}
        ev = {"track": where(e.track_uuid), "name": e.name, "ts": p.timestamp, "args": args}
        if e.type == BEGIN:
            open_.setdefault(e.track_uuid, []).append(ev)
        elif e.type == END:
            s = open_[e.track_uuid].pop()
            s["dur"] = p.timestamp - s["ts"]
            slices.append(s)
        else:
            assert e.type == INSTANT
            instants.append(ev)
    assert not any(open_.values()), "slices left open"
    return slices, instants


def on(slices, leaf: str) -> list[dict]:
    return sorted((s for s in slices if s["track"][-1] == leaf), key=lambda s: s["ts"])


def engine_counts() -> dict[str, int]:
    """What the engine counted on the mock system Device("MOCKKFD+AMD:gfx1100") uses (one gfx1100)."""
    from emu.os import interface
    return interface("gfx1100", 1).system.summary()


def test_device_timeline(tmp_path):
    """Two kernels through stack.Device: PM4 packets as the stack counts them, dispatches nested in their
    DISPATCH_DIRECT packets, every workgroup and wave in emulated time, the copies' sizes."""
    data = np.arange(3000, dtype=np.float32)  # 12,000 bytes: copied in and out by SDMA
    before = engine_counts()
    timeline.start(tmp_path / "t.pftrace")
    try:
        with Device("MOCKKFD+AMD:gfx1100") as dev:
            dev.timeout = WAIT
            x = dev.alloc(4 * 4096)
            dev.copyin(x, data)
            co = code()
            dev.program(co, "add1")(x, np.float32(2.5), global_size=(4,), local_size=(256,))
            dev.program(co, "mul2")(x, global_size=(3,), local_size=(96,))
            dev.synchronize()
            out = np.frombuffer(dev.copyout(x, data.nbytes), np.float32)
            counters = dev.counters()
    finally:
        timeline.stop()
    after = engine_counts()
    expected = data.copy()
    expected[:1024] += np.float32(2.5)
    expected[:288] *= 2
    np.testing.assert_array_equal(out, expected)
    slices, instants = read(tmp_path / "t.pftrace")
    assert not instants
    pm4 = [s for s in slices if s["track"][-1].startswith("PM4 queue")]
    packets = Counter(s["name"] for s in pm4 if s["name"].isupper())
    assert packets == Counter(counters["pm4"])  # the packets the stack wrote, each once
    dispatches = [s for s in pm4 if not s["name"].isupper()]
    assert [(s["name"], s["args"]["grid"], s["args"]["block"]) for s in dispatches] == [
        ("add1", "(4, 1, 1)", "(256, 1, 1)"), ("mul2", "(3, 1, 1)", "(96, 1, 1)")]
    for s in dispatches:  # inside its DISPATCH_DIRECT packet
        assert any(p["name"] == "DISPATCH_DIRECT" and p["ts"] <= s["ts"] and s["ts"] + s["dur"] <= p["ts"] + p["dur"]
                   for p in pm4)
    emulated = on(slices, "dispatches")
    assert [(s["name"], s["args"]["workgroups"], s["args"]["waves"]) for s in emulated] == [
        ("add1", 4, 4 * 256 // 32), ("mul2", 3, 3 * 96 // 32)]
    waves = [s for s in slices if s["track"][-1].startswith("SIMD")]
    assert len(waves) == 32 + 9 and len(on(slices, "workgroups")) == 4 + 3
    total = after["wave_instructions"] - before.get("wave_instructions", 0)
    assert sum(w["args"]["instructions"] for w in waves) == total == sum(s["args"]["wave_instructions"]
                                                                         for s in emulated)
    ns = 1e3 / topology.chip("gfx1100").engine_clock  # wave32 on a 32-lane SIMD: a cycle per instruction
    assert all(abs(w["dur"] - w["args"]["instructions"] * ns) <= 1 for w in waves)
    for s in emulated:  # its workgroups and waves lie within it
        mine = [w for w in waves + on(slices, "workgroups") if w["args"]["dispatch"] == s["args"]["dispatch"]]
        assert all(s["ts"] <= w["ts"] and w["ts"] + w["dur"] <= s["ts"] + s["dur"] for w in mine)
    sdma = [s for s in slices if s["track"][-1].startswith("SDMA queue")]
    copies = [s["args"]["bytes"] for s in sdma if s["name"] == "COPY_LINEAR"]
    assert len(copies) == counters["sdma"]["COPY"] and copies.count(data.nbytes) == 2


def test_fault_instant(tmp_path):
    """A kernel storing into a hole of the address space (a range the test holds reserved and inaccessible, so that
    no buffer of this process, earlier tests' included, lies there): an instant event on its queue, inside its
    dispatch, naming the address lane 0 faulted on and the PC."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype, libc.mmap.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                                              ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    hole = libc.mmap(None, 1 << 20, 0, 0x22, -1, 0)  # PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS
    assert hole not in (None, ctypes.c_void_p(-1).value)
    timeline.start(tmp_path / "f.pftrace")
    try:
        with Device("MOCKKFD+AMD:gfx1100") as dev:
            dev.timeout = WAIT
            x = dev.alloc(4096)
            dev.program(code(), "oob")(x, np.int64((hole - x.va) // 4), global_size=(1,), local_size=(32,))
            with pytest.raises(GPUError):
                dev.synchronize()
    finally:
        timeline.stop()
        libc.munmap(hole, 1 << 20)
    slices, instants = read(tmp_path / "f.pftrace")
    assert len(instants) == 1
    f = instants[0]
    assert f["name"] == "GPU fault: unmapped" and f["args"]["kind"] == "unmapped"
    assert f["args"]["address"] == hex(hole) and f["args"]["write"] == 1
    assert f["args"]["pc"].startswith("0x") and f["args"]["dispatch"] >= 0
    d = next(s for s in slices if s["name"] == "oob" and s["track"][-1].startswith("PM4 queue"))
    assert f["track"] == d["track"] and d["ts"] <= f["ts"] <= d["ts"] + d["dur"]


def test_aql_timeline(tmp_path, monkeypatch):
    """test_mockkfd's AQL queue (a barrier held back by a signal, a dispatch of 1,000 work-items in workgroups of 64,
    PM4 in a vendor packet) under a timeline: its packets on an AQL queue track, the barrier's slice spanning its
    wait up to the dispatch, the grid's 15 whole workgroups and partial one as two dispatches of two waves each.
    Its raw client gets a mock system no other test uses (9 GPUs), so what earlier tests left there cannot hold
    its queue back."""
    import functools

    import test_mockkfd
    monkeypatch.setattr(test_mockkfd, "RawClient", functools.partial(test_mockkfd.RawClient, gpus=9))
    timeline.start(tmp_path / "a.pftrace")
    try:
        test_mockkfd.test_aql_dispatch_barrier_and_pm4_ib("gfx1100")
    finally:
        timeline.stop()
    slices, _ = read(tmp_path / "a.pftrace")
    aql = [s for s in slices if s["track"][-1].startswith("AQL queue")]
    assert Counter(s["name"] for s in aql if s["name"].isupper()) == Counter(
        {"AQL_BARRIER_AND": 1, "AQL_KERNEL_DISPATCH": 1, "AQL_VENDOR": 1, "INDIRECT_BUFFER": 1, "RELEASE_MEM": 1})
    barrier = next(s for s in aql if s["name"] == "AQL_BARRIER_AND")
    dispatches = [s for s in aql if s["name"] == "saxpy"]
    assert [(s["args"]["grid"], s["args"]["block"], s["args"]["waves"]) for s in dispatches] == [
        ("(15, 1, 1)", "(64, 1, 1)", 30), ("(1, 1, 1)", "(40, 1, 1)", 2)]
    assert barrier["ts"] + barrier["dur"] <= dispatches[0]["ts"]


def test_runner_timeline(tmp_path, monkeypatch):
    """GPU.launch of 300 one-wave workgroups (long enough for the native launcher under auto and jit): the same
    counts as without a timeline, a wave slice per wave; past MAX_SLICES the dispatch says what it left out."""
    monkeypatch.setenv("HWEMU_COMPILE_COST", "0")  # under auto the hot region compiles whether or not it pays back
    gpu = GPU("gfx1100")
    prog = gpu.load(code())
    x = gpu.alloc(4 * 9600)
    gpu.write(x, np.zeros(9600, np.float32))
    off = gpu.launch(prog, "add1", grid=(300,), block=(32,), args=[x, np.float32(1)])
    assert jit.background.wait(300)  # under auto the hot region compiles in the background: then it is native
    timeline.start(tmp_path / "r.pftrace")
    try:
        traced = gpu.launch(prog, "add1", grid=(300,), block=(32,), args=[x, np.float32(1)])
        monkeypatch.setattr(timeline, "MAX_SLICES", 10)
        gpu.launch(prog, "mul2", grid=(8,), block=(64,), args=[x])
    finally:
        timeline.stop()
    assert traced == off
    np.testing.assert_array_equal(np.frombuffer(gpu.read(x), np.float32), np.where(np.arange(9600) < 512, 4, 2))
    if jit.tier() in ("auto", "jit"):
        assert prog.program(32).compiled  # the native launcher ran workgroups one per call
    slices, _ = read(tmp_path / "r.pftrace")
    runner = on(slices, "runner")
    assert [s["name"] for s in runner] == ["add1", "mul2"] and runner[0]["track"][0].startswith("runner gfx1100")
    first = runner[0]["args"]["dispatch"]
    waves = [s for s in slices if s["track"][-1].startswith("SIMD") and s["args"]["dispatch"] == first]
    assert len(waves) == 300 and sum(w["args"]["instructions"] for w in waves) == traced.wave_instructions
    assert len([s for s in on(slices, "workgroups") if s["args"]["kernel"] == "mul2"]) == 3  # 3 x (1 + 2 waves)
    assert runner[1]["args"]["not_drawn"].startswith("15 workgroup and wave slices")


SCRIPT = """
import sys
import numpy as np
from stack import Device
dev = Device()
x = dev.alloc(4096)
dev.copyin(x, np.zeros(1024, np.float32))
dev.program(open(sys.argv[1], "rb").read(), "add1")(x, np.float32(1), global_size=(2,), local_size=(64,))
dev.synchronize()
{end}
"""


@pytest.mark.parametrize("end,status", [("raise SystemExit(3)", 3), ("raise RuntimeError('the program fails')", 1)])
def test_hwemu_trace_process(tmp_path, end, status):
    """`hwemu trace --out FILE -- python script.py`: the program's status, and a whole trace of its dispatch although
    it left through SystemExit or an exception."""
    (tmp_path / "k.hsaco").write_bytes(code())
    (tmp_path / "s.py").write_text(SCRIPT.format(end=end))
    out = tmp_path / "p.pftrace"
    env = dict(os.environ)
    env.pop("HWEMU_TIMELINE", None)
    r = subprocess.run([sys.executable, "-m", "emu.cli", "trace", "--out", str(out), "--", sys.executable,
                        str(tmp_path / "s.py"), str(tmp_path / "k.hsaco")], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == status, r.stderr
    assert f"hwemu trace: timeline {out}" in r.stderr
    slices, _ = read(out)
    assert [s["name"] for s in on(slices, "dispatches")] == ["add1"]
    assert len([s for s in slices if s["track"][-1].startswith("SIMD")]) == 2 * 64 // 32


def test_complete_cuts_a_partial_message(tmp_path):
    """A trace cut in the middle of its last message (a killed process) is cut back to its whole messages."""
    gpu = GPU("gfx1100")
    prog = gpu.load(code())
    x = gpu.alloc(4096)
    path = tmp_path / "c.pftrace"
    timeline.start(path)
    try:
        gpu.launch(prog, "mul2", grid=(2,), block=(32,), args=[x])
    finally:
        timeline.stop()
    whole = timeline.complete(path)
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.truncate(size - 3)
    assert timeline.complete(path) == whole - 1
    assert len(Trace.FromString(path.read_bytes()).packet) == whole - 1


def test_unwritable_file_leaves_the_program_running(tmp_path, capsys):
    """A timeline that cannot be written says so once on stderr; the kernel still runs and gives its result."""
    gpu = GPU("gfx1100")
    prog = gpu.load(code())
    x = gpu.alloc(4 * 64)
    gpu.write(x, np.ones(64, np.float32))
    timeline.start(tmp_path / "missing" / "t.pftrace")
    try:
        gpu.launch(prog, "mul2", grid=(2,), block=(32,), args=[x])
        gpu.launch(prog, "mul2", grid=(2,), block=(32,), args=[x])
    finally:
        timeline.stop()
    np.testing.assert_array_equal(np.frombuffer(gpu.read(x), np.float32), np.full(64, 4, np.float32))
    err = capsys.readouterr().err
    assert err.count("no more events are written") == 1 and "missing/t.pftrace" in err


def test_closing_ends_the_slices_still_open(tmp_path):
    """A timeline closed while a packet runs (the program exits as the engine thread finishes a packet) ends that
    packet's slice at the close: the trace stays balanced, and what the packet writes afterwards is dropped."""
    gpu = SimpleNamespace(vm=VM(), name="a GPU", chip=topology.chip("gfx1100"), family="rdna3")
    queue = type("ComputeQueue", (), {"id": 0, "gpu": gpu})()  # what the timeline reads of a queue
    timeline.start(tmp_path / "o.pftrace")
    with timeline.packet(queue, "DISPATCH_DIRECT", 4) as p:
        p.begin()  # as a dispatch nesting in it does
        timeline.stop()
    slices, _ = read(tmp_path / "o.pftrace")
    assert [(s["track"], s["name"]) for s in slices] == [(("a GPU", "PM4 queue 0"), "DISPATCH_DIRECT")]


LOOP = """
__kernel void loop(__global float *a, int n) {
    int i = get_global_id(0);
    float s = a[i];
    for (int k = 0; k < n; k++) s = s * 0.5f + (float)k;
    a[i] = s;
}
"""


def test_thread_trace_draws_what_the_selected_waves_issued(tmp_path, monkeypatch):
    """HWEMU_THREAD_TRACE=wg=2,wave=1: one wave is drawn, each instruction it issued a slice in its wave's slice
    on its slot's track, in the order HWEMU_TRACE shows that wave running them (s_delay_alu gives no token, as on
    the hardware; s_endpgm ends the wave), each as long as its cycles, one after another; the results are those
    of an untraced run. HWEMU_TRACE at the same time prints its waves as it does alone."""
    gpu = GPU("gfx1100")
    prog = gpu.load(opencl.compile_cl(LOOP, "gfx1100"))
    x = gpu.alloc(4 * 256)
    start = np.arange(256, dtype=np.float32)
    gpu.write(x, start)
    gpu.launch(prog, "loop", grid=(4,), block=(64,), args=[x, np.int32(5)])
    want = np.frombuffer(gpu.read(x), np.float32).copy()
    gpu.write(x, start)
    lines = tmp_path / "trace.txt"
    monkeypatch.setenv("HWEMU_TRACE", "wg=2,wave=1")
    monkeypatch.setenv("HWEMU_TRACE_FILE", str(lines))
    gpu.launch(prog, "loop", grid=(4,), block=(64,), args=[x, np.int32(5)])
    monkeypatch.delenv("HWEMU_TRACE")
    ran = [ln.split(": ", 1)[1].split()[0] for ln in lines.read_text().splitlines()]
    gpu.write(x, start)
    monkeypatch.setenv(timeline.THREAD_TRACE, "wg=2,wave=1")
    both = tmp_path / "both.txt"  # HWEMU_TRACE beside the thread trace: its waves print as without one
    monkeypatch.setenv("HWEMU_TRACE", "wg=2")
    monkeypatch.setenv("HWEMU_TRACE_FILE", str(both))
    timeline.start(tmp_path / "t.pftrace")
    try:
        gpu.launch(prog, "loop", grid=(4,), block=(64,), args=[x, np.int32(5)])
    finally:
        timeline.stop()
    np.testing.assert_array_equal(np.frombuffer(gpu.read(x), np.float32), want)
    printed = [ln.split(" ", 3)[2:] for ln in both.read_text().splitlines()]  # [wave, "pc: instruction ..."]
    assert [t.split(": ", 1)[1].split()[0] for w, t in printed if w == "w1"] == ran
    assert {w for w, _ in printed} == {"w0", "w1"}  # wave 0 only HWEMU_TRACE selects
    slices, _ = read(tmp_path / "t.pftrace")
    traced = [s for s in slices if s["track"][-2:] == ("thread trace (1 cycle = 1 ns)", "wave slot 1")]
    waves = [s for s in traced if s["name"].startswith("wave ")]
    assert [w["name"] for w in waves] == ["wave 1 wg (2, 0, 0)"]
    insts = sorted((s for s in traced if s is not waves[0]), key=lambda s: s["ts"])
    assert [s["name"] for s in insts] == [r for r in ran if r not in ("s_delay_alu", "s_endpgm")]
    assert ran[-1] == "s_endpgm" and len(ran) > 30  # the loop ran 5 times
    w = waves[0]
    for a, b in zip(insts, insts[1:], strict=False):
        assert a["ts"] + a["dur"] == b["ts"] and a["dur"] == a["args"]["cycles"] > 0
    assert w["ts"] <= insts[0]["ts"] and insts[-1]["ts"] + insts[-1]["dur"] <= w["ts"] + w["dur"]
    assert {s["args"]["cycles"] for s in insts} >= {1, 4}  # SALU/VALU and memory issue
    dispatch = on(slices, "runner")[0]["args"]
    assert dispatch["thread_trace"] == f"{len(insts)} instructions drawn"


def test_thread_trace_filter_errors_name_the_term(tmp_path):
    for bad, what in (("pc=0-4", "unknown key 'pc'"), ("wave=x", "'x' is not a number")):
        r = subprocess.run([sys.executable, "-m", "emu.cli", "trace", "--out", str(tmp_path / "x.pftrace"),
                            "--thread-trace", bad, "--", sys.executable, "-c", "pass"], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 2 and "--thread-trace" in r.stderr and what in r.stderr, r.stderr
