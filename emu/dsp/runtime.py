"""What the generated Python semantics call: C integer wrap-around, IEEE single/double helpers, and the
stateless primitives of library.PRIMITIVES (bit counting, 128-bit arithmetic, float conversions).

Integer values are Python ints held in their type's range; F32 values are Python floats exactly
representable in binary32 (each operation is rounded once: the binary64 result of +, -, *, / on binary32
inputs rounds to the same binary32 as the exact result); vectors are numpy uint8 arrays.
"""
from __future__ import annotations

import math
import struct

import numpy as np


def _wrap(bits: int, signed: bool):
    mask, half = (1 << bits) - 1, 1 << (bits - 1)
    if signed:
        return lambda x: ((x + half) & mask) - half
    return lambda x: x & mask


s8, u8, s16, u16, s32, u32, s64, u64, s128, u128 = (
    _wrap(b, s) for b in (8, 16, 32, 64, 128) for s in (True, False))


def cdiv(a: int, b: int) -> int:
    """C division: truncates toward zero; x/0 is undefined in C (the hardware has no integer divide): 0."""
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def cmod(a: int, b: int) -> int:
    return a - b * cdiv(a, b) if b else a


def shl(x: int, n: int, bits: int) -> int:
    """x << n for a shift count C leaves undefined (negative or >= the width): x86 masks the count."""
    return x << (n & (bits - 1))


def shr(x: int, n: int, bits: int) -> int:
    return x >> (n & (bits - 1))


# ---- IEEE ----
_pf, _pI, _pd, _pQ = struct.Struct("<f").pack, struct.Struct("<I").pack, struct.Struct("<d").pack, struct.Struct(
    "<Q").pack
_uf, _uI, _ud, _uQ = (struct.Struct(c).unpack for c in ("<f", "<I", "<d", "<Q"))


def f32(x: float) -> float:
    """Round to binary32 (nearest even), overflowing to infinity."""
    try:
        return _uf(_pf(x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def fdiv(a: float, b: float) -> float:
    if b == 0:
        if a == 0 or a != a:
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def fFLOAT(bits: int) -> float:
    return _uf(_pI(bits & 0xFFFFFFFF))[0]


def fUNFLOAT(x: float) -> int:
    return 0xFFFFFFFF if x != x else _uI(_pf(x))[0]


def fDOUBLE(bits: int) -> float:
    return _ud(_pQ(bits & 0xFFFFFFFFFFFFFFFF))[0]


def fUNDOUBLE(x: float) -> int:
    return 0xFFFFFFFFFFFFFFFF if x != x else _uQ(_pd(x))[0]


def ftoi(x: float, bits: int, signed: bool, chop: bool = True) -> int:
    """A C float -> integer conversion (truncating); NaN and out-of-range saturate as the hardware's do."""
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    if x != x:
        return hi if signed else hi
    if math.isinf(x):
        return hi if x > 0 else lo
    v = math.trunc(x) if chop else round(x)
    return min(max(v, lo), hi)


def _conv_to_int(bits: int, signed: bool):
    return lambda x, chop=False: ftoi(x, bits, signed, chop)


conv_sf_to_4u = conv_df_to_4u = _conv_to_int(32, False)
conv_sf_to_4s = conv_df_to_4s = _conv_to_int(32, True)
conv_sf_to_8u = conv_df_to_8u = _conv_to_int(64, False)
conv_sf_to_8s = conv_df_to_8s = _conv_to_int(64, True)


def conv_4u_to_sf(x: int, chop: bool = False) -> float:
    return f32(float(x))


conv_4s_to_sf = conv_8u_to_sf = conv_8s_to_sf = conv_df_to_sf = conv_4u_to_sf


def conv_4u_to_df(x: int, chop: bool = False) -> float:
    return float(x)


conv_4s_to_df = conv_8u_to_df = conv_8s_to_df = conv_sf_to_df = conv_4u_to_df


def fpclassify(x: float) -> int:
    if x != x:
        return 0
    if math.isinf(x):
        return 1
    if x == 0:
        return 2
    return 3 if abs(x) < 2.2250738585072014e-308 else 4


def fDF_ISNORMAL(bits: int) -> int:
    return int(fpclassify(fDOUBLE(bits)) == 4)


def fDF_ISDENORM(bits: int) -> int:
    return int(fpclassify(fDOUBLE(bits)) == 3)


def isnan(x: float) -> int:
    return int(x != x)


def isinf(x: float) -> int:
    return int(math.isinf(x))


def isfinite(x: float) -> int:
    return int(math.isfinite(x))


def isunordered(a: float, b: float) -> int:
    return int(a != a or b != b)


def _fminmax(pick):
    def f(a: float, b: float) -> float:  # C fmin/fmax: a NaN operand loses to a number
        if a != a:
            return b
        if b != b:
            return a
        return pick(a, b)
    return f


fmax = fmaxf = _fminmax(max)
fmin = fminf = _fminmax(min)


def fFMAF(a: float, b: float, c: float) -> float:
    """fmaf: a*b+c rounded once to binary32 (exact in Python's rationals)."""
    if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(c)):
        return f32(a * b + c)
    from fractions import Fraction
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:
        return a * b + c  # the product of two binary32 is exact in binary64: IEEE's sign of zero
    return f32(_round_fraction(exact))


def fSFMPY(a: float, b: float) -> float:
    return f32(a * b)


def _round_fraction(q) -> float:
    """A rational to binary64 without double rounding into binary32 (keep 30 extra bits, sticky)."""
    from fractions import Fraction
    sign = -1 if q < 0 else 1
    q = abs(q)
    e = q.numerator.bit_length() - q.denominator.bit_length()
    scale = Fraction(2) ** (52 - e)
    m = q * scale
    n = m.numerator // m.denominator
    if n * m.denominator != m.numerator:
        n |= 1  # sticky: the binary32 rounding sees that the value is inexact
    return sign * math.ldexp(n, e - 52)


# ---- bits ----
def _count_leading_ones(bits: int):
    return lambda x: bits - (~x & ((1 << bits) - 1)).bit_length()


count_leading_ones_2, count_leading_ones_4, count_leading_ones_8 = (_count_leading_ones(b) for b in (16, 32, 64))
fCL1_2, fCL1_4, fCL1_8 = count_leading_ones_2, count_leading_ones_4, count_leading_ones_8


def _count_ones(bits: int):
    return lambda x: (x & ((1 << bits) - 1)).bit_count()


count_ones_2, count_ones_4, count_ones_8 = (_count_ones(b) for b in (16, 32, 64))
fCOUNTONES_2, fCOUNTONES_4, fCOUNTONES_8 = count_ones_2, count_ones_4, count_ones_8


def _reverse(bits: int):
    return lambda x: int(format(x & ((1 << bits) - 1), f"0{bits}b")[::-1], 2)


reverse_bits_4, reverse_bits_8 = _reverse(32), _reverse(64)
fBREV_4, fBREV_8 = reverse_bits_4, reverse_bits_8
_brev16 = _reverse(16)


def fbrev(x: int) -> int:
    """Bit-reversed addressing: the low 16 bits of the address reversed."""
    return (x & 0xFFFF0000) | _brev16(x)


def fINTERLEAVE(odd: int, even: int) -> int:
    out = 0
    for i in range(32):
        out |= ((even >> i) & 1) << (2 * i) | ((odd >> i) & 1) << (2 * i + 1)
    return out


def fDEINTERLEAVE(mixed: int) -> int:
    even = odd = 0
    for i in range(32):
        even |= ((mixed >> (2 * i)) & 1) << i
        odd |= ((mixed >> (2 * i + 1)) & 1) << i
    return odd << 32 | even


def fCARRY_FROM_ADD(a: int, b: int, c: int) -> int:
    return ((a & 0xFFFFFFFFFFFFFFFF) + (b & 0xFFFFFFFFFFFFFFFF) + c) >> 64 & 1


def fADD128(a: int, b: int) -> int:
    return s128(a + b)


def fSUB128(a: int, b: int) -> int:
    return s128(a - b)


def fAND128(a: int, b: int) -> int:
    return a & b


def fSHIFTL128(a: int, n: int) -> int:
    return s128(a << n)


def fSHIFTR128(a: int, n: int) -> int:
    return a >> n


def fCAST8S_16S(a: int) -> int:
    return a


def fCAST16S_8S(a: int) -> int:
    return s64(a)


def fNOTQ(q: np.ndarray) -> np.ndarray:
    return ~q


def lanes(v: np.ndarray, dtype) -> np.ndarray:
    return v.view(dtype)


def fCRNDN(a: int, n: int) -> int:
    """Convergent rounding of a at bit n, shifted down: ties (exactly half) go to the even result."""
    if n == 0:
        return a
    below = a & ((1 << (n - 1)) - 1)
    inc = ((a >> n) & 1) << (n - 1) if below == 0 else 1 << (n - 1)
    return s32((a + inc) >> n)
