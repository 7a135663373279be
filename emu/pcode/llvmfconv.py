"""Float conversions of the LLVM backend (emu.pcode.llvmfloats has the rules), as emu.pcode.floats converts:
between float formats (nearest even, directed, NaN payloads carried), bfloat16, integers to and from floats,
normalized integers."""
from __future__ import annotations

from llvmlite import ir

from emu.pcode.ir import Ty
from emu.pcode.llvmfbits import fabs, fcmp_o, inf_bits, isfinite, isnan, nextafter, quiet_bit, raw, unraw
from emu.pcode.llvmvalues import (
    DOUBLE,
    FLOAT,
    FTY,
    HALF,
    I64,
    MANT,
    bcast,
    const,
    elem,
    ext,
    fbits,
    fconst,
    intrinsic,
    lanes,
    like,
    raw_const,
    resize,
    scalar_type,
)
from emu.pcode.typed import Unsupported


def _odd_f32(b: ir.IRBuilder, d: ir.Value) -> ir.Value:
    """f64 -> f32 rounded to odd (then a rounding to f16 is the correct one)."""
    r = b.fptrunc(d, like(FLOAT, lanes(d)))
    back = b.fpext(r, d.type)
    fix = b.and_(fcmp_o(b, "!=", back, d), b.icmp_unsigned("==", b.and_(raw(b, r), raw_const(r, 1)), raw_const(r, 0)))
    fix = b.and_(fix, isfinite(b, r))
    grow = fcmp_o(b, "<", fabs(b, back), fabs(b, d))
    i = raw(b, r)
    stepped = b.select(grow, b.add(i, raw_const(r, 1)), b.sub(i, raw_const(r, 1)))
    return unraw(b, b.select(fix, stepped, i), FLOAT)


def narrow(b: ir.IRBuilder, x: ir.Value, ft: ir.Type) -> ir.Value:
    """Round to nearest even into the narrower (or same) format ft, as numpy's astype; NaNs keep their top payload
    bits (quiet NaNs, as computed results are)."""
    s = elem(x.type)
    if s == ft:
        return x
    n = lanes(x)
    if ft == HALF and s == DOUBLE:
        y = b.fptrunc(_odd_f32(b, x), like(HALF, n))
    else:
        y = b.fptrunc(x, like(ft, n))
    return b.select(isnan(b, x), unraw(b, _nan_convert(b, x, ft), ft), y)


def _nan_convert(b: ir.IRBuilder, x: ir.Value, ft: ir.Type) -> ir.Value:
    """Raw bits in format ft of NaN x (sign, quiet bit, payload shifted), as floats._nan_bits: a payload that
    would vanish becomes the quiet bit."""
    sb, db = fbits(x.type), {HALF: 16, FLOAT: 32, DOUBLE: 64}[ft]
    sm, dm = MANT[sb], MANT[db]
    n = lanes(x)
    i = raw(b, x)
    dt = like(ir.IntType(db), n)
    mant = b.and_(i, raw_const(x, (1 << sm) - 1))
    mant = b.shl(resize(b, mant, db), const(dt, dm - sm, n)) if dm >= sm else resize(
        b, b.lshr(mant, raw_const(x, sm - dm)), db)
    mant = b.select(b.icmp_unsigned("==", mant, const(dt, 0, n)), const(dt, 1 << (dm - 1), n), mant)
    sign = b.shl(resize(b, b.lshr(i, raw_const(x, sb - 1)), db), const(dt, db - 1, n))
    return b.or_(b.or_(sign, const(dt, inf_bits(db), n)), mant)


def bf16(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Round a float32 value to bfloat16 (nearest even; NaN: top half, quiet), kept as float32 (floats.bf16)."""
    if elem(x.type) != FLOAT:
        x = narrow(b, x, FLOAT)
    u = resize(b, raw(b, x), 64)
    k = lambda v: const(u.type, v, lanes(u))  # noqa: E731
    r = b.lshr(b.add(b.add(u, k(0x7FFF)), b.and_(b.lshr(u, k(16)), k(1))), k(16))
    r = b.select(isnan(b, x), b.or_(b.lshr(u, k(16)), k(0x40)), r)
    return unraw(b, b.shl(resize(b, b.and_(r, k(0xFFFF)), 32), raw_const(x, 16)), FLOAT)


def fconv(b: ir.IRBuilder, x: ir.Value, t: Ty, rm: ir.Value | None, quiet: bool) -> ir.Value:
    """floats.fconv: to another format, rounding by rm (0 nearest even, 1 +inf, 2 -inf, 3 toward 0)."""
    ft = scalar_type(t)
    bf = t.kind == "bf"
    if bf:
        y = bf16(b, x)
    else:
        s = elem(x.type)
        y = ext(b, x, ft) if fbits(ft) >= fbits(s) else narrow(b, x, ft)
        y = b.select(isnan(b, x), unraw(b, _nan_convert(b, x, ft), ft), y)
    if rm is not None:
        y = _directed_conv(b, x, y, rm, bf)
    if quiet:
        qb = 1 << 6 if bf else quiet_bit(fbits(ft))
        y = b.select(isnan(b, y), unraw(b, b.or_(raw(b, y), raw_const(y, qb << (16 if bf else 0))), ft), y)
    return y


def _directed_conv(b: ir.IRBuilder, x: ir.Value, y: ir.Value, rm: ir.Value, bf: bool) -> ir.Value:
    x, y, rm = bcast(b, x, y, rm)
    n = lanes(y)
    xd, yd = ext(b, x, DOUBLE), ext(b, y, DOUBLE)
    fin = isfinite(b, xd)
    rm = resize(b, rm, 64)
    is_ = lambda k: b.icmp_unsigned("==", rm, const(I64, k, n))  # noqa: E731
    if bf:
        step_dn = unraw(b, b.sub(raw(b, y), raw_const(y, 1 << 16)), FLOAT)
    else:
        step_dn = nextafter(b, y, 0)
    too_big = b.and_(fin, fcmp_o(b, ">", fabs(b, yd), fabs(b, xd)))
    r = b.select(b.and_(is_(3), too_big), step_dn, y)
    if not bf:
        up = b.and_(fin, fcmp_o(b, "<", yd, xd))
        dn = b.and_(fin, fcmp_o(b, ">", yd, xd))
        r = b.select(b.and_(is_(1), up), nextafter(b, y, 1), r)
        r = b.select(b.and_(is_(2), dn), nextafter(b, y, -1), r)
    return r


def itof(b: ir.IRBuilder, x: ir.Value, s: Ty, t: Ty) -> ir.Value:
    """floats.itof: signed or unsigned integer to float, rounded once (bfloat16: via f64 -> f32 -> bf16)."""
    signed = s.kind == "i"
    n = lanes(x)
    conv = b.sitofp if signed else b.uitofp
    if s.bits > 64:
        raise Unsupported(f"integer of {s.bits} bits to float")
    if t.kind == "bf":
        return bf16(b, b.fptrunc(conv(x, like(DOUBLE, n)), like(FLOAT, n)))
    ft = FTY[t.bits]
    if s.bits <= 32:
        return narrow(b, conv(x, like(DOUBLE, n)), ft)
    return b.fptrunc(conv(x, like(FLOAT, n)), like(HALF, n)) if ft == HALF else conv(x, like(ft, n))


def ftoi(b: ir.IRBuilder, x: ir.Value, t: Ty) -> ir.Value:
    """floats.ftoi: truncate, saturate to the type's range, NaN gives 0."""
    if t.bits >= 64:
        raise Unsupported("float to 64-bit integer")
    n = lanes(x)
    d = ext(b, x, DOUBLE)
    d = b.select(isnan(b, d), const(DOUBLE, 0, n), d)
    lo, hi = (-(1 << t.bits - 1), (1 << t.bits - 1) - 1) if t.kind == "i" else (0, (1 << t.bits) - 1)
    d = _clamp(b, d, float(lo), float(hi))
    return resize(b, b.fptosi(d, like(I64, n)), t.bits)


def _clamp(b: ir.IRBuilder, d: ir.Value, lo: float, hi: float) -> ir.Value:
    d = b.select(fcmp_o(b, "<", d, fconst(d, lo)), fconst(d, lo), d)
    return b.select(fcmp_o(b, ">", d, fconst(d, hi)), fconst(d, hi), d)


def norm(b: ir.IRBuilder, x: ir.Value, signed: bool) -> ir.Value:
    """floats.norm: float -> 16-bit snorm / unorm (clamp, scale, round to nearest even; NaN 0)."""
    d = ext(b, x, DOUBLE)
    d = b.select(isnan(b, d), fconst(d, 0.0), d)
    d = _clamp(b, d, -1.0 if signed else 0.0, 1.0)
    d = intrinsic(b, "llvm.roundeven", d.type, [b.fmul(d, fconst(d, 32767.0 if signed else 65535.0))])
    return resize(b, b.fptosi(d, like(I64, lanes(d))), 16)
