"""Robust tools (issue 13, item 6): the disassembler CLI on damaged ELFs, kernarg preloading, scalar-load faults
and the watchdog's wave dump."""
from __future__ import annotations

import contextlib
import io
import shutil
import tempfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_wave import asm, wave

from stack.codegen import opencl

needs_clang = pytest.mark.skipif(not opencl.available(), reason="clang-19 and ld.lld-19 are needed to build kernels")
needs_mc = pytest.mark.skipif(not shutil.which("llvm-mc-19"), reason="llvm-mc-19 is needed to assemble snippets")


@pytest.fixture(scope="module")
def saxpy() -> bytes:
    if not opencl.available():
        pytest.skip("clang-19 and ld.lld-19 are needed to build kernels")
    return opencl.compile_cl("kernel void k(global float *x, float a) { x[get_global_id(0)] *= a; }", "gfx1100")


@needs_clang
@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_disasm_on_damaged_elfs_exits_2_with_one_line(saxpy, data):
    """Bytes of the ELF header, the section header table or anywhere replaced: exit 0 (still decodable) or 2 with
    one error line, never a traceback."""
    from emu.amd.asm.disasm import main
    blob = bytearray(saxpy)
    shoff = int.from_bytes(blob[40:48], "little")
    regions = [(0, 64), (shoff, len(blob)), (0, len(blob))]
    lo, hi = data.draw(st.sampled_from(regions))
    for _ in range(data.draw(st.integers(1, 6))):
        at = data.draw(st.integers(lo, hi - 1))
        blob[at] = data.draw(st.sampled_from([0, 0xFF, 0x7F, 0x80, data.draw(st.integers(0, 255))]))
    err = io.StringIO()
    with tempfile.NamedTemporaryFile(suffix=".hsaco") as f:
        f.write(blob)
        f.flush()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            rc = main(["--arch", "gfx1100", f.name])
    err = err.getvalue()
    assert rc in (0, 2)
    if rc == 2:
        assert err.startswith("error: ") and err.count("\n") == 1


@needs_clang
def test_kernarg_preloading_runs_as_preloading_firmware():
    """AMDGPUUsage: with kernarg preloading the first 256 bytes of the code are a prologue for firmware without it
    (LLVM 19 puts s_trap 2 there); the runner preloads the dwords after the user SGPRs and starts past it."""
    from emu.amd import GPU
    src = "kernel void k(global int *o, int a, int b) { o[get_global_id(0)] = a * 3 + b; }"
    code = opencl.compile_cl(src, "gfx942", "-O3", ("-mllvm", "-amdgpu-kernarg-preload-count=4"))
    gpu = GPU("gfx942")
    prog = gpu.load(code)
    assert prog.co.kernels["k"].descriptor.kernarg_preload.length == 4
    out = gpu.alloc(256)
    gpu.launch(prog, "k", grid=(1,), block=(64,), args=[out, np.int32(5), np.int32(7)])
    np.testing.assert_array_equal(np.frombuffer(gpu.read(out), np.int32), np.full(64, 22))


@needs_mc
def test_scalar_load_fault_names_the_wave():
    from emu.amd import GPUFault
    w = wave("gfx1100")
    w.sgpr[0], w.sgpr[1] = 0x1000, 0x7F
    with pytest.raises(GPUFault) as e:
        w.run(asm("s_load_b64 s[2:3], s[0:1], 0x10\ns_endpgm", "gfx1100"))
    rec = e.value.record
    assert rec.kind == "unmapped" and rec.pc == 0 and "scalar read" in rec.detail and "host" not in str(rec)
    assert rec.addresses == (0x7F_0000_1010,)


@needs_mc
def test_watchdog_reports_a_wave_dump():
    from emu.amd import GPUFault
    w = wave("gfx1100")
    with pytest.raises(GPUFault) as e:
        w.run(asm("s_add_u32 s0, s0, 1\ns_branch -2\ns_endpgm", "gfx1100"), limit=100)
    rec = e.value.record
    assert rec.kind == "watchdog" and rec.pc == 0 and rec.instruction.startswith("s_add_u32")
    assert "exec 0xffffffff" in rec.detail and "0x4: s_branch" in rec.detail and "0x0: s_add_u32" in rec.detail
