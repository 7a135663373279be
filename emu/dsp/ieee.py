"""IEEE 754 binary32/binary64 arithmetic with exception flags and rounding modes, for the float semantics.

The vendor semantics compute with the host's C floats and leave rounding and the exception flags to the
host's floating environment; here every operation is rounded once from the exact (rational) result in the
rounding mode `rnd` (USR.FPRND's encoding: 0 to nearest even, 1 toward zero, 2 down, 3 up; the core reads it
from USR for each instruction, the `:chop` forms force 1), and reports its flags into `S.fpflags` (the core
ORs them into USR's sticky bits after the instruction). Underflow is signalled for an inexact result that is
tiny before rounding, as qemu-hexagon's softfloat is configured. Values are Python floats (binary32 ones
exactly representable); a signaling NaN operand is an `SNaN`.
"""
from __future__ import annotations

import math
import operator
import struct
from fractions import Fraction

INVALID, DIVBYZERO, OVERFLOW, UNDERFLOW, INEXACT = 1, 2, 4, 8, 16
FLAGS = {"FE_INVALID": INVALID, "FE_DIVBYZERO": DIVBYZERO, "FE_OVERFLOW": OVERFLOW, "FE_UNDERFLOW": UNDERFLOW,
         "FE_INEXACT": INEXACT}
NEAREST, TOWARD_ZERO, DOWN, UP = 0, 1, 2, 3  # USR.FPRND
_FORMAT = {32: (24, -126, 127), 64: (53, -1022, 1023)}  # precision, least and greatest normal exponent
_MAX = {b: math.ldexp((1 << p) - 1, emax - p + 1) for b, (p, _, emax) in _FORMAT.items()}
_MIN_NORMAL = {32: Fraction(2) ** -126, 64: Fraction(2) ** -1022}
_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}
_CMP = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, ">": operator.gt, "<=": operator.le,
        ">=": operator.ge}
_pf, _pI, _pd, _pQ = (struct.Struct(c).pack for c in ("<f", "<I", "<d", "<Q"))
_uf, _uI, _ud, _uQ = (struct.Struct(c).unpack for c in ("<f", "<I", "<d", "<Q"))


class SNaN(float):
    """A signaling NaN operand (any arithmetic on it raises invalid)."""


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


def _away(rnd: int, neg: bool) -> bool:
    """Whether a directed rounding mode moves an inexact magnitude up (away from zero)."""
    return rnd == UP and not neg or rnd == DOWN and neg


def round_to(S, q: Fraction, bits: int, rnd: int = NEAREST) -> float:
    """The exact value q rounded to binary32/64 in rounding mode rnd, raising inexact, overflow and
    underflow."""
    if q == 0:
        return 0.0
    p, emin, emax = _FORMAT[bits]
    neg = q < 0
    n, d = abs(q.numerator), q.denominator
    e = n.bit_length() - d.bit_length() - 1  # 2**e < |q| < 2**(e+2)
    if n << max(0, -e - 1) >= d << max(0, e + 1):
        e += 1  # now 2**e <= |q| < 2**(e+1)
    quantum = max(e, emin) - p + 1  # the weight of the last mantissa bit (subnormals: fixed at the bottom)
    m, rest = divmod(n << max(0, -quantum), d << max(0, quantum))
    if rest:
        if rnd == NEAREST:
            m += 2 * rest > (d << max(0, quantum)) or (2 * rest == (d << max(0, quantum)) and m & 1)
        else:
            m += _away(rnd, neg)
        S.fpflags |= INEXACT | (UNDERFLOW if e < emin else 0)
    if m and (m.bit_length() + quantum - 1 > emax):
        S.fpflags |= OVERFLOW | INEXACT
        big = math.inf if rnd == NEAREST or _away(rnd, neg) else _MAX[bits]
        return -big if neg else big
    r = math.ldexp(m, quantum)
    return -r if neg else r


def _zero_sum(op: str, a: float, b: float, rnd: int) -> float:
    """The IEEE sign of an exact zero result: a sum of opposite zeros or of x and -x is -0 only when rounding
    down; a product or quotient has the sign of its operands'."""
    r = _OPS[op](a, b)
    if op in "+-" and rnd == DOWN and (math.copysign(1.0, a) != math.copysign(1.0, b)) == (op == "+"):
        return -0.0
    return r


def fop(S, op: str, a: float, b: float, bits: int, rnd: int = NEAREST) -> float:
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
        return _zero_sum(op, a, b, rnd)
    return round_to(S, exact, bits, rnd)


def fcmp(S, op: str, a: float, b: float) -> int:
    """Comparisons are quiet (as qemu-hexagon's): only a signaling NaN raises invalid."""
    if _nan(S, a, b):
        return int(op == "!=")
    return int(_CMP[op](a, b))


def i2f(S, x: int, bits: int, rnd: int = NEAREST) -> float:
    return round_to(S, Fraction(x), bits, rnd)


def f2f(S, x: float, bits: int, rnd: int = NEAREST) -> float:
    if _nan(S, x):
        return math.nan
    if math.isinf(x):
        return x
    return round_to(S, Fraction(x), bits, rnd) if x else x


_TO_INT = {NEAREST: round, TOWARD_ZERO: math.trunc, DOWN: math.floor, UP: math.ceil}  # round(): ties to even


def f2i(S, x: float, bits: int, signed: bool, rnd: int = TOWARD_ZERO) -> int:
    """Float to integer, rounded in mode rnd (a C cast truncates: the default); NaN and out-of-range raise
    invalid and give all-ones for NaN, the saturated bound otherwise."""
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
    v = _TO_INT[rnd](x)
    if v < lo or v > hi:
        S.fpflags |= INVALID
        return hi if v > hi else lo
    if v != x:
        S.fpflags |= INEXACT
    return v


def _to_int(bits: int, signed: bool):
    return lambda S, x, rnd: f2i(S, x, bits, signed, rnd)


def _to_float(bits: int):
    return lambda S, x, rnd: i2f(S, x, bits, rnd) if isinstance(x, int) else f2f(S, x, bits, rnd)


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


_EPSILON = Fraction(1, 1 << 1200)  # below half a unit in the last place of any binary32 result


def internal_fmafx(S, a: float, b: float, c: float, scale: int, rnd: int = NEAREST) -> float:
    """(a*b+c) * 2**scale rounded once to binary32 (fmaf when scale is 0). With a positive scale, a subnormal
    addend c counts only as a sticky bit of its sign (an amount below any bit of the result), as the vendor's
    internal_fmafx does (its copy in QEMU's fma_emu.c): sffma_sc serves the division and square-root
    sequences, which scale their operands up away from the subnormal range."""
    if _nan(S, a, b, c):
        return math.nan
    if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(c)):
        p = fop(S, "*", a, b, 64, rnd)
        return fop(S, "+", p, c, 32, rnd) if p == p else p
    if scale > 0 and c and fpclassify(c, 32) == 3:
        sticky = _EPSILON if c > 0 else -_EPSILON
        return round_to(S, Fraction(a) * Fraction(b) * Fraction(2) ** scale + sticky, 32, rnd)
    exact = (Fraction(a) * Fraction(b) + Fraction(c)) * Fraction(2) ** scale
    if exact == 0:
        return _zero_sum("+", a * b, c, rnd)  # binary32 products are exact in binary64
    return round_to(S, exact, 32, rnd)


def internal_mpyf(S, a: float, b: float, rnd: int = NEAREST) -> float:
    return fop(S, "*", a, b, 32, rnd)


# ---- the special cases of the division and square-root sequences (the vendor's arch_sf_recip_common and
# arch_sf_invsqrt_common, simulator helpers outside the vendor files; their behaviour as QEMU's arch.c has it).
# Operands and results are binary32 bit patterns (C ints); the result tuple is (whether the sequence goes on,
# then the new values of the arguments the vendor text passes by reference).
_ONE, _NAN32 = 0x3F800000, -1  # 1.0; the all-ones NaN the fixups produce


def _bits(x: int) -> tuple[int, int, int]:
    """sign, biased exponent field, mantissa field of binary32 bits."""
    x &= 0xFFFFFFFF
    return x >> 31, x >> 23 & 0xFF, x & 0x7FFFFF


def _signed32(x: int) -> int:
    return ((x & 0xFFFFFFFF) ^ 0x80000000) - 0x80000000


def _scalbn(S, x: int, k: int, rnd: int) -> int:
    """x * 2**k rounded to binary32 (x finite and nonzero)."""
    return _signed32(fUNFLOAT(round_to(S, Fraction(fFLOAT(x)) * Fraction(2) ** k, 32, rnd)))


def _snan_raises(S, *xs: int) -> None:
    if any(e == 0xFF and m and not m >> 22 for _, e, m in map(_bits, xs)):
        S.fpflags |= INVALID


def fSF_RECIP_COMMON(S, n: int, d: int, o: int, adjust: int, rnd: int = NEAREST) -> tuple:
    """The numerator n and denominator d of n/d, prepared for the reciprocal sequence: special operands give
    their quotient's numerator over 1 (or NaN), the sequence stops (0); otherwise both are scaled by a power of
    two so that neither the reciprocal nor the quotient leaves the normal range, `adjust` says how (1)."""
    (ns, ne, nm), (ds, de, dm) = _bits(n), _bits(d)
    n_nan, d_nan = ne == 0xFF and nm, de == 0xFF and dm
    n_inf, d_inf = ne == 0xFF and not nm, de == 0xFF and not dm
    n_zero, d_zero = not (ne or nm), not (de or dm)
    sign_inf = _signed32(0xFF800000 if ns ^ ds else 0x7F800000)
    if n_nan or d_nan:
        _snan_raises(S, *(x for x, nan in ((n, n_nan), (d, d_nan)) if nan))
        return 0, _NAN32, _NAN32, _NAN32, adjust
    if (n_inf and d_inf) or (n_zero and d_zero):
        S.fpflags |= INVALID
        return 0, _NAN32, _NAN32, _NAN32, adjust
    if d_zero:
        if not n_inf:
            S.fpflags |= DIVBYZERO
        return 0, sign_inf, _ONE, _ONE, adjust
    if d_inf or n_zero:
        return 0, _signed32((ns ^ ds) << 31), _ONE, _ONE, adjust
    if n_inf:
        return 0, sign_inf, _ONE, _ONE, adjust
    gap = ne - de + 127
    adjust, scale_n, scale_d = 0, 0, 0
    if gap <= 23:  # the quotient near underflow, or inexact
        adjust, scale_n, scale_d = 0x80, 64, -64
    elif gap > 254 - 24:  # the quotient near overflow
        adjust, scale_n, scale_d = 0x40, -32, 32
    elif ne <= 25:
        scale_n = scale_d = 64
    elif de <= 1:
        scale_n = scale_d = 32
    elif de > 252:
        scale_n = scale_d = -32
    if scale_n:
        d, n = _scalbn(S, d, scale_d, rnd), _scalbn(S, n, scale_n, rnd)
    return 1, n, d, 0, adjust


def fSF_INVSQRT_COMMON(S, n: int, o: int, adjust: int, rnd: int = NEAREST) -> tuple:
    """The radicand n prepared for the inverse-square-root sequence: NaN, negative, infinite and zero operands
    give their result directly (0); a small one is scaled by 2**64 (adjust 0xe0) (1)."""
    s, e, m = _bits(n)
    if e == 0xFF and m:
        _snan_raises(S, n)
        return 0, _NAN32, _NAN32, adjust
    if s and (e or m):  # below zero (-0 is not)
        S.fpflags |= INVALID
        return 0, _NAN32, _NAN32, adjust
    if e == 0xFF:
        return 0, _signed32(0xFF800000), _signed32(0xFF800000), adjust  # -inf, as the vendor helper has it
    if not (e or m):
        return 0, n, _ONE, adjust
    if (e if e else 1) <= 24:
        return 1, _scalbn(S, n, 64, rnd), 0, 0xE0
    return 1, n, 0, 0


def fDF_MPY_HH(S, a: float, b: float, acc: int, rnd: int = NEAREST) -> float:
    """The last step of the vendor's dfmpy sequence (its internal_mpyhh, as QEMU's fma_emu.c has it): the
    product of the high 21 mantissa bits of a and b, shifted up 32 bits, plus the partial sum accumulated in
    acc's bits 63:1 (bit 0 is a sticky bit), in units of 2**(exp_a + exp_b - 2118), rounded once. Zero, NaN
    and infinite operands give a*b; a subnormal one an inexact zero."""
    if not (math.isfinite(a) and math.isfinite(b)) or a == 0 or b == 0 or a != a or b != b:
        return fop(S, "*", a, b, 64, rnd)
    (sa, ea, ma), (sb, eb, mb) = (_bits64(x) for x in (a, b))
    sticky = _EPSILON if acc & 1 or not (ea and eb) else 0
    exact = sticky
    if ea and eb:
        high = ((ma | 1 << 52) >> 32) * ((mb | 1 << 52) >> 32)
        exact += Fraction(((acc & 0xFFFFFFFFFFFFFFFF) >> 1) + (high << 32)) * Fraction(2) ** (ea + eb - 2118)
    return round_to(S, -exact if sa ^ sb else exact, 64, rnd)


def _bits64(x: float) -> tuple[int, int, int]:
    """sign, biased exponent field, mantissa field of a binary64."""
    b = fUNDOUBLE(x)
    return b >> 63, b >> 52 & 0x7FF, b & ((1 << 52) - 1)
