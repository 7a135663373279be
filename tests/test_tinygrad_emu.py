"""tinygrad's emulator entry point `test.mockgpu.amd.emu.run_asm` served by hwemu (emu.os.tinygrad_emu), which
tinygrad's hardware-confirmed ISA tests (test/amd/hw) call: code and buffers at host addresses, run on hwemu's
engine through a GPU VM that identity-maps the process's pages. Kernels are encoded with the tinygrad wheel's
own instruction classes, as those tests encode theirs."""
from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap

import pytest

from emu.amd.memory import GPUFault
from emu.os.tinygrad_emu import run_asm

ins = pytest.importorskip("tinygrad.runtime.autogen.amd.rdna3.ins")
NULL = pytest.importorskip("tinygrad.renderer.amd.dsl").NULL


def _run(body: list, lanes: int = 1, arch: str = "rdna3", out_words: int = 64) -> list[int]:
    """Run `body`, then store v0 of each lane to out[lane] (out's address is the kernel argument)."""
    s, v = ins.s, ins.v
    code = b"".join(i.to_bytes() for i in [
        ins.v_mov_b32_e32(v[255], v[0]), *body,
        ins.s_load_b64(s[2:3], s[0:1], 0, soffset=NULL), ins.s_waitcnt(0),
        ins.v_lshlrev_b32_e32(v[1], 2, v[255]),
        ins.global_store_b32(addr=v[1], data=v[0], saddr=s[2:3], offset=0), ins.s_endpgm()])
    out = (ctypes.c_uint32 * out_words)()
    args = (ctypes.c_uint64 * 1)(ctypes.addressof(out))
    kernel = (ctypes.c_char * len(code)).from_buffer_copy(code)
    assert run_asm(ctypes.addressof(kernel), len(code), 1, 1, 1, lanes, 1, 1, ctypes.addressof(args),
                   0x19C | 128 << 15, 0x10000, arch) == 0
    return list(out)


def test_hardware_vector_cvt_f16_keeps_the_high_half():
    """test/amd/hw/test_vop1.py (confirmed on gfx1100): v_cvt_f16_f32 v0, v0 of 1.0 leaves the source's high half."""
    v = ins.v
    assert _run([ins.v_mov_b32_e32(v[0], 1.0), ins.v_cvt_f16_f32_e32(v[0], v[0])])[0] == 0x3F803C00


def test_two_waves_share_lds_across_a_barrier_with_scratch():
    """64 work-items are two wave32 waves: each stores its id to LDS and to scratch, and after s_barrier reads
    the other wave's id from LDS; the scratch round trip keeps each lane's own."""
    s, v = ins.s, ins.v
    got = _run([
        ins.v_lshlrev_b32_e32(v[3], 2, v[255]), ins.ds_store_b32(addr=v[3], data0=v[255]),
        ins.scratch_store_b32(addr=v[3], data=v[255], saddr=NULL, offset=0),
        ins.s_waitcnt(0), ins.s_barrier(),
        ins.v_xor_b32_e32(v[4], 32, v[255]), ins.v_lshlrev_b32_e32(v[4], 2, v[4]),
        ins.ds_load_b32(addr=v[4], vdst=v[0]), ins.scratch_load_b32(addr=v[3], vdst=v[5], saddr=NULL, offset=0),
        ins.s_waitcnt(0), ins.v_lshlrev_b32_e32(v[5], 8, v[5]), ins.v_or_b32_e32(v[0], v[0], v[5]),
        ins.s_mov_b32(s[4], 0)], lanes=64)
    assert got == [(t ^ 32) | t << 8 for t in range(64)]


def test_unmapped_address_is_a_gpu_fault_and_the_host_lives_on():
    """A store to a page the process has not mapped faults like hardware, naming the address."""
    s, v = ins.s, ins.v
    bad = 0x10  # the zero page is never mapped
    code = b"".join(i.to_bytes() for i in [
        ins.v_mov_b32_e32(v[0], bad), ins.v_mov_b32_e32(v[1], 0), ins.global_store_b32(addr=v[0:1], data=v[1]),
        ins.s_endpgm()])
    kernel = (ctypes.c_char * len(code)).from_buffer_copy(code)
    with pytest.raises(GPUFault) as e:
        run_asm(ctypes.addressof(kernel), len(code), 1, 1, 1, 1, 1, 1, 0)
    assert e.value.record.kind == "unmapped" and bad in e.value.record.addresses
    assert _run([ins.v_mov_b32_e32(v[0], 7), ins.s_mov_b32(s[4], 0)])[0] == 7


@pytest.mark.parametrize("call, message", [
    (dict(arch="gfx1100"), "arch 'gfx1100': expected one of rdna3, rdna4, cdna"),
    (dict(lx=2048), "lx must be an integer in [1, 1024]"),
    (dict(user_data=[0] * 15), "15 user SGPRs given, rsrc2 USER_SGPR_COUNT is 14"),  # 0x19c: 14
])
def test_bad_arguments_name_what_is_wrong(call, message):
    code = (ctypes.c_char * 4).from_buffer_copy(ins.s_endpgm().to_bytes())
    kw = dict(lib=ctypes.addressof(code), lib_sz=4, gx=1, gy=1, gz=1, lx=1, ly=1, lz=1, args_ptr=0) | call
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        run_asm(**kw)


def test_plugin_serves_run_asm_and_leaves_tinygrads_own_internals(tmp_path):
    """Under `DEV=MOCKKFD+AMD pytest` in a tinygrad-like checkout, `test.mockgpu.amd.emu.run_asm` is hwemu's,
    while the names hwemu does not serve (tinygrad's pcode parser, its SQTT traces) come from the checkout's own
    module, loaded only when asked for; with PROFILE on, run_asm is tinygrad's, which writes the SQTT trace. Python
    programs a test starts are served as well (tinygrad's test_mockgpu_invalid starts one)."""
    amd = tmp_path / "test" / "mockgpu" / "amd"
    amd.mkdir(parents=True)
    (tmp_path / "test" / "__init__.py").write_text("")
    (amd / "emu.py").write_text(textwrap.dedent("""
        sqtt_traces = []
        def run_asm(*args): sqtt_traces.append(args[:2]); return 0
        def parse_pcode(text): return 'checkout ' + text
    """))
    (tmp_path / "test_user.py").write_text(textwrap.dedent("""
        import sys
        def test_served():
            from test.mockgpu.amd.emu import run_asm
            assert run_asm.__module__ == "emu.os.tinygrad_emu"
            assert "test.mockgpu.amd.tinygrad_emu" not in sys.modules
            from test.mockgpu.amd.emu import parse_pcode
            assert parse_pcode("x") == "checkout x"
        def test_child_pythons_are_served_too():
            import subprocess
            code = "import sys, emu.os.tinygrad; assert sys.modules['test.mockgpu.mockgpu'].__hwemu__"
            subprocess.run([sys.executable, "-c", code], check=True)
        def test_profile():
            from tinygrad.helpers import Context
            from test.mockgpu.amd.emu import run_asm, sqtt_traces
            with Context(PROFILE=1):
                assert run_asm(1, 4, 1, 1, 1, 1, 1, 1, 0) == 0
            assert sqtt_traces == [(1, 4)]
    """))
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_user.py"],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path,
                       env={**os.environ, "DEV": "MOCKKFD+AMD", "HWEMU": "1"})
    assert "3 passed" in p.stdout, p.stdout + p.stderr
