"""Typed expressions of the IR: the pseudocode's types and its implicit conversions, made explicit.

`x.T` reinterprets bits (`reinterpret`), implicit C-like conversions are `convert`, the two operands of a binary
operator meet in their common type (`unify`; + - * / promote to at least 32 bits, mixed int/float goes to float,
unsized literals take their partner's type) and `binary` builds the typed operation.
"""
from __future__ import annotations

import operator
import re

from emu.pcode.ir import BOOL, I32, U32, Const, Expr, Op, Ty, uint


class Unsupported(Exception):
    """The instruction's semantics cannot be compiled; the message says why."""


LIT = Ty("int", 0)  # an unsized integer literal: takes its partner's type
FLIT = Ty("flt", 0)  # an unsuffixed float literal
_TYPE = re.compile(r"^(bf|[uibf])(\d+)$")
_MINI = {"fp8": 8, "bf8": 8, "fp6": 6, "bf6": 6, "fp4": 4, "fp8fnuz": 8, "bf8fnuz": 8}
def type_name(name: str) -> Ty | None:
    """Ty of a typed-access suffix ('u32', 'b64', 'f16', 'bf16', 'i24'), None for other names."""
    if name in _MINI:
        return Ty(name, _MINI[name])
    m = _TYPE.match(name)
    if not m:
        return None
    kind, bits = m.group(1), int(m.group(2))
    if kind in ("f", "bf") and bits not in ((16, 32, 64) if kind == "f" else (16,)):
        return None
    return Ty("u" if kind == "b" else kind, bits)


def mask(bits: int) -> int:
    return (1 << bits) - 1


def concrete_type(t: Ty) -> Ty:
    if t.kind == "int":
        return Ty("i", max(t.bits, 32))
    if t.kind == "flt":
        return Ty("f", 64)
    return t


def concrete(x: Expr) -> Expr:
    return convert(x, concrete_type(x.ty)) if x.ty.kind in ("int", "flt") else x


def lnot(x: Expr) -> Expr:
    if isinstance(x, Const):
        return Const(not x.value, BOOL)
    return Op("lnot", (x,), BOOL)


def to_bool(x: Expr) -> Expr:
    if x.ty.kind == "bool":
        return x
    if isinstance(x, Const):
        return Const(bool(x.value), BOOL)
    return Op("tobool", (x,), BOOL)


def extract(x: Expr, lo: Expr, width: int) -> Expr:
    x = concrete(x)
    if x.ty.kind == "bool":
        x = convert(x, uint(1))
    return Op("extract", (x, lo), uint(width), width)


def bitcast_to_int(x: Expr) -> Expr:
    if x.ty.is_float:
        return Op("bitcast", (x,), uint(x.ty.bits))
    if x.ty.kind == "flt":
        return bitcast_to_int(convert(x, Ty("f", 64)))
    return x


def convert_bits(x: Expr, t: Ty) -> Expr:
    """Raw-bit resize (no value conversion) of an integer or bool to t."""
    if x.ty == t:
        return x
    if x.ty.kind == "bool":
        return Op("frombool", (x,), t)
    if x.ty.kind == "int":
        return Const(x.value & mask(t.bits), t)
    return Op("resize", (x,), t)


def reinterpret(x: Expr, t: Ty) -> Expr:
    """x.T: the bits of x read as type t (narrowed or extended by x's own signedness)."""
    if x.ty == t:
        return x
    x = bitcast_to_int(x)
    if x.ty.kind == "int":
        return convert(x, t) if not t.is_float else Op("bitcast", (Const(x.value & mask(t.bits), uint(t.bits)),), t)
    if t.is_float:
        return Op("bitcast", (convert_bits(x, uint(t.bits)),), t)
    return convert_bits(x, t) if x.ty.kind == "bool" else Op("resize", (x,), t) if x.ty != t else x


def convert(x: Expr, t: Ty) -> Expr:
    """Implicit (value-preserving, C-like) conversion of x to t."""
    s = x.ty
    if s == t:
        return x
    if s.kind == "int":
        if t.is_float:
            return Const(float(x.value), t)
        if t.kind == "bool":
            return Const(bool(x.value), BOOL)
        return Const(x.value & mask(t.bits), t)
    if s.kind == "flt":
        if t.is_float:
            return Const(x.value, t)
        if t.kind == "bool":
            return Const(bool(x.value), BOOL)
        return convert(Const(x.value, Ty("f", 64)), t)
    if t.kind == "bool":
        return to_bool(x)
    if s.kind == "bool":
        return Op("frombool", (x,), t) if t.is_int else Op("itof", (Op("frombool", (x,), U32),), t)
    if s.is_int and t.is_int:
        return Op("resize", (x,), t)
    if s.is_int and t.is_float:
        return Op("itof", (x,), t)
    if s.is_float and t.is_float:
        return Op("fconv", (x,), t)
    return Op("ftoi", (x,), t)


def promote(x: Expr) -> Expr:
    if x.ty.is_int and x.ty.bits < 32:
        return convert(x, Ty(x.ty.kind, 32))
    return x


def unify(a: Expr, b: Expr) -> tuple[Expr, Expr]:
    """Both operands converted to their common type."""
    ta, tb = a.ty, b.ty
    if ta == tb:
        return a, b
    lits = ("int", "flt")
    if ta.kind in lits and tb.kind in lits:
        if "flt" in (ta.kind, tb.kind):
            return Const(float(a.value), FLIT), Const(float(b.value), FLIT)
        return Const(a.value, LIT), Const(b.value, LIT)
    if ta.kind in lits:
        if tb.kind == "bool" and ta.kind == "int":
            return convert(a, BOOL if a.value in (0, 1) else I32), (b if a.value in (0, 1) else convert(b, I32))
        return convert(a, tb if not (ta.kind == "flt" and tb.is_int) else Ty("f", 64)), \
            b if not (ta.kind == "flt" and tb.is_int) else convert(b, Ty("f", 64))
    if tb.kind in lits:
        b2, a2 = unify(b, a)
        return a2, b2
    if ta.kind == "bool" or tb.kind == "bool":
        if ta.kind == tb.kind:
            return a, b
        t = tb if ta.kind == "bool" else ta
        return convert(a, t), convert(b, t)
    if ta.is_float or tb.is_float:
        if ta.is_float and tb.is_float:
            t = ta if ta.bits > tb.bits or (ta.bits == tb.bits and ta.kind == "f") else tb
        else:
            t = ta if ta.is_float else tb
        return convert(a, t), convert(b, t)
    bits = max(ta.bits, tb.bits)
    if ta.kind == tb.kind:
        kind = ta.kind
    else:  # mixed signedness: the wider operand's signedness wins, unsigned on a tie
        wider = ta if ta.bits > tb.bits else tb if tb.bits > ta.bits else None
        kind = wider.kind if wider else "u"
    t = Ty(kind, bits)
    return convert(a, t), convert(b, t)


_ARITH = {"+": "add", "-": "sub", "*": "mul", "/": "div", "%": "mod"}
_BITOP = {"&": "and", "|": "or", "^": "xor"}
_CMP = {"==": "eq", "!=": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}


_FOLD = {"==": operator.eq, "!=": operator.ne, "<>": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
         ">=": operator.ge, "+": operator.add, "-": operator.sub, "*": operator.mul, "&": operator.and_,
         "|": operator.or_, "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift, "**": operator.pow}


def _fold(op: str, a, b):
    """Value of an operation on two literals (C semantics)."""
    if op == "/":
        return a / b if isinstance(a, float) or isinstance(b, float) else int(a / b)
    if op == "%":
        return a % b if b else 0
    if op in ("&", "|", "^", "<<", ">>") and (isinstance(a, float) or isinstance(b, float)):
        raise Unsupported(f"bitwise {op} of float literals")
    return _FOLD[op](a, b)


def binary(op: str, a: Expr, b: Expr) -> Expr:
    lits = ("int", "flt")
    if isinstance(a, Const) and isinstance(b, Const) and a.ty.kind in lits and b.ty.kind in lits:
        v = _fold(op, a.value, b.value)
        return Const(v, BOOL if isinstance(v, bool) else FLIT if isinstance(v, float) else LIT)
    if op == "*":  # x * 2.0 ** n is exact: ldexp(x, n), without evaluating 2 ** n on its own
        for x, y in ((a, b), (b, a)):
            if isinstance(y, Op) and y.op == "ldexp" and isinstance(y.args[0], Const) and y.args[0].value == 1.0:
                x = convert(concrete(x), y.ty) if not (concrete(x).ty.is_float and concrete(x).ty.bits > y.ty.bits) \
                    else concrete(x)
                return Op("ldexp", (x, y.args[1]), x.ty)
    if op == "/" and isinstance(a, Const) and a.ty.kind in ("flt", "f") and a.value == 1.0 \
            and isinstance(b, Op) and b.op == "sqrt":  # 1.0 / sqrt(x): one rounding
        return Op("rsq", b.args, b.ty)
    if op in ("&&", "||"):
        return Op("land" if op == "&&" else "lor", (to_bool(a), to_bool(b)), BOOL)
    if op in ("<<", ">>"):
        a = concrete(a)
        if a.ty.kind == "bool":
            a = convert(a, U32)
        if a.ty.is_float:
            raise Unsupported("shift of a float")
        return Op("shl" if op == "<<" else "shr", (a, convert(concrete(b), U32)), a.ty)
    if op == "**":
        a = concrete(a)
        if not a.ty.is_float:
            raise Unsupported("integer power")
        if isinstance(a, Const) and a.value == 2.0:
            return Op("ldexp", (Const(1.0, a.ty), convert(concrete(b), I32)), a.ty)
        return Op("pow", (a, convert(b, a.ty)), a.ty)
    a, b = unify(a, b)
    a, b = concrete(a), concrete(b)
    if op == "<>":  # less or greater: for floats False when either is NaN
        if a.ty.is_float:
            return Op("lor", (Op("lt", (a, b), BOOL), Op("gt", (a, b), BOOL)), BOOL)
        op = "!="
    if op in _CMP:
        return Op(_CMP[op], (a, b), BOOL)
    if op in _BITOP:
        if a.ty.is_float:
            raise Unsupported(f"bitwise {op} of floats")
        return Op(_BITOP[op], (a, b), a.ty)
    if op in _ARITH:
        if a.ty.kind == "bool":
            a, b = convert(a, U32), convert(b, U32)
        a, b = promote(a), promote(b)
        return Op(_ARITH[op], (a, b), a.ty)
    raise Unsupported(f"operator {op}")
