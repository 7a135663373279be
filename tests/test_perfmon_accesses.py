"""The counters that depend on addresses (emu.amd.accesses, emu.amd.gl2c): the LDS's cycles and bank conflicts and
the L2's hits and misses. The models' rules applied by hand to known addresses, and clang-19 kernels of known
access patterns counted through a PM4 queue (COPY_DATA from perf, every WGP and every L2 channel), their expected
counts derived from the rules, the addresses the kernels compute and llvm-objdump-19's listing."""
from __future__ import annotations

import shutil
import types

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_perfmon import BROADCAST, _copy, _regs, _set, _wgps
from test_stats import listing

from emu.amd import gl2c, target
from emu.amd.accesses import Accesses, bank_cycles, lines
from emu.amd.perfmon import PMC
from stack import Device
from stack.codegen import opencl

needs_clang = pytest.mark.skipif(not (opencl.available() and shutil.which("llvm-objdump-19")),
                                 reason="clang-19, ld.lld-19 and llvm-objdump-19 are needed")
ALL = np.ones(32, bool)


def _dwords(stride: int, lanes: int = 32) -> np.ndarray:
    return np.arange(lanes, dtype=np.uint64) * np.uint64(4 * stride)


def test_bank_cycles_follow_the_rule():
    """32 banks of a dword, 32 lanes served at a time: distinct dwords in one bank are serialised, one dword is
    shared."""
    assert bank_cycles([(_dwords(1), 4, ALL)], 32) == (1, 0)  # one dword per bank
    assert bank_cycles([(_dwords(32), 4, ALL)], 32) == (32, 31)  # every lane in bank 0, 32 dwords
    assert bank_cycles([(_dwords(2), 4, ALL)], 32) == (2, 1)  # even banks only, two dwords each
    assert bank_cycles([(np.full(32, 64, np.uint64), 4, ALL)], 32) == (1, 0)  # one dword for all: a broadcast
    assert bank_cycles([(_dwords(2), 8, ALL)], 32) == (2, 0)  # 64-bit, consecutive: 64 dwords, 2 per bank
    assert bank_cycles([(_dwords(32), 4, np.arange(32) < 4)], 32) == (4, 3)  # inactive lanes access nothing
    # wave64: lanes 32-63 are a second pass; the 2ADDR forms' two addresses are one instruction's accesses
    assert bank_cycles([(_dwords(32, 64), 4, np.ones(64, bool))], 64) == (64, 62)
    assert bank_cycles([(_dwords(1), 4, ALL), (_dwords(1) + np.uint64(128), 4, ALL)], 32) == (2, 0)


def test_lines_are_the_distinct_128_byte_lines_touched():
    a = np.array([0, 4, 124, 126, 256, 1 << 40], np.uint64)
    assert lines([(a, 4, None)]) == [0, 1, 2, 1 << 33]  # 126 + 3 reaches line 1
    assert lines([(a, 4, np.array([1, 1, 0, 0, 0, 0], bool))]) == [0]
    assert lines([(np.array([0x1000], np.uint64), 64, None), (np.array([0x1040], np.uint64), 64, None)]) == [32]


class _Requests:
    def __init__(self):
        self.lines: list[int] = []

    def requests(self, lines: np.ndarray) -> None:
        self.lines += lines.tolist()


# an access: LDS or not, bytes, active lanes, the lanes' addresses (base + a spread drawn from a seed), all inside
# the 48-bit VA space as every access native code logs is (it lies in a mapping)
_ACCESS = st.tuples(st.booleans(), st.sampled_from([1, 2, 4, 8, 12, 16, 64]), st.integers(0, (1 << 64) - 1),
                    st.one_of(st.integers(0, (1 << 48) - (1 << 20)), st.just(0)), st.sampled_from([4, 256, 1 << 16]),
                    st.integers(0, 1 << 30))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(_ACCESS, min_size=1, max_size=3), max_size=12), st.sampled_from([32, 64]))
def test_a_native_log_counts_as_each_instruction_accounted_in_turn(insts, lanes):
    """A call's log (Region._logged's records: the instruction's index, bytes | LDS << 16, active lanes,
    addresses) is accounted as the interpreted steps account each instruction: its distinct lines to the L2 in
    address order, instruction by instruction, and a DS instruction's bank cycles; wave32 and wave64."""
    rows, want_lines, want_banks = [], [], [0, 0]
    for k, accesses in enumerate(insts):
        lds = accesses[0][0]  # a DS instruction's accesses are all the LDS's, another's all the VM's
        entries = []
        for _, nbytes, mask, base, spread, seed in accesses:
            mask &= (1 << lanes) - 1
            addrs = base + np.random.default_rng(seed).integers(0, spread, lanes, dtype=np.uint64)
            entries.append((addrs, nbytes, np.array([mask >> i & 1 for i in range(lanes)], bool)))
            rows.append([k + 1, nbytes | lds << 16, mask, *addrs.tolist()])
        if lds:
            want_banks = [x + y for x, y in zip(want_banks, bank_cycles(entries, lanes), strict=True)]
        else:
            want_lines += lines(entries)
    acc = Accesses(types.SimpleNamespace(lanes=lanes), _Requests(), True)
    acc._logged(np.array(rows, np.uint64).view(np.int64).reshape(-1) if rows else np.zeros(0, np.int64))
    assert acc.l2.lines == want_lines
    assert list(acc.take()) == want_banks


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 1 << 32), st.sampled_from([1, 3, 24 * 128 * 17]), st.sampled_from([6144, 8192, 256]))
def test_native_requests_are_the_python_model(seed, spread, kb):
    """L2.requests (native code, a counted dispatch's) hits, misses and keeps the lines L2.request does one by one."""
    lines = np.random.default_rng(seed).integers(0, spread * 2, 3000, dtype=np.uint64) * np.uint64(1 + seed % 7)
    native, python = gl2c.L2(kb), gl2c.L2(kb)
    native.requests(lines)
    for n in lines.tolist():
        python.request(n)
    assert native.take() == python.take()
    assert (native.tags == python.tags).all() and (native.used == python.used).all()


def test_l2_is_lru_per_set():
    """A set of 16 ways: 17 lines of one set miss, the first one is then gone and the last one still there; each
    request is counted on its line's channel."""
    l2 = gl2c.L2(6144)
    assert (l2.channels, l2.sets) == (24, 128)
    same = [5 + l2.channels * l2.sets * k for k in range(gl2c.WAYS + 1)]  # channel 5, set 0
    assert [l2.request(n) for n in same] == [False] * 17
    assert l2.request(same[-1]) and not l2.request(same[0])  # same[0] was least recently used: evicted
    assert l2.request(6) is False and l2.request(6) is True  # another channel
    hits, misses = l2.take()
    assert (hits[5], misses[5], hits[6], misses[6], sum(hits), sum(misses)) == (1, 18, 1, 1, 2, 19)


LDS_SOURCE = """
__kernel void lds(__global int *out) {
  __local int t[32 * STRIDE];
  int l = get_local_id(0);
  t[l * STRIDE] = l;
  barrier(CLK_LOCAL_MEM_FENCE);
  out[get_global_id(0)] = t[((l + 1) % 32) * STRIDE];
}
"""
L2_SOURCE = """
__kernel void once(__global const int *a, __global int *out) {
  int i = get_global_id(0);
  out[i] = a[i];
}
__kernel void twice(__global const int *a, __global int *out) {
  int i = get_global_id(0);
  out[i] = a[i] + a[i ^ 1];
}
"""
SQ = ["SQ_WAVES", "SQC_LDS_IDX_ACTIVE", "SQC_LDS_BANK_CONFLICT"]
GL2C = ["GL2C_HIT", "GL2C_MISS"]


def _counted(arch: str, co: bytes, kernel: str, args: list, groups: int, block: int) -> dict[str, int]:
    """Run `kernel` counting SQ and GL2C counters, and read each back from every WGP and every L2 channel with
    COPY_DATA: the sums."""
    chip, gfx = target.get(arch), target.get(arch).gen.gfx
    r, sel = _regs(gfx), {n: PMC[n][f"gfx{gfx}"][1] for n in SQ + GL2C}
    cntl = r["CP_PERFMON_CNTL_1" if gfx == 12 else "CP_PERFMON_CNTL"]
    wgps, channels = _wgps(chip), chip.l2_kb // gl2c.L2_CHANNEL_KB
    dev = Device(f"MOCKKFD+AMD:{arch}")
    bufs = []
    for a in args:
        b = dev.alloc(a.nbytes)
        dev.copyin(b, a.tobytes())
        bufs.append(b)
    dev._submit_compute([_set(r["GRBM_GFX_INDEX"], BROADCAST), _set(cntl, 0), _set(r["SQ_PERFCOUNTER_CTRL"], 1 << 6),
                         _set(r["SQ_PERFCOUNTER_CTRL2"], 1),
                         *(_set(r[f"SQ_PERFCOUNTER{2 * k}_SELECT"], sel[n]) for k, n in enumerate(SQ)),
                         *(_set(r[f"GL2C_PERFCOUNTER{k}_SELECT"], sel[n]) for k, n in enumerate(GL2C)),
                         _set(cntl, 1)])
    dev.program(co, kernel)(*bufs, global_size=(groups, 1, 1), local_size=(block, 1, 1))
    out = dev.alloc(4 * (len(wgps) * len(SQ) + channels * len(GL2C)))
    reads, at = [_set(cntl, 1 | 1 << 10)], out.va
    for se, sa, w in wgps:
        reads.append(_set(r["GRBM_GFX_INDEX"], se << 16 | sa << 8 | w << 2))
        reads += [_copy(r[f"SQ_PERFCOUNTER{k}_LO"], at + 4 * k) for k in range(len(SQ))]
        at += 4 * len(SQ)
    for c in range(channels):
        reads.append(_set(r["GRBM_GFX_INDEX"], 0xA000_0000 | c))  # every engine and array, instance c
        reads += [_copy(r[f"GL2C_PERFCOUNTER{k}_LO"], at + 4 * k) for k in range(len(GL2C))]
        at += 4 * len(GL2C)
    for i in range(0, len(reads), 100):
        dev._submit_compute(reads[i:i + 100])
    dev._submit_compute([_set(r["GRBM_GFX_INDEX"], BROADCAST)])
    dev.synchronize()
    raw = np.frombuffer(dev.copyout(out, at - out.va), np.uint32).astype(np.int64)
    sq = raw[:len(wgps) * len(SQ)].reshape(-1, len(SQ)).sum(axis=0)
    l2 = raw[len(wgps) * len(SQ):].reshape(-1, len(GL2C)).sum(axis=0)
    return dict(zip(SQ + GL2C, [*sq.tolist(), *l2.tolist()], strict=True))


@needs_clang
@pytest.mark.parametrize("arch", ["gfx1100", "gfx1201"])
@pytest.mark.parametrize("stride", [1, 32])
@pytest.mark.parametrize("tier", ["interp", "threaded"])
def test_lds_bank_conflicts_of_a_stride(arch, stride, tier, tmp_path, monkeypatch):
    """Each lane stores and loads one dword, lane l at dword l * stride (then (l + 1) % 32): stride 1 puts the 32
    lanes in 32 banks (1 cycle per DS instruction), stride 32 all in bank 0 (32 cycles, 31 of them conflicts). The
    same counts whether the instructions between the memory ones run interpreted or native (the threaded tier,
    which compiles each handler when first asked: HWEMU_TIER=threaded)."""
    monkeypatch.setenv("HWEMU_TIER", tier)
    co = opencl.compile_cl(LDS_SOURCE.replace("STRIDE", str(stride)), arch)
    ds = [m for m in listing(co, "lds", tmp_path) if m.startswith("ds_")]
    assert sorted(ds) == ["ds_load_b32", "ds_store_b32"]
    groups = 5
    got = _counted(arch, co, "lds", [np.zeros(32 * groups, np.int32)], groups, 32)
    per = {1: (1, 0), 32: (32, 31)}[stride]
    assert got["SQ_WAVES"] == groups
    assert (got["SQC_LDS_IDX_ACTIVE"], got["SQC_LDS_BANK_CONFLICT"]) == (groups * len(ds) * per[0],
                                                                         groups * len(ds) * per[1])


@needs_clang
@pytest.mark.parametrize("arch", ["gfx1100", "gfx1201"])
@pytest.mark.parametrize("tier", ["interp", "threaded"])
def test_a_line_read_twice_hits_the_second_time(arch, tier, tmp_path, monkeypatch):
    """`once` copies a[i] to out[i], `twice` adds a[i ^ 1]: a wave's 32 lanes read one 128-byte line of `a` and
    write one of `out`, the lines of different waves are different, and the kernel arguments' lines are read by
    every wave's s_load: each wave's second read of `a` hits and nothing else changes (misses: the 2 lines per
    wave, plus the kernel arguments' lines once); on the interpreter and between native code alike."""
    monkeypatch.setenv("HWEMU_TIER", tier)
    co = opencl.compile_cl(L2_SOURCE, arch)
    waves = 12
    a = np.arange(32 * waves, dtype=np.int32)
    got = {k: _counted(arch, co, k, [a, np.zeros_like(a)], waves, 32) for k in ("once", "twice")}
    smem = {k: sum(m.startswith("s_load") for m in listing(co, k, tmp_path)) for k in got}
    assert smem["once"] == smem["twice"] > 0
    once, twice = got["once"], got["twice"]
    assert once["GL2C_HIT"] + once["GL2C_MISS"] == waves * (2 + smem["once"])  # one line per request
    assert 2 * waves + 1 <= once["GL2C_MISS"] <= 2 * waves + smem["once"]
    assert (twice["GL2C_HIT"], twice["GL2C_MISS"]) == (once["GL2C_HIT"] + waves, once["GL2C_MISS"])
    assert once["SQC_LDS_IDX_ACTIVE"] == once["SQC_LDS_BANK_CONFLICT"] == 0  # no DS instruction


PMC_MATMUL = """
import json
import numpy as np
from tinygrad import Tensor, Device
from tinygrad.device import Compiled
from tinygrad.engine.realize import run_linear
run_linear((Tensor.empty(64, 64) @ Tensor.empty(64, 64)).sum(axis=1).schedule_linear())
Device[Device.DEFAULT].synchronize()
print("PMC " + json.dumps([{s.name: int(np.frombuffer(e.blob[s.off:s.off + s.size], np.uint64).sum()) for s in e.sched}
                           for e in Compiled.profile_events if type(e).__name__ == "ProfilePMCEvent"]))
"""


def test_counted_waves_run_natively_and_count_as_the_interpreter_does():
    """tinygrad's PROFILE=1 PMC=1 selects address counters (GL2C hits and misses, LDS bank conflicts): its waves run
    the threaded tier's native code, memory instructions included, which logs their accesses. Each counter's sum
    over its instances is the interpreter's (which L2 channel a line goes to depends on where the buffers landed),
    and every wave-instruction runs natively, as with the counters off (HWEMU_STATS; HWEMU_TIER=threaded compiles
    each handler when first asked, so the count does not depend on timing)."""
    from test_tinygrad import profiled
    interpreted, _ = profiled(PMC_MATMUL, "PMC", {"PMC": "1", "HWEMU_TIER": "interp"})
    native, counted_stats = profiled(PMC_MATMUL, "PMC", {"PMC": "1", "HWEMU_TIER": "threaded"})
    _, plain_stats = profiled(PMC_MATMUL, "PMC", {"PMC": "0", "HWEMU_TIER": "threaded"})
    assert interpreted and all(d["GL2C_HIT"] + d["GL2C_MISS"] for d in interpreted) and native == interpreted
    assert counted_stats.split()[1:] == plain_stats.split()[1:], (counted_stats, plain_stats)
    assert counted_stats.endswith(" 100% native"), counted_stats  # every instruction of the kernel has a handler
