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
Modules: emu.pcode.llvmvalues (types, constants, lanes), llvmfbits (raw bits, classification, NaN results),
llvmfconv (conversions), this one (libm, arithmetic as MODE rounds it, the ops).
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
from emu.pcode.llvmfbits import (
    bitcast,
    fabs,
    fclass,
    fcmp_o,
    fcmp_u,
    isfinite,
    isinf,
    isnan,
    nextafter,
    raw,
    signbit,
    unraw,
    with_nan,
)
from emu.pcode.llvmfconv import bf16, fconv, ftoi, itof, narrow, norm
from emu.pcode.llvmvalues import (
    DOUBLE,
    FLOAT,
    FTY,
    HALF,
    I1,
    I32,
    bcast,
    const,
    elem,
    entry_alloca,
    ext,
    fbits,
    fconst,
    intrinsic,
    lanes,
    nan_const,
    raw_const,
    resize,
    select,
    splat,
)
from emu.pcode.typed import Unsupported

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
    even = b.icmp_unsigned("==", b.and_(raw(b, s), raw_const(s, 1)), raw_const(s, 0))
    fix = b.and_(b.and_(fcmp_u(b, "!=", err, fconst(err, 0.0)), isfinite(b, err)), even)
    toward = b.select(fcmp_o(b, ">", err, fconst(err, 0.0)), nextafter(b, s, 1), nextafter(b, s, -1))
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
    zero = lambda v: fcmp_o(b, "==", v, fconst(v, 0.0))  # noqa: E731
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
    zero = fconst(w, 0.0)
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
    plus0 = lambda v: b.and_(fcmp_o(b, "==", v, fconst(v, 0.0)), b.not_(signbit(b, v)))  # noqa: E731
    neg_zero_out = b.and_(fcmp_o(b, "==", out, fconst(out, 0.0)), signbit(b, out))
    change = b.and_(fcmp_o(b, "==", w, fconst(w, 0.0)), b.not_(neg_zero_out))
    change = b.and_(b.and_(change, b.not_(b.and_(plus0(x), plus0(y)))), splat(b, down, lanes(out)))
    return b.select(change, fconst(out, -0.0), out)


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
        return fcmp_u(b, "!=", a[0], fconst(a[0], 0.0))
    if name == "neg":
        return unraw(b, b.xor(raw(b, a[0]), raw_const(a[0], 1 << (fbits(a[0].type) - 1))), elem(a[0].type))
    if name == "fabs":
        return fabs(b, a[0])
    if name == "signbit":
        return signbit(b, a[0])
    if name == "isnan":
        return isnan(b, a[0])
    if name == "isinf":
        return isinf(b, a[0])
    if name in ("issnan", "isqnan", "quiet", "exponent", "isdenorm"):
        return fclass(b, name, a[0], e.args[0].ty)
    if name == "bitcast":
        return bitcast(b, a[0], e.args[0].ty, t)
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
        return _in_f64(b, lambda d: b.fdiv(fconst(d, 1.0), intrinsic(b, "llvm.sqrt", d.type, [d])), a[0])
    if name == "log2":  # below zero the hardware's default +NaN (as floats.log2), where libm's gives -NaN
        return _in_f64(b, lambda d: b.select(fcmp_o(b, "<", d, fconst(d, 0.0)),
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
        r = libm(b, "fmod", d, fconst(d, 2.0))
        return b.and_(isfinite(b, d), fcmp_o(b, "==", r, fconst(r, 0.0)))
    raise Unsupported(f"float op {name} ({t})")


def _zero(x) -> bool:
    return getattr(x, "value", None) == 0 and type(x).__name__ == "Const"
