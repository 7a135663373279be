"""HWEMU_STATS: wave-instructions by category (emu.amd.exec.category) on every tier, and the per-kernel table.

A straight-line clang-19 kernel's categories must be its waves times the instructions of each category in
llvm-objdump-19's listing of it (classified here by mnemonic), and its LDS bytes the group_segment_fixed_size of its
metadata (llvm-readelf-19); a kernel with loops, branches and a global atomic (which hands workgroups over from native
code to Python) must count the same on every tier; a fault in the middle of a fused block and the watchdog leave
tallies that sum to the engine's instruction count; and a stack.Device program on MOCKKFD prints the kernel's row.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from test_wave import asm

from emu.amd.exec.state import CATEGORIES
from stack.codegen import opencl

pytestmark = pytest.mark.skipif(not (opencl.available() and shutil.which("llvm-objdump-19")),
                                reason="clang-19, ld.lld-19 and llvm-objdump-19 are needed")

SOURCE = r"""
// mix: straight-line SALU, VALU, scalar loads, global loads and stores, LDS stores and loads and a barrier.
__attribute__((reqd_work_group_size(128, 1, 1)))
kernel void mix(global const int *in, global int *out) {
  __local int s[128];
  uint l = get_local_id(0), i = get_global_id(0);
  s[l] = in[i] * 3 + 1;
  barrier(CLK_LOCAL_MEM_FENCE);
  out[i] = s[127 - l] + (int)get_group_id(0);
}

// loops: branches and loops, LDS, and a global atomic (no native region takes it) in the middle of the waves.
kernel void loops(global int *out, global int *count, int n) {
  __local int s[256];
  uint l = get_local_id(0), i = get_global_id(0);
  int acc = 0;
  for (int k = 0; k < n + (int)(i & 3); k++) acc += (k ^ (int)i) & 7;
  if (i & 1) acc = -acc;
  s[l] = acc;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (l == 5) atomic_add(count, s[l ^ 1]);
  barrier(CLK_LOCAL_MEM_FENCE);
  out[i] = acc + s[(l + 1) % get_local_size(0)];
}
"""
ARCHS = ("gfx1100", "gfx1201", "gfx942")
TIERS = ("ref", "interp", "jit", "auto")
_OTHER = ("s_waitcnt", "s_wait_", "s_nop", "s_endpgm", "s_barrier", "s_delay_alu", "s_clause", "s_sendmsg",
          "s_set_inst_prefetch_distance")


def mnemonic_category(m: str) -> str:
    """The category of an llvm-objdump mnemonic, by its prefix."""
    if m.startswith(("s_load", "s_buffer_load")):
        return "SMEM"
    if m.startswith(("global_", "flat_", "scratch_", "buffer_")):
        return "VMEM"
    if m.startswith("ds_"):
        return "LDS"
    if m.startswith("v_"):
        return "VALU"
    if m.startswith(("s_branch", "s_cbranch", "s_setpc", "s_swappc")):
        return "branch"
    if m.startswith(_OTHER):
        return "other"
    assert m.startswith("s_"), m
    return "SALU"


def listing(co: bytes, kernel: str, tmp_path) -> list[str]:
    """The mnemonics of `kernel` in llvm-objdump-19's disassembly, up to its s_endpgm."""
    f = tmp_path / "k.co"
    f.write_bytes(co)
    text = subprocess.run(["llvm-objdump-19", "-d", "--no-show-raw-insn", str(f)], capture_output=True, text=True,
                          check=True).stdout
    body = text.split(f"<{kernel}>:\n", 1)[1]
    out = []
    for line in body.splitlines():
        m = line.split()[0] if line.strip() else ""
        out.append(m)
        if m == "s_endpgm":
            return out
    raise AssertionError(f"no s_endpgm in {kernel}")


def group_segment(co: bytes, kernel: str, tmp_path) -> int:
    """The kernel's .group_segment_fixed_size in the code object's metadata note (llvm-readelf-19)."""
    f = tmp_path / "k.co"
    f.write_bytes(co)
    text = subprocess.run(["llvm-readelf-19", "--notes", str(f)], capture_output=True, text=True, check=True).stdout
    sizes = re.findall(r"\.group_segment_fixed_size:\s*(\d+)", text)
    names = re.findall(r"^\s*\.name:\s*(\S+)", text, re.M)
    return int(dict(zip(names, sizes, strict=True))[kernel])


def _launch(monkeypatch, tier: str, arch: str, kernel: str, grid, block, arrays, scalars=(), times: int = 1):
    """`times` launches (buffers holding `arrays`, then `scalars`) on a new GPU under `tier` with HWEMU_STATS on;
    returns (GPU, the last launch's Stats)."""
    from emu.amd import GPU
    from emu.amd.exec import jit
    monkeypatch.setenv("HWEMU_TIER", tier)
    monkeypatch.setenv("HWEMU_STATS", "1")
    monkeypatch.setenv("HWEMU_HOT", "2")  # under auto: regions compile after a couple of waves
    monkeypatch.setenv("HWEMU_COMPILE_COST", "0")
    gpu = GPU(arch)
    prog = gpu.load(opencl.compile_cl(SOURCE, arch))
    bufs = []
    for a in arrays:
        bufs.append(gpu.alloc(a.nbytes))
        gpu.write(bufs[-1], a)
    for _ in range(times):
        s = gpu.launch(prog, kernel, grid=grid, block=block, args=bufs + list(scalars))
        jit.background.wait(300)  # auto: the next launch runs the regions compiled meanwhile
    return gpu, s


@pytest.mark.parametrize("arch", ARCHS)
def test_straight_line_kernel_counts_its_listing(monkeypatch, arch, tmp_path):
    co = opencl.compile_cl(SOURCE, arch)
    mnemonics = listing(co, "mix", tmp_path)
    assert not any(m.startswith(("s_branch", "s_cbranch")) for m in mnemonics), "the kernel is straight-line"
    per_wave = [sum(mnemonic_category(m) == c for m in mnemonics) for c in CATEGORIES]
    lanes = 64 if arch == "gfx942" else 32
    groups, block = 4, 128
    waves = groups * block // lanes
    x = np.arange(groups * block, dtype=np.int32)
    for tier in TIERS:
        gpu, s = _launch(monkeypatch, tier, arch, "mix", (groups,), (block,), [x, np.zeros_like(x)], times=3)
        assert s.waves == waves, tier
        assert sum(s.categories) == s.wave_instructions, tier
        assert s.categories == [waves * n for n in per_wave], tier
        assert (s.native == 0) == (tier in ("ref", "interp")), tier
        k = gpu.kernel_stats["mix"]
        assert (k.dispatches, k.waves, k.wave_instructions) == (3, 3 * waves, 3 * s.wave_instructions), tier
        assert k.categories == [3 * n for n in s.categories], tier
        assert k.lds_bytes == group_segment(co, "mix", tmp_path) == 512
        assert k.tier.startswith(tier), k.tier


@pytest.mark.parametrize("arch", ARCHS)
def test_branches_and_hand_over_count_alike_on_every_tier(monkeypatch, arch):
    groups, block = 3, 128
    results = {}
    for tier in TIERS:
        gpu, s = _launch(monkeypatch, tier, arch, "loops", (groups,), (block,),
                         [np.zeros(groups * block, np.int32), np.zeros(1, np.int32)], [37], times=2)
        assert sum(s.categories) == s.wave_instructions, tier
        assert s.native <= s.wave_instructions, tier
        if tier == "jit":  # native workgroups handed over to Python at the atomic
            assert 0 < s.native < s.wave_instructions
        results[tier] = (s.waves, s.wave_instructions, s.categories)
    assert len(set(map(repr, results.values()))) == 1, results
    by = dict(zip(CATEGORIES, results["ref"][2], strict=True))
    assert by["branch"] and by["LDS"] and by["VMEM"] and by["SALU"] and by["VALU"]


def test_stats_off_counts_no_categories(monkeypatch):
    from emu.amd import GPU
    monkeypatch.delenv("HWEMU_STATS", raising=False)
    gpu = GPU("gfx1100")
    prog = gpu.load(opencl.compile_cl(SOURCE, "gfx1100"))
    bufs = [gpu.alloc(512 * 4), gpu.alloc(512 * 4)]
    s = gpu.launch(prog, "mix", grid=(4,), block=(128,), args=bufs)
    assert s.wave_instructions and not any(s.categories) and not s.kernel and not gpu.kernel_stats


def _tallies(w) -> list[int]:
    from emu.amd.exec.translate import TALLY
    native = w.counters.ctr[TALLY:TALLY + len(CATEGORIES)] if w.counters is not None else [0] * len(CATEGORIES)
    return [a + int(b) for a, b in zip(w.tally, native, strict=True)]


@pytest.mark.parametrize("tier", ("ref", "interp", "jit"))
def test_fault_mid_block_counts_what_ran(monkeypatch, tier):
    """A global load of an unmapped address after three instructions: they count, the load does not (the fused block
    and the native region leave the faulting instruction out)."""
    from emu.amd import GPUFault, Wave
    monkeypatch.setenv("HWEMU_TIER", tier)
    monkeypatch.setenv("HWEMU_STATS", "1")
    code = asm("s_mov_b32 s0, 1\nv_mov_b32 v1, 2\ns_add_u32 s1, s0, s0\nglobal_load_b32 v2, v[4:5], off\n"
               "s_endpgm\n", "gfx1100")
    w = Wave("gfx1100")
    with pytest.raises(GPUFault):
        w.run(code)
    assert w.executed == 3
    assert dict(zip(CATEGORIES, _tallies(w), strict=True)) == {**dict.fromkeys(CATEGORIES, 0), "SALU": 2, "VALU": 1}


@pytest.mark.parametrize("tier", ("ref", "interp", "jit"))
def test_watchdog_counts_what_ran(monkeypatch, tier):
    """A loop the watchdog stops: the blocks it cut short (their first instruction only) count what ran."""
    from emu.amd import GPUFault, Wave
    monkeypatch.setenv("HWEMU_TIER", tier)
    monkeypatch.setenv("HWEMU_STATS", "1")
    code = asm("s_add_u32 s0, s0, 1\nv_add_nc_u32 v0, v0, v1\ns_nop 0\ns_branch -4\n", "gfx1100")
    w = Wave("gfx1100")
    with pytest.raises(GPUFault, match="watchdog"):
        w.run(code, limit=1001)
    t = dict(zip(CATEGORIES, _tallies(w), strict=True))
    assert sum(t.values()) == w.executed > 1001
    assert t["SALU"] >= t["VALU"] >= t["other"] >= t["branch"] >= t["SALU"] - 1


def test_mockkfd_program_prints_its_row(tmp_path):
    """HWEMU_STATS=1 on a stack.Device program: the totals line, then the table with the kernel's row."""
    src = tmp_path / "k.cl"
    src.write_text(SOURCE)
    code = textwrap.dedent(f"""
        import numpy as np
        from stack import Device
        from stack.codegen import opencl
        dev = Device("MOCKKFD+AMD")
        prog = dev.program(opencl.compile_cl(open({str(src)!r}).read(), "gfx1100"), "mix")
        a, b = dev.alloc(512 * 4), dev.alloc(512 * 4)
        dev.copyin(a, np.arange(512, dtype=np.int32).tobytes())
        for _ in range(3):
            prog(a, b, global_size=(4,), local_size=(128,))
        dev.synchronize()
        print("OK")
    """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "HWEMU_STATS": "1", "HWEMU_TIER": "interp"})
    assert "OK" in p.stdout, p.stderr
    lines = p.stderr.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("hwemu: MOCKKFD with 1 emulated gfx1100"))
    assert "3 dispatches" in lines[at] and lines[at + 1].startswith("hwemu: per-kernel statistics")
    cells = [re.split(r"\s{2,}", line.strip()) for line in lines[at + 2:]]  # columns: 2 spaces or more apart
    row = dict(zip(cells[0], next(c for c in cells if c[0] == "mix"), strict=True))
    assert (row["dispatches"], row["waves"], row["LDS"], row["LDS B/wg"], row["tier"]) == \
        ("3", "48", "96", "512", "interp"), row
    assert int(row["wave-insts"]) == sum(int(row[c]) for c in CATEGORIES)


@pytest.mark.parametrize(("arch", "text", "want"), [
    ("gfx1100", "s_getpc_b64 s[0:1]", "SALU"), ("gfx1100", "s_setpc_b64 s[0:1]", "branch"),
    ("gfx1100", "s_swappc_b64 s[0:1], s[2:3]", "branch"), ("gfx1100", "s_cbranch_execz 3", "branch"),
    ("gfx1100", "s_waitcnt_vscnt null, 0", "other"), ("gfx1100", "s_sendmsg sendmsg(MSG_DEALLOC_VGPRS)", "other"),
    ("gfx1100", "s_round_mode 0x1", "other"), ("gfx1100", "buffer_gl0_inv", "VMEM"),
    ("gfx1100", "buffer_load_b32 v0, off, s[0:3], 0", "VMEM"), ("gfx1100", "scratch_load_b32 v0, off, off", "VMEM"),
    ("gfx1100", "v_dual_mov_b32 v0, v1 :: v_dual_mov_b32 v3, v4", "VALU"),
    ("gfx1100", "v_mov_b32_dpp v0, v1 quad_perm:[1,0,3,2]", "VALU"), ("gfx1100", "v_pk_add_f16 v0, v1, v2", "VALU"),
    ("gfx1100", "lds_param_load v0, attr0.x", "LDS"), ("gfx1100", "ds_swizzle_b32 v0, v1", "LDS"),
    ("gfx1100", "s_load_b32 s0, s[0:1], 0x0", "SMEM"), ("gfx1201", "s_wait_loadcnt 0x0", "other"),
    ("gfx1201", "s_barrier_signal -1", "other"), ("gfx1201", "global_load_b32 v0, v[0:1], off", "VMEM"),
    ("gfx942", "v_add_f32_sdwa v0, v1, v2 dst_sel:WORD_1 src0_sel:DWORD src1_sel:DWORD", "VALU"),
    ("gfx942", "v_mfma_f32_32x32x8_f16 a[0:15], v[0:1], v[2:3], a[0:15]", "VALU"),
    ("gfx942", "buffer_load_dword v0, off, s[0:3], 0", "VMEM"), ("gfx942", "s_barrier", "other"),
])
def test_category_of_each_encoding(arch, text, want):
    """Encodings as llvm-mc-19 assembles them, in the category the ISA manual's grouping puts them."""
    from emu.amd.decode import decode
    from emu.amd.exec.category import category
    (inst,) = decode(asm(text, arch), arch)
    assert CATEGORIES[category(inst)] == want, inst
