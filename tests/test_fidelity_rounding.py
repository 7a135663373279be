"""MODE.FP_ROUND for f64 arithmetic and conversions (issue 13): FP_ROUND[1:0] rounds single-precision results,
[3:2] half- and double-precision ones (AMDGPUUsage FLOAT_ROUND_MODE_32 / FLOAT_ROUND_MODE_16_64; 0 nearest even,
1 toward +inf, 2 toward -inf, 3 toward zero). A conversion rounds by its result's field: LLVM's
llvm.fptrunc.round to f16 sets FP_ROUND[3:2] around v_cvt_f16_f32. Expected values: the exact result (Fractions)
and its neighbours in the result's type."""
from __future__ import annotations

import shutil
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_wave import asm, wave

from emu.pcode.floats import fma

pytestmark = pytest.mark.skipif(not shutil.which("llvm-mc-19"), reason="llvm-mc-19 is needed to assemble snippets")
F64 = st.floats(min_value=-2.0 ** 60, max_value=2.0 ** 60, allow_nan=False, width=64)
SET_ROUND = "s_setreg_imm32_b32 hwreg(HW_REG_MODE, 0, 4), {:#x}\n"  # every family has it (gfx942: no s_round_mode)


def directed(exact: Fraction, rm: int, dt) -> float:
    """The value of type dt that rounding mode rm (0 nearest even, 1 up, 2 down, 3 toward zero) gives `exact`."""
    c = dt(float(exact))
    near = [np.nextafter(c, dt(-np.inf)), c, np.nextafter(c, dt(np.inf))]
    down = max((v for v in near if Fraction(float(v)) <= exact), key=float)
    up = min((v for v in near if Fraction(float(v)) >= exact), key=float)
    if rm == 0:
        return float(dt(float(exact))) if dt is np.float64 else _nearest(exact, down, up)
    return float({1: up, 2: down, 3: down if exact >= 0 else up}[rm])


def sqrt_directed(x: float, rm: int) -> float:
    """sqrt(x) for x >= 0 in mode rm: nearest is numpy's (correctly rounded); up the least value whose square is
    at least x, down and toward zero the largest whose square is at most x."""
    c = np.sqrt(x)
    if rm == 0 or x == 0:
        return float(c)
    cands = [float(np.nextafter(c, -np.inf)), float(c), float(np.nextafter(c, np.inf))]
    if rm == 1:
        return min(v for v in cands if Fraction(v) ** 2 >= Fraction(x))
    return max(v for v in cands if Fraction(v) ** 2 <= Fraction(x))


def _nearest(exact: Fraction, down, up) -> float:
    d, u = exact - Fraction(float(down)), Fraction(float(up)) - exact
    if d != u:
        return float(down if d < u else up)
    return float(down if int(np.asarray(down).view(f"u{np.asarray(down).itemsize}")) % 2 == 0 else up)


def _f64_pair(w, reg: int) -> np.ndarray:
    return (w.vgpr[reg].astype(np.uint64) | w.vgpr[reg + 1].astype(np.uint64) << np.uint64(32)).view(np.float64)


def _put_f64(w, reg: int, x: np.ndarray) -> None:
    u = x.view(np.uint64)
    w.vgpr[reg], w.vgpr[reg + 1] = (u & np.uint64(0xFFFFFFFF)).astype(np.uint32), (u >> np.uint64(32)).astype(np.uint32)


@pytest.mark.parametrize("arch", ["gfx1100", "gfx942"])
@settings(max_examples=12, deadline=None)
@given(rm=st.integers(0, 3), a=st.lists(F64, min_size=64, max_size=64), b=st.lists(F64, min_size=64, max_size=64))
def test_f64_arithmetic_rounds_by_fp_round_3_2(arch, rm, a, b):
    """v_add_f64, v_mul_f64, v_fma_f64, v_sqrt_f64: directed by MODE[3:2]; MODE[1:0] (f32) leaves them nearest
    even."""
    w = wave(arch)
    a, b = np.array(a[:w.lanes]), np.array(b[:w.lanes])
    b[0] = 2.0 ** -60  # 1 + tiny: inexact in every mode
    a[0] = 1.0
    for reg, v in ((2, a), (4, b)):
        _put_f64(w, reg, v)
    sfx = "_e64" if arch == "gfx942" else ""
    w.run(asm(SET_ROUND.format(rm << 2) + f"v_add_f64 v[6:7], v[2:3], v[4:5]\nv_mul_f64 v[8:9], v[2:3], v[4:5]\n"
              f"v_fma_f64 v[10:11], v[2:3], v[4:5], v[2:3]\nv_sqrt_f64{sfx} v[12:13], |v[2:3]|\n"
              + SET_ROUND.format(rm) + "v_add_f64 v[14:15], v[2:3], v[4:5]\ns_endpgm", arch))
    lanes = w.lanes
    for i in range(lanes):
        fa, fb = Fraction(float(a[i])), Fraction(float(b[i]))
        assert float(_f64_pair(w, 6)[i]) == directed(fa + fb, rm, np.float64), i
        assert float(_f64_pair(w, 8)[i]) == directed(fa * fb, rm, np.float64), i
        assert float(_f64_pair(w, 10)[i]) == directed(fa * fb + fa, rm, np.float64), i
        assert float(_f64_pair(w, 14)[i]) == float(a[i] + b[i]), i  # the f32 field does not direct f64
        assert float(_f64_pair(w, 12)[i]) == sqrt_directed(abs(float(a[i])), rm), i
    assert float(_f64_pair(w, 6)[0]) == (1.0 if rm in (0, 2, 3) else float(np.nextafter(1.0, 2.0)))


@pytest.mark.parametrize("arch", ["gfx1100", "gfx942", "gfx1201"])
@pytest.mark.parametrize("rm", [0, 1, 2, 3])
def test_conversions_round_by_their_result_field(arch, rm):
    """v_cvt_f32_f64 / v_cvt_f32_i32 / v_cvt_f32_u32 round by FP_ROUND[1:0]; v_cvt_f16_f32 by [3:2]; with the other
    field set the same conversions stay nearest even; v_cvt_f64_i32 is exact."""
    w = wave(arch)
    r = np.random.default_rng(rm)
    d = r.standard_normal(w.lanes) * 10.0 ** r.integers(-40, 40, w.lanes)
    d[:4] = [1e300, -1e300, 2.0 ** -140 * 1.3, 1 / 3]  # overflow to inf or the largest finite, an f32 subnormal
    i32 = r.integers(-2 ** 31, 2 ** 31, w.lanes).astype(np.int32)
    i32[0], i32[1] = 2 ** 24 + 1, -(2 ** 31 - 1)
    u32 = i32.view(np.uint32)
    f = (r.standard_normal(w.lanes) * 2.0 ** r.integers(-26, 17, w.lanes)).astype(np.float32)
    f[0] = 65519.0  # between the largest f16 and the overflow threshold
    _put_f64(w, 2, d)
    w.vgpr[4], w.vgpr[5], w.vgpr[6] = i32.view(np.uint32), u32, f.view(np.uint32)
    run = ("v_cvt_f32_f64 v10, v[2:3]\nv_cvt_f32_i32 v11, v4\nv_cvt_f32_u32 v12, v5\n"
           "v_cvt_f16_f32 v13, v6\nv_cvt_f64_i32 v[14:15], v4\n")
    w.run(asm(SET_ROUND.format(rm | rm << 2) + run + SET_ROUND.format(rm << 2)
              + "v_cvt_f32_f64 v20, v[2:3]\nv_cvt_f32_i32 v21, v4\n" + SET_ROUND.format(rm)
              + "v_cvt_f16_f32 v23, v6\ns_endpgm", arch))
    got = lambda reg: w.vgpr[reg].view(np.float32)  # noqa: E731
    half = lambda reg: (w.vgpr[reg] & 0xFFFF).astype(np.uint16).view(np.float16)  # noqa: E731
    for i in range(w.lanes):
        assert float(got(10)[i]) == _to(Fraction(float(d[i])), rm, np.float32), i
        assert float(got(11)[i]) == _to(Fraction(int(i32[i])), rm, np.float32), i
        assert float(got(12)[i]) == _to(Fraction(int(u32[i])), rm, np.float32), i
        assert float(half(13)[i]) == _to(Fraction(float(f[i])), rm, np.float16), i
        assert float(got(20)[i]) == _to(Fraction(float(d[i])), 0, np.float32), i  # [1:0] nearest: f32 nearest
        assert float(got(21)[i]) == _to(Fraction(int(i32[i])), 0, np.float32), i
        assert float(half(23)[i]) == _to(Fraction(float(f[i])), 0, np.float16), i  # [3:2] nearest: f16 nearest
    np.testing.assert_array_equal(_f64_pair(w, 14), i32.astype(np.float64))


def _to(exact: Fraction, rm: int, dt) -> float:
    """directed() with overflow: beyond the largest finite value, the modes that round away give inf."""
    top = Fraction(float(np.finfo(dt).max))
    ulp = top - Fraction(float(np.nextafter(dt(np.finfo(dt).max), dt(0))))
    if abs(exact) > top:
        away = abs(exact) >= top + ulp / 2 if rm == 0 else (rm == 1 and exact > 0) or (rm == 2 and exact < 0)
        return float(np.copysign(np.inf, float(exact))) if away else float(np.copysign(float(top), float(exact)))
    return directed(exact, rm, dt)


@pytest.mark.parametrize("tier", ["interp", "jit"])
def test_tiers_follow_the_reference_under_directed_modes(tier, monkeypatch):
    """A wave entering code with MODE directing f64 and f16 (FP_ROUND[3:2] = 3) and f32 (1): the lean interpreter
    and the LLVM tier (which leaves directed f64 to the reference) give the reference tier's registers."""
    from emu.amd.exec import wave as wave_mod
    code = asm("v_add_f64 v[4:5], v[0:1], v[2:3]\nv_mul_f64 v[6:7], v[0:1], v[2:3]\nv_fma_f64 v[14:15], v[0:1], "
               "v[2:3], v[4:5]\nv_cvt_f32_f64 v8, v[0:1]\nv_cvt_f32_u32 v9, v10\nv_cvt_f16_f32 v11, v12\n"
               "v_add_f32 v13, v10, v12\ns_endpgm", "gfx1100")
    out = {}
    for t in ("ref", tier):
        monkeypatch.setenv("HWEMU_TIER", t)
        w = wave_mod.Wave("gfx1100")
        w.vgpr[:16] = np.random.default_rng(1).integers(0, 1 << 32, (16, w.lanes), dtype=np.uint64).astype(np.uint32)
        w.mode = (w.mode & ~0xF) | 0xD
        w.run(code)
        out[t] = w.vgpr[:16].copy()
    np.testing.assert_array_equal(out[tier], out["ref"])


@pytest.mark.parametrize("arch", ["gfx1100", "gfx942"])
@pytest.mark.parametrize("denorm", [0x0, 0x3, 0xC, 0xF])
def test_conversions_flush_denormals_per_type(arch, denorm):
    """MODE.FP_DENORM: bits [1:0] keep f32 inputs / results, [3:2] f16 and f64 ones. A conversion reads its source
    by the source type's bits and writes its result by the result type's."""
    w = wave(arch)
    n = w.lanes
    d = np.full(n, 2.0 ** -130) * np.linspace(-1, 1, n)  # f32 denormals as f64 values (normal in f64)
    f = (np.full(n, 2.0 ** -130) * np.linspace(-1, 1, n)).astype(np.float32)  # f32 denormals
    e = np.full(n, 2.0 ** -1030) * np.linspace(-1, 1, n)  # f64 denormals
    _put_f64(w, 2, d)
    _put_f64(w, 4, e)
    w.vgpr[6] = f.view(np.uint32)
    w.vgpr[7] = (f * np.float32(2.0 ** 112)).view(np.uint32)  # f16 denormals once converted
    w.run(asm(SET_ROUND.format(0) + f"s_setreg_imm32_b32 hwreg(HW_REG_MODE, 4, 4), {denorm:#x}\n"
              "v_cvt_f32_f64 v10, v[2:3]\nv_cvt_f64_f32 v[12:13], v6\nv_cvt_f32_f64 v11, v[4:5]\n"
              "v_cvt_f16_f32 v14, v7\ns_endpgm", arch))
    keep32_in, keep32_out, keep16_in, keep16_out = (bool(denorm >> k & 1) for k in range(4))

    def flushed(x, keep):
        x = np.asarray(x)
        return np.where(keep | (np.abs(x) >= np.finfo(x.dtype).tiny), x, np.copysign(x.dtype.type(0), x))
    np.testing.assert_array_equal(w.vgpr[10].view(np.float32), flushed(d.astype(np.float32), keep32_out))
    np.testing.assert_array_equal(_f64_pair(w, 12), flushed(f, keep32_in).astype(np.float64))
    np.testing.assert_array_equal(w.vgpr[11].view(np.float32), np.copysign(np.float32(0), flushed(e, keep16_in)))
    h = flushed(f * np.float32(2.0 ** 112), keep32_in).astype(np.float16)
    np.testing.assert_array_equal((w.vgpr[14] & 0xFFFF).astype(np.uint16).view(np.float16), flushed(h, keep16_out))


def _round_narrow(x: Fraction, dt) -> int:
    """The bits of `x` rounded to nearest-even in `dt` (float16/float32), from exact rationals (finite results)."""
    near = dt(float(x))  # within one step of the answer
    cands = [np.nextafter(near, dt(-np.inf)), near, np.nextafter(near, dt(np.inf))]
    cands = [c for c in cands if np.isfinite(c)]
    best = min(cands, key=lambda c: (abs(Fraction(float(c)) - x), int(c.view(_UINT[dt])) & 1))
    return int(best.view(_UINT[dt]))


_UINT = {np.float32: np.uint32, np.float16: np.uint16}


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.sampled_from([np.float32, np.float16]), st.data())
def test_narrow_fma_rounds_once(dt, data):
    """floats.fma for binary16/32 (the pcode's fma of every V_FMA*/V_FMAC*): one rounding of the exact a * b + c,
    also where the binary64 sum it takes as a shortcut is inexact and exactly a midpoint, or in the subnormal range."""
    width = 32 if dt is np.float32 else 16
    fin = st.floats(width=width, allow_nan=False, allow_infinity=False)
    a, b, c = (np.array([data.draw(fin)], dt) for _ in range(3))
    exact = Fraction(float(a[0])) * Fraction(float(b[0])) + Fraction(float(c[0]))
    with np.errstate(all="ignore"):
        got = fma(a, b, c)
    if abs(exact) < Fraction(float(np.finfo(dt).max)):
        assert int(got.view(_UINT[dt])[0]) == _round_narrow(exact, dt) or exact == 0


def test_narrow_fma_inexact_midpoint():
    """(1 + 2**-12)**2 = 1 + 2**-11 + 2**-24 is a binary32 midpoint; +-2**-80 decides the rounding, which the binary64
    sum loses."""
    a = np.array([1 + 2 ** -12] * 2, np.float32)
    got = fma(a, a, np.array([2 ** -80, -(2 ** -80)], np.float32)).view(np.uint32)
    assert [hex(x) for x in got] == ["0x3f801001", "0x3f801000"]
