"""Instructions whose results differed from the hardware (issue 13, item 3): snippets assembled by llvm-mc-19 and
clang-19 kernels, each checked against numpy, Fractions, the ISA manual's rule or LLVM's description of the
hardware."""
from __future__ import annotations

import decimal
import shutil

import numpy as np
import pytest
from test_wave import asm, wave

from stack.codegen import opencl

pytestmark = pytest.mark.skipif(not shutil.which("llvm-mc-19"), reason="llvm-mc-19 is needed to assemble snippets")
F32, U32 = np.float32, np.uint32
VCC = {"gfx1100": "vcc_lo", "gfx1201": "vcc_lo", "gfx942": "vcc"}


def f32(w, reg: int) -> np.ndarray:
    return w.vgpr[reg].view(F32)


@pytest.mark.parametrize("arch", ["gfx1100", "gfx942"])
def test_cndmask_e64_abs_neg_are_float_modifiers(arch):
    w = wave(arch)
    x = np.linspace(-4, 4, w.lanes).astype(F32)
    w.vgpr[1], w.vgpr[2] = x.view(U32), (x * 3).view(U32)
    w.vcc = 0x5555555555555555 & w.full
    w.run(asm(f"v_cndmask_b32_e64 v0, |v1|, -v2, {VCC[arch]}\ns_endpgm", arch))
    take2 = (0x5555555555555555 >> np.arange(w.lanes)) & 1 == 1
    np.testing.assert_array_equal(f32(w, 0), np.where(take2, -(x * 3), np.abs(x)))


@pytest.mark.skipif(not opencl.available(), reason="clang-19 and ld.lld-19 are needed to build kernels")
@pytest.mark.parametrize("arch", ["gfx1100", "gfx1201", "gfx942"])
def test_clang_sqrt_of_fabs(arch):
    """clang selects fabs(x) with a v_cndmask_b32_e64 |x| in its correctly rounded sqrtf."""
    from test_kernels import launch, result
    src = "kernel void k(global float *x) { int i = get_global_id(0); x[i] = sqrt(fabs(x[i])); }"
    x = np.linspace(-50, 50, 64).astype(F32)
    gpu, bufs = launch(arch, opencl.compile_cl(src, arch, "-O3", ("-cl-fp32-correctly-rounded-divide-sqrt",)),
                       "k", (1,), (64,), x.copy())
    np.testing.assert_array_equal(result(gpu, bufs[0], x), np.sqrt(np.abs(x)))


@pytest.mark.skipif(not opencl.available(), reason="clang-19 and ld.lld-19 are needed to build kernels")
@pytest.mark.parametrize("arch", ["gfx1100", "gfx1201", "gfx942"])
@pytest.mark.parametrize("ty, flushed", [(np.float32, False), (np.float32, True), (np.float64, False)])
def test_clang_division_with_tiny_numerators_and_subnormal_quotients(arch, ty, flushed):
    """clang's correctly rounded division (v_div_scale, v_rcp, fma refinement, v_div_fmas, v_div_fixup) run as a
    kernel gives numpy's quotient: tiny numerators (V_DIV_SCALE scales them and sets VCC), subnormal and underflowing
    quotients, denominators whose reciprocal is subnormal (V_DIV_SCALE scales them down) included (V_DIV_FMAS undoes
    the scaling and rounds its scaled result once); also built with f32 denormals flushed (-cl-denorms-are-zero)."""
    from test_kernels import launch, result
    c = "double" if ty is np.float64 else "float"
    src = ("#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n"
           f"kernel void k(global {c} *q, global const {c} *n, global const {c} *d) {{\n"
           "  int i = get_global_id(0); q[i] = n[i] / d[i]; }")
    info, r = np.finfo(ty), np.random.default_rng(13)
    top = int(np.log10(info.max)) - 1
    n = (r.standard_normal(256) * 10.0 ** r.integers(-top, top, 256)).astype(ty)
    d = (r.standard_normal(256) * 10.0 ** r.integers(-top, top, 256)).astype(ty)
    n[:64] = r.standard_normal(64) * 10.0 ** r.integers(-top - 10, -top + 10, 64)  # quotients near the subnormals
    d[:64] = r.standard_normal(64) * 10.0 ** r.integers(1, 30, 64)
    n[64:96] = info.tiny * r.uniform(1, 2 ** 20, 32)  # tiny numerators over ordinary denominators
    d[64:96] = r.standard_normal(32)
    n[96:128] = np.ldexp(r.uniform(-1, 1, 32), r.integers(-40, 90, 32))  # denominators with a subnormal reciprocal
    d[96:128] = np.ldexp(r.uniform(0.5, 1, 32), info.maxexp - r.integers(0, 3, 32))
    n[128:144] = info.tiny * r.uniform(1, 2 ** 20, 16)  # tiny over small: ordinary quotients
    d[128:144] = np.ldexp(r.uniform(0.5, 1, 16), info.minexp + r.integers(1, 60, 16))
    n[144:146], d[144:146] = (1.0, info.tiny), (np.ldexp(1.0, info.maxexp - 1), 1.0)
    if ty is np.float64:
        n[146], d[146] = float.fromhex("0x1.d7d0110bba107p-139"), float.fromhex("-0x1.2578ec18e36f0p+884")
    flags = ("-cl-fp32-correctly-rounded-divide-sqrt",) + (("-cl-denorms-are-zero",) if flushed else ())
    gpu, bufs = launch(arch, opencl.compile_cl(src, arch, "-O3", flags), "k", (4,), (64,), np.zeros(256, ty), n, d)
    flush = (lambda x: np.where(np.abs(x) < info.tiny, x * 0, x)) if flushed else (lambda x: x)  # to a signed 0
    with np.errstate(all="ignore"):
        assert np.count_nonzero((np.abs(n / d) < info.tiny) & (n / d != 0)) > 20
        want = flush(flush(n) / flush(d))
    bits = np.uint64 if ty is np.float64 else np.uint32
    np.testing.assert_array_equal(result(gpu, bufs[0], want).view(bits), want.view(bits))


@pytest.mark.skipif(not opencl.available(), reason="clang-19 and ld.lld-19 are needed to build kernels")
@pytest.mark.parametrize("arch", ["gfx1100", "gfx1201", "gfx942"])
def test_clang_fma_of_half_and_float_is_fused(arch):
    """OpenCL fma() rounds once; clang-19 compiles fma((float)a, b, c) of a half and floats to v_fma_mix_f32 (gfx942:
    the opcode the CDNA4 tables name V_MAD_MIX_F32). Expected: the exact a * b + c (Fractions) rounded to f32; the
    half-by-float product is not exact in f32, so a rounded product would show."""
    from fractions import Fraction

    from test_fidelity_rounding import _to
    from test_kernels import launch, result
    src = ("#pragma OPENCL EXTENSION cl_khr_fp16 : enable\nkernel void k(global float *o, global const half *a, "
           "global const float *b, global const float *c) { int i = get_global_id(0);\n"
           "  o[i] = fma((float)a[i], b[i], c[i]); }")
    code = opencl.compile_cl(src, arch, "-O3")
    r = np.random.default_rng(17)
    a = (r.standard_normal(64) * 8).astype(np.float16)
    b = (r.standard_normal(64) * 8).astype(F32)
    c = (-a.astype(np.float64) * b + r.standard_normal(64) * 2.0 ** -30).astype(F32)  # cancellation: fused shows
    gpu, bufs = launch(arch, code, "k", (1,), (64,), np.zeros(64, F32), a, b, c)
    want = [_to(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)), 0, F32)
            for x, y, z in zip(a, b, c, strict=True)]
    np.testing.assert_array_equal(result(gpu, bufs[0], np.zeros(64, F32)), np.array(want, F32))


def test_fma_mix_source_kinds_and_modifiers():
    """OPSEL_HI[2] (src2 as f16) sits in its own encoding field; abs (NEG_HI) / neg act on the f16 sign."""
    w = wave("gfx1100")
    h = np.float16
    a, b = np.linspace(-3, 3, 32).astype(h), np.linspace(0.5, 8, 32).astype(h)
    c = np.linspace(-10, 10, 32).astype(F32)
    w.vgpr[1] = a.view(np.uint16).astype(U32) | U32(0x7C00) << 16  # hi half: inf, must not be read
    w.vgpr[2] = b.view(np.uint16).astype(U32) << 16  # the f16 in the high half
    w.vgpr[3] = c.view(U32)
    w.vgpr[4] = (c.astype(h)).view(np.uint16).astype(U32)
    w.run(asm("v_fma_mix_f32 v5, |v1|, -v2, v3 op_sel:[0,1,0] op_sel_hi:[1,1,0]\n"
              "v_fma_mix_f32 v6, v1, v2, v4 op_sel:[0,1,0] op_sel_hi:[1,1,1]\n"
              "v_fma_mixlo_f16 v7, v1, v2, v4 op_sel:[0,1,0] op_sel_hi:[1,1,1]\ns_endpgm", "gfx1100"))
    A, B = a.astype(np.float64), b.astype(np.float64)
    np.testing.assert_array_equal(f32(w, 5), (np.abs(A) * -B + c.astype(np.float64)).astype(F32))
    ref = A * B + c.astype(h).astype(np.float64)
    np.testing.assert_array_equal(f32(w, 6), ref.astype(F32))
    np.testing.assert_array_equal((w.vgpr[7] & 0xFFFF).astype(np.uint16).view(h), ref.astype(h))


@pytest.mark.parametrize("arch", ["gfx1100", "gfx942"])
def test_carry_out_ops_saturate_under_clamp(arch):
    w = wave(arch)
    vcc = VCC[arch]
    w.vgpr[1] = np.arange(w.lanes, dtype=U32) + U32(0xFFFFFFF0)
    w.vgpr[2] = np.full(w.lanes, 8, U32)
    w.run(asm(f"v_add_co_u32 v3, {vcc}, v1, v2 clamp\nv_sub_co_u32 v4, {vcc}, v2, v1 clamp\n"
              f"v_subrev_co_u32 v5, {vcc}, v1, v2 clamp\nv_add_co_u32 v6, {vcc}, v1, v2\ns_endpgm", arch))
    a = w.vgpr[1].astype(np.int64)
    s = a + 8
    np.testing.assert_array_equal(w.vgpr[3], np.minimum(s, 0xFFFFFFFF))
    np.testing.assert_array_equal(w.vgpr[4], np.maximum(8 - a, 0))  # a borrow saturates to 0
    np.testing.assert_array_equal(w.vgpr[5], np.maximum(8 - a, 0))
    np.testing.assert_array_equal(w.vgpr[6], (s & 0xFFFFFFFF).astype(U32))


@pytest.mark.parametrize("arch", ["gfx1100", "gfx942"])
def test_carry_in_ops_saturate_under_clamp(arch):
    """The _ci forms (gfx9: v_addc_co_u32 / v_subb_co_u32) with clamp: the sum with the carry-in saturates at
    0xffffffff, the difference with the borrow-in at 0."""
    w = wave(arch)
    vcc, sdst = (VCC[arch], "s[0:1]") if arch == "gfx942" else (VCC[arch], "s0")
    add, sub = ("v_addc_co_u32", "v_subb_co_u32") if arch == "gfx942" else ("v_add_co_ci_u32", "v_sub_co_ci_u32")
    w.vgpr[1] = np.arange(w.lanes, dtype=U32) + U32(0xFFFFFFF0)
    w.vgpr[2] = np.full(w.lanes, 8, U32)
    w.vcc = 0xAAAAAAAAAAAAAAAA & w.full
    w.run(asm(f"{add}_e64 v3, {sdst}, v1, v2, {vcc} clamp\n{sub}_e64 v4, {sdst}, v2, v1, {vcc} clamp\ns_endpgm", arch))
    a, c = w.vgpr[1].astype(np.int64), np.arange(w.lanes) % 2
    np.testing.assert_array_equal(w.vgpr[3], np.minimum(a + 8 + c, 0xFFFFFFFF))
    np.testing.assert_array_equal(w.vgpr[4], np.maximum(8 - a - c, 0))


@pytest.mark.parametrize("arch", ["gfx1100", "gfx942", "gfx1201"])
@pytest.mark.parametrize("ieee", [0, 1])
@pytest.mark.parametrize("denorm_out", [0, 1])
def test_omod_needs_ieee_off_and_output_denormals_flushed(arch, ieee, denorm_out):
    """The ISA manuals: output modifiers apply to float results only, "are ignored if the IEEE mode bit is set" and
    "if output denormals are enabled"; applied, they flush denormals to zero and -0 to +0 (LLVM's SIFoldOperands
    states both conditions). RDNA4 has no IEEE bit. 3.0 + 1.0 with mul:2 is 8.0 where omod applies, 4.0 where not;
    -0 * 1.0 with mul:2 is +0 where it applies; 1.5 * 2^-126 with div:2 is an f32 denormal, flushed to +0."""
    w = wave(arch)
    fill = lambda x: np.full(w.lanes, x, F32).view(U32)  # noqa: E731
    w.vgpr[1], w.vgpr[2], w.vgpr[5], w.vgpr[7] = fill(3.0), fill(1.0), fill(-0.0), fill(1.5 * np.finfo(F32).tiny)
    w.vgpr[8] = np.full(w.lanes, 7, U32)
    w.mode = (w.mode & ~0x3F0) | (0xD | denorm_out << 1) << 4 | (0 if arch == "gfx1201" else ieee << 9 | 1 << 8)
    w.run(asm("v_add_f32_e64 v3, v1, v2 mul:2\nv_mul_f32_e64 v4, v5, v2 mul:2\nv_mul_f32_e64 v6, v7, v2 div:2\n"
              "v_cvt_i32_f32_e64 v9, v1 mul:2\ns_endpgm", arch))
    applied = not denorm_out and not (ieee and arch != "gfx1201")
    assert f32(w, 3)[0] == (8.0 if applied else 4.0)
    assert np.signbit(f32(w, 4)[0]) == (not applied) and f32(w, 4)[0] == 0
    assert f32(w, 6)[0] == (0.0 if applied else 1.5 * np.finfo(F32).tiny) and not np.signbit(f32(w, 6)[0])
    assert w.vgpr[9][0] == 3  # an integer result: no output modifier


@pytest.mark.parametrize("arch", ["gfx1100", "gfx942"])
def test_v_swap_b32_writes_both(arch):
    w = wave(arch)
    w.vgpr[3], w.vgpr[4] = np.arange(w.lanes, dtype=U32), np.arange(w.lanes, dtype=U32) + 100
    w.exec = 0xF
    w.run(asm("v_swap_b32 v3, v4\ns_endpgm", arch))
    i = np.arange(w.lanes)
    np.testing.assert_array_equal(w.vgpr[3], np.where(i < 4, i + 100, i))
    np.testing.assert_array_equal(w.vgpr[4], np.where(i < 4, i, i + 100))


def test_ds_storexchg_2addr_rtn_and_stride64():
    w = wave("gfx1100")
    w.lds.mem[:4096] = np.arange(4096, dtype=np.uint32).astype(np.uint8)
    before = w.lds.mem[:4096].copy()
    w.vgpr[2] = np.arange(32, dtype=U32) * 8
    w.vgpr[3], w.vgpr[4] = np.full(32, 0xAAAAAAAA, U32), np.full(32, 0xBBBBBBBB, U32)
    w.exec = 1
    w.run(asm("ds_storexchg_2addr_rtn_b32 v[0:1], v2, v3, v4 offset0:1 offset1:3\n"
              "ds_storexchg_2addr_stride64_rtn_b64 v[6:9], v2, v[3:4], v[3:4] offset0:1 offset1:2\ns_endpgm",
              "gfx1100"))
    word = before.view(U32)
    assert (w.vgpr[0][0], w.vgpr[1][0]) == (word[1], word[3])  # byte 4 and 12 of lane 0's base 0
    assert (w.vgpr[6][0], w.vgpr[7][0], w.vgpr[8][0], w.vgpr[9][0]) == (word[128], word[129], word[256], word[257])
    mem = w.lds.mem[:4096].view(U32)
    assert (mem[1], mem[3], mem[128], mem[129], mem[256]) == (0xAAAAAAAA, 0xBBBBBBBB, 0xAAAAAAAA, 0xBBBBBBBB,
                                                              0xAAAAAAAA)


@pytest.mark.parametrize("arch", ["gfx1100", "gfx1201"])
@pytest.mark.parametrize("branch", ["s_cbranch_vccz", "s_cbranch_vccnz"])
@pytest.mark.parametrize("lo,hi", [(0, 1), (4, 0), (0, 0), (0x80000000, 0xFFFFFFFF)])
def test_vcc_branches_in_wave32_read_vcc_lo_only(arch, branch, lo, hi):
    """A wave32's VCC is VCC_LO (RDNA3 ISA: VCCZ reflects VCC_LO in wave32); VCC_HI is an ordinary SGPR."""
    w = wave(arch)
    w.run(asm(f"s_mov_b32 vcc_lo, {lo:#x}\ns_mov_b32 vcc_hi, {hi:#x}\n{branch} 1\ns_mov_b32 s7, 1\ns_endpgm", arch))
    taken = (lo == 0) == (branch == "s_cbranch_vccz")
    assert w.sgpr[7] == (0 if taken else 1)  # a taken branch skips the move


def test_dpp_row_bcast_on_gfx942():
    """GCN DPP row_bcast:15 (lane 15 of each row to the next row) and row_bcast:31 (lane 31 to rows 2 and 3) with
    the row masks LLVM's reductions use (0xa, 0xc); rows outside the mask keep their value."""
    w = wave("gfx942")
    i = np.arange(64, dtype=U32)
    w.vgpr[1], w.vgpr[2] = i * 10, i * 1000 + 7
    w.vgpr[3] = w.vgpr[4] = np.full(64, 0xDEAD, U32)
    w.run(asm("v_add_u32_dpp v3, v1, v2 row_bcast:15 row_mask:0xa\nv_add_u32_dpp v4, v1, v2 row_bcast:31 row_mask:0xc\n"
              "s_endpgm", "gfx942"))
    row = i // 16
    np.testing.assert_array_equal(w.vgpr[3], np.where(row % 2 == 1, (16 * row - 1) * 10 + i * 1000 + 7, 0xDEAD))
    np.testing.assert_array_equal(w.vgpr[4], np.where(row >= 2, 310 + i * 1000 + 7, 0xDEAD))


@pytest.mark.parametrize("arch", ["gfx1100", "gfx942", "gfx1201"])
def test_buffer_sub_dword_range_check_uses_the_access_size(arch):
    w = wave(arch)
    va = w.vm.alloc(4096)
    w.vm.write(va, np.arange(1, 17, dtype=np.uint8))
    cfg = {"gfx1100": 0x31016FAC, "gfx1201": 0x31016FAC, "gfx942": 0x27000}[arch]  # dword 3: formats, raw
    w.sgpr[0:4] = [va & 0xFFFFFFFF, va >> 32, 16, cfg]  # a 16-byte raw buffer
    w.vgpr[5] = np.arange(w.lanes, dtype=U32)
    load = "buffer_load_ubyte" if arch == "gfx942" else "buffer_load_u8"
    w.run(asm(f"{load} v6, v5, s[0:3], {'null' if arch == 'gfx1201' else 0} offen\ns_endpgm", arch))
    np.testing.assert_array_equal(w.vgpr[6][:20], [*range(1, 17), 0, 0, 0, 0])


@pytest.mark.parametrize("arch", ["gfx1100", "gfx942", "gfx1201"])
def test_buffer_u16_loads_and_byte_stores_at_the_end(arch):
    """A 16-byte raw buffer: u16 loads at offsets 0, 2, ..., 14 return their halfword and 16 on return 0; byte
    stores at offsets 0..15 land, those beyond change nothing."""
    w = wave(arch)
    va = w.vm.alloc(4096)
    w.vm.write(va, np.full(64, 0xEE, np.uint8))
    cfg = {"gfx1100": 0x31016FAC, "gfx1201": 0x31016FAC, "gfx942": 0x27000}[arch]
    w.sgpr[0:4] = [va & 0xFFFFFFFF, va >> 32, 16, cfg]
    i = np.arange(w.lanes, dtype=U32)
    w.vgpr[5], w.vgpr[6], w.vgpr[7] = i, i + 1, i * 2
    ld, st = ("buffer_load_ushort", "buffer_store_byte") if arch == "gfx942" else ("buffer_load_u16", "buffer_store_b8")
    soff = "null" if arch == "gfx1201" else "0"
    w.run(asm(f"{ld} v8, v7, s[0:3], {soff} offen\ns_waitcnt vmcnt(0)\n{st} v6, v5, s[0:3], {soff} offen\n"
              "s_endpgm", arch))
    np.testing.assert_array_equal(w.vgpr[8][:10], [0xEEEE] * 8 + [0, 0])
    np.testing.assert_array_equal(np.frombuffer(w.vm.read(va, 24), np.uint8), [*range(1, 17)] + [0xEE] * 8)


def test_gfx942_returning_atomic_with_vdst_equal_vaddr():
    w = wave("gfx942")
    va = w.vm.alloc(4096)
    w.sgpr[4], w.sgpr[5] = va & 0xFFFFFFFF, va >> 32
    w.vgpr[2], w.vgpr[3] = 0, 1
    w.run(asm("global_atomic_add v2, v2, v3, s[4:5] sc0 sc1\ns_endpgm", "gfx942"))
    assert np.frombuffer(w.vm.read(va, 4), U32)[0] == 64
    np.testing.assert_array_equal(w.vgpr[2], np.arange(64))  # lanes in order get the old values


def _div_scale_rule(n: float, d: float, numerator: bool) -> tuple[float, int]:
    """The ISA manual's V_DIV_SCALE_F32 case list (D0 for the numerator or denominator instance, VCC) with the
    hardware's corrections (emu/pcode/fixups.py, tests/test_fidelity_div_scale.py): a zero operand sets VCC; whether
    1 / S1 and S2 / S1 may be subnormal is read from the exponents; when both may be, the denominator scales down."""
    e = lambda x: np.frexp(np.float32(x))[1] + 126 if x != 0 else 0  # noqa: E731 - biased exponent
    s0 = n if numerator else d
    tiny = np.finfo(F32).tiny
    if n == 0 or d == 0:
        return float("nan"), 1
    if e(n) - e(d) >= 96:
        return (s0 if numerator else s0 * 2.0 ** 64), 1
    if abs(d) < tiny:
        return s0 * 2.0 ** 64, 0
    rcp, quot = e(d) >= 253, e(n) + 126 <= e(d)
    if rcp and quot:
        return (s0 if numerator else s0 * 2.0 ** -64), 1
    if rcp:
        return s0 * 2.0 ** -64, 0
    if quot:
        return (s0 * 2.0 ** 64 if numerator else s0), 1
    if e(n) <= 23:
        return s0 * 2.0 ** 64, 0
    return s0, 0


def test_div_scale_cases_of_the_manual():
    cases = [(1.0, 0.0), (0.0, 1.0), (2.0 ** 100, 2.0 ** -30), (1.0, 1e-40), (1.0, 2.0 ** 127), (1e-38, 3.0),
             (2.0 ** -120, 2.0 ** 10), (6.0, 3.0), (2.0 ** -110, 2.0 ** -3)]
    w = wave("gfx1100")
    k = len(cases)
    w.exec = (1 << k) - 1
    w.vgpr[1][:k] = np.array([c[0] for c in cases], F32).view(U32)
    w.vgpr[2][:k] = np.array([c[1] for c in cases], F32).view(U32)
    w.run(asm("v_div_scale_f32 v3, vcc_lo, v1, v2, v1\ns_mov_b32 s10, vcc_lo\n"
              "v_div_scale_f32 v4, vcc_lo, v2, v2, v1\ns_mov_b32 s11, vcc_lo\ns_endpgm", "gfx1100"))
    for i, (n, d) in enumerate(cases):
        n, d = float(F32(n)), float(F32(d))
        for reg, sreg, numerator in ((3, 10, True), (4, 11, False)):
            want, vcc = _div_scale_rule(n, d, numerator)
            got = float(f32(w, reg)[i])
            assert (got == F32(want) or np.isnan(want) and np.isnan(got)), (n, d, numerator, got, want)
            assert w.sgpr[sreg] >> i & 1 == vcc, (n, d, numerator)


def _div_scale_f64_rule(s0: float, s1: float, s2: float) -> tuple[float, int]:
    """V_DIV_SCALE_F64 as the ISA manual's formula gives it (D0, VCC) for sources S0 (the instance's value), S1 the
    denominator and S2 the numerator: numpy f64 arithmetic; a denormal is nonzero with a zero exponent field. With
    the hardware's corrections, as _div_scale_rule's."""
    f = np.float64
    ex = lambda x: int(np.array(x, f).view(np.uint64)) >> 52 & 0x7FF  # noqa: E731 - exponent field
    den = lambda x: x != 0 and ex(x) == 0  # noqa: E731
    rcp, quot = ex(s1) >= 2045, ex(s2) + 1022 <= ex(s1)
    with np.errstate(all="ignore"):
        up, down = float(np.ldexp(f(s0), 128)), float(np.ldexp(f(s0), -128))
    if s2 == 0 or s1 == 0:
        return float("nan"), 1
    if ex(s2) - ex(s1) >= 768:
        return (up if s0 == s1 else s0), 1
    if den(s1):
        return up, 0
    if rcp and quot:
        return (down if s0 == s1 else s0), 1
    if rcp:
        return down, 0
    if quot:
        return (up if s0 == s2 else s0), 1
    return (up if ex(s2) <= 53 else s0), 0


DIV_SCALE_F64_CASES = [
    (1.0, 0.0), (0.0, 1.0),  # zero denominator / numerator: NaN
    (2.0 ** 1000, 2.0 ** -300),  # quotient near the top of the range
    (2.0 ** -300, 3 * 5e-324), (1.0, 3 * 5e-324),  # denormal denominator (the second: quotient beyond the range)
    (1.0, 2.0 ** 1023), (-3.5, -1.5 * 2.0 ** 1023),  # denormal reciprocal with a denormal / normal quotient
    (2.0 ** 60, 2.0 ** 1023),
    (2.0 ** -1000, 2.0 ** 100), (-(2.0 ** -1060), 7.0),  # quotient that would be denormal
    (2.0 ** -1020, 3.0),  # tiny numerator
    (6.0, 3.0), (-1.25, 1e300),  # nothing to scale
    (np.inf, 1.0), (1.0, np.inf), (-np.inf, -np.inf), (np.nan, 1.0), (1.0, np.nan),
]


@pytest.mark.parametrize("arch", ["gfx1100", "gfx942"])
def test_div_scale_f64_cases_of_the_manual(arch):
    """Both instances clang emits (S0 = numerator, S0 = denominator) per lane against the manual's formula with the
    hardware's corrections."""
    w = wave(arch)
    k = len(DIV_SCALE_F64_CASES)
    w.exec = (1 << k) - 1
    for reg, col in ((0, 0), (2, 1)):
        v = np.array([c[col] for c in DIV_SCALE_F64_CASES], np.float64).view(U32).reshape(k, 2)
        w.vgpr[reg][:k], w.vgpr[reg + 1][:k] = v[:, 0], v[:, 1]
    vcc, mov = VCC[arch], "s_mov_b32 s{}, vcc_lo"  # the low 32 lanes hold every case
    w.run(asm(f"v_div_scale_f64 v[4:5], {vcc}, v[0:1], v[2:3], v[0:1]\n{mov.format(10)}\n"
              f"v_div_scale_f64 v[6:7], {vcc}, v[2:3], v[2:3], v[0:1]\n{mov.format(11)}\ns_endpgm", arch))
    for i, (n, d) in enumerate(DIV_SCALE_F64_CASES):
        for reg, sreg, s0 in ((4, 10, n), (6, 11, d)):
            want, want_vcc = _div_scale_f64_rule(s0, d, n)
            got = float((w.vgpr[reg].astype(np.uint64) | w.vgpr[reg + 1].astype(np.uint64) << np.uint64(32))
                        .view(np.float64)[i])
            assert got == want or np.isnan(want) and np.isnan(got), (arch, n, d, s0, got, want)
            assert w.sgpr[sreg] >> i & 1 == want_vcc, (arch, n, d, s0)


def _two_over_pi_bits(n: int) -> int:
    """floor(2/pi * 2**n): pi by the Gauss-Legendre iteration in decimal arithmetic."""
    decimal.getcontext().prec = n // 3 + 40
    D = decimal.Decimal
    a, b, t, p = D(1), D(1) / D(2).sqrt(), D(1) / D(4), D(1)
    for _ in range(12):
        a, b, t, p = (a + b) / 2, (a * b).sqrt(), t - p * ((a - b) / 2) ** 2, p * 2
    pi = (a + b) ** 2 / (4 * t)
    return int(D(2) / pi * (D(2) ** n))


@pytest.mark.parametrize("arch", ["gfx1100", "gfx942"])
def test_trig_preop_segments_of_two_over_pi(arch):
    """Segment i of 2/pi: its bits 53*i+1 .. 53*(i+1) (after `shift` = 53*i + max(0, exp - 1077)), scaled."""
    from fractions import Fraction
    w = wave(arch)
    xs = [1.0, 2.0 ** 600, 2.0 ** 1000]
    table = _two_over_pi_bits(1201)  # the hardware's 1201 bits; zeros after them
    for x in xs:
        w.vgpr[0] = np.full(w.lanes, x).view(np.uint64).astype(U32)
        w.vgpr[1] = np.full(w.lanes, x).view(np.uint64) >> np.uint64(32)
        w.vgpr[2] = np.arange(w.lanes, dtype=U32) % 5
        w.run(asm("v_trig_preop_f64 v[4:5], v[0:1], v2\ns_endpgm", arch))
        got = (w.vgpr[4].astype(np.uint64) | w.vgpr[5].astype(np.uint64) << np.uint64(32)).view(np.float64)
        e = int(np.frexp(x)[1]) + 1022
        for i in range(5):
            shift = 53 * i + max(0, e - 1077)
            seg = ((table << shift) >> 1148) & ((1 << 53) - 1)
            scale = -53 - shift + (128 if e >= 1968 else 0)
            assert Fraction(float(got[i])) == Fraction(seg) * Fraction(2) ** scale, (x, i)


@pytest.mark.parametrize("arch", ["gfx1100", "gfx942"])
def test_sin_cos_reduce_large_revolutions(arch):
    """v_sin_f32 / v_cos_f32 take revolutions: 132000.25 revolutions is a quarter turn (the hardware reduces the
    argument before scaling by 2*pi)."""
    w = wave(arch)
    turns = np.arange(w.lanes) % 8 / 8.0  # exact eighths
    x = (np.array([0, 1, 17, 255, 4096, 132000, -132001, 1048000] * 8)[:w.lanes] + turns).astype(F32)
    w.vgpr[1] = x.view(U32)
    w.run(asm("v_sin_f32 v2, v1\nv_cos_f32 v3, v1\ns_endpgm", arch))
    np.testing.assert_allclose(f32(w, 2), np.sin(2 * np.pi * turns), atol=2e-6)
    np.testing.assert_allclose(f32(w, 3), np.cos(2 * np.pi * turns), atol=2e-6)


def test_vinterp_reads_the_quads_parameter_lanes():
    """v_interp_p10_f32 D = P10 * I + P0 and v_interp_p2_f32 D = P20 * J + S2, P0 / P10 / P20 from lanes 0 / 1 / 2
    of the lane's quad (as lds_param_load leaves them); neg on the parameter source and clamp apply."""
    w = wave("gfx1100")
    p = np.linspace(-2, 2, 32).astype(F32)
    ij, b = np.linspace(0.1, 3.2, 32).astype(F32), np.linspace(-5, 9, 32).astype(F32)
    w.vgpr[1], w.vgpr[2], w.vgpr[3] = p.view(U32), ij.view(U32), b.view(U32)
    w.run(asm("v_interp_p10_f32 v4, v1, v2, v1 wait_exp:0\nv_interp_p2_f32 v5, -v1, v2, v3 clamp\ns_endpgm",
              "gfx1100"))
    q = np.arange(32) & ~3
    np.testing.assert_array_equal(f32(w, 4), (p[q + 1].astype(np.float64) * ij + p[q]).astype(F32))
    np.testing.assert_array_equal(f32(w, 5), np.clip((-p[q + 2].astype(np.float64) * ij + b).astype(F32), 0, 1))


def test_vinterp_f16_forms_read_f16_parameters():
    """v_interp_p10_f16_f32 D.f32 = P10 * I + P0 with f16 P0 / P10 from lanes 0 / 1 of the quad, rounded once to f32;
    v_interp_p2_f16_f32 D.f16 = f16(f32(P20 * J + S2)) with f16 P20 from lane 2 (the manual's formula: the f32 fma
    result rounded to nearest f16)."""
    w = wave("gfx1100")
    p = np.linspace(-3, 5, 32).astype(np.float16)
    ij, b = np.linspace(0.1, 3.3, 32).astype(F32), np.linspace(-7, 11, 32).astype(F32)
    w.vgpr[1], w.vgpr[2], w.vgpr[3] = p.view(np.uint16).astype(U32), ij.view(U32), b.view(U32)
    w.vgpr[5] = np.full(32, 0xDEAD0000, U32)
    w.run(asm("v_interp_p10_f16_f32 v4, v1, v2, v1 wait_exp:0\nv_interp_p2_f16_f32 v5, v1, v2, v3\ns_endpgm",
              "gfx1100"))
    q = np.arange(32) & ~3
    pd = p.astype(np.float64)
    np.testing.assert_array_equal(f32(w, 4), (pd[q + 1] * ij + pd[q]).astype(F32))
    want = (pd[q + 2] * ij + b).astype(F32).astype(np.float16)
    np.testing.assert_array_equal((w.vgpr[5] & 0xFFFF).astype(np.uint16).view(np.float16), want)


def test_vopc_dpp_row_controls_in_wave64_on_gfx11():
    """row_share / row_xmask (gfx11 has no row_bcast: llvm-mc rejects it) on compares of a wave64."""
    from emu.amd import Wave
    w = Wave("gfx1100", 64)
    i = np.arange(64)
    a, b = (i % 7).astype(U32), (i % 5).astype(U32)
    w.vgpr[1], w.vgpr[2] = a, b
    w.run(asm("v_cmp_eq_u32_dpp vcc, v1, v2 row_share:3 row_mask:0xf bank_mask:0xf\ns_mov_b64 s[4:5], vcc\n"
              "v_cmp_eq_u32_e64_dpp s[0:1], v1, v2 row_xmask:1 row_mask:0xf bank_mask:0xf\ns_endpgm",
              "gfx1100", "wavefrontsize64"))

    def mask(x):
        return sum(1 << int(k) for k in np.flatnonzero(x))
    assert int(w.sgpr[4]) | int(w.sgpr[5]) << 32 == mask(a[(i & ~15) | 3] == b)
    assert int(w.sgpr[0]) | int(w.sgpr[1]) << 32 == mask(a[(i & ~15) | ((i & 15) ^ 1)] == b)


@pytest.mark.parametrize("tier", ["ref", "interp", "jit"])
def test_reserved_dpp_0x142_reads_each_rows_lane_0_on_gfx11(monkeypatch, tier):
    """DPP control 0x142 (CDNA's row_bcast15, reserved on RDNA: llvm-mc-19 rejects row_bcast for gfx11, so the word
    is v_cmp_eq_u32_dpp vcc, v0, v0 row_share:0 ... bound_ctrl:1 with the control patched) runs on hardware:
    tinygrad's hardware-confirmed vector (test_dpp, wave64 gfx11) has lanes 0, 16, 32, 48 equal and 1, 15, 31, 47,
    63 not, as each row's lane 0 read; hwemu follows that (emu.amd.exec.lanes) where it used to fault."""
    from emu.amd import Wave
    monkeypatch.setenv("HWEMU_TIER", tier)
    # llvm-mc-19 -mcpu=gfx1100 -mattr=+wavefrontsize64 gives fa00947c 005009ff; dpp_ctrl [16:8] 0x150 -> 0x142
    word = bytes.fromhex("fa00947c" "004209ff")
    w = Wave("gfx1100", 64)
    w.vgpr[0] = np.arange(64, dtype=U32)
    w.run(word + bytes.fromhex("0000b0bf"))
    assert w.vcc == sum(1 << k for k in (0, 16, 32, 48))


def _flushed(x: np.ndarray) -> np.ndarray:
    """f32 values with denormals replaced by zero of their sign."""
    bits = x.view(U32)
    return np.where(bits & U32(0x7F800000) == 0, bits & U32(0x80000000), bits).view(F32)


@pytest.mark.skipif(not opencl.available(), reason="clang-19 and ld.lld-19 are needed to build kernels")
@pytest.mark.parametrize("arch", ["gfx1100", "gfx942"])
def test_kernel_that_flushes_f32_denormals_runs_natively(arch, monkeypatch):
    """A kernel built with f32 denormals flushed (tinygrad's assembly matmul's descriptor, clang's
    -cl-denorms-are-zero) runs in native code, which flushes denormal sources and results of f32 ops to zero of
    their sign as MODE.FP_DENORM says: the product of flushed sources, rounded, then flushed."""
    from test_kernels import result, to_buffers

    from emu.amd import GPU
    monkeypatch.setenv("HWEMU_TIER", "jit")
    monkeypatch.setenv("HWEMU_STATS", "1")
    src = ("kernel void k(global float *o, global const float *a, global const float *b) {\n"
           "  int i = get_global_id(0); o[i] = a[i] * b[i]; }")
    r = np.random.default_rng(3)
    tiny = np.finfo(F32).tiny
    a = np.concatenate([tiny * r.uniform(-1, 1, 64), tiny * r.uniform(-4, 4, 64), r.standard_normal(128)]).astype(F32)
    b = np.concatenate([r.uniform(1, 8, 64), r.uniform(0.01, 1, 64), r.standard_normal(128) * 1e-30]).astype(F32)
    gpu = GPU(arch)
    prog = gpu.load(opencl.compile_cl(src, arch, "-O3", ("-cl-denorms-are-zero",)))
    bufs = to_buffers([np.zeros(256, F32), a, b], gpu.alloc, gpu.write)
    stats = gpu.launch(prog, "k", grid=(4,), block=(64,), args=bufs)
    want = _flushed(_flushed(a) * _flushed(b))
    assert np.count_nonzero((a * b != 0) & (want == 0)) > 50  # the flushing shows
    np.testing.assert_array_equal(result(gpu, bufs[0], want).view(U32), want.view(U32))
    assert stats.native == stats.wave_instructions > 0, "every wave-instruction ran in native code"
