"""IEEE 754 binary32/binary64 arithmetic with exception flags, for the float semantics.

The vendor semantics compute with the host's C floats and leave the exception flags to the host's floating
environment; here every operation is rounded once to nearest-even from the exact (rational) result and
reports its flags into `S.fpflags` (the core ORs them into USR's sticky bits after the instruction).
Values are Python floats (binary32 ones exactly representable); a signaling NaN operand is an `SNaN`.
"""
from __future__ import annotations

import math
import operator
import struct
from fractions import Fraction

INVALID, DIVBYZERO, OVERFLOW, UNDERFLOW, INEXACT = 1, 2, 4, 8, 16
FLAGS = {"FE_INVALID": INVALID, "FE_DIVBYZERO": DIVBYZERO, "FE_OVERFLOW": OVERFLOW, "FE_UNDERFLOW": UNDERFLOW,
         "FE_INEXACT": INEXACT}
_MIN_NORMAL = {32: Fraction(2) ** -126, 64: Fraction(2) ** -1022}
_MIN_SUBNORMAL = {32: 2.0 ** -149, 64: 5e-324}
_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}
_CMP = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, ">": operator.gt, "<=": operator.le,
        ">=": operator.ge}
_pf, _pI, _pd, _pQ = (struct.Struct(c).pack for c in ("<f", "<I", "<d", "<Q"))
_uf, _uI, _ud, _uQ = (struct.Struct(c).unpack for c in ("<f", "<I", "<d", "<Q"))


class SNaN(float):
    """A signaling NaN operand (any arithmetic on it raises invalid)."""


def f32(x: float) -> float:
    """Round a binary64 to binary32 (nearest even), overflowing to infinity."""
    try:
        return _uf(_pf(x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def fFLOAT(bits: int) -> float:
    bits &= 0xFFFFFFFF
    if bits & 0x7F800000 == 0x7F800000 and bits & 0x7FFFFF and not bits & 0x400000:
        return SNaN("nan")
    return _uf(_pI(bits))[0]


def fUNFLOAT(x: float) -> int:
    return 0xFFFFFFFF if x != x else _uI(_pf(x))[0]


def fDOUBLE(bits: int) -> float:
    bits &= 0xFFFFFFFFFFFFFFFF
    if bits >> 52 & 0x7FF == 0x7FF and bits & ((1 << 52) - 1) and not bits >> 51 & 1:
        return SNaN("nan")
    return _ud(_pQ(bits))[0]


def fUNDOUBLE(x: float) -> int:
    return 0xFFFFFFFFFFFFFFFF if x != x else _uQ(_pd(x))[0]


def _nan(S, *xs: float) -> bool:
    """Whether an operand is a NaN (a signaling one raises invalid)."""
    if any(isinstance(x, SNaN) for x in xs):
        S.fpflags |= INVALID
    return any(x != x for x in xs)


def _sticky(q: Fraction) -> float:
    """A nonzero rational to binary64 keeping the inexactness in the last bit, so that a second rounding to
    binary32 rounds as the exact value would."""
    e = q.numerator.bit_length() - q.denominator.bit_length()
    m = abs(q) * Fraction(2) ** (52 - e)
    n = m.numerator // m.denominator
    if n * m.denominator != m.numerator:
        n |= 1
    return math.copysign(math.ldexp(n, e - 52), q)


def round_to(S, q: Fraction, bits: int) -> float:
    """The exact value q rounded to binary32/64, raising inexact, overflow and underflow."""
    if q == 0:
        return 0.0
    try:
        r = float(q) if bits == 64 else f32(_sticky(q))
    except OverflowError:
        r = math.copysign(math.inf, q)
    if math.isinf(r):
        S.fpflags |= OVERFLOW | INEXACT
    elif Fraction(r) != q:
        S.fpflags |= INEXACT | (UNDERFLOW if abs(q) < _MIN_NORMAL[bits] else 0)
    return r


def fop(S, op: str, a: float, b: float, bits: int) -> float:
    """a op b (+ - * /) in binary32/64."""
    if _nan(S, a, b):
        return math.nan
    if math.isinf(a) or math.isinf(b) or (op == "/" and b == 0):
        invalid = ((op in "+-" and math.isinf(a) and math.isinf(b) and (a == b) != (op == "+"))
                   or (op == "*" and (a == 0 or b == 0)) or (op == "/" and (a == b == 0 or
                                                                          (math.isinf(a) and math.isinf(b)))))
        if invalid:
            S.fpflags |= INVALID
            return math.nan
        if op == "/" and b == 0:
            S.fpflags |= DIVBYZERO
            return math.copysign(math.inf, a) * math.copysign(1.0, b)
        return _OPS[op](a, b)  # infinite operands: the result is exact
    exact = _OPS[op](Fraction(a), Fraction(b))
    if exact == 0:
        return _OPS[op](a, b)  # the IEEE sign of an exact zero
    return round_to(S, exact, bits)


def fcmp(S, op: str, a: float, b: float) -> int:
    """Comparisons are quiet (as qemu-hexagon's): only a signaling NaN raises invalid."""
    if _nan(S, a, b):
        return int(op == "!=")
    return int(_CMP[op](a, b))


def i2f(S, x: int, bits: int) -> float:
    return round_to(S, Fraction(x), bits)


def f2f(S, x: float, bits: int) -> float:
    if _nan(S, x):
        return math.nan
    if math.isinf(x):
        return x
    return round_to(S, Fraction(x), bits) if x else x


def f2i(S, x: float, bits: int, signed: bool, chop: bool = True) -> int:
    """Float to integer: truncating (chop) or to nearest even; NaN and out-of-range raise invalid and give
    all-ones for NaN, the saturated bound otherwise."""
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    if _nan(S, x):
        S.fpflags |= INVALID
        return -1 if signed else hi
    if math.isinf(x):
        S.fpflags |= INVALID
        return hi if x > 0 else lo
    if not signed and math.copysign(1.0, x) < 0:  # negative (even -0.0, or rounding to 0): invalid, as qemu's
        S.fpflags |= INVALID
        return 0
    v = math.trunc(x) if chop else round(x)
    if v < lo or v > hi:
        S.fpflags |= INVALID
        return hi if v > hi else lo
    if v != x:
        S.fpflags |= INEXACT
    return v


def _to_int(bits: int, signed: bool):
    return lambda S, x, chop=False: f2i(S, x, bits, signed, chop)


def _to_float(bits: int):
    return lambda S, x, chop=False: i2f(S, x, bits) if isinstance(x, int) else f2f(S, x, bits)


conv_sf_to_4u = conv_df_to_4u = _to_int(32, False)
conv_sf_to_4s = conv_df_to_4s = _to_int(32, True)
conv_sf_to_8u = conv_df_to_8u = _to_int(64, False)
conv_sf_to_8s = conv_df_to_8s = _to_int(64, True)
conv_4u_to_sf = conv_4s_to_sf = conv_8u_to_sf = conv_8s_to_sf = conv_df_to_sf = _to_float(32)
conv_4u_to_df = conv_4s_to_df = conv_8u_to_df = conv_8s_to_df = conv_sf_to_df = _to_float(64)


def fpclassify(x: float, bits: int) -> int:
    """C's FP_NAN 0, FP_INFINITE 1, FP_ZERO 2, FP_SUBNORMAL 3, FP_NORMAL 4 for a binary32/64 value."""
    if x != x:
        return 0
    if math.isinf(x):
        return 1
    if x == 0:
        return 2
    return 3 if abs(x) < _MIN_NORMAL[bits] else 4


def fDF_ISNORMAL(bits: int) -> int:
    return int(fpclassify(fDOUBLE(bits), 64) == 4)


def fDF_ISDENORM(bits: int) -> int:
    return int(fpclassify(fDOUBLE(bits), 64) == 3)


def isnan(x: float) -> int:
    return int(x != x)


def isinf(x: float) -> int:
    return int(math.isinf(x))


def isfinite(x: float) -> int:
    return int(math.isfinite(x))


def isunordered(a: float, b: float) -> int:
    return int(a != a or b != b)


def _fminmax(pick):
    def f(S, a: float, b: float) -> float:  # C fmin/fmax: a quiet NaN operand loses to a number
        _nan(S, a, b)
        if a != a:
            return b if b == b else math.nan
        if b != b:
            return a
        return pick(a, b)
    return f


fmax = fmaxf = _fminmax(max)
fmin = fminf = _fminmax(min)


def internal_fmafx(S, a: float, b: float, c: float, scale: int) -> float:
    """(a*b+c) * 2**scale rounded once to binary32 (fmaf when scale is 0)."""
    if _nan(S, a, b, c):
        return math.nan
    if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(c)):
        p = fop(S, "*", a, b, 64)
        return fop(S, "+", p, c, 32) if p == p else p
    exact = (Fraction(a) * Fraction(b) + Fraction(c)) * Fraction(2) ** scale
    if exact == 0:
        return a * b + c  # binary32 products are exact in binary64: IEEE's sign of an exact zero
    return round_to(S, exact, 32)


def internal_mpyf(S, a: float, b: float) -> float:
    return fop(S, "*", a, b, 32)
