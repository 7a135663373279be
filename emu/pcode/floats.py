"""Floating-point helpers of the generated code (imported there as `F`): bit views, format changes with rounding
modes, fused multiply-add with a single rounding, classification, the ISA's library functions, and the small
float formats (fp8 bf8 fp6 bf6 fp4). Values as in emu.pcode.runtime: numpy float16/32/64, bfloat16 held in float32.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from emu.pcode.runtime import U64, _m, arr, sx

FDT = {16: np.float16, 32: np.float32, 64: np.float64}
UDT = {16: np.uint16, 32: np.uint32, 64: np.uint64}
MANT = {16: 10, 32: 23, 64: 52}


# ---- floats ------------------------------------------------------------------------------------------------------

def i2f(x, bits: int, bf: bool = False):
    """Raw bits -> float value."""
    a = arr(x)
    if bf:
        return ((a & U64(0xFFFF)).astype(np.uint32) << np.uint32(16)).view(np.float32)
    if bits == 64:
        return a.view(np.float64)
    return a.astype(UDT[bits]).view(FDT[bits])


def f2i(x, bits: int, bf: bool = False):
    """Float value -> raw bits."""
    if bf:
        return (np.asarray(x, np.float32).view(np.uint32) >> np.uint32(16)).astype(U64)
    return np.asarray(x, FDT[bits]).view(UDT[bits]).astype(U64)


def bf16(x):
    """Round float32 values to bfloat16 (nearest even), kept as float32."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    r = (u + U64(0x7FFF) + ((u >> U64(16)) & U64(1))) >> U64(16)
    r = np.where(np.isnan(np.asarray(x, np.float32)), (u >> U64(16)) | U64(0x40), r)
    return ((r & U64(0xFFFF)).astype(np.uint32) << np.uint32(16)).view(np.float32)


def fconv(x, bits: int, bf: bool = False, rm=0, quiet_nans: bool = False):
    """Float -> float of another format; rm: 0 nearest even, 1 +inf, 2 -inf, 3 toward zero. NaNs keep their bits
    (sign, quiet bit, payload) unless quiet_nans, as a conversion instruction returns them."""
    if quiet_nans:
        return quiet(fconv(x, bits, bf, rm), 16 if bf else bits, bf)
    if bf:
        y = bf16(np.asarray(x, np.float32))
    else:
        y = _nan_bits(np.asarray(x), np.asarray(x).astype(FDT[bits]))
    if np.ndim(rm) == 0 and int(rm) == 0:
        return y
    xd, yd = np.asarray(x, np.float64), y.astype(np.float64)
    fin = np.isfinite(xd)
    rm = arr(rm)
    if bf:
        step_dn = i2f(f2i(y, 16, True) - U64(1), 16, True)  # magnitude one ulp smaller
    else:
        step_dn = np.nextafter(y, np.zeros_like(y))
    too_big = fin & (np.abs(yd) > np.abs(xd))
    up = fin & (yd < xd)
    dn = fin & (yd > xd)
    r = np.where((rm == 3) & too_big, step_dn, y)
    if not bf:
        inf = np.array(np.inf, y.dtype)
        r = np.where((rm == 1) & up, np.nextafter(y, inf), r)
        r = np.where((rm == 2) & dn, np.nextafter(y, -inf), r)
    return r.astype(y.dtype)


def _nan_bits(x, y):
    """y with every NaN of x carried over by its bits (sign, quiet bit, payload), as the format change
    allows, instead of the host's conversion, which quiets signaling NaNs."""
    nan = np.isnan(x)
    if not nan.any():
        return y
    sb, db = x.dtype.itemsize * 8, y.dtype.itemsize * 8
    sm, dm = MANT[sb], MANT[db]
    raw = x.view(UDT[sb]).astype(U64)
    mant = raw & U64(_m(sm))
    mant = mant << U64(dm - sm) if dm >= sm else mant >> U64(sm - dm)
    mant = np.where(mant == 0, U64(1 << (dm - 1)), mant)  # payload lost: keep a NaN (quiet)
    out = ((raw >> U64(sb - 1)) << U64(db - 1)) | U64(_m(db - 1 - dm) << dm) | mant
    return np.where(nan, out.astype(UDT[db]).view(FDT[db]), y)


def itof(x, src_bits: int, signed: bool, bits: int, bf: bool = False):
    v = sx(x, src_bits) if signed else arr(x)
    if bf:
        return bf16(np.asarray(v, np.float64).astype(np.float32))
    return np.asarray(v).astype(FDT[bits])


def ftoi(x, bits: int, signed: bool):
    """Float -> integer, truncating, saturating to the type's range; NaN gives 0."""
    lo, hi = (-(1 << bits - 1), (1 << bits - 1) - 1) if signed else (0, _m(bits))
    d = np.asarray(x, np.float64)
    t = np.trunc(np.nan_to_num(d, nan=0.0))
    if bits < 64:
        v = np.clip(t, lo, hi).astype(np.int64)
        return v.view(U64) & U64(_m(bits))
    big = t >= 2.0 ** 63
    v = np.where(big, 0, np.clip(t, lo, min(hi, 2.0 ** 63 - 1))).astype(np.int64).view(U64)
    return np.where(big, U64(_m(64)) if not signed else U64(hi), v) if not signed else v


# binary16/32 fma in binary64: the product is exact and the sum rounds once, so rounding that sum to the narrow type
# is the correctly rounded result unless the sum was inexact and is exactly a midpoint of the narrow type (the low
# mantissa bits below are 1000...0) or lies in the narrow type's subnormal range (biased binary64 exponent 1 ..
# MIN_NORMAL_EXP - 1)
_NARROW = {np.dtype(np.float32): (U64(1 << 28), U64((1 << 29) - 1), U64((1023 - 126) << 52)),
           np.dtype(np.float16): (U64(1 << 41), U64((1 << 42) - 1), U64((1023 - 14) << 52))}
_EXP = U64(0x7FF << 52)


def fma(a, b, c, n=0):
    """a * b + c, times 2**n, rounded once."""
    narrow = _NARROW.get(getattr(a, "dtype", None)) if isinstance(n, int) and n == 0 else None
    if narrow is not None:
        p = np.multiply(a, b, dtype=np.float64)
        s = np.add(p, c, dtype=np.float64)
        v = s.view(U64)
        mid, low, subnormal = narrow
        doubt = ((v & low) == mid) | ((v & _EXP) - U64(1) < subnormal - U64(1))
        if not doubt.any():
            return s.astype(a.dtype)
        bv = s - p  # TwoSum: a sum of two narrow values is often a midpoint, but then it is exact
        if not (doubt & ((p - (s - bv)) + (c - bv) != 0)).any():
            return s.astype(a.dtype)
    a, b, c, n = np.broadcast_arrays(np.asarray(a), np.asarray(b), np.asarray(c), sx(np.asarray(n), 32))
    dt = a.dtype
    if dt == np.float64:
        out = np.empty(a.shape, np.float64)
        for i, (x, y, z, k) in enumerate(zip(a.flat, b.flat, c.flat, n.flat, strict=True)):
            x, y, z = float(x), float(y), float(z)
            if not (math.isfinite(x) and math.isfinite(y) and math.isfinite(z)):
                # a finite product never overflows before the add: finite * finite + inf is that inf
                out.flat[i] = z if math.isfinite(x) and math.isfinite(y) and math.isinf(z) else x * y + z
                continue
            exact = (Fraction(x) * Fraction(y) + Fraction(z)) * Fraction(2) ** int(k)
            try:
                out.flat[i] = float(exact) if exact != 0 else x * y + z
            except OverflowError:
                out.flat[i] = math.inf if exact > 0 else -math.inf
        return out
    # binary16/32: the product is exact in binary64; the sum is rounded to odd (TwoSum error term) so that the
    # final rounding to the narrow type is the single correct rounding
    p = a.astype(np.float64) * b.astype(np.float64)
    c64 = c.astype(np.float64)
    s = p + c64
    bv = s - p
    err = (p - (s - bv)) + (c64 - bv)
    even = (s.view(np.uint64) & U64(1)) == 0
    fix = (err != 0) & np.isfinite(err) & even
    s = np.where(fix, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
    return np.ldexp(s, n).astype(dt)  # exact: |n| is small next to the f64 range


def ldexp(x, n):
    x = np.asarray(x)
    n = np.clip(sx(n, 32), -10000, 10000)
    return np.ldexp(x.astype(np.float64), n).astype(x.dtype) if x.dtype != np.float64 else np.ldexp(x, n)


def exponent(x, bits: int, bf: bool = False):
    raw = f2i(x, bits, bf)
    m = 7 if bf else MANT[bits]
    ebits = (16 if bf else bits) - m - 1
    return (raw >> U64(m)) & U64(_m(ebits))


def mantissa(x):
    x = np.asarray(x)
    return np.frexp(x)[0].astype(x.dtype)


def _quiet_bit(x, bits: int, bf: bool):
    m = 7 if bf else MANT[bits]
    return (f2i(x, bits, bf) >> U64(m - 1)) & U64(1)


def issnan(x, bits: int, bf: bool = False):
    return np.isnan(x) & (_quiet_bit(x, bits, bf) == 0)


def isqnan(x, bits: int, bf: bool = False):
    return np.isnan(x) & (_quiet_bit(x, bits, bf) == 1)


def quiet(x, bits: int, bf: bool = False):
    m = 7 if bf else MANT[bits]
    raw = f2i(x, bits, bf)
    return i2f(np.where(np.isnan(x), raw | U64(1 << (m - 1)), raw), bits, bf)


def isdenorm(x, bits: int, bf: bool = False):
    return (exponent(x, bits, bf) == 0) & (np.asarray(x) != 0)


def is_even(x):
    x = np.asarray(x, np.float64)
    return np.isfinite(x) & (np.fmod(x, 2.0) == 0)


def rsq(x):
    """1 / sqrt(x) rounded once to x's format (computed in binary64)."""
    x = np.asarray(x)
    return (1.0 / np.sqrt(x.astype(np.float64))).astype(x.dtype)


def fract(x):
    x = np.asarray(x)
    return x - np.floor(x)


def _in_f64(fn):
    """A transcendental computed in binary64 and rounded once to the operand's format."""
    def f(x):
        x = np.asarray(x)
        return fn(x.astype(np.float64)).astype(x.dtype)
    return f


exp2, sin, cos = (_in_f64(fn) for fn in (np.exp2, np.sin, np.cos))


def log2(x):
    """log2 in binary64, rounded once; below zero the hardware's default NaN (+qNaN, as the LLVM tier emits it):
    the sign of numpy's NaN there differs between numpy versions (2.4 gives -NaN)."""
    x = np.asarray(x)
    return np.where(x < 0, np.float64(np.nan), np.log2(x.astype(np.float64))).astype(x.dtype)


def pow_(a, b):
    a = np.asarray(a)
    return np.power(a.astype(np.float64), np.asarray(b, np.float64)).astype(a.dtype)


def norm(x, signed: bool):
    """Float -> 16-bit normalized integer (round to nearest, clamped; NaN gives 0)."""
    d = np.nan_to_num(np.asarray(x, np.float64), nan=0.0)
    if signed:
        v = np.rint(np.clip(d, -1.0, 1.0) * 32767.0).astype(np.int64)
    else:
        v = np.rint(np.clip(d, 0.0, 1.0) * 65535.0).astype(np.int64)
    return v.view(U64) & U64(0xFFFF)


# ---- small float formats (emu.pcode.ir.MINIFLOATS) ---------------------------------------------------------------

_MF: dict[str, tuple] = {}


def _mf_table(kind: str):
    """(value of every code, sorted finite non-negative values, their codes, largest finite, overflow code)."""
    if kind not in _MF:
        from emu.pcode.ir import MINIFLOATS
        eb, mb, bias, special = MINIFLOATS[kind]
        n = 1 + eb + mb
        vals = np.empty(1 << n)
        for code in range(1 << n):
            s, e, m = code >> (n - 1), (code >> mb) & ((1 << eb) - 1), code & ((1 << mb) - 1)
            v = (m / (1 << mb)) * 2.0 ** (1 - bias) if e == 0 else (1 + m / (1 << mb)) * 2.0 ** (e - bias)
            if special == "ieee" and e == (1 << eb) - 1:
                v = math.inf if m == 0 else math.nan
            if special == "nan" and e == (1 << eb) - 1 and m == (1 << mb) - 1:
                v = math.nan
            if special == "fnuz" and code == 1 << (n - 1):  # what would be -0
                v = math.nan
            vals[code] = -v if s else v
        pos = [c for c in range(1 << (n - 1)) if np.isfinite(vals[c])]
        fin = vals[pos]
        over = {"ieee": (((1 << eb) - 1) << mb), "nan": (1 << (n - 1)) - 1, "none": pos[-1],
                "fnuz": 1 << (n - 1)}[special]
        _MF[kind] = (vals, fin, np.array(pos, U64), fin[-1], over, n)
    return _MF[kind]


def mf_decode(x, kind: str, bits: int, bf: bool = False):
    vals = _mf_table(kind)[0]
    v = vals[arr(x).astype(np.intp) & (len(vals) - 1)]
    return bf16(v.astype(np.float32)) if bf else v.astype(FDT[bits])


def mf_encode(x, kind: str):
    """Round to nearest even; beyond the largest finite value: inf, NaN or saturation as the format has."""
    vals, fin, codes, top, over, n = _mf_table(kind)
    d = np.asarray(x, np.float64)
    a = np.abs(np.nan_to_num(d, nan=0.0, posinf=np.inf))
    i = np.clip(np.searchsorted(fin, a), 1, len(fin) - 1)
    lo, hi = fin[i - 1], fin[i]
    pick_hi = (a - lo > hi - a) | ((a - lo == hi - a) & ((codes[i] & U64(1)) == 0))
    code = np.where(pick_hi, codes[i], codes[i - 1])
    ulp = fin[-1] - fin[-2]
    code = np.where(a >= top + ulp / 2, U64(over), np.where(a > top, codes[-1], code))
    return _signed(code, d, kind, n)


def _signed(code, d, kind: str, n: int):
    """A magnitude's code with NaN and the sign applied as the format has them (FNUZ: no -0, NaN 0x80)."""
    spec = _spec(kind)
    nan = {"ieee": (1 << (n - 1)) - 1, "nan": (1 << (n - 1)) - 1, "fnuz": 1 << (n - 1)}.get(spec)
    if nan is not None:
        code = np.where(np.isnan(d), U64(nan), code)
    neg = np.signbit(d) & ~np.isnan(d)
    if spec == "fnuz":
        neg &= code != 0
    return code | np.where(neg, U64(1 << (n - 1)), U64(0))


def _spec(kind: str) -> str:
    from emu.pcode.ir import MINIFLOATS
    return MINIFLOATS[kind][3]


def _sr_up(a, lo, hi, rnd):
    """Stochastic rounding: move |x| from lo up to hi when rnd / 2**32 < (|x| - lo) / (hi - lo)."""
    gap = np.where(hi > lo, hi - lo, 1.0)
    return arr(rnd).astype(np.float64) / 2.0 ** 32 < (a - lo) / gap


def mf_encode_sr(x, rnd, kind: str):
    vals, fin, codes, top, over, n = _mf_table(kind)
    d = np.asarray(x, np.float64)
    a = np.abs(np.nan_to_num(d, nan=0.0))
    ulp = fin[-1] - fin[-2]
    ext = np.append(fin, top + ulp)
    i = np.clip(np.searchsorted(ext, a, side="right") - 1, 0, len(fin) - 1)
    code = np.where(_sr_up(np.minimum(a, top + ulp), ext[i], ext[i + 1], rnd),
                    np.append(codes, U64(over))[i + 1], codes[i])
    code = np.where(a >= top + ulp, U64(over), code)
    return _signed(code, d, kind, n)


def fconv_sr(x, rnd, bits: int, bf: bool = False):
    """float32 -> f16 / bf16 with stochastic rounding (see _sr_up); NaNs come out quiet."""
    x = np.asarray(x, np.float32)
    lo = fconv(x, bits, bf, 3, True)  # toward zero
    lod = np.abs(lo.astype(np.float64))
    if bf:
        hi = i2f(f2i(lo, 16, True) + U64(1), 16, True)
    else:
        hi = np.nextafter(lo, np.where(np.signbit(lo), -np.inf, np.inf).astype(lo.dtype))
    up = np.isfinite(x) & _sr_up(np.abs(x.astype(np.float64)), lod, np.abs(hi.astype(np.float64)), rnd)
    return np.where(up, hi, lo).astype(lo.dtype)


# ---- MODE.FP_ROUND: directed rounding of the basic operations ---------------------------------------------------
# MODE[1:0] rounds f32 results, MODE[3:2] f16 and f64 (AMDGPUUsage: FLOAT_ROUND_MODE_32 / _16_64):
# 0 nearest even, 1 toward +inf, 2 toward -inf, 3 toward 0
_NATIVE = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "sqrt": np.sqrt}


def _odd_sum(p, c):
    """p + c in f64 rounded to odd (TwoSum error term): a later rounding to a narrower type is then correct."""
    s = p + c
    bv = s - p
    err = (p - (s - bv)) + (c - bv)
    fix = (err != 0) & np.isfinite(err) & ((s.view(np.uint64) & U64(1)) == 0)
    return np.where(fix, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)


def _wide(op: str, args) -> np.ndarray:
    """The result of `op` on f16 / f32 operands in f64, close enough to the exact one that no value of the narrow
    type lies between them (products and sums exact or rounded to odd; a quotient or root of 24-bit operands is
    never within 2**-53 of a 24-bit value it does not equal)."""
    a = [np.asarray(x).astype(np.float64) for x in args]
    if op in ("add", "sub"):
        return _odd_sum(a[0], a[1] if op == "add" else -a[1])
    if op == "fma":
        return np.ldexp(_odd_sum(a[0] * a[1], a[2]), sx(np.asarray(args[3]), 32) if len(args) > 3 else 0)
    return _NATIVE[op](*a)


_EXACT = {"add": lambda q: q[0] + q[1], "sub": lambda q: q[0] - q[1], "mul": lambda q: q[0] * q[1],
          "div": lambda q: q[0] / q[1], "fma": lambda q: q[0] * q[1] + q[2]}


def _exact_sides(op: str, args, near: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sign of exact - near, sign of exact) per lane of an f64 operation, by exact rational arithmetic; 0 and 0
    where an operand or `near` is NaN or an operand is infinite (the result is then exact)."""
    vals = [np.broadcast_to(np.asarray(x, np.float64), near.shape) for x in args[:3]]
    scale = np.broadcast_to(sx(np.asarray(args[3]), 32), near.shape) if len(args) > 3 else None
    side, sign = np.zeros(near.shape, np.int8), np.zeros(near.shape, np.int8)
    for i in np.ndindex(near.shape):
        xs = [float(v[i]) for v in vals]
        r = float(near[i])
        if not all(math.isfinite(x) for x in xs) or math.isnan(r):
            continue
        q = [Fraction(x) for x in xs]
        if op == "sqrt":  # sqrt(q) against r >= 0: compare the squares
            exact_sq = q[0]
            side[i] = 0 if math.isinf(r) else (exact_sq > Fraction(r) ** 2) - (exact_sq < Fraction(r) ** 2)
            sign[i] = exact_sq > 0
            continue
        if op == "div" and q[1] == 0:
            continue
        e = _EXACT[op](q)
        if scale is not None:
            e *= Fraction(2) ** int(scale[i])
        sign[i] = (e > 0) - (e < 0)
        side[i] = -sign[i] if math.isinf(r) else (e > Fraction(r)) - (e < Fraction(r))
    return side, sign


def rop(op: str, mode, *args):
    """The IEEE operation `op` (add sub mul div sqrt fma) rounded as MODE.FP_ROUND says (f16, f32, f64)."""
    near = fma(*args) if op == "fma" else _NATIVE[op](*args)
    near = np.asarray(near)
    mode = np.asarray(mode)  # an int (MODE is wave state); a per-lane array from a caller counts by its first lane
    rm = (int(mode.flat[0]) if mode.size else 0) >> (0 if near.dtype == np.float32 else 2) & 3
    if rm == 0 or near.dtype not in (np.float16, np.float32, np.float64):
        return near
    dt = near.dtype.type
    if near.dtype == np.float64:
        side, sign = _exact_sides(op, args, near)
        above, below, positive, negative, zero = side > 0, side < 0, sign > 0, sign < 0, sign == 0
    else:
        w = _wide(op, args)
        back = near.astype(np.float64)
        above, below, positive, negative, zero = back < w, back > w, w > 0, w < 0, w == 0
    step = {1: above, 2: below, 3: (below & positive) | (above & negative)}[rm]
    toward = {1: dt(np.inf), 2: dt(-np.inf), 3: dt(0)}[rm]
    out = np.where(step, np.nextafter(near, toward), near)
    if rm == 2 and op in ("add", "sub", "fma"):  # an exact zero sum of opposite signs is -0 toward -inf
        exact0 = zero & (out == 0) & _finite(args)
        out = np.where(exact0 & ~np.signbit(out), np.where(_both_plus_zero(op, args), out, dt(-0.0)), out)
    return out.astype(dt)


def _finite(args):
    out = np.True_
    for x in args[:3]:  # arrays and scalars broadcast
        out = out & np.isfinite(np.asarray(x, np.float64))
    return out


def _both_plus_zero(op: str, args):
    a = np.asarray(args[0]) * np.asarray(args[1]) if op == "fma" else np.asarray(args[0])
    b = np.asarray(args[2]) if op == "fma" else (np.asarray(args[1]) if op == "add" else -np.asarray(args[1]))
    return (a == 0) & ~np.signbit(a) & (b == 0) & ~np.signbit(b)
