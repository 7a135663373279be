"""IEEE binary32/64 operations in LLVM IR with emu.dsp.ieee's results and exception flags, rounding to nearest.

Values are LLVM floats / doubles holding the exact bit pattern (a signaling NaN stays one until an operation
consumes it, as ieee's `SNaN`); a NaN's payload never escapes (fUNFLOAT gives all ones for any NaN). Results
are the host's round-to-nearest-even operations; the flags come from error-free transformations in binary64:
binary32 +, -, * (and the product in a fused multiply-add) are computed exactly or with their exact error
(TwoSum), binary32 results are rounded once more from binary64 (correctly: 53 >= 2 * 24 + 2 for one operation;
a fused multiply-add is first rounded to odd). Only the operations below are here; the rest stay interpreted.
`F` takes the builder and `flag(cond, bits)`, which ORs ieee flag bits into the instruction's flags when cond.
"""
from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir as ll

from emu.dsp.ieee import INEXACT, INVALID, OVERFLOW, UNDERFLOW

F32, F64, I1, I32, I64 = ll.FloatType(), ll.DoubleType(), ll.IntType(1), ll.IntType(32), ll.IntType(64)
_BITS = {32: (F32, I32, 23), 64: (F64, I64, 52)}  # float type, same-width integer, mantissa bits
_MIN_NORMAL32 = 2.0 ** -126


def float_type(bits: int) -> ll.Type:
    return _BITS[bits][0]


class F:
    """Float operations at a builder's position."""

    def __init__(self, b: ll.IRBuilder, flag: Callable[[ll.Value, int], None]):
        self.b, self.flag = b, flag

    # ---- classification ----
    def bits_of(self, x: ll.Value) -> ll.Value:
        return self.b.bitcast(x, I32 if x.type == F32 else I64)

    def isnan(self, x: ll.Value) -> ll.Value:
        return self.b.fcmp_unordered("uno", x, x)

    def isinf(self, x: ll.Value) -> ll.Value:
        return self.b.fcmp_ordered("==", self.fabs(x), ll.Constant(x.type, float("inf")))

    def finite(self, x: ll.Value) -> ll.Value:
        return self.b.fcmp_ordered("<", self.fabs(x), ll.Constant(x.type, float("inf")))

    def snan(self, x: ll.Value) -> ll.Value:
        """x is a signaling NaN (exponent all ones, mantissa nonzero, quiet bit clear)."""
        b = self.b
        _, ity, mant = _BITS[64 if x.type == F64 else 32]
        v = b.and_(self.bits_of(x), ll.Constant(ity, (1 << (ity.width - 1)) - 1))  # without the sign
        inf = ll.Constant(ity, ((1 << (ity.width - 1 - mant)) - 1) << mant)
        quiet = ll.Constant(ity, 1 << (mant - 1))
        return b.and_(b.icmp_unsigned(">", v, inf), b.icmp_unsigned("<", v, b.or_(inf, quiet)))

    def fabs(self, x: ll.Value) -> ll.Value:
        ity = I32 if x.type == F32 else I64
        return self.b.bitcast(self.b.and_(self.bits_of(x), ll.Constant(ity, (1 << (ity.width - 1)) - 1)), x.type)

    def consume(self, *xs: ll.Value) -> ll.Value:
        """An operation reads xs: a signaling NaN among them raises invalid. Whether any is a NaN."""
        b = self.b
        sn, nan = self.snan(xs[0]), self.isnan(xs[0])
        for x in xs[1:]:
            sn, nan = b.or_(sn, self.snan(x)), b.or_(nan, self.isnan(x))
        self.flag(sn, INVALID)
        return nan

    def quiet(self, x: ll.Value) -> ll.Value:
        """x with a NaN made quiet (ieee's `-x` of an SNaN is a plain NaN)."""
        return self.b.select(self.isnan(x), ll.Constant(x.type, float("nan")), x)

    def fpclassify(self, x: ll.Value) -> ll.Value:
        """C's FP_NAN 0, FP_INFINITE 1, FP_ZERO 2, FP_SUBNORMAL 3, FP_NORMAL 4."""
        b = self.b
        a = self.fabs(x)
        least = 2.0 ** -126 if x.type == F32 else 2.0 ** -1022
        r = b.select(b.fcmp_ordered("<", a, ll.Constant(x.type, least)), ll.Constant(I32, 3), ll.Constant(I32, 4))
        r = b.select(b.fcmp_ordered("==", a, ll.Constant(x.type, 0.0)), ll.Constant(I32, 2), r)
        r = b.select(self.isinf(x), ll.Constant(I32, 1), r)
        return b.select(self.isnan(x), ll.Constant(I32, 0), r)

    # ---- arithmetic ----
    def two_sum_error(self, a: ll.Value, c: ll.Value, s: ll.Value) -> ll.Value:
        """The exact error of s = RN(a + c) (TwoSum; finite operands)."""
        b = self.b
        cv = b.fsub(s, a)
        av = b.fsub(s, cv)
        return b.fadd(b.fsub(a, av), b.fsub(c, cv))

    def arith(self, op: str, x: ll.Value, y: ll.Value) -> ll.Value:
        """x op y (binary32 + - *, binary64 + -), both of one type, as ieee.fop in round-to-nearest."""
        b = self.b
        assert x.type == F32 or op != "*", "a binary64 product's exactness needs a fused multiply-add"
        nan_in = self.consume(x, y)
        finite = b.and_(self.finite(x), self.finite(y))
        if x.type == F32:
            dx, dy = b.fpext(x, F64), b.fpext(y, F64)
            d = b.fadd(dx, dy) if op == "+" else b.fsub(dx, dy) if op == "-" else b.fmul(dx, dy)
            r = b.fptrunc(d, F32)
            err = self.two_sum_error(dx, dy if op == "+" else b.fneg(dy), d) if op in "+-" else ll.Constant(F64, 0.0)
            inexact = b.or_(b.fcmp_unordered("!=", b.fpext(r, F64), d),
                            b.fcmp_unordered("!=", err, ll.Constant(F64, 0.0)))
            if op == "*":  # sums of binary32 values below the normal range are exact: only products underflow
                tiny = b.fcmp_ordered("<", self.fabs(d), ll.Constant(F64, _MIN_NORMAL32))
                self.flag(b.and_(b.and_(finite, inexact), tiny), UNDERFLOW)
        else:
            r = b.fadd(x, y) if op == "+" else b.fsub(x, y)
            err = self.two_sum_error(x, y if op == "+" else b.fneg(y), r)
            inexact = b.fcmp_unordered("!=", err, ll.Constant(F64, 0.0))
        over = b.and_(finite, self.isinf(r))
        self.flag(over, OVERFLOW | INEXACT)
        self.flag(b.and_(finite, inexact), INEXACT)
        self.flag(b.and_(b.not_(nan_in), self.isnan(r)), INVALID)  # inf - inf, 0 * inf
        return r

    def fma32(self, x: ll.Value, y: ll.Value, z: ll.Value) -> ll.Value:
        """x * y + z rounded once to binary32 (ieee.internal_fmafx with scale 0)."""
        b = self.b
        nan_in = self.consume(x, y, z)
        finite = b.and_(b.and_(self.finite(x), self.finite(y)), self.finite(z))
        p = b.fmul(b.fpext(x, F64), b.fpext(y, F64))  # exact
        dz = b.fpext(z, F64)
        s = b.fadd(p, dz)
        err = b.select(finite, self.two_sum_error(p, dz, s), ll.Constant(F64, 0.0))
        # round to odd in binary64, then to nearest in binary32: one correct rounding of the exact sum
        sb = b.bitcast(s, I64)
        zero = ll.Constant(F64, 0.0)
        below = b.icmp_unsigned("!=", b.fcmp_ordered("<", err, zero), b.fcmp_ordered("<", s, zero))  # |exact| < |s|
        inexact64 = b.fcmp_unordered("!=", err, zero)
        trunc = b.select(b.and_(inexact64, below), b.sub(sb, ll.Constant(I64, 1)), sb)
        odd = b.bitcast(b.select(inexact64, b.or_(trunc, ll.Constant(I64, 1)), trunc), F64)
        r = b.fptrunc(odd, F32)
        inexact = b.and_(finite, b.or_(inexact64, b.fcmp_unordered("!=", b.fpext(r, F64), s)))
        tiny = b.fcmp_ordered("<", self.fabs(odd), ll.Constant(F64, _MIN_NORMAL32))
        self.flag(b.and_(finite, self.isinf(r)), OVERFLOW | INEXACT)
        self.flag(inexact, INEXACT)
        self.flag(b.and_(inexact, tiny), UNDERFLOW)
        self.flag(b.and_(b.not_(nan_in), self.isnan(r)), INVALID)
        return r

    def compare(self, op: str, x: ll.Value, y: ll.Value) -> ll.Value:
        """Quiet comparison (i1): only a signaling NaN raises invalid; != is true for NaNs."""
        self.consume(x, y)
        if op == "!=":
            return self.b.fcmp_unordered("!=", x, y)
        return self.b.fcmp_ordered(op, x, y)

    def minmax(self, pick: str, x: ll.Value, y: ll.Value) -> ll.Value:
        """C fmax/fmin as ieee's: a NaN operand loses to a number; otherwise the first unless the second is
        strictly greater (max) or smaller (min)."""
        b = self.b
        self.consume(x, y)
        second = b.fcmp_ordered(">" if pick == "max" else "<", y, x)
        r = b.select(second, y, x)
        r = b.select(self.isnan(y), x, r)
        return self.quiet(b.select(self.isnan(x), y, r))

    # ---- conversions ----
    def widen(self, x: ll.Value) -> ll.Value:
        """binary32 -> binary64 as a C conversion in ieee's model: exact, a signaling NaN stays signaling."""
        b = self.b
        return b.select(self.snan(x), b.bitcast(ll.Constant(I64, 0x7FF4000000000000), F64), b.fpext(x, F64))

    def extend(self, x: ll.Value) -> ll.Value:
        """binary32 -> binary64 as ieee.f2f (exact; a signaling NaN raises invalid and gives a quiet one)."""
        self.consume(x)
        return self.quiet(self.b.fpext(x, F64))

    def narrow(self, x: ll.Value) -> ll.Value:
        """binary64 -> binary32 (ieee.f2f)."""
        b = self.b
        self.consume(x)
        r = b.fptrunc(x, F32)
        finite = self.finite(x)
        inexact = b.and_(finite, b.fcmp_unordered("!=", b.fpext(r, F64), x))
        self.flag(b.and_(finite, self.isinf(r)), OVERFLOW | INEXACT)
        self.flag(inexact, INEXACT)
        self.flag(b.and_(inexact, b.fcmp_ordered("<", self.fabs(x), ll.Constant(F64, _MIN_NORMAL32))), UNDERFLOW)
        return self.quiet(r)

    def from_int(self, v: ll.Value, signed: bool, ty: ll.Type) -> ll.Value:
        """An integer to binary32/64 (ieee.i2f): inexact when its odd part has more bits than the mantissa."""
        b = self.b
        r = b.sitofp(v, ty) if signed else b.uitofp(v, ty)
        mag = b.select(b.icmp_signed("<", v, ll.Constant(v.type, 0)), b.neg(v), v) if signed else v
        tz = b.call(self._intrinsic(f"llvm.cttz.i{v.type.width}", v.type, [v.type, I1]), [mag, ll.Constant(I1, 0)])
        odd = b.lshr(mag, b.select(b.icmp_unsigned("==", mag, ll.Constant(v.type, 0)), ll.Constant(v.type, 0), tz))
        precision = 24 if ty == F32 else 53
        if v.type.width > precision:
            self.flag(b.icmp_unsigned("!=", b.lshr(odd, ll.Constant(v.type, precision)), ll.Constant(v.type, 0)),
                      INEXACT)
        return r

    def to_int(self, x: ll.Value, bits: int, signed: bool, nearest: bool) -> ll.Value:
        """binary32/64 to an integer (ieee.f2i): truncated (a C cast, `:chop`) or rounded to nearest even;
        NaN, infinite and out-of-range values raise invalid and saturate (NaN: -1 signed, all ones unsigned), a
        negative value (even -0.0) to an unsigned integer raises invalid and gives 0."""
        b = self.b
        ity = ll.IntType(bits)
        d = x if x.type == F64 else b.fpext(x, F64)
        self.consume(x)
        if nearest:  # to an integral binary64 (ties to even): adding and removing 2**52 rounds off the fraction
            big = ll.Constant(F64, 2.0 ** 52)
            a = self.fabs(d)
            rounded = b.fsub(b.fadd(a, big), big)
            rounded = b.select(b.fcmp_ordered("<", a, big), rounded, a)
            d_int = b.bitcast(b.or_(b.bitcast(rounded, I64), b.and_(b.bitcast(d, I64), ll.Constant(I64, 1 << 63))),
                              F64)
        else:
            d_int = d
        lo, hi = (-(2.0 ** (bits - 1)), 2.0 ** (bits - 1)) if signed else (0.0, 2.0 ** bits)
        lo_i, hi_i = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
        # the integer part in [lo, hi): lo - 1 < d_int where lo - 1 is exact in binary64 (it is not for 64 bits,
        # whose lo is the least binary64 above lo - 1)
        above = (b.fcmp_ordered(">", d_int, ll.Constant(F64, lo - 1.0)) if bits < 64 else
                 b.fcmp_ordered(">=", d_int, ll.Constant(F64, lo)))
        in_range = b.and_(above, b.fcmp_ordered("<", d_int, ll.Constant(F64, hi)))
        nan = self.isnan(d)
        if not signed:
            negative = b.icmp_signed("<", b.bitcast(d, I64), ll.Constant(I64, 0))
            in_range = b.and_(in_range, b.not_(negative))
        safe = b.select(in_range, d_int, ll.Constant(F64, 0.0))
        if signed:
            v = b.fptosi(safe, ity)
            back = b.sitofp(v, F64)
        else:
            v = b.fptoui(safe, ity)
            back = b.uitofp(v, F64)
        sat = b.select(b.fcmp_ordered(">", d, ll.Constant(F64, 0.0)), ll.Constant(ity, hi_i), ll.Constant(ity, lo_i))
        if signed:
            sat = b.select(nan, ll.Constant(ity, -1), sat)
        else:
            sat = b.select(b.or_(nan, b.and_(b.not_(negative), b.fcmp_ordered(">", d, ll.Constant(F64, 0.0)))),
                           ll.Constant(ity, hi_i), ll.Constant(ity, 0))
        self.flag(b.not_(in_range), INVALID)
        self.flag(b.and_(in_range, b.fcmp_unordered("!=", back, d)), INEXACT)
        return b.select(in_range, v, sat)

    def _intrinsic(self, name: str, ret: ll.Type, args: list) -> ll.Function:
        m = self.b.module
        return m.globals.get(name) or ll.Function(m, ll.FunctionType(ret, args), name)
