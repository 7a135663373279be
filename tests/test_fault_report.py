"""Fault reports (emu.amd.debug.fault) of real clang-19 `-g` kernels with an out-of-bounds store, on every tier:
the source line, the lane and work-item, the buffer and the offset come from the kernel source and the launch;
the last-instructions window is checked against llvm-objdump-19's disassembly of the same code object."""
from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest

from stack.codegen import opencl

OBJDUMP = shutil.which("llvm-objdump-19")
pytestmark = pytest.mark.skipif(not (opencl.available() and OBJDUMP),
                                reason="needs clang-19, ld.lld-19, llvm-objdump-19")
TIERS = ["ref", "interp", "jit"]
N = 1024  # elements of each buffer (4,096 bytes: a whole page, so one element past the end is unmapped)
SRC = """\
kernel void shift(global float *out, global const float *in, int n) {
    int i = get_global_id(0);
    if (i < n)
        out[i + 1] = in[i];
}
kernel void sums(global float *out, global const float *in, int n, int m) {
    int i = get_global_id(0);
    float s = 0.0f;
    for (int k = 0; k < m; k++)
        s = s * 0.5f + in[k];
    out[i + 1] = s;
}
"""
STORE_LINES = [i + 1 for i, t in enumerate(SRC.splitlines()) if "out[i + 1] =" in t]  # 1-based


def _code(tmp_path) -> bytes:
    code = opencl.compile_cl(SRC, "gfx1100", extra=("-g", "-cl-kernel-arg-info"))
    (tmp_path / "k.hsaco").write_bytes(code)
    return code


def _objdump(path) -> dict[int, tuple[str, int | None]]:
    """vaddr -> (mnemonic, branch target vaddr or None) from llvm-objdump-19."""
    text = subprocess.run([OBJDUMP, "-d", str(path)], capture_output=True, text=True, check=True).stdout
    syms, out = {}, {}
    for line in text.splitlines():
        m = re.match(r"^([0-9a-f]{16}) <(\S+)>:", line)
        if m:
            syms[m[2]] = int(m[1], 16)
            continue
        m = re.match(r"^\s+(\S+).*// ([0-9A-F]{12}):[0-9A-F ]+(?:<(\S+)\+0x([0-9a-f]+)>)?\s*$", line)
        if m:
            target = syms[m[3]] + int(m[4], 16) if m[3] else None
            out[int(m[2], 16)] = (m[1], target)
    return out


def _fault(monkeypatch, tier, code, kernel, args, grid=(4,), block=(256,)):
    monkeypatch.setenv("HWEMU_TIER", tier)
    from emu.amd import GPU, GPUFault
    gpu = GPU("gfx1100")
    out, inp = gpu.alloc(4 * N), gpu.alloc(4 * N)
    gpu.write(inp, np.arange(N, dtype=np.float32))
    prog = gpu.load(code)
    with pytest.raises(GPUFault) as e:
        gpu.launch(prog, kernel, grid=grid, block=block, args=[out, inp, *args])
    return e.value, out, prog


@pytest.mark.parametrize("tier", TIERS)
def test_out_of_bounds_store_report(monkeypatch, tmp_path, tier):
    code = _code(tmp_path)
    err, out, prog = _fault(monkeypatch, tier, code, "shift", [np.int32(N)])
    r = err.report
    # work-item i = N - 1 stores out[N]: one element past the 4,096-byte buffer; wave32, 256-item workgroups
    i = N - 1
    assert r.kernel == "shift" and r.grid == (4, 1, 1) and r.block == (256, 1, 1)
    assert r.workgroup == (i // 256, 0, 0) and r.wave == i % 256 // 32
    assert [ln.lane for ln in r.lanes] == [i % 32]
    assert r.lanes[0].address == out.addr + 4 * (i + 1)
    assert r.work_item(i % 32) == (i, 0, 0)
    assert r.source is not None and r.source[0].endswith("k.cl") and r.source[1] == STORE_LINES[0]
    assert r.instruction.startswith("global_store_b32")
    text = str(err)
    assert f"0 bytes past the end of the 4,096-byte buffer at {out.addr:#x} — kernel argument 0 `out`" in text
    assert f"k.cl:{STORE_LINES[0]}" in text
    assert f"v[0:1] = {out.addr + 4 * (i + 1):#x}" in text  # the store's 64-bit address operand in that lane
    assert r.exec_mask == 0xFFFFFFFF  # all 32 work-items of the last wave are < n
    # the window: the kernel's instructions from its entry to the store, in the disassembler's order (the
    # branch past the store is not taken in this wave)
    dis = _objdump(tmp_path / "k.hsaco")
    k = prog.co.kernels["shift"]
    pcs = [pc - prog.base for pc, _ in r.history]
    start = k.entry
    expected = [a for a in sorted(dis) if start <= a <= r.code_offset]
    assert pcs == expected[-32:]
    assert [t.split()[0] for _, t in r.history] == [dis[a][0] for a in expected[-32:]]


@pytest.mark.parametrize("tier", TIERS)
def test_history_through_a_loop(monkeypatch, tmp_path, tier):
    """After a loop of 20 trips, the window holds 32 instructions, each the fall-through or the branch target
    (as llvm-objdump-19 prints it) of the one before, ending at the faulting store."""
    code = _code(tmp_path)
    err, out, prog = _fault(monkeypatch, tier, code, "sums", [np.int32(N), np.int32(20)])
    r = err.report
    assert r.source is not None and r.source[1] == STORE_LINES[1]
    assert r.lanes[0].address == out.addr + 4 * N
    dis = _objdump(tmp_path / "k.hsaco")
    pcs = [pc - prog.base for pc, _ in r.history]
    assert len(pcs) == 32 and pcs[-1] == r.code_offset
    order = sorted(dis)
    taken = 0
    for a, b in zip(pcs, pcs[1:], strict=False):
        nxt = order[order.index(a) + 1]
        assert b == nxt or b == dis[a][1], (hex(a), hex(b))
        taken += b != nxt
    assert taken >= 1  # the loop's back edge is in the window
    for (_, text), a in zip(r.history, pcs, strict=True):
        assert text.split()[0] == dis[a][0]


def test_report_without_line_info(monkeypatch):
    """A kernel built without -g: no source line, the rest of the report is there."""
    code = opencl.compile_cl(SRC, "gfx1100")
    err, out, _ = _fault(monkeypatch, "auto", code, "shift", [np.int32(N)])
    assert err.report.source is None and "source:" not in str(err)
    assert "0 bytes past the end of the 4,096-byte buffer" in str(err)


@pytest.mark.parametrize("tier", TIERS)
def test_branch_past_the_code(monkeypatch, tier):
    """s_branch to past the end of a snippet: the fetch there faults at the target on every tier (the report's last
    instructions, which native code's history lists up to the target, say it could not be fetched)."""
    from test_wave import asm

    from emu.amd import GPUFault, Wave
    monkeypatch.setenv("HWEMU_TIER", tier)
    w = Wave("gfx1100")
    with pytest.raises(GPUFault) as e:
        w.run(asm("s_branch 1", "gfx1100"))  # to pc 8, past the 4-byte snippet
    assert (e.value.record.kind, e.value.record.pc, w.executed) == ("illegal-instruction", 8, 1)
    assert all("not fetchable" in text for pc, text in e.value.record.report.history if pc == 8)
