"""The SALU float ops of gfx1201 (s_add_f32, s_mul_f32, s_fmac_f32, s_cmp_*_f32, s_cvt_*; issue 13) honour MODE
like VALU: a denormal source reads as zero of its sign unless MODE.FP_DENORM keeps denormal inputs of its type
(bit 0 f32, bit 2 f16), a denormal result is flushed unless it keeps denormal outputs (bit 1 f32, bit 3 f16), and
MODE.FP_ROUND directs the rounding. Expected values: numpy and the exact results (Fractions)."""
from __future__ import annotations

import itertools
import shutil
from fractions import Fraction

import numpy as np
import pytest
from test_fidelity_rounding import directed
from test_wave import asm, wave

pytestmark = pytest.mark.skipif(not shutil.which("llvm-mc-19"), reason="llvm-mc-19 is needed to assemble snippets")
F32 = np.float32
TINY = np.finfo(F32).tiny
VALUES = [F32(x) for x in (TINY * 0.75, -TINY * 0.5, TINY * 2 ** -20, 0.0, -0.0, 1.5, -TINY, TINY * 1.25, 3.0e-5)]
OPS = ("s_add_f32 s10, s0, s1\ns_mul_f32 s11, s0, s1\ns_fmac_f32 s12, s0, s1\ns_cmp_eq_f32 s0, 0\n"
       "s_cselect_b32 s13, 1, 0\ns_cvt_f16_f32 s14, s0\ns_sub_f32 s15, s0, s1\ns_endpgm")


def _flush(x: F32, keep: bool) -> F32:
    return x if keep or abs(x) >= TINY else F32(np.copysign(F32(0), x))


def _bits(x) -> int:
    return int(np.asarray(x).view(np.uint32 if np.asarray(x).dtype == F32 else np.uint16))


@pytest.mark.parametrize("denorm", [0x0, 0x1, 0x2, 0x3, 0xC, 0xF])
def test_salu_float_ops_flush_denormals_per_mode(denorm):
    code = asm(f"s_denorm_mode {denorm:#x}\n" + OPS, "gfx1201")
    keep_in, keep_out = bool(denorm & 1), bool(denorm & 2)
    keep16_out = bool(denorm & 8)
    for a, b in itertools.product(VALUES, VALUES):
        w = wave("gfx1201")
        w.sgpr[0], w.sgpr[1], w.sgpr[12] = _bits(a), _bits(b), _bits(F32(TINY * 0.25))
        w.run(code)
        fa, fb, fc = _flush(a, keep_in), _flush(b, keep_in), _flush(F32(TINY * 0.25), keep_in)
        with np.errstate(all="ignore"):
            want = {10: fa + fb, 11: fa * fb, 15: fa - fb,
                    12: F32(directed(Fraction(float(fa)) * Fraction(float(fb)) + Fraction(float(fc)), 0, F32))}
        for reg, v in want.items():
            assert int(w.sgpr[reg]) == _bits(_flush(F32(v), keep_out)), (reg, a, b)
        assert int(w.sgpr[13]) == int(fa == 0), (a, b)  # a flushed denormal compares equal to 0
        h = np.float16(fa)  # f32 -> f16: the f16 result flushes by bit 3
        h = h if keep16_out or abs(h) >= np.finfo(np.float16).tiny else np.copysign(np.float16(0), h)
        assert int(w.sgpr[14]) & 0xFFFF == _bits(np.float16(h)), (a, b)


@pytest.mark.parametrize("rm", [1, 2, 3])
def test_salu_float_ops_round_per_mode(rm):
    """s_add_f32 / s_mul_f32 / s_fmac_f32 under s_round_mode: the exact result's neighbour the mode picks."""
    r = np.random.default_rng(rm)
    a = (r.standard_normal(16) * 10.0 ** r.integers(-5, 5, 16)).astype(F32)
    b = (r.standard_normal(16) * 10.0 ** r.integers(-5, 5, 16)).astype(F32)
    a[0], b[0] = 1.0, 2.0 ** -30
    code = asm(f"s_round_mode {rm:#x}\ns_add_f32 s10, s0, s1\ns_mul_f32 s11, s0, s1\ns_mov_b32 s12, s0\n"
               "s_fmac_f32 s12, s0, s1\ns_endpgm", "gfx1201")
    for x, y in zip(a, b, strict=True):
        w = wave("gfx1201")
        w.sgpr[0], w.sgpr[1] = _bits(x), _bits(y)
        w.run(code)
        fx, fy = Fraction(float(x)), Fraction(float(y))
        got = [float(np.uint32(w.sgpr[i]).view(F32)) for i in (10, 11, 12)]
        assert got == [directed(fx + fy, rm, F32), directed(fx * fy, rm, F32), directed(fx * fy + fx, rm, F32)]
