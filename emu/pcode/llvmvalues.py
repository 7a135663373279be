"""LLVM values of the LLVM backend (emu.pcode.llvmback): the types of IR values, constants, scalars splat over
vector lanes, intrinsics, integer resizing, entry-block allocas."""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from emu.pcode.ir import Ty
from emu.pcode.typed import Unsupported

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


def raw_const(x: ir.Value, value: int) -> ir.Constant:
    """Integer constant shaped like float (or int) value x's raw bits."""
    t = elem(x.type)
    return const(ITY.get(t, t), value, lanes(x))


def fconst(x: ir.Value, v: float) -> ir.Constant:
    """Float constant v in the format of float value x (over its lanes)."""
    ft = elem(x.type)
    return const(ft, int(np.array(v, {HALF: np.float16, FLOAT: np.float32, DOUBLE: np.float64}[ft])
                         .view({HALF: np.uint16, FLOAT: np.uint32, DOUBLE: np.uint64}[ft])), lanes(x))


def ext(b: ir.IRBuilder, x: ir.Value, ft: ir.Type) -> ir.Value:
    """Exact widening (or nothing)."""
    return x if elem(x.type) == ft else b.fpext(x, like(ft, lanes(x)))
