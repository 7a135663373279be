"""MODE and the hardware registers (issue 13, item 2): waves start with MODE from COMPUTE_PGM_RSRC1 (AMDGPUUsage:
FLOAT_ROUND_MODE_32/16_64, FLOAT_DENORM_MODE_32/16_64, ENABLE_DX10_CLAMP, ENABLE_IEEE_MODE become MODE.FP_ROUND,
FP_DENORM, DX10_CLAMP, IEEE); denormals are flushed per MODE; s_round_mode / s_denorm_mode / s_setreg / s_getreg
work on the registers at the ids LLVM assembles hwreg(HW_REG_*) to; clocks are monotonic."""
from __future__ import annotations

import shutil

import numpy as np
import pytest
from test_wave import asm, wave

from stack.codegen import opencl

pytestmark = pytest.mark.skipif(not shutil.which("llvm-mc-19"), reason="llvm-mc-19 is needed to assemble snippets")
F32, U32 = np.float32, np.uint32
TINY = np.finfo(F32).tiny


def _flushed(x: np.ndarray) -> np.ndarray:
    """x with denormals of its type replaced by zero of their sign (numpy: copysign(0, x))."""
    return np.where(np.abs(x) < np.finfo(x.dtype).tiny, np.copysign(x.dtype.type(0), x), x).astype(x.dtype)


@pytest.mark.skipif(not opencl.available(), reason="clang-19 and ld.lld-19 are needed to build kernels")
@pytest.mark.parametrize("arch", ["gfx1100", "gfx942", "gfx1201"])
@pytest.mark.parametrize("daz", [False, True])
def test_mode_at_wave_start_comes_from_rsrc1(arch, daz):
    from test_kernels import launch, result

    from objfile.codeobj import CodeObject
    src = ("kernel void k(global float *x, global float *y, global uint *mode) { int i = get_global_id(0);\n"
           "  y[i] = x[i] * 0.75f; if (i == 0) mode[0] = __builtin_amdgcn_s_getreg(1 | 31 << 11); }")
    code = opencl.compile_cl(src, arch, "-O3", ("-cl-denorms-are-zero",) if daz else ())
    r1 = next(iter(CodeObject.parse(code).kernels.values())).descriptor.rsrc1
    x = (np.linspace(-4, 4, 64) * TINY).astype(F32)  # mostly denormals
    gpu, bufs = launch(arch, code, "k", (1,), (64,), x, np.zeros(64, F32), np.zeros(1, U32))
    mode = int(result(gpu, bufs[2], np.zeros(1, U32))[0])
    want = r1.float_round_mode_32 | r1.float_round_mode_16_64 << 2 | r1.float_denorm_mode_32 << 4 \
        | r1.float_denorm_mode_16_64 << 6
    if arch != "gfx1201":  # RDNA4 has no DX10_CLAMP / IEEE mode bits
        want |= r1.enable_dx10_clamp << 8 | r1.enable_ieee_mode << 9
    assert mode & 0x3FF == want
    assert r1.float_denorm_mode_32 == (0 if daz else 3)
    ref = _flushed(_flushed(x) * F32(0.75)) if daz else x * F32(0.75)
    np.testing.assert_array_equal(result(gpu, bufs[1], ref).view(U32), ref.view(U32))


@pytest.mark.parametrize("arch", ["gfx1100", "gfx1201"])
def test_s_denorm_mode_flushes_per_type(arch):
    w = wave(arch)
    x = (np.linspace(-3, 3, w.lanes) * TINY).astype(F32)
    h = (np.linspace(-3, 3, w.lanes) * 2.0 ** -15).astype(np.float16)  # f16 denormals
    d = np.linspace(-3, 3, w.lanes) * 2.0 ** -1023  # f64 denormals
    w.vgpr[1] = x.view(U32)
    w.vgpr[2] = h.view(np.uint16).astype(U32)
    w.vgpr[3], w.vgpr[4] = d.view(np.uint64).astype(U32), (d.view(np.uint64) >> np.uint64(32)).astype(U32)
    w.run(asm("v_mul_f32 v5, v1, 2.0\ns_denorm_mode 0xc\nv_mul_f32 v6, v1, 2.0\nv_mul_f16 v7, v2, 2.0\n"
              "s_denorm_mode 0x3\nv_mul_f16 v8, v2, 2.0\nv_mul_f64 v[9:10], v[3:4], 2.0\n"
              "s_denorm_mode 0x1\nv_mul_f32 v11, v1, 0.5\ns_endpgm", arch))
    np.testing.assert_array_equal(w.vgpr[5].view(F32), x * F32(2))  # the wave starts with denormals kept
    np.testing.assert_array_equal(w.vgpr[6].view(F32), _flushed(x) * F32(2))  # f32 denormal inputs read as +-0
    np.testing.assert_array_equal((w.vgpr[7] & 0xFFFF).astype(np.uint16).view(np.float16), h * np.float16(2))
    np.testing.assert_array_equal((w.vgpr[8] & 0xFFFF).astype(np.uint16).view(np.float16),
                                  _flushed(h) * np.float16(2))  # now f16 / f64 flush, f32 keeps
    d2 = (w.vgpr[9].astype(np.uint64) | w.vgpr[10].astype(np.uint64) << np.uint64(32)).view(np.float64)
    np.testing.assert_array_equal(d2, _flushed(d) * 2)
    # FP_DENORM f32 = 1: inputs kept, results flushed
    np.testing.assert_array_equal(w.vgpr[11].view(F32), _flushed(x * F32(0.5)))


@pytest.mark.parametrize("arch", ["gfx1100", "gfx942", "gfx1201"])
def test_setreg_getreg_mode_status_and_unknown_registers(arch):
    w = wave(arch)
    start = w.mode
    scc = "hwreg(HW_REG_STATE_PRIV, 9, 1)" if arch == "gfx1201" else "hwreg(HW_REG_STATUS, 0, 1)"  # where SCC is
    w.run(asm("s_getreg_b32 s0, hwreg(HW_REG_MODE)\n"
              "s_setreg_imm32_b32 hwreg(HW_REG_MODE, 0, 4), 0xb\ns_getreg_b32 s1, hwreg(HW_REG_MODE)\n"
              "s_mov_b32 s9, 0xffffffff\ns_setreg_b32 hwreg(HW_REG_STATUS), s9\n"
              f"s_cmp_eq_u32 s9, s9\ns_getreg_b32 s2, {scc}\n"
              "s_setreg_b32 hwreg(63), s9\ns_getreg_b32 s3, hwreg(63)\n"
              + ("" if arch == "gfx942" else "s_round_mode 0x2\ns_denorm_mode 0x9\n") +
              "s_getreg_b32 s4, hwreg(HW_REG_MODE, 0, 8)\ns_endpgm", arch))
    assert w.sgpr[0] == start
    assert w.sgpr[1] == (start & ~0xF) | 0xB  # a field write keeps the other bits
    assert w.sgpr[2] == 1  # STATUS.SCC as s_cmp left it; the s_setreg of the read-only register changed nothing
    assert w.sgpr[3] == 0  # an id no register has reads 0
    assert w.sgpr[4] == ((start & 0xF0) | 0xB if arch == "gfx942" else 0x92)


@pytest.mark.parametrize("arch,reg", [("gfx1100", "HW_REG_TRAPSTS"), ("gfx942", "HW_REG_TRAPSTS"),
                                      ("gfx1201", "HW_REG_EXCP_FLAG_USER")])
def test_trapsts_invalid_is_sticky_state(arch, reg):
    """TRAPSTS (gfx12: EXCP_FLAG_USER, its ALU_INVALID at the same bit 0) is wave state s_setreg writes and s_getreg
    reads back (the invalid-operation flag)."""
    w = wave(arch)
    w.run(asm(f"s_getreg_b32 s0, hwreg({reg})\ns_setreg_imm32_b32 hwreg({reg}, 0, 1), 1\n"
              f"s_getreg_b32 s1, hwreg({reg}, 0, 1)\ns_setreg_imm32_b32 hwreg({reg}, 0, 1), 0\n"
              f"s_getreg_b32 s2, hwreg({reg}, 0, 1)\ns_endpgm", arch))
    assert (w.sgpr[0], w.sgpr[1], w.sgpr[2]) == (0, 1, 0)


@pytest.mark.parametrize("arch,text", [
    ("gfx942", "s_memtime s[0:1]\ns_nop 0\ns_memtime s[2:3]"),
    ("gfx942", "s_memrealtime s[0:1]\ns_nop 0\ns_memrealtime s[2:3]"),
    ("gfx1100", "s_sendmsg_rtn_b64 s[0:1], sendmsg(MSG_RTN_GET_REALTIME)\ns_nop 0\n"
                "s_sendmsg_rtn_b64 s[2:3], sendmsg(MSG_RTN_GET_REALTIME)"),
    ("gfx1201", "s_sendmsg_rtn_b64 s[0:1], sendmsg(MSG_RTN_GET_REALTIME)\ns_nop 0\n"
                "s_sendmsg_rtn_b64 s[2:3], sendmsg(MSG_RTN_GET_REALTIME)"),
    ("gfx1201", "s_getreg_b32 s0, hwreg(HW_REG_SHADER_CYCLES_LO)\ns_getreg_b32 s1, hwreg(HW_REG_SHADER_CYCLES_HI)\n"
                "s_nop 0\ns_getreg_b32 s2, hwreg(HW_REG_SHADER_CYCLES_LO)\n"
                "s_getreg_b32 s3, hwreg(HW_REG_SHADER_CYCLES_HI)"),
])
def test_clocks_are_monotonic(arch, text):
    w = wave(arch)
    w.run(asm(text + "\ns_endpgm", arch))
    first, second = (int(w.sgpr[i]) | int(w.sgpr[i + 1]) << 32 for i in (0, 2))
    assert 0 < first <= second


@pytest.mark.parametrize("arch", ["gfx1100", "gfx1201"])
def test_sendmsg_rtn_b32_and_shader_cycles_count(arch):
    """s_sendmsg_rtn_b32 MSG_RTN_GET_REALTIME returns the clock's low 32 bits; RDNA3's HW_REG_SHADER_CYCLES is a
    20-bit counter (upper bits 0). Read twice around a delay, both advance (modulo their width)."""
    import time
    cycles = "hwreg(HW_REG_SHADER_CYCLES)" if arch == "gfx1100" else "hwreg(HW_REG_SHADER_CYCLES_LO)"
    text = (f"s_sendmsg_rtn_b32 s0, sendmsg(MSG_RTN_GET_REALTIME)\ns_getreg_b32 s1, {cycles}\n"
            f"s_sendmsg_rtn_b32 s2, sendmsg(MSG_RTN_GET_REALTIME)\ns_getreg_b32 s3, {cycles}\ns_endpgm")
    w = wave(arch)
    code = asm(text, arch)
    w.run(code)
    first = [int(w.sgpr[0]), int(w.sgpr[1])]
    time.sleep(0.002)
    w = wave(arch)
    w.run(code)
    assert int(w.sgpr[0]) != first[0] and int(w.sgpr[1]) != first[1]
    width = 20 if arch == "gfx1100" else 32
    assert max(first[1], int(w.sgpr[1]), int(w.sgpr[3])) < 1 << width


def _directed(exact, rm: int, dt=np.float32) -> float:
    """The neighbour of the exact value (a Fraction) that rounding mode rm picks: 1 up, 2 down, 3 toward zero."""
    from fractions import Fraction
    c = dt(float(exact))
    near = [np.nextafter(c, dt(-np.inf)), c, np.nextafter(c, dt(np.inf))]
    down = max(v for v in near if Fraction(float(v)) <= exact)
    up = min(v for v in near if Fraction(float(v)) >= exact)
    return float({1: up, 2: down, 3: down if exact >= 0 else up}[rm])


@pytest.mark.parametrize("rm", [1, 2, 3])
def test_s_round_mode_directs_f32_arithmetic(rm):
    """MODE.FP_ROUND[1:0] (f32), set by s_round_mode, directs the rounding of v_add, v_mul and v_fma; checked
    against the exact results (Fractions) and their f32 neighbours."""
    from fractions import Fraction
    w = wave("gfx1100")
    r = np.random.default_rng(rm)
    a = (r.standard_normal(32) * 10.0 ** r.integers(-5, 5, 32)).astype(F32)
    b = (r.standard_normal(32) * 10.0 ** r.integers(-5, 5, 32)).astype(F32)
    a[0], b[0] = 1.0, 2.0 ** -30
    w.vgpr[1], w.vgpr[2] = a.view(U32), b.view(U32)
    w.run(asm(f"s_round_mode {rm:#x}\nv_add_f32 v3, v1, v2\nv_mul_f32 v4, v1, v2\nv_fma_f32 v5, v1, v2, v1\n"
              "s_round_mode 0x0\nv_add_f32 v7, v1, v2\ns_endpgm", "gfx1100"))
    fa, fb = [Fraction(float(x)) for x in a], [Fraction(float(x)) for x in b]
    for i in range(32):
        assert float(f32(w, 3)[i]) == _directed(fa[i] + fb[i], rm), i
        assert float(f32(w, 4)[i]) == _directed(fa[i] * fb[i], rm), i
        assert float(f32(w, 5)[i]) == _directed(fa[i] * fb[i] + fa[i], rm), i
    np.testing.assert_array_equal(f32(w, 7), a + b)  # back to nearest even
    assert f32(w, 3)[0] == (np.nextafter(F32(1), F32(2)) if rm == 1 else 1.0)


def f32(w, reg: int) -> np.ndarray:
    return w.vgpr[reg].view(F32)


@pytest.mark.parametrize("arch,lanes", [("gfx1100", 32), ("gfx1100", 64), ("gfx942", 64), ("gfx1201", 32),
                                        ("gfx1201", 64)])
def test_status_layout_per_family(arch, lanes):
    """HW_REG_STATUS in each family's layout (the ISA manuals' STATUS table; gfx12: SQ_WAVE_STATUS and
    SQ_WAVE_STATE_PRIV of the Linux driver's gc_12_0_0_sh_mask.h): EXECZ [9], VCCZ [10], VALID [16] everywhere; SCC
    at STATUS[0] up to gfx11, at STATE_PRIV[9] on gfx12, whose STATUS[29] says the wave runs 64 lanes. Only the
    fields the engine models are compared (IN_WG, PRIV, TRAP_EN and the like are not)."""
    from emu.amd import Wave
    w = Wave(arch, lanes)
    ex, vcc = ("exec", "vcc") if lanes == 64 else ("exec_lo", "vcc_lo")
    mov, save = ("s_mov_b64", "s[8:9]") if lanes == 64 else ("s_mov_b32", "s8")
    attrs = ("wavefrontsize64",) if lanes == 64 and arch != "gfx942" else ()
    gfx12 = arch == "gfx1201"
    priv = "s_getreg_b32 s{}, hwreg(HW_REG_STATE_PRIV)\n" if gfx12 else "s_mov_b32 s{}, 0\n"
    w.run(asm(f"{mov} {vcc}, 0\ns_cmp_eq_u32 0, 0\ns_getreg_b32 s0, hwreg(HW_REG_STATUS)\n" + priv.format(4) +
              f"{mov} {vcc}, 1\ns_cmp_eq_u32 0, 1\ns_getreg_b32 s1, hwreg(HW_REG_STATUS)\n" + priv.format(5) +
              f"{mov} {save}, {ex}\n{mov} {ex}, 0\ns_getreg_b32 s2, hwreg(HW_REG_STATUS)\n{mov} {ex}, {save}\n"
              "s_endpgm", arch, *attrs))
    execz, vccz, valid = 1 << 9, 1 << 10, 1 << 16
    modelled = execz | vccz | valid | (1 << 29 if gfx12 else 1)
    wave64 = (1 << 29) * (gfx12 and lanes == 64)
    scc_status = 0 if gfx12 else 1
    assert [int(w.sgpr[i]) & modelled for i in range(3)] == [valid | vccz | scc_status | wave64, valid | wave64,
                                                           valid | execz | wave64]
    assert (int(w.sgpr[4]), int(w.sgpr[5])) == ((1 << 9, 0) if gfx12 else (0, 0))
