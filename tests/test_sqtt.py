"""The SQ thread trace (emu.amd.sqtt): its packets read back by a public decoder (tinygrad's renderer/amd/sqtt.py
from the pinned wheel, used as the reference), the instruction sequence a traced tinygrad kernel shows against the one
hwemu ran (HWEMU_TRACE), the same trace on every run, hostile register programming, and the sysfs and render-node
interfaces tinygrad's profilers read."""
from __future__ import annotations

import ctypes
import errno
import json
import os
import re
import struct

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_stats import mnemonic_category
from test_tinygrad import check, profiled, run_tinygrad

from emu.amd import drm, spi, sqtt, target
from emu.amd.hw import pm4
from emu.amd.memory import VM

OPS = {3: [0x0, 0x1, 0x3, 0x4, 0x5, 0x9, 0xB, 0xD, 0xE, 0xF, 0x12, 0x13, *range(0x1C, 0x21), 0x21, 0x22,
           *range(0x24, 0x2F), 0x72, 0x73],
       4: [0x0, 0x1, 0x2, 0x3, 0x4, 0x5, 0x9, 0xB, 0xD, 0xE, 0xF, 0x12, 0x13, *range(0x1C, 0x37), 0x6E, 0x72, 0x73,
           0x7A]}


DECODER_NAMES = {"reg": "subop", "value": "val32"}  # tinygrad's names of the REG token's fields


@st.composite
def _packets(draw, layout: int):
    out, t = [], 0
    for _ in range(draw(st.integers(1, 40))):
        kind = draw(st.sampled_from(["WAVESTART", "WAVEEND", "INST", "VALUINST", "IMMEDIATE", "ALUEXEC", "VMEMEXEC",
                                     "EVENT", "REG"]))
        t += draw(st.one_of(st.integers(0, 8), st.integers(0, 1 << 30)))
        fields = {"wave": draw(st.integers(0, 31))}
        if kind in ("ALUEXEC", "VMEMEXEC"):
            fields = {"src": draw(st.integers(0, 3))}
        elif kind == "EVENT":
            fields = {"event": draw(st.integers(0, (1 << 13) - 1))}
        elif kind == "REG":
            fields = {"reg": draw(st.integers(0, 0xFFFF)), "value": draw(st.integers(0, (1 << 32) - 1))}
        elif kind == "INST":
            fields["op"] = draw(st.sampled_from(OPS[layout]))
        elif kind in ("WAVESTART", "WAVEEND"):
            fields.update(sa=draw(st.integers(0, 1)), simd=draw(st.integers(0, 3)),
                          wgp=draw(st.integers(0, 7 if layout == 3 else 15)))
        out.append((kind, t, fields))
    return out


@pytest.mark.parametrize("layout", [3, 4])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_packets_read_back_with_a_public_decoder(layout, data):
    """Every packet, with its fields and its cycle, as tinygrad's decoder reads the stream (gaps too wide for a
    packet's delta field go in TS_DELTA_OR_MARK packets before it)."""
    from tinygrad.renderer.amd.sqtt import decode
    packets = data.draw(_packets(layout))
    s = sqtt.Stream(layout)
    s.put("LAYOUT_HEADER", 0, layout=layout, simd=0)
    for kind, t, fields in packets:
        s.put(kind, t, **fields)
    s.pad()
    got = [p for p in decode(bytes(s.data)) if type(p).__name__ not in ("NOP", "TS_DELTA_OR_MARK",
                                                                        "TS_DELTA_OR_MARK_RDNA4")]
    assert type(got[0]).__name__ == "LAYOUT_HEADER" and got[0].layout == layout
    assert len(got) == len(packets) + 1
    for p, (kind, t, fields) in zip(got[1:], packets, strict=True):
        assert type(p).__name__.removesuffix("_RDNA4") == kind
        assert p._time == t
        for name, value in fields.items():
            v = getattr(p, DECODER_NAMES.get(name, name))
            assert getattr(v, "value", v) == value, (kind, name)


PROGRAM = """
import ctypes, json, os, sys
from tinygrad import Tensor, Device
from tinygrad.runtime.autogen import sqtt as rgp
from tinygrad.device import Compiled, ProfileProgramEvent
from tinygrad.engine.realize import run_linear
from tinygrad.renderer.amd.sqtt import decode, map_insts
t = (Tensor.empty(1000).float() * 2 + 1).sum()
linear = t.schedule_linear()
dev = Device[Device.DEFAULT]
dev.synchronize()
start = len(Compiled.profile_events)
run_linear(linear)
dev.synchronize()
dev._at_profile_finalize()
events = Compiled.profile_events
progs = {e.tag: e for e in events if isinstance(e, ProfileProgramEvent) and e.tag is not None}
arch = "gfx" + str(dev.target[0]) + "".join("%x" % x for x in dev.target[1:])
out = []
for e in events[start:]:
    if type(e).__name__ == "ProfileSQTTEvent" and e.se == 0:
        packets = list(decode(e.blob))
        insts = [(i.wave, str(i.inst)) for p, i in map_insts(e.blob, progs[e.kern].lib, arch) if i is not None]
        regs = [p.val32 for p in packets if type(p).__name__ == "REG"]
        marker = sum(ctypes.sizeof(m) for m in (rgp.struct_rgp_sqtt_marker_pipeline_bind,
                                                rgp.struct_rgp_sqtt_marker_event)) // 4
        out.append({"blob": e.blob.hex(), "times": [p._time for p in packets], "insts": insts, "regs": regs,
                    "types": sorted({type(p).__name__.removesuffix("_RDNA4") for p in packets}),
                    "events": [p.event for p in packets if type(p).__name__ == "EVENT"],
                    "exec": [(type(p).__name__, p.src.name) for p in packets if type(p).__name__.endswith("EXEC")],
                    "marker_dwords": marker, "bind_id": rgp.RGP_SQTT_MARKER_IDENTIFIER_BIND_PIPELINE,
                    "event_id": rgp.RGP_SQTT_MARKER_IDENTIFIER_EVENT})
print("SQTT " + json.dumps(out))
"""


NO_TOKEN = ("s_delay_alu", "s_wait_alu", "s_barrier_wait")
KNOWN = {"LAYOUT_HEADER", "NOP", "TS_DELTA_OR_MARK", "WAVESTART", "WAVEEND", "INST", "VALUINST", "IMMEDIATE", "ALUEXEC",
         "VMEMEXEC", "REG", "EVENT"}  # the packets hwemu writes


def _mnemonic(text: str) -> str:
    """An instruction's name as both listings spell it (tinygrad prints a dual-issue VOPD pair as VOPD(...))."""
    name = re.split(r"[ (]", text.strip(), maxsplit=1)[0].removesuffix("_e32").removesuffix("_e64").lower()
    return "vopd" if name.startswith("v_dual_") else name


@pytest.mark.parametrize("arch", ["gfx1100", "gfx1201"])
def test_a_traced_kernel_shows_the_instructions_hwemu_ran(arch, tmp_path):
    """A tinygrad kernel traced as its profiler traces it (VIZ=-2): per dispatch, the instructions tinygrad's
    decoder maps shader engine 0's trace to are those HWEMU_TRACE shows hwemu running, wave by wave and in order
    (less the ones that give no token), for the waves hwemu's placement puts on the SIMD that engine traces (tinygrad
    selects SIMD 0 of WGP 0 in array 0); cycles never go back; a second run writes the same bytes."""
    dev = f"MOCKKFD+AMD:LLVM:{arch}"
    runs = [json.loads(check(run_tinygrad(PROGRAM, dev, {"VIZ": "-2"})).split("SQTT ", 1)[1].splitlines()[0])
            for _ in range(2)]
    assert [d["blob"] for d in runs[0]] == [d["blob"] for d in runs[1]], "the trace differs between two runs"
    traced = runs[0]
    assert traced and all(d["insts"] for d in traced)
    events = pm4.EVENTS[target.get(arch).gen.gfx]
    for d in traced:
        assert d["times"] == sorted(d["times"])
        assert KNOWN >= set(d["types"]) >= {"REG", "EVENT", "ALUEXEC"}, d["types"]  # no packet the decoder misreads
        # sqtt_setup_exec's markers, dword by dword: pipeline bind (identifier in bits 3:0), event, global size
        regs = d["regs"]
        assert len(regs) == d["marker_dwords"] + 3 and regs[0] & 0xF == d["bind_id"]
        assert regs[d["marker_dwords"] - 3] & 0xF == d["event_id"]
        assert events["THREAD_TRACE_MARKER"] in d["events"] and d["events"][-1] == events["THREAD_TRACE_FINISH"]
        # one execution token per ALU, vector memory and DS instruction, of its kind
        kinds = [mnemonic_category(_mnemonic(i)) if not _mnemonic(i) == "vopd" else "VALU" for _, i in d["insts"]]
        want = sorted([("ALUEXEC", k) for k in kinds if k in ("SALU", "VALU")] +
                      [("VMEMEXEC", "LDS" if k == "LDS" else "VMEM") for k in kinds if k in ("VMEM", "LDS")])
        assert sorted(map(tuple, d["exec"])) == want
    log = tmp_path / "trace.txt"
    check(run_tinygrad(PROGRAM, dev, {"VIZ": "0", "HWEMU_TRACE": "1", "HWEMU_TRACE_FILE": str(log)}))
    chip = target.get(arch)
    wgps, simds = spi.wgps(chip), spi.simds(chip)
    ran: dict[int, list] = {}
    for line in log.read_text().splitlines():  # "d3 wg(0,0,0) w1 0x...: mnemonic operands | changes"
        m = re.match(r"d(\d+) wg\((\d+),0,0\) w(\d+) 0x[0-9a-f]+: (\S+)", line)
        assert m, line  # the kernels' grids are one-dimensional
        dispatch, wg, wave, name = int(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(4)
        ran.setdefault(dispatch, [])
        if wgps[wg % len(wgps)] == (0, 0, 0) and wave % simds == 0 and name not in NO_TOKEN:
            ran[dispatch].append((wave % 32, _mnemonic(name)))
    assert [[(w, _mnemonic(i)) for w, i in d["insts"]] for d in traced] == list(ran.values())[-len(traced):]


MATMUL = """
import json
from tinygrad import Tensor, Device
from tinygrad.device import Compiled
from tinygrad.engine.realize import run_linear
linear = (Tensor.empty(64, 64) @ Tensor.empty(64, 64)).sum(axis=1).schedule_linear()
dev = Device[Device.DEFAULT]
run_linear(linear)
dev.synchronize()
dev._at_profile_finalize()
print("SQTT " + json.dumps([e.blob.hex() for e in Compiled.profile_events if type(e).__name__ == "ProfileSQTTEvent"]))
"""


def test_traced_waves_run_natively_and_trace_as_the_interpreter_does():
    """The waves a thread trace selects run the threaded tier's native code, which logs the PCs it runs
    (Recording.build): the trace is the interpreter's byte for byte, and as many wave-instructions run natively as
    with the trace off (HWEMU_STATS; HWEMU_TIER=threaded compiles each handler when first asked, so the count does
    not depend on timing)."""
    interpreted, _ = profiled(MATMUL, "SQTT", {"SQTT": "1", "HWEMU_TIER": "interp"})
    native, traced_stats = profiled(MATMUL, "SQTT", {"SQTT": "1", "HWEMU_TIER": "threaded"})
    _, untraced_stats = profiled(MATMUL, "SQTT", {"SQTT": "0", "HWEMU_TIER": "threaded"})
    assert interpreted and any(interpreted) and native == interpreted
    assert traced_stats.split()[1:] == untraced_stats.split()[1:], (traced_stats, untraced_stats)
    assert traced_stats.endswith("native") and not traced_stats.endswith(" 0% native")


def _unit(arch: str = "gfx1100") -> tuple[sqtt.ThreadTrace, VM, dict[str, int]]:
    chip = target.get(arch)
    vm = VM()
    regs = {n: a for n, (a, _) in pm4.REGS[chip.gen.gfx].items()}
    return sqtt.ThreadTrace(chip, vm), vm, regs


REGISTER_NAMES = ["GRBM_GFX_INDEX", "SQ_THREAD_TRACE_BUF0_BASE", "SQ_THREAD_TRACE_BUF0_SIZE", "SQ_THREAD_TRACE_MASK",
                  "SQ_THREAD_TRACE_TOKEN_MASK", "SQ_THREAD_TRACE_CTRL", "SQ_THREAD_TRACE_WPTR",
                  "SQ_THREAD_TRACE_STATUS", "SQ_THREAD_TRACE_USERDATA_2"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(REGISTER_NAMES + ["event"]), st.integers(0, (1 << 32) - 1)), max_size=30),
       st.booleans())
@example([("SQ_THREAD_TRACE_CTRL", 1), ("SQ_THREAD_TRACE_CTRL", 0), ("SQ_THREAD_TRACE_BUF0_SIZE", 0)], True)
def test_hostile_programming_never_raises(writes, mapped):
    """Random values in every thread-trace register, FINISH and STOP events in between, a buffer mapped or not:
    nothing raises; a flush either lands inside the buffer the registers name or sets STATUS.write_error."""
    unit, vm, regs = _unit()
    flush = unit._flush

    def checked(se: int) -> None:  # judged against the buffer as the registers name it when the flush writes
        before = unit.written[se]
        flush(se)
        assert unit.error[se] or unit.written[se] == before or unit.written[se] <= max(unit._size(se), 0)
    unit._flush = checked
    if mapped:
        base = vm.alloc(1 << 16, name="sqtt")
        unit.write(regs["SQ_THREAD_TRACE_BUF0_BASE"], base >> 12)
        unit.write(regs["SQ_THREAD_TRACE_BUF0_SIZE"], 16 << 8)
    for name, value in writes:
        if name == "event":
            unit.event(value & 0x3F)
        else:
            unit.write(regs[name], value)
            unit.read(regs[name])
    unit.event(pm4.EVENTS[11]["THREAD_TRACE_FINISH"])


def test_unmapped_buffer_is_a_vm_fault_and_a_write_error_not_a_crash():
    faults = []
    unit, vm, regs = _unit()
    unit.fault = faults.append
    unit.write(regs["SQ_THREAD_TRACE_BUF0_BASE"], 0x7FFF_0000)  # nothing mapped there
    unit.write(regs["SQ_THREAD_TRACE_BUF0_SIZE"], 1 << 8)
    unit.write(regs["SQ_THREAD_TRACE_CTRL"], 1)
    unit.event(pm4.EVENTS[11]["THREAD_TRACE_FINISH"])
    status = pm4.REGS[11]["SQ_THREAD_TRACE_STATUS"][1]
    assert status["write_error"].get(unit.read(regs["SQ_THREAD_TRACE_STATUS"])) == 1
    assert unit.read(regs["SQ_THREAD_TRACE_WPTR"]) == (0x7FFF_0000 << 12) // 32 & 0x1FFFFFFF  # nothing written
    # the writes went to every shader engine (GRBM_GFX_INDEX broadcasts): each one's flush faults
    assert [f.kind for f in faults] == ["unmapped"] * unit.chip.shader_engines
    assert all(f.addresses[0] == 0x7FFF_0000 << 12 for f in faults)


def test_a_full_buffer_keeps_what_fits():
    """A 4 KiB buffer and a trace longer than that: the write pointer stops at the buffer's end."""
    unit, vm, regs = _unit("gfx1201")
    base = vm.alloc(1 << 12, name="sqtt")
    unit.write(regs["SQ_THREAD_TRACE_BUF0_BASE_LO"], base >> 12)
    unit.write(regs["SQ_THREAD_TRACE_BUF0_SIZE"], 1)
    unit.write(regs["SQ_THREAD_TRACE_CTRL"], 1)
    for t in range(1, 3000):
        unit.streams[0].put("VALUINST", t, wave=0)
    unit.event(pm4.EVENTS[12]["THREAD_TRACE_FINISH"])
    assert unit.read(regs["SQ_THREAD_TRACE_WPTR"]) * 32 == 1 << 12  # relative on GC 12
    assert not unit.error[0]


def test_each_engine_traces_the_waves_placed_on_the_simd_it_selects():
    """Shader engines 0 and 1 trace, selecting SIMD 1 of WGP 0 in array 0 and SIMD 2 of WGP 1 in array 1: of a
    dispatch's waves, exactly those hwemu's placement (emu.amd.spi) puts there are recorded, each in its engine's
    stream; the others run untraced."""
    unit, vm, regs = _unit("gfx1100")
    mask = pm4.REGS[11]["SQ_THREAD_TRACE_MASK"][1]
    for se, (sa, wgp, simd) in ((0, (0, 0, 1)), (1, (1, 1, 2))):
        unit.write(regs["GRBM_GFX_INDEX"], pm4.REGS[11]["GRBM_GFX_INDEX"][1]["se_index"].put(se))
        unit.write(regs["SQ_THREAD_TRACE_MASK"], mask["wtype_include"].put(sqtt.CS_WAVES) | mask["sa_sel"].put(sa)
                   | mask["wgp_sel"].put(wgp) | mask["simd_sel"].put(simd))
        unit.write(regs["SQ_THREAD_TRACE_CTRL"], 1)
    grid, start = (50, 3, 1), (0, 2, 0)
    rec = unit.recording(None, 32, grid, start)
    wgps = spi.wgps(target.get("gfx1100"))
    want = set()
    for n in range(150):
        ids = (n % 50, 2 + n // 50, 0)
        for wave in range(8):
            if rec.wave(ids, wave) is not None:
                assert (wgps[n % len(wgps)], wave % 4) in (((0, 0, 0), 1), ((1, 1, 1), 2))
                want.add((wgps[n % len(wgps)][0], n, wave))
    # engines first, then arrays, then WGPs: (1, 1, 1) is WGP 1 * 12 + array 1 * 6 + engine 1 of 48
    assert {(se, n) for se, n, _ in want} == {(0, 0), (0, 48), (0, 96), (0, 144), (1, 19), (1, 67), (1, 115)}
    assert len(want) == 14  # waves 1 and 5 or 2 and 6 of each workgroup there
    sizes = [len(s.data) for s in unit.streams[:2]]
    rec.close()  # wave starts only: each in its engine's stream (engine 2 does not trace)
    assert all(len(s.data) > n for s, n in zip(unit.streams[:2], sizes, strict=True)) and unit.streams[2] is None


def test_render_node_device_info_has_every_wgp_active():
    chip = target.get("gfx1100")
    out = ctypes.create_string_buffer(drm.DEVICE_BYTES)
    arg = ctypes.create_string_buffer(struct.pack("<QII", ctypes.addressof(out), drm.DEVICE_BYTES,
                                                  drm._C["AMDGPU_INFO_DEV_INFO"]))
    assert drm.ioctl(chip, drm.REQUEST_INFO, arg) == 0
    info = out.raw
    off = drm.DEVICE["cu_bitmap"][0]
    bitmap = struct.unpack_from("<16I", info, off)
    for se in range(chip.shader_engines):  # tinygrad's test: two bits per WGP
        for sa in range(chip.arrays_per_engine):
            word = bitmap[4 * (se % 4) + sa + se // 4 * 2]
            assert all((word >> (2 * w)) & 3 == 3 for w in range(chip.cus // chip.arrays // 2))
    assert struct.unpack_from("<I", info, drm.DEVICE["num_shader_engines"][0])[0] == chip.shader_engines


def test_render_node_refuses_what_it_does_not_serve():
    chip = target.get("gfx1100")
    arg = ctypes.create_string_buffer(struct.pack("<QII", 0, 0, 0x7777))
    with pytest.raises(OSError) as e:
        drm.ioctl(chip, drm.REQUEST_INFO, arg)
    assert e.value.errno == errno.EINVAL and "query 0x7777" in str(e.value)
    with pytest.raises(OSError) as e:
        drm.ioctl(chip, drm.REQUEST_INFO + 1, arg)
    assert e.value.errno == errno.ENOTTY
    arg = ctypes.create_string_buffer(struct.pack("<QII", 8, 64, drm._C["AMDGPU_INFO_DEV_INFO"]))
    with pytest.raises(OSError) as e:
        drm.ioctl(chip, drm.REQUEST_INFO, arg)
    assert e.value.errno == errno.EFAULT


def test_performance_level_is_checked_and_tinygrad_sees_profile_standard(monkeypatch):
    from emu.os import tinygrad as adapter
    monkeypatch.setenv("DEV", "MOCKKFD+AMD::gfx1103")  # a chip no other test of this process opens
    cls = adapter.mock_interface()
    path = next(p for p in cls.system.files if p.endswith("power_dpm_force_performance_level"))
    assert cls.system.files[path] == "profile_standard\n"
    f = cls(path, os.O_RDWR)
    with pytest.raises(OSError) as e:
        f.write("turbo")
    assert e.value.errno == errno.EINVAL
    f.write("profile_peak\n")
    assert cls(path).read() == "profile_peak\n"
    cls.system.default_performance_level("profile_standard")  # a client's default leaves a written level alone
    assert cls(path).read() == "profile_peak\n"
