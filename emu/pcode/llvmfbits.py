"""The bits of floats in the LLVM backend (emu.pcode.llvmfloats has the rules): raw bits, compares,
classification, NaN results as the reference backend gives them, steps of one ulp."""
from __future__ import annotations

from llvmlite import ir

from emu.pcode.ir import Ty
from emu.pcode.llvmvalues import (
    FLOAT,
    FTY,
    HALF,
    I32,
    ITY,
    MANT,
    const,
    elem,
    ext,
    fbits,
    fconst,
    lanes,
    like,
    raw_const,
    resize,
)


def raw(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return b.bitcast(x, like(ITY[elem(x.type)], lanes(x)))


def unraw(b: ir.IRBuilder, i: ir.Value, ft: ir.Type) -> ir.Value:
    return b.bitcast(i, like(ft, lanes(i)))


def _cmp_ready(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> tuple[ir.Value, ir.Value]:
    """Half operands widened to float (exact): x86 has no half compares, LLVM would scalarize them."""
    if elem(x.type) == HALF:
        return ext(b, x, FLOAT), ext(b, y, FLOAT)
    return x, y


def fcmp_o(b: ir.IRBuilder, sym: str, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.fcmp_ordered(sym, *_cmp_ready(b, x, y))


def fcmp_u(b: ir.IRBuilder, sym: str, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.fcmp_unordered(sym, *_cmp_ready(b, x, y))


def isnan(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    if elem(x.type) == HALF:
        return b.icmp_unsigned(">", b.and_(raw(b, x), raw_const(x, 0x7FFF)), raw_const(x, 0x7C00))
    return b.fcmp_unordered("uno", x, x)


def isinf(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    fb = fbits(x.type)
    return b.icmp_unsigned("==", b.and_(raw(b, x), raw_const(x, (1 << fb - 1) - 1)), raw_const(x, inf_bits(fb)))


def isfinite(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    fb = fbits(x.type)
    return b.icmp_unsigned("<", b.and_(raw(b, x), raw_const(x, (1 << fb - 1) - 1)), raw_const(x, inf_bits(fb)))


def inf_bits(fb: int) -> int:
    return ((1 << (fb - 1 - MANT[fb])) - 1) << MANT[fb]


def quiet_bit(fb: int) -> int:
    return 1 << (MANT[fb] - 1)


def _default_nan(fb: int) -> int:
    return (1 << (fb - 1)) | inf_bits(fb) | quiet_bit(fb)


def signbit(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return b.icmp_signed("<", raw(b, x), raw_const(x, 0))


def quieted(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Raw bits of x with the quiet bit set."""
    return b.or_(raw(b, x), raw_const(x, quiet_bit(fbits(x.type))))


def with_nan(b: ir.IRBuilder, r: ir.Value, ops: list[ir.Value], default_when: ir.Value | None = None) -> ir.Value:
    """r with a NaN result replaced by the first NaN of ops quieted, else x86's default NaN. `default_when`: lanes
    where the default NaN comes before the operands after the first two (an invalid product in fma)."""
    fb = fbits(r.type)
    nb = raw_const(r, _default_nan(fb))
    for i, x in reversed(list(enumerate(ops))):
        nb = b.select(isnan(b, x), quieted(b, x), nb)
        if i == 2 and default_when is not None:
            nb = b.select(default_when, raw_const(r, _default_nan(fb)), nb)
    return b.select(isnan(b, r), unraw(b, nb, elem(r.type)), r)


def nextafter(b: ir.IRBuilder, x: ir.Value, toward: int) -> ir.Value:
    """x one ulp toward +inf (1), -inf (-1) or zero (0); x finite (nonzero when toward is 0)."""
    i = raw(b, x)
    one = raw_const(x, 1)
    if toward == 0:
        return unraw(b, b.sub(i, one), elem(x.type))
    neg = b.icmp_signed("<", i, raw_const(x, 0))
    away = b.not_(neg) if toward > 0 else neg
    moved = b.select(away, b.add(i, one), b.sub(i, one))
    zero = b.icmp_unsigned("==", b.shl(i, one), raw_const(x, 0))
    tiny = raw_const(x, 1 if toward > 0 else (1 << (fbits(x.type) - 1)) | 1)
    return unraw(b, b.select(zero, tiny, moved), elem(x.type))


def fabs(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    fb = fbits(x.type)
    return unraw(b, b.and_(raw(b, x), raw_const(x, (1 << fb - 1) - 1)), elem(x.type))


def fclass(b: ir.IRBuilder, name: str, x: ir.Value, t: Ty) -> ir.Value:
    """Classification on the raw bits (bfloat16: its 16 bits)."""
    bf = t.kind == "bf"
    i = b.lshr(raw(b, x), raw_const(x, 16)) if bf else raw(b, x)
    m = 7 if bf else MANT[t.bits]
    width = 16 if bf else t.bits
    q = b.icmp_unsigned("!=", b.and_(i, raw_const(x, 1 << (m - 1))), raw_const(x, 0))
    if name == "issnan":
        return b.and_(isnan(b, x), b.not_(q))
    if name == "isqnan":
        return b.and_(isnan(b, x), q)
    if name == "quiet":
        qb = (1 << (m - 1)) << (16 if bf else 0)
        return b.select(isnan(b, x), unraw(b, b.or_(raw(b, x), raw_const(x, qb)), elem(x.type)), x)
    expo = b.and_(b.lshr(i, raw_const(x, m)), raw_const(x, (1 << (width - m - 1)) - 1))
    if name == "exponent":
        return resize(b, expo, 32)
    return b.and_(b.icmp_unsigned("==", expo, raw_const(x, 0)), fcmp_u(b, "!=", x, fconst(x, 0.0)))


def bitcast(b: ir.IRBuilder, x: ir.Value, s: Ty, t: Ty) -> ir.Value:
    n = lanes(x)
    if t.is_float:
        if t.kind == "bf":
            return unraw(b, b.shl(resize(b, resize(b, x, 16), 32), const(I32, 16, n)), FLOAT)
        return unraw(b, resize(b, x, t.bits), FTY[t.bits])
    if s.kind == "bf":
        return resize(b, b.lshr(raw(b, x), raw_const(x, 16)), t.bits)
    return resize(b, raw(b, x), t.bits)
