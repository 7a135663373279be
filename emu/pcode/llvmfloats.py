"""Float operations of the LLVM backend (emu.pcode.llvmback), bit-identical to the reference backend's numpy /
libm results on x86-64 (emu.pcode.pyback, floats).

Nothing is left to LLVM's or the host's defaults where they could differ from the reference:
- NaN results are selected explicitly: a NaN operand gives that operand quieted, in the order numpy's loops take
  them (f32 / f64: the first NaN operand; f16 add and mul: the second; sub, div: the first), a NaN produced from
  numbers is x86's default NaN (sign set, quiet); conversions carry NaN payloads as pyback's `_nan_bits` does.
- f16 arithmetic runs in f32 and rounds once to f16 (as numpy does); f64 -> f16 rounds to odd in f32 first, so
  that the f16 rounding is the single correct one (numpy converts directly).
- MODE.FP_ROUND (bits 1:0 f32, 3:2 f16) directs f16 / f32 add sub mul div sqrt fma exactly as floats.rop: the nearest
  result stepped by one ulp after comparing it with the result in f64 (sums rounded to odd). A constant MODE (the
  wave engine's case) emits only its own mode; nearest even is the host's IEEE operation on whole vectors with
  the NaN selection above (no fast-math flags: nothing is reassociated or contracted).
- fma: f32 / f64 with llvm.fma (the exact product and sum rounded once: pyback's value), f16 and scaled f32 as
  pyback computes them (f64 product, sum rounded to odd, scaled, rounded once).
- exp2 log2 sin cos pow ldexp frexp fmod are the process's libm functions (numpy's float64 loops give libm's bits
  on this machine, but for log2 below zero: the hardware's +NaN, emitted explicitly), called through private
  symbols so that LLVM cannot fold or replace them.
Excluded (Unsupported): the small float formats (mf_decode, mf_encode: table searches), stochastic rounding
(fconv_sr), fma with a scale on f64, float -> 64-bit integer conversion, f64 arithmetic unless MODE is a constant
that rounds it to nearest even (directed f64 rounding needs the exact result).
"""
from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable

import numpy as np
from llvmlite import ir

from emu.pcode import floats
from emu.pcode.ir import Op, Ty
from emu.pcode.typed import Unsupported

# ---- values: types, constants, scalar/vector broadcasting, intrinsics ------------------------------------------
I1, I8, I16, I32, I64 = (ir.IntType(n) for n in (1, 8, 16, 32, 64))
HALF, FLOAT, DOUBLE = ir.HalfType(), ir.FloatType(), ir.DoubleType()
FTY = {16: HALF, 32: FLOAT, 64: DOUBLE}
ITY = {HALF: I16, FLOAT: I32, DOUBLE: I64}  # a float type's raw-bits integer type
MANT = {16: 10, 32: 23, 64: 52}


def scalar_type(t: Ty) -> ir.Type:
    """LLVM element type of an IR type: iB for integers and raw-bit formats, i1 for bool, half/float/double for
    floats; bfloat16 is held in float as its exact float32 value (as the reference backend holds it)."""
    if t.kind == "bool":
        return I1
    if t.kind == "bf":
        return FLOAT
    if t.kind == "f":
        return FTY[t.bits]
    return ir.IntType(t.bits)


def lanes(v: ir.Value) -> int | None:
    return v.type.count if isinstance(v.type, ir.VectorType) else None


def elem(t: ir.Type) -> ir.Type:
    return t.element if isinstance(t, ir.VectorType) else t


def like(t: ir.Type, n: int | None) -> ir.Type:
    return ir.VectorType(elem(t), n) if n else elem(t)


def fbits(t: ir.Type) -> int:
    return {HALF: 16, FLOAT: 32, DOUBLE: 64}[elem(t)]


def const(t: ir.Type, value: int, n: int | None = None) -> ir.Constant:
    """A constant of element type t (splat over n lanes); for float types `value` gives the raw bits."""
    e = elem(t)
    if isinstance(e, ir.IntType):
        c = ir.Constant(e, value & ((1 << e.width) - 1))
    else:
        fb = {HALF: 16, FLOAT: 32, DOUBLE: 64}[e]
        x = np.array(value, {16: np.uint16, 32: np.uint32, 64: np.uint64}[fb]).view(
            {16: np.float16, 32: np.float32, 64: np.float64}[fb])
        if np.isnan(x):  # LLVM's text gives a NaN as a double: its payload would not survive for half / float
            raise Unsupported("NaN constant (use nan_const)")
        c = ir.Constant(e, float(x))
    return _splat_const(c, n) if n else c


def nan_const(b: ir.IRBuilder, t: ir.Type, bits: int, n: int | None = None) -> ir.Value:
    """A float of the given raw bits, NaNs included (a bitcast, folded by LLVM bit for bit)."""
    return b.bitcast(const(ITY[elem(t)], bits, n), like(elem(t), n))


def _splat_const(c: ir.Constant, n: int) -> ir.Constant:
    """<n x T> with every lane c, in LLVM's short `splat (T c)` form (the text LLVM parses stays small)."""
    k = ir.FormattedConstant(c.type, f"splat ({c.type} {c.get_reference()})")
    k.type = ir.VectorType(c.type, n)  # set after construction: llvmlite would wrap the text per lane
    return k


def splat(b: ir.IRBuilder, v: ir.Value, n: int | None) -> ir.Value:
    if not n or lanes(v):
        return v
    vt = ir.VectorType(v.type, n)
    if isinstance(v, ir.Constant) and not isinstance(v, ir.FormattedConstant):
        return _splat_const(v, n)
    one = b.insert_element(ir.Constant(vt, ir.Undefined), v, I32(0))
    return b.shuffle_vector(one, ir.Constant(vt, ir.Undefined), ir.Constant(ir.VectorType(I32, n), [0] * n))


def bcast(b: ir.IRBuilder, *vals: ir.Value) -> list[ir.Value]:
    """The values with scalars splat to the lanes of any vector among them."""
    n = next((lanes(v) for v in vals if lanes(v)), None)
    return [splat(b, v, n) for v in vals]


def mangle(t: ir.Type) -> str:
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{mangle(t.element)}"
    if isinstance(t, ir.IntType):
        return f"i{t.width}"
    return {HALF: "f16", FLOAT: "f32", DOUBLE: "f64"}[t]


def intrinsic(b: ir.IRBuilder, name: str, ret: ir.Type, args: list[ir.Value], over: tuple = ()) -> ir.Value:
    """Call the LLVM intrinsic `name` overloaded on the types `over` (default: the first argument's)."""
    full = name + "".join("." + mangle(t) for t in (over or (args[0].type,)))
    fn = b.module.globals.get(full)
    if fn is None:
        fn = ir.Function(b.module, ir.FunctionType(ret, [a.type for a in args]), full)
    return b.call(fn, args)


def extern(b: ir.IRBuilder, name: str, ret: ir.Type, params: list[ir.Type]) -> ir.Function:
    fn = b.module.globals.get(name)
    if fn is None:
        fn = ir.Function(b.module, ir.FunctionType(ret, params), name)
    return fn


def resize(b: ir.IRBuilder, v: ir.Value, bits: int, signed: bool = False) -> ir.Value:
    """Integer v truncated or extended (sign-extended when signed) to `bits`."""
    w = elem(v.type).width
    t = like(ir.IntType(bits), lanes(v))
    if bits == w:
        return v
    if bits < w:
        return b.trunc(v, t)
    return b.sext(v, t) if signed else b.zext(v, t)


def select(b: ir.IRBuilder, c: ir.Value, x: ir.Value, y: ir.Value) -> ir.Value:
    c, x, y = bcast(b, c, x, y)
    return b.select(c, x, y)


def any_lane(b: ir.IRBuilder, m: ir.Value) -> ir.Value:
    """i1: some lane of a <n x i1> (or a scalar i1) is set."""
    n = lanes(m)
    if not n:
        return m
    return b.icmp_unsigned("!=", b.bitcast(m, ir.IntType(n)), ir.IntType(n)(0))


def entry_alloca(b: ir.IRBuilder, typ: ir.Type, name: str = "") -> ir.AllocaInstr:
    """An alloca at the start of b's function's entry block (where LLVM promotes it to registers)."""
    entry = b.function.entry_basic_block
    instr = ir.instructions.AllocaInstr(entry, typ, None, name)
    entry.instructions.insert(0, instr)
    if b.block is entry:
        b._anchor += 1  # b inserts by index: keep its position behind the new instruction
    return instr


def lane0(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    return b.extract_element(v, I32(0)) if lanes(v) else v


# ---- libm ------------------------------------------------------------------------------------------------------

ROUNDED = ("add", "sub", "mul", "div", "fma", "sqrt")  # directed by MODE.FP_ROUND (as pyback.ROUNDED)
_BF_ROUNDS = {"add", "sub", "mul", "div", "fma", "sqrt", "exp2", "log2", "sin", "cos", "pow", "ldexp", "fract", "rsq"}
_LIBM = {"exp2": (DOUBLE, [DOUBLE]), "log2": (DOUBLE, [DOUBLE]), "sin": (DOUBLE, [DOUBLE]),
         "cos": (DOUBLE, [DOUBLE]), "pow": (DOUBLE, [DOUBLE, DOUBLE]), "ldexp": (DOUBLE, [DOUBLE, I32]),
         "frexp": (DOUBLE, [DOUBLE, ir.PointerType()]), "fmod": (DOUBLE, [DOUBLE, DOUBLE])}
_SECOND_NAN_FIRST = {(16, "add"), (16, "mul")}  # numpy's f16 loops take the second operand's NaN first


def register_symbols(add_symbol: Callable[[str, int], None]) -> None:
    """Make the libm functions the emitted code calls known to the JIT (names hwemu_libm_<fn>)."""
    libm = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
    for name in _LIBM:
        add_symbol(f"hwemu_libm_{name}", ctypes.cast(getattr(libm, name), ctypes.c_void_p).value)


def libm(b: ir.IRBuilder, name: str, *args: ir.Value) -> ir.Value:
    """libm's `name` applied lane by lane (vector arguments are split into scalar calls)."""
    ret, params = _LIBM[name]
    fn = b.module.globals.get(f"hwemu_libm_{name}") or ir.Function(
        b.module, ir.FunctionType(ret, params), f"hwemu_libm_{name}")
    n = lanes(args[0])
    if not n:
        return b.call(fn, list(args))
    out = ir.Constant(ir.VectorType(ret, n), ir.Undefined)
    for i in range(n):
        out = b.insert_element(out, b.call(fn, [b.extract_element(a, I32(i)) for a in args]), I32(i))
    return out


# ---- bits of floats ------------------------------------------------------------------------------------------------

def raw(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return b.bitcast(x, like(ITY[elem(x.type)], lanes(x)))


def unraw(b: ir.IRBuilder, i: ir.Value, ft: ir.Type) -> ir.Value:
    return b.bitcast(i, like(ft, lanes(i)))


def _k(x: ir.Value, value: int) -> ir.Constant:
    """Integer constant shaped like float (or int) value x's raw bits."""
    t = elem(x.type)
    return const(ITY.get(t, t), value, lanes(x))


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
        return b.icmp_unsigned(">", b.and_(raw(b, x), _k(x, 0x7FFF)), _k(x, 0x7C00))
    return b.fcmp_unordered("uno", x, x)


def isinf(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    fb = fbits(x.type)
    return b.icmp_unsigned("==", b.and_(raw(b, x), _k(x, (1 << fb - 1) - 1)), _k(x, _inf(fb)))


def isfinite(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    fb = fbits(x.type)
    return b.icmp_unsigned("<", b.and_(raw(b, x), _k(x, (1 << fb - 1) - 1)), _k(x, _inf(fb)))


def _inf(fb: int) -> int:
    return ((1 << (fb - 1 - MANT[fb])) - 1) << MANT[fb]


def _qbit(fb: int) -> int:
    return 1 << (MANT[fb] - 1)


def _default_nan(fb: int) -> int:
    return (1 << (fb - 1)) | _inf(fb) | _qbit(fb)


def signbit(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return b.icmp_signed("<", raw(b, x), _k(x, 0))


def quieted(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Raw bits of x with the quiet bit set."""
    return b.or_(raw(b, x), _k(x, _qbit(fbits(x.type))))


def with_nan(b: ir.IRBuilder, r: ir.Value, ops: list[ir.Value], default_when: ir.Value | None = None) -> ir.Value:
    """r with a NaN result replaced by the first NaN of ops quieted, else x86's default NaN. `default_when`: lanes
    where the default NaN comes before the operands after the first two (an invalid product in fma)."""
    fb = fbits(r.type)
    nb = _k(r, _default_nan(fb))
    for i, x in reversed(list(enumerate(ops))):
        nb = b.select(isnan(b, x), quieted(b, x), nb)
        if i == 2 and default_when is not None:
            nb = b.select(default_when, _k(r, _default_nan(fb)), nb)
    return b.select(isnan(b, r), unraw(b, nb, elem(r.type)), r)


def nextafter(b: ir.IRBuilder, x: ir.Value, toward: int) -> ir.Value:
    """x one ulp toward +inf (1), -inf (-1) or zero (0); x finite (nonzero when toward is 0)."""
    i = raw(b, x)
    one = _k(x, 1)
    if toward == 0:
        return unraw(b, b.sub(i, one), elem(x.type))
    neg = b.icmp_signed("<", i, _k(x, 0))
    away = b.not_(neg) if toward > 0 else neg
    moved = b.select(away, b.add(i, one), b.sub(i, one))
    zero = b.icmp_unsigned("==", b.shl(i, one), _k(x, 0))
    tiny = _k(x, 1 if toward > 0 else (1 << (fbits(x.type) - 1)) | 1)
    return unraw(b, b.select(zero, tiny, moved), elem(x.type))


# ---- format changes ------------------------------------------------------------------------------------------------

def ext(b: ir.IRBuilder, x: ir.Value, ft: ir.Type) -> ir.Value:
    """Exact widening (or nothing)."""
    return x if elem(x.type) == ft else b.fpext(x, like(ft, lanes(x)))


def _odd_f32(b: ir.IRBuilder, d: ir.Value) -> ir.Value:
    """f64 -> f32 rounded to odd (then a rounding to f16 is the correct one)."""
    r = b.fptrunc(d, like(FLOAT, lanes(d)))
    back = b.fpext(r, d.type)
    fix = b.and_(fcmp_o(b, "!=", back, d), b.icmp_unsigned("==", b.and_(raw(b, r), _k(r, 1)), _k(r, 0)))
    fix = b.and_(fix, isfinite(b, r))
    grow = fcmp_o(b, "<", _fabs(b, back), _fabs(b, d))
    i = raw(b, r)
    stepped = b.select(grow, b.add(i, _k(r, 1)), b.sub(i, _k(r, 1)))
    return unraw(b, b.select(fix, stepped, i), FLOAT)


def _fabs(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    fb = fbits(x.type)
    return unraw(b, b.and_(raw(b, x), _k(x, (1 << fb - 1) - 1)), elem(x.type))


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
    mant = b.and_(i, _k(x, (1 << sm) - 1))
    mant = b.shl(resize(b, mant, db), const(dt, dm - sm, n)) if dm >= sm else resize(
        b, b.lshr(mant, _k(x, sm - dm)), db)
    mant = b.select(b.icmp_unsigned("==", mant, const(dt, 0, n)), const(dt, 1 << (dm - 1), n), mant)
    sign = b.shl(resize(b, b.lshr(i, _k(x, sb - 1)), db), const(dt, db - 1, n))
    return b.or_(b.or_(sign, const(dt, _inf(db), n)), mant)


def bf16(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Round a float32 value to bfloat16 (nearest even; NaN: top half, quiet), kept as float32 (floats.bf16)."""
    if elem(x.type) != FLOAT:
        x = narrow(b, x, FLOAT)
    u = resize(b, raw(b, x), 64)
    k = lambda v: const(u.type, v, lanes(u))  # noqa: E731
    r = b.lshr(b.add(b.add(u, k(0x7FFF)), b.and_(b.lshr(u, k(16)), k(1))), k(16))
    r = b.select(isnan(b, x), b.or_(b.lshr(u, k(16)), k(0x40)), r)
    return unraw(b, b.shl(resize(b, b.and_(r, k(0xFFFF)), 32), _k(x, 16)), FLOAT)


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
        qb = 1 << 6 if bf else _qbit(fbits(ft))
        y = b.select(isnan(b, y), unraw(b, b.or_(raw(b, y), _k(y, qb << (16 if bf else 0))), ft), y)
    return y


def _directed_conv(b: ir.IRBuilder, x: ir.Value, y: ir.Value, rm: ir.Value, bf: bool) -> ir.Value:
    x, y, rm = bcast(b, x, y, rm)
    n = lanes(y)
    xd, yd = ext(b, x, DOUBLE), ext(b, y, DOUBLE)
    fin = isfinite(b, xd)
    rm = resize(b, rm, 64)
    is_ = lambda k: b.icmp_unsigned("==", rm, const(I64, k, n))  # noqa: E731
    if bf:
        step_dn = unraw(b, b.sub(raw(b, y), _k(y, 1 << 16)), FLOAT)
    else:
        step_dn = nextafter(b, y, 0)
    too_big = b.and_(fin, fcmp_o(b, ">", _fabs(b, yd), _fabs(b, xd)))
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


def _fconst(x: ir.Value, v: float) -> ir.Constant:
    ft = elem(x.type)
    return const(ft, int(np.array(v, {HALF: np.float16, FLOAT: np.float32, DOUBLE: np.float64}[ft])
                         .view({HALF: np.uint16, FLOAT: np.uint32, DOUBLE: np.uint64}[ft])), lanes(x))


def _clamp(b: ir.IRBuilder, d: ir.Value, lo: float, hi: float) -> ir.Value:
    d = b.select(fcmp_o(b, "<", d, _fconst(d, lo)), _fconst(d, lo), d)
    return b.select(fcmp_o(b, ">", d, _fconst(d, hi)), _fconst(d, hi), d)


def norm(b: ir.IRBuilder, x: ir.Value, signed: bool) -> ir.Value:
    """floats.norm: float -> 16-bit snorm / unorm (clamp, scale, round to nearest even; NaN 0)."""
    d = ext(b, x, DOUBLE)
    d = b.select(isnan(b, d), _fconst(d, 0.0), d)
    d = _clamp(b, d, -1.0 if signed else 0.0, 1.0)
    d = intrinsic(b, "llvm.roundeven", d.type, [b.fmul(d, _fconst(d, 32767.0 if signed else 65535.0))])
    return resize(b, b.fptosi(d, like(I64, lanes(d))), 16)


# ---- arithmetic ----------------------------------------------------------------------------------------------------

def _native(b: ir.IRBuilder, op: str, args: list[ir.Value]) -> ir.Value:
    """The nearest-even IEEE result of add sub mul div sqrt in the operands' format (f16 through f32), NaNs
    as numpy gives them."""
    ft = elem(args[0].type)
    fb = fbits(ft)
    w = [ext(b, a, FLOAT) for a in args] if ft == HALF else args
    if op == "sqrt":
        r = intrinsic(b, "llvm.sqrt", w[0].type, [w[0]])
    else:
        r = getattr(b, {"add": "fadd", "sub": "fsub", "mul": "fmul", "div": "fdiv"}[op])(w[0], w[1])
    r = narrow(b, r, ft)
    order = list(reversed(args)) if (fb, op) in _SECOND_NAN_FIRST else args
    return with_nan(b, r, order)


def _odd_sum(b: ir.IRBuilder, p: ir.Value, c: ir.Value) -> ir.Value:
    """p + c in f64 rounded to odd (floats._odd_sum)."""
    s = b.fadd(p, c)
    bv = b.fsub(s, p)
    err = b.fadd(b.fsub(p, b.fsub(s, bv)), b.fsub(c, bv))
    even = b.icmp_unsigned("==", b.and_(raw(b, s), _k(s, 1)), _k(s, 0))
    fix = b.and_(b.and_(fcmp_u(b, "!=", err, _fconst(err, 0.0)), isfinite(b, err)), even)
    toward = b.select(fcmp_o(b, ">", err, _fconst(err, 0.0)), nextafter(b, s, 1), nextafter(b, s, -1))
    return b.select(fix, toward, s)


def _scale(b: ir.IRBuilder, d: ir.Value, n: ir.Value | None) -> ir.Value:
    return d if n is None else libm(b, "ldexp", d, resize(b, n, 32))


def fma(b: ir.IRBuilder, a: ir.Value, x: ir.Value, c: ir.Value, n: ir.Value | None) -> ir.Value:
    """a * x + c (times 2**n), rounded once; NaNs: a, x, an invalid product, c (floats.fma)."""
    ft = elem(a.type)
    a, x, c = bcast(b, a, x, c)
    if ft == DOUBLE and n is not None:
        raise Unsupported("f64 fma with a scale")
    if ft in (FLOAT, DOUBLE) and n is None:  # the exact product rounded once with c: pyback's value
        r = intrinsic(b, "llvm.fma", a.type, [a, x, c])
    else:
        if n is not None:
            a, x, c, n = bcast(b, a, x, c, n)
        p = b.fmul(ext(b, a, DOUBLE), ext(b, x, DOUBLE))
        r = narrow(b, _scale(b, _odd_sum(b, p, ext(b, c, DOUBLE)), n), ft)
    zero = lambda v: fcmp_o(b, "==", v, _fconst(v, 0.0))  # noqa: E731
    invalid = b.or_(b.and_(isinf(b, a), zero(x)), b.and_(zero(a), isinf(b, x)))
    return with_nan(b, r, [a, x, c], default_when=invalid)


def _wide(b: ir.IRBuilder, op: str, args: list[ir.Value]) -> ir.Value:
    """floats._wide: the f64 result close enough to the exact one to direct the rounding."""
    a = [ext(b, x, DOUBLE) for x in args[:3]]
    if op in ("add", "sub"):
        return _odd_sum(b, a[0], a[1] if op == "add" else b.fneg(a[1]))
    if op == "fma":
        return _scale(b, _odd_sum(b, b.fmul(a[0], a[1]), a[2]), args[3] if len(args) > 3 else None)
    if op == "sqrt":
        return intrinsic(b, "llvm.sqrt", a[0].type, [a[0]])
    return getattr(b, {"mul": "fmul", "div": "fdiv"}[op])(a[0], a[1])


def rop(b: ir.IRBuilder, op: str, mode: ir.Value | int, args: list[ir.Value]) -> ir.Value:
    """floats.rop: add sub mul div sqrt fma rounded as MODE.FP_ROUND says. A constant MODE (an int) emits only its
    own rounding: nearest even is the IEEE result alone. f64 takes nearest even only (a constant MODE with
    FP_ROUND[3:2] 0): its directed rounding needs the exact result, which pyback computes."""
    args = bcast(b, *args)
    ft = elem(args[0].type)
    if ft == DOUBLE and not (isinstance(mode, int) and (mode >> 2) & 3 == 0):
        raise Unsupported("f64 directed rounding (MODE.FP_ROUND[3:2] not a constant nearest even)")
    near = fma(b, *args[:3], args[3] if len(args) > 3 else None) if op == "fma" else _native(b, op, args)
    if ft == DOUBLE:
        return near
    shift = 0 if ft == FLOAT else 2
    if isinstance(mode, int):
        rm = (mode >> shift) & 3
        if rm == 0:
            return near
        rmv = lambda k: I1(k == rm)  # noqa: E731
    else:
        rmi = b.and_(b.lshr(mode, I32(shift)), I32(3))
        rmv = lambda k: b.icmp_unsigned("==", rmi, I32(k))  # noqa: E731
        rm = None
    n = lanes(near)
    w = _wide(b, op, args)
    back = ext(b, near, DOUBLE)
    zero = _fconst(w, 0.0)
    steps = {1: (lambda: fcmp_o(b, "<", back, w), 1), 2: (lambda: fcmp_o(b, ">", back, w), -1),
             3: (lambda: b.or_(b.and_(fcmp_o(b, ">", back, w), fcmp_o(b, ">", w, zero)),
                               b.and_(fcmp_o(b, "<", back, w), fcmp_o(b, "<", w, zero))), 0)}
    out = near
    for k, (step, toward) in steps.items():
        if rm is None:
            out = b.select(b.and_(splat(b, rmv(k), n), step()), nextafter(b, near, toward), out)
        elif k == rm:
            out = b.select(step(), nextafter(b, near, toward), out)
    if op in ("add", "sub", "fma") and rm in (None, 2):
        out = _minus_zero_sum(b, op, args, w, out, rmv(2))
    return out


def _minus_zero_sum(b: ir.IRBuilder, op: str, args: list[ir.Value], w: ir.Value, out: ir.Value,
                    down: ir.Value) -> ir.Value:
    """Toward -inf an exact zero sum is -0 unless both addends are +0 (floats.rop)."""
    ft = elem(out.type)
    if op == "fma":
        x = narrow(b, b.fmul(ext(b, args[0], DOUBLE), ext(b, args[1], DOUBLE)), ft)
        y = args[2]
    else:
        x, y = args[0], args[1] if op == "add" else b.fneg(args[1])
    plus0 = lambda v: b.and_(fcmp_o(b, "==", v, _fconst(v, 0.0)), b.not_(signbit(b, v)))  # noqa: E731
    neg_zero_out = b.and_(fcmp_o(b, "==", out, _fconst(out, 0.0)), signbit(b, out))
    change = b.and_(fcmp_o(b, "==", w, _fconst(w, 0.0)), b.not_(neg_zero_out))
    change = b.and_(b.and_(change, b.not_(b.and_(plus0(x), plus0(y)))), splat(b, down, lanes(out)))
    return b.select(change, _fconst(out, -0.0), out)


# ---- the ops -------------------------------------------------------------------------------------------------------

def constant(b: ir.IRBuilder, value, t: Ty) -> ir.Value:
    """A float constant as pyback makes it (bfloat16: rounded from float32, held as float32)."""
    if t.kind == "bf":
        return nan_const(b, FLOAT, int(np.asarray(floats.bf16(np.float32(value)), np.float32).view(np.uint32)))
    dt = {16: (np.float16, np.uint16), 32: (np.float32, np.uint32), 64: (np.float64, np.uint64)}[t.bits]
    bits = int(np.asarray(value, dt[0]).view(dt[1]))
    return nan_const(b, FTY[t.bits], bits) if np.isnan(value) else const(FTY[t.bits], bits)


def _in_f64(b: ir.IRBuilder, fn: Callable[[ir.Value], ir.Value], x: ir.Value) -> ir.Value:
    """A function computed in f64 and rounded once to x's format (floats._in_f64)."""
    return narrow(b, fn(ext(b, x, DOUBLE)), elem(x.type))


def _unary(b: ir.IRBuilder, intr: str, x: ir.Value) -> ir.Value:
    """floor / trunc / ceil / roundeven: exact; a NaN comes out quieted."""
    ft = elem(x.type)
    w = ext(b, x, FLOAT) if ft == HALF else x
    r = intrinsic(b, intr, w.type, [w])
    r = narrow(b, r, ft) if ft == HALF else r
    return with_nan(b, r, [x])


def _mantissa(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    slot = entry_alloca(b, I32)

    def frexp(d):
        if lanes(d):
            out = ir.Constant(d.type, ir.Undefined)
            for i in range(lanes(d)):
                out = b.insert_element(out, libm(b, "frexp", b.extract_element(d, I32(i)), slot), I32(i))
            return out
        return libm(b, "frexp", d, slot)
    return _in_f64(b, frexp, x)


def op(b: ir.IRBuilder, e: Op, a: list[ir.Value], mode: ir.Value | int) -> ir.Value:
    """The LLVM value of Op e (a float result or float operands) over evaluated operands a; `mode`: MODE, an int
    when it is a compile-time constant."""
    r = _op(b, e, a, mode)
    if e.ty.kind == "bf" and e.op in _BF_ROUNDS:
        r = bf16(b, r)
    return r


def _op(b: ir.IRBuilder, e: Op, a: list[ir.Value], mode: ir.Value | int) -> ir.Value:
    t = e.ty
    bf = t.kind == "bf"
    name = e.op
    if name in ROUNDED and t.is_float:
        if bf:
            return fma(b, *a[:3], a[3] if len(a) > 3 else None) if name == "fma" else _native(b, name, bcast(b, *a))
        return rop(b, name, mode, a)
    if name in ("eq", "lt", "le", "gt", "ge", "ne"):
        x, y = bcast(b, *a)
        sym = {"eq": "==", "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "ne": "!="}[name]
        return fcmp_u(b, sym, x, y) if name == "ne" else fcmp_o(b, sym, x, y)
    if name == "select":
        return select(b, *a)
    if name == "tobool":
        return fcmp_u(b, "!=", a[0], _fconst(a[0], 0.0))
    if name == "neg":
        return unraw(b, b.xor(raw(b, a[0]), _k(a[0], 1 << (fbits(a[0].type) - 1))), elem(a[0].type))
    if name == "fabs":
        return _fabs(b, a[0])
    if name == "signbit":
        return signbit(b, a[0])
    if name == "isnan":
        return isnan(b, a[0])
    if name == "isinf":
        return isinf(b, a[0])
    if name in ("issnan", "isqnan", "quiet", "exponent", "isdenorm"):
        return _fclass(b, name, a[0], e.args[0].ty)
    if name == "bitcast":
        return _bitcast(b, a[0], e.args[0].ty, t)
    if name == "fconv":
        return fconv(b, a[0], t, a[1] if len(a) > 1 and not _zero(e.args[1]) else None, e.attr == "quiet")
    if name == "itof":
        return itof(b, a[0], e.args[0].ty, t)
    if name == "ftoi":
        return ftoi(b, a[0], t)
    if name in ("snorm", "unorm"):
        return norm(b, a[0], name == "snorm")
    if name in ("floor", "trunc", "ceil", "rint"):
        return _unary(b, {"floor": "llvm.floor", "trunc": "llvm.trunc", "ceil": "llvm.ceil",
                          "rint": "llvm.roundeven"}[name], a[0])
    if name == "fract":
        return _native(b, "sub", [a[0], _unary(b, "llvm.floor", a[0])])
    if name == "rsq":
        return _in_f64(b, lambda d: b.fdiv(_fconst(d, 1.0), intrinsic(b, "llvm.sqrt", d.type, [d])), a[0])
    if name == "log2":  # below zero the hardware's default +NaN (as floats.log2), where libm's gives -NaN
        return _in_f64(b, lambda d: b.select(fcmp_o(b, "<", d, _fconst(d, 0.0)),
                                             nan_const(b, DOUBLE, 0x7FF8 << 48, lanes(d)), libm(b, "log2", d)), a[0])
    if name in ("exp2", "sin", "cos"):
        return _in_f64(b, lambda d: libm(b, name, d), a[0])
    if name == "pow":
        x, y = bcast(b, *a)
        return _in_f64(b, lambda d: libm(b, "pow", d, ext(b, y, DOUBLE)), x)
    if name == "ldexp":
        x, k = bcast(b, *a)
        k = resize(b, k, 32)
        k = b.select(b.icmp_signed("<", k, const(I32, -10000, lanes(k))), const(I32, -10000, lanes(k)), k)
        k = b.select(b.icmp_signed(">", k, const(I32, 10000, lanes(k))), const(I32, 10000, lanes(k)), k)
        return _in_f64(b, lambda d: libm(b, "ldexp", d, k), x)
    if name == "mantissa":
        return _mantissa(b, a[0])
    if name == "is_even":
        d = ext(b, a[0], DOUBLE)
        r = libm(b, "fmod", d, _fconst(d, 2.0))
        return b.and_(isfinite(b, d), fcmp_o(b, "==", r, _fconst(r, 0.0)))
    raise Unsupported(f"float op {name} ({t})")


def _zero(x) -> bool:
    return getattr(x, "value", None) == 0 and type(x).__name__ == "Const"


def _fclass(b: ir.IRBuilder, name: str, x: ir.Value, t: Ty) -> ir.Value:
    """Classification on the raw bits (bfloat16: its 16 bits)."""
    bf = t.kind == "bf"
    i = b.lshr(raw(b, x), _k(x, 16)) if bf else raw(b, x)
    m = 7 if bf else MANT[t.bits]
    width = 16 if bf else t.bits
    q = b.icmp_unsigned("!=", b.and_(i, _k(x, 1 << (m - 1))), _k(x, 0))
    if name == "issnan":
        return b.and_(isnan(b, x), b.not_(q))
    if name == "isqnan":
        return b.and_(isnan(b, x), q)
    if name == "quiet":
        qb = (1 << (m - 1)) << (16 if bf else 0)
        return b.select(isnan(b, x), unraw(b, b.or_(raw(b, x), _k(x, qb)), elem(x.type)), x)
    expo = b.and_(b.lshr(i, _k(x, m)), _k(x, (1 << (width - m - 1)) - 1))
    if name == "exponent":
        return resize(b, expo, 32)
    return b.and_(b.icmp_unsigned("==", expo, _k(x, 0)), fcmp_u(b, "!=", x, _fconst(x, 0.0)))


def _bitcast(b: ir.IRBuilder, x: ir.Value, s: Ty, t: Ty) -> ir.Value:
    n = lanes(x)
    if t.is_float:
        if t.kind == "bf":
            return unraw(b, b.shl(resize(b, resize(b, x, 16), 32), const(I32, 16, n)), FLOAT)
        return unraw(b, resize(b, x, t.bits), FTY[t.bits])
    if s.kind == "bf":
        return resize(b, b.lshr(raw(b, x), _k(x, 16)), t.bits)
    return resize(b, raw(b, x), t.bits)
