"""Performance counters (emu.amd.perfmon) read the way a driver reads them: selects programmed and counters read back
with COPY_DATA from perf through a PM4 queue (stack.Device on MOCKKFD), and by tinygrad's own profiler (PROFILE=1
PMC=1). A straight-line clang-19 kernel's SQ counters, summed over the WGPs, are its waves times each category's
instructions in llvm-objdump-19's listing and equal HWEMU_STATS for the same dispatch; per WGP they follow the
documented round robin. Hostile register programming never raises and never stops the engine.
"""
from __future__ import annotations

import functools
import json
import re
import shutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_stats import SOURCE, _launch, listing, mnemonic_category
from test_tinygrad import check, run_tinygrad

from emu.amd import target
from emu.amd.exec.state import CATEGORIES
from emu.amd.grbm import GfxIndex
from emu.amd.hw import pm4
from emu.amd.perfmon import PMC, PerfMonitor
from stack import Device
from stack.codegen import opencl
from stack.hcq import pm4 as enc

needs_clang = pytest.mark.skipif(not (opencl.available() and shutil.which("llvm-objdump-19")),
                                 reason="clang-19, ld.lld-19 and llvm-objdump-19 are needed")
BROADCAST = 0xE000_0000  # GRBM_GFX_INDEX: every engine, array and instance
SRC_PERF, DST_TC_L2, COPY_DATA = 4, 2, 0x40
SQ = ["SQ_WAVES", "SQ_INSTS_VALU", "SQ_INSTS_SALU", "SQ_INSTS_SMEM", "SQ_INSTS_LDS", "SQ_BUSY_CYCLES",
      "SQ_WAVE32_INSTS", "SQC_LDS_BANK_CONFLICT"]
GRBM = ["GRBM_GUI_ACTIVE", "GRBM_COUNT"]
COST = {"VALU": 1, "VMEM": 4, "SMEM": 4, "LDS": 4}  # the model's cycles per wave32 instruction (others 1)


def _regs(gfx: int) -> dict[str, int]:
    return {n: a for n, (a, _) in pm4.REGS[gfx].items()}


def _set(reg: int, *values: int) -> list[int]:
    """SET_SH_REG, or SET_UCONFIG_REG with gfx10+'s reach (the counter registers lie past gfx9's end)."""
    if enc.PACKET3_SET_SH_REG_START <= reg < enc.PACKET3_SET_SH_REG_END:
        return enc.set_regs(reg, *values)
    return enc.packet3(enc.PACKET3_SET_UCONFIG_REG, [reg - enc.PACKET3_SET_UCONFIG_REG_START, *values])


def _copy(reg: int, dst: int) -> list[int]:
    """COPY_DATA of register `reg` from the perf space to memory at `dst` (32 bits)."""
    return enc.packet3(COPY_DATA, [SRC_PERF | DST_TC_L2 << 8, reg, 0, dst & 0xFFFFFFFF, dst >> 32])


def _wgps(chip: target.Target) -> list[tuple[int, int, int]]:
    """The WGPs in the order the documented round robin gives them workgroups: engines first, then arrays."""
    per_array = chip.cus // chip.arrays // 2
    return [(i % chip.shader_engines, i // chip.shader_engines % chip.arrays_per_engine,
             i // chip.arrays) for i in range(chip.arrays * per_array)]


@needs_clang
@pytest.mark.parametrize("arch", ["gfx1100", "gfx1201"])
def test_counters_read_by_copy_data_are_the_listing_and_hwemu_stats(arch, monkeypatch, tmp_path):
    chip, gfx = target.get(arch), target.get(arch).gen.gfx
    r, sel = _regs(gfx), {n: PMC[n][f"gfx{gfx}"][1] for n in SQ + GRBM}
    cntl = r["CP_PERFMON_CNTL_1" if gfx == 12 else "CP_PERFMON_CNTL"]
    co = opencl.compile_cl(SOURCE, arch)
    per_wave = {c: sum(mnemonic_category(m) == c for m in listing(co, "mix", tmp_path)) for c in CATEGORIES}
    groups, block, lanes = 100, 128, 32
    waves_per_group = block // lanes
    wgps = _wgps(chip)

    dev = Device(f"MOCKKFD+AMD:{arch}")
    x = np.arange(groups * block, dtype=np.int32)
    src, dst = dev.alloc(x.nbytes), dev.alloc(x.nbytes)
    dev.copyin(src, x.tobytes())
    out = dev.alloc(8 * (len(wgps) * len(SQ) + 2 * len(GRBM)))
    dev._submit_compute([_set(r["GRBM_GFX_INDEX"], BROADCAST), _set(cntl, 0), _set(r["SQ_PERFCOUNTER_CTRL"], 1 << 6),
                         _set(r["SQ_PERFCOUNTER_CTRL2"], 1),  # force_en: the launch clears COMPUTE_PERFCOUNT_ENABLE
                         *(_set(r[f"SQ_PERFCOUNTER{2 * k}_SELECT"], sel[n]) for k, n in enumerate(SQ)),
                         *(_set(r[f"GRBM_PERFCOUNTER{k}_SELECT"], sel[n]) for k, n in enumerate(GRBM)),
                         _set(cntl, 1)])
    dev.program(co, "mix")(src, dst, global_size=(groups, 1, 1), local_size=(block, 1, 1))
    reads, at = [_set(cntl, 1 | 1 << 10)], out.va
    for se, sa, w in wgps:
        reads.append(_set(r["GRBM_GFX_INDEX"], se << 16 | sa << 8 | w << 2))
        for k in range(len(SQ)):
            reads.append(_copy(r[f"SQ_PERFCOUNTER{k}_LO"], at))
            at += 4
        if len(reads) > 200:
            dev._submit_compute(reads)
            reads = []
    reads.append(_set(r["GRBM_GFX_INDEX"], BROADCAST))
    for k in range(len(GRBM)):
        reads += [_copy(r[f"GRBM_PERFCOUNTER{k}_LO"], at), _copy(r[f"GRBM_PERFCOUNTER{k}_HI"], at + 4)]
        at += 8
    dev._submit_compute(reads)
    dev.synchronize()
    raw = np.frombuffer(dev.copyout(out, at - out.va), np.uint32)
    sq = raw[:len(wgps) * len(SQ)].reshape(len(wgps), len(SQ)).astype(np.int64)
    grbm = raw[len(wgps) * len(SQ):].view(np.uint64)

    # per WGP: the workgroups the round robin gave it, times the listing
    busy = []
    for i, row in enumerate(sq):
        waves = waves_per_group * len(range(i, groups, len(wgps)))
        want = {"SQ_WAVES": waves, "SQ_INSTS_VALU": waves * per_wave["VALU"], "SQ_INSTS_SALU": waves * per_wave["SALU"],
                "SQ_INSTS_SMEM": waves * per_wave["SMEM"], "SQ_INSTS_LDS": waves * per_wave["LDS"],
                "SQ_BUSY_CYCLES": waves * (1 + sum(COST.get(c, 1) * n for c, n in per_wave.items())),
                "SQ_WAVE32_INSTS": waves * sum(per_wave.values()), "SQC_LDS_BANK_CONFLICT": 0}
        assert dict(zip(SQ, row.tolist(), strict=True)) == want, wgps[i]
        busy.append(want["SQ_BUSY_CYCLES"])
    assert grbm.tolist() == [max(busy), max(busy) + 64]

    # the totals are HWEMU_STATS's for the same dispatch
    _, stats = _launch(monkeypatch, "auto", arch, "mix", (groups,), (block,), [x, np.zeros_like(x)])
    by = dict(zip(CATEGORIES, stats.categories, strict=True))
    total = dict(zip(SQ, sq.sum(axis=0).tolist(), strict=True))
    assert total["SQ_WAVES"] == stats.waves == groups * waves_per_group
    assert [total[f"SQ_INSTS_{c}"] for c in ("VALU", "SALU", "SMEM", "LDS")] == [by[c] for c in ("VALU", "SALU",
                                                                                                 "SMEM", "LDS")]
    assert total["SQ_WAVE32_INSTS"] == stats.wave_instructions


TINYGRAD = """
import json
from tinygrad import Tensor, Device
from tinygrad.device import Compiled
dev = Device[Device.DEFAULT]
(Tensor.empty(1000).float() * 2 + 1).contiguous().realize()
dev.synchronize()
out = []
for e in Compiled.profile_events:
    if type(e).__name__ == "ProfilePMCEvent":
        view = memoryview(e.blob).cast("Q")
        out.append({s.name: sum(view[s.off // 8:(s.off + s.size) // 8]) for s in e.sched})
print("PMC " + json.dumps(out))
"""
COUNTERS = ["SQ_WAVES", "SQ_INSTS_VALU", "SQ_INSTS_SALU", "SQ_INSTS_SMEM", "SQ_INSTS_LDS", "SQ_BUSY_CYCLES",
            "SQC_LDS_BANK_CONFLICT", "SQC_LDS_IDX_ACTIVE", "GRBM_GUI_ACTIVE", "GL2C_HIT", "GL2C_MISS"]


def _stats_table(stderr: str) -> list[dict[str, int]]:
    """The rows of HWEMU_STATS's per-kernel table, by column."""
    lines = stderr.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("kernel "))
    head = lines[at].split()
    rows = []
    for line in lines[at + 1:]:
        cells = line.split()
        if not cells or not cells[0].startswith("kernel@"):
            break
        rows.append({h: int(c) for h, c in zip(head[1:10], cells[1:10], strict=True)})
    return rows


@pytest.mark.parametrize("arch", ["gfx1100", "gfx1201"])
def test_tinygrad_pmc_reads_what_hwemu_stats_counts(arch):
    """tinygrad's PROFILE=1 PMC=1 on hwemu: the counters it reads back (every WGP, every instance) sum to HWEMU_STATS's
    numbers for its kernel; its kernel has no DS instruction (no LDS cycles) and reads 4000 bytes and writes 4000
    (32 lines of 128 bytes each, page-aligned buffers): the L2 (empty at the start) misses each of those lines once,
    and the kernel arguments' lines (at most one per s_load of a wave)."""
    p = run_tinygrad(TINYGRAD, f"MOCKKFD+AMD:LLVM:{arch}", {"PROFILE": "1", "PMC": "1", "HWEMU_STATS": "1",
                                                            "PMC_COUNTERS": ",".join(COUNTERS), "VIZ": "0"})
    events = json.loads(re.search(r"^PMC (.*)$", check(p), re.M).group(1))
    rows = _stats_table(p.stderr)
    assert events and rows
    got = {n: sum(e[n] for e in events) for n in COUNTERS}
    want = {k: sum(r[k] for r in rows) for k in ("waves", "VALU", "SALU", "SMEM", "LDS")}
    assert (got["SQ_WAVES"], got["SQ_INSTS_VALU"], got["SQ_INSTS_SALU"], got["SQ_INSTS_SMEM"],
            got["SQ_INSTS_LDS"]) == (want["waves"], want["VALU"], want["SALU"], want["SMEM"], want["LDS"])
    assert got["SQ_WAVES"] > 0 and got["SQ_BUSY_CYCLES"] >= got["SQ_INSTS_VALU"] + got["SQ_WAVES"]
    assert 0 < got["GRBM_GUI_ACTIVE"] <= got["SQ_BUSY_CYCLES"]
    assert got["SQ_INSTS_LDS"] == got["SQC_LDS_BANK_CONFLICT"] == got["SQC_LDS_IDX_ACTIVE"] == 0
    assert 64 < got["GL2C_MISS"] <= 64 + got["SQ_INSTS_SMEM"] // got["SQ_WAVES"] and got["GL2C_HIT"] > 0


def _unit(arch: str) -> tuple[PerfMonitor, dict[str, int]]:
    chip = target.get(arch)
    return PerfMonitor(chip, GfxIndex(chip)), _regs(chip.gen.gfx)


def test_sq_counts_what_cs_en_and_the_dispatch_enable_allow():
    """The SQ counts a dispatch when SQ_PERFCOUNTER_CTRL.cs_en is set and its queue's COMPUTE_PERFCOUNT_ENABLE or
    SQ_PERFCOUNTER_CTRL2.force_en is; nothing counts before CP_PERFMON_CNTL says count."""
    unit, r = _unit("gfx1100")
    assert unit.counting(True, 32) is None
    unit.write(r["CP_PERFMON_CNTL"], 1)
    assert not unit.counting(True, 32).sq
    unit.write(r["SQ_PERFCOUNTER_CTRL"], 1 << 6)
    assert unit.counting(True, 32).sq and not unit.counting(False, 32).sq
    unit.write(r["SQ_PERFCOUNTER_CTRL2"], 1)
    assert unit.counting(False, 32).sq
    unit.write(r["CP_PERFMON_CNTL"], 2)
    assert unit.counting(True, 32) is None


PERF_NAMES = sorted(n for n in _regs(11) if n.startswith(("SQ_PERFCOUNTER", "GRBM_PERFCOUNTER", "GL2C_PERFCOUNTER",
                                                          "CP_PERFMON")) or n == "GRBM_GFX_INDEX")


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["gfx1100", "gfx1201"]),
       st.lists(st.tuples(st.sampled_from(PERF_NAMES + ["dispatch"]), st.integers(0, (1 << 32) - 1)), max_size=40))
def test_hostile_programming_never_raises(arch, writes):
    """Random values in every counter register (selects of any index, GRBM_GFX_INDEX past the chip, any perfmon
    state), dispatches counted in between: nothing raises and every read is a 32-bit value."""
    from emu.amd.dispatch import Stats
    unit, regs = _unit(arch)
    for name, value in writes:
        if name == "dispatch":
            counting = unit.counting(bool(value & 1), 32 << (value >> 1 & 1))
            if counting is not None:
                s = Stats(waves=value % 7, categories=[(value >> i) % 5 for i in range(len(CATEGORIES))])
                counting.workgroup(s)
                counting.close()
            continue
        if name not in regs:
            continue
        unit.write(regs[name], value)
        for n in PERF_NAMES:
            if n in regs:
                assert 0 <= unit.read(regs[n]) < 1 << 32


@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(PERF_NAMES), st.integers(0, (1 << 32) - 1)), min_size=1, max_size=12))
def test_hostile_packets_leave_the_engine_running(writes):
    """The same through a PM4 queue: random counter registers and GRBM_GFX_INDEX, COPY_DATA from perf of each: the
    queue goes on (the write after them lands, and the next submission runs)."""
    dev = _hostile_device()
    regs = _regs(11)
    out = dev.alloc(4 * len(writes) + 4)
    packets = []
    for i, (name, value) in enumerate(writes):
        packets += [_set(regs[name], value), _copy(regs[name], out.va + 4 * i)]
    packets.append(enc.write_data(out.va + 4 * len(writes), 0x600D))
    dev._submit_compute(packets)
    dev.synchronize()
    assert np.frombuffer(dev.copyout(out), np.uint32)[-1] == 0x600D
    dev._submit_compute([_set(regs["GRBM_GFX_INDEX"], BROADCAST)])
    dev.synchronize()
    dev.free(out)


@functools.cache
def _hostile_device() -> Device:
    return Device("MOCKKFD+AMD:gfx1100")
